/* SPDX-License-Identifier: MIT */
/* ops/norm_graph.h - the normalisations' rules in recorded form, for
 * create_graph walks (ops/norm.c and ops/batch_norm.c share them). Private
 * to src/ops. */
#ifndef FUCINA_OPS_NORM_GRAPH_H
#define FUCINA_OPS_NORM_GRAPH_H

#include "fucina.h"

/* The normalised input xhat = (x - mean) * r (rms: x * r), r = 1 / sqrt(var
 * + eps) (rms: of mean(x^2) + eps), the statistics over axes[0, na) kept as
 * size-1 axes; every step recorded. x in the gradient dtype, linked to the
 * graph. Returns FC_OK or the error recorded; *xhat and *r scope-owned. */
fc_status fc__norm_graph_stats(fc_ctx *ctx, fc_tensor *x, const int *axes, int na, double eps,
                               bool rms, fc_tensor **xhat, fc_tensor **r);
/* dx from dh = dy * weight (x's shape): r (dh - mean(dh) - xhat mean(dh xhat)),
 * without the mean(dh) term for rms; means over axes. Scope-owned. */
fc_tensor *fc__norm_graph_dx(fc_ctx *ctx, fc_tensor *xhat, fc_tensor *r, fc_tensor *dh,
                             const int *axes, int na, bool rms);

#endif /* FUCINA_OPS_NORM_GRAPH_H */
