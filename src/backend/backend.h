/* SPDX-License-Identifier: MIT */
/* backend.h - the matmul providers behind one small table of function
 * pointers, and the GEMM description they all accept.
 *
 * The op layer (src/exec/kernels/matmul.c) turns tensors into an fc__gemm on
 * raw pointers and never knows which provider ran. Every provider computes
 * the same thing:
 *
 *     for b in [0, batch):   C_b (m x n)  =  [C_b +] A_b (m x k) . B_b (k x n)
 *
 * with row-major element addressing (BLAS's CblasRowMajor convention):
 *     A_b(i,p) = a[b*stride_a + i*lda + p]      (trans_a: a[b*stride_a + p*lda + i])
 *     B_b(p,j) = b[b*stride_b + p*ldb + j]      (trans_b: b[b*stride_b + j*ldb + p])
 *     C_b(i,j) = c[b*stride_c + i*ldc + j]
 * so a transposed or row-narrowed view reaches BLAS as a flag and a leading
 * dimension instead of a copy. A batch stride of 0 shares that operand across
 * the batch (NumPy broadcasting of one batch axis).
 *
 * Numerics (seed 000 section 8.3): A, B and C share one dtype. f16, bf16 and
 * f32 accumulate in f32 and C is written in the input dtype, rounded once;
 * f64 accumulates in f64. For a fixed provider, shape, layout and thread
 * count the result bits are the same on every run.
 *
 * Threads: g->threads is the context's count and it holds for every library
 * underneath (OpenBLAS's OpenMP build and oneDNN's OpenMP runtime follow the
 * calling thread's OpenMP setting, which the providers set for the call and
 * restore afterwards).
 *
 * Invariants the providers rely on are checked once by fc__gemm_validate
 * (fc__gemm_run calls it), so provider code does not re-check its input. */
#ifndef FUCINA_BACKEND_BACKEND_H
#define FUCINA_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fucina/alloc.h"
#include "fucina/dtype.h"
#include "fucina/status.h"
#include "fucina/tensor.h"

/* Per-context provider state (the oneDNN primitive cache). Owned by the
 * context; one thread uses it at a time, like the context itself. */
typedef struct fc__backend_cache fc__backend_cache;

typedef struct fc__gemm {
    fc_dtype dtype;  /* of A, B and C: FC_F16, FC_BF16, FC_F32 or FC_F64 */
    int64_t m, n, k; /* every one >= 1 */
    const void *a;   /* m x k (logical), see the addressing above */
    int64_t lda;     /* >= k, or >= m when trans_a */
    bool trans_a;
    const void *b; /* k x n (logical) */
    int64_t ldb;   /* >= n, or >= k when trans_b */
    bool trans_b;
    void *c;                   /* m x n, never overlapping A or B */
    int64_t ldc;               /* >= n */
    bool accumulate;           /* C += A.B instead of C = A.B */
    int64_t batch;             /* number of products, >= 1 */
    int64_t stride_a;          /* elements between consecutive A_b; 0: one A for all */
    int64_t stride_b;          /* same for B */
    int64_t stride_c;          /* same for C; nonzero when batch > 1 (the C_b never overlap) */
    int threads;               /* >= 1: the context's thread count */
    const fc_allocator *alloc; /* workspaces; NULL: the default allocator */
    fc__backend_cache *cache;  /* NULL allowed: providers then cache nothing */
} fc__gemm;

/* One provider. supports() answers for this build and this CPU (a dtype the
 * provider's library implements only on some CPUs is probed, once); gemm()
 * may assume fc__gemm_validate passed and supports(g->dtype) is true. On
 * failure gemm() writes a message into err (errcap bytes, NUL-terminated)
 * and returns the code, leaving C unspecified. */
typedef struct fc__matmul_provider {
    const char *name; /* "ref", "blas", "onednn", "widen" */
    fc_backend id;
    bool (*supports)(fc_dtype dtype);
    /* For a dtype the provider runs on some CPUs but not this one: the
     * feature it needs, as static text for messages; NULL otherwise (and
     * a NULL hook: the provider's dtypes do not depend on the CPU). */
    const char *(*requirement)(fc_dtype dtype);
    fc_status (*gemm)(const fc__gemm *g, char *err, size_t errcap);
    /* Frees the provider's slot of a backend cache (NULL: keeps no state). */
    void (*state_free)(void *state, const fc_allocator *alloc);
    /* Entries cached in that state (NULL: keeps no state). */
    int (*state_entries)(const void *state);
    /* The SIMD level (an fc__isa of core/cpu.h) of the kernels the library
     * loaded, where that is the library's own choice rather than the level
     * in use (NULL: the provider follows the level in use). */
    int (*kernel_level)(void);
} fc__matmul_provider;

/* The provider with this id when it was built, else NULL (also for
 * FC_BACKEND_AUTO and out-of-range values). */
const fc__matmul_provider *fc__backend_get(fc_backend id);

/* "auto", "ref", "blas", "onednn"; "invalid" out of range. Static storage. */
const char *fc__backend_name(fc_backend id);
/* Inverse of fc__backend_name (case-sensitive); FC_ERR_INVALID_ARG for an
 * unknown name, FC_ERR_NULL_ARG for NULL pointers. */
fc_status fc__backend_from_name(const char *name, fc_backend *out);

/* Picks the provider for one product. An explicit request must name a
 * provider that was built (FC_ERR_BACKEND, with the way to build it) and
 * that supports dtype (FC_ERR_BACKEND, naming the dtypes it takes).
 * A provider that has the dtype on other CPUs only (oneDNN's bf16 without
 * AVX-512) is FC_ERR_BACKEND naming the feature it needs.
 * FC_BACKEND_AUTO reads FUCINA_BACKEND (once per process) and treats a
 * value there as an explicit request (an unknown value is FC_ERR_BACKEND);
 * without it the choice never fails for a supported dtype:
 *  - tiny products (m*n*k at most FC__GEMM_TINY: not worth a primitive or
 *    a conversion): blas for f32/f64 when built, else ref;
 *  - f32: fc__backend_f32_inner (by level and size);
 *  - f64: blas when built, else ref;
 *  - bf16, f16: onednn where it runs the dtype natively, else the widen
 *    adapter over fc__backend_f32_inner's provider, else ref.
 * A dtype that is not f16/bf16/f32/f64 gives
 * FC_ERR_DTYPE, a backend value out of range FC_ERR_INVALID_ARG, a size
 * below 1 FC_ERR_INVALID_SHAPE. Messages start with "matmul: ". */
#define FC__GEMM_TINY 4096

/* Primitives the oneDNN provider keeps per context (least recently used
 * evicted): a GPT training step uses about 25 distinct product shapes. */
#define FC__DNNL_CACHE 64
fc_status fc__backend_resolve(fc_backend requested, fc_dtype dtype, int64_t m, int64_t n, int64_t k,
                              const fc__matmul_provider **out, char *err, size_t errcap);

/* The f32 provider for an m x n x k product that is not tiny, chosen by the
 * SIMD level in use (core/cpu.h): on AVX2 and AVX-512 oneDNN up to
 * FC__GEMM_DNNL_MAX multiply-adds and OpenBLAS above, except that AVX-512
 * keeps oneDNN when OpenBLAS's loaded kernels are below AVX-512 (its core
 * type can be pinned by OPENBLAS_CORETYPE); OpenBLAS below AVX2 (see
 * dispatch.c for the measurements); the other when only one was built;
 * NULL when neither was. Sizes must be >= 1. */
#define FC__GEMM_DNNL_MAX ((int64_t)1 << 30) /* a 1024 x 1024 x 1024 product */
const fc__matmul_provider *fc__backend_f32_inner(int64_t m, int64_t n, int64_t k);

/* g (f16 or bf16, validated) through inner's f32 kernel: A and B widened
 * into dense f32 panels in the call's workspace, C rounded once (the old C
 * added in f32 first when accumulating). inner must take f32 without a
 * workspace of its own (OpenBLAS, oneDNN). The widen provider's gemm, and
 * oneDNN's route for a 16-bit shape its library refuses. */
fc_status fc__gemm_widened(const fc__matmul_provider *inner, const fc__gemm *g, char *err,
                           size_t errcap);

/* FC_OK when id names a provider of this build (FC_BACKEND_AUTO always
 * does); FC_ERR_INVALID_ARG out of range; FC_ERR_BACKEND with "backend
 * 'onednn' was not built (install ...)" in err otherwise. */
fc_status fc__backend_check_built(fc_backend id, char *err, size_t errcap);

/* What a request means before any shape is known: requested itself, or for
 * FC_BACKEND_AUTO the provider FUCINA_BACKEND names (FC_BACKEND_AUTO when
 * it is unset or invalid: resolving reports the invalid value). */
fc_backend fc__backend_requested(fc_backend requested);

/* Forgets the cached FUCINA_BACKEND value so the next AUTO resolve reads the
 * environment again (tests; not thread-safe against concurrent resolves). */
void fc__backend_env_refresh(void);

/* FC_ERR_NULL_ARG for NULL pointers, FC_ERR_DTYPE for a dtype other than
 * f16/bf16/f32/f64, FC_ERR_INVALID_SHAPE for m, n, k or batch < 1,
 * FC_ERR_INVALID_ARG for a leading dimension below its minimum, a negative
 * batch stride, stride_c == 0 with batch > 1, or threads < 1. */
fc_status fc__gemm_validate(const fc__gemm *g, char *err, size_t errcap);
/* Validates g, checks p supports its dtype, then runs p->gemm. */
fc_status fc__gemm_run(const fc__matmul_provider *p, const fc__gemm *g, char *err, size_t errcap);

/* Creates an empty cache whose allocations use alloc (NULL: default; the
 * allocator is copied). Returns NULL when out of memory. */
fc__backend_cache *fc__backend_cache_new(const fc_allocator *alloc);
/* Frees every provider's state and the cache. NULL is a harmless no-op. */
void fc__backend_cache_free(fc__backend_cache *cache);
/* The provider slot of a cache, for that provider's own use (NULL cache:
 * NULL). Providers create their state lazily and store it here. */
void **fc__backend_cache_slot(fc__backend_cache *cache, fc_backend id);
const fc_allocator *fc__backend_cache_allocator(const fc__backend_cache *cache);
/* Workspace for one provider call: the cache's grow-only scratch buffer
 * when g->cache is set (so a steady stream of products allocates nothing;
 * it lives until the cache is freed), else a private allocation from
 * g->alloc. 64-byte aligned; NULL when out of memory. Release it with
 * fc__gemm_workspace_done (a no-op for the scratch buffer). Providers take
 * one workspace per call and never nest them. */
void *fc__gemm_workspace(const fc__gemm *g, size_t nbytes);
void fc__gemm_workspace_done(const fc__gemm *g, void *p, size_t nbytes);
/* The grow-only scratch buffer of cache (non-NULL) itself, at least nbytes
 * (64-byte aligned; NULL when out of memory; nothing to release). */
void *fc__backend_workspace(fc__backend_cache *cache, size_t nbytes);
/* The slot of cache (NULL: NULL) where the convolution primitives
 * (backend/conv.h) keep their state, which state_free frees with the cache. */
void **fc__backend_cache_conv_slot(fc__backend_cache *cache,
                                   void (*state_free)(void *state, const fc_allocator *alloc));

/* Entries held for provider id (0 for NULL, a provider without state, or
 * one not built): lets tests see that a repeated call reuses its primitive. */
int fc__backend_cache_entries(const fc__backend_cache *cache, fc_backend id);

/* Sets the calling thread's OpenMP thread count for a provider call and
 * returns the previous one (1 without OpenMP); restore with the value. */
int fc__omp_threads_push(int threads);
void fc__omp_threads_pop(int previous);

/* The providers themselves (defined only when built). widen is not a
 * backend a user can name: it runs f16/bf16 products through
 * fc__backend_f32_inner's provider on dense f32 panels (widen_gemm.c). */
extern const fc__matmul_provider fc__provider_ref;
extern const fc__matmul_provider fc__provider_widen;
#ifdef FUCINA_HAVE_OPENBLAS
extern const fc__matmul_provider fc__provider_blas;
#endif
#ifdef FUCINA_HAVE_ONEDNN
extern const fc__matmul_provider fc__provider_onednn;
/* Applies FUCINA_ISA's cap to oneDNN (once per process; oneDNN's own
 * ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA win). Call before creating an
 * engine, so no oneDNN kernel of this process runs above the cap. */
void fc__onednn_cap_isa(void);
#endif

#endif /* FUCINA_BACKEND_BACKEND_H */
