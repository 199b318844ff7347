/* SPDX-License-Identifier: MIT */
/* exec/kernels/conv_cols.c - the column matrix of the im2col + GEMM
 * convolution (conv.c) and the kernels that shape the team's buffers; see
 * conv_cols.h. Element sizes are f32 or f64, the two compute dtypes. */
#include <string.h>

#include "exec/kernels/conv_cols.h"

#include "exec/parallel.h"

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

/* Rows (row, b) of the column matrix, for items row * nb + b. */
void fc__im2col_range(void *arg, int64_t begin, int64_t end) {
    const fc__col_job *j = arg;
    const fc__conv_plan *p = j->p;
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

/* Adds the kh*kw column rows of channel c, image b into the (zeroed)
 * image plane, kernel offsets in order: the adjoint of fc__im2col_range. */
#define COL2IM_PLANE(T)                                                                            \
    static void col2im_plane_##T(const fc__conv_plan *p, const fc__col_job *j, int64_t b,          \
                                 int64_t c, T *plane) {                                            \
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
void fc__col2im_range(void *arg, int64_t begin, int64_t end) {
    const fc__col_job *j = arg;
    const fc__conv_plan *p = j->p;
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

/* ---- per-channel fills and the regrouping ------------------------------------------------------
 */

void fc__conv_fill_bias(const char *bias, char *dst, size_t es, int64_t c, int64_t rows,
                        int64_t len, bool add) {
    for (int64_t r = 0; r < rows; r++) {
        char *row = dst + (size_t)(r * len) * es;
        if (es == sizeof(float)) {
            float *d = (float *)row, v = ((const float *)bias)[r % c];
            for (int64_t i = 0; i < len; i++)
                d[i] = add ? d[i] + v : v;
        } else {
            double *d = (double *)row, v = ((const double *)bias)[r % c];
            for (int64_t i = 0; i < len; i++)
                d[i] = add ? d[i] + v : v;
        }
    }
}

void fc__conv_regroup(const char *src, char *dst, size_t es, int64_t c, int64_t nb, int64_t len) {
    size_t row = (size_t)len * es;
    for (int64_t b = 0; b < nb; b++) {
        for (int64_t ch = 0; ch < c; ch++)
            memcpy(dst + (size_t)(ch * nb + b) * row, src + (size_t)(b * c + ch) * row, row);
    }
}

/* ---- the wgrad partial sums ------------------------------------------------------------------
 */

typedef struct fc__conv_parts_job {
    const char *partials;
    char *out;
    size_t es;
    int64_t parts, elems;
} fc__conv_parts_job;

/* out[i] = partial 0 [i] + partial 1 [i] + ..., in part order. */
static void sum_parts_range(void *arg, int64_t begin, int64_t end) {
    const fc__conv_parts_job *j = arg;
    for (int64_t i = begin; i < end; i++) {
        if (j->es == sizeof(float)) {
            const float *v = (const float *)j->partials + i;
            float s = v[0];
            for (int64_t r = 1; r < j->parts; r++)
                s += v[r * j->elems];
            ((float *)j->out)[i] = s;
        } else {
            const double *v = (const double *)j->partials + i;
            double s = v[0];
            for (int64_t r = 1; r < j->parts; r++)
                s += v[r * j->elems];
            ((double *)j->out)[i] = s;
        }
    }
}

void fc__conv_sum_parts(fc_ctx *ctx, const fc__conv_plan *p, const char *partials, int64_t parts,
                        int64_t elems, char *out) {
    fc__conv_parts_job j = {partials, out, p->es, parts, elems};
    fc__parallel_for(ctx, elems, 4096, sum_parts_range, &j);
}
