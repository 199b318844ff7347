/* SPDX-License-Identifier: MIT */
/* exec/kernels/swiglu.h - SwiGLU, silu(a) * b, and its two derivatives
 * (swiglu.c), for fc_swiglu in src/ops/unary.c. Records nothing.
 *
 *   a [..], b [..] -> y [..] = a / (1 + exp(-a)) * b
 *   g [..]: da = g * b * s * (1 + a * (1 - s)), s = sigmoid(a); db = g * silu(a)
 *
 * Operands share one shape (the op checked) and any layout; the outputs
 * are contiguous. Float dtypes: f16/bf16 compute in f32 and round once;
 * the gradients come out in g's dtype (f32, or f64 for f64 graphs). */
#ifndef FUCINA_EXEC_KERNELS_SWIGLU_H
#define FUCINA_EXEC_KERNELS_SWIGLU_H

#include "exec/tensor.h"

/* y = silu(a) * b into the contiguous out (a's dtype). */
void fc__swiglu_run(fc_ctx *ctx, fc_raw *out, const fc_raw *a, const fc_raw *b);
/* gin = da (wrt_a) or db, from g and the saved a and b (any float dtype;
 * a and b are read widened to gin's dtype). gin contiguous. */
void fc__swiglu_grad_run(fc_ctx *ctx, bool wrt_a, fc_raw *gin, const fc_raw *g, const fc_raw *a,
                         const fc_raw *b);
/* Both: ga = da and gb = db in one pass (one read of g, a and b, one
 * sigmoid), the same values as two fc__swiglu_grad_run calls. ga and gb
 * contiguous, of g's shape and one dtype. */
void fc__swiglu_grads_run(fc_ctx *ctx, fc_raw *ga, fc_raw *gb, const fc_raw *g, const fc_raw *a,
                          const fc_raw *b);

#endif /* FUCINA_EXEC_KERNELS_SWIGLU_H */
