/* SPDX-License-Identifier: MIT */
/* scan.c - cumsum's kernel: inclusive prefix sums along one axis (the
 * public op and its rule are in src/ops/scan.c).
 *
 * Rows along the axis go through the row driver (rowwise.h); each row is
 * scanned sequentially, so the result does not depend on the thread
 * count. The running sum is wide like the reductions': f16/bf16/f32 inputs
 * accumulate in double and every prefix is rounded once to the f32 result;
 * f64 in f64; integers and bool in wrapping 64-bit integers (i64 result).
 * The reverse scan (suffix sums) is cumsum's backward. */
#include "exec/kernels/scan.h"

#include "exec/kernels/copy.h"
#include "exec/kernels/rowwise.h"

typedef struct scan_arg {
    fc_dtype ct;
    bool reverse;
} scan_arg;

/* rows[0]: input rows, rows[1]: output rows, [nrows, dim] each */
static void scan_rows(void *arg, int64_t group, int64_t row0, int64_t nrows, int64_t dim,
                      void *const *rows) {
    const scan_arg *a = arg;
    for (int64_t t = 0; t < nrows; t++) {
        int64_t b = a->reverse ? dim - 1 : 0, step = a->reverse ? -1 : 1;
        if (a->ct == FC_F32) {
            const float *x = (const float *)rows[0] + t * dim;
            float *y = (float *)rows[1] + t * dim;
            double acc = 0;
            for (int64_t k = 0, j = b; k < dim; k++, j += step)
                y[j] = (float)(acc += x[j]);
        } else if (a->ct == FC_F64) {
            const double *x = (const double *)rows[0] + t * dim;
            double *y = (double *)rows[1] + t * dim, acc = 0;
            for (int64_t k = 0, j = b; k < dim; k++, j += step)
                y[j] = acc += x[j];
        } else {
            const int64_t *x = (const int64_t *)rows[0] + t * dim;
            int64_t *y = (int64_t *)rows[1] + t * dim;
            uint64_t acc = 0;
            for (int64_t k = 0, j = b; k < dim; k++, j += step) {
                acc += (uint64_t)x[j];
                memcpy(&y[j], &acc, sizeof acc); /* two's complement wrap */
            }
        }
    }
}

fc_tensor *fc__cumsum(fc_ctx *ctx, const char *op, fc_tensor *x, int axis, bool reverse) {
    fc_dtype dt = x->raw.dtype;
    fc_dtype ct = fc_dtype_is_float(dt) ? fc__rw_float_ct(dt) : FC_I64;
    fc_tensor *xc = fc__copy_contiguous_ref(ctx, "fc_contiguous", x);
    if (!xc) return NULL;
    fc_tensor *out = fc__tensor_new(ctx, op, ct, x->raw.shape, x->raw.rank);
    if (!out) {
        fc_release(xc);
        return NULL;
    }
    scan_arg arg = {ct, reverse};
    fc__rows_job job = {
        .nin = 1, .nout = 1, .ops = {&xc->raw, &out->raw}, .ct = ct, .fn = scan_rows, .arg = &arg};
    fc__shape_axis_geometry(x->raw.shape, x->raw.rank, axis, &job.outer, &job.dim, &job.inner);
    fc_status st = fc__rows_run(ctx, op, &job);
    fc_release(xc);
    if (st != FC_OK) {
        fc_release(out);
        return NULL;
    }
    return out;
}
