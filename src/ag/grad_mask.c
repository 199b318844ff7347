/* grad_mask.c - backward rules of triu/tril and dropout
 * (src/exec/kernels/mask.c, same order).
 *
 * Both ops multiply x by a fixed 0/1 (or 0/scale) mask, so the gradient is
 * gout times the same mask: triu/tril re-apply the triangle; dropout uses
 * the mask saved by the forward (its generation checked by the engine), or
 * passes gout through when the forward was the identity. */
#include "exec/kernels/shape_ops.h"
#include "fucina/ops.h"

/* triu, tril: i[0] the diagonal offset k, i[1] upper */
fc_status fc__bw_triangle(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    gin[0] = node->i[1] ? fc_triu(ctx, gout, node->i[0]) : fc_tril(ctx, gout, node->i[0]);
    return gin[0] ? FC_OK : fc_ctx_status(ctx);
}

/* dropout: saved 0 the u8 mask and f[0] the scale; nothing saved for the
 * identity (eval mode or p == 0) */
fc_status fc__bw_dropout(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (node->n_saved == 0) {
        gin[0] = gout;
        return FC_OK;
    }
    fc_tensor *mask = fc__ag_saved_tensor(ctx, node, 0);
    gin[0] = mask ? fc__dropout_apply(ctx, gout, mask, node->f[0]) : NULL;
    return gin[0] ? FC_OK : fc_ctx_status(ctx);
}
