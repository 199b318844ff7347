/* grad_compare.c - the backward rules of the two differentiable selections
 * of src/exec/kernels/compare.c, in its order.
 *
 *   where:       g [broadcast(C, A, B)] -> cond: 0, a: g where cond, b: g elsewhere
 *   masked_fill: g [..X] -> x: g where mask is false, 0 where it was filled
 *
 * The condition or mask is the one saved value; it reads by truthiness, as
 * in the forward. A condition that itself requires grad (a float tensor
 * used as a mask) gets a zero gradient, as it has no effect on the output
 * almost everywhere. */
#include "ag/grad_pointwise.h"
#include "fucina/ops.h"

static fc_tensor *zero_scalar(fc_ctx *ctx, const fc_tensor *g) {
    return fc_zeros(ctx, g->raw.dtype, (const int64_t[]){1}, 1);
}

/* inputs: 0 = cond, 1 = a, 2 = b; saved: 0 = cond */
fc_status fc__grad_where(fc_ctx *ctx, fc_node *nd, fc_tensor *g, fc_tensor **gin) {
    fc_tensor *cond = fc__ag_saved_tensor(ctx, nd, 0), *zero = zero_scalar(ctx, g);
    if (!cond || !zero) return fc_ctx_status(ctx);
    gin[0] = zero;
    if (nd->in[1].needs) gin[1] = fc_where(ctx, cond, g, zero);
    if (nd->in[2].needs) gin[2] = fc_where(ctx, cond, zero, g);
    return fc_ctx_status(ctx);
}

/* inputs: 0 = x, 1 = mask; saved: 0 = mask */
fc_status fc__grad_masked_fill(fc_ctx *ctx, fc_node *nd, fc_tensor *g, fc_tensor **gin) {
    fc_tensor *mask = fc__ag_saved_tensor(ctx, nd, 0);
    if (!mask) return fc_ctx_status(ctx);
    gin[0] = fc_masked_fill(ctx, g, mask, 0.0);
    if (nd->in[1].needs) gin[1] = zero_scalar(ctx, g);
    return fc_ctx_status(ctx);
}
