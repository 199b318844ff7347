/* SPDX-License-Identifier: MIT */
/* fucina/alloc.h - the allocator contract.
 *
 * Every byte the library allocates goes through one fc_allocator (the
 * context's, see fc_ctx_opts), so a caller can count, limit or fail
 * allocations. alloc returns memory aligned to at least `align` bytes (a
 * power of two, at most 4096) or NULL; free receives the pointer and the size
 * that was asked for. Both must be safe to call from several threads at once
 * when the same allocator serves several contexts used concurrently.
 *
 * What the hooks see. Every allocation fucina itself makes: tensor buffers
 * and handles, the buffer pool, scopes, the autograd tape, optimizer state,
 * matmul workspaces and the per-context oneDNN primitive cache entries,
 * file handles, read buffers and write buffers of the model-file readers and
 * writers (through fc_io_opts.allocator), checkpoints. Only the default
 * allocator (posix_memalign/free) calls the C allocator; a test
 * (tests/reliability/test_alloc_hooks.c) checks the compiled objects for any
 * other call, and the out-of-memory sweeps (tests/reliability/test_oom_*.c)
 * fail each of these allocations in turn.
 *
 * What they cannot see: memory that third-party code allocates for itself.
 *  - oneDNN (the onednn matmul provider): its engine and stream objects,
 *    memory descriptors and memory objects (thin wrappers over our
 *    buffers), primitive descriptors and primitives, their JIT-generated
 *    kernel code, each primitive's scratchpad, and oneDNN's own global
 *    primitive cache. All come from oneDNN's malloc/mmap; a failure there is
 *    reported as FC_ERR_OOM (dnnl_out_of_memory) or FC_ERR_BACKEND.
 *  - OpenBLAS (the blas provider): its per-thread GEMM packing buffers,
 *    mapped once on the first call and reused for the life of the process,
 *    and its thread-server state.
 *  - The OpenMP runtime (libgomp, or libomp with clang): thread stacks and
 *    team descriptors, created on the first parallel region of a thread
 *    count and kept.
 *  - The kernel and libc: the file paths use open/read/write/mmap, not
 *    stdio; a model file mapped with mmap is address space, not allocator
 *    memory (it counts in no statistic).
 * None of these grow with the number of training steps. */
#ifndef FUCINA_ALLOC_H
#define FUCINA_ALLOC_H

#include <stddef.h>

#include "fucina/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An allocator: alloc and free with the contract above; user is passed to both. */
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
