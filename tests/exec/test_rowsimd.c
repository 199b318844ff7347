/* SPDX-License-Identifier: MIT */
/* test_rowsimd.c - the f32 row primitives of src/exec/kernels/rowsimd.c
 * and rowsimd512.c: the dispatched version under every instruction set the
 * CPU has (portable, AVX2, AVX-512, chosen with fc__isa_set_cap) against the
 * portable twin and against a double-precision reference, over lengths that hit
 * every vector, block and tail boundary, with NaN, infinities and -inf
 * masks; then the exp accuracy bound over a sweep; then an out-of-memory
 * sweep through a training-like chain of the family's ops (every
 * allocation failure gives a clean FC_ERR_OOM and leaks nothing). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/convert.h"
#include "counting_alloc.h"
#include "exec/kernels/rowwise.h"
#include "fc_test_data.h"
#include "fucina/autograd.h"
#include "fucina/ops.h"

static void fill(float *v, int64_t n, uint64_t seed, float lo, float hi) {
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(fc_test_splitmix64(&seed) >> 11) / 9007199254740992.0;
        v[i] = (float)(lo + (hi - lo) * u);
    }
}

static void close_to(double got, double want, double tol, const char *what, int64_t n) {
    if (isnan(want) && isnan(got)) return;
    if (!(fabs(got - want) <= tol * (1 + fabs(want))))
        fail_msg("%s (n %lld): got %.10g want %.10g", what, (long long)n, got, want);
}

static const int64_t lengths[] = {0,  1,   7,   8,   9,   15,   16,   31,   32,  33,
                                  63, 100, 511, 512, 513, 1000, 1024, 1100, 4099};

static void matches_portable_and_reference(void) {
    float *a = malloc(sizeof *a * 4099), *b = malloc(sizeof *b * 4099);
    float *y1 = malloc(sizeof *y1 * 4099), *y2 = malloc(sizeof *y2 * 4099);
    for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
        int64_t n = lengths[k];
        fill(a, n, 10 + k, -5, 5);
        fill(b, n, 20 + k, -1, 1);
        double s = 0, d = 0, q = 0, e = 0, sa = 0, sb = 0, mx = -INFINITY, mn = INFINITY;
        float c = 0.25f, m = 1.5f, mu = 0.1f, rs = 1.3f;
        for (int64_t i = 0; i < n; i++) {
            s += a[i];
            d += (double)a[i] * b[i];
            q += ((double)a[i] - c) * ((double)a[i] - c);
            e += exp((double)a[i] - m);
            sa += (double)b[i] * a[i];
            sb += (double)b[i] * a[i] * (((double)a[i] - mu) * rs);
            mx = fmax(mx, a[i]);
            mn = fmin(mn, a[i]);
        }
        bool n1, n2;
        close_to(fc__rw_sum(a, n), s, 1e-6, "sum", n);
        close_to(fc__rw_sum_portable(a, n), s, 1e-6, "sum portable", n);
        close_to(fc__rw_dot(a, b, n), d, 1e-6, "dot", n);
        close_to(fc__rw_dot_portable(a, b, n), d, 1e-6, "dot portable", n);
        close_to(fc__rw_sumsq_dev(a, n, c), q, 1e-6, "sumsq_dev", n);
        close_to(fc__rw_sumsq_dev_portable(a, n, c), q, 1e-6, "sumsq_dev portable", n);
        assert_true(fc__rw_max(a, n, &n1) == (float)mx && !n1);
        assert_true(fc__rw_max_portable(a, n, &n2) == (float)mx && !n2);
        assert_true(fc__rw_min(a, n, &n1) == (float)mn && !n1);
        assert_true(fc__rw_min_portable(a, n, &n2) == (float)mn && !n2);
        double d1, d2, d3, d4;
        fc__rw_norm_sums(a, b, a, n, mu, rs, &d1, &d2);
        fc__rw_norm_sums_portable(a, b, a, n, mu, rs, &d3, &d4);
        close_to(d1, sa, 1e-6, "norm_sums a", n);
        close_to(d2, sb, 1e-6, "norm_sums b", n);
        close_to(d3, sa, 1e-6, "norm_sums portable a", n);
        close_to(d4, sb, 1e-6, "norm_sums portable b", n);
        double p1, p2, p3, p4, s1 = 0;
        for (int64_t i = 0; i < n; i++)
            s1 += (double)a[i] - c;
        fc__rw_sum_sumsq(a, n, c, &p1, &p2);
        fc__rw_sum_sumsq_portable(a, n, c, &p3, &p4);
        close_to(p1, s1, 1e-6 * (1 + n), "sum_sumsq s1", n);
        close_to(p2, q, 1e-6, "sum_sumsq s2", n);
        close_to(p3, s1, 1e-6 * (1 + n), "sum_sumsq portable s1", n);
        close_to(p4, q, 1e-6, "sum_sumsq portable s2", n);
        close_to(fc__rw_exp(a, y1, n, m), e, 1e-6, "exp sum", n);
        close_to(fc__rw_exp_portable(a, y2, n, m), e, 1e-6, "exp sum portable", n);
        close_to(fc__rw_exp(a, NULL, n, m), e, 1e-6, "exp sum, no store", n);
        for (int64_t i = 0; i < n; i++) {
            double want = exp((double)a[i] - m);
            close_to(y1[i], want, 3e-7, "exp", n);
            close_to(y2[i], want, 3e-7, "exp portable", n);
        }
        if (n > 2) { /* a NaN anywhere is reported; max/min skip it */
            float keep = a[n / 2];
            a[n / 2] = NAN;
            float want = fc__rw_max_portable(a, n, &n2);
            assert_true(n2);
            assert_true(fc__rw_max(a, n, &n1) == want && n1);
            assert_true(!isnan(want));
            assert_true(fc__rw_min(a, n, &n1) == fc__rw_min_portable(a, n, &n2) && n1 && n2);
            assert_true(isnan(fc__rw_exp(a, y1, n, m)) && isnan(y1[n / 2]));
            a[n / 2] = keep;
        }
    }
    free(a);
    free(b);
    free(y1);
    free(y2);
}

/* fc__rw_sum_half against fc__rw_sum over the widened row, piece by piece
 * of 512 (how the reductions call both): the same bits, for bf16 and f16,
 * with an infinity and a NaN in the longest rows. The random halves are
 * raw bit patterns below 2 in magnitude, subnormals included. */
static void half_sums_match(void) {
    enum { N = 4099, PIECE = 512 };
    uint16_t *h = malloc(sizeof *h * N);
    float *f = malloc(sizeof *f * N);
    assert_true(h && f);
    for (int bf = 0; bf < 2; bf++) {
        fc_dtype dt = bf ? FC_BF16 : FC_F16;
        for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
            int64_t n = lengths[k];
            uint64_t seed = 40 + k;
            for (int64_t i = 0; i < n; i++) /* finite: exponent below the top */
                h[i] = (uint16_t)(fc_test_splitmix64(&seed) & (bf ? 0xBF7F : 0xBBFF));
            if (n == N) h[7] = bf ? 0x7F80 : 0x7C00;     /* +inf */
            if (n == N) h[N - 1] = bf ? 0x7FC1 : 0x7E01; /* NaN */
            fc__load_f32_row(dt, h, f, (size_t)n);
            double want = 0, got = 0;
            for (int64_t i = 0; i < n; i += PIECE) {
                int64_t m = n - i < PIECE ? n - i : PIECE;
                want += fc__rw_sum(f + i, m);
                got += fc__rw_sum_half(h + i, m, bf == 1);
            }
            if (isnan(want)) {
                assert_true(isnan(got));
            } else if (memcmp(&got, &want, sizeof got) != 0) {
                fail_msg("%s sum (n %lld): got %.17g want %.17g", bf ? "bf16" : "f16", (long long)n,
                         got, want);
            }
        }
    }
    free(h);
    free(f);
}

/* exp over [-100, 100]: the bound of rowwise.h, exact zeros below -88, NaN. */
static void exp_range(void) {
    enum { N = 20001 };
    float *x = malloc(sizeof *x * N), *y = malloc(sizeof *y * N), *z = malloc(sizeof *z * N);
    for (int i = 0; i < N; i++)
        x[i] = -100.0f + 0.01f * (float)i;
    fc__rw_exp(x, y, N, 0.0f);
    fc__rw_exp_portable(x, z, N, 0.0f);
    for (int i = 0; i < N; i++) {
        double want = exp((double)x[i]);
        if (x[i] < -88.0f) {
            assert_true(y[i] == 0 && z[i] == 0);
        } else if (x[i] > 88.0f) {
            assert_true(isfinite(y[i]) && isfinite(z[i]));
        } else if (x[i] >= -87.0f) {
            close_to(y[i], want, 3e-7, "exp range", i);
            close_to(z[i], want, 3e-7, "exp range portable", i);
        }
    }
    float special[3] = {NAN, -INFINITY, 0}, out[3];
    fc__rw_exp(special, out, 3, 0.0f);
    assert_true(isnan(out[0]) && out[1] == 0 && out[2] == 1);
    fc__rw_exp_portable(special, out, 3, 0.0f);
    assert_true(isnan(out[0]) && out[1] == 0 && out[2] == 1);
    free(x);
    free(y);
    free(z);
}

/* Runs body under each instruction set this CPU has, narrowest first. */
static void for_each_isa(void (*body)(void)) {
    fc__isa have = fc__isa_level(), keep = fc__isa_set_cap(FC__ISA_PORTABLE);
    int ran = 0;
    for (int isa = FC__ISA_PORTABLE; isa <= (int)have; isa++, ran++) {
        fc__isa_set_cap((fc__isa)isa);
        assert_int_equal(fc__isa_level(), isa);
        body();
    }
    fc__isa_set_cap(keep);
    assert_int_equal(ran, (int)have + 1);
}

static void test_rowsimd_matches_portable_and_reference(void **state) {
    (void)state;
    for_each_isa(matches_portable_and_reference);
}

static void test_rowsimd_half_sums_match(void **state) {
    (void)state;
    for_each_isa(half_sums_match);
}

static void test_rowsimd_exp_range(void **state) {
    (void)state;
    for_each_isa(exp_range);
}

/* ---- streamed outputs ------------------------------------------------------------------------ */

/* Forward and backward of softmax and layer_norm over [R, 1024] f32 rows:
 * the large tensor's outputs are streamed around the cache (rowwise.h) on
 * AVX2 and AVX-512 CPUs, the 16-row copy's are not; every row must have the
 * same bits either way, at each level the CPU has. */
static void big_and_small(bool layer_norm, fc_tensor **out_big, fc_tensor **out_small,
                          fc_tensor **gx_big, fc_tensor **gx_small, fc_ctx *ctx) {
    /* over 8 MiB of f32 (the streaming threshold); 33 rows per layer_norm
     * backward group, so the streamed kernel's row pairs leave one over */
    const int64_t R = 2112, C = 1024;
    fc_tensor *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){R, C}, 2, 1.0);
    fc_tensor *g = fc_randn(ctx, FC_F32, (const int64_t[]){R, C}, 2);
    fc_tensor *w = fc_param_randn(ctx, FC_F32, (const int64_t[]){C}, 1, 1.0);
    fc_tensor *b = fc_param_randn(ctx, FC_F32, (const int64_t[]){C}, 1, 1.0);
    fc_tensor *xs = fc_param_zeros(ctx, FC_F32, (const int64_t[]){16, C}, 2);
    assert_true(x && g && w && b && xs);
    fc_no_grad_begin(ctx);
    assert_int_equal(fc_copy_(xs, fc_narrow(ctx, x, 0, 0, 16)), FC_OK);
    fc_no_grad_end(ctx);
    fc_tensor *gs = fc_contiguous(ctx, fc_narrow(ctx, g, 0, 0, 16));
    fc_tensor *yb = layer_norm ? fc_layer_norm(ctx, x, w, b, 1e-5) : fc_softmax(ctx, x, 1);
    fc_tensor *ys = layer_norm ? fc_layer_norm(ctx, xs, w, b, 1e-5) : fc_softmax(ctx, xs, 1);
    assert_int_equal(fc_backward_with(ctx, yb, g, false), FC_OK);
    assert_int_equal(fc_backward_with(ctx, ys, gs, false), FC_OK);
    *out_big = yb, *out_small = ys, *gx_big = fc_grad(x), *gx_small = fc_grad(xs);
}

static void streamed_outputs_same_bits(void) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 3});
    assert_non_null(ctx);
    for (int ln = 0; ln < 2; ln++) {
        fc_scope_begin(ctx);
        fc_tensor *yb, *ys, *gb, *gs;
        big_and_small(ln == 1, &yb, &ys, &gb, &gs, ctx);
        assert_true(yb && ys && gb && gs);
        size_t bytes = 16 * 1024 * sizeof(float);
        assert_memory_equal(fc_tensor_data(yb), fc_tensor_data(ys), bytes);
        assert_memory_equal(fc_tensor_data(gb), fc_tensor_data(gs), bytes);
        /* the last rows too (another thread's part of the big tensor) */
        const float *last = (const float *)fc_tensor_data(yb) + (2112 - 1) * 1024;
        double s = 0;
        for (int j = 0; j < 1024; j++)
            s += last[j];
        if (ln == 0) assert_true(fabs(s - 1.0) < 1e-5); /* a softmax row sums to 1 */
        fc_scope_end(ctx);
    }
    fc_ctx_free(ctx);
}

static void test_rowsimd_streamed_outputs_same_bits(void **state) {
    (void)state;
    for_each_isa(streamed_outputs_same_bits);
}

/* dw and db of a streamed layer_norm backward (AVX2: rows staged in L1;
 * AVX-512: rows in pairs) against the same backward at the portable level
 * (the plain row loop, nothing streamed): g * xhat and g do not depend on
 * the row sums, so the partial sums and their totals must have the same
 * bits. One forward serves every backward, so all see the same mean and
 * rstd. */
static void test_rowsimd_streamed_norm_param_grads_same_bits(void **state) {
    (void)state;
    if (!fc__isa_enabled(FC__ISA_AVX2)) {
        print_message("skipped: the streamed kernels need AVX2 (level here: %s)\n",
                      fc__isa_name(fc__isa_level()));
        skip();
    }
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 5});
    assert_non_null(ctx);
    const int64_t R = 2112, C = 1024;
    fc_tensor *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){R, C}, 2, 1.0);
    fc_tensor *g = fc_randn(ctx, FC_F32, (const int64_t[]){R, C}, 2);
    fc_tensor *w = fc_param_randn(ctx, FC_F32, (const int64_t[]){C}, 1, 1.0);
    fc_tensor *b = fc_param_randn(ctx, FC_F32, (const int64_t[]){C}, 1, 1.0);
    fc_tensor *y = fc_layer_norm(ctx, x, w, b, 1e-5);
    assert_true(x && g && w && b && y);
    fc_tensor *params[3] = {x, w, b};
    float *keep[2];
    const int passes = fc__isa_enabled(FC__ISA_AVX512) ? 3 : 2;
    for (int pass = 0; pass < passes; pass++) {
        fc__isa was = fc__isa_set_cap((fc__isa)(FC__ISA_PORTABLE + pass));
        fc_zero_grad(params, 3);
        assert_int_equal(fc_backward_with(ctx, y, g, true), FC_OK);
        fc__isa_set_cap(was);
        for (int k = 0; k < 2; k++) {
            const float *got = fc_tensor_data(fc_grad(params[1 + k]));
            assert_non_null(got);
            if (pass == 0) {
                keep[k] = malloc(C * sizeof(float));
                assert_non_null(keep[k]);
                memcpy(keep[k], got, C * sizeof(float));
            } else {
                assert_memory_equal(got, keep[k], C * sizeof(float));
            }
        }
    }
    free(keep[0]);
    free(keep[1]);
    fc_ctx_free(ctx);
}

/* ---- out of memory ------------------------------------------------------------------------ */

/* One step of a small model: every op of the family, forward and backward. */
static fc_status step(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *b, fc_tensor *t) {
    fc_scope_begin(ctx);
    fc_tensor *h = fc_layer_norm(ctx, x, w, b, 1e-5);
    fc_tensor *r = fc_rms_norm(ctx, h, w, 1e-5);
    fc_tensor *p = fc_log_softmax(ctx, fc_softmax(ctx, r, 0), 1);
    fc_tensor *c = fc_cumsum(ctx, p, 1);
    fc_tensor *l1 = fc_cross_entropy(ctx, c, t, NULL);
    fc_tensor *l2 = fc_mse_loss(ctx, h, r, FC_REDUCE_MEAN);
    fc_tensor *l3 = fc_logsumexp(
        ctx, fc_std(ctx, fc_prod(ctx, h, (const int[]){0}, 1, false), NULL, 0, 1, false), NULL, 0,
        false);
    fc_tensor *l4 =
        fc_max(ctx, fc_mean(ctx, fc_var(ctx, r, (const int[]){1}, 1, 0, true), NULL, 0, false),
               NULL, 0, false);
    fc_tensor *terms[5] = {fc_sum(ctx, fc_sum(ctx, l1, NULL, 0, false), NULL, 0, false), l2, l3, l4,
                           fc_min(ctx, fc_sum(ctx, h, NULL, 0, true), NULL, 0, false)};
    fc_status st = FC_OK;
    for (int k = 0; k < 5 && st == FC_OK; k++) { /* the terms share the graph: retain it */
        fc_tensor *one = terms[k] ? fc_ones(ctx, FC_F32, fc_tensor_shape(terms[k]), 1) : NULL;
        st = one ? fc_backward_with(ctx, terms[k], one, true) : fc_ctx_status(ctx);
    }
    fc_scope_end(ctx);
    return st;
}

static void test_rowsimd_oom_sweep(void **state) {
    (void)state;
    bool succeeded = false;
    long fail = 0;
    for (; fail < 4000 && !succeeded; fail++) {
        fct_counting ca;
        fct_counting_init(&ca);
        fc_ctx_opts o = {
            .threads = 2, .disable_pool = true, .allocator = fct_counting_allocator(&ca)};
        fc_ctx *ctx = fc_ctx_new(&o);
        assert_non_null(ctx);
        fc_tensor *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){4, 8}, 2, 1.0);
        fc_tensor *w = fc_param_randn(ctx, FC_F32, (const int64_t[]){8}, 1, 1.0);
        fc_tensor *b = fc_param_zeros(ctx, FC_F32, (const int64_t[]){8}, 1);
        fc_tensor *t = fc_zeros(ctx, FC_I32, (const int64_t[]){4}, 1);
        assert_true(x && w && b && t);
        fct_counting_fail_after(&ca, fail);
        fc_status st = step(ctx, x, w, b, t);
        fct_counting_fail_after(&ca, -1);
        if (st == FC_OK) {
            succeeded = true;
            assert_non_null(fc_grad(x));
        } else {
            assert_int_equal(st, FC_ERR_OOM);
            assert_int_equal(fc_ctx_status(ctx), FC_ERR_OOM);
        }
        /* the context stays usable after the failure */
        fc_ctx_clear_error(ctx);
        fc_zero_grad((fc_tensor *[]){x, w, b}, 3);
        assert_int_equal(step(ctx, x, w, b, t), FC_OK);
        fc_release(x);
        fc_release(w);
        fc_release(b);
        fc_release(t);
        fc_ctx_stats s;
        fc_ctx_get_stats(ctx, &s);
        assert_int_equal(s.tensors_live, 0);
        fc_ctx_free(ctx);
        if (!fct_counting_clean(&ca)) {
            fct_counting_report(&ca, "oom sweep");
            fail_msg("leak or bad free after failing allocation %ld", fail);
        }
    }
    assert_true(succeeded);
    assert_true(fail > 100); /* the chain allocates: many failure points were visited */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rowsimd_matches_portable_and_reference),
        cmocka_unit_test(test_rowsimd_exp_range),
        cmocka_unit_test(test_rowsimd_half_sums_match),
        cmocka_unit_test(test_rowsimd_streamed_outputs_same_bits),
        cmocka_unit_test(test_rowsimd_streamed_norm_param_grads_same_bits),
        cmocka_unit_test(test_rowsimd_oom_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
