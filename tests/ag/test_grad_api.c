/* SPDX-License-Identifier: MIT */
/* test_grad_api.c - fc_autograd_grad (torch.autograd.grad): gradients with
 * respect to leaves and non-leaves as new tensors, fc_grad untouched;
 * f64 results against central differences; unused inputs, retain_graph,
 * hooks, and every refusal with its code and a message naming the
 * argument. */
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
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 9});
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

static const double *d64(const fc_tensor *t) { return fc_tensor_data(t); }

/* l = sum(tanh(x @ w) * c): the gradient wrt x and w, f64, against
 * central differences; fc_grad of both stays as it was (absent for x, an
 * earlier value for w); the same call gives fc_backward's bits. */
#define R 2
#define K 3
#define C 2
static fc_tensor *f_loss(fc_ctx *ctx, fc_tensor *x, fc_tensor *w) {
    fc_tensor *c = fc_full(ctx, FC_F64, (const int64_t[]){R, C}, 2, 0.75);
    return fc_sum(ctx, fc_mul(ctx, fc_tanh(ctx, fc_matmul(ctx, x, w)), c), NULL, 0, false);
}

static double loss_at(fc_ctx *ctx, fc_tensor *x, fc_tensor *w) {
    fc_scope_begin(ctx);
    fc_no_grad_begin(ctx);
    double v = *d64(f_loss(ctx, x, w));
    fc_no_grad_end(ctx);
    fc_scope_end(ctx);
    return v;
}

static void test_grad_api_leaves_f64_vs_finite_differences(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *x = fc_param_randn(ctx, FC_F64, (const int64_t[]){R, K}, 2, 1.0);
    fc_tensor *w = fc_param_randn(ctx, FC_F64, (const int64_t[]){K, C}, 2, 1.0);
    fc_scope_begin(ctx);
    assert_int_equal(fc_backward(ctx, fc_sum(ctx, w, NULL, 0, false)), FC_OK); /* fc_grad(w) = 1 */
    fc_tensor *l = f_loss(ctx, x, w);
    fc_tensor *in[2] = {x, w}, *g[2];
    assert_int_equal(fc_autograd_grad(ctx, &l, NULL, 1, in, 2, NULL, g), FC_OK);
    fc_scope_end(ctx);
    assert_null(fc_grad(x));
    for (int i = 0; i < K * C; i++) assert_true(d64(fc_grad(w))[i] == 1.0);
    double worst = 0;
    for (int t = 0; t < 2; t++) {
        assert_int_equal(fc_tensor_dtype(g[t]), FC_F64);
        double *v = fc_tensor_data_mut(in[t]);
        for (int64_t i = 0; i < fc_tensor_numel(in[t]); i++) {
            double v0 = v[i], e = 1e-6;
            v[i] = v0 + e;
            double lp = loss_at(ctx, x, w);
            v[i] = v0 - e;
            double lm = loss_at(ctx, x, w);
            v[i] = v0;
            double fd = (lp - lm) / (2 * e), err = fabs(fd - d64(g[t])[i]);
            if (err > worst) worst = err;
        }
    }
    assert_true(worst < 1e-8);
    /* fc_backward on the same function gives the same bits */
    fc_zero_grad(in, 2);
    fc_scope_begin(ctx);
    assert_int_equal(fc_backward(ctx, f_loss(ctx, x, w)), FC_OK);
    fc_scope_end(ctx);
    for (int t = 0; t < 2; t++)
        assert_memory_equal(fc_tensor_data(fc_grad(in[t])), fc_tensor_data(g[t]),
                            fc_tensor_nbytes(g[t]));
    fc_release(g[0]);
    fc_release(g[1]);
    fc_release(x);
    fc_release(w);
    free_ctx(ctx);
}

/* Non-leaf inputs get the whole gradient flowing into them; two outputs
 * with their grad_outputs sum; an input listed twice gets one tensor twice;
 * rules below the requested non-leaf do not run (x gets no gradient). */
static void test_grad_api_intermediate_and_outputs(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *x = fc_param_from_data(ctx, FC_F32, (const int64_t[]){3}, 1, (float[]){1, 2, 3});
    fc_scope_begin(ctx);
    fc_tensor *h = fc_mul(ctx, x, x);
    fc_tensor *y1 = fc_mul_scalar(ctx, h, 2), *y2 = fc_sum(ctx, fc_mul_scalar(ctx, h, 5), NULL, 0,
                                                           false);
    fc_tensor *go = fc_tensor_from_data(ctx, FC_F32, (const int64_t[]){3}, 1, (float[]){1, 10, 100});
    fc_tensor *outs[2] = {y1, y2}, *gos[2] = {go, NULL};
    fc_tensor *in[3] = {h, y1, h}, *g[3];
    assert_int_equal(fc_autograd_grad(ctx, outs, gos, 2, in, 3, NULL, g), FC_OK);
    const float *gh = fc_tensor_data(g[0]), *gy = fc_tensor_data(g[1]);
    const float want_h[3] = {2 + 5, 20 + 5, 200 + 5}, want_y[3] = {1, 10, 100};
    for (int i = 0; i < 3; i++) {
        assert_true(gh[i] == want_h[i]);
        assert_true(gy[i] == want_y[i]);
    }
    assert_ptr_equal(g[0], g[2]);
    assert_ptr_not_equal(g[1], go); /* a new tensor, not the caller's grad_output */
    assert_null(fc_grad(x));
    /* an output that is itself the input: its gradient is grad_output */
    fc_tensor *gx;
    assert_int_equal(fc_autograd_grad(ctx, &x, &go, 1, &x, 1, NULL, &gx), FC_OK);
    assert_ptr_not_equal(gx, go);
    assert_true(((const float *)fc_tensor_data(gx))[2] == 100);
    fc_scope_end(ctx);
    for (int j = 0; j < 3; j++) fc_release(g[j]);
    fc_release(gx);
    fc_release(x);
    free_ctx(ctx);
}

/* An unreached input is refused naming it, before any rule ran (the graph
 * stays walkable without retain_graph); allow_unused gives NULL for it.
 * Without retain_graph a second walk meets FC_ERR_STATE; with it, works. */
static void test_grad_api_unused_and_retain(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *a = fc_param_zeros(ctx, FC_F32, (const int64_t[]){2}, 1);
    fc_tensor *b = fc_param_zeros(ctx, FC_F32, (const int64_t[]){4}, 1);
    fc_scope_begin(ctx);
    fc_tensor *other = fc_exp(ctx, b); /* a non-leaf that l does not use */
    fc_tensor *l = fc_sum(ctx, fc_exp(ctx, a), NULL, 0, false);
    fc_tensor *in[3] = {a, b, other}, *g[3] = {a, a, a};
    expect_err(ctx, fc_autograd_grad(ctx, &l, NULL, 1, in, 3, NULL, g), FC_ERR_INVALID_ARG,
               "fc_autograd_grad: input 1 (f32[4]) is not reached", "allow_unused");
    assert_null(g[0]);
    in[1] = other;
    expect_err(ctx, fc_autograd_grad(ctx, &l, NULL, 1, in, 2, NULL, g), FC_ERR_INVALID_ARG,
               "input 1", NULL);
    in[1] = b;
    fc_autograd_grad_opts o = {.allow_unused = true, .retain_graph = true};
    assert_int_equal(fc_autograd_grad(ctx, &l, NULL, 1, in, 3, &o, g), FC_OK);
    assert_non_null(g[0]);
    assert_null(g[1]);
    assert_null(g[2]);
    assert_true(((const float *)fc_tensor_data(g[0]))[0] == 1);
    fc_release(g[0]);
    o.retain_graph = false;
    assert_int_equal(fc_autograd_grad(ctx, &l, NULL, 1, in, 1, &o, g), FC_OK);
    fc_release(g[0]);
    expect_err(ctx, fc_autograd_grad(ctx, &l, NULL, 1, in, 1, &o, g), FC_ERR_STATE, "freed", NULL);
    assert_null(g[0]);
    assert_null(fc_grad(a));
    fc_scope_end(ctx);
    fc_release(a);
    fc_release(b);
    free_ctx(ctx);
}

static fc_status hook_triple(fc_ctx *ctx, fc_tensor *grad, fc_tensor **replace, void *user) {
    ++*(int *)user;
    *replace = fc_mul_scalar(ctx, grad, 3);
    return FC_OK;
}
static fc_status hook_fail(fc_ctx *ctx, fc_tensor *grad, fc_tensor **replace, void *user) {
    (void)ctx;
    (void)grad;
    (void)replace;
    (void)user;
    return FC_ERR_INVALID_ARG;
}

/* Hooks in the functional walk: an input leaf's hook shapes the result, a
 * non-input leaf's does not run, a non-leaf's on the way does. A failing
 * hook fails the call with every slot NULL. */
static void test_grad_api_hooks(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *p = fc_param_from_data(ctx, FC_F64, (const int64_t[]){2}, 1, (double[]){1, 2});
    fc_tensor *q = fc_param_from_data(ctx, FC_F64, (const int64_t[]){2}, 1, (double[]){3, 4});
    int np = 0, nq = 0, nh = 0;
    assert_int_equal(fc_grad_hook_add(p, hook_triple, &np, NULL), FC_OK);
    assert_int_equal(fc_grad_hook_add(q, hook_triple, &nq, NULL), FC_OK);
    fc_scope_begin(ctx);
    fc_tensor *h = fc_mul(ctx, p, q);
    assert_int_equal(fc_grad_hook_add(h, hook_triple, &nh, NULL), FC_OK);
    fc_tensor *l = fc_sum(ctx, h, NULL, 0, false), *g;
    fc_autograd_grad_opts o = {.retain_graph = true};
    assert_int_equal(fc_autograd_grad(ctx, &l, NULL, 1, &p, 1, &o, &g), FC_OK);
    assert_int_equal(np, 1);
    assert_int_equal(nq, 0);
    assert_int_equal(nh, 1);
    assert_true(d64(g)[1] == 3 * 3 * 4.0); /* h's hook, then p's */
    fc_release(g);
    int64_t id;
    assert_int_equal(fc_grad_hook_add(h, hook_fail, NULL, &id), FC_OK);
    g = p;
    expect_err(ctx, fc_autograd_grad(ctx, &l, NULL, 1, &p, 1, &o, &g), FC_ERR_INVALID_ARG,
               "gradient hook 1 on the output of mul", "failed");
    assert_null(g);
    assert_null(fc_grad(p));
    fc_scope_end(ctx);
    fc_release(p);
    fc_release(q);
    free_ctx(ctx);
}

static void test_grad_api_bad_args(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(), *other = new_ctx();
    fc_tensor *p = fc_param_zeros(ctx, FC_F32, (const int64_t[]){3}, 1);
    fc_tensor *c = fc_zeros(ctx, FC_F32, (const int64_t[]){3}, 1);
    fc_tensor *po = fc_param_zeros(other, FC_F32, (const int64_t[]){1}, 1);
    fc_scope_begin(ctx);
    fc_tensor *v = fc_mul(ctx, p, p), *l = fc_sum(ctx, v, NULL, 0, false);
    fc_tensor *g = NULL, *null_t = NULL;
    fc_tensor *i32 = fc_zeros(ctx, FC_I32, (const int64_t[]){3}, 1);
    fc_tensor *g2 = fc_zeros(ctx, FC_F32, (const int64_t[]){2}, 1);
    assert_int_equal(fc_autograd_grad(NULL, &l, NULL, 1, &p, 1, NULL, &g), FC_ERR_NULL_ARG);
    expect_err(ctx, fc_autograd_grad(ctx, NULL, NULL, 1, &p, 1, NULL, &g), FC_ERR_NULL_ARG,
               "fc_autograd_grad: outputs is NULL", NULL);
    expect_err(ctx, fc_autograd_grad(ctx, &l, NULL, 1, &p, 1, NULL, NULL), FC_ERR_NULL_ARG,
               "grads is NULL", NULL);
    expect_err(ctx, fc_autograd_grad(ctx, &l, NULL, 0, &p, 1, NULL, &g), FC_ERR_INVALID_ARG,
               "n_out 0", NULL);
    expect_err(ctx, fc_autograd_grad(ctx, &null_t, NULL, 1, &p, 1, NULL, &g), FC_ERR_NULL_ARG,
               "output 0 is NULL", NULL);
    expect_err(ctx, fc_autograd_grad(ctx, &l, NULL, 1, &null_t, 1, NULL, &g), FC_ERR_NULL_ARG,
               "input 0 is NULL", NULL);
    expect_err(ctx, fc_autograd_grad(ctx, &c, NULL, 1, &p, 1, NULL, &g), FC_ERR_NO_GRAD,
               "output 0 (f32[3]) does not require grad", NULL);
    expect_err(ctx, fc_autograd_grad(ctx, &l, NULL, 1, &c, 1, NULL, &g), FC_ERR_NO_GRAD,
               "input 0 (f32[3]) does not require grad", NULL);
    expect_err(ctx, fc_autograd_grad(ctx, &v, NULL, 1, &p, 1, NULL, &g), FC_ERR_INVALID_SHAPE,
               "output 0 (f32[3]) has 3 elements", NULL);
    expect_err(ctx, fc_autograd_grad(ctx, &v, &g2, 1, &p, 1, NULL, &g), FC_ERR_SHAPE_MISMATCH,
               "grad_output 0 f32[2] does not match output 0 f32[3]", NULL);
    expect_err(ctx, fc_autograd_grad(ctx, &v, &i32, 1, &p, 1, NULL, &g), FC_ERR_DTYPE,
               "grad_output 0 dtype i32", NULL);
    expect_err(ctx, fc_autograd_grad(ctx, &po, NULL, 1, &p, 1, NULL, &g), FC_ERR_CONTEXT,
               "output 0 belongs to another context", NULL);
    expect_err(ctx, fc_autograd_grad(ctx, &l, NULL, 1, &po, 1, NULL, &g), FC_ERR_CONTEXT,
               "input 0 belongs to another context", NULL);
    assert_null(g);
    fc_scope_end(ctx);
    fc_release(p);
    fc_release(c);
    fc_release(po);
    free_ctx(ctx);
    free_ctx(other);
}

/* The gradients are the caller's, not the scope's: they outlive the
 * fc_scope_end of the scope they were made in (an op's result does not),
 * and the caller's fc_release is what frees them, with create_graph the
 * new graph with them. */
static void test_grad_api_gradients_outlive_the_scope(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    double xv[3] = {0.5, -1, 2}, out[3];
    fc_tensor *x = fc_param_from_data(ctx, FC_F64, (const int64_t[]){3}, 1, xv);
    fc_ctx_stats s0, s1, s2;
    fc_ctx_get_stats(ctx, &s0);
    fc_tensor *g[2] = {0};
    for (int cg = 0; cg < 2; cg++) {
        fc_scope_begin(ctx);
        fc_tensor *y = fc_square(ctx, x);
        fc_tensor *l = fc_sum(ctx, y, NULL, 0, false);
        assert_int_equal(fc_autograd_grad(ctx, &l, NULL, 1, &x, 1,
                                          &(fc_autograd_grad_opts){.create_graph = cg == 1}, &g[cg]),
                         FC_OK);
        fc_scope_end(ctx); /* releases y and l, not g */
        assert_int_equal(fc_tensor_copy_out(out, sizeof out, g[cg]), FC_OK);
        for (int i = 0; i < 3; i++) assert_true(out[i] == 2 * xv[i]);
    }
    fc_ctx_get_stats(ctx, &s1);
    assert_int_equal(s1.tensors_live, s0.tensors_live + 2);
    assert_false(fc_tensor_requires_grad(g[0]));
    assert_true(fc_tensor_requires_grad(g[1])); /* it still reaches x through its graph */
    fc_tensor *h = NULL;
    fc_tensor *l2 = fc_sum(ctx, g[1], NULL, 0, false);
    assert_int_equal(fc_autograd_grad(ctx, &l2, NULL, 1, &x, 1, NULL, &h), FC_OK);
    assert_int_equal(fc_tensor_copy_out(out, sizeof out, h), FC_OK);
    for (int i = 0; i < 3; i++) assert_true(out[i] == 2);
    fc_release(l2);
    fc_release(h);
    fc_release(g[0]);
    fc_release(g[1]);
    fc_ctx_get_stats(ctx, &s2);
    assert_int_equal(s2.tensors_live, s0.tensors_live);
    assert_int_equal(fc_ctx_status(ctx), FC_OK); /* no double release anywhere */
    fc_release(x);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_api_gradients_outlive_the_scope),
        cmocka_unit_test(test_grad_api_leaves_f64_vs_finite_differences),
        cmocka_unit_test(test_grad_api_intermediate_and_outputs),
        cmocka_unit_test(test_grad_api_unused_and_retain),
        cmocka_unit_test(test_grad_api_hooks),
        cmocka_unit_test(test_grad_api_bad_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
