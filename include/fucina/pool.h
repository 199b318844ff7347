/* SPDX-License-Identifier: MIT */
/* fucina/pool.h - 2-d pooling over the last two axes of NCHW tensors: max,
 * average and adaptive average, each differentiable; 3-d max and average
 * pooling over NCDHW tensors (at the end of this file).
 *
 * Common contract. x is [N, C, H, W] or, unbatched, [C, H, W] (other ranks
 * are FC_ERR_RANK); the result is [N, C, OH, OW] (or [C, OH, OW]), a new
 * contiguous tensor of x's dtype. x may have any layout (transposed,
 * narrowed, broadcast views). Dtypes: f32 and f64 compute in their own
 * precision, f16 and bf16 compute in f32 and round the result once; other
 * dtypes are FC_ERR_DTYPE. Window sums accumulate in double. Results do not
 * depend on the thread count. A NULL x propagates NULL (FC_ERR_NULL_ARG
 * recorded unless an earlier error is). Each op records an autograd node
 * when x requires grad; its gradient is in the gradient dtype (f32, or f64
 * for f64 graphs). The backward rules are differentiable to any order
 * (fc_autograd_grad with create_graph): average pooling's rule is its
 * adjoint, recorded as an op whose own rule is the pooling again; max
 * pooling's is a recorded scatter of the gradient onto the argmax (a
 * constant), whose rule is a gather; both checked by fc_gradgradcheck
 * and to third order (tests/ag). Borrows x; returns a new
 * reference, or NULL with the error (naming the op, the shape and the
 * offending values) recorded in ctx. */
#ifndef FUCINA_POOL_H
#define FUCINA_POOL_H

#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Window options, fill with designated initializers; index 0 is the H
 * axis, 1 the W axis.
 *   kernel             window size, >= 1 (required).
 *   stride             0 selects the kernel size (PyTorch's default).
 *   padding            implicit padding on both sides, 0 <= padding <=
 *                      kernel / 2 (PyTorch's rule); max pooling pads with
 *                      -inf, average pooling with zeros.
 *   dilation           max pooling only; 0 selects 1. Average pooling
 *                      takes 0 or 1 (anything else is FC_ERR_INVALID_ARG).
 *   ceil_mode          round the output size up instead of down; a last
 *                      window that would start inside the right padding is
 *                      dropped (PyTorch's rule).
 *   exclude_pad        average pooling: false (the default, PyTorch's
 *                      count_include_pad=True) divides by the window's
 *                      extent including padding; true by the number of
 *                      input elements it covers (count_include_pad=False).
 *                      The extent never reaches past the right padding, so
 *                      a ceil_mode window cut short divides by less.
 *   divisor_override   average pooling: > 0 divides every window by this
 *                      instead; 0 means none (negative: FC_ERR_INVALID_ARG).
 * Output size per axis (PyTorch's formula):
 *   out = floor_or_ceil((in + 2 * pad - dilation * (kernel - 1) - 1) / stride) + 1
 * Errors: kernel or stride < 1 (after defaults), dilation < 0, padding < 0
 * or > kernel / 2, any value above 2^31 - 1: FC_ERR_INVALID_ARG; an output
 * size below 1 (a kernel larger than the padded input):
 * FC_ERR_INVALID_SHAPE; NULL opts: FC_ERR_NULL_ARG. */
typedef struct fc_pool2d_opts {
    int64_t kernel[2], stride[2], padding[2], dilation[2];
    bool ceil_mode, exclude_pad;
    int64_t divisor_override;
} fc_pool2d_opts;

/* Max over each window. Ties go to the first maximum in row-major window
 * order; a NaN in the window propagates (the output is NaN). The gradient
 * of each output flows, unchanged, to the one input element that produced
 * it (its argmax, kept by the forward; with NaNs, the last NaN), as in
 * PyTorch; overlapping windows add up at a shared argmax. A window that
 * covers no input element (dilation can step over a small input, e.g. H 1,
 * kernel 2, dilation 2, padding 1) outputs -inf, as PyTorch, and passes no
 * gradient. */
FC_API fc_tensor *fc_max_pool2d(fc_ctx *ctx, fc_tensor *x, const fc_pool2d_opts *opts);

/* Mean over each window (see exclude_pad and divisor_override). The
 * gradient of an output is spread evenly over its window's input elements,
 * each receiving gout / divisor. */
FC_API fc_tensor *fc_avg_pool2d(fc_ctx *ctx, fc_tensor *x, const fc_pool2d_opts *opts);

/* Mean over adaptive windows giving exactly output_size = {OH, OW}: output
 * row i averages input rows floor(i * H / OH) .. ceil((i + 1) * H / OH) - 1,
 * likewise for columns (PyTorch's formula; OH may exceed H, windows then
 * overlap or repeat). The gradient spreads as for fc_avg_pool2d. Errors:
 * NULL output_size FC_ERR_NULL_ARG; an entry below 1 or above 2^31 - 1
 * FC_ERR_INVALID_ARG; FC_ERR_OVERFLOW when an output size times the input
 * size of its axis passes INT64_MAX (a broadcast view's axis can be that
 * long); plus the common ones above. */
FC_API fc_tensor *fc_adaptive_avg_pool2d(fc_ctx *ctx, fc_tensor *x, const int64_t output_size[2]);

/* ---- 3-d pooling ----------------------------------------------------------------------------
 * fc_max_pool3d and fc_avg_pool3d pool the last three axes of x [N, C, D,
 * H, W] or, unbatched, [C, D, H, W] (other ranks: FC_ERR_RANK) into [N, C,
 * OD, OH, OW], as torch.nn.functional.max_pool3d / avg_pool3d. The options
 * are fc_pool2d_opts' with a third axis: index 0 is D, 1 H, 2 W; every
 * rule, default and error of fc_pool2d_opts applies per axis (messages
 * name the 3-D op), and the output size per axis is the same formula.
 * ceil_mode, exclude_pad (count_include_pad=False) and divisor_override
 * behave as in PyTorch. NULL opts: FC_ERR_NULL_ARG. Also FC_ERR_OVERFLOW
 * when the output's element count does not fit.
 *
 * A box window is separable, so each op is two recorded 2-d poolings:
 * over (H, W) with D folded into the planes, then over D (a {kD, 1}
 * window on [planes, D, OH*OW]). Max: the maximum of maxima, and the
 * argmax of both stages is the first maximum in (d, h, w) order, so ties
 * and the gradient are PyTorch's; a NaN propagates. Avg: the divisor of
 * a window is the product of its per-axis extents (count_include_pad) or
 * of its per-axis counts of input elements (exclude_pad), which is
 * PyTorch's count; divisor_override sums the first stage and divides the
 * second. Average pooling of f16/bf16 computes in f32 and rounds once.
 * The gradients are the 2-d ops' (a scatter at the argmax, the adjoint of
 * the average), differentiable to any order. Borrows x; returns a new
 * reference, or NULL with the error recorded in ctx. */
typedef struct fc_pool3d_opts {
    int64_t kernel[3], stride[3], padding[3], dilation[3];
    bool ceil_mode, exclude_pad;
    int64_t divisor_override;
} fc_pool3d_opts;

/* Max over each 3-d window (see above and fc_max_pool2d). */
FC_API fc_tensor *fc_max_pool3d(fc_ctx *ctx, fc_tensor *x, const fc_pool3d_opts *opts);

/* Mean over each 3-d window (see above and fc_avg_pool2d); dilation must
 * be 0 or 1. */
FC_API fc_tensor *fc_avg_pool3d(fc_ctx *ctx, fc_tensor *x, const fc_pool3d_opts *opts);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_POOL_H */
