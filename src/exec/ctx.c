/* SPDX-License-Identifier: MIT */
/* ctx.c - the execution context: allocator accounting, sticky errors,
 * scopes, thread count, and teardown.
 *
 * Every allocation of a context goes through ctx->alloc, a thin counting
 * wrapper over the caller's allocator, so the stats (and the zero-malloc
 * steady-state test) see every call. The first error wins: later failures
 * are dropped until fc_ctx_clear_error, so a chain of ops reports its root
 * cause. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "exec/tensor.h"
#include "exec/pool.h"
#include "exec/profile.h"

/* ---- counting allocator ---------------------------------------------------- */

static void *count_alloc(void *user, size_t size, size_t align) {
    fc_ctx *ctx = user;
    void *p = ctx->user_alloc.alloc(ctx->user_alloc.user, size, align);
    if (!p) return NULL;
    atomic_fetch_add_explicit(&ctx->alloc_calls, 1, memory_order_relaxed);
    long long live =
        atomic_fetch_add_explicit(&ctx->bytes_live, (long long)size, memory_order_relaxed) +
        (long long)size;
    long long peak = atomic_load_explicit(&ctx->bytes_peak, memory_order_relaxed);
    while (live > peak &&
           !atomic_compare_exchange_weak_explicit(&ctx->bytes_peak, &peak, live,
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
    return p;
}

static void count_free(void *user, void *ptr, size_t size) {
    fc_ctx *ctx = user;
    if (!ptr) return;
    atomic_fetch_add_explicit(&ctx->free_calls, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&ctx->bytes_live, (long long)size, memory_order_relaxed);
    ctx->user_alloc.free(ctx->user_alloc.user, ptr, size);
}

void *fc__ctx_alloc(fc_ctx *ctx, size_t size) { return fc__alloc(&ctx->alloc, size, 16); }
void fc__ctx_free(fc_ctx *ctx, void *p, size_t size) { fc__free(&ctx->alloc, p, size); }

/* ---- lifetime ------------------------------------------------------------------ */

static int online_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

fc_ctx *fc_ctx_new(const fc_ctx_opts *opts) {
    fc_ctx_opts o = {0};
    if (opts) o = *opts;
    if (o.threads < 0 || (int)o.backend < 0 || o.backend >= FC_BACKEND_COUNT) return NULL;
    const fc_allocator *ua = o.allocator ? o.allocator : fc_default_allocator();
    if (!ua->alloc || !ua->free) return NULL;
    fc_ctx *ctx = ua->alloc(ua->user, sizeof *ctx, _Alignof(fc_ctx));
    if (!ctx) return NULL;
    memset(ctx, 0, sizeof *ctx);
    ctx->user_alloc = *ua;
    ctx->alloc = (fc_allocator){count_alloc, count_free, ctx};
    atomic_init(&ctx->alloc_calls, 0);
    atomic_init(&ctx->free_calls, 0);
    atomic_init(&ctx->bytes_live, 0);
    atomic_init(&ctx->bytes_peak, 0);
    if (fc__pool_init(&ctx->pool, !o.disable_pool) != FC_OK) {
        ua->free(ua->user, ctx, sizeof *ctx);
        return NULL;
    }
    ctx->threads = o.threads ? o.threads : online_cores();
    ctx->backend = o.backend;
    ctx->check_finite = o.check_finite;
    ctx->rng_seed = o.seed;
    ctx->status = FC_OK;
    /* debugging aid (fucina/tensor.h): every released header is freed at
     * once, so a sanitizer reports any later use of the dead handle */
    const char *nr = getenv("FUCINA_NO_HANDLE_REUSE");
    ctx->handle_no_reuse = nr && *nr && strcmp(nr, "0") != 0;
    return ctx;
}


void fc_ctx_free(fc_ctx *ctx) {
    if (!ctx) return;
    if (ctx->tape_free) ctx->tape_free(ctx); /* set by src/ag when it made a tape */
    fc__profile_free(ctx);
    fc__tensor_destroy_all(ctx);
    fc__backend_cache_free(ctx->backend_cache);
    for (int i = 0; i < ctx->team_cache_count; i++)
        fc__backend_cache_free(ctx->team_caches[i]);
    fc__free(&ctx->alloc, ctx->team_caches, (size_t)ctx->team_cache_count * sizeof *ctx->team_caches);
    fc__pool_trim(ctx);
    fc__pool_destroy(&ctx->pool);
    fc__ctx_free(ctx, ctx->scope_items, sizeof(fc_tensor *) * (size_t)ctx->scope_cap);
    fc_allocator ua = ctx->user_alloc;
    ua.free(ua.user, ctx, sizeof *ctx);
}

/* ---- errors ----------------------------------------------------------------------- */

fc_status fc__vfail(fc_ctx *ctx, fc_status status, const char *fmt, va_list ap) {
    if (!ctx || status == FC_OK) return status;
    if (ctx->status != FC_OK) return status; /* keep the first error */
    ctx->status = status;
    vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
    return status;
}

fc_status fc__fail(fc_ctx *ctx, fc_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fc__vfail(ctx, status, fmt, ap);
    va_end(ap);
    return status;
}

fc_status fc_ctx_fail(fc_ctx *ctx, fc_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fc__vfail(ctx, status, fmt ? fmt : "", ap);
    va_end(ap);
    return status;
}

fc_status fc_ctx_status(const fc_ctx *ctx) { return ctx ? ctx->status : FC_ERR_NULL_ARG; }
const char *fc_ctx_error(const fc_ctx *ctx) {
    if (!ctx) return "fc_ctx_error: context is NULL";
    return ctx->error;
}
void fc_ctx_clear_error(fc_ctx *ctx) {
    if (!ctx) return;
    ctx->status = FC_OK;
    ctx->error[0] = '\0';
}

/* ---- settings and stats ---------------------------------------------------------- */

int fc_ctx_threads(const fc_ctx *ctx) { return ctx ? ctx->threads : 0; }

fc_status fc_ctx_set_threads(fc_ctx *ctx, int threads) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (threads < 0) {
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "fc_ctx_set_threads: threads %d < 0", threads);
    }
    ctx->threads = threads ? threads : online_cores();
    return FC_OK;
}

void fc_ctx_set_check_finite(fc_ctx *ctx, bool on) {
    if (ctx) ctx->check_finite = on;
}

void fc_ctx_set_seed(fc_ctx *ctx, uint64_t seed) {
    if (!ctx) return;
    ctx->rng_seed = seed;
    ctx->rng_offset = 0;
}

void fc_ctx_get_rng(const fc_ctx *ctx, uint64_t *seed, uint64_t *offset) {
    if (!ctx) return;
    if (seed) *seed = ctx->rng_seed;
    if (offset) *offset = ctx->rng_offset;
}

void fc_ctx_set_rng(fc_ctx *ctx, uint64_t seed, uint64_t offset) {
    if (!ctx) return;
    ctx->rng_seed = seed;
    ctx->rng_offset = offset;
}

void fc_ctx_get_stats(const fc_ctx *ctx, fc_ctx_stats *out) {
    if (!ctx || !out) return;
    fc_ctx *c = (fc_ctx *)ctx;
    out->bytes_live = atomic_load(&c->bytes_live);
    out->bytes_peak = atomic_load(&c->bytes_peak);
    out->pool_bytes = c->pool.cached_bytes;
    out->pool_hits = c->pool_hits;
    out->pool_misses = c->pool_misses;
    out->alloc_calls = (uint64_t)atomic_load(&c->alloc_calls);
    out->free_calls = (uint64_t)atomic_load(&c->free_calls);
    out->tensors_live = c->tensors_live;
}

void fc_ctx_pool_trim(fc_ctx *ctx) {
    if (ctx) fc__pool_trim(ctx);
}

/* ---- scopes ---------------------------------------------------------------------- */

static bool grow(fc_ctx *ctx, void **arr, int32_t *cap, size_t elem) {
    int32_t ncap = *cap ? *cap * 2 : 256;
    void *n = fc__ctx_alloc(ctx, elem * (size_t)ncap);
    if (!n) return false;
    if (*arr) {
        memcpy(n, *arr, elem * (size_t)*cap);
        fc__ctx_free(ctx, *arr, elem * (size_t)*cap);
    }
    *arr = n;
    *cap = ncap;
    return true;
}

void fc_scope_begin(fc_ctx *ctx) {
    if (!ctx) return;
    if (ctx->scope_depth == FC__MAX_SCOPE_DEPTH) {
        /* too deep: the level is counted (so begin/end stay balanced) but its
         * tensors belong to the enclosing scope */
        if (ctx->scope_overflow++ == 0)
            fc__fail(ctx, FC_ERR_STATE, "fc_scope_begin: more than %d nested scopes",
                     FC__MAX_SCOPE_DEPTH);
        return;
    }
    ctx->scope_starts[ctx->scope_depth++] = ctx->scope_len;
}

void fc_scope_end(fc_ctx *ctx) {
    if (!ctx) return;
    if (ctx->scope_overflow > 0) {
        ctx->scope_overflow--;
        return;
    }
    if (ctx->scope_depth == 0) return;
    int32_t start = ctx->scope_starts[--ctx->scope_depth];
    /* release newest first: later tensors tend to depend on earlier ones */
    for (int32_t i = ctx->scope_len - 1; i >= start; i--) {
        fc_tensor *t = ctx->scope_items[i];
        if (!t) continue;
        ctx->scope_items[i] = NULL;
        t->scope_slot = -1;
        fc_release(t);
    }
    ctx->scope_len = start;
}

/* Registers a new tensor in the innermost scope (no-op outside scopes).
 * False when the scope could not grow: the caller must drop the tensor. */
bool fc__scope_register(fc_ctx *ctx, fc_tensor *t) {
    t->scope_slot = -1;
    if (ctx->scope_depth == 0) return true;
    if (ctx->scope_len == ctx->scope_cap &&
        !grow(ctx, (void **)&ctx->scope_items, &ctx->scope_cap, sizeof(fc_tensor *)))
        return false;
    t->scope_slot = ctx->scope_len;
    ctx->scope_items[ctx->scope_len++] = t;
    return true;
}

fc_tensor *fc_keep(fc_tensor *t) {
    if (!t) return NULL;
    if (t->scope_slot >= 0) {
        t->ctx->scope_items[t->scope_slot] = NULL;
        t->scope_slot = -1;
    }
    return t;
}
