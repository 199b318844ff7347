/* SPDX-License-Identifier: MIT */
/* test_batch_norm.c - batch_norm (training and eval) and group_norm:
 * forward against double-precision references written here, with and
 * without weight/bias, rank 2 to 5, means far from zero, strided input and
 * every float dtype; the running-statistics update against hand-computed
 * values (momentum 0.1, unbiased variance) and its generation bump; eval
 * mode leaving the running statistics untouched, and a failed call too;
 * f32 gradients against the f64 ones (whose correctness
 * test_batch_norm_grad.c checks with fc_gradcheck); the same bits for one
 * and two threads; every error with its code. */
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

static fc_ctx *new_ctx(int threads) {
    fc_ctx_opts o = {.threads = threads, .seed = 7};
    fc_ctx *ctx = fc_ctx_new(&o);
    assert_non_null(ctx);
    return ctx;
}

static void expect_close(const double *got, const double *want, int64_t n, double tol,
                         const char *what) {
    for (int64_t i = 0; i < n; i++) {
        if (got[i] == want[i]) continue;
        if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
            fail_msg("%s[%lld]: got %.10g want %.10g (tol %g)", what, (long long)i, got[i], want[i],
                     tol);
    }
}

static fc_tensor *rand_t(fc_ctx *ctx, fc_dtype dt, const int64_t *shape, int rank, uint64_t seed,
                         double lo, double hi) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    double *v = malloc(sizeof *v * (size_t)n);
    fill_random(v, n, seed, lo, hi);
    fc_tensor *t = from_f64(ctx, dt, shape, rank, v);
    free(v);
    return t;
}

/* ---- references ------------------------------------------------------------------------------ */

/* x [N, C, S]; groups 0: batch_norm with batch stats (rm NULL) or the
 * running ones; groups > 0: group_norm. w, b NULL allowed. */
static void ref_norm(const double *x, int64_t N, int64_t C, int64_t S, int64_t groups,
                     const double *w, const double *b, const double *rm, const double *rv,
                     double eps, double *y) {
    int64_t nstat = groups ? N * groups : C, cg = groups ? C / groups : 1;
    for (int64_t st = 0; st < nstat; st++) {
        /* the (n, c) planes of this stat */
        int64_t n0 = groups ? st / groups : 0, n1 = groups ? n0 + 1 : N;
        int64_t c0 = groups ? (st % groups) * cg : st, c1 = groups ? c0 + cg : st + 1;
        double mean = 0, var = 0, m = (double)((n1 - n0) * (c1 - c0) * S);
        for (int64_t n = n0; n < n1; n++)
            for (int64_t c = c0; c < c1; c++)
                for (int64_t s = 0; s < S; s++)
                    mean += x[(n * C + c) * S + s];
        mean /= m;
        for (int64_t n = n0; n < n1; n++)
            for (int64_t c = c0; c < c1; c++)
                for (int64_t s = 0; s < S; s++) {
                    double d = x[(n * C + c) * S + s] - mean;
                    var += d * d;
                }
        var /= m;
        if (rm) {
            mean = rm[st];
            var = rv[st];
        }
        for (int64_t n = n0; n < n1; n++)
            for (int64_t c = c0; c < c1; c++)
                for (int64_t s = 0; s < S; s++) {
                    int64_t i = (n * C + c) * S + s;
                    y[i] = (x[i] - mean) / sqrt(var + eps) * (w ? w[c] : 1) + (b ? b[c] : 0);
                }
    }
}

/* ---- forward against the reference ----------------------------------------------------------- */

typedef struct fwd_case {
    int64_t shape[5];
    int rank;
    int64_t groups; /* 0: batch_norm */
    bool train, affine, strided;
    double offset;
} fwd_case;

static double dtype_tol(fc_dtype dt) {
    return dt == FC_F64 ? 1e-12 : dt == FC_F32 ? 1e-5 : dt == FC_F16 ? 4e-3 : 3e-2;
}

static void fwd_check(fc_ctx *ctx, const fwd_case *fc, fc_dtype dt) {
    fc_scope_begin(ctx);
    int64_t N = fc->shape[0], C = fc->shape[1], S = 1;
    for (int i = 2; i < fc->rank; i++)
        S *= fc->shape[i];
    fc_tensor *x;
    if (fc->strided) { /* the last two axes transposed (rank >= 3) */
        int64_t sh[5];
        memcpy(sh, fc->shape, sizeof sh);
        sh[fc->rank - 2] = fc->shape[fc->rank - 1];
        sh[fc->rank - 1] = fc->shape[fc->rank - 2];
        fc_tensor *base = rand_t(ctx, dt, sh, fc->rank, 11, fc->offset - 2, fc->offset + 2);
        x = fc_transpose(ctx, base, fc->rank - 2, fc->rank - 1);
        assert_false(fc_tensor_is_contiguous(x));
    } else {
        x = rand_t(ctx, dt, fc->shape, fc->rank, 11, fc->offset - 2, fc->offset + 2);
    }
    fc_tensor *w = fc->affine ? rand_t(ctx, dt, &C, 1, 12, 0.5, 1.5) : NULL;
    fc_tensor *b = fc->affine ? rand_t(ctx, dt, &C, 1, 13, -1, 1) : NULL;
    fc_tensor *rm = fc->groups || fc->train ? NULL : rand_t(ctx, dt, &C, 1, 14, -1, 1);
    fc_tensor *rv = fc->groups || fc->train ? NULL : rand_t(ctx, dt, &C, 1, 15, 0.5, 2);
    fc_tensor *y = fc->groups ? fc_group_norm(ctx, x, fc->groups, w, b, 1e-5)
                              : fc_batch_norm(ctx, x, w, b, rm, rv, fc->train, 0.1, 1e-5);
    if (!y) fail_msg("%s", fc_ctx_error(ctx));
    assert_int_equal(fc_tensor_dtype(y), dt);
    double *xv = values(x), *wv = w ? values(w) : NULL, *bv = b ? values(b) : NULL;
    double *rmv = rm ? values(rm) : NULL, *rvv = rv ? values(rv) : NULL;
    int64_t n = N * C * S;
    double *want = malloc(sizeof *want * (size_t)n), *got = values(y);
    ref_norm(xv, N, C, S, fc->groups, wv, bv, rmv, rvv, 1e-5, want);
    /* |mean| ~ 1e3: the centring itself rounds at 1e3 times the precision */
    double tol = dtype_tol(dt) * (fc->offset == 0 ? 1 : dt == FC_F32 ? 20 : 1000);
    expect_close(got, want, n, tol, fc->groups ? "group_norm" : "batch_norm");
    free(got);
    free(want);
    free(xv);
    free(wv);
    free(bv);
    free(rmv);
    free(rvv);
    fc_scope_end(ctx);
}

static void test_batch_norm_forward_vs_reference(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(2);
    const fwd_case cases[] = {
        {{4, 3, 5, 6}, 4, 0, true, true, false, 0},
        {{1, 2, 7, 3}, 4, 0, true, false, false, 0}, /* batch of one */
        {{5, 4}, 2, 0, true, true, false, 0},        /* rank 2: [N, C] */
        {{2, 3, 4, 2, 3}, 5, 0, true, true, true, 0},
        {{3, 6, 4, 4}, 4, 0, false, true, false, 0}, /* eval */
        {{2, 3, 5}, 3, 0, false, false, true, 0},
        {{3, 4, 33, 17}, 4, 0, true, true, false, 1e3}, /* mean far from zero */
        {{2, 6, 3, 5}, 4, 1, true, true, false, 0},     /* group_norm, 1, 2, 3, 6 groups */
        {{2, 6, 3, 5}, 4, 2, true, false, true, 0},
        {{1, 6, 4, 3}, 4, 3, true, true, false, 0},
        {{3, 6, 2}, 3, 6, true, true, false, 0},
        {{4, 8}, 2, 4, true, true, false, 0},
        {{2, 4, 40, 40}, 4, 2, true, true, false, 1e3},
    };
    const fc_dtype dts[] = {FC_F32, FC_F64, FC_F16, FC_BF16};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int d = 0; d < 4; d++) {
            if (cases[i].offset != 0 && (dts[d] == FC_F16 || dts[d] == FC_BF16)) continue;
            fwd_check(ctx, &cases[i], dts[d]);
        }
    free_ctx(ctx);
}

/* ---- running statistics ---------------------------------------------------------------------- */

static void test_batch_norm_running_stats(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    fc_scope_begin(ctx);
    /* x [2, 2, 1, 2]: channel 0 holds 1 2 | 3 4, channel 1 holds 0 0 | 0 4 */
    const double xv[8] = {1, 2, 0, 0, 3, 4, 0, 4};
    fc_tensor *x = from_f64(ctx, FC_F32, (const int64_t[]){2, 2, 1, 2}, 4, xv);
    fc_tensor *rm = fc_zeros(ctx, FC_F32, (const int64_t[]){2}, 1);
    fc_tensor *rv = fc_ones(ctx, FC_F32, (const int64_t[]){2}, 1);
    uint32_t gm = fc_tensor_generation(rm), gv = fc_tensor_generation(rv);
    fc_tensor *y = fc_batch_norm(ctx, x, NULL, NULL, rm, rv, true, 0.1, 0);
    assert_non_null(y);
    assert_true(fc_tensor_generation(rm) != gm);
    assert_true(fc_tensor_generation(rv) != gv);
    /* means 2.5 and 1; unbiased variances 5/3 and 4 */
    double *m = values(rm), *v = values(rv);
    expect_close(m, (const double[]){0.25, 0.1}, 2, 1e-7, "running_mean");
    expect_close(v, (const double[]){0.9 + 0.1 * 5.0 / 3.0, 0.9 + 0.4}, 2, 1e-7, "running_var");
    free(m);
    free(v);
    /* normalised with the biased variance: channel 0 (x - 2.5) / sqrt(1.25) */
    double *yv = values(y);
    expect_close(yv,
                 (const double[]){-1.5 / sqrt(1.25), -0.5 / sqrt(1.25), -1 / sqrt(3.0),
                                  -1 / sqrt(3.0), 0.5 / sqrt(1.25), 1.5 / sqrt(1.25),
                                  -1 / sqrt(3.0), 3 / sqrt(3.0)},
                 8, 1e-6, "training output");
    free(yv);
    /* a second step compounds */
    assert_non_null(fc_batch_norm(ctx, x, NULL, NULL, rm, rv, true, 0.1, 0));
    m = values(rm);
    expect_close(m, (const double[]){0.25 * 0.9 + 0.25, 0.1 * 0.9 + 0.1}, 2, 1e-7,
                 "running_mean, second step");
    free(m);
    /* eval mode reads them and leaves them alone */
    gm = fc_tensor_generation(rm);
    fc_tensor *ye = fc_batch_norm(ctx, x, NULL, NULL, rm, rv, false, 0.1, 1e-5);
    assert_non_null(ye);
    assert_int_equal(fc_tensor_generation(rm), gm);
    /* a failed call (bad weight) changes nothing */
    fc_tensor *w3 = fc_ones(ctx, FC_F32, (const int64_t[]){3}, 1);
    gv = fc_tensor_generation(rv);
    assert_null(fc_batch_norm(ctx, x, w3, NULL, rm, rv, true, 0.1, 0));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_SHAPE_MISMATCH);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_tensor_generation(rv), gv);
    /* momentum 0 keeps them, 1 replaces them; f32 stats serve an f16 x */
    fc_tensor *xh = fc_to(ctx, x, FC_F16);
    assert_non_null(fc_batch_norm(ctx, xh, NULL, NULL, rm, rv, true, 1.0, 0));
    m = values(rm);
    v = values(rv);
    expect_close(m, (const double[]){2.5, 1}, 2, 1e-7, "momentum 1 mean");
    expect_close(v, (const double[]){5.0 / 3.0, 4}, 2, 1e-6, "momentum 1 var");
    free(m);
    free(v);
    /* strided running statistics: every other element of a [4] */
    fc_tensor *r4 = fc_zeros(ctx, FC_F64, (const int64_t[]){4}, 1);
    fc_tensor *rms =
        fc__tensor_view(ctx, "test", r4, (const int64_t[]){2}, (const int64_t[]){2}, 1, 0);
    fc_tensor *rvs = fc_ones(ctx, FC_F64, (const int64_t[]){2}, 1);
    assert_false(fc_tensor_is_contiguous(rms));
    assert_non_null(fc_batch_norm(ctx, fc_to(ctx, x, FC_F64), NULL, NULL, rms, rvs, true, 0.5, 0));
    m = values(r4);
    expect_close(m, (const double[]){1.25, 0, 0.5, 0}, 4, 1e-12, "strided running_mean");
    free(m);
    fc_scope_end(ctx);
    free_ctx(ctx);
}

/* ---- f32 gradients against f64 ones ---------------------------------------------------------- */

/* gradients of x, w, b for dtype dt; out[3] receive f64 copies (malloc'd) */
static void grads(fc_ctx *ctx, fc_dtype dt, const int64_t *shape, int rank, int64_t groups,
                  bool train, double **out) {
    fc_scope_begin(ctx);
    int64_t C = shape[1];
    fc_tensor *x = rand_t(ctx, dt, shape, rank, 21, -2, 2);
    fc_tensor *w = rand_t(ctx, dt, &C, 1, 22, 0.5, 1.5), *b = rand_t(ctx, dt, &C, 1, 23, -1, 1);
    fc_tensor *rm = rand_t(ctx, dt, &C, 1, 24, -0.5, 0.5), *rv = rand_t(ctx, dt, &C, 1, 25, 0.5, 2);
    fc_tensor *leaves[3] = {x, w, b};
    for (int k = 0; k < 3; k++)
        assert_int_equal(fc_requires_grad(leaves[k], true), FC_OK);
    fc_tensor *y = groups ? fc_group_norm(ctx, x, groups, w, b, 1e-5)
                          : fc_batch_norm(ctx, x, w, b, rm, rv, train, 0.1, 1e-5);
    assert_non_null(y);
    fc_tensor *g = rand_t(ctx, fc__grad_dtype(dt), shape, rank, 26, -1, 1);
    assert_int_equal(fc_backward_with(ctx, y, g, false), FC_OK);
    for (int k = 0; k < 3; k++)
        out[k] = values(fc_grad(leaves[k]));
    fc_scope_end(ctx);
}

static void test_batch_norm_f32_grad_vs_f64(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(2);
    const int64_t shapes[3][4] = {{4, 3, 6, 5}, {2, 6, 9, 9}, {8, 4, 1, 1}};
    const int64_t groups[4] = {0, 0, 2, 3};
    for (int s = 0; s < 3; s++)
        for (int k = 0; k < 4; k++) {
            if (groups[k] && shapes[s][1] % groups[k]) continue;
            bool train = k != 1;
            double *g32[3], *g64[3];
            grads(ctx, FC_F32, shapes[s], 4, groups[k], train, g32);
            grads(ctx, FC_F64, shapes[s], 4, groups[k], train, g64);
            int64_t n = shapes[s][0] * shapes[s][1] * shapes[s][2] * shapes[s][3];
            expect_close(g32[0], g64[0], n, 2e-4, "dx");
            expect_close(g32[1], g64[1], shapes[s][1], 2e-4, "dweight");
            expect_close(g32[2], g64[2], shapes[s][1], 2e-4, "dbias");
            for (int q = 0; q < 3; q++) {
                free(g32[q]);
                free(g64[q]);
            }
        }
    free_ctx(ctx);
}

/* ---- the same bits for one and two threads -------------------------------------------------- */

static void test_batch_norm_thread_independent(void **state) {
    (void)state;
    const int64_t shape[4] = {8, 16, 30, 30}, n = 8 * 16 * 30 * 30, C = 16;
    float *bits[2][2][4];
    for (int t = 0; t < 2; t++) {
        fc_ctx *ctx = new_ctx(t + 1);
        fc_scope_begin(ctx);
        fc_tensor *x = rand_t(ctx, FC_F32, shape, 4, 31, -3, 3);
        fc_tensor *w = rand_t(ctx, FC_F32, &C, 1, 32, 0.5, 1.5);
        fc_tensor *b = fc_zeros(ctx, FC_F32, &C, 1);
        fc_tensor *rm = fc_zeros(ctx, FC_F32, &C, 1), *rv = fc_ones(ctx, FC_F32, &C, 1);
        assert_int_equal(fc_requires_grad(x, true), FC_OK);
        assert_int_equal(fc_requires_grad(w, true), FC_OK);
        assert_int_equal(fc_requires_grad(b, true), FC_OK);
        for (int k = 0; k < 2; k++) {
            fc_tensor *leaves[3] = {x, w, b};
            fc_zero_grad(leaves, 3);
            fc_tensor *y = k ? fc_group_norm(ctx, x, 4, w, b, 1e-5)
                             : fc_batch_norm(ctx, x, w, b, rm, rv, true, 0.1, 1e-5);
            assert_non_null(y);
            assert_int_equal(fc_backward_with(ctx, y, fc_cos(ctx, fc_detach(ctx, y)), false),
                             FC_OK);
            fc_tensor *outs[4] = {y, fc_grad(x), fc_grad(w), k ? fc_grad(b) : rv};
            for (int q = 0; q < 4; q++) {
                size_t nb = sizeof(float) * (size_t)fc_tensor_numel(outs[q]);
                bits[t][k][q] = malloc(nb);
                assert_int_equal(fc_tensor_copy_out(bits[t][k][q], nb, outs[q]), FC_OK);
            }
        }
        fc_scope_end(ctx);
        free_ctx(ctx);
    }
    const int64_t sizes[4] = {n, n, C, C};
    for (int k = 0; k < 2; k++)
        for (int q = 0; q < 4; q++) {
            assert_memory_equal(bits[0][k][q], bits[1][k][q], sizeof(float) * (size_t)sizes[q]);
            free(bits[0][k][q]);
            free(bits[1][k][q]);
        }
}

/* ---- saved values ------------------------------------------------------------------------- */

/* The weight is saved for the backward: changing it in place between the
 * forward and the backward is refused, naming the op. */
static void test_batch_norm_saved_weight_modified(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    fc_scope_begin(ctx);
    const int64_t C = 3;
    for (int k = 0; k < 2; k++) {
        fc_tensor *x = rand_t(ctx, FC_F32, (const int64_t[]){2, 3, 4}, 3, 51, -1, 1);
        fc_tensor *w = rand_t(ctx, FC_F32, &C, 1, 52, 0.5, 1.5);
        assert_int_equal(fc_requires_grad(w, true), FC_OK);
        fc_tensor *y = k ? fc_group_norm(ctx, x, 3, w, NULL, 1e-5)
                         : fc_batch_norm(ctx, x, w, NULL, NULL, NULL, true, 0.1, 1e-5);
        assert_non_null(y);
        fc_no_grad_begin(ctx);
        assert_int_equal(fc_mul_scalar_(w, 2), FC_OK);
        fc_no_grad_end(ctx);
        fc_tensor *g = fc_ones(ctx, FC_F32, (const int64_t[]){2, 3, 4}, 3);
        assert_int_equal(fc_backward_with(ctx, y, g, false), FC_ERR_SAVED_MODIFIED);
        const char *want = k ? "group_norm" : "batch_norm";
        if (!strstr(fc_ctx_error(ctx), want))
            fail_msg("message '%s' lacks '%s'", fc_ctx_error(ctx), want);
        fc_ctx_clear_error(ctx);
    }
    fc_scope_end(ctx);
    free_ctx(ctx);
}

/* ---- errors --------------------------------------------------------------------------------- */

static void expect_error(fc_ctx *ctx, fc_tensor *t, fc_status code, const char *needle) {
    if (t) fail_msg("expected %s (%s), got a tensor", fc_status_name(code), needle);
    assert_int_equal(fc_ctx_status(ctx), code);
    if (!strstr(fc_ctx_error(ctx), needle))
        fail_msg("message '%s' lacks '%s'", fc_ctx_error(ctx), needle);
    fc_ctx_clear_error(ctx);
}

static void test_batch_norm_errors(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    fc_scope_begin(ctx);
    fc_tensor *x = fc_zeros(ctx, FC_F32, (const int64_t[]){2, 3, 4}, 3);
    fc_tensor *x1 = fc_zeros(ctx, FC_F32, (const int64_t[]){3}, 1);
    fc_tensor *xi = fc_zeros(ctx, FC_I32, (const int64_t[]){2, 3, 4}, 3);
    fc_tensor *single = fc_zeros(ctx, FC_F32, (const int64_t[]){1, 3, 1, 1}, 4);
    fc_tensor *c3 = fc_ones(ctx, FC_F32, (const int64_t[]){3}, 1);
    fc_tensor *c3b = fc_ones(ctx, FC_F32, (const int64_t[]){3}, 1);
    fc_tensor *c2 = fc_ones(ctx, FC_F32, (const int64_t[]){2}, 1);
    fc_tensor *c3d = fc_ones(ctx, FC_F64, (const int64_t[]){3}, 1);
    fc_tensor *c13 = fc_ones(ctx, FC_F32, (const int64_t[]){1, 3}, 2);
    fc_tensor *pg = fc_param_zeros(ctx, FC_F32, (const int64_t[]){3}, 1);
    float ro_data[3] = {0, 0, 0};
    fc_tensor *ro = fc_tensor_from_borrowed(ctx, FC_F32, (const int64_t[]){3}, 1, ro_data, true);
    fc_tensor *bc =
        fc_expand(ctx, fc_ones(ctx, FC_F32, (const int64_t[]){1}, 1), (const int64_t[]){3}, 1);
    expect_error(ctx, fc_batch_norm(ctx, x1, NULL, NULL, NULL, NULL, true, 0.1, 1e-5), FC_ERR_RANK,
                 "batch_norm: input f32[3] must be [N,C,...]");
    expect_error(ctx, fc_batch_norm(ctx, xi, NULL, NULL, NULL, NULL, true, 0.1, 1e-5), FC_ERR_DTYPE,
                 "batch_norm: dtype i32");
    expect_error(ctx, fc_batch_norm(ctx, x, c2, NULL, NULL, NULL, true, 0.1, 1e-5),
                 FC_ERR_SHAPE_MISMATCH, "batch_norm: weight f32[2] must have shape [3]");
    expect_error(ctx, fc_batch_norm(ctx, x, NULL, c13, NULL, NULL, true, 0.1, 1e-5),
                 FC_ERR_SHAPE_MISMATCH, "batch_norm: bias");
    expect_error(ctx, fc_batch_norm(ctx, x, c3d, NULL, NULL, NULL, true, 0.1, 1e-5), FC_ERR_DTYPE,
                 "batch_norm: weight dtype f64 differs from x's f32");
    expect_error(ctx, fc_batch_norm(ctx, x, NULL, NULL, c2, c3, true, 0.1, 1e-5),
                 FC_ERR_SHAPE_MISMATCH, "running_mean f32[2]");
    expect_error(ctx, fc_batch_norm(ctx, x, NULL, NULL, c3, c3d, false, 0.1, 1e-5), FC_ERR_DTYPE,
                 "running_var dtype f64");
    expect_error(ctx, fc_batch_norm(ctx, x, NULL, NULL, pg, c3, true, 0.1, 1e-5),
                 FC_ERR_INVALID_ARG, "running_mean f32[3] requires grad");
    expect_error(ctx, fc_batch_norm(ctx, x, NULL, NULL, c3, pg, false, 0.1, 1e-5),
                 FC_ERR_INVALID_ARG, "running_var f32[3] requires grad");
    expect_error(ctx, fc_batch_norm(ctx, x, NULL, NULL, c3, NULL, true, 0.1, 1e-5),
                 FC_ERR_INVALID_ARG, "given together (running_var is NULL)");
    expect_error(ctx, fc_batch_norm(ctx, x, NULL, NULL, NULL, NULL, false, 0.1, 1e-5),
                 FC_ERR_INVALID_ARG, "eval mode");
    expect_error(ctx, fc_batch_norm(ctx, x, NULL, NULL, ro, c3, true, 0.1, 1e-5), FC_ERR_READ_ONLY,
                 "running_mean f32[3] is read-only");
    expect_error(ctx, fc_batch_norm(ctx, x, NULL, NULL, c3, bc, true, 0.1, 1e-5),
                 FC_ERR_UNSUPPORTED_VIEW, "broadcast view");
    expect_error(ctx, fc_batch_norm(ctx, x, NULL, NULL, c3, c3b, true, 1.5, 1e-5),
                 FC_ERR_INVALID_ARG, "momentum 1.5");
    expect_error(ctx, fc_batch_norm(ctx, x, NULL, NULL, c3, c3b, true, NAN, 1e-5),
                 FC_ERR_INVALID_ARG, "momentum");
    expect_error(ctx, fc_batch_norm(ctx, x, NULL, NULL, NULL, NULL, true, 0.1, -1),
                 FC_ERR_INVALID_ARG, "batch_norm: eps -1");
    expect_error(ctx, fc_batch_norm(ctx, single, NULL, NULL, NULL, NULL, true, 0.1, 1e-5),
                 FC_ERR_INVALID_SHAPE, "more than 1 value per channel, got input f32[1,3,1,1]");
    /* read-only running statistics are fine in eval mode, and one value per channel too */
    fc_tensor *ok = fc_batch_norm(ctx, single, NULL, NULL, ro, c3, false, 0.1, 1e-5);
    assert_non_null(ok);
    expect_error(ctx, fc_group_norm(ctx, x, 2, NULL, NULL, 1e-5), FC_ERR_INVALID_ARG,
                 "group_norm: num_groups 2 must be >= 1 and divide the 3 channels of f32[2,3,4]");
    expect_error(ctx, fc_group_norm(ctx, x, 0, NULL, NULL, 1e-5), FC_ERR_INVALID_ARG,
                 "num_groups 0");
    expect_error(ctx, fc_group_norm(ctx, x1, 1, NULL, NULL, 1e-5), FC_ERR_RANK, "group_norm");
    expect_error(ctx, fc_group_norm(ctx, xi, 1, NULL, NULL, 1e-5), FC_ERR_DTYPE, "group_norm");
    expect_error(ctx, fc_group_norm(ctx, x, 3, c2, NULL, 1e-5), FC_ERR_SHAPE_MISMATCH,
                 "group_norm: weight");
    expect_error(ctx, fc_group_norm(ctx, x, 3, NULL, c3d, 1e-5), FC_ERR_DTYPE, "group_norm: bias");
    expect_error(ctx, fc_group_norm(ctx, x, 3, NULL, NULL, INFINITY), FC_ERR_INVALID_ARG, "eps");
    expect_error(ctx, fc_batch_norm(ctx, NULL, c3, NULL, NULL, NULL, true, 0.1, 1e-5),
                 FC_ERR_NULL_ARG, "batch_norm");
    expect_error(ctx, fc_group_norm(ctx, NULL, 1, NULL, NULL, 1e-5), FC_ERR_NULL_ARG, "group_norm");
    assert_null(fc_batch_norm(NULL, x, NULL, NULL, NULL, NULL, true, 0.1, 1e-5));
    fc_ctx_fail(ctx, FC_ERR_STATE, "earlier");
    assert_null(fc_batch_norm(ctx, NULL, NULL, NULL, NULL, NULL, true, 0.1, 1e-5));
    assert_null(fc_group_norm(ctx, NULL, 1, NULL, NULL, 1e-5));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_STATE);
    fc_ctx_clear_error(ctx);
    fc_scope_end(ctx);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_norm_forward_vs_reference),
        cmocka_unit_test(test_batch_norm_running_stats),
        cmocka_unit_test(test_batch_norm_f32_grad_vs_f64),
        cmocka_unit_test(test_batch_norm_thread_independent),
        cmocka_unit_test(test_batch_norm_saved_weight_modified),
        cmocka_unit_test(test_batch_norm_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
