/* SPDX-License-Identifier: MIT */
/* exec/kernels/attention.h - the fused (flash) attention kernels
 * (attention.c, attention_body.h), forward and backward, for
 * fc_attention in src/ops/attention.c. Records nothing on the tape.
 *
 *   q [B, Hq, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv], mask [B, Hq, T, S]
 *   (a broadcast view: stride 0 on its broadcast axes) or none:
 *   s_ij = scale * q_i . k_j + mask_ij (-inf where causality hides j:
 *   j > i + S - T), out_i = sum_j softmax_j(s_i) v_j, query head h reading
 *   kv head h / (Hq / Hkv); lse_i = logsumexp_j s_ij (+inf for a row that
 *   sees no key, whose output is 0).
 *
 * Every operand is an f32 or f64 raw view of any strides (the op converts
 * f16/bf16 to f32 first), all of one dtype: the compute dtype. The callers
 * validated the shapes. Work is split over the thread team in items fixed
 * by the shapes (forward and dQ: (b, h, query tile); dK/dV: (b, kv head,
 * key tile)), each item written by one thread in one order, so the bits
 * do not depend on the thread count. */
#ifndef FUCINA_EXEC_KERNELS_ATTENTION_H
#define FUCINA_EXEC_KERNELS_ATTENTION_H

#include "exec/tensor.h"

typedef struct fc__attn_in {
    const fc_raw *q, *k, *v;
    const fc_raw *mask; /* NULL, or broadcast to [B, Hq, T, S] */
    bool causal;
    double scale;
} fc__attn_in;

/* out: [B, Hq, T, Dv] view of any strides (not overlapping anything else;
 * no stride-0 axis); lse: contiguous [B, Hq, T]; both in the compute
 * dtype. FC_OK, or the error recorded (FC_ERR_OOM for the scratch). */
fc_status fc__attention_forward(fc_ctx *ctx, const char *op, const fc__attn_in *in, fc_raw *out,
                                fc_raw *lse);

/* The gradients from the forward's out and lse and the output gradient
 * dout (any strides), into contiguous tensors of the compute dtype: dq
 * [B, Hq, T, D] (NULL: not wanted; required when dmask is wanted), dk
 * [B, Hkv, S, D] and dv [B, Hkv, S, Dv] (both or neither), dmask
 * [B, Hq, T, S] (the score gradients, before any broadcast sum; NULL: not
 * wanted). FC_OK, or the error recorded. */
fc_status fc__attention_backward(fc_ctx *ctx, const char *op, const fc__attn_in *in,
                                 const fc_raw *out, const fc_raw *lse, const fc_raw *dout,
                                 fc_raw *dq, fc_raw *dk, fc_raw *dv, fc_raw *dmask);

#endif /* FUCINA_EXEC_KERNELS_ATTENTION_H */
