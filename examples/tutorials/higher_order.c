/* SPDX-License-Identifier: MIT */
/* Tutorial 3 (docs/tutorials/03-higher-order.md): derivatives of
 * derivatives. (1) A Hessian-vector product of f(x) = sum(x^3) + sum(x)^2,
 * against its closed form H v = 6 x * v + 2 sum(v). (2) A gradient penalty,
 * as WGAN-GP uses: the squared norm of the gradient of a critic D(x) =
 * sum(tanh(x W)) with respect to its input, differentiated with respect to
 * W, against central finite differences. Exits 0 when both agree. */
#include <math.h>
#include <stdio.h>

#include <fucina.h>

/* d/dx of f, kept differentiable (create_graph), then d/dx of <grad, v>. */
static fc_status hvp(fc_ctx *ctx, fc_tensor *x, fc_tensor *v, fc_tensor **out) {
    fc_tensor *f = fc_add(ctx, fc_sum(ctx, fc_pow_scalar(ctx, x, 3.0), NULL, 0, false),
                          fc_square(ctx, fc_sum(ctx, x, NULL, 0, false)));
    fc_tensor *g = NULL;
    fc_autograd_grad_opts keep = {.create_graph = true};
    fc_status st = fc_autograd_grad(ctx, &f, NULL, 1, &x, 1, &keep, &g);
    if (st != FC_OK)
        return st;
    fc_tensor *gv = fc_sum(ctx, fc_mul(ctx, g, v), NULL, 0, false);
    st = fc_autograd_grad(ctx, &gv, NULL, 1, &x, 1, NULL, out);
    fc_release(g); /* fc_autograd_grad's results are the caller's, not the scope's */
    return st;
}

/* penalty(W) = || d D(x) / dx ||^2 with D(x) = sum(tanh(x W)). */
static fc_tensor *penalty(fc_ctx *ctx, fc_tensor *x, fc_tensor *w) {
    fc_tensor *d = fc_sum(ctx, fc_tanh(ctx, fc_matmul(ctx, x, w)), NULL, 0, false);
    fc_tensor *gx = NULL;
    fc_autograd_grad_opts keep = {.create_graph = true};
    if (fc_autograd_grad(ctx, &d, NULL, 1, &x, 1, &keep, &gx) != FC_OK)
        return NULL;
    fc_tensor *p = fc_sum(ctx, fc_square(ctx, gx), NULL, 0, false);
    fc_release(gx);
    return p;
}

int main(void) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 11});
    if (!ctx)
        return 1;
    int ok = 1;

    /* (1) Hessian-vector product */
    fc_scope_begin(ctx);
    double xs[4] = {0.5, -1.0, 2.0, 0.25}, vs[4] = {1.0, 0.5, -0.5, 2.0};
    fc_tensor *x = fc_tensor_from_data(ctx, FC_F64, (const int64_t[]){4}, 1, xs);
    fc_tensor *v = fc_tensor_from_data(ctx, FC_F64, (const int64_t[]){4}, 1, vs);
    fc_requires_grad(x, true);
    fc_tensor *hv = NULL;
    if (hvp(ctx, x, v, &hv) != FC_OK) {
        fprintf(stderr, "hvp: %s\n", fc_ctx_error(ctx));
        return 1;
    }
    double got[4], sv = vs[0] + vs[1] + vs[2] + vs[3];
    fc_tensor_copy_out(got, sizeof got, hv);
    for (int i = 0; i < 4; i++) {
        double want = 6.0 * xs[i] * vs[i] + 2.0 * sv;
        printf("Hv[%d] = %9.5f  (closed form %9.5f)\n", i, got[i], want);
        ok &= fabs(got[i] - want) < 1e-12;
    }
    fc_release(hv);
    fc_scope_end(ctx);

    /* (2) gradient penalty, differentiated with respect to the critic's W */
    fc_scope_begin(ctx);
    fc_tensor *xb = fc_randn(ctx, FC_F64, (const int64_t[]){5, 3}, 2);
    fc_requires_grad(xb, true);
    fc_tensor *w = fc_param_randn(ctx, FC_F64, (const int64_t[]){3, 2}, 2, 0.5);
    fc_tensor *p = penalty(ctx, xb, w);
    if (!p || fc_backward(ctx, p) != FC_OK) {
        fprintf(stderr, "penalty: %s\n", fc_ctx_error(ctx));
        return 1;
    }
    double gw[6], wv[6];
    fc_tensor_copy_out(gw, sizeof gw, fc_grad(w));
    fc_tensor_copy_out(wv, sizeof wv, w);
    double worst = 0;
    for (int i = 0; i < 6; i++) { /* central differences of the penalty in W[i] */
        double pv[2];
        for (int s = 0; s < 2; s++) {
            double wp[6];
            for (int j = 0; j < 6; j++)
                wp[j] = wv[j] + (j == i ? (s ? -1e-6 : 1e-6) : 0.0);
            fc_tensor *wt = fc_tensor_from_data(ctx, FC_F64, (const int64_t[]){3, 2}, 2, wp);
            fc_tensor_item(penalty(ctx, xb, wt), &pv[s]);
        }
        double fd = (pv[0] - pv[1]) / 2e-6;
        worst = fmax(worst, fabs(fd - gw[i]));
    }
    printf("gradient penalty: d/dW by autograd vs finite differences: max |diff| = %.2e\n", worst);
    ok &= worst < 1e-6;
    fc_release(w);
    fc_scope_end(ctx);

    fc_ctx_free(ctx);
    return ok ? 0 : 1;
}
