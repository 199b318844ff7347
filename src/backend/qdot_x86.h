/* SPDX-License-Identifier: MIT */
/* qdot_x86.h - the pieces of the canonical summation order (qdot.h) that
 * the AVX2 and AVX-512 kernels share: exact integer reductions, the scale
 * vectors of 8 blocks, and the 8-lane f32 sum in the portable kernels'
 * order. Included by qdot_avx2.c and qdot_avx512.c only; every helper is
 * always-inline with the AVX2 target, which the AVX-512 functions include.
 *
 * Why these exist: the SIMD kernels once kept partial f32 sums in whatever
 * lanes their registers offered (4 per q4_0 block on AVX2, 16 lanes on
 * AVX-512, FMA everywhere), so each ISA rounded differently. One ulp in an
 * output moves the next layer's activations, and the q8 quantization of
 * activations turns an ulp at a rounding half-step into a whole code step
 * (amax / 127: 0.04 on a row with an outlier of 5), which a trained
 * model's logits show as a 1e-3 to 1e-2 jump. Integer sums are exact in any
 * order, so the kernels reduce them exactly to the canonical lanes first
 * (one per block for q4_0 and q8_0; AVX-512's 16 k-quant lanes folded to
 * 8) and do only the portable kernels' f32 steps, in their order. */
#ifndef FUCINA_BACKEND_QDOT_X86_H
#define FUCINA_BACKEND_QDOT_X86_H

#include <immintrin.h>
#include <string.h>

#include "backend/qdot.h"

#define FC__X86_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

/* The canonical 8-lane sum (qdot.h): (a0 + a4 + a2 + a6) + (a1 + a5 + a3 + a7)
 * grouped as ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)). */
FC__X86_INLINE float fc__x86_sum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The canonical 4-lane sum (qdot.h): (a0 + a2) + (a1 + a3). */
FC__X86_INLINE float fc__x86_sum4(__m128 s) {
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Four registers p[j] of two blocks each (block 2j in lanes 0-3, block
 * 2j + 1 in lanes 4-7, as the q4_0 kernels make them) -> the 8 block sums
 * in block order. */
FC__X86_INLINE __m256i fc__x86_blocks8_of_pairs(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
    /* lanes come out as blocks 0 2 4 6 | 1 3 5 7 */
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    return _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Four registers of one block each (8 lanes, as the q8_0 kernels make them)
 * -> their 4 block sums in order; likewise four rows' super-block sums. */
FC__X86_INLINE __m128i fc__x86_blocks4_of_singles(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* The f16 scales of 8 blocks of `bytes` bytes from p, as f32 in block order
 * (inserted word by word: 8 narrow stores and a wide load would stall on
 * store forwarding). */
FC__X86_INLINE __m256 fc__x86_f16_scales8(const uint8_t *p, int bytes) {
    uint16_t h[8];
    for (int i = 0; i < 8; i++)
        memcpy(&h[i], p + bytes * i, 2);
    const __m128i v = _mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3],
                                     (short)h[4], (short)h[5], (short)h[6], (short)h[7]);
    return _mm256_cvtph_ps(v);
}

/* The 8-block group of the canonical order: acc + (dw * dx) * (float)s per
 * lane, multiplied and added as the portable kernels do (no FMA). */
FC__X86_INLINE __m256 fc__x86_group_add(__m256 acc, __m256 dw, __m256 dx, __m256i s) {
    return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(s)));
}

#endif /* FUCINA_BACKEND_QDOT_X86_H */
