/* SPDX-License-Identifier: MIT */
/* ops/layout.h - what the other shape families of the ops layer take from
 * src/ops/layout.c: the recorded window view, whose node and rule live
 * there (split's pieces are windows, src/ops/join.c). */
#ifndef FUCINA_OPS_LAYOUT_H
#define FUCINA_OPS_LAYOUT_H

#include "exec/tensor.h"

/* n elements of axis `axis` (normalised) of x from start, every step-th
 * (validated by the caller), as a view: check_finite applied and, when x
 * needs a gradient, a window node named op recorded. Returns a new
 * reference or NULL with the error recorded. */
fc_tensor *fc__layout_window_op(fc_ctx *ctx, const char *op, fc_tensor *x, int axis, int64_t start,
                                int64_t n, int64_t step);

#endif /* FUCINA_OPS_LAYOUT_H */
