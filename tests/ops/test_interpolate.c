/* SPDX-License-Identifier: MIT */
/* test_interpolate.c - fc_interpolate against PyTorch's
 * torch.nn.functional.interpolate (inputs, results and the gradient for a
 * given upstream gradient in tests/data/resample/torch_interpolate.txt,
 * from scripts/gen_resample_ref.py): nearest and (bi)linear, align_corners
 * true and false, by size and by scale factor, 3-d and 4-d, f64 and f32;
 * then fc_gradcheck and fc_gradgradcheck of every case in f64, on
 * contiguous and strided input. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fct_f64.h"
#include "fct_fixture.h"
#include "fct_grad.h"
#include "fucina.h"

/* Keep in step with INTERP in scripts/gen_resample_ref.py. */
typedef struct icase {
    int rank;
    int64_t shape[4];
    fc_interpolate_opts o;
} icase;

#define NEAREST FC_INTERP_NEAREST
#define LINEAR FC_INTERP_LINEAR
static const icase cases[] = {
    {4, {1, 2, 3, 4}, {.mode = NEAREST, .size = {5, 7}}},
    {4, {1, 2, 3, 4}, {.mode = NEAREST, .size = {6, 8}}},
    {4, {1, 2, 5, 7}, {.mode = NEAREST, .size = {3, 2}}},
    {4, {2, 1, 3, 4}, {.mode = NEAREST, .scale = {1.7, 2.3}}},
    {4, {1, 2, 3, 4}, {.mode = LINEAR, .size = {5, 7}}},
    {4, {1, 2, 3, 4}, {.mode = LINEAR, .size = {5, 7}, .align_corners = true}},
    {4, {1, 2, 5, 7}, {.mode = LINEAR, .size = {3, 2}}},
    {4, {1, 2, 5, 7}, {.mode = LINEAR, .size = {3, 1}, .align_corners = true}},
    {4, {2, 1, 3, 4}, {.mode = LINEAR, .scale = {1.7, 2.3}}},
    {4, {2, 1, 3, 4}, {.mode = LINEAR, .scale = {0.7, 1.5}, .align_corners = true}},
    {3, {1, 3, 5}, {.mode = NEAREST, .size = {8}}},
    {3, {1, 3, 5}, {.mode = NEAREST, .scale = {0.6}}},
    {3, {1, 3, 5}, {.mode = LINEAR, .size = {8}}},
    {3, {1, 3, 5}, {.mode = LINEAR, .size = {8}, .align_corners = true}},
    {3, {2, 2, 6}, {.mode = LINEAR, .scale = {1.5}}},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static char *fixture;

static int setup(void **state) {
    (void)state;
    fixture = fct_fixture_load("resample/torch_interpolate.txt");
    return 0;
}
static int teardown(void **state) {
    (void)state;
    free(fixture);
    return 0;
}

#define CAP 1024

static int64_t get(int c, const char *what, double *v) {
    char name[32];
    snprintf(name, sizeof name, "i%d_%s", c, what);
    return fct_fixture_get(fixture, name, v, CAP);
}

/* values of t against want[n] within tol of the largest */
static void check_close(const char *what, int c, fc_tensor *t, const double *want, int64_t n,
                        double tol) {
    assert_non_null(t);
    assert_int_equal(fc_tensor_numel(t), n);
    double *got = values(t), scale = 1;
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(want[i]));
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol * scale))
            fail_msg("case %d %s [%lld]: %.17g, torch %.17g", c, what, (long long)i, got[i],
                     want[i]);
    free(got);
}

static void test_interpolate_matches_torch(void **state) {
    (void)state;
    fc_ctx *ctx = fct_gc_ctx();
    static double in[CAP], want[CAP], shape[8], g[CAP];
    for (int c = 0; c < N_CASES; c++) {
        fc_scope_begin(ctx);
        get(c, "in", in);
        int64_t r = get(c, "shape", shape);
        /* f64 forward and backward */
        fc_tensor *x = fc_param_from_data(ctx, FC_F64, cases[c].shape, cases[c].rank, in);
        fc_tensor *y = fc_interpolate(ctx, x, &cases[c].o);
        if (!y) fail_msg("case %d: %s", c, fc_ctx_error(ctx));
        assert_int_equal(fc_tensor_rank(y), r);
        for (int a = 0; a < r; a++)
            assert_int_equal(fc_tensor_shape(y)[a], (int64_t)shape[a]);
        int64_t n = get(c, "out", want);
        check_close("f64", c, y, want, n, 1e-12);
        get(c, "g", g);
        fc_tensor *gt = fc_tensor_from_data(ctx, FC_F64, fc_tensor_shape(y), (int)r, g);
        assert_int_equal(fc_backward_with(ctx, y, gt, false), FC_OK);
        int64_t nx = get(c, "dx", want);
        check_close("dx", c, fc_grad(x), want, nx, 1e-12);
        /* f32 forward, the float index arithmetic of nearest included */
        fc_tensor *x32 = from_f64(ctx, FC_F32, cases[c].shape, cases[c].rank, in);
        n = get(c, "out32", want);
        check_close("f32", c, fc_interpolate(ctx, x32, &cases[c].o), want, n, 2e-6);
        /* bf16 runs in f32 and rounds once */
        fc_tensor *xb = from_f64(ctx, FC_BF16, cases[c].shape, cases[c].rank, in);
        fc_tensor *yb = fc_interpolate(ctx, xb, &cases[c].o);
        assert_non_null(yb);
        assert_int_equal(fc_tensor_dtype(yb), FC_BF16);
        check_close("bf16", c, yb, want, n, 2e-2);
        fc_scope_end(ctx);
    }
    free_ctx(ctx);
}

/* Upsampling by size equal to the input is the identity; nearest by 2 copies
 * each element into a 2 x 2 block (checked by a plain loop). */
static void test_interpolate_identity_and_blocks(void **state) {
    (void)state;
    fc_ctx *ctx = fct_gc_ctx();
    fc_scope_begin(ctx);
    fc_tensor *x = fct_random_f64(ctx, (const int64_t[]){2, 3, 4, 5}, 4, 8, -1, 1);
    double *xv = values(x);
    for (int m = 0; m < 2; m++)
        for (int ac = 0; ac < 1 + m; ac++) {
            fc_interpolate_opts o = {.mode = m, .size = {4, 5}, .align_corners = ac};
            double *yv = values(fc_interpolate(ctx, x, &o));
            assert_memory_equal(xv, yv, 120 * sizeof(double));
            free(yv);
        }
    fc_interpolate_opts o2 = {.mode = FC_INTERP_NEAREST, .scale = {2, 2}};
    double *yv = values(fc_interpolate(ctx, x, &o2));
    for (int p = 0; p < 6; p++)
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 10; j++)
                assert_true(yv[(p * 8 + i) * 10 + j] == xv[(p * 4 + i / 2) * 5 + j / 2]);
    free(yv);
    free(xv);
    fc_scope_end(ctx);
    free_ctx(ctx);
}

typedef struct gcase {
    int c;
    int view;
} gcase;

static fc_tensor *apply(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    const gcase *g = user;
    fc_tensor *x = fct_viewed(ctx, in[0], g->view);
    fc_tensor *y = fc_interpolate(ctx, x, &cases[g->c].o);
    fc_release(x);
    return y;
}

static fc_tensor *leaf(fc_ctx *ctx, int c, int view) {
    int64_t shape[4];
    memcpy(shape, cases[c].shape, sizeof shape);
    if (view == FCT_V_TRANSPOSE) {
        int64_t t = shape[0];
        shape[0] = shape[1], shape[1] = t;
    } else if (view == FCT_V_NARROW) {
        shape[cases[c].rank - 1] += 2;
    } else if (view == FCT_V_BROADCAST) {
        shape[0] = 1;
    }
    return fct_random_f64(ctx, shape, cases[c].rank, 300 + (uint64_t)c, -1, 1);
}

/* fc_gradcheck in f64 (every f64 input checked); fails naming the case. */
static void gradcheck_ok(fc_ctx *ctx, void *user, fc_tensor *const *in, int n, const char *what,
                         int c) {
    fc_gradcheck_opts o = {.check_all_f64 = true, .seed = 9};
    fc_gradcheck_report rep;
    fc_status st = fc_gradcheck(ctx, apply, user, in, n, &o, &rep);
    if (st != FC_OK) fail_msg("%s (%d): %s", what, c, fc_ctx_error(ctx));
    if (!rep.passed) fail_msg("%s (%d): gradcheck failed", what, c);
    assert_true(rep.checked > 0);
}

static void test_interpolate_gradcheck(void **state) {
    (void)state;
    fc_ctx *ctx = fct_gc_ctx();
    for (int c = 0; c < N_CASES; c++)
        for (int view = FCT_V_CONTIG; view <= FCT_V_NARROW; view++) {
            gcase g = {c, view};
            fc_tensor *x = leaf(ctx, c, view);
            gradcheck_ok(ctx, &g, &x, 1, "interpolate", c * 10 + view);
            fc_release(x);
        }
    free_ctx(ctx);
}

static void test_interpolate_gradgradcheck(void **state) {
    (void)state;
    fc_ctx *ctx = fct_gc_ctx();
    for (int c = 0; c < N_CASES; c++)
        for (int constant = 0; constant < 2; constant++) {
            gcase g = {c, constant ? FCT_V_CONTIG : FCT_V_TRANSPOSE};
            fc_tensor *x = leaf(ctx, c, g.view);
            fc_gradcheck_opts o = {
                .check_all_f64 = true, .seed = 13, .constant_grad_output = constant};
            fc_gradcheck_report rep;
            fc_scope_begin(ctx);
            fc_status st = fc_gradgradcheck(ctx, apply, &g, &x, 1, &o, &rep);
            fc_scope_end(ctx);
            if (st != FC_OK) fail_msg("case %d: %s", c, fc_ctx_error(ctx));
            if (!rep.passed) fail_msg("case %d (constant %d): gradgradcheck failed", c, constant);
            assert_true(rep.checked > 0);
            fc_release(x);
        }
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interpolate_matches_torch),
        cmocka_unit_test(test_interpolate_identity_and_blocks),
        cmocka_unit_test(test_interpolate_gradcheck),
        cmocka_unit_test(test_interpolate_gradgradcheck),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
