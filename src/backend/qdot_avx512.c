/* SPDX-License-Identifier: MIT */
/* qdot_avx512.c - the quantized dot kernels for x86-64 with AVX-512 F, BW,
 * VL, DQ and VNNI (layouts and contracts in qdot.h).
 *
 * Same structure as qdot_avx2.c with 64-byte registers for the integer
 * work: q4_0 decodes a whole 4-block record per step and q8_0 a 2-block
 * record, and VNNI's vpdpbusd (u8 x s8, four products summed into i32 in
 * one instruction) or vpdpwssd (i16 x i16 -> i32, for the per-sub-block
 * scales of the k-quants) replaces the maddubs/madd pairs. The signed q8_0
 * weights go in as |w| with the activation's sign flipped under a mask,
 * which vpdpbusd's unsigned operand needs. The f32 steps are the portable
 * kernels' (qdot.h's canonical order), so they work on the 8 lanes of a
 * ymm register or on scalars, never on 16 lanes: the integer sums of 8
 * blocks (two q4_0 records, four q8_0 ones) are reduced exactly to 8 lanes
 * with the helpers of qdot_x86.h, and a k-quant super-block's to one
 * integer. nf4 and the f32 dot have no integer part to widen, so this
 * table uses the AVX2 kernels for them. Tails shorter than a group of 8
 * blocks use the scalar block helpers of qdot_portable.c. */
#include "backend/qdot.h"

#ifdef FC__QDOT_X86

#include <immintrin.h>
#include <string.h>

#include "backend/qdot_x86.h"

#define TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define TGT_INLINE                                                                                 \
    static inline __attribute__((always_inline,                                                    \
                                 target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,"  \
                                        "f16c")))

TGT_INLINE float f16_at(const uint8_t *p) {
    unsigned short h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

TGT_INLINE const void *row_at(const void *xq, size_t stride, int r) {
    return (const uint8_t *)xq + (size_t)r * stride;
}

/* ---- q4_0: groups of 8 blocks (two records) ----------------------------------------- */

/* Weight rows w[0..nw) against activation rows 0..nx: out[q][r], in the
 * canonical order (qdot.h, qdot_x86.h). A record's 16 lanes hold 4 per
 * block, so its halves are the AVX2 kernel's two-block registers. */
TGT_INLINE void q4_0_rows(int64_t k, const uint8_t *const *w, const int nw, const void *xq,
                          size_t stride, const int nx, float (*out)[FC__QDOT_MAX_ROWS]) {
    const int64_t nb = k / 32, ng = nb / 8;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m256 acc[2][FC__QDOT_MAX_ROWS];
    for (int q = 0; q < nw; q++)
        for (int r = 0; r < nx; r++)
            acc[q][r] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        __m512i p[2][FC__QDOT_MAX_ROWS][2];
        for (int e = 0; e < 2; e++) {
            __m512i lo[2], hi[2];
            for (int q = 0; q < nw; q++) {
                const uint8_t *b0 = w[q] + 72 * (2 * g + e);
                __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(b0 + 2)));
                v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(b0 + 20)), 1);
                v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(b0 + 38)), 2);
                v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(b0 + 56)), 3);
                lo[q] = _mm512_and_si512(v, m4);
                hi[q] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            }
            for (int r = 0; r < nx; r++) {
                const fc__xq_q4_0 *rec = (const fc__xq_q4_0 *)row_at(xq, stride, r) + 2 * g + e;
                const __m512i c = _mm512_load_si512(rec->c);
                const __m512i xa = _mm512_load_si512(rec->qs), xb = _mm512_load_si512(rec->qs + 64);
                for (int q = 0; q < nw; q++)
                    p[q][r][e] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(c, lo[q], xa), hi[q], xb);
            }
        }
        __m256 dw[2];
        for (int q = 0; q < nw; q++)
            dw[q] = fc__x86_f16_scales8(w[q] + 144 * g, 18);
        for (int r = 0; r < nx; r++) {
            const fc__xq_q4_0 *rec = (const fc__xq_q4_0 *)row_at(xq, stride, r) + 2 * g;
            const __m256 dx = _mm256_setr_ps(rec[0].d[0], rec[0].d[4], rec[0].d[8], rec[0].d[12],
                                             rec[1].d[0], rec[1].d[4], rec[1].d[8], rec[1].d[12]);
            for (int q = 0; q < nw; q++) {
                const __m256i s = fc__x86_blocks8_of_pairs(
                    _mm512_castsi512_si256(p[q][r][0]), _mm512_extracti64x4_epi64(p[q][r][0], 1),
                    _mm512_castsi512_si256(p[q][r][1]), _mm512_extracti64x4_epi64(p[q][r][1], 1));
                acc[q][r] = fc__x86_group_add(acc[q][r], dw[q], dx, s);
            }
        }
    }
    for (int q = 0; q < nw; q++) {
        for (int r = 0; r < nx; r++) {
            if (8 * ng < nb) { /* the last, partial group: +0 in the lanes past the end */
                float t[8] = {0};
                const fc__xq_q4_0 *rec = (const fc__xq_q4_0 *)row_at(xq, stride, r);
                for (int64_t b = 8 * ng; b < nb; b++) {
                    const fc__xq_q4_0 *x = rec + b / 4;
                    const int i = (int)(b % 4);
                    const int32_t s = fc__qdot_q4_0_block_int(w[q] + 18 * b, x, i);
                    t[b - 8 * ng] = f16_at(w[q] + 18 * b) * x->d[4 * i] * (float)s;
                }
                acc[q][r] = _mm256_add_ps(acc[q][r], _mm256_loadu_ps(t));
            }
            out[q][r] = fc__x86_sum8(acc[q][r]);
        }
    }
}

/* ---- q8_0: groups of 8 blocks (four records) ---------------------------------------- */

TGT_INLINE void q8_0_rows(int64_t k, const uint8_t *const *w, const int nw, const void *xq,
                          size_t stride, const int nx, float (*out)[FC__QDOT_MAX_ROWS]) {
    const int64_t nb = k / 32, ng = nb / 8;
    const __m512i zero = _mm512_setzero_si512();
    __m256 acc[2][FC__QDOT_MAX_ROWS];
    for (int q = 0; q < nw; q++)
        for (int r = 0; r < nx; r++)
            acc[q][r] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        __m128i s4[2][FC__QDOT_MAX_ROWS][2];
        for (int half = 0; half < 2; half++) {
            __m512i p[2][FC__QDOT_MAX_ROWS][2];
            for (int e = 0; e < 2; e++) {
                const int64_t rg = 4 * g + 2 * half + e; /* record index */
                __m512i av[2];
                __mmask64 neg[2];
                for (int q = 0; q < nw; q++) {
                    const uint8_t *b0 = w[q] + 68 * rg;
                    const __m512i v = _mm512_inserti64x4(
                        _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(b0 + 2))),
                        _mm256_loadu_si256((const __m256i *)(b0 + 36)), 1);
                    av[q] = _mm512_abs_epi8(v);
                    neg[q] = _mm512_movepi8_mask(v);
                }
                for (int r = 0; r < nx; r++) {
                    const fc__xq_q8_0 *rec = (const fc__xq_q8_0 *)row_at(xq, stride, r) + rg;
                    const __m512i x = _mm512_load_si512(rec->qs);
                    for (int q = 0; q < nw; q++) {
                        /* |w| * (x with w's sign): vpdpbusd wants the unsigned operand first */
                        const __m512i sx = _mm512_mask_sub_epi8(x, neg[q], zero, x);
                        p[q][r][e] = _mm512_dpbusd_epi32(zero, av[q], sx);
                    }
                }
            }
            for (int q = 0; q < nw; q++)
                for (int r = 0; r < nx; r++)
                    s4[q][r][half] =
                        fc__x86_blocks4_of_singles(_mm512_castsi512_si256(p[q][r][0]),
                                                   _mm512_extracti64x4_epi64(p[q][r][0], 1),
                                                   _mm512_castsi512_si256(p[q][r][1]),
                                                   _mm512_extracti64x4_epi64(p[q][r][1], 1));
        }
        __m256 dw[2];
        for (int q = 0; q < nw; q++)
            dw[q] = fc__x86_f16_scales8(w[q] + 272 * g, 34);
        for (int r = 0; r < nx; r++) {
            const fc__xq_q8_0 *rec = (const fc__xq_q8_0 *)row_at(xq, stride, r) + 4 * g;
            const __m256 dx = _mm256_setr_ps(rec[0].d[0], rec[0].d[8], rec[1].d[0], rec[1].d[8],
                                             rec[2].d[0], rec[2].d[8], rec[3].d[0], rec[3].d[8]);
            for (int q = 0; q < nw; q++) {
                const __m256i s = _mm256_set_m128i(s4[q][r][1], s4[q][r][0]);
                acc[q][r] = fc__x86_group_add(acc[q][r], dw[q], dx, s);
            }
        }
    }
    for (int q = 0; q < nw; q++) {
        for (int r = 0; r < nx; r++) {
            if (8 * ng < nb) {
                float t[8] = {0};
                const fc__xq_q8_0 *rec = (const fc__xq_q8_0 *)row_at(xq, stride, r);
                for (int64_t b = 8 * ng; b < nb; b++) {
                    const fc__xq_q8_0 *x = rec + b / 2;
                    const int i = (int)(b % 2);
                    const int32_t s = fc__qdot_q8_0_block_int(w[q] + 34 * b, x, i);
                    t[b - 8 * ng] = f16_at(w[q] + 34 * b) * x->d[8 * i] * (float)s;
                }
                acc[q][r] = _mm256_add_ps(acc[q][r], _mm256_loadu_ps(t));
            }
            out[q][r] = fc__x86_sum8(acc[q][r]);
        }
    }
}

/* ---- q4_k --------------------------------------------------------------------------- */

TGT_INLINE void k4_unpack(const uint8_t *q, uint64_t *sc, uint64_t *m) {
    uint32_t u0, u1, u2;
    memcpy(&u0, q, 4);
    memcpy(&u1, q + 4, 4);
    memcpy(&u2, q + 8, 4);
    const uint32_t s03 = u0 & 0x3f3f3f3fu, m03 = u1 & 0x3f3f3f3fu;
    const uint32_t s47 = (u2 & 0x0f0f0f0fu) | ((u0 >> 6) & 0x03030303u) << 4;
    const uint32_t m47 = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 6) & 0x03030303u) << 4;
    *sc = (uint64_t)s03 | (uint64_t)s47 << 32;
    *m = (uint64_t)m03 | (uint64_t)m47 << 32;
}

/* Word index vector: lanes 0..15 take word a, lanes 16..31 word b. */
TGT_INLINE __m512i pair_idx(short a, short b) {
    return _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(a), _mm512_set1_epi16(b));
}

TGT_INLINE void q4_k_rows(int64_t k, const uint8_t *w, const void *xq, size_t stride, const int nx,
                          float *out) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    /* the 64 codes of one register meet sub-blocks (0, 2), (1, 3), (4, 6), (5, 7) */
    const __m512i i02 = pair_idx(0, 2), i13 = pair_idx(1, 3);
    const __m512i i46 = pair_idx(4, 6), i57 = pair_idx(5, 7);
    __m256 acc[FC__QDOT_MAX_ROWS];
    __m128 accm[FC__QDOT_MAX_ROWS];
    for (int r = 0; r < nx; r++) {
        acc[r] = _mm256_setzero_ps();
        accm[r] = _mm_setzero_ps();
    }
    for (int64_t sb = 0; sb < k / 256; sb++) {
        const uint8_t *blk = w + 144 * sb, *qs = blk + 16;
        const float d = f16_at(blk), dmin = f16_at(blk + 2);
        uint64_t sc64, m64;
        k4_unpack(blk + 4, &sc64, &m64);
        const __m512i sc =
            _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc64)));
        const __m128i mv = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)m64));
        const __m512i s02 = _mm512_permutexvar_epi16(i02, sc),
                      s13 = _mm512_permutexvar_epi16(i13, sc);
        const __m512i s46 = _mm512_permutexvar_epi16(i46, sc),
                      s57 = _mm512_permutexvar_epi16(i57, sc);
        const __m512i v0 = _mm512_loadu_si512(qs), v1 = _mm512_loadu_si512(qs + 64);
        const __m512i lo0 = _mm512_and_si512(v0, m4);
        const __m512i hi0 = _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4);
        const __m512i lo1 = _mm512_and_si512(v1, m4);
        const __m512i hi1 = _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4);
        for (int r = 0; r < nx; r++) {
            const fc__xq_k *x = (const fc__xq_k *)row_at(xq, stride, r) + sb;
            __m512i p = _mm512_setzero_si512();
            p = _mm512_dpwssd_epi32(p, _mm512_maddubs_epi16(lo0, _mm512_load_si512(x->qs)), s02);
            p = _mm512_dpwssd_epi32(p, _mm512_maddubs_epi16(hi0, _mm512_load_si512(x->qs + 64)),
                                    s13);
            p = _mm512_dpwssd_epi32(p, _mm512_maddubs_epi16(lo1, _mm512_load_si512(x->qs + 128)),
                                    s46);
            p = _mm512_dpwssd_epi32(p, _mm512_maddubs_epi16(hi1, _mm512_load_si512(x->qs + 192)),
                                    s57);
            /* lanes L and L + 8 fold exactly into the canonical lane L (qdot.h) */
            const __m256i ip =
                _mm256_add_epi32(_mm512_castsi512_si256(p), _mm512_extracti64x4_epi64(p, 1));
            acc[r] = _mm256_add_ps(acc[r],
                                   _mm256_mul_ps(_mm256_cvtepi32_ps(ip), _mm256_set1_ps(d * x->d)));
            const __m128i pm = _mm_madd_epi16(mv, _mm_load_si128((const __m128i *)x->sums));
            accm[r] =
                _mm_add_ps(accm[r], _mm_mul_ps(_mm_cvtepi32_ps(pm), _mm_set1_ps(dmin * x->d)));
        }
    }
    for (int r = 0; r < nx; r++)
        out[r] = fc__x86_sum8(acc[r]) - fc__x86_sum4(accm[r]);
}

/* ---- q6_k --------------------------------------------------------------------------- */

/* Word index vector for 64 values starting at sub-block s (4 sub-blocks of 16,
 * 8 i16 pair lanes each). */
TGT_INLINE __m512i quad_idx(short s) {
    return _mm512_set_epi16(s + 3, s + 3, s + 3, s + 3, s + 3, s + 3, s + 3, s + 3, s + 2, s + 2,
                            s + 2, s + 2, s + 2, s + 2, s + 2, s + 2, s + 1, s + 1, s + 1, s + 1,
                            s + 1, s + 1, s + 1, s + 1, s, s, s, s, s, s, s, s);
}

TGT_INLINE void q6_k_rows(int64_t k, const uint8_t *w, const void *xq, size_t stride, const int nx,
                          float *out) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    /* qh bits for values 0..31 sit at bits 0-1, for 32..63 at 2-3, 64..95 at
     * 4-5, 96..127 at 6-7: shift each half of [qh | qh] to bits 4-5 */
    const __m512i sh_a =
        _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(4), _mm512_set1_epi16(2));
    const __m512i sh_b =
        _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_setzero_si512(), _mm512_set1_epi16(2));
    __m512i qidx[4];
    for (int t = 0; t < 4; t++)
        qidx[t] = quad_idx((short)(4 * t));
    __m256 acc[FC__QDOT_MAX_ROWS];
    for (int r = 0; r < nx; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < k / 256; sb++) {
        const uint8_t *blk = w + 210 * sb;
        const float d = f16_at(blk + 208);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
        const __m512i scz = _mm512_castsi256_si512(sc16);
        __m512i q[4], sv[4];
        for (int h = 0; h < 2; h++) {
            const __m512i l = _mm512_loadu_si512(blk + 64 * h);
            const __m512i hz =
                _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h)));
            const __m512i ha = _mm512_and_si512(_mm512_sllv_epi16(hz, sh_a), m30);
            const __m512i hb = _mm512_and_si512(_mm512_srlv_epi16(hz, sh_b), m30);
            q[2 * h] = _mm512_or_si512(_mm512_and_si512(l, m4), ha);
            q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), hb);
        }
        for (int t = 0; t < 4; t++)
            sv[t] = _mm512_permutexvar_epi16(qidx[t], scz);
        for (int r = 0; r < nx; r++) {
            const fc__xq_k *x = (const fc__xq_k *)row_at(xq, stride, r) + sb;
            /* -32 * sum_s sc[s] * (sum of the codes of sub-block s) */
            const __m256i c = _mm256_madd_epi16(sc16, _mm256_load_si256((const __m256i *)x->sums));
            __m512i p = _mm512_inserti64x4(
                _mm512_setzero_si512(),
                _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(c, 5)), 0);
            for (int t = 0; t < 4; t++)
                p = _mm512_dpwssd_epi32(
                    p, _mm512_maddubs_epi16(q[t], _mm512_load_si512(x->qs + 64 * t)), sv[t]);
            const __m256i ip =
                _mm256_add_epi32(_mm512_castsi512_si256(p), _mm512_extracti64x4_epi64(p, 1));
            acc[r] = _mm256_add_ps(acc[r],
                                   _mm256_mul_ps(_mm256_cvtepi32_ps(ip), _mm256_set1_ps(d * x->d)));
        }
    }
    for (int r = 0; r < nx; r++)
        out[r] = fc__x86_sum8(acc[r]);
}

/* ---- instantiation for 1..4 or 1..8 rows ------------------------------------------- */

/* One weight row: fn##_rows(k, w, xq, stride, nx, out) for nx = 1..4. */
#define FC__QDOT_INSTANCES(fn)                                                                     \
    static TGT void fn(int64_t k, const void *w, const void *xq, size_t stride, int nx,            \
                       float *out) {                                                               \
        switch (nx) {                                                                              \
        case 1:                                                                                    \
            fn##_rows(k, w, xq, stride, 1, out);                                                   \
            break;                                                                                 \
        case 2:                                                                                    \
            fn##_rows(k, w, xq, stride, 2, out);                                                   \
            break;                                                                                 \
        case 3:                                                                                    \
            fn##_rows(k, w, xq, stride, 3, out);                                                   \
            break;                                                                                 \
        default:                                                                                   \
            fn##_rows(k, w, xq, stride, 4, out);                                                   \
            break;                                                                                 \
        }                                                                                          \
    }

/* Bodies written for nw weight rows: the one-row and two-row entries, for
 * 1..4 activation rows or (ROW_CASES_8) 1..8. */
#define ROW_CASE(fn, nw, nx)                                                                       \
    case (nw)*16 + (nx):                                                                           \
        fn##_rows(k, w, nw, xq, stride, nx, out);                                                  \
        break;
#define ROW_CASES_4(fn, nw)                                                                        \
    ROW_CASE(fn, nw, 1) ROW_CASE(fn, nw, 2) ROW_CASE(fn, nw, 3) ROW_CASE(fn, nw, 4)
#define ROW_CASES_8(fn, nw)                                                                        \
    ROW_CASES_4(fn, nw)                                                                            \
    ROW_CASE(fn, nw, 5) ROW_CASE(fn, nw, 6) ROW_CASE(fn, nw, 7) ROW_CASE(fn, nw, 8)
#define FC__QDOT_INSTANCES_NW(fn, cases)                                                           \
    static TGT void fn##_nw(const uint8_t *const *w, int nw, int64_t k, const void *xq,            \
                            size_t stride, int nx, float(*out)[FC__QDOT_MAX_ROWS]) {               \
        switch (nw * 16 + nx) { /* the table's rows[] bound nx: no other case comes */             \
            cases(fn, 1) cases(fn, 2) default : break;                                             \
        }                                                                                          \
    }                                                                                              \
    static TGT void fn(int64_t k, const void *w, const void *xq, size_t stride, int nx,            \
                       float *out) {                                                               \
        const uint8_t *ws[1] = {w};                                                                \
        float o[1][FC__QDOT_MAX_ROWS];                                                             \
        fn##_nw(ws, 1, k, xq, stride, nx, o);                                                      \
        memcpy(out, o[0], sizeof(float) * (size_t)nx);                                             \
    }                                                                                              \
    static TGT void fn##_2(int64_t k, const void *w0, const void *w1, const void *xq,              \
                           size_t stride, int nx, float *out0, float *out1) {                      \
        const uint8_t *ws[2] = {w0, w1};                                                           \
        float o[2][FC__QDOT_MAX_ROWS];                                                             \
        fn##_nw(ws, 2, k, xq, stride, nx, o);                                                      \
        memcpy(out0, o[0], sizeof(float) * (size_t)nx);                                            \
        memcpy(out1, o[1], sizeof(float) * (size_t)nx);                                            \
    }

/* q4_0 and q8_0 keep 2 x 8 sums in 16 of the 32 vector registers */
FC__QDOT_INSTANCES_NW(q4_0, ROW_CASES_8)
FC__QDOT_INSTANCES_NW(q8_0, ROW_CASES_8)
FC__QDOT_INSTANCES(q4_k)
FC__QDOT_INSTANCES(q6_k)

const fc__qdot_kernels fc__qdot_avx512 = {
    .name = "avx512",
    .dot = {[FC__QK_Q4_0] = q4_0,
            [FC__QK_Q8_0] = q8_0,
            [FC__QK_Q4_K] = q4_k,
            [FC__QK_Q6_K] = q6_k,
            [FC__QK_NF4] = fc__qdot_nf4_avx2},
    .dot2 = {[FC__QK_Q4_0] = q4_0_2, [FC__QK_Q8_0] = q8_0_2},
    .rows = {[FC__QK_Q4_0] = 8,
             [FC__QK_Q8_0] = 8,
             [FC__QK_Q4_K] = 4,
             [FC__QK_Q6_K] = 4,
             [FC__QK_NF4] = 4},
    .dot_f32 = fc__dot_f32_avx2,
    .q8_32 = fc__q8_32_avx2, /* AVX2 suffices: packing is a small part of the work */
    .q8_256 = fc__q8_256_avx2,
};

#else
typedef int fc__qdot_avx512_unused; /* ISO C wants a declaration in every file */
#endif
