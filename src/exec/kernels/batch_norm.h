/* SPDX-License-Identifier: MIT */
/* exec/kernels/batch_norm.h - the channel norms, batch_norm and
 * group_norm, forward and backward (batch_norm.c), and batch_norm's
 * running-statistics update. They record nothing: the ops, their
 * validation and their rule are in src/ops/batch_norm.c.
 *
 * Shapes: x [N, C, S...] is read as N * C planes of S elements (S the
 * product of the axes after the channel axis, 1 for rank 2). A statistic
 * ("stat") is a mean and a variance over a set of planes:
 *   batch_norm  one per channel c: the N planes (n, c), N * S values;
 *   group_norm  one per (n, group): the C / G planes of that group in
 *               sample n, (C / G) * S values.
 * weight and bias are per channel. */
#ifndef FUCINA_EXEC_KERNELS_BATCH_NORM_H
#define FUCINA_EXEC_KERNELS_BATCH_NORM_H

#include "exec/tensor.h"

typedef struct fc__cnorm_geom {
    int64_t n, c, s;
    int64_t groups; /* 0: batch_norm (per-channel stats); > 0: group_norm, C % groups == 0 */
} fc__cnorm_geom;

/* The number of stats: C for batch_norm, N * groups for group_norm. */
static inline int64_t fc__cnorm_nstat(const fc__cnorm_geom *g) {
    return g->groups ? g->n * g->groups : g->c;
}

/* What the forward hands back: new references the caller releases (NULL
 * when not asked for). */
typedef struct fc__cnorm_out {
    fc_tensor *x;       /* keep: the input, contiguous in its own dtype */
    fc_tensor *mean;    /* keep: [nstat] the means used, compute dtype */
    fc_tensor *rstd;    /* keep: [nstat] 1 / sqrt(var + eps) used, compute dtype */
    fc_tensor *moments; /* want_moments: f64 [2, nstat], batch mean then biased variance */
} fc__cnorm_out;

/* y = (x - mean) * rstd * weight + bias per plane, the stats of the batch
 * (run_mean NULL: the biased variance over each stat's values, summed in
 * double per plane and combined in plane order) or, for batch_norm in
 * eval mode, run_mean / run_var ([C], any float dtype and layout). x is a
 * float tensor of any layout and rank >= 2; weight and bias (NULL allowed)
 * have x's dtype and shape [C], any layout; eps >= 0 finite (the caller
 * checked all that). The compute dtype is f64 for f64 and f32 otherwise;
 * y is a new contiguous tensor of x's dtype and shape. out (NULL when
 * neither keep nor want_moments) is filled as described above; on failure
 * every member is NULL. NULL with the error recorded (naming op). */
fc_tensor *fc__cnorm_forward(fc_ctx *ctx, const char *op, const fc__cnorm_geom *g, fc_tensor *x,
                             fc_tensor *weight, fc_tensor *bias, fc_tensor *run_mean,
                             fc_tensor *run_var, double eps, bool keep, bool want_moments,
                             fc__cnorm_out *out);

/* The backward. x is the kept input, gy the output gradient (contiguous,
 * x's shape, the compute dtype), weight NULL allowed, mean and rstd the
 * kept stats. batch_stats: the stats were the batch's (training batch_norm
 * and group_norm), so they depend on x:
 *   dx = rstd * (gy * w - mean(gy * w) - xhat * mean(gy * w * xhat))
 * over each stat's values, xhat = (x - mean) * rstd; otherwise (eval
 * batch_norm) dx = gy * w * rstd. dweight = sum gy * xhat and dbias =
 * sum gy per channel. Sets *dx, *dw (when weight), *db as asked: new
 * tensors of gy's dtype. Every sum runs per plane in double and is
 * combined in plane order, so the bits do not depend on the thread count.
 * Returns FC_OK, or the error recorded. */
fc_status fc__cnorm_backward(fc_ctx *ctx, const char *op, const fc__cnorm_geom *g, fc_tensor *x,
                             fc_tensor *gy, fc_tensor *weight, fc_tensor *mean, fc_tensor *rstd,
                             bool batch_stats, bool want_x, bool want_w, bool want_b,
                             fc_tensor **dx, fc_tensor **dw, fc_tensor **db);

/* running = (1 - momentum) * running + momentum * batch for batch_norm's
 * running_mean (batch mean) and running_var (the unbiased batch variance,
 * biased * count / (count - 1)), both [C] of any float dtype and layout
 * without stride-0 axes, writable (the caller checked); moments is the
 * forward's. Bumps both buffers' generations. Cannot fail. */
void fc__batch_norm_update_running(fc_tensor *run_mean, fc_tensor *run_var,
                                   const fc_tensor *moments, int64_t count, double momentum);

#endif /* FUCINA_EXEC_KERNELS_BATCH_NORM_H */
