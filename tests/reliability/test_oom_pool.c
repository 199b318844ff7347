/* SPDX-License-Identifier: MIT */
/* test_oom_pool.c - out-of-memory sweep over the pooling and channel-norm
 * ops, forward and backward (see oom_sweep.h for what is checked at every
 * N): max_pool2d (argmax kept), avg_pool2d, adaptive_avg_pool2d on strided
 * and 16-bit inputs; batch_norm in training (running statistics updated)
 * and eval mode; group_norm; a small conv-free CNN step through all of
 * them. batch_norm's scenario also checks that a call that failed left the
 * running statistics untouched (a failed call has no side effects). Last,
 * a steady-state training step through these ops makes no allocator call:
 * every buffer and scratch area comes back from the pool. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "oom_sweep.h"

static fc_status done(fc_ctx *ctx) { return fc_ctx_status(ctx); }

static fc_status backward_ones(fc_ctx *ctx, fc_tensor *out) {
    fc_status st = done(ctx);
    if (st != FC_OK) return st;
    fc_tensor *g = fc_ones(ctx, FC_F32, fc_tensor_shape(out), fc_tensor_rank(out));
    return g ? fc_backward_with(ctx, out, g, false) : done(ctx);
}

static fc_status sc_pooling(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){2, 3, 7, 6}, 4, 1.0);
    fc_tensor *xt = fc_transpose(ctx, x, 2, 3); /* strided: [2, 3, 6, 7] */
    fc_pool2d_opts mo = {.kernel = {3, 2},
                         .stride = {2, 2},
                         .padding = {1, 1},
                         .dilation = {1, 2},
                         .ceil_mode = true};
    fc_pool2d_opts ao = {
        .kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 1}, .exclude_pad = false};
    fc_tensor *a = fc_max_pool2d(ctx, xt, &mo);
    fc_tensor *b = fc_avg_pool2d(ctx, x, &ao);
    fc_tensor *c = fc_adaptive_avg_pool2d(ctx, x, (const int64_t[]){3, 4});
    fc_tensor *y = fc_add(ctx, fc_sum(ctx, a, NULL, 0, false), fc_sum(ctx, b, NULL, 0, false));
    y = fc_add(ctx, y, fc_sum(ctx, c, NULL, 0, false));
    fc_status st = backward_ones(ctx, y);
    /* 16-bit input: computed in f32 and rounded back */
    fc_tensor *h = fc_param_randn(ctx, FC_BF16, (const int64_t[]){3, 5, 5}, 3, 1.0);
    fc_pool2d_opts k2 = {.kernel = {2, 2}};
    if (st == FC_OK) st = backward_ones(ctx, fc_max_pool2d(ctx, h, &k2));
    if (st == FC_OK) st = backward_ones(ctx, fc_avg_pool2d(ctx, h, &k2));
    if (st == FC_OK) st = done(ctx);
    fc_scope_end(ctx);
    return st;
}

/* max_pool3d (dilation, ceil_mode, a transposed x) and avg_pool3d (with
 * padding, f32 and an unbatched bf16 input), forward and backward */
static fc_status sc_pooling3d(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){2, 3, 5, 7, 6}, 5, 1.0);
    fc_tensor *xt = fc_transpose(ctx, x, 3, 4); /* strided: [2, 3, 5, 6, 7] */
    fc_pool3d_opts mo = {.kernel = {3, 3, 2},
                         .stride = {2, 2, 2},
                         .padding = {1, 1, 1},
                         .dilation = {1, 1, 2},
                         .ceil_mode = true};
    fc_pool3d_opts ao = {.kernel = {2, 2, 3}, .stride = {1, 2, 2}, .padding = {1, 1, 1}};
    fc_tensor *a = fc_max_pool3d(ctx, xt, &mo);
    fc_tensor *b = fc_avg_pool3d(ctx, x, &ao);
    fc_tensor *y = fc_add(ctx, fc_sum(ctx, a, NULL, 0, false), fc_sum(ctx, b, NULL, 0, false));
    fc_status st = backward_ones(ctx, y);
    fc_tensor *h = fc_param_randn(ctx, FC_BF16, (const int64_t[]){3, 4, 5, 5}, 4, 1.0);
    fc_pool3d_opts k2 = {.kernel = {2, 2, 2}};
    if (st == FC_OK) st = backward_ones(ctx, fc_max_pool3d(ctx, h, &k2));
    if (st == FC_OK) st = backward_ones(ctx, fc_avg_pool3d(ctx, h, &k2));
    if (st == FC_OK) st = done(ctx);
    fc_scope_end(ctx);
    return st;
}

static fc_status sc_norms(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    const int64_t C = 4;
    fc_tensor *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){3, 4, 5, 2}, 4, 1.0);
    fc_tensor *w = fc_param_randn(ctx, FC_F32, &C, 1, 1.0);
    fc_tensor *b = fc_param_zeros(ctx, FC_F32, &C, 1);
    fc_tensor *rm = fc_zeros(ctx, FC_F32, &C, 1), *rv = fc_ones(ctx, FC_F32, &C, 1);
    fc_status st = done(ctx);
    uint32_t gm = rm ? fc_tensor_generation(rm) : 0, gv = rv ? fc_tensor_generation(rv) : 0;
    fc_tensor *y = fc_batch_norm(ctx, fc_transpose(ctx, x, 2, 3), w, b, rm, rv, true, 0.1, 1e-5);
    if (st == FC_OK && !y && (fc_tensor_generation(rm) != gm || fc_tensor_generation(rv) != gv)) {
        fc_scope_end(ctx);
        return FC_ERR_STATE; /* a failed call changed the running statistics */
    }
    if (st == FC_OK) st = backward_ones(ctx, y);
    if (st == FC_OK)
        st = backward_ones(ctx, fc_batch_norm(ctx, x, w, NULL, rm, rv, false, 0.1, 1e-5));
    fc_tensor *h = fc_param_randn(ctx, FC_F16, (const int64_t[]){2, 4, 3}, 3, 1.0);
    if (st == FC_OK)
        st = backward_ones(ctx, fc_batch_norm(ctx, h, NULL, NULL, rm, rv, true, 0.1, 1e-5));
    if (st == FC_OK) st = backward_ones(ctx, fc_group_norm(ctx, x, 2, w, b, 1e-5));
    if (st == FC_OK) st = backward_ones(ctx, fc_group_norm(ctx, h, 4, NULL, NULL, 1e-5));
    if (st == FC_OK) st = done(ctx);
    fc_scope_end(ctx);
    return st;
}

/* ---- a small CNN-shaped step ------------------------------------------------------------------
 */

typedef struct cnn {
    fc_tensor *w, *b, *rm, *rv, *gw, *gb, *head;
} cnn;

/* x [4, 6, 8, 8] -> batch_norm -> relu -> max_pool -> group_norm -> avg
 * pool -> adaptive [1, 1] -> linear head -> cross-entropy. */
static fc_tensor *cnn_loss(fc_ctx *ctx, const cnn *m, fc_tensor *x, fc_tensor *labels) {
    fc_pool2d_opts mp = {.kernel = {2, 2}},
                   ap = {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}};
    fc_tensor *h = fc_relu(ctx, fc_batch_norm(ctx, x, m->w, m->b, m->rm, m->rv, true, 0.1, 1e-5));
    h = fc_group_norm(ctx, fc_max_pool2d(ctx, h, &mp), 3, m->gw, m->gb, 1e-5);
    h = fc_adaptive_avg_pool2d(ctx, fc_avg_pool2d(ctx, h, &ap), (const int64_t[]){1, 1});
    h = fc_reshape(ctx, h, (const int64_t[]){4, 6}, 2);
    return fc_cross_entropy(ctx, fc_matmul(ctx, h, m->head), labels, NULL);
}

static cnn cnn_new(fc_ctx *ctx) {
    const int64_t C = 6;
    return (cnn){fc_param_randn(ctx, FC_F32, &C, 1, 1.0),
                 fc_param_zeros(ctx, FC_F32, &C, 1),
                 fc_zeros(ctx, FC_F32, &C, 1),
                 fc_ones(ctx, FC_F32, &C, 1),
                 fc_param_randn(ctx, FC_F32, &C, 1, 1.0),
                 fc_param_zeros(ctx, FC_F32, &C, 1),
                 fc_param_randn(ctx, FC_F32, (const int64_t[]){6, 3}, 2, 0.5)};
}

static fc_status sc_cnn(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    cnn m = cnn_new(ctx);
    fc_tensor *x = fc_randn(ctx, FC_F32, (const int64_t[]){4, 6, 8, 8}, 4);
    const int64_t lv[4] = {0, 2, 1, 2};
    fc_tensor *labels = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){4}, 1, lv);
    fc_tensor *loss = cnn_loss(ctx, &m, x, labels);
    fc_status st = done(ctx);
    if (st == FC_OK) st = fc_backward(ctx, loss);
    if (st == FC_OK) st = done(ctx);
    fc_scope_end(ctx);
    return st;
}

static const oom_scenario scenarios[] = {
    {"pooling", sc_pooling},
    {"pooling 3-d", sc_pooling3d},
    {"batch/group norm", sc_norms},
    {"cnn step", sc_cnn},
};

static void test_oom_pool_scenarios(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        clock_t t0 = clock();
        oom_result r = oom_sweep(&scenarios[i]);
        printf("oom sweep: %-18s completed at N=%ld after %ld faulted runs (%.2f s cpu)\n",
               scenarios[i].name, r.largest_n, r.failures, (double)(clock() - t0) / CLOCKS_PER_SEC);
        assert_true(r.largest_n > 0);
        assert_true(r.failures > 0);
    }
}

/* Training steps in steady state allocate nothing: the pool serves every
 * output, saved value, argmax and scratch buffer of these ops. */
static void test_oom_pool_steady_state_no_alloc(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 4});
    assert_non_null(ctx);
    cnn m = cnn_new(ctx);
    fc_tensor *x = fc_randn(ctx, FC_F32, (const int64_t[]){4, 6, 8, 8}, 4);
    const int64_t lv[4] = {0, 2, 1, 2};
    fc_tensor *labels = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){4}, 1, lv);
    fc_tensor *params[5] = {m.w, m.b, m.gw, m.gb, m.head};
    uint64_t before = 0;
    for (int step = 0; step < 5; step++) {
        if (step == 3) {
            fc_ctx_stats s;
            fc_ctx_get_stats(ctx, &s);
            before = s.alloc_calls;
        }
        fc_scope_begin(ctx);
        fc_zero_grad(params, 5);
        fc_tensor *loss = cnn_loss(ctx, &m, x, labels);
        assert_non_null(loss);
        assert_int_equal(fc_backward(ctx, loss), FC_OK);
        fc_scope_end(ctx);
    }
    fc_ctx_stats s;
    fc_ctx_get_stats(ctx, &s);
    assert_int_equal(s.alloc_calls, before);
    fc_tensor *all[9] = {m.w, m.b, m.rm, m.rv, m.gw, m.gb, m.head, x, labels};
    for (int i = 0; i < 9; i++)
        fc_release(all[i]);
    fc_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oom_pool_scenarios),
        cmocka_unit_test(test_oom_pool_steady_state_no_alloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
