/* grad_binary.c - the backward rules of src/exec/kernels/binary.c, in the
 * same order (the scalar forms record these same rules, with the scalar as
 * an input that needs no gradient).
 *
 *   g [broadcast(A, B)] -> gin[0] for a [..A], gin[1] for b [..B]
 *
 * Every gradient here is produced at the broadcast shape; the engine sums
 * the broadcast axes down to each input's shape. g is f32 (f64 for f64
 * graphs); saved 16-bit inputs are widened to g's dtype first. Saved-slot
 * layout per op is set by record() in binary.c. */
#include "ag/grad_pointwise.h"
#include "exec/kernels/pointwise.h"
#include "fucina/ops.h"

fc_tensor *fc__grad_as(fc_ctx *ctx, fc_tensor *t, fc_dtype gdt) {
    if (!t) return NULL;
    return t->raw.dtype == gdt ? t : fc_to(ctx, t, gdt);
}

/* Saved value k in the gradient dtype of g. */
static fc_tensor *saved(fc_ctx *ctx, fc_node *nd, int64_t k, const fc_tensor *g) {
    return fc__grad_as(ctx, fc__ag_saved_tensor(ctx, nd, (int)k), g->raw.dtype);
}

/* d(a + b) = (g, g) */
fc_status fc__grad_add(fc_ctx *ctx, fc_node *nd, fc_tensor *g, fc_tensor **gin) {
    (void)nd;
    gin[0] = gin[1] = g;
    return fc_ctx_status(ctx);
}

/* d(a - b) = (g, -g) */
fc_status fc__grad_sub(fc_ctx *ctx, fc_node *nd, fc_tensor *g, fc_tensor **gin) {
    gin[0] = g;
    if (nd->in[1].needs) gin[1] = fc_neg(ctx, g);
    return fc_ctx_status(ctx);
}

/* g * saved value k; a saved value already in g's dtype is read in place
 * (no handle for it), a 16-bit one is widened first. */
static fc_tensor *times_saved(fc_ctx *ctx, fc_node *nd, int64_t k, fc_tensor *g) {
    const fc_raw *v = fc__ag_saved_raw(ctx, nd, (int)k);
    if (!v) return NULL;
    if (v->dtype == g->raw.dtype) return fc__mul_raw(ctx, g, v);
    return fc_mul(ctx, g, saved(ctx, nd, k, g));
}

/* d(a * b) = (g * b, g * a); i[0] / i[1] = saved slots of a / b (-1 when
 * the other input needs no gradient). */
fc_status fc__grad_mul(fc_ctx *ctx, fc_node *nd, fc_tensor *g, fc_tensor **gin) {
    if (nd->in[0].needs) gin[0] = times_saved(ctx, nd, nd->i[1], g);
    if (nd->in[1].needs) gin[1] = times_saved(ctx, nd, nd->i[0], g);
    return fc_ctx_status(ctx);
}

/* d(a / b) = (g / b, -(g / b) * out); saved: 0 = b, 1 = out (when b needs). */
fc_status fc__grad_div(fc_ctx *ctx, fc_node *nd, fc_tensor *g, fc_tensor **gin) {
    fc_tensor *ga = fc_div(ctx, g, saved(ctx, nd, 0, g));
    gin[0] = ga;
    if (nd->in[1].needs) gin[1] = fc_neg(ctx, fc_mul(ctx, ga, saved(ctx, nd, 1, g)));
    return fc_ctx_status(ctx);
}

/* d pow(a, b) = (g b a^(b-1), g a^b log a), with PyTorch's zeros where
 * b == 0 (for a) and where a == 0 and b >= 0 (for b); saved: a, b. */
fc_status fc__grad_pow(fc_ctx *ctx, fc_node *nd, fc_tensor *g, fc_tensor **gin) {
    fc_tensor *a = saved(ctx, nd, 0, g), *b = saved(ctx, nd, 1, g);
    if (!a || !b) return fc_ctx_status(ctx);
    if (nd->in[0].needs) gin[0] = fc__pow_grad_a(ctx, g, a, b);
    if (nd->in[1].needs) gin[1] = fc__pow_grad_b(ctx, g, a, b);
    return fc_ctx_status(ctx);
}

/* maximum / minimum: g * w to a and g * (1 - w) to b, w = 1 where a wins
 * (or is NaN), 0.5 on ties (PyTorch's split), 0 where b wins; saved: a, b. */
static fc_status minmax(fc_ctx *ctx, fc_node *nd, fc_tensor *g, fc_tensor **gin, bool is_min) {
    fc_tensor *a = saved(ctx, nd, 0, g), *b = saved(ctx, nd, 1, g);
    if (!a || !b) return fc_ctx_status(ctx);
    fc_tensor *ga = fc_mul(ctx, g, fc__minmax_weight(ctx, a, b, is_min));
    gin[0] = ga;
    if (nd->in[1].needs) gin[1] = fc_sub(ctx, g, ga);
    return fc_ctx_status(ctx);
}

fc_status fc__grad_maximum(fc_ctx *ctx, fc_node *nd, fc_tensor *g, fc_tensor **gin) {
    return minmax(ctx, nd, g, gin, false);
}

fc_status fc__grad_minimum(fc_ctx *ctx, fc_node *nd, fc_tensor *g, fc_tensor **gin) {
    return minmax(ctx, nd, g, gin, true);
}
