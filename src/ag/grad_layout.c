/* grad_layout.c - backward rules of the view ops (src/exec/kernels/layout.c,
 * same order).
 *
 * A view moves no numbers, so its gradient only moves them back: a reshape
 * (and view/squeeze/unsqueeze) reshapes gout to the input's shape, a
 * permutation applies the inverse permutation, a window (narrow/slice)
 * places gout into zeros of the input's shape, and an expand hands gout
 * over as it is: the engine sums broadcast axes down to the input's shape
 * (fc__ag_reduce_to), which is exactly the adjoint of a zero-stride view. */
#include <string.h>

#include "exec/kernels/shape_ops.h"
#include "fucina/ops.h"

fc_tensor *fc__grad_place(fc_ctx *ctx, fc_tensor *g, const int64_t *shape, int rank, int axis,
                          int64_t start, int64_t step) {
    fc_tensor *z = fc_zeros(ctx, g->raw.dtype, shape, rank);
    if (!z) return NULL;
    int64_t strides[FC_MAX_RANK];
    memcpy(strides, z->raw.strides, sizeof(int64_t) * (size_t)rank);
    strides[axis] *= step;
    int64_t offset = z->raw.offset + start * z->raw.strides[axis];
    fc_tensor *win =
        fc__tensor_view(ctx, "backward", z, g->raw.shape, strides, g->raw.rank, offset);
    if (!win || fc_copy_(win, g) != FC_OK) return NULL;
    return z;
}

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

/* narrow, slice, split pieces: i[0] axis, i[1] start, i[2] step */
fc_status fc__bw_slice(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    gin[0] = fc__grad_place(ctx, gout, node->in[0].shape, node->in[0].rank, (int)node->i[0],
                            node->i[1], node->i[2]);
    return gin[0] ? FC_OK : fc_ctx_status(ctx);
}

/* expand: the engine reduces the broadcast axes */
fc_status fc__bw_expand(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    (void)ctx;
    (void)node;
    gin[0] = gout;
    return FC_OK;
}
