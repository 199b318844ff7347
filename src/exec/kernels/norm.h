/* SPDX-License-Identifier: MIT */
/* exec/kernels/norm.h - layer_norm and rms_norm over the last axis, the
 * forward and the fused backward kernels (norm.c). They record nothing:
 * the ops and their rule are in src/ops/norm.c. */
#ifndef FUCINA_EXEC_KERNELS_NORM_H
#define FUCINA_EXEC_KERNELS_NORM_H

#include "exec/tensor.h"

/* What the forward keeps for the backward: new references the caller
 * releases (NULL when not kept). */
typedef struct fc__norm_stats {
    fc_tensor *x;    /* the input, contiguous (x itself, retained, when it already is) */
    fc_tensor *mean; /* [rows] per-row means in the compute dtype; NULL for rms_norm */
    fc_tensor *rstd; /* [rows] per-row 1 / sqrt(var + eps) in the compute dtype */
} fc__norm_stats;

/* y = layer_norm(x, w, b) (rms: rms_norm(x, w), b ignored) over the last
 * axis, rows = numel / dim. x is a float tensor of any layout; w and b
 * (NULL allowed) have x's dtype and shape [dim], any layout; eps >= 0 and
 * finite (the caller checks all that). The compute dtype is f64 for f64,
 * f32 otherwise. y is a new contiguous tensor of x's dtype and shape.
 * stats NULL: nothing is kept; otherwise it is filled (all three NULL on
 * failure). NULL with the error recorded (naming op) on failure. */
fc_tensor *fc__norm_forward(fc_ctx *ctx, const char *op, bool rms, fc_tensor *x, fc_tensor *w,
                            fc_tensor *b, double eps, fc__norm_stats *stats);
/* The backward over the last axis. x is the saved (contiguous) input, g
 * the output gradient (contiguous, x's shape, the gradient dtype, which is
 * the compute dtype), w the weight (NULL allowed, any layout), mean
 * (layer_norm only, else NULL) and rstd the saved per-row statistics.
 * Sets *dx (when want_x), *dw (when w and want_w), *db (when want_b): new
 * tensors of g's dtype, [dim] for dw and db. Returns FC_OK, or the error
 * recorded. */
fc_status fc__norm_backward(fc_ctx *ctx, bool rms, fc_tensor *x, fc_tensor *g, fc_tensor *w,
                            fc_tensor *mean, fc_tensor *rstd, bool want_x, bool want_w, bool want_b,
                            fc_tensor **dx, fc_tensor **dw, fc_tensor **db);

#endif /* FUCINA_EXEC_KERNELS_NORM_H */
