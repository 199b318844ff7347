/* grad_unary.c - the backward rule of the unary family
 * (src/exec/kernels/unary.c). One rule serves every kind: the node carries
 * the kind in i[0] and its parameters in f[0..1] (slope; clamp's lo, hi),
 * and the derivative formulas sit beside the forward ones in unary_math.c.
 *
 *   g [..] (f32, or f64 for f64 graphs), v [..] -> gin[0] [..] = g * f'(v)
 *
 * v is the one saved value (the input or the output, whichever the
 * derivative is written in; see fc__unary_saves_of), or g itself for the
 * kinds whose derivative needs no value (neg: -1, sign: 0). */
#include "ag/grad_pointwise.h"
#include "exec/kernels/pointwise.h"

fc_status fc__grad_unary(fc_ctx *ctx, fc_node *nd, fc_tensor *g, fc_tensor **gin) {
    fc__unary_kind k = (fc__unary_kind)nd->i[0];
    fc_tensor *v = fc__unary_saves_of(k) == FC__SAVES_NONE ? g : fc__ag_saved_tensor(ctx, nd, 0);
    if (!v) return fc_ctx_status(ctx);
    double p[2] = {nd->f[0], nd->f[1]};
    gin[0] = fc__unary_grad(ctx, k, p, g, v);
    return fc_ctx_status(ctx);
}
