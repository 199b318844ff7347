/* SPDX-License-Identifier: MIT */
/* reduce_backward.c - the computing half of the reductions' backward rules
 * (the rules themselves are in src/ops/reduce.c). Nothing here records.
 *
 * The output gradient g has the reduction's output shape; seen with stride
 * 0 along the reduced axes (fc__red_expand) it broadcasts back over the
 * input without a copy. The rules that need more than g combine
 * per-output values (computed in f64 by the reduction engine) with the
 * input through one elementwise pass (fc__red_combine), all in double and
 * rounded once into the gradient dtype. max / min scatter g to the
 * extremal element of each output (fc__red_scatter). */
#include <math.h>
#include <string.h>

#include "exec/iter.h"
#include "exec/kernels/reduce.h"

static inline double ld(fc_dtype dt, const char *p) {
    return dt == FC_F32 ? (double)*(const float *)p : *(const double *)p;
}
static inline void st(fc_dtype dt, char *p, double v) {
    if (dt == FC_F32)
        *(float *)p = (float)v;
    else
        *(double *)p = v;
}

fc_tensor *fc__red_expand(fc_ctx *ctx, const char *op, fc_tensor *g, const int64_t *xshape,
                          int xrank, const bool *mask) {
    /* zeroed: gcc cannot see that the loop covers the rank */
    int64_t strides[FC_MAX_RANK] = {0}, acc = 1;
    for (int i = xrank - 1; i >= 0; i--) {
        if (mask[i] || xshape[i] == 1) {
            strides[i] = 0;
        } else {
            strides[i] = acc;
            acc *= xshape[i];
        }
    }
    return fc__tensor_view(ctx, op, g, xshape, strides, xrank, g->raw.offset);
}

fc_tensor *fc__red_scaled(fc_ctx *ctx, const char *op, const fc_tensor *g, double scale) {
    fc_tensor *q = fc__tensor_new(ctx, op, g->raw.dtype, g->raw.shape, g->raw.rank);
    if (!q) return NULL;
    int64_t n = fc__raw_numel(&q->raw);
    const char *pg = fc__raw_base(&g->raw);
    char *d = fc__raw_base(&q->raw);
    size_t es = fc_dtype_size(q->raw.dtype);
    for (int64_t i = 0; i < n; i++)
        st(q->raw.dtype, d + (size_t)i * es, ld(g->raw.dtype, pg + (size_t)i * es) * scale);
    return q;
}

void fc__red_mul_into(fc_tensor *v, const fc_tensor *g) {
    int64_t n = fc__raw_numel(&v->raw);
    double *pv = (double *)fc__raw_base(&v->raw);
    const char *pg = fc__raw_base(&g->raw);
    size_t es = fc_dtype_size(g->raw.dtype);
    for (int64_t i = 0; i < n; i++)
        pv[i] *= ld(g->raw.dtype, pg + (size_t)i * es);
}

fc_tensor *fc__red_var_factor(fc_ctx *ctx, const char *op, const fc_tensor *sd, double den,
                              const int64_t *oshape, int orank) {
    fc_tensor *q = fc__tensor_new(ctx, op, FC_F64, oshape, orank);
    if (!q) return NULL;
    double *pq = (double *)fc__raw_base(&q->raw);
    int64_t nout = fc__raw_numel(&q->raw);
    if (sd) { /* std: d std = d var / (2 std) */
        const char *ps = fc__raw_base(&sd->raw);
        size_t es = fc_dtype_size(sd->raw.dtype);
        for (int64_t o = 0; o < nout; o++)
            pq[o] = 1.0 / (den * ld(sd->raw.dtype, ps + o * es));
    } else {
        for (int64_t o = 0; o < nout; o++)
            pq[o] = 2.0 / den;
    }
    return q;
}

/* ---- dx = f(x, a, b) with a, b broadcast per output ---------------------------------------- */

typedef struct bc_arg {
    fc__red_combine_mode mode;
    fc_dtype dt[4]; /* dx, x, a, b */
} bc_arg;

static void bc_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const bc_arg *ba = arg;
    const fc_dtype *dt = ba->dt;
    switch (ba->mode) {
    case FC__RED_AFFINE: /* a * (x - b) */
        for (int64_t i = 0; i < n; i++) {
            double x = ld(dt[1], p[1] + i * s[1]), a = ld(dt[2], p[2] + i * s[2]);
            st(dt[0], p[0] + i * s[0], a * (x - ld(dt[3], p[3] + i * s[3])));
        }
        break;
    case FC__RED_EXP: /* a * exp(x - b) */
        for (int64_t i = 0; i < n; i++) {
            double x = ld(dt[1], p[1] + i * s[1]), a = ld(dt[2], p[2] + i * s[2]);
            st(dt[0], p[0] + i * s[0], a * exp(x - ld(dt[3], p[3] + i * s[3])));
        }
        break;
    case FC__RED_ZEROS: /* a = g * product of the nonzeros, b = number of zeros */
        for (int64_t i = 0; i < n; i++) {
            double x = ld(dt[1], p[1] + i * s[1]), a = ld(dt[2], p[2] + i * s[2]);
            double z = ld(dt[3], p[3] + i * s[3]);
            st(dt[0], p[0] + i * s[0], z == 0 ? a / x : (z == 1 && x == 0 ? a : 0.0));
        }
        break;
    default:
        break;
    }
}

fc_tensor *fc__red_combine(fc_ctx *ctx, const char *op, fc__red_combine_mode mode, fc_tensor *x,
                           fc_tensor *a, fc_tensor *b, const int64_t *xshape, int xrank,
                           const bool *mask, fc_dtype dxdt) {
    fc_tensor *av = fc__red_expand(ctx, op, a, xshape, xrank, mask);
    fc_tensor *bv = fc__red_expand(ctx, op, b, xshape, xrank, mask);
    fc_tensor *dx = fc__tensor_new(ctx, op, dxdt, xshape, xrank);
    if (!av || !bv || !dx) {
        fc_release(av);
        fc_release(bv);
        fc_release(dx);
        return NULL;
    }
    fc_raw *ops[4] = {&dx->raw, &x->raw, &av->raw, &bv->raw};
    bc_arg arg = {mode, {dx->raw.dtype, x->raw.dtype, a->raw.dtype, b->raw.dtype}};
    fc__iter it;
    fc__iter_init(&it, xshape, xrank, 4, ops);
    fc__iter_run(ctx, &it, bc_inner, &arg);
    fc_release(av);
    fc_release(bv);
    return dx;
}

/* ---- max / min: g to the extremal element ------------------------------------------------ */

fc_tensor *fc__red_scatter(fc_ctx *ctx, const char *op, const fc_tensor *idx, const fc_tensor *g,
                           const int64_t *xshape, int xrank, const bool *mask) {
    fc_tensor *dx = fc_zeros(ctx, g->raw.dtype, xshape, xrank);
    if (!dx) return NULL;
    /* kept and reduced axes of dx (contiguous), each in row-major order */
    int64_t ksh[FC_MAX_RANK], kst[FC_MAX_RANK], rsh[FC_MAX_RANK], rst[FC_MAX_RANK], acc = 1;
    int nk = 0, nr = 0;
    for (int i = xrank - 1; i >= 0; i--) {
        int64_t *sh = mask[i] ? rsh : ksh, *sr = mask[i] ? rst : kst;
        int *c = mask[i] ? &nr : &nk;
        memmove(sh + 1, sh, sizeof *sh * (size_t)*c);
        memmove(sr + 1, sr, sizeof *sr * (size_t)*c);
        sh[0] = xshape[i];
        sr[0] = acc;
        (*c)++;
        acc *= xshape[i];
    }
    int64_t nout = fc__raw_numel(&idx->raw);
    const int64_t *ip = (const int64_t *)fc__raw_base(&idx->raw);
    const char *gp = fc__raw_base(&g->raw);
    char *dp = fc__raw_base(&dx->raw);
    size_t es = fc_dtype_size(dx->raw.dtype);
    for (int64_t o = 0; o < nout; o++) {
        int64_t off = 0, q = o, r = ip[o];
        for (int d = nk - 1; d >= 0; d--) {
            off += (q % ksh[d]) * kst[d];
            q /= ksh[d];
        }
        for (int d = nr - 1; d >= 0; d--) {
            off += (r % rsh[d]) * rst[d];
            r /= rsh[d];
        }
        memcpy(dp + (size_t)off * es, gp + (size_t)o * es, es);
    }
    return dx;
}
