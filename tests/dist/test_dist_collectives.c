/* SPDX-License-Identifier: MIT */
/* test_dist_collectives.c - fucina/dist.h's communicator and list
 * collectives, run as 2 ranks under mpirun (tests/CMakeLists.txt): rank and
 * size, broadcast from either root, the deterministic all-reduce (sum and
 * mean, f32 and f64, the exact rank-order double sum, the same bits on both
 * ranks and on a second run), bad arguments (refused on each rank before
 * any communication, so both fail alike), an MPI error returned, not
 * fatal, with MPI's own message, and a rank's failure (an MPI error or
 * fc_dist_fail) making the handle's collectives refuse. Every rank runs the same tests in the
 * same order, so the collectives inside match. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <mpi.h>

#include "dist/dist.h"
#include "counting_alloc.h"
#include "fct_f64.h"
#include "fucina.h"

static fc_ctx *g_ctx;
static fc_dist *g_d;

static void expect_err(fc_status got, fc_status want, const char *needle) {
    assert_int_equal(got, want);
    assert_int_equal(fc_ctx_status(g_ctx), want);
    if (needle && !strstr(fc_ctx_error(g_ctx), needle))
        fail_msg("error \"%s\" lacks \"%s\"", fc_ctx_error(g_ctx), needle);
    fc_ctx_clear_error(g_ctx);
}

/* Element i of rank r's data: different on each rank, with a spread of
 * magnitudes so the rounding of the sum matters. */
static double value(int r, int64_t i) {
    return (1.0 + 0.37 * r) * sin(0.7 * (double)i + r) * pow(10.0, (double)(i % 7) - 3);
}

/* rank 0's bytes must equal this rank's */
static void assert_same_on_all_ranks(const void *p, size_t n) {
    unsigned char *r0 = malloc(n);
    assert_non_null(r0);
    memcpy(r0, p, n);
    assert_int_equal(MPI_Bcast(r0, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD), MPI_SUCCESS);
    assert_memory_equal(r0, p, n);
    free(r0);
}

static void test_dist_rank_size(void **state) {
    (void)state;
    int r = -1, n = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    assert_true(fc_dist_available());
    assert_int_equal(fc_dist_rank(g_d), r);
    assert_int_equal(fc_dist_size(g_d), n);
    assert_int_equal(n, 2);
    assert_int_equal(fc_dist_rank(NULL), 0);
    assert_int_equal(fc_dist_size(NULL), 1);
    assert_int_equal(fc_dist_barrier(g_d), FC_OK);
    /* a second handle over the caller's communicator sees the same */
    MPI_Comm world = MPI_COMM_WORLD;
    fc_dist *d2 = NULL;
    assert_int_equal(fc_dist_init_comm(g_ctx, &world, NULL, &d2), FC_OK);
    assert_int_equal(fc_dist_rank(d2), r);
    assert_int_equal(fc_dist_size(d2), n);
    assert_int_equal(fc_dist_barrier(d2), FC_OK);
    fc_dist_free(d2);
}

static void test_dist_broadcast_from_each_root(void **state) {
    (void)state;
    int me = fc_dist_rank(g_d);
    for (int root = 0; root < 2; root++) {
        fc_tensor *a = fc_full(g_ctx, FC_F32, (const int64_t[]){3, 5}, 2, 10.0 * me + 1);
        fc_tensor *b = fc_full(g_ctx, FC_I64, (const int64_t[]){7}, 1, -3.0 - me);
        fc_tensor *c = fc_full(g_ctx, FC_F64, (const int64_t[]){1}, 1, 0.5 + me);
        fc_tensor *ts[3] = {a, b, c};
        assert_int_equal(fc_dist_broadcast(g_d, ts, 3, root), FC_OK);
        for (int i = 0; i < 15; i++)
            assert_true(((const float *)fc_tensor_data(a))[i] == (float)(10.0 * root + 1));
        for (int i = 0; i < 7; i++)
            assert_true(((const int64_t *)fc_tensor_data(b))[i] == -3 - root);
        assert_true(((const double *)fc_tensor_data(c))[0] == 0.5 + root);
        fc_release(a);
        fc_release(b);
        fc_release(c);
    }
    assert_int_equal(fc_dist_broadcast(g_d, NULL, 0, 0), FC_OK);
}

/* sum and mean of f32 and f64 tensors of several sizes (1 element, odd,
 * more than one slice per rank), against the rank-order double sum */
static void test_dist_all_reduce_exact(void **state) {
    (void)state;
    int me = fc_dist_rank(g_d);
    const int64_t sizes[3] = {1, 37, 1000};
    for (int op = 0; op < FC_DIST_OP_COUNT; op++) {
        fc_tensor *ts[6];
        for (int k = 0; k < 6; k++) {
            fc_dtype dt = k < 3 ? FC_F32 : FC_F64;
            int64_t n = sizes[k % 3];
            double *v = malloc(sizeof *v * (size_t)n);
            for (int64_t i = 0; i < n; i++)
                v[i] = value(me, i + k);
            ts[k] = from_f64(g_ctx, dt, &n, 1, v);
            free(v);
        }
        assert_int_equal(fc_dist_all_reduce(g_d, ts, 6, (fc_dist_op)op), FC_OK);
        for (int k = 0; k < 6; k++) {
            int64_t n = sizes[k % 3];
            for (int64_t i = 0; i < n; i++) {
                double s = 0;
                for (int r = 0; r < 2; r++)
                    s += k < 3 ? (double)(float)value(r, i + k) : value(r, i + k);
                if (op == FC_DIST_MEAN) s *= 0.5;
                if (k < 3)
                    assert_true(((const float *)fc_tensor_data(ts[k]))[i] == (float)s);
                else
                    assert_true(((const double *)fc_tensor_data(ts[k]))[i] == s);
            }
            assert_same_on_all_ranks(fc_tensor_data(ts[k]), fc_tensor_nbytes(ts[k]));
            fc_release(ts[k]);
        }
    }
}

/* run to run: the same inputs give the same bits */
static void test_dist_all_reduce_repeatable(void **state) {
    (void)state;
    enum { N = 4099 };
    double *v = malloc(sizeof *v * N), *w = malloc(sizeof *w * N);
    float first[N];
    for (int rep = 0; rep < 3; rep++) {
        for (int i = 0; i < N; i++)
            v[i] = value(fc_dist_rank(g_d), i) * 1e3;
        fc_tensor *t = from_f64(g_ctx, FC_F32, (const int64_t[]){N}, 1, v);
        assert_int_equal(fc_dist_all_reduce(g_d, &t, 1, FC_DIST_MEAN), FC_OK);
        if (rep == 0)
            memcpy(first, fc_tensor_data(t), sizeof first);
        else
            assert_memory_equal(first, fc_tensor_data(t), sizeof first);
        fc_release(t);
    }
    for (int i = 0; i < N; i++)
        w[i] = v[i] = fc_dist_rank(g_d) + 1.0 + i;
    assert_int_equal(fc_dist_all_reduce_f64(g_d, v, N, FC_DIST_SUM), FC_OK);
    for (int i = 0; i < N; i++)
        assert_true(v[i] == 3.0 + 2.0 * i);
    assert_int_equal(fc_dist_all_reduce_f64(g_d, w, N, FC_DIST_MEAN), FC_OK);
    assert_true(w[0] == 1.5);
    free(v);
    free(w);
}

/* refused locally, before any communication: every rank fails alike */
static void test_dist_bad_arguments(void **state) {
    (void)state;
    fc_tensor *a = fc_zeros(g_ctx, FC_F32, (const int64_t[]){4, 3}, 2);
    fc_tensor *i64 = fc_zeros(g_ctx, FC_I64, (const int64_t[]){4}, 1);
    fc_tensor *at = fc_transpose(g_ctx, a, 0, 1);
    fc_tensor *nul[1] = {NULL};
    expect_err(fc_dist_broadcast(g_d, &a, 1, 2), FC_ERR_INVALID_ARG, "root 2");
    expect_err(fc_dist_broadcast(g_d, &a, 1, -1), FC_ERR_INVALID_ARG, "root -1");
    expect_err(fc_dist_broadcast(g_d, &a, -1, 0), FC_ERR_INVALID_ARG, "n is -1");
    expect_err(fc_dist_broadcast(g_d, nul, 1, 0), FC_ERR_NULL_ARG, "tensor 0 is NULL");
    expect_err(fc_dist_broadcast(g_d, &at, 1, 0), FC_ERR_UNSUPPORTED_VIEW, "not contiguous");
    expect_err(fc_dist_all_reduce(g_d, &i64, 1, FC_DIST_SUM), FC_ERR_DTYPE, "i64");
    expect_err(fc_dist_all_reduce(g_d, &a, 1, FC_DIST_OP_COUNT), FC_ERR_INVALID_ARG, "op 2");
    expect_err(fc_dist_all_reduce_f64(g_d, NULL, 3, FC_DIST_SUM), FC_ERR_NULL_ARG, "v is NULL");
    assert_int_equal(fc_dist_broadcast(NULL, &a, 1, 0), FC_ERR_NULL_ARG);
    assert_int_equal(fc_dist_init(NULL, NULL, NULL, NULL, NULL), FC_ERR_NULL_ARG);
    expect_err(fc_dist_init_comm(g_ctx, NULL, NULL, &(fc_dist *){NULL}), FC_ERR_NULL_ARG,
               "mpi_comm");
    /* another context's tensor */
    fc_ctx *other = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    fc_tensor *o = fc_zeros(other, FC_F32, (const int64_t[]){2}, 1);
    expect_err(fc_dist_all_reduce(g_d, &o, 1, FC_DIST_SUM), FC_ERR_CONTEXT, "another context");
    fc_release(o);
    free_ctx(other);
    fc_release(at);
    fc_release(a);
    fc_release(i64);
}

/* MPI_ERRORS_RETURN is set on the library's communicator: a bad call
 * returns (MPI's own check of the root), and fucina turns the code into
 * FC_ERR_COMM with MPI's message and the call's name */
static void test_dist_mpi_error_returns(void **state) {
    (void)state;
    int x = 0;
    int rc = MPI_Bcast(&x, 1, MPI_INT, 99, g_d->comm);
    assert_int_not_equal(rc, MPI_SUCCESS);
    char mpimsg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, mpimsg, &len);
    assert_true(len > 0);
    assert_int_equal(fc__dist_check(g_d, rc, "MPI_Bcast (test)"), FC_ERR_COMM);
    const char *m = fc_ctx_error(g_ctx);
    if (!strstr(m, "MPI_Bcast (test) failed on rank") || !strstr(m, mpimsg))
        fail_msg("error \"%s\" lacks the call or MPI's message \"%s\"", m, mpimsg);
    assert_string_equal(fc_status_name(FC_ERR_COMM), "FC_ERR_COMM");
    fc_ctx_clear_error(g_ctx);
    assert_int_equal(fc__dist_check(g_d, MPI_SUCCESS, "nothing"), FC_OK);
    assert_int_equal(fc_ctx_status(g_ctx), FC_OK);
    /* MPI's communicator still works, but the handle is failed for good
     * (the ranks may no longer match): its collectives refuse, and
     * fc_dist_free would end the job */
    assert_int_equal(MPI_Barrier(g_d->comm), MPI_SUCCESS);
    assert_int_equal(fc_dist_status(g_d), FC_ERR_COMM);
    expect_err(fc_dist_barrier(g_d), FC_ERR_STATE, "MPI_Bcast (test) failed");
    g_d->failed = FC_OK; /* only a test can take it back: the next tests use g_d */
    assert_int_equal(fc_dist_barrier(g_d), FC_OK);
}

/* fc_dist_fail: an error of the program's own marks the rank failed (the
 * first failure stays; FC_OK counts as FC_ERR_STATE); every collective then
 * refuses on this rank, recorded, without communicating (both ranks fail
 * here alike, so nothing is left unmatched) */
static void test_dist_fail_marks_and_refuses(void **state) {
    (void)state;
    MPI_Comm world = MPI_COMM_WORLD;
    fc_dist *d2 = NULL;
    assert_int_equal(fc_dist_init_comm(g_ctx, &world, NULL, &d2), FC_OK);
    assert_int_equal(fc_dist_status(d2), FC_OK);
    assert_int_equal(fc_dist_status(NULL), FC_ERR_NULL_ARG);
    fc_dist_fail(NULL, FC_ERR_IO); /* no-op */
    fc_dist_fail(d2, FC_ERR_IO);
    assert_int_equal(fc_dist_status(d2), FC_ERR_IO);
    fc_dist_fail(d2, FC_ERR_OOM); /* the first failure stays */
    assert_int_equal(fc_dist_status(d2), FC_ERR_IO);
    assert_int_equal(fc_ctx_status(g_ctx), FC_OK); /* not an error of the context */
    fc_tensor *a = fc_zeros(g_ctx, FC_F32, (const int64_t[]){3}, 1);
    double v = 1;
    expect_err(fc_dist_barrier(d2), FC_ERR_STATE,
               "cannot communicate any more: earlier, fc_dist_fail was called (FC_ERR_IO)");
    expect_err(fc_dist_broadcast(d2, &a, 1, 0), FC_ERR_STATE, "fc_dist_broadcast: rank");
    expect_err(fc_dist_all_reduce(d2, &a, 1, FC_DIST_SUM), FC_ERR_STATE, "fc_dist_all_reduce:");
    expect_err(fc_dist_all_reduce_f64(d2, &v, 1, FC_DIST_SUM), FC_ERR_STATE,
               "fc_dist_all_reduce_f64:");
    fc_tensor *p = fc_param_randn(g_ctx, FC_F32, (const int64_t[]){3}, 1, 0.1);
    fc_optim *opt = fc_optim_new(g_ctx, &(fc_optim_opts){.kind = FC_OPTIM_SGD, .lr = 1}, &p, 1);
    assert_non_null(opt);
    assert_null(fc_ddp_new(d2, opt, NULL));
    expect_err(fc_ctx_status(g_ctx), FC_ERR_STATE, "fc_ddp_new: rank");
    fc_optim_free(opt);
    fc_release(p);
    fc_release(a);
    fc_dist *d3 = NULL; /* FC_OK is no excuse */
    assert_int_equal(fc_dist_init_comm(g_ctx, &world, NULL, &d3), FC_OK);
    fc_dist_fail(d3, FC_OK);
    assert_int_equal(fc_dist_status(d3), FC_ERR_STATE);
    /* freed, either would end the job: taken back, both meet and free */
    d2->failed = d3->failed = FC_OK;
    fc_dist_free(d3);
    fc_dist_free(d2);
    assert_int_equal(fc_ctx_status(g_ctx), FC_OK);
}

int main(int argc, char **argv) {
    /* every allocation of the context counted: fucina's own leaks show here
     * (LeakSanitizer is off for the MPI tests: tests/CMakeLists.txt) */
    static fct_counting alloc;
    fct_counting_init(&alloc);
    g_ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 3, .allocator = &alloc.alloc});
    if (!g_ctx || fc_dist_init(g_ctx, &argc, &argv, NULL, &g_d) != FC_OK) {
        fprintf(stderr, "test_dist_collectives: %s\n", g_ctx ? fc_ctx_error(g_ctx) : "no ctx");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dist_rank_size),
        cmocka_unit_test(test_dist_broadcast_from_each_root),
        cmocka_unit_test(test_dist_all_reduce_exact),
        cmocka_unit_test(test_dist_all_reduce_repeatable),
        cmocka_unit_test(test_dist_bad_arguments),
        cmocka_unit_test(test_dist_mpi_error_returns),
        cmocka_unit_test(test_dist_fail_marks_and_refuses),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    fc_dist_free(g_d); /* finalizes MPI */
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
