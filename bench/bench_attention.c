/* SPDX-License-Identifier: MIT */
/* bench_attention.c - attention: causal self-attention forward + backward
 * at B=1, H=8, T=1024, d_head 64 (f32), the fused fc_attention (flash
 * attention: tiles, online softmax, logsumexp saved, scores recomputed in
 * backward) beside the composite a model writes without it (fc_matmul of q
 * and k^T, scaled, a [T, T] causal mask of 0 / -inf added, fc_softmax,
 * fc_matmul with v). One step = forward + backward from a fixed output
 * gradient into q, k and v, inside one scope, gradients dropped after.
 *
 * Reported per variant: ms per step (bench.h's protocol), and memory:
 * fc_ctx_stats.bytes_peak of a fresh context over 2 steps, minus what it
 * holds at rest (the inputs, the output gradient and the composite's mask,
 * with the pool trimmed): the memory the step itself needs. The composite
 * holds several [B, H, T, T] tensors (32 MiB each here); the fused op holds
 * the output, the logsumexp and per-thread tiles. The two outputs are
 * compared (max abs difference) so a wrong fast path cannot pass. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "fucina.h"

enum { AB = 1, AH = 8, AT = 1024, AD = 64 };

typedef struct att {
    fc_ctx *ctx;
    fc_tensor *q, *k, *v, *g, *mask;
    bool fused;
} att;

static fc_tensor *forward(att *a) {
    fc_ctx *ctx = a->ctx;
    if (a->fused)
        return fc_attention(ctx, a->q, a->k, a->v, NULL, &(fc_attention_opts){.causal = true});
    fc_tensor *s = fc_mul_scalar(ctx, fc_matmul(ctx, a->q, fc_transpose(ctx, a->k, 2, 3)),
                                 1 / sqrt((double)AD));
    return fc_matmul(ctx, fc_softmax(ctx, fc_add(ctx, s, a->mask), -1), a->v);
}

static void step(void *p) {
    att *a = p;
    fc_scope_begin(a->ctx);
    fc_tensor *y = forward(a);
    if (y) fc_backward_with(a->ctx, y, a->g, false);
    fc_scope_end(a->ctx);
    fc_tensor *ps[3] = {a->q, a->k, a->v};
    fc_zero_grad(ps, 3);
}

static fc_status make(att *a, bool fused, int threads) {
    memset(a, 0, sizeof *a);
    a->fused = fused;
    a->ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .seed = 1});
    if (!a->ctx) return FC_ERR_OOM;
    const int64_t sh[4] = {AB, AH, AT, AD}, ms[2] = {AT, AT};
    a->q = fc_param_randn(a->ctx, FC_F32, sh, 4, 1);
    a->k = fc_param_randn(a->ctx, FC_F32, sh, 4, 1);
    a->v = fc_param_randn(a->ctx, FC_F32, sh, 4, 1);
    a->g = fc_randn(a->ctx, FC_F32, sh, 4);
    if (!fused) {
        float *m = malloc(sizeof *m * AT * AT);
        if (!m) return FC_ERR_OOM;
        for (int64_t i = 0; i < AT; i++)
            for (int64_t j = 0; j < AT; j++)
                m[i * AT + j] = j <= i ? 0.0f : -INFINITY;
        a->mask = fc_tensor_from_data(a->ctx, FC_F32, ms, 2, m);
        free(m);
    }
    return fc_ctx_status(a->ctx);
}

static void destroy(att *a) {
    fc_tensor *ts[5] = {a->q, a->k, a->v, a->g, a->mask};
    for (int i = 0; i < 5; i++)
        fc_release(ts[i]);
    fc_ctx_free(a->ctx);
}

/* The step's own memory (see the file comment) and the output. */
static fc_status memory_of(bool fused, int threads, long long *above, float **out) {
    att a;
    fc_status st = make(&a, fused, threads);
    fc_ctx_stats s0, s1;
    fc_ctx_pool_trim(a.ctx);
    fc_ctx_get_stats(a.ctx, &s0);
    for (int i = 0; i < 2 && st == FC_OK; i++) {
        step(&a);
        st = fc_ctx_status(a.ctx);
    }
    fc_ctx_get_stats(a.ctx, &s1);
    *above = s1.bytes_peak - s0.bytes_live;
    fc_no_grad_begin(a.ctx);
    fc_tensor *y = st == FC_OK ? forward(&a) : NULL;
    fc_no_grad_end(a.ctx);
    *out = malloc(sizeof **out * AB * AH * AT * AD);
    if (y && *out) st = fc_tensor_copy_out(*out, sizeof **out * AB * AH * AT * AD, y);
    if (st != FC_OK) fprintf(stderr, "fucina-bench attention: %s\n", fc_ctx_error(a.ctx));
    fc_release(y);
    destroy(&a);
    return y ? st : FC_ERR_STATE;
}

int bench_attention(int argc, char **argv) {
    (void)argc, (void)argv;
    const char *ts = getenv("FUCINA_BENCH_THREADS");
    int threads = ts && atoi(ts) > 0 ? atoi(ts) : 2;
    long long mem[2];
    float *out[2] = {NULL, NULL};
    for (int f = 0; f < 2; f++)
        if (memory_of(f, threads, &mem[f], &out[f]) != FC_OK) return 1;
    double diff = 0;
    for (int64_t i = 0; i < (int64_t)AB * AH * AT * AD; i++)
        diff = fmax(diff, fabs((double)out[0][i] - (double)out[1][i]));
    free(out[0]);
    free(out[1]);
    bench_result r[2];
    for (int f = 0; f < 2; f++) {
        att a;
        if (make(&a, f, threads) != FC_OK) {
            fprintf(stderr, "fucina-bench attention: %s\n", fc_ctx_error(a.ctx));
            destroy(&a);
            return 1;
        }
        r[f] = bench_measure(step, &a);
        fc_status st = fc_ctx_status(a.ctx);
        destroy(&a);
        if (st != FC_OK) return 1;
    }
    printf("{\"workload\": \"attention\", ");
    bench_json_env(stdout, threads);
    printf(", \"B\": %d, \"H\": %d, \"T\": %d, \"d_head\": %d, \"causal\": true", AB, AH, AT, AD);
    const char *name[2] = {"composite", "fused"};
    for (int f = 0; f < 2; f++) {
        printf(", \"%s\": {", name[f]);
        bench_json_stat(stdout, "ms_fwd_bwd", &r[f], -1e3);
        printf(", \"bytes_peak_above_rest\": %lld, \"other_cpu_cores\": %.3f}", mem[f],
               r[f].other_cpu_cores);
    }
    printf(", \"time_ratio_fused_over_composite\": %.4f, \"memory_ratio_fused_over_composite\": "
           "%.4f, \"max_abs_diff\": %.3g}\n",
           r[1].median_s / r[0].median_s, (double)mem[1] / (double)mem[0], diff);
    return 0;
}
