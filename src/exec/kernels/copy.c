/* SPDX-License-Identifier: MIT */
/* copy.c - whole-tensor copies and dtype conversions, recording nothing
 * (the differentiable ops over them are in src/ops/cast.c).
 *
 * Conversions run over contiguous rows, through f32 for block dtypes
 * (quantize / dequantize a row of blocks at a time). */
#include <string.h>

#include "exec/kernels/copy.h"
#include "exec/parallel.h"
#include "fucina/quant.h"

fc_tensor *fc__copy_alias(fc_ctx *ctx, const char *op, fc_tensor *t) {
    fc_raw v;
    fc_status st = fc__raw_view(&t->raw, &v);
    if (st != FC_OK) {
        fc__fail(ctx, st, "%s: %s", op, fc_strerror(st));
        return NULL;
    }
    return fc__tensor_wrap(ctx, op, &v);
}

/* Copies of at least this many bytes into a contiguous destination run on
 * the thread team: one core's copy reaches about half of what the memory
 * system gives two. Each thread gathers its own range of elements. The
 * bar was 1 MB; the GPT step's backward makes ~50 copies of 512 KB (head
 * gradients gathered from permuted views, operands of the batched
 * attention products), and splitting those too took 1-2 ms off a 20-25 ms
 * step at AVX-512 on Zen 5 (five alternating pairs). */
#define TEAM_COPY_MIN_BYTES ((int64_t)1 << 17)

typedef struct team_copy {
    const fc_raw *src;
    char *dst;
    int64_t es;
} team_copy;

static void team_copy_range(void *arg, int64_t b, int64_t e) {
    const team_copy *tc = arg;
    /* the range is inside src and src is not a block dtype: cannot fail */
    (void)fc__raw_copy_range(tc->src, tc->dst + b * tc->es, b, e - b);
}

fc_status fc__copy_into(fc_ctx *ctx, const fc_raw *src, fc_raw *dst) {
    int64_t n = fc__raw_numel(src), es = (int64_t)fc_dtype_size(src->dtype);
    bool team = ctx->threads > 1 && src->buf && dst->buf && src->buf != dst->buf &&
                src->dtype == dst->dtype && !fc_dtype_is_block(src->dtype) &&
                n * es >= TEAM_COPY_MIN_BYTES &&
                fc__shape_equal(src->shape, src->rank, dst->shape, dst->rank) &&
                fc__raw_is_contiguous(dst) && !fc__buffer_is_read_only(dst->buf);
    if (!team) return fc__raw_copy_into(src, dst);
    fc__buffer_bump_generation(dst->buf);
    team_copy tc = {src, fc__raw_base(dst), es};
    fc__parallel_for(ctx, n, (TEAM_COPY_MIN_BYTES / 2) / es, team_copy_range, &tc);
    return FC_OK;
}

fc_tensor *fc__copy_clone(fc_ctx *ctx, const char *op, fc_tensor *t) {
    fc_tensor *out = fc__tensor_new(ctx, op, t->raw.dtype, t->raw.shape, t->raw.rank);
    if (!out) return NULL;
    fc_status st = fc__copy_into(ctx, &t->raw, &out->raw);
    if (st != FC_OK) {
        char d[160];
        fc__fail(ctx, st, "%s: cannot copy %s (%s)", op, fc__desc(t, d, (int)sizeof d),
                 fc_strerror(st));
        fc_release(out);
        return NULL;
    }
    return out;
}

fc_tensor *fc__copy_contiguous(fc_ctx *ctx, const char *op, fc_tensor *t) {
    return fc__raw_is_contiguous(&t->raw) ? fc__copy_alias(ctx, op, t)
                                          : fc__copy_clone(ctx, op, t);
}

fc_tensor *fc__copy_contiguous_ref(fc_ctx *ctx, const char *op, fc_tensor *t) {
    return fc__raw_is_contiguous(&t->raw) ? fc_retain(t) : fc__copy_clone(ctx, op, t);
}

fc_tensor *fc__copy_cast(fc_ctx *ctx, const char *op, fc_tensor *t, fc_dtype dtype) {
    fc_dtype from = t->raw.dtype;
    if (!fc_dtype_is_valid(dtype)) {
        fc__fail(ctx, FC_ERR_DTYPE, "%s: invalid target dtype %d", op, (int)dtype);
        return NULL;
    }
    if (from == dtype) return fc__copy_alias(ctx, op, t);
    bool fb = fc_dtype_is_block(from), tb = fc_dtype_is_block(dtype);
    if ((fb && dtype != FC_F32) || (tb && from != FC_F32)) {
        fc__fail(ctx, FC_ERR_DTYPE,
                 "%s: %s -> %s: block-quantized dtypes convert only to and from f32", op,
                 fc_dtype_name(from), fc_dtype_name(dtype));
        return NULL;
    }
    fc_tensor *src = fc__copy_contiguous_ref(ctx, op, t);
    if (!src) return NULL;
    fc_tensor *out = fc__tensor_new(ctx, op, dtype, t->raw.shape, t->raw.rank);
    if (!out) {
        fc_release(src);
        return NULL;
    }
    const void *sp = fc__raw_base(&src->raw);
    void *dp = fc__raw_base(&out->raw);
    fc_status st;
    int64_t cols = t->raw.shape[t->raw.rank - 1];
    int64_t rows = fc__raw_numel(&t->raw) / cols;
    if (fb)
        st = fc_dequantize(from, sp, dp, rows, cols);
    else if (tb)
        st = fc_quantize(dtype, sp, dp, rows, cols);
    else
        st = fc_convert_row(from, sp, dtype, dp, (size_t)fc__raw_numel(&t->raw));
    fc_release(src);
    if (st != FC_OK) {
        char d[160];
        fc__fail(ctx, st, "%s: %s -> %s failed: %s", op, fc__desc(t, d, (int)sizeof d),
                 fc_dtype_name(dtype), fc_strerror(st));
        fc_release(out);
        return NULL;
    }
    return out;
}
