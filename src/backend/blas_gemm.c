/* SPDX-License-Identifier: MIT */
/* blas_gemm.c - the OpenBLAS provider: cblas_sgemm / cblas_dgemm for f32 and
 * f64. Compiled only when CMake found OpenBLAS (FUCINA_HAVE_OPENBLAS).
 *
 * The fc__gemm addressing is BLAS's row-major convention, so operands go
 * through as (transpose flag, leading dimension) without a copy and the call
 * is the one a user would write by hand; the bench compares the two.
 *
 * Threads. We link OpenBLAS's OpenMP build: it runs on the calling thread's
 * OpenMP team and sizes that team from omp_get_max_threads(), except that
 * once its own count is 1 it stops looking. So each call sets OpenBLAS's
 * count when it differs from the context's and brackets the call with the
 * OpenMP setting; inside an OpenMP parallel region OpenBLAS runs serially by
 * itself. With the count fixed, OpenBLAS partitions M and N (never K) the
 * same way on every call, so the bits repeat (a batch of small products is
 * split over the team, one whole product per call, so that holds too). The
 * count is process-wide in OpenBLAS: contexts with different counts used
 * concurrently on different threads may see each other's setting (results
 * stay correct). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <cblas.h>

#include "backend/backend.h"
#include "core/cpu.h"

#ifdef FUCINA_HAVE_OPENMP
#include <omp.h>
#endif

static bool blas_supports(fc_dtype dt) { return dt == FC_F32 || dt == FC_F64; }

static bool fits_blasint(int64_t v) { return v <= (int64_t)INT_MAX; }

static void set_threads(int threads) {
#ifdef FUCINA_HAVE_OPENMP
    if (omp_in_parallel()) return;
#endif
    if (openblas_get_num_threads() != threads) openblas_set_num_threads(threads);
}

/* Products below this many multiply-adds (m*n*k) are the ones OpenBLAS runs
 * single-threaded (its SMP threshold is 65536 * 4): a batch of them is
 * split over the team instead. */
#define FC__BLAS_SMALL (65536 * 4)

typedef struct blas_call {
    const fc__gemm *g;
    blasint m, n, k, lda, ldb, ldc;
    enum CBLAS_TRANSPOSE ta, tb;
} blas_call;

/* Products [begin, end) of the batch. */
static void run_products(const blas_call *c, int64_t begin, int64_t end) {
    const fc__gemm *g = c->g;
    if (g->dtype == FC_F32) {
        const float *a = g->a, *b = g->b;
        float *out = g->c;
        float beta = g->accumulate ? 1.0f : 0.0f;
        for (int64_t i = begin; i < end; i++) {
            cblas_sgemm(CblasRowMajor, c->ta, c->tb, c->m, c->n, c->k, 1.0f, a + i * g->stride_a,
                        c->lda, b + i * g->stride_b, c->ldb, beta, out + i * g->stride_c, c->ldc);
        }
    } else {
        const double *a = g->a, *b = g->b;
        double *out = g->c;
        double beta = g->accumulate ? 1.0 : 0.0;
        for (int64_t i = begin; i < end; i++) {
            cblas_dgemm(CblasRowMajor, c->ta, c->tb, c->m, c->n, c->k, 1.0, a + i * g->stride_a,
                        c->lda, b + i * g->stride_b, c->ldb, beta, out + i * g->stride_c, c->ldc);
        }
    }
}

static fc_status blas_gemm(const fc__gemm *g, char *err, size_t errcap) {
    int64_t max_ld = g->lda > g->ldb ? g->lda : g->ldb;
    if (g->ldc > max_ld) max_ld = g->ldc;
    if (!fits_blasint(g->m) || !fits_blasint(g->n) || !fits_blasint(g->k) ||
        !fits_blasint(max_ld)) {
        snprintf(err, errcap,
                 "gemm(blas): m=%lld n=%lld k=%lld or a leading dimension exceeds OpenBLAS's "
                 "32-bit int (use the 'ref' backend)",
                 (long long)g->m, (long long)g->n, (long long)g->k);
        return FC_ERR_BACKEND;
    }
    const blasint m = (blasint)g->m, n = (blasint)g->n, k = (blasint)g->k;
    const blasint lda = (blasint)g->lda, ldb = (blasint)g->ldb, ldc = (blasint)g->ldc;
    const enum CBLAS_TRANSPOSE ta = g->trans_a ? CblasTrans : CblasNoTrans;
    const enum CBLAS_TRANSPOSE tb = g->trans_b ? CblasTrans : CblasNoTrans;

    int prev = fc__omp_threads_push(g->threads);
    set_threads(g->threads);
    blas_call call = {g, m, n, k, lda, ldb, ldc, ta, tb};
    bool small = g->m <= (FC__BLAS_SMALL - 1) / g->n / g->k; /* m*n*k < SMALL, no overflow */
    bool split = g->batch > 1 && g->threads > 1 && small;
#ifdef FUCINA_HAVE_OPENMP
    split = split && !omp_in_parallel();
#else
    split = false;
#endif
    if (split) {
#ifdef FUCINA_HAVE_OPENMP
        /* OpenBLAS runs a product this small on one thread (its own
         * threshold), so a serial batch would leave the team idle: give each
         * thread a static share of the products instead. Inside the team
         * OpenBLAS sees omp_in_parallel() and stays single-threaded. */
        int64_t nt = g->threads < g->batch ? g->threads : g->batch;
#pragma omp parallel num_threads((int)nt)
        {
            int64_t tid = omp_get_thread_num(), got = omp_get_num_threads();
            run_products(&call, g->batch * tid / got, g->batch * (tid + 1) / got);
        }
#endif
    } else {
        run_products(&call, 0, g->batch);
    }
    fc__omp_threads_pop(prev);
    return FC_OK;
}

/* OpenBLAS's DYNAMIC_ARCH build picks its kernels once, at load, from the
 * CPU or from OPENBLAS_CORETYPE, which a host may export (one Zen 5 host
 * here set Haswell), so the level in use does not say which kernels it
 * runs; its core name does. Names of OpenBLAS 0.3.x; an unknown one counts
 * as portable, which only keeps the dispatch on oneDNN. */
static int blas_kernel_level(void) {
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    static const char *const avx2[] = {"Haswell", "Zen", "Excavator"};
    const char *core = openblas_get_corename();
    if (!core) return FC__ISA_PORTABLE;
    for (size_t i = 0; i < sizeof avx512 / sizeof avx512[0]; i++)
        if (strcmp(core, avx512[i]) == 0) return FC__ISA_AVX512;
    for (size_t i = 0; i < sizeof avx2 / sizeof avx2[0]; i++)
        if (strcmp(core, avx2[i]) == 0) return FC__ISA_AVX2;
    return FC__ISA_PORTABLE;
}

const fc__matmul_provider fc__provider_blas = {
    .name = "blas",
    .id = FC_BACKEND_BLAS,
    .supports = blas_supports,
    .gemm = blas_gemm,
    .state_free = NULL,
    .state_entries = NULL,
    .kernel_level = blas_kernel_level,
};
