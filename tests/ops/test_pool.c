/* SPDX-License-Identifier: MIT */
/* test_pool.c - max_pool2d, avg_pool2d and adaptive_avg_pool2d, forward and
 * backward, against naive double-precision references written here (every
 * window walked with bounds tests, PyTorch's formulas for the output size,
 * the divisor and the adaptive windows): random geometries (kernel, stride,
 * padding, dilation, ceil_mode, exclude_pad, divisor_override), batch
 * of one and unbatched [C,H,W] input, transposed and narrowed views, every
 * float dtype; hand-computed values, ties and NaN; the same bits for one
 * and two threads; every error with its code. Gradient checks are in
 * test_pool_grad.c. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ag/tape.h"
#include "fc_test_data.h"
#include "fct_f64.h"

static fc_ctx *new_ctx(int threads) {
    fc_ctx_opts o = {.threads = threads, .seed = 5};
    fc_ctx *ctx = fc_ctx_new(&o);
    assert_non_null(ctx);
    return ctx;
}

static void expect_close(const double *got, const double *want, int64_t n, double tol,
                         const char *what) {
    for (int64_t i = 0; i < n; i++) {
        if ((isnan(want[i]) && isnan(got[i])) || got[i] == want[i]) continue;
        if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
            fail_msg("%s[%lld]: got %.10g want %.10g (tol %g)", what, (long long)i, got[i], want[i],
                     tol);
    }
}

/* ---- the reference ----------------------------------------------------------------------------
 */

enum kind { K_MAX, K_AVG, K_ADAPTIVE };

typedef struct cfg {
    enum kind kind;
    int64_t n, c, h, w; /* n 0: unbatched [C,H,W] */
    fc_pool2d_opts o;
    int64_t out[2]; /* adaptive output size */
} cfg;

/* PyTorch's output size, computed in floating point as an independent check */
static int64_t ref_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    double q = (double)(in + 2 * p - d * (k - 1) - 1) / (double)s;
    int64_t o = (int64_t)(ceil_mode ? ceil(q) : floor(q)) + 1;
    if (ceil_mode && (o - 1) * s >= in + p) o--;
    return o;
}

typedef struct geo {
    int64_t planes, ih, iw, oh, ow, k[2], s[2], p[2], d[2];
} geo;

static geo ref_geo(const cfg *c) {
    geo g = {.planes = (c->n ? c->n : 1) * c->c, .ih = c->h, .iw = c->w};
    for (int a = 0; a < 2; a++) {
        g.k[a] = c->o.kernel[a];
        g.s[a] = c->o.stride[a] ? c->o.stride[a] : g.k[a];
        g.p[a] = c->o.padding[a];
        g.d[a] = c->o.dilation[a] ? c->o.dilation[a] : 1;
    }
    if (c->kind == K_ADAPTIVE) {
        g.oh = c->out[0];
        g.ow = c->out[1];
    } else {
        g.oh = ref_out(g.ih, g.k[0], g.s[0], g.p[0], g.d[0], c->o.ceil_mode);
        g.ow = ref_out(g.iw, g.k[1], g.s[1], g.p[1], g.d[1], c->o.ceil_mode);
    }
    return g;
}

/* y (and dx += the gradient g of y, when g) by walking every window. */
static void ref_pool(const cfg *c, const geo *g, const double *x, double *y, const double *gy,
                     double *dx) {
    if (dx) memset(dx, 0, sizeof *dx * (size_t)(g->planes * g->ih * g->iw));
    for (int64_t p = 0; p < g->planes; p++) {
        const double *xp = x + p * g->ih * g->iw;
        double *dp = dx ? dx + p * g->ih * g->iw : NULL;
        for (int64_t i = 0; i < g->oh; i++)
            for (int64_t j = 0; j < g->ow; j++) {
                int64_t o = (p * g->oh + i) * g->ow + j;
                int64_t h0, h1, w0, w1, div;
                if (c->kind == K_ADAPTIVE) {
                    h0 = (int64_t)floor((double)(i * g->ih) / (double)g->oh);
                    h1 = (int64_t)ceil((double)((i + 1) * g->ih) / (double)g->oh);
                    w0 = (int64_t)floor((double)(j * g->iw) / (double)g->ow);
                    w1 = (int64_t)ceil((double)((j + 1) * g->iw) / (double)g->ow);
                    div = (h1 - h0) * (w1 - w0);
                } else {
                    h0 = i * g->s[0] - g->p[0];
                    w0 = j * g->s[1] - g->p[1];
                    h1 = h0 + (g->k[0] - 1) * g->d[0] + 1;
                    w1 = w0 + (g->k[1] - 1) * g->d[1] + 1;
                    int64_t ph1 = h1 < g->ih + g->p[0] ? h1 : g->ih + g->p[0];
                    int64_t pw1 = w1 < g->iw + g->p[1] ? w1 : g->iw + g->p[1];
                    div = c->o.divisor_override ? c->o.divisor_override
                          : !c->o.exclude_pad   ? (ph1 - h0) * (pw1 - w0)
                                                : -1; /* counted below */
                }
                /* a window with no input element (dilation can step over a
                 * small input) is -inf and passes no gradient */
                double m = -INFINITY, s = 0;
                int64_t best = -1, cnt = 0;
                int64_t step_h = c->kind == K_MAX ? g->d[0] : 1;
                int64_t step_w = c->kind == K_MAX ? g->d[1] : 1;
                for (int64_t h = h0; h < h1; h += step_h)
                    for (int64_t w = w0; w < w1; w += step_w) {
                        if (h < 0 || h >= g->ih || w < 0 || w >= g->iw) continue;
                        double v = xp[h * g->iw + w];
                        if (best < 0 || v > m || isnan(v)) {
                            m = v;
                            best = h * g->iw + w;
                        }
                        s += v;
                        cnt++;
                    }
                if (div < 0) div = cnt;
                y[o] = c->kind == K_MAX ? m : s / (double)div;
                if (!dx) continue;
                if (c->kind == K_MAX) {
                    if (best >= 0) dp[best] += gy[o];
                    continue;
                }
                for (int64_t h = h0 > 0 ? h0 : 0; h < h1 && h < g->ih; h++)
                    for (int64_t w = w0 > 0 ? w0 : 0; w < w1 && w < g->iw; w++)
                        dp[h * g->iw + w] += gy[o] / (double)div;
            }
    }
}

static fc_tensor *run_op(fc_ctx *ctx, const cfg *c, fc_tensor *x) {
    switch (c->kind) {
    case K_MAX:
        return fc_max_pool2d(ctx, x, &c->o);
    case K_AVG:
        return fc_avg_pool2d(ctx, x, &c->o);
    default:
        return fc_adaptive_avg_pool2d(ctx, x, c->out);
    }
}

/* ---- random configurations against the reference -----------------------------------------------
 */

enum view { V_CONTIG, V_TRANSPOSE, V_NARROW, V_COUNT };

/* x of c's shape in dtype dt, as view v of a leaf (*leaf, requiring grad) */
static fc_tensor *make_input(fc_ctx *ctx, const cfg *c, fc_dtype dt, enum view v, uint64_t seed,
                             fc_tensor **leaf) {
    int64_t shape[4], rank = 0;
    if (c->n) shape[rank++] = c->n;
    shape[rank++] = c->c;
    shape[rank++] = v == V_TRANSPOSE ? c->w : c->h;
    shape[rank++] = v == V_TRANSPOSE ? c->h : c->w + (v == V_NARROW ? 3 : 0);
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    double *vals = malloc(sizeof *vals * (size_t)n);
    fill_random(vals, n, seed, -3, 3);
    *leaf = from_f64(ctx, dt, shape, (int)rank, vals);
    free(vals);
    assert_int_equal(fc_requires_grad(*leaf, true), FC_OK);
    int r = (int)rank;
    if (v == V_TRANSPOSE) return fc_transpose(ctx, *leaf, r - 2, r - 1);
    if (v == V_NARROW) return fc_narrow(ctx, *leaf, r - 1, 1, c->w);
    return fc_retain(*leaf);
}

static double out_tol(fc_dtype dt) {
    return dt == FC_F64 ? 1e-13 : dt == FC_F32 ? 1e-6 : dt == FC_F16 ? 1e-3 : 8e-3;
}

static void check_case(fc_ctx *ctx, const cfg *c, fc_dtype dt, enum view v, uint64_t seed) {
    geo g = ref_geo(c);
    fc_tensor *leaf, *x = make_input(ctx, c, dt, v, seed, &leaf);
    assert_non_null(x);
    fc_tensor *y = run_op(ctx, c, x);
    if (!y) fail_msg("seed %llu: %s", (unsigned long long)seed, fc_ctx_error(ctx));
    assert_int_equal(fc_tensor_dtype(y), dt);
    int r = fc_tensor_rank(y);
    assert_int_equal(r, c->n ? 4 : 3);
    assert_int_equal(fc_tensor_shape(y)[r - 2], g.oh);
    assert_int_equal(fc_tensor_shape(y)[r - 1], g.ow);
    int64_t nx = g.planes * g.ih * g.iw, ny = g.planes * g.oh * g.ow;
    double *xv = values(x), *gv = malloc(sizeof *gv * (size_t)ny);
    double *want = malloc(sizeof *want * (size_t)ny), *dwant = malloc(sizeof *dwant * (size_t)nx);
    fill_random(gv, ny, seed + 1, -1, 1);
    fc_tensor *gt = from_f64(ctx, fc__grad_dtype(dt), fc_tensor_shape(y), r, gv);
    double *gq = values(gt); /* the gradient as it was rounded */
    ref_pool(c, &g, xv, want, gq, dwant);
    double *got = values(y);
    expect_close(got, want, ny, c->kind == K_MAX ? 0 : out_tol(dt), "pool forward");
    free(got);
    assert_int_equal(fc_backward_with(ctx, y, gt, false), FC_OK);
    /* the leaf's gradient, read in x's logical layout */
    fc_tensor *gl = fc_grad(leaf);
    assert_non_null(gl);
    fc_tensor *gx = v == V_TRANSPOSE ? fc_transpose(ctx, gl, r - 2, r - 1)
                    : v == V_NARROW  ? fc_narrow(ctx, gl, r - 1, 1, c->w)
                                     : fc_retain(gl);
    got = values(gx);
    expect_close(got, dwant, nx, dt == FC_F64 ? 1e-13 : 1e-6, "pool dx");
    free(got);
    fc_release(gx);
    free(xv);
    free(gv);
    free(gq);
    free(want);
    free(dwant);
    fc_release(gt);
    fc_release(y);
    fc_release(x);
    fc_release(leaf);
}

static int64_t pick(uint64_t *s, int64_t lo, int64_t hi) {
    return lo + (int64_t)(fc_test_splitmix64(s) % (uint64_t)(hi - lo + 1));
}

/* A random geometry of kind k with an output of at least one element. */
static cfg random_cfg(enum kind k, uint64_t *s) {
    for (;;) {
        cfg c = {.kind = k, .n = pick(s, 0, 2), .c = pick(s, 1, 3)};
        c.h = pick(s, 1, 9);
        c.w = pick(s, 1, 9);
        for (int a = 0; a < 2; a++) {
            c.o.kernel[a] = pick(s, 1, 4);
            c.o.stride[a] = pick(s, 0, 3);
            c.o.padding[a] = pick(s, 0, c.o.kernel[a] / 2);
            c.o.dilation[a] = k == K_MAX ? pick(s, 0, 2) : pick(s, 0, 1);
            c.out[a] = pick(s, 1, 7);
        }
        c.o.ceil_mode = pick(s, 0, 1);
        c.o.exclude_pad = !(pick(s, 0, 1));
        c.o.divisor_override = k == K_AVG && pick(s, 0, 3) == 0 ? pick(s, 1, 7) : 0;
        geo g = ref_geo(&c);
        if (g.oh >= 1 && g.ow >= 1) return c;
    }
}

static void random_sweep(enum kind k) {
    fc_ctx *ctx = new_ctx(2);
    uint64_t s = 1000 + (uint64_t)k;
    const fc_dtype dts[] = {FC_F32, FC_F64, FC_F16, FC_BF16};
    for (int t = 0; t < 120; t++) {
        cfg c = random_cfg(k, &s);
        fc_scope_begin(ctx);
        check_case(ctx, &c, dts[t % 4], (enum view)(t % V_COUNT), (uint64_t)t);
        fc_scope_end(ctx);
    }
    free_ctx(ctx);
}

static void test_pool_max_random_vs_reference(void **state) {
    (void)state;
    random_sweep(K_MAX);
}

static void test_pool_avg_random_vs_reference(void **state) {
    (void)state;
    random_sweep(K_AVG);
}

static void test_pool_adaptive_random_vs_reference(void **state) {
    (void)state;
    random_sweep(K_ADAPTIVE);
}

/* ---- hand-computed values ------------------------------------------------------------------- */

static fc_tensor *tensor4(fc_ctx *ctx, const double *v, int64_t h, int64_t w) {
    return from_f64(ctx, FC_F32, (const int64_t[]){1, 1, h, w}, 4, v);
}

static void expect_values(fc_tensor *y, const double *want, int64_t n, const char *what) {
    assert_non_null(y);
    assert_int_equal(fc_tensor_numel(y), n);
    double *got = values(y);
    expect_close(got, want, n, 1e-7, what);
    free(got);
}

static void test_pool_known_values(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    fc_scope_begin(ctx);
    const double x[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    fc_tensor *t = tensor4(ctx, x, 4, 4);
    fc_pool2d_opts k2 = {.kernel = {2, 2}};
    expect_values(fc_max_pool2d(ctx, t, &k2), (const double[]){6, 8, 14, 16}, 4, "max k2");
    expect_values(fc_avg_pool2d(ctx, t, &k2), (const double[]){3.5, 5.5, 11.5, 13.5}, 4, "avg k2");
    /* kernel 3, stride 2, padding 1: corners see 4 elements, edges 6 */
    fc_pool2d_opts k3 = {
        .kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .exclude_pad = true};
    expect_values(fc_max_pool2d(ctx, t, &k3), (const double[]){6, 8, 14, 16}, 4, "max k3 p1");
    expect_values(fc_avg_pool2d(ctx, t, &k3), (const double[]){3.5, 5, 9.5, 11}, 4,
                  "avg k3 p1 exclude pad");
    k3.exclude_pad = false; /* the zero default: PyTorch's count_include_pad=True */
    expect_values(fc_avg_pool2d(ctx, t, &k3), (const double[]){14.0 / 9, 30.0 / 9, 57.0 / 9, 11}, 4,
                  "avg k3 p1 include pad");
    k3.divisor_override = 2;
    expect_values(fc_avg_pool2d(ctx, t, &k3), (const double[]){7, 15, 28.5, 49.5}, 4,
                  "avg divisor_override");
    /* ceil_mode: 4 wide, kernel 2, stride 3, padding 1: floor and ceil both
     * give 2 (a third window would start in the right padding) */
    fc_pool2d_opts cm = {.kernel = {2, 2}, .stride = {3, 3}, .padding = {1, 1}, .ceil_mode = true};
    expect_values(fc_max_pool2d(ctx, t, &cm), (const double[]){1, 4, 13, 16}, 4, "max ceil_mode");
    /* 3 wide, kernel 2, stride 2, ceil_mode: the last window covers one column */
    fc_tensor *t3 = tensor4(ctx, x, 3, 3);
    fc_pool2d_opts c2 = {.kernel = {2, 2}, .ceil_mode = true, .exclude_pad = true};
    expect_values(fc_avg_pool2d(ctx, t3, &c2), (const double[]){3, 4.5, 7.5, 9}, 4,
                  "avg ceil_mode partial window");
    c2.exclude_pad = false; /* no padding: the cut window still divides by its cover */
    expect_values(fc_avg_pool2d(ctx, t3, &c2), (const double[]){3, 4.5, 7.5, 9}, 4,
                  "avg ceil_mode include pad");
    /* dilation 2 on 4x4, kernel 2: taps {0,2} and {1,3} */
    fc_pool2d_opts dl = {.kernel = {2, 2}, .stride = {1, 1}, .dilation = {2, 2}};
    expect_values(fc_max_pool2d(ctx, t, &dl), (const double[]){11, 12, 15, 16}, 4, "dilation");
    /* adaptive 4 -> 3: windows [0,2), [1,3), [2,4) */
    expect_values(fc_adaptive_avg_pool2d(ctx, t, (const int64_t[]){3, 3}),
                  (const double[]){3.5, 4.5, 5.5, 7.5, 8.5, 9.5, 11.5, 12.5, 13.5}, 9,
                  "adaptive 4->3");
    expect_values(fc_adaptive_avg_pool2d(ctx, t, (const int64_t[]){1, 1}), (const double[]){8.5}, 1,
                  "adaptive global");
    fc_scope_end(ctx);
    free_ctx(ctx);
}

/* Ties go to the first maximum, NaN propagates and takes the gradient
 * (the last NaN), a window of -inf still has an argmax. */
static void test_pool_max_ties_and_nan(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    fc_scope_begin(ctx);
    const double x[8] = {5, 5, 1, NAN, 5, 2, NAN, 0};
    fc_tensor *t = from_f64(ctx, FC_F64, (const int64_t[]){1, 1, 2, 4}, 4, x);
    assert_int_equal(fc_requires_grad(t, true), FC_OK);
    fc_pool2d_opts o = {.kernel = {2, 2}};
    fc_tensor *y = fc_max_pool2d(ctx, t, &o);
    assert_non_null(y);
    double *got = values(y);
    assert_true(got[0] == 5);
    assert_true(isnan(got[1]));
    free(got);
    assert_int_equal(
        fc_backward_with(ctx, y, fc_ones(ctx, FC_F64, (const int64_t[]){1, 1, 1, 2}, 4), false),
        FC_OK);
    got = values(fc_grad(t));
    /* window 0 = {5,5,5,2}: the first 5; window 1 = {1,NaN,NaN,0}: the last NaN */
    const double want[8] = {1, 0, 0, 0, 0, 0, 1, 0};
    expect_close(got, want, 8, 0, "argmax gradient");
    free(got);
    const double ninf[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    fc_tensor *yi = fc_max_pool2d(ctx, tensor4(ctx, ninf, 2, 2), &o);
    got = values(yi);
    assert_true(isinf(got[0]) && got[0] < 0);
    free(got);
    fc_scope_end(ctx);
    free_ctx(ctx);
}

/* ---- the same bits for one and two threads ------------------------------------------------- */

/* The f32 2x2 max pool (the CNN's; a SIMD scan of eight outputs at a time
 * where the CPU has one) against the reference walk: widths giving full
 * and partial groups of eight outputs, odd widths and heights (a trailing
 * column or row that no window reads), values from a set of four so ties
 * are common, and NaNs; the maxima exactly and the gradient routed to the
 * same input (the first maximum, the last NaN). */
static void test_pool_max_2x2_f32_ties_nan(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    const int64_t widths[] = {2, 3, 9, 14, 16, 17, 19, 28, 35}, heights[] = {2, 5};
    for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++)
        for (size_t hi = 0; hi < 2; hi++) {
            fc_scope_begin(ctx);
            cfg c = {.kind = K_MAX, .n = 1, .c = 2, .h = heights[hi], .w = widths[wi]};
            c.o.kernel[0] = c.o.kernel[1] = 2;
            geo g = ref_geo(&c);
            int64_t nx = g.planes * g.ih * g.iw, ny = g.planes * g.oh * g.ow;
            double *xv = malloc(sizeof *xv * (size_t)nx), *gv = malloc(sizeof *gv * (size_t)ny);
            double *want = malloc(sizeof *want * (size_t)ny);
            double *dwant = malloc(sizeof *dwant * (size_t)nx);
            uint64_t seed = 77 + wi * 2 + hi;
            for (int64_t i = 0; i < nx; i++) {
                uint64_t r = fc_test_splitmix64(&seed);
                xv[i] = r % 11 == 0 ? NAN : (double)(r % 4);
            }
            for (int64_t i = 0; i < ny; i++)
                gv[i] = (double)(i + 1);
            const int64_t shape[4] = {1, 2, c.h, c.w};
            fc_tensor *x = from_f64(ctx, FC_F32, shape, 4, xv);
            assert_int_equal(fc_requires_grad(x, true), FC_OK);
            fc_tensor *y = fc_max_pool2d(ctx, x, &c.o);
            assert_non_null(y);
            fc_tensor *gt = from_f64(ctx, FC_F32, fc_tensor_shape(y), 4, gv);
            ref_pool(&c, &g, xv, want, gv, dwant);
            double *got = values(y);
            expect_close(got, want, ny, 0, "2x2 max forward");
            free(got);
            assert_int_equal(fc_backward_with(ctx, y, gt, false), FC_OK);
            got = values(fc_grad(x));
            expect_close(got, dwant, nx, 0, "2x2 max dx");
            free(got);
            free(xv);
            free(gv);
            free(want);
            free(dwant);
            fc_release(gt);
            fc_release(y);
            fc_release(x);
            fc_scope_end(ctx);
        }
    free_ctx(ctx);
}

static void test_pool_thread_independent(void **state) {
    (void)state;
    const int64_t shape[4] = {4, 8, 40, 36};
    const int64_t n = 4 * 8 * 40 * 36;
    double *v = malloc(sizeof *v * (size_t)n);
    fill_random(v, n, 77, -2, 2);
    float *bits[2][6];
    int64_t sizes[6];
    for (int t = 0; t < 2; t++) {
        fc_ctx *ctx = new_ctx(t + 1);
        fc_scope_begin(ctx);
        fc_tensor *x = from_f64(ctx, FC_F32, shape, 4, v);
        assert_int_equal(fc_requires_grad(x, true), FC_OK);
        fc_pool2d_opts mo = {.kernel = {3, 3}, .stride = {2, 1}, .padding = {1, 1}};
        fc_pool2d_opts ao = {
            .kernel = {3, 2}, .stride = {1, 2}, .padding = {1, 1}, .ceil_mode = true};
        fc_tensor *ys[3] = {fc_max_pool2d(ctx, x, &mo), fc_avg_pool2d(ctx, x, &ao),
                            fc_adaptive_avg_pool2d(ctx, x, (const int64_t[]){7, 5})};
        for (int k = 0; k < 3; k++) {
            assert_non_null(ys[k]);
            fc_zero_grad(&x, 1);
            fc_tensor *g = fc_sin(ctx, fc_detach(ctx, ys[k]));
            assert_int_equal(fc_backward_with(ctx, ys[k], g, false), FC_OK);
            fc_tensor *outs[2] = {ys[k], fc_grad(x)};
            for (int q = 0; q < 2; q++) {
                sizes[2 * k + q] = fc_tensor_numel(outs[q]);
                size_t nb = sizeof(float) * (size_t)sizes[2 * k + q];
                bits[t][2 * k + q] = malloc(nb);
                assert_int_equal(fc_tensor_copy_out(bits[t][2 * k + q], nb, outs[q]), FC_OK);
            }
        }
        fc_scope_end(ctx);
        free_ctx(ctx);
    }
    for (int k = 0; k < 6; k++) {
        assert_memory_equal(bits[0][k], bits[1][k], sizeof(float) * (size_t)sizes[k]);
        free(bits[0][k]);
        free(bits[1][k]);
    }
    free(v);
}

/* ---- errors --------------------------------------------------------------------------------- */

static void expect_error(fc_ctx *ctx, fc_tensor *t, fc_status code, const char *needle) {
    if (t) fail_msg("expected %s (%s), got a tensor", fc_status_name(code), needle);
    assert_int_equal(fc_ctx_status(ctx), code);
    if (!strstr(fc_ctx_error(ctx), needle))
        fail_msg("message '%s' lacks '%s'", fc_ctx_error(ctx), needle);
    fc_ctx_clear_error(ctx);
}

static void test_pool_errors(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    fc_scope_begin(ctx);
    fc_tensor *x = fc_zeros(ctx, FC_F32, (const int64_t[]){2, 3, 4, 4}, 4);
    fc_tensor *x2 = fc_zeros(ctx, FC_F32, (const int64_t[]){4, 4}, 2);
    fc_tensor *x5 = fc_zeros(ctx, FC_F32, (const int64_t[]){1, 2, 3, 4, 4}, 5);
    fc_tensor *xi = fc_zeros(ctx, FC_I32, (const int64_t[]){2, 3, 4, 4}, 4);
    fc_pool2d_opts k2 = {.kernel = {2, 2}};
    expect_error(ctx, fc_max_pool2d(ctx, x2, &k2), FC_ERR_RANK, "max_pool2d: input f32[4,4]");
    expect_error(ctx, fc_avg_pool2d(ctx, x5, &k2), FC_ERR_RANK, "avg_pool2d");
    expect_error(ctx, fc_adaptive_avg_pool2d(ctx, x2, (const int64_t[]){1, 1}), FC_ERR_RANK,
                 "adaptive_avg_pool2d");
    expect_error(ctx, fc_max_pool2d(ctx, xi, &k2), FC_ERR_DTYPE, "max_pool2d: dtype i32");
    expect_error(ctx, fc_adaptive_avg_pool2d(ctx, xi, (const int64_t[]){1, 1}), FC_ERR_DTYPE,
                 "adaptive_avg_pool2d");
    /* kernel larger than the padded input: output size below 1 */
    fc_pool2d_opts k5 = {.kernel = {5, 2}};
    expect_error(ctx, fc_max_pool2d(ctx, x, &k5), FC_ERR_INVALID_SHAPE, "gives output size [0,2]");
    fc_pool2d_opts k6 = {.kernel = {7, 7}, .padding = {1, 1}}; /* 4 + 2 < 7 */
    expect_error(ctx, fc_avg_pool2d(ctx, x, &k6), FC_ERR_INVALID_SHAPE, "avg_pool2d: input");
    fc_pool2d_opts dil = {.kernel = {2, 2}, .dilation = {4, 4}};
    expect_error(ctx, fc_max_pool2d(ctx, x, &dil), FC_ERR_INVALID_SHAPE, "too small");
    /* padding above half the kernel */
    fc_pool2d_opts pad = {.kernel = {3, 3}, .padding = {2, 1}};
    expect_error(ctx, fc_max_pool2d(ctx, x, &pad), FC_ERR_INVALID_ARG,
                 "padding [2,1] must be at most half the kernel [3,3]");
    fc_pool2d_opts bad[] = {
        {.kernel = {0, 2}},
        {.kernel = {2, -1}},
        {.kernel = {2, 2}, .stride = {-1, 1}},
        {.kernel = {2, 2}, .padding = {-1, 0}},
        {.kernel = {2, 2}, .dilation = {-2, 1}},
        {.kernel = {(int64_t)1 << 40, 2}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_error(ctx, fc_max_pool2d(ctx, x, &bad[i]), FC_ERR_INVALID_ARG, "max_pool2d: kernel");
    fc_pool2d_opts adil = {.kernel = {2, 2}, .dilation = {2, 1}};
    expect_error(ctx, fc_avg_pool2d(ctx, x, &adil), FC_ERR_INVALID_ARG, "no dilation");
    fc_pool2d_opts adiv = {.kernel = {2, 2}, .divisor_override = -3};
    expect_error(ctx, fc_avg_pool2d(ctx, x, &adiv), FC_ERR_INVALID_ARG, "divisor_override -3");
    expect_error(ctx, fc_adaptive_avg_pool2d(ctx, x, (const int64_t[]){0, 2}), FC_ERR_INVALID_ARG,
                 "output size [0,2]");
    expect_error(ctx, fc_adaptive_avg_pool2d(ctx, x, (const int64_t[]){2, -1}), FC_ERR_INVALID_ARG,
                 "adaptive_avg_pool2d");
    /* NULL arguments */
    expect_error(ctx, fc_max_pool2d(ctx, x, NULL), FC_ERR_NULL_ARG, "max_pool2d");
    expect_error(ctx, fc_avg_pool2d(ctx, NULL, &k2), FC_ERR_NULL_ARG, "avg_pool2d");
    expect_error(ctx, fc_adaptive_avg_pool2d(ctx, x, NULL), FC_ERR_NULL_ARG, "adaptive_avg_pool2d");
    assert_null(fc_max_pool2d(NULL, x, &k2));
    /* a NULL input keeps the first error */
    fc_ctx_fail(ctx, FC_ERR_STATE, "earlier");
    assert_null(fc_max_pool2d(ctx, NULL, &k2));
    assert_null(fc_adaptive_avg_pool2d(ctx, NULL, (const int64_t[]){1, 1}));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_STATE);
    fc_ctx_clear_error(ctx);
    fc_scope_end(ctx);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_max_random_vs_reference),
        cmocka_unit_test(test_pool_avg_random_vs_reference),
        cmocka_unit_test(test_pool_adaptive_random_vs_reference),
        cmocka_unit_test(test_pool_known_values),
        cmocka_unit_test(test_pool_max_ties_and_nan),
        cmocka_unit_test(test_pool_max_2x2_f32_ties_nan),
        cmocka_unit_test(test_pool_thread_independent),
        cmocka_unit_test(test_pool_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
