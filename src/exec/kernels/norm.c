/* SPDX-License-Identifier: MIT */
/* norm.c - layer_norm and rms_norm over the last axis, forward and the
 * fused backward kernel (the ops and their rule are in src/ops/norm.c).
 *
 *   layer_norm  y = (x - mean) * rstd * w + b,  rstd = 1 / sqrt(var + eps)
 *   rms_norm    y = x * rstd * w,               rstd = 1 / sqrt(mean(x^2) + eps)
 * var is the biased variance. A row (D elements) is read from memory once:
 * the mean pass brings it into L1, the centred sum of squares (two-pass,
 * so no cancellation when |mean| >> std) and the output pass run on the
 * cached row; the sums use f32 lanes flushed into doubles. Rows too long
 * to stay cached get their statistics in one pass (sum and sum of squares
 * shifted by the first 4096 elements' mean). The forward
 * saves mean and rstd per row for the backward. A missing weight or bias
 * is a row of ones or zeros, so one loop serves every case.
 *
 * Backward, one pass per row (xhat = (x - mean) * rstd, gy = g * w):
 *   dx = rstd * (gy - mean(gy) - xhat * mean(gy * xhat))   (rms: no mean(gy) term)
 *   dw = sum over rows of g * xhat,   db = sum over rows of g
 * dw and db are accumulated per fixed group of rows (shape-only), then the
 * groups are added in order: the bits do not depend on the thread count.
 * Large f32 outputs (y, dx) are staged a row at a time in L1 and streamed
 * out (rowwise.h, streaming stores). */
#include "exec/kernels/norm.h"
#include "exec/kernels/rowwise.h"
#ifdef FC__RW_X86
#include <immintrin.h>
#endif

#define NORM_GROUPS 64    /* row groups of the backward's dw/db partial sums */
#define ONEPASS_MIN 32768 /* longer rows leave L2 between passes: one-pass statistics */

/* ---- forward rows -------------------------------------------------------------------------- */

typedef struct norm_arg {
    fc_dtype ct;
    bool rms;
    double eps;
    const void *w, *b; /* [dim] compute values (ones / zeros when absent) */
    void *mean, *rstd; /* [rows] compute values, NULL when not recorded */
    bool stream;       /* f32 output streamed around the cache (rowwise.h) */
} norm_arg;

FC__RW_INLINE void norm_f32_body(const norm_arg *a, const float *x, float *y, int64_t row0,
                                 int64_t nrows, int64_t dim) {
    const float *restrict w = a->w, *restrict b = a->b;
    for (int64_t t = 0; t < nrows; t++) {
        const float *restrict xr = x + t * dim;
        float *restrict yr = y + t * dim;
        float mu;
        double var;
        if (a->rms) {
            mu = 0.0f;
            var = fc__rw_sumsq_dev(xr, dim, 0.0f) / (double)dim;
        } else if (dim <= ONEPASS_MIN) { /* centred second pass over the cached row */
            mu = (float)(fc__rw_sum(xr, dim) / (double)dim);
            var = fc__rw_sumsq_dev(xr, dim, mu) / (double)dim;
        } else { /* one pass, shifted by the first block's mean against cancellation */
            int64_t k = dim < 4096 ? dim : 4096;
            float c = (float)(fc__rw_sum(xr, k) / (double)k);
            double s1, s2;
            fc__rw_sum_sumsq(xr, dim, c, &s1, &s2);
            double d = s1 / (double)dim;
            mu = (float)(c + d);
            var = s2 / (double)dim - d * d;
            var = var > 0 ? var : 0;
        }
        float rs = (float)(1.0 / sqrt(var + a->eps));
        if (a->mean) ((float *)a->mean)[row0 + t] = mu;
        if (a->rstd) ((float *)a->rstd)[row0 + t] = rs;
        for (int64_t j = 0; j < dim; j++)
            yr[j] = (xr[j] - mu) * rs * w[j] + b[j];
    }
}

#ifdef FC__RW_X86
FC__RW_AVX2 static void norm_f32_avx2(const norm_arg *a, const float *x, float *y, int64_t row0,
                                      int64_t nrows, int64_t dim) {
    norm_f32_body(a, x, y, row0, nrows, dim);
}
#endif
static void norm_f32_base(const norm_arg *a, const float *x, float *y, int64_t row0, int64_t nrows,
                          int64_t dim) {
    norm_f32_body(a, x, y, row0, nrows, dim);
}

static void norm_f64(const norm_arg *a, const double *x, double *y, int64_t row0, int64_t nrows,
                     int64_t dim) {
    const double *w = a->w, *b = a->b;
    for (int64_t t = 0; t < nrows; t++) {
        const double *xr = x + t * dim;
        double *yr = y + t * dim, mu = 0, var = 0;
        if (!a->rms) {
            for (int64_t j = 0; j < dim; j++)
                mu += xr[j];
            mu /= (double)dim;
        }
        for (int64_t j = 0; j < dim; j++)
            var += (xr[j] - mu) * (xr[j] - mu);
        double rs = 1.0 / sqrt(var / (double)dim + a->eps);
        if (a->mean) ((double *)a->mean)[row0 + t] = mu;
        if (a->rstd) ((double *)a->rstd)[row0 + t] = rs;
        for (int64_t j = 0; j < dim; j++)
            yr[j] = (xr[j] - mu) * rs * w[j] + b[j];
    }
}

static void norm_rows(void *arg, int64_t group, int64_t row0, int64_t nrows, int64_t dim,
                      void *const *rows) {
    const norm_arg *a = arg;
    if (a->ct == FC_F64) {
        norm_f64(a, rows[0], rows[1], row0, nrows, dim);
        return;
    }
#ifdef FC__RW_X86
    if (a->stream && fc__rw_stream_rows_ok(rows[1], dim)) { /* stage each row in L1 */
        float tmp[FC__RW_STREAM_ROW_MAX] __attribute__((aligned(64)));
        for (int64_t t = 0; t < nrows; t++) {
            norm_f32_avx2(a, (const float *)rows[0] + t * dim, tmp, row0 + t, 1, dim);
            fc__rw_stream_scaled((float *)rows[1] + t * dim, tmp, dim, 1.0f);
        }
        fc__rw_stream_fence();
        return;
    }
    if (fc__rw_avx2()) {
        norm_f32_avx2(a, rows[0], rows[1], row0, nrows, dim);
        return;
    }
#endif
    norm_f32_base(a, rows[0], rows[1], row0, nrows, dim);
}

/* ---- backward rows ------------------------------------------------------------------------- */

typedef struct normb_arg {
    fc_dtype ct;
    bool rms;
    const void *w;           /* [dim] (ones when absent) */
    const void *mean, *rstd; /* [rows]; mean NULL for rms */
    bool want_x;
    bool stream;     /* f32 dx streamed around the cache (rowwise.h) */
    void *pdw, *pdb; /* [groups][dim] partial sums */
} normb_arg;

/* The elementwise passes take restrict parameters: with six pointers the
 * compiler would otherwise give up on run-time alias checks. */
FC__RW_INLINE void normb_f32_row(const float *restrict xr, const float *restrict gr,
                                 const float *restrict w, float *restrict dr, float *restrict pdw,
                                 float *restrict pdb, int64_t dim, float mu, float rs, float ma,
                                 float mb) {
    for (int64_t j = 0; j < dim; j++) {
        float xh = (xr[j] - mu) * rs;
        dr[j] = rs * (gr[j] * w[j] - ma - xh * mb);
        pdw[j] += gr[j] * xh;
        pdb[j] += gr[j];
    }
}

FC__RW_INLINE void normb_f32_params(const float *restrict xr, const float *restrict gr,
                                    float *restrict pdw, float *restrict pdb, int64_t dim, float mu,
                                    float rs) {
    for (int64_t j = 0; j < dim; j++) {
        pdw[j] += gr[j] * ((xr[j] - mu) * rs);
        pdb[j] += gr[j];
    }
}

FC__RW_INLINE void normb_f32_body(const normb_arg *a, int64_t group, const float *x, const float *g,
                                  float *dx, int64_t row0, int64_t nrows, int64_t dim) {
    const float *w = a->w;
    float *pdw = (float *)a->pdw + group * dim, *pdb = (float *)a->pdb + group * dim;
    for (int64_t t = 0; t < nrows; t++) {
        const float *xr = x + t * dim, *gr = g + t * dim;
        float mu = a->mean ? ((const float *)a->mean)[row0 + t] : 0.0f;
        float rs = ((const float *)a->rstd)[row0 + t];
        double sa, sb;
        fc__rw_norm_sums(xr, gr, w, dim, mu, rs, &sa, &sb);
        float ma = a->rms ? 0.0f : (float)(sa / (double)dim), mb = (float)(sb / (double)dim);
        if (dx)
            normb_f32_row(xr, gr, w, dx + t * dim, pdw, pdb, dim, mu, rs, ma, mb);
        else
            normb_f32_params(xr, gr, pdw, pdb, dim, mu, rs);
    }
}

#ifdef FC__RW_X86
FC__RW_AVX2 static void normb_f32_avx2(const normb_arg *a, int64_t group, const float *x,
                                       const float *g, float *dx, int64_t row0, int64_t nrows,
                                       int64_t dim) {
    normb_f32_body(a, group, x, g, dx, row0, nrows, dim);
}
#endif
#ifdef FC__RW_X86
/* One AVX-512 step of normb_f32_row at column j of one row: dx streamed
 * out, g * xhat and g returned for the partial sums. Operation for
 * operation the plain loop (no fused multiply-add): the same bits. */
typedef struct normb_row_v {
    const float *x, *g;
    float *dx;
    __m512 mu, rs, ma, mb;
} normb_row_v;

FC__RW_AVX512 static inline void normb_step(const normb_row_v *r, const float *w, int64_t j,
                                            __m512 *gxh, __m512 *gv) {
    __m512 g = _mm512_loadu_ps(r->g + j);
    __m512 xh = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(r->x + j), r->mu), r->rs);
    __m512 gy = _mm512_mul_ps(g, _mm512_loadu_ps(w + j));
    __m512 d = _mm512_sub_ps(_mm512_sub_ps(gy, r->ma), _mm512_mul_ps(xh, r->mb));
    _mm512_stream_ps(r->dx + j, _mm512_mul_ps(r->rs, d));
    *gxh = _mm512_mul_ps(g, xh);
    *gv = g;
}

FC__RW_AVX512 static normb_row_v normb_row_setup(const normb_arg *a, const float *x, const float *g,
                                                 float *dx, int64_t row, int64_t dim) {
    float mu = a->mean ? ((const float *)a->mean)[row] : 0.0f;
    float rs = ((const float *)a->rstd)[row];
    double sa, sb;
    fc__rw_norm_sums_avx512(x, g, a->w, dim, mu, rs, &sa, &sb);
    float ma = a->rms ? 0.0f : (float)(sa / (double)dim), mb = (float)(sb / (double)dim);
    return (normb_row_v){
        x, g, dx, _mm512_set1_ps(mu), _mm512_set1_ps(rs), _mm512_set1_ps(ma), _mm512_set1_ps(mb)};
}

/* The streamed twin of normb_f32_body (dim % 16 == 0, dx 64-byte aligned).
 * Rows go in pairs so the partial sums are loaded and stored once per two
 * rows; the two rows' terms are still added one after the other, in row
 * order, as the plain loop adds them. */
FC__RW_AVX512 static void normb_f32_stream(const normb_arg *a, int64_t group, const float *x,
                                           const float *g, float *dx, int64_t row0, int64_t nrows,
                                           int64_t dim) {
    const float *w = a->w;
    float *pdw = (float *)a->pdw + group * dim, *pdb = (float *)a->pdb + group * dim;
    int64_t t = 0;
    for (; t + 2 <= nrows; t += 2) {
        int64_t o0 = t * dim, o1 = o0 + dim;
        normb_row_v r0 = normb_row_setup(a, x + o0, g + o0, dx + o0, row0 + t, dim);
        normb_row_v r1 = normb_row_setup(a, x + o1, g + o1, dx + o1, row0 + t + 1, dim);
        for (int64_t j = 0; j < dim; j += 16) {
            __m512 p0, b0, p1, b1;
            normb_step(&r0, w, j, &p0, &b0);
            normb_step(&r1, w, j, &p1, &b1);
            __m512 dwv = _mm512_add_ps(_mm512_add_ps(_mm512_loadu_ps(pdw + j), p0), p1);
            __m512 dbv = _mm512_add_ps(_mm512_add_ps(_mm512_loadu_ps(pdb + j), b0), b1);
            _mm512_storeu_ps(pdw + j, dwv);
            _mm512_storeu_ps(pdb + j, dbv);
        }
    }
    if (t < nrows) {
        int64_t o = t * dim;
        normb_row_v r = normb_row_setup(a, x + o, g + o, dx + o, row0 + t, dim);
        for (int64_t j = 0; j < dim; j += 16) {
            __m512 p, b;
            normb_step(&r, w, j, &p, &b);
            _mm512_storeu_ps(pdw + j, _mm512_add_ps(_mm512_loadu_ps(pdw + j), p));
            _mm512_storeu_ps(pdb + j, _mm512_add_ps(_mm512_loadu_ps(pdb + j), b));
        }
    }
    fc__rw_stream_fence();
}
#endif
static void normb_f32_base(const normb_arg *a, int64_t group, const float *x, const float *g,
                           float *dx, int64_t row0, int64_t nrows, int64_t dim) {
    normb_f32_body(a, group, x, g, dx, row0, nrows, dim);
}

static void normb_f64(const normb_arg *a, int64_t group, const double *x, const double *g,
                      double *dx, int64_t row0, int64_t nrows, int64_t dim) {
    const double *w = a->w;
    double *pdw = (double *)a->pdw + group * dim, *pdb = (double *)a->pdb + group * dim;
    for (int64_t t = 0; t < nrows; t++) {
        const double *xr = x + t * dim, *gr = g + t * dim;
        double mu = a->mean ? ((const double *)a->mean)[row0 + t] : 0.0;
        double rs = ((const double *)a->rstd)[row0 + t], sa = 0, sb = 0;
        for (int64_t j = 0; j < dim; j++) {
            double gy = gr[j] * w[j];
            sa += gy;
            sb += gy * (xr[j] - mu) * rs;
        }
        double ma = a->rms ? 0.0 : sa / (double)dim, mb = sb / (double)dim;
        for (int64_t j = 0; j < dim; j++) {
            double xh = (xr[j] - mu) * rs;
            if (dx) dx[t * dim + j] = rs * (gr[j] * w[j] - ma - xh * mb);
            pdw[j] += gr[j] * xh;
            pdb[j] += gr[j];
        }
    }
}

/* rows[0]: x, rows[1]: g, rows[2]: dx (when wanted) */
static void normb_rows(void *arg, int64_t group, int64_t row0, int64_t nrows, int64_t dim,
                       void *const *rows) {
    const normb_arg *a = arg;
    void *dx = a->want_x ? rows[2] : NULL;
    if (a->ct == FC_F64) {
        normb_f64(a, group, rows[0], rows[1], dx, row0, nrows, dim);
        return;
    }
#ifdef FC__RW_X86
    if (dx && a->stream && fc__rw_stream_rows_ok(dx, dim)) {
        if (fc__rw_avx512()) {
            normb_f32_stream(a, group, rows[0], rows[1], dx, row0, nrows, dim);
            return;
        }
        /* AVX2: each row's dx staged in L1 and streamed out; the partial
         * sums see the rows in the same order as the plain loop */
        float tmp[FC__RW_STREAM_ROW_MAX] __attribute__((aligned(64)));
        const float *x = rows[0], *g = rows[1];
        for (int64_t t = 0; t < nrows; t++) {
            normb_f32_avx2(a, group, x + t * dim, g + t * dim, tmp, row0 + t, 1, dim);
            fc__rw_stream_scaled((float *)dx + t * dim, tmp, dim, 1.0f);
        }
        fc__rw_stream_fence();
        return;
    }
    if (fc__rw_avx2()) {
        normb_f32_avx2(a, group, rows[0], rows[1], dx, row0, nrows, dim);
        return;
    }
#endif
    normb_f32_base(a, group, rows[0], rows[1], dx, row0, nrows, dim);
}

/* ---- parameters as compute rows ------------------------------------------------------------ */

/* p as a contiguous tensor of compute values (a new reference; p itself,
 * retained, when it already is one). NULL with the error recorded. */
static fc_tensor *param_ct(fc_ctx *ctx, fc_tensor *p, fc_dtype ct) {
    fc_tensor *c = fc__copy_contiguous_ref(ctx, "fc_contiguous", p);
    fc_tensor *v = c ? fc__copy_cast(ctx, "fc_to", c, ct) : NULL;
    fc_release(c);
    return v;
}

/* A [dim] row of `fill` in scratch. */
static const void *const_row(fc_dtype ct, int64_t dim, double fill, void *scratch) {
    for (int64_t j = 0; j < dim; j++) {
        if (ct == FC_F32)
            ((float *)scratch)[j] = (float)fill;
        else
            ((double *)scratch)[j] = fill;
    }
    return scratch;
}

/* ---- backward kernel ----------------------------------------------------------------------- */

/* dw and db from the per-group partial sums: each column adds its groups
 * in group order, in double, whatever thread takes it. */
typedef struct group_sums {
    fc_dtype ct;
    int64_t groups, dim;
    const void *part[2]; /* pdw, pdb ([groups][dim]); NULL: not wanted */
    void *out[2];
} group_sums;

#define GROUP_SUM_COLS 256 /* columns per step: the double accumulators stay in L1 */

static void group_sums_range(void *arg, int64_t begin, int64_t end) {
    const group_sums *gs = arg;
    double acc[GROUP_SUM_COLS];
    for (int k = 0; k < 2; k++) {
        if (!gs->part[k]) continue;
        for (int64_t j0 = begin; j0 < end; j0 += GROUP_SUM_COLS) {
            int64_t n = end - j0 < GROUP_SUM_COLS ? end - j0 : GROUP_SUM_COLS;
            memset(acc, 0, sizeof acc);
            for (int64_t q = 0; q < gs->groups; q++) {
                if (gs->ct == FC_F32) {
                    const float *p = (const float *)gs->part[k] + q * gs->dim + j0;
                    for (int64_t j = 0; j < n; j++)
                        acc[j] += (double)p[j];
                } else {
                    const double *p = (const double *)gs->part[k] + q * gs->dim + j0;
                    for (int64_t j = 0; j < n; j++)
                        acc[j] += p[j];
                }
            }
            for (int64_t j = 0; j < n; j++) {
                if (gs->ct == FC_F32)
                    ((float *)gs->out[k])[j0 + j] = (float)acc[j];
                else
                    ((double *)gs->out[k])[j0 + j] = acc[j];
            }
        }
    }
}

fc_status fc__norm_backward(fc_ctx *ctx, bool rms, fc_tensor *x, fc_tensor *g, fc_tensor *w,
                            fc_tensor *mean, fc_tensor *rstd, bool want_x, bool want_w, bool want_b,
                            fc_tensor **dx, fc_tensor **dw, fc_tensor **db) {
    const char *op = rms ? "rms_norm_backward" : "layer_norm_backward";
    fc_dtype ct = g->raw.dtype;
    int64_t dim = x->raw.shape[x->raw.rank - 1], rows = fc__raw_numel(&x->raw) / dim;
    int64_t groups = rows < NORM_GROUPS ? rows : NORM_GROUPS;
    size_t cs = fc_dtype_size(ct), pbytes = (size_t)(groups * dim) * cs;
    fc_buffer *buf = fc__ctx_buffer(ctx, 2 * pbytes + (size_t)dim * cs);
    if (!buf) return fc__fail(ctx, FC_ERR_OOM, "%s: out of memory for partial sums", op);
    memset(buf->data, 0, 2 * pbytes);
    normb_arg arg = {.ct = ct, .rms = rms, .want_x = want_x};
    arg.pdw = buf->data;
    arg.pdb = (char *)buf->data + pbytes;
    fc_tensor *wv = w ? param_ct(ctx, w, ct) : NULL;
    arg.w = wv ? fc__raw_base(&wv->raw) : const_row(ct, dim, 1.0, (char *)buf->data + 2 * pbytes);
    arg.mean = mean ? fc__raw_base(&mean->raw) : NULL;
    arg.rstd = fc__raw_base(&rstd->raw);
    fc_tensor *d = want_x ? fc__tensor_new(ctx, op, ct, x->raw.shape, x->raw.rank) : NULL;
    fc_status st = (w && !wv) || (want_x && !d) ? fc__failed(ctx) : FC_OK;
    arg.stream = d && fc__rw_stream_output(&d->raw);
    if (st == FC_OK) {
        fc__rows_job job = {.outer = rows,
                            .dim = dim,
                            .inner = 1,
                            .nin = 2,
                            .nout = want_x,
                            .ops = {&x->raw, &g->raw, d ? &d->raw : NULL},
                            .ct = ct,
                            .groups = groups,
                            .fn = normb_rows,
                            .arg = &arg};
        st = fc__rows_run(ctx, op, &job);
    }
    group_sums gs = {.ct = ct, .groups = groups, .dim = dim};
    if (st == FC_OK && want_w && w) {
        *dw = fc__tensor_new(ctx, op, ct, &dim, 1);
        if (!*dw) st = fc__failed(ctx);
        gs.part[0] = arg.pdw;
        gs.out[0] = *dw ? fc__raw_base(&(*dw)->raw) : NULL;
    }
    if (st == FC_OK && want_b) {
        *db = fc__tensor_new(ctx, op, ct, &dim, 1);
        if (!*db) st = fc__failed(ctx);
        gs.part[1] = arg.pdb;
        gs.out[1] = *db ? fc__raw_base(&(*db)->raw) : NULL;
    }
    if (st == FC_OK && (gs.part[0] || gs.part[1]))
        fc__parallel_for(ctx, dim, GROUP_SUM_COLS, group_sums_range, &gs);
    fc_release(wv);
    fc__buffer_release(buf);
    if (st == FC_OK) *dx = d;
    return st;
}

/* ---- forward kernel ---------------------------------------------------------------------- */

fc_tensor *fc__norm_forward(fc_ctx *ctx, const char *op, bool rms, fc_tensor *x, fc_tensor *w,
                            fc_tensor *b, double eps, fc__norm_stats *stats) {
    bool keep = stats != NULL;
    fc_dtype dt = x->raw.dtype, ct = fc__rw_float_ct(dt);
    int64_t dim = x->raw.shape[x->raw.rank - 1], rows = fc__raw_numel(&x->raw) / dim;
    fc_tensor *xc = fc__copy_contiguous_ref(ctx, "fc_contiguous", x);
    fc_tensor *y = fc__tensor_new(ctx, op, dt, x->raw.shape, x->raw.rank);
    fc_tensor *mean = keep && !rms ? fc__tensor_new(ctx, op, ct, &rows, 1) : NULL;
    fc_tensor *rstd = keep ? fc__tensor_new(ctx, op, ct, &rows, 1) : NULL;
    fc_tensor *wv = w ? param_ct(ctx, w, ct) : NULL;
    fc_tensor *bv = b && !rms ? param_ct(ctx, b, ct) : NULL;
    fc_buffer *buf = fc__ctx_buffer(ctx, 2 * (size_t)dim * fc_dtype_size(ct));
    fc_status st =
        !xc || !y || (keep && (!rstd || (!rms && !mean))) || (w && !wv) || (b && !rms && !bv)
            ? fc__failed(ctx)
            : FC_OK;
    if (st == FC_OK && !buf)
        st = fc__fail(ctx, FC_ERR_OOM, "%s: out of memory for parameter rows", op);
    if (st == FC_OK) {
        norm_arg arg = {.ct = ct, .rms = rms, .eps = eps};
        char *sc = buf->data;
        arg.w = wv ? fc__raw_base(&wv->raw) : const_row(ct, dim, 1.0, sc);
        arg.b = bv ? fc__raw_base(&bv->raw)
                   : const_row(ct, dim, 0.0, sc + (size_t)dim * fc_dtype_size(ct));
        arg.mean = mean ? fc__raw_base(&mean->raw) : NULL;
        arg.rstd = rstd ? fc__raw_base(&rstd->raw) : NULL;
        arg.stream = fc__rw_stream_output(&y->raw);
        fc__rows_job job = {.outer = rows,
                            .dim = dim,
                            .inner = 1,
                            .nin = 1,
                            .nout = 1,
                            .ops = {&xc->raw, &y->raw},
                            .ct = ct,
                            .fn = norm_rows,
                            .arg = &arg};
        st = fc__rows_run(ctx, op, &job);
    }
    if (buf) fc__buffer_release(buf);
    fc_release(wv);
    fc_release(bv);
    if (st == FC_OK && keep) {
        *stats = (fc__norm_stats){xc, mean, rstd};
        return y;
    }
    if (keep) *stats = (fc__norm_stats){0};
    fc_release(xc);
    fc_release(mean);
    fc_release(rstd);
    if (st != FC_OK) {
        fc_release(y);
        return NULL;
    }
    return y;
}
