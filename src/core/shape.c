/* SPDX-License-Identifier: MIT */
/* shape.c - see shape.h. */
#include "core/shape.h"

#include <stdio.h>
#include <string.h>

fc_status fc__shape_validate(const int64_t *shape, int rank) {
    if (!shape) return FC_ERR_NULL_ARG;
    if (rank < 1 || rank > FC_MAX_RANK) return FC_ERR_RANK;
    for (int i = 0; i < rank; i++)
        if (shape[i] < 1) return FC_ERR_INVALID_SHAPE;
    return FC_OK;
}

fc_status fc__shape_numel(const int64_t *shape, int rank, int64_t *out) {
    fc_status st = fc__shape_validate(shape, rank);
    if (st != FC_OK) return st;
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] > FC__MAX_ELEMS / n) return FC_ERR_OVERFLOW; /* grown by division */
        n *= shape[i];
    }
    if (out) *out = n;
    return FC_OK;
}

fc_status fc__shape_storage_numel(fc_dtype dtype, const int64_t *shape, int rank, int64_t *out) {
    if (!fc_dtype_is_valid(dtype)) return FC_ERR_DTYPE;
    int64_t n;
    fc_status st = fc__shape_numel(shape, rank, &n);
    if (st != FC_OK) return st;
    int64_t be = fc_dtype_block_elems(dtype);
    if (be > 1) {
        if (shape[rank - 1] % be != 0) return FC_ERR_INVALID_SHAPE;
        n /= be;
    }
    if ((uint64_t)n > (uint64_t)PTRDIFF_MAX / fc_dtype_size(dtype)) return FC_ERR_OVERFLOW;
    if (out) *out = n;
    return FC_OK;
}

int64_t fc__shape_product(const int64_t *dims, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= dims[i];
    return p;
}

void fc__shape_contiguous_strides(const int64_t *shape, int rank, int64_t *strides) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i];
    }
}

bool fc__shape_is_contiguous(const int64_t *shape, const int64_t *strides, int rank) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        if (shape[i] != 1 && strides[i] != s) return false;
        s *= shape[i];
    }
    return true;
}

bool fc__shape_equal(const int64_t *a, int ra, const int64_t *b, int rb) {
    if (ra != rb) return false;
    for (int i = 0; i < ra; i++)
        if (a[i] != b[i]) return false;
    return true;
}

fc_status fc__shape_broadcast(const int64_t *a, int ra, const int64_t *b, int rb, int64_t *out,
                              int *rank_out) {
    if (!out || !rank_out) return FC_ERR_NULL_ARG;
    fc_status st = fc__shape_validate(a, ra);
    if (st == FC_OK) st = fc__shape_validate(b, rb);
    if (st != FC_OK) return st;
    int r = ra > rb ? ra : rb;
    int64_t tmp[FC_MAX_RANK];
    for (int i = 0; i < r; i++) {
        /* right-aligned: missing leading axes count as 1 */
        int ia = ra - r + i, ib = rb - r + i;
        int64_t da = ia >= 0 ? a[ia] : 1;
        int64_t db = ib >= 0 ? b[ib] : 1;
        if (da == db || db == 1)
            tmp[i] = da;
        else if (da == 1)
            tmp[i] = db;
        else
            return FC_ERR_SHAPE_MISMATCH;
    }
    memcpy(out, tmp, sizeof(int64_t) * (size_t)r);
    *rank_out = r;
    return FC_OK;
}

void fc__shape_axis_geometry(const int64_t *shape, int rank, int axis, int64_t *outer, int64_t *dim,
                             int64_t *inner) {
    *outer = fc__shape_product(shape, axis);
    *dim = shape[axis];
    *inner = fc__shape_product(shape + axis + 1, rank - axis - 1);
}

fc_status fc__shape_norm_axis(int axis, int rank, int *out) {
    if (!out) return FC_ERR_NULL_ARG;
    /* axis + rank cannot overflow: a negative axis plus a non-negative rank */
    int a = axis < 0 && rank >= 0 ? axis + rank : axis;
    if (a < 0 || a >= rank) return FC_ERR_AXIS;
    *out = a;
    return FC_OK;
}

const char *fc__shape_str(const int64_t *shape, int rank, char *buf, int cap) {
    int n = 0;
    if (cap <= 0 || !buf) return buf;
    buf[0] = '\0';
    if (!shape) {
        snprintf(buf, (size_t)cap, "(null)");
        return buf;
    }
    n += snprintf(buf + n, (size_t)(cap - n), "[");
    for (int i = 0; i < rank && n < cap; i++)
        n += snprintf(buf + n, (size_t)(cap - n), i ? ",%lld" : "%lld", (long long)shape[i]);
    if (n < cap) snprintf(buf + n, (size_t)(cap - n), "]");
    return buf;
}
