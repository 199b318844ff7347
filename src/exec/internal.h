/* exec/internal.h - what the op library and the autograd layer share:
 * the context and tensor structs and the helpers every op uses.
 *
 * Conventions for an op (see src/exec/kernels/ for examples):
 *   1. FC__CHECK_INPUT(ctx, "add", a) for each input: a NULL input returns
 *      NULL (recording FC_ERR_NULL_ARG only if nothing was recorded before).
 *   2. Validate dtypes/shapes; on failure fc__fail(ctx, code, "add: ...")
 *      naming the op, the shapes ([2,3]) and the dtypes, and return NULL.
 *   3. Allocate the output with fc__tensor_new (pooled, registered in the
 *      current scope), compute, then fc__finish(ctx, "add", out) which runs
 *      the check_finite mode and returns out (or NULL).
 *   4. Record an autograd node when fc__ag_wants(ctx, inputs...) (src/ag/tape.h).
 */
#ifndef FUCINA_EXEC_INTERNAL_H
#define FUCINA_EXEC_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

#include "core/raw.h"
/* Every public declaration, so each FC_API function defined under src/
 * carries the default visibility of its declaration (the library is built
 * with -fvisibility=hidden; a definition that sees no FC_API declaration
 * would silently stay out of the shared library). */
#include "fucina.h"

#define FC__ERR_CAP 512
#define FC__MAX_SCOPE_DEPTH 256

struct fc_node; /* src/ag/tape.h */

enum {
    FC__T_REQUIRES_GRAD = 1u << 0, /* leaf parameter or result of a recorded op */
    FC__T_LEAF = 1u << 1,          /* a parameter: its gradient lands in ->grad */
};

struct fc_tensor {
    fc_raw raw;
    fc_ctx *ctx;
    atomic_int refs;
    unsigned flags;
    int32_t scope_slot;    /* index in ctx->scope_items, -1 when not scoped */
    struct fc_node *node;  /* producing tape node (retained), NULL otherwise */
    fc_tensor *grad;       /* f32 gradient of a leaf (owned), NULL until backward */
    fc_tensor *live_prev;  /* every live tensor of the context, for fc_ctx_free */
    fc_tensor *live_next;
};

/* ---- buffer pool ---------------------------------------------------------- */
#define FC__POOL_CLASSES 160

typedef struct fc__pool {
    /* test-and-test-and-set lock (pool.c): the critical sections are a few
     * pointer moves, so an uncontended take is one atomic exchange instead of
     * a mutex call pair on every alloc and free */
    atomic_bool lock;
    fc_buffer *free_list[FC__POOL_CLASSES]; /* linked through release_ctx */
    int64_t cached_bytes;
    bool enabled;
} fc__pool;

struct fc_ctx {
    fc_allocator user_alloc;   /* what the caller gave (or the default) */
    fc_allocator alloc;        /* counting wrapper over user_alloc */
    atomic_llong alloc_calls, free_calls;
    atomic_llong bytes_live, bytes_peak;
    uint64_t pool_hits, pool_misses;
    fc__pool pool;

    fc_status status;
    char error[FC__ERR_CAP];

    int threads;
    fc_backend backend;
    bool check_finite;
    /* matmul provider state (the oneDNN primitive cache), created by the
     * first matmul that needs it; freed with the context. */
    struct fc__backend_cache *backend_cache;

    uint64_t rng_seed, rng_offset;

    /* scopes: a flat array of tensors and a stack of start indices */
    fc_tensor **scope_items;
    int32_t scope_len, scope_cap;
    int32_t scope_starts[FC__MAX_SCOPE_DEPTH]; /* inline: opening a scope never allocates */
    int32_t scope_depth;
    int32_t scope_overflow; /* levels opened past FC__MAX_SCOPE_DEPTH (not recorded) */

    fc_tensor *live; /* head of the live-tensor list */
    int64_t tensors_live;
    fc_tensor *tensor_free; /* recycled tensor headers */

    /* autograd (src/ag): opaque here; src/ag installs the two hooks when it
     * first records, so this layer never calls upward. */
    struct fc__tape *tape;
    int no_grad_depth;
    void (*tape_free)(fc_ctx *ctx);
    void (*node_release)(fc_ctx *ctx, struct fc_node *node);
};

bool fc__scope_register(fc_ctx *ctx, fc_tensor *t);

/* ---- errors ------------------------------------------------------------------ */
/* Records status + message unless an error is already recorded. Returns status. */
fc_status fc__fail(fc_ctx *ctx, fc_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
fc_status fc__vfail(fc_ctx *ctx, fc_status status, const char *fmt, va_list ap);

/* NULL input: record FC_ERR_NULL_ARG (first error only) and return NULL. */
#define FC__CHECK_INPUT(ctx, opname, t)                                                            \
    do {                                                                                           \
        if (!(t)) {                                                                                \
            fc__fail((ctx), FC_ERR_NULL_ARG, "%s: input '%s' is NULL", (opname), #t);              \
            return NULL;                                                                           \
        }                                                                                          \
    } while (0)
#define FC__CHECK_CTX(ctx)                                                                         \
    do {                                                                                           \
        if (!(ctx)) return NULL;                                                                   \
    } while (0)

/* "f32[2,3]" of a tensor into buf. */
const char *fc__desc(const fc_tensor *t, char *buf, int cap);
/* Shape string of a raw shape. */
#define FC__SHAPE_STR(shape, rank, buf) fc__shape_str((shape), (rank), (buf), (int)sizeof(buf))

/* Frees every tensor the context still tracks (fc_ctx_free; tensor.c). */
void fc__tensor_destroy_all(fc_ctx *ctx);

/* ---- tensors ------------------------------------------------------------------- */
/* Contiguous, uninitialised, from the pool; registered in the current scope.
 * Records the error and returns NULL on failure (op names the caller). */
fc_tensor *fc__tensor_new(fc_ctx *ctx, const char *op, fc_dtype dtype, const int64_t *shape,
                          int rank);
/* Wraps a raw tensor (steals its buffer reference, also on failure). */
fc_tensor *fc__tensor_wrap(fc_ctx *ctx, const char *op, fc_raw *raw);
/* A view of t with new shape/strides/offset (storage units), sharing storage. */
fc_tensor *fc__tensor_view(fc_ctx *ctx, const char *op, fc_tensor *t, const int64_t *shape,
                           const int64_t *strides, int rank, int64_t offset);
/* Pooled raw buffer for scratch space (released with fc__buffer_release). */
fc_buffer *fc__ctx_buffer(fc_ctx *ctx, size_t nbytes);
/* Context allocator for small internal arrays (counted in stats). */
void *fc__ctx_alloc(fc_ctx *ctx, size_t size);
void fc__ctx_free(fc_ctx *ctx, void *p, size_t size);

/* After an op computed out: check_finite mode, then return out (or NULL). */
fc_tensor *fc__finish(fc_ctx *ctx, const char *op, fc_tensor *out);
/* Counts non-finite values of a float tensor (0 for other dtypes). */
int64_t fc__count_non_finite(const fc_tensor *t);

/* ---- thread team -------------------------------------------------------------- */
/* fn(arg, begin, end) over [0, n) split into at most ctx->threads static slices
 * of at least `grain` items; runs inline when one slice suffices. Kernels
 * never create threads themselves. */
typedef void (*fc__range_fn)(void *arg, int64_t begin, int64_t end);
void fc__parallel_for(fc_ctx *ctx, int64_t n, int64_t grain, fc__range_fn fn, void *arg);
/* Deterministic reductions: [0, n) is cut into fixed chunks of `chunk`
 * items, independent of the thread count; fn(arg, chunk_index, begin, end)
 * writes that chunk's partial result; the caller combines partials in
 * index order, so the bits never depend on scheduling or thread count. */
typedef void (*fc__chunk_fn)(void *arg, int64_t chunk, int64_t begin, int64_t end);
int64_t fc__chunk_count(int64_t n, int64_t chunk);
void fc__parallel_chunks(fc_ctx *ctx, int64_t n, int64_t chunk, fc__chunk_fn fn, void *arg);

/* ---- strided iteration ------------------------------------------------------------ */
/* Walks up to FC__ITER_MAX operands over one common shape, each with its own
 * byte strides (0 on broadcast axes). Axes are coalesced where every operand
 * allows it; the inner loop gets a run of n elements with per-operand byte
 * strides. Outer positions advance like an odometer (no per-element divide). */
#define FC__ITER_MAX 4
typedef struct fc__iter {
    int nops, rank; /* rank after coalescing; the last axis is the inner one */
    int64_t shape[FC_MAX_RANK];
    int64_t strides[FC__ITER_MAX][FC_MAX_RANK]; /* bytes */
    char *base[FC__ITER_MAX];
} fc__iter;
typedef void (*fc__inner_fn)(void *arg, char **ptrs, const int64_t *strides, int64_t n);
/* ops[0] is usually the output; every operand is broadcast to `shape`. */
void fc__iter_init(fc__iter *it, const int64_t *shape, int rank, int nops, fc_raw *const *ops);
void fc__iter_run(fc_ctx *ctx, const fc__iter *it, fc__inner_fn fn, void *arg);

/* Broadcast byte strides of raw t against `shape` (right-aligned). */
void fc__bcast_strides(const fc_raw *t, const int64_t *shape, int rank, int64_t *out);

/* ---- layout queries every op asks --------------------------------------------------- */
/* fc__raw_numel and fc__raw_is_contiguous of core/raw.h, inline for the
 * per-op hot path (the core versions copy the shape to divide the block
 * axis; scalar dtypes need no copy). */
static inline int64_t fc__numel(const fc_raw *t) {
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->shape[i];
    return n;
}
static inline bool fc__contiguous(const fc_raw *t) {
    if (fc_dtype_block_elems(t->dtype) != 1) return fc__raw_is_contiguous(t);
    int64_t s = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != s) return false;
        s *= t->shape[i];
    }
    return true;
}
/* True when every element of t is one storage element (all axes of size
 * > 1 have stride 0): a single value broadcast, readable at stride 0. */
static inline bool fc__single_value(const fc_raw *t) {
    for (int i = 0; i < t->rank; i++)
        if (t->shape[i] != 1 && t->strides[i] != 0) return false;
    return true;
}

/* ---- element access helpers ---------------------------------------------------------- */
/* Reads one element of a non-block dtype as double / writes one from double
 * (with fc_cast_scalar's rules). Slow path helpers for generic code. */
double fc__load_f64(fc_dtype dtype, const void *p);
void fc__store_f64(fc_dtype dtype, void *p, double v);

/* ---- RNG ------------------------------------------------------------------------------ */
/* Philox 4x32-10: four 32-bit words for (key = seed, counter). */
void fc__philox(uint64_t seed, uint64_t counter, uint32_t out[4]);
/* Reserves n draws of the context stream; returns the first counter. */
uint64_t fc__rng_reserve(fc_ctx *ctx, uint64_t n);

#endif /* FUCINA_EXEC_INTERNAL_H */
