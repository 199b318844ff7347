/* SPDX-License-Identifier: MIT */
/* buffer.c - see buffer.h. */
#include "core/buffer.h"

#include <stdlib.h>
#include <string.h>

static void *default_alloc(void *user, size_t size, size_t align) {
    (void)user;
    void *p = NULL;
    if (align < sizeof(void *)) align = sizeof(void *);
    if (size == 0) size = 1;
    if (posix_memalign(&p, align, size) != 0) return NULL;
    return p;
}
static void default_free(void *user, void *ptr, size_t size) {
    (void)user;
    (void)size;
    free(ptr);
}
static const fc_allocator default_allocator = {default_alloc, default_free, NULL};

const fc_allocator *fc_default_allocator(void) { return &default_allocator; }

void *fc__alloc(const fc_allocator *a, size_t size, size_t align) {
    if (!a) a = &default_allocator;
    return a->alloc(a->user, size, align);
}
void fc__free(const fc_allocator *a, void *p, size_t size) {
    if (!p) return;
    if (!a) a = &default_allocator;
    a->free(a->user, p, size);
}

static fc_status new_header(const fc_allocator *a, fc_buffer **out) {
    if (!a) a = &default_allocator;
    fc_buffer *b = fc__alloc(a, sizeof *b, _Alignof(fc_buffer));
    if (!b) return FC_ERR_OOM;
    atomic_init(&b->refs, 1u);
    atomic_init(&b->generation, 0u);
    b->flags = 0;
    b->data = NULL;
    b->nbytes = 0;
    b->alloc = *a;
    b->release = NULL;
    b->release_ctx = NULL;
    b->pool_next = NULL;
    *out = b;
    return FC_OK;
}

fc_status fc__buffer_create_with_release(const fc_allocator *a, size_t nbytes,
                                         fc_buffer_release_fn fn, void *ctx, fc_buffer **out) {
    if (!out) return FC_ERR_NULL_ARG;
    fc_buffer *b;
    fc_status st = new_header(a, &b);
    if (st != FC_OK) return st;
    b->data = fc__alloc(&b->alloc, nbytes ? nbytes : 1, FC_BUFFER_ALIGN);
    if (!b->data) {
        fc__free(&b->alloc, b, sizeof *b);
        return FC_ERR_OOM;
    }
    b->nbytes = nbytes;
    b->flags = FC_BUF_OWNED;
    b->release = fn;
    b->release_ctx = ctx;
    *out = b;
    return FC_OK;
}

fc_status fc__buffer_create(const fc_allocator *a, size_t nbytes, fc_buffer **out) {
    return fc__buffer_create_with_release(a, nbytes, NULL, NULL, out);
}

fc_status fc__buffer_borrow(const fc_allocator *a, void *data, size_t nbytes, bool read_only,
                            fc_buffer_release_fn fn, void *ctx, fc_buffer **out) {
    if (!out || (!data && nbytes)) return FC_ERR_NULL_ARG;
    fc_buffer *b;
    fc_status st = new_header(a, &b);
    if (st != FC_OK) return st;
    b->data = data;
    b->nbytes = nbytes;
    b->flags = read_only ? FC_BUF_READ_ONLY : 0;
    b->release = fn;
    b->release_ctx = ctx;
    *out = b;
    return FC_OK;
}

void fc__buffer_retain(fc_buffer *b) {
    if (b) atomic_fetch_add_explicit(&b->refs, 1u, memory_order_relaxed);
}

void fc__buffer_release(fc_buffer *b) {
    if (!b) return;
    if (atomic_load_explicit(&b->refs, memory_order_acquire) == 1u) {
        /* The last owner (every short-lived tensor ends here): no other
         * thread holds a reference it could add to or drop, so a plain
         * store does what the locked decrement would, and the acquire load
         * has already ordered the earlier owners' releases before ours. */
        atomic_store_explicit(&b->refs, 0u, memory_order_relaxed);
    } else if (atomic_fetch_sub_explicit(&b->refs, 1u, memory_order_acq_rel) != 1u) {
        /* acq_rel: the thread that sees zero must observe every other
         * owner's writes before it frees or recycles the bytes. */
        return;
    }
    if (b->release)
        b->release(b->release_ctx ? b->release_ctx : b, b);
    else
        fc__buffer_destroy(b);
}

bool fc__buffer_is_unique(const fc_buffer *b) {
    return atomic_load_explicit(&((fc_buffer *)b)->refs, memory_order_acquire) == 1u;
}

void fc__buffer_recycle(fc_buffer *b) {
    atomic_store_explicit(&b->refs, 1u, memory_order_relaxed);
    uint32_t gen = atomic_load_explicit(&b->generation, memory_order_relaxed);
    atomic_store_explicit(&b->generation, gen + 1u, memory_order_relaxed);
}

fc_status fc__buffer_data_mut(fc_buffer *b, void **out) {
    if (!b || !out) return FC_ERR_NULL_ARG;
    if (b->flags & FC_BUF_READ_ONLY) return FC_ERR_READ_ONLY;
    fc__buffer_bump_generation(b);
    *out = b->data;
    return FC_OK;
}

void fc__buffer_destroy_header(fc_buffer *b) {
    fc_allocator a = b->alloc;
    fc__free(&a, b, sizeof *b);
}

void fc__buffer_destroy(fc_buffer *b) {
    if (!b) return;
    if (b->flags & FC_BUF_OWNED) fc__free(&b->alloc, b->data, b->nbytes ? b->nbytes : 1);
    fc__buffer_destroy_header(b);
}
