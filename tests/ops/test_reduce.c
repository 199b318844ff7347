/* SPDX-License-Identifier: MIT */
/* test_reduce.c - the reductions of fucina/ops.h (src/ops/reduce.c)
 * against a double-precision reference written here (cumsum is in
 * test_scan.c, the reductions' gradients in test_reduce_grad.c; the error
 * checks below cover cumsum's too).
 *
 * The reference walks the logical elements in row-major order, so each
 * output sees its elements in row-major order of the reduced axes (which
 * is also the order that defines argmax's "first"). Inputs come as
 * contiguous tensors and as transposed, narrowed and broadcast views, in
 * every dtype the policy allows; the error paths check exact codes and
 * that the message names the op. Every test ends with no live tensor. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "exec/tensor.h"
#include "fc_test_data.h"
#include "fct_f64.h"
#include "fucina/ops.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static fc_ctx *new_ctx(int threads) {
    fc_ctx_opts o = {.threads = threads, .seed = 7};
    fc_ctx *ctx = fc_ctx_new(&o);
    assert_non_null(ctx);
    return ctx;
}

/* The values a tensor of dtype dt really holds for v (rounded, truncated). */
static void quantize(fc_ctx *ctx, fc_dtype dt, double *v, int64_t n) {
    fc_tensor *t = from_f64(ctx, dt, &n, 1, v);
    double *q = values(t);
    memcpy(v, q, sizeof *v * (size_t)n);
    free(q);
    fc_release(t);
}

/* ---- the reference ----------------------------------------------------------------------------
 */

enum { R_SUM, R_MEAN, R_PROD, R_MAX, R_MIN, R_ARGMAX, R_ARGMIN, R_VAR, R_STD, R_LSE, R_ALL, R_ANY };

/* out[o] for every output o (row-major over the kept axes). */
static int64_t ref_reduce(int op, const double *v, const int64_t *shape, int rank, const bool *mask,
                          int correction, double *out) {
    int64_t n = 1, nout = 1;
    for (int i = 0; i < rank; i++) {
        n *= shape[i];
        if (!mask[i]) nout *= shape[i];
    }
    int64_t *cnt = calloc((size_t)nout, sizeof *cnt), *oidx = malloc(sizeof *oidx * (size_t)n);
    double *a = calloc((size_t)nout, sizeof *a), *b = calloc((size_t)nout, sizeof *b);
    for (int64_t e = 0; e < n; e++) { /* output index of element e */
        int64_t q = e, o = 0, mul = 1;
        for (int i = rank - 1; i >= 0; i--) {
            int64_t k = q % shape[i];
            q /= shape[i];
            if (!mask[i]) {
                o += k * mul;
                mul *= shape[i];
            }
        }
        oidx[e] = o;
    }
    for (int64_t o = 0; o < nout; o++) {
        a[o] = op == R_PROD || op == R_ALL ? 1 : 0;
        b[o] = op == R_LSE ? -INFINITY : 0;
    }
    for (int64_t e = 0; e < n; e++) {
        int64_t o = oidx[e];
        double x = v[e];
        switch (op) {
        case R_SUM:
        case R_MEAN:
        case R_VAR:
        case R_STD:
            a[o] += x;
            break;
        case R_PROD:
            a[o] *= x;
            break;
        case R_MAX:
        case R_ARGMAX:
            if (cnt[o] == 0 || x > a[o] || (isnan(x) && !isnan(a[o]))) {
                a[o] = x;
                b[o] = (double)cnt[o];
            }
            break;
        case R_MIN:
        case R_ARGMIN:
            if (cnt[o] == 0 || x < a[o] || (isnan(x) && !isnan(a[o]))) {
                a[o] = x;
                b[o] = (double)cnt[o];
            }
            break;
        case R_LSE:
            b[o] = x > b[o] ? x : b[o];
            break;
        case R_ALL:
            a[o] = a[o] && x != 0;
            break;
        case R_ANY:
            a[o] = a[o] || x != 0;
            break;
        }
        cnt[o]++;
    }
    if (op == R_VAR || op == R_STD || op == R_LSE) { /* second pass */
        double *c = calloc((size_t)nout, sizeof *c);
        for (int64_t e = 0; e < n; e++) {
            int64_t o = oidx[e];
            if (op == R_LSE)
                c[o] += exp(v[e] - b[o]);
            else
                c[o] += (v[e] - a[o] / (double)cnt[o]) * (v[e] - a[o] / (double)cnt[o]);
        }
        for (int64_t o = 0; o < nout; o++) {
            if (op == R_LSE) {
                a[o] = b[o] + log(c[o]);
            } else {
                double den = (double)cnt[o] - correction;
                a[o] = c[o] / (den > 0 ? den : 0);
                if (op == R_STD) a[o] = sqrt(a[o]);
            }
        }
        free(c);
    }
    for (int64_t o = 0; o < nout; o++) {
        if (op == R_MEAN) a[o] /= (double)cnt[o];
        out[o] = op == R_ARGMAX || op == R_ARGMIN ? b[o] : a[o];
    }
    free(cnt);
    free(oidx);
    free(a);
    free(b);
    return nout;
}

static fc_tensor *run_op(fc_ctx *ctx, int op, fc_tensor *x, const int *axes, int naxes,
                         bool keepdim, int correction) {
    switch (op) {
    case R_SUM:
        return fc_sum(ctx, x, axes, naxes, keepdim);
    case R_MEAN:
        return fc_mean(ctx, x, axes, naxes, keepdim);
    case R_PROD:
        return fc_prod(ctx, x, axes, naxes, keepdim);
    case R_MAX:
        return fc_max(ctx, x, axes, naxes, keepdim);
    case R_MIN:
        return fc_min(ctx, x, axes, naxes, keepdim);
    case R_ARGMAX:
        return fc_argmax(ctx, x, axes[0], keepdim);
    case R_ARGMIN:
        return fc_argmin(ctx, x, axes[0], keepdim);
    case R_VAR:
        return fc_var(ctx, x, axes, naxes, correction, keepdim);
    case R_STD:
        return fc_std(ctx, x, axes, naxes, correction, keepdim);
    case R_LSE:
        return fc_logsumexp(ctx, x, axes, naxes, keepdim);
    case R_ALL:
        return fc_all(ctx, x, axes, naxes, keepdim);
    default:
        return fc_any(ctx, x, axes, naxes, keepdim);
    }
}

static fc_dtype expected_dtype(int op, fc_dtype in) {
    if (op == R_ALL || op == R_ANY) return FC_BOOL;
    if (op == R_ARGMAX || op == R_ARGMIN) return FC_I64;
    if (in == FC_F64) return FC_F64;
    if (in == FC_F16 || in == FC_BF16 || in == FC_F32) return FC_F32;
    return FC_I64;
}

/* Checks op on x (whose logical values are v) over axes against the
 * reference, with tolerance tol * (1 + |expected|) (0: exact), and the
 * output shape for both keepdim settings. */
static void check_op(fc_ctx *ctx, int op, fc_tensor *x, const double *v, const int *axes, int naxes,
                     int correction, double tol) {
    int rank = fc_tensor_rank(x);
    const int64_t *shape = fc_tensor_shape(x);
    bool mask[FC_MAX_RANK];
    for (int i = 0; i < rank; i++)
        mask[i] = naxes == 0;
    for (int k = 0; k < naxes; k++)
        mask[(axes[k] + rank) % rank] = true;
    double *want = malloc(sizeof *want * (size_t)fc_tensor_numel(x));
    int64_t nout = ref_reduce(op, v, shape, rank, mask, correction, want);
    for (int keep = 0; keep < 2; keep++) {
        fc_tensor *y = run_op(ctx, op, x, axes, naxes, keep, correction);
        if (!y) fail_msg("op %d failed: %s", op, fc_ctx_error(ctx));
        assert_int_equal(fc_tensor_dtype(y), expected_dtype(op, fc_tensor_dtype(x)));
        assert_int_equal(fc_tensor_numel(y), nout);
        int r = 0;
        for (int i = 0; i < rank; i++) {
            if (mask[i] && !keep) continue;
            assert_int_equal(fc_tensor_dim(y, r), mask[i] ? 1 : shape[i]);
            r++;
        }
        assert_int_equal(fc_tensor_rank(y), r == 0 ? 1 : r);
        double *got = values(y);
        for (int64_t o = 0; o < nout; o++) {
            if (isnan(want[o])) {
                if (!isnan(got[o]))
                    fail_msg("op %d output %lld: want NaN, got %g", op, (long long)o, got[o]);
                continue;
            }
            double err = fabs(got[o] - want[o]);
            if (isinf(want[o]) ? got[o] != want[o] : err > tol * (1 + fabs(want[o])))
                fail_msg("op %d output %lld: got %.17g want %.17g", op, (long long)o, got[o],
                         want[o]);
        }
        free(got);
        fc_release(y);
    }
    free(want);
}

/* ---- float reductions over axis sets, contiguous ------------------------------------------- */

static const int axis_sets[][3] = {{0}, {1}, {2}, {-1}, {0, 2}, {2, 0}, {1, 2}, {0, 1}};
static const int axis_counts[] = {1, 1, 1, 1, 2, 2, 2, 2};

static void test_reduce_float_ops_contiguous(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(2);
    int64_t shape[3] = {3, 4, 5};
    double v[60];
    fill_random(v, 60, 1, -2, 2);
    fc_dtype dts[] = {FC_F32, FC_F64, FC_F16, FC_BF16};
    for (int d = 0; d < 4; d++) {
        double q[60];
        memcpy(q, v, sizeof v);
        quantize(ctx, dts[d], q, 60);
        fc_tensor *x = from_f64(ctx, dts[d], shape, 3, q);
        double tol = dts[d] == FC_F64 ? 1e-13 : 2e-6;
        for (int op = R_SUM; op <= R_ANY; op++) {
            for (int s = 0; s < 8; s++)
                check_op(ctx, op, x, q, axis_sets[s],
                         op == R_ARGMAX || op == R_ARGMIN ? 1 : axis_counts[s], 1, tol);
            if (op != R_ARGMAX && op != R_ARGMIN) check_op(ctx, op, x, q, NULL, 0, 1, tol);
        }
        check_op(ctx, R_VAR, x, q, (const int[]){1}, 1, 0, tol);
        check_op(ctx, R_STD, x, q, NULL, 0, 2, tol);
        fc_release(x);
    }
    free_ctx(ctx);
}

/* ---- views: transposed, narrowed, broadcast -------------------------------------------------- */

/* Logical values of a view of base (values bv, shape bshape) given its
 * shape, strides and offset in elements. */
static void view_values(const double *bv, const int64_t *shape, const int64_t *st, int rank,
                        int64_t off, double *out) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    for (int64_t e = 0; e < n; e++) {
        int64_t q = e, p = off;
        for (int i = rank - 1; i >= 0; i--) {
            p += (q % shape[i]) * st[i];
            q /= shape[i];
        }
        out[e] = bv[p];
    }
}

static void test_reduce_views(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(2);
    int64_t bshape[3] = {4, 6, 5};
    double bv[120];
    fill_random(bv, 120, 2, -3, 3);
    fc_dtype dts[] = {FC_F32, FC_F64, FC_BF16, FC_I32};
    for (int d = 0; d < 4; d++) {
        double q[120];
        memcpy(q, bv, sizeof q);
        if (dts[d] == FC_I32)
            for (int i = 0; i < 120; i++)
                q[i] = floor(q[i]); /* products stay exact */
        quantize(ctx, dts[d], q, 120);
        fc_tensor *base = from_f64(ctx, dts[d], bshape, 3, q);
        /* transposed [5, 6, 4], narrowed [2, 3, 5] from (1, 2, 0), broadcast [3, 6, 5] of row 1 */
        struct {
            int64_t shape[3], st[3], off;
        } views[] = {
            {{5, 6, 4}, {1, 5, 30}, 0}, {{2, 3, 5}, {30, 5, 1}, 40}, {{3, 6, 5}, {0, 5, 1}, 30}};
        for (int k = 0; k < 3; k++) {
            fc_tensor *x =
                fc__tensor_view(ctx, "test", base, views[k].shape, views[k].st, 3, views[k].off);
            assert_non_null(x);
            double v[120];
            view_values(q, views[k].shape, views[k].st, 3, views[k].off, v);
            double tol = dts[d] == FC_F64 || dts[d] == FC_I32 ? 1e-13 : 2e-6;
            int ops[] = {R_SUM, R_MAX, R_MIN, R_ARGMAX, R_ARGMIN, R_PROD};
            for (int o = 0; o < 6; o++)
                for (int s = 0; s < 8; s++)
                    check_op(ctx, ops[o], x, v, axis_sets[s],
                             ops[o] == R_ARGMAX || ops[o] == R_ARGMIN ? 1 : axis_counts[s], 0, tol);
            if (dts[d] != FC_I32) {
                int fops[] = {R_MEAN, R_VAR, R_STD, R_LSE};
                for (int o = 0; o < 4; o++)
                    for (int s = 0; s < 8; s++)
                        check_op(ctx, fops[o], x, v, axis_sets[s], axis_counts[s], 1, tol);
            }
            check_op(ctx, R_SUM, x, v, NULL, 0, 0, tol);
            fc_release(x);
        }
        fc_release(base);
    }
    free_ctx(ctx);
}

/* ---- integers and bool --------------------------------------------------------------------------
 */

static void test_reduce_integers(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(2);
    int64_t shape[2] = {6, 7};
    double v[42];
    fill_random(v, 42, 3, -50, 50);
    for (int i = 0; i < 42; i++)
        v[i] = floor(v[i]);
    fc_dtype dts[] = {FC_I8, FC_I16, FC_I32, FC_I64, FC_U8, FC_U16};
    for (int d = 0; d < 6; d++) {
        double q[42];
        for (int i = 0; i < 42; i++)
            q[i] = dts[d] == FC_U8 || dts[d] == FC_U16 ? fabs(v[i]) : v[i];
        fc_tensor *x = from_f64(ctx, dts[d], shape, 2, q);
        int ops[] = {R_SUM, R_MAX, R_MIN, R_ARGMAX, R_ARGMIN, R_ALL, R_ANY};
        for (int o = 0; o < 7; o++) {
            check_op(ctx, ops[o], x, q, (const int[]){0}, 1, 0, 0);
            check_op(ctx, ops[o], x, q, (const int[]){1}, 1, 0, 0);
            if (ops[o] != R_ARGMAX && ops[o] != R_ARGMIN)
                check_op(ctx, ops[o], x, q, NULL, 0, 0, 0);
        }
        fc_release(x);
    }
    /* products of small integers are exact in the reference; i64 wraps */
    double small[6] = {3, -2, 5, 7, -1, 4};
    fc_tensor *x = from_f64(ctx, FC_I16, (const int64_t[]){2, 3}, 2, small);
    check_op(ctx, R_PROD, x, small, (const int[]){1}, 1, 0, 0);
    fc_release(x);
    int64_t big[3] = {INT64_MAX, 1, 1};
    x = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){3}, 1, big);
    fc_tensor *s = fc_sum(ctx, x, NULL, 0, false);
    int64_t got;
    assert_int_equal(fc_tensor_copy_out(&got, sizeof got, s), FC_OK);
    assert_true(got == INT64_MIN + 1); /* wrapped two's complement */
    fc_release(s);
    fc_release(x);
    /* bool: sum counts, all/any */
    uint8_t bits[5] = {1, 0, 1, 1, 0};
    x = fc_tensor_from_data(ctx, FC_BOOL, (const int64_t[]){5}, 1, bits);
    s = fc_sum(ctx, x, NULL, 0, false);
    assert_int_equal(fc_tensor_dtype(s), FC_I64);
    assert_int_equal(fc_tensor_copy_out(&got, sizeof got, s), FC_OK);
    assert_int_equal(got, 3);
    fc_release(s);
    double bv[5] = {1, 0, 1, 1, 0};
    check_op(ctx, R_ALL, x, bv, NULL, 0, 0, 0);
    check_op(ctx, R_ANY, x, bv, NULL, 0, 0, 0);
    check_op(ctx, R_MAX, x, bv, NULL, 0, 0, 0);
    fc_release(x);
    free_ctx(ctx);
}

/* ---- accumulation width, seed 004's demonstration ---------------------------------------------
 */

static void test_reduce_bf16_ones_sum_exactly(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(2);
    int64_t n = 300;
    fc_tensor *x = fc_ones(ctx, FC_BF16, &n, 1);
    fc_tensor *s = fc_sum(ctx, x, NULL, 0, false);
    assert_int_equal(fc_tensor_dtype(s), FC_F32);
    double got;
    assert_int_equal(fc_tensor_item(s, &got), FC_OK);
    assert_true(got == 300.0); /* a bf16 accumulator would stick at 256 */
    fc_release(s);
    fc_release(x);
    /* 2^24 + 4 f32 ones: a sequential f32 sum would stop at 2^24 */
    n = (1 << 24) + 4;
    x = fc_ones(ctx, FC_F32, &n, 1);
    s = fc_sum(ctx, x, NULL, 0, false);
    assert_int_equal(fc_tensor_item(s, &got), FC_OK);
    assert_true(got == 16777220.0);
    fc_release(s);
    s = fc_mean(ctx, x, NULL, 0, false);
    assert_int_equal(fc_tensor_item(s, &got), FC_OK);
    assert_true(got == 1.0);
    fc_release(s);
    fc_release(x);
    n = 70001;
    x = fc_ones(ctx, FC_F16, &n, 1);
    s = fc_sum(ctx, x, NULL, 0, false);
    assert_int_equal(fc_tensor_item(s, &got), FC_OK);
    assert_true(got == 70001.0);
    fc_release(s);
    fc_release(x);
    free_ctx(ctx);
}

/* ---- large shapes: chunked rows, column mode, thread independence ------------------------------
 */

static void big_case(const int64_t *shape, int rank, const int *axes, int naxes, int op) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    double *v = malloc(sizeof *v * (size_t)n);
    fill_random(v, n, 11, -1, 1);
    uint32_t *bits[2] = {NULL, NULL};
    int64_t nout = 0;
    for (int t = 0; t < 2; t++) {
        fc_ctx *ctx = new_ctx(t + 1);
        fc_tensor *x = from_f64(ctx, FC_F32, shape, rank, v);
        double *q = values(x);
        fc_tensor *y = run_op(ctx, op, x, axes, naxes, false, 1);
        assert_non_null(y);
        nout = fc_tensor_numel(y);
        bits[t] = malloc(sizeof(uint32_t) * (size_t)nout);
        assert_int_equal(fc_tensor_copy_out(bits[t], sizeof(uint32_t) * (size_t)nout, y), FC_OK);
        if (t == 0) {
            fc_release(y);
            y = NULL;
            check_op(ctx, op, x, q, axes, naxes, 1, 1e-5); /* f32 partials: ~1e-7 of sum |x| */
        }
        free(q);
        fc_release(y);
        fc_release(x);
        free_ctx(ctx);
    }
    assert_memory_equal(bits[0], bits[1], sizeof(uint32_t) * (size_t)nout);
    free(bits[0]);
    free(bits[1]);
    free(v);
}

static void test_reduce_large_deterministic(void **state) {
    (void)state;
    big_case((const int64_t[]){300000}, 1, NULL, 0, R_SUM); /* many chunks */
    big_case((const int64_t[]){300000}, 1, NULL, 0, R_VAR); /* chunk merges */
    big_case((const int64_t[]){300000}, 1, NULL, 0, R_LSE);
    big_case((const int64_t[]){3, 70000}, 2, (const int[]){1}, 1, R_SUM); /* rows, 5 chunks */
    big_case((const int64_t[]){40000, 3}, 2, (const int[]){0}, 1, R_SUM); /* columns, chunks */
    big_case((const int64_t[]){40000, 3}, 2, (const int[]){0}, 1, R_MAX);
    big_case((const int64_t[]){500, 300}, 2, (const int[]){0}, 1, R_MEAN); /* lane blocks */
    big_case((const int64_t[]){300, 2500}, 2, (const int[]){0}, 1, R_SUM); /* dense, chunks */
    big_case((const int64_t[]){3, 300, 700}, 3, (const int[]){1}, 1, R_MEAN);
    big_case((const int64_t[]){300, 700}, 2, (const int[]){0}, 1, R_VAR);
    big_case((const int64_t[]){20, 50, 40}, 3, (const int[]){0, 2}, 2, R_STD);
}

/* ---- NaN, inf and ties -------------------------------------------------------------------------
 */

static void test_reduce_nan_inf_ties(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    double v[8] = {1, 5, 5, NAN, 2, NAN, -1, 5};
    fc_tensor *x = from_f64(ctx, FC_F32, (const int64_t[]){8}, 1, v);
    fc_tensor *t = fc_argmax(ctx, x, 0, false);
    double got;
    assert_int_equal(fc_tensor_item(t, &got), FC_OK);
    assert_true(got == 3); /* the first NaN */
    fc_release(t);
    t = fc_max(ctx, x, NULL, 0, false);
    assert_int_equal(fc_tensor_item(t, &got), FC_OK);
    assert_true(isnan(got));
    fc_release(t);
    fc_release(x);
    double w[6] = {2, 7, 7, -3, 7, -3};
    x = from_f64(ctx, FC_F64, (const int64_t[]){6}, 1, w);
    t = fc_argmax(ctx, x, -1, true);
    assert_int_equal(fc_tensor_item(t, &got), FC_OK);
    assert_true(got == 1);
    assert_int_equal(fc_tensor_rank(t), 1);
    fc_release(t);
    t = fc_argmin(ctx, x, 0, false);
    assert_int_equal(fc_tensor_item(t, &got), FC_OK);
    assert_true(got == 3);
    fc_release(t);
    fc_release(x);
    double l[3] = {-INFINITY, -INFINITY, -INFINITY};
    x = from_f64(ctx, FC_F32, (const int64_t[]){3}, 1, l);
    t = fc_logsumexp(ctx, x, NULL, 0, false);
    assert_int_equal(fc_tensor_item(t, &got), FC_OK);
    assert_true(got == -INFINITY);
    fc_release(t);
    fc_release(x);
    double li[3] = {1, INFINITY, 2};
    x = from_f64(ctx, FC_F32, (const int64_t[]){3}, 1, li);
    t = fc_logsumexp(ctx, x, NULL, 0, false);
    assert_int_equal(fc_tensor_item(t, &got), FC_OK);
    assert_true(got == INFINITY);
    fc_release(t);
    fc_release(x);
    /* a far-from-zero mean: var still accurate */
    double far[4] = {1e6 + 1, 1e6 + 2, 1e6 + 3, 1e6 + 4};
    x = from_f64(ctx, FC_F32, (const int64_t[]){4}, 1, far);
    t = fc_var(ctx, x, NULL, 0, 1, false);
    assert_int_equal(fc_tensor_item(t, &got), FC_OK);
    assert_true(fabs(got - 5.0 / 3.0) < 1e-6);
    fc_release(t);
    fc_release(x);
    free_ctx(ctx);
}

/* ---- errors
 * ---------------------------------------------------------------------------------------- */

static void expect_error(fc_ctx *ctx, fc_tensor *t, fc_status code, const char *needle) {
    assert_null(t);
    assert_int_equal(fc_ctx_status(ctx), code);
    if (!strstr(fc_ctx_error(ctx), needle))
        fail_msg("message '%s' lacks '%s'", fc_ctx_error(ctx), needle);
    fc_ctx_clear_error(ctx);
}

static void test_reduce_errors(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    fc_tensor *x = fc_zeros(ctx, FC_F32, (const int64_t[]){2, 3}, 2);
    expect_error(ctx, fc_sum(ctx, x, (const int[]){2}, 1, false), FC_ERR_AXIS, "sum: axis 2");
    expect_error(ctx, fc_mean(ctx, x, (const int[]){-3}, 1, false), FC_ERR_AXIS, "mean");
    expect_error(ctx, fc_max(ctx, x, (const int[]){1, -1}, 2, false), FC_ERR_INVALID_ARG,
                 "max: axis -1 is repeated");
    expect_error(ctx, fc_prod(ctx, x, (const int[]){0, 1, 0}, 3, false), FC_ERR_RANK, "prod");
    expect_error(ctx, fc_var(ctx, x, NULL, 1, 1, false), FC_ERR_NULL_ARG, "var");
    expect_error(ctx, fc_std(ctx, x, NULL, -1, 1, false), FC_ERR_INVALID_ARG, "std");
    expect_error(ctx, fc_argmax(ctx, x, 5, false), FC_ERR_AXIS, "argmax");
    expect_error(ctx, fc_cumsum(ctx, x, 2), FC_ERR_AXIS, "cumsum");
    fc_tensor *i = fc_zeros(ctx, FC_I32, (const int64_t[]){4}, 1);
    expect_error(ctx, fc_mean(ctx, i, NULL, 0, false), FC_ERR_DTYPE, "mean: dtype i32");
    expect_error(ctx, fc_logsumexp(ctx, i, NULL, 0, false), FC_ERR_DTYPE, "logsumexp");
    expect_error(ctx, fc_var(ctx, i, NULL, 0, 1, false), FC_ERR_DTYPE, "var");
    fc_tensor *f8 = fc_zeros(ctx, FC_F8_E4M3, (const int64_t[]){4}, 1);
    expect_error(ctx, fc_sum(ctx, f8, NULL, 0, false), FC_ERR_DTYPE, "sum: dtype f8_e4m3");
    expect_error(ctx, fc_cumsum(ctx, f8, 0), FC_ERR_DTYPE, "cumsum");
    fc_tensor *a = fc_any(ctx, f8, NULL, 0, false); /* truthiness reads any scalar dtype */
    assert_non_null(a);
    fc_release(a);
    fc_tensor *qt = fc_zeros(ctx, FC_F32, (const int64_t[]){32}, 1);
    fc_tensor *q4 = fc_to(ctx, qt, FC_Q4_0);
    if (q4) {
        expect_error(ctx, fc_sum(ctx, q4, NULL, 0, false), FC_ERR_DTYPE, "sum");
        expect_error(ctx, fc_all(ctx, q4, NULL, 0, false), FC_ERR_DTYPE, "all");
        fc_release(q4);
    }
    fc_ctx_clear_error(ctx);
    /* NULL input: NULL out, the first error kept */
    fc_ctx_fail(ctx, FC_ERR_STATE, "earlier");
    assert_null(fc_sum(ctx, NULL, NULL, 0, false));
    assert_null(fc_cumsum(ctx, NULL, 0));
    assert_null(fc_argmin(ctx, NULL, 0, false));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_STATE);
    assert_string_equal(fc_ctx_error(ctx), "earlier");
    /* ...and a valid op still works with an earlier error recorded */
    fc_tensor *s = fc_sum(ctx, x, NULL, 0, false);
    assert_non_null(s);
    fc_release(s);
    fc_ctx_clear_error(ctx);
    assert_null(fc_sum(ctx, NULL, NULL, 0, false));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_NULL_ARG);
    assert_null(fc_sum(NULL, x, NULL, 0, false));
    fc_release(qt);
    fc_release(f8);
    fc_release(i);
    fc_release(x);
    free_ctx(ctx);
}

/* check_finite mode rejects a NaN result */
static void test_reduce_check_finite(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    double v[2] = {1, NAN};
    fc_tensor *x = from_f64(ctx, FC_F32, (const int64_t[]){2}, 1, v);
    fc_ctx_set_check_finite(ctx, true);
    expect_error(ctx, fc_sum(ctx, x, NULL, 0, false), FC_ERR_NON_FINITE, "sum");
    fc_ctx_set_check_finite(ctx, false);
    fc_release(x);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_float_ops_contiguous),
        cmocka_unit_test(test_reduce_views),
        cmocka_unit_test(test_reduce_integers),
        cmocka_unit_test(test_reduce_bf16_ones_sum_exactly),
        cmocka_unit_test(test_reduce_large_deterministic),
        cmocka_unit_test(test_reduce_nan_inf_ties),
        cmocka_unit_test(test_reduce_errors),
        cmocka_unit_test(test_reduce_check_finite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
