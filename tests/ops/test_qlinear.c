/* SPDX-License-Identifier: MIT */
/* test_qlinear.c - fc_linear with block-quantized weights: the in-kernel
 * decoding path against dequantize + dense linear, its errors, gradients to
 * x and bias through a frozen quantized W (dequantized a panel of rows at a
 * time, never whole), and a LoRA-style adapter trained
 * over a q4_k base whose loss falls. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fucina.h"

enum { OUT = 24, IN = 256, M = 5 };

static fc_tensor *quantized_weight(fc_ctx *ctx, fc_dtype dt) {
    fc_scope_begin(ctx);
    fc_tensor *w = fc_randn(ctx, FC_F32, (const int64_t[]){OUT, IN}, 2);
    fc_tensor *q = fc_keep(fc_to(ctx, w, dt));
    fc_scope_end(ctx);
    return q;
}

/* y = x . deq(W)^T + b, compared with the dense product of the dequantized
 * weight: the q8 activation packing of q4_0/q8_0/q4_k/q6_k bounds the
 * difference by sum_k |x|max/254 * |w| per output, well under 2% of the
 * output's scale here; nf4 and the generic path only round in f32. */
static void test_qlinear_matches_dequantized(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.seed = 3, .threads = 2});
    const fc_dtype types[] = {FC_Q4_0, FC_Q8_0, FC_Q4_K, FC_Q6_K, FC_NF4, FC_Q5_1, FC_IQ4_XS};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        fc_scope_begin(ctx);
        fc_tensor *wq = quantized_weight(ctx, types[t]);
        fc_tensor *x = fc_randn(ctx, FC_F32, (const int64_t[]){M, IN}, 2);
        fc_tensor *b = fc_randn(ctx, FC_F32, (const int64_t[]){OUT}, 1);
        fc_tensor *y = fc_linear(ctx, x, wq, b);
        fc_tensor *ref = fc_linear(ctx, x, fc_to(ctx, wq, FC_F32), b);
        assert_non_null(y);
        assert_non_null(ref);
        const float *yp = fc_tensor_data(y), *rp = fc_tensor_data(ref);
        double scale = 0, worst = 0;
        for (int i = 0; i < M * OUT; i++)
            scale = fmax(scale, fabs(rp[i]));
        for (int i = 0; i < M * OUT; i++)
            worst = fmax(worst, fabs(yp[i] - rp[i]));
        assert_true(worst <= 0.02 * scale);
        fc_release(wq);
        fc_scope_end(ctx);
    }
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
    fc_ctx_free(ctx);
}

static void test_qlinear_errors(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    fc_scope_begin(ctx);
    fc_tensor *wq = fc_keep(quantized_weight(ctx, FC_Q4_K));
    fc_tensor *x = fc_randn(ctx, FC_F32, (const int64_t[]){M, 128}, 2);
    assert_null(fc_linear(ctx, x, wq, NULL));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(fc_ctx_error(ctx), "linear"));
    fc_ctx_clear_error(ctx);
    fc_tensor *x64 = fc_randn(ctx, FC_F64, (const int64_t[]){M, IN}, 2);
    assert_null(fc_linear(ctx, x64, wq, NULL));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_DTYPE);
    fc_ctx_clear_error(ctx);
    fc_tensor *xf = fc_randn(ctx, FC_F32, (const int64_t[]){M, IN}, 2);
    fc_tensor *bad_bias = fc_zeros(ctx, FC_F32, (const int64_t[]){OUT + 1}, 1);
    assert_null(fc_linear(ctx, xf, wq, bad_bias));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_SHAPE_MISMATCH);
    fc_ctx_clear_error(ctx);
    fc_tensor *act = fc_to(ctx, fc_randn(ctx, FC_F32, (const int64_t[]){OUT, IN}, 2), FC_Q8_K);
    assert_null(fc_linear(ctx, xf, act, NULL));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_DTYPE);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_requires_grad(wq, true), FC_ERR_DTYPE);
    fc_ctx_clear_error(ctx);
    fc_release(wq);
    fc_scope_end(ctx);
    fc_ctx_free(ctx);
}

/* gradients to x and bias through the quantized weight equal those of the
 * dense product with the dequantized weight (same graph, exact dx rule) */
static void test_qlinear_gradients(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.seed = 9});
    fc_tensor *wq = quantized_weight(ctx, FC_Q4_K);
    fc_tensor *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){M, IN}, 2, 1.0);
    fc_tensor *b = fc_param_zeros(ctx, FC_F32, (const int64_t[]){OUT}, 1);
    fc_scope_begin(ctx);
    fc_tensor *y = fc_linear(ctx, x, wq, b);
    assert_int_equal(fc_backward(ctx, fc_sum(ctx, fc_square(ctx, y), NULL, 0, false)), FC_OK);
    fc_tensor *gx = fc_keep(fc_clone(ctx, fc_grad(x))), *gb = fc_keep(fc_clone(ctx, fc_grad(b)));
    fc_tensor *ps[2] = {x, b};
    fc_zero_grad(ps, 2);
    fc_tensor *wd = fc_to(ctx, wq, FC_F32);
    fc_tensor *y2 = fc_linear(ctx, x, wd, b);
    assert_int_equal(fc_backward(ctx, fc_sum(ctx, fc_square(ctx, y2), NULL, 0, false)), FC_OK);
    fc_scope_end(ctx);
    /* the forward outputs differ by the activation packing; the gradients
     * follow them: compare relative to the gradient scale */
    const float *a = fc_tensor_data(gx), *r = fc_tensor_data(fc_grad(x));
    double scale = 0, worst = 0;
    for (int i = 0; i < M * IN; i++)
        scale = fmax(scale, fabs(r[i]));
    for (int i = 0; i < M * IN; i++)
        worst = fmax(worst, fabs(a[i] - r[i]));
    assert_true(worst <= 0.03 * scale);
    a = fc_tensor_data(gb), r = fc_tensor_data(fc_grad(b));
    scale = worst = 0;
    for (int i = 0; i < OUT; i++)
        scale = fmax(scale, fabs(r[i]));
    for (int i = 0; i < OUT; i++)
        worst = fmax(worst, fabs(a[i] - r[i]));
    assert_true(worst <= 0.03 * scale);
    fc_release(gx);
    fc_release(gb);
    fc_release(wq);
    fc_release(x);
    fc_release(b);
    fc_ctx_free(ctx);
}

/* dx through a quantized W larger than one dequantization panel (1 MiB of
 * f32 rows): equal to g . deq(W) up to f32 summation order, and the
 * backward never holds a whole f32 copy of W (the context's high-water
 * mark, measured in a context that never saw W in f32). */
static void test_qlinear_dx_by_panels(void **state) {
    (void)state;
    enum { N = 2100, K = 256, B = 3 }; /* 3 panels: 1024 + 1024 + 52 rows */
    fc_ctx *src = fc_ctx_new(&(fc_ctx_opts){.seed = 5, .threads = 1});
    fc_tensor *wq0 = fc_to(src, fc_randn(src, FC_F32, (const int64_t[]){N, K}, 2), FC_Q8_0);
    assert_non_null(wq0);
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.seed = 6, .threads = 1});
    fc_tensor *wq =
        fc_tensor_from_data(ctx, FC_Q8_0, (const int64_t[]){N, K}, 2, fc_tensor_data(wq0));
    fc_ctx_free(src);
    fc_tensor *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){B, K}, 2, 1.0);
    fc_tensor *g = fc_randn(ctx, FC_F32, (const int64_t[]){B, N}, 2);
    fc_tensor *y = fc_linear(ctx, x, wq, NULL);
    assert_non_null(y);
    fc_ctx_stats before, after;
    fc_ctx_get_stats(ctx, &before);
    assert_int_equal(fc_backward_with(ctx, y, g, false), FC_OK);
    fc_ctx_get_stats(ctx, &after);
    int64_t f32_bytes = (int64_t)N * K * 4;
    printf("backward through q8_0 [%d, %d]: peak %lld bytes above the live %lld (whole f32 W: "
           "%lld)\n",
           N, K, (long long)(after.bytes_peak - before.bytes_live), (long long)before.bytes_live,
           (long long)f32_bytes);
    assert_true(after.bytes_peak - before.bytes_live < f32_bytes * 6 / 10);
    fc_scope_begin(ctx);
    fc_tensor *ref = fc_matmul(ctx, g, fc_to(ctx, wq, FC_F32));
    assert_non_null(ref);
    const float *a = fc_tensor_data(fc_grad(x)), *r = fc_tensor_data(ref);
    double scale = 0, worst = 0;
    for (int i = 0; i < B * K; i++)
        scale = fmax(scale, fabs(r[i]));
    for (int i = 0; i < B * K; i++)
        worst = fmax(worst, fabs(a[i] - r[i]));
    assert_true(worst <= 1e-5 * scale);
    fc_scope_end(ctx);
    fc_release(y);
    fc_release(g);
    fc_release(x);
    fc_release(wq);
    fc_ctx_free(ctx);
}

/* LoRA: y = x.Wq^T + (x.A^T).B^T with Wq frozen in q4_k and A, B trained
 * to fit a target made from a different dense weight: the loss falls. */
static void test_qlinear_lora_adapter_trains(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.seed = 21, .threads = 2});
    enum { R = 4, B = 32 };
    fc_tensor *wq = quantized_weight(ctx, FC_Q4_K);
    fc_tensor *A = fc_param_randn(ctx, FC_F32, (const int64_t[]){R, IN}, 2, 0.05);
    fc_tensor *Bm = fc_param_zeros(ctx, FC_F32, (const int64_t[]){OUT, R}, 2);
    fc_tensor *x = fc_randn(ctx, FC_F32, (const int64_t[]){B, IN}, 2);
    fc_scope_begin(ctx);
    /* target: the quantized layer plus a rank-2 change the adapter can learn */
    fc_tensor *u = fc_randn(ctx, FC_F32, (const int64_t[]){OUT, 2}, 2);
    fc_tensor *v = fc_mul_scalar(ctx, fc_randn(ctx, FC_F32, (const int64_t[]){2, IN}, 2), 0.1);
    fc_tensor *target = fc_keep(fc_add(
        ctx, fc_linear(ctx, x, wq, NULL),
        fc_matmul(ctx, fc_matmul(ctx, x, fc_transpose(ctx, v, 0, 1)), fc_transpose(ctx, u, 0, 1))));
    fc_scope_end(ctx);
    assert_non_null(target);
    fc_tensor *ps[2] = {A, Bm};
    fc_optim *opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 0.02}, ps, 2);
    double first = 0, last = 0;
    for (int step = 0; step < 150; step++) {
        fc_scope_begin(ctx);
        fc_optim_zero_grad(opt);
        fc_tensor *y = fc_add(ctx, fc_linear(ctx, x, wq, NULL),
                              fc_linear(ctx, fc_linear(ctx, x, A, NULL), Bm, NULL));
        fc_tensor *loss = fc_mse_loss(ctx, y, target, FC_REDUCE_MEAN);
        assert_int_equal(fc_backward(ctx, loss), FC_OK);
        assert_int_equal(fc_optim_step(opt), FC_OK);
        double l;
        fc_tensor_item(loss, &l);
        if (step == 0) first = l;
        last = l;
        fc_scope_end(ctx);
    }
    assert_true(last < 0.1 * first);
    fc_optim_free(opt);
    fc_release(target);
    fc_release(wq);
    fc_release(A);
    fc_release(Bm);
    fc_release(x);
    fc_ctx_stats st;
    fc_ctx_get_stats(ctx, &st);
    assert_int_equal(st.tensors_live, 0);
    fc_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qlinear_matches_dequantized),
        cmocka_unit_test(test_qlinear_errors),
        cmocka_unit_test(test_qlinear_gradients),
        cmocka_unit_test(test_qlinear_dx_by_panels),
        cmocka_unit_test(test_qlinear_lora_adapter_trains),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
