/* SPDX-License-Identifier: MIT */
/* test_join.c - concat, stack, split and pad (src/ops/join.c over
 * src/exec/kernels/join.c), forward and backward.
 *
 * Inputs come in every scalar dtype and in mixed layouts (each input of one
 * call in a different layout, so the memcpy path and the strided path run
 * side by side). Every output element is compared exactly with the input
 * element that index arithmetic says it came from. Block dtypes join as
 * bytes. Gradients are gradchecked in f64, joins of more inputs than a node
 * holds exercising the grouped nodes; split pieces left unused must get
 * zero gradient. Each test runs in a scope on a counting allocator; the
 * teardown requires zero live tensors and zero live blocks. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "counting_alloc.h"
#include "fct_scope_fixture.h"
#include "layout_helpers.h"

/* ---- concat --------------------------------------------------------------------------------- */

/* out must be xs joined along axis: element idx comes from the input whose
 * range along axis holds idx[axis]. */
static void check_concat(fc_tensor *const *xs, int n, int axis, const fc_tensor *out) {
    int r = fc_tensor_rank(xs[0]);
    int64_t os[FC_MAX_RANK], oi[FC_MAX_RANK], xi[FC_MAX_RANK];
    memcpy(os, fc_tensor_shape(xs[0]), sizeof(int64_t) * (size_t)r);
    os[axis] = 0;
    for (int k = 0; k < n; k++)
        os[axis] += fc_tensor_shape(xs[k])[axis];
    assert_int_equal(fc_tensor_rank(out), r);
    for (int i = 0; i < r; i++)
        assert_int_equal(fc_tensor_shape(out)[i], os[i]);
    assert_true(fc_tensor_is_contiguous(out));
    for (int64_t f = 0; f < fc_tensor_numel(out); f++) {
        lh_unravel(f, os, r, oi);
        memcpy(xi, oi, sizeof xi);
        int k = 0;
        while (xi[axis] >= fc_tensor_shape(xs[k])[axis])
            xi[axis] -= fc_tensor_shape(xs[k++])[axis];
        if (lh_get(out, oi) != lh_get(xs[k], xi)) {
            print_message("concat axis %d: element %lld differs\n", axis, (long long)f);
            fail();
        }
    }
}

static void test_join_concat_every_dtype_axis_and_layout(void **state) {
    (void)state;
    const int64_t sizes[3] = {1, 3, 2};
    for (int d = 0; d < LH_NDTYPES; d++) {
        for (int axis = 0; axis < 3; axis++) {
            for (int rot = 0; rot < LH_LAYOUTS; rot++) {
                fc_tensor *xs[3];
                for (int k = 0; k < 3; k++) {
                    int64_t shape[3] = {2, 3, 4};
                    shape[axis] = sizes[k];
                    int layout = (rot + k) % LH_LAYOUTS;
                    if (layout == LH_BROADCAST && axis == 0) layout = LH_CONTIG;
                    xs[k] = lh_make(g_ctx, lh_all_dtypes[d], shape, 3, layout, (uint64_t)k);
                }
                fc_tensor *out = fc_concat(g_ctx, xs, 3, axis - (axis == 2 ? 3 : 0));
                assert_non_null(out);
                check_concat(xs, 3, axis, out);
                fc_release(out);
                for (int k = 0; k < 3; k++)
                    fc_release(xs[k]);
            }
        }
    }
}

/* Many inputs, rows long enough that the copy splits across threads. */
static void test_join_concat_many_and_large(void **state) {
    (void)state;
    fc_tensor *xs[9];
    for (int k = 0; k < 9; k++)
        xs[k] = lh_make(g_ctx, FC_F32, (const int64_t[]){300, 1 + k % 4, 40}, 3,
                        k % 3 == 0 ? LH_TRANSPOSED : LH_CONTIG, (uint64_t)k);
    fc_tensor *out = fc_concat(g_ctx, xs, 9, 1);
    check_concat(xs, 9, 1, out);
    fc_release(out);
    out = fc_concat(g_ctx, xs, 1, 1); /* one input: a copy */
    check_concat(xs, 1, 1, out);
    assert_ptr_not_equal(out->raw.buf, xs[0]->raw.buf);
    fc_release(out);
    for (int k = 0; k < 9; k++)
        fc_release(xs[k]);
}

static void test_join_concat_block_bytes(void **state) {
    (void)state;
    unsigned char a[2 * 2 * 18], b[2 * 1 * 18];
    for (size_t i = 0; i < sizeof a; i++)
        a[i] = (unsigned char)(3 * i + 1);
    for (size_t i = 0; i < sizeof b; i++)
        b[i] = (unsigned char)(200 - i);
    fc_tensor *qa = fc_tensor_from_data(g_ctx, FC_Q4_0, (const int64_t[]){2, 64}, 2, a);
    fc_tensor *qb = fc_tensor_from_data(g_ctx, FC_Q4_0, (const int64_t[]){2, 32}, 2, b);
    fc_tensor *rows = fc_concat(g_ctx, (fc_tensor *[]){qa, qa}, 2, 0);
    assert_non_null(rows);
    assert_memory_equal(fc_tensor_data(rows), a, sizeof a);
    assert_memory_equal((const char *)fc_tensor_data(rows) + sizeof a, a, sizeof a);
    fc_tensor *cols = fc_concat(g_ctx, (fc_tensor *[]){qa, qb}, 2, 1);
    assert_non_null(cols);
    const unsigned char *p = fc_tensor_data(cols);
    for (int r = 0; r < 2; r++) { /* each row: qa's two blocks, then qb's one */
        assert_memory_equal(p + r * 54, a + r * 36, 36);
        assert_memory_equal(p + r * 54 + 36, b + r * 18, 18);
    }
    fc_tensor *st = fc_stack(g_ctx, (fc_tensor *[]){qa, qa}, 2, 0);
    assert_non_null(st);
    assert_memory_equal((const char *)fc_tensor_data(st) + sizeof a, a, sizeof a);
    assert_null(fc_stack(g_ctx, (fc_tensor *[]){qa, qa}, 2, 2));
    expect_error(FC_ERR_UNSUPPORTED_VIEW, "stack");
    fc_release(st);
    fc_release(cols);
    fc_release(rows);
    fc_release(qb);
    fc_release(qa);
}

static void test_join_concat_errors(void **state) {
    (void)state;
    fc_tensor *a = fc_zeros(g_ctx, FC_F32, (const int64_t[]){2, 3}, 2);
    fc_tensor *b = fc_zeros(g_ctx, FC_F16, (const int64_t[]){2, 3}, 2);
    fc_tensor *c = fc_zeros(g_ctx, FC_F32, (const int64_t[]){4, 4}, 2);
    fc_tensor *d = fc_zeros(g_ctx, FC_F32, (const int64_t[]){2, 3, 1}, 3);
    assert_null(fc_concat(g_ctx, (fc_tensor *[]){a, b}, 2, 0));
    expect_error(FC_ERR_DTYPE, "concat: input 0 is f32[2,3] but input 1 is f16[2,3]");
    assert_null(fc_concat(g_ctx, (fc_tensor *[]){a, c}, 2, 0));
    expect_error(FC_ERR_SHAPE_MISMATCH, "shapes must match off axis 0");
    assert_null(fc_concat(g_ctx, (fc_tensor *[]){a, d}, 2, 0));
    expect_error(FC_ERR_RANK, "concat");
    assert_null(fc_concat(g_ctx, (fc_tensor *[]){a, a}, 2, 2));
    expect_error(FC_ERR_AXIS, "concat: axis 2");
    assert_null(fc_concat(g_ctx, (fc_tensor *[]){a}, 0, 0));
    expect_error(FC_ERR_INVALID_ARG, "concat");
    assert_null(fc_concat(g_ctx, NULL, 2, 0));
    expect_error(FC_ERR_NULL_ARG, "concat");
    fc_ctx_fail(g_ctx, FC_ERR_IO, "earlier");
    assert_null(fc_concat(g_ctx, (fc_tensor *[]){a, NULL}, 2, 0));
    assert_null(fc_stack(g_ctx, (fc_tensor *[]){NULL, a}, 2, 0));
    expect_error(FC_ERR_IO, "earlier");
    assert_null(fc_concat(g_ctx, (fc_tensor *[]){a, NULL}, 2, 0));
    expect_error(FC_ERR_NULL_ARG, "concat: input 1 is NULL");
    assert_null(fc_concat(NULL, (fc_tensor *[]){a}, 1, 0));
    fc_release(d);
    fc_release(c);
    fc_release(b);
    fc_release(a);
}

/* ---- stack ---------------------------------------------------------------------------------- */

static void test_join_stack_every_dtype_axis_and_layout(void **state) {
    (void)state;
    const int64_t shape[2] = {3, 4};
    int64_t os[3], oi[3], xi[2];
    for (int d = 0; d < LH_NDTYPES; d++) {
        for (int axis = 0; axis <= 2; axis++) {
            fc_tensor *xs[4];
            for (int k = 0; k < 4; k++)
                xs[k] = lh_make(g_ctx, lh_all_dtypes[d], shape, 2, k % LH_LAYOUTS, (uint64_t)k);
            fc_tensor *out = fc_stack(g_ctx, xs, 4, axis == 2 ? -1 : axis);
            assert_non_null(out);
            for (int i = 0, k = 0; i < 3; i++)
                os[i] = i == axis ? 4 : shape[k++];
            assert_int_equal(fc_tensor_rank(out), 3);
            for (int i = 0; i < 3; i++)
                assert_int_equal(fc_tensor_shape(out)[i], os[i]);
            for (int64_t f = 0; f < 48; f++) {
                lh_unravel(f, os, 3, oi);
                for (int i = 0, k = 0; i < 3; i++)
                    if (i != axis) xi[k++] = oi[i];
                assert_true(lh_get(out, oi) == lh_get(xs[oi[axis]], xi));
            }
            fc_release(out);
            for (int k = 0; k < 4; k++)
                fc_release(xs[k]);
        }
    }
    fc_tensor *a = fc_zeros(g_ctx, FC_I32, shape, 2);
    fc_tensor *b = fc_zeros(g_ctx, FC_I32, (const int64_t[]){4, 3}, 2);
    assert_null(fc_stack(g_ctx, (fc_tensor *[]){a, b}, 2, 0));
    expect_error(FC_ERR_SHAPE_MISMATCH, "stack: input 0 is i32[3,4] but input 1 is i32[4,3]");
    assert_null(fc_stack(g_ctx, (fc_tensor *[]){a, a}, 2, 3));
    expect_error(FC_ERR_AXIS, "stack");
    fc_tensor *r8 = fc_zeros(g_ctx, FC_I32, (const int64_t[]){1, 1, 1, 1, 1, 1, 1, 2}, 8);
    assert_null(fc_stack(g_ctx, (fc_tensor *[]){r8}, 1, 0));
    expect_error(FC_ERR_RANK, "stack");
    fc_release(r8);
    fc_release(b);
    fc_release(a);
}

/* ---- split ---------------------------------------------------------------------------------- */

static void test_join_split_views(void **state) {
    (void)state;
    for (int l = 0; l < LH_LAYOUTS; l++) {
        fc_tensor *x = lh_make(g_ctx, FC_I16, (const int64_t[]){3, 7}, 2, l, 1);
        fc_tensor *parts[3];
        assert_int_equal(fc_split(g_ctx, x, -1, (const int64_t[]){2, 4, 1}, 3, parts), FC_OK);
        int64_t start = 0;
        for (int k = 0; k < 3; k++) {
            int64_t len = fc_tensor_shape(parts[k])[1];
            assert_int_equal(len, k == 0 ? 2 : k == 1 ? 4 : 1);
            assert_int_equal(fc_tensor_shape(parts[k])[0], 3);
            assert_ptr_equal(parts[k]->raw.buf, x->raw.buf);
            for (int64_t i = 0; i < 3; i++)
                for (int64_t j = 0; j < len; j++)
                    assert_true(lh_get(parts[k], (const int64_t[]){i, j}) ==
                                lh_get(x, (const int64_t[]){i, start + j}));
            start += len;
            fc_release(parts[k]);
        }
        fc_release(x);
    }
    fc_tensor *x = fc_zeros(g_ctx, FC_F32, (const int64_t[]){3, 7}, 2);
    fc_tensor *sentinel = (fc_tensor *)&g_alloc, *out[2] = {sentinel, sentinel};
    assert_int_equal(fc_split(g_ctx, x, 1, (const int64_t[]){2, 4}, 2, out), FC_ERR_SHAPE_MISMATCH);
    expect_error(FC_ERR_SHAPE_MISMATCH, "split: the 2 sizes do not sum to 7");
    assert_int_equal(fc_split(g_ctx, x, 1, (const int64_t[]){INT64_MAX, 4}, 2, out),
                     FC_ERR_SHAPE_MISMATCH);
    expect_error(FC_ERR_SHAPE_MISMATCH, "split");
    assert_int_equal(fc_split(g_ctx, x, 1, (const int64_t[]){7, 0}, 2, out), FC_ERR_INVALID_ARG);
    expect_error(FC_ERR_INVALID_ARG, "split: sizes[1] is 0");
    assert_int_equal(fc_split(g_ctx, x, 1, (const int64_t[]){7}, 0, out), FC_ERR_INVALID_ARG);
    expect_error(FC_ERR_INVALID_ARG, "split");
    assert_int_equal(fc_split(g_ctx, x, 2, (const int64_t[]){7}, 1, out), FC_ERR_AXIS);
    expect_error(FC_ERR_AXIS, "split");
    assert_int_equal(fc_split(g_ctx, x, 1, NULL, 1, out), FC_ERR_NULL_ARG);
    expect_error(FC_ERR_NULL_ARG, "split");
    assert_int_equal(fc_split(g_ctx, NULL, 1, (const int64_t[]){7}, 1, out), FC_ERR_NULL_ARG);
    expect_error(FC_ERR_NULL_ARG, "split");
    assert_int_equal(fc_split(NULL, x, 1, (const int64_t[]){7}, 1, out), FC_ERR_NULL_ARG);
    assert_ptr_equal(out[0], sentinel); /* never touched on error */
    assert_ptr_equal(out[1], sentinel);
    fc_release(x);
}

/* ---- pad ------------------------------------------------------------------------------------ */

static void test_join_pad_every_dtype_and_layout(void **state) {
    (void)state;
    const int64_t shape[2] = {2, 3}, pads[4] = {1, 0, 2, 3}, os[2] = {3, 8};
    int64_t oi[2];
    for (int d = 0; d < LH_NDTYPES; d++) {
        fc_dtype dt = lh_all_dtypes[d];
        double value = dt == FC_BOOL ? 1 : (dt == FC_U8 || dt == FC_U16) ? 9 : -5;
        for (int l = 0; l < LH_LAYOUTS; l++) {
            fc_tensor *x = lh_make(g_ctx, dt, shape, 2, l, 6);
            for (int z = 0; z < 2; z++) { /* the fill value, then zero (memset path) */
                double v = z ? 0.0 : value;
                fc_tensor *out = fc_pad(g_ctx, x, pads, v);
                assert_non_null(out);
                assert_int_equal(fc_tensor_shape(out)[0], 3);
                assert_int_equal(fc_tensor_shape(out)[1], 8);
                for (int64_t f = 0; f < 24; f++) {
                    lh_unravel(f, os, 2, oi);
                    int64_t i = oi[0] - 1, j = oi[1] - 2;
                    double want = (i >= 0 && i < 2 && j >= 0 && j < 3)
                                      ? lh_get(x, (const int64_t[]){i, j})
                                      : v;
                    assert_true(lh_get(out, oi) == want);
                }
                fc_release(out);
            }
            fc_release(x);
        }
    }
    /* -0.0 is a value, not zero bytes */
    fc_tensor *x = fc_ones(g_ctx, FC_F32, (const int64_t[]){1}, 1);
    fc_tensor *out = fc_pad(g_ctx, x, (const int64_t[]){1, 0}, -0.0);
    const float *p = fc_tensor_data(out);
    assert_true(p[0] == 0.0f && signbit(p[0]));
    fc_release(out);
    assert_null(fc_pad(g_ctx, x, (const int64_t[]){-1, 0}, 0));
    expect_error(FC_ERR_INVALID_ARG, "pad: pads -1, 0 of axis 0");
    assert_null(fc_pad(g_ctx, x, (const int64_t[]){INT64_MAX, 0}, 0));
    expect_error(FC_ERR_OVERFLOW, "pad");
    assert_null(fc_pad(g_ctx, x, NULL, 0));
    expect_error(FC_ERR_NULL_ARG, "pad");
    fc_release(x);
    unsigned char bytes[18] = {0};
    fc_tensor *q = fc_tensor_from_data(g_ctx, FC_Q4_0, (const int64_t[]){32}, 1, bytes);
    assert_null(fc_pad(g_ctx, q, (const int64_t[]){0, 32}, 0));
    expect_error(FC_ERR_DTYPE, "pad");
    fc_release(q);
}

/* ---- joins ---------------------------------------------------------------------------------- */

static fc_tensor *fn_concat(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)u; /* inputs as they are and as transposed views, plus a constant */
    fc_tensor *xs[8];
    for (int k = 0; k < n; k++)
        xs[k] = k % 2 ? fc_transpose(c, in[k], 0, 1) : in[k];
    xs[n] = fc_ones(c, FC_F64, fc_tensor_shape(xs[0]), 2);
    return fc_concat(c, xs, n + 1, 0);
}
static fc_tensor *fn_stack(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)u;
    fc_tensor *xs[8];
    for (int k = 0; k < n; k++)
        xs[k] = in[k];
    xs[n] = fc_zeros(c, FC_F64, fc_tensor_shape(in[0]), 2);
    return fc_stack(c, xs, n + 1, 1);
}
static fc_tensor *fn_split(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n, (void)u; /* the middle piece is unused: its gradient must be zero */
    fc_tensor *p[3];
    if (fc_split(c, in[0], 1, (const int64_t[]){2, 1, 3}, 3, p) != FC_OK) return NULL;
    return fc_concat(c, (fc_tensor *[]){p[2], p[0]}, 2, 1);
}
static fc_tensor *fn_pad(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n, (void)u;
    return fc_pad(c, fc_transpose(c, in[0], 0, 1), (const int64_t[]){1, 2, 0, 3}, 0.5);
}

static void test_grad_joins(void **state) {
    (void)state;
    fc_ctx_set_rng(g_ctx, LH_GRAD_SEED, 0);
    const int64_t s[2] = {3, 3};
    assert_true(lh_gradcheck(g_ctx, fn_concat, NULL,
                             (fc_tensor *[]){lh_leaf(g_ctx, s, 2), lh_leaf(g_ctx, s, 2)}, 2,
                             "concat of 3"));
    /* 7 inputs + a constant: more than a node holds, so grouped nodes */
    fc_tensor *seven[7];
    for (int k = 0; k < 7; k++)
        seven[k] = lh_leaf(g_ctx, s, 2);
    assert_true(lh_gradcheck(g_ctx, fn_concat, NULL, seven, 7, "concat of 8"));
    fc_tensor *five[5];
    for (int k = 0; k < 5; k++)
        five[k] = lh_leaf(g_ctx, (const int64_t[]){2, 3}, 2);
    assert_true(lh_gradcheck(g_ctx, fn_stack, NULL, five, 5, "stack of 6"));
    assert_true(lh_gradcheck(g_ctx, fn_split, NULL,
                             (fc_tensor *[]){lh_leaf(g_ctx, (const int64_t[]){2, 6}, 2)}, 1,
                             "split"));
    assert_true(lh_gradcheck(g_ctx, fn_pad, NULL,
                             (fc_tensor *[]){lh_leaf(g_ctx, (const int64_t[]){3, 2}, 2)}, 1,
                             "pad"));

    /* the unused split piece really gets zeros, the others ones */
    fc_tensor *x = fc_param_zeros(g_ctx, FC_F32, (const int64_t[]){2, 6}, 2);
    fc_tensor *y = fn_split(g_ctx, (fc_tensor *[]){x}, 1, NULL);
    fc_tensor *g = fc_ones(g_ctx, FC_F32, fc_tensor_shape(y), 2);
    assert_int_equal(fc_backward_with(g_ctx, y, g, false), FC_OK);
    const float *gx = fc_tensor_data(fc_grad(x));
    for (int i = 0; i < 12; i++)
        assert_true(gx[i] == (i % 6 == 2 ? 0.0f : 1.0f));
    fc_zero_grad(&x, 1);
    fc_release(g);
    fc_release(y);
    fc_release(x);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_join_concat_every_dtype_axis_and_layout),
        T(test_join_concat_many_and_large),
        T(test_join_concat_block_bytes),
        T(test_join_concat_errors),
        T(test_join_stack_every_dtype_axis_and_layout),
        T(test_join_split_views),
        T(test_join_pad_every_dtype_and_layout),
        T(test_grad_joins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
