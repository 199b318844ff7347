/* SPDX-License-Identifier: MIT */
/* convert_x86.c - f16/bf16 <-> f32 rows with F16C + AVX2 and with AVX-512.
 *
 * Each function carries its own target attribute, so the file builds with the
 * default flags and the library still runs on any x86-64; convert_row.c calls
 * these only after fc__half_rows_avx2 / fc__half_rows_avx512 have seen the
 * features at run time. Tails shorter than a vector go to the portable loops.
 *
 * Every path gives the portable bits for every input:
 *  - f16 -> f32 (vcvtph2ps) is exact and quiets a signalling NaN by setting
 *    the f32 quiet bit with the payload kept, which is what fc_f16_to_f32 does
 *    (the test checks all 65536 patterns).
 *  - f32 -> f16 (vcvtps2ph, round to nearest even) keeps the top NaN payload
 *    bits, where fc_f32_to_f16 gives sign | 0x7e00; NaN lanes are replaced by
 *    sign | 0x7fc00000 first, which the hardware turns into exactly that.
 *    Denormal f32 inputs round to +-0 either way, so MXCSR.DAZ cannot matter.
 *  - bf16 is integer work only: widening is a shift, narrowing the same
 *    rounding as fc_f32_to_bf16 ((x + 0x7fff + lsb) >> 16, NaN -> (x >> 16) |
 *    0x40). AVX512_BF16's vcvtneps2bf16 is not used: it flushes denormals. */
#include "core/convert.h"

#if defined(__x86_64__)

#include <immintrin.h>

#define AVX2_TARGET __attribute__((target("avx2,f16c")))
#define AVX512_TARGET __attribute__((target("avx512f,avx512bw")))

/* ---- F16C + AVX2: 8 lanes (16 for bf16 narrowing) ------------------------ */

AVX2_TARGET static void f16_to_f32_avx2(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    fc__f16_to_f32_row_portable(src + i, dst + i, n - i);
}

AVX2_TARGET static void f32_to_f16_avx2(const float *src, uint16_t *dst, size_t n) {
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    const __m256 qnan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(src + i);
        __m256 is_nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
        x = _mm256_blendv_ps(x, _mm256_or_ps(_mm256_and_ps(x, sign), qnan), is_nan);
        __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(dst + i), h);
    }
    fc__f32_to_f16_row_portable(src + i, dst + i, n - i);
}

AVX2_TARGET static void bf16_to_f32_avx2(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_slli_epi32(w, 16));
    }
    fc__bf16_to_f32_row_portable(src + i, dst + i, n - i);
}

/* 8 f32 bit patterns -> 8 bf16 values, each in the low half of its lane. */
AVX2_TARGET static inline __m256i bf16_round8(__m256i x) {
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i bias = _mm256_set1_epi32(0x7fff);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, bias), lsb), 16);
    __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    __m256i abs = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    __m256i is_nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    return _mm256_blendv_epi8(rounded, quiet, is_nan);
}

AVX2_TARGET static void f32_to_bf16_avx2(const float *src, uint16_t *dst, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = bf16_round8(_mm256_loadu_si256((const __m256i *)(src + i)));
        __m256i b = bf16_round8(_mm256_loadu_si256((const __m256i *)(src + i + 8)));
        /* every lane is <= 0xffff, so the unsigned saturating pack is exact;
         * it interleaves the 128-bit halves, which the permute undoes */
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
        _mm256_storeu_si256((__m256i *)(dst + i), packed);
    }
    fc__f32_to_bf16_row_portable(src + i, dst + i, n - i);
}

/* ---- AVX-512: 16 lanes ---------------------------------------------------- */

AVX512_TARGET static void f16_to_f32_avx512(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(src + i));
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(h));
    }
    fc__f16_to_f32_row_portable(src + i, dst + i, n - i);
}

AVX512_TARGET static void f32_to_f16_avx512(const float *src, uint16_t *dst, size_t n) {
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    const __m512i qnan = _mm512_set1_epi32(0x7fc00000);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(src + i);
        __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
        __m512i canon = _mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(x), sign), qnan);
        x = _mm512_mask_mov_ps(x, is_nan, _mm512_castsi512_ps(canon));
        __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_si256((__m256i *)(dst + i), h);
    }
    fc__f32_to_f16_row_portable(src + i, dst + i, n - i);
}

AVX512_TARGET static void bf16_to_f32_avx512(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i)));
        _mm512_storeu_si512((void *)(dst + i), _mm512_slli_epi32(w, 16));
    }
    fc__bf16_to_f32_row_portable(src + i, dst + i, n - i);
}

AVX512_TARGET static void f32_to_bf16_avx512(const float *src, uint16_t *dst, size_t n) {
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i bias = _mm512_set1_epi32(0x7fff);
    const __m512i quiet_bit = _mm512_set1_epi32(0x40);
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
    const __m512i inf = _mm512_set1_epi32(0x7f800000);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i x = _mm512_loadu_si512((const void *)(src + i));
        __m512i hi = _mm512_srli_epi32(x, 16);
        __m512i lsb = _mm512_and_si512(hi, one);
        __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, bias), lsb), 16);
        __mmask16 is_nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, abs_mask), inf);
        __m512i r = _mm512_mask_mov_epi32(rounded, is_nan, _mm512_or_si512(hi, quiet_bit));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtepi32_epi16(r));
    }
    fc__f32_to_bf16_row_portable(src + i, dst + i, n - i);
}

/* ---- the tables (convert_row.c checks the level first) ---------------------- */

static const fc__half_rows avx2_rows = {
    "avx2-f16c", f16_to_f32_avx2, f32_to_f16_avx2, bf16_to_f32_avx2, f32_to_bf16_avx2,
};
static const fc__half_rows avx512_rows = {
    "avx512", f16_to_f32_avx512, f32_to_f16_avx512, bf16_to_f32_avx512, f32_to_bf16_avx512,
};

const fc__half_rows *fc__half_rows_avx2(void) { return &avx2_rows; }

const fc__half_rows *fc__half_rows_avx512(void) { return &avx512_rows; }

#else
/* Not x86-64: convert_row.c uses the portable loops only. (A translation
 * unit must declare something.) */
typedef int fc__convert_x86_unused;
#endif
