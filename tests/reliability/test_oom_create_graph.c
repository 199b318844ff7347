/* SPDX-License-Identifier: MIT */
/* test_oom_create_graph.c - out-of-memory sweeps (oom_sweep.h: every
 * allocation fails in turn) over higher-order gradients: a Hessian-vector
 * product through fc_autograd_grad with create_graph (a graph whose rules
 * take the recorded paths of several families: matmul, layer_norm,
 * softmax, a window op's region gradient, broadcasting, a saved output),
 * the same through fc_grad_checkpoint, one through the transformer ops
 * (fc_rope, causal GQA fc_attention with a query that sees no key,
 * fc_swiglu), and fc_gradgradcheck. At every failure the call reports FC_ERR_OOM,
 * hands back no gradient, leaves no tensor alive and no allocation behind,
 * and the context still works. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "oom_sweep.h"

static fc_tensor *net(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    (void)user;
    fc_tensor *h = fc_tanh(ctx, fc_matmul(ctx, in[0], in[1])); /* [2, 3] */
    fc_tensor *s = fc_softmax(ctx, fc_layer_norm(ctx, h, NULL, NULL, 1e-5), 1);
    fc_tensor *w = fc_narrow(ctx, s, 1, 1, 2); /* a region gradient */
    return fc_sum(ctx, fc_mul(ctx, w, fc_exp(ctx, fc_narrow(ctx, h, 1, 0, 2))), NULL, 0, false);
}

static fc_status make_leaves(fc_ctx *ctx, fc_tensor **p, fc_tensor **q) {
    *p = fc_param_from_data(ctx, FC_F64, (const int64_t[]){2, 3}, 2,
                            (double[]){0.1, -0.2, 0.3, 0.4, -0.5, 0.6});
    *q = fc_param_from_data(ctx, FC_F64, (const int64_t[]){3, 3}, 2,
                            (double[]){1, 2, -1, 0.5, 0.25, -2, 0.3, -0.1, 0.7});
    return fc_ctx_status(ctx);
}

static fc_status sc_hvp(fc_ctx *ctx) {
    fc_tensor *p = NULL, *q = NULL, *g[2] = {0}, *h[2] = {0};
    fc_status st = make_leaves(ctx, &p, &q);
    fc_tensor *in[2] = {p, q};
    fc_scope_begin(ctx);
    fc_tensor *l = st == FC_OK ? net(ctx, in, 2, NULL) : NULL;
    if (st == FC_OK && !l) st = fc_ctx_status(ctx);
    if (st == FC_OK) {
        st = fc_autograd_grad(ctx, &l, NULL, 1, in, 2,
                              &(fc_autograd_grad_opts){.create_graph = true}, g);
        if (st != FC_OK && (g[0] || g[1])) fail_msg("a failed create_graph walk left a gradient");
    }
    if (st == FC_OK) { /* H v with v = the gradient itself, detached */
        fc_tensor *v[2] = {fc_detach(ctx, g[0]), fc_detach(ctx, g[1])};
        st = v[0] && v[1] ? fc_autograd_grad(ctx, g, v, 2, in, 2, NULL, h) : fc_ctx_status(ctx);
        if (st != FC_OK && (h[0] || h[1])) fail_msg("a failed second walk left a gradient");
    }
    fc_scope_end(ctx);
    for (int j = 0; j < 2; j++) {
        fc_release(g[j]);
        fc_release(h[j]);
    }
    fc_release(p);
    fc_release(q);
    return st;
}

static fc_tensor *ck_body(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    fc_tensor *q = user;
    return fc_tanh(ctx, fc_matmul(ctx, in[0], q));
}

/* an HVP through a checkpoint (its recompute recorded, q used inside) */
static fc_status sc_checkpoint(fc_ctx *ctx) {
    fc_tensor *p = NULL, *q = NULL, *g[2] = {0}, *h[2] = {0};
    fc_status st = make_leaves(ctx, &p, &q);
    fc_tensor *in[2] = {p, q};
    fc_scope_begin(ctx);
    fc_tensor *y = st == FC_OK ? fc_grad_checkpoint(ctx, ck_body, q, &p, 1) : NULL;
    fc_tensor *l = fc_sum(ctx, fc_square(ctx, y), NULL, 0, false);
    if (st == FC_OK && !l) st = fc_ctx_status(ctx);
    fc_autograd_grad_opts cg = {.create_graph = true, .allow_unused = true};
    if (st == FC_OK) st = fc_autograd_grad(ctx, &l, NULL, 1, in, 2, &cg, g);
    if (st == FC_OK && (!g[0] || !g[1])) fail_msg("a gradient through the checkpoint is missing");
    if (st == FC_OK) {
        fc_tensor *s =
            fc_add(ctx, fc_sum(ctx, g[0], NULL, 0, false), fc_sum(ctx, g[1], NULL, 0, false));
        st = s ? fc_autograd_grad(ctx, &s, NULL, 1, in, 2, NULL, h) : fc_ctx_status(ctx);
    }
    fc_scope_end(ctx);
    for (int j = 0; j < 2; j++) {
        fc_release(g[j]);
        fc_release(h[j]);
    }
    fc_release(p);
    fc_release(q);
    return st;
}

/* rope on x [1, 3, 2, 2] ([B, T, H, D]), attention of its 2 heads over the
 * 1 kv head of y [1, 2, 1, 2] (causal, T = 3 > S = 2: query 0 sees no key),
 * swiglu of the output with itself */
static fc_status sc_transformer(fc_ctx *ctx) {
    fc_tensor *x = fc_param_from_data(
        ctx, FC_F64, (const int64_t[]){1, 3, 2, 2}, 4,
        (double[]){0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.2, 0.7, -0.3, 0.9, -0.8, 0.05});
    fc_tensor *y = fc_param_from_data(ctx, FC_F64, (const int64_t[]){1, 2, 1, 2}, 4,
                                      (double[]){0.5, -1.0, 0.25, 0.75});
    fc_status st = fc_ctx_status(ctx);
    fc_tensor *in[2] = {x, y}, *g[2] = {0}, *h[2] = {0};
    fc_scope_begin(ctx);
    if (st == FC_OK) {
        const int pm[4] = {0, 2, 1, 3};
        fc_tensor *q = fc_permute(ctx, fc_rope(ctx, x, &(fc_rope_opts){.pos_offset = 1}), pm);
        fc_tensor *kv = fc_permute(ctx, y, pm);
        fc_tensor *o = fc_attention(ctx, q, kv, kv, NULL, &(fc_attention_opts){.causal = true});
        fc_tensor *l = fc_sum(ctx, fc_swiglu(ctx, o, o), NULL, 0, false);
        st = l ? fc_autograd_grad(ctx, &l, NULL, 1, in, 2,
                                  &(fc_autograd_grad_opts){.create_graph = true}, g)
               : fc_ctx_status(ctx);
        if (st != FC_OK && (g[0] || g[1])) fail_msg("a failed create_graph walk left a gradient");
    }
    if (st == FC_OK) {
        fc_tensor *v[2] = {fc_detach(ctx, g[0]), fc_detach(ctx, g[1])};
        st = v[0] && v[1] ? fc_autograd_grad(ctx, g, v, 2, in, 2, NULL, h) : fc_ctx_status(ctx);
        if (st != FC_OK && (h[0] || h[1])) fail_msg("a failed second walk left a gradient");
    }
    fc_scope_end(ctx);
    for (int j = 0; j < 2; j++) {
        fc_release(g[j]);
        fc_release(h[j]);
    }
    fc_release(x);
    fc_release(y);
    return st;
}

static fc_status sc_gradgradcheck(fc_ctx *ctx) {
    fc_tensor *p = NULL, *q = NULL;
    fc_status st = make_leaves(ctx, &p, &q);
    fc_tensor *in[2] = {p, q};
    if (st == FC_OK) st = fc_gradgradcheck(ctx, net, NULL, in, 2, NULL, NULL);
    fc_release(p);
    fc_release(q);
    return st;
}

static void sweep(const char *name, oom_scenario_fn fn) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 3});
    assert_int_equal(fn(ctx), FC_OK); /* the scenario works without faults */
    fc_ctx_free(ctx);
    oom_scenario s = {name, fn};
    oom_result r = oom_sweep(&s);
    printf("oom sweep: %-28s completed at N=%ld, %ld failures checked\n", name, r.largest_n,
           r.failures);
    assert_true(r.failures > 0);
}

static void test_oom_create_graph_hvp(void **state) {
    (void)state;
    sweep("create_graph HVP", sc_hvp);
}

static void test_oom_create_graph_checkpoint(void **state) {
    (void)state;
    sweep("create_graph via checkpoint", sc_checkpoint);
}

static void test_oom_create_graph_transformer(void **state) {
    (void)state;
    sweep("create_graph rope/attn/swiglu", sc_transformer);
}

static void test_oom_create_graph_gradgradcheck(void **state) {
    (void)state;
    sweep("fc_gradgradcheck", sc_gradgradcheck);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oom_create_graph_hvp),
        cmocka_unit_test(test_oom_create_graph_checkpoint),
        cmocka_unit_test(test_oom_create_graph_transformer),
        cmocka_unit_test(test_oom_create_graph_gradgradcheck),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
