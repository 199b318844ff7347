/* SPDX-License-Identifier: MIT */
/* rel_models.h - two small models built from the public API only, shared by
 * the reliability tests (OOM sweeps, threads, determinism): a two-layer MLP
 * classifier and a one-block GPT-like language model (token + position
 * embeddings, pre-norm causal self-attention, a GELU MLP, a head tied to the
 * token embedding, cross-entropy on the next token).
 *
 * Everything tolerates NULL: a failed creation or op yields NULL, the NULL
 * flows through the rest of the forward pass (the context keeps the first
 * error), so an out-of-memory sweep can fail any allocation and the caller
 * checks the context once. Intermediate tensors are not released here:
 * call these inside fc_scope_begin/fc_scope_end. Header-only and static so each test binary gets
 * its own copy. */
#ifndef FUCINA_TESTS_REL_MODELS_H
#define FUCINA_TESTS_REL_MODELS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fucina.h"

static inline void rel_release_all(fc_tensor **p, int n) {
    for (int i = 0; i < n; i++) {
        fc_release(p[i]);
        p[i] = NULL;
    }
}

/* A parameter of n ones (a norm's gain). */
static inline fc_tensor *rel_param_ones(fc_ctx *ctx, int64_t n) {
    fc_tensor *t = fc_ones(ctx, FC_F32, &n, 1);
    if (t && fc_requires_grad(t, true) != FC_OK) {
        fc_release(t);
        return NULL;
    }
    return t;
}

/* ---- MLP: x [N, in] -> linear -> gelu -> linear -> logits [N, out] ---------- */

enum { REL_MLP_NP = 4 };
typedef struct rel_mlp {
    fc_tensor *p[REL_MLP_NP]; /* w1 [hid, in], b1 [hid], w2 [out, hid], b2 [out] */
} rel_mlp;

static inline void rel_mlp_init(fc_ctx *ctx, rel_mlp *m, int64_t in, int64_t hid, int64_t out) {
    m->p[0] = fc_param_randn(ctx, FC_F32, (const int64_t[]){hid, in}, 2, 1.0 / sqrt((double)in));
    m->p[1] = fc_param_zeros(ctx, FC_F32, (const int64_t[]){hid}, 1);
    m->p[2] = fc_param_randn(ctx, FC_F32, (const int64_t[]){out, hid}, 2, 1.0 / sqrt((double)hid));
    m->p[3] = fc_param_zeros(ctx, FC_F32, (const int64_t[]){out}, 1);
}

static inline fc_tensor *rel_mlp_logits(fc_ctx *ctx, const rel_mlp *m, fc_tensor *x) {
    fc_tensor *h = fc_gelu(ctx, fc_linear(ctx, x, m->p[0], m->p[1]), false);
    return fc_linear(ctx, h, m->p[2], m->p[3]);
}

/* ---- causal self-attention: x [B, T, C] -> [B, T, C] ------------------------- */

/* A bool [t, t] mask, true where column > row (the future); t <= 64. */
static inline fc_tensor *rel_causal_mask(fc_ctx *ctx, int64_t t) {
    uint8_t m[64 * 64];
    if (t < 1 || t > 64) return NULL;
    for (int64_t i = 0; i < t; i++)
        for (int64_t j = 0; j < t; j++)
            m[i * t + j] = j > i;
    return fc_tensor_from_data(ctx, FC_BOOL, (const int64_t[]){t, t}, 2, m);
}

/* wqkv [3C, C] (q, k, v stacked), wo [C, C]; `heads` heads split C. */
static inline fc_tensor *rel_attention(fc_ctx *ctx, fc_tensor *x, fc_tensor *wqkv, fc_tensor *wo,
                                       fc_tensor *mask, int64_t heads) {
    int64_t b = fc_tensor_dim(x, 0), t = fc_tensor_dim(x, 1), c = fc_tensor_dim(x, 2);
    int64_t d = heads > 0 ? c / heads : 1;
    fc_tensor *qkv = fc_linear(ctx, x, wqkv, NULL); /* [B, T, 3C] */
    fc_tensor *parts[3] = {NULL, NULL, NULL};
    if (qkv) fc_split(ctx, qkv, 2, (const int64_t[]){c, c, c}, 3, parts);
    fc_tensor *hd[3];
    for (int i = 0; i < 3; i++) /* [B, T, C] -> [B, H, T, D]; the split views are copied */
        hd[i] = fc_transpose(ctx, fc_reshape(ctx, parts[i], (const int64_t[]){b, t, heads, d}, 4),
                             1, 2);
    fc_tensor *att = fc_mul_scalar(ctx, fc_matmul(ctx, hd[0], fc_transpose(ctx, hd[1], 2, 3)),
                                   1.0 / sqrt((double)d));
    att = fc_softmax(ctx, fc_masked_fill(ctx, att, mask, -INFINITY), -1);
    fc_tensor *y = fc_matmul(ctx, att, hd[2]); /* [B, H, T, D] */
    y = fc_reshape(ctx, fc_transpose(ctx, y, 1, 2), (const int64_t[]){b, t, c}, 3);
    return fc_linear(ctx, y, wo, NULL);
}

/* ---- one-block GPT-like model -------------------------------------------------- */

enum { REL_GPT_NP = 10 };
typedef struct rel_gpt {
    int64_t vocab, ctx_len, dim, heads;
    double dropout; /* on the attention output; 0 (the default) for none */
    /* wte [V, C], wpe [T, C], ln1 w/b [C], wqkv [3C, C], wo [C, C],
     * ln2 w/b [C], wfc [4C, C], wproj [C, 4C]; the head is wte (tied). */
    fc_tensor *p[REL_GPT_NP];
} rel_gpt;

static inline void rel_gpt_init(fc_ctx *ctx, rel_gpt *m, int64_t vocab, int64_t ctx_len,
                                int64_t dim, int64_t heads) {
    int64_t c = dim;
    m->vocab = vocab;
    m->ctx_len = ctx_len;
    m->dim = dim;
    m->heads = heads;
    m->dropout = 0;
    m->p[0] = fc_param_randn(ctx, FC_F32, (const int64_t[]){vocab, c}, 2, 0.1);
    m->p[1] = fc_param_randn(ctx, FC_F32, (const int64_t[]){ctx_len, c}, 2, 0.1);
    m->p[2] = rel_param_ones(ctx, c);
    m->p[3] = fc_param_zeros(ctx, FC_F32, (const int64_t[]){c}, 1);
    m->p[4] = fc_param_randn(ctx, FC_F32, (const int64_t[]){3 * c, c}, 2, 0.2);
    m->p[5] = fc_param_randn(ctx, FC_F32, (const int64_t[]){c, c}, 2, 0.2);
    m->p[6] = rel_param_ones(ctx, c);
    m->p[7] = fc_param_zeros(ctx, FC_F32, (const int64_t[]){c}, 1);
    m->p[8] = fc_param_randn(ctx, FC_F32, (const int64_t[]){4 * c, c}, 2, 0.2);
    m->p[9] = fc_param_randn(ctx, FC_F32, (const int64_t[]){c, 4 * c}, 2, 0.1);
}

/* ids [B, T] (i64, T <= ctx_len), targets [B * T] (i64): the mean next-token
 * cross-entropy. */
static inline fc_tensor *rel_gpt_loss(fc_ctx *ctx, const rel_gpt *m, fc_tensor *ids,
                                      fc_tensor *targets) {
    fc_tensor *const *p = m->p;
    int64_t b = fc_tensor_dim(ids, 0), t = fc_tensor_dim(ids, 1), c = m->dim;
    fc_tensor *pos = fc_narrow(ctx, p[1], 0, 0, t);
    fc_tensor *x = fc_add(ctx, fc_embedding(ctx, p[0], ids), pos); /* [B, T, C] */
    fc_tensor *mask = rel_causal_mask(ctx, t);
    fc_tensor *a =
        rel_attention(ctx, fc_layer_norm(ctx, x, p[2], p[3], 1e-5), p[4], p[5], mask, m->heads);
    if (m->dropout > 0) a = fc_dropout(ctx, a, m->dropout, true);
    x = fc_add(ctx, x, a);
    fc_tensor *h =
        fc_gelu(ctx, fc_linear(ctx, fc_layer_norm(ctx, x, p[6], p[7], 1e-5), p[8], NULL), true);
    x = fc_add(ctx, x, fc_linear(ctx, h, p[9], NULL));
    /* tied head: x @ wte^T */
    fc_tensor *logits =
        fc_linear(ctx, fc_reshape(ctx, x, (const int64_t[]){b * t, c}, 2), p[0], NULL);
    return fc_cross_entropy(ctx, logits, targets, NULL);
}

#endif /* FUCINA_TESTS_REL_MODELS_H */
