/* loss.c - cross_entropy (fused log-softmax + NLL) and mse_loss, forward
 * and backward kernels (the rules are in src/ag/grad_loss.c).
 *
 * cross_entropy, per row i with target t and C classes, lse = log sum exp x:
 *   loss_i = lse - (1 - eps) * x_t - (eps / C) * sum_c x_c      (label smoothing eps)
 * which is PyTorch's (1 - eps) * nll + eps * (uniform cross-entropy). Rows
 * whose target equals ignore_index contribute 0 and leave the mean's
 * denominator (a mean over no row is NaN, like PyTorch). Each row is read
 * once (the max pass brings it into L1); per-row losses land in a double
 * array that is summed in row order, so the result is thread-independent.
 * The forward keeps lse per row for the backward:
 *   dx_ic = scale_i * (exp(x_ic - lse_i) - eps / C - (1 - eps) [c == t_i])
 * with scale_i = g (sum), g / count (mean), g_i (none), 0 for ignored rows.
 *
 * mse_loss: (a - b)^2 over the broadcast shape, then mean/sum through the
 * reduction engine (fixed chunks); backward 2 * scale * g * (a - b). */
#include "exec/iter.h"
#include "fucina.h"
#include "ag/tape.h"
#include "core/convert.h"
#include "exec/kernels/reduce.h"
#include "exec/kernels/rowwise.h"
#include "fucina/ops.h"

fc_status fc__grad_cross_entropy(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_mse_loss(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

/* ---- cross_entropy rows ---------------------------------------------------------------------- */

typedef struct ce_arg {
    fc_dtype ct;
    const int64_t *target;
    bool use_ignore;
    int64_t ignore;
    double eps;
    double *loss; /* [rows] */
    void *lse;    /* [rows] compute values */
    /* backward */
    const void *g; /* gradient: [1] or [rows] (none) compute values */
    bool per_row;  /* g has one value per row */
    double scale;  /* mean: 1 / count */
} ce_arg;

FC__RW_INLINE void ce_f32_body(const ce_arg *a, const float *x, int64_t row0, int64_t nrows,
                               int64_t dim) {
    for (int64_t t = 0; t < nrows; t++) {
        const float *xr = x + t * dim;
        int64_t r = row0 + t, tg = a->target[r];
        bool nan;
        float m = fc__rw_max(xr, dim, &nan);
        double lse = nan ? (double)NAN : (double)m + log(fc__rw_exp(xr, NULL, dim, m));
        ((float *)a->lse)[r] = (float)lse;
        if (a->use_ignore && tg == a->ignore) {
            a->loss[r] = 0;
            continue;
        }
        double l = lse - (1.0 - a->eps) * xr[tg];
        if (a->eps != 0) l -= a->eps / (double)dim * fc__rw_sum(xr, dim);
        a->loss[r] = l;
    }
}

#ifdef FC__RW_X86
FC__RW_AVX2 static void ce_f32_avx2(const ce_arg *a, const float *x, int64_t row0, int64_t nrows,
                                    int64_t dim) {
    ce_f32_body(a, x, row0, nrows, dim);
}
#endif
static void ce_f32_base(const ce_arg *a, const float *x, int64_t row0, int64_t nrows, int64_t dim) {
    ce_f32_body(a, x, row0, nrows, dim);
}

static void ce_f64(const ce_arg *a, const double *x, int64_t row0, int64_t nrows, int64_t dim) {
    for (int64_t t = 0; t < nrows; t++) {
        const double *xr = x + t * dim;
        int64_t r = row0 + t, tg = a->target[r];
        double m = -INFINITY, s = 0, sx = 0;
        for (int64_t j = 0; j < dim; j++)
            m = xr[j] > m ? xr[j] : m;
        for (int64_t j = 0; j < dim; j++) {
            s += exp(xr[j] - m);
            sx += xr[j];
        }
        double lse = m + log(s);
        ((double *)a->lse)[r] = lse;
        if (a->use_ignore && tg == a->ignore) {
            a->loss[r] = 0;
            continue;
        }
        a->loss[r] = lse - (1.0 - a->eps) * xr[tg] - a->eps / (double)dim * sx;
    }
}

static void ce_rows(void *arg, int64_t group, int64_t row0, int64_t nrows, int64_t dim,
                    void *const *rows) {
    const ce_arg *a = arg;
    if (a->ct == FC_F64) {
        ce_f64(a, rows[0], row0, nrows, dim);
        return;
    }
#ifdef FC__RW_X86
    if (fc__rw_avx2()) {
        ce_f32_avx2(a, rows[0], row0, nrows, dim);
        return;
    }
#endif
    ce_f32_base(a, rows[0], row0, nrows, dim);
}

/* ---- cross_entropy backward rows ---------------------------------------------------------- */

static double ce_row_scale(const ce_arg *a, int64_t r) {
    if (a->use_ignore && a->target[r] == a->ignore) return 0;
    int64_t k = a->per_row ? r : 0;
    double g = a->ct == FC_F32 ? (double)((const float *)a->g)[k] : ((const double *)a->g)[k];
    return g * a->scale;
}

FC__RW_INLINE void ceb_f32_body(const ce_arg *a, const float *x, float *dx, int64_t row0,
                                int64_t nrows, int64_t dim) {
    for (int64_t t = 0; t < nrows; t++) {
        const float *restrict xr = x + t * dim;
        float *restrict dr = dx + t * dim;
        int64_t r = row0 + t;
        float sc = (float)ce_row_scale(a, r), lse = ((const float *)a->lse)[r];
        float off = (float)(a->eps / (double)dim) * sc;
        if (sc == 0) { /* ignored row (or zero gradient): exactly zero */
            memset(dr, 0, sizeof *dr * (size_t)dim);
            continue;
        }
        fc__rw_exp(xr, dr, dim, lse);
        for (int64_t j = 0; j < dim; j++)
            dr[j] = dr[j] * sc - off;
        dr[a->target[r]] -= (float)(1.0 - a->eps) * sc;
    }
}

#ifdef FC__RW_X86
FC__RW_AVX2 static void ceb_f32_avx2(const ce_arg *a, const float *x, float *dx, int64_t row0,
                                     int64_t nrows, int64_t dim) {
    ceb_f32_body(a, x, dx, row0, nrows, dim);
}
#endif
static void ceb_f32_base(const ce_arg *a, const float *x, float *dx, int64_t row0, int64_t nrows,
                         int64_t dim) {
    ceb_f32_body(a, x, dx, row0, nrows, dim);
}

static void ceb_f64(const ce_arg *a, const double *x, double *dx, int64_t row0, int64_t nrows,
                    int64_t dim) {
    for (int64_t t = 0; t < nrows; t++) {
        const double *xr = x + t * dim;
        double *dr = dx + t * dim;
        int64_t r = row0 + t;
        double sc = ce_row_scale(a, r), lse = ((const double *)a->lse)[r];
        for (int64_t j = 0; j < dim; j++)
            dr[j] = sc * (exp(xr[j] - lse) - a->eps / (double)dim);
        if (sc != 0) dr[a->target[r]] -= (1.0 - a->eps) * sc;
    }
}

/* rows[0]: logits, rows[1]: dx */
static void ceb_rows(void *arg, int64_t group, int64_t row0, int64_t nrows, int64_t dim,
                     void *const *rows) {
    const ce_arg *a = arg;
    if (a->ct == FC_F64) {
        ceb_f64(a, rows[0], rows[1], row0, nrows, dim);
        return;
    }
#ifdef FC__RW_X86
    if (fc__rw_avx2()) {
        ceb_f32_avx2(a, rows[0], rows[1], row0, nrows, dim);
        return;
    }
#endif
    ceb_f32_base(a, rows[0], rows[1], row0, nrows, dim);
}

fc_tensor *fc__cross_entropy_backward(fc_ctx *ctx, fc_tensor *logits, fc_tensor *lse,
                                      fc_tensor *targets, fc_tensor *g, int reduction,
                                      double smoothing, double mean_scale, bool use_ignore,
                                      int64_t ignore_index) {
    const char *op = "cross_entropy_backward";
    fc_dtype ct = g->raw.dtype;
    int64_t dim = logits->raw.shape[logits->raw.rank - 1];
    fc_tensor *dx = fc__tensor_new(ctx, op, ct, logits->raw.shape, logits->raw.rank);
    if (!dx) return NULL;
    ce_arg a = {.ct = ct,
                .target = (const int64_t *)fc__raw_base(&targets->raw),
                .use_ignore = use_ignore,
                .ignore = ignore_index,
                .eps = smoothing,
                .lse = fc__raw_base(&lse->raw),
                .g = fc__raw_base(&g->raw),
                .per_row = reduction == FC_REDUCE_NONE,
                .scale = reduction == FC_REDUCE_MEAN ? mean_scale : 1.0};
    fc__rows_job job = {.outer = fc__raw_numel(&logits->raw) / dim,
                        .dim = dim,
                        .inner = 1,
                        .nin = 1,
                        .nout = 1,
                        .ops = {&logits->raw, &dx->raw},
                        .ct = ct,
                        .fn = ceb_rows,
                        .arg = &a};
    if (fc__rows_run(ctx, op, &job) != FC_OK) return NULL;
    return dx;
}

/* ---- cross_entropy ------------------------------------------------------------------------------
 */

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

/* Saved: 0 logits (contiguous), 1 lse; aux: the i64 targets. node->i[0]
 * reduction, i[1] use_ignore, i[2] ignore_index; f[0] smoothing, f[1] 1/count. */
fc_tensor *fc_cross_entropy(fc_ctx *ctx, fc_tensor *logits, fc_tensor *targets,
                            const fc_ce_opts *opts) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "cross_entropy", logits);
    FC__CHECK_INPUT(ctx, "cross_entropy", targets);
    fc_ce_opts o = {.reduction = FC_REDUCE_MEAN};
    if (opts) o = *opts;
    if (ce_check(ctx, logits, targets, &o) != FC_OK) return NULL;
    fc_dtype dt = logits->raw.dtype, ct = fc__rw_float_ct(dt);
    int64_t dim = logits->raw.shape[logits->raw.rank - 1], n = fc__raw_numel(&logits->raw) / dim;
    fc_tensor *tg = ce_targets(ctx, targets, n, dim, &o);
    fc_tensor *xc = tg ? fc__copy_contiguous_ref(ctx, "fc_contiguous", logits) : NULL;
    fc_tensor *lse = xc ? fc__tensor_new(ctx, "cross_entropy", ct, &n, 1) : NULL;
    fc_buffer *lb = lse ? fc__ctx_buffer(ctx, (size_t)n * sizeof(double)) : NULL;
    fc_tensor *out = NULL;
    if (lse && !lb) fc__fail(ctx, FC_ERR_OOM, "cross_entropy: out of memory for row losses");
    if (lb) {
        ce_arg a = {.ct = ct,
                    .target = (const int64_t *)fc__raw_base(&tg->raw),
                    .use_ignore = o.use_ignore,
                    .ignore = o.ignore_index,
                    .eps = o.label_smoothing,
                    .loss = lb->data,
                    .lse = fc__raw_base(&lse->raw)};
        fc__rows_job job = {.outer = n,
                            .dim = dim,
                            .inner = 1,
                            .nin = 1,
                            .ops = {&xc->raw},
                            .ct = ct,
                            .fn = ce_rows,
                            .arg = &a};
        int64_t count = 0, one = 1;
        if (fc__rows_run(ctx, "cross_entropy", &job) == FC_OK)
            out = fc__tensor_new(ctx, "cross_entropy", dt,
                                 o.reduction == FC_REDUCE_NONE ? &n : &one, 1);
        if (out && o.reduction == FC_REDUCE_NONE) {
            fc__store_f64_row(dt, a.loss, fc__raw_base(&out->raw), (size_t)n);
        } else if (out) {
            double s = 0;
            for (int64_t i = 0; i < n; i++) {
                s += a.loss[i];
                count += !(o.use_ignore && a.target[i] == o.ignore_index);
            }
            if (o.reduction == FC_REDUCE_MEAN) s /= (double)count;
            fc__store_f64_row(dt, &s, fc__raw_base(&out->raw), 1);
        }
        fc__buffer_release(lb);
        if (out && fc__ag_wants(ctx, 1, &logits)) {
            fc_node *nd =
                fc__ag_record(ctx, "cross_entropy", fc__grad_cross_entropy, out, 1, &logits);
            if (nd && fc__ag_save(ctx, nd, "logits", xc) == FC_OK &&
                fc__ag_save(ctx, nd, "lse", lse) == FC_OK) {
                nd->aux = fc_keep(fc_retain(tg));
                nd->i[0] = o.reduction;
                nd->i[1] = o.use_ignore;
                nd->i[2] = o.ignore_index;
                nd->f[0] = o.label_smoothing;
                nd->f[1] = count > 0 ? 1.0 / (double)count : 0.0;
            } else {
                fc_release(out);
                out = NULL;
            }
        }
    }
    fc_release(tg);
    fc_release(xc);
    fc_release(lse);
    return fc__finish(ctx, "cross_entropy", out);
}

/* ---- mse_loss -----------------------------------------------------------------------------------
 */

typedef struct mse_arg {
    fc_dtype ct;
    double factor; /* backward: 2 * scale * sign */
} mse_arg;

/* forward: p[0] = (p[1] - p[2])^2; backward: p[0] = factor * p[3] * (p[1] - p[2]) */
static void mse_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const mse_arg *a = arg;
    if (a->ct == FC_F32) {
        for (int64_t i = 0; i < n; i++) {
            float d = *(const float *)(p[1] + i * s[1]) - *(const float *)(p[2] + i * s[2]);
            *(float *)(p[0] + i * s[0]) = d * d;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            double d = *(const double *)(p[1] + i * s[1]) - *(const double *)(p[2] + i * s[2]);
            *(double *)(p[0] + i * s[0]) = d * d;
        }
    }
}

static void mse_grad_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const mse_arg *a = arg;
    if (a->ct == FC_F32) {
        float f = (float)a->factor;
        for (int64_t i = 0; i < n; i++) {
            float d = *(const float *)(p[1] + i * s[1]) - *(const float *)(p[2] + i * s[2]);
            *(float *)(p[0] + i * s[0]) = f * *(const float *)(p[3] + i * s[3]) * d;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            double d = *(const double *)(p[1] + i * s[1]) - *(const double *)(p[2] + i * s[2]);
            *(double *)(p[0] + i * s[0]) = a->factor * *(const double *)(p[3] + i * s[3]) * d;
        }
    }
}

fc_tensor *fc__mse_backward(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, fc_tensor *g,
                            const int64_t *shape, int rank, double scale, double sign) {
    fc_tensor *d = fc__tensor_new(ctx, "mse_loss_backward", g->raw.dtype, shape, rank);
    if (!d) return NULL;
    fc_raw *ops[4] = {&d->raw, &a->raw, &b->raw, &g->raw};
    mse_arg arg = {g->raw.dtype, 2.0 * scale * sign};
    fc__iter it;
    fc__iter_init(&it, shape, rank, 4, ops);
    fc__iter_run(ctx, &it, mse_grad_inner, &arg);
    return d;
}

/* a, b as the compute dtype (new references). */
static fc_tensor *as_ct(fc_ctx *ctx, fc_tensor *t, fc_dtype ct) { return fc__copy_cast(ctx, "fc_to", t, ct); }

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
    fc_dtype ct = fc__rw_float_ct(dt);
    fc_tensor *ac = as_ct(ctx, a, ct), *bc = ac ? as_ct(ctx, b, ct) : NULL;
    fc_tensor *sq = bc ? fc__tensor_new(ctx, "mse_loss", ct, shape, rank) : NULL;
    fc_tensor *out = NULL;
    int64_t numel = fc__shape_product(shape, rank);
    double scale = reduction == FC_REDUCE_MEAN ? 1.0 / (double)numel : 1.0;
    if (sq) {
        fc_raw *ops[3] = {&sq->raw, &ac->raw, &bc->raw};
        mse_arg arg = {ct, 0};
        fc__iter it;
        fc__iter_init(&it, shape, rank, 3, ops);
        fc__iter_run(ctx, &it, mse_inner, &arg);
        if (reduction == FC_REDUCE_NONE) {
            out = fc__copy_cast(ctx, "fc_to", sq, dt);
        } else {
            bool mask[FC_MAX_RANK];
            for (int i = 0; i < rank; i++)
                mask[i] = true;
            int64_t one = 1;
            fc__red_params prm = {.scale = scale};
            fc_tensor *r = fc__tensor_new(ctx, "mse_loss", ct, &one, 1);
            if (r &&
                fc__red_run(ctx, "mse_loss", FC__RED_SUM, &sq->raw, mask, &prm, &r->raw) == FC_OK)
                out = fc__copy_cast(ctx, "fc_to", r, dt);
            fc_release(r);
        }
    }
    fc_release(ac);
    fc_release(bc);
    fc_release(sq);
    fc_tensor *in[2] = {a, b};
    if (out && fc__ag_wants(ctx, 2, in)) {
        fc_node *nd = fc__ag_record(ctx, "mse_loss", fc__grad_mse_loss, out, 2, in);
        if (!nd || fc__ag_save(ctx, nd, "a", a) != FC_OK || fc__ag_save(ctx, nd, "b", b) != FC_OK) {
            fc_release(out);
            return NULL;
        }
        nd->i[0] = reduction;
        nd->f[0] = scale;
    }
    return fc__finish(ctx, "mse_loss", out);
}
