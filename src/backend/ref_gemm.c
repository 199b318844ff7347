/* SPDX-License-Identifier: MIT */
/* ref_gemm.c - the portable reference provider: every float dtype, any
 * leading dimension, transposes and broadcast batches, in plain C11.
 *
 * It is the twin every fast provider is tested against, and the fallback
 * when no library was built, so it is cache-blocked (see
 * ref_gemm_kernel.h) rather than a triple loop: a 1024^3 product in seconds
 * would make it useless as a fallback. f16 and bf16 are widened to f32 while
 * packing and accumulate in f32; f64 accumulates in f64.
 *
 * Threads: tiles of C are split statically over at most g->threads OpenMP
 * threads; a tile's sum order does not depend on which thread runs it, so
 * the result bits do not depend on the thread count either. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "core/buffer.h"
#include "core/convert.h"

#ifdef FUCINA_HAVE_OPENMP
#include <omp.h>
#endif

/* One input operand: element (r, c) is at base + (r*rs + c*cs) * esize. */
typedef struct ref_operand {
    const char *base;
    int64_t rs, cs;
    size_t esize;
    fc_dtype dtype;
} ref_operand;

typedef struct ref_out {
    char *base;
    int64_t ld;
    size_t esize;
    fc_dtype dtype;
    bool accumulate;
} ref_out;

typedef struct ref_job {
    const fc__gemm *g;
    ref_operand a, b;
    ref_out c;
    int64_t tiles_m, tiles_n;
    int64_t ws_m, ws_n, ws_k; /* per-thread workspace geometry (see plan) */
} ref_job;

/* An OpenMP simd loop when OpenMP is on (a plain loop otherwise, which
 * compilers still vectorise, less well). */
#ifdef FUCINA_HAVE_OPENMP
#define REF_SIMD _Pragma("omp simd")
/* The simd request is a performance hint: under -fsanitize=undefined Clang
 * cannot honour it (every multiply carries a check) and says so; that is
 * expected in sanitizer builds, not a defect. */
#ifdef __clang__
#pragma clang diagnostic ignored "-Wpass-failed"
#endif
#else
#define REF_SIMD
#endif

/* Run-time ISA choice for the micro-kernel (GCC >= 6, Clang >= 14, x86-64
 * ELF). No -march flag is ever needed: the loader picks the copy.
 * Not under ThreadSanitizer: it instruments the ifunc resolver that
 * target_clones generates, and the loader runs resolvers before the TSan
 * runtime is up, so the process would die at startup. */
#if defined(__SANITIZE_THREAD__)
#define REF_NO_CLONES 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define REF_NO_CLONES 1
#endif
#endif
#if defined(__x86_64__) && defined(__ELF__) && defined(__has_attribute) && !defined(REF_NO_CLONES)
#if __has_attribute(target_clones)
#define REF_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef REF_CLONES
#define REF_CLONES
#endif

/* Micro-tiles sized for AVX-512 (6 x 2 vectors of accumulators); the SSE2
 * and AVX2 copies keep part of acc in L1, which costs them little. */
/* Elements per stack chunk when converting 16-bit runs. */
#define REF_CHUNK 256

#define REF_T float
#define REF_WIDE 0
#define REF_FN(x) x##_f32
#define REF_MR 6
#define REF_NR 32
#define REF_MC 96
#define REF_KC 256
#define REF_NC 256
#include "backend/ref_gemm_kernel.h"
#undef REF_T
#undef REF_WIDE
#undef REF_FN
#undef REF_MR
#undef REF_NR
#undef REF_MC
#undef REF_KC
#undef REF_NC

#define REF_T double
#define REF_WIDE 1
#define REF_FN(x) x##_f64
#define REF_MR 6
#define REF_NR 16
#define REF_MC 96
#define REF_KC 256
#define REF_NC 128
#include "backend/ref_gemm_kernel.h"
#undef REF_T
#undef REF_WIDE
#undef REF_FN
#undef REF_MR
#undef REF_NR
#undef REF_MC
#undef REF_KC
#undef REF_NC

static bool ref_supports(fc_dtype dt) {
    return dt == FC_F16 || dt == FC_BF16 || dt == FC_F32 || dt == FC_F64;
}

static fc_status ref_gemm(const fc__gemm *g, char *err, size_t errcap) {
    bool wide = g->dtype == FC_F64;
    size_t es = fc_dtype_size(g->dtype);
    ref_job job = {
        .g = g,
        .a = {g->a, g->trans_a ? 1 : g->lda, g->trans_a ? g->lda : 1, es, g->dtype},
        .b = {g->b, g->trans_b ? 1 : g->ldb, g->trans_b ? g->ldb : 1, es, g->dtype},
        .c = {g->c, g->ldc, es, g->dtype, g->accumulate},
    };
    int64_t ws_elems = wide ? plan_f64(&job) : plan_f32(&job);
    int64_t tiles = g->batch * job.tiles_m * job.tiles_n;

    int64_t nt = g->threads < tiles ? g->threads : tiles;
#ifdef FUCINA_HAVE_OPENMP
    if (omp_in_parallel()) nt = 1;
#else
    nt = 1;
#endif
    size_t ws_bytes = (size_t)ws_elems * (wide ? sizeof(double) : sizeof(float));
    ws_bytes = (ws_bytes + 63) / 64 * 64; /* each thread's slice 64-byte aligned */
    char *ws = fc__gemm_workspace(g, (size_t)nt * ws_bytes);
    if (!ws) {
        snprintf(err, errcap, "gemm(ref): out of memory for %lld bytes of workspace",
                 (long long)nt * (long long)ws_bytes);
        return FC_ERR_OOM;
    }
    if (nt == 1) {
        if (wide)
            run_f64(&job, 0, tiles, ws);
        else
            run_f32(&job, 0, tiles, ws);
    } else {
#ifdef FUCINA_HAVE_OPENMP
#pragma omp parallel num_threads((int)nt)
        {
            int64_t tid = omp_get_thread_num(), got = omp_get_num_threads();
            int64_t b = tiles * tid / got, e = tiles * (tid + 1) / got;
            void *mine = ws + (size_t)tid * ws_bytes;
            if (wide)
                run_f64(&job, b, e, mine);
            else
                run_f32(&job, b, e, mine);
        }
#endif
    }
    fc__gemm_workspace_done(g, ws, (size_t)nt * ws_bytes);
    return FC_OK;
}

const fc__matmul_provider fc__provider_ref = {
    .name = "ref",
    .id = FC_BACKEND_REF,
    .supports = ref_supports,
    .gemm = ref_gemm,
    .state_free = NULL,
    .state_entries = NULL,
};
