/* SPDX-License-Identifier: MIT */
/* test_mask.c - triu, tril and dropout (src/ops/mask.c over
 * src/exec/kernels/mask.c), forward and backward.
 *
 * triu/tril are checked on every scalar dtype and layout, batched and not,
 * for diagonal offsets from far below to far above (INT64_MIN/MAX
 * included), against "keep when j - i >= k" (triu) / "<= k" (tril).
 * dropout is checked against its documented mask: element i is kept when
 * 32-bit word i % 4 of Philox(seed, offset + i / 4) is >= ceil(p * 2^32),
 * where offset is the context's stream position before the call; kept
 * values are x / (1 - p) computed in f32 (f64 for f64) and rounded once.
 * The mask must not depend on the thread count, and over many elements the
 * kept fraction must be 1 - p within five standard deviations. Gradients
 * are gradchecked in f64 (dropout in training and eval mode), and dropout's
 * f32 backward must reuse the forward's mask. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "counting_alloc.h"
#include "fct_scope_fixture.h"
#include "layout_helpers.h"

/* ---- triu / tril ---------------------------------------------------------------------------- */

static void check_triangle(const fc_tensor *x, const fc_tensor *y, int64_t k, bool upper) {
    int r = fc_tensor_rank(x);
    const int64_t *shape = fc_tensor_shape(x);
    int64_t idx[FC_MAX_RANK];
    assert_int_equal(fc_tensor_rank(y), r);
    for (int64_t f = 0; f < fc_tensor_numel(x); f++) {
        lh_unravel(f, shape, r, idx);
        int64_t diff = idx[r - 1] - idx[r - 2];
        bool keep = upper ? diff >= k : diff <= k;
        double want = keep ? lh_get(x, idx) : 0.0;
        if (lh_get(y, idx) != want) {
            print_message("%s k=%lld element %lld: %g, want %g\n", upper ? "triu" : "tril",
                          (long long)k, (long long)f, lh_get(y, idx), want);
            fail();
        }
    }
}

static void test_mask_triu_tril_values(void **state) {
    (void)state;
    const int64_t ks[] = {INT64_MIN, -5, -2, -1, 0, 1, 2, 5, INT64_MAX};
    const int64_t shapes[2][3] = {{2, 3, 4}, {5, 3, 1}};
    for (int d = 0; d < LH_NDTYPES; d++) {
        for (int l = 0; l < LH_LAYOUTS; l++) {
            for (int s = 0; s < 2; s++) {
                int rank = s == 0 ? 3 : 2;
                fc_tensor *x = lh_make(g_ctx, lh_all_dtypes[d], shapes[s], rank, l, 3);
                for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
                    for (int upper = 0; upper < 2; upper++) {
                        fc_tensor *y = upper ? fc_triu(g_ctx, x, ks[i]) : fc_tril(g_ctx, x, ks[i]);
                        assert_non_null(y);
                        assert_true(fc_tensor_is_contiguous(y));
                        check_triangle(x, y, ks[i], upper);
                        fc_release(y);
                    }
                }
                fc_release(x);
            }
        }
    }
    fc_tensor *v = fc_zeros(g_ctx, FC_F32, (const int64_t[]){4}, 1);
    assert_null(fc_triu(g_ctx, v, 0));
    expect_error(FC_ERR_RANK, "triu: f32[4] needs at least two axes");
    unsigned char b[36] = {0};
    fc_tensor *q = fc_tensor_from_data(g_ctx, FC_Q8_0, (const int64_t[]){1, 32}, 2, b);
    assert_null(fc_tril(g_ctx, q, 0));
    expect_error(FC_ERR_DTYPE, "tril");
    fc_ctx_fail(g_ctx, FC_ERR_IO, "earlier");
    assert_null(fc_triu(g_ctx, NULL, 0));
    assert_null(fc_tril(g_ctx, NULL, 0));
    assert_null(fc_dropout(g_ctx, NULL, 0.5, true));
    expect_error(FC_ERR_IO, "earlier");
    assert_null(fc_tril(g_ctx, NULL, 0));
    expect_error(FC_ERR_NULL_ARG, "tril");
    fc_release(q);
    fc_release(v);
}

/* ---- dropout -------------------------------------------------------------------------------- */

static bool reference_keep(uint64_t seed, uint64_t offset, int64_t i, double p) {
    uint32_t w[4];
    fc__philox(seed, offset + (uint64_t)i / 4, w);
    return (double)w[i % 4] >= ceil(p * 4294967296.0);
}

static void test_mask_dropout_matches_documented_mask(void **state) {
    (void)state;
    const fc_dtype dts[4] = {FC_F32, FC_F64, FC_F16, FC_BF16};
    const int64_t shape[3] = {3, 7, 5}; /* 105 elements: a partial group of four at the end */
    const double ps[3] = {0.1, 0.5, 0.9};
    int64_t idx[3];
    for (int d = 0; d < 4; d++) {
        for (int l = 0; l < LH_LAYOUTS; l++) {
            fc_tensor *x = lh_make(g_ctx, dts[d], shape, 3, l, 5);
            for (int pi = 0; pi < 3; pi++) {
                uint64_t seed, offset, after;
                fc_ctx_get_rng(g_ctx, &seed, &offset);
                fc_tensor *y = fc_dropout(g_ctx, x, ps[pi], true);
                assert_non_null(y);
                assert_int_equal(fc_tensor_dtype(y), dts[d]);
                fc_ctx_get_rng(g_ctx, &seed, &after);
                assert_int_equal(after - offset, (105 + 3) / 4); /* one counter per 4 elements */
                double scale = 1.0 / (1.0 - ps[pi]);
                for (int64_t f = 0; f < 105; f++) {
                    lh_unravel(f, shape, 3, idx);
                    double xv = lh_get(x, idx), want = 0.0;
                    if (reference_keep(seed, offset, f, ps[pi])) {
                        if (dts[d] == FC_F64) {
                            want = xv * scale;
                        } else { /* f32 product, rounded once into the dtype */
                            float prod = (float)xv * (float)scale;
                            unsigned char b[8];
                            fc_cast_scalar(FC_F32, &prod, dts[d], b);
                            fc_cast_scalar(dts[d], b, FC_F64, &want);
                        }
                    }
                    if (lh_get(y, idx) != want) {
                        print_message("%s p=%g element %lld: %g, want %g\n", fc_dtype_name(dts[d]),
                                      ps[pi], (long long)f, lh_get(y, idx), want);
                        fail();
                    }
                }
                fc_release(y);
            }
            fc_release(x);
        }
    }
}

static void test_mask_dropout_reproducible_any_thread_count(void **state) {
    (void)state;
    const int64_t shape[2] = {64, 1000};
    fc_tensor *x = fc_ones(g_ctx, FC_F32, shape, 2);
    fc_tensor *first = NULL;
    for (int threads = 1; threads <= 4; threads++) {
        fc_ctx_set_threads(g_ctx, threads);
        fc_ctx_set_rng(g_ctx, 1234, 99);
        fc_tensor *y = fc_dropout(g_ctx, x, 0.3, true);
        if (!first) {
            first = y;
        } else {
            assert_memory_equal(fc_tensor_data(y), fc_tensor_data(first), 64 * 1000 * 4);
            fc_release(y);
        }
    }
    /* the stream moves on: the next call draws a different mask */
    fc_tensor *next = fc_dropout(g_ctx, x, 0.3, true);
    assert_memory_not_equal(fc_tensor_data(next), fc_tensor_data(first), 64 * 1000 * 4);
    fc_release(next);
    fc_release(first);
    fc_release(x);
}

static void test_mask_dropout_keeps_one_minus_p(void **state) {
    (void)state;
    const int64_t n = 200000;
    fc_tensor *x = fc_ones(g_ctx, FC_F32, &n, 1);
    const double ps[3] = {0.05, 0.25, 0.8};
    for (int i = 0; i < 3; i++) {
        fc_tensor *y = fc_dropout(g_ctx, x, ps[i], true);
        const float *v = fc_tensor_data(y);
        int64_t kept = 0;
        float scale = (float)(1.0 / (1.0 - ps[i]));
        for (int64_t k = 0; k < n; k++) {
            assert_true(v[k] == 0.0f || v[k] == scale);
            kept += v[k] != 0.0f;
        }
        double frac = (double)kept / (double)n, q = 1.0 - ps[i];
        double sd = sqrt(q * (1.0 - q) / (double)n);
        if (fabs(frac - q) > 5 * sd) {
            print_message("p=%g: kept %.5f, want %.5f +- %.5f\n", ps[i], frac, q, 5 * sd);
            fail();
        }
        fc_release(y);
    }
    fc_release(x);
}

static void test_mask_dropout_identity_and_errors(void **state) {
    (void)state;
    fc_tensor *x = lh_make(g_ctx, FC_F32, (const int64_t[]){4, 3}, 2, LH_TRANSPOSED, 1);
    uint64_t seed, before, after;
    fc_ctx_get_rng(g_ctx, &seed, &before);
    fc_tensor *a = fc_dropout(g_ctx, x, 0.5, false), *b = fc_dropout(g_ctx, x, 0.0, true);
    fc_ctx_get_rng(g_ctx, &seed, &after);
    assert_int_equal(before, after); /* the identity draws nothing */
    for (int i = 0; i < 2; i++) {
        fc_tensor *y = i ? b : a;
        assert_non_null(y);
        assert_ptr_not_equal(y, x);
        assert_ptr_equal(y->raw.buf, x->raw.buf); /* a view, not a copy */
        double want[12], got[12];
        lh_read(x, want);
        lh_read(y, got);
        assert_memory_equal(got, want, sizeof want);
    }
    fc_release(b);
    fc_release(a);
    const double bad[4] = {-0.1, 1.0, 1.5, NAN};
    for (int i = 0; i < 4; i++) {
        assert_null(fc_dropout(g_ctx, x, bad[i], true));
        expect_error(FC_ERR_INVALID_ARG, "dropout: p = ");
    }
    assert_null(fc_dropout(g_ctx, x, 1.0, false)); /* checked in eval mode too */
    expect_error(FC_ERR_INVALID_ARG, "is outside [0, 1)");
    fc_tensor *ix = fc_zeros(g_ctx, FC_I32, (const int64_t[]){3}, 1);
    assert_null(fc_dropout(g_ctx, ix, 0.5, true));
    expect_error(FC_ERR_DTYPE, "dropout: i32[3] is not a float tensor");
    fc_release(ix);
    fc_release(x);
}

/* ---- masks ---------------------------------------------------------------------------------- */

static fc_tensor *fn_triu(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n;
    int64_t k = *(const int64_t *)u;
    return fc_concat(c, (fc_tensor *[]){fc_triu(c, in[0], k), fc_tril(c, in[0], -k)}, 2, 0);
}
static fc_tensor *fn_dropout(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n;
    fc_ctx_set_rng(c, 5, 0); /* the same mask at every evaluation */
    return fc_dropout(c, fc_transpose(c, in[0], 0, 1), 0.4, u == NULL);
}

static void test_grad_masks(void **state) {
    (void)state;
    fc_ctx_set_rng(g_ctx, LH_GRAD_SEED, 0);
    const int64_t ks[3] = {-1, 0, 2};
    for (int i = 0; i < 3; i++)
        assert_true(lh_gradcheck(g_ctx, fn_triu, (void *)&ks[i],
                                 (fc_tensor *[]){lh_leaf(g_ctx, (const int64_t[]){2, 3, 4}, 3)}, 1,
                                 "triu/tril"));
    assert_true(lh_gradcheck(g_ctx, fn_dropout, NULL,
                             (fc_tensor *[]){lh_leaf(g_ctx, (const int64_t[]){6, 5}, 2)}, 1,
                             "dropout (training)"));
    assert_true(lh_gradcheck(g_ctx, fn_dropout, g_ctx,
                             (fc_tensor *[]){lh_leaf(g_ctx, (const int64_t[]){6, 5}, 2)}, 1,
                             "dropout (eval)"));

    /* f32 backward uses the forward's mask: grad = (y != 0) * scale */
    fc_tensor *x = fc_param_from_data(g_ctx, FC_F32, (const int64_t[]){1000}, 1, (float[1000]){0});
    fc_tensor *ones = fc_ones(g_ctx, FC_F32, (const int64_t[]){1000}, 1);
    fc_no_grad_begin(g_ctx); /* an in-place write to a parameter */
    assert_int_equal(fc_copy_(x, ones), FC_OK);
    fc_no_grad_end(g_ctx);
    fc_tensor *y = fc_dropout(g_ctx, x, 0.3, true);
    assert_int_equal(fc_backward_with(g_ctx, y, ones, false), FC_OK);
    const float *yv = fc_tensor_data(y), *gv = fc_tensor_data(fc_grad(x));
    float scale = (float)(1.0 / 0.7);
    int kept = 0;
    for (int i = 0; i < 1000; i++) {
        assert_true(gv[i] == (yv[i] != 0.0f ? scale : 0.0f));
        kept += yv[i] != 0.0f;
    }
    assert_true(kept > 500 && kept < 900);
    fc_zero_grad(&x, 1);
    fc_release(y);
    fc_release(ones);
    fc_release(x);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_mask_triu_tril_values),
        T(test_mask_dropout_matches_documented_mask),
        T(test_mask_dropout_reproducible_any_thread_count),
        T(test_mask_dropout_keeps_one_minus_p),
        T(test_mask_dropout_identity_and_errors),
        T(test_grad_masks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
