/* SPDX-License-Identifier: MIT */
/* kquant_search.c - ggml's scale searches for the k-quants, kept in f32.
 *
 * Every expression keeps ggml's operand order (a*b*c is (a*b)*c, integer
 * codes converted to float at the same point) because a single different
 * rounding can flip a comparison and change the stored bytes. Codes are
 * produced with fc__q_nearest_int, which, like ggml's nearest_int, is
 * defined for every float, so extreme input yields garbage codes that are
 * clamped, never undefined behaviour. Stores into uint8_t arrays wrap
 * modulo 256 as in ggml; stores into int8_t go through fc__q_wrap_i8. */
#include <math.h>
#include <string.h>

#include "core/quant/kquant.h"
#include "core/quant/quant.h"

/* The weight make_qx_quants gives value x when no explicit weights exist. */
static float qx_weight(int rmse_type, float x) {
    if (rmse_type == 1) return x * x;
    if (rmse_type == 2) return 1;
    if (rmse_type == 3) return fabsf(x);
    return sqrtf(fabsf(x));
}

static int clamp_sym(int l, int nmax) { return fc__q_max_i(-nmax, fc__q_min_i(nmax - 1, l)); }

float fc__kq_make_qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type,
                            const float *qw) {
    float max = 0;
    float amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < FC__KQ_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = (float)-nmax / max;
    if (rmse_type == 0) {
        for (int i = 0; i < n; ++i) {
            L[i] = fc__q_wrap_i8(nmax + clamp_sym(fc__q_nearest_int(iscale * x[i]), nmax));
        }
        return 1 / iscale;
    }
    bool return_early = false;
    if (rmse_type < 0) {
        rmse_type = -rmse_type;
        return_early = true;
    }
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = clamp_sym(fc__q_nearest_int(iscale * x[i]), nmax);
        L[i] = fc__q_wrap_i8(l + nmax);
        float w = qw ? qw[i] : qx_weight(rmse_type, x[i]);
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = clamp_sym(fc__q_nearest_int(iscale * x[i]), nmax);
            float w = qw ? qw[i] : qx_weight(rmse_type, x[i]);
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                int l = fc__q_nearest_int(iscale * x[i]);
                L[i] = fc__q_wrap_i8(nmax + clamp_sym(l, nmax));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

float fc__kq_make_q3_quants(int n, int nmax, const float *x, int8_t *L, bool do_rmse) {
    float max = 0;
    float amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < FC__KQ_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = (float)-nmax / max;
    if (do_rmse) {
        float sumlx = 0;
        float suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = clamp_sym(fc__q_nearest_int(iscale * x[i]), nmax);
            L[i] = fc__q_wrap_i8(l);
            float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        for (int itry = 0; itry < 5; ++itry) {
            int n_changed = 0;
            for (int i = 0; i < n; ++i) {
                float w = x[i] * x[i];
                float slx = sumlx - w * x[i] * (float)L[i];
                if (slx > 0) {
                    float sl2 = suml2 - w * (float)L[i] * (float)L[i];
                    int new_l = clamp_sym(fc__q_nearest_int(x[i] * sl2 / slx), nmax);
                    if (new_l != L[i]) {
                        slx += w * x[i] * (float)new_l;
                        sl2 += w * (float)new_l * (float)new_l;
                        if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                            L[i] = fc__q_wrap_i8(new_l);
                            sumlx = slx;
                            suml2 = sl2;
                            ++n_changed;
                        }
                    }
                }
            }
            if (!n_changed) break;
        }
        for (int i = 0; i < n; ++i)
            L[i] = fc__q_wrap_i8(L[i] + nmax);
        return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
    }
    for (int i = 0; i < n; ++i) {
        int l = clamp_sym(fc__q_nearest_int(iscale * x[i]), nmax);
        L[i] = fc__q_wrap_i8(l + nmax);
    }
    return 1 / iscale;
}

/* The part qkx2 and qkx3 share once min, max and the weight sums are known:
 * the initial rounding at nmax/(max-min), then the grid of nstep+1 iscales
 * with a least-squares (scale, min) fit each. w(i) reads the weights. */
typedef struct qkx_args {
    int n, nmax;
    const float *x, *weights; /* weights NULL: x^2 */
    uint8_t *L, *Laux;
    float rmin, rdelta;
    int nstep;
    bool use_mad;
} qkx_args;

static float qkx_w(const qkx_args *a, int i) {
    return a->weights ? a->weights[i] : a->x[i] * a->x[i];
}

static float qkx_search(const qkx_args *a, float min, float max, float sum_w, float sum_x,
                        float *the_min) {
    const float *x = a->x;
    float iscale = (float)a->nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < a->n; ++i) {
        int l = fc__q_nearest_int(iscale * (x[i] - min));
        a->L[i] = (uint8_t)fc__q_max_i(0, fc__q_min_i(a->nmax, l));
        float diff = scale * (float)a->L[i] + min - x[i];
        diff = a->use_mad ? fabsf(diff) : diff * diff;
        best_error += qkx_w(a, i) * diff;
    }
    if (a->nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= a->nstep; ++is) {
        iscale = (a->rmin + a->rdelta * (float)is + (float)a->nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < a->n; ++i) {
            int l = fc__q_nearest_int(iscale * (x[i] - min));
            l = fc__q_max_i(0, fc__q_min_i(a->nmax, l));
            a->Laux[i] = (uint8_t)l;
            float w = qkx_w(a, i);
            sum_l += w * (float)l;
            sum_l2 += w * (float)l * (float)l;
            sum_xl += w * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < a->n; ++i) {
                float diff = this_scale * (float)a->Laux[i] + this_min - x[i];
                diff = a->use_mad ? fabsf(diff) : diff * diff;
                cur_error += qkx_w(a, i) * diff;
            }
            if (cur_error < best_error) {
                memcpy(a->L, a->Laux, (size_t)a->n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* Shared prologue: min/max of x and the weighted sums. constant_if_le picks
 * qkx3's "max <= min" test over qkx2's "max == min". */
static float qkx_run(const qkx_args *a, float *the_min, bool constant_if_le) {
    const float *x = a->x;
    float min = x[0];
    float max = x[0];
    float sum_w = qkx_w(a, 0);
    float sum_x = sum_w * x[0];
    for (int i = 1; i < a->n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = qkx_w(a, i);
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (constant_if_le ? max <= min : max == min) {
        memset(a->L, 0, (size_t)a->n);
        *the_min = -min;
        return 0.f;
    }
    return qkx_search(a, min, max, sum_w, sum_x, the_min);
}

float fc__kq_make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                              bool use_mad) {
    qkx_args a = {n, nmax, x, weights, L, Laux, rmin, rdelta, nstep, use_mad};
    return qkx_run(&a, the_min, false);
}

float fc__kq_make_qkx3_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                              bool use_mad) {
    qkx_args a = {n, nmax, x, weights, L, Laux, rmin, rdelta, nstep, use_mad};
    return qkx_run(&a, the_min, true);
}

float fc__kq_make_qp_quants(int n, int nmax, const float *x, uint8_t *L,
                            const float *quant_weights) {
    float max = 0;
    for (int i = 0; i < n; ++i)
        max = max > x[i] ? max : x[i];
    if (max < FC__KQ_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = (float)nmax / max;
    for (int i = 0; i < n; ++i)
        L[i] = fc__q_wrap_u8(fc__q_nearest_int(iscale * x[i]));
    float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; ++i) {
        float diff = x[i] - scale * (float)L[i];
        best_mse += quant_weights[i] * diff * diff;
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) continue;
        float iscale_is = (0.1f * (float)is + (float)nmax) / max;
        float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; ++i) {
            int l = fc__q_min_i(nmax, fc__q_nearest_int(iscale_is * x[i]));
            float diff = x[i] - scale_is * (float)l;
            mse += quant_weights[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = fc__q_min_i(nmax, fc__q_nearest_int(iscale * x[i]));
        L[i] = fc__q_wrap_u8(l);
        float w = quant_weights[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            float w = quant_weights[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            float sl2 = suml2 - w * (float)L[i] * (float)L[i];
            if (slx > 0 && sl2 > 0) {
                int new_l = fc__q_min_i(nmax, fc__q_nearest_int(x[i] * sl2 / slx));
                if (new_l != L[i]) {
                    slx += w * x[i] * (float)new_l;
                    sl2 += w * (float)new_l * (float)new_l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = fc__q_wrap_u8(new_l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}
