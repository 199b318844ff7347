/* SPDX-License-Identifier: MIT */
/* init.c - parameter initialisation schemes, torch.nn.init's formulas.
 *
 * Each draws a fresh tensor from the context RNG (fc_rand / fc_randn),
 * maps it to the target distribution and copies it into t with grad mode
 * off, so a leaf that requires grad can be re-initialised in place; the
 * copy is one mutation of t (its generation moves, as torch's in-place
 * init bumps the version counter). */
#include <math.h>

#include "fucina/nn.h"
#include "nn/nn_internal.h"

/* fan_in / fan_out as torch.nn.init._calculate_fan_in_and_fan_out. */
static fc_status fans(fc_tensor *t, const char *fn, double *fan_in, double *fan_out) {
    int rank = fc_tensor_rank(t);
    if (rank < 2)
        return fc_ctx_fail(fc_tensor_ctx(t), FC_ERR_RANK,
                           "%s: fan in and out need rank >= 2, the tensor has rank %d", fn, rank);
    double rf = 1;
    for (int i = 2; i < rank; i++)
        rf *= (double)fc_tensor_dim(t, i);
    *fan_in = (double)fc_tensor_dim(t, 1) * rf;
    *fan_out = (double)fc_tensor_dim(t, 0) * rf;
    return FC_OK;
}

/* t <- a * draw + b, draw uniform [0, 1) or standard normal in t's dtype. */
static fc_status fill(fc_tensor *t, bool normal, double a, double b, const char *fn) {
    if (!t) return FC_ERR_NULL_ARG;
    fc_ctx *ctx = fc_tensor_ctx(t);
    if (!isfinite(a) || !isfinite(b))
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG, "%s: the bounds (%g, %g) are not finite", fn, a,
                           b);
    fc_no_grad_begin(ctx);
    const int64_t *shape = fc_tensor_shape(t);
    int rank = fc_tensor_rank(t);
    fc_dtype dt = fc_tensor_dtype(t);
    fc_tensor *r = normal ? fc_randn(ctx, dt, shape, rank) : fc_rand(ctx, dt, shape, rank);
    fc_tensor *m = fc_mul_scalar(ctx, r, a);
    fc_tensor *v = fc_add_scalar(ctx, m, b);
    fc_status st = v ? fc_copy_(t, v) : fc_ctx_status(ctx);
    fc_release(r);
    fc_release(m);
    fc_release(v);
    fc_no_grad_end(ctx);
    return st;
}

fc_status fc_nn_init_uniform_(fc_tensor *t, double lo, double hi) {
    if (t && !(lo <= hi))
        return fc_ctx_fail(fc_tensor_ctx(t), FC_ERR_INVALID_ARG,
                           "fc_nn_init_uniform_: lo = %g is not <= hi = %g", lo, hi);
    return fill(t, false, hi - lo, lo, "fc_nn_init_uniform_");
}

fc_status fc_nn_init_normal_(fc_tensor *t, double mean, double std) {
    if (t && !(std >= 0))
        return fc_ctx_fail(fc_tensor_ctx(t), FC_ERR_INVALID_ARG,
                           "fc_nn_init_normal_: std = %g is not >= 0", std);
    return fill(t, true, std, mean, "fc_nn_init_normal_");
}

fc_status fc_nn_init_constant_(fc_tensor *t, double value) {
    if (!t) return FC_ERR_NULL_ARG;
    fc_ctx *ctx = fc_tensor_ctx(t);
    fc_no_grad_begin(ctx);
    fc_tensor *v = fc_full(ctx, fc_tensor_dtype(t), fc_tensor_shape(t), fc_tensor_rank(t), value);
    fc_status st = v ? fc_copy_(t, v) : fc_ctx_status(ctx);
    fc_release(v);
    fc_no_grad_end(ctx);
    return st;
}

fc_status fc_nn_init_kaiming_uniform_(fc_tensor *t, double a) {
    double fi, fo;
    if (!t) return FC_ERR_NULL_ARG;
    fc_status st = fans(t, "fc_nn_init_kaiming_uniform_", &fi, &fo);
    if (st != FC_OK) return st;
    double bound = sqrt(6.0 / ((1.0 + a * a) * fi));
    return fill(t, false, 2 * bound, -bound, "fc_nn_init_kaiming_uniform_");
}

fc_status fc_nn_init_kaiming_normal_(fc_tensor *t, double a) {
    double fi, fo;
    if (!t) return FC_ERR_NULL_ARG;
    fc_status st = fans(t, "fc_nn_init_kaiming_normal_", &fi, &fo);
    if (st != FC_OK) return st;
    return fill(t, true, sqrt(2.0 / ((1.0 + a * a) * fi)), 0, "fc_nn_init_kaiming_normal_");
}

fc_status fc_nn_init_xavier_uniform_(fc_tensor *t, double gain) {
    double fi, fo;
    if (!t) return FC_ERR_NULL_ARG;
    fc_status st = fans(t, "fc_nn_init_xavier_uniform_", &fi, &fo);
    if (st != FC_OK) return st;
    double bound = gain * sqrt(6.0 / (fi + fo));
    return fill(t, false, 2 * bound, -bound, "fc_nn_init_xavier_uniform_");
}

fc_status fc_nn_init_xavier_normal_(fc_tensor *t, double gain) {
    double fi, fo;
    if (!t) return FC_ERR_NULL_ARG;
    fc_status st = fans(t, "fc_nn_init_xavier_normal_", &fi, &fo);
    if (st != FC_OK) return st;
    return fill(t, true, gain * sqrt(2.0 / (fi + fo)), 0, "fc_nn_init_xavier_normal_");
}

/* The layers' default draw: rand in [0, 1), scaled by 2 bound and shifted
 * by an f32 -bound in place, the recipe the examples used before nn.h (so
 * their runs keep their bits when they move onto the layers). */
fc_tensor *fc__nn_uniform(fc_ctx *ctx, const int64_t *shape, int rank, double bound) {
    fc_tensor *t = fc_rand(ctx, FC_F32, shape, rank);
    fc_tensor *lo = fc_scalar(ctx, FC_F32, -bound);
    bool ok = t && lo && fc_mul_scalar_(t, 2 * bound) == FC_OK && fc_add_(t, lo) == FC_OK;
    fc_release(lo);
    if (!ok) {
        fc_release(t);
        return NULL;
    }
    return t;
}
