/* SPDX-License-Identifier: MIT */
/* legacy.c - ggml's single-scale block formats: q4_0, q4_1, q5_0, q5_1,
 * q8_0, q8_1 (32 values), q1_0 (128), q2_0 (128, PrismML's layout) and
 * q2_0_g64 (64, ggml master's).
 *
 * The reference quantizers follow ggml's quantize_row_*_ref: one absmax
 * (or min/max) scan, an f16 scale, and codes computed with the UNROUNDED
 * f32 reciprocal of the scale, each with ggml's own rounding: truncation of
 * x*id + 8.5 (q4_0) and similar offsets (q4_1, q5_0, q5_1), roundf (half
 * away from zero) in q8_0, q8_1 and q2_0. Those conversions go through
 * fc__q_trunc, so a block whose reciprocal overflows (scale below ~2^-128)
 * gets x86-64's codes instead of undefined behaviour. With an imatrix,
 * q4_0/q4_1/q5_0/q5_1 switch to ggml's weighted searches (quantize_row_*_impl:
 * weights imatrix[j] * sqrt(sigma2 + x^2), sigma2 the row's mean square).
 *
 * Layouts (little-endian, alignment 1), d/m/s are f16:
 *   q4_0 {d, qs[16]}          element j in the low nibble of qs[j], j+16 high
 *   q4_1 {d, m, qs[16]}       x = code * d + m
 *   q5_0 {d, qh[4], qs[16]}   bit 4 of element j is bit j of the u32 qh
 *   q5_1 {d, m, qh[4], qs[16]}
 *   q8_0 {d, qs[32]}          int8 codes
 *   q8_1 {d, s, qs[32]}       s = f16(sum(qs) * f32 scale)
 *   q1_0 {d, qs[16]}          bit j set when x >= 0; x = +-d, d = mean |x|
 *   q2_0 {d, qs[qk/4]}        2-bit codes, 4 per byte low first; x = (code-1)*d */
#include <float.h>
#include <math.h>
#include <string.h>

#include "core/quant/kquant.h"
#include "core/quant/quant.h"

typedef struct blk_q4_0 {
    uint8_t d[2];
    uint8_t qs[16];
} blk_q4_0;
typedef struct blk_q4_1 {
    uint8_t d[2];
    uint8_t m[2];
    uint8_t qs[16];
} blk_q4_1;
typedef struct blk_q5_0 {
    uint8_t d[2];
    uint8_t qh[4];
    uint8_t qs[16];
} blk_q5_0;
typedef struct blk_q5_1 {
    uint8_t d[2];
    uint8_t m[2];
    uint8_t qh[4];
    uint8_t qs[16];
} blk_q5_1;
typedef struct blk_q8_0 {
    uint8_t d[2];
    int8_t qs[32];
} blk_q8_0;
typedef struct blk_q8_1 {
    uint8_t d[2];
    uint8_t s[2];
    int8_t qs[32];
} blk_q8_1;
typedef struct blk_q1_0 {
    uint8_t d[2];
    uint8_t qs[16];
} blk_q1_0;
typedef struct blk_q2_0 {
    uint8_t d[2];
    uint8_t qs[32];
} blk_q2_0;
typedef struct blk_q2_0_g64 {
    uint8_t d[2];
    uint8_t qs[16];
} blk_q2_0_g64;
_Static_assert(sizeof(blk_q4_0) == 18, "q4_0 block is 18 bytes");
_Static_assert(sizeof(blk_q4_1) == 20, "q4_1 block is 20 bytes");
_Static_assert(sizeof(blk_q5_0) == 22, "q5_0 block is 22 bytes");
_Static_assert(sizeof(blk_q5_1) == 24, "q5_1 block is 24 bytes");
_Static_assert(sizeof(blk_q8_0) == 34, "q8_0 block is 34 bytes");
_Static_assert(sizeof(blk_q8_1) == 36, "q8_1 block is 36 bytes");
_Static_assert(sizeof(blk_q1_0) == 18, "q1_0 block is 18 bytes");
_Static_assert(sizeof(blk_q2_0) == 34, "q2_0 block is 34 bytes");
_Static_assert(sizeof(blk_q2_0_g64) == 18, "q2_0_g64 block is 18 bytes");

/* The value of largest magnitude (first one on ties), and that magnitude. */
static float signed_absmax(const float *x, int n, float *amax_out) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    *amax_out = amax;
    return max;
}

static void min_max(const float *x, int n, float *min_out, float *max_out) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    *min_out = min;
    *max_out = max;
}

/* ggml's "MIN(limit, (int8_t)v)": truncate, narrow to int8, cap. */
static int trunc_i8_capped(float v, int limit) {
    return fc__q_min_i(limit, fc__q_wrap_i8(fc__q_trunc(v)));
}

static void put_qh(uint8_t *qh, uint32_t bits) { fc__q_put_u32(qh, bits); }

/* Nibbles of 5-bit codes L[0..32) into qs and their bit 4 into qh. */
static void pack_q5(const uint8_t *L, uint8_t *qs, uint8_t *qh) {
    uint32_t h = 0;
    for (int j = 0; j < 16; ++j) {
        qs[j] = (uint8_t)((L[j] & 0x0F) | (L[j + 16] & 0x0F) << 4);
        h |= (uint32_t)((L[j] & 0x10u) >> 4) << j;
        h |= (uint32_t)((L[j + 16] & 0x10u) >> 4) << (j + 16);
    }
    put_qh(qh, h);
}

/* ---- reference quantizers ---------------------------------------------------- */

static void q4_0_ref(const float *x, blk_q4_0 *y) {
    float amax;
    const float max = signed_absmax(x, 32, &amax);
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    fc__q_put_f16(y->d, d);
    for (int j = 0; j < 16; ++j) {
        const uint8_t xi0 = (uint8_t)trunc_i8_capped(x[j] * id + 8.5f, 15);
        const uint8_t xi1 = (uint8_t)trunc_i8_capped(x[j + 16] * id + 8.5f, 15);
        y->qs[j] = (uint8_t)(xi0 | xi1 << 4);
    }
}

static void q4_1_ref(const float *x, blk_q4_1 *y) {
    float min, max;
    min_max(x, 32, &min, &max);
    const float d = (max - min) / 15;
    const float id = d ? 1.0f / d : 0.0f;
    fc__q_put_f16(y->d, d);
    fc__q_put_f16(y->m, min);
    for (int j = 0; j < 16; ++j) {
        const uint8_t xi0 = (uint8_t)trunc_i8_capped((x[j] - min) * id + 0.5f, 15);
        const uint8_t xi1 = (uint8_t)trunc_i8_capped((x[j + 16] - min) * id + 0.5f, 15);
        y->qs[j] = (uint8_t)(xi0 | xi1 << 4);
    }
}

static void q5_0_ref(const float *x, blk_q5_0 *y) {
    float amax;
    const float max = signed_absmax(x, 32, &amax);
    const float d = max / -16;
    const float id = d ? 1.0f / d : 0.0f;
    fc__q_put_f16(y->d, d);
    uint8_t L[32];
    for (int j = 0; j < 32; ++j)
        L[j] = (uint8_t)trunc_i8_capped(x[j] * id + 16.5f, 31);
    pack_q5(L, y->qs, y->qh);
}

static void q5_1_ref(const float *x, blk_q5_1 *y) {
    float min, max;
    min_max(x, 32, &min, &max);
    const float d = (max - min) / 31;
    const float id = d ? 1.0f / d : 0.0f;
    fc__q_put_f16(y->d, d);
    fc__q_put_f16(y->m, min);
    uint8_t L[32];
    /* ggml converts straight to uint8_t here, with no cap */
    for (int j = 0; j < 32; ++j)
        L[j] = fc__q_wrap_u8(fc__q_trunc((x[j] - min) * id + 0.5f));
    pack_q5(L, y->qs, y->qh);
}

/* q8_0 and q8_1 share the scale: d = amax / 127, codes roundf(x / d). */
static float q8_codes(const float *x, int8_t *qs) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
        amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; ++j)
        qs[j] = fc__q_wrap_i8(fc__q_trunc(roundf(x[j] * id)));
    return d;
}

static void q8_0_ref(const float *x, blk_q8_0 *y) { fc__q_put_f16(y->d, q8_codes(x, y->qs)); }

static void q8_1_ref(const float *x, blk_q8_1 *y) {
    const float d = q8_codes(x, y->qs);
    fc__q_put_f16(y->d, d);
    int sum = 0;
    for (int j = 0; j < 32; ++j)
        sum += y->qs[j];
    fc__q_put_f16(y->s, (float)sum * d);
}

static void q1_0_ref(const float *x, blk_q1_0 *y) {
    float sum_abs = 0.0f;
    for (int j = 0; j < 128; j++)
        sum_abs += fabsf(x[j]);
    fc__q_put_f16(y->d, sum_abs / 128);
    memset(y->qs, 0, sizeof y->qs);
    for (int j = 0; j < 128; ++j) {
        if (x[j] >= 0.0f) y->qs[j / 8] = (uint8_t)(y->qs[j / 8] | 1u << (j % 8));
    }
}

/* Both q2_0 layouts: {f16 d; u8 qs[qk/4]} with d = amax. */
static void q2_0_ref(const float *x, int qk, uint8_t *d16, uint8_t *qs) {
    float amax = 0.0f;
    for (int j = 0; j < qk; j++) {
        const float a = fabsf(x[j]);
        if (a > amax) amax = a;
    }
    const float d = amax;
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    fc__q_put_f16(d16, d);
    memset(qs, 0, (size_t)qk / 4);
    for (int j = 0; j < qk; ++j) {
        int32_t r = fc__q_trunc(roundf(x[j] * id));
        /* r + 1 without overflow when r is INT32_MIN */
        int q = r < -1 ? 0 : (r > 2 ? 3 : r + 1);
        qs[j / 4] = (uint8_t)(qs[j / 4] | q << ((j % 4) * 2));
    }
}

/* ---- weighted (imatrix) quantizers ------------------------------------------- */

static float row_sigma2(const float *x, int64_t n) {
    float sum_x2 = 0;
    for (int64_t j = 0; j < n; ++j)
        sum_x2 += x[j] * x[j];
    return sum_x2 / (float)n;
}

static void block_weights(const float *xb, const float *qw, float sigma2, float *w) {
    for (int j = 0; j < 32; ++j)
        w[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
}

static void q4_0_weighted(const float *xb, const float *qw, float sigma2, blk_q4_0 *y) {
    float w[32];
    int8_t L[32];
    block_weights(xb, qw, sigma2, w);
    fc__q_put_f16(y->d, fc__kq_make_qx_quants(32, 8, xb, L, 1, w));
    for (int j = 0; j < 16; ++j)
        y->qs[j] = (uint8_t)(L[j] | L[j + 16] << 4);
}

static void q4_1_weighted(const float *xb, const float *qw, float sigma2, blk_q4_1 *y) {
    float w[32], min;
    uint8_t L[32], Laux[32];
    block_weights(xb, qw, sigma2, w);
    float d = fc__kq_make_qkx3_quants(32, 15, xb, w, L, &min, Laux, -0.9f, 0.05f, 36, false);
    fc__q_put_f16(y->d, d);
    fc__q_put_f16(y->m, -min);
    for (int j = 0; j < 16; ++j)
        y->qs[j] = (uint8_t)(L[j] | L[j + 16] << 4);
}

static void q5_0_weighted(const float *xb, const float *qw, float sigma2, blk_q5_0 *y) {
    float w[32];
    int8_t L[32];
    uint8_t Lu[32];
    block_weights(xb, qw, sigma2, w);
    fc__q_put_f16(y->d, fc__kq_make_qx_quants(32, 16, xb, L, 1, w));
    for (int j = 0; j < 32; ++j)
        Lu[j] = (uint8_t)L[j];
    pack_q5(Lu, y->qs, y->qh);
}

static void q5_1_weighted(const float *xb, const float *qw, float sigma2, blk_q5_1 *y) {
    float w[32], min;
    uint8_t L[32], Laux[32];
    block_weights(xb, qw, sigma2, w);
    float d = fc__kq_make_qkx3_quants(32, 31, xb, w, L, &min, Laux, -0.9f, 0.05f, 36, false);
    fc__q_put_f16(y->d, d);
    fc__q_put_f16(y->m, -min);
    pack_q5(L, y->qs, y->qh);
}

/* ---- row functions -------------------------------------------------------------- */

static fc_status q4_0_row(const float *x, void *dst, int64_t n, const float *im, unsigned fl) {
    (void)fl;
    blk_q4_0 *y = dst;
    const float sigma2 = im ? row_sigma2(x, n) : 0;
    for (int64_t i = 0; i < n / 32; i++) {
        if (im) {
            q4_0_weighted(x + 32 * i, im + 32 * i, sigma2, &y[i]);
        } else {
            q4_0_ref(x + 32 * i, &y[i]);
        }
    }
    return FC_OK;
}

static fc_status q4_1_row(const float *x, void *dst, int64_t n, const float *im, unsigned fl) {
    (void)fl;
    blk_q4_1 *y = dst;
    const float sigma2 = im ? row_sigma2(x, n) : 0;
    for (int64_t i = 0; i < n / 32; i++) {
        if (im) {
            q4_1_weighted(x + 32 * i, im + 32 * i, sigma2, &y[i]);
        } else {
            q4_1_ref(x + 32 * i, &y[i]);
        }
    }
    return FC_OK;
}

static fc_status q5_0_row(const float *x, void *dst, int64_t n, const float *im, unsigned fl) {
    (void)fl;
    blk_q5_0 *y = dst;
    const float sigma2 = im ? row_sigma2(x, n) : 0;
    for (int64_t i = 0; i < n / 32; i++) {
        if (im) {
            q5_0_weighted(x + 32 * i, im + 32 * i, sigma2, &y[i]);
        } else {
            q5_0_ref(x + 32 * i, &y[i]);
        }
    }
    return FC_OK;
}

static fc_status q5_1_row(const float *x, void *dst, int64_t n, const float *im, unsigned fl) {
    (void)fl;
    blk_q5_1 *y = dst;
    const float sigma2 = im ? row_sigma2(x, n) : 0;
    for (int64_t i = 0; i < n / 32; i++) {
        if (im) {
            q5_1_weighted(x + 32 * i, im + 32 * i, sigma2, &y[i]);
        } else {
            q5_1_ref(x + 32 * i, &y[i]);
        }
    }
    return FC_OK;
}

/* The formats below have no weighted quantizer in ggml: imatrix ignored. */
static fc_status q8_0_row(const float *x, void *dst, int64_t n, const float *im, unsigned fl) {
    (void)im, (void)fl;
    blk_q8_0 *y = dst;
    for (int64_t i = 0; i < n / 32; i++)
        q8_0_ref(x + 32 * i, &y[i]);
    return FC_OK;
}

static fc_status q8_1_row(const float *x, void *dst, int64_t n, const float *im, unsigned fl) {
    (void)im, (void)fl;
    blk_q8_1 *y = dst;
    for (int64_t i = 0; i < n / 32; i++)
        q8_1_ref(x + 32 * i, &y[i]);
    return FC_OK;
}

static fc_status q1_0_row(const float *x, void *dst, int64_t n, const float *im, unsigned fl) {
    (void)im, (void)fl;
    blk_q1_0 *y = dst;
    for (int64_t i = 0; i < n / 128; i++)
        q1_0_ref(x + 128 * i, &y[i]);
    return FC_OK;
}

static fc_status q2_0_row(const float *x, void *dst, int64_t n, const float *im, unsigned fl) {
    (void)im, (void)fl;
    blk_q2_0 *y = dst;
    for (int64_t i = 0; i < n / 128; i++)
        q2_0_ref(x + 128 * i, 128, y[i].d, y[i].qs);
    return FC_OK;
}

static fc_status q2_0_g64_row(const float *x, void *dst, int64_t n, const float *im, unsigned fl) {
    (void)im, (void)fl;
    blk_q2_0_g64 *y = dst;
    for (int64_t i = 0; i < n / 64; i++)
        q2_0_ref(x + 64 * i, 64, y[i].d, y[i].qs);
    return FC_OK;
}

/* ---- dequantization (ggml's to_float; q8_1 has none in ggml: d * code) ---- */

static void q4_0_deq(const void *src, float *y, int64_t n) {
    const blk_q4_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = fc__q_get_f16(b[i].d);
        for (int j = 0; j < 16; ++j) {
            y[j] = (float)((b[i].qs[j] & 0x0F) - 8) * d;
            y[j + 16] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void q4_1_deq(const void *src, float *y, int64_t n) {
    const blk_q4_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = fc__q_get_f16(b[i].d), m = fc__q_get_f16(b[i].m);
        for (int j = 0; j < 16; ++j) {
            const float p0 = (float)(b[i].qs[j] & 0x0F) * d;
            const float p1 = (float)(b[i].qs[j] >> 4) * d;
            y[j] = p0 + m;
            y[j + 16] = p1 + m;
        }
    }
}

/* The 5-bit code j of a q5 block. */
static int q5_code(const uint8_t *qs, uint32_t qh, int j) {
    int lo = j < 16 ? qs[j] & 0x0F : qs[j - 16] >> 4;
    return lo | (int)((qh >> j) & 1u) << 4;
}

static void q5_0_deq(const void *src, float *y, int64_t n) {
    const blk_q5_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = fc__q_get_f16(b[i].d);
        const uint32_t qh = fc__q_get_u32(b[i].qh);
        for (int j = 0; j < 32; ++j)
            y[j] = (float)(q5_code(b[i].qs, qh, j) - 16) * d;
    }
}

static void q5_1_deq(const void *src, float *y, int64_t n) {
    const blk_q5_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = fc__q_get_f16(b[i].d), m = fc__q_get_f16(b[i].m);
        const uint32_t qh = fc__q_get_u32(b[i].qh);
        for (int j = 0; j < 32; ++j) {
            const float p = (float)q5_code(b[i].qs, qh, j) * d;
            y[j] = p + m;
        }
    }
}

static void q8_0_deq(const void *src, float *y, int64_t n) {
    const blk_q8_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = fc__q_get_f16(b[i].d);
        for (int j = 0; j < 32; ++j)
            y[j] = (float)b[i].qs[j] * d;
    }
}

static void q8_1_deq(const void *src, float *y, int64_t n) {
    const blk_q8_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = fc__q_get_f16(b[i].d);
        for (int j = 0; j < 32; ++j)
            y[j] = d * (float)b[i].qs[j];
    }
}

static void q1_0_deq(const void *src, float *y, int64_t n) {
    const blk_q1_0 *b = src;
    for (int64_t i = 0; i < n / 128; i++, y += 128) {
        const float d = fc__q_get_f16(b[i].d), neg_d = -d;
        for (int j = 0; j < 128; ++j)
            y[j] = ((b[i].qs[j / 8] >> (j % 8)) & 1) ? d : neg_d;
    }
}

static void q2_0_deq_block(const uint8_t *d16, const uint8_t *qs, int qk, float *y) {
    const float d = fc__q_get_f16(d16);
    for (int j = 0; j < qk; ++j)
        y[j] = (float)(((qs[j / 4] >> ((j % 4) * 2)) & 3) - 1) * d;
}

static void q2_0_deq(const void *src, float *y, int64_t n) {
    const blk_q2_0 *b = src;
    for (int64_t i = 0; i < n / 128; i++)
        q2_0_deq_block(b[i].d, b[i].qs, 128, y + 128 * i);
}

static void q2_0_g64_deq(const void *src, float *y, int64_t n) {
    const blk_q2_0_g64 *b = src;
    for (int64_t i = 0; i < n / 64; i++)
        q2_0_deq_block(b[i].d, b[i].qs, 64, y + 64 * i);
}

static const fc__quant_fns q4_0_fns = {q4_0_row, q4_0_deq};
static const fc__quant_fns q4_1_fns = {q4_1_row, q4_1_deq};
static const fc__quant_fns q5_0_fns = {q5_0_row, q5_0_deq};
static const fc__quant_fns q5_1_fns = {q5_1_row, q5_1_deq};
static const fc__quant_fns q8_0_fns = {q8_0_row, q8_0_deq};
static const fc__quant_fns q8_1_fns = {q8_1_row, q8_1_deq};
static const fc__quant_fns q1_0_fns = {q1_0_row, q1_0_deq};
static const fc__quant_fns q2_0_fns = {q2_0_row, q2_0_deq};
static const fc__quant_fns q2_0_g64_fns = {q2_0_g64_row, q2_0_g64_deq};

const fc__quant_fns *fc__quant_family_legacy(fc_dtype dtype) {
    switch (dtype) {
    case FC_Q4_0:
        return &q4_0_fns;
    case FC_Q4_1:
        return &q4_1_fns;
    case FC_Q5_0:
        return &q5_0_fns;
    case FC_Q5_1:
        return &q5_1_fns;
    case FC_Q8_0:
        return &q8_0_fns;
    case FC_Q8_1:
        return &q8_1_fns;
    case FC_Q1_0:
        return &q1_0_fns;
    case FC_Q2_0:
        return &q2_0_fns;
    case FC_Q2_0_G64:
        return &q2_0_g64_fns;
    default:
        return NULL;
    }
}
