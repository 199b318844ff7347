/* SPDX-License-Identifier: MIT */
/* test_scan.c - fc_cumsum (src/ops/scan.c): values against a
 * double-precision reference written here, in every dtype the policy
 * allows, on a transposed view, with integer wrap; and its gradient by
 * fc_gradcheck (f64, central differences) on contiguous and strided
 * inputs. Its error checks are in test_reduce.c's test_reduce_errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "exec/tensor.h"
#include "fc_test_data.h"
#include "fct_f64.h"
#include "fct_grad.h"
#include "fucina/ops.h"

static fc_ctx *new_ctx(int threads) {
    fc_ctx_opts o = {.threads = threads, .seed = 7};
    fc_ctx *ctx = fc_ctx_new(&o);
    assert_non_null(ctx);
    return ctx;
}

/* Logical values of a view of base (values bv, shape bshape) given its
 * shape, strides and offset in elements. */
static void view_values(const double *bv, const int64_t *shape, const int64_t *st, int rank,
                        int64_t off, double *out) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    for (int64_t e = 0; e < n; e++) {
        int64_t q = e, p = off;
        for (int i = rank - 1; i >= 0; i--) {
            p += (q % shape[i]) * st[i];
            q /= shape[i];
        }
        out[e] = bv[p];
    }
}

/* ---- cumsum
 * -------------------------------------------------------------------------------------- */

static void ref_cumsum(const double *v, const int64_t *shape, int rank, int axis, double *out) {
    int64_t outer = 1, inner = 1, dim = shape[axis];
    for (int i = 0; i < axis; i++)
        outer *= shape[i];
    for (int i = axis + 1; i < rank; i++)
        inner *= shape[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double s = 0;
            for (int64_t d = 0; d < dim; d++) {
                int64_t e = (o * dim + d) * inner + i;
                s += v[e];
                out[e] = s;
            }
        }
}

static void test_reduce_cumsum(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(2);
    int64_t shape[3] = {3, 40, 5};
    double v[600], want[600];
    fill_random(v, 600, 5, -4, 4);
    for (int i = 0; i < 600; i++)
        v[i] = floor(v[i]);
    fc_dtype dts[] = {FC_F32, FC_F64, FC_F16, FC_BF16, FC_I32, FC_U8, FC_BOOL};
    for (int d = 0; d < 7; d++) {
        double q[600];
        for (int i = 0; i < 600; i++)
            q[i] = dts[d] == FC_BOOL ? (v[i] > 0) : dts[d] == FC_U8 ? fabs(v[i]) : v[i];
        fc_tensor *x = from_f64(ctx, dts[d], shape, 3, q);
        for (int axis = -3; axis < 3; axis++) {
            fc_tensor *y = fc_cumsum(ctx, x, axis);
            assert_non_null(y);
            fc_dtype want_dt = dts[d] == FC_F64            ? FC_F64
                               : fc_dtype_is_float(dts[d]) ? FC_F32
                                                           : FC_I64;
            assert_int_equal(fc_tensor_dtype(y), want_dt);
            ref_cumsum(q, shape, 3, (axis + 3) % 3, want);
            double *got = values(y);
            for (int i = 0; i < 600; i++)
                assert_true(got[i] == want[i]); /* integers: exact */
            free(got);
            fc_release(y);
        }
        fc_release(x);
    }
    /* a transposed view and fractional values */
    double f[600];
    fill_random(f, 600, 9, -1, 1);
    fc_tensor *base = from_f64(ctx, FC_F32, shape, 3, f);
    double *q = values(base);
    int64_t tshape[3] = {5, 40, 3}, tst[3] = {1, 5, 200};
    fc_tensor *x = fc__tensor_view(ctx, "test", base, tshape, tst, 3, 0);
    double tv[600];
    view_values(q, tshape, tst, 3, 0, tv);
    fc_tensor *y = fc_cumsum(ctx, x, 1);
    ref_cumsum(tv, tshape, 3, 1, want);
    double *got = values(y);
    for (int i = 0; i < 600; i++)
        assert_true(fabs(got[i] - want[i]) < 1e-5);
    free(got);
    free(q);
    fc_release(y);
    fc_release(x);
    fc_release(base);
    /* integer wrap */
    int64_t big[2] = {INT64_MAX, 2};
    x = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){2}, 1, big);
    y = fc_cumsum(ctx, x, 0);
    int64_t out[2];
    assert_int_equal(fc_tensor_copy_out(out, sizeof out, y), FC_OK);
    assert_true(out[0] == INT64_MAX && out[1] == INT64_MIN + 1);
    fc_release(y);
    fc_release(x);
    free_ctx(ctx);
}

/* ---- gradient ---------------------------------------------------------------------------------
 */

typedef struct gc_case {
    const char *name;
    enum fct_view view;
    int axis;
} gc_case;

static fc_tensor *apply(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    const gc_case *c = user;
    fc_tensor *x = fct_viewed(ctx, in[0], c->view);
    assert_non_null(x);
    assert_true(c->view == FCT_V_CONTIG || !fc_tensor_is_contiguous(x)); /* a real strided input */
    fc_tensor *y = fc_cumsum(ctx, x, c->axis);
    (void)n;
    fc_release(x);
    return y;
}

/* cumsum along axes 1 and 2 of a 3-D input under every view, by
 * fc_gradcheck (moved from the reductions' gradient table, with the same
 * inputs). */
static void test_grad_cumsum(void **state) {
    (void)state;
    fc_ctx_opts co = {.threads = 2, .seed = 1};
    fc_ctx *ctx = fc_ctx_new(&co);
    assert_non_null(ctx);
    /* the leaf shape for each view */
    static const int64_t leaf3[4][3] = {{3, 4, 5}, {4, 3, 5}, {3, 4, 7}, {1, 4, 5}};
    gc_case cases[] = {{"cumsum axis 1", FCT_V_CONTIG, 1}, {"cumsum axis 2", FCT_V_CONTIG, 2}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int v = FCT_V_CONTIG; v <= FCT_V_BROADCAST; v++) {
            cases[k].view = (enum fct_view)v;
            fc_scope_begin(ctx);
            fc_tensor *x = fct_random_f64(ctx, leaf3[v], 3, 116 + k, -1, 1);
            fc_gradcheck_opts o = {.check_all_f64 = true, .seed = 9};
            fc_gradcheck_report rep;
            fc_status st = fc_gradcheck(ctx, apply, &cases[k], &x, 1, &o, &rep);
            if (st != FC_OK) fail_msg("%s (view %d): %s", cases[k].name, v, fc_ctx_error(ctx));
            assert_true(rep.passed);
            assert_true(rep.checked > 0);
            fc_scope_end(ctx);
        }
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_cumsum),
        cmocka_unit_test(test_grad_cumsum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
