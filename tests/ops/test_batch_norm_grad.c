/* SPDX-License-Identifier: MIT */
/* test_batch_norm_grad.c - fc_gradcheck (f64 central differences) of
 * batch_norm in training mode (with and without weight/bias, with and
 * without running statistics, which training updates but the output does
 * not read) and in eval mode, and of group_norm with several group counts,
 * on contiguous, transposed, narrowed and broadcast inputs of rank 2 to 4,
 * batch of one included. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fc_test_data.h"
#include "fct_f64.h"

enum view { V_CONTIG, V_TRANSPOSE, V_NARROW, V_BROADCAST, V_COUNT };

typedef struct gc_case {
    const char *name;
    enum view view;
    int64_t groups; /* 0: batch_norm */
    bool train, affine;
    fc_tensor *rm, *rv; /* batch_norm's running statistics, NULL allowed (training) */
} gc_case;

/* Transpose swaps the last two axes; narrow drops the first and last
 * element of the last axis; broadcast expands a batch of 1 to 2. */
static fc_tensor *viewed(fc_ctx *ctx, fc_tensor *x, enum view v) {
    int r = fc_tensor_rank(x);
    int64_t shape[4];
    memcpy(shape, fc_tensor_shape(x), sizeof(int64_t) * (size_t)r);
    switch (v) {
    case V_TRANSPOSE:
        return fc_transpose(ctx, x, r - 2, r - 1);
    case V_NARROW:
        return fc_narrow(ctx, x, r - 1, 1, shape[r - 1] - 2);
    case V_BROADCAST:
        shape[0] = 2;
        return fc_expand(ctx, x, shape, r);
    default:
        return fc_retain(x);
    }
}

static fc_tensor *apply(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    const gc_case *c = user;
    (void)n;
    fc_tensor *x = viewed(ctx, in[0], c->view);
    assert_non_null(x);
    assert_true(c->view == V_CONTIG || !fc_tensor_is_contiguous(x));
    fc_tensor *w = c->affine ? in[1] : NULL, *b = c->affine ? in[2] : NULL;
    fc_tensor *y = c->groups ? fc_group_norm(ctx, x, c->groups, w, b, 1e-5)
                             : fc_batch_norm(ctx, x, w, b, c->rm, c->rv, c->train, 0.1, 1e-5);
    fc_release(x);
    return y;
}

static fc_tensor *random_f64(fc_ctx *ctx, const int64_t *shape, int rank, uint64_t seed, double lo,
                             double hi) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    double *v = malloc(sizeof *v * (size_t)n);
    fill_random(v, n, seed, lo, hi);
    fc_tensor *t = fc_tensor_from_data(ctx, FC_F64, shape, rank, v);
    free(v);
    assert_non_null(t);
    return t;
}

static void check(fc_ctx *ctx, gc_case *c, fc_tensor *const *in) {
    fc_gradcheck_opts o = {.check_all_f64 = true, .seed = 3};
    fc_gradcheck_report rep;
    fc_status st = fc_gradcheck(ctx, apply, c, in, c->affine ? 3 : 1, &o, &rep);
    if (st != FC_OK) fail_msg("%s (view %d): %s", c->name, (int)c->view, fc_ctx_error(ctx));
    assert_true(rep.passed);
    assert_true(rep.checked > 0);
}

/* The leaf's shape for a view of logical shape [n, c, h, w] (rank 4) or
 * [n, c, h] (rank 3) or [n, c] (rank 2, contiguous and broadcast only). */
static int leaf_shape(enum view v, const int64_t *logical, int rank, int64_t *shape) {
    memcpy(shape, logical, sizeof(int64_t) * (size_t)rank);
    if (v == V_TRANSPOSE) {
        shape[rank - 2] = logical[rank - 1];
        shape[rank - 1] = logical[rank - 2];
    } else if (v == V_NARROW) {
        shape[rank - 1] += 2;
    } else if (v == V_BROADCAST) {
        shape[0] = 1;
    }
    return rank;
}

static void sweep(bool group) {
    fc_ctx_opts co = {.threads = 2, .seed = 1};
    fc_ctx *ctx = fc_ctx_new(&co);
    assert_non_null(ctx);
    const int64_t logical[4][4] = {{2, 3, 3, 4}, {1, 4, 3, 3}, {3, 6, 4}, {4, 6}};
    const int ranks[4] = {4, 4, 3, 2};
    for (int v = V_CONTIG; v < V_COUNT; v++)
        for (int s = 0; s < 4; s++) {
            if (ranks[s] == 2 && (v == V_TRANSPOSE || v == V_NARROW)) continue;
            fc_scope_begin(ctx);
            int64_t shape[4], C = logical[s][1];
            int r = leaf_shape((enum view)v, logical[s], ranks[s], shape);
            fc_tensor *in[3] = {random_f64(ctx, shape, r, 40 + (uint64_t)s, -2, 2),
                                random_f64(ctx, &C, 1, 41, 0.5, 1.5),
                                random_f64(ctx, &C, 1, 42, -1, 1)};
            if (group) {
                /* one group, a middle divisor of C, one channel per group */
                const int64_t gs[3] = {1, C % 3 == 0 && C > 3 ? 3 : C % 2 == 0 ? 2 : C, C};
                for (int k = 0; k < 3; k++) {
                    gc_case c = {"group_norm", (enum view)v, gs[k], true, k != 1, NULL, NULL};
                    check(ctx, &c, in);
                }
            } else {
                fc_tensor *rm = random_f64(ctx, &C, 1, 43, -0.5, 0.5);
                fc_tensor *rv = random_f64(ctx, &C, 1, 44, 0.5, 2);
                gc_case cases[] = {
                    {"batch_norm train", (enum view)v, 0, true, true, NULL, NULL},
                    {"batch_norm train bare", (enum view)v, 0, true, false, NULL, NULL},
                    {"batch_norm train running", (enum view)v, 0, true, true, rm, rv},
                    {"batch_norm eval", (enum view)v, 0, false, true, rm, rv},
                    {"batch_norm eval bare", (enum view)v, 0, false, false, rm, rv},
                };
                for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
                    check(ctx, &cases[k], in);
            }
            fc_scope_end(ctx);
        }
    free_ctx(ctx);
}

static void test_batch_norm_grad_batch(void **state) {
    (void)state;
    sweep(false);
}

static void test_batch_norm_grad_group(void **state) {
    (void)state;
    sweep(true);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_norm_grad_batch),
        cmocka_unit_test(test_batch_norm_grad_group),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
