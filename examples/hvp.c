/* SPDX-License-Identifier: MIT */
/* hvp.c - a Newton-CG fit of L2-regularised logistic regression, with the
 * Hessian never formed: every Hessian-vector product is a double backward.
 *
 * Goals: show the higher-order gradient workflow of fucina.
 *   1. g = dL/dw with fc_autograd_grad and create_graph: g is itself a
 *      recorded tensor, a function of w;
 *   2. H v = d(g . v)/dw: a second fc_autograd_grad over g, with v as its
 *      grad_output (retain_graph keeps g's graph for the next product);
 *   3. conjugate gradients solve H p = -g with those products only, and a
 *      backtracking line search takes the Newton step.
 * The loss, its gradient norm and the CG iterations are printed per Newton
 * step; the fit converges quadratically (the gradient norm squares each
 * step near the end). At the end one product is checked against the
 * closed-form Hessian X^T diag(s (1 - s)) X / n + lambda I, computed in
 * plain C.
 *
 * Data: n points in d dimensions (plus a bias column), labels from a known
 * w* through a logistic model (seeded, synthetic). Everything is f64.
 * Exit status 0 when the gradient norm ends below --tol and the checked
 * product matches the closed form to 1e-9.
 *
 *   hvp [--n 2000] [--d 10] [--lambda 1e-3] [--tol 1e-9] [--seed 1]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fucina.h>

#include "common/args.h"
#include "common/progress.h"

// ----------------------------------------------------------------------------
// the problem: mean softplus(-y (X w)) + lambda / 2 |w|^2

typedef struct problem {
    int64_t n, d; /* d counts the bias column */
    double lambda;
    double *x, *y; /* host copies for the closed form */
    fc_tensor *X, *Y;
} problem;

/* the loss at w (scope-owned temporaries) */
static fc_tensor *loss_at(fc_ctx *ctx, const problem *p, fc_tensor *w) {
    fc_tensor *margin = fc_mul(ctx, p->Y, fc_matmul(ctx, p->X, w)); /* (n) */
    fc_tensor *data = fc_mean(ctx, fc_softplus(ctx, fc_neg(ctx, margin)), NULL, 0, false);
    fc_tensor *reg =
        fc_mul_scalar(ctx, fc_sum(ctx, fc_square(ctx, w), NULL, 0, false), 0.5 * p->lambda);
    return fc_add(ctx, data, reg);
}

static double scalar_of(fc_tensor *t) {
    double v = NAN;
    if (t) fc_tensor_copy_out(&v, sizeof v, t);
    return v;
}

static double dot(const double *a, const double *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

// ----------------------------------------------------------------------------
// Hessian-vector products through the recorded gradient g (a function of w)

/* hv = H v: the gradient of g . v with respect to w */
static fc_status hvp(fc_ctx *ctx, fc_tensor *g, fc_tensor *w, const double *v, double *hv,
                     int64_t d) {
    fc_scope_begin(ctx);
    fc_tensor *vt = fc_tensor_from_data(ctx, FC_F64, &d, 1, v), *h = NULL;
    fc_autograd_grad_opts keep = {.retain_graph = true};
    fc_status st = vt ? fc_autograd_grad(ctx, &g, &vt, 1, &w, 1, &keep, &h) : fc_ctx_status(ctx);
    if (st == FC_OK) st = fc_tensor_copy_out(hv, sizeof *hv * (size_t)d, h);
    fc_release(h);
    fc_scope_end(ctx);
    return st;
}

/* Conjugate gradients on H p = -g (at most max_it products, relative
 * residual tol); returns the iterations used, -1 on error. */
static int cg_solve(fc_ctx *ctx, fc_tensor *g, fc_tensor *w, const double *gv, double *p, int64_t d,
                    int max_it, double tol) {
    double *r = malloc(sizeof *r * (size_t)d * 3), *q = r + d, *hq = q + d;
    if (!r) return -1;
    for (int64_t i = 0; i < d; i++)
        p[i] = 0, r[i] = -gv[i], q[i] = r[i];
    double rr = dot(r, r, d), r0 = sqrt(rr);
    int it = 0;
    while (it < max_it && sqrt(rr) > tol * r0) {
        if (hvp(ctx, g, w, q, hq, d) != FC_OK) {
            it = -1;
            break;
        }
        it++;
        double alpha = rr / dot(q, hq, d);
        for (int64_t i = 0; i < d; i++)
            p[i] += alpha * q[i], r[i] -= alpha * hq[i];
        double rr2 = dot(r, r, d);
        for (int64_t i = 0; i < d; i++)
            q[i] = r[i] + rr2 / rr * q[i];
        rr = rr2;
    }
    free(r);
    return it;
}

// ----------------------------------------------------------------------------
// data and the closed-form check

static bool make_data(fc_ctx *ctx, problem *p, uint64_t seed) {
    int64_t n = p->n, d = p->d;
    p->x = malloc(sizeof(double) * (size_t)(n * d));
    p->y = malloc(sizeof(double) * (size_t)n);
    double *wstar = malloc(sizeof(double) * (size_t)d);
    if (!p->x || !p->y || !wstar) return false;
    for (int64_t j = 0; j < d; j++)
        wstar[j] = 2 * ex_rand_unit(&seed) - 1;
    for (int64_t i = 0; i < n; i++) {
        double z = 0;
        for (int64_t j = 0; j < d; j++) {
            double v = j == d - 1 ? 1.0 : 4 * ex_rand_unit(&seed) - 2; /* last: bias */
            p->x[i * d + j] = v;
            z += v * wstar[j];
        }
        p->y[i] = ex_rand_unit(&seed) < 1 / (1 + exp(-z)) ? 1.0 : -1.0;
    }
    free(wstar);
    p->X = fc_tensor_from_data(ctx, FC_F64, (int64_t[]){n, d}, 2, p->x);
    p->Y = fc_tensor_from_data(ctx, FC_F64, &n, 1, p->y);
    return p->X && p->Y;
}

/* |H v - closed form| / |closed form| at w */
static double check_closed_form(const problem *p, const double *w, const double *v,
                                const double *hv) {
    int64_t n = p->n, d = p->d;
    double err = 0, norm = 0;
    double *want = calloc((size_t)d, sizeof *want);
    if (!want) return INFINITY;
    for (int64_t i = 0; i < n; i++) {
        const double *xi = p->x + i * d;
        double z = p->y[i] * dot(xi, w, d), s = 1 / (1 + exp(z)); /* sigmoid(-z) */
        double c = s * (1 - s) * dot(xi, v, d) / (double)n;
        for (int64_t j = 0; j < d; j++)
            want[j] += c * xi[j];
    }
    for (int64_t j = 0; j < d; j++) {
        want[j] += p->lambda * v[j];
        err += (hv[j] - want[j]) * (hv[j] - want[j]);
        norm += want[j] * want[j];
    }
    free(want);
    return sqrt(err / norm);
}

// ----------------------------------------------------------------------------

int main(int argc, char **argv) {
    int64_t n = 2000, d = 10, seed = 1, max_newton = 20;
    double lambda = 1e-3, tol = 1e-9;
    ex_arg args[] = {
        {"n", EX_ARG_INT, &n, "samples", EX_MIN(2)},
        {"d", EX_ARG_INT, &d, "features (a bias column is added)", EX_MIN(1)},
        {"lambda", EX_ARG_DOUBLE, &lambda, "L2 regularisation", EX_MIN(0)},
        {"tol", EX_ARG_DOUBLE, &tol, "stop when |grad| is below this", EX_MIN(0)},
        {"max-newton", EX_ARG_INT, &max_newton, "Newton steps at most", EX_MIN(0)},
        {"seed", EX_ARG_INT, &seed, "data seed", EX_ANY},
    };
    ex_args_result ar =
        ex_args_parse(argc, argv, args, (int)(sizeof args / sizeof args[0]), NULL, "[options]");
    if (ar != EX_ARGS_OK) return ar == EX_ARGS_HELP ? 0 : 2;

    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.seed = (uint64_t)seed});
    problem p = {.n = n, .d = d + 1, .lambda = lambda};
    if (!ctx || !make_data(ctx, &p, (uint64_t)seed)) {
        fprintf(stderr, "hvp: setup failed: %s\n", ctx ? fc_ctx_error(ctx) : "no context");
        return 1;
    }
    int64_t D = p.d;
    double *wv = calloc((size_t)D, sizeof *wv), *gv = malloc(sizeof *gv * (size_t)D);
    double *step = malloc(sizeof *step * (size_t)D), *hv = malloc(sizeof *hv * (size_t)D);
    fc_tensor *w = fc_param_from_data(ctx, FC_F64, &D, 1, wv);
    if (!wv || !gv || !step || !hv || !w) return 1;
    printf("Newton-CG on logistic regression: n %lld, d %lld (+ bias), lambda %g\n", (long long)n,
           (long long)d, lambda);
    printf("%5s %16s %12s %6s %6s\n", "step", "loss", "|grad|", "cg", "alpha");
    double t0 = ex_now(), gnorm = INFINITY;
    int products = 0, k = 0;
    fc_status st = FC_OK;
    for (; k <= max_newton && st == FC_OK; k++) {
        fc_scope_begin(ctx);
        fc_tensor *l = loss_at(ctx, &p, w), *g = NULL;
        st = fc_autograd_grad(ctx, &l, NULL, 1, &w, 1,
                              &(fc_autograd_grad_opts){.create_graph = true}, &g);
        if (st == FC_OK) st = fc_tensor_copy_out(gv, sizeof *gv * (size_t)D, g);
        double f0 = scalar_of(l);
        gnorm = sqrt(dot(gv, gv, D));
        int it = 0;
        double alpha = 0;
        if (st == FC_OK && gnorm > tol && k < max_newton) {
            it = cg_solve(ctx, g, w, gv, step, D, 50, 1e-3 * fmin(1.0, gnorm));
            if (it < 0) st = fc_ctx_status(ctx);
            products += it > 0 ? it : 0;
            /* backtracking (Armijo) along the Newton direction */
            double slope = dot(gv, step, D);
            for (alpha = 1; st == FC_OK && alpha > 1e-8; alpha *= 0.5) {
                double *trial = hv; /* scratch */
                for (int64_t j = 0; j < D; j++)
                    trial[j] = wv[j] + alpha * step[j];
                fc_scope_begin(ctx);
                fc_no_grad_begin(ctx);
                fc_tensor *wt = fc_tensor_from_data(ctx, FC_F64, &D, 1, trial);
                double f1 = wt ? scalar_of(loss_at(ctx, &p, wt)) : NAN;
                fc_no_grad_end(ctx);
                fc_scope_end(ctx);
                if (f1 <= f0 + 1e-4 * alpha * slope) break;
            }
            for (int64_t j = 0; j < D; j++)
                wv[j] += alpha * step[j];
        }
        printf("%5d %16.12f %12.3e %6d %6.3f\n", k, f0, gnorm, it, alpha);
        fc_release(g);
        fc_scope_end(ctx);
        if (st != FC_OK || gnorm <= tol) break;
        fc_release(w); /* the next step differentiates at the new point */
        w = fc_param_from_data(ctx, FC_F64, &D, 1, wv);
        if (!w) st = fc_ctx_status(ctx);
    }
    if (st != FC_OK) {
        fprintf(stderr, "hvp: %s\n", fc_ctx_error(ctx));
        return 1;
    }
    /* one product at the solution against the closed-form Hessian */
    double rel = INFINITY;
    fc_scope_begin(ctx);
    fc_tensor *l = loss_at(ctx, &p, w), *g = NULL;
    st = fc_autograd_grad(ctx, &l, NULL, 1, &w, 1, &(fc_autograd_grad_opts){.create_graph = true},
                          &g);
    for (int64_t j = 0; j < D; j++)
        step[j] = sin((double)j + 1);
    if (st == FC_OK) st = hvp(ctx, g, w, step, hv, D);
    if (st == FC_OK) rel = check_closed_form(&p, wv, step, hv);
    fc_release(g);
    fc_scope_end(ctx);
    printf("converged: |grad| %.3e after %d Newton steps and %d Hessian-vector products "
           "(%.2f s)\n",
           gnorm, k, products, ex_now() - t0);
    printf("H v against the closed form X^T diag(s(1-s)) X / n + lambda I: relative error %.2e\n",
           rel);
    bool ok = st == FC_OK && gnorm <= tol && rel <= 1e-9;
    fc_release(w);
    fc_release(p.X);
    fc_release(p.Y);
    free(p.x);
    free(p.y);
    free(wv);
    free(gv);
    free(step);
    free(hv);
    fc_ctx_free(ctx);
    if (!ok) fprintf(stderr, "hvp: did not converge to --tol %g or the check failed\n", tol);
    return ok ? 0 : 1;
}
