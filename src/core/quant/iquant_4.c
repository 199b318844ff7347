/* SPDX-License-Identifier: MIT */
/* iquant_4.c - quantizers of the non-linear 4-bit types iq4_nl and iq4_xs.
 *
 * Both map each element to one of 16 fixed levels (fc__iq4nl_values, -127 to
 * 113) times a block scale. iq4_nl: blocks of 32 with an f16 scale. iq4_xs:
 * super-blocks of 256 with an f16 d and a 6-bit signed scale (-32..31, times
 * d) per 32.
 *
 * Per block of 32 the scale is fitted by weighted least squares: start from
 * max / -127 (or its negation), assign nearest levels, refit; then with
 * ntry > 0 also try the 2*ntry+1 inverse scales (itry - 127) / max and keep
 * the best fit. ggml runs this with ntry = 7 in ggml_quantize_chunk and with
 * ntry = -1 (no trials, and a starting scale of the opposite sign) in
 * quantize_row_iq4_nl_ref; both variants are here, selected by `ref`.
 * Weights are imatrix[i] * sqrt(sigma2 + x[i]^2) with sigma2 twice the mean
 * square of the (super-)block, or x[i]^2 without an imatrix.
 */
#include <math.h>

#include "core/quant/iquant_impl.h"

#define EPS_IQ4 1e-15f

/* Index of the level nearest to x; on an exact midpoint the upper level. */
static int nearest_level(float x) {
    const int8_t *v = fc__iq4nl_values;
    if (x <= v[0]) return 0;
    if (x >= v[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (x < v[mid])
            hi = mid;
        else
            lo = mid;
    }
    return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

/* Weighted fit of one block of 32 at inverse scale id: level codes into L
 * (when not NULL), sum(w*q*x) and sum(w*q*q). */
static void fit_block(const float *xb, const float *weight, float id, uint8_t *L, float *sqx,
                      float *sq2) {
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
        int l = nearest_level(id * xb[j]);
        if (L) L[j] = (uint8_t)l;
        float q = fc__iq4nl_values[l];
        float w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
    }
    *sqx = sumqx;
    *sq2 = sumq2;
}

/* Scale of one block of 32 (0 for a block below EPS_IQ4, whose L is then left
 * untouched). The first fit writes its codes to L. */
static float block_scale(const float *xb, const float *qw, float sigma2, int ntry, float *weight,
                         uint8_t *L) {
    if (qw) {
        for (int j = 0; j < 32; ++j)
            weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
    } else {
        for (int j = 0; j < 32; ++j)
            weight[j] = xb[j] * xb[j];
    }
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
        float ax = fabsf(xb[j]);
        if (ax > amax) {
            amax = ax;
            max = xb[j];
        }
    }
    if (amax < EPS_IQ4) return 0;
    const float v0 = fc__iq4nl_values[0];
    float d = ntry > 0 ? -max / v0 : max / v0;
    float sumqx, sumq2;
    fit_block(xb, weight, 1 / d, L, &sumqx, &sumq2);
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; ++itry) {
        float id = ((float)itry + v0) / max;
        fit_block(xb, weight, id, NULL, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

static float sigma2_of(const float *x, int n) {
    float s = 0;
    for (int j = 0; j < n; ++j)
        s += x[j] * x[j];
    return s * (2.f / (float)n);
}

/* Two 4-bit codes per byte: element j low, element j+16 high, per 32. */
static void pack_codes(const uint8_t *L, int n, uint8_t *q4) {
    for (int i = 0; i < n / 32; ++i)
        for (int j = 0; j < 16; ++j)
            q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

void fc__iq4_nl_quantize(const float *x, fc__block_iq4_nl *y, int64_t k, const float *qw,
                         bool ref) {
    const int ntry = ref ? -1 : 7;
    float weight[32];
    /* ggml keeps this buffer across the blocks of a call, which shows in the
     * reference variant: a block below EPS_IQ4 repeats the previous codes. */
    uint8_t L[32];
    memset(L, 8, sizeof L);
    for (int64_t ib = 0; ib < k / FC__IQ4NL_QK; ++ib) {
        const float *xb = x + FC__IQ4NL_QK * ib;
        float sigma2 = sigma2_of(xb, 32);
        float d = block_scale(xb, qw ? qw + FC__IQ4NL_QK * ib : NULL, sigma2, ntry, weight, L);
        fc__iq_wr_scale(y[ib].d, d);
        if (ntry > 0) {
            float id = d ? 1 / d : 0;
            for (int j = 0; j < 32; ++j)
                L[j] = (uint8_t)nearest_level(id * xb[j]);
        }
        pack_codes(L, 32, y[ib].qs);
    }
}

void fc__iq4_xs_quantize(const float *x, fc__block_iq4_xs *y, int64_t k, const float *qw) {
    float weight[32], scales[8];
    uint8_t L[FC__IQ_QK];
    for (int64_t ibl = 0; ibl < k / FC__IQ_QK; ++ibl) {
        const float *xbl = x + FC__IQ_QK * ibl;
        fc__block_iq4_xs *b = &y[ibl];
        float sigma2 = sigma2_of(xbl, FC__IQ_QK);
        float max_scale = 0, amax_scale = 0;
        for (int ib = 0; ib < 8; ++ib) {
            const float *qwb = qw ? qw + FC__IQ_QK * ibl + 32 * ib : NULL;
            scales[ib] = block_scale(xbl + 32 * ib, qwb, sigma2, 7, weight, L + 32 * ib);
            float abs_d = fabsf(scales[ib]);
            if (abs_d > amax_scale) {
                amax_scale = abs_d;
                max_scale = scales[ib];
            }
        }

        /* d is negative-signed so that the largest block gets code -32 */
        float d = -max_scale / 32;
        fc__iq_wr_scale(b->d, d);
        float id = d ? 1 / d : 0.f;
        uint16_t scales_h = 0;
        memset(b->scales_l, 0, sizeof b->scales_l);
        for (int ib = 0; ib < 8; ++ib) {
            int l = fc__iq_clampi(fc__iq_nearest_int(id * scales[ib]), -32, 31);
            float dl = d * (float)l;
            float idl = dl ? 1 / dl : 0.f;
            const float *xb = xbl + 32 * ib;
            for (int j = 0; j < 32; ++j)
                L[32 * ib + j] = (uint8_t)nearest_level(idl * xb[j]);
            l += 32;
            b->scales_l[ib / 2] |= (uint8_t)((l & 0xf) << 4 * (ib % 2));
            scales_h |= (uint16_t)((l >> 4) << 2 * ib);
        }
        fc__iq_wr16(b->scales_h, scales_h);
        pack_codes(L, FC__IQ_QK, b->qs);
    }
}
