/* SPDX-License-Identifier: MIT */
/* fct_tensor.c - see fct_tensor.h. Test support code: plain and slow on
 * purpose (index arithmetic per element), so it is an independent check of
 * the library's iterators. */
#include "fct_tensor.h"

#include <math.h>
#include <string.h>

#include "exec/tensor.h"
#include "fc_test_data.h"

const char *const fct_layout_names[FCT_LAYOUT_COUNT] = {"contiguous", "transposed", "strided"};

double fct_round(fc_dtype dt, double v) {
    unsigned char b[8];
    double r = 0;
    fc_cast_scalar(FC_F64, &v, dt, b);
    fc_cast_scalar(dt, b, FC_F64, &r);
    return r;
}

fc_tensor *fct_make(fc_ctx *ctx, fc_dtype dt, const int64_t *shape, int rank, const double *vals,
                    fct_layout layout) {
    if (layout == FCT_TRANSPOSED && rank < 2) layout = FCT_STRIDED;
    int64_t n = 1, st[FC_MAX_RANK], storage = 1, offset = 0;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    /* view strides (storage elements) and the storage size they need */
    int64_t s = 1;
    switch (layout) {
    case FCT_CONTIG:
        for (int i = rank - 1; i >= 0; i--)
            st[i] = s, s *= shape[i];
        storage = s;
        break;
    case FCT_TRANSPOSED: /* storage is [.., d(r-1), d(r-2)] row-major */
        st[rank - 2] = 1;
        st[rank - 1] = shape[rank - 2];
        s = shape[rank - 2] * shape[rank - 1];
        for (int i = rank - 3; i >= 0; i--)
            st[i] = s, s *= shape[i];
        storage = s;
        break;
    default: /* last axis doubled, offset 1 */
        s = 2;
        for (int i = rank - 1; i >= 0; i--)
            st[i] = s, s *= shape[i];
        storage = s + 1;
        offset = 1;
        break;
    }
    fc_tensor *base = fc_full(ctx, dt, &storage, 1, 99.0);
    if (!base) return NULL;
    char *p = fc_tensor_data_mut(base);
    size_t es = fc_dtype_size(dt);
    int64_t idx[FC_MAX_RANK] = {0};
    for (int64_t k = 0; k < n; k++) {
        int64_t off = offset;
        for (int i = 0; i < rank; i++)
            off += idx[i] * st[i];
        fc_cast_scalar(FC_F64, &vals[k], dt, p + (size_t)off * es);
        for (int i = rank - 1; i >= 0; i--) {
            if (++idx[i] < shape[i]) break;
            idx[i] = 0;
        }
    }
    fc_tensor *v = fct_view(ctx, base, shape, st, rank, offset);
    fc_release(base);
    return v;
}

fc_tensor *fct_view(fc_ctx *ctx, fc_tensor *base, const int64_t *shape, const int64_t *strides,
                    int rank, int64_t offset) {
    return fc__tensor_view(ctx, "fct_view", base, shape, strides, rank, offset);
}

int64_t fct_read(const fc_tensor *t, double *out, int64_t cap) {
    if (!t) return -1;
    int64_t n = fc_tensor_numel(t);
    if (n > cap) return -1;
    int rank = fc_tensor_rank(t);
    const int64_t *shape = fc_tensor_shape(t);
    int64_t idx[FC_MAX_RANK] = {0};
    for (int64_t k = 0; k < n; k++) {
        if (fc_tensor_element(t, idx, &out[k]) != FC_OK) return -1;
        for (int i = rank - 1; i >= 0; i--) {
            if (++idx[i] < shape[i]) break;
            idx[i] = 0;
        }
    }
    return n;
}

double fct_uniform(uint64_t *state, double lo, double hi) {
    double u = (double)(fc_test_splitmix64(state) >> 11) * 0x1.0p-53;
    return lo + (hi - lo) * u;
}

double fct_ulp(fc_dtype dt, double v) {
    int mant, emin; /* explicit mantissa bits, minimum normal exponent */
    switch (dt) {
    case FC_F16:
        mant = 10, emin = -14;
        break;
    case FC_BF16:
        mant = 7, emin = -126;
        break;
    case FC_F32:
        mant = 23, emin = -126;
        break;
    default:
        mant = 52, emin = -1022;
        break;
    }
    int e;
    frexp(fabs(v), &e); /* |v| in [2^(e-1), 2^e) */
    e -= 1;
    if (v == 0 || e < emin) e = emin;
    return ldexp(1.0, e - mant);
}

int64_t fct_live(const fc_ctx *ctx) {
    fc_ctx_stats s;
    fc_ctx_get_stats(ctx, &s);
    return s.tensors_live;
}
