/* SPDX-License-Identifier: MIT */
/* ops/sort.c - sort, argsort and topk along one axis. This file validates
 * the arguments, runs the stable sort kernel of exec/kernels/sort.c and
 * records the node; the backward rule sits under its forward.
 *
 * The values are a selection of x's elements along the axis, so their
 * gradient is gather's: the gradient of each value goes back to the
 * position it came from, a scatter_add into zeros at the saved indices.
 * That is a public, recorded op whose own gradient (a gather) is recorded
 * too, so the rule is differentiable to any order under create_graph. The
 * indices are constants of the graph (never differentiated), and argsort
 * has no gradient at all. */
#include <stdio.h>

#include "ag/tape.h"
#include "exec/kernels/layout.h"
#include "exec/kernels/sort.h"
#include "fucina.h"

/* Node (sort, topk): the indices are the one saved value, the normalised
 * axis the one parameter. */
enum { SORT_SAVED_INDEX = 0 };
enum { SORT_I_AXIS = 0 };

/* Scalar dtype (floats, f8, integers, bool) and an axis in range; the
 * normalised axis in *a. */
static bool check_sort_input(fc_ctx *ctx, const char *op, const fc_tensor *x, int axis, int *a) {
    if (fc_dtype_is_block(x->raw.dtype)) {
        char d[160];
        fc__fail(ctx, FC_ERR_DTYPE, "%s: %s is block-quantized; convert with fc_to first", op,
                 fc__desc(x, d, (int)sizeof d));
        return false;
    }
    return fc__op_axis(ctx, op, axis, x->raw.rank, x, a);
}

/* The values' gradient scattered (added) back to the positions the values
 * came from, in zeros of x's shape. */
static fc_status sort_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *index = fc__ag_saved_const(ctx, node, SORT_SAVED_INDEX);
    fc_tensor *z =
        index ? fc_zeros(ctx, gout->raw.dtype, node->in[0].shape, node->in[0].rank) : NULL;
    gin[0] = fc_scatter_add(ctx, z, (int)node->i[SORT_I_AXIS], index, gout);
    return gin[0] ? FC_OK : fc_ctx_status(ctx);
}

/* Sorted values (and indices) of x along the normalised axis a, the first k
 * kept; records the node when x wants a gradient. */
static fc_tensor *sort_values(fc_ctx *ctx, const char *op, fc_tensor *x, int a, int64_t k,
                              bool descending, bool sorted, fc_tensor **indices_out) {
    fc_tensor *vals, *idx;
    if (!fc__sort_run(ctx, op, x, a, k, descending, sorted, &vals, &idx)) return NULL;
    vals = fc__finish(ctx, op, vals);
    if (vals && fc__ag_wants(ctx, 1, &x)) {
        fc_node *nd = fc__ag_record(ctx, op, sort_backward, vals, 1, &x);
        if (!nd || fc__ag_save(ctx, nd, "indices", idx) != FC_OK) {
            fc_release(vals);
            vals = NULL;
        } else {
            nd->i[SORT_I_AXIS] = a;
        }
    }
    if (!vals || !indices_out) {
        fc_release(idx);
        return vals;
    }
    *indices_out = idx;
    return vals;
}

fc_tensor *fc_sort(fc_ctx *ctx, fc_tensor *x, int axis, bool descending, fc_tensor **indices_out) {
    if (indices_out) *indices_out = NULL;
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "sort", x);
    int a;
    if (!check_sort_input(ctx, "sort", x, axis, &a)) return NULL;
    return sort_values(ctx, "sort", x, a, x->raw.shape[a], descending, true, indices_out);
}

fc_tensor *fc_topk(fc_ctx *ctx, fc_tensor *x, int64_t k, int axis, bool largest, bool sorted,
                   fc_tensor **indices_out) {
    if (indices_out) *indices_out = NULL;
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "topk", x);
    int a;
    if (!check_sort_input(ctx, "topk", x, axis, &a)) return NULL;
    if (k < 1 || k > x->raw.shape[a]) { /* tensors have no zero dims */
        char d[160];
        fc__fail(ctx, FC_ERR_INVALID_ARG, "topk: k is %lld; need 1 <= k <= %lld (axis %d of %s)",
                 (long long)k, (long long)x->raw.shape[a], a, fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    return sort_values(ctx, "topk", x, a, k, largest, sorted, indices_out);
}

fc_tensor *fc_argsort(fc_ctx *ctx, fc_tensor *x, int axis, bool descending) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "argsort", x);
    int a;
    if (!check_sort_input(ctx, "argsort", x, axis, &a)) return NULL;
    fc_tensor *idx;
    if (!fc__sort_run(ctx, "argsort", x, a, x->raw.shape[a], descending, true, NULL, &idx))
        return NULL;
    return fc__finish(ctx, "argsort", idx);
}
