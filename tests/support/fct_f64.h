/* SPDX-License-Identifier: MIT */
/* fct_f64.h - helpers shared by the op tests that compare against a
 * double-precision reference: build a tensor of any dtype from doubles,
 * read any tensor back as doubles, fill with seeded uniform values, and
 * free a context after checking that no tensor handle is left alive.
 * Include after <cmocka.h> (the helpers assert). */
#ifndef FUCINA_TEST_FCT_F64_H
#define FUCINA_TEST_FCT_F64_H

#include <stdlib.h>

#include "fc_test_data.h"
#include "fucina.h"

/* Frees ctx after asserting that every tensor handle was released. */
static inline void free_ctx(fc_ctx *ctx) {
    fc_ctx_stats s;
    fc_ctx_get_stats(ctx, &s);
    assert_int_equal(s.tensors_live, 0);
    fc_ctx_free(ctx);
}

/* A tensor of dtype dt holding v (given in f64, cast with fc_to). */
static inline fc_tensor *from_f64(fc_ctx *ctx, fc_dtype dt, const int64_t *shape, int rank,
                                  const double *v) {
    fc_tensor *t = fc_tensor_from_data(ctx, FC_F64, shape, rank, v);
    assert_non_null(t);
    if (dt == FC_F64) return t;
    fc_tensor *c = fc_to(ctx, t, dt);
    fc_release(t);
    assert_non_null(c);
    return c;
}

/* Logical contents as doubles (malloc'd; the caller frees). */
static inline double *values(fc_tensor *t) {
    fc_tensor *c = fc_to(fc_tensor_ctx(t), t, FC_F64);
    assert_non_null(c);
    int64_t n = fc_tensor_numel(c);
    double *v = malloc(sizeof *v * (size_t)n);
    assert_int_equal(fc_tensor_copy_out(v, sizeof *v * (size_t)n, c), FC_OK);
    fc_release(c);
    return v;
}

/* n uniform values in [lo, hi) from a splitmix64 stream seeded with seed. */
static inline void fill_random(double *v, int64_t n, uint64_t seed, double lo, double hi) {
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(fc_test_splitmix64(&seed) >> 11) / 9007199254740992.0;
        v[i] = lo + (hi - lo) * u;
    }
}

#endif /* FUCINA_TEST_FCT_F64_H */
