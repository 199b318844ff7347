/* SPDX-License-Identifier: MIT */
/* fucina/conv.h - convolutions over channels-first tensors: fc_conv1d,
 * fc_conv2d, fc_conv3d and fc_conv_transpose2d, forward and backward, with
 * PyTorch's shapes, arguments and gradients (torch.nn.functional.conv1d /
 * conv2d / conv3d / conv_transpose2d).
 *
 * Layout. Activations are channels-first: conv2d takes x [N, Cin, H, W],
 * conv1d x [N, Cin, L]. Weights are [Cout, Cin/groups, kH, kW] ([Cout,
 * Cin/groups, k] for conv1d), and for the transposed convolution [Cin,
 * Cout/groups, kH, kW], as PyTorch stores them. A bias is [Cout]. Every
 * input may be any strided view (transposed, narrowed, expanded); the
 * output is a new contiguous tensor.
 *
 * Output size along a spatial axis of input size I, kernel size k, stride
 * s, padding p, dilation d (floor division):
 *     conv:            O = (I + 2p - d*(k-1) - 1) / s + 1
 *     conv_transpose:  O = (I-1)*s - 2p + d*(k-1) + output_padding + 1
 * padding_same (conv only, stride 1 only, as PyTorch's padding="same")
 * pads d*(k-1) in total, the smaller half before: O = I.
 *
 * Dtypes: x, weight and bias share one float dtype, f16, bf16, f32 or f64.
 * f16 and bf16 compute in f32 and return the input dtype (rounded once);
 * f32 computes in f32 and f64 in f64. No dtype is promoted silently.
 *
 * Gradients (when x, weight or bias requires grad, fucina/autograd.h): for
 * x, weight and bias, as PyTorch's. The gradient dtype is f32 (f64 for f64
 * graphs). A stride that skips input elements gives them gradient 0.
 *
 * Computation, two paths:
 *   - oneDNN's direct convolution kernels, for f32 when the library was
 *     built with oneDNN 2.x, the provider is "auto" or "onednn", the batch
 *     makes at least eight chunks (a batch of 8 or more images) and oneDNN
 *     has a JIT kernel for the geometry on this CPU (AVX2 or AVX-512;
 *     grouped convolutions with few channels per group often have none);
 *   - otherwise im2col / col2im with the GEMMs through the context's
 *     matmul provider (fc_ctx_set_backend), the portable path everywhere.
 * The choice depends on the shapes and the CPU only. Buffers come from the
 * context's pool and its per-thread provider caches, so a repeated
 * training step in steady state calls the allocator zero times. The
 * context's threads share the work in pieces fixed by the shapes alone
 * (chunks of images, blocks of channels) and each product runs on one
 * thread, so on either path and with any provider the result bits do not
 * depend on the thread count: 1, 2 or 16 threads give the same tensors,
 * run after run. The two paths agree to f32 rounding, not bit for bit.
 *
 * Errors (the op returns NULL; fc_ctx_status / fc_ctx_error tell which,
 * the message naming the op, the shapes and the values):
 *   FC_ERR_NULL_ARG        x or weight is NULL (an earlier error is kept:
 *                          NULL inputs propagate); bias may be NULL.
 *   FC_ERR_DTYPE           x is not f16/bf16/f32/f64, or weight or bias
 *                          has another dtype than x.
 *   FC_ERR_RANK            x or weight has the wrong rank (4 for the 2-D
 *                          ops, 3 for conv1d), or bias is not 1-D.
 *   FC_ERR_INVALID_ARG     stride, dilation or groups below 1, padding or
 *                          output_padding below 0, padding_same with a
 *                          stride other than 1, output_padding not below
 *                          the stride or the dilation of its axis.
 *   FC_ERR_SHAPE_MISMATCH  Cin (conv: x's channels; transpose: weight's
 *                          first axis) or Cout not divisible by groups;
 *                          x's channels differ from weight's in-channels
 *                          times groups (transpose: from weight's first
 *                          axis); bias is not [Cout].
 *   FC_ERR_INVALID_SHAPE   an output size below 1 (the dilated kernel is
 *                          larger than the padded input).
 *   FC_ERR_OVERFLOW        the output or a column buffer does not fit.
 *   FC_ERR_OOM             out of memory; the provider's status when a
 *                          product fails. */
#ifndef FUCINA_CONV_H
#define FUCINA_CONV_H

#include <stdbool.h>
#include <stdint.h>

#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options of fc_conv2d; index 0 is the height axis, 1 the width axis.
 * Fill them from fc_conv2d_opts_default() (stride 1, padding 0, dilation 1,
 * groups 1, padding_same false) and change what differs, or
 * zero-initialise: a zero stride, dilation or groups means 1 (the house
 * convention: zero is the default), a negative one is FC_ERR_INVALID_ARG.
 * NULL opts means the defaults. With padding_same, padding is ignored. */
typedef struct fc_conv2d_opts {
    int64_t stride[2];
    int64_t padding[2]; /* zeros added on both sides */
    int64_t dilation[2];
    int64_t groups; /* Cin and Cout divisible by it; groups = Cin = Cout is depthwise */
    bool padding_same;
} fc_conv2d_opts;

/* The default options, the same as a zero-initialised struct. */
static inline fc_conv2d_opts fc_conv2d_opts_default(void) {
    fc_conv2d_opts o = {{1, 1}, {0, 0}, {1, 1}, 1, false};
    return o;
}

/* Options of fc_conv1d: fc_conv2d's, for the one spatial axis. */
typedef struct fc_conv1d_opts {
    int64_t stride, padding, dilation, groups;
    bool padding_same;
} fc_conv1d_opts;

/* The default options, the same as a zero-initialised struct. */
static inline fc_conv1d_opts fc_conv1d_opts_default(void) {
    fc_conv1d_opts o = {1, 0, 1, 1, false};
    return o;
}

/* Options of fc_conv_transpose2d. padding removes rows and columns from
 * both sides of the full transposed output; output_padding adds them on
 * one side (bottom / right) to choose among the output sizes that a
 * strided convolution maps to the same input size; it must be below the
 * stride or the dilation of its axis. As for fc_conv2d, a zero stride,
 * dilation or groups means 1. */
typedef struct fc_conv_transpose2d_opts {
    int64_t stride[2];
    int64_t padding[2];
    int64_t output_padding[2];
    int64_t dilation[2];
    int64_t groups;
} fc_conv_transpose2d_opts;

/* The default options, the same as a zero-initialised struct. */
static inline fc_conv_transpose2d_opts fc_conv_transpose2d_opts_default(void) {
    fc_conv_transpose2d_opts o = {{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1};
    return o;
}

/* y [N, Cout, OH, OW] = the cross-correlation of x [N, Cin, H, W] with
 * weight [Cout, Cin/groups, kH, kW], plus bias [Cout] (NULL allowed):
 *   y[n, o, i, j] = bias[o] + sum over c in o's group, p < kH, q < kW of
 *       weight[o, c, p, q] * x[n, g*Cin/groups + c, i*s0 - p0 + p*d0, j*s1 - p1 + q*d1]
 * (x read as 0 outside the image). Borrows every input; returns a new
 * reference, or NULL with the error recorded (see the list above). */
FC_API fc_tensor *fc_conv2d(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, fc_tensor *bias,
                            const fc_conv2d_opts *opts);

/* y [N, Cout, OL] from x [N, Cin, L], weight [Cout, Cin/groups, k] and
 * bias [Cout] (NULL allowed): fc_conv2d with a height of 1. */
FC_API fc_tensor *fc_conv1d(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, fc_tensor *bias,
                            const fc_conv1d_opts *opts);

/* y [N, Cout, OH, OW] from x [N, Cin, H, W], weight [Cin, Cout/groups, kH,
 * kW] and bias [Cout] (NULL allowed): the adjoint of fc_conv2d with the
 * same stride, padding, dilation and groups (the gradient of a conv2d
 * with respect to its input), plus bias. Cout = weight's second axis times
 * groups. Borrows every input; returns a new reference or NULL. */
FC_API fc_tensor *fc_conv_transpose2d(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, fc_tensor *bias,
                                      const fc_conv_transpose2d_opts *opts);

/* Options of fc_conv3d; index 0 is the depth axis, 1 the height axis, 2
 * the width axis. The conventions of fc_conv2d_opts: fill them from
 * fc_conv3d_opts_default() or zero-initialise (a zero stride, dilation or
 * groups means 1); NULL opts means the defaults; with padding_same (stride
 * 1 only) padding is ignored and each axis pads dilation*(kernel-1) in
 * total, the smaller half before. */
typedef struct fc_conv3d_opts {
    int64_t stride[3];
    int64_t padding[3]; /* zeros added on both sides */
    int64_t dilation[3];
    int64_t groups;
    bool padding_same;
} fc_conv3d_opts;

/* The default options, the same as a zero-initialised struct. */
static inline fc_conv3d_opts fc_conv3d_opts_default(void) {
    fc_conv3d_opts o = {{1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1, false};
    return o;
}

/* y [N, Cout, OD, OH, OW] = the cross-correlation of x [N, Cin, D, H, W]
 * with weight [Cout, Cin/groups, kD, kH, kW], plus bias [Cout] (NULL
 * allowed), as torch.nn.functional.conv3d:
 *   y[n, o, t, i, j] = bias[o] + sum over c in o's group, r < kD, p < kH,
 *       q < kW of weight[o, c, r, p, q] *
 *       x[n, g*Cin/groups + c, t*s0 - p0 + r*d0, i*s1 - p1 + p*d1, j*s2 - p2 + q*d2]
 * (x read as 0 outside the volume); each output size from the conv formula
 * above. Computed with fc_conv2d, so its paths (oneDNN or im2col + the
 * matmul provider) do the work: usually one conv2d over [N * OD, kD * Cin,
 * H, W], the kD depth slices each output depth reads stacked as channels
 * (a copy of x about kD times its size); with a depth padding beyond the
 * kernel's reach, or more than 16 depth taps, one conv2d per tap over the
 * slices it reads. The result is built from recorded ops (slices, stack,
 * conv2d, pad, add), so its gradients for x, weight and bias are those of
 * PyTorch and differentiable to any order (create_graph). f16 and bf16
 * inputs compute in f32 and round the result once. Errors: those listed
 * at the top of this file, with rank 5 for x and weight and naming
 * "conv3d". Borrows every input; returns a new contiguous tensor (a new
 * reference), or NULL with the error recorded. */
FC_API fc_tensor *fc_conv3d(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, fc_tensor *bias,
                            const fc_conv3d_opts *opts);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_CONV_H */
