/* SPDX-License-Identifier: MIT */
/* buffer.h - refcounted, generation-counted storage (seed 000 section 8.4).
 *
 * A buffer is a header plus a byte region, shared by pointer. Invariants:
 *  - refs counts owners; retain/release are atomic and may race freely.
 *    Exactly one release observes zero, and that one runs the release hook
 *    (or frees owned data + header) exactly once.
 *  - generation counts mutable accesses: fc__buffer_data_mut bumps it, so a
 *    value saved for backward can tell whether it changed since it was saved.
 *  - data is 64-byte aligned for owned buffers; borrowed buffers alias the
 *    caller's bytes, and read-only borrowed buffers refuse mutable access
 *    with FC_ERR_READ_ONLY.
 * The data itself is not synchronised: concurrent readers are fine, writers
 * need external coordination (kernels partition disjoint ranges). */
#ifndef FUCINA_CORE_BUFFER_H
#define FUCINA_CORE_BUFFER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fucina/alloc.h"
#include "fucina/status.h"

#define FC_BUFFER_ALIGN 64

typedef struct fc_buffer fc_buffer;
/* Runs once at the final release. It has full cleanup duty: dispose of the
 * data by whatever means created it and call fc__buffer_destroy_header. */
typedef void (*fc_buffer_release_fn)(void *ctx, fc_buffer *buf);

enum {
    FC_BUF_OWNED = 1u << 0,     /* data allocated by the buffer's allocator */
    FC_BUF_READ_ONLY = 1u << 1, /* borrowed const memory: no mutable access */
};

struct fc_buffer {
    atomic_uint refs;
    atomic_uint generation;
    unsigned flags;
    void *data;
    size_t nbytes;
    fc_allocator alloc; /* frees the header (and owned data) */
    fc_buffer_release_fn release;
    void *release_ctx;
    fc_buffer *pool_next; /* free-list link, used only by the owning pool */
};

/* Owned, uninitialised, 64-byte aligned. refs == 1. */
fc_status fc__buffer_create(const fc_allocator *a, size_t nbytes, fc_buffer **out);
/* Owned, but at refs == 0 the hook runs instead of the default free. */
fc_status fc__buffer_create_with_release(const fc_allocator *a, size_t nbytes,
                                         fc_buffer_release_fn fn, void *ctx, fc_buffer **out);
/* Aliases caller memory; the caller keeps the bytes alive longer than the
 * buffer. With fn != NULL the hook takes over cleanup at the last release. */
fc_status fc__buffer_borrow(const fc_allocator *a, void *data, size_t nbytes, bool read_only,
                            fc_buffer_release_fn fn, void *ctx, fc_buffer **out);

void fc__buffer_retain(fc_buffer *b);
/* NULL is a harmless no-op. */
void fc__buffer_release(fc_buffer *b);
/* Snapshot: meaningful only under exclusive access to the handle. */
bool fc__buffer_is_unique(const fc_buffer *b);
/* Only under exclusive ownership (pool recycling: no other thread holds a
 * reference to race with): refs back to 1 and the generation bumped (a
 * recycled buffer is new contents), with plain stores where retain and
 * release need locked read-modify-writes. */
void fc__buffer_recycle(fc_buffer *b);

static inline const void *fc__buffer_data(const fc_buffer *b) { return b->data; }
/* Mutable access: FC_ERR_READ_ONLY on read-only storage, else bumps the
 * generation and returns the data pointer. */
fc_status fc__buffer_data_mut(fc_buffer *b, void **out);
static inline uint32_t fc__buffer_generation(const fc_buffer *b) {
    return atomic_load_explicit(&b->generation, memory_order_acquire);
}
static inline void fc__buffer_bump_generation(fc_buffer *b) {
    atomic_fetch_add_explicit(&b->generation, 1u, memory_order_acq_rel);
}
static inline bool fc__buffer_is_read_only(const fc_buffer *b) {
    return (b->flags & FC_BUF_READ_ONLY) != 0;
}

/* Frees owned data and the header regardless of refs (pool teardown). */
void fc__buffer_destroy(fc_buffer *b);
/* Frees the header only (for release hooks). */
void fc__buffer_destroy_header(fc_buffer *b);

/* Allocation helpers over an fc_allocator (NULL means the default). */
void *fc__alloc(const fc_allocator *a, size_t size, size_t align);
void fc__free(const fc_allocator *a, void *p, size_t size);

#endif /* FUCINA_CORE_BUFFER_H */
