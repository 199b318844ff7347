/* SPDX-License-Identifier: MIT */
/* exec/kernels/sort.h - the stable sort kernel behind sort, argsort and
 * topk (src/ops/sort.c validates, records and holds the rule). Nothing here
 * records on the tape. */
#ifndef FUCINA_EXEC_KERNELS_SORT_H
#define FUCINA_EXEC_KERNELS_SORT_H

#include "exec/tensor.h"

/* Sorts every fiber of x (scalar, non-block dtype; any layout) along the
 * normalised axis `axis` with a stable merge sort: equal elements keep
 * their order, NaN sorts as larger than every number (last ascending,
 * first descending). Keeps the first k (1 <= k <= the axis dim) of each
 * fiber; unless `sorted`, those k are put back in the order of their
 * positions along the axis. *indices (i64) and, when values is not NULL,
 * *values (x's dtype) are new contiguous tensors of x's shape with the axis
 * dim k, registered in the current scope. Returns false with FC_ERR_OOM
 * recorded naming op (nothing is left allocated). */
bool fc__sort_run(fc_ctx *ctx, const char *op, const fc_tensor *x, int axis, int64_t k,
                  bool descending, bool sorted, fc_tensor **values, fc_tensor **indices);

#endif /* FUCINA_EXEC_KERNELS_SORT_H */
