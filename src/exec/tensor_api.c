/* SPDX-License-Identifier: MIT */
/* tensor_api.c - the public creation, query and data-access functions of
 * fucina/tensor.h, on top of the handle machinery in tensor.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/convert.h"
#include "exec/parallel.h"
#include "exec/tensor.h"
#include "fucina/quant.h"

/* ---- creation ------------------------------------------------------------------- */

fc_tensor *fc_empty(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank) {
    FC__CHECK_CTX(ctx);
    return fc__tensor_new(ctx, "fc_empty", dtype, shape, rank);
}

static fc_tensor *filled(fc_ctx *ctx, const char *op, fc_dtype dtype, const int64_t *shape,
                         int rank, double value) {
    if (fc_dtype_is_block(dtype)) {
        fc__fail(ctx, FC_ERR_DTYPE, "%s: %s is a block-quantized dtype; create f32 and use fc_to",
                 op, fc_dtype_name(dtype));
        return NULL;
    }
    fc_tensor *t = fc__tensor_new(ctx, op, dtype, shape, rank);
    if (!t) return NULL;
    int64_t n = fc__raw_numel(&t->raw);
    size_t es = fc_dtype_size(dtype);
    char *p = fc__raw_base(&t->raw);
    if (value == 0.0 && !signbit(value)) {
        memset(p, 0, (size_t)n * es);
        return t;
    }
    if (dtype == FC_F32) { /* the gradient seeds and common fills: no cast, no walk */
        float *f = (float *)p, v = (float)value;
        for (int64_t i = 0; i < n; i++)
            f[i] = v;
        return t;
    }
    if (dtype == FC_F64) {
        double *d = (double *)p;
        for (int64_t i = 0; i < n; i++)
            d[i] = value;
        return t;
    }
    unsigned char one[8];
    fc__store_f64(dtype, one, value);
    fc__raw_fill(&t->raw, one);
    return t;
}

fc_tensor *fc_zeros(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank) {
    FC__CHECK_CTX(ctx);
    return filled(ctx, "fc_zeros", dtype, shape, rank, 0.0);
}
fc_tensor *fc_ones(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank) {
    FC__CHECK_CTX(ctx);
    return filled(ctx, "fc_ones", dtype, shape, rank, 1.0);
}
fc_tensor *fc_full(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank, double value) {
    FC__CHECK_CTX(ctx);
    return filled(ctx, "fc_full", dtype, shape, rank, value);
}
fc_tensor *fc_scalar(fc_ctx *ctx, fc_dtype dtype, double value) {
    FC__CHECK_CTX(ctx);
    return filled(ctx, "fc_scalar", dtype, (const int64_t[]){1}, 1, value);
}

fc_tensor *fc_arange(fc_ctx *ctx, fc_dtype dtype, double start, double stop, double step) {
    FC__CHECK_CTX(ctx);
    if (step == 0 || !isfinite(start) || !isfinite(stop) || !isfinite(step)) {
        fc__fail(ctx, FC_ERR_INVALID_ARG,
                 "fc_arange: start %g, stop %g, step %g: need finite "
                 "values and a nonzero step",
                 start, stop, step);
        return NULL;
    }
    double count = ceil((stop - start) / step);
    if (!(count >= 1)) {
        fc__fail(ctx, FC_ERR_EMPTY_SELECTION, "fc_arange: [%g, %g) with step %g is empty", start,
                 stop, step);
        return NULL;
    }
    if (count > 9.0e15) {
        fc__fail(ctx, FC_ERR_OVERFLOW, "fc_arange: %g elements is too many", count);
        return NULL;
    }
    int64_t n = (int64_t)count;
    if (fc_dtype_is_block(dtype) || fc_dtype_is_f8(dtype) || dtype == FC_BOOL) {
        fc__fail(ctx, FC_ERR_DTYPE, "fc_arange: dtype %s is not allowed", fc_dtype_name(dtype));
        return NULL;
    }
    fc_tensor *t = fc__tensor_new(ctx, "fc_arange", dtype, &n, 1);
    if (!t) return NULL;
    char *p = fc__raw_base(&t->raw);
    size_t es = fc_dtype_size(dtype);
    for (int64_t i = 0; i < n; i++)
        fc__store_f64(dtype, p + (size_t)i * es, start + (double)i * step);
    return t;
}

fc_tensor *fc_tensor_from_data(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank,
                               const void *data) {
    FC__CHECK_CTX(ctx);
    if (!data) {
        fc__fail(ctx, FC_ERR_NULL_ARG, "fc_tensor_from_data: data is NULL");
        return NULL;
    }
    fc_tensor *t = fc__tensor_new(ctx, "fc_tensor_from_data", dtype, shape, rank);
    if (!t) return NULL;
    size_t nbytes = (size_t)fc__raw_storage_numel(&t->raw) * fc_dtype_size(dtype);
    if (dtype == FC_BOOL) /* any nonzero byte is true: stored as 1 */
        fc__truthy_row(FC_BOOL, data, (uint8_t *)fc__raw_base(&t->raw), nbytes);
    else
        memcpy(fc__raw_base(&t->raw), data, nbytes);
    return t;
}

fc_tensor *fc_tensor_from_borrowed(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank,
                                   void *data, bool read_only) {
    FC__CHECK_CTX(ctx);
    if (!data) {
        fc__fail(ctx, FC_ERR_NULL_ARG, "fc_tensor_from_borrowed: data is NULL");
        return NULL;
    }
    int64_t n;
    fc_status st = fc__shape_storage_numel(dtype, shape, rank, &n);
    if (st != FC_OK) {
        fc__tensor_new(ctx, "fc_tensor_from_borrowed", dtype, shape, rank); /* records why */
        return NULL;
    }
    if (dtype == FC_BOOL) { /* caller memory cannot be normalised: 0 and 1 only */
        const uint8_t *b = data;
        for (int64_t i = 0; i < n; i++)
            if (b[i] > 1) {
                fc__fail(ctx, FC_ERR_INVALID_ARG,
                         "fc_tensor_from_borrowed: bool byte %lld is %u, not 0 or 1 (normalise "
                         "the memory, or copy it with fc_tensor_from_data)",
                         (long long)i, (unsigned)b[i]);
                return NULL;
            }
    }
    fc_raw raw;
    st = fc__raw_from_borrowed(&ctx->alloc, dtype, shape, rank, data,
                               (size_t)n * fc_dtype_size(dtype), read_only, &raw);
    if (st != FC_OK) {
        fc__fail(ctx, st, "fc_tensor_from_borrowed: %s", fc_strerror(st));
        return NULL;
    }
    return fc__tensor_wrap(ctx, "fc_tensor_from_borrowed", &raw);
}

/* ---- queries ------------------------------------------------------------------------- */

fc_dtype fc_tensor_dtype(const fc_tensor *t) { return t ? t->raw.dtype : FC_DTYPE_COUNT; }
int fc_tensor_rank(const fc_tensor *t) { return t ? t->raw.rank : 0; }
const int64_t *fc_tensor_shape(const fc_tensor *t) { return t ? t->raw.shape : NULL; }
int64_t fc_tensor_dim(const fc_tensor *t, int axis) {
    int a;
    if (!t || fc__shape_norm_axis(axis, t->raw.rank, &a) != FC_OK) return 0;
    return t->raw.shape[a];
}
const int64_t *fc_tensor_strides(const fc_tensor *t) { return t ? t->raw.strides : NULL; }
int64_t fc_tensor_offset(const fc_tensor *t) { return t ? t->raw.offset : 0; }
int64_t fc_tensor_numel(const fc_tensor *t) { return t ? fc__raw_numel(&t->raw) : 0; }
size_t fc_tensor_nbytes(const fc_tensor *t) {
    return t ? (size_t)fc__raw_storage_numel(&t->raw) * fc_dtype_size(t->raw.dtype) : 0;
}
bool fc_tensor_is_contiguous(const fc_tensor *t) { return t && fc__raw_is_contiguous(&t->raw); }
uint32_t fc_tensor_generation(const fc_tensor *t) {
    return t ? fc__buffer_generation(t->raw.buf) : 0;
}

const char *fc_tensor_describe(const fc_tensor *t, char *buf, size_t cap) {
    if (!buf || cap == 0) return buf;
    return fc__desc(t, buf, cap > 4096 ? 4096 : (int)cap);
}

/* ---- data access ------------------------------------------------------------------------ */

const void *fc_tensor_data(const fc_tensor *t) {
    if (!t) return NULL;
    const void *p;
    fc_status st = fc__raw_data(&t->raw, &p);
    if (st != FC_OK) {
        char d[160];
        fc__fail(t->ctx, st, "fc_tensor_data: %s is not contiguous; call fc_contiguous first",
                 fc__desc(t, d, (int)sizeof d));
        return NULL;
    }
    return p;
}

void *fc_tensor_data_mut(fc_tensor *t) {
    if (!t) return NULL;
    void *p;
    fc_status st = fc__raw_data_mut(&t->raw, &p);
    if (st != FC_OK) {
        char d[160];
        fc__fail(t->ctx, st, "fc_tensor_data_mut: %s: %s", fc__desc(t, d, (int)sizeof d),
                 st == FC_ERR_READ_ONLY ? "storage is read-only"
                                        : "not contiguous; call fc_contiguous first");
        return NULL;
    }
    return p;
}

fc_status fc_tensor_copy_out(void *dst, size_t nbytes, const fc_tensor *t) {
    if (!t) return FC_ERR_NULL_ARG;
    if (!dst) return fc__fail(t->ctx, FC_ERR_NULL_ARG, "fc_tensor_copy_out: dst is NULL");
    fc_status st = fc__raw_copy_to(&t->raw, dst, nbytes);
    if (st != FC_OK) {
        char d[160];
        fc__fail(t->ctx, st, "fc_tensor_copy_out: %s needs %zu bytes, got %zu",
                 fc__desc(t, d, (int)sizeof d), fc_tensor_nbytes(t), nbytes);
    }
    return st;
}

fc_status fc_tensor_element(const fc_tensor *t, const int64_t *index, double *out) {
    if (!t) return FC_ERR_NULL_ARG;
    if (!index || !out)
        return fc__fail(t->ctx, FC_ERR_NULL_ARG, "fc_tensor_element: %s is NULL",
                        index ? "out" : "index");
    if (fc_dtype_is_block(t->raw.dtype))
        return fc__fail(t->ctx, FC_ERR_DTYPE, "fc_tensor_element: %s is block-quantized",
                        fc_dtype_name(t->raw.dtype));
    int64_t off = t->raw.offset;
    for (int i = 0; i < t->raw.rank; i++) {
        if (index[i] < 0 || index[i] >= t->raw.shape[i])
            return fc__fail(t->ctx, FC_ERR_INDEX,
                            "fc_tensor_element: index %lld out of bounds for axis %d of size %lld",
                            (long long)index[i], i, (long long)t->raw.shape[i]);
        off += index[i] * t->raw.strides[i];
    }
    *out = fc__load_f64(t->raw.dtype, (const char *)t->raw.buf->data +
                                          off * (int64_t)fc_dtype_size(t->raw.dtype));
    return FC_OK;
}

fc_status fc_tensor_item(const fc_tensor *t, double *out) {
    if (!t) return FC_ERR_NULL_ARG;
    if (!out) return fc__fail(t->ctx, FC_ERR_NULL_ARG, "fc_tensor_item: out is NULL");
    if (fc__raw_numel(&t->raw) != 1) {
        char d[160];
        return fc__fail(t->ctx, FC_ERR_INVALID_SHAPE, "fc_tensor_item: %s has %lld elements, not 1",
                        fc__desc(t, d, (int)sizeof d), (long long)fc__raw_numel(&t->raw));
    }
    int64_t zero[FC_MAX_RANK] = {0};
    return fc_tensor_element(t, zero, out);
}
