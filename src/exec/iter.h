/* SPDX-License-Identifier: MIT */
/* exec/iter.h - strided iteration over broadcast operands (the odometer). */
#ifndef FUCINA_EXEC_ITER_H
#define FUCINA_EXEC_ITER_H

#include "exec/ctx.h"

/* ---- strided iteration ------------------------------------------------------------ */
/* Walks up to FC__ITER_MAX operands over one common shape, each with its own
 * byte strides (0 on broadcast axes). Axes are coalesced where every operand
 * allows it; the inner loop gets a run of n elements with per-operand byte
 * strides. Outer positions advance like an odometer (no per-element divide). */
#define FC__ITER_MAX 5 /* SwiGLU's fused backward: two outputs, three inputs */
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

#endif /* FUCINA_EXEC_ITER_H */
