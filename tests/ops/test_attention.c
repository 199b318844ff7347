/* SPDX-License-Identifier: MIT */
/* test_attention.c - fc_attention (fused flash attention) against the
 * composite the library already has (fc_matmul, the mask added, fc_softmax,
 * fc_matmul) in f64, forward and every gradient (q, k, v, mask), over
 * grouped-query heads, causal with S > T and T > S, masks of several
 * broadcast shapes, transposed q/k/v views and shapes that are not a
 * multiple of the 64-row tiles; fc_gradcheck (f64) of the fused op itself;
 * f32/f16/bf16 against the f64 result; rows that see no key (zeros, zero
 * gradient, never NaN); the output's layout; same bits at 1 and 2 threads;
 * and the error codes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fct_f64.h"
#include "fucina.h"

static fc_ctx *new_ctx(int threads) {
    fc_ctx_opts o = {.threads = threads, .seed = 5};
    fc_ctx *ctx = fc_ctx_new(&o);
    assert_non_null(ctx);
    return ctx;
}

typedef enum mask_kind { MASK_NONE, MASK_TS, MASK_B1TS, MASK_FULL } mask_kind;

typedef struct cfg {
    int64_t B, Hq, Hkv, T, S, D, Dv;
    bool causal;
    mask_kind mask;
    bool mask_grad;  /* the mask requires grad */
    bool transposed; /* q, k, v are transposed views of [B, T, H, D] leaves */
    double scale;    /* 0: the default */
} cfg;

static int mask_shape(const cfg *c, int64_t *sh) {
    switch (c->mask) {
    case MASK_TS:
        sh[0] = c->T, sh[1] = c->S;
        return 2;
    case MASK_B1TS:
        sh[0] = c->B, sh[1] = 1, sh[2] = c->T, sh[3] = c->S;
        return 4;
    case MASK_FULL:
        sh[0] = c->B, sh[1] = c->Hq, sh[2] = c->T, sh[3] = c->S;
        return 4;
    default:
        return 0;
    }
}

/* The leaves' shapes: [B, H, T, D], or [B, T, H, D] when transposed. */
static void leaf_shape(const cfg *c, int which, int64_t *sh) {
    int64_t H = which == 0 ? c->Hq : c->Hkv, L = which == 0 ? c->T : c->S;
    int64_t E = which == 2 ? c->Dv : c->D;
    sh[0] = c->B;
    sh[1] = c->transposed ? L : H;
    sh[2] = c->transposed ? H : L;
    sh[3] = E;
}

/* Leaves q, k, v (, mask) of dtype dt with seeded values; requires grad
 * when grad. Returns the count. */
static int make_inputs(fc_ctx *ctx, const cfg *c, fc_dtype dt, bool grad, uint64_t seed,
                       fc_tensor **in) {
    int n = c->mask == MASK_NONE ? 3 : 4;
    for (int i = 0; i < n; i++) {
        int64_t sh[4];
        int rank = 4;
        if (i < 3)
            leaf_shape(c, i, sh);
        else
            rank = mask_shape(c, sh);
        int64_t numel = 1;
        for (int d = 0; d < rank; d++)
            numel *= sh[d];
        double *v = malloc(sizeof *v * (size_t)numel);
        fill_random(v, numel, seed + (uint64_t)i * 101, i == 3 ? -1 : -1.5, i == 3 ? 1 : 1.5);
        in[i] = from_f64(ctx, dt, sh, rank, v);
        free(v);
        if (grad && (i < 3 || c->mask_grad)) assert_int_equal(fc_requires_grad(in[i], true), FC_OK);
    }
    return n;
}

/* q, k, v as [B, H, L, D] (views of the leaves when transposed). */
static void views(fc_ctx *ctx, const cfg *c, fc_tensor *const *in, fc_tensor **qkv) {
    for (int i = 0; i < 3; i++)
        qkv[i] = c->transposed ? fc_transpose(ctx, in[i], 1, 2) : fc_retain(in[i]);
}

static fc_tensor *fused(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    const cfg *c = user;
    fc_tensor *qkv[3];
    views(ctx, c, in, qkv);
    fc_attention_opts o = {.causal = c->causal, .scale = c->scale};
    fc_tensor *y = fc_attention(ctx, qkv[0], qkv[1], qkv[2], n > 3 ? in[3] : NULL, &o);
    for (int i = 0; i < 3; i++)
        fc_release(qkv[i]);
    return y;
}

/* k or v repeated per group: [B, Hkv, S, E] -> [B, Hq, S, E]. */
static fc_tensor *repeat_kv(fc_ctx *ctx, const cfg *c, fc_tensor *x) {
    int64_t G = c->Hq / c->Hkv;
    if (G == 1) return x;
    const int64_t *s = fc_tensor_shape(x);
    int64_t e5[5] = {c->B, c->Hkv, G, s[2], s[3]}, r4[4] = {c->B, c->Hq, s[2], s[3]};
    return fc_reshape(ctx, fc_expand(ctx, fc_unsqueeze(ctx, x, 2), e5, 5), r4, 4);
}

/* The composite: matmul, scale, masks added, softmax, matmul. */
static fc_tensor *composite(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    const cfg *c = user;
    fc_scope_begin(ctx);
    fc_tensor *qkv[3];
    views(ctx, c, in, qkv);
    fc_dtype dt = fc_tensor_dtype(in[0]);
    double scale = c->scale ? c->scale : 1 / sqrt((double)c->D);
    fc_tensor *kt = fc_transpose(ctx, repeat_kv(ctx, c, qkv[1]), 2, 3);
    fc_tensor *s = fc_mul_scalar(ctx, fc_matmul(ctx, qkv[0], kt), scale);
    if (n > 3) s = fc_add(ctx, s, in[3]);
    if (c->causal) {
        double *cm = malloc(sizeof *cm * (size_t)(c->T * c->S));
        for (int64_t i = 0; i < c->T; i++)
            for (int64_t j = 0; j < c->S; j++)
                cm[i * c->S + j] = j <= i + c->S - c->T ? 0 : -INFINITY;
        s = fc_add(ctx, s, from_f64(ctx, dt, (const int64_t[]){c->T, c->S}, 2, cm));
        free(cm);
    }
    fc_tensor *y = fc_matmul(ctx, fc_softmax(ctx, s, -1), repeat_kv(ctx, c, qkv[2]));
    for (int i = 0; i < 3; i++)
        fc_release(qkv[i]);
    fc_keep(y);
    fc_scope_end(ctx);
    return y;
}

/* The output and the gradients of the n inputs for the upstream gradient
 * w (seeded), as doubles: out[0] the output, out[1 + i] input i's
 * gradient (NULL when it has none). */
static void run_with_grads(fc_ctx *ctx, const cfg *c, fc_dtype dt, fc_gradcheck_fn fn, double **out,
                           int64_t *counts) {
    fc_tensor *in[4];
    int n = make_inputs(ctx, c, dt, true, 11, in);
    fc_tensor *y = fn(ctx, in, n, (void *)c);
    if (!y) fail_msg("%s", fc_ctx_error(ctx));
    int64_t ny = fc_tensor_numel(y);
    double *w = malloc(sizeof *w * (size_t)ny);
    fill_random(w, ny, 77, -1, 1);
    fc_tensor *g = from_f64(ctx, dt == FC_F64 ? FC_F64 : FC_F32, fc_tensor_shape(y), 4, w);
    free(w);
    assert_int_equal(fc_backward_with(ctx, y, g, false), FC_OK);
    out[0] = values(y);
    counts[0] = ny;
    for (int i = 0; i < 4; i++) {
        out[1 + i] = NULL;
        if (i < n && fc_grad(in[i])) {
            out[1 + i] = values(fc_grad(in[i]));
            counts[1 + i] = fc_tensor_numel(in[i]);
        }
    }
    fc_release(g);
    fc_release(y);
    for (int i = 0; i < n; i++)
        fc_release(in[i]);
}

static void expect_close(const double *got, const double *want, int64_t n, double tol,
                         const char *what) {
    for (int64_t i = 0; i < n; i++) {
        if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
            fail_msg("%s[%lld]: got %.12g want %.12g (tol %g)", what, (long long)i, got[i], want[i],
                     tol);
    }
}

static const char *const names[5] = {"out", "dq", "dk", "dv", "dmask"};

static void compare_with_composite(const cfg *c) {
    fc_ctx *ctx = new_ctx(2);
    double *a[5], *b[5];
    int64_t na[5] = {0}, nb[5] = {0};
    run_with_grads(ctx, c, FC_F64, fused, a, na);
    run_with_grads(ctx, c, FC_F64, composite, b, nb);
    for (int i = 0; i < 5; i++) {
        assert_true((a[i] == NULL) == (b[i] == NULL));
        if (!a[i]) continue;
        assert_int_equal(na[i], nb[i]);
        expect_close(a[i], b[i], na[i], 1e-10, names[i]);
        free(a[i]);
        free(b[i]);
    }
    free_ctx(ctx);
}

static void test_attention_matches_composite(void **state) {
    (void)state;
    const cfg cases[] = {
        {1, 1, 1, 3, 3, 2, 2, false, MASK_NONE, false, false, 0},
        {2, 4, 2, 5, 7, 3, 4, true, MASK_NONE, false, false, 0},     /* GQA, causal S > T */
        {1, 2, 2, 6, 6, 4, 3, false, MASK_TS, true, false, 0.7},     /* mask grad */
        {2, 3, 1, 4, 5, 2, 2, true, MASK_B1TS, true, true, 0},       /* MQA, transposed */
        {1, 4, 2, 70, 130, 8, 5, true, MASK_FULL, true, true, 0},    /* several tiles */
        {1, 2, 1, 129, 65, 4, 4, false, MASK_TS, false, false, 0},   /* T > S, not causal */
        {1, 2, 2, 5, 140, 3, 6, true, MASK_NONE, false, true, 0.25}, /* S - T > two tiles */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        compare_with_composite(&cases[i]);
}

static void gradcheck_case(const cfg *c) {
    fc_ctx *ctx = new_ctx(1);
    fc_tensor *in[4];
    int n = make_inputs(ctx, c, FC_F64, true, 21, in);
    fc_gradcheck_report r;
    fc_status st = fc_gradcheck(ctx, fused, (void *)c, in, n, NULL, &r);
    if (st != FC_OK) fail_msg("gradcheck: %s", fc_ctx_error(ctx));
    assert_true(r.passed);
    for (int i = 0; i < n; i++)
        fc_release(in[i]);
    free_ctx(ctx);
}

static void test_attention_gradcheck(void **state) {
    (void)state;
    const cfg cases[] = {
        {1, 2, 1, 3, 5, 2, 3, true, MASK_TS, true, false, 0},      /* GQA, causal, mask grad */
        {2, 2, 2, 4, 3, 3, 2, false, MASK_B1TS, true, true, 0.5},  /* transposed views */
        {1, 2, 1, 67, 70, 2, 2, true, MASK_NONE, false, false, 0}, /* T not a tile multiple */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        gradcheck_case(&cases[i]);
}

/* f32, f16 and bf16 compute in f32: close to the f64 result. */
static void test_attention_dtypes(void **state) {
    (void)state;
    const cfg c = {2, 4, 2, 70, 90, 16, 8, true, MASK_B1TS, false, true, 0};
    fc_ctx *ctx = new_ctx(2);
    double *ref[5];
    int64_t nref[5];
    run_with_grads(ctx, &c, FC_F64, fused, ref, nref);
    const fc_dtype dts[] = {FC_F32, FC_F16, FC_BF16};
    const double tol[] = {2e-5, 2e-2, 1e-1};
    for (int d = 0; d < 3; d++) {
        double *got[5];
        int64_t ng[5];
        /* inputs rounded to dt: compare against f64 on the same rounded values */
        fc_tensor *in[4], *in64[4];
        int n = make_inputs(ctx, &c, dts[d], false, 11, in);
        for (int i = 0; i < n; i++)
            in64[i] = fc_to(ctx, in[i], FC_F64);
        fc_tensor *y = fused(ctx, in, n, (void *)&c), *y64 = fused(ctx, in64, n, (void *)&c);
        assert_non_null(y);
        assert_int_equal(fc_tensor_dtype(y), dts[d]);
        double *a = values(y), *b = values(y64);
        expect_close(a, b, fc_tensor_numel(y), tol[d], fc_dtype_name(dts[d]));
        free(a);
        free(b);
        fc_release(y);
        fc_release(y64);
        for (int i = 0; i < n; i++) {
            fc_release(in[i]);
            fc_release(in64[i]);
        }
        /* gradients (f32) against the f64 ones on unrounded inputs */
        if (dts[d] != FC_F32) continue;
        run_with_grads(ctx, &c, FC_F32, fused, got, ng);
        for (int i = 0; i < 5; i++) {
            if (!ref[i]) continue;
            expect_close(got[i], ref[i], ng[i], 1e-4, names[i]);
            free(got[i]);
        }
    }
    for (int i = 0; i < 5; i++)
        free(ref[i]);
    free_ctx(ctx);
}

/* A query that sees no key gives zeros and zero gradients, never NaN: a
 * fully -inf mask row, and causal with T > S (the first T - S queries). */
static void test_attention_empty_rows(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(2);
    for (int variant = 0; variant < 2; variant++) {
        cfg c = {1,     2,     1, 5, 3, 4, 3, variant == 1, variant == 0 ? MASK_TS : MASK_NONE,
                 false, false, 0};
        if (variant == 1) c.T = 70, c.S = 4;
        fc_tensor *in[4];
        int n = make_inputs(ctx, &c, FC_F32, true, 3, in);
        int64_t hidden = variant == 0 ? 1 : c.T - c.S; /* rows that see nothing */
        if (variant == 0) {                            /* row 2 of the mask: all -inf */
            double *m = values(in[3]);
            for (int64_t j = 0; j < c.S; j++)
                m[2 * c.S + j] = -INFINITY;
            fc_release(in[3]);
            in[3] = from_f64(ctx, FC_F32, (const int64_t[]){c.T, c.S}, 2, m);
            free(m);
        }
        fc_tensor *y = fused(ctx, in, n, &c);
        assert_non_null(y);
        fc_scope_begin(ctx);
        fc_tensor *loss = fc_sum(ctx, fc_mul(ctx, y, y), NULL, 0, false);
        assert_int_equal(fc_backward(ctx, loss), FC_OK);
        fc_scope_end(ctx);
        double *yv = values(y), *gq = values(fc_grad(in[0]));
        for (int64_t h = 0; h < c.Hq; h++)
            for (int64_t i = 0; i < c.T; i++) {
                bool none = variant == 0 ? i == 2 : i < hidden;
                for (int64_t e = 0; e < c.Dv; e++) {
                    double o = yv[(h * c.T + i) * c.Dv + e];
                    assert_false(isnan(o));
                    if (none) assert_true(o == 0);
                }
                for (int64_t e = 0; e < c.D; e++) {
                    double g = gq[(h * c.T + i) * c.D + e];
                    assert_false(isnan(g));
                    if (none) assert_true(g == 0);
                }
            }
        for (int k = 1; k < 3; k++) {
            double *gk = values(fc_grad(in[k]));
            for (int64_t e = 0; e < fc_tensor_numel(in[k]); e++)
                assert_false(isnan(gk[e]));
            free(gk);
        }
        free(yv);
        free(gq);
        fc_release(y);
        for (int i = 0; i < n; i++)
            fc_release(in[i]);
    }
    free_ctx(ctx);
}

/* The output is stored as [B, T, Hq, Dv]: its transpose is contiguous. */
static void test_attention_output_layout(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    const cfg c = {2, 4, 2, 5, 5, 4, 4, true, MASK_NONE, false, true, 0};
    fc_tensor *in[4];
    make_inputs(ctx, &c, FC_F32, false, 1, in);
    fc_tensor *y = fused(ctx, in, 3, (void *)&c);
    assert_non_null(y);
    const int64_t *s = fc_tensor_shape(y);
    assert_true(s[0] == 2 && s[1] == 4 && s[2] == 5 && s[3] == 4);
    fc_tensor *t = fc_transpose(ctx, y, 1, 2);
    assert_true(fc_tensor_is_contiguous(t));
    fc_release(t);
    fc_release(y);
    for (int i = 0; i < 3; i++)
        fc_release(in[i]);
    free_ctx(ctx);
}

/* Same bits at 1 and 2 threads, forward and every gradient. */
static void test_attention_threads_same_bits(void **state) {
    (void)state;
    const cfg c = {1, 4, 2, 150, 140, 16, 16, true, MASK_FULL, true, true, 0};
    double *r[2][5];
    int64_t n[2][5];
    for (int t = 0; t < 2; t++) {
        fc_ctx *ctx = new_ctx(t + 1);
        run_with_grads(ctx, &c, FC_F32, fused, r[t], n[t]);
        free_ctx(ctx);
    }
    for (int i = 0; i < 5; i++) {
        assert_non_null(r[0][i]);
        assert_memory_equal(r[0][i], r[1][i], sizeof(double) * (size_t)n[0][i]);
        free(r[0][i]);
        free(r[1][i]);
    }
}

static void expect_error(fc_ctx *ctx, fc_tensor *q, fc_tensor *k, fc_tensor *v, fc_tensor *m,
                         const fc_attention_opts *o, fc_status want) {
    fc_ctx_clear_error(ctx);
    fc_tensor *y = fc_attention(ctx, q, k, v, m, o);
    assert_null(y);
    if (fc_ctx_status(ctx) != want)
        fail_msg("want %s, got %s: %s", fc_status_name(want), fc_status_name(fc_ctx_status(ctx)),
                 fc_ctx_error(ctx));
    assert_true(strstr(fc_ctx_error(ctx), "attention") != NULL);
}

static void test_attention_errors(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    fc_tensor *q = fc_zeros(ctx, FC_F32, (const int64_t[]){1, 4, 3, 8}, 4);
    fc_tensor *k = fc_zeros(ctx, FC_F32, (const int64_t[]){1, 2, 5, 8}, 4);
    fc_tensor *v = fc_zeros(ctx, FC_F32, (const int64_t[]){1, 2, 5, 6}, 4);
    fc_tensor *k3 = fc_zeros(ctx, FC_F32, (const int64_t[]){1, 3, 5, 8}, 4);
    fc_tensor *v3 = fc_zeros(ctx, FC_F32, (const int64_t[]){1, 3, 5, 6}, 4);
    fc_tensor *kd = fc_zeros(ctx, FC_F32, (const int64_t[]){1, 2, 5, 7}, 4);
    fc_tensor *vs = fc_zeros(ctx, FC_F32, (const int64_t[]){1, 2, 4, 6}, 4);
    fc_tensor *kb = fc_zeros(ctx, FC_F32, (const int64_t[]){2, 2, 5, 8}, 4);
    fc_tensor *q3 = fc_zeros(ctx, FC_F32, (const int64_t[]){4, 3, 8}, 3);
    fc_tensor *k64 = fc_zeros(ctx, FC_F64, (const int64_t[]){1, 2, 5, 8}, 4);
    fc_tensor *qi = fc_zeros(ctx, FC_I32, (const int64_t[]){1, 4, 3, 8}, 4);
    fc_tensor *mgood = fc_zeros(ctx, FC_F32, (const int64_t[]){3, 5}, 2);
    fc_tensor *mbad = fc_zeros(ctx, FC_F32, (const int64_t[]){3, 4}, 2);
    fc_tensor *m64 = fc_zeros(ctx, FC_F64, (const int64_t[]){3, 5}, 2);
    fc_tensor *m5 = fc_zeros(ctx, FC_F32, (const int64_t[]){1, 1, 1, 3, 5}, 5);
    expect_error(ctx, q3, k, v, NULL, NULL, FC_ERR_RANK);
    expect_error(ctx, q, k3, v3, NULL, NULL, FC_ERR_SHAPE_MISMATCH); /* 4 % 3 heads */
    expect_error(ctx, q, kd, v, NULL, NULL, FC_ERR_SHAPE_MISMATCH);  /* head dims */
    expect_error(ctx, q, k, vs, NULL, NULL, FC_ERR_SHAPE_MISMATCH);  /* key counts */
    expect_error(ctx, q, kb, v, NULL, NULL, FC_ERR_SHAPE_MISMATCH);  /* batch */
    expect_error(ctx, q, k, v3, NULL, NULL, FC_ERR_SHAPE_MISMATCH);  /* kv heads */
    expect_error(ctx, q, k64, v, NULL, NULL, FC_ERR_DTYPE);
    expect_error(ctx, qi, k, v, NULL, NULL, FC_ERR_DTYPE);
    expect_error(ctx, q, k, v, m64, NULL, FC_ERR_DTYPE);
    expect_error(ctx, q, k, v, mbad, NULL, FC_ERR_SHAPE_MISMATCH);
    expect_error(ctx, q, k, v, m5, NULL, FC_ERR_RANK);
    expect_error(ctx, q, k, v, mgood, &(fc_attention_opts){.scale = -1}, FC_ERR_INVALID_ARG);
    expect_error(ctx, q, k, v, mgood, &(fc_attention_opts){.scale = NAN}, FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(ctx);
    assert_null(fc_attention(ctx, NULL, k, v, NULL, NULL));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_NULL_ARG);
    fc_ctx_clear_error(ctx);
    fc_tensor *y = fc_attention(ctx, q, k, v, mgood, NULL); /* the good call works */
    assert_non_null(y);
    fc_release(y);
    fc_tensor *all[] = {q, k, v, k3, v3, kd, vs, kb, q3, k64, qi, mgood, mbad, m64, m5};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        fc_release(all[i]);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_matches_composite),
        cmocka_unit_test(test_attention_gradcheck),
        cmocka_unit_test(test_attention_dtypes),
        cmocka_unit_test(test_attention_empty_rows),
        cmocka_unit_test(test_attention_output_layout),
        cmocka_unit_test(test_attention_threads_same_bits),
        cmocka_unit_test(test_attention_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
