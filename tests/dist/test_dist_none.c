/* SPDX-License-Identifier: MIT */
/* test_dist_none.c - fucina/dist.h in a build without MPI: the program
 * links, fc_dist_available is false, fc_dist_init and fc_dist_init_comm
 * record FC_ERR_BACKEND naming the missing option, a NULL handle is rank 0
 * of 1, and every other call on it is FC_ERR_NULL_ARG or a no-op, so a
 * trainer's single-process path needs no #ifdef. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fct_f64.h"
#include "fucina.h"

static void test_dist_none_answers(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    assert_false(fc_dist_available());
    fc_dist *d = (fc_dist *)ctx; /* must be overwritten with NULL */
    assert_int_equal(fc_dist_init(ctx, NULL, NULL, NULL, &d), FC_ERR_BACKEND);
    assert_null(d);
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_BACKEND);
    assert_non_null(strstr(fc_ctx_error(ctx), "FUCINA_WITH_MPI"));
    fc_ctx_clear_error(ctx);
    int comm = 0;
    assert_int_equal(fc_dist_init_comm(ctx, &comm, NULL, &d), FC_ERR_BACKEND);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_dist_init(NULL, NULL, NULL, NULL, &d), FC_ERR_NULL_ARG);
    assert_int_equal(fc_dist_rank(NULL), 0);
    assert_int_equal(fc_dist_size(NULL), 1);
    fc_tensor *t = fc_zeros(ctx, FC_F32, (const int64_t[]){2}, 1);
    assert_int_equal(fc_dist_broadcast(NULL, &t, 1, 0), FC_ERR_NULL_ARG);
    assert_int_equal(fc_dist_all_reduce(NULL, &t, 1, FC_DIST_MEAN), FC_ERR_NULL_ARG);
    double v = 1;
    assert_int_equal(fc_dist_all_reduce_f64(NULL, &v, 1, FC_DIST_SUM), FC_ERR_NULL_ARG);
    assert_int_equal(fc_dist_barrier(NULL), FC_ERR_NULL_ARG);
    assert_null(fc_ddp_new(NULL, NULL, NULL));
    assert_int_equal(fc_ddp_sync(NULL), FC_ERR_NULL_ARG);
    assert_int_equal(fc_ddp_bucket_count(NULL), 0);
    fc_ddp_free(NULL);
    fc_dist_free(NULL);
    fc_dist_abort(NULL, 1);        /* returns */
    fc_dist_fail(NULL, FC_ERR_IO); /* the error path of fucina/dist.h, no-op here */
    assert_int_equal(fc_dist_status(NULL), FC_ERR_NULL_ARG);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
    fc_release(t);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_dist_none_answers)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
