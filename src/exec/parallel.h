/* SPDX-License-Identifier: MIT */
/* exec/parallel.h - the thread team as kernels see it: static slices of a
 * range, and fixed chunks for reductions whose bits never depend on the
 * thread count. */
#ifndef FUCINA_EXEC_PARALLEL_H
#define FUCINA_EXEC_PARALLEL_H

#include "exec/ctx.h"

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

#endif /* FUCINA_EXEC_PARALLEL_H */
