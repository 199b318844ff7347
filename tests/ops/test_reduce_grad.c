/* SPDX-License-Identifier: MIT */
/* test_reduce_grad.c - fc_gradcheck (f64, central differences) of every
 * differentiable reduction of src/ops/reduce.c (sum, mean, prod, max, min,
 * var, std, logsumexp), each on contiguous inputs and on strided ones (a
 * transposed view, a narrowed view, a broadcast view made inside the
 * checked function by the layout ops; the ops under test see
 * non-contiguous inputs), and prod at and around zeros. cumsum's gradient
 * is in test_scan.c. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fct_grad.h"

#include "exec/tensor.h"
#include "fc_test_data.h"
#include "fucina/autograd.h"
#include "fucina/ops.h"

enum op { OP_SUM, OP_MEAN, OP_PROD, OP_MAX, OP_MIN, OP_VAR, OP_STD, OP_LSE };

typedef struct gc_case {
    const char *name;
    enum op op;
    enum fct_view view;
    int axes[3], naxes;
    bool keepdim;
    int correction; /* var/std */
} gc_case;

static fc_tensor *apply(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    const gc_case *c = user;
    fc_tensor *x = fct_viewed(ctx, in[0], c->view), *y = NULL;
    assert_non_null(x);
    assert_true(c->view == FCT_V_CONTIG || !fc_tensor_is_contiguous(x)); /* a real strided input */
    switch (c->op) {
    case OP_SUM:
        y = fc_sum(ctx, x, c->axes, c->naxes, c->keepdim);
        break;
    case OP_MEAN:
        y = fc_mean(ctx, x, c->axes, c->naxes, c->keepdim);
        break;
    case OP_PROD:
        y = fc_prod(ctx, x, c->axes, c->naxes, c->keepdim);
        break;
    case OP_MAX:
        y = fc_max(ctx, x, c->axes, c->naxes, c->keepdim);
        break;
    case OP_MIN:
        y = fc_min(ctx, x, c->axes, c->naxes, c->keepdim);
        break;
    case OP_VAR:
        y = fc_var(ctx, x, c->axes, c->naxes, c->correction, c->keepdim);
        break;
    case OP_STD:
        y = fc_std(ctx, x, c->axes, c->naxes, c->correction, c->keepdim);
        break;
    case OP_LSE:
        y = fc_logsumexp(ctx, x, c->axes, c->naxes, c->keepdim);
        break;
    }
    (void)n;
    fc_release(x);
    return y;
}

static void check(fc_ctx *ctx, gc_case *c, fc_tensor *const *in, int n) {
    fct_gradcheck_ok(ctx, apply, c, in, n, c->name, (int)c->view);
}

static void free_ctx(fc_ctx *ctx) {
    fc_ctx_stats s;
    fc_ctx_get_stats(ctx, &s);
    assert_int_equal(s.tensors_live, 0);
    fc_ctx_free(ctx);
}

/* The leaf shape for a 3-D reduction input under each view. */
static const int64_t leaf3[4][3] = {{3, 4, 5}, {4, 3, 5}, {3, 4, 7}, {1, 4, 5}};

static void test_grad_reductions(void **state) {
    (void)state;
    fc_ctx *ctx = fct_gc_ctx();
    gc_case cases[] = {
        {"sum axis 1", OP_SUM, 0, {1}, 1, false, 0},
        {"sum all", OP_SUM, 0, {0}, 0, false, 0},
        {"sum 0,2 keepdim", OP_SUM, 0, {0, 2}, 2, true, 0},
        {"mean axis 2", OP_MEAN, 0, {2}, 1, false, 0},
        {"mean all", OP_MEAN, 0, {0}, 0, true, 0},
        {"prod axis 1", OP_PROD, 0, {1}, 1, false, 0},
        {"max axis 0", OP_MAX, 0, {0}, 1, false, 0},
        {"max 1,2", OP_MAX, 0, {1, 2}, 2, true, 0},
        {"min axis -1", OP_MIN, 0, {-1}, 1, false, 0},
        {"min all", OP_MIN, 0, {0}, 0, false, 0},
        {"var axis 1", OP_VAR, 0, {1}, 1, false, 1},
        {"var 0,2 c0", OP_VAR, 0, {0, 2}, 2, true, 0},
        {"std all c1", OP_STD, 0, {0}, 0, false, 1},
        {"std axis 2 c2", OP_STD, 0, {2}, 1, false, 2},
        {"logsumexp 0,2", OP_LSE, 0, {0, 2}, 2, false, 0},
        {"logsumexp all", OP_LSE, 0, {0}, 0, false, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int v = FCT_V_CONTIG; v <= FCT_V_BROADCAST; v++) {
            cases[k].view = (enum fct_view)v;
            fc_scope_begin(ctx);
            fc_tensor *x = fct_random_f64(ctx, leaf3[v], 3, 100 + k, -1, 1);
            check(ctx, &cases[k], &x, 1);
            fc_scope_end(ctx);
        }
    free_ctx(ctx);
}

/* prod at and around zeros: exactly one zero in a set, two zeros, none */
static void test_grad_prod_with_zeros(void **state) {
    (void)state;
    fc_ctx *ctx = fct_gc_ctx();
    double v[12] = {0.5, 0,    2,   -1.5, /* one zero */
                    0,   1.2,  0,   3,    /* two zeros */
                    0.7, -0.9, 1.1, 2};
    fc_tensor *x = fc_tensor_from_data(ctx, FC_F64, (const int64_t[]){3, 4}, 2, v);
    gc_case c = {"prod zeros", OP_PROD, FCT_V_CONTIG, {1}, 1, false, 0};
    check(ctx, &c, &x, 1);
    gc_case all = {"prod zeros all", OP_PROD, FCT_V_CONTIG, {0}, 0, false, 0};
    check(ctx, &all, &x, 1);
    gc_case col = {"prod zeros axis 0", OP_PROD, FCT_V_TRANSPOSE, {0}, 1, false, 0};
    check(ctx, &col, &x, 1);
    fc_release(x);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_reductions),
        cmocka_unit_test(test_grad_prod_with_zeros),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
