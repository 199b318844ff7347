/* SPDX-License-Identifier: MIT */
/* test_grad_checkpoint.c - fc_grad_checkpoint (recompute instead of store):
 * gradients of a two-block residual MLP with layer norm and dropout are bit
 * for bit those of the plain graph (inputs, parameters, an intermediate used
 * outside the checkpoints, at 1 and 2 threads, with nesting, through
 * fc_autograd_grad); the forward keeps no intermediate values; the RNG
 * stream ends where the plain run's does; a function that changes shape or
 * dtype on recompute, returns NULL or uses a non-input that requires grad
 * is a clear error that changes no gradient; bad arguments get their
 * codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fct_f64.h"
#include "fucina.h"

#define B 4
#define D 8
#define F 16

static fc_ctx *new_ctx(int threads) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .seed = 11});
    assert_non_null(ctx);
    return ctx;
}

static void expect_err(fc_ctx *ctx, fc_status got, fc_status want, const char *a, const char *b) {
    assert_int_equal(got, want);
    assert_int_equal(fc_ctx_status(ctx), want);
    const char *m = fc_ctx_error(ctx);
    if (!strstr(m, a) || (b && !strstr(m, b)))
        fail_msg("error \"%s\" lacks \"%s\" or \"%s\"", m, a, b ? b : "");
    fc_ctx_clear_error(ctx);
}

// ----------------------------------------------------------------------------
// the model: x (B,D) -> x + fc2(dropout(gelu(fc1(ln(x))))), twice

enum { LN_W, LN_B, FC1_W, FC1_B, FC2_W, FC2_B, NP };

typedef struct block {
    fc_tensor *p[NP];
    bool nest; /* checkpoint the MLP inside the (checkpointed) block too */
} block;

static void block_init(fc_ctx *ctx, block *b, bool nest) {
    b->nest = nest;
    b->p[LN_W] = fc_param_randn(ctx, FC_F32, (const int64_t[]){D}, 1, 0.5);
    b->p[LN_B] = fc_param_randn(ctx, FC_F32, (const int64_t[]){D}, 1, 0.1);
    b->p[FC1_W] = fc_param_randn(ctx, FC_F32, (const int64_t[]){F, D}, 2, 0.3);
    b->p[FC1_B] = fc_param_randn(ctx, FC_F32, (const int64_t[]){F}, 1, 0.1);
    b->p[FC2_W] = fc_param_randn(ctx, FC_F32, (const int64_t[]){D, F}, 2, 0.3);
    b->p[FC2_B] = fc_param_randn(ctx, FC_F32, (const int64_t[]){D}, 1, 0.1);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
}

static void block_free(block *b) {
    for (int i = 0; i < NP; i++)
        fc_release(b->p[i]);
}

/* h (B,D) -> (B,D): fc2(dropout(gelu(fc1(h)))) */
static fc_tensor *mlp_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    const block *b = user;
    fc_scope_begin(ctx);
    fc_tensor *h = fc_gelu(ctx, fc_linear(ctx, in[0], b->p[FC1_W], b->p[FC1_B]), true);
    h = fc_linear(ctx, fc_dropout(ctx, h, 0.25, true), b->p[FC2_W], b->p[FC2_B]);
    fc_keep(h);
    fc_scope_end(ctx);
    return h;
}

static fc_tensor *block_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    block *b = user;
    fc_scope_begin(ctx);
    fc_tensor *h = fc_layer_norm(ctx, in[0], b->p[LN_W], b->p[LN_B], 1e-5);
    fc_tensor *m = NULL;
    if (b->nest) {
        m = h ? fc_grad_checkpoint(ctx, mlp_fn, b, &h, 1) : NULL;
    } else {
        m = mlp_fn(ctx, &h, 1, b);
    }
    fc_tensor *y = fc_keep(fc_add(ctx, in[0], m));
    fc_release(m);
    fc_scope_end(ctx);
    return y;
}

typedef struct model {
    fc_tensor *x; /* the input, a leaf requiring grad */
    block blk[2];
} model;

static void model_init(fc_ctx *ctx, model *m, bool nest) {
    fc_ctx_set_seed(ctx, 5);
    m->x = fc_param_randn(ctx, FC_F32, (const int64_t[]){B, D}, 2, 1.0);
    for (int i = 0; i < 2; i++)
        block_init(ctx, &m->blk[i], nest);
}

static void model_free(model *m) {
    fc_release(m->x);
    for (int i = 0; i < 2; i++)
        block_free(&m->blk[i]);
}

static fc_tensor *run_block(fc_ctx *ctx, block *b, fc_tensor *x, bool ckpt) {
    return ckpt ? fc_grad_checkpoint(ctx, block_fn, b, &x, 1) : block_fn(ctx, &x, 1, b);
}

/* loss = mean(y2^2) + 0.5 mean(y1^2) + sum(x) * 0.1: y1 (a checkpoint's
 * output) and x (its input) have uses outside the checkpoints too. Made
 * in the caller's scope. */
static fc_tensor *model_loss(fc_ctx *ctx, model *m, bool ckpt) {
    fc_tensor *y1 = run_block(ctx, &m->blk[0], m->x, ckpt);
    fc_tensor *y2 = run_block(ctx, &m->blk[1], y1, ckpt);
    fc_tensor *l = fc_mean(ctx, fc_mul(ctx, y2, y2), NULL, 0, false);
    l = fc_add(ctx, l, fc_mul_scalar(ctx, fc_mean(ctx, fc_mul(ctx, y1, y1), NULL, 0, false), 0.5));
    l = fc_add(ctx, l, fc_mul_scalar(ctx, fc_sum(ctx, m->x, NULL, 0, false), 0.1));
    fc_release(y1);
    fc_release(y2);
    return l;
}

typedef struct run_result {
    float loss;
    uint64_t rng_offset;
    float grads[1 + 2 * NP][F * D];
    size_t nbytes[1 + 2 * NP];
} run_result;

static void keep_grads(const model *m, run_result *r) {
    const fc_tensor *t[1 + 2 * NP];
    t[0] = m->x;
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < NP; k++)
            t[1 + i * NP + k] = m->blk[i].p[k];
    for (int i = 0; i < 1 + 2 * NP; i++) {
        const fc_tensor *g = fc_grad(t[i]);
        assert_non_null(g);
        r->nbytes[i] = fc_tensor_nbytes(g);
        assert_true(r->nbytes[i] <= sizeof r->grads[i]);
        memcpy(r->grads[i], fc_tensor_data(g), r->nbytes[i]);
    }
}

static void train_once(int threads, bool ckpt, bool nest, run_result *r) {
    fc_ctx *ctx = new_ctx(threads);
    model m;
    model_init(ctx, &m, nest);
    fc_ctx_set_seed(ctx, 77);
    fc_scope_begin(ctx);
    fc_tensor *l = model_loss(ctx, &m, ckpt);
    assert_non_null(l);
    r->loss = *(const float *)fc_tensor_data(l);
    assert_int_equal(fc_backward(ctx, l), FC_OK);
    fc_scope_end(ctx);
    fc_ctx_get_rng(ctx, NULL, &r->rng_offset);
    keep_grads(&m, r);
    model_free(&m);
    free_ctx(ctx);
}

static void expect_same(const run_result *a, const run_result *b, const char *what) {
    if (memcmp(&a->loss, &b->loss, sizeof a->loss))
        fail_msg("%s: loss %.9g vs %.9g", what, (double)a->loss, (double)b->loss);
    assert_int_equal(a->rng_offset, b->rng_offset);
    for (int i = 0; i < 1 + 2 * NP; i++) {
        assert_int_equal(a->nbytes[i], b->nbytes[i]);
        if (memcmp(a->grads[i], b->grads[i], a->nbytes[i]))
            fail_msg("%s: gradient %d differs (first value %.9g vs %.9g)", what, i,
                     (double)a->grads[i][0], (double)b->grads[i][0]);
    }
}

static void test_grad_checkpoint_bit_identical(void **state) {
    (void)state;
    static run_result plain, ckpt, nested;
    for (int threads = 1; threads <= 2; threads++) {
        train_once(threads, false, false, &plain);
        train_once(threads, true, false, &ckpt);
        expect_same(&plain, &ckpt, threads == 1 ? "checkpointed, 1 thread" : "checkpointed, 2");
        /* the nested MLP checkpoint inside checkpointed blocks, and alone */
        train_once(threads, true, true, &nested);
        expect_same(&plain, &nested, "nested");
        train_once(threads, false, true, &nested);
        expect_same(&plain, &nested, "inner checkpoint only");
    }
}

/* The forward keeps only the inputs: far fewer bytes live than the plain
 * graph holds, and fc_autograd_grad through it gives the same bits. */
static void test_grad_checkpoint_memory_and_functional(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    model m;
    model_init(ctx, &m, false);
    fc_ctx_stats s0, s1;
    int64_t held[2];
    fc_tensor *g[2][3];
    for (int ck = 0; ck < 2; ck++) {
        fc_ctx_set_seed(ctx, 3);
        fc_ctx_get_stats(ctx, &s0);
        fc_scope_begin(ctx);
        fc_tensor *l = model_loss(ctx, &m, ck);
        fc_ctx_get_stats(ctx, &s1);
        held[ck] = s1.bytes_live - s0.bytes_live;
        fc_tensor *in[3] = {m.x, m.blk[0].p[FC1_W], m.blk[1].p[LN_B]};
        fc_autograd_grad_opts o = {.allow_unused = true};
        assert_int_equal(fc_autograd_grad(ctx, &l, NULL, 1, in, 3, &o, g[ck]), FC_OK);
        assert_null(fc_grad(m.x));
        assert_null(fc_grad(m.blk[0].p[FC1_W]));
        fc_scope_end(ctx);
    }
    if (!(held[1] * 2 < held[0]))
        fail_msg("checkpointed forward holds %lld bytes, plain %lld", (long long)held[1],
                 (long long)held[0]);
    for (int j = 0; j < 3; j++) {
        assert_non_null(g[1][j]);
        assert_int_equal(fc_tensor_nbytes(g[0][j]), fc_tensor_nbytes(g[1][j]));
        assert_memory_equal(fc_tensor_data(g[0][j]), fc_tensor_data(g[1][j]),
                            fc_tensor_nbytes(g[0][j]));
        fc_release(g[0][j]);
        fc_release(g[1][j]);
    }
    model_free(&m);
    free_ctx(ctx);
}

// ----------------------------------------------------------------------------
// refusals

typedef struct fickle {
    fc_tensor *w;     /* a parameter used inside */
    fc_tensor *other; /* a non-leaf reached through user, or NULL */
    int calls;
    int change_at; /* on this call: 1 change shape, 2 dtype, 3 return NULL */
    int change;
} fickle;

static fc_tensor *fickle_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    fickle *f = user;
    f->calls++;
    fc_scope_begin(ctx);
    fc_tensor *y = fc_mul(ctx, in[0], f->w);
    if (f->other) y = fc_add(ctx, y, f->other);
    if (f->calls == f->change_at) {
        if (f->change == 1) y = fc_sum(ctx, y, (const int[]){0}, 1, false);
        if (f->change == 2) y = fc_to(ctx, y, FC_F64);
        if (f->change == 3) y = fc_add(ctx, y, fc_zeros(ctx, FC_F32, (const int64_t[]){3}, 1));
    }
    fc_keep(y);
    fc_scope_end(ctx);
    return y;
}

static void test_grad_checkpoint_recompute_errors(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    const float xs[2] = {1.5f, -2.0f}, ws[2] = {0.5f, 3.0f};
    fc_tensor *x = fc_param_from_data(ctx, FC_F32, (const int64_t[]){2}, 1, xs);
    fc_tensor *w = fc_param_from_data(ctx, FC_F32, (const int64_t[]){2}, 1, ws);
    /* a first, good backward gives w a gradient the failures must keep */
    fickle f = {.w = w};
    fc_scope_begin(ctx);
    fc_tensor *y = fc_grad_checkpoint(ctx, fickle_fn, &f, &x, 1);
    assert_int_equal(f.calls, 1);
    assert_int_equal(fc_backward(ctx, fc_sum(ctx, y, NULL, 0, false)), FC_OK);
    assert_int_equal(f.calls, 2);
    fc_scope_end(ctx);
    const float *gw = fc_tensor_data(fc_grad(w)), *gx = fc_tensor_data(fc_grad(x));
    assert_true(gw[0] == 1.5f && gw[1] == -2.0f && gx[0] == 0.5f && gx[1] == 3.0f);
    const char *want[] = {"[2]", "f64", "[3]"};
    const fc_status code[] = {FC_ERR_SHAPE_MISMATCH, FC_ERR_STATE, FC_ERR_SHAPE_MISMATCH};
    for (int c = 1; c <= 3; c++) {
        f = (fickle){.w = w, .change_at = 2, .change = c};
        fc_scope_begin(ctx);
        y = fc_grad_checkpoint(ctx, fickle_fn, &f, &x, 1);
        assert_non_null(y);
        fc_status st = fc_backward(ctx, fc_sum(ctx, y, NULL, 0, false));
        expect_err(ctx, st, code[c - 1], c == 3 ? "add" : "fc_grad_checkpoint", want[c - 1]);
        fc_scope_end(ctx);
        gw = fc_tensor_data(fc_grad(w));
        gx = fc_tensor_data(fc_grad(x));
        assert_true(gw[0] == 1.5f && gw[1] == -2.0f && gx[0] == 0.5f && gx[1] == 3.0f);
    }
    /* a NULL result in the forward propagates the function's error */
    f = (fickle){.w = w, .change_at = 1, .change = 3};
    assert_null(fc_grad_checkpoint(ctx, fickle_fn, &f, &x, 1));
    expect_err(ctx, fc_ctx_status(ctx), FC_ERR_SHAPE_MISMATCH, "add", NULL);
    /* a non-leaf that requires grad reached through user, not as an input */
    fc_scope_begin(ctx);
    f = (fickle){.w = w, .other = fc_mul_scalar(ctx, x, 2.0)};
    y = fc_grad_checkpoint(ctx, fickle_fn, &f, &x, 1);
    expect_err(ctx, fc_backward(ctx, fc_sum(ctx, y, NULL, 0, false)), FC_ERR_INVALID_ARG,
               "fc_grad_checkpoint", "mul_scalar");
    fc_scope_end(ctx);
    assert_true(gw[0] == 1.5f && gx[1] == 3.0f);
    /* grad mode off: just a call, nothing recorded */
    fc_no_grad_begin(ctx);
    y = fc_grad_checkpoint(ctx, fickle_fn, &(fickle){.w = w}, &x, 1);
    fc_no_grad_end(ctx);
    assert_non_null(y);
    assert_false(fc_tensor_requires_grad(y));
    fc_release(y);
    fc_release(x);
    fc_release(w);
    free_ctx(ctx);
}

static fc_tensor *ident_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)ctx, (void)n, (void)user;
    return fc_retain(in[0]);
}

static void test_grad_checkpoint_bad_args(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1), *other = new_ctx(1);
    fc_tensor *x = fc_param_zeros(ctx, FC_F32, (const int64_t[]){3}, 1);
    fc_tensor *z = fc_zeros(other, FC_F32, (const int64_t[]){3}, 1);
    fc_tensor *in5[5] = {x, x, x, x, x};
    assert_null(fc_grad_checkpoint(NULL, ident_fn, NULL, &x, 1));
    assert_null(fc_grad_checkpoint(ctx, NULL, NULL, &x, 1));
    expect_err(ctx, fc_ctx_status(ctx), FC_ERR_NULL_ARG, "fc_grad_checkpoint", "fn");
    assert_null(fc_grad_checkpoint(ctx, ident_fn, NULL, NULL, 1));
    expect_err(ctx, fc_ctx_status(ctx), FC_ERR_NULL_ARG, "fc_grad_checkpoint", "inputs");
    assert_null(fc_grad_checkpoint(ctx, ident_fn, NULL, (fc_tensor *[]){NULL}, 1));
    expect_err(ctx, fc_ctx_status(ctx), FC_ERR_NULL_ARG, "fc_grad_checkpoint", "input 0");
    assert_null(fc_grad_checkpoint(ctx, ident_fn, NULL, &x, 0));
    expect_err(ctx, fc_ctx_status(ctx), FC_ERR_INVALID_ARG, "fc_grad_checkpoint", "n = 0");
    assert_null(fc_grad_checkpoint(ctx, ident_fn, NULL, in5, 5));
    expect_err(ctx, fc_ctx_status(ctx), FC_ERR_INVALID_ARG, "fc_grad_checkpoint", "n = 5");
    assert_null(fc_grad_checkpoint(ctx, ident_fn, NULL, (fc_tensor *[]){x, z}, 2));
    expect_err(ctx, fc_ctx_status(ctx), FC_ERR_CONTEXT, "fc_grad_checkpoint", "input 1");
    /* returning an input itself: the node goes on a handle of its own, x
     * stays a leaf, and the gradient passes through (x listed twice: the
     * whole gradient arrives once per listing) */
    fc_tensor *y = fc_grad_checkpoint(ctx, ident_fn, NULL, (fc_tensor *[]){x, x}, 2);
    assert_non_null(y);
    assert_true(y != x);
    assert_true(fc_tensor_is_leaf(x));
    fc_scope_begin(ctx);
    fc_tensor *two = fc_full(ctx, FC_F32, (const int64_t[]){3}, 1, 2.0);
    assert_int_equal(fc_backward_with(ctx, y, two, false), FC_OK);
    fc_scope_end(ctx);
    const float *g = fc_tensor_data(fc_grad(x));
    assert_true(g[0] == 2.0f && g[2] == 2.0f);
    fc_release(y);
    fc_release(x);
    fc_release(z);
    free_ctx(ctx);
    free_ctx(other);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_checkpoint_bit_identical),
        cmocka_unit_test(test_grad_checkpoint_memory_and_functional),
        cmocka_unit_test(test_grad_checkpoint_recompute_errors),
        cmocka_unit_test(test_grad_checkpoint_bad_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
