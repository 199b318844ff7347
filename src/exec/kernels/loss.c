/* SPDX-License-Identifier: MIT */
/* loss.c - cross_entropy (fused log-softmax + NLL) and mse_loss, forward
 * and backward kernels (the ops and their rules are in src/ops/loss.c).
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
#include "exec/kernels/loss.h"
#include "core/convert.h"
#include "exec/iter.h"
#include "exec/kernels/reduce.h"
#include "exec/kernels/rowwise.h"

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
                                      fc_tensor *targets, fc_tensor *g, const fc__ce_params *p,
                                      double mean_scale) {
    const char *op = "cross_entropy_backward";
    fc_dtype ct = g->raw.dtype;
    int64_t dim = logits->raw.shape[logits->raw.rank - 1];
    fc_tensor *dx = fc__tensor_new(ctx, op, ct, logits->raw.shape, logits->raw.rank);
    if (!dx) return NULL;
    ce_arg a = {.ct = ct,
                .target = (const int64_t *)fc__raw_base(&targets->raw),
                .use_ignore = p->use_ignore,
                .ignore = p->ignore_index,
                .eps = p->smoothing,
                .lse = fc__raw_base(&lse->raw),
                .g = fc__raw_base(&g->raw),
                .per_row = p->per_row,
                .scale = !p->per_row && p->mean ? mean_scale : 1.0};
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

/* ---- cross_entropy forward -------------------------------------------------------------- */

fc_tensor *fc__cross_entropy_forward(fc_ctx *ctx, fc_tensor *logits, fc_tensor *targets,
                                     const fc__ce_params *p, int64_t *count, fc_tensor **logits_c,
                                     fc_tensor **lse_out) {
    fc_dtype dt = logits->raw.dtype, ct = fc__rw_float_ct(dt);
    int64_t dim = logits->raw.shape[logits->raw.rank - 1], n = fc__raw_numel(&logits->raw) / dim;
    fc_tensor *xc = fc__copy_contiguous_ref(ctx, "fc_contiguous", logits);
    fc_tensor *lse = xc ? fc__tensor_new(ctx, "cross_entropy", ct, &n, 1) : NULL;
    fc_buffer *lb = lse ? fc__ctx_buffer(ctx, (size_t)n * sizeof(double)) : NULL;
    fc_tensor *out = NULL;
    *count = 0;
    if (lse && !lb) fc__fail(ctx, FC_ERR_OOM, "cross_entropy: out of memory for row losses");
    if (lb) {
        ce_arg a = {.ct = ct,
                    .target = (const int64_t *)fc__raw_base(&targets->raw),
                    .use_ignore = p->use_ignore,
                    .ignore = p->ignore_index,
                    .eps = p->smoothing,
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
        int64_t one = 1;
        if (fc__rows_run(ctx, "cross_entropy", &job) == FC_OK)
            out = fc__tensor_new(ctx, "cross_entropy", dt, p->per_row ? &n : &one, 1);
        if (out && p->per_row) {
            fc__store_f64_row(dt, a.loss, fc__raw_base(&out->raw), (size_t)n);
        } else if (out) {
            double s = 0;
            for (int64_t i = 0; i < n; i++) {
                s += a.loss[i];
                *count += !(p->use_ignore && a.target[i] == p->ignore_index);
            }
            if (p->mean) s /= (double)*count;
            fc__store_f64_row(dt, &s, fc__raw_base(&out->raw), 1);
        }
        fc__buffer_release(lb);
    }
    if (out && logits_c && lse_out) {
        *logits_c = xc;
        *lse_out = lse;
        return out;
    }
    if (logits_c) *logits_c = NULL;
    if (lse_out) *lse_out = NULL;
    fc_release(xc);
    fc_release(lse);
    return out;
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
static fc_tensor *as_ct(fc_ctx *ctx, fc_tensor *t, fc_dtype ct) {
    return fc__copy_cast(ctx, "fc_to", t, ct);
}

fc_tensor *fc__mse_forward(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, const int64_t *shape, int rank,
                           bool reduce, double scale) {
    fc_dtype dt = a->raw.dtype, ct = fc__rw_float_ct(dt);
    fc_tensor *ac = as_ct(ctx, a, ct), *bc = ac ? as_ct(ctx, b, ct) : NULL;
    fc_tensor *sq = bc ? fc__tensor_new(ctx, "mse_loss", ct, shape, rank) : NULL;
    fc_tensor *out = NULL;
    if (sq) {
        fc_raw *ops[3] = {&sq->raw, &ac->raw, &bc->raw};
        mse_arg arg = {ct, 0};
        fc__iter it;
        fc__iter_init(&it, shape, rank, 3, ops);
        fc__iter_run(ctx, &it, mse_inner, &arg);
        if (!reduce) {
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
    return out;
}
