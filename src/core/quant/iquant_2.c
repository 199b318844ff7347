/* SPDX-License-Identifier: MIT */
/* iquant_2.c - quantizers of the 2-bit grid types iq2_xxs, iq2_xs and iq2_s.
 *
 * All three code a super-block of 256 as an f16 scale d, a 4-bit scale per
 * sub-block and, per group of 8 elements, one point of an 8-dimensional
 * lattice of magnitudes (levels 1, 3, 5 times the sub-block scale) plus sign
 * bits. iq2_xxs (sub-blocks of 32, 256-point grid) and iq2_xs (sub-blocks of
 * 16, 512 points) store 7 sign bits per group and force an even number of
 * negatives; iq2_s (16, 1024 points) stores all 8.
 *
 * The weight of element i is imatrix[i] * sqrt(sigma2 + x[i]^2) (sigma2 is
 * the mean square of the super-block), or without an imatrix (iq2_s only)
 * sigma2/4 + x[i]^2 with sigma2 twice the mean square. The super-block scale
 * is d = max sub-block scale / 31 and each sub-block stores
 * round((scale/d - 1) / 2) in 0..15. Choices and float operation order are
 * ggml's (quantize_row_iq2_{xxs,xs,s}_impl), so the bytes are identical.
 */
#include <math.h>

#include "core/quant/iquant_impl.h"

#define EPS_IQ2_XXS 1e-15f
#define EPS_IQ2_XS 1e-15f
#define EPS_IQ2_S 1e-8f
#define EPS_FIT 1e-15f

/* ggml's make_qp_quants for iq2_xxs's starting scale: a weighted fit of x to
 * integer levels 0..nmax. Its level buffer is uint8_t, and x may hold one
 * negative value (the parity-flipped element), whose negative level wraps
 * modulo 256 exactly as in ggml. */
static float fit_levels(int n, int nmax, const float *x, uint8_t *L, const float *w) {
    float max = 0;
    for (int i = 0; i < n; ++i)
        max = fc__iq_maxf(max, x[i]);
    if (max < EPS_FIT) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = (float)nmax / max;
    for (int i = 0; i < n; ++i)
        L[i] = (uint8_t)fc__iq_nearest_int(iscale * x[i]);
    float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; ++i) {
        float diff = x[i] - scale * (float)L[i];
        best_mse += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) continue;
        float iscale_is = (0.1f * (float)is + (float)nmax) / max;
        float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; ++i) {
            int l = fc__iq_nearest_int(iscale_is * x[i]);
            if (l > nmax) l = nmax;
            float diff = x[i] - scale_is * (float)l;
            mse += w[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = fc__iq_nearest_int(iscale * x[i]);
        if (l > nmax) l = nmax;
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * (float)l;
        suml2 += w[i] * (float)l * (float)l;
    }
    /* coordinate descent: move one level at a time while the fit improves */
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            float slx = sumlx - w[i] * x[i] * (float)L[i];
            float sl2 = suml2 - w[i] * (float)L[i] * (float)L[i];
            if (!(slx > 0 && sl2 > 0)) continue;
            int new_l = fc__iq_nearest_int(x[i] * sl2 / slx);
            if (new_l > nmax) new_l = nmax;
            if (new_l == L[i]) continue;
            slx += w[i] * x[i] * (float)new_l;
            sl2 += w[i] * (float)new_l * (float)new_l;
            if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (uint8_t)new_l;
                sumlx = slx;
                suml2 = sl2;
                ++n_changed;
            }
        }
        if (!n_changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

static float sum_squares(const float *x, int n) {
    float s = 0;
    for (int i = 0; i < n; ++i)
        s += x[i] * x[i];
    return s;
}

/* The sub-block scale code: round((scale * id - 1) / 2) clamped to 0..15. */
static uint8_t scale_code(float id, float scale) {
    return (uint8_t)fc__iq_clampi(fc__iq_nearest_int(0.5f * (id * scale - 1)), 0, 15);
}

void fc__iq2_xxs_quantize(const float *x, fc__block_iq2_xxs *y, int64_t k, const float *qw) {
    const fc__iq_lattice *lat = fc__iq_lattice_get(FC__IQ_LAT_IQ2XXS);
    const fc__iq_search search = {lat, 32, 3, -6, 6, 0.1f, true, FC__IQ_REFINE_ALL};
    float weight[32], waux[32], xval[32], scales[8];
    int8_t L[32];

    for (int64_t ibl = 0; ibl < k / FC__IQ_QK; ++ibl) {
        const float *xbl = x + FC__IQ_QK * ibl;
        const float *qwbl = qw + FC__IQ_QK * ibl;
        uint8_t q2[64] = {0};
        float max_scale = 0;
        float sigma2 = sum_squares(xbl, FC__IQ_QK) / FC__IQ_QK;

        for (int ib = 0; ib < 8; ++ib) {
            const float *xb = xbl + 32 * ib;
            for (int i = 0; i < 32; ++i)
                weight[i] = qwbl[32 * ib + i] * sqrtf(sigma2 + xb[i] * xb[i]);
            for (int i = 0; i < 32; ++i)
                waux[i] = sqrtf(weight[i]);
            uint8_t signs[4];
            for (int g = 0; g < 4; ++g)
                signs[g] = fc__iq_fold_signs(xb + 8 * g, weight + 8 * g, xval + 8 * g, true);
            float max = xval[0];
            for (int i = 1; i < 32; ++i)
                max = fc__iq_maxf(max, xval[i]);
            scales[ib] = 0;
            if (max < EPS_IQ2_XXS) continue;

            /* the starting levels stay in L (read as int8_t, as ggml does)
             * unless a trial or the refit replaces them */
            uint8_t Lqp[32];
            float scale = fit_levels(32, 4, xval, Lqp, weight);
            float eff_max = scale * 3;
            if (eff_max <= 0) continue;
            for (int i = 0; i < 32; ++i)
                L[i] = (int8_t)(Lqp[i] <= 127 ? Lqp[i] : Lqp[i] - 256);
            scale = fc__iq_search_scale(&search, xval, weight, waux, eff_max, scale, L);
            if (scale < 0) {
                /* the fit came out negative: flip the scale and every sign */
                scale = -scale;
                for (int g = 0; g < 4; ++g)
                    signs[g] = (uint8_t)(~signs[g] & 127u);
            }
            uint32_t sign_word = 0;
            for (int g = 0; g < 4; ++g) {
                q2[8 * ib + g] = (uint8_t)fc__iq_grid_index(lat, L + 8 * g);
                sign_word |= (uint32_t)signs[g] << (7 * g);
            }
            fc__iq_wr32(q2 + 8 * ib + 4, sign_word);
            scales[ib] = scale;
            max_scale = fc__iq_maxf(max_scale, scale);
        }

        memset(y[ibl].qs, 0, sizeof y[ibl].qs);
        fc__iq_wr_scale(y[ibl].d, 0.f);
        if (!max_scale) continue;
        float d = max_scale / 31;
        fc__iq_wr_scale(y[ibl].d, d);
        float id = 1 / d;
        for (int ib = 0; ib < 8; ++ib) {
            uint32_t w = fc__iq_rd32(q2 + 8 * ib + 4) | (uint32_t)scale_code(id, scales[ib]) << 28;
            fc__iq_wr32(q2 + 8 * ib + 4, w);
        }
        memcpy(y[ibl].qs, q2, sizeof q2);
    }
}

/* iq2_xs and iq2_s share everything but the weights without imatrix, the
 * sign coding and the packing. */
typedef struct iq2_16_kind {
    fc__iq_lattice_id lattice;
    float eps;
    bool parity_signs; /* iq2_xs: 7 coded bits, even parity */
    float d_fudge;     /* multiplies d before it is stored as f16 */
} iq2_16_kind;

/* One super-block of a 16-element type: fills scales (16), gidx (32) and
 * signs (32) and returns the largest sub-block scale. */
static float iq2_16_superblock(const iq2_16_kind *kind, const fc__iq_lattice *lat, const float *xbl,
                               const float *qwbl, float *scales, int *gidx, uint8_t *signs) {
    const fc__iq_search search = {lat, 16, 3, -9, 9, 0.1f, true, FC__IQ_REFINE_OFFGRID};
    float weight[16], waux[16], xval[16];
    int8_t L[16];
    float max_scale = 0;
    float sumx2 = sum_squares(xbl, FC__IQ_QK);
    float sigma2 = kind->parity_signs ? sumx2 / FC__IQ_QK : 2 * sumx2 / FC__IQ_QK;

    for (int ib = 0; ib < 16; ++ib) {
        const float *xb = xbl + 16 * ib;
        if (qwbl) {
            for (int i = 0; i < 16; ++i)
                weight[i] = qwbl[16 * ib + i] * sqrtf(sigma2 + xb[i] * xb[i]);
        } else {
            for (int i = 0; i < 16; ++i)
                weight[i] = 0.25f * sigma2 + xb[i] * xb[i];
        }
        for (int i = 0; i < 16; ++i)
            waux[i] = sqrtf(weight[i]);
        for (int g = 0; g < 2; ++g)
            signs[2 * ib + g] =
                fc__iq_fold_signs(xb + 8 * g, weight + 8 * g, xval + 8 * g, kind->parity_signs);
        float max = xval[0];
        for (int i = 1; i < 16; ++i)
            max = fc__iq_maxf(max, xval[i]);
        memset(L, 0, sizeof L);
        scales[ib] = 0;
        if (max < kind->eps) {
            gidx[2 * ib] = gidx[2 * ib + 1] = -1; /* sub-block left empty */
            continue;
        }
        float scale = fc__iq_search_scale(&search, xval, weight, waux, max, max / 5, L);
        if (scale < 0) {
            scale = -scale;
            for (int g = 0; g < 2; ++g) {
                unsigned flipped = ~(unsigned)signs[2 * ib + g];
                signs[2 * ib + g] = (uint8_t)(kind->parity_signs ? flipped & 127u : flipped);
            }
        }
        for (int g = 0; g < 2; ++g)
            gidx[2 * ib + g] = fc__iq_grid_index(lat, L + 8 * g);
        scales[ib] = scale;
        max_scale = fc__iq_maxf(max_scale, scale);
    }
    return max_scale;
}

static const iq2_16_kind kind_iq2_xs = {FC__IQ_LAT_IQ2XS, EPS_IQ2_XS, true, 1.0f};
static const iq2_16_kind kind_iq2_s = {FC__IQ_LAT_IQ2S, EPS_IQ2_S, false, 0.9875f};

void fc__iq2_xs_quantize(const float *x, fc__block_iq2_xs *y, int64_t k, const float *qw) {
    const fc__iq_lattice *lat = fc__iq_lattice_get(kind_iq2_xs.lattice);
    float scales[16];
    int gidx[32];
    uint8_t signs[32];
    for (int64_t ibl = 0; ibl < k / FC__IQ_QK; ++ibl) {
        float max_scale = iq2_16_superblock(&kind_iq2_xs, lat, x + FC__IQ_QK * ibl,
                                            qw + FC__IQ_QK * ibl, scales, gidx, signs);
        memset(&y[ibl], 0, sizeof y[ibl]);
        if (!max_scale) continue;
        for (int g = 0; g < 32; ++g)
            if (gidx[g] >= 0) fc__iq_wr16(y[ibl].qs + 2 * g, (uint16_t)(gidx[g] | signs[g] << 9));
        float d = max_scale / 31;
        fc__iq_wr_scale(y[ibl].d, d * kind_iq2_xs.d_fudge);
        float id = 1 / d;
        for (int ib = 0; ib < 16; ++ib)
            y[ibl].scales[ib / 2] |= (uint8_t)(scale_code(id, scales[ib]) << 4 * (ib % 2));
    }
}

void fc__iq2_s_quantize(const float *x, fc__block_iq2_s *y, int64_t k, const float *qw) {
    const fc__iq_lattice *lat = fc__iq_lattice_get(kind_iq2_s.lattice);
    float scales[16];
    int gidx[32];
    uint8_t signs[32];
    for (int64_t ibl = 0; ibl < k / FC__IQ_QK; ++ibl) {
        float max_scale = iq2_16_superblock(&kind_iq2_s, lat, x + FC__IQ_QK * ibl,
                                            qw ? qw + FC__IQ_QK * ibl : NULL, scales, gidx, signs);
        memset(&y[ibl], 0, sizeof y[ibl]);
        /* unlike iq2_xs, ggml writes the codes before looking at max_scale */
        for (int g = 0; g < 32; ++g) {
            if (gidx[g] < 0) continue;
            y[ibl].qs[g] = (uint8_t)(gidx[g] & 255);
            y[ibl].qh[g / 4] |= (uint8_t)((gidx[g] >> 8) << 2 * (g % 4));
            y[ibl].qs[32 + g] = signs[g];
        }
        if (!max_scale) continue;
        float d = max_scale / 31;
        fc__iq_wr_scale(y[ibl].d, d * kind_iq2_s.d_fudge);
        float id = 1 / d;
        for (int ib = 0; ib < 16; ++ib)
            y[ibl].scales[ib / 2] |= (uint8_t)(scale_code(id, scales[ib]) << 4 * (ib % 2));
    }
}
