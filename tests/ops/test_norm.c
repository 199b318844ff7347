/* SPDX-License-Identifier: MIT */
/* test_norm.c - layer_norm and rms_norm, forward and backward, against
 * double-precision references written here, with and without weight and
 * bias, rows past the one-pass threshold, means far from zero, a transposed
 * input and every float dtype; thread-count independence of the gradients;
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

/* layer_norm (rms: rms_norm) over the last axis; w, b may be NULL */
static void ref_norm(const double *x, int64_t rows, int64_t dim, const double *w, const double *b,
                     double eps, bool rms, double *y) {
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * dim;
        double mu = 0, var = 0;
        if (!rms) {
            for (int64_t j = 0; j < dim; j++)
                mu += xr[j];
            mu /= (double)dim;
        }
        for (int64_t j = 0; j < dim; j++)
            var += (xr[j] - mu) * (xr[j] - mu);
        double rs = 1 / sqrt(var / (double)dim + eps);
        for (int64_t j = 0; j < dim; j++)
            y[r * dim + j] = (xr[j] - mu) * rs * (w ? w[j] : 1) + (b ? b[j] : 0);
    }
}

/* gradients of sum(y * g) by the textbook formulas */
static void ref_norm_grad(const double *x, int64_t rows, int64_t dim, const double *w, double eps,
                          bool rms, const double *g, double *dx, double *dw, double *db) {
    for (int64_t j = 0; j < dim; j++)
        dw[j] = db[j] = 0;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * dim, *gr = g + r * dim;
        double mu = 0, var = 0, sa = 0, sb = 0;
        if (!rms) {
            for (int64_t j = 0; j < dim; j++)
                mu += xr[j];
            mu /= (double)dim;
        }
        for (int64_t j = 0; j < dim; j++)
            var += (xr[j] - mu) * (xr[j] - mu);
        double rs = 1 / sqrt(var / (double)dim + eps);
        for (int64_t j = 0; j < dim; j++) {
            double gy = gr[j] * (w ? w[j] : 1), xh = (xr[j] - mu) * rs;
            sa += gy;
            sb += gy * xh;
            dw[j] += gr[j] * xh;
            db[j] += gr[j];
        }
        for (int64_t j = 0; j < dim; j++) {
            double gy = gr[j] * (w ? w[j] : 1), xh = (xr[j] - mu) * rs;
            dx[r * dim + j] = rs * (gy - (rms ? 0 : sa / (double)dim) - xh * sb / (double)dim);
        }
    }
}

/* ---- layer_norm / rms_norm forward and backward ---------------------------------------------- */

static void norm_case(fc_ctx *ctx, fc_dtype dt, const int64_t *shape, int rank, bool rms,
                      bool has_w, bool has_b, double offset) {
    int64_t dim = shape[rank - 1], n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    int64_t rows = n / dim;
    double *xv, *wv = NULL, *bv = NULL, *gv;
    fc_tensor *x = random_tensor(ctx, dt, shape, rank, 31, offset - 2, offset + 2, &xv);
    fc_tensor *w = has_w ? random_tensor(ctx, dt, &dim, 1, 32, 0.5, 1.5, &wv) : NULL;
    fc_tensor *b = has_b ? random_tensor(ctx, dt, &dim, 1, 33, -1, 1, &bv) : NULL;
    fc_tensor *g = random_tensor(ctx, fc__grad_dtype(dt), shape, rank, 34, -1, 1, &gv);
    fc_tensor *leaves[3] = {x, w, b};
    for (int k = 0; k < 3; k++)
        if (leaves[k]) assert_int_equal(fc_requires_grad(leaves[k], true), FC_OK);
    double eps = 1e-5;
    fc_tensor *y = rms ? fc_rms_norm(ctx, x, w, eps) : fc_layer_norm(ctx, x, w, b, eps);
    if (!y) fail_msg("%s", fc_ctx_error(ctx));
    assert_int_equal(fc_tensor_dtype(y), dt);
    double *want = malloc(sizeof *want * (size_t)n), *got = values(y);
    ref_norm(xv, rows, dim, wv, rms ? NULL : bv, eps, rms, want);
    double tol = dtype_tol(dt) * (offset != 0 && dt == FC_F32 ? 20 : 4);
    expect_close(got, want, n, tol, rms ? "rms_norm" : "layer_norm");
    free(got);
    assert_int_equal(fc_backward_with(ctx, y, g, false), FC_OK);
    double *dw = malloc(sizeof *dw * (size_t)dim), *db = malloc(sizeof *db * (size_t)dim);
    ref_norm_grad(xv, rows, dim, wv, eps, rms, gv, want, dw, db);
    double gtol = dt == FC_F64 ? 1e-10 : dt == FC_F32 ? 1e-4 * (offset != 0 ? 10 : 1) : 5e-2;
    got = values(fc_grad(x));
    expect_close(got, want, n, gtol, "norm dx");
    free(got);
    if (w) {
        got = values(fc_grad(w));
        expect_close(got, dw, dim, gtol, "norm dw");
        free(got);
    }
    if (b && !rms) {
        got = values(fc_grad(b));
        expect_close(got, db, dim, gtol, "norm db");
        free(got);
    }
    free(dw);
    free(db);
    free(want);
    free(xv);
    free(wv);
    free(bv);
    free(gv);
    fc_release(y);
    fc_release(g);
    fc_release(x);
    fc_release(w);
    fc_release(b);
}

static void test_norm_forward_backward(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(2);
    fc_dtype dts[] = {FC_F32, FC_F64, FC_F16, FC_BF16};
    for (int d = 0; d < 4; d++)
        for (int rms = 0; rms < 2; rms++) {
            norm_case(ctx, dts[d], (const int64_t[]){7, 33}, 2, rms, true, true, 0);
            norm_case(ctx, dts[d], (const int64_t[]){4, 3, 300}, 3, rms, false, false, 0);
            norm_case(ctx, dts[d], (const int64_t[]){5, 16}, 2, rms, true, false, 0);
            norm_case(ctx, dts[d], (const int64_t[]){130, 9}, 2, rms, false, true, 0);
        }
    /* rows past the one-pass threshold */
    norm_case(ctx, FC_F32, (const int64_t[]){2, 40000}, 2, false, true, true, 0);
    norm_case(ctx, FC_F32, (const int64_t[]){2, 40000}, 2, true, true, false, 0);
    norm_case(ctx, FC_F32, (const int64_t[]){2, 40000}, 2, false, false, false, 1e3);
    /* a mean far from zero: the two-pass variance keeps its accuracy */
    norm_case(ctx, FC_F32, (const int64_t[]){6, 64}, 2, false, true, true, 1e3);
    norm_case(ctx, FC_F64, (const int64_t[]){6, 64}, 2, false, true, true, 1e6);
    free_ctx(ctx);
}

/* x is a transposed view: the input is made contiguous first */
static void test_norm_strided_input(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(2);
    double *bv;
    fc_tensor *base = random_tensor(ctx, FC_F32, (const int64_t[]){8, 5}, 2, 41, -2, 2, &bv);
    fc_tensor *xt =
        fc__tensor_view(ctx, "test", base, (const int64_t[]){5, 8}, (const int64_t[]){1, 5}, 2, 0);
    double tv[40], want[40];
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 8; j++)
            tv[i * 8 + j] = bv[j * 5 + i];
    fc_tensor *y = fc_layer_norm(ctx, xt, NULL, NULL, 1e-5);
    ref_norm(tv, 5, 8, NULL, NULL, 1e-5, false, want);
    double *got = values(y);
    expect_close(got, want, 40, 1e-5, "layer_norm of a transposed view");
    free(got);
    fc_release(y);
    free(bv);
    fc_release(xt);
    fc_release(base);
    free_ctx(ctx);
}

/* ---- the same bits for one and two threads --------------------------------------------------- */

static void test_norm_thread_independent(void **state) {
    (void)state;
    int64_t shape[2] = {300, 1000}, n = 300000;
    uint32_t *bits[2][3];
    for (int t = 0; t < 2; t++) {
        fc_ctx *ctx = new_ctx(t + 1);
        double *xv, *gv, *wv;
        fc_tensor *x = random_tensor(ctx, FC_F32, shape, 2, 51, -3, 3, &xv);
        fc_tensor *g = random_tensor(ctx, FC_F32, shape, 2, 52, -1, 1, &gv);
        fc_tensor *w = random_tensor(ctx, FC_F32, &shape[1], 1, 53, 0.5, 1.5, &wv);
        fc_tensor *b = fc_zeros(ctx, FC_F32, &shape[1], 1);
        assert_int_equal(fc_requires_grad(x, true), FC_OK);
        assert_int_equal(fc_requires_grad(w, true), FC_OK);
        assert_int_equal(fc_requires_grad(b, true), FC_OK);
        fc_tensor *ln = fc_layer_norm(ctx, x, w, b, 1e-5);
        assert_int_equal(fc_backward_with(ctx, ln, g, false), FC_OK);
        fc_tensor *outs[3] = {fc_grad(x), fc_grad(w), fc_grad(b)};
        for (int k = 0; k < 3; k++) {
            size_t nb = sizeof(uint32_t) * (size_t)fc_tensor_numel(outs[k]);
            bits[t][k] = malloc(nb);
            assert_int_equal(fc_tensor_copy_out(bits[t][k], nb, outs[k]), FC_OK);
        }
        free(xv);
        free(gv);
        free(wv);
        fc_release(ln);
        fc_release(x);
        fc_release(g);
        fc_release(w);
        fc_release(b);
        free_ctx(ctx);
    }
    int64_t sizes[3] = {n, shape[1], shape[1]};
    for (int k = 0; k < 3; k++) {
        assert_memory_equal(bits[0][k], bits[1][k], sizeof(uint32_t) * (size_t)sizes[k]);
        free(bits[0][k]);
        free(bits[1][k]);
    }
}

/* ---- errors --------------------------------------------------------------------------------- */

static void expect_error(fc_ctx *ctx, fc_tensor *t, fc_status code, const char *needle) {
    assert_null(t);
    assert_int_equal(fc_ctx_status(ctx), code);
    if (!strstr(fc_ctx_error(ctx), needle))
        fail_msg("message '%s' lacks '%s'", fc_ctx_error(ctx), needle);
    fc_ctx_clear_error(ctx);
}

static void test_norm_errors(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    fc_tensor *x = fc_zeros(ctx, FC_F32, (const int64_t[]){2, 3}, 2);
    fc_tensor *xi = fc_zeros(ctx, FC_I32, (const int64_t[]){2, 3}, 2);
    fc_tensor *w3 = fc_ones(ctx, FC_F32, (const int64_t[]){3}, 1);
    fc_tensor *w2 = fc_ones(ctx, FC_F32, (const int64_t[]){2}, 1);
    fc_tensor *w3d = fc_ones(ctx, FC_F64, (const int64_t[]){3}, 1);
    fc_tensor *w13 = fc_ones(ctx, FC_F32, (const int64_t[]){1, 3}, 2);
    expect_error(ctx, fc_layer_norm(ctx, xi, NULL, NULL, 1e-5), FC_ERR_DTYPE, "layer_norm");
    expect_error(ctx, fc_layer_norm(ctx, x, w2, NULL, 1e-5), FC_ERR_SHAPE_MISMATCH,
                 "layer_norm: weight f32[2]");
    expect_error(ctx, fc_layer_norm(ctx, x, w3, w13, 1e-5), FC_ERR_SHAPE_MISMATCH,
                 "layer_norm: bias");
    expect_error(ctx, fc_layer_norm(ctx, x, w3d, NULL, 1e-5), FC_ERR_DTYPE, "layer_norm: weight");
    expect_error(ctx, fc_rms_norm(ctx, x, w2, 1e-5), FC_ERR_SHAPE_MISMATCH, "rms_norm");
    expect_error(ctx, fc_rms_norm(ctx, x, NULL, -1), FC_ERR_INVALID_ARG, "rms_norm: eps");
    expect_error(ctx, fc_layer_norm(ctx, x, NULL, NULL, NAN), FC_ERR_INVALID_ARG, "layer_norm");
    fc_ctx_fail(ctx, FC_ERR_STATE, "earlier");
    assert_null(fc_layer_norm(ctx, NULL, w3, NULL, 1e-5));
    assert_null(fc_rms_norm(ctx, NULL, NULL, 1e-5));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_STATE);
    fc_tensor *ok = fc_layer_norm(ctx, x, w3, NULL, 1e-5); /* works despite the old error */
    assert_non_null(ok);
    fc_release(ok);
    fc_ctx_clear_error(ctx);
    fc_release(x);
    fc_release(xi);
    fc_release(w3);
    fc_release(w2);
    fc_release(w3d);
    fc_release(w13);
    free_ctx(ctx);
}

/* ---- gradient checks (fc_gradcheck, f64 central differences) ------------------------------ */

enum op { OP_LAYER_NORM, OP_LAYER_NORM_BARE, OP_RMS_NORM };

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
    case OP_LAYER_NORM:
        y = fc_layer_norm(ctx, x, in[1], in[2], 1e-5);
        break;
    case OP_LAYER_NORM_BARE:
        y = fc_layer_norm(ctx, x, NULL, NULL, 1e-3);
        break;
    case OP_RMS_NORM:
        y = fc_rms_norm(ctx, x, in[1], 1e-5);
        break;
    }
    (void)n;
    fc_release(x);
    return y;
}

static void check(fc_ctx *ctx, gc_case *c, fc_tensor *const *in, int n) {
    fct_gradcheck_ok(ctx, apply, c, in, n, c->name, (int)c->view);
}

static void test_grad_norms(void **state) {
    (void)state;
    fc_ctx *ctx = fct_gc_ctx();
    const int64_t leaf2[4][2] = {{3, 6}, {6, 3}, {3, 8}, {1, 6}};
    int64_t d6 = 6;
    for (int v = FCT_V_CONTIG; v <= FCT_V_BROADCAST; v++) {
        fc_scope_begin(ctx);
        fc_tensor *in[3] = {fct_random_f64(ctx, leaf2[v], 2, 300, -2, 2),
                            fct_random_f64(ctx, &d6, 1, 301, 0.5, 1.5),
                            fct_random_f64(ctx, &d6, 1, 302, -1, 1)};
        gc_case ln = {"layer_norm", OP_LAYER_NORM, (enum fct_view)v, {0}, 0, false, 0, 0, NULL};
        check(ctx, &ln, in, 3);
        gc_case rms = {"rms_norm", OP_RMS_NORM, (enum fct_view)v, {0}, 0, false, 0, 0, NULL};
        check(ctx, &rms, in, 2);
        gc_case bare = {
            "layer_norm bare", OP_LAYER_NORM_BARE, (enum fct_view)v, {0}, 0, false, 0, 0, NULL};
        check(ctx, &bare, in, 1);
        fc_scope_end(ctx);
    }
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_norm_forward_backward),
        cmocka_unit_test(test_norm_strided_input),
        cmocka_unit_test(test_norm_thread_independent),
        cmocka_unit_test(test_norm_errors),
        cmocka_unit_test(test_grad_norms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
