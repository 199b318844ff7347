/* SPDX-License-Identifier: MIT */
/* test_conv_grad.c - fc_gradcheck (f64 central differences) of conv1d,
 * conv2d and conv_transpose2d on random configurations: stride, padding,
 * padding_same with odd and even kernels, dilation, groups, depthwise,
 * output_padding, with and without bias, batches of 1 and more, and x and
 * weight reaching the op as strided views of the checked leaves (x with
 * its last two axes swapped, the weight narrowed along its last axis).
 * Every configuration is printed on failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fct_f64.h"
#include "fucina.h"

enum kind { K_CONV2D, K_CONV1D, K_TRANSPOSE };

typedef struct cfg {
    enum kind kind;
    int64_t n, cin, cout, h, w, kh, kw, groups;
    int64_t stride[2], pad[2], dil[2], outpad[2];
    bool same, bias, x_view, w_view;
} cfg;

static uint64_t rng_state = 2024;
static int64_t pick(int64_t lo, int64_t hi) {
    return lo + (int64_t)(fc_test_splitmix64(&rng_state) % (uint64_t)(hi - lo + 1));
}

/* Output size along axis i, or 0 when the configuration has none. */
static int64_t out_len(const cfg *c, int i) {
    int64_t in = i ? c->w : c->h, k = i ? c->kw : c->kh, ext = c->dil[i] * (k - 1);
    if (c->kind == K_TRANSPOSE)
        return (in - 1) * c->stride[i] - 2 * c->pad[i] + ext + c->outpad[i] + 1;
    if (c->same) return in;
    int64_t padded = in + 2 * c->pad[i] - ext - 1;
    return padded < 0 ? 0 : padded / c->stride[i] + 1;
}

/* A random valid configuration, small enough for 2 * numel + 1 calls. */
static cfg random_cfg(enum kind k, int index) {
    for (;;) {
        cfg c = {.kind = k, .n = index % 3 == 0 ? 1 : 2, .groups = pick(1, 2)};
        c.cin = c.groups * pick(1, 2), c.cout = c.groups * pick(1, 2);
        if (index % 4 == 3) c.cin = c.cout = c.groups = 3; /* depthwise */
        c.h = k == K_CONV1D ? 1 : pick(2, 5), c.w = pick(2, 6);
        c.kh = k == K_CONV1D ? 1 : pick(1, 3), c.kw = pick(1, 3);
        for (int i = 0; i < 2; i++) {
            bool flat = k == K_CONV1D && i == 0;
            c.stride[i] = flat ? 1 : pick(1, 2);
            c.dil[i] = flat ? 1 : pick(1, 2);
            c.pad[i] = flat ? 0 : pick(0, 1);
            int64_t lim = c.stride[i] > c.dil[i] ? c.stride[i] : c.dil[i];
            c.outpad[i] = k == K_TRANSPOSE ? pick(0, lim - 1) : 0;
        }
        c.same = k != K_TRANSPOSE && index % 5 == 2;
        if (c.same) c.stride[0] = c.stride[1] = 1;
        c.bias = index % 2 == 0, c.x_view = index % 3 != 1, c.w_view = index % 2 == 1;
        if (out_len(&c, 0) >= 1 && out_len(&c, 1) >= 1) return c;
    }
}

static void describe(const cfg *c, char *buf, size_t cap) {
    snprintf(buf, cap,
             "kind %d x [%lld,%lld,%lld,%lld] k %lldx%lld cout %lld groups %lld stride %lld,%lld "
             "pad %lld,%lld dil %lld,%lld outpad %lld,%lld same %d bias %d views %d,%d",
             (int)c->kind, (long long)c->n, (long long)c->cin, (long long)c->h, (long long)c->w,
             (long long)c->kh, (long long)c->kw, (long long)c->cout, (long long)c->groups,
             (long long)c->stride[0], (long long)c->stride[1], (long long)c->pad[0],
             (long long)c->pad[1], (long long)c->dil[0], (long long)c->dil[1],
             (long long)c->outpad[0], (long long)c->outpad[1], c->same, c->bias, c->x_view,
             c->w_view);
}

/* The op on the views of the leaves: x's leaf stores the last two axes
 * swapped, the weight's leaf has one extra column on its last axis. */
static fc_tensor *apply(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    const cfg *c = user;
    int r = fc_tensor_rank(in[0]);
    fc_tensor *x = c->x_view ? fc_transpose(ctx, in[0], r - 2, r - 1) : fc_retain(in[0]);
    int64_t kw = fc_tensor_shape(in[1])[r - 1] - (c->w_view ? 1 : 0);
    fc_tensor *w = c->w_view ? fc_narrow(ctx, in[1], r - 1, 1, kw) : fc_retain(in[1]);
    fc_tensor *b = n > 2 ? in[2] : NULL, *y = NULL;
    assert_non_null(x);
    assert_non_null(w);
    if (c->kind == K_CONV1D) {
        fc_conv1d_opts o = {c->stride[1], c->pad[1], c->dil[1], c->groups, c->same};
        y = fc_conv1d(ctx, x, w, b, &o);
    } else if (c->kind == K_TRANSPOSE) {
        fc_conv_transpose2d_opts o = {{c->stride[0], c->stride[1]},
                                      {c->pad[0], c->pad[1]},
                                      {c->outpad[0], c->outpad[1]},
                                      {c->dil[0], c->dil[1]},
                                      c->groups};
        y = fc_conv_transpose2d(ctx, x, w, b, &o);
    } else {
        fc_conv2d_opts o = {{c->stride[0], c->stride[1]},
                            {c->pad[0], c->pad[1]},
                            {c->dil[0], c->dil[1]},
                            c->groups,
                            c->same};
        y = fc_conv2d(ctx, x, w, b, &o);
    }
    fc_release(x);
    fc_release(w);
    return y;
}

static fc_tensor *random_leaf(fc_ctx *ctx, const int64_t *shape, int rank, uint64_t seed) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    double *v = malloc(sizeof *v * (size_t)n);
    fill_random(v, n, seed, -1, 1);
    fc_tensor *t = from_f64(ctx, FC_F64, shape, rank, v);
    free(v);
    return t;
}

static void gradcheck_cfg(fc_ctx *ctx, const cfg *c, uint64_t seed) {
    bool one = c->kind == K_CONV1D, t = c->kind == K_TRANSPOSE;
    int rank = one ? 3 : 4;
    int64_t xs[4] = {c->n, c->cin, c->h, c->w};
    int64_t ws[4] = {t ? c->cin : c->cout, (t ? c->cout : c->cin) / c->groups, c->kh, c->kw};
    if (one) xs[2] = c->w, ws[2] = c->kw;
    if (c->x_view) { /* stored with the last two axes swapped */
        int64_t s = xs[rank - 1];
        xs[rank - 1] = xs[rank - 2], xs[rank - 2] = s;
    }
    if (c->w_view) ws[rank - 1] += 1;
    fc_scope_begin(ctx);
    fc_tensor *in[3] = {random_leaf(ctx, xs, rank, seed), random_leaf(ctx, ws, rank, seed + 1),
                        random_leaf(ctx, &c->cout, 1, seed + 2)};
    fc_gradcheck_opts o = {.check_all_f64 = true, .seed = seed};
    fc_gradcheck_report rep;
    fc_status st = fc_gradcheck(ctx, apply, (void *)c, in, c->bias ? 3 : 2, &o, &rep);
    if (st != FC_OK || !rep.passed) {
        char d[400];
        describe(c, d, sizeof d);
        fail_msg("%s: %s", d, fc_ctx_error(ctx));
    }
    assert_true(rep.checked > 0);
    fc_scope_end(ctx);
}

static void random_gradchecks(enum kind k, int count) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 1});
    assert_non_null(ctx);
    for (int i = 0; i < count; i++) {
        cfg c = random_cfg(k, i);
        gradcheck_cfg(ctx, &c, 500 + (uint64_t)i * 11);
    }
    free_ctx(ctx);
}

static void test_conv2d_gradcheck_random(void **state) {
    (void)state;
    random_gradchecks(K_CONV2D, 16);
}

static void test_conv1d_gradcheck_random(void **state) {
    (void)state;
    random_gradchecks(K_CONV1D, 12);
}

static void test_conv_transpose2d_gradcheck_random(void **state) {
    (void)state;
    random_gradchecks(K_TRANSPOSE, 16);
}

/* Fixed shapes that random draws may miss: an even kernel with "same"
 * (the larger half of the padding after), stride above the kernel (input
 * elements no output reads, gradient 0), and a 1x1 kernel read in place. */
static void test_conv_gradcheck_edge_cases(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 1});
    const cfg cases[] = {
        {.kind = K_CONV2D,
         .n = 1,
         .cin = 2,
         .cout = 2,
         .h = 4,
         .w = 5,
         .kh = 2,
         .kw = 4,
         .groups = 1,
         .stride = {1, 1},
         .dil = {1, 2},
         .same = true,
         .bias = true,
         .x_view = true,
         .w_view = true},
        {.kind = K_CONV2D,
         .n = 2,
         .cin = 2,
         .cout = 4,
         .h = 7,
         .w = 6,
         .kh = 2,
         .kw = 1,
         .groups = 2,
         .stride = {3, 4},
         .pad = {1, 0},
         .dil = {1, 1},
         .bias = true},
        {.kind = K_CONV2D,
         .n = 2,
         .cin = 4,
         .cout = 2,
         .h = 3,
         .w = 3,
         .kh = 1,
         .kw = 1,
         .groups = 2,
         .stride = {1, 1},
         .dil = {1, 1},
         .x_view = true},
        {.kind = K_TRANSPOSE,
         .n = 1,
         .cin = 2,
         .cout = 3,
         .h = 3,
         .w = 2,
         .kh = 3,
         .kw = 2,
         .groups = 1,
         .stride = {3, 2},
         .pad = {1, 1},
         .dil = {2, 1},
         .outpad = {2, 1},
         .bias = true,
         .w_view = true},
        {.kind = K_CONV1D,
         .n = 1,
         .cin = 3,
         .cout = 3,
         .h = 1,
         .w = 9,
         .kh = 1,
         .kw = 4,
         .groups = 3,
         .stride = {1, 1},
         .dil = {1, 1},
         .same = true,
         .x_view = true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        gradcheck_cfg(ctx, &cases[i], 900 + (uint64_t)i);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv2d_gradcheck_random),
        cmocka_unit_test(test_conv1d_gradcheck_random),
        cmocka_unit_test(test_conv_transpose2d_gradcheck_random),
        cmocka_unit_test(test_conv_gradcheck_edge_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
