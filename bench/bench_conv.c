/* bench_conv.c - conv_train (peers/conv_train.py), its conv-layer part:
 * "conv3x3", a ResNet-style Conv2d(64, 64, 3, padding=1, bias=False) on x
 * [16, 64, 32, 32]; one iteration = forward + backward of sum(y * g) for a
 * fixed g (gradients for x and w; the gradients are zeroed first, as the
 * peer sets them to None). GFLOP/s counts 3 * 2*N*Cout*H*W*Cin*9 (forward,
 * input gradient, weight gradient), as the peer does.
 *
 * The peer's other part, "cnn_train" (Conv2d(1,32,5) -> ReLU -> MaxPool2d
 * -> Conv2d(32,64,5) -> ReLU -> MaxPool2d -> Linear, Adam, ms/step and the
 * loss after 100 steps), needs max pooling, which fucina does not have yet.
 * It belongs beside measure_conv3x3 as its own measure function whose keys
 * (params, ms_per_step, loss_step1, loss_step100, raw) bench_conv_train
 * prints before "conv3x3"; until then the line carries only "conv3x3". */
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
    b->opts = fc_conv2d_defaults();
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
    bench_result conv;
    if (!measure_conv3x3(threads, &conv)) return 1;
    double flops = 3.0 * 2 * N * C * HW * HW * C * K * K;
    printf("{\"workload\": \"conv_train\", ");
    bench_json_env(stdout, threads);
    printf(", \"conv3x3\": {");
    bench_json_stat(stdout, "ms_per_iter", &conv, -1e3);
    printf(", ");
    bench_json_stat(stdout, "gflops", &conv, flops / 1e9);
    printf(", ");
    bench_json_raw(stdout, &conv);
    printf("}}\n");
    return 0;
}
