/* qlinear.c - fc_linear with block-quantized weights [out, in].
 *
 * The forward decodes W inside the quantized GEMM (backend/qmatmul.h): W is
 * never materialized as f32, activations are packed per ggml's method for
 * the type. The backward gives x (and an f32 bias) their gradients so an
 * adapter can be trained on top of a frozen quantized base; quantized
 * weights themselves never require grad. dx = dy . W needs sums across
 * weight rows, which the row-decoding kernel cannot do, so the backward
 * dequantizes W transiently (released when the node finishes). */
#include <string.h>

#include "ag/tape.h"
#include "backend/qmatmul.h"
#include "exec/tensor.h"
#include "fucina/matmul.h"

fc_tensor *fc__linear_quantized(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *bias);

static fc_status qlinear_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (node->in[0].needs) {
        fc_tensor *w = fc__ag_saved_tensor(ctx, node, 0);
        fc_tensor *wd = w ? fc_to(ctx, w, FC_F32) : NULL; /* [out, in] */
        gin[0] = wd ? fc_matmul(ctx, gout, wd) : NULL;    /* [..., out] . [out, in] */
        if (!gin[0]) return fc_ctx_status(ctx);
    }
    if (node->n_in > 2 && node->in[2].needs) gin[2] = gout; /* the engine sums leading axes */
    return FC_OK;
}

fc_tensor *fc__linear_quantized(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *bias) {
    char xs[160], ws[160], bs[160];
    const char *op = "linear";
    if (x->raw.dtype != FC_F32) {
        fc__fail(ctx, FC_ERR_DTYPE, "%s: quantized weight %s needs f32 x, got %s", op,
                 fc__desc(w, ws, 160), fc__desc(x, xs, 160));
        return NULL;
    }
    if (!fc_dtype_supports_quantized_matmul_rhs(w->raw.dtype)) {
        fc__fail(ctx, FC_ERR_DTYPE, "%s: %s is not a weight format (it quantizes activations)", op,
                 fc_dtype_name(w->raw.dtype));
        return NULL;
    }
    if (w->raw.rank != 2) {
        fc__fail(ctx, FC_ERR_RANK, "%s: weight %s must be 2-D [out, in]", op, fc__desc(w, ws, 160));
        return NULL;
    }
    int64_t n = w->raw.shape[0], k = w->raw.shape[1];
    if (x->raw.shape[x->raw.rank - 1] != k) {
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                 "%s: x %s and weight %s do not match (%lld input features vs %lld)", op,
                 fc__desc(x, xs, 160), fc__desc(w, ws, 160),
                 (long long)x->raw.shape[x->raw.rank - 1], (long long)k);
        return NULL;
    }
    if (bias && (bias->raw.dtype != FC_F32 || bias->raw.rank != 1 || bias->raw.shape[0] != n)) {
        fc__fail(ctx, bias->raw.dtype != FC_F32 ? FC_ERR_DTYPE : FC_ERR_SHAPE_MISMATCH,
                 "%s: bias %s must be f32[%lld] for weight %s", op, fc__desc(bias, bs, 160),
                 (long long)n, fc__desc(w, ws, 160));
        return NULL;
    }
    if (!fc__raw_is_contiguous(&w->raw)) {
        fc__fail(ctx, FC_ERR_UNSUPPORTED_VIEW, "%s: quantized weight %s must be contiguous", op,
                 fc__desc(w, ws, 160));
        return NULL;
    }
    fc_tensor *xc = fc_contiguous(ctx, x);
    fc_tensor *bc = bias ? fc_contiguous(ctx, bias) : NULL;
    if (!xc || (bias && !bc)) {
        fc_release(xc);
        fc_release(bc);
        return NULL;
    }
    int64_t shape[FC_MAX_RANK];
    memcpy(shape, x->raw.shape, sizeof(int64_t) * (size_t)x->raw.rank);
    shape[x->raw.rank - 1] = n;
    fc_tensor *out = fc__tensor_new(ctx, op, FC_F32, shape, x->raw.rank);
    fc_status st = out ? FC_OK : fc_ctx_status(ctx);
    if (out) {
        fc__qgemm g = {.wdt = w->raw.dtype,
                       .w = fc__raw_base(&w->raw),
                       .n = n,
                       .k = k,
                       .x = (const float *)fc__raw_base(&xc->raw),
                       .m = fc__raw_numel(&x->raw) / k,
                       .ldx = k,
                       .bias = bc ? (const float *)fc__raw_base(&bc->raw) : NULL,
                       .y = (float *)fc__raw_base(&out->raw),
                       .ldy = n,
                       .threads = ctx->threads > 0 ? ctx->threads : 1,
                       .alloc = &ctx->alloc};
        char err[256] = "";
        st = fc__qgemm_run(&g, err, sizeof err);
        if (st != FC_OK) fc__fail(ctx, st, "%s: %s", op, err);
    }
    fc_release(xc);
    fc_release(bc);
    if (st != FC_OK) {
        fc_release(out);
        return NULL;
    }
    fc_tensor *ins[3] = {x, w, bias};
    if (fc__ag_wants(ctx, 3, ins)) {
        fc_node *nd = fc__ag_record(ctx, "linear (quantized weight)", qlinear_backward, out, 3, ins);
        if (!nd || fc__ag_save(ctx, nd, "weight", w) != FC_OK) {
            fc_release(out);
            return NULL;
        }
    }
    return fc__finish(ctx, op, out);
}
