/* SPDX-License-Identifier: MIT */
/* test_conv3d.c - fc_conv3d (src/ops/conv3d.c), fc_max_pool3d and
 * fc_avg_pool3d (src/ops/pool3d.c):
 *   - outputs and gradients against PyTorch (tests/data/conv3d/
 *     torch_conv3d.txt from scripts/gen_conv3d_ref.py, f64, 1e-12), and
 *     in f32 / bf16 against the same numbers at their precision;
 *   - conv3d against a plain 7-deep loop on random geometries with
 *     strided views;
 *   - fc_gradcheck and fc_gradgradcheck (also with constant_grad_output)
 *     in f64 for all three;
 *   - bad inputs with their exact status and the op named. */
#include <math.h>
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

static fc_ctx *new_ctx(void) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 3});
    assert_non_null(ctx);
    return ctx;
}

/* ---- the PyTorch fixture ------------------------------------------------------------------ */

static char *g_fixture;

static int load_fixture(void **state) {
    (void)state;
    size_t size;
    char *t = fc_test_read_file(FUCINA_TEST_DATA_DIR, "conv3d/torch_conv3d.txt", &size);
    if (!t) return -1;
    g_fixture = realloc(t, size + 1);
    if (!g_fixture) return -1;
    g_fixture[size] = 0;
    return 0;
}

static int free_fixture(void **state) {
    (void)state;
    free(g_fixture);
    return 0;
}

/* The values of the line called name (n of them, asserted); malloc'd. */
static double *fixture(const char *name, int64_t n) {
    size_t len = strlen(name);
    for (const char *p = g_fixture; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, name, len) || p[len] != ' ') continue;
        char *e;
        long long cnt = strtoll(p + len, &e, 10);
        if (cnt != n) fail_msg("fixture %s has %lld values, want %lld", name, cnt, (long long)n);
        double *v = malloc(sizeof *v * (size_t)n);
        for (int64_t i = 0; i < n; i++)
            v[i] = strtod(e, &e);
        return v;
    }
    fail_msg("fixture line %s missing", name);
    return NULL;
}

static int64_t numel(const int64_t *s, int r) {
    int64_t n = 1;
    for (int i = 0; i < r; i++)
        n *= s[i];
    return n;
}

/* t (any dtype) within tol * (1 + |want|) of the fixture line name */
static void expect_fixture(fc_tensor *t, const char *name, double tol) {
    assert_non_null(t);
    int64_t n = fc_tensor_numel(t);
    double *want = fixture(name, n), *got = values(t);
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
            fail_msg("%s[%lld] = %.17g, torch %.17g", name, (long long)i, got[i], want[i]);
    free(want);
    free(got);
}

/* A leaf of dtype dt requiring grad, from the fixture line name. */
static fc_tensor *leaf(fc_ctx *ctx, fc_dtype dt, const char *name, const int64_t *s, int r) {
    double *v = fixture(name, numel(s, r));
    fc_tensor *t = from_f64(ctx, dt, s, r, v);
    free(v);
    assert_int_equal(fc_requires_grad(t, true), FC_OK);
    return t;
}

typedef struct conv_fx {
    const char *tag;
    int64_t xs[5], ws[5];
    bool bias;
    fc_conv3d_opts o;
} conv_fx;

/* the cases of scripts/gen_conv3d_ref.py */
static const conv_fx conv_cases[] = {
    {"conv_a",
     {2, 4, 5, 6, 5},
     {6, 2, 3, 2, 3},
     true,
     {.stride = {2, 1, 2}, .padding = {1, 0, 2}, .dilation = {1, 2, 1}, .groups = 2}},
    {"conv_same",
     {1, 2, 4, 4, 3},
     {3, 2, 2, 3, 2},
     false,
     {.dilation = {2, 1, 1}, .padding_same = true}},
    {"conv_pad",
     {1, 1, 2, 3, 3},
     {2, 1, 2, 2, 2},
     true,
     {.stride = {3, 1, 1}, .padding = {2, 1, 0}, .dilation = {3, 1, 1}}},
};

static void conv_against_torch(fc_dtype dt, double tol) {
    char nm[64];
    for (size_t c = 0; c < sizeof conv_cases / sizeof conv_cases[0]; c++) {
        const conv_fx *k = &conv_cases[c];
        fc_ctx *ctx = new_ctx();
        fc_scope_begin(ctx);
        snprintf(nm, sizeof nm, "%s_x", k->tag);
        fc_tensor *x = leaf(ctx, dt, nm, k->xs, 5);
        snprintf(nm, sizeof nm, "%s_w", k->tag);
        fc_tensor *w = leaf(ctx, dt, nm, k->ws, 5);
        fc_tensor *b = NULL;
        if (k->bias) {
            snprintf(nm, sizeof nm, "%s_b", k->tag);
            b = leaf(ctx, dt, nm, k->ws, 1);
        }
        fc_tensor *y = fc_conv3d(ctx, x, w, b, &k->o);
        if (!y) fail_msg("%s: %s", k->tag, fc_ctx_error(ctx));
        assert_int_equal(fc_tensor_dtype(y), dt);
        snprintf(nm, sizeof nm, "%s_y", k->tag);
        expect_fixture(y, nm, tol);
        snprintf(nm, sizeof nm, "%s_g", k->tag);
        double *gv = fixture(nm, fc_tensor_numel(y));
        fc_tensor *g = from_f64(ctx, dt, fc_tensor_shape(y), 5, gv);
        free(gv);
        assert_int_equal(fc_backward_with(ctx, y, g, false), FC_OK);
        snprintf(nm, sizeof nm, "%s_dx", k->tag);
        expect_fixture(fc_grad(x), nm, tol);
        snprintf(nm, sizeof nm, "%s_dw", k->tag);
        expect_fixture(fc_grad(w), nm, tol);
        if (b) {
            snprintf(nm, sizeof nm, "%s_db", k->tag);
            expect_fixture(fc_grad(b), nm, tol);
        }
        fc_scope_end(ctx);
        free_ctx(ctx);
    }
}

static void test_conv3d_matches_torch_f64(void **state) {
    (void)state;
    conv_against_torch(FC_F64, 1e-12);
}

/* f32 rounds the inputs (about 6e-8 relative) and accumulates in f32 */
static void test_conv3d_matches_torch_f32_bf16(void **state) {
    (void)state;
    conv_against_torch(FC_F32, 1e-4);
    conv_against_torch(FC_BF16, 0.15);
}

typedef struct pool_fx {
    const char *tag;
    bool avg;
    int64_t xs[5];
    int rank;
    fc_pool3d_opts o;
} pool_fx;

static const pool_fx pool_cases[] = {
    {"max_a",
     false,
     {2, 3, 5, 6, 7},
     5,
     {.kernel = {3, 2, 3},
      .stride = {2, 2, 2},
      .padding = {1, 1, 1},
      .dilation = {1, 2, 1},
      .ceil_mode = true}},
    {"max_b", false, {3, 4, 4, 5}, 4, {.kernel = {2, 2, 2}}},
    {"avg_a",
     true,
     {2, 3, 5, 6, 7},
     5,
     {.kernel = {2, 3, 3}, .stride = {2, 2, 1}, .padding = {1, 1, 1}, .ceil_mode = true}},
    {"avg_b",
     true,
     {2, 2, 5, 4, 6},
     5,
     {.kernel = {3, 2, 3}, .stride = {1, 2, 2}, .padding = {1, 1, 1}, .exclude_pad = true}},
    {"avg_c",
     true,
     {1, 2, 4, 5, 5},
     5,
     {.kernel = {2, 2, 3},
      .stride = {2, 2, 2},
      .padding = {1, 0, 1},
      .ceil_mode = true,
      .divisor_override = 5}},
};

static void pool_against_torch(fc_dtype dt, double tol) {
    char nm[64];
    for (size_t c = 0; c < sizeof pool_cases / sizeof pool_cases[0]; c++) {
        const pool_fx *k = &pool_cases[c];
        fc_ctx *ctx = new_ctx();
        fc_scope_begin(ctx);
        snprintf(nm, sizeof nm, "%s_x", k->tag);
        fc_tensor *x = leaf(ctx, dt, nm, k->xs, k->rank);
        fc_tensor *y = k->avg ? fc_avg_pool3d(ctx, x, &k->o) : fc_max_pool3d(ctx, x, &k->o);
        if (!y) fail_msg("%s: %s", k->tag, fc_ctx_error(ctx));
        assert_int_equal(fc_tensor_dtype(y), dt);
        assert_int_equal(fc_tensor_rank(y), k->rank);
        snprintf(nm, sizeof nm, "%s_y", k->tag);
        expect_fixture(y, nm, tol);
        snprintf(nm, sizeof nm, "%s_g", k->tag);
        double *gv = fixture(nm, fc_tensor_numel(y));
        fc_tensor *g = from_f64(ctx, dt, fc_tensor_shape(y), k->rank, gv);
        free(gv);
        assert_int_equal(fc_backward_with(ctx, y, g, false), FC_OK);
        snprintf(nm, sizeof nm, "%s_dx", k->tag);
        expect_fixture(fc_grad(x), nm, tol);
        fc_scope_end(ctx);
        free_ctx(ctx);
    }
}

static void test_pool3d_matches_torch(void **state) {
    (void)state;
    pool_against_torch(FC_F64, 1e-12);
    /* the inputs are multiples of 1/7 below 200: f32 rounds them */
    pool_against_torch(FC_F32, 1e-5);
}

/* ---- a plain loop ---------------------------------------------------------------------------- */

typedef struct cfg {
    int64_t n, cin, cout, groups, sz[3], k[3], s[3], p[3], d[3];
    bool same, bias;
} cfg;

static int64_t cfg_out(const cfg *c, int i) {
    if (c->same) return c->sz[i];
    int64_t span = c->sz[i] + 2 * c->p[i] - c->d[i] * (c->k[i] - 1) - 1;
    return span < 0 ? 0 : span / c->s[i] + 1;
}

/* y [N, Cout, OD, OH, OW] by the definition in fucina/conv.h */
static void ref_conv3d(const cfg *c, const double *x, const double *w, const double *b, double *y) {
    int64_t o[3], pad[3];
    for (int i = 0; i < 3; i++) {
        o[i] = cfg_out(c, i);
        pad[i] = c->same ? c->d[i] * (c->k[i] - 1) / 2 : c->p[i];
    }
    int64_t cg = c->cin / c->groups, og = c->cout / c->groups;
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t oc = 0; oc < c->cout; oc++)
            for (int64_t t = 0; t < o[0]; t++)
                for (int64_t i = 0; i < o[1]; i++)
                    for (int64_t j = 0; j < o[2]; j++) {
                        double acc = b ? b[oc] : 0;
                        for (int64_t ic = 0; ic < cg; ic++)
                            for (int64_t r = 0; r < c->k[0]; r++)
                                for (int64_t p = 0; p < c->k[1]; p++)
                                    for (int64_t q = 0; q < c->k[2]; q++) {
                                        int64_t zd = t * c->s[0] - pad[0] + r * c->d[0];
                                        int64_t zh = i * c->s[1] - pad[1] + p * c->d[1];
                                        int64_t zw = j * c->s[2] - pad[2] + q * c->d[2];
                                        if (zd < 0 || zd >= c->sz[0] || zh < 0 || zh >= c->sz[1] ||
                                            zw < 0 || zw >= c->sz[2])
                                            continue;
                                        int64_t ch = (oc / og) * cg + ic;
                                        acc += w[(((oc * cg + ic) * c->k[0] + r) * c->k[1] + p) *
                                                     c->k[2] +
                                                 q] *
                                               x[(((n * c->cin + ch) * c->sz[0] + zd) * c->sz[1] +
                                                  zh) *
                                                     c->sz[2] +
                                                 zw];
                                    }
                        y[(((n * c->cout + oc) * o[0] + t) * o[1] + i) * o[2] + j] = acc;
                    }
}

static int64_t pick(uint64_t *s, int64_t lo, int64_t hi) {
    return lo + (int64_t)(fc_test_splitmix64(s) % (uint64_t)(hi - lo + 1));
}

static cfg random_cfg(uint64_t seed) {
    uint64_t s = seed;
    for (;;) {
        cfg c = {.n = pick(&s, 1, 2), .groups = pick(&s, 1, 2)};
        c.cin = c.groups * pick(&s, 1, 2);
        c.cout = c.groups * pick(&s, 1, 2);
        c.same = pick(&s, 0, 4) == 0;
        c.bias = pick(&s, 0, 1);
        for (int i = 0; i < 3; i++) {
            c.sz[i] = pick(&s, 1, 6);
            c.k[i] = pick(&s, 1, 3);
            c.s[i] = c.same ? 1 : pick(&s, 1, 3);
            c.p[i] = pick(&s, 0, 2);
            c.d[i] = pick(&s, 1, 2);
        }
        if (cfg_out(&c, 0) >= 1 && cfg_out(&c, 1) >= 1 && cfg_out(&c, 2) >= 1) return c;
    }
}

static fc_conv3d_opts cfg_opts(const cfg *c) {
    fc_conv3d_opts o = {.groups = c->groups, .padding_same = c->same};
    for (int i = 0; i < 3; i++)
        o.stride[i] = c->s[i], o.padding[i] = c->p[i], o.dilation[i] = c->d[i];
    return o;
}

/* x is stored with its last two axes swapped and read through a transpose */
static void test_conv3d_random_against_loop(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    for (uint64_t it = 0; it < 40; it++) {
        cfg c = random_cfg(100 + it);
        fc_scope_begin(ctx);
        int64_t xs[5] = {c.n, c.cin, c.sz[0], c.sz[1], c.sz[2]};
        int64_t xst[5] = {c.n, c.cin, c.sz[0], c.sz[2], c.sz[1]};
        int64_t ws[5] = {c.cout, c.cin / c.groups, c.k[0], c.k[1], c.k[2]};
        int64_t nx = numel(xs, 5), nw = numel(ws, 5);
        double *xv = malloc(sizeof *xv * (size_t)nx), *wv = malloc(sizeof *wv * (size_t)nw);
        double bv[4];
        fill_random(xv, nx, it * 3 + 1, -1, 1);
        fill_random(wv, nw, it * 3 + 2, -1, 1);
        fill_random(bv, c.cout, it * 3 + 3, -1, 1);
        /* the stored tensor holds x's transpose */
        double *xt = malloc(sizeof *xt * (size_t)nx);
        int64_t plane = c.sz[1] * c.sz[2];
        for (int64_t a = 0; a < nx / plane; a++)
            for (int64_t h = 0; h < c.sz[1]; h++)
                for (int64_t ww = 0; ww < c.sz[2]; ww++)
                    xt[a * plane + ww * c.sz[1] + h] = xv[a * plane + h * c.sz[2] + ww];
        fc_tensor *xstore = from_f64(ctx, FC_F64, xst, 5, xt);
        fc_tensor *x = fc_transpose(ctx, xstore, 3, 4);
        fc_tensor *w = from_f64(ctx, FC_F64, ws, 5, wv);
        fc_tensor *b = c.bias ? from_f64(ctx, FC_F64, &c.cout, 1, bv) : NULL;
        fc_conv3d_opts o = cfg_opts(&c);
        fc_tensor *y = fc_conv3d(ctx, x, w, b, &o);
        if (!y) fail_msg("case %llu: %s", (unsigned long long)it, fc_ctx_error(ctx));
        int64_t ys[5] = {c.n, c.cout, cfg_out(&c, 0), cfg_out(&c, 1), cfg_out(&c, 2)};
        assert_memory_equal(fc_tensor_shape(y), ys, sizeof ys);
        int64_t ny = numel(ys, 5);
        double *want = malloc(sizeof *want * (size_t)ny), *got = values(y);
        ref_conv3d(&c, xv, wv, c.bias ? bv : NULL, want);
        for (int64_t i = 0; i < ny; i++)
            if (fabs(got[i] - want[i]) > 1e-12 * (1 + fabs(want[i])))
                fail_msg("case %llu [%lld]: %.17g, loop %.17g", (unsigned long long)it,
                         (long long)i, got[i], want[i]);
        free(want);
        free(got);
        free(xv);
        free(xt);
        free(wv);
        fc_scope_end(ctx);
    }
    free_ctx(ctx);
}

/* ---- gradcheck, gradgradcheck ------------------------------------------------------------ */

static fc_tensor *conv_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    const cfg *c = user;
    fc_conv3d_opts o = cfg_opts(c);
    /* x through a transposed view of its stored leaf */
    fc_tensor *x = fc_transpose(ctx, in[0], 3, 4);
    fc_tensor *y = fc_conv3d(ctx, x, in[1], n > 2 ? in[2] : NULL, &o);
    fc_release(x);
    return y;
}

static fc_tensor *random_leaf(fc_ctx *ctx, const int64_t *shape, int rank, uint64_t seed) {
    int64_t n = numel(shape, rank);
    double *v = malloc(sizeof *v * (size_t)n);
    fill_random(v, n, seed, -1, 1);
    fc_tensor *t = from_f64(ctx, FC_F64, shape, rank, v);
    free(v);
    return t;
}

static void check_grads(fc_ctx *ctx, fc_gradcheck_fn fn, void *user, fc_tensor *const *in, int n,
                        const char *what) {
    fc_gradcheck_report rep;
    fc_gradcheck_opts o = {.check_all_f64 = true, .seed = 7};
    if (fc_gradcheck(ctx, fn, user, in, n, &o, &rep) != FC_OK || !rep.passed)
        fail_msg("%s gradcheck: %s", what, fc_ctx_error(ctx));
    assert_true(rep.checked > 0);
    for (int cg = 0; cg < 2; cg++) {
        o.constant_grad_output = cg;
        if (fc_gradgradcheck(ctx, fn, user, in, n, &o, &rep) != FC_OK || !rep.passed)
            fail_msg("%s gradgradcheck (constant_grad_output %d): %s", what, cg, fc_ctx_error(ctx));
        assert_true(rep.checked > 0);
    }
}

static void test_conv3d_gradcheck(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    const cfg cases[] = {
        {.n = 1,
         .cin = 2,
         .cout = 2,
         .groups = 2,
         .sz = {3, 3, 2},
         .k = {2, 2, 1},
         .s = {2, 1, 1},
         .p = {1, 0, 1},
         .d = {1, 1, 2},
         .bias = true},
        {.n = 2,
         .cin = 1,
         .cout = 2,
         .groups = 1,
         .sz = {3, 2, 3},
         .k = {2, 1, 2},
         .s = {1, 1, 1},
         .p = {0, 0, 0},
         .d = {2, 1, 1},
         .same = true},
        /* a depth padding beyond the kernel's reach: the per-tap path */
        {.n = 2,
         .cin = 2,
         .cout = 1,
         .groups = 1,
         .sz = {2, 2, 3},
         .k = {1, 2, 2},
         .s = {2, 1, 1},
         .p = {1, 1, 0},
         .d = {1, 1, 1},
         .bias = true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const cfg *c = &cases[i];
        fc_scope_begin(ctx);
        fc_tensor *in[3] = {
            random_leaf(ctx, (const int64_t[]){c->n, c->cin, c->sz[0], c->sz[2], c->sz[1]}, 5,
                        10 + i),
            random_leaf(ctx,
                        (const int64_t[]){c->cout, c->cin / c->groups, c->k[0], c->k[1], c->k[2]},
                        5, 20 + i),
            random_leaf(ctx, &c->cout, 1, 30 + i)};
        check_grads(ctx, conv_fn, (void *)c, in, c->bias ? 3 : 2, "conv3d");
        fc_scope_end(ctx);
    }
    free_ctx(ctx);
}

typedef struct pool_case {
    bool avg;
    fc_pool3d_opts o;
} pool_case;

static fc_tensor *pool_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    const pool_case *p = user;
    return p->avg ? fc_avg_pool3d(ctx, in[0], &p->o) : fc_max_pool3d(ctx, in[0], &p->o);
}

static void test_pool3d_gradcheck(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    const pool_case cases[] = {
        {false,
         {.kernel = {2, 2, 2},
          .stride = {1, 2, 1},
          .padding = {1, 0, 1},
          .dilation = {1, 1, 2},
          .ceil_mode = true}},
        {true, {.kernel = {2, 3, 2}, .stride = {2, 1, 1}, .padding = {1, 1, 0}, .ceil_mode = true}},
        {true, {.kernel = {2, 2, 2}, .padding = {1, 1, 1}, .exclude_pad = true}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fc_scope_begin(ctx);
        /* distinct values a grid apart: no ties the differences could cross */
        int64_t sh[5] = {1, 2, 3, 4, 3}, nv = numel(sh, 5);
        double v[72];
        for (int64_t k = 0; k < nv; k++)
            v[k] = (double)((k * 29) % nv) * 0.1 - 3.0;
        fc_tensor *x = fc_tensor_from_data(ctx, FC_F64, sh, 5, v);
        check_grads(ctx, pool_fn, (void *)&cases[i], &x, 1, cases[i].avg ? "avg" : "max");
        fc_scope_end(ctx);
    }
    free_ctx(ctx);
}

/* Ties go to the first maximum in (d, h, w) order, as PyTorch's argmax;
 * a NaN in a window makes its output NaN. */
static void test_max_pool3d_ties_and_nan(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_scope_begin(ctx);
    /* [1, 1, 2, 2, 4]: two windows of 2x2x2, the first all ones, the second
     * with its maximum 5 at (d 1, h 0, w 3) and (d 1, h 1, w 2) */
    const double v[16] = {1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 5, 1, 1, 5, 0};
    fc_tensor *x = from_f64(ctx, FC_F64, (const int64_t[]){1, 1, 2, 2, 4}, 5, v);
    assert_int_equal(fc_requires_grad(x, true), FC_OK);
    fc_pool3d_opts o = {.kernel = {2, 2, 2}};
    fc_tensor *y = fc_max_pool3d(ctx, x, &o);
    assert_non_null(y);
    double *got = values(y);
    assert_true(got[0] == 1 && got[1] == 5);
    free(got);
    assert_int_equal(fc_backward(ctx, fc_sum(ctx, y, NULL, 0, false)), FC_OK);
    double *g = values(fc_grad(x));
    for (int i = 0; i < 16; i++)
        assert_true(g[i] == (i == 0 || i == 11 ? 1.0 : 0.0));
    free(g);
    double vn[16];
    memcpy(vn, v, sizeof vn);
    vn[6] = NAN;
    fc_tensor *xn = from_f64(ctx, FC_F32, (const int64_t[]){1, 1, 2, 2, 4}, 5, vn);
    double *yn = values(fc_max_pool3d(ctx, xn, &o));
    assert_true(yn[0] == 1 && isnan(yn[1]));
    free(yn);
    fc_scope_end(ctx);
    free_ctx(ctx);
}

/* ---- bad input ------------------------------------------------------------------------------ */

static void expect_error(fc_ctx *ctx, fc_tensor *t, fc_status want, const char *op) {
    assert_null(t);
    if (fc_ctx_status(ctx) != want)
        fail_msg("%s: status %s, want %s (%s)", op, fc_status_name(fc_ctx_status(ctx)),
                 fc_status_name(want), fc_ctx_error(ctx));
    assert_non_null(strstr(fc_ctx_error(ctx), op));
    fc_ctx_clear_error(ctx);
}

static void test_conv3d_bad_input(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_scope_begin(ctx);
    fc_tensor *x = fc_zeros(ctx, FC_F32, (const int64_t[]){1, 2, 3, 3, 3}, 5);
    fc_tensor *w = fc_zeros(ctx, FC_F32, (const int64_t[]){4, 2, 2, 2, 2}, 5);
    fc_tensor *x4 = fc_zeros(ctx, FC_F32, (const int64_t[]){1, 2, 3, 3}, 4);
    fc_tensor *xi = fc_zeros(ctx, FC_I32, (const int64_t[]){1, 2, 3, 3, 3}, 5);
    fc_tensor *wd = fc_zeros(ctx, FC_F64, (const int64_t[]){4, 2, 2, 2, 2}, 5);
    fc_tensor *b3 = fc_zeros(ctx, FC_F32, (const int64_t[]){3}, 1);
    fc_tensor *b2 = fc_zeros(ctx, FC_F32, (const int64_t[]){2, 2}, 2);
    expect_error(ctx, fc_conv3d(ctx, NULL, w, NULL, NULL), FC_ERR_NULL_ARG, "conv3d");
    expect_error(ctx, fc_conv3d(ctx, x, NULL, NULL, NULL), FC_ERR_NULL_ARG, "conv3d");
    expect_error(ctx, fc_conv3d(ctx, xi, w, NULL, NULL), FC_ERR_DTYPE, "conv3d");
    expect_error(ctx, fc_conv3d(ctx, x, wd, NULL, NULL), FC_ERR_DTYPE, "conv3d");
    expect_error(ctx, fc_conv3d(ctx, x4, w, NULL, NULL), FC_ERR_RANK, "conv3d");
    expect_error(ctx, fc_conv3d(ctx, x, x4, NULL, NULL), FC_ERR_RANK, "conv3d");
    expect_error(ctx, fc_conv3d(ctx, x, w, b2, NULL), FC_ERR_RANK, "conv3d");
    expect_error(ctx, fc_conv3d(ctx, x, w, b3, NULL), FC_ERR_SHAPE_MISMATCH, "conv3d");
    fc_conv3d_opts o = {.groups = 2};
    expect_error(ctx, fc_conv3d(ctx, x, w, NULL, &o), FC_ERR_SHAPE_MISMATCH, "conv3d");
    o = (fc_conv3d_opts){.groups = 3};
    expect_error(ctx, fc_conv3d(ctx, x, w, NULL, &o), FC_ERR_SHAPE_MISMATCH, "conv3d");
    o = (fc_conv3d_opts){.stride = {1, -1, 1}};
    expect_error(ctx, fc_conv3d(ctx, x, w, NULL, &o), FC_ERR_INVALID_ARG, "conv3d");
    o = (fc_conv3d_opts){.padding = {-1, 0, 0}};
    expect_error(ctx, fc_conv3d(ctx, x, w, NULL, &o), FC_ERR_INVALID_ARG, "conv3d");
    o = (fc_conv3d_opts){.stride = {2, 1, 1}, .padding_same = true};
    expect_error(ctx, fc_conv3d(ctx, x, w, NULL, &o), FC_ERR_INVALID_ARG, "conv3d");
    o = (fc_conv3d_opts){.dilation = {1, 1, 3}};
    expect_error(ctx, fc_conv3d(ctx, x, w, NULL, &o), FC_ERR_INVALID_SHAPE, "conv3d");
    o = (fc_conv3d_opts){.padding = {INT64_MAX, 0, 0}};
    expect_error(ctx, fc_conv3d(ctx, x, w, NULL, &o), FC_ERR_OVERFLOW, "conv3d");
    /* zero options are the defaults */
    fc_conv3d_opts z = {0}, d = fc_conv3d_opts_default();
    fc_tensor *y0 = fc_conv3d(ctx, x, w, NULL, &z), *y1 = fc_conv3d(ctx, x, w, NULL, &d);
    assert_non_null(y0);
    assert_non_null(y1);
    assert_memory_equal(fc_tensor_shape(y0), ((const int64_t[]){1, 4, 2, 2, 2}), 40);

    fc_pool3d_opts p = {.kernel = {2, 2, 2}};
    expect_error(ctx, fc_max_pool3d(ctx, NULL, &p), FC_ERR_NULL_ARG, "max_pool3d");
    expect_error(ctx, fc_max_pool3d(ctx, x, NULL), FC_ERR_NULL_ARG, "max_pool3d");
    expect_error(ctx, fc_avg_pool3d(ctx, fc_zeros(ctx, FC_F32, (const int64_t[]){3, 3, 3}, 3), &p),
                 FC_ERR_RANK, "avg_pool3d");
    expect_error(ctx, fc_avg_pool3d(ctx, xi, &p), FC_ERR_DTYPE, "avg_pool3d");
    p = (fc_pool3d_opts){.kernel = {2, 0, 2}};
    expect_error(ctx, fc_max_pool3d(ctx, x, &p), FC_ERR_INVALID_ARG, "max_pool3d");
    p = (fc_pool3d_opts){.kernel = {2, 2, 2}, .padding = {0, 0, 2}};
    expect_error(ctx, fc_max_pool3d(ctx, x, &p), FC_ERR_INVALID_ARG, "max_pool3d");
    p = (fc_pool3d_opts){.kernel = {2, 2, 2}, .dilation = {2, 1, 1}};
    expect_error(ctx, fc_avg_pool3d(ctx, x, &p), FC_ERR_INVALID_ARG, "avg_pool3d");
    p = (fc_pool3d_opts){.kernel = {2, 2, 2}, .divisor_override = -1};
    expect_error(ctx, fc_avg_pool3d(ctx, x, &p), FC_ERR_INVALID_ARG, "avg_pool3d");
    p = (fc_pool3d_opts){.kernel = {4, 2, 2}};
    expect_error(ctx, fc_max_pool3d(ctx, x, &p), FC_ERR_INVALID_SHAPE, "max_pool3d");
    fc_scope_end(ctx);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv3d_matches_torch_f64),
        cmocka_unit_test(test_conv3d_matches_torch_f32_bf16),
        cmocka_unit_test(test_pool3d_matches_torch),
        cmocka_unit_test(test_conv3d_random_against_loop),
        cmocka_unit_test(test_conv3d_gradcheck),
        cmocka_unit_test(test_pool3d_gradcheck),
        cmocka_unit_test(test_max_pool3d_ties_and_nan),
        cmocka_unit_test(test_conv3d_bad_input),
    };
    return cmocka_run_group_tests(tests, load_fixture, free_fixture);
}
