/* SPDX-License-Identifier: MIT */
/* test_oom_conv.c - out-of-memory sweep over the convolutions (see
 * oom_sweep.h for what is checked at every N): conv2d, conv1d and
 * conv_transpose2d forward and backward with bias, groups, strides and
 * strided inputs, in f32 and f16 (the f32 copies the kernels make), a
 * batch cut into several column chunks, every matmul provider that was
 * built, and a gradcheck through conv2d in f64. Each scenario ends with the
 * first error recorded in the context, so a failed allocation anywhere in a
 * chain surfaces as FC_ERR_OOM. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "oom_sweep.h"

static fc_status done(fc_ctx *ctx) { return fc_ctx_status(ctx); }

/* backward from out with a gradient of ones, when everything so far worked */
static fc_status backward_ones(fc_ctx *ctx, fc_tensor *out) {
    fc_status st = done(ctx);
    if (st != FC_OK) return st;
    fc_tensor *g = fc_ones(ctx, FC_F32, fc_tensor_shape(out), fc_tensor_rank(out));
    return g ? fc_backward_with(ctx, out, g, false) : done(ctx);
}

/* conv2d (groups 2, stride 2, padding, bias, a transposed x) then
 * conv_transpose2d back, forward and backward, in dtype dt. */
static fc_status conv_chain(fc_ctx *ctx, fc_dtype dt) {
    fc_scope_begin(ctx);
    fc_tensor *xs = fc_param_randn(ctx, dt, (const int64_t[]){2, 4, 7, 6}, 4, 1.0);
    fc_tensor *x = fc_transpose(ctx, xs, 2, 3); /* [2, 4, 6, 7], strided */
    fc_tensor *w = fc_param_randn(ctx, dt, (const int64_t[]){6, 2, 3, 3}, 4, 0.2);
    fc_tensor *b = fc_param_randn(ctx, dt, (const int64_t[]){6}, 1, 0.2);
    fc_tensor *wt = fc_param_randn(ctx, dt, (const int64_t[]){6, 2, 2, 2}, 4, 0.2);
    fc_tensor *bt = fc_param_randn(ctx, dt, (const int64_t[]){4}, 1, 0.2);
    fc_conv2d_opts o = fc_conv2d_opts_default();
    o.stride[1] = 2, o.padding[0] = o.padding[1] = 1, o.groups = 2;
    fc_conv_transpose2d_opts t = fc_conv_transpose2d_opts_default();
    t.stride[0] = t.stride[1] = 2, t.groups = 2, t.output_padding[1] = 1;
    fc_tensor *y = fc_conv_transpose2d(ctx, fc_relu(ctx, fc_conv2d(ctx, x, w, b, &o)), wt, bt, &t);
    fc_status st = backward_ones(ctx, y);
    fc_scope_end(ctx);
    return st;
}

static fc_status sc_conv_f32(fc_ctx *ctx) { return conv_chain(ctx, FC_F32); }
static fc_status sc_conv_f16(fc_ctx *ctx) { return conv_chain(ctx, FC_F16); }

static fc_status sc_conv_ref(fc_ctx *ctx) {
    fc_status st = fc_ctx_set_backend(ctx, FC_BACKEND_REF);
    return st == FC_OK ? conv_chain(ctx, FC_F32) : st;
}

/* conv1d with dilation and "same" padding, and a 1x1 conv2d (read in place) */
static fc_status sc_conv1d_1x1(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){3, 4, 11}, 3, 1.0);
    fc_tensor *w = fc_param_randn(ctx, FC_F32, (const int64_t[]){4, 2, 4}, 3, 0.3);
    fc_conv1d_opts o = {.stride = 1, .dilation = 2, .groups = 2, .padding_same = true};
    fc_status st = backward_ones(ctx, fc_conv1d(ctx, x, w, NULL, &o));
    fc_tensor *x2 = fc_param_randn(ctx, FC_F32, (const int64_t[]){2, 6, 5, 5}, 4, 1.0);
    fc_tensor *w2 = fc_param_randn(ctx, FC_F32, (const int64_t[]){3, 6, 1, 1}, 4, 0.3);
    if (st == FC_OK) st = backward_ones(ctx, fc_conv2d(ctx, x2, w2, NULL, NULL));
    fc_scope_end(ctx);
    return st;
}

/* 576 column rows of 26x25 positions: 1.4 MB per image, so a batch of 5
 * runs as chunks of 2, 2 and 1 images. */
static fc_status sc_conv_chunks(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){5, 64, 26, 25}, 4, 1.0);
    fc_tensor *w = fc_param_randn(ctx, FC_F32, (const int64_t[]){2, 64, 3, 3}, 4, 0.1);
    fc_conv2d_opts o = fc_conv2d_opts_default();
    o.padding[0] = o.padding[1] = 1;
    fc_status st = backward_ones(ctx, fc_conv2d(ctx, x, w, NULL, &o));
    fc_scope_end(ctx);
    return st;
}

static fc_tensor *gc_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n, (void)user;
    fc_conv2d_opts o = fc_conv2d_opts_default();
    o.padding[1] = 1, o.stride[0] = 2;
    return fc_conv2d(ctx, in[0], in[1], in[2], &o);
}

static fc_status sc_gradcheck(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *in[3] = {fc_randn(ctx, FC_F64, (const int64_t[]){1, 2, 4, 3}, 4),
                        fc_randn(ctx, FC_F64, (const int64_t[]){2, 2, 2, 2}, 4),
                        fc_randn(ctx, FC_F64, (const int64_t[]){2}, 1)};
    fc_gradcheck_report rep;
    fc_status st = done(ctx);
    if (st == FC_OK)
        st = fc_gradcheck(ctx, gc_fn, NULL, in, 3, &(fc_gradcheck_opts){.check_all_f64 = true},
                          &rep);
    if (st == FC_OK && rep.checked != 24 + 16 + 2)
        st = fc_ctx_fail(ctx, FC_ERR_STATE, "gradcheck: %lld elements checked, not 42",
                         (long long)rep.checked);
    fc_scope_end(ctx);
    return st;
}

/* conv3d (groups 2, strides, depth padding, dilation, bias, a transposed
 * x) forward and backward, in f32 and bf16 (widened to f32 inside), on
 * both of its paths (src/ops/conv3d.c) */
static fc_status sc_conv3d(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_status st = FC_OK;
    for (int k = 0; k < 2 && st == FC_OK; k++) {
        fc_dtype dt = k == 0 ? FC_F32 : FC_BF16;
        fc_tensor *xs = fc_param_randn(ctx, dt, (const int64_t[]){2, 4, 5, 6, 5}, 5, 1.0);
        fc_tensor *x = fc_transpose(ctx, xs, 3, 4); /* [2, 4, 5, 5, 6], strided */
        fc_tensor *w = fc_param_randn(ctx, dt, (const int64_t[]){6, 2, 3, 2, 3}, 5, 0.2);
        fc_tensor *b = fc_param_randn(ctx, dt, (const int64_t[]){6}, 1, 0.2);
        fc_conv3d_opts o = {
            .stride = {2, 1, 2}, .padding = {1, 0, 1}, .dilation = {1, 2, 1}, .groups = 2};
        st = backward_ones(ctx, fc_conv3d(ctx, x, w, b, &o));
    }
    /* a depth padding past the kernel's reach takes the per-tap path */
    fc_tensor *x1 = fc_param_randn(ctx, FC_F32, (const int64_t[]){1, 2, 3, 4, 4}, 5, 1.0);
    fc_tensor *w1 = fc_param_randn(ctx, FC_F32, (const int64_t[]){3, 2, 1, 2, 2}, 5, 0.2);
    fc_conv3d_opts o1 = {.stride = {2, 1, 1}, .padding = {1, 0, 0}};
    if (st == FC_OK) st = backward_ones(ctx, fc_conv3d(ctx, x1, w1, NULL, &o1));
    fc_scope_end(ctx);
    return st;
}

static const oom_scenario scenarios[] = {
    {"conv f32 (auto provider)", sc_conv_f32}, {"conv f16", sc_conv_f16},
    {"conv f32 (ref provider)", sc_conv_ref},  {"conv1d, 1x1 conv2d", sc_conv1d_1x1},
    {"conv column chunks", sc_conv_chunks},    {"conv gradcheck", sc_gradcheck},
    {"conv3d f32, bf16", sc_conv3d},
};

static void test_oom_conv_scenarios(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        clock_t t0 = clock();
        oom_result r = oom_sweep(&scenarios[i]);
        printf("oom sweep: %-26s completed at N=%ld after %ld faulted runs (%.2f s cpu)\n",
               scenarios[i].name, r.largest_n, r.failures, (double)(clock() - t0) / CLOCKS_PER_SEC);
        assert_true(r.largest_n > 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oom_conv_scenarios),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
