/* SPDX-License-Identifier: MIT */
/* Tutorial 1 (docs/tutorials/01-first-model.md): tensors, autograd and an
 * optimizer. Fits y = 3 x0 - 2 x1 + 0.5 with one linear layer and Adam, and
 * exits 0 when the learned weights are within 1e-2 of the truth. */
#include <math.h>
#include <stdio.h>

#include <fucina.h>

int main(void) {
    /* A context owns memory, threads and the random stream. */
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 42});
    if (!ctx)
        return 1;

    /* Data: 64 points with two features, and their targets. */
    float xs[64 * 2], ys[64];
    for (int i = 0; i < 64; i++) {
        xs[2 * i] = (float)(i % 8) / 4.0f - 1.0f;
        xs[2 * i + 1] = (float)(i / 8) / 4.0f - 1.0f;
        ys[i] = 3.0f * xs[2 * i] - 2.0f * xs[2 * i + 1] + 0.5f;
    }
    fc_tensor *x = fc_tensor_from_data(ctx, FC_F32, (const int64_t[]){64, 2}, 2, xs);
    fc_tensor *y = fc_tensor_from_data(ctx, FC_F32, (const int64_t[]){64, 1}, 2, ys);

    /* Parameters are leaves that require grad. */
    fc_tensor *w = fc_param_randn(ctx, FC_F32, (const int64_t[]){1, 2}, 2, 0.1);
    fc_tensor *b = fc_param_zeros(ctx, FC_F32, (const int64_t[]){1}, 1);
    fc_tensor *params[] = {w, b};
    fc_optim *opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 0.05},
                                 params, 2);

    for (int step = 0; step < 400; step++) {
        fc_scope_begin(ctx); /* tensors made from here on are released at scope end */
        fc_tensor *pred = fc_linear(ctx, x, w, b); /* x w^T + b: [64, 1] */
        fc_tensor *loss = fc_mse_loss(ctx, pred, y, FC_REDUCE_MEAN);
        fc_optim_zero_grad(opt);
        if (fc_backward(ctx, loss) != FC_OK || fc_optim_step(opt) != FC_OK) {
            fprintf(stderr, "step %d: %s\n", step, fc_ctx_error(ctx));
            return 1;
        }
        double l = 0;
        if (step % 100 == 0 && fc_tensor_item(loss, &l) == FC_OK)
            printf("step %3d  loss %.6f\n", step, l);
        fc_scope_end(ctx);
    }

    float wv[2], bv;
    fc_tensor_copy_out(wv, sizeof wv, w);
    fc_tensor_copy_out(&bv, sizeof bv, b);
    printf("learned w = (%.4f, %.4f), b = %.4f\n", wv[0], wv[1], bv);
    int ok = fabsf(wv[0] - 3.0f) < 1e-2f && fabsf(wv[1] + 2.0f) < 1e-2f && fabsf(bv - 0.5f) < 1e-2f;

    fc_optim_free(opt);
    fc_release(w);
    fc_release(b);
    fc_release(x);
    fc_release(y);
    fc_ctx_free(ctx);
    return ok ? 0 : 1;
}
