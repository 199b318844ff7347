/* SPDX-License-Identifier: MIT */
/* rowsimd.c - the f32 row primitives of rowwise.h: portable C and AVX2+FMA,
 * and the dispatch that picks them or the AVX-512 set (rowsimd512.c).
 *
 * Accuracy contract (every set): sums keep f32 lane partials of at most 32
 * terms (blocks of 512 elements over 16 portable or 32 AVX2 lanes; AVX-512
 * in rowsimd512.c) and add each block into a double. exp(x) is x = k ln2 + r
 * (|r| <= ln2/2, ln2 split in two parts), e^r by its degree-7 Taylor
 * polynomial, 2^k built in the exponent field: within 2 ulp of expf for
 * x in [-87, 88]; inputs are clamped to [-88, 88], k = -127 gives +0, and a
 * NaN stays NaN (the clamp keeps it: x86 max/min return their second
 * operand when one is NaN, and the portable clamps compare the same way).
 * max/min skip NaN and report whether one was seen. The AVX2 (and AVX-512)
 * versions may differ from the portable ones in the last bits (different partial order,
 * FMA), never beyond these bounds; each is deterministic on its own. */
#include "exec/kernels/rowwise.h"

#include "core/convert.h"

#define BLOCK 512
#define LANES 16

/* ---- portable ------------------------------------------------------------------------------- */

static inline float exp_portable(float x) {
    union {
        float f;
        uint32_t u;
    } kb, sc;
    x = x < -88.0f ? -88.0f : x;
    x = x > 88.0f ? 88.0f : x;
    kb.f = x * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23: rounds to an integer */
    float k = kb.f - 12582912.0f;
    uint32_t ki = kb.u - 0x4B400000u;
    float r = x - k * 0.693145751953125f;
    r = r - k * 1.428606765330187045e-06f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    sc.u = (ki + 127u) << 23;
    return p * sc.f;
}

float fc__rw_max_portable(const float *x, int64_t n, bool *nan) {
    float acc[LANES];
    int bad = 0;
    for (int l = 0; l < LANES; l++)
        acc[l] = -INFINITY;
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++) {
            float v = x[j + l];
            acc[l] = v > acc[l] ? v : acc[l];
            bad |= v != v;
        }
    float m = -INFINITY;
    for (; j < n; j++) {
        m = x[j] > m ? x[j] : m;
        bad |= x[j] != x[j];
    }
    for (int l = 0; l < LANES; l++)
        m = acc[l] > m ? acc[l] : m;
    *nan = bad != 0;
    return m;
}

float fc__rw_min_portable(const float *x, int64_t n, bool *nan) {
    float acc[LANES];
    int bad = 0;
    for (int l = 0; l < LANES; l++)
        acc[l] = INFINITY;
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++) {
            float v = x[j + l];
            acc[l] = v < acc[l] ? v : acc[l];
            bad |= v != v;
        }
    float m = INFINITY;
    for (; j < n; j++) {
        m = x[j] < m ? x[j] : m;
        bad |= x[j] != x[j];
    }
    for (int l = 0; l < LANES; l++)
        m = acc[l] < m ? acc[l] : m;
    *nan = bad != 0;
    return m;
}

/* Each sum: f32 lane partials per block of BLOCK elements, then a double. */
double fc__rw_sum_portable(const float *x, int64_t n) {
    double total = 0;
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t end = n - i < BLOCK ? n : i + BLOCK, j = i;
        float acc[LANES] = {0};
        for (; j + LANES <= end; j += LANES)
            for (int l = 0; l < LANES; l++)
                acc[l] += x[j + l];
        double t = 0;
        for (; j < end; j++)
            t += x[j];
        for (int l = 0; l < LANES; l++)
            t += acc[l];
        total += t;
    }
    return total;
}

double fc__rw_dot_portable(const float *a, const float *b, int64_t n) {
    double total = 0;
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t end = n - i < BLOCK ? n : i + BLOCK, j = i;
        float acc[LANES] = {0};
        for (; j + LANES <= end; j += LANES)
            for (int l = 0; l < LANES; l++)
                acc[l] += a[j + l] * b[j + l];
        double t = 0;
        for (; j < end; j++)
            t += a[j] * b[j];
        for (int l = 0; l < LANES; l++)
            t += acc[l];
        total += t;
    }
    return total;
}

double fc__rw_sumsq_dev_portable(const float *x, int64_t n, float c) {
    double total = 0;
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t end = n - i < BLOCK ? n : i + BLOCK, j = i;
        float acc[LANES] = {0};
        for (; j + LANES <= end; j += LANES)
            for (int l = 0; l < LANES; l++)
                acc[l] += (x[j + l] - c) * (x[j + l] - c);
        double t = 0;
        for (; j < end; j++)
            t += (x[j] - c) * (x[j] - c);
        for (int l = 0; l < LANES; l++)
            t += acc[l];
        total += t;
    }
    return total;
}

void fc__rw_sum_sumsq_portable(const float *x, int64_t n, float c, double *s1, double *s2) {
    double t1 = 0, t2 = 0;
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t end = n - i < BLOCK ? n : i + BLOCK, j = i;
        float a1[LANES] = {0}, a2[LANES] = {0};
        for (; j + LANES <= end; j += LANES)
            for (int l = 0; l < LANES; l++) {
                float d = x[j + l] - c;
                a1[l] += d;
                a2[l] += d * d;
            }
        for (; j < end; j++) {
            float d = x[j] - c;
            t1 += d;
            t2 += d * d;
        }
        for (int l = 0; l < LANES; l++) {
            t1 += a1[l];
            t2 += a2[l];
        }
    }
    *s1 = t1;
    *s2 = t2;
}

double fc__rw_exp_portable(const float *x, float *y, int64_t n, float m) {
    float tmp[BLOCK];
    double total = 0;
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t k = n - i < BLOCK ? n - i : BLOCK;
        for (int64_t q = 0; q < k; q++)
            tmp[q] = exp_portable(x[i + q] - m);
        if (y) memcpy(y + i, tmp, sizeof *tmp * (size_t)k);
        total += fc__rw_sum_portable(tmp, k);
    }
    return total;
}

void fc__rw_norm_sums_portable(const float *x, const float *g, const float *w, int64_t n, float mu,
                               float rs, double *sa, double *sb) {
    float tmp[BLOCK];
    double a = 0, b = 0;
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t k = n - i < BLOCK ? n - i : BLOCK;
        for (int64_t q = 0; q < k; q++)
            tmp[q] = g[i + q] * w[i + q];
        a += fc__rw_sum_portable(tmp, k);
        for (int64_t q = 0; q < k; q++)
            tmp[q] *= (x[i + q] - mu) * rs;
        b += fc__rw_sum_portable(tmp, k);
    }
    *sa = a;
    *sb = b;
}

/* ---- AVX2 + FMA ----------------------------------------------------------------------------- */
#ifdef FC__RW_X86
#include <immintrin.h>

/* Every AVX2 primitive hands its tail to the portable twin, which is
 * baseline (SSE) code, and gcc does not clear the upper YMM halves before
 * such a call. On Intel cores a dirty upper state makes every later SSE
 * instruction merge with it: on a Xeon (Sapphire Rapids) capped to AVX2,
 * the bf16 sum of 2^24 (a 512-element sum per block) ran at 3.3 GB/s in
 * a RelWithDebInfo build and at 16 GB/s once cleared. So each AVX2
 * primitive calls _mm256_zeroupper() before its tail. */
FC__RW_AVX2 static inline double hsum_d(__m256 v) {
    __m256d d = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                              _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(d), _mm256_extractf128_pd(d, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

FC__RW_AVX2 static inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_set1_ps(88.0f), _mm256_max_ps(_mm256_set1_ps(-88.0f), x));
    __m256 kf =
        _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(12582912.0f));
    __m256 k = _mm256_sub_ps(kf, _mm256_set1_ps(12582912.0f));
    __m256i ki = _mm256_sub_epi32(_mm256_castps_si256(kf), _mm256_set1_epi32(0x4B400000));
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.428606765330187045e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(ki, _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* max/min: x86 max(v, m) returns m when v is NaN, so NaN lanes are skipped. */
FC__RW_AVX2 static float max_avx2(const float *x, int64_t n, bool *nan) {
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0, bad = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
        __m256 v0 = _mm256_loadu_ps(x + j), v1 = _mm256_loadu_ps(x + j + 8);
        __m256 v2 = _mm256_loadu_ps(x + j + 16), v3 = _mm256_loadu_ps(x + j + 24);
        m0 = _mm256_max_ps(v0, m0);
        m1 = _mm256_max_ps(v1, m1);
        m2 = _mm256_max_ps(v2, m2);
        m3 = _mm256_max_ps(v3, m3);
        bad = _mm256_or_ps(bad, _mm256_or_ps(_mm256_cmp_ps(v0, v1, _CMP_UNORD_Q),
                                             _mm256_cmp_ps(v2, v3, _CMP_UNORD_Q)));
    }
    for (; j + 8 <= n; j += 8) {
        __m256 v = _mm256_loadu_ps(x + j);
        m0 = _mm256_max_ps(v, m0);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    m0 = _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3));
    float lanes[8];
    _mm256_storeu_ps(lanes, m0);
    bool tail_nan;
    _mm256_zeroupper(); /* see hsum_d: the tail is SSE code */
    float m = fc__rw_max_portable(x + j, n - j, &tail_nan);
    for (int l = 0; l < 8; l++)
        m = lanes[l] > m ? lanes[l] : m;
    *nan = tail_nan || _mm256_movemask_ps(bad) != 0;
    return m;
}

FC__RW_AVX2 static float min_avx2(const float *x, int64_t n, bool *nan) {
    __m256 m0 = _mm256_set1_ps(INFINITY), m1 = m0, m2 = m0, m3 = m0, bad = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
        __m256 v0 = _mm256_loadu_ps(x + j), v1 = _mm256_loadu_ps(x + j + 8);
        __m256 v2 = _mm256_loadu_ps(x + j + 16), v3 = _mm256_loadu_ps(x + j + 24);
        m0 = _mm256_min_ps(v0, m0);
        m1 = _mm256_min_ps(v1, m1);
        m2 = _mm256_min_ps(v2, m2);
        m3 = _mm256_min_ps(v3, m3);
        bad = _mm256_or_ps(bad, _mm256_or_ps(_mm256_cmp_ps(v0, v1, _CMP_UNORD_Q),
                                             _mm256_cmp_ps(v2, v3, _CMP_UNORD_Q)));
    }
    for (; j + 8 <= n; j += 8) {
        __m256 v = _mm256_loadu_ps(x + j);
        m0 = _mm256_min_ps(v, m0);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    m0 = _mm256_min_ps(_mm256_min_ps(m0, m1), _mm256_min_ps(m2, m3));
    float lanes[8];
    _mm256_storeu_ps(lanes, m0);
    bool tail_nan;
    _mm256_zeroupper(); /* see hsum_d: the tail is SSE code */
    float m = fc__rw_min_portable(x + j, n - j, &tail_nan);
    for (int l = 0; l < 8; l++)
        m = lanes[l] < m ? lanes[l] : m;
    *nan = tail_nan || _mm256_movemask_ps(bad) != 0;
    return m;
}

/* Blocks of up to 512 (whole vectors of 32): four 8-lane f32 partials,
 * then into a double; the tail (< 32) goes through the portable loop. */
FC__RW_AVX2 static double sum_avx2(const float *x, int64_t n) {
    double total = 0;
    int64_t i = 0;
    while (n - i >= 32) {
        int64_t end = i + ((n - i < BLOCK ? n - i : BLOCK) & ~(int64_t)31);
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t j = i; j < end; j += 32) {
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + j));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + j + 8));
            a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + j + 16));
            a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + j + 24));
        }
        total += hsum_d(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
        i = end;
    }
    _mm256_zeroupper(); /* see hsum_d: the tail is SSE code */
    return total + fc__rw_sum_portable(x + i, n - i);
}

/* Eight halves widened to f32: bf16 is the high half of an f32, f16 goes
 * through F16C (part of the AVX2 level, core/cpu.h). */
#define FC__RW_AVX2_F16C __attribute__((target("avx2,fma,f16c")))
FC__RW_AVX2_F16C static inline __m256 load_half8(const uint16_t *x, bool bf16) {
    __m128i h = _mm_loadu_si128((const __m128i *)x);
    if (bf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

/* sum_avx2 over the widened halves, reading them directly: per block of
 * 512 the same four partials, the same double total and the same portable
 * tail as converting the block and calling sum_avx2, so the same bits. */
FC__RW_AVX2_F16C static double sum_half_avx2(const uint16_t *x, int64_t n, bool bf16) {
    double total = 0;
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t k = n - i < BLOCK ? n - i : BLOCK, whole = k & ~(int64_t)31;
        const uint16_t *xb = x + i;
        double block = 0;
        if (whole) {
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int64_t j = 0; j < whole; j += 32) {
                a0 = _mm256_add_ps(a0, load_half8(xb + j, bf16));
                a1 = _mm256_add_ps(a1, load_half8(xb + j + 8, bf16));
                a2 = _mm256_add_ps(a2, load_half8(xb + j + 16, bf16));
                a3 = _mm256_add_ps(a3, load_half8(xb + j + 24, bf16));
            }
            block = hsum_d(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
        }
        if (whole < k) {
            float tail[32];
            _mm256_zeroupper(); /* see hsum_d: the tail is SSE code */
            fc__load_f32_row(bf16 ? FC_BF16 : FC_F16, xb + whole, tail, (size_t)(k - whole));
            block += fc__rw_sum_portable(tail, k - whole);
        }
        total += block;
    }
    _mm256_zeroupper();
    return total;
}

FC__RW_AVX2 static double dot_avx2(const float *a, const float *b, int64_t n) {
    double total = 0;
    int64_t i = 0;
    while (n - i >= 32) {
        int64_t end = i + ((n - i < BLOCK ? n - i : BLOCK) & ~(int64_t)31);
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t j = i; j < end; j += 32) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 8), _mm256_loadu_ps(b + j + 8), a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 16), _mm256_loadu_ps(b + j + 16), a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 24), _mm256_loadu_ps(b + j + 24), a3);
        }
        total += hsum_d(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
        i = end;
    }
    _mm256_zeroupper(); /* see hsum_d: the tail is SSE code */
    return total + fc__rw_dot_portable(a + i, b + i, n - i);
}

FC__RW_AVX2 static double sumsq_dev_avx2(const float *x, int64_t n, float c) {
    __m256 cv = _mm256_set1_ps(c);
    double total = 0;
    int64_t i = 0;
    while (n - i >= 32) {
        int64_t end = i + ((n - i < BLOCK ? n - i : BLOCK) & ~(int64_t)31);
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t j = i; j < end; j += 32) {
            __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + j), cv);
            __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + j + 8), cv);
            __m256 d2 = _mm256_sub_ps(_mm256_loadu_ps(x + j + 16), cv);
            __m256 d3 = _mm256_sub_ps(_mm256_loadu_ps(x + j + 24), cv);
            a0 = _mm256_fmadd_ps(d0, d0, a0);
            a1 = _mm256_fmadd_ps(d1, d1, a1);
            a2 = _mm256_fmadd_ps(d2, d2, a2);
            a3 = _mm256_fmadd_ps(d3, d3, a3);
        }
        total += hsum_d(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
        i = end;
    }
    _mm256_zeroupper(); /* see hsum_d: the tail is SSE code */
    return total + fc__rw_sumsq_dev_portable(x + i, n - i, c);
}

FC__RW_AVX2 static void sum_sumsq_avx2(const float *x, int64_t n, float c, double *s1, double *s2) {
    __m256 cv = _mm256_set1_ps(c);
    double t1 = 0, t2 = 0;
    int64_t i = 0;
    while (n - i >= 16) {
        int64_t end = i + ((n - i < BLOCK ? n - i : BLOCK) & ~(int64_t)15);
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
        for (int64_t j = i; j < end; j += 16) {
            __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + j), cv);
            __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + j + 8), cv);
            a0 = _mm256_add_ps(a0, d0);
            a1 = _mm256_add_ps(a1, d1);
            b0 = _mm256_fmadd_ps(d0, d0, b0);
            b1 = _mm256_fmadd_ps(d1, d1, b1);
        }
        t1 += hsum_d(_mm256_add_ps(a0, a1));
        t2 += hsum_d(_mm256_add_ps(b0, b1));
        i = end;
    }
    double r1, r2;
    _mm256_zeroupper(); /* see hsum_d: the tail is SSE code */
    fc__rw_sum_sumsq_portable(x + i, n - i, c, &r1, &r2);
    *s1 = t1 + r1;
    *s2 = t2 + r2;
}

FC__RW_AVX2 static double exp_avx2(const float *x, float *y, int64_t n, float m) {
    __m256 mv = _mm256_set1_ps(m);
    double total = 0;
    int64_t i = 0;
    while (i + 8 <= n) {
        int64_t end = n - i < BLOCK ? i + ((n - i) & ~(int64_t)7) : i + BLOCK;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0;
        int64_t j = i;
        for (; j + 16 <= end; j += 16) {
            __m256 e0 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), mv));
            __m256 e1 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j + 8), mv));
            if (y) {
                _mm256_storeu_ps(y + j, e0);
                _mm256_storeu_ps(y + j + 8, e1);
            }
            a0 = _mm256_add_ps(a0, e0);
            a1 = _mm256_add_ps(a1, e1);
        }
        for (; j < end; j += 8) {
            __m256 e0 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), mv));
            if (y) _mm256_storeu_ps(y + j, e0);
            a0 = _mm256_add_ps(a0, e0);
        }
        total += hsum_d(_mm256_add_ps(a0, a1));
        i = end;
    }
    _mm256_zeroupper(); /* see hsum_d: the tail is SSE code */
    return total + fc__rw_exp_portable(x + i, y ? y + i : NULL, n - i, m);
}

FC__RW_AVX2 static void norm_sums_avx2(const float *x, const float *g, const float *w, int64_t n,
                                       float mu, float rs, double *sa, double *sb) {
    __m256 muv = _mm256_set1_ps(mu), rsv = _mm256_set1_ps(rs);
    double a = 0, b = 0;
    int64_t i = 0;
    while (i + 8 <= n) {
        int64_t end = n - i < BLOCK ? i + ((n - i) & ~(int64_t)7) : i + BLOCK;
        __m256 a0 = _mm256_setzero_ps(), b0 = a0;
        for (int64_t j = i; j < end; j += 8) {
            __m256 gy = _mm256_mul_ps(_mm256_loadu_ps(g + j), _mm256_loadu_ps(w + j));
            __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), muv), rsv);
            a0 = _mm256_add_ps(a0, gy);
            b0 = _mm256_fmadd_ps(gy, xh, b0);
        }
        a += hsum_d(a0);
        b += hsum_d(b0);
        i = end;
    }
    double ta, tb;
    _mm256_zeroupper(); /* see hsum_d: the tail is SSE code */
    fc__rw_norm_sums_portable(x + i, g + i, w + i, n - i, mu, rs, &ta, &tb);
    *sa = a + ta;
    *sb = b + tb;
}

/* o = a op b with 256-bit non-temporal stores: the AVX2 twin of
 * rowsimd512.c's streamed binary kernels, one rounding per element as the
 * plain loops, so the same bits. */
#define STREAM_BINARY8(NAME, EXPR_V, EXPR_S)                                                       \
    FC__RW_AVX2 static void NAME(float *o, const float *a, const float *b, int64_t n) {            \
        int64_t j = 0;                                                                             \
        for (; j < n && (uintptr_t)(o + j) % 32 != 0; j++)                                         \
            o[j] = EXPR_S(a[j], b[j]);                                                             \
        for (; j + 8 <= n; j += 8)                                                                 \
            _mm256_stream_ps(o + j, EXPR_V(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j)));       \
        for (; j < n; j++)                                                                         \
            o[j] = EXPR_S(a[j], b[j]);                                                             \
    }
#define S_ADD(x, y) ((x) + (y))
#define S_SUB(x, y) ((x) - (y))
#define S_MUL(x, y) ((x) * (y))
#define S_DIV(x, y) ((x) / (y))
STREAM_BINARY8(stream_add8, _mm256_add_ps, S_ADD)
STREAM_BINARY8(stream_sub8, _mm256_sub_ps, S_SUB)
STREAM_BINARY8(stream_mul8, _mm256_mul_ps, S_MUL)
STREAM_BINARY8(stream_div8, _mm256_div_ps, S_DIV)
#undef STREAM_BINARY8
#undef S_ADD
#undef S_SUB
#undef S_MUL
#undef S_DIV

FC__RW_AVX2 static void stream_scaled_avx2(float *dst, const float *src, int64_t n, float s) {
    const __m256 sv = _mm256_set1_ps(s);
    for (int64_t j = 0; j < n; j += 16) {
        _mm256_stream_ps(dst + j, _mm256_mul_ps(_mm256_loadu_ps(src + j), sv));
        _mm256_stream_ps(dst + j + 8, _mm256_mul_ps(_mm256_loadu_ps(src + j + 8), sv));
    }
}

void fc__rw_stream_scaled(float *dst, const float *src, int64_t n, float s) {
    if (fc__rw_avx512())
        fc__rw_stream_scaled_avx512(dst, src, n, s);
    else
        stream_scaled_avx2(dst, src, n, s);
}

static const fc__rw_stream_fn stream_binary_avx2[4] = {stream_add8, stream_sub8, stream_mul8,
                                                       stream_div8};

bool fc__rw_stream_binary(char op, float *o, const float *a, const float *b, int64_t n) {
    static const char ops[4] = {'+', '-', '*', '/'}; /* the tables' order */
    const char *at = op ? memchr(ops, op, sizeof ops) : NULL;
    if (!at || !fc__rw_avx2()) return false;
    const fc__rw_stream_fn *t = fc__rw_avx512() ? fc__rw_stream_binary_avx512 : stream_binary_avx2;
    t[at - ops](o, a, b, n);
    fc__rw_stream_fence();
    return true;
}
#endif

/* ---- dispatch ------------------------------------------------------------------------------- */

float fc__rw_max(const float *x, int64_t n, bool *nan) {
#ifdef FC__RW_X86
    if (fc__rw_avx512()) return fc__rw_max_avx512(x, n, nan);
    if (fc__rw_avx2()) return max_avx2(x, n, nan);
#endif
    return fc__rw_max_portable(x, n, nan);
}

float fc__rw_min(const float *x, int64_t n, bool *nan) {
#ifdef FC__RW_X86
    if (fc__rw_avx512()) return fc__rw_min_avx512(x, n, nan);
    if (fc__rw_avx2()) return min_avx2(x, n, nan);
#endif
    return fc__rw_min_portable(x, n, nan);
}

double fc__rw_sum(const float *x, int64_t n) {
#ifdef FC__RW_X86
    if (fc__rw_avx512()) return fc__rw_sum_avx512(x, n);
    if (fc__rw_avx2()) return sum_avx2(x, n);
#endif
    return fc__rw_sum_portable(x, n);
}

double fc__rw_sum_half(const uint16_t *x, int64_t n, bool bf16) {
#ifdef FC__RW_X86
    if (fc__rw_avx512()) return fc__rw_sum_half_avx512(x, n, bf16);
    if (fc__rw_avx2()) return sum_half_avx2(x, n, bf16);
#endif
    float tmp[BLOCK];
    double total = 0;
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t k = n - i < BLOCK ? n - i : BLOCK;
        fc__load_f32_row(bf16 ? FC_BF16 : FC_F16, x + i, tmp, (size_t)k);
        total += fc__rw_sum(tmp, k);
    }
    return total;
}

double fc__rw_dot(const float *a, const float *b, int64_t n) {
#ifdef FC__RW_X86
    if (fc__rw_avx512()) return fc__rw_dot_avx512(a, b, n);
    if (fc__rw_avx2()) return dot_avx2(a, b, n);
#endif
    return fc__rw_dot_portable(a, b, n);
}

double fc__rw_sumsq_dev(const float *x, int64_t n, float c) {
#ifdef FC__RW_X86
    if (fc__rw_avx512()) return fc__rw_sumsq_dev_avx512(x, n, c);
    if (fc__rw_avx2()) return sumsq_dev_avx2(x, n, c);
#endif
    return fc__rw_sumsq_dev_portable(x, n, c);
}

void fc__rw_sum_sumsq(const float *x, int64_t n, float c, double *s1, double *s2) {
#ifdef FC__RW_X86
    if (fc__rw_avx512()) {
        fc__rw_sum_sumsq_avx512(x, n, c, s1, s2);
        return;
    }
    if (fc__rw_avx2()) {
        sum_sumsq_avx2(x, n, c, s1, s2);
        return;
    }
#endif
    fc__rw_sum_sumsq_portable(x, n, c, s1, s2);
}

double fc__rw_exp(const float *x, float *y, int64_t n, float m) {
#ifdef FC__RW_X86
    if (fc__rw_avx512()) return fc__rw_exp_avx512(x, y, n, m);
    if (fc__rw_avx2()) return exp_avx2(x, y, n, m);
#endif
    return fc__rw_exp_portable(x, y, n, m);
}

void fc__rw_norm_sums(const float *x, const float *g, const float *w, int64_t n, float mu, float rs,
                      double *sa, double *sb) {
#ifdef FC__RW_X86
    if (fc__rw_avx512()) {
        fc__rw_norm_sums_avx512(x, g, w, n, mu, rs, sa, sb);
        return;
    }
    if (fc__rw_avx2()) {
        norm_sums_avx2(x, g, w, n, mu, rs, sa, sb);
        return;
    }
#endif
    fc__rw_norm_sums_portable(x, g, w, n, mu, rs, sa, sb);
}
