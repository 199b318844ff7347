/* layout.c - views: reshape, view, permute, transpose, narrow, slice,
 * expand, squeeze, unsqueeze.
 *
 * Every op here returns a new handle on x's storage (no data is copied or
 * allocated) except fc_reshape of a non-contiguous tensor, which copies
 * once into a fresh contiguous tensor. A write through a view is therefore
 * visible in its base and in every other view of the same storage, and the
 * storage generation they share lets autograd see such writes.
 *
 * Invariants: strides stay non-negative (broadcast axes have stride 0), a
 * view never reaches outside its buffer (fc__tensor_view checks it), and a
 * block-quantized tensor only ever gets the identity view, because a block
 * packs many elements of the last axis into bytes that cannot be split.
 *
 * Autograd: each op records one node whose rule routes the gradient back to
 * the base's elements (src/ag/grad_layout.c, same order as this file). */
#include <string.h>

#include "fucina.h"
#include "exec/kernels/shape_ops.h"

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

/* ---- reshape / view ------------------------------------------------------------------------- */

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

/* A contiguous view of x (which must be contiguous) with a new shape. */
static fc_tensor *contiguous_view(fc_ctx *ctx, const char *op, fc_tensor *x, const int64_t *shape,
                                  int rank) {
    int64_t sshape[FC_MAX_RANK], strides[FC_MAX_RANK];
    memcpy(sshape, shape, sizeof(int64_t) * (size_t)rank);
    sshape[rank - 1] /= fc_dtype_block_elems(x->raw.dtype);
    fc__shape_contiguous_strides(sshape, rank, strides);
    return fc__layout_view(ctx, op, x, shape, strides, rank, x->raw.offset);
}

static fc_tensor *reshape_impl(fc_ctx *ctx, const char *op, fc_tensor *x, const int64_t *shape,
                               int rank, bool allow_copy) {
    int64_t target[FC_MAX_RANK];
    if (!resolve_shape(ctx, op, x, shape, rank, target)) return NULL;
    fc_tensor *out;
    if (fc__raw_is_contiguous(&x->raw)) {
        out = contiguous_view(ctx, op, x, target, rank);
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
        out = fc__tensor_new(ctx, op, x->raw.dtype, target, rank);
        if (!out) return NULL;
        fc_status st = fc__raw_copy_to(&x->raw, fc__raw_base(&out->raw), fc_tensor_nbytes(out));
        if (st != FC_OK) {
            char d[160];
            fc__fail(ctx, st, "%s: cannot copy %s (%s)", op, fc__desc(x, d, (int)sizeof d),
                     fc_strerror(st));
            fc_release(out);
            return NULL;
        }
    }
    if (!out) return NULL;
    fc_node *nd;
    return finish(ctx, op, fc__bw_reshape, out, x, &nd);
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

/* ---- permute / transpose -------------------------------------------------------------------- */

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
    int64_t shape[FC_MAX_RANK], strides[FC_MAX_RANK];
    for (int i = 0; i < r; i++) {
        shape[i] = x->raw.shape[p[i]];
        strides[i] = x->raw.strides[p[i]];
    }
    fc_tensor *out = fc__layout_view(ctx, op, x, shape, strides, r, x->raw.offset);
    if (!out) return NULL;
    fc_node *nd;
    out = finish(ctx, op, fc__bw_permute, out, x, &nd);
    if (nd)
        for (int i = 0; i < r; i++)
            nd->i[i] = p[i];
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

/* ---- narrow / slice ------------------------------------------------------------------------- */

/* n elements of axis starting at start, every step-th (already validated). */
static fc_tensor *window(fc_ctx *ctx, const char *op, fc_tensor *x, int axis, int64_t start,
                         int64_t n, int64_t step) {
    int r = x->raw.rank;
    int64_t shape[FC_MAX_RANK], strides[FC_MAX_RANK];
    memcpy(shape, x->raw.shape, sizeof(int64_t) * (size_t)r);
    memcpy(strides, x->raw.strides, sizeof(int64_t) * (size_t)r);
    shape[axis] = n;
    strides[axis] = x->raw.strides[axis] * step;
    int64_t offset = x->raw.offset + start * x->raw.strides[axis];
    fc_tensor *out = fc__layout_view(ctx, op, x, shape, strides, r, offset);
    if (!out) return NULL;
    fc_node *nd;
    out = finish(ctx, op, fc__bw_slice, out, x, &nd);
    if (nd) {
        nd->i[0] = axis;
        nd->i[1] = start;
        nd->i[2] = step;
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
    return window(ctx, "narrow", x, a, start, length, 1);
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
    return window(ctx, "slice", x, a, b, (e - b - 1) / step + 1, step);
}

/* ---- expand --------------------------------------------------------------------------------- */

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
    int64_t out_shape[FC_MAX_RANK], strides[FC_MAX_RANK];
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
        if (j < 0) {
            strides[i] = 0;
        } else if (x->raw.shape[j] == want) {
            strides[i] = x->raw.strides[j];
        } else if (x->raw.shape[j] == 1) {
            strides[i] = 0;
        } else {
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
    fc_tensor *out = fc__layout_view(ctx, "expand", x, out_shape, strides, rank, x->raw.offset);
    if (!out) return NULL;
    fc_node *nd;
    return finish(ctx, "expand", fc__bw_expand, out, x, &nd);
}

/* ---- squeeze / unsqueeze -------------------------------------------------------------------- */

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
    int64_t shape[FC_MAX_RANK], strides[FC_MAX_RANK];
    for (int i = 0, k = 0; i < r; i++) {
        if (i == a) continue;
        shape[k] = x->raw.shape[i];
        strides[k++] = x->raw.strides[i];
    }
    fc_tensor *out = fc__layout_view(ctx, "squeeze", x, shape, strides, r - 1, x->raw.offset);
    if (!out) return NULL;
    fc_node *nd;
    return finish(ctx, "squeeze", fc__bw_reshape, out, x, &nd);
}

fc_tensor *fc_unsqueeze(fc_ctx *ctx, fc_tensor *x, int axis) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "unsqueeze", x);
    int a, r = x->raw.rank;
    char d[160];
    if (r == FC_MAX_RANK) {
        fc__fail(ctx, FC_ERR_RANK, "unsqueeze: %s already has the maximum rank %d",
                 fc__desc(x, d, (int)sizeof d), FC_MAX_RANK);
        return NULL;
    }
    if (!fc__op_axis(ctx, "unsqueeze", axis, r + 1, x, &a)) return NULL;
    int64_t shape[FC_MAX_RANK], strides[FC_MAX_RANK];
    for (int i = 0, k = 0; i <= r; i++) {
        if (i == a) {
            /* a size-1 axis is never stepped; this stride keeps the view
             * row-major when x is */
            shape[i] = 1;
            strides[i] = a < r ? x->raw.strides[a] * x->raw.shape[a] : 1;
            continue;
        }
        shape[i] = x->raw.shape[k];
        strides[i] = x->raw.strides[k++];
    }
    fc_tensor *out = fc__layout_view(ctx, "unsqueeze", x, shape, strides, r + 1, x->raw.offset);
    if (!out) return NULL;
    fc_node *nd;
    return finish(ctx, "unsqueeze", fc__bw_reshape, out, x, &nd);
}
