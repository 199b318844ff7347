/* SPDX-License-Identifier: MIT */
/* test_oom_pointwise.c - out-of-memory sweep over the pointwise families:
 * binary, scalar and in-place arithmetic, the unary family, comparisons,
 * where and masked_fill, each forward with autograd recording and a
 * backward through all of them (see oom_sweep.h for what is checked at
 * every N: the fault is reported as FC_ERR_OOM, nothing leaks, and the
 * context still works). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "oom_sweep.h"

static fc_status sc_forward(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    const int64_t sh[2] = {3, 40}, row = 40;
    fc_tensor *x = fc_randn(ctx, FC_F32, sh, 2), *r = fc_randn(ctx, FC_F32, &row, 1);
    fc_tensor *h = fc_to(ctx, x, FC_BF16);
    fc_sub(ctx, fc_mul(ctx, x, r), fc_div_scalar(ctx, x, 3));
    fc_pow(ctx, fc_abs(ctx, x), fc_maximum(ctx, r, fc_minimum_scalar(ctx, r, 1)));
    fc_gelu(ctx, fc_silu(ctx, h), true);
    fc_clamp(ctx, fc_softplus(ctx, x), -1, 1);
    fc_tensor *m = fc_logical_and(ctx, fc_gt_scalar(ctx, x, 0), fc_le(ctx, x, r));
    fc_where(ctx, m, x, fc_neg(ctx, x));
    fc_masked_fill(ctx, h, fc_logical_not(ctx, m), -1);
    fc_tensor *z = fc_zeros(ctx, FC_F32, sh, 2);
    if (z) fc_add_(z, r);
    if (z) fc_mul_scalar_(z, 2);
    if (z) fc_add_out(z, x, r);
    fc_status st = fc_ctx_status(ctx);
    fc_scope_end(ctx);
    return st;
}

static fc_status sc_backward(fc_ctx *ctx) {
    const int64_t sh[2] = {4, 9}, row = 9;
    fc_tensor *w = fc_param_randn(ctx, FC_F32, sh, 2, 1);
    fc_tensor *b = fc_param_randn(ctx, FC_BF16, &row, 1, 1);
    fc_status st = fc_ctx_status(ctx);
    fc_scope_begin(ctx);
    if (st == FC_OK) {
        fc_tensor *bw = fc_to(ctx, b, FC_F32);
        fc_tensor *y = fc_sigmoid(ctx, fc_add(ctx, fc_mul(ctx, w, w), bw));
        y = fc_div(ctx, fc_maximum(ctx, y, fc_tanh(ctx, w)), fc_add_scalar(ctx, fc_exp(ctx, w), 1));
        y = fc_where(ctx, fc_gt_scalar(ctx, w, 0), y, fc_pow_scalar(ctx, fc_relu(ctx, w), 2));
        y = fc_masked_fill(ctx, y, fc_lt_scalar(ctx, bw, -1), 0);
        fc_tensor *g = fc_ones(ctx, FC_F32, sh, 2);
        st = y && g ? fc_backward_with(ctx, y, g, false) : fc_ctx_status(ctx);
    }
    fc_scope_end(ctx);
    fc_release(w);
    fc_release(b);
    return st == FC_OK ? fc_ctx_status(ctx) : st;
}

static const oom_scenario scenarios[] = {
    {"pointwise forward", sc_forward},
    {"pointwise backward", sc_backward},
};

static void test_oom_pointwise_scenarios(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        oom_result r = oom_sweep(&scenarios[i]);
        printf("oom sweep: %-20s completed at N=%ld after %ld faulted runs\n", scenarios[i].name,
               r.largest_n, r.failures);
        assert_true(r.largest_n > 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_oom_pointwise_scenarios)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
