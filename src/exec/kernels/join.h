/* SPDX-License-Identifier: MIT */
/* exec/kernels/join.h - the copies behind concat, stack and pad
 * (src/ops/join.c validates, records and holds the rules). Every dtype
 * moves as bytes; nothing here records on the tape. */
#ifndef FUCINA_EXEC_KERNELS_JOIN_H
#define FUCINA_EXEC_KERNELS_JOIN_H

#include "exec/tensor.h"

/* A new contiguous tensor of shape[rank] holding xs[0..n) joined along
 * `axis` (normalised, in output coordinates). The inputs share dtype, rank
 * and every dim off the axis (checked by the caller). concat (stack
 * false): input k fills the next xs[k]'s axis-size positions of the axis;
 * stack: input k is index k of the new axis, and shape has one axis more
 * than the inputs, of size n. NULL with the error recorded naming op. */
fc_tensor *fc__join(fc_ctx *ctx, const char *op, fc_tensor *const *xs, int n, int axis, bool stack,
                    const int64_t *shape, int rank);

/* A new contiguous tensor of shape (x's rank) filled with value (stored in
 * x's dtype, which is not block-quantized) with x copied into its interior:
 * on axis i it starts at pads[2 * i] (fc_pad's layout: pads[2 * i + 1],
 * the trailing pad, is not read; shape already includes it). NULL with the
 * error recorded naming op. */
fc_tensor *fc__join_pad(fc_ctx *ctx, const char *op, fc_tensor *x, const int64_t *shape,
                        const int64_t *pads, double value);

#endif /* FUCINA_EXEC_KERNELS_JOIN_H */
