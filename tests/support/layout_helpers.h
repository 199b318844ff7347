/* SPDX-License-Identifier: MIT */
/* layout_helpers.h - tensor helpers for the layout/join/index/mask tests.
 *
 * References in those tests read tensors element by element through
 * fc_tensor_element (the core's own strided access, tested in tests/core), so a
 * layout op is always checked against plain index arithmetic over logical
 * values, never against another layout op. lh_make builds inputs in four
 * layouts with fc__tensor_view directly: contiguous, transposed (the last two
 * axes swapped in storage), narrowed (a window of a wider tensor, nonzero
 * offset) and broadcast (stride 0 on axis 0). Pattern values are small
 * integers, exact in every scalar dtype (f8 included), so comparisons are
 * exact. */
#ifndef FUCINA_TEST_LAYOUT_HELPERS_H
#define FUCINA_TEST_LAYOUT_HELPERS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/tensor.h"
#include "fucina.h"

enum { LH_CONTIG, LH_TRANSPOSED, LH_NARROWED, LH_BROADCAST, LH_LAYOUTS };

static const char *const lh_layout_names[LH_LAYOUTS] = {"contiguous", "transposed", "narrowed",
                                                        "broadcast"};

/* Every scalar dtype: layout ops move bytes, so all of them are allowed. */
static const fc_dtype lh_all_dtypes[] = {FC_F32, FC_F64, FC_F16, FC_BF16, FC_I8,   FC_U8,
                                         FC_I16, FC_U16, FC_I32, FC_I64,  FC_BOOL, FC_F8_E4M3};
#define LH_NDTYPES ((int)(sizeof lh_all_dtypes / sizeof lh_all_dtypes[0]))

static inline void lh_unravel(int64_t flat, const int64_t *shape, int rank, int64_t *idx) {
    for (int i = rank - 1; i >= 0; i--) {
        idx[i] = flat % shape[i];
        flat /= shape[i];
    }
}

static inline int64_t lh_ravel(const int64_t *idx, const int64_t *shape, int rank) {
    int64_t f = 0;
    for (int i = 0; i < rank; i++)
        f = f * shape[i] + idx[i];
    return f;
}

static inline int64_t lh_numel(const int64_t *shape, int rank) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    return n;
}

/* A value exact in dtype: -6..6 (0..12 unsigned, 0/1 bool). */
static inline double lh_pattern(fc_dtype dt, int64_t i, uint64_t salt) {
    int64_t v = (i * 7 + (int64_t)salt * 5 + 3) % 13;
    if (dt == FC_BOOL) return (double)(v % 2);
    if (dt == FC_U8 || dt == FC_U16) return (double)v;
    return (double)(v - 6);
}

/* Contiguous tensor holding v (cast to dtype). */
static inline fc_tensor *lh_from_f64(fc_ctx *ctx, fc_dtype dt, const int64_t *shape, int rank,
                                     const double *v) {
    fc_tensor *t = fc_zeros(ctx, dt, shape, rank);
    if (!t) return NULL;
    char *p = fc_tensor_data_mut(t);
    size_t es = fc_dtype_size(dt);
    int64_t n = lh_numel(shape, rank);
    for (int64_t i = 0; i < n; i++)
        fc_cast_scalar(FC_F64, &v[i], dt, p + (size_t)i * es);
    return t;
}

static inline double lh_get(const fc_tensor *t, const int64_t *idx) {
    double v = 0;
    if (fc_tensor_element(t, idx, &v) != FC_OK) return -12345.0;
    return v;
}

/* Logical contents in row-major order. */
static inline void lh_read(const fc_tensor *t, double *out) {
    int r = fc_tensor_rank(t);
    const int64_t *shape = fc_tensor_shape(t);
    int64_t n = fc_tensor_numel(t), idx[FC_MAX_RANK];
    for (int64_t i = 0; i < n; i++) {
        lh_unravel(i, shape, r, idx);
        out[i] = lh_get(t, idx);
    }
}

/* A tensor of `shape` in the given layout holding pattern values (for
 * LH_BROADCAST the values repeat along axis 0). Returns a new reference. */
static inline fc_tensor *lh_make(fc_ctx *ctx, fc_dtype dt, const int64_t *shape, int rank,
                                 int layout, uint64_t salt) {
    int64_t bshape[FC_MAX_RANK], strides[FC_MAX_RANK], idx[FC_MAX_RANK], bidx[FC_MAX_RANK];
    memcpy(bshape, shape, sizeof(int64_t) * (size_t)rank);
    int64_t n = lh_numel(shape, rank);
    if (layout == LH_TRANSPOSED && rank >= 2) {
        bshape[rank - 2] = shape[rank - 1];
        bshape[rank - 1] = shape[rank - 2];
    } else if (layout == LH_TRANSPOSED || layout == LH_NARROWED) {
        bshape[rank - 1] = shape[rank - 1] * (layout == LH_TRANSPOSED ? 2 : 1) + 3;
    } else if (layout == LH_BROADCAST) {
        bshape[0] = 1;
    }
    int64_t bn = lh_numel(bshape, rank);
    double *bv = calloc((size_t)bn, sizeof(double));
    for (int64_t i = 0; i < bn; i++)
        bv[i] = lh_pattern(dt, 1000 + i, salt); /* filler */
    for (int64_t i = 0; i < n; i++) {
        lh_unravel(i, shape, rank, idx);
        memcpy(bidx, idx, sizeof(int64_t) * (size_t)rank);
        int64_t src = i;
        if (layout == LH_TRANSPOSED && rank >= 2) {
            bidx[rank - 2] = idx[rank - 1];
            bidx[rank - 1] = idx[rank - 2];
        } else if (layout == LH_TRANSPOSED) {
            bidx[rank - 1] = 2 * idx[rank - 1] + 1;
        } else if (layout == LH_NARROWED) {
            bidx[rank - 1] = idx[rank - 1] + 1;
        } else if (layout == LH_BROADCAST) {
            bidx[0] = 0;
            src = lh_ravel(bidx, bshape, rank);
        }
        bv[lh_ravel(bidx, bshape, rank)] = lh_pattern(dt, src, salt);
    }
    fc_tensor *base = lh_from_f64(ctx, dt, bshape, rank, bv);
    free(bv);
    if (!base || layout == LH_CONTIG) return base;
    const int64_t *bs = fc_tensor_strides(base);
    memcpy(strides, bs, sizeof(int64_t) * (size_t)rank);
    int64_t offset = 0;
    if (layout == LH_TRANSPOSED && rank >= 2) {
        strides[rank - 2] = bs[rank - 1];
        strides[rank - 1] = bs[rank - 2];
    } else if (layout == LH_TRANSPOSED) {
        strides[0] = 2;
        offset = 1;
    } else if (layout == LH_NARROWED) {
        offset = 1;
    } else {
        strides[0] = 0;
    }
    fc_tensor *v = fc__tensor_view(ctx, "test", base, shape, strides, rank, offset);
    fc_release(base);
    return v;
}

/* ---- gradient checks ------------------------------------------------------------------------ */

/* The context seed the families' gradient checks were written against: a
 * gradient test calls fc_ctx_set_rng(ctx, LH_GRAD_SEED, 0) first, so its
 * random leaves are the ones they were always checked on. */
#define LH_GRAD_SEED 11

/* A random f64 leaf for fc_gradcheck. */
static inline fc_tensor *lh_leaf(fc_ctx *ctx, const int64_t *shape, int rank) {
    return fc_randn(ctx, FC_F64, shape, rank);
}

/* Gradchecks fn on the n inputs (f64 central differences of a random
 * projection of the output, projection seed 3), releases them, and returns
 * whether the check passed and checked something; prints what failed. */
static inline bool lh_gradcheck(fc_ctx *ctx, fc_gradcheck_fn fn, void *user, fc_tensor **in, int n,
                                const char *what) {
    fc_gradcheck_opts o = {.check_all_f64 = true, .seed = 3};
    fc_gradcheck_report rep;
    fc_status st = fc_gradcheck(ctx, fn, user, in, n, &o, &rep);
    bool ok = st == FC_OK && rep.passed && rep.checked != 0;
    if (!ok) fprintf(stderr, "%s: %s (%s)\n", what, fc_status_name(st), fc_ctx_error(ctx));
    for (int k = 0; k < n; k++)
        fc_release(in[k]);
    return ok;
}

#endif /* FUCINA_TEST_LAYOUT_HELPERS_H */
