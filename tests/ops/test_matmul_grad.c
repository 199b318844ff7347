/* SPDX-License-Identifier: MIT */
/* test_matmul_grad.c - gradients of fc_matmul and fc_linear (src/ops/matmul.c).
 *
 * f64: fc_gradcheck (central differences, PyTorch's default tolerances) on
 * every shape family (2-D, vectors, broadcast batches, the shared-weight
 * fold), on operands that are recorded views (fc_transpose, fc_narrow,
 * fc_expand: the layouts the forward passes as transpose flags, leading
 * dimensions and stride-0 batches) and on fc_linear with and without a
 * bias.
 *
 * f32 and bf16: fc_backward_with against dA = G . B^T and dB = A^T . G
 * computed in double here. The gradient products run in f32 (the gradient
 * dtype), so the tolerance is fct_gemm_tol(f32, K) with K the summed length
 * (n for dA, m for dB), on inputs that are exact in the operand dtype. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "exec/tensor.h"
#include "fucina.h"
#include "gemm_ref.h"

/* A contiguous f64 leaf with uniform [-1, 1) values. */
static fc_tensor *leaf(fc_ctx *ctx, fct_rng *r, fc_dtype dt, const int64_t *shape, int rank) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    char *data = malloc((size_t)n * fc_dtype_size(dt));
    assert_non_null(data);
    for (int64_t i = 0; i < n; i++)
        fct_store(dt, data, i, fct_rng_uniform(r, -1, 1));
    fc_tensor *t = fc_tensor_from_data(ctx, dt, shape, rank, data);
    free(data);
    assert_non_null(t);
    return t;
}

static fc_tensor *fn_matmul(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n, (void)user;
    return fc_matmul(ctx, in[0], in[1]);
}

/* in[0] [k, m] transposed, times in[1] [k, n+2] narrowed to n columns. */
static fc_tensor *fn_matmul_views(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n, (void)user;
    fc_tensor *at = fc_transpose(ctx, in[0], 0, 1);
    fc_tensor *bn = fc_narrow(ctx, in[1], 1, 1, fc_tensor_dim(in[1], 1) - 2);
    fc_tensor *c = fc_matmul(ctx, at, bn);
    fc_release(at), fc_release(bn);
    return c;
}

/* in[0] [1, m, k] expanded to a batch of 3 (stride 0), times in[1] [3, k, n]. */
static fc_tensor *fn_matmul_expand(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n, (void)user;
    const int64_t *s = fc_tensor_shape(in[0]);
    fc_tensor *ae = fc_expand(ctx, in[0], (int64_t[]){3, s[1], s[2]}, 3);
    fc_tensor *c = fc_matmul(ctx, ae, in[1]);
    fc_release(ae);
    return c;
}

static fc_tensor *fn_linear(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)user;
    return fc_linear(ctx, in[0], in[1], n > 2 ? in[2] : NULL);
}

static void gradcheck_case(fc_gradcheck_fn fn, const int64_t *const *shapes, const int *ranks,
                           int n) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2});
    fct_rng r = {(uint64_t)(n * 31 + ranks[0] * 7 + ranks[1])};
    fc_tensor *in[3];
    for (int i = 0; i < n; i++)
        in[i] = leaf(ctx, &r, FC_F64, shapes[i], ranks[i]);
    fc_gradcheck_opts o = {.check_all_f64 = true, .seed = 5};
    fc_gradcheck_report rep;
    fc_status st = fc_gradcheck(ctx, fn, NULL, in, n, &o, &rep);
    if (st != FC_OK) {
        fail_msg("gradcheck (ranks %d, %d; a dims %lld,...): %s", ranks[0], ranks[1],
                 (long long)shapes[0][0], fc_ctx_error(ctx));
    }
    assert_true(rep.passed);
    assert_true(rep.checked > 0);
    for (int i = 0; i < n; i++)
        fc_release(in[i]);
    fc_ctx_stats s;
    fc_ctx_get_stats(ctx, &s);
    assert_int_equal(s.tensors_live, 0);
    fc_ctx_free(ctx);
}

#define SH(...) ((const int64_t[]){__VA_ARGS__})

static void test_grad_matmul_shapes(void **state) {
    (void)state;
    /* 2-D */
    gradcheck_case(fn_matmul, (const int64_t *const[]){SH(3, 4), SH(4, 5)}, (int[]){2, 2}, 2);
    /* vectors */
    gradcheck_case(fn_matmul, (const int64_t *const[]){SH(4), SH(4, 5)}, (int[]){1, 2}, 2);
    gradcheck_case(fn_matmul, (const int64_t *const[]){SH(3, 4), SH(4)}, (int[]){2, 1}, 2);
    gradcheck_case(fn_matmul, (const int64_t *const[]){SH(4), SH(4)}, (int[]){1, 1}, 2);
    gradcheck_case(fn_matmul, (const int64_t *const[]){SH(2, 3, 4), SH(4)}, (int[]){3, 1}, 2);
    gradcheck_case(fn_matmul, (const int64_t *const[]){SH(4), SH(2, 4, 3)}, (int[]){1, 3}, 2);
    /* broadcast batches, and the shared-weight fold of dB */
    gradcheck_case(fn_matmul, (const int64_t *const[]){SH(2, 1, 3, 4), SH(3, 4, 2)}, (int[]){4, 3},
                   2);
    gradcheck_case(fn_matmul, (const int64_t *const[]){SH(2, 3, 4), SH(4, 5)}, (int[]){3, 2}, 2);
    gradcheck_case(fn_matmul, (const int64_t *const[]){SH(3, 4), SH(2, 4, 5)}, (int[]){2, 3}, 2);
    /* recorded views as operands */
    gradcheck_case(fn_matmul_views, (const int64_t *const[]){SH(4, 3), SH(4, 7)}, (int[]){2, 2}, 2);
    gradcheck_case(fn_matmul_expand, (const int64_t *const[]){SH(1, 3, 4), SH(3, 4, 2)},
                   (int[]){3, 3}, 2);
}

static void test_grad_linear(void **state) {
    (void)state;
    gradcheck_case(fn_linear, (const int64_t *const[]){SH(2, 3, 4), SH(5, 4), SH(5)},
                   (int[]){3, 2, 1}, 3);
    gradcheck_case(fn_linear, (const int64_t *const[]){SH(3, 4), SH(5, 4)}, (int[]){2, 2}, 2);
    gradcheck_case(fn_linear, (const int64_t *const[]){SH(4), SH(5, 4), SH(5)}, (int[]){1, 2, 1},
                   3);
}

/* bf16 / f32 forward, f32 gradients checked against double products. */
static void check_low_precision(fc_dtype dt) {
    const int64_t m = 17, k = 33, n = 9;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2});
    fct_rng r = {77};
    fc_tensor *a = leaf(ctx, &r, dt, SH(m, k), 2);
    fc_tensor *b = leaf(ctx, &r, dt, SH(k, n), 2);
    fc_tensor *g = leaf(ctx, &r, FC_F32, SH(m, n), 2);
    assert_int_equal(fc_requires_grad(a, true), FC_OK);
    assert_int_equal(fc_requires_grad(b, true), FC_OK);
    fc_tensor *c = fc_matmul(ctx, a, b);
    assert_non_null(c);
    assert_int_equal(fc_backward_with(ctx, c, g, false), FC_OK);
    fc_tensor *ga = fc_grad(a), *gb = fc_grad(b);
    assert_true(ga && gb);
    assert_int_equal(fc_tensor_dtype(ga), FC_F32);
    double av, bv, gv, got;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t p = 0; p < k; p++) { /* dA[i][p] = sum_j G[i][j] B[p][j] */
            double s = 0, u = 0;
            for (int64_t j = 0; j < n; j++) {
                fc_tensor_element(g, SH(i, j), &gv);
                fc_tensor_element(b, SH(p, j), &bv);
                s += gv * bv, u += fabs(gv * bv);
            }
            fc_tensor_element(ga, SH(i, p), &got);
            assert_true(fabs(got - s) <= fct_gemm_tol(FC_F32, n, s, u));
        }
    }
    for (int64_t p = 0; p < k; p++) {
        for (int64_t j = 0; j < n; j++) { /* dB[p][j] = sum_i A[i][p] G[i][j] */
            double s = 0, u = 0;
            for (int64_t i = 0; i < m; i++) {
                fc_tensor_element(a, SH(i, p), &av);
                fc_tensor_element(g, SH(i, j), &gv);
                s += av * gv, u += fabs(av * gv);
            }
            fc_tensor_element(gb, SH(p, j), &got);
            assert_true(fabs(got - s) <= fct_gemm_tol(FC_F32, m, s, u));
        }
    }
    fc_release(a), fc_release(b), fc_release(g), fc_release(c);
    fc_ctx_free(ctx);
}

static void test_grad_matmul_f32_bf16_f16(void **state) {
    (void)state;
    check_low_precision(FC_F32);
    check_low_precision(FC_BF16);
    check_low_precision(FC_F16);
}

/* Saved operands are checked: modifying b after the product fails the
 * backward with FC_ERR_SAVED_MODIFIED naming matmul. */
static void test_grad_matmul_saved_modified(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    fct_rng r = {1};
    fc_tensor *a = leaf(ctx, &r, FC_F32, SH(3, 4), 2);
    fc_tensor *b = leaf(ctx, &r, FC_F32, SH(4, 2), 2);
    assert_int_equal(fc_requires_grad(a, true), FC_OK);
    fc_tensor *c = fc_matmul(ctx, a, b);
    fc_tensor *g = fc_ones(ctx, FC_F32, SH(3, 2), 2);
    assert_non_null(fc_tensor_data_mut(b));
    assert_int_equal(fc_backward_with(ctx, c, g, false), FC_ERR_SAVED_MODIFIED);
    assert_non_null(strstr(fc_ctx_error(ctx), "matmul"));
    fc_release(a), fc_release(b), fc_release(c), fc_release(g);
    fc_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_matmul_shapes),
        cmocka_unit_test(test_grad_linear),
        cmocka_unit_test(test_grad_matmul_f32_bf16_f16),
        cmocka_unit_test(test_grad_matmul_saved_modified),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
