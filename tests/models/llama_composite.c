/* SPDX-License-Identifier: MIT */
/* llama_composite.c - the Llama blocks of models/llama/blocks.h composed
 * from public elementwise ops, matmuls and softmax, as the model ran them
 * before the fused ops (fc_rope, fc_swiglu, fc_attention). Kept only as a
 * cross-check: test_llama_blocks compares the fused blocks against these
 * (and both against double loops). Everything is differentiable because
 * every op used is; intermediates live in a scope and only the result is
 * kept. */
#include <math.h>
#include <stdlib.h>

#include "llama_composite.h"

/* Each block works in its own scope and keeps only its result; this hands
 * that result back as an op's would be, registered in the caller's scope:
 * a new handle on the same storage (fc_contiguous of a contiguous tensor,
 * an identity node on the tape), made after the block's scope closed. */
static fc_tensor *in_caller_scope(fc_ctx *ctx, fc_tensor *kept) {
    fc_tensor *r = kept ? fc_contiguous(ctx, kept) : NULL;
    fc_release(kept);
    return r;
}

/* cos and sin of (pos0 + t) * scale * base^(-2i / n_dims), as [T, 1, n/2]
 * tables (broadcast over batch and heads), computed in double and given
 * in dtype. */
static fc_status rope_tables(fc_ctx *ctx, fc_dtype dtype, int64_t T, int64_t half, int64_t n_dims,
                             double base, double scale, int64_t pos0, fc_tensor **cos_t,
                             fc_tensor **sin_t) {
    double *c = malloc(sizeof(double) * (size_t)(T * half));
    double *s = malloc(sizeof(double) * (size_t)(T * half));
    if (!c || !s) {
        free(c);
        free(s);
        return fc_ctx_fail(ctx, FC_ERR_OOM, "llama rope: out of memory for the tables");
    }
    for (int64_t i = 0; i < half; i++) {
        double freq = scale * pow(base, -2.0 * (double)i / (double)n_dims);
        for (int64_t t = 0; t < T; t++) {
            double a = (double)(pos0 + t) * freq;
            c[t * half + i] = cos(a);
            s[t * half + i] = sin(a);
        }
    }
    int64_t shape[3] = {T, 1, half};
    fc_tensor *ct = fc_tensor_from_data(ctx, FC_F64, shape, 3, c);
    fc_tensor *st = fc_tensor_from_data(ctx, FC_F64, shape, 3, s);
    free(c);
    free(s);
    /* in x's dtype: products need one dtype (f64 for the gradchecks) */
    *cos_t = fc_to(ctx, ct, dtype);
    *sin_t = fc_to(ctx, st, dtype);
    fc_release(ct);
    fc_release(st);
    return *cos_t && *sin_t ? FC_OK : fc_ctx_status(ctx);
}

fc_tensor *lc_rope(fc_ctx *ctx, fc_tensor *x, int64_t n_dims, double base, double scale,
                   int64_t pos0) {
    if (!x) return NULL;
    const int64_t *s = fc_tensor_shape(x);
    int64_t T = s[1], D = s[3], half = n_dims / 2;
    fc_scope_begin(ctx);
    fc_tensor *cos_t = NULL, *sin_t = NULL, *out = NULL;
    if (rope_tables(ctx, fc_tensor_dtype(x), T, half, n_dims, base, scale, pos0, &cos_t, &sin_t) ==
        FC_OK) {
        fc_tensor *xr = n_dims == D ? x : fc_narrow(ctx, x, 3, 0, n_dims);
        fc_tensor *x0 = fc_slice(ctx, xr, 3, 0, n_dims, 2);
        fc_tensor *x1 = fc_slice(ctx, xr, 3, 1, n_dims, 2);
        fc_tensor *o0 = fc_sub(ctx, fc_mul(ctx, x0, cos_t), fc_mul(ctx, x1, sin_t));
        fc_tensor *o1 = fc_add(ctx, fc_mul(ctx, x0, sin_t), fc_mul(ctx, x1, cos_t));
        fc_tensor *pair[2] = {o0, o1};
        fc_tensor *rot = o0 && o1 ? fc_stack(ctx, pair, 2, 4) : NULL;
        rot = fc_reshape(ctx, rot, (int64_t[]){s[0], T, s[2], n_dims}, 4);
        if (n_dims == D) {
            out = rot;
        } else {
            fc_tensor *parts[2] = {rot, fc_narrow(ctx, x, 3, n_dims, D - n_dims)};
            out = parts[0] && parts[1] ? fc_concat(ctx, parts, 2, 3) : NULL;
        }
    }
    fc_keep(out);
    fc_scope_end(ctx);
    return in_caller_scope(ctx, out);
}

fc_tensor *lc_swiglu(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    fc_scope_begin(ctx);
    fc_tensor *out = fc_keep(fc_mul(ctx, fc_silu(ctx, a), b));
    fc_scope_end(ctx);
    return in_caller_scope(ctx, out);
}

/* The additive causal mask [G * T, S] of G stacked query groups: row
 * g * T + i is query i, 0 where key j <= i + (S - T), -inf past it. */
static fc_tensor *causal_mask(fc_ctx *ctx, fc_dtype dtype, int64_t G, int64_t T, int64_t S) {
    float *m = malloc(sizeof(float) * (size_t)(G * T * S));
    if (!m) {
        fc_ctx_fail(ctx, FC_ERR_OOM, "llama attention: out of memory for the mask");
        return NULL;
    }
    for (int64_t r = 0; r < G * T; r++)
        for (int64_t j = 0; j < S; j++)
            m[r * S + j] = j <= r % T + (S - T) ? 0.0f : -INFINITY;
    fc_tensor *t = fc_tensor_from_data(ctx, FC_F32, (int64_t[]){G * T, S}, 2, m);
    free(m);
    if (!t || dtype == FC_F32) return t;
    fc_tensor *c = fc_to(ctx, t, dtype);
    fc_release(t);
    return c;
}

/* Grouped-query attention without copying K or V: the G query heads that
 * share kv head j (heads j*G .. j*G + G - 1, so query head h reads kv head
 * h / G) are stacked as G * T rows of one product with that head's keys,
 * q [B, Hq, T, D] -> [B, Hkv, G * T, D] (a copy of q only, which a decode
 * step keeps at one row per head), and the result is unstacked. */
fc_tensor *lc_attention(fc_ctx *ctx, fc_tensor *q, fc_tensor *k, fc_tensor *v) {
    if (!q || !k || !v) return NULL;
    const int64_t *qs = fc_tensor_shape(q), *ks = fc_tensor_shape(k);
    int64_t B = qs[0], Hq = qs[1], T = qs[2], D = qs[3], Hkv = ks[1], S = ks[2], G = Hq / Hkv;
    fc_scope_begin(ctx);
    fc_tensor *qg = G == 1 ? q : fc_reshape(ctx, q, (int64_t[]){B, Hkv, G * T, D}, 4);
    fc_tensor *scores = fc_matmul(ctx, qg, fc_transpose(ctx, k, 2, 3));
    scores = fc_mul_scalar(ctx, scores, 1.0 / sqrt((double)D));
    if (T > 1) scores = fc_add(ctx, scores, causal_mask(ctx, fc_tensor_dtype(q), G, T, S));
    fc_tensor *o = fc_matmul(ctx, fc_softmax(ctx, scores, -1), v);
    if (G > 1) o = fc_reshape(ctx, o, (int64_t[]){B, Hq, T, D}, 4);
    fc_tensor *out = fc_keep(o);
    fc_scope_end(ctx);
    return in_caller_scope(ctx, out);
}
