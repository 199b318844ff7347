/* SPDX-License-Identifier: MIT */
/* The products-against-total split of a training step (bench_split.h).
 *
 * The profiler's forward events are inclusive (an op built from other ops
 * spans them), so time is never summed over events: each class of events
 * becomes a set of [start, end) intervals whose union is measured. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "bench_split.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct span {
    int64_t a, b;
} span;

static int by_start(const void *x, const void *y) {
    const span *p = x, *q = y;
    return (p->a > q->a) - (p->a < q->a);
}

/* the length of the union of n intervals (sorted in place) */
static int64_t union_ns(span *s, int64_t n) {
    if (n == 0) return 0;
    qsort(s, (size_t)n, sizeof *s, by_start);
    int64_t total = 0, a = s[0].a, b = s[0].b;
    for (int64_t i = 1; i < n; i++) {
        if (s[i].a > b) {
            total += b - a;
            a = s[i].a;
            b = s[i].b;
        } else if (s[i].b > b) {
            b = s[i].b;
        }
    }
    return total + (b - a);
}

static bool is_attention(const char *name) { return strstr(name, "attention") != NULL; }

typedef struct op_time {
    char name[48];
    int64_t ns;
} op_time;

static int by_time_desc(const void *x, const void *y) {
    const op_time *p = x, *q = y;
    return (p->ns < q->ns) - (p->ns > q->ns);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

fc_status bench_step_split(fc_ctx *ctx, bench_fn step, void *arg, int steps, FILE *out) {
    fc_status st = fc_profile_begin(ctx, &(fc_profile_opts){.max_events = 1 << 20});
    if (st != FC_OK) return st;
    double t0 = now_s();
    for (int i = 0; i < steps; i++)
        step(arg);
    double wall_s = now_s() - t0;
    st = fc_profile_end(ctx);
    if (st != FC_OK) return st;
    int64_t n = fc_profile_event_count(ctx);
    span *prod = malloc(((size_t)n + 1) * sizeof *prod);
    span *att = malloc(((size_t)n + 1) * sizeof *att);
    op_time *ops = calloc((size_t)n + 1, sizeof *ops);
    if (!prod || !att || !ops) {
        free(prod), free(att), free(ops);
        return FC_ERR_OOM;
    }
    int64_t np = 0, na = 0, nops = 0;
    for (int64_t i = 0; i < n; i++) {
        fc_profile_event e;
        if (fc_profile_get_event(ctx, i, &e) != FC_OK) continue;
        span s = {e.start_ns, e.start_ns + e.dur_ns};
        if (e.flops > 0) {
            prod[np++] = s;
            continue;
        }
        if (is_attention(e.name)) att[na++] = s;
        int64_t k = 0; /* per-name time of the events outside products */
        while (k < nops && strcmp(ops[k].name, e.name) != 0)
            k++;
        if (k == nops) memcpy(ops[nops++].name, e.name, sizeof e.name);
        ops[k].ns += e.dur_ns;
    }
    double step_ms = 1e3 * wall_s / steps;
    double prod_ms = 1e-6 * (double)union_ns(prod, np) / steps;
    double att_ms = 1e-6 * (double)union_ns(att, na) / steps;
    qsort(ops, (size_t)nops, sizeof *ops, by_time_desc);
    fprintf(out,
            ", \"step_split\": {\"steps\": %d, \"events\": %lld, \"dropped\": %lld, "
            "\"step_ms\": %.4f, \"products_ms\": %.4f, \"attention_ms\": %.4f, "
            "\"outside_products_share\": %.4f, \"outside_products_and_attention_share\": %.4f, "
            "\"top_outside_ms\": {",
            steps, (long long)n, (long long)fc_profile_dropped_count(ctx), step_ms, prod_ms, att_ms,
            1.0 - prod_ms / step_ms, 1.0 - (prod_ms + att_ms) / step_ms);
    for (int64_t k = 0; k < nops && k < 5; k++)
        fprintf(out, "%s\"%s\": %.4f", k ? ", " : "", ops[k].name, 1e-6 * (double)ops[k].ns / steps);
    fprintf(out, "}}");
    free(prod), free(att), free(ops);
    return FC_OK;
}
