/* SPDX-License-Identifier: MIT */
/* test_llama_blocks.c - the model's three blocks (models/llama/blocks.h:
 * rotary embedding, SwiGLU, grouped-query causal attention, now the fused
 * ops) against direct double-precision loops, their gradients against f64
 * finite differences, and values and gradients against the same blocks
 * composed from public ops (llama_composite.c), as the model ran them
 * before. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "fct_f64.h"
#include "layout_helpers.h"
#include "llama/blocks.h"
#include "llama_composite.h"

static const fc_ctx_opts ONE_THREAD = {.threads = 1, .seed = 11};

static double *values_of(fc_tensor *t) { return values(t); }

/* x [B, T, H, D], pairs (2i, 2i+1) of the first n dims at angle
 * (pos0 + t) * scale * base^(-2i / n). */
static void rope_ref(const double *x, double *y, int64_t B, int64_t T, int64_t H, int64_t D,
                     int64_t n, double base, double scale, int64_t pos0) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                const double *xr = x + ((b * T + t) * H + h) * D;
                double *yr = y + ((b * T + t) * H + h) * D;
                for (int64_t d = 0; d < D; d++)
                    yr[d] = xr[d];
                for (int64_t i = 0; i < n / 2; i++) {
                    double a = (double)(pos0 + t) * scale * pow(base, -2.0 * (double)i / (double)n);
                    yr[2 * i] = xr[2 * i] * cos(a) - xr[2 * i + 1] * sin(a);
                    yr[2 * i + 1] = xr[2 * i] * sin(a) + xr[2 * i + 1] * cos(a);
                }
            }
}

static void test_llama_blocks_rope_matches_reference(void **s) {
    (void)s;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    const int64_t B = 2, T = 3, H = 2, D = 6;
    struct {
        int64_t n, pos0;
        double base, scale;
    } cases[] = {{6, 0, 10000.0, 1.0}, {4, 5, 100.0, 0.5}, {2, 1, 10.0, 2.0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fc_tensor *x = fc_randn(ctx, FC_F64, (int64_t[]){B, T, H, D}, 4);
        fc_tensor *y =
            fc__llama_rope(ctx, x, cases[c].n, cases[c].base, cases[c].scale, cases[c].pos0);
        assert_non_null(y);
        double *xv = values_of(x), *yv = values_of(y), ref[2 * 3 * 2 * 6];
        rope_ref(xv, ref, B, T, H, D, cases[c].n, cases[c].base, cases[c].scale, cases[c].pos0);
        for (int64_t i = 0; i < B * T * H * D; i++)
            assert_true(fabs(yv[i] - ref[i]) < 1e-12);
        free(xv);
        free(yv);
        fc_release(y);
        fc_release(x);
    }
    free_ctx(ctx);
}

typedef struct rope_args {
    int64_t n, pos0;
} rope_args;

static fc_tensor *rope_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    const rope_args *a = user;
    return fc__llama_rope(ctx, in[0], a->n, 500.0, 1.0, a->pos0);
}

static void test_llama_blocks_rope_gradcheck(void **s) {
    (void)s;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    rope_args a[2] = {{4, 0}, {2, 3}};
    for (int k = 0; k < 2; k++) {
        fc_tensor *in[1] = {lh_leaf(ctx, (int64_t[]){1, 3, 2, 4}, 4)};
        assert_true(lh_gradcheck(ctx, rope_fn, &a[k], in, 1, "rope"));
    }
    free_ctx(ctx);
}

static fc_tensor *swiglu_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    (void)user;
    return fc__llama_swiglu(ctx, in[0], in[1]);
}

static void test_llama_blocks_swiglu(void **s) {
    (void)s;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_tensor *a = fc_randn(ctx, FC_F64, (int64_t[]){3, 5}, 2);
    fc_tensor *b = fc_randn(ctx, FC_F64, (int64_t[]){3, 5}, 2);
    fc_tensor *y = fc__llama_swiglu(ctx, a, b);
    double *av = values_of(a), *bv = values_of(b), *yv = values_of(y);
    for (int i = 0; i < 15; i++)
        assert_true(fabs(yv[i] - av[i] / (1 + exp(-av[i])) * bv[i]) < 1e-12);
    free(av);
    free(bv);
    free(yv);
    fc_release(y);
    fc_release(a);
    fc_release(b);
    fc_tensor *in[2] = {lh_leaf(ctx, (int64_t[]){2, 4}, 2), lh_leaf(ctx, (int64_t[]){2, 4}, 2)};
    assert_true(lh_gradcheck(ctx, swiglu_fn, NULL, in, 2, "swiglu"));
    free_ctx(ctx);
}

/* q [B, Hq, T, D], k, v [B, Hkv, S, D]; query head h reads kv head
 * h / (Hq / Hkv); query i sees keys j <= i + S - T. */
static void attention_ref(const double *q, const double *k, const double *v, double *o, int64_t B,
                          int64_t Hq, int64_t Hkv, int64_t T, int64_t S, int64_t D) {
    int64_t G = Hq / Hkv;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < T; i++) {
                const double *qi = q + ((b * Hq + h) * T + i) * D;
                const double *kb = k + (b * Hkv + h / G) * S * D;
                const double *vb = v + (b * Hkv + h / G) * S * D;
                double w[16], mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j <= i + S - T; j++) {
                    double d = 0;
                    for (int64_t c = 0; c < D; c++)
                        d += qi[c] * kb[j * D + c];
                    w[j] = d / sqrt((double)D);
                    mx = fmax(mx, w[j]);
                }
                for (int64_t j = 0; j <= i + S - T; j++)
                    sum += (w[j] = exp(w[j] - mx));
                double *oi = o + ((b * Hq + h) * T + i) * D;
                for (int64_t c = 0; c < D; c++) {
                    oi[c] = 0;
                    for (int64_t j = 0; j <= i + S - T; j++)
                        oi[c] += w[j] / sum * vb[j * D + c];
                }
            }
}

static void test_llama_blocks_attention_matches_reference(void **s) {
    (void)s;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    const int64_t B = 2, Hq = 4, D = 3;
    /* (Hkv, T, S): GQA, MHA, MQA; a square causal block and a cached one */
    const int64_t cases[4][3] = {{2, 3, 3}, {4, 2, 5}, {1, 4, 4}, {2, 1, 6}};
    for (int c = 0; c < 4; c++) {
        int64_t Hkv = cases[c][0], T = cases[c][1], S = cases[c][2];
        fc_tensor *q = fc_randn(ctx, FC_F64, (int64_t[]){B, Hq, T, D}, 4);
        fc_tensor *k = fc_randn(ctx, FC_F64, (int64_t[]){B, Hkv, S, D}, 4);
        fc_tensor *v = fc_randn(ctx, FC_F64, (int64_t[]){B, Hkv, S, D}, 4);
        fc_tensor *o = fc__llama_attention(ctx, q, k, v);
        assert_non_null(o);
        assert_int_equal(fc_tensor_dim(o, 1), Hq);
        assert_int_equal(fc_tensor_dim(o, 2), T);
        double *qv = values_of(q), *kv = values_of(k), *vv = values_of(v), *ov = values_of(o);
        double ref[2 * 4 * 4 * 3];
        attention_ref(qv, kv, vv, ref, B, Hq, Hkv, T, S, D);
        for (int64_t i = 0; i < B * Hq * T * D; i++)
            assert_true(fabs(ov[i] - ref[i]) < 1e-12);
        free(qv);
        free(kv);
        free(vv);
        free(ov);
        fc_release(o);
        fc_release(q);
        fc_release(k);
        fc_release(v);
    }
    free_ctx(ctx);
}

static fc_tensor *attention_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    (void)user;
    return fc__llama_attention(ctx, in[0], in[1], in[2]);
}

static void test_llama_blocks_attention_gradcheck(void **s) {
    (void)s;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_tensor *in[3] = {lh_leaf(ctx, (int64_t[]){1, 4, 3, 2}, 4),
                        lh_leaf(ctx, (int64_t[]){1, 2, 4, 2}, 4),
                        lh_leaf(ctx, (int64_t[]){1, 2, 4, 2}, 4)};
    assert_true(lh_gradcheck(ctx, attention_fn, NULL, in, 3, "attention (GQA, S > T)"));
    free_ctx(ctx);
}

/* ---- fused vs composite ---------------------------------------------------------- */
typedef struct block_args {
    bool composite;
    int64_t n, pos0; /* rope */
    double base, scale;
} block_args;

static fc_tensor *rope_any(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    const block_args *a = user;
    return (a->composite ? lc_rope : fc__llama_rope)(ctx, in[0], a->n, a->base, a->scale, a->pos0);
}

static fc_tensor *swiglu_any(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    const block_args *a = user;
    return (a->composite ? lc_swiglu : fc__llama_swiglu)(ctx, in[0], in[1]);
}

/* Inputs [B, T, H, D] as the model holds them; the heads are transposed
 * views, as it passes them. */
static fc_tensor *attention_any(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    const block_args *a = user;
    const int p[4] = {0, 2, 1, 3};
    fc_tensor *q = fc_permute(ctx, in[0], p), *k = fc_permute(ctx, in[1], p),
              *v = fc_permute(ctx, in[2], p);
    fc_tensor *o = (a->composite ? lc_attention : fc__llama_attention)(ctx, q, k, v);
    fc_release(q);
    fc_release(k);
    fc_release(v);
    return o;
}

/* Runs fn fused and composite on the same n f64 leaves and compares the
 * outputs and, for one random output gradient, the inputs' gradients. */
static void fused_matches_composite(fc_ctx *ctx, fc_gradcheck_fn fn, block_args a,
                                    const int64_t (*shapes)[4], int n) {
    fc_tensor *in[3];
    for (int k = 0; k < n; k++)
        assert_int_equal(fc_requires_grad(in[k] = fc_randn(ctx, FC_F64, shapes[k], 4), true),
                         FC_OK);
    double *out[2] = {NULL, NULL}, *grads[2][3];
    int64_t numel = 0;
    fc_tensor *g = NULL;
    for (int c = 0; c < 2; c++) {
        a.composite = c == 1;
        fc_tensor *y = fn(ctx, in, n, &a);
        assert_non_null(y);
        numel = fc_tensor_numel(y);
        if (!g) g = fc_randn(ctx, FC_F64, fc_tensor_shape(y), fc_tensor_rank(y));
        assert_int_equal(fc_backward_with(ctx, y, g, false), FC_OK);
        out[c] = values_of(y);
        for (int k = 0; k < n; k++)
            grads[c][k] = values_of(fc_grad(in[k]));
        fc_zero_grad(in, n);
        fc_release(y);
    }
    for (int64_t i = 0; i < numel; i++)
        assert_true(fabs(out[0][i] - out[1][i]) < 1e-12);
    for (int k = 0; k < n; k++) {
        for (int64_t i = 0; i < fc_tensor_numel(in[k]); i++)
            assert_true(fabs(grads[0][k][i] - grads[1][k][i]) < 1e-12);
        free(grads[0][k]);
        free(grads[1][k]);
        fc_release(in[k]);
    }
    free(out[0]);
    free(out[1]);
    fc_release(g);
}

static void test_llama_blocks_fused_matches_composite(void **s) {
    (void)s;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    /* rope: all dims, partial dims with a KV-cache offset, another base */
    const int64_t rs[1][4] = {{2, 3, 2, 6}};
    fused_matches_composite(ctx, rope_any, (block_args){.n = 6, .base = 10000, .scale = 1}, rs, 1);
    fused_matches_composite(ctx, rope_any,
                            (block_args){.n = 4, .pos0 = 5, .base = 100, .scale = 0.5}, rs, 1);
    fused_matches_composite(ctx, rope_any, (block_args){.n = 2, .pos0 = 1, .base = 10, .scale = 2},
                            rs, 1);
    const int64_t ss[2][4] = {{2, 3, 1, 5}, {2, 3, 1, 5}};
    fused_matches_composite(ctx, swiglu_any, (block_args){0}, ss, 2);
    /* attention on [B, T, H, D] leaves: (Hkv, T, S) GQA square, MHA and
     * MQA against a longer cache, a decode step */
    const int64_t cases[4][3] = {{2, 3, 3}, {4, 2, 5}, {1, 4, 6}, {2, 1, 6}};
    for (int c = 0; c < 4; c++) {
        int64_t Hkv = cases[c][0], T = cases[c][1], S = cases[c][2];
        const int64_t as[3][4] = {{2, T, 4, 3}, {2, S, Hkv, 3}, {2, S, Hkv, 3}};
        fused_matches_composite(ctx, attention_any, (block_args){0}, as, 3);
    }
    free_ctx(ctx);
}

/* ---- second order: a create_graph Hessian-vector product through a block ----------- */
/* A tiny f64 Llama block on a fixed x [1, 3, 8]: 2 query heads of 4 over 1
 * kv head (GQA), rope on 2 of the 4 dims, causal attention, the residual,
 * then SwiGLU; loss = sum(f^2). Parameters wq [8, 8], wk [4, 8],
 * wv [4, 8], wg [6, 8], wu [6, 8]. */
enum { HVP_NP = 5 };
static const int64_t hvp_shapes[HVP_NP][2] = {{8, 8}, {4, 8}, {4, 8}, {6, 8}, {6, 8}};

static fc_tensor *hvp_loss(fc_ctx *ctx, fc_tensor *x, fc_tensor *const *w) {
    const int p[4] = {0, 2, 1, 3};
    fc_tensor *q = fc_reshape(ctx, fc_linear(ctx, x, w[0], NULL), (int64_t[]){1, 3, 2, 4}, 4);
    fc_tensor *k = fc_reshape(ctx, fc_linear(ctx, x, w[1], NULL), (int64_t[]){1, 3, 1, 4}, 4);
    fc_tensor *v = fc_reshape(ctx, fc_linear(ctx, x, w[2], NULL), (int64_t[]){1, 3, 1, 4}, 4);
    q = fc_permute(ctx, fc__llama_rope(ctx, q, 2, 100.0, 1.0, 1), p);
    k = fc_permute(ctx, fc__llama_rope(ctx, k, 2, 100.0, 1.0, 1), p);
    fc_tensor *a = fc__llama_attention(ctx, q, k, fc_permute(ctx, v, p));
    a = fc_reshape(ctx, fc_permute(ctx, a, p), (int64_t[]){1, 3, 8}, 3);
    fc_tensor *h = fc_add(ctx, x, a);
    fc_tensor *f =
        fc__llama_swiglu(ctx, fc_linear(ctx, h, w[3], NULL), fc_linear(ctx, h, w[4], NULL));
    return fc_sum(ctx, fc_square(ctx, f), NULL, 0, false);
}

/* The gradients at w + t * dir, as doubles (plain walk). */
static void hvp_grads_at(fc_ctx *ctx, fc_tensor *x, double *const *w, double *const *dir, double t,
                         double **out) {
    fc_scope_begin(ctx);
    fc_tensor *leaves[HVP_NP];
    for (int k = 0; k < HVP_NP; k++) {
        int64_t n = hvp_shapes[k][0] * hvp_shapes[k][1];
        double buf[64];
        for (int64_t i = 0; i < n; i++)
            buf[i] = w[k][i] + t * dir[k][i];
        leaves[k] = fc_tensor_from_data(ctx, FC_F64, hvp_shapes[k], 2, buf);
        assert_int_equal(fc_requires_grad(leaves[k], true), FC_OK);
    }
    fc_tensor *loss = hvp_loss(ctx, x, leaves), *g[HVP_NP];
    assert_int_equal(fc_autograd_grad(ctx, &loss, NULL, 1, leaves, HVP_NP, NULL, g), FC_OK);
    for (int k = 0; k < HVP_NP; k++) {
        out[k] = values_of(g[k]);
        fc_release(g[k]);
    }
    fc_scope_end(ctx);
}

static void test_llama_blocks_hvp_create_graph(void **s) {
    (void)s;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_scope_begin(ctx); /* the inputs, the recorded graph and its temporaries */
    fc_tensor *x = fc_randn(ctx, FC_F64, (int64_t[]){1, 3, 8}, 3);
    fc_tensor *w[HVP_NP], *dir[HVP_NP];
    double *wv[HVP_NP], *dv[HVP_NP];
    for (int k = 0; k < HVP_NP; k++) {
        w[k] = fc_mul_scalar(ctx, fc_randn(ctx, FC_F64, hvp_shapes[k], 2), 0.4);
        dir[k] = fc_randn(ctx, FC_F64, hvp_shapes[k], 2);
        assert_int_equal(fc_requires_grad(w[k], true), FC_OK);
        wv[k] = values_of(w[k]);
        dv[k] = values_of(dir[k]);
    }
    /* H dir = d/dw (grad(w) . dir), the gradient recorded by create_graph */
    fc_tensor *loss = hvp_loss(ctx, x, w), *g[HVP_NP], *hv[HVP_NP];
    fc_autograd_grad_opts cg = {.create_graph = true};
    assert_int_equal(fc_autograd_grad(ctx, &loss, NULL, 1, w, HVP_NP, &cg, g), FC_OK);
    fc_tensor *dot = NULL;
    for (int k = 0; k < HVP_NP; k++) {
        fc_tensor *t = fc_sum(ctx, fc_mul(ctx, g[k], dir[k]), NULL, 0, false);
        dot = dot ? fc_add(ctx, dot, t) : t;
    }
    assert_int_equal(fc_autograd_grad(ctx, &dot, NULL, 1, w, HVP_NP, NULL, hv), FC_OK);
    /* against central differences of the gradient along dir */
    const double eps = 1e-5;
    double *gp[HVP_NP], *gm[HVP_NP];
    hvp_grads_at(ctx, x, wv, dv, eps, gp);
    hvp_grads_at(ctx, x, wv, dv, -eps, gm);
    double worst = 0, scale = 0;
    for (int k = 0; k < HVP_NP; k++) {
        double *h = values_of(hv[k]);
        for (int64_t i = 0; i < hvp_shapes[k][0] * hvp_shapes[k][1]; i++) {
            double fd = (gp[k][i] - gm[k][i]) / (2 * eps);
            worst = fmax(worst, fabs(h[i] - fd));
            scale = fmax(scale, fabs(fd));
        }
        free(h);
        free(gp[k]);
        free(gm[k]);
        free(wv[k]);
        free(dv[k]);
        fc_release(hv[k]);
        fc_release(g[k]);
    }
    assert_true(scale > 1e-3); /* a real curvature, not zeros */
    assert_true(worst < 1e-6 * (1 + scale));
    fc_scope_end(ctx);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_blocks_rope_matches_reference),
        cmocka_unit_test(test_llama_blocks_rope_gradcheck),
        cmocka_unit_test(test_llama_blocks_swiglu),
        cmocka_unit_test(test_llama_blocks_attention_matches_reference),
        cmocka_unit_test(test_llama_blocks_attention_gradcheck),
        cmocka_unit_test(test_llama_blocks_fused_matches_composite),
        cmocka_unit_test(test_llama_blocks_hvp_create_graph),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
