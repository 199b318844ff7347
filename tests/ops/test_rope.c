/* SPDX-License-Identifier: MIT */
/* test_rope.c - fc_rope against the closed form written naively here (both
 * pairings, partial rotary dims, position offsets, frequency base and
 * scale, leading batch axes, transposed input views) in f64 and f32, the
 * f16/bf16 path, a few hand-computed values, fc_gradcheck (f64) of every
 * option, same bits at 1 and 2 threads, and the error codes. */
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

static fc_ctx *new_ctx(int threads) {
    fc_ctx_opts o = {.threads = threads, .seed = 9};
    fc_ctx *ctx = fc_ctx_new(&o);
    assert_non_null(ctx);
    return ctx;
}

/* The closed form over x [outer, T, H, D] (row-major doubles). */
static void ref_rope(const double *x, double *y, int64_t outer, int64_t T, int64_t H, int64_t D,
                     const fc_rope_opts *o) {
    int64_t nd = o->n_dims ? o->n_dims : D, half = nd / 2;
    double base = o->freq_base ? o->freq_base : 10000, scale = o->freq_scale ? o->freq_scale : 1;
    memcpy(y, x, sizeof *y * (size_t)(outer * T * H * D));
    for (int64_t b = 0; b < outer; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                const double *xr = x + ((b * T + t) * H + h) * D;
                double *yr = y + ((b * T + t) * H + h) * D;
                for (int64_t i = 0; i < half; i++) {
                    double a = (double)(o->pos_offset + t) * scale * pow(base, -2.0 * i / nd);
                    int64_t i0 = o->mode == FC_ROPE_NEOX ? i : 2 * i;
                    int64_t i1 = o->mode == FC_ROPE_NEOX ? i + half : 2 * i + 1;
                    yr[i0] = xr[i0] * cos(a) - xr[i1] * sin(a);
                    yr[i1] = xr[i0] * sin(a) + xr[i1] * cos(a);
                }
            }
}

static void expect_close(const double *got, const double *want, int64_t n, double tol,
                         const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
            fail_msg("%s[%lld]: got %.12g want %.12g (tol %g)", what, (long long)i, got[i], want[i],
                     tol);
}

static const fc_rope_opts option_sets[] = {
    {FC_ROPE_NORM, 0, 0, 0, 0},        {FC_ROPE_NEOX, 0, 0, 0, 0},
    {FC_ROPE_NORM, 4, 500000, 0, 7},   /* partial dims, llama3's base, offset */
    {FC_ROPE_NEOX, 6, 10000, 0.25, 3}, /* partial dims, linear position scaling */
    {FC_ROPE_NORM, 2, 100, 2, 1000},
};

static void forward_case(fc_ctx *ctx, fc_dtype dt, const fc_rope_opts *o, bool transposed,
                         double tol) {
    const int64_t outer = 2, T = 5, H = 3, D = 8, n = outer * T * H * D;
    double *x = malloc(sizeof *x * (size_t)n), *want = malloc(sizeof *want * (size_t)n);
    fill_random(x, n, 4, -2, 2);
    fc_tensor *xt;
    if (!transposed) {
        xt = from_f64(ctx, dt, (const int64_t[]){outer, T, H, D}, 4, x);
    } else { /* storage [outer, H, T, D], the op sees its [outer, T, H, D] transpose */
        double *s = malloc(sizeof *s * (size_t)n);
        for (int64_t b = 0; b < outer; b++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t h = 0; h < H; h++)
                    memcpy(s + ((b * H + h) * T + t) * D, x + ((b * T + t) * H + h) * D,
                           sizeof *s * (size_t)D);
        fc_tensor *base = from_f64(ctx, dt, (const int64_t[]){outer, H, T, D}, 4, s);
        xt = fc_transpose(ctx, base, 1, 2);
        fc_release(base);
        free(s);
    }
    double *xr = values(xt); /* what dt really holds */
    ref_rope(xr, want, outer, T, H, D, o);
    fc_tensor *y = fc_rope(ctx, xt, o);
    if (!y) fail_msg("%s", fc_ctx_error(ctx));
    assert_int_equal(fc_tensor_dtype(y), dt);
    assert_true(fc_tensor_is_contiguous(y));
    double *got = values(y);
    expect_close(got, want, n, tol, fc_dtype_name(dt));
    free(got);
    free(xr);
    free(x);
    free(want);
    fc_release(y);
    fc_release(xt);
}

static void test_rope_closed_form(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(2);
    const fc_dtype dts[] = {FC_F64, FC_F32, FC_F16, FC_BF16};
    const double tol[] = {1e-13, 2e-6, 2e-3, 1.6e-2};
    for (int d = 0; d < 4; d++)
        for (size_t i = 0; i < sizeof option_sets / sizeof option_sets[0]; i++)
            for (int tr = 0; tr < 2; tr++)
                forward_case(ctx, dts[d], &option_sets[i], tr, tol[d]);
    free_ctx(ctx);
}

/* Hand-computed: D = 4, one head, position 1 and base 16: the angles are 1
 * and 1/4; NORM pairs (0,1), (2,3), NEOX pairs (0,2), (1,3). */
static void test_rope_hand_values(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    const double x[4] = {1, 2, 3, 4};
    fc_tensor *xt = fc_tensor_from_data(ctx, FC_F64, (const int64_t[]){1, 1, 4}, 3, x);
    for (int mode = 0; mode < 2; mode++) {
        fc_rope_opts o = {.mode = mode, .freq_base = 16, .pos_offset = 1};
        fc_tensor *y = fc_rope(ctx, xt, &o);
        assert_non_null(y);
        double got[4], c1 = cos(1), s1 = sin(1), c4 = cos(0.25), s4 = sin(0.25);
        assert_int_equal(fc_tensor_copy_out(got, sizeof got, y), FC_OK);
        double want[4];
        if (mode == FC_ROPE_NORM) {
            want[0] = 1 * c1 - 2 * s1, want[1] = 1 * s1 + 2 * c1;
            want[2] = 3 * c4 - 4 * s4, want[3] = 3 * s4 + 4 * c4;
        } else {
            want[0] = 1 * c1 - 3 * s1, want[2] = 1 * s1 + 3 * c1;
            want[1] = 2 * c4 - 4 * s4, want[3] = 2 * s4 + 4 * c4;
        }
        expect_close(got, want, 4, 1e-15, mode ? "neox" : "norm");
        fc_release(y);
    }
    /* position 0 is the identity */
    fc_tensor *y0 = fc_rope(ctx, xt, NULL);
    double got[4];
    assert_int_equal(fc_tensor_copy_out(got, sizeof got, y0), FC_OK);
    assert_memory_equal(got, x, sizeof got);
    fc_release(y0);
    fc_release(xt);
    free_ctx(ctx);
}

static fc_tensor *rope_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    /* the leaf is [B, H, T, D]; rope sees its [B, T, H, D] transpose */
    fc_tensor *v = fc_transpose(ctx, in[0], 1, 2);
    fc_tensor *y = fc_rope(ctx, v, user);
    fc_release(v);
    return y;
}

static void test_rope_gradcheck(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    for (size_t i = 0; i < sizeof option_sets / sizeof option_sets[0]; i++) {
        double x[2 * 3 * 4 * 8];
        fill_random(x, 192, 30 + i, -1, 1);
        fc_tensor *p = fc_param_from_data(ctx, FC_F64, (const int64_t[]){2, 3, 4, 8}, 4, x);
        fc_gradcheck_report r;
        if (fc_gradcheck(ctx, rope_fn, (void *)&option_sets[i], &p, 1, NULL, &r) != FC_OK)
            fail_msg("gradcheck %zu: %s", i, fc_ctx_error(ctx));
        assert_true(r.passed);
        fc_release(p);
    }
    free_ctx(ctx);
}

/* A bf16 input gets an f32 gradient: the rotation of the output gradient
 * by the negated angles. */
static void test_rope_half_grad(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(2);
    const int64_t sh[3] = {6, 2, 10}, n = 6 * 2 * 10;
    double *w = malloc(sizeof *w * n), *want = malloc(sizeof *want * n);
    fill_random(w, n, 8, -1, 1);
    fc_tensor *x = fc_param_randn(ctx, FC_BF16, sh, 3, 1);
    fc_tensor *wt = from_f64(ctx, FC_F32, sh, 3, w);
    fc_rope_opts o = {.mode = FC_ROPE_NEOX, .n_dims = 8, .freq_base = 1000, .pos_offset = 4};
    fc_scope_begin(ctx);
    fc_tensor *y = fc_to(ctx, fc_rope(ctx, x, &o), FC_F32);
    assert_int_equal(fc_backward(ctx, fc_sum(ctx, fc_mul(ctx, y, wt), NULL, 0, false)), FC_OK);
    fc_scope_end(ctx);
    assert_int_equal(fc_tensor_dtype(fc_grad(x)), FC_F32);
    double *got = values(fc_grad(x));
    fc_rope_opts inv = o;
    inv.freq_scale = -1; /* the reference takes the scale as given: angles negated */
    ref_rope(w, want, 1, 6, 2, 10, &inv);
    expect_close(got, want, n, 2e-6, "bf16 grad");
    free(got);
    free(w);
    free(want);
    fc_release(wt);
    fc_release(x);
    free_ctx(ctx);
}

static void test_rope_threads_same_bits(void **state) {
    (void)state;
    double *r[2];
    const int64_t sh[4] = {2, 300, 4, 16};
    for (int t = 0; t < 2; t++) {
        fc_ctx *ctx = new_ctx(t + 1);
        fc_tensor *x = fc_param_randn(ctx, FC_F32, sh, 4, 1);
        fc_rope_opts o = {.mode = FC_ROPE_NEOX, .n_dims = 12, .pos_offset = 5};
        fc_tensor *y = fc_rope(ctx, x, &o);
        fc_scope_begin(ctx);
        assert_int_equal(fc_backward(ctx, fc_sum(ctx, fc_mul(ctx, y, y), NULL, 0, false)), FC_OK);
        fc_scope_end(ctx);
        fc_tensor *both[2] = {y, fc_grad(x)};
        fc_tensor *c = fc_concat(ctx, both, 2, 0);
        r[t] = values(c);
        fc_release(c);
        fc_release(y);
        fc_release(x);
        free_ctx(ctx);
    }
    assert_memory_equal(r[0], r[1], sizeof(double) * 2 * 2 * 300 * 4 * 16);
    free(r[0]);
    free(r[1]);
}

static void expect_error(fc_ctx *ctx, fc_tensor *x, const fc_rope_opts *o, fc_status want) {
    fc_ctx_clear_error(ctx);
    assert_null(fc_rope(ctx, x, o));
    if (fc_ctx_status(ctx) != want)
        fail_msg("want %s, got %s: %s", fc_status_name(want), fc_status_name(fc_ctx_status(ctx)),
                 fc_ctx_error(ctx));
    assert_true(strstr(fc_ctx_error(ctx), "rope") != NULL);
}

static void test_rope_errors(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    fc_tensor *x = fc_zeros(ctx, FC_F32, (const int64_t[]){3, 2, 8}, 3);
    fc_tensor *x2 = fc_zeros(ctx, FC_F32, (const int64_t[]){3, 8}, 2);
    fc_tensor *xo = fc_zeros(ctx, FC_F32, (const int64_t[]){3, 2, 7}, 3);
    fc_tensor *xi = fc_zeros(ctx, FC_I64, (const int64_t[]){3, 2, 8}, 3);
    expect_error(ctx, x2, NULL, FC_ERR_RANK);
    expect_error(ctx, xi, NULL, FC_ERR_DTYPE);
    expect_error(ctx, xo, NULL, FC_ERR_INVALID_ARG); /* all of an odd D */
    expect_error(ctx, x, &(fc_rope_opts){.n_dims = 3}, FC_ERR_INVALID_ARG);
    expect_error(ctx, x, &(fc_rope_opts){.n_dims = 10}, FC_ERR_INVALID_ARG);
    expect_error(ctx, x, &(fc_rope_opts){.n_dims = -2}, FC_ERR_INVALID_ARG);
    expect_error(ctx, x, &(fc_rope_opts){.mode = (fc_rope_mode)7}, FC_ERR_INVALID_ARG);
    expect_error(ctx, x, &(fc_rope_opts){.freq_base = -1}, FC_ERR_INVALID_ARG);
    expect_error(ctx, x, &(fc_rope_opts){.freq_base = INFINITY}, FC_ERR_INVALID_ARG);
    expect_error(ctx, x, &(fc_rope_opts){.freq_scale = NAN}, FC_ERR_INVALID_ARG);
    expect_error(ctx, x, &(fc_rope_opts){.pos_offset = -1}, FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(ctx);
    assert_null(fc_rope(ctx, NULL, NULL));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_NULL_ARG);
    fc_ctx_clear_error(ctx);
    fc_tensor *y = fc_rope(ctx, xo, &(fc_rope_opts){.n_dims = 6}); /* partial of an odd D */
    assert_non_null(y);
    fc_release(y);
    fc_release(x);
    fc_release(x2);
    fc_release(xo);
    fc_release(xi);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_closed_form),       cmocka_unit_test(test_rope_hand_values),
        cmocka_unit_test(test_rope_gradcheck),         cmocka_unit_test(test_rope_half_grad),
        cmocka_unit_test(test_rope_threads_same_bits), cmocka_unit_test(test_rope_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
