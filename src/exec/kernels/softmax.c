/* SPDX-License-Identifier: MIT */
/* softmax.c - softmax and log_softmax along any axis, forward and the
 * fused backward kernels (the ops and their rules are in src/ops/softmax.c).
 *
 * A row is read from memory once: the max pass brings it into L1 and the
 * exp, sum and scale passes run on the cached row (for the [4096, 1024]
 * benchmark a row is 4 KB), so the traffic is one read of x and one write
 * of y. Rows too long to stay cached take an online pass (running max and
 * rescaled running sum per block) and one writing pass. Rows along a non-last axis are gathered
 * into tiles by the row driver (rowwise.h). f16/bf16 compute in f32 and round once on store; f64
 * computes in f64 with libm's exp.
 *
 *   softmax      y = exp(x - m) / sum exp(x - m),   m = max(x)
 *   log_softmax  y = (x - m) - log(sum exp(x - m))
 *   backward     softmax: dx = y * (g - sum(g * y));  log: dx = g - exp(y) * sum(g)
 * A row with a NaN gives NaN everywhere; a row of -inf gives NaN (as in
 * PyTorch). Large f32 softmax outputs (y, dx) are streamed around the cache
 * (rowwise.h, streaming stores). */
#include "exec/kernels/softmax.h"
#include "exec/kernels/rowwise.h"

#ifdef FC__RW_X86
#include <immintrin.h>
#endif

typedef struct sm_arg {
    fc_dtype ct;
    bool is_log;
    bool stream; /* f32 output streamed around the cache (rowwise.h) */
} sm_arg;

/* ---- forward rows ------------------------------------------------------------------------- */

/* Rows longer than this no longer stay in L2 with their output between
 * passes: they take the online path (one read for max and sum together). */
#define ONLINE_MIN 32768
#define ONLINE_BLOCK 4096

/* Online max + sum over blocks (the running sum is rescaled whenever the
 * max grows), then one pass writing the result. */
static void softmax_long_row(const float *xr, float *yr, int64_t dim, bool is_log) {
    float m = -INFINITY;
    double s = 0;
    for (int64_t b = 0; b < dim; b += ONLINE_BLOCK) {
        int64_t len = dim - b < ONLINE_BLOCK ? dim - b : ONLINE_BLOCK;
        bool nan;
        float bm = fc__rw_max(xr + b, len, &nan);
        if (bm > m) {
            s *= exp((double)m - (double)bm);
            m = bm;
        }
        if (m == -INFINITY && !nan) continue; /* all -inf so far: adds exp(-inf) = 0 */
        s += fc__rw_exp(xr + b, NULL, len, m);
    }
    if (m == -INFINITY) s = NAN; /* a row of -inf is NaN, as on the short path */
    if (is_log) {
        float ls = (float)log(s);
        for (int64_t j = 0; j < dim; j++)
            yr[j] = (xr[j] - m) - ls;
        return;
    }
    float inv = (float)(1.0 / s);
    for (int64_t b = 0; b < dim; b += ONLINE_BLOCK) {
        int64_t len = dim - b < ONLINE_BLOCK ? dim - b : ONLINE_BLOCK;
        fc__rw_exp(xr + b, yr + b, len, m);
        for (int64_t j = b; j < b + len; j++)
            yr[j] *= inv;
    }
}

FC__RW_INLINE void softmax_f32_body(const float *x, float *y, int64_t nrows, int64_t dim,
                                    bool is_log) {
    for (int64_t t = 0; t < nrows; t++) {
        const float *restrict xr = x + t * dim;
        float *restrict yr = y + t * dim;
        if (dim > ONLINE_MIN) {
            softmax_long_row(xr, yr, dim, is_log);
            continue;
        }
        bool nan;
        float m = fc__rw_max(xr, dim, &nan);
        if (is_log) {
            float ls = (float)log(fc__rw_exp(xr, NULL, dim, m));
            for (int64_t j = 0; j < dim; j++)
                yr[j] = (xr[j] - m) - ls;
        } else {
            float inv = (float)(1.0 / fc__rw_exp(xr, yr, dim, m));
            for (int64_t j = 0; j < dim; j++)
                yr[j] *= inv;
        }
    }
}

#ifdef FC__RW_X86
FC__RW_AVX2 static void softmax_f32_avx2(const float *x, float *y, int64_t nrows, int64_t dim,
                                         bool is_log) {
    softmax_f32_body(x, y, nrows, dim, is_log);
}
#endif
#ifdef FC__RW_X86
/* Softmax (not log) rows with a streamed output: the exp pass writes an L1
 * scratch row, the scaling pass streams it to y. The primitives pick AVX2
 * or AVX-512 themselves; the row is long enough that the calls cost
 * nothing. */
static void softmax_f32_stream(const float *x, float *y, int64_t nrows, int64_t dim) {
    float tmp[FC__RW_STREAM_ROW_MAX] __attribute__((aligned(64)));
    for (int64_t t = 0; t < nrows; t++) {
        const float *xr = x + t * dim;
        bool nan;
        float m = fc__rw_max(xr, dim, &nan);
        float inv = (float)(1.0 / fc__rw_exp(xr, tmp, dim, m));
        fc__rw_stream_scaled(y + t * dim, tmp, dim, inv);
    }
    fc__rw_stream_fence();
}
#endif

static void softmax_f32_base(const float *x, float *y, int64_t nrows, int64_t dim, bool is_log) {
    softmax_f32_body(x, y, nrows, dim, is_log);
}

static void softmax_f64(const double *x, double *y, int64_t nrows, int64_t dim, bool is_log) {
    for (int64_t t = 0; t < nrows; t++) {
        const double *xr = x + t * dim;
        double *yr = y + t * dim, m = -INFINITY, s = 0;
        for (int64_t j = 0; j < dim; j++)
            m = xr[j] > m ? xr[j] : m;
        for (int64_t j = 0; j < dim; j++) {
            yr[j] = exp(xr[j] - m);
            s += yr[j];
        }
        if (is_log) {
            double ls = log(s);
            for (int64_t j = 0; j < dim; j++)
                yr[j] = (xr[j] - m) - ls;
        } else {
            for (int64_t j = 0; j < dim; j++)
                yr[j] /= s;
        }
    }
}

static void softmax_rows(void *arg, int64_t group, int64_t row0, int64_t nrows, int64_t dim,
                         void *const *rows) {
    const sm_arg *a = arg;
    if (a->ct == FC_F64) {
        softmax_f64(rows[0], rows[1], nrows, dim, a->is_log);
        return;
    }
#ifdef FC__RW_X86
    if (a->stream && !a->is_log && fc__rw_stream_rows_ok(rows[1], dim)) {
        softmax_f32_stream(rows[0], rows[1], nrows, dim);
        return;
    }
    if (fc__rw_avx2()) {
        softmax_f32_avx2(rows[0], rows[1], nrows, dim, a->is_log);
        return;
    }
#endif
    softmax_f32_base(rows[0], rows[1], nrows, dim, a->is_log);
}

/* ---- forward kernel ----------------------------------------------------------------------- */

fc_tensor *fc__softmax_forward(fc_ctx *ctx, const char *op, fc_tensor *x, int axis, bool is_log) {
    fc_tensor *xc = fc__copy_contiguous_ref(ctx, "fc_contiguous", x);
    if (!xc) return NULL;
    fc_tensor *y = fc__tensor_new(ctx, op, x->raw.dtype, x->raw.shape, x->raw.rank);
    if (!y) {
        fc_release(xc);
        return NULL;
    }
    sm_arg arg = {fc__rw_float_ct(x->raw.dtype), is_log, false};
    fc__rows_job job = {.nin = 1,
                        .nout = 1,
                        .ops = {&xc->raw, &y->raw},
                        .ct = arg.ct,
                        .fn = softmax_rows,
                        .arg = &arg};
    fc__shape_axis_geometry(x->raw.shape, x->raw.rank, axis, &job.outer, &job.dim, &job.inner);
    arg.stream = job.inner == 1 && fc__rw_stream_output(&y->raw);
    fc_status st = fc__rows_run(ctx, op, &job);
    fc_release(xc);
    if (st != FC_OK) {
        fc_release(y);
        return NULL;
    }
    return y;
}

/* ---- backward rows ------------------------------------------------------------------------ */

FC__RW_INLINE void softmax_bwd_f32_body(const float *y, const float *g, float *dx, int64_t nrows,
                                        int64_t dim, bool is_log) {
    for (int64_t t = 0; t < nrows; t++) {
        const float *restrict yr = y + t * dim, *restrict gr = g + t * dim;
        float *restrict dr = dx + t * dim;
        if (is_log) {
            float sg = (float)fc__rw_sum(gr, dim);
            fc__rw_exp(yr, dr, dim, 0.0f);
            for (int64_t j = 0; j < dim; j++)
                dr[j] = gr[j] - dr[j] * sg;
        } else {
            float dot = (float)fc__rw_dot(gr, yr, dim);
            for (int64_t j = 0; j < dim; j++)
                dr[j] = yr[j] * (gr[j] - dot);
        }
    }
}

#ifdef FC__RW_X86
FC__RW_AVX2 static void softmax_bwd_f32_avx2(const float *y, const float *g, float *dx,
                                             int64_t nrows, int64_t dim, bool is_log) {
    softmax_bwd_f32_body(y, g, dx, nrows, dim, is_log);
}
#endif
#ifdef FC__RW_X86
/* Softmax (not log) backward rows streaming dx: one read pass for the dot,
 * one pass writing dx around the cache. AVX-512, then its AVX2 twin. */
FC__RW_AVX512 static void softmax_bwd_f32_stream512(const float *y, const float *g, float *dx,
                                                    int64_t nrows, int64_t dim) {
    for (int64_t t = 0; t < nrows; t++) {
        const float *yr = y + t * dim, *gr = g + t * dim;
        float *dr = dx + t * dim;
        __m512 dot = _mm512_set1_ps((float)fc__rw_dot_avx512(gr, yr, dim));
        for (int64_t j = 0; j < dim; j += 16) {
            __m512 d = _mm512_sub_ps(_mm512_loadu_ps(gr + j), dot);
            _mm512_stream_ps(dr + j, _mm512_mul_ps(_mm512_loadu_ps(yr + j), d));
        }
    }
    fc__rw_stream_fence();
}

FC__RW_AVX2 static void softmax_bwd_f32_stream256(const float *y, const float *g, float *dx,
                                                  int64_t nrows, int64_t dim) {
    for (int64_t t = 0; t < nrows; t++) {
        const float *yr = y + t * dim, *gr = g + t * dim;
        float *dr = dx + t * dim;
        __m256 dot = _mm256_set1_ps((float)fc__rw_dot(gr, yr, dim));
        for (int64_t j = 0; j < dim; j += 8) {
            __m256 d = _mm256_sub_ps(_mm256_loadu_ps(gr + j), dot);
            _mm256_stream_ps(dr + j, _mm256_mul_ps(_mm256_loadu_ps(yr + j), d));
        }
    }
    fc__rw_stream_fence();
}
#endif

static void softmax_bwd_f32_base(const float *y, const float *g, float *dx, int64_t nrows,
                                 int64_t dim, bool is_log) {
    softmax_bwd_f32_body(y, g, dx, nrows, dim, is_log);
}

static void softmax_bwd_f64(const double *y, const double *g, double *dx, int64_t nrows,
                            int64_t dim, bool is_log) {
    for (int64_t t = 0; t < nrows; t++) {
        const double *yr = y + t * dim, *gr = g + t * dim;
        double *dr = dx + t * dim, s = 0;
        for (int64_t j = 0; j < dim; j++)
            s += is_log ? gr[j] : gr[j] * yr[j];
        for (int64_t j = 0; j < dim; j++)
            dr[j] = is_log ? gr[j] - exp(yr[j]) * s : yr[j] * (gr[j] - s);
    }
}

/* rows[0]: y, rows[1]: g, rows[2]: dx */
static void softmax_bwd_rows(void *arg, int64_t group, int64_t row0, int64_t nrows, int64_t dim,
                             void *const *rows) {
    const sm_arg *a = arg;
    if (a->ct == FC_F64) {
        softmax_bwd_f64(rows[0], rows[1], rows[2], nrows, dim, a->is_log);
        return;
    }
#ifdef FC__RW_X86
    if (a->stream && !a->is_log && fc__rw_stream_rows_ok(rows[2], dim)) {
        if (fc__rw_avx512())
            softmax_bwd_f32_stream512(rows[0], rows[1], rows[2], nrows, dim);
        else
            softmax_bwd_f32_stream256(rows[0], rows[1], rows[2], nrows, dim);
        return;
    }
    if (fc__rw_avx2()) {
        softmax_bwd_f32_avx2(rows[0], rows[1], rows[2], nrows, dim, a->is_log);
        return;
    }
#endif
    softmax_bwd_f32_base(rows[0], rows[1], rows[2], nrows, dim, a->is_log);
}

fc_tensor *fc__softmax_backward(fc_ctx *ctx, fc_tensor *y, fc_tensor *g, int axis, bool is_log) {
    const char *op = is_log ? "log_softmax_backward" : "softmax_backward";
    fc_tensor *dx = fc__tensor_new(ctx, op, g->raw.dtype, g->raw.shape, g->raw.rank);
    if (!dx) return NULL;
    sm_arg arg = {fc__rw_float_ct(g->raw.dtype), is_log, false};
    fc__rows_job job = {.nin = 2,
                        .nout = 1,
                        .ops = {&y->raw, &g->raw, &dx->raw},
                        .ct = arg.ct,
                        .fn = softmax_bwd_rows,
                        .arg = &arg};
    fc__shape_axis_geometry(g->raw.shape, g->raw.rank, axis, &job.outer, &job.dim, &job.inner);
    arg.stream = job.inner == 1 && fc__rw_stream_output(&dx->raw);
    if (fc__rows_run(ctx, op, &job) != FC_OK) return NULL;
    return dx;
}
