/* SPDX-License-Identifier: MIT */
/* qlinear.c - the product behind fc_linear with block-quantized weights
 * [out, in] (the op's checks, record and rule are in src/ops/matmul.c).
 *
 * W is decoded inside the quantized GEMM (backend/qmatmul.h): it is never
 * materialized as f32, and activations are packed per ggml's method for
 * the type. Nothing here records on the tape. */
#include <string.h>

#include "exec/kernels/matmul.h"

#include "backend/qmatmul.h"
#include "exec/kernels/copy.h"

fc_tensor *fc__qlinear(fc_ctx *ctx, const char *op, fc_tensor *x, fc_tensor *w, fc_tensor *bias) {
    int64_t n = w->raw.shape[0], k = w->raw.shape[1];
    fc_tensor *xc = fc__copy_contiguous_ref(ctx, op, x);
    fc_tensor *bc = bias ? fc__copy_contiguous_ref(ctx, op, bias) : NULL;
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
    return out;
}
