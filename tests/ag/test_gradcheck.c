/* SPDX-License-Identifier: MIT */
/* test_gradcheck.c - the checkers themselves: fc_gradcheck and
 * fc_gradgradcheck fill their report on every path (argument errors
 * included), refuse non-f64 inputs that require grad with FC_ERR_DTYPE
 * naming the input (in f32 a central difference is rounding noise, so a
 * correct fc_tanh used to be reported as a mismatch), and
 * fc_gradgradcheck's constant_grad_output mode checks the recorded
 * backward under a constant upstream gradient, which its leaf grad_output
 * never exercises. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ag/tape.h"
#include "fct_f64.h"
#include "fucina.h"

static int setup(void **state) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 3});
    *state = ctx;
    return ctx ? 0 : -1;
}

static int teardown(void **state) {
    free_ctx(*state);
    return 0;
}

static fc_tensor *fn_tanh(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n, (void)user;
    return fc_tanh(ctx, in[0]);
}

static fc_tensor *fn_relu(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n, (void)user;
    return fc_relu(ctx, in[0]);
}

/* x (f64, requires grad) times a constant c of any dtype, cast to x's */
static fc_tensor *fn_scaled(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n, (void)user;
    return fc_mul(ctx, fc_tanh(ctx, in[0]), fc_to(ctx, in[1], FC_F64));
}

static fc_tensor *leaf(fc_ctx *ctx, fc_dtype dt, int64_t n, bool rg) {
    double v[16];
    for (int64_t i = 0; i < n; i++)
        v[i] = 0.3 * (double)i - 1.1 + (i % 2 ? 0.05 : 0);
    fc_tensor *t = from_f64(ctx, dt, (int64_t[]){n}, 1, v);
    if (rg) assert_int_equal(fc_requires_grad(t, true), FC_OK);
    return t;
}

/* The report as it reads before anything was compared. */
static void assert_nothing_checked(const fc_gradcheck_report *r) {
    assert_false(r->passed);
    assert_int_equal(r->worst_input, -1);
    assert_int_equal(r->worst_index, -1);
    assert_int_equal(r->checked, 0);
    assert_true(r->analytic == 0 && r->numeric == 0);
    assert_true(isinf(r->worst_excess) && r->worst_excess < 0);
}

typedef fc_status (*checker)(fc_ctx *, fc_gradcheck_fn, void *, fc_tensor *const *, int,
                             const fc_gradcheck_opts *, fc_gradcheck_report *);

/* Every argument error, each with the report full of garbage first (call
 * inside a scope: the tensors made here are its). */
static void arg_errors(fc_ctx *ctx, checker check, const char *name) {
    fc_tensor *x = leaf(ctx, FC_F64, 4, true);
    fc_tensor *x32 = leaf(ctx, FC_F32, 4, true);
    fc_tensor *nul[1] = {NULL};
    /* every other element: a strided view that check_all_f64 marks */
    fc_tensor *strided = fc_slice(ctx, leaf(ctx, FC_F64, 8, false), 0, 0, 8, 2);
    fc_gradcheck_opts all = {.check_all_f64 = true};
    struct {
        fc_ctx *ctx;
        fc_gradcheck_fn fn;
        fc_tensor *const *in;
        int n;
        const fc_gradcheck_opts *o;
        fc_status want;
        const char *says;
    } cases[] = {
        {NULL, fn_tanh, &x, 1, NULL, FC_ERR_NULL_ARG, NULL},
        {ctx, NULL, &x, 1, NULL, FC_ERR_NULL_ARG, "need fn"},
        {ctx, fn_tanh, NULL, 1, NULL, FC_ERR_NULL_ARG, "need fn"},
        {ctx, fn_tanh, &x, 0, NULL, FC_ERR_INVALID_ARG, "need fn"},
        {ctx, fn_tanh, nul, 1, NULL, FC_ERR_NULL_ARG, "input 0 is NULL"},
        {ctx, fn_tanh, &strided, 1, &all, FC_ERR_INVALID_ARG, "input 0 must be a contiguous"},
        {ctx, fn_tanh, &x32, 1, NULL, FC_ERR_DTYPE,
         "input 0 (f32[4]) requires grad but is not f64"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fc_gradcheck_report r;
        memset(&r, 0x5a, sizeof r);
        fc_status st =
            check(cases[i].ctx, cases[i].fn, NULL, cases[i].in, cases[i].n, cases[i].o, &r);
        if (st != cases[i].want)
            fail_msg("%s case %zu: %s, want %s (%s)", name, i, fc_status_name(st),
                     fc_status_name(cases[i].want), fc_ctx_error(ctx));
        assert_nothing_checked(&r);
        if (cases[i].says) {
            assert_non_null(strstr(fc_ctx_error(ctx), name));
            assert_non_null(strstr(fc_ctx_error(ctx), cases[i].says));
        }
        fc_ctx_clear_error(ctx);
    }
    /* every tensor here belongs to the caller's scope */
}

static void test_gradcheck_report_filled_on_argument_errors(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    arg_errors(ctx, fc_gradcheck, "fc_gradcheck");
    arg_errors(ctx, fc_gradgradcheck, "fc_gradgradcheck");
    fc_scope_end(ctx);
}

/* A first call of fn that fails: fn's error, the report as before any
 * comparison. */
static fc_tensor *fn_fails(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n, (void)user;
    return fc_reshape(ctx, in[0], (int64_t[]){3}, 1); /* 4 elements: FC_ERR_INVALID_SHAPE */
}

static void test_gradcheck_report_filled_when_fn_fails(void **state) {
    fc_ctx *ctx = *state;
    fc_tensor *x = leaf(ctx, FC_F64, 4, true);
    checker checks[2] = {fc_gradcheck, fc_gradgradcheck};
    for (int k = 0; k < 2; k++) {
        fc_gradcheck_report r;
        memset(&r, 0x5a, sizeof r);
        fc_status st = checks[k](ctx, fn_fails, NULL, &x, 1, NULL, &r);
        assert_int_not_equal(st, FC_OK);
        assert_int_equal(st, fc_ctx_status(ctx));
        assert_nothing_checked(&r);
        fc_ctx_clear_error(ctx);
    }
    fc_release(x);
}

/* A correct fc_tanh on f32 leaves: refused, not reported as a mismatch
 * (before: FC_ERR_STATE, "gradient mismatch"); on f64 leaves it passes,
 * and f32 inputs that are constants are fine. */
static void test_gradcheck_f32_refused(void **state) {
    fc_ctx *ctx = *state;
    fc_tensor *x32 = leaf(ctx, FC_F32, 6, true);
    fc_gradcheck_report r;
    assert_int_equal(fc_gradcheck(ctx, fn_tanh, NULL, &x32, 1, NULL, &r), FC_ERR_DTYPE);
    assert_non_null(strstr(fc_ctx_error(ctx), "input 0 (f32[6]) requires grad but is not f64"));
    assert_nothing_checked(&r);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_gradgradcheck(ctx, fn_tanh, NULL, &x32, 1, NULL, &r), FC_ERR_DTYPE);
    assert_nothing_checked(&r);
    fc_ctx_clear_error(ctx);
    /* a bf16 one, as the second input */
    fc_tensor *in[2] = {leaf(ctx, FC_F64, 6, true), leaf(ctx, FC_BF16, 6, true)};
    assert_int_equal(fc_gradcheck(ctx, fn_scaled, NULL, in, 2, NULL, &r), FC_ERR_DTYPE);
    assert_non_null(strstr(fc_ctx_error(ctx), "input 1 (bf16[6])"));
    fc_ctx_clear_error(ctx);
    /* the same values in f64 pass; an f32 constant beside them too */
    fc_tensor *x64 = leaf(ctx, FC_F64, 6, true);
    assert_int_equal(fc_gradcheck(ctx, fn_tanh, NULL, &x64, 1, NULL, &r), FC_OK);
    assert_true(r.passed);
    assert_int_equal(r.checked, 6);
    fc_tensor *c32 = leaf(ctx, FC_F32, 6, false);
    fc_tensor *mixed[2] = {in[0], c32};
    assert_int_equal(fc_gradcheck(ctx, fn_scaled, NULL, mixed, 2, NULL, &r), FC_OK);
    assert_int_equal(r.checked, 6);
    assert_int_equal(fc_gradgradcheck(ctx, fn_scaled, NULL, mixed, 2, NULL, &r), FC_OK);
    fc_release(x32);
    fc_release(in[0]);
    fc_release(in[1]);
    fc_release(x64);
    fc_release(c32);
}

/* ---- constant_grad_output --------------------------------------------------------------- */

/* relu under a constant grad_output: its first-order gradient is a
 * constant of the new graph; the mode checks it (only x: w is no leaf). */
static void test_gradgradcheck_constant_grad_output(void **state) {
    fc_ctx *ctx = *state;
    fc_tensor *x = leaf(ctx, FC_F64, 6, true);
    fc_gradcheck_report r;
    fc_gradcheck_opts o = {.constant_grad_output = true, .seed = 4};
    assert_int_equal(fc_gradgradcheck(ctx, fn_relu, NULL, &x, 1, &o, &r), FC_OK);
    assert_true(r.passed);
    assert_int_equal(r.checked, 6); /* x only */
    assert_int_equal(fc_gradgradcheck(ctx, fn_tanh, NULL, &x, 1, &o, &r), FC_OK);
    assert_int_equal(r.checked, 6);
    o.constant_grad_output = false; /* the leaf w: x and w */
    assert_int_equal(fc_gradgradcheck(ctx, fn_tanh, NULL, &x, 1, &o, &r), FC_OK);
    assert_int_equal(r.checked, 12);
    fc_release(x);
}

/* A square whose recorded rule takes a shortcut when the upstream gradient
 * is a constant: it computes g * 2x with ops under no-grad, a constant,
 * although it depends on x. It asked fc__ag_create_graph, so the engine
 * trusts it; the leaf grad_output never takes the shortcut and passes, the
 * constant one finds the missing second derivative. */
static fc_status shortcut_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *x = fc__ag_saved_tensor(ctx, node, 0);
    bool graph = fc__ag_create_graph(ctx);
    bool shortcut = graph && !fc_tensor_requires_grad(gout);
    if (shortcut) fc_no_grad_begin(ctx);
    gin[0] = fc_mul(ctx, gout, fc_mul_scalar(ctx, x, 2.0));
    if (shortcut) fc_no_grad_end(ctx);
    return fc_ctx_status(ctx);
}

static fc_tensor *fn_shortcut(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n, (void)user;
    fc_no_grad_begin(ctx);
    fc_tensor *y = fc_square(ctx, in[0]);
    fc_no_grad_end(ctx);
    fc_node *nd = y ? fc__ag_record(ctx, "shortcut_square", shortcut_backward, y, 1, in) : NULL;
    if (!nd || fc__ag_save(ctx, nd, "input", in[0]) != FC_OK) return NULL;
    return y;
}

static void test_gradgradcheck_constant_grad_output_finds_shortcut(void **state) {
    fc_ctx *ctx = *state;
    fc_tensor *x = leaf(ctx, FC_F64, 5, true);
    fc_gradcheck_report r;
    assert_int_equal(fc_gradgradcheck(ctx, fn_shortcut, NULL, &x, 1, NULL, &r), FC_OK);
    fc_gradcheck_opts o = {.constant_grad_output = true};
    assert_int_equal(fc_gradgradcheck(ctx, fn_shortcut, NULL, &x, 1, &o, &r), FC_ERR_STATE);
    assert_false(r.passed);
    assert_int_equal(r.worst_input, 0);
    assert_true(r.analytic == 0 && fabs(r.numeric) > 0.1); /* 2 u w: the missing term */
    assert_non_null(strstr(fc_ctx_error(ctx), "second-order mismatch at input 0"));
    fc_ctx_clear_error(ctx);
    fc_release(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gradcheck_report_filled_on_argument_errors, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gradcheck_report_filled_when_fn_fails, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gradcheck_f32_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gradgradcheck_constant_grad_output, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gradgradcheck_constant_grad_output_finds_shortcut,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
