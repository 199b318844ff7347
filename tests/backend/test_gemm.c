/* SPDX-License-Identifier: MIT */
/* test_gemm.c - every matmul provider on raw pointers (src/backend/backend.h)
 * against a double-precision reference written in the test
 * (tests/support/gemm_ref.c), plus the dispatch rules and the input checks.
 *
 * Tolerance: fct_gemm_tol, i.e. gamma_{K+2} * sum|a b| with the
 * accumulator's unit roundoff (2^-24 for f16/bf16/f32, 2^-53 for f64), plus
 * one rounding of the output dtype (2^-11 f16, 2^-8 bf16). See gemm_ref.h.
 *
 * Layout checks: the padding of every operand (past the leading dimension,
 * between batch products) holds NaN, so a provider that reads outside the
 * logical matrix produces NaN; C's padding must come back bit-identical, so
 * one that writes outside is caught too. Providers this build lacks are
 * skipped in the numeric tests and checked for the FC_ERR_BACKEND message. */
#define _POSIX_C_SOURCE 200809L /* setenv, posix_memalign */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "core/buffer.h"
#include "core/cpu.h"
#include "gemm_ref.h"

static const fc_dtype float_dtypes[] = {FC_F16, FC_BF16, FC_F32, FC_F64};
static const fc_backend provider_ids[] = {FC_BACKEND_REF, FC_BACKEND_BLAS, FC_BACKEND_ONEDNN};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
/* The named providers, then the f16/bf16 widening adapter (not nameable). */
#define N_PROVIDERS (COUNT(provider_ids) + 1)

/* Provider pi of N_PROVIDERS, or NULL when it was not built. */
static const fc__matmul_provider *provider_at(int pi) {
    return pi < COUNT(provider_ids) ? fc__backend_get(provider_ids[pi]) : &fc__provider_widen;
}

/* ---- a counting, optionally failing allocator ---------------------------------------------- */

typedef struct counting {
    fc_allocator a;
    long live, allocs, fail_after; /* fail_after < 0: never fail */
} counting;

static void *count_alloc(void *user, size_t size, size_t align) {
    counting *c = user;
    if (c->fail_after == 0) return NULL;
    if (c->fail_after > 0) c->fail_after--;
    void *p = NULL;
    if (align < sizeof(void *)) align = sizeof(void *);
    if (posix_memalign(&p, align, size ? size : 1) != 0) return NULL;
    c->live++;
    c->allocs++;
    return p;
}
static void count_free(void *user, void *p, size_t size) {
    (void)size;
    counting *c = user;
    if (!p) return;
    c->live--;
    free(p);
}
static void counting_init(counting *c) {
    c->a = (fc_allocator){count_alloc, count_free, c};
    c->live = c->allocs = 0;
    c->fail_after = -1;
}

/* ---- one randomised product ------------------------------------------------------------------ */

typedef struct gcase {
    fc_dtype dt;
    int64_t m, n, k, batch;
    bool ta, tb, acc;
    int64_t pad_a, pad_b, pad_c; /* extra leading-dimension elements */
    bool share_a, share_b;       /* batch stride 0 */
    int threads;
} gcase;

typedef struct operand {
    void *data;
    int64_t elems, ld, stride, span;
} operand;

static void fill_nan(fc_dtype dt, void *p, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        fct_store(dt, p, i, NAN);
}

/* rows x cols stored with leading dimension ld (transposed: cols x rows). */
static operand make_operand(fct_rng *r, fc_dtype dt, int64_t nb, bool share, int64_t rows,
                            int64_t cols, bool trans, int64_t pad, bool values) {
    operand o;
    int64_t outer = trans ? cols : rows, inner = trans ? rows : cols;
    o.ld = inner + pad;
    o.span = (outer - 1) * o.ld + inner;
    o.stride = share || nb == 1 ? 0 : o.span + 3; /* a gap between products */
    o.elems = (share ? 0 : nb - 1) * o.stride + o.span;
    o.data = malloc((size_t)o.elems * fc_dtype_size(dt));
    assert_non_null(o.data);
    fill_nan(dt, o.data, o.elems);
    if (!values) return o;
    int64_t copies = share ? 1 : nb;
    for (int64_t b = 0; b < copies; b++) {
        for (int64_t i = 0; i < outer; i++) {
            for (int64_t j = 0; j < inner; j++) {
                fct_store(dt, o.data, b * o.stride + i * o.ld + j, fct_rng_uniform(r, -1, 1));
            }
        }
    }
    return o;
}

/* Runs one case through provider p and checks every element and C's padding. */
static void check_case(const fc__matmul_provider *p, fc__backend_cache *cache, fct_rng *r,
                       const gcase *gc) {
    fc_dtype dt = gc->dt;
    operand A = make_operand(r, dt, gc->batch, gc->share_a, gc->m, gc->k, gc->ta, gc->pad_a, true);
    operand B = make_operand(r, dt, gc->batch, gc->share_b, gc->k, gc->n, gc->tb, gc->pad_b, true);
    operand C = make_operand(r, dt, gc->batch, false, gc->m, gc->n, false, gc->pad_c, gc->acc);
    size_t cbytes = (size_t)C.elems * fc_dtype_size(dt);
    void *c_before = malloc(cbytes);
    assert_non_null(c_before);
    memcpy(c_before, C.data, cbytes);

    fc__gemm g = {
        .dtype = dt,
        .m = gc->m,
        .n = gc->n,
        .k = gc->k,
        .a = A.data,
        .lda = A.ld,
        .trans_a = gc->ta,
        .b = B.data,
        .ldb = B.ld,
        .trans_b = gc->tb,
        .c = C.data,
        .ldc = C.ld,
        .accumulate = gc->acc,
        .batch = gc->batch,
        .stride_a = A.stride,
        .stride_b = B.stride,
        .stride_c = C.stride,
        .threads = gc->threads,
        .alloc = NULL,
        .cache = cache,
    };
    char err[256] = "";
    fc_status st = fc__gemm_run(p, &g, err, sizeof err);
    if (st != FC_OK) {
        fail_msg("%s m=%lld n=%lld k=%lld batch=%lld ta=%d tb=%d acc=%d lds=%lld,%lld,%lld "
                 "strides=%lld,%lld,%lld: status %d: %s",
                 p->name, (long long)gc->m, (long long)gc->n, (long long)gc->k,
                 (long long)gc->batch, gc->ta, gc->tb, gc->acc, (long long)A.ld, (long long)B.ld,
                 (long long)C.ld, (long long)A.stride, (long long)B.stride, (long long)C.stride, st,
                 err);
    }

    size_t mn = (size_t)(gc->m * gc->n);
    double *ref = malloc(mn * sizeof(double)), *mag = malloc(mn * sizeof(double));
    assert_true(ref && mag);
    for (int64_t b = 0; b < gc->batch; b++) {
        const char *ab = (const char *)A.data + (size_t)(b * A.stride) * fc_dtype_size(dt);
        const char *bb = (const char *)B.data + (size_t)(b * B.stride) * fc_dtype_size(dt);
        const char *c0 = (const char *)c_before + (size_t)(b * C.stride) * fc_dtype_size(dt);
        fct_mat ma = {dt, ab, gc->ta ? 1 : A.ld, gc->ta ? A.ld : 1};
        fct_mat mb = {dt, bb, gc->tb ? 1 : B.ld, gc->tb ? B.ld : 1};
        fct_mat mc = {dt, c0, C.ld, 1};
        fct_gemm_ref(gc->m, gc->n, gc->k, &ma, &mb, gc->acc ? &mc : NULL, ref, mag);
        for (int64_t i = 0; i < gc->m; i++) {
            for (int64_t j = 0; j < gc->n; j++) {
                double got = fct_load(dt, C.data, b * C.stride + i * C.ld + j);
                double want = ref[i * gc->n + j];
                double tol = fct_gemm_tol(dt, gc->k, want, mag[i * gc->n + j]);
                if (!(fabs(got - want) <= tol)) {
                    fail_msg("%s %s m=%lld n=%lld k=%lld batch=%lld ta=%d tb=%d acc=%d "
                             "threads=%d: C[%lld][%lld][%lld] = %.9g, want %.9g (tol %.3g)",
                             p->name, fc_dtype_name(dt), (long long)gc->m, (long long)gc->n,
                             (long long)gc->k, (long long)gc->batch, gc->ta, gc->tb, gc->acc,
                             gc->threads, (long long)b, (long long)i, (long long)j, got, want, tol);
                }
            }
        }
    }
    /* Nothing outside the logical C may change: compare the padding bytes. */
    size_t es = fc_dtype_size(dt);
    for (int64_t e = 0; e < C.elems; e++) {
        int64_t off = e, b = C.stride ? off / C.stride : 0;
        int64_t in_b = off - b * C.stride, i = in_b / C.ld, j = in_b % C.ld;
        bool logical = b < gc->batch && i < gc->m && j < gc->n && (b == 0 || C.stride != 0);
        if (logical) continue;
        if (memcmp((char *)C.data + e * (int64_t)es, (char *)c_before + e * (int64_t)es, es)) {
            fail_msg("%s %s: wrote C padding at element %lld", p->name, fc_dtype_name(dt),
                     (long long)e);
        }
    }
    free(ref);
    free(mag);
    free(c_before);
    free(A.data);
    free(B.data);
    free(C.data);
}

/* ---- numeric tests --------------------------------------------------------------------------- */

static const int64_t odd_sizes[] = {1, 3, 17, 63, 65, 129};

static gcase random_case(fct_rng *r, fc_dtype dt) {
    gcase gc = {.dt = dt, .batch = 1, .threads = 1};
    gc.m = odd_sizes[fct_rng_below(r, COUNT(odd_sizes))];
    gc.n = odd_sizes[fct_rng_below(r, COUNT(odd_sizes))];
    gc.k = odd_sizes[fct_rng_below(r, COUNT(odd_sizes))];
    gc.ta = fct_rng_below(r, 2);
    gc.tb = fct_rng_below(r, 2);
    gc.acc = fct_rng_below(r, 3) == 0;
    gc.pad_a = fct_rng_below(r, 2) ? 0 : 1 + fct_rng_below(r, 5); /* narrowed views */
    gc.pad_b = fct_rng_below(r, 2) ? 0 : 1 + fct_rng_below(r, 5);
    gc.pad_c = fct_rng_below(r, 3) ? 0 : 2;
    gc.threads = 1 + (int)fct_rng_below(r, 2);
    return gc;
}

/* Random shapes from {1, 3, 17, 63, 65, 129}^3 with random transposes,
 * padded leading dimensions, accumulate and 1 or 2 threads. */
static void test_gemm_random_shapes_every_provider(void **state) {
    (void)state;
    for (int pi = 0; pi < N_PROVIDERS; pi++) {
        const fc__matmul_provider *p = provider_at(pi);
        if (!p) continue;
        fc__backend_cache *cache = fc__backend_cache_new(NULL);
        assert_non_null(cache);
        for (int di = 0; di < COUNT(float_dtypes); di++) {
            if (!p->supports(float_dtypes[di])) continue;
            fct_rng r = {0x5eed0000u + (uint64_t)(pi * 16 + di)};
            for (int t = 0; t < 24; t++) {
                gcase gc = random_case(&r, float_dtypes[di]);
                check_case(p, cache, &r, &gc);
            }
        }
        fc__backend_cache_free(cache);
    }
}

/* Row and column vectors (1xN, Nx1 results, k = 1 outer products) and a
 * product large enough to cross every block boundary of ref (96 x 256 x 256
 * tiles) and to use OpenBLAS's / oneDNN's threaded paths. */
static void test_gemm_edge_and_blocked_shapes(void **state) {
    (void)state;
    static const int64_t shapes[][3] = {
        {1, 129, 65}, {129, 1, 65}, {1, 1, 129}, {65, 63, 1}, {1, 17, 1}, {100, 260, 300},
    };
    for (int pi = 0; pi < N_PROVIDERS; pi++) {
        const fc__matmul_provider *p = provider_at(pi);
        if (!p) continue;
        fc__backend_cache *cache = fc__backend_cache_new(NULL);
        assert_non_null(cache);
        fct_rng r = {77u + (uint64_t)pi};
        for (int di = 0; di < COUNT(float_dtypes); di++) {
            if (!p->supports(float_dtypes[di])) continue;
            for (int s = 0; s < COUNT(shapes); s++) {
                for (int tr = 0; tr < 4; tr += s == COUNT(shapes) - 1 ? 3 : 1) {
                    gcase gc = {.dt = float_dtypes[di],
                                .m = shapes[s][0],
                                .n = shapes[s][1],
                                .k = shapes[s][2],
                                .batch = 1,
                                .ta = tr & 1,
                                .tb = tr >> 1,
                                .acc = tr == 3,
                                .pad_a = tr == 1 ? 3 : 0,
                                .threads = 2};
                    check_case(p, cache, &r, &gc);
                }
            }
        }
        fc__backend_cache_free(cache);
    }
}

/* Batches with a shared (stride-0) operand on either side, gaps between
 * products, transposes and accumulate. */
static void test_gemm_broadcast_batches(void **state) {
    (void)state;
    for (int pi = 0; pi < N_PROVIDERS; pi++) {
        const fc__matmul_provider *p = provider_at(pi);
        if (!p) continue;
        fc__backend_cache *cache = fc__backend_cache_new(NULL);
        assert_non_null(cache);
        fct_rng r = {900u + (uint64_t)pi};
        for (int di = 0; di < COUNT(float_dtypes); di++) {
            if (!p->supports(float_dtypes[di])) continue;
            for (int v = 0; v < 6; v++) {
                gcase gc = {.dt = float_dtypes[di],
                            .m = v == 5 ? 1 : 17,
                            .n = 63,
                            .k = 65,
                            .batch = 3 + v % 2,
                            .ta = v & 1,
                            .tb = (v >> 1) & 1,
                            .acc = v == 4,
                            .share_a = v % 3 == 0,
                            .share_b = v % 3 == 1,
                            .pad_b = v == 2 ? 4 : 0,
                            .threads = 1 + v % 2};
                check_case(p, cache, &r, &gc);
            }
        }
        fc__backend_cache_free(cache);
    }
}

/* C holds NaN and accumulate is off: C = A.B must not read it (BLAS's beta
 * = 0 rule, oneDNN without a sum post-op). */
static void test_gemm_overwrite_ignores_old_c(void **state) {
    (void)state;
    for (int pi = 0; pi < N_PROVIDERS; pi++) {
        const fc__matmul_provider *p = provider_at(pi);
        if (!p) continue;
        for (int di = 0; di < COUNT(float_dtypes); di++) {
            fc_dtype dt = float_dtypes[di];
            if (!p->supports(dt)) continue;
            double a[6], b[6], c[4]; /* storage for up to 6 elements of any dtype */
            for (int i = 0; i < 6; i++)
                fct_store(dt, a, i, i + 1); /* [[1,2,3],[4,5,6]] */
            for (int i = 0; i < 6; i++)
                fct_store(dt, b, i, 6 - i); /* [[6,5],[4,3],[2,1]] */
            fill_nan(dt, c, 4);
            fc__gemm g = {.dtype = dt,
                          .m = 2,
                          .n = 2,
                          .k = 3,
                          .a = a,
                          .lda = 3,
                          .b = b,
                          .ldb = 2,
                          .c = c,
                          .ldc = 2,
                          .batch = 1,
                          .threads = 1};
            char err[200];
            assert_int_equal(fc__gemm_run(p, &g, err, sizeof err), FC_OK);
            /* exact small integers in every dtype */
            assert_true(fct_load(dt, c, 0) == 20.0 && fct_load(dt, c, 1) == 14.0);
            assert_true(fct_load(dt, c, 2) == 56.0 && fct_load(dt, c, 3) == 41.0);
        }
    }
}

/* Same inputs, same provider and thread count: the same bits, twice. ref
 * also gives the same bits for 1 and 2 threads (tile sums never split). */
static void test_gemm_deterministic(void **state) {
    (void)state;
    const int64_t m = 150, n = 270, k = 300;
    fct_rng r = {4242};
    float *a = malloc(sizeof(float) * (size_t)(m * k)),
          *b = malloc(sizeof(float) * (size_t)(k * n));
    float *c1 = malloc(sizeof(float) * (size_t)(m * n)),
          *c2 = malloc(sizeof(float) * (size_t)(m * n));
    assert_true(a && b && c1 && c2);
    for (int64_t i = 0; i < m * k; i++)
        a[i] = (float)fct_rng_uniform(&r, -1, 1);
    for (int64_t i = 0; i < k * n; i++)
        b[i] = (float)fct_rng_uniform(&r, -1, 1);
    for (int pi = 0; pi < N_PROVIDERS; pi++) {
        const fc__matmul_provider *p = provider_at(pi);
        if (!p || !p->supports(FC_F32)) continue;
        fc__backend_cache *cache = fc__backend_cache_new(NULL);
        fc__gemm g = {.dtype = FC_F32,
                      .m = m,
                      .n = n,
                      .k = k,
                      .a = a,
                      .lda = k,
                      .b = b,
                      .ldb = n,
                      .c = c1,
                      .ldc = n,
                      .batch = 1,
                      .threads = 2,
                      .cache = cache};
        char err[200];
        assert_int_equal(fc__gemm_run(p, &g, err, sizeof err), FC_OK);
        g.c = c2;
        assert_int_equal(fc__gemm_run(p, &g, err, sizeof err), FC_OK);
        assert_memory_equal(c1, c2, sizeof(float) * (size_t)(m * n));
        if (p == &fc__provider_ref) {
            g.threads = 1;
            assert_int_equal(fc__gemm_run(p, &g, err, sizeof err), FC_OK);
            assert_memory_equal(c1, c2, sizeof(float) * (size_t)(m * n));
        }
        fc__backend_cache_free(cache);
    }
    free(a);
    free(b);
    free(c1);
    free(c2);
}

/* ---- the oneDNN primitive cache ------------------------------------------------------------- */

static void run_square(const fc__matmul_provider *p, fc__backend_cache *cache, int64_t n,
                       bool acc) {
    enum { MAX_N = FC__DNNL_CACHE + 8 };
    static float a[MAX_N * MAX_N], b[MAX_N * MAX_N], c[MAX_N * MAX_N];
    assert_true(n <= MAX_N);
    for (int64_t i = 0; i < n * n; i++)
        a[i] = b[i] = c[i] = 1.0f;
    fc__gemm g = {.dtype = FC_F32,
                  .m = n,
                  .n = n,
                  .k = n,
                  .a = a,
                  .lda = n,
                  .b = b,
                  .ldb = n,
                  .c = c,
                  .ldc = n,
                  .accumulate = acc,
                  .batch = 1,
                  .threads = 1,
                  .cache = cache};
    char err[200];
    assert_int_equal(fc__gemm_run(p, &g, err, sizeof err), FC_OK);
    assert_true(c[0] == (float)n + (acc ? 1.0f : 0.0f));
}

/* A repeated call reuses its primitive; a new shape or flag adds one; the
 * cache is bounded; every entry is allocated through the cache's allocator
 * and freed with it. */
static void test_gemm_onednn_cache(void **state) {
    (void)state;
    const fc__matmul_provider *p = fc__backend_get(FC_BACKEND_ONEDNN);
    if (!p) {
        print_message("skipped: the oneDNN provider was not built\n");
        skip();
    }
    counting ca;
    counting_init(&ca);
    fc__backend_cache *cache = fc__backend_cache_new(&ca.a);
    assert_non_null(cache);
    assert_int_equal(fc__backend_cache_entries(cache, FC_BACKEND_ONEDNN), 0);
    run_square(p, cache, 8, false);
    assert_int_equal(fc__backend_cache_entries(cache, FC_BACKEND_ONEDNN), 1);
    long allocs = ca.allocs;
    for (int i = 0; i < 5; i++)
        run_square(p, cache, 8, false);
    assert_int_equal(fc__backend_cache_entries(cache, FC_BACKEND_ONEDNN), 1);
    assert_int_equal(ca.allocs, allocs); /* a hit allocates nothing */
    run_square(p, cache, 8, true);
    assert_int_equal(fc__backend_cache_entries(cache, FC_BACKEND_ONEDNN), 2);
    for (int64_t n = 1; n <= FC__DNNL_CACHE + 8; n++)
        run_square(p, cache, n, false);
    int held = fc__backend_cache_entries(cache, FC_BACKEND_ONEDNN);
    assert_int_equal(held, FC__DNNL_CACHE);
    fc__backend_cache_free(cache);
    assert_int_equal(ca.live, 0);
    assert_true(ca.allocs > 0);
}

/* Without a cache the provider still works and keeps nothing. */
static void test_gemm_onednn_without_cache(void **state) {
    (void)state;
    const fc__matmul_provider *p = fc__backend_get(FC_BACKEND_ONEDNN);
    if (!p) {
        print_message("skipped: the oneDNN provider was not built\n");
        skip();
    }
    run_square(p, NULL, 5, false);
    run_square(p, NULL, 5, true);
}

/* Out of memory: every allocation the providers make goes through the given
 * allocator; failing the Nth one gives FC_ERR_OOM and leaks nothing. */
static void test_gemm_out_of_memory(void **state) {
    (void)state;
    float a[64], b[64], c[64];
    for (int i = 0; i < 64; i++)
        a[i] = b[i] = 1.0f;
    for (int pi = 0; pi < N_PROVIDERS; pi++) {
        const fc__matmul_provider *p = provider_at(pi);
        if (!p) continue;
        static const fc_dtype dts[] = {FC_F16, FC_F32};
        for (int di = 0; di < COUNT(dts); di++) {
            fc_dtype dt = dts[di];
            if (!p->supports(dt)) continue;
            bool succeeded = false;
            for (long n = 0; n < 16 && !succeeded; n++) {
                counting ca;
                counting_init(&ca);
                ca.fail_after = n;
                fc__backend_cache *cache = fc__backend_cache_new(&ca.a);
                char err[200];
                fc_status st = FC_ERR_OOM;
                if (cache) {
                    fc__gemm g = {.dtype = dt,
                                  .m = 8,
                                  .n = 8,
                                  .k = 8,
                                  .a = a,
                                  .lda = 8,
                                  .b = b,
                                  .ldb = 8,
                                  .c = c,
                                  .ldc = 8,
                                  .batch = 1,
                                  .threads = 1,
                                  .alloc = &ca.a,
                                  .cache = cache};
                    st = fc__gemm_run(p, &g, err, sizeof err);
                    fc__backend_cache_free(cache);
                }
                assert_true(st == FC_OK || st == FC_ERR_OOM);
                assert_int_equal(ca.live, 0);
                succeeded = st == FC_OK;
            }
            assert_true(succeeded);
        }
    }
}

/* ---- dispatch rules and input checks ------------------------------------------------------ */

static void test_gemm_resolve_rules(void **state) {
    (void)state;
    unsetenv("FUCINA_BACKEND");
    fc__backend_env_refresh();
    char err[256];
    const fc__matmul_provider *p = NULL;
    const fc__matmul_provider *blas = fc__backend_get(FC_BACKEND_BLAS);
    const fc__matmul_provider *dnnl = fc__backend_get(FC_BACKEND_ONEDNN);

    /* FUCINA_ISA below avx512 caps oneDNN as well (unless oneDNN's own
     * variable is set): no bf16 kernel then, as on an AVX2-only CPU */
    if (dnnl && fc__isa_env_cap() < FC__ISA_AVX512 && !getenv("ONEDNN_MAX_CPU_ISA") &&
        !getenv("DNNL_MAX_CPU_ISA"))
        assert_false(dnnl->supports(FC_BF16));
    /* automatic choice per dtype (large enough not to be "tiny"), at every
     * level this CPU has: the f32 choice follows the level */
    /* OpenBLAS's own kernel choice never exceeds the CPU, and on x86 it
     * follows a core type pinned in the environment (read when the library
     * loaded; elsewhere OpenBLAS ignores an x86 name) */
    if (blas) {
        assert_non_null(blas->kernel_level);
        const int got = blas->kernel_level();
        assert_true(got >= FC__ISA_PORTABLE && got <= (int)fc__isa_detected());
#if defined(__x86_64__) || defined(__i386__)
        const char *core = getenv("OPENBLAS_CORETYPE");
        if (core && strcmp(core, "Haswell") == 0) assert_int_equal(got, FC__ISA_AVX2);
#endif
    }
    const fc__isa keep = fc__isa_set_cap(FC__ISA_PORTABLE);
    for (int lv = FC__ISA_PORTABLE; lv <= (int)fc__isa_detected(); lv++) {
        fc__isa_set_cap((fc__isa)lv);
        const fc__matmul_provider *f32 = fc__backend_f32_inner(64, 64, 64);
        /* AVX2 gives the largest products to OpenBLAS, and so does AVX-512
         * when OpenBLAS loaded AVX-512 kernels (the boundary is
         * FC__GEMM_DNNL_MAX multiply-adds, checked on both sides) */
        const fc__matmul_provider *f32_big = fc__backend_f32_inner(2048, 1024, 1024);
        const fc__matmul_provider *f32_edge = fc__backend_f32_inner(1024, 1024, 1024);
        if (dnnl && blas) {
            const bool wide = fc__isa_level() >= FC__ISA_AVX512;
            const bool avx2 = fc__isa_level() == FC__ISA_AVX2;
            assert_ptr_equal(f32, wide || avx2 ? dnnl : blas);
            assert_ptr_equal(f32_edge, wide || avx2 ? dnnl : blas);
            const bool blas_wide = blas->kernel_level && blas->kernel_level() >= FC__ISA_AVX512;
            assert_ptr_equal(f32_big, wide && !blas_wide ? dnnl : blas);
        } else {
            assert_ptr_equal(f32, dnnl ? dnnl : blas);
            assert_ptr_equal(f32_big, f32);
        }
        assert_int_equal(
            fc__backend_resolve(FC_BACKEND_AUTO, FC_F32, 2048, 1024, 1024, &p, err, sizeof err),
            FC_OK);
        assert_ptr_equal(p, f32_big ? f32_big : &fc__provider_ref);
        assert_int_equal(
            fc__backend_resolve(FC_BACKEND_AUTO, FC_F32, 64, 64, 64, &p, err, sizeof err), FC_OK);
        assert_ptr_equal(p, f32 ? f32 : &fc__provider_ref);
        assert_int_equal(
            fc__backend_resolve(FC_BACKEND_AUTO, FC_F64, 64, 64, 64, &p, err, sizeof err), FC_OK);
        assert_ptr_equal(p, blas ? blas : &fc__provider_ref);
        for (int h = 0; h < 2; h++) {
            const fc_dtype dt = h ? FC_F16 : FC_BF16;
            assert_int_equal(
                fc__backend_resolve(FC_BACKEND_AUTO, dt, 64, 64, 64, &p, err, sizeof err), FC_OK);
            /* oneDNN where it has the dtype natively, else f32 panels */
            const fc__matmul_provider *want = dnnl && dnnl->supports(dt) ? dnnl
                                              : f32                      ? &fc__provider_widen
                                                                         : &fc__provider_ref;
            assert_ptr_equal(p, want);
            assert_true(p->supports(dt));
            /* an explicit oneDNN without the kernel names what it needs */
            if (dnnl && !dnnl->supports(dt)) {
                assert_int_equal(
                    fc__backend_resolve(FC_BACKEND_ONEDNN, dt, 64, 64, 64, &p, err, sizeof err),
                    FC_ERR_BACKEND);
                assert_non_null(strstr(err, "'onednn' cannot run"));
                assert_non_null(strstr(err, h ? "AVX512-FP16" : "AVX-512 (F, BW, VL, DQ)"));
                assert_non_null(strstr(err, "'auto' runs it through f32"));
            }
        }
    }
    fc__isa_set_cap(keep);
    /* a tiny product never builds a oneDNN primitive; OpenBLAS takes any size */
    assert_int_equal(fc__backend_resolve(FC_BACKEND_AUTO, FC_BF16, 4, 4, 4, &p, err, sizeof err),
                     FC_OK);
    assert_ptr_equal(p, &fc__provider_ref);
    assert_int_equal(fc__backend_resolve(FC_BACKEND_AUTO, FC_F32, 4, 4, 4, &p, err, sizeof err),
                     FC_OK);
    assert_ptr_equal(p, blas ? blas : &fc__provider_ref);

    /* explicit choices */
    assert_int_equal(fc__backend_resolve(FC_BACKEND_REF, FC_BF16, 64, 64, 64, &p, err, sizeof err),
                     FC_OK);
    assert_ptr_equal(p, &fc__provider_ref);
    fc_status st = fc__backend_resolve(FC_BACKEND_BLAS, FC_F32, 64, 64, 64, &p, err, sizeof err);
    if (blas) {
        assert_int_equal(st, FC_OK);
        assert_ptr_equal(p, blas);
        st = fc__backend_resolve(FC_BACKEND_BLAS, FC_BF16, 64, 64, 64, &p, err, sizeof err);
        assert_int_equal(st, FC_ERR_BACKEND);
        assert_non_null(strstr(err, "'blas' does not support bf16"));
        assert_non_null(strstr(err, "f32, f64"));
    } else {
        assert_int_equal(st, FC_ERR_BACKEND);
        assert_non_null(strstr(err, "'blas' was not built"));
        assert_non_null(strstr(err, "libopenblas-openmp-dev"));
    }
    st = fc__backend_resolve(FC_BACKEND_ONEDNN, FC_F32, 64, 64, 64, &p, err, sizeof err);
    if (dnnl) {
        assert_int_equal(st, FC_OK);
        st = fc__backend_resolve(FC_BACKEND_ONEDNN, FC_F64, 64, 64, 64, &p, err, sizeof err);
        assert_int_equal(st, FC_ERR_BACKEND);
        assert_non_null(strstr(err, "'onednn' does not support f64"));
    } else {
        assert_int_equal(st, FC_ERR_BACKEND);
        assert_string_equal(err, "matmul: backend 'onednn' was not built (install libdnnl-dev and "
                                 "reconfigure with -DFUCINA_WITH_ONEDNN=ON)");
    }

    /* bad input */
    assert_int_equal(fc__backend_resolve(FC_BACKEND_AUTO, FC_I32, 8, 8, 8, &p, err, sizeof err),
                     FC_ERR_DTYPE);
    assert_non_null(strstr(err, "i32"));
    assert_int_equal(fc__backend_resolve(FC_BACKEND_AUTO, FC_Q4_0, 8, 8, 8, &p, err, sizeof err),
                     FC_ERR_DTYPE);
    assert_int_equal(fc__backend_resolve((fc_backend)7, FC_F32, 8, 8, 8, &p, err, sizeof err),
                     FC_ERR_INVALID_ARG);
    assert_int_equal(fc__backend_resolve(FC_BACKEND_AUTO, FC_F32, 0, 8, 8, &p, err, sizeof err),
                     FC_ERR_INVALID_SHAPE);
    assert_int_equal(fc__backend_resolve(FC_BACKEND_AUTO, FC_F32, 8, 8, 8, NULL, err, sizeof err),
                     FC_ERR_NULL_ARG);

    /* names */
    fc_backend id;
    assert_int_equal(fc__backend_from_name("onednn", &id), FC_OK);
    assert_int_equal(id, FC_BACKEND_ONEDNN);
    assert_int_equal(fc__backend_from_name("OneDNN", &id), FC_ERR_INVALID_ARG);
    assert_int_equal(fc__backend_from_name(NULL, &id), FC_ERR_NULL_ARG);
    assert_string_equal(fc__backend_name(FC_BACKEND_BLAS), "blas");
    assert_string_equal(fc__backend_name((fc_backend)-1), "invalid");
    assert_null(fc__backend_get(FC_BACKEND_AUTO));
    assert_null(fc__backend_get(FC_BACKEND_COUNT));
    assert_ptr_equal(fc__backend_get(FC_BACKEND_REF), &fc__provider_ref);
}

/* FUCINA_BACKEND steers AUTO (read once; refreshed here for the test). */
static void test_gemm_resolve_environment(void **state) {
    (void)state;
    char err[256];
    const fc__matmul_provider *p = NULL;
    setenv("FUCINA_BACKEND", "ref", 1);
    fc__backend_env_refresh();
    assert_int_equal(
        fc__backend_resolve(FC_BACKEND_AUTO, FC_F32, 512, 512, 512, &p, err, sizeof err), FC_OK);
    assert_ptr_equal(p, &fc__provider_ref);
    /* an explicit request still wins over the environment */
    if (fc__backend_get(FC_BACKEND_BLAS)) {
        assert_int_equal(
            fc__backend_resolve(FC_BACKEND_BLAS, FC_F32, 512, 512, 512, &p, err, sizeof err),
            FC_OK);
        assert_ptr_equal(p, fc__backend_get(FC_BACKEND_BLAS));
    }
    /* read once: changing the variable without a refresh changes nothing */
    setenv("FUCINA_BACKEND", "bogus", 1);
    assert_int_equal(
        fc__backend_resolve(FC_BACKEND_AUTO, FC_F32, 512, 512, 512, &p, err, sizeof err), FC_OK);
    fc__backend_env_refresh();
    assert_int_equal(
        fc__backend_resolve(FC_BACKEND_AUTO, FC_F32, 512, 512, 512, &p, err, sizeof err),
        FC_ERR_BACKEND);
    assert_non_null(strstr(err, "FUCINA_BACKEND='bogus'"));
    setenv("FUCINA_BACKEND", "blas", 1);
    fc__backend_env_refresh();
    fc_status st =
        fc__backend_resolve(FC_BACKEND_AUTO, FC_BF16, 512, 512, 512, &p, err, sizeof err);
    assert_int_equal(st, FC_ERR_BACKEND); /* blas has no bf16, or blas was not built */
    assert_non_null(strstr(err, "(from FUCINA_BACKEND)"));
    setenv("FUCINA_BACKEND", "auto", 1);
    fc__backend_env_refresh();
    assert_int_equal(fc__backend_resolve(FC_BACKEND_AUTO, FC_F16, 4, 4, 4, &p, err, sizeof err),
                     FC_OK);
    assert_ptr_equal(p, &fc__provider_ref);
    unsetenv("FUCINA_BACKEND");
    fc__backend_env_refresh();
}

/* The widening adapter sizes its f32 panels before it touches anything: sizes
 * whose panels overflow size_t are FC_ERR_OVERFLOW, with no allocation. */
static void test_gemm_widen_panels_overflow(void **state) {
    (void)state;
    if (!fc__provider_widen.supports(FC_BF16)) {
        print_message("skipped: no f32 provider (OpenBLAS or oneDNN) to widen into\n");
        skip();
    }
    uint16_t a[4] = {0}, b[4] = {0}, c[4] = {0};
    counting ca;
    counting_init(&ca);
    const int64_t big = INT64_MAX / 4;
    fc__gemm g = {.dtype = FC_BF16,
                  .m = big,
                  .n = 2,
                  .k = big,
                  .a = a,
                  .lda = big,
                  .b = b,
                  .ldb = 2,
                  .c = c,
                  .ldc = 2,
                  .batch = 1,
                  .threads = 1,
                  .alloc = &ca.a};
    char err[256];
    assert_int_equal(fc__gemm_run(&fc__provider_widen, &g, err, sizeof err), FC_ERR_OVERFLOW);
    assert_non_null(strstr(err, "gemm(widen)"));
    assert_non_null(strstr(err, "overflow"));
    assert_int_equal(ca.allocs, 0);
}

static void test_gemm_validate_rejects_bad_input(void **state) {
    (void)state;
    float a[16], b[16], c[16];
    const fc__gemm good = {.dtype = FC_F32,
                           .m = 2,
                           .n = 3,
                           .k = 4,
                           .a = a,
                           .lda = 4,
                           .b = b,
                           .ldb = 3,
                           .c = c,
                           .ldc = 3,
                           .batch = 1,
                           .threads = 1};
    char err[256];
    assert_int_equal(fc__gemm_validate(&good, err, sizeof err), FC_OK);
    fc__gemm g;
    g = good, g.a = NULL;
    assert_int_equal(fc__gemm_validate(&g, err, sizeof err), FC_ERR_NULL_ARG);
    g = good, g.dtype = FC_I8;
    assert_int_equal(fc__gemm_validate(&g, err, sizeof err), FC_ERR_DTYPE);
    g = good, g.k = 0;
    assert_int_equal(fc__gemm_validate(&g, err, sizeof err), FC_ERR_INVALID_SHAPE);
    g = good, g.batch = 0;
    assert_int_equal(fc__gemm_validate(&g, err, sizeof err), FC_ERR_INVALID_SHAPE);
    g = good, g.lda = 3;
    assert_int_equal(fc__gemm_validate(&g, err, sizeof err), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(err, "lda=3"));
    g = good, g.trans_a = true; /* then lda >= m = 2 suffices */
    assert_int_equal(fc__gemm_validate(&g, err, sizeof err), FC_OK);
    g = good, g.trans_b = true, g.ldb = 3; /* needs ldb >= k = 4 */
    assert_int_equal(fc__gemm_validate(&g, err, sizeof err), FC_ERR_INVALID_ARG);
    g = good, g.ldc = 2;
    assert_int_equal(fc__gemm_validate(&g, err, sizeof err), FC_ERR_INVALID_ARG);
    g = good, g.batch = 2, g.stride_c = 0;
    assert_int_equal(fc__gemm_validate(&g, err, sizeof err), FC_ERR_INVALID_ARG);
    g = good, g.stride_a = -1;
    assert_int_equal(fc__gemm_validate(&g, err, sizeof err), FC_ERR_INVALID_ARG);
    g = good, g.threads = 0;
    assert_int_equal(fc__gemm_validate(&g, err, sizeof err), FC_ERR_INVALID_ARG);
    assert_int_equal(fc__gemm_validate(NULL, err, sizeof err), FC_ERR_NULL_ARG);
    assert_int_equal(fc__gemm_run(NULL, &good, err, sizeof err), FC_ERR_NULL_ARG);
    const fc__matmul_provider *blas = fc__backend_get(FC_BACKEND_BLAS);
    if (blas) {
        g = good, g.dtype = FC_BF16;
        assert_int_equal(fc__gemm_run(blas, &g, err, sizeof err), FC_ERR_BACKEND);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_random_shapes_every_provider),
        cmocka_unit_test(test_gemm_edge_and_blocked_shapes),
        cmocka_unit_test(test_gemm_broadcast_batches),
        cmocka_unit_test(test_gemm_overwrite_ignores_old_c),
        cmocka_unit_test(test_gemm_deterministic),
        cmocka_unit_test(test_gemm_onednn_cache),
        cmocka_unit_test(test_gemm_onednn_without_cache),
        cmocka_unit_test(test_gemm_out_of_memory),
        cmocka_unit_test(test_gemm_resolve_rules),
        cmocka_unit_test(test_gemm_resolve_environment),
        cmocka_unit_test(test_gemm_widen_panels_overflow),
        cmocka_unit_test(test_gemm_validate_rejects_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
