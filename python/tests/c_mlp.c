/* SPDX-License-Identifier: MIT */
/* The C half of test_train.py's bit-for-bit check: a 4-8-3 tanh MLP trained
 * with Adam on fixed data for 20 steps, every number from an integer
 * formula. Prints each step's loss and then every parameter's elements as
 * the hex of their f32 bits, one per line; the Python half does the same
 * steps through the binding and must print the same lines. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fucina.h"

#define N 16
#define IN 4
#define HID 8
#define OUT 3

static float w_at(int k, int salt) { return (float)((k * 13 + salt) % 17 - 8) / 16.0f; }

static void print_bits(fc_tensor *t) {
    int64_t n = fc_tensor_numel(t);
    float v[64];
    if (n > 64 || fc_tensor_copy_out(v, (size_t)n * sizeof v[0], t) != FC_OK)
        return;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], sizeof u);
        printf("%08" PRIx32 "\n", u);
    }
}

int main(void) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 7});
    if (!ctx)
        return 1;
    float x[N * IN], w1[HID * IN], b1[HID], w2[OUT * HID], b2[OUT];
    int64_t y[N];
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < IN; j++)
            x[i * IN + j] = (float)((i * 7 + j * 3) % 11 - 5) / 4.0f;
        y[i] = (i * 5) % 3;
    }
    for (int k = 0; k < HID * IN; k++)
        w1[k] = w_at(k, 1);
    for (int k = 0; k < HID; k++)
        b1[k] = w_at(k, 2);
    for (int k = 0; k < OUT * HID; k++)
        w2[k] = w_at(k, 3);
    for (int k = 0; k < OUT; k++)
        b2[k] = w_at(k, 4);
    fc_tensor *X = fc_tensor_from_data(ctx, FC_F32, (int64_t[]){N, IN}, 2, x);
    fc_tensor *Y = fc_tensor_from_data(ctx, FC_I64, (int64_t[]){N}, 1, y);
    fc_tensor *p[4] = {
        fc_param_from_data(ctx, FC_F32, (int64_t[]){HID, IN}, 2, w1),
        fc_param_from_data(ctx, FC_F32, (int64_t[]){HID}, 1, b1),
        fc_param_from_data(ctx, FC_F32, (int64_t[]){OUT, HID}, 2, w2),
        fc_param_from_data(ctx, FC_F32, (int64_t[]){OUT}, 1, b2),
    };
    fc_optim *opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 0.01}, p, 4);
    if (!opt)
        return 1;
    for (int step = 0; step < 20; step++) {
        fc_scope_begin(ctx);
        fc_tensor *h = fc_tanh(ctx, fc_linear(ctx, X, p[0], p[1]));
        fc_tensor *loss = fc_cross_entropy(ctx, fc_linear(ctx, h, p[2], p[3]), Y, NULL);
        if (fc_backward(ctx, loss) != FC_OK || fc_optim_step(opt) != FC_OK)
            return 1;
        float l;
        fc_tensor_copy_out(&l, sizeof l, loss);
        uint32_t u;
        memcpy(&u, &l, sizeof u);
        printf("loss %08" PRIx32 "\n", u);
        fc_optim_zero_grad(opt);
        fc_scope_end(ctx);
    }
    for (int i = 0; i < 4; i++)
        print_bits(p[i]);
    fc_optim_free(opt);
    fc_ctx_free(ctx);
    return 0;
}
