/* SPDX-License-Identifier: MIT */
/* llama/blocks.c - the model's rotary embedding, SwiGLU and grouped-query
 * attention (see blocks.h): each is one fused op of fucina/attention.h.
 * tests/models/llama_composite.c keeps the same blocks composed from
 * elementwise ops and matmuls, which test_llama_blocks compares these
 * against. */
#include <math.h>

#include "llama/blocks.h"

fc_tensor *fc__llama_rope(fc_ctx *ctx, fc_tensor *x, int64_t n_dims, double base, double scale,
                          int64_t pos0) {
    fc_rope_opts o = {.mode = FC_ROPE_NORM,
                      .n_dims = n_dims,
                      .freq_base = base,
                      .freq_scale = scale,
                      .pos_offset = pos0};
    return fc_rope(ctx, x, &o);
}

fc_tensor *fc__llama_swiglu(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return fc_swiglu(ctx, a, b);
}

/* k and v may be views of the cache (the positions written so far): the
 * op reads them in place, and query head h reads kv head h / (Hq / Hkv)
 * without a per-group copy. Causal with S >= T aligns the last query with
 * the last key, so a decode step (T = 1) sees the whole cache. */
fc_tensor *fc__llama_attention(fc_ctx *ctx, fc_tensor *q, fc_tensor *k, fc_tensor *v) {
    fc_attention_opts o = {.causal = true, .scale = 0.0};
    return fc_attention(ctx, q, k, v, NULL, &o);
}
