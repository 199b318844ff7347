/* SPDX-License-Identifier: MIT */
/* exec/kernels/scan.h - prefix sums along one axis (scan.c), behind
 * fc_cumsum and its backward rule (src/ops/scan.c). Records nothing. */
#ifndef FUCINA_EXEC_KERNELS_SCAN_H
#define FUCINA_EXEC_KERNELS_SCAN_H

#include "exec/tensor.h"

/* Inclusive prefix sum along axis (already normalized, in [0, rank)) of x
 * of any layout and any scalar dtype but the f8 floats (reverse: suffix
 * sum, cumsum's backward), in the reduction policy's dtype: f32 for f16,
 * bf16 and f32, f64 for f64, i64 for integers and bool. Returns a new
 * contiguous tensor of x's shape, or NULL with the error recorded (naming
 * op). */
fc_tensor *fc__cumsum(fc_ctx *ctx, const char *op, fc_tensor *x, int axis, bool reverse);

#endif /* FUCINA_EXEC_KERNELS_SCAN_H */
