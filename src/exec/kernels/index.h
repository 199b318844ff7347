/* SPDX-License-Identifier: MIT */
/* exec/kernels/index.h - integer indexing kernels behind index_select,
 * embedding, gather, scatter_add and one_hot (src/ops/index.c validates,
 * records and holds the rules), and the index-add kernel the
 * index_select backward uses. Nothing here records on the tape.
 *
 * Index tensors are read once into int64 (fc__index_load) and every value
 * is checked (fc__index_check) before a kernel runs: the kernels take the
 * loaded, checked values and trust them. Each kernel returns a new
 * contiguous tensor registered in the current scope, or NULL with the
 * error recorded naming op. */
#ifndef FUCINA_EXEC_KERNELS_INDEX_H
#define FUCINA_EXEC_KERNELS_INDEX_H

#include "exec/tensor.h"

/* ---- integer index tensors --------------------------------------------------------------------
 */

/* The values of an integer index tensor as int64, in row-major order: a
 * pointer into the tensor itself when it is contiguous i64, else into a
 * pooled scratch buffer. */
typedef struct fc__index {
    const int64_t *v;
    int64_t n;
    fc_buffer *scratch; /* NULL when v points into the tensor */
} fc__index;

/* Reads index (any integer dtype, any layout). FC_ERR_DTYPE for other
 * dtypes, FC_ERR_OOM; false after recording the error. */
bool fc__index_load(fc_ctx *ctx, const char *op, const fc_tensor *index, fc__index *out);
/* Every value in [0, bound)? Otherwise records FC_ERR_INDEX naming the
 * first bad value, its position in index and `what` (e.g. "axis 0 of
 * f32[5,3]"), and returns false. */
bool fc__index_check(fc_ctx *ctx, const char *op, const fc__index *ix, const fc_tensor *index,
                     int64_t bound, const char *what);
/* Drops the scratch buffer, if any. */
void fc__index_free(fc__index *ix);

/* ---- forward kernels ----------------------------------------------------------------------------
 */

/* x [O, D, I] around axis `axis` (normalised; O the axes before it, I the
 * elements after it) selected by ix (the values of index, each < D): out
 * has shape x.shape[:axis] + index.shape + x.shape[axis+1:] (rank at most
 * FC_MAX_RANK), out[o, j, i] = x[o, ix[j], i]. dtype x's, or f32 for a
 * block-quantized x (which must be contiguous): its rows are dequantized. */
fc_tensor *fc__index_select(fc_ctx *ctx, const char *op, const fc_tensor *x, int axis,
                            const fc_tensor *index, const fc__index *ix);

/* out (index's shape, x's dtype, not block) = x[..., ix[...], ...] along
 * axis: out[p] = x[p with coordinate axis replaced by ix at p]. index has
 * x's rank and dims no larger than x's off the axis; ix values < x's dim on
 * the axis. */
fc_tensor *fc__index_gather(fc_ctx *ctx, const char *op, const fc_tensor *x, int axis,
                            const fc_tensor *index, const fc__index *ix);

/* out = a copy of x (its shape and dtype, float or integer) with
 * out[p with axis coordinate ix[p]] += src[p] for every position p of
 * index. index, src and x share rank, index dims are no larger than src's
 * and (off the axis) than x's; src has x's dtype. Repeated destinations add
 * in index order within a fiber (the positions differing only along the
 * axis), so the result is the same for any thread count; integers wrap. */
fc_tensor *fc__index_scatter_add(fc_ctx *ctx, const char *op, const fc_tensor *x, int axis,
                                 const fc_tensor *index, const fc__index *ix, const fc_tensor *src);

/* out of shape index.shape + [num_classes] and dtype (scalar), 1 at
 * [p, ix[p]] and 0 elsewhere; ix values < num_classes, index rank below
 * FC_MAX_RANK. */
fc_tensor *fc__index_one_hot(fc_ctx *ctx, const char *op, const fc_tensor *index,
                             const fc__index *ix, int64_t num_classes, fc_dtype dtype);

/* ---- backward kernel ----------------------------------------------------------------------------
 */

/* out = zeros(xshape) with out[o, idx[j], i] += g[o, j, i], where the
 * gradient g (f32 or f64, any layout) has x's shape with `axis` replaced by
 * the index's shape. Loads and checks index itself (errors name "backward
 * of index_select"). Deterministic: each destination element receives its
 * contributions in index order, whatever the thread count. */
fc_tensor *fc__index_add_rows(fc_ctx *ctx, fc_tensor *g, const int64_t *xshape, int xrank, int axis,
                              fc_tensor *index);

#endif /* FUCINA_EXEC_KERNELS_INDEX_H */
