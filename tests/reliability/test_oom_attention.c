/* SPDX-License-Identifier: MIT */
/* test_oom_attention.c - out-of-memory sweep over the transformer block's
 * ops: fc_rope, fc_swiglu and the fused fc_attention (f32 with a mask and
 * GQA, bf16 causal), forward with autograd recording and a backward
 * through all of them, including the mask's gradient (see oom_sweep.h for
 * what is checked at every N: the fault is reported as FC_ERR_OOM,
 * nothing leaks, and the context still works). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "oom_sweep.h"

static fc_status sc_forward(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    const int64_t qs[4] = {1, 4, 70, 8}, ks[4] = {1, 2, 70, 8}, ms[2] = {70, 70};
    fc_tensor *q = fc_randn(ctx, FC_F32, qs, 4), *k = fc_randn(ctx, FC_F32, ks, 4);
    fc_tensor *m = fc_randn(ctx, FC_F32, ms, 2);
    fc_tensor *qt = fc_transpose(ctx, q, 1, 2); /* [1, 70, 4, 8] */
    fc_rope(ctx, qt, &(fc_rope_opts){.mode = FC_ROPE_NEOX, .n_dims = 4, .pos_offset = 2});
    fc_swiglu(ctx, q, fc_to(ctx, q, FC_F32));
    fc_attention(ctx, q, k, k, m, &(fc_attention_opts){.causal = true});
    fc_tensor *qh = fc_to(ctx, q, FC_BF16), *kh = fc_to(ctx, k, FC_BF16);
    fc_attention(ctx, qh, kh, kh, NULL, &(fc_attention_opts){.causal = true});
    fc_rope(ctx, fc_transpose(ctx, qh, 1, 2), NULL);
    fc_status st = fc_ctx_status(ctx);
    fc_scope_end(ctx);
    return st;
}

static fc_status sc_backward(fc_ctx *ctx) {
    const int64_t qs[4] = {1, 2, 66, 4}, ks[4] = {1, 1, 66, 4}, ms[2] = {66, 66};
    fc_tensor *q = fc_param_randn(ctx, FC_F32, qs, 4, 1);
    fc_tensor *k = fc_param_randn(ctx, FC_F32, ks, 4, 1);
    fc_tensor *v = fc_param_randn(ctx, FC_BF16, ks, 4, 1);
    fc_tensor *m = fc_param_randn(ctx, FC_F32, ms, 2, 1);
    fc_status st = fc_ctx_status(ctx);
    fc_scope_begin(ctx);
    if (st == FC_OK) {
        fc_tensor *qr = fc_transpose(ctx, fc_rope(ctx, fc_transpose(ctx, q, 1, 2), NULL), 1, 2);
        fc_tensor *kr = fc_transpose(ctx, fc_rope(ctx, fc_transpose(ctx, k, 1, 2), NULL), 1, 2);
        fc_tensor *y = fc_attention(ctx, qr, kr, fc_to(ctx, v, FC_F32), m,
                                    &(fc_attention_opts){.causal = true});
        y = fc_swiglu(ctx, y, y);
        fc_tensor *g = fc_ones(ctx, FC_F32, qs, 4);
        st = y && g ? fc_backward_with(ctx, y, g, false) : fc_ctx_status(ctx);
    }
    fc_scope_end(ctx);
    fc_release(q);
    fc_release(k);
    fc_release(v);
    fc_release(m);
    return st == FC_OK ? fc_ctx_status(ctx) : st;
}

static const oom_scenario scenarios[] = {
    {"attention forward", sc_forward},
    {"attention backward", sc_backward},
};

static void test_oom_attention_scenarios(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        oom_result r = oom_sweep(&scenarios[i]);
        printf("oom sweep: %-20s completed at N=%ld after %ld faulted runs\n", scenarios[i].name,
               r.largest_n, r.failures);
        assert_true(r.largest_n > 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_oom_attention_scenarios)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
