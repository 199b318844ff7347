/* SPDX-License-Identifier: MIT */
/* ops/rope.c - fc_rope: rotary position embedding as a differentiable op.
 * The kernel is exec/kernels/rope.c; this file resolves the options,
 * validates, records, and holds the rule.
 *
 *   x [..., T, H, D] -> y [..., T, H, D], same dtype
 *   rule: the rotation is orthogonal, so dx = R(-a) g: the same kernel run
 *   on g with the angles negated. It saves nothing.
 *
 * create_graph: the rule is linear in g and reads no saved value, so the
 * rotation and its inverse form a recorded pair: rope_run records the
 * kernel's node with its direction, and its rule is rope_run in the other
 * direction, recorded in turn when the walk records (grad mode on). A
 * plain walk runs the same call unrecorded. */
#include <math.h>

#include "ag/tape.h"
#include "exec/kernels/rope.h"
#include "fucina.h"

/* The node's parameters. */
enum {
    ROPE_I_NEOX = 0,
    ROPE_I_NDIMS = 1,
    ROPE_I_OFFSET = 2,
    ROPE_I_INVERSE = 3,
};
enum {
    ROPE_F_BASE = 0,
    ROPE_F_SCALE = 1,
};

static fc_tensor *rope_run(fc_ctx *ctx, const char *op, fc_tensor *x, const fc__rope_params *p);

static fc_status rope_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc__rope_params p = {.neox = node->i[ROPE_I_NEOX] != 0,
                         .n_dims = node->i[ROPE_I_NDIMS],
                         .pos_offset = node->i[ROPE_I_OFFSET],
                         .freq_base = node->f[ROPE_F_BASE],
                         .freq_scale = node->f[ROPE_F_SCALE],
                         .inverse = node->i[ROPE_I_INVERSE] == 0};
    gin[0] = rope_run(ctx, "rope_backward", gout, &p);
    return gin[0] ? FC_OK : fc__failed(ctx);
}

/* The kernel on x, recorded (with the direction p->inverse) when x wants a
 * gradient: fc_rope's forward and, in the other direction, its rule. */
static fc_tensor *rope_run(fc_ctx *ctx, const char *op, fc_tensor *x, const fc__rope_params *p) {
    fc_tensor *y = fc__rope(ctx, op, x, p);
    if (!y) return NULL;
    if (fc__ag_wants(ctx, 1, &x)) {
        fc_node *nd = fc__ag_record(ctx, op, rope_backward, y, 1, &x);
        if (!nd) {
            fc_release(y);
            return NULL;
        }
        nd->i[ROPE_I_NEOX] = p->neox;
        nd->i[ROPE_I_NDIMS] = p->n_dims;
        nd->i[ROPE_I_OFFSET] = p->pos_offset;
        nd->i[ROPE_I_INVERSE] = p->inverse;
        nd->f[ROPE_F_BASE] = p->freq_base;
        nd->f[ROPE_F_SCALE] = p->freq_scale;
    }
    return fc__finish(ctx, op, y);
}

/* Resolves opts (NULL = defaults) against x's head dim D into p;
 * FC_ERR_INVALID_ARG recorded for a value out of range. */
static fc_status rope_resolve(fc_ctx *ctx, const fc_rope_opts *opts, int64_t D,
                              fc__rope_params *p) {
    fc_rope_opts o = opts ? *opts : (fc_rope_opts){0};
    if ((int)o.mode < 0 || o.mode >= FC_ROPE_MODE_COUNT)
        return fc__fail(ctx, FC_ERR_INVALID_ARG,
                        "rope: mode %d is not FC_ROPE_NORM (0) or FC_ROPE_NEOX (1)", (int)o.mode);
    int64_t nd = o.n_dims == 0 ? D : o.n_dims;
    if (nd < 0 || nd % 2 != 0 || nd > D)
        return fc__fail(ctx, FC_ERR_INVALID_ARG,
                        "rope: n_dims %lld must be even, positive and at most the head dim %lld "
                        "(0 means all)",
                        (long long)o.n_dims, (long long)D);
    double base = o.freq_base == 0 ? 10000.0 : o.freq_base;
    double scale = o.freq_scale == 0 ? 1.0 : o.freq_scale;
    if (!(base > 0) || !isfinite(base))
        return fc__fail(ctx, FC_ERR_INVALID_ARG,
                        "rope: freq_base %g must be finite and > 0 (0 means 10000)", o.freq_base);
    if (!(scale > 0) || !isfinite(scale))
        return fc__fail(ctx, FC_ERR_INVALID_ARG,
                        "rope: freq_scale %g must be finite and > 0 (0 means 1)", o.freq_scale);
    if (o.pos_offset < 0)
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "rope: pos_offset %lld is negative",
                        (long long)o.pos_offset);
    *p = (fc__rope_params){.neox = o.mode == FC_ROPE_NEOX,
                           .n_dims = nd,
                           .freq_base = base,
                           .freq_scale = scale,
                           .pos_offset = o.pos_offset,
                           .inverse = false};
    return FC_OK;
}

fc_tensor *fc_rope(fc_ctx *ctx, fc_tensor *x, const fc_rope_opts *opts) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "rope", x);
    char d[160];
    if (!fc_dtype_is_float(x->raw.dtype)) {
        fc__fail(ctx, FC_ERR_DTYPE, "rope: dtype %s of %s is not a float dtype; cast with fc_to",
                 fc_dtype_name(x->raw.dtype), fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    if (x->raw.rank < 3) {
        fc__fail(ctx, FC_ERR_RANK, "rope: x %s has rank %d; it needs [..., T, H, D] (rank >= 3)",
                 fc__desc(x, d, (int)sizeof d), x->raw.rank);
        return NULL;
    }
    fc__rope_params p;
    if (rope_resolve(ctx, opts, x->raw.shape[x->raw.rank - 1], &p) != FC_OK) return NULL;
    return rope_run(ctx, "rope", x, &p);
}
