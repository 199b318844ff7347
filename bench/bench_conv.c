/* SPDX-License-Identifier: MIT */
/* bench_conv.c - conv_train (peers/conv_train.py), its conv-layer part:
 * "conv3x3", a ResNet-style Conv2d(64, 64, 3, padding=1, bias=False) on x
 * [16, 64, 32, 32]; one iteration = forward + backward of sum(y * g) for a
 * fixed g (gradients for x and w; the gradients are zeroed first, as the
 * peer sets them to None). GFLOP/s counts 3 * 2*N*Cout*H*W*Cin*9 (forward,
 * input gradient, weight gradient), as the peer does.
 *
 * And the peer's other part, the training step of the Fashion-MNIST CNN
 * (examples/train_cnn.c's model: Conv2d(1,32,5,pad 2) -> ReLU -> MaxPool2d
 * -> Conv2d(32,64,5,pad 2) -> ReLU -> MaxPool2d -> Linear(3136,10),
 * PyTorch's default init, cross-entropy, Adam lr 1e-3) on one fixed
 * synthetic batch x ~ N(0,1) [64,1,28,28] with uniform labels, reused every
 * step: ms/step (zero_grad + forward + loss + backward + step) and the
 * losses of steps 1 and 100 of a fresh model (keys params, ms_per_step,
 * loss_step1, loss_step100, raw). The draws differ from PyTorch's, so the
 * losses agree in kind, not in digits. */
#include <math.h>
#include <stdlib.h>

#include "bench.h"
#include "fucina.h"

enum { N = 16, C = 64, HW = 32, K = 3 };

typedef struct conv3x3 {
    fc_ctx *ctx;
    fc_tensor *x, *w, *g;
    fc_conv2d_opts opts;
} conv3x3;

static fc_status conv3x3_make(conv3x3 *b, int threads) {
    b->ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .seed = 2});
    fc_ctx *ctx = b->ctx;
    b->x = fc_param_randn(ctx, FC_F32, (const int64_t[]){N, C, HW, HW}, 4, 1.0);
    b->w = fc_param_randn(ctx, FC_F32, (const int64_t[]){C, C, K, K}, 4, 0.05);
    b->g = fc_randn(ctx, FC_F32, (const int64_t[]){N, C, HW, HW}, 4);
    b->opts = fc_conv2d_opts_default();
    b->opts.padding[0] = b->opts.padding[1] = 1;
    return fc_ctx_status(ctx);
}

static void conv3x3_iter(void *arg) {
    conv3x3 *b = arg;
    fc_ctx *ctx = b->ctx;
    fc_zero_grad((fc_tensor *[]){b->x, b->w}, 2);
    fc_scope_begin(ctx);
    fc_tensor *y = fc_conv2d(ctx, b->x, b->w, NULL, &b->opts);
    if (y) fc_backward_with(ctx, y, b->g, false); /* d sum(y * g) / dy = g */
    fc_scope_end(ctx);
}

static void conv3x3_free(conv3x3 *b) {
    fc_release(b->x);
    fc_release(b->w);
    fc_release(b->g);
    fc_ctx_free(b->ctx);
}

/* ---- the CNN training step ----------------------------------------------------------- */

enum { CB = 64, NP = 6 };

typedef struct cnn_step {
    fc_ctx *ctx;
    fc_tensor *p[NP], *x, *y;
    fc_optim *opt;
    double loss;
} cnn_step;

static fc_tensor *uniform_param(fc_ctx *ctx, const int64_t *shape, int rank, double bound) {
    fc_tensor *t = fc_rand(ctx, FC_F32, shape, rank);
    fc_tensor *lo = fc_scalar(ctx, FC_F32, -bound);
    if (t && lo && fc_mul_scalar_(t, 2 * bound) == FC_OK && fc_add_(t, lo) == FC_OK)
        fc_requires_grad(t, true);
    fc_release(lo);
    return t;
}

static fc_status cnn_make(cnn_step *b, int threads) {
    b->ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .seed = 0});
    fc_ctx *ctx = b->ctx;
    const int64_t shapes[3][4] = {{32, 1, 5, 5}, {64, 32, 5, 5}, {10, 3136}};
    const int ranks[3] = {4, 4, 2};
    const double fan_in[3] = {25, 800, 3136};
    for (int l = 0; l < 3; l++) {
        b->p[2 * l] = uniform_param(ctx, shapes[l], ranks[l], 1 / sqrt(fan_in[l]));
        b->p[2 * l + 1] = uniform_param(ctx, shapes[l], 1, 1 / sqrt(fan_in[l]));
    }
    b->x = fc_randn(ctx, FC_F32, (const int64_t[]){CB, 1, 28, 28}, 4);
    int64_t labels[CB];
    uint64_t s = 1;
    for (int i = 0; i < CB; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        labels[i] = (int64_t)((s >> 33) % 10);
    }
    b->y = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){CB}, 1, labels);
    if (fc_ctx_status(ctx) == FC_OK)
        b->opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 1e-3}, b->p, NP);
    return fc_ctx_status(ctx);
}

static fc_tensor *cnn_block(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *bias) {
    fc_conv2d_opts co = fc_conv2d_opts_default();
    co.padding[0] = co.padding[1] = 2;
    return fc_max_pool2d(ctx, fc_relu(ctx, fc_conv2d(ctx, x, w, bias, &co)),
                         &(fc_pool2d_opts){.kernel = {2, 2}});
}

static void cnn_iter(void *arg) {
    cnn_step *b = arg;
    fc_ctx *ctx = b->ctx;
    fc_optim_zero_grad(b->opt);
    fc_scope_begin(ctx);
    fc_tensor *h = cnn_block(ctx, cnn_block(ctx, b->x, b->p[0], b->p[1]), b->p[2], b->p[3]);
    h = fc_reshape(ctx, h, (const int64_t[]){CB, 3136}, 2);
    fc_tensor *loss = fc_cross_entropy(ctx, fc_linear(ctx, h, b->p[4], b->p[5]), b->y, NULL);
    if (loss && fc_backward(ctx, loss) == FC_OK && fc_optim_step(b->opt) == FC_OK)
        fc_tensor_item(loss, &b->loss);
    fc_scope_end(ctx);
}

static void cnn_free(cnn_step *b) {
    fc_optim_free(b->opt);
    for (int i = 0; i < NP; i++)
        fc_release(b->p[i]);
    fc_release(b->x);
    fc_release(b->y);
    fc_ctx_free(b->ctx);
}

/* Steps 1 and 100 of a fresh model, then the timing of another fresh one. */
static bool measure_cnn(int threads, bench_result *r, double *loss1, double *loss100,
                        int64_t *params) {
    cnn_step b = {0};
    bool ok = cnn_make(&b, threads) == FC_OK;
    for (int i = 0; ok && i < 100; i++) {
        cnn_iter(&b);
        if (i == 0) *loss1 = b.loss;
        ok = fc_ctx_status(b.ctx) == FC_OK;
    }
    *loss100 = b.loss;
    *params = 0;
    for (int i = 0; i < NP; i++)
        *params += fc_tensor_numel(b.p[i]);
    if (!ok) fprintf(stderr, "fucina-bench conv_train: %s\n", fc_ctx_error(b.ctx));
    cnn_free(&b);
    if (!ok) return false;
    b = (cnn_step){0};
    ok = cnn_make(&b, threads) == FC_OK;
    if (ok) {
        *r = bench_measure(cnn_iter, &b);
        ok = fc_ctx_status(b.ctx) == FC_OK;
    }
    if (!ok) fprintf(stderr, "fucina-bench conv_train: %s\n", fc_ctx_error(b.ctx));
    cnn_free(&b);
    return ok;
}

/* Measures conv3x3; prints the error and returns false on failure. */
static bool measure_conv3x3(int threads, bench_result *r) {
    conv3x3 b = {0};
    bool ok = conv3x3_make(&b, threads) == FC_OK;
    if (ok) {
        *r = bench_measure(conv3x3_iter, &b);
        ok = fc_ctx_status(b.ctx) == FC_OK && fc_grad(b.w) != NULL;
    }
    if (!ok) fprintf(stderr, "fucina-bench conv_train: %s\n", fc_ctx_error(b.ctx));
    conv3x3_free(&b);
    return ok;
}

int bench_conv_train(int argc, char **argv) {
    (void)argc, (void)argv;
    const char *ts = getenv("FUCINA_BENCH_THREADS");
    int threads = ts && atoi(ts) > 0 ? atoi(ts) : 2;
    bench_result conv, step;
    double loss1 = NAN, loss100 = NAN;
    int64_t params = 0;
    if (!measure_cnn(threads, &step, &loss1, &loss100, &params)) return 1;
    if (!measure_conv3x3(threads, &conv)) return 1;
    double flops = 3.0 * 2 * N * C * HW * HW * C * K * K;
    printf("{\"workload\": \"conv_train\", ");
    bench_json_env(stdout, threads);
    printf(", \"params\": %lld, ", (long long)params);
    bench_json_stat(stdout, "ms_per_step", &step, -1e3);
    printf(", \"loss_step1\": %.6f, \"loss_step100\": %.6f", loss1, loss100);
    printf(", \"conv3x3\": {");
    bench_json_stat(stdout, "ms_per_iter", &conv, -1e3);
    printf(", ");
    bench_json_stat(stdout, "gflops", &conv, flops / 1e9);
    printf(", ");
    bench_json_raw(stdout, &conv);
    printf("}, ");
    bench_json_raw(stdout, &step);
    printf("}\n");
    return 0;
}
