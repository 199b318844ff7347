/* SPDX-License-Identifier: MIT */
/* join.c - the copies behind concat, stack and pad (src/ops/join.c
 * validates, records and holds the rules).
 *
 * concat and stack share one copy kernel. Seen through its storage shape
 * (the last axis in blocks for block dtypes) the output is [O, R]: O outer
 * rows (the axes before `axis`) of R bytes, and each input contributes one
 * contiguous chunk of every output row (its axes from `axis` on; for stack
 * the new axis has size 1 in every input). A contiguous input is then a
 * memcpy per row, rows split across the team; other inputs are copied
 * through their strided window of the output. Every dtype moves as bytes.
 *
 * pad fills a fresh tensor and copies x into its interior. */
#include <string.h>

#include "exec/kernels/join.h"
#include "exec/parallel.h"

/* ---- concat / stack ------------------------------------------------------------------------- */

typedef struct join_job {
    fc_tensor *const *xs;
    int n;
    int axis; /* in input coordinates: the first axis of each input's chunk */
    char *out;
    int64_t row_bytes;
} join_job;

/* Bytes of input k's chunk of one output row (storage elements from axis on). */
static int64_t chunk_bytes(const fc_raw *x, int axis) {
    int64_t s[FC_MAX_RANK];
    fc__raw_storage_shape(x, s);
    return fc__shape_product(s + axis, x->rank - axis) * (int64_t)fc_dtype_size(x->dtype);
}

static void join_rows(void *arg, int64_t o0, int64_t o1) {
    const join_job *j = arg;
    int64_t col = 0;
    for (int k = 0; k < j->n; k++) {
        const fc_raw *x = &j->xs[k]->raw;
        int64_t cb = chunk_bytes(x, j->axis);
        if (fc__raw_is_contiguous(x)) {
            const char *src = fc__raw_base(x);
            for (int64_t o = o0; o < o1; o++)
                memcpy(j->out + o * j->row_bytes + col, src + o * cb, (size_t)cb);
        }
        col += cb;
    }
}

/* Copies every input into out (contiguous, fresh). stack: each input
 * occupies index k of the new axis `axis`; concat: consecutive ranges. */
static bool join_copy(fc_ctx *ctx, const char *op, fc_tensor *const *xs, int n, int axis,
                      bool stack, fc_tensor *out) {
    const fc_raw *x0 = &xs[0]->raw;
    int64_t s[FC_MAX_RANK];
    fc__raw_storage_shape(x0, s);
    int64_t outer = fc__shape_product(s, axis);
    int64_t row_bytes = 0;
    for (int k = 0; k < n; k++)
        row_bytes += chunk_bytes(&xs[k]->raw, axis);
    join_job job = {xs, n, axis, fc__raw_base(&out->raw), row_bytes};
    fc__parallel_for(ctx, outer, row_bytes >= 32768 ? 1 : 32768 / row_bytes, join_rows, &job);
    /* strided inputs: copy into their window of out */
    int64_t pos = 0; /* index along out's axis where input k starts */
    for (int k = 0; k < n; k++) {
        const fc_raw *x = &xs[k]->raw;
        int64_t span = stack ? 1 : x->shape[axis];
        if (!fc__raw_is_contiguous(x)) {
            fc_raw win = out->raw; /* a plain value: no reference taken */
            win.offset += pos * out->raw.strides[axis];
            if (stack) { /* drop the new axis: the window has x's shape */
                for (int i = axis; i + 1 < out->raw.rank; i++)
                    win.strides[i] = win.strides[i + 1];
                win.rank = x->rank;
            }
            memcpy(win.shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
            fc_status st = fc__raw_copy_into(x, &win);
            if (st != FC_OK) {
                char d[160];
                fc__fail(ctx, st, "%s: cannot copy input %d (%s): %s", op, k,
                         fc__desc(xs[k], d, (int)sizeof d), fc_strerror(st));
                return false;
            }
        }
        pos += span;
    }
    return true;
}

fc_tensor *fc__join(fc_ctx *ctx, const char *op, fc_tensor *const *xs, int n, int axis, bool stack,
                    const int64_t *shape, int rank) {
    fc_tensor *out = fc__tensor_new(ctx, op, xs[0]->raw.dtype, shape, rank);
    if (!out) return NULL;
    if (!join_copy(ctx, op, xs, n, axis, stack, out)) {
        fc_release(out);
        return NULL;
    }
    return out;
}

/* ---- pad ------------------------------------------------------------------------------------ */

fc_tensor *fc__join_pad(fc_ctx *ctx, const char *op, fc_tensor *x, const int64_t *shape,
                        const int64_t *pads, double value) {
    int r = x->raw.rank;
    fc_tensor *out = fc__tensor_new(ctx, op, x->raw.dtype, shape, r);
    if (!out) return NULL;
    unsigned char v[8] = {0}, zero[8] = {0};
    fc__store_f64(x->raw.dtype, v, value);
    size_t es = fc_dtype_size(x->raw.dtype);
    if (memcmp(v, zero, es) == 0)
        memset(fc__raw_base(&out->raw), 0, fc_tensor_nbytes(out));
    else
        fc__raw_fill(&out->raw, v);
    fc_raw inner = out->raw; /* a plain value: no reference taken */
    memcpy(inner.shape, x->raw.shape, sizeof inner.shape);
    for (int i = 0; i < r; i++)
        inner.offset += pads[2 * i] * out->raw.strides[i];
    fc_status st = fc__raw_copy_into(&x->raw, &inner);
    if (st != FC_OK) {
        char d[160];
        fc__fail(ctx, st, "%s: cannot copy %s: %s", op, fc__desc(x, d, (int)sizeof d),
                 fc_strerror(st));
        fc_release(out);
        return NULL;
    }
    return out;
}
