/* SPDX-License-Identifier: MIT */
/* exec/ctx.h - the execution context: allocator, buffer pool, scopes, grad
 * mode depth, sticky error, RNG stream; and how every layer records an error.
 *
 * Conventions for an op (the ops layer, src/ops/):
 *   1. FC__CHECK_INPUT(ctx, "add", a) for each input: a NULL input returns
 *      NULL (recording FC_ERR_NULL_ARG only if nothing was recorded before).
 *   2. Validate dtypes/shapes; on failure fc__fail(ctx, code, "add: ...")
 *      naming the op, the shapes ([2,3]) and the dtypes, and return NULL.
 *   3. Allocate the output with fc__tensor_new (exec/tensor.h: pooled,
 *      registered in the current scope), run the kernel, then
 *      fc__finish(ctx, "add", out), which runs the check_finite mode.
 *   4. Record the autograd node (the ops layer's business: docs/ARCHITECTURE.md).
 */
#ifndef FUCINA_EXEC_CTX_H
#define FUCINA_EXEC_CTX_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

#include "core/raw.h"
#include "fucina/tensor.h"

#define FC__ERR_CAP 512
#define FC__MAX_SCOPE_DEPTH 256
/* Released tensor headers that wait before one is recycled (tensor.c). */
#define FC__HANDLE_QUARANTINE 64

struct fc_node; /* the autograd layer's node type; opaque here */
struct fc__hook_list; /* the autograd layer's gradient hooks; opaque here */

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
    fc_allocator user_alloc; /* what the caller gave (or the default) */
    fc_allocator alloc;      /* counting wrapper over user_alloc */
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
    /* one provider cache per thread-team slice, for kernels that run
     * single-threaded products on every thread at once (convolution); grown
     * by the first such call that needs more; freed with the context. */
    struct fc__backend_cache **team_caches;
    int team_cache_count;
    /* convolution products run by the provider's direct kernels (tests
     * read it to see which path ran) */
    int64_t conv_direct_products;

    uint64_t rng_seed, rng_offset;

    /* scopes: a flat array of tensors and a stack of start indices */
    fc_tensor **scope_items;
    int32_t scope_len, scope_cap;
    int32_t scope_starts[FC__MAX_SCOPE_DEPTH]; /* inline: opening a scope never allocates */
    int32_t scope_depth;
    int32_t scope_overflow; /* levels opened past FC__MAX_SCOPE_DEPTH (not recorded) */

    fc_tensor *live; /* head of the live-tensor list */
    int64_t tensors_live;
    /* released tensor headers, a FIFO queue linked through live_next: a
     * header is handed out again only while more than FC__HANDLE_QUARANTINE
     * others wait behind it (tensor.c), so a stale handle stays dead, and
     * its double release detectable, for at least that many releases */
    fc_tensor *tensor_free, *tensor_free_tail;
    int64_t tensor_free_len;
    fc_tensor *handle_slab; /* the first FC__HANDLE_QUARANTINE headers, one allocation */
    bool handle_no_reuse;   /* FUCINA_NO_HANDLE_REUSE: headers go back to the allocator */

    /* autograd (src/ag): opaque here; src/ag installs these callbacks when
     * it first records (or first registers a gradient hook), so this layer
     * never calls upward. */
    struct fc__tape *tape;
    int no_grad_depth;
    void (*tape_free)(fc_ctx *ctx);
    void (*node_release)(fc_ctx *ctx, struct fc_node *node);
    void (*hooks_free)(fc_ctx *ctx, struct fc__hook_list *hooks);

    /* the profiler (exec/profile.c): profiling is the one flag the hooks
     * test; profile keeps the last recording's events after it ends */
    bool profiling;
    struct fc__profile *profile;
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

/* An input of an op: NULL records FC_ERR_NULL_ARG (first error only) and
 * returns NULL; a tensor of another context records FC_ERR_CONTEXT and
 * returns NULL (its storage, gradient and tape node belong to that
 * context, which may be freed first). */
#define FC__CHECK_INPUT(ctx, opname, t)                                                            \
    do {                                                                                           \
        if (!(t)) {                                                                                \
            fc__fail((ctx), FC_ERR_NULL_ARG, "%s: input '%s' is NULL", (opname), #t);              \
            return NULL;                                                                           \
        }                                                                                          \
        if ((t)->ctx != (ctx)) {                                                                   \
            fc__fail((ctx), FC_ERR_CONTEXT, "%s: input '%s' belongs to another context", (opname), \
                     #t);                                                                          \
            return NULL;                                                                           \
        }                                                                                          \
    } while (0)
/* A required pointer that is not a tensor (options, shapes): NULL records
 * FC_ERR_NULL_ARG and returns NULL. */
#define FC__CHECK_PTR(ctx, opname, p)                                                              \
    do {                                                                                           \
        if (!(p)) {                                                                                \
            fc__fail((ctx), FC_ERR_NULL_ARG, "%s: input '%s' is NULL", (opname), #p);              \
            return NULL;                                                                           \
        }                                                                                          \
    } while (0)
/* The same for an optional input (NULL allowed) and for functions that
 * return a status: FC_OK, or FC_ERR_CONTEXT recorded naming op and role. */
#define FC__CHECK_SAME_CTX(ctx, opname, t, role)                                                   \
    ((t) && (t)->ctx != (ctx)                                                                      \
         ? fc__fail((ctx), FC_ERR_CONTEXT, "%s: %s belongs to another context", (opname), (role))  \
         : FC_OK)
#define FC__CHECK_CTX(ctx)                                                                         \
    do {                                                                                           \
        if (!(ctx)) return NULL;                                                                   \
    } while (0)

/* Frees every tensor the context still tracks (fc_ctx_free; tensor.c). */
void fc__tensor_destroy_all(fc_ctx *ctx);
/* Pooled raw buffer for scratch space (released with fc__buffer_release). */
fc_buffer *fc__ctx_buffer(fc_ctx *ctx, size_t nbytes);
/* Context allocator for small internal arrays (counted in stats). */
void *fc__ctx_alloc(fc_ctx *ctx, size_t size);
void fc__ctx_free(fc_ctx *ctx, void *p, size_t size);

/* The status after a call that returned NULL: the recorded error (which
 * that call recorded unless an earlier one was kept), never FC_OK. */
static inline fc_status fc__failed(const fc_ctx *ctx) {
    fc_status st = fc_ctx_status(ctx);
    return st != FC_OK ? st : FC_ERR_STATE;
}

/* ---- RNG ------------------------------------------------------------------------------ */
/* Philox 4x32-10: four 32-bit words for (key = seed, counter). */
void fc__philox(uint64_t seed, uint64_t counter, uint32_t out[4]);
/* Reserves n draws of the context stream; returns the first counter. */
uint64_t fc__rng_reserve(fc_ctx *ctx, uint64_t n);

#endif /* FUCINA_EXEC_CTX_H */
