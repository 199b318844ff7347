/* SPDX-License-Identifier: MIT */
/* nf4.c - the NF4 codebook as a block dtype (FC_NF4) and the blockwise
 * int8 / int4 / NF4 quantization with double quantization of seed 004.
 *
 * NF4 (QLoRA) is a 16-level codebook of normal-distribution quantiles
 * scaled to [-1, 1], with an exact 0 at level 7: weights that are roughly
 * normal lose less to it than to an evenly spaced 4-bit grid. A value is
 * coded as the level nearest to x / absmax (the lower level on a tie).
 *
 * FC_NF4 block, 34 bytes per 64 values: {f16 absmax; u8 codes[32]}, value
 * 2i in the low nibble of codes[i], 2i+1 in the high nibble. Values are
 * normalised by the stored (f16-rounded) scale, which is what decoding
 * multiplies by, so the f16 rounding of the scale costs no extra error; a
 * block whose absmax exceeds 65504 saturates the scale there and clips.
 *
 * The blockwise API (layouts in fucina/quant.h) works on any block size
 * with a shorter last block scaled on its own. Decoding multiplies the
 * normalised code by the scale ((code / qmax) * absmax), which cannot
 * overflow for any finite absmax. Nothing here allocates; every entry point
 * validates all of its input before writing anything. */
#include <float.h>
#include <math.h>
#include <stdbool.h>

#include "core/quant/quant.h"
#include "fucina/quant.h"

/* bitsandbytes' NF4 table (the QLoRA paper's quantiles), as f32. */
static const float nf4_levels[16] = {
    -1.0f,
    -0.6961928009986877f,
    -0.5250730514526367f,
    -0.39491748809814453f,
    -0.28444138169288635f,
    -0.18477343022823334f,
    -0.09105003625154495f,
    0.0f,
    0.07958029955625534f,
    0.16093020141124725f,
    0.24611230194568634f,
    0.33791524171829224f,
    0.44070982933044434f,
    0.5626170039176941f,
    0.7229568362236023f,
    1.0f,
};

#define NF4_ZERO_INDEX 7

float fc_nf4_level(int index) { return index >= 0 && index < 16 ? nf4_levels[index] : 0.0f; }

/* Index of the level nearest to v (lowest index on ties). */
static int nf4_nearest(float v) {
    int best = 0;
    float best_err = fabsf(v - nf4_levels[0]);
    for (int i = 1; i < 16; i++) {
        float err = fabsf(v - nf4_levels[i]);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

static bool is_finite(float v) { return (fc__q_f32_bits(v) & 0x7f800000u) != 0x7f800000u; }

static float absmax_of(const float *x, size_t n) {
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    return amax;
}

/* ---- FC_NF4 block dtype ------------------------------------------------------ */

typedef struct blk_nf4 {
    uint8_t d[2];
    uint8_t qs[32];
} blk_nf4;
_Static_assert(sizeof(blk_nf4) == 34, "nf4 block is 34 bytes");

static void nf4_block(const float *x, blk_nf4 *y) {
    fc__q_put_f16(y->d, absmax_of(x, 64));
    const float d = fc__q_get_f16(y->d);
    for (int i = 0; i < 32; i++) {
        int lo = d > 0.0f ? nf4_nearest(x[2 * i] / d) : NF4_ZERO_INDEX;
        int hi = d > 0.0f ? nf4_nearest(x[2 * i + 1] / d) : NF4_ZERO_INDEX;
        y->qs[i] = (uint8_t)(lo | hi << 4);
    }
}

/* FC_NF4 has no weighted quantizer: the imatrix is ignored. */
static fc_status nf4_row(const float *x, void *dst, int64_t n, const float *im, unsigned fl) {
    (void)im, (void)fl;
    blk_nf4 *y = dst;
    for (int64_t i = 0; i < n / 64; i++)
        nf4_block(x + 64 * i, &y[i]);
    return FC_OK;
}

static void nf4_deq(const void *src, float *y, int64_t n) {
    const blk_nf4 *b = src;
    for (int64_t i = 0; i < n / 64; i++, y += 64) {
        const float d = fc__q_get_f16(b[i].d);
        for (int j = 0; j < 32; j++) {
            y[2 * j] = nf4_levels[b[i].qs[j] & 0x0F] * d;
            y[2 * j + 1] = nf4_levels[b[i].qs[j] >> 4] * d;
        }
    }
}

static const fc__quant_fns nf4_fns = {nf4_row, nf4_deq};

const fc__quant_fns *fc__quant_family_nf4(fc_dtype dtype) {
    return dtype == FC_NF4 ? &nf4_fns : NULL;
}

/* ---- blockwise int8 / int4 / NF4 --------------------------------------------- */

size_t fc_blockq_block_count(size_t n, size_t block_size) {
    if (block_size == 0) return 0;
    return n / block_size + (n % block_size != 0);
}

/* Largest code of the symmetric kinds (NF4 has none). */
static float kind_qmax(fc_blockq_kind kind) { return kind == FC_BLOCKQ_INT8 ? 127.0f : 7.0f; }

/* Code of v = x / absmax, |v| <= 1. */
static int8_t encode(fc_blockq_kind kind, float v) {
    if (kind == FC_BLOCKQ_NF4) return (int8_t)(nf4_nearest(v) - 8);
    return (int8_t)roundf(v * kind_qmax(kind));
}

static float decode(fc_blockq_kind kind, int8_t code, float scale) {
    if (kind == FC_BLOCKQ_NF4) return nf4_levels[code + 8] * scale;
    return ((float)code / kind_qmax(kind)) * scale;
}

static fc_status check_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!is_finite(x[i])) return FC_ERR_NON_FINITE;
    }
    return FC_OK;
}

fc_status fc_blockq_quantize(fc_blockq_kind kind, const float *x, size_t n, size_t block_size,
                             int8_t *codes, float *scales) {
    if (!x || !codes || !scales) return FC_ERR_NULL_ARG;
    if ((unsigned)kind >= FC_BLOCKQ_COUNT) return FC_ERR_INVALID_ARG;
    if (n == 0 || block_size == 0) return FC_ERR_INVALID_SHAPE;
    fc_status st = check_finite(x, n);
    if (st != FC_OK) return st;
    for (size_t start = 0, b = 0; start < n; start += block_size, b++) {
        const size_t len = n - start < block_size ? n - start : block_size;
        const float amax = absmax_of(x + start, len);
        scales[b] = amax;
        for (size_t i = 0; i < len; i++) {
            /* x / amax is correctly rounded, so it never leaves [-1, 1], even when
             * amax is subnormal, where 1 / amax would overflow */
            codes[start + i] = amax > 0.0f ? encode(kind, x[start + i] / amax) : encode(kind, 0.0f);
        }
    }
    return FC_OK;
}

fc_status fc_blockq_dequantize(fc_blockq_kind kind, const int8_t *codes, const float *scales,
                               size_t n, size_t block_size, float *out) {
    if (!codes || !scales || !out) return FC_ERR_NULL_ARG;
    if ((unsigned)kind >= FC_BLOCKQ_COUNT) return FC_ERR_INVALID_ARG;
    if (n == 0 || block_size == 0) return FC_ERR_INVALID_SHAPE;
    if (kind != FC_BLOCKQ_INT8) {
        for (size_t i = 0; i < n; i++) {
            if (codes[i] < -8 || codes[i] > 7) return FC_ERR_INVALID_ARG;
        }
    }
    const size_t nb = fc_blockq_block_count(n, block_size);
    for (size_t b = 0; b < nb; b++) {
        if (!is_finite(scales[b]) || scales[b] < 0.0f) return FC_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = decode(kind, codes[i], scales[i / block_size]);
    return FC_OK;
}

/* ---- 4-bit packing ------------------------------------------------------------ */

size_t fc_int4_packed_bytes(size_t n) { return n / 2 + n % 2; }

fc_status fc_pack_int4(const int8_t *codes, size_t n, uint8_t *out) {
    if (!codes || !out) return FC_ERR_NULL_ARG;
    for (size_t i = 0; i < n; i++) {
        if (codes[i] < -8 || codes[i] > 7) return FC_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < n; i += 2) {
        unsigned lo = (unsigned)(codes[i] + 8);
        unsigned hi = i + 1 < n ? (unsigned)(codes[i + 1] + 8) : 0u;
        out[i / 2] = (uint8_t)(lo | hi << 4);
    }
    return FC_OK;
}

fc_status fc_unpack_int4(const uint8_t *packed, size_t n, int8_t *codes) {
    if (!packed || !codes) return FC_ERR_NULL_ARG;
    for (size_t i = 0; i < n; i++) {
        unsigned nib = i % 2 ? packed[i / 2] >> 4 : packed[i / 2] & 0x0Fu;
        codes[i] = (int8_t)((int)nib - 8);
    }
    return FC_OK;
}

/* ---- double quantization of the block scales ----------------------------------- */

fc_status fc_double_quant_scales(const float *scales, size_t n_scales, size_t outer_block,
                                 int8_t *q, float *absmax, float *mean) {
    if (!scales || !q || !absmax || !mean) return FC_ERR_NULL_ARG;
    if (n_scales == 0 || outer_block == 0) return FC_ERR_INVALID_SHAPE;
    for (size_t i = 0; i < n_scales; i++) {
        if (!is_finite(scales[i])) return FC_ERR_NON_FINITE;
        if (scales[i] < 0.0f) return FC_ERR_INVALID_ARG;
    }
    for (size_t start = 0, o = 0; start < n_scales; start += outer_block, o++) {
        const size_t len = n_scales - start < outer_block ? n_scales - start : outer_block;
        const float *s = scales + start;
        /* a double sum of <= 2^64 values below FLT_MAX cannot overflow */
        double sum = 0.0;
        for (size_t i = 0; i < len; i++)
            sum += s[i];
        const float m = (float)(sum / (double)len);
        /* both operands are >= 0, so each difference is finite */
        float amax = 0.0f;
        for (size_t i = 0; i < len; i++) {
            float dev = fabsf(s[i] - m);
            amax = dev > amax ? dev : amax;
        }
        mean[o] = m;
        absmax[o] = amax;
        for (size_t i = 0; i < len; i++) {
            q[start + i] = amax > 0.0f ? (int8_t)roundf((s[i] - m) / amax * 127.0f) : 0;
        }
    }
    return FC_OK;
}

fc_status fc_double_dequant_scales(const int8_t *q, const float *absmax, const float *mean,
                                   size_t n_scales, size_t outer_block, float *scales) {
    if (!q || !absmax || !mean || !scales) return FC_ERR_NULL_ARG;
    if (n_scales == 0 || outer_block == 0) return FC_ERR_INVALID_SHAPE;
    const size_t no = fc_blockq_block_count(n_scales, outer_block);
    for (size_t o = 0; o < no; o++) {
        if (!is_finite(absmax[o]) || absmax[o] < 0.0f) return FC_ERR_INVALID_ARG;
        if (!is_finite(mean[o]) || mean[o] < 0.0f) return FC_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < n_scales; i++) {
        const size_t o = i / outer_block;
        float s = ((float)q[i] / 127.0f) * absmax[o];
        s += mean[o];
        /* a scale is an absmax: keep it in [0, FLT_MAX] whatever the codes */
        scales[i] = s < 0.0f ? 0.0f : (s > FLT_MAX ? FLT_MAX : s);
    }
    return FC_OK;
}
