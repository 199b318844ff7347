/* SPDX-License-Identifier: MIT */
/* ops/loss.c - cross_entropy (fused log-softmax + NLL) and mse_loss as
 * differentiable ops. The forward and backward kernels are in
 * exec/kernels/loss.c; this file validates, records, and holds the rules.
 *
 * Rules:
 *   cross_entropy  dx = scale_i * (softmax(x_i) - eps / C - (1 - eps) onehot(t_i)),
 *                  from the saved logits and per-row lse in one row pass
 *   mse_loss       da = 2 * scale * g * (a - b),  db = -da  (over the
 *                  broadcast shape; the engine sums broadcast axes away) */
#include "exec/kernels/loss.h"
#include "ag/tape.h"
#include "core/convert.h"
#include "exec/kernels/copy.h"
#include "fucina.h"

/* ---- cross_entropy ------------------------------------------------------------------------ */

/* The node's saved layout. aux holds the targets as i64 [N]. */
enum {
    CE_SAVED_LOGITS = 0, /* saved[]: the logits, contiguous */
    CE_SAVED_LSE = 1,    /* saved[]: per-row log-sum-exp [N], compute dtype */
};
enum {
    CE_I_REDUCTION = 0,   /* i[]: the fc_reduction */
    CE_I_USE_IGNORE = 1,  /* i[]: 1 when ignore_index applies */
    CE_I_IGNORE_INDEX = 2 /* i[]: the ignored target value */
};
enum {
    CE_F_SMOOTHING = 0, /* f[]: label smoothing */
    CE_F_MEAN_SCALE = 1 /* f[]: 1 / (rows not ignored), 0 when none (or no reduction) */
};

static fc__ce_params ce_params(fc_reduction reduction, bool use_ignore, int64_t ignore_index,
                               double smoothing) {
    return (fc__ce_params){.per_row = reduction == FC_REDUCE_NONE,
                           .mean = reduction == FC_REDUCE_MEAN,
                           .use_ignore = use_ignore,
                           .ignore_index = ignore_index,
                           .smoothing = smoothing};
}

/* create_graph: dx = w_i * (softmax(x) - T) from recorded ops, with T =
 * (1 - eps) onehot + eps / C and w_i the row weight (g_i per row, else g
 * times the mean scale; 0 for an ignored row), T and the row masks
 * constants. */
static fc_status ce_graph(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *x = fc__ag_saved_tensor(ctx, node, CE_SAVED_LOGITS);
    if (!x) return fc__failed(ctx);
    fc_dtype gdt = gout->raw.dtype;
    if (x->raw.dtype != gdt) x = fc_to(ctx, x, gdt);
    int64_t c = node->in[0].shape[node->in[0].rank - 1], n = fc__numel(&node->aux->raw);
    const int64_t *t = (const int64_t *)fc__raw_base(&node->aux->raw);
    double eps = node->f[CE_F_SMOOTHING];
    fc_tensor *tt = fc_zeros(ctx, FC_F64, (int64_t[]){n, c}, 2);
    fc_tensor *keep = fc_zeros(ctx, FC_F64, (int64_t[]){n, 1}, 2);
    if (!x || !tt || !keep) return fc__failed(ctx);
    double *tp = (double *)fc__raw_base(&tt->raw), *kp = (double *)fc__raw_base(&keep->raw);
    for (int64_t i = 0; i < n; i++) {
        bool ignored = node->i[CE_I_USE_IGNORE] && t[i] == node->i[CE_I_IGNORE_INDEX];
        kp[i] = ignored ? 0.0 : 1.0;
        for (int64_t j = 0; j < c && !ignored; j++)
            tp[i * c + j] = eps / (double)c + (j == t[i] ? 1.0 - eps : 0.0);
    }
    fc_tensor *x2 = fc_reshape(ctx, x, (int64_t[]){n, c}, 2);
    fc_tensor *d = fc_sub(ctx, fc_softmax(ctx, x2, 1), fc_to(ctx, tt, gdt));
    fc_tensor *w = (fc_reduction)node->i[CE_I_REDUCTION] == FC_REDUCE_NONE
                       ? fc_reshape(ctx, gout, (int64_t[]){n, 1}, 2)
                   : (fc_reduction)node->i[CE_I_REDUCTION] == FC_REDUCE_MEAN
                       ? fc_mul_scalar(ctx, gout, node->f[CE_F_MEAN_SCALE])
                       : gout;
    fc_tensor *dx = fc_mul(ctx, d, fc_mul(ctx, w, fc_to(ctx, keep, gdt)));
    gin[0] = fc_reshape(ctx, dx, node->in[0].shape, node->in[0].rank);
    return fc_ctx_status(ctx);
}

static fc_status cross_entropy_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout,
                                        fc_tensor **gin) {
    if (fc__ag_create_graph(ctx)) return ce_graph(ctx, node, gout, gin);
    fc_tensor *logits = fc__ag_saved_tensor(ctx, node, CE_SAVED_LOGITS);
    fc_tensor *lse = fc__ag_saved_tensor(ctx, node, CE_SAVED_LSE);
    if (!logits || !lse) return fc__failed(ctx);
    fc__ce_params p =
        ce_params((fc_reduction)node->i[CE_I_REDUCTION], node->i[CE_I_USE_IGNORE] != 0,
                  node->i[CE_I_IGNORE_INDEX], node->f[CE_F_SMOOTHING]);
    gin[0] =
        fc__cross_entropy_backward(ctx, logits, lse, node->aux, gout, &p, node->f[CE_F_MEAN_SCALE]);
    return gin[0] ? FC_OK : fc__failed(ctx);
}

static fc_status ce_check(fc_ctx *ctx, fc_tensor *logits, fc_tensor *targets, const fc_ce_opts *o) {
    char a[160], b[160];
    fc_dtype dt = logits->raw.dtype, tdt = targets->raw.dtype;
    if (!fc_dtype_is_float(dt))
        return fc__fail(ctx, FC_ERR_DTYPE,
                        "cross_entropy: logits dtype %s is not a float dtype; cast with fc_to",
                        fc_dtype_name(dt));
    if (!fc_dtype_supports_int_math(tdt))
        return fc__fail(ctx, FC_ERR_DTYPE,
                        "cross_entropy: targets dtype %s is not an integer dtype",
                        fc_dtype_name(tdt));
    int lr = logits->raw.rank;
    int64_t n = lr == 2 ? logits->raw.shape[0] : 1;
    if (lr > 2)
        return fc__fail(ctx, FC_ERR_RANK, "cross_entropy: logits %s must be [N, C] or [C]",
                        fc__desc(logits, a, (int)sizeof a));
    bool ok = lr == 2 ? targets->raw.rank == 1 && targets->raw.shape[0] == n
                      : fc__raw_numel(&targets->raw) == 1;
    if (!ok)
        return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                        "cross_entropy: targets %s do not match logits %s (need [%lld])",
                        fc__desc(targets, b, (int)sizeof b), fc__desc(logits, a, (int)sizeof a),
                        (long long)n);
    if ((int)o->reduction < 0 || o->reduction > FC_REDUCE_NONE)
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "cross_entropy: unknown reduction %d",
                        (int)o->reduction);
    if (!(o->label_smoothing >= 0 && o->label_smoothing <= 1))
        return fc__fail(ctx, FC_ERR_INVALID_ARG,
                        "cross_entropy: label_smoothing %g is outside [0, 1]", o->label_smoothing);
    return FC_OK;
}

/* Targets as a new i64 tensor [n], each checked against [0, classes). */
static fc_tensor *ce_targets(fc_ctx *ctx, fc_tensor *targets, int64_t n, int64_t classes,
                             const fc_ce_opts *o) {
    fc_tensor *tc = fc__copy_contiguous_ref(ctx, "fc_contiguous", targets);
    fc_tensor *t = tc ? fc__tensor_new(ctx, "cross_entropy", FC_I64, &n, 1) : NULL;
    if (!t) {
        fc_release(tc);
        return NULL;
    }
    int64_t *p = (int64_t *)fc__raw_base(&t->raw);
    fc__load_i64_row(tc->raw.dtype, fc__raw_base(&tc->raw), p, (size_t)n);
    fc_release(tc);
    for (int64_t i = 0; i < n; i++) {
        if (o->use_ignore && p[i] == o->ignore_index) continue;
        if (p[i] < 0 || p[i] >= classes) {
            fc__fail(ctx, FC_ERR_INDEX,
                     "cross_entropy: target %lld at position %lld is outside [0, %lld)",
                     (long long)p[i], (long long)i, (long long)classes);
            fc_release(t);
            return NULL;
        }
    }
    return t;
}

fc_tensor *fc_cross_entropy(fc_ctx *ctx, fc_tensor *logits, fc_tensor *targets,
                            const fc_ce_opts *opts) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "cross_entropy", logits);
    FC__CHECK_INPUT(ctx, "cross_entropy", targets);
    fc_ce_opts o = {.reduction = FC_REDUCE_MEAN};
    if (opts) o = *opts;
    if (ce_check(ctx, logits, targets, &o) != FC_OK) return NULL;
    int64_t dim = logits->raw.shape[logits->raw.rank - 1], n = fc__raw_numel(&logits->raw) / dim;
    fc_tensor *tg = ce_targets(ctx, targets, n, dim, &o);
    fc__ce_params p = ce_params(o.reduction, o.use_ignore, o.ignore_index, o.label_smoothing);
    int64_t count = 0;
    fc_tensor *xc = NULL, *lse = NULL;
    fc_tensor *out = tg ? fc__cross_entropy_forward(ctx, logits, tg, &p, &count, &xc, &lse) : NULL;
    if (out && fc__ag_wants(ctx, 1, &logits)) {
        fc_node *nd = fc__ag_record(ctx, "cross_entropy", cross_entropy_backward, out, 1, &logits);
        if (nd && fc__ag_save(ctx, nd, "logits", xc) == FC_OK &&
            fc__ag_save(ctx, nd, "lse", lse) == FC_OK) { /* CE_SAVED_LOGITS, CE_SAVED_LSE */
            /* xc holds the logits' values (a contiguous copy of a strided
             * view): a create_graph walk links it to the logits */
            nd->saved[CE_SAVED_LOGITS].link = 0;
            nd->aux = fc_keep(fc_retain(tg));
            nd->i[CE_I_REDUCTION] = o.reduction;
            nd->i[CE_I_USE_IGNORE] = o.use_ignore;
            nd->i[CE_I_IGNORE_INDEX] = o.ignore_index;
            nd->f[CE_F_SMOOTHING] = o.label_smoothing;
            nd->f[CE_F_MEAN_SCALE] = count > 0 ? 1.0 / (double)count : 0.0;
        } else {
            fc_release(out);
            out = NULL;
        }
    }
    fc_release(tg);
    fc_release(xc);
    fc_release(lse);
    return fc__finish(ctx, "cross_entropy", out);
}

/* ---- mse_loss ----------------------------------------------------------------------------- */

/* The node's saved layout. */
enum {
    MSE_SAVED_A = 0, /* saved[]: a as given */
    MSE_SAVED_B = 1, /* saved[]: b as given */
};
enum {
    MSE_I_REDUCTION = 0, /* i[]: the fc_reduction */
};
enum {
    MSE_F_SCALE = 0, /* f[]: 1 / numel for the mean, else 1 */
};

/* A saved operand in the gradient dtype (16-bit floats widened). */
static fc_tensor *saved_as(fc_ctx *ctx, fc_node *node, int k, fc_dtype gdt) {
    fc_tensor *t = fc__ag_saved_tensor(ctx, node, k);
    return t && t->raw.dtype != gdt ? fc_to(ctx, t, gdt) : t;
}

static fc_status mse_loss_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_dtype gdt = gout->raw.dtype;
    fc_tensor *a = saved_as(ctx, node, MSE_SAVED_A, gdt),
              *b = saved_as(ctx, node, MSE_SAVED_B, gdt);
    if (!a || !b) return fc__failed(ctx);
    if (fc__ag_create_graph(ctx)) { /* 2 scale g (a - b), and its negation */
        fc_tensor *da =
            fc_mul(ctx, gout, fc_mul_scalar(ctx, fc_sub(ctx, a, b), 2 * node->f[MSE_F_SCALE]));
        gin[0] = da;
        if (node->in[1].needs) gin[1] = fc_neg(ctx, da);
        return fc_ctx_status(ctx);
    }
    int64_t shape[FC_MAX_RANK];
    int rank;
    fc__shape_broadcast(a->raw.shape, a->raw.rank, b->raw.shape, b->raw.rank, shape, &rank);
    for (int k = 0; k < 2; k++) {
        if (!node->in[k].needs) continue;
        gin[k] = fc__mse_backward(ctx, a, b, gout, shape, rank, node->f[MSE_F_SCALE],
                                  k == 0 ? 1.0 : -1.0);
        if (!gin[k]) return fc__failed(ctx);
    }
    return FC_OK;
}

fc_tensor *fc_mse_loss(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, fc_reduction reduction) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "mse_loss", a);
    FC__CHECK_INPUT(ctx, "mse_loss", b);
    char da[160], db[160];
    fc_dtype dt = a->raw.dtype;
    if (!fc_dtype_is_float(dt) || b->raw.dtype != dt) {
        fc__fail(ctx, FC_ERR_DTYPE, "mse_loss: dtypes %s and %s %s; cast with fc_to",
                 fc_dtype_name(dt), fc_dtype_name(b->raw.dtype),
                 fc_dtype_is_float(dt) ? "differ" : "are not both float dtypes");
        return NULL;
    }
    int64_t shape[FC_MAX_RANK];
    int rank;
    if (fc__shape_broadcast(a->raw.shape, a->raw.rank, b->raw.shape, b->raw.rank, shape, &rank) !=
        FC_OK) {
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH, "mse_loss: shapes of %s and %s do not broadcast",
                 fc__desc(a, da, (int)sizeof da), fc__desc(b, db, (int)sizeof db));
        return NULL;
    }
    if ((int)reduction < 0 || reduction > FC_REDUCE_NONE) {
        fc__fail(ctx, FC_ERR_INVALID_ARG, "mse_loss: unknown reduction %d", (int)reduction);
        return NULL;
    }
    int64_t numel = fc__shape_product(shape, rank);
    double scale = reduction == FC_REDUCE_MEAN ? 1.0 / (double)numel : 1.0;
    fc_tensor *out = fc__mse_forward(ctx, a, b, shape, rank, reduction != FC_REDUCE_NONE, scale);
    fc_tensor *in[2] = {a, b};
    if (out && fc__ag_wants(ctx, 2, in)) {
        fc_node *nd = fc__ag_record(ctx, "mse_loss", mse_loss_backward, out, 2, in);
        if (!nd || fc__ag_save(ctx, nd, "a", a) != FC_OK || fc__ag_save(ctx, nd, "b", b) != FC_OK) {
            fc_release(out);
            return NULL;
        }
        nd->i[MSE_I_REDUCTION] = reduction;
        nd->f[MSE_F_SCALE] = scale;
    }
    return fc__finish(ctx, "mse_loss", out);
}
