/* SPDX-License-Identifier: MIT */
/* test_grad_composite.c - gradients through composite graphs.
 *
 * 1. fc_gradcheck in f64 (check_all_f64, PyTorch's default eps 1e-6,
 *    atol 1e-5, rtol 1e-3) of
 *      - a two-layer MLP, Linear -> ReLU or GELU(tanh) -> Linear, with the
 *        mean cross-entropy on integer targets (gradients of x, both weights
 *        and both biases);
 *      - one attention sublayer, x + proj(attn(layer_norm(x))), with a fused
 *        qkv Linear split into heads, q k^T * 1/sqrt(hd), a causal bool
 *        mask applied with masked_fill(-inf) and a softmax (gradients of x,
 *        the LayerNorm affine parameters and both Linears).
 *    Each op has its own gradcheck with its family; this one checks that
 *    they compose: views feeding matmuls, broadcast masks, a split whose
 *    three views all carry gradient back into one Linear, residual fan-out.
 *
 * 2. The same two graphs with f16 and with bf16 leaves: every leaf must get
 *    an f32 gradient of its own shape, matching the gradient of an f32 run
 *    of the same graph on the same values (the 16-bit leaves widened
 *    exactly). The 16-bit run rounds each op's result to 16 bits, so the two
 *    differ by rounding alone: |g16 - g32| <= K * u * max|g32| per leaf,
 *    with u the unit roundoff of the 16-bit format (f16 2^-11, bf16 2^-8)
 *    and K = 8 (see TOL_K). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fc_test_data.h"
#include "fucina.h"

/* The 16-bit run rounds about eight intermediate results on its longest
 * path (attention: layer_norm, linear, scale, softmax, two matmuls, linear,
 * residual add), each by at most u relative, and its backward reads those
 * rounded values; the f32 run does not round them. With amplification near
 * 1 on the way back the gradients differ by a few u (at most 1.9 u seen on
 * these inputs); 8 u leaves room for that and stays far below what a wrong
 * rule gives (O(1) relative). */
#define TOL_K 8.0

#define MAXIN 8

/* ---- inputs ---------------------------------------------------------------------------- */

typedef struct spec {
    int rank;
    int64_t shape[3];
} spec;

static int64_t numel(const spec *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= s->shape[i];
    return n;
}

static double uniform(uint64_t *st, double lo, double hi) {
    return lo + (hi - lo) * ((double)(fc_test_splitmix64(st) >> 11) / 9007199254740992.0);
}

/* n values in [lo, hi) rounded to dt (so they are exact in dt and in every
 * wider float dtype). */
static void values(uint64_t *st, fc_dtype dt, double lo, double hi, int64_t n, double *out) {
    for (int64_t i = 0; i < n; i++) {
        double d = uniform(st, lo, hi);
        float f = (float)d;
        if (dt == FC_F16) f = fc_f16_to_f32(fc_f32_to_f16(f));
        if (dt == FC_BF16) f = fc_bf16_to_f32(fc_f32_to_bf16(f));
        out[i] = dt == FC_F64 ? d : f;
    }
}

/* A contiguous leaf of dtype dt holding v (exactly representable in dt). */
static fc_tensor *leaf(fc_ctx *ctx, fc_dtype dt, const spec *s, const double *v) {
    int64_t n = numel(s);
    unsigned char *buf = malloc((size_t)n * 8);
    assert_non_null(buf);
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case FC_F64:
            ((double *)(void *)buf)[i] = v[i];
            break;
        case FC_F32:
            ((float *)(void *)buf)[i] = (float)v[i];
            break;
        case FC_F16:
            ((uint16_t *)(void *)buf)[i] = fc_f32_to_f16((float)v[i]);
            break;
        default:
            ((uint16_t *)(void *)buf)[i] = fc_f32_to_bf16((float)v[i]);
            break;
        }
    }
    fc_tensor *t = fc_tensor_from_data(ctx, dt, s->shape, s->rank, buf);
    free(buf);
    assert_non_null(t);
    return t;
}

static void expect_no_leak(fc_ctx *ctx) {
    fc_ctx_stats s;
    fc_ctx_get_stats(ctx, &s);
    assert_int_equal(s.tensors_live, 0);
}

/* ---- the composites (fc_gradcheck_fn) ------------------------------------------------------ */

enum { N = 3, IN = 4, HID = 5, K = 3 };                 /* MLP */
enum { AB = 2, AT = 3, AC = 4, AH = 2, AHD = AC / AH }; /* attention */

/* What the functions need besides their inputs, made in the context they run in. */
typedef struct extras {
    fc_tensor *targets; /* i64 [N] */
    fc_tensor *mask;    /* bool [AT, AT], true above the diagonal: a query may not look there */
    bool gelu;
} extras;

static extras extras_new(fc_ctx *ctx, bool gelu) {
    static const int64_t tgt[N] = {2, 0, 1};
    bool above[AT * AT];
    for (int i = 0; i < AT; i++)
        for (int j = 0; j < AT; j++)
            above[i * AT + j] = j > i;
    extras e = {
        .targets = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){N}, 1, tgt),
        .mask = fc_tensor_from_data(ctx, FC_BOOL, (const int64_t[]){AT, AT}, 2, above),
        .gelu = gelu,
    };
    assert_non_null(e.targets);
    assert_non_null(e.mask);
    return e;
}

static void extras_free(extras *e) {
    fc_release(e->targets);
    fc_release(e->mask);
}

/* in: x [N, IN], w1 [HID, IN], b1 [HID], w2 [K, HID], b2 [K]; returns the
 * mean cross-entropy, [1] */
static fc_tensor *mlp_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    const extras *e = user;
    fc_tensor *h = fc_linear(ctx, in[0], in[1], in[2]);
    h = e->gelu ? fc_gelu(ctx, h, true) : fc_relu(ctx, h);
    return fc_cross_entropy(ctx, fc_linear(ctx, h, in[3], in[4]), e->targets, NULL);
}

/* [AB, AT, AC] -> [AB, AH, AT, AHD]; a split view is not contiguous, so
 * the reshape copies */
static fc_tensor *heads(fc_ctx *ctx, fc_tensor *t) {
    return fc_transpose(ctx, fc_reshape(ctx, t, (const int64_t[]){AB, AT, AH, AHD}, 4), 1, 2);
}

/* in: x [AB, AT, AC], ln_w [AC], ln_b [AC], qkv_w [3AC, AC], qkv_b [3AC],
 * proj_w [AC, AC], proj_b [AC]; returns x + proj(attn(layer_norm(x))),
 * [AB, AT, AC] */
static fc_tensor *attn_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    const extras *e = user;
    fc_tensor *h = fc_layer_norm(ctx, in[0], in[1], in[2], 1e-5);
    fc_tensor *qkv[3];
    if (fc_split(ctx, fc_linear(ctx, h, in[3], in[4]), 2, (const int64_t[]){AC, AC, AC}, 3, qkv) !=
        FC_OK)
        return NULL;
    fc_tensor *q = heads(ctx, qkv[0]), *k = heads(ctx, qkv[1]), *v = heads(ctx, qkv[2]);
    fc_tensor *att = fc_mul_scalar(ctx, fc_matmul(ctx, q, fc_transpose(ctx, k, -2, -1)),
                                   1.0 / sqrt((double)AHD));
    att = fc_softmax(ctx, fc_masked_fill(ctx, att, e->mask, -INFINITY), -1);
    fc_tensor *y = fc_transpose(ctx, fc_matmul(ctx, att, v), 1, 2);
    y = fc_reshape(ctx, y, (const int64_t[]){AB, AT, AC}, 3);
    return fc_add(ctx, in[0], fc_linear(ctx, y, in[5], in[6]));
}

typedef struct composite {
    const char *name;
    int n;
    spec in[MAXIN];
    fc_gradcheck_fn fn;
    bool gelu;
} composite;

static const composite MLP_RELU = {
    "mlp_relu",
    5,
    {{2, {N, IN}}, {2, {HID, IN}}, {1, {HID}}, {2, {K, HID}}, {1, {K}}},
    mlp_fn,
    false};
static const composite MLP_GELU = {
    "mlp_gelu",
    5,
    {{2, {N, IN}}, {2, {HID, IN}}, {1, {HID}}, {2, {K, HID}}, {1, {K}}},
    mlp_fn,
    true};
static const composite ATTN = {"attention",
                               7,
                               {{3, {AB, AT, AC}},
                                {1, {AC}},
                                {1, {AC}},
                                {2, {3 * AC, AC}},
                                {1, {3 * AC}},
                                {2, {AC, AC}},
                                {1, {AC}}},
                               attn_fn,
                               false};

/* Weights scaled like a default init (1/sqrt(fan_in)), the LayerNorm weight
 * around 1, everything else in [-1, 1). */
static void input_values(const composite *c, int k, uint64_t *st, fc_dtype dt, double *v) {
    double lo = -1, hi = 1;
    if (c->in[k].rank == 2 && k > 0) {
        double s = 1 / sqrt((double)c->in[k].shape[1]);
        lo = -s, hi = s;
    }
    if (c->fn == attn_fn && k == 1) lo = 0.5, hi = 1.5;
    values(st, dt, lo, hi, numel(&c->in[k]), v);
}

/* Leaves of dtype dt for every input of c, from the stream seed. */
static void make_inputs(fc_ctx *ctx, const composite *c, uint64_t seed, fc_dtype value_dt,
                        fc_dtype dt, fc_tensor **in) {
    for (int k = 0; k < c->n; k++) {
        double *v = malloc((size_t)numel(&c->in[k]) * sizeof *v);
        assert_non_null(v);
        input_values(c, k, &seed, value_dt, v);
        in[k] = leaf(ctx, dt, &c->in[k], v);
        free(v);
    }
}

/* ---- gradcheck in f64 ------------------------------------------------------------------- */

static void gradcheck_composite(const composite *c, uint64_t seed) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2});
    assert_non_null(ctx);
    fc_tensor *in[MAXIN];
    make_inputs(ctx, c, seed, FC_F64, FC_F64, in);
    extras e = extras_new(ctx, c->gelu);
    fc_gradcheck_opts o = {.check_all_f64 = true, .seed = seed};
    fc_gradcheck_report rep;
    fc_status st = fc_gradcheck(ctx, c->fn, &e, in, c->n, &o, &rep);
    if (st != FC_OK) fail_msg("gradcheck %s: %s", c->name, fc_ctx_error(ctx));
    assert_true(rep.passed);
    int64_t total = 0;
    for (int k = 0; k < c->n; k++)
        total += numel(&c->in[k]);
    assert_int_equal(rep.checked, total);
    for (int k = 0; k < c->n; k++)
        fc_release(in[k]);
    extras_free(&e);
    expect_no_leak(ctx);
    fc_ctx_free(ctx);
}

static void test_grad_composite_mlp_relu_gradcheck(void **state) {
    (void)state;
    gradcheck_composite(&MLP_RELU, 11);
}

static void test_grad_composite_mlp_gelu_gradcheck(void **state) {
    (void)state;
    gradcheck_composite(&MLP_GELU, 12);
}

static void test_grad_composite_attention_gradcheck(void **state) {
    (void)state;
    gradcheck_composite(&ATTN, 13);
}

/* ---- 16-bit leaves against f32 ------------------------------------------------------------ */

/* Runs c once on dt leaves and once on f32 leaves with the same values,
 * backward from the loss (a one-element output) or from a fixed f32
 * gradient, and compares every leaf's gradient. */
static void low_precision_composite(const composite *c, fc_dtype dt, uint64_t seed) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2});
    assert_non_null(ctx);
    fc_tensor *lo[MAXIN], *ref[MAXIN];
    make_inputs(ctx, c, seed, dt, dt, lo);
    make_inputs(ctx, c, seed, dt, FC_F32, ref);
    for (int k = 0; k < c->n; k++) {
        assert_int_equal(fc_requires_grad(lo[k], true), FC_OK);
        assert_int_equal(fc_requires_grad(ref[k], true), FC_OK);
    }
    extras e = extras_new(ctx, c->gelu);

    fc_scope_begin(ctx);
    fc_tensor *y[2] = {c->fn(ctx, lo, c->n, &e), c->fn(ctx, ref, c->n, &e)};
    for (int r = 0; r < 2; r++) {
        if (!y[r])
            fail_msg("%s %s forward: %s", c->name, r ? "f32" : fc_dtype_name(dt),
                     fc_ctx_error(ctx));
    }
    assert_int_equal(fc_tensor_dtype(y[0]), dt);
    assert_int_equal(fc_tensor_dtype(y[1]), FC_F32);
    fc_tensor *g = NULL;
    if (fc_tensor_numel(y[1]) > 1) {
        spec s = {fc_tensor_rank(y[1]), {0}};
        memcpy(s.shape, fc_tensor_shape(y[1]), (size_t)s.rank * sizeof s.shape[0]);
        double *v = malloc((size_t)numel(&s) * sizeof *v);
        assert_non_null(v);
        uint64_t gs = seed ^ 0x5eed;
        values(&gs, FC_F32, -1, 1, numel(&s), v);
        g = leaf(ctx, FC_F32, &s, v);
        free(v);
    }
    for (int r = 0; r < 2; r++) {
        fc_status st = g ? fc_backward_with(ctx, y[r], g, false) : fc_backward(ctx, y[r]);
        if (st != FC_OK)
            fail_msg("%s %s backward: %s", c->name, r ? "f32" : fc_dtype_name(dt),
                     fc_ctx_error(ctx));
    }
    fc_scope_end(ctx);

    double u = dt == FC_F16 ? ldexp(1, -11) : ldexp(1, -8);
    char miss[512] = "";
    for (int k = 0; k < c->n; k++) {
        fc_tensor *g16 = fc_grad(lo[k]), *g32 = fc_grad(ref[k]);
        assert_non_null(g16);
        assert_non_null(g32);
        assert_int_equal(fc_tensor_dtype(g16), FC_F32);
        assert_int_equal(fc_tensor_rank(g16), c->in[k].rank);
        assert_memory_equal(fc_tensor_shape(g16), c->in[k].shape,
                            (size_t)c->in[k].rank * sizeof(int64_t));
        int64_t n = numel(&c->in[k]);
        float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
        assert_non_null(a);
        assert_non_null(b);
        assert_int_equal(fc_tensor_copy_out(a, (size_t)n * sizeof *a, g16), FC_OK);
        assert_int_equal(fc_tensor_copy_out(b, (size_t)n * sizeof *b, g32), FC_OK);
        double scale = 0, worst = -1;
        int64_t wi = 0;
        for (int64_t i = 0; i < n; i++)
            scale = fmax(scale, fabs((double)b[i]));
        for (int64_t i = 0; i < n; i++) {
            double d = fabs((double)a[i] - (double)b[i]);
            if (!(d <= worst)) worst = d, wi = i;
        }
        /* noted, and reported after the cleanup so a miss leaks nothing */
        if ((!(worst <= TOL_K * u * scale) || !(scale > 0)) && !miss[0])
            snprintf(miss, sizeof miss,
                     "%s %s input %d element %lld: gradient %.9g, f32 graph %.9g (|diff| %.3g > "
                     "%g * u * max|f32| %.3g)",
                     c->name, fc_dtype_name(dt), k, (long long)wi, (double)a[wi], (double)b[wi],
                     worst, TOL_K, scale);
        free(a);
        free(b);
    }
    for (int k = 0; k < c->n; k++) {
        fc_release(lo[k]);
        fc_release(ref[k]);
    }
    fc_release(g);
    extras_free(&e);
    expect_no_leak(ctx);
    fc_ctx_free(ctx);
    if (miss[0]) fail_msg("%s", miss);
}

static void test_grad_composite_mlp_f16_leaves(void **state) {
    (void)state;
    low_precision_composite(&MLP_RELU, FC_F16, 21);
    low_precision_composite(&MLP_GELU, FC_F16, 22);
}

static void test_grad_composite_mlp_bf16_leaves(void **state) {
    (void)state;
    low_precision_composite(&MLP_RELU, FC_BF16, 23);
    low_precision_composite(&MLP_GELU, FC_BF16, 24);
}

static void test_grad_composite_attention_f16_leaves(void **state) {
    (void)state;
    low_precision_composite(&ATTN, FC_F16, 25);
}

static void test_grad_composite_attention_bf16_leaves(void **state) {
    (void)state;
    low_precision_composite(&ATTN, FC_BF16, 26);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_composite_mlp_relu_gradcheck),
        cmocka_unit_test(test_grad_composite_mlp_gelu_gradcheck),
        cmocka_unit_test(test_grad_composite_attention_gradcheck),
        cmocka_unit_test(test_grad_composite_mlp_f16_leaves),
        cmocka_unit_test(test_grad_composite_mlp_bf16_leaves),
        cmocka_unit_test(test_grad_composite_attention_f16_leaves),
        cmocka_unit_test(test_grad_composite_attention_bf16_leaves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
