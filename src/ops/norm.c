/* SPDX-License-Identifier: MIT */
/* ops/norm.c - layer_norm and rms_norm over the last axis as
 * differentiable ops. The forward and the fused backward kernels are in
 * exec/kernels/norm.c; this file validates, records, and holds the rule.
 *
 * Rule (one for both ops): the fused kernel fc__norm_backward reads the
 * saved input and the output gradient once per row and produces dx and
 * the per-group partial sums of dweight and dbias; the saved mean and rstd
 * spare recomputing the row statistics. */
#include <math.h>

#include "ag/tape.h"
#include "exec/kernels/norm.h"
#include "fucina.h"
#include "ops/norm_graph.h"

/* The node's saved layout. Inputs: x, weight, bias (NULL entries allowed).
 * saved[NORM_SAVED_INPUT] is the contiguous input; the weight (when there
 * is one), the mean (layer_norm only) and rstd follow in that order, at the
 * saved indices stored in the i-slots below (-1: absent). */
enum {
    NORM_IN_X = 0,
    NORM_IN_WEIGHT = 1,
    NORM_IN_BIAS = 2,
    NORM_N_IN = 3,
};
enum {
    NORM_SAVED_INPUT = 0, /* saved[]: the input, contiguous */
};
enum {
    NORM_I_SAVED_WEIGHT = 0, /* i[]: saved index of the weight, -1 without one */
    NORM_I_SAVED_MEAN = 1,   /* i[]: saved index of the mean, -1 for rms_norm */
    NORM_I_SAVED_RSTD = 2,   /* i[]: saved index of rstd */
    NORM_I_RMS = 3,          /* i[]: 1 for rms_norm, 0 for layer_norm */
};
enum {
    NORM_F_EPS = 0, /* f[]: eps (the create_graph form recomputes the statistics) */
};

static fc_tensor *saved_at(fc_ctx *ctx, fc_node *node, int slot);

/* ---- create_graph ---------------------------------------------------------------------------- */

fc_status fc__norm_graph_stats(fc_ctx *ctx, fc_tensor *x, const int *axes, int na, double eps,
                               bool rms, fc_tensor **xhat, fc_tensor **r) {
    fc_tensor *xc = rms ? x : fc_sub(ctx, x, fc_mean(ctx, x, axes, na, true));
    fc_tensor *var = fc_mean(ctx, fc_square(ctx, xc), axes, na, true);
    *r = fc_rsqrt(ctx, fc_add_scalar(ctx, var, eps));
    *xhat = fc_mul(ctx, xc, *r);
    return fc_ctx_status(ctx);
}

fc_tensor *fc__norm_graph_dx(fc_ctx *ctx, fc_tensor *xhat, fc_tensor *r, fc_tensor *dh,
                             const int *axes, int na, bool rms) {
    fc_tensor *t = fc_mul(ctx, xhat, fc_mean(ctx, fc_mul(ctx, dh, xhat), axes, na, true));
    fc_tensor *d = fc_sub(ctx, dh, t);
    if (!rms) d = fc_sub(ctx, d, fc_mean(ctx, dh, axes, na, true));
    return fc_mul(ctx, r, d);
}

/* The rule from recorded ops over the last axis: dh = g w, dx as above,
 * dw = g xhat and db = g (the engine sums the rows). */
static fc_status norm_graph(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_dtype gdt = gout->raw.dtype;
    bool rms = node->i[NORM_I_RMS] != 0;
    fc_tensor *x = fc__ag_saved_tensor(ctx, node, NORM_SAVED_INPUT);
    fc_tensor *w = saved_at(ctx, node, NORM_I_SAVED_WEIGHT);
    if (x && x->raw.dtype != gdt) x = fc_to(ctx, x, gdt);
    if (w && w->raw.dtype != gdt) w = fc_to(ctx, w, gdt);
    if (!x || (node->i[NORM_I_SAVED_WEIGHT] >= 0 && !w)) return fc__failed(ctx);
    int ax = x->raw.rank - 1;
    fc_tensor *xhat, *r;
    if (fc__norm_graph_stats(ctx, x, &ax, 1, node->f[NORM_F_EPS], rms, &xhat, &r) != FC_OK)
        return fc__failed(ctx);
    fc_tensor *dh = w ? fc_mul(ctx, gout, w) : gout;
    if (node->in[NORM_IN_X].needs)
        gin[NORM_IN_X] = fc__norm_graph_dx(ctx, xhat, r, dh, &ax, 1, rms);
    if (node->in[NORM_IN_WEIGHT].needs) gin[NORM_IN_WEIGHT] = fc_mul(ctx, gout, xhat);
    if (node->in[NORM_IN_BIAS].needs) gin[NORM_IN_BIAS] = gout;
    return fc_ctx_status(ctx);
}

/* The saved value whose index i-slot `slot` holds, or NULL when the slot
 * says absent (-1) or the value cannot be read (the error recorded). */
static fc_tensor *saved_at(fc_ctx *ctx, fc_node *node, int slot) {
    int64_t k = node->i[slot];
    return k >= 0 ? fc__ag_saved_tensor(ctx, node, (int)k) : NULL;
}

static fc_status norm_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (fc__ag_create_graph(ctx)) return norm_graph(ctx, node, gout, gin);
    fc_tensor *x = fc__ag_saved_tensor(ctx, node, NORM_SAVED_INPUT);
    fc_tensor *w = saved_at(ctx, node, NORM_I_SAVED_WEIGHT);
    fc_tensor *mean = saved_at(ctx, node, NORM_I_SAVED_MEAN);
    fc_tensor *rstd = saved_at(ctx, node, NORM_I_SAVED_RSTD);
    if (!x || !rstd || (node->i[NORM_I_SAVED_WEIGHT] >= 0 && !w) ||
        (node->i[NORM_I_SAVED_MEAN] >= 0 && !mean))
        return fc__failed(ctx);
    return fc__norm_backward(ctx, node->i[NORM_I_RMS] != 0, x, gout, w, mean, rstd,
                             node->in[NORM_IN_X].needs, node->in[NORM_IN_WEIGHT].needs,
                             node->in[NORM_IN_BIAS].needs, &gin[NORM_IN_X], &gin[NORM_IN_WEIGHT],
                             &gin[NORM_IN_BIAS]);
}

/* Saves value t as the next saved index and stores that index in i-slot
 * `slot`. */
static fc_status save_at(fc_ctx *ctx, fc_node *nd, int slot, const char *role, fc_tensor *t) {
    nd->i[slot] = nd->n_saved;
    return fc__ag_save(ctx, nd, role, t);
}

static fc_status record(fc_ctx *ctx, const char *name, bool rms, fc_tensor *y, fc_tensor *x,
                        fc_tensor *w, fc_tensor *b, const fc__norm_stats *s, double eps) {
    fc_tensor *in[NORM_N_IN] = {[NORM_IN_X] = x, [NORM_IN_WEIGHT] = w, [NORM_IN_BIAS] = b};
    fc_node *nd = fc__ag_record(ctx, name, norm_backward, y, NORM_N_IN, in);
    if (!nd) return fc__failed(ctx);
    nd->i[NORM_I_RMS] = rms;
    nd->f[NORM_F_EPS] = eps;
    nd->i[NORM_I_SAVED_WEIGHT] = nd->i[NORM_I_SAVED_MEAN] = -1;
    fc_status st = fc__ag_save(ctx, nd, "input", s->x); /* NORM_SAVED_INPUT */
    /* s->x holds x's values (contiguous, maybe a copy): linked to x */
    if (st == FC_OK) nd->saved[NORM_SAVED_INPUT].link = NORM_IN_X;
    if (st == FC_OK && w) st = save_at(ctx, nd, NORM_I_SAVED_WEIGHT, "weight", w);
    if (st == FC_OK && !rms) st = save_at(ctx, nd, NORM_I_SAVED_MEAN, "mean", s->mean);
    nd->i[NORM_I_SAVED_RSTD] = nd->n_saved;
    return st == FC_OK ? fc__ag_save(ctx, nd, "rstd", s->rstd) : st;
}

static fc_status check_param(fc_ctx *ctx, const char *name, const char *role, fc_tensor *x,
                             fc_tensor *p) {
    char a[160], b[160];
    if (!p) return FC_OK;
    if (p->ctx != ctx) return FC__CHECK_SAME_CTX(ctx, name, p, role);
    if (p->raw.dtype != x->raw.dtype)
        return fc__fail(ctx, FC_ERR_DTYPE, "%s: %s dtype %s differs from x's %s; cast with fc_to",
                        name, role, fc_dtype_name(p->raw.dtype), fc_dtype_name(x->raw.dtype));
    if (p->raw.rank != 1 || p->raw.shape[0] != x->raw.shape[x->raw.rank - 1])
        return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                        "%s: %s %s must have shape [%lld], the last axis of x %s", name, role,
                        fc__desc(p, a, (int)sizeof a), (long long)x->raw.shape[x->raw.rank - 1],
                        fc__desc(x, b, (int)sizeof b));
    return FC_OK;
}

static fc_tensor *norm_impl(fc_ctx *ctx, const char *name, bool rms, fc_tensor *x, fc_tensor *w,
                            fc_tensor *b, double eps) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, name, x);
    char d[160];
    fc_dtype dt = x->raw.dtype;
    if (!fc_dtype_is_float(dt)) {
        fc__fail(ctx, FC_ERR_DTYPE, "%s: dtype %s of %s is not a float dtype; cast with fc_to",
                 name, fc_dtype_name(dt), fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    if (!(eps >= 0) || !isfinite(eps)) {
        fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: eps %g must be finite and >= 0", name, eps);
        return NULL;
    }
    if (check_param(ctx, name, "weight", x, w) != FC_OK ||
        check_param(ctx, name, "bias", x, b) != FC_OK)
        return NULL;
    bool rec = fc__ag_wants(ctx, NORM_N_IN, (fc_tensor *[]){x, w, b});
    fc__norm_stats s;
    fc_tensor *y = fc__norm_forward(ctx, name, rms, x, w, b, eps, rec ? &s : NULL);
    if (!y) return NULL;
    fc_status st = FC_OK;
    if (rec) {
        st = record(ctx, name, rms, y, x, w, b, &s, eps);
        fc_release(s.x);
        fc_release(s.mean);
        fc_release(s.rstd);
    }
    if (st != FC_OK) {
        fc_release(y);
        return NULL;
    }
    return fc__finish(ctx, name, y);
}

fc_tensor *fc_layer_norm(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, fc_tensor *bias,
                         double eps) {
    return norm_impl(ctx, "layer_norm", false, x, weight, bias, eps);
}

fc_tensor *fc_rms_norm(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, double eps) {
    return norm_impl(ctx, "rms_norm", true, x, weight, NULL, eps);
}
