/* SPDX-License-Identifier: MIT */
/* test_swiglu.c - fc_swiglu (silu(a) * b in one op) against the formula in
 * f64 over every float dtype and strided inputs, against fc_silu followed by
 * fc_mul (values and gradients), fc_gradcheck (f64), the fused two-gradient
 * backward against one gradient at a time (same bits), and the error codes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fct_f64.h"
#include "fucina.h"

static fc_ctx *new_ctx(void) {
    fc_ctx_opts o = {.threads = 2, .seed = 2};
    fc_ctx *ctx = fc_ctx_new(&o);
    assert_non_null(ctx);
    return ctx;
}

static void expect_close(const double *got, const double *want, int64_t n, double tol,
                         const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
            fail_msg("%s[%lld]: got %.12g want %.12g (tol %g)", what, (long long)i, got[i], want[i],
                     tol);
}

static void test_swiglu_forward(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    const fc_dtype dts[] = {FC_F64, FC_F32, FC_F16, FC_BF16};
    const double tol[] = {1e-15, 2e-6, 2e-3, 1.6e-2};
    const int64_t sh[2] = {37, 300}, n = 37 * 300;
    double *a = malloc(sizeof *a * n), *b = malloc(sizeof *b * n), *want = malloc(sizeof *a * n);
    fill_random(a, n, 1, -8, 8);
    fill_random(b, n, 2, -3, 3);
    for (int d = 0; d < 4; d++)
        for (int tr = 0; tr < 2; tr++) {
            fc_tensor *at = from_f64(ctx, dts[d], sh, 2, a), *bt = from_f64(ctx, dts[d], sh, 2, b);
            if (tr) { /* a strided view: the transpose of a transposed copy */
                fc_tensor *t = fc_transpose(ctx, at, 0, 1), *c = fc_contiguous(ctx, t);
                fc_release(t);
                fc_release(at);
                at = fc_transpose(ctx, c, 0, 1);
                fc_release(c);
            }
            double *av = values(at), *bv = values(bt);
            for (int64_t i = 0; i < n; i++)
                want[i] = av[i] / (1 + exp(-av[i])) * bv[i];
            fc_tensor *y = fc_swiglu(ctx, at, bt);
            if (!y) fail_msg("%s", fc_ctx_error(ctx));
            assert_int_equal(fc_tensor_dtype(y), dts[d]);
            double *got = values(y);
            expect_close(got, want, n, tol[d], fc_dtype_name(dts[d]));
            free(got);
            free(av);
            free(bv);
            fc_release(y);
            fc_release(at);
            fc_release(bt);
        }
    free(a);
    free(b);
    free(want);
    fc_ctx_clear_error(ctx);
    free_ctx(ctx);
}

/* Values and gradients equal those of fc_mul(fc_silu(a), b) in f32. */
static void test_swiglu_matches_silu_mul(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    const int64_t sh[2] = {16, 70};
    double *r[2][3];
    for (int pass = 0; pass < 2; pass++) {
        fc_ctx_set_seed(ctx, 4);
        fc_tensor *a = fc_param_randn(ctx, FC_F32, sh, 2, 2);
        fc_tensor *b = fc_param_randn(ctx, FC_F32, sh, 2, 1);
        fc_scope_begin(ctx);
        fc_tensor *y = pass == 0 ? fc_swiglu(ctx, a, b) : fc_mul(ctx, fc_silu(ctx, a), b);
        assert_int_equal(fc_backward(ctx, fc_sum(ctx, fc_mul(ctx, y, y), NULL, 0, false)), FC_OK);
        r[pass][0] = values(y);
        fc_scope_end(ctx);
        r[pass][1] = values(fc_grad(a));
        r[pass][2] = values(fc_grad(b));
        fc_release(a);
        fc_release(b);
    }
    for (int k = 0; k < 3; k++) {
        expect_close(r[0][k], r[1][k], sh[0] * sh[1], 1e-5, k == 0 ? "y" : k == 1 ? "da" : "db");
        free(r[0][k]);
        free(r[1][k]);
    }
    free_ctx(ctx);
}

static fc_tensor *swiglu_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n, (void)user;
    return fc_swiglu(ctx, in[0], in[1]);
}

static void test_swiglu_gradcheck(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    double a[30], b[30];
    fill_random(a, 30, 5, -5, 5);
    fill_random(b, 30, 6, -2, 2);
    fc_tensor *in[2] = {fc_param_from_data(ctx, FC_F64, (const int64_t[]){5, 6}, 2, a),
                        fc_param_from_data(ctx, FC_F64, (const int64_t[]){5, 6}, 2, b)};
    fc_gradcheck_report r;
    if (fc_gradcheck(ctx, swiglu_fn, NULL, in, 2, NULL, &r) != FC_OK)
        fail_msg("gradcheck: %s", fc_ctx_error(ctx));
    assert_true(r.passed);
    /* only b requires grad: a's rule is skipped, b's still right */
    assert_int_equal(fc_requires_grad(in[0], false), FC_OK);
    if (fc_gradcheck(ctx, swiglu_fn, NULL, in, 2, NULL, &r) != FC_OK)
        fail_msg("gradcheck (b only): %s", fc_ctx_error(ctx));
    fc_release(in[0]);
    fc_release(in[1]);
    free_ctx(ctx);
}

/* The rule computes da and db in one fused pass when both inputs need a
 * gradient and one at a time otherwise: the two must give the same bits,
 * over f32, bf16 and f16 inputs, contiguous and transposed (the strided
 * walk over five operands). */
static void test_swiglu_fused_backward_same_bits(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    const fc_dtype dts[] = {FC_F32, FC_BF16, FC_F16};
    const int64_t sh[2] = {40, 300}; /* large enough to split over the team */
    const int64_t n = sh[0] * sh[1];
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        for (int strided = 0; strided < 2; strided++) {
            float *got[3][2] = {{NULL}}; /* [needs: both, a only, b only][da, db] */
            for (int mode = 0; mode < 3; mode++) {
                fc_ctx_set_seed(ctx, 9);
                fc_tensor *a = fc_param_randn(ctx, dts[d], sh, 2, 2);
                fc_tensor *b = fc_param_randn(ctx, dts[d], sh, 2, 1);
                assert_int_equal(fc_requires_grad(a, mode != 2), FC_OK);
                assert_int_equal(fc_requires_grad(b, mode != 1), FC_OK);
                fc_scope_begin(ctx);
                fc_tensor *ua = strided ? fc_transpose(ctx, a, 0, 1) : a;
                fc_tensor *ub = strided ? fc_transpose(ctx, b, 0, 1) : b;
                fc_tensor *y = fc_swiglu(ctx, ua, ub);
                fc_tensor *w = fc_randn(ctx, FC_F32, fc_tensor_shape(y), 2);
                fc_tensor *l = fc_sum(ctx, fc_mul(ctx, fc_to(ctx, y, FC_F32), w), NULL, 0, false);
                assert_int_equal(fc_backward(ctx, l), FC_OK);
                fc_scope_end(ctx);
                fc_tensor *ps[2] = {a, b};
                for (int k = 0; k < 2; k++) {
                    if ((mode == 1 && k == 1) || (mode == 2 && k == 0)) continue;
                    const fc_tensor *g = fc_grad(ps[k]);
                    assert_non_null(g);
                    assert_int_equal(fc_tensor_dtype(g), FC_F32);
                    got[mode][k] = malloc(sizeof(float) * (size_t)n);
                    memcpy(got[mode][k], fc_tensor_data(g), sizeof(float) * (size_t)n);
                }
                fc_release(a);
                fc_release(b);
            }
            assert_memory_equal(got[0][0], got[1][0], sizeof(float) * (size_t)n);
            assert_memory_equal(got[0][1], got[2][1], sizeof(float) * (size_t)n);
            free(got[0][0]);
            free(got[0][1]);
            free(got[1][0]);
            free(got[2][1]);
        }
    }
    free_ctx(ctx);
}

static void test_swiglu_errors(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *a = fc_zeros(ctx, FC_F32, (const int64_t[]){3, 4}, 2);
    fc_tensor *b = fc_zeros(ctx, FC_F32, (const int64_t[]){4}, 1);
    fc_tensor *c = fc_zeros(ctx, FC_F16, (const int64_t[]){3, 4}, 2);
    fc_tensor *i = fc_zeros(ctx, FC_I32, (const int64_t[]){3, 4}, 2);
    struct {
        fc_tensor *x, *y;
        fc_status want;
    } cases[] = {{a, b, FC_ERR_SHAPE_MISMATCH},
                 {a, c, FC_ERR_DTYPE},
                 {i, i, FC_ERR_DTYPE},
                 {a, NULL, FC_ERR_NULL_ARG}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        fc_ctx_clear_error(ctx);
        assert_null(fc_swiglu(ctx, cases[k].x, cases[k].y));
        assert_int_equal(fc_ctx_status(ctx), cases[k].want);
        assert_true(strstr(fc_ctx_error(ctx), "swiglu") != NULL);
    }
    fc_release(a);
    fc_release(b);
    fc_release(c);
    fc_release(i);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_swiglu_forward),
        cmocka_unit_test(test_swiglu_matches_silu_mul),
        cmocka_unit_test(test_swiglu_gradcheck),
        cmocka_unit_test(test_swiglu_fused_backward_same_bits),
        cmocka_unit_test(test_swiglu_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
