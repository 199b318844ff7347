/* SPDX-License-Identifier: MIT */
/* train_wgan_gp.c - a Wasserstein GAN with gradient penalty (Gulrajani et
 * al. 2017) on the 2-D mixture of eight Gaussians: a trainer whose loss
 * needs the gradient of a gradient.
 *
 * Goals: the critic's loss contains lambda * (|dD/dx (x_hat)| - 1)^2, so
 * each critic step takes dD/dx with fc_autograd_grad and create_graph (the
 * input gradient is a recorded function of the critic's weights), folds
 * its norm into the loss, and fc_backward differentiates through it: a
 * second derivative of the critic with respect to its input and weights.
 *
 *   data  8 Gaussians of std 0.02 at radius 2 (angles k pi / 4), no file
 *   G     z (2, normal) -> 2 hidden ReLU layers -> (2)
 *   D     x (2) -> 2 hidden ReLU layers -> (1), no sigmoid (a critic)
 *   loss  D: mean D(fake) - mean D(real) + lambda mean (|grad D(x_hat)| - 1)^2,
 *            x_hat = e real + (1 - e) fake, e ~ U(0, 1) per sample
 *         G: -mean D(G(z))
 *   Adam lr 1e-4, betas (0.5, 0.9), n_critic 5 critic steps per G step
 *   (the paper's toy settings, lambda 0.1).
 *
 * Every --eval-every generator steps it draws --eval-samples points and
 * reports the critic's Wasserstein estimate, the penalty, the share of
 * "good" samples (within 0.1 = 5 std of a mode) and how many modes hold at
 * least 1% of the samples as good ones. Writes metrics.csv, samples.csv
 * (the last draw) and, with gnuplot, loss.png and samples.png to --out.
 * --expect-modes K makes the exit status 1 unless the last evaluation
 * covers at least K modes (the ctest smoke run). f32 throughout.
 */
#define _POSIX_C_SOURCE 200809L /* popen for the scatter picture */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fucina.h>

#include "common/args.h"
#include "common/progress.h"

#define N_MODES 8
#define PI 3.14159265358979323846
#define MODE_STD 0.02
#define MODE_RADIUS 2.0
#define GOOD_DIST 0.1

// ----------------------------------------------------------------------------
// the two networks: three linear layers each, ReLU between

typedef struct mlp {
    fc_tensor *w[3], *b[3];
} mlp;

static void mlp_init(fc_ctx *ctx, mlp *m, int64_t in, int64_t hidden, int64_t out) {
    int64_t dims[4] = {in, hidden, hidden, out};
    for (int l = 0; l < 3; l++) {
        m->w[l] = fc_param_randn(ctx, FC_F32, (int64_t[]){dims[l + 1], dims[l]}, 2,
                                 1.0 / sqrt((double)dims[l]));
        m->b[l] = fc_param_zeros(ctx, FC_F32, (int64_t[]){dims[l + 1]}, 1);
    }
}

static void mlp_params(const mlp *m, fc_tensor **p) {
    for (int l = 0; l < 3; l++)
        p[2 * l] = m->w[l], p[2 * l + 1] = m->b[l];
}

static void mlp_free(mlp *m) {
    for (int l = 0; l < 3; l++) {
        fc_release(m->w[l]);
        fc_release(m->b[l]);
    }
}

/* x (B, in) -> (B, out); temporaries in the caller's scope */
static fc_tensor *mlp_forward(fc_ctx *ctx, const mlp *m, fc_tensor *x) {
    fc_tensor *h = fc_relu(ctx, fc_linear(ctx, x, m->w[0], m->b[0]));
    h = fc_relu(ctx, fc_linear(ctx, h, m->w[1], m->b[1]));
    return fc_linear(ctx, h, m->w[2], m->b[2]);
}

// ----------------------------------------------------------------------------
// data

static void mode_center(int k, double *cx, double *cy) {
    double a = k * PI / 4;
    *cx = MODE_RADIUS * cos(a);
    *cy = MODE_RADIUS * sin(a);
}

static double normal(uint64_t *s) {
    double u = ex_rand_unit(s), v = ex_rand_unit(s);
    return sqrt(-2 * log(1 - u)) * cos(2 * PI * v);
}

/* b real points (b, 2) */
static fc_tensor *real_batch(fc_ctx *ctx, int64_t b, uint64_t *s, float *buf) {
    for (int64_t i = 0; i < b; i++) {
        double cx, cy;
        mode_center((int)ex_rand_below(s, N_MODES), &cx, &cy);
        buf[2 * i] = (float)(cx + MODE_STD * normal(s));
        buf[2 * i + 1] = (float)(cy + MODE_STD * normal(s));
    }
    return fc_tensor_from_data(ctx, FC_F32, (int64_t[]){b, 2}, 2, buf);
}

// ----------------------------------------------------------------------------
// one critic step and one generator step

typedef struct run {
    fc_ctx *ctx;
    mlp g, d;
    fc_optim *opt_g, *opt_d;
    int64_t batch;
    double lambda;
    uint64_t rng;
    float *buf;
    double w_est, gp; /* of the last critic step */
} run;

static double value_of(fc_tensor *t) {
    float v = NAN;
    if (t) fc_tensor_copy_out(&v, sizeof v, t);
    return v;
}

static fc_status critic_step(run *r) {
    fc_ctx *ctx = r->ctx;
    int64_t b = r->batch;
    fc_scope_begin(ctx);
    fc_tensor *real = real_batch(ctx, b, &r->rng, r->buf);
    fc_no_grad_begin(ctx); /* the generator is fixed here: its samples are data */
    fc_tensor *fake = mlp_forward(ctx, &r->g, fc_randn(ctx, FC_F32, (int64_t[]){b, 2}, 2));
    fc_tensor *e = fc_rand(ctx, FC_F32, (int64_t[]){b, 1}, 2);
    fc_tensor *xh = fc_add(ctx, fc_mul(ctx, e, real), fc_mul(ctx, fc_rsub_scalar(ctx, e, 1), fake));
    fc_no_grad_end(ctx);
    fc_status st = xh ? fc_requires_grad(xh, true) : fc_ctx_status(ctx);
    /* the gradient penalty: dD/dx at x_hat, recorded (create_graph) so that
     * the loss can be differentiated through it */
    fc_tensor *gx = NULL;
    if (st == FC_OK) {
        fc_tensor *dxh = fc_sum(ctx, mlp_forward(ctx, &r->d, xh), NULL, 0, false);
        st = fc_autograd_grad(ctx, &dxh, NULL, 1, &xh, 1,
                              &(fc_autograd_grad_opts){.create_graph = true}, &gx);
    }
    if (st == FC_OK) {
        fc_tensor *norm = fc_sqrt(
            ctx, fc_add_scalar(ctx, fc_sum(ctx, fc_square(ctx, gx), (int[]){1}, 1, false), 1e-12));
        fc_tensor *gp = fc_mul_scalar(
            ctx, fc_mean(ctx, fc_square(ctx, fc_sub_scalar(ctx, norm, 1.0)), NULL, 0, false),
            r->lambda);
        fc_tensor *w = fc_sub(ctx, fc_mean(ctx, mlp_forward(ctx, &r->d, real), NULL, 0, false),
                              fc_mean(ctx, mlp_forward(ctx, &r->d, fake), NULL, 0, false));
        fc_tensor *loss = fc_add(ctx, fc_neg(ctx, w), gp);
        fc_optim_zero_grad(r->opt_d);
        st = loss ? fc_backward(ctx, loss) : fc_ctx_status(ctx);
        if (st == FC_OK) st = fc_optim_step(r->opt_d);
        r->w_est = value_of(w);
        r->gp = value_of(gp);
    }
    fc_release(gx);
    fc_scope_end(ctx);
    return st;
}

static fc_status generator_step(run *r) {
    fc_ctx *ctx = r->ctx;
    fc_scope_begin(ctx);
    fc_tensor *fake = mlp_forward(ctx, &r->g, fc_randn(ctx, FC_F32, (int64_t[]){r->batch, 2}, 2));
    fc_tensor *loss = fc_neg(ctx, fc_mean(ctx, mlp_forward(ctx, &r->d, fake), NULL, 0, false));
    fc_optim_zero_grad(r->opt_g);
    fc_status st = loss ? fc_backward(ctx, loss) : fc_ctx_status(ctx);
    if (st == FC_OK) st = fc_optim_step(r->opt_g);
    fc_scope_end(ctx);
    return st;
}

// ----------------------------------------------------------------------------
// evaluation: how many generated points sit on a mode, and which modes

typedef struct quality {
    double good;   /* share of samples within GOOD_DIST of a mode */
    int modes;     /* modes holding >= 1% of the samples as good ones */
    double mean_d; /* mean distance to the nearest mode */
} quality;

static fc_status evaluate(run *r, int64_t n, quality *q, const char *csv) {
    fc_ctx *ctx = r->ctx;
    float *pts = malloc(sizeof *pts * (size_t)(2 * n));
    if (!pts) return FC_ERR_OOM;
    fc_scope_begin(ctx);
    fc_no_grad_begin(ctx);
    fc_tensor *fake = mlp_forward(ctx, &r->g, fc_randn(ctx, FC_F32, (int64_t[]){n, 2}, 2));
    fc_no_grad_end(ctx);
    fc_status st =
        fake ? fc_tensor_copy_out(pts, sizeof *pts * (size_t)(2 * n), fake) : fc_ctx_status(ctx);
    fc_scope_end(ctx);
    int64_t count[N_MODES] = {0}, good = 0;
    double dsum = 0;
    for (int64_t i = 0; i < n && st == FC_OK; i++) {
        double best = INFINITY;
        int bk = 0;
        for (int k = 0; k < N_MODES; k++) {
            double cx, cy;
            mode_center(k, &cx, &cy);
            double d = hypot(pts[2 * i] - cx, pts[2 * i + 1] - cy);
            if (d < best) best = d, bk = k;
        }
        dsum += best;
        if (best <= GOOD_DIST) good++, count[bk]++;
    }
    q->good = (double)good / (double)n;
    q->mean_d = dsum / (double)n;
    q->modes = 0;
    for (int k = 0; k < N_MODES; k++)
        q->modes += count[k] * 100 >= n;
    FILE *f = csv && st == FC_OK ? ex_csv_open(csv, "x,y", false) : NULL;
    for (int64_t i = 0; f && i < n; i++)
        fprintf(f, "%.6f,%.6f\n", pts[2 * i], pts[2 * i + 1]);
    if (f) fclose(f);
    free(pts);
    return st;
}

/* samples.png: the generated points and the eight mode centres, with
 * gnuplot when it is on PATH (the numbers are in samples.csv either way). */
static void plot_samples(const char *csv, const char *png) {
    if (strchr(csv, '\'') || strchr(png, '\'') || system("command -v gnuplot >/dev/null 2>&1")) {
        fprintf(stderr, "note: no gnuplot (or a quote in the path): %s not drawn\n", png);
        return;
    }
    FILE *g = popen("gnuplot", "w");
    if (!g) return;
    fprintf(g, "set terminal png noenhanced size 700,700\nset output '%s'\n", png);
    fprintf(g, "set datafile separator ','\nset size square\nset grid\n");
    fprintf(g, "set xrange [-2.8:2.8]\nset yrange [-2.8:2.8]\n");
    fprintf(g, "set title 'train_wgan_gp: generated samples and the 8 modes'\n");
    fprintf(g,
            "plot '%s' every ::1 using 1:2 with points pt 7 ps 0.3 title 'generated', "
            "'-' using 1:2 with points pt 6 ps 2 lw 2 title 'modes'\n",
            csv);
    for (int k = 0; k < N_MODES; k++) {
        double cx, cy;
        mode_center(k, &cx, &cy);
        fprintf(g, "%.6f,%.6f\n", cx, cy);
    }
    fprintf(g, "e\n");
    if (pclose(g) != 0) fprintf(stderr, "note: gnuplot failed on %s\n", png);
}

// ----------------------------------------------------------------------------

int main(int argc, char **argv) {
    int64_t steps = 3000, batch = 256, hidden = 128, n_critic = 5, eval_every = 250;
    int64_t eval_samples = 2000, seed = 1, threads = 0, expect_modes = 0;
    bool expect_closer = false;
    double lambda = 0.1, lr = 1e-4, minutes = 5;
    const char *out = "wgan_gp_out";
    ex_arg args[] = {
        {"steps", EX_ARG_INT, &steps, "generator steps", EX_MIN(1)},
        {"batch", EX_ARG_INT, &batch, "batch size", EX_MIN(2)},
        {"hidden", EX_ARG_INT, &hidden, "hidden units per layer (both networks)", EX_MIN(1)},
        {"n-critic", EX_ARG_INT, &n_critic, "critic steps per generator step", EX_MIN(1)},
        {"lambda", EX_ARG_DOUBLE, &lambda, "gradient penalty weight", EX_MIN(0)},
        {"lr", EX_ARG_DOUBLE, &lr, "Adam learning rate (both networks)", EX_POS},
        {"eval-every", EX_ARG_INT, &eval_every, "generator steps between evaluations", EX_MIN(1)},
        {"eval-samples", EX_ARG_INT, &eval_samples, "samples drawn per evaluation", EX_MIN(100)},
        {"minutes", EX_ARG_DOUBLE, &minutes, "wall-clock budget (0: none)", EX_MIN(0)},
        {"threads", EX_ARG_INT, &threads, "threads (0: all cores)", EX_MIN(0)},
        {"seed", EX_ARG_INT, &seed, "seed of the data and the weights", EX_ANY},
        {"expect-modes", EX_ARG_INT, &expect_modes,
         "fail unless the last evaluation covers this "
         "many modes",
         EX_MIN(0)},
        {"expect-closer", EX_ARG_FLAG, &expect_closer,
         "fail unless the samples end closer to "
         "the modes (mean distance) than at the "
         "start by a third",
         EX_ANY},
        {"out", EX_ARG_STRING, &out, "output directory", EX_ANY},
    };
    ex_args_result ar =
        ex_args_parse(argc, argv, args, (int)(sizeof args / sizeof args[0]), NULL, "[options]");
    if (ar != EX_ARGS_OK) return ar == EX_ARGS_HELP ? 0 : 2;
    if (!ex_mkdir_p(out)) return 1;
    char path[3][1024];
    snprintf(path[0], sizeof path[0], "%s/metrics.csv", out);
    snprintf(path[1], sizeof path[1], "%s/samples.csv", out);
    snprintf(path[2], sizeof path[2], "%s/loss.png", out);

    run r = {.batch = batch, .lambda = lambda, .rng = (uint64_t)seed * 0x9e3779b97f4a7c15ULL};
    r.ctx = fc_ctx_new(&(fc_ctx_opts){.threads = (int)threads, .seed = (uint64_t)seed});
    r.buf = malloc(sizeof *r.buf * (size_t)(2 * batch));
    if (!r.ctx || !r.buf) return 1;
    mlp_init(r.ctx, &r.g, 2, hidden, 2);
    mlp_init(r.ctx, &r.d, 2, hidden, 1);
    fc_tensor *pg[6], *pd[6];
    mlp_params(&r.g, pg);
    mlp_params(&r.d, pd);
    fc_optim_opts adam = {.kind = FC_OPTIM_ADAM, .lr = lr, .beta1 = 0.5, .beta2 = 0.9};
    r.opt_g = fc_optim_new(r.ctx, &adam, pg, 6);
    r.opt_d = fc_optim_new(r.ctx, &adam, pd, 6);
    FILE *csv =
        ex_csv_open(path[0], "step,w_estimate,gradient_penalty,good_share,modes,mean_dist", false);
    if (!r.opt_g || !r.opt_d || !csv) {
        fprintf(stderr, "train_wgan_gp: setup failed: %s\n", fc_ctx_error(r.ctx));
        return 1;
    }
    printf("WGAN-GP on 8 Gaussians: hidden %lld, batch %lld, lambda %g, n_critic %lld\n",
           (long long)hidden, (long long)batch, lambda, (long long)n_critic);
    ex_progress bar;
    ex_progress_start(&bar, steps, minutes * 60, "step", 50);
    fc_status st = FC_OK;
    quality q = {0}, q0 = {0};
    int64_t step = 0;
    st = evaluate(&r, eval_samples, &q0, NULL); /* the untrained generator */
    fprintf(csv, "0,,,%.4f,%d,%.5f\n", q0.good, q0.modes, q0.mean_d);
    double t0 = ex_now();
    while (step < steps && st == FC_OK) {
        for (int64_t c = 0; c < n_critic && st == FC_OK; c++)
            st = critic_step(&r);
        if (st == FC_OK) st = generator_step(&r);
        step++;
        ex_progress_update(&bar, step, -r.w_est, (double)step / fmax(1e-9, ex_now() - t0));
        bool last = step == steps || (minutes > 0 && ex_progress_elapsed(&bar) > minutes * 60);
        if (st == FC_OK && (step % eval_every == 0 || last)) {
            st = evaluate(&r, eval_samples, &q, last ? path[1] : NULL);
            fprintf(csv, "%lld,%.6f,%.6f,%.4f,%d,%.5f\n", (long long)step, r.w_est, r.gp, q.good,
                    q.modes, q.mean_d);
            ex_progress_note(&bar,
                             "step %6lld  W estimate %.4f  penalty %.4f  good %.1f%%  modes %d/8  "
                             "mean distance %.4f",
                             (long long)step, r.w_est, r.gp, 100 * q.good, q.modes, q.mean_d);
        }
        if (last) break;
    }
    ex_progress_finish(&bar);
    fclose(csv);
    double secs = ex_now() - t0;
    if (st != FC_OK) {
        fprintf(stderr, "train_wgan_gp: %s\n", fc_ctx_error(r.ctx));
        return 1;
    }
    printf("done: %lld generator steps (%lld critic steps) in %.1f s, %.1f ms per generator "
           "step; final: good %.1f%%, modes %d/8, mean distance %.4f\n",
           (long long)step, (long long)(step * n_critic), secs, 1000 * secs / (double)step,
           100 * q.good, q.modes, q.mean_d);
    const ex_curve curves[] = {
        {2, "W estimate", true}, {3, "gradient penalty", true}, {4, "good share", true}};
    ex_plot_png(path[0], path[2], "train_wgan_gp: 8 Gaussians", "generator step", "value", 1,
                curves, 3);
    snprintf(path[2], sizeof path[2], "%s/samples.png", out);
    plot_samples(path[1], path[2]);
    fc_optim_free(r.opt_g);
    fc_optim_free(r.opt_d);
    mlp_free(&r.g);
    mlp_free(&r.d);
    free(r.buf);
    fc_ctx_free(r.ctx);
    if (expect_closer && !(q.mean_d < q0.mean_d * 2 / 3)) {
        fprintf(stderr,
                "train_wgan_gp: mean distance %.4f, at the start %.4f: not a third closer\n",
                q.mean_d, q0.mean_d);
        return 1;
    }
    if (q.modes < expect_modes) {
        fprintf(stderr, "train_wgan_gp: %d modes covered, expected at least %lld\n", q.modes,
                (long long)expect_modes);
        return 1;
    }
    return 0;
}
