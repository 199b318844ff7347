/* SPDX-License-Identifier: MIT */
/* fucina/attention.h - the transformer block's ops: rotary position
 * embedding (fc_rope) and a fused scaled dot-product attention with
 * grouped-query heads (fc_attention), each with forward and backward.
 * SwiGLU (fc_swiglu) is an activation: fucina/ops.h, beside fc_silu.
 *
 * Dtypes: every input of one op shares one float dtype (f16, bf16, f32 or
 * f64; FC_ERR_DTYPE otherwise, naming both). f16 and bf16 compute in f32
 * and return the input dtype, rounded once; f32 computes in f32 and f64 in
 * f64 (so fc_gradcheck applies). Inputs may be any strided view; outputs
 * are new tensors. The gradient dtype is f32 (f64 for f64 graphs).
 *
 * Errors (NULL returned, the context keeps the code and a message naming
 * the op, the shapes and the values): FC_ERR_NULL_ARG for a NULL tensor
 * (an earlier error is kept: NULL inputs propagate), FC_ERR_DTYPE,
 * FC_ERR_RANK, FC_ERR_SHAPE_MISMATCH and FC_ERR_INVALID_ARG as listed per
 * op, FC_ERR_OOM. */
#ifndef FUCINA_ATTENTION_H
#define FUCINA_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- rotary position embedding ----------------------------------------------------- */
/* Which dims a rotary embedding pairs up. */
typedef enum fc_rope_mode {
    FC_ROPE_NORM = 0, /* the "llama" architecture: rotates adjacent pairs (2i, 2i+1) */
    FC_ROPE_NEOX = 1, /* rotate-half: pairs (i, i + n_dims/2) */
    FC_ROPE_MODE_COUNT
} fc_rope_mode;

/* Options of fc_rope; zero-initialised is FC_ROPE_NORM over every dim, base 10000, scale 1. */
typedef struct fc_rope_opts {
    fc_rope_mode mode;
    int64_t n_dims;     /* leading head dims rotated (even, <= D); 0 means all D */
    double freq_base;   /* 0 means 10000 */
    double freq_scale;  /* 0 means 1: angle = (pos_offset + t) * freq_scale * base^(-2i/n_dims) */
    int64_t pos_offset; /* position of the first row */
} fc_rope_opts;

/* x [..., T, H, D] (rank >= 3): row t along axis -3 is at position
 * pos_offset + t; every head and every leading index rotate alike. Pair i
 * (i < n_dims/2) of a row, (x0, x1) = elements (2i, 2i+1) in FC_ROPE_NORM
 * mode or (i, i + n_dims/2) in FC_ROPE_NEOX mode, becomes
 *     (x0 cos a - x1 sin a,  x0 sin a + x1 cos a),
 *     a = (pos_offset + t) * freq_scale * freq_base^(-2i / n_dims),
 * the angle computed in double precision; dims from n_dims to D pass
 * through unchanged. This is llama.cpp's rope (ggml_rope_ext without YaRN
 * extrapolation). NULL opts = defaults (NORM, all dims, base 10000, scale
 * 1, offset 0). Returns a new contiguous tensor of x's shape and dtype.
 * The gradient is the rotation by -a, itself recorded in a create_graph
 * walk (fc_autograd_grad_opts), so higher derivatives follow.
 * Errors: FC_ERR_RANK for rank < 3; FC_ERR_INVALID_ARG for an unknown
 * mode, an odd or negative n_dims or one above D (n_dims 0 with an odd D
 * included), a freq_base or freq_scale that is not finite and > 0 (0
 * itself selects the default), a negative pos_offset; FC_ERR_DTYPE for a
 * non-float x. */
FC_API fc_tensor *fc_rope(fc_ctx *ctx, fc_tensor *x, const fc_rope_opts *opts);

/* ---- fused scaled dot-product attention ----------------------------------------------- */
/* Options of fc_attention; zero-initialised is the defaults. */
typedef struct fc_attention_opts {
    bool causal;  /* query i (0-based, of T) sees keys j <= i + (S - T): the last query is
                     aligned with the last key, as a KV cache needs */
    double scale; /* 0 means 1/sqrt(D) */
} fc_attention_opts;

/* out[b, h, i, :] = sum_j p_ij v[b, h / G, j, :],  p_i = softmax_j(s_ij),
 *   s_ij = scale * q[b, h, i, :] . k[b, h / G, j, :] + mask[b, h, i, j]
 * (plus -inf where the causal rule hides key j), G = Hq / Hkv.
 * q [B, Hq, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv], any strided views
 * (a model passes transposed views of [B, T, H, D] tensors); query head h
 * reads kv head h / G in place: K and V are never copied per group.
 * mask: NULL or additive, of q's dtype, broadcastable to [B, Hq, T, S]
 * (e.g. [T, S] or [B, 1, T, S]); -inf hides a key. NULL opts: not causal,
 * scale 1/sqrt(D). Returns a new [B, Hq, T, Dv] tensor, stored as
 * [B, T, Hq, Dv]: it is the transposed view of a contiguous tensor, so
 * fc_transpose(out, 1, 2) is contiguous and merging the heads after it
 * ([B, T, Hq * Dv]) needs no copy.
 *
 * A query that sees no key at all (every score -inf: a fully masked row,
 * or causal with T > S) gets an output row of zeros and zero gradients,
 * never NaN.
 *
 * Computation: flash attention. Forward and backward run over tiles of
 * queries and keys with an online softmax; no per-head [T, S] score matrix
 * larger than a tile is ever held. Forward keeps the per-row logsumexp
 * (B * Hq * T values) for the backward, which recomputes the scores per
 * tile. Backward runs two passes, one per key tile (dK, dV summed over
 * the group's query heads and all query tiles) and one per query tile
 * (dQ), so every gradient element is written by one thread in a fixed
 * order: the result bits do not depend on the thread count. Scratch
 * comes from the context's pool.
 *
 * Gradients for q, k and v. A mask that requires grad gets one as well:
 * ds_ij (the gradient of s_ij), summed over the axes it broadcasts along;
 * that one case materialises a [B, Hq, T, S] tensor, since the gradient
 * has that size before the sum.
 *
 * Higher derivatives: in a create_graph walk (fc_autograd_grad_opts) the
 * backward is not the flash kernel but recorded ops over the saved q, k,
 * v and mask: scores, causal and additive masks, softmax and the products
 * are recomputed with GQA, the causal alignment and the scale as above,
 * so the gradients differentiate again. That path holds [B, Hq, T, S]
 * scores and probabilities: it is meant for the small problems whose
 * Hessian-vector products or gradient penalties are taken.
 *
 * Errors: FC_ERR_RANK unless q, k and v are rank 4 and the mask rank
 * 1..4; FC_ERR_SHAPE_MISMATCH when batch sizes, head dims (q's and k's D),
 * key counts (k's and v's S) or kv heads (k's and v's) differ, when Hq is
 * not a multiple of Hkv, or when the mask does not broadcast to
 * [B, Hq, T, S]; FC_ERR_INVALID_SHAPE for an empty axis; FC_ERR_DTYPE for
 * differing or non-float dtypes; FC_ERR_INVALID_ARG for a scale that is
 * negative or not finite; FC_ERR_OVERFLOW when the output [B, Hq, T, Dv]
 * or, with a mask, the scores [B, Hq, T, S] would have more elements than
 * a tensor can hold (broadcast views can ask for that). */
FC_API fc_tensor *fc_attention(fc_ctx *ctx, fc_tensor *q, fc_tensor *k, fc_tensor *v,
                               fc_tensor *mask, const fc_attention_opts *opts);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_ATTENTION_H */
