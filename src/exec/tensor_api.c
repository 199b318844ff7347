/* tensor_api.c - the public creation, query and data-access functions of
 * fucina/tensor.h, on top of the handle machinery in tensor.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ag/tape.h"
#include "exec/internal.h"
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
    memcpy(fc__raw_base(&t->raw), data,
           (size_t)fc__raw_storage_numel(&t->raw) * fc_dtype_size(dtype));
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

fc_status fc_tensor_copy_to(const fc_tensor *t, void *dst, size_t nbytes) {
    if (!t) return FC_ERR_NULL_ARG;
    if (!dst) return fc__fail(t->ctx, FC_ERR_NULL_ARG, "fc_tensor_copy_to: dst is NULL");
    fc_status st = fc__raw_copy_to(&t->raw, dst, nbytes);
    if (st != FC_OK) {
        char d[160];
        fc__fail(t->ctx, st, "fc_tensor_copy_to: %s needs %zu bytes, got %zu",
                 fc__desc(t, d, (int)sizeof d), fc_tensor_nbytes(t), nbytes);
    }
    return st;
}

fc_status fc_tensor_get(const fc_tensor *t, const int64_t *index, double *out) {
    if (!t) return FC_ERR_NULL_ARG;
    if (!index || !out)
        return fc__fail(t->ctx, FC_ERR_NULL_ARG, "fc_tensor_get: %s is NULL",
                        index ? "out" : "index");
    if (fc_dtype_is_block(t->raw.dtype))
        return fc__fail(t->ctx, FC_ERR_DTYPE, "fc_tensor_get: %s is block-quantized",
                        fc_dtype_name(t->raw.dtype));
    int64_t off = t->raw.offset;
    for (int i = 0; i < t->raw.rank; i++) {
        if (index[i] < 0 || index[i] >= t->raw.shape[i])
            return fc__fail(t->ctx, FC_ERR_INDEX,
                            "fc_tensor_get: index %lld out of bounds for axis %d of size %lld",
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
    return fc_tensor_get(t, zero, out);
}

/* ---- materialisation and casts --------------------------------------------------------- */

/* Copies and casts pass the gradient straight through; the engine converts
 * it to the input's gradient dtype. */
static fc_status pass_through_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout,
                                       fc_tensor **gin) {
    (void)ctx;
    (void)node;
    gin[0] = gout;
    return FC_OK;
}

/* Records out = op(t) for a differentiable copy/cast; releases out and
 * returns NULL when recording fails. */
static fc_tensor *record_pass_through(fc_ctx *ctx, const char *op, fc_tensor *t, fc_tensor *out) {
    if (!out || !fc__ag_wants(ctx, 1, &t)) return out;
    if (!fc_dtype_is_float(out->raw.dtype)) return out; /* casts to integers cut the graph */
    if (!fc__ag_record(ctx, op, pass_through_backward, out, 1, &t)) {
        fc_release(out);
        return NULL;
    }
    return out;
}

/* A new handle sharing t's storage (not t retained: inside a scope the
 * caller's reference must be one the scope owns). */
static fc_tensor *alias(fc_ctx *ctx, const char *op, fc_tensor *t) {
    fc_raw v;
    fc_status st = fc__raw_view(&t->raw, &v);
    if (st != FC_OK) {
        fc__fail(ctx, st, "%s: %s", op, fc_strerror(st));
        return NULL;
    }
    return record_pass_through(ctx, op, t, fc__tensor_wrap(ctx, op, &v));
}

/* Copies of at least this many bytes into a contiguous destination run on
 * the thread team: one core's copy reaches about half of what the memory
 * system gives two. Each thread gathers its own range of elements. */
#define TEAM_COPY_MIN_BYTES ((int64_t)1 << 20)

typedef struct team_copy {
    const fc_raw *src;
    char *dst;
    int64_t es;
} team_copy;

static void team_copy_range(void *arg, int64_t b, int64_t e) {
    const team_copy *tc = arg;
    /* the range is inside src and src is not a block dtype: cannot fail */
    (void)fc__raw_copy_range(tc->src, tc->dst + b * tc->es, b, e - b);
}

/* fc__raw_copy_into (same checks, same results), with large copies into a
 * contiguous destination split over ctx's threads. */
static fc_status copy_into(fc_ctx *ctx, const fc_raw *src, fc_raw *dst) {
    int64_t n = fc__raw_numel(src), es = (int64_t)fc_dtype_size(src->dtype);
    bool team = ctx->threads > 1 && src->buf && dst->buf && src->buf != dst->buf &&
                src->dtype == dst->dtype && !fc_dtype_is_block(src->dtype) &&
                n * es >= TEAM_COPY_MIN_BYTES &&
                fc__shape_equal(src->shape, src->rank, dst->shape, dst->rank) &&
                fc__raw_is_contiguous(dst) && !fc__buffer_is_read_only(dst->buf);
    if (!team) return fc__raw_copy_into(src, dst);
    fc__buffer_bump_generation(dst->buf);
    team_copy tc = {src, fc__raw_base(dst), es};
    fc__parallel_for(ctx, n, (TEAM_COPY_MIN_BYTES / 2) / es, team_copy_range, &tc);
    return FC_OK;
}

fc_tensor *fc_clone(fc_ctx *ctx, fc_tensor *t) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "fc_clone", t);
    fc_tensor *out = fc__tensor_new(ctx, "fc_clone", t->raw.dtype, t->raw.shape, t->raw.rank);
    if (!out) return NULL;
    fc_status st = copy_into(ctx, &t->raw, &out->raw);
    if (st != FC_OK) {
        char d[160];
        fc__fail(ctx, st, "fc_clone: cannot copy %s (%s)", fc__desc(t, d, (int)sizeof d),
                 fc_strerror(st));
        fc_release(out);
        return NULL;
    }
    return record_pass_through(ctx, "fc_clone", t, out);
}

fc_tensor *fc_contiguous(fc_ctx *ctx, fc_tensor *t) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "fc_contiguous", t);
    if (fc__raw_is_contiguous(&t->raw)) return alias(ctx, "fc_contiguous", t);
    return fc_clone(ctx, t);
}

fc_status fc_copy_(fc_tensor *dst, const fc_tensor *src) {
    if (!dst || !src) {
        /* record where a context is reachable */
        fc_ctx *ctx = dst ? dst->ctx : src ? src->ctx : NULL;
        return fc__fail(ctx, FC_ERR_NULL_ARG, "fc_copy_: %s is NULL", dst ? "src" : "dst");
    }
    if ((dst->flags & FC__T_REQUIRES_GRAD) && dst->ctx->no_grad_depth == 0) {
        char b[160];
        return fc__fail(dst->ctx, FC_ERR_INVALID_ARG,
                        "fc_copy_: %s requires grad; in-place writes to it are allowed only "
                        "inside fc_no_grad_begin/end",
                        fc__desc(dst, b, (int)sizeof b));
    }
    fc_status st = copy_into(dst->ctx, &src->raw, &dst->raw);
    if (st != FC_OK) {
        char a[160], b[160];
        fc__fail(dst->ctx, st, "fc_copy_: cannot copy %s into %s (%s)",
                 fc__desc(src, a, (int)sizeof a), fc__desc(dst, b, (int)sizeof b), fc_strerror(st));
    }
    return st;
}

/* Converts contiguous rows between any two dtypes, in chunks, through f32
 * for block dtypes (quantize/dequantize). */
fc_tensor *fc_to(fc_ctx *ctx, fc_tensor *t, fc_dtype dtype) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "fc_to", t);
    fc_dtype from = t->raw.dtype;
    if (!fc_dtype_is_valid(dtype)) {
        fc__fail(ctx, FC_ERR_DTYPE, "fc_to: invalid target dtype %d", (int)dtype);
        return NULL;
    }
    if (from == dtype) return alias(ctx, "fc_to", t);
    bool fb = fc_dtype_is_block(from), tb = fc_dtype_is_block(dtype);
    if ((fb && dtype != FC_F32) || (tb && from != FC_F32)) {
        fc__fail(ctx, FC_ERR_DTYPE,
                 "fc_to: %s -> %s: block-quantized dtypes convert only to and from f32",
                 fc_dtype_name(from), fc_dtype_name(dtype));
        return NULL;
    }
    fc_tensor *src = fc_contiguous(ctx, t);
    if (!src) return NULL;
    fc_tensor *out = fc__tensor_new(ctx, "fc_to", dtype, t->raw.shape, t->raw.rank);
    if (!out) {
        fc_release(src);
        return NULL;
    }
    const void *sp = fc__raw_base(&src->raw);
    void *dp = fc__raw_base(&out->raw);
    fc_status st;
    int64_t cols = t->raw.shape[t->raw.rank - 1];
    int64_t rows = fc__raw_numel(&t->raw) / cols;
    if (fb)
        st = fc_dequantize(from, sp, dp, rows, cols);
    else if (tb)
        st = fc_quantize(dtype, sp, dp, rows, cols);
    else
        st = fc_convert_row(from, sp, dtype, dp, (size_t)fc__raw_numel(&t->raw));
    fc_release(src);
    if (st != FC_OK) {
        char d[160];
        fc__fail(ctx, st, "fc_to: %s -> %s failed: %s", fc__desc(t, d, (int)sizeof d),
                 fc_dtype_name(dtype), fc_strerror(st));
        fc_release(out);
        return NULL;
    }
    return record_pass_through(ctx, "fc_to", t, fc__finish(ctx, "fc_to", out));
}
