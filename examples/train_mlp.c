/* SPDX-License-Identifier: MIT */
/* train_mlp.c - a Fashion-MNIST classifier trained with fucina's public API.
 *
 * Goals: the smallest real training program: read the IDX files of
 * Debian's dataset-fashion-mnist package (gzip, read with zlib), train the
 * MLP of the benchmark peer (mlp_train.py in ../shared/peers beside the project: 784-512-512-10,
 * ReLU, PyTorch's default initialisation) with Adam and a cosine-decayed
 * learning rate, and report the test accuracy. The model is an fc_nn_seq
 * of fucina/nn.h (torch.nn.Sequential's names, "0.weight" ... "4.bias"):
 * three Linears (bias fused) and two ReLUs; the loss is the fused
 * fc_cross_entropy; autograd does the rest. Every step runs in a scope and
 * refills one persistent batch tensor, so the steady state allocates nothing
 * outside the context's pool.
 *
 * Run: train_mlp (default data /usr/share/datasets/fashion-mnist). --help
 * lists the options. Under mpirun (a build with FUCINA_WITH_MPI) the ranks
 * split every batch and average the gradients (common/dist.h): mpirun -np
 * 2 train_mlp --batch 64 --threads 1 takes the steps of --batch 128. Output goes to --out
 * (metrics.csv, loss.png when gnuplot is installed). Exit status 77 means the data set is missing.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <fucina.h>
#include <fucina/nn.h>

#include "common/args.h"
#include "common/dist.h"
#include "common/fashion_mnist.h"
#include "common/progress.h"

enum { EXIT_SKIP = 77, PIXELS = FM_PIXELS, CLASSES = FM_CLASSES };

// ----------------------------------------------------------------------------
// the model: 784 -> H -> H -> 10

enum { NPARAMS = 6 };

/* x (B,784) -> logits (B,10) */
static fc_tensor *mlp_forward(const fc_nn_seq *net, fc_tensor *x) {
    return fc_nn_seq_forward(net, x);
}

/* Linear(784, H), ReLU, Linear(H, H), ReLU, Linear(H, 10), each Linear
 * with PyTorch's default init (weight and bias U(-1/sqrt(in), 1/sqrt(in))) */
static fc_status mlp_init(fc_nn *nn, fc_nn_seq *net, int64_t H) {
    fc_status st = fc_nn_seq_init(nn, net, "");
    if (st == FC_OK) st = fc_nn_seq_linear(net, PIXELS, H, true);
    if (st == FC_OK) st = fc_nn_seq_act(net, FC_NN_ACT_RELU);
    if (st == FC_OK) st = fc_nn_seq_linear(net, H, H, true);
    if (st == FC_OK) st = fc_nn_seq_act(net, FC_NN_ACT_RELU);
    if (st == FC_OK) st = fc_nn_seq_linear(net, H, CLASSES, true);
    return st;
}

// ----------------------------------------------------------------------------
// evaluation: loss and accuracy on the first `limit` test images (this
// rank's share of them; the ranks' sums are added)

typedef struct eval_result {
    double loss, accuracy;
} eval_result;

static eval_result evaluate_test(fc_ctx *ctx, const fc_nn_seq *net, const fm_split *test,
                                 int64_t limit, const float *lut, ex_dist *dist) {
    enum { EB = 1000 };
    eval_result r = {NAN, NAN};
    int64_t n = limit > 0 && limit < test->n ? limit : test->n, lo, hi;
    ex_dist_share(dist, n, &lo, &hi);
    float *x = malloc(sizeof(float) * EB * PIXELS);
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
        fc_tensor *tx = fc_tensor_from_data(ctx, FC_F32, (const int64_t[]){rows, PIXELS}, 2, x);
        fc_tensor *ty = fc_tensor_from_data(ctx, FC_I64, &rows, 1, y);
        fc_tensor *logits = mlp_forward(net, tx);
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
    int64_t hidden, batch, epochs, steps, eval_every, test_limit, threads, seed;
    double minutes, lr, min_lr, expect_accuracy;
} options;

static int parse_options(int argc, char **argv, options *o) {
    // clang-format off
    *o = (options){.data = "/usr/share/datasets/fashion-mnist", .out = "train_mlp_out",
                   .hidden = 512, .batch = 128, .epochs = 12, .steps = 0, .eval_every = 0,
                   .test_limit = 0, .threads = 0, .seed = 42, .minutes = 3, .lr = 1e-3,
                   .min_lr = 1e-5, .expect_accuracy = -1};
    // clang-format on
    const ex_arg args[] = {
        {"data", EX_ARG_STRING, &o->data, "directory with the Fashion-MNIST IDX files", EX_ANY},
        {"out", EX_ARG_STRING, &o->out, "directory for metrics.csv and loss.png", EX_ANY},
        {"hidden", EX_ARG_INT, &o->hidden, "width of the two hidden layers", EX_MIN(1)},
        {"batch", EX_ARG_INT, &o->batch, "images per step", EX_MIN(1)},
        {"epochs", EX_ARG_INT, &o->epochs, "passes over the training set", EX_MIN(1)},
        {"steps", EX_ARG_INT, &o->steps, "optimizer steps (0: epochs * steps per epoch)",
         EX_MIN(0)},
        {"minutes", EX_ARG_DOUBLE, &o->minutes, "wall-clock budget; 0 for none", EX_MIN(0)},
        {"lr", EX_ARG_DOUBLE, &o->lr, "Adam learning rate at the start", EX_POS},
        {"min-lr", EX_ARG_DOUBLE, &o->min_lr, "learning rate at the end of the cosine", EX_MIN(0)},
        {"eval-every", EX_ARG_INT, &o->eval_every, "test evaluation period (0: each epoch)",
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
// training

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
    fc_nn *nn;
    fc_nn_seq net;
    fc_tensor *p[NPARAMS]; /* the Linears' tensors, borrowed from nn */
    fc_optim *opt;
    fc_lr_schedule sched;
    fc_tensor *x, *y; /* the step's batch, (B,784) f32 and (B) i64 */
    int64_t *order;   /* this epoch's permutation of the training images */
    int64_t per_epoch, total, step;
    uint64_t data_rng;
    FILE *csv;
    struct csv_pending {
        int64_t step; /* -1: none */
        double lr, loss, ips, elapsed;
        bool evaluated;
        eval_result e;
    } row;            /* the latest step's row, held so a later evaluation fills it */
    bool interrupted; /* the loop ended on Ctrl-C */
    ex_progress bar;
    eval_result last;
    int64_t last_step;
    double *step_ms;
    char path[2][4096];
} run;

static void shuffle(int64_t *order, int64_t n, uint64_t *rng) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)ex_rand_below(rng, (uint64_t)i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

/* one Adam step on the next batch of the epoch (this rank's slice of it);
 * the loss (the ranks' mean), or NAN on error */
static double train_step(run *r) {
    fc_ctx *ctx = r->ctx;
    int64_t B = r->o.batch, k = r->step % r->per_epoch;
    int64_t first = (k * r->dist.size + r->dist.rank) * B;
    if (k == 0) shuffle(r->order, r->train.n, &r->data_rng);
    double loss = NAN;
    fc_scope_begin(ctx);
    float *x = fc_tensor_data_mut(r->x);
    int64_t *y = fc_tensor_data_mut(r->y);
    if (x && y) fm_fill_batch(&r->train, r->order + first, B, r->lut, x, y);
    fc_tensor *l = fc_cross_entropy(ctx, mlp_forward(&r->net, r->x), r->y, NULL);
    if (l && fc_backward(ctx, l) == FC_OK && ex_dist_sync(&r->dist) == FC_OK &&
        fc_optim_set_lr(r->opt, fc_lr_at(&r->sched, r->step)) == FC_OK &&
        fc_optim_step(r->opt) == FC_OK)
        fc_tensor_item(l, &loss);
    fc_optim_zero_grad(r->opt);
    fc_scope_end(ctx);
    if (fc_ctx_status(ctx) != FC_OK || !ex_dist_mean(&r->dist, &loss, 1)) return NAN;
    return loss;
}

static bool evaluate(run *r) {
    eval_result e = evaluate_test(r->ctx, &r->net, &r->test, r->o.test_limit, r->lut, &r->dist);
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
 * evaluation after the loop (Ctrl-C, the budget) fills it rather than
 * adding a second row for the same step. */
static void csv_row(run *r, double lr, double loss, bool evaluated, double ips) {
    if (r->row.step == r->step) {
        if (evaluated) {
            r->row.evaluated = true;
            r->row.e = r->last;
        }
        return;
    }
    csv_flush(r);
    r->row = (struct csv_pending){r->step,   lr,     loss, ips, ex_progress_elapsed(&r->bar),
                                  evaluated, r->last};
}

static bool train(run *r) {
    const options *o = &r->o;
    double budget = o->minutes * 60, ema_ms = 0;
    int64_t eval_every = o->eval_every > 0 ? o->eval_every : r->per_epoch;
    for (;;) {
        /* every rank must take the same decision: on the ranks' mean */
        double agree[2] = {ex_progress_elapsed(&r->bar), g_stop};
        if (!ex_dist_mean(&r->dist, agree, 2)) return false;
        if (agree[1] > 0 && r->step < r->total) r->interrupted = true;
        if (r->step >= r->total || agree[1] > 0) break;
        if (budget > 0 && agree[0] >= budget) {
            ex_progress_note(&r->bar, "time budget of %g min reached at step %lld of %lld",
                             o->minutes, (long long)r->step, (long long)r->total);
            break;
        }
        double lr = fc_lr_at(&r->sched, r->step), t0 = ex_now();
        double loss = train_step(r);
        double ms = 1e3 * (ex_now() - t0);
        if (isnan(loss)) {
            ex_progress_finish(&r->bar);
            fprintf(stderr, "train_mlp: step %lld failed: %s\n", (long long)r->step + 1,
                    fc_ctx_status(r->ctx) != FC_OK ? fc_ctx_error(r->ctx) : "the loss is NaN");
            return false;
        }
        r->step_ms[r->step++] = ms;
        ema_ms = ema_ms == 0 ? ms : 0.9 * ema_ms + 0.1 * ms;
        double ips = (double)(o->batch * r->dist.size) / (ema_ms * 1e-3);
        ex_progress_update(&r->bar, r->step, loss, ips);
        bool ev = r->step % eval_every == 0 || r->step == r->total;
        if (ev && !evaluate(r)) break;
        csv_row(r, lr, loss, ev, ips);
    }
    if (fc_ctx_status(r->ctx) != FC_OK) {
        ex_progress_finish(&r->bar);
        fprintf(stderr, "train_mlp: %s\n", fc_ctx_error(r->ctx));
        return false;
    }
    return true;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int finish(run *r) {
    ex_progress_finish(&r->bar);
    if (r->last_step != r->step) {
        if (!evaluate(r)) {
            fprintf(stderr, "train_mlp: evaluation failed: %s\n", fc_ctx_error(r->ctx));
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
        ex_dist_is_main(&r->dist) && ex_plot_png(r->path[0], r->path[1], "train_mlp: Fashion-MNIST",
                                                 "step", "loss (nats) / accuracy", 1, curves, 3);
    double med = 0;
    if (r->step > 0) {
        qsort(r->step_ms, (size_t)r->step, sizeof *r->step_ms, cmp_double);
        med = r->step_ms[r->step / 2];
    }
    printf("done: %lld steps (%.2f epochs) in %.1f s, step time median %.2f ms (min %.2f)\n",
           (long long)r->step, (double)r->step / (double)r->per_epoch, wall, med,
           r->step > 0 ? r->step_ms[0] : 0.0);
    printf("test accuracy %.4f, test loss %.4f (%lld images)\n", r->last.accuracy, r->last.loss,
           (long long)(r->o.test_limit > 0 && r->o.test_limit < r->test.n ? r->o.test_limit
                                                                          : r->test.n));
    printf("wrote %s%s%s\n", r->path[0], plotted ? ", " : "", plotted ? r->path[1] : "");
    if (r->o.expect_accuracy >= 0 && !(r->last.accuracy >= r->o.expect_accuracy)) {
        fprintf(stderr, "train_mlp: expected a test accuracy of at least %g, got %.4f\n",
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
                "train_mlp: no Fashion-MNIST in %s. Install Debian's package "
                "dataset-fashion-mnist (apt-get install dataset-fashion-mnist, or "
                "scripts/deps.sh), or pass --data DIR with the IDX files.\n",
                o->data);
        return EXIT_SKIP;
    }
#ifndef EX_HAVE_ZLIB
    printf("note: built without zlib: reading the unpacked IDX files (gunzip them first)\n");
#endif
    if (!fm_split_load("train_mlp", o->data, "train", &r->train) ||
        !fm_split_load("train_mlp", o->data, "t10k", &r->test))
        return 1;
    if (r->train.n < o->batch) {
        fprintf(stderr, "train_mlp: --batch %lld is larger than the training set\n",
                (long long)o->batch);
        return 2;
    }
    fm_pixel_table(&r->train, r->lut);
    r->ctx = fc_ctx_new(&(fc_ctx_opts){.threads = (int)o->threads, .seed = (uint64_t)o->seed});
    if (!r->ctx) {
        fprintf(stderr, "train_mlp: cannot create a context\n");
        return 1;
    }
    if (!ex_dist_start(&r->dist, "train_mlp", r->ctx)) return 1;
    /* a step reads size * batch images; the last partial step is dropped */
    r->per_epoch = r->train.n / (o->batch * r->dist.size);
    if (r->per_epoch < 1) {
        fprintf(stderr, "train_mlp: %d ranks x --batch %lld is more than the training set\n",
                r->dist.size, (long long)o->batch);
        return 2;
    }
    r->total = o->steps > 0 ? o->steps : o->epochs * r->per_epoch;
    r->nn = fc_nn_new(r->ctx);
    if (r->nn && mlp_init(r->nn, &r->net, o->hidden) == FC_OK &&
        fc_nn_trainable(r->nn, r->p, NPARAMS) == NPARAMS)
        r->opt = fc_optim_new(r->ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = o->lr}, r->p,
                              NPARAMS);
    if (r->opt && !ex_dist_wrap(&r->dist, "train_mlp", r->opt)) return 1;
    r->x = fc_empty(r->ctx, FC_F32, (const int64_t[]){o->batch, PIXELS}, 2);
    r->y = fc_empty(r->ctx, FC_I64, &o->batch, 1);
    r->order = malloc(sizeof(int64_t) * (size_t)r->train.n);
    r->step_ms = malloc(sizeof(double) * (size_t)r->total);
    if (fc_ctx_status(r->ctx) != FC_OK || !r->opt || !r->order || !r->step_ms) {
        fprintf(stderr, "train_mlp: building the model failed: %s\n",
                fc_ctx_status(r->ctx) != FC_OK ? fc_ctx_error(r->ctx) : "out of memory");
        return 1;
    }
    for (int64_t i = 0; i < r->train.n; i++)
        r->order[i] = i;
    r->sched = (fc_lr_schedule){
        .kind = FC_LR_COSINE, .base_lr = o->lr, .total_steps = r->total, .min_lr = o->min_lr};
    r->data_rng = (uint64_t)o->seed ^ 0xA0761D6478BD642Full;
    r->last_step = -1;
    snprintf(r->path[0], sizeof r->path[0], "%s/metrics.csv", o->out);
    snprintf(r->path[1], sizeof r->path[1], "%s/loss.png", o->out);
    if (ex_dist_is_main(&r->dist)) { /* rank 0 writes the files */
        if (!ex_mkdir_p(o->out)) return 1;
        r->csv = ex_csv_open(r->path[0],
                             "step,epoch,lr,train_loss,test_loss,test_accuracy,images_per_s,"
                             "elapsed_s",
                             false);
        if (!r->csv) return 1;
    }
    int64_t H = o->hidden, np = 0;
    for (int i = 0; i < NPARAMS; i++)
        np += fc_tensor_numel(r->p[i]);
    printf("train_mlp: %lld training and %lld test images from %s\n", (long long)r->train.n,
           (long long)r->test.n, o->data);
    printf("model: 784-%lld-%lld-10, %lld parameters; batch %lld; Adam lr %g -> %g (cosine); "
           "%lld steps (%lld per epoch), budget %g min, %d threads\n",
           (long long)H, (long long)H, (long long)np, (long long)o->batch, o->lr, o->min_lr,
           (long long)r->total, (long long)r->per_epoch, o->minutes, fc_ctx_threads(r->ctx));
    if (r->dist.size > 1)
        printf("data parallel: %d ranks x batch %lld = %lld images per step\n", r->dist.size,
               (long long)o->batch, (long long)(r->dist.size * o->batch));
    return -1;
}

static void teardown(run *r, bool ok) {
    csv_flush(r);
    if (r->csv) fclose(r->csv);
    ex_dist_end(&r->dist, ok);
    fc_optim_free(r->opt);
    fc_nn_free(r->nn);
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
        int64_t every = r.per_epoch / 4 > 0 ? r.per_epoch / 4 : 1;
        ex_progress_start(&r.bar, r.total, r.o.minutes * 60, "img", (int)every);
        r.row.step = -1;
        if (!evaluate(&r)) {
            fprintf(stderr, "train_mlp: evaluation failed: %s\n", fc_ctx_error(r.ctx));
        } else {
            csv_row(&r, r.o.lr, NAN, true, 0);
            if (train(&r)) rc = finish(&r);
        }
        if (rc == 0 && r.interrupted) {
            /* a script must tell a stopped run from a finished one: 128 + SIGINT */
            printf("train_mlp: stopped by Ctrl-C at step %lld of %lld\n", (long long)r.step,
                   (long long)r.total);
            rc = 130;
        }
    }
    teardown(&r, rc == 0 || rc == EXIT_SKIP || rc == 130);
    return rc;
}
