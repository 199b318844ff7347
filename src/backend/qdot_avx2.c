/* SPDX-License-Identifier: MIT */
/* qdot_avx2.c - the quantized dot kernels for x86-64 with AVX2, FMA and
 * F16C, and their AVX-VNNI twins (layouts and contracts in qdot.h).
 *
 * Every function carries its own target attribute, so this file builds
 * without -mavx2 and runs only after qmatmul.c has seen the CPU features.
 * Each kernel is one always-inline body instantiated for 1..4 activation
 * rows (and, for q4_0 and q8_0, one or two weight rows: the dot2 entries):
 * a weight block is decoded once into registers and multiplied with every
 * row. Integer products go through maddubs (u8 x s8 -> i16 pairs; the
 * operands are bounded so no pair saturates: 2*15*127, 2*63*127, 2*128*127
 * are all below 32767) and madd (i16 pairs -> i32); per-block sums become
 * f32 only when the block scale multiplies them. The bodies take a constant
 * vnni flag: fc__qdot_avxvnni is the same code with vpdpbusd / vpdpwssd in
 * place of maddubs + madd + add, summing the same integers, so both tables
 * give the same bits.
 *
 * Every kernel gives the portable kernel's bits (the canonical order of
 * qdot.h): integer sums are reduced exactly to one per block (q4_0, q8_0:
 * 8 blocks to the 8 lanes of one register) or per super-block (q4_k, q6_k:
 * to a scalar), and only then meet the f32 scales, multiplied and added
 * without FMA in the portable order. nf4 and the f32 dot keep the lanes
 * the portable kernels emulate. */
#include "backend/qdot.h"

#ifdef FC__QDOT_X86

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backend/qdot_x86.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define TGT_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

TGT_INLINE float f16_at(const uint8_t *p) {
    unsigned short h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

TGT_INLINE const void *row_at(const void *xq, size_t stride, int r) {
    return (const uint8_t *)xq + (size_t)r * stride;
}

/* AVX-VNNI (256-bit, VEX-encoded): acc + the sums of each 4 adjacent u8 x s8
 * products, and of each 2 adjacent s16 x s16 products. Every kernel body
 * takes a constant vnni flag; its AVX-VNNI instantiation (fc__qdot_avxvnni)
 * replaces maddubs + madd + add with these, which give the same integers
 * because no i16 pair of the kernels' operands saturates. Inline asm, so the
 * plain instantiations (where the branch is dead) need no avxvnni target and
 * the build no assembler-level switch. */
TGT_INLINE __m256i vnni_dpbusd(__m256i acc, __m256i u8, __m256i s8) {
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u8), "x"(s8));
    return acc;
}

TGT_INLINE __m256i vnni_dpwssd(__m256i acc, __m256i a, __m256i b) {
    __asm__("%{vex%} vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
    return acc;
}

/* ---- activation block quantizers ---------------------------------------------------- */

/* 32 i32 codes (4 registers, each in [-127, 127]) -> 32 i8 in order. */
TGT_INLINE void store_codes32(int8_t *q, __m256i c0, __m256i c1, __m256i c2, __m256i c3) {
    /* packs works per 128-bit lane: dwords come out as 0 4 1 5 2 6 3 7 */
    const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(c0, c1), _mm256_packs_epi32(c2, c3));
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    _mm256_storeu_si256((__m256i *)q, _mm256_permutevar8x32_epi32(b, order));
}

TGT_INLINE float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* |v|, and whether any lane is NaN or infinite (!(|v| <= FLT_MAX)). */
TGT_INLINE __m256 abs_check(__m256 v, __m256 *bad) {
    const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
    *bad = _mm256_or_ps(*bad, _mm256_cmp_ps(a, _mm256_set1_ps(FLT_MAX), _CMP_NLE_UQ));
    return a;
}

TGT float fc__q8_32_avx2(const float *x, int8_t *q) {
    __m256 v[4], bad = _mm256_setzero_ps(), mx = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_loadu_ps(x + 8 * i);
        mx = _mm256_max_ps(mx, abs_check(v[i], &bad));
    }
    if (_mm256_movemask_ps(bad)) {
        memset(q, 0, 32);
        return NAN;
    }
    const float d = hmax(mx) / 127.0f;
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    if (!(id <= FLT_MAX)) {
        memset(q, 0, 32);
        return 0.0f;
    }
    const __m256 vid = _mm256_set1_ps(id);
    __m256i c[4];
    for (int i = 0; i < 4; i++) /* half to even, |x * id| <= 127 */
        c[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], vid));
    store_codes32(q, c[0], c[1], c[2], c[3]);
    return d;
}

TGT float fc__q8_256_avx2(const float *x, int8_t *q) {
    __m256 bad = _mm256_setzero_ps(), mx = _mm256_setzero_ps();
    for (int i = 0; i < 32; i++)
        mx = _mm256_max_ps(mx, abs_check(_mm256_loadu_ps(x + 8 * i), &bad));
    const float amax = hmax(mx);
    if (_mm256_movemask_ps(bad) || amax == 0.0f) {
        memset(q, 0, 256);
        return _mm256_movemask_ps(bad) ? NAN : 0.0f;
    }
    /* the first value of largest magnitude, with its sign */
    float max = 0.0f;
    const __m256 va = _mm256_set1_ps(amax), sign = _mm256_set1_ps(-0.0f);
    for (int i = 0; i < 32; i++) {
        const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i));
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(a, va, _CMP_EQ_OQ));
        if (hit) {
            max = x[8 * i + __builtin_ctz((unsigned)hit)];
            break;
        }
    }
    const float iscale = -127.0f / max;
    if (!(fabsf(iscale) <= FLT_MAX)) {
        memset(q, 0, 256);
        return 0.0f;
    }
    const __m256 vs = _mm256_set1_ps(iscale);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    for (int g = 0; g < 8; g++) {
        __m256i c[4];
        for (int i = 0; i < 4; i++) {
            const __m256i t =
                _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * g + 8 * i), vs));
            c[i] = _mm256_max_epi32(lo, _mm256_min_epi32(hi, t));
        }
        store_codes32(q + 32 * g, c[0], c[1], c[2], c[3]);
    }
    return 1.0f / iscale;
}

/* ---- q4_0: groups of 8 blocks, two a step ------------------------------------------- */

/* Weight rows w[0..nw) against activation rows 0..nx: out[q][r], in the
 * canonical order (qdot.h): the integer sums of 8 blocks reduced to one
 * lane each, then (dw * dx) * s added per lane. */
TGT_INLINE void q4_0_rows(int64_t k, const uint8_t *const *w, const int nw, const void *xq,
                          size_t stride, const int nx, float (*out)[FC__QDOT_MAX_ROWS],
                          const int vnni) {
    const int64_t nb = k / 32, ng = nb / 8;
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    __m256 acc[2][FC__QDOT_MAX_ROWS];
    for (int q = 0; q < nw; q++)
        for (int r = 0; r < nx; r++)
            acc[q][r] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        __m256i p[2][FC__QDOT_MAX_ROWS][4];
        for (int j = 0; j < 4; j++) {
            const int64_t b = 8 * g + 2 * j;
            __m256i lo[2], hi[2];
            for (int q = 0; q < nw; q++) {
                const uint8_t *b0 = w[q] + 18 * b;
                const __m256i v = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(b0 + 20)),
                                                   _mm_loadu_si128((const __m128i *)(b0 + 2)));
                lo[q] = _mm256_and_si256(v, m4);
                hi[q] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            }
            const int h = j % 2;
            for (int r = 0; r < nx; r++) {
                const fc__xq_q4_0 *rec = (const fc__xq_q4_0 *)row_at(xq, stride, r) + b / 4;
                const __m256i xa = _mm256_load_si256((const __m256i *)(rec->qs + 32 * h));
                const __m256i xb = _mm256_load_si256((const __m256i *)(rec->qs + 64 + 32 * h));
                const __m256i c = _mm256_load_si256((const __m256i *)(rec->c + 8 * h));
                for (int q = 0; q < nw; q++) {
                    if (vnni) {
                        p[q][r][j] = vnni_dpbusd(vnni_dpbusd(c, lo[q], xa), hi[q], xb);
                    } else {
                        const __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo[q], xa),
                                                             _mm256_maddubs_epi16(hi[q], xb));
                        p[q][r][j] = _mm256_add_epi32(_mm256_madd_epi16(p16, ones), c);
                    }
                }
            }
        }
        __m256 dw[2];
        for (int q = 0; q < nw; q++)
            dw[q] = fc__x86_f16_scales8(w[q] + 18 * 8 * g, 18);
        for (int r = 0; r < nx; r++) {
            const fc__xq_q4_0 *rec = (const fc__xq_q4_0 *)row_at(xq, stride, r) + 2 * g;
            const __m256 dx = _mm256_setr_ps(rec[0].d[0], rec[0].d[4], rec[0].d[8], rec[0].d[12],
                                             rec[1].d[0], rec[1].d[4], rec[1].d[8], rec[1].d[12]);
            for (int q = 0; q < nw; q++) {
                const __m256i s =
                    fc__x86_blocks8_of_pairs(p[q][r][0], p[q][r][1], p[q][r][2], p[q][r][3]);
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

/* ---- q8_0: groups of 8 blocks, one a step ------------------------------------------- */

TGT_INLINE void q8_0_rows(int64_t k, const uint8_t *const *w, const int nw, const void *xq,
                          size_t stride, const int nx, float (*out)[FC__QDOT_MAX_ROWS],
                          const int vnni) {
    const int64_t nb = k / 32, ng = nb / 8;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[2][FC__QDOT_MAX_ROWS];
    for (int q = 0; q < nw; q++)
        for (int r = 0; r < nx; r++)
            acc[q][r] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        __m128i s4[2][FC__QDOT_MAX_ROWS][2];
        for (int half = 0; half < 2; half++) {
            __m256i p[2][FC__QDOT_MAX_ROWS][4];
            for (int j = 0; j < 4; j++) {
                const int64_t b = 8 * g + 4 * half + j;
                __m256i v[2], av[2];
                for (int q = 0; q < nw; q++) {
                    v[q] = _mm256_loadu_si256((const __m256i *)(w[q] + 34 * b + 2));
                    av[q] = _mm256_abs_epi8(v[q]);
                }
                for (int r = 0; r < nx; r++) {
                    const fc__xq_q8_0 *rec = (const fc__xq_q8_0 *)row_at(xq, stride, r) + b / 2;
                    const __m256i x = _mm256_load_si256((const __m256i *)(rec->qs + 32 * (b % 2)));
                    for (int q = 0; q < nw; q++) {
                        /* |w| * (x with w's sign): u8 x s8 as maddubs needs it */
                        const __m256i sx = _mm256_sign_epi8(x, v[q]);
                        p[q][r][j] = vnni
                                         ? vnni_dpbusd(_mm256_setzero_si256(), av[q], sx)
                                         : _mm256_madd_epi16(_mm256_maddubs_epi16(av[q], sx), ones);
                    }
                }
            }
            for (int q = 0; q < nw; q++)
                for (int r = 0; r < nx; r++)
                    s4[q][r][half] =
                        fc__x86_blocks4_of_singles(p[q][r][0], p[q][r][1], p[q][r][2], p[q][r][3]);
        }
        __m256 dw[2];
        for (int q = 0; q < nw; q++)
            dw[q] = fc__x86_f16_scales8(w[q] + 34 * 8 * g, 34);
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

/* The 8 six-bit scales (sc) and mins (m) of a q4_K super-block, one byte each. */
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

/* Byte offset of natural sub-block s (0..7) in a q4_k packed record. */
static const int q4k_off[8] = {0, 64, 32, 96, 128, 192, 160, 224};

TGT_INLINE void q4_k_rows(int64_t k, const uint8_t *w, const void *xq, size_t stride, const int nx,
                          float *out, const int vnni) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
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
        /* the 8 scales as words in both 128-bit lanes; pshufb broadcasts one */
        const __m256i sc16 =
            _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc64)));
        const __m128i mv = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)m64));
        __m256i ip[FC__QDOT_MAX_ROWS];
        for (int r = 0; r < nx; r++)
            ip[r] = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
            const __m256i lo = _mm256_and_si256(v, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            const __m256i slo =
                _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0100 * (4 * j + 1) + 4 * j)));
            const __m256i shi = _mm256_shuffle_epi8(
                sc16, _mm256_set1_epi16((short)(0x0100 * (4 * j + 3) + 4 * j + 2)));
            for (int r = 0; r < nx; r++) {
                const fc__xq_k *x = (const fc__xq_k *)row_at(xq, stride, r) + sb;
                const __m256i xl = _mm256_load_si256((const __m256i *)(x->qs + q4k_off[2 * j]));
                const __m256i xh = _mm256_load_si256((const __m256i *)(x->qs + q4k_off[2 * j + 1]));
                const __m256i ml = _mm256_maddubs_epi16(lo, xl), mh = _mm256_maddubs_epi16(hi, xh);
                if (vnni) {
                    ip[r] = vnni_dpwssd(vnni_dpwssd(ip[r], ml, slo), mh, shi);
                } else {
                    const __m256i pl = _mm256_madd_epi16(ml, slo), ph = _mm256_madd_epi16(mh, shi);
                    ip[r] = _mm256_add_epi32(ip[r], _mm256_add_epi32(pl, ph));
                }
            }
        }
        for (int r = 0; r < nx; r++) {
            /* the canonical lanes (qdot.h), multiplied and added without FMA */
            const fc__xq_k *x = (const fc__xq_k *)row_at(xq, stride, r) + sb;
            acc[r] = _mm256_add_ps(
                acc[r], _mm256_mul_ps(_mm256_cvtepi32_ps(ip[r]), _mm256_set1_ps(d * x->d)));
            const __m128i pm = _mm_madd_epi16(mv, _mm_load_si128((const __m128i *)x->sums));
            accm[r] =
                _mm_add_ps(accm[r], _mm_mul_ps(_mm_cvtepi32_ps(pm), _mm_set1_ps(dmin * x->d)));
        }
    }
    for (int r = 0; r < nx; r++)
        out[r] = fc__x86_sum8(acc[r]) - fc__x86_sum4(accm[r]);
}

TGT_INLINE void q6_k_rows(int64_t k, const uint8_t *w, const void *xq, size_t stride, const int nx,
                          float *out, const int vnni) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    __m256 acc[FC__QDOT_MAX_ROWS];
    for (int r = 0; r < nx; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < k / 256; sb++) {
        const uint8_t *blk = w + 210 * sb;
        const int8_t *sc = (const int8_t *)(blk + 192);
        const float d = f16_at(blk + 208);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
        /* scales 8h .. 8h + 7 as words in both 128-bit lanes */
        const __m256i sch[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00),
                                _mm256_permute2x128_si256(sc16, sc16, 0x11)};
        __m256i ip[FC__QDOT_MAX_ROWS];
        for (int r = 0; r < nx; r++) {
            /* -32 * sum_s sc[s] * (sum of the codes of sub-block s) */
            const fc__xq_k *x = (const fc__xq_k *)row_at(xq, stride, r) + sb;
            const __m256i c = _mm256_madd_epi16(sc16, _mm256_load_si256((const __m256i *)x->sums));
            ip[r] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(c, 5));
        }
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = blk + 64 * h, *qh = blk + 128 + 32 * h;
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i hb = _mm256_loadu_si256((const __m256i *)qh);
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                   _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                   _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_and_si256(hb, m30));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
            for (int t = 0; t < 4; t++) {
                const int s = 8 * h + 2 * t; /* sub-blocks s, s + 1 of 16 values */
                /* word s of sch in the low lane, word s + 1 in the high one */
                const char a = (char)(4 * t), b = (char)(4 * t + 2);
                const __m256i scv = _mm256_shuffle_epi8(
                    sch[h],
                    _mm256_setr_epi8(a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a,
                                     a + 1, a, a + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b,
                                     b + 1, b, b + 1, b, b + 1, b, b + 1));
                for (int r = 0; r < nx; r++) {
                    const fc__xq_k *x = (const fc__xq_k *)row_at(xq, stride, r) + sb;
                    const __m256i xv = _mm256_load_si256((const __m256i *)(x->qs + 16 * s));
                    const __m256i m = _mm256_maddubs_epi16(q[t], xv);
                    ip[r] = vnni ? vnni_dpwssd(ip[r], m, scv)
                                 : _mm256_add_epi32(ip[r], _mm256_madd_epi16(m, scv));
                }
            }
        }
        for (int r = 0; r < nx; r++) {
            const fc__xq_k *x = (const fc__xq_k *)row_at(xq, stride, r) + sb;
            acc[r] = _mm256_add_ps(
                acc[r], _mm256_mul_ps(_mm256_cvtepi32_ps(ip[r]), _mm256_set1_ps(d * x->d)));
        }
    }
    for (int r = 0; r < nx; r++)
        out[r] = fc__x86_sum8(acc[r]);
}

/* ---- nf4: f32 levels looked up in registers ----------------------------------------- */

/* lut[i & 15] for 8 indices (bits above 3 ignored). */
TGT_INLINE __m256 lookup16(__m256 lut_lo, __m256 lut_hi, __m256i i) {
    const __m256 a = _mm256_permutevar8x32_ps(lut_lo, i);
    const __m256 b = _mm256_permutevar8x32_ps(lut_hi, i);
    return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_slli_epi32(i, 28)));
}

TGT_INLINE void nf4_rows(int64_t k, const uint8_t *w, const void *xq, size_t stride, const int nx,
                         float *out) {
    float base[16];
    fc__qdot_nf4_lut(1.0f, base);
    const __m256 b_lo = _mm256_loadu_ps(base), b_hi = _mm256_loadu_ps(base + 8);
    __m256 acc[FC__QDOT_MAX_ROWS][2];
    for (int r = 0; r < nx; r++)
        acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / 64; b++) {
        const uint8_t *blk = w + 34 * b;
        const __m256 d = _mm256_set1_ps(f16_at(blk));
        const __m256 lut_lo = _mm256_mul_ps(b_lo, d), lut_hi = _mm256_mul_ps(b_hi, d);
        for (int q = 0; q < 4; q++) {
            /* code bytes 8q..8q+7: even values at 16(q/2) + 8(q%2) of the 32-group, odd +16 */
            const __m256i idx =
                _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 2 + 8 * q)));
            const __m256 ve = lookup16(lut_lo, lut_hi, idx);
            const __m256 vo = lookup16(lut_lo, lut_hi, _mm256_srli_epi32(idx, 4));
            const int off = 64 * (int)b + 32 * (q / 2) + 8 * (q % 2);
            for (int r = 0; r < nx; r++) {
                const float *x = (const float *)row_at(xq, stride, r) + off;
                acc[r][0] = _mm256_add_ps(acc[r][0], _mm256_mul_ps(ve, _mm256_loadu_ps(x)));
                acc[r][1] = _mm256_add_ps(acc[r][1], _mm256_mul_ps(vo, _mm256_loadu_ps(x + 16)));
            }
        }
    }
    for (int r = 0; r < nx; r++)
        out[r] = fc__x86_sum8(_mm256_add_ps(acc[r][0], acc[r][1]));
}

/* ---- generic path: f32 dot ---------------------------------------------------------- */

TGT_INLINE void f32_rows(int64_t n, const float *w, const float *x, int64_t ldx, const int nx,
                         float *out) {
    __m256 acc[FC__QDOT_MAX_ROWS][2];
    for (int r = 0; r < nx; r++)
        acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 w0 = _mm256_loadu_ps(w + i), w1 = _mm256_loadu_ps(w + i + 8);
        for (int r = 0; r < nx; r++) {
            const float *xr = x + r * ldx + i;
            acc[r][0] = _mm256_add_ps(acc[r][0], _mm256_mul_ps(w0, _mm256_loadu_ps(xr)));
            acc[r][1] = _mm256_add_ps(acc[r][1], _mm256_mul_ps(w1, _mm256_loadu_ps(xr + 8)));
        }
    }
    for (int r = 0; r < nx; r++) {
        float t = fc__x86_sum8(_mm256_add_ps(acc[r][0], acc[r][1]));
        for (int64_t j = i; j < n; j++)
            t += w[j] * x[r * ldx + j];
        out[r] = t;
    }
}

/* ---- instantiation for 1..4 rows ---------------------------------------------------- */

#define FC__QDOT_INSTANCES(fn, wtype)                                                              \
    static TGT void fn(int64_t k, const void *w, const void *xq, size_t stride, int nx,            \
                       float *out) {                                                               \
        switch (nx) {                                                                              \
        case 1:                                                                                    \
            fn##_rows(k, (wtype)w, xq, stride, 1, out);                                            \
            break;                                                                                 \
        case 2:                                                                                    \
            fn##_rows(k, (wtype)w, xq, stride, 2, out);                                            \
            break;                                                                                 \
        case 3:                                                                                    \
            fn##_rows(k, (wtype)w, xq, stride, 3, out);                                            \
            break;                                                                                 \
        default:                                                                                   \
            fn##_rows(k, (wtype)w, xq, stride, 4, out);                                            \
            break;                                                                                 \
        }                                                                                          \
    }

/* The k-quant bodies, one weight row, with or without AVX-VNNI. */
#define FC__QDOT_INSTANCES_V(name, fn, vnni)                                                       \
    static TGT void name(int64_t k, const void *w, const void *xq, size_t stride, int nx,          \
                         float *out) {                                                             \
        switch (nx) {                                                                              \
        case 1:                                                                                    \
            fn##_rows(k, w, xq, stride, 1, out, vnni);                                             \
            break;                                                                                 \
        case 2:                                                                                    \
            fn##_rows(k, w, xq, stride, 2, out, vnni);                                             \
            break;                                                                                 \
        case 3:                                                                                    \
            fn##_rows(k, w, xq, stride, 3, out, vnni);                                             \
            break;                                                                                 \
        default:                                                                                   \
            fn##_rows(k, w, xq, stride, 4, out, vnni);                                             \
            break;                                                                                 \
        }                                                                                          \
    }

/* Bodies written for nw weight rows: the one-row and two-row entries. */
#define FC__QDOT_INSTANCES_NW(name, fn, vnni)                                                      \
    static TGT void name##_nw(const uint8_t *const *w, int nw, int64_t k, const void *xq,          \
                              size_t stride, int nx, float(*out)[FC__QDOT_MAX_ROWS]) {             \
        switch (nw * 4 + nx) {                                                                     \
        case 5:                                                                                    \
            fn##_rows(k, w, 1, xq, stride, 1, out, vnni);                                          \
            break;                                                                                 \
        case 6:                                                                                    \
            fn##_rows(k, w, 1, xq, stride, 2, out, vnni);                                          \
            break;                                                                                 \
        case 7:                                                                                    \
            fn##_rows(k, w, 1, xq, stride, 3, out, vnni);                                          \
            break;                                                                                 \
        case 8:                                                                                    \
            fn##_rows(k, w, 1, xq, stride, 4, out, vnni);                                          \
            break;                                                                                 \
        case 9:                                                                                    \
            fn##_rows(k, w, 2, xq, stride, 1, out, vnni);                                          \
            break;                                                                                 \
        case 10:                                                                                   \
            fn##_rows(k, w, 2, xq, stride, 2, out, vnni);                                          \
            break;                                                                                 \
        case 11:                                                                                   \
            fn##_rows(k, w, 2, xq, stride, 3, out, vnni);                                          \
            break;                                                                                 \
        default:                                                                                   \
            fn##_rows(k, w, 2, xq, stride, 4, out, vnni);                                          \
            break;                                                                                 \
        }                                                                                          \
    }                                                                                              \
    static TGT void name(int64_t k, const void *w, const void *xq, size_t stride, int nx,          \
                         float *out) {                                                             \
        const uint8_t *ws[1] = {w};                                                                \
        float o[1][FC__QDOT_MAX_ROWS];                                                             \
        name##_nw(ws, 1, k, xq, stride, nx, o);                                                    \
        memcpy(out, o[0], sizeof(float) * (size_t)nx);                                             \
    }                                                                                              \
    static TGT void name##_2(int64_t k, const void *w0, const void *w1, const void *xq,            \
                             size_t stride, int nx, float *out0, float *out1) {                    \
        const uint8_t *ws[2] = {w0, w1};                                                           \
        float o[2][FC__QDOT_MAX_ROWS];                                                             \
        name##_nw(ws, 2, k, xq, stride, nx, o);                                                    \
        memcpy(out0, o[0], sizeof(float) * (size_t)nx);                                            \
        memcpy(out1, o[1], sizeof(float) * (size_t)nx);                                            \
    }

FC__QDOT_INSTANCES_NW(q4_0, q4_0, 0)
FC__QDOT_INSTANCES_NW(q8_0, q8_0, 0)
FC__QDOT_INSTANCES_V(q4_k, q4_k, 0)
FC__QDOT_INSTANCES_V(q6_k, q6_k, 0)
FC__QDOT_INSTANCES_NW(q4_0_vnni, q4_0, 1)
FC__QDOT_INSTANCES_NW(q8_0_vnni, q8_0, 1)
FC__QDOT_INSTANCES_V(q4_k_vnni, q4_k, 1)
FC__QDOT_INSTANCES_V(q6_k_vnni, q6_k, 1)
FC__QDOT_INSTANCES(nf4, const uint8_t *)

static TGT void f32(int64_t n, const float *w, const float *x, int64_t ldx, int nx, float *out) {
    switch (nx) {
    case 1:
        f32_rows(n, w, x, ldx, 1, out);
        break;
    case 2:
        f32_rows(n, w, x, ldx, 2, out);
        break;
    case 3:
        f32_rows(n, w, x, ldx, 3, out);
        break;
    default:
        f32_rows(n, w, x, ldx, 4, out);
        break;
    }
}

/* The nf4 and f32 kernels of the AVX-512 table too: their f32 lanes are the
 * canonical ones, which wider registers would only split differently. */
TGT void fc__qdot_nf4_avx2(int64_t k, const void *w, const void *xq, size_t stride, int nx,
                           float *out) {
    nf4(k, w, xq, stride, nx, out);
}

TGT void fc__dot_f32_avx2(int64_t n, const float *w, const float *x, int64_t ldx, int nx,
                          float *out) {
    f32(n, w, x, ldx, nx, out);
}

const fc__qdot_kernels fc__qdot_avx2 = {
    .name = "avx2",
    .dot = {[FC__QK_Q4_0] = q4_0,
            [FC__QK_Q8_0] = q8_0,
            [FC__QK_Q4_K] = q4_k,
            [FC__QK_Q6_K] = q6_k,
            [FC__QK_NF4] = nf4},
    .dot2 = {[FC__QK_Q4_0] = q4_0_2, [FC__QK_Q8_0] = q8_0_2},
    .rows = {[FC__QK_Q4_0] = 4,
             [FC__QK_Q8_0] = 4,
             [FC__QK_Q4_K] = 4,
             [FC__QK_Q6_K] = 4,
             [FC__QK_NF4] = 4},
    .dot_f32 = f32,
    .q8_32 = fc__q8_32_avx2,
    .q8_256 = fc__q8_256_avx2,
};

const fc__qdot_kernels fc__qdot_avxvnni = {
    .name = "avx2+avxvnni",
    .dot = {[FC__QK_Q4_0] = q4_0_vnni,
            [FC__QK_Q8_0] = q8_0_vnni,
            [FC__QK_Q4_K] = q4_k_vnni,
            [FC__QK_Q6_K] = q6_k_vnni,
            [FC__QK_NF4] = nf4},
    .dot2 = {[FC__QK_Q4_0] = q4_0_vnni_2, [FC__QK_Q8_0] = q8_0_vnni_2},
    .rows = {[FC__QK_Q4_0] = 4,
             [FC__QK_Q8_0] = 4,
             [FC__QK_Q4_K] = 4,
             [FC__QK_Q6_K] = 4,
             [FC__QK_NF4] = 4},
    .dot_f32 = f32,
    .q8_32 = fc__q8_32_avx2,
    .q8_256 = fc__q8_256_avx2,
};

#else
typedef int fc__qdot_avx2_unused; /* ISO C wants a declaration in every file */
#endif
