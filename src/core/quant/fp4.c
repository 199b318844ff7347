/* SPDX-License-Identifier: MIT */
/* fp4.c - the 4-bit float (E2M1) block formats as ggml stores them:
 *   mxfp4 {e, qs[16]}   (17 B / 32 values): OCP MX, one E8M0 power-of-two
 *                        scale per 32 values
 *   nvfp4 {d[4], qs[32]} (36 B / 64 values): NVIDIA's, one unsigned E4M3
 *                        scale per 16-value sub-block
 * Codes index ggml's table kvalues_fp4 = 2 * E2M1 (0, 0.5, 1, 1.5, 2, 3, 4,
 * 6 and their negatives, doubled to integers), so both scales are decoded
 * at half their value. Nibbles: element j of a 32-value group in the low
 * nibble of qs[j], element j + 16 in the high nibble (nvfp4: per 16-value
 * sub-block, elements j and j + 8 in qs[8 s + j]). Each value takes the
 * code whose decoded value is nearest, the first (lowest) code on ties.
 *
 * mxfp4's exponent is floor(log2(amax)) - 2 + 127 as a byte; for blocks
 * below 2^-125 that is negative and ggml's conversion is undefined in C.
 * fc__q_trunc gives the x86-64 result (the low byte of the two's
 * complement integer), which still decodes the block to zeros. */
#include <math.h>

#include "core/quant/quant.h"

typedef struct blk_mxfp4 {
    uint8_t e;
    uint8_t qs[16];
} blk_mxfp4;
typedef struct blk_nvfp4 {
    uint8_t d[4];
    uint8_t qs[32];
} blk_nvfp4;
_Static_assert(sizeof(blk_mxfp4) == 17, "mxfp4 block is 17 bytes");
_Static_assert(sizeof(blk_nvfp4) == 36, "nvfp4 block is 36 bytes");

static const int8_t kvalues_fp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static int best_index_fp4(float x, float d) {
    int best = 0;
    float best_err = fabsf((float)kvalues_fp4[0] * d - x);
    for (int i = 1; i < 16; i++) {
        float err = fabsf((float)kvalues_fp4[i] * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

/* Half of 2^(e - 127), i.e. 2^(e - 128), including the two subnormal cases. */
static float e8m0_half(uint8_t e) {
    if (e < 2) return fc__q_bits_f32(0x00200000u << e);
    return fc__q_bits_f32((uint32_t)(e - 1) << 23);
}

/* Half the value of an unsigned E4M3 byte (bias 7; 0 and 0x7f read as 0;
 * bit 7 is not part of the format and is ignored). */
static float ue4m3_half(uint8_t x) {
    if (x == 0 || x == 0x7F) return 0.0f;
    const int exp = (x >> 3) & 0xF, man = x & 0x7;
    float raw = exp == 0 ? ldexpf((float)man, -9) : ldexpf(1.0f + (float)man / 8.0f, exp - 7);
    return raw * 0.5f;
}

/* Positive x to unsigned E4M3: round half up on the mantissa's fourth bit,
 * saturating at 448 (0x7e); zero, negative and NaN give 0. */
static uint8_t f32_to_ue4m3(float x) {
    if (!(x > 0.0f)) return 0;
    if (x > 448.0f) x = 448.0f;
    const uint32_t bits = fc__q_f32_bits(x);
    const int fp32_exp = (int)((bits >> 23) & 0xFF) - 127;
    const int fp32_man = (int)((bits >> 20) & 0x7);
    int exp = fp32_exp + 7;
    if (exp <= 0) {
        /* subnormal: man * 2^-9; x < 2^-6 here, so the product is small */
        int man = (int)(x * 512.0f + 0.5f);
        if (man > 7) man = 7;
        if (man < 1) return 0;
        return (uint8_t)man;
    }
    if (exp >= 15) return 0x7E;
    int man = fp32_man + (int)((bits >> 19) & 1);
    if (man > 7) {
        man = 0;
        exp++;
        if (exp >= 15) return 0x7E;
    }
    return (uint8_t)(exp << 3 | man);
}

static void mxfp4_block(const float *x, blk_mxfp4 *y) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
        if (amax < fabsf(x[j])) amax = fabsf(x[j]);
    }
    const uint8_t e = amax > 0.0f ? fc__q_wrap_u8(fc__q_trunc(floorf(log2f(amax)) - 2 + 127)) : 0;
    const float d = e8m0_half(e);
    y->e = e;
    for (int j = 0; j < 16; ++j) {
        const int x0 = best_index_fp4(x[j], d), x1 = best_index_fp4(x[j + 16], d);
        y->qs[j] = (uint8_t)(x0 | x1 << 4);
    }
}

static void nvfp4_block(const float *x, blk_nvfp4 *y) {
    for (int s = 0; s < 4; s++) {
        const float *xb = x + 16 * s;
        float amax = 0.0f;
        for (int j = 0; j < 16; j++) {
            if (amax < fabsf(xb[j])) amax = fabsf(xb[j]);
        }
        /* amax / 6 maps the largest E2M1 magnitude (6) onto amax */
        const uint8_t ue = f32_to_ue4m3(amax / 6.0f);
        y->d[s] = ue;
        const float d = ue4m3_half(ue);
        for (int j = 0; j < 8; ++j) {
            const int x0 = best_index_fp4(xb[j], d), x1 = best_index_fp4(xb[8 + j], d);
            y->qs[8 * s + j] = (uint8_t)(x0 | x1 << 4);
        }
    }
}

/* ggml's fp4 quantizers take no importance matrix: it is ignored. */
static fc_status mxfp4_row(const float *x, void *dst, int64_t n, const float *im, unsigned fl) {
    (void)im, (void)fl;
    blk_mxfp4 *y = dst;
    for (int64_t i = 0; i < n / 32; i++)
        mxfp4_block(x + 32 * i, &y[i]);
    return FC_OK;
}

static fc_status nvfp4_row(const float *x, void *dst, int64_t n, const float *im, unsigned fl) {
    (void)im, (void)fl;
    blk_nvfp4 *y = dst;
    for (int64_t i = 0; i < n / 64; i++)
        nvfp4_block(x + 64 * i, &y[i]);
    return FC_OK;
}

static void mxfp4_deq(const void *src, float *y, int64_t n) {
    const blk_mxfp4 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = e8m0_half(b[i].e);
        for (int j = 0; j < 16; ++j) {
            y[j] = (float)kvalues_fp4[b[i].qs[j] & 0x0F] * d;
            y[j + 16] = (float)kvalues_fp4[b[i].qs[j] >> 4] * d;
        }
    }
}

static void nvfp4_deq(const void *src, float *y, int64_t n) {
    const blk_nvfp4 *b = src;
    for (int64_t i = 0; i < n / 64; i++) {
        for (int s = 0; s < 4; s++, y += 16) {
            const float d = ue4m3_half(b[i].d[s]);
            for (int j = 0; j < 8; ++j) {
                y[j] = (float)kvalues_fp4[b[i].qs[8 * s + j] & 0x0F] * d;
                y[j + 8] = (float)kvalues_fp4[b[i].qs[8 * s + j] >> 4] * d;
            }
        }
    }
}

static const fc__quant_fns mxfp4_fns = {mxfp4_row, mxfp4_deq};
static const fc__quant_fns nvfp4_fns = {nvfp4_row, nvfp4_deq};

const fc__quant_fns *fc__quant_family_fp4(fc_dtype dtype) {
    switch (dtype) {
    case FC_MXFP4:
        return &mxfp4_fns;
    case FC_NVFP4:
        return &nvfp4_fns;
    default:
        return NULL;
    }
}
