/* SPDX-License-Identifier: MIT */
/* shape.h - checked shape arithmetic shared by every layer (seed 000 8.5.7).
 *
 * A shape is (int64_t dims[], int rank) with rank 1..FC_MAX_RANK and every
 * dim >= 1. Element counts are grown by division against the limit before
 * each multiply, so no product can wrap. Strides are in storage elements and
 * never negative; broadcast axes have stride 0. */
#ifndef FUCINA_CORE_SHAPE_H
#define FUCINA_CORE_SHAPE_H

#include <stdbool.h>
#include <stdint.h>

#include "fucina/dtype.h"

/* The public FC_MAX_RANK (fucina/tensor.h, which core cannot see) has the
 * same value: an identical redefinition is allowed, a different one fails
 * to compile wherever both are seen. */
#define FC_MAX_RANK 8
/* Largest element count any shape may have: the byte size must fit in a
 * ptrdiff_t for the widest scalar (8 bytes), so pointer arithmetic over any
 * buffer stays defined. Block dtypes are denser than 8 bytes per element. */
#define FC__MAX_ELEMS ((int64_t)(PTRDIFF_MAX / 8))

/* FC_ERR_RANK for rank outside 1..8, FC_ERR_INVALID_SHAPE for a dim < 1,
 * FC_ERR_NULL_ARG for a NULL shape. */
fc_status fc__shape_validate(const int64_t *shape, int rank);
/* Validated element count (out may be NULL); FC_ERR_OVERFLOW when the count
 * exceeds FC__MAX_ELEMS. The validation codes of fc__shape_validate first. */
fc_status fc__shape_numel(const int64_t *shape, int rank, int64_t *out);
/* Storage elements for dtype: numel for scalars; for block dtypes the last
 * axis must be a nonzero multiple of the block size (FC_ERR_INVALID_SHAPE)
 * and the count is numel / block size. Also checks the byte size fits. */
fc_status fc__shape_storage_numel(fc_dtype dtype, const int64_t *shape, int rank, int64_t *out);
/* Checked int64 arithmetic for the sizes ops derive from caller values
 * (padding, stride, dilation, kernel extents, output sizes): true and the
 * exact result in *out when it fits in int64_t, false (*out unspecified)
 * when it does not. Signed overflow is undefined behaviour, so every such
 * sum or product goes through these rather than through + and *. */
static inline bool fc__i64_add(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool fc__i64_sub(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_sub_overflow(a, b, out);
}
static inline bool fc__i64_mul(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
/* Unchecked product for shapes already validated. */
int64_t fc__shape_product(const int64_t *dims, int n);
/* Row-major strides in storage elements (block dtypes: the last axis counts
 * blocks, so pass the storage shape's last dim). */
void fc__shape_contiguous_strides(const int64_t *shape, int rank, int64_t *strides);
/* True when strides are the row-major strides of shape; size-1 axes may have
 * any stride (they are never stepped). */
bool fc__shape_is_contiguous(const int64_t *shape, const int64_t *strides, int rank);
bool fc__shape_equal(const int64_t *a, int ra, const int64_t *b, int rb);
/* NumPy broadcasting, right-aligned (missing leading axes count as 1).
 * Both inputs are validated first (FC_ERR_NULL_ARG, FC_ERR_RANK,
 * FC_ERR_INVALID_SHAPE); FC_ERR_SHAPE_MISMATCH when an axis pair is neither
 * equal nor has a 1. out must hold FC_MAX_RANK dims and may alias a or b; it
 * is untouched on error. */
fc_status fc__shape_broadcast(const int64_t *a, int ra, const int64_t *b, int rb, int64_t *out,
                              int *rank_out);
/* (outer, axis, inner) decomposition around axis (already normalised). */
void fc__shape_axis_geometry(const int64_t *shape, int rank, int axis, int64_t *outer, int64_t *dim,
                             int64_t *inner);
/* Normalise a possibly negative axis (-rank..rank-1); FC_ERR_AXIS when out of
 * range, FC_ERR_NULL_ARG for a NULL out (untouched on error). */
fc_status fc__shape_norm_axis(int axis, int rank, int *out);
/* Writes "[2,3,4]" into buf and returns buf: NUL-terminated and truncated
 * to cap bytes when cap > 0 (buf untouched when cap <= 0). A NULL shape
 * prints "(null)", so error messages can describe any argument. */
const char *fc__shape_str(const int64_t *shape, int rank, char *buf, int cap);

#endif /* FUCINA_CORE_SHAPE_H */
