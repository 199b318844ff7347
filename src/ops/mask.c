/* SPDX-License-Identifier: MIT */
/* ops/mask.c - triu, tril and dropout: argument checks, the nodes and their
 * backward rules; the kernels are in exec/kernels/mask.c.
 *
 * Both ops multiply x by a fixed 0/1 (or 0/scale) mask, so the gradient is
 * gout times the same mask: triu/tril re-apply the triangle; dropout uses
 * the mask saved by the forward (its generation checked by the engine), or
 * passes gout through when the forward was the identity. */
#include "exec/kernels/mask.h"
#include "ag/tape.h"
#include "fucina.h"

/* ---- triu / tril ---------------------------------------------------------------------------- */

/* Node: the diagonal offset k as given, and whether the upper triangle is
 * kept; nothing saved. */
enum { TRIANGLE_I_K, TRIANGLE_I_UPPER };

static fc_status triangle_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    int64_t k = node->i[TRIANGLE_I_K];
    gin[0] = node->i[TRIANGLE_I_UPPER] ? fc_triu(ctx, gout, k) : fc_tril(ctx, gout, k);
    return gin[0] ? FC_OK : fc_ctx_status(ctx);
}

static fc_tensor *triangle(fc_ctx *ctx, const char *op, fc_tensor *x, int64_t k, bool upper) {
    char d[160];
    if (x->raw.rank < 2) {
        fc__fail(ctx, FC_ERR_RANK, "%s: %s needs at least two axes (it masks the last two)", op,
                 fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    if (fc_dtype_is_block(x->raw.dtype)) {
        fc__fail(ctx, FC_ERR_DTYPE, "%s: %s is block-quantized; convert with fc_to first", op,
                 fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    fc_tensor *out = fc__mask_triangle(ctx, op, x, k, upper);
    if (!out) return NULL;
    out = fc__finish(ctx, op, out);
    if (out && fc__ag_wants(ctx, 1, &x)) {
        fc_node *nd = fc__ag_record(ctx, op, triangle_backward, out, 1, &x);
        if (!nd) {
            fc_release(out);
            return NULL;
        }
        nd->i[TRIANGLE_I_K] = k;
        nd->i[TRIANGLE_I_UPPER] = upper;
    }
    return out;
}

fc_tensor *fc_triu(fc_ctx *ctx, fc_tensor *x, int64_t k) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "triu", x);
    return triangle(ctx, "triu", x, k, true);
}

fc_tensor *fc_tril(fc_ctx *ctx, fc_tensor *x, int64_t k) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "tril", x);
    return triangle(ctx, "tril", x, k, false);
}

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
