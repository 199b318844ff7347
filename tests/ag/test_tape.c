/* SPDX-License-Identifier: MIT */
/* test_tape.c - the tape's own guarantees, whatever op recorded the node:
 * a graph freed by a backward without retain_graph refuses a second
 * backward, and a saved value modified after recording fails the backward
 * with FC_ERR_SAVED_MODIFIED naming the op. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fucina.h"

static fc_ctx *new_ctx(void) {
    fc_ctx_opts o = {.threads = 2, .seed = 1};
    fc_ctx *ctx = fc_ctx_new(&o);
    assert_non_null(ctx);
    return ctx;
}

static void free_ctx(fc_ctx *ctx) {
    fc_ctx_stats s;
    fc_ctx_get_stats(ctx, &s);
    assert_int_equal(s.tensors_live, 0);
    fc_ctx_free(ctx);
}

/* Backward twice through a graph without retain_graph fails cleanly; a
 * modified saved input is refused. */
static void test_grad_saved_values_are_checked(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    fc_tensor *x = fc_param_zeros(ctx, FC_F32, (const int64_t[]){2, 3}, 2);
    fc_tensor *y = fc_softmax(ctx, x, 1);
    fc_tensor *s = fc_sum(ctx, y, NULL, 0, false);
    fc_tensor *m = fc_max(ctx, x, NULL, 0, false);
    assert_int_equal(fc_backward(ctx, s), FC_OK);
    assert_int_equal(fc_backward(ctx, s), FC_ERR_STATE);
    fc_ctx_clear_error(ctx);
    fc_tensor_data_mut(x); /* bumps the generation of max's saved input */
    assert_int_equal(fc_backward(ctx, m), FC_ERR_SAVED_MODIFIED);
    assert_non_null(strstr(fc_ctx_error(ctx), "max"));
    fc_ctx_clear_error(ctx);
    fc_release(m);
    fc_release(s);
    fc_release(y);
    fc_release(x);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_saved_values_are_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
