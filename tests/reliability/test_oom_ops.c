/* SPDX-License-Identifier: MIT */
/* test_oom_ops.c - out-of-memory sweep over every op family, forward and
 * backward, and over the composite paths a training step takes (see
 * oom_sweep.h for what is checked at every N):
 *   - binary and scalar arithmetic (broadcast, strided, integer), in-place
 *     and _out forms; comparison, logic, where, masked_fill;
 *   - unary functions; reductions; softmax, norms and losses;
 *   - matmul and linear on every provider that was built (ref, blas,
 *     onednn), in every dtype the provider takes, batched and strided, with
 *     a block-quantized right operand;
 *   - backward through a small MLP and through a causal attention block;
 *   - gradcheck; quantize/dequantize through fc_to.
 * Each scenario ends with the first error recorded in the context, so a
 * failed allocation anywhere in a chain surfaces as FC_ERR_OOM. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "counting_alloc.h"
#include "oom_sweep.h"
#include "rel_models.h"

static fc_status done(fc_ctx *ctx) { return fc_ctx_status(ctx); }

/* backward from out with a gradient of ones, when everything so far worked */
static fc_status backward_ones(fc_ctx *ctx, fc_tensor *out) {
    fc_status st = done(ctx);
    if (st != FC_OK) return st;
    fc_tensor *g = fc_ones(ctx, FC_F32, fc_tensor_shape(out), fc_tensor_rank(out));
    return g ? fc_backward_with(ctx, out, g, false) : done(ctx);
}

static fc_status backward_scalar(fc_ctx *ctx, fc_tensor *loss) {
    fc_status st = done(ctx);
    return st == FC_OK ? fc_backward(ctx, loss) : st;
}

/* ---- pointwise --------------------------------------------------------------------- */

static fc_status sc_binary(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *a = fc_param_randn(ctx, FC_F32, (const int64_t[]){3, 5}, 2, 1.0);
    fc_tensor *b = fc_param_randn(ctx, FC_F32, (const int64_t[]){5}, 1, 1.0);
    fc_tensor *at = fc_transpose(ctx, fc_param_randn(ctx, FC_F32, (const int64_t[]){5, 3}, 2, 1.0),
                                 0, 1); /* strided operand */
    fc_tensor *pos = fc_add_scalar(ctx, fc_abs(ctx, b), 0.5);
    fc_tensor *y = fc_add(ctx, fc_mul(ctx, a, b), fc_sub(ctx, at, a));
    y = fc_add(ctx, y, fc_div(ctx, a, pos));
    y = fc_add(ctx, y, fc_pow(ctx, pos, fc_sigmoid(ctx, a)));
    y = fc_add(ctx, y, fc_maximum(ctx, a, at));
    y = fc_add(ctx, y, fc_minimum(ctx, a, b));
    y = fc_rsub_scalar(ctx, fc_sub_scalar(ctx, fc_mul_scalar(ctx, y, 0.5), 1), 2);
    y = fc_div_scalar(ctx, fc_pow_scalar(ctx, y, 2), 3);
    y = fc_maximum_scalar(ctx, fc_minimum_scalar(ctx, y, 10), -10);
    fc_status st = backward_ones(ctx, y);
    /* integers (wrapping arithmetic, division) and the mutating forms */
    fc_tensor *i = fc_arange(ctx, FC_I32, 1, 13, 1);
    fc_div(ctx, fc_mul(ctx, i, i), fc_add_scalar(ctx, i, 1));
    fc_tensor *dst = fc_zeros(ctx, FC_F32, (const int64_t[]){3, 5}, 2);
    fc_tensor *c = fc_detach(ctx, a);
    if (st == FC_OK && dst && c) {
        st = fc_add_(dst, fc_detach(ctx, b));
        if (st == FC_OK) st = fc_add_out(dst, c, fc_detach(ctx, at));
        if (st == FC_OK) st = fc_mul_scalar_(dst, 2);
        if (st == FC_OK) st = fc_fill_(dst, 1);
    }
    if (st == FC_OK) st = done(ctx);
    fc_scope_end(ctx);
    return st;
}

static fc_status sc_compare_logic(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *a = fc_param_randn(ctx, FC_BF16, (const int64_t[]){4, 6}, 2, 1.0);
    fc_tensor *b = fc_param_randn(ctx, FC_BF16, (const int64_t[]){6}, 1, 1.0);
    fc_tensor *m = fc_logical_or(ctx, fc_lt(ctx, a, b), fc_eq_scalar(ctx, a, 0));
    m = fc_logical_and(ctx, m, fc_logical_not(ctx, fc_gt_scalar(ctx, b, 3)));
    fc_eq(ctx, a, b);
    fc_ne(ctx, a, b);
    fc_le(ctx, a, b);
    fc_ge(ctx, a, b);
    fc_lt_scalar(ctx, a, 0);
    fc_tensor *y = fc_where(ctx, m, a, fc_neg(ctx, a));
    y = fc_masked_fill(ctx, y, fc_gt(ctx, a, b), 0.25);
    fc_status st = backward_ones(ctx, y);
    fc_scope_end(ctx);
    return st;
}

static fc_tensor *unary_chain(fc_ctx *ctx, fc_tensor *x) {
    fc_tensor *p = fc_add_scalar(ctx, fc_square(ctx, x), 0.5); /* > 0 for sqrt, log, ... */
    fc_tensor *terms[] = {
        fc_neg(ctx, x),
        fc_abs(ctx, x),
        fc_sign(ctx, x),
        fc_sqrt(ctx, p),
        fc_rsqrt(ctx, p),
        fc_reciprocal(ctx, p),
        fc_exp(ctx, x),
        fc_log(ctx, p),
        fc_log1p(ctx, p),
        fc_expm1(ctx, x),
        fc_sin(ctx, x),
        fc_cos(ctx, x),
        fc_tanh(ctx, x),
        fc_sigmoid(ctx, x),
        fc_relu(ctx, x),
        fc_leaky_relu(ctx, x, 0.1),
        fc_gelu(ctx, x, false),
        fc_gelu(ctx, x, true),
        fc_silu(ctx, x),
        fc_softplus(ctx, x),
        fc_clamp(ctx, x, -0.5, 0.5),
    };
    fc_tensor *y = terms[0];
    for (size_t k = 1; k < sizeof terms / sizeof terms[0]; k++)
        y = fc_add(ctx, y, terms[k]);
    return y;
}

static fc_status sc_unary(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){2, 7}, 2, 1.0);
    fc_status st = backward_ones(ctx, unary_chain(ctx, x));
    fc_tensor *h = fc_param_randn(ctx, FC_F16, (const int64_t[]){9}, 1, 1.0);
    if (st == FC_OK) st = backward_ones(ctx, unary_chain(ctx, h));
    fc_abs(ctx, fc_arange(ctx, FC_I16, -4, 4, 1));
    if (st == FC_OK) st = done(ctx);
    fc_scope_end(ctx);
    return st;
}

/* ---- reductions, softmax, norms, losses ---------------------------------------------- */

static fc_status sc_reductions(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){3, 4, 5}, 3, 1.0);
    const int ax1[1] = {1}, ax02[2] = {0, 2};
    fc_tensor *terms[] = {
        fc_sum(ctx, x, ax1, 1, false),
        fc_mean(ctx, x, ax02, 2, true),
        fc_prod(ctx, fc_add_scalar(ctx, fc_mul_scalar(ctx, x, 0.1), 1), ax1, 1, false),
        fc_max(ctx, x, ax1, 1, false),
        fc_min(ctx, x, NULL, 0, false),
        fc_var(ctx, x, ax1, 1, 1, false),
        fc_std(ctx, x, ax02, 2, 0, true),
        fc_logsumexp(ctx, x, ax1, 1, false),
        fc_sum(ctx, fc_cumsum(ctx, x, 2), ax1, 1, false),
    };
    fc_status st = FC_OK;
    for (size_t k = 0; k < sizeof terms / sizeof terms[0] && st == FC_OK; k++)
        st = backward_ones(ctx, terms[k]);
    fc_argmax(ctx, x, 2, false);
    fc_argmin(ctx, x, 0, true);
    fc_all(ctx, fc_gt_scalar(ctx, x, -10), NULL, 0, false);
    fc_any(ctx, x, ax1, 1, true);
    fc_sum(ctx, fc_arange(ctx, FC_I32, 0, 50, 1), NULL, 0, false);
    fc_mean(ctx, fc_transpose(ctx, x, 0, 2), ax1, 1, false); /* strided input */
    if (st == FC_OK) st = done(ctx);
    fc_scope_end(ctx);
    return st;
}

static fc_status sc_softmax_norm_loss(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){6, 5}, 2, 1.0);
    fc_tensor *w = rel_param_ones(ctx, 5);
    fc_tensor *bias = fc_param_zeros(ctx, FC_F32, (const int64_t[]){5}, 1);
    int64_t tv[6] = {0, 4, 2, 2, 1, 3};
    fc_tensor *t = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){6}, 1, tv);
    fc_tensor *y = fc_add(ctx, fc_softmax(ctx, x, 1), fc_log_softmax(ctx, x, 0));
    y = fc_add(ctx, y, fc_layer_norm(ctx, x, w, bias, 1e-5));
    y = fc_add(ctx, y, fc_rms_norm(ctx, x, w, 1e-6));
    y = fc_add(ctx, y, fc_layer_norm(ctx, x, NULL, NULL, 1e-5));
    fc_status st = backward_ones(ctx, y);
    fc_ce_opts ce = {
        .reduction = FC_REDUCE_SUM, .use_ignore = true, .ignore_index = 2, .label_smoothing = 0.1};
    fc_tensor *l1 = fc_cross_entropy(ctx, x, t, &ce);
    fc_tensor *l2 = fc_mse_loss(ctx, x, fc_softmax(ctx, x, 1), FC_REDUCE_MEAN);
    if (st == FC_OK) st = backward_scalar(ctx, fc_add(ctx, l1, l2));
    ce.reduction = FC_REDUCE_NONE;
    if (st == FC_OK) st = backward_ones(ctx, fc_cross_entropy(ctx, x, t, &ce));
    fc_scope_end(ctx);
    return st;
}

/* ---- matmul on every provider ----------------------------------------------------- */

/* the first row of a tensor as a view with one axis less */
static fc_tensor *first_row(fc_ctx *ctx, fc_tensor *t) {
    return fc_squeeze(ctx, fc_narrow(ctx, t, 0, 0, 1), 0);
}

/* A random operand of dtype dt: a parameter when dt can carry a gradient
 * (f64 cannot; its products are checked forward only). */
static fc_tensor *operand(fc_ctx *ctx, fc_dtype dt, const int64_t *shape, int rank) {
    if (dt == FC_F64) return fc_randn(ctx, dt, shape, rank);
    return fc_param_randn(ctx, dt, shape, rank, 1.0);
}

static fc_status maybe_backward(fc_ctx *ctx, fc_dtype dt, fc_tensor *out) {
    return dt == FC_F64 ? done(ctx) : backward_ones(ctx, out);
}

/* Batched, broadcast, transposed and narrowed operands, 1-D forms, linear
 * with bias, and the backward of each, in every dtype of dts. */
static fc_status matmul_on(fc_ctx *ctx, fc_backend be, const fc_dtype *dts, int ndt) {
    fc_status st = fc_ctx_set_backend(ctx, be);
    const fc__matmul_provider *p = fc__backend_get(be);
    for (int k = 0; k < ndt && st == FC_OK; k++) {
        fc_dtype dt = dts[k];
        if (p && !p->supports(dt)) continue; /* oneDNN's 16-bit kernels need AVX-512 */
        fc_scope_begin(ctx);
        fc_tensor *a = operand(ctx, dt, (const int64_t[]){2, 3, 8}, 3);
        fc_tensor *b = operand(ctx, dt, (const int64_t[]){8, 5}, 2);
        fc_tensor *bt = fc_transpose(ctx, operand(ctx, dt, (const int64_t[]){5, 8}, 2), 0,
                                     1); /* [8, 5], column-major */
        fc_tensor *w = operand(ctx, dt, (const int64_t[]){8, 3}, 2);
        fc_tensor *bias = operand(ctx, dt, (const int64_t[]){8}, 1);
        fc_tensor *y = fc_add(ctx, fc_matmul(ctx, a, b), fc_matmul(ctx, a, bt)); /* [2, 3, 5] */
        y = fc_add(ctx, y, fc_matmul(ctx, fc_narrow(ctx, a, 2, 1, 5), fc_narrow(ctx, b, 0, 2, 5)));
        fc_tensor *z = fc_linear(ctx, fc_transpose(ctx, y, 1, 2), w, bias); /* [2, 5, 8] */
        st = maybe_backward(ctx, dt, z);
        fc_tensor *row = first_row(ctx, first_row(ctx, a)); /* [8] */
        if (st == FC_OK) st = maybe_backward(ctx, dt, fc_matmul(ctx, row, b));
        fc_tensor *v5 = operand(ctx, dt, (const int64_t[]){5}, 1);
        if (st == FC_OK) st = maybe_backward(ctx, dt, fc_matmul(ctx, b, v5));
        fc_scope_end(ctx);
    }
    if (st == FC_OK) st = done(ctx);
    return st;
}

static fc_status sc_matmul_ref(fc_ctx *ctx) {
    const fc_dtype dts[] = {FC_F32, FC_F64, FC_F16, FC_BF16};
    return matmul_on(ctx, FC_BACKEND_REF, dts, 4);
}

static fc_status sc_matmul_blas(fc_ctx *ctx) {
    const fc_dtype dts[] = {FC_F32, FC_F64};
    return matmul_on(ctx, FC_BACKEND_BLAS, dts, 2);
}

static fc_status sc_matmul_onednn(fc_ctx *ctx) {
    const fc_dtype dts[] = {FC_F32, FC_BF16, FC_F16};
    return matmul_on(ctx, FC_BACKEND_ONEDNN, dts, 3);
}

/* The automatic choice on products past the tiny bound, every float dtype,
 * forward and backward: on a CPU where oneDNN lacks a 16-bit kernel this
 * is the widening adapter (f32 panels in the workspace). */
static fc_status sc_matmul_auto(fc_ctx *ctx) {
    const fc_dtype dts[] = {FC_F32, FC_F64, FC_BF16, FC_F16};
    fc_status st = fc_ctx_set_backend(ctx, FC_BACKEND_AUTO);
    for (int k = 0; k < 4 && st == FC_OK; k++) {
        fc_scope_begin(ctx);
        const fc_dtype dt = dts[k];
        fc_tensor *a = operand(ctx, dt, (const int64_t[]){2, 20, 24}, 3);
        fc_tensor *b = operand(ctx, dt, (const int64_t[]){24, 20}, 2);
        fc_tensor *bt = fc_transpose(ctx, operand(ctx, dt, (const int64_t[]){20, 24}, 2), 0, 1);
        st = maybe_backward(ctx, dt, fc_add(ctx, fc_matmul(ctx, a, b), fc_matmul(ctx, a, bt)));
        fc_scope_end(ctx);
    }
    if (st == FC_OK) st = done(ctx);
    return st;
}

/* f32 activations times block-quantized weights, forward and the gradient
 * of the activations, through the automatic provider choice. */
static fc_status sc_matmul_quantized(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *w1 = fc_randn(ctx, FC_F32, (const int64_t[]){64, 32}, 2);
    fc_tensor *w2 = fc_randn(ctx, FC_F32, (const int64_t[]){32, 256}, 2);
    fc_tensor *x1 = fc_param_randn(ctx, FC_F32, (const int64_t[]){3, 64}, 2, 1.0);
    fc_tensor *x2 = fc_param_randn(ctx, FC_F32, (const int64_t[]){3, 256}, 2, 1.0);
    fc_tensor *y = fc_matmul(ctx, x1, fc_to(ctx, w1, FC_Q8_0));            /* [3, 32] */
    y = fc_add(ctx, y, fc_linear(ctx, x2, fc_to(ctx, w2, FC_Q4_K), NULL)); /* [3, 32] */
    fc_status st = backward_ones(ctx, y);
    fc_scope_end(ctx);
    return st;
}

/* ---- training-shaped graphs -------------------------------------------------------------- */

static fc_status sc_mlp_backward(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    rel_mlp m;
    rel_mlp_init(ctx, &m, 12, 16, 5);
    int64_t tv[8] = {0, 1, 2, 3, 4, 0, 1, 2};
    fc_tensor *x = fc_randn(ctx, FC_F32, (const int64_t[]){8, 12}, 2);
    fc_tensor *t = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){8}, 1, tv);
    fc_status st = backward_scalar(ctx, fc_cross_entropy(ctx, rel_mlp_logits(ctx, &m, x), t, NULL));
    /* the gradients exist and are readable */
    for (int i = 0; i < REL_MLP_NP && st == FC_OK; i++)
        if (!fc_grad(m.p[i])) st = fc_ctx_fail(ctx, FC_ERR_STATE, "mlp: no gradient for p%d", i);
    fc_scope_end(ctx);
    rel_release_all(m.p, REL_MLP_NP);
    return st;
}

static fc_status sc_attention_backward(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    rel_gpt m;
    rel_gpt_init(ctx, &m, 11, 6, 8, 2);
    int64_t iv[2 * 6], tv[2 * 6];
    for (int i = 0; i < 12; i++) {
        iv[i] = (i * 7 + 3) % 11;
        tv[i] = (i * 5 + 1) % 11;
    }
    fc_tensor *ids = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){2, 6}, 2, iv);
    fc_tensor *t = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){12}, 1, tv);
    fc_status st = backward_scalar(ctx, rel_gpt_loss(ctx, &m, ids, t));
    for (int i = 0; i < REL_GPT_NP && st == FC_OK; i++)
        if (!fc_grad(m.p[i])) st = fc_ctx_fail(ctx, FC_ERR_STATE, "gpt: no gradient for p%d", i);
    fc_scope_end(ctx);
    rel_release_all(m.p, REL_GPT_NP);
    return st;
}

/* ---- gradcheck ------------------------------------------------------------------------------- */

static fc_tensor *gc_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    (void)user;
    return fc_tanh(ctx, fc_matmul(ctx, in[0], fc_softmax(ctx, in[1], 0)));
}

static fc_status sc_gradcheck(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *in[2] = {fc_randn(ctx, FC_F64, (const int64_t[]){2, 3}, 2),
                        fc_randn(ctx, FC_F64, (const int64_t[]){3, 2}, 2)};
    fc_gradcheck_report rep;
    fc_status st = done(ctx);
    if (st == FC_OK)
        st = fc_gradcheck(ctx, gc_fn, NULL, in, 2, &(fc_gradcheck_opts){.check_all_f64 = true},
                          &rep);
    if (st == FC_OK && rep.checked != 12)
        st = fc_ctx_fail(ctx, FC_ERR_STATE, "gradcheck: %lld elements checked, not 12",
                         (long long)rep.checked);
    fc_scope_end(ctx);
    return st;
}

/* ---- quantize / dequantize ----------------------------------------------------------------- */

static fc_status sc_quantize(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *x = fc_randn(ctx, FC_F32, (const int64_t[]){2, 256}, 2);
    const fc_dtype dts[] = {FC_Q8_0, FC_Q4_0, FC_Q6_K, FC_IQ4_NL, FC_NF4, FC_F8_E5M2};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++)
        fc_to(ctx, fc_to(ctx, x, dts[k]), FC_F32);
    /* a strided source is made contiguous before quantizing */
    fc_to(ctx, fc_transpose(ctx, fc_randn(ctx, FC_F32, (const int64_t[]){64, 2}, 2), 0, 1),
          FC_Q8_0);
    fc_status st = done(ctx);
    fc_scope_end(ctx);
    return st;
}

/* ---- driver ------------------------------------------------------------------------------------
 */

static const oom_scenario scenarios[] = {
    {"binary arithmetic", sc_binary},
    {"compare and logic", sc_compare_logic},
    {"unary", sc_unary},
    {"reductions", sc_reductions},
    {"softmax, norms, losses", sc_softmax_norm_loss},
    {"matmul quantized rhs", sc_matmul_quantized},
    {"mlp backward", sc_mlp_backward},
    {"attention backward", sc_attention_backward},
    {"gradcheck", sc_gradcheck},
    {"quantize/dequantize", sc_quantize},
};

static void run_all(const oom_scenario *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        clock_t t0 = clock();
        oom_result r = oom_sweep(&s[i]);
        printf("oom sweep: %-24s completed at N=%ld after %ld faulted runs (%.2f s cpu)\n",
               s[i].name, r.largest_n, r.failures, (double)(clock() - t0) / CLOCKS_PER_SEC);
        assert_true(r.largest_n > 0);
    }
}

static void test_oom_ops_scenarios(void **state) {
    (void)state;
    run_all(scenarios, sizeof scenarios / sizeof scenarios[0]);
}

/* A provider that was not built cannot be selected; that is not an
 * out-of-memory path, so its sweep is skipped (and says so). */
static bool provider_built(fc_backend be) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    bool ok = ctx && fc_ctx_set_backend(ctx, be) == FC_OK;
    fc_ctx_free(ctx);
    return ok;
}

static void sweep_provider(fc_backend be, const char *name, oom_scenario_fn fn) {
    if (!provider_built(be)) {
        printf("oom sweep: matmul %s: provider not built, skipped\n", name);
        skip();
    }
    char label[64];
    snprintf(label, sizeof label, "matmul %s", name);
    const oom_scenario s = {label, fn};
    run_all(&s, 1);
}

static void test_oom_ops_matmul_ref(void **state) {
    (void)state;
    sweep_provider(FC_BACKEND_REF, "ref", sc_matmul_ref);
}

static void test_oom_ops_matmul_blas(void **state) {
    (void)state;
    sweep_provider(FC_BACKEND_BLAS, "blas", sc_matmul_blas);
}

static void test_oom_ops_matmul_onednn(void **state) {
    (void)state;
    sweep_provider(FC_BACKEND_ONEDNN, "onednn", sc_matmul_onednn);
}

static void test_oom_ops_matmul_auto(void **state) {
    (void)state;
    sweep_provider(FC_BACKEND_AUTO, "auto", sc_matmul_auto);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oom_ops_scenarios),
        cmocka_unit_test(test_oom_ops_matmul_ref),
        cmocka_unit_test(test_oom_ops_matmul_blas),
        cmocka_unit_test(test_oom_ops_matmul_onednn),
        cmocka_unit_test(test_oom_ops_matmul_auto),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
