/* SPDX-License-Identifier: MIT */
/* test_cast_grad.c - casts and copies (src/ops/cast.c) are differentiable: fc_to between
 * float dtypes, fc_clone and fc_contiguous pass the gradient through (cast
 * back to the input's gradient dtype); casts to integers cut the graph; and
 * in-place fc_copy_ into a tensor that requires grad is refused. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "fucina.h"

static fc_tensor *fn_casts(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n, (void)user;
    /* f64 -> f32 -> f64 would lose precision; stay exact: clone, a
     * transposed contiguous copy, and a same-dtype fc_to */
    fc_tensor *c = fc_clone(ctx, in[0]);
    fc_tensor *t = fc_contiguous(ctx, fc_transpose(ctx, c, 0, 1));
    fc_tensor *s = fc_to(ctx, t, FC_F64);
    return fc_mul(ctx, s, s);
}

static void test_grad_cast_gradcheck(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    double v[6] = {0.5, -1.25, 2, 0.75, -0.3, 1.1};
    fc_tensor *x = fc_tensor_from_data(ctx, FC_F64, (const int64_t[]){2, 3}, 2, v);
    fc_gradcheck_report r;
    fc_status st = fc_gradcheck(ctx, fn_casts, NULL, &x, 1,
                                &(fc_gradcheck_opts){.check_all_f64 = true}, &r);
    assert_int_equal(st, FC_OK);
    assert_int_equal(r.checked, 6);
    fc_release(x);
    fc_ctx_free(ctx);
}

/* bf16 parameter -> f32 math: the parameter receives an f32 gradient */
static void test_grad_cast_bf16_param(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    uint16_t b[4];
    float f[4] = {1, -2, 0.5f, 3};
    for (int i = 0; i < 4; i++) b[i] = fc_f32_to_bf16(f[i]);
    fc_tensor *p = fc_param_from_data(ctx, FC_BF16, (const int64_t[]){4}, 1, b);
    fc_scope_begin(ctx);
    fc_tensor *x = fc_to(ctx, p, FC_F32);
    assert_true(fc_tensor_requires_grad(x));
    fc_tensor *loss = fc_sum(ctx, fc_mul(ctx, x, x), NULL, 0, false);
    assert_int_equal(fc_backward(ctx, loss), FC_OK);
    fc_scope_end(ctx);
    fc_tensor *g = fc_grad(p);
    assert_non_null(g);
    assert_int_equal(fc_tensor_dtype(g), FC_F32);
    const float *gv = fc_tensor_data(g);
    for (int i = 0; i < 4; i++) assert_true(gv[i] == 2 * f[i]);
    /* a cast to an integer dtype does not require grad */
    fc_scope_begin(ctx);
    assert_false(fc_tensor_requires_grad(fc_to(ctx, p, FC_I32)));
    fc_scope_end(ctx);
    /* in-place copy into a parameter: refused with grad on, allowed off */
    fc_tensor *z = fc_zeros(ctx, FC_BF16, (const int64_t[]){4}, 1);
    assert_int_equal(fc_copy_(p, z), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "fc_copy_"));
    fc_ctx_clear_error(ctx);
    fc_no_grad_begin(ctx);
    assert_int_equal(fc_copy_(p, z), FC_OK);
    fc_no_grad_end(ctx);
    fc_release(z);
    fc_release(p);
    fc_ctx_stats st;
    fc_ctx_get_stats(ctx, &st);
    assert_int_equal(st.tensors_live, 0);
    fc_ctx_free(ctx);
}

/* fc_to / fc_contiguous inside a scope loop leak nothing */
static void test_grad_cast_scope_no_leak(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    fc_tensor *x = fc_ones(ctx, FC_F32, (const int64_t[]){8}, 1);
    for (int i = 0; i < 50; i++) {
        fc_scope_begin(ctx);
        fc_to(ctx, x, FC_F32);
        fc_contiguous(ctx, x);
        fc_scope_end(ctx);
    }
    fc_ctx_stats st;
    fc_ctx_get_stats(ctx, &st);
    assert_int_equal(st.tensors_live, 1);
    fc_release(x);
    fc_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_cast_gradcheck),
        cmocka_unit_test(test_grad_cast_bf16_param),
        cmocka_unit_test(test_grad_cast_scope_no_leak),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
