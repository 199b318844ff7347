/* SPDX-License-Identifier: MIT */
/* test_contexts.c - tensors of two contexts never meet in one call.
 *
 * A tensor's storage, gradient and tape node belong to its context, which
 * may be freed before the other one. Before the check, a leaf of context B
 * used in an op of context A got its gradient allocated in A, and releasing
 * the leaf after fc_ctx_free(A) freed that gradient a second time (a heap
 * use-after-free under ASan). Every entry point that takes a context and
 * tensors, or several tensors, now refuses a foreign one with
 * FC_ERR_CONTEXT, naming the function, and changes nothing. fc_copy_ is the
 * one documented exception: it copies values, links nothing, and is how
 * data moves between contexts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "fucina.h"

static fc_ctx *A, *B;

static int setup(void **state) {
    (void)state;
    A = fc_ctx_new(NULL);
    B = fc_ctx_new(NULL);
    return A && B ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    fc_ctx_free(A);
    fc_ctx_free(B);
    return 0;
}

/* The call failed in A with FC_ERR_CONTEXT naming fn; B saw nothing. */
static void expect_context_error(const char *fn) {
    assert_int_equal(fc_ctx_status(A), FC_ERR_CONTEXT);
    assert_non_null(strstr(fc_ctx_error(A), fn));
    assert_non_null(strstr(fc_ctx_error(A), "another context"));
    assert_int_equal(fc_ctx_status(B), FC_OK);
    fc_ctx_clear_error(A);
}

static const int64_t shape[2] = {2, 3};

static void test_contexts_ops_refuse_foreign_inputs(void **state) {
    (void)state;
    fc_tensor *a = fc_randn(A, FC_F32, shape, 2), *b = fc_randn(B, FC_F32, shape, 2);
    fc_tensor *w = fc_randn(B, FC_F32, (const int64_t[]){3}, 1);
    fc_tensor *wa = fc_randn(A, FC_F32, (const int64_t[]){4, 3}, 2);
    assert_null(fc_add(A, a, b));
    expect_context_error("add");
    assert_null(fc_relu(A, b));
    expect_context_error("relu");
    assert_null(fc_sum(A, b, NULL, 0, false));
    expect_context_error("sum");
    assert_null(fc_where(A, a, a, b));
    expect_context_error("where");
    assert_null(fc_concat(A, (fc_tensor *[]){a, b}, 2, 0));
    expect_context_error("concat");
    /* optional inputs too */
    assert_null(fc_layer_norm(A, a, w, NULL, 1e-5));
    expect_context_error("layer_norm");
    assert_null(fc_linear(A, a, wa, fc_randn(B, FC_F32, (const int64_t[]){4}, 1)));
    expect_context_error("linear");
    fc_tensor *parts[2];
    assert_int_equal(fc_split(A, b, 1, (const int64_t[]){1, 2}, 2, parts), FC_ERR_CONTEXT);
    expect_context_error("split");
    /* in place: the destination's context refuses the other operand */
    float before[6], after[6];
    assert_int_equal(fc_tensor_copy_out(before, sizeof before, a), FC_OK);
    assert_int_equal(fc_add_(a, b), FC_ERR_CONTEXT);
    expect_context_error("add_");
    assert_int_equal(fc_tensor_copy_out(after, sizeof after, a), FC_OK);
    assert_memory_equal(before, after, sizeof before);
    fc_release(a);
    fc_release(b);
    fc_release(w);
    fc_release(wa);
}

/* The original failure: a leaf of B in A's graph, A freed first. */
static void test_contexts_foreign_leaf_never_enters_a_graph(void **state) {
    (void)state;
    fc_ctx *a_ctx = fc_ctx_new(NULL);
    fc_tensor *leaf = fc_param_randn(B, FC_F32, shape, 2, 1.0);
    fc_tensor *x = fc_randn(a_ctx, FC_F32, shape, 2);
    assert_null(fc_mul(a_ctx, x, leaf));
    assert_int_equal(fc_ctx_status(a_ctx), FC_ERR_CONTEXT);
    assert_null(fc_grad(leaf));
    fc_ctx_free(a_ctx); /* frees x */
    fc_release(leaf);   /* was a use-after-free of a gradient allocated in a_ctx */
    assert_int_equal(fc_ctx_status(B), FC_OK);
}

static void test_contexts_autograd_and_optimizers(void **state) {
    (void)state;
    fc_tensor *p = fc_param_randn(B, FC_F32, shape, 2, 1.0);
    fc_tensor *loss = fc_sum(B, fc_mul(B, p, p), NULL, 0, false);
    assert_non_null(loss);
    assert_int_equal(fc_backward(A, loss), FC_ERR_CONTEXT);
    expect_context_error("fc_backward");
    assert_null(fc_grad(p));
    fc_tensor *g = fc_ones(A, FC_F32, (const int64_t[]){1}, 1);
    assert_int_equal(fc_backward_with(B, loss, g, false), FC_ERR_CONTEXT);
    assert_int_equal(fc_ctx_status(B), FC_ERR_CONTEXT);
    fc_ctx_clear_error(B);
    assert_null(fc_optim_new(A, &(fc_optim_opts){.kind = FC_OPTIM_SGD, .lr = 0.1}, &p, 1));
    expect_context_error("param 0");
    double norm = 0;
    assert_int_equal(fc_clip_grad_norm(A, &p, 1, 1.0, &norm), FC_ERR_CONTEXT);
    expect_context_error("fc_clip_grad_norm");
    /* the graph is intact for its own context */
    assert_int_equal(fc_backward(B, loss), FC_OK);
    assert_non_null(fc_grad(p));
    fc_release(g);
    fc_release(loss);
    fc_release(p);
}

static void test_contexts_copy_moves_values(void **state) {
    (void)state;
    fc_tensor *a = fc_zeros(A, FC_F32, shape, 2), *b = fc_randn(B, FC_F32, shape, 2);
    assert_int_equal(fc_copy_(a, b), FC_OK);
    float va[6], vb[6];
    assert_int_equal(fc_tensor_copy_out(va, sizeof va, a), FC_OK);
    assert_int_equal(fc_tensor_copy_out(vb, sizeof vb, b), FC_OK);
    assert_memory_equal(va, vb, sizeof va);
    fc_release(b);  /* a keeps its own storage */
    fc_ctx_free(B); /* and outlives B */
    B = fc_ctx_new(NULL);
    assert_int_equal(fc_tensor_copy_out(va, sizeof va, a), FC_OK);
    assert_memory_equal(va, vb, sizeof va);
    fc_release(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_contexts_ops_refuse_foreign_inputs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_contexts_foreign_leaf_never_enters_a_graph, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_contexts_autograd_and_optimizers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_contexts_copy_moves_values, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
