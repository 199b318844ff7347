/* SPDX-License-Identifier: MIT */
/* ops/layout.c - the view ops: reshape, view, permute, transpose, narrow,
 * slice, expand, squeeze, unsqueeze. This file validates the arguments,
 * builds the view through exec/kernels/layout.c and records one node per
 * op; each backward rule sits under its forward.
 *
 * A view moves no numbers, so its gradient only moves them back: a reshape
 * (and view/squeeze/unsqueeze) reshapes gout to the input's shape, a
 * permutation applies the inverse permutation, a window (narrow/slice, and
 * split's pieces) hands gout to the engine as a gradient of that window of
 * the input (fc__ag_gin_region: no full-size zero tensor is built), and an
 * expand hands gout over as it is: the engine sums broadcast axes down to
 * the input's shape (fc__ag_reduce_to), which is exactly the adjoint of a
 * zero-stride view. */
#include "exec/kernels/layout.h"
#include "ag/tape.h"
#include "fucina.h"
#include "ops/layout.h"

/* ---- shared helpers ------------------------------------------------------------------------- */

/* check_finite on the result, then the autograd node when x needs one.
 * Returns out, or NULL (out released) on failure; *node is the recorded
 * node or NULL. */
static fc_tensor *finish(fc_ctx *ctx, const char *op, fc__backward_fn bw, fc_tensor *out,
                         fc_tensor *x, fc_node **node) {
    *node = NULL;
    out = fc__finish(ctx, op, out);
    if (!out || !fc__ag_wants(ctx, 1, &x)) return out;
    *node = fc__ag_record(ctx, op, bw, out, 1, &x);
    if (!*node) {
        fc_release(out);
        return NULL;
    }
    return out;
}

static bool check_shape_arg(fc_ctx *ctx, const char *op, const int64_t *shape, int rank) {
    if (!shape) {
        fc__fail(ctx, FC_ERR_NULL_ARG, "%s: shape is NULL", op);
        return false;
    }
    if (rank < 1 || rank > FC_MAX_RANK) {
        fc__fail(ctx, FC_ERR_RANK, "%s: rank %d is outside 1..%d", op, rank, FC_MAX_RANK);
        return false;
    }
    return true;
}

/* ---- reshape / view / squeeze / unsqueeze --------------------------------------------------- */

/* Node: nothing saved, no parameters; the input's shape is node->in[0]. */

static fc_status reshape_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    gin[0] = fc_reshape(ctx, gout, node->in[0].shape, node->in[0].rank);
    return gin[0] ? FC_OK : fc_ctx_status(ctx);
}

/* Resolves one -1 against x's element count into out. */
static bool resolve_shape(fc_ctx *ctx, const char *op, const fc_tensor *x, const int64_t *shape,
                          int rank, int64_t *out) {
    if (!check_shape_arg(ctx, op, shape, rank)) return false;
    int64_t n = fc__raw_numel(&x->raw), known = 1;
    int infer = -1;
    char d[160], s[160];
    for (int i = 0; i < rank; i++) {
        if (shape[i] == -1 && infer < 0) {
            infer = i;
            continue;
        }
        if (shape[i] < 1) {
            fc__fail(ctx, FC_ERR_INVALID_SHAPE,
                     "%s: target shape %s: dims must be >= 1, with at most one -1", op,
                     FC__SHAPE_STR(shape, rank, s));
            return false;
        }
        /* known only grows; once past n the shapes cannot match */
        known = known > n / shape[i] ? n + 1 : known * shape[i];
        out[i] = shape[i];
    }
    if (infer >= 0) {
        if (known > n || n % known != 0) goto mismatch;
        out[infer] = n / known;
    } else if (known != n) {
        goto mismatch;
    }
    return true;
mismatch:
    fc__fail(ctx, FC_ERR_INVALID_SHAPE, "%s: cannot reshape %s (%lld elements) to %s", op,
             fc__desc(x, d, (int)sizeof d), (long long)n, FC__SHAPE_STR(shape, rank, s));
    return false;
}

static fc_tensor *reshape_impl(fc_ctx *ctx, const char *op, fc_tensor *x, const int64_t *shape,
                               int rank, bool allow_copy) {
    int64_t target[FC_MAX_RANK];
    if (!resolve_shape(ctx, op, x, shape, rank, target)) return NULL;
    fc_tensor *out;
    if (fc__raw_is_contiguous(&x->raw)) {
        out = fc__layout_reshape_view(ctx, op, x, target, rank);
    } else if (!allow_copy) {
        char d[160];
        fc__fail(ctx, FC_ERR_UNSUPPORTED_VIEW,
                 "%s: %s is not contiguous, so it has no view of another shape; use "
                 "fc_reshape (copies) or fc_contiguous first",
                 op, fc__desc(x, d, (int)sizeof d));
        return NULL;
    } else {
        /* the row-major order is what a reshape preserves, so the logical
         * contents copied in order are already the result */
        out = fc__layout_reshape_copy(ctx, op, x, target, rank);
    }
    if (!out) return NULL;
    fc_node *nd;
    return finish(ctx, op, reshape_backward, out, x, &nd);
}

fc_tensor *fc_reshape(fc_ctx *ctx, fc_tensor *x, const int64_t *shape, int rank) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "reshape", x);
    return reshape_impl(ctx, "reshape", x, shape, rank, true);
}

fc_tensor *fc_view(fc_ctx *ctx, fc_tensor *x, const int64_t *shape, int rank) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "view", x);
    return reshape_impl(ctx, "view", x, shape, rank, false);
}

fc_tensor *fc_squeeze(fc_ctx *ctx, fc_tensor *x, int axis) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "squeeze", x);
    int a, r = x->raw.rank;
    if (!fc__op_axis(ctx, "squeeze", axis, r, x, &a)) return NULL;
    char d[160];
    if (x->raw.shape[a] != 1) {
        fc__fail(ctx, FC_ERR_INVALID_SHAPE, "squeeze: axis %d of %s has size %lld, not 1", a,
                 fc__desc(x, d, (int)sizeof d), (long long)x->raw.shape[a]);
        return NULL;
    }
    if (r == 1) {
        fc__fail(ctx, FC_ERR_RANK, "squeeze: %s has one axis; tensors keep at least one",
                 fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    fc_tensor *out = fc__layout_squeeze(ctx, "squeeze", x, a);
    if (!out) return NULL;
    fc_node *nd;
    return finish(ctx, "squeeze", reshape_backward, out, x, &nd);
}

fc_tensor *fc_unsqueeze(fc_ctx *ctx, fc_tensor *x, int axis) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "unsqueeze", x);
    int a, r = x->raw.rank;
    if (r == FC_MAX_RANK) {
        char d[160];
        fc__fail(ctx, FC_ERR_RANK, "unsqueeze: %s already has the maximum rank %d",
                 fc__desc(x, d, (int)sizeof d), FC_MAX_RANK);
        return NULL;
    }
    if (!fc__op_axis(ctx, "unsqueeze", axis, r + 1, x, &a)) return NULL;
    fc_tensor *out = fc__layout_unsqueeze(ctx, "unsqueeze", x, a);
    if (!out) return NULL;
    fc_node *nd;
    return finish(ctx, "unsqueeze", reshape_backward, out, x, &nd);
}

/* ---- permute / transpose -------------------------------------------------------------------- */

/* Node: node->i[PERMUTE_I_PERM + k] = the input axis of output axis k, for
 * k < rank. */
enum { PERMUTE_I_PERM = 0 };

/* The inverse permutation routes each gradient axis back to its input axis. */
static fc_status permute_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    int inv[FC_MAX_RANK];
    for (int k = 0; k < node->out_rank; k++)
        inv[node->i[PERMUTE_I_PERM + k]] = k;
    gin[0] = fc_permute(ctx, gout, inv);
    return gin[0] ? FC_OK : fc_ctx_status(ctx);
}

static fc_tensor *permute_impl(fc_ctx *ctx, const char *op, fc_tensor *x, const int *perm) {
    int r = x->raw.rank, p[FC_MAX_RANK];
    bool seen[FC_MAX_RANK] = {false};
    for (int i = 0; i < r; i++) {
        if (!fc__op_axis(ctx, op, perm[i], r, x, &p[i])) return NULL;
        if (seen[p[i]]) {
            char d[160];
            fc__fail(ctx, FC_ERR_INVALID_ARG,
                     "%s: axis %d appears twice; need a permutation of "
                     "the %d axes of %s",
                     op, perm[i], r, fc__desc(x, d, (int)sizeof d));
            return NULL;
        }
        seen[p[i]] = true;
    }
    fc_tensor *out = fc__layout_permute(ctx, op, x, p);
    if (!out) return NULL;
    fc_node *nd;
    out = finish(ctx, op, permute_backward, out, x, &nd);
    if (nd)
        for (int k = 0; k < r; k++)
            nd->i[PERMUTE_I_PERM + k] = p[k];
    return out;
}

fc_tensor *fc_permute(fc_ctx *ctx, fc_tensor *x, const int *perm) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "permute", x);
    if (!perm) {
        fc__fail(ctx, FC_ERR_NULL_ARG, "permute: perm is NULL");
        return NULL;
    }
    return permute_impl(ctx, "permute", x, perm);
}

fc_tensor *fc_transpose(fc_ctx *ctx, fc_tensor *x, int axis0, int axis1) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "transpose", x);
    int a, b, perm[FC_MAX_RANK];
    if (!fc__op_axis(ctx, "transpose", axis0, x->raw.rank, x, &a) ||
        !fc__op_axis(ctx, "transpose", axis1, x->raw.rank, x, &b))
        return NULL;
    for (int i = 0; i < x->raw.rank; i++)
        perm[i] = i;
    perm[a] = b;
    perm[b] = a;
    return permute_impl(ctx, "transpose", x, perm);
}

/* ---- narrow / slice (and split's pieces) ---------------------------------------------------- */

/* Node: the window's axis, its first element on that axis, and its step. */
enum { WINDOW_I_AXIS, WINDOW_I_START, WINDOW_I_STEP };

/* gout goes to the engine as it is, as a region gradient: the window of the
 * input's row-major layout it came from (the engine adds it there, so
 * several pieces of one tensor never each build and add a full-size zero
 * tensor). */
static fc_status window_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    const fc__ag_input *in = &node->in[0];
    int axis = (int)node->i[WINDOW_I_AXIS];
    int64_t strides[FC_MAX_RANK] = {0}, s = 1;
    for (int d = in->rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= in->shape[d];
    }
    int64_t offset = node->i[WINDOW_I_START] * strides[axis];
    strides[axis] *= node->i[WINDOW_I_STEP];
    gin[0] = gout;
    return fc__ag_gin_region(ctx, node, 0, strides, offset);
}

fc_tensor *fc__layout_window_op(fc_ctx *ctx, const char *op, fc_tensor *x, int axis, int64_t start,
                                int64_t n, int64_t step) {
    fc_tensor *out = fc__layout_window(ctx, op, x, axis, start, n, step);
    if (!out) return NULL;
    fc_node *nd;
    out = finish(ctx, op, window_backward, out, x, &nd);
    if (nd) {
        nd->i[WINDOW_I_AXIS] = axis;
        nd->i[WINDOW_I_START] = start;
        nd->i[WINDOW_I_STEP] = step;
    }
    return out;
}

fc_tensor *fc_narrow(fc_ctx *ctx, fc_tensor *x, int axis, int64_t start, int64_t length) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "narrow", x);
    int a;
    if (!fc__op_axis(ctx, "narrow", axis, x->raw.rank, x, &a)) return NULL;
    int64_t dim = x->raw.shape[a];
    char d[160];
    if (length < 1) {
        fc__fail(ctx, length == 0 ? FC_ERR_EMPTY_SELECTION : FC_ERR_INVALID_ARG,
                 "narrow: length %lld of axis %d of %s: need length >= 1", (long long)length, a,
                 fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    if (start < 0 || start >= dim || length > dim - start) {
        fc__fail(ctx, FC_ERR_INDEX,
                 "narrow: window start %lld, length %lld is outside axis %d of %s (size %lld)",
                 (long long)start, (long long)length, a, fc__desc(x, d, (int)sizeof d),
                 (long long)dim);
        return NULL;
    }
    return fc__layout_window_op(ctx, "narrow", x, a, start, length, 1);
}

/* Python's clamping of a slice bound for a positive step. */
static int64_t clamp_bound(int64_t v, int64_t dim) {
    if (v < 0) {
        v += dim;
        return v < 0 ? 0 : v;
    }
    return v > dim ? dim : v;
}

fc_tensor *fc_slice(fc_ctx *ctx, fc_tensor *x, int axis, int64_t start, int64_t stop,
                    int64_t step) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "slice", x);
    int a;
    if (!fc__op_axis(ctx, "slice", axis, x->raw.rank, x, &a)) return NULL;
    char d[160];
    if (step < 1) {
        fc__fail(ctx, FC_ERR_INVALID_ARG, "slice: step %lld on axis %d of %s: need step >= 1",
                 (long long)step, a, fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    int64_t dim = x->raw.shape[a];
    int64_t b = clamp_bound(start, dim), e = clamp_bound(stop, dim);
    if (e <= b) {
        fc__fail(ctx, FC_ERR_EMPTY_SELECTION,
                 "slice: %lld:%lld:%lld selects nothing on axis %d of %s (size %lld)",
                 (long long)start, (long long)stop, (long long)step, a,
                 fc__desc(x, d, (int)sizeof d), (long long)dim);
        return NULL;
    }
    int64_t n = (e - b - 1) / step + 1;
    /* A one-element window has no stride to speak of; keeping a huge step
     * would overflow stride * step in the view for nothing. For two or more
     * elements step < dim, so stride * step stays inside the storage. */
    return fc__layout_window_op(ctx, "slice", x, a, b, n, n == 1 ? 1 : step);
}

/* ---- expand --------------------------------------------------------------------------------- */

/* Node: nothing saved, no parameters. The engine sums gout's broadcast axes
 * down to the input's shape. */
static fc_status expand_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    (void)ctx;
    (void)node;
    gin[0] = gout;
    return FC_OK;
}

fc_tensor *fc_expand(fc_ctx *ctx, fc_tensor *x, const int64_t *shape, int rank) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "expand", x);
    if (!check_shape_arg(ctx, "expand", shape, rank)) return NULL;
    char d[160], s[160];
    int xr = x->raw.rank;
    if (rank < xr) {
        fc__fail(ctx, FC_ERR_RANK, "expand: target %s has fewer axes than %s",
                 FC__SHAPE_STR(shape, rank, s), fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    int64_t out_shape[FC_MAX_RANK];
    for (int i = 0; i < rank; i++) {
        int j = i - (rank - xr); /* x's axis, right-aligned; < 0 for a new leading axis */
        int64_t want = shape[i];
        if (want == -1 && j >= 0) want = x->raw.shape[j];
        if (want < 1) {
            fc__fail(ctx, FC_ERR_INVALID_SHAPE,
                     "expand: target %s: dims must be >= 1 (-1 only keeps an existing axis)",
                     FC__SHAPE_STR(shape, rank, s));
            return NULL;
        }
        out_shape[i] = want;
        if (j >= 0 && x->raw.shape[j] != want && x->raw.shape[j] != 1) {
            fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                     "expand: cannot expand %s to %s: axis %d has size %lld (only size-1 axes "
                     "expand)",
                     fc__desc(x, d, (int)sizeof d), FC__SHAPE_STR(shape, rank, s), j,
                     (long long)x->raw.shape[j]);
            return NULL;
        }
    }
    if (fc__shape_numel(out_shape, rank, NULL) != FC_OK) {
        fc__fail(ctx, FC_ERR_OVERFLOW, "expand: target %s has too many elements",
                 FC__SHAPE_STR(out_shape, rank, s));
        return NULL;
    }
    fc_tensor *out = fc__layout_expand(ctx, "expand", x, out_shape, rank);
    if (!out) return NULL;
    fc_node *nd;
    return finish(ctx, "expand", expand_backward, out, x, &nd);
}
