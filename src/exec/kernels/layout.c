/* SPDX-License-Identifier: MIT */
/* layout.c - view construction behind the layout ops (src/ops/layout.c
 * validates, records and holds the rules).
 *
 * Every function here returns a new handle on x's storage (no data is
 * copied or allocated) except fc__layout_reshape_copy, which copies a
 * non-contiguous tensor once into a fresh contiguous one. A write through
 * a view is therefore visible in its base and in every other view of the
 * same storage, and the storage generation they share lets autograd see
 * such writes.
 *
 * Invariants: strides stay non-negative (broadcast axes have stride 0), a
 * view never reaches outside its buffer (fc__tensor_view checks it), and a
 * block-quantized tensor only ever gets the identity view, because a block
 * packs many elements of the last axis into bytes that cannot be split. */
#include <string.h>

#include "exec/kernels/layout.h"

/* ---- shared helpers ------------------------------------------------------------------------- */

bool fc__op_axis(fc_ctx *ctx, const char *op, int axis, int rank, const fc_tensor *x, int *out) {
    if (fc__shape_norm_axis(axis, rank, out) == FC_OK) return true;
    char d[160];
    fc__fail(ctx, FC_ERR_AXIS, "%s: axis %d is out of range [%d, %d] for %s", op, axis, -rank,
             rank - 1, fc__desc(x, d, (int)sizeof d));
    return false;
}

fc_tensor *fc__layout_view(fc_ctx *ctx, const char *op, fc_tensor *x, const int64_t *shape,
                           const int64_t *strides, int rank, int64_t offset) {
    if (fc_dtype_is_block(x->raw.dtype)) {
        if (!fc__shape_equal(x->raw.shape, x->raw.rank, shape, rank) || offset != x->raw.offset) {
            char d[160], s[160];
            fc__fail(ctx, FC_ERR_UNSUPPORTED_VIEW,
                     "%s: %s is block-quantized: only the identity view is allowed, not %s "
                     "(convert with fc_to(..., FC_F32) first)",
                     op, fc__desc(x, d, (int)sizeof d), FC__SHAPE_STR(shape, rank, s));
            return NULL;
        }
        strides = x->raw.strides; /* same shape and start: the identity */
    }
    return fc__tensor_view(ctx, op, x, shape, strides, rank, offset);
}

/* ---- reshape -------------------------------------------------------------------------------- */

fc_tensor *fc__layout_reshape_view(fc_ctx *ctx, const char *op, fc_tensor *x, const int64_t *shape,
                                   int rank) {
    int64_t sshape[FC_MAX_RANK], strides[FC_MAX_RANK];
    memcpy(sshape, shape, sizeof(int64_t) * (size_t)rank);
    sshape[rank - 1] /= fc_dtype_block_elems(x->raw.dtype);
    fc__shape_contiguous_strides(sshape, rank, strides);
    return fc__layout_view(ctx, op, x, shape, strides, rank, x->raw.offset);
}

fc_tensor *fc__layout_reshape_copy(fc_ctx *ctx, const char *op, fc_tensor *x, const int64_t *shape,
                                   int rank) {
    fc_tensor *out = fc__tensor_new(ctx, op, x->raw.dtype, shape, rank);
    if (!out) return NULL;
    fc_status st = fc__raw_copy_to(&x->raw, fc__raw_base(&out->raw), fc_tensor_nbytes(out));
    if (st != FC_OK) {
        char d[160];
        fc__fail(ctx, st, "%s: cannot copy %s (%s)", op, fc__desc(x, d, (int)sizeof d),
                 fc_strerror(st));
        fc_release(out);
        return NULL;
    }
    return out;
}

/* ---- permute -------------------------------------------------------------------------------- */

fc_tensor *fc__layout_permute(fc_ctx *ctx, const char *op, fc_tensor *x, const int *perm) {
    int r = x->raw.rank;
    int64_t shape[FC_MAX_RANK], strides[FC_MAX_RANK];
    for (int i = 0; i < r; i++) {
        shape[i] = x->raw.shape[perm[i]];
        strides[i] = x->raw.strides[perm[i]];
    }
    return fc__layout_view(ctx, op, x, shape, strides, r, x->raw.offset);
}

/* ---- window (narrow, slice, split) ---------------------------------------------------------- */

fc_tensor *fc__layout_window(fc_ctx *ctx, const char *op, fc_tensor *x, int axis, int64_t start,
                             int64_t n, int64_t step) {
    int r = x->raw.rank;
    int64_t shape[FC_MAX_RANK], strides[FC_MAX_RANK];
    memcpy(shape, x->raw.shape, sizeof(int64_t) * (size_t)r);
    memcpy(strides, x->raw.strides, sizeof(int64_t) * (size_t)r);
    shape[axis] = n;
    strides[axis] = x->raw.strides[axis] * step;
    int64_t offset = x->raw.offset + start * x->raw.strides[axis];
    return fc__layout_view(ctx, op, x, shape, strides, r, offset);
}

/* ---- expand --------------------------------------------------------------------------------- */

fc_tensor *fc__layout_expand(fc_ctx *ctx, const char *op, fc_tensor *x, const int64_t *shape,
                             int rank) {
    int xr = x->raw.rank;
    int64_t strides[FC_MAX_RANK];
    for (int i = 0; i < rank; i++) {
        int j = i - (rank - xr); /* x's axis, right-aligned; < 0 for a new leading axis */
        strides[i] = j >= 0 && x->raw.shape[j] == shape[i] ? x->raw.strides[j] : 0;
    }
    return fc__layout_view(ctx, op, x, shape, strides, rank, x->raw.offset);
}

/* ---- squeeze / unsqueeze -------------------------------------------------------------------- */

fc_tensor *fc__layout_squeeze(fc_ctx *ctx, const char *op, fc_tensor *x, int axis) {
    int r = x->raw.rank;
    int64_t shape[FC_MAX_RANK], strides[FC_MAX_RANK];
    for (int i = 0, k = 0; i < r; i++) {
        if (i == axis) continue;
        shape[k] = x->raw.shape[i];
        strides[k++] = x->raw.strides[i];
    }
    return fc__layout_view(ctx, op, x, shape, strides, r - 1, x->raw.offset);
}

fc_tensor *fc__layout_unsqueeze(fc_ctx *ctx, const char *op, fc_tensor *x, int axis) {
    int r = x->raw.rank;
    int64_t shape[FC_MAX_RANK], strides[FC_MAX_RANK];
    for (int i = 0, k = 0; i <= r; i++) {
        if (i == axis) {
            /* a size-1 axis is never stepped; this stride keeps the view
             * row-major when x is */
            shape[i] = 1;
            strides[i] = axis < r ? x->raw.strides[axis] * x->raw.shape[axis] : 1;
            continue;
        }
        shape[i] = x->raw.shape[k];
        strides[i] = x->raw.strides[k++];
    }
    return fc__layout_view(ctx, op, x, shape, strides, r + 1, x->raw.offset);
}
