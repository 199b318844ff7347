/* SPDX-License-Identifier: MIT */
/* test_oom_atomic.c - a failed call has no effect (SQLite's rule), checked by
 * out-of-memory sweeps (oom_sweep.h: every allocation fails in turn) over
 * the two calls that change state across many tensors:
 *   - fc_optim_step (SGD, Adam, AdamW, LAMB over f32, bf16 and f64
 *     parameters): after each failed step the parameters, their moments
 *     (present or absent) and the step count are bit-identical to before,
 *     and a retry succeeds and ends where an unfailed run ends;
 *   - fc_backward: after each failed backward the leaves' gradients are
 *     what they were before the call (absent ones still absent), and a
 *     retry on the same graph succeeds and gives an unfailed run's bits.
 * Each scenario runs once on a plain context first to record the reference
 * result. Inside a sweep the scenario lifts the fault itself for the retry
 * (the sweep's allocator is a fct_counting) and still reports FC_ERR_OOM,
 * so the harness's own checks (leaks, usable context) run too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "counting_alloc.h"
#include "oom_sweep.h"

static void lift_fault(void) {
    const fc_allocator *a = oom_sweep_allocator();
    /* the sweep hands out &c->alloc, fct_counting's first member */
    if (a) fct_counting_fail_after((fct_counting *)(uintptr_t)a, -1);
}

/* ---- optimizer step -------------------------------------------------------------- */

#define P0 35 /* f32 [5, 7] */
#define P1 9  /* bf16 [9] */
#define P2 6  /* f64 [6]: updated in f64, with f64 state */
#define NPAR 3

typedef struct optim_snap {
    float p0[P0];
    uint16_t p1[P1];
    double p2[P2];
    bool has[NPAR][3];
    unsigned char st[NPAR][3][P0 * sizeof(float)]; /* the state's bytes, any dtype */
    int64_t steps;
} optim_snap;

static fc_optim_kind g_kind;
static bool g_check_finite;
static optim_snap g_optim_ref;
static bool g_optim_have_ref;
static long g_optim_faults; /* failed steps seen (and checked) by the sweep */

static const char *state_name(int k) {
    static const char *const adam[3] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    if (g_kind == FC_OPTIM_SGD) return k == 0 ? "momentum_buffer" : NULL;
    if (g_kind == FC_OPTIM_LAMB && k == 2) return NULL; /* LAMB: the moments only */
    return adam[k];
}

static void optim_take(fc_optim *opt, fc_tensor *const *ps, optim_snap *s) {
    memset(s, 0, sizeof *s);
    assert_int_equal(fc_tensor_copy_out(s->p0, sizeof s->p0, ps[0]), FC_OK);
    assert_int_equal(fc_tensor_copy_out(s->p1, sizeof s->p1, ps[1]), FC_OK);
    assert_int_equal(fc_tensor_copy_out(s->p2, sizeof s->p2, ps[2]), FC_OK);
    for (int i = 0; i < NPAR; i++)
        for (int k = 0; k < 3; k++) {
            const char *name = state_name(k);
            fc_tensor *t = name ? fc_optim_state(opt, i, name, false) : NULL;
            s->has[i][k] = t != NULL;
            if (t)
                assert_int_equal(fc_tensor_copy_out(s->st[i][k], fc_tensor_nbytes(t), t), FC_OK);
        }
    s->steps = fc_optim_step_count(opt);
}

static fc_status set_grads(fc_ctx *ctx, fc_tensor *const *ps, int step) {
    float g[P0];
    for (int i = 0; i < P0; i++)
        g[i] = (float)((i % 7) - 3) * 0.125f + 0.01f * (float)step;
    double g64[P0];
    for (int i = 0; i < P0; i++)
        g64[i] = (double)g[i] * (1 + 1e-9 * i); /* not an f32 value */
    fc_status st = FC_OK;
    for (int k = 0; k < NPAR && st == FC_OK; k++) {
        fc_zero_grad(&ps[k], 1);
        bool f64 = fc_tensor_dtype(ps[k]) == FC_F64;
        fc_tensor *gt = fc_tensor_from_data(ctx, f64 ? FC_F64 : FC_F32, fc_tensor_shape(ps[k]),
                                            fc_tensor_rank(ps[k]), f64 ? (const void *)g64 : g);
        st = gt ? fc_backward_with(ctx, ps[k], gt, false) : fc_ctx_status(ctx);
        fc_release(gt);
    }
    return st;
}

static fc_status sc_optim_step(fc_ctx *ctx) {
    fc_ctx_set_check_finite(ctx, g_check_finite);
    float v0[P0];
    uint16_t v1[P1];
    for (int i = 0; i < P0; i++)
        v0[i] = 0.5f - 0.03f * (float)i;
    for (int i = 0; i < P1; i++)
        v1[i] = fc_f32_to_bf16(1.0f + 0.25f * (float)i);
    double v2[P2];
    for (int i = 0; i < P2; i++)
        v2[i] = 0.3 + 0.1 * i + 1e-12 * i;
    fc_tensor *ps[NPAR] = {fc_param_from_data(ctx, FC_F32, (const int64_t[]){5, 7}, 2, v0),
                           fc_param_from_data(ctx, FC_BF16, (const int64_t[]){P1}, 1, v1),
                           fc_param_from_data(ctx, FC_F64, (const int64_t[]){P2}, 1, v2)};
    fc_status st = fc_ctx_status(ctx);
    fc_optim_opts o = {.kind = g_kind, .lr = 0.05, .weight_decay = 0.01};
    if (g_kind == FC_OPTIM_SGD)
        o.momentum = 0.9;
    else
        o.amsgrad = true;
    fc_optim_opts o1 = o;
    o1.lr = 0.02;
    fc_optim *opt = st == FC_OK ? fc_optim_new(ctx, &o, ps, 1) : NULL;
    if (st == FC_OK && !opt) st = fc_ctx_status(ctx);
    if (st == FC_OK) st = fc_optim_add_group(opt, &o1, &ps[1], 2);
    bool faulted = false;
    for (int step = 1; step <= 3 && st == FC_OK; step++) {
        st = set_grads(ctx, ps, step);
        if (st != FC_OK) break;
        optim_snap before, after;
        optim_take(opt, ps, &before);
        st = fc_optim_step(opt);
        if (st == FC_OK) continue;
        optim_take(opt, ps, &after);
        if (st != FC_ERR_OOM)
            fail_msg("step %d: failed with %s, not FC_ERR_OOM: %s", step, fc_status_name(st),
                     fc_ctx_error(ctx));
        if (memcmp(&before, &after, sizeof before) != 0)
            fail_msg("step %d: the failed step changed parameters, state or the step count "
                     "(steps %lld -> %lld)",
                     step, (long long)before.steps, (long long)after.steps);
        g_optim_faults++;
        faulted = true;
        lift_fault();
        fc_ctx_clear_error(ctx);
        st = fc_optim_step(opt);
        if (st != FC_OK)
            fail_msg("step %d: the retry failed with %s: %s", step, fc_status_name(st),
                     fc_ctx_error(ctx));
    }
    if (st == FC_OK) {
        optim_snap end;
        optim_take(opt, ps, &end);
        if (!g_optim_have_ref) {
            g_optim_ref = end;
            g_optim_have_ref = true;
        } else if (memcmp(&end, &g_optim_ref, sizeof end) != 0) {
            fail_msg("the run (faulted: %d) ends away from the unfailed run's bits", faulted);
        }
    }
    fc_optim_free(opt);
    for (int k = 0; k < NPAR; k++)
        fc_release(ps[k]);
    return st != FC_OK ? st : faulted ? FC_ERR_OOM : FC_OK;
}

static void sweep_optim(fc_optim_kind kind, bool check_finite, const char *name) {
    g_kind = kind;
    g_check_finite = check_finite;
    g_optim_have_ref = false;
    g_optim_faults = 0;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 7});
    assert_int_equal(sc_optim_step(ctx), FC_OK);
    fc_ctx_free(ctx);
    assert_true(g_optim_have_ref);
    oom_scenario s = {name, sc_optim_step};
    oom_result r = oom_sweep(&s);
    printf("oom sweep: %-28s completed at N=%ld, %ld failed steps checked\n", name, r.largest_n,
           g_optim_faults);
    assert_true(g_optim_faults > 0); /* the sweep did reach into the step */
}

static void test_oom_atomic_optim_step(void **state) {
    (void)state;
    sweep_optim(FC_OPTIM_ADAMW, false, "adamw step");
    sweep_optim(FC_OPTIM_SGD, false, "sgd momentum step");
    sweep_optim(FC_OPTIM_ADAM, true, "adam step, check_finite");
    sweep_optim(FC_OPTIM_LAMB, false, "lamb step");
    sweep_optim(FC_OPTIM_LAMB, true, "lamb step, check_finite");
}

/* ---- backward ------------------------------------------------------------------- */

#define NP 12 /* p: f32 [3, 4] */
#define NQ 4  /* q: f32 [4], broadcast over p's rows */
#define NR 8  /* r: f32 [4, 2] */

typedef struct grad_snap {
    bool has[3];
    float g[3][NP];
} grad_snap;

static grad_snap g_bw_ref;
static bool g_bw_have_ref;
static long g_bw_faults;
static bool g_bw_check_finite;

static void grads_take(fc_tensor *const *leaves, grad_snap *s) {
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 3; i++) {
        fc_tensor *g = fc_grad(leaves[i]);
        s->has[i] = g != NULL;
        if (g)
            assert_int_equal(
                fc_tensor_copy_out(s->g[i], sizeof(float) * (size_t)fc_tensor_numel(g), g), FC_OK);
    }
}

/* sum(tanh((p + q) * p) @ r) + sum(exp(r)): p is used twice (its two
 * contributions are summed), q is broadcast (its gradient sums rows). */
static fc_tensor *bw_loss(fc_ctx *ctx, fc_tensor *p, fc_tensor *q, fc_tensor *r) {
    fc_tensor *h = fc_tanh(ctx, fc_mul(ctx, fc_add(ctx, p, q), p));
    fc_tensor *a = fc_sum(ctx, fc_matmul(ctx, h, r), NULL, 0, false);
    return fc_add(ctx, a, fc_sum(ctx, fc_exp(ctx, r), NULL, 0, false));
}

static fc_status sc_backward(fc_ctx *ctx) {
    fc_ctx_set_check_finite(ctx, g_bw_check_finite);
    float vp[NP], vq[NQ], vr[NR];
    for (int i = 0; i < NP; i++)
        vp[i] = 0.1f * (float)i - 0.4f;
    for (int i = 0; i < NQ; i++)
        vq[i] = 0.3f - 0.2f * (float)i;
    for (int i = 0; i < NR; i++)
        vr[i] = 0.05f * (float)(i * i % 7) - 0.1f;
    fc_tensor *leaves[3] = {fc_param_from_data(ctx, FC_F32, (const int64_t[]){3, 4}, 2, vp),
                            fc_param_from_data(ctx, FC_F32, (const int64_t[]){NQ}, 1, vq),
                            fc_param_from_data(ctx, FC_F32, (const int64_t[]){4, 2}, 2, vr)};
    fc_status st = fc_ctx_status(ctx);
    bool faulted = false;
    fc_scope_begin(ctx);
    /* a first backward gives p a gradient to accumulate onto (q and r have
     * none yet: the failed call must leave them absent) */
    if (st == FC_OK) {
        fc_tensor *l0 = fc_sum(ctx, fc_mul(ctx, leaves[0], leaves[0]), NULL, 0, false);
        st = l0 ? fc_backward(ctx, l0) : fc_ctx_status(ctx);
    }
    fc_tensor *loss = st == FC_OK ? bw_loss(ctx, leaves[0], leaves[1], leaves[2]) : NULL;
    if (st == FC_OK && !loss) st = fc_ctx_status(ctx);
    if (st == FC_OK) {
        grad_snap before, after;
        grads_take(leaves, &before);
        st = fc_backward(ctx, loss);
        if (st != FC_OK) {
            grads_take(leaves, &after);
            if (st != FC_ERR_OOM)
                fail_msg("backward failed with %s, not FC_ERR_OOM: %s", fc_status_name(st),
                         fc_ctx_error(ctx));
            for (int i = 0; i < 3; i++)
                if (before.has[i] != after.has[i] ||
                    memcmp(before.g[i], after.g[i], sizeof before.g[i]) != 0)
                    fail_msg("the failed backward changed the gradient of leaf %d (had %d, "
                             "has %d)",
                             i, before.has[i], after.has[i]);
            g_bw_faults++;
            faulted = true;
            lift_fault();
            fc_ctx_clear_error(ctx);
            st = fc_backward(ctx, loss); /* the same graph, walked again */
            if (st != FC_OK)
                fail_msg("the retry of the backward failed with %s: %s", fc_status_name(st),
                         fc_ctx_error(ctx));
        }
    }
    if (st == FC_OK) {
        grad_snap end;
        grads_take(leaves, &end);
        if (!g_bw_have_ref) {
            g_bw_ref = end;
            g_bw_have_ref = true;
        } else if (memcmp(&end, &g_bw_ref, sizeof end) != 0) {
            fail_msg("the gradients (faulted: %d) differ from an unfailed backward's", faulted);
        }
    }
    fc_scope_end(ctx);
    for (int i = 0; i < 3; i++)
        fc_release(leaves[i]);
    return st != FC_OK ? st : faulted ? FC_ERR_OOM : FC_OK;
}

static void sweep_backward(bool check_finite, const char *name) {
    g_bw_check_finite = check_finite;
    g_bw_have_ref = false;
    g_bw_faults = 0;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 7});
    assert_int_equal(sc_backward(ctx), FC_OK);
    fc_ctx_free(ctx);
    oom_scenario s = {name, sc_backward};
    oom_result r = oom_sweep(&s);
    printf("oom sweep: %-28s completed at N=%ld, %ld failed backwards checked\n", name, r.largest_n,
           g_bw_faults);
    assert_true(g_bw_faults > 0);
}

static void test_oom_atomic_backward(void **state) {
    (void)state;
    sweep_backward(false, "backward");
    sweep_backward(true, "backward, check_finite");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oom_atomic_optim_step),
        cmocka_unit_test(test_oom_atomic_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
