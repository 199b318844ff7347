/* SPDX-License-Identifier: MIT */
/* test_optim_lamb.c - LAMB beyond its 100-step trajectories against torch
 * (those run in test_optim_more.c from tests/data/ag/optim_more_ref.h):
 * the trust ratio's edge cases (a zero parameter, a zero update), a
 * parameter of several reduction chunks stepping to the same bits on 1
 * and 4 threads and within rounding of an f64 evaluation of the rule, a
 * bf16 parameter, bad options, state names, the all-or-nothing step,
 * check_finite, groups and a checkpoint round trip that resumes bit for
 * bit. */
/* getpid, unlink: POSIX */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE
#endif

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fucina.h"

#include "../data/ag/optim_more_ref.h"

#define N OPTIM_REF_N

static fc_ctx *new_ctx(int threads) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .seed = 5});
    assert_non_null(ctx);
    return ctx;
}

static void free_ctx(fc_ctx *ctx) {
    fc_ctx_stats st;
    fc_ctx_get_stats(ctx, &st);
    assert_int_equal(st.tensors_live, 0);
    fc_ctx_free(ctx);
}

/* The gradient g (of p's dtype, n elements) lands in p's fc_grad through
 * backward of sum(p * g), whose gradient is g exactly. */
static void set_grad_n(fc_ctx *ctx, fc_tensor *p, const void *g, int64_t n) {
    fc_zero_grad(&p, 1);
    fc_scope_begin(ctx);
    fc_tensor *gt = fc_tensor_from_data(ctx, fc_tensor_dtype(p), &n, 1, g);
    assert_int_equal(fc_backward(ctx, fc_sum(ctx, fc_mul(ctx, p, gt), NULL, 0, false)), FC_OK);
    fc_scope_end(ctx);
}

/* The generator's gradient at step t: a*(p - c) + s_t (f32 or f64). */
static void quad_grad(fc_ctx *ctx, fc_tensor *p, int t) {
    if (fc_tensor_dtype(p) == FC_F64) {
        const double *pp = fc_tensor_data(p);
        double g[N];
        for (int i = 0; i < N; i++)
            g[i] = optim_ref_a[i] * (pp[i] - optim_ref_c[i]) +
                   sin(0.37 * i + 1.3 * t) * (1 + 0.1 * i);
        set_grad_n(ctx, p, g, N);
    } else {
        const float *pp = fc_tensor_data(p);
        float g[N];
        for (int i = 0; i < N; i++) {
            float d = pp[i] - (float)optim_ref_c[i];
            g[i] = (float)optim_ref_a[i] * d + (float)(sin(0.37 * i + 1.3 * t) * (1 + 0.1 * i));
        }
        set_grad_n(ctx, p, g, N);
    }
}

static fc_tensor *new_param(fc_ctx *ctx, fc_dtype dt) {
    if (dt == FC_F64)
        return fc_param_from_data(ctx, FC_F64, (const int64_t[]){N}, 1, optim_ref_p0);
    float p0[N];
    for (int i = 0; i < N; i++) p0[i] = (float)optim_ref_p0[i];
    return fc_param_from_data(ctx, FC_F32, (const int64_t[]){N}, 1, p0);
}

/* ||p|| = 0: the ratio is 1, so the first step is p = -lr * g/(|g| + eps)
 * (m_hat = g, v_hat = g^2 at t = 1). A zero gradient: ||r|| = 0, ratio 1,
 * nothing moves but the step count. */
static void test_trust_ratio_edges(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    float zero[N] = {0}, g[N];
    for (int i = 0; i < N; i++) g[i] = (float)(i - 2.5) * 0.75f;
    fc_tensor *p = fc_param_from_data(ctx, FC_F32, (const int64_t[]){N}, 1, zero);
    fc_optim *opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_LAMB, .lr = 0.1}, &p, 1);
    assert_non_null(opt);
    set_grad_n(ctx, p, g, N);
    assert_int_equal(fc_optim_step(opt), FC_OK);
    const float *pp = fc_tensor_data(p);
    for (int i = 0; i < N; i++) {
        double want = -0.1 * g[i] / (fabs(g[i]) + 1e-6);
        if (fabs(pp[i] - want) > 1e-7) fail_msg("p[%d] = %.9g, want %.9g", i, pp[i], want);
    }
    fc_optim_free(opt);

    float init[N];
    for (int i = 0; i < N; i++) init[i] = 1.0f + (float)i;
    fc_tensor *q = fc_param_from_data(ctx, FC_F32, (const int64_t[]){N}, 1, init);
    opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_LAMB, .lr = 0.1}, &q, 1);
    assert_non_null(opt);
    set_grad_n(ctx, q, zero, N);
    assert_int_equal(fc_optim_step(opt), FC_OK);
    assert_int_equal(fc_optim_step_count(opt), 1);
    assert_memory_equal(fc_tensor_data(q), init, sizeof init);
    const float *m = fc_tensor_data(fc_optim_state(opt, 0, "exp_avg", false));
    for (int i = 0; i < N; i++) assert_true(m[i] == 0);
    fc_optim_free(opt);
    fc_release(p);
    fc_release(q);
    free_ctx(ctx);
}

enum { BIG = 300007 }; /* 5 chunks of 65536 and a tail */

static void big_data(float *p0, float *g) {
    for (int64_t i = 0; i < BIG; i++) {
        p0[i] = (float)sin(0.001 * (double)i) * 0.5f + 0.01f;
        g[i] = (float)cos(0.0137 * (double)i) * (1.0f + (float)(i % 7));
    }
}

/* Three steps of a parameter of several chunks on `threads` threads,
 * into out. */
static void big_run(int threads, const float *p0, const float *g, float *out) {
    fc_ctx *ctx = new_ctx(threads);
    fc_tensor *p = fc_param_from_data(ctx, FC_F32, (const int64_t[]){BIG}, 1, p0);
    fc_optim *opt = fc_optim_new(
        ctx, &(fc_optim_opts){.kind = FC_OPTIM_LAMB, .lr = 0.01, .weight_decay = 0.01}, &p, 1);
    assert_non_null(opt);
    for (int t = 0; t < 3; t++) {
        set_grad_n(ctx, p, g, BIG);
        assert_int_equal(fc_optim_step(opt), FC_OK);
    }
    memcpy(out, fc_tensor_data(p), sizeof(float) * BIG);
    fc_optim_free(opt);
    fc_release(p);
    free_ctx(ctx);
}

/* The norms are summed per fixed chunk: 1 and 4 threads give the same
 * bits, and both are within f32 rounding of the rule evaluated in f64
 * (the same gradient for three steps). */
static void test_big_parameter_deterministic(void **state) {
    (void)state;
    float *p0 = malloc(sizeof(float) * BIG), *g = malloc(sizeof(float) * BIG);
    float *a = malloc(sizeof(float) * BIG), *b = malloc(sizeof(float) * BIG);
    double *w = malloc(sizeof(double) * BIG), *m = calloc(BIG, sizeof(double));
    double *v = calloc(BIG, sizeof(double)), *r = malloc(sizeof(double) * BIG);
    assert_true(p0 && g && a && b && w && m && v && r);
    big_data(p0, g);
    big_run(1, p0, g, a);
    big_run(4, p0, g, b);
    assert_memory_equal(a, b, sizeof(float) * BIG);
    for (int64_t i = 0; i < BIG; i++) w[i] = p0[i];
    for (int t = 1; t <= 3; t++) {
        double bc1 = 1 - pow(0.9, t), bc2 = 1 - pow(0.999, t), sw = 0, sr = 0;
        for (int64_t i = 0; i < BIG; i++) {
            m[i] = 0.9 * m[i] + 0.1 * g[i];
            v[i] = 0.999 * v[i] + 0.001 * (double)g[i] * g[i];
            r[i] = (m[i] / bc1) / (sqrt(v[i] / bc2) + 1e-6) + 0.01 * w[i];
            sw += w[i] * w[i];
            sr += r[i] * r[i];
        }
        double ratio = sqrt(sw) / sqrt(sr);
        for (int64_t i = 0; i < BIG; i++) w[i] -= 0.01 * ratio * r[i];
    }
    double worst = 0;
    for (int64_t i = 0; i < BIG; i++) {
        double err = fabs(a[i] - w[i]) / fmax(fabs(w[i]), 1e-2);
        if (err > worst) worst = err;
    }
    if (worst > 1e-5) fail_msg("f32 vs the f64 rule: worst relative error %.3g", worst);
    free(p0), free(g), free(a), free(b), free(w), free(m), free(v), free(r);
}

/* A bf16 parameter is read, updated in f32 and rounded back once: one step
 * equals the f32 step of the same (bf16-exact) values, rounded to bf16. */
static void test_bf16_parameter(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    float v32[N], g[N];
    uint16_t v16[N];
    for (int i = 0; i < N; i++) {
        v16[i] = fc_f32_to_bf16(1.0f + 0.25f * (float)i);
        v32[i] = fc_bf16_to_f32(v16[i]);
        g[i] = 0.5f - 0.125f * (float)i;
    }
    fc_tensor *p = fc_param_from_data(ctx, FC_F32, (const int64_t[]){N}, 1, v32);
    fc_tensor *q = fc_param_from_data(ctx, FC_BF16, (const int64_t[]){N}, 1, v16);
    fc_optim_opts o = {.kind = FC_OPTIM_LAMB, .lr = 0.05, .weight_decay = 0.1};
    fc_optim *op = fc_optim_new(ctx, &o, &p, 1), *oq = fc_optim_new(ctx, &o, &q, 1);
    assert_non_null(op);
    assert_non_null(oq);
    set_grad_n(ctx, p, g, N);
    uint16_t g16[N];
    for (int i = 0; i < N; i++) g16[i] = fc_f32_to_bf16(g[i]); /* exact: few mantissa bits */
    set_grad_n(ctx, q, g16, N);
    assert_int_equal(fc_optim_step(op), FC_OK);
    assert_int_equal(fc_optim_step(oq), FC_OK);
    const float *pp = fc_tensor_data(p);
    const uint16_t *qq = fc_tensor_data(q);
    for (int i = 0; i < N; i++) assert_int_equal(qq[i], fc_f32_to_bf16(pp[i]));
    assert_int_equal(fc_tensor_dtype(fc_optim_state(oq, 0, "exp_avg_sq", false)), FC_F32);
    fc_optim_free(op);
    fc_optim_free(oq);
    fc_release(p);
    fc_release(q);
    free_ctx(ctx);
}

/* Bad options are FC_ERR_INVALID_ARG naming the value; defaults (0.9,
 * 0.999, 1e-6); states exp_avg and exp_avg_sq and no other. */
static void test_options_and_state(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    fc_tensor *p = new_param(ctx, FC_F32);
    static const struct {
        fc_optim_opts o;
        const char *msg;
    } bad[] = {
        {{.kind = FC_OPTIM_LAMB, .lr = -1}, "lr -1"},
        {{.kind = FC_OPTIM_LAMB, .lr = 0.01, .beta1 = 1}, "betas (1, 0)"},
        {{.kind = FC_OPTIM_LAMB, .lr = 0.01, .beta2 = -0.5}, "betas (0, -0.5)"},
        {{.kind = FC_OPTIM_LAMB, .lr = 0.01, .eps = -1e-6}, "eps -1e-06"},
        {{.kind = FC_OPTIM_LAMB, .lr = 0.01, .eps = INFINITY}, "eps inf"},
        {{.kind = FC_OPTIM_LAMB, .lr = 0.01, .weight_decay = -0.1}, "weight_decay -0.1"},
        {{.kind = FC_OPTIM_LAMB, .lr = 0.01, .weight_decay = INFINITY}, "weight_decay inf"},
        {{.kind = FC_OPTIM_LAMB, .lr = 0.01, .centered = true}, "centered"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        assert_null(fc_optim_new(ctx, &bad[k].o, &p, 1));
        assert_int_equal(fc_ctx_status(ctx), FC_ERR_INVALID_ARG);
        if (!strstr(fc_ctx_error(ctx), bad[k].msg))
            fail_msg("case %zu: '%s' lacks '%s'", k, fc_ctx_error(ctx), bad[k].msg);
        fc_ctx_clear_error(ctx);
    }
    fc_optim *opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_LAMB, .lr = 0.01}, &p, 1);
    assert_non_null(opt);
    fc_optim_opts o;
    assert_int_equal(fc_optim_group_opts(opt, 0, &o), FC_OK);
    assert_true(o.beta1 == 0.9 && o.beta2 == 0.999 && o.eps == 1e-6);
    assert_null(fc_optim_state(opt, 0, "exp_avg", false));
    quad_grad(ctx, p, 1);
    assert_int_equal(fc_optim_step(opt), FC_OK);
    assert_non_null(fc_optim_state(opt, 0, "exp_avg", false));
    assert_non_null(fc_optim_state(opt, 0, "exp_avg_sq", false));
    assert_null(fc_optim_state(opt, 0, "max_exp_avg_sq", false));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "no state 'max_exp_avg_sq'"));
    fc_ctx_clear_error(ctx);
    fc_optim_free(opt);
    fc_release(p);
    free_ctx(ctx);
}

/* A read-only second parameter: nothing changes (no state created, count
 * 0). check_finite with an update that overflows f32 (lr 1e39):
 * FC_ERR_NON_FINITE and nothing changes; a sane lr then goes through. */
static void test_all_or_nothing(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    float init[N], ro[N];
    for (int i = 0; i < N; i++) init[i] = ro[i] = (float)optim_ref_p0[i];
    fc_tensor *ps[2] = {fc_param_from_data(ctx, FC_F32, (const int64_t[]){N}, 1, init),
                        fc_tensor_from_borrowed(ctx, FC_F32, (const int64_t[]){N}, 1, ro, true)};
    assert_int_equal(fc_requires_grad(ps[1], true), FC_OK);
    fc_optim *opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_LAMB, .lr = 0.1}, ps, 2);
    assert_non_null(opt);
    quad_grad(ctx, ps[0], 1);
    quad_grad(ctx, ps[1], 1);
    assert_int_equal(fc_optim_step(opt), FC_ERR_READ_ONLY);
    assert_non_null(strstr(fc_ctx_error(ctx), "fc_optim_step: parameter 1 (group 0"));
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_optim_step_count(opt), 0);
    assert_memory_equal(fc_tensor_data(ps[0]), init, sizeof init);
    assert_null(fc_optim_state(opt, 0, "exp_avg", false));
    assert_null(fc_optim_state(opt, 0, "exp_avg_sq", false));
    fc_zero_grad(&ps[1], 1);

    fc_ctx_set_check_finite(ctx, true);
    assert_int_equal(fc_optim_set_lr(opt, 1e39), FC_OK);
    assert_int_equal(fc_optim_step(opt), FC_ERR_NON_FINITE);
    assert_non_null(strstr(fc_ctx_error(ctx), "parameter 0 (group 0"));
    assert_non_null(strstr(fc_ctx_error(ctx), "in its parameter; nothing was updated"));
    fc_ctx_clear_error(ctx);
    assert_memory_equal(fc_tensor_data(ps[0]), init, sizeof init);
    assert_int_equal(fc_optim_step_count(opt), 0);
    assert_null(fc_optim_state(opt, 0, "exp_avg", false));
    assert_int_equal(fc_optim_set_lr(opt, 0.01), FC_OK);
    assert_int_equal(fc_optim_step(opt), FC_OK);
    assert_int_equal(fc_optim_step_count(opt), 1);
    assert_memory_not_equal(fc_tensor_data(ps[0]), init, sizeof init);
    fc_optim_free(opt);
    fc_release(ps[0]);
    fc_release(ps[1]);
    free_ctx(ctx);
}

/* Two groups step each parameter as an optimizer of its group's options
 * alone would, bit for bit: each parameter's trust ratio is its own. */
static void test_groups_are_independent(void **state) {
    (void)state;
    static const fc_optim_opts g[2] = {
        {.kind = FC_OPTIM_LAMB, .lr = 0.01},
        {.kind = FC_OPTIM_LAMB, .lr = 0.03, .beta1 = 0.8, .weight_decay = 0.2},
    };
    fc_ctx *ctx = new_ctx(1);
    fc_tensor *p[2] = {new_param(ctx, FC_F32), new_param(ctx, FC_F32)};
    fc_tensor *q[2] = {new_param(ctx, FC_F32), new_param(ctx, FC_F32)};
    fc_optim *both = fc_optim_new(ctx, &g[0], &p[0], 1);
    assert_non_null(both);
    assert_int_equal(fc_optim_add_group(both, &g[1], &p[1], 1), FC_OK);
    fc_optim *one[2] = {fc_optim_new(ctx, &g[0], &q[0], 1), fc_optim_new(ctx, &g[1], &q[1], 1)};
    for (int t = 1; t <= 20; t++) {
        for (int j = 0; j < 2; j++) {
            quad_grad(ctx, p[j], t);
            quad_grad(ctx, q[j], t);
            assert_int_equal(fc_optim_step(one[j]), FC_OK);
        }
        assert_int_equal(fc_optim_step(both), FC_OK);
    }
    for (int j = 0; j < 2; j++) {
        assert_memory_equal(fc_tensor_data(p[j]), fc_tensor_data(q[j]), sizeof(float) * N);
        fc_optim_free(one[j]);
    }
    assert_memory_not_equal(fc_tensor_data(p[0]), fc_tensor_data(p[1]), sizeof(float) * N);
    fc_optim_free(both);
    for (int j = 0; j < 2; j++) {
        fc_release(p[j]);
        fc_release(q[j]);
    }
    free_ctx(ctx);
}

/* Save after 40 steps, load into an optimizer with other options, and 40
 * more steps of both agree bit for bit (moments, options and the step
 * count, which the bias correction reads, restored), in f32 and f64. */
static void test_checkpoint_resumes(void **state) {
    (void)state;
    const fc_optim_opts opts = {.kind = FC_OPTIM_LAMB, .lr = 0.02, .beta1 = 0.8, .beta2 = 0.95,
                                .eps = 1e-4, .weight_decay = 0.1};
    for (int d = 0; d < 2; d++) {
        fc_dtype dt = d ? FC_F64 : FC_F32;
        char path[600];
        snprintf(path, sizeof path, "%s/test_optim_lamb-%ld-%d.ckpt", FUCINA_BINARY_DIR,
                 (long)getpid(), d);
        fc_ctx *ctx = new_ctx(1);
        fc_tensor *p = new_param(ctx, dt), *q = new_param(ctx, dt);
        fc_optim *op = fc_optim_new(ctx, &opts, &p, 1);
        fc_optim_opts other = {.kind = FC_OPTIM_LAMB, .lr = 0.5};
        fc_optim *oq = fc_optim_new(ctx, &other, &q, 1);
        assert_non_null(op);
        assert_non_null(oq);
        for (int t = 1; t <= 40; t++) {
            quad_grad(ctx, p, t);
            assert_int_equal(fc_optim_step(op), FC_OK);
        }
        const char *names[1] = {"w"};
        assert_int_equal(fc_checkpoint_save(ctx, path, names, &p, 1, op, NULL, NULL, 0), FC_OK);
        fc_status st = fc_checkpoint_load(ctx, path, names, &q, 1, oq);
        if (st != FC_OK) fail_msg("%s", fc_ctx_error(ctx));
        unlink(path);
        fc_optim_opts o;
        fc_optim_group_opts(oq, 0, &o);
        assert_true(o.lr == opts.lr && o.beta1 == opts.beta1 && o.beta2 == opts.beta2);
        assert_true(o.eps == opts.eps && o.weight_decay == opts.weight_decay);
        assert_int_equal(fc_optim_step_count(oq), 40);
        size_t bytes = (size_t)N * (d ? sizeof(double) : sizeof(float));
        for (int t = 41; t <= 80; t++) {
            quad_grad(ctx, p, t);
            quad_grad(ctx, q, t);
            assert_int_equal(fc_optim_step(op), FC_OK);
            assert_int_equal(fc_optim_step(oq), FC_OK);
        }
        assert_memory_equal(fc_tensor_data(p), fc_tensor_data(q), bytes);
        fc_optim_free(op);
        fc_optim_free(oq);
        fc_release(p);
        fc_release(q);
        free_ctx(ctx);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trust_ratio_edges),
        cmocka_unit_test(test_big_parameter_deterministic),
        cmocka_unit_test(test_bf16_parameter),
        cmocka_unit_test(test_options_and_state),
        cmocka_unit_test(test_all_or_nothing),
        cmocka_unit_test(test_groups_are_independent),
        cmocka_unit_test(test_checkpoint_resumes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
