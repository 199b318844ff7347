/* SPDX-License-Identifier: MIT */
/* test_lr_sched.c - learning-rate schedules against torch.optim.lr_scheduler
 * (tests/data/ag/lr_ref.h, made by scripts/gen_lr_ref.py): every closed-form
 * kind alone and after a warm-up over 300 steps to 1e-12 relative, and
 * reduce-on-plateau exactly over 300 metrics in four configurations; each
 * bad field refused with FC_ERR_INVALID_ARG naming its value; the plateau
 * state saved as text mid-run and restored resumes exactly, and bad text is
 * FC_ERR_FORMAT. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fucina.h"

#include "../data/ag/lr_ref.h"

static void test_closed_forms_match_torch(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    assert_non_null(ctx);
    double worst = 0;
    for (size_t r = 0; r < sizeof lr_refs / sizeof lr_refs[0]; r++) {
        const lr_ref *ref = &lr_refs[r];
        if (fc_lr_schedule_check(ctx, &ref->s) != FC_OK)
            fail_msg("%s: %s", ref->name, fc_ctx_error(ctx));
        for (int k = 0; k < LR_REF_STEPS; k++) {
            double got = fc_lr_at(&ref->s, k), want = ref->lr[k];
            double err = fabs(got - want) / fabs(want);
            if (!(err <= 1e-12))
                fail_msg("%s step %d: %.17g, torch %.17g (rel %.3g)", ref->name, k, got, want,
                         err);
            if (err > worst) worst = err;
        }
    }
    printf("closed forms: worst relative difference from torch %.3g\n", worst);
    fc_ctx_free(ctx);
}

static void test_plateau_matches_torch(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    assert_non_null(ctx);
    for (size_t r = 0; r < sizeof lr_plateau_refs / sizeof lr_plateau_refs[0]; r++) {
        const lr_plateau_ref *ref = &lr_plateau_refs[r];
        fc_lr_plateau p;
        assert_int_equal(fc_lr_plateau_init(ctx, &p, ref->lr, &ref->o), FC_OK);
        int cuts = 0;
        double last = ref->lr;
        for (int t = 0; t < LR_REF_STEPS; t++) {
            assert_int_equal(fc_lr_plateau_step(ctx, &p, lr_ref_metric[t]), FC_OK);
            if (p.lr != ref->lr_after[t])
                fail_msg("%s after metric %d: lr %.17g, torch %.17g", ref->name, t, p.lr,
                         ref->lr_after[t]);
            cuts += p.lr != last;
            last = p.lr;
        }
        /* plateau_eps cuts once: its eps refuses the second (2.5e-7 < 3e-7) */
        if (cuts < 1 || (cuts < 3 && strcmp(ref->name, "plateau_eps") != 0))
            fail_msg("%s: only %d reductions; the sequence tests little", ref->name, cuts);
        printf("%s: %d reductions, final lr %.17g\n", ref->name, cuts, p.lr);
    }
    fc_ctx_free(ctx);
}

static void test_schedule_bad_fields(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    assert_non_null(ctx);
    static const int64_t unsorted[3] = {10, 30, 30}, negative[2] = {-1, 5};
    const struct {
        fc_lr_schedule s;
        const char *msg;
    } bad[] = {
        {{.kind = (fc_lr_kind)FC_LR_KIND_COUNT, .base_lr = 1}, "unknown kind 6"},
        {{.kind = FC_LR_CONSTANT, .base_lr = -0.1}, "base_lr -0.1"},
        {{.kind = FC_LR_CONSTANT, .base_lr = NAN}, "base_lr nan"},
        {{.kind = FC_LR_CONSTANT, .base_lr = 1, .warmup_steps = -3}, "warmup_steps -3"},
        {{.kind = FC_LR_STEP, .base_lr = 1, .step_size = 0}, "step_size 0"},
        {{.kind = FC_LR_STEP, .base_lr = 1, .step_size = 5, .gamma = -0.5}, "gamma -0.5"},
        {{.kind = FC_LR_STEP, .base_lr = 1, .step_size = 5, .gamma = INFINITY}, "gamma inf"},
        {{.kind = FC_LR_MULTISTEP, .base_lr = 1, .n_milestones = -1}, "n_milestones -1"},
        {{.kind = FC_LR_MULTISTEP, .base_lr = 1, .n_milestones = 2},
         "milestones is NULL with n_milestones 2"},
        {{.kind = FC_LR_MULTISTEP, .base_lr = 1, .milestones = unsorted, .n_milestones = 3},
         "milestones[2] 30 must be above milestones[1] 30"},
        {{.kind = FC_LR_MULTISTEP, .base_lr = 1, .milestones = negative, .n_milestones = 2},
         "milestones[0] -1"},
        {{.kind = FC_LR_EXPONENTIAL, .base_lr = 1}, "gamma 0 must be finite and > 0"},
        {{.kind = FC_LR_EXPONENTIAL, .base_lr = 1, .gamma = -1}, "gamma -1"},
        {{.kind = FC_LR_COSINE, .base_lr = 1, .warmup_steps = 10, .total_steps = 10},
         "total_steps 10 must be above warmup_steps 10"},
        {{.kind = FC_LR_COSINE, .base_lr = 1, .total_steps = 10, .min_lr = -1e-3},
         "min_lr -0.001"},
        {{.kind = FC_LR_ONECYCLE, .base_lr = 1}, "total_steps 0"},
        {{.kind = FC_LR_ONECYCLE, .base_lr = 1, .total_steps = 100, .pct_start = 1.5},
         "pct_start 1.5"},
        {{.kind = FC_LR_ONECYCLE, .base_lr = 1, .total_steps = 100, .pct_start = -0.1},
         "pct_start -0.1"},
        {{.kind = FC_LR_ONECYCLE, .base_lr = 1, .total_steps = 110, .warmup_steps = 10,
          .pct_start = 0.01},
         "pct_start 0.01 of 100 steps leaves a first phase of length 0"},
        {{.kind = FC_LR_ONECYCLE, .base_lr = 1, .total_steps = 100, .div_factor = -2},
         "div_factor -2"},
        {{.kind = FC_LR_ONECYCLE, .base_lr = 1, .total_steps = 100, .final_div_factor = NAN},
         "final_div_factor nan"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        assert_int_equal(fc_lr_schedule_check(ctx, &bad[k].s), FC_ERR_INVALID_ARG);
        if (!strstr(fc_ctx_error(ctx), bad[k].msg))
            fail_msg("case %zu: '%s' lacks '%s'", k, fc_ctx_error(ctx), bad[k].msg);
        assert_non_null(strstr(fc_ctx_error(ctx), "fc_lr_schedule_check: "));
        fc_ctx_clear_error(ctx);
        (void)fc_lr_at(&bad[k].s, 50); /* defined for any field: no crash, no UB */
    }
    assert_int_equal(fc_lr_schedule_check(ctx, NULL), FC_ERR_NULL_ARG);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_lr_schedule_check(NULL, NULL), FC_ERR_NULL_ARG);
    /* fields other kinds read are not checked: a cosine ignores step_size */
    assert_int_equal(fc_lr_schedule_check(ctx, &(fc_lr_schedule){.kind = FC_LR_COSINE,
                                                                 .base_lr = 1, .step_size = -4,
                                                                 .total_steps = 5}),
                     FC_OK);
    fc_ctx_free(ctx);
}

/* Values the torch sequences do not reach: a NULL milestones list counts
 * as none, one-cycle stays at its final lr past the end and warms up to
 * base_lr/div_factor, and a one-step warm-up is the start itself. */
static void test_closed_form_edges(void **state) {
    (void)state;
    fc_lr_schedule m = {.kind = FC_LR_MULTISTEP, .base_lr = 0.5, .n_milestones = 3};
    assert_true(fc_lr_at(&m, 100) == 0.5);
    fc_lr_schedule o = {.kind = FC_LR_ONECYCLE, .base_lr = 1.0, .total_steps = 100,
                        .warmup_steps = 10, .div_factor = 4, .final_div_factor = 2};
    assert_true(fc_lr_at(&o, 0) == 0.25 / 10);
    assert_true(fabs(fc_lr_at(&o, 10) - 0.25) < 1e-15);
    assert_true(fc_lr_at(&o, 99) == 0.125);
    assert_true(fc_lr_at(&o, 100) == 0.125);
    assert_true(fc_lr_at(&o, INT64_MAX) == 0.125);
    o.total_steps = 5; /* shorter than the warm-up: the final lr after it */
    assert_true(fc_lr_at(&o, 20) == 0.125);
    fc_lr_schedule e = {.kind = FC_LR_EXPONENTIAL, .base_lr = 2, .gamma = 0.5, .warmup_steps = 1};
    assert_true(fc_lr_at(&e, 0) == 2 && fc_lr_at(&e, 1) == 2 && fc_lr_at(&e, 3) == 0.5);
    assert_true(fc_lr_at(&e, INT64_MAX) == 0);
    fc_lr_schedule s = {.kind = FC_LR_STEP, .base_lr = 1, .step_size = 2}; /* gamma 0: 0.1 */
    assert_true(fabs(fc_lr_at(&s, 5) - 1e-2) < 1e-17);
}

static void test_plateau_options_and_state(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    assert_non_null(ctx);
    fc_lr_plateau p;
    assert_int_equal(fc_lr_plateau_init(ctx, &p, 0.1, NULL), FC_OK);
    fc_lr_plateau_opts d = fc_lr_plateau_opts_default();
    assert_true(p.opts.factor == 0.1 && p.opts.patience == 10 && p.opts.threshold == 1e-4);
    assert_true(p.opts.cooldown == 0 && p.opts.min_lr == 0 && p.opts.eps == 1e-8);
    assert_memory_equal(&p.opts, &d, sizeof d);
    assert_true(p.lr == 0.1 && isinf(p.best) && p.bad_steps == 0 && p.cooldown_left == 0);
    /* zero factor and eps take the defaults; patience 0 stays 0 */
    assert_int_equal(fc_lr_plateau_init(ctx, &p, 0.1, &(fc_lr_plateau_opts){.factor = 0}), FC_OK);
    assert_true(p.opts.factor == 0.1 && p.opts.eps == 1e-8 && p.opts.patience == 0);
    const struct {
        double lr;
        fc_lr_plateau_opts o;
        const char *msg;
    } bad[] = {
        {0.1, {.factor = 1}, "factor 1 must be in (0, 1)"},
        {0.1, {.factor = -0.5}, "factor -0.5"},
        {0.1, {.factor = NAN}, "factor nan"},
        {0.1, {.patience = -1}, "patience -1"},
        {0.1, {.cooldown = -2}, "cooldown -2"},
        {0.1, {.threshold = 1}, "threshold 1"},
        {0.1, {.threshold = -1e-4}, "threshold -0.0001"},
        {0.1, {.min_lr = -1}, "min_lr -1"},
        {0.1, {.min_lr = INFINITY}, "min_lr inf"},
        {0.1, {.eps = -1}, "eps -1"},
        {-0.1, {.factor = 0}, "lr -0.1"},
        {INFINITY, {.factor = 0}, "lr inf"},
    };
    fc_lr_plateau keep = p;
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        assert_int_equal(fc_lr_plateau_init(ctx, &p, bad[k].lr, &bad[k].o), FC_ERR_INVALID_ARG);
        if (!strstr(fc_ctx_error(ctx), bad[k].msg))
            fail_msg("case %zu: '%s' lacks '%s'", k, fc_ctx_error(ctx), bad[k].msg);
        fc_ctx_clear_error(ctx);
        assert_memory_equal(&p, &keep, sizeof p);
    }
    /* a corrupted state is refused by the step, which then changes nothing */
    p.bad_steps = -5;
    assert_int_equal(fc_lr_plateau_step(ctx, &p, 1.0), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "fc_lr_plateau_step: bad_steps -5"));
    fc_ctx_clear_error(ctx);
    assert_true(p.bad_steps == -5);
    p.bad_steps = 0;
    p.best = NAN;
    assert_int_equal(fc_lr_plateau_step(ctx, &p, 1.0), FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(ctx);
    /* a NaN metric is never better (torch's rule): with patience 0 it cuts */
    assert_int_equal(fc_lr_plateau_init(ctx, &p, 1.0, &(fc_lr_plateau_opts){.factor = 0.5}),
                     FC_OK);
    assert_int_equal(fc_lr_plateau_step(ctx, &p, NAN), FC_OK);
    assert_true(p.lr == 0.5 && isinf(p.best));
    /* patience INT64_MAX: the bad count saturates instead of overflowing */
    assert_int_equal(
        fc_lr_plateau_init(ctx, &p, 1.0, &(fc_lr_plateau_opts){.patience = INT64_MAX}), FC_OK);
    p.bad_steps = INT64_MAX;
    p.best = 0;
    assert_int_equal(fc_lr_plateau_step(ctx, &p, 1.0), FC_OK);
    assert_true(p.bad_steps == INT64_MAX && p.lr == 1.0);
    assert_int_equal(fc_lr_plateau_init(NULL, &p, 1.0, NULL), FC_ERR_NULL_ARG);
    assert_int_equal(fc_lr_plateau_init(ctx, NULL, 1.0, NULL), FC_ERR_NULL_ARG);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_lr_plateau_step(ctx, NULL, 1.0), FC_ERR_NULL_ARG);
    fc_ctx_clear_error(ctx);
    fc_ctx_free(ctx);
}

/* Save as text after 150 metrics, restore into another state, and both
 * continue to the same lr at every one of the next 150 (and torch's). */
static void test_plateau_text_round_trip(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    assert_non_null(ctx);
    const lr_plateau_ref *ref = &lr_plateau_refs[1];
    fc_lr_plateau p, q;
    assert_int_equal(fc_lr_plateau_init(ctx, &p, ref->lr, &ref->o), FC_OK);
    assert_int_equal(fc_lr_plateau_init(ctx, &q, 0.9, NULL), FC_OK);
    for (int t = 0; t < 150; t++) assert_int_equal(fc_lr_plateau_step(ctx, &p, lr_ref_metric[t]), FC_OK);
    char text[400];
    int n = fc_lr_plateau_to_text(text, sizeof text, &p);
    assert_true(n > 0 && n < (int)sizeof text);
    assert_int_equal((int)strlen(text), n);
    assert_int_equal(fc_lr_plateau_to_text(NULL, 0, &p), n);
    char small[20];
    assert_int_equal(fc_lr_plateau_to_text(small, sizeof small, &p), n);
    assert_int_equal((int)strlen(small), (int)sizeof small - 1);
    assert_memory_equal(small, text, sizeof small - 1);
    assert_int_equal(fc_lr_plateau_to_text(text, sizeof text, NULL), 0);
    n = fc_lr_plateau_to_text(text, sizeof text, &p);
    assert_int_equal(fc_lr_plateau_from_text(ctx, &q, text), FC_OK);
    assert_memory_equal(&p, &q, sizeof p);
    for (int t = 150; t < LR_REF_STEPS; t++) {
        assert_int_equal(fc_lr_plateau_step(ctx, &p, lr_ref_metric[t]), FC_OK);
        assert_int_equal(fc_lr_plateau_step(ctx, &q, lr_ref_metric[t]), FC_OK);
        assert_true(q.lr == p.lr && q.lr == ref->lr_after[t]);
    }
    /* a fresh state's best is +inf, which the text carries too */
    assert_int_equal(fc_lr_plateau_init(ctx, &p, 0.25, NULL), FC_OK);
    fc_lr_plateau_to_text(text, sizeof text, &p);
    assert_int_equal(fc_lr_plateau_from_text(ctx, &q, text), FC_OK);
    assert_memory_equal(&p, &q, sizeof p);

    fc_lr_plateau keep = q;
    const struct {
        const char *text;
        fc_status st;
        const char *msg;
    } bad[] = {
        {"", FC_ERR_FORMAT, "expected 'lr='"},
        {"lr=0.1", FC_ERR_FORMAT, "no space before field 'best'"},
        {"lr=x best=inf", FC_ERR_FORMAT, "field 'lr' has a bad value 'x"},
        {"lr= 0.1 best=inf", FC_ERR_FORMAT, "field 'lr' has a bad value ' 0.1"},
        {"lr=0.1 best=inf bad_steps=1.5", FC_ERR_FORMAT, "field 'bad_steps' has a bad value"},
        {"lr=0.1 best=inf bad_steps=+1", FC_ERR_FORMAT, "field 'bad_steps' is not an integer"},
        {"lr=0.1 best=inf bad_steps=99999999999999999999", FC_ERR_FORMAT,
         "field 'bad_steps' has a bad value"},
        {"lr=1e999 best=inf", FC_ERR_FORMAT, "field 'lr' has a bad value"},
        {"lr=0.1 best=inf bad_steps=0 cooldown_left=0 factor=0.1 patience=10 threshold=0.0001 "
         "cooldown=0 min_lr=0 eps=1e-08 extra",
         FC_ERR_FORMAT, "text after the last field"},
        {"lr=0.1 best=inf bad_steps=0 cooldown_left=0 factor=2 patience=10 threshold=0.0001 "
         "cooldown=0 min_lr=0 eps=1e-08",
         FC_ERR_INVALID_ARG, "factor 2 must be in (0, 1)"},
        {"lr=0.1 best=nan bad_steps=0 cooldown_left=0 factor=0.1 patience=10 threshold=0.0001 "
         "cooldown=0 min_lr=0 eps=1e-08",
         FC_ERR_INVALID_ARG, "best is NaN"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        assert_int_equal(fc_lr_plateau_from_text(ctx, &q, bad[k].text), bad[k].st);
        if (!strstr(fc_ctx_error(ctx), bad[k].msg))
            fail_msg("case %zu: '%s' lacks '%s'", k, fc_ctx_error(ctx), bad[k].msg);
        fc_ctx_clear_error(ctx);
        assert_memory_equal(&q, &keep, sizeof q);
    }
    assert_int_equal(fc_lr_plateau_from_text(ctx, &q, NULL), FC_ERR_NULL_ARG);
    fc_ctx_clear_error(ctx);
    fc_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closed_forms_match_torch),
        cmocka_unit_test(test_plateau_matches_torch),
        cmocka_unit_test(test_schedule_bad_fields),
        cmocka_unit_test(test_closed_form_edges),
        cmocka_unit_test(test_plateau_options_and_state),
        cmocka_unit_test(test_plateau_text_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
