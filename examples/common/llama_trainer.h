/* SPDX-License-Identifier: MIT */
/* llama_trainer.h - the training loop the Llama trainers share:
 * examples/train_llama (every weight of a model made from scratch) and
 * examples/finetune_llama (the LoRA adapter of a frozen GGUF model). Both
 * train "some tensors of an fc_llama" on token data (token_data.h), so
 * everything but the choice of those tensors lives here: the AdamW step
 * with a warm-up + cosine schedule and gradient clipping, evaluation on
 * the held-out split, samples from a prompt, the metrics CSV and its
 * picture, the time budget, and checkpoints with --resume.
 *
 * Checkpoints (fucina/checkpoint.h): the trained tensors under the names
 * the caller gives, the AdamW state and the context RNG, plus metadata
 * "<prog>.step", "<prog>.data_rng" (restored on resume) and
 * "<prog>.tokens_hash" and the caller's keys (ex_trainer.match_*), which a
 * resumed run must match, and the texts of common/resume.h: the elapsed
 * time (carried on), the schedule asked for (which a resume must ask for
 * too: another --steps, --warmup, --lr or --min-lr is refused, exit 2) and
 * the schedule as a time budget left it (continued). A resumed run
 * therefore continues bit-identically: same batches, same dropout draws,
 * same optimizer state, same learning rates; metrics.csv keeps one row per
 * step (the rows past the checkpoint are dropped, then written again).
 * Resuming a run that is already complete takes no step and writes no row
 * (ex_trainer.complete). Ctrl-C ends the loop after the current step;
 * ex_trainer_exit_code then makes the exit 130.
 *
 * Randomness the model does not see: the data order and the samples use
 * their own splitmix64 streams (progress.h), seeded from --seed, so that
 * evaluating or sampling never shifts the context RNG.
 *
 * Every function prints its failures (naming o.prog) and returns false or
 * a status; the context's error is in the message. */
#ifndef EX_LLAMA_TRAINER_H
#define EX_LLAMA_TRAINER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <fucina.h>

#include "args.h"
#include "fucina/llama.h"
#include "fucina/tokenizer.h"
#include "progress.h"
#include "token_data.h"

/* The options of the loop (the trainer's command line fills them). */
typedef struct ex_trainer_opts {
    const char *prog; /* program name: messages and checkpoint keys */
    const char *sample_prompt;
    int64_t block, batch, steps, stop_after, warmup, eval_every, sample_every, sample_len;
    int64_t ckpt_every, seed;
    double minutes, lr, min_lr, weight_decay, clip, temperature;
} ex_trainer_opts;

/* The loop's command-line options, for a trainer's own table: --batch,
 * --steps, --stop-after, --minutes, --lr, --min-lr, --warmup,
 * --weight-decay, --clip, --eval-every, --sample-every, --sample-len,
 * --sample-prompt, --temperature and --ckpt-every, written into o. (The
 * trainer declares --block and --seed itself: their meaning is its own.)
 * Each row carries its range (args.h), so the parser rejects a bad value
 * naming the option. Fills args[0, EX_TRAINER_NARGS) and returns
 * EX_TRAINER_NARGS. */
enum { EX_TRAINER_NARGS = 15 };
int ex_trainer_args(ex_trainer_opts *o, ex_arg *args);

enum { EX_TRAINER_MAX_MATCH = 12 };

typedef struct ex_trainer {
    ex_trainer_opts o;
    /* borrowed from the caller, who sets them before ex_trainer_init */
    fc_ctx *ctx;
    fc_llama *model;
    const fc_tokenizer *tok;
    ex_tokens *data;
    int nparams;
    fc_tensor **params; /* the trained tensors */
    const char **names; /* their checkpoint names */
    /* values a resumed run must match, beside the token stream's hash */
    const char *match_keys[EX_TRAINER_MAX_MATCH];
    uint64_t match_vals[EX_TRAINER_MAX_MATCH];
    int nmatch;
    char ckpt_path[4096], csv_path[4096], png_path[4096];

    /* owned, made by ex_trainer_init */
    fc_optim *opt;
    fc_lr_schedule sched;
    fc_tensor *idx, *tgt; /* the step's batch, (B,T) and (B*T) i64 */
    uint64_t data_rng, sample_rng;
    int64_t step, planned;
    fc_lr_schedule asked; /* the options' schedule, before a budget shortens it */
    FILE *csv;
    struct ex_trainer_row {
        int64_t step; /* -1: none pending */
        double lr, loss, val, gnorm, tps, elapsed;
    } row;            /* the latest row, held so a later evaluation fills it */
    bool resumed;     /* ex_trainer_init loaded the checkpoint */
    int64_t csv_last; /* then: the step of metrics.csv's last row kept */
    bool complete;    /* resumed at the end: nothing to train (ex_trainer_init says so) */
    bool interrupted; /* the loop ended on *stop (Ctrl-C) */
    int exit_code;    /* after ex_trainer_init failed: 2 for options the checkpoint refuses */
    double before_s;  /* the run's seconds before this process */
    ex_progress bar;
    double train_last, val_first, val_last, val_best;
    int64_t val_step, best_step;
    double *step_ms;
    int64_t nsteps_run;
} ex_trainer;

/* Makes the optimizer over params, the batch tensors and the schedule, and
 * derives the data and sample streams from o.seed; creates the directory
 * of the paths first (out_dir). With resume, loads ckpt_path (checking the
 * matched values and the schedule; exit_code 2 when it refuses) and says
 * so, or sets complete (and says so, then_complete after it) when the run
 * has nothing left to do. Opens the CSV (on resume, kept up to the
 * checkpoint's step; not at all when complete). */
bool ex_trainer_init(ex_trainer *t, const char *out_dir, bool resume, const char *then_complete);
/* Releases what ex_trainer_init made (not the borrowed fields). */
void ex_trainer_free(ex_trainer *t);

/* Mean cross-entropy of the model on idx (B,T) against targets (B*T), a
 * new reference (or NULL with the error in ctx). */
fc_tensor *ex_trainer_loss(fc_ctx *ctx, fc_llama *m, fc_tensor *idx, fc_tensor *targets);
/* Mean loss over every validation window of d, B at a time, without
 * grad; NAN on error. */
double ex_trainer_eval_loss(fc_ctx *ctx, fc_llama *m, const ex_tokens *d, int64_t T, int64_t B);
/* Evaluates now: updates val_first/last/best, notes it above the bar. */
bool ex_trainer_evaluate(ex_trainer *t);

/* o.sample_prompt (encoded with BOS when the tokenizer asks) continued by
 * up to o.sample_len tokens, stopping at EOS; malloc'd, or NULL with the
 * error in ctx. */
char *ex_trainer_sample(ex_trainer *t, double temperature, uint64_t seed);

/* The CSV row of step t->step (NAN fields left empty): held until the next
 * row, the report or ex_trainer_free, so that a second call for the same step
 * fills the held row's val_loss (when val is not NAN) instead of adding a
 * row. */
void ex_trainer_csv_row(ex_trainer *t, double lr, double loss, double val, double gnorm,
                        double tps);

/* The first evaluation (and its CSV row, unless resumed and the CSV has
 * the checkpoint's step), then steps until the schedule, --stop-after, the
 * budget or *stop ends it, evaluating, sampling and checkpointing on their
 * periods. Does nothing when complete. False on an error (printed). */
bool ex_trainer_train(ex_trainer *t, volatile sig_atomic_t *stop);
/* After the loop: a last evaluation when the last step had none, the
 * final sample (also written to sample_path when it is not NULL), the
 * checkpoint. */
bool ex_trainer_finish(ex_trainer *t, const char *sample_path);
/* The picture of the CSV (closing it) and the summary lines: "done: ...",
 * "val loss: A -> B ...", "final: step N train_loss X val_loss Y". */
void ex_trainer_report(ex_trainer *t, const char *title);

fc_status ex_trainer_save(ex_trainer *t);

/* The exit code of a run whose finish gave rc: 130 (128 + SIGINT, after
 * saying so) when rc is 0 and the loop ended on Ctrl-C, so a script can
 * tell a stopped run from a finished one; rc otherwise. */
int ex_trainer_exit_code(const ex_trainer *t, int rc);

#endif /* EX_LLAMA_TRAINER_H */
