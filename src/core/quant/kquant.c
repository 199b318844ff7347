/* SPDX-License-Identifier: MIT */
/* kquant.c - ggml's k-quants: q2_K, q3_K, q4_K, q5_K, q6_K (super-blocks of
 * 256 values in 16 or 8 sub-blocks, sub-block scales quantized against one
 * or two f16 super-block scales) and q8_K (f32 scale, int8 codes and the
 * sums of each 16 codes).
 *
 * Without an importance matrix each quantizer is ggml's quantize_row_*_ref
 * (what ggml_quantize_chunk runs for imatrix = NULL); with one, ggml's
 * quantize_row_*_impl. Both end with the same "requantize" step: every
 * value is re-rounded against the sub-block scale as it will be decoded
 * (f16 super-scale times the integer sub-scale), so codes match the stored
 * scales exactly. Layouts, little-endian, alignment 1:
 *   q2_K  84 B: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin
 *   q3_K 110 B: hmask[32], qs[64], scales[12] (16 x 6 bits), d
 *   q4_K 144 B: d, dmin, scales[12] (8 scales + 8 mins, 6 bits), qs[128]
 *   q5_K 176 B: d, dmin, scales[12], qh[32], qs[128]
 *   q6_K 210 B: ql[128], qh[64], scales[16] (int8), d
 *   q8_K 292 B: d (f32), qs[256] (int8), bsums[16] (int16)
 * Code order inside qs follows ggml: 2-bit codes take 4 groups of 32 per 32
 * bytes, 4-bit codes 2 groups of 32 per 32 bytes. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "core/quant/kquant.h"
#include "core/quant/quant.h"

#define QK_K 256

typedef struct blk_q2_k {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    uint8_t d[2];
    uint8_t dmin[2];
} blk_q2_k;
typedef struct blk_q3_k {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    uint8_t d[2];
} blk_q3_k;
typedef struct blk_q4_k {
    uint8_t d[2];
    uint8_t dmin[2];
    uint8_t scales[12];
    uint8_t qs[QK_K / 2];
} blk_q4_k;
typedef struct blk_q5_k {
    uint8_t d[2];
    uint8_t dmin[2];
    uint8_t scales[12];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} blk_q5_k;
typedef struct blk_q6_k {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint8_t d[2];
} blk_q6_k;
typedef struct blk_q8_k {
    uint8_t d[4];
    int8_t qs[QK_K];
    uint8_t bsums[QK_K / 16 * 2];
} blk_q8_k;
_Static_assert(sizeof(blk_q2_k) == 84, "q2_k block is 84 bytes");
_Static_assert(sizeof(blk_q3_k) == 110, "q3_k block is 110 bytes");
_Static_assert(sizeof(blk_q4_k) == 144, "q4_k block is 144 bytes");
_Static_assert(sizeof(blk_q5_k) == 176, "q5_k block is 176 bytes");
_Static_assert(sizeof(blk_q6_k) == 210, "q6_k block is 210 bytes");
_Static_assert(sizeof(blk_q8_k) == 292, "q8_k block is 292 bytes");

/* 2-bit codes L[0..256) into qs[64]: byte l of each 32-byte half holds
 * elements l, l+32, l+64, l+96 of that half's 128 values, lowest first. */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            qs[j / 4 + l] =
                (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
        }
    }
}

/* ---- q2_K ------------------------------------------------------------------ */

/* Re-rounds every value against its decoded sub-block scale and min. */
static void q2k_requantize(const float *x, const blk_q2_k *y, uint8_t *L) {
    const float dd = fc__q_get_f16(y->d), dm_all = fc__q_get_f16(y->dmin);
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = dd * (float)(y->scales[j] & 0xF);
        if (!d) continue;
        const float dm = dm_all * (float)(y->scales[j] >> 4);
        for (int ii = 0; ii < 16; ++ii) {
            int l = fc__q_nearest_int((x[16 * j + ii] + dm) / d);
            L[16 * j + ii] = (uint8_t)fc__q_clamp_i(l, 0, 3);
        }
    }
}

static void q2k_block_ref(const float *x, blk_q2_k *y) {
    uint8_t L[QK_K], Laux[16];
    float weights[16], mins[QK_K / 16], scales[QK_K / 16];
    const float q4scale = 15.f;
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 16; ++j) {
        for (int l = 0; l < 16; ++l)
            weights[l] = fabsf(x[16 * j + l]);
        scales[j] = fc__kq_make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                            -0.5f, 0.1f, 15, true);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
        float iscale = q4scale / max_scale;
        for (int j = 0; j < QK_K / 16; ++j) {
            y->scales[j] = fc__q_wrap_u8(fc__q_nearest_int(iscale * scales[j]));
        }
        fc__q_put_f16(y->d, max_scale / q4scale);
    } else {
        memset(y->scales, 0, sizeof y->scales);
        fc__q_put_f16(y->d, 0.f);
    }
    if (max_min > 0) {
        float iscale = q4scale / max_min;
        for (int j = 0; j < QK_K / 16; ++j) {
            uint32_t l = (uint32_t)fc__q_nearest_int(iscale * mins[j]);
            y->scales[j] = (uint8_t)(y->scales[j] | ((l << 4) & 0xffu));
        }
        fc__q_put_f16(y->dmin, max_min / q4scale);
    } else {
        fc__q_put_f16(y->dmin, 0.f);
    }
    q2k_requantize(x, y, L);
    pack_2bit(L, y->qs);
}

static void q2k_block_imatrix(const float *x, blk_q2_k *y, const float *qw_block) {
    uint8_t L[QK_K], Laux[16], Ls[QK_K / 16], Lm[QK_K / 16];
    float mins[QK_K / 16], scales[QK_K / 16], sw[QK_K / 16] = {0}, weight[16];
    float sumx2 = 0;
    for (int j = 0; j < QK_K; ++j)
        sumx2 += x[j] * x[j];
    float sigma2 = sumx2 / QK_K;
    for (int j = 0; j < QK_K / 16; ++j) {
        const float *qw = qw_block + 16 * j;
        for (int l = 0; l < 16; ++l)
            weight[l] = qw[l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
        for (int l = 0; l < 16; ++l)
            sw[j] += weight[l];
        scales[j] = fc__kq_make_qkx3_quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux,
                                            -0.9f, 0.05f, 36, false);
    }
    float dm = fc__kq_make_qp_quants(QK_K / 16, 15, scales, Ls, sw);
    float mm = fc__kq_make_qp_quants(QK_K / 16, 15, mins, Lm, sw);
    fc__q_put_f16(y->d, dm);
    fc__q_put_f16(y->dmin, mm);
    for (int j = 0; j < QK_K / 16; ++j)
        y->scales[j] = (uint8_t)(Ls[j] | Lm[j] << 4);
    q2k_requantize(x, y, L);
    pack_2bit(L, y->qs);
}

static void q2k_dequant_block(const blk_q2_k *b, float *y) {
    const float d = fc__q_get_f16(b->d), min = fc__q_get_f16(b->dmin);
    const uint8_t *q = b->qs;
    int is = 0;
    for (int n = 0; n < QK_K; n += 128) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int half = 0; half < 2; ++half) {
                uint8_t sc = b->scales[is++];
                float dl = d * (float)(sc & 0xF), ml = min * (float)(sc >> 4);
                for (int l = 0; l < 16; ++l) {
                    float v = dl * (float)((q[l + 16 * half] >> shift) & 3);
                    *y++ = v - ml;
                }
            }
        }
        q += 32;
    }
}

/* ---- q3_K ------------------------------------------------------------------ */

/* The 6-bit scale j: low nibble from bytes 0..7, top two bits from 8..11. */
static int q3k_scale(const uint8_t *s, int j) {
    int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    return lo | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4;
}

static void q3k_put_scale(uint8_t *s, int j, int l) {
    if (j < 8) {
        s[j] = (uint8_t)(l & 0xF);
    } else {
        s[j - 8] = (uint8_t)(s[j - 8] | (l & 0xF) << 4);
    }
    s[j % 4 + 8] = (uint8_t)(s[j % 4 + 8] | (l >> 4) << (2 * (j / 4)));
}

/* Requantize against the stored scales, then split codes 0..7 into the
 * high-bit mask (bit b of hmask[m] for element 32*b + m) and 2-bit qs. */
static void q3k_finish(const float *x, blk_q3_k *y, int8_t *L) {
    const float d_all = fc__q_get_f16(y->d);
    for (int j = 0; j < QK_K / 16; ++j) {
        float d = d_all * (float)(q3k_scale(y->scales, j) - 32);
        if (!d) continue;
        for (int ii = 0; ii < 16; ++ii) {
            int l = fc__q_nearest_int(x[16 * j + ii] / d);
            L[16 * j + ii] = (int8_t)(fc__q_clamp_i(l, -4, 3) + 4);
        }
    }
    memset(y->hmask, 0, sizeof y->hmask);
    uint8_t Lu[QK_K];
    for (int j = 0; j < QK_K; ++j) {
        int v = L[j];
        if (v > 3) {
            y->hmask[j % 32] = (uint8_t)(y->hmask[j % 32] | 1u << (j / 32));
            v -= 4;
        }
        Lu[j] = (uint8_t)v;
    }
    pack_2bit(Lu, y->qs);
}

static void q3k_block_ref(const float *x, blk_q3_k *y) {
    int8_t L[QK_K];
    float scales[QK_K / 16];
    float max_scale = 0, amax = 0;
    for (int j = 0; j < QK_K / 16; ++j) {
        scales[j] = fc__kq_make_q3_quants(16, 4, x + 16 * j, L + 16 * j, true);
        float scale = fabsf(scales[j]);
        if (scale > amax) {
            amax = scale;
            max_scale = scales[j];
        }
    }
    memset(y->scales, 0, sizeof y->scales);
    if (max_scale) {
        float iscale = -32.f / max_scale;
        for (int j = 0; j < QK_K / 16; ++j) {
            int l = fc__q_wrap_i8(fc__q_nearest_int(iscale * scales[j]));
            q3k_put_scale(y->scales, j, fc__q_clamp_i(l, -32, 31) + 32);
        }
        fc__q_put_f16(y->d, 1 / iscale);
    } else {
        fc__q_put_f16(y->d, 0.f);
    }
    q3k_finish(x, y, L);
}

static void q3k_block_imatrix(const float *x, blk_q3_k *y, const float *qw_block) {
    int8_t L[QK_K], Ls[QK_K / 16];
    float scales[QK_K / 16], weight[16], sw[QK_K / 16];
    float sumx2 = 0;
    for (int j = 0; j < QK_K; ++j)
        sumx2 += x[j] * x[j];
    float sigma2 = 2 * sumx2 / QK_K;
    for (int j = 0; j < QK_K / 16; ++j) {
        const float *qw = qw_block + 16 * j;
        for (int l = 0; l < 16; ++l)
            weight[l] = qw[l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
        float sumw = 0;
        for (int l = 0; l < 16; ++l)
            sumw += weight[l];
        sw[j] = sumw;
        scales[j] = fc__kq_make_qx_quants(16, 4, x + 16 * j, L + 16 * j, 1, weight);
    }
    memset(y->scales, 0, sizeof y->scales);
    float d_block = fc__kq_make_qx_quants(QK_K / 16, 32, scales, Ls, 1, sw);
    for (int j = 0; j < QK_K / 16; ++j)
        q3k_put_scale(y->scales, j, Ls[j]);
    fc__q_put_f16(y->d, d_block);
    q3k_finish(x, y, L);
}

static void q3k_dequant_block(const blk_q3_k *b, float *y) {
    const float d_all = fc__q_get_f16(b->d);
    const uint8_t *q = b->qs;
    int is = 0;
    uint8_t m = 1;
    for (int n = 0; n < QK_K; n += 128) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int half = 0; half < 2; ++half) {
                float dl = d_all * (float)(q3k_scale(b->scales, is++) - 32);
                for (int l = 0; l < 16; ++l) {
                    int k = l + 16 * half;
                    int v = ((q[k] >> shift) & 3) - ((b->hmask[k] & m) ? 0 : 4);
                    *y++ = dl * (float)v;
                }
            }
            m = (uint8_t)(m << 1);
        }
        q += 32;
    }
}

/* ---- q4_K and q5_K: 8 sub-blocks of 32 with a scale and a min each --------- */

/* Scale and min of sub-block j from the 12 packed bytes (6 bits each). */
static void k4_get(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | (q[j - 4] >> 6) << 4);
        *m = (uint8_t)((q[j + 4] >> 4) | (q[j] >> 6) << 4);
    }
}
static void k4_put(int j, uint8_t *q, uint8_t ls, uint8_t lm) {
    if (j < 4) {
        q[j] = ls;
        q[j + 4] = lm;
    } else {
        q[j + 4] = (uint8_t)((ls & 0xF) | (lm & 0xF) << 4);
        q[j - 4] = (uint8_t)(q[j - 4] | (ls >> 4) << 6);
        q[j] = (uint8_t)(q[j] | (lm >> 4) << 6);
    }
}

/* Both reference quantizers: scales and mins from make_qkx2_quants with
 * weights av_x + |x|, then 6-bit sub-scales against the largest. nmax 15
 * (q4_K: rmin -1, 20 steps) or 31 (q5_K: rmin -0.5, 15 steps). */
static void k45_scales_ref(const float *x, int nmax, float rmin, int nstep, uint8_t *L,
                           uint8_t *packed, float *d_out, float *dmin_out) {
    uint8_t Laux[32];
    float weights[32], mins[QK_K / 32], scales[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l)
            sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l)
            weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = fc__kq_make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j],
                                            Laux, rmin, 0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t ls = fc__q_wrap_u8(fc__q_nearest_int(inv_scale * scales[j]));
        uint8_t lm = fc__q_wrap_u8(fc__q_nearest_int(inv_min * mins[j]));
        k4_put(j, packed, ls < 63 ? ls : 63, lm < 63 ? lm : 63);
    }
    *d_out = max_scale / 63.f;
    *dmin_out = max_min / 63.f;
}

/* The weighted quantizers: make_qkx3_quants under imatrix-derived weights,
 * sub-scales and sub-mins by make_qp_quants. clamp63 is q5_K's extra MIN. */
static void k45_scales_imatrix(const float *x, const float *qw_block, int nmax, bool clamp63,
                               uint8_t *L, uint8_t *packed, float *d_out, float *dmin_out) {
    uint8_t Laux[32], Ls[QK_K / 32], Lm[QK_K / 32];
    float weights[32], sw[QK_K / 32], mins[QK_K / 32], scales[QK_K / 32];
    float sum_x2 = 0;
    for (int l = 0; l < QK_K; ++l)
        sum_x2 += x[l] * x[l];
    float sigma2 = 2 * sum_x2 / QK_K;
    for (int j = 0; j < QK_K / 32; ++j) {
        const float *qw = qw_block + 32 * j;
        for (int l = 0; l < 32; ++l)
            weights[l] = qw[l] * sqrtf(sigma2 + x[32 * j + l] * x[32 * j + l]);
        float sumw = 0;
        for (int l = 0; l < 32; ++l)
            sumw += weights[l];
        sw[j] = sumw;
        scales[j] = fc__kq_make_qkx3_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j],
                                            Laux, -0.9f, 0.05f, 36, false);
    }
    *d_out = fc__kq_make_qp_quants(QK_K / 32, 63, scales, Ls, sw);
    *dmin_out = fc__kq_make_qp_quants(QK_K / 32, 63, mins, Lm, sw);
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t ls = Ls[j], lm = Lm[j];
        if (clamp63) {
            ls = ls < 63 ? ls : 63;
            lm = lm < 63 ? lm : 63;
        }
        k4_put(j, packed, ls, lm);
    }
}

/* Re-rounds every value against the decoded scale/min of its sub-block. */
static void k45_requantize(const float *x, const uint8_t *d16, const uint8_t *dmin16,
                           const uint8_t *packed, int nmax, uint8_t *L) {
    const float dd = fc__q_get_f16(d16), dmm = fc__q_get_f16(dmin16);
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t sc, m;
        k4_get(j, packed, &sc, &m);
        const float d = dd * (float)sc;
        if (!d) continue;
        const float dm = dmm * (float)m;
        for (int ii = 0; ii < 32; ++ii) {
            int l = fc__q_nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)fc__q_clamp_i(l, 0, nmax);
        }
    }
}

static void q4k_block(const float *x, blk_q4_k *y, const float *qw_block) {
    uint8_t L[QK_K];
    float d, dmin;
    memset(y->scales, 0, sizeof y->scales);
    if (qw_block) {
        k45_scales_imatrix(x, qw_block, 15, false, L, y->scales, &d, &dmin);
    } else {
        k45_scales_ref(x, 15, -1.f, 20, L, y->scales, &d, &dmin);
    }
    fc__q_put_f16(y->d, d);
    fc__q_put_f16(y->dmin, dmin);
    k45_requantize(x, y->d, y->dmin, y->scales, 15, L);
    uint8_t *q = y->qs;
    for (int j = 0; j < QK_K; j += 64) {
        for (int l = 0; l < 32; ++l)
            q[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
        q += 32;
    }
}

static void q5k_block(const float *x, blk_q5_k *y, const float *qw_block) {
    uint8_t L[QK_K];
    float d, dmin;
    memset(y->scales, 0, sizeof y->scales);
    if (qw_block) {
        k45_scales_imatrix(x, qw_block, 31, true, L, y->scales, &d, &dmin);
    } else {
        k45_scales_ref(x, 31, -0.5f, 15, L, y->scales, &d, &dmin);
    }
    fc__q_put_f16(y->d, d);
    fc__q_put_f16(y->dmin, dmin);
    k45_requantize(x, y->d, y->dmin, y->scales, 31, L);
    /* low nibbles as q4_K; bit 4 of element 64*k + j in qh[j] bit 2k, of
     * element 64*k + 32 + j in bit 2k+1 */
    memset(y->qh, 0, sizeof y->qh);
    uint8_t *ql = y->qs;
    for (int n = 0, k = 0; n < QK_K; n += 64, ++k) {
        for (int j = 0; j < 32; ++j) {
            int l1 = L[n + j], l2 = L[n + j + 32];
            if (l1 > 15) {
                l1 -= 16;
                y->qh[j] = (uint8_t)(y->qh[j] | 1u << (2 * k));
            }
            if (l2 > 15) {
                l2 -= 16;
                y->qh[j] = (uint8_t)(y->qh[j] | 2u << (2 * k));
            }
            ql[j] = (uint8_t)(l1 | l2 << 4);
        }
        ql += 32;
    }
}

/* Shared by q4_K (qh NULL) and q5_K. */
static void k45_dequant_block(const uint8_t *d16, const uint8_t *dmin16, const uint8_t *scales,
                              const uint8_t *qh, const uint8_t *qs, float *y) {
    const float d = fc__q_get_f16(d16), min = fc__q_get_f16(dmin16);
    const uint8_t *ql = qs;
    int is = 0;
    unsigned u1 = 1, u2 = 2;
    for (int j = 0; j < QK_K; j += 64) {
        uint8_t sc, m;
        k4_get(is + 0, scales, &sc, &m);
        const float d1 = d * (float)sc, m1 = min * (float)m;
        k4_get(is + 1, scales, &sc, &m);
        const float d2 = d * (float)sc, m2 = min * (float)m;
        for (int l = 0; l < 32; ++l) {
            int v = (ql[l] & 0xF) + (qh && (qh[l] & u1) ? 16 : 0);
            float p = d1 * (float)v;
            *y++ = p - m1;
        }
        for (int l = 0; l < 32; ++l) {
            int v = (ql[l] >> 4) + (qh && (qh[l] & u2) ? 16 : 0);
            float p = d2 * (float)v;
            *y++ = p - m2;
        }
        ql += 32;
        is += 2;
        u1 <<= 2;
        u2 <<= 2;
    }
}

/* ---- q6_K ------------------------------------------------------------------ */

/* ggml's ref and impl differ only in the weights of the first search. */
static void q6k_block(const float *x, blk_q6_k *y, const float *qw_block) {
    int8_t L[QK_K];
    float scales[QK_K / 16];
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
        const float *qw = qw_block ? qw_block + 16 * ib : NULL;
        const float scale = fc__kq_make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1, qw);
        scales[ib] = scale;
        const float abs_scale = fabsf(scale);
        if (abs_scale > max_abs_scale) {
            max_abs_scale = abs_scale;
            max_scale = scale;
        }
    }
    if (max_abs_scale < FC__KQ_GROUP_MAX_EPS) {
        memset(y, 0, sizeof *y);
        return;
    }
    float iscale = -128.f / max_scale;
    fc__q_put_f16(y->d, 1 / iscale);
    for (int ib = 0; ib < QK_K / 16; ++ib) {
        y->scales[ib] = fc__q_wrap_i8(fc__q_min_i(127, fc__q_nearest_int(iscale * scales[ib])));
    }
    const float dd = fc__q_get_f16(y->d);
    for (int j = 0; j < QK_K / 16; ++j) {
        float d = dd * (float)y->scales[j];
        if (!d) continue;
        for (int ii = 0; ii < 16; ++ii) {
            int l = fc__q_nearest_int(x[16 * j + ii] / d);
            L[16 * j + ii] = (int8_t)(fc__q_clamp_i(l, -32, 31) + 32);
        }
    }
    /* per 128 values: ql low nibbles of (l, l+64) and (l+32, l+96), qh the
     * top two bits of l, l+32, l+64, l+96 */
    uint8_t *ql = y->ql, *qh = y->qh;
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            const unsigned a = (unsigned)L[j + l], b = (unsigned)L[j + l + 32];
            const unsigned c = (unsigned)L[j + l + 64], e = (unsigned)L[j + l + 96];
            ql[l] = (uint8_t)((a & 0xF) | (c & 0xF) << 4);
            ql[l + 32] = (uint8_t)((b & 0xF) | (e & 0xF) << 4);
            qh[l] = (uint8_t)((a >> 4) | (b >> 4) << 2 | (c >> 4) << 4 | (e >> 4) << 6);
        }
        ql += 64;
        qh += 32;
    }
}

static void q6k_dequant_block(const blk_q6_k *b, float *y) {
    const float d = fc__q_get_f16(b->d);
    const uint8_t *ql = b->ql, *qh = b->qh;
    const int8_t *sc = b->scales;
    for (int n = 0; n < QK_K; n += 128) {
        for (int l = 0; l < 32; ++l) {
            int is = l / 16;
            const int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
            const int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
            const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
            const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
            y[l + 0] = d * (float)sc[is + 0] * (float)q1;
            y[l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

/* ---- q8_K ------------------------------------------------------------------ */

static void q8k_block(const float *x, blk_q8_k *y) {
    float max = 0, amax = 0;
    for (int j = 0; j < QK_K; ++j) {
        float ax = fabsf(x[j]);
        if (ax > amax) {
            amax = ax;
            max = x[j];
        }
    }
    if (!amax) {
        /* ggml leaves bsums unwritten here; their true value is 0 */
        memset(y, 0, sizeof *y);
        return;
    }
    /* -127 rather than -128 keeps every code's negation in range */
    const float iscale = -127.f / max;
    for (int j = 0; j < QK_K; ++j) {
        int v = fc__q_nearest_int(iscale * x[j]);
        y->qs[j] = fc__q_wrap_i8(fc__q_min_i(127, v));
    }
    for (int j = 0; j < QK_K / 16; ++j) {
        int sum = 0;
        for (int ii = 0; ii < 16; ++ii)
            sum += y->qs[j * 16 + ii];
        fc__q_put_u16(y->bsums + 2 * j, (uint16_t)(sum & 0xffff));
    }
    /* Near FLT_MAX, 127 * d can round past FLT_MAX and decode to inf (as it
     * does in ggml); step d toward zero until the largest code stays finite.
     * Codes (all |code| <= 127) are unchanged; only such blocks differ. */
    float d = 1 / iscale;
    while (fabsf(d * 127.0f) > FLT_MAX)
        d = nextafterf(d, 0.0f);
    fc__q_put_f32(y->d, d);
}

static void q8k_dequant_block(const blk_q8_k *b, float *y) {
    const float d = fc__q_get_f32(b->d);
    for (int j = 0; j < QK_K; ++j)
        y[j] = d * (float)b->qs[j];
}

/* ---- row functions and the family lookup ------------------------------------ */

typedef void (*quant_block_fn)(const float *x, void *blk, const float *qw);
typedef void (*dequant_block_fn)(const void *blk, float *y);

/* One row: block i reads x[256 i ..] and, with an imatrix, the weights of
 * the same columns. */
static fc_status quant_row(const float *src, void *dst, int64_t n, const float *imatrix,
                           size_t blk_bytes, quant_block_fn f) {
    uint8_t *out = dst;
    for (int64_t i = 0; i < n / QK_K; i++) {
        f(src + i * QK_K, out + (size_t)i * blk_bytes, imatrix ? imatrix + i * QK_K : NULL);
    }
    return FC_OK;
}
static void dequant_row(const void *src, float *dst, int64_t n, size_t blk_bytes,
                        dequant_block_fn f) {
    const uint8_t *in = src;
    for (int64_t i = 0; i < n / QK_K; i++)
        f(in + (size_t)i * blk_bytes, dst + i * QK_K);
}

static void q2k_quant(const float *x, void *blk, const float *qw) {
    if (qw) {
        q2k_block_imatrix(x, blk, qw);
    } else {
        q2k_block_ref(x, blk);
    }
}
static void q3k_quant(const float *x, void *blk, const float *qw) {
    if (qw) {
        q3k_block_imatrix(x, blk, qw);
    } else {
        q3k_block_ref(x, blk);
    }
}
static void q4k_quant(const float *x, void *blk, const float *qw) { q4k_block(x, blk, qw); }
static void q5k_quant(const float *x, void *blk, const float *qw) { q5k_block(x, blk, qw); }
static void q6k_quant(const float *x, void *blk, const float *qw) { q6k_block(x, blk, qw); }
/* ggml's q8_K has no weighted quantizer: the imatrix is ignored */
static void q8k_quant(const float *x, void *blk, const float *qw) {
    (void)qw;
    q8k_block(x, blk);
}

static void q2k_dequant(const void *blk, float *y) { q2k_dequant_block(blk, y); }
static void q3k_dequant(const void *blk, float *y) { q3k_dequant_block(blk, y); }
static void q4k_dequant(const void *blk, float *y) {
    const blk_q4_k *b = blk;
    k45_dequant_block(b->d, b->dmin, b->scales, NULL, b->qs, y);
}
static void q5k_dequant(const void *blk, float *y) {
    const blk_q5_k *b = blk;
    k45_dequant_block(b->d, b->dmin, b->scales, b->qh, b->qs, y);
}
static void q6k_dequant(const void *blk, float *y) { q6k_dequant_block(blk, y); }
static void q8k_dequant(const void *blk, float *y) { q8k_dequant_block(blk, y); }

static fc_status q2k_qrow(const float *s, void *d, int64_t n, const float *im, unsigned fl) {
    (void)fl;
    return quant_row(s, d, n, im, sizeof(blk_q2_k), q2k_quant);
}
static fc_status q3k_qrow(const float *s, void *d, int64_t n, const float *im, unsigned fl) {
    (void)fl;
    return quant_row(s, d, n, im, sizeof(blk_q3_k), q3k_quant);
}
static fc_status q4k_qrow(const float *s, void *d, int64_t n, const float *im, unsigned fl) {
    (void)fl;
    return quant_row(s, d, n, im, sizeof(blk_q4_k), q4k_quant);
}
static fc_status q5k_qrow(const float *s, void *d, int64_t n, const float *im, unsigned fl) {
    (void)fl;
    return quant_row(s, d, n, im, sizeof(blk_q5_k), q5k_quant);
}
static fc_status q6k_qrow(const float *s, void *d, int64_t n, const float *im, unsigned fl) {
    (void)fl;
    return quant_row(s, d, n, im, sizeof(blk_q6_k), q6k_quant);
}
static fc_status q8k_qrow(const float *s, void *d, int64_t n, const float *im, unsigned fl) {
    (void)fl;
    return quant_row(s, d, n, im, sizeof(blk_q8_k), q8k_quant);
}
static void q2k_drow(const void *s, float *d, int64_t n) {
    dequant_row(s, d, n, sizeof(blk_q2_k), q2k_dequant);
}
static void q3k_drow(const void *s, float *d, int64_t n) {
    dequant_row(s, d, n, sizeof(blk_q3_k), q3k_dequant);
}
static void q4k_drow(const void *s, float *d, int64_t n) {
    dequant_row(s, d, n, sizeof(blk_q4_k), q4k_dequant);
}
static void q5k_drow(const void *s, float *d, int64_t n) {
    dequant_row(s, d, n, sizeof(blk_q5_k), q5k_dequant);
}
static void q6k_drow(const void *s, float *d, int64_t n) {
    dequant_row(s, d, n, sizeof(blk_q6_k), q6k_dequant);
}
static void q8k_drow(const void *s, float *d, int64_t n) {
    dequant_row(s, d, n, sizeof(blk_q8_k), q8k_dequant);
}

static const fc__quant_fns q2k_fns = {q2k_qrow, q2k_drow};
static const fc__quant_fns q3k_fns = {q3k_qrow, q3k_drow};
static const fc__quant_fns q4k_fns = {q4k_qrow, q4k_drow};
static const fc__quant_fns q5k_fns = {q5k_qrow, q5k_drow};
static const fc__quant_fns q6k_fns = {q6k_qrow, q6k_drow};
static const fc__quant_fns q8k_fns = {q8k_qrow, q8k_drow};

const fc__quant_fns *fc__quant_family_kquant(fc_dtype dtype) {
    switch (dtype) {
    case FC_Q2_K:
        return &q2k_fns;
    case FC_Q3_K:
        return &q3k_fns;
    case FC_Q4_K:
        return &q4k_fns;
    case FC_Q5_K:
        return &q5k_fns;
    case FC_Q6_K:
        return &q6k_fns;
    case FC_Q8_K:
        return &q8k_fns;
    default:
        return NULL;
    }
}
