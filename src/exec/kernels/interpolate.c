/* SPDX-License-Identifier: MIT */
/* interpolate.c - nearest and (bi)linear resampling, forward and its
 * transpose (the op and its rule are in src/ops/interpolate.c).
 *
 * Shapes: x [P, H, W] (P planes: every leading index), y [P, OH, OW]; a
 * 1-d resample is H = OH = 1.
 *
 * The map is separable: output (i, j) reads up to two rows along H and two
 * columns along W with weights wh * ww. Each axis gets a table per output
 * index of its two taps and their weights, PyTorch's rules
 * (aten/src/ATen/native/UpSample.h):
 *   linear   scale s = align_corners ? (in - 1) / (out - 1) (0 for out 1)
 *            : the caller's 1 / scale_factor, else in / out; the source
 *            coordinate is s * i (align_corners) or s * (i + 0.5) - 0.5
 *            clamped at 0; taps floor(src) and the next one (the same one
 *            at the last index), weights 1 - frac and frac;
 *   nearest  one tap, min(floor(i * s), in - 1) with s in float (as
 *            PyTorch's nearest_idx, whose rounding it must reproduce) and
 *            the shortcuts out == in (i) and out == 2 in (i / 2).
 * The backward adds g * wh * ww into the same taps of a zeroed dx plane,
 * which the thread owning the plane writes alone. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "exec/kernels/copy.h"
#include "exec/kernels/interpolate.h"
#include "exec/parallel.h"

#define INTERP_GRAIN_WORK 65536 /* tap reads per team slice, at least */

/* Per output index along one axis: two taps and their weights. */
typedef struct axis_tab {
    int64_t *i0, *i1;
    double *w0, *w1;
} axis_tab;

static void axis_fill(const fc__interp_geom *g, int64_t in, int64_t out, double scale, axis_tab t) {
    for (int64_t i = 0; i < out; i++) {
        if (!g->linear) {
            int64_t k;
            if (out == in)
                k = i;
            else if (out == 2 * in)
                k = i >> 1;
            else {
                float s = scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;
                k = (int64_t)floorf((float)i * s);
                if (k > in - 1) k = in - 1;
            }
            t.i0[i] = t.i1[i] = k;
            t.w0[i] = 1, t.w1[i] = 0;
            continue;
        }
        double s, src;
        if (g->align_corners) {
            s = out > 1 ? (double)(in - 1) / (double)(out - 1) : 0;
            src = s * (double)i;
        } else {
            s = scale > 0 ? 1.0 / scale : (double)in / (double)out;
            src = s * ((double)i + 0.5) - 0.5;
            if (src < 0) src = 0;
        }
        int64_t k = (int64_t)src;
        if (k > in - 1) k = in - 1;
        double f = src - (double)k;
        if (f > 1) f = 1;
        t.i0[i] = k;
        t.i1[i] = k < in - 1 ? k + 1 : k;
        t.w0[i] = 1 - f, t.w1[i] = f;
    }
}

typedef struct interp_job {
    const fc__interp_geom *g;
    axis_tab h, w;
    int th, tw;      /* taps per axis: 1 (nearest, or the H of a 1-d resample) or 2 */
    const void *src; /* forward: x [P, ih, iw]; backward: gout [P, oh, ow] */
    void *dst;       /* forward: y [P, oh, ow]; backward: dx [P, ih, iw] */
} interp_job;

#define INTERP_INLINE static inline __attribute__((always_inline))

INTERP_INLINE double ld(fc_dtype ct, const void *p, int64_t i) {
    return ct == FC_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

INTERP_INLINE void fwd_body(const interp_job *j, fc_dtype ct, int64_t begin, int64_t end) {
    const fc__interp_geom *g = j->g;
    for (int64_t p = begin; p < end; p++) {
        int64_t xo = p * g->ih * g->iw, yo = p * g->oh * g->ow;
        for (int64_t oi = 0; oi < g->oh; oi++) {
            int64_t hr[2] = {j->h.i0[oi] * g->iw, j->h.i1[oi] * g->iw};
            double hw[2] = {j->h.w0[oi], j->h.w1[oi]};
            for (int64_t oj = 0; oj < g->ow; oj++) {
                int64_t wc[2] = {j->w.i0[oj], j->w.i1[oj]};
                double ww[2] = {j->w.w0[oj], j->w.w1[oj]};
                double acc = 0;
                /* nearest reads its one tap only: a 0-weight NaN or inf
                 * neighbour must not reach the output (linear reads both
                 * taps, 0 weight or not, as PyTorch does) */
                for (int a = 0; a < j->th; a++)
                    for (int b = 0; b < j->tw; b++)
                        acc += hw[a] * ww[b] * ld(ct, j->src, xo + hr[a] + wc[b]);
                if (ct == FC_F32)
                    ((float *)j->dst)[yo + oi * g->ow + oj] = (float)acc;
                else
                    ((double *)j->dst)[yo + oi * g->ow + oj] = acc;
            }
        }
    }
}

INTERP_INLINE void back_body(const interp_job *j, fc_dtype ct, int64_t begin, int64_t end) {
    const fc__interp_geom *g = j->g;
    size_t esz = ct == FC_F32 ? sizeof(float) : sizeof(double);
    for (int64_t p = begin; p < end; p++) {
        int64_t xo = p * g->ih * g->iw, yo = p * g->oh * g->ow;
        memset((char *)j->dst + (size_t)xo * esz, 0, (size_t)(g->ih * g->iw) * esz);
        for (int64_t oi = 0; oi < g->oh; oi++) {
            int64_t hr[2] = {j->h.i0[oi] * g->iw, j->h.i1[oi] * g->iw};
            double hw[2] = {j->h.w0[oi], j->h.w1[oi]};
            for (int64_t oj = 0; oj < g->ow; oj++) {
                int64_t wc[2] = {j->w.i0[oj], j->w.i1[oj]};
                double ww[2] = {j->w.w0[oj], j->w.w1[oj]};
                double gv = ld(ct, j->src, yo + oi * g->ow + oj);
                for (int a = 0; a < j->th; a++)
                    for (int b = 0; b < j->tw; b++) {
                        int64_t k = xo + hr[a] + wc[b];
                        double v = hw[a] * ww[b] * gv;
                        if (ct == FC_F32)
                            ((float *)j->dst)[k] += (float)v;
                        else
                            ((double *)j->dst)[k] += v;
                    }
            }
        }
    }
}

static void fwd_f32(void *arg, int64_t begin, int64_t end) { fwd_body(arg, FC_F32, begin, end); }
static void fwd_f64(void *arg, int64_t begin, int64_t end) { fwd_body(arg, FC_F64, begin, end); }
static void back_f32(void *arg, int64_t begin, int64_t end) { back_body(arg, FC_F32, begin, end); }
static void back_f64(void *arg, int64_t begin, int64_t end) { back_body(arg, FC_F64, begin, end); }

static fc_status tables(fc_ctx *ctx, const char *op, const fc__interp_geom *g, interp_job *j,
                        fc_buffer **buf) {
    size_t n = (size_t)(g->oh + g->ow);
    *buf = fc__ctx_buffer(ctx, n * (2 * sizeof(int64_t) + 2 * sizeof(double)));
    if (!*buf) return fc__fail(ctx, FC_ERR_OOM, "%s: out of memory for the tap tables", op);
    int64_t *ip = (*buf)->data;
    double *dp = (double *)(ip + 2 * n);
    j->h = (axis_tab){ip, ip + g->oh, dp, dp + g->oh};
    j->w =
        (axis_tab){ip + 2 * g->oh, ip + 2 * g->oh + g->ow, dp + 2 * g->oh, dp + 2 * g->oh + g->ow};
    axis_fill(g, g->ih, g->oh, g->scale_h, j->h);
    axis_fill(g, g->iw, g->ow, g->scale_w, j->w);
    j->tw = g->linear ? 2 : 1;
    j->th = g->linear && g->spatial == 2 ? 2 : 1;
    return FC_OK;
}

/* Planes per team slice: enough tap reads to pay for a thread. */
static int64_t plane_grain(const fc__interp_geom *g) {
    int64_t work = g->oh * g->ow * (g->linear ? 4 : 1) + g->ih * g->iw;
    return work >= INTERP_GRAIN_WORK ? 1 : INTERP_GRAIN_WORK / work;
}

fc_tensor *fc__interp_forward(fc_ctx *ctx, const char *op, const fc__interp_geom *g, fc_tensor *x) {
    fc_dtype dt = x->raw.dtype, ct = dt == FC_F64 ? FC_F64 : FC_F32;
    int rank = x->raw.rank;
    int64_t shape[FC_MAX_RANK];
    memcpy(shape, x->raw.shape, sizeof(int64_t) * (size_t)rank);
    if (g->spatial == 2) shape[rank - 2] = g->oh;
    shape[rank - 1] = g->ow;
    fc_tensor *xc = fc__copy_contiguous_ref(ctx, op, x);
    fc_tensor *xt = xc ? fc__copy_cast(ctx, op, xc, ct) : NULL;
    fc_release(xc);
    fc_tensor *y = xt ? fc__tensor_new(ctx, op, ct, shape, rank) : NULL;
    fc_buffer *buf = NULL;
    interp_job j = {.g = g};
    fc_status st = !y ? fc__failed(ctx) : tables(ctx, op, g, &j, &buf);
    if (st == FC_OK) {
        j.src = fc__raw_base(&xt->raw);
        j.dst = fc__raw_base(&y->raw);
        fc__parallel_for(ctx, g->planes, plane_grain(g), ct == FC_F32 ? fwd_f32 : fwd_f64, &j);
    }
    fc__buffer_release(buf);
    fc_release(xt);
    if (st == FC_OK && dt != ct) { /* f16 / bf16: the result back in the input's dtype */
        fc_tensor *yd = fc__copy_cast(ctx, op, y, dt);
        fc_release(y);
        y = yd;
        st = y ? FC_OK : fc__failed(ctx);
    }
    if (st != FC_OK) {
        fc_release(y);
        return NULL;
    }
    return y;
}

fc_tensor *fc__interp_backward(fc_ctx *ctx, const char *op, const fc__interp_geom *g,
                               fc_tensor *gout, const int64_t *in_shape, int in_rank) {
    fc_dtype ct = gout->raw.dtype;
    fc_tensor *dx = fc__tensor_new(ctx, op, ct, in_shape, in_rank);
    fc_buffer *buf = NULL;
    interp_job j = {.g = g};
    fc_status st = !dx ? fc__failed(ctx) : tables(ctx, op, g, &j, &buf);
    if (st == FC_OK) {
        j.src = fc__raw_base(&gout->raw);
        j.dst = fc__raw_base(&dx->raw);
        fc__parallel_for(ctx, g->planes, plane_grain(g), ct == FC_F32 ? back_f32 : back_f64, &j);
    }
    fc__buffer_release(buf);
    if (st != FC_OK) {
        fc_release(dx);
        return NULL;
    }
    return dx;
}
