/* SPDX-License-Identifier: MIT */
/* progress.h - the terminal and file side of the example trainers: a
 * progress bar, a metrics CSV, a loss-curve picture, a wall clock and a
 * small seeded PRNG. Nothing here touches fucina; the trainers stay about
 * the model.
 *
 * Progress bar. On a terminal (isatty(stdout)) one line is redrawn in place
 * with a carriage return: a bar, the step, the loss, items per second and
 * the time left. When stdout is a pipe or a file, plain lines are printed
 * every `every` steps instead, so logs stay readable. Notes (validation
 * losses, samples) are printed on their own lines above the bar.
 *
 * Plot. ex_plot_png runs gnuplot (found on PATH) through popen to turn the
 * CSV into a PNG; when gnuplot is absent it prints a note and returns false:
 * the CSV is the record, the picture a convenience. */
#ifndef EX_PROGRESS_H
#define EX_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* ---- wall clock ------------------------------------------------------------------ */

/* Seconds on a monotonic clock (only differences mean anything). */
double ex_now(void);

/* ---- progress bar ----------------------------------------------------------------- */

typedef struct ex_progress {
    int64_t total_steps; /* steps planned (for the bar and the ETA) */
    double budget_s;     /* wall-clock budget, 0 for none (the ETA honours it) */
    const char *unit;    /* what items/s counts: "tok", "img" */
    int every;           /* plain-line period when stdout is not a terminal */
    bool tty;
    int64_t first_step; /* last step finished before this run (for the ETA) */
    double before_s;    /* seconds the run took before this process (a resume's) */
    double t_start;     /* when ex_progress_start ran */
    double t_last;      /* when the bar was last drawn */
    bool bar_visible;   /* a partial line is on screen */
} ex_progress;

/* Starts the clock. every < 1 is taken as 1. */
void ex_progress_start(ex_progress *p, int64_t total_steps, double budget_s, const char *unit,
                       int every);
/* Reports that step (1-based) finished with loss, items_per_s measured over
 * recent steps. Redraws at most ten times a second on a terminal. */
void ex_progress_update(ex_progress *p, int64_t step, double loss, double items_per_s);
/* Prints a whole line (printf format) above the bar. */
void ex_progress_note(ex_progress *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Ends the bar's line. */
void ex_progress_finish(ex_progress *p);
/* Seconds since ex_progress_start: this process's share (the budget's). */
double ex_progress_elapsed(const ex_progress *p);
/* The run's seconds in all: before_s (set by a resume from its checkpoint,
 * 0 otherwise) plus ex_progress_elapsed; metrics.csv's elapsed_s. */
double ex_progress_total(const ex_progress *p);

/* ---- output directory ------------------------------------------------------------------ */

/* Creates dir and its missing parents (like mkdir -p). Returns false and
 * prints why on failure. */
bool ex_mkdir_p(const char *dir);

/* ---- metrics CSV -------------------------------------------------------------------- */

/* Opens path for writing (append when append is true and the file exists)
 * and writes header when the file is new. Returns NULL and prints why on
 * failure. */
FILE *ex_csv_open(const char *path, const char *header, bool append);
/* For a run resumed at step `through`: keeps path's header and its rows
 * whose first field (the step) is at most through, drops the rest (rows
 * a run wrote past its last checkpoint, which the resumed run writes
 * again), and opens it for appending; a missing or empty file is started
 * with header. *last (NULL allowed) gets the step of the last row kept, -1
 * for none: the resumed run writes a row for `through` only when it is
 * missing (a run that died after its checkpoint had not written it). So
 * each step has one row however often the run stopped. Returns NULL and
 * prints why on failure. */
FILE *ex_csv_resume(const char *path, const char *header, int64_t through, int64_t *last);

/* ---- plot ----------------------------------------------------------------------------- */

/* One curve: a CSV column (1-based) against column xcol, with a title;
 * sparse columns (a value every few hundred rows) are drawn with points. */
typedef struct ex_curve {
    int ycol;
    const char *title;
    bool sparse;
} ex_curve;

/* Writes png from csv (comma separated, one header line) with gnuplot:
 * each curve's column against xcol, log-free linear axes, missing values
 * (empty fields) skipped. Returns true when the picture was written; false
 * with a note on stderr when gnuplot is not on PATH or failed. */
bool ex_plot_png(const char *csv, const char *png, const char *title, const char *xlabel,
                 const char *ylabel, int xcol, const ex_curve *curves, int ncurves);

/* ---- PRNG ------------------------------------------------------------------------------- */

/* splitmix64: a tiny seeded generator for data order and sampling, kept
 * apart from the context RNG so that evaluation and sampling never shift
 * the stream the model's randomness comes from. The state is one integer,
 * so a checkpoint stores it as metadata. */
uint64_t ex_rand_u64(uint64_t *state);
/* Uniform in [0, 1) with 53 random bits. */
double ex_rand_unit(uint64_t *state);
/* Uniform integer in [0, n) (n >= 1), without modulo bias. */
uint64_t ex_rand_below(uint64_t *state, uint64_t n);

#endif /* EX_PROGRESS_H */
