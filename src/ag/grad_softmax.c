/* grad_softmax.c - backward rules of softmax and log_softmax (forward in
 * src/exec/kernels/softmax.c, same order). Both run one fused row kernel
 * over the saved output y and the output gradient g:
 *   softmax      dx = y * (g - sum(g * y))
 *   log_softmax  dx = g - exp(y) * sum(g)
 * with the sums along the softmax axis. */
#include "ag/tape.h"
#include "exec/kernels/rowwise.h"

fc_status fc__grad_softmax(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_log_softmax(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

static fc_status softmax_rule(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin,
                              bool log) {
    fc_tensor *y = fc__ag_saved_tensor(ctx, node, 0);
    if (!y) return fc__failed(ctx);
    gin[0] = fc__softmax_backward(ctx, y, gout, (int)node->i[0], log);
    return gin[0] ? FC_OK : fc__failed(ctx);
}

fc_status fc__grad_softmax(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    return softmax_rule(ctx, node, gout, gin, false);
}

fc_status fc__grad_log_softmax(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    return softmax_rule(ctx, node, gout, gin, true);
}
