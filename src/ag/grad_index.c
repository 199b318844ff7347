/* grad_index.c - backward rules of index_select/embedding, gather and
 * scatter_add (src/exec/kernels/index.c, same order).
 *
 * Selecting rows is linear in x, and its adjoint adds each gradient row back
 * into the row it came from: a zero table plus an index-add, deterministic
 * because every destination row sums its contributions in index order
 * (fc__index_add_rows partitions the work by destination columns). gather
 * and scatter_add are each other's adjoints along the same index. The index
 * was saved with its generation, so it is the one the forward used. */
#include "exec/kernels/shape_ops.h"
#include "fucina/ops.h"

/* index_select, embedding: i[0] axis; saved 0 the index */
fc_status fc__bw_index_select(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *index = fc__ag_saved_tensor(ctx, node, 0);
    if (!index) return fc_ctx_status(ctx);
    gin[0] =
        fc__index_add_rows(ctx, gout, node->in[0].shape, node->in[0].rank, (int)node->i[0], index);
    return gin[0] ? FC_OK : fc_ctx_status(ctx);
}

/* gather: i[0] axis; saved 0 the index */
fc_status fc__bw_gather(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *index = fc__ag_saved_tensor(ctx, node, 0);
    fc_tensor *z =
        index ? fc_zeros(ctx, gout->raw.dtype, node->in[0].shape, node->in[0].rank) : NULL;
    gin[0] = fc_scatter_add(ctx, z, (int)node->i[0], index, gout);
    return gin[0] ? FC_OK : fc_ctx_status(ctx);
}

/* scatter_add: inputs x, src; i[0] axis; saved 0 the index. x passes gout
 * through; src gets gout gathered at the index, zero-padded where src is
 * larger than the index. */
fc_status fc__bw_scatter_add(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (node->in[0].needs) gin[0] = gout;
    if (!node->in[1].needs) return FC_OK;
    fc_tensor *index = fc__ag_saved_tensor(ctx, node, 0);
    fc_tensor *g = index ? fc_gather(ctx, gout, (int)node->i[0], index) : NULL;
    if (!g) return fc_ctx_status(ctx);
    const fc__ag_input *src = &node->in[1];
    int64_t pads[2 * FC_MAX_RANK];
    bool same = true;
    for (int i = 0; i < src->rank; i++) {
        pads[2 * i] = 0;
        pads[2 * i + 1] = src->shape[i] - g->raw.shape[i];
        same = same && pads[2 * i + 1] == 0;
    }
    gin[1] = same ? g : fc_pad(ctx, g, pads, 0.0);
    return gin[1] ? FC_OK : fc_ctx_status(ctx);
}
