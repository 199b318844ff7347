/* SPDX-License-Identifier: MIT */
/* bench_autograd.c - norm_softmax (peers/norm_softmax.py) and tiny_ops
 * (peers/tiny_ops.py): forward+backward through the tape. */
#include <stdlib.h>

#include "bench.h"
#include "fucina.h"

static int threads(void) {
    const char *s = getenv("FUCINA_BENCH_THREADS");
    return s && atoi(s) > 0 ? atoi(s) : 2;
}

typedef struct ns {
    fc_ctx *ctx;
    fc_tensor *x, *g, *w, *b;
} ns;

static void sm_fb(void *p) {
    ns *s = p;
    fc_zero_grad(&s->x, 1);
    fc_scope_begin(s->ctx);
    fc_backward_with(s->ctx, fc_softmax(s->ctx, s->x, -1), s->g, false);
    fc_scope_end(s->ctx);
}
static void ln_fb(void *p) {
    ns *s = p;
    fc_tensor *ps[3] = {s->x, s->w, s->b};
    fc_zero_grad(ps, 3);
    fc_scope_begin(s->ctx);
    fc_backward_with(s->ctx, fc_layer_norm(s->ctx, s->x, s->w, s->b, 1e-5), s->g, false);
    fc_scope_end(s->ctx);
}
static void sm_f(void *p) {
    ns *s = p;
    fc_no_grad_begin(s->ctx);
    fc_scope_begin(s->ctx);
    fc_softmax(s->ctx, s->x, -1);
    fc_scope_end(s->ctx);
    fc_no_grad_end(s->ctx);
}
static void ln_f(void *p) {
    ns *s = p;
    fc_no_grad_begin(s->ctx);
    fc_scope_begin(s->ctx);
    fc_layer_norm(s->ctx, s->x, s->w, s->b, 1e-5);
    fc_scope_end(s->ctx);
    fc_no_grad_end(s->ctx);
}

int bench_norm_softmax(int argc, char **argv) {
    (void)argc, (void)argv;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads(), .seed = 0});
    const int64_t rc[2] = {4096, 1024}, c[1] = {1024};
    ns s = {ctx, fc_randn(ctx, FC_F32, rc, 2), fc_randn(ctx, FC_F32, rc, 2), NULL, NULL};
    fc_tensor *wn = fc_randn(ctx, FC_F32, c, 1), *bn = fc_randn(ctx, FC_F32, c, 1);
    s.w = fc_add_scalar(ctx, fc_mul_scalar(ctx, wn, 0.1), 1.0);
    s.b = fc_mul_scalar(ctx, bn, 0.1);
    if (!s.x || !s.g || !s.w || !s.b) goto fail;
    fc_requires_grad(s.x, true);
    fc_requires_grad(s.w, true);
    fc_requires_grad(s.b, true);
    struct {
        const char *name;
        bench_fn fn;
    } w[] = {{"softmax_fwd_bwd", sm_fb}, {"layernorm_fwd_bwd", ln_fb},
             {"softmax_fwd_nograd", sm_f}, {"layernorm_fwd_nograd", ln_f}};
    bench_result r[4];
    for (int i = 0; i < 4; i++) r[i] = bench_measure(w[i].fn, &s);
    if (fc_ctx_status(ctx) != FC_OK) goto fail;
    printf("{\"workload\": \"norm_softmax\", ");
    bench_json_env(stdout, threads());
    printf(", \"shape\": [4096, 1024], \"results\": {");
    for (int i = 0; i < 4; i++) {
        printf("%s\"%s\": {", i ? ", " : "", w[i].name);
        bench_json_stat(stdout, "ms", &r[i], -1e3);
        printf(", ");
        bench_json_raw(stdout, &r[i]);
        printf("}");
    }
    printf("}}\n");
    fc_ctx_free(ctx);
    return 0;
fail:
    fprintf(stderr, "fucina-bench norm_softmax: %s\n", fc_ctx_error(ctx));
    fc_ctx_free(ctx);
    return 1;
}

typedef struct tiny {
    fc_ctx *ctx;
    fc_tensor *a, *b, *c;
} tiny;

static fc_tensor *tiny_fwd(tiny *t) {
    return fc_sum(t->ctx, fc_add(t->ctx, fc_mul(t->ctx, t->a, t->b), t->c), NULL, 0, false);
}
static void t_fwd_bwd(void *p) {
    tiny *t = p;
    fc_scope_begin(t->ctx);
    fc_backward(t->ctx, tiny_fwd(t)); /* grads accumulate, never zeroed (as the peer) */
    fc_scope_end(t->ctx);
}
static void t_fwd_grad(void *p) {
    tiny *t = p;
    fc_scope_begin(t->ctx);
    tiny_fwd(t);
    fc_scope_end(t->ctx);
}
static void t_fwd_nograd(void *p) {
    tiny *t = p;
    fc_no_grad_begin(t->ctx);
    fc_scope_begin(t->ctx);
    tiny_fwd(t);
    fc_scope_end(t->ctx);
    fc_no_grad_end(t->ctx);
}
static void t_empty(void *p) { (void)p; }

int bench_tiny_ops(int argc, char **argv) {
    (void)argc, (void)argv;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads(), .seed = 0});
    const int64_t n[1] = {16};
    tiny t = {ctx, fc_randn(ctx, FC_F32, n, 1), fc_randn(ctx, FC_F32, n, 1),
              fc_randn(ctx, FC_F32, n, 1)};
    fc_requires_grad(t.a, true);
    fc_requires_grad(t.b, true);
    fc_requires_grad(t.c, true);
    struct {
        const char *name;
        bench_fn fn;
    } w[] = {{"fwd_bwd", t_fwd_bwd}, {"fwd_grad", t_fwd_grad}, {"fwd_nograd", t_fwd_nograd},
             {"c_empty_call", t_empty}};
    bench_result r[4];
    for (int i = 0; i < 4; i++) r[i] = bench_measure(w[i].fn, &t);
    if (fc_ctx_status(ctx) != FC_OK) {
        fprintf(stderr, "fucina-bench tiny_ops: %s\n", fc_ctx_error(ctx));
        fc_ctx_free(ctx);
        return 1;
    }
    printf("{\"workload\": \"tiny_ops\", ");
    bench_json_env(stdout, threads());
    printf(", \"results\": {");
    for (int i = 0; i < 4; i++) {
        printf("%s\"%s\": {", i ? ", " : "", w[i].name);
        bench_json_stat(stdout, "us_per_iter", &r[i], -1e6);
        printf(", ");
        bench_json_raw(stdout, &r[i]);
        printf("}");
    }
    printf("}}\n");
    fc_ctx_free(ctx);
    return 0;
}
