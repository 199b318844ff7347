/* SPDX-License-Identifier: MIT */
/* ops/compare.c - comparisons, logic and selection as ops: fc_eq .. fc_ge
 * (tensor and scalar forms), fc_logical_and/or/not, fc_where and
 * fc_masked_fill. The computation is in exec/kernels/compare.c; this file
 * validates, records, and holds the rules of the two selections, which are
 * the only differentiable ops here (the rest make bool masks and record
 * nothing).
 *
 *   a [..A], b [..B] -> bool [broadcast(A, B)]
 *   cond [..C], a [..A], b [..B] -> where [broadcast(C, A, B)], a's dtype
 *   x [..X], mask [..M broadcasting to X] -> masked_fill [..X], x's dtype
 *
 * Comparisons need one dtype on both sides (any scalar dtype but the f8
 * storage formats). Logic and conditions read any non-block dtype by
 * truthiness, so operand dtypes may differ there. where and masked_fill
 * take every scalar dtype.
 *
 * Rules: the condition or mask is the one saved value; it reads by
 * truthiness, as in the forward. A condition that itself requires grad (a
 * float tensor used as a mask) gets a zero gradient, as it has no effect
 * on the output almost everywhere. */
#include <string.h>

#include "ag/tape.h"
#include "exec/kernels/compare.h"
#include "exec/kernels/pointwise.h"
#include "fucina.h"
#include "ops/pointwise_grad.h"

/* ---- tensor-tensor comparison ------------------------------------------------------ */

static fc_tensor *compare(fc_ctx *ctx, const char *op, fc__compare_kind k, fc_tensor *a,
                          fc_tensor *b) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, op, a);
    FC__CHECK_INPUT(ctx, op, b);
    fc_dtype dt = a->raw.dtype;
    int64_t shape[FC_MAX_RANK];
    int rank;
    if (fc__pw_same_dtype(ctx, op, a, b) != FC_OK ||
        fc__pw_scalar_dtype(ctx, op, dt, false) != FC_OK ||
        fc__pw_broadcast(ctx, op, a, b, shape, &rank) != FC_OK)
        return NULL;
    fc_tensor *out = fc__tensor_new(ctx, op, FC_BOOL, shape, rank);
    if (!out) return NULL;
    fc__compare_run(ctx, k, &out->raw, &a->raw, &b->raw);
    return fc__finish(ctx, op, out);
}

fc_tensor *fc_eq(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return compare(ctx, "eq", FC__CMP_EQ, a, b);
}
fc_tensor *fc_ne(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return compare(ctx, "ne", FC__CMP_NE, a, b);
}
fc_tensor *fc_lt(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return compare(ctx, "lt", FC__CMP_LT, a, b);
}
fc_tensor *fc_le(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return compare(ctx, "le", FC__CMP_LE, a, b);
}
fc_tensor *fc_gt(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return compare(ctx, "gt", FC__CMP_GT, a, b);
}
fc_tensor *fc_ge(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return compare(ctx, "ge", FC__CMP_GE, a, b);
}

/* ---- tensor-scalar comparison (exact) ---------------------------------------------------- */

static fc_tensor *compare_scalar(fc_ctx *ctx, const char *op, fc__compare_kind k, fc_tensor *a,
                                 double v) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, op, a);
    if (fc__pw_scalar_dtype(ctx, op, a->raw.dtype, false) != FC_OK) return NULL;
    fc_tensor *out = fc__tensor_new(ctx, op, FC_BOOL, a->raw.shape, a->raw.rank);
    if (!out) return NULL;
    fc__compare_scalar_run(ctx, k, &out->raw, &a->raw, v);
    return fc__finish(ctx, op, out);
}

fc_tensor *fc_eq_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return compare_scalar(ctx, "eq_scalar", FC__CMP_EQ, a, s);
}
fc_tensor *fc_lt_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return compare_scalar(ctx, "lt_scalar", FC__CMP_LT, a, s);
}
fc_tensor *fc_gt_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return compare_scalar(ctx, "gt_scalar", FC__CMP_GT, a, s);
}

/* ---- logic --------------------------------------------------------------------------------- */

static fc_tensor *logic(fc_ctx *ctx, const char *op, fc__logic_kind k, fc_tensor *a, fc_tensor *b) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, op, a);
    if (k != FC__LOGIC_NOT) FC__CHECK_INPUT(ctx, op, b);
    if (fc__pw_scalar_dtype(ctx, op, a->raw.dtype, true) != FC_OK ||
        (b && fc__pw_scalar_dtype(ctx, op, b->raw.dtype, true) != FC_OK))
        return NULL;
    int64_t shape[FC_MAX_RANK];
    int rank = a->raw.rank;
    memcpy(shape, a->raw.shape, sizeof shape);
    if (b && fc__pw_broadcast(ctx, op, a, b, shape, &rank) != FC_OK) return NULL;
    fc_tensor *out = fc__tensor_new(ctx, op, FC_BOOL, shape, rank);
    if (!out) return NULL;
    fc__compare_logic_run(ctx, k, &out->raw, &a->raw, b ? &b->raw : NULL);
    return fc__finish(ctx, op, out);
}

fc_tensor *fc_logical_and(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return logic(ctx, "logical_and", FC__LOGIC_AND, a, b);
}
fc_tensor *fc_logical_or(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return logic(ctx, "logical_or", FC__LOGIC_OR, a, b);
}
fc_tensor *fc_logical_not(fc_ctx *ctx, fc_tensor *a) {
    return logic(ctx, "logical_not", FC__LOGIC_NOT, a, NULL);
}

/* ---- selection ------------------------------------------------------------------------------- */

/* A [1] zero in g's dtype: the gradient of a condition, or of filled
 * elements (it broadcasts to any input). */
static fc_tensor *zero_scalar(fc_ctx *ctx, const fc_tensor *g) {
    return fc_zeros(ctx, g->raw.dtype, (const int64_t[]){1}, 1);
}

/* where: inputs cond, a, b; saves the condition. */
enum { WHERE_IN_COND, WHERE_IN_A, WHERE_IN_B };
enum { WHERE_SAVED_COND };

/* g [broadcast(C, A, B)] -> cond: 0, a: g where cond, b: g elsewhere */
static fc_status where_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *cond = fc__ag_saved_const(ctx, node, WHERE_SAVED_COND);
    fc_tensor *zero = zero_scalar(ctx, gout);
    if (!cond || !zero) return fc_ctx_status(ctx);
    gin[WHERE_IN_COND] = zero;
    if (node->in[WHERE_IN_A].needs) gin[WHERE_IN_A] = fc_where(ctx, cond, gout, zero);
    if (node->in[WHERE_IN_B].needs) gin[WHERE_IN_B] = fc_where(ctx, cond, zero, gout);
    return fc_ctx_status(ctx);
}

fc_tensor *fc_where(fc_ctx *ctx, fc_tensor *cond, fc_tensor *a, fc_tensor *b) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "where", cond);
    FC__CHECK_INPUT(ctx, "where", a);
    FC__CHECK_INPUT(ctx, "where", b);
    fc_tensor *all[3] = {[WHERE_IN_COND] = cond, [WHERE_IN_A] = a, [WHERE_IN_B] = b};
    int64_t shape[FC_MAX_RANK];
    int rank;
    if (fc__pw_scalar_dtype(ctx, "where", cond->raw.dtype, true) != FC_OK ||
        fc__pw_same_dtype(ctx, "where", a, b) != FC_OK ||
        fc__pw_scalar_dtype(ctx, "where", a->raw.dtype, true) != FC_OK ||
        fc__pw_broadcast_n(ctx, "where", 3, all, shape, &rank) != FC_OK)
        return NULL;
    fc_tensor *out = fc__tensor_new(ctx, "where", a->raw.dtype, shape, rank);
    if (!out) return NULL;
    fc__compare_where_run(ctx, &out->raw, &cond->raw, &a->raw, &b->raw);
    out = fc__finish(ctx, "where", out);
    if (!out || !fc__ag_wants(ctx, 3, all)) return out;
    fc_node *nd = fc__ag_record(ctx, "where", where_backward, out, 3, all);
    if (!nd || pw_save_at(ctx, nd, WHERE_SAVED_COND, "condition", cond) != FC_OK) {
        fc_release(out);
        return NULL;
    }
    return out;
}

/* masked_fill: inputs x, mask; saves the mask. */
enum { MFILL_IN_X, MFILL_IN_MASK };
enum { MFILL_SAVED_MASK };

/* g [..X] -> x: g where mask is false, 0 where it was filled; mask: 0 */
static fc_status masked_fill_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout,
                                      fc_tensor **gin) {
    fc_tensor *mask = fc__ag_saved_const(ctx, node, MFILL_SAVED_MASK);
    if (!mask) return fc_ctx_status(ctx);
    gin[MFILL_IN_X] = fc_masked_fill(ctx, gout, mask, 0.0);
    if (node->in[MFILL_IN_MASK].needs) gin[MFILL_IN_MASK] = zero_scalar(ctx, gout);
    return fc_ctx_status(ctx);
}

fc_tensor *fc_masked_fill(fc_ctx *ctx, fc_tensor *x, fc_tensor *mask, double value) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "masked_fill", x);
    FC__CHECK_INPUT(ctx, "masked_fill", mask);
    fc_dtype dt = x->raw.dtype;
    int64_t shape[FC_MAX_RANK];
    int rank;
    if (fc__pw_scalar_dtype(ctx, "masked_fill", dt, true) != FC_OK ||
        fc__pw_scalar_dtype(ctx, "masked_fill", mask->raw.dtype, true) != FC_OK ||
        fc__pw_broadcast(ctx, "masked_fill", x, mask, shape, &rank) != FC_OK)
        return NULL;
    if (!fc__shape_equal(shape, rank, x->raw.shape, x->raw.rank)) {
        char a[160], b[160];
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH, "masked_fill: mask %s does not broadcast to x %s",
                 fc__desc(mask, b, (int)sizeof b), fc__desc(x, a, (int)sizeof a));
        return NULL;
    }
    fc_tensor *out = fc__tensor_new(ctx, "masked_fill", dt, shape, rank);
    if (!out) return NULL;
    unsigned char v[8];
    fc__store_f64(dt, v, value);
    fc__compare_masked_fill_run(ctx, &out->raw, &x->raw, &mask->raw, v);
    out = fc__finish(ctx, "masked_fill", out);
    fc_tensor *in[2] = {[MFILL_IN_X] = x, [MFILL_IN_MASK] = mask};
    if (!out || !fc__ag_wants(ctx, 2, in)) return out;
    fc_node *nd = fc__ag_record(ctx, "masked_fill", masked_fill_backward, out, 2, in);
    if (!nd || pw_save_at(ctx, nd, MFILL_SAVED_MASK, "mask", mask) != FC_OK) {
        fc_release(out);
        return NULL;
    }
    return out;
}
