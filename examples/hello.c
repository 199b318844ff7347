/* SPDX-License-Identifier: MIT */
/* hello.c: one gradient step on a tiny least-squares problem */
#include <fucina.h>
#include <stdio.h>

int main(void) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.seed = 1});
    fc_tensor *w = fc_param_randn(ctx, FC_F32, (const int64_t[]){3, 1}, 2, 0.1);
    fc_optim *opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_SGD, .lr = 0.02}, &w, 1);
    float xs[] = {1, 2, 3, 4, 5, 6}, ys[] = {1, 2};
    for (int step = 0; step < 100; step++) {
        fc_scope_begin(ctx);                      /* everything below is released at the end */
        fc_tensor *x = fc_tensor_from_data(ctx, FC_F32, (const int64_t[]){2, 3}, 2, xs);
        fc_tensor *y = fc_tensor_from_data(ctx, FC_F32, (const int64_t[]){2, 1}, 2, ys);
        fc_tensor *loss = fc_mse_loss(ctx, fc_matmul(ctx, x, w), y, FC_REDUCE_MEAN);
        fc_optim_zero_grad(opt);
        if (fc_backward(ctx, loss) != FC_OK || fc_optim_step(opt) != FC_OK) {
            fprintf(stderr, "%s\n", fc_ctx_error(ctx));   /* e.g. "matmul: shapes [2,3] and [4,1] ..." */
            return 1;
        }
        double l;
        if (step % 20 == 0 && fc_tensor_item(loss, &l) == FC_OK) printf("step %d loss %.6f\n", step, l);
        fc_scope_end(ctx);
    }
    fc_optim_free(opt);
    fc_release(w);
    fc_ctx_free(ctx);
    return 0;
}
