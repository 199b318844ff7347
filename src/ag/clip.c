/* SPDX-License-Identifier: MIT */
/* clip.c - gradient clipping, a utility around an optimizer that needs
 * none of its state (the schedules: lr_sched.c).
 *
 * Gradients are f32 (leaves of f32, f16, bf16) or f64 (f64 leaves); the
 * global norm is summed in f64 in parameter order, so it is deterministic
 * and the same whatever the mix of gradient dtypes. */
#include <math.h>

#include "ag/tape.h"
#include "fucina/optim.h"

/* ---- clipping ------------------------------------------------------------------------ */

fc_status fc_clip_grad_norm(fc_ctx *ctx, fc_tensor *const *params, int n, double max_norm,
                            double *total_norm) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!params && n > 0)
        return fc__fail(ctx, FC_ERR_NULL_ARG, "fc_clip_grad_norm: params is NULL");
    if (n < 0) return fc__fail(ctx, FC_ERR_INVALID_ARG, "fc_clip_grad_norm: n = %d < 0", n);
    if (!(max_norm > 0))
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "fc_clip_grad_norm: max_norm %g must be > 0",
                        max_norm);
    for (int i = 0; i < n; i++)
        if (params[i] && params[i]->ctx != ctx)
            return fc__fail(ctx, FC_ERR_CONTEXT,
                            "fc_clip_grad_norm: param %d belongs to another context", i);
    double sq = 0; /* f64, summed in parameter order: deterministic */
    for (int i = 0; i < n; i++) {
        fc_tensor *g = params[i] ? params[i]->grad : NULL;
        if (!g) continue;
        int64_t m = fc__raw_numel(&g->raw);
        if (g->raw.dtype == FC_F64) {
            const double *p = (const double *)fc__raw_base(&g->raw);
            for (int64_t j = 0; j < m; j++)
                sq += p[j] * p[j];
        } else {
            const float *p = (const float *)fc__raw_base(&g->raw);
            for (int64_t j = 0; j < m; j++)
                sq += (double)p[j] * p[j];
        }
    }
    double norm = sqrt(sq);
    if (total_norm) *total_norm = norm;
    double coef = max_norm / (norm + 1e-6);
    if (coef < 1) {
        for (int i = 0; i < n; i++) {
            fc_tensor *g = params[i] ? params[i]->grad : NULL;
            if (!g) continue;
            int64_t m = fc__raw_numel(&g->raw);
            if (g->raw.dtype == FC_F64) {
                double *p = (double *)fc__raw_base(&g->raw);
                for (int64_t j = 0; j < m; j++)
                    p[j] *= coef;
            } else {
                float *p = (float *)fc__raw_base(&g->raw);
                for (int64_t j = 0; j < m; j++)
                    p[j] = (float)(p[j] * coef);
            }
            fc__buffer_bump_generation(g->raw.buf);
        }
    }
    return FC_OK;
}
