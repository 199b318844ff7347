/* SPDX-License-Identifier: MIT */
/* ops/interpolate.c - fc_interpolate: nearest and (bi)linear resampling of
 * [N, C, W] and [N, C, H, W] tensors (fucina/ops.h), matching PyTorch's
 * torch.nn.functional.interpolate. The loops are in
 * exec/kernels/interpolate.c; this file validates, derives the geometry,
 * records and holds the rule.
 *
 * Rule: the op is linear in x, y = A x with A fixed by the geometry, so
 * dx = A^T g: the kernel's transpose (a scatter-add of the weights). For
 * create_graph the adjoint is recorded as an op whose own rule is the
 * forward map again (and so on, to any order), pooling's pattern
 * (ops/pool.c). The geometry rides in node->ext. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ag/tape.h"
#include "exec/kernels/interpolate.h"
#include "fucina.h"

#define INTERP_SIZE_MAX INT32_MAX /* keeps every size product of the geometry in int64 */

/* What a node keeps: the geometry, the input's shape, and which of the
 * pair it computed. */
typedef struct interp_state {
    fc__interp_geom g;
    int64_t in_shape[FC_MAX_RANK];
    int in_rank;
    bool adjoint; /* this node computed A^T (the scatter) */
} interp_state;

static fc_tensor *interp_lin(fc_ctx *ctx, const char *op, const interp_state *s, fc_tensor *t,
                             bool adjoint);

static fc_status interp_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    const interp_state *s = node->ext;
    if (!fc__ag_create_graph(ctx)) {
        /* a plain walk: gout is constant, the kernel alone */
        gin[0] = s->adjoint ? fc__interp_forward(ctx, "interpolate_backward", &s->g, gout)
                            : fc__interp_backward(ctx, "interpolate_backward", &s->g, gout,
                                                  s->in_shape, s->in_rank);
    } else {
        gin[0] = interp_lin(ctx, "interpolate (create_graph)", s, gout, !s->adjoint);
    }
    return gin[0] ? FC_OK : fc__failed(ctx);
}

/* A x (adjoint false) or A^T t, recorded when t needs a gradient. */
static fc_tensor *interp_lin(fc_ctx *ctx, const char *op, const interp_state *s, fc_tensor *t,
                             bool adjoint) {
    if (adjoint && !fc__raw_is_contiguous(&t->raw)) t = fc_contiguous(ctx, t);
    if (!t) return NULL;
    fc_tensor *out = adjoint ? fc__interp_backward(ctx, op, &s->g, t, s->in_shape, s->in_rank)
                             : fc__interp_forward(ctx, op, &s->g, t);
    if (!out || !fc__ag_wants(ctx, 1, &t)) return out;
    fc_node *nd = fc__ag_record(ctx, op, interp_backward, out, 1, &t);
    interp_state *c = nd ? fc__ctx_alloc(ctx, sizeof *c) : NULL;
    if (!c) {
        if (nd) fc__fail(ctx, FC_ERR_OOM, "%s: out of memory", op);
        fc_release(out);
        return NULL;
    }
    *c = *s;
    c->adjoint = adjoint;
    nd->ext = c;
    nd->ext_size = sizeof *c;
    return out;
}

static const char *mode_name(fc_interp_mode m) {
    return m == FC_INTERP_NEAREST ? "nearest" : "linear";
}

/* The output size of one axis from opts entry a; FC_OK or the error. */
static fc_status axis_size(fc_ctx *ctx, fc_tensor *x, const fc_interpolate_opts *o, bool by_size,
                           int a, int64_t in, int64_t *out, double *scale) {
    const char *op = "interpolate";
    char d[160];
    if (by_size) {
        if (o->size[a] < 1 || o->size[a] > INTERP_SIZE_MAX)
            return fc__fail(ctx, FC_ERR_INVALID_ARG,
                            "interpolate: size[%d] = %lld must be in [1, 2^31 - 1] (input %s)", a,
                            (long long)o->size[a], fc__desc(x, d, (int)sizeof d));
        *out = o->size[a];
        *scale = 0;
        return FC_OK;
    }
    double sf = o->scale[a];
    if (!(sf > 0) || !isfinite(sf))
        return fc__fail(ctx, FC_ERR_INVALID_ARG,
                        "interpolate: scale[%d] = %g must be finite and > 0 (input %s)", a, sf,
                        fc__desc(x, d, (int)sizeof d));
    double v = floor((double)in * sf);
    if (v < 1)
        return fc__fail(ctx, FC_ERR_INVALID_SHAPE,
                        "%s: scale[%d] = %g gives an empty axis (floor(%lld * %g) = 0) for %s", op,
                        a, sf, (long long)in, sf, fc__desc(x, d, (int)sizeof d));
    if (v > INTERP_SIZE_MAX)
        return fc__fail(ctx, FC_ERR_OVERFLOW,
                        "%s: scale[%d] = %g makes axis %lld long (more than 2^31 - 1) for %s", op,
                        a, sf, (long long)in, fc__desc(x, d, (int)sizeof d));
    *out = (int64_t)v;
    *scale = sf;
    return FC_OK;
}

fc_tensor *fc_interpolate(fc_ctx *ctx, fc_tensor *x, const fc_interpolate_opts *opts) {
    const char *op = "interpolate";
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, op, x);
    FC__CHECK_PTR(ctx, op, opts);
    char d[160];
    int rank = x->raw.rank;
    if (rank != 3 && rank != 4) {
        fc__fail(ctx, FC_ERR_RANK,
                 "interpolate: input %s has rank %d; need [N, C, W] or [N, C, H, W]",
                 fc__desc(x, d, (int)sizeof d), rank);
        return NULL;
    }
    fc_dtype dt = x->raw.dtype;
    if (!fc_dtype_is_float(dt) || fc_dtype_is_block(dt)) {
        fc__fail(ctx, FC_ERR_DTYPE, "interpolate: dtype %s of %s is not a float dtype",
                 fc_dtype_name(dt), fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    if ((int)opts->mode < 0 || opts->mode >= FC_INTERP_MODE_COUNT) {
        fc__fail(ctx, FC_ERR_INVALID_ARG, "interpolate: mode %d is not an fc_interp_mode",
                 (int)opts->mode);
        return NULL;
    }
    if (opts->align_corners && opts->mode == FC_INTERP_NEAREST) {
        fc__fail(ctx, FC_ERR_INVALID_ARG,
                 "interpolate: align_corners is for mode linear only, not %s",
                 mode_name(opts->mode));
        return NULL;
    }
    int sp = rank - 2;
    bool any_size = opts->size[0] || opts->size[1], any_scale = opts->scale[0] || opts->scale[1];
    if (any_size == any_scale) {
        fc__fail(ctx, FC_ERR_INVALID_ARG,
                 "interpolate: give exactly one of size and scale (size [%lld,%lld], scale "
                 "[%g,%g])",
                 (long long)opts->size[0], (long long)opts->size[1], opts->scale[0],
                 opts->scale[1]);
        return NULL;
    }
    if (sp == 1 && (opts->size[1] || opts->scale[1])) {
        fc__fail(ctx, FC_ERR_INVALID_ARG,
                 "interpolate: input %s has one spatial axis; size[1] %lld and scale[1] %g "
                 "must be 0",
                 fc__desc(x, d, (int)sizeof d), (long long)opts->size[1], opts->scale[1]);
        return NULL;
    }
    interp_state s = {.in_rank = rank};
    memcpy(s.in_shape, x->raw.shape, sizeof(int64_t) * (size_t)rank);
    fc__interp_geom *g = &s.g;
    g->spatial = sp;
    g->linear = opts->mode == FC_INTERP_LINEAR;
    g->align_corners = opts->align_corners;
    g->planes = x->raw.shape[0] * x->raw.shape[1];
    g->iw = x->raw.shape[rank - 1];
    g->ih = sp == 2 ? x->raw.shape[rank - 2] : 1;
    g->oh = 1;
    if (sp == 2 && axis_size(ctx, x, opts, any_size, 0, g->ih, &g->oh, &g->scale_h) != FC_OK)
        return NULL;
    if (axis_size(ctx, x, opts, any_size, sp - 1, g->iw, &g->ow, &g->scale_w) != FC_OK) return NULL;
    int64_t n;
    if (!fc__i64_mul(g->oh, g->ow, &n) || !fc__i64_mul(n, g->planes, &n) || n > FC__MAX_ELEMS) {
        fc__fail(ctx, FC_ERR_OVERFLOW,
                 "interpolate: output [%lld planes, %lld, %lld] of %s is too large",
                 (long long)g->planes, (long long)g->oh, (long long)g->ow,
                 fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    fc_tensor *y = interp_lin(ctx, op, &s, x, false);
    return y ? fc__finish(ctx, op, y) : NULL;
}
