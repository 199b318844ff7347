/* SPDX-License-Identifier: MIT */
/* test_quant_finite.c - the promise of fucina/quant.h that finite input gives
 * finite codes: for every block dtype, rows of large finite magnitude
 * (near-constant rows far beyond the f16 range, rows at +-3e38, mixed signs
 * and magnitudes) and ordinary rows quantized with large importance weights
 * must dequantize to finite values only. The i-quants once stored their
 * block scales with a plain f32 -> f16 conversion, so a near-constant row of
 * 1.4e5 (iq1_m) or 7.6e6 (iq4_nl) decoded to infinities; every scale is now
 * stored saturating at +-65504 as the k-quants do. */
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

#define NCOLS 256

static uint64_t rng_state = 7;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double rng_uniform(void) { return (double)(rng_next() >> 11) * 0x1p-53; }

/* The iq formats that refuse a NULL imatrix. */
static bool needs_imatrix(fc_dtype t) {
    return t == FC_IQ1_S || t == FC_IQ1_M || t == FC_IQ2_XXS || t == FC_IQ2_XS;
}

/* Quantizes one row (imatrix NULL allowed) and checks every decoded value is
 * finite, naming the dtype, the row and the first bad element. */
static void check_row(fc_dtype t, const char *what, const float *x, const float *w) {
    size_t rb = fc_quant_row_bytes(t, NCOLS);
    assert_true(rb > 0);
    uint8_t *q = malloc(rb);
    float y[NCOLS];
    assert_non_null(q);
    fc_status st = fc_quantize_ex(t, x, q, 1, NCOLS, w, 0);
    if (st != FC_OK)
        fail_msg("%s, %s: fc_quantize_ex returned %s", fc_dtype_name(t), what, fc_status_name(st));
    assert_int_equal(fc_dequantize(t, q, y, 1, NCOLS), FC_OK);
    free(q);
    for (int i = 0; i < NCOLS; i++)
        if (!isfinite(y[i]))
            fail_msg("%s, %s: element %d (x = %g) dequantizes to %g", fc_dtype_name(t), what, i,
                     (double)x[i], (double)y[i]);
}

/* Runs check_row without an imatrix (where the dtype allows it) and with
 * each of the given weight vectors. */
static void check_all(fc_dtype t, const char *what, const float *x, const float *const *ws,
                      const char *const *wnames, int nw) {
    char buf[128];
    if (!needs_imatrix(t)) {
        snprintf(buf, sizeof buf, "%s, no imatrix", what);
        check_row(t, buf, x, NULL);
    }
    for (int k = 0; k < nw; k++) {
        snprintf(buf, sizeof buf, "%s, imatrix %s", what, wnames[k]);
        check_row(t, buf, x, ws[k]);
    }
}

static void test_quant_finite_large_rows(void **state) {
    (void)state;
    static const float consts[] = {1.4e5f, -1.4e5f, 1e5f,   1e7f,   7.6e6f,
                                   1e12f,  3e38f,   -3e38f, FLT_MAX};
    static float ones[NCOLS], ramp[NCOLS], x[NCOLS];
    for (int j = 0; j < NCOLS; j++) {
        ones[j] = 1.0f;
        ramp[j] = (float)(j % 7);
    }
    const float *ws[] = {ones, ramp};
    const char *wn[] = {"ones", "ramp"};
    int checked = 0;
    for (int t = 0; t < FC_DTYPE_COUNT; t++) {
        if (!fc_dtype_is_block((fc_dtype)t)) continue;
        checked++;
        char what[96];
        for (size_t c = 0; c < sizeof consts / sizeof consts[0]; c++) {
            for (int j = 0; j < NCOLS; j++) /* near-constant: the worst case of iq1_m/iq4_nl */
                x[j] = consts[c] * (1.0f - (j % 3 == 0 ? 1e-3f : 0.0f));
            snprintf(what, sizeof what, "near-constant row %g", (double)consts[c]);
            check_all((fc_dtype)t, what, x, ws, wn, 2);
            for (int j = 0; j < NCOLS; j++)
                x[j] = consts[c];
            snprintf(what, sizeof what, "constant row %g", (double)consts[c]);
            check_all((fc_dtype)t, what, x, ws, wn, 2);
        }
        rng_state = 11;
        for (int j = 0; j < NCOLS; j++) { /* mixed signs and magnitudes up to 3e38 */
            double u = 2 * rng_uniform() - 1;
            x[j] = (float)(u * pow(10.0, 38.0 * rng_uniform()) * (j % 5 == 0 ? 3.0 : 1.0));
        }
        check_all((fc_dtype)t, "mixed row", x, ws, wn, 2);
        for (int j = 0; j < NCOLS; j++)
            x[j] = j % 2 ? 3e38f : -3e38f;
        check_all((fc_dtype)t, "alternating +-3e38", x, ws, wn, 2);
    }
    assert_int_equal(checked, 29);
}

/* Benign rows with large importance weights: the weighted searches multiply
 * by the weights, so a weight of 1e30 must not push a scale to inf/NaN. */
static void test_quant_finite_large_importance(void **state) {
    (void)state;
    static const float wmag[] = {1e10f, 1e20f, 1e30f, 3e38f};
    static float x[NCOLS], w[NCOLS], wspiky[NCOLS];
    rng_state = 3;
    for (int j = 0; j < NCOLS; j++)
        x[j] = (float)(2 * rng_uniform() - 1);
    for (size_t m = 0; m < sizeof wmag / sizeof wmag[0]; m++) {
        for (int j = 0; j < NCOLS; j++) {
            w[j] = wmag[m];
            wspiky[j] = j % 17 == 0 ? wmag[m] : 1.0f;
        }
        const float *ws[] = {w, wspiky};
        char n0[32], n1[40];
        snprintf(n0, sizeof n0, "flat %g", (double)wmag[m]);
        snprintf(n1, sizeof n1, "spiky %g", (double)wmag[m]);
        const char *wn[] = {n0, n1};
        for (int t = 0; t < FC_DTYPE_COUNT; t++) {
            if (!fc_dtype_is_block((fc_dtype)t)) continue;
            check_all((fc_dtype)t, "uniform row in [-1, 1]", x, ws, wn, 2);
            static float big[NCOLS];
            for (int j = 0; j < NCOLS; j++)
                big[j] = x[j] * 1e6f;
            check_all((fc_dtype)t, "uniform row in [-1e6, 1e6]", big, ws, wn, 2);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quant_finite_large_rows),
        cmocka_unit_test(test_quant_finite_large_importance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
