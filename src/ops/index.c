/* SPDX-License-Identifier: MIT */
/* ops/index.c - integer indexing ops: index_select, embedding, gather,
 * scatter_add, one_hot. This file validates the arguments, loads and
 * bounds-checks the index (fc__index_load/check) before any output is
 * touched, runs the kernel of exec/kernels/index.c and records the node;
 * each backward rule sits under its forward.
 *
 * Selecting rows is linear in x, and its adjoint adds each gradient row back
 * into the row it came from: a zero table plus an index-add, deterministic
 * because every destination row sums its contributions in index order
 * (fc__index_add_rows partitions the work by destination columns). gather
 * and scatter_add are each other's adjoints along the same index. The index
 * is saved with its generation, so the engine refuses a backward after it
 * was modified in place. one_hot has no gradient (its input is integer). */
#include <stdio.h>

#include "ag/tape.h"
#include "exec/kernels/index.h"
#include "exec/kernels/layout.h"
#include "fucina.h"

/* Node (index_select, embedding, gather, scatter_add): the index is the one
 * saved value, the normalised axis the one parameter. */
enum { INDEX_SAVED_INDEX = 0 };
enum { INDEX_I_AXIS = 0 };

/* Loads and bounds-checks index against axis `axis` of x. */
static bool load_checked(fc_ctx *ctx, const char *op, const fc_tensor *x, int axis,
                         const fc_tensor *index, fc__index *ix) {
    if (!fc__index_load(ctx, op, index, ix)) return false;
    char what[200], d[160];
    snprintf(what, sizeof what, "axis %d of %s", axis, fc__desc(x, d, (int)sizeof d));
    if (fc__index_check(ctx, op, ix, index, x->raw.shape[axis], what)) return true;
    fc__index_free(ix);
    return false;
}

/* check_finite on out, then, when an input needs a gradient, the node with
 * the index saved (inputs x, or x and src for scatter_add). */
static fc_tensor *finish_indexed(fc_ctx *ctx, const char *op, fc__backward_fn bw, fc_tensor *out,
                                 int n, fc_tensor **in, fc_tensor *index, int axis) {
    out = fc__finish(ctx, op, out);
    if (out && fc__ag_wants(ctx, n, in)) {
        fc_node *nd = fc__ag_record(ctx, op, bw, out, n, in);
        if (!nd || fc__ag_save(ctx, nd, "index", index) != FC_OK) {
            fc_release(out);
            return NULL;
        }
        nd->i[INDEX_I_AXIS] = axis;
    }
    return out;
}

/* ---- index_select / embedding --------------------------------------------------------------- */

static fc_status index_select_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout,
                                       fc_tensor **gin) {
    fc_tensor *index = fc__ag_saved_tensor(ctx, node, INDEX_SAVED_INDEX);
    if (!index) return fc_ctx_status(ctx);
    if (fc__ag_create_graph(ctx)) { /* a recorded scatter_add of g's rows into zeros */
        int a = (int)node->i[INDEX_I_AXIS], r = node->in[0].rank;
        int64_t l = fc__numel(&index->raw), gs[FC_MAX_RANK], is[FC_MAX_RANK];
        for (int i = 0; i < r; i++) {
            gs[i] = i == a ? l : node->in[0].shape[i];
            is[i] = i == a ? l : 1;
        }
        fc_tensor *g = fc_reshape(ctx, gout, gs, r); /* the index's axes as one */
        fc_tensor *ix = fc_contiguous(ctx, fc_expand(ctx, fc_reshape(ctx, index, is, r), gs, r));
        fc_tensor *z = fc_zeros(ctx, gout->raw.dtype, node->in[0].shape, r);
        gin[0] = fc_scatter_add(ctx, z, a, ix, g);
        return fc_ctx_status(ctx);
    }
    gin[0] = fc__index_add_rows(ctx, gout, node->in[0].shape, node->in[0].rank,
                                (int)node->i[INDEX_I_AXIS], index);
    return gin[0] ? FC_OK : fc_ctx_status(ctx);
}

static fc_tensor *select_impl(fc_ctx *ctx, const char *op, fc_tensor *x, int axis,
                              fc_tensor *index) {
    char d[160];
    int a;
    if (!fc__op_axis(ctx, op, axis, x->raw.rank, x, &a)) return NULL;
    bool block = fc_dtype_is_block(x->raw.dtype);
    if (block && !fc__raw_is_contiguous(&x->raw)) {
        fc__fail(ctx, FC_ERR_UNSUPPORTED_VIEW, "%s: block-quantized %s is not contiguous", op,
                 fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    int r = x->raw.rank - 1 + index->raw.rank;
    if (r > FC_MAX_RANK) {
        char e[160];
        fc__fail(ctx, FC_ERR_RANK, "%s: selecting %s by index %s gives rank %d > %d", op,
                 fc__desc(x, d, (int)sizeof d), fc__desc(index, e, (int)sizeof e), r, FC_MAX_RANK);
        return NULL;
    }
    fc__index ix;
    if (!load_checked(ctx, op, x, a, index, &ix)) return NULL;
    fc_tensor *out = fc__index_select(ctx, op, x, a, index, &ix);
    fc__index_free(&ix);
    if (!out) return NULL;
    if (block) return fc__finish(ctx, op, out); /* block tensors never require grad */
    return finish_indexed(ctx, op, index_select_backward, out, 1, &x, index, a);
}

fc_tensor *fc_index_select(fc_ctx *ctx, fc_tensor *x, int axis, fc_tensor *index) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "index_select", x);
    FC__CHECK_INPUT(ctx, "index_select", index);
    return select_impl(ctx, "index_select", x, axis, index);
}

fc_tensor *fc_embedding(fc_ctx *ctx, fc_tensor *table, fc_tensor *ids) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "embedding", table);
    FC__CHECK_INPUT(ctx, "embedding", ids);
    if (table->raw.rank != 2) {
        char d[160];
        fc__fail(ctx, FC_ERR_RANK, "embedding: table %s must have rank 2 ([V, D])",
                 fc__desc(table, d, (int)sizeof d));
        return NULL;
    }
    return select_impl(ctx, "embedding", table, 0, ids);
}

/* ---- gather / scatter_add ------------------------------------------------------------------- */

/* Checks index against x (and src) like PyTorch: same rank; index dims no
 * larger than x's off the axis and than src's everywhere. */
static bool check_fiber_shapes(fc_ctx *ctx, const char *op, const fc_tensor *x, int a,
                               const fc_tensor *index, const fc_tensor *src) {
    char d[160], e[160], f[160];
    const fc_raw *ir = &index->raw;
    bool ok = ir->rank == x->raw.rank && (!src || src->raw.rank == ir->rank);
    for (int i = 0; ok && i < ir->rank; i++)
        ok = (i == a || ir->shape[i] <= x->raw.shape[i]) &&
             (!src || ir->shape[i] <= src->raw.shape[i]);
    if (ok) return true;
    fc__fail(ctx, ir->rank == x->raw.rank ? FC_ERR_SHAPE_MISMATCH : FC_ERR_RANK,
             "%s: index %s does not fit x %s%s%s on axis %d: need the same rank, index dims <= "
             "x's off the axis%s",
             op, fc__desc(index, d, (int)sizeof d), fc__desc(x, e, (int)sizeof e),
             src ? " and src " : "", src ? fc__desc(src, f, (int)sizeof f) : "", a,
             src ? " and <= src's everywhere" : "");
    return false;
}

/* gather's adjoint: gout scattered (added) into zeros of x's shape. */
static fc_status gather_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *index = fc__ag_saved_tensor(ctx, node, INDEX_SAVED_INDEX);
    fc_tensor *z =
        index ? fc_zeros(ctx, gout->raw.dtype, node->in[0].shape, node->in[0].rank) : NULL;
    gin[0] = fc_scatter_add(ctx, z, (int)node->i[INDEX_I_AXIS], index, gout);
    return gin[0] ? FC_OK : fc_ctx_status(ctx);
}

fc_tensor *fc_gather(fc_ctx *ctx, fc_tensor *x, int axis, fc_tensor *index) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "gather", x);
    FC__CHECK_INPUT(ctx, "gather", index);
    int a;
    char d[160];
    if (!fc__op_axis(ctx, "gather", axis, x->raw.rank, x, &a)) return NULL;
    if (fc_dtype_is_block(x->raw.dtype)) {
        fc__fail(ctx, FC_ERR_DTYPE, "gather: %s is block-quantized; convert with fc_to first",
                 fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    if (!check_fiber_shapes(ctx, "gather", x, a, index, NULL)) return NULL;
    fc__index ix;
    if (!load_checked(ctx, "gather", x, a, index, &ix)) return NULL;
    fc_tensor *out = fc__index_gather(ctx, "gather", x, a, index, &ix);
    fc__index_free(&ix);
    if (!out) return NULL;
    return finish_indexed(ctx, "gather", gather_backward, out, 1, &x, index, a);
}

/* Inputs x, src. x passes gout through; src gets gout gathered at the
 * index, zero-padded where src is larger than the index. */
static fc_status scatter_add_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout,
                                      fc_tensor **gin) {
    if (node->in[0].needs) gin[0] = gout;
    if (!node->in[1].needs) return FC_OK;
    fc_tensor *index = fc__ag_saved_tensor(ctx, node, INDEX_SAVED_INDEX);
    fc_tensor *g = index ? fc_gather(ctx, gout, (int)node->i[INDEX_I_AXIS], index) : NULL;
    if (!g) return fc_ctx_status(ctx);
    const fc__ag_input *src = &node->in[1];
    int64_t pads[2 * FC_MAX_RANK];
    bool same = true;
    for (int i = 0; i < src->rank; i++) {
        pads[2 * i] = 0;
        pads[2 * i + 1] = src->shape[i] - g->raw.shape[i];
        same = same && pads[2 * i + 1] == 0;
    }
    gin[1] = same ? g : fc_pad(ctx, g, pads, 0.0);
    return gin[1] ? FC_OK : fc_ctx_status(ctx);
}

fc_tensor *fc_scatter_add(fc_ctx *ctx, fc_tensor *x, int axis, fc_tensor *index, fc_tensor *src) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "scatter_add", x);
    FC__CHECK_INPUT(ctx, "scatter_add", index);
    FC__CHECK_INPUT(ctx, "scatter_add", src);
    int a;
    char d[160], e[160];
    if (!fc__op_axis(ctx, "scatter_add", axis, x->raw.rank, x, &a)) return NULL;
    fc_dtype dt = x->raw.dtype;
    if (src->raw.dtype != dt) {
        fc__fail(ctx, FC_ERR_DTYPE,
                 "scatter_add: x %s and src %s differ in dtype; cast one with "
                 "fc_to",
                 fc__desc(x, d, (int)sizeof d), fc__desc(src, e, (int)sizeof e));
        return NULL;
    }
    if (!fc_dtype_is_float(dt) && !fc_dtype_supports_int_math(dt)) {
        fc__fail(ctx, FC_ERR_DTYPE,
                 "scatter_add: dtype %s cannot be added (float or integer "
                 "dtypes only; cast with fc_to)",
                 fc_dtype_name(dt));
        return NULL;
    }
    if (!check_fiber_shapes(ctx, "scatter_add", x, a, index, src)) return NULL;
    fc__index ix;
    if (!load_checked(ctx, "scatter_add", x, a, index, &ix)) return NULL;
    fc_tensor *out = fc__index_scatter_add(ctx, "scatter_add", x, a, index, &ix, src);
    fc__index_free(&ix);
    if (!out) return NULL;
    fc_tensor *in[2] = {x, src};
    return finish_indexed(ctx, "scatter_add", scatter_add_backward, out, 2, in, index, a);
}

/* ---- one_hot -------------------------------------------------------------------------------- */

fc_tensor *fc_one_hot(fc_ctx *ctx, fc_tensor *index, int64_t num_classes, fc_dtype dtype) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "one_hot", index);
    char d[160];
    if (!fc_dtype_is_valid(dtype) || fc_dtype_is_block(dtype)) {
        fc__fail(ctx, FC_ERR_DTYPE, "one_hot: result dtype %s must be a scalar dtype",
                 fc_dtype_is_valid(dtype) ? fc_dtype_name(dtype) : "(invalid)");
        return NULL;
    }
    if (num_classes < 1) {
        fc__fail(ctx, FC_ERR_INVALID_ARG, "one_hot: num_classes is %lld; need >= 1",
                 (long long)num_classes);
        return NULL;
    }
    if (index->raw.rank == FC_MAX_RANK) {
        fc__fail(ctx, FC_ERR_RANK, "one_hot: index %s already has the maximum rank %d",
                 fc__desc(index, d, (int)sizeof d), FC_MAX_RANK);
        return NULL;
    }
    fc__index ix;
    if (!fc__index_load(ctx, "one_hot", index, &ix)) return NULL;
    if (!fc__index_check(ctx, "one_hot", &ix, index, num_classes, "num_classes")) {
        fc__index_free(&ix);
        return NULL;
    }
    fc_tensor *out = fc__index_one_hot(ctx, "one_hot", index, &ix, num_classes, dtype);
    fc__index_free(&ix);
    return fc__finish(ctx, "one_hot", out);
}
