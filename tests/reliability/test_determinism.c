/* SPDX-License-Identifier: MIT */
/* test_determinism.c - same inputs, same thread count, same provider: the
 * same bits. Two models train for 50 steps, twice each in fresh contexts
 * with the same seed; every step's loss and every parameter's gradient must
 * be bit-identical between the runs, and so must the final parameters. The
 * runs cover every matmul provider that was built and one and two threads
 * (the reductions' fixed chunking and the providers' fixed blocking are what
 * make two threads repeatable; see src/exec/parallel.c).
 *
 * Models (tests/reliability/rel_models.h): an MLP classifier trained with
 * AdamW and gradient clipping, and a one-block GPT-like model with dropout
 * (the context RNG) trained with Adam on a fixed token sequence.
 *
 * A run's gradients are recorded as one 64-bit FNV-1a hash per parameter
 * per step (a collision between two different gradients is not a concern
 * at this size); losses are kept whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "rel_models.h"

#define STEPS 50
#define MAXP 10

typedef struct trace {
    float loss[STEPS];
    uint64_t grad_hash[STEPS][MAXP];
    uint64_t final_hash[MAXP];
    fc_status st;
    char err[256];
} trace;

static uint64_t fnv1a(const fc_tensor *t) {
    uint64_t h = 1469598103934665603ull;
    if (!t) return 0;
    const unsigned char *p = fc_tensor_data(t);
    size_t n = fc_tensor_nbytes(t);
    for (size_t i = 0; p && i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* one step: zero grads, loss, backward, clip (when asked), optimizer step */
static fc_status step(fc_ctx *ctx, fc_optim *opt, fc_tensor **p, int np, fc_tensor *loss, bool clip,
                      trace *tr, int s) {
    fc_status st = loss ? fc_backward(ctx, loss) : fc_ctx_status(ctx);
    double v = 0;
    if (st == FC_OK) st = fc_tensor_item(loss, &v);
    tr->loss[s] = (float)v;
    for (int i = 0; i < np && st == FC_OK; i++)
        tr->grad_hash[s][i] = fnv1a(fc_grad(p[i]));
    if (st == FC_OK && clip) st = fc_clip_grad_norm(ctx, p, np, 1.0, NULL);
    if (st == FC_OK) st = fc_optim_step(opt);
    fc_optim_zero_grad(opt);
    return st;
}

static void finish(fc_ctx *ctx, fc_optim *opt, fc_tensor **p, int np, trace *tr) {
    for (int i = 0; i < np; i++)
        tr->final_hash[i] = fnv1a(p[i]);
    if (tr->st != FC_OK) snprintf(tr->err, sizeof tr->err, "%s", fc_ctx_error(ctx));
    fc_optim_free(opt);
    rel_release_all(p, np);
    fc_ctx_free(ctx);
}

static void run_mlp(fc_backend be, int threads, trace *tr) {
    memset(tr, 0, sizeof *tr);
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .seed = 2024, .backend = be});
    rel_mlp m;
    rel_mlp_init(ctx, &m, 20, 32, 6);
    fc_optim *opt = fc_optim_new(
        ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAMW, .lr = 3e-3, .weight_decay = 0.01}, m.p,
        REL_MLP_NP);
    tr->st = opt ? FC_OK : fc_ctx_status(ctx);
    for (int s = 0; s < STEPS && tr->st == FC_OK; s++) {
        fc_scope_begin(ctx);
        /* a fresh batch from the context RNG every step */
        fc_tensor *x = fc_randn(ctx, FC_F32, (const int64_t[]){32, 20}, 2);
        fc_tensor *t = fc_argmax(ctx, fc_narrow(ctx, x, 1, 0, 6), 1, false);
        fc_tensor *loss = fc_cross_entropy(ctx, rel_mlp_logits(ctx, &m, x), t, NULL);
        tr->st = step(ctx, opt, m.p, REL_MLP_NP, loss, true, tr, s);
        fc_scope_end(ctx);
    }
    finish(ctx, opt, m.p, REL_MLP_NP, tr);
}

static void run_gpt(fc_backend be, int threads, trace *tr) {
    memset(tr, 0, sizeof *tr);
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .seed = 99, .backend = be});
    enum { B = 2, T = 8, V = 13 };
    rel_gpt m;
    rel_gpt_init(ctx, &m, V, T, 16, 2);
    m.dropout = 0.1;
    int64_t ids[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++) {
        ids[i] = (i * i + 3 * i) % V;
        tgt[i] = ((i + 1) * (i + 1) + 3 * (i + 1)) % V; /* the next token */
    }
    fc_tensor *xi = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){B, T}, 2, ids);
    fc_tensor *yt = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){B * T}, 1, tgt);
    fc_optim *opt =
        fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 1e-2}, m.p, REL_GPT_NP);
    tr->st = opt ? FC_OK : fc_ctx_status(ctx);
    for (int s = 0; s < STEPS && tr->st == FC_OK; s++) {
        fc_scope_begin(ctx);
        tr->st = step(ctx, opt, m.p, REL_GPT_NP, rel_gpt_loss(ctx, &m, xi, yt), false, tr, s);
        fc_scope_end(ctx);
    }
    fc_release(xi);
    fc_release(yt);
    finish(ctx, opt, m.p, REL_GPT_NP, tr);
}

static bool provider_built(fc_backend be) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    bool ok = ctx && fc_ctx_set_backend(ctx, be) == FC_OK;
    fc_ctx_free(ctx);
    return ok;
}

static void compare(const trace *a, const trace *b, const char *what, int np) {
    if (a->st != FC_OK) fail_msg("%s: %s", what, a->err);
    if (b->st != FC_OK) fail_msg("%s: %s", what, b->err);
    for (int s = 0; s < STEPS; s++) {
        if (memcmp(&a->loss[s], &b->loss[s], sizeof(float)) != 0)
            fail_msg("%s: step %d loss %.9g vs %.9g", what, s, a->loss[s], b->loss[s]);
        for (int i = 0; i < np; i++)
            if (a->grad_hash[s][i] != b->grad_hash[s][i])
                fail_msg("%s: step %d: gradient of parameter %d differs", what, s, i);
    }
    assert_memory_equal(a->final_hash, b->final_hash, sizeof a->final_hash);
    /* the runs trained (so the comparison is of something that moved) */
    assert_true(a->loss[STEPS - 1] < a->loss[0]);
}

typedef void (*run_fn)(fc_backend, int, trace *);

static void twice_everywhere(run_fn run, int np, const char *model) {
    const fc_backend all[3] = {FC_BACKEND_REF, FC_BACKEND_BLAS, FC_BACKEND_ONEDNN};
    const char *names[3] = {"ref", "blas", "onednn"};
    static trace a, b; /* large: keep them off the stack */
    for (int k = 0; k < 3; k++) {
        if (!provider_built(all[k])) {
            printf("determinism: %s on %s: provider not built, skipped\n", model, names[k]);
            continue;
        }
        for (int threads = 1; threads <= 2; threads++) {
            char what[96];
            snprintf(what, sizeof what, "%s, %s, %d thread(s)", model, names[k], threads);
            run(all[k], threads, &a);
            run(all[k], threads, &b);
            compare(&a, &b, what, np);
            printf("determinism: %-28s %d steps bit-identical (loss %.6f -> %.6f)\n", what, STEPS,
                   a.loss[0], a.loss[STEPS - 1]);
        }
    }
}

static void test_determinism_mlp(void **state) {
    (void)state;
    twice_everywhere(run_mlp, REL_MLP_NP, "mlp");
}

static void test_determinism_gpt_block(void **state) {
    (void)state;
    twice_everywhere(run_gpt, REL_GPT_NP, "gpt block");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_determinism_mlp),
        cmocka_unit_test(test_determinism_gpt_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
