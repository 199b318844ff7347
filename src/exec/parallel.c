/* SPDX-License-Identifier: MIT */
/* parallel.c - the thread team. OpenMP with the context's thread count;
 * kernels get a [begin, end) slice and never create threads. Reductions
 * use fixed-size chunks so their partial sums, combined in index order, are
 * the same bits for any thread count and any schedule. */
#include "exec/parallel.h"

#ifdef FUCINA_HAVE_OPENMP
#include <omp.h>
#endif

void fc__parallel_for(fc_ctx *ctx, int64_t n, int64_t grain, fc__range_fn fn, void *arg) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t nt = ctx ? ctx->threads : 1;
    if (nt > (n + grain - 1) / grain) nt = (n + grain - 1) / grain;
#ifdef FUCINA_HAVE_OPENMP
    /* Nested parallelism (an op called from inside another team) runs inline. */
    if (nt > 1 && !omp_in_parallel()) {
#pragma omp parallel num_threads((int)nt)
        {
            int64_t tid = omp_get_thread_num(), got = omp_get_num_threads();
            int64_t b = n * tid / got, e = n * (tid + 1) / got;
            if (b < e) fn(arg, b, e);
        }
        return;
    }
#endif
    fn(arg, 0, n);
}

int64_t fc__chunk_count(int64_t n, int64_t chunk) { return n <= 0 ? 0 : (n + chunk - 1) / chunk; }

typedef struct chunk_job {
    fc__chunk_fn fn;
    void *arg;
    int64_t n, chunk;
} chunk_job;

static void run_chunks(void *p, int64_t b, int64_t e) {
    chunk_job *j = p;
    for (int64_t c = b; c < e; c++) {
        int64_t lo = c * j->chunk, hi = lo + j->chunk < j->n ? lo + j->chunk : j->n;
        j->fn(j->arg, c, lo, hi);
    }
}

void fc__parallel_chunks(fc_ctx *ctx, int64_t n, int64_t chunk, fc__chunk_fn fn, void *arg) {
    if (chunk < 1) chunk = 1;
    chunk_job j = {fn, arg, n, chunk};
    fc__parallel_for(ctx, fc__chunk_count(n, chunk), 1, run_chunks, &j);
}
