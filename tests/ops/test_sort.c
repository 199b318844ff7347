/* SPDX-License-Identifier: MIT */
/* test_sort.c - fc_sort, fc_argsort and fc_topk (src/ops/sort.c).
 *
 * Values and indices against a plain stable insertion sort written here
 * (every scalar dtype family, every axis, both directions, contiguous,
 * transposed and strided inputs, ties and NaN), against PyTorch's
 * sort(stable=True) and topk (tests/data/sort/torch_sort.txt, from
 * scripts/gen_sort_ref.py), every k of topk, exact i64 ordering beyond 2^53, the gradient
 * (a known scatter, fc_gradcheck, fc_gradgradcheck with a leaf and a
 * constant grad_output), every bad input with its status, and an OOM
 * sweep. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fct_f64.h"
#include "fct_tensor.h"
#include "fucina.h"
#include "oom_sweep.h"

static fc_ctx *new_ctx(void) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 3});
    assert_non_null(ctx);
    return ctx;
}

/* ---- the reference ------------------------------------------------------------------------- */

/* a strictly before b: NaN is larger than every number */
static bool ref_before(double a, double b, bool desc) {
    if (desc) return a > b || (isnan(a) && !isnan(b));
    return a < b || (isnan(b) && !isnan(a));
}

/* Stable insertion sort of the n values v (stride s) into perm. */
static void ref_sort(const double *v, int64_t s, int64_t n, bool desc, int64_t *perm) {
    for (int64_t i = 0; i < n; i++) {
        int64_t j = i;
        while (j > 0 && ref_before(v[i * s], v[perm[j - 1] * s], desc)) {
            perm[j] = perm[j - 1];
            j--;
        }
        perm[j] = i;
    }
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static bool same_value(double a, double b) {
    return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
}

/* Checks vals/idx (axis dim k) against the reference of x along axis. */
static void check_against_ref(fc_tensor *x, int axis, int64_t k, bool desc, bool sorted,
                              fc_tensor *vals, fc_tensor *idx) {
    int rank = fc_tensor_rank(x);
    const int64_t *sh = fc_tensor_shape(x);
    int64_t n = fc_tensor_numel(x), D = sh[axis], I = 1;
    for (int d = axis + 1; d < rank; d++)
        I *= sh[d];
    assert_int_equal(fc_tensor_dtype(idx), FC_I64);
    assert_int_equal(fc_tensor_rank(idx), rank);
    for (int d = 0; d < rank; d++)
        assert_int_equal(fc_tensor_dim(idx, d), d == axis ? k : sh[d]);
    double *xv = malloc(sizeof(double) * (size_t)(n + 1)), *vv = NULL;
    int64_t *iv = malloc(sizeof(int64_t) * (size_t)(n + 1)), *perm = malloc(8 * (size_t)(D + 1));
    assert_int_equal(fct_read(x, xv, n), n);
    int64_t m = fc_tensor_numel(idx);
    assert_int_equal(fc_tensor_copy_out(iv, 8 * (size_t)m, fc_contiguous(fc_tensor_ctx(x), idx)),
                     FC_OK);
    if (vals) {
        assert_int_equal(fc_tensor_dtype(vals), fc_tensor_dtype(x));
        vv = malloc(sizeof(double) * (size_t)(m + 1));
        assert_int_equal(fct_read(vals, vv, m), m);
    }
    for (int64_t f = 0; f < n / (D ? D : 1) && D; f++) {
        int64_t o = f / I, i = f % I, base = o * D * I + i, ob = o * k * I + i;
        ref_sort(xv + base, I, D, desc, perm);
        if (!sorted) qsort(perm, (size_t)k, sizeof *perm, cmp_i64);
        for (int64_t j = 0; j < k; j++) {
            if (iv[ob + j * I] != perm[j])
                fail_msg("axis %d desc %d fiber %lld: index %lld is %lld, want %lld", axis, desc,
                         (long long)f, (long long)j, (long long)iv[ob + j * I], (long long)perm[j]);
            if (vv && !same_value(vv[ob + j * I], xv[base + perm[j] * I]))
                fail_msg("axis %d fiber %lld: value %lld is %g, want %g", axis, (long long)f,
                         (long long)j, vv[ob + j * I], xv[base + perm[j] * I]);
        }
    }
    free(xv);
    free(vv);
    free(iv);
    free(perm);
}

/* ---- values and indices ------------------------------------------------------------------- */

static const fc_dtype all_dtypes[] = {FC_F32, FC_F64, FC_F16, FC_BF16, FC_I8,   FC_I16,
                                      FC_I32, FC_I64, FC_U8,  FC_U16,  FC_BOOL, FC_F8_E4M3};

/* Values from a small set (many ties), NaN for float dtypes. */
static void tie_values(fc_dtype dt, double *v, int64_t n, uint64_t seed) {
    bool fl = fc_dtype_is_float(dt) || fc_dtype_is_f8(dt);
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = fc_test_splitmix64(&seed) % 9;
        if (dt == FC_BOOL)
            v[i] = (double)(r & 1);
        else if (dt == FC_U8 || dt == FC_U16)
            v[i] = (double)r;
        else if (fl && r == 8)
            v[i] = NAN;
        else
            v[i] = (double)r - 4 + (fl ? 0.5 : 0);
    }
}

static void test_sort_matches_reference(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    const int64_t shape[3] = {4, 5, 6};
    double v[120];
    for (size_t t = 0; t < sizeof all_dtypes / sizeof all_dtypes[0]; t++) {
        fc_dtype dt = all_dtypes[t];
        tie_values(dt, v, 120, 7 + t);
        for (int lay = 0; lay < FCT_LAYOUT_COUNT; lay++) {
            fc_scope_begin(ctx);
            fc_tensor *x = fct_make(ctx, dt, shape, 3, v, (fct_layout)lay);
            assert_non_null(x);
            for (int axis = -1; axis < 3; axis++) {
                int a = axis < 0 ? 2 : axis;
                for (int desc = 0; desc < 2; desc++) {
                    fc_tensor *idx = NULL;
                    fc_tensor *vals = fc_sort(ctx, x, axis, desc, &idx);
                    if (!vals) fail_msg("%s: %s", fc_dtype_name(dt), fc_ctx_error(ctx));
                    check_against_ref(x, a, shape[a], desc, true, vals, idx);
                    fc_tensor *as = fc_argsort(ctx, x, axis, desc);
                    assert_non_null(as);
                    check_against_ref(x, a, shape[a], desc, true, NULL, as);
                    for (int64_t k = 1; k <= shape[a]; k += 2) {
                        for (int s = 0; s < 2; s++) {
                            fc_tensor *ti = NULL;
                            fc_tensor *tv = fc_topk(ctx, x, k, axis, desc, s, &ti);
                            if (!tv) fail_msg("topk k %lld: %s", (long long)k, fc_ctx_error(ctx));
                            check_against_ref(x, a, k, desc, s, tv, ti);
                        }
                    }
                }
            }
            fc_scope_end(ctx);
        }
    }
    free_ctx(ctx);
}

static void read_i64(fc_tensor *t, int64_t *out, size_t n) {
    assert_int_equal(fc_tensor_copy_out(out, 8 * n, t), FC_OK);
}

static void test_sort_stable_ties(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_scope_begin(ctx);
    fc_tensor *x =
        fc_tensor_from_data(ctx, FC_F32, (int64_t[]){6}, 1, (float[]){2, 1, 2, 1, 2, -0.0f});
    int64_t i[6];
    read_i64(fc_argsort(ctx, x, 0, false), i, 6);
    assert_memory_equal(i, ((int64_t[]){5, 1, 3, 0, 2, 4}), sizeof i);
    read_i64(fc_argsort(ctx, x, 0, true), i, 6);
    assert_memory_equal(i, ((int64_t[]){0, 2, 4, 1, 3, 5}), sizeof i);
    fc_tensor *ti = NULL;
    assert_non_null(fc_topk(ctx, x, 2, 0, true, true, &ti)); /* ties: the earlier positions */
    read_i64(ti, i, 2);
    assert_memory_equal(i, ((int64_t[]){0, 2}), 2 * sizeof(int64_t));
    fc_scope_end(ctx);
    free_ctx(ctx);
}

static void test_sort_nan_is_largest(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_scope_begin(ctx);
    fc_tensor *x =
        fc_tensor_from_data(ctx, FC_F64, (int64_t[]){5}, 1, (double[]){NAN, 1, INFINITY, NAN, 0});
    int64_t i[5];
    double v[5];
    fc_tensor *idx = NULL, *vals = fc_sort(ctx, x, 0, false, &idx);
    read_i64(idx, i, 5);
    assert_memory_equal(i, ((int64_t[]){4, 1, 2, 0, 3}), sizeof i);
    assert_int_equal(fc_tensor_copy_out(v, sizeof v, vals), FC_OK);
    assert_true(v[0] == 0 && v[1] == 1 && v[2] == INFINITY && isnan(v[3]) && isnan(v[4]));
    read_i64(fc_argsort(ctx, x, 0, true), i, 5);
    assert_memory_equal(i, ((int64_t[]){0, 3, 2, 1, 4}), sizeof i);
    fc_scope_end(ctx);
    free_ctx(ctx);
}

/* i64 keys compare as integers, not through double (2^62 + 1 and 2^62 are
 * one double). */
static void test_sort_i64_exact(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_scope_begin(ctx);
    const int64_t big = (int64_t)1 << 62;
    fc_tensor *x = fc_tensor_from_data(ctx, FC_I64, (int64_t[]){4}, 1,
                                       (int64_t[]){big + 1, big, INT64_MIN, big + 1});
    int64_t i[4], v[4];
    fc_tensor *idx = NULL, *vals = fc_sort(ctx, x, 0, false, &idx);
    read_i64(idx, i, 4);
    read_i64(vals, v, 4);
    assert_memory_equal(i, ((int64_t[]){2, 1, 0, 3}), sizeof i);
    assert_memory_equal(v, ((int64_t[]){INT64_MIN, big, big + 1, big + 1}), sizeof v);
    fc_scope_end(ctx);
    free_ctx(ctx);
}

/* ---- against PyTorch ------------------------------------------------------------------------ */

typedef struct fixture {
    char *text;
} fixture;

/* The n values of the line named name. */
static void fixture_get(const fixture *fx, const char *name, double *out, int64_t n) {
    size_t len = strlen(name);
    for (const char *p = fx->text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, name, len) || p[len] != ' ') continue;
        char *e;
        long long cnt = strtoll(p + len, &e, 10);
        assert_int_equal(cnt, n);
        for (int64_t i = 0; i < n; i++)
            out[i] = strtod(e, &e);
        return;
    }
    fail_msg("fixture line %s missing", name);
}

static void check_torch(fc_ctx *ctx, const fixture *fx, const char *tag, fc_tensor *v,
                        fc_tensor *i) {
    char name[80];
    int64_t n = fc_tensor_numel(v);
    double want[32], got[32];
    int64_t gi[32];
    assert_true(n <= 32);
    snprintf(name, sizeof name, "%s_v", tag);
    fixture_get(fx, name, want, n);
    assert_int_equal(fct_read(v, got, 32), n);
    for (int64_t k = 0; k < n; k++)
        if (!same_value(got[k], fct_round(fc_tensor_dtype(v), want[k])))
            fail_msg("%s[%lld] = %g, torch %g", name, (long long)k, got[k], want[k]);
    snprintf(name, sizeof name, "%s_i", tag);
    fixture_get(fx, name, want, n);
    read_i64(fc_contiguous(ctx, i), gi, (size_t)n);
    for (int64_t k = 0; k < n; k++)
        if ((double)gi[k] != want[k])
            fail_msg("%s[%lld] = %lld, torch %g", name, (long long)k, (long long)gi[k], want[k]);
}

static void test_sort_matches_torch(void **state) {
    (void)state;
    size_t size;
    fixture fx = {fc_test_read_file(FUCINA_TEST_DATA_DIR, "sort/torch_sort.txt", &size)};
    assert_non_null(fx.text);
    fx.text = realloc(fx.text, size + 1);
    fx.text[size] = 0;
    fc_ctx *ctx = new_ctx();
    fc_scope_begin(ctx);
    double xv[21], yv[21];
    fixture_get(&fx, "x", xv, 21);
    fixture_get(&fx, "y", yv, 21);
    const int64_t sh[2] = {3, 7};
    fc_tensor *x = from_f64(ctx, FC_F32, sh, 2, xv), *y = from_f64(ctx, FC_F32, sh, 2, yv);
    fc_tensor *i = NULL, *v;
    char tag[64];
    for (int axis = 0; axis < 2; axis++)
        for (int desc = 0; desc < 2; desc++) {
            v = fc_sort(ctx, x, axis, desc, &i);
            snprintf(tag, sizeof tag, "sort_a%d_%s", axis, desc ? "desc" : "asc");
            check_torch(ctx, &fx, tag, v, i);
        }
    for (int largest = 1; largest >= 0; largest--) {
        v = fc_topk(ctx, y, 3, 1, largest, true, &i);
        snprintf(tag, sizeof tag, "topk3_a1_%s", largest ? "largest" : "smallest");
        check_torch(ctx, &fx, tag, v, i);
        v = fc_topk(ctx, y, 2, 0, largest, true, &i);
        snprintf(tag, sizeof tag, "topk2_a0_%s", largest ? "largest" : "smallest");
        check_torch(ctx, &fx, tag, v, i);
    }
    fc_scope_end(ctx);
    free_ctx(ctx);
    free(fx.text);
}

/* ---- gradients ------------------------------------------------------------------------------ */

/* The gradient of each value lands where the value came from. */
static void test_sort_grad_scatters_back(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_scope_begin(ctx);
    fc_tensor *x = fc_param_from_data(ctx, FC_F32, (int64_t[]){4}, 1, (float[]){3, 1, 2, 0});
    fc_tensor *g = fc_tensor_from_data(ctx, FC_F32, (int64_t[]){2}, 1, (float[]){10, 20});
    fc_tensor *v = fc_topk(ctx, x, 2, 0, true, true, NULL); /* 3 (pos 0), 2 (pos 2) */
    assert_non_null(v);
    assert_true(fc_tensor_requires_grad(v));
    assert_int_equal(fc_backward_with(ctx, v, g, false), FC_OK);
    float gx[4];
    assert_int_equal(fc_tensor_copy_out(gx, sizeof gx, fc_grad(x)), FC_OK);
    assert_memory_equal(gx, ((float[]){10, 0, 20, 0}), sizeof gx);
    /* integer sorts record nothing; argsort never does */
    assert_false(fc_tensor_requires_grad(fc_argsort(ctx, x, 0, false)));
    fc_scope_end(ctx);
    free_ctx(ctx);
}

typedef struct gc_case {
    const char *name;
    int kind; /* 0 sort, 1 topk sorted, 2 topk unsorted */
    int axis;
    bool desc, transpose;
    int64_t k;
} gc_case;

static fc_tensor *gc_apply(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    const gc_case *c = user;
    fc_tensor *x = c->transpose ? fc_transpose(ctx, in[0], 0, 1) : in[0];
    if (c->kind == 0) return fc_sort(ctx, x, c->axis, c->desc, NULL);
    return fc_topk(ctx, x, c->k, c->axis, c->desc, c->kind == 1, NULL);
}

static const gc_case gc_cases[] = {
    {"sort_a1_asc", 0, 1, false, false, 0},    {"sort_a0_desc", 0, 0, true, false, 0},
    {"sort_t_a1", 0, -1, false, true, 0},      {"topk2_a1", 1, 1, true, false, 2},
    {"topk3_a0_small", 1, 0, false, false, 3}, {"topk2_unsorted", 2, 1, true, true, 2},
};

static void test_sort_gradcheck(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    double v[20];
    for (int i = 0; i < 20; i++) /* distinct, gaps of >= 0.1: no tie within eps */
        v[i] = (double)((i * 7) % 20) * 0.1 - 1.0;
    for (size_t c = 0; c < sizeof gc_cases / sizeof gc_cases[0]; c++) {
        fc_scope_begin(ctx);
        fc_tensor *x = fc_tensor_from_data(ctx, FC_F64, (int64_t[]){4, 5}, 2, v);
        fc_gradcheck_opts o = {.check_all_f64 = true, .seed = 9};
        fc_gradcheck_report rep;
        fc_status st = fc_gradcheck(ctx, gc_apply, (void *)&gc_cases[c], &x, 1, &o, &rep);
        if (st != FC_OK || !rep.passed) fail_msg("%s: %s", gc_cases[c].name, fc_ctx_error(ctx));
        for (int cg = 0; cg < 2; cg++) {
            o.constant_grad_output = cg;
            st = fc_gradgradcheck(ctx, gc_apply, (void *)&gc_cases[c], &x, 1, &o, &rep);
            if (st != FC_OK || !rep.passed)
                fail_msg("%s gradgrad (constant %d): %s", gc_cases[c].name, cg, fc_ctx_error(ctx));
            assert_true(rep.checked > 0);
        }
        fc_scope_end(ctx);
    }
    free_ctx(ctx);
}

/* ---- bad input ------------------------------------------------------------------------------ */

static void expect_fail(fc_ctx *ctx, fc_tensor *r, fc_status want, const char *op) {
    assert_null(r);
    assert_int_equal(fc_ctx_status(ctx), want);
    if (op && !strstr(fc_ctx_error(ctx), op))
        fail_msg("message '%s' lacks %s", fc_ctx_error(ctx), op);
    fc_ctx_clear_error(ctx);
}

static void test_sort_bad_input(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_scope_begin(ctx);
    fc_tensor *x = fc_ones(ctx, FC_F32, (int64_t[]){2, 32}, 2);
    fc_tensor *q = fc_to(ctx, x, FC_Q8_0);
    assert_non_null(q);
    fc_tensor *idx = x; /* must come back NULL on every failure */
    assert_null(fc_sort(NULL, x, 0, false, &idx));
    assert_null(idx);
    assert_null(fc_argsort(NULL, x, 0, false));
    assert_null(fc_topk(NULL, x, 1, 0, true, true, NULL));
    idx = x;
    expect_fail(ctx, fc_sort(ctx, NULL, 0, false, &idx), FC_ERR_NULL_ARG, "sort");
    assert_null(idx);
    expect_fail(ctx, fc_argsort(ctx, NULL, 0, false), FC_ERR_NULL_ARG, "argsort");
    expect_fail(ctx, fc_topk(ctx, NULL, 1, 0, true, true, NULL), FC_ERR_NULL_ARG, "topk");
    expect_fail(ctx, fc_sort(ctx, q, 1, false, NULL), FC_ERR_DTYPE, "sort");
    expect_fail(ctx, fc_argsort(ctx, q, 1, false), FC_ERR_DTYPE, "argsort");
    expect_fail(ctx, fc_topk(ctx, q, 1, 1, true, true, NULL), FC_ERR_DTYPE, "topk");
    expect_fail(ctx, fc_sort(ctx, x, 2, false, NULL), FC_ERR_AXIS, "sort");
    expect_fail(ctx, fc_sort(ctx, x, -3, false, NULL), FC_ERR_AXIS, "sort");
    expect_fail(ctx, fc_argsort(ctx, x, 2, true), FC_ERR_AXIS, "argsort");
    expect_fail(ctx, fc_sort(ctx, fc_scalar(ctx, FC_F32, 1), 1, false, NULL), FC_ERR_AXIS, "sort");
    expect_fail(ctx, fc_topk(ctx, x, 1, 2, true, true, NULL), FC_ERR_AXIS, "topk");
    idx = x;
    expect_fail(ctx, fc_topk(ctx, x, 33, 1, true, true, &idx), FC_ERR_INVALID_ARG, "topk");
    assert_null(idx);
    expect_fail(ctx, fc_topk(ctx, x, 3, 0, true, true, NULL), FC_ERR_INVALID_ARG, "k is 3");
    expect_fail(ctx, fc_topk(ctx, x, -1, 1, false, false, NULL), FC_ERR_INVALID_ARG, "topk");
    expect_fail(ctx, fc_topk(ctx, x, 0, 1, true, true, NULL), FC_ERR_INVALID_ARG, "k is 0");
    assert_non_null(fc_topk(ctx, x, 32, 1, true, true, NULL)); /* k = the dim is fine */
    fc_scope_end(ctx);
    free_ctx(ctx);
}

/* ---- out of memory -------------------------------------------------------------------------- */

static fc_status sc_sort(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){3, 4, 5}, 3, 1.0);
    fc_tensor *i = NULL;
    fc_tensor *s = fc_sort(ctx, fc_transpose(ctx, x, 0, 2), 1, true, &i);
    fc_tensor *t = fc_topk(ctx, x, 2, 2, true, false, NULL);
    fc_argsort(ctx, fc_arange(ctx, FC_I32, 0, 20, 1), 0, true);
    fc_tensor *l = fc_add(ctx, fc_sum(ctx, s, NULL, 0, false), fc_sum(ctx, t, NULL, 0, false));
    fc_status st = fc_ctx_status(ctx);
    if (st == FC_OK) st = fc_backward(ctx, l);
    fc_scope_end(ctx);
    return st;
}

static void test_sort_oom_sweep(void **state) {
    (void)state;
    const oom_scenario s = {"sort", sc_sort};
    oom_result r = oom_sweep(&s);
    printf("oom sweep: sort completed at N=%ld after %ld faulted runs\n", r.largest_n, r.failures);
    assert_true(r.largest_n > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sort_matches_reference),
        cmocka_unit_test(test_sort_stable_ties),
        cmocka_unit_test(test_sort_nan_is_largest),
        cmocka_unit_test(test_sort_i64_exact),
        cmocka_unit_test(test_sort_matches_torch),
        cmocka_unit_test(test_sort_grad_scatters_back),
        cmocka_unit_test(test_sort_gradcheck),
        cmocka_unit_test(test_sort_bad_input),
        cmocka_unit_test(test_sort_oom_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
