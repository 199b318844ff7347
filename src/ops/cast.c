/* SPDX-License-Identifier: MIT */
/* ops/cast.c - copies and dtype conversions as differentiable ops: fc_clone,
 * fc_contiguous, fc_to, and the in-place fc_copy_. The work is in
 * exec/kernels/copy.c; this file validates, records, and holds the rule.
 *
 * Rule: a copy or a float-to-float cast passes the gradient straight
 * through (the engine converts it to the input's gradient dtype). A cast to
 * an integer or bool dtype cuts the graph: nothing is recorded. Nodes save
 * nothing. */
#include "ag/tape.h"
#include "exec/kernels/copy.h"
#include "fucina.h"

static fc_status pass_through_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout,
                                       fc_tensor **gin) {
    (void)ctx;
    (void)node;
    gin[0] = gout;
    return FC_OK;
}

/* Records out = op(t); releases out and returns NULL when recording fails. */
static fc_tensor *record_pass_through(fc_ctx *ctx, const char *op, fc_tensor *t, fc_tensor *out) {
    if (!out || !fc__ag_wants(ctx, 1, &t)) return out;
    if (!fc_dtype_is_float(out->raw.dtype)) return out;
    if (!fc__ag_record(ctx, op, pass_through_backward, out, 1, &t)) {
        fc_release(out);
        return NULL;
    }
    return out;
}

fc_tensor *fc_clone(fc_ctx *ctx, fc_tensor *t) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "fc_clone", t);
    return record_pass_through(ctx, "fc_clone", t, fc__copy_clone(ctx, "fc_clone", t));
}

fc_tensor *fc_contiguous(fc_ctx *ctx, fc_tensor *t) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "fc_contiguous", t);
    if (!fc__raw_is_contiguous(&t->raw)) return fc_clone(ctx, t);
    return record_pass_through(ctx, "fc_contiguous", t, fc__copy_alias(ctx, "fc_contiguous", t));
}

fc_status fc_copy_(fc_tensor *dst, const fc_tensor *src) {
    if (!dst || !src) {
        /* record where a context is reachable */
        fc_ctx *ctx = dst ? dst->ctx : src ? src->ctx : NULL;
        return fc__fail(ctx, FC_ERR_NULL_ARG, "fc_copy_: %s is NULL", dst ? "src" : "dst");
    }
    if ((dst->flags & FC__T_REQUIRES_GRAD) && dst->ctx->no_grad_depth == 0) {
        char b[160];
        return fc__fail(dst->ctx, FC_ERR_INVALID_ARG,
                        "fc_copy_: %s requires grad; in-place writes to it are allowed only "
                        "inside fc_no_grad_begin/end",
                        fc__desc(dst, b, (int)sizeof b));
    }
    fc_status st = fc__copy_into(dst->ctx, &src->raw, &dst->raw);
    if (st != FC_OK) {
        char a[160], b[160];
        fc__fail(dst->ctx, st, "fc_copy_: cannot copy %s into %s (%s)",
                 fc__desc(src, a, (int)sizeof a), fc__desc(dst, b, (int)sizeof b), fc_strerror(st));
    }
    return st;
}

fc_tensor *fc_to(fc_ctx *ctx, fc_tensor *t, fc_dtype dtype) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "fc_to", t);
    fc_tensor *out = fc__copy_cast(ctx, "fc_to", t, dtype);
    if (out && out->raw.dtype != t->raw.dtype) out = fc__finish(ctx, "fc_to", out);
    return record_pass_through(ctx, "fc_to", t, out);
}
