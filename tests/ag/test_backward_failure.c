/* SPDX-License-Identifier: MIT */
/* test_backward_failure.c - what a failed backward leaves behind, and the
 * check_finite mode over gradients and optimizer updates.
 *
 * A backward that fails midway changes no leaf gradient and keeps the
 * graph's saved values (a retry meets the same error, or succeeds once the
 * cause is gone: test_oom_atomic sweeps that). In check_finite mode a
 * non-finite gradient fails the backward naming the op whose rule made it
 * and the input, or the leaf whose summed gradient overflowed; the
 * optimizer step refuses a non-finite gradient or update naming the
 * parameter and its group; in every case nothing changes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fucina.h"

static fc_ctx *new_ctx(void) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 3});
    assert_non_null(ctx);
    return ctx;
}

static void free_ctx(fc_ctx *ctx) {
    fc_ctx_stats st;
    fc_ctx_get_stats(ctx, &st);
    assert_int_equal(st.tensors_live, 0);
    fc_ctx_free(ctx);
}

static void expect_msg(fc_ctx *ctx, fc_status want, const char *a, const char *b) {
    assert_int_equal(fc_ctx_status(ctx), want);
    const char *m = fc_ctx_error(ctx);
    if (!strstr(m, a) || (b && !strstr(m, b))) {
        fprintf(stderr, "error \"%s\" lacks \"%s\" or \"%s\"\n", m, a, b ? b : "");
        fail();
    }
    fc_ctx_clear_error(ctx);
}

static fc_tensor *full1(fc_ctx *ctx, int64_t n, double v) {
    return fc_full(ctx, FC_F32, (const int64_t[]){n}, 1, v);
}

/* The walk runs add, the sums and mul (which hands p and q their
 * gradients) before exp, whose saved output was modified: that fails the
 * backward. The gradients are as before the call (p's from an earlier
 * backward, q and r none), and the saved values are kept: a retry meets
 * the same FC_ERR_SAVED_MODIFIED, not FC_ERR_STATE for freed values. */
static void test_backward_failed_midway_no_effect(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    const float vp[3] = {0.5f, -1, 2}, vq[3] = {3, 0.25f, -2}, vr[3] = {0.1f, 0.2f, 0.3f};
    fc_tensor *p = fc_param_from_data(ctx, FC_F32, (const int64_t[]){3}, 1, vp);
    fc_tensor *q = fc_param_from_data(ctx, FC_F32, (const int64_t[]){3}, 1, vq);
    fc_tensor *r = fc_param_from_data(ctx, FC_F32, (const int64_t[]){3}, 1, vr);
    fc_scope_begin(ctx);
    assert_int_equal(fc_backward(ctx, fc_sum(ctx, fc_mul(ctx, p, p), NULL, 0, false)), FC_OK);
    float gp[3];
    assert_int_equal(fc_tensor_copy_out(gp, sizeof gp, fc_grad(p)), FC_OK);
    fc_tensor *e = fc_exp(ctx, r);
    fc_tensor *se = fc_sum(ctx, e, NULL, 0, false);
    fc_tensor *sm = fc_sum(ctx, fc_mul(ctx, p, q), NULL, 0, false);
    fc_tensor *loss = fc_add(ctx, sm, se);
    assert_non_null(loss);
    assert_non_null(fc_tensor_data_mut(e)); /* bumps exp's saved output */
    for (int attempt = 0; attempt < 2; attempt++) {
        assert_int_equal(fc_backward(ctx, loss), FC_ERR_SAVED_MODIFIED);
        expect_msg(ctx, FC_ERR_SAVED_MODIFIED, "backward of exp", NULL);
        float now[3];
        assert_int_equal(fc_tensor_copy_out(now, sizeof now, fc_grad(p)), FC_OK);
        assert_memory_equal(now, gp, sizeof gp);
        assert_null(fc_grad(q));
        assert_null(fc_grad(r));
    }
    /* the part of the graph that is intact still walks */
    assert_int_equal(fc_backward(ctx, sm), FC_OK);
    float gq[3];
    assert_int_equal(fc_tensor_copy_out(gq, sizeof gq, fc_grad(q)), FC_OK);
    assert_memory_equal(gq, vp, sizeof gq);
    fc_scope_end(ctx);
    fc_release(p), fc_release(q), fc_release(r);
    free_ctx(ctx);
}

/* sqrt'(0) is inf: the rule's gradient is refused, named by the op and the
 * input; before, the backward gave FC_OK and an inf gradient. */
static void test_backward_check_finite_rule(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_ctx_set_check_finite(ctx, true);
    fc_tensor *p =
        fc_param_from_data(ctx, FC_F32, (const int64_t[]){3}, 1, (const float[]){1, 0, 4});
    fc_scope_begin(ctx);
    fc_tensor *loss = fc_sum(ctx, fc_sqrt(ctx, p), NULL, 0, false);
    assert_non_null(loss); /* the forward is finite */
    assert_int_equal(fc_backward(ctx, loss), FC_ERR_NON_FINITE);
    expect_msg(ctx, FC_ERR_NON_FINITE, "backward of sqrt", "for input 0 (a leaf) has 1 non-finite");
    assert_null(fc_grad(p));
    /* a non-finite output gradient is refused before the walk */
    fc_tensor *y = fc_mul(ctx, p, p);
    assert_int_equal(fc_backward_with(ctx, y, full1(ctx, 3, INFINITY), false), FC_ERR_NON_FINITE);
    expect_msg(ctx, FC_ERR_NON_FINITE, "output gradient has 3 non-finite", NULL);
    assert_null(fc_grad(p));
    /* with the mode off, the same backward goes through (inf included) */
    fc_ctx_set_check_finite(ctx, false);
    assert_int_equal(fc_backward(ctx, loss), FC_OK);
    double g1;
    assert_int_equal(fc_tensor_element(fc_grad(p), (const int64_t[]){1}, &g1), FC_OK);
    assert_true(isinf(g1));
    fc_scope_end(ctx);
    fc_release(p);
    free_ctx(ctx);
}

/* Two finite contributions (3e38 each) to one leaf overflow when summed:
 * refused naming the leaf. */
static void test_backward_check_finite_leaf_sum(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_ctx_set_check_finite(ctx, true);
    fc_tensor *p =
        fc_param_from_data(ctx, FC_F32, (const int64_t[]){1}, 1, (const float[]){1e-30f});
    fc_scope_begin(ctx);
    fc_tensor *c = full1(ctx, 1, 3e38);
    fc_tensor *loss = fc_add(ctx, fc_mul(ctx, p, c), fc_mul(ctx, c, p));
    assert_non_null(loss);
    assert_int_equal(fc_backward(ctx, loss), FC_ERR_NON_FINITE);
    expect_msg(ctx, FC_ERR_NON_FINITE, "summed gradient of the leaf f32[1]", "of mul");
    assert_null(fc_grad(p));
    fc_scope_end(ctx);
    fc_release(p);
    free_ctx(ctx);
}

/* ---- optimizer ------------------------------------------------------------------ */

typedef struct opt_fx {
    fc_ctx *ctx;
    fc_tensor *ps[2];
    fc_optim *opt;
    float init[2][4];
} opt_fx;

static void opt_setup(opt_fx *f, const fc_optim_opts *o, const float *g0, const float *g1) {
    f->ctx = new_ctx();
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 4; i++)
            f->init[k][i] = 0.25f * (float)(i + k);
        f->ps[k] = fc_param_from_data(f->ctx, FC_F32, (const int64_t[]){4}, 1, f->init[k]);
    }
    f->opt = fc_optim_new(f->ctx, o, &f->ps[0], 1);
    assert_non_null(f->opt);
    assert_int_equal(fc_optim_add_group(f->opt, o, &f->ps[1], 1), FC_OK);
    const float *gs[2] = {g0, g1};
    for (int k = 0; k < 2; k++) {
        fc_tensor *g = fc_tensor_from_data(f->ctx, FC_F32, (const int64_t[]){4}, 1, gs[k]);
        assert_int_equal(fc_backward_with(f->ctx, f->ps[k], g, false), FC_OK);
        fc_release(g);
    }
    fc_ctx_set_check_finite(f->ctx, true);
}

/* nothing changed: parameters and step count (state: checked per test) */
static void opt_unchanged(opt_fx *f) {
    for (int k = 0; k < 2; k++)
        assert_memory_equal(fc_tensor_data(f->ps[k]), f->init[k], sizeof f->init[k]);
    assert_int_equal(fc_optim_step_count(f->opt), 0);
}

static void opt_teardown(opt_fx *f) {
    fc_optim_free(f->opt);
    fc_release(f->ps[0]), fc_release(f->ps[1]);
    free_ctx(f->ctx);
}

/* The case: an inf gradient gave a -inf parameter with FC_OK. */
static void test_optim_check_finite_gradient(void **state) {
    (void)state;
    opt_fx f;
    const float ok[4] = {1, 2, 3, 4}, bad[4] = {1, INFINITY, 3, 4};
    opt_setup(&f, &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 0.1}, ok, bad);
    assert_int_equal(fc_optim_step(f.opt), FC_ERR_NON_FINITE);
    expect_msg(f.ctx, FC_ERR_NON_FINITE, "fc_optim_step: parameter 1 (group 1, f32[4]) has 1",
               "non-finite gradient");
    opt_unchanged(&f);
    assert_null(fc_optim_state(f.opt, 0, "exp_avg", false));
    /* with the mode off it goes through, and the inf lands in the parameter */
    fc_ctx_set_check_finite(f.ctx, false);
    assert_int_equal(fc_optim_step(f.opt), FC_OK);
    assert_false(isfinite(((const float *)fc_tensor_data(f.ps[1]))[1]));
    opt_teardown(&f);
}

/* Finite gradients whose update overflows: the parameter (SGD, lr 1e10 on
 * a 1e30 gradient) or Adam's second moment ((1 - beta2) g^2 = 9e47). */
static void test_optim_check_finite_update(void **state) {
    (void)state;
    opt_fx f;
    const float ok[4] = {1, 2, 3, 4}, big[4] = {1, 1e30f, 3, 4}, huge[4] = {3e25f, 1, 1, 1};
    opt_setup(&f, &(fc_optim_opts){.kind = FC_OPTIM_SGD, .lr = 1e10, .momentum = 0.5}, big, ok);
    assert_int_equal(fc_optim_step(f.opt), FC_ERR_NON_FINITE);
    expect_msg(f.ctx, FC_ERR_NON_FINITE, "fc_optim_step: parameter 0 (group 0, f32[4])",
               "1 non-finite value in its parameter");
    opt_unchanged(&f);
    assert_null(fc_optim_state(f.opt, 0, "momentum_buffer", false));
    assert_null(fc_optim_state(f.opt, 1, "momentum_buffer", false));
    opt_teardown(&f);

    opt_setup(&f, &(fc_optim_opts){.kind = FC_OPTIM_ADAMW, .lr = 0.1}, ok, huge);
    assert_int_equal(fc_optim_step(f.opt), FC_ERR_NON_FINITE);
    expect_msg(f.ctx, FC_ERR_NON_FINITE, "parameter 1 (group 1", "in its exp_avg_sq");
    opt_unchanged(&f);
    assert_null(fc_optim_state(f.opt, 0, "exp_avg_sq", false));
    /* a finite step commits exactly what the unchecked step computes */
    fc_optim_zero_grad(f.opt);
    fc_tensor *g = fc_tensor_from_data(f.ctx, FC_F32, (const int64_t[]){4}, 1, ok);
    assert_int_equal(fc_backward_with(f.ctx, f.ps[0], g, false), FC_OK);
    assert_int_equal(fc_optim_step(f.opt), FC_OK);
    float checked[4];
    memcpy(checked, fc_tensor_data(f.ps[0]), sizeof checked);
    fc_ctx *c2 = new_ctx();
    fc_tensor *p2 = fc_param_from_data(c2, FC_F32, (const int64_t[]){4}, 1, f.init[0]);
    fc_optim *o2 = fc_optim_new(c2, &(fc_optim_opts){.kind = FC_OPTIM_ADAMW, .lr = 0.1}, &p2, 1);
    fc_tensor *g2 = fc_tensor_from_data(c2, FC_F32, (const int64_t[]){4}, 1, ok);
    assert_int_equal(fc_backward_with(c2, p2, g2, false), FC_OK);
    assert_int_equal(fc_optim_step(o2), FC_OK);
    assert_memory_equal(fc_tensor_data(p2), checked, sizeof checked);
    fc_release(g2), fc_release(g);
    fc_optim_free(o2);
    fc_release(p2);
    free_ctx(c2);
    opt_teardown(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backward_failed_midway_no_effect),
        cmocka_unit_test(test_backward_check_finite_rule),
        cmocka_unit_test(test_backward_check_finite_leaf_sum),
        cmocka_unit_test(test_optim_check_finite_gradient),
        cmocka_unit_test(test_optim_check_finite_update),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
