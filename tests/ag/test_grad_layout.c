/* test_grad_layout.c - gradients of the layout, join, index and mask ops
 * (src/ag/grad_{layout,join,index,mask}.c).
 *
 * Every differentiable op is gradchecked in f64 (central differences of a
 * random projection of the output, fc_gradcheck) on contiguous inputs and on
 * views built inside the function (transposed, narrowed, expanded), plus
 * chains of views. Joins of more inputs than a node holds exercise the
 * grouped nodes; split pieces left unused must get zero gradient. Outside
 * gradcheck: f16 leaves get f32 gradients, dropout's backward reuses the
 * forward mask, the index-add backward gives the same bits for any thread
 * count, and a saved index modified in place is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "counting_alloc.h"
#include "layout_helpers.h"

static fct_counting g_alloc;
static fc_ctx *g_ctx;

static int setup(void **state) {
    (void)state;
    fct_counting_init(&g_alloc);
    fc_ctx_opts o = {.threads = 2, .allocator = fct_counting_allocator(&g_alloc), .seed = 11};
    g_ctx = fc_ctx_new(&o);
    if (!g_ctx) return -1;
    fc_scope_begin(g_ctx);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    fc_scope_end(g_ctx);
    fc_ctx_stats s;
    fc_ctx_get_stats(g_ctx, &s);
    int rc = 0;
    if (s.tensors_live != 0) {
        fprintf(stderr, "leak: %lld tensors alive after the scope\n", (long long)s.tensors_live);
        rc = -1;
    }
    fc_ctx_free(g_ctx);
    if (!fct_counting_clean(&g_alloc)) {
        fct_counting_report(&g_alloc, "leak check");
        rc = -1;
    }
    return rc;
}

static fc_tensor *leaf(const int64_t *shape, int rank) {
    return fc_randn(g_ctx, FC_F64, shape, rank);
}

/* Gradchecks fn on the inputs and releases them. */
static void gradcheck(fc_gradcheck_fn fn, void *user, fc_tensor **in, int n, const char *what) {
    fc_gradcheck_opts o = {.check_all_f64 = true, .seed = 3};
    fc_gradcheck_report rep;
    fc_status st = fc_gradcheck(g_ctx, fn, user, in, n, &o, &rep);
    if (st != FC_OK || !rep.passed || rep.checked == 0) {
        print_message("%s: %s (%s)\n", what, fc_status_name(st), fc_ctx_error(g_ctx));
        fail();
    }
    for (int k = 0; k < n; k++)
        fc_release(in[k]);
}

/* ---- indexing ------------------------------------------------------------------------------- */

static fc_tensor *index_of(fc_ctx *c, fc_dtype dt, const int64_t *shape, int rank,
                           const int64_t *v) {
    double d[64];
    for (int64_t i = 0; i < lh_numel(shape, rank); i++)
        d[i] = (double)v[i];
    return lh_from_f64(c, dt, shape, rank, d);
}

static fc_tensor *fn_index_select(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n;
    int axis = *(const int *)u;
    fc_tensor *idx =
        index_of(c, FC_I32, (const int64_t[]){2, 3}, 2, (const int64_t[]){1, 0, 1, 2, 1, 0});
    return fc_index_select(c, fc_transpose(c, in[0], 0, 1), axis, idx);
}
static fc_tensor *fn_embedding(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n, (void)u;
    fc_tensor *ids =
        index_of(c, FC_I64, (const int64_t[]){2, 4}, 2, (const int64_t[]){4, 0, 4, 4, 1, 2, 0, 4});
    return fc_embedding(c, in[0], ids);
}
static fc_tensor *fn_gather(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n, (void)u;
    fc_tensor *idx = index_of(c, FC_U8, (const int64_t[]){2, 5}, 2,
                              (const int64_t[]){3, 3, 0, 1, 3, 2, 0, 0, 1, 2});
    return fc_gather(c, in[0], 1, idx);
}
static fc_tensor *fn_scatter_add(fc_ctx *c, fc_tensor *const *in, int n, void *u) {
    (void)n, (void)u; /* src [3,4] is larger than the index [2,3] */
    fc_tensor *idx =
        index_of(c, FC_I16, (const int64_t[]){2, 3}, 2, (const int64_t[]){2, 0, 2, 1, 1, 0});
    return fc_scatter_add(c, fc_expand(c, in[0], (const int64_t[]){3, 4}, 2), 0, idx, in[1]);
}

static void test_grad_indexing(void **state) {
    (void)state;
    int axis0 = 0, axis1 = -1;
    gradcheck(fn_index_select, &axis0, (fc_tensor *[]){leaf((const int64_t[]){4, 3}, 2)}, 1,
              "index_select axis 0");
    gradcheck(fn_index_select, &axis1, (fc_tensor *[]){leaf((const int64_t[]){4, 3}, 2)}, 1,
              "index_select axis 1");
    gradcheck(fn_embedding, NULL, (fc_tensor *[]){leaf((const int64_t[]){5, 3}, 2)}, 1,
              "embedding");
    gradcheck(fn_gather, NULL, (fc_tensor *[]){leaf((const int64_t[]){3, 4}, 2)}, 1, "gather");
    gradcheck(fn_scatter_add, NULL,
              (fc_tensor *[]){leaf((const int64_t[]){1, 4}, 2), leaf((const int64_t[]){3, 4}, 2)},
              2, "scatter_add");
}

/* The embedding backward sums colliding rows in index order: same bits for
 * any thread count. */
static void test_grad_embedding_deterministic(void **state) {
    (void)state;
    int64_t ids_v[64];
    for (int i = 0; i < 64; i++)
        ids_v[i] = (i * 7) % 5;
    fc_tensor *table = fc_param_randn(g_ctx, FC_F32, (const int64_t[]){5, 1100}, 2, 1.0);
    fc_tensor *ids = index_of(g_ctx, FC_I64, (const int64_t[]){64}, 1, ids_v);
    fc_tensor *g = fc_randn(g_ctx, FC_F32, (const int64_t[]){64, 1100}, 2);
    fc_tensor *first = NULL;
    for (int threads = 1; threads <= 4; threads++) {
        fc_ctx_set_threads(g_ctx, threads);
        fc_tensor *y = fc_embedding(g_ctx, table, ids);
        assert_int_equal(fc_backward_with(g_ctx, y, g, false), FC_OK);
        if (!first)
            first = fc_clone(g_ctx, fc_grad(table));
        else
            assert_memory_equal(fc_tensor_data(fc_grad(table)), fc_tensor_data(first),
                                5 * 1100 * 4);
        fc_zero_grad(&table, 1);
        fc_release(y);
    }
    /* and the values are the row sums, accumulated in index order */
    const float *gv = fc_tensor_data(g), *fv = fc_tensor_data(first);
    for (int r = 0; r < 5; r++) {
        for (int c = 0; c < 1100; c += 37) {
            float want = 0.0f;
            for (int i = 0; i < 64; i++)
                if (ids_v[i] == r) want += gv[i * 1100 + c];
            assert_true(fv[r * 1100 + c] == want);
        }
    }
    fc_release(first);
    fc_release(g);
    fc_release(ids);
    fc_release(table);
}

static void test_grad_saved_index_modified(void **state) {
    (void)state;
    fc_tensor *x = fc_param_randn(g_ctx, FC_F32, (const int64_t[]){4, 2}, 2, 1.0);
    fc_tensor *idx = index_of(g_ctx, FC_I64, (const int64_t[]){2}, 1, (const int64_t[]){3, 1});
    fc_tensor *y = fc_index_select(g_ctx, x, 0, idx);
    int64_t *p = fc_tensor_data_mut(idx);
    p[0] = 0;
    fc_tensor *g = fc_ones(g_ctx, FC_F32, (const int64_t[]){2, 2}, 2);
    assert_int_equal(fc_backward_with(g_ctx, y, g, false), FC_ERR_SAVED_MODIFIED);
    assert_non_null(strstr(fc_ctx_error(g_ctx), "index_select"));
    assert_non_null(strstr(fc_ctx_error(g_ctx), "index"));
    fc_ctx_clear_error(g_ctx);
    fc_release(g);
    fc_release(y);
    fc_release(idx);
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
    fc_ctx_rng_set(c, 5, 0); /* the same mask at every evaluation */
    return fc_dropout(c, fc_transpose(c, in[0], 0, 1), 0.4, u == NULL);
}

static void test_grad_masks(void **state) {
    (void)state;
    const int64_t ks[3] = {-1, 0, 2};
    for (int i = 0; i < 3; i++)
        gradcheck(fn_triu, (void *)&ks[i], (fc_tensor *[]){leaf((const int64_t[]){2, 3, 4}, 3)}, 1,
                  "triu/tril");
    gradcheck(fn_dropout, NULL, (fc_tensor *[]){leaf((const int64_t[]){6, 5}, 2)}, 1,
              "dropout (training)");
    gradcheck(fn_dropout, g_ctx, (fc_tensor *[]){leaf((const int64_t[]){6, 5}, 2)}, 1,
              "dropout (eval)");

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

/* ---- reduced-precision leaves --------------------------------------------------------------- */

static void test_grad_f16_leaf_gets_f32_gradient(void **state) {
    (void)state;
    const fc_dtype dts[2] = {FC_F16, FC_BF16};
    for (int d = 0; d < 2; d++) {
        fc_tensor *x = fc_param_zeros(g_ctx, dts[d], (const int64_t[]){3, 4}, 2);
        fc_tensor *idx =
            index_of(g_ctx, FC_I32, (const int64_t[]){3}, 1, (const int64_t[]){2, 2, 0});
        /* y = index_select(narrow(transpose(x))): rows 2, 2, 0 of x[1:3, :]^T */
        fc_tensor *y =
            fc_index_select(g_ctx, fc_narrow(g_ctx, fc_transpose(g_ctx, x, 0, 1), 1, 1, 2), 0, idx);
        fc_tensor *g = fc_full(g_ctx, FC_F32, (const int64_t[]){3, 2}, 2, 0.5);
        assert_int_equal(fc_backward_with(g_ctx, y, g, false), FC_OK);
        fc_tensor *gx = fc_grad(x);
        assert_int_equal(fc_tensor_dtype(gx), FC_F32);
        /* x^T[c][r] picked for c in {2, 2, 0} and r in {1, 2}: x[r][c] */
        const float *gv = fc_tensor_data(gx);
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 4; c++) {
                float want = r == 0 ? 0.0f : c == 2 ? 1.0f : c == 0 ? 0.5f : 0.0f;
                assert_true(gv[r * 4 + c] == want);
            }
        fc_zero_grad(&x, 1);
        fc_release(g);
        fc_release(y);
        fc_release(idx);
        fc_release(x);
    }
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_grad_indexing),
        T(test_grad_embedding_deterministic),
        T(test_grad_saved_index_modified),
        T(test_grad_masks),
        T(test_grad_f16_leaf_gets_f32_gradient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
