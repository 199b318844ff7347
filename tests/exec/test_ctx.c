/* SPDX-License-Identifier: MIT */
/* test_ctx.c - the exec core (the files of src/exec/): the sticky first error and
 * NULL propagation, scopes and fc_keep, the buffer pool (a repeated step
 * calls the allocator zero times once warm), stats, the counter-based RNG
 * (same seed, same bits, whatever the thread count), data access and
 * generations, creation errors, arange/full, fc_to between every pair of
 * scalar dtypes against fc_cast_scalar, clone/contiguous of views,
 * item/get, and a user allocator that sees every allocation. */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include <math.h>
#include <stdlib.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "counting_alloc.h"
#include "fct_tensor.h"
#include "fucina.h"

static int setup(void **state) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 1});
    *state = ctx;
    return ctx ? 0 : -1;
}

static int teardown(void **state) {
    fc_ctx *ctx = *state;
    int64_t live = fct_live(ctx);
    fc_ctx_free(ctx);
    if (live != 0) {
        fprintf(stderr, "leak check: %lld tensors still live\n", (long long)live);
        return -1;
    }
    return 0;
}

static fc_ctx_stats stats(const fc_ctx *ctx) {
    fc_ctx_stats s;
    fc_ctx_get_stats(ctx, &s);
    return s;
}

static void expect_error(fc_ctx *ctx, const void *r, fc_status st, const char *text) {
    assert_null(r);
    assert_int_equal(fc_ctx_status(ctx), st);
    if (!strstr(fc_ctx_error(ctx), text)) {
        fprintf(stderr, "error \"%s\" lacks \"%s\"\n", fc_ctx_error(ctx), text);
        fail();
    }
    fc_ctx_clear_error(ctx);
}

/* ---- errors ------------------------------------------------------------------------------ */

static void test_ctx_sticky_error(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
    assert_string_equal(fc_ctx_error(ctx), "");
    const int64_t s = 3;
    fc_tensor *x = fc_ones(ctx, FC_F32, &s, 1), *h = fc_ones(ctx, FC_F16, &s, 1);
    /* the root cause (mul's dtype clash) survives every later op of the chain */
    fc_tensor *z = fc_relu(ctx, fc_add(ctx, fc_mul(ctx, x, h), fc_exp(ctx, x)));
    assert_null(z);
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_DTYPE);
    assert_string_equal(fc_ctx_error(ctx), "mul: dtypes f32 and f16 differ; cast one with fc_to");
    /* later failures and fc_ctx_fail do not replace it */
    assert_null(fc_sqrt(ctx, fc_ones(ctx, FC_I32, &s, 1)));
    assert_int_equal(fc_ctx_fail(ctx, FC_ERR_IO, "custom %d", 7), FC_ERR_IO);
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_DTYPE);
    assert_non_null(strstr(fc_ctx_error(ctx), "mul: dtypes"));
    /* but the context keeps working: valid ops still succeed */
    assert_non_null(fc_add(ctx, x, x));
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
    assert_string_equal(fc_ctx_error(ctx), "");
    assert_int_equal(fc_ctx_fail(ctx, FC_ERR_IO, "custom %d", 7), FC_ERR_IO);
    assert_string_equal(fc_ctx_error(ctx), "custom 7");
    fc_ctx_clear_error(ctx);
    /* a NULL context: NULL out, nothing recorded anywhere */
    assert_null(fc_add(NULL, x, x));
    assert_int_equal(fc_ctx_status(NULL), FC_ERR_NULL_ARG);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
    fc_scope_end(ctx);
}

/* ---- scopes ------------------------------------------------------------------------------- */

static void test_ctx_scopes(void **state) {
    fc_ctx *ctx = *state;
    const int64_t s = 16;
    int64_t base = fct_live(ctx);
    fc_tensor *kept;
    fc_scope_begin(ctx);
    fc_tensor *a = fc_ones(ctx, FC_F32, &s, 1);
    fc_scope_begin(ctx);
    fc_tensor *b = fc_add(ctx, a, a);
    kept = fc_keep(fc_mul(ctx, b, a));
    (void)fc_exp(ctx, b);
    assert_int_equal(fct_live(ctx), base + 4);
    fc_scope_end(ctx); /* b and exp(b) go; kept stays */
    assert_int_equal(fct_live(ctx), base + 2);
    fc_tensor *c = fc_retain(fc_neg(ctx, a)); /* a second reference outlives the scope */
    fc_scope_end(ctx);
    assert_int_equal(fct_live(ctx), base + 2);
    double v;
    fc_tensor_element(kept, (const int64_t[]){3}, &v);
    assert_true(v == 2);
    fc_tensor_element(c, (const int64_t[]){0}, &v);
    assert_true(v == -1);
    fc_release(kept);
    fc_release(c);
    assert_int_equal(fct_live(ctx), base);
    fc_scope_end(ctx); /* unbalanced: ignored */
    assert_null(fc_keep(NULL));
    /* 100 iterations of a step leak nothing */
    fc_tensor *w = fc_randn(ctx, FC_F32, (const int64_t[]){8, 8}, 2);
    for (int it = 0; it < 100; it++) {
        fc_scope_begin(ctx);
        fc_tensor *h = fc_tanh(ctx, fc_add_scalar(ctx, fc_mul(ctx, w, w), 1));
        fc_release(fc_retain(h)); /* extra references balance out */
        (void)fc_maximum(ctx, h, fc_sigmoid(ctx, w));
        fc_scope_end(ctx);
        assert_int_equal(fct_live(ctx), base + 1);
    }
    fc_release(w);
    assert_int_equal(fct_live(ctx), base);
    /* nesting deeper than the fixed stack: reported once, still balanced */
    fc_scope_begin(ctx);
    fc_tensor *outer = fc_ones(ctx, FC_F32, &s, 1);
    for (int i = 0; i < 300; i++)
        fc_scope_begin(ctx);
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_STATE);
    assert_non_null(strstr(fc_ctx_error(ctx), "fc_scope_begin: more than"));
    fc_ctx_clear_error(ctx);
    (void)fc_neg(ctx, outer);
    for (int i = 0; i < 300; i++)
        fc_scope_end(ctx);
    assert_int_equal(fct_live(ctx), base + 1);
    fc_scope_end(ctx);
    assert_int_equal(fct_live(ctx), base);
}

/* ---- pool and stats ----------------------------------------------------------------------------
 */

/* z = x * y + x with x requiring grad, then backward: after the first
 * iteration the allocator is never called again. */
static void test_ctx_pool_steady_state(void **state) {
    fc_ctx *ctx = *state;
    const int64_t shape[2] = {64, 33};
    fc_tensor *x = fc_param_randn(ctx, FC_F32, shape, 2, 1.0);
    fc_tensor *y = fc_randn(ctx, FC_F32, shape, 2);
    fc_tensor *ones = fc_ones(ctx, FC_F32, shape, 2);
    uint64_t after_first = 0;
    fc_ctx_stats s0 = stats(ctx);
    for (int it = 0; it < 100; it++) {
        fc_scope_begin(ctx);
        fc_tensor *z = fc_add(ctx, fc_mul(ctx, x, y), x);
        assert_non_null(z);
        assert_int_equal(fc_backward_with(ctx, z, ones, false), FC_OK);
        fc_zero_grad(&x, 1);
        fc_scope_end(ctx);
        if (it == 0)
            after_first = stats(ctx).alloc_calls;
        else
            assert_true(stats(ctx).alloc_calls == after_first);
    }
    fc_ctx_stats s1 = stats(ctx);
    assert_true(s1.alloc_calls > s0.alloc_calls); /* the first step did allocate */
    assert_true(s1.pool_hits >= s0.pool_hits + 99 * 3);
    assert_true(s1.pool_bytes > 0);
    assert_true(s1.bytes_peak >= s1.bytes_live && s1.bytes_live > 0);
    assert_int_equal(s1.tensors_live, 3);
    /* trimming hands every parked buffer back */
    fc_ctx_pool_trim(ctx);
    fc_ctx_stats s2 = stats(ctx);
    assert_int_equal(s2.pool_bytes, 0);
    assert_true(s2.free_calls > s1.free_calls);
    assert_true(s2.bytes_live < s1.bytes_live);
    /* the next request misses the pool and allocates */
    fc_release(fc_add(ctx, x, y));
    fc_ctx_stats s3 = stats(ctx);
    assert_true(s3.pool_misses == s2.pool_misses + 1 && s3.alloc_calls > s2.alloc_calls);
    assert_true(s3.pool_bytes > 0); /* released into the pool */
    fc_release(fc_add(ctx, x, y));
    assert_true(stats(ctx).pool_hits == s3.pool_hits + 1);
    fc_release(x);
    fc_release(y);
    fc_release(ones);
    /* a context without a pool frees every buffer at once */
    fc_ctx *np = fc_ctx_new(&(fc_ctx_opts){.disable_pool = true});
    fc_release(fc_zeros(np, FC_F64, shape, 2));
    fc_ctx_stats sn = stats(np);
    assert_int_equal(sn.pool_bytes, 0);
    assert_true(sn.free_calls >= 2);          /* the buffer's header and data */
    assert_true(sn.bytes_live < 64 * 33 * 8); /* only the recycled handle remains */
    assert_true(sn.bytes_peak > 64 * 33 * 8);
    fc_ctx_free(np);
}

/* ---- RNG --------------------------------------------------------------------------------------
 */

static void test_ctx_rng(void **state) {
    (void)state;
    enum { N = 100000 };
    static float r1[N], r2[N];
    static double n1[N];
    const int64_t n = N;
    /* one thread and two threads, same seed: the same bits */
    fc_ctx *c1 = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 42});
    fc_ctx *c2 = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 42});
    fc_tensor *a = fc_rand(c1, FC_F32, &n, 1), *b = fc_rand(c2, FC_F32, &n, 1);
    memcpy(r1, fc_tensor_data(a), sizeof r1);
    assert_memory_equal(r1, fc_tensor_data(b), sizeof r1);
    fc_tensor *g1 = fc_randn(c1, FC_F64, &n, 1), *g2 = fc_randn(c2, FC_F64, &n, 1);
    memcpy(n1, fc_tensor_data(g1), sizeof n1);
    assert_memory_equal(n1, fc_tensor_data(g2), sizeof n1);
    /* the stream advanced: the next draw differs; reseeding replays it */
    fc_tensor *a2 = fc_rand(c1, FC_F32, &n, 1);
    assert_true(memcmp(r1, fc_tensor_data(a2), sizeof r1) != 0);
    uint64_t seed, off;
    fc_ctx_get_rng(c1, &seed, &off);
    assert_true(seed == 42 && off == 3 * (uint64_t)N);
    fc_ctx_set_seed(c1, 42);
    fc_tensor *a3 = fc_rand(c1, FC_F32, &n, 1);
    assert_memory_equal(r1, fc_tensor_data(a3), sizeof r1);
    fc_ctx_set_rng(c2, 42, (uint64_t)N); /* skip the first draw: same as c1's randn */
    fc_tensor *g3 = fc_randn(c2, FC_F64, &n, 1);
    assert_memory_equal(n1, fc_tensor_data(g3), sizeof n1);
    /* a different seed gives different values */
    fc_ctx_set_seed(c2, 43);
    fc_tensor *b2 = fc_rand(c2, FC_F32, &n, 1);
    memcpy(r2, fc_tensor_data(b2), sizeof r2);
    assert_true(memcmp(r1, r2, sizeof r1) != 0);
    /* moments: uniform [0, 1) mean 1/2 var 1/12; normal mean 0 var 1 */
    double m = 0, v = 0, lo = 1, hi = 0;
    for (int i = 0; i < N; i++)
        m += r1[i], lo = fmin(lo, r1[i]), hi = fmax(hi, r1[i]);
    m /= N;
    for (int i = 0; i < N; i++)
        v += (r1[i] - m) * (r1[i] - m);
    v /= N - 1;
    assert_true(lo >= 0 && hi < 1);
    assert_true(fabs(m - 0.5) < 0.01 && fabs(v - 1.0 / 12) < 0.003);
    m = v = 0;
    for (int i = 0; i < N; i++)
        m += n1[i];
    m /= N;
    for (int i = 0; i < N; i++)
        v += (n1[i] - m) * (n1[i] - m);
    v /= N - 1;
    assert_true(fabs(m) < 0.015 && fabs(v - 1) < 0.02);
    /* 16-bit uniforms stay below 1 although many draws round up to it */
    const fc_dtype halves[2] = {FC_F16, FC_BF16};
    for (int d = 0; d < 2; d++) {
        fc_tensor *u = fc_rand(c1, halves[d], &n, 1);
        const uint16_t *bits = fc_tensor_data(u);
        for (int i = 0; i < N; i++) {
            float f = d ? fc_bf16_to_f32(bits[i]) : fc_f16_to_f32(bits[i]);
            if (!(f >= 0 && f < 1)) {
                fprintf(stderr, "fc_rand %s [%d] = %g\n", fc_dtype_name(halves[d]), i, f);
                fail();
            }
        }
        fc_release(u);
    }
    /* integers are refused */
    assert_null(fc_rand(c1, FC_I32, &n, 1));
    assert_int_equal(fc_ctx_status(c1), FC_ERR_DTYPE);
    assert_non_null(strstr(fc_ctx_error(c1), "fc_rand: dtype i32 is not a float dtype"));
    fc_ctx_free(c1);
    fc_ctx_free(c2);
}

/* ---- data access ---------------------------------------------------------------------------- */

static void test_ctx_data_access(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    float buf[6] = {1, 2, 3, 4, 5, 6};
    const int64_t s23[2] = {2, 3};
    fc_tensor *ro = fc_tensor_from_borrowed(ctx, FC_F32, s23, 2, buf, true);
    assert_non_null(ro);
    assert_ptr_equal(fc_tensor_data(ro), buf); /* aliased, not copied */
    uint32_t g = fc_tensor_generation(ro);
    expect_error(ctx, fc_tensor_data_mut(ro), FC_ERR_READ_ONLY,
                 "fc_tensor_data_mut: f32[2,3]: storage is read-only");
    assert_int_equal(fc_tensor_generation(ro), g);
    /* writable borrowed memory: writes land in the caller's buffer */
    fc_tensor *rw = fc_tensor_from_borrowed(ctx, FC_F32, s23, 2, buf, false);
    g = fc_tensor_generation(rw);
    float *p = fc_tensor_data_mut(rw);
    assert_ptr_equal(p, buf);
    assert_int_equal(fc_tensor_generation(rw), g + 1);
    p[0] = 9;
    assert_true(buf[0] == 9);
    assert_non_null(fc_tensor_data(rw));
    assert_int_equal(fc_tensor_generation(rw), g + 1); /* reads do not count */
    /* a transposed view has no flat data pointer */
    fc_tensor *t = fct_view(ctx, rw, (const int64_t[]){3, 2}, (const int64_t[]){1, 3}, 2, 0);
    assert_false(fc_tensor_is_contiguous(t));
    expect_error(ctx, fc_tensor_data(t), FC_ERR_UNSUPPORTED_VIEW,
                 "fc_tensor_data: f32[3,2] is not contiguous");
    expect_error(ctx, fc_tensor_data_mut(t), FC_ERR_UNSUPPORTED_VIEW, "fc_tensor_data_mut");
    /* the view shares the generation of its storage */
    assert_int_equal(fc_tensor_generation(t), fc_tensor_generation(rw));
    /* copy_to reads any layout */
    float out[6];
    assert_int_equal(fc_tensor_copy_out(out, sizeof out, t), FC_OK);
    const float want[6] = {9, 4, 2, 5, 3, 6};
    assert_memory_equal(out, want, sizeof out);
    assert_int_equal(fc_tensor_copy_out(out, 5, t), FC_ERR_DATA_LENGTH);
    fc_ctx_clear_error(ctx);
    /* fc_copy_ writes any layout, is a mutation, and refuses read-only storage */
    float dst[6] = {0};
    fc_tensor *d = fc_tensor_from_borrowed(ctx, FC_F32, (const int64_t[]){3, 2}, 2, dst, false);
    g = fc_tensor_generation(d);
    assert_int_equal(fc_copy_(d, t), FC_OK);
    assert_memory_equal(dst, want, sizeof dst);
    assert_true(fc_tensor_generation(d) != g);
    fc_tensor *rot = fct_view(ctx, ro, (const int64_t[]){3, 2}, (const int64_t[]){1, 3}, 2, 0);
    assert_int_equal(fc_copy_(rot, d), FC_ERR_READ_ONLY);
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_READ_ONLY);
    fc_ctx_clear_error(ctx);
    char desc[32];
    assert_string_equal(fc_tensor_describe(t, desc, sizeof desc), "f32[3,2]");
    assert_null(fc_tensor_data(NULL));
    assert_null(fc_tensor_data_mut(NULL));
    expect_error(ctx, fc_tensor_from_borrowed(ctx, FC_F32, s23, 2, NULL, true), FC_ERR_NULL_ARG,
                 "fc_tensor_from_borrowed: data is NULL");
    fc_scope_end(ctx);
}

/* ---- creation ---------------------------------------------------------------------------------
 */

static void test_ctx_creation_errors(void **state) {
    fc_ctx *ctx = *state;
    const int64_t s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, s = 2;
    expect_error(ctx, fc_empty(ctx, FC_F32, &s, 0), FC_ERR_RANK,
                 "fc_empty: rank 0 is outside 1..8");
    expect_error(ctx, fc_zeros(ctx, FC_F32, s9, 9), FC_ERR_RANK, "fc_zeros: rank 9");
    expect_error(ctx, fc_ones(ctx, FC_F32, (const int64_t[]){2, 0}, 2), FC_ERR_INVALID_SHAPE,
                 "fc_ones: invalid shape [2,0]");
    expect_error(ctx, fc_full(ctx, FC_F32, (const int64_t[]){-1}, 1, 0), FC_ERR_INVALID_SHAPE,
                 "fc_full");
    expect_error(ctx, fc_empty(ctx, FC_F32, (const int64_t[]){3, 6148914691236517206}, 2),
                 FC_ERR_OVERFLOW, "fc_empty: shape [3,6148914691236517206]: element or byte");
    expect_error(ctx, fc_empty(ctx, FC_Q4_K, (const int64_t[]){2, 100}, 2), FC_ERR_INVALID_SHAPE,
                 "the last axis of a q4_k tensor must be a nonzero multiple of 256");
    expect_error(ctx, fc_tensor_from_data(ctx, FC_Q4_K, (const int64_t[]){100}, 1, s9),
                 FC_ERR_INVALID_SHAPE, "q4_k");
    expect_error(ctx, fc_empty(ctx, FC_DTYPE_COUNT, &s, 1), FC_ERR_DTYPE, "invalid dtype");
    expect_error(ctx, fc_empty(ctx, FC_F32, NULL, 1), FC_ERR_NULL_ARG, "shape is NULL");
    expect_error(ctx, fc_tensor_from_data(ctx, FC_F32, &s, 1, NULL), FC_ERR_NULL_ARG,
                 "data is NULL");
    expect_error(ctx, fc_zeros(ctx, FC_Q8_0, (const int64_t[]){32}, 1), FC_ERR_DTYPE,
                 "block-quantized");
    assert_null(fc_empty(NULL, FC_F32, &s, 1));
    /* a block tensor of a valid shape exists (as storage) */
    fc_tensor *q = fc_empty(ctx, FC_Q4_K, (const int64_t[]){2, 512}, 2);
    assert_non_null(q);
    assert_int_equal(fc_tensor_nbytes(q), 2 * 2 * 144);
    assert_int_equal(fc_tensor_numel(q), 1024);
    fc_release(q);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
}

static void test_ctx_arange_full(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    double got[16];
    fc_tensor *a = fc_arange(ctx, FC_F32, 0, 5, 1);
    assert_int_equal(fct_read(a, got, 16), 5);
    for (int i = 0; i < 5; i++)
        assert_true(got[i] == i);
    a = fc_arange(ctx, FC_F64, 1, -1, -0.5); /* 1, 0.5, 0, -0.5 */
    assert_int_equal(fct_read(a, got, 16), 4);
    for (int i = 0; i < 4; i++)
        assert_true(got[i] == 1 - 0.5 * i);
    a = fc_arange(ctx, FC_I32, -3, 4, 3); /* -3, 0, 3 */
    assert_int_equal(fct_read(a, got, 16), 3);
    assert_true(got[0] == -3 && got[1] == 0 && got[2] == 3);
    a = fc_arange(ctx, FC_BF16, 0, 1, 0.25);
    assert_int_equal(fct_read(a, got, 16), 4);
    assert_true(got[3] == 0.75);
    expect_error(ctx, fc_arange(ctx, FC_F32, 0, 5, 0), FC_ERR_INVALID_ARG, "nonzero step");
    expect_error(ctx, fc_arange(ctx, FC_F32, 5, 0, 1), FC_ERR_EMPTY_SELECTION, "is empty");
    expect_error(ctx, fc_arange(ctx, FC_F32, 0, NAN, 1), FC_ERR_INVALID_ARG, "finite");
    expect_error(ctx, fc_arange(ctx, FC_BOOL, 0, 2, 1), FC_ERR_DTYPE, "bool");
    /* fc_full casts its value with fc_cast_scalar's rules */
    const fc_dtype dts[] = {FC_F32, FC_F16, FC_I8, FC_U8, FC_BOOL, FC_F8_E4M3};
    const double vals[] = {0.1, -300.7, 1e9, 0.0};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        for (int k = 0; k < 4; k++) {
            fc_tensor *f = fc_full(ctx, dts[d], (const int64_t[]){2, 3}, 2, vals[k]);
            assert_int_equal(fct_read(f, got, 16), 6);
            double want = fct_round(dts[d], vals[k]); /* 1e9 is NaN in e4m3 */
            for (int i = 0; i < 6; i++)
                assert_true(got[i] == want || (isnan(want) && isnan(got[i])));
        }
    }
    fc_tensor *s = fc_scalar(ctx, FC_I64, -7);
    assert_int_equal(fc_tensor_rank(s), 1);
    double v;
    assert_int_equal(fc_tensor_item(s, &v), FC_OK);
    assert_true(v == -7);
    fc_scope_end(ctx);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
}

/* ---- conversion
 * ------------------------------------------------------------------------------------ */

/* fc_to between every pair of the 13 scalar dtypes, from a transposed
 * view, against fc_cast_scalar element by element. */
static void test_ctx_to_all_pairs(void **state) {
    fc_ctx *ctx = *state;
    const double vals[12] = {0, -0.0, 1, -1, 0.5, -2.75, 100.25, -129, 300, 65537, 1e10, NAN};
    for (int from = 0; from <= FC_F8_E5M2; from++) {
        fc_scope_begin(ctx);
        fc_tensor *src = fct_make(ctx, from, (const int64_t[]){3, 4}, 2, vals, FCT_TRANSPOSED);
        unsigned char sb[12][8];
        for (int i = 0; i < 12; i++) {
            int64_t idx[2] = {i / 4, i % 4};
            double v;
            fc_tensor_element(src, idx, &v); /* the element as stored */
            fc_cast_scalar(FC_F64, &v, from, sb[i]);
        }
        for (int to = 0; to <= FC_F8_E5M2; to++) {
            fc_tensor *dst = fc_to(ctx, src, to);
            assert_non_null(dst);
            assert_int_equal(fc_tensor_dtype(dst), to);
            if (to == from) { /* nothing to convert: a new handle over the same storage */
                assert_true(dst != src);
                assert_int_equal(fc_tensor_offset(dst), fc_tensor_offset(src));
                assert_memory_equal(fc_tensor_strides(dst), fc_tensor_strides(src),
                                    sizeof(int64_t) * 2);
                continue; /* the scope releases it */
            }
            assert_true(fc_tensor_is_contiguous(dst));
            const unsigned char *dp = fc_tensor_data(dst);
            size_t es = fc_dtype_size(to);
            for (int i = 0; i < 12; i++) {
                unsigned char want[8] = {0};
                fc_cast_scalar(from, sb[i], to, want);
                if (memcmp(dp + (size_t)i * es, want, es) != 0) {
                    fprintf(stderr, "fc_to %s -> %s element %d differs\n", fc_dtype_name(from),
                            fc_dtype_name(to), i);
                    fail();
                }
            }
        }
        fc_scope_end(ctx);
    }
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
}

static void test_ctx_clone_contiguous_item(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    double vals[12], got[12];
    for (int i = 0; i < 12; i++)
        vals[i] = i * 1.5 - 4;
    for (int l = 0; l < FCT_LAYOUT_COUNT; l++) {
        fc_tensor *v = fct_make(ctx, FC_F64, (const int64_t[]){3, 4}, 2, vals, l);
        fc_tensor *c = fc_clone(ctx, v);
        assert_true(fc_tensor_is_contiguous(c) && fc_tensor_offset(c) == 0);
        assert_int_equal(fct_read(c, got, 12), 12);
        assert_memory_equal(got, vals, sizeof vals);
        /* the clone owns its storage: writing it leaves the view alone */
        ((double *)fc_tensor_data_mut(c))[0] = 77;
        fc_tensor_element(v, (const int64_t[]){0, 0}, &got[0]);
        assert_true(got[0] == vals[0]);
        fc_tensor *k = fc_contiguous(ctx, v);
        if (l == FCT_CONTIG) {
            /* already contiguous: a new handle sharing the storage */
            assert_true(k != v);
            assert_ptr_equal(fc_tensor_data(k), fc_tensor_data(v));
            fc_release(k);
        } else {
            assert_true(k != v && fc_tensor_is_contiguous(k));
            assert_int_equal(fct_read(k, got, 12), 12);
            assert_memory_equal(got, vals, sizeof vals);
        }
        double x;
        assert_int_equal(fc_tensor_element(v, (const int64_t[]){2, 1}, &x), FC_OK);
        assert_true(x == vals[9]);
        assert_int_equal(fc_tensor_element(v, (const int64_t[]){3, 0}, &x), FC_ERR_INDEX);
        assert_non_null(strstr(fc_ctx_error(ctx), "index 3 out of bounds for axis 0 of size 3"));
        fc_ctx_clear_error(ctx);
        assert_int_equal(fc_tensor_item(v, &x), FC_ERR_INVALID_SHAPE);
        assert_non_null(strstr(fc_ctx_error(ctx), "has 12 elements, not 1"));
        fc_ctx_clear_error(ctx);
    }
    /* item of a one-element view at an offset */
    fc_tensor *base = fct_make(ctx, FC_I16, (const int64_t[]){12}, 1, vals, FCT_CONTIG);
    fc_tensor *one = fct_view(ctx, base, (const int64_t[]){1, 1}, (const int64_t[]){1, 1}, 2, 5);
    double x;
    assert_int_equal(fc_tensor_item(one, &x), FC_OK);
    assert_true(x == fct_round(FC_I16, vals[5]));
    fc_tensor *q = fc_empty(ctx, FC_Q8_0, (const int64_t[]){32}, 1);
    assert_int_equal(fc_tensor_element(q, (const int64_t[]){0}, &x), FC_ERR_DTYPE);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_tensor_item(NULL, &x), FC_ERR_NULL_ARG);
    assert_null(fc_clone(ctx, NULL));
    expect_error(ctx, NULL, FC_ERR_NULL_ARG, "fc_clone");
    fc_scope_end(ctx);
}

/* ---- released handles ----------------------------------------------------------------------- */

static void expect_values(fc_tensor *t, const float *want, int n) {
    float got[8];
    assert_non_null(t);
    assert_int_equal(fc_tensor_copy_out(got, sizeof(float) * (size_t)n, t), FC_OK);
    assert_memory_equal(got, want, sizeof(float) * (size_t)n);
}

static void expect_dead_report(fc_ctx *ctx, const char *fn, const fc_tensor *t) {
    char ptr[64];
    snprintf(ptr, sizeof ptr, "%p", (const void *)t);
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_STATE);
    const char *msg = fc_ctx_error(ctx);
    if (!strstr(msg, fn) || !strstr(msg, "already released") || !strstr(msg, ptr)) {
        fprintf(stderr, "error \"%s\" lacks \"%s\", \"already released\" or \"%s\"\n", msg, fn,
                ptr);
        fail();
    }
    fc_ctx_clear_error(ctx);
}

/* A second fc_release of a dead handle used to destroy whatever tensor had
 * taken its recycled header (the very next one created): it is now refused
 * with FC_ERR_STATE and touches nothing, for as long as the quarantine of
 * 64 later releases lasts; fc_retain of a dead handle likewise. */
static void test_ctx_double_release_detected(void **state) {
    fc_ctx *ctx = *state;
    const float va[3] = {1, 2, 3}, vb[3] = {-4, 5, -6};
    int64_t live0 = stats(ctx).tensors_live;
    fc_tensor *a = fc_tensor_from_data(ctx, FC_F32, (const int64_t[]){3}, 1, va);
    assert_non_null(a);
    fc_release(a);
    fc_tensor *b = fc_tensor_from_data(ctx, FC_F32, (const int64_t[]){3}, 1, vb);
    assert_non_null(b);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
    fc_release(a); /* the bug: a second release of a dead handle */
    expect_dead_report(ctx, "fc_release", a);
    expect_values(b, vb, 3); /* b is untouched and still alive */
    assert_int_equal(stats(ctx).tensors_live, live0 + 1);
    assert_null(fc_retain(a));
    expect_dead_report(ctx, "fc_retain", a);
    fc_release(a); /* the refused retain added no reference back */
    expect_dead_report(ctx, "fc_release", a);

    /* still caught after 63 further releases while new tensors are made */
    fc_tensor *c = fc_full(ctx, FC_F32, (const int64_t[]){3}, 1, 7);
    fc_release(c);
    fc_tensor *others[63];
    for (int i = 0; i < 63; i++) {
        others[i] = fc_full(ctx, FC_F32, (const int64_t[]){3}, 1, (double)i);
        assert_non_null(others[i]);
    }
    for (int i = 0; i < 63; i++) fc_release(others[i]);
    fc_tensor *fresh[8];
    for (int i = 0; i < 8; i++) fresh[i] = fc_full(ctx, FC_F32, (const int64_t[]){3}, 1, 9);
    fc_release(c);
    expect_dead_report(ctx, "fc_release", c);
    const float nines[3] = {9, 9, 9};
    for (int i = 0; i < 8; i++) {
        expect_values(fresh[i], nines, 3);
        fc_release(fresh[i]);
    }
    fc_release(b);
    assert_int_equal(stats(ctx).tensors_live, live0);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
}

/* FUCINA_NO_HANDLE_REUSE: every dead header goes back to the allocator at
 * once (so a sanitizer sees any later use), and nothing leaks. */
static void test_ctx_no_handle_reuse(void **state) {
    (void)state;
    fct_counting ca;
    fct_counting_init(&ca);
    setenv("FUCINA_NO_HANDLE_REUSE", "1", 1);
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .allocator = &ca.alloc});
    unsetenv("FUCINA_NO_HANDLE_REUSE");
    assert_non_null(ctx);
    fc_release(fc_zeros(ctx, FC_F32, (const int64_t[]){4}, 1)); /* warms the buffer pool */
    long frees0 = atomic_load(&ca.total_frees);
    for (int i = 0; i < 10; i++) fc_release(fc_zeros(ctx, FC_F32, (const int64_t[]){4}, 1));
    assert_int_equal(atomic_load(&ca.total_frees) - frees0, 10); /* one header each */
    fc_ctx_free(ctx);
    assert_true(fct_counting_clean(&ca));
}

/* ---- a user allocator
 * ------------------------------------------------------------------------------ */

static void test_ctx_user_allocator(void **state) {
    (void)state;
    fct_counting ca;
    fct_counting_init(&ca);
    fc_ctx *ctx =
        fc_ctx_new(&(fc_ctx_opts){.threads = 2, .allocator = fct_counting_allocator(&ca)});
    assert_non_null(ctx);
    fc_tensor *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){16, 16}, 2, 1);
    fc_scope_begin(ctx);
    fc_tensor *y = fc_sigmoid(ctx, fc_mul(ctx, x, x));
    assert_int_equal(
        fc_backward_with(ctx, y, fc_ones(ctx, FC_F32, (const int64_t[]){16, 16}, 2), false), FC_OK);
    fc_scope_end(ctx);
    (void)fc_add(ctx, x, x); /* left alive on purpose: fc_ctx_free reclaims it */
    /* every allocation the context counts went to this allocator, plus the
     * context itself */
    fc_ctx_stats s = stats(ctx);
    assert_true(s.alloc_calls > 0);
    assert_true((uint64_t)atomic_load(&ca.total_allocs) == s.alloc_calls + 1);
    assert_true(atomic_load(&ca.live_blocks) > 0);
    fc_ctx_free(ctx);
    if (!fct_counting_clean(&ca)) {
        fct_counting_report(&ca, "user allocator");
        fail();
    }
    assert_int_equal(atomic_load(&ca.misaligned), 0);
    /* an allocator that refuses at once: no context, nothing leaked */
    fct_counting_fail_after(&ca, 0);
    assert_null(fc_ctx_new(&(fc_ctx_opts){.allocator = fct_counting_allocator(&ca)}));
    assert_true(fct_counting_clean(&ca));
    /* thread settings */
    fc_ctx *c = fc_ctx_new(&(fc_ctx_opts){.threads = 3});
    assert_int_equal(fc_ctx_threads(c), 3);
    assert_int_equal(fc_ctx_set_threads(c, -2), FC_ERR_INVALID_ARG);
    assert_int_equal(fc_ctx_set_threads(c, 0), FC_OK);
    assert_true(fc_ctx_threads(c) >= 1);
    fc_ctx_free(c);
    fc_ctx_free(NULL);
    /* bad options */
    assert_null(fc_ctx_new(&(fc_ctx_opts){.threads = -1}));
    assert_null(fc_ctx_new(&(fc_ctx_opts){.backend = FC_BACKEND_COUNT}));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ctx_sticky_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ctx_scopes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ctx_pool_steady_state, setup, teardown),
        cmocka_unit_test(test_ctx_rng),
        cmocka_unit_test_setup_teardown(test_ctx_data_access, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ctx_creation_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ctx_arange_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ctx_to_all_pairs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ctx_clone_contiguous_item, setup, teardown),
        cmocka_unit_test(test_ctx_user_allocator),
        cmocka_unit_test_setup_teardown(test_ctx_double_release_detected, setup, teardown),
        cmocka_unit_test(test_ctx_no_handle_reuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
