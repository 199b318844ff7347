/* SPDX-License-Identifier: MIT */
/* test_dist_ddp.c - the data-parallel wrapper (fc_ddp) as 2 ranks under
 * mpirun: the initial broadcast; bucketing (many small parameters and one
 * larger than a bucket, reverse registration order, f32 and f64 apart);
 * the mean gradient, exactly (each rank's loss is linear in the
 * parameters, so its gradient is a known constant per rank); parameters
 * reached by one rank only or by none; gradient accumulation with sync
 * off; and the refusals: parameter lists that differ across ranks (every
 * rank fails, naming the difference), a backward that failed on one rank
 * (every rank's sync fails and no gradient is averaged), two walks in one
 * step, bad options. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "counting_alloc.h"
#include "fct_f64.h"
#include "fucina.h"

static fc_ctx *g_ctx;
static fc_dist *g_d;
static int g_rank;

static void expect_err(fc_status got, fc_status want, const char *needle) {
    assert_int_equal(got, want);
    assert_int_equal(fc_ctx_status(g_ctx), want);
    if (needle && !strstr(fc_ctx_error(g_ctx), needle))
        fail_msg("rank %d: error \"%s\" lacks \"%s\"", g_rank, fc_ctx_error(g_ctx), needle);
    fc_ctx_clear_error(g_ctx);
}

/* coefficient j of parameter i on rank r (step s): the gradient of that
 * rank's loss */
static double coef(int r, int i, int64_t j, int s) {
    return sin(1.3 * i + 0.11 * (double)j + 2.1 * r + 0.7 * s) * (1 + i % 3);
}

typedef struct model {
    int n;
    fc_tensor *p[64];
} model;

static fc_tensor *param(fc_dtype dt, int64_t numel, double fill) {
    fc_tensor *t = fc_full(g_ctx, dt, &numel, 1, fill);
    assert_non_null(t);
    assert_int_equal(fc_requires_grad(t, true), FC_OK);
    return t;
}

/* loss = sum_i sum_j p_i[j] * coef(rank, i, j, s) over the parameters
 * `use` allows, built so the last parameters are added last (their
 * gradients complete first in backward) */
static fc_tensor *linear_loss(const model *m, int s, const bool *use) {
    fc_tensor *loss = NULL;
    for (int i = 0; i < m->n; i++) {
        if (use && !use[i]) continue;
        int64_t n = fc_tensor_numel(m->p[i]);
        double *c = malloc(sizeof *c * (size_t)n);
        for (int64_t j = 0; j < n; j++)
            c[j] = coef(g_rank, i, j, s);
        fc_tensor *ct = from_f64(g_ctx, fc_tensor_dtype(m->p[i]), &n, 1, c);
        free(c);
        fc_tensor *term = fc_sum(g_ctx, fc_mul(g_ctx, m->p[i], ct), NULL, 0, false);
        if (fc_tensor_dtype(term) != FC_F32) term = fc_to(g_ctx, term, FC_F32);
        loss = loss ? fc_add(g_ctx, loss, term) : term;
    }
    assert_non_null(loss);
    return loss;
}

/* the mean over both ranks of parameter i's gradient, as the wrapper must
 * compute it (rank-order sum in double, rounded once); acc adds the
 * gradient of step s - 1 first (accumulation, in the gradient's dtype) */
static double want(int i, int64_t j, int s, bool f64, bool acc) {
    double sum = 0;
    for (int r = 0; r < 2; r++) {
        double g = f64 ? coef(r, i, j, s) : (double)(float)coef(r, i, j, s);
        if (acc)
            g = f64 ? coef(r, i, j, s - 1) + g : (double)((float)coef(r, i, j, s - 1) + (float)g);
        sum += g;
    }
    return f64 ? sum * 0.5 : (double)(float)(sum * 0.5);
}

static void assert_mean_grad(const model *m, int i, int s, bool acc) {
    fc_tensor *g = fc_grad(m->p[i]);
    assert_non_null(g);
    bool f64 = fc_tensor_dtype(g) == FC_F64;
    for (int64_t j = 0; j < fc_tensor_numel(g); j++) {
        double got =
            f64 ? ((const double *)fc_tensor_data(g))[j] : ((const float *)fc_tensor_data(g))[j];
        if (got != want(i, j, s, f64, acc))
            fail_msg("rank %d: parameter %d element %lld: %.9g, want %.9g", g_rank, i, (long long)j,
                     got, want(i, j, s, f64, acc));
    }
}

static fc_optim *optim(model *m) {
    fc_optim *o =
        fc_optim_new(g_ctx, &(fc_optim_opts){.kind = FC_OPTIM_SGD, .lr = 0.1}, m->p, m->n);
    assert_non_null(o);
    return o;
}

static void free_model(model *m, fc_optim *o, fc_ddp *w) {
    fc_ddp_free(w);
    fc_optim_free(o);
    for (int i = 0; i < m->n; i++)
        fc_release(m->p[i]);
}

/* 20 small, one of 5000 elements (20000 bytes, over the 1 KiB cap), 20
 * small: buckets in reverse order, the large one alone, none over the cap
 * but it; the means exact; buckets started during backward */
static void test_ddp_buckets_small_and_large(void **state) {
    (void)state;
    model m = {.n = 41};
    for (int i = 0; i < m.n; i++)
        m.p[i] = param(FC_F32, i == 20 ? 5000 : 3 + (i * 7) % 50, 1.0 + g_rank);
    fc_optim *o = optim(&m);
    fc_ddp *w = fc_ddp_new(g_d, o, &(fc_ddp_opts){.bucket_bytes = 1024});
    assert_non_null(w);
    /* rank 0's values everywhere */
    for (int i = 0; i < m.n; i++)
        assert_true(((const float *)fc_tensor_data(m.p[i]))[0] == 1.0f);
    int nb = fc_ddp_bucket_count(w), next = m.n - 1, large = -1;
    assert_true(nb > 5);
    for (int b = 0; b < nb; b++) {
        const int *idx;
        int cnt;
        int64_t bytes;
        assert_int_equal(fc_ddp_bucket(w, b, &idx, &cnt, &bytes), FC_OK);
        assert_true(cnt >= 1);
        int64_t sum = 0;
        for (int k = 0; k < cnt; k++) {
            assert_int_equal(idx[k], next--); /* reverse registration order */
            sum += 4 * fc_tensor_numel(m.p[idx[k]]);
            if (idx[k] == 20) large = b;
        }
        assert_true(sum == bytes);
        if (cnt > 1) assert_true(bytes <= 1024);
    }
    assert_int_equal(next, -1);
    const int *idx;
    int cnt;
    assert_int_equal(fc_ddp_bucket(w, large, &idx, &cnt, NULL), FC_OK);
    assert_int_equal(cnt, 1);
    expect_err(fc_ddp_bucket(w, nb, &idx, &cnt, NULL), FC_ERR_INDEX, "bucket");
    for (int s = 0; s < 2; s++) {
        fc_scope_begin(g_ctx);
        assert_int_equal(fc_backward(g_ctx, linear_loss(&m, s, NULL)), FC_OK);
        fc_scope_end(g_ctx);
        assert_int_equal(fc_ddp_sync(w), FC_OK);
        for (int i = 0; i < m.n; i++)
            assert_mean_grad(&m, i, s, false);
        fc_optim_zero_grad(o);
    }
    fc_ddp_stats st;
    assert_int_equal(fc_ddp_get_stats(w, &st), FC_OK);
    assert_int_equal(st.syncs, 2);
    assert_int_equal(st.buckets, 2 * nb);
    assert_true(st.started_early >= 2 * (nb - 1)); /* all but maybe the last, from hooks */
    int64_t total = 0;
    for (int i = 0; i < m.n; i++)
        total += 4 * fc_tensor_numel(m.p[i]);
    assert_true(st.bytes == 2 * total);
    free_model(&m, o, w);
}

/* parameter 1 is reached by rank 0 only, parameter 2 by none, parameter 3
 * is f64: the mean where some rank had a gradient, none where none did */
static void test_ddp_unreached_and_f64(void **state) {
    (void)state;
    model m = {.n = 5};
    for (int i = 0; i < m.n; i++)
        m.p[i] = param(i == 3 ? FC_F64 : FC_F32, 6 + i, 0.5);
    fc_optim *o = optim(&m);
    fc_ddp *w = fc_ddp_new(g_d, o, NULL);
    assert_non_null(w);
    /* 25 MiB holds them all, but f32 and f64 do not mix: f32 {4}, f64 {3}, f32 {2,1,0} */
    assert_int_equal(fc_ddp_bucket_count(w), 3);
    bool use[5] = {true, g_rank == 0, false, true, true};
    fc_scope_begin(g_ctx);
    assert_int_equal(fc_backward(g_ctx, linear_loss(&m, 0, use)), FC_OK);
    fc_scope_end(g_ctx);
    assert_int_equal(fc_ddp_sync(w), FC_OK);
    assert_mean_grad(&m, 0, 0, false);
    assert_mean_grad(&m, 3, 0, false);
    assert_mean_grad(&m, 4, 0, false);
    assert_null(fc_grad(m.p[2]));
    fc_tensor *g1 = fc_grad(m.p[1]);
    assert_non_null(g1);
    for (int j = 0; j < 7; j++)
        assert_true(((const float *)fc_tensor_data(g1))[j] ==
                    (float)((double)(float)coef(0, 1, j, 0) * 0.5));
    free_model(&m, o, w);
}

/* micro-step 0 with sync off (no communication), micro-step 1 with sync
 * on: the mean of the accumulated gradients */
static void test_ddp_accumulation(void **state) {
    (void)state;
    model m = {.n = 6};
    for (int i = 0; i < m.n; i++)
        m.p[i] = param(i == 2 ? FC_F64 : FC_F32, 40 + i, 0.0);
    fc_optim *o = optim(&m);
    fc_ddp *w = fc_ddp_new(g_d, o, &(fc_ddp_opts){.bucket_bytes = 200});
    assert_non_null(w);
    assert_int_equal(fc_ddp_set_sync(w, false), FC_OK);
    fc_scope_begin(g_ctx);
    assert_int_equal(fc_backward(g_ctx, linear_loss(&m, 0, NULL)), FC_OK);
    fc_scope_end(g_ctx);
    assert_int_equal(fc_ddp_sync(w), FC_OK); /* sync off: nothing */
    fc_ddp_stats st;
    fc_ddp_get_stats(w, &st);
    assert_int_equal(st.buckets, 0);
    assert_int_equal(fc_ddp_set_sync(w, true), FC_OK);
    fc_scope_begin(g_ctx);
    assert_int_equal(fc_backward(g_ctx, linear_loss(&m, 1, NULL)), FC_OK);
    fc_scope_end(g_ctx);
    expect_err(fc_ddp_set_sync(w, false), FC_ERR_STATE, "fc_ddp_sync has not");
    assert_int_equal(fc_ddp_sync(w), FC_OK);
    for (int i = 0; i < m.n; i++)
        assert_mean_grad(&m, i, 1, true);
    free_model(&m, o, w);
}

/* rank 1's backward "failed" (an error in its context at sync): both ranks
 * fail, no gradient is averaged; then a second walk without sync is
 * refused; the wrapper works again afterwards */
static void test_ddp_failed_rank_and_double_walk(void **state) {
    (void)state;
    model m = {.n = 3};
    for (int i = 0; i < m.n; i++)
        m.p[i] = param(FC_F32, 10, 0.0);
    fc_optim *o = optim(&m);
    fc_ddp *w = fc_ddp_new(g_d, o, &(fc_ddp_opts){.bucket_bytes = 40});
    assert_non_null(w);
    fc_scope_begin(g_ctx);
    assert_int_equal(fc_backward(g_ctx, linear_loss(&m, 0, NULL)), FC_OK);
    fc_scope_end(g_ctx);
    if (g_rank == 1) fc_ctx_fail(g_ctx, FC_ERR_OOM, "simulated failure of rank 1's backward");
    assert_int_equal(fc_ddp_sync(w), FC_ERR_STATE);
    assert_int_equal(fc_ctx_status(g_ctx), g_rank == 1 ? FC_ERR_OOM : FC_ERR_STATE);
    if (g_rank == 0 && !strstr(fc_ctx_error(g_ctx), "failed on 1 of 2 ranks"))
        fail_msg("rank 0: %s", fc_ctx_error(g_ctx));
    fc_ctx_clear_error(g_ctx);
    /* each rank kept its own gradient */
    for (int j = 0; j < 10; j++)
        assert_true(((const float *)fc_tensor_data(fc_grad(m.p[1])))[j] ==
                    (float)coef(g_rank, 1, j, 0));
    fc_optim_zero_grad(o);
    /* two walks with sync on: the second one's hook refuses */
    fc_scope_begin(g_ctx);
    assert_int_equal(fc_backward(g_ctx, linear_loss(&m, 0, NULL)), FC_OK);
    expect_err(fc_backward(g_ctx, linear_loss(&m, 0, NULL)), FC_ERR_STATE, "completed twice");
    fc_scope_end(g_ctx);
    assert_int_equal(fc_ddp_sync(w), FC_OK);
    fc_optim_zero_grad(o);
    /* and a normal step */
    fc_scope_begin(g_ctx);
    assert_int_equal(fc_backward(g_ctx, linear_loss(&m, 2, NULL)), FC_OK);
    fc_scope_end(g_ctx);
    assert_int_equal(fc_ddp_sync(w), FC_OK);
    for (int i = 0; i < m.n; i++)
        assert_mean_grad(&m, i, 2, false);
    free_model(&m, o, w);
}

/* lists that differ: every rank gets FC_ERR_SHAPE_MISMATCH and NULL */
static void test_ddp_mismatched_lists(void **state) {
    (void)state;
    /* rank 1 has one parameter more */
    model m = {.n = 2 + g_rank};
    for (int i = 0; i < m.n; i++)
        m.p[i] = param(FC_F32, 4, 0.0);
    fc_optim *o = optim(&m);
    assert_null(fc_ddp_new(g_d, o, NULL));
    expect_err(fc_ctx_status(g_ctx), FC_ERR_SHAPE_MISMATCH,
               g_rank == 1 ? "this rank (1) has 3 parameters, rank 0 has 2"
                           : "rank 1 has 3 parameters");
    free_model(&m, o, NULL);
    /* same count, parameter 1 of another shape on rank 1 */
    m = (model){.n = 3};
    for (int i = 0; i < m.n; i++) {
        int64_t sh[2] = {3, 4};
        if (i == 1 && g_rank == 1) sh[0] = 4, sh[1] = 3;
        m.p[i] = fc_zeros(g_ctx, FC_F32, sh, 2);
        fc_requires_grad(m.p[i], true);
    }
    o = optim(&m);
    assert_null(fc_ddp_new(g_d, o, NULL));
    expect_err(fc_ctx_status(g_ctx), FC_ERR_SHAPE_MISMATCH,
               g_rank == 1 ? "parameter 1 is f32[4,3] here and f32[3,4] on rank 0"
                           : "this rank's list is rank 0's");
    free_model(&m, o, NULL);
    /* a dtype that differs */
    m = (model){.n = 2};
    m.p[0] = param(FC_F32, 5, 0.0);
    m.p[1] = param(g_rank ? FC_F64 : FC_F32, 5, 0.0);
    o = optim(&m);
    assert_null(fc_ddp_new(g_d, o, NULL));
    expect_err(fc_ctx_status(g_ctx), FC_ERR_SHAPE_MISMATCH, "differ");
    free_model(&m, o, NULL);
}

static void test_ddp_bad_arguments(void **state) {
    (void)state;
    model m = {.n = 1};
    m.p[0] = param(FC_F32, 4, 0.0);
    fc_optim *o = optim(&m);
    assert_null(fc_ddp_new(g_d, o, &(fc_ddp_opts){.bucket_bytes = -1}));
    expect_err(fc_ctx_status(g_ctx), FC_ERR_INVALID_ARG, "bucket_bytes is -1");
    assert_null(fc_ddp_new(g_d, NULL, NULL));
    expect_err(fc_ctx_status(g_ctx), FC_ERR_NULL_ARG, "opt is NULL");
    assert_null(fc_ddp_new(NULL, o, NULL));
    assert_int_equal(fc_ddp_sync(NULL), FC_ERR_NULL_ARG);
    assert_int_equal(fc_ddp_set_sync(NULL, true), FC_ERR_NULL_ARG);
    assert_int_equal(fc_ddp_get_stats(NULL, &(fc_ddp_stats){0}), FC_ERR_NULL_ARG);
    assert_int_equal(fc_ddp_bucket_count(NULL), 0);
    fc_ddp_free(NULL);
    /* an optimizer of another context */
    fc_ctx *other = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    fc_tensor *q = fc_param_zeros(other, FC_F32, (const int64_t[]){2}, 1);
    fc_optim *oo = fc_optim_new(other, &(fc_optim_opts){.kind = FC_OPTIM_SGD, .lr = 1}, &q, 1);
    assert_null(fc_ddp_new(g_d, oo, NULL));
    expect_err(fc_ctx_status(g_ctx), FC_ERR_CONTEXT, "another context");
    fc_optim_free(oo);
    fc_release(q);
    free_ctx(other);
    free_model(&m, o, NULL);
}

int main(int argc, char **argv) {
    /* every allocation of the context counted: fucina's own leaks show here
     * (LeakSanitizer is off for the MPI tests: tests/CMakeLists.txt) */
    static fct_counting alloc;
    fct_counting_init(&alloc);
    g_ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 3, .allocator = &alloc.alloc});
    if (!g_ctx || fc_dist_init(g_ctx, &argc, &argv, NULL, &g_d) != FC_OK) {
        fprintf(stderr, "test_dist_ddp: %s\n", g_ctx ? fc_ctx_error(g_ctx) : "no ctx");
        return 1;
    }
    g_rank = fc_dist_rank(g_d);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ddp_buckets_small_and_large),
        cmocka_unit_test(test_ddp_unreached_and_f64),
        cmocka_unit_test(test_ddp_accumulation),
        cmocka_unit_test(test_ddp_failed_rank_and_double_walk),
        cmocka_unit_test(test_ddp_mismatched_lists),
        cmocka_unit_test(test_ddp_bad_arguments),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    fc_dist_free(g_d);
    fc_ctx_stats s;
    fc_ctx_get_stats(g_ctx, &s);
    if (s.tensors_live != 0) failed++;
    fc_ctx_free(g_ctx);
    if (!fct_counting_clean(&alloc)) {
        fct_counting_report(&alloc, "the test's context");
        failed++;
    }
    return failed ? 1 : 0;
}
