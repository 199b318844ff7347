/* SPDX-License-Identifier: MIT */
/* llama/blocks.h - the three blocks the model needs from the op library:
 * rotary embedding, SwiGLU and (grouped-query) attention, one seam in
 * front of the fused ops of fucina/attention.h (fc_rope in FC_ROPE_NORM
 * mode, fc_swiglu, causal fc_attention), implemented in blocks.c. The
 * versions composed from public ops live on only in the tests
 * (tests/models/llama_composite.c), as a cross-check.
 *
 * Each borrows its inputs and returns a new reference, registered in the
 * caller's scope like an op's result, or NULL with the error recorded;
 * NULL inputs propagate. */
#ifndef FUCINA_MODELS_LLAMA_BLOCKS_H
#define FUCINA_MODELS_LLAMA_BLOCKS_H

#include <stdint.h>

#include "fucina.h"

/* x [B, T, H, D]: rotates adjacent pairs (2i, 2i+1) of the first n_dims
 * dims (even, <= D) of row t by (pos0 + t) * scale * base^(-2i / n_dims). */
fc_tensor *fc__llama_rope(fc_ctx *ctx, fc_tensor *x, int64_t n_dims, double base, double scale,
                          int64_t pos0);
/* The same in either pairing (FC_ROPE_NEOX: (i, i + n_dims / 2)). */
fc_tensor *fc__llama_rope_mode(fc_ctx *ctx, fc_tensor *x, fc_rope_mode mode, int64_t n_dims,
                               double base, double scale, int64_t pos0);
/* The same with pair i's angle (pos0 + t) * scale * base^(-2i / n_dims) /
 * factors[i] (n_dims / 2 factors, llama.cpp's rope_freqs): composed from
 * elementwise ops over cos / sin tables (the fused op has no per-pair
 * factor), so its gradient is theirs. */
fc_tensor *fc__llama_rope_factors(fc_ctx *ctx, fc_tensor *x, fc_rope_mode mode, int64_t n_dims,
                                  double base, double scale, const float *factors, int64_t pos0);
/* silu(a) * b. */
fc_tensor *fc__llama_swiglu(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
/* q [B, Hq, T, D], k, v [B, Hkv, S, D], any strided views (Hkv divides Hq;
 * query head h reads kv head h / (Hq / Hkv), in place); causal: query i
 * sees keys j <= i + (S - T); scale 1/sqrt(D). Returns [B, Hq, T, D], the
 * transposed view of a contiguous [B, T, Hq, D]. */
fc_tensor *fc__llama_attention(fc_ctx *ctx, fc_tensor *q, fc_tensor *k, fc_tensor *v);
/* The same plus an additive mask ([T, S], NULL for none). */
fc_tensor *fc__llama_attention_masked(fc_ctx *ctx, fc_tensor *q, fc_tensor *k, fc_tensor *v,
                                      fc_tensor *mask);
/* Sliding-window attention's mask for T queries (the last at position
 * S - 1) over S keys: -inf where query i is window or more positions past
 * key j, else 0, of dtype dt; made once per forward, shared by the
 * layers. *out is NULL (and FC_OK) when window <= 0 or no key is that far
 * back, so the plain causal op runs; FC_ERR_OOM (recorded) otherwise. */
fc_status fc__llama_window_mask(fc_ctx *ctx, fc_dtype dt, int64_t T, int64_t S, int64_t window,
                                fc_tensor **out);

#endif
