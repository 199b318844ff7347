/* SPDX-License-Identifier: MIT */
/* ops/batch_norm.c - the channel norms as differentiable ops: batch_norm
 * (statistics per channel over the batch and spatial axes, or the running
 * statistics in eval mode) and group_norm (statistics per sample and
 * channel group). Both normalise [N, C, ...] planes with a per-channel
 * affine map, so they share one kernel pair (exec/kernels/batch_norm.c)
 * and one rule; this file validates, records, updates batch_norm's running
 * statistics, and holds the rule.
 *
 * Rule: the fused kernel fc__cnorm_backward reads the saved input and the
 * output gradient, with the saved per-stat mean and rstd; with batch
 * statistics dx carries the two mean terms of the statistics' own
 * dependence on x, with fixed (running) statistics it is the affine map's
 * gy * w * rstd. Eval mode saves the rstd computed from running_var at
 * forward time, so a later update of the running statistics does not
 * change this node's gradient. */
#include <math.h>

#include "ag/tape.h"
#include "exec/kernels/batch_norm.h"
#include "fucina.h"
#include "ops/norm_graph.h"

/* The node's saved layout (batch_norm and group_norm alike). Inputs: x,
 * weight, bias (NULL entries allowed). saved[]: the contiguous input, the
 * per-stat mean and rstd, then the weight when i[CN_I_HAS_WEIGHT]. */
enum {
    CN_IN_X = 0,
    CN_IN_WEIGHT = 1,
    CN_IN_BIAS = 2,
    CN_N_IN = 3,
};
enum {
    CN_SAVED_INPUT = 0,  /* saved[]: x, contiguous, its own dtype */
    CN_SAVED_MEAN = 1,   /* saved[]: [nstat] means, compute dtype */
    CN_SAVED_RSTD = 2,   /* saved[]: [nstat] 1 / sqrt(var + eps), compute dtype */
    CN_SAVED_WEIGHT = 3, /* saved[]: the weight, present when i[CN_I_HAS_WEIGHT] */
};
enum {
    CN_I_GROUPS = 0,      /* i[]: 0 for batch_norm, else group_norm's group count */
    CN_I_BATCH_STATS = 1, /* i[]: 1 when the stats were the batch's (they depend on x) */
    CN_I_HAS_WEIGHT = 2,  /* i[]: 1 when a weight was given */
};
enum {
    CN_F_EPS = 0, /* f[]: eps (the create_graph form recomputes batch statistics) */
};

/* x [N, C, S...] as the kernel's geometry. */
static fc__cnorm_geom geom_of(const int64_t *shape, int rank, int64_t groups) {
    fc__cnorm_geom g = {.n = shape[0], .c = shape[1], .s = 1, .groups = groups};
    for (int i = 2; i < rank; i++)
        g.s *= shape[i];
    return g;
}

/* t [C] (or [nstat] = [C] for fixed statistics) seen as [1, C, 1, ...]. */
static fc_tensor *per_channel(fc_ctx *ctx, fc_tensor *t, int rank) {
    int64_t shape[FC_MAX_RANK];
    for (int i = 0; i < rank; i++)
        shape[i] = 1;
    shape[1] = fc_tensor_numel(t);
    return fc_reshape(ctx, t, shape, rank);
}

/* The rule from recorded ops: batch statistics are recomputed from the
 * linked x (group_norm's over [N, G, C/G * S]), fixed ones are constants. */
static fc_status cnorm_graph(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_dtype gdt = gout->raw.dtype;
    bool has_w = node->i[CN_I_HAS_WEIGHT] != 0;
    fc_tensor *x = fc__ag_saved_tensor(ctx, node, CN_SAVED_INPUT);
    fc_tensor *w = has_w ? fc__ag_saved_tensor(ctx, node, CN_SAVED_WEIGHT) : NULL;
    if (x && x->raw.dtype != gdt) x = fc_to(ctx, x, gdt);
    if (w && w->raw.dtype != gdt) w = fc_to(ctx, w, gdt);
    if (!x || (has_w && !w)) return fc__failed(ctx);
    int rank = x->raw.rank, groups = (int)node->i[CN_I_GROUPS];
    int64_t n = x->raw.shape[0];
    fc_tensor *wc = w ? per_channel(ctx, w, rank) : NULL;
    fc_tensor *dh = wc ? fc_mul(ctx, gout, wc) : gout, *xhat = NULL, *dx = NULL;
    if (!node->i[CN_I_BATCH_STATS]) { /* fixed statistics: an affine map of x */
        fc_tensor *m = fc__ag_saved_tensor(ctx, node, CN_SAVED_MEAN);
        fc_tensor *r = fc__ag_saved_tensor(ctx, node, CN_SAVED_RSTD);
        fc_tensor *mc = m ? per_channel(ctx, fc_to(ctx, m, gdt), rank) : NULL;
        fc_tensor *rc = r ? per_channel(ctx, fc_to(ctx, r, gdt), rank) : NULL;
        xhat = fc_mul(ctx, fc_sub(ctx, x, mc), rc);
        dx = fc_mul(ctx, dh, rc);
    } else if (!groups) { /* per channel over the batch and spatial axes */
        int axes[FC_MAX_RANK], na = 0;
        for (int i = 0; i < rank; i++)
            if (i != 1) axes[na++] = i;
        fc_tensor *r;
        if (fc__norm_graph_stats(ctx, x, axes, na, node->f[CN_F_EPS], false, &xhat, &r) == FC_OK)
            dx = fc__norm_graph_dx(ctx, xhat, r, dh, axes, na, false);
    } else { /* per sample and group */
        int64_t gs[3] = {n, groups, fc_tensor_numel(x) / (n * groups)};
        int ax = 2;
        fc_tensor *xh, *r;
        if (fc__norm_graph_stats(ctx, fc_reshape(ctx, x, gs, 3), &ax, 1, node->f[CN_F_EPS], false,
                                 &xh, &r) == FC_OK) {
            xhat = fc_reshape(ctx, xh, x->raw.shape, rank);
            dx = fc_reshape(
                ctx, fc__norm_graph_dx(ctx, xh, r, fc_reshape(ctx, dh, gs, 3), &ax, 1, false),
                x->raw.shape, rank);
        }
    }
    if (!xhat) return fc__failed(ctx);
    int red[FC_MAX_RANK], nr = 0; /* every axis but the channel's */
    for (int i = 0; i < rank; i++)
        if (i != 1) red[nr++] = i;
    if (node->in[CN_IN_X].needs) gin[CN_IN_X] = dx;
    if (node->in[CN_IN_WEIGHT].needs)
        gin[CN_IN_WEIGHT] = fc_sum(ctx, fc_mul(ctx, gout, xhat), red, nr, false);
    if (node->in[CN_IN_BIAS].needs) gin[CN_IN_BIAS] = fc_sum(ctx, gout, red, nr, false);
    return fc_ctx_status(ctx);
}

static fc_status cnorm_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (fc__ag_create_graph(ctx)) return cnorm_graph(ctx, node, gout, gin);
    bool has_w = node->i[CN_I_HAS_WEIGHT] != 0;
    fc_tensor *x = fc__ag_saved_tensor(ctx, node, CN_SAVED_INPUT);
    fc_tensor *mean = fc__ag_saved_tensor(ctx, node, CN_SAVED_MEAN);
    fc_tensor *rstd = fc__ag_saved_tensor(ctx, node, CN_SAVED_RSTD);
    fc_tensor *w = has_w ? fc__ag_saved_tensor(ctx, node, CN_SAVED_WEIGHT) : NULL;
    if (!x || !mean || !rstd || (has_w && !w)) return fc__failed(ctx);
    fc__cnorm_geom g = geom_of(x->raw.shape, x->raw.rank, node->i[CN_I_GROUPS]);
    const char *op = g.groups ? "group_norm_backward" : "batch_norm_backward";
    return fc__cnorm_backward(ctx, op, &g, x, gout, w, mean, rstd, node->i[CN_I_BATCH_STATS] != 0,
                              node->in[CN_IN_X].needs, node->in[CN_IN_WEIGHT].needs,
                              node->in[CN_IN_BIAS].needs, &gin[CN_IN_X], &gin[CN_IN_WEIGHT],
                              &gin[CN_IN_BIAS]);
}

static fc_status record(fc_ctx *ctx, const char *op, fc_tensor *y, fc_tensor *x, fc_tensor *w,
                        fc_tensor *b, const fc__cnorm_out *o, int64_t groups, bool batch_stats,
                        double eps) {
    fc_tensor *in[CN_N_IN] = {[CN_IN_X] = x, [CN_IN_WEIGHT] = w, [CN_IN_BIAS] = b};
    fc_node *nd = fc__ag_record(ctx, op, cnorm_backward, y, CN_N_IN, in);
    if (!nd) return fc__failed(ctx);
    nd->i[CN_I_GROUPS] = groups;
    nd->i[CN_I_BATCH_STATS] = batch_stats;
    nd->i[CN_I_HAS_WEIGHT] = w != NULL;
    nd->f[CN_F_EPS] = eps;
    fc_status st = fc__ag_save(ctx, nd, "input", o->x);           /* CN_SAVED_INPUT */
    /* o->x holds x's values (contiguous, maybe a copy): linked to x */
    if (st == FC_OK) nd->saved[CN_SAVED_INPUT].link = CN_IN_X;
    if (st == FC_OK) st = fc__ag_save(ctx, nd, "mean", o->mean);  /* CN_SAVED_MEAN */
    if (st == FC_OK) st = fc__ag_save(ctx, nd, "rstd", o->rstd);  /* CN_SAVED_RSTD */
    if (st == FC_OK && w) st = fc__ag_save(ctx, nd, "weight", w); /* CN_SAVED_WEIGHT */
    return st;
}

/* ---- validation ------------------------------------------------------------------------------ */

static fc_status check_x(fc_ctx *ctx, const char *op, fc_tensor *x, double eps) {
    char d[160];
    if (!fc_dtype_is_float(x->raw.dtype))
        return fc__fail(ctx, FC_ERR_DTYPE,
                        "%s: dtype %s of %s is not a float dtype; cast with fc_to", op,
                        fc_dtype_name(x->raw.dtype), fc__desc(x, d, (int)sizeof d));
    if (x->raw.rank < 2)
        return fc__fail(ctx, FC_ERR_RANK, "%s: input %s must be [N,C,...] (rank >= 2), not rank %d",
                        op, fc__desc(x, d, (int)sizeof d), x->raw.rank);
    if (!(eps >= 0) || !isfinite(eps))
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: eps %g must be finite and >= 0", op, eps);
    return FC_OK;
}

/* A per-channel [C] tensor: weight and bias must have x's dtype; the
 * running statistics x's dtype or, for a 16-bit x, f32. */
static fc_status check_channel(fc_ctx *ctx, const char *op, const char *role, fc_tensor *x,
                               fc_tensor *p, bool running) {
    char a[160], b[160];
    if (!p) return FC_OK;
    if (p->ctx != ctx) return FC__CHECK_SAME_CTX(ctx, op, p, role);
    fc_dtype dx = x->raw.dtype, dp = p->raw.dtype;
    bool ok = dp == dx || (running && dp == FC_F32 && (dx == FC_F16 || dx == FC_BF16));
    if (!ok)
        return fc__fail(ctx, FC_ERR_DTYPE, "%s: %s dtype %s differs from x's %s%s; cast with fc_to",
                        op, role, fc_dtype_name(dp), fc_dtype_name(dx),
                        running && (dx == FC_F16 || dx == FC_BF16) ? " (or f32)" : "");
    if (p->raw.rank != 1 || p->raw.shape[0] != x->raw.shape[1])
        return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                        "%s: %s %s must have shape [%lld], the channels of x %s", op, role,
                        fc__desc(p, a, (int)sizeof a), (long long)x->raw.shape[1],
                        fc__desc(x, b, (int)sizeof b));
    return FC_OK;
}

/* The running statistics: both or neither, [C], never requiring grad; in
 * training mode also writable, without shared (stride-0) elements. */
static fc_status check_running(fc_ctx *ctx, fc_tensor *x, fc_tensor *rm, fc_tensor *rv,
                               bool training) {
    const char *op = "batch_norm";
    if (!rm != !rv)
        return fc__fail(ctx, FC_ERR_INVALID_ARG,
                        "%s: running_mean and running_var must be given together (%s is NULL)", op,
                        rm ? "running_var" : "running_mean");
    if (!rm && !training)
        return fc__fail(ctx, FC_ERR_INVALID_ARG,
                        "%s: eval mode (training false) normalises with running_mean and "
                        "running_var, which are NULL",
                        op);
    fc_tensor *ts[2] = {rm, rv};
    const char *roles[2] = {"running_mean", "running_var"};
    for (int k = 0; k < 2 && rm; k++) {
        fc_tensor *t = ts[k];
        char d[160];
        fc_status st = check_channel(ctx, op, roles[k], x, t, true);
        if (st != FC_OK) return st;
        if (t->flags & FC__T_REQUIRES_GRAD)
            return fc__fail(ctx, FC_ERR_INVALID_ARG,
                            "%s: %s %s requires grad; running statistics are buffers, not "
                            "parameters (fc_requires_grad(t, false) or fc_detach)",
                            op, roles[k], fc__desc(t, d, (int)sizeof d));
        if (!training) continue;
        if (fc__buffer_is_read_only(t->raw.buf))
            return fc__fail(ctx, FC_ERR_READ_ONLY,
                            "%s: %s %s is read-only storage and training mode updates it", op,
                            roles[k], fc__desc(t, d, (int)sizeof d));
        if (t->raw.strides[0] == 0 && t->raw.shape[0] > 1)
            return fc__fail(ctx, FC_ERR_UNSUPPORTED_VIEW,
                            "%s: %s %s is a broadcast view (stride 0) and training mode updates "
                            "each element",
                            op, roles[k], fc__desc(t, d, (int)sizeof d));
    }
    return FC_OK;
}

/* ---- the ops ------------------------------------------------------------------------------- */

/* Forward, record, and (batch_norm training) the running update, which
 * happens last so that a failed call leaves the running statistics as
 * they were. */
static fc_tensor *cnorm_run(fc_ctx *ctx, const char *op, const fc__cnorm_geom *g, fc_tensor *x,
                            fc_tensor *w, fc_tensor *b, fc_tensor *rm, fc_tensor *rv,
                            bool batch_stats, double momentum, double eps) {
    bool rec = fc__ag_wants(ctx, CN_N_IN, (fc_tensor *[]){x, w, b});
    bool update = batch_stats && rm;
    fc__cnorm_out o;
    fc_tensor *y = fc__cnorm_forward(ctx, op, g, x, w, b, batch_stats ? NULL : rm,
                                     batch_stats ? NULL : rv, eps, rec, update, &o);
    if (!y) return NULL;
    fc_status st = rec ? record(ctx, op, y, x, w, b, &o, g->groups, batch_stats, eps) : FC_OK;
    fc_release(o.x);
    fc_release(o.mean);
    fc_release(o.rstd);
    if (st != FC_OK) {
        fc_release(o.moments);
        fc_release(y);
        return NULL;
    }
    y = fc__finish(ctx, op, y);
    if (y && update) fc__batch_norm_update_running(rm, rv, o.moments, g->n * g->s, momentum);
    fc_release(o.moments);
    return y;
}

fc_tensor *fc_batch_norm(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, fc_tensor *bias,
                         fc_tensor *running_mean, fc_tensor *running_var, bool training,
                         double momentum, double eps) {
    const char *op = "batch_norm";
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, op, x);
    if (check_x(ctx, op, x, eps) != FC_OK ||
        check_channel(ctx, op, "weight", x, weight, false) != FC_OK ||
        check_channel(ctx, op, "bias", x, bias, false) != FC_OK ||
        check_running(ctx, x, running_mean, running_var, training) != FC_OK)
        return NULL;
    if (training && running_mean && (!(momentum >= 0 && momentum <= 1))) {
        fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: momentum %g must be in [0, 1]", op, momentum);
        return NULL;
    }
    fc__cnorm_geom g = geom_of(x->raw.shape, x->raw.rank, 0);
    if (training && g.n * g.s == 1) { /* the unbiased variance needs two values */
        char d[160];
        fc__fail(ctx, FC_ERR_INVALID_SHAPE,
                 "%s: training needs more than 1 value per channel, got input %s", op,
                 fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    return cnorm_run(ctx, op, &g, x, weight, bias, running_mean, running_var, training, momentum,
                     eps);
}

fc_tensor *fc_group_norm(fc_ctx *ctx, fc_tensor *x, int64_t num_groups, fc_tensor *weight,
                         fc_tensor *bias, double eps) {
    const char *op = "group_norm";
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, op, x);
    if (check_x(ctx, op, x, eps) != FC_OK ||
        check_channel(ctx, op, "weight", x, weight, false) != FC_OK ||
        check_channel(ctx, op, "bias", x, bias, false) != FC_OK)
        return NULL;
    int64_t C = x->raw.shape[1];
    if (num_groups < 1 || C % num_groups != 0) {
        char d[160];
        fc__fail(ctx, FC_ERR_INVALID_ARG,
                 "%s: num_groups %lld must be >= 1 and divide the %lld channels of %s", op,
                 (long long)num_groups, (long long)C, fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    fc__cnorm_geom g = geom_of(x->raw.shape, x->raw.rank, num_groups);
    return cnorm_run(ctx, op, &g, x, weight, bias, NULL, NULL, true, 0, eps);
}
