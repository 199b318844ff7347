/* SPDX-License-Identifier: MIT */
/* test_unary.c - the unary family (src/ops/unary.c over
 * src/exec/kernels/unary.c and unary_math.c): every op in every float
 * dtype and layout against a double reference written here, the special
 * values (NaN, signed zeros, infinities, the saturating tails of
 * sigmoid/silu/softplus), the signed-integer forms with wrapping, and the
 * refusals. Gradients are checked in test_pointwise_grad.c.
 *
 * Tolerance: the kernels compute f16/bf16/f32 in f32 with libm's float
 * functions and f64 in double, so a result may sit a few f32 (or f64) ulps
 * from the exact value, plus one ulp of a 16-bit dtype for its final
 * rounding, plus 1e-6 absolute in f32 for the formulas that cancel (gelu's
 * 1 + erf(x) for negative x). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fct_tensor.h"
#include "fucina.h"

static int setup(void **state) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 11});
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

typedef enum un {
    NEG,
    ABS,
    SIGN,
    SQUARE,
    SQRT,
    RSQRT,
    RECIP,
    EXP,
    LOG,
    LOG1P,
    EXPM1,
    SIN,
    COS,
    TANH,
    SIGMOID,
    RELU,
    LEAKY,
    GELU,
    GELU_TANH,
    SILU,
    SOFTPLUS,
    CLAMP,
    UN_COUNT
} un;

static const struct {
    const char *name;
    double lo, hi; /* input domain */
} ops[UN_COUNT] = {
    [NEG] = {"neg", -5, 5},
    [ABS] = {"abs", -5, 5},
    [SIGN] = {"sign", -5, 5},
    [SQUARE] = {"square", -5, 5},
    [SQRT] = {"sqrt", 0.05, 5},
    [RSQRT] = {"rsqrt", 0.05, 5},
    [RECIP] = {"reciprocal", 0.2, 4},
    [EXP] = {"exp", -5, 5},
    [LOG] = {"log", 0.05, 5},
    [LOG1P] = {"log1p", -0.9, 5},
    [EXPM1] = {"expm1", -5, 5},
    [SIN] = {"sin", -5, 5},
    [COS] = {"cos", -5, 5},
    [TANH] = {"tanh", -5, 5},
    [SIGMOID] = {"sigmoid", -9, 9},
    [RELU] = {"relu", -5, 5},
    [LEAKY] = {"leaky_relu", -5, 5},
    [GELU] = {"gelu", -5, 5},
    [GELU_TANH] = {"gelu", -5, 5},
    [SILU] = {"silu", -9, 9},
    [SOFTPLUS] = {"softplus", -30, 30},
    [CLAMP] = {"clamp", -5, 5},
};

#define SLOPE 0.125
#define CLO (-1.5)
#define CHI 2.25

static fc_tensor *apply(un k, fc_ctx *ctx, fc_tensor *x) {
    switch (k) {
    case NEG:
        return fc_neg(ctx, x);
    case ABS:
        return fc_abs(ctx, x);
    case SIGN:
        return fc_sign(ctx, x);
    case SQUARE:
        return fc_square(ctx, x);
    case SQRT:
        return fc_sqrt(ctx, x);
    case RSQRT:
        return fc_rsqrt(ctx, x);
    case RECIP:
        return fc_reciprocal(ctx, x);
    case EXP:
        return fc_exp(ctx, x);
    case LOG:
        return fc_log(ctx, x);
    case LOG1P:
        return fc_log1p(ctx, x);
    case EXPM1:
        return fc_expm1(ctx, x);
    case SIN:
        return fc_sin(ctx, x);
    case COS:
        return fc_cos(ctx, x);
    case TANH:
        return fc_tanh(ctx, x);
    case SIGMOID:
        return fc_sigmoid(ctx, x);
    case RELU:
        return fc_relu(ctx, x);
    case LEAKY:
        return fc_leaky_relu(ctx, x, SLOPE);
    case GELU:
        return fc_gelu(ctx, x, false);
    case GELU_TANH:
        return fc_gelu(ctx, x, true);
    case SILU:
        return fc_silu(ctx, x);
    case SOFTPLUS:
        return fc_softplus(ctx, x);
    default:
        return fc_clamp(ctx, x, CLO, CHI);
    }
}

static double ref(un k, double x) {
    switch (k) {
    case NEG:
        return -x;
    case ABS:
        return fabs(x);
    case SIGN:
        return x > 0 ? 1 : x < 0 ? -1 : x;
    case SQUARE:
        return x * x;
    case SQRT:
        return sqrt(x);
    case RSQRT:
        return 1 / sqrt(x);
    case RECIP:
        return 1 / x;
    case EXP:
        return exp(x);
    case LOG:
        return log(x);
    case LOG1P:
        return log1p(x);
    case EXPM1:
        return expm1(x);
    case SIN:
        return sin(x);
    case COS:
        return cos(x);
    case TANH:
        return tanh(x);
    case SIGMOID:
        return 1 / (1 + exp(-x));
    case RELU:
        return x > 0 ? x : 0;
    case LEAKY:
        return x > 0 ? x : SLOPE * x;
    case GELU:
        return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case GELU_TANH:
        return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case SILU:
        return x / (1 + exp(-x));
    case SOFTPLUS:
        return x > 20 ? x : log1p(exp(x));
    default:
        return x < CLO ? CLO : x > CHI ? CHI : x;
    }
}

static double tolerance(fc_dtype dt, double want) {
    if (dt == FC_F64) return 8 * fct_ulp(FC_F64, want) + 1e-14;
    double t = 8 * fct_ulp(FC_F32, want) + 1e-6;
    if (dt != FC_F32) t += fct_ulp(dt, want);
    return t;
}

static void check(un k, fc_dtype dt, fc_tensor *y, const double *x, int64_t n, const char *what) {
    static double got[4096];
    assert_non_null(y);
    assert_int_equal(fc_tensor_dtype(y), dt);
    assert_int_equal(fct_read(y, got, 4096), n);
    for (int64_t i = 0; i < n; i++) {
        double want = ref(k, x[i]);
        if (!(fabs(got[i] - want) <= tolerance(dt, want))) {
            fprintf(stderr, "%s %s %s [%lld]: f(%.17g) = %.17g, want %.17g\n", ops[k].name,
                    fc_dtype_name(dt), what, (long long)i, x[i], got[i], want);
            fail();
        }
    }
}

static const fc_dtype float_dts[] = {FC_F32, FC_F64, FC_F16, FC_BF16};

/* Every op, every float dtype, contiguous / transposed / strided. */
static void test_unary_all_ops(void **state) {
    fc_ctx *ctx = *state;
    const int64_t shape[2] = {6, 9};
    double x[54];
    uint64_t rng = 1;
    for (int k = 0; k < UN_COUNT; k++) {
        for (size_t d = 0; d < sizeof float_dts / sizeof float_dts[0]; d++) {
            fc_dtype dt = float_dts[d];
            for (int i = 0; i < 54; i++) {
                x[i] = fct_round(dt, fct_uniform(&rng, ops[k].lo, ops[k].hi));
                if (k == RECIP && i % 2) x[i] = -x[i];
            }
            x[0] = 0 > ops[k].lo && 0 < ops[k].hi ? 0 : x[0]; /* kinks at zero */
            x[1] = k == CLAMP ? fct_round(dt, CLO) : x[1];    /* clamp's bounds */
            x[2] = k == CLAMP ? fct_round(dt, CHI) : x[2];
            for (int l = 0; l < FCT_LAYOUT_COUNT; l++) {
                fc_scope_begin(ctx);
                check(k, dt, apply(k, ctx, fct_make(ctx, dt, shape, 2, x, l)), x, 54,
                      fct_layout_names[l]);
                fc_scope_end(ctx);
            }
        }
    }
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
}

/* Above the parallel grain: 1 and 2 threads give the same bits. */
static void test_unary_large_threads(void **state) {
    fc_ctx *ctx = *state;
    enum { N = 70001 };
    static double x[N];
    static float a1[N];
    uint64_t rng = 2;
    for (int i = 0; i < N; i++)
        x[i] = fct_round(FC_F32, fct_uniform(&rng, -6, 6));
    const int64_t n = N;
    fc_scope_begin(ctx);
    fc_tensor *t = fct_make(ctx, FC_F32, &n, 1, x, FCT_CONTIG);
    const un kinds[] = {SIGMOID, GELU, RELU, TANH};
    for (size_t j = 0; j < sizeof kinds / sizeof kinds[0]; j++) {
        fc_ctx_set_threads(ctx, 1);
        fc_tensor *y1 = apply(kinds[j], ctx, t);
        memcpy(a1, fc_tensor_data(y1), sizeof a1);
        fc_ctx_set_threads(ctx, 2);
        fc_tensor *y2 = apply(kinds[j], ctx, t);
        assert_memory_equal(a1, fc_tensor_data(y2), sizeof a1);
        for (int i = 0; i < N; i += 97)
            assert_true(fabs(a1[i] - ref(kinds[j], x[i])) <=
                        tolerance(FC_F32, ref(kinds[j], x[i])));
    }
    fc_scope_end(ctx);
}

static double one_value(fc_ctx *ctx, un k, fc_dtype dt, double x) {
    fc_tensor *t = fc_full(ctx, dt, (const int64_t[]){1}, 1, x);
    double v = -12345;
    fc_tensor_item(apply(k, ctx, t), &v);
    return v;
}

static void test_unary_special_values(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    for (size_t d = 0; d < sizeof float_dts / sizeof float_dts[0]; d++) {
        fc_dtype dt = float_dts[d];
        assert_true(isnan(one_value(ctx, RELU, dt, NAN)));
        double z = one_value(ctx, RELU, dt, -0.0);
        assert_true(z == 0 && !signbit(z));
        assert_true(isnan(one_value(ctx, SIGN, dt, NAN)));
        assert_true(signbit(one_value(ctx, SIGN, dt, -0.0)));
        assert_true(one_value(ctx, SIGMOID, dt, -1000) == 0);
        assert_true(one_value(ctx, SIGMOID, dt, 1000) == 1);
        assert_true(one_value(ctx, SILU, dt, -1000) == 0);
        assert_true(one_value(ctx, SILU, dt, 1000) == fct_round(dt, 1000));
        assert_true(one_value(ctx, SOFTPLUS, dt, 1000) == fct_round(dt, 1000));
        assert_true(one_value(ctx, SOFTPLUS, dt, -1000) == 0);
        assert_true(isnan(one_value(ctx, CLAMP, dt, NAN)));
        assert_true(isnan(one_value(ctx, SQRT, dt, -1)));
        assert_true(one_value(ctx, LOG, dt, 0) == -INFINITY);
        assert_true(one_value(ctx, EXP, dt, -INFINITY) == 0);
        assert_true(one_value(ctx, LEAKY, dt, -8) == -1);
        assert_true(one_value(ctx, ABS, dt, -INFINITY) == INFINITY);
        assert_true(one_value(ctx, TANH, dt, 50) == 1);
        assert_true(one_value(ctx, GELU, dt, -50) == 0 && one_value(ctx, GELU, dt, 50) == 50);
        assert_true(one_value(ctx, GELU_TANH, dt, 50) == 50);
    }
    /* clamp with infinite bounds is the identity; a one-sided clamp */
    fc_tensor *t = fc_full(ctx, FC_F32, (const int64_t[]){2}, 1, -3.5);
    double v;
    fc_tensor_element(fc_clamp(ctx, fc_clamp(ctx, t, -INFINITY, INFINITY), -INFINITY, -4),
                  (const int64_t[]){0}, &v);
    assert_true(v == -4);
    fc_tensor_element(fc_clamp(ctx, t, -INFINITY, INFINITY), (const int64_t[]){1}, &v);
    assert_true(v == -3.5);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
    fc_scope_end(ctx);
}

/* neg, abs, sign, square on signed integers, wrapping at INT_MIN. */
static void test_unary_int(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    const fc_dtype dts[] = {FC_I8, FC_I16, FC_I32, FC_I64};
    for (size_t d = 0; d < 4; d++) {
        fc_dtype dt = dts[d];
        int bits = (int)fc_dtype_size(dt) * 8;
        int64_t mn = bits == 64 ? INT64_MIN : -((int64_t)1 << (bits - 1));
        int64_t mx = bits == 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1;
        int64_t v[6] = {mn, mx, -1, 0, 5, -7};
        const int64_t n = 6;
        fc_tensor *t = fc_empty(ctx, dt, &n, 1);
        char *p = fc_tensor_data_mut(t);
        for (int i = 0; i < 6; i++)
            memcpy(p + i * (int)fc_dtype_size(dt), &v[i], fc_dtype_size(dt));
        fc_tensor *r[4] = {fc_neg(ctx, t), fc_abs(ctx, t), fc_sign(ctx, t), fc_square(ctx, t)};
        for (int i = 0; i < 6; i++) {
            uint64_t m = bits == 64 ? ~0ull : ((1ull << bits) - 1), u = (uint64_t)v[i];
            uint64_t want[4] = {(0 - u) & m, (v[i] < 0 ? 0 - u : u) & m,
                                (uint64_t)((v[i] > 0) - (v[i] < 0)) & m, (u * u) & m};
            for (int k = 0; k < 4; k++) {
                uint64_t got = 0;
                memcpy(&got, (const char *)fc_tensor_data(r[k]) + i * (int)fc_dtype_size(dt),
                       fc_dtype_size(dt));
                assert_true(got == want[k]);
            }
        }
    }
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
    fc_scope_end(ctx);
}

static void expect_error(fc_ctx *ctx, fc_tensor *r, fc_status st, const char *text) {
    assert_null(r);
    assert_int_equal(fc_ctx_status(ctx), st);
    if (!strstr(fc_ctx_error(ctx), text)) {
        fprintf(stderr, "error \"%s\" lacks \"%s\"\n", fc_ctx_error(ctx), text);
        fail();
    }
    fc_ctx_clear_error(ctx);
}

static void test_unary_errors(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    const int64_t s = 4;
    fc_tensor *i32 = fc_ones(ctx, FC_I32, &s, 1), *u8 = fc_ones(ctx, FC_U8, &s, 1);
    fc_tensor *bl = fc_ones(ctx, FC_BOOL, &s, 1), *f8 = fc_ones(ctx, FC_F8_E5M2, &s, 1);
    fc_tensor *f32 = fc_ones(ctx, FC_F32, &s, 1);
    fc_tensor *q = fc_empty(ctx, FC_Q4_0, (const int64_t[]){32}, 1);
    expect_error(ctx, fc_exp(ctx, i32), FC_ERR_DTYPE,
                 "exp: dtype i32 is not supported (float dtypes only");
    expect_error(ctx, fc_neg(ctx, u8), FC_ERR_DTYPE,
                 "neg: dtype u8 is not supported (float dtypes and signed integers only");
    expect_error(ctx, fc_relu(ctx, bl), FC_ERR_DTYPE, "relu: dtype bool");
    expect_error(ctx, fc_sigmoid(ctx, f8), FC_ERR_DTYPE, "sigmoid: dtype f8_e5m2");
    expect_error(ctx, fc_gelu(ctx, q, true), FC_ERR_DTYPE, "gelu: dtype q4_0");
    expect_error(ctx, fc_clamp(ctx, f32, 3, 1), FC_ERR_INVALID_ARG, "clamp: bounds [3, 1]");
    expect_error(ctx, fc_clamp(ctx, f32, NAN, 1), FC_ERR_INVALID_ARG, "clamp: bounds");
    expect_error(ctx, fc_sigmoid(ctx, NULL), FC_ERR_NULL_ARG, "sigmoid: input 'x' is NULL");
    /* the first error survives a chain */
    assert_null(fc_tanh(ctx, fc_exp(ctx, fc_exp(ctx, i32))));
    assert_null(fc_clamp(ctx, NULL, 3, 1));
    expect_error(ctx, NULL, FC_ERR_DTYPE, "exp: dtype i32");
    assert_null(fc_relu(NULL, f32));
    fc_scope_end(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_unary_all_ops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unary_large_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unary_special_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unary_int, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unary_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
