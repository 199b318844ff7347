/* SPDX-License-Identifier: MIT */
/* test_hessian.c - higher-order gradients through fc_autograd_grad's
 * create_graph: Hessian-vector products and full small Hessians, checked
 * against central differences of the analytic gradient and against closed
 * forms (the quadratic 0.5 x^T A x + b^T x, whose Hessian is A, and the
 * mean logistic loss, whose Hessian is X^T diag(s (1 - s)) X / n); a third
 * derivative; prod's Hessian at zeros; that fc_gradgradcheck notices a
 * second derivative the graph lost; a rule left on a fused kernel is
 * refused, but a gradient that depends on no value of the graph is kept
 * as a constant of it (its Hessian zero); second derivatives through fc_grad_checkpoint; that a hook's recorded replacement stays
 * differentiable; that repeated double backwards leak no graph; and that
 * the plain walk stays plain (no recorded gradients, the same bits as
 * fc_backward). All in f64, tolerances stated per check. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ag/tape.h"
#include "fct_f64.h"
#include "fucina.h"

#define N 5 /* the parameter count of both losses */
#define M 7 /* logistic regression samples */

static int setup(void **state) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 3});
    *state = ctx;
    return ctx ? 0 : -1;
}

static int teardown(void **state) {
    free_ctx(*state);
    return 0;
}

static void expect_err(fc_ctx *ctx, fc_status got, fc_status want, const char *a) {
    assert_int_equal(got, want);
    assert_int_equal(fc_ctx_status(ctx), want);
    if (!strstr(fc_ctx_error(ctx), a)) fail_msg("error \"%s\" lacks \"%s\"", fc_ctx_error(ctx), a);
    fc_ctx_clear_error(ctx);
}

static fc_tensor *leaf(fc_ctx *ctx, const int64_t *shape, int rank, const double *v, bool grad) {
    fc_tensor *t = fc_tensor_from_data(ctx, FC_F64, shape, rank, v);
    assert_non_null(t);
    if (grad) assert_int_equal(fc_requires_grad(t, true), FC_OK);
    return t;
}

static void read(fc_tensor *t, double *out, int64_t n) {
    assert_non_null(t);
    assert_int_equal(fc_tensor_numel(t), n);
    assert_int_equal(fc_tensor_copy_out(out, sizeof *out * (size_t)n, t), FC_OK);
}

/* ---- the two losses ------------------------------------------------------------------------ */

typedef struct problem {
    double a[N * N], b[N];     /* quadratic: A symmetric positive definite */
    double xs[M * N], y[M];    /* logistic: samples and +-1 labels */
    fc_tensor *A, *bt, *X, *Y; /* the same as constants */
    bool logistic;
} problem;

static void problem_init(fc_ctx *ctx, problem *p, bool logistic) {
    double r[N * N];
    fill_random(r, N * N, 41, -1, 1);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) { /* R^T R + I */
            double s = i == j ? 1.0 : 0.0;
            for (int k = 0; k < N; k++)
                s += r[k * N + i] * r[k * N + j];
            p->a[i * N + j] = s;
        }
    fill_random(p->b, N, 42, -1, 1);
    fill_random(p->xs, M * N, 43, -1.5, 1.5);
    for (int i = 0; i < M; i++)
        p->y[i] = i % 3 == 0 ? -1.0 : 1.0;
    p->A = leaf(ctx, (int64_t[]){N, N}, 2, p->a, false);
    p->bt = leaf(ctx, (int64_t[]){N}, 1, p->b, false);
    p->X = leaf(ctx, (int64_t[]){M, N}, 2, p->xs, false);
    p->Y = leaf(ctx, (int64_t[]){M}, 1, p->y, false);
    p->logistic = logistic;
}

static void problem_free(problem *p) {
    fc_release(p->A);
    fc_release(p->bt);
    fc_release(p->X);
    fc_release(p->Y);
}

/* The loss at x [N] (scope-owned temporaries). */
static fc_tensor *loss(fc_ctx *ctx, const problem *p, fc_tensor *x) {
    if (!p->logistic) /* 0.5 x^T A x + b^T x */
        return fc_add(
            ctx,
            fc_mul_scalar(ctx, fc_sum(ctx, fc_mul(ctx, x, fc_matmul(ctx, p->A, x)), NULL, 0, false),
                          0.5),
            fc_sum(ctx, fc_mul(ctx, p->bt, x), NULL, 0, false));
    /* mean softplus(-y (X x)) */
    fc_tensor *z = fc_mul(ctx, p->Y, fc_matmul(ctx, p->X, x));
    return fc_mean(ctx, fc_softplus(ctx, fc_neg(ctx, z)), NULL, 0, false);
}

/* The closed-form Hessian at x into h [N * N]. */
static void closed_hessian(const problem *p, const double *x, double *h) {
    if (!p->logistic) {
        memcpy(h, p->a, sizeof p->a);
        return;
    }
    memset(h, 0, sizeof(double) * N * N);
    for (int i = 0; i < M; i++) {
        double z = 0;
        for (int k = 0; k < N; k++)
            z += p->xs[i * N + k] * x[k];
        z *= p->y[i];
        double s = 1.0 / (1.0 + exp(z)); /* sigmoid(-z); y^2 = 1 */
        for (int a = 0; a < N; a++)
            for (int b = 0; b < N; b++)
                h[a * N + b] += s * (1 - s) * p->xs[i * N + a] * p->xs[i * N + b] / M;
    }
}

/* The gradient at x (plain walk) into g [N]. */
static void gradient_at(fc_ctx *ctx, const problem *p, const double *x, double *g) {
    fc_tensor *xt = leaf(ctx, (int64_t[]){N}, 1, x, true);
    fc_scope_begin(ctx);
    fc_tensor *l = loss(ctx, p, xt), *gr = NULL;
    assert_int_equal(fc_autograd_grad(ctx, &l, NULL, 1, &xt, 1, NULL, &gr), FC_OK);
    assert_false(fc_tensor_requires_grad(gr)); /* a plain walk records nothing */
    read(gr, g, N);
    fc_release(gr);
    fc_scope_end(ctx);
    fc_release(xt);
}

/* H v at x through a double backward: the gradient with create_graph,
 * then the gradient of sum(g * v). */
static void hvp_at(fc_ctx *ctx, const problem *p, const double *x, const double *v, double *hv) {
    fc_tensor *xt = leaf(ctx, (int64_t[]){N}, 1, x, true);
    fc_tensor *vt = leaf(ctx, (int64_t[]){N}, 1, v, false);
    fc_scope_begin(ctx);
    fc_tensor *l = loss(ctx, p, xt), *g = NULL, *h = NULL;
    fc_autograd_grad_opts cg = {.create_graph = true};
    fc_status st = fc_autograd_grad(ctx, &l, NULL, 1, &xt, 1, &cg, &g);
    if (st != FC_OK) fprintf(stderr, "%s\n", fc_ctx_error(ctx));
    assert_int_equal(st, FC_OK);
    assert_true(fc_tensor_requires_grad(g));
    assert_int_equal(fc_autograd_grad(ctx, &g, &vt, 1, &xt, 1, NULL, &h), FC_OK);
    read(h, hv, N);
    fc_release(g);
    fc_release(h);
    fc_scope_end(ctx);
    fc_release(xt);
    fc_release(vt);
}

static void check_hessians(fc_ctx *ctx, bool logistic) {
    problem p;
    problem_init(ctx, &p, logistic);
    double x[N], v[N], hv[N], h[N * N], hc[N * N];
    fill_random(x, N, 7, -0.8, 0.8);
    fill_random(v, N, 8, -1, 1);
    closed_hessian(&p, x, hc);
    /* one HVP against the closed form (1e-12 relative: a few roundings) */
    hvp_at(ctx, &p, x, v, hv);
    for (int i = 0; i < N; i++) {
        double want = 0;
        for (int j = 0; j < N; j++)
            want += hc[i * N + j] * v[j];
        assert_true(fabs(hv[i] - want) <= 1e-12 * (1 + fabs(want)));
    }
    /* the full Hessian, column by column (H e_j), against the closed form
     * and against central differences of the gradient (eps 1e-5: the
     * difference's error is O(eps^2 |f'''|) plus O(1e-16 / eps)) */
    for (int j = 0; j < N; j++) {
        double e[N] = {0}, gp[N], gm[N], xp[N], xm[N];
        e[j] = 1;
        hvp_at(ctx, &p, x, e, hv);
        for (int i = 0; i < N; i++)
            h[i * N + j] = hv[i];
        memcpy(xp, x, sizeof x);
        memcpy(xm, x, sizeof x);
        xp[j] += 1e-5;
        xm[j] -= 1e-5;
        gradient_at(ctx, &p, xp, gp);
        gradient_at(ctx, &p, xm, gm);
        for (int i = 0; i < N; i++) {
            double fd = (gp[i] - gm[i]) / 2e-5;
            assert_true(fabs(h[i * N + j] - fd) <= 1e-7 * (1 + fabs(fd)));
        }
    }
    for (int i = 0; i < N * N; i++)
        assert_true(fabs(h[i] - hc[i]) <= 1e-12 * (1 + fabs(hc[i])));
    for (int i = 0; i < N; i++) /* symmetric, as every Hessian */
        for (int j = 0; j < i; j++)
            assert_true(fabs(h[i * N + j] - h[j * N + i]) <= 1e-12);
    problem_free(&p);
}

static void test_hessian_quadratic(void **state) { check_hessians(*state, false); }

/* Every graph goes with its handles: repeated double backwards hold no more
 * memory after the tenth than after the first (a node kept alive by a
 * reference cycle, such as a saved output linking to its own node, would
 * keep its saved buffers). */
static void test_hessian_no_graph_leak(void **state) {
    fc_ctx *ctx = *state;
    problem p;
    problem_init(ctx, &p, true);
    double x[N], v[N], hv[N];
    fill_random(x, N, 9, -0.5, 0.5);
    fill_random(v, N, 10, -1, 1);
    fc_ctx_stats s1, s10;
    for (int i = 0; i < 10; i++) {
        hvp_at(ctx, &p, x, v, hv);
        fc_ctx_get_stats(ctx, i == 0 ? &s1 : &s10);
    }
    assert_int_equal(s10.bytes_live, s1.bytes_live);
    assert_int_equal(s10.tensors_live, s1.tensors_live);
    problem_free(&p);
}
static void test_hessian_logistic(void **state) { check_hessians(*state, true); }

/* d/dx sum(x^4) = 4 x^3, then 12 x^2 (summed with ones), then 24 x. */
static void test_hessian_third_order(void **state) {
    fc_ctx *ctx = *state;
    double xv[4] = {-1.5, -0.25, 0.5, 2.0}, out[4];
    fc_tensor *x = leaf(ctx, (int64_t[]){4}, 1, xv, true);
    fc_scope_begin(ctx);
    fc_tensor *y = fc_sum(ctx, fc_mul(ctx, fc_square(ctx, x), fc_mul(ctx, x, x)), NULL, 0, false);
    fc_autograd_grad_opts cg = {.create_graph = true};
    fc_tensor *g1 = NULL, *g2 = NULL, *g3 = NULL;
    assert_int_equal(fc_autograd_grad(ctx, &y, NULL, 1, &x, 1, &cg, &g1), FC_OK);
    read(g1, out, 4);
    for (int i = 0; i < 4; i++)
        assert_true(fabs(out[i] - 4 * pow(xv[i], 3)) <= 1e-13);
    fc_tensor *s1 = fc_sum(ctx, g1, NULL, 0, false);
    assert_int_equal(fc_autograd_grad(ctx, &s1, NULL, 1, &x, 1, &cg, &g2), FC_OK);
    read(g2, out, 4);
    for (int i = 0; i < 4; i++)
        assert_true(fabs(out[i] - 12 * xv[i] * xv[i]) <= 1e-13);
    fc_tensor *s2 = fc_sum(ctx, g2, NULL, 0, false);
    /* (retain_graph: the graph of g1 is walked again below) */
    assert_int_equal(fc_autograd_grad(ctx, &s2, NULL, 1, &x, 1,
                                      &(fc_autograd_grad_opts){.retain_graph = true}, &g3),
                     FC_OK);
    read(g3, out, 4);
    for (int i = 0; i < 4; i++)
        assert_true(fabs(out[i] - 24 * xv[i]) <= 1e-13);
    /* the gradient of a gradient folded into a loss trains with fc_backward:
     * d/dx sum((4x^3)^2) = 96 x^5 */
    fc_tensor *pen = fc_sum(ctx, fc_square(ctx, g1), NULL, 0, false);
    fc_status st = fc_backward(ctx, pen);
    if (st != FC_OK) fprintf(stderr, "%s\n", fc_ctx_error(ctx));
    assert_int_equal(st, FC_OK);
    read(fc_grad(x), out, 4);
    for (int i = 0; i < 4; i++)
        assert_true(fabs(out[i] - 96 * pow(xv[i], 5)) <= 1e-12 * (1 + fabs(96 * pow(xv[i], 5))));
    fc_release(g1);
    fc_release(g2);
    fc_release(g3);
    fc_scope_end(ctx);
    fc_release(x);
}

/* prod's Hessian where the set holds zeros (where prod / x, its rule without
 * zeros, is undefined): H_ij = prod over k != i, j of x_k off the diagonal,
 * 0 on it; with one zero, two zeros, over one axis of a matrix and over
 * both. */
static void check_prod_hessian(fc_ctx *ctx, const double *v, int rows, int cols, bool all) {
    int n = rows * cols;
    fc_tensor *x = leaf(ctx, (int64_t[]){rows, cols}, 2, v, true);
    fc_scope_begin(ctx);
    fc_tensor *y = fc_sum(ctx, fc_prod(ctx, x, all ? NULL : (int[]){1}, all ? 0 : 1, false), NULL,
                          0, false);
    fc_tensor *g = NULL;
    assert_int_equal(fc_autograd_grad(ctx, &y, NULL, 1, &x, 1,
                                      &(fc_autograd_grad_opts){.create_graph = true}, &g),
                     FC_OK);
    for (int j = 0; j < n; j++) {
        double e[16] = {0}, h[16];
        e[j] = 1;
        fc_tensor *et = fc_tensor_from_data(ctx, FC_F64, (int64_t[]){rows, cols}, 2, e), *hj = NULL;
        assert_int_equal(fc_autograd_grad(ctx, &g, &et, 1, &x, 1,
                                          &(fc_autograd_grad_opts){.retain_graph = true}, &hj),
                         FC_OK);
        read(hj, h, n);
        fc_release(hj);
        for (int i = 0; i < n; i++) {
            bool same_set = all || i / cols == j / cols;
            double want = 0;
            if (i != j && same_set) {
                want = 1;
                for (int k = 0; k < n; k++)
                    if (k != i && k != j && (all || k / cols == i / cols)) want *= v[k];
            }
            assert_true(fabs(h[i] - want) <= 1e-14);
        }
    }
    fc_release(g);
    fc_scope_end(ctx);
    fc_release(x);
}

static void test_hessian_prod_with_zeros(void **state) {
    fc_ctx *ctx = *state;
    check_prod_hessian(ctx, (double[]){2, 0, 3, -1}, 1, 4, true);             /* one zero */
    check_prod_hessian(ctx, (double[]){0, 2, 0, 1.5}, 1, 4, true);            /* two */
    check_prod_hessian(ctx, (double[]){0.5, 0, 2, 3, -1, 4}, 2, 3, false);    /* per row */
    check_prod_hessian(ctx, (double[]){0.5, 1.5, 2, 3, 0, 4}, 2, 3, true);    /* both axes */
}

/* ---- fc_gradgradcheck notices a lost second derivative ------------------------------------- */

/* A hook that replaces the gradient of x*x by a detached copy: the first
 * derivative keeps its value, the second loses the term through it. */
static fc_status detach_hook(fc_ctx *ctx, fc_tensor *grad, fc_tensor **replace, void *user) {
    (void)user;
    *replace = fc_clone(ctx, fc_detach(ctx, grad));
    return *replace ? FC_OK : fc_ctx_status(ctx);
}

static fc_tensor *cut_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    fc_tensor *sq = fc_mul(ctx, in[0], in[0]);
    if (user && fc_grad_hook_add(sq, detach_hook, NULL, NULL) != FC_OK) return NULL;
    return fc_sin(ctx, sq);
}

static void test_hessian_gradgradcheck_catches(void **state) {
    fc_ctx *ctx = *state;
    double v[3] = {0.3, -0.7, 1.1};
    fc_tensor *x = leaf(ctx, (int64_t[]){3}, 1, v, true);
    fc_gradcheck_report rep;
    assert_int_equal(fc_gradgradcheck(ctx, cut_fn, NULL, &x, 1, NULL, &rep), FC_OK);
    assert_true(rep.passed);
    assert_int_equal(rep.checked, 6); /* 3 elements of x, 3 of the grad_output */
    fc_status st = fc_gradgradcheck(ctx, cut_fn, (void *)1, &x, 1, NULL, &rep);
    expect_err(ctx, st, FC_ERR_STATE, "second-order mismatch");
    assert_false(rep.passed);
    /* no input that requires grad */
    fc_tensor *c = leaf(ctx, (int64_t[]){3}, 1, v, false);
    expect_err(ctx, fc_gradgradcheck(ctx, cut_fn, NULL, &c, 1, NULL, NULL), FC_ERR_INVALID_ARG,
               "no input requires grad");
    fc_release(c);
    fc_release(x);
}

/* A hook that halves the gradient with an op keeps it recorded. With y =
 * sum(sin(s)), s = x * x: the plain second derivative is 2 cos(x^2) - 4 x^2
 * sin(x^2); with the hook on s's gradient, g = x cos(x^2), and the second
 * walk passes s's node again, so its hook halves the term through s once
 * more (as in PyTorch): cos(x^2) - x^2 sin(x^2). */
static fc_status half_hook(fc_ctx *ctx, fc_tensor *grad, fc_tensor **replace, void *user) {
    (void)user;
    *replace = fc_mul_scalar(ctx, grad, 0.5);
    return *replace ? FC_OK : fc_ctx_status(ctx);
}

static void test_hessian_hook_replacement_recorded(void **state) {
    fc_ctx *ctx = *state;
    double v[3] = {0.3, -0.7, 1.1}, a[3], b[3];
    fc_tensor *x = leaf(ctx, (int64_t[]){3}, 1, v, true);
    for (int pass = 0; pass < 2; pass++) {
        fc_scope_begin(ctx);
        fc_tensor *sq = fc_mul(ctx, x, x);
        if (pass) assert_int_equal(fc_grad_hook_add(sq, half_hook, NULL, NULL), FC_OK);
        fc_tensor *y = fc_sum(ctx, fc_sin(ctx, sq), NULL, 0, false), *g = NULL, *h = NULL;
        assert_int_equal(fc_autograd_grad(ctx, &y, NULL, 1, &x, 1,
                                          &(fc_autograd_grad_opts){.create_graph = true}, &g),
                         FC_OK);
        fc_tensor *s = fc_sum(ctx, g, NULL, 0, false);
        assert_int_equal(fc_autograd_grad(ctx, &s, NULL, 1, &x, 1, NULL, &h), FC_OK);
        read(h, pass ? b : a, 3);
        fc_release(g);
        fc_release(h);
        fc_scope_end(ctx);
    }
    for (int i = 0; i < 3; i++) {
        double x2 = v[i] * v[i];
        assert_true(fabs(a[i] - (2 * cos(x2) - 4 * x2 * sin(x2))) <= 1e-14);
        assert_true(fabs(b[i] - (cos(x2) - x2 * sin(x2))) <= 1e-14);
    }
    fc_release(x);
}

/* ---- errors -------------------------------------------------------------------------------- */

/* sin(x * w) * a: w a parameter reached through user (not an input) */
static fc_tensor *ck_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    fc_tensor *w = user;
    return fc_mul(ctx, fc_sin(ctx, fc_mul(ctx, in[0], w)), in[1]);
}

/* ck_fn checkpointed again inside a checkpointed function */
static fc_tensor *ck_nested(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    fc_tensor *y = fc_grad_checkpoint(ctx, ck_fn, user, in, n);
    return fc_mul(ctx, y, in[0]);
}
static fc_tensor *ck_plain_nested(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    return fc_mul(ctx, ck_fn(ctx, in, n, user), in[0]);
}

/* Second derivatives through fc_grad_checkpoint equal the plain graph's:
 * H v with respect to an input (through the recompute), a leaf input, a
 * parameter used inside and an input made by an earlier op. */
static void test_hessian_through_checkpoint(void **state) {
    fc_ctx *ctx = *state;
    double xv[4] = {0.3, -0.8, 1.2, 0.5}, wv[4] = {1.5, 0.7, -0.4, 2.0}, vv[4] = {1, -2, 0.5, 3};
    double res[4][3][4];
    fc_tensor *x = leaf(ctx, (int64_t[]){4}, 1, xv, true);
    fc_tensor *w = leaf(ctx, (int64_t[]){4}, 1, wv, true);
    fc_tensor *v = leaf(ctx, (int64_t[]){4}, 1, vv, false);
    for (int ck = 0; ck < 4; ck++) { /* plain, checkpointed, plain nested, nested checkpoints */
        fc_scope_begin(ctx);
        fc_tensor *a = fc_exp(ctx, x); /* a non-leaf input */
        fc_tensor *in[2] = {x, a};
        fc_tensor *y = ck == 0   ? ck_fn(ctx, in, 2, w)
                       : ck == 1 ? fc_grad_checkpoint(ctx, ck_fn, w, in, 2)
                       : ck == 2 ? ck_plain_nested(ctx, in, 2, w)
                                 : fc_grad_checkpoint(ctx, ck_nested, w, in, 2);
        fc_tensor *l = fc_sum(ctx, fc_square(ctx, y), NULL, 0, false);
        fc_tensor *wrt[3] = {x, w, a}, *g[3] = {0}, *h[3] = {0};
        /* (allow_unused: w is reached only inside the checkpoint, which the
         * walk's reachability check cannot see into) */
        fc_status st = fc_autograd_grad(
            ctx, &l, NULL, 1, wrt, 3,
            &(fc_autograd_grad_opts){.create_graph = true, .allow_unused = true}, g);
        if (st != FC_OK) fprintf(stderr, "ck %d: %s\n", ck, fc_ctx_error(ctx));
        assert_int_equal(st, FC_OK);
        fc_tensor *gv[3] = {fc_mul(ctx, g[0], v), fc_mul(ctx, g[1], v), fc_mul(ctx, g[2], v)};
        fc_tensor *s = fc_sum(ctx, fc_add(ctx, fc_add(ctx, gv[0], gv[1]), gv[2]), NULL, 0, false);
        st = fc_autograd_grad(ctx, &s, NULL, 1, wrt, 3,
                              &(fc_autograd_grad_opts){.allow_unused = true}, h);
        if (st != FC_OK) fprintf(stderr, "ck %d: %s\n", ck, fc_ctx_error(ctx));
        assert_int_equal(st, FC_OK);
        for (int k = 0; k < 3; k++) {
            read(h[k], res[ck][k], 4);
            fc_release(g[k]);
            fc_release(h[k]);
        }
        fc_scope_end(ctx);
    }
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 4; i++) {
            assert_true(fabs(res[1][k][i] - res[0][k][i]) <= 1e-13 * (1 + fabs(res[0][k][i])));
            assert_true(fabs(res[3][k][i] - res[2][k][i]) <= 1e-13 * (1 + fabs(res[2][k][i])));
        }
    fc_release(x);
    fc_release(w);
    fc_release(v);
}

/* An op whose rule still computes a constant (a fused kernel, here ops
 * under no-grad) where the gradient depends on the graph: the engine's
 * check refuses it in a create_graph walk, naming the op, and the plain
 * walk is unaffected. */
static fc_status fused_square_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout,
                                       fc_tensor **gin) {
    fc_tensor *x = fc__ag_saved_tensor(ctx, node, 0);
    fc_no_grad_begin(ctx);
    gin[0] = fc_mul(ctx, gout, fc_mul_scalar(ctx, x, 2.0));
    fc_no_grad_end(ctx);
    return fc_ctx_status(ctx);
}

static fc_tensor *fused_square(fc_ctx *ctx, fc_tensor *x) {
    fc_no_grad_begin(ctx);
    fc_tensor *y = fc_square(ctx, x);
    fc_no_grad_end(ctx);
    fc_node *nd = y ? fc__ag_record(ctx, "fused_square", fused_square_backward, y, 1, &x) : NULL;
    if (!nd || fc__ag_save(ctx, nd, "input", x) != FC_OK) return NULL;
    return y;
}

static void test_hessian_unrecorded_rule(void **state) {
    fc_ctx *ctx = *state;
    double v[3] = {0.5, -1, 2}, out[3];
    fc_tensor *x = leaf(ctx, (int64_t[]){3}, 1, v, true), *g = NULL;
    fc_scope_begin(ctx);
    fc_tensor *y = fc_sum(ctx, fused_square(ctx, x), NULL, 0, false);
    fc_autograd_grad_opts cg = {.create_graph = true};
    expect_err(ctx, fc_autograd_grad(ctx, &y, NULL, 1, &x, 1, &cg, &g), FC_ERR_UNSUPPORTED,
               "backward of fused_square has no recorded form");
    assert_null(g);
    assert_int_equal(fc_autograd_grad(ctx, &y, NULL, 1, &x, 1, NULL, &g), FC_OK);
    read(g, out, 3);
    for (int i = 0; i < 3; i++) assert_true(out[i] == 2 * v[i]);
    fc_release(g);
    fc_scope_end(ctx);
    fc_release(x);
}

/* The same refusal for a rule that reads its saved value raw (the fused
 * kernel's usual way in) under a constant upstream gradient: before, such a
 * rule's constant passed silently with zero higher derivatives. */
static fc_status raw_square_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout,
                                     fc_tensor **gin) {
    const fc_raw *x = fc__ag_saved_raw(ctx, node, 0);
    if (!x) return fc__failed(ctx);
    fc_tensor *g = fc__tensor_new(ctx, "raw_square", FC_F64, x->shape, x->rank);
    if (!g) return fc__failed(ctx);
    const double *xp = (const double *)fc__raw_base(x);
    const double *gp = (const double *)fc__raw_base(&gout->raw);
    double *out = (double *)fc__raw_base(&g->raw);
    for (int64_t i = 0; i < fc__raw_numel(x); i++)
        out[i] = 2 * xp[i] * gp[fc__raw_numel(&gout->raw) > 1 ? i : 0];
    gin[0] = g;
    return FC_OK;
}

static void test_hessian_raw_read_rule_refused(void **state) {
    fc_ctx *ctx = *state;
    double v[3] = {0.5, -1, 2};
    fc_tensor *x = leaf(ctx, (int64_t[]){3}, 1, v, true), *g = NULL;
    fc_scope_begin(ctx);
    fc_no_grad_begin(ctx);
    fc_tensor *y = fc_square(ctx, x);
    fc_no_grad_end(ctx);
    fc_node *nd = fc__ag_record(ctx, "raw_square", raw_square_backward, y, 1, &x);
    assert_non_null(nd);
    assert_int_equal(fc__ag_save(ctx, nd, "input", x), FC_OK);
    fc_tensor *l = fc_sum(ctx, y, NULL, 0, false);
    expect_err(ctx,
               fc_autograd_grad(ctx, &l, NULL, 1, &x, 1,
                                &(fc_autograd_grad_opts){.create_graph = true}, &g),
               FC_ERR_UNSUPPORTED, "backward of raw_square has no recorded form");
    assert_null(g);
    fc_scope_end(ctx);
    fc_release(x);
}

/* A gradient that depends on no value of the graph: sum(relu(x))'s is g
 * times a constant mask. create_graph returns it (before: FC_ERR_UNSUPPORTED),
 * kept in the new graph because relu's rule read its saved output, so the
 * Hessian is asked for without error and is zero; sum(x)'s ones, made of
 * constants alone, require no grad, as in PyTorch. */
static void test_hessian_constant_gradients(void **state) {
    fc_ctx *ctx = *state;
    double v[4] = {0.5, -1, 2, -0.25}, out[4];
    fc_tensor *x = leaf(ctx, (int64_t[]){4}, 1, v, true), *g = NULL, *h = NULL;
    fc_autograd_grad_opts cg = {.create_graph = true};
    fc_scope_begin(ctx);
    fc_tensor *l = fc_sum(ctx, fc_relu(ctx, x), NULL, 0, false);
    assert_int_equal(fc_autograd_grad(ctx, &l, NULL, 1, &x, 1, &cg, &g), FC_OK);
    read(g, out, 4);
    for (int i = 0; i < 4; i++) assert_true(out[i] == (v[i] > 0 ? 1.0 : 0.0));
    assert_true(fc_tensor_requires_grad(g));
    fc_tensor *l2 = fc_sum(ctx, fc_mul(ctx, g, x), NULL, 0, false); /* x . relu'(x) */
    assert_int_equal(fc_autograd_grad(ctx, &l2, NULL, 1, &x, 1, &cg, &h), FC_OK);
    read(h, out, 4); /* relu'(x) + x . relu''(x) = relu'(x) */
    for (int i = 0; i < 4; i++) assert_true(out[i] == (v[i] > 0 ? 1.0 : 0.0));
    fc_release(h);
    fc_tensor *l3 = fc_sum(ctx, g, NULL, 0, false);
    assert_int_equal(fc_autograd_grad(ctx, &l3, NULL, 1, &x, 1, &cg, &h), FC_OK);
    read(h, out, 4);
    for (int i = 0; i < 4; i++) assert_true(out[i] == 0);
    fc_release(h);
    fc_release(g);
    fc_tensor *s = fc_sum(ctx, x, NULL, 0, false);
    assert_int_equal(fc_autograd_grad(ctx, &s, NULL, 1, &x, 1, &cg, &g), FC_OK);
    assert_false(fc_tensor_requires_grad(g));
    fc_tensor *s2 = fc_sum(ctx, g, NULL, 0, false);
    expect_err(ctx, fc_autograd_grad(ctx, &s2, NULL, 1, &x, 1, &cg, &h), FC_ERR_NO_GRAD,
               "output 0");
    fc_release(g);
    fc_scope_end(ctx);
    fc_release(x);
}

static void test_hessian_errors(void **state) {
    fc_ctx *ctx = *state;
    double v[4] = {0.5, 0.0, 2.0, -1.0};
    fc_tensor *x = leaf(ctx, (int64_t[]){4}, 1, v, true), *g = NULL;
    fc_autograd_grad_opts cg = {.create_graph = true};
    fc_scope_begin(ctx);
    /* create_graph implies retain_graph: the first-order graph stays walkable */
    fc_tensor *y = fc_sum(ctx, fc_exp(ctx, x), NULL, 0, false);
    assert_int_equal(fc_autograd_grad(ctx, &y, NULL, 1, &x, 1, &cg, &g), FC_OK);
    fc_release(g);
    assert_int_equal(fc_autograd_grad(ctx, &y, NULL, 1, &x, 1, NULL, &g), FC_OK);
    fc_release(g);
    /* grad mode off at the call: create_graph records anyway */
    fc_tensor *y2 = fc_sum(ctx, fc_exp(ctx, x), NULL, 0, false);
    fc_no_grad_begin(ctx);
    assert_int_equal(fc_autograd_grad(ctx, &y2, NULL, 1, &x, 1, &cg, &g), FC_OK);
    fc_no_grad_end(ctx);
    assert_true(fc_tensor_requires_grad(g));
    fc_release(g);
    fc_scope_end(ctx);
    fc_release(x);
}

/* The plain walk is unchanged by create_graph's existence: fc_autograd_grad
 * without it gives the bits of fc_backward, and create_graph's recorded
 * composite rules agree with the fused kernels to rounding. */
static void test_hessian_plain_walk_unchanged(void **state) {
    fc_ctx *ctx = *state;
    double xv[12], wv[8];
    fill_random(xv, 12, 5, -1, 1);
    fill_random(wv, 8, 6, -1, 1);
    fc_tensor *x = leaf(ctx, (int64_t[]){3, 4}, 2, xv, true);
    fc_tensor *w = leaf(ctx, (int64_t[]){2, 4}, 2, wv, true);
    fc_tensor *in[2] = {x, w}, *plain[2] = {0}, *rec[2] = {0};
    for (int pass = 0; pass < 3; pass++) {
        fc_scope_begin(ctx);
        fc_tensor *h = fc_layer_norm(ctx, fc_gelu(ctx, x, false), NULL, NULL, 1e-5);
        fc_tensor *l = fc_cross_entropy(
            ctx, fc_linear(ctx, h, w, NULL),
            fc_tensor_from_data(ctx, FC_I64, (int64_t[]){3}, 1, (int64_t[]){1, 0, 1}), NULL);
        if (pass == 0) {
            fc_zero_grad(in, 2);
            assert_int_equal(fc_backward(ctx, l), FC_OK);
        } else {
            fc_autograd_grad_opts o = {.create_graph = pass == 2};
            assert_int_equal(fc_autograd_grad(ctx, &l, NULL, 1, in, 2, &o, pass == 1 ? plain : rec),
                             FC_OK);
        }
        fc_scope_end(ctx);
    }
    for (int k = 0; k < 2; k++) {
        double a[12], b[12], c[12];
        int64_t n = fc_tensor_numel(in[k]);
        read(fc_grad(in[k]), a, n);
        read(plain[k], b, n);
        read(rec[k], c, n);
        assert_memory_equal(a, b, sizeof(double) * (size_t)n);
        for (int i = 0; i < n; i++)
            assert_true(fabs(a[i] - c[i]) <= 1e-13);
        assert_false(fc_tensor_requires_grad(plain[k]));
        assert_true(fc_tensor_requires_grad(rec[k]));
        fc_release(plain[k]);
        fc_release(rec[k]);
    }
    fc_zero_grad(in, 2);
    fc_release(x);
    fc_release(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_hessian_quadratic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hessian_logistic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hessian_no_graph_leak, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hessian_third_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hessian_prod_with_zeros, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hessian_gradgradcheck_catches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hessian_hook_replacement_recorded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hessian_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hessian_unrecorded_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hessian_raw_read_rule_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hessian_constant_gradients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hessian_through_checkpoint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hessian_plain_walk_unchanged, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
