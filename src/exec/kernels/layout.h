/* SPDX-License-Identifier: MIT */
/* exec/kernels/layout.h - view construction for the layout ops (reshape,
 * view, permute, transpose, narrow, slice, expand, squeeze, unsqueeze in
 * src/ops/layout.c) and the axis helper every shape op shares.
 *
 * Nothing here validates the caller's arguments beyond what is stated, and
 * nothing records on the tape: src/ops/layout.c checks, then builds the
 * result here, then records. Every function returns a new handle sharing
 * x's storage, registered in the current scope (fc__layout_reshape alone
 * may copy), or NULL with the error recorded naming op. */
#ifndef FUCINA_EXEC_KERNELS_LAYOUT_H
#define FUCINA_EXEC_KERNELS_LAYOUT_H

#include "exec/tensor.h"

/* Normalises axis against rank (negative counts from the end). On failure
 * records FC_ERR_AXIS naming op, the axis and x, and returns false. */
bool fc__op_axis(fc_ctx *ctx, const char *op, int axis, int rank, const fc_tensor *x, int *out);

/* A view of x (shape/strides/absolute offset in storage elements) sharing
 * its storage, registered in the current scope. Block-quantized x allows
 * only the identity view: anything else records FC_ERR_UNSUPPORTED_VIEW. */
fc_tensor *fc__layout_view(fc_ctx *ctx, const char *op, fc_tensor *x, const int64_t *shape,
                           const int64_t *strides, int rank, int64_t offset);

/* Reshape: shape[rank] has x's element count (checked by the caller).
 * fc__layout_reshape_view needs a contiguous x and gives a contiguous view;
 * fc__layout_reshape_copy gives a fresh contiguous copy of x's elements in
 * row-major order (the order a reshape preserves), for any x. */
fc_tensor *fc__layout_reshape_view(fc_ctx *ctx, const char *op, fc_tensor *x, const int64_t *shape,
                                   int rank);
fc_tensor *fc__layout_reshape_copy(fc_ctx *ctx, const char *op, fc_tensor *x, const int64_t *shape,
                                   int rank);

/* out axis i = x axis perm[i]; perm is a permutation of x's axes, already
 * normalised to [0, rank). */
fc_tensor *fc__layout_permute(fc_ctx *ctx, const char *op, fc_tensor *x, const int *perm);

/* n elements of axis `axis` (normalised) from start, every step-th: the
 * caller checked start + (n - 1) * step < that axis' size, n >= 1, step >= 1. */
fc_tensor *fc__layout_window(fc_ctx *ctx, const char *op, fc_tensor *x, int axis, int64_t start,
                             int64_t n, int64_t step);

/* x broadcast to shape[rank] (rank >= x's rank, x right-aligned in it, every
 * x axis equal to its target or of size 1; checked by the caller): new
 * leading axes and expanded size-1 axes get stride 0. */
fc_tensor *fc__layout_expand(fc_ctx *ctx, const char *op, fc_tensor *x, const int64_t *shape,
                             int rank);

/* x without axis `axis` (normalised, of size 1; x has rank >= 2). */
fc_tensor *fc__layout_squeeze(fc_ctx *ctx, const char *op, fc_tensor *x, int axis);

/* x with a new size-1 axis at `axis` (normalised against rank + 1; x has
 * rank < FC_MAX_RANK). */
fc_tensor *fc__layout_unsqueeze(fc_ctx *ctx, const char *op, fc_tensor *x, int axis);

#endif /* FUCINA_EXEC_KERNELS_LAYOUT_H */
