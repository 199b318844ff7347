/* SPDX-License-Identifier: MIT */
/* test_optim_more.c - RMSprop, Adagrad, Lion (and LAMB, whose other tests
 * are test_optim_lamb.c): 100-step trajectories
 * against torch (tests/data/ag/optim_more_ref.h, made by
 * scripts/gen_optim_ref.py) in f32 and f64, each bad hyper-parameter
 * refused with FC_ERR_INVALID_ARG naming it, state names and initial
 * values, the all-or-nothing step, and a checkpoint round trip that
 * resumes bit for bit. */
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
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fucina.h"

#include "../data/ag/optim_more_ref.h"

#define N OPTIM_REF_N

static fc_ctx *new_ctx(void) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 5});
    assert_non_null(ctx);
    return ctx;
}

static void free_ctx(fc_ctx *ctx) {
    fc_ctx_stats st;
    fc_ctx_get_stats(ctx, &st);
    assert_int_equal(st.tensors_live, 0);
    fc_ctx_free(ctx);
}

/* The gradient g (of p's dtype) lands in p's fc_grad through backward of
 * sum(p * g), whose gradient is g exactly. */
static void set_grad(fc_ctx *ctx, fc_tensor *p, const void *g) {
    fc_zero_grad(&p, 1);
    fc_scope_begin(ctx);
    fc_tensor *gt = fc_tensor_from_data(ctx, fc_tensor_dtype(p), (const int64_t[]){N}, 1, g);
    assert_int_equal(fc_backward(ctx, fc_sum(ctx, fc_mul(ctx, p, gt), NULL, 0, false)), FC_OK);
    fc_scope_end(ctx);
}

/* The generator's gradient at step t, in the parameter's precision and
 * operation order: a*(p - c) + s_t. */
static void quad_grad(fc_ctx *ctx, fc_tensor *p, int t) {
    if (fc_tensor_dtype(p) == FC_F64) {
        const double *pp = fc_tensor_data(p);
        double g[N];
        for (int i = 0; i < N; i++)
            g[i] = optim_ref_a[i] * (pp[i] - optim_ref_c[i]) +
                   sin(0.37 * i + 1.3 * t) * (1 + 0.1 * i);
        set_grad(ctx, p, g);
    } else {
        const float *pp = fc_tensor_data(p);
        float g[N];
        for (int i = 0; i < N; i++) {
            float a = (float)optim_ref_a[i], c = (float)optim_ref_c[i];
            float s = (float)(sin(0.37 * i + 1.3 * t) * (1 + 0.1 * i));
            float d = pp[i] - c;
            float ad = a * d;
            g[i] = ad + s;
        }
        set_grad(ctx, p, g);
    }
}

static fc_tensor *new_param(fc_ctx *ctx, fc_dtype dt) {
    if (dt == FC_F64)
        return fc_param_from_data(ctx, FC_F64, (const int64_t[]){N}, 1, optim_ref_p0);
    float p0[N];
    for (int i = 0; i < N; i++) p0[i] = (float)optim_ref_p0[i];
    return fc_param_from_data(ctx, FC_F32, (const int64_t[]){N}, 1, p0);
}

/* Every reference configuration, in f32 (to 1e-6 relative) and f64 (to
 * 1e-12), at every recorded step. */
static void test_trajectories_match_torch(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    size_t nref = sizeof optim_refs / sizeof optim_refs[0];
    for (size_t r = 0; r < nref; r++) {
        const optim_ref *ref = &optim_refs[r];
        for (int d = 0; d < 2; d++) {
            fc_dtype dt = d ? FC_F64 : FC_F32;
            double tol = d ? 1e-12 : 1e-6;
            fc_tensor *p = new_param(ctx, dt);
            fc_optim *opt = fc_optim_new(ctx, &ref->opts, &p, 1);
            assert_non_null(opt);
            int c = 0;
            double worst = 0;
            for (int t = 1; t <= OPTIM_REF_STEPS; t++) {
                quad_grad(ctx, p, t);
                assert_int_equal(fc_optim_step(opt), FC_OK);
                if (t != optim_ref_check[c]) continue;
                const double *want = d ? ref->f64[c] : ref->f32[c];
                for (int i = 0; i < N; i++) {
                    double got = d ? ((const double *)fc_tensor_data(p))[i]
                                   : ((const float *)fc_tensor_data(p))[i];
                    double err = fabs(got - want[i]) / fmax(fabs(want[i]), 1e-3);
                    if (err > worst) worst = err;
                    if (err > tol)
                        fail_msg("%s %s step %d p[%d]: %.17g, torch %.17g (rel %.3g)", ref->name,
                                 d ? "f64" : "f32", t, i, got, want[i], err);
                }
                c++;
            }
            assert_int_equal(c, OPTIM_REF_NCHECK);
            printf("%s %s: worst relative difference from torch %.3g\n", ref->name,
                   d ? "f64" : "f32", worst);
            fc_optim_free(opt);
            fc_release(p);
        }
    }
    free_ctx(ctx);
}

/* Each bad hyper-parameter: FC_ERR_INVALID_ARG from fc_optim_new naming
 * the value, and from fc_optim_set_group_opts too. */
static void test_bad_hyperparameters(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *p = new_param(ctx, FC_F32);
    static const struct {
        fc_optim_opts o;
        const char *msg;
    } bad[] = {
        {{.kind = FC_OPTIM_RMSPROP, .lr = -0.01}, "lr -0.01"},
        {{.kind = FC_OPTIM_ADAGRAD, .lr = NAN}, "lr nan"},
        {{.kind = FC_OPTIM_LION, .lr = INFINITY}, "lr inf"},
        {{.kind = FC_OPTIM_RMSPROP, .lr = 0.01, .alpha = -0.5}, "alpha -0.5"},
        {{.kind = FC_OPTIM_RMSPROP, .lr = 0.01, .alpha = 1}, "alpha 1"},
        {{.kind = FC_OPTIM_RMSPROP, .lr = 0.01, .alpha = NAN}, "alpha nan"},
        {{.kind = FC_OPTIM_RMSPROP, .lr = 0.01, .eps = -1e-8}, "eps -1e-08"},
        {{.kind = FC_OPTIM_RMSPROP, .lr = 0.01, .eps = INFINITY}, "eps inf"},
        {{.kind = FC_OPTIM_RMSPROP, .lr = 0.01, .momentum = -0.9}, "momentum -0.9"},
        {{.kind = FC_OPTIM_RMSPROP, .lr = 0.01, .weight_decay = -1}, "weight_decay -1"},
        {{.kind = FC_OPTIM_ADAGRAD, .lr = 0.01, .lr_decay = -0.1}, "lr_decay -0.1"},
        {{.kind = FC_OPTIM_ADAGRAD, .lr = 0.01, .lr_decay = INFINITY}, "lr_decay inf"},
        {{.kind = FC_OPTIM_ADAGRAD, .lr = 0.01, .initial_accumulator_value = -2},
         "initial_accumulator_value -2"},
        {{.kind = FC_OPTIM_ADAGRAD, .lr = 0.01, .eps = -1}, "eps -1"},
        {{.kind = FC_OPTIM_ADAGRAD, .lr = 0.01, .weight_decay = INFINITY}, "weight_decay inf"},
        {{.kind = FC_OPTIM_ADAGRAD, .lr = 0.01, .centered = true}, "centered"},
        {{.kind = FC_OPTIM_LION, .lr = 1e-4, .beta1 = 1}, "betas (1, 0)"},
        {{.kind = FC_OPTIM_LION, .lr = 1e-4, .beta2 = 1.5}, "betas (0, 1.5)"},
        {{.kind = FC_OPTIM_LION, .lr = 1e-4, .beta1 = -0.1}, "betas (-0.1, 0)"},
        {{.kind = FC_OPTIM_LION, .lr = 1e-4, .weight_decay = -0.1}, "weight_decay -0.1"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        assert_null(fc_optim_new(ctx, &bad[k].o, &p, 1));
        assert_int_equal(fc_ctx_status(ctx), FC_ERR_INVALID_ARG);
        if (!strstr(fc_ctx_error(ctx), bad[k].msg))
            fail_msg("case %zu: '%s' lacks '%s'", k, fc_ctx_error(ctx), bad[k].msg);
        fc_ctx_clear_error(ctx);
    }
    /* the same through fc_optim_set_group_opts, which keeps the old options */
    fc_optim *opt =
        fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAGRAD, .lr = 0.1}, &p, 1);
    assert_non_null(opt);
    assert_int_equal(fc_optim_set_group_opts(
                         opt, 0,
                         &(fc_optim_opts){.kind = FC_OPTIM_ADAGRAD, .lr = 0.1, .lr_decay = -3}),
                     FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "fc_optim_set_group_opts: lr_decay -3"));
    fc_ctx_clear_error(ctx);
    fc_optim_opts o;
    assert_int_equal(fc_optim_group_opts(opt, 0, &o), FC_OK);
    assert_true(o.lr_decay == 0);
    assert_true(o.eps == 1e-10); /* Adagrad's default */
    fc_optim_free(opt);
    fc_release(p);
    free_ctx(ctx);
}

/* Defaults per kind, the state each kind names, and Adagrad's sum starting
 * at initial_accumulator_value. */
static void test_state_names_and_defaults(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *p = new_param(ctx, FC_F32);
    fc_optim_opts o;
    fc_optim *opt = fc_optim_new(
        ctx, &(fc_optim_opts){.kind = FC_OPTIM_RMSPROP, .lr = 0.01, .momentum = 0.5}, &p, 1);
    assert_non_null(opt);
    fc_optim_group_opts(opt, 0, &o);
    assert_true(o.alpha == 0.99 && o.eps == 1e-8);
    quad_grad(ctx, p, 1);
    assert_int_equal(fc_optim_step(opt), FC_OK);
    assert_non_null(fc_optim_state(opt, 0, "square_avg", false));
    assert_non_null(fc_optim_state(opt, 0, "momentum_buffer", false));
    assert_null(fc_optim_state(opt, 0, "grad_avg", false)); /* not centered */
    assert_null(fc_optim_state(opt, 0, "exp_avg", false));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "no state 'exp_avg'"));
    fc_ctx_clear_error(ctx);
    fc_optim_free(opt);

    opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_LION, .lr = 1e-4}, &p, 1);
    assert_non_null(opt);
    fc_optim_group_opts(opt, 0, &o);
    assert_true(o.beta1 == 0.9 && o.beta2 == 0.99);
    assert_null(fc_optim_state(opt, 0, "exp_avg_sq", false));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(ctx);
    assert_non_null(fc_optim_state(opt, 0, "exp_avg", true));
    fc_optim_free(opt);

    opt = fc_optim_new(ctx,
                       &(fc_optim_opts){.kind = FC_OPTIM_ADAGRAD, .lr = 0.1,
                                        .initial_accumulator_value = 0.25},
                       &p, 1);
    assert_non_null(opt);
    assert_null(fc_optim_state(opt, 0, "sum", false));
    fc_tensor *sum = fc_optim_state(opt, 0, "sum", true);
    assert_non_null(sum);
    for (int i = 0; i < N; i++) assert_true(((const float *)fc_tensor_data(sum))[i] == 0.25f);
    fc_optim_free(opt);
    fc_release(p);
    free_ctx(ctx);
}

/* A step with a read-only second parameter changes nothing: not the first
 * parameter, not its state (none is created), not the step count. */
static void test_step_all_or_nothing(void **state) {
    (void)state;
    static const fc_optim_kind kinds[3] = {FC_OPTIM_RMSPROP, FC_OPTIM_ADAGRAD, FC_OPTIM_LION};
    static const char *const names[3] = {"square_avg", "sum", "exp_avg"};
    for (int k = 0; k < 3; k++) {
        fc_ctx *ctx = new_ctx();
        float init[N], ro[N];
        for (int i = 0; i < N; i++) init[i] = ro[i] = (float)optim_ref_p0[i];
        fc_tensor *ps[2] = {
            fc_param_from_data(ctx, FC_F32, (const int64_t[]){N}, 1, init),
            fc_tensor_from_borrowed(ctx, FC_F32, (const int64_t[]){N}, 1, ro, true)};
        assert_int_equal(fc_requires_grad(ps[1], true), FC_OK);
        fc_optim_opts o = {.kind = kinds[k], .lr = 0.1};
        if (kinds[k] == FC_OPTIM_RMSPROP) o.momentum = 0.5, o.centered = true;
        fc_optim *opt = fc_optim_new(ctx, &o, ps, 2);
        assert_non_null(opt);
        quad_grad(ctx, ps[0], 1);
        quad_grad(ctx, ps[1], 1);
        uint32_t gen = fc_tensor_generation(ps[0]);
        assert_int_equal(fc_optim_step(opt), FC_ERR_READ_ONLY);
        assert_non_null(strstr(fc_ctx_error(ctx), "fc_optim_step: parameter 1 (group 0"));
        fc_ctx_clear_error(ctx);
        assert_int_equal(fc_optim_step_count(opt), 0);
        assert_int_equal(fc_tensor_generation(ps[0]), gen);
        assert_memory_equal(fc_tensor_data(ps[0]), init, sizeof init);
        assert_null(fc_optim_state(opt, 0, names[k], false));
        fc_zero_grad(&ps[1], 1);
        assert_int_equal(fc_optim_step(opt), FC_OK);
        assert_int_equal(fc_optim_step_count(opt), 1);
        assert_non_null(fc_optim_state(opt, 0, names[k], false));
        assert_memory_not_equal(fc_tensor_data(ps[0]), init, sizeof init);
        fc_optim_free(opt);
        fc_release(ps[0]);
        fc_release(ps[1]);
        free_ctx(ctx);
    }
}

/* check_finite mode: an update that overflows (lr 1e38 times a step of
 * about 10 in f32) is FC_ERR_NON_FINITE naming the parameter, and nothing
 * changed; with a sane lr the same step goes through. */
static void test_check_finite_update(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_ctx_set_check_finite(ctx, true);
    fc_tensor *p = new_param(ctx, FC_F32);
    float init[N];
    memcpy(init, fc_tensor_data(p), sizeof init);
    fc_optim *opt =
        fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_RMSPROP, .lr = 1e38}, &p, 1);
    assert_non_null(opt);
    quad_grad(ctx, p, 1);
    assert_int_equal(fc_optim_step(opt), FC_ERR_NON_FINITE);
    assert_non_null(strstr(fc_ctx_error(ctx), "fc_optim_step: parameter 0 (group 0"));
    assert_non_null(strstr(fc_ctx_error(ctx), "in its parameter; nothing was updated"));
    fc_ctx_clear_error(ctx);
    assert_memory_equal(fc_tensor_data(p), init, sizeof init);
    assert_int_equal(fc_optim_step_count(opt), 0);
    assert_null(fc_optim_state(opt, 0, "square_avg", false));
    assert_int_equal(fc_optim_set_lr(opt, 0.01), FC_OK);
    assert_int_equal(fc_optim_step(opt), FC_OK);
    assert_non_null(fc_optim_state(opt, 0, "square_avg", false));
    fc_optim_free(opt);
    fc_release(p);
    free_ctx(ctx);
}

/* Two groups with their own options step each parameter exactly as an
 * optimizer of its group's options alone would (bit for bit). */
static void test_groups_are_independent(void **state) {
    (void)state;
    static const fc_optim_opts g[2][2] = {
        {{.kind = FC_OPTIM_RMSPROP, .lr = 0.01}, {.kind = FC_OPTIM_RMSPROP, .lr = 0.002,
                                                   .momentum = 0.9, .centered = true}},
        {{.kind = FC_OPTIM_ADAGRAD, .lr = 0.1}, {.kind = FC_OPTIM_ADAGRAD, .lr = 0.3,
                                                  .lr_decay = 0.05, .weight_decay = 0.2}},
    };
    for (int k = 0; k < 2; k++) {
        fc_ctx *ctx = new_ctx();
        fc_tensor *p[2] = {new_param(ctx, FC_F32), new_param(ctx, FC_F32)};
        fc_tensor *q[2] = {new_param(ctx, FC_F32), new_param(ctx, FC_F32)};
        fc_optim *both = fc_optim_new(ctx, &g[k][0], &p[0], 1);
        assert_non_null(both);
        assert_int_equal(fc_optim_add_group(both, &g[k][1], &p[1], 1), FC_OK);
        fc_optim *one[2] = {fc_optim_new(ctx, &g[k][0], &q[0], 1),
                            fc_optim_new(ctx, &g[k][1], &q[1], 1)};
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
}

/* Save after 40 steps, load into a fresh optimizer over another parameter,
 * and 40 more steps of both agree bit for bit (state, options, step count
 * restored: Adagrad's lr_decay depends on the count). */
static void test_checkpoint_resumes(void **state) {
    (void)state;
    static const fc_optim_opts opts[3] = {
        {.kind = FC_OPTIM_RMSPROP, .lr = 0.003, .alpha = 0.9, .momentum = 0.8, .centered = true,
         .weight_decay = 0.1},
        {.kind = FC_OPTIM_ADAGRAD, .lr = 0.2, .lr_decay = 0.01, .initial_accumulator_value = 0.1},
        {.kind = FC_OPTIM_LION, .lr = 0.01, .beta1 = 0.8, .weight_decay = 0.1},
    };
    for (int k = 0; k < 3; k++) {
        for (int d = 0; d < 2; d++) {
            fc_dtype dt = d ? FC_F64 : FC_F32;
            char path[600];
            snprintf(path, sizeof path, "%s/test_optim_more-%ld-%d.ckpt", FUCINA_BINARY_DIR,
                     (long)getpid(), k);
            fc_ctx *ctx = new_ctx();
            fc_tensor *p = new_param(ctx, dt), *q = new_param(ctx, dt);
            fc_optim *op = fc_optim_new(ctx, &opts[k], &p, 1);
            /* q's optimizer starts with other options: the file's replace them */
            fc_optim_opts other = opts[k];
            other.lr = 0.5;
            fc_optim *oq = fc_optim_new(ctx, &other, &q, 1);
            assert_non_null(op);
            assert_non_null(oq);
            for (int t = 1; t <= 40; t++) {
                quad_grad(ctx, p, t);
                assert_int_equal(fc_optim_step(op), FC_OK);
            }
            const char *names[1] = {"w"};
            assert_int_equal(fc_checkpoint_save(ctx, path, names, &p, 1, op, NULL, NULL, 0),
                             FC_OK);
            fc_status st = fc_checkpoint_load(ctx, path, names, &q, 1, oq);
            if (st != FC_OK) fail_msg("kind %d: %s", k, fc_ctx_error(ctx));
            unlink(path);
            fc_optim_opts o, want;
            fc_optim_group_opts(oq, 0, &o);
            fc_optim_group_opts(op, 0, &want);
            assert_true(o.lr == opts[k].lr);
            assert_true(o.alpha == want.alpha && o.beta1 == want.beta1 && o.eps == want.eps);
            assert_true(o.centered == opts[k].centered);
            assert_true(o.lr_decay == opts[k].lr_decay);
            assert_true(o.initial_accumulator_value == opts[k].initial_accumulator_value);
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
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trajectories_match_torch),
        cmocka_unit_test(test_bad_hyperparameters),
        cmocka_unit_test(test_state_names_and_defaults),
        cmocka_unit_test(test_step_all_or_nothing),
        cmocka_unit_test(test_check_finite_update),
        cmocka_unit_test(test_groups_are_independent),
        cmocka_unit_test(test_checkpoint_resumes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
