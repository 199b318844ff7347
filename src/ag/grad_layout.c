/* grad_layout.c - backward rules of the view ops (src/exec/kernels/layout.c,
 * same order).
 *
 * A view moves no numbers, so its gradient only moves them back: a reshape
 * (and view/squeeze/unsqueeze) reshapes gout to the input's shape, a
 * permutation applies the inverse permutation, a window (narrow/slice)
 * hands gout to the engine as a gradient of that window of the input
 * (fc__ag_gin_region: no full-size zero tensor is built), and an expand
 * hands gout over as it is: the engine sums broadcast axes down to the input's shape
 * (fc__ag_reduce_to), which is exactly the adjoint of a zero-stride view. */
#include "exec/kernels/shape_ops.h"
#include "fucina/ops.h"

/* reshape, view, squeeze, unsqueeze */
fc_status fc__bw_reshape(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    gin[0] = fc_reshape(ctx, gout, node->in[0].shape, node->in[0].rank);
    return gin[0] ? FC_OK : fc_ctx_status(ctx);
}

/* permute, transpose: node->i holds the permutation out axis -> in axis */
fc_status fc__bw_permute(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    int inv[FC_MAX_RANK];
    for (int i = 0; i < node->out_rank; i++)
        inv[node->i[i]] = i;
    gin[0] = fc_permute(ctx, gout, inv);
    return gin[0] ? FC_OK : fc_ctx_status(ctx);
}

/* narrow, slice, split pieces: i[0] axis, i[1] start, i[2] step. gout goes
 * to the engine as it is, as a region gradient: the window of the input's
 * row-major layout it came from (the engine adds it there, so several
 * pieces of one tensor never each build and add a full-size zero tensor). */
fc_status fc__bw_slice(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    const fc__ag_input *in = &node->in[0];
    int axis = (int)node->i[0];
    int64_t strides[FC_MAX_RANK] = {0}, s = 1;
    for (int d = in->rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= in->shape[d];
    }
    int64_t offset = node->i[1] * strides[axis];
    strides[axis] *= node->i[2];
    gin[0] = gout;
    return fc__ag_gin_region(ctx, node, 0, strides, offset);
}

/* expand: the engine reduces the broadcast axes */
fc_status fc__bw_expand(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    (void)ctx;
    (void)node;
    gin[0] = gout;
    return FC_OK;
}
