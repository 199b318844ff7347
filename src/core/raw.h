/* SPDX-License-Identifier: MIT */
/* raw.h - the raw strided tensor (seed 000 section 8.5). Internal: the public
 * header never names fc_raw (tests/core/compile_fail_raw.c proves it).
 *
 * A raw tensor is a plain value: one buffer reference plus inline shape,
 * strides and a start offset, all in storage elements (blocks for block
 * dtypes, whose last axis is still given in logical elements in `shape`).
 * Copying the struct does not retain; every owned value holds exactly one
 * reference and fc__raw_release drops it. Views share the buffer. */
#ifndef FUCINA_CORE_RAW_H
#define FUCINA_CORE_RAW_H

#include "core/buffer.h"
#include "core/shape.h"

typedef struct fc_raw {
    fc_buffer *buf;
    fc_dtype dtype;
    int rank;
    int64_t shape[FC_MAX_RANK];   /* logical dims */
    int64_t strides[FC_MAX_RANK]; /* storage elements; 0 on broadcast axes */
    int64_t offset;               /* storage elements from buf->data */
} fc_raw;

/* ---- construction (all return refs == 1 on the new buffer) ------------- */
fc_status fc__raw_empty(const fc_allocator *a, fc_dtype dtype, const int64_t *shape, int rank,
                        fc_raw *out);
fc_status fc__raw_zeros(const fc_allocator *a, fc_dtype dtype, const int64_t *shape, int rank,
                        fc_raw *out);
/* Owned copy of storage-element data (nbytes must equal the storage size:
 * FC_ERR_DATA_LENGTH otherwise). */
fc_status fc__raw_from_data(const fc_allocator *a, fc_dtype dtype, const int64_t *shape, int rank,
                            const void *data, size_t nbytes, fc_raw *out);
/* Aliases caller memory (read_only: mutable access refused). */
fc_status fc__raw_from_borrowed(const fc_allocator *a, fc_dtype dtype, const int64_t *shape,
                                int rank, void *data, size_t nbytes, bool read_only, fc_raw *out);
/* Steals one reference to buf on success (the caller keeps it on error).
 * The buffer may be larger than needed (pooled buffers). */
fc_status fc__raw_from_buffer(fc_buffer *buf, fc_dtype dtype, const int64_t *shape, int rank,
                              fc_raw *out);
/* Drops the reference and poisons the struct; NULL buf is a no-op. */
void fc__raw_release(fc_raw *t);

/* ---- geometry ----------------------------------------------------------- */
int64_t fc__raw_numel(const fc_raw *t);
int64_t fc__raw_storage_numel(const fc_raw *t);
bool fc__raw_is_contiguous(const fc_raw *t);
/* Shape as the storage sees it: the last dim in blocks for block dtypes. */
void fc__raw_storage_shape(const fc_raw *t, int64_t *shape);

/* ---- views (each retains the buffer) ------------------------------------ */
fc_status fc__raw_view(const fc_raw *src, fc_raw *out);
/* Contiguous only (FC_ERR_UNSUPPORTED_VIEW otherwise); same numel
 * (FC_ERR_INVALID_SHAPE otherwise). Block dtypes: identity only. */
fc_status fc__raw_reshape(const fc_raw *src, const int64_t *shape, int rank, fc_raw *out);
/* Arbitrary strided view starting offset_delta storage elements further;
 * the whole reachable range must lie inside the buffer (FC_ERR_INDEX).
 * Block dtypes: identity only. */
fc_status fc__raw_view_strided(const fc_raw *src, const int64_t *shape, const int64_t *strides,
                               int rank, int64_t offset_delta, fc_raw *out);
/* Zero-stride NumPy broadcast to shape (FC_ERR_SHAPE_MISMATCH). */
fc_status fc__raw_broadcast_to(const fc_raw *src, const int64_t *shape, int rank, fc_raw *out);

/* ---- data access -------------------------------------------------------- */
/* Pointer to the first element; FC_ERR_UNSUPPORTED_VIEW when not contiguous. */
fc_status fc__raw_data(const fc_raw *t, const void **out);
/* Same, mutable: FC_ERR_READ_ONLY on read-only storage; bumps the generation. */
fc_status fc__raw_data_mut(fc_raw *t, void **out);
/* Address of element 0 of the view whatever its layout (no checks). */
static inline char *fc__raw_base(const fc_raw *t) {
    return (char *)t->buf->data + t->offset * (int64_t)fc_dtype_size(t->dtype);
}
/* Logical contents into dst (exactly storage bytes; FC_ERR_DATA_LENGTH).
 * memcpy runs for the contiguous suffix, a stride loop innermost, no
 * per-element division. Non-contiguous block tensors: UNSUPPORTED_VIEW. */
fc_status fc__raw_copy_to(const fc_raw *t, void *dst, size_t dst_bytes);
/* Elements [start, start+count) of the row-major order into dst; disjoint
 * ranges may run concurrently. FC_ERR_INDEX for a range outside
 * [0, numel]; FC_ERR_DTYPE for block dtypes (scalar dtypes only). */
fc_status fc__raw_copy_range(const fc_raw *t, void *dst, int64_t start, int64_t count);
/* Strided copy from src into dst (same shape and dtype, any layouts; the two
 * must not overlap in memory). FC_ERR_DTYPE / FC_ERR_SHAPE_MISMATCH for
 * differing dtype / shape, FC_ERR_READ_ONLY for read-only dst storage,
 * FC_ERR_UNSUPPORTED_VIEW when dst has a broadcast (stride-0) axis, whose
 * element would receive several values, or for block dtypes unless both are
 * contiguous. Bumps dst's generation only when it copies. */
fc_status fc__raw_copy_into(const fc_raw *src, fc_raw *dst);
/* Fresh contiguous copy with offset 0. */
fc_status fc__raw_clone(const fc_allocator *a, const fc_raw *src, fc_raw *out);

/* ---- in place ------------------------------------------------------------ */
/* offset 0, contiguous, writable and uniquely referenced. */
bool fc__raw_can_take_in_place(const fc_raw *t);
/* Sets every element of the view to *value (one element in the dtype's
 * storage form); bumps the generation. FC_ERR_DTYPE for block dtypes,
 * FC_ERR_READ_ONLY for read-only storage. */
fc_status fc__raw_fill(fc_raw *t, const void *value);

#endif /* FUCINA_CORE_RAW_H */
