/* SPDX-License-Identifier: MIT */
/* test_loss.c - cross_entropy and mse_loss, forward and backward, against
 * double-precision references written here: every reduction, ignore_index,
 * label smoothing, targets of every integer dtype, 1-D logits, 16-bit
 * logits, broadcasting, and the error paths (FC_ERR_INDEX names the bad
 * target and its position); and fc_gradcheck (f64) of both on contiguous
 * and strided inputs, and of the layer_norm -> softmax -> cross_entropy
 * chain. */
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

static fc_ctx *new_ctx(int threads) {
    fc_ctx_opts o = {.threads = threads, .seed = 5};
    fc_ctx *ctx = fc_ctx_new(&o);
    assert_non_null(ctx);
    return ctx;
}

static void expect_close(const double *got, const double *want, int64_t n, double tol,
                         const char *what) {
    for (int64_t i = 0; i < n; i++) {
        if ((isnan(want[i]) && isnan(got[i])) || got[i] == want[i]) continue;
        if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
            fail_msg("%s[%lld]: got %.10g want %.10g", what, (long long)i, got[i], want[i]);
    }
}

/* ---- cross_entropy reference -------------------------------------------------------------------
 */

typedef struct ce_case {
    int64_t n, c;
    fc_reduction red;
    bool use_ignore;
    int64_t ignore;
    double eps;
} ce_case;

/* losses per row (0 for ignored) and dlogits of sum(out * g) */
static double ref_ce(const ce_case *k, const double *x, const int64_t *t, const double *g,
                     double *rows, double *dx) {
    int64_t count = 0;
    for (int64_t i = 0; i < k->n; i++)
        count += !(k->use_ignore && t[i] == k->ignore);
    double total = 0;
    for (int64_t i = 0; i < k->n; i++) {
        const double *xr = x + i * k->c;
        double m = -INFINITY, s = 0, sx = 0;
        for (int64_t j = 0; j < k->c; j++)
            m = fmax(m, xr[j]);
        for (int64_t j = 0; j < k->c; j++) {
            s += exp(xr[j] - m);
            sx += xr[j];
        }
        double lse = m + log(s);
        bool ign = k->use_ignore && t[i] == k->ignore;
        /* (1 - eps) * nll + eps * mean over classes of -log p */
        rows[i] = ign ? 0 : (1 - k->eps) * (lse - xr[t[i]]) + k->eps * (lse - sx / (double)k->c);
        total += rows[i];
        double sc = ign                        ? 0
                    : k->red == FC_REDUCE_NONE ? g[i]
                    : k->red == FC_REDUCE_MEAN ? g[0] / (double)count
                                               : g[0];
        for (int64_t j = 0; j < k->c; j++) {
            double tgt = (j == t[i] ? 1 - k->eps : 0) + k->eps / (double)k->c;
            dx[i * k->c + j] = sc * (exp(xr[j] - lse) - tgt);
        }
    }
    return k->red == FC_REDUCE_MEAN ? total / (double)count : total;
}

static void ce_run(fc_ctx *ctx, const ce_case *k, fc_dtype dt, fc_dtype tdt, uint64_t seed) {
    int64_t nx = k->n * k->c;
    double *xv = malloc(sizeof *xv * (size_t)nx), *tv = malloc(sizeof *tv * (size_t)k->n);
    fill_random(xv, nx, seed, -4, 4);
    int64_t *ti = malloc(sizeof *ti * (size_t)k->n);
    for (int64_t i = 0; i < k->n; i++) {
        ti[i] = (int64_t)(fc_test_splitmix64(&seed) % (uint64_t)k->c);
        if (k->use_ignore && i % 3 == 1) ti[i] = k->ignore;
        tv[i] = (double)ti[i];
    }
    bool flat = k->n == 1 && k->c == 5; /* [C] logits with one target */
    int64_t xshape[2] = {k->n, k->c};
    fc_tensor *x = flat ? from_f64(ctx, dt, &xshape[1], 1, xv) : from_f64(ctx, dt, xshape, 2, xv);
    double *xq = values(x);
    fc_tensor *t = from_f64(ctx, tdt, &k->n, 1, tv);
    assert_int_equal(fc_requires_grad(x, true), FC_OK);
    fc_ce_opts o = {.reduction = k->red,
                    .use_ignore = k->use_ignore,
                    .ignore_index = k->ignore,
                    .label_smoothing = k->eps};
    fc_tensor *y = fc_cross_entropy(ctx, x, t, &o);
    if (!y) fail_msg("%s", fc_ctx_error(ctx));
    assert_int_equal(fc_tensor_dtype(y), dt);
    int64_t ny = k->red == FC_REDUCE_NONE ? k->n : 1;
    assert_int_equal(fc_tensor_numel(y), ny);
    double *gv = malloc(sizeof *gv * (size_t)ny);
    fill_random(gv, ny, seed + 1, 0.5, 2);
    fc_tensor *g = from_f64(ctx, fc__grad_dtype(dt), fc_tensor_shape(y), 1, gv);
    double *rows = malloc(sizeof *rows * (size_t)k->n), *dx = malloc(sizeof *dx * (size_t)nx);
    double want = ref_ce(k, xq, ti, gv, rows, dx);
    double *got = values(y);
    double tol = dt == FC_F64 ? 1e-12 : dt == FC_F32 ? 1e-5 : 1e-2;
    if (k->red == FC_REDUCE_NONE)
        expect_close(got, rows, k->n, tol, "cross_entropy rows");
    else
        expect_close(got, &want, 1, tol, "cross_entropy");
    free(got);
    assert_int_equal(fc_backward_with(ctx, y, g, false), FC_OK);
    got = values(fc_grad(x));
    expect_close(got, dx, nx,
                 dt == FC_F64   ? 1e-12
                 : dt == FC_F32 ? 1e-5
                                : 2e-2,
                 "cross_entropy dlogits");
    free(got);
    free(xv);
    free(tv);
    free(ti);
    free(xq);
    free(gv);
    free(rows);
    free(dx);
    fc_release(y);
    fc_release(g);
    fc_release(t);
    fc_release(x);
}

static void test_cross_entropy_matches_reference(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(2);
    fc_reduction reds[3] = {FC_REDUCE_MEAN, FC_REDUCE_SUM, FC_REDUCE_NONE};
    for (int r = 0; r < 3; r++) {
        ce_case plain = {.n = 9, .c = 7, .red = reds[r]};
        ce_case ign = {.n = 9, .c = 7, .red = reds[r], .use_ignore = true, .ignore = -100};
        ce_case smooth = {
            .n = 9, .c = 7, .red = reds[r], .use_ignore = true, .ignore = 3, .eps = 0.1};
        ce_case wide = {.n = 5, .c = 1500, .red = reds[r], .eps = 0.25};
        ce_case flat = {.n = 1, .c = 5, .red = reds[r], .eps = 0.05};
        ce_case *cases[5] = {&plain, &ign, &smooth, &wide, &flat};
        for (int k = 0; k < 5; k++) {
            ce_run(ctx, cases[k], FC_F32, FC_I64, 100 + (uint64_t)k);
            ce_run(ctx, cases[k], FC_F64, FC_I32, 200 + (uint64_t)k);
        }
        ce_run(ctx, &smooth, FC_BF16, FC_I16, 300);
        ce_run(ctx, &plain, FC_F16, FC_U8, 301);
        ce_run(ctx, &ign, FC_F32, FC_I8, 302);
        ce_run(ctx, &plain, FC_F32, FC_U16, 303);
    }
    free_ctx(ctx);
}

static void test_cross_entropy_all_ignored_is_nan(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    fc_tensor *x = fc_zeros(ctx, FC_F32, (const int64_t[]){2, 3}, 2);
    int64_t tv[2] = {-1, -1};
    fc_tensor *t = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){2}, 1, tv);
    fc_ce_opts o = {.use_ignore = true, .ignore_index = -1};
    fc_tensor *y = fc_cross_entropy(ctx, x, t, &o);
    double v;
    assert_int_equal(fc_tensor_item(y, &v), FC_OK);
    assert_true(isnan(v));
    fc_release(y);
    o.reduction = FC_REDUCE_SUM;
    y = fc_cross_entropy(ctx, x, t, &o);
    assert_int_equal(fc_tensor_item(y, &v), FC_OK);
    assert_true(v == 0);
    fc_release(y);
    /* NULL opts: mean, no ignore (so -1 is out of range) */
    assert_null(fc_cross_entropy(ctx, x, t, NULL));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_INDEX);
    fc_ctx_clear_error(ctx);
    fc_release(t);
    fc_release(x);
    free_ctx(ctx);
}

/* ---- mse_loss
 * ------------------------------------------------------------------------------------ */

static void test_mse_loss(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(2);
    double av[12], bv[4];
    fill_random(av, 12, 61, -2, 2);
    fill_random(bv, 4, 62, -2, 2);
    fc_dtype dts[3] = {FC_F32, FC_F64, FC_BF16};
    for (int d = 0; d < 3; d++) {
        fc_tensor *a = from_f64(ctx, dts[d], (const int64_t[]){3, 4}, 2, av);
        fc_tensor *b = from_f64(ctx, dts[d], (const int64_t[]){4}, 1, bv); /* broadcasts */
        double *aq = values(a), *bq = values(b);
        assert_int_equal(fc_requires_grad(a, true), FC_OK);
        assert_int_equal(fc_requires_grad(b, true), FC_OK);
        double tol = dts[d] == FC_BF16 ? 2e-2 : 1e-6;
        for (int r = 0; r < 3; r++) {
            fc_tensor *y = fc_mse_loss(ctx, a, b, (fc_reduction)r);
            assert_non_null(y);
            assert_int_equal(fc_tensor_dtype(y), dts[d]);
            double sq[12], s = 0, da[12], db[4] = {0};
            for (int i = 0; i < 12; i++) {
                sq[i] = (aq[i] - bq[i % 4]) * (aq[i] - bq[i % 4]);
                s += sq[i];
            }
            double *got = values(y);
            if (r == FC_REDUCE_NONE) {
                assert_int_equal(fc_tensor_numel(y), 12);
                expect_close(got, sq, 12, tol, "mse none");
            } else {
                double want = r == FC_REDUCE_MEAN ? s / 12 : s;
                expect_close(got, &want, 1, tol, "mse");
            }
            free(got);
            /* gradient of sum(y): 2 * scale * (a - b), db the negated sum over rows */
            fc_tensor *g =
                fc_ones(ctx, fc__grad_dtype(dts[d]), fc_tensor_shape(y), fc_tensor_rank(y));
            fc_zero_grad((fc_tensor *[]){a, b}, 2);
            assert_int_equal(fc_backward_with(ctx, y, g, false), FC_OK);
            double scale = r == FC_REDUCE_MEAN ? 1.0 / 12 : 1.0;
            for (int i = 0; i < 12; i++) {
                da[i] = 2 * scale * (aq[i] - bq[i % 4]);
                db[i % 4] -= da[i];
            }
            got = values(fc_grad(a));
            expect_close(got, da, 12, tol, "mse da");
            free(got);
            got = values(fc_grad(b));
            expect_close(got, db, 4, tol, "mse db");
            free(got);
            fc_release(g);
            fc_release(y);
        }
        free(aq);
        free(bq);
        fc_release(a);
        fc_release(b);
    }
    free_ctx(ctx);
}

/* ---- errors
 * --------------------------------------------------------------------------------------- */

static void expect_error(fc_ctx *ctx, fc_tensor *t, fc_status code, const char *needle) {
    assert_null(t);
    assert_int_equal(fc_ctx_status(ctx), code);
    if (!strstr(fc_ctx_error(ctx), needle))
        fail_msg("message '%s' lacks '%s'", fc_ctx_error(ctx), needle);
    fc_ctx_clear_error(ctx);
}

static void test_loss_errors(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    fc_tensor *x = fc_zeros(ctx, FC_F32, (const int64_t[]){4, 5}, 2);
    int32_t tv[4] = {0, 4, 7, 1};
    fc_tensor *t = fc_tensor_from_data(ctx, FC_I32, (const int64_t[]){4}, 1, tv);
    expect_error(ctx, fc_cross_entropy(ctx, x, t, NULL), FC_ERR_INDEX,
                 "cross_entropy: target 7 at position 2 is outside [0, 5)");
    int32_t neg[4] = {0, -2, 1, 1};
    fc_tensor *tn = fc_tensor_from_data(ctx, FC_I32, (const int64_t[]){4}, 1, neg);
    expect_error(ctx, fc_cross_entropy(ctx, x, tn, NULL), FC_ERR_INDEX, "target -2 at position 1");
    fc_tensor *tf = fc_zeros(ctx, FC_F32, (const int64_t[]){4}, 1);
    expect_error(ctx, fc_cross_entropy(ctx, x, tf, NULL), FC_ERR_DTYPE, "targets dtype f32");
    fc_tensor *t3 = fc_zeros(ctx, FC_I64, (const int64_t[]){3}, 1);
    expect_error(ctx, fc_cross_entropy(ctx, x, t3, NULL), FC_ERR_SHAPE_MISMATCH, "cross_entropy");
    fc_tensor *xi = fc_zeros(ctx, FC_I32, (const int64_t[]){4, 5}, 2);
    expect_error(ctx, fc_cross_entropy(ctx, xi, t3, NULL), FC_ERR_DTYPE, "logits dtype i32");
    fc_tensor *x3 = fc_zeros(ctx, FC_F32, (const int64_t[]){2, 2, 5}, 3);
    expect_error(ctx, fc_cross_entropy(ctx, x3, t3, NULL), FC_ERR_RANK, "cross_entropy");
    fc_ce_opts o = {.label_smoothing = 1.5};
    fc_tensor *t0 = fc_zeros(ctx, FC_I64, (const int64_t[]){4}, 1);
    expect_error(ctx, fc_cross_entropy(ctx, x, t0, &o), FC_ERR_INVALID_ARG, "label_smoothing");
    o = (fc_ce_opts){.reduction = (fc_reduction)7};
    expect_error(ctx, fc_cross_entropy(ctx, x, t0, &o), FC_ERR_INVALID_ARG, "reduction");
    fc_tensor *y = fc_zeros(ctx, FC_F64, (const int64_t[]){4, 5}, 2);
    fc_tensor *z = fc_zeros(ctx, FC_F32, (const int64_t[]){3}, 1);
    expect_error(ctx, fc_mse_loss(ctx, x, y, FC_REDUCE_MEAN), FC_ERR_DTYPE, "mse_loss: dtypes");
    expect_error(ctx, fc_mse_loss(ctx, x, z, FC_REDUCE_MEAN), FC_ERR_SHAPE_MISMATCH, "mse_loss");
    expect_error(ctx, fc_mse_loss(ctx, xi, xi, FC_REDUCE_SUM), FC_ERR_DTYPE, "mse_loss");
    expect_error(ctx, fc_mse_loss(ctx, x, x, (fc_reduction)-1), FC_ERR_INVALID_ARG, "mse_loss");
    fc_ctx_fail(ctx, FC_ERR_STATE, "earlier");
    assert_null(fc_cross_entropy(ctx, NULL, t0, NULL));
    assert_null(fc_cross_entropy(ctx, x, NULL, NULL));
    assert_null(fc_mse_loss(ctx, x, NULL, FC_REDUCE_MEAN));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_STATE);
    fc_ctx_clear_error(ctx);
    fc_tensor *list[] = {x, t, tn, tf, t3, xi, x3, t0, y, z};
    for (int i = 0; i < 10; i++)
        fc_release(list[i]);
    free_ctx(ctx);
}

/* ---- gradient checks (fc_gradcheck, f64 central differences) ------------------------------ */

enum op { OP_CROSS_ENTROPY, OP_MSE, OP_CHAIN };

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
    case OP_CROSS_ENTROPY: {
        fc_ce_opts o = {
            .reduction = c->red, .use_ignore = true, .ignore_index = 2, .label_smoothing = 0.1};
        y = fc_cross_entropy(ctx, x, c->targets, &o);
        break;
    }
    case OP_MSE:
        y = fc_mse_loss(ctx, x, in[1], c->red);
        break;
    case OP_CHAIN: {
        fc_tensor *h = fc_layer_norm(ctx, x, in[1], in[2], 1e-5);
        fc_tensor *p = fc_softmax(ctx, h, 1);
        fc_ce_opts o = {.label_smoothing = 0.2};
        y = fc_cross_entropy(ctx, p, c->targets, &o);
        fc_release(h);
        fc_release(p);
        break;
    }
    }
    (void)n;
    fc_release(x);
    return y;
}

static void check(fc_ctx *ctx, gc_case *c, fc_tensor *const *in, int n) {
    fct_gradcheck_ok(ctx, apply, c, in, n, c->name, (int)c->view);
}

static void test_grad_losses(void **state) {
    (void)state;
    fc_ctx *ctx = fct_gc_ctx();
    const int64_t leaf2[4][2] = {{4, 5}, {5, 4}, {4, 7}, {1, 5}};
    int64_t tv[4] = {1, 2, 4, 0}, n4 = 4, tv3[3] = {3, 0, 2};
    for (int v = FCT_V_CONTIG; v <= FCT_V_BROADCAST; v++) {
        fc_scope_begin(ctx);
        /* broadcast makes 3 rows */
        fc_tensor *t = v == FCT_V_BROADCAST
                           ? fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){3}, 1, tv3)
                           : fc_tensor_from_data(ctx, FC_I64, &n4, 1, tv);
        fc_tensor *x = fct_random_f64(ctx, leaf2[v], 2, 400, -2, 2);
        for (int r = 0; r < 3; r++) {
            gc_case c = {"cross_entropy",
                         OP_CROSS_ENTROPY,
                         (enum fct_view)v,
                         {0},
                         0,
                         false,
                         0,
                         (fc_reduction)r,
                         t};
            check(ctx, &c, &x, 1);
        }
        int64_t bshape[1] = {leaf2[v][1] - (v == FCT_V_NARROW ? 2 : 0)};
        if (v == FCT_V_TRANSPOSE) bshape[0] = leaf2[v][0];
        fc_tensor *in[2] = {x, fct_random_f64(ctx, bshape, 1, 401, -1, 1)};
        for (int r = 0; r < 3; r++) {
            gc_case c = {"mse_loss", OP_MSE, (enum fct_view)v, {0}, 0,
                         false,      0,      (fc_reduction)r,  NULL};
            check(ctx, &c, in, 2);
        }
        fc_scope_end(ctx);
    }
    free_ctx(ctx);
}

static void test_grad_chain_layer_norm_softmax_cross_entropy(void **state) {
    (void)state;
    fc_ctx *ctx = fct_gc_ctx();
    int64_t d6 = 6, n4 = 4, tv[4] = {5, 0, 3, 3};
    for (int v = FCT_V_CONTIG; v <= FCT_V_TRANSPOSE; v++) {
        fc_scope_begin(ctx);
        const int64_t shape[2][2] = {{4, 6}, {6, 4}};
        fc_tensor *in[3] = {fct_random_f64(ctx, shape[v], 2, 500, -2, 2),
                            fct_random_f64(ctx, &d6, 1, 501, 0.5, 1.5),
                            fct_random_f64(ctx, &d6, 1, 502, -1, 1)};
        fc_tensor *t = fc_tensor_from_data(ctx, FC_I64, &n4, 1, tv);
        gc_case c = {"layer_norm -> softmax -> cross_entropy",
                     OP_CHAIN,
                     (enum fct_view)v,
                     {0},
                     0,
                     false,
                     0,
                     0,
                     t};
        check(ctx, &c, in, 3);
        fc_scope_end(ctx);
    }
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cross_entropy_matches_reference),
        cmocka_unit_test(test_cross_entropy_all_ignored_is_nan),
        cmocka_unit_test(test_mse_loss),
        cmocka_unit_test(test_loss_errors),
        cmocka_unit_test(test_grad_losses),
        cmocka_unit_test(test_grad_chain_layer_norm_softmax_cross_entropy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
