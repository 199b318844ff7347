/* SPDX-License-Identifier: MIT */
/* ops/binary.c - broadcasting binary arithmetic as differentiable ops:
 * fc_add, fc_sub, fc_mul, fc_div, fc_pow, fc_maximum, fc_minimum; their
 * scalar forms; the in-place fc_add_, fc_mul_scalar_, fc_fill_ and the
 * destination form fc_add_out. The computation is in
 * exec/kernels/binary.c; this file validates, records, and holds each
 * backward rule under its forward.
 *
 *   a [..A], b [..B] -> out [broadcast(A, B)], out[i] = a[i] (op) b[i]
 *   g [broadcast(A, B)] -> gin for a [..A], gin for b [..B]
 *
 * Dtypes: a and b share one dtype (float or integer; pow float only; bool,
 * f8 and block dtypes are refused). A zero anywhere in an integer divisor
 * fails with FC_ERR_DIV_ZERO before anything is computed.
 *
 * Rules: every gradient is produced at the broadcast shape; the engine sums
 * the broadcast axes down to each input's shape. g is f32 (f64 for f64
 * graphs); saved 16-bit inputs are widened to g's dtype first. The scalar
 * forms record the same nodes, with the scalar as an input that needs no
 * gradient. The in-place ops record nothing: they refuse tensors that
 * require grad while grad mode is on. */
#include "exec/kernels/binary.h"
#include "ag/tape.h"
#include "exec/kernels/pointwise.h"
#include "fucina.h"
#include "ops/pointwise_grad.h"

/* The inputs of every binary node. */
enum { BIN_IN_A, BIN_IN_B };

/* A tensor in the gradient dtype gdt: t itself when it already is, else a
 * scope-owned converted copy (never an extra reference: rules release
 * nothing). NULL + error on failure. */
static fc_tensor *as_grad_dtype(fc_ctx *ctx, fc_tensor *t, fc_dtype gdt) {
    if (!t) return NULL;
    return t->raw.dtype == gdt ? t : fc_to(ctx, t, gdt);
}

/* Saved value k of nd in the gradient dtype of g. */
static fc_tensor *saved_as(fc_ctx *ctx, fc_node *nd, int k, const fc_tensor *g) {
    return as_grad_dtype(ctx, fc__ag_saved_tensor(ctx, nd, k), g->raw.dtype);
}

/* ---- add, sub: nothing saved ---------------------------------------------------------- */

/* d(a + b) = (g, g) */
static fc_status add_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    (void)node;
    gin[BIN_IN_A] = gin[BIN_IN_B] = gout;
    return fc_ctx_status(ctx);
}

/* d(a - b) = (g, -g) */
static fc_status sub_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    gin[BIN_IN_A] = gout;
    if (node->in[BIN_IN_B].needs) gin[BIN_IN_B] = fc_neg(ctx, gout);
    return fc_ctx_status(ctx);
}

/* ---- mul ---------------------------------------------------------------------------------
 * Each input is saved only when the other one needs a gradient, so the
 * saved slot of each is not fixed: node->i holds it (-1 when not saved). */
enum { MUL_I_SLOT_OF_A, MUL_I_SLOT_OF_B };

static fc_status mul_record(fc_ctx *ctx, fc_node *nd, fc_tensor *a, fc_tensor *b) {
    fc_status st = FC_OK;
    nd->i[MUL_I_SLOT_OF_A] = nd->i[MUL_I_SLOT_OF_B] = -1;
    if (nd->in[BIN_IN_B].needs) /* db = g * a */
        nd->i[MUL_I_SLOT_OF_A] = nd->n_saved, st = fc__ag_save(ctx, nd, "input a", a);
    if (nd->in[BIN_IN_A].needs && st == FC_OK) /* da = g * b */
        nd->i[MUL_I_SLOT_OF_B] = nd->n_saved, st = fc__ag_save(ctx, nd, "input b", b);
    return st;
}

/* g * saved value k; a saved value already in g's dtype is read in place
 * (no handle for it), a 16-bit one is widened first. */
static fc_tensor *times_saved(fc_ctx *ctx, fc_node *nd, int k, fc_tensor *g) {
    if (fc__ag_create_graph(ctx)) return fc_mul(ctx, g, saved_as(ctx, nd, k, g));
    const fc_raw *v = fc__ag_saved_raw(ctx, nd, k);
    if (!v) return NULL;
    if (v->dtype == g->raw.dtype) return fc__binary_mul_raw(ctx, g, v);
    return fc_mul(ctx, g, saved_as(ctx, nd, k, g));
}

/* d(a * b) = (g * b, g * a) */
static fc_status mul_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (node->in[BIN_IN_A].needs)
        gin[BIN_IN_A] = times_saved(ctx, node, (int)node->i[MUL_I_SLOT_OF_B], gout);
    if (node->in[BIN_IN_B].needs)
        gin[BIN_IN_B] = times_saved(ctx, node, (int)node->i[MUL_I_SLOT_OF_A], gout);
    return fc_ctx_status(ctx);
}

/* ---- div: saves b, and the output when b needs a gradient ---------------------------- */
enum { DIV_SAVED_B, DIV_SAVED_OUT };

static fc_status div_record(fc_ctx *ctx, fc_node *nd, fc_tensor *out, fc_tensor *b) {
    fc_status st = pw_save_at(ctx, nd, DIV_SAVED_B, "input b", b);
    if (nd->in[BIN_IN_B].needs && st == FC_OK)
        st = pw_save_at(ctx, nd, DIV_SAVED_OUT, "output", out);
    return st;
}

/* d(a / b) = (g / b, -(g / b) * out) */
static fc_status div_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *ga = fc_div(ctx, gout, saved_as(ctx, node, DIV_SAVED_B, gout));
    gin[BIN_IN_A] = ga;
    if (node->in[BIN_IN_B].needs)
        gin[BIN_IN_B] = fc_neg(ctx, fc_mul(ctx, ga, saved_as(ctx, node, DIV_SAVED_OUT, gout)));
    return fc_ctx_status(ctx);
}

/* ---- pow, maximum, minimum: save both inputs ------------------------------------------- */
enum { PAIR_SAVED_A, PAIR_SAVED_B };

static fc_status pair_record(fc_ctx *ctx, fc_node *nd, fc_tensor *a, fc_tensor *b) {
    fc_status st = pw_save_at(ctx, nd, PAIR_SAVED_A, "input a", a);
    if (st == FC_OK) st = pw_save_at(ctx, nd, PAIR_SAVED_B, "input b", b);
    return st;
}

/* d pow(a, b) = (g b a^(b-1), g a^b log a), with PyTorch's zeros where
 * b == 0 (for a) and where a == 0 and b >= 0 (for b). */
static fc_status pow_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *a = saved_as(ctx, node, PAIR_SAVED_A, gout);
    fc_tensor *b = saved_as(ctx, node, PAIR_SAVED_B, gout);
    if (!a || !b) return fc_ctx_status(ctx);
    if (fc__ag_create_graph(ctx)) { /* the same formulas and zeros from recorded ops */
        fc_tensor *ca = fc__ag_saved_const(ctx, node, PAIR_SAVED_A);
        fc_tensor *cb = fc__ag_saved_const(ctx, node, PAIR_SAVED_B);
        if (node->in[BIN_IN_A].needs)
            gin[BIN_IN_A] = fc_masked_fill(
                ctx, fc_mul(ctx, gout, fc_mul(ctx, b, fc_pow(ctx, a, fc_sub_scalar(ctx, b, 1.0)))),
                fc_eq_scalar(ctx, cb, 0.0), 0.0);
        if (node->in[BIN_IN_B].needs)
            gin[BIN_IN_B] = fc_masked_fill(
                ctx, fc_mul(ctx, gout, fc_mul(ctx, fc_pow(ctx, a, b), fc_log(ctx, a))),
                fc_logical_and(ctx, fc_eq_scalar(ctx, ca, 0.0),
                               fc_logical_not(ctx, fc_lt_scalar(ctx, cb, 0.0))),
                0.0);
        return fc_ctx_status(ctx);
    }
    if (node->in[BIN_IN_A].needs) gin[BIN_IN_A] = fc__binary_pow_grad_a(ctx, gout, a, b);
    if (node->in[BIN_IN_B].needs) gin[BIN_IN_B] = fc__binary_pow_grad_b(ctx, gout, a, b);
    return fc_ctx_status(ctx);
}

/* maximum / minimum: g * w to a and g * (1 - w) to b, w = 1 where a wins
 * (or is NaN), 0.5 on ties (PyTorch's split), 0 where b wins. */
static fc_status minmax_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin,
                                 bool is_min) {
    /* the weights are constants, also in a create_graph walk */
    fc_tensor *a = as_grad_dtype(ctx, fc__ag_saved_const(ctx, node, PAIR_SAVED_A), gout->raw.dtype);
    fc_tensor *b = as_grad_dtype(ctx, fc__ag_saved_const(ctx, node, PAIR_SAVED_B), gout->raw.dtype);
    if (!a || !b) return fc_ctx_status(ctx);
    fc_tensor *ga = fc_mul(ctx, gout, fc__binary_minmax_weight(ctx, a, b, is_min));
    gin[BIN_IN_A] = ga;
    if (node->in[BIN_IN_B].needs) gin[BIN_IN_B] = fc_sub(ctx, gout, ga);
    return fc_ctx_status(ctx);
}

static fc_status maximum_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    return minmax_backward(ctx, node, gout, gin, false);
}

static fc_status minimum_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    return minmax_backward(ctx, node, gout, gin, true);
}

/* ---- the ops ------------------------------------------------------------------------------ */

static const fc__backward_fn bin_rules[] = {
    [FC__BIN_ADD] = add_backward,    [FC__BIN_SUB] = sub_backward, [FC__BIN_MUL] = mul_backward,
    [FC__BIN_DIV] = div_backward,    [FC__BIN_POW] = pow_backward, [FC__BIN_MAX] = maximum_backward,
    [FC__BIN_MIN] = minimum_backward};

/* Records the node of kind k and saves what its rule reads. On failure
 * releases out and returns NULL. */
static fc_tensor *record(fc_ctx *ctx, const char *op, fc__binary_kind k, fc_tensor *out,
                         fc_tensor *a, fc_tensor *b) {
    fc_tensor *in[2] = {[BIN_IN_A] = a, [BIN_IN_B] = b};
    fc_node *nd = fc__ag_record(ctx, op, bin_rules[k], out, 2, in);
    if (!nd) {
        fc_release(out);
        return NULL;
    }
    fc_status st = FC_OK;
    switch (k) {
    case FC__BIN_MUL:
        st = mul_record(ctx, nd, a, b);
        break;
    case FC__BIN_DIV:
        st = div_record(ctx, nd, out, b);
        break;
    case FC__BIN_POW:
    case FC__BIN_MAX:
    case FC__BIN_MIN:
        st = pair_record(ctx, nd, a, b);
        break;
    default:
        break;
    }
    if (st != FC_OK) {
        fc_release(out);
        return NULL;
    }
    return out;
}

static fc_tensor *binary(fc_ctx *ctx, const char *op, fc__binary_kind k, fc_tensor *a,
                         fc_tensor *b) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, op, a);
    FC__CHECK_INPUT(ctx, op, b);
    fc_dtype dt = a->raw.dtype;
    if (fc__pw_same_dtype(ctx, op, a, b) != FC_OK ||
        fc__pw_math_dtype(ctx, op, dt, k != FC__BIN_POW) != FC_OK)
        return NULL;
    int64_t shape[FC_MAX_RANK];
    int rank;
    if (fc__pw_broadcast(ctx, op, a, b, shape, &rank) != FC_OK) return NULL;
    if (k == FC__BIN_DIV && !fc_dtype_is_float(dt) && fc__binary_has_zero(ctx, &b->raw)) {
        char d[160];
        fc__fail(ctx, FC_ERR_DIV_ZERO, "%s: integer division by zero (the divisor %s holds a 0)",
                 op, fc__desc(b, d, (int)sizeof d));
        return NULL;
    }
    fc_tensor *out = fc__tensor_new(ctx, op, dt, shape, rank);
    if (!out) return NULL;
    fc__binary_run(ctx, k, &out->raw, &a->raw, &b->raw);
    out = fc__finish(ctx, op, out);
    fc_tensor *in[2] = {a, b};
    if (out && fc__ag_wants(ctx, 2, in)) out = record(ctx, op, k, out, a, b);
    return out;
}

fc_tensor *fc_add(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return binary(ctx, "add", FC__BIN_ADD, a, b);
}
fc_tensor *fc_sub(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return binary(ctx, "sub", FC__BIN_SUB, a, b);
}
fc_tensor *fc_mul(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return binary(ctx, "mul", FC__BIN_MUL, a, b);
}
fc_tensor *fc_div(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return binary(ctx, "div", FC__BIN_DIV, a, b);
}
fc_tensor *fc_pow(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return binary(ctx, "pow", FC__BIN_POW, a, b);
}
fc_tensor *fc_maximum(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return binary(ctx, "maximum", FC__BIN_MAX, a, b);
}
fc_tensor *fc_minimum(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return binary(ctx, "minimum", FC__BIN_MIN, a, b);
}

/* ---- scalar forms ----------------------------------------------------------------------
 * The scalar becomes a one-element tensor of a's dtype (fc_cast_scalar's
 * rules), which the kernels read as a stride-0 operand; its autograd node
 * is the binary op's, with the scalar as an input that needs no gradient. */

static fc_tensor *scalar_like(fc_ctx *ctx, const char *op, fc_dtype dt, double s) {
    fc_tensor *t = fc__tensor_new(ctx, op, dt, (const int64_t[]){1}, 1);
    if (t) fc__store_f64(dt, fc__raw_base(&t->raw), s);
    return t;
}

static fc_tensor *binary_scalar(fc_ctx *ctx, const char *op, fc__binary_kind k, fc_tensor *a,
                                double s, bool reversed) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, op, a);
    if (fc__pw_math_dtype(ctx, op, a->raw.dtype, k != FC__BIN_POW) != FC_OK) return NULL;
    fc_tensor *st = scalar_like(ctx, op, a->raw.dtype, s);
    if (!st) return NULL;
    fc_tensor *out = reversed ? binary(ctx, op, k, st, a) : binary(ctx, op, k, a, st);
    fc_release(st);
    return out;
}

fc_tensor *fc_add_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return binary_scalar(ctx, "add_scalar", FC__BIN_ADD, a, s, false);
}
fc_tensor *fc_sub_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return binary_scalar(ctx, "sub_scalar", FC__BIN_SUB, a, s, false);
}
fc_tensor *fc_rsub_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return binary_scalar(ctx, "rsub_scalar", FC__BIN_SUB, a, s, true);
}
fc_tensor *fc_mul_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return binary_scalar(ctx, "mul_scalar", FC__BIN_MUL, a, s, false);
}
fc_tensor *fc_div_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return binary_scalar(ctx, "div_scalar", FC__BIN_DIV, a, s, false);
}
fc_tensor *fc_pow_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return binary_scalar(ctx, "pow_scalar", FC__BIN_POW, a, s, false);
}
fc_tensor *fc_maximum_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return binary_scalar(ctx, "maximum_scalar", FC__BIN_MAX, a, s, false);
}
fc_tensor *fc_minimum_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return binary_scalar(ctx, "minimum_scalar", FC__BIN_MIN, a, s, false);
}

/* ---- in place ------------------------------------------------------------------------- */

/* What every in-place op requires of dst (and of the operands a, b, NULL
 * allowed): no gradient recording would see the write, so tensors that
 * require grad are refused while grad mode is on (optimizer-style updates
 * run inside fc_no_grad_begin/end); writable storage; no stride-0 axes,
 * whose elements share memory. */
static fc_status inplace_check(const char *op, fc_tensor *dst, const fc_tensor *a,
                               const fc_tensor *b) {
    fc_ctx *ctx = dst->ctx;
    char d[160];
    fc__desc(dst, d, (int)sizeof d);
    bool rg_dst = dst->flags & FC__T_REQUIRES_GRAD;
    bool rg_in = (a && (a->flags & FC__T_REQUIRES_GRAD)) || (b && (b->flags & FC__T_REQUIRES_GRAD));
    if (fc_grad_enabled(ctx) && (rg_dst || rg_in))
        return fc__fail(ctx, FC_ERR_INVALID_ARG,
                        "%s: %s requires grad and in-place ops are not recorded by autograd; use "
                        "the out-of-place op, or write inside fc_no_grad_begin/end",
                        op, rg_dst ? "the destination" : "an operand");
    if (fc__buffer_is_read_only(dst->raw.buf))
        return fc__fail(ctx, FC_ERR_READ_ONLY, "%s: destination %s: storage is read-only", op, d);
    for (int i = 0; i < dst->raw.rank; i++)
        if (dst->raw.strides[i] == 0 && dst->raw.shape[i] > 1)
            return fc__fail(ctx, FC_ERR_UNSUPPORTED_VIEW,
                            "%s: destination %s is a broadcast view (axis %d has stride 0), so "
                            "several of its elements share one memory location",
                            op, d, i);
    return FC_OK;
}

/* The check_finite mode for in-place results (the write already happened). */
static fc_status inplace_finish(const char *op, fc_tensor *dst) {
    if (!dst->ctx->check_finite) return FC_OK;
    int64_t bad = fc__count_non_finite(dst);
    if (!bad) return FC_OK;
    char d[160];
    return fc__fail(dst->ctx, FC_ERR_NON_FINITE, "%s: wrote %lld non-finite value%s into %s", op,
                    (long long)bad, bad == 1 ? "" : "s", fc__desc(dst, d, (int)sizeof d));
}

/* dst = a (op) b, a and b broadcast to exactly dst's shape, after every
 * check; a mutation of dst (a is dst itself for the in-place ops). */
static fc_status write_binary(const char *op, fc__binary_kind k, fc_tensor *dst, fc_tensor *a,
                              fc_tensor *b) {
    fc_ctx *ctx = dst->ctx;
    fc_dtype dt = dst->raw.dtype;
    fc_status st;
    if ((st = FC__CHECK_SAME_CTX(ctx, op, a, "an operand")) != FC_OK ||
        (st = FC__CHECK_SAME_CTX(ctx, op, b, "an operand")) != FC_OK)
        return st;
    if ((st = fc__pw_same_dtype(ctx, op, a, b)) != FC_OK ||
        (st = fc__pw_same_dtype(ctx, op, dst, a)) != FC_OK ||
        (st = fc__pw_math_dtype(ctx, op, dt, true)) != FC_OK ||
        (st = inplace_check(op, dst, a, b)) != FC_OK)
        return st;
    int64_t shape[FC_MAX_RANK];
    int rank;
    if ((st = fc__pw_broadcast(ctx, op, a, b, shape, &rank)) != FC_OK) return st;
    if (!fc__shape_equal(shape, rank, dst->raw.shape, dst->raw.rank)) {
        char sd[160], so[160];
        return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                        "%s: the operands broadcast to %s, not to the destination %s", op,
                        FC__SHAPE_STR(shape, rank, so), fc__desc(dst, sd, (int)sizeof sd));
    }
    fc__buffer_bump_generation(dst->raw.buf);
    fc__binary_run(ctx, k, &dst->raw, &a->raw, &b->raw);
    return inplace_finish(op, dst);
}

fc_status fc_add_(fc_tensor *dst, fc_tensor *b) {
    /* a NULL dst has no context; b's records the error (first error wins,
     * so a NULL left by an earlier failure keeps that failure's message) */
    if (!dst) return b ? fc__fail(b->ctx, FC_ERR_NULL_ARG, "add_: dst is NULL") : FC_ERR_NULL_ARG;
    if (!b) return fc__fail(dst->ctx, FC_ERR_NULL_ARG, "add_: input 'b' is NULL");
    return write_binary("add_", FC__BIN_ADD, dst, dst, b);
}

fc_status fc_add_out(fc_tensor *out, fc_tensor *a, fc_tensor *b) {
    if (!out) {
        fc_tensor *any = a ? a : b;
        return any ? fc__fail(any->ctx, FC_ERR_NULL_ARG, "add_out: out is NULL") : FC_ERR_NULL_ARG;
    }
    if (!a || !b)
        return fc__fail(out->ctx, FC_ERR_NULL_ARG, "add_out: input '%s' is NULL", !a ? "a" : "b");
    return write_binary("add_out", FC__BIN_ADD, out, a, b);
}

fc_status fc_mul_scalar_(fc_tensor *dst, double s) {
    if (!dst) return FC_ERR_NULL_ARG;
    fc_status st = fc__pw_math_dtype(dst->ctx, "mul_scalar_", dst->raw.dtype, true);
    if (st != FC_OK) return st;
    fc_tensor *b = scalar_like(dst->ctx, "mul_scalar_", dst->raw.dtype, s);
    if (!b) return fc_ctx_status(dst->ctx);
    st = write_binary("mul_scalar_", FC__BIN_MUL, dst, dst, b);
    fc_release(b);
    return st;
}

fc_status fc_fill_(fc_tensor *dst, double value) {
    if (!dst) return FC_ERR_NULL_ARG;
    fc_status st = fc__pw_scalar_dtype(dst->ctx, "fill_", dst->raw.dtype, true);
    if (st != FC_OK || (st = inplace_check("fill_", dst, NULL, NULL)) != FC_OK) return st;
    unsigned char v[8];
    fc__store_f64(dst->raw.dtype, v, value);
    fc__raw_fill(&dst->raw, v); /* bumps the generation; cannot fail after the checks */
    return inplace_finish("fill_", dst);
}
