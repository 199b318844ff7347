/* SPDX-License-Identifier: MIT */
/* gemm_ref.c - see gemm_ref.h. Deliberately the plainest possible triple
 * loop in double: it shares no code with any provider. */
#include "gemm_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double fct_load(fc_dtype dt, const void *base, int64_t idx) {
    switch (dt) {
    case FC_F16:
        return (double)fc_f16_to_f32(((const uint16_t *)base)[idx]);
    case FC_BF16:
        return (double)fc_bf16_to_f32(((const uint16_t *)base)[idx]);
    case FC_F32:
        return (double)((const float *)base)[idx];
    case FC_F64:
        return ((const double *)base)[idx];
    default:
        return NAN;
    }
}

void fct_store(fc_dtype dt, void *base, int64_t idx, double v) {
    switch (dt) {
    case FC_F16:
        ((uint16_t *)base)[idx] = fc_f32_to_f16((float)v);
        break;
    case FC_BF16:
        ((uint16_t *)base)[idx] = fc_f32_to_bf16((float)v);
        break;
    case FC_F32:
        ((float *)base)[idx] = (float)v;
        break;
    case FC_F64:
        ((double *)base)[idx] = v;
        break;
    default:
        break;
    }
}

uint64_t fct_rng_next(fct_rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double fct_rng_uniform(fct_rng *r, double lo, double hi) {
    return lo + (hi - lo) * (double)(fct_rng_next(r) >> 11) * 0x1.0p-53;
}

int64_t fct_rng_below(fct_rng *r, int64_t n) { return (int64_t)(fct_rng_next(r) % (uint64_t)n); }

void fct_gemm_ref(int64_t m, int64_t n, int64_t k, const fct_mat *a, const fct_mat *b,
                  const fct_mat *c0, double *ref, double *mag) {
    /* Widen both operands to dense double first so the loop below is plain
     * double arithmetic in i-p-j order (exact products, double sums). */
    double *da = malloc(sizeof(double) * (size_t)(m * k));
    double *db = malloc(sizeof(double) * (size_t)(k * n));
    if (!da || !db) abort();
    for (int64_t i = 0; i < m; i++) {
        for (int64_t p = 0; p < k; p++)
            da[i * k + p] = fct_load(a->dtype, a->data, i * a->rs + p * a->cs);
    }
    for (int64_t p = 0; p < k; p++) {
        for (int64_t j = 0; j < n; j++)
            db[p * n + j] = fct_load(b->dtype, b->data, p * b->rs + j * b->cs);
    }
    for (int64_t i = 0; i < m; i++) {
        double *r = ref + i * n, *t = mag + i * n;
        for (int64_t j = 0; j < n; j++) {
            double v = c0 ? fct_load(c0->dtype, c0->data, i * c0->rs + j * c0->cs) : 0.0;
            r[j] = v;
            t[j] = fabs(v);
        }
        for (int64_t p = 0; p < k; p++) {
            double x = da[i * k + p];
            const double *y = db + p * n;
            for (int64_t j = 0; j < n; j++) {
                r[j] += x * y[j];
                t[j] += fabs(x * y[j]);
            }
        }
    }
    free(da);
    free(db);
}

double fct_gemm_tol(fc_dtype dt, int64_t k, double ref, double mag) {
    double u_acc = dt == FC_F64 ? 0x1.0p-53 : 0x1.0p-24;
    double u_out = dt == FC_F16 ? 0x1.0p-11 : dt == FC_BF16 ? 0x1.0p-8 : u_acc;
    double ku = (double)(k + 2) * u_acc;
    double gamma = ku / (1.0 - ku);
    double acc_err = gamma * mag;
    double tiny = dt == FC_F16 ? 0x1.0p-25 : 0.0;
    if (dt == FC_F16 || dt == FC_BF16) return acc_err + u_out * (fabs(ref) + acc_err) + tiny;
    return acc_err + u_out * fabs(ref);
}
