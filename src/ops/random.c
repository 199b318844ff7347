/* SPDX-License-Identifier: MIT */
/* ops/random.c - the ops that draw from the context RNG: dropout. Argument
 * checks, the node and its backward rule; the mask kernel is
 * exec/kernels/mask.c.
 *
 * dropout multiplies x by a 0/scale mask, so the gradient is gout times the
 * same mask: the one saved by the forward (its generation checked by the
 * engine), or gout itself when the forward was the identity. */
#include "ag/tape.h"
#include "exec/kernels/mask.h"
#include "fucina.h"

/* ---- dropout -------------------------------------------------------------------------------- */

/* Node: the u8 keep mask saved and the scale the kept elements got; nothing
 * saved (n_saved == 0) for the identity (eval mode or p == 0). */
enum { DROPOUT_SAVED_MASK = 0 };
enum { DROPOUT_F_SCALE = 0 };

static fc_status dropout_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (node->n_saved == 0) {
        gin[0] = gout;
        return FC_OK;
    }
    fc_tensor *mask = fc__ag_saved_tensor(ctx, node, DROPOUT_SAVED_MASK);
    if (mask && fc__ag_create_graph(ctx)) { /* g * mask * scale, the mask a constant */
        gin[0] =
            fc_mul(ctx, gout,
                   fc_mul_scalar(ctx, fc_to(ctx, mask, gout->raw.dtype), node->f[DROPOUT_F_SCALE]));
        return fc_ctx_status(ctx);
    }
    gin[0] = mask ? fc__dropout_apply(ctx, gout, mask, node->f[DROPOUT_F_SCALE]) : NULL;
    return gin[0] ? FC_OK : fc_ctx_status(ctx);
}

/* identity (eval mode, p == 0): a view of x with a pass-through node */
static fc_tensor *drop_identity(fc_ctx *ctx, fc_tensor *x) {
    fc_raw v;
    if (fc__raw_view(&x->raw, &v) != FC_OK) {
        fc__fail(ctx, FC_ERR_NULL_ARG, "dropout: input has no storage");
        return NULL;
    }
    fc_tensor *out = fc__finish(ctx, "dropout", fc__tensor_wrap(ctx, "dropout", &v));
    if (out && fc__ag_wants(ctx, 1, &x) &&
        !fc__ag_record(ctx, "dropout", dropout_backward, out, 1, &x)) {
        fc_release(out);
        return NULL;
    }
    return out;
}

fc_tensor *fc_dropout(fc_ctx *ctx, fc_tensor *x, double p, bool training) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "dropout", x);
    char d[160];
    if (!fc_dtype_is_float(x->raw.dtype)) {
        fc__fail(ctx, FC_ERR_DTYPE, "dropout: %s is not a float tensor (f16, bf16, f32, f64)",
                 fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    if (!(p >= 0.0 && p < 1.0)) {
        fc__fail(ctx, FC_ERR_INVALID_ARG, "dropout: p = %g is outside [0, 1)", p);
        return NULL;
    }
    if (!training || p == 0.0) return drop_identity(ctx, x);
    bool grad = fc__ag_wants(ctx, 1, &x);
    fc_tensor *mask = NULL;
    fc_tensor *out = fc__mask_dropout(ctx, x, p, grad ? &mask : NULL);
    out = fc__finish(ctx, "dropout", out);
    if (out && grad) {
        fc_node *nd = fc__ag_record(ctx, "dropout", dropout_backward, out, 1, &x);
        if (!nd || fc__ag_save(ctx, nd, "mask", mask) != FC_OK) {
            fc_release(out);
            out = NULL;
        } else {
            nd->f[DROPOUT_F_SCALE] = fc__dropout_scale(p);
        }
    }
    fc_release(mask);
    return out;
}
