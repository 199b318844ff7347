/* SPDX-License-Identifier: MIT */
/* iquant_search.c - the sub-block search shared by the iq2 and iq3 grid types.
 *
 * These formats store, per sub-block of 16 or 32 elements, one small scale,
 * the signs, and the magnitudes as points of a fixed lattice (groups of 8
 * or 4 coordinates). ggml finds them with one scheme: fold the signs away,
 * try a fan of candidate scales around max / (2*kmaxq - 1), round each group
 * to the lattice at each trial, keep the trial whose weighted least-squares
 * fit sum(w*x*q)^2 / sum(w*q^2) is largest, and finally refit the scale once
 * on the kept points. The five types differ only in the knobs collected in
 * fc__iq_search (trial range and step, when to re-snap at the end).
 *
 * Every float expression keeps ggml's operand order: the search compares
 * scores that often tie to the last bit, and only the same rounding makes
 * the same choices.
 */
#include "core/quant/iquant_impl.h"

uint8_t fc__iq_fold_signs(const float *x, const float *weight, float *xval, bool even_parity) {
    unsigned bits = 0;
    int nneg = 0;
    for (int i = 0; i < 8; ++i) {
        /* x >= 0 keeps -0.0 as it is, exactly as ggml does */
        if (x[i] >= 0) {
            xval[i] = x[i];
        } else {
            xval[i] = -x[i];
            bits |= 1u << i;
            ++nneg;
        }
    }
    if (even_parity && (nneg & 1)) {
        /* the cheapest element to get wrong takes the odd sign */
        int imin = 0;
        float vmin = weight[0] * x[0] * x[0];
        for (int i = 1; i < 8; ++i) {
            float v = weight[i] * x[i] * x[i];
            if (v < vmin) {
                vmin = v;
                imin = i;
            }
        }
        xval[imin] = -xval[imin];
        bits ^= 1u << imin;
    }
    return (uint8_t)(even_parity ? bits & 127u : bits);
}

/* Rounds the dim magnitudes of one group to digits at inverse scale id;
 * returns the key and leaves the digits in L. */
static int round_group(const fc__iq_search *s, const float *xval, float id, int8_t *L) {
    for (int i = 0; i < s->lat->dim; ++i) {
        int l = fc__iq_nearest_int(0.5f * (id * xval[i] - 1));
        L[i] = (int8_t)fc__iq_clampi(l, 0, s->kmaxq - 1);
    }
    return fc__iq_key(s->lat, L);
}

/* sum(w*x*q) and sum(w*q*q) over the sub-block, q = 2*digit + 1. */
static void fit_sums(int n, const float *xval, const float *weight, const int8_t *L, float *sqx,
                     float *sq2) {
    float sumqx = 0, sumq2 = 0;
    for (int i = 0; i < n; ++i) {
        float w = weight[i];
        float q = (float)(2 * L[i] + 1);
        sumqx += w * xval[i] * q;
        sumq2 += w * q * q;
    }
    *sqx = sumqx;
    *sq2 = sumq2;
}

float fc__iq_search_scale(const fc__iq_search *s, const float *xval, const float *weight,
                          const float *waux, float max, float scale, int8_t *L) {
    const fc__iq_lattice *lat = s->lat;
    const int dim = lat->dim, ngroups = s->n / dim;
    int8_t Laux[32];
    bool on_grid[8], on_grid_aux[8];
    for (int k = 0; k < ngroups; ++k)
        on_grid[k] = s->start_on_grid;

    float best = 0;
    for (int is = s->is_lo; is <= s->is_hi; ++is) {
        float id = ((float)(2 * s->kmaxq - 1) + (float)is * s->step) / max;
        float this_scale = 1 / id;
        for (int k = 0; k < ngroups; ++k) {
            int key = round_group(s, xval + dim * k, id, Laux + dim * k);
            on_grid_aux[k] = lat->map[key] >= 0;
            if (!on_grid_aux[k])
                fc__iq_best_neighbour(lat, key, xval + dim * k, waux + dim * k, this_scale,
                                      Laux + dim * k);
        }
        float sumqx, sumq2;
        fit_sums(s->n, xval, weight, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, (size_t)s->n);
            memcpy(on_grid, on_grid_aux, sizeof on_grid);
        }
    }

    int n_off = 0;
    for (int k = 0; k < ngroups; ++k)
        n_off += !on_grid[k];
    bool refit = s->refine == FC__IQ_REFINE_ALL ? scale > 0 : (n_off > 0 && scale > 0);
    if (!refit) return scale;

    float id = 1 / scale;
    for (int k = 0; k < ngroups; ++k) {
        if (s->refine == FC__IQ_REFINE_OFFGRID && on_grid[k]) continue;
        int key = round_group(s, xval + dim * k, id, L + dim * k);
        if (lat->map[key] < 0) /* replaces the rounded digits */
            fc__iq_best_neighbour(lat, key, xval + dim * k, waux + dim * k, scale, L + dim * k);
    }
    float sumqx, sumq2;
    fit_sums(s->n, xval, weight, L, &sumqx, &sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
    return scale;
}
