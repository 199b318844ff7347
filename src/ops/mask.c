/* SPDX-License-Identifier: MIT */
/* ops/mask.c - triu and tril: argument checks, the node and its backward
 * rule; the kernels are in exec/kernels/mask.c (dropout, the random op
 * that shares them, is ops/random.c).
 *
 * Both multiply x by a fixed 0/1 triangle, so the gradient is gout with
 * the same triangle re-applied. */
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
