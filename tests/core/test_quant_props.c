/* SPDX-License-Identifier: MIT */
/* test_quant_props.c - properties of the block formats beyond the golden
 * vectors: round-trip error bounds on random rows, zero rows, finite output
 * for extreme finite input, the error codes of every entry point, rows that
 * are independent of each other, and buffers without alignment.
 *
 * Error bounds (A = absmax of the group the format scales, R = max - min,
 * 2^-11 = the relative rounding of an f16 scale in its normal range; the
 * test rows keep every scale there):
 *   q8_0, q8_1  32: A (0.5/127 + 2^-11)          nearest code, f16 scale
 *   q8_k       256: A 0.5/127                     f32 scale
 *   q4_0        32: A/8 (1 + 2^-8)                the +8 side clips to 7
 *   q5_0        32: A/16 (1 + 2^-7)               the +16 side clips to 15
 *   q4_1        32: R/30 + (R + |min|) 2^-11      nearest code, f16 scale and min
 *   q5_1        32: R/62 + (R + |min|) 2^-11
 *   q2_0 (128), q2_0_g64, tq1_0, tq2_0: A (1/2 + 2^-11)   trits of step A
 *   mxfp4       32: A/4      power-of-two scale: half the widest gap, or the
 *                            clip above 12 steps, is at most A/4
 *   nvfp4       16: A (1 + 1/16) / 6   E4M3 sub-scale within 1/16 of A/6;
 *                            widest gap of E2M1 is 2 scale units
 *   nf4         64: A 0.3038/2 (1 + 2^-11)   half the widest NF4 gap
 *   q1_0       128: exact: +-f16(mean |x|) with the sign of x
 * plus 1e-6 A for the f32 roundings of x * (1/d) and code * d. The
 * searched k-quants have no closed-form bound; their relative RMSE per row
 * (sqrt(sum err^2 / sum x^2)) stays below q2_k 0.33, q3_k 0.17, q4_k 0.085,
 * q5_k 0.056, q6_k 0.036 (the outlier row sets the last three), with and
 * without a flat imatrix: about 1.1x the worst row of ggml's own quantizers
 * (the same bytes, pinned by test_quant_golden) on these rows, so a
 * regression in a scale search shows. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fucina.h"

/* Every block dtype this family set implements (the i-quants live elsewhere). */
static const fc_dtype owned[] = {
    FC_Q1_0,  FC_Q2_0,  FC_Q4_0,  FC_Q4_1,  FC_Q5_0,     FC_Q5_1, FC_Q8_0,
    FC_Q8_1,  FC_Q2_K,  FC_Q3_K,  FC_Q4_K,  FC_Q5_K,     FC_Q6_K, FC_Q8_K,
    FC_TQ1_0, FC_TQ2_0, FC_MXFP4, FC_NVFP4, FC_Q2_0_G64, FC_NF4,
};
#define N_OWNED (sizeof owned / sizeof owned[0])

/* ---- deterministic random rows (splitmix64, Box-Muller) ----------------------- */

static uint64_t rng_state;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double rng_uniform(void) { return (double)(rng_next() >> 11) * 0x1p-53; }
static double rng_normal(void) {
    double u1 = rng_uniform(), u2 = rng_uniform();
    return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}

#define COLS 1024
#define ROWS 5

/* Rows: N(0,1), U[-1,1), 5 N(0,1), |N(0,1)| + 0.5 (all positive: the min
 * paths), 0.3 N(0,1) with 8 outliers of +-20. */
static void fill_rows(float *x) {
    rng_state = 12345;
    for (int j = 0; j < COLS; j++)
        x[j] = (float)rng_normal();
    for (int j = 0; j < COLS; j++)
        x[COLS + j] = (float)(2.0 * rng_uniform() - 1.0);
    for (int j = 0; j < COLS; j++)
        x[2 * COLS + j] = (float)(5.0 * rng_normal());
    for (int j = 0; j < COLS; j++)
        x[3 * COLS + j] = (float)(fabs(rng_normal()) + 0.5);
    for (int j = 0; j < COLS; j++)
        x[4 * COLS + j] = (float)(0.3 * rng_normal());
    for (int k = 0; k < 8; k++)
        x[4 * COLS + (int)(rng_uniform() * COLS)] = k % 2 ? 20.0f : -20.0f;
}

/* Quantizes and dequantizes rows x cols values; returns the dequantized copy. */
static float *round_trip(fc_dtype dtype, const float *x, int64_t rows, int64_t cols,
                         const float *imatrix) {
    size_t rb = fc_quant_row_bytes(dtype, cols);
    assert_true(rb > 0);
    uint8_t *q = malloc(rb * (size_t)rows);
    float *y = malloc(sizeof(float) * (size_t)(rows * cols));
    assert_non_null(q);
    assert_non_null(y);
    assert_int_equal(fc_quantize_ex(dtype, x, q, rows, cols, imatrix, 0), FC_OK);
    assert_int_equal(fc_dequantize(dtype, q, y, rows, cols), FC_OK);
    free(q);
    return y;
}

static float group_absmax(const float *x, int n) {
    float a = 0;
    for (int i = 0; i < n; i++)
        a = fabsf(x[i]) > a ? fabsf(x[i]) : a;
    return a;
}

/* Max allowed |error| in a group of n values (the bounds of the file comment). */
static double group_bound(fc_dtype t, const float *x, int n) {
    const double f16 = 0x1p-11, A = group_absmax(x, n);
    double mn = x[0], mx = x[0];
    for (int i = 1; i < n; i++) {
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
    }
    const double R = mx - mn, slack = 1e-6 * A;
    switch (t) {
    case FC_Q8_0:
    case FC_Q8_1:
        return A * (0.5 / 127 + f16) + slack;
    case FC_Q8_K:
        return A * 0.5 / 127 + slack;
    case FC_Q4_0:
        return A / 8 * (1 + 0x1p-8) + slack;
    case FC_Q5_0:
        return A / 16 * (1 + 0x1p-7) + slack;
    case FC_Q4_1:
        return R / 30 + (R + fabs(mn)) * f16 + slack;
    case FC_Q5_1:
        return R / 62 + (R + fabs(mn)) * f16 + slack;
    case FC_Q2_0:
    case FC_Q2_0_G64:
    case FC_TQ1_0:
    case FC_TQ2_0:
        return A * (0.5 + f16) + slack;
    case FC_MXFP4:
        return A / 4 + slack;
    case FC_NVFP4:
        return A * (1.0 + 1.0 / 16) / 6 + slack;
    case FC_NF4:
        return A * (1.0 - 0.6961928009986877) / 2 * (1 + f16) + slack;
    default:
        fail_msg("no element bound for %s", fc_dtype_name(t));
    }
    return 0;
}

/* Group over which each bounded format takes its scale. */
static int bound_group(fc_dtype t) {
    switch (t) {
    case FC_NVFP4:
        return 16;
    default:
        return (int)fc_dtype_block_elems(t);
    }
}

static void check_elementwise_bound(fc_dtype t) {
    float *x = malloc(sizeof(float) * ROWS * COLS);
    assert_non_null(x);
    fill_rows(x);
    float *y = round_trip(t, x, ROWS, COLS, NULL);
    const int g = bound_group(t);
    for (int b = 0; b < ROWS * COLS / g; b++) {
        const double bound = group_bound(t, x + b * g, g);
        for (int i = b * g; i < (b + 1) * g; i++) {
            const double err = fabs((double)x[i] - (double)y[i]);
            if (!(err <= bound)) {
                fail_msg("%s: value %d: x = %.9g, dequantized %.9g, error %.3g > bound %.3g",
                         fc_dtype_name(t), i, (double)x[i], (double)y[i], err, bound);
            }
        }
    }
    free(x);
    free(y);
}

static void test_quant_props_bound_legacy(void **state) {
    (void)state;
    const fc_dtype ts[] = {FC_Q8_0, FC_Q8_1, FC_Q4_0, FC_Q4_1,
                           FC_Q5_0, FC_Q5_1, FC_Q2_0, FC_Q2_0_G64};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        check_elementwise_bound(ts[i]);
}

static void test_quant_props_bound_other(void **state) {
    (void)state;
    const fc_dtype ts[] = {FC_Q8_K, FC_TQ1_0, FC_TQ2_0, FC_MXFP4, FC_NVFP4, FC_NF4};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        check_elementwise_bound(ts[i]);
}

/* q1_0 keeps only signs: y = +-f16(mean |x| of the 128-block), + when x >= 0.
 * The mean is summed in f32 in order, as the format defines it. */
static void test_quant_props_q1_0_exact(void **state) {
    (void)state;
    float *x = malloc(sizeof(float) * ROWS * COLS);
    assert_non_null(x);
    fill_rows(x);
    float *y = round_trip(FC_Q1_0, x, ROWS, COLS, NULL);
    for (int b = 0; b < ROWS * COLS / 128; b++) {
        float sum = 0;
        for (int i = 0; i < 128; i++)
            sum += fabsf(x[b * 128 + i]);
        const float d = fc_f16_to_f32(fc_f32_to_f16(sum / 128));
        for (int i = b * 128; i < (b + 1) * 128; i++) {
            assert_true(y[i] == (x[i] >= 0.0f ? d : -d));
        }
    }
    free(x);
    free(y);
}

static double row_rel_rmse(const float *x, const float *y, int n) {
    double se = 0, sx = 0;
    for (int i = 0; i < n; i++) {
        se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        sx += (double)x[i] * x[i];
    }
    return sqrt(se / sx);
}

static void test_quant_props_kquant_rmse(void **state) {
    (void)state;
    const struct {
        fc_dtype t;
        double max_rel_rmse;
    } ks[] = {
        {FC_Q2_K, 0.33}, {FC_Q3_K, 0.17}, {FC_Q4_K, 0.085}, {FC_Q5_K, 0.056}, {FC_Q6_K, 0.036}};
    float *x = malloc(sizeof(float) * ROWS * COLS);
    float *w = malloc(sizeof(float) * COLS);
    assert_non_null(x);
    assert_non_null(w);
    fill_rows(x);
    for (int j = 0; j < COLS; j++)
        w[j] = 1.0f;
    for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++) {
        /* the weighted search with flat weights must do as well */
        for (int use_im = 0; use_im < 2; use_im++) {
            float *y = round_trip(ks[k].t, x, ROWS, COLS, use_im ? w : NULL);
            for (int r = 0; r < ROWS; r++) {
                double e = row_rel_rmse(x + r * COLS, y + r * COLS, COLS);
                if (!(e <= ks[k].max_rel_rmse)) {
                    fail_msg("%s%s row %d: relative RMSE %.4f > %.4f", fc_dtype_name(ks[k].t),
                             use_im ? " (imatrix)" : "", r, e, ks[k].max_rel_rmse);
                }
            }
            free(y);
        }
    }
    free(x);
    free(w);
}

/* ---- zero rows, extreme rows ---------------------------------------------------- */

static void test_quant_props_zero_rows(void **state) {
    (void)state;
    float x[2 * 256];
    for (int j = 0; j < 256; j++) {
        x[j] = 0.0f;
        x[256 + j] = j % 3 ? -0.0f : 0.0f;
    }
    for (size_t t = 0; t < N_OWNED; t++) {
        float *y = round_trip(owned[t], x, 2, 256, NULL);
        for (int i = 0; i < 2 * 256; i++) {
            if (y[i] != 0.0f) fail_msg("%s: zero row gave %g", fc_dtype_name(owned[t]), y[i]);
        }
        free(y);
    }
}

/* Fills a 256-value row of the given kind of extreme but finite input. */
static void extreme_row(int kind, float *x) {
    for (int j = 0; j < 256; j++) {
        const double g = rng_normal();
        switch (kind) {
        case 0:
            x[j] = (float)(1e-40 * (2 * rng_uniform() - 1));
            break; /* subnormals */
        case 1:
            x[j] = j % 2 ? 0x1p-149f : -0x1p-149f;
            break; /* the smallest */
        case 2:
            x[j] = j % 2 ? FLT_MAX : -FLT_MAX;
            break;
        case 3:
            x[j] = FLT_MAX;
            break;
        case 4:
            x[j] = (float)(3e38 * (2 * rng_uniform() - 1));
            break;
        case 5:
            x[j] = (float)(1e30 * g);
            break;
        case 6:
            x[j] = (float)(7e4 * (2 * rng_uniform() - 1));
            break; /* beyond f16 */
        case 7:
            x[j] = j % 64 == 5 ? FLT_MAX : (float)(1e-39 * g);
            break;
        case 8:
            x[j] = (float)((g < 0 ? -1 : 1) * pow(10.0, -45 + 83.5 * rng_uniform()));
            break;
        case 9:
            x[j] = (float)(1e5 * g);
            break;
        default:
            x[j] = FLT_MIN * (float)g;
            break;
        }
    }
}
#define N_EXTREME 11

static void test_quant_props_extreme_rows_finite(void **state) {
    (void)state;
    float x[N_EXTREME * 256];
    rng_state = 99;
    for (int k = 0; k < N_EXTREME; k++)
        extreme_row(k, x + 256 * k);
    float w[256];
    for (int j = 0; j < 256; j++)
        w[j] = (float)(j % 7);
    for (size_t t = 0; t < N_OWNED; t++) {
        for (int use_im = 0; use_im < 2; use_im++) {
            float *y = round_trip(owned[t], x, N_EXTREME, 256, use_im ? w : NULL);
            for (int i = 0; i < N_EXTREME * 256; i++) {
                if (!isfinite(y[i])) {
                    fail_msg("%s%s: extreme row %d col %d (x = %g) dequantized to %g",
                             fc_dtype_name(owned[t]), use_im ? " (imatrix)" : "", i / 256, i % 256,
                             (double)x[i], (double)y[i]);
                }
            }
            free(y);
        }
    }
}

/* ---- argument checks ---------------------------------------------------------- */

static void test_quant_props_row_bytes(void **state) {
    (void)state;
    assert_int_equal(fc_quant_row_bytes(FC_Q4_0, 1024), 576);
    assert_int_equal(fc_quant_row_bytes(FC_Q2_0, 128), 34);
    assert_int_equal(fc_quant_row_bytes(FC_Q2_0_G64, 128), 36);
    assert_int_equal(fc_quant_row_bytes(FC_Q8_K, 512), 584);
    assert_int_equal(fc_quant_row_bytes(FC_NVFP4, 64), 36);
    assert_int_equal(fc_quant_row_bytes(FC_NF4, 64), 34);
    for (size_t t = 0; t < N_OWNED; t++) {
        const int64_t be = fc_dtype_block_elems(owned[t]);
        assert_int_equal(fc_quant_row_bytes(owned[t], 3 * be), 3 * fc_dtype_size(owned[t]));
        assert_int_equal(fc_quant_row_bytes(owned[t], be + 1), 0);
        assert_int_equal(fc_quant_row_bytes(owned[t], 0), 0);
        assert_int_equal(fc_quant_row_bytes(owned[t], -be), 0);
    }
    assert_int_equal(fc_quant_row_bytes(FC_F32, 1024), 0);
    assert_int_equal(fc_quant_row_bytes(FC_DTYPE_COUNT, 1024), 0);
    assert_int_equal(fc_quant_row_bytes((fc_dtype)-1, 1024), 0);
}

/* A failed call must not write: every check runs on a 0x5A-filled dst. */
static void expect_quant_error(fc_status want, fc_dtype t, const float *src, int64_t rows,
                               int64_t cols, const float *im, unsigned flags) {
    uint8_t dst[1024];
    memset(dst, 0x5A, sizeof dst);
    assert_int_equal(fc_quantize_ex(t, src, dst, rows, cols, im, flags), want);
    for (size_t i = 0; i < sizeof dst; i++)
        assert_int_equal(dst[i], 0x5A);
}

static void test_quant_props_quantize_errors(void **state) {
    (void)state;
    float x[256] = {0}, im[256], bad[256];
    for (int j = 0; j < 256; j++)
        im[j] = 1.0f;
    uint8_t dst[1024];
    assert_int_equal(fc_quantize(FC_Q4_0, NULL, dst, 1, 32), FC_ERR_NULL_ARG);
    assert_int_equal(fc_quantize(FC_Q4_0, x, NULL, 1, 32), FC_ERR_NULL_ARG);
    expect_quant_error(FC_ERR_DTYPE, FC_F32, x, 1, 32, NULL, 0);
    expect_quant_error(FC_ERR_DTYPE, FC_I8, x, 1, 32, NULL, 0);
    expect_quant_error(FC_ERR_DTYPE, FC_DTYPE_COUNT, x, 1, 32, NULL, 0);
    expect_quant_error(FC_ERR_DTYPE, (fc_dtype)-3, x, 1, 32, NULL, 0);
    expect_quant_error(FC_ERR_INVALID_SHAPE, FC_Q4_0, x, 1, 33, NULL, 0);
    expect_quant_error(FC_ERR_INVALID_SHAPE, FC_Q4_K, x, 1, 128, NULL, 0);
    expect_quant_error(FC_ERR_INVALID_SHAPE, FC_Q2_0, x, 1, 64, NULL, 0);
    expect_quant_error(FC_ERR_INVALID_SHAPE, FC_Q4_0, x, 1, 0, NULL, 0);
    expect_quant_error(FC_ERR_INVALID_SHAPE, FC_Q4_0, x, 1, -32, NULL, 0);
    expect_quant_error(FC_ERR_INVALID_SHAPE, FC_Q4_0, x, 0, 32, NULL, 0);
    expect_quant_error(FC_ERR_INVALID_SHAPE, FC_Q4_0, x, -1, 32, NULL, 0);
    /* byte counts past SIZE_MAX, checked before any access */
    expect_quant_error(FC_ERR_OVERFLOW, FC_Q8_0, x, INT64_C(1) << 40, INT64_C(1) << 30, NULL, 0);
    expect_quant_error(FC_ERR_OVERFLOW, FC_Q4_0, x, 1, INT64_MAX / 32 * 32, NULL, 0);
    /* flags */
    expect_quant_error(FC_ERR_INVALID_ARG, FC_Q4_0, x, 1, 32, NULL, 1u << 7);
    expect_quant_error(FC_ERR_INVALID_ARG, FC_Q4_0, x, 1, 32, NULL, FC_QUANT_IQ4NL_REF);
    /* imatrix: required by three i-quants; must be finite and >= 0 */
    expect_quant_error(FC_ERR_INVALID_ARG, FC_IQ2_XXS, x, 1, 256, NULL, 0);
    expect_quant_error(FC_ERR_INVALID_ARG, FC_IQ2_XS, x, 1, 256, NULL, 0);
    expect_quant_error(FC_ERR_INVALID_ARG, FC_IQ1_S, x, 1, 256, NULL, 0);
    memcpy(bad, im, sizeof bad);
    bad[100] = -1.0f;
    expect_quant_error(FC_ERR_INVALID_ARG, FC_Q4_K, x, 1, 256, bad, 0);
    bad[100] = NAN;
    expect_quant_error(FC_ERR_INVALID_ARG, FC_Q4_K, x, 1, 256, bad, 0);
    bad[100] = INFINITY;
    expect_quant_error(FC_ERR_INVALID_ARG, FC_Q4_K, x, 1, 256, bad, 0);
    /* non-finite input is refused, not quantized into garbage */
    memcpy(bad, x, sizeof bad);
    bad[200] = NAN;
    expect_quant_error(FC_ERR_NON_FINITE, FC_Q8_0, bad, 1, 256, NULL, 0);
    bad[200] = -INFINITY;
    expect_quant_error(FC_ERR_NON_FINITE, FC_Q4_K, bad, 1, 256, NULL, 0);
    expect_quant_error(FC_ERR_NON_FINITE, FC_Q4_K, bad, 1, 256, im, 0);
    /* the same calls with good arguments succeed */
    assert_int_equal(fc_quantize_ex(FC_Q4_K, x, dst, 1, 256, im, 0), FC_OK);
    assert_int_equal(fc_quantize(FC_Q4_0, x, dst, 1, 32), FC_OK);
}

static void test_quant_props_dequantize_errors(void **state) {
    (void)state;
    uint8_t src[1024] = {0};
    float y[256];
    memset(y, 0x5A, sizeof y);
    assert_int_equal(fc_dequantize(FC_Q4_0, NULL, y, 1, 32), FC_ERR_NULL_ARG);
    assert_int_equal(fc_dequantize(FC_Q4_0, src, NULL, 1, 32), FC_ERR_NULL_ARG);
    assert_int_equal(fc_dequantize(FC_BF16, src, y, 1, 32), FC_ERR_DTYPE);
    assert_int_equal(fc_dequantize(FC_DTYPE_COUNT, src, y, 1, 32), FC_ERR_DTYPE);
    assert_int_equal(fc_dequantize(FC_Q6_K, src, y, 1, 100), FC_ERR_INVALID_SHAPE);
    assert_int_equal(fc_dequantize(FC_Q6_K, src, y, 0, 256), FC_ERR_INVALID_SHAPE);
    assert_int_equal(fc_dequantize(FC_Q6_K, src, y, 1, 0), FC_ERR_INVALID_SHAPE);
    assert_int_equal(fc_dequantize(FC_Q8_0, src, y, INT64_C(1) << 40, INT64_C(1) << 30),
                     FC_ERR_OVERFLOW);
    for (size_t i = 0; i < sizeof y; i++)
        assert_int_equal(((uint8_t *)y)[i], 0x5A);
}

/* ---- structure ----------------------------------------------------------------- */

/* Rows are quantized independently (with an imatrix too, whose weighted
 * paths use per-row statistics), and an unaligned dst/src works. */
static void test_quant_props_rows_independent_unaligned(void **state) {
    (void)state;
    float *x = malloc(sizeof(float) * ROWS * COLS);
    float im[COLS];
    assert_non_null(x);
    fill_rows(x);
    for (int j = 0; j < COLS; j++)
        im[j] = (float)(0.5 + (j % 5));
    for (size_t t = 0; t < N_OWNED; t++) {
        const size_t rb = fc_quant_row_bytes(owned[t], COLS);
        uint8_t *all = malloc(rb * ROWS), *one = malloc(rb + 1);
        float *y_all = malloc(sizeof(float) * COLS), *y_one = malloc(sizeof(float) * COLS);
        assert_true(all && one && y_all && y_one);
        for (int use_im = 0; use_im < 2; use_im++) {
            const float *w = use_im ? im : NULL;
            assert_int_equal(fc_quantize_ex(owned[t], x, all, ROWS, COLS, w, 0), FC_OK);
            for (int r = 0; r < ROWS; r++) {
                /* one + 1: an odd address for the block bytes */
                assert_int_equal(fc_quantize_ex(owned[t], x + r * COLS, one + 1, 1, COLS, w, 0),
                                 FC_OK);
                assert_memory_equal(one + 1, all + r * rb, rb);
                assert_int_equal(fc_dequantize(owned[t], one + 1, y_one, 1, COLS), FC_OK);
                assert_int_equal(fc_dequantize(owned[t], all + r * rb, y_all, 1, COLS), FC_OK);
                assert_memory_equal(y_one, y_all, sizeof(float) * COLS);
            }
        }
        free(all);
        free(one);
        free(y_all);
        free(y_one);
    }
    free(x);
}

/* Formats without a weighted quantizer in ggml ignore the imatrix. */
static void test_quant_props_imatrix_ignored(void **state) {
    (void)state;
    const fc_dtype ts[] = {FC_Q8_0,  FC_Q8_1,  FC_Q8_K,  FC_Q1_0,  FC_Q2_0, FC_Q2_0_G64,
                           FC_TQ1_0, FC_TQ2_0, FC_MXFP4, FC_NVFP4, FC_NF4};
    float *x = malloc(sizeof(float) * ROWS * COLS);
    float im[COLS];
    assert_non_null(x);
    fill_rows(x);
    for (int j = 0; j < COLS; j++)
        im[j] = (float)(j % 3);
    for (size_t t = 0; t < sizeof ts / sizeof ts[0]; t++) {
        const size_t rb = fc_quant_row_bytes(ts[t], COLS);
        uint8_t *a = malloc(rb * ROWS), *b = malloc(rb * ROWS);
        assert_true(a && b);
        assert_int_equal(fc_quantize(ts[t], x, a, ROWS, COLS), FC_OK);
        assert_int_equal(fc_quantize_ex(ts[t], x, b, ROWS, COLS, im, 0), FC_OK);
        assert_memory_equal(a, b, rb * ROWS);
        free(a);
        free(b);
    }
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quant_props_bound_legacy),
        cmocka_unit_test(test_quant_props_bound_other),
        cmocka_unit_test(test_quant_props_q1_0_exact),
        cmocka_unit_test(test_quant_props_kquant_rmse),
        cmocka_unit_test(test_quant_props_zero_rows),
        cmocka_unit_test(test_quant_props_extreme_rows_finite),
        cmocka_unit_test(test_quant_props_row_bytes),
        cmocka_unit_test(test_quant_props_quantize_errors),
        cmocka_unit_test(test_quant_props_dequantize_errors),
        cmocka_unit_test(test_quant_props_rows_independent_unaligned),
        cmocka_unit_test(test_quant_props_imatrix_ignored),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
