/* SPDX-License-Identifier: MIT */
/* bench_mlp.c - mlp_train (peers/mlp_train.py): Linear(784,512) -> ReLU ->
 * Linear(512,512) -> ReLU -> Linear(512,10), cross-entropy (mean), Adam
 * lr 1e-3, one fixed synthetic batch of 128. One step = zero_grad + forward
 * + loss + backward + optimizer step. PyTorch's default Linear init:
 * weights and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
#include <math.h>
#include <stdlib.h>

#include "bench.h"
#include "fucina.h"

enum { B = 128, IN = 784, H = 512, OUT = 10 };

typedef struct mlp {
    fc_ctx *ctx;
    fc_tensor *p[6]; /* w1 b1 w2 b2 w3 b3 */
    fc_tensor *x, *y;
    fc_optim *opt;
    double loss;
} mlp;

static fc_tensor *uniform(fc_ctx *ctx, const int64_t *shape, int rank, double bound) {
    fc_tensor *u = fc_rand(ctx, FC_F32, shape, rank);
    fc_tensor *v = fc_mul_scalar(ctx, fc_add_scalar(ctx, u, -0.5), 2.0 * bound);
    fc_release(u);
    return v;
}

static fc_status make(mlp *m, int threads) {
    m->ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .seed = 0});
    fc_ctx *ctx = m->ctx;
    const int64_t dims[4] = {IN, H, H, OUT};
    fc_scope_begin(ctx);
    for (int l = 0; l < 3; l++) {
        double bound = 1.0 / sqrt((double)dims[l]);
        m->p[2 * l] = fc_keep(uniform(ctx, (const int64_t[]){dims[l + 1], dims[l]}, 2, bound));
        m->p[2 * l + 1] = fc_keep(uniform(ctx, (const int64_t[]){dims[l + 1]}, 1, bound));
    }
    fc_scope_end(ctx);
    for (int i = 0; i < 6; i++) fc_requires_grad(m->p[i], true);
    m->x = fc_randn(ctx, FC_F32, (const int64_t[]){B, IN}, 2);
    int64_t labels[B];
    uint64_t s = 1;
    for (int i = 0; i < B; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        labels[i] = (int64_t)((s >> 33) % OUT);
    }
    m->y = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){B}, 1, labels);
    m->opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 1e-3}, m->p, 6);
    return fc_ctx_status(ctx);
}

static void step(void *arg) {
    mlp *m = arg;
    fc_ctx *ctx = m->ctx;
    fc_optim_zero_grad(m->opt);
    fc_scope_begin(ctx);
    fc_tensor *h = fc_relu(ctx, fc_linear(ctx, m->x, m->p[0], m->p[1]));
    h = fc_relu(ctx, fc_linear(ctx, h, m->p[2], m->p[3]));
    fc_tensor *loss = fc_cross_entropy(ctx, fc_linear(ctx, h, m->p[4], m->p[5]), m->y, NULL);
    if (fc_backward(ctx, loss) == FC_OK) fc_optim_step(m->opt);
    fc_tensor_item(loss, &m->loss);
    fc_scope_end(ctx);
}

static void destroy(mlp *m) {
    fc_optim_free(m->opt);
    fc_ctx_free(m->ctx);
}

int bench_mlp_train(int argc, char **argv) {
    (void)argc, (void)argv;
    const char *ts = getenv("FUCINA_BENCH_THREADS");
    int threads = ts && atoi(ts) > 0 ? atoi(ts) : 2;
    mlp m = {0};
    if (make(&m, threads) != FC_OK) goto fail;
    double first = 0, last = 0;
    for (int i = 0; i < 200; i++) {
        step(&m);
        if (i == 0) first = m.loss;
        last = m.loss;
    }
    if (fc_ctx_status(m.ctx) != FC_OK) goto fail;
    destroy(&m);
    if (make(&m, threads) != FC_OK) goto fail;
    bench_result r = bench_measure(step, &m);
    if (fc_ctx_status(m.ctx) != FC_OK) goto fail;
    printf("{\"workload\": \"mlp_train\", ");
    bench_json_env(stdout, threads);
    printf(", \"params\": %d, ", IN * H + H + H * H + H + H * OUT + OUT);
    bench_json_stat(stdout, "ms_per_step", &r, -1e3);
    printf(", \"loss_step1\": %.6f, \"loss_step200\": %.6f, ", first, last);
    bench_json_raw(stdout, &r);
    printf("}\n");
    destroy(&m);
    return 0;
fail:
    fprintf(stderr, "fucina-bench mlp_train: %s\n", fc_ctx_error(m.ctx));
    destroy(&m);
    return 1;
}
