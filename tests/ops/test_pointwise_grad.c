/* SPDX-License-Identifier: MIT */
/* test_pointwise_grad.c - gradients of the pointwise op families
 * (the rules in src/ops/binary.c, unary.c and compare.c), which share one
 * gradcheck harness here, and the autograd engine checks that belong with
 * them. The family-specific gradient cases sit with each family's tests:
 * the maximum/minimum tie split in test_binary.c, the zero gradient of a
 * where / masked_fill condition in test_compare.c.
 *
 * 1. fc_gradcheck (central differences in f64) on every differentiable op:
 *    contiguous inputs; a transposed input with an explicitly expanded
 *    (stride-0) partner; and an implicitly broadcast partner whose gradient
 *    the engine must sum. The inputs avoid the kinks (|x| >= 0.2 for abs,
 *    relu, ...; no ties for maximum/minimum; away from clamp's bounds).
 * 2. f32, f16 and bf16 leaves get f32 gradients that match the same graph
 *    computed on f32 leaves holding the same values: exactly for f32,
 *    within 5e-3 (f16) and 4e-2 (bf16) relative to max(1, |g|), the error
 *    of rounding each intermediate to the 16-bit dtype.
 * 3. The engine: the saved-value check and its message, mutations that do
 *    not touch saved values, read-only access, freed graphs, accumulation,
 *    no-grad nesting, detach, which leaves may require grad, and rule
 *    gradients that broadcast with their input in either direction.
 *
 * The strided inputs come from the layout ops (fc_transpose, fc_expand),
 * whose own gradients are tested with their family. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ag/tape.h"
#include "fc_test_data.h"
#include "fct_tensor.h"
#include "fucina.h"

static int setup(void **state) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 5});
    *state = ctx;
    return ctx ? 0 : -1;
}

static int teardown(void **state) {
    fc_ctx *ctx = *state;
    int64_t live = fct_live(ctx);
    fc_ctx_free(ctx);
    if (live != 0) {
        fprintf(stderr, "leak check: %lld tensors still live\n", (long long)live);
        return -1;
    }
    return 0;
}

/* ---- the ops under test ------------------------------------------------------------------ */

typedef enum gop {
    G_ADD,
    G_SUB,
    G_MUL,
    G_DIV,
    G_POW,
    G_MAX,
    G_MIN, /* binary */
    G_ADDS,
    G_SUBS,
    G_RSUBS,
    G_MULS,
    G_DIVS,
    G_POWS,
    G_MAXS,
    G_MINS, /* scalar */
    G_NEG,
    G_ABS,
    G_SIGN,
    G_SQUARE,
    G_SQRT,
    G_RSQRT,
    G_RECIP,
    G_EXP,
    G_LOG,
    G_LOG1P,
    G_EXPM1,
    G_SIN,
    G_COS,
    G_TANH,
    G_SIGMOID,
    G_RELU,
    G_LEAKY,
    G_GELU,
    G_GELU_TANH,
    G_SILU,
    G_SOFTPLUS,
    G_CLAMP, /* unary */
    G_WHERE,
    G_MASKED_FILL,
    G_COUNT
} gop;

static const char *const gnames[G_COUNT] = {"add",
                                            "sub",
                                            "mul",
                                            "div",
                                            "pow",
                                            "maximum",
                                            "minimum",
                                            "add_scalar",
                                            "sub_scalar",
                                            "rsub_scalar",
                                            "mul_scalar",
                                            "div_scalar",
                                            "pow_scalar",
                                            "maximum_scalar",
                                            "minimum_scalar",
                                            "neg",
                                            "abs",
                                            "sign",
                                            "square",
                                            "sqrt",
                                            "rsqrt",
                                            "reciprocal",
                                            "exp",
                                            "log",
                                            "log1p",
                                            "expm1",
                                            "sin",
                                            "cos",
                                            "tanh",
                                            "sigmoid",
                                            "relu",
                                            "leaky_relu",
                                            "gelu",
                                            "gelu(tanh)",
                                            "silu",
                                            "softplus",
                                            "clamp",
                                            "where",
                                            "masked_fill"};

static int arity(gop o) { return o <= G_MIN ? 2 : o == G_WHERE ? 2 : 1; }

typedef enum glayout { GL_CONTIG, GL_STRIDED, GL_BROADCAST, GL_COUNT } glayout;
static const char *const glayout_names[GL_COUNT] = {"contiguous", "transposed+expanded",
                                                    "broadcast"};

typedef struct gcase {
    gop op;
    glayout layout;
    fc_tensor *cond; /* where / masked_fill condition (bool, no gradient) */
} gcase;

static fc_tensor *apply(fc_ctx *ctx, gop o, fc_tensor *a, fc_tensor *b, fc_tensor *cond) {
    switch (o) {
    case G_ADD:
        return fc_add(ctx, a, b);
    case G_SUB:
        return fc_sub(ctx, a, b);
    case G_MUL:
        return fc_mul(ctx, a, b);
    case G_DIV:
        return fc_div(ctx, a, b);
    case G_POW:
        return fc_pow(ctx, a, b);
    case G_MAX:
        return fc_maximum(ctx, a, b);
    case G_MIN:
        return fc_minimum(ctx, a, b);
    case G_ADDS:
        return fc_add_scalar(ctx, a, 1.25);
    case G_SUBS:
        return fc_sub_scalar(ctx, a, 1.25);
    case G_RSUBS:
        return fc_rsub_scalar(ctx, a, 1.25);
    case G_MULS:
        return fc_mul_scalar(ctx, a, -1.75);
    case G_DIVS:
        return fc_div_scalar(ctx, a, -1.75);
    case G_POWS:
        return fc_pow_scalar(ctx, a, 2.5);
    case G_MAXS:
        return fc_maximum_scalar(ctx, a, 0.5);
    case G_MINS:
        return fc_minimum_scalar(ctx, a, 0.5);
    case G_NEG:
        return fc_neg(ctx, a);
    case G_ABS:
        return fc_abs(ctx, a);
    case G_SIGN:
        return fc_sign(ctx, a);
    case G_SQUARE:
        return fc_square(ctx, a);
    case G_SQRT:
        return fc_sqrt(ctx, a);
    case G_RSQRT:
        return fc_rsqrt(ctx, a);
    case G_RECIP:
        return fc_reciprocal(ctx, a);
    case G_EXP:
        return fc_exp(ctx, a);
    case G_LOG:
        return fc_log(ctx, a);
    case G_LOG1P:
        return fc_log1p(ctx, a);
    case G_EXPM1:
        return fc_expm1(ctx, a);
    case G_SIN:
        return fc_sin(ctx, a);
    case G_COS:
        return fc_cos(ctx, a);
    case G_TANH:
        return fc_tanh(ctx, a);
    case G_SIGMOID:
        return fc_sigmoid(ctx, a);
    case G_RELU:
        return fc_relu(ctx, a);
    case G_LEAKY:
        return fc_leaky_relu(ctx, a, 0.1);
    case G_GELU:
        return fc_gelu(ctx, a, false);
    case G_GELU_TANH:
        return fc_gelu(ctx, a, true);
    case G_SILU:
        return fc_silu(ctx, a);
    case G_SOFTPLUS:
        return fc_softplus(ctx, a);
    case G_CLAMP:
        return fc_clamp(ctx, a, -1, 1.5);
    case G_WHERE:
        return fc_where(ctx, cond, a, b);
    default:
        return fc_masked_fill(ctx, a, cond, -3);
    }
}

/* Inputs are [4,3] (GL_CONTIG), [3,4] seen transposed plus a [3] seen
 * expanded to [4,3] (GL_STRIDED), or [4,3] with a [4,1] partner
 * (GL_BROADCAST). */
static fc_tensor *gfn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    const gcase *c = user;
    fc_tensor *a = in[0], *b = n > 1 ? in[1] : NULL;
    if (c->layout == GL_STRIDED) {
        a = fc_transpose(ctx, a, 0, 1);
        if (b) b = fc_expand(ctx, b, (const int64_t[]){4, 3}, 2);
    }
    return apply(ctx, c->op, a, b, c->cond);
}

/* A value for input k of op o, away from every kink of o. */
static double gen(gop o, int k, uint64_t *rng) {
    double x;
    switch (o) {
    case G_POW:
        x = k == 0 ? fct_uniform(rng, 0.3, 2.5) : fct_uniform(rng, -2, 2);
        break;
    case G_POWS:
    case G_SQRT:
    case G_RSQRT:
    case G_LOG:
        x = fct_uniform(rng, 0.3, 3);
        break;
    case G_LOG1P:
        x = fct_uniform(rng, -0.7, 3);
        break;
    case G_DIV:
        x = k == 1 ? fct_uniform(rng, 0.5, 2) : fct_uniform(rng, -3, 3);
        break;
    case G_RECIP:
        x = fct_uniform(rng, 0.4, 2);
        break;
    case G_SOFTPLUS:
        x = fct_uniform(rng, -25, 25);
        break;
    default:
        x = fct_uniform(rng, -2.5, 2.5);
    }
    /* kinks at 0 (abs, relu, leaky_relu, sign), at clamp's bounds, at 0.5
     * (the scalar max/min), at 20 (softplus) */
    if (fabs(x) < 0.2) x += x < 0 ? -0.3 : 0.3;
    if (o == G_CLAMP && (fabs(x + 1) < 0.1 || fabs(x - 1.5) < 0.1)) x += 0.25;
    if ((o == G_MAXS || o == G_MINS) && fabs(x - 0.5) < 0.1) x += 0.3;
    if (o == G_SOFTPLUS && fabs(x - 20) < 0.2) x += 0.5;
    return x;
}

static fc_tensor *leaf(fc_ctx *ctx, const int64_t *shape, int rank, gop o, int k, uint64_t *rng,
                       const fc_tensor *partner) {
    double v[12];
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    for (int64_t i = 0; i < n; i++)
        v[i] = gen(o, k, rng);
    if ((o == G_MAX || o == G_MIN) && partner) { /* keep |a - b| >= 0.2 wherever they meet */
        double p[12];
        fct_read(partner, p, 12);
        int64_t pn = fc_tensor_numel(partner);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < pn; j++)
                if (fabs(v[i] - p[j]) < 0.2) v[i] = p[j] + (v[i] < p[j] ? -0.2 : 0.2) * (i % 2 + 1);
    }
    return fct_make(ctx, FC_F64, shape, rank, v, FCT_CONTIG);
}

static void run_gradcheck(fc_ctx *ctx, gop o, glayout l, uint64_t *rng) {
    int nin = arity(o);
    if (o == G_MASKED_FILL || o == G_WHERE) nin = o == G_WHERE ? 2 : 1;
    const int64_t s43[2] = {4, 3}, s34[2] = {3, 4}, s3 = 3, s41[2] = {4, 1};
    fc_tensor *in[2] = {NULL, NULL};
    in[0] = leaf(ctx, l == GL_STRIDED ? s34 : s43, 2, o, 0, rng, NULL);
    if (nin > 1) {
        if (l == GL_STRIDED)
            in[1] = leaf(ctx, &s3, 1, o, 1, rng, in[0]);
        else
            in[1] = leaf(ctx, l == GL_BROADCAST ? s41 : s43, 2, o, 1, rng, in[0]);
    }
    const uint8_t cv[12] = {1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 1, 0};
    gcase c = {o, l, NULL};
    if (o == G_WHERE)
        c.cond = fc_tensor_from_data(ctx, FC_BOOL, s43, 2, cv);
    else if (o == G_MASKED_FILL) /* a broadcast mask for the broadcast layout */
        c.cond = l == GL_BROADCAST ? fc_tensor_from_data(ctx, FC_BOOL, &s3, 1, cv)
                                   : fc_tensor_from_data(ctx, FC_BOOL, s43, 2, cv);
    fc_gradcheck_opts opts = {.check_all_f64 = true, .seed = 17};
    fc_gradcheck_report rep;
    fc_status st = fc_gradcheck(ctx, gfn, &c, in, nin, &opts, &rep);
    if (st != FC_OK) {
        fprintf(stderr, "gradcheck %s (%s): %s: %s\n", gnames[o], glayout_names[l],
                fc_status_name(st), fc_ctx_error(ctx));
        fail();
    }
    assert_true(rep.passed);
    assert_true(rep.checked == fc_tensor_numel(in[0]) + (in[1] ? fc_tensor_numel(in[1]) : 0));
    fc_release(in[0]);
    fc_release(in[1]);
    fc_release(c.cond);
}

static void test_pointwise_grad_gradcheck_all_ops(void **state) {
    fc_ctx *ctx = *state;
    uint64_t rng = 1;
    for (int o = 0; o < G_COUNT; o++)
        for (int l = 0; l < GL_COUNT; l++)
            run_gradcheck(ctx, o, l, &rng);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
}

/* gradcheck must notice a wrong gradient: cutting one of the two paths of
 * x * x gives x instead of 2x. */
static fc_tensor *wrong_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n, (void)user;
    return fc_mul(ctx, in[0], fc_detach(ctx, in[0])); /* d/dx x*x with one path cut: x, not 2x */
}

static void test_pointwise_grad_gradcheck_detects_errors(void **state) {
    fc_ctx *ctx = *state;
    double v[3] = {1, -2, 3};
    fc_tensor *x = fct_make(ctx, FC_F64, (const int64_t[]){3}, 1, v, FCT_CONTIG);
    fc_gradcheck_opts opts = {.check_all_f64 = true};
    fc_gradcheck_report rep;
    assert_int_equal(fc_gradcheck(ctx, wrong_fn, NULL, &x, 1, &opts, &rep), FC_ERR_STATE);
    assert_false(rep.passed);
    fc_ctx_clear_error(ctx);
    fc_release(x);
}

/* ---- 16-bit leaves ------------------------------------------------------------------------------
 */

/* z = (tanh(x * w) + sigmoid(x)) / (square(w) + 1) - maximum(x, w) * relu(w) + gelu(x) */
static fc_tensor *graph(fc_ctx *ctx, fc_tensor *x, fc_tensor *w) {
    fc_tensor *h = fc_add(ctx, fc_tanh(ctx, fc_mul(ctx, x, w)), fc_sigmoid(ctx, x));
    fc_tensor *z = fc_div(ctx, h, fc_add_scalar(ctx, fc_square(ctx, w), 1));
    z = fc_sub(ctx, z, fc_mul(ctx, fc_maximum(ctx, x, w), fc_relu(ctx, w)));
    return fc_add(ctx, z, fc_gelu(ctx, x, false));
}

static void test_pointwise_grad_half_leaves_match_f32(void **state) {
    fc_ctx *ctx = *state;
    const int64_t shape[2] = {5, 6}, wshape = 6;
    double xv[30], wv[6];
    uint64_t rng = 4;
    const fc_dtype dts[3] = {FC_F32, FC_F16, FC_BF16};
    const double tol[3] = {0, 5e-3, 4e-2};
    for (int d = 0; d < 3; d++) {
        fc_scope_begin(ctx);
        for (int i = 0; i < 30; i++)
            xv[i] = fct_round(dts[d], fct_uniform(&rng, -2, 2));
        for (int i = 0; i < 6; i++)
            wv[i] = fct_round(dts[d], fct_uniform(&rng, -2, 2));
        double gx[2][30], gw[2][6];
        for (int pass = 0; pass < 2; pass++) { /* pass 0: leaves in dts[d]; pass 1: f32 */
            fc_dtype dt = pass ? FC_F32 : dts[d];
            fc_tensor *x = fct_make(ctx, dt, shape, 2, xv, FCT_TRANSPOSED);
            fc_tensor *w = fct_make(ctx, dt, &wshape, 1, wv, FCT_CONTIG);
            /* fct_make returns views; make contiguous leaves of the same values */
            x = fc_clone(ctx, x);
            assert_int_equal(fc_requires_grad(x, true), FC_OK);
            assert_int_equal(fc_requires_grad(w, true), FC_OK);
            fc_tensor *z = graph(ctx, x, w);
            assert_non_null(z);
            assert_int_equal(fc_tensor_dtype(z), dt);
            assert_int_equal(fc_backward_with(ctx, z, fc_ones(ctx, FC_F32, shape, 2), false),
                             FC_OK);
            assert_int_equal(fc_tensor_dtype(fc_grad(x)), FC_F32);
            assert_int_equal(fc_tensor_dtype(fc_grad(w)), FC_F32);
            fct_read(fc_grad(x), gx[pass], 30);
            fct_read(fc_grad(w), gw[pass], 6);
        }
        for (int i = 0; i < 30; i++)
            assert_true(fabs(gx[0][i] - gx[1][i]) <= tol[d] * fmax(1, fabs(gx[1][i])));
        for (int i = 0; i < 6; i++)
            assert_true(fabs(gw[0][i] - gw[1][i]) <= tol[d] * fmax(1, fabs(gw[1][i])));
        fc_scope_end(ctx);
    }
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
}

/* ---- the engine
 * ------------------------------------------------------------------------------------ */

static void test_pointwise_grad_saved_value_check(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    const int64_t shape[2] = {4, 8};
    fc_tensor *x = fc_param_randn(ctx, FC_F32, shape, 2, 1.0);
    fc_tensor *y = fc_sigmoid(ctx, x); /* the context's first tape node: id 0 */
    fc_tensor *ones = fc_ones(ctx, FC_F32, shape, 2);
    /* reading is not a mutation */
    uint32_t g = fc_tensor_generation(y);
    assert_non_null(fc_tensor_data(y));
    assert_int_equal(fc_tensor_generation(y), g);
    float *p = fc_tensor_data_mut(y);
    assert_non_null(p);
    p[0] = 0.5f;
    assert_int_equal(fc_tensor_generation(y), g + 1);
    assert_int_equal(fc_backward_with(ctx, y, ones, true), FC_ERR_SAVED_MODIFIED);
    char want[256];
    snprintf(want, sizeof want,
             "backward of sigmoid (tape node 0): saved output [4,8] f32 was modified in place "
             "after it was saved (generation %u, now %u)",
             g, g + 1);
    assert_string_equal(fc_ctx_error(ctx), want);
    assert_null(fc_grad(x));
    fc_ctx_clear_error(ctx);
    /* an in-place op (allowed under no_grad) is a mutation too */
    fc_tensor *y2 = fc_tanh(ctx, x);
    fc_no_grad_begin(ctx);
    assert_int_equal(fc_mul_scalar_(y2, 1.0), FC_OK);
    fc_no_grad_end(ctx);
    assert_int_equal(fc_backward_with(ctx, y2, ones, false), FC_ERR_SAVED_MODIFIED);
    assert_non_null(strstr(fc_ctx_error(ctx), "backward of tanh"));
    fc_ctx_clear_error(ctx);
    /* the same mutation before the op, and a mutation of a value the op did
     * not save (sigmoid saves its output, not x), are fine */
    fc_tensor *u = fc_ones(ctx, FC_F32, shape, 2);
    ((float *)fc_tensor_data_mut(u))[0] = 3.0f;
    assert_int_equal(fc_requires_grad(u, true), FC_OK);
    fc_tensor *v = fc_sigmoid(ctx, u);
    assert_non_null(fc_tensor_data(v)); /* read-only access between forward and backward */
    assert_int_equal(fc_backward_with(ctx, v, ones, false), FC_OK);
    double gu[32];
    fct_read(fc_grad(u), gu, 32);
    double s3 = 1 / (1 + exp(-3.0)), s1 = 1 / (1 + exp(-1.0));
    assert_true(fabs(gu[0] - s3 * (1 - s3)) < 1e-6 && fabs(gu[1] - s1 * (1 - s1)) < 1e-6);
    fc_scope_end(ctx);
}

static void test_pointwise_grad_freed_graph_and_accumulation(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    const int64_t one = 1;
    fc_tensor *x = fc_param_zeros(ctx, FC_F32, &one, 1);
    fc_fill_(fc_detach(ctx, x), 0.5);
    fc_tensor *loss = fc_mul(ctx, fc_sigmoid(ctx, x), x); /* d/dx = s(x) + x s(x)(1 - s(x)) */
    double s = 1 / (1 + exp(-0.5)), want = s + 0.5 * s * (1 - s), g;
    assert_int_equal(fc_backward(ctx, loss), FC_OK);
    assert_int_equal(fc_tensor_item(fc_grad(x), &g), FC_OK);
    assert_true(fabs(g - want) < 1e-6);
    /* the graph was freed by that backward */
    assert_int_equal(fc_backward(ctx, loss), FC_ERR_STATE);
    assert_non_null(strstr(fc_ctx_error(ctx), "freed by an earlier backward"));
    fc_ctx_clear_error(ctx);
    /* a fresh graph accumulates into the same leaf */
    assert_int_equal(fc_backward(ctx, fc_mul(ctx, fc_sigmoid(ctx, x), x)), FC_OK);
    fc_tensor_item(fc_grad(x), &g);
    assert_true(fabs(g - 2 * want) < 1e-6);
    /* retain_graph walks the same graph twice, accumulating */
    fc_zero_grad(&x, 1);
    fc_tensor *l2 = fc_square(ctx, x), *g1 = fc_ones(ctx, FC_F32, &one, 1);
    assert_int_equal(fc_backward_with(ctx, l2, g1, true), FC_OK);
    assert_int_equal(fc_backward_with(ctx, l2, g1, true), FC_OK);
    fc_tensor_item(fc_grad(x), &g);
    assert_true(g == 2.0); /* 2 * (2 * 0.5) */
    fc_scope_end(ctx);
}

static void test_pointwise_grad_no_grad_and_detach(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    const int64_t s = 3;
    fc_tensor *x = fc_param_zeros(ctx, FC_F32, &s, 1);
    fc_no_grad_begin(ctx);
    fc_no_grad_begin(ctx);
    fc_no_grad_end(ctx);
    assert_false(fc_grad_enabled(ctx));
    fc_tensor *y = fc_exp(ctx, fc_add(ctx, x, x));
    assert_false(fc_tensor_requires_grad(y));
    assert_true(fc_tensor_is_leaf(y));
    fc_no_grad_end(ctx);
    fc_no_grad_end(ctx); /* unbalanced: ignored */
    assert_true(fc_grad_enabled(ctx));
    /* nothing was recorded: backward finds no graph */
    fc_tensor *ones = fc_ones(ctx, FC_F32, &s, 1);
    assert_int_equal(fc_backward_with(ctx, y, ones, false), FC_ERR_NO_GRAD);
    fc_ctx_clear_error(ctx);
    /* detach cuts one path: d/dx (detach(x) * x) = x, not 2x */
    fc_no_grad_begin(ctx);
    fc_tensor *xv = fc_arange(ctx, FC_F32, 1, 4, 1);
    fc_add_(x, xv);
    fc_no_grad_end(ctx);
    fc_tensor *d = fc_detach(ctx, x);
    assert_false(fc_tensor_requires_grad(d));
    assert_int_equal(fc_backward_with(ctx, fc_mul(ctx, d, x), ones, false), FC_OK);
    double g[3];
    fct_read(fc_grad(x), g, 3);
    assert_true(g[0] == 1 && g[1] == 2 && g[2] == 3);
    /* comparisons and logic record nothing */
    assert_false(fc_tensor_requires_grad(fc_gt(ctx, x, xv)));
    assert_false(fc_tensor_requires_grad(fc_logical_not(ctx, x)));
    assert_false(fc_tensor_requires_grad(fc_eq_scalar(ctx, x, 1)));
    fc_scope_end(ctx);
}

static void test_pointwise_grad_requires_grad_dtypes(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    const int64_t s = 2;
    fc_tensor *i32 = fc_zeros(ctx, FC_I32, &s, 1);
    assert_int_equal(fc_requires_grad(i32, true), FC_ERR_DTYPE);
    assert_non_null(
        strstr(fc_ctx_error(ctx), "fc_requires_grad: dtype i32 cannot carry a gradient"));
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_requires_grad(fc_zeros(ctx, FC_BOOL, &s, 1), true), FC_ERR_DTYPE);
    assert_int_equal(fc_requires_grad(fc_zeros(ctx, FC_F8_E4M3, &s, 1), true), FC_ERR_DTYPE);
    fc_ctx_clear_error(ctx);
    /* f64 leaves carry f64 gradients */
    fc_tensor *d = fc_zeros(ctx, FC_F64, &s, 1);
    assert_int_equal(fc_requires_grad(d, true), FC_OK);
    assert_int_equal(fc_backward(ctx, fc_sum(ctx, fc_mul(ctx, d, d), NULL, 0, false)), FC_OK);
    assert_int_equal(fc_tensor_dtype(fc_grad(d)), FC_F64);
    fc_ctx_clear_error(ctx);
    assert_false(fc_tensor_requires_grad(i32));
    assert_int_equal(fc_requires_grad(fc_zeros(ctx, FC_F16, &s, 1), true), FC_OK);
    fc_tensor *b = fc_zeros(ctx, FC_BF16, &s, 1);
    assert_int_equal(fc_requires_grad(b, true), FC_OK);
    fc_tensor *y = fc_exp(ctx, b);
    assert_true(fc_tensor_requires_grad(y) && !fc_tensor_is_leaf(y));
    assert_int_equal(fc_requires_grad(y, false), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "made by exp"));
    fc_ctx_clear_error(ctx);
    fc_scope_end(ctx);
}

/* A rule may return a gradient of any shape that broadcasts with the
 * input's: the engine sums the axes the input lacks and expands the ones
 * the gradient lacks; a gradient that fits neither way is an error. */
static fc_status const_rule(fc_ctx *ctx, fc_node *nd, fc_tensor *g, fc_tensor **gin) {
    (void)g;
    const int64_t shape[2] = {nd->i[0], nd->i[1]};
    gin[0] = fc_full(ctx, FC_F32, shape, nd->i[1] ? 2 : 1, 2.0);
    return fc_ctx_status(ctx);
}

static fc_tensor *const_grad_op(fc_ctx *ctx, fc_tensor *x, int64_t d0, int64_t d1) {
    fc_tensor *y = fc_mul_scalar(ctx, x, 1);
    fc_node *nd = fc__ag_record(ctx, "const_grad", const_rule, y, 1, &x);
    nd->i[0] = d0, nd->i[1] = d1;
    return y;
}

static void test_pointwise_grad_engine_broadcast_gradients(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    const int64_t s23[2] = {2, 3};
    fc_tensor *x = fc_param_zeros(ctx, FC_F32, s23, 2), *ones = fc_ones(ctx, FC_F32, s23, 2);
    double g[6];
    const int64_t fits[4][2] = {{1, 0}, {3, 0}, {1, 3}, {2, 1}}; /* [1], [3], [1,3], [2,1] */
    for (int k = 0; k < 4; k++) {
        fc_zero_grad(&x, 1);
        fc_tensor *y = const_grad_op(ctx, x, fits[k][0], fits[k][1]);
        assert_int_equal(fc_backward_with(ctx, y, ones, false), FC_OK);
        assert_int_equal(fct_read(fc_grad(x), g, 6), 6);
        for (int i = 0; i < 6; i++)
            assert_true(g[i] == 2);
    }
    /* a [2,2,3] gradient sums its leading axis into x [2,3] */
    fc_zero_grad(&x, 1);
    fc_tensor *big = fc_ones(ctx, FC_F32, (const int64_t[]){2, 2, 3}, 3);
    assert_int_equal(fc_backward_with(ctx, fc_add(ctx, x, big), big, false), FC_OK);
    assert_int_equal(fct_read(fc_grad(x), g, 6), 6);
    for (int i = 0; i < 6; i++)
        assert_true(g[i] == 2);
    /* [4] against [2,3] fits neither way */
    fc_zero_grad(&x, 1);
    fc_tensor *y = const_grad_op(ctx, x, 4, 0);
    assert_int_equal(fc_backward_with(ctx, y, ones, false), FC_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(fc_ctx_error(ctx), "backward of const_grad (tape node"));
    assert_non_null(strstr(fc_ctx_error(ctx), "[4]"));
    fc_ctx_clear_error(ctx);
    fc_scope_end(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pointwise_grad_gradcheck_all_ops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pointwise_grad_gradcheck_detects_errors, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pointwise_grad_half_leaves_match_f32, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pointwise_grad_saved_value_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pointwise_grad_freed_graph_and_accumulation, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pointwise_grad_no_grad_and_detach, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pointwise_grad_requires_grad_dtypes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pointwise_grad_engine_broadcast_gradients, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
