/* SPDX-License-Identifier: MIT */
/* resume.c - the schedule check, elapsed time and "already complete" of
 * the trainers' --resume (see resume.h). The schedule's text is printed
 * with 9 significant digits, enough to tell apart any two rates a user
 * would type, and compared as text, so no float parsing decides equality. */
#include "resume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ex_schedule_text(const fc_lr_schedule *s, char *buf, size_t cap) {
    snprintf(buf, cap, "--steps %lld --warmup %lld --lr %.9g --min-lr %.9g",
             (long long)s->total_steps, (long long)s->warmup_steps, s->base_lr, s->min_lr);
}

bool ex_schedule_parse(const char *text, fc_lr_schedule *s) {
    long long steps = 0, warmup = 0;
    double lr = 0, min_lr = 0;
    int used = 0;
    if (!text ||
        sscanf(text, "--steps %lld --warmup %lld --lr %lf --min-lr %lf%n", &steps, &warmup, &lr,
               &min_lr, &used) != 4 ||
        text[used] != '\0')
        return false;
    s->total_steps = steps;
    s->warmup_steps = warmup;
    s->base_lr = lr;
    s->min_lr = min_lr;
    return true;
}

bool ex_schedule_check(const char *prog, const char *path, const char *saved,
                       const fc_lr_schedule *asked, int64_t step) {
    char want[160];
    ex_schedule_text(asked, want, sizeof want);
    if (!saved || strcmp(saved, want) == 0) return true;
    fc_lr_schedule old = *asked;
    bool parsed = ex_schedule_parse(saved, &old);
    fprintf(stderr,
            "%s: cannot resume %s with another schedule: it was made with\n"
            "    %s\n  and this run asks for\n    %s\n",
            prog, path, saved, want);
    if (parsed)
        fprintf(stderr, "  which would move the learning rate at step %lld from %.3g to %.3g.\n",
                (long long)step, fc_lr_at(&old, step), fc_lr_at(asked, step));
    fprintf(stderr, "  Resume with the checkpoint's options, or start a new run in another --out "
                    "(to train longer, plan the longer --steps and stop early with "
                    "--stop-after).\n");
    return false;
}

double ex_elapsed_from_text(const char *s) {
    if (!s || !*s) return 0;
    char *end = NULL;
    unsigned long long ms = strtoull(s, &end, 10);
    return *end ? 0 : (double)ms * 1e-3;
}

bool ex_run_complete(const char *prog, const char *out, int64_t step, int64_t planned,
                     int64_t stop_after, const char *then) {
    if (step >= planned)
        printf("%s: the run in %s is already complete (step %lld of %lld): %s\n", prog, out,
               (long long)step, (long long)planned, then);
    else if (stop_after > 0 && step >= stop_after)
        printf("%s: the run in %s is already at --stop-after %lld (step %lld of %lld): %s\n", prog,
               out, (long long)stop_after, (long long)step, (long long)planned, then);
    else
        return false;
    return true;
}
