/* SPDX-License-Identifier: MIT */
/* iquant_3.c - quantizers of the 3-bit grid types iq3_xxs and iq3_s.
 *
 * Both code a super-block of 256 as an f16 scale d, a 4-bit scale per
 * sub-block of 32, and per group of 4 elements one point of a 4-dimensional
 * lattice of odd magnitudes 1..15 (times the sub-block scale). iq3_xxs uses a
 * 256-point grid and 7 sign bits per 8 elements with even parity; iq3_s a
 * 512-point grid (ninth index bit in qh) and all 8 sign bits.
 *
 * Weights are imatrix[i] * sqrt(sigma2 + x[i]^2) with sigma2 twice the mean
 * square of the super-block, or x[i]^2 without an imatrix. The stored d is
 * (max sub-block scale / 31) times a small factor (1.0125 for iq3_xxs, 1.033
 * for iq3_s), while the sub-block codes are rounded against the unscaled d.
 * All choices and float orders are ggml's (quantize_row_iq3_xxs_impl,
 * quantize_row_iq3_s_impl), including one quirk of iq3_s: a sub-block that is
 * exactly zero does not advance the write position of the grid bytes and
 * signs, so the next sub-block's codes land in its slot.
 */
#include <math.h>

#include "core/quant/iquant_impl.h"

#define EPS_IQ3_XXS 1e-8f

/* Weights, sign folding and the largest magnitude of one sub-block of 32. */
static float prepare_subblock(const float *xb, const float *qw, float sigma2, bool parity,
                              float *weight, float *waux, float *xval, uint8_t *signs) {
    if (qw) {
        for (int i = 0; i < 32; ++i)
            weight[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
    } else {
        for (int i = 0; i < 32; ++i)
            weight[i] = xb[i] * xb[i];
    }
    for (int i = 0; i < 32; ++i)
        waux[i] = sqrtf(weight[i]);
    for (int g = 0; g < 4; ++g)
        signs[g] = fc__iq_fold_signs(xb + 8 * g, weight + 8 * g, xval + 8 * g, parity);
    float max = xval[0];
    for (int i = 1; i < 32; ++i)
        max = fc__iq_maxf(max, xval[i]);
    return max;
}

static float sigma2_of(const float *xbl) {
    float sumx2 = 0;
    for (int i = 0; i < FC__IQ_QK; ++i)
        sumx2 += xbl[i] * xbl[i];
    return 2 * sumx2 / FC__IQ_QK;
}

static uint8_t scale_code(float id, float scale) {
    return (uint8_t)fc__iq_clampi(fc__iq_nearest_int(0.5f * (id * scale - 1)), 0, 15);
}

void fc__iq3_xxs_quantize(const float *x, fc__block_iq3_xxs *y, int64_t k, const float *qw) {
    const fc__iq_lattice *lat = fc__iq_lattice_get(FC__IQ_LAT_IQ3XXS);
    const fc__iq_search search = {lat, 32, 8, -15, 15, 0.2f, true, FC__IQ_REFINE_OFFGRID};
    float weight[32], waux[32], xval[32], scales[8];
    int8_t L[32];

    for (int64_t ibl = 0; ibl < k / FC__IQ_QK; ++ibl) {
        const float *xbl = x + FC__IQ_QK * ibl;
        uint8_t q3[96] = {0}; /* 64 grid bytes, then 8 sign/scale words */
        float max_scale = 0;
        float sigma2 = sigma2_of(xbl);

        for (int ib = 0; ib < 8; ++ib) {
            uint8_t signs[4];
            float max = prepare_subblock(xbl + 32 * ib, qw ? qw + FC__IQ_QK * ibl + 32 * ib : NULL,
                                         sigma2, true, weight, waux, xval, signs);
            memset(L, 0, sizeof L);
            scales[ib] = 0;
            if (max < EPS_IQ3_XXS) continue;
            float scale = fc__iq_search_scale(&search, xval, weight, waux, max, max / 15, L);
            if (scale < 0) {
                scale = -scale;
                for (int g = 0; g < 4; ++g)
                    signs[g] = (uint8_t)(~signs[g] & 127u);
            }
            for (int g = 0; g < 8; ++g)
                q3[8 * ib + g] = (uint8_t)fc__iq_grid_index(lat, L + 4 * g);
            fc__iq_wr32(q3 + 64 + 4 * ib, (uint32_t)signs[0] | (uint32_t)signs[1] << 7 |
                                              (uint32_t)signs[2] << 14 | (uint32_t)signs[3] << 21);
            scales[ib] = scale;
            max_scale = fc__iq_maxf(max_scale, scale);
        }

        fc__iq_wr_scale(y[ibl].d, 0.f);
        memset(y[ibl].qs, 0, sizeof y[ibl].qs);
        if (!max_scale) continue;
        float d = max_scale / 31;
        fc__iq_wr_scale(y[ibl].d, d * 1.0125f);
        float id = 1 / d;
        for (int ib = 0; ib < 8; ++ib) {
            uint32_t w = fc__iq_rd32(q3 + 64 + 4 * ib) | (uint32_t)scale_code(id, scales[ib]) << 28;
            fc__iq_wr32(q3 + 64 + 4 * ib, w);
        }
        memcpy(y[ibl].qs, q3, sizeof q3);
    }
}

void fc__iq3_s_quantize(const float *x, fc__block_iq3_s *y, int64_t k, const float *qw) {
    const fc__iq_lattice *lat = fc__iq_lattice_get(FC__IQ_LAT_IQ3S);
    const fc__iq_search search = {lat, 32, 8, -9, 9, 0.2f, false, FC__IQ_REFINE_ALL_IF_OFF};
    float weight[32], waux[32], xval[32], scales[8];
    int8_t L[32];

    for (int64_t ibl = 0; ibl < k / FC__IQ_QK; ++ibl) {
        const float *xbl = x + FC__IQ_QK * ibl;
        fc__block_iq3_s *b = &y[ibl];
        memset(b, 0, sizeof *b);
        int slot = 0; /* sub-blocks written so far: where qs and signs go next */
        float max_scale = 0;
        float sigma2 = sigma2_of(xbl);

        for (int ib = 0; ib < 8; ++ib) {
            uint8_t signs[4];
            float max = prepare_subblock(xbl + 32 * ib, qw ? qw + FC__IQ_QK * ibl + 32 * ib : NULL,
                                         sigma2, false, weight, waux, xval, signs);
            memset(L, 0, sizeof L);
            scales[ib] = 0;
            if (!max) continue;
            float scale = fc__iq_search_scale(&search, xval, weight, waux, max, max / 15, L);
            if (scale < 0) {
                scale = -scale;
                for (int g = 0; g < 4; ++g)
                    signs[g] = (uint8_t)~signs[g];
            }
            for (int g = 0; g < 8; ++g) {
                int gi = fc__iq_grid_index(lat, L + 4 * g);
                b->qs[8 * slot + g] = (uint8_t)(gi & 255);
                b->qh[ib] |= (uint8_t)((gi >> 8) << g);
            }
            memcpy(b->signs + 4 * slot, signs, 4);
            ++slot;
            scales[ib] = scale;
            max_scale = fc__iq_maxf(max_scale, scale);
        }

        if (!max_scale) continue;
        float d = max_scale / 31;
        fc__iq_wr_scale(b->d, d * 1.033f);
        float id = 1 / d;
        for (int ib = 0; ib < 8; ib += 2)
            b->scales[ib / 2] =
                (uint8_t)(scale_code(id, scales[ib]) | scale_code(id, scales[ib + 1]) << 4);
    }
}
