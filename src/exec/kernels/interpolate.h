/* SPDX-License-Identifier: MIT */
/* exec/kernels/interpolate.h - resampling of the last one or two axes by
 * nearest neighbour or (bi)linear weights, forward and its transpose
 * (interpolate.c). They record nothing: the op, its checks and its rule
 * are in src/ops/interpolate.c.
 *
 * Shapes: x is [..., H, W] (spatial 2) or [..., W] (spatial 1, treated as
 * H = OH = 1); every leading index is one independent plane; the output is
 * [..., OH, OW]. The kernels trust the geometry (the op checked it). */
#ifndef FUCINA_EXEC_KERNELS_INTERPOLATE_H
#define FUCINA_EXEC_KERNELS_INTERPOLATE_H

#include "exec/tensor.h"

/* The checked geometry. scale_h / scale_w are the caller's scale factors
 * (output per input), 0 when the output size was given: as in PyTorch
 * they, not the size ratio, set the source coordinates then (unless
 * align_corners). */
typedef struct fc__interp_geom {
    int spatial; /* 1 or 2 resampled axes */
    bool linear; /* (bi)linear, else nearest */
    bool align_corners;
    int64_t planes, ih, iw, oh, ow;
    double scale_h, scale_w;
} fc__interp_geom;

/* Forward. x: a float tensor of any layout with planes * ih * iw elements.
 * Returns a new contiguous tensor of x's dtype with the last `spatial`
 * axes replaced by (oh,) ow; computed in f64 for f64 and f32 otherwise
 * (each output's weighted sum in double). NULL with the error recorded
 * (naming op) on failure. */
fc_tensor *fc__interp_forward(fc_ctx *ctx, const char *op, const fc__interp_geom *g, fc_tensor *x);

/* The transpose of the forward (its adjoint): gout, contiguous, [...,
 * (oh,) ow] in f32 or f64, scattered with the forward's weights into a new
 * contiguous dx of gout's dtype and shape in_shape (rank in_rank). Each
 * plane is summed by one thread in a fixed order, so the bits do not
 * depend on the thread count. NULL with the error recorded on failure. */
fc_tensor *fc__interp_backward(fc_ctx *ctx, const char *op, const fc__interp_geom *g,
                               fc_tensor *gout, const int64_t *in_shape, int in_rank);

#endif /* FUCINA_EXEC_KERNELS_INTERPOLATE_H */
