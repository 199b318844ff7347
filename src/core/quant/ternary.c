/* SPDX-License-Identifier: MIT */
/* ternary.c - ggml's ternary formats for BitNet b1.58 / TriLM weights:
 * tq1_0 (1.6875 bits per weight) and tq2_0 (2.0625). Both store one f16
 * scale d = absmax per 256 values and a trit t in {0, 1, 2} per value
 * (t = roundf(x / d) + 1, decoded as (t - 1) * d).
 *
 * tq1_0 {qs[48], qh[4], d} packs five trits per byte as a base-3 fraction:
 * the trits t0..t4 form the number N = t0*81 + t1*27 + t2*9 + t3*3 + t4 <
 * 243, stored as ceil(N * 256 / 243), so that multiplying the byte by 3^k
 * (mod 256) brings trit k to the top and (byte * 3) >> 8 reads it. qs[0..32)
 * hold values j, j+32, .., j+128 of the first 160; qs[32..48) values
 * 160 + j, +16, .., +64; qh[0..4) hold four trits each (values 240 + j,
 * +4, +8, +12), shifted up one trit so they read the same way.
 * tq2_0 {qs[64], d}: 2-bit trits, byte m of each 32 holds values m, m+32,
 * m+64, m+96 of its 128, lowest bits first.
 *
 * Trits are rounded with roundf (ggml: lroundf, same result in range).
 * When 1/d overflows (d below ~2^-128) x/d is +-inf or NaN; ggml's lroundf
 * then returns LONG_MIN on x86-64 and the +1 narrowed to int makes the
 * trit 1, so such values get trit 1 (zero) here too. */
#include <math.h>
#include <string.h>

#include "core/quant/quant.h"

#define QK_K 256

typedef struct blk_tq1_0 {
    uint8_t qs[48];
    uint8_t qh[4];
    uint8_t d[2];
} blk_tq1_0;
typedef struct blk_tq2_0 {
    uint8_t qs[64];
    uint8_t d[2];
} blk_tq2_0;
_Static_assert(sizeof(blk_tq1_0) == 54, "tq1_0 block is 54 bytes");
_Static_assert(sizeof(blk_tq2_0) == 66, "tq2_0 block is 66 bytes");

/* Trit of v = x / d: roundf(v) + 1 in {0, 1, 2} for |v| <= 1; 1 when v is
 * not finite (see the file comment). Finite |v| never exceeds 1 much, since
 * d is the block's absmax. */
static int trit(float v) {
    if (!(fabsf(v) <= 2.0f)) return 1;
    return (int)roundf(v) + 1;
}

static float absmax_scale(const float *x, float *id) {
    float amax = 0.0f;
    for (int j = 0; j < QK_K; j++)
        amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    *id = amax ? 1.0f / amax : 0.0f;
    return amax;
}

/* Five trits (or four, shifted up one) into one byte. */
static uint8_t pack_trits(const float *x, size_t stride, int count, float id) {
    unsigned q = 0;
    for (int n = 0; n < count; ++n)
        q = (q * 3 + (unsigned)trit(x[(size_t)n * stride] * id)) & 0xffu;
    if (count == 4) q = (q * 3) & 0xffu;
    return (uint8_t)((q * 256 + 242) / 243);
}

static void tq1_0_block(const float *x, blk_tq1_0 *y) {
    float id;
    fc__q_put_f16(y->d, absmax_scale(x, &id));
    for (size_t m = 0; m < 32; ++m)
        y->qs[m] = pack_trits(x + m, 32, 5, id);
    x += 160;
    for (size_t m = 0; m < 16; ++m)
        y->qs[32 + m] = pack_trits(x + m, 16, 5, id);
    x += 80;
    for (size_t j = 0; j < 4; ++j)
        y->qh[j] = pack_trits(x + j, 4, 4, id);
}

static void tq2_0_block(const float *x, blk_tq2_0 *y) {
    float id;
    fc__q_put_f16(y->d, absmax_scale(x, &id));
    for (size_t j = 0; j < 64; j += 32) {
        for (size_t m = 0; m < 32; ++m) {
            unsigned q = 0;
            for (unsigned n = 0; n < 4; ++n) {
                q += ((unsigned)trit(x[m + n * 32] * id) & 3u) << (2 * n);
            }
            y->qs[j + m] = (uint8_t)q;
        }
        x += 128;
    }
}

/* Trit k (0 = most significant) of a packed byte. */
static float unpack_trit(uint8_t byte, unsigned pow3k, float d) {
    const uint8_t q = (uint8_t)((byte * pow3k) & 0xffu);
    const int t = (int)(((unsigned)q * 3) >> 8);
    return (float)(t - 1) * d;
}

static void tq1_0_dequant_block(const blk_tq1_0 *b, float *y) {
    static const unsigned pow3[5] = {1, 3, 9, 27, 81};
    const float d = fc__q_get_f16(b->d);
    for (int n = 0; n < 5; ++n) {
        for (int m = 0; m < 32; ++m)
            *y++ = unpack_trit(b->qs[m], pow3[n], d);
    }
    for (int n = 0; n < 5; ++n) {
        for (int m = 0; m < 16; ++m)
            *y++ = unpack_trit(b->qs[32 + m], pow3[n], d);
    }
    for (int n = 0; n < 4; ++n) {
        for (int j = 0; j < 4; ++j)
            *y++ = unpack_trit(b->qh[j], pow3[n], d);
    }
}

static void tq2_0_dequant_block(const blk_tq2_0 *b, float *y) {
    const float d = fc__q_get_f16(b->d);
    for (int j = 0; j < 64; j += 32) {
        for (int l = 0; l < 4; ++l) {
            for (int m = 0; m < 32; ++m)
                *y++ = (float)(((b->qs[j + m] >> (l * 2)) & 3) - 1) * d;
        }
    }
}

/* ggml's ternary quantizers take no importance matrix: it is ignored. */
static fc_status tq1_0_row(const float *x, void *dst, int64_t n, const float *im, unsigned fl) {
    (void)im, (void)fl;
    blk_tq1_0 *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++)
        tq1_0_block(x + i * QK_K, &y[i]);
    return FC_OK;
}
static fc_status tq2_0_row(const float *x, void *dst, int64_t n, const float *im, unsigned fl) {
    (void)im, (void)fl;
    blk_tq2_0 *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++)
        tq2_0_block(x + i * QK_K, &y[i]);
    return FC_OK;
}
static void tq1_0_deq(const void *src, float *y, int64_t n) {
    const blk_tq1_0 *b = src;
    for (int64_t i = 0; i < n / QK_K; i++)
        tq1_0_dequant_block(&b[i], y + i * QK_K);
}
static void tq2_0_deq(const void *src, float *y, int64_t n) {
    const blk_tq2_0 *b = src;
    for (int64_t i = 0; i < n / QK_K; i++)
        tq2_0_dequant_block(&b[i], y + i * QK_K);
}

static const fc__quant_fns tq1_0_fns = {tq1_0_row, tq1_0_deq};
static const fc__quant_fns tq2_0_fns = {tq2_0_row, tq2_0_deq};

const fc__quant_fns *fc__quant_family_ternary(fc_dtype dtype) {
    switch (dtype) {
    case FC_TQ1_0:
        return &tq1_0_fns;
    case FC_TQ2_0:
        return &tq2_0_fns;
    default:
        return NULL;
    }
}
