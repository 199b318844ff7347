/* SPDX-License-Identifier: MIT */
/* test_pool_grad.c - fc_gradcheck (f64 central differences) of
 * max_pool2d, avg_pool2d and adaptive_avg_pool2d on random geometries
 * (kernel, stride, padding, dilation, ceil_mode, exclude_pad,
 * divisor_override, batch of one, unbatched input) and on contiguous,
 * transposed, narrowed and broadcast inputs. Max pooling's inputs are
 * spread out so no two elements of a window are within the
 * finite-difference step (the gradient is only defined away from ties). */
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

enum kind { K_MAX, K_AVG, K_ADAPTIVE };
enum view { V_CONTIG, V_TRANSPOSE, V_NARROW, V_BROADCAST, V_COUNT };

typedef struct gc_case {
    enum kind kind;
    enum view view;
    fc_pool2d_opts o;
    int64_t out[2];
} gc_case;

/* The input as the op sees it: a view of the leaf made by the layout ops.
 * Transpose swaps H and W; narrow drops the first and last column;
 * broadcast expands a leading axis of 1 to 2. */
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
    fc_tensor *x = viewed(ctx, in[0], c->view), *y = NULL;
    assert_non_null(x);
    assert_true(c->view == V_CONTIG || !fc_tensor_is_contiguous(x));
    switch (c->kind) {
    case K_MAX:
        y = fc_max_pool2d(ctx, x, &c->o);
        break;
    case K_AVG:
        y = fc_avg_pool2d(ctx, x, &c->o);
        break;
    default:
        y = fc_adaptive_avg_pool2d(ctx, x, c->out);
        break;
    }
    fc_release(x);
    return y;
}

/* n distinct values 0.1 apart, shuffled: no near ties for max pooling */
static fc_tensor *leaf(fc_ctx *ctx, const int64_t *shape, int rank, uint64_t seed) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    double *v = malloc(sizeof *v * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = 0.1 * (double)i - 0.05 * (double)n;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(fc_test_splitmix64(&seed) % (uint64_t)(i + 1));
        double t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    fc_tensor *t = fc_tensor_from_data(ctx, FC_F64, shape, rank, v);
    free(v);
    assert_non_null(t);
    return t;
}

static int64_t pick(uint64_t *s, int64_t lo, int64_t hi) {
    return lo + (int64_t)(fc_test_splitmix64(s) % (uint64_t)(hi - lo + 1));
}

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    double q = (double)(in + 2 * p - d * (k - 1) - 1) / (double)s;
    int64_t o = (int64_t)(ceil_mode ? ceil(q) : floor(q)) + 1;
    if (ceil_mode && (o - 1) * s >= in + p) o--;
    return o;
}

/* One random case of kind k: geometry, view and the leaf's shape. */
static void random_case(enum kind k, uint64_t *s, gc_case *c, int64_t *shape, int *rank) {
    for (;;) {
        *c = (gc_case){.kind = k, .view = (enum view)pick(s, 0, V_COUNT - 1)};
        int64_t hw[2] = {pick(s, 1, 6), pick(s, 1, 6)};
        c->o.ceil_mode = pick(s, 0, 1);
        c->o.exclude_pad = !(pick(s, 0, 1));
        c->o.divisor_override = k == K_AVG && pick(s, 0, 3) == 0 ? pick(s, 1, 5) : 0;
        bool ok = true;
        for (int a = 0; a < 2; a++) {
            c->o.kernel[a] = pick(s, 1, 3);
            c->o.stride[a] = pick(s, 0, 2);
            c->o.padding[a] = pick(s, 0, c->o.kernel[a] / 2);
            c->o.dilation[a] = k == K_MAX ? pick(s, 1, 2) : 1;
            c->out[a] = pick(s, 1, 4);
            int64_t st = c->o.stride[a] ? c->o.stride[a] : c->o.kernel[a];
            if (k != K_ADAPTIVE && out_size(hw[a], c->o.kernel[a], st, c->o.padding[a],
                                            c->o.dilation[a], c->o.ceil_mode) < 1)
                ok = false;
        }
        /* views of a single row or column would still be contiguous */
        if (!ok || ((c->view == V_TRANSPOSE || c->view == V_NARROW) && (hw[0] < 2 || hw[1] < 2)))
            continue;
        bool batched = c->view == V_BROADCAST || pick(s, 0, 2) != 0;
        *rank = batched ? 4 : 3;
        int r = 0;
        if (batched) shape[r++] = c->view == V_BROADCAST ? 1 : pick(s, 1, 2);
        shape[r++] = pick(s, 1, 2);
        shape[r++] = c->view == V_TRANSPOSE ? hw[1] : hw[0];
        shape[r++] = c->view == V_TRANSPOSE ? hw[0] : hw[1] + (c->view == V_NARROW ? 2 : 0);
        return;
    }
}

static void sweep(enum kind k, int cases) {
    fc_ctx_opts co = {.threads = 2, .seed = 1};
    fc_ctx *ctx = fc_ctx_new(&co);
    assert_non_null(ctx);
    uint64_t s = 77 + (uint64_t)k;
    for (int t = 0; t < cases; t++) {
        gc_case c;
        int64_t shape[4];
        int rank;
        random_case(k, &s, &c, shape, &rank);
        fc_scope_begin(ctx);
        fc_tensor *in = leaf(ctx, shape, rank, (uint64_t)t);
        fc_gradcheck_opts o = {.check_all_f64 = true, .seed = (uint64_t)t};
        fc_gradcheck_report rep;
        fc_status st = fc_gradcheck(ctx, apply, &c, &in, 1, &o, &rep);
        if (st != FC_OK)
            fail_msg("case %d (kind %d, view %d, kernel [%lld,%lld]): %s", t, (int)k, (int)c.view,
                     (long long)c.o.kernel[0], (long long)c.o.kernel[1], fc_ctx_error(ctx));
        assert_true(rep.passed);
        assert_true(rep.checked > 0);
        fc_scope_end(ctx);
    }
    free_ctx(ctx);
}

static void test_pool_grad_max(void **state) {
    (void)state;
    sweep(K_MAX, 40);
}

static void test_pool_grad_avg(void **state) {
    (void)state;
    sweep(K_AVG, 40);
}

static void test_pool_grad_adaptive(void **state) {
    (void)state;
    sweep(K_ADAPTIVE, 30);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_grad_max),
        cmocka_unit_test(test_pool_grad_avg),
        cmocka_unit_test(test_pool_grad_adaptive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
