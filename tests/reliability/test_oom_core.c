/* SPDX-License-Identifier: MIT */
/* test_oom_core.c - out-of-memory sweep over tensor creation, casts,
 * quantization through fc_to, views, scopes, backward on leaves and the
 * optimizers (see oom_sweep.h for what is checked at every N). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "counting_alloc.h"
#include "oom_sweep.h"

/* ---- scenarios ------------------------------------------------------------------- */

static fc_status done(fc_ctx *ctx) { return fc_ctx_status(ctx); }

static fc_status sc_creation(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    const int64_t sh[2] = {3, 40};
    float data[120];
    for (int i = 0; i < 120; i++) data[i] = (float)i * 0.25f - 7;
    fc_zeros(ctx, FC_F32, sh, 2);
    fc_ones(ctx, FC_I16, sh, 2);
    fc_full(ctx, FC_BF16, sh, 2, 2.5);
    fc_arange(ctx, FC_I64, 0, 10, 1);
    fc_rand(ctx, FC_F64, sh, 2);
    fc_randn(ctx, FC_F16, sh, 2);
    fc_tensor *x = fc_tensor_from_data(ctx, FC_F32, sh, 2, data);
    fc_tensor_from_borrowed(ctx, FC_F32, sh, 2, data, true);
    fc_scalar(ctx, FC_F32, 1);
    fc_clone(ctx, x);
    fc_status st = done(ctx);
    fc_scope_end(ctx);
    return st;
}

static fc_status sc_casts(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *x = fc_randn(ctx, FC_F32, (const int64_t[]){4, 256}, 2);
    fc_to(ctx, x, FC_BF16);
    fc_to(ctx, fc_to(ctx, x, FC_F8_E4M3), FC_F32);
    fc_to(ctx, fc_to(ctx, x, FC_Q4_K), FC_F32);
    fc_to(ctx, fc_to(ctx, x, FC_IQ4_XS), FC_F32);
    fc_to(ctx, x, FC_I32);
    fc_status st = done(ctx);
    fc_scope_end(ctx);
    return st;
}

static fc_status sc_scopes_and_keep(fc_ctx *ctx) {
    fc_tensor *kept = NULL;
    for (int i = 0; i < 3; i++) {
        fc_scope_begin(ctx);
        fc_scope_begin(ctx);
        fc_tensor *t = fc_ones(ctx, FC_F32, (const int64_t[]){300}, 1);
        fc_scope_end(ctx);
        (void)t;
        fc_tensor *k = fc_zeros(ctx, FC_F32, (const int64_t[]){5}, 1);
        if (k && !kept) kept = fc_keep(k);
        fc_scope_end(ctx);
    }
    fc_release(kept);
    return done(ctx);
}

static fc_status sc_optimizer(fc_ctx *ctx) {
    fc_tensor *p = fc_param_randn(ctx, FC_F32, (const int64_t[]){10, 10}, 2, 0.1);
    fc_tensor *q = fc_param_zeros(ctx, FC_BF16, (const int64_t[]){7}, 1);
    fc_status st = done(ctx);
    fc_tensor *ps[2] = {p, q};
    fc_optim *opt = st == FC_OK ? fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAMW,
                                                                     .lr = 0.1, .amsgrad = true},
                                               ps, 2)
                                : NULL;
    for (int step = 0; step < 2 && opt && st == FC_OK; step++) {
        fc_scope_begin(ctx);
        for (int k = 0; k < 2 && st == FC_OK; k++) {
            fc_tensor *g = fc_ones(ctx, FC_F32, fc_tensor_shape(ps[k]), fc_tensor_rank(ps[k]));
            st = g ? fc_backward_with(ctx, ps[k], g, false) : done(ctx);
        }
        if (st == FC_OK) st = fc_clip_grad_norm(ctx, ps, 2, 0.5, NULL);
        if (st == FC_OK) st = fc_optim_step(opt);
        fc_optim_zero_grad(opt);
        fc_scope_end(ctx);
    }
    if (st == FC_OK) st = done(ctx);
    fc_optim_free(opt);
    fc_release(p);
    fc_release(q);
    return st;
}

static const oom_scenario scenarios[] = {
    {"creation", sc_creation},
    {"casts and quantization", sc_casts},
    {"scopes and fc_keep", sc_scopes_and_keep},
    {"optimizer step", sc_optimizer},
};

static void test_oom_core_scenarios(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        oom_result r = oom_sweep(&scenarios[i]);
        printf("oom sweep: %-24s completed at N=%ld after %ld faulted runs\n", scenarios[i].name,
               r.largest_n, r.failures);
        assert_true(r.largest_n > 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_oom_core_scenarios)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
