/* SPDX-License-Identifier: MIT */
/* ops/pool.c - max_pool2d, avg_pool2d and adaptive_avg_pool2d as
 * differentiable ops (fucina/pool.h). The forward and backward loops are in
 * exec/kernels/pool.c; this file validates, derives the geometry, records
 * and holds the rules.
 *
 * Rules, from the output gradient g (contiguous, [.., OH, OW]):
 *   max       dx[argmax(o)] += g[o]: the forward's argmax rides in node->aux;
 *   avg       dx[window(o)] += g[o] / divisor(o): the window parameters ride
 *             in the i-slots;
 *   adaptive  the same over the adaptive windows, which the input and
 *             output shapes alone determine. */
#include <stdint.h>

#include "ag/tape.h"
#include "exec/kernels/pool.h"
#include "fucina.h"

/* Node layouts. Every pooling node has the one input x and saves nothing:
 * max keeps its argmax (i64, the output's shape) in node->aux; avg keeps
 * its window in the i-slots below; adaptive needs only the shapes. */
enum {
    POOL_IN_X = 0,
    POOL_N_IN = 1,
};
enum {
    AVG_I_KH = 0, /* i[]: kernel, stride, padding per axis (H then W) */
    AVG_I_KW = 1,
    AVG_I_SH = 2,
    AVG_I_SW = 3,
    AVG_I_PH = 4,
    AVG_I_PW = 5,
    AVG_I_INCLUDE_PAD = 6, /* i[]: count_include_pad */
    AVG_I_DIVISOR = 7,     /* i[]: divisor_override, 0 for none */
};

#define POOL_PARAM_MAX INT32_MAX /* keeps every size product of the geometry in int64 */

/* ---- geometry ------------------------------------------------------------------------------ */

/* The plane count and input sizes of x ([N, C, H, W] or [C, H, W]), from a
 * shape; the caller checked the rank. */
static void geom_sizes(fc__pool_geom *g, const int64_t *shape, int rank) {
    g->planes = 1;
    for (int i = 0; i < rank - 2; i++)
        g->planes *= shape[i];
    g->ih = shape[rank - 2];
    g->iw = shape[rank - 1];
}

static fc_status check_input(fc_ctx *ctx, const char *op, fc_tensor *x) {
    char d[160];
    if (x->raw.rank != 3 && x->raw.rank != 4)
        return fc__fail(ctx, FC_ERR_RANK,
                        "%s: input %s must be [N,C,H,W] or [C,H,W] (rank 4 or 3), not rank %d", op,
                        fc__desc(x, d, (int)sizeof d), x->raw.rank);
    if (!fc_dtype_is_float(x->raw.dtype))
        return fc__fail(ctx, FC_ERR_DTYPE,
                        "%s: dtype %s of %s is not a float dtype; cast with fc_to", op,
                        fc_dtype_name(x->raw.dtype), fc__desc(x, d, (int)sizeof d));
    return FC_OK;
}

/* PyTorch's pooling_output_shape: floor or ceil division, and with
 * ceil_mode no window may start in the right padding. */
static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t q = num >= 0 ? num / s : -((-num + s - 1) / s); /* floor division */
    int64_t o = q + 1;
    if (ceil_mode && (o - 1) * s >= in + p) o--;
    return o;
}

/* The geometry of a max or avg pooling of x under opts, with defaults
 * applied and every rule of fucina/pool.h checked. */
static fc_status window_geom(fc_ctx *ctx, const char *op, fc__pool_kind kind, fc_tensor *x,
                             const fc_pool2d_opts *o, fc__pool_geom *g) {
    char d[160];
    *g = (fc__pool_geom){.kind = kind};
    geom_sizes(g, x->raw.shape, x->raw.rank);
    int64_t k[2], s[2], p[2], dl[2], in[2] = {g->ih, g->iw}, out[2];
    for (int a = 0; a < 2; a++) {
        k[a] = o->kernel[a];
        s[a] = o->stride[a] == 0 ? k[a] : o->stride[a];
        p[a] = o->padding[a];
        dl[a] = o->dilation[a] == 0 ? 1 : o->dilation[a];
        if (k[a] < 1 || s[a] < 1 || dl[a] < 1 || p[a] < 0 || k[a] > POOL_PARAM_MAX ||
            s[a] > POOL_PARAM_MAX || dl[a] > POOL_PARAM_MAX)
            return fc__fail(ctx, FC_ERR_INVALID_ARG,
                            "%s: kernel [%lld,%lld], stride [%lld,%lld] and dilation [%lld,%lld] "
                            "must be in [1, 2^31 - 1] and padding [%lld,%lld] >= 0",
                            op, (long long)o->kernel[0], (long long)o->kernel[1],
                            (long long)o->stride[0], (long long)o->stride[1],
                            (long long)o->dilation[0], (long long)o->dilation[1],
                            (long long)o->padding[0], (long long)o->padding[1]);
        if (p[a] > k[a] / 2)
            return fc__fail(ctx, FC_ERR_INVALID_ARG,
                            "%s: padding [%lld,%lld] must be at most half the kernel [%lld,%lld]",
                            op, (long long)o->padding[0], (long long)o->padding[1],
                            (long long)o->kernel[0], (long long)o->kernel[1]);
        if (kind == FC__POOL_AVG && dl[a] != 1)
            return fc__fail(ctx, FC_ERR_INVALID_ARG,
                            "%s: average pooling has no dilation; got [%lld,%lld] (use 0 or 1)", op,
                            (long long)o->dilation[0], (long long)o->dilation[1]);
        out[a] = out_size(in[a], k[a], s[a], p[a], dl[a], o->ceil_mode);
    }
    if (kind == FC__POOL_AVG && o->divisor_override < 0)
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: divisor_override %lld must be >= 0 (0: none)",
                        op, (long long)o->divisor_override);
    if (out[0] < 1 || out[1] < 1)
        return fc__fail(ctx, FC_ERR_INVALID_SHAPE,
                        "%s: input %s with kernel [%lld,%lld], stride [%lld,%lld], padding "
                        "[%lld,%lld], dilation [%lld,%lld] gives output size [%lld,%lld]; the "
                        "output is too small (the kernel is larger than the padded input)",
                        op, fc__desc(x, d, (int)sizeof d), (long long)k[0], (long long)k[1],
                        (long long)s[0], (long long)s[1], (long long)p[0], (long long)p[1],
                        (long long)dl[0], (long long)dl[1], (long long)out[0], (long long)out[1]);
    g->kh = k[0], g->kw = k[1], g->sh = s[0], g->sw = s[1];
    g->ph = p[0], g->pw = p[1], g->dh = dl[0], g->dw = dl[1];
    g->oh = out[0], g->ow = out[1];
    g->count_include_pad = !o->exclude_pad;
    g->divisor = o->divisor_override;
    return FC_OK;
}

/* The output of a forward whose kernel already ran, finished: the node
 * recorded when x requires grad. For max, idx is the argmax (stolen: the
 * node keeps it, or it is released). */
static fc_tensor *finish(fc_ctx *ctx, const char *op, fc__backward_fn rule, fc_tensor *x,
                         fc_tensor *y, fc_tensor *idx, const fc__pool_geom *g) {
    if (!y) return NULL;
    if (!fc__ag_wants(ctx, POOL_N_IN, &x)) {
        fc_release(idx);
        return fc__finish(ctx, op, y);
    }
    fc_node *nd = fc__ag_record(ctx, op, rule, y, POOL_N_IN, &x);
    if (!nd) {
        fc_release(idx);
        fc_release(y);
        return NULL;
    }
    if (idx) nd->aux = fc_keep(idx);
    if (g->kind == FC__POOL_AVG) {
        nd->i[AVG_I_KH] = g->kh, nd->i[AVG_I_KW] = g->kw;
        nd->i[AVG_I_SH] = g->sh, nd->i[AVG_I_SW] = g->sw;
        nd->i[AVG_I_PH] = g->ph, nd->i[AVG_I_PW] = g->pw;
        nd->i[AVG_I_INCLUDE_PAD] = g->count_include_pad;
        nd->i[AVG_I_DIVISOR] = g->divisor;
    }
    return fc__finish(ctx, op, y);
}

/* The geometry a rule sees: sizes from the recorded input shape and the
 * output gradient. */
static fc__pool_geom rule_geom(fc__pool_kind kind, const fc_node *node, const fc_tensor *gout) {
    fc__pool_geom g = {.kind = kind, .dh = 1, .dw = 1};
    geom_sizes(&g, node->in[POOL_IN_X].shape, node->in[POOL_IN_X].rank);
    g.oh = gout->raw.shape[gout->raw.rank - 2];
    g.ow = gout->raw.shape[gout->raw.rank - 1];
    return g;
}

static fc_status rule_finish(fc_ctx *ctx, fc_tensor **gin, fc_tensor *dx) {
    gin[POOL_IN_X] = dx;
    return dx ? FC_OK : fc__failed(ctx);
}

/* ---- create_graph ---------------------------------------------------------------------------
 * Average pooling is linear in x: its rule is the adjoint map, recorded as
 * an op whose own rule is the pooling again (and so on, to any order).
 * Max pooling's rule is a recorded scatter of g onto the (constant) argmax,
 * whose rule is a gather. */
typedef struct pool_lin_state {
    fc__pool_geom g;
    int64_t in_shape[FC_MAX_RANK];
    int in_rank;
    bool adjoint; /* this node computed the adjoint (the spreading backward) */
} pool_lin_state;

static fc_tensor *pool_lin(fc_ctx *ctx, const pool_lin_state *s, fc_tensor *t, bool adjoint);

static fc_status pool_lin_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    const pool_lin_state *s = node->ext;
    gin[0] = pool_lin(ctx, s, gout, !s->adjoint);
    return gin[0] ? FC_OK : fc__failed(ctx);
}

static fc_tensor *pool_lin(fc_ctx *ctx, const pool_lin_state *s, fc_tensor *t, bool adjoint) {
    const char *op = "avg_pool2d (create_graph)";
    if (adjoint && t && !fc__raw_is_contiguous(&t->raw)) t = fc_contiguous(ctx, t);
    if (!t) return NULL;
    fc_tensor *out = adjoint ? fc__pool2d_backward(ctx, op, &s->g, t, NULL, s->in_shape, s->in_rank)
                             : fc__pool2d_forward(ctx, op, &s->g, t, NULL);
    if (!out || !fc__ag_wants(ctx, 1, &t)) return out;
    fc_node *nd = fc__ag_record(ctx, op, pool_lin_backward, out, 1, &t);
    pool_lin_state *c = nd ? fc__ctx_alloc(ctx, sizeof *c) : NULL;
    if (!c) {
        if (nd) fc__fail(ctx, FC_ERR_OOM, "%s: out of memory", op);
        return NULL;
    }
    *c = *s;
    c->adjoint = adjoint;
    nd->ext = c;
    nd->ext_size = sizeof *c;
    return out;
}

static fc_status avg_graph(fc_ctx *ctx, const fc_node *node, const fc__pool_geom *g,
                           fc_tensor *gout, fc_tensor **gin) {
    pool_lin_state s = {.g = *g, .in_rank = node->in[POOL_IN_X].rank};
    for (int i = 0; i < s.in_rank; i++)
        s.in_shape[i] = node->in[POOL_IN_X].shape[i];
    gin[POOL_IN_X] = pool_lin(ctx, &s, gout, true);
    return gin[POOL_IN_X] ? FC_OK : fc__failed(ctx);
}

static fc_status max_graph(fc_ctx *ctx, const fc_node *node, const fc__pool_geom *g,
                           fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *idx = node->aux, *go = gout;
    int64_t n = fc__numel(&idx->raw);
    const int64_t *ip = (const int64_t *)fc__raw_base(&idx->raw);
    bool empty = false; /* a window over padding only (-1): it passes nothing */
    for (int64_t i = 0; i < n; i++) empty |= ip[i] < 0;
    if (empty) { /* such outputs scatter a zero onto element 0 */
        fc_tensor *c = fc_clone(ctx, idx);
        fc_tensor *keep = c ? fc_empty(ctx, gout->raw.dtype, gout->raw.shape, gout->raw.rank) : NULL;
        if (!keep) return fc__failed(ctx);
        int64_t *cp = (int64_t *)fc__raw_base(&c->raw);
        for (int64_t i = 0; i < n; i++) {
            fc__store_f64(keep->raw.dtype, (char *)fc__raw_base(&keep->raw) +
                                               (size_t)i * fc_dtype_size(keep->raw.dtype),
                          cp[i] < 0 ? 0.0 : 1.0);
            if (cp[i] < 0) cp[i] = 0;
        }
        idx = c;
        go = fc_mul(ctx, gout, keep);
    }
    int64_t ps[2] = {g->planes, g->ih * g->iw}, os[2] = {g->planes, g->oh * g->ow};
    fc_tensor *ix = fc_reshape(ctx, idx, os, 2);
    fc_tensor *dx = fc_scatter_add(ctx, fc_zeros(ctx, gout->raw.dtype, ps, 2), 1, ix,
                                   fc_reshape(ctx, go, os, 2));
    gin[POOL_IN_X] = fc_reshape(ctx, dx, node->in[POOL_IN_X].shape, node->in[POOL_IN_X].rank);
    return fc_ctx_status(ctx);
}

/* ---- max_pool2d ----------------------------------------------------------------------------- */

static fc_status max_pool2d_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc__pool_geom g = rule_geom(FC__POOL_MAX, node, gout);
    if (fc__ag_create_graph(ctx)) return max_graph(ctx, node, &g, gout, gin);
    const fc__ag_input *in = &node->in[POOL_IN_X];
    return rule_finish(
        ctx, gin,
        fc__pool2d_backward(ctx, "max_pool2d_backward", &g, gout, node->aux, in->shape, in->rank));
}

fc_tensor *fc_max_pool2d(fc_ctx *ctx, fc_tensor *x, const fc_pool2d_opts *opts) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "max_pool2d", x);
    FC__CHECK_PTR(ctx, "max_pool2d", opts);
    fc__pool_geom g;
    if (check_input(ctx, "max_pool2d", x) != FC_OK ||
        window_geom(ctx, "max_pool2d", FC__POOL_MAX, x, opts, &g) != FC_OK)
        return NULL;
    fc_tensor *idx = NULL;
    fc_tensor *y = fc__pool2d_forward(ctx, "max_pool2d", &g, x, &idx);
    return finish(ctx, "max_pool2d", max_pool2d_backward, x, y, idx, &g);
}

/* ---- avg_pool2d ----------------------------------------------------------------------------- */

static fc_status avg_pool2d_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc__pool_geom g = rule_geom(FC__POOL_AVG, node, gout);
    g.kh = node->i[AVG_I_KH], g.kw = node->i[AVG_I_KW];
    g.sh = node->i[AVG_I_SH], g.sw = node->i[AVG_I_SW];
    g.ph = node->i[AVG_I_PH], g.pw = node->i[AVG_I_PW];
    g.count_include_pad = node->i[AVG_I_INCLUDE_PAD] != 0;
    g.divisor = node->i[AVG_I_DIVISOR];
    if (fc__ag_create_graph(ctx)) return avg_graph(ctx, node, &g, gout, gin);
    const fc__ag_input *in = &node->in[POOL_IN_X];
    return rule_finish(
        ctx, gin,
        fc__pool2d_backward(ctx, "avg_pool2d_backward", &g, gout, NULL, in->shape, in->rank));
}

fc_tensor *fc_avg_pool2d(fc_ctx *ctx, fc_tensor *x, const fc_pool2d_opts *opts) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "avg_pool2d", x);
    FC__CHECK_PTR(ctx, "avg_pool2d", opts);
    fc__pool_geom g;
    if (check_input(ctx, "avg_pool2d", x) != FC_OK ||
        window_geom(ctx, "avg_pool2d", FC__POOL_AVG, x, opts, &g) != FC_OK)
        return NULL;
    fc_tensor *y = fc__pool2d_forward(ctx, "avg_pool2d", &g, x, NULL);
    return finish(ctx, "avg_pool2d", avg_pool2d_backward, x, y, NULL, &g);
}

/* ---- adaptive_avg_pool2d ------------------------------------------------------------------ */

static fc_status adaptive_avg_pool2d_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout,
                                              fc_tensor **gin) {
    fc__pool_geom g = rule_geom(FC__POOL_ADAPTIVE, node, gout);
    if (fc__ag_create_graph(ctx)) return avg_graph(ctx, node, &g, gout, gin);
    const fc__ag_input *in = &node->in[POOL_IN_X];
    return rule_finish(ctx, gin,
                       fc__pool2d_backward(ctx, "adaptive_avg_pool2d_backward", &g, gout, NULL,
                                           in->shape, in->rank));
}

fc_tensor *fc_adaptive_avg_pool2d(fc_ctx *ctx, fc_tensor *x, const int64_t output_size[2]) {
    const char *op = "adaptive_avg_pool2d";
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, op, x);
    FC__CHECK_PTR(ctx, op, output_size);
    if (check_input(ctx, op, x) != FC_OK) return NULL;
    for (int a = 0; a < 2; a++)
        if (output_size[a] < 1 || output_size[a] > POOL_PARAM_MAX) {
            fc__fail(ctx, FC_ERR_INVALID_ARG,
                     "%s: output size [%lld,%lld] must have entries in [1, 2^31 - 1]", op,
                     (long long)output_size[0], (long long)output_size[1]);
            return NULL;
        }
    fc__pool_geom g = {.kind = FC__POOL_ADAPTIVE, .oh = output_size[0], .ow = output_size[1]};
    geom_sizes(&g, x->raw.shape, x->raw.rank);
    /* the windows' bounds are i * in / out for i <= out: out * in must fit
     * (in is any view's size, up to 2^60, so it can be larger than 2^32) */
    int64_t span;
    if (!fc__i64_mul(g.oh, g.ih, &span) || !fc__i64_mul(g.ow, g.iw, &span)) {
        char d[160];
        fc__fail(ctx, FC_ERR_OVERFLOW,
                 "%s: output size [%lld,%lld] times the input size of %s overflows int64 (the "
                 "window bounds i * in / out)",
                 op, (long long)output_size[0], (long long)output_size[1],
                 fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    fc_tensor *y = fc__pool2d_forward(ctx, op, &g, x, NULL);
    return finish(ctx, op, adaptive_avg_pool2d_backward, x, y, NULL, &g);
}
