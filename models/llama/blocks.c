/* SPDX-License-Identifier: MIT */
/* llama/blocks.c - the model's rotary embedding, SwiGLU and grouped-query
 * attention (see blocks.h): each is one fused op of fucina/attention.h,
 * except rope with per-frequency factors and the sliding window's mask,
 * which are built here from public ops. tests/models/llama_composite.c
 * keeps the same blocks composed from elementwise ops and matmuls, which
 * test_llama_blocks compares these against. */
#include <math.h>
#include <stdlib.h>

#include "llama/blocks.h"

fc_tensor *fc__llama_rope(fc_ctx *ctx, fc_tensor *x, int64_t n_dims, double base, double scale,
                          int64_t pos0) {
    return fc__llama_rope_mode(ctx, x, FC_ROPE_NORM, n_dims, base, scale, pos0);
}

fc_tensor *fc__llama_rope_mode(fc_ctx *ctx, fc_tensor *x, fc_rope_mode mode, int64_t n_dims,
                               double base, double scale, int64_t pos0) {
    fc_rope_opts o = {
        .mode = mode, .n_dims = n_dims, .freq_base = base, .freq_scale = scale, .pos_offset = pos0};
    return fc_rope(ctx, x, &o);
}

/* cos or sin of every (position, pair) angle, as a tensor of x's dtype
 * shaped to broadcast against the pair halves (shape, rank given). The
 * angles are computed in double, as the fused op does. */
static fc_tensor *table(fc_ctx *ctx, fc_dtype dt, int64_t T, int64_t half, double base,
                        double scale, const float *factors, int64_t pos0, bool sine,
                        const int64_t *shape, int rank) {
    double *v = malloc(sizeof *v * (size_t)(T * half));
    if (!v) {
        fc_ctx_fail(ctx, FC_ERR_OOM, "llama rope: out of memory for a %lld x %lld table",
                    (long long)T, (long long)half);
        return NULL;
    }
    for (int64_t i = 0; i < half; i++) {
        double inv = scale * pow(base, -2.0 * (double)i / (double)(2 * half)) / factors[i];
        for (int64_t t = 0; t < T; t++) {
            double a = (double)(pos0 + t) * inv;
            v[t * half + i] = sine ? sin(a) : cos(a);
        }
    }
    fc_tensor *d = fc_tensor_from_data(ctx, FC_F64, shape, rank, v);
    free(v);
    fc_tensor *y = d && dt != FC_F64 ? fc_to(ctx, d, dt) : fc_retain(d);
    fc_release(d);
    return y;
}

fc_tensor *fc__llama_rope_factors(fc_ctx *ctx, fc_tensor *x, fc_rope_mode mode, int64_t n_dims,
                                  double base, double scale, const float *factors, int64_t pos0) {
    if (!x) return NULL;
    const int64_t *s = fc_tensor_shape(x); /* [B, T, H, D] */
    int64_t B = s[0], T = s[1], H = s[2], D = s[3], half = n_dims / 2;
    fc_scope_begin(ctx);
    fc_tensor *x0, *x1, *cs, *sn;
    int axis;
    if (mode == FC_ROPE_NEOX) { /* pairs (i, i + half) */
        axis = 3;
        x0 = fc_narrow(ctx, x, 3, 0, half);
        x1 = fc_narrow(ctx, x, 3, half, half);
        int64_t ts[3] = {T, 1, half};
        cs = table(ctx, fc_tensor_dtype(x), T, half, base, scale, factors, pos0, false, ts, 3);
        sn = table(ctx, fc_tensor_dtype(x), T, half, base, scale, factors, pos0, true, ts, 3);
    } else { /* adjacent pairs (2i, 2i + 1): [B, T, H, half, 2] */
        axis = 4;
        fc_tensor *r =
            fc_reshape(ctx, fc_narrow(ctx, x, 3, 0, n_dims), (int64_t[]){B, T, H, half, 2}, 5);
        x0 = fc_narrow(ctx, r, 4, 0, 1);
        x1 = fc_narrow(ctx, r, 4, 1, 1);
        int64_t ts[4] = {T, 1, half, 1};
        cs = table(ctx, fc_tensor_dtype(x), T, half, base, scale, factors, pos0, false, ts, 4);
        sn = table(ctx, fc_tensor_dtype(x), T, half, base, scale, factors, pos0, true, ts, 4);
    }
    fc_tensor *y0 = fc_sub(ctx, fc_mul(ctx, x0, cs), fc_mul(ctx, x1, sn));
    fc_tensor *y1 = fc_add(ctx, fc_mul(ctx, x0, sn), fc_mul(ctx, x1, cs));
    fc_tensor *y = fc_concat(ctx, (fc_tensor *const[]){y0, y1}, 2, axis);
    if (mode != FC_ROPE_NEOX) y = fc_reshape(ctx, y, (int64_t[]){B, T, H, n_dims}, 4);
    if (y && n_dims < D)
        y = fc_concat(ctx, (fc_tensor *const[]){y, fc_narrow(ctx, x, 3, n_dims, D - n_dims)}, 2, 3);
    fc_tensor *out = y ? fc_keep(fc_contiguous(ctx, y)) : NULL;
    fc_scope_end(ctx);
    /* a new handle made after the scope closed, so the result belongs to
     * the caller's scope as an op's result does */
    fc_tensor *res = out ? fc_contiguous(ctx, out) : NULL;
    fc_release(out);
    return res;
}

fc_tensor *fc__llama_swiglu(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return fc_swiglu(ctx, a, b);
}

fc_status fc__llama_window_mask(fc_ctx *ctx, fc_dtype dt, int64_t T, int64_t S, int64_t window,
                                fc_tensor **out) {
    *out = NULL;
    if (window <= 0 || S - 1 < window) return FC_OK;
    float *v = malloc(sizeof *v * (size_t)(T * S));
    if (!v)
        return fc_ctx_fail(ctx, FC_ERR_OOM, "llama attention: out of memory for a %lld x %lld mask",
                           (long long)T, (long long)S);
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < S; j++)
            v[i * S + j] = i + (S - T) - j >= window ? -INFINITY : 0.0f;
    fc_tensor *m = fc_tensor_from_data(ctx, FC_F32, (int64_t[]){T, S}, 2, v);
    free(v);
    *out = m && dt != FC_F32 ? fc_to(ctx, m, dt) : fc_retain(m);
    fc_release(m);
    if (!*out) return fc_ctx_status(ctx) ? fc_ctx_status(ctx) : FC_ERR_OOM;
    return FC_OK;
}

/* k and v may be views of the cache (the positions written so far): the
 * op reads them in place, and query head h reads kv head h / (Hq / Hkv)
 * without a per-group copy. Causal with S >= T aligns the last query with
 * the last key, so a decode step (T = 1) sees the whole cache. */
fc_tensor *fc__llama_attention(fc_ctx *ctx, fc_tensor *q, fc_tensor *k, fc_tensor *v) {
    return fc__llama_attention_masked(ctx, q, k, v, NULL);
}

fc_tensor *fc__llama_attention_masked(fc_ctx *ctx, fc_tensor *q, fc_tensor *k, fc_tensor *v,
                                      fc_tensor *mask) {
    fc_attention_opts o = {.causal = true, .scale = 0.0};
    return fc_attention(ctx, q, k, v, mask, &o);
}
