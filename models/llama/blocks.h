/* llama/blocks.h - the three blocks the model needs from the op library:
 * rotary embedding, SwiGLU and (grouped-query) attention. Their only home
 * in models/ is blocks_compat.c, which composes them from public ops until
 * the fused ops (fc_rope, fc_swiglu, fc_attention of fucina/attention.h)
 * land; swapping them in is a change to that one file.
 *
 * Each borrows its inputs and returns a new reference, registered in the
 * caller's scope like an op's result, or NULL with the error recorded;
 * NULL inputs propagate. */
#ifndef FUCINA_MODELS_LLAMA_BLOCKS_H
#define FUCINA_MODELS_LLAMA_BLOCKS_H

#include "fucina.h"

/* x [B, T, H, D]: rotates adjacent pairs (2i, 2i+1) of the first n_dims
 * dims (even, <= D) of row t by (pos0 + t) * scale * base^(-2i / n_dims). */
fc_tensor *fc__llama_rope(fc_ctx *ctx, fc_tensor *x, int64_t n_dims, double base, double scale,
                          int64_t pos0);
/* silu(a) * b. */
fc_tensor *fc__llama_swiglu(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
/* q [B, Hq, T, D], k, v [B, Hkv, S, D] (Hkv divides Hq; query head h reads
 * kv head h / (Hq / Hkv)); causal: query i sees keys j <= i + (S - T);
 * scale 1/sqrt(D). Returns [B, Hq, T, D]. */
fc_tensor *fc__llama_attention(fc_ctx *ctx, fc_tensor *q, fc_tensor *k, fc_tensor *v);

#endif
