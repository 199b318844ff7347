/* SPDX-License-Identifier: MIT */
/* pool.c - see pool.h.
 *
 * Size classes: 64 bytes, then four classes per power of two (each a
 * quarter step), so a request wastes at most 25%. A pooled buffer's release
 * hook parks it on its class's free list instead of freeing it; the next
 * request of that class takes it back with refs reset to 1. The lock makes
 * a release from another thread (a tensor shared with a worker) safe. It is
 * a test-and-test-and-set flag rather than a mutex: every tiny op takes it
 * twice or more, each hold is a handful of instructions, and a waiter
 * yields its core instead of spinning. */
#include "exec/pool.h"

#include <sched.h>
#include <string.h>

static inline void pool_lock(fc__pool *p) {
    while (atomic_exchange_explicit(&p->lock, true, memory_order_acquire))
        while (atomic_load_explicit(&p->lock, memory_order_relaxed)) sched_yield();
}

static inline void pool_unlock(fc__pool *p) {
    atomic_store_explicit(&p->lock, false, memory_order_release);
}

static int size_class(size_t n, size_t *rounded) {
    if (n <= 64) {
        *rounded = 64;
        return 0;
    }
    int e = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^e <= n-1 < 2^(e+1) */
    size_t base = (size_t)1 << e, step = base >> 2;
    size_t q = (n - base + step - 1) / step; /* 1..4 */
    *rounded = base + q * step;
    int cls = (e - 6) * 4 + (int)q;
    return cls < FC__POOL_CLASSES ? cls : -1;
}

fc_status fc__pool_init(fc__pool *pool, bool enabled) {
    memset(pool->free_list, 0, sizeof pool->free_list);
    pool->cached_bytes = 0;
    pool->enabled = enabled;
    atomic_init(&pool->lock, false);
    return FC_OK;
}

void fc__pool_destroy(fc__pool *pool) { (void)pool; }

static void pool_release(void *hook_ctx, fc_buffer *b) {
    fc_ctx *ctx = hook_ctx;
    size_t rounded;
    int cls = size_class(b->nbytes, &rounded);
    pool_lock(&ctx->pool);
    b->pool_next = ctx->pool.free_list[cls];
    ctx->pool.free_list[cls] = b;
    ctx->pool.cached_bytes += (int64_t)b->nbytes;
    pool_unlock(&ctx->pool);
}

fc_buffer *fc__pool_get(fc_ctx *ctx, size_t nbytes) {
    fc_buffer *b = NULL;
    size_t rounded;
    int cls = size_class(nbytes, &rounded);
    if (!ctx->pool.enabled || cls < 0) {
        ctx->pool_misses++;
        return fc__buffer_create(&ctx->alloc, nbytes, &b) == FC_OK ? b : NULL;
    }
    pool_lock(&ctx->pool);
    b = ctx->pool.free_list[cls];
    if (b) {
        ctx->pool.free_list[cls] = b->pool_next;
        ctx->pool.cached_bytes -= (int64_t)b->nbytes;
    }
    pool_unlock(&ctx->pool);
    if (b) {
        ctx->pool_hits++;
        b->pool_next = NULL;
        fc__buffer_recycle(b);
        return b;
    }
    ctx->pool_misses++;
    return fc__buffer_create_with_release(&ctx->alloc, rounded, pool_release, ctx, &b) == FC_OK
               ? b
               : NULL;
}

void fc__pool_trim(fc_ctx *ctx) {
    pool_lock(&ctx->pool);
    for (int c = 0; c < FC__POOL_CLASSES; c++) {
        fc_buffer *b = ctx->pool.free_list[c];
        while (b) {
            fc_buffer *next = b->pool_next;
            ctx->pool.cached_bytes -= (int64_t)b->nbytes;
            fc__buffer_destroy(b);
            b = next;
        }
        ctx->pool.free_list[c] = NULL;
    }
    pool_unlock(&ctx->pool);
}
