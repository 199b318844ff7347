/* SPDX-License-Identifier: MIT */
/* iquant_1.c - quantizers of the ternary grid types iq1_s and iq1_m.
 *
 * Each group of 8 elements is one point of a 2048-point lattice with
 * coordinates in {-1, 0, +1}, shifted by +-1/8 ("delta", one sign per
 * sub-block in iq1_s, per group of 8 in iq1_m) and scaled per sub-block
 * (32 elements in iq1_s, 16 in iq1_m) by an odd multiple 1..15 of the
 * super-block scale.
 *
 * With three levels the weighted least-squares problem of a sub-block is
 * solved exactly: sort the elements, and every choice of two cut points in
 * the sorted order (everything below the first cut gets -1, between the cuts
 * 0, above +1) is scored in closed form; the best split then snaps to the
 * lattice (neighbour search when it is off the grid). The sort must be
 * stable on ties, as glibc's merge sort is for ggml, or repeated values
 * would be cut in a different order. Weights, fudge factors and float order
 * are ggml's (quantize_row_iq1_s_impl, quantize_row_iq1_m_impl).
 */
#include <float.h>
#include <math.h>

#include "core/quant/iquant_impl.h"

#define IQ1_DELTA 0.125f
#define EPS_IQ1_S 1e-12f
#define EPS_IQ1_M 1e-7f

/* The three reconstruction levels for a positive and a negative shift. */
static const float levels_p[3] = {-1 + IQ1_DELTA, IQ1_DELTA, 1 + IQ1_DELTA};
static const float levels_m[3] = {-1 - IQ1_DELTA, -IQ1_DELTA, 1 - IQ1_DELTA};

/* order[] = indices of x[0..n) by ascending value, equal values in index
 * order (a stable insertion sort; n <= 32). */
static void stable_order(const float *x, int n, int *order) {
    for (int i = 0; i < n; ++i) {
        int j = i;
        while (j > 0 && x[order[j - 1]] > x[i]) {
            order[j] = order[j - 1];
            --j;
        }
        order[j] = i;
    }
}

/* The best lattice point near the off-grid key for values x with the given
 * shift levels: least sum w * (scale * lv - x)^2, first one on ties. When no
 * score is below FLT_MAX (non-finite data; ggml then reads out of bounds) the
 * first neighbour is used. */
static int iq1_best_neighbour(const fc__iq_lattice *lat, int key, const float *x, const float *w,
                              float scale, const float *lv, int8_t *L) {
    const uint16_t *list = lat->pool + (-lat->map[key] - 1);
    int best = list[1];
    float best_d2 = FLT_MAX;
    for (int j = 1; j <= list[0]; ++j) {
        const uint8_t *pg = lat->levels + 8 * (size_t)list[j];
        float d2 = 0;
        for (int i = 0; i < 8; ++i) {
            float q = lv[(pg[i] - 1) / 2];
            float w_i = w[i];
            float diff = scale * q - x[i];
            d2 += w_i * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = list[j];
        }
    }
    const uint8_t *pg = lat->levels + 8 * (size_t)best;
    for (int i = 0; i < 8; ++i)
        L[i] = (int8_t)((pg[i] - 1) / 2);
    return best;
}

/* Snaps group g (8 digits of L) to the lattice; returns its grid index and
 * clears *on_grid when the neighbour search had to choose. */
static int snap_group(const fc__iq_lattice *lat, const float *xb, const float *weight, float scale,
                      const float *lv, int8_t *L, bool *on_grid) {
    int key = fc__iq_key(lat, L);
    if (lat->map[key] >= 0) return lat->map[key];
    *on_grid = false;
    return iq1_best_neighbour(lat, key, xb, weight, scale, lv, L);
}

/* Refit of the scale on the snapped points: sum(w*q*x) / sum(w*q*q) when both
 * sums are positive, else the old scale. */
static float refit(const fc__iq_lattice *lat, int ngroups, const int *gidx, const float *xb,
                   const float *weight, const float *const *lv, float scale) {
    float sumqx = 0, sumq2 = 0;
    for (int g = 0; g < ngroups; ++g) {
        const uint8_t *pg = lat->levels + 8 * (size_t)gidx[g];
        for (int j = 0; j < 8; ++j) {
            float w = weight[8 * g + j];
            float q = lv[g][(pg[j] - 1) / 2];
            sumqx += w * q * xb[8 * g + j];
            sumq2 += w * q * q;
        }
    }
    return sumqx > 0 && sumq2 > 0 ? sumqx / sumq2 : scale;
}

static float sigma2_of(const float *xbl) {
    float sumx2 = 0;
    for (int i = 0; i < FC__IQ_QK; ++i)
        sumx2 += xbl[i] * xbl[i];
    return 2 * sumx2 / FC__IQ_QK;
}

static void make_weights(const float *xb, const float *qw, float sigma2, int n, float *weight) {
    if (qw) {
        for (int i = 0; i < n; ++i)
            weight[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
    } else {
        for (int i = 0; i < n; ++i)
            weight[i] = xb[i] * xb[i];
    }
}

static float max_abs(const float *xb, int n) {
    float max = fabsf(xb[0]);
    for (int i = 1; i < n; ++i)
        max = fc__iq_maxf(max, fabsf(xb[i]));
    return max;
}

/* ---- iq1_s: sub-blocks of 32, one shift sign per sub-block ---------------- */

/* Best split of one sub-block; returns false when no split has a positive
 * denominator. Fills L (digits 0..2), *scale and *shift (+1 or -1). */
static bool iq1_s_split(const float *xb, const float *weight, int8_t *L, float *scale_out,
                        int *shift_out, float max) {
    int order[32];
    float sumx[33], sumw[33];
    stable_order(xb, 32, order);
    sumx[0] = sumw[0] = 0;
    for (int j = 0; j < 32; ++j) {
        int i = order[j];
        sumx[j + 1] = sumx[j] + weight[i] * xb[i];
        sumw[j + 1] = sumw[j] + weight[i];
    }
    float best_score = -FLT_MAX, scale = max;
    int best1 = -1, best2 = -1, best_shift = 0;
    for (int i1 = 0; i1 <= 32; ++i1) {
        for (int i2 = i1; i2 <= 32; ++i2) {
            for (int sh = 0; sh < 2; ++sh) {
                const float *lv = sh == 0 ? levels_p : levels_m;
                float sumqx = (sumx[i1] - sumx[0]) * lv[0] + (sumx[i2] - sumx[i1]) * lv[1] +
                              (sumx[32] - sumx[i2]) * lv[2];
                float sumq2 = (sumw[i1] - sumw[0]) * lv[0] * lv[0] +
                              (sumw[i2] - sumw[i1]) * lv[1] * lv[1] +
                              (sumw[32] - sumw[i2]) * lv[2] * lv[2];
                if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
                    scale = sumqx / sumq2;
                    best_score = scale * sumqx;
                    best1 = i1;
                    best2 = i2;
                    best_shift = sh == 0 ? 1 : -1;
                }
            }
        }
    }
    if (best1 < 0 || best2 < 0 || best_shift == 0) return false;
    for (int j = 0; j < 32; ++j)
        L[order[j]] = (int8_t)(j < best1 ? 0 : j < best2 ? 1 : 2);
    if (scale < 0) {
        for (int j = 0; j < 32; ++j)
            L[j] = (int8_t)(2 - L[j]);
        scale = -scale;
        best_shift = -best_shift;
    }
    *scale_out = scale;
    *shift_out = best_shift;
    return true;
}

void fc__iq1_s_quantize(const float *x, fc__block_iq1_s *y, int64_t k, const float *qw) {
    const fc__iq_lattice *lat = fc__iq_lattice_get(FC__IQ_LAT_IQ1S);
    float weight[32], scales[8];
    int shifts[8];
    int8_t L[32];

    for (int64_t ibl = 0; ibl < k / FC__IQ_QK; ++ibl) {
        const float *xbl = x + FC__IQ_QK * ibl;
        fc__block_iq1_s *b = &y[ibl];
        memset(b, 0, sizeof *b);
        uint16_t qh[8] = {0};
        float max_scale = 0;
        float sigma2 = sigma2_of(xbl);

        for (int ib = 0; ib < 8; ++ib) {
            const float *xb = xbl + 32 * ib;
            make_weights(xb, qw + FC__IQ_QK * ibl + 32 * ib, sigma2, 32, weight);
            scales[ib] = 0;
            shifts[ib] = 1;
            float max = max_abs(xb, 32);
            float scale;
            int shift;
            if (max < EPS_IQ1_S || !iq1_s_split(xb, weight, L, &scale, &shift, max)) continue;

            const float *lv = shift == 1 ? levels_p : levels_m;
            const float *lvs[4] = {lv, lv, lv, lv};
            int gidx[4];
            bool on_grid = true;
            for (int g = 0; g < 4; ++g)
                gidx[g] =
                    snap_group(lat, xb + 8 * g, weight + 8 * g, scale, lv, L + 8 * g, &on_grid);
            if (!on_grid) scale = refit(lat, 4, gidx, xb, weight, lvs, scale);
            uint16_t h = 0;
            for (int g = 0; g < 4; ++g) {
                b->qs[4 * ib + g] = (uint8_t)(gidx[g] & 255);
                h |= (uint16_t)((gidx[g] >> 8) << 3 * g);
            }
            qh[ib] = h;
            scales[ib] = scale;
            shifts[ib] = shift;
            max_scale = fc__iq_maxf(max_scale, scale);
        }

        if (max_scale) {
            float d = max_scale / 15;
            fc__iq_wr_scale(b->d, d * 1.125f);
            float id = 1 / d;
            for (int ib = 0; ib < 8; ++ib) {
                int l = fc__iq_clampi(fc__iq_nearest_int(0.5f * (id * scales[ib] - 1)), 0, 7);
                if (shifts[ib] == -1) l |= 8;
                qh[ib] |= (uint16_t)(l << 12);
            }
        }
        for (int ib = 0; ib < 8; ++ib)
            fc__iq_wr16(b->qh + 2 * ib, qh[ib]);
    }
}

/* ---- iq1_m: sub-blocks of 16, one shift sign per group of 8 --------------- */

/* Shift pattern k in 0..3: bit 1 = negative shift for the first group, bit 0
 * for the second (ggml's order: ++, +-, -+, --). */
static const float *pattern_levels(int k, int group) {
    int neg = group == 0 ? k >= 2 : k % 2 == 1;
    return neg ? levels_m : levels_p;
}

/* Best split and shift pattern of one sub-block of 16. The sums are rebuilt
 * from scratch for every split, as in ggml, so their rounding matches. */
static bool iq1_m_split(const float *xb, const float *weight, int8_t *L, float *scale_out,
                        int *pattern_out, float max) {
    int order[16];
    stable_order(xb, 16, order);
    float best_score = -FLT_MAX, scale = max;
    int best1 = -1, best2 = -1, best_k = -1;
    for (int i1 = 0; i1 <= 16; ++i1) {
        for (int i2 = i1; i2 <= 16; ++i2) {
            float sumqx[4] = {0}, sumq2[4] = {0};
            for (int j = 0; j < 16; ++j) {
                int i = order[j];
                int level = j < i1 ? 0 : j < i2 ? 1 : 2;
                for (int kk = 0; kk < 4; ++kk) {
                    float q = pattern_levels(kk, i < 8 ? 0 : 1)[level];
                    sumqx[kk] += weight[i] * q * xb[i];
                    sumq2[kk] += weight[i] * q * q;
                }
            }
            for (int kk = 0; kk < 4; ++kk) {
                if (sumq2[kk] > 0 && sumqx[kk] * sumqx[kk] > best_score * sumq2[kk]) {
                    scale = sumqx[kk] / sumq2[kk];
                    best_score = scale * sumqx[kk];
                    best1 = i1;
                    best2 = i2;
                    best_k = kk;
                }
            }
        }
    }
    if (best1 < 0 || best2 < 0 || best_k < 0) return false;
    for (int j = 0; j < 16; ++j)
        L[order[j]] = (int8_t)(j < best1 ? 0 : j < best2 ? 1 : 2);
    if (scale < 0) {
        for (int j = 0; j < 16; ++j)
            L[j] = (int8_t)(2 - L[j]);
        scale = -scale;
        best_k = 3 - best_k; /* both shifts flip */
    }
    *scale_out = scale;
    *pattern_out = best_k;
    return true;
}

/* Final super-block scale of iq1_m: a weighted refit of d over all 256
 * elements on the chosen points and sub-block codes. Writes the codes into
 * the block (sc, qh shift bits) as it goes and returns d. */
static float iq1_m_finish(const fc__iq_lattice *lat, fc__block_iq1_m *b, const float *xbl,
                          const float *qwbl, float sigma2, const float *scales, const int *patterns,
                          float max_scale, uint16_t *sc) {
    static const uint8_t shift_bits[4] = {0x00, 0x80, 0x08, 0x88};
    float weight[16];
    float d = max_scale / 15;
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int ib = 0; ib < 16; ++ib) {
        int l = fc__iq_clampi(fc__iq_nearest_int(0.5f * (id * scales[ib] - 1)), 0, 7);
        sc[ib / 4] |= (uint16_t)(l << 3 * (ib % 4));
        b->qh[ib] |= shift_bits[patterns[ib]];
        const float *xb = xbl + 16 * ib;
        make_weights(xb, qwbl ? qwbl + 16 * ib : NULL, sigma2, 16, weight);
        for (int g = 0; g < 2; ++g) {
            const float *lv = pattern_levels(patterns[ib], g);
            int gi = b->qs[2 * ib + g] | ((b->qh[ib] << (8 - 4 * g)) & 0x700);
            const uint8_t *pg = lat->levels + 8 * (size_t)gi;
            for (int j = 0; j < 8; ++j) {
                float w = weight[8 * g + j];
                float q = lv[(pg[j] - 1) / 2] * (float)(2 * l + 1);
                sumqx += w * q * xb[8 * g + j];
                sumq2 += w * q * q;
            }
        }
    }
    return sumq2 > 0 ? sumqx / sumq2 : d;
}

void fc__iq1_m_quantize(const float *x, fc__block_iq1_m *y, int64_t k, const float *qw) {
    const fc__iq_lattice *lat = fc__iq_lattice_get(FC__IQ_LAT_IQ1S);
    float weight[16], scales[16];
    int patterns[16];
    int8_t L[16];

    for (int64_t ibl = 0; ibl < k / FC__IQ_QK; ++ibl) {
        const float *xbl = x + FC__IQ_QK * ibl;
        const float *qwbl = qw ? qw + FC__IQ_QK * ibl : NULL;
        fc__block_iq1_m *b = &y[ibl];
        memset(b, 0, sizeof *b);
        float max_scale = 0;
        float sigma2 = sigma2_of(xbl);

        for (int ib = 0; ib < 16; ++ib) {
            const float *xb = xbl + 16 * ib;
            make_weights(xb, qwbl ? qwbl + 16 * ib : NULL, sigma2, 16, weight);
            scales[ib] = 0;
            patterns[ib] = 0;
            float max = max_abs(xb, 16);
            float scale;
            int pattern;
            if (max < EPS_IQ1_M || !iq1_m_split(xb, weight, L, &scale, &pattern, max)) continue;

            const float *lvs[2] = {pattern_levels(pattern, 0), pattern_levels(pattern, 1)};
            int gidx[2];
            bool on_grid = true;
            for (int g = 0; g < 2; ++g)
                gidx[g] =
                    snap_group(lat, xb + 8 * g, weight + 8 * g, scale, lvs[g], L + 8 * g, &on_grid);
            if (!on_grid) scale = refit(lat, 2, gidx, xb, weight, lvs, scale);
            b->qs[2 * ib] = (uint8_t)(gidx[0] & 255);
            b->qs[2 * ib + 1] = (uint8_t)(gidx[1] & 255);
            b->qh[ib] = (uint8_t)((gidx[0] >> 8) | ((gidx[1] >> 8) << 4));
            scales[ib] = scale;
            patterns[ib] = pattern;
            max_scale = fc__iq_maxf(max_scale, scale);
        }
        if (!max_scale) continue;

        uint16_t sc[4] = {0};
        float d = iq1_m_finish(lat, b, xbl, qwbl, sigma2, scales, patterns, max_scale, sc);
        /* the f16 bits of d are spread over the top nibbles of the 4 scale words */
        uint16_t dbits = fc__q_f16_scale(d * 1.1125f);
        sc[0] |= (uint16_t)((dbits & 0x000f) << 12);
        sc[1] |= (uint16_t)((dbits & 0x00f0) << 8);
        sc[2] |= (uint16_t)((dbits & 0x0f00) << 4);
        sc[3] |= (uint16_t)(dbits & 0xf000);
        for (int i = 0; i < 4; ++i)
            fc__iq_wr16(b->scales + 2 * i, sc[i]);
    }
}
