/* SPDX-License-Identifier: MIT */
/* test_oom_checkpoint.c - out-of-memory sweeps (oom_sweep.h: every
 * allocation fails in turn) over fc_grad_checkpoint: the forward (the node,
 * its closure, the saved inputs) and the backward (the recompute, the
 * nested walk, the staging of the parameters used inside), with a nested
 * checkpoint and dropout. At every failure the call reports FC_ERR_OOM,
 * leaves no tensor alive and no allocation behind, and a failed backward
 * changes no leaf's gradient: the parameters' gradients from a first,
 * successful backward are still there, bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "oom_sweep.h"

typedef struct params {
    fc_tensor *w1, *w2;
} params;

/* h (2,3) -> dropout(tanh(h @ w2)) */
static fc_tensor *inner_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    const params *p = user;
    fc_scope_begin(ctx);
    fc_tensor *y = fc_keep(fc_dropout(ctx, fc_tanh(ctx, fc_matmul(ctx, in[0], p->w2)), 0.5, true));
    fc_scope_end(ctx);
    return y;
}

/* x (2,3) -> checkpoint(inner)(x @ w1) + x */
static fc_tensor *outer_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    fc_scope_begin(ctx);
    fc_tensor *h = fc_matmul(ctx, in[0], ((params *)user)->w1);
    fc_tensor *y = h ? fc_grad_checkpoint(ctx, inner_fn, user, &h, 1) : NULL;
    y = fc_keep(fc_add(ctx, y, in[0]));
    fc_scope_end(ctx);
    return y;
}

static fc_status loss_backward(fc_ctx *ctx, params *p, fc_tensor *x) {
    fc_scope_begin(ctx);
    fc_tensor *y = fc_grad_checkpoint(ctx, outer_fn, p, &x, 1);
    fc_tensor *l = fc_sum(ctx, fc_mul(ctx, y, y), NULL, 0, false);
    fc_status st = l ? fc_backward(ctx, l) : fc_ctx_status(ctx);
    fc_scope_end(ctx);
    return st;
}

static fc_status sc_checkpoint(fc_ctx *ctx) {
    static const float xs[6] = {0.5f, -1, 2, 0.25f, 1.5f, -0.75f};
    static const float ws[9] = {0.1f, 0.2f, -0.3f, 0.4f, -0.5f, 0.6f, 0.7f, 0.8f, -0.9f};
    params p = {fc_param_from_data(ctx, FC_F32, (const int64_t[]){3, 3}, 2, ws),
                fc_param_from_data(ctx, FC_F32, (const int64_t[]){3, 3}, 2, ws)};
    fc_tensor *x = fc_param_from_data(ctx, FC_F32, (const int64_t[]){2, 3}, 2, xs);
    fc_status st = fc_ctx_status(ctx);
    if (st == FC_OK) st = loss_backward(ctx, &p, x);
    float g1[9] = {0}, g2[9] = {0}, gx[6] = {0};
    if (st == FC_OK) {
        memcpy(g1, fc_tensor_data(fc_grad(p.w1)), sizeof g1);
        memcpy(g2, fc_tensor_data(fc_grad(p.w2)), sizeof g2);
        memcpy(gx, fc_tensor_data(fc_grad(x)), sizeof gx);
        st = loss_backward(ctx, &p, x); /* a second step: failures must keep the first's */
        if (st != FC_OK && (memcmp(g1, fc_tensor_data(fc_grad(p.w1)), sizeof g1) ||
                            memcmp(g2, fc_tensor_data(fc_grad(p.w2)), sizeof g2) ||
                            memcmp(gx, fc_tensor_data(fc_grad(x)), sizeof gx)))
            fail_msg("a failed backward through a checkpoint changed a leaf's gradient");
    }
    fc_release(p.w1);
    fc_release(p.w2);
    fc_release(x);
    return st;
}

static void test_oom_checkpoint_forward_backward(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 3});
    assert_int_equal(sc_checkpoint(ctx), FC_OK); /* the scenario works without faults */
    fc_ctx_free(ctx);
    oom_scenario s = {"fc_grad_checkpoint", sc_checkpoint};
    oom_result r = oom_sweep(&s);
    printf("oom sweep: %-28s completed at N=%ld, %ld failures checked\n", s.name, r.largest_n,
           r.failures);
    assert_true(r.failures > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oom_checkpoint_forward_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
