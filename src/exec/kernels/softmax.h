/* SPDX-License-Identifier: MIT */
/* exec/kernels/softmax.h - softmax and log_softmax along one axis, the
 * forward and the fused backward row kernels (softmax.c). They record
 * nothing: the ops and their rules are in src/ops/softmax.c. */
#ifndef FUCINA_EXEC_KERNELS_SOFTMAX_H
#define FUCINA_EXEC_KERNELS_SOFTMAX_H

#include "exec/tensor.h"

/* y = softmax(x) (is_log: log_softmax) along axis, 0 <= axis < rank. x is
 * a float tensor of any layout; y is a new contiguous tensor of x's dtype
 * and shape. NULL with the error recorded (naming op) on failure. */
fc_tensor *fc__softmax_forward(fc_ctx *ctx, const char *op, fc_tensor *x, int axis, bool is_log);
/* dx along axis: softmax y * (g - sum(g * y)); log_softmax g - exp(y) * sum(g).
 * y is the forward's output (its dtype, contiguous), g the output gradient
 * (the gradient dtype, contiguous, y's shape); dx is a new tensor of g's
 * dtype and shape. NULL with the error recorded on failure. */
fc_tensor *fc__softmax_backward(fc_ctx *ctx, fc_tensor *y, fc_tensor *g, int axis, bool is_log);

#endif /* FUCINA_EXEC_KERNELS_SOFTMAX_H */
