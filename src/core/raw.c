/* SPDX-License-Identifier: MIT */
/* raw.c - the raw strided tensor: construction, views, odometer copies.
 *
 * The copy loops never divide per element: a view is first reduced to
 * (outer axes, contiguous suffix run). The suffix moves with memcpy; when the
 * innermost axis itself is strided it moves by a stride-increment loop; the
 * outer axes advance like an odometer (increment the last counter, carry). */
#include "core/raw.h"

#include <string.h>

static fc_status init_meta(fc_raw *out, fc_buffer *buf, fc_dtype dtype, const int64_t *shape,
                           int rank) {
    out->buf = buf;
    out->dtype = dtype;
    out->rank = rank;
    out->offset = 0;
    memcpy(out->shape, shape, sizeof(int64_t) * (size_t)rank);
    int64_t sshape[FC_MAX_RANK];
    memcpy(sshape, shape, sizeof(int64_t) * (size_t)rank);
    sshape[rank - 1] /= fc_dtype_block_elems(dtype);
    fc__shape_contiguous_strides(sshape, rank, out->strides);
    for (int i = rank; i < FC_MAX_RANK; i++)
        out->shape[i] = 1, out->strides[i] = 0;
    return FC_OK;
}

static fc_status storage_bytes(fc_dtype dtype, const int64_t *shape, int rank, size_t *bytes) {
    int64_t n;
    fc_status st = fc__shape_storage_numel(dtype, shape, rank, &n);
    if (st != FC_OK) return st;
    *bytes = (size_t)n * fc_dtype_size(dtype);
    return FC_OK;
}

fc_status fc__raw_empty(const fc_allocator *a, fc_dtype dtype, const int64_t *shape, int rank,
                        fc_raw *out) {
    if (!out) return FC_ERR_NULL_ARG;
    size_t bytes;
    fc_status st = storage_bytes(dtype, shape, rank, &bytes);
    if (st != FC_OK) return st;
    fc_buffer *b;
    if ((st = fc__buffer_create(a, bytes, &b)) != FC_OK) return st;
    return init_meta(out, b, dtype, shape, rank);
}

fc_status fc__raw_zeros(const fc_allocator *a, fc_dtype dtype, const int64_t *shape, int rank,
                        fc_raw *out) {
    fc_status st = fc__raw_empty(a, dtype, shape, rank, out);
    if (st == FC_OK) memset(out->buf->data, 0, out->buf->nbytes);
    return st;
}

fc_status fc__raw_from_data(const fc_allocator *a, fc_dtype dtype, const int64_t *shape, int rank,
                            const void *data, size_t nbytes, fc_raw *out) {
    if (!out || !data) return FC_ERR_NULL_ARG;
    size_t bytes;
    fc_status st = storage_bytes(dtype, shape, rank, &bytes);
    if (st != FC_OK) return st;
    if (bytes != nbytes) return FC_ERR_DATA_LENGTH;
    if ((st = fc__raw_empty(a, dtype, shape, rank, out)) != FC_OK) return st;
    memcpy(out->buf->data, data, bytes);
    return FC_OK;
}

fc_status fc__raw_from_borrowed(const fc_allocator *a, fc_dtype dtype, const int64_t *shape,
                                int rank, void *data, size_t nbytes, bool read_only, fc_raw *out) {
    if (!out || !data) return FC_ERR_NULL_ARG;
    size_t bytes;
    fc_status st = storage_bytes(dtype, shape, rank, &bytes);
    if (st != FC_OK) return st;
    if (bytes != nbytes) return FC_ERR_DATA_LENGTH;
    fc_buffer *b;
    if ((st = fc__buffer_borrow(a, data, bytes, read_only, NULL, NULL, &b)) != FC_OK) return st;
    return init_meta(out, b, dtype, shape, rank);
}

fc_status fc__raw_from_buffer(fc_buffer *buf, fc_dtype dtype, const int64_t *shape, int rank,
                              fc_raw *out) {
    if (!buf || !out) return FC_ERR_NULL_ARG;
    size_t bytes;
    fc_status st = storage_bytes(dtype, shape, rank, &bytes);
    if (st != FC_OK) return st;
    if (buf->nbytes < bytes) return FC_ERR_DATA_LENGTH;
    return init_meta(out, buf, dtype, shape, rank);
}

void fc__raw_release(fc_raw *t) {
    if (!t || !t->buf) return;
    fc__buffer_release(t->buf);
    t->buf = NULL;
    t->rank = 0;
}

int64_t fc__raw_numel(const fc_raw *t) { return fc__shape_product(t->shape, t->rank); }

int64_t fc__raw_storage_numel(const fc_raw *t) {
    return fc__raw_numel(t) / fc_dtype_block_elems(t->dtype);
}

void fc__raw_storage_shape(const fc_raw *t, int64_t *shape) {
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->rank);
    shape[t->rank - 1] /= fc_dtype_block_elems(t->dtype);
}

bool fc__raw_is_contiguous(const fc_raw *t) {
    int64_t s[FC_MAX_RANK];
    fc__raw_storage_shape(t, s);
    return fc__shape_is_contiguous(s, t->strides, t->rank);
}

fc_status fc__raw_view(const fc_raw *src, fc_raw *out) {
    if (!src || !out || !src->buf) return FC_ERR_NULL_ARG;
    *out = *src;
    fc__buffer_retain(src->buf);
    return FC_OK;
}

static bool is_identity(const fc_raw *src, const int64_t *shape, const int64_t *strides, int rank,
                        int64_t delta) {
    if (delta != 0 || !fc__shape_equal(src->shape, src->rank, shape, rank)) return false;
    if (!strides) return true;
    for (int i = 0; i < rank; i++)
        if (strides[i] != src->strides[i]) return false;
    return true;
}

fc_status fc__raw_reshape(const fc_raw *src, const int64_t *shape, int rank, fc_raw *out) {
    if (!src || !src->buf || !out) return FC_ERR_NULL_ARG;
    int64_t n;
    fc_status st = fc__shape_numel(shape, rank, &n);
    if (st != FC_OK) return st;
    if (fc_dtype_is_block(src->dtype) && !is_identity(src, shape, NULL, rank, 0))
        return FC_ERR_UNSUPPORTED_VIEW;
    if (!fc__raw_is_contiguous(src)) return FC_ERR_UNSUPPORTED_VIEW;
    if (n != fc__raw_numel(src)) return FC_ERR_INVALID_SHAPE;
    fc_raw v = *src;
    init_meta(&v, src->buf, src->dtype, shape, rank);
    v.offset = src->offset;
    fc__buffer_retain(src->buf);
    *out = v;
    return FC_OK;
}

fc_status fc__raw_view_strided(const fc_raw *src, const int64_t *shape, const int64_t *strides,
                               int rank, int64_t offset_delta, fc_raw *out) {
    if (!src || !src->buf || !out || !strides) return FC_ERR_NULL_ARG;
    fc_status st = fc__shape_numel(shape, rank, NULL);
    if (st != FC_OK) return st;
    if (fc_dtype_is_block(src->dtype) && !is_identity(src, shape, strides, rank, offset_delta))
        return FC_ERR_UNSUPPORTED_VIEW;
    if (offset_delta < 0) return FC_ERR_INDEX;
    /* Largest reachable storage index must stay inside the buffer. */
    int64_t cap = (int64_t)(src->buf->nbytes / fc_dtype_size(src->dtype));
    if (src->offset > cap || offset_delta > cap - src->offset) return FC_ERR_INDEX;
    int64_t last = src->offset + offset_delta;
    int64_t be = fc_dtype_block_elems(src->dtype);
    for (int i = 0; i < rank; i++) {
        if (strides[i] < 0) return FC_ERR_INVALID_ARG;
        int64_t d = (i == rank - 1 ? shape[i] / be : shape[i]) - 1;
        if (strides[i] && d > (cap - last) / strides[i]) return FC_ERR_INDEX;
        last += d * strides[i];
    }
    if (last >= cap) return FC_ERR_INDEX;
    fc_raw v = *src;
    v.rank = rank;
    memcpy(v.shape, shape, sizeof(int64_t) * (size_t)rank);
    memcpy(v.strides, strides, sizeof(int64_t) * (size_t)rank);
    for (int i = rank; i < FC_MAX_RANK; i++)
        v.shape[i] = 1, v.strides[i] = 0;
    v.offset = src->offset + offset_delta;
    fc__buffer_retain(src->buf);
    *out = v;
    return FC_OK;
}

fc_status fc__raw_broadcast_to(const fc_raw *src, const int64_t *shape, int rank, fc_raw *out) {
    if (!src || !src->buf || !out) return FC_ERR_NULL_ARG;
    fc_status st = fc__shape_validate(shape, rank);
    if (st != FC_OK) return st;
    if (src->rank > rank) return FC_ERR_SHAPE_MISMATCH;
    fc_raw v = *src;
    v.rank = rank;
    for (int i = 0; i < rank; i++) {
        int j = i - (rank - src->rank);
        if (j < 0) {
            v.shape[i] = shape[i];
            v.strides[i] = 0;
        } else if (src->shape[j] == shape[i]) {
            v.shape[i] = shape[i];
            v.strides[i] = src->strides[j];
        } else if (src->shape[j] == 1) {
            v.shape[i] = shape[i];
            v.strides[i] = 0;
        } else {
            return FC_ERR_SHAPE_MISMATCH;
        }
    }
    if (fc_dtype_is_block(src->dtype) && v.shape[rank - 1] != src->shape[src->rank - 1])
        return FC_ERR_UNSUPPORTED_VIEW; /* blocks are indivisible along the last axis */
    fc__buffer_retain(src->buf);
    *out = v;
    return FC_OK;
}

fc_status fc__raw_data(const fc_raw *t, const void **out) {
    if (!t || !t->buf || !out) return FC_ERR_NULL_ARG;
    if (!fc__raw_is_contiguous(t)) return FC_ERR_UNSUPPORTED_VIEW;
    *out = fc__raw_base(t);
    return FC_OK;
}

fc_status fc__raw_data_mut(fc_raw *t, void **out) {
    if (!t || !t->buf || !out) return FC_ERR_NULL_ARG;
    if (!fc__raw_is_contiguous(t)) return FC_ERR_UNSUPPORTED_VIEW;
    void *p;
    fc_status st = fc__buffer_data_mut(t->buf, &p);
    if (st != FC_OK) return st;
    *out = fc__raw_base(t);
    return FC_OK;
}

/* ---- the odometer -------------------------------------------------------- */

/* Steps idx (n axes of dims) to the next row-major position, carrying like
 * an odometer, and moves the offsets oa (and ob when non-NULL) by strides sa
 * (sb) in whatever unit they are given. False after the last position, with
 * idx and the offsets back at the start. Offsets only ever describe real
 * element positions, so no pointer past the view is ever formed. */
static bool odometer_next(int n, const int64_t *dims, int64_t *idx, const int64_t *sa, int64_t *oa,
                          const int64_t *sb, int64_t *ob) {
    for (int i = n - 1; i >= 0; i--) {
        if (++idx[i] < dims[i]) {
            *oa += sa[i];
            if (ob) *ob += sb[i];
            return true;
        }
        *oa -= sa[i] * (dims[i] - 1);
        if (ob) *ob -= sb[i] * (dims[i] - 1);
        idx[i] = 0;
    }
    return false;
}

/* A view folded into: n outer axes (dims, strides in bytes), then an inner
 * part of `per` elements that is either one contiguous run (strided false)
 * or `per` elements of `es` bytes spaced `inner_stride` bytes apart
 * (strided true). inner_stride may be 0: a broadcast innermost axis repeats
 * one element, so a zero stride must never be read as "contiguous". */
typedef struct walk {
    int n;
    int64_t dims[FC_MAX_RANK], strides[FC_MAX_RANK];
    bool strided;
    int64_t per, inner_stride, es;
} walk;

static void walk_plan(const fc_raw *t, walk *w) {
    int64_t sshape[FC_MAX_RANK];
    fc__raw_storage_shape(t, sshape);
    int64_t es = (int64_t)fc_dtype_size(t->dtype);
    /* drop size-1 axes: they never move */
    int64_t d[FC_MAX_RANK], s[FC_MAX_RANK];
    int r = 0;
    for (int i = 0; i < t->rank; i++)
        if (sshape[i] != 1) d[r] = sshape[i], s[r] = t->strides[i], r++;
    w->es = es;
    /* maximal contiguous suffix */
    int64_t expect = 1;
    int k = r;
    while (k > 0 && s[k - 1] == expect)
        expect *= d[--k];
    if (k < r || r == 0) {
        w->strided = false;
        w->inner_stride = es;
        w->per = expect;
        w->n = k;
    } else {
        /* innermost axis strided (or broadcast): move it element by element */
        w->strided = true;
        w->inner_stride = s[r - 1] * es;
        w->per = d[r - 1];
        w->n = r - 1;
    }
    for (int i = 0; i < w->n; i++)
        w->dims[i] = d[i], w->strides[i] = s[i] * es;
}

static inline void copy_elem(char *dst, const char *src, int64_t es) {
    switch (es) {
    case 1:
        *dst = *src;
        break;
    case 2:
        memcpy(dst, src, 2);
        break;
    case 4:
        memcpy(dst, src, 4);
        break;
    case 8:
        memcpy(dst, src, 8);
        break;
    default:
        memcpy(dst, src, (size_t)es);
        break;
    }
}

/* Copies `elems` elements starting at outer index vector idx / inner
 * position `pos` (in elements of the inner part) into dst. */
static void walk_copy(const walk *w, const char *base, int64_t *idx, int64_t pos, int64_t elems,
                      char *dst) {
    int64_t off = 0; /* bytes from base to the current inner part */
    for (int i = 0; i < w->n; i++)
        off += idx[i] * w->strides[i];
    for (;;) {
        int64_t take = w->per - pos < elems ? w->per - pos : elems;
        const char *p = base + off;
        if (w->strided) {
            for (int64_t j = 0; j < take; j++)
                copy_elem(dst + j * w->es, p + (pos + j) * w->inner_stride, w->es);
        } else {
            memcpy(dst, p + pos * w->es, (size_t)(take * w->es));
        }
        dst += take * w->es;
        elems -= take;
        if (elems == 0) return;
        pos = 0;
        odometer_next(w->n, w->dims, idx, w->strides, &off, NULL, NULL);
    }
}

fc_status fc__raw_copy_to(const fc_raw *t, void *dst, size_t dst_bytes) {
    if (!t || !t->buf || !dst) return FC_ERR_NULL_ARG;
    size_t bytes = (size_t)fc__raw_storage_numel(t) * fc_dtype_size(t->dtype);
    if (dst_bytes != bytes) return FC_ERR_DATA_LENGTH;
    if (fc__raw_is_contiguous(t)) {
        memcpy(dst, fc__raw_base(t), bytes);
        return FC_OK;
    }
    if (fc_dtype_is_block(t->dtype)) return FC_ERR_UNSUPPORTED_VIEW;
    walk w;
    walk_plan(t, &w);
    int64_t idx[FC_MAX_RANK] = {0};
    walk_copy(&w, fc__raw_base(t), idx, 0, fc__raw_numel(t), dst);
    return FC_OK;
}

fc_status fc__raw_copy_range(const fc_raw *t, void *dst, int64_t start, int64_t count) {
    if (!t || !t->buf || !dst) return FC_ERR_NULL_ARG;
    if (fc_dtype_is_block(t->dtype)) return FC_ERR_DTYPE;
    int64_t n = fc__raw_numel(t);
    if (start < 0 || count < 0 || start > n || count > n - start) return FC_ERR_INDEX;
    if (count == 0) return FC_OK;
    walk w;
    walk_plan(t, &w);
    /* one division per axis to place the odometer, none per element */
    int64_t q = start / w.per, pos = start % w.per;
    int64_t idx[FC_MAX_RANK] = {0};
    for (int i = w.n - 1; i >= 0; i--) {
        idx[i] = q % w.dims[i];
        q /= w.dims[i];
    }
    walk_copy(&w, fc__raw_base(t), idx, pos, count, dst);
    return FC_OK;
}

/* True when some axis of size > 1 has stride 0 (several indices, one element). */
static bool has_broadcast_axis(const fc_raw *t) {
    for (int i = 0; i < t->rank; i++)
        if (t->shape[i] > 1 && t->strides[i] == 0) return true;
    return false;
}

fc_status fc__raw_copy_into(const fc_raw *src, fc_raw *dst) {
    if (!src || !dst || !src->buf || !dst->buf) return FC_ERR_NULL_ARG;
    if (src->dtype != dst->dtype) return FC_ERR_DTYPE;
    if (!fc__shape_equal(src->shape, src->rank, dst->shape, dst->rank))
        return FC_ERR_SHAPE_MISMATCH;
    if (fc__buffer_is_read_only(dst->buf)) return FC_ERR_READ_ONLY;
    if (has_broadcast_axis(dst)) return FC_ERR_UNSUPPORTED_VIEW;
    bool dst_contiguous = fc__raw_is_contiguous(dst);
    /* every refusal comes before the generation bump: a failed call changes nothing */
    if (fc_dtype_is_block(src->dtype) && !(dst_contiguous && fc__raw_is_contiguous(src)))
        return FC_ERR_UNSUPPORTED_VIEW;
    fc__buffer_bump_generation(dst->buf);
    size_t bytes = (size_t)fc__raw_storage_numel(src) * fc_dtype_size(src->dtype);
    if (dst_contiguous) return fc__raw_copy_to(src, fc__raw_base(dst), bytes);
    /* general case: rows of the last axis, the outer axes by odometer */
    int64_t es = (int64_t)fc_dtype_size(src->dtype);
    int r = src->rank;
    int64_t inner = src->shape[r - 1], ds = dst->strides[r - 1], ss = src->strides[r - 1];
    char *dp = fc__raw_base(dst);
    const char *sp = fc__raw_base(src);
    int64_t idx[FC_MAX_RANK] = {0}, doff = 0, soff = 0; /* in elements */
    do {
        for (int64_t j = 0; j < inner; j++)
            copy_elem(dp + (doff + j * ds) * es, sp + (soff + j * ss) * es, es);
    } while (odometer_next(r - 1, src->shape, idx, dst->strides, &doff, src->strides, &soff));
    return FC_OK;
}

fc_status fc__raw_clone(const fc_allocator *a, const fc_raw *src, fc_raw *out) {
    if (!src || !src->buf || !out) return FC_ERR_NULL_ARG;
    if (fc_dtype_is_block(src->dtype) && !fc__raw_is_contiguous(src))
        return FC_ERR_UNSUPPORTED_VIEW;
    fc_raw r;
    fc_status st = fc__raw_empty(a, src->dtype, src->shape, src->rank, &r);
    if (st != FC_OK) return st;
    st = fc__raw_copy_to(src, r.buf->data, r.buf->nbytes);
    if (st != FC_OK) {
        fc__raw_release(&r);
        return st;
    }
    *out = r;
    return FC_OK;
}

bool fc__raw_can_take_in_place(const fc_raw *t) {
    return t && t->buf && t->offset == 0 && fc__raw_is_contiguous(t) &&
           !fc__buffer_is_read_only(t->buf) && fc__buffer_is_unique(t->buf);
}

fc_status fc__raw_fill(fc_raw *t, const void *value) {
    if (!t || !t->buf || !value) return FC_ERR_NULL_ARG;
    if (fc_dtype_is_block(t->dtype)) return FC_ERR_DTYPE;
    if (fc__buffer_is_read_only(t->buf)) return FC_ERR_READ_ONLY;
    fc__buffer_bump_generation(t->buf);
    int64_t es = (int64_t)fc_dtype_size(t->dtype);
    int64_t n = fc__raw_numel(t);
    if (fc__raw_is_contiguous(t)) {
        char *p = fc__raw_base(t);
        for (int64_t i = 0; i < n; i++)
            copy_elem(p + i * es, value, es);
        return FC_OK;
    }
    /* strided fill: rows of the last axis, the outer axes by odometer */
    int r = t->rank;
    int64_t inner = t->shape[r - 1], is = t->strides[r - 1];
    char *p = fc__raw_base(t);
    int64_t idx[FC_MAX_RANK] = {0}, off = 0; /* in elements */
    do {
        for (int64_t j = 0; j < inner; j++)
            copy_elem(p + (off + j * is) * es, value, es);
    } while (odometer_next(r - 1, t->shape, idx, t->strides, &off, NULL, NULL));
    return FC_OK;
}
