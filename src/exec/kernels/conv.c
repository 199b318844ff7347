/* exec/kernels/conv.c - convolution as im2col + GEMM (Darknet's recipe):
 *
 *     forward   y_b   = W . col(x_b)                  per group
 *     dgrad     x_b   = col2im(W^T . gy_b)            per group
 *     wgrad     W    += gy . col(x)^T                 per group, over the batch
 *
 * col(x) holds, for every (channel, kernel row, kernel column) of the image
 * side, the image values each output position reads: K = cx*kh*kw rows of
 * P = hy*wy values. The batch is cut into chunks of nb images (nb from the
 * shapes alone, so the column buffer stays within COL_BUDGET bytes where it
 * can, and the result bits never depend on the thread count), laid out as
 *     col[row][b][p]        row < K, b < nb, p < P
 * so one buffer serves all three products:
 *   - forward and dgrad are batched GEMMs over the chunk's images (image b's
 *     columns are at offset b*P with leading dimension nb*P);
 *   - wgrad is ONE GEMM per chunk and group whose reduction runs over the
 *     chunk's nb*P positions: the output gradient is first regrouped
 *     [b][c][p] -> [c][b][p] so both operands step uniformly along it.
 * Chunks follow one another in index order and each wgrad GEMM accumulates
 * into the weight gradient, so the sum order is fixed.
 *
 * The GEMMs go through the context's matmul provider (fc__backend_resolve,
 * its primitive cache and threads: each product is large enough for the
 * provider to split); im2col, col2im and the regrouping split over the
 * thread team, each output element written by one slice. A 1x1 kernel with
 * stride 1 and no padding reads and writes the images directly (its column
 * matrix is the image itself) in forward and dgrad.
 *
 * Buffers (the column matrix, the regrouped gradient, contiguous f32 / f64
 * copies of the operands) are pool tensors released before returning, so a
 * repeated call allocates nothing once the pool holds their size classes. */
#include <string.h>

#include "exec/kernels/conv.h"

#include "backend/backend.h"
#include "exec/kernels/copy.h"
#include "exec/parallel.h"

/* Bytes of column matrix per chunk: small images batch up into long GEMMs
 * (a 28x28 image with 25 rows is 78 KB), while a large one runs alone so
 * its columns stay in the caches between im2col and the product (a 32x32
 * image with 576 rows is 2.25 MB; measured on a 2-core AVX-512 Xeon with
 * 2 MB of L2 per core, one image per chunk took 4% less CPU time than
 * three and 15% less than sixteen). */
#define COL_BUDGET ((int64_t)4 << 20)

/* ---- sizes ------------------------------------------------------------------------------------
 */

typedef struct conv_plan {
    const fc__conv_geom *g;
    fc_dtype dt;      /* compute dtype: f32 or f64 */
    size_t es;        /* its size */
    int64_t P;        /* output positions per image: hy * wy */
    int64_t X;        /* image elements per channel: hx * wx */
    int64_t K, Kg;    /* column rows: all channels, one group */
    int64_t cyg, cxg; /* channels per group */
    int64_t nb;       /* images per chunk */
    bool identity;    /* 1x1, stride 1, no padding: col(x) is x */
} conv_plan;

static bool plan_make(fc_ctx *ctx, const char *op, const fc__conv_geom *g, fc_dtype dt,
                      conv_plan *p) {
    *p = (conv_plan){.g = g, .dt = dt, .es = fc_dtype_size(dt)};
    int64_t kk, col_image;
    if (__builtin_mul_overflow(g->hy, g->wy, &p->P) ||
        __builtin_mul_overflow(g->hx, g->wx, &p->X) || __builtin_mul_overflow(g->kh, g->kw, &kk) ||
        __builtin_mul_overflow(g->cx, kk, &p->K) ||
        __builtin_mul_overflow(p->K, p->P, &col_image) ||
        __builtin_mul_overflow(col_image, (int64_t)p->es, &col_image)) {
        fc__fail(ctx, FC_ERR_OVERFLOW, "%s: the column matrix of one image does not fit", op);
        return false;
    }
    p->cxg = g->cx / g->groups;
    p->cyg = g->cy / g->groups;
    p->Kg = p->cxg * kk;
    p->nb = COL_BUDGET / col_image;
    if (p->nb < 1) p->nb = 1;
    if (p->nb > g->n) p->nb = g->n;
    p->identity = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 &&
                  g->pw == 0 && g->hx == g->hy && g->wx == g->wy;
    return true;
}

/* The dtype the products run in. */
static fc_dtype compute_dtype(const fc_tensor *a, const fc_tensor *b) {
    return a->raw.dtype == FC_F64 || b->raw.dtype == FC_F64 ? FC_F64 : FC_F32;
}

/* t contiguous in dt: t itself (retained) or a converted / compacted copy. */
static fc_tensor *operand(fc_ctx *ctx, const char *op, fc_tensor *t, fc_dtype dt) {
    if (t->raw.dtype == dt) return fc__copy_contiguous_ref(ctx, op, t);
    return fc__copy_cast(ctx, op, t, dt);
}

static fc_tensor *scratch(fc_ctx *ctx, const char *op, fc_dtype dt, int64_t n) {
    return fc__tensor_new(ctx, op, dt, &n, 1);
}

/* ---- im2col / col2im --------------------------------------------------------------------------
 */

/* The output columns [lo, hi) whose input column j*s - pad + off lies in
 * [0, w): the rest read zeros. */
static void valid_range(int64_t wy, int64_t s, int64_t start, int64_t w, int64_t *lo, int64_t *hi) {
    int64_t a = start >= 0 ? 0 : (-start + s - 1) / s;
    int64_t b = start > w - 1 ? 0 : (w - 1 - start) / s + 1;
    if (b > wy) b = wy;
    if (a > b) a = b;
    *lo = a, *hi = b;
}

typedef struct col_job {
    const conv_plan *p;
    const char *x; /* image side, contiguous [n, cx, hx, wx] */
    char *col;     /* [K][nb][P] */
    int64_t n0, nb;
} col_job;

/* Rows (row, b) of the column matrix, for items row * nb + b. */
static void im2col_range(void *arg, int64_t begin, int64_t end) {
    const col_job *j = arg;
    const conv_plan *p = j->p;
    const fc__conv_geom *g = p->g;
    size_t es = p->es;
    for (int64_t it = begin; it < end; it++) {
        int64_t row = it / j->nb, b = it % j->nb;
        int64_t c = row / (g->kh * g->kw), q = row % (g->kw), r = (row / g->kw) % g->kh;
        const char *plane = j->x + (size_t)(((j->n0 + b) * g->cx + c) * p->X) * es;
        char *dst = j->col + (size_t)((row * j->nb + b) * p->P) * es;
        int64_t start = q * g->dw - g->pw, lo, hi;
        valid_range(g->wy, g->sw, start, g->wx, &lo, &hi);
        for (int64_t oh = 0; oh < g->hy; oh++, dst += (size_t)g->wy * es) {
            int64_t ih = oh * g->sh - g->ph + r * g->dh;
            if (ih < 0 || ih >= g->hx || lo == hi) {
                memset(dst, 0, (size_t)g->wy * es);
                continue;
            }
            /* input column of output column ow: ow * sw + start (in range for [lo, hi)) */
            const char *src = plane + (size_t)(ih * g->wx) * es;
            memset(dst, 0, (size_t)lo * es);
            if (g->sw == 1) {
                memcpy(dst + (size_t)lo * es, src + (size_t)(lo + start) * es,
                       (size_t)(hi - lo) * es);
            } else if (es == sizeof(float)) {
                float *d = (float *)dst;
                const float *s = (const float *)src;
                for (int64_t ow = lo; ow < hi; ow++)
                    d[ow] = s[ow * g->sw + start];
            } else {
                double *d = (double *)dst;
                const double *s = (const double *)src;
                for (int64_t ow = lo; ow < hi; ow++)
                    d[ow] = s[ow * g->sw + start];
            }
            memset(dst + (size_t)hi * es, 0, (size_t)(g->wy - hi) * es);
        }
    }
}

static void im2col(fc_ctx *ctx, const conv_plan *p, const char *x, char *col, int64_t n0,
                   int64_t nb) {
    col_job j = {p, x, col, n0, nb};
    int64_t grain = 4096 / (p->P + 1) + 1; /* a few thousand elements per slice */
    fc__parallel_for(ctx, p->K * nb, grain, im2col_range, &j);
}

/* Adds the kh*kw column rows of channel c, image b into the (zeroed)
 * image plane, kernel offsets in order: the adjoint of im2col_range. */
#define COL2IM_PLANE(T)                                                                            \
    static void col2im_plane_##T(const conv_plan *p, const col_job *j, int64_t b, int64_t c,       \
                                 T *plane) {                                                       \
        const fc__conv_geom *g = p->g;                                                             \
        for (int64_t r = 0; r < g->kh; r++) {                                                      \
            for (int64_t q = 0; q < g->kw; q++) {                                                  \
                int64_t row = (c * g->kh + r) * g->kw + q;                                         \
                const T *src = (const T *)j->col + (row * j->nb + b) * p->P;                       \
                int64_t start = q * g->dw - g->pw, lo, hi;                                         \
                valid_range(g->wy, g->sw, start, g->wx, &lo, &hi);                                 \
                for (int64_t oh = 0; oh < g->hy; oh++, src += g->wy) {                             \
                    int64_t ih = oh * g->sh - g->ph + r * g->dh;                                   \
                    if (ih < 0 || ih >= g->hx) continue;                                           \
                    T *d = plane + ih * g->wx;                                                     \
                    for (int64_t ow = lo; ow < hi; ow++)                                           \
                        d[ow * g->sw + start] += src[ow];                                          \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
COL2IM_PLANE(float)
COL2IM_PLANE(double)

/* Planes (b, c) of the image side, for items b * cx + c; x is the output. */
static void col2im_range(void *arg, int64_t begin, int64_t end) {
    const col_job *j = arg;
    const conv_plan *p = j->p;
    for (int64_t it = begin; it < end; it++) {
        int64_t b = it / p->g->cx, c = it % p->g->cx;
        char *plane = (char *)j->x + (size_t)(((j->n0 + b) * p->g->cx + c) * p->X) * p->es;
        memset(plane, 0, (size_t)p->X * p->es);
        if (p->es == sizeof(float))
            col2im_plane_float(p, j, b, c, (float *)plane);
        else
            col2im_plane_double(p, j, b, c, (double *)plane);
    }
}

static void col2im(fc_ctx *ctx, const conv_plan *p, const char *col, char *x, int64_t n0,
                   int64_t nb) {
    col_job j = {p, x, (char *)col, n0, nb};
    int64_t grain = 4096 / (p->X * p->g->kh * p->g->kw + 1) + 1;
    fc__parallel_for(ctx, nb * p->g->cx, grain, col2im_range, &j);
}

/* ---- per-channel fills and the regrouping ------------------------------------------------------
 */

typedef struct rows_job {
    const char *src;
    char *dst;
    size_t es;
    int64_t c, nb, len; /* [nb][c][len] <-> [c][nb][len]; bias: len values per row */
    bool add;           /* bias job: dst[b][c][:] (+)= src[c] */
} rows_job;

/* Rows (b, ch) of a [nb][c][len] block, items b * c + ch: either bias[ch]
 * written (or added) over the row, or the row copied to [ch][b]. */
static void rows_range(void *arg, int64_t begin, int64_t end) {
    const rows_job *j = arg;
    for (int64_t it = begin; it < end; it++) {
        int64_t b = it / j->c, ch = it % j->c;
        if (j->nb < 0) { /* bias */
            char *row = j->dst + (size_t)(it * j->len) * j->es;
            if (j->es == sizeof(float)) {
                float *d = (float *)row, v = ((const float *)j->src)[ch];
                for (int64_t i = 0; i < j->len; i++)
                    d[i] = j->add ? d[i] + v : v;
            } else {
                double *d = (double *)row, v = ((const double *)j->src)[ch];
                for (int64_t i = 0; i < j->len; i++)
                    d[i] = j->add ? d[i] + v : v;
            }
        } else {
            memcpy(j->dst + (size_t)((ch * j->nb + b) * j->len) * j->es,
                   j->src + (size_t)(it * j->len) * j->es, (size_t)j->len * j->es);
        }
    }
}

/* Every row (b, ch) of t [nb][c][len] set to bias[ch] (add: plus it). */
static void fill_bias(fc_ctx *ctx, const conv_plan *p, char *t, const char *bias, int64_t nb,
                      int64_t c, int64_t len, bool add) {
    rows_job j = {bias, t, p->es, c, -1, len, add};
    fc__parallel_for(ctx, nb * c, 4096 / (len + 1) + 1, rows_range, &j);
}

/* dst [c][nb][len] = src [nb][c][len] regrouped. */
static void regroup(fc_ctx *ctx, const conv_plan *p, const char *src, char *dst, int64_t nb,
                    int64_t c, int64_t len) {
    rows_job j = {src, dst, p->es, c, nb, len, false};
    fc__parallel_for(ctx, nb * c, 4096 / (len + 1) + 1, rows_range, &j);
}

/* ---- the GEMM ----------------------------------------------------------------------------------
 */

/* The provider state of ctx, created on first use (matmul.c does the
 * same): NULL only when that allocation fails, and the providers then run
 * uncached, which is still correct. */
static fc__backend_cache *ctx_cache(fc_ctx *ctx) {
    if (!ctx->backend_cache) ctx->backend_cache = fc__backend_cache_new(&ctx->alloc);
    return ctx->backend_cache;
}

/* Runs g (dtype, sizes, operands and batch filled in) through the
 * context's provider; records the error and returns false on failure. */
static bool gemm(fc_ctx *ctx, const char *op, fc__gemm g) {
    const fc__matmul_provider *prov = NULL;
    char err[FC__ERR_CAP - 64];
    fc_status rc =
        fc__backend_resolve(ctx->backend, g.dtype, g.m, g.n, g.k, &prov, err, sizeof err);
    if (rc == FC_OK) {
        g.threads = ctx->threads > 0 ? ctx->threads : 1;
        g.alloc = &ctx->alloc;
        g.cache = ctx_cache(ctx);
        rc = fc__gemm_run(prov, &g, err, sizeof err);
    }
    if (rc != FC_OK) fc__fail(ctx, rc, "%s: %s", op, err);
    return rc == FC_OK;
}

/* ---- the three products ------------------------------------------------------------------------
 */

static fc_tensor *new4(fc_ctx *ctx, const char *op, fc_dtype dt, int64_t a, int64_t b, int64_t c,
                       int64_t d) {
    return fc__tensor_new(ctx, op, dt, (const int64_t[]){a, b, c, d}, 4);
}

fc_tensor *fc__conv_forward(fc_ctx *ctx, const char *op, const fc__conv_geom *g, fc_tensor *x,
                            fc_tensor *w, fc_tensor *bias) {
    conv_plan p;
    fc_dtype dt = compute_dtype(x, w);
    if (!plan_make(ctx, op, g, dt, &p)) return NULL;
    fc_tensor *xc = operand(ctx, op, x, dt), *wc = xc ? operand(ctx, op, w, dt) : NULL;
    fc_tensor *bc = wc && bias ? operand(ctx, op, bias, dt) : NULL;
    fc_tensor *col = NULL, *y = NULL;
    if (!wc || (bias && !bc)) goto done;
    if (!p.identity && !(col = scratch(ctx, op, dt, p.K * p.nb * p.P))) goto done;
    if (!(y = new4(ctx, op, dt, g->n, g->cy, g->hy, g->wy))) goto done;
    const char *xd = fc__raw_base(&xc->raw), *wd = fc__raw_base(&wc->raw);
    char *yd = fc__raw_base(&y->raw), *cd = col ? fc__raw_base(&col->raw) : NULL;
    size_t es = p.es;
    for (int64_t n0 = 0; n0 < g->n; n0 += p.nb) {
        int64_t nb = g->n - n0 < p.nb ? g->n - n0 : p.nb;
        char *yc = yd + (size_t)(n0 * g->cy * p.P) * es;
        if (!p.identity) im2col(ctx, &p, xd, cd, n0, nb);
        if (bc) fill_bias(ctx, &p, yc, fc__raw_base(&bc->raw), nb, g->cy, p.P, false);
        for (int64_t gr = 0; gr < g->groups; gr++) {
            fc__gemm gm = {
                .dtype = dt,
                .m = p.cyg,
                .n = p.P,
                .k = p.Kg,
                .a = wd + (size_t)(gr * p.cyg * p.Kg) * es,
                .lda = p.Kg,
                .c = yc + (size_t)(gr * p.cyg * p.P) * es,
                .ldc = p.P,
                .accumulate = bc != NULL,
                .batch = nb,
                .stride_c = g->cy * p.P,
            };
            if (p.identity) {
                gm.b = xd + (size_t)((n0 * g->cx + gr * p.cxg) * p.P) * es;
                gm.ldb = p.P, gm.stride_b = g->cx * p.P;
            } else {
                gm.b = cd + (size_t)(gr * p.Kg * nb * p.P) * es;
                gm.ldb = nb * p.P, gm.stride_b = p.P;
            }
            if (nb == 1) gm.stride_b = gm.stride_c = 0;
            if (!gemm(ctx, op, gm)) goto fail;
        }
    }
    goto done;
fail:
    fc_release(y);
    y = NULL;
done:
    fc_release(col);
    fc_release(bc);
    fc_release(wc);
    fc_release(xc);
    return y;
}

fc_tensor *fc__conv_dgrad(fc_ctx *ctx, const char *op, const fc__conv_geom *g, fc_tensor *gy,
                          fc_tensor *w, fc_tensor *bias) {
    conv_plan p;
    fc_dtype dt = compute_dtype(gy, w);
    if (!plan_make(ctx, op, g, dt, &p)) return NULL;
    fc_tensor *gc = operand(ctx, op, gy, dt), *wc = gc ? operand(ctx, op, w, dt) : NULL;
    fc_tensor *bc = wc && bias ? operand(ctx, op, bias, dt) : NULL;
    fc_tensor *col = NULL, *gx = NULL;
    if (!wc || (bias && !bc)) goto done;
    if (!p.identity && !(col = scratch(ctx, op, dt, p.K * p.nb * p.P))) goto done;
    if (!(gx = new4(ctx, op, dt, g->n, g->cx, g->hx, g->wx))) goto done;
    const char *gd = fc__raw_base(&gc->raw), *wd = fc__raw_base(&wc->raw);
    char *xd = fc__raw_base(&gx->raw), *cd = col ? fc__raw_base(&col->raw) : NULL;
    size_t es = p.es;
    for (int64_t n0 = 0; n0 < g->n; n0 += p.nb) {
        int64_t nb = g->n - n0 < p.nb ? g->n - n0 : p.nb;
        for (int64_t gr = 0; gr < g->groups; gr++) {
            /* col_g (Kg x P) = W_g^T (Kg x cyg) . gy_b,g (cyg x P) */
            fc__gemm gm = {
                .dtype = dt,
                .m = p.Kg,
                .n = p.P,
                .k = p.cyg,
                .a = wd + (size_t)(gr * p.cyg * p.Kg) * es,
                .lda = p.Kg,
                .trans_a = true,
                .b = gd + (size_t)((n0 * g->cy + gr * p.cyg) * p.P) * es,
                .ldb = p.P,
                .batch = nb,
                .stride_b = g->cy * p.P,
            };
            if (p.identity) {
                gm.c = xd + (size_t)((n0 * g->cx + gr * p.cxg) * p.P) * es;
                gm.ldc = p.P, gm.stride_c = g->cx * p.P;
            } else {
                gm.c = cd + (size_t)(gr * p.Kg * nb * p.P) * es;
                gm.ldc = nb * p.P, gm.stride_c = p.P;
            }
            if (nb == 1) gm.stride_b = gm.stride_c = 0;
            if (!gemm(ctx, op, gm)) goto fail;
        }
        if (!p.identity) col2im(ctx, &p, cd, xd, n0, nb);
        if (bc)
            fill_bias(ctx, &p, xd + (size_t)(n0 * g->cx * p.X) * es, fc__raw_base(&bc->raw), nb,
                      g->cx, p.X, true);
    }
    goto done;
fail:
    fc_release(gx);
    gx = NULL;
done:
    fc_release(col);
    fc_release(bc);
    fc_release(wc);
    fc_release(gc);
    return gx;
}

fc_tensor *fc__conv_wgrad(fc_ctx *ctx, const char *op, const fc__conv_geom *g, fc_tensor *x,
                          fc_tensor *gy) {
    conv_plan p;
    fc_dtype dt = compute_dtype(x, gy);
    if (!plan_make(ctx, op, g, dt, &p)) return NULL;
    fc_tensor *xc = operand(ctx, op, x, dt), *gc = xc ? operand(ctx, op, gy, dt) : NULL;
    fc_tensor *col = NULL, *gt = NULL, *gw = NULL;
    if (!gc) goto done;
    if (!(col = scratch(ctx, op, dt, p.K * p.nb * p.P))) goto done;
    if (p.nb > 1 && !(gt = scratch(ctx, op, dt, g->cy * p.nb * p.P))) goto done;
    if (!(gw = new4(ctx, op, dt, g->cy, p.cxg, g->kh, g->kw))) goto done;
    const char *xd = fc__raw_base(&xc->raw), *gd = fc__raw_base(&gc->raw);
    char *cd = fc__raw_base(&col->raw), *td = gt ? fc__raw_base(&gt->raw) : NULL;
    char *wd = fc__raw_base(&gw->raw);
    size_t es = p.es;
    for (int64_t n0 = 0; n0 < g->n; n0 += p.nb) {
        int64_t nb = g->n - n0 < p.nb ? g->n - n0 : p.nb;
        const char *gyc = gd + (size_t)(n0 * g->cy * p.P) * es;
        im2col(ctx, &p, xd, cd, n0, nb);
        if (nb > 1) regroup(ctx, &p, gyc, td, nb, g->cy, p.P);
        const char *a = nb > 1 ? td : gyc; /* [cy][nb*P] */
        for (int64_t gr = 0; gr < g->groups; gr++) {
            /* gW_g (cyg x Kg) += gy_g (cyg x nb*P) . col_g^T (nb*P x Kg) */
            fc__gemm gm = {
                .dtype = dt,
                .m = p.cyg,
                .n = p.Kg,
                .k = nb * p.P,
                .a = a + (size_t)(gr * p.cyg * nb * p.P) * es,
                .lda = nb * p.P,
                .b = cd + (size_t)(gr * p.Kg * nb * p.P) * es,
                .ldb = nb * p.P,
                .trans_b = true,
                .c = wd + (size_t)(gr * p.cyg * p.Kg) * es,
                .ldc = p.Kg,
                .accumulate = n0 > 0,
                .batch = 1,
            };
            if (!gemm(ctx, op, gm)) goto fail;
        }
    }
    goto done;
fail:
    fc_release(gw);
    gw = NULL;
done:
    fc_release(gt);
    fc_release(col);
    fc_release(gc);
    fc_release(xc);
    return gw;
}

/* ---- the bias gradient -------------------------------------------------------------------------
 */

typedef struct sum_job {
    const char *t;
    char *out;
    fc_dtype dt;
    int64_t n, c, plane;
} sum_job;

static void channel_sum_range(void *arg, int64_t begin, int64_t end) {
    const sum_job *j = arg;
    for (int64_t ch = begin; ch < end; ch++) {
        double s = 0;
        for (int64_t b = 0; b < j->n; b++) {
            int64_t off = (b * j->c + ch) * j->plane;
            if (j->dt == FC_F32) {
                const float *v = (const float *)j->t + off;
                for (int64_t i = 0; i < j->plane; i++)
                    s += v[i];
            } else {
                const double *v = (const double *)j->t + off;
                for (int64_t i = 0; i < j->plane; i++)
                    s += v[i];
            }
        }
        if (j->dt == FC_F32)
            ((float *)j->out)[ch] = (float)s;
        else
            ((double *)j->out)[ch] = s;
    }
}

fc_tensor *fc__conv_channel_sum(fc_ctx *ctx, const char *op, fc_tensor *t, int64_t n, int64_t c,
                                int64_t plane) {
    fc_dtype dt = t->raw.dtype == FC_F64 ? FC_F64 : FC_F32;
    fc_tensor *tc = operand(ctx, op, t, dt);
    fc_tensor *out = tc ? scratch(ctx, op, dt, c) : NULL;
    if (out) {
        sum_job j = {fc__raw_base(&tc->raw), fc__raw_base(&out->raw), dt, n, c, plane};
        fc__parallel_for(ctx, c, 1 + 65536 / (n * plane + 1), channel_sum_range, &j);
    }
    fc_release(tc);
    return out;
}
