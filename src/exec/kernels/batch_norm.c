/* SPDX-License-Identifier: MIT */
/* batch_norm.c - batch_norm and group_norm, forward and backward, and
 * batch_norm's running-statistics update (the ops and their rule are in
 * src/ops/batch_norm.c).
 *
 * Shapes: x [N, C, S] as P = N * C contiguous planes of S elements; a
 * stat (batch_norm: a channel; group_norm: a (sample, group)) owns a fixed
 * set of planes (batch_norm.h).
 *
 *   y = (x - mean) * rstd * w[c] + b[c],  rstd = 1 / sqrt(var + eps)
 *
 * var is the biased variance. Every statistic is built from per-plane
 * partial sums (f32 lanes flushed into doubles, the rowwise.h primitives;
 * plain double loops for f64) which are then added per stat in plane
 * order by one thread: the planes are split over the team however it is
 * sized, but no sum depends on the split, so the bits do not depend on
 * the thread count. The variance takes a second pass centred on the
 * rounded mean c (sum of x - c and of (x - c)^2), so a mean far from zero
 * costs no accuracy and the mean itself is refined by the first sum.
 *
 * Backward (xhat = (x - mean) * rstd, gw = gy * w[c]), per stat over its
 * M values, from the per-plane sums of gy and of gy * xhat:
 *   batch stats  dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat))
 *   fixed stats  dx = gw * rstd                      (eval batch_norm)
 *   dw[c] = sum over the channel's planes of gy * xhat,  db[c] = sum of gy
 * Inside a plane w[c] is one number, so mean(gw) over a stat is the sum
 * over its planes of w[c] * (plane sum of gy), likewise for gw * xhat.
 *
 * Scratch (partials, stats, parameters) comes from the buffer pool, so a
 * steady-state training step allocates nothing. */
#include "exec/kernels/batch_norm.h"
#include "exec/kernels/rowwise.h"

#define CNORM_GRAIN 32768 /* elements per team slice, at least */

/* ---- plane passes --------------------------------------------------------------------------- */

typedef struct cnorm_job {
    const fc__cnorm_geom *g;
    fc_dtype ct;
    const void *x, *gy;                /* [P, S] in the compute dtype */
    void *out;                         /* forward: y; backward: dx ([P, S]) */
    const double *mean, *rstd, *w, *b; /* [nstat], [nstat], [C], [C] */
    const double *ma, *mb;             /* backward, batch stats: mean(gw), mean(gw * xhat) */
    double *p1, *p2;                   /* [P] per-plane partial sums */
    const float *ones;                 /* [S] ones: fc__rw_norm_sums's weight row */
    bool batch_stats;
} cnorm_job;

static int64_t stat_of(const fc__cnorm_geom *g, int64_t p) {
    int64_t n = p / g->c, c = p % g->c;
    return g->groups ? n * g->groups + c / (g->c / g->groups) : c;
}

/* The shift of the variance pass: the mean as the compute dtype holds it. */
static double shift_of(fc_dtype ct, double mean) {
    return ct == FC_F32 ? (double)(float)mean : mean;
}

/* p1 = sum x per plane */
static void pass_sum(void *arg, int64_t begin, int64_t end) {
    const cnorm_job *j = arg;
    int64_t S = j->g->s;
    for (int64_t p = begin; p < end; p++) {
        if (j->ct == FC_F32) {
            j->p1[p] = fc__rw_sum((const float *)j->x + p * S, S);
        } else {
            const double *xr = (const double *)j->x + p * S;
            double s = 0;
            for (int64_t i = 0; i < S; i++)
                s += xr[i];
            j->p1[p] = s;
        }
    }
}

/* p1 = sum (x - c), p2 = sum (x - c)^2 per plane, c the stat's rounded mean */
static void pass_dev(void *arg, int64_t begin, int64_t end) {
    const cnorm_job *j = arg;
    int64_t S = j->g->s;
    for (int64_t p = begin; p < end; p++) {
        double c = shift_of(j->ct, j->mean[stat_of(j->g, p)]);
        if (j->ct == FC_F32) {
            fc__rw_sum_sumsq((const float *)j->x + p * S, S, (float)c, &j->p1[p], &j->p2[p]);
        } else {
            const double *xr = (const double *)j->x + p * S;
            double s1 = 0, s2 = 0;
            for (int64_t i = 0; i < S; i++) {
                double d = xr[i] - c;
                s1 += d;
                s2 += d * d;
            }
            j->p1[p] = s1;
            j->p2[p] = s2;
        }
    }
}

/* y = (x - mean) * (rstd * w) + b per plane */
static void pass_y(void *arg, int64_t begin, int64_t end) {
    const cnorm_job *j = arg;
    int64_t S = j->g->s, C = j->g->c;
    for (int64_t p = begin; p < end; p++) {
        int64_t st = stat_of(j->g, p), c = p % C;
        if (j->ct == FC_F32) {
            const float *restrict xr = (const float *)j->x + p * S;
            float *restrict yr = (float *)j->out + p * S;
            float mu = (float)j->mean[st], rs = (float)j->rstd[st];
            float sc = rs * (float)j->w[c], bb = (float)j->b[c];
            for (int64_t i = 0; i < S; i++)
                yr[i] = (xr[i] - mu) * sc + bb;
        } else {
            const double *restrict xr = (const double *)j->x + p * S;
            double *restrict yr = (double *)j->out + p * S;
            double mu = j->mean[st], sc = j->rstd[st] * j->w[c], bb = j->b[c];
            for (int64_t i = 0; i < S; i++)
                yr[i] = (xr[i] - mu) * sc + bb;
        }
    }
}

/* p1 = sum gy, p2 = sum gy * xhat per plane */
static void pass_back_sums(void *arg, int64_t begin, int64_t end) {
    const cnorm_job *j = arg;
    int64_t S = j->g->s;
    for (int64_t p = begin; p < end; p++) {
        int64_t st = stat_of(j->g, p);
        if (j->ct == FC_F32) {
            float mu = (float)j->mean[st], rs = (float)j->rstd[st];
            fc__rw_norm_sums((const float *)j->x + p * S, (const float *)j->gy + p * S, j->ones, S,
                             mu, rs, &j->p1[p], &j->p2[p]);
        } else {
            const double *xr = (const double *)j->x + p * S, *gr = (const double *)j->gy + p * S;
            double mu = j->mean[st], rs = j->rstd[st], s1 = 0, s2 = 0;
            for (int64_t i = 0; i < S; i++) {
                s1 += gr[i];
                s2 += gr[i] * ((xr[i] - mu) * rs);
            }
            j->p1[p] = s1;
            j->p2[p] = s2;
        }
    }
}

/* dx per plane, batch or fixed stats */
static void pass_dx(void *arg, int64_t begin, int64_t end) {
    const cnorm_job *j = arg;
    int64_t S = j->g->s, C = j->g->c;
    for (int64_t p = begin; p < end; p++) {
        int64_t st = stat_of(j->g, p), c = p % C;
        double ma = j->batch_stats ? j->ma[st] : 0, mb = j->batch_stats ? j->mb[st] : 0;
        if (j->ct == FC_F32) {
            const float *restrict xr = (const float *)j->x + p * S;
            const float *restrict gr = (const float *)j->gy + p * S;
            float *restrict dr = (float *)j->out + p * S;
            float mu = (float)j->mean[st], rs = (float)j->rstd[st], wc = (float)j->w[c];
            float fa = (float)ma, fb = (float)mb;
            if (j->batch_stats) {
                for (int64_t i = 0; i < S; i++)
                    dr[i] = rs * (gr[i] * wc - fa - (xr[i] - mu) * rs * fb);
            } else {
                float sc = wc * rs;
                for (int64_t i = 0; i < S; i++)
                    dr[i] = gr[i] * sc;
            }
        } else {
            const double *restrict xr = (const double *)j->x + p * S;
            const double *restrict gr = (const double *)j->gy + p * S;
            double *restrict dr = (double *)j->out + p * S;
            double mu = j->mean[st], rs = j->rstd[st], wc = j->w[c];
            for (int64_t i = 0; i < S; i++)
                dr[i] = j->batch_stats ? rs * (gr[i] * wc - ma - (xr[i] - mu) * rs * mb)
                                       : gr[i] * (wc * rs);
        }
    }
}

static void run_planes(fc_ctx *ctx, const cnorm_job *j, fc__range_fn fn) {
    int64_t grain = j->g->s >= CNORM_GRAIN ? 1 : CNORM_GRAIN / j->g->s;
    fc__parallel_for(ctx, j->g->n * j->g->c, grain, fn, (void *)j);
}

/* ---- helpers ----------------------------------------------------------------------------------
 */

/* The [n] elements of a rank-1 tensor of any float dtype and stride as
 * doubles into v; fill when t is NULL. */
static void load_vec(const fc_tensor *t, int64_t n, double fill, double *v) {
    if (!t) {
        for (int64_t i = 0; i < n; i++)
            v[i] = fill;
        return;
    }
    const char *base = fc__raw_base(&t->raw);
    int64_t step = t->raw.strides[0] * (int64_t)fc_dtype_size(t->raw.dtype);
    for (int64_t i = 0; i < n; i++)
        v[i] = fc__load_f64(t->raw.dtype, base + i * step);
}

/* A new contiguous [n] tensor of dtype ct holding v (NULL, error recorded). */
static fc_tensor *vec_tensor(fc_ctx *ctx, const char *op, fc_dtype ct, const double *v, int64_t n) {
    fc_tensor *t = fc__tensor_new(ctx, op, ct, &n, 1);
    if (!t) return NULL;
    char *base = fc__raw_base(&t->raw);
    for (int64_t i = 0; i < n; i++)
        fc__store_f64(ct, base + (size_t)i * fc_dtype_size(ct), v[i]);
    return t;
}

/* x, contiguous, in the compute dtype (a new reference). */
static fc_tensor *as_ct(fc_ctx *ctx, const char *op, fc_tensor *x, fc_dtype ct) {
    fc_tensor *xc = fc__copy_contiguous_ref(ctx, op, x);
    fc_tensor *xt = xc ? fc__copy_cast(ctx, op, xc, ct) : NULL;
    fc_release(xc);
    return xt;
}

static int64_t stat_count(const fc__cnorm_geom *g) {
    return (g->groups ? g->c / g->groups : g->n) * g->s;
}

/* ---- forward -------------------------------------------------------------------------------- */

/* The batch statistics into j->mean (refined mean) and var. */
static void batch_stats(fc_ctx *ctx, cnorm_job *j, double *mean, double *var) {
    const fc__cnorm_geom *g = j->g;
    int64_t P = g->n * g->c, nstat = fc__cnorm_nstat(g);
    double M = (double)stat_count(g);
    run_planes(ctx, j, pass_sum);
    memset(mean, 0, sizeof(double) * (size_t)nstat);
    for (int64_t p = 0; p < P; p++)
        mean[stat_of(g, p)] += j->p1[p];
    for (int64_t s = 0; s < nstat; s++)
        mean[s] /= M;
    run_planes(ctx, j, pass_dev);
    double *s1 = var + nstat; /* the second half of var's scratch */
    memset(var, 0, sizeof(double) * 2 * (size_t)nstat);
    for (int64_t p = 0; p < P; p++) {
        int64_t s = stat_of(g, p);
        s1[s] += j->p1[p];
        var[s] += j->p2[p];
    }
    for (int64_t s = 0; s < nstat; s++) {
        double d = s1[s] / M, v = var[s] / M - d * d;
        mean[s] = shift_of(j->ct, mean[s]) + d;
        var[s] = v > 0 ? v : 0;
    }
}

fc_tensor *fc__cnorm_forward(fc_ctx *ctx, const char *op, const fc__cnorm_geom *g, fc_tensor *x,
                             fc_tensor *weight, fc_tensor *bias, fc_tensor *run_mean,
                             fc_tensor *run_var, double eps, bool keep, bool want_moments,
                             fc__cnorm_out *out) {
    fc_dtype dt = x->raw.dtype, ct = dt == FC_F64 ? FC_F64 : FC_F32;
    int64_t P = g->n * g->c, C = g->c, nstat = fc__cnorm_nstat(g);
    if (out) *out = (fc__cnorm_out){0};
    fc_tensor *xc = fc__copy_contiguous_ref(ctx, op, x);
    fc_tensor *xt = xc ? fc__copy_cast(ctx, op, xc, ct) : NULL;
    fc_tensor *y = xt ? fc__tensor_new(ctx, op, ct, x->raw.shape, x->raw.rank) : NULL;
    /* p1, p2 [P]; mean, rstd [nstat]; var [2 nstat]; w, b [C] */
    size_t nd = 2 * (size_t)P + 4 * (size_t)nstat + 2 * (size_t)C;
    fc_buffer *buf = y ? fc__ctx_buffer(ctx, nd * sizeof(double)) : NULL;
    fc_status st = !y ? fc__failed(ctx) : FC_OK;
    if (st == FC_OK && !buf)
        st = fc__fail(ctx, FC_ERR_OOM, "%s: out of memory for the statistics", op);
    fc__cnorm_out o = {0};
    if (st == FC_OK) {
        double *d = buf->data, *mean = d + 2 * P, *rstd = mean + nstat, *var = rstd + nstat;
        double *w = var + 2 * nstat, *b = w + C;
        cnorm_job j = {.g = g,
                       .ct = ct,
                       .x = fc__raw_base(&xt->raw),
                       .out = fc__raw_base(&y->raw),
                       .mean = mean,
                       .rstd = rstd,
                       .w = w,
                       .b = b,
                       .p1 = d,
                       .p2 = d + P};
        load_vec(weight, C, 1.0, w);
        load_vec(bias, C, 0.0, b);
        if (run_mean) {
            load_vec(run_mean, C, 0.0, mean);
            load_vec(run_var, C, 0.0, var);
        } else {
            batch_stats(ctx, &j, mean, var);
        }
        for (int64_t s = 0; s < nstat; s++)
            rstd[s] = 1.0 / sqrt(var[s] + eps);
        run_planes(ctx, &j, pass_y);
        if (keep) {
            o.mean = vec_tensor(ctx, op, ct, mean, nstat);
            o.rstd = o.mean ? vec_tensor(ctx, op, ct, rstd, nstat) : NULL;
            if (!o.rstd) st = fc__failed(ctx);
        }
        if (st == FC_OK && want_moments) {
            /* mean then variance, each [nstat], contiguous in var's scratch order */
            memcpy(var + nstat, var, sizeof(double) * (size_t)nstat);
            memcpy(var, mean, sizeof(double) * (size_t)nstat);
            int64_t shape[2] = {2, nstat};
            o.moments = fc__tensor_new(ctx, op, FC_F64, shape, 2);
            if (o.moments)
                memcpy(fc__raw_base(&o.moments->raw), var, sizeof(double) * 2 * (size_t)nstat);
            else
                st = fc__failed(ctx);
        }
    }
    fc__buffer_release(buf);
    fc_release(xt);
    if (st == FC_OK && dt != ct) { /* f16 / bf16: the result in the input's dtype */
        fc_tensor *yd = fc__copy_cast(ctx, op, y, dt);
        fc_release(y);
        y = yd;
        if (!y) st = fc__failed(ctx);
    }
    if (st == FC_OK && keep) {
        o.x = xc;
        xc = NULL;
    }
    fc_release(xc);
    if (st != FC_OK) {
        fc_release(y);
        fc_release(o.mean);
        fc_release(o.rstd);
        fc_release(o.moments);
        return NULL;
    }
    if (out) *out = o;
    return y;
}

/* ---- backward ------------------------------------------------------------------------------- */

fc_status fc__cnorm_backward(fc_ctx *ctx, const char *op, const fc__cnorm_geom *g, fc_tensor *x,
                             fc_tensor *gy, fc_tensor *weight, fc_tensor *mean, fc_tensor *rstd,
                             bool batch_stats, bool want_x, bool want_w, bool want_b,
                             fc_tensor **dx, fc_tensor **dw, fc_tensor **db) {
    fc_dtype ct = gy->raw.dtype;
    int64_t P = g->n * g->c, C = g->c, S = g->s, nstat = fc__cnorm_nstat(g);
    double M = (double)stat_count(g);
    want_w = want_w && weight;
    bool sums = want_w || want_b || (want_x && batch_stats);
    fc_tensor *xt = as_ct(ctx, op, x, ct);
    fc_tensor *d = xt && want_x ? fc__tensor_new(ctx, op, ct, x->raw.shape, x->raw.rank) : NULL;
    /* p1, p2 [P]; mean, rstd, ma, mb [nstat]; w, dw, db [C]; then S floats of ones */
    size_t nd = 2 * (size_t)P + 4 * (size_t)nstat + 3 * (size_t)C;
    size_t nbytes = nd * sizeof(double) + (ct == FC_F32 ? (size_t)S * sizeof(float) : 0);
    fc_buffer *buf = xt && (d || !want_x) ? fc__ctx_buffer(ctx, nbytes) : NULL;
    fc_status st = !xt || (want_x && !d) ? fc__failed(ctx) : FC_OK;
    if (st == FC_OK && !buf)
        st = fc__fail(ctx, FC_ERR_OOM, "%s: out of memory for the partial sums", op);
    if (st == FC_OK) {
        double *p = buf->data, *mu = p + 2 * P, *rs = mu + nstat, *ma = rs + nstat;
        double *mb = ma + nstat, *w = mb + nstat, *sdw = w + C, *sdb = sdw + C;
        float *ones = (float *)(sdb + C);
        if (ct == FC_F32)
            for (int64_t i = 0; i < S; i++)
                ones[i] = 1.0f;
        load_vec(mean, nstat, 0.0, mu);
        load_vec(rstd, nstat, 0.0, rs);
        load_vec(weight, C, 1.0, w);
        cnorm_job j = {.g = g,
                       .ct = ct,
                       .x = fc__raw_base(&xt->raw),
                       .gy = fc__raw_base(&gy->raw),
                       .out = d ? fc__raw_base(&d->raw) : NULL,
                       .mean = mu,
                       .rstd = rs,
                       .w = w,
                       .ma = ma,
                       .mb = mb,
                       .p1 = p,
                       .p2 = p + P,
                       .ones = ones,
                       .batch_stats = batch_stats};
        if (sums) {
            run_planes(ctx, &j, pass_back_sums);
            memset(ma, 0, sizeof(double) * 2 * (size_t)nstat);
            memset(sdw, 0, sizeof(double) * 2 * (size_t)C);
            for (int64_t q = 0; q < P; q++) { /* plane order: fixed for any thread count */
                int64_t s = stat_of(g, q), c = q % C;
                sdb[c] += j.p1[q];
                sdw[c] += j.p2[q];
                ma[s] += w[c] * j.p1[q];
                mb[s] += w[c] * j.p2[q];
            }
            for (int64_t s = 0; s < nstat; s++) {
                ma[s] /= M;
                mb[s] /= M;
            }
        }
        if (want_x) run_planes(ctx, &j, pass_dx);
        if (want_w && !(*dw = vec_tensor(ctx, op, ct, sdw, C))) st = fc__failed(ctx);
        if (st == FC_OK && want_b && !(*db = vec_tensor(ctx, op, ct, sdb, C))) st = fc__failed(ctx);
    }
    fc__buffer_release(buf);
    fc_release(xt);
    if (st != FC_OK) {
        fc_release(d);
        return st;
    }
    if (want_x) *dx = d;
    return FC_OK;
}

/* ---- running statistics --------------------------------------------------------------------- */

void fc__batch_norm_update_running(fc_tensor *run_mean, fc_tensor *run_var,
                                   const fc_tensor *moments, int64_t count, double momentum) {
    int64_t C = run_mean->raw.shape[0];
    const double *mv = (const double *)fc__raw_base(&moments->raw), *vv = mv + C;
    double unbias = (double)count / (double)(count - 1); /* count > 1: the op checked */
    fc_tensor *ts[2] = {run_mean, run_var};
    for (int k = 0; k < 2; k++) {
        fc_tensor *t = ts[k];
        fc__buffer_bump_generation(t->raw.buf);
        char *base = fc__raw_base(&t->raw);
        int64_t step = t->raw.strides[0] * (int64_t)fc_dtype_size(t->raw.dtype);
        for (int64_t c = 0; c < C; c++) {
            double batch = k == 0 ? mv[c] : vv[c] * unbias;
            char *e = base + c * step;
            double r = fc__load_f64(t->raw.dtype, e);
            fc__store_f64(t->raw.dtype, e, (1.0 - momentum) * r + momentum * batch);
        }
    }
}
