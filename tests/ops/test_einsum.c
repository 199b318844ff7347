/* SPDX-License-Identifier: MIT */
/* test_einsum.c - fc_einsum against PyTorch's torch.einsum (inputs and
 * results in tests/data/resample/torch_einsum.txt, from
 * scripts/gen_resample_ref.py), in f64 and f32, on strided operands, and
 * its gradient (lowered to recorded ops) by fc_gradcheck and
 * fc_gradgradcheck in f64 on every equation of the table. */
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
#include "fct_fixture.h"
#include "fct_grad.h"
#include "fucina.h"

/* Keep in step with EINSUM in scripts/gen_resample_ref.py. */
typedef struct ecase {
    const char *eq;
    int n;
    int rank[3];
    int64_t shape[3][4];
} ecase;

static const ecase cases[] = {
    {"ij,jk->ik", 2, {2, 2}, {{3, 4}, {4, 5}}},
    {"ij,jk", 2, {2, 2}, {{3, 4}, {4, 5}}},
    {"bij,bjk->bik", 2, {3, 3}, {{2, 3, 4}, {2, 4, 2}}},
    {"ii->i", 1, {2}, {{3, 3}}},
    {"ii", 1, {2}, {{3, 3}}},
    {"iij->ji", 1, {3}, {{3, 3, 2}}},
    {"iji->j", 1, {3}, {{3, 2, 3}}},
    {"...ij->...ji", 1, {3}, {{2, 3, 4}}},
    {"...ij,...jk", 2, {4, 3}, {{2, 1, 3, 4}, {5, 4, 2}}},
    {"...ij->ij", 1, {3}, {{2, 3, 4}}},
    {"i,i->i", 2, {1, 1}, {{1}, {3}}},
    {"ij,jk,kl->il", 3, {2, 2, 2}, {{2, 3}, {3, 4}, {4, 2}}},
    {"Ba,ab", 2, {2, 2}, {{2, 3}, {3, 4}}},
    {"i,j->ij", 2, {1, 1}, {{2}, {3}}},
    {"ijk->", 1, {3}, {{2, 3, 4}}},
    {"ij,ij->", 2, {2, 2}, {{3, 4}, {3, 4}}},
    {"bn,anm,bm->ba", 3, {2, 3, 2}, {{2, 3}, {4, 3, 5}, {2, 5}}},
    {" i j , j k -> k i ", 2, {2, 2}, {{3, 4}, {4, 2}}},
    {"ij,kj->ikj", 2, {2, 2}, {{2, 3}, {1, 3}}},
    {"a,b,c->cba", 3, {1, 1, 1}, {{2}, {3}, {2}}},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static char *fixture;

static int setup(void **state) {
    (void)state;
    fixture = fct_fixture_load("resample/torch_einsum.txt");
    return 0;
}
static int teardown(void **state) {
    (void)state;
    free(fixture);
    return 0;
}

/* The operands of case c from the fixture, in dtype dt. */
static void load_inputs(fc_ctx *ctx, int c, fc_dtype dt, fc_tensor **xs) {
    static double v[256];
    for (int k = 0; k < cases[c].n; k++) {
        char name[32];
        snprintf(name, sizeof name, "e%d_in%d", c, k);
        fct_fixture_get(fixture, name, v, 256);
        xs[k] = from_f64(ctx, dt, cases[c].shape[k], cases[c].rank[k], v);
    }
}

/* y against torch's result of case c: shape (a rank-0 result is [1]) and
 * values within tol of the largest. */
static void check_case(int c, fc_tensor *y, double tol) {
    char name[32];
    double shape[8], want[256];
    snprintf(name, sizeof name, "e%d_shape", c);
    int64_t r = fct_fixture_get(fixture, name, shape, 8);
    if (!y) fail_msg("%s: %s", cases[c].eq, fc_ctx_error(NULL));
    if (r == 0) {
        assert_int_equal(fc_tensor_rank(y), 1);
        assert_int_equal(fc_tensor_shape(y)[0], 1);
    } else {
        assert_int_equal(fc_tensor_rank(y), r);
        for (int64_t a = 0; a < r; a++)
            if (fc_tensor_shape(y)[a] != (int64_t)shape[a])
                fail_msg("%s: axis %lld is %lld, torch %g", cases[c].eq, (long long)a,
                         (long long)fc_tensor_shape(y)[a], shape[a]);
    }
    snprintf(name, sizeof name, "e%d_out", c);
    int64_t n = fct_fixture_get(fixture, name, want, 256);
    assert_int_equal(fc_tensor_numel(y), n);
    double *got = values(y);
    double scale = 1;
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(want[i]));
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol * scale))
            fail_msg("%s [%lld]: %.17g, torch %.17g", cases[c].eq, (long long)i, got[i], want[i]);
    free(got);
}

static void test_einsum_matches_torch(void **state) {
    (void)state;
    fc_ctx *ctx = fct_gc_ctx();
    for (int dti = 0; dti < 2; dti++) {
        fc_dtype dt = dti ? FC_F32 : FC_F64;
        for (int c = 0; c < N_CASES; c++) {
            fc_scope_begin(ctx);
            fc_tensor *xs[3];
            load_inputs(ctx, c, dt, xs);
            fc_tensor *y = fc_einsum(ctx, cases[c].eq, xs, cases[c].n);
            if (!y) fail_msg("%s: %s", cases[c].eq, fc_ctx_error(ctx));
            assert_int_equal(fc_tensor_dtype(y), dt);
            check_case(c, y, dt == FC_F64 ? 1e-12 : 2e-6);
            fc_scope_end(ctx);
        }
    }
    free_ctx(ctx);
}

/* Strided operands (a transposed copy of the data read back through a
 * transposed view) give torch's values too. */
static void test_einsum_strided_operands(void **state) {
    (void)state;
    fc_ctx *ctx = fct_gc_ctx();
    for (int c = 0; c < N_CASES; c++) {
        if (cases[c].rank[0] < 2) continue;
        fc_scope_begin(ctx);
        fc_tensor *xs[3];
        load_inputs(ctx, c, FC_F64, xs);
        int r = cases[c].rank[0];
        /* xs[0] = transpose(contiguous(transpose(x))): same values, strided */
        fc_tensor *t = fc_contiguous(ctx, fc_transpose(ctx, xs[0], 0, r - 1));
        xs[0] = fc_transpose(ctx, t, 0, r - 1);
        assert_false(fc_tensor_is_contiguous(xs[0]) && cases[c].shape[0][0] > 1 &&
                     cases[c].shape[0][r - 1] > 1);
        check_case(c, fc_einsum(ctx, cases[c].eq, xs, cases[c].n), 1e-12);
        fc_scope_end(ctx);
    }
    free_ctx(ctx);
}

/* "ij->ij" is a new handle (a view), not the caller's. */
static void test_einsum_identity_is_new_handle(void **state) {
    (void)state;
    fc_ctx *ctx = fct_gc_ctx();
    fc_tensor *x = fct_random_f64(ctx, (const int64_t[]){2, 3}, 2, 3, -1, 1);
    fc_tensor *y = fc_einsum(ctx, "ij->ij", &x, 1);
    assert_non_null(y);
    assert_ptr_not_equal(x, y);
    double *a = values(x), *b = values(y);
    assert_memory_equal(a, b, 6 * sizeof(double));
    free(a);
    free(b);
    fc_release(y);
    fc_release(x);
    free_ctx(ctx);
}

typedef struct gcase {
    int c;
    int view; /* fct_view of operand 0 */
} gcase;

static fc_tensor *apply(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    const gcase *g = user;
    fc_tensor *xs[3] = {NULL, NULL, NULL};
    for (int k = 0; k < n; k++)
        xs[k] = k == 0 ? fct_viewed(ctx, in[0], g->view) : fc_retain(in[k]);
    fc_tensor *y = fc_einsum(ctx, cases[g->c].eq, xs, n);
    for (int k = 0; k < n; k++)
        fc_release(xs[k]);
    return y;
}

/* The leaves of case c (f64, random); with view TRANSPOSE operand 0 is
 * stored transposed so that fct_viewed gives it its shape back. */
static void leaves(fc_ctx *ctx, int c, int view, fc_tensor **in) {
    for (int k = 0; k < cases[c].n; k++) {
        int64_t shape[4];
        memcpy(shape, cases[c].shape[k], sizeof shape);
        if (k == 0 && view == FCT_V_TRANSPOSE) {
            int64_t t = shape[0];
            shape[0] = shape[1], shape[1] = t;
        }
        in[k] = fct_random_f64(ctx, shape, cases[c].rank[k], 100 + 7 * (uint64_t)c + (uint64_t)k,
                               -1, 1);
    }
}

/* fc_gradcheck in f64 (every f64 input checked); fails naming the case. */
static void gradcheck_ok(fc_ctx *ctx, void *user, fc_tensor *const *in, int n, const char *what,
                         int c) {
    fc_gradcheck_opts o = {.check_all_f64 = true, .seed = 9};
    fc_gradcheck_report rep;
    fc_status st = fc_gradcheck(ctx, apply, user, in, n, &o, &rep);
    if (st != FC_OK) fail_msg("%s (%d): %s", what, c, fc_ctx_error(ctx));
    if (!rep.passed) fail_msg("%s (%d): gradcheck failed", what, c);
    assert_true(rep.checked > 0);
}

static void test_einsum_gradcheck(void **state) {
    (void)state;
    fc_ctx *ctx = fct_gc_ctx();
    for (int c = 0; c < N_CASES; c++)
        for (int view = FCT_V_CONTIG; view <= FCT_V_TRANSPOSE; view++) {
            if (view == FCT_V_TRANSPOSE && cases[c].rank[0] < 2) continue;
            gcase g = {c, view};
            fc_tensor *in[3];
            leaves(ctx, c, view, in);
            gradcheck_ok(ctx, &g, in, cases[c].n, cases[c].eq, view);
            for (int k = 0; k < cases[c].n; k++)
                fc_release(in[k]);
        }
    free_ctx(ctx);
}

static void test_einsum_gradgradcheck(void **state) {
    (void)state;
    fc_ctx *ctx = fct_gc_ctx();
    for (int c = 0; c < N_CASES; c++)
        for (int constant = 0; constant < 2; constant++) {
            gcase g = {c, FCT_V_CONTIG};
            fc_tensor *in[3];
            leaves(ctx, c, FCT_V_CONTIG, in);
            fc_gradcheck_opts o = {
                .check_all_f64 = true, .seed = 11, .constant_grad_output = constant};
            fc_gradcheck_report rep;
            fc_scope_begin(ctx);
            fc_status st = fc_gradgradcheck(ctx, apply, &g, in, cases[c].n, &o, &rep);
            fc_scope_end(ctx);
            if (st != FC_OK) fail_msg("%s: %s", cases[c].eq, fc_ctx_error(ctx));
            if (!rep.passed)
                fail_msg("%s (constant %d): gradgradcheck failed", cases[c].eq, constant);
            assert_true(rep.checked > 0);
            for (int k = 0; k < cases[c].n; k++)
                fc_release(in[k]);
        }
    free_ctx(ctx);
}

/* A bad equation names the string and the position in its message. */
static void test_einsum_messages(void **state) {
    (void)state;
    fc_ctx *ctx = fct_gc_ctx();
    fc_tensor *a = fct_random_f64(ctx, (const int64_t[]){2, 3}, 2, 1, -1, 1);
    fc_tensor *b = fct_random_f64(ctx, (const int64_t[]){4, 5}, 2, 2, -1, 1);
    fc_tensor *ab[2] = {a, b};
    assert_null(fc_einsum(ctx, "ij,j#->i", ab, 2));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "\"ij,j#->i\": position 4"));
    fc_ctx_clear_error(ctx);
    assert_null(fc_einsum(ctx, "ij,jk->ik", ab, 2));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(fc_ctx_error(ctx), "label 'j' has size 4 in operand 1"));
    assert_non_null(strstr(fc_ctx_error(ctx), "but 3"));
    fc_ctx_clear_error(ctx);
    assert_null(fc_einsum(ctx, "ij->iz", ab, 1));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "position 5: output subscript 'z'"));
    fc_ctx_clear_error(ctx);
    fc_release(a);
    fc_release(b);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_einsum_matches_torch),
        cmocka_unit_test(test_einsum_strided_operands),
        cmocka_unit_test(test_einsum_identity_is_new_handle),
        cmocka_unit_test(test_einsum_gradcheck),
        cmocka_unit_test(test_einsum_gradgradcheck),
        cmocka_unit_test(test_einsum_messages),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
