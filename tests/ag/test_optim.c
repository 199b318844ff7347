/* SPDX-License-Identifier: MIT */
/* test_optim.c - SGD/Adam/AdamW against double-precision transcriptions of
 * torch.optim's update rules, clipping, schedules, state access, and the
 * generation bump that makes a step visible to the saved-value check. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "fucina.h"

#define N 37
#define STEPS 6

static void set_grad(fc_ctx *ctx, fc_tensor *p, const float *g) {
    fc_zero_grad(&p, 1);
    fc_tensor *gt = fc_tensor_from_data(ctx, FC_F32, fc_tensor_shape(p), fc_tensor_rank(p), g);
    assert_non_null(gt);
    assert_int_equal(fc_backward_with(ctx, p, gt, false), FC_OK);
    fc_release(gt);
}

static void grads_at(int step, float *g) {
    for (int i = 0; i < N; i++) g[i] = (float)(sin(0.37 * i + 1.3 * step) * (1 + 0.1 * i));
}

/* reference state in double */
typedef struct ref {
    double p[N], m[N], v[N], vmax[N];
    bool first;
} ref;

static void ref_step(ref *r, const fc_optim_opts *o, const float *g32, int t) {
    for (int i = 0; i < N; i++) {
        double g = g32[i], p = r->p[i];
        if (o->kind == FC_OPTIM_SGD) {
            if (o->weight_decay) g += o->weight_decay * p;
            if (o->momentum) {
                double buf = r->first ? g : o->momentum * r->m[i] + (1 - o->dampening) * g;
                r->m[i] = buf;
                g = o->nesterov ? g + o->momentum * buf : buf;
            }
            r->p[i] = p - o->lr * g;
        } else {
            double b1 = o->beta1 ? o->beta1 : 0.9, b2 = o->beta2 ? o->beta2 : 0.999;
            double eps = o->eps ? o->eps : 1e-8;
            if (o->kind == FC_OPTIM_ADAMW)
                p *= 1 - o->lr * o->weight_decay;
            else
                g += o->weight_decay * p;
            r->m[i] = b1 * r->m[i] + (1 - b1) * g;
            r->v[i] = b2 * r->v[i] + (1 - b2) * g * g;
            double v = r->v[i];
            if (o->amsgrad) {
                if (v > r->vmax[i]) r->vmax[i] = v;
                v = r->vmax[i];
            }
            double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
            r->p[i] = p - o->lr / bc1 * r->m[i] / (sqrt(v) / sqrt(bc2) + eps);
        }
    }
    r->first = false;
}

static void run_against_ref(const fc_optim_opts *o, double tol) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2});
    float init[N], g[N];
    ref r = {.first = true};
    for (int i = 0; i < N; i++) r.p[i] = init[i] = (float)(0.5 - 0.03 * i);
    fc_tensor *p = fc_param_from_data(ctx, FC_F32, (const int64_t[]){N}, 1, init);
    assert_non_null(p);
    fc_optim *opt = fc_optim_new(ctx, o, &p, 1);
    assert_non_null(opt);
    for (int s = 1; s <= STEPS; s++) {
        grads_at(s, g);
        set_grad(ctx, p, g);
        assert_int_equal(fc_optim_step(opt), FC_OK);
        ref_step(&r, o, g, s);
    }
    const float *pp = fc_tensor_data(p);
    for (int i = 0; i < N; i++) assert_true(fabs(pp[i] - r.p[i]) <= tol * (1 + fabs(r.p[i])));
    assert_int_equal(fc_optim_step_count(opt), STEPS);
    fc_optim_free(opt);
    fc_release(p);
    fc_ctx_stats st;
    fc_ctx_get_stats(ctx, &st);
    assert_int_equal(st.tensors_live, 0);
    fc_ctx_free(ctx);
}

/* f32 arithmetic against a double reference over 6 steps: 1e-5 relative */
static void test_optim_sgd_variants(void **state) {
    (void)state;
    run_against_ref(&(fc_optim_opts){.kind = FC_OPTIM_SGD, .lr = 0.1}, 1e-5);
    run_against_ref(&(fc_optim_opts){.kind = FC_OPTIM_SGD, .lr = 0.1, .momentum = 0.9,
                                     .dampening = 0.1, .weight_decay = 0.01},
                    1e-5);
    run_against_ref(&(fc_optim_opts){.kind = FC_OPTIM_SGD, .lr = 0.05, .momentum = 0.8,
                                     .nesterov = true, .weight_decay = 0.001},
                    1e-5);
}

static void test_optim_adam_variants(void **state) {
    (void)state;
    run_against_ref(&(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 0.01}, 1e-5);
    run_against_ref(&(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 0.01, .weight_decay = 0.1,
                                     .amsgrad = true},
                    1e-5);
    run_against_ref(&(fc_optim_opts){.kind = FC_OPTIM_ADAMW, .lr = 0.01, .weight_decay = 0.1,
                                     .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6},
                    1e-5);
}

/* A step bumps the parameter's generation; parameters without a gradient
 * are untouched. */
static void test_optim_step_is_mutation(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    float init[N] = {0}, g[N];
    fc_tensor *ps[2] = {fc_param_from_data(ctx, FC_F32, (const int64_t[]){N}, 1, init),
                        fc_param_from_data(ctx, FC_F32, (const int64_t[]){N}, 1, init)};
    fc_optim *opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAMW, .lr = 0.1}, ps, 2);
    grads_at(1, g);
    set_grad(ctx, ps[0], g);
    uint32_t g0 = fc_tensor_generation(ps[0]), g1 = fc_tensor_generation(ps[1]);
    assert_int_equal(fc_optim_step(opt), FC_OK);
    assert_true(fc_tensor_generation(ps[0]) != g0);
    assert_int_equal(fc_tensor_generation(ps[1]), g1);
    assert_null(fc_optim_state(opt, 1, "exp_avg", false));
    assert_non_null(fc_optim_state(opt, 0, "exp_avg", false));
    assert_null(fc_optim_state(opt, 0, "momentum_buffer", false));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(ctx);
    fc_optim_zero_grad(opt);
    assert_null(fc_grad(ps[0]));
    fc_optim_free(opt);
    fc_release(ps[0]);
    fc_release(ps[1]);
    fc_ctx_free(ctx);
}

/* Restoring the state into a fresh optimizer continues bit-identically. */
static void test_optim_state_roundtrip(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    float init[N], g[N];
    for (int i = 0; i < N; i++) init[i] = (float)i / N;
    fc_optim_opts o = {.kind = FC_OPTIM_ADAM, .lr = 0.02, .amsgrad = true};
    fc_tensor *a = fc_param_from_data(ctx, FC_F32, (const int64_t[]){N}, 1, init);
    fc_optim *oa = fc_optim_new(ctx, &o, &a, 1);
    for (int s = 1; s <= 3; s++) {
        grads_at(s, g);
        set_grad(ctx, a, g);
        fc_optim_step(oa);
    }
    /* clone params and state into b */
    fc_tensor *b = fc_param_from_data(ctx, FC_F32, (const int64_t[]){N}, 1, fc_tensor_data(a));
    fc_optim *ob = fc_optim_new(ctx, &o, &b, 1);
    const char *names[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    for (int k = 0; k < 3; k++)
        assert_int_equal(fc_copy_(fc_optim_state(ob, 0, names[k], true),
                                  fc_optim_state(oa, 0, names[k], false)),
                         FC_OK);
    assert_int_equal(fc_optim_set_step_count(ob, fc_optim_step_count(oa)), FC_OK);
    for (int s = 4; s <= 6; s++) {
        grads_at(s, g);
        set_grad(ctx, a, g);
        set_grad(ctx, b, g);
        fc_optim_step(oa);
        fc_optim_step(ob);
    }
    assert_memory_equal(fc_tensor_data(a), fc_tensor_data(b), sizeof(float) * N);
    fc_optim_free(oa);
    fc_optim_free(ob);
    fc_release(a);
    fc_release(b);
    fc_ctx_free(ctx);
}

/* bf16 parameters get f32 updates rounded once */
static void test_optim_bf16_param(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    uint16_t init[4];
    for (int i = 0; i < 4; i++) init[i] = fc_f32_to_bf16(1.0f + (float)i);
    fc_tensor *p = fc_param_from_data(ctx, FC_BF16, (const int64_t[]){4}, 1, init);
    fc_optim *o = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_SGD, .lr = 0.5}, &p, 1);
    float g[4] = {1, 2, -1, 0.25f};
    fc_zero_grad(&p, 1);
    fc_tensor *gt = fc_tensor_from_data(ctx, FC_F32, (const int64_t[]){4}, 1, g);
    assert_int_equal(fc_backward_with(ctx, p, gt, false), FC_OK);
    assert_int_equal(fc_tensor_dtype(fc_grad(p)), FC_F32);
    fc_optim_step(o);
    const uint16_t *pp = fc_tensor_data(p);
    for (int i = 0; i < 4; i++)
        assert_int_equal(pp[i], fc_f32_to_bf16(fc_bf16_to_f32(init[i]) - 0.5f * g[i]));
    fc_release(gt);
    fc_optim_free(o);
    fc_release(p);
    fc_ctx_free(ctx);
}

static void test_optim_bad_args(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    fc_tensor *p = fc_param_zeros(ctx, FC_F32, (const int64_t[]){3}, 1);
    assert_null(fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = -1}, &p, 1));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "lr"));
    fc_ctx_clear_error(ctx);
    assert_null(fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 1, .beta1 = 1.5},
                             &p, 1));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(ctx);
    fc_tensor *i = fc_zeros(ctx, FC_I32, (const int64_t[]){3}, 1);
    assert_null(fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_SGD, .lr = 1}, &i, 1));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_DTYPE);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_optim_step(NULL), FC_ERR_NULL_ARG);
    assert_int_equal(fc_requires_grad(i, true), FC_ERR_DTYPE);
    fc_release(i);
    fc_release(p);
    fc_ctx_stats st;
    fc_ctx_get_stats(ctx, &st);
    assert_int_equal(st.tensors_live, 0);
    fc_ctx_free(ctx);
}

static void test_clip_grad_norm(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    fc_tensor *ps[2] = {fc_param_zeros(ctx, FC_F32, (const int64_t[]){2}, 1),
                        fc_param_zeros(ctx, FC_F32, (const int64_t[]){2}, 1)};
    set_grad(ctx, ps[0], (const float[]){3, 0});
    set_grad(ctx, ps[1], (const float[]){0, 4});
    double norm;
    assert_int_equal(fc_clip_grad_norm(ctx, ps, 2, 1.0, &norm), FC_OK);
    assert_true(fabs(norm - 5.0) < 1e-12);
    const float *g0 = fc_tensor_data(fc_grad(ps[0])), *g1 = fc_tensor_data(fc_grad(ps[1]));
    assert_true(fabs(g0[0] - 0.6) < 1e-6 && fabs(g1[1] - 0.8) < 1e-6);
    /* below the limit: untouched */
    assert_int_equal(fc_clip_grad_norm(ctx, ps, 2, 10.0, &norm), FC_OK);
    assert_true(fabs(g0[0] - 0.6) < 1e-6);
    assert_int_equal(fc_clip_grad_norm(ctx, ps, 2, 0.0, NULL), FC_ERR_INVALID_ARG);
    fc_release(ps[0]);
    fc_release(ps[1]);
    fc_ctx_free(ctx);
}

static void test_lr_schedules(void **state) {
    (void)state;
    fc_lr_schedule c = {.kind = FC_LR_COSINE, .base_lr = 1.0, .warmup_steps = 10,
                        .total_steps = 110, .min_lr = 0.1};
    assert_true(fabs(fc_lr_at(&c, 0) - 0.1) < 1e-12); /* (0+1)/10 */
    assert_true(fabs(fc_lr_at(&c, 9) - 1.0) < 1e-12);
    assert_true(fabs(fc_lr_at(&c, 10) - 1.0) < 1e-12);
    assert_true(fabs(fc_lr_at(&c, 60) - 0.55) < 1e-12); /* halfway: (1 + 0.1) / 2 */
    assert_true(fabs(fc_lr_at(&c, 110) - 0.1) < 1e-12);
    assert_true(fabs(fc_lr_at(&c, 500) - 0.1) < 1e-12);
    fc_lr_schedule s = {.kind = FC_LR_STEP, .base_lr = 0.8, .step_size = 5, .gamma = 0.5};
    assert_true(fabs(fc_lr_at(&s, 4) - 0.8) < 1e-12);
    assert_true(fabs(fc_lr_at(&s, 5) - 0.4) < 1e-12);
    assert_true(fabs(fc_lr_at(&s, 12) - 0.2) < 1e-12);
    fc_lr_schedule k = {.kind = FC_LR_CONSTANT, .base_lr = 0.3};
    assert_true(fc_lr_at(&k, 1000) == 0.3);
}

/* Extreme int64 fields: no overflow (UBSan aborts on one in the sanitizer
 * build; the wrapped values gave inf or min_lr here), negative warm-up
 * counts as none. */
static void test_lr_at_extremes(void **state) {
    (void)state;
    fc_lr_schedule s = {.kind = FC_LR_STEP, .base_lr = 0.8, .warmup_steps = -1, .step_size = 1,
                        .gamma = 0.5};
    assert_true(fc_lr_at(&s, INT64_MAX) == 0.0); /* 0.8 * 0.5^(2^63-1) underflows to 0 */
    assert_true(fabs(fc_lr_at(&s, 1) - 0.4) < 1e-12);
    s.warmup_steps = INT64_MIN;
    assert_true(fc_lr_at(&s, INT64_MAX) == 0.0);
    s.warmup_steps = INT64_MAX; /* warm-up never ends */
    assert_true(fabs(fc_lr_at(&s, INT64_MAX - 1) - 0.8) < 1e-12);
    assert_true(fabs(fc_lr_at(&s, INT64_MAX) - 0.8) < 1e-12); /* at w: 0.5^0 */
    s.warmup_steps = 0;
    s.step_size = INT64_MIN;
    assert_true(fc_lr_at(&s, INT64_MAX) == 0.8);
    fc_lr_schedule c = {.kind = FC_LR_COSINE, .base_lr = 1.0, .warmup_steps = -5,
                        .total_steps = INT64_MAX, .min_lr = 0.1};
    assert_true(fabs(fc_lr_at(&c, 100) - 1.0) < 1e-12);
    assert_true(fabs(fc_lr_at(&c, INT64_MAX) - 0.1) < 1e-12);
    c.warmup_steps = 10;
    c.total_steps = INT64_MIN + 1;
    assert_true(fabs(fc_lr_at(&c, 20) - 0.1) < 1e-12);
    assert_true(fabs(fc_lr_at(&c, INT64_MIN) - 0.1) < 1e-12); /* step 0: warm-up 1/10 */
    c.warmup_steps = INT64_MAX;
    c.total_steps = INT64_MAX;
    assert_true(fabs(fc_lr_at(&c, INT64_MAX) - 0.1) < 1e-12);
}

/* A step count of INT64_MAX cannot advance: FC_ERR_OVERFLOW naming it,
 * and nothing changes (the increment overflowed before). */
static void test_optim_step_count_overflow(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    float init[N], g[N];
    for (int i = 0; i < N; i++) init[i] = (float)i / N;
    fc_tensor *p = fc_param_from_data(ctx, FC_F32, (const int64_t[]){N}, 1, init);
    fc_optim *opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 0.1}, &p, 1);
    assert_non_null(opt);
    grads_at(1, g);
    set_grad(ctx, p, g);
    assert_int_equal(fc_optim_set_step_count(opt, INT64_MAX), FC_OK);
    uint32_t gen = fc_tensor_generation(p);
    assert_int_equal(fc_optim_step(opt), FC_ERR_OVERFLOW);
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_OVERFLOW);
    assert_non_null(strstr(fc_ctx_error(ctx), "fc_optim_step"));
    assert_non_null(strstr(fc_ctx_error(ctx), "9223372036854775807"));
    fc_ctx_clear_error(ctx);
    assert_true(fc_optim_step_count(opt) == INT64_MAX);
    assert_int_equal(fc_tensor_generation(p), gen);
    assert_memory_equal(fc_tensor_data(p), init, sizeof init);
    assert_null(fc_optim_state(opt, 0, "exp_avg", false));
    /* one below still steps, to INT64_MAX */
    assert_int_equal(fc_optim_set_step_count(opt, INT64_MAX - 1), FC_OK);
    assert_int_equal(fc_optim_step(opt), FC_OK);
    assert_true(fc_optim_step_count(opt) == INT64_MAX);
    fc_optim_free(opt);
    fc_release(p);
    fc_ctx_free(ctx);
}

/* lr 0 is one rule everywhere (finite, >= 0, as torch.optim): fc_optim_new
 * refused what fc_optim_set_lr accepted. An SGD step at lr 0 changes
 * nothing but the step count. */
static void test_optim_lr_zero_agrees(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    float init[N], g[N];
    for (int i = 0; i < N; i++) init[i] = (float)i / N;
    fc_tensor *p = fc_param_from_data(ctx, FC_F32, (const int64_t[]){N}, 1, init);
    fc_optim *opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_SGD, .lr = 0}, &p, 1);
    assert_non_null(opt);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
    grads_at(1, g);
    set_grad(ctx, p, g);
    assert_int_equal(fc_optim_step(opt), FC_OK);
    assert_memory_equal(fc_tensor_data(p), init, sizeof init);
    assert_int_equal(fc_optim_set_lr(opt, 0.5), FC_OK);
    assert_int_equal(fc_optim_set_lr(opt, 0), FC_OK);
    assert_int_equal(fc_optim_set_group_lr(opt, 0, 0), FC_OK);
    fc_optim_opts o;
    assert_int_equal(fc_optim_group_opts(opt, 0, &o), FC_OK);
    assert_true(o.lr == 0);
    assert_int_equal(fc_optim_set_group_opts(opt, 0, &o), FC_OK);
    /* and below 0 both refuse, naming the value */
    assert_int_equal(fc_optim_set_lr(opt, -0.5), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "fc_optim_set_lr: lr -0.5"));
    fc_ctx_clear_error(ctx);
    assert_null(fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_SGD, .lr = -0.5}, &p, 1));
    assert_non_null(strstr(fc_ctx_error(ctx), "fc_optim_new: lr -0.5"));
    fc_ctx_clear_error(ctx);
    fc_optim_free(opt);
    fc_release(p);
    fc_ctx_free(ctx);
}

/* A step that cannot update every parameter updates none (it used to
 * advance the step count and update the parameters before the read-only
 * one): FC_ERR_READ_ONLY naming parameter 1, and parameter 0, its state
 * and the step count are as before. */
static void test_optim_step_all_or_nothing(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    float init[N], ro[N], g[N];
    for (int i = 0; i < N; i++) init[i] = ro[i] = (float)i / N;
    fc_tensor *ps[2] = {fc_param_from_data(ctx, FC_F32, (const int64_t[]){N}, 1, init),
                        fc_tensor_from_borrowed(ctx, FC_F32, (const int64_t[]){N}, 1, ro, true)};
    assert_int_equal(fc_requires_grad(ps[1], true), FC_OK);
    fc_optim *opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 0.1}, ps, 2);
    assert_non_null(opt);
    grads_at(1, g);
    set_grad(ctx, ps[0], g);
    set_grad(ctx, ps[1], g);
    uint32_t gen = fc_tensor_generation(ps[0]);
    assert_int_equal(fc_optim_step(opt), FC_ERR_READ_ONLY);
    assert_non_null(strstr(fc_ctx_error(ctx), "fc_optim_step: parameter 1 (group 0"));
    assert_non_null(strstr(fc_ctx_error(ctx), "read-only"));
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_optim_step_count(opt), 0);
    assert_int_equal(fc_tensor_generation(ps[0]), gen);
    assert_memory_equal(fc_tensor_data(ps[0]), init, sizeof init);
    assert_null(fc_optim_state(opt, 0, "exp_avg", false));
    assert_null(fc_optim_state(opt, 0, "exp_avg_sq", false));
    /* without the read-only parameter's gradient the step goes through */
    fc_zero_grad(&ps[1], 1);
    assert_int_equal(fc_optim_step(opt), FC_OK);
    assert_int_equal(fc_optim_step_count(opt), 1);
    assert_memory_not_equal(fc_tensor_data(ps[0]), init, sizeof init);
    fc_optim_free(opt);
    fc_release(ps[0]);
    fc_release(ps[1]);
    fc_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optim_sgd_variants),   cmocka_unit_test(test_optim_adam_variants),
        cmocka_unit_test(test_optim_step_is_mutation), cmocka_unit_test(test_optim_state_roundtrip),
        cmocka_unit_test(test_optim_bf16_param),     cmocka_unit_test(test_optim_bad_args),
        cmocka_unit_test(test_clip_grad_norm),       cmocka_unit_test(test_lr_schedules),
        cmocka_unit_test(test_optim_lr_zero_agrees),
        cmocka_unit_test(test_optim_step_all_or_nothing),
        cmocka_unit_test(test_lr_at_extremes),       cmocka_unit_test(test_optim_step_count_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
