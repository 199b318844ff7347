/* SPDX-License-Identifier: MIT */
/* Tutorial 2 (docs/tutorials/02-custom-op.md): an op of your own, written
 * from existing ops, checked by fc_gradcheck and fc_gradgradcheck in f64.
 * The op is a "smooth hinge", log(1 + exp(k (m - x))) / k: a softplus margin
 * loss with sharpness k. Exits 0 when both checks pass and a planted bug
 * (a detached path) is caught. */
#include <stdio.h>

#include <fucina.h>

/* The op: built from fc_rsub_scalar, fc_mul_scalar, fc_softplus and
 * fc_div_scalar, so its backward (to any order) comes from theirs. */
static fc_tensor *smooth_hinge(fc_ctx *ctx, fc_tensor *x, double margin, double k) {
    fc_tensor *z = fc_mul_scalar(ctx, fc_rsub_scalar(ctx, x, margin), k); /* k (m - x) */
    return fc_div_scalar(ctx, fc_softplus(ctx, z), k);
}

/* gradcheck calls a function of its inputs; user carries the constants. */
typedef struct {
    double margin, k;
    int planted_bug;
} hinge_args;

static fc_tensor *loss_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    const hinge_args *a = user;
    fc_tensor *scores = fc_matmul(ctx, in[0], in[1]); /* [8, 3] x [3, 1] */
    fc_tensor *x = a->planted_bug ? fc_detach(ctx, scores) : scores;
    return fc_mean(ctx, smooth_hinge(ctx, fc_add(ctx, x, scores), a->margin, a->k), NULL, 0,
                   false);
}

int main(void) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 3});
    if (!ctx)
        return 1;
    /* f64 inputs that require grad: gradcheck's finite differences need f64. */
    fc_tensor *in[2] = {fc_randn(ctx, FC_F64, (const int64_t[]){8, 3}, 2),
                        fc_randn(ctx, FC_F64, (const int64_t[]){3, 1}, 2)};
    fc_requires_grad(in[0], true);
    fc_requires_grad(in[1], true);

    hinge_args args = {.margin = 1.0, .k = 4.0};
    fc_gradcheck_report rep;
    fc_status s1 = fc_gradcheck(ctx, loss_fn, &args, in, 2, NULL, &rep);
    printf("gradcheck: %s (%lld elements, worst excess %.3g)\n", fc_status_name(s1),
           (long long)rep.checked, rep.worst_excess);
    fc_status s2 = fc_gradgradcheck(ctx, loss_fn, &args, in, 2, NULL, &rep);
    printf("gradgradcheck: %s\n", fc_status_name(s2));

    /* The same loss with one path detached: autograd misses it, the finite
     * differences do not, and gradcheck says FC_ERR_STATE naming the element. */
    args.planted_bug = 1;
    fc_status s3 = fc_gradcheck(ctx, loss_fn, &args, in, 2, NULL, &rep);
    printf("planted bug: %s: %s\n", fc_status_name(s3), fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);

    fc_release(in[0]);
    fc_release(in[1]);
    fc_ctx_free(ctx);
    return s1 == FC_OK && s2 == FC_OK && s3 == FC_ERR_STATE ? 0 : 1;
}
