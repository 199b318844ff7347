/* grad_norm.c - backward rule of layer_norm and rms_norm (forward in
 * src/exec/kernels/norm.c). One fused kernel (fc__norm_backward) reads the
 * saved input and the output gradient once per row and produces dx and the
 * per-group partial sums of dweight and dbias; the saved mean and rstd
 * spare recomputing the row statistics. */
#include "ag/tape.h"
#include "exec/kernels/rowwise.h"

fc_status fc__grad_norm(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

/* Saved: 0 input, then node->i[0] weight, i[1] mean, i[2] rstd (-1: absent);
 * i[3] rms. Inputs: 0 x, 1 weight, 2 bias. */
fc_status fc__grad_norm(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *x = fc__ag_saved_tensor(ctx, node, 0);
    fc_tensor *w = node->i[0] >= 0 ? fc__ag_saved_tensor(ctx, node, (int)node->i[0]) : NULL;
    fc_tensor *mean = node->i[1] >= 0 ? fc__ag_saved_tensor(ctx, node, (int)node->i[1]) : NULL;
    fc_tensor *rstd = fc__ag_saved_tensor(ctx, node, (int)node->i[2]);
    if (!x || !rstd || (node->i[0] >= 0 && !w) || (node->i[1] >= 0 && !mean))
        return fc__failed(ctx);
    return fc__norm_backward(ctx, node->i[3] != 0, x, gout, w, mean, rstd, node->in[0].needs,
                             node->in[1].needs, node->in[2].needs, &gin[0], &gin[1], &gin[2]);
}
