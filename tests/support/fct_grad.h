/* SPDX-License-Identifier: MIT */
/* fct_grad.h - the gradient-check harness the op suites share: the input
 * views a checked function applies (so fc_gradcheck differentiates through
 * strided storage too), random f64 leaves, the check itself (fails with the
 * case's name, the view and the context's message) and the context the
 * checks run in. Header-only: each suite's apply() differs, not these. */
#ifndef FUCINA_TEST_FCT_GRAD_H
#define FUCINA_TEST_FCT_GRAD_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fc_test_data.h"
#include "fucina.h"

enum fct_view { FCT_V_CONTIG, FCT_V_TRANSPOSE, FCT_V_NARROW, FCT_V_BROADCAST };

/* The op's input as the checked function sees it: in[0] itself or a view
 * of it made by the (differentiable) layout ops. Transpose swaps the first
 * two axes; narrow drops the first and last element of the last axis;
 * broadcast expands a leading axis of 1 to 3. */
static inline fc_tensor *fct_viewed(fc_ctx *ctx, fc_tensor *x, enum fct_view v) {
    int r = fc_tensor_rank(x);
    int64_t shape[FC_MAX_RANK];
    memcpy(shape, fc_tensor_shape(x), sizeof(int64_t) * (size_t)r);
    switch (v) {
    case FCT_V_TRANSPOSE:
        return fc_transpose(ctx, x, 0, 1);
    case FCT_V_NARROW:
        return fc_narrow(ctx, x, r - 1, 1, shape[r - 1] - 2);
    case FCT_V_BROADCAST:
        shape[0] = 3;
        return fc_expand(ctx, x, shape, r);
    default:
        return fc_retain(x);
    }
}

static inline fc_tensor *fct_random_f64(fc_ctx *ctx, const int64_t *shape, int rank, uint64_t seed,
                                        double lo, double hi) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    double *v = malloc(sizeof *v * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(fc_test_splitmix64(&seed) >> 11) / 9007199254740992.0;
        v[i] = lo + (hi - lo) * u;
    }
    fc_tensor *t = fc_tensor_from_data(ctx, FC_F64, shape, rank, v);
    free(v);
    assert_non_null(t);
    return t;
}

/* fc_gradcheck of fn over in[0..n) in f64 with the suites' seed; a failed
 * or mismatching check fails the test naming the case and its view. */
static inline void fct_gradcheck_ok(fc_ctx *ctx, fc_gradcheck_fn fn, void *user,
                                    fc_tensor *const *in, int n, const char *name, int view) {
    fc_gradcheck_opts o = {.check_all_f64 = true, .seed = 9};
    fc_gradcheck_report rep;
    fc_status st = fc_gradcheck(ctx, fn, user, in, n, &o, &rep);
    if (st != FC_OK) fail_msg("%s (view %d): %s", name, view, fc_ctx_error(ctx));
    assert_true(rep.passed);
    assert_true(rep.checked > 0);
}

/* The checks' context: 2 threads, seed 1. */
static inline fc_ctx *fct_gc_ctx(void) {
    fc_ctx_opts o = {.threads = 2, .seed = 1};
    fc_ctx *ctx = fc_ctx_new(&o);
    assert_non_null(ctx);
    return ctx;
}

#endif /* FUCINA_TEST_FCT_GRAD_H */
