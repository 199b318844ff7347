/* SPDX-License-Identifier: MIT */
/* test_iquant_props.c - properties of the i-quant formats beyond the golden
 * vectors: argument checks, zero rows, finiteness and defined behaviour on
 * extreme inputs (run under UBSan in the sanitizer build), error bounds on
 * random data, importance weighting, the lattice neighbour lists against a
 * brute-force sort, decoding of arbitrary bytes, and thread-safe first use.
 */
/* cmocka.h needs these three first */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/quant/iquant_impl.h"

#define N 1024

static const fc_dtype all_types[9] = {FC_IQ1_S,   FC_IQ1_M, FC_IQ2_XXS, FC_IQ2_XS, FC_IQ2_S,
                                      FC_IQ3_XXS, FC_IQ3_S, FC_IQ4_NL,  FC_IQ4_XS};

/* ---- a small deterministic PRNG (splitmix64) ------------------------------- */
static uint64_t rng_state = 12345;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double rng_uniform(void) { return (double)(rng_next() >> 11) * 0x1.0p-53; }
static float rng_normal(void) {
    double u1 = rng_uniform(), u2 = rng_uniform();
    return (float)(sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2));
}

static size_t row_bytes(fc_dtype t, int64_t n) {
    return (size_t)(n / fc_dtype_block_elems(t)) * fc_dtype_size(t);
}

static float ones[N];
static int setup_ones(void **state) {
    (void)state;
    for (int i = 0; i < N; ++i)
        ones[i] = 1.0f;
    return 0;
}

/* Quantizes n values (with the all-ones imatrix for every type, which is
 * what the imatrix-requiring types need and the others accept) and decodes
 * them again. */
static void round_trip(fc_dtype t, const float *x, float *y, int64_t n) {
    const fc__quant_fns *f = fc__quant_family_iquant(t);
    uint8_t *q = malloc(row_bytes(t, n));
    assert_non_null(q);
    assert_int_equal(f->quantize_row(x, q, n, ones, 0), FC_OK);
    f->dequantize_row(q, y, n);
    free(q);
}

static void expect_finite(fc_dtype t, const char *what, const float *y, int n) {
    for (int i = 0; i < n; ++i)
        if (!isfinite(y[i]))
            fail_msg("%s, %s: element %d decodes to %g", fc_dtype_name(t), what, i, (double)y[i]);
}

/* ---- thread-safe lazy initialisation (runs first, so the tables are built
 * by racing threads) ------------------------------------------------------- */
typedef struct thread_job {
    fc_dtype dtype;
    const float *x;
    uint8_t out[2 * 110];
} thread_job;

static void *quantize_job(void *arg) {
    thread_job *job = arg;
    const fc__quant_fns *f = fc__quant_family_iquant(job->dtype);
    if (f->quantize_row(job->x, job->out, 512, ones, 0) != FC_OK) memset(job->out, 0xee, 16);
    return NULL;
}

static void test_iquant_props_concurrent_first_use(void **state) {
    (void)state;
    float x[512];
    for (int i = 0; i < 512; ++i)
        x[i] = rng_normal();
    enum { PER_TYPE = 3 };
    const fc_dtype types[] = {FC_IQ1_S, FC_IQ2_XXS, FC_IQ2_XS, FC_IQ2_S, FC_IQ3_XXS, FC_IQ3_S};
    const int ntypes = (int)(sizeof types / sizeof types[0]);
    static thread_job jobs[6 * PER_TYPE];
    pthread_t th[6 * PER_TYPE];
    for (int i = 0; i < ntypes * PER_TYPE; ++i) {
        jobs[i].dtype = types[i / PER_TYPE];
        jobs[i].x = x;
        assert_int_equal(pthread_create(&th[i], NULL, quantize_job, &jobs[i]), 0);
    }
    for (int i = 0; i < ntypes * PER_TYPE; ++i)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < ntypes * PER_TYPE; ++i) {
        uint8_t again[2 * 110];
        size_t nb = row_bytes(jobs[i].dtype, 512);
        const fc__quant_fns *f = fc__quant_family_iquant(jobs[i].dtype);
        assert_int_equal(f->quantize_row(x, again, 512, ones, 0), FC_OK);
        assert_memory_equal(jobs[i].out, again, nb);
    }
}

/* ---- argument checks -------------------------------------------------------- */
static void test_iquant_props_bad_arguments(void **state) {
    (void)state;
    float x[N] = {0};
    uint8_t q[1024];
    for (int k = 0; k < 9; ++k) {
        fc_dtype t = all_types[k];
        const fc__quant_fns *f = fc__quant_family_iquant(t);
        int64_t blk = fc_dtype_block_elems(t);
        assert_int_equal(f->quantize_row(NULL, q, blk, ones, 0), FC_ERR_NULL_ARG);
        assert_int_equal(f->quantize_row(x, NULL, blk, ones, 0), FC_ERR_NULL_ARG);
        assert_int_equal(f->quantize_row(x, q, -blk, ones, 0), FC_ERR_INVALID_SHAPE);
        assert_int_equal(f->quantize_row(x, q, blk + 1, ones, 0), FC_ERR_INVALID_SHAPE);
        assert_int_equal(f->quantize_row(x, q, blk / 2, ones, 0), FC_ERR_INVALID_SHAPE);
        bool needs = t == FC_IQ2_XXS || t == FC_IQ2_XS || t == FC_IQ1_S;
        assert_int_equal(f->quantize_row(x, q, blk, NULL, 0), needs ? FC_ERR_INVALID_ARG : FC_OK);
        /* n == 0 succeeds and writes nothing */
        memset(q, 0x5a, sizeof q);
        assert_int_equal(f->quantize_row(x, q, 0, ones, 0), FC_OK);
        assert_int_equal(q[0], 0x5a);
        /* dequantize ignores NULL and empty requests */
        float y[4] = {7, 7, 7, 7};
        f->dequantize_row(NULL, y, blk);
        f->dequantize_row(q, y, 0);
        f->dequantize_row(q, NULL, blk);
        assert_true(y[0] == 7.0f);
    }
    /* iq4_nl blocks are 32 elements, the others 256 */
    const fc__quant_fns *nl = fc__quant_family_iquant(FC_IQ4_NL);
    assert_int_equal(nl->quantize_row(x, q, 32, NULL, FC_QUANT_IQ4NL_REF), FC_OK);
    const fc__quant_fns *xs = fc__quant_family_iquant(FC_IQ4_XS);
    assert_int_equal(xs->quantize_row(x, q, 32, NULL, 0), FC_ERR_INVALID_SHAPE);
}

/* ---- zero rows -------------------------------------------------------------- */
static void test_iquant_props_zero_rows_stay_zero(void **state) {
    (void)state;
    static float x[N], y[N];
    for (int sign = 0; sign < 2; ++sign) {
        for (int i = 0; i < N; ++i)
            x[i] = sign ? -0.0f : 0.0f;
        for (int k = 0; k < 9; ++k) {
            round_trip(all_types[k], x, y, N);
            for (int i = 0; i < N; ++i)
                if (y[i] != 0.0f)
                    fail_msg("%s: zero input decodes to %g at %d", fc_dtype_name(all_types[k]),
                             (double)y[i], i);
        }
    }
}

/* ---- extreme magnitudes ------------------------------------------------------- */

/* Fills x with a pattern of the given magnitude: 0 = Gaussian, 1 = one spike
 * per block in zeros, 2 = alternating +-, 3 = constant, 4 = Gaussian with a
 * single value 1e4 times larger. */
static void fill_pattern(float *x, int n, int pattern, float mag) {
    for (int i = 0; i < n; ++i) {
        switch (pattern) {
        case 0:
            x[i] = mag * rng_normal();
            break;
        case 1:
            x[i] = i % 32 == 5 ? mag : 0.0f;
            break;
        case 2:
            x[i] = i % 2 ? -mag : mag;
            break;
        case 3:
            x[i] = mag;
            break;
        default:
            x[i] = i == 77 ? mag : mag * 1e-4f * rng_normal();
            break;
        }
    }
}

/* Magnitudes from deep subnormals (the scale underflows in f16 and in f32)
 * through values whose reciprocal overflows, up to the largest f16. The
 * decoded values must be finite, and zero or tiny where the scale underflows. */
static void test_iquant_props_extreme_magnitudes_finite(void **state) {
    (void)state;
    static const float mags[] = {1e-45f, 1e-40f, 1.2e-38f, 3e-37f, 1e-30f, 1e-12f,
                                 1e-7f,  1e-3f,  1.0f,     300.0f, 6e4f,   65504.0f};
    static float x[256], y[256];
    for (size_t m = 0; m < sizeof mags / sizeof mags[0]; ++m) {
        for (int pattern = 0; pattern < 5; ++pattern) {
            fill_pattern(x, 256, pattern, mags[m]);
            for (int k = 0; k < 9; ++k) {
                char what[64];
                snprintf(what, sizeof what, "magnitude %g pattern %d", (double)mags[m], pattern);
                round_trip(all_types[k], x, y, 256);
                expect_finite(all_types[k], what, y, 256);
                if (mags[m] < 1e-30f) /* far below the smallest f16 step */
                    for (int i = 0; i < 256; ++i)
                        assert_true(fabsf(y[i]) < 1e-30f);
            }
        }
    }
}

/* The f16 super-block scale of block b of a row. */
static float stored_scale(fc_dtype t, const uint8_t *row, size_t b) {
    const uint8_t *blk = row + b * fc_dtype_size(t);
    if (t != FC_IQ1_M) return fc_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
    uint16_t sc[4];
    for (int i = 0; i < 4; ++i)
        sc[i] = (uint16_t)(blk[48 + 2 * i] | blk[49 + 2 * i] << 8);
    return fc_f16_to_f32((uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                    ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)));
}

/* Beyond the f16 range every stored scale saturates at +-65504 (and a scale
 * a degenerate search left NaN, once x*x overflows, is stored as 0), as the
 * k-quants do: the quantizers run with defined behaviour (UBSan, ASan), the
 * stored scales are finite and so is every decoded value. */
static void test_iquant_props_huge_inputs_defined(void **state) {
    (void)state;
    static const float mags[] = {1e5f, 1.4e5f, 1e6f, 7.6e6f, 1e7f, 1e12f, 1e19f, 1e30f, FLT_MAX};
    static float x[256], y[256];
    uint8_t q[144]; /* the largest row of 256: iq4_nl, 8 x 18 bytes */
    for (size_t m = 0; m < sizeof mags / sizeof mags[0]; ++m) {
        for (int pattern = 0; pattern < 5; ++pattern) {
            fill_pattern(x, 256, pattern, mags[m]);
            for (int k = 0; k < 9; ++k) {
                fc_dtype t = all_types[k];
                const fc__quant_fns *f = fc__quant_family_iquant(t);
                assert_int_equal(f->quantize_row(x, q, 256, ones, 0), FC_OK);
                f->dequantize_row(q, y, 256);
                int64_t be = fc_dtype_block_elems(t);
                for (int i = 0; i < 256; ++i) {
                    if (!isfinite(stored_scale(t, q, (size_t)(i / be))) || !isfinite(y[i]))
                        fail_msg("%s, magnitude %g pattern %d: element %d is %g, block scale %g",
                                 fc_dtype_name(t), (double)mags[m], pattern, i, (double)y[i],
                                 (double)stored_scale(t, q, (size_t)(i / be)));
                }
            }
        }
    }
}

/* ---- error bounds on Gaussian data ---------------------------------------------- */

/* Relative RMS error ||x - y|| / ||x|| over 8 Gaussian rows of 1024, per
 * type. The bounds sit about 15% above what ggml's algorithms reach here
 * (bits per weight in parentheses), so a broken search shows up while the
 * ranking of the formats is checked too. */
static void test_iquant_props_gaussian_error_bounds(void **state) {
    (void)state;
    static const struct {
        fc_dtype t;
        double bound;
    } cases[] = {
        {FC_IQ1_S, 0.56},   /* 1.56 */
        {FC_IQ1_M, 0.52},   /* 1.75 */
        {FC_IQ2_XXS, 0.40}, /* 2.06 */
        {FC_IQ2_XS, 0.35},  /* 2.31 */
        {FC_IQ2_S, 0.29},   /* 2.56 */
        {FC_IQ3_XXS, 0.21}, /* 3.06 */
        {FC_IQ3_S, 0.16},   /* 3.44 */
        {FC_IQ4_XS, 0.09},  /* 4.25 */
        {FC_IQ4_NL, 0.09},  /* 4.5 */
    };
    enum { ROWS = 8 };
    static float x[ROWS * N], y[ROWS * N];
    rng_state = 2024;
    for (int i = 0; i < ROWS * N; ++i)
        x[i] = rng_normal();
    double prev = 1.0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        double se = 0, sx = 0;
        for (int r = 0; r < ROWS; ++r)
            round_trip(cases[c].t, x + r * N, y + r * N, N);
        for (int i = 0; i < ROWS * N; ++i) {
            double d = (double)x[i] - (double)y[i];
            se += d * d;
            sx += (double)x[i] * (double)x[i];
        }
        double rel = sqrt(se / sx);
        if (!(rel < cases[c].bound))
            fail_msg("%s: relative RMS error %.4f exceeds %.2f", fc_dtype_name(cases[c].t), rel,
                     cases[c].bound);
        /* more bits per weight never cost accuracy (iq4_nl vs iq4_xs aside) */
        if (cases[c].t != FC_IQ4_NL) assert_true(rel < prev);
        prev = rel;
        print_message("%-8s relative RMS error %.4f\n", fc_dtype_name(cases[c].t), rel);
    }
}

/* ---- importance weighting --------------------------------------------------------- */

/* With an imatrix that makes every 8th column 100x more important, the error
 * on those columns must drop compared with uniform importance. */
static void test_iquant_props_imatrix_focuses_error(void **state) {
    (void)state;
    static float x[4 * N], y_flat[4 * N], y_imp[4 * N], imp[N];
    for (int i = 0; i < N; ++i)
        imp[i] = i % 8 == 0 ? 100.0f : 1.0f;
    rng_state = 99;
    for (int i = 0; i < 4 * N; ++i)
        x[i] = rng_normal();
    const fc_dtype types[] = {FC_IQ1_S,   FC_IQ1_M, FC_IQ2_XXS, FC_IQ2_XS, FC_IQ2_S,
                              FC_IQ3_XXS, FC_IQ3_S, FC_IQ4_NL,  FC_IQ4_XS};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; ++k) {
        const fc__quant_fns *f = fc__quant_family_iquant(types[k]);
        uint8_t *q = malloc(row_bytes(types[k], N));
        assert_non_null(q);
        double e_flat = 0, e_imp = 0;
        for (int r = 0; r < 4; ++r) {
            assert_int_equal(f->quantize_row(x + r * N, q, N, ones, 0), FC_OK);
            f->dequantize_row(q, y_flat + r * N, N);
            assert_int_equal(f->quantize_row(x + r * N, q, N, imp, 0), FC_OK);
            f->dequantize_row(q, y_imp + r * N, N);
        }
        for (int i = 0; i < 4 * N; i += 8) {
            e_flat += ((double)x[i] - y_flat[i]) * ((double)x[i] - y_flat[i]);
            e_imp += ((double)x[i] - y_imp[i]) * ((double)x[i] - y_imp[i]);
        }
        if (!(e_imp < 0.8 * e_flat))
            fail_msg("%s: important columns err %.4g with imatrix vs %.4g without",
                     fc_dtype_name(types[k]), e_imp, e_flat);
        free(q);
    }
}

/* ---- decoding arbitrary bytes ------------------------------------------------------- */

/* Any bytes with a finite scale decode to finite values: random blocks, f16
 * scales forced finite, every index and sign path exercised. */
static void test_iquant_props_decode_random_bytes(void **state) {
    (void)state;
    static uint8_t q[4 * 136];
    static float y[1024];
    rng_state = 7;
    for (int k = 0; k < 9; ++k) {
        fc_dtype t = all_types[k];
        const fc__quant_fns *f = fc__quant_family_iquant(t);
        const size_t bs = fc_dtype_size(t);
        const int64_t n = t == FC_IQ4_NL ? 128 : 1024;
        const size_t nblocks = (size_t)(n / fc_dtype_block_elems(t));
        for (int trial = 0; trial < 50; ++trial) {
            for (size_t i = 0; i < nblocks * bs; ++i)
                q[i] = (uint8_t)rng_next();
            for (size_t b = 0; b < nblocks; ++b) {
                if (t == FC_IQ1_M) {
                    /* d's sign and top exponent bits: the top nibble of scale word 3 */
                    q[b * bs + 55] = (uint8_t)((q[b * bs + 55] & 0x0f) | 0x30);
                } else {
                    /* f16 exponent field 12: |d| in [1/8, 1/4) */
                    q[b * bs + 1] = (uint8_t)((q[b * bs + 1] & 0x83) | 0x30);
                }
            }
            f->dequantize_row(q, y, n);
            expect_finite(t, "random bytes", y, (int)n);
        }
    }
}

/* ---- the lattice neighbour lists against a brute-force sort ------------------------- */

typedef struct cand {
    int d2, index;
} cand;
static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->d2 != y->d2) return x->d2 < y->d2 ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static void test_iquant_props_lattice_neighbours(void **state) {
    (void)state;
    /* ggml's nwant per grid: how many distinct distances the lists cover */
    static const int nwant[FC__IQ_LAT_COUNT] = {2, 2, 1, 3, 2, 3};
    static cand all[2048];
    for (int id = 0; id < FC__IQ_LAT_COUNT; ++id) {
        const fc__iq_lattice *lat = fc__iq_lattice_get((fc__iq_lattice_id)id);
        assert_non_null(lat);
        int nkeys = 1;
        for (int c = 0; c < lat->dim; ++c)
            nkeys *= lat->radix;
        /* every grid point maps to itself */
        for (int p = 0; p < lat->ngrid; ++p) {
            int8_t digits[8];
            for (int c = 0; c < lat->dim; ++c)
                digits[c] = (int8_t)((lat->levels[p * lat->dim + c] - 1) / 2);
            assert_int_equal(lat->map[fc__iq_key(lat, digits)], p);
        }
        int off = 0;
        for (int key = 0; key < nkeys; ++key)
            off += lat->map[key] < 0;
        assert_int_equal(off, nkeys - lat->ngrid);
        /* every 5th off-grid key: its list equals the sorted prefix */
        for (int key = 0; key < nkeys; key += 5) {
            if (lat->map[key] >= 0) continue;
            int pos[8];
            for (int c = 0, kk = key; c < lat->dim; ++c, kk /= lat->radix)
                pos[c] = 2 * (kk % lat->radix) + 1;
            for (int p = 0; p < lat->ngrid; ++p) {
                int d2 = 0;
                for (int c = 0; c < lat->dim; ++c) {
                    int diff = lat->levels[p * lat->dim + c] - pos[c];
                    d2 += diff * diff;
                }
                all[p] = (cand){d2, p};
            }
            qsort(all, (size_t)lat->ngrid, sizeof all[0], cand_cmp);
            int n = 0, distinct = 1;
            while (n < lat->ngrid) {
                if (n > 0 && all[n].d2 != all[n - 1].d2 && ++distinct > nwant[id]) break;
                ++n;
            }
            const uint16_t *list = lat->pool + (-lat->map[key] - 1);
            assert_int_equal(list[0], n);
            for (int j = 0; j < n; ++j)
                assert_int_equal(list[1 + j], all[j].index);
        }
    }
}

/* ---- iq4_nl: the two variants -------------------------------------------------------- */

/* The searching quantizer fits at least as well as the reference one on
 * average (it tries 15 scales and keeps the best weighted fit). */
static void test_iquant_props_iq4_nl_search_beats_ref(void **state) {
    (void)state;
    static float x[N], y0[N], y1[N];
    uint8_t q[576];
    const fc__quant_fns *f = fc__quant_family_iquant(FC_IQ4_NL);
    rng_state = 5;
    for (int i = 0; i < N; ++i)
        x[i] = rng_normal();
    assert_int_equal(f->quantize_row(x, q, N, NULL, 0), FC_OK);
    f->dequantize_row(q, y0, N);
    assert_int_equal(f->quantize_row(x, q, N, NULL, FC_QUANT_IQ4NL_REF), FC_OK);
    f->dequantize_row(q, y1, N);
    double e0 = 0, e1 = 0;
    for (int i = 0; i < N; ++i) {
        e0 += ((double)x[i] - y0[i]) * ((double)x[i] - y0[i]);
        e1 += ((double)x[i] - y1[i]) * ((double)x[i] - y1[i]);
    }
    assert_true(e0 <= e1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iquant_props_concurrent_first_use),
        cmocka_unit_test(test_iquant_props_bad_arguments),
        cmocka_unit_test(test_iquant_props_zero_rows_stay_zero),
        cmocka_unit_test(test_iquant_props_extreme_magnitudes_finite),
        cmocka_unit_test(test_iquant_props_huge_inputs_defined),
        cmocka_unit_test(test_iquant_props_gaussian_error_bounds),
        cmocka_unit_test(test_iquant_props_imatrix_focuses_error),
        cmocka_unit_test(test_iquant_props_decode_random_bytes),
        cmocka_unit_test(test_iquant_props_lattice_neighbours),
        cmocka_unit_test(test_iquant_props_iq4_nl_search_beats_ref),
    };
    return cmocka_run_group_tests_name("iquant_props", tests, setup_ones, NULL);
}
