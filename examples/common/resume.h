/* SPDX-License-Identifier: MIT */
/* resume.h - what the trainers' --resume shares beyond their checkpoint
 * files: the schedule a resumed run must keep, the elapsed time it carries
 * on, and the answer to resuming a run that is already complete.
 *
 * The schedule. A checkpoint stores the cosine schedule the run was asked
 * for (--steps, --warmup, --lr, --min-lr) as one text, "<prog>.schedule".
 * A resume that asks for another is refused, naming both and the jump of
 * the learning rate it would cause: the rate at a step depends on the
 * schedule's length, so a resume with another --steps would not continue
 * the run but splice two runs together. (To train longer, start a new run,
 * or plan the longer --steps from the start and stop early with
 * --stop-after.) A checkpoint written before these keys has none and is
 * resumed as before.
 *
 * Elapsed time. "<prog>.elapsed_ms" holds the run's seconds so far, which
 * the resumed run's progress (ex_progress.before_s) starts from, so that
 * metrics.csv's elapsed_s goes on rising across a resume. */
#ifndef EX_RESUME_H
#define EX_RESUME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <fucina.h>

/* The text of schedule s as a checkpoint keeps it:
 * "--steps 30 --warmup 5 --lr 0.003 --min-lr 0.0001" (the options that
 * give it). Writes at most cap bytes, NUL-terminated. */
void ex_schedule_text(const fc_lr_schedule *s, char *buf, size_t cap);

/* Text from ex_schedule_text -> s's total_steps, warmup_steps, base_lr and
 * min_lr (its other fields untouched); false (s untouched) for NULL or any
 * other text. A checkpoint keeps the schedule as a time budget shortened it
 * ("<prog>.schedule_now") this way, so a resume continues that one. */
bool ex_schedule_parse(const char *text, fc_lr_schedule *s);

/* True when a run resumed at step from checkpoint path may go on with
 * schedule asked: saved (the checkpoint's ex_schedule_text) is NULL (an
 * older checkpoint) or the same text. Otherwise prints, naming prog, both
 * schedules and the learning rates at step under each, and returns false. */
bool ex_schedule_check(const char *prog, const char *path, const char *saved,
                       const fc_lr_schedule *asked, int64_t step);

/* The checkpoint's "<prog>.elapsed_ms" text -> seconds; 0 for NULL or a
 * text that is not a number (an older checkpoint). */
double ex_elapsed_from_text(const char *s);

/* True when a run resumed at step has nothing left to do: step has reached
 * planned (where the schedule ends) or stop_after (> 0). Then prints that
 * the run in out is already complete and then what the caller does
 * instead ("nothing to do"), and the caller goes on without evaluating,
 * stepping or writing a row, and exits 0. */
bool ex_run_complete(const char *prog, const char *out, int64_t step, int64_t planned,
                     int64_t stop_after, const char *then);

#endif /* EX_RESUME_H */
