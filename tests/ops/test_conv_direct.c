/* SPDX-License-Identifier: MIT */
/* test_conv_direct.c - the two convolution paths against each other: the
 * provider's direct kernels (oneDNN, chosen by the automatic provider for
 * f32 batches of eight chunks or more) and im2col + GEMM through the
 * reference provider, on forward, input, weight and bias gradients of
 * conv2d (stride, padding, "same" with an even kernel, dilation, groups,
 * depthwise, a stride that skips trailing input, strided views), conv1d and
 * conv_transpose2d, with batches that leave a short last chunk. Where
 * oneDNN was built and the CPU has AVX2 or more, the automatic context must
 * have run direct products; elsewhere the comparison still holds (both
 * sides run im2col). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/cpu.h"
#include "exec/ctx.h"
#include "fct_f64.h"
#include "fucina.h"

typedef enum { K_CONV2D, K_CONV1D, K_TRANSPOSE } kind;

typedef struct cfg {
    const char *name;
    kind k;
    int64_t n, cin, cout, h, w, kh, kw;
    int64_t stride[2], pad[2], dil[2], groups, out_pad[2];
    bool same, bias, strided_x;
} cfg;

static const cfg CASES[] = {
    {"5x5 pad 2 (the CNN's first layer)",
     K_CONV2D,
     20,
     1,
     8,
     12,
     12,
     5,
     5,
     {1, 1},
     {2, 2},
     {1, 1},
     1,
     {0, 0},
     false,
     true,
     false},
    {"3x3 pad 1, 16 -> 16",
     K_CONV2D,
     17,
     16,
     16,
     9,
     10,
     3,
     3,
     {1, 1},
     {1, 1},
     {1, 1},
     1,
     {0, 0},
     false,
     false,
     false},
    {"groups 2, stride 2, dilation 2",
     K_CONV2D,
     9,
     8,
     12,
     13,
     11,
     3,
     3,
     {2, 2},
     {2, 1},
     {2, 2},
     2,
     {0, 0},
     false,
     true,
     false},
    {"depthwise",
     K_CONV2D,
     16,
     8,
     8,
     10,
     10,
     3,
     3,
     {1, 1},
     {1, 1},
     {1, 1},
     8,
     {0, 0},
     false,
     true,
     false},
    {"same, even kernel",
     K_CONV2D,
     12,
     4,
     6,
     8,
     9,
     4,
     2,
     {1, 1},
     {0, 0},
     {1, 1},
     1,
     {0, 0},
     true,
     true,
     false},
    {"stride skips trailing input",
     K_CONV2D,
     10,
     3,
     5,
     10,
     10,
     3,
     3,
     {3, 3},
     {0, 0},
     {1, 1},
     1,
     {0, 0},
     false,
     false,
     false},
    {"strided view of x",
     K_CONV2D,
     11,
     6,
     8,
     8,
     8,
     3,
     3,
     {1, 1},
     {1, 1},
     {1, 1},
     1,
     {0, 0},
     false,
     true,
     true},
    {"conv1d",
     K_CONV1D,
     18,
     4,
     6,
     1,
     30,
     1,
     5,
     {1, 2},
     {0, 2},
     {1, 1},
     2,
     {0, 0},
     false,
     true,
     false},
    {"conv_transpose2d stride 2",
     K_TRANSPOSE,
     13,
     6,
     4,
     7,
     6,
     3,
     3,
     {2, 2},
     {1, 1},
     {1, 1},
     2,
     {1, 0},
     false,
     true,
     false},
};

static uint64_t rng = 99;
static double uniform(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0 - 0.5;
}

static fc_tensor *leaf(fc_ctx *ctx, const int64_t *shape, int rank, uint64_t seed) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    float *v = malloc((size_t)n * sizeof *v);
    rng = seed;
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)uniform();
    fc_tensor *t = fc_param_from_data(ctx, FC_F32, shape, rank, v);
    free(v);
    assert_non_null(t);
    return t;
}

typedef struct result {
    float *y, *dx, *dw, *db;
    int64_t ny, nx, nw, nb;
} result;

static float *floats(const fc_tensor *t, int64_t *n) {
    *n = fc_tensor_numel(t);
    float *p = malloc((size_t)*n * sizeof *p);
    memcpy(p, fc_tensor_data(t), (size_t)*n * sizeof *p);
    return p;
}

/* y = op(x, w, b) and the gradients of sum(y * g) on a context with
 * provider be; *direct gets the direct products that context ran. */
static result run(const cfg *c, fc_backend be, int64_t *direct) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 3});
    assert_int_equal(fc_ctx_set_backend(ctx, be), FC_OK);
    int64_t cin_w = c->k == K_TRANSPOSE ? c->cout / c->groups : c->cin / c->groups;
    int64_t wout = c->k == K_TRANSPOSE ? c->cin : c->cout;
    int64_t xs[4] = {c->n, c->cin, c->h, c->strided_x ? 2 * c->w : c->w};
    int64_t ws[4] = {wout, cin_w, c->kh, c->kw};
    int64_t bs[1] = {c->cout};
    fc_tensor *xbase = c->k == K_CONV1D ? leaf(ctx, (const int64_t[]){c->n, c->cin, c->w}, 3, 1)
                                        : leaf(ctx, xs, 4, 1);
    fc_tensor *w = c->k == K_CONV1D ? leaf(ctx, (const int64_t[]){wout, cin_w, c->kw}, 3, 2)
                                    : leaf(ctx, ws, 4, 2);
    fc_tensor *b = c->bias ? leaf(ctx, bs, 1, 3) : NULL;
    fc_tensor *x = xbase;
    if (c->strided_x) /* every other column */
        x = fc_slice(ctx, xbase, 3, 0, 2 * c->w, 2);
    assert_non_null(x);
    fc_tensor *y = NULL;
    if (c->k == K_CONV2D) {
        fc_conv2d_opts o = fc_conv2d_opts_default();
        for (int i = 0; i < 2; i++)
            o.stride[i] = c->stride[i], o.padding[i] = c->pad[i], o.dilation[i] = c->dil[i];
        o.groups = c->groups, o.padding_same = c->same;
        y = fc_conv2d(ctx, x, w, b, &o);
    } else if (c->k == K_CONV1D) {
        fc_conv1d_opts o = fc_conv1d_opts_default();
        o.stride = c->stride[1], o.padding = c->pad[1], o.dilation = c->dil[1];
        o.groups = c->groups;
        y = fc_conv1d(ctx, x, w, b, &o);
    } else {
        fc_conv_transpose2d_opts o = fc_conv_transpose2d_opts_default();
        for (int i = 0; i < 2; i++)
            o.stride[i] = c->stride[i], o.padding[i] = c->pad[i],
            o.output_padding[i] = c->out_pad[i];
        o.groups = c->groups;
        y = fc_conv_transpose2d(ctx, x, w, b, &o);
    }
    if (!y) fail_msg("%s: %s", c->name, fc_ctx_error(ctx));
    fc_tensor *g = leaf(ctx, fc_tensor_shape(y), fc_tensor_rank(y), 4);
    assert_int_equal(fc_requires_grad(g, false), FC_OK);
    assert_int_equal(fc_backward_with(ctx, y, g, false), FC_OK);
    result r = {0};
    r.y = floats(y, &r.ny);
    r.dx = floats(fc_grad(xbase), &r.nx);
    r.dw = floats(fc_grad(w), &r.nw);
    if (b) r.db = floats(fc_grad(b), &r.nb);
    *direct = ctx->conv_direct_products;
    if (x != xbase) fc_release(x);
    fc_release(xbase), fc_release(w), fc_release(b), fc_release(y), fc_release(g);
    free_ctx(ctx);
    return r;
}

/* Elementwise |a - b| <= tol * (1 + max |b|): the two paths sum in other
 * orders, in f32. */
static void expect_near(const char *what, const char *name, const float *a, const float *b,
                        int64_t n) {
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs((double)b[i]));
    for (int64_t i = 0; i < n; i++)
        worst = fmax(worst, fabs((double)a[i] - (double)b[i]));
    if (worst > 2e-5 * (1 + scale))
        fail_msg("%s, %s: paths differ by %g (largest value %g)", name, what, worst, scale);
}

static void test_conv_direct_matches_im2col(void **state) {
    (void)state;
    fc_ctx *probe = fc_ctx_new(NULL);
    bool onednn = fc_ctx_set_backend(probe, FC_BACKEND_ONEDNN) == FC_OK;
    free_ctx(probe);
    int64_t direct_total = 0;
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        const cfg *c = &CASES[i];
        int64_t d_auto = 0, d_ref = 0;
        result a = run(c, FC_BACKEND_AUTO, &d_auto), r = run(c, FC_BACKEND_REF, &d_ref);
        assert_int_equal(d_ref, 0); /* "ref" always takes im2col */
        direct_total += d_auto;
        assert_int_equal(a.ny, r.ny);
        expect_near("y", c->name, a.y, r.y, a.ny);
        expect_near("dx", c->name, a.dx, r.dx, a.nx);
        expect_near("dw", c->name, a.dw, r.dw, a.nw);
        if (c->bias) expect_near("db", c->name, a.db, r.db, a.nb);
        /* forward, dgrad, wgrad: all direct, but for oneDNN's AVX2 wgrad on a
         * single input channel, measured slower than im2col (onednn_conv.c) */
        if (onednn && c->k == K_CONV2D && i == 0 && fc__isa_level() >= FC__ISA_AVX2)
            assert_int_equal(d_auto, fc__isa_level() >= FC__ISA_AVX512 ? 3 : 2);
        free(a.y), free(a.dx), free(a.dw), free(a.db);
        free(r.y), free(r.dx), free(r.dw), free(r.db);
    }
    if (onednn && fc__isa_level() >= FC__ISA_AVX2) assert_true(direct_total >= 3);
}

/* The direct path keeps the conv kernels' promise: the same bits at any
 * thread count (each chunk's primitive runs on one thread). */
static void test_conv_direct_same_bits_across_threads(void **state) {
    (void)state;
    float *first[3] = {0};
    int64_t n[3];
    for (int threads = 1; threads <= 3; threads++) {
        fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .seed = 3});
        fc_tensor *x = leaf(ctx, (const int64_t[]){19, 8, 12, 12}, 4, 5);
        fc_tensor *w = leaf(ctx, (const int64_t[]){16, 8, 3, 3}, 4, 6);
        fc_conv2d_opts o = fc_conv2d_opts_default();
        o.padding[0] = o.padding[1] = 1;
        fc_tensor *y = fc_conv2d(ctx, x, w, NULL, &o);
        assert_non_null(y);
        fc_tensor *yy = fc_mul(ctx, y, y);
        fc_tensor *s = fc_sum(ctx, yy, NULL, 0, false);
        assert_int_equal(fc_backward(ctx, s), FC_OK);
        float *got[3] = {floats(y, &n[0]), floats(fc_grad(x), &n[1]), floats(fc_grad(w), &n[2])};
        for (int k = 0; k < 3; k++) {
            if (threads == 1) {
                first[k] = got[k];
            } else {
                assert_memory_equal(first[k], got[k], (size_t)n[k] * sizeof(float));
                free(got[k]);
            }
        }
        /* each product chooses for itself (a capped oneDNN may have a JIT
         * kernel for some of the three only) */
        assert_true(ctx->conv_direct_products >= 0 && ctx->conv_direct_products <= 3);
        fc_release(x), fc_release(w), fc_release(y), fc_release(yy), fc_release(s);
        free_ctx(ctx);
    }
    for (int k = 0; k < 3; k++)
        free(first[k]);
}

/* Weights changed in place between two products (an optimizer step) are
 * what the second product reads: each product reorders its weights anew. */
static void test_conv_direct_sees_updated_weights(void **state) {
    (void)state;
    float *y[2][2];
    int64_t n;
    for (int pass = 0; pass < 2; pass++) {
        fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 3});
        assert_int_equal(fc_ctx_set_backend(ctx, pass ? FC_BACKEND_REF : FC_BACKEND_AUTO), FC_OK);
        fc_tensor *x = leaf(ctx, (const int64_t[]){16, 8, 10, 10}, 4, 7);
        fc_tensor *w = leaf(ctx, (const int64_t[]){16, 8, 3, 3}, 4, 8);
        assert_int_equal(fc_requires_grad(x, false), FC_OK);
        assert_int_equal(fc_requires_grad(w, false), FC_OK);
        fc_conv2d_opts o = fc_conv2d_opts_default();
        o.padding[0] = o.padding[1] = 1;
        for (int k = 0; k < 2; k++) {
            if (k == 1) assert_int_equal(fc_mul_scalar_(w, -1.5), FC_OK);
            fc_tensor *out = fc_conv2d(ctx, x, w, NULL, &o);
            assert_non_null(out);
            y[pass][k] = floats(out, &n);
            fc_release(out);
        }
        fc_release(x), fc_release(w);
        free_ctx(ctx);
    }
    for (int k = 0; k < 2; k++) {
        expect_near("y", k ? "after the update" : "before the update", y[0][k], y[1][k], n);
        free(y[0][k]), free(y[1][k]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_direct_matches_im2col),
        cmocka_unit_test(test_conv_direct_same_bits_across_threads),
        cmocka_unit_test(test_conv_direct_sees_updated_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
