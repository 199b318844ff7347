/* SPDX-License-Identifier: MIT */
/* rowsimd512.c - the f32 row primitives of rowwise.h in AVX-512F.
 *
 * Why a third set: on a row that the max (or dot) pass has just brought
 * into L1, softmax and the norms are bound by arithmetic, not memory, and
 * 16 lanes halve the instruction count of the AVX2 set (the exp pass was a
 * quarter of a softmax forward + backward).
 *
 * Same contract as rowsimd.c: the same exp (degree-7 Taylor polynomial,
 * clamp to [-88, 88], 2^k in the exponent field), sums with f32 lane
 * partials added into a double after at most 32 terms each (the plain
 * sums: blocks of 2048 over four 16-lane accumulators; the fused ones:
 * blocks of 512 over one or two), max/min that
 * skip NaN and report it. Tails are masked loads (a masked-off lane is
 * never read, so a row may end at the end of a mapping), filled with the
 * operation's identity. Results may differ from the AVX2 and portable sets
 * in the last bits (partial order, FMA), never beyond those bounds; each
 * set is deterministic on its own. */
#include "exec/kernels/rowwise.h"

#ifdef FC__RW_X86
#include <immintrin.h>

#define BLOCK 512
/* Blocks of the plain sums (SUM_BLOCKS): four accumulators of 16 lanes,
 * so each f32 lane partial still adds at most 32 terms. Measured in one
 * process against PyTorch's AVX-512 sum over the same 2^24 floats: 512
 * blocks with two accumulators ran 3% behind it, these 4% ahead (a block
 * ends in a horizontal sum into a double, and that cost was the gap). */
#define SUM_BLOCK 2048

/* Lanes [0, n) of a 16-lane vector, n in [0, 16]. */
FC__RW_AVX512 static inline __mmask16 head_mask(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

FC__RW_AVX512 static inline double hsum_d(__m512 v) {
    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
}

FC__RW_AVX512 static inline __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(88.0f), _mm512_max_ps(_mm512_set1_ps(-88.0f), x));
    __m512 kf =
        _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(12582912.0f));
    __m512 k = _mm512_sub_ps(kf, _mm512_set1_ps(12582912.0f));
    __m512i ki = _mm512_sub_epi32(_mm512_castps_si512(kf), _mm512_set1_epi32(0x4B400000));
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.428606765330187045e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(ki, _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

/* max(v, m) returns m when v is NaN, so NaN lanes are skipped; they are
 * counted in a mask instead. want_max picks max or min. */
FC__RW_AVX512 static inline float extremum(const float *x, int64_t n, bool *nan, bool want_max) {
    const __m512 id = _mm512_set1_ps(want_max ? -INFINITY : INFINITY);
    __m512 m0 = id, m1 = id, m2 = id, m3 = id;
    __mmask16 bad = 0;
    int64_t j = 0;
    for (; j + 64 <= n; j += 64) {
        __m512 v0 = _mm512_loadu_ps(x + j), v1 = _mm512_loadu_ps(x + j + 16);
        __m512 v2 = _mm512_loadu_ps(x + j + 32), v3 = _mm512_loadu_ps(x + j + 48);
        if (want_max) {
            m0 = _mm512_max_ps(v0, m0), m1 = _mm512_max_ps(v1, m1);
            m2 = _mm512_max_ps(v2, m2), m3 = _mm512_max_ps(v3, m3);
        } else {
            m0 = _mm512_min_ps(v0, m0), m1 = _mm512_min_ps(v1, m1);
            m2 = _mm512_min_ps(v2, m2), m3 = _mm512_min_ps(v3, m3);
        }
        bad |= _mm512_cmp_ps_mask(v0, v1, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v2, v3, _CMP_UNORD_Q);
    }
    for (; j < n; j += 16) {
        __mmask16 k = head_mask(n - j);
        __m512 v = _mm512_mask_loadu_ps(id, k, x + j);
        m0 = want_max ? _mm512_max_ps(v, m0) : _mm512_min_ps(v, m0);
        bad |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    }
    *nan = bad != 0;
    if (want_max)
        return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
    return _mm512_reduce_min_ps(_mm512_min_ps(_mm512_min_ps(m0, m1), _mm512_min_ps(m2, m3)));
}

FC__RW_AVX512 float fc__rw_max_avx512(const float *x, int64_t n, bool *nan) {
    return extremum(x, n, nan, true);
}

FC__RW_AVX512 float fc__rw_min_avx512(const float *x, int64_t n, bool *nan) {
    return extremum(x, n, nan, false);
}

/* The block loop every plain sum shares: BODY(acc, j, k) adds the 16 lanes
 * at j (k: their mask, all ones but in the last steps) into one of four
 * accumulators; the block's partials go into the double total. */
#define SUM_BLOCKS(n, BODY)                                                                        \
    double total = 0;                                                                              \
    for (int64_t i = 0; i < (n); i += SUM_BLOCK) {                                                 \
        int64_t end = (n)-i < SUM_BLOCK ? (n) : i + SUM_BLOCK, j = i;                              \
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                \
        for (; j + 64 <= end; j += 64) {                                                           \
            BODY(a0, j, (__mmask16)0xFFFF);                                                        \
            BODY(a1, j + 16, (__mmask16)0xFFFF);                                                   \
            BODY(a2, j + 32, (__mmask16)0xFFFF);                                                   \
            BODY(a3, j + 48, (__mmask16)0xFFFF);                                                   \
        }                                                                                          \
        for (; j < end; j += 16)                                                                   \
            BODY(a0, j, head_mask(end - j));                                                       \
        total += hsum_d(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));              \
    }

FC__RW_AVX512 double fc__rw_sum_avx512(const float *x, int64_t n) {
#define SUM_BODY(acc, j, k) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(k, x + (j)))
    SUM_BLOCKS(n, SUM_BODY)
#undef SUM_BODY
    return total;
}

/* 16 halves at x widened to f32 (exact either way); lanes outside the mask
 * k (a head mask) are +0, as a zero-masked load gives. A partial vector
 * goes through a zeroed copy: 16-bit masked loads would need AVX512BW. */
FC__RW_AVX512 static inline __m512 load_half16(const uint16_t *x, __mmask16 k, bool bf16) {
    __m256i h;
    if (k == (__mmask16)0xFFFF) {
        h = _mm256_loadu_si256((const __m256i *)(const void *)x);
    } else {
        uint16_t part[16] = {0};
        memcpy(part, x, sizeof(uint16_t) * (size_t)__builtin_popcount(k));
        h = _mm256_loadu_si256((const __m256i *)(const void *)part);
    }
    if (bf16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

/* fc__rw_sum_avx512 step for step, on values widened as they are loaded. */
FC__RW_AVX512 double fc__rw_sum_half_avx512(const uint16_t *x, int64_t n, bool bf16) {
#define HALF_BODY(acc, j, k) acc = _mm512_add_ps(acc, load_half16(x + (j), k, bf16))
    SUM_BLOCKS(n, HALF_BODY)
#undef HALF_BODY
    return total;
}

FC__RW_AVX512 double fc__rw_dot_avx512(const float *a, const float *b, int64_t n) {
#define DOT_BODY(acc, j, k)                                                                        \
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, a + (j)), _mm512_maskz_loadu_ps(k, b + (j)), acc)
    SUM_BLOCKS(n, DOT_BODY)
#undef DOT_BODY
    return total;
}

FC__RW_AVX512 double fc__rw_sumsq_dev_avx512(const float *x, int64_t n, float c) {
    const __m512 cv = _mm512_set1_ps(c);
    /* a masked-off lane is c - c = 0 */
#define SSQ_BODY(acc, j, k)                                                                        \
    do {                                                                                           \
        __m512 d_ = _mm512_sub_ps(_mm512_mask_loadu_ps(cv, k, x + (j)), cv);                       \
        acc = _mm512_fmadd_ps(d_, d_, acc);                                                        \
    } while (0)
    SUM_BLOCKS(n, SSQ_BODY)
#undef SSQ_BODY
    return total;
}

FC__RW_AVX512 void fc__rw_sum_sumsq_avx512(const float *x, int64_t n, float c, double *s1,
                                           double *s2) {
    const __m512 cv = _mm512_set1_ps(c);
    double t1 = 0, t2 = 0;
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t end = n - i < BLOCK ? n : i + BLOCK;
        __m512 a = _mm512_setzero_ps(), b = a;
        for (int64_t j = i; j < end; j += 16) {
            __m512 d = _mm512_sub_ps(_mm512_mask_loadu_ps(cv, head_mask(end - j), x + j), cv);
            a = _mm512_add_ps(a, d);
            b = _mm512_fmadd_ps(d, d, b);
        }
        t1 += hsum_d(a);
        t2 += hsum_d(b);
    }
    *s1 = t1;
    *s2 = t2;
}

FC__RW_AVX512 double fc__rw_exp_avx512(const float *x, float *y, int64_t n, float m) {
    const __m512 mv = _mm512_set1_ps(m);
    double total = 0;
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t end = n - i < BLOCK ? n : i + BLOCK, j = i;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0;
        for (; j + 32 <= end; j += 32) {
            __m512 e0 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + j), mv));
            __m512 e1 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + j + 16), mv));
            if (y) {
                _mm512_storeu_ps(y + j, e0);
                _mm512_storeu_ps(y + j + 16, e1);
            }
            a0 = _mm512_add_ps(a0, e0);
            a1 = _mm512_add_ps(a1, e1);
        }
        for (; j < end; j += 16) {
            __mmask16 k = head_mask(end - j);
            /* masked-off lanes are zeroed before the sum */
            __m512 e =
                _mm512_maskz_mov_ps(k, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), mv)));
            if (y) _mm512_mask_storeu_ps(y + j, k, e);
            a0 = _mm512_add_ps(a0, e);
        }
        total += hsum_d(_mm512_add_ps(a0, a1));
    }
    return total;
}

FC__RW_AVX512 void fc__rw_stream_scaled_avx512(float *dst, const float *src, int64_t n, float s) {
    const __m512 sv = _mm512_set1_ps(s);
    for (int64_t j = 0; j < n; j += 16)
        _mm512_stream_ps(dst + j, _mm512_mul_ps(_mm512_loadu_ps(src + j), sv));
}

void fc__rw_stream_fence(void) { _mm_sfence(); }

/* One rounding per element, as the plain kernels: the same bits. */
#define STREAM_BINARY(NAME, EXPR_V, EXPR_S)                                                        \
    FC__RW_AVX512 static void NAME(float *o, const float *a, const float *b, int64_t n) {          \
        int64_t j = 0;                                                                             \
        for (; j < n && (uintptr_t)(o + j) % 64 != 0; j++)                                         \
            o[j] = EXPR_S(a[j], b[j]);                                                             \
        for (; j + 16 <= n; j += 16)                                                               \
            _mm512_stream_ps(o + j, EXPR_V(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j)));       \
        for (; j < n; j++)                                                                         \
            o[j] = EXPR_S(a[j], b[j]);                                                             \
    }
#define S_ADD(x, y) ((x) + (y))
#define S_SUB(x, y) ((x) - (y))
#define S_MUL(x, y) ((x) * (y))
#define S_DIV(x, y) ((x) / (y))
STREAM_BINARY(stream_add, _mm512_add_ps, S_ADD)
STREAM_BINARY(stream_sub, _mm512_sub_ps, S_SUB)
STREAM_BINARY(stream_mul, _mm512_mul_ps, S_MUL)
STREAM_BINARY(stream_div, _mm512_div_ps, S_DIV)

const fc__rw_stream_fn fc__rw_stream_binary_avx512[4] = {stream_add, stream_sub, stream_mul,
                                                         stream_div};

FC__RW_AVX512 void fc__rw_norm_sums_avx512(const float *x, const float *g, const float *w,
                                           int64_t n, float mu, float rs, double *sa, double *sb) {
    const __m512 muv = _mm512_set1_ps(mu), rsv = _mm512_set1_ps(rs);
    double ta = 0, tb = 0;
    /* masked-off lanes: g = 0, so both terms are 0 */
#define NSUM_STEP(a, b, j, k)                                                                      \
    do {                                                                                           \
        __m512 gy_ =                                                                               \
            _mm512_mul_ps(_mm512_maskz_loadu_ps(k, g + (j)), _mm512_maskz_loadu_ps(k, w + (j)));   \
        __m512 xh_ =                                                                               \
            _mm512_mul_ps(_mm512_sub_ps(_mm512_mask_loadu_ps(muv, k, x + (j)), muv), rsv);         \
        a = _mm512_add_ps(a, gy_);                                                                 \
        b = _mm512_fmadd_ps(gy_, xh_, b);                                                          \
    } while (0)
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t end = n - i < BLOCK ? n : i + BLOCK, j = i;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
        for (; j + 32 <= end; j += 32) {
            NSUM_STEP(a0, b0, j, (__mmask16)0xFFFF);
            NSUM_STEP(a1, b1, j + 16, (__mmask16)0xFFFF);
        }
        for (; j < end; j += 16)
            NSUM_STEP(a0, b0, j, head_mask(end - j));
        ta += hsum_d(_mm512_add_ps(a0, a1));
        tb += hsum_d(_mm512_add_ps(b0, b1));
    }
#undef NSUM_STEP
    *sa = ta;
    *sb = tb;
}
#endif
