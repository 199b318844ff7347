/* SPDX-License-Identifier: MIT */
/* bench_gemm.c - the `gemm` workload of ../shared/BENCHMARKS.md: f32 C = A.B
 * for square n (default 256, 1024, 2048) through fc_matmul beside OpenBLAS's
 * cblas_sgemm called directly in the same process on the same buffers, so
 * the dispatch overhead is the difference between the two lines. Also:
 *   "small":  the MLP shapes 128x784 . 784x512 and 1024x128 . 128x512, the
 *             same two lines (dispatch overhead on sub-millisecond products);
 *   "onednn": f32, bf16 and f16 through the oneDNN provider at n = 1024
 *             (bf16 runs on AVX512-BF16 where the CPU has it).
 * GFLOP/s = 2 m n k / t. A and B are N(0, 1) from the context RNG, row-major
 * contiguous. fc_matmul returns a new tensor each call: the context's pool
 * recycles it, so steady state allocates nothing; the direct call writes a
 * preallocated C, like the peer's out= form.
 *
 * Usage: fucina-bench gemm [n ...]   (FUCINA_BENCH_THREADS, default 2;
 * FUCINA_BENCH_MIN_S shortens repeats for smoke runs; FUCINA_BACKEND picks
 * fc_matmul's provider as usual.)
 *
 * OpenBLAS is reached through weak references: a build without OpenBLAS
 * still links, and the direct lines read null. The prototypes are the
 * standard CBLAS ones with the enums as int (the same ABI), so this file
 * needs no cblas.h on the bench's include path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "fucina.h"

int fc_bench_gemm(int argc, char **argv);

#define CBLAS_ROW_MAJOR 101
#define CBLAS_NO_TRANS 111
extern void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                        const float *a, int lda, const float *b, int ldb, float beta, float *c,
                        int ldc) __attribute__((weak));
extern void openblas_set_num_threads(int n) __attribute__((weak));

typedef struct gemm_job {
    fc_ctx *ctx;
    fc_tensor *a, *b;
    const float *ad, *bd;
    float *c;
    int m, n, k;
    bool failed;
} gemm_job;

static void run_fucina(void *p) {
    gemm_job *j = p;
    fc_tensor *c = fc_matmul(j->ctx, j->a, j->b);
    if (!c) j->failed = true;
    fc_release(c);
}

static void run_direct(void *p) {
    gemm_job *j = p;
    cblas_sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, j->m, j->n, j->k, 1.0f, j->ad,
                j->k, j->bd, j->n, 0.0f, j->c, j->n);
}

/* Prints "key": {"fucina_gflops": ..., "openblas_direct_gflops": ...} for
 * one m x k . k x n product on ctx. Returns false when fc_matmul failed. */
static bool measure_pair(FILE *f, fc_ctx *ctx, const char *key, int m, int k, int n) {
    gemm_job j = {.ctx = ctx, .m = m, .n = n, .k = k};
    j.a = fc_randn(ctx, FC_F32, (int64_t[]){m, k}, 2);
    j.b = fc_randn(ctx, FC_F32, (int64_t[]){k, n}, 2);
    j.c = malloc(sizeof(float) * (size_t)m * (size_t)n);
    bool ok = j.a && j.b && j.c;
    if (ok) {
        j.ad = fc_tensor_data(j.a);
        j.bd = fc_tensor_data(j.b);
        run_fucina(&j);
        ok = !j.failed;
    }
    double flop = 2.0 * m * n * k;
    fprintf(f, "\"%s\": {", key);
    if (ok) {
        bench_result r = bench_measure(run_fucina, &j);
        ok = !j.failed;
        bench_json_stat(f, "fucina_gflops", &r, flop / 1e9);
        fprintf(f, ", ");
        if (cblas_sgemm) {
            bench_result d = bench_measure(run_direct, &j);
            bench_json_stat(f, "openblas_direct_gflops", &d, flop / 1e9);
            fprintf(f, ", \"ratio_median\": %.4f", d.median_s / r.median_s);
        } else {
            fprintf(f, "\"openblas_direct_gflops\": null");
        }
    } else {
        fprintf(f, "\"error\": \"%s\"", fc_ctx_error(ctx));
    }
    fprintf(f, "}");
    fc_release(j.a);
    fc_release(j.b);
    free(j.c);
    return ok;
}

/* "dtype_gflops" for an n^3 product of dtype through ctx's provider. */
static void measure_dtype(FILE *f, fc_ctx *ctx, fc_dtype dt, int n) {
    gemm_job j = {.ctx = ctx, .m = n, .n = n, .k = n};
    fc_tensor *a32 = fc_randn(ctx, FC_F32, (int64_t[]){n, n}, 2);
    fc_tensor *b32 = fc_randn(ctx, FC_F32, (int64_t[]){n, n}, 2);
    j.a = fc_to(ctx, a32, dt);
    j.b = fc_to(ctx, b32, dt);
    fprintf(f, "\"%s_gflops\": ", fc_dtype_name(dt));
    if (j.a && j.b) run_fucina(&j);
    if (!j.a || !j.b || j.failed) {
        fprintf(f, "{\"error\": \"%s\"}", fc_ctx_error(ctx));
        fc_ctx_clear_error(ctx);
    } else {
        bench_result r = bench_measure(run_fucina, &j);
        fprintf(f, "{");
        bench_json_stat(f, "gflops", &r, 2.0 * n * n * (double)n / 1e9);
        fprintf(f, "}");
    }
    fc_release(a32), fc_release(b32), fc_release(j.a), fc_release(j.b);
}

int fc_bench_gemm(int argc, char **argv) {
    const char *ts = getenv("FUCINA_BENCH_THREADS");
    int threads = ts ? atoi(ts) : 2;
    if (threads < 1) threads = 2;
    int sizes[16], nsizes = 0;
    for (int i = 0; i < argc && nsizes < 16; i++) {
        int v = atoi(argv[i]);
        if (v > 0) sizes[nsizes++] = v;
    }
    if (nsizes == 0) sizes[0] = 256, sizes[1] = 1024, sizes[2] = 2048, nsizes = 3;
    if (openblas_set_num_threads) openblas_set_num_threads(threads);

    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .seed = 0});
    if (!ctx) {
        fprintf(stderr, "gemm: cannot create a context\n");
        return 1;
    }
    FILE *f = stdout;
    bool ok = true;
    fprintf(f, "{\"workload\": \"gemm_f32\", ");
    bench_json_env(f, threads);
    fprintf(f, ", \"results\": {");
    for (int i = 0; i < nsizes; i++) {
        char key[32];
        snprintf(key, sizeof key, "%d", sizes[i]);
        if (i) fprintf(f, ", ");
        ok = measure_pair(f, ctx, key, sizes[i], sizes[i], sizes[i]) && ok;
    }
    fprintf(f, "}, \"small\": {");
    ok = measure_pair(f, ctx, "128x784x512", 128, 784, 512) && ok;
    fprintf(f, ", ");
    ok = measure_pair(f, ctx, "1024x128x512", 1024, 128, 512) && ok;
    fprintf(f, "}, \"onednn\": ");
    fc_ctx *dn = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .backend = FC_BACKEND_ONEDNN});
    if (dn) {
        fprintf(f, "{\"n\": 1024, ");
        measure_dtype(f, dn, FC_F32, 1024);
        fprintf(f, ", ");
        measure_dtype(f, dn, FC_BF16, 1024);
        fprintf(f, ", ");
        measure_dtype(f, dn, FC_F16, 1024);
        fprintf(f, "}");
        fc_ctx_free(dn);
    } else {
        fprintf(f, "null");
    }
    fprintf(f, "}\n");
    fflush(f);
    fc_ctx_free(ctx);
    return ok ? 0 : 1;
}
