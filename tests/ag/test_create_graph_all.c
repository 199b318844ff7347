/* SPDX-License-Identifier: MIT */
/* test_create_graph_all.c - every backward rule through create_graph, in
 * three forms, each checked against f64 central differences of the order
 * below it:
 *   A. L = sum(w * op(x)) with w a leaf: the gradient of L2 = sum(G * u)
 *      (G = dL/dx with create_graph) with respect to x and w;
 *   B. L = sum(op(x)): the upstream gradient of op's rule is a constant,
 *      so gradients that do not depend on x (relu's, a bias's, a linear
 *      op's) are constants of the new graph: the gradient of L2 w.r.t. x;
 *   C. third order of sum(op(x)): G1 and G2 = d sum(G1 * u)/dx both with
 *      create_graph, then the gradient of L3 = sum(G2 * v), against
 *      differences of L3 (each a create_graph walk and a plain one).
 * Before the engine kept a rule's constant gradient (ag/backward.c,
 * graph_gin), forms B and C failed with FC_ERR_UNSUPPORTED for relu, abs,
 * leaky_relu, clamp, hinge losses, every bias, and third order through
 * matmul, linear, conv, attention and the affine norms; form A (what
 * fc_gradgradcheck did) never saw it.
 *
 * The table below has one row per op form, and each row names the
 * backward rules (static functions of the files in src/ops) it runs; the first test
 * reads the files of src/ops and fails for a rule no row names, so an op added with
 * a backward rule and no row here is visible. Inputs avoid kinks and ties
 * (gap, distinct values), where differences of a piecewise function say
 * nothing. */
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fct_f64.h"
#include "fucina.h"

static int setup(void **state) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 5});
    *state = ctx;
    return ctx ? 0 : -1;
}

static int teardown(void **state) {
    free_ctx(*state);
    return 0;
}

/* ---- the ops ------------------------------------------------------------------------------ */

typedef fc_tensor *(*op_fn)(fc_ctx *ctx, fc_tensor *const *x);

#define U(nm, expr)                                                                                \
    static fc_tensor *op_##nm(fc_ctx *ctx, fc_tensor *const *x) {                                  \
        (void)ctx;                                                                                 \
        return expr;                                                                               \
    }
/* (Inner temporaries are released by the caller's scope.) */

U(neg, fc_neg(ctx, x[0]))
U(abs, fc_abs(ctx, x[0]))
U(sign, fc_sign(ctx, x[0]))
U(square, fc_square(ctx, x[0]))
U(sqrt, fc_sqrt(ctx, x[0]))
U(rsqrt, fc_rsqrt(ctx, x[0]))
U(reciprocal, fc_reciprocal(ctx, x[0]))
U(exp, fc_exp(ctx, x[0]))
U(log, fc_log(ctx, x[0]))
U(log1p, fc_log1p(ctx, x[0]))
U(expm1, fc_expm1(ctx, x[0]))
U(sin, fc_sin(ctx, x[0]))
U(cos, fc_cos(ctx, x[0]))
U(tanh, fc_tanh(ctx, x[0]))
U(sigmoid, fc_sigmoid(ctx, x[0]))
U(relu, fc_relu(ctx, x[0]))
U(leaky_relu, fc_leaky_relu(ctx, x[0], 0.1))
U(gelu, fc_gelu(ctx, x[0], false))
U(gelu_tanh, fc_gelu(ctx, x[0], true))
U(silu, fc_silu(ctx, x[0]))
U(softplus, fc_softplus(ctx, x[0]))
U(clamp, fc_clamp(ctx, x[0], -0.5, 0.6))
U(swiglu, fc_swiglu(ctx, x[0], x[1]))
/* hinge loss of a linear classifier: mean(relu(1 - X w)) */
U(hinge,
  fc_mean(ctx, fc_relu(ctx, fc_rsub_scalar(ctx, fc_matmul(ctx, x[0], x[1]), 1.0)), NULL, 0, false))

U(add, fc_add(ctx, x[0], x[1]))
U(sub, fc_sub(ctx, x[0], x[1]))
U(mul, fc_mul(ctx, x[0], x[1]))
U(div, fc_div(ctx, x[0], x[1]))
U(pow, fc_pow(ctx, x[0], x[1]))
U(maximum, fc_maximum(ctx, x[0], x[1]))
U(minimum, fc_minimum(ctx, x[0], x[1]))
U(add_scalar, fc_add_scalar(ctx, x[0], 0.5))
U(sub_scalar, fc_sub_scalar(ctx, x[0], 0.5))
U(rsub_scalar, fc_rsub_scalar(ctx, x[0], 2.0))
U(mul_scalar, fc_mul_scalar(ctx, x[0], -1.5))
U(div_scalar, fc_div_scalar(ctx, x[0], 3.0))
U(pow_scalar, fc_pow_scalar(ctx, x[0], 3.0))
U(maximum_scalar, fc_maximum_scalar(ctx, x[0], 0.1))
U(minimum_scalar, fc_minimum_scalar(ctx, x[0], 0.1))
U(where, fc_where(ctx, fc_gt_scalar(ctx, x[0], 0.0), fc_mul(ctx, x[0], x[1]), x[1]))
U(masked_fill, fc_masked_fill(ctx, x[0], fc_gt_scalar(ctx, x[0], 0.0), 0.5))

U(sum, fc_sum(ctx, x[0], (int[]){1}, 1, false))
U(mean, fc_mean(ctx, x[0], (int[]){0}, 1, true))
U(prod, fc_prod(ctx, x[0], (int[]){1}, 1, false))
U(max, fc_max(ctx, x[0], (int[]){1}, 1, false))
U(min, fc_min(ctx, x[0], (int[]){0}, 1, false))
U(var, fc_var(ctx, x[0], (int[]){1}, 1, 1, false))
U(std, fc_std(ctx, x[0], (int[]){0}, 1, 0, true))
U(logsumexp, fc_logsumexp(ctx, x[0], (int[]){1}, 1, false))
U(cumsum, fc_cumsum(ctx, x[0], 1))
U(softmax, fc_softmax(ctx, x[0], 1))
U(log_softmax, fc_log_softmax(ctx, x[0], 0))
U(sort, fc_sort(ctx, x[0], 1, false, NULL))
U(sort_desc, fc_sort(ctx, x[0], 0, true, NULL))
U(topk, fc_topk(ctx, x[0], 2, 1, true, true, NULL))
U(topk_unsorted, fc_topk(ctx, x[0], 2, 0, false, false, NULL))

U(matmul, fc_matmul(ctx, x[0], x[1]))
U(linear, fc_linear(ctx, x[0], x[1], x[2]))
U(linear_nobias, fc_linear(ctx, x[0], x[1], NULL))

U(reshape, fc_reshape(ctx, x[0], (int64_t[]){6, 2}, 2))
U(view, fc_view(ctx, x[0], (int64_t[]){2, 6}, 2))
U(permute, fc_permute(ctx, x[0], (int[]){1, 0}))
U(transpose, fc_transpose(ctx, x[0], 0, 1))
U(squeeze, fc_squeeze(ctx, x[0], 1))
U(unsqueeze, fc_unsqueeze(ctx, x[0], 1))
U(narrow, fc_narrow(ctx, x[0], 1, 1, 2))
/* fc_split's pieces are windows with the narrow rule: the last piece, whose
 * gradient lands at an offset (the others are released by the caller's scope) */
static fc_tensor *op_split(fc_ctx *ctx, fc_tensor *const *x) {
    fc_tensor *piece[2] = {0};
    if (fc_split(ctx, x[0], 1, (int64_t[]){1, 3}, 2, piece) != FC_OK) return NULL;
    return piece[1];
}
U(slice, fc_slice(ctx, x[0], 1, 0, 4, 2))
U(expand, fc_mul(ctx, fc_expand(ctx, x[0], (int64_t[]){3, 4}, 2), x[1]))
U(contiguous, fc_contiguous(ctx, fc_transpose(ctx, x[0], 0, 1)))
U(clone, fc_clone(ctx, x[0]))
U(to, fc_to(ctx, x[0], FC_F64))
U(concat, fc_concat(ctx, (fc_tensor *[]){x[0], x[1]}, 2, 1))
U(stack, fc_stack(ctx, (fc_tensor *[]){x[0], x[1]}, 2, 0))
U(pad, fc_pad(ctx, x[0], (int64_t[]){1, 2, 0, 1}, 0.25))
U(tril, fc_tril(ctx, x[0], 0))
U(triu, fc_triu(ctx, x[0], 1))

U(mse_loss, fc_mse_loss(ctx, x[0], x[1], FC_REDUCE_MEAN))
U(mse_loss_none, fc_mse_loss(ctx, x[0], x[1], FC_REDUCE_NONE))
U(layer_norm, fc_layer_norm(ctx, x[0], x[1], x[2], 1e-5))
U(rms_norm, fc_rms_norm(ctx, x[0], x[1], 1e-5))
U(batch_norm, fc_batch_norm(ctx, x[0], x[1], x[2], NULL, NULL, true, 0.1, 1e-5))
U(group_norm, fc_group_norm(ctx, x[0], 2, x[1], x[2], 1e-5))

static fc_tensor *ids(fc_ctx *ctx, const int64_t *v, int64_t n) {
    return fc_tensor_from_data(ctx, FC_I64, (int64_t[]){n}, 1, v);
}
static fc_tensor *op_cross_entropy(fc_ctx *ctx, fc_tensor *const *x) {
    return fc_cross_entropy(ctx, x[0], ids(ctx, (int64_t[]){2, 0, 3}, 3), NULL);
}
static fc_tensor *op_cross_entropy_smooth(fc_ctx *ctx, fc_tensor *const *x) {
    fc_ce_opts o = {.reduction = FC_REDUCE_NONE,
                    .label_smoothing = 0.2,
                    .use_ignore = true,
                    .ignore_index = -1};
    return fc_cross_entropy(ctx, x[0], ids(ctx, (int64_t[]){1, -1, 0}, 3), &o);
}
static fc_tensor *op_index_select(fc_ctx *ctx, fc_tensor *const *x) {
    return fc_index_select(ctx, x[0], 0, ids(ctx, (int64_t[]){2, 0, 2, 1}, 4));
}
static fc_tensor *op_embedding(fc_ctx *ctx, fc_tensor *const *x) {
    fc_tensor *i = fc_tensor_from_data(ctx, FC_I64, (int64_t[]){2, 2}, 2, (int64_t[]){3, 0, 3, 1});
    return fc_embedding(ctx, x[0], i);
}
static fc_tensor *op_gather(fc_ctx *ctx, fc_tensor *const *x) {
    fc_tensor *i =
        fc_tensor_from_data(ctx, FC_I64, (int64_t[]){3, 2}, 2, (int64_t[]){0, 3, 1, 1, 2, 0});
    return fc_gather(ctx, x[0], 1, i);
}
static fc_tensor *op_scatter_add(fc_ctx *ctx, fc_tensor *const *x) {
    fc_tensor *i =
        fc_tensor_from_data(ctx, FC_I64, (int64_t[]){3, 2}, 2, (int64_t[]){0, 3, 1, 1, 2, 0});
    return fc_scatter_add(ctx, x[0], 1, i, x[1]);
}
static fc_tensor *op_dropout(fc_ctx *ctx, fc_tensor *const *x) {
    fc_ctx_set_seed(ctx, 11); /* the same mask on every call */
    return fc_dropout(ctx, x[0], 0.3, true);
}
static fc_tensor *op_batch_norm_eval(fc_ctx *ctx, fc_tensor *const *x) {
    fc_tensor *rm = fc_tensor_from_data(ctx, FC_F64, (int64_t[]){2}, 1, (double[]){0.1, -0.2});
    fc_tensor *rv = fc_tensor_from_data(ctx, FC_F64, (int64_t[]){2}, 1, (double[]){0.5, 1.5});
    return fc_batch_norm(ctx, x[0], x[1], x[2], rm, rv, false, 0.1, 1e-5);
}
static fc_tensor *op_conv2d(fc_ctx *ctx, fc_tensor *const *x) {
    fc_conv2d_opts o = fc_conv2d_opts_default();
    o.padding[0] = o.padding[1] = 1;
    o.stride[1] = 2;
    return fc_conv2d(ctx, x[0], x[1], x[2], &o);
}
static fc_tensor *op_conv1d(fc_ctx *ctx, fc_tensor *const *x) {
    fc_conv1d_opts o = fc_conv1d_opts_default();
    o.dilation = 2;
    o.groups = 2;
    return fc_conv1d(ctx, x[0], x[1], x[2], &o);
}
static fc_tensor *op_conv_transpose2d(fc_ctx *ctx, fc_tensor *const *x) {
    fc_conv_transpose2d_opts o = fc_conv_transpose2d_opts_default();
    o.stride[0] = 2;
    return fc_conv_transpose2d(ctx, x[0], x[1], x[2], &o);
}
static fc_tensor *op_max_pool(fc_ctx *ctx, fc_tensor *const *x) {
    fc_pool2d_opts o = {.kernel = {2, 2}, .stride = {1, 2}, .padding = {1, 0}};
    return fc_max_pool2d(ctx, x[0], &o);
}
static fc_tensor *op_avg_pool(fc_ctx *ctx, fc_tensor *const *x) {
    fc_pool2d_opts o = {.kernel = {2, 2}, .stride = {1, 1}, .padding = {1, 0}};
    return fc_avg_pool2d(ctx, x[0], &o);
}
static fc_tensor *op_adaptive_pool(fc_ctx *ctx, fc_tensor *const *x) {
    return fc_adaptive_avg_pool2d(ctx, x[0], (int64_t[]){2, 3});
}
/* the 3-D ops on 4-D table inputs, reshaped: x [1, 2, 3, 6] is [1, 2, 3, 3, 2] */
static fc_tensor *op_conv3d(fc_ctx *ctx, fc_tensor *const *x) {
    fc_conv3d_opts o = {.stride = {2, 1, 1}, .padding = {1, 0, 1}, .dilation = {1, 2, 1}};
    fc_tensor *x5 = fc_reshape(ctx, x[0], (int64_t[]){1, 2, 3, 3, 2}, 5);
    fc_tensor *w5 = fc_reshape(ctx, x[1], (int64_t[]){2, 2, 2, 1, 2}, 5);
    return fc_conv3d(ctx, x5, w5, x[2], &o);
}
static fc_tensor *op_max_pool3d(fc_ctx *ctx, fc_tensor *const *x) {
    fc_pool3d_opts o = {.kernel = {2, 2, 2}, .stride = {1, 2, 1}, .padding = {1, 0, 1}};
    return fc_max_pool3d(ctx, fc_reshape(ctx, x[0], (int64_t[]){1, 2, 3, 4, 3}, 5), &o);
}
static fc_tensor *op_avg_pool3d(fc_ctx *ctx, fc_tensor *const *x) {
    fc_pool3d_opts o = {.kernel = {2, 2, 2}, .stride = {1, 1, 2}, .padding = {1, 0, 1}};
    return fc_avg_pool3d(ctx, fc_reshape(ctx, x[0], (int64_t[]){1, 2, 3, 4, 3}, 5), &o);
}
/* einsum (lowered to recorded ops) and interpolate (src/ops/interpolate.c) */
static fc_tensor *op_einsum(fc_ctx *ctx, fc_tensor *const *x) {
    return fc_einsum(ctx, "iij,jk->ik", x, 2);
}
static fc_tensor *op_einsum3(fc_ctx *ctx, fc_tensor *const *x) {
    return fc_einsum(ctx, "bi,bj,bk->bik", x, 3);
}
static fc_tensor *op_bilinear(fc_ctx *ctx, fc_tensor *const *x) {
    fc_interpolate_opts o = {.mode = FC_INTERP_LINEAR, .size = {5, 3}};
    return fc_interpolate(ctx, x[0], &o);
}
static fc_tensor *op_nearest1d(fc_ctx *ctx, fc_tensor *const *x) {
    fc_interpolate_opts o = {.scale = {1.7}};
    return fc_interpolate(ctx, x[0], &o);
}
static fc_tensor *op_rope(fc_ctx *ctx, fc_tensor *const *x) {
    fc_rope_opts o = {.mode = FC_ROPE_NEOX, .n_dims = 4, .freq_base = 50.0, .pos_offset = 1};
    return fc_rope(ctx, x[0], &o);
}
static fc_tensor *op_attention(fc_ctx *ctx, fc_tensor *const *x) {
    return fc_attention(ctx, x[0], x[1], x[2], NULL, &(fc_attention_opts){.causal = true});
}
/* k and v one tensor; the additive mask differentiated too */
static fc_tensor *op_attention_mask(fc_ctx *ctx, fc_tensor *const *x) {
    return fc_attention(ctx, x[0], x[1], x[1], x[2], &(fc_attention_opts){.scale = 0.7});
}
static fc_tensor *ck_body(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    (void)user;
    return fc_tanh(ctx, fc_matmul(ctx, in[0], in[1]));
}
static fc_tensor *op_grad_checkpoint(fc_ctx *ctx, fc_tensor *const *x) {
    return fc_grad_checkpoint(ctx, ck_body, NULL, x, 2);
}
/* A block-quantized weight (q5_1, a constant) under f32 x and bias: the
 * op is affine in what it differentiates, so its differences are exact up
 * to rounding at a large step (see F32_AFFINE). Not q8_0 or q4_0: those
 * quantize x too (ggml's method), so their forward is a staircase in x
 * whose differences do not match the rule's straight-through gradient. */
static fc_tensor *op_linear_quantized(fc_ctx *ctx, fc_tensor *const *x) {
    double wv[3 * 32];
    fill_random(wv, 3 * 32, 77, -1, 1);
    fc_tensor *w = fc_to(ctx, fc_tensor_from_data(ctx, FC_F64, (int64_t[]){3, 32}, 2, wv), FC_F32);
    return fc_linear(ctx, x[0], fc_to(ctx, w, FC_Q5_1), x[1]);
}

/* ---- the table ---------------------------------------------------------------------------- */

enum { F32_AFFINE = 1u << 8 }; /* flags: f32 inputs, an op affine in them */

typedef struct tcase {
    const char *name;
    const char *rules; /* the backward rules of src/ops it runs, space-separated */
    op_fn fn;
    int n;
    int rank[3];
    int64_t shape[3][4];
    double lo, hi, gap;
    unsigned flags; /* bit k < 8: input k is a constant; F32_AFFINE */
} tcase;

#define R1(nm, rules, fn, lo, hi, gap)                                                             \
    { nm, rules, fn, 1, {2}, {{3, 4}}, lo, hi, gap, 0 }
#define R2(nm, rules, fn, lo, hi)                                                                  \
    { nm, rules, fn, 2, {2, 2}, {{3, 4}, {3, 4}}, lo, hi, 0, 0 }

/* One row, at most two lines, per op form. */
/* clang-format off */
static const tcase cases[] = {
    /* src/ops/unary.c */
    R1("neg", "unary_backward", op_neg, -1, 1, 0),
    R1("abs", "unary_backward", op_abs, -1, 1, 0.2),
    R1("sign", "unary_backward", op_sign, -1, 1, 0.2),
    R1("square", "unary_backward", op_square, -1, 1, 0),
    R1("sqrt", "unary_backward", op_sqrt, 0.5, 2, 0),
    R1("rsqrt", "unary_backward", op_rsqrt, 0.5, 2, 0),
    R1("reciprocal", "unary_backward", op_reciprocal, 0.5, 2, 0),
    R1("exp", "unary_backward", op_exp, -1, 1, 0),
    R1("log", "unary_backward", op_log, 0.5, 2, 0),
    R1("log1p", "unary_backward", op_log1p, -0.5, 1, 0),
    R1("expm1", "unary_backward", op_expm1, -1, 1, 0),
    R1("sin", "unary_backward", op_sin, -2, 2, 0),
    R1("cos", "unary_backward", op_cos, -2, 2, 0),
    R1("tanh", "unary_backward", op_tanh, -1.5, 1.5, 0),
    R1("sigmoid", "unary_backward", op_sigmoid, -2, 2, 0),
    R1("relu", "unary_backward", op_relu, -1, 1, 0.2),
    R1("leaky_relu", "unary_backward", op_leaky_relu, -1, 1, 0.2),
    R1("gelu", "unary_backward normal_cdf_backward", op_gelu, -2, 2, 0),
    R1("gelu_tanh", "unary_backward", op_gelu_tanh, -2, 2, 0),
    R1("silu", "unary_backward", op_silu, -2, 2, 0),
    R1("softplus", "unary_backward", op_softplus, -2, 2, 0),
    R1("clamp", "unary_backward", op_clamp, -1, 1, 0.15),
    R2("swiglu", "swiglu_backward swiglu_graph", op_swiglu, -1, 1),
    {"hinge", "unary_backward matmul_backward sub_backward mean_backward graph_rule", op_hinge, 2,
     {2, 2}, {{4, 3}, {3, 1}}, -1, 1, 0.1, 0},
    /* src/ops/binary.c (the scalar forms record the binary rules) */
    {"add", "add_backward", op_add, 2, {2, 1}, {{3, 4}, {4}}, -1, 1, 0, 0},
    R2("sub", "sub_backward", op_sub, -1, 1),
    {"mul", "mul_backward", op_mul, 2, {2, 2}, {{3, 4}, {1, 4}}, -1, 1, 0, 0},
    R2("div", "div_backward", op_div, 0.5, 1.5),
    R2("pow", "pow_backward", op_pow, 0.5, 1.5),
    R2("maximum", "maximum_backward", op_maximum, -1, 1),
    R2("minimum", "minimum_backward", op_minimum, -1, 1),
    R1("add_scalar", "add_backward", op_add_scalar, -1, 1, 0),
    R1("sub_scalar", "sub_backward", op_sub_scalar, -1, 1, 0),
    R1("rsub_scalar", "sub_backward", op_rsub_scalar, -1, 1, 0),
    R1("mul_scalar", "mul_backward", op_mul_scalar, -1, 1, 0),
    R1("div_scalar", "div_backward", op_div_scalar, -1, 1, 0),
    R1("pow_scalar", "pow_backward", op_pow_scalar, -1, 1, 0),
    R1("maximum_scalar", "maximum_backward", op_maximum_scalar, -1, 1, 0.05),
    R1("minimum_scalar", "minimum_backward", op_minimum_scalar, -1, 1, 0.05),
    /* src/ops/compare.c */
    {"where", "where_backward", op_where, 2, {2, 2}, {{3, 4}, {3, 4}}, -1, 1, 0.2, 0},
    R1("masked_fill", "masked_fill_backward", op_masked_fill, -1, 1, 0.2),
    /* src/ops/reduce.c */
    R1("sum", "sum_backward graph_rule", op_sum, -1, 1, 0),
    R1("mean", "mean_backward graph_rule", op_mean, -1, 1, 0),
    R1("prod", "prod_backward graph_rule", op_prod, 0.5, 1.5, 0),
    R1("max", "extremum_backward graph_rule", op_max, -1, 1, 0),
    R1("min", "extremum_backward graph_rule", op_min, -1, 1, 0),
    R1("var", "var_backward graph_rule", op_var, -1, 1, 0),
    R1("std", "var_backward graph_rule", op_std, -1, 1, 0),
    R1("logsumexp", "logsumexp_backward graph_rule", op_logsumexp, -1, 1, 0),
    /* src/ops/scan.c, softmax.c */
    R1("cumsum", "cumsum_backward", op_cumsum, -1, 1, 0),
    R1("softmax", "softmax_backward", op_softmax, -1, 1, 0),
    R1("log_softmax", "log_softmax_backward", op_log_softmax, -1, 1, 0),
    /* src/ops/sort.c */
    R1("sort", "sort_backward", op_sort, -1, 1, 0),
    R1("sort_desc", "sort_backward", op_sort_desc, -1, 1, 0),
    R1("topk", "sort_backward", op_topk, -1, 1, 0),
    R1("topk_unsorted", "sort_backward", op_topk_unsorted, -1, 1, 0),
    /* src/ops/matmul.c */
    {"matmul", "matmul_backward", op_matmul, 2, {2, 2}, {{3, 4}, {4, 2}}, -1, 1, 0, 0},
    {"matmul_batched", "matmul_backward", op_matmul, 2, {3, 2}, {{2, 3, 4}, {4, 2}}, -1, 1, 0, 0},
    {"matmul_vec", "matmul_backward", op_matmul, 2, {1, 2}, {{4}, {4, 3}}, -1, 1, 0, 0},
    {"linear", "linear_backward", op_linear, 3, {2, 2, 1}, {{3, 4}, {2, 4}, {2}}, -1, 1, 0, 0},
    {"linear_3d", "linear_backward", op_linear_nobias, 2, {3, 2}, {{2, 2, 3}, {2, 3}}, -1, 1, 0, 0},
    {"linear_quantized", "qlinear_backward", op_linear_quantized, 2, {2, 1}, {{2, 32}, {3}}, -1, 1,
     0, F32_AFFINE},
    /* src/ops/layout.c, cast.c */
    R1("reshape", "reshape_backward", op_reshape, -1, 1, 0),
    R1("view", "reshape_backward", op_view, -1, 1, 0),
    R1("permute", "permute_backward", op_permute, -1, 1, 0),
    R1("transpose", "permute_backward", op_transpose, -1, 1, 0),
    {"squeeze", "reshape_backward", op_squeeze, 1, {3}, {{3, 1, 4}}, -1, 1, 0, 0},
    R1("unsqueeze", "reshape_backward", op_unsqueeze, -1, 1, 0),
    R1("narrow", "window_backward", op_narrow, -1, 1, 0),
    R1("split", "window_backward", op_split, -1, 1, 0),
    R1("slice", "window_backward", op_slice, -1, 1, 0),
    {"expand", "expand_backward mul_backward", op_expand, 2, {2, 2}, {{1, 4}, {3, 4}}, -1, 1, 0, 0},
    R1("contiguous", "pass_through_backward permute_backward", op_contiguous, -1, 1, 0),
    R1("clone", "pass_through_backward", op_clone, -1, 1, 0),
    R1("to", "pass_through_backward", op_to, -1, 1, 0),
    /* src/ops/join.c, mask.c */
    {"concat", "concat_backward", op_concat, 2, {2, 2}, {{3, 2}, {3, 4}}, -1, 1, 0, 0},
    R2("stack", "stack_backward", op_stack, -1, 1),
    R1("pad", "pad_backward", op_pad, -1, 1, 0),
    R1("tril", "triangle_backward", op_tril, -1, 1, 0),
    R1("triu", "triangle_backward", op_triu, -1, 1, 0),
    R1("dropout", "dropout_backward", op_dropout, -1, 1, 0),
    /* src/ops/index.c */
    R1("index_select", "index_select_backward", op_index_select, -1, 1, 0),
    {"embedding", "index_select_backward", op_embedding, 1, {2}, {{4, 3}}, -1, 1, 0, 0},
    R1("gather", "gather_backward", op_gather, -1, 1, 0),
    {"scatter_add", "scatter_add_backward", op_scatter_add, 2, {2, 2}, {{3, 4}, {3, 2}}, -1, 1, 0,
     0},
    /* src/ops/loss.c */
    R2("mse_loss", "mse_loss_backward", op_mse_loss, -1, 1),
    {"mse_loss_none", "mse_loss_backward", op_mse_loss_none, 2, {2, 1}, {{3, 4}, {4}}, -1, 1, 0, 0},
    R1("cross_entropy", "cross_entropy_backward ce_graph", op_cross_entropy, -1, 1, 0),
    R1("cross_entropy_smooth", "cross_entropy_backward ce_graph", op_cross_entropy_smooth, -1, 1,
       0),
    /* src/ops/norm.c, batch_norm.c */
    {"layer_norm", "norm_backward norm_graph", op_layer_norm, 3, {2, 1, 1}, {{3, 4}, {4}, {4}}, -1,
     1, 0, 0},
    {"rms_norm", "norm_backward norm_graph", op_rms_norm, 2, {2, 1}, {{3, 4}, {4}}, -1, 1, 0, 0},
    {"batch_norm", "cnorm_backward cnorm_graph", op_batch_norm, 3, {4, 1, 1},
     {{3, 2, 2, 2}, {2}, {2}}, -1, 1, 0, 0},
    {"batch_norm_eval", "cnorm_backward cnorm_graph", op_batch_norm_eval, 3, {4, 1, 1},
     {{2, 2, 2, 3}, {2}, {2}}, -1, 1, 0, 0},
    {"group_norm", "cnorm_backward cnorm_graph", op_group_norm, 3, {3, 1, 1}, {{2, 4, 3}, {4}, {4}},
     -1, 1, 0, 0},
    /* src/ops/conv.c (cprod: the recorded products of the conv rules) */
    {"conv2d", "conv_backward cprod_backward", op_conv2d, 3, {4, 4, 1},
     {{1, 2, 3, 3}, {2, 2, 2, 2}, {2}}, -1, 1, 0, 0},
    {"conv1d", "conv_backward cprod_backward", op_conv1d, 3, {3, 3, 1}, {{1, 2, 6}, {4, 1, 2}, {4}},
     -1, 1, 0, 0},
    {"conv_transpose2d", "conv_transpose_backward cprod_backward", op_conv_transpose2d, 3,
     {4, 4, 1}, {{1, 2, 2, 2}, {2, 1, 2, 2}, {1}}, -1, 1, 0, 0},
    /* src/ops/pool.c (pool_lin: the recorded adjoint pair) */
    {"max_pool2d", "max_pool2d_backward pool_lin_backward", op_max_pool, 1, {4}, {{1, 2, 3, 4}}, -1,
     1, 0, 0},
    {"avg_pool2d", "avg_pool2d_backward pool_lin_backward", op_avg_pool, 1, {4}, {{1, 2, 3, 4}}, -1,
     1, 0, 0},
    {"adaptive_avg_pool2d", "adaptive_avg_pool2d_backward pool_lin_backward", op_adaptive_pool, 1,
     {3}, {{2, 3, 5}}, -1, 1, 0, 0},
    /* src/ops/conv3d.c, pool3d.c: composites of recorded conv2d / pool2d ops */
    {"conv3d", "conv_backward cprod_backward", op_conv3d, 3, {4, 4, 1},
     {{1, 2, 3, 6}, {2, 2, 2, 2}, {2}}, -1, 1, 0, 0},
    {"max_pool3d", "max_pool2d_backward pool_lin_backward", op_max_pool3d, 1, {4},
     {{1, 2, 12, 3}}, -1, 1, 0, 0},
    {"avg_pool3d", "avg_pool2d_backward pool_lin_backward", op_avg_pool3d, 1, {4},
     {{1, 2, 12, 3}}, -1, 1, 0, 0},
    /* src/ops/einsum.c (lowered: the rules are the lowered ops'), interpolate.c */
    {"einsum", "window_backward reshape_backward permute_backward matmul_backward", op_einsum, 2,
     {3, 2}, {{3, 3, 2}, {2, 4}}, -1, 1, 0, 0},
    {"einsum3", "expand_backward reshape_backward permute_backward matmul_backward", op_einsum3, 3,
     {2, 2, 2}, {{2, 3}, {2, 2}, {2, 2}}, -1, 1, 0, 0},
    {"interpolate", "interp_backward", op_bilinear, 1, {4}, {{1, 2, 3, 4}}, -1, 1, 0, 0},
    {"interpolate_nearest", "interp_backward", op_nearest1d, 1, {3}, {{1, 2, 5}}, -1, 1, 0, 0},
    /* src/ops/rope.c, attention.c */
    {"rope", "rope_backward", op_rope, 1, {3}, {{3, 2, 6}}, -1, 1, 0, 0},
    {"attention_causal", "attention_backward attention_graph", op_attention, 3, {4, 4, 4},
     {{1, 2, 2, 2}, {1, 1, 3, 2}, {1, 1, 3, 2}}, -1, 1, 0, 0},
    {"attention_mask", "attention_backward attention_graph", op_attention_mask, 3, {4, 4, 2},
     {{1, 2, 2, 2}, {1, 1, 3, 2}, {2, 3}}, -1, 1, 0, 0},
    /* src/ag/checkpoint.c (the rule lives in the engine, not src/ops) */
    {"grad_checkpoint", "", op_grad_checkpoint, 2, {2, 2}, {{3, 4}, {4, 2}}, -1, 1, 0, 0},
};
/* clang-format on */
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

/* ---- every rule of src/ops has a row ----------------------------------------------------------
 * A backward rule is a static function with fc__backward_fn's signature:
 * static fc_status NAME(fc_ctx *, fc_node *, fc_tensor *, fc_tensor **). */

/* Copies the identifier at *p (advancing it) into out; false if none. */
static bool take_ident(const char **p, char *out, size_t cap) {
    size_t n = 0;
    while (isalnum((unsigned char)**p) || **p == '_') {
        if (n + 1 < cap) out[n++] = **p;
        (*p)++;
    }
    out[n] = '\0';
    return n > 0;
}

/* Matches literal lit at *p, any run of white space in p counting as one
 * space of lit (and lit's spaces as optional white space). */
static bool take_lit(const char **p, const char *lit) {
    const char *q = *p;
    for (; *lit; lit++) {
        if (*lit == ' ') {
            while (isspace((unsigned char)*q))
                q++;
            continue;
        }
        while (isspace((unsigned char)*q) && !isalnum((unsigned char)*lit))
            q++;
        if (*q != *lit) return false;
        q++;
    }
    *p = q;
    return true;
}

/* After "static fc_status ": NAME(fc_ctx *a, fc_node *b, fc_tensor *c, fc_tensor **d) */
static bool rule_signature(const char *p, char *name, size_t cap) {
    char arg[64];
    if (!take_ident(&p, name, cap) || !take_lit(&p, "(fc_ctx *") || !take_ident(&p, arg, 64) ||
        !take_lit(&p, ", fc_node *") || !take_ident(&p, arg, 64) ||
        !take_lit(&p, ", fc_tensor *") || !take_ident(&p, arg, 64) ||
        !take_lit(&p, ", fc_tensor **") || !take_ident(&p, arg, 64))
        return false;
    return take_lit(&p, ")");
}

static bool listed(const char *rules, const char *name) {
    size_t n = strlen(name);
    for (const char *p = strstr(rules, name); p; p = strstr(p + 1, name))
        if ((p == rules || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
    return false;
}

static bool in_table(const char *name) {
    for (int i = 0; i < N_CASES; i++)
        if (listed(cases[i].rules, name)) return true;
    return false;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

/* The rules of every .c file in src/ops into names (each once); returns the count. */
static int scan_rules(char names[][64], int cap) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/src/ops", FUCINA_SOURCE_DIR);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int count = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 3 || strcmp(e->d_name + len - 2, ".c")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *src = slurp(path);
        assert_non_null(src);
        for (const char *p = strstr(src, "static fc_status "); p;
             p = strstr(p + 1, "static fc_status ")) {
            char name[64];
            if (!rule_signature(p + strlen("static fc_status "), name, sizeof name)) continue;
            bool seen = false;
            for (int i = 0; i < count && !seen; i++)
                seen = !strcmp(names[i], name);
            if (!seen && count < cap) snprintf(names[count++], 64, "%s", name);
        }
        free(src);
    }
    closedir(d);
    return count;
}

static void test_create_graph_all_rules_listed(void **state) {
    (void)state;
    char names[256][64];
    int n = scan_rules(names, 256);
    assert_true(n >= 50); /* the scan found the rules at all */
    int missing = 0;
    for (int i = 0; i < n; i++)
        if (!in_table(names[i])) {
            fprintf(stderr, "backward rule %s (src/ops) has no row in the table\n", names[i]);
            missing++;
        }
    /* and every rule the table names exists */
    for (int c = 0; c < N_CASES; c++) {
        const char *p = cases[c].rules;
        while (*p) {
            while (*p == ' ')
                p++;
            char tok[64];
            if (!take_ident(&p, tok, sizeof tok)) break;
            bool found = false;
            for (int i = 0; i < n && !found; i++)
                found = !strcmp(names[i], tok);
            if (!found) {
                fprintf(stderr, "row %s names %s, which src/ops does not define\n", cases[c].name,
                        tok);
                missing++;
            }
        }
    }
    assert_int_equal(missing, 0);
}

/* ---- the check ---------------------------------------------------------------------------- */

/* Values in [lo, hi) at least gap from 0 and distinct (a shuffled grid
 * plus jitter): no ties for max / min / pooling. */
static void fill_case(double *v, int64_t n, uint64_t seed, const tcase *c) {
    for (int64_t i = 0; i < n; i++) {
        double u = (double)((uint64_t)(i * 7 + 3) % (uint64_t)n) / (double)n;
        double j = (double)(fc_test_splitmix64(&seed) >> 11) / 9007199254740992.0;
        double x = c->lo + (c->hi - c->lo) * (u + 0.5 * j / (double)n);
        if (c->gap > 0 && fabs(x) < c->gap) x = x < 0 ? -c->gap - fabs(x) : c->gap + x;
        v[i] = x;
    }
}

enum { MAXN = 128 };

typedef struct run {
    fc_ctx *ctx;
    const tcase *c;
    fc_dtype dt;
    fc_tensor *in[3]; /* the leaves */
    fc_tensor *x[3];  /* those that require grad */
    int m;
    fc_tensor *w;          /* form A: the leaf of sum(w * op(x)); NULL for sum(op(x)) */
    fc_tensor *p[3][3];    /* p[level][j]: projection of level's gradient of x_j */
    double pv[3][3][MAXN]; /* their values */
    fc_tensor *wrt[4];     /* what the checked gradient is of: x, and w */
    int n_wrt;
} run;

static fc_tensor *tensor_of(fc_ctx *ctx, fc_dtype dt, const int64_t *shape, int rank,
                            const double *v) {
    return from_f64(ctx, dt, shape, rank, v);
}

/* sum(G * p) in f64 */
static double dot(fc_tensor *g, const double *p) {
    double *v = values(g), s = 0;
    for (int64_t i = 0; i < fc_tensor_numel(g); i++)
        s += v[i] * p[i];
    free(v);
    return s;
}

static fc_tensor *loss(run *r) {
    fc_ctx *ctx = r->ctx;
    fc_tensor *y = r->c->fn(ctx, r->in);
    if (y && fc_tensor_dtype(y) != FC_F64 && r->dt == FC_F64) y = fc_to(ctx, y, FC_F64);
    if (r->w) y = fc_mul(ctx, r->w, y);
    return fc_sum(ctx, y, NULL, 0, false);
}

/* L_order at the current values, and with grad its gradient with respect
 * to r->wrt (grad[t][i]; zero where nothing depends on it). G_1 .. G_(o-1)
 * are recorded where something differentiates them again: all of them
 * for grad, all but the last for a value. The gradient of L_1 is itself
 * taken with create_graph, so order 1 checks the values of the recorded
 * walk (a constant gradient, relu's, is only seen there). */
static fc_status eval(run *r, int order, double *value, double (*grad)[MAXN]) {
    fc_ctx *ctx = r->ctx;
    fc_status st = FC_OK;
    fc_tensor *keep[3][3] = {{0}};
    fc_scope_begin(ctx);
    fc_tensor *l = loss(r);
    fc_tensor *outs[3] = {l}, *gouts[3] = {NULL};
    int no = l ? 1 : 0;
    if (!l) st = fc_ctx_status(ctx);
    double v = 0;
    if (l) assert_int_equal(fc_tensor_copy_out(&v, sizeof v, fc_to(ctx, l, FC_F64)), FC_OK);
    for (int lv = 1; lv < order && st == FC_OK && no > 0; lv++) {
        fc_autograd_grad_opts o = {.allow_unused = true, .create_graph = grad || lv < order - 1};
        st = fc_autograd_grad(ctx, outs, lv == 1 ? NULL : gouts, no, r->x, r->m, &o, keep[lv]);
        v = 0;
        no = 0;
        for (int j = 0; j < r->m && st == FC_OK; j++) {
            fc_tensor *g = keep[lv][j];
            if (!g) continue;
            v += dot(g, r->pv[lv][j]);
            if (!fc_tensor_requires_grad(g)) continue; /* a constant: nothing above it */
            outs[no] = g;
            gouts[no++] = r->p[lv][j];
        }
    }
    *value = v;
    if (grad) {
        for (int t = 0; t < r->n_wrt; t++)
            memset(grad[t], 0, sizeof grad[t]);
        fc_tensor *h[4] = {0};
        if (st == FC_OK && no > 0)
            st = fc_autograd_grad(
                ctx, outs, order == 1 ? NULL : gouts, no, r->wrt, r->n_wrt,
                &(fc_autograd_grad_opts){.allow_unused = true, .create_graph = order == 1}, h);
        for (int t = 0; t < r->n_wrt; t++) {
            if (!h[t]) continue;
            double *hv = values(h[t]);
            memcpy(grad[t], hv, sizeof(double) * (size_t)fc_tensor_numel(h[t]));
            free(hv);
            fc_release(h[t]);
        }
    }
    for (int lv = 0; lv < 3; lv++)
        for (int j = 0; j < 3; j++)
            fc_release(keep[lv][j]);
    fc_scope_end(ctx);
    return st;
}

static int64_t compared; /* elements compared, all forms */

/* Central differences of L_order against its analytic gradient; returns
 * the failures (printed). */
static int check_form(run *r, int order, const char *form) {
    const bool f32 = r->dt == FC_F32;
    /* an affine f32 op: differences are exact up to rounding at any step */
    const double eps = f32 ? 0.25 : 1e-6, atol = f32 ? 1e-3 : 1e-5, rtol = 1e-3;
    static double grad[4][MAXN];
    double v0;
    fc_status st = eval(r, order, &v0, grad);
    if (st != FC_OK) {
        fprintf(stderr, "%s, form %s: %s: %s\n", r->c->name, form, fc_status_name(st),
                fc_ctx_error(r->ctx));
        fc_ctx_clear_error(r->ctx);
        return 1;
    }
    int bad = 0;
    for (int t = 0; t < r->n_wrt && !bad; t++) {
        fc_tensor *x = r->wrt[t];
        for (int64_t i = 0; i < fc_tensor_numel(x) && !bad; i++) {
            double lp = 0, lm = 0, x0;
            void *d = fc_tensor_data_mut(x);
            x0 = f32 ? ((float *)d)[i] : ((double *)d)[i];
            if (f32)
                ((float *)d)[i] = (float)(x0 + eps);
            else
                ((double *)d)[i] = x0 + eps;
            st = eval(r, order, &lp, NULL);
            d = fc_tensor_data_mut(x);
            if (f32)
                ((float *)d)[i] = (float)(x0 - eps);
            else
                ((double *)d)[i] = x0 - eps;
            if (st == FC_OK) st = eval(r, order, &lm, NULL);
            d = fc_tensor_data_mut(x);
            if (f32)
                ((float *)d)[i] = (float)x0;
            else
                ((double *)d)[i] = x0;
            assert_int_equal(st, FC_OK);
            double num = (lp - lm) / (2 * eps), an = grad[t][i];
            compared++;
            if (!(fabs(an - num) <= atol + rtol * fabs(num))) {
                fprintf(stderr, "%s, form %s: d/d%s%d[%lld]: analytic %.10g, numeric %.10g\n",
                        r->c->name, form, t < r->m ? "x" : "w", t, (long long)i, an, num);
                bad = 1;
            }
        }
    }
    return bad;
}

static void run_init(run *r, fc_ctx *ctx, const tcase *c, bool leaf_w) {
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    r->c = c;
    r->dt = (c->flags & F32_AFFINE) ? FC_F32 : FC_F64;
    double v[MAXN];
    for (int k = 0; k < c->n; k++) {
        int64_t n = 1;
        for (int d = 0; d < c->rank[k]; d++)
            n *= c->shape[k][d];
        assert_true(n <= MAXN);
        fill_case(v, n, 0x51ULL + (uint64_t)k * 977, c);
        r->in[k] = tensor_of(ctx, r->dt, c->shape[k], c->rank[k], v);
        if (c->flags & (1u << k)) continue;
        assert_int_equal(fc_requires_grad(r->in[k], true), FC_OK);
        int j = r->m++;
        r->x[j] = r->wrt[j] = r->in[k];
        for (int lv = 1; lv < 3; lv++) {
            fill_random(r->pv[lv][j], n, 0x7575ULL + (uint64_t)(lv * 8 + k), -1, 1);
            r->p[lv][j] = tensor_of(ctx, r->dt, c->shape[k], c->rank[k], r->pv[lv][j]);
        }
    }
    r->n_wrt = r->m;
    if (!leaf_w) return;
    fc_scope_begin(ctx);
    fc_tensor *y = c->fn(ctx, r->in);
    assert_non_null(y);
    int64_t ny = fc_tensor_numel(y);
    assert_true(ny <= MAXN);
    fill_random(v, ny, 0x6767ULL, -1, 1);
    r->w = tensor_of(ctx, r->dt, fc_tensor_shape(y), fc_tensor_rank(y), v);
    fc_keep(r->w);
    fc_scope_end(ctx);
    assert_int_equal(fc_requires_grad(r->w, true), FC_OK);
    r->wrt[r->n_wrt++] = r->w;
}

static void run_free(run *r) {
    for (int k = 0; k < 3; k++) {
        fc_release(r->in[k]);
        for (int lv = 0; lv < 3; lv++)
            fc_release(r->p[lv][k]);
    }
    fc_release(r->w);
}

static void test_create_graph_all_three_forms(void **state) {
    fc_ctx *ctx = *state;
    int failed = 0;
    for (int i = 0; i < N_CASES; i++) {
        run r;
        run_init(&r, ctx, &cases[i], true);
        failed += check_form(&r, 1, "A: sum(w * op(x)), first order");
        failed += check_form(&r, 2, "A: sum(w * op(x)), second order");
        run_free(&r);
        run_init(&r, ctx, &cases[i], false);
        failed += check_form(&r, 1, "B: sum(op(x)), first order");
        failed += check_form(&r, 2, "B: sum(op(x)), second order");
        failed += check_form(&r, 3, "C: sum(op(x)), third order");
        run_free(&r);
    }
    fprintf(stderr, "%d ops, %lld elements compared\n", N_CASES, (long long)compared);
    assert_int_equal(failed, 0);
    assert_true(compared > 20 * N_CASES);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_graph_all_rules_listed),
        cmocka_unit_test_setup_teardown(test_create_graph_all_three_forms, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
