/* SPDX-License-Identifier: MIT */
/* leaf.c - leaves, parameters, their gradients, and grad mode.
 *
 * A leaf is a tensor the user made (no tape node). Marking it as
 * requiring grad is what makes ops record; its gradient (->grad) is in the
 * gradient dtype of its own dtype: f64 for f64, f32 for f32, f16, bf16. */
#include <math.h>

#include "ag/tape.h"
#include "exec/kernels/copy.h"

/* ---- leaves and grad mode ----------------------------------------------------------- */

fc_status fc_requires_grad(fc_tensor *t, bool on) {
    if (!t) return FC_ERR_NULL_ARG;
    fc_dtype dt = t->raw.dtype;
    if (on && !fc_dtype_supports_grad(dt))
        return fc__fail(t->ctx, FC_ERR_DTYPE,
                        "fc_requires_grad: dtype %s cannot carry a gradient (f32, f16, bf16, f64 "
                        "only)",
                        fc_dtype_name(dt));
    if (t->node)
        return fc__fail(t->ctx, FC_ERR_INVALID_ARG,
                        "fc_requires_grad: the tensor was made by %s; only leaves can be marked "
                        "(use fc_detach first)",
                        t->node->op);
    if (on)
        t->flags |= FC__T_REQUIRES_GRAD | FC__T_LEAF;
    else
        t->flags &= ~(unsigned)(FC__T_REQUIRES_GRAD | FC__T_LEAF);
    return FC_OK;
}

bool fc_tensor_requires_grad(const fc_tensor *t) { return t && (t->flags & FC__T_REQUIRES_GRAD); }
bool fc_tensor_is_leaf(const fc_tensor *t) { return t && !t->node; }

static fc_tensor *make_param(fc_ctx *ctx, fc_tensor *t) {
    if (!t) return NULL;
    if (fc_requires_grad(t, true) != FC_OK) {
        fc_release(t);
        return NULL;
    }
    return t;
}

fc_tensor *fc_param_zeros(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank) {
    return make_param(ctx, fc_zeros(ctx, dtype, shape, rank));
}

fc_tensor *fc_param_from_data(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank,
                              const void *data) {
    return make_param(ctx, fc_tensor_from_data(ctx, dtype, shape, rank, data));
}

fc_tensor *fc_param_randn(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank, double std) {
    FC__CHECK_CTX(ctx);
    if (!(std >= 0) || !isfinite(std)) {
        fc__fail(ctx, FC_ERR_INVALID_ARG, "fc_param_randn: std %g must be finite and >= 0", std);
        return NULL;
    }
    /* f64 parameters draw f64 normals (the same stream positions), so they
     * are not f32 values widened; every other dtype rounds from f32 */
    fc_dtype gen = dtype == FC_F64 ? FC_F64 : FC_F32;
    fc_tensor *t = fc_randn(ctx, gen, shape, rank);
    if (!t) return NULL;
    int64_t n = fc__raw_numel(&t->raw);
    if (gen == FC_F64) {
        double *p = (double *)fc__raw_base(&t->raw);
        for (int64_t i = 0; i < n; i++)
            p[i] *= std;
    } else {
        float *p = (float *)fc__raw_base(&t->raw);
        for (int64_t i = 0; i < n; i++)
            p[i] = (float)(p[i] * std);
    }
    if (dtype != gen) {
        fc_tensor *c = fc__copy_cast(ctx, "fc_param_randn", t, dtype);
        fc_release(t);
        t = c;
    }
    return make_param(ctx, t);
}

fc_tensor *fc_grad(const fc_tensor *t) { return t ? t->grad : NULL; }

void fc_zero_grad(fc_tensor *const *params, int n) {
    if (!params) return;
    for (int i = 0; i < n; i++) {
        if (params[i] && params[i]->grad) {
            fc_release(params[i]->grad);
            params[i]->grad = NULL;
        }
    }
}

void fc_no_grad_begin(fc_ctx *ctx) {
    if (ctx) ctx->no_grad_depth++;
}
void fc_no_grad_end(fc_ctx *ctx) {
    if (ctx && ctx->no_grad_depth > 0) ctx->no_grad_depth--;
}
bool fc_grad_enabled(const fc_ctx *ctx) { return ctx && ctx->no_grad_depth == 0; }

fc_tensor *fc_detach(fc_ctx *ctx, fc_tensor *t) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "fc_detach", t);
    fc_raw v;
    if (fc__raw_view(&t->raw, &v) != FC_OK) return NULL;
    return fc__tensor_wrap(ctx, "fc_detach", &v);
}
