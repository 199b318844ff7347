/* grad_join.c - backward rules of concat, stack and pad
 * (src/exec/kernels/join.c, same order; split pieces use fc__bw_slice).
 *
 * Each input of a join owns one slab of the output along the join axis, so
 * its gradient is that slab of gout: a narrow view, squeezed for stack. The
 * slab sizes come from the input shapes the node recorded, which also
 * covers the grouped nodes of joins with many inputs (each group is a
 * concat input whose slab spans its members). pad's input owns the
 * interior, one strided view of gout. */
#include "exec/kernels/shape_ops.h"
#include "fucina/ops.h"

/* concat (and the top of a grouped join): i[0] axis */
fc_status fc__bw_concat(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    int axis = (int)node->i[0];
    int64_t pos = 0;
    for (int k = 0; k < node->n_in; k++) {
        int64_t len = node->in[k].shape[axis];
        if (node->in[k].needs) {
            gin[k] = fc_narrow(ctx, gout, axis, pos, len);
            if (!gin[k]) return fc_ctx_status(ctx);
        }
        pos += len;
    }
    return FC_OK;
}

/* stack: i[0] is the new axis; input k is index k of it */
fc_status fc__bw_stack(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    int axis = (int)node->i[0];
    for (int k = 0; k < node->n_in; k++) {
        if (!node->in[k].needs) continue;
        gin[k] = fc_squeeze(ctx, fc_narrow(ctx, gout, axis, k, 1), axis);
        if (!gin[k]) return fc_ctx_status(ctx);
    }
    return FC_OK;
}

/* pad: i[0..rank) are the leading pads */
fc_status fc__bw_pad(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    int64_t offset = gout->raw.offset;
    for (int i = 0; i < node->in[0].rank; i++)
        offset += node->i[i] * gout->raw.strides[i];
    gin[0] = fc__tensor_view(ctx, "backward of pad", gout, node->in[0].shape, gout->raw.strides,
                             node->in[0].rank, offset);
    return gin[0] ? FC_OK : fc_ctx_status(ctx);
}
