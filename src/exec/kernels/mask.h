/* SPDX-License-Identifier: MIT */
/* exec/kernels/mask.h - the kernels behind triu, tril and dropout
 * (src/ops/mask.c and src/ops/random.c validate, record and hold the
 * rules), and the mask application dropout's backward uses. Nothing here records on the tape.
 * Each kernel returns a new contiguous tensor registered in the current
 * scope, or NULL with the error recorded. */
#ifndef FUCINA_EXEC_KERNELS_MASK_H
#define FUCINA_EXEC_KERNELS_MASK_H

#include "exec/tensor.h"

/* x (any layout, any scalar dtype, rank >= 2: checked by the caller) with
 * every element outside the triangle of its last two axes [..., R, C] set
 * to zero: upper keeps column j of row i when j - i >= k, lower when
 * j - i <= k. Errors name op. */
fc_tensor *fc__mask_triangle(fc_ctx *ctx, const char *op, fc_tensor *x, int64_t k, bool upper);

/* The factor dropout scales kept elements by, for a drop probability p. */
static inline double fc__dropout_scale(double p) { return 1.0 / (1.0 - p); }

/* x (f16, bf16, f32 or f64, any layout) with each element dropped with
 * probability p (0 < p < 1) and the kept ones scaled by
 * fc__dropout_scale(p). The mask comes from the context's Philox stream
 * (element i uses word i % 4 of counter base + i / 4, base reserved here
 * after every allocation succeeded): the same for any thread count. When
 * mask is not NULL, *mask receives a new u8 tensor of x's shape, 1 where
 * the element was kept. Errors name "dropout". */
fc_tensor *fc__mask_dropout(fc_ctx *ctx, fc_tensor *x, double p, fc_tensor **mask);

/* g * mask * scale for an f32/f64 gradient g (any layout) and a u8 mask of
 * the same shape. Errors name "backward of dropout". */
fc_tensor *fc__dropout_apply(fc_ctx *ctx, fc_tensor *g, fc_tensor *mask, double scale);

#endif /* FUCINA_EXEC_KERNELS_MASK_H */
