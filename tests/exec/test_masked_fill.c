/* test_masked_fill.c - fc_masked_fill's layouts (src/exec/kernels/compare.c).
 *
 * The fast path (x contiguous, a contiguous one-byte mask whose shape is
 * x's trailing shape, leading 1s allowed) and the generic strided walk
 * must give the same elements: every case is checked against a reference
 * that broadcasts the mask by index arithmetic and reads it by truthiness,
 * and each fast-path case is repeated on a non-contiguous view holding the
 * same values (which must take the generic path) and compared bit for bit.
 * Cases: element sizes 1, 2, 4 and 8, bool/u8/i8 masks with bytes other
 * than 0/1, odd shapes whose thread slices start inside a mask row block,
 * and layouts off the fast path (middle broadcast axis, a wider mask dtype,
 * a transposed mask). The backward (masked_fill of the output gradient)
 * is checked on the attention shape's odd cousin. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fct_f64.h"

typedef struct mf_case {
    fc_dtype dt, mdt;
    int xr, mr;
    int64_t xs[4], ms[4];
    double fill;
} mf_case;

/* Reference: the mask element that x's element i reads (right-aligned
 * broadcast), by truthiness. */
static bool ref_masked(const mf_case *c, const double *m, int64_t i) {
    int64_t idx[4], rem = i;
    for (int d = c->xr - 1; d >= 0; d--) {
        idx[d] = rem % c->xs[d];
        rem /= c->xs[d];
    }
    int64_t mi = 0;
    for (int d = 0; d < c->mr; d++) {
        int64_t xi = idx[d + c->xr - c->mr];
        mi = mi * c->ms[d] + (c->ms[d] == 1 ? 0 : xi);
    }
    return m[mi] != 0.0;
}

static double *run_case(fc_ctx *ctx, const mf_case *c, bool x_view, bool mask_view) {
    int64_t n = 1, mn = 1;
    for (int d = 0; d < c->xr; d++)
        n *= c->xs[d];
    for (int d = 0; d < c->mr; d++)
        mn *= c->ms[d];
    double *xv = malloc(sizeof *xv * (size_t)n), *mv = malloc(sizeof *mv * (size_t)mn);
    fill_random(xv, n, 17, -4.0, 4.0);
    for (int64_t i = 0; i < n; i++)
        xv[i] = c->dt == FC_I8 ? round(xv[i]) : (float)xv[i];
    /* mask bytes other than 0/1 where the dtype has them; -0.0 is false and
     * NaN true for a float mask */
    static const double u8v[4] = {0, 1, 2, 200}, i8v[4] = {0, -1, 3, 1},
                        f32v[4] = {0.0, -0.0, 0.5, NAN}, boolv[4] = {0, 1, 0, 1};
    const double *pick = c->mdt == FC_U8    ? u8v
                         : c->mdt == FC_I8  ? i8v
                         : c->mdt == FC_F32 ? f32v
                                            : boolv;
    uint64_t s = 99;
    for (int64_t i = 0; i < mn; i++)
        mv[i] = pick[fc_test_splitmix64(&s) % 4];
    fc_scope_begin(ctx);
    fc_tensor *x = from_f64(ctx, c->dt, c->xs, c->xr, xv);
    fc_tensor *m = from_f64(ctx, c->mdt, c->ms, c->mr, mv);
    if (x_view) { /* same logical values, transposed storage */
        x = fc_transpose(ctx, fc_contiguous(ctx, fc_transpose(ctx, x, 0, c->xr - 1)), 0, c->xr - 1);
        assert_false(fc_tensor_is_contiguous(x));
    }
    if (mask_view) {
        m = fc_transpose(ctx, fc_contiguous(ctx, fc_transpose(ctx, m, 0, c->mr - 1)), 0, c->mr - 1);
        assert_false(fc_tensor_is_contiguous(m));
    }
    /* the reference reads x as stored (rounded to its dtype) */
    double *xr = values(x);
    memcpy(xv, xr, sizeof *xv * (size_t)n);
    free(xr);
    fc_tensor *out = fc_masked_fill(ctx, x, m, c->fill);
    assert_non_null(out);
    assert_int_equal(fc_tensor_dtype(out), c->dt);
    double *got = values(out);
    fc_scope_end(ctx);
    for (int64_t i = 0; i < n; i++) {
        double want = ref_masked(c, mv, i) ? c->fill : xv[i];
        if (!(got[i] == want || (isnan(want) && isnan(got[i]))))
            fail_msg("element %lld: got %g want %g", (long long)i, got[i], want);
    }
    free(xv);
    free(mv);
    return got;
}

static void check_case(const mf_case *c, bool fast) {
    for (int threads = 1; threads <= 2; threads++) {
        fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .seed = 1});
        assert_non_null(ctx);
        double *a = run_case(ctx, c, false, false);
        if (fast && c->xs[0] > 1 &&
            c->xs[c->xr - 1] > 1) { /* the generic path on a view gives the same bits */
            double *b = run_case(ctx, c, true, false);
            int64_t n = 1;
            for (int d = 0; d < c->xr; d++)
                n *= c->xs[d];
            assert_memory_equal(a, b, sizeof *a * (size_t)n);
            free(b);
        }
        if (c->mr >= 2 && c->ms[0] > 1 && c->ms[c->mr - 1] > 1)
            free(run_case(ctx, c, false, true)); /* a transposed mask */
        free(a);
        free_ctx(ctx);
    }
}

static void test_fast_layouts(void **state) {
    (void)state;
    const mf_case cases[] = {
        {FC_F32, FC_BOOL, 4, 2, {3, 2, 5, 7}, {5, 7}, -INFINITY},
        {FC_F32, FC_U8, 4, 4, {3, 2, 5, 7}, {1, 1, 5, 7}, 1.5},
        {FC_F64, FC_BOOL, 2, 1, {4, 7}, {7}, -2.25},
        {FC_F16, FC_I8, 2, 2, {6, 5}, {6, 5}, 2.5},
        {FC_I8, FC_U8, 2, 1, {3, 9}, {9}, -7},
        {FC_BF16, FC_BOOL, 3, 3, {2, 3, 1}, {1, 3, 1}, 0.5},
        /* 85827 elements: two threads split inside a 4087-element mask block */
        {FC_F32, FC_BOOL, 4, 2, {7, 3, 61, 67}, {61, 67}, -INFINITY},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i], true);
}

static void test_generic_layouts(void **state) {
    (void)state;
    const mf_case cases[] = {
        {FC_F32, FC_BOOL, 3, 2, {4, 5, 3}, {5, 1}, 9.0},    /* a middle broadcast axis */
        {FC_F32, FC_F32, 3, 2, {4, 5, 3}, {5, 3}, -1.0},    /* a four-byte mask */
        {FC_F64, FC_BOOL, 3, 3, {2, 5, 3}, {2, 1, 3}, 3.0}, /* leading axis not broadcast */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i], false);
}

/* The gradient is masked_fill(g, mask, 0): zero where filled, g elsewhere. */
static void test_backward(void **state) {
    (void)state;
    const int64_t xs[4] = {5, 3, 33, 35}, ms[2] = {33, 35};
    int64_t n = 5 * 3 * 33 * 35;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 1});
    fc_scope_begin(ctx);
    fc_tensor *x = fc_zeros(ctx, FC_F32, xs, 4);
    assert_int_equal(fc_requires_grad(x, true), FC_OK);
    fc_tensor *mask = fc_logical_not(ctx, fc_tril(ctx, fc_ones(ctx, FC_F32, ms, 2), 0));
    fc_tensor *y = fc_masked_fill(ctx, x, mask, -INFINITY);
    double *gv = malloc(sizeof *gv * (size_t)n);
    fill_random(gv, n, 5, -1.0, 1.0);
    fc_tensor *g = from_f64(ctx, FC_F32, xs, 4, gv);
    assert_int_equal(fc_backward_with(ctx, y, g, false), FC_OK);
    double *got = values(fc_grad(x));
    for (int64_t i = 0; i < n; i++) {
        int64_t col = i % 35, row = (i / 35) % 33;
        double want = col > row ? 0.0 : (double)(float)gv[i];
        if (got[i] != want) fail_msg("element %lld: got %g want %g", (long long)i, got[i], want);
    }
    free(got);
    free(gv);
    fc_zero_grad(&x, 1);
    fc_scope_end(ctx);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_layouts),
        cmocka_unit_test(test_generic_layouts),
        cmocka_unit_test(test_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
