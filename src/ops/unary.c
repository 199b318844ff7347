/* SPDX-License-Identifier: MIT */
/* ops/unary.c - the unary family as differentiable ops: fc_neg .. fc_clamp,
 * and fc_swiglu, the gated silu (at the end of the file).
 * The computation is in exec/kernels/unary.c (layout, dispatch) and
 * unary_math.c (the formulas, forward and derivative side by side); this
 * file validates, records, and holds the family's one backward rule.
 *
 *   x [..] -> y [..], same shape and dtype
 *   g [..] (f32, or f64 for f64 graphs), v [..] -> gin [..] = g * f'(v)
 *
 * Float dtypes only, except neg, abs, sign and square, which also take
 * signed integers. Rule: one serves every kind; the node carries the kind
 * and its parameters (slope; clamp's lo, hi). v is the one saved value
 * (the input or the output, whichever the derivative is written in; see
 * fc__unary_saves_of), or g itself for the kinds whose derivative needs no
 * value (neg: -1, sign: 0). */
#include <math.h>

#include "ag/tape.h"
#include "exec/kernels/pointwise.h"
#include "exec/kernels/swiglu.h"
#include "exec/kernels/unary.h"
#include "fucina.h"
#include "ops/pointwise_grad.h"

static const struct {
    const char *name;
    bool ints; /* also defined on signed integers */
} info[] = {
    [FC__UN_NEG] = {"neg", true},
    [FC__UN_ABS] = {"abs", true},
    [FC__UN_SIGN] = {"sign", true},
    [FC__UN_SQUARE] = {"square", true},
    [FC__UN_SQRT] = {"sqrt", false},
    [FC__UN_RSQRT] = {"rsqrt", false},
    [FC__UN_RECIPROCAL] = {"reciprocal", false},
    [FC__UN_EXP] = {"exp", false},
    [FC__UN_LOG] = {"log", false},
    [FC__UN_LOG1P] = {"log1p", false},
    [FC__UN_EXPM1] = {"expm1", false},
    [FC__UN_SIN] = {"sin", false},
    [FC__UN_COS] = {"cos", false},
    [FC__UN_TANH] = {"tanh", false},
    [FC__UN_SIGMOID] = {"sigmoid", false},
    [FC__UN_RELU] = {"relu", false},
    [FC__UN_LEAKY_RELU] = {"leaky_relu", false},
    [FC__UN_GELU] = {"gelu", false},
    [FC__UN_GELU_TANH] = {"gelu", false},
    [FC__UN_SILU] = {"silu", false},
    [FC__UN_SOFTPLUS] = {"softplus", false},
    [FC__UN_CLAMP] = {"clamp", false},
};
_Static_assert(sizeof info / sizeof info[0] == FC__UN_COUNT, "one info row per unary kind");

/* The node: one input, the kind, its two parameters, and at most one
 * saved value. */
enum { UNARY_IN_X };
enum { UNARY_I_KIND };
enum { UNARY_F_P0, UNARY_F_P1 };
enum { UNARY_SAVED_V };

/* ---- create_graph: the derivatives from recorded ops -------------------------------------- */

/* Phi(x), the normal CDF, as a recorded op of its own (no forward op
 * computes it): exact GELU's derivative needs it, and its own derivative
 * phi(x) is made of recorded ops again. */
static fc_tensor *normal_pdf(fc_ctx *ctx, fc_tensor *x) {
    return fc_mul_scalar(ctx, fc_exp(ctx, fc_mul_scalar(ctx, fc_square(ctx, x), -0.5)),
                         0.39894228040143267794);
}

static fc_status normal_cdf_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *x = fc__ag_saved_tensor(ctx, node, 0);
    gin[0] = x ? fc_mul(ctx, gout, normal_pdf(ctx, x)) : NULL;
    return fc_ctx_status(ctx);
}

static fc_tensor *normal_cdf(fc_ctx *ctx, fc_tensor *x) {
    fc_tensor *c = x ? fc_contiguous(ctx, fc_detach(ctx, x)) : NULL;
    if (!c) return NULL;
    fc_tensor *out = fc__tensor_new(ctx, "gelu (cdf)", c->raw.dtype, c->raw.shape, c->raw.rank);
    if (!out) return NULL;
    int64_t n = fc__numel(&c->raw);
    for (int64_t i = 0; i < n; i++) {
        size_t es = fc_dtype_size(c->raw.dtype);
        double v = fc__load_f64(c->raw.dtype, (char *)fc__raw_base(&c->raw) + (size_t)i * es);
        fc__store_f64(out->raw.dtype, (char *)fc__raw_base(&out->raw) + (size_t)i * es,
                      0.5 * erfc(-v * 0.70710678118654752440));
    }
    if (!fc__ag_wants(ctx, 1, &x)) return out;
    fc_node *nd = fc__ag_record(ctx, "gelu (cdf)", normal_cdf_backward, out, 1, &x);
    if (!nd || fc__ag_save(ctx, nd, "input", x) != FC_OK) return NULL;
    return out;
}

/* A float mask (1 where m) in dt, a constant. */
static fc_tensor *mask_of(fc_ctx *ctx, fc_tensor *m, fc_dtype dt) { return fc_to(ctx, m, dt); }

/* f'(v) * g from recorded ops (v: the saved input or output, linked; c:
 * the same value as a constant, for masks). */
static fc_tensor *unary_grad_graph(fc_ctx *ctx, fc__unary_kind k, const double *p, fc_tensor *g,
                                   fc_tensor *v, fc_tensor *c) {
    fc_dtype dt = g->raw.dtype;
    switch (k) {
    case FC__UN_NEG:
        return fc_neg(ctx, g);
    case FC__UN_ABS:
        return fc_mul(ctx, g, fc_sign(ctx, c));
    case FC__UN_SIGN:
        return fc_mul_scalar(ctx, g, 0.0);
    case FC__UN_SQUARE:
        return fc_mul(ctx, g, fc_mul_scalar(ctx, v, 2.0));
    case FC__UN_SQRT: /* v = y: 1 / (2 y) */
        return fc_div(ctx, fc_mul_scalar(ctx, g, 0.5), v);
    case FC__UN_RSQRT: /* v = y: -y^3 / 2 */
        return fc_mul(ctx, g, fc_mul_scalar(ctx, fc_pow_scalar(ctx, v, 3.0), -0.5));
    case FC__UN_RECIPROCAL: /* v = y: -y^2 */
        return fc_neg(ctx, fc_mul(ctx, g, fc_square(ctx, v)));
    case FC__UN_EXP:
        return fc_mul(ctx, g, v);
    case FC__UN_LOG:
        return fc_div(ctx, g, v);
    case FC__UN_LOG1P:
        return fc_div(ctx, g, fc_add_scalar(ctx, v, 1.0));
    case FC__UN_EXPM1:
        return fc_mul(ctx, g, fc_add_scalar(ctx, v, 1.0));
    case FC__UN_SIN:
        return fc_mul(ctx, g, fc_cos(ctx, v));
    case FC__UN_COS:
        return fc_neg(ctx, fc_mul(ctx, g, fc_sin(ctx, v)));
    case FC__UN_TANH: /* v = y */
        return fc_mul(ctx, g, fc_rsub_scalar(ctx, fc_square(ctx, v), 1.0));
    case FC__UN_SIGMOID: /* v = y */
        return fc_mul(ctx, g, fc_mul(ctx, v, fc_rsub_scalar(ctx, v, 1.0)));
    case FC__UN_RELU: /* v = y */
        return fc_mul(ctx, g, mask_of(ctx, fc_gt_scalar(ctx, c, 0.0), dt));
    case FC__UN_LEAKY_RELU:
        return fc_where(ctx, fc_gt_scalar(ctx, c, 0.0), g, fc_mul_scalar(ctx, g, p[0]));
    case FC__UN_GELU: /* Phi(x) + x phi(x) */
        return fc_mul(ctx, g, fc_add(ctx, normal_cdf(ctx, v), fc_mul(ctx, v, normal_pdf(ctx, v))));
    case FC__UN_GELU_TANH: { /* 0.5 (1 + t) + 0.5 x (1 - t^2) du */
        const double a = 0.044715, s2pi = 0.79788456080286535588;
        fc_tensor *x2 = fc_square(ctx, v);
        fc_tensor *u =
            fc_mul_scalar(ctx, fc_add(ctx, v, fc_mul_scalar(ctx, fc_mul(ctx, x2, v), a)), s2pi);
        fc_tensor *t = fc_tanh(ctx, u);
        fc_tensor *du =
            fc_mul_scalar(ctx, fc_add_scalar(ctx, fc_mul_scalar(ctx, x2, 3 * a), 1.0), s2pi);
        fc_tensor *d = fc_add(ctx, fc_mul_scalar(ctx, fc_add_scalar(ctx, t, 1.0), 0.5),
                              fc_mul(ctx, fc_mul_scalar(ctx, v, 0.5),
                                     fc_mul(ctx, fc_rsub_scalar(ctx, fc_square(ctx, t), 1.0), du)));
        return fc_mul(ctx, g, d);
    }
    case FC__UN_SILU: { /* s (1 + x (1 - s)) */
        fc_tensor *sg = fc_sigmoid(ctx, v);
        return fc_mul(
            ctx, g,
            fc_mul(ctx, sg, fc_add_scalar(ctx, fc_mul(ctx, v, fc_rsub_scalar(ctx, sg, 1.0)), 1.0)));
    }
    case FC__UN_SOFTPLUS: /* sigmoid(x), 1 in the linear region */
        return fc_where(ctx, fc_gt_scalar(ctx, c, 20.0), g, fc_mul(ctx, g, fc_sigmoid(ctx, v)));
    case FC__UN_CLAMP: { /* 1 where lo <= x <= hi */
        fc_tensor *in = fc_logical_and(ctx, fc_logical_not(ctx, fc_lt_scalar(ctx, c, p[0])),
                                       fc_logical_not(ctx, fc_gt_scalar(ctx, c, p[1])));
        return fc_mul(ctx, g, mask_of(ctx, in, dt));
    }
    case FC__UN_COUNT:
        break;
    }
    return NULL;
}

/* gin = g * f'(v) */
static fc_status unary_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc__unary_kind k = (fc__unary_kind)node->i[UNARY_I_KIND];
    if (fc__ag_create_graph(ctx)) {
        bool none = fc__unary_saves_of(k) == FC__SAVES_NONE;
        fc_tensor *v = none ? gout : fc__ag_saved_tensor(ctx, node, UNARY_SAVED_V);
        fc_tensor *c = none ? gout : fc__ag_saved_const(ctx, node, UNARY_SAVED_V);
        if (v && v->raw.dtype != gout->raw.dtype) v = fc_to(ctx, v, gout->raw.dtype);
        if (c && c->raw.dtype != gout->raw.dtype) c = fc_to(ctx, c, gout->raw.dtype);
        if (!v || !c) return fc_ctx_status(ctx);
        double p[2] = {node->f[UNARY_F_P0], node->f[UNARY_F_P1]};
        gin[UNARY_IN_X] = unary_grad_graph(ctx, k, p, gout, v, c);
        return fc_ctx_status(ctx);
    }
    fc_tensor *v = fc__unary_saves_of(k) == FC__SAVES_NONE
                       ? gout
                       : fc__ag_saved_tensor(ctx, node, UNARY_SAVED_V);
    if (!v) return fc_ctx_status(ctx);
    double p[2] = {node->f[UNARY_F_P0], node->f[UNARY_F_P1]};
    fc_tensor *out =
        fc__tensor_new(ctx, info[k].name, gout->raw.dtype, gout->raw.shape, gout->raw.rank);
    if (!out) return fc_ctx_status(ctx);
    fc__unary_grad_run(ctx, k, p, &out->raw, &gout->raw, &v->raw);
    gin[UNARY_IN_X] = out;
    return fc_ctx_status(ctx);
}

static fc_tensor *unary(fc_ctx *ctx, fc__unary_kind k, fc_tensor *x, double p0, double p1) {
    const char *op = info[k].name;
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, op, x);
    fc_dtype dt = x->raw.dtype;
    if (!fc_dtype_is_float(dt) && !(info[k].ints && fc_dtype_is_signed_int(dt))) {
        fc__fail(ctx, FC_ERR_DTYPE,
                 "%s: dtype %s is not supported (float dtypes%s only; cast with fc_to)", op,
                 fc_dtype_name(dt), info[k].ints ? " and signed integers" : "");
        return NULL;
    }
    fc_tensor *out = fc__tensor_new(ctx, op, dt, x->raw.shape, x->raw.rank);
    if (!out) return NULL;
    double prm[2] = {p0, p1};
    fc__unary_run(ctx, k, prm, &out->raw, &x->raw);
    out = fc__finish(ctx, op, out);
    if (!out || !fc__ag_wants(ctx, 1, &x)) return out;

    fc_node *nd = fc__ag_record(ctx, op, unary_backward, out, 1, &x);
    fc_status st = nd ? FC_OK : FC_ERR_OOM;
    if (nd) {
        nd->i[UNARY_I_KIND] = k;
        nd->f[UNARY_F_P0] = p0;
        nd->f[UNARY_F_P1] = p1;
        fc__unary_saves saves = fc__unary_saves_of(k);
        if (saves == FC__SAVES_INPUT) st = pw_save_at(ctx, nd, UNARY_SAVED_V, "input", x);
        if (saves == FC__SAVES_OUTPUT) st = pw_save_at(ctx, nd, UNARY_SAVED_V, "output", out);
    }
    if (st != FC_OK) {
        fc_release(out);
        return NULL;
    }
    return out;
}

fc_tensor *fc_neg(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_NEG, x, 0, 0); }
fc_tensor *fc_abs(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_ABS, x, 0, 0); }
fc_tensor *fc_sign(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_SIGN, x, 0, 0); }
fc_tensor *fc_square(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_SQUARE, x, 0, 0); }
fc_tensor *fc_sqrt(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_SQRT, x, 0, 0); }
fc_tensor *fc_rsqrt(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_RSQRT, x, 0, 0); }
fc_tensor *fc_reciprocal(fc_ctx *ctx, fc_tensor *x) {
    return unary(ctx, FC__UN_RECIPROCAL, x, 0, 0);
}
fc_tensor *fc_exp(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_EXP, x, 0, 0); }
fc_tensor *fc_log(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_LOG, x, 0, 0); }
fc_tensor *fc_log1p(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_LOG1P, x, 0, 0); }
fc_tensor *fc_expm1(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_EXPM1, x, 0, 0); }
fc_tensor *fc_sin(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_SIN, x, 0, 0); }
fc_tensor *fc_cos(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_COS, x, 0, 0); }
fc_tensor *fc_tanh(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_TANH, x, 0, 0); }
fc_tensor *fc_sigmoid(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_SIGMOID, x, 0, 0); }
fc_tensor *fc_relu(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_RELU, x, 0, 0); }
fc_tensor *fc_leaky_relu(fc_ctx *ctx, fc_tensor *x, double slope) {
    return unary(ctx, FC__UN_LEAKY_RELU, x, slope, 0);
}
fc_tensor *fc_gelu(fc_ctx *ctx, fc_tensor *x, bool tanh_approx) {
    return unary(ctx, tanh_approx ? FC__UN_GELU_TANH : FC__UN_GELU, x, 0, 0);
}
fc_tensor *fc_silu(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_SILU, x, 0, 0); }
fc_tensor *fc_softplus(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_SOFTPLUS, x, 0, 0); }

fc_tensor *fc_clamp(fc_ctx *ctx, fc_tensor *x, double lo, double hi) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "clamp", x);
    if (lo != lo || hi != hi || lo > hi) {
        fc__fail(ctx, FC_ERR_INVALID_ARG,
                 "clamp: bounds [%g, %g] are not an interval (need lo <= "
                 "hi, neither NaN)",
                 lo, hi);
        return NULL;
    }
    return unary(ctx, FC__UN_CLAMP, x, lo, hi);
}

/* ---- swiglu: silu(a) * b, the gated form of silu ----------------------------------
 * Its own kernel (exec/kernels/swiglu.c) and rule; the node saves a and b:
 *   da = g * b * silu'(a),  db = g * silu(a),  silu'(a) = s (1 + a (1 - s)),
 *   s = sigmoid(a).
 * In a create_graph walk both are built from recorded ops (fc_sigmoid,
 * fc_mul, ...) over the linked a and b, so they differentiate again. */
enum { SWIGLU_IN_A, SWIGLU_IN_B };
enum { SWIGLU_SAVED_A, SWIGLU_SAVED_B };

static fc_status swiglu_graph(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *a = fc__ag_saved_tensor(ctx, node, SWIGLU_SAVED_A);
    fc_tensor *b = a ? fc__ag_saved_tensor(ctx, node, SWIGLU_SAVED_B) : NULL;
    if (!b) return fc_ctx_status(ctx);
    fc_dtype gd = gout->raw.dtype;
    if (a->raw.dtype != gd) a = fc_to(ctx, a, gd);
    if (b->raw.dtype != gd) b = fc_to(ctx, b, gd);
    fc_tensor *s = fc_sigmoid(ctx, a);
    if (node->in[SWIGLU_IN_B].needs) gin[SWIGLU_IN_B] = fc_mul(ctx, gout, fc_mul(ctx, a, s));
    if (node->in[SWIGLU_IN_A].needs) {
        fc_tensor *d =
            fc_mul(ctx, s, fc_add_scalar(ctx, fc_mul(ctx, a, fc_rsub_scalar(ctx, s, 1.0)), 1.0));
        gin[SWIGLU_IN_A] = fc_mul(ctx, fc_mul(ctx, gout, b), d);
    }
    return fc_ctx_status(ctx);
}

static fc_status swiglu_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (fc__ag_create_graph(ctx)) return swiglu_graph(ctx, node, gout, gin);
    const fc_raw *a = fc__ag_saved_raw(ctx, node, SWIGLU_SAVED_A);
    const fc_raw *b = a ? fc__ag_saved_raw(ctx, node, SWIGLU_SAVED_B) : NULL;
    if (!b) return fc__failed(ctx);
    if (node->in[SWIGLU_IN_A].needs && node->in[SWIGLU_IN_B].needs) {
        fc_tensor *ga = fc__tensor_new(ctx, "swiglu_backward", gout->raw.dtype, gout->raw.shape,
                                       gout->raw.rank);
        fc_tensor *gb = ga ? fc__tensor_new(ctx, "swiglu_backward", gout->raw.dtype,
                                            gout->raw.shape, gout->raw.rank)
                           : NULL;
        if (!gb) return fc__failed(ctx);
        fc__swiglu_grads_run(ctx, &ga->raw, &gb->raw, &gout->raw, a, b);
        gin[SWIGLU_IN_A] = ga;
        gin[SWIGLU_IN_B] = gb;
        return FC_OK;
    }
    for (int k = SWIGLU_IN_A; k <= SWIGLU_IN_B; k++) {
        if (!node->in[k].needs) continue;
        fc_tensor *g = fc__tensor_new(ctx, "swiglu_backward", gout->raw.dtype, gout->raw.shape,
                                      gout->raw.rank);
        if (!g) return fc__failed(ctx);
        fc__swiglu_grad_run(ctx, k == SWIGLU_IN_A, &g->raw, &gout->raw, a, b);
        gin[k] = g;
    }
    return FC_OK;
}

fc_tensor *fc_swiglu(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "swiglu", a);
    FC__CHECK_INPUT(ctx, "swiglu", b);
    if (fc__pw_same_dtype(ctx, "swiglu", a, b) != FC_OK ||
        fc__pw_math_dtype(ctx, "swiglu", a->raw.dtype, false) != FC_OK)
        return NULL;
    bool same = a->raw.rank == b->raw.rank;
    for (int i = 0; same && i < a->raw.rank; i++)
        same = a->raw.shape[i] == b->raw.shape[i];
    if (!same) {
        char da[160], db[160];
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH, "swiglu: a %s and b %s must have the same shape",
                 fc__desc(a, da, (int)sizeof da), fc__desc(b, db, (int)sizeof db));
        return NULL;
    }
    fc_tensor *out = fc__tensor_new(ctx, "swiglu", a->raw.dtype, a->raw.shape, a->raw.rank);
    if (!out) return NULL;
    fc__swiglu_run(ctx, &out->raw, &a->raw, &b->raw);
    out = fc__finish(ctx, "swiglu", out);
    fc_tensor *in[2] = {a, b};
    if (!out || !fc__ag_wants(ctx, 2, in)) return out;
    fc_node *nd = fc__ag_record(ctx, "swiglu", swiglu_backward, out, 2, in);
    fc_status st = nd ? pw_save_at(ctx, nd, SWIGLU_SAVED_A, "a", a) : FC_ERR_OOM;
    if (st == FC_OK) st = pw_save_at(ctx, nd, SWIGLU_SAVED_B, "b", b);
    if (st != FC_OK) {
        fc_release(out);
        return NULL;
    }
    return out;
}
