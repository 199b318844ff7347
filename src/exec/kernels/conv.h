/* SPDX-License-Identifier: MIT */
/* exec/kernels/conv.h - the computation behind fc_conv1d, fc_conv2d and
 * fc_conv_transpose2d (src/ops/conv.c): the three products of a
 * convolution and the bias gradient, on checked arguments, knowing no tape.
 *
 * One geometry describes a convolution y = conv(x, w) in both directions:
 *     x [n, cx, hx, wx]   the image side (conv: the input; transposed
 *                         conv: the output)
 *     y [n, cy, hy, wy]   the filtered side (conv: the output; transposed
 *                         conv: the input)
 *     w [cy, cx/groups, kh, kw]
 *     y[b, o, i, j] = sum w[o, c, p, q] * x[b, g*cx/groups + c, i*sh - ph + p*dh,
 *                                             j*sw - pw + q*dw]
 * with x read as 0 outside [0, hx) x [0, wx). Sizes are given, not derived,
 * so asymmetric padding ("same" with an even kernel) and output_padding
 * need nothing special. A conv's forward is fc__conv_forward, its input
 * gradient fc__conv_dgrad and its weight gradient fc__conv_wgrad; a
 * transposed convolution is the same three with the roles of forward and
 * dgrad swapped.
 *
 * Tensors passed in may have any shape whose row-major order is the
 * geometry's (a conv1d's [n, c, l] is [n, c, 1, l]), any layout and any
 * float dtype; the products run in f64 when an operand is f64, else in f32,
 * and the results are new contiguous tensors in that dtype, shaped as the
 * 4-D geometry says. Every function returns a new reference, or NULL with
 * the error recorded naming op (FC_ERR_OOM, FC_ERR_OVERFLOW, a provider's
 * status). */
#ifndef FUCINA_EXEC_KERNELS_CONV_H
#define FUCINA_EXEC_KERNELS_CONV_H

#include "exec/tensor.h"

typedef struct fc__conv_geom {
    int64_t n, groups;
    int64_t cx, hx, wx; /* image side */
    int64_t cy, hy, wy; /* filtered side */
    int64_t kh, kw;
    int64_t sh, sw; /* stride, >= 1 */
    int64_t ph, pw; /* padding before the first row / column, >= 0 */
    int64_t dh, dw; /* dilation, >= 1 */
} fc__conv_geom;

/* y [n, cy, hy, wy] = conv(x, w) + bias (bias [cy], NULL allowed). */
fc_tensor *fc__conv_forward(fc_ctx *ctx, const char *op, const fc__conv_geom *g, fc_tensor *x,
                            fc_tensor *w, fc_tensor *bias);
/* x-side [n, cx, hx, wx] = conv^T(gy, w) + bias (bias [cx], NULL allowed):
 * the gradient of conv with respect to x for an output gradient gy, and
 * the forward of a transposed convolution. */
fc_tensor *fc__conv_dgrad(fc_ctx *ctx, const char *op, const fc__conv_geom *g, fc_tensor *gy,
                          fc_tensor *w, fc_tensor *bias);
/* [cy, cx/groups, kh, kw]: the gradient of conv with respect to w for the
 * image x and the output gradient gy, summed over the batch in a fixed
 * order. */
fc_tensor *fc__conv_wgrad(fc_ctx *ctx, const char *op, const fc__conv_geom *g, fc_tensor *x,
                          fc_tensor *gy);
/* [c]: sum of t [n, c, plane] over n and plane (a bias gradient), each
 * channel summed in f64 over eight interleaved partial sums combined in a
 * fixed order (the bits depend on the shapes only). */
fc_tensor *fc__conv_channel_sum(fc_ctx *ctx, const char *op, fc_tensor *t, int64_t n, int64_t c,
                                int64_t plane);

#endif /* FUCINA_EXEC_KERNELS_CONV_H */
