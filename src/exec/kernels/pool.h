/* SPDX-License-Identifier: MIT */
/* exec/kernels/pool.h - 2-d pooling over the last two axes: max, average
 * and adaptive average, forward and backward (pool.c). They record
 * nothing: the ops, their validation and their rules are in src/ops/pool.c.
 *
 * Shapes: x is [..., H, W] (the ops pass [N, C, H, W] or [C, H, W]); every
 * leading index is one independent plane of H * W elements; the output is
 * [..., OH, OW]. The kernels trust the geometry they are given (the op
 * checked it): every window holds at least one input element. */
#ifndef FUCINA_EXEC_KERNELS_POOL_H
#define FUCINA_EXEC_KERNELS_POOL_H

#include "exec/tensor.h"

typedef enum fc__pool_kind {
    FC__POOL_MAX,      /* max over the window; argmax kept */
    FC__POOL_AVG,      /* mean over the window (count_include_pad, divisor) */
    FC__POOL_ADAPTIVE, /* mean over [floor(i*H/OH), ceil((i+1)*H/OH)) */
    FC__POOL_KIND_COUNT
} fc__pool_kind;

/* The checked geometry: sizes, and for MAX and AVG the window (kernel,
 * stride, padding, dilation: all >= 1 but padding >= 0; AVG has dilation
 * 1). ADAPTIVE reads only the sizes. divisor > 0 replaces AVG's window
 * count (PyTorch's divisor_override); 0: none. */
typedef struct fc__pool_geom {
    fc__pool_kind kind;
    int64_t planes, ih, iw, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    bool count_include_pad;
    int64_t divisor;
} fc__pool_geom;

/* Forward. x: float tensor of any layout with planes * ih * iw elements
 * (shape[rank - 2 ..] = ih, iw). Returns a new contiguous tensor of x's
 * dtype, shape x's with the last two axes replaced by oh, ow; computed in
 * f64 for f64 and f32 otherwise (sums in double). For MAX, argmax (not
 * NULL) receives a new i64 tensor of the output's shape: the flat index
 * h * iw + w inside its plane of the element that produced each output
 * (the first maximum; a NaN wins and the last NaN is kept, as PyTorch).
 * NULL with the error recorded (naming op) on failure. */
fc_tensor *fc__pool2d_forward(fc_ctx *ctx, const char *op, const fc__pool_geom *g, fc_tensor *x,
                              fc_tensor **argmax);

/* Backward. gout: the output gradient, contiguous, [..., oh, ow], in the
 * compute dtype (f32 or f64); argmax (MAX only, else NULL) the forward's
 * index tensor. Returns dx, a new contiguous tensor of gout's dtype and
 * shape in_shape (rank in_rank): MAX adds each gradient to its argmax
 * element; AVG and ADAPTIVE spread it over the window divided by the
 * forward's divisor. Each plane is summed by one thread in a fixed order,
 * so the bits do not depend on the thread count. NULL with the error
 * recorded on failure. */
fc_tensor *fc__pool2d_backward(fc_ctx *ctx, const char *op, const fc__pool_geom *g, fc_tensor *gout,
                               fc_tensor *argmax, const int64_t *in_shape, int in_rank);

#endif /* FUCINA_EXEC_KERNELS_POOL_H */
