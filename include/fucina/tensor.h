/* SPDX-License-Identifier: MIT */
/* fucina/tensor.h - the execution context and the tensor handle.
 *
 * Error model. Functions that produce a tensor return a new reference, or
 * NULL after recording a status code and a message in the context (the
 * FIRST error is kept until fc_ctx_clear_error). A NULL input makes an op
 * return NULL and record FC_ERR_NULL_ARG, which an earlier error takes
 * precedence over, so a forward pass can be written as nested expressions
 * and checked once. A NULL ctx makes a tensor-producing call return NULL and
 * record nothing. Every other fallible function returns an fc_status.
 *
 * Ownership. "Returns a new reference": the caller owns it and drops it with
 * fc_release. "Borrows": the callee does not keep the handle past the call
 * (unless it says it retains it). "Steals": the callee takes over the
 * caller's reference. "NULL allowed": the argument may be NULL.
 *
 * Shapes. Every tensor has 1 to FC_MAX_RANK axes, each of size >= 1: there
 * are no rank-0 and no empty tensors. A scalar is a one-element tensor such
 * as shape [1] (fc_scalar, fc_tensor_item); reductions over every axis give
 * shape [1] (without keepdim).
 * Inside fc_scope_begin/fc_scope_end every tensor created is also recorded
 * by the scope; fc_scope_end releases the ones still alive unless fc_keep
 * was called on them, so a training step needs no manual release.
 *
 * Contexts. A tensor belongs to the context that made it: its storage,
 * gradient and tape node live there, and that context may be freed before
 * another. So tensors of two contexts never meet in one call: every op,
 * fc_backward / fc_backward_with, the optimizers, fc_clip_grad_norm, the
 * checkpoint and save functions refuse a tensor of another context with
 * FC_ERR_CONTEXT (recorded in the calling context, naming the function and
 * the argument), and the in-place ops refuse an operand from a context
 * other than the destination's. The one exception is fc_copy_, which only
 * copies values and links nothing: it is how data moves between contexts.
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
#include "fucina/backend.h"
#include "fucina/dtype.h"
#include "fucina/export.h"
#include "fucina/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The execution context (see above). */
typedef struct fc_ctx fc_ctx;
/* A tensor handle, one reference to a tensor of one context (see above). */
typedef struct fc_tensor fc_tensor;

/* The most axes a tensor has (ranks are 1..FC_MAX_RANK). */
#define FC_MAX_RANK 8

/* Context options; zero-initialise and set what you need:
 *   fc_ctx_opts o = {.threads = 2, .seed = 42}; */
typedef struct fc_ctx_opts {
    int threads;                   /* 0: every online core */
    fc_backend backend;            /* FC_BACKEND_AUTO by default */
    bool disable_pool;             /* true: every buffer goes back to the allocator */
    uint64_t seed;                 /* RNG seed */
    const fc_allocator *allocator; /* NULL: fc_default_allocator(); copied */
    bool check_finite;             /* ops, backward and optimizer steps fail with
                                    * FC_ERR_NON_FINITE on NaN/inf (fucina/autograd.h,
                                    * fucina/optim.h) */
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

/* Creates a context (opts NULL allowed: defaults). Returns the new context,
 * to be freed with fc_ctx_free, or NULL only when the allocator fails or opts
 * are invalid (threads < 0, backend out of range, an allocator whose alloc or
 * free is NULL). */
FC_API fc_ctx *fc_ctx_new(const fc_ctx_opts *opts);
/* Frees the context and every tensor of it still alive (their handles
 * become invalid). NULL is a harmless no-op. */
FC_API void fc_ctx_free(fc_ctx *ctx);
/* FC_OK, or the first error recorded since the last clear. NULL ctx gives
 * FC_ERR_NULL_ARG. */
FC_API fc_status fc_ctx_status(const fc_ctx *ctx);
/* The first error's message ("add: shapes [2,3] and [4] do not broadcast"),
 * or "" when there is none. Owned by the context, valid until the next
 * clear. Never NULL: a NULL ctx gives a static message saying so. */
FC_API const char *fc_ctx_error(const fc_ctx *ctx);
/* Forgets the recorded error: the status is FC_OK and the message "" again.
 * NULL is a harmless no-op. */
FC_API void fc_ctx_clear_error(fc_ctx *ctx);
/* Records an error as an op would (useful in user-written composite ops):
 * status and the printf-formatted message (fmt NULL allowed: ""). Keeps an
 * earlier error; records nothing for FC_OK or a NULL ctx. Returns status. */
FC_API fc_status fc_ctx_fail(fc_ctx *ctx, fc_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The number of threads ops of ctx use (>= 1); 0 for NULL. */
FC_API int fc_ctx_threads(const fc_ctx *ctx);
/* Sets that number; 0 means every online core. Returns FC_OK,
 * FC_ERR_NULL_ARG for a NULL ctx, or FC_ERR_INVALID_ARG (also recorded in
 * ctx) for threads < 0, leaving the setting unchanged. */
FC_API fc_status fc_ctx_set_threads(fc_ctx *ctx, int threads);
/* Turns check_finite mode on or off (see fc_ctx_opts). NULL: no-op. */
FC_API void fc_ctx_set_check_finite(fc_ctx *ctx, bool on);
/* Restarts the context RNG: stream seed, offset 0. NULL: no-op. */
FC_API void fc_ctx_set_seed(fc_ctx *ctx, uint64_t seed);
/* Fills *out with ctx's memory statistics; a NULL ctx or out is a no-op. */
FC_API void fc_ctx_get_stats(const fc_ctx *ctx, fc_ctx_stats *out);
/* Returns every parked pool buffer to the allocator. NULL: no-op. */
FC_API void fc_ctx_pool_trim(fc_ctx *ctx);

/* RNG state, for checkpoints: (seed, offset) fully determine the stream;
 * fc_rand and fc_randn advance offset by the numel they draw, and fc_dropout
 * (training, p > 0) advances it too. rng_get: seed and offset NULL allowed
 * (not written). A NULL ctx is a no-op for both. */
FC_API void fc_ctx_get_rng(const fc_ctx *ctx, uint64_t *seed, uint64_t *offset);
FC_API void fc_ctx_set_rng(fc_ctx *ctx, uint64_t seed, uint64_t offset);

/* ---- scopes -------------------------------------------------------------- */

/* Opens a scope (they nest, 256 deep; a deeper level records FC_ERR_STATE
 * once and its tensors belong to the enclosing scope). NULL: no-op. */
FC_API void fc_scope_begin(fc_ctx *ctx);
/* Releases the creation reference of every tensor made since the matching
 * fc_scope_begin that was not fc_keep'ed. Unbalanced calls and NULL are
 * ignored. */
FC_API void fc_scope_end(fc_ctx *ctx);
/* Takes t out of its scope: the caller now owns that reference. Returns t
 * (NULL allowed). */
FC_API fc_tensor *fc_keep(fc_tensor *t);

/* ---- lifetime ------------------------------------------------------------ */

/* Adds a reference; returns t (NULL allowed: returns NULL). A handle
 * already released is refused as fc_release refuses it (below): NULL is
 * returned and FC_ERR_STATE recorded, with no reference added. */
FC_API fc_tensor *fc_retain(fc_tensor *t);
/* Drops a reference; the last one destroys the tensor and kills the handle.
 * NULL is a harmless no-op.
 *
 * Released handles. Using a handle after its last reference is gone is a
 * caller bug; the library catches the common one, the double release:
 *  - Always detected: fc_release or fc_retain of a dead handle while fewer
 *    than 64 other handles of its context were released after it. The call
 *    does nothing else: it records FC_ERR_STATE in the handle's context
 *    ("fc_release: handle 0x... already released ..."), and no tensor is
 *    touched. A dead header is not handed out again before at least 64
 *    later releases (a FIFO quarantine), so a stale pointer cannot alias a
 *    new tensor inside that window.
 *  - Not detected: a stale handle used after its header was reused (past
 *    that window, it names whichever tensor occupies it now), after
 *    fc_ctx_free, or passed to any function but these two.
 *  - With the environment variable FUCINA_NO_HANDLE_REUSE set (not "0")
 *    when a context is created, its headers are never reused: each goes
 *    back to the allocator when its handle dies (steady loops then allocate
 *    one header per tensor).
 *    In a build with AddressSanitizer (FUCINA_SANITIZE=address) every later
 *    use of a dead handle, a release included, is then reported by the
 *    sanitizer as a use after free; without a sanitizer that use is
 *    undefined. */
FC_API void fc_release(fc_tensor *t);
/* The context a tensor belongs to (NULL for NULL). */
FC_API fc_ctx *fc_tensor_ctx(const fc_tensor *t);

/* ---- creation (each returns a new reference, or NULL + ctx error) --------
 * A new contiguous tensor of shape[0..rank). Errors: FC_ERR_DTYPE for an
 * invalid dtype; FC_ERR_NULL_ARG for a NULL shape; FC_ERR_RANK for rank
 * outside 1..FC_MAX_RANK; FC_ERR_INVALID_SHAPE for a dim < 1 or, for a block
 * dtype, a last dim that is not a multiple of its block size;
 * FC_ERR_OVERFLOW when the element or byte count does not fit; FC_ERR_OOM. */

/* Contents unspecified. Every dtype, block dtypes included (as storage). */
FC_API fc_tensor *fc_empty(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank);
/* fc_zeros, fc_ones, fc_full and fc_scalar take scalar dtypes only:
 * FC_ERR_DTYPE for a block dtype. */
FC_API fc_tensor *fc_zeros(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank);
FC_API fc_tensor *fc_ones(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank);
/* value is cast with fc_cast_scalar's rules. */
FC_API fc_tensor *fc_full(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank,
                          double value);
/* A rank-1 {1} tensor holding value. */
FC_API fc_tensor *fc_scalar(fc_ctx *ctx, fc_dtype dtype, double value);
/* Rank 1: start, start+step, ... < stop (> stop for negative step), each
 * converted to dtype. FC_ERR_INVALID_ARG for step 0 or a non-finite
 * argument, FC_ERR_EMPTY_SELECTION for an empty range, FC_ERR_OVERFLOW for
 * too many elements, FC_ERR_DTYPE for bool, f8 and block dtypes. */
FC_API fc_tensor *fc_arange(fc_ctx *ctx, fc_dtype dtype, double start, double stop, double step);
/* Copies fc_tensor_nbytes bytes of storage from data (borrowed; numel *
 * size for scalars, whole blocks for block dtypes). FC_BOOL: a bool is one
 * byte, 0 false and 1 true; any nonzero byte of data is stored as 1.
 * FC_ERR_NULL_ARG for NULL data. */
FC_API fc_tensor *fc_tensor_from_data(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank,
                                      const void *data);
/* Aliases caller memory (contiguous, row-major), which must outlive every
 * view of the tensor; the library never frees it. read_only: mutable access
 * and in-place ops fail with FC_ERR_READ_ONLY. FC_ERR_NULL_ARG for NULL
 * data. FC_BOOL memory is read once here and must hold only 0 and 1 bytes
 * (FC_ERR_INVALID_ARG naming the first other byte and its index: caller
 * memory is not rewritten; fc_tensor_from_data normalises a copy). */
FC_API fc_tensor *fc_tensor_from_borrowed(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape,
                                          int rank, void *data, bool read_only);
/* Uniform [0, 1) and standard normal, from the context RNG (counter-based:
 * same seed, same values, whatever the thread count). f16, bf16, f32 and f64
 * only: FC_ERR_DTYPE otherwise. */
FC_API fc_tensor *fc_rand(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank);
FC_API fc_tensor *fc_randn(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank);

/* ---- queries (NULL-safe: 0 / NULL / false for NULL) ------------------------ */

/* The dtype; FC_DTYPE_COUNT (not a valid dtype) for NULL. */
FC_API fc_dtype fc_tensor_dtype(const fc_tensor *t);
/* 1..FC_MAX_RANK; 0 only for NULL. */
FC_API int fc_tensor_rank(const fc_tensor *t);
/* Borrowed pointer to rank dims, valid while t lives. */
FC_API const int64_t *fc_tensor_shape(const fc_tensor *t);
/* Dim of a (possibly negative) axis; 0 when out of range or t is NULL. */
FC_API int64_t fc_tensor_dim(const fc_tensor *t, int axis);
/* Strides (rank entries, borrowed like the shape) and offset in storage
 * elements (blocks for block dtypes). */
FC_API const int64_t *fc_tensor_strides(const fc_tensor *t);
FC_API int64_t fc_tensor_offset(const fc_tensor *t);
FC_API int64_t fc_tensor_numel(const fc_tensor *t);
/* Bytes of the logical contents when materialised: numel * size for scalar
 * dtypes, whole blocks for block dtypes. */
FC_API size_t fc_tensor_nbytes(const fc_tensor *t);
FC_API bool fc_tensor_is_contiguous(const fc_tensor *t);
/* Storage mutation generation (bumped by every mutable access). */
FC_API uint32_t fc_tensor_generation(const fc_tensor *t);

/* ---- data access ------------------------------------------------------------ */

/* Read-only pointer to the first element, borrowed from the storage (valid
 * while a tensor holds it); NULL for NULL t, or NULL + FC_ERR_UNSUPPORTED_VIEW
 * recorded in t's context when t is not contiguous (use fc_contiguous
 * first). */
FC_API const void *fc_tensor_data(const fc_tensor *t);
/* Mutable pointer; bumps the storage generation (so autograd can tell that a
 * saved value changed). A bool byte written there other than 0 or 1 reads
 * as true in every op that reads values (sums and casts count it as 1,
 * comparisons, logic and where see true, safetensors saves write 1); ops
 * that move bytes (views, fc_clone, gathers) keep it, and fc_tensor_data /
 * fc_tensor_copy_out show it as written. NULL for NULL t; NULL +
 * FC_ERR_READ_ONLY for read-only storage or FC_ERR_UNSUPPORTED_VIEW when t
 * is not contiguous, recorded in t's context. */
FC_API void *fc_tensor_data_mut(fc_tensor *t);
/* Copies t's logical contents (any layout) out into dst, which holds
 * exactly nbytes = fc_tensor_nbytes(t) bytes, row-major (destination first,
 * as fc_copy_). Returns FC_OK; FC_ERR_NULL_ARG for a
 * NULL t or dst; FC_ERR_DATA_LENGTH when nbytes differs. Errors but the NULL
 * t are also recorded in t's context (so are those of the two below). */
FC_API fc_status fc_tensor_copy_out(void *dst, size_t nbytes, const fc_tensor *t);
/* The single element of a one-element tensor (any shape of all ones), as
 * double. Returns FC_OK; FC_ERR_NULL_ARG for a NULL t or out;
 * FC_ERR_INVALID_SHAPE when numel is not 1 (block dtypes never are). */
FC_API fc_status fc_tensor_item(const fc_tensor *t, double *out);
/* Element at a full index (rank entries, each in [0, dim)), converted to
 * double with fc_cast_scalar's rules. Returns FC_OK; FC_ERR_NULL_ARG for a
 * NULL t, index or out; FC_ERR_DTYPE for a block dtype; FC_ERR_INDEX for an
 * index out of bounds. */
FC_API fc_status fc_tensor_element(const fc_tensor *t, const int64_t *index, double *out);

/* ---- conversion and materialisation ------------------------------------------- */

/* Cast to dtype, with fc_cast_scalar's rules. Borrows t; returns a new
 * reference: a new tensor, or, when dtype is already t's, a new handle
 * sharing t's storage. Every pair of non-block dtypes; block -> f32
 * dequantizes and f32 -> block quantizes (as fc_dequantize / fc_quantize
 * over the rows of the last axis, with their errors: e.g. FC_ERR_NON_FINITE
 * for NaN or inf input). FC_ERR_DTYPE for an invalid dtype or a block dtype
 * to or from anything but f32; FC_ERR_INVALID_SHAPE for a last dim that is
 * not a multiple of the target's block size. Float -> float casts are
 * differentiable (the gradient is cast back); casts to integers cut the
 * graph. */
FC_API fc_tensor *fc_to(fc_ctx *ctx, fc_tensor *t, fc_dtype dtype);
/* A new handle sharing t's storage when t is contiguous, else a contiguous
 * copy. Differentiable (identity gradient), like fc_clone. Borrows t;
 * returns a new reference (FC_ERR_NULL_ARG, FC_ERR_OOM). */
FC_API fc_tensor *fc_contiguous(fc_ctx *ctx, fc_tensor *t);
/* A fresh contiguous copy, never sharing storage. Borrows t; returns a new
 * reference (FC_ERR_NULL_ARG, FC_ERR_OOM). */
FC_API fc_tensor *fc_clone(fc_ctx *ctx, fc_tensor *t);
/* Copies src into dst in place (dst may be a view, but not a broadcast one:
 * FC_ERR_UNSUPPORTED_VIEW). A mutation of dst; not recorded by autograd, so
 * a dst that requires grad is refused with FC_ERR_INVALID_ARG unless grad
 * mode is off (fc_no_grad_begin). Returns FC_OK; FC_ERR_NULL_ARG; FC_ERR_DTYPE
 * when the dtypes differ; FC_ERR_SHAPE_MISMATCH when the shapes differ;
 * FC_ERR_READ_ONLY for read-only dst storage. Errors are recorded in dst's
 * context (src's when dst is NULL); nothing is written on error. dst and
 * src may belong to different contexts (values are copied, nothing is
 * shared). Borrows both. */
FC_API fc_status fc_copy_(fc_tensor *dst, const fc_tensor *src);
/* Writes "f32[2,3]" ("NULL" for a NULL t) into buf of cap bytes, truncated
 * and NUL-terminated; returns buf (untouched when buf is NULL or cap 0). */
FC_API const char *fc_tensor_describe(const fc_tensor *t, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_TENSOR_H */
