/* SPDX-License-Identifier: MIT */
/* test_qmatmul.c - the quantized matmul engine (backend/qmatmul.h) against
 * dequantize-then-multiply in double precision, SIMD kernels against the
 * portable ones, and every error code.
 *
 * Reference: W is quantized with fc_quantize, dequantized with
 * fc_dequantize to Wd, and y_ref[i, j] = sum_p x[i, p] * Wd[j, p] (+ bias)
 * in double. Tolerance per output, with S = sum_p |x[i, p] * Wd[j, p]|:
 *   f32 activations (nf4 and every dtype without its own kernel):
 *       (k + 16) * 2^-24 * S                      f32 rounding only
 *   q8 activations (q4_0, q8_0: blocks of 32; q4_k, q6_k: blocks of 256):
 *       sum over activation blocks B of 1.01 * absmax(x on B) / 254 *
 *       sum_{p in B} |Wd[j, p]|  +  (k + 16) * 2^-24 * 1.01 * S
 *   (a code is x / d rounded to nearest with d = absmax / 127, so each
 *   activation moves by at most d / 2 = absmax / 254; 1.01 covers the f32
 *   roundings of x / d and of the scale).
 * The q8 bound is the worst case; the kernels are also held to a tight one:
 * x is quantized here by the stated rule (q8: d = absmax / 127 in f32,
 * code = x * (1 / d) rounded half to even; q8_K: iscale = -127 / (the value
 * of largest magnitude), code = min(127, round(iscale * x)), d = 1 / iscale),
 * giving x', and y must be within (k + 16) 2^-24 * 1.01 * S' of
 * sum_p x'[i, p] * Wd[j, p] (S' the same sum of magnitudes over x').
 * SIMD against portable: the same bits (the canonical order of
 * backend/qdot.h), for every kernel and for the whole product; trained
 * activations and rows on the quantizers' edges are in test_qdot_bits.c.
 * Results for one ISA must be the same bits for every thread count. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/qdot.h"
#include "backend/qmatmul.h"
#include "counting_alloc.h"
#include "fucina.h"

/* ---- deterministic data ------------------------------------------------------------- */

static uint64_t rng_state;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double rng_uniform(void) { return (double)(rng_next() >> 11) * 0x1p-53; }
static float rng_normal(void) {
    const double u = rng_uniform() + 0x1p-60, v = rng_uniform();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}
static void fill_normal(float *p, size_t n, float scale) {
    for (size_t i = 0; i < n; i++)
        p[i] = scale * rng_normal();
}

/* ---- a quantized problem and its reference ------------------------------------------ */

typedef struct problem {
    fc_dtype wdt;
    int64_t m, n, k;
    float *x, *wf, *wd, *bias;
    uint8_t *wq;
    size_t row_bytes;
} problem;

static bool needs_imatrix(fc_dtype d) { return d == FC_IQ2_XXS || d == FC_IQ2_XS || d == FC_IQ1_S; }

static void problem_make(problem *p, fc_dtype wdt, int64_t m, int64_t n, int64_t k, uint64_t seed) {
    memset(p, 0, sizeof *p);
    p->wdt = wdt, p->m = m, p->n = n, p->k = k;
    rng_state = seed;
    p->x = malloc(sizeof(float) * (size_t)(m * k));
    p->wf = malloc(sizeof(float) * (size_t)(n * k));
    p->wd = malloc(sizeof(float) * (size_t)(n * k));
    p->bias = malloc(sizeof(float) * (size_t)n);
    p->row_bytes = fc_quant_row_bytes(wdt, k);
    p->wq = malloc(p->row_bytes * (size_t)n);
    assert_non_null(p->x), assert_non_null(p->wf), assert_non_null(p->wd), assert_non_null(p->wq);
    assert_non_null(p->bias);
    fill_normal(p->x, (size_t)(m * k), 1.0f);
    /* a few outliers so activation blocks have different scales */
    for (int64_t i = 0; i < m * k; i += 37)
        p->x[i] *= 6.0f;
    fill_normal(p->wf, (size_t)(n * k), 0.05f);
    fill_normal(p->bias, (size_t)n, 1.0f);
    float *im = NULL;
    if (needs_imatrix(wdt)) {
        im = malloc(sizeof(float) * (size_t)k);
        assert_non_null(im);
        for (int64_t i = 0; i < k; i++)
            im[i] = 1.0f + (float)(i % 7);
    }
    assert_int_equal(fc_quantize_ex(wdt, p->wf, p->wq, n, k, im, 0), FC_OK);
    free(im);
    assert_int_equal(fc_dequantize(wdt, p->wq, p->wd, n, k), FC_OK);
}

static void problem_free(problem *p) {
    free(p->x), free(p->wf), free(p->wd), free(p->wq), free(p->bias);
}

/* Activation block size of the kernel for wdt; 0 when x stays f32. */
static int64_t act_block(fc_dtype wdt) {
    switch (wdt) {
    case FC_Q4_0:
    case FC_Q8_0:
        return 32;
    case FC_Q4_K:
    case FC_Q6_K:
        return 256;
    default:
        return 0;
    }
}

/* The stated bound for output (i, j), and the f64 reference value. */
static double ref_and_tol(const problem *p, int64_t i, int64_t j, bool bias, double *tol) {
    const float *x = p->x + i * p->k, *w = p->wd + j * p->k;
    double ref = bias ? p->bias[j] : 0.0, s = 0.0, q = 0.0;
    for (int64_t c = 0; c < p->k; c++) {
        ref += (double)x[c] * (double)w[c];
        s += fabs((double)x[c] * (double)w[c]);
    }
    const int64_t ab = act_block(p->wdt);
    if (ab) {
        for (int64_t b0 = 0; b0 < p->k; b0 += ab) {
            double amax = 0.0, sw = 0.0;
            for (int64_t c = b0; c < b0 + ab; c++) {
                amax = fmax(amax, fabs((double)x[c]));
                sw += fabs((double)w[c]);
            }
            q += 1.01 * amax / 254.0 * sw;
        }
        s *= 1.01;
    }
    *tol = q + (double)(p->k + 16) * 0x1p-24 * s + 1e-30;
    return ref;
}

/* x' of the tight reference (see the file comment) for activation row i. */
static void quantize_like_kernel(const problem *p, int64_t i, double *xq) {
    const float *x = p->x + i * p->k;
    const int64_t ab = act_block(p->wdt);
    for (int64_t b0 = 0; b0 < p->k; b0 += ab) {
        float amax = 0.0f, max = 0.0f;
        for (int64_t c = b0; c < b0 + ab; c++) {
            if (fabsf(x[c]) > amax) amax = fabsf(x[c]), max = x[c];
        }
        if (ab == 32) {
            const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
            for (int64_t c = b0; c < b0 + ab; c++)
                xq[c] = (double)d * nearbyintf(x[c] * id);
        } else {
            const float iscale = -127.0f / max, d = 1.0f / iscale;
            for (int64_t c = b0; c < b0 + ab; c++)
                xq[c] = amax == 0.0f ? 0.0 : (double)d * fminf(127.0f, nearbyintf(iscale * x[c]));
        }
    }
}

/* Holds y to the tight reference for the q8-activation dtypes. */
static void check_tight(const problem *p, const float *y, int64_t ldy, bool bias,
                        const char *what) {
    if (!act_block(p->wdt)) return;
    double *xq = malloc(sizeof(double) * (size_t)p->k);
    assert_non_null(xq);
    for (int64_t i = 0; i < p->m; i++) {
        quantize_like_kernel(p, i, xq);
        for (int64_t j = 0; j < p->n; j++) {
            const float *w = p->wd + j * p->k;
            double ref = bias ? p->bias[j] : 0.0, s = 0.0;
            for (int64_t c = 0; c < p->k; c++) {
                ref += xq[c] * w[c];
                s += fabs(xq[c] * w[c]);
            }
            const double tol = (double)(p->k + 16) * 0x1p-24 * 1.01 * s + 1e-30;
            const double got = y[i * ldy + j];
            if (!(fabs(got - ref) <= tol))
                fail_msg("%s %s (tight): y[%lld,%lld] = %.9g, reference %.9g, tolerance %.3g", what,
                         fc_dtype_name(p->wdt), (long long)i, (long long)j, got, ref, tol);
        }
    }
    free(xq);
}

/* isa argument of run(): the unpinned choice (fc__qmatmul_isa). */
#define AUTO_ISA FC__ISA_COUNT

/* Runs the engine on p into y (m x n, ldy = n) with isa's kernels, or the
 * automatic choice for AUTO_ISA. */
static fc_status run(const problem *p, fc__isa isa, int threads, bool bias, float *y) {
    char err[256];
    const fc__qgemm g = {
        .wdt = p->wdt,
        .w = p->wq,
        .n = p->n,
        .k = p->k,
        .x = p->x,
        .m = p->m,
        .ldx = p->k,
        .bias = bias ? p->bias : NULL,
        .y = y,
        .ldy = p->n,
        .threads = threads,
        .pin_isa = isa != AUTO_ISA,
        .isa = isa != AUTO_ISA ? isa : FC__ISA_PORTABLE,
    };
    const fc_status st = fc__qgemm_run(&g, err, sizeof err);
    if (st != FC_OK) fprintf(stderr, "%s\n", err);
    return st;
}

static void check_against_reference(const problem *p, const float *y, bool bias, const char *what) {
    for (int64_t i = 0; i < p->m; i++) {
        for (int64_t j = 0; j < p->n; j++) {
            double tol;
            const double ref = ref_and_tol(p, i, j, bias, &tol);
            const double got = y[i * p->n + j];
            if (!(fabs(got - ref) <= tol)) {
                fail_msg("%s %s m=%lld n=%lld k=%lld: y[%lld,%lld] = %.9g, reference %.9g, "
                         "tolerance %.3g",
                         what, fc_dtype_name(p->wdt), (long long)p->m, (long long)p->n,
                         (long long)p->k, (long long)i, (long long)j, got, ref, tol);
            }
        }
    }
}

static const fc__isa all_isas[] = {FC__ISA_PORTABLE, FC__ISA_AVX2, FC__ISA_AVX512};
#define N_ISAS (sizeof all_isas / sizeof all_isas[0])

/* ---- every supported dtype ---------------------------------------------------------- */

static void test_qmatmul_every_dtype_matches_reference(void **state) {
    (void)state;
    int tested = 0;
    for (int d = 0; d < FC_DTYPE_COUNT; d++) {
        const fc_dtype wdt = (fc_dtype)d;
        if (!fc_dtype_supports_quantized_matmul_rhs(wdt)) continue;
        assert_true(fc__qmatmul_supported(wdt));
        const int64_t be = fc_dtype_block_elems(wdt);
        const int64_t k = be >= 256 ? 2 * be : 3 * be;
        problem p;
        problem_make(&p, wdt, 5, 7, k, 1000u + (uint64_t)d);
        float *y = malloc(sizeof(float) * 35);
        assert_non_null(y);
        for (size_t a = 0; a < N_ISAS; a++) {
            if (!fc__qmatmul_isa_runs(all_isas[a])) continue;
            assert_int_equal(run(&p, all_isas[a], 2, true, y), FC_OK);
            check_against_reference(&p, y, true, fc__isa_name(all_isas[a]));
            check_tight(&p, y, p.n, true, fc__isa_name(all_isas[a]));
        }
        free(y);
        problem_free(&p);
        tested++;
    }
    /* every block dtype but q8_1 and q8_k */
    assert_int_equal(tested, FC_DTYPE_COUNT - FC_Q1_0 - 2);
    for (int d = 0; d < FC_DTYPE_COUNT; d++) {
        if (!fc_dtype_is_block((fc_dtype)d) || d == FC_Q8_1 || d == FC_Q8_K)
            assert_false(fc__qmatmul_supported((fc_dtype)d));
    }
}

/* ---- the dtypes with their own kernels: shapes, ISAs, threads ----------------------- */

static const fc_dtype fast[] = {FC_Q4_0, FC_Q8_0, FC_Q4_K, FC_Q6_K, FC_NF4};
#define N_FAST (sizeof fast / sizeof fast[0])

static void test_qmatmul_fast_kernels_shapes_isas_threads(void **state) {
    (void)state;
    const int64_t ms[] = {1, 3, 16};
    for (size_t t = 0; t < N_FAST; t++) {
        const int64_t be = fc_dtype_block_elems(fast[t]);
        /* 32-blocks: 9 blocks = two whole q4_0 records and a tail, an odd q8_0 count */
        const int64_t k = be == 32 ? 9 * 32 : be == 64 ? 5 * 64 : 3 * 256;
        for (size_t mi = 0; mi < 3; mi++) {
            const int64_t m = ms[mi], n = 33;
            problem p;
            problem_make(&p, fast[t], m, n, k, 77u + 13u * t + mi);
            const size_t ny = (size_t)(m * n);
            float *y = malloc(sizeof(float) * ny), *yp = malloc(sizeof(float) * ny);
            float *yt = malloc(sizeof(float) * ny);
            assert_non_null(y), assert_non_null(yp), assert_non_null(yt);
            assert_int_equal(run(&p, FC__ISA_PORTABLE, 1, false, yp), FC_OK);
            check_against_reference(&p, yp, false, "portable");
            check_tight(&p, yp, n, false, "portable");
            for (size_t a = 1; a < N_ISAS; a++) {
                if (!fc__qmatmul_isa_runs(all_isas[a])) continue;
                assert_int_equal(run(&p, all_isas[a], 1, false, y), FC_OK);
                check_against_reference(&p, y, false, fc__isa_name(all_isas[a]));
                check_tight(&p, y, n, false, fc__isa_name(all_isas[a]));
                /* the portable bits (qdot.h's canonical order) */
                assert_memory_equal(y, yp, sizeof(float) * ny);
                /* the same bits for any thread count */
                for (int th = 2; th <= 3; th++) {
                    assert_int_equal(run(&p, all_isas[a], th, false, yt), FC_OK);
                    assert_memory_equal(y, yt, sizeof(float) * ny);
                }
            }
            free(y), free(yp), free(yt);
            problem_free(&p);
        }
    }
}

/* Activation rows beyond one panel (64) and one 4-row tile, tiny k. */
static void test_qmatmul_many_rows(void **state) {
    (void)state;
    for (size_t t = 0; t < N_FAST; t++) {
        const int64_t k = fc_dtype_block_elems(fast[t]) == 256 ? 256 : 64;
        problem p;
        problem_make(&p, fast[t], 70, 5, k, 5u + t);
        float *y = malloc(sizeof(float) * 350);
        assert_non_null(y);
        assert_int_equal(run(&p, AUTO_ISA, 2, true, y), FC_OK);
        check_against_reference(&p, y, true, "auto");
        check_tight(&p, y, 5, true, "auto");
        free(y);
        problem_free(&p);
    }
}

/* Rows longer than one slice of the engine's dot products (2048 values at
 * every ISA): whole slices and a short one, for every ISA, m of 1, 5, 16
 * and 20 (the last shares one packed copy between threads), and n = 37 (a
 * lone weight row after the pairs, and a row block boundary at 32), with
 * the same bits for 1 and 2 threads and as the portable kernels. */
static void test_qmatmul_long_rows_in_slices(void **state) {
    (void)state;
    const int64_t ms[] = {1, 5, 16, 20}, n = 37;
    for (size_t t = 0; t < N_FAST; t++) {
        const int64_t be = fc_dtype_block_elems(fast[t]);
        /* 32-blocks: a tail of 9 blocks (two q4_0 records and one block) */
        const int64_t k = 2 * 4096 + (be == 32 ? 9 * 32 : be == 64 ? 5 * 64 : 256);
        for (size_t mi = 0; mi < 4; mi++) {
            const int64_t m = ms[mi];
            problem p;
            problem_make(&p, fast[t], m, n, k, 901u + 7u * t + mi);
            float *y = malloc(sizeof(float) * (size_t)(m * n)),
                  *yt = malloc(sizeof(float) * (size_t)(m * n)),
                  *yp = malloc(sizeof(float) * (size_t)(m * n));
            assert_non_null(y), assert_non_null(yt), assert_non_null(yp);
            for (size_t a = 0; a < N_ISAS; a++) {
                if (!fc__qmatmul_isa_runs(all_isas[a])) continue;
                const char *name = fc__isa_name(all_isas[a]);
                assert_int_equal(run(&p, all_isas[a], 1, true, y), FC_OK);
                check_against_reference(&p, y, true, name);
                check_tight(&p, y, n, true, name);
                assert_int_equal(run(&p, all_isas[a], 2, true, yt), FC_OK);
                assert_memory_equal(y, yt, sizeof(float) * (size_t)(m * n));
                if (a == 0) memcpy(yp, y, sizeof(float) * (size_t)(m * n));
                assert_memory_equal(y, yp, sizeof(float) * (size_t)(m * n));
            }
            free(y), free(yt), free(yp);
            problem_free(&p);
        }
    }
}

/* ---- leading dimensions, bias, views ------------------------------------------------ */

static void test_qmatmul_strided_operands(void **state) {
    (void)state;
    const fc_dtype types[] = {FC_Q4_0, FC_Q6_K, FC_NF4, FC_Q5_1};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const int64_t k = fc_dtype_block_elems(types[t]) == 256 ? 256 : 128;
        const int64_t m = 3, n = 5, ldx = k + 7, ldy = n + 3;
        problem p;
        problem_make(&p, types[t], m, n, k, 900u + t);
        const size_t ldw = p.row_bytes + 5;
        float *xs = calloc((size_t)(m * ldx), sizeof(float));
        float *y = malloc(sizeof(float) * (size_t)(m * ldy));
        uint8_t *ws = calloc((size_t)n, ldw);
        assert_non_null(xs), assert_non_null(y), assert_non_null(ws);
        for (int64_t i = 0; i < m; i++)
            memcpy(xs + i * ldx, p.x + i * k, sizeof(float) * (size_t)k);
        for (int64_t j = 0; j < n; j++)
            memcpy(ws + (size_t)j * ldw, p.wq + (size_t)j * p.row_bytes, p.row_bytes);
        for (int64_t i = 0; i < m * ldy; i++)
            y[i] = -123.0f;
        for (size_t a = 0; a < N_ISAS; a++) {
            if (!fc__qmatmul_isa_runs(all_isas[a])) continue;
            const fc__qgemm g = {.wdt = types[t],
                                 .w = ws,
                                 .ldw = ldw,
                                 .n = n,
                                 .k = k,
                                 .x = xs,
                                 .m = m,
                                 .ldx = ldx,
                                 .bias = p.bias,
                                 .y = y,
                                 .ldy = ldy,
                                 .threads = 2,
                                 .pin_isa = true,
                                 .isa = all_isas[a]};
            assert_int_equal(fc__qgemm_run(&g, NULL, 0), FC_OK);
            for (int64_t i = 0; i < m; i++) {
                for (int64_t j = 0; j < ldy; j++) {
                    if (j >= n) {
                        assert_true(y[i * ldy + j] == -123.0f); /* padding untouched */
                        continue;
                    }
                    double tol;
                    const double ref = ref_and_tol(&p, i, j, true, &tol);
                    assert_true(fabs((double)y[i * ldy + j] - ref) <= tol);
                }
            }
        }
        free(xs), free(y), free(ws);
        problem_free(&p);
    }
}

/* ---- non-finite activations --------------------------------------------------------- */

static void test_qmatmul_nonfinite_rows_give_nonfinite_outputs(void **state) {
    (void)state;
    for (size_t t = 0; t < N_FAST + 1; t++) {
        const fc_dtype wdt = t < N_FAST ? fast[t] : FC_IQ4_NL;
        const int64_t k = fc_dtype_block_elems(wdt) == 256 ? 256 : 128;
        problem p;
        problem_make(&p, wdt, 3, 4, k, 31u + t);
        p.x[1 * k + 5] = NAN;
        p.x[2 * k + 9] = INFINITY;
        float y[12];
        for (size_t a = 0; a < N_ISAS; a++) {
            if (!fc__qmatmul_isa_runs(all_isas[a])) continue;
            assert_int_equal(run(&p, all_isas[a], 1, false, y), FC_OK);
            for (int j = 0; j < 4; j++) {
                assert_true(isfinite(y[j]));
                assert_false(isfinite(y[4 + j]));
                assert_false(isfinite(y[8 + j]));
            }
        }
        problem_free(&p);
    }
}

/* ---- errors ------------------------------------------------------------------------- */

static void test_qmatmul_errors(void **state) {
    (void)state;
    problem p;
    problem_make(&p, FC_Q4_0, 2, 3, 64, 3);
    float y[6];
    for (int i = 0; i < 6; i++)
        y[i] = 7.0f;
    const fc__qgemm ok = {.wdt = FC_Q4_0,
                          .w = p.wq,
                          .n = 3,
                          .k = 64,
                          .x = p.x,
                          .m = 2,
                          .ldx = 64,
                          .y = y,
                          .ldy = 3,
                          .threads = 1};
    char err[256];
    fc__qgemm g;

    assert_int_equal(fc__qgemm_run(NULL, err, sizeof err), FC_ERR_NULL_ARG);
    g = ok, g.w = NULL;
    assert_int_equal(fc__qgemm_run(&g, err, sizeof err), FC_ERR_NULL_ARG);
    g = ok, g.x = NULL;
    assert_int_equal(fc__qgemm_run(&g, err, sizeof err), FC_ERR_NULL_ARG);
    g = ok, g.y = NULL;
    assert_int_equal(fc__qgemm_run(&g, err, sizeof err), FC_ERR_NULL_ARG);

    const fc_dtype bad[] = {FC_F32,      FC_F16, FC_I8, FC_Q8_1, FC_Q8_K, (fc_dtype)FC_DTYPE_COUNT,
                            (fc_dtype)-1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        g = ok, g.wdt = bad[i];
        assert_int_equal(fc__qgemm_run(&g, err, sizeof err), FC_ERR_DTYPE);
        assert_non_null(strstr(err, "qmatmul: weight dtype"));
    }

    g = ok, g.m = 0;
    assert_int_equal(fc__qgemm_run(&g, err, sizeof err), FC_ERR_INVALID_SHAPE);
    g = ok, g.n = -1;
    assert_int_equal(fc__qgemm_run(&g, err, sizeof err), FC_ERR_INVALID_SHAPE);
    g = ok, g.k = 0;
    assert_int_equal(fc__qgemm_run(&g, err, sizeof err), FC_ERR_INVALID_SHAPE);
    g = ok, g.k = 48, g.ldx = 64; /* not a multiple of 32 */
    assert_int_equal(fc__qgemm_run(&g, err, sizeof err), FC_ERR_INVALID_SHAPE);
    assert_non_null(strstr(err, "k=48"));
    g = ok, g.wdt = FC_Q4_K; /* 64 is not a multiple of 256 */
    assert_int_equal(fc__qgemm_run(&g, err, sizeof err), FC_ERR_INVALID_SHAPE);

    g = ok, g.ldx = 63;
    assert_int_equal(fc__qgemm_run(&g, err, sizeof err), FC_ERR_INVALID_ARG);
    g = ok, g.ldy = 2;
    assert_int_equal(fc__qgemm_run(&g, err, sizeof err), FC_ERR_INVALID_ARG);
    g = ok, g.ldw = p.row_bytes - 1;
    assert_int_equal(fc__qgemm_run(&g, err, sizeof err), FC_ERR_INVALID_ARG);
    g = ok, g.threads = 0;
    assert_int_equal(fc__qgemm_run(&g, err, sizeof err), FC_ERR_INVALID_ARG);
    g = ok, g.pin_isa = true, g.isa = FC__ISA_COUNT;
    assert_int_equal(fc__qgemm_run(&g, err, sizeof err), FC_ERR_INVALID_ARG);
    g = ok, g.pin_isa = true, g.isa = (fc__isa)-3;
    assert_int_equal(fc__qgemm_run(&g, err, sizeof err), FC_ERR_INVALID_ARG);

    g = ok, g.m = INT64_MAX / 2, g.ldx = INT64_MAX / 2;
    assert_int_equal(fc__qgemm_run(&g, err, sizeof err), FC_ERR_OVERFLOW);
    g = ok, g.n = INT64_MAX / 4, g.ldy = INT64_MAX / 4;
    assert_int_equal(fc__qgemm_run(&g, err, sizeof err), FC_ERR_OVERFLOW);

    for (size_t a = 0; a < N_ISAS; a++) {
        g = ok, g.pin_isa = true, g.isa = all_isas[a];
        const fc_status want = fc__qmatmul_isa_runs(all_isas[a]) ? FC_OK : FC_ERR_BACKEND;
        assert_int_equal(fc__qgemm_run(&g, NULL, 0), want);
        for (int i = 0; i < 6; i++)
            y[i] = 7.0f;
    }
    /* y untouched by every refused call above (reset after the good ones) */
    g = ok, g.threads = -1;
    assert_int_equal(fc__qgemm_run(&g, err, sizeof err), FC_ERR_INVALID_ARG);
    for (int i = 0; i < 6; i++)
        assert_true(y[i] == 7.0f);
    /* a small err buffer is truncated, never overrun */
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    g = ok, g.wdt = FC_F32;
    assert_int_equal(fc__qgemm_run(&g, tiny, sizeof tiny), FC_ERR_DTYPE);
    assert_int_equal(tiny[7], '\0');
    problem_free(&p);
}

/* ---- allocation --------------------------------------------------------------------- */

static void test_qmatmul_allocation_and_oom(void **state) {
    (void)state;
    fct_counting c;
    fct_counting_init(&c);
    const fc_dtype types[] = {FC_Q4_0, FC_Q8_0, FC_Q4_K, FC_Q6_K, FC_NF4, FC_Q5_K};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        problem p;
        problem_make(&p, types[t], 3, 4, 256, 40u + t);
        float y[12];
        fc__qgemm g = {.wdt = types[t],
                       .w = p.wq,
                       .n = 4,
                       .k = 256,
                       .x = p.x,
                       .m = 3,
                       .ldx = 256,
                       .y = y,
                       .ldy = 4,
                       .threads = 2,
                       .alloc = fct_counting_allocator(&c)};
        const bool allocates = types[t] != FC_Q5_K; /* the generic path reads x in place */
        fct_counting_fail_after(&c, 0);
        for (int i = 0; i < 12; i++)
            y[i] = 5.0f;
        assert_int_equal(fc__qgemm_run(&g, NULL, 0), allocates ? FC_ERR_OOM : FC_OK);
        if (allocates) {
            for (int i = 0; i < 12; i++)
                assert_true(y[i] == 5.0f);
        }
        fct_counting_fail_after(&c, -1);
        const long before = atomic_load(&c.total_allocs);
        assert_int_equal(fc__qgemm_run(&g, NULL, 0), FC_OK);
        assert_int_equal(atomic_load(&c.total_allocs) - before, allocates ? 1 : 0);
        assert_true(fct_counting_clean(&c));
        check_against_reference(&p, y, false, "counting allocator");
        problem_free(&p);
    }
}

/* ---- activation packing is the same bytes on every ISA ------------------------------- */

static void test_qmatmul_packing_identical_across_isas(void **state) {
    (void)state;
#ifdef FC__QDOT_X86
    if (!fc__qmatmul_isa_runs(FC__ISA_AVX2)) {
        print_message("skipped: the AVX2 packer needs the avx2 level (here: %s)\n",
                      fc__isa_name(fc__isa_level()));
        skip();
    }
    const int64_t k = 1024;
    float *x = malloc(sizeof(float) * (size_t)k);
    assert_non_null(x);
    rng_state = 99;
    fill_normal(x, (size_t)k, 1.0f);
    /* blocks of 32 (and super-blocks of 256) with awkward contents */
    for (int i = 0; i < 32; i++) {
        x[32 + i] = 0.0f;                        /* all zero */
        x[64 + i] = 1e-38f * (float)(i - 16);    /* 1 / d overflows: counts as zero */
        x[96 + i] = 1e-40f * (float)(i + 1);     /* subnormal */
        x[128 + i] = 1e38f * (float)(i % 3 - 1); /* huge */
        x[160 + i] = (float)i - 15.5f;           /* with x[160] = 127 below: d = 1, halves */
    }
    x[160] = 127.0f;
    x[200] = NAN;
    x[300] = -INFINITY;
    for (int i = 512; i < 768; i++) /* a whole q8_K super-block of zeros */
        x[i] = 0.0f;
    x[800] = -3.0f, x[801] = 3.0f; /* ties for the largest magnitude: the first one's sign */
    for (int kind = 0; kind < FC__QK_FAST_COUNT; kind++) {
        const size_t bytes = fc__qpack_row_bytes((fc__qkind)kind, k);
        uint8_t *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes);
        assert_non_null(a), assert_non_null(b);
        fc__qpack_row(&fc__qdot_portable, (fc__qkind)kind, x, k, a);
        fc__qpack_row(&fc__qdot_avx2, (fc__qkind)kind, x, k, b);
        assert_memory_equal(a, b, bytes);
        free(a), free(b);
    }
    free(x);
#else
    fprintf(stderr, "SKIP: the AVX2 activation packing is built on x86-64 only\n");
    skip();
#endif
}

/* ---- the AVX2 kernel tables, called directly ----------------------------------------- */

#ifdef FC__QDOT_X86
/* tab's kernels of fast[t] against the portable ones on the same packed
 * rows, for 1 .. tab->rows[kind] activation rows: the portable bits, and
 * the two-row entry the same bits as two one-row calls. got[nx - 1][q][r] keeps the one-row
 * results. k is odd in blocks: a q4_0 record tail, an odd q8_0 count. */
static void table_matches_portable(const fc__qdot_kernels *tab, size_t t,
                                   float got[FC__QDOT_MAX_ROWS][2][FC__QDOT_MAX_ROWS]) {
    const fc__qkind kind = fc__qkind_of(fast[t]);
    const int64_t be = fc_dtype_block_elems(fast[t]);
    const int64_t k = be == 32 ? 11 * 32 : be == 64 ? 5 * 64 : 3 * 256;
    const int rows = tab->rows[kind];
    assert_in_range(rows, 1, FC__QDOT_MAX_ROWS);
    problem p;
    problem_make(&p, fast[t], FC__QDOT_MAX_ROWS, 2, k, 501u + t);
    const size_t xq_row = fc__qpack_row_bytes(kind, k);
    uint8_t *xq = aligned_alloc(64, FC__QDOT_MAX_ROWS * xq_row);
    assert_non_null(xq);
    for (int64_t i = 0; i < FC__QDOT_MAX_ROWS; i++)
        fc__qpack_row(&fc__qdot_portable, kind, p.x + i * k, k, xq + (size_t)i * xq_row);
    const uint8_t *w[2] = {p.wq, p.wq + p.row_bytes};
    for (int nx = 1; nx <= rows; nx++) {
        float ref[2][FC__QDOT_MAX_ROWS];
        float *one[2] = {got[nx - 1][0], got[nx - 1][1]};
        for (int q = 0; q < 2; q++) {
            fc__qdot_portable.dot[kind](k, w[q], xq, xq_row, nx, ref[q]);
            tab->dot[kind](k, w[q], xq, xq_row, nx, one[q]);
            /* the portable bits (qdot.h's canonical order) */
            assert_memory_equal(one[q], ref[q], sizeof(float) * (size_t)nx);
        }
        if (tab->dot2[kind]) {
            float o0[FC__QDOT_MAX_ROWS], o1[FC__QDOT_MAX_ROWS];
            tab->dot2[kind](k, w[0], w[1], xq, xq_row, nx, o0, o1);
            assert_memory_equal(o0, one[0], sizeof(float) * (size_t)nx);
            assert_memory_equal(o1, one[1], sizeof(float) * (size_t)nx);
        }
    }
    free(xq);
    problem_free(&p);
}
#endif

/* fc__qdot_avx2 and, on a CPU with AVX-VNNI, fc__qdot_avxvnni against the
 * portable kernels (table_matches_portable); the VNNI table the same bits
 * as the plain one (they sum the same integers in the same f32 order). The
 * engine runs only one of the two tables on a given CPU, so this is where
 * the other is held to it. */
static void test_qmatmul_avx2_tables_match_portable(void **state) {
    (void)state;
#ifdef FC__QDOT_X86
    if (!fc__qmatmul_isa_runs(FC__ISA_AVX2)) {
        print_message("skipped: needs the avx2 level (here: %s)\n", fc__isa_name(fc__isa_level()));
        skip();
    }
    const bool vnni = fc__cpu()->avxvnni;
    static float plain[FC__QDOT_MAX_ROWS][2][FC__QDOT_MAX_ROWS],
        with_vnni[FC__QDOT_MAX_ROWS][2][FC__QDOT_MAX_ROWS];
    for (size_t t = 0; t < N_FAST; t++) {
        table_matches_portable(&fc__qdot_avx2, t, plain);
        if (!vnni) continue;
        table_matches_portable(&fc__qdot_avxvnni, t, with_vnni);
        const fc__qkind kind = fc__qkind_of(fast[t]);
        assert_int_equal(fc__qdot_avxvnni.rows[kind], fc__qdot_avx2.rows[kind]);
        for (int nx = 1; nx <= fc__qdot_avx2.rows[kind]; nx++)
            for (int q = 0; q < 2; q++)
                assert_memory_equal(with_vnni[nx - 1][q], plain[nx - 1][q],
                                    sizeof(float) * (size_t)nx);
    }
#else
    fprintf(stderr, "SKIP: the AVX2 kernels are built on x86-64 only\n");
    skip();
#endif
}

/* fc__qdot_avx512 against the portable kernels, for as many activation rows
 * as each of its kinds takes (8 for q4_0 and q8_0). */
static void test_qmatmul_avx512_table_matches_portable(void **state) {
    (void)state;
#ifdef FC__QDOT_X86
    if (!fc__qmatmul_isa_runs(FC__ISA_AVX512)) {
        print_message("skipped: needs the avx512 level (here: %s)\n",
                      fc__isa_name(fc__isa_level()));
        skip();
    }
    static float got[FC__QDOT_MAX_ROWS][2][FC__QDOT_MAX_ROWS];
    for (size_t t = 0; t < N_FAST; t++)
        table_matches_portable(&fc__qdot_avx512, t, got);
#else
    fprintf(stderr, "SKIP: the AVX-512 kernels are built on x86-64 only\n");
    skip();
#endif
}

/* ---- ISA queries -------------------------------------------------------------------- */

static void test_qmatmul_isa_queries(void **state) {
    (void)state;
    assert_true(fc__qmatmul_isa_runs(FC__ISA_PORTABLE));
    assert_false(fc__qmatmul_isa_runs(FC__ISA_COUNT));
    assert_false(fc__qmatmul_isa_runs((fc__isa)-1));
    const fc__isa best = fc__qmatmul_isa();
    assert_true(best >= FC__ISA_PORTABLE && best < FC__ISA_COUNT);
    assert_true(fc__qmatmul_isa_runs(best));
    assert_true(best <= fc__isa_level());
    /* AVX-512 kernels need the AVX2 ones' features too */
    if (fc__qmatmul_isa_runs(FC__ISA_AVX512)) assert_true(fc__qmatmul_isa_runs(FC__ISA_AVX2));
    /* a test cap below a family turns it off, and lifting the cap restores it */
    fc__isa keep = fc__isa_set_cap(FC__ISA_PORTABLE);
    assert_int_equal(fc__qmatmul_isa(), FC__ISA_PORTABLE);
    assert_false(fc__qmatmul_isa_runs(FC__ISA_AVX2));
    fc__isa_set_cap(keep);
    assert_int_equal(fc__qmatmul_isa(), best);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qmatmul_every_dtype_matches_reference),
        cmocka_unit_test(test_qmatmul_fast_kernels_shapes_isas_threads),
        cmocka_unit_test(test_qmatmul_many_rows),
        cmocka_unit_test(test_qmatmul_long_rows_in_slices),
        cmocka_unit_test(test_qmatmul_strided_operands),
        cmocka_unit_test(test_qmatmul_nonfinite_rows_give_nonfinite_outputs),
        cmocka_unit_test(test_qmatmul_errors),
        cmocka_unit_test(test_qmatmul_allocation_and_oom),
        cmocka_unit_test(test_qmatmul_packing_identical_across_isas),
        cmocka_unit_test(test_qmatmul_avx2_tables_match_portable),
        cmocka_unit_test(test_qmatmul_avx512_table_matches_portable),
        cmocka_unit_test(test_qmatmul_isa_queries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
