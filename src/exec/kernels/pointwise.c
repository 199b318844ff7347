/* SPDX-License-Identifier: MIT */
/* pointwise.c - the machinery every elementwise op family shares: operand
 * validation with the house error messages, the flat-or-strided runner,
 * and the widening loaders used by the chunked (f16/bf16, odd dtype) loops.
 *
 * The flat path matters for speed: a contiguous same-shape add over 2^24
 * elements must be memory bound, so it skips the iterator and hands each
 * thread one slice of the flat range. */
#include <stdio.h>
#include <string.h>

#include "exec/parallel.h"
#include "core/convert.h"
#include "exec/kernels/pointwise.h"

/* ---- validation ------------------------------------------------------------------- */

fc_status fc__pw_same_dtype(fc_ctx *ctx, const char *op, const fc_tensor *a, const fc_tensor *b) {
    if (a->raw.dtype == b->raw.dtype) return FC_OK;
    return fc__fail(ctx, FC_ERR_DTYPE, "%s: dtypes %s and %s differ; cast one with fc_to", op,
                    fc_dtype_name(a->raw.dtype), fc_dtype_name(b->raw.dtype));
}

fc_status fc__pw_math_dtype(fc_ctx *ctx, const char *op, fc_dtype dt, bool ints_ok) {
    if (fc_dtype_is_float(dt) || (ints_ok && fc_dtype_supports_int_math(dt))) return FC_OK;
    return fc__fail(ctx, FC_ERR_DTYPE, "%s: dtype %s is not supported (%s; cast with fc_to)", op,
                    fc_dtype_name(dt),
                    ints_ok ? "float or integer dtypes only"
                            : "float dtypes f16, bf16, f32, f64 only");
}

fc_status fc__pw_scalar_dtype(fc_ctx *ctx, const char *op, fc_dtype dt, bool f8_ok) {
    if (fc_dtype_is_scalar(dt) && (f8_ok || !fc_dtype_is_f8(dt))) return FC_OK;
    return fc__fail(ctx, FC_ERR_DTYPE, "%s: dtype %s is not supported (%s; cast with fc_to)", op,
                    fc_dtype_name(dt),
                    fc_dtype_is_f8(dt) ? "f8 is a storage-only dtype"
                                       : "block-quantized dtypes must be dequantized first");
}

fc_status fc__pw_broadcast_raw(fc_ctx *ctx, const char *op, const fc_raw *a, const fc_raw *b,
                               int64_t *shape, int *rank) {
    if (fc__shape_equal(a->shape, a->rank, b->shape, b->rank)) { /* the common case */
        memcpy(shape, a->shape, sizeof(int64_t) * (size_t)a->rank);
        *rank = a->rank;
        return FC_OK;
    }
    if (fc__shape_broadcast(a->shape, a->rank, b->shape, b->rank, shape, rank) == FC_OK)
        return FC_OK;
    char sa[160], sb[160];
    return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH, "%s: shapes %s and %s do not broadcast", op,
                    FC__SHAPE_STR(a->shape, a->rank, sa), FC__SHAPE_STR(b->shape, b->rank, sb));
}

fc_status fc__pw_broadcast(fc_ctx *ctx, const char *op, const fc_tensor *a, const fc_tensor *b,
                           int64_t *shape, int *rank) {
    return fc__pw_broadcast_raw(ctx, op, &a->raw, &b->raw, shape, rank);
}

fc_status fc__pw_broadcast_n(fc_ctx *ctx, const char *op, int n, fc_tensor *const *t,
                             int64_t *shape, int *rank) {
    *rank = t[0]->raw.rank;
    memcpy(shape, t[0]->raw.shape, sizeof(int64_t) * (size_t)*rank);
    bool ok = true;
    for (int k = 1; k < n && ok; k++)
        ok = fc__shape_broadcast(shape, *rank, t[k]->raw.shape, t[k]->raw.rank, shape, rank) ==
             FC_OK;
    if (ok) return FC_OK;
    char msg[600] = "", s[160];
    int len = 0;
    for (int k = 0; k < n && len < (int)sizeof msg; k++)
        len += snprintf(msg + len, sizeof msg - (size_t)len, "%s%s",
                        k == 0       ? ""
                        : k == n - 1 ? " and "
                                     : ", ",
                        FC__SHAPE_STR(t[k]->raw.shape, t[k]->raw.rank, s));
    return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH, "%s: shapes %s do not broadcast", op, msg);
}

/* ---- running ----------------------------------------------------------------------- */

typedef struct flat_job {
    fc__inner_fn fn;
    void *arg;
    int nops;
    char *base[FC__ITER_MAX];
    int64_t st[FC__ITER_MAX]; /* bytes: the element size, or 0 for a single element */
} flat_job;

static void flat_slice(void *p, int64_t begin, int64_t end) {
    flat_job *j = p;
    char *ptr[FC__ITER_MAX];
    for (int k = 0; k < j->nops; k++)
        ptr[k] = j->base[k] + begin * j->st[k];
    j->fn(j->arg, ptr, j->st, end - begin);
}

/* Below this many elements a second thread costs more than it saves. */
#define FLAT_GRAIN 32768

void fc__pw_run(fc_ctx *ctx, int nops, fc_raw *const *ops, fc__inner_fn fn, void *arg) {
    const fc_raw *out = ops[0];
    int64_t n = fc__numel(out);
    bool flat = fc__contiguous(out);
    flat_job j = {fn, arg, nops, {0}, {0}};
    for (int k = 0; k < nops && flat; k++) {
        j.base[k] = fc__raw_base(ops[k]);
        /* an input holding one value (one element, or one element expanded
         * with stride 0, as a sum's gradient is) reads at stride 0; an
         * operand that broadcasts to out with out's element count has only
         * size-1 axes added or matched, so its order is out's order */
        if (k > 0 && n != 1 && fc__single_value(ops[k]))
            j.st[k] = 0;
        else if (fc__numel(ops[k]) == n && fc__contiguous(ops[k]))
            j.st[k] = (int64_t)fc_dtype_size(ops[k]->dtype);
        else
            flat = false;
    }
    if (flat) {
        fc__parallel_for(ctx, n, FLAT_GRAIN, flat_slice, &j);
        return;
    }
    fc__iter it;
    fc__iter_init(&it, out->shape, out->rank, nops, ops);
    fc__iter_run(ctx, &it, fn, arg);
}

/* ---- widening helpers ---------------------------------------------------------------- */

/* Element i of a strided run: p in bytes, s the byte stride. */
#define LOAD(T, p, s, i) (*(const T *)((p) + (i) * (s)))

void fc__pw_load_f32(fc_dtype dt, const char *p, int64_t s, int64_t n, float *out) {
    switch (dt) {
    case FC_F32:
        if (s == 4)
            memcpy(out, p, (size_t)n * 4);
        else
            for (int64_t i = 0; i < n; i++)
                out[i] = LOAD(float, p, s, i);
        break;
    case FC_F16:
        if (s == 2)
            fc__f16_to_f32_row((const uint16_t *)p, out, (size_t)n);
        else
            for (int64_t i = 0; i < n; i++)
                out[i] = fc_f16_to_f32(LOAD(uint16_t, p, s, i));
        break;
    case FC_BF16:
        if (s == 2)
            fc__bf16_to_f32_row((const uint16_t *)p, out, (size_t)n);
        else
            for (int64_t i = 0; i < n; i++)
                out[i] = fc_bf16_to_f32(LOAD(uint16_t, p, s, i));
        break;
    default: { /* not reached by the math kernels; kept total for safety */
        double tmp[FC__PW_CHUNK];
        for (int64_t c = 0; c < n; c += FC__PW_CHUNK) {
            int64_t m = n - c < FC__PW_CHUNK ? n - c : FC__PW_CHUNK;
            fc__pw_load_f64(dt, p + c * s, s, m, tmp);
            for (int64_t i = 0; i < m; i++)
                out[c + i] = (float)tmp[i];
        }
    }
    }
}

void fc__pw_store_f32(fc_dtype dt, char *p, int64_t s, int64_t n, const float *in) {
    switch (dt) {
    case FC_F32:
        if (s == 4)
            memcpy(p, in, (size_t)n * 4);
        else
            for (int64_t i = 0; i < n; i++)
                *(float *)(p + i * s) = in[i];
        break;
    case FC_F16:
        if (s == 2)
            fc__f32_to_f16_row(in, (uint16_t *)p, (size_t)n);
        else
            for (int64_t i = 0; i < n; i++)
                *(uint16_t *)(p + i * s) = fc_f32_to_f16(in[i]);
        break;
    case FC_BF16:
        if (s == 2)
            fc__f32_to_bf16_row(in, (uint16_t *)p, (size_t)n);
        else
            for (int64_t i = 0; i < n; i++)
                *(uint16_t *)(p + i * s) = fc_f32_to_bf16(in[i]);
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            fc__store_f64(dt, p + i * s, (double)in[i]);
    }
}

void fc__pw_load_f64(fc_dtype dt, const char *p, int64_t s, int64_t n, double *out) {
    switch (dt) {
    case FC_BOOL:
        for (int64_t i = 0; i < n; i++)
            out[i] = LOAD(uint8_t, p, s, i) != 0;
        break;
    case FC_U8:
        for (int64_t i = 0; i < n; i++)
            out[i] = LOAD(uint8_t, p, s, i);
        break;
    case FC_U16:
        for (int64_t i = 0; i < n; i++)
            out[i] = LOAD(uint16_t, p, s, i);
        break;
    case FC_I8:
        for (int64_t i = 0; i < n; i++)
            out[i] = LOAD(int8_t, p, s, i);
        break;
    case FC_I16:
        for (int64_t i = 0; i < n; i++)
            out[i] = LOAD(int16_t, p, s, i);
        break;
    case FC_I32:
        for (int64_t i = 0; i < n; i++)
            out[i] = LOAD(int32_t, p, s, i);
        break;
    case FC_I64:
        for (int64_t i = 0; i < n; i++)
            out[i] = (double)LOAD(int64_t, p, s, i);
        break;
    case FC_F64:
        for (int64_t i = 0; i < n; i++)
            out[i] = LOAD(double, p, s, i);
        break;
    case FC_F32:
        for (int64_t i = 0; i < n; i++)
            out[i] = LOAD(float, p, s, i);
        break;
    case FC_F16:
        for (int64_t i = 0; i < n; i++)
            out[i] = fc_f16_to_f32(LOAD(uint16_t, p, s, i));
        break;
    case FC_BF16:
        for (int64_t i = 0; i < n; i++)
            out[i] = fc_bf16_to_f32(LOAD(uint16_t, p, s, i));
        break;
    default: /* the f8 formats */
        for (int64_t i = 0; i < n; i++)
            out[i] = fc__load_f64(dt, p + i * s);
    }
}

void fc__pw_load_i64(fc_dtype dt, const char *p, int64_t s, int64_t n, int64_t *out) {
    switch (dt) {
    case FC_BOOL:
        for (int64_t i = 0; i < n; i++)
            out[i] = LOAD(uint8_t, p, s, i) != 0;
        break;
    case FC_U8:
        for (int64_t i = 0; i < n; i++)
            out[i] = LOAD(uint8_t, p, s, i);
        break;
    case FC_U16:
        for (int64_t i = 0; i < n; i++)
            out[i] = LOAD(uint16_t, p, s, i);
        break;
    case FC_I8:
        for (int64_t i = 0; i < n; i++)
            out[i] = LOAD(int8_t, p, s, i);
        break;
    case FC_I16:
        for (int64_t i = 0; i < n; i++)
            out[i] = LOAD(int16_t, p, s, i);
        break;
    case FC_I32:
        for (int64_t i = 0; i < n; i++)
            out[i] = LOAD(int32_t, p, s, i);
        break;
    case FC_I64:
        for (int64_t i = 0; i < n; i++)
            out[i] = LOAD(int64_t, p, s, i);
        break;
    default:
        memset(out, 0, sizeof(int64_t) * (size_t)n); /* callers pass integers only */
    }
}

void fc__pw_truthy(fc_dtype dt, const char *p, int64_t s, int64_t n, uint8_t *out) {
    switch (fc_dtype_size(dt)) {
    case 1: { /* the f8 formats: every code but +-0 is truthy (NaN codes too) */
        uint8_t mask = fc_dtype_is_f8(dt) ? 0x7f : 0xff;
        for (int64_t i = 0; i < n; i++)
            out[i] = (LOAD(uint8_t, p, s, i) & mask) != 0;
        break;
    }
    case 2: { /* f16/bf16: the sign bit alone is -0.0 */
        uint16_t mask = (dt == FC_F16 || dt == FC_BF16) ? 0x7fff : 0xffff;
        for (int64_t i = 0; i < n; i++)
            out[i] = (LOAD(uint16_t, p, s, i) & mask) != 0;
        break;
    }
    case 4:
        if (dt == FC_F32)
            for (int64_t i = 0; i < n; i++)
                out[i] = LOAD(float, p, s, i) != 0.0f; /* NaN != 0 */
        else
            for (int64_t i = 0; i < n; i++)
                out[i] = LOAD(uint32_t, p, s, i) != 0;
        break;
    default:
        if (dt == FC_F64)
            for (int64_t i = 0; i < n; i++)
                out[i] = LOAD(double, p, s, i) != 0.0;
        else
            for (int64_t i = 0; i < n; i++)
                out[i] = LOAD(uint64_t, p, s, i) != 0;
    }
}
