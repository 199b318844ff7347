/* grad_loss.c - backward rules of cross_entropy and mse_loss (forward in
 * src/exec/kernels/loss.c, same order).
 *   cross_entropy  dx = scale_i * (softmax(x_i) - eps / C - (1 - eps) onehot(t_i)),
 *                  from the saved logits and per-row lse in one row pass
 *   mse_loss       da = 2 * scale * g * (a - b),  db = -da  (over the
 *                  broadcast shape; the engine sums broadcast axes away) */
#include "ag/tape.h"
#include "exec/kernels/rowwise.h"
#include "fucina/ops.h"

fc_status fc__grad_cross_entropy(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_mse_loss(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

fc_status fc__grad_cross_entropy(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *logits = fc__ag_saved_tensor(ctx, node, 0);
    fc_tensor *lse = fc__ag_saved_tensor(ctx, node, 1);
    if (!logits || !lse) return fc__failed(ctx);
    gin[0] = fc__cross_entropy_backward(ctx, logits, lse, node->aux, gout, (int)node->i[0],
                                        node->f[0], node->f[1], node->i[1] != 0, node->i[2]);
    return gin[0] ? FC_OK : fc__failed(ctx);
}

/* A saved operand in the gradient dtype (16-bit floats widened). */
static fc_tensor *saved_as(fc_ctx *ctx, fc_node *node, int k, fc_dtype gdt) {
    fc_tensor *t = fc__ag_saved_tensor(ctx, node, k);
    return t && t->raw.dtype != gdt ? fc_to(ctx, t, gdt) : t;
}

fc_status fc__grad_mse_loss(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_dtype gdt = gout->raw.dtype;
    fc_tensor *a = saved_as(ctx, node, 0, gdt), *b = saved_as(ctx, node, 1, gdt);
    if (!a || !b) return fc__failed(ctx);
    int64_t shape[FC_MAX_RANK];
    int rank;
    fc__shape_broadcast(a->raw.shape, a->raw.rank, b->raw.shape, b->raw.rank, shape, &rank);
    for (int k = 0; k < 2; k++) {
        if (!node->in[k].needs) continue;
        gin[k] = fc__mse_backward(ctx, a, b, gout, shape, rank, node->f[0], k == 0 ? 1.0 : -1.0);
        if (!gin[k]) return fc__failed(ctx);
    }
    return FC_OK;
}
