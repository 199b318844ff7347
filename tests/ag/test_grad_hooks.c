/* SPDX-License-Identifier: MIT */
/* test_grad_hooks.c - gradient hooks (fc_grad_hook_add): what a hook sees,
 * what a replacement changes, the order hooks run in (a leaf's as soon as
 * its gradient is complete), and every refusal: a wrong replacement or a
 * failing hook aborts the backward with the leaves' gradients unchanged
 * and the graph walkable again. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fct_f64.h"
#include "fucina.h"

static fc_ctx *new_ctx(void) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 5});
    assert_non_null(ctx);
    return ctx;
}

static void expect_err(fc_ctx *ctx, fc_status got, fc_status want, const char *a, const char *b) {
    assert_int_equal(got, want);
    assert_int_equal(fc_ctx_status(ctx), want);
    const char *m = fc_ctx_error(ctx);
    if (!strstr(m, a) || (b && !strstr(m, b)))
        fail_msg("error \"%s\" lacks \"%s\" or \"%s\"", m, a, b ? b : "");
    fc_ctx_clear_error(ctx);
}

static double at(const fc_tensor *t, int i) {
    return fc_tensor_dtype(t) == FC_F64 ? ((const double *)fc_tensor_data(t))[i]
                                        : ((const float *)fc_tensor_data(t))[i];
}

/* ---- hooks used by the tests ---------------------------------------------------------- */

typedef struct rec {
    char log[16][24]; /* who ran, in order */
    int n;
    double first[16]; /* element 0 of the gradient each saw */
    double scale;     /* the replacement: grad * scale (0: keep) */
    fc_status fail;   /* returned instead of FC_OK */
    const char *name;
} rec;

static fc_status hook_rec(fc_ctx *ctx, fc_tensor *grad, fc_tensor **replace, void *user) {
    rec *r = user;
    (void)ctx;
    snprintf(r->log[r->n], sizeof r->log[0], "%s", r->name ? r->name : "?");
    r->first[r->n++] = at(grad, 0);
    if (r->fail != FC_OK) return r->fail;
    if (r->scale != 0) *replace = fc_mul_scalar(ctx, grad, r->scale);
    return FC_OK;
}

/* One log shared by hooks on several tensors: each entry points at it. */
typedef struct tag {
    rec *log;
    const char *name;
} tag;

static fc_status hook_tag(fc_ctx *ctx, fc_tensor *grad, fc_tensor **replace, void *user) {
    (void)ctx;
    (void)replace;
    tag *t = user;
    snprintf(t->log->log[t->log->n], sizeof t->log->log[0], "%s", t->name);
    t->log->first[t->log->n++] = at(grad, 0);
    return FC_OK;
}

/* A leaf's hook sees the gradient of this backward only (not what fc_grad
 * accumulated before), and its replacement is what accumulates. */
static void test_grad_hooks_leaf_replace(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *x = fc_param_from_data(ctx, FC_F32, (const int64_t[]){3}, 1, (float[]){1, 2, 3});
    rec r = {.scale = 10, .name = "x"};
    int64_t id = 0;
    assert_int_equal(fc_grad_hook_add(x, hook_rec, &r, &id), FC_OK);
    assert_true(id > 0);
    for (int pass = 0; pass < 2; pass++) {
        fc_scope_begin(ctx);
        /* x used twice: the hook sees the sum 2x + 1 once, not each term */
        fc_tensor *l = fc_sum(ctx, fc_add(ctx, fc_mul(ctx, x, x), x), NULL, 0, false);
        assert_int_equal(fc_backward(ctx, l), FC_OK);
        fc_scope_end(ctx);
        assert_int_equal(r.n, pass + 1);
        assert_true(r.first[pass] == 3.0); /* 2 * 1 + 1 */
    }
    for (int i = 0; i < 3; i++) assert_true(at(fc_grad(x), i) == 2 * 10 * (2.0 * (i + 1) + 1));
    /* removed, it no longer runs */
    assert_int_equal(fc_grad_hook_remove(x, id), FC_OK);
    fc_zero_grad(&x, 1);
    fc_scope_begin(ctx);
    assert_int_equal(fc_backward(ctx, fc_sum(ctx, x, NULL, 0, false)), FC_OK);
    fc_scope_end(ctx);
    assert_int_equal(r.n, 2);
    assert_true(at(fc_grad(x), 0) == 1);
    fc_release(x);
    free_ctx(ctx);
}

/* A non-leaf's hook sees its output's complete gradient before the rule
 * uses it; the replacement flows on. Works in f64 (f64 gradients), and the
 * hook survives the release of the tensor's handle (it lives on the node). */
static void test_grad_hooks_intermediate_f64(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *x = fc_param_from_data(ctx, FC_F64, (const int64_t[]){2}, 1, (double[]){1.5, -2});
    fc_scope_begin(ctx);
    fc_tensor *y = fc_mul(ctx, x, x); /* y = x^2, used twice below */
    rec r = {.scale = 0.5, .name = "y"};
    assert_int_equal(fc_grad_hook_add(y, hook_rec, &r, NULL), FC_OK);
    fc_tensor *l = fc_sum(ctx, fc_add(ctx, fc_mul_scalar(ctx, y, 3), fc_mul_scalar(ctx, y, 4)), NULL,
                          0, false);
    fc_keep(l);
    fc_scope_end(ctx); /* y's handle is gone; its node lives in l's graph */
    assert_int_equal(fc_backward(ctx, l), FC_OK);
    assert_int_equal(r.n, 1);
    assert_true(r.first[0] == 7.0); /* both uses summed: 3 + 4 */
    assert_int_equal(fc_tensor_dtype(fc_grad(x)), FC_F64);
    assert_true(at(fc_grad(x), 0) == 7 * 0.5 * 2 * 1.5);
    assert_true(at(fc_grad(x), 1) == 7 * 0.5 * 2 * -2.0);
    fc_release(l);
    fc_release(x);
    free_ctx(ctx);
}

/* loss = sum(tanh(x @ w1) @ w2): the walk runs the second matmul first, so
 * w2 is complete (its hook runs) before h's hook, then w1's; two hooks on
 * one tensor run in registration order, the second seeing the first's
 * replacement. */
static void test_grad_hooks_order(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *x = fc_ones(ctx, FC_F32, (const int64_t[]){2, 3}, 2);
    fc_tensor *w1 = fc_param_randn(ctx, FC_F32, (const int64_t[]){3, 4}, 2, 0.5);
    fc_tensor *w2 = fc_param_randn(ctx, FC_F32, (const int64_t[]){4, 1}, 2, 0.5);
    rec log = {0};
    tag tw1 = {&log, "w1"}, tw2 = {&log, "w2"}, th = {&log, "h"}, th2 = {&log, "h-second"};
    rec dbl = {.scale = 2, .name = "h-double"};
    fc_scope_begin(ctx);
    fc_tensor *h = fc_tanh(ctx, fc_matmul(ctx, x, w1));
    assert_int_equal(fc_grad_hook_add(w1, hook_tag, &tw1, NULL), FC_OK);
    assert_int_equal(fc_grad_hook_add(w2, hook_tag, &tw2, NULL), FC_OK);
    assert_int_equal(fc_grad_hook_add(h, hook_tag, &th, NULL), FC_OK);
    assert_int_equal(fc_grad_hook_add(h, hook_rec, &dbl, NULL), FC_OK);
    assert_int_equal(fc_grad_hook_add(h, hook_tag, &th2, NULL), FC_OK);
    fc_tensor *l = fc_sum(ctx, fc_matmul(ctx, h, w2), NULL, 0, false);
    assert_int_equal(fc_backward(ctx, l), FC_OK);
    assert_int_equal(log.n, 4);
    assert_string_equal(log.log[0], "w2");
    assert_string_equal(log.log[1], "h");
    assert_string_equal(log.log[2], "h-second");
    assert_string_equal(log.log[3], "w1");
    /* the hook after the doubling sees the doubled gradient (dl/dh = w2^T) */
    assert_true(log.first[1] == at(w2, 0));
    assert_true(log.first[2] == 2 * at(w2, 0));
    fc_scope_end(ctx);
    fc_release(x);
    fc_release(w1);
    fc_release(w2);
    free_ctx(ctx);
}

static fc_status hook_bad_shape(fc_ctx *ctx, fc_tensor *grad, fc_tensor **replace, void *user) {
    (void)grad;
    (void)user;
    *replace = fc_zeros(ctx, FC_F32, (const int64_t[]){5}, 1);
    return FC_OK;
}
static fc_status hook_bad_dtype(fc_ctx *ctx, fc_tensor *grad, fc_tensor **replace, void *user) {
    (void)user;
    *replace = fc_to(ctx, grad, FC_F64);
    return FC_OK;
}
static fc_status hook_nan(fc_ctx *ctx, fc_tensor *grad, fc_tensor **replace, void *user) {
    (void)user;
    *replace = fc_mul_scalar(ctx, grad, NAN);
    return FC_OK;
}
static fc_status hook_other_ctx(fc_ctx *ctx, fc_tensor *grad, fc_tensor **replace, void *user) {
    (void)ctx;
    (void)grad;
    *replace = user;
    return FC_OK;
}
static fc_status hook_reenter(fc_ctx *ctx, fc_tensor *grad, fc_tensor **replace, void *user) {
    (void)replace;
    fc_tensor *t = user;
    fc_status st = fc_backward(ctx, fc_sum(ctx, grad, NULL, 0, false));
    if (st != FC_ERR_STATE) return FC_ERR_INVALID_ARG;
    fc_ctx_clear_error(ctx);
    if (fc_grad_hook_add(t, hook_reenter, NULL, NULL) != FC_ERR_STATE) return FC_ERR_INVALID_ARG;
    if (fc_grad_hook_remove(t, 1) != FC_ERR_STATE) return FC_ERR_INVALID_ARG;
    fc_ctx_clear_error(ctx);
    return FC_OK;
}

/* Each bad hook fails the backward with its own code and a message naming
 * the hook and the tensor; p's earlier gradient and q's absence survive,
 * and after the hook is removed the same graph runs. */
static void test_grad_hooks_errors_abort_cleanly(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_ctx *other = new_ctx();
    fc_tensor *foreign = fc_zeros(other, FC_F32, (const int64_t[]){3}, 1);
    fc_tensor *p = fc_param_from_data(ctx, FC_F32, (const int64_t[]){3}, 1, (float[]){1, 2, 3});
    fc_tensor *q = fc_param_from_data(ctx, FC_F32, (const int64_t[]){3}, 1, (float[]){4, 5, 6});
    fc_scope_begin(ctx);
    assert_int_equal(fc_backward(ctx, fc_sum(ctx, p, NULL, 0, false)), FC_OK);
    fc_tensor *loss = fc_sum(ctx, fc_mul(ctx, p, q), NULL, 0, false);
    rec fail = {.fail = FC_ERR_INVALID_ARG, .name = "f"};
    struct {
        fc_grad_hook_fn fn;
        void *user;
        fc_status want;
        const char *a, *b;
        bool check_finite;
    } cases[] = {
        {hook_bad_shape, NULL, FC_ERR_SHAPE_MISMATCH, "hook 0 on the leaf f32[3]", "[5]", false},
        {hook_bad_dtype, NULL, FC_ERR_DTYPE, "the leaf f32[3]", "f64", false},
        {hook_rec, &fail, FC_ERR_INVALID_ARG, "gradient hook 0 on the leaf f32[3] failed", NULL,
         false},
        {hook_other_ctx, foreign, FC_ERR_CONTEXT, "another context", NULL, false},
        {hook_nan, NULL, FC_ERR_NON_FINITE, "non-finite", "the leaf f32[3]", true},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t id;
        fc_ctx_set_check_finite(ctx, cases[c].check_finite);
        assert_int_equal(fc_grad_hook_add(q, cases[c].fn, cases[c].user, &id), FC_OK);
        expect_err(ctx, fc_backward(ctx, loss), cases[c].want, cases[c].a, cases[c].b);
        for (int i = 0; i < 3; i++) assert_true(at(fc_grad(p), i) == 1);
        assert_null(fc_grad(q));
        assert_int_equal(fc_grad_hook_remove(q, id), FC_OK);
    }
    fc_ctx_set_check_finite(ctx, false);
    /* a hook may not start a backward nor change hooks */
    assert_int_equal(fc_grad_hook_add(q, hook_reenter, q, NULL), FC_OK);
    assert_int_equal(fc_backward(ctx, loss), FC_OK); /* the graph was kept by every failure */
    for (int i = 0; i < 3; i++) {
        assert_true(at(fc_grad(p), i) == 1 + at(q, i));
        assert_true(at(fc_grad(q), i) == at(p, i));
    }
    fc_scope_end(ctx);
    fc_release(p);
    fc_release(q);
    fc_release(foreign);
    free_ctx(ctx);
    free_ctx(other);
}

static void test_grad_hooks_bad_args(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *p = fc_param_zeros(ctx, FC_F32, (const int64_t[]){2}, 1);
    fc_tensor *c = fc_zeros(ctx, FC_F32, (const int64_t[]){2}, 1);
    assert_int_equal(fc_grad_hook_add(NULL, hook_bad_shape, NULL, NULL), FC_ERR_NULL_ARG);
    assert_int_equal(fc_grad_hook_remove(NULL, 1), FC_ERR_NULL_ARG);
    expect_err(ctx, fc_grad_hook_add(p, NULL, NULL, NULL), FC_ERR_NULL_ARG, "fc_grad_hook_add",
               "fn is NULL");
    expect_err(ctx, fc_grad_hook_add(c, hook_bad_shape, NULL, NULL), FC_ERR_NO_GRAD,
               "fc_grad_hook_add", "f32[2] does not require grad");
    expect_err(ctx, fc_grad_hook_remove(p, 42), FC_ERR_INDEX, "fc_grad_hook_remove", "no hook 42");
    int64_t a, b;
    assert_int_equal(fc_grad_hook_add(p, hook_bad_shape, NULL, &a), FC_OK);
    assert_int_equal(fc_grad_hook_add(p, hook_bad_shape, NULL, &b), FC_OK);
    assert_true(a != b);
    assert_int_equal(fc_grad_hook_remove(p, a), FC_OK);
    expect_err(ctx, fc_grad_hook_remove(p, a), FC_ERR_INDEX, "fc_grad_hook_remove", NULL);
    fc_release(p); /* frees the remaining hook with the leaf */
    fc_release(c);
    free_ctx(ctx);
}

/* A leaf that is itself the output: its hook runs on grad_out. */
static void test_grad_hooks_leaf_output(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *p = fc_param_zeros(ctx, FC_F32, (const int64_t[]){2}, 1);
    rec r = {.scale = 3, .name = "p"};
    assert_int_equal(fc_grad_hook_add(p, hook_rec, &r, NULL), FC_OK);
    fc_tensor *g = fc_tensor_from_data(ctx, FC_F32, (const int64_t[]){2}, 1, (float[]){1, 2});
    assert_int_equal(fc_backward_with(ctx, p, g, false), FC_OK);
    assert_int_equal(r.n, 1);
    assert_true(at(fc_grad(p), 1) == 6);
    /* the caller's gradient is never adopted as fc_grad, so accumulating
     * a second backward leaves it untouched */
    assert_int_equal(fc_backward_with(ctx, p, g, false), FC_OK);
    assert_int_equal(r.n, 2);
    assert_true(at(fc_grad(p), 1) == 12);
    assert_true(at(g, 1) == 2);
    /* the same without a hook (no replacement copies the gradient) */
    fc_tensor *p2 = fc_param_zeros(ctx, FC_F32, (const int64_t[]){2}, 1);
    for (int k = 0; k < 2; k++) assert_int_equal(fc_backward_with(ctx, p2, g, false), FC_OK);
    assert_true(fc_grad(p2) != g);
    assert_true(at(fc_grad(p2), 1) == 4);
    assert_true(at(g, 1) == 2);
    fc_release(p2);
    fc_release(g);
    fc_release(p);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_hooks_leaf_replace),
        cmocka_unit_test(test_grad_hooks_intermediate_f64),
        cmocka_unit_test(test_grad_hooks_order),
        cmocka_unit_test(test_grad_hooks_errors_abort_cleanly),
        cmocka_unit_test(test_grad_hooks_bad_args),
        cmocka_unit_test(test_grad_hooks_leaf_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
