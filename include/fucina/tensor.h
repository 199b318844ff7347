/* fucina/tensor.h - the execution context and the tensor handle.
 *
 * Error model. Functions that produce a tensor return a new reference, or
 * NULL after recording a status code and a message in the context (the
 * FIRST error is kept until fc_ctx_clear_error). A NULL input makes an op
 * return NULL without touching the recorded error, so a forward pass can be
 * written as nested expressions and checked once. Every other fallible
 * function returns an fc_status.
 *
 * Ownership. "Returns a new reference": the caller owns it and drops it with
 * fc_release. "Borrows": the callee does not keep the handle past the call.
 * Inside fc_scope_begin/fc_scope_end every tensor created is also recorded
 * by the scope; fc_scope_end releases the ones still alive unless fc_keep
 * was called on them, so a training step needs no manual release.
 *
 * Threads. The contract, each claim tested in tests/reliability/
 * test_threads.c and run under ThreadSanitizer (scripts/tsan.sh):
 *  - An fc_ctx and everything made from it (tensor handles, scopes, the
 *    autograd tape, optimizers) belong to one thread at a time: two threads
 *    must never call into one context, or on its handles, at once. Handle
 *    refcounts are atomic, but the last fc_release returns the handle to its
 *    context. A context may move to another thread when the handover is
 *    synchronised (a join, a mutex).
 *  - Several contexts run concurrently on different threads, each with its
 *    own OpenMP team of fc_ctx_threads threads and its own matmul provider
 *    state; they may share one fc_allocator (whose functions must then be
 *    thread-safe, see fucina/alloc.h). Results do not depend on what other
 *    contexts do: same inputs, seed, thread count and provider give the
 *    same bits.
 *  - Data may be shared read-only: caller memory wrapped by several
 *    contexts with fc_tensor_from_borrowed(..., read_only = true) (in-place
 *    ops on it fail with FC_ERR_READ_ONLY), or a tensor's storage read by
 *    several threads while nobody writes it.
 *  - Storage refcounts are atomic, so the last reference to a buffer may go
 *    on any thread. Through this API storage crosses contexts only as
 *    borrowed caller memory (above) or a file mapping (below); where the
 *    library itself shares a pooled buffer with another context, its last
 *    release parks it in the owning context's pool under that pool's lock,
 *    and the owning context must outlive it.
 *  - A model-file handle (fucina/io.h) may be read by several threads at
 *    once, and the mappings behind zero-copy loads are refcounted
 *    atomically, so the handle may be closed while other threads still hold
 *    tensors loaded from it.
 */
#ifndef FUCINA_TENSOR_H
#define FUCINA_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fucina/alloc.h"
#include "fucina/dtype.h"
#include "fucina/export.h"
#include "fucina/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fc_ctx fc_ctx;
typedef struct fc_tensor fc_tensor;

#define FC_MAX_DIMS 8

/* Matmul providers (see fucina/matmul.h). */
typedef enum fc_backend {
    FC_BACKEND_AUTO,   /* FUCINA_BACKEND from the environment, else by dtype and size */
    FC_BACKEND_REF,    /* portable C, every float dtype */
    FC_BACKEND_BLAS,   /* OpenBLAS, f32 and f64 */
    FC_BACKEND_ONEDNN, /* oneDNN, f32, bf16, f16 */
    FC_BACKEND_COUNT
} fc_backend;

/* Context options; zero-initialise and set what you need:
 *   fc_ctx_opts o = {.threads = 2, .seed = 42}; */
typedef struct fc_ctx_opts {
    int threads;                   /* 0: every online core */
    fc_backend backend;            /* FC_BACKEND_AUTO by default */
    bool disable_pool;             /* true: every buffer goes back to the allocator */
    uint64_t seed;                 /* RNG seed */
    const fc_allocator *allocator; /* NULL: fc_default_allocator(); copied */
    bool check_finite;             /* ops fail with FC_ERR_NON_FINITE on NaN/inf */
} fc_ctx_opts;

/* Memory statistics of a context. */
typedef struct fc_ctx_stats {
    int64_t bytes_live;    /* bytes held by live tensors' buffers */
    int64_t bytes_peak;    /* high-water mark of bytes_live */
    int64_t pool_bytes;    /* bytes parked in the pool's free lists */
    uint64_t pool_hits;    /* buffer requests served from the pool */
    uint64_t pool_misses;  /* buffer requests that went to the allocator */
    uint64_t alloc_calls;  /* calls made to the allocator's alloc */
    uint64_t free_calls;   /* calls made to the allocator's free */
    int64_t tensors_live;  /* tensor handles not yet freed */
} fc_ctx_stats;

/* ---- context ------------------------------------------------------------- */

/* Creates a context (opts NULL: defaults). Returns NULL only when the
 * allocator fails or opts are invalid (threads < 0, backend out of range). */
FC_API fc_ctx *fc_ctx_new(const fc_ctx_opts *opts);
/* Frees the context and every tensor of it still alive (their handles
 * become invalid). NULL is a harmless no-op. */
FC_API void fc_ctx_free(fc_ctx *ctx);
/* FC_OK, or the first error recorded since the last clear. NULL ctx gives
 * FC_ERR_NULL_ARG. */
FC_API fc_status fc_ctx_status(const fc_ctx *ctx);
/* The first error's message ("add: shapes [2,3] and [4] do not broadcast"),
 * or "" when there is none. Owned by the context, valid until the next
 * clear. */
FC_API const char *fc_ctx_error(const fc_ctx *ctx);
FC_API void fc_ctx_clear_error(fc_ctx *ctx);
/* Records an error as an op would (useful in user-written composite ops).
 * Keeps an earlier error. Returns status. */
FC_API fc_status fc_ctx_fail(fc_ctx *ctx, fc_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
FC_API int fc_ctx_threads(const fc_ctx *ctx);
FC_API fc_status fc_ctx_set_threads(fc_ctx *ctx, int threads);
FC_API void fc_ctx_set_check_finite(fc_ctx *ctx, bool on);
FC_API void fc_ctx_seed(fc_ctx *ctx, uint64_t seed);
FC_API void fc_ctx_get_stats(const fc_ctx *ctx, fc_ctx_stats *out);
/* Returns every parked pool buffer to the allocator. */
FC_API void fc_ctx_pool_trim(fc_ctx *ctx);

/* RNG state, for checkpoints: (seed, offset) fully determine the stream. */
FC_API void fc_ctx_rng_get(const fc_ctx *ctx, uint64_t *seed, uint64_t *offset);
FC_API void fc_ctx_rng_set(fc_ctx *ctx, uint64_t seed, uint64_t offset);

/* ---- scopes -------------------------------------------------------------- */

/* Opens a scope (they nest). */
FC_API void fc_scope_begin(fc_ctx *ctx);
/* Releases the creation reference of every tensor made since the matching
 * fc_scope_begin that was not fc_keep'ed. Unbalanced calls are ignored. */
FC_API void fc_scope_end(fc_ctx *ctx);
/* Takes t out of its scope: the caller now owns that reference. Returns t
 * (NULL allowed). */
FC_API fc_tensor *fc_keep(fc_tensor *t);

/* ---- lifetime ------------------------------------------------------------ */

/* Adds a reference; returns t (NULL allowed). */
FC_API fc_tensor *fc_retain(fc_tensor *t);
/* Drops a reference; NULL is a harmless no-op. */
FC_API void fc_release(fc_tensor *t);
/* The context a tensor belongs to (NULL for NULL). */
FC_API fc_ctx *fc_tensor_ctx(const fc_tensor *t);

/* ---- creation (each returns a new reference, or NULL + ctx error) -------- */

FC_API fc_tensor *fc_empty(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank);
FC_API fc_tensor *fc_zeros(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank);
FC_API fc_tensor *fc_ones(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank);
/* value is cast with fc_cast_scalar's rules. Scalar dtypes only. */
FC_API fc_tensor *fc_full(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank,
                          double value);
/* A rank-1 {1} tensor holding value. */
FC_API fc_tensor *fc_scalar(fc_ctx *ctx, fc_dtype dtype, double value);
/* start, start+step, ... < stop (> stop for negative step); FC_ERR_INVALID_ARG
 * for step 0 or an empty range. */
FC_API fc_tensor *fc_arange(fc_ctx *ctx, fc_dtype dtype, double start, double stop, double step);
/* Copies storage bytes (numel * size for scalars, blocks for block dtypes). */
FC_API fc_tensor *fc_tensor_from_data(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank,
                                      const void *data);
/* Aliases caller memory, which must outlive every view of the tensor.
 * read_only: mutable access and in-place ops fail with FC_ERR_READ_ONLY. */
FC_API fc_tensor *fc_tensor_from_borrowed(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape,
                                          int rank, void *data, bool read_only);
/* Uniform [0, 1) and standard normal, float dtypes, from the context RNG
 * (counter-based: same seed, same values, whatever the thread count). */
FC_API fc_tensor *fc_rand(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank);
FC_API fc_tensor *fc_randn(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank);

/* ---- queries (NULL-safe: 0 / NULL / false for NULL) ------------------------ */

FC_API fc_dtype fc_tensor_dtype(const fc_tensor *t);
FC_API int fc_tensor_rank(const fc_tensor *t);
/* Borrowed pointer to rank dims, valid while t lives. */
FC_API const int64_t *fc_tensor_shape(const fc_tensor *t);
/* Dim of a (possibly negative) axis; 0 when out of range. */
FC_API int64_t fc_tensor_dim(const fc_tensor *t, int axis);
/* Strides and offset in storage elements (blocks for block dtypes). */
FC_API const int64_t *fc_tensor_strides(const fc_tensor *t);
FC_API int64_t fc_tensor_offset(const fc_tensor *t);
FC_API int64_t fc_tensor_numel(const fc_tensor *t);
/* Bytes of the logical contents when materialised. */
FC_API size_t fc_tensor_nbytes(const fc_tensor *t);
FC_API bool fc_tensor_is_contiguous(const fc_tensor *t);
/* Storage mutation generation (bumped by every mutable access). */
FC_API uint32_t fc_tensor_generation(const fc_tensor *t);

/* ---- data access ------------------------------------------------------------ */

/* Read-only pointer to the first element; NULL + FC_ERR_UNSUPPORTED_VIEW in
 * the context when t is not contiguous (use fc_contiguous first). */
FC_API const void *fc_tensor_data(const fc_tensor *t);
/* Mutable pointer; bumps the storage generation (so autograd can tell that a
 * saved value changed). NULL + FC_ERR_READ_ONLY for read-only storage. */
FC_API void *fc_tensor_data_mut(fc_tensor *t);
/* Copies the logical contents (any layout) into dst of exactly
 * fc_tensor_nbytes(t) bytes. */
FC_API fc_status fc_tensor_copy_to(const fc_tensor *t, void *dst, size_t nbytes);
/* The single element of a one-element tensor, as double. */
FC_API fc_status fc_tensor_item(const fc_tensor *t, double *out);
/* Element at a full index, as double (scalar dtypes). */
FC_API fc_status fc_tensor_get(const fc_tensor *t, const int64_t *index, double *out);

/* ---- conversion and materialisation ------------------------------------------- */

/* Cast to dtype. Returns a new reference: a new tensor, or, when dtype is
 * already t's, a new handle sharing t's storage. Every pair of non-block
 * dtypes; block -> f32 dequantizes and f32 -> block quantizes. Float ->
 * float casts are differentiable (the gradient is cast back); casts to
 * integers cut the graph. */
FC_API fc_tensor *fc_to(fc_ctx *ctx, fc_tensor *t, fc_dtype dtype);
/* A new handle sharing t's storage when t is contiguous, else a contiguous
 * copy. Differentiable (identity gradient), like fc_clone. */
FC_API fc_tensor *fc_contiguous(fc_ctx *ctx, fc_tensor *t);
/* A fresh contiguous copy, never sharing storage. */
FC_API fc_tensor *fc_clone(fc_ctx *ctx, fc_tensor *t);
/* Copies src into dst in place (same shape and dtype; dst may be a view,
 * but not a broadcast one: FC_ERR_UNSUPPORTED_VIEW). A mutation of dst;
 * not recorded by autograd, so a dst that requires grad is refused with
 * FC_ERR_INVALID_ARG unless grad mode is off (fc_no_grad_begin). */
FC_API fc_status fc_copy_(fc_tensor *dst, const fc_tensor *src);
/* Writes "f32[2,3]" into buf; returns buf. */
FC_API const char *fc_tensor_describe(const fc_tensor *t, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_TENSOR_H */
