/* SPDX-License-Identifier: MIT */
/* test_compare.c - comparisons, logic and selection (src/ops/compare.c
 * over src/exec/kernels/compare.c): eq/ne/lt/le/gt/ge over every allowed
 * dtype and layout (values drawn from a small set so ties, signed zeros,
 * NaN and infinities all occur), the exact scalar comparisons (i64 beyond
 * 2^53, a scalar that does not round-trip through the dtype), truthiness
 * in the logical ops across mixed dtypes, where and masked_fill with
 * broadcasting, masked_fill's fast and generic layouts, the zero gradient
 * of a condition, and the refusals. References are written in plain C
 * here. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fc_test_data.h"
#include "fct_f64.h"
#include "fct_tensor.h"
#include "fucina.h"

static int setup(void **state) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 3});
    *state = ctx;
    return ctx ? 0 : -1;
}

static int teardown(void **state) {
    fc_ctx *ctx = *state;
    int64_t live = fct_live(ctx);
    fc_ctx_free(ctx);
    if (live != 0) {
        fprintf(stderr, "leak check: %lld tensors still live\n", (long long)live);
        return -1;
    }
    return 0;
}

typedef enum cmp { EQ, NE, LT, LE, GT, GE, CMP_COUNT } cmp;
typedef fc_tensor *(*cmp_fn)(fc_ctx *, fc_tensor *, fc_tensor *);
static const cmp_fn cmp_fns[CMP_COUNT] = {fc_eq, fc_ne, fc_lt, fc_le, fc_gt, fc_ge};
static const char *const cmp_names[CMP_COUNT] = {"eq", "ne", "lt", "le", "gt", "ge"};

static double ref_cmp(cmp c, double x, double y) {
    switch (c) {
    case EQ:
        return x == y;
    case NE:
        return x != y;
    case LT:
        return x < y;
    case LE:
        return x <= y;
    case GT:
        return x > y;
    default:
        return x >= y;
    }
}

static const fc_dtype all_dts[] = {FC_BOOL, FC_U8,  FC_U16,  FC_I8,  FC_I16, FC_I32,
                                   FC_I64,  FC_F16, FC_BF16, FC_F32, FC_F64};

/* A value from a small set, so ties are frequent; floats also get signed
 * zeros, NaN and infinities. */
static double pick(fc_dtype dt, uint64_t *rng) {
    static const double fl[] = {-2, -1, -0.0, 0, 0.5, 1, 2, NAN, INFINITY, -INFINITY};
    static const double sg[] = {-3, -1, 0, 1, 2, 3, 100};
    uint64_t r = fc_test_splitmix64(rng);
    if (dt == FC_BOOL) return (double)(r & 1);
    if (fc_dtype_is_float(dt)) return fl[r % 10];
    if (fc_dtype_is_unsigned_int(dt)) return (double)(r % 6);
    return sg[r % 7];
}

static void test_compare_all(void **state) {
    fc_ctx *ctx = *state;
    const int64_t shape[2] = {4, 5};
    double a[20], b[20], got[20];
    uint64_t rng = 1;
    for (size_t d = 0; d < sizeof all_dts / sizeof all_dts[0]; d++) {
        fc_dtype dt = all_dts[d];
        for (int i = 0; i < 20; i++)
            a[i] = pick(dt, &rng), b[i] = pick(dt, &rng);
        for (int la = 0; la < FCT_LAYOUT_COUNT; la++) {
            for (int lb = 0; lb < FCT_LAYOUT_COUNT; lb++) {
                fc_scope_begin(ctx);
                fc_tensor *ta = fct_make(ctx, dt, shape, 2, a, la);
                fc_tensor *tb = fct_make(ctx, dt, shape, 2, b, lb);
                for (int c = 0; c < CMP_COUNT; c++) {
                    fc_tensor *r = cmp_fns[c](ctx, ta, tb);
                    assert_non_null(r);
                    assert_int_equal(fc_tensor_dtype(r), FC_BOOL);
                    assert_false(fc_tensor_requires_grad(r));
                    assert_int_equal(fct_read(r, got, 20), 20);
                    for (int i = 0; i < 20; i++) {
                        if (got[i] != ref_cmp(c, a[i], b[i])) {
                            fprintf(stderr, "%s %s [%d]: %g vs %g -> %g\n", cmp_names[c],
                                    fc_dtype_name(dt), i, a[i], b[i], got[i]);
                            fail();
                        }
                    }
                }
                fc_scope_end(ctx);
            }
        }
    }
    /* broadcast [4,1] against [5] */
    fc_scope_begin(ctx);
    for (int i = 0; i < 5; i++)
        a[i] = i, b[i] = 4 - i;
    fc_tensor *r = fc_le(ctx, fct_make(ctx, FC_BF16, (const int64_t[]){4, 1}, 2, a, FCT_STRIDED),
                         fct_make(ctx, FC_BF16, (const int64_t[]){5}, 1, b, FCT_CONTIG));
    assert_int_equal(fct_read(r, got, 20), 20);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++)
            assert_true(got[i * 5 + j] == (a[i] <= b[j]));
    fc_scope_end(ctx);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
}

static fc_tensor *i64_tensor(fc_ctx *ctx, const int64_t *v, int64_t n) {
    return fc_tensor_from_data(ctx, FC_I64, &n, 1, v);
}

static void expect_bools(fc_tensor *r, const uint8_t *want, int n) {
    assert_non_null(r);
    assert_int_equal(fc_tensor_dtype(r), FC_BOOL);
    assert_memory_equal(fc_tensor_data(r), want, (size_t)n);
}

/* The scalar forms compare exact values, never the scalar rounded to the
 * tensor's dtype. */
static void test_compare_scalar_exact(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    /* i64 beyond 2^53: 2^53 + 1 is not a double, yet compares exactly */
    const double p53 = 9007199254740992.0;
    int64_t big[5] = {((int64_t)1 << 53) + 1, (int64_t)1 << 53, INT64_MAX, INT64_MIN, -5};
    fc_tensor *tb = i64_tensor(ctx, big, 5);
    expect_bools(fc_gt_scalar(ctx, tb, p53), (const uint8_t[]){1, 0, 1, 0, 0}, 5);
    expect_bools(fc_eq_scalar(ctx, tb, p53), (const uint8_t[]){0, 1, 0, 0, 0}, 5);
    expect_bools(fc_lt_scalar(ctx, tb, 9223372036854775808.0), (const uint8_t[]){1, 1, 1, 1, 1}, 5);
    expect_bools(fc_eq_scalar(ctx, tb, -9223372036854775808.0), (const uint8_t[]){0, 0, 0, 1, 0},
                 5);
    expect_bools(fc_gt_scalar(ctx, tb, -1e300), (const uint8_t[]){1, 1, 1, 1, 1}, 5);
    expect_bools(fc_lt_scalar(ctx, tb, -4.5), (const uint8_t[]){0, 0, 0, 1, 1}, 5);
    expect_bools(fc_gt_scalar(ctx, tb, -5.5), (const uint8_t[]){1, 1, 1, 0, 1}, 5);
    expect_bools(fc_eq_scalar(ctx, tb, NAN), (const uint8_t[]){0, 0, 0, 0, 0}, 5);
    expect_bools(fc_lt_scalar(ctx, tb, NAN), (const uint8_t[]){0, 0, 0, 0, 0}, 5);
    /* an integer against a fraction: 2 < 2.5, 3 > 2.5, never equal */
    double iv[4] = {2, 3, -2, -3};
    for (int d = 0; d < 7; d++) {
        fc_dtype dt = all_dts[d];
        if (fc_dtype_is_unsigned_int(dt) || dt == FC_BOOL) continue;
        fc_tensor *t = fct_make(ctx, dt, (const int64_t[]){4}, 1, iv, FCT_STRIDED);
        expect_bools(fc_lt_scalar(ctx, t, 2.5), (const uint8_t[]){1, 0, 1, 1}, 4);
        expect_bools(fc_gt_scalar(ctx, t, -2.5), (const uint8_t[]){1, 1, 1, 0}, 4);
        expect_bools(fc_eq_scalar(ctx, t, 2.5), (const uint8_t[]){0, 0, 0, 0}, 4);
    }
    /* f16(0.1) is 0.0999755859375: below the double 0.1, not equal to it */
    double tenth = 0.1;
    fc_tensor *h = fct_make(ctx, FC_F16, (const int64_t[]){1}, 1, &tenth, FCT_CONTIG);
    expect_bools(fc_lt_scalar(ctx, h, 0.1), (const uint8_t[]){1}, 1);
    expect_bools(fc_eq_scalar(ctx, h, 0.1), (const uint8_t[]){0}, 1);
    expect_bools(fc_eq_scalar(ctx, h, 0.0999755859375), (const uint8_t[]){1}, 1);
    /* every dtype against a few scalars, in a transposed layout */
    uint64_t rng = 9;
    const double scal[] = {0, 0.5, 1, -1, -0.0, INFINITY, NAN};
    double v[12], got[12];
    for (size_t d = 0; d < sizeof all_dts / sizeof all_dts[0]; d++) {
        for (int i = 0; i < 12; i++)
            v[i] = pick(all_dts[d], &rng);
        fc_tensor *t = fct_make(ctx, all_dts[d], (const int64_t[]){3, 4}, 2, v, FCT_TRANSPOSED);
        for (size_t k = 0; k < sizeof scal / sizeof scal[0]; k++) {
            assert_int_equal(fct_read(fc_eq_scalar(ctx, t, scal[k]), got, 12), 12);
            for (int i = 0; i < 12; i++)
                assert_true(got[i] == (v[i] == scal[k]));
            assert_int_equal(fct_read(fc_lt_scalar(ctx, t, scal[k]), got, 12), 12);
            for (int i = 0; i < 12; i++)
                assert_true(got[i] == (v[i] < scal[k]));
            assert_int_equal(fct_read(fc_gt_scalar(ctx, t, scal[k]), got, 12), 12);
            for (int i = 0; i < 12; i++)
                assert_true(got[i] == (v[i] > scal[k]));
        }
    }
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
    fc_scope_end(ctx);
}

/* Truthiness: -0.0 is false, NaN is true, in every dtype; operands of the
 * logical ops may differ in dtype and broadcast. */
static void test_compare_logical(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    double fa[6] = {0, -0.0, NAN, 1, -2, 0.25};
    fc_tensor *f32 = fct_make(ctx, FC_F32, (const int64_t[]){6}, 1, fa, FCT_STRIDED);
    const uint8_t truth[6] = {0, 0, 1, 1, 1, 1};
    expect_bools(fc_logical_not(ctx, fc_logical_not(ctx, f32)), truth, 6);
    const fc_dtype dts[] = {FC_F16, FC_BF16, FC_F64, FC_F8_E4M3, FC_F8_E5M2};
    for (int d = 0; d < 5; d++) {
        fc_tensor *t = fct_make(ctx, dts[d], (const int64_t[]){6}, 1, fa, FCT_CONTIG);
        expect_bools(fc_logical_or(ctx, t, fc_zeros(ctx, FC_BOOL, (const int64_t[]){1}, 1)), truth,
                     6);
    }
    /* raw f8 codes: 0x80 is -0.0 (false), 0x7f / 0xff are NaN (true) */
    const uint8_t codes[4] = {0x80, 0x7f, 0xff, 0x00};
    fc_tensor *f8 = fc_tensor_from_data(ctx, FC_F8_E4M3, (const int64_t[]){4}, 1, codes);
    expect_bools(fc_logical_not(ctx, f8), (const uint8_t[]){1, 0, 0, 1}, 4);
    /* raw bool bytes other than 0/1 are true */
    const uint8_t bb[2] = {2, 0};
    fc_tensor *bl = fc_tensor_from_data(ctx, FC_BOOL, (const int64_t[]){2, 1}, 2, bb);
    int32_t iv[3] = {0, 7, -1};
    fc_tensor *i32 = fc_tensor_from_data(ctx, FC_I32, (const int64_t[]){3}, 1, iv);
    expect_bools(fc_logical_and(ctx, bl, i32), (const uint8_t[]){0, 1, 1, 0, 0, 0}, 6);
    expect_bools(fc_logical_or(ctx, bl, i32), (const uint8_t[]){1, 1, 1, 0, 1, 1}, 6);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
    fc_scope_end(ctx);
}

/* where over three broadcasting operands; any scalar dtype, bit-exact. */
static void test_compare_where(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    double cv[4] = {1, 0, NAN, -0.0}; /* truthy: 1, 0, 1, 0 */
    fc_tensor *cond = fct_make(ctx, FC_F32, (const int64_t[]){4, 1}, 2, cv, FCT_STRIDED);
    int64_t av[5] = {INT64_MAX, INT64_MIN, ((int64_t)1 << 53) + 1, -1, 0};
    fc_tensor *a = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){5}, 1, av);
    double bv[20];
    for (int i = 0; i < 20; i++)
        bv[i] = 100 + i;
    fc_tensor *b = fct_make(ctx, FC_I64, (const int64_t[]){4, 5}, 2, bv, FCT_TRANSPOSED);
    fc_tensor *w = fc_where(ctx, cond, a, b);
    assert_non_null(w);
    assert_int_equal(fc_tensor_dtype(w), FC_I64);
    const int64_t *wp = fc_tensor_data(w);
    const int truthy[4] = {1, 0, 1, 0};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++)
            assert_true(wp[i * 5 + j] == (truthy[i] ? av[j] : (int64_t)bv[i * 5 + j]));
    /* every scalar dtype moves bit-exactly (NaN payloads and -0.0 too) */
    for (int d = 0; d < FC_F8_E5M2 + 1; d++) {
        double x[3] = {-0.0, 1.5, NAN}, y[3] = {2, -3, 4}, got[3];
        fc_tensor *c =
            fc_tensor_from_data(ctx, FC_BOOL, (const int64_t[]){3}, 1, (const uint8_t[]){1, 0, 1});
        fc_tensor *r = fc_where(ctx, c, fct_make(ctx, d, (const int64_t[]){3}, 1, x, FCT_CONTIG),
                                fct_make(ctx, d, (const int64_t[]){1, 3}, 2, y, FCT_STRIDED));
        assert_int_equal(fct_read(r, got, 3), 3);
        assert_true(got[0] == fct_round(d, -0.0) && signbit(got[0]) == signbit(fct_round(d, -0.0)));
        assert_true(got[1] == fct_round(d, -3));
        double n = fct_round(d, NAN);
        assert_true(isnan(n) ? isnan(got[2]) : got[2] == n);
    }
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
    fc_scope_end(ctx);
}

static void test_compare_masked_fill(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    double x[12], got[12];
    for (int i = 0; i < 12; i++)
        x[i] = i - 5.5;
    const uint8_t mv[4] = {1, 0, 0, 1};
    fc_tensor *mask = fc_tensor_from_data(ctx, FC_BOOL, (const int64_t[]){4}, 1, mv);
    const fc_dtype dts[] = {FC_F32, FC_F64, FC_F16, FC_BF16, FC_I32, FC_U8};
    for (int d = 0; d < 6; d++) {
        fc_tensor *t = fct_make(ctx, dts[d], (const int64_t[]){3, 4}, 2, x, FCT_TRANSPOSED);
        double value = fc_dtype_is_float(dts[d]) ? -INFINITY : 7.9;
        fc_tensor *r = fc_masked_fill(ctx, t, mask, value);
        assert_non_null(r);
        assert_int_equal(fc_tensor_dtype(r), dts[d]);
        assert_int_equal(fct_read(r, got, 12), 12);
        for (int i = 0; i < 12; i++)
            assert_true(got[i] == (mv[i % 4] ? fct_round(dts[d], value) : fct_round(dts[d], x[i])));
    }
    /* a float mask read by truthiness, broadcast along rows */
    double fm[3] = {0, NAN, -0.0};
    fc_tensor *m2 = fct_make(ctx, FC_F32, (const int64_t[]){3, 1}, 2, fm, FCT_STRIDED);
    fc_tensor *r =
        fc_masked_fill(ctx, fct_make(ctx, FC_F64, (const int64_t[]){3, 4}, 2, x, 0), m2, 1);
    assert_int_equal(fct_read(r, got, 12), 12);
    for (int i = 0; i < 12; i++)
        assert_true(got[i] == (i / 4 == 1 ? 1 : x[i]));
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
    fc_scope_end(ctx);
}

static void expect_error(fc_ctx *ctx, fc_tensor *r, fc_status st, const char *text) {
    assert_null(r);
    assert_int_equal(fc_ctx_status(ctx), st);
    if (!strstr(fc_ctx_error(ctx), text)) {
        fprintf(stderr, "error \"%s\" lacks \"%s\"\n", fc_ctx_error(ctx), text);
        fail();
    }
    fc_ctx_clear_error(ctx);
}

static void test_compare_errors(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    const int64_t s23[2] = {2, 3}, s4 = 4, s3 = 3;
    fc_tensor *i32 = fc_ones(ctx, FC_I32, s23, 2), *i64 = fc_ones(ctx, FC_I64, s23, 2);
    fc_tensor *f8 = fc_ones(ctx, FC_F8_E4M3, s23, 2), *f32 = fc_ones(ctx, FC_F32, s23, 2);
    fc_tensor *f16 = fc_ones(ctx, FC_F16, s23, 2), *v4 = fc_ones(ctx, FC_F32, &s4, 1);
    fc_tensor *q = fc_empty(ctx, FC_Q4_K, (const int64_t[]){256}, 1);
    expect_error(ctx, fc_lt(ctx, i32, i64), FC_ERR_DTYPE, "lt: dtypes i32 and i64 differ");
    expect_error(ctx, fc_eq(ctx, f8, f8), FC_ERR_DTYPE, "eq: dtype f8_e4m3 is not supported");
    expect_error(ctx, fc_gt_scalar(ctx, q, 0), FC_ERR_DTYPE, "gt_scalar: dtype q4_k");
    expect_error(ctx, fc_ge(ctx, f32, v4), FC_ERR_SHAPE_MISMATCH,
                 "ge: shapes [2,3] and [4] do not broadcast");
    expect_error(ctx, fc_logical_and(ctx, f32, q), FC_ERR_DTYPE, "logical_and: dtype q4_k");
    expect_error(ctx, fc_where(ctx, f32, f32, f16), FC_ERR_DTYPE,
                 "where: dtypes f32 and f16 differ");
    expect_error(ctx, fc_where(ctx, f32, v4, fc_ones(ctx, FC_F32, &s3, 1)), FC_ERR_SHAPE_MISMATCH,
                 "where: shapes [2,3], [4] and [3] do not broadcast");
    expect_error(ctx, fc_where(ctx, q, f32, f32), FC_ERR_DTYPE, "where: dtype q4_k");
    fc_tensor *big = fc_ones(ctx, FC_BOOL, (const int64_t[]){2, 2, 3}, 3);
    expect_error(ctx, fc_masked_fill(ctx, f32, big, 0), FC_ERR_SHAPE_MISMATCH,
                 "masked_fill: mask bool[2,2,3] does not broadcast to x f32[2,3]");
    expect_error(ctx, fc_masked_fill(ctx, q, f32, 0), FC_ERR_DTYPE, "masked_fill: dtype q4_k");
    expect_error(ctx, fc_eq(ctx, f32, NULL), FC_ERR_NULL_ARG, "eq: input 'b' is NULL");
    expect_error(ctx, fc_logical_not(ctx, NULL), FC_ERR_NULL_ARG, "logical_not");
    expect_error(ctx, fc_where(ctx, NULL, f32, f32), FC_ERR_NULL_ARG, "where: input 'cond'");
    assert_null(fc_where(ctx, fc_lt(ctx, i32, i64), f32, f32));
    assert_null(fc_masked_fill(ctx, f32, fc_eq(ctx, NULL, NULL), 0));
    expect_error(ctx, NULL, FC_ERR_DTYPE, "lt: dtypes i32 and i64");
    fc_scope_end(ctx);
}

/* A condition that itself requires grad gets a zero gradient. */
static void test_compare_grad_condition(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    const int64_t s = 4;
    double cv[4] = {1, 0, -2, 0}, av[4] = {1, 2, 3, 4};
    fc_tensor *c = fct_make(ctx, FC_F32, &s, 1, cv, FCT_CONTIG);
    fc_tensor *a = fct_make(ctx, FC_F32, &s, 1, av, FCT_CONTIG);
    c = fc_clone(ctx, c), a = fc_clone(ctx, a);
    assert_int_equal(fc_requires_grad(c, true), FC_OK);
    assert_int_equal(fc_requires_grad(a, true), FC_OK);
    fc_tensor *ones = fc_ones(ctx, FC_F32, &s, 1);
    assert_int_equal(fc_backward_with(ctx, fc_where(ctx, c, a, fc_neg(ctx, a)), ones, false),
                     FC_OK);
    double gc[4], ga[4];
    fct_read(fc_grad(c), gc, 4);
    fct_read(fc_grad(a), ga, 4);
    for (int i = 0; i < 4; i++)
        assert_true(gc[i] == 0 && ga[i] == (cv[i] != 0 ? 1 : -1));
    fc_zero_grad((fc_tensor *[]){a, c}, 2);
    assert_int_equal(fc_backward_with(ctx, fc_masked_fill(ctx, a, c, 9), ones, false), FC_OK);
    fct_read(fc_grad(c), gc, 4);
    fct_read(fc_grad(a), ga, 4);
    for (int i = 0; i < 4; i++)
        assert_true(gc[i] == 0 && ga[i] == (cv[i] != 0 ? 0 : 1));
    fc_scope_end(ctx);
}

/* ---- masked_fill's layouts ----------------------------------------------------------------
 * The fast path (x contiguous, a contiguous one-byte mask whose shape is
 * x's trailing shape, leading 1s allowed) and the generic strided walk
 * must give the same elements: every case is checked against a reference
 * that broadcasts the mask by index arithmetic and reads it by truthiness,
 * and each fast-path case is repeated on a non-contiguous view holding the
 * same values (which must take the generic path) and compared bit for bit.
 * Cases: element sizes 1, 2, 4 and 8, bool/u8/i8 masks with bytes other
 * than 0/1, odd shapes whose thread slices start inside a mask row block,
 * and layouts off the fast path (middle broadcast axis, a wider mask dtype,
 * a transposed mask). The backward (masked_fill of the output gradient)
 * is checked on the attention shape's odd cousin. These tests make their
 * own contexts (one and two threads). */

typedef struct mf_case {
    fc_dtype dt, mdt;
    int xr, mr;
    int64_t xs[4], ms[4];
    double fill;
} mf_case;

/* Reference: the mask element that x's element i reads (right-aligned
 * broadcast), by truthiness. */
static bool ref_masked(const mf_case *c, const double *m, int64_t i) {
    int64_t idx[4], rem = i;
    for (int d = c->xr - 1; d >= 0; d--) {
        idx[d] = rem % c->xs[d];
        rem /= c->xs[d];
    }
    int64_t mi = 0;
    for (int d = 0; d < c->mr; d++) {
        int64_t xi = idx[d + c->xr - c->mr];
        mi = mi * c->ms[d] + (c->ms[d] == 1 ? 0 : xi);
    }
    return m[mi] != 0.0;
}

static double *mf_run_case(fc_ctx *ctx, const mf_case *c, bool x_view, bool mask_view) {
    int64_t n = 1, mn = 1;
    for (int d = 0; d < c->xr; d++)
        n *= c->xs[d];
    for (int d = 0; d < c->mr; d++)
        mn *= c->ms[d];
    double *xv = malloc(sizeof *xv * (size_t)n), *mv = malloc(sizeof *mv * (size_t)mn);
    fill_random(xv, n, 17, -4.0, 4.0);
    for (int64_t i = 0; i < n; i++)
        xv[i] = c->dt == FC_I8 ? round(xv[i]) : (float)xv[i];
    /* mask bytes other than 0/1 where the dtype has them; -0.0 is false and
     * NaN true for a float mask */
    static const double u8v[4] = {0, 1, 2, 200}, i8v[4] = {0, -1, 3, 1},
                        f32v[4] = {0.0, -0.0, 0.5, NAN}, boolv[4] = {0, 1, 0, 1};
    const double *pick = c->mdt == FC_U8    ? u8v
                         : c->mdt == FC_I8  ? i8v
                         : c->mdt == FC_F32 ? f32v
                                            : boolv;
    uint64_t s = 99;
    for (int64_t i = 0; i < mn; i++)
        mv[i] = pick[fc_test_splitmix64(&s) % 4];
    fc_scope_begin(ctx);
    fc_tensor *x = from_f64(ctx, c->dt, c->xs, c->xr, xv);
    fc_tensor *m = from_f64(ctx, c->mdt, c->ms, c->mr, mv);
    if (x_view) { /* same logical values, transposed storage */
        x = fc_transpose(ctx, fc_contiguous(ctx, fc_transpose(ctx, x, 0, c->xr - 1)), 0, c->xr - 1);
        assert_false(fc_tensor_is_contiguous(x));
    }
    if (mask_view) {
        m = fc_transpose(ctx, fc_contiguous(ctx, fc_transpose(ctx, m, 0, c->mr - 1)), 0, c->mr - 1);
        assert_false(fc_tensor_is_contiguous(m));
    }
    /* the reference reads x as stored (rounded to its dtype) */
    double *xr = values(x);
    memcpy(xv, xr, sizeof *xv * (size_t)n);
    free(xr);
    fc_tensor *out = fc_masked_fill(ctx, x, m, c->fill);
    assert_non_null(out);
    assert_int_equal(fc_tensor_dtype(out), c->dt);
    double *got = values(out);
    fc_scope_end(ctx);
    for (int64_t i = 0; i < n; i++) {
        double want = ref_masked(c, mv, i) ? c->fill : xv[i];
        if (!(got[i] == want || (isnan(want) && isnan(got[i]))))
            fail_msg("element %lld: got %g want %g", (long long)i, got[i], want);
    }
    free(xv);
    free(mv);
    return got;
}

static void mf_check_case(const mf_case *c, bool fast) {
    for (int threads = 1; threads <= 2; threads++) {
        fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .seed = 1});
        assert_non_null(ctx);
        double *a = mf_run_case(ctx, c, false, false);
        if (fast && c->xs[0] > 1 &&
            c->xs[c->xr - 1] > 1) { /* the generic path on a view gives the same bits */
            double *b = mf_run_case(ctx, c, true, false);
            int64_t n = 1;
            for (int d = 0; d < c->xr; d++)
                n *= c->xs[d];
            assert_memory_equal(a, b, sizeof *a * (size_t)n);
            free(b);
        }
        if (c->mr >= 2 && c->ms[0] > 1 && c->ms[c->mr - 1] > 1)
            free(mf_run_case(ctx, c, false, true)); /* a transposed mask */
        free(a);
        free_ctx(ctx);
    }
}

static void test_compare_masked_fill_fast_layouts(void **state) {
    (void)state;
    const mf_case cases[] = {
        {FC_F32, FC_BOOL, 4, 2, {3, 2, 5, 7}, {5, 7}, -INFINITY},
        {FC_F32, FC_U8, 4, 4, {3, 2, 5, 7}, {1, 1, 5, 7}, 1.5},
        {FC_F64, FC_BOOL, 2, 1, {4, 7}, {7}, -2.25},
        {FC_F16, FC_I8, 2, 2, {6, 5}, {6, 5}, 2.5},
        {FC_I8, FC_U8, 2, 1, {3, 9}, {9}, -7},
        {FC_BF16, FC_BOOL, 3, 3, {2, 3, 1}, {1, 3, 1}, 0.5},
        /* 85827 elements: two threads split inside a 4087-element mask block */
        {FC_F32, FC_BOOL, 4, 2, {7, 3, 61, 67}, {61, 67}, -INFINITY},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        mf_check_case(&cases[i], true);
}

static void test_compare_masked_fill_generic_layouts(void **state) {
    (void)state;
    const mf_case cases[] = {
        {FC_F32, FC_BOOL, 3, 2, {4, 5, 3}, {5, 1}, 9.0},    /* a middle broadcast axis */
        {FC_F32, FC_F32, 3, 2, {4, 5, 3}, {5, 3}, -1.0},    /* a four-byte mask */
        {FC_F64, FC_BOOL, 3, 3, {2, 5, 3}, {2, 1, 3}, 3.0}, /* leading axis not broadcast */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        mf_check_case(&cases[i], false);
}

/* The gradient is masked_fill(g, mask, 0): zero where filled, g elsewhere. */
static void test_compare_masked_fill_backward(void **state) {
    (void)state;
    const int64_t xs[4] = {5, 3, 33, 35}, ms[2] = {33, 35};
    int64_t n = 5 * 3 * 33 * 35;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 1});
    fc_scope_begin(ctx);
    fc_tensor *x = fc_zeros(ctx, FC_F32, xs, 4);
    assert_int_equal(fc_requires_grad(x, true), FC_OK);
    fc_tensor *mask = fc_logical_not(ctx, fc_tril(ctx, fc_ones(ctx, FC_F32, ms, 2), 0));
    fc_tensor *y = fc_masked_fill(ctx, x, mask, -INFINITY);
    double *gv = malloc(sizeof *gv * (size_t)n);
    fill_random(gv, n, 5, -1.0, 1.0);
    fc_tensor *g = from_f64(ctx, FC_F32, xs, 4, gv);
    assert_int_equal(fc_backward_with(ctx, y, g, false), FC_OK);
    double *got = values(fc_grad(x));
    for (int64_t i = 0; i < n; i++) {
        int64_t col = i % 35, row = (i / 35) % 33;
        double want = col > row ? 0.0 : (double)(float)gv[i];
        if (got[i] != want) fail_msg("element %lld: got %g want %g", (long long)i, got[i], want);
    }
    free(got);
    free(gv);
    fc_zero_grad(&x, 1);
    fc_scope_end(ctx);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_compare_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compare_scalar_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compare_logical, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compare_where, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compare_masked_fill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compare_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compare_grad_condition, setup, teardown),
        cmocka_unit_test(test_compare_masked_fill_fast_layouts),
        cmocka_unit_test(test_compare_masked_fill_generic_layouts),
        cmocka_unit_test(test_compare_masked_fill_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
