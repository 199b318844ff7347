/* SPDX-License-Identifier: MIT */
/* test_softmax.c - softmax and log_softmax, forward and backward, against
 * double-precision references written here, on contiguous rows, non-last
 * axes, transposed views and every float dtype; thread-count independence;
 * the error paths; and fc_gradcheck (f64) of both on contiguous and strided
 * inputs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ag/tape.h"
#include "fc_test_data.h"
#include "fct_f64.h"
#include "fct_grad.h"
#include "fucina/autograd.h"
#include "fucina/ops.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static fc_ctx *new_ctx(int threads) {
    fc_ctx_opts o = {.threads = threads, .seed = 3};
    fc_ctx *ctx = fc_ctx_new(&o);
    assert_non_null(ctx);
    return ctx;
}

/* A tensor of dtype dt and the values it really holds. */
static fc_tensor *random_tensor(fc_ctx *ctx, fc_dtype dt, const int64_t *shape, int rank,
                                uint64_t seed, double lo, double hi, double **vals) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    double *v = malloc(sizeof *v * (size_t)n);
    fill_random(v, n, seed, lo, hi);
    fc_tensor *t = from_f64(ctx, dt, shape, rank, v);
    free(v);
    *vals = values(t);
    return t;
}

static double dtype_tol(fc_dtype dt) {
    return dt == FC_F64 ? 1e-12 : dt == FC_F32 ? 2e-6 : dt == FC_F16 ? 2e-3 : 1.6e-2;
}

static void expect_close(const double *got, const double *want, int64_t n, double tol,
                         const char *what) {
    for (int64_t i = 0; i < n; i++) {
        if ((isnan(want[i]) && isnan(got[i])) || got[i] == want[i]) continue;
        if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
            fail_msg("%s[%lld]: got %.10g want %.10g (tol %g)", what, (long long)i, got[i], want[i],
                     tol);
    }
}

/* ---- references ------------------------------------------------------------------------------ */

static void geometry(const int64_t *shape, int rank, int axis, int64_t *outer, int64_t *dim,
                     int64_t *inner) {
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++)
        *outer *= shape[i];
    for (int i = axis + 1; i < rank; i++)
        *inner *= shape[i];
    *dim = shape[axis];
}

static void ref_softmax(const double *x, const int64_t *shape, int rank, int axis, bool lg,
                        double *y) {
    int64_t outer, dim, inner;
    geometry(shape, rank, axis, &outer, &dim, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double m = -INFINITY, s = 0;
            for (int64_t d = 0; d < dim; d++)
                m = fmax(m, x[(o * dim + d) * inner + i]);
            for (int64_t d = 0; d < dim; d++)
                s += exp(x[(o * dim + d) * inner + i] - m);
            for (int64_t d = 0; d < dim; d++) {
                double v = x[(o * dim + d) * inner + i] - m;
                y[(o * dim + d) * inner + i] = lg ? v - log(s) : exp(v) / s;
            }
        }
}

/* dx of softmax / log_softmax given y (the reference output) and g */
static void ref_softmax_grad(const double *y, const double *g, const int64_t *shape, int rank,
                             int axis, bool lg, double *dx) {
    int64_t outer, dim, inner;
    geometry(shape, rank, axis, &outer, &dim, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double s = 0;
            for (int64_t d = 0; d < dim; d++) {
                int64_t e = (o * dim + d) * inner + i;
                s += lg ? g[e] : g[e] * y[e];
            }
            for (int64_t d = 0; d < dim; d++) {
                int64_t e = (o * dim + d) * inner + i;
                dx[e] = lg ? g[e] - exp(y[e]) * s : y[e] * (g[e] - s);
            }
        }
}

/* ---- softmax forward ---------------------------------------------------------------------------
 */

static void softmax_case(fc_ctx *ctx, fc_dtype dt, const int64_t *shape, int rank, int axis,
                         bool lg, uint64_t seed) {
    double *xv;
    fc_tensor *x = random_tensor(ctx, dt, shape, rank, seed, -6, 6, &xv);
    fc_tensor *y = lg ? fc_log_softmax(ctx, x, axis) : fc_softmax(ctx, x, axis);
    if (!y) fail_msg("%s", fc_ctx_error(ctx));
    assert_int_equal(fc_tensor_dtype(y), dt);
    int64_t n = fc_tensor_numel(x);
    double *want = malloc(sizeof *want * (size_t)n), *got = values(y);
    ref_softmax(xv, shape, rank, (axis + rank) % rank, lg, want);
    expect_close(got, want, n, dtype_tol(dt) * (lg ? 4 : 1), lg ? "log_softmax" : "softmax");
    free(want);
    free(got);
    free(xv);
    fc_release(y);
    fc_release(x);
}

static void test_softmax_forward(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(2);
    fc_dtype dts[] = {FC_F32, FC_F64, FC_F16, FC_BF16};
    for (int d = 0; d < 4; d++)
        for (int lg = 0; lg < 2; lg++) {
            softmax_case(ctx, dts[d], (const int64_t[]){5, 37}, 2, -1, lg, 1);
            softmax_case(ctx, dts[d], (const int64_t[]){5, 37}, 2, 0, lg, 2);
            softmax_case(ctx, dts[d], (const int64_t[]){2, 3, 19}, 3, 1, lg, 3);
            softmax_case(ctx, dts[d], (const int64_t[]){3, 2000}, 2, 1, lg, 4);
            softmax_case(ctx, dts[d], (const int64_t[]){40, 3}, 2, 0, lg, 5);
            softmax_case(ctx, dts[d], (const int64_t[]){7}, 1, 0, lg, 6);
            softmax_case(ctx, dts[d], (const int64_t[]){2, 40000}, 2, 1, lg, 7); /* online */
        }
    free_ctx(ctx);
}

static void test_softmax_transposed_view(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(2);
    double *bv;
    fc_tensor *base = random_tensor(ctx, FC_F32, (const int64_t[]){6, 9}, 2, 8, -3, 3, &bv);
    fc_tensor *xt =
        fc__tensor_view(ctx, "test", base, (const int64_t[]){9, 6}, (const int64_t[]){1, 9}, 2, 0);
    double tv[54], want[54];
    for (int i = 0; i < 9; i++)
        for (int j = 0; j < 6; j++)
            tv[i * 6 + j] = bv[j * 9 + i];
    for (int axis = 0; axis < 2; axis++)
        for (int lg = 0; lg < 2; lg++) {
            fc_tensor *y = lg ? fc_log_softmax(ctx, xt, axis) : fc_softmax(ctx, xt, axis);
            assert_non_null(y);
            assert_true(fc_tensor_is_contiguous(y));
            ref_softmax(tv, (const int64_t[]){9, 6}, 2, axis, lg, want);
            double *got = values(y);
            expect_close(got, want, 54, 1e-5, "softmax of a transposed view");
            free(got);
            fc_release(y);
        }
    free(bv);
    fc_release(xt);
    fc_release(base);
    free_ctx(ctx);
}

static void test_softmax_masked_and_nan_rows(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    double v[12] = {1,         -INFINITY, 2,         -INFINITY, /* masked row */
                    -INFINITY, -INFINITY, -INFINITY, -INFINITY, /* all masked: NaN */
                    1,         NAN,       2,         3};        /* NaN: NaN row */
    fc_tensor *x = from_f64(ctx, FC_F32, (const int64_t[]){3, 4}, 2, v);
    fc_tensor *y = fc_softmax(ctx, x, 1);
    double *got = values(y);
    double e = exp(-1.0);
    assert_true(fabs(got[0] - e / (1 + e)) < 1e-6 && got[1] == 0 && got[3] == 0);
    assert_true(fabs(got[2] - 1 / (1 + e)) < 1e-6);
    for (int i = 4; i < 12; i++)
        assert_true(isnan(got[i]));
    free(got);
    fc_release(y);
    y = fc_log_softmax(ctx, x, 1);
    got = values(y);
    assert_true(got[1] == -INFINITY && fabs(got[2] + log1p(e)) < 1e-6);
    for (int i = 8; i < 12; i++)
        assert_true(isnan(got[i]));
    free(got);
    fc_release(y);
    fc_release(x);
    /* a long (online path) row whose first blocks are all masked */
    int64_t long_shape[2] = {2, 40000};
    double *lv = malloc(sizeof *lv * 80000), *lw = malloc(sizeof *lw * 80000);
    for (int i = 0; i < 80000; i++)
        lv[i] = (i % 40000) < 9000 ? -INFINITY : (i < 40000 ? 0.001 * (i % 97) : -INFINITY);
    lv[79999] = 2.0; /* second row: all masked but its last element */
    x = from_f64(ctx, FC_F32, long_shape, 2, lv);
    for (int lg = 0; lg < 2; lg++) {
        y = lg ? fc_log_softmax(ctx, x, 1) : fc_softmax(ctx, x, 1);
        ref_softmax(lv, long_shape, 2, 1, lg, lw);
        got = values(y);
        expect_close(got, lw, 80000, 1e-5, "masked long row");
        free(got);
        fc_release(y);
    }
    free(lv);
    free(lw);
    fc_release(x);
    /* huge logits do not overflow */
    double big[3] = {1000, 999, -1000};
    x = from_f64(ctx, FC_F32, (const int64_t[]){3}, 1, big);
    y = fc_softmax(ctx, x, 0);
    got = values(y);
    assert_true(fabs(got[0] - 1 / (1 + e)) < 1e-6 && got[2] == 0);
    free(got);
    fc_release(y);
    fc_release(x);
    free_ctx(ctx);
}

/* ---- softmax backward ------------------------------------------------------------------------ */

static void softmax_grad_case(fc_ctx *ctx, const int64_t *shape, int rank, int axis, bool lg,
                              fc_dtype dt) {
    double *xv, *gv;
    fc_tensor *x = random_tensor(ctx, dt, shape, rank, 21, -4, 4, &xv);
    fc_tensor *g = random_tensor(ctx, FC_F32, shape, rank, 22, -1, 1, &gv);
    assert_int_equal(fc_requires_grad(x, true), FC_OK);
    fc_tensor *y = lg ? fc_log_softmax(ctx, x, axis) : fc_softmax(ctx, x, axis);
    assert_non_null(y);
    assert_int_equal(fc_backward_with(ctx, y, g, false), FC_OK);
    fc_tensor *dx = fc_grad(x);
    assert_non_null(dx);
    assert_int_equal(fc_tensor_dtype(dx), FC_F32);
    int64_t n = fc_tensor_numel(x);
    double *yr = malloc(sizeof *yr * (size_t)n), *want = malloc(sizeof *want * (size_t)n);
    ref_softmax(xv, shape, rank, axis, lg, yr);
    ref_softmax_grad(yr, gv, shape, rank, axis, lg, want);
    double *got = values(dx);
    expect_close(got, want, n, dt == FC_F32 ? 1e-5 : 2e-2, "softmax backward");
    free(got);
    free(want);
    free(yr);
    free(xv);
    free(gv);
    fc_release(y);
    fc_release(g);
    fc_release(x);
}

static void test_softmax_backward(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(2);
    for (int lg = 0; lg < 2; lg++) {
        softmax_grad_case(ctx, (const int64_t[]){6, 50}, 2, 1, lg, FC_F32);
        softmax_grad_case(ctx, (const int64_t[]){6, 50}, 2, 0, lg, FC_F32);
        softmax_grad_case(ctx, (const int64_t[]){3, 4, 5}, 3, 1, lg, FC_F32);
        softmax_grad_case(ctx, (const int64_t[]){4, 33}, 2, 1, lg, FC_BF16);
        softmax_grad_case(ctx, (const int64_t[]){4, 33}, 2, 0, lg, FC_F16);
    }
    free_ctx(ctx);
}

/* ---- the same bits for one and two threads --------------------------------------------------- */

static void test_softmax_thread_independent(void **state) {
    (void)state;
    int64_t shape[2] = {300, 1000}, n = 300000;
    uint32_t *bits[2];
    for (int t = 0; t < 2; t++) {
        fc_ctx *ctx = new_ctx(t + 1);
        double *xv;
        fc_tensor *x = random_tensor(ctx, FC_F32, shape, 2, 51, -3, 3, &xv);
        assert_int_equal(fc_requires_grad(x, true), FC_OK);
        fc_tensor *s = fc_softmax(ctx, x, 1);
        size_t nb = sizeof(uint32_t) * (size_t)fc_tensor_numel(s);
        bits[t] = malloc(nb);
        assert_int_equal(fc_tensor_copy_out(bits[t], nb, s), FC_OK);
        free(xv);
        fc_release(s);
        fc_release(x);
        free_ctx(ctx);
    }
    assert_memory_equal(bits[0], bits[1], sizeof(uint32_t) * (size_t)n);
    free(bits[0]);
    free(bits[1]);
}

/* ---- errors --------------------------------------------------------------------------------- */

static void expect_error(fc_ctx *ctx, fc_tensor *t, fc_status code, const char *needle) {
    assert_null(t);
    assert_int_equal(fc_ctx_status(ctx), code);
    if (!strstr(fc_ctx_error(ctx), needle))
        fail_msg("message '%s' lacks '%s'", fc_ctx_error(ctx), needle);
    fc_ctx_clear_error(ctx);
}

static void test_softmax_errors(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    fc_tensor *x = fc_zeros(ctx, FC_F32, (const int64_t[]){2, 3}, 2);
    fc_tensor *xi = fc_zeros(ctx, FC_I32, (const int64_t[]){2, 3}, 2);
    expect_error(ctx, fc_softmax(ctx, xi, 0), FC_ERR_DTYPE, "softmax: dtype i32");
    expect_error(ctx, fc_log_softmax(ctx, x, 2), FC_ERR_AXIS, "log_softmax: axis 2");
    expect_error(ctx, fc_softmax(ctx, x, -3), FC_ERR_AXIS, "softmax");
    fc_ctx_fail(ctx, FC_ERR_STATE, "earlier");
    assert_null(fc_softmax(ctx, NULL, 0));
    assert_null(fc_log_softmax(ctx, NULL, 0));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_STATE);
    fc_tensor *ok = fc_softmax(ctx, x, 1); /* works despite the old error */
    assert_non_null(ok);
    fc_release(ok);
    fc_ctx_clear_error(ctx);
    fc_release(x);
    fc_release(xi);
    free_ctx(ctx);
}

/* ---- gradient checks (fc_gradcheck, f64 central differences) ------------------------------ */

enum op { OP_SOFTMAX, OP_LOG_SOFTMAX };

typedef struct gc_case {
    const char *name;
    enum op op;
    enum fct_view view;
    int axes[3], naxes;
    bool keepdim;
    int correction; /* var/std; the axis for cumsum/softmax */
    fc_reduction red;
    fc_tensor *targets; /* cross_entropy */
} gc_case;

static fc_tensor *apply(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    const gc_case *c = user;
    fc_tensor *x = fct_viewed(ctx, in[0], c->view), *y = NULL;
    assert_non_null(x);
    assert_true(c->view == FCT_V_CONTIG || !fc_tensor_is_contiguous(x)); /* a real strided input */
    switch (c->op) {
    case OP_SOFTMAX:
        y = fc_softmax(ctx, x, c->correction);
        break;
    case OP_LOG_SOFTMAX:
        y = fc_log_softmax(ctx, x, c->correction);
        break;
    }
    (void)n;
    fc_release(x);
    return y;
}

static void check(fc_ctx *ctx, gc_case *c, fc_tensor *const *in, int n) {
    fct_gradcheck_ok(ctx, apply, c, in, n, c->name, (int)c->view);
}

/* The leaf shape for a 3-D reduction input under each view. */
static const int64_t leaf3[4][3] = {{3, 4, 5}, {4, 3, 5}, {3, 4, 7}, {1, 4, 5}};
static void test_grad_softmax(void **state) {
    (void)state;
    fc_ctx *ctx = fct_gc_ctx();
    for (int op = OP_SOFTMAX; op <= OP_LOG_SOFTMAX; op++)
        for (int v = FCT_V_CONTIG; v <= FCT_V_BROADCAST; v++)
            for (int axis = 0; axis < 3; axis++) {
                gc_case c = {"softmax", (enum op)op, (enum fct_view)v, {0}, 0, false, axis,
                             0,         NULL};
                fc_scope_begin(ctx);
                fc_tensor *x = fct_random_f64(ctx, leaf3[v], 3, 200 + (uint64_t)axis, -2, 2);
                check(ctx, &c, &x, 1);
                fc_scope_end(ctx);
            }
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_forward),
        cmocka_unit_test(test_softmax_transposed_view),
        cmocka_unit_test(test_softmax_masked_and_nan_rows),
        cmocka_unit_test(test_softmax_backward),
        cmocka_unit_test(test_softmax_thread_independent),
        cmocka_unit_test(test_softmax_errors),
        cmocka_unit_test(test_grad_softmax),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
