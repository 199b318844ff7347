/* SPDX-License-Identifier: MIT */
/* test_layout.c - the view ops (src/ops/layout.c over
 * src/exec/kernels/layout.c): reshape, view, permute, transpose, narrow,
 * slice, expand, squeeze, unsqueeze, forward and backward.
 *
 * Every op runs on every scalar dtype and on contiguous, transposed,
 * narrowed and broadcast inputs; results are read element by element and
 * compared exactly with index arithmetic over the input's logical values
 * (tests/support/layout_helpers.h). Views must share storage (a write
 * through one shows in the base) and request no data buffer; block dtypes
 * get only identity views. Gradients are gradchecked in f64 on contiguous
 * inputs, on views built inside the function and on chains of views. Each
 * test runs inside a scope on a counting allocator: the teardown requires
 * zero live tensors and zero live blocks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "counting_alloc.h"
#include "fct_scope_fixture.h"
#include "layout_helpers.h"

/* Logical contents of t equal to want[0..n). */
static void expect_values(const fc_tensor *t, const double *want, int64_t n, const char *what) {
    assert_int_equal(fc_tensor_numel(t), n);
    double *got = malloc(sizeof(double) * (size_t)n);
    lh_read(t, got);
    for (int64_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            print_message("%s: element %lld is %g, want %g\n", what, (long long)i, got[i], want[i]);
            free(got);
            fail();
        }
    }
    free(got);
}

static void expect_shape(const fc_tensor *t, const int64_t *shape, int rank) {
    assert_int_equal(fc_tensor_rank(t), rank);
    for (int i = 0; i < rank; i++)
        assert_int_equal(fc_tensor_shape(t)[i], shape[i]);
}

static bool same_storage(const fc_tensor *a, const fc_tensor *b) {
    return a->raw.buf == b->raw.buf;
}

/* ---- reshape / view ------------------------------------------------------------------------- */

static void test_layout_reshape_every_dtype_and_layout(void **state) {
    (void)state;
    const int64_t shape[3] = {2, 3, 4};
    const int64_t targets[4][3] = {{4, 6}, {-1, 2}, {24}, {3, -1, 2}};
    const int64_t resolved[4][3] = {{4, 6}, {12, 2}, {24}, {3, 4, 2}};
    const int ranks[4] = {2, 2, 1, 3};
    double want[24];
    for (int d = 0; d < LH_NDTYPES; d++) {
        for (int l = 0; l < LH_LAYOUTS; l++) {
            fc_tensor *x = lh_make(g_ctx, lh_all_dtypes[d], shape, 3, l, (uint64_t)d);
            assert_non_null(x);
            lh_read(x, want);
            for (int t = 0; t < 4; t++) {
                fc_tensor *y = fc_reshape(g_ctx, x, targets[t], ranks[t]);
                assert_non_null(y);
                expect_shape(y, resolved[t], ranks[t]);
                assert_int_equal(fc_tensor_dtype(y), lh_all_dtypes[d]);
                expect_values(y, want, 24, lh_layout_names[l]);
                assert_true(fc_tensor_is_contiguous(y));
                /* a view exactly when the input is contiguous */
                assert_int_equal(same_storage(x, y), l == LH_CONTIG);
                fc_tensor *v = fc_view(g_ctx, x, targets[t], ranks[t]);
                if (l == LH_CONTIG) {
                    assert_non_null(v);
                    assert_true(same_storage(x, v));
                    expect_values(v, want, 24, "view");
                    fc_release(v);
                } else {
                    assert_null(v);
                    expect_error(FC_ERR_UNSUPPORTED_VIEW, "view");
                }
                fc_release(y);
            }
            fc_release(x);
        }
    }
}

static void test_layout_reshape_errors(void **state) {
    (void)state;
    fc_tensor *x = lh_make(g_ctx, FC_F32, (int64_t[]){2, 3}, 2, LH_CONTIG, 0);
    assert_null(fc_reshape(g_ctx, x, (int64_t[]){-1, -1}, 2));
    expect_error(FC_ERR_INVALID_SHAPE, "reshape");
    assert_null(fc_reshape(g_ctx, x, (int64_t[]){0, 6}, 2));
    expect_error(FC_ERR_INVALID_SHAPE, "reshape");
    assert_null(fc_reshape(g_ctx, x, (int64_t[]){-2, 3}, 2));
    expect_error(FC_ERR_INVALID_SHAPE, "reshape");
    assert_null(fc_reshape(g_ctx, x, (int64_t[]){4, 2}, 2));
    expect_error(FC_ERR_INVALID_SHAPE, "cannot reshape f32[2,3] (6 elements) to [4,2]");
    assert_null(fc_reshape(g_ctx, x, (int64_t[]){4, -1}, 2));
    expect_error(FC_ERR_INVALID_SHAPE, "reshape");
    assert_null(fc_reshape(g_ctx, x, (int64_t[]){-1, 7}, 2));
    expect_error(FC_ERR_INVALID_SHAPE, "reshape");
    /* a product that would overflow int64 is a mismatch, not UB */
    assert_null(fc_reshape(g_ctx, x, (int64_t[]){INT64_MAX, INT64_MAX, -1}, 3));
    expect_error(FC_ERR_INVALID_SHAPE, "reshape");
    assert_null(fc_reshape(g_ctx, x, (int64_t[]){6}, 0));
    expect_error(FC_ERR_RANK, "reshape");
    assert_null(fc_reshape(g_ctx, x, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 6}, 9));
    expect_error(FC_ERR_RANK, "reshape");
    assert_null(fc_reshape(g_ctx, x, NULL, 2));
    expect_error(FC_ERR_NULL_ARG, "reshape");
    assert_null(fc_view(g_ctx, x, (int64_t[]){5}, 1));
    expect_error(FC_ERR_INVALID_SHAPE, "view");
    fc_release(x);
}

/* ---- permute / transpose -------------------------------------------------------------------- */

static void check_permuted(const fc_tensor *x, const fc_tensor *y, const int *p) {
    int r = fc_tensor_rank(x);
    const int64_t *xs = fc_tensor_shape(x);
    int64_t ys[FC_MAX_RANK], yi[FC_MAX_RANK], xi[FC_MAX_RANK];
    for (int i = 0; i < r; i++)
        ys[i] = xs[p[i]];
    expect_shape(y, ys, r);
    for (int64_t f = 0; f < fc_tensor_numel(y); f++) {
        lh_unravel(f, ys, r, yi);
        for (int i = 0; i < r; i++)
            xi[p[i]] = yi[i];
        assert_true(lh_get(y, yi) == lh_get(x, xi));
    }
}

static void test_layout_permute_transpose_values(void **state) {
    (void)state;
    const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    const int64_t shape[3] = {2, 3, 4};
    for (int d = 0; d < LH_NDTYPES; d++) {
        for (int l = 0; l < LH_LAYOUTS; l++) {
            fc_tensor *x = lh_make(g_ctx, lh_all_dtypes[d], shape, 3, l, 3);
            for (int k = 0; k < 6; k++) {
                fc_tensor *y = fc_permute(g_ctx, x, perms[k]);
                assert_non_null(y);
                assert_true(same_storage(x, y));
                check_permuted(x, y, perms[k]);
                fc_release(y);
            }
            /* negative axes; transpose is the swap permutation */
            fc_tensor *y = fc_permute(g_ctx, x, (const int[]){-1, 0, -2});
            check_permuted(x, y, (const int[]){2, 0, 1});
            fc_release(y);
            y = fc_transpose(g_ctx, x, 0, -1);
            check_permuted(x, y, (const int[]){2, 1, 0});
            fc_release(y);
            y = fc_transpose(g_ctx, x, 1, 1);
            check_permuted(x, y, (const int[]){0, 1, 2});
            fc_release(y);
            fc_release(x);
        }
    }
    fc_tensor *x = lh_make(g_ctx, FC_F32, shape, 3, LH_CONTIG, 0);
    assert_null(fc_permute(g_ctx, x, (const int[]){0, 0, 1}));
    expect_error(FC_ERR_INVALID_ARG, "permute: axis 0 appears twice");
    assert_null(fc_permute(g_ctx, x, (const int[]){0, 1, 3}));
    expect_error(FC_ERR_AXIS, "permute: axis 3 is out of range");
    assert_null(fc_permute(g_ctx, x, NULL));
    expect_error(FC_ERR_NULL_ARG, "permute");
    assert_null(fc_transpose(g_ctx, x, 0, -4));
    expect_error(FC_ERR_AXIS, "transpose");
    fc_release(x);
}

/* ---- narrow / slice ------------------------------------------------------------------------- */

/* y must be x with axis replaced by the positions sel[0..n) */
static void check_selected(const fc_tensor *x, const fc_tensor *y, int axis, const int64_t *sel,
                           int64_t n) {
    int r = fc_tensor_rank(x);
    int64_t ys[FC_MAX_RANK], yi[FC_MAX_RANK], xi[FC_MAX_RANK];
    memcpy(ys, fc_tensor_shape(x), sizeof(int64_t) * (size_t)r);
    ys[axis] = n;
    expect_shape(y, ys, r);
    for (int64_t f = 0; f < fc_tensor_numel(y); f++) {
        lh_unravel(f, ys, r, yi);
        memcpy(xi, yi, sizeof xi);
        xi[axis] = sel[yi[axis]];
        assert_true(lh_get(y, yi) == lh_get(x, xi));
    }
}

static void test_layout_narrow_values(void **state) {
    (void)state;
    const int64_t shape[3] = {3, 4, 5};
    int64_t sel[5];
    for (int d = 0; d < LH_NDTYPES; d++) {
        for (int l = 0; l < LH_LAYOUTS; l++) {
            fc_tensor *x = lh_make(g_ctx, lh_all_dtypes[d], shape, 3, l, 5);
            for (int axis = 0; axis < 3; axis++) {
                for (int64_t start = 0; start < shape[axis]; start++) {
                    for (int64_t len = 1; start + len <= shape[axis]; len++) {
                        fc_tensor *y = fc_narrow(g_ctx, x, axis - (axis == 2 ? 3 : 0), start, len);
                        assert_non_null(y);
                        assert_true(same_storage(x, y));
                        for (int64_t i = 0; i < len; i++)
                            sel[i] = start + i;
                        check_selected(x, y, axis, sel, len);
                        fc_release(y);
                    }
                }
            }
            fc_release(x);
        }
    }
    fc_tensor *x = lh_make(g_ctx, FC_F32, shape, 3, LH_CONTIG, 0);
    assert_null(fc_narrow(g_ctx, x, 1, 3, 2));
    expect_error(FC_ERR_INDEX, "narrow: window start 3, length 2 is outside axis 1");
    assert_null(fc_narrow(g_ctx, x, 1, -1, 1));
    expect_error(FC_ERR_INDEX, "narrow");
    assert_null(fc_narrow(g_ctx, x, 1, 0, 0));
    expect_error(FC_ERR_EMPTY_SELECTION, "narrow");
    assert_null(fc_narrow(g_ctx, x, 1, 0, -2));
    expect_error(FC_ERR_INVALID_ARG, "narrow");
    assert_null(fc_narrow(g_ctx, x, 3, 0, 1));
    expect_error(FC_ERR_AXIS, "narrow");
    fc_release(x);
}

/* Python's list(range(10))[start:stop:step], evaluated by python3. */
static const struct {
    int64_t start, stop, step, n, sel[10];
} py_slices[] = {
    {0, 10, 1, 10, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
    {-3, INT64_MAX, 1, 3, {7, 8, 9}},
    {2, -2, 3, 2, {2, 5}},
    {-100, 100, 4, 3, {0, 4, 8}},
    {1, 9, 7, 2, {1, 8}},
    {-12, 3, 2, 2, {0, 2}},
    {9, 10, 5, 1, {9}},
    {0, 1, 1, 1, {0}},
    {INT64_MIN, INT64_MAX, 3, 4, {0, 3, 6, 9}},
    /* steps whose stride * step would overflow: one element each */
    {3, INT64_MAX, INT64_MAX, 1, {3}},
    {INT64_MIN, INT64_MAX, INT64_MAX / 2, 1, {0}},
    {0, 10, 9, 2, {0, 9}},
};
/* ... and the ones that select nothing */
static const int64_t py_empty[][3] = {{5, 2, 1}, {12, 20, 1}, {-1, -5, 1}, {10, INT64_MAX, 1}};

static void test_layout_slice_python_semantics(void **state) {
    (void)state;
    const int64_t shape[2] = {3, 10};
    for (int d = 0; d < LH_NDTYPES; d += 3) {
        for (int l = 0; l < LH_LAYOUTS; l++) {
            fc_tensor *x = lh_make(g_ctx, lh_all_dtypes[d], shape, 2, l, 1);
            for (size_t c = 0; c < sizeof py_slices / sizeof py_slices[0]; c++) {
                fc_tensor *y = fc_slice(g_ctx, x, -1, py_slices[c].start, py_slices[c].stop,
                                        py_slices[c].step);
                assert_non_null(y);
                assert_true(same_storage(x, y));
                check_selected(x, y, 1, py_slices[c].sel, py_slices[c].n);
                fc_release(y);
            }
            /* axis 0 with a step */
            fc_tensor *y = fc_slice(g_ctx, x, 0, 0, 3, 2);
            check_selected(x, y, 0, (const int64_t[]){0, 2}, 2);
            fc_release(y);
            fc_release(x);
        }
    }
    fc_tensor *x = lh_make(g_ctx, FC_F32, shape, 2, LH_CONTIG, 0);
    for (size_t c = 0; c < sizeof py_empty / sizeof py_empty[0]; c++) {
        assert_null(fc_slice(g_ctx, x, 1, py_empty[c][0], py_empty[c][1], py_empty[c][2]));
        expect_error(FC_ERR_EMPTY_SELECTION, "slice");
    }
    assert_null(fc_slice(g_ctx, x, 1, 0, 5, 0));
    expect_error(FC_ERR_INVALID_ARG, "slice: step 0");
    assert_null(fc_slice(g_ctx, x, 1, 5, 0, -1));
    expect_error(FC_ERR_INVALID_ARG, "slice");
    fc_release(x);
}

/* ---- expand --------------------------------------------------------------------------------- */

static void test_layout_expand_values(void **state) {
    (void)state;
    const int64_t xshape[2] = {3, 1};
    const int64_t target[3] = {2, -1, 4}, want_shape[3] = {2, 3, 4};
    int64_t yi[3];
    for (int d = 0; d < LH_NDTYPES; d++) {
        for (int l = 0; l < LH_LAYOUTS; l++) {
            fc_tensor *x = lh_make(g_ctx, lh_all_dtypes[d], xshape, 2, l, 2);
            fc_tensor *y = fc_expand(g_ctx, x, target, 3);
            assert_non_null(y);
            assert_true(same_storage(x, y));
            expect_shape(y, want_shape, 3);
            assert_int_equal(fc_tensor_strides(y)[0], 0);
            assert_int_equal(fc_tensor_strides(y)[2], 0);
            for (int64_t f = 0; f < 24; f++) {
                lh_unravel(f, want_shape, 3, yi);
                assert_true(lh_get(y, yi) == lh_get(x, (const int64_t[]){yi[1], 0}));
            }
            fc_release(y);
            fc_release(x);
        }
    }
    fc_tensor *x = lh_make(g_ctx, FC_F32, xshape, 2, LH_CONTIG, 0);
    fc_tensor *same = fc_expand(g_ctx, x, (const int64_t[]){3, 1}, 2);
    assert_non_null(same);
    assert_true(fc_tensor_is_contiguous(same));
    fc_release(same);
    assert_null(fc_expand(g_ctx, x, (const int64_t[]){4, 4}, 2));
    expect_error(FC_ERR_SHAPE_MISMATCH, "expand: cannot expand f32[3,1] to [4,4]");
    assert_null(fc_expand(g_ctx, x, (const int64_t[]){3}, 1));
    expect_error(FC_ERR_RANK, "expand");
    assert_null(fc_expand(g_ctx, x, (const int64_t[]){-1, 3, 1}, 3));
    expect_error(FC_ERR_INVALID_SHAPE, "expand");
    assert_null(fc_expand(g_ctx, x, (const int64_t[]){3, 0}, 2));
    expect_error(FC_ERR_INVALID_SHAPE, "expand");
    assert_null(fc_expand(g_ctx, x, (const int64_t[]){INT64_MAX / 2, 3, 8}, 3));
    expect_error(FC_ERR_OVERFLOW, "expand");
    fc_release(x);
}

/* ---- squeeze / unsqueeze -------------------------------------------------------------------- */

static void test_layout_squeeze_unsqueeze(void **state) {
    (void)state;
    const int64_t shape[3] = {2, 1, 3};
    double want[6];
    for (int d = 0; d < LH_NDTYPES; d++) {
        for (int l = 0; l < LH_LAYOUTS; l++) {
            fc_tensor *x = lh_make(g_ctx, lh_all_dtypes[d], shape, 3, l, 4);
            lh_read(x, want);
            fc_tensor *s = fc_squeeze(g_ctx, x, -2);
            assert_non_null(s);
            assert_true(same_storage(x, s));
            expect_shape(s, (const int64_t[]){2, 3}, 2);
            expect_values(s, want, 6, "squeeze");
            for (int a = -3; a <= 2; a++) {
                fc_tensor *u = fc_unsqueeze(g_ctx, s, a);
                assert_non_null(u);
                int pos = a < 0 ? a + 3 : a;
                int64_t us[3];
                for (int i = 0, k = 0; i < 3; i++)
                    us[i] = i == pos ? 1 : fc_tensor_shape(s)[k++];
                expect_shape(u, us, 3);
                expect_values(u, want, 6, "unsqueeze");
                assert_int_equal(fc_tensor_is_contiguous(u), fc_tensor_is_contiguous(s));
                fc_release(u);
            }
            fc_release(s);
            fc_release(x);
        }
    }
    fc_tensor *x = lh_make(g_ctx, FC_F32, shape, 3, LH_CONTIG, 0);
    assert_null(fc_squeeze(g_ctx, x, 0));
    expect_error(FC_ERR_INVALID_SHAPE, "squeeze: axis 0 of f32[2,1,3] has size 2, not 1");
    assert_null(fc_squeeze(g_ctx, x, 3));
    expect_error(FC_ERR_AXIS, "squeeze");
    assert_null(fc_unsqueeze(g_ctx, x, 4));
    expect_error(FC_ERR_AXIS, "unsqueeze");
    fc_tensor *one = fc_zeros(g_ctx, FC_F32, (const int64_t[]){1}, 1);
    assert_null(fc_squeeze(g_ctx, one, 0));
    expect_error(FC_ERR_RANK, "squeeze");
    fc_tensor *r8 = fc_zeros(g_ctx, FC_F32, (const int64_t[]){1, 1, 1, 1, 1, 1, 1, 2}, 8);
    assert_null(fc_unsqueeze(g_ctx, r8, 0));
    expect_error(FC_ERR_RANK, "unsqueeze");
    fc_release(r8);
    fc_release(one);
    fc_release(x);
}

/* ---- sharing storage ------------------------------------------------------------------------ */

static uint64_t data_requests(void) {
    fc_ctx_stats s;
    fc_ctx_get_stats(g_ctx, &s);
    return s.pool_hits + s.pool_misses;
}

static void test_layout_views_share_storage_without_allocation(void **state) {
    (void)state;
    fc_tensor *x = fc_zeros(g_ctx, FC_F32, (const int64_t[]){4, 6}, 2);
    fc_tensor *u = fc_unsqueeze(g_ctx, x, 0);
    uint64_t before = data_requests();
    fc_tensor *v[10];
    v[0] = fc_reshape(g_ctx, x, (const int64_t[]){6, 4}, 2);
    v[1] = fc_view(g_ctx, x, (const int64_t[]){24}, 1);
    v[2] = fc_permute(g_ctx, x, (const int[]){1, 0});
    v[3] = fc_transpose(g_ctx, x, 0, 1);
    v[4] = fc_narrow(g_ctx, x, 1, 2, 3);
    v[5] = fc_slice(g_ctx, x, 0, 1, 4, 2);
    v[6] = fc_expand(g_ctx, u, (const int64_t[]){3, 4, 6}, 3);
    v[7] = fc_squeeze(g_ctx, u, 0);
    assert_int_equal(fc_split(g_ctx, x, 1, (const int64_t[]){2, 4}, 2, v + 8), FC_OK);
    assert_int_equal(data_requests(), before);
    for (int i = 0; i < 10; i++) {
        assert_non_null(v[i]);
        assert_true(same_storage(x, v[i]));
        assert_int_equal(fc_tensor_generation(v[i]), fc_tensor_generation(x));
    }
    /* writes through views land in the base */
    float *flat = fc_tensor_data_mut(v[1]);
    flat[5] = 5.0f; /* x[0][5] */
    fc_tensor *src = lh_from_f64(g_ctx, FC_F32, (const int64_t[]){4, 3}, 2,
                                 (const double[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
    assert_int_equal(fc_copy_(v[4], src), FC_OK); /* x[:, 2:5] */
    fc_tensor *row =
        lh_from_f64(g_ctx, FC_F32, (const int64_t[]){2, 6}, 2,
                    (const double[]){-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12});
    assert_int_equal(fc_copy_(v[5], row), FC_OK); /* rows 1 and 3 */
    fc_tensor *col = lh_from_f64(g_ctx, FC_F32, (const int64_t[]){4, 2}, 2,
                                 (const double[]){21, 22, 23, 24, 25, 26, 27, 28});
    assert_int_equal(fc_copy_(v[8], col), FC_OK); /* x[:, 0:2] */
    double want[24] = {0};
    want[5] = 5;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            want[i * 6 + 2 + j] = 1 + i * 3 + j;
    for (int j = 0; j < 6; j++)
        want[6 + j] = -1 - j, want[18 + j] = -7 - j;
    for (int i = 0; i < 4; i++)
        want[i * 6] = 21 + 2 * i, want[i * 6 + 1] = 22 + 2 * i;
    expect_values(x, want, 24, "base after writes through views");
    /* the transposed view sees them too */
    assert_true(lh_get(v[3], (const int64_t[]){2, 3}) == want[3 * 6 + 2]);
    assert_true(lh_get(v[6], (const int64_t[]){2, 0, 5}) == 5.0);
    for (int i = 0; i < 10; i++)
        fc_release(v[i]);
    fc_release(col);
    fc_release(row);
    fc_release(src);
    fc_release(u);
    fc_release(x);
}

/* fc_contiguous materialises any view with its logical values */
static void test_layout_contiguous_materialises_views(void **state) {
    (void)state;
    fc_tensor *x = lh_make(g_ctx, FC_BF16, (const int64_t[]){3, 4}, 2, LH_CONTIG, 9);
    fc_tensor *x1 = fc_unsqueeze(g_ctx, x, 0);
    fc_tensor *views[5] = {
        fc_transpose(g_ctx, x, 0, 1), fc_narrow(g_ctx, x, 1, 1, 2), fc_slice(g_ctx, x, 1, 0, 4, 3),
        fc_expand(g_ctx, x1, (const int64_t[]){2, 3, 4}, 3),
        fc_narrow(g_ctx,
                  fc_transpose(g_ctx, fc_expand(g_ctx, x1, (const int64_t[]){5, 3, 4}, 3), 0, 2), 1,
                  1, 2)};
    double want[40], got[40];
    for (int i = 0; i < 5; i++) {
        assert_non_null(views[i]);
        assert_false(fc_tensor_is_contiguous(views[i]));
        fc_tensor *c = fc_contiguous(g_ctx, views[i]);
        assert_true(fc_tensor_is_contiguous(c));
        assert_false(same_storage(c, x));
        lh_read(views[i], want);
        expect_values(c, want, fc_tensor_numel(views[i]), "contiguous");
        /* and the bytes really are row-major: read them raw */
        const uint16_t *p = fc_tensor_data(c);
        for (int64_t k = 0; k < fc_tensor_numel(c); k++)
            got[k] = fc_bf16_to_f32(p[k]);
        for (int64_t k = 0; k < fc_tensor_numel(c); k++)
            assert_true(got[k] == want[k]);
        fc_release(c);
    }
    /* the chain: narrow(transpose(expand(x))): element [a][b][c] = x[b+1][a] */
    int64_t idx[3];
    const int64_t cs[3] = {4, 2, 5};
    expect_shape(views[4], cs, 3);
    for (int64_t f = 0; f < 40; f++) {
        lh_unravel(f, cs, 3, idx);
        assert_true(lh_get(views[4], idx) == lh_get(x, (const int64_t[]){idx[1] + 1, idx[0]}));
    }
    for (int i = 0; i < 5; i++)
        fc_release(views[i]);
    fc_release(x1);
    fc_release(x);
}

/* Copies of 1 MiB and more run on the thread team (each thread gathers a
 * range of elements): a transposed, a narrowed and an expanded source of
 * 2-4 MiB, through fc_contiguous, fc_clone and fc_copy_, element by element
 * against the view; a wrong shape or dtype is still refused. */
static void test_layout_large_copies_on_the_team(void **state) {
    (void)state;
    const int64_t R = 384, C = 1000; /* 1.5 MB of f32: above the team threshold */
    fc_tensor *x = fc_arange(g_ctx, FC_F32, 0, (double)(R * C), 1);
    fc_tensor *m = fc_reshape(g_ctx, x, (const int64_t[]){R, C}, 2);
    fc_tensor *row = fc_narrow(g_ctx, m, 0, 5, 1);
    fc_tensor *views[3] = {fc_transpose(g_ctx, m, 0, 1), fc_narrow(g_ctx, m, 1, 3, 900),
                           fc_expand(g_ctx, row, (const int64_t[]){R, C}, 2)};
    for (int i = 0; i < 3; i++) {
        assert_non_null(views[i]);
        int64_t n = fc_tensor_numel(views[i]);
        double *want = malloc(sizeof(double) * (size_t)n);
        lh_read(views[i], want);
        fc_tensor *c = fc_contiguous(g_ctx, views[i]);
        fc_tensor *k = fc_clone(g_ctx, views[i]);
        fc_tensor *d = fc_zeros(g_ctx, FC_F32, fc_tensor_shape(views[i]), 2);
        assert_non_null(c);
        assert_non_null(k);
        assert_int_equal(fc_copy_(d, views[i]), FC_OK);
        expect_values(c, want, n, "team fc_contiguous");
        expect_values(k, want, n, "team fc_clone");
        expect_values(d, want, n, "team fc_copy_");
        free(want);
        fc_release(c);
        fc_release(k);
        fc_release(d);
    }
    /* shape mismatch and dtype mismatch are refused before any write */
    fc_tensor *small = fc_zeros(g_ctx, FC_F32, (const int64_t[]){C, R - 1}, 2);
    fc_tensor *f64 = fc_zeros(g_ctx, FC_F64, (const int64_t[]){R, C}, 2);
    assert_int_equal(fc_copy_(small, views[0]), FC_ERR_SHAPE_MISMATCH);
    fc_ctx_clear_error(g_ctx);
    assert_int_equal(fc_copy_(f64, m), FC_ERR_DTYPE);
    fc_ctx_clear_error(g_ctx);
    fc_release(small);
    fc_release(f64);
    for (int i = 0; i < 3; i++)
        fc_release(views[i]);
    fc_release(row);
    fc_release(m);
    fc_release(x);
}

/* ---- block dtypes: identity views only ------------------------------------------------------ */

static void test_layout_block_identity_only(void **state) {
    (void)state;
    unsigned char bytes[4 * 18];
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (unsigned char)(i * 37 + 1);
    fc_tensor *q = fc_tensor_from_data(g_ctx, FC_Q4_0, (const int64_t[]){2, 64}, 2, bytes);
    assert_non_null(q);
    fc_tensor *ok[5] = {fc_reshape(g_ctx, q, (const int64_t[]){2, -1}, 2),
                        fc_permute(g_ctx, q, (const int[]){0, 1}), fc_narrow(g_ctx, q, 0, 0, 2),
                        fc_slice(g_ctx, q, 1, 0, INT64_MAX, 1),
                        fc_expand(g_ctx, q, (const int64_t[]){2, 64}, 2)};
    for (int i = 0; i < 5; i++) {
        assert_non_null(ok[i]);
        assert_true(same_storage(q, ok[i]));
        assert_memory_equal(fc_tensor_data(ok[i]), bytes, sizeof bytes);
        fc_release(ok[i]);
    }
    assert_null(fc_reshape(g_ctx, q, (const int64_t[]){128}, 1));
    expect_error(FC_ERR_UNSUPPORTED_VIEW, "reshape: q4_0[2,64] is block-quantized");
    assert_null(fc_view(g_ctx, q, (const int64_t[]){1, 2, 64}, 3));
    expect_error(FC_ERR_UNSUPPORTED_VIEW, "view");
    assert_null(fc_transpose(g_ctx, q, 0, 1));
    expect_error(FC_ERR_UNSUPPORTED_VIEW, "transpose");
    assert_null(fc_narrow(g_ctx, q, 0, 1, 1));
    expect_error(FC_ERR_UNSUPPORTED_VIEW, "narrow");
    assert_null(fc_slice(g_ctx, q, 1, 0, 32, 1));
    expect_error(FC_ERR_UNSUPPORTED_VIEW, "slice");
    assert_null(fc_expand(g_ctx, q, (const int64_t[]){3, 2, 64}, 3));
    expect_error(FC_ERR_UNSUPPORTED_VIEW, "expand");
    assert_null(fc_unsqueeze(g_ctx, q, 0));
    expect_error(FC_ERR_UNSUPPORTED_VIEW, "unsqueeze");
    fc_tensor *parts[2];
    assert_int_equal(fc_split(g_ctx, q, 0, (const int64_t[]){1, 1}, 2, parts),
                     FC_ERR_UNSUPPORTED_VIEW);
    expect_error(FC_ERR_UNSUPPORTED_VIEW, "split");
    fc_release(q);
}

/* ---- NULL inputs ---------------------------------------------------------------------------- */

static void test_layout_null_propagates(void **state) {
    (void)state;
    const int64_t s2[2] = {2, 3};
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0) fc_ctx_fail(g_ctx, FC_ERR_IO, "an earlier failure");
        assert_null(fc_reshape(g_ctx, NULL, s2, 2));
        assert_null(fc_view(g_ctx, NULL, s2, 2));
        assert_null(fc_permute(g_ctx, NULL, (const int[]){1, 0}));
        assert_null(fc_transpose(g_ctx, NULL, 0, 1));
        assert_null(fc_narrow(g_ctx, NULL, 0, 0, 1));
        assert_null(fc_slice(g_ctx, NULL, 0, 0, 1, 1));
        assert_null(fc_expand(g_ctx, NULL, s2, 2));
        assert_null(fc_squeeze(g_ctx, NULL, 0));
        assert_null(fc_unsqueeze(g_ctx, NULL, 0));
        if (pass == 0) {
            expect_error(FC_ERR_IO, "an earlier failure"); /* untouched by the NULLs */
        } else {
            expect_error(FC_ERR_NULL_ARG, "reshape"); /* the first NULL is recorded */
        }
    }
    assert_null(fc_reshape(NULL, NULL, s2, 2));
    assert_null(fc_transpose(NULL, NULL, 0, 1));
}

/* ---- views ---------------------------------------------------------------------------------- */

static fc_tensor *fn_reshape(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n;
    fc_tensor *x = u ? fc_transpose(c, in[0], 0, 2) : in[0]; /* u: the copying path */
    return fc_reshape(c, x, (const int64_t[]){4, -1}, 2);
}
static fc_tensor *fn_view(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n, (void)u;
    return fc_view(c, in[0], (const int64_t[]){6, 4}, 2);
}
static fc_tensor *fn_permute(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n, (void)u;
    return fc_permute(c, in[0], (const int[]){2, 0, 1});
}
static fc_tensor *fn_transpose(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n, (void)u;
    return fc_transpose(c, in[0], -1, 0);
}
static fc_tensor *fn_narrow(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n, (void)u;
    return fc_narrow(c, in[0], 1, 1, 2);
}
static fc_tensor *fn_slice(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n, (void)u;
    return fc_slice(c, fc_slice(c, in[0], 2, -4, INT64_MAX, 2), 0, 1, 2, 1);
}
static fc_tensor *fn_expand(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n, (void)u; /* [3,1] -> [2,3,4]: a new axis and a size-1 axis both sum */
    return fc_expand(c, in[0], (const int64_t[]){2, -1, 4}, 3);
}
static fc_tensor *fn_squeeze(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n, (void)u;
    return fc_unsqueeze(c, fc_squeeze(c, in[0], 1), -1);
}
/* narrow of a transpose of an expand; a slice of a permute of an unsqueeze */
static fc_tensor *fn_chain(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n, (void)u;
    fc_tensor *a = fc_narrow(
        c, fc_transpose(c, fc_expand(c, in[0], (const int64_t[]){5, 3, 4}, 3), 0, 2), 2, 1, 3);
    fc_tensor *b =
        fc_slice(c, fc_permute(c, fc_unsqueeze(c, in[0], 1), (const int[]){2, 1, 0}), 0, 0, 4, 3);
    return fc_concat(c,
                     (fc_tensor *[]){fc_reshape(c, a, (const int64_t[]){-1}, 1),
                                     fc_reshape(c, b, (const int64_t[]){-1}, 1)},
                     2, 0);
}

static void test_grad_views(void **state) {
    (void)state;
    fc_ctx_set_rng(g_ctx, LH_GRAD_SEED, 0);
    const int64_t s3[3] = {2, 3, 4};
    assert_true(lh_gradcheck(g_ctx, fn_reshape, NULL, (fc_tensor *[]){lh_leaf(g_ctx, s3, 3)}, 1,
                             "reshape (view)"));
    assert_true(lh_gradcheck(g_ctx, fn_reshape, g_ctx, (fc_tensor *[]){lh_leaf(g_ctx, s3, 3)}, 1,
                             "reshape (copy)"));
    assert_true(
        lh_gradcheck(g_ctx, fn_view, NULL, (fc_tensor *[]){lh_leaf(g_ctx, s3, 3)}, 1, "view"));
    assert_true(lh_gradcheck(g_ctx, fn_permute, NULL, (fc_tensor *[]){lh_leaf(g_ctx, s3, 3)}, 1,
                             "permute"));
    assert_true(lh_gradcheck(g_ctx, fn_transpose, NULL, (fc_tensor *[]){lh_leaf(g_ctx, s3, 3)}, 1,
                             "transpose"));
    assert_true(
        lh_gradcheck(g_ctx, fn_narrow, NULL, (fc_tensor *[]){lh_leaf(g_ctx, s3, 3)}, 1, "narrow"));
    assert_true(lh_gradcheck(g_ctx, fn_slice, NULL,
                             (fc_tensor *[]){lh_leaf(g_ctx, (const int64_t[]){3, 2, 7}, 3)}, 1,
                             "slice"));
    assert_true(lh_gradcheck(g_ctx, fn_expand, NULL,
                             (fc_tensor *[]){lh_leaf(g_ctx, (const int64_t[]){3, 1}, 2)}, 1,
                             "expand"));
    assert_true(lh_gradcheck(g_ctx, fn_squeeze, NULL,
                             (fc_tensor *[]){lh_leaf(g_ctx, (const int64_t[]){2, 1, 3}, 3)}, 1,
                             "squeeze/unsqueeze"));
    assert_true(lh_gradcheck(g_ctx, fn_chain, NULL,
                             (fc_tensor *[]){lh_leaf(g_ctx, (const int64_t[]){3, 1}, 2)}, 1,
                             "chain"));
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_layout_reshape_every_dtype_and_layout),
        T(test_layout_reshape_errors),
        T(test_layout_permute_transpose_values),
        T(test_layout_narrow_values),
        T(test_layout_slice_python_semantics),
        T(test_layout_expand_values),
        T(test_layout_squeeze_unsqueeze),
        T(test_layout_views_share_storage_without_allocation),
        T(test_layout_contiguous_materialises_views),
        T(test_layout_large_copies_on_the_team),
        T(test_layout_block_identity_only),
        T(test_layout_null_propagates),
        T(test_grad_views),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
