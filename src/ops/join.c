/* SPDX-License-Identifier: MIT */
/* ops/join.c - concat, stack, split, pad: argument checks, the autograd
 * nodes and their backward rules. The copies are in
 * exec/kernels/join.c; split's pieces are window views
 * (fc__layout_window_op, src/ops/layout.c, which holds their rule).
 *
 * Each input of a join owns one slab of the output along the join axis, so
 * its gradient is that slab of gout: a narrow view, squeezed for stack. The
 * slab sizes come from the input shapes the node recorded. A node holds at
 * most FC__AG_MAX_IN inputs, so a join of more inputs records a tree:
 * groups of inputs get nodes on views of their part of the output (no
 * copy), and a concat node joins the groups (each group is a concat input
 * whose slab spans its members). pad's input owns the interior, one strided
 * view of gout. */
#include <string.h>

#include "ag/tape.h"
#include "exec/kernels/join.h"
#include "exec/kernels/layout.h"
#include "fucina.h"
#include "ops/layout.h"

/* ---- argument checks ------------------------------------------------------------------------ */

/* A non-empty list without NULL entries. */
static bool check_list(fc_ctx *ctx, const char *op, fc_tensor *const *xs, int n) {
    if (!xs) {
        fc__fail(ctx, FC_ERR_NULL_ARG, "%s: xs is NULL", op);
        return false;
    }
    if (n < 1) {
        fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: n is %d; need at least one input", op, n);
        return false;
    }
    for (int k = 0; k < n; k++) {
        if (!xs[k]) {
            fc__fail(ctx, FC_ERR_NULL_ARG, "%s: input %d is NULL", op, k);
            return false;
        }
        if (xs[k]->ctx != ctx) {
            fc__fail(ctx, FC_ERR_CONTEXT, "%s: input %d belongs to another context", op, k);
            return false;
        }
    }
    return true;
}

/* Same dtype, same rank and same shape (except `skip_axis`, -1 for none). */
static bool check_same(fc_ctx *ctx, const char *op, fc_tensor *const *xs, int n, int skip_axis) {
    const fc_raw *a = &xs[0]->raw;
    char d0[160], dk[160];
    for (int k = 1; k < n; k++) {
        const fc_raw *b = &xs[k]->raw;
        fc_status st = FC_OK;
        if (b->dtype != a->dtype)
            st = FC_ERR_DTYPE;
        else if (b->rank != a->rank)
            st = FC_ERR_RANK;
        else
            for (int i = 0; i < a->rank; i++)
                if (i != skip_axis && a->shape[i] != b->shape[i]) st = FC_ERR_SHAPE_MISMATCH;
        if (st == FC_OK) continue;
        fc__desc(xs[0], d0, (int)sizeof d0);
        fc__desc(xs[k], dk, (int)sizeof dk);
        if (st == FC_ERR_DTYPE)
            fc__fail(ctx, st, "%s: input 0 is %s but input %d is %s; cast one with fc_to", op, d0,
                     k, dk);
        else if (skip_axis >= 0)
            fc__fail(ctx, st, "%s: input 0 is %s but input %d is %s; shapes must match off axis %d",
                     op, d0, k, dk, skip_axis);
        else
            fc__fail(ctx, st, "%s: input 0 is %s but input %d is %s; shapes must match", op, d0, k,
                     dk);
        return false;
    }
    return true;
}

/* ---- concat / stack: nodes and rules -------------------------------------------------------- */

/* Node (concat, stack, and a grouped join's nodes): the join axis of the
 * output; nothing saved (the slab sizes are the inputs' shapes). */
enum { JOIN_I_AXIS = 0 };

/* concat, and the top node of a grouped join: input k's slab of gout */
static fc_status concat_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    int axis = (int)node->i[JOIN_I_AXIS];
    int64_t pos = 0;
    for (int k = 0; k < node->n_in; k++) {
        int64_t len = node->in[k].shape[axis];
        if (node->in[k].needs) {
            gin[k] = fc_narrow(ctx, gout, axis, pos, len);
            if (!gin[k]) return fc_ctx_status(ctx);
        }
        pos += len;
    }
    return FC_OK;
}

/* stack: the axis is the new one; input k is index k of it */
static fc_status stack_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    int axis = (int)node->i[JOIN_I_AXIS];
    for (int k = 0; k < node->n_in; k++) {
        if (!node->in[k].needs) continue;
        gin[k] = fc_squeeze(ctx, fc_narrow(ctx, gout, axis, k, 1), axis);
        if (!gin[k]) return fc_ctx_status(ctx);
    }
    return FC_OK;
}

/* Records out = join(xs) along output axis `axis`. Groups of inputs get
 * nodes on views of their slab of out; the top node joins the slabs. */
static bool record_join(fc_ctx *ctx, const char *op, fc__backward_fn bw, fc_tensor *out,
                        fc_tensor *const *xs, int n, int axis, bool stack) {
    if (n <= FC__AG_MAX_IN) {
        fc_node *nd = fc__ag_record(ctx, op, bw, out, n, xs);
        if (!nd) return false;
        nd->i[JOIN_I_AXIS] = axis;
        return true;
    }
    int per = (n + FC__AG_MAX_IN - 1) / FC__AG_MAX_IN, ng = (n + per - 1) / per;
    fc_tensor *groups[FC__AG_MAX_IN] = {NULL};
    bool ok = true;
    int64_t pos = 0;
    for (int g = 0; g < ng && ok; g++) {
        int lo = g * per, hi = lo + per < n ? lo + per : n;
        int64_t span = 0;
        for (int k = lo; k < hi; k++)
            span += stack ? 1 : xs[k]->raw.shape[axis];
        int64_t shape[FC_MAX_RANK];
        memcpy(shape, out->raw.shape, sizeof shape);
        shape[axis] = span;
        groups[g] = fc__tensor_view(ctx, op, out, shape, out->raw.strides, out->raw.rank,
                                    out->raw.offset + pos * out->raw.strides[axis]);
        ok = groups[g] != NULL;
        if (ok && fc__ag_wants(ctx, hi - lo, xs + lo))
            ok = record_join(ctx, op, bw, groups[g], xs + lo, hi - lo, axis, stack);
        pos += span;
    }
    if (ok) {
        fc_node *nd = fc__ag_record(ctx, op, concat_backward, out, ng, groups);
        ok = nd != NULL;
        if (ok) nd->i[JOIN_I_AXIS] = axis;
    }
    for (int g = 0; g < ng; g++)
        fc_release(groups[g]);
    return ok;
}

static fc_tensor *finish_join(fc_ctx *ctx, const char *op, fc__backward_fn bw, fc_tensor *out,
                              fc_tensor *const *xs, int n, int axis, bool stack) {
    out = fc__finish(ctx, op, out);
    if (out && fc__ag_wants(ctx, n, xs) && !record_join(ctx, op, bw, out, xs, n, axis, stack)) {
        fc_release(out);
        return NULL;
    }
    return out;
}

/* ---- concat / stack ------------------------------------------------------------------------- */

fc_tensor *fc_concat(fc_ctx *ctx, fc_tensor *const *xs, int n, int axis) {
    FC__CHECK_CTX(ctx);
    int a;
    if (!check_list(ctx, "concat", xs, n) ||
        !fc__op_axis(ctx, "concat", axis, xs[0]->raw.rank, xs[0], &a) ||
        !check_same(ctx, "concat", xs, n, a))
        return NULL;
    const fc_raw *x0 = &xs[0]->raw;
    int64_t shape[FC_MAX_RANK];
    memcpy(shape, x0->shape, sizeof shape);
    shape[a] = 0;
    for (int k = 0; k < n; k++) {
        int64_t d = xs[k]->raw.shape[a];
        if (shape[a] > FC__MAX_ELEMS - d) {
            fc__fail(ctx, FC_ERR_OVERFLOW, "concat: axis %d grows past %lld elements", a,
                     (long long)FC__MAX_ELEMS);
            return NULL;
        }
        shape[a] += d;
    }
    fc_tensor *out = fc__join(ctx, "concat", xs, n, a, false, shape, x0->rank);
    if (!out) return NULL;
    return finish_join(ctx, "concat", concat_backward, out, xs, n, a, false);
}

fc_tensor *fc_stack(fc_ctx *ctx, fc_tensor *const *xs, int n, int axis) {
    FC__CHECK_CTX(ctx);
    if (!check_list(ctx, "stack", xs, n) || !check_same(ctx, "stack", xs, n, -1)) return NULL;
    const fc_raw *x0 = &xs[0]->raw;
    char d[160];
    if (x0->rank == FC_MAX_RANK) {
        fc__fail(ctx, FC_ERR_RANK, "stack: inputs %s already have the maximum rank %d",
                 fc__desc(xs[0], d, (int)sizeof d), FC_MAX_RANK);
        return NULL;
    }
    int a;
    if (!fc__op_axis(ctx, "stack", axis, x0->rank + 1, xs[0], &a)) return NULL;
    if (fc_dtype_is_block(x0->dtype) && a == x0->rank) {
        fc__fail(ctx, FC_ERR_UNSUPPORTED_VIEW,
                 "stack: %s is block-quantized: a new last axis would split its blocks",
                 fc__desc(xs[0], d, (int)sizeof d));
        return NULL;
    }
    int64_t shape[FC_MAX_RANK];
    for (int i = 0, k = 0; i <= x0->rank; i++)
        shape[i] = i == a ? n : x0->shape[k++];
    fc_tensor *out = fc__join(ctx, "stack", xs, n, a, true, shape, x0->rank + 1);
    if (!out) return NULL;
    return finish_join(ctx, "stack", stack_backward, out, xs, n, a, true);
}

/* ---- split ---------------------------------------------------------------------------------- */

fc_status fc_split(fc_ctx *ctx, fc_tensor *x, int axis, const int64_t *sizes, int n,
                   fc_tensor **out) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!x || !sizes || !out)
        return fc__fail(ctx, FC_ERR_NULL_ARG, "split: %s is NULL",
                        !x       ? "input 'x'"
                        : !sizes ? "sizes"
                                 : "out");
    if (x->ctx != ctx) return FC__CHECK_SAME_CTX(ctx, "split", x, "input 'x'");
    int a;
    if (!fc__op_axis(ctx, "split", axis, x->raw.rank, x, &a)) return FC_ERR_AXIS;
    char d[160];
    if (n < 1) return fc__fail(ctx, FC_ERR_INVALID_ARG, "split: n is %d; need n >= 1", n);
    int64_t total = 0, dim = x->raw.shape[a];
    for (int k = 0; k < n; k++) {
        if (sizes[k] < 1)
            return fc__fail(ctx, FC_ERR_INVALID_ARG, "split: sizes[%d] is %lld; need >= 1", k,
                            (long long)sizes[k]);
        total += sizes[k] > dim ? dim + 1 : sizes[k];
        if (total > dim) break;
    }
    if (total != dim)
        return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                        "split: the %d sizes do not sum to %lld, the size of axis %d of %s", n,
                        (long long)dim, a, fc__desc(x, d, (int)sizeof d));
    /* build every piece before touching out[], so a failure leaves it as it was */
    size_t bytes = sizeof(fc_tensor *) * (size_t)n;
    fc_tensor **tmp = fc__ctx_alloc(ctx, bytes);
    if (!tmp) return fc__fail(ctx, FC_ERR_OOM, "split: out of memory for %d pieces", n);
    int64_t start = 0;
    int made = 0;
    for (; made < n; made++) {
        /* a window with its own node, placing its gradient into x's shape */
        tmp[made] = fc__layout_window_op(ctx, "split", x, a, start, sizes[made], 1);
        if (!tmp[made]) break;
        start += sizes[made];
    }
    fc_status st = made == n ? FC_OK : fc_ctx_status(ctx);
    if (st == FC_OK)
        memcpy(out, tmp, bytes);
    else
        for (int k = 0; k < made; k++)
            fc_release(tmp[k]);
    fc__ctx_free(ctx, tmp, bytes);
    return st;
}

/* ---- pad ------------------------------------------------------------------------------------ */

/* Node: node->i[PAD_I_LEAD + i] = the leading pad of axis i, for i < rank. */
enum { PAD_I_LEAD = 0 };

/* The input's gradient is the interior of gout: a strided view of it. */
static fc_status pad_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (fc__ag_create_graph(ctx)) { /* the interior through recorded narrows */
        fc_tensor *g = gout;
        for (int i = 0; i < node->in[0].rank && g; i++)
            if (node->in[0].shape[i] != g->raw.shape[i])
                g = fc_narrow(ctx, g, i, node->i[PAD_I_LEAD + i], node->in[0].shape[i]);
        gin[0] = g;
        return fc_ctx_status(ctx);
    }
    int64_t offset = gout->raw.offset;
    for (int i = 0; i < node->in[0].rank; i++)
        offset += node->i[PAD_I_LEAD + i] * gout->raw.strides[i];
    gin[0] = fc__tensor_view(ctx, "backward of pad", gout, node->in[0].shape, gout->raw.strides,
                             node->in[0].rank, offset);
    return gin[0] ? FC_OK : fc_ctx_status(ctx);
}

fc_tensor *fc_pad(fc_ctx *ctx, fc_tensor *x, const int64_t *pads, double value) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "pad", x);
    char d[160];
    if (!pads) {
        fc__fail(ctx, FC_ERR_NULL_ARG, "pad: pads is NULL");
        return NULL;
    }
    if (fc_dtype_is_block(x->raw.dtype)) {
        fc__fail(ctx, FC_ERR_DTYPE, "pad: %s is block-quantized; convert with fc_to first",
                 fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    int r = x->raw.rank;
    int64_t shape[FC_MAX_RANK];
    for (int i = 0; i < r; i++) {
        int64_t b = pads[2 * i], e = pads[2 * i + 1], dim = x->raw.shape[i];
        if (b < 0 || e < 0) {
            fc__fail(ctx, FC_ERR_INVALID_ARG, "pad: pads %lld, %lld of axis %d of %s: need >= 0",
                     (long long)b, (long long)e, i, fc__desc(x, d, (int)sizeof d));
            return NULL;
        }
        if (b > FC__MAX_ELEMS - dim || e > FC__MAX_ELEMS - dim - b) {
            fc__fail(ctx, FC_ERR_OVERFLOW, "pad: axis %d of %s grows past %lld elements", i,
                     fc__desc(x, d, (int)sizeof d), (long long)FC__MAX_ELEMS);
            return NULL;
        }
        shape[i] = dim + b + e;
    }
    fc_tensor *out = fc__join_pad(ctx, "pad", x, shape, pads, value);
    if (!out) return NULL;
    out = fc__finish(ctx, "pad", out);
    if (out && fc__ag_wants(ctx, 1, &x)) {
        fc_node *nd = fc__ag_record(ctx, "pad", pad_backward, out, 1, &x);
        if (!nd) {
            fc_release(out);
            return NULL;
        }
        for (int i = 0; i < r; i++)
            nd->i[PAD_I_LEAD + i] = pads[2 * i];
    }
    return out;
}
