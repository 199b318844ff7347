/* SPDX-License-Identifier: MIT */
/* test_index.c - index_select, embedding, gather, scatter_add, one_hot
 * (src/ops/index.c over src/exec/kernels/index.c), forward and backward.
 *
 * Sources come in every scalar dtype and layout, index tensors in every
 * integer dtype, contiguous or strided, of rank 1 and 2. Each output element
 * is compared with a reference that follows the op's definition with plain
 * index arithmetic; scatter_add's reference accumulates in int64 (integers,
 * then wrapped by fc_cast_scalar) or in double (floats, exact for the small
 * values used). Bad indices must name the value, its position and the
 * bound. scatter_add must give the same bits for any thread count.
 * Gradients are gradchecked in f64 (index dtypes and layouts varied); the
 * index-add backward must give the same bits for any thread count, a saved
 * index modified in place must be refused, and f16/bf16 leaves get f32
 * gradients through a chain of views and a select. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "counting_alloc.h"
#include "fct_scope_fixture.h"
#include "fucina/quant.h"
#include "layout_helpers.h"

static const fc_dtype index_dtypes[] = {FC_I64, FC_I32, FC_I16, FC_I8, FC_U16, FC_U8};

/* An index tensor holding v; strided: every other element of a wider tensor. */
static fc_tensor *make_index(fc_dtype dt, const int64_t *shape, int rank, const int64_t *v,
                             bool strided) {
    int64_t n = lh_numel(shape, rank), bshape[FC_MAX_RANK], st[FC_MAX_RANK];
    memcpy(bshape, shape, sizeof(int64_t) * (size_t)rank);
    if (strided) bshape[rank - 1] *= 2;
    double *bv = calloc((size_t)lh_numel(bshape, rank), sizeof(double));
    for (int64_t i = 0; i < lh_numel(bshape, rank); i++)
        bv[i] = 99; /* out of range filler */
    for (int64_t i = 0; i < n; i++)
        bv[strided ? 2 * i : i] = (double)v[i];
    fc_tensor *b = lh_from_f64(g_ctx, dt, bshape, rank, bv);
    free(bv);
    if (!strided) return b;
    memcpy(st, fc_tensor_strides(b), sizeof(int64_t) * (size_t)rank);
    st[rank - 1] = 2;
    fc_tensor *t = fc__tensor_view(g_ctx, "test", b, shape, st, rank, 0);
    fc_release(b);
    return t;
}

/* ---- index_select --------------------------------------------------------------------------- */

static void check_select(const fc_tensor *x, int axis, const fc_tensor *index, const int64_t *iv,
                         const fc_tensor *out) {
    int xr = fc_tensor_rank(x), ir = fc_tensor_rank(index), r = xr - 1 + ir;
    const int64_t *xs = fc_tensor_shape(x);
    int64_t os[FC_MAX_RANK], oi[FC_MAX_RANK], xi[FC_MAX_RANK];
    for (int i = 0; i < r; i++)
        os[i] = i < axis        ? xs[i]
                : i < axis + ir ? fc_tensor_shape(index)[i - axis]
                                : xs[i - ir + 1];
    assert_int_equal(fc_tensor_rank(out), r);
    for (int i = 0; i < r; i++)
        assert_int_equal(fc_tensor_shape(out)[i], os[i]);
    for (int64_t f = 0; f < fc_tensor_numel(out); f++) {
        lh_unravel(f, os, r, oi);
        for (int i = 0; i < axis; i++)
            xi[i] = oi[i];
        xi[axis] = iv[lh_ravel(oi + axis, fc_tensor_shape(index), ir)];
        for (int i = axis + 1; i < xr; i++)
            xi[i] = oi[i + ir - 1];
        if (lh_get(out, oi) != lh_get(x, xi)) {
            print_message("index_select axis %d: element %lld differs\n", axis, (long long)f);
            fail();
        }
    }
}

static void test_index_select_every_dtype_layout_and_index(void **state) {
    (void)state;
    const int64_t shape[3] = {3, 4, 5};
    const int64_t raw_iv[6] = {2, 0, 2, 1, 7, 4}; /* reduced mod the axis size */
    int64_t iv[6];
    for (int d = 0; d < LH_NDTYPES; d++) {
        for (int l = 0; l < LH_LAYOUTS; l++) {
            fc_tensor *x = lh_make(g_ctx, lh_all_dtypes[d], shape, 3, l, (uint64_t)d);
            for (int axis = 0; axis < 3; axis++) {
                for (int k = 0; k < 6; k++)
                    iv[k] = raw_iv[k] % shape[axis];
                for (int it = 0; it < 6; it++) {
                    bool rank2 = it % 2, strided = it >= 3;
                    fc_tensor *index =
                        make_index(index_dtypes[(it + d) % 6],
                                   rank2 ? (const int64_t[]){2, 3} : (const int64_t[]){6},
                                   rank2 ? 2 : 1, iv, strided);
                    fc_tensor *out = fc_index_select(g_ctx, x, axis - 3 * (axis == 2), index);
                    assert_non_null(out);
                    assert_int_equal(fc_tensor_dtype(out), lh_all_dtypes[d]);
                    check_select(x, axis, index, iv, out);
                    fc_release(out);
                    fc_release(index);
                }
            }
            fc_release(x);
        }
    }
}

static void test_index_embedding(void **state) {
    (void)state;
    /* small, every float dtype */
    const fc_dtype dts[4] = {FC_F32, FC_F64, FC_F16, FC_BF16};
    const int64_t ids_v[6] = {5, 0, 3, 3, 1, 5};
    for (int d = 0; d < 4; d++) {
        fc_tensor *table = lh_make(g_ctx, dts[d], (const int64_t[]){6, 5}, 2, LH_CONTIG, 2);
        fc_tensor *ids = make_index(FC_I32, (const int64_t[]){2, 3}, 2, ids_v, false);
        fc_tensor *out = fc_embedding(g_ctx, table, ids);
        assert_non_null(out);
        check_select(table, 0, ids, ids_v, out);
        fc_release(out);
        fc_release(ids);
        fc_release(table);
    }
    /* GPT-sized rows across threads */
    int64_t big[8 * 33];
    for (int i = 0; i < 8 * 33; i++)
        big[i] = (i * 37 + 11) % 100;
    fc_tensor *table = lh_make(g_ctx, FC_F32, (const int64_t[]){100, 64}, 2, LH_CONTIG, 3);
    fc_tensor *ids = make_index(FC_I64, (const int64_t[]){8, 33}, 2, big, false);
    fc_tensor *out = fc_embedding(g_ctx, table, ids);
    check_select(table, 0, ids, big, out);
    fc_release(out);
    fc_tensor *t3 = fc_zeros(g_ctx, FC_F32, (const int64_t[]){2, 3, 4}, 3);
    assert_null(fc_embedding(g_ctx, t3, ids));
    expect_error(FC_ERR_RANK, "embedding: table f32[2,3,4] must have rank 2");
    fc_release(t3);
    fc_release(ids);
    fc_release(table);
}

static void test_index_select_errors(void **state) {
    (void)state;
    fc_tensor *x = fc_zeros(g_ctx, FC_F32, (const int64_t[]){5, 3}, 2);
    fc_tensor *bad =
        make_index(FC_I64, (const int64_t[]){2, 2}, 2, (const int64_t[]){0, 4, 7, 1}, false);
    assert_null(fc_index_select(g_ctx, x, 0, bad));
    expect_error(FC_ERR_INDEX, "index_select: index value 7 at position [1,0] of index i64[2,2] "
                               "is out of range [0, 5) for axis 0 of f32[5,3]");
    fc_tensor *neg = make_index(FC_I8, (const int64_t[]){3}, 1, (const int64_t[]){0, -1, 9}, true);
    assert_null(fc_embedding(g_ctx, x, neg));
    expect_error(FC_ERR_INDEX, "value -1 at position [1]");
    assert_null(fc_index_select(g_ctx, x, 0, neg));
    expect_error(FC_ERR_INDEX, "(negative indices are not allowed)");
    fc_tensor *fi = fc_zeros(g_ctx, FC_F32, (const int64_t[]){2}, 1);
    fc_tensor *bi = fc_zeros(g_ctx, FC_BOOL, (const int64_t[]){2}, 1);
    assert_null(fc_index_select(g_ctx, x, 0, fi));
    expect_error(FC_ERR_DTYPE, "index_select: index f32[2] must have an integer dtype");
    assert_null(fc_embedding(g_ctx, x, bi));
    expect_error(FC_ERR_DTYPE, "embedding");
    assert_null(fc_index_select(g_ctx, x, 2, bad));
    expect_error(FC_ERR_AXIS, "index_select");
    fc_tensor *x5 = fc_zeros(g_ctx, FC_F32, (const int64_t[]){2, 2, 2, 2, 2}, 5);
    fc_tensor *i5 = fc_zeros(g_ctx, FC_I64, (const int64_t[]){1, 1, 1, 1, 1}, 5);
    assert_null(fc_index_select(g_ctx, x5, 0, i5));
    expect_error(FC_ERR_RANK, "index_select");
    fc_tensor *zero = make_index(FC_I64, (const int64_t[]){1}, 1, (const int64_t[]){0}, false);
    fc_ctx_fail(g_ctx, FC_ERR_IO, "earlier");
    assert_null(fc_index_select(g_ctx, NULL, 0, zero));
    assert_null(fc_embedding(g_ctx, x, NULL));
    assert_null(fc_gather(g_ctx, x, 0, NULL));
    assert_null(fc_scatter_add(g_ctx, x, 0, zero, NULL));
    assert_null(fc_one_hot(g_ctx, NULL, 3, FC_F32));
    expect_error(FC_ERR_IO, "earlier");
    assert_null(fc_gather(g_ctx, NULL, 0, zero));
    expect_error(FC_ERR_NULL_ARG, "gather");
    fc_release(zero);
    fc_release(i5);
    fc_release(x5);
    fc_release(bi);
    fc_release(fi);
    fc_release(neg);
    fc_release(bad);
    fc_release(x);
}

/* Block-quantized tables: the selected rows come back dequantized to f32,
 * equal to fc_dequantize of the whole table, indexed. */
static void test_index_block_tables(void **state) {
    (void)state;
    const fc_dtype dts[4] = {FC_Q8_0, FC_Q4_0, FC_Q4_K, FC_NF4};
    float src[6 * 256], ref[6 * 256];
    for (int i = 0; i < 6 * 256; i++)
        src[i] = (float)((i * 37) % 101 - 50) / 16.0f;
    const int64_t ids_v[6] = {5, 0, 3, 3, 1, 5}, col_v[5] = {0, 255, 17, 128, 17};
    for (int d = 0; d < 4; d++) {
        size_t rb = fc_quant_row_bytes(dts[d], 256);
        unsigned char *bytes = malloc(rb * 6);
        assert_int_equal(fc_quantize(dts[d], src, bytes, 6, 256), FC_OK);
        assert_int_equal(fc_dequantize(dts[d], bytes, ref, 6, 256), FC_OK);
        fc_tensor *q = fc_tensor_from_data(g_ctx, dts[d], (const int64_t[]){6, 256}, 2, bytes);
        fc_tensor *ids = make_index(FC_I32, (const int64_t[]){2, 3}, 2, ids_v, true);
        fc_tensor *e = fc_embedding(g_ctx, q, ids);
        assert_non_null(e);
        assert_int_equal(fc_tensor_dtype(e), FC_F32);
        assert_int_equal(fc_tensor_rank(e), 3);
        const float *ev = fc_tensor_data(e);
        for (int k = 0; k < 6; k++)
            assert_memory_equal(ev + k * 256, ref + ids_v[k] * 256, 256 * sizeof(float));
        /* selecting columns picks single elements out of blocks */
        fc_tensor *cols = make_index(FC_I64, (const int64_t[]){5}, 1, col_v, false);
        fc_tensor *c = fc_index_select(g_ctx, q, -1, cols);
        assert_non_null(c);
        const float *cv = fc_tensor_data(c);
        for (int r = 0; r < 6; r++)
            for (int k = 0; k < 5; k++)
                assert_true(cv[r * 5 + k] == ref[r * 256 + col_v[k]]);
        /* rank 3, middle axis: rows of several quantized rows each */
        fc_tensor *q3 = fc_tensor_from_data(g_ctx, dts[d], (const int64_t[]){2, 3, 256}, 3, bytes);
        fc_tensor *mid = make_index(FC_U8, (const int64_t[]){2}, 1, (const int64_t[]){2, 0}, false);
        fc_tensor *m = fc_index_select(g_ctx, q3, 1, mid);
        assert_non_null(m);
        const float *mv = fc_tensor_data(m);
        for (int o = 0; o < 2; o++)
            for (int k = 0; k < 2; k++)
                assert_memory_equal(mv + (o * 2 + k) * 256, ref + (o * 3 + (k ? 0 : 2)) * 256,
                                    256 * sizeof(float));
        fc_release(m);
        fc_release(mid);
        fc_release(q3);
        fc_release(c);
        fc_release(cols);
        fc_release(e);
        fc_release(ids);
        fc_release(q);
        free(bytes);
    }
}

/* ---- gather --------------------------------------------------------------------------------- */

static void test_index_gather_values(void **state) {
    (void)state;
    const int64_t shape[3] = {3, 4, 5};
    int64_t iv[128], ii[3], xi[3];
    for (int d = 0; d < LH_NDTYPES; d++) {
        for (int l = 0; l < LH_LAYOUTS; l++) {
            fc_tensor *x = lh_make(g_ctx, lh_all_dtypes[d], shape, 3, l, 4);
            for (int axis = 0; axis < 3; axis++) {
                /* an index smaller than x off the axis, and longer on it */
                int64_t is[3] = {2, 3, 4};
                is[axis] = 6;
                int64_t n = lh_numel(is, 3);
                for (int64_t k = 0; k < n; k++)
                    iv[k] = (k * 5 + 3) % shape[axis];
                fc_tensor *index = make_index(index_dtypes[(d + axis) % 6], is, 3, iv, l == 1);
                fc_tensor *out = fc_gather(g_ctx, x, axis, index);
                assert_non_null(out);
                for (int i = 0; i < 3; i++)
                    assert_int_equal(fc_tensor_shape(out)[i], is[i]);
                for (int64_t f = 0; f < n; f++) {
                    lh_unravel(f, is, 3, ii);
                    memcpy(xi, ii, sizeof xi);
                    xi[axis] = iv[f];
                    assert_true(lh_get(out, ii) == lh_get(x, xi));
                }
                fc_release(out);
                fc_release(index);
            }
            fc_release(x);
        }
    }
    fc_tensor *x = fc_zeros(g_ctx, FC_F32, (const int64_t[]){3, 4}, 2);
    fc_tensor *wide = fc_zeros(g_ctx, FC_I64, (const int64_t[]){4, 2}, 2);
    assert_null(fc_gather(g_ctx, x, 1, wide));
    expect_error(FC_ERR_SHAPE_MISMATCH, "gather: index i64[4,2] does not fit x f32[3,4]");
    fc_tensor *r1 = fc_zeros(g_ctx, FC_I64, (const int64_t[]){2}, 1);
    assert_null(fc_gather(g_ctx, x, 1, r1));
    expect_error(FC_ERR_RANK, "gather");
    fc_tensor *oob = make_index(FC_I32, (const int64_t[]){1, 2}, 2, (const int64_t[]){1, 4}, false);
    assert_null(fc_gather(g_ctx, x, 1, oob));
    expect_error(FC_ERR_INDEX, "gather: index value 4 at position [0,1]");
    fc_release(oob);
    fc_release(r1);
    fc_release(wide);
    fc_release(x);
}

/* ---- scatter_add ---------------------------------------------------------------------------- */

static const fc_dtype add_dtypes[] = {FC_F32, FC_F64, FC_F16, FC_BF16, FC_I8,
                                      FC_U8,  FC_I16, FC_U16, FC_I32,  FC_I64};

static void test_index_scatter_add_values(void **state) {
    (void)state;
    const int64_t xs[2] = {4, 5}, ss[2] = {3, 6};
    int64_t iv[12], ii[2], xi[2];
    for (size_t d = 0; d < sizeof add_dtypes / sizeof add_dtypes[0]; d++) {
        fc_dtype dt = add_dtypes[d];
        bool is_int = !fc_dtype_is_float(dt);
        for (int l = 0; l < LH_LAYOUTS; l++) {
            for (int axis = 0; axis < 2; axis++) {
                fc_tensor *x = lh_make(g_ctx, dt, xs, 2, l, 1);
                /* a saturated start so integer sums wrap */
                if (is_int && l == LH_CONTIG) {
                    fc_tensor *big =
                        fc_full(g_ctx, dt, xs, 2, fc_dtype_is_signed_int(dt) ? 120 : 250);
                    fc_release(x);
                    x = big;
                }
                fc_tensor *src = lh_make(g_ctx, dt, ss, 2, (l + 1) % LH_LAYOUTS, 2);
                const int64_t is[2] = {3, 4}; /* <= src everywhere, <= x off the axis */
                for (int k = 0; k < 12; k++)
                    iv[k] = (k * 3 + 1) % xs[axis]; /* repeats */
                fc_tensor *index = make_index(FC_I64, is, 2, iv, l == 2);
                fc_tensor *out = fc_scatter_add(g_ctx, x, axis, index, src);
                assert_non_null(out);
                assert_int_equal(fc_tensor_dtype(out), dt);
                double want[20];
                int64_t wi[20];
                for (int64_t f = 0; f < 20; f++) {
                    lh_unravel(f, xs, 2, xi);
                    want[f] = lh_get(x, xi);
                    wi[f] = (int64_t)want[f];
                }
                for (int64_t f = 0; f < 12; f++) {
                    lh_unravel(f, is, 2, ii);
                    memcpy(xi, ii, sizeof xi);
                    xi[axis] = iv[f];
                    want[lh_ravel(xi, xs, 2)] += lh_get(src, ii);
                    wi[lh_ravel(xi, xs, 2)] += (int64_t)lh_get(src, ii);
                }
                for (int64_t f = 0; f < 20; f++) {
                    double w = want[f];
                    if (is_int) { /* wrap like the dtype does */
                        unsigned char b[8];
                        fc_cast_scalar(FC_I64, &wi[f], dt, b);
                        fc_cast_scalar(dt, b, FC_F64, &w);
                    }
                    lh_unravel(f, xs, 2, xi);
                    if (lh_get(out, xi) != w) {
                        print_message("%s axis %d element %lld: %g, want %g\n", fc_dtype_name(dt),
                                      axis, (long long)f, lh_get(out, xi), w);
                        fail();
                    }
                }
                /* x itself is untouched */
                assert_false(out->raw.buf == x->raw.buf);
                fc_release(out);
                fc_release(index);
                fc_release(src);
                fc_release(x);
            }
        }
    }
}

/* Many collisions with inexact float sums: the bits must not depend on threads. */
static void test_index_scatter_add_deterministic(void **state) {
    (void)state;
    const int64_t xs[2] = {64, 8}, is[2] = {4096, 8};
    int64_t *iv = malloc(sizeof(int64_t) * 4096 * 8);
    for (int64_t k = 0; k < 4096 * 8; k++)
        iv[k] = (k * 2654435761u) % 64;
    fc_tensor *index = make_index(FC_I32, is, 2, iv, false);
    fc_tensor *x = fc_randn(g_ctx, FC_F32, xs, 2), *src = fc_randn(g_ctx, FC_F32, is, 2);
    fc_tensor *ref = NULL;
    for (int threads = 1; threads <= 4; threads++) {
        fc_ctx_set_threads(g_ctx, threads);
        fc_tensor *out = fc_scatter_add(g_ctx, x, 0, index, src);
        assert_non_null(out);
        if (!ref)
            ref = out;
        else {
            assert_memory_equal(fc_tensor_data(out), fc_tensor_data(ref), 64 * 8 * 4);
            fc_release(out);
        }
    }
    fc_release(ref);
    fc_release(src);
    fc_release(x);
    fc_release(index);
    free(iv);
}

static void test_index_scatter_add_errors(void **state) {
    (void)state;
    fc_tensor *x = fc_zeros(g_ctx, FC_F32, (const int64_t[]){3, 4}, 2);
    fc_tensor *s16 = fc_zeros(g_ctx, FC_F16, (const int64_t[]){3, 4}, 2);
    fc_tensor *idx = fc_zeros(g_ctx, FC_I64, (const int64_t[]){3, 4}, 2);
    assert_null(fc_scatter_add(g_ctx, x, 0, idx, s16));
    expect_error(FC_ERR_DTYPE, "scatter_add: x f32[3,4] and src f16[3,4] differ in dtype");
    fc_tensor *bx = fc_zeros(g_ctx, FC_BOOL, (const int64_t[]){3, 4}, 2);
    assert_null(fc_scatter_add(g_ctx, bx, 0, idx, bx));
    expect_error(FC_ERR_DTYPE, "scatter_add: dtype bool cannot be added");
    fc_tensor *small = fc_zeros(g_ctx, FC_F32, (const int64_t[]){3, 2}, 2);
    assert_null(fc_scatter_add(g_ctx, x, 0, idx, small));
    expect_error(FC_ERR_SHAPE_MISMATCH, "and src f32[3,2]");
    fc_tensor *oob = make_index(FC_U8, (const int64_t[]){1, 1}, 2, (const int64_t[]){3}, false);
    fc_tensor *one = fc_zeros(g_ctx, FC_F32, (const int64_t[]){1, 1}, 2);
    assert_null(fc_scatter_add(g_ctx, x, 0, oob, one));
    expect_error(FC_ERR_INDEX, "scatter_add: index value 3 at position [0,0] of index u8[1,1] is "
                               "out of range [0, 3) for axis 0 of f32[3,4]");
    fc_release(one);
    fc_release(oob);
    fc_release(small);
    fc_release(bx);
    fc_release(idx);
    fc_release(s16);
    fc_release(x);
}

/* ---- one_hot -------------------------------------------------------------------------------- */

static void test_index_one_hot(void **state) {
    (void)state;
    const int64_t iv[6] = {4, 0, 2, 2, 1, 3};
    const fc_dtype dts[5] = {FC_F32, FC_I64, FC_BOOL, FC_BF16, FC_U8};
    int64_t oi[3];
    for (int d = 0; d < 5; d++) {
        fc_tensor *index = make_index(index_dtypes[d], (const int64_t[]){2, 3}, 2, iv, d % 2);
        fc_tensor *out = fc_one_hot(g_ctx, index, 5, dts[d]);
        assert_non_null(out);
        assert_int_equal(fc_tensor_dtype(out), dts[d]);
        const int64_t os[3] = {2, 3, 5};
        for (int i = 0; i < 3; i++)
            assert_int_equal(fc_tensor_shape(out)[i], os[i]);
        for (int64_t f = 0; f < 30; f++) {
            lh_unravel(f, os, 3, oi);
            assert_true(lh_get(out, oi) == (iv[oi[0] * 3 + oi[1]] == oi[2] ? 1.0 : 0.0));
        }
        fc_release(out);
        fc_release(index);
    }
    fc_tensor *index =
        make_index(FC_I32, (const int64_t[]){3}, 1, (const int64_t[]){1, 5, 0}, false);
    assert_null(fc_one_hot(g_ctx, index, 5, FC_F32));
    expect_error(FC_ERR_INDEX, "one_hot: index value 5 at position [1]");
    assert_null(fc_one_hot(g_ctx, index, 0, FC_F32));
    expect_error(FC_ERR_INVALID_ARG, "one_hot: num_classes is 0");
    assert_null(fc_one_hot(g_ctx, index, 6, FC_Q8_0));
    expect_error(FC_ERR_DTYPE, "one_hot");
    assert_null(fc_one_hot(g_ctx, index, 6, FC_DTYPE_COUNT));
    expect_error(FC_ERR_DTYPE, "one_hot");
    fc_tensor *fi = fc_zeros(g_ctx, FC_F16, (const int64_t[]){3}, 1);
    assert_null(fc_one_hot(g_ctx, fi, 6, FC_F32));
    expect_error(FC_ERR_DTYPE, "one_hot");
    fc_tensor *r8 = fc_zeros(g_ctx, FC_I64, (const int64_t[]){1, 1, 1, 1, 1, 1, 1, 2}, 8);
    assert_null(fc_one_hot(g_ctx, r8, 6, FC_F32));
    expect_error(FC_ERR_RANK, "one_hot");
    fc_release(r8);
    fc_release(fi);
    fc_release(index);
}

/* ---- indexing ------------------------------------------------------------------------------- */

static fc_tensor *index_of(fc_ctx *c, fc_dtype dt, const int64_t *shape, int rank,
                           const int64_t *v) {
    double d[64];
    for (int64_t i = 0; i < lh_numel(shape, rank); i++)
        d[i] = (double)v[i];
    return lh_from_f64(c, dt, shape, rank, d);
}

static fc_tensor *fn_index_select(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n;
    int axis = *(const int *)u;
    fc_tensor *idx =
        index_of(c, FC_I32, (const int64_t[]){2, 3}, 2, (const int64_t[]){1, 0, 1, 2, 1, 0});
    return fc_index_select(c, fc_transpose(c, in[0], 0, 1), axis, idx);
}
static fc_tensor *fn_embedding(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n, (void)u;
    fc_tensor *ids =
        index_of(c, FC_I64, (const int64_t[]){2, 4}, 2, (const int64_t[]){4, 0, 4, 4, 1, 2, 0, 4});
    return fc_embedding(c, in[0], ids);
}
static fc_tensor *fn_gather(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n, (void)u;
    fc_tensor *idx = index_of(c, FC_U8, (const int64_t[]){2, 5}, 2,
                              (const int64_t[]){3, 3, 0, 1, 3, 2, 0, 0, 1, 2});
    return fc_gather(c, in[0], 1, idx);
}
static fc_tensor *fn_scatter_add(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n, (void)u; /* src [3,4] is larger than the index [2,3] */
    fc_tensor *idx =
        index_of(c, FC_I16, (const int64_t[]){2, 3}, 2, (const int64_t[]){2, 0, 2, 1, 1, 0});
    return fc_scatter_add(c, fc_expand(c, in[0], (const int64_t[]){3, 4}, 2), 0, idx, in[1]);
}

static void test_grad_indexing(void **state) {
    (void)state;
    fc_ctx_set_rng(g_ctx, LH_GRAD_SEED, 0);
    int axis0 = 0, axis1 = -1;
    assert_true(lh_gradcheck(g_ctx, fn_index_select, &axis0,
                             (fc_tensor *[]){lh_leaf(g_ctx, (const int64_t[]){4, 3}, 2)}, 1,
                             "index_select axis 0"));
    assert_true(lh_gradcheck(g_ctx, fn_index_select, &axis1,
                             (fc_tensor *[]){lh_leaf(g_ctx, (const int64_t[]){4, 3}, 2)}, 1,
                             "index_select axis 1"));
    assert_true(lh_gradcheck(g_ctx, fn_embedding, NULL,
                             (fc_tensor *[]){lh_leaf(g_ctx, (const int64_t[]){5, 3}, 2)}, 1,
                             "embedding"));
    assert_true(lh_gradcheck(g_ctx, fn_gather, NULL,
                             (fc_tensor *[]){lh_leaf(g_ctx, (const int64_t[]){3, 4}, 2)}, 1,
                             "gather"));
    assert_true(lh_gradcheck(g_ctx, fn_scatter_add, NULL,
                             (fc_tensor *[]){lh_leaf(g_ctx, (const int64_t[]){1, 4}, 2),
                                             lh_leaf(g_ctx, (const int64_t[]){3, 4}, 2)},
                             2, "scatter_add"));
}

/* The embedding backward sums colliding rows in index order: same bits for
 * any thread count. */
static void test_grad_embedding_deterministic(void **state) {
    (void)state;
    fc_ctx_set_rng(g_ctx, LH_GRAD_SEED, 0);
    int64_t ids_v[64];
    for (int i = 0; i < 64; i++)
        ids_v[i] = (i * 7) % 5;
    fc_tensor *table = fc_param_randn(g_ctx, FC_F32, (const int64_t[]){5, 1100}, 2, 1.0);
    fc_tensor *ids = index_of(g_ctx, FC_I64, (const int64_t[]){64}, 1, ids_v);
    fc_tensor *g = fc_randn(g_ctx, FC_F32, (const int64_t[]){64, 1100}, 2);
    fc_tensor *first = NULL;
    for (int threads = 1; threads <= 4; threads++) {
        fc_ctx_set_threads(g_ctx, threads);
        fc_tensor *y = fc_embedding(g_ctx, table, ids);
        assert_int_equal(fc_backward_with(g_ctx, y, g, false), FC_OK);
        if (!first)
            first = fc_clone(g_ctx, fc_grad(table));
        else
            assert_memory_equal(fc_tensor_data(fc_grad(table)), fc_tensor_data(first),
                                5 * 1100 * 4);
        fc_zero_grad(&table, 1);
        fc_release(y);
    }
    /* and the values are the row sums, accumulated in index order */
    const float *gv = fc_tensor_data(g), *fv = fc_tensor_data(first);
    for (int r = 0; r < 5; r++) {
        for (int c = 0; c < 1100; c += 37) {
            float want = 0.0f;
            for (int i = 0; i < 64; i++)
                if (ids_v[i] == r) want += gv[i * 1100 + c];
            assert_true(fv[r * 1100 + c] == want);
        }
    }
    fc_release(first);
    fc_release(g);
    fc_release(ids);
    fc_release(table);
}

static void test_grad_saved_index_modified(void **state) {
    (void)state;
    fc_ctx_set_rng(g_ctx, LH_GRAD_SEED, 0);
    fc_tensor *x = fc_param_randn(g_ctx, FC_F32, (const int64_t[]){4, 2}, 2, 1.0);
    fc_tensor *idx = index_of(g_ctx, FC_I64, (const int64_t[]){2}, 1, (const int64_t[]){3, 1});
    fc_tensor *y = fc_index_select(g_ctx, x, 0, idx);
    int64_t *p = fc_tensor_data_mut(idx);
    p[0] = 0;
    fc_tensor *g = fc_ones(g_ctx, FC_F32, (const int64_t[]){2, 2}, 2);
    assert_int_equal(fc_backward_with(g_ctx, y, g, false), FC_ERR_SAVED_MODIFIED);
    assert_non_null(strstr(fc_ctx_error(g_ctx), "index_select"));
    assert_non_null(strstr(fc_ctx_error(g_ctx), "index"));
    fc_ctx_clear_error(g_ctx);
    fc_release(g);
    fc_release(y);
    fc_release(idx);
    fc_release(x);
}

/* ---- reduced-precision leaves --------------------------------------------------------------- */

static void test_grad_f16_leaf_gets_f32_gradient(void **state) {
    (void)state;
    fc_ctx_set_rng(g_ctx, LH_GRAD_SEED, 0);
    const fc_dtype dts[2] = {FC_F16, FC_BF16};
    for (int d = 0; d < 2; d++) {
        fc_tensor *x = fc_param_zeros(g_ctx, dts[d], (const int64_t[]){3, 4}, 2);
        fc_tensor *idx =
            index_of(g_ctx, FC_I32, (const int64_t[]){3}, 1, (const int64_t[]){2, 2, 0});
        /* y = index_select(narrow(transpose(x))): rows 2, 2, 0 of x[1:3, :]^T */
        fc_tensor *y =
            fc_index_select(g_ctx, fc_narrow(g_ctx, fc_transpose(g_ctx, x, 0, 1), 1, 1, 2), 0, idx);
        fc_tensor *g = fc_full(g_ctx, FC_F32, (const int64_t[]){3, 2}, 2, 0.5);
        assert_int_equal(fc_backward_with(g_ctx, y, g, false), FC_OK);
        fc_tensor *gx = fc_grad(x);
        assert_int_equal(fc_tensor_dtype(gx), FC_F32);
        /* x^T[c][r] picked for c in {2, 2, 0} and r in {1, 2}: x[r][c] */
        const float *gv = fc_tensor_data(gx);
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 4; c++) {
                float want = r == 0 ? 0.0f : c == 2 ? 1.0f : c == 0 ? 0.5f : 0.0f;
                assert_true(gv[r * 4 + c] == want);
            }
        fc_zero_grad(&x, 1);
        fc_release(g);
        fc_release(y);
        fc_release(idx);
        fc_release(x);
    }
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_index_select_every_dtype_layout_and_index),
        T(test_index_embedding),
        T(test_index_select_errors),
        T(test_index_block_tables),
        T(test_index_gather_values),
        T(test_index_scatter_add_values),
        T(test_index_scatter_add_deterministic),
        T(test_index_scatter_add_errors),
        T(test_index_one_hot),
        T(test_grad_indexing),
        T(test_grad_embedding_deterministic),
        T(test_grad_saved_index_modified),
        T(test_grad_f16_leaf_gets_f32_gradient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
