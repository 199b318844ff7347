/* grad_reduce.c - backward rules of the reductions (src/exec/kernels/
 * reduce_ops.c, same order) and of cumsum (scan.c).
 *
 * The output gradient g has the reduction's output shape; seen with stride
 * 0 along the reduced axes (fc__red_expand) it broadcasts back over the
 * input without a copy. The rules that need more than g combine per-output
 * values (computed in f64 by the reduction engine) with the input through
 * one elementwise pass:
 *   sum   dx = g                         mean  dx = g / n
 *   prod  no zero in the set: dx = g * prod / x; exactly one zero: the zero
 *         gets g * (product of the others), the rest 0; two or more: 0
 *   max/min  g goes to the first extremal element (row-major over the
 *         reduced axes; the first NaN when there is one), 0 elsewhere
 *   var   dx = g * 2 (x - mean) / (n - correction); std divides by 2 std
 *   logsumexp  dx = g * exp(x - out)
 *   cumsum     dx = reverse cumsum of g */
#include <math.h>

#include "exec/iter.h"
#include "ag/tape.h"
#include "exec/kernels/reduce.h"
#include "exec/kernels/rowwise.h"

fc_status fc__grad_sum(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_mean(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_prod(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_extremum(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_var(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_logsumexp(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_cumsum(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

static void node_mask(const fc_node *node, bool *mask) {
    for (int i = 0; i < node->in[0].rank; i++)
        mask[i] = (node->i[0] >> i) & 1;
}

/* The saved input as f32 or f64 (16-bit floats widened). */
static fc_tensor *saved_float(fc_ctx *ctx, fc_node *node, int k) {
    fc_tensor *t = fc__ag_saved_tensor(ctx, node, k);
    if (!t || t->raw.dtype == FC_F32 || t->raw.dtype == FC_F64) return t;
    return fc_to(ctx, t, FC_F32);
}

/* A per-output f64 reduction of x (engine op) with the output's element
 * order; scope-owned. */
static fc_tensor *per_output(fc_ctx *ctx, const fc_node *node, fc_tensor *x, fc__red_op op,
                             double scale) {
    bool mask[FC_MAX_RANK];
    node_mask(node, mask);
    fc_tensor *t = fc__tensor_new(ctx, node->op, FC_F64, node->out_shape, node->out_rank);
    if (!t) return NULL;
    fc__red_params prm = {.scale = scale};
    if (fc__red_run(ctx, node->op, op, &x->raw, mask, &prm, &t->raw) != FC_OK) return NULL;
    return t;
}

static inline double ld(fc_dtype dt, const char *p) {
    return dt == FC_F32 ? (double)*(const float *)p : *(const double *)p;
}
static inline void st(fc_dtype dt, char *p, double v) {
    if (dt == FC_F32)
        *(float *)p = (float)v;
    else
        *(double *)p = v;
}

/* ---- dx = f(x, a, b) with a, b broadcast per output ---------------------------------------- */

typedef enum bc_mode { BC_AFFINE, BC_EXP, BC_PROD } bc_mode;
typedef struct bc_arg {
    bc_mode mode;
    fc_dtype dt[4]; /* dx, x, a, b */
} bc_arg;

static void bc_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const bc_arg *ba = arg;
    const fc_dtype *dt = ba->dt;
    switch (ba->mode) {
    case BC_AFFINE: /* a * (x - b) */
        for (int64_t i = 0; i < n; i++) {
            double x = ld(dt[1], p[1] + i * s[1]), a = ld(dt[2], p[2] + i * s[2]);
            st(dt[0], p[0] + i * s[0], a * (x - ld(dt[3], p[3] + i * s[3])));
        }
        break;
    case BC_EXP: /* a * exp(x - b) */
        for (int64_t i = 0; i < n; i++) {
            double x = ld(dt[1], p[1] + i * s[1]), a = ld(dt[2], p[2] + i * s[2]);
            st(dt[0], p[0] + i * s[0], a * exp(x - ld(dt[3], p[3] + i * s[3])));
        }
        break;
    case BC_PROD: /* a = g * product of the nonzeros, b = number of zeros */
        for (int64_t i = 0; i < n; i++) {
            double x = ld(dt[1], p[1] + i * s[1]), a = ld(dt[2], p[2] + i * s[2]);
            double z = ld(dt[3], p[3] + i * s[3]);
            st(dt[0], p[0] + i * s[0], z == 0 ? a / x : (z == 1 && x == 0 ? a : 0.0));
        }
        break;
    }
}

/* dx (new, gradient dtype, x's shape) from x and the per-output a, b. */
static fc_tensor *broadcast_combine(fc_ctx *ctx, fc_node *node, bc_mode mode, fc_tensor *x,
                                    fc_tensor *a, fc_tensor *b) {
    bool mask[FC_MAX_RANK];
    node_mask(node, mask);
    const int64_t *shape = node->in[0].shape;
    int rank = node->in[0].rank;
    fc_tensor *av = fc__red_expand(ctx, node->op, a, shape, rank, mask);
    fc_tensor *bv = fc__red_expand(ctx, node->op, b, shape, rank, mask);
    fc_tensor *dx = fc__tensor_new(ctx, node->op, fc__grad_dtype(node->in[0].dtype), shape, rank);
    if (!av || !bv || !dx) return NULL;
    fc_raw *ops[4] = {&dx->raw, &x->raw, &av->raw, &bv->raw};
    bc_arg arg = {mode, {dx->raw.dtype, x->raw.dtype, a->raw.dtype, b->raw.dtype}};
    fc__iter it;
    fc__iter_init(&it, shape, rank, 4, ops);
    fc__iter_run(ctx, &it, bc_inner, &arg);
    return dx;
}

/* ---- rules ----------------------------------------------------------------------------------- */

fc_status fc__grad_sum(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (fc__numel(&gout->raw) == 1) { /* broadcasts to the input: the engine repeats it */
        gin[0] = gout;
        return FC_OK;
    }
    bool mask[FC_MAX_RANK];
    node_mask(node, mask);
    gin[0] = fc__red_expand(ctx, node->op, gout, node->in[0].shape, node->in[0].rank, mask);
    return gin[0] ? FC_OK : fc__failed(ctx);
}

fc_status fc__grad_mean(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *q = fc__tensor_new(ctx, node->op, gout->raw.dtype, gout->raw.shape, gout->raw.rank);
    if (!q) return fc__failed(ctx);
    double scale = 1.0 / (double)node->i[1];
    int64_t n = fc__raw_numel(&q->raw);
    const char *g = fc__raw_base(&gout->raw);
    char *d = fc__raw_base(&q->raw);
    size_t es = fc_dtype_size(q->raw.dtype);
    for (int64_t i = 0; i < n; i++)
        st(q->raw.dtype, d + (size_t)i * es, ld(gout->raw.dtype, g + (size_t)i * es) * scale);
    bool mask[FC_MAX_RANK];
    node_mask(node, mask);
    gin[0] = fc__red_expand(ctx, node->op, q, node->in[0].shape, node->in[0].rank, mask);
    return gin[0] ? FC_OK : fc__failed(ctx);
}

/* q[o] = g[o] * v[o] (v is f64, overwritten in place). */
static void scale_by_g(fc_tensor *v, const fc_tensor *g) {
    int64_t n = fc__raw_numel(&v->raw);
    double *pv = (double *)fc__raw_base(&v->raw);
    const char *pg = fc__raw_base(&g->raw);
    size_t es = fc_dtype_size(g->raw.dtype);
    for (int64_t i = 0; i < n; i++)
        pv[i] *= ld(g->raw.dtype, pg + (size_t)i * es);
}

fc_status fc__grad_prod(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *x = saved_float(ctx, node, 0);
    if (!x) return fc__failed(ctx);
    fc_tensor *a = per_output(ctx, node, x, FC__RED_NZPROD, 0);
    fc_tensor *z = per_output(ctx, node, x, FC__RED_NZCOUNT, 0);
    if (!a || !z) return fc__failed(ctx);
    scale_by_g(a, gout);
    gin[0] = broadcast_combine(ctx, node, BC_PROD, x, a, z);
    return gin[0] ? FC_OK : fc__failed(ctx);
}

fc_status fc__grad_extremum(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *x = fc__ag_saved_tensor(ctx, node, 0);
    if (!x) return fc__failed(ctx);
    bool mask[FC_MAX_RANK];
    node_mask(node, mask);
    bool is_max = node->i[3] == FC__RED_MAX;
    fc_tensor *idx = fc__tensor_new(ctx, node->op, FC_I64, node->out_shape, node->out_rank);
    if (!idx) return fc__failed(ctx);
    if (fc__red_run(ctx, node->op, is_max ? FC__RED_ARGMAX : FC__RED_ARGMIN, &x->raw, mask, NULL,
                    &idx->raw) != FC_OK)
        return fc__failed(ctx);
    const int64_t *shape = node->in[0].shape;
    int rank = node->in[0].rank;
    fc_tensor *dx = fc_zeros(ctx, gout->raw.dtype, shape, rank);
    if (!dx) return fc__failed(ctx);
    /* kept and reduced axes of dx (contiguous), each in row-major order */
    int64_t ksh[FC_MAX_RANK], kst[FC_MAX_RANK], rsh[FC_MAX_RANK], rst[FC_MAX_RANK], acc = 1;
    int nk = 0, nr = 0;
    for (int i = rank - 1; i >= 0; i--) {
        int64_t *sh = mask[i] ? rsh : ksh, *sr = mask[i] ? rst : kst;
        int *c = mask[i] ? &nr : &nk;
        memmove(sh + 1, sh, sizeof *sh * (size_t)*c);
        memmove(sr + 1, sr, sizeof *sr * (size_t)*c);
        sh[0] = shape[i];
        sr[0] = acc;
        (*c)++;
        acc *= shape[i];
    }
    int64_t nout = fc__raw_numel(&idx->raw);
    const int64_t *ip = (const int64_t *)fc__raw_base(&idx->raw);
    const char *gp = fc__raw_base(&gout->raw);
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
    gin[0] = dx;
    return FC_OK;
}

fc_status fc__grad_var(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *x = saved_float(ctx, node, 0);
    if (!x) return fc__failed(ctx);
    double n = (double)node->i[1], den = n - node->f[0];
    den = den > 0 ? den : 0.0;
    fc_tensor *mean = per_output(ctx, node, x, FC__RED_SUM, 1.0 / n);
    fc_tensor *q = fc__tensor_new(ctx, node->op, FC_F64, node->out_shape, node->out_rank);
    if (!mean || !q) return fc__failed(ctx);
    double *pq = (double *)fc__raw_base(&q->raw);
    int64_t nout = fc__raw_numel(&q->raw);
    if (node->i[2]) { /* std: d std = d var / (2 std) */
        fc_tensor *sd = fc__ag_saved_tensor(ctx, node, 1);
        if (!sd) return fc__failed(ctx);
        const char *ps = fc__raw_base(&sd->raw);
        size_t es = fc_dtype_size(sd->raw.dtype);
        for (int64_t o = 0; o < nout; o++)
            pq[o] = 1.0 / (den * ld(sd->raw.dtype, ps + o * es));
    } else {
        for (int64_t o = 0; o < nout; o++)
            pq[o] = 2.0 / den;
    }
    scale_by_g(q, gout);
    gin[0] = broadcast_combine(ctx, node, BC_AFFINE, x, q, mean);
    return gin[0] ? FC_OK : fc__failed(ctx);
}

fc_status fc__grad_logsumexp(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *x = saved_float(ctx, node, 0);
    fc_tensor *out = fc__ag_saved_tensor(ctx, node, 1);
    if (!x || !out) return fc__failed(ctx);
    gin[0] = broadcast_combine(ctx, node, BC_EXP, x, gout, out);
    return gin[0] ? FC_OK : fc__failed(ctx);
}

fc_status fc__grad_cumsum(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    gin[0] = fc__cumsum(ctx, node->op, gout, (int)node->i[0], true);
    return gin[0] ? FC_OK : fc__failed(ctx);
}
