/* SPDX-License-Identifier: MIT */
/* ops/scan.c - fc_cumsum: dtype and axis checks, the autograd record and
 * the rule. The scan itself is exec/kernels/scan.c.
 *
 * Rule: dx = the reverse cumsum (suffix sums) of g along the same axis. */
#include "exec/kernels/scan.h"
#include "ag/tape.h"
#include "fucina.h"

/* The node's integer parameter. */
enum scan_int_slot {
    SCAN_I_AXIS, /* the scanned axis, normalized */
};

static fc_status cumsum_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

fc_tensor *fc_cumsum(fc_ctx *ctx, fc_tensor *x, int axis) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "cumsum", x);
    char d[160];
    fc_dtype dt = x->raw.dtype;
    if (!fc_dtype_is_scalar(dt) || fc_dtype_is_f8(dt)) {
        fc__fail(ctx, FC_ERR_DTYPE,
                 "cumsum: dtype %s of %s is not supported (floats, integers and bool); cast with "
                 "fc_to",
                 fc_dtype_name(dt), fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    int a;
    if (fc__shape_norm_axis(axis, x->raw.rank, &a) != FC_OK) {
        fc__fail(ctx, FC_ERR_AXIS, "cumsum: axis %d is out of range for %s", axis,
                 fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    fc_tensor *out = fc__cumsum(ctx, "cumsum", x, a, false);
    if (out && fc__ag_wants(ctx, 1, &x)) {
        fc_node *nd = fc__ag_record(ctx, "cumsum", cumsum_backward, out, 1, &x);
        if (!nd) {
            fc_release(out);
            return NULL;
        }
        nd->i[SCAN_I_AXIS] = a;
    }
    return fc__finish(ctx, "cumsum", out);
}

static fc_status cumsum_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (fc__ag_create_graph(ctx)) { /* suffix sums, recorded: sum(g) - cumsum(g) + g */
        int ax = (int)node->i[SCAN_I_AXIS];
        gin[0] = fc_add(ctx, fc_sub(ctx, fc_sum(ctx, gout, &ax, 1, true), fc_cumsum(ctx, gout, ax)),
                        gout);
        return fc_ctx_status(ctx);
    }
    gin[0] = fc__cumsum(ctx, node->op, gout, (int)node->i[SCAN_I_AXIS], true);
    return gin[0] ? FC_OK : fc__failed(ctx);
}
