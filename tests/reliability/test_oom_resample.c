/* SPDX-License-Identifier: MIT */
/* test_oom_resample.c - out-of-memory sweep (oom_sweep.h: every
 * allocation failed in turn, no leak, the context usable after) over
 * fc_einsum (diagonals, broadcasting, an ellipsis, three operands: each
 * lowered step can be the one that fails) and fc_interpolate (nearest and
 * bilinear, strided and bf16 input), forward and backward, and a
 * create_graph second order through both. */
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
    fc_tensor *g = fc_ones(ctx, fc_tensor_dtype(out), fc_tensor_shape(out), fc_tensor_rank(out));
    return g ? fc_backward_with(ctx, out, g, false) : done(ctx);
}

static fc_status sc_einsum(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *a = fc_param_randn(ctx, FC_F32, (const int64_t[]){3, 3, 4}, 3, 1.0);
    fc_tensor *b = fc_param_randn(ctx, FC_F32, (const int64_t[]){4, 5}, 2, 1.0);
    fc_tensor *c = fc_param_randn(ctx, FC_F32, (const int64_t[]){1, 5}, 2, 1.0);
    fc_tensor *y = fc_einsum(ctx, "iij,jk,lk->il", (fc_tensor *[]){a, b, c}, 3);
    fc_status st = backward_ones(ctx, y);
    fc_tensor *d = fc_param_randn(ctx, FC_F64, (const int64_t[]){2, 1, 3, 4}, 4, 1.0);
    fc_tensor *e = fc_param_randn(ctx, FC_F64, (const int64_t[]){5, 4, 2}, 3, 1.0);
    if (st == FC_OK)
        st = backward_ones(ctx, fc_einsum(ctx, "...ij,...jk", (fc_tensor *[]){d, e}, 2));
    if (st == FC_OK) st = backward_ones(ctx, fc_einsum(ctx, "iij->", &a, 1));
    if (st == FC_OK) st = done(ctx);
    fc_scope_end(ctx);
    return st;
}

static fc_status sc_interpolate(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){2, 3, 5, 4}, 4, 1.0);
    fc_tensor *xt = fc_transpose(ctx, x, 2, 3);
    fc_interpolate_opts bl = {.mode = FC_INTERP_LINEAR, .size = {7, 9}, .align_corners = true};
    fc_interpolate_opts nn = {.scale = {1.5, 2}};
    fc_status st = backward_ones(ctx, fc_interpolate(ctx, xt, &bl));
    if (st == FC_OK) st = backward_ones(ctx, fc_interpolate(ctx, x, &nn));
    fc_tensor *h = fc_param_randn(ctx, FC_BF16, (const int64_t[]){1, 2, 6}, 3, 1.0);
    fc_interpolate_opts l1 = {.mode = FC_INTERP_LINEAR, .size = {11}};
    if (st == FC_OK) st = backward_ones(ctx, fc_interpolate(ctx, h, &l1));
    if (st == FC_OK) st = done(ctx);
    fc_scope_end(ctx);
    return st;
}

/* d/dx sum(G * G) with G = d sum(w * interpolate(einsum(x, x))) / dx
 * taken with create_graph: both ops' recorded forms. */
/* Each step checked before the next: an op given a NULL input (after
 * the fault) would record FC_ERR_NULL_ARG over the OOM. */
#define STEP(var, expr)                                                                            \
    if (st == FC_OK) {                                                                             \
        var = (expr);                                                                              \
        st = done(ctx);                                                                            \
    }

static fc_status sc_create_graph(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_status st = FC_OK;
    fc_interpolate_opts l1 = {.mode = FC_INTERP_LINEAR, .size = {5}};
    fc_tensor *x = NULL, *e = NULL, *y = NULL, *w = NULL, *p = NULL, *loss = NULL, *g = NULL;
    fc_tensor *gg = NULL, *l2 = NULL;
    STEP(x, fc_param_randn(ctx, FC_F64, (const int64_t[]){1, 2, 3}, 3, 1.0))
    STEP(e, fc_einsum(ctx, "nci,ncj->ncj", (fc_tensor *[]){x, x}, 2))
    STEP(y, fc_interpolate(ctx, e, &l1))
    STEP(w, fc_randn(ctx, FC_F64, (const int64_t[]){1, 2, 5}, 3))
    STEP(p, fc_mul(ctx, y, w))
    STEP(loss, fc_sum(ctx, p, NULL, 0, false))
    fc_autograd_grad_opts o = {.create_graph = true};
    if (st == FC_OK) st = fc_autograd_grad(ctx, &loss, NULL, 1, &x, 1, &o, &g);
    STEP(gg, fc_mul(ctx, g, g))
    STEP(l2, fc_sum(ctx, gg, NULL, 0, false))
    if (st == FC_OK) st = fc_backward(ctx, l2);
    if (st == FC_OK) st = done(ctx);
    fc_release(g);
    fc_scope_end(ctx);
    return st;
}

static const oom_scenario scenarios[] = {
    {"einsum", sc_einsum},
    {"interpolate", sc_interpolate},
    {"create_graph", sc_create_graph},
};

static void test_oom_resample_scenarios(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        clock_t t0 = clock();
        oom_result r = oom_sweep(&scenarios[i]);
        printf("oom sweep: %-14s completed at N=%ld after %ld faulted runs (%.2f s cpu)\n",
               scenarios[i].name, r.largest_n, r.failures, (double)(clock() - t0) / CLOCKS_PER_SEC);
        assert_true(r.largest_n > 0);
        assert_true(r.failures > 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oom_resample_scenarios),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
