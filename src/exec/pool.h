/* SPDX-License-Identifier: MIT */
/* pool.h - the context's buffer pool: size-classed free lists of whole
 * buffers (header + data), so a steady-state training step reuses the
 * buffers of the previous one and calls the allocator zero times. */
#ifndef FUCINA_EXEC_POOL_H
#define FUCINA_EXEC_POOL_H

#include "exec/tensor.h"

fc_status fc__pool_init(fc__pool *pool, bool enabled);
void fc__pool_destroy(fc__pool *pool);
/* A buffer of at least nbytes, refs == 1, 64-byte aligned; NULL on OOM. */
fc_buffer *fc__pool_get(fc_ctx *ctx, size_t nbytes);
/* Returns every parked buffer to the allocator. */
void fc__pool_trim(fc_ctx *ctx);

#endif /* FUCINA_EXEC_POOL_H */
