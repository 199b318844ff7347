/* test_grad_reduce.c - fc_gradcheck (f64, central differences) of every
 * differentiable op of the reduction family: the reductions, cumsum,
 * softmax, log_softmax, layer_norm, rms_norm, cross_entropy and mse_loss,
 * each on contiguous inputs and on strided ones (a transposed view, a
 * narrowed view, a broadcast view made inside the checked function by the
 * layout ops; the ops under test see non-contiguous inputs), plus
 * the composite layer_norm -> softmax -> cross_entropy chain. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "exec/tensor.h"
#include "fc_test_data.h"
#include "fucina/autograd.h"
#include "fucina/ops.h"

enum op {
    OP_SUM,
    OP_MEAN,
    OP_PROD,
    OP_MAX,
    OP_MIN,
    OP_VAR,
    OP_STD,
    OP_LSE,
    OP_CUMSUM,
    OP_SOFTMAX,
    OP_LOG_SOFTMAX,
    OP_LAYER_NORM,
    OP_LAYER_NORM_BARE,
    OP_RMS_NORM,
    OP_CROSS_ENTROPY,
    OP_MSE,
    OP_CHAIN
};

enum view { V_CONTIG, V_TRANSPOSE, V_NARROW, V_BROADCAST };

typedef struct gc_case {
    const char *name;
    enum op op;
    enum view view;
    int axes[3], naxes;
    bool keepdim;
    int correction; /* var/std; the axis for cumsum/softmax */
    fc_reduction red;
    fc_tensor *targets; /* cross_entropy */
} gc_case;

/* The op's input as the checked function sees it: in[0] itself or a view
 * of it made by the (differentiable) layout ops. Transpose swaps the first
 * two axes; narrow drops the first and last element of the last axis;
 * broadcast expands a leading axis of 1 to 3. */
static fc_tensor *viewed(fc_ctx *ctx, fc_tensor *x, enum view v) {
    int r = fc_tensor_rank(x);
    int64_t shape[FC_MAX_RANK];
    memcpy(shape, fc_tensor_shape(x), sizeof(int64_t) * (size_t)r);
    switch (v) {
    case V_TRANSPOSE:
        return fc_transpose(ctx, x, 0, 1);
    case V_NARROW:
        return fc_narrow(ctx, x, r - 1, 1, shape[r - 1] - 2);
    case V_BROADCAST:
        shape[0] = 3;
        return fc_expand(ctx, x, shape, r);
    default:
        return fc_retain(x);
    }
}

static fc_tensor *apply(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    const gc_case *c = user;
    fc_tensor *x = viewed(ctx, in[0], c->view), *y = NULL;
    assert_non_null(x);
    assert_true(c->view == V_CONTIG || !fc_tensor_is_contiguous(x)); /* a real strided input */
    switch (c->op) {
    case OP_SUM:
        y = fc_sum(ctx, x, c->axes, c->naxes, c->keepdim);
        break;
    case OP_MEAN:
        y = fc_mean(ctx, x, c->axes, c->naxes, c->keepdim);
        break;
    case OP_PROD:
        y = fc_prod(ctx, x, c->axes, c->naxes, c->keepdim);
        break;
    case OP_MAX:
        y = fc_max(ctx, x, c->axes, c->naxes, c->keepdim);
        break;
    case OP_MIN:
        y = fc_min(ctx, x, c->axes, c->naxes, c->keepdim);
        break;
    case OP_VAR:
        y = fc_var(ctx, x, c->axes, c->naxes, c->correction, c->keepdim);
        break;
    case OP_STD:
        y = fc_std(ctx, x, c->axes, c->naxes, c->correction, c->keepdim);
        break;
    case OP_LSE:
        y = fc_logsumexp(ctx, x, c->axes, c->naxes, c->keepdim);
        break;
    case OP_CUMSUM:
        y = fc_cumsum(ctx, x, c->correction);
        break;
    case OP_SOFTMAX:
        y = fc_softmax(ctx, x, c->correction);
        break;
    case OP_LOG_SOFTMAX:
        y = fc_log_softmax(ctx, x, c->correction);
        break;
    case OP_LAYER_NORM:
        y = fc_layer_norm(ctx, x, in[1], in[2], 1e-5);
        break;
    case OP_LAYER_NORM_BARE:
        y = fc_layer_norm(ctx, x, NULL, NULL, 1e-3);
        break;
    case OP_RMS_NORM:
        y = fc_rms_norm(ctx, x, in[1], 1e-5);
        break;
    case OP_CROSS_ENTROPY: {
        fc_ce_opts o = {
            .reduction = c->red, .use_ignore = true, .ignore_index = 2, .label_smoothing = 0.1};
        y = fc_cross_entropy(ctx, x, c->targets, &o);
        break;
    }
    case OP_MSE:
        y = fc_mse_loss(ctx, x, in[1], c->red);
        break;
    case OP_CHAIN: {
        fc_tensor *h = fc_layer_norm(ctx, x, in[1], in[2], 1e-5);
        fc_tensor *p = fc_softmax(ctx, h, 1);
        fc_ce_opts o = {.label_smoothing = 0.2};
        y = fc_cross_entropy(ctx, p, c->targets, &o);
        fc_release(h);
        fc_release(p);
        break;
    }
    }
    (void)n;
    fc_release(x);
    return y;
}

static fc_tensor *random_f64(fc_ctx *ctx, const int64_t *shape, int rank, uint64_t seed, double lo,
                             double hi) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    double *v = malloc(sizeof *v * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(fc_test_splitmix64(&seed) >> 11) / 9007199254740992.0;
        v[i] = lo + (hi - lo) * u;
    }
    fc_tensor *t = fc_tensor_from_data(ctx, FC_F64, shape, rank, v);
    free(v);
    assert_non_null(t);
    return t;
}

static void check(fc_ctx *ctx, gc_case *c, fc_tensor *const *in, int n) {
    fc_gradcheck_opts o = {.check_all_f64 = true, .seed = 9};
    fc_gradcheck_report rep;
    fc_status st = fc_gradcheck(ctx, apply, c, in, n, &o, &rep);
    if (st != FC_OK) fail_msg("%s (view %d): %s", c->name, (int)c->view, fc_ctx_error(ctx));
    assert_true(rep.passed);
    assert_true(rep.checked > 0);
}

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

/* The leaf shape for a 3-D reduction input under each view. */
static const int64_t leaf3[4][3] = {{3, 4, 5}, {4, 3, 5}, {3, 4, 7}, {1, 4, 5}};

static void test_grad_reductions(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    gc_case cases[] = {
        {"sum axis 1", OP_SUM, 0, {1}, 1, false, 0, 0, NULL},
        {"sum all", OP_SUM, 0, {0}, 0, false, 0, 0, NULL},
        {"sum 0,2 keepdim", OP_SUM, 0, {0, 2}, 2, true, 0, 0, NULL},
        {"mean axis 2", OP_MEAN, 0, {2}, 1, false, 0, 0, NULL},
        {"mean all", OP_MEAN, 0, {0}, 0, true, 0, 0, NULL},
        {"prod axis 1", OP_PROD, 0, {1}, 1, false, 0, 0, NULL},
        {"max axis 0", OP_MAX, 0, {0}, 1, false, 0, 0, NULL},
        {"max 1,2", OP_MAX, 0, {1, 2}, 2, true, 0, 0, NULL},
        {"min axis -1", OP_MIN, 0, {-1}, 1, false, 0, 0, NULL},
        {"min all", OP_MIN, 0, {0}, 0, false, 0, 0, NULL},
        {"var axis 1", OP_VAR, 0, {1}, 1, false, 1, 0, NULL},
        {"var 0,2 c0", OP_VAR, 0, {0, 2}, 2, true, 0, 0, NULL},
        {"std all c1", OP_STD, 0, {0}, 0, false, 1, 0, NULL},
        {"std axis 2 c2", OP_STD, 0, {2}, 1, false, 2, 0, NULL},
        {"logsumexp 0,2", OP_LSE, 0, {0, 2}, 2, false, 0, 0, NULL},
        {"logsumexp all", OP_LSE, 0, {0}, 0, false, 0, 0, NULL},
        {"cumsum axis 1", OP_CUMSUM, 0, {0}, 0, false, 1, 0, NULL},
        {"cumsum axis 2", OP_CUMSUM, 0, {0}, 0, false, 2, 0, NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int v = V_CONTIG; v <= V_BROADCAST; v++) {
            cases[k].view = (enum view)v;
            fc_scope_begin(ctx);
            fc_tensor *x = random_f64(ctx, leaf3[v], 3, 100 + k, -1, 1);
            check(ctx, &cases[k], &x, 1);
            fc_scope_end(ctx);
        }
    free_ctx(ctx);
}

/* prod at and around zeros: exactly one zero in a set, two zeros, none */
static void test_grad_prod_with_zeros(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    double v[12] = {0.5, 0,    2,   -1.5, /* one zero */
                    0,   1.2,  0,   3,    /* two zeros */
                    0.7, -0.9, 1.1, 2};
    fc_tensor *x = fc_tensor_from_data(ctx, FC_F64, (const int64_t[]){3, 4}, 2, v);
    gc_case c = {"prod zeros", OP_PROD, V_CONTIG, {1}, 1, false, 0, 0, NULL};
    check(ctx, &c, &x, 1);
    gc_case all = {"prod zeros all", OP_PROD, V_CONTIG, {0}, 0, false, 0, 0, NULL};
    check(ctx, &all, &x, 1);
    gc_case col = {"prod zeros axis 0", OP_PROD, V_TRANSPOSE, {0}, 1, false, 0, 0, NULL};
    check(ctx, &col, &x, 1);
    fc_release(x);
    free_ctx(ctx);
}

static void test_grad_softmax(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    for (int op = OP_SOFTMAX; op <= OP_LOG_SOFTMAX; op++)
        for (int v = V_CONTIG; v <= V_BROADCAST; v++)
            for (int axis = 0; axis < 3; axis++) {
                gc_case c = {"softmax", (enum op)op, (enum view)v, {0}, 0, false, axis, 0, NULL};
                fc_scope_begin(ctx);
                fc_tensor *x = random_f64(ctx, leaf3[v], 3, 200 + (uint64_t)axis, -2, 2);
                check(ctx, &c, &x, 1);
                fc_scope_end(ctx);
            }
    free_ctx(ctx);
}

static void test_grad_norms(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    const int64_t leaf2[4][2] = {{3, 6}, {6, 3}, {3, 8}, {1, 6}};
    int64_t d6 = 6;
    for (int v = V_CONTIG; v <= V_BROADCAST; v++) {
        fc_scope_begin(ctx);
        fc_tensor *in[3] = {random_f64(ctx, leaf2[v], 2, 300, -2, 2),
                            random_f64(ctx, &d6, 1, 301, 0.5, 1.5),
                            random_f64(ctx, &d6, 1, 302, -1, 1)};
        gc_case ln = {"layer_norm", OP_LAYER_NORM, (enum view)v, {0}, 0, false, 0, 0, NULL};
        check(ctx, &ln, in, 3);
        gc_case rms = {"rms_norm", OP_RMS_NORM, (enum view)v, {0}, 0, false, 0, 0, NULL};
        check(ctx, &rms, in, 2);
        gc_case bare = {
            "layer_norm bare", OP_LAYER_NORM_BARE, (enum view)v, {0}, 0, false, 0, 0, NULL};
        check(ctx, &bare, in, 1);
        fc_scope_end(ctx);
    }
    free_ctx(ctx);
}

static void test_grad_losses(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    const int64_t leaf2[4][2] = {{4, 5}, {5, 4}, {4, 7}, {1, 5}};
    int64_t tv[4] = {1, 2, 4, 0}, n4 = 4, tv3[3] = {3, 0, 2};
    for (int v = V_CONTIG; v <= V_BROADCAST; v++) {
        fc_scope_begin(ctx);
        /* broadcast makes 3 rows */
        fc_tensor *t = v == V_BROADCAST
                           ? fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){3}, 1, tv3)
                           : fc_tensor_from_data(ctx, FC_I64, &n4, 1, tv);
        fc_tensor *x = random_f64(ctx, leaf2[v], 2, 400, -2, 2);
        for (int r = 0; r < 3; r++) {
            gc_case c = {"cross_entropy",
                         OP_CROSS_ENTROPY,
                         (enum view)v,
                         {0},
                         0,
                         false,
                         0,
                         (fc_reduction)r,
                         t};
            check(ctx, &c, &x, 1);
        }
        int64_t bshape[1] = {leaf2[v][1] - (v == V_NARROW ? 2 : 0)};
        if (v == V_TRANSPOSE) bshape[0] = leaf2[v][0];
        fc_tensor *in[2] = {x, random_f64(ctx, bshape, 1, 401, -1, 1)};
        for (int r = 0; r < 3; r++) {
            gc_case c = {"mse_loss", OP_MSE, (enum view)v, {0}, 0, false, 0, (fc_reduction)r, NULL};
            check(ctx, &c, in, 2);
        }
        fc_scope_end(ctx);
    }
    free_ctx(ctx);
}

static void test_grad_chain_layer_norm_softmax_cross_entropy(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx();
    int64_t d6 = 6, n4 = 4, tv[4] = {5, 0, 3, 3};
    for (int v = V_CONTIG; v <= V_TRANSPOSE; v++) {
        fc_scope_begin(ctx);
        const int64_t shape[2][2] = {{4, 6}, {6, 4}};
        fc_tensor *in[3] = {random_f64(ctx, shape[v], 2, 500, -2, 2),
                            random_f64(ctx, &d6, 1, 501, 0.5, 1.5),
                            random_f64(ctx, &d6, 1, 502, -1, 1)};
        fc_tensor *t = fc_tensor_from_data(ctx, FC_I64, &n4, 1, tv);
        gc_case c = {"layer_norm -> softmax -> cross_entropy",
                     OP_CHAIN,
                     (enum view)v,
                     {0},
                     0,
                     false,
                     0,
                     0,
                     t};
        check(ctx, &c, in, 3);
        fc_scope_end(ctx);
    }
    free_ctx(ctx);
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
        cmocka_unit_test(test_grad_reductions),
        cmocka_unit_test(test_grad_prod_with_zeros),
        cmocka_unit_test(test_grad_softmax),
        cmocka_unit_test(test_grad_norms),
        cmocka_unit_test(test_grad_losses),
        cmocka_unit_test(test_grad_chain_layer_norm_softmax_cross_entropy),
        cmocka_unit_test(test_grad_saved_values_are_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
