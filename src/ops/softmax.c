/* SPDX-License-Identifier: MIT */
/* ops/softmax.c - softmax and log_softmax along any axis as differentiable
 * ops. The row kernels (forward and the fused backward) are in
 * exec/kernels/softmax.c; this file validates, records, and holds the rules.
 *
 * Rules, from the saved output y and the output gradient g, the sums along
 * the softmax axis:
 *   softmax      dx = y * (g - sum(g * y))
 *   log_softmax  dx = g - exp(y) * sum(g) */
#include "exec/kernels/softmax.h"
#include "ag/tape.h"
#include "fucina.h"

/* The node's saved layout (softmax and log_softmax alike). */
enum {
    SOFTMAX_SAVED_OUTPUT = 0, /* saved[]: the forward's output y */
};
enum {
    SOFTMAX_I_AXIS = 0, /* i[]: the axis, normalized to [0, rank) */
};

static fc_status softmax_rule(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin,
                              bool is_log) {
    fc_tensor *y = fc__ag_saved_tensor(ctx, node, SOFTMAX_SAVED_OUTPUT);
    if (!y) return fc__failed(ctx);
    if (fc__ag_create_graph(ctx)) { /* the rules above from recorded ops (y linked) */
        int ax = (int)node->i[SOFTMAX_I_AXIS];
        if (y->raw.dtype != gout->raw.dtype) y = fc_to(ctx, y, gout->raw.dtype);
        if (is_log)
            gin[0] =
                fc_sub(ctx, gout, fc_mul(ctx, fc_exp(ctx, y), fc_sum(ctx, gout, &ax, 1, true)));
        else
            gin[0] =
                fc_mul(ctx, y, fc_sub(ctx, gout, fc_sum(ctx, fc_mul(ctx, gout, y), &ax, 1, true)));
        return fc_ctx_status(ctx);
    }
    gin[0] = fc__softmax_backward(ctx, y, gout, (int)node->i[SOFTMAX_I_AXIS], is_log);
    return gin[0] ? FC_OK : fc__failed(ctx);
}

static fc_status softmax_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    return softmax_rule(ctx, node, gout, gin, false);
}

static fc_status log_softmax_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout,
                                      fc_tensor **gin) {
    return softmax_rule(ctx, node, gout, gin, true);
}

static fc_tensor *softmax_impl(fc_ctx *ctx, const char *name, fc_tensor *x, int axis, bool is_log) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, name, x);
    char d[160];
    fc_dtype dt = x->raw.dtype;
    if (!fc_dtype_is_float(dt)) {
        fc__fail(ctx, FC_ERR_DTYPE, "%s: dtype %s of %s is not a float dtype; cast with fc_to",
                 name, fc_dtype_name(dt), fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    int a;
    if (fc__shape_norm_axis(axis, x->raw.rank, &a) != FC_OK) {
        fc__fail(ctx, FC_ERR_AXIS, "%s: axis %d is out of range for %s", name, axis,
                 fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    fc_tensor *y = fc__softmax_forward(ctx, name, x, a, is_log);
    if (!y) return NULL;
    if (fc__ag_wants(ctx, 1, &x)) {
        fc_node *nd =
            fc__ag_record(ctx, name, is_log ? log_softmax_backward : softmax_backward, y, 1, &x);
        if (!nd || fc__ag_save(ctx, nd, "output", y) != FC_OK) {
            fc_release(y);
            return NULL;
        }
        nd->i[SOFTMAX_I_AXIS] = a;
    }
    return fc__finish(ctx, name, y);
}

fc_tensor *fc_softmax(fc_ctx *ctx, fc_tensor *x, int axis) {
    return softmax_impl(ctx, "softmax", x, axis, false);
}

fc_tensor *fc_log_softmax(fc_ctx *ctx, fc_tensor *x, int axis) {
    return softmax_impl(ctx, "log_softmax", x, axis, true);
}
