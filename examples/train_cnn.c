/* SPDX-License-Identifier: MIT */
/* train_cnn.c - a Fashion-MNIST convolutional network trained with fucina's
 * public API.
 *
 * The model is the two-convolution network of the data set's benchmark
 * table (and of the peer ../shared/peers/conv_train.py):
 *   conv 5x5 1->32, padding 2 -> ReLU -> max-pool 2
 *   conv 5x5 32->64, padding 2 -> ReLU -> max-pool 2 -> linear 3136->10
 * with PyTorch's default initialisation, softmax cross-entropy and Adam
 * (cosine-decayed learning rate). --batch-norm puts a batch norm after each
 * convolution. The data come from Debian's dataset-fashion-mnist package
 * (common/fashion_mnist.c); each step refills one persistent batch tensor
 * inside a scope, so the steady state allocates nothing outside the
 * context's pool.
 *
 * Output in --out: metrics.csv, loss.png (when gnuplot is installed) and
 * ckpt.safetensors, the checkpoint --resume continues from exactly (the
 * parameters, batch-norm statistics, Adam state, RNG and data order).
 *
 * Under mpirun (a build with FUCINA_WITH_MPI) the ranks split every batch
 * and average the gradients (common/dist.h); --batch is per rank. With
 * --batch-norm each rank normalises over its own slice and keeps its own
 * running statistics (PyTorch DDP without SyncBatchNorm); rank 0's are
 * the ones saved.
 * --help lists the options. Exit status 77 means the data set is missing.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fucina.h>

#include "common/args.h"
#include "common/dist.h"
#include "common/fashion_mnist.h"
#include "common/progress.h"
#include "common/resume.h"

enum { EXIT_SKIP = 77, SIDE = 28 };

// ----------------------------------------------------------------------------
// the model

/* Parameters, then the batch-norm running statistics (not trained: they
 * travel in the checkpoint beside the parameters). */
enum { C1W, C1B, C2W, C2B, FCW, FCB, BN1W, BN1B, BN2W, BN2B, NPARAMS };
enum { BN1M, BN1V, BN2M, BN2V, NSTATS };
static const char *const PARAM_NAMES[NPARAMS] = {
    "conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc.weight",
    "fc.bias",      "bn1.weight", "bn1.bias",     "bn2.weight", "bn2.bias"};
static const char *const STAT_NAMES[NSTATS] = {"bn1.running_mean", "bn1.running_var",
                                               "bn2.running_mean", "bn2.running_var"};

typedef struct cnn {
    bool batch_norm;
    int nparams; /* 6 without batch norm, NPARAMS with */
    fc_tensor *p[NPARAMS];
    fc_tensor *stats[NSTATS];
} cnn;

/* conv -> (batch norm) -> ReLU -> max-pool 2 */
static fc_tensor *conv_block(fc_ctx *ctx, const cnn *m, fc_tensor *x, int w, int bn, int stats,
                             bool training) {
    fc_conv2d_opts co = fc_conv2d_opts_default();
    co.padding[0] = co.padding[1] = 2;
    fc_tensor *h = fc_conv2d(ctx, x, m->p[w], m->p[w + 1], &co);
    if (m->batch_norm)
        h = fc_batch_norm(ctx, h, m->p[bn], m->p[bn + 1], m->stats[stats], m->stats[stats + 1],
                          training, 0.1, 1e-5);
    return fc_max_pool2d(ctx, fc_relu(ctx, h), &(fc_pool2d_opts){.kernel = {2, 2}});
}

/* x (B,1,28,28) -> logits (B,10) */
static fc_tensor *cnn_forward(fc_ctx *ctx, const cnn *m, fc_tensor *x, bool training) {
    fc_tensor *h = conv_block(ctx, m, x, C1W, BN1W, BN1M, training); /* (B,32,14,14) */
    h = conv_block(ctx, m, h, C2W, BN2W, BN2M, training);            /* (B,64,7,7) */
    int64_t B = fc_tensor_dim(x, 0);
    h = fc_reshape(ctx, h, (const int64_t[]){B, 64 * 7 * 7}, 2); /* (B,3136) */
    return fc_linear(ctx, h, m->p[FCW], m->p[FCB]);              /* (B,10) */
}

/* a leaf of shape with U(-bound, bound) entries from the context RNG */
static fc_tensor *param_uniform(fc_ctx *ctx, const int64_t *shape, int rank, double bound) {
    fc_tensor *t = fc_rand(ctx, FC_F32, shape, rank);
    fc_tensor *lo = fc_scalar(ctx, FC_F32, -bound);
    bool ok = t && lo && fc_mul_scalar_(t, 2 * bound) == FC_OK && fc_add_(t, lo) == FC_OK &&
              fc_requires_grad(t, true) == FC_OK;
    fc_release(lo);
    if (!ok) {
        fc_release(t);
        return NULL;
    }
    return t;
}

/* PyTorch's defaults: Conv2d and Linear weights and biases U(-1/sqrt(fan_in),
 * 1/sqrt(fan_in)) (kaiming_uniform with a = sqrt(5)); batch norm weight 1,
 * bias 0, running mean 0, running variance 1. */
static void cnn_init(fc_ctx *ctx, cnn *m) {
    const int64_t shapes[3][4] = {{32, 1, 5, 5}, {64, 32, 5, 5}, {10, 3136}};
    const int ranks[3] = {4, 4, 2};
    const int64_t fan_in[3] = {25, 32 * 25, 3136};
    for (int l = 0; l < 3; l++) {
        double bound = 1 / sqrt((double)fan_in[l]);
        m->p[2 * l] = param_uniform(ctx, shapes[l], ranks[l], bound);
        m->p[2 * l + 1] = param_uniform(ctx, &shapes[l][0], 1, bound);
    }
    m->nparams = m->batch_norm ? NPARAMS : BN1W;
    if (!m->batch_norm) return;
    const int64_t ch[2] = {32, 64};
    for (int b = 0; b < 2; b++) {
        m->p[BN1W + 2 * b] = fc_param_zeros(ctx, FC_F32, &ch[b], 1); /* filled with 1 below */
        m->p[BN1B + 2 * b] = fc_param_zeros(ctx, FC_F32, &ch[b], 1);
        m->stats[BN1M + 2 * b] = fc_zeros(ctx, FC_F32, &ch[b], 1);
        m->stats[BN1V + 2 * b] = fc_ones(ctx, FC_F32, &ch[b], 1);
        fc_no_grad_begin(ctx); /* an in-place write to a leaf */
        if (m->p[BN1W + 2 * b]) fc_fill_(m->p[BN1W + 2 * b], 1.0);
        fc_no_grad_end(ctx);
    }
}

static void cnn_free(cnn *m) {
    for (int i = 0; i < NPARAMS; i++)
        fc_release(m->p[i]);
    for (int i = 0; i < NSTATS; i++)
        fc_release(m->stats[i]);
}

// ----------------------------------------------------------------------------
// evaluation: loss and accuracy on the first `limit` test images

typedef struct eval_result {
    double loss, accuracy;
} eval_result;

static eval_result evaluate_test(fc_ctx *ctx, const cnn *m, const fm_split *test, int64_t limit,
                                 const float *lut, ex_dist *dist) {
    enum { EB = 500 };
    eval_result r = {NAN, NAN};
    int64_t n = limit > 0 && limit < test->n ? limit : test->n, lo, hi;
    ex_dist_share(dist, n, &lo, &hi); /* this rank's share; the sums are added */
    float *x = malloc(sizeof(float) * EB * FM_PIXELS);
    int64_t *y = malloc(sizeof(int64_t) * EB * 2), *order = malloc(sizeof(int64_t) * EB);
    if (!x || !y || !order) goto out;
    double loss = 0;
    int64_t correct = 0;
    fc_no_grad_begin(ctx);
    for (int64_t s = lo; s < hi && fc_ctx_status(ctx) == FC_OK; s += EB) {
        int64_t rows = hi - s < EB ? hi - s : EB;
        for (int64_t i = 0; i < rows; i++)
            order[i] = s + i;
        fm_fill_batch(test, order, rows, lut, x, y);
        fc_scope_begin(ctx);
        fc_tensor *tx =
            fc_tensor_from_data(ctx, FC_F32, (const int64_t[]){rows, 1, SIDE, SIDE}, 4, x);
        fc_tensor *ty = fc_tensor_from_data(ctx, FC_I64, &rows, 1, y);
        fc_tensor *logits = cnn_forward(ctx, m, tx, false);
        fc_tensor *pred = fc_argmax(ctx, logits, 1, false);
        double l = NAN;
        if (fc_tensor_item(fc_cross_entropy(ctx, logits, ty, NULL), &l) == FC_OK &&
            fc_tensor_copy_out(y + EB, sizeof(int64_t) * (size_t)rows, pred) == FC_OK) {
            loss += l * (double)rows;
            for (int64_t i = 0; i < rows; i++)
                correct += y[EB + i] == y[i];
        }
        fc_scope_end(ctx);
    }
    fc_no_grad_end(ctx);
    double sums[2] = {loss, (double)correct};
    if (fc_ctx_status(ctx) == FC_OK && ex_dist_sum(dist, sums, 2))
        r = (eval_result){sums[0] / (double)n, sums[1] / (double)n};
out:
    free(x);
    free(y);
    free(order);
    return r;
}

// ----------------------------------------------------------------------------
// options

typedef struct options {
    const char *data, *out;
    int64_t batch, epochs, steps, stop_after, eval_every, ckpt_every, train_limit, test_limit,
        threads, seed;
    double minutes, lr, min_lr, expect_accuracy;
    bool batch_norm, resume;
} options;

static int parse_options(int argc, char **argv, options *o) {
    // clang-format off
    *o = (options){.data = FM_DEFAULT_DIR, .out = "train_cnn_out", .batch = 64, .epochs = 6,
                   .minutes = 10, .lr = 1e-3, .min_lr = 1e-5, .seed = 42,
                   .expect_accuracy = -1};
    // clang-format on
    const ex_arg args[] = {
        {"data", EX_ARG_STRING, &o->data, "directory with the Fashion-MNIST IDX files", EX_ANY},
        {"out", EX_ARG_STRING, &o->out, "directory for metrics.csv, loss.png, ckpt.safetensors",
         EX_ANY},
        {"batch-norm", EX_ARG_FLAG, &o->batch_norm, "batch norm after each convolution", EX_ANY},
        {"batch", EX_ARG_INT, &o->batch, "images per step", EX_MIN(1)},
        {"epochs", EX_ARG_INT, &o->epochs, "passes over the training set", EX_MIN(1)},
        {"steps", EX_ARG_INT, &o->steps, "optimizer steps (0: epochs * steps per epoch)",
         EX_MIN(0)},
        {"stop-after", EX_ARG_INT, &o->stop_after,
         "stop (with a checkpoint) after this step, keeping the schedule of --steps", EX_MIN(0)},
        {"minutes", EX_ARG_DOUBLE, &o->minutes, "wall-clock budget; 0 for none", EX_MIN(0)},
        {"lr", EX_ARG_DOUBLE, &o->lr, "Adam learning rate at the start", EX_POS},
        {"min-lr", EX_ARG_DOUBLE, &o->min_lr, "learning rate at the end of the cosine", EX_MIN(0)},
        {"eval-every", EX_ARG_INT, &o->eval_every, "test evaluation period (0: each epoch)",
         EX_MIN(0)},
        {"ckpt-every", EX_ARG_INT, &o->ckpt_every, "checkpoint period in steps (0: end only)",
         EX_MIN(0)},
        {"resume", EX_ARG_FLAG, &o->resume,
         "continue from <out>/ckpt.safetensors with the same --steps (or --epochs), --lr, --min-lr "
         "(another schedule is refused: exit 2; a complete run has nothing to do)",
         EX_ANY},
        {"train-limit", EX_ARG_INT, &o->train_limit, "train on this many images (0: all)",
         EX_MIN(0)},
        {"test-limit", EX_ARG_INT, &o->test_limit, "evaluate on this many test images (0: all)",
         EX_MIN(0)},
        {"threads", EX_ARG_INT, &o->threads, "worker threads (0: every core)", EX_MIN(0)},
        {"seed", EX_ARG_INT, &o->seed, "seed of the initialisation and the data order", EX_ANY},
        {"expect-accuracy", EX_ARG_DOUBLE, &o->expect_accuracy,
         "exit 1 unless the final test accuracy reaches this (for tests)", EX_MIN(-1), EX_MAX(1)},
    };
    ex_args_result r =
        ex_args_parse(argc, argv, args, (int)(sizeof args / sizeof *args), NULL, "[options]");
    if (r != EX_ARGS_OK) return r == EX_ARGS_HELP ? 0 : 2;
    return -1;
}

// ----------------------------------------------------------------------------
// the run

static volatile sig_atomic_t g_stop;
static void on_sigint(int sig) {
    g_stop = 1;
    signal(sig, SIG_DFL);
}

typedef struct run {
    options o;
    fm_split train, test;
    float lut[256];
    fc_ctx *ctx;
    ex_dist dist;
    cnn model;
    fc_optim *opt;
    fc_lr_schedule sched;
    fc_tensor *x, *y; /* the step's batch, (B,1,28,28) f32 and (B) i64 */
    int64_t *order;   /* this epoch's permutation of the training images */
    int64_t n_train, per_epoch, total, step, stop_at;
    uint64_t data_rng, epoch_rng; /* epoch_rng: data_rng before this epoch's shuffle */
    fc_lr_schedule asked;         /* the options' schedule (a resume must ask for it too) */
    FILE *csv;
    struct csv_pending {
        int64_t step; /* -1: none */
        double lr, loss, ips, elapsed;
        bool evaluated;
        eval_result e;
    } row;            /* the latest step's row, held so a later evaluation fills it */
    int64_t csv_last; /* on resume: the step of metrics.csv's last row kept */
    double before_s;  /* the run's seconds before this process (a resume's) */
    bool interrupted; /* the loop ended on Ctrl-C */
    ex_progress bar;
    eval_result last;
    int64_t last_step;
    double *step_ms;
    int64_t timed;
    char path[3][4096];
} run;

/* This epoch's order: the identity shuffled from epoch_rng, so a resumed run
 * rebuilds it from the one saved number. */
static void new_epoch_order(run *r) {
    r->epoch_rng = r->data_rng;
    for (int64_t i = 0; i < r->n_train; i++)
        r->order[i] = i;
    for (int64_t i = r->n_train - 1; i > 0; i--) {
        int64_t j = (int64_t)ex_rand_below(&r->data_rng, (uint64_t)i + 1), t = r->order[i];
        r->order[i] = r->order[j];
        r->order[j] = t;
    }
}

/* one Adam step on the next batch of the epoch (this rank's slice of it);
 * the loss (the ranks' mean), or NAN on error */
static double train_step(run *r) {
    fc_ctx *ctx = r->ctx;
    int64_t B = r->o.batch, k = r->step % r->per_epoch;
    int64_t first = (k * r->dist.size + r->dist.rank) * B;
    if (k == 0) new_epoch_order(r);
    double loss = NAN;
    fc_scope_begin(ctx);
    float *x = fc_tensor_data_mut(r->x);
    int64_t *y = fc_tensor_data_mut(r->y);
    if (x && y) fm_fill_batch(&r->train, r->order + first, B, r->lut, x, y);
    fc_tensor *l = fc_cross_entropy(ctx, cnn_forward(ctx, &r->model, r->x, true), r->y, NULL);
    if (l && fc_backward(ctx, l) == FC_OK && ex_dist_sync(&r->dist) == FC_OK &&
        fc_optim_set_lr(r->opt, fc_lr_at(&r->sched, r->step)) == FC_OK &&
        fc_optim_step(r->opt) == FC_OK)
        fc_tensor_item(l, &loss);
    fc_optim_zero_grad(r->opt);
    fc_scope_end(ctx);
    if (fc_ctx_status(ctx) != FC_OK || !ex_dist_mean(&r->dist, &loss, 1)) return NAN;
    return loss;
}

// ----------------------------------------------------------------------------
// checkpoints: fucina's checkpoint file holds the tensors, the Adam state
// and the context RNG; the trainer adds where it is and how it was set up.

enum { V_STEP, V_EPOCH_RNG, V_BATCH, V_BN, V_TRAIN, NVALUES };
static const char *const META_KEYS[NVALUES] = {"train_cnn.step", "train_cnn.epoch_rng",
                                               "train_cnn.batch", "train_cnn.batch_norm",
                                               "train_cnn.train_images"};
/* texts (common/resume.h): the elapsed time and the schedule asked for,
 * which a resume must ask for too; a checkpoint written before has none */
enum { X_ELAPSED, X_SCHEDULE, NEXTRA };
static const char *const EXTRA_KEYS[NEXTRA] = {"train_cnn.elapsed_ms", "train_cnn.schedule"};

/* The parameters and then the statistics, under one list of names. */
static int ckpt_tensors(const run *r, const char **names, fc_tensor **ts) {
    int n = 0;
    for (int i = 0; i < r->model.nparams; i++, n++) {
        names[n] = PARAM_NAMES[i];
        ts[n] = r->model.p[i];
    }
    for (int i = 0; r->model.batch_norm && i < NSTATS; i++, n++) {
        names[n] = STAT_NAMES[i];
        ts[n] = r->model.stats[i];
    }
    return n;
}

static void meta_values(const run *r, uint64_t *v) {
    v[V_STEP] = (uint64_t)r->step;
    v[V_EPOCH_RNG] = r->epoch_rng;
    v[V_BATCH] = (uint64_t)r->o.batch;
    v[V_BN] = r->model.batch_norm;
    v[V_TRAIN] = (uint64_t)r->n_train;
}

static bool save_checkpoint(run *r) {
    if (!ex_dist_is_main(&r->dist)) return true; /* rank 0 writes */
    const char *names[NPARAMS + NSTATS];
    fc_tensor *ts[NPARAMS + NSTATS];
    int n = ckpt_tensors(r, names, ts);
    uint64_t v[NVALUES];
    char text[NVALUES + NEXTRA][160];
    const char *keys[NVALUES + NEXTRA], *vals[NVALUES + NEXTRA];
    meta_values(r, v);
    for (int i = 0; i < NVALUES; i++) {
        snprintf(text[i], sizeof text[i], "%llu", (unsigned long long)v[i]);
        keys[i] = META_KEYS[i];
        vals[i] = text[i];
    }
    snprintf(text[NVALUES + X_ELAPSED], sizeof text[0], "%.0f", 1e3 * ex_progress_total(&r->bar));
    ex_schedule_text(&r->asked, text[NVALUES + X_SCHEDULE], sizeof text[0]);
    for (int i = 0; i < NEXTRA; i++) {
        keys[NVALUES + i] = EXTRA_KEYS[i];
        vals[NVALUES + i] = text[NVALUES + i];
    }
    if (fc_checkpoint_save(r->ctx, r->path[2], names, ts, n, r->opt, keys, vals,
                           NVALUES + NEXTRA) != FC_OK) {
        fprintf(stderr, "train_cnn: saving %s: %s\n", r->path[2], fc_ctx_error(r->ctx));
        return false;
    }
    return true;
}

/* Restores the run; extra gets the texts ("" for those it lacks). */
static bool load_checkpoint(run *r, char (*extra)[160]) {
    char msg[256] = "";
    fc_st_file *f = NULL;
    if (fc_safetensors_open(r->path[2], &(fc_io_opts){.errbuf = msg, .errcap = sizeof msg}, &f) !=
        FC_OK) {
        fprintf(stderr, "train_cnn: cannot resume: %s\n", msg);
        return false;
    }
    uint64_t got[NVALUES], want[NVALUES];
    meta_values(r, want);
    bool ok = true;
    for (int i = 0; i < NVALUES && ok; i++) {
        const char *s = fc_safetensors_meta_find(f, META_KEYS[i]);
        char *end = NULL;
        got[i] = s ? strtoull(s, &end, 10) : 0;
        if (!s || !*s || *end) {
            fprintf(stderr, "train_cnn: %s has no valid %s: not a train_cnn checkpoint\n",
                    r->path[2], META_KEYS[i]);
            ok = false;
        } else if (i >= V_BATCH && got[i] != want[i]) {
            fprintf(stderr, "train_cnn: %s was made with %s = %llu, this run has %llu\n",
                    r->path[2], META_KEYS[i], (unsigned long long)got[i],
                    (unsigned long long)want[i]);
            ok = false;
        }
    }
    for (int i = 0; i < NEXTRA; i++) {
        const char *s = fc_safetensors_meta_find(f, EXTRA_KEYS[i]);
        snprintf(extra[i], 160, "%s", s ? s : "");
    }
    fc_safetensors_close(f);
    if (!ok) return false;
    const char *names[NPARAMS + NSTATS];
    fc_tensor *ts[NPARAMS + NSTATS];
    int n = ckpt_tensors(r, names, ts);
    if (fc_checkpoint_load(r->ctx, r->path[2], names, ts, n, r->opt) != FC_OK) {
        fprintf(stderr, "train_cnn: loading %s: %s\n", r->path[2], fc_ctx_error(r->ctx));
        return false;
    }
    r->step = (int64_t)got[V_STEP];
    r->data_rng = got[V_EPOCH_RNG];
    if (r->step % r->per_epoch != 0) new_epoch_order(r); /* mid-epoch: rebuild its order */
    return true;
}

// ----------------------------------------------------------------------------
// the loop

static bool evaluate(run *r) {
    eval_result e = evaluate_test(r->ctx, &r->model, &r->test, r->o.test_limit, r->lut, &r->dist);
    if (isnan(e.loss)) return false;
    r->last = e;
    r->last_step = r->step;
    ex_progress_note(&r->bar, "step %lld (epoch %.2f): test loss %.4f, accuracy %.4f",
                     (long long)r->step, (double)r->step / (double)r->per_epoch, e.loss,
                     e.accuracy);
    return true;
}

/* writes the held row, if any */
static void csv_flush(run *r) {
    const struct csv_pending *w = &r->row;
    if (!r->csv || w->step < 0) return; /* not rank 0, or nothing held */
    fprintf(r->csv, "%lld,%.4f,%.6g,", (long long)w->step, (double)w->step / (double)r->per_epoch,
            w->lr);
    if (!isnan(w->loss)) fprintf(r->csv, "%.6f", w->loss);
    if (w->evaluated)
        fprintf(r->csv, ",%.6f,%.4f", w->e.loss, w->e.accuracy);
    else
        fprintf(r->csv, ",,");
    fprintf(r->csv, ",%.1f,%.2f\n", w->ips, w->elapsed);
    fflush(r->csv);
    r->row.step = -1;
}

/* The row of step r->step, held until the next row or the end, so that the
 * evaluation after the loop fills it rather than adding a second row for
 * the same step. */
static void csv_row(run *r, double lr, double loss, bool evaluated, double ips) {
    if (r->row.step == r->step) {
        if (evaluated) {
            r->row.evaluated = true;
            r->row.e = r->last;
        }
        return;
    }
    csv_flush(r);
    r->row = (struct csv_pending){r->step,   lr,     loss, ips, ex_progress_total(&r->bar),
                                  evaluated, r->last};
}

static bool train(run *r) {
    const options *o = &r->o;
    double budget = o->minutes * 60, ema_ms = 0, loss = NAN;
    int64_t eval_every = o->eval_every > 0 ? o->eval_every : r->per_epoch;
    for (;;) {
        /* every rank must take the same decision: on the ranks' mean */
        double agree[2] = {ex_progress_elapsed(&r->bar), g_stop};
        if (!ex_dist_mean(&r->dist, agree, 2)) return false;
        if (agree[1] > 0 && r->step < r->stop_at) r->interrupted = true;
        if (r->step >= r->stop_at || agree[1] > 0) break;
        if (budget > 0 && agree[0] >= budget) {
            ex_progress_note(&r->bar, "time budget of %g min reached at step %lld of %lld",
                             o->minutes, (long long)r->step, (long long)r->total);
            break;
        }
        double lr = fc_lr_at(&r->sched, r->step), t0 = ex_now();
        loss = train_step(r);
        double ms = 1e3 * (ex_now() - t0);
        if (isnan(loss)) {
            ex_progress_finish(&r->bar);
            fprintf(stderr, "train_cnn: step %lld failed: %s\n", (long long)r->step + 1,
                    fc_ctx_status(r->ctx) != FC_OK ? fc_ctx_error(r->ctx) : "the loss is NaN");
            return false;
        }
        r->step++;
        r->step_ms[r->timed++] = ms;
        ema_ms = ema_ms == 0 ? ms : 0.9 * ema_ms + 0.1 * ms;
        double ips = (double)(r->dist.size * o->batch) / (ema_ms * 1e-3);
        ex_progress_update(&r->bar, r->step, loss, ips);
        bool ev = r->step % eval_every == 0 || r->step == r->total;
        if (ev && !evaluate(r)) break;
        csv_row(r, lr, loss, ev, ips);
        if (o->ckpt_every > 0 && r->step % o->ckpt_every == 0 && !save_checkpoint(r)) return false;
    }
    if (fc_ctx_status(r->ctx) != FC_OK) {
        ex_progress_finish(&r->bar);
        fprintf(stderr, "train_cnn: %s\n", fc_ctx_error(r->ctx));
        return false;
    }
    /* full precision, so runs can be compared exactly (the resume test does) */
    printf("final: step %lld train loss %.9g\n", (long long)r->step, loss);
    return true;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int finish(run *r) {
    ex_progress_finish(&r->bar);
    if (!save_checkpoint(r)) return 1;
    if (r->last_step != r->step) {
        if (!evaluate(r)) {
            fprintf(stderr, "train_cnn: evaluation failed: %s\n", fc_ctx_error(r->ctx));
            return 1;
        }
        csv_row(r, fc_lr_at(&r->sched, r->step), NAN, true, 0);
    }
    double wall = ex_progress_elapsed(&r->bar);
    csv_flush(r);
    if (r->csv) fclose(r->csv);
    r->csv = NULL;
    const ex_curve curves[] = {
        {4, "train loss", false}, {5, "test loss", true}, {6, "test accuracy", true}};
    bool plotted =
        ex_dist_is_main(&r->dist) && ex_plot_png(r->path[0], r->path[1], "train_cnn: Fashion-MNIST",
                                                 "step", "loss (nats) / accuracy", 1, curves, 3);
    double med = 0;
    if (r->timed > 0) {
        qsort(r->step_ms, (size_t)r->timed, sizeof *r->step_ms, cmp_double);
        med = r->step_ms[r->timed / 2];
    }
    printf("done: %lld steps (%.2f epochs) in %.1f s, step time median %.2f ms (min %.2f)\n",
           (long long)r->step, (double)r->step / (double)r->per_epoch, wall, med,
           r->timed > 0 ? r->step_ms[0] : 0.0);
    printf("test accuracy %.4f, test loss %.4f (%lld images)\n", r->last.accuracy, r->last.loss,
           (long long)(r->o.test_limit > 0 && r->o.test_limit < r->test.n ? r->o.test_limit
                                                                          : r->test.n));
    printf("wrote %s, %s%s%s\n", r->path[0], r->path[2], plotted ? ", " : "",
           plotted ? r->path[1] : "");
    if (r->o.expect_accuracy >= 0 && !(r->last.accuracy >= r->o.expect_accuracy)) {
        fprintf(stderr, "train_cnn: expected a test accuracy of at least %g, got %.4f\n",
                r->o.expect_accuracy, r->last.accuracy);
        return 1;
    }
    return 0;
}

/* loads the data and builds the model; an exit code, or -1 to go on */
static int setup(run *r) {
    const options *o = &r->o;
    if (!fm_dataset_present(o->data)) {
        fprintf(stderr,
                "train_cnn: no Fashion-MNIST in %s. Install Debian's package "
                "dataset-fashion-mnist (apt-get install dataset-fashion-mnist, or "
                "scripts/deps.sh), or pass --data DIR with the IDX files.\n",
                o->data);
        return EXIT_SKIP;
    }
    if (!fm_split_load("train_cnn", o->data, "train", &r->train) ||
        !fm_split_load("train_cnn", o->data, "t10k", &r->test))
        return 1;
    r->n_train = o->train_limit > 0 && o->train_limit < r->train.n ? o->train_limit : r->train.n;
    if (r->n_train < o->batch) {
        fprintf(stderr, "train_cnn: --batch %lld is larger than the training set\n",
                (long long)o->batch);
        return 2;
    }
    fm_pixel_table(&r->train, r->lut);
    r->ctx = fc_ctx_new(&(fc_ctx_opts){.threads = (int)o->threads, .seed = (uint64_t)o->seed});
    if (!r->ctx) {
        fprintf(stderr, "train_cnn: cannot create a context\n");
        return 1;
    }
    if (!ex_dist_start(&r->dist, "train_cnn", r->ctx)) return 1;
    /* a step reads size * batch images; the last partial step is dropped */
    r->per_epoch = r->n_train / (o->batch * r->dist.size);
    if (r->per_epoch < 1) {
        fprintf(stderr, "train_cnn: %d ranks x --batch %lld is more than the training set\n",
                r->dist.size, (long long)o->batch);
        return 2;
    }
    r->total = o->steps > 0 ? o->steps : o->epochs * r->per_epoch;
    r->stop_at = o->stop_after > 0 && o->stop_after < r->total ? o->stop_after : r->total;
    r->model.batch_norm = o->batch_norm;
    cnn_init(r->ctx, &r->model);
    if (fc_ctx_status(r->ctx) == FC_OK)
        r->opt = fc_optim_new(r->ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = o->lr},
                              r->model.p, r->model.nparams);
    if (r->opt && !ex_dist_wrap(&r->dist, "train_cnn", r->opt)) return 1;
    r->x = fc_empty(r->ctx, FC_F32, (const int64_t[]){o->batch, 1, SIDE, SIDE}, 4);
    r->y = fc_empty(r->ctx, FC_I64, &o->batch, 1);
    r->order = malloc(sizeof(int64_t) * (size_t)r->n_train);
    r->step_ms = malloc(sizeof(double) * (size_t)r->total);
    if (fc_ctx_status(r->ctx) != FC_OK || !r->opt || !r->order || !r->step_ms) {
        fprintf(stderr, "train_cnn: building the model failed: %s\n",
                fc_ctx_status(r->ctx) != FC_OK ? fc_ctx_error(r->ctx) : "out of memory");
        return 1;
    }
    r->sched = (fc_lr_schedule){
        .kind = FC_LR_COSINE, .base_lr = o->lr, .total_steps = r->total, .min_lr = o->min_lr};
    r->asked = r->sched;
    r->row.step = -1;
    r->data_rng = (uint64_t)o->seed ^ 0xA0761D6478BD642Full;
    r->last_step = -1;
    if (ex_dist_is_main(&r->dist) && !ex_mkdir_p(o->out)) return 1;
    snprintf(r->path[0], sizeof r->path[0], "%s/metrics.csv", o->out);
    snprintf(r->path[1], sizeof r->path[1], "%s/loss.png", o->out);
    snprintf(r->path[2], sizeof r->path[2], "%s/ckpt.safetensors", o->out);
    if (o->resume) {
        char extra[NEXTRA][160];
        if (!load_checkpoint(r, extra)) return 1;
        if (!ex_schedule_check("train_cnn", r->path[2],
                               extra[X_SCHEDULE][0] ? extra[X_SCHEDULE] : NULL, &r->asked, r->step))
            return 2;
        r->before_s = ex_elapsed_from_text(extra[X_ELAPSED]);
        if (ex_run_complete("train_cnn", o->out, r->step, r->total, o->stop_after, "nothing to do"))
            return 0;
        printf("resumed from %s at step %lld\n", r->path[2], (long long)r->step);
    }
    if (ex_dist_is_main(&r->dist)) { /* rank 0 writes the files */
        const char *header = "step,epoch,lr,train_loss,test_loss,test_accuracy,images_per_s,"
                             "elapsed_s";
        r->csv = o->resume ? ex_csv_resume(r->path[0], header, r->step, &r->csv_last)
                           : ex_csv_open(r->path[0], header, false);
        if (!r->csv) return 1;
    }
    int64_t np = 0;
    for (int i = 0; i < r->model.nparams; i++)
        np += fc_tensor_numel(r->model.p[i]);
    printf("train_cnn: %lld training and %lld test images from %s\n", (long long)r->n_train,
           (long long)r->test.n, o->data);
    printf("model: conv5x5(32)-pool-conv5x5(64)-pool-linear(10)%s, %lld parameters; batch %lld; "
           "Adam lr %g -> %g (cosine); %lld steps (%lld per epoch), budget %g min, %d threads\n",
           r->model.batch_norm ? " with batch norm" : "", (long long)np, (long long)o->batch, o->lr,
           o->min_lr, (long long)r->total, (long long)r->per_epoch, o->minutes,
           fc_ctx_threads(r->ctx));
    return -1;
}

static void teardown(run *r, bool ok) {
    csv_flush(r);
    if (r->csv) fclose(r->csv);
    ex_dist_end(&r->dist, ok);
    fc_optim_free(r->opt);
    cnn_free(&r->model);
    fc_release(r->x);
    fc_release(r->y);
    fc_ctx_free(r->ctx);
    fm_split_free(&r->train);
    fm_split_free(&r->test);
    free(r->order);
    free(r->step_ms);
}

int main(int argc, char **argv) {
    static run r;
    int rc = parse_options(argc, argv, &r.o);
    if (rc >= 0) return rc;
    signal(SIGINT, on_sigint);
    rc = setup(&r);
    if (rc < 0) {
        rc = 1;
        int64_t every = r.per_epoch / 8 > 0 ? r.per_epoch / 8 : 1;
        ex_progress_start(&r.bar, r.total, r.o.minutes * 60, "img", (int)every);
        r.bar.before_s = r.before_s;
        if (r.step > 0 || evaluate(&r)) {
            if (r.step == 0) csv_row(&r, r.o.lr, NAN, true, 0);
            if (train(&r)) rc = finish(&r);
        } else {
            fprintf(stderr, "train_cnn: evaluation failed: %s\n", fc_ctx_error(r.ctx));
        }
        if (rc == 0 && r.interrupted) {
            /* a script must tell a stopped run from a finished one: 128 + SIGINT */
            printf("train_cnn: stopped by Ctrl-C at step %lld of %lld; %s holds it (--resume "
                   "continues)\n",
                   (long long)r.step, (long long)r.total, r.path[2]);
            rc = 130;
        }
    }
    teardown(&r, rc == 0 || rc == EXIT_SKIP || rc == 130);
    return rc;
}
