/* SPDX-License-Identifier: MIT */
/* test_oom_grad_api.c - out-of-memory sweeps (oom_sweep.h: every allocation
 * fails in turn) over the newer autograd entry points: fc_autograd_grad on
 * an f64 graph with leaf and non-leaf inputs, and fc_backward with gradient
 * hooks that replace gradients (hook registration included). At every
 * failure the call reports FC_ERR_OOM, leaves no tensor alive and no
 * allocation behind, and a failed call changes no leaf's gradient. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "oom_sweep.h"

static fc_status hook_half(fc_ctx *ctx, fc_tensor *grad, fc_tensor **replace, void *user) {
    (void)user;
    *replace = fc_mul_scalar(ctx, grad, 0.5);
    return *replace ? FC_OK : fc_ctx_status(ctx);
}

static fc_status make_leaves(fc_ctx *ctx, fc_tensor **p, fc_tensor **q) {
    *p = fc_param_from_data(ctx, FC_F64, (const int64_t[]){2, 3}, 2,
                            (double[]){0.1, -0.2, 0.3, 0.4, -0.5, 0.6});
    *q = fc_param_from_data(ctx, FC_F64, (const int64_t[]){3, 2}, 2,
                            (double[]){1, 2, -1, 0.5, 0.25, -2});
    return fc_ctx_status(ctx);
}

static fc_status sc_functional(fc_ctx *ctx) {
    fc_tensor *p = NULL, *q = NULL, *g[3] = {0};
    fc_status st = make_leaves(ctx, &p, &q);
    fc_scope_begin(ctx);
    fc_tensor *h = st == FC_OK ? fc_tanh(ctx, fc_matmul(ctx, p, q)) : NULL;
    fc_tensor *l = fc_sum(ctx, fc_mul(ctx, h, h), NULL, 0, false);
    if (st == FC_OK && !l) st = fc_ctx_status(ctx);
    if (st == FC_OK) st = fc_grad_hook_add(h, hook_half, NULL, NULL);
    if (st == FC_OK) {
        fc_tensor *in[3] = {p, h, q};
        st = fc_autograd_grad(ctx, &l, NULL, 1, in, 3, NULL, g);
        if (st != FC_OK)
            for (int j = 0; j < 3; j++)
                if (g[j]) fail_msg("a failed fc_autograd_grad left grads[%d] set", j);
        if (fc_grad(p) || fc_grad(q)) fail_msg("fc_autograd_grad changed fc_grad");
    }
    fc_scope_end(ctx);
    for (int j = 0; j < 3; j++) fc_release(g[j]);
    fc_release(p);
    fc_release(q);
    return st;
}

static fc_status sc_backward_hooks(fc_ctx *ctx) {
    fc_tensor *p = NULL, *q = NULL;
    fc_status st = make_leaves(ctx, &p, &q);
    if (st == FC_OK) st = fc_grad_hook_add(p, hook_half, NULL, NULL);
    if (st == FC_OK) st = fc_grad_hook_add(q, hook_half, NULL, NULL);
    fc_scope_begin(ctx);
    fc_tensor *h = st == FC_OK ? fc_matmul(ctx, p, q) : NULL;
    if (h && st == FC_OK) st = fc_grad_hook_add(h, hook_half, NULL, NULL);
    fc_tensor *l = st == FC_OK ? fc_sum(ctx, fc_exp(ctx, h), NULL, 0, false) : NULL;
    if (st == FC_OK && !l) st = fc_ctx_status(ctx);
    if (st == FC_OK) {
        st = fc_backward(ctx, l);
        if (st != FC_OK && (fc_grad(p) || fc_grad(q)))
            fail_msg("a failed backward with hooks changed a leaf's gradient");
    }
    fc_scope_end(ctx);
    fc_release(p);
    fc_release(q);
    return st;
}

static void sweep(const char *name, oom_scenario_fn fn) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 3});
    assert_int_equal(fn(ctx), FC_OK); /* the scenario works without faults */
    fc_ctx_free(ctx);
    oom_scenario s = {name, fn};
    oom_result r = oom_sweep(&s);
    printf("oom sweep: %-28s completed at N=%ld, %ld failures checked\n", name, r.largest_n,
           r.failures);
    assert_true(r.failures > 0);
}

static void test_oom_grad_api_functional(void **state) {
    (void)state;
    sweep("fc_autograd_grad f64", sc_functional);
}

static void test_oom_grad_api_backward_hooks(void **state) {
    (void)state;
    sweep("fc_backward with hooks", sc_backward_hooks);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oom_grad_api_functional),
        cmocka_unit_test(test_oom_grad_api_backward_hooks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
