/* fucina/alloc.h - the allocator contract.
 *
 * Every byte the library allocates goes through one fc_allocator (the
 * context's, see fc_ctx_opts), so a caller can count, limit or fail
 * allocations. alloc returns memory aligned to at least `align` bytes (a
 * power of two, at most 4096) or NULL; free receives the pointer and the size
 * that was asked for. Both must be safe to call from several threads at once
 * when the same allocator serves several contexts used concurrently. */
#ifndef FUCINA_ALLOC_H
#define FUCINA_ALLOC_H

#include <stddef.h>

#include "fucina/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fc_allocator {
    void *(*alloc)(void *user, size_t size, size_t align);
    void (*free)(void *user, void *ptr, size_t size);
    void *user;
} fc_allocator;

/* The library's default allocator (posix_memalign/free). Static storage. */
FC_API const fc_allocator *fc_default_allocator(void);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_ALLOC_H */
