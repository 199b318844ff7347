/* SPDX-License-Identifier: MIT */
/* test_gradgrad.c - second derivatives: fc_gradgradcheck on every
 * differentiable op, contiguous and strided (the op reads a transposed or
 * stepped view of its leaf), the way fc_gradcheck's tables do it per
 * family, and again with a constant grad_output (constant_grad_output).
 * Inputs avoid kinks and ties (|x| >= 0.2 where an op bends at 0, distinct
 * values for max / min pooling), where finite differences of a piecewise
 * function are meaningless. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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

/* ---- the table ---------------------------------------------------------------------------
 * Each case: up to three f64 inputs of the given shapes (all differentiated
 * unless nograd says otherwise), values in [lo, hi) pushed away from 0 by
 * gap, and fn computing the op from the inputs as the op sees them
 * (strided: each rank >= 2 input is a transposed view of a leaf stored
 * the other way round, each rank-1 input every other element of a leaf
 * twice as long). */
typedef fc_tensor *(*op_fn)(fc_ctx *ctx, fc_tensor *const *x);

typedef struct gcase {
    const char *name;
    op_fn fn;
    int n;
    int rank[3];
    int64_t shape[3][4];
    double lo, hi, gap;
    unsigned nograd; /* bit k: input k is a constant */
} gcase;

typedef struct gctx {
    const gcase *c;
    bool strided;
} gctx;

static fc_tensor *as_seen(fc_ctx *ctx, fc_tensor *leaf, int rank, bool strided) {
    if (!strided) return leaf;
    if (rank >= 2) return fc_transpose(ctx, leaf, -1, -2);
    return fc_slice(ctx, leaf, 0, 0, fc_tensor_numel(leaf), 2);
}

static fc_tensor *case_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    const gctx *g = user;
    fc_tensor *x[3] = {0};
    for (int k = 0; k < n; k++)
        x[k] = as_seen(ctx, in[k], g->c->rank[k], g->strided);
    fc_tensor *y = g->c->fn(ctx, x);
    for (int k = 0; k < n; k++)
        if (x[k] != in[k]) fc_release(x[k]);
    return y;
}

/* The ops, as the table calls them (x: the inputs). */
#define U(nm, expr)                                                                                \
    static fc_tensor *op_##nm(fc_ctx *ctx, fc_tensor *const *x) {                                  \
        (void)ctx;                                                                                 \
        return expr;                                                                               \
    }
/* (Inner temporaries of an expression are released by the caller's scope.) */

U(add, fc_add(ctx, x[0], x[1]))
U(sub, fc_sub(ctx, x[0], x[1]))
U(mul, fc_mul(ctx, x[0], x[1]))
U(div, fc_div(ctx, x[0], x[1]))
U(pow, fc_pow(ctx, x[0], x[1]))
U(maximum, fc_maximum(ctx, x[0], x[1]))
U(minimum, fc_minimum(ctx, x[0], x[1]))
U(mul_scalar, fc_mul_scalar(ctx, x[0], -1.5))
U(pow_scalar, fc_pow_scalar(ctx, x[0], 3.0))
U(rsub_scalar, fc_rsub_scalar(ctx, x[0], 2.0))
U(div_scalar, fc_div_scalar(ctx, x[0], 3.0))
U(neg, fc_neg(ctx, x[0]))
U(abs, fc_abs(ctx, x[0]))
U(sign, fc_mul(ctx, fc_sign(ctx, x[0]), x[0]))
U(square, fc_square(ctx, x[0]))
U(sqrt, fc_sqrt(ctx, x[0]))
U(rsqrt, fc_rsqrt(ctx, x[0]))
U(reciprocal, fc_reciprocal(ctx, x[0]))
U(exp, fc_exp(ctx, x[0]))
U(log, fc_log(ctx, x[0]))
U(sin, fc_sin(ctx, x[0]))
U(cos, fc_cos(ctx, x[0]))
U(tanh, fc_tanh(ctx, x[0]))
U(sigmoid, fc_sigmoid(ctx, x[0]))
U(relu, fc_mul(ctx, fc_relu(ctx, x[0]), x[0]))
U(leaky_relu, fc_mul(ctx, fc_leaky_relu(ctx, x[0], 0.1), x[0]))
U(gelu, fc_gelu(ctx, x[0], false))
U(gelu_tanh, fc_gelu(ctx, x[0], true))
U(silu, fc_silu(ctx, x[0]))
U(softplus, fc_softplus(ctx, x[0]))
U(clamp, fc_mul(ctx, fc_clamp(ctx, x[0], -0.5, 0.6), x[0]))
U(where, fc_where(ctx, fc_gt_scalar(ctx, x[0], 0.0), fc_mul(ctx, x[0], x[1]), fc_square(ctx, x[1])))
U(masked_fill, fc_mul(ctx, fc_masked_fill(ctx, x[0], fc_gt_scalar(ctx, x[0], 0.0), 0.5), x[0]))
U(sum, fc_square(ctx, fc_sum(ctx, x[0], (int[]){1}, 1, false)))
U(mean, fc_square(ctx, fc_mean(ctx, x[0], (int[]){0}, 1, true)))
U(prod, fc_prod(ctx, x[0], (int[]){1}, 1, false))
U(max, fc_square(ctx, fc_max(ctx, x[0], (int[]){1}, 1, false)))
U(min, fc_square(ctx, fc_min(ctx, x[0], (int[]){0}, 1, false)))
U(var, fc_var(ctx, x[0], (int[]){1}, 1, 1, false))
U(std, fc_std(ctx, x[0], (int[]){0}, 1, 0, true))
U(logsumexp, fc_logsumexp(ctx, x[0], (int[]){1}, 1, false))
U(cumsum, fc_square(ctx, fc_cumsum(ctx, x[0], 1)))
U(softmax, fc_softmax(ctx, x[0], 1))
U(log_softmax, fc_log_softmax(ctx, x[0], 0))
U(matmul, fc_matmul(ctx, x[0], x[1]))
U(matmul_sq, fc_matmul(ctx, fc_square(ctx, x[0]), x[1]))
U(linear, fc_tanh(ctx, fc_linear(ctx, x[0], x[1], x[2])))
U(reshape, fc_square(ctx, fc_reshape(ctx, x[0], (int64_t[]){6, 2}, 2)))
U(permute, fc_square(ctx, fc_permute(ctx, x[0], (int[]){1, 0})))
U(narrow, fc_square(ctx, fc_narrow(ctx, x[0], 1, 1, 2)))
U(slice, fc_square(ctx, fc_slice(ctx, x[0], 1, 0, 4, 2)))
U(expand, fc_mul(ctx, fc_expand(ctx, x[0], (int64_t[]){3, 4}, 2), x[1]))
U(squeeze, fc_square(ctx, fc_unsqueeze(ctx, x[0], 1)))
U(concat, fc_square(ctx, fc_concat(ctx, (fc_tensor *[]){x[0], x[1]}, 2, 1)))
U(stack, fc_square(ctx, fc_stack(ctx, (fc_tensor *[]){x[0], x[1]}, 2, 0)))
U(pad, fc_square(ctx, fc_pad(ctx, x[0], (int64_t[]){1, 2, 0, 1}, 0.25)))
U(tril, fc_square(ctx, fc_tril(ctx, x[0], 0)))
U(triu, fc_square(ctx, fc_triu(ctx, x[0], 1)))
U(to_f32_back, fc_square(ctx, fc_to(ctx, fc_mul(ctx, x[0], x[0]), FC_F64)))
U(contiguous, fc_square(ctx, fc_contiguous(ctx, x[0])))
U(mse_mean, fc_mse_loss(ctx, fc_square(ctx, x[0]), x[1], FC_REDUCE_MEAN))
U(mse_none, fc_mse_loss(ctx, x[0], x[1], FC_REDUCE_NONE))
U(layer_norm, fc_layer_norm(ctx, x[0], x[1], x[2], 1e-5))
U(rms_norm, fc_rms_norm(ctx, x[0], x[1], 1e-5))

static fc_tensor *ids(fc_ctx *ctx, const int64_t *v, int64_t n) {
    return fc_tensor_from_data(ctx, FC_I64, (int64_t[]){n}, 1, v);
}
static fc_tensor *op_cross_entropy(fc_ctx *ctx, fc_tensor *const *x) {
    return fc_cross_entropy(ctx, x[0], ids(ctx, (int64_t[]){2, 0, 3}, 3), NULL);
}
static fc_tensor *op_cross_entropy_smooth(fc_ctx *ctx, fc_tensor *const *x) {
    fc_ce_opts o = {.reduction = FC_REDUCE_SUM, .label_smoothing = 0.2};
    return fc_cross_entropy(ctx, x[0], ids(ctx, (int64_t[]){1, 3, 0}, 3), &o);
}
static fc_tensor *op_index_select(fc_ctx *ctx, fc_tensor *const *x) {
    return fc_square(ctx, fc_index_select(ctx, x[0], 0, ids(ctx, (int64_t[]){2, 0, 2, 1}, 4)));
}
static fc_tensor *op_gather(fc_ctx *ctx, fc_tensor *const *x) {
    fc_tensor *i =
        fc_tensor_from_data(ctx, FC_I64, (int64_t[]){3, 2}, 2, (int64_t[]){0, 3, 1, 1, 2, 0});
    return fc_square(ctx, fc_gather(ctx, x[0], 1, i));
}
static fc_tensor *op_scatter_add(fc_ctx *ctx, fc_tensor *const *x) {
    fc_tensor *i =
        fc_tensor_from_data(ctx, FC_I64, (int64_t[]){3, 2}, 2, (int64_t[]){0, 3, 1, 1, 2, 0});
    return fc_square(ctx, fc_scatter_add(ctx, x[0], 1, i, x[1]));
}
static fc_tensor *op_dropout(fc_ctx *ctx, fc_tensor *const *x) {
    fc_ctx_set_seed(ctx, 11); /* the same mask on every call */
    return fc_square(ctx, fc_dropout(ctx, x[0], 0.3, true));
}
static fc_tensor *op_batch_norm(fc_ctx *ctx, fc_tensor *const *x) {
    return fc_batch_norm(ctx, x[0], x[1], x[2], NULL, NULL, true, 0.1, 1e-5);
}
static fc_tensor *op_group_norm(fc_ctx *ctx, fc_tensor *const *x) {
    return fc_group_norm(ctx, x[0], 2, x[1], x[2], 1e-5);
}
static fc_tensor *op_conv2d(fc_ctx *ctx, fc_tensor *const *x) {
    fc_conv2d_opts o = fc_conv2d_opts_default();
    o.padding[0] = o.padding[1] = 1;
    o.stride[1] = 2;
    return fc_conv2d(ctx, fc_square(ctx, x[0]), x[1], x[2], &o);
}
static fc_tensor *op_conv1d(fc_ctx *ctx, fc_tensor *const *x) {
    fc_conv1d_opts o = fc_conv1d_opts_default();
    o.dilation = 2;
    o.groups = 2;
    return fc_square(ctx, fc_conv1d(ctx, x[0], x[1], NULL, &o));
}
static fc_tensor *op_conv_transpose2d(fc_ctx *ctx, fc_tensor *const *x) {
    fc_conv_transpose2d_opts o = fc_conv_transpose2d_opts_default();
    o.stride[0] = 2;
    return fc_square(ctx, fc_conv_transpose2d(ctx, x[0], x[1], NULL, &o));
}
static fc_tensor *op_max_pool(fc_ctx *ctx, fc_tensor *const *x) {
    fc_pool2d_opts o = {.kernel = {2, 2}, .stride = {1, 2}};
    return fc_square(ctx, fc_max_pool2d(ctx, x[0], &o));
}
static fc_tensor *op_avg_pool(fc_ctx *ctx, fc_tensor *const *x) {
    fc_pool2d_opts o = {.kernel = {2, 2}, .stride = {1, 1}, .padding = {1, 0}};
    return fc_square(ctx, fc_avg_pool2d(ctx, x[0], &o));
}

/* The transformer ops (fucina/attention.h). rope is linear: squared, so its
 * second derivative is not zero. */
static fc_tensor *op_rope(fc_ctx *ctx, fc_tensor *const *x) {
    fc_rope_opts o = {.freq_base = 100.0, .pos_offset = 2};
    return fc_square(ctx, fc_rope(ctx, x[0], &o));
}
static fc_tensor *op_rope_partial(fc_ctx *ctx, fc_tensor *const *x) {
    fc_rope_opts o = {.mode = FC_ROPE_NORM, .n_dims = 2, .freq_scale = 0.5, .pos_offset = 1};
    return fc_square(ctx, fc_rope(ctx, x[0], &o));
}
static fc_tensor *op_rope_neox(fc_ctx *ctx, fc_tensor *const *x) {
    fc_rope_opts o = {.mode = FC_ROPE_NEOX, .n_dims = 4, .freq_base = 50.0};
    return fc_mul(ctx, fc_rope(ctx, x[0], &o), x[0]);
}
U(swiglu, fc_swiglu(ctx, x[0], x[1]))
static fc_tensor *op_attention_causal(fc_ctx *ctx, fc_tensor *const *x) {
    return fc_attention(ctx, x[0], x[1], x[2], NULL, &(fc_attention_opts){.causal = true});
}
static fc_tensor *op_attention_plain(fc_ctx *ctx, fc_tensor *const *x) {
    return fc_attention(ctx, x[0], x[1], x[2], NULL, &(fc_attention_opts){.scale = 0.7});
}
/* k and v one tensor; the additive mask [T, S] is differentiated too */
/* a constant mask hiding query 0's every key and query 1's first */
static fc_tensor *op_attention_hidden_row(fc_ctx *ctx, fc_tensor *const *x) {
    const double inf = INFINITY;
    fc_tensor *m = fc_tensor_from_data(ctx, FC_F64, (int64_t[]){2, 3}, 2,
                                       (double[]){-inf, -inf, -inf, -inf, 0.3, -0.2});
    return fc_square(ctx, fc_attention(ctx, x[0], x[1], x[2], m, NULL));
}
static fc_tensor *op_att_mask(fc_ctx *ctx, fc_tensor *const *x) {
    return fc_attention(ctx, x[0], x[1], x[1], x[2], &(fc_attention_opts){.causal = true});
}

U(add_scalar, fc_square(ctx, fc_add_scalar(ctx, x[0], 0.5)))
U(maximum_scalar, fc_square(ctx, fc_maximum_scalar(ctx, x[0], 0.1)))
U(minimum_scalar, fc_square(ctx, fc_minimum_scalar(ctx, x[0], 0.1)))
U(sub_scalar, fc_square(ctx, fc_sub_scalar(ctx, x[0], 0.5)))
U(log1p, fc_log1p(ctx, x[0]))
U(expm1, fc_expm1(ctx, x[0]))
/* the layout ops are linear: a square after them gives a second derivative;
 * fc_view needs contiguous storage, which the strided pass does not give */
U(view, fc_square(ctx, fc_view(ctx, fc_contiguous(ctx, x[0]), (int64_t[]){2, 6}, 2)))
U(squeeze_axis, fc_square(ctx, fc_squeeze(ctx, fc_unsqueeze(ctx, x[0], 0), 0)))
/* fc_split's last piece (a window with the narrow rule), squared */
static fc_tensor *op_split(fc_ctx *ctx, fc_tensor *const *x) {
    fc_tensor *piece[2] = {0};
    if (fc_split(ctx, x[0], 1, (int64_t[]){1, 3}, 2, piece) != FC_OK) return NULL;
    return fc_square(ctx, piece[1]);
}
U(clone, fc_square(ctx, fc_clone(ctx, x[0])))
U(sum_all, fc_square(ctx, fc_sum(ctx, x[0], NULL, 0, false)))
U(logsumexp2, fc_logsumexp(ctx, x[0], (int[]){0, 2}, 2, true))
U(var2, fc_var(ctx, x[0], (int[]){0, 1}, 2, 1, false))
U(softmax3, fc_softmax(ctx, x[0], -1))
U(vecmat, fc_matmul(ctx, x[0], x[1]))
U(linear3, fc_square(ctx, fc_linear(ctx, x[0], x[1], NULL)))
U(mse_bcast, fc_mse_loss(ctx, x[0], x[1], FC_REDUCE_SUM))
U(tril_k, fc_square(ctx, fc_tril(ctx, x[0], -1)))

static fc_tensor *op_embedding(fc_ctx *ctx, fc_tensor *const *x) {
    fc_tensor *i = fc_tensor_from_data(ctx, FC_I64, (int64_t[]){2, 2}, 2, (int64_t[]){3, 0, 3, 1});
    return fc_square(ctx, fc_embedding(ctx, x[0], i));
}
static fc_tensor *op_cross_entropy_ignore(fc_ctx *ctx, fc_tensor *const *x) {
    fc_ce_opts o = {.reduction = FC_REDUCE_NONE, .use_ignore = true, .ignore_index = -1};
    return fc_cross_entropy(ctx, x[0], ids(ctx, (int64_t[]){2, -1, 3}, 3), &o);
}
static fc_tensor *op_batch_norm_eval(fc_ctx *ctx, fc_tensor *const *x) {
    fc_tensor *rm = fc_tensor_from_data(ctx, FC_F64, (int64_t[]){2}, 1, (double[]){0.1, -0.2});
    fc_tensor *rv = fc_tensor_from_data(ctx, FC_F64, (int64_t[]){2}, 1, (double[]){0.5, 1.5});
    return fc_square(ctx, fc_batch_norm(ctx, x[0], x[1], x[2], rm, rv, false, 0.1, 1e-5));
}
static fc_tensor *op_conv2d_groups(fc_ctx *ctx, fc_tensor *const *x) {
    fc_conv2d_opts o = fc_conv2d_opts_default();
    o.groups = 2;
    o.dilation[0] = 2;
    o.padding_same = true;
    return fc_square(ctx, fc_conv2d(ctx, x[0], x[1], NULL, &o));
}
static fc_tensor *op_max_pool_pad(fc_ctx *ctx, fc_tensor *const *x) {
    fc_pool2d_opts o = {.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 1}};
    return fc_square(ctx, fc_max_pool2d(ctx, x[0], &o));
}

/* H 1, kernel 2, dilation 2, padding 1: every window covers padding rows
 * only, output -inf (clamped to a finite value that passes no gradient) */
static fc_tensor *op_max_pool_empty(fc_ctx *ctx, fc_tensor *const *x) {
    fc_pool2d_opts o = {.kernel = {2, 2}, .stride = {1, 1}, .padding = {1, 1}, .dilation = {2, 1}};
    fc_tensor *p = fc_max_pool2d(ctx, x[0], &o);
    return fc_mul(ctx, fc_square(ctx, fc_clamp(ctx, p, -5, 5)), fc_sum(ctx, x[0], NULL, 0, false));
}

static fc_tensor *ck_body(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    (void)user;
    return fc_tanh(ctx, fc_matmul(ctx, in[0], fc_exp(ctx, in[1])));
}
static fc_tensor *op_grad_checkpoint(fc_ctx *ctx, fc_tensor *const *x) {
    fc_tensor *in[2] = {x[0], fc_mul_scalar(ctx, x[1], 0.5)}; /* a leaf and a non-leaf input */
    return fc_grad_checkpoint(ctx, ck_body, NULL, in, 2);
}

static fc_tensor *op_adaptive_pool(fc_ctx *ctx, fc_tensor *const *x) {
    return fc_square(ctx, fc_adaptive_avg_pool2d(ctx, x[0], (int64_t[]){2, 3}));
}
/* the 3-D ops on 4-D table inputs, reshaped: x [1, 2, 3, 6] is [1, 2, 3, 3, 2] */
static fc_tensor *op_conv3d(fc_ctx *ctx, fc_tensor *const *x) {
    fc_conv3d_opts o = {.stride = {2, 1, 1}, .padding = {1, 0, 1}, .dilation = {1, 2, 1}};
    fc_tensor *x5 = fc_reshape(ctx, x[0], (int64_t[]){1, 2, 3, 3, 2}, 5);
    fc_tensor *w5 = fc_reshape(ctx, x[1], (int64_t[]){2, 2, 2, 1, 2}, 5);
    return fc_square(ctx, fc_conv3d(ctx, x5, w5, x[2], &o));
}
static fc_tensor *op_max_pool3d(fc_ctx *ctx, fc_tensor *const *x) {
    fc_pool3d_opts o = {.kernel = {2, 2, 2}, .stride = {1, 2, 1}, .padding = {1, 0, 1}};
    return fc_square(ctx,
                     fc_max_pool3d(ctx, fc_reshape(ctx, x[0], (int64_t[]){1, 2, 3, 4, 3}, 5), &o));
}
static fc_tensor *op_avg_pool3d(fc_ctx *ctx, fc_tensor *const *x) {
    fc_pool3d_opts o = {.kernel = {2, 2, 2}, .stride = {1, 1, 2}, .padding = {1, 0, 1}};
    return fc_square(ctx,
                     fc_avg_pool3d(ctx, fc_reshape(ctx, x[0], (int64_t[]){1, 2, 3, 4, 3}, 5), &o));
}

/* An attention row: q, k and v of rank 4, all differentiated. */
#define ATT(nm, fn, ...)                                                                           \
    { nm, fn, 3, {4, 4, 4}, {__VA_ARGS__}, -1, 1, 0, 0 }

static const gcase cases[] = {
    {"add", op_add, 2, {2, 1}, {{3, 4}, {4}}, -1, 1, 0, 0},
    {"sub", op_sub, 2, {2, 2}, {{3, 4}, {3, 4}}, -1, 1, 0, 0},
    {"mul", op_mul, 2, {2, 2}, {{3, 4}, {1, 4}}, -1, 1, 0, 0},
    {"div", op_div, 2, {2, 2}, {{3, 4}, {3, 4}}, 0.5, 1.5, 0, 0},
    {"pow", op_pow, 2, {2, 2}, {{3, 4}, {3, 4}}, 0.5, 1.5, 0, 0},
    {"maximum", op_maximum, 2, {2, 2}, {{3, 4}, {3, 4}}, -1, 1, 0, 0},
    {"minimum", op_minimum, 2, {2, 2}, {{3, 4}, {3, 4}}, -1, 1, 0, 0},
    {"mul_scalar", op_mul_scalar, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"pow_scalar", op_pow_scalar, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"rsub_scalar", op_rsub_scalar, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"div_scalar", op_div_scalar, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"neg", op_neg, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"abs", op_abs, 1, {2}, {{3, 4}}, -1, 1, 0.2, 0},
    {"sign", op_sign, 1, {2}, {{3, 4}}, -1, 1, 0.2, 0},
    {"square", op_square, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"sqrt", op_sqrt, 1, {2}, {{3, 4}}, 0.5, 2, 0, 0},
    {"rsqrt", op_rsqrt, 1, {2}, {{3, 4}}, 0.5, 2, 0, 0},
    {"reciprocal", op_reciprocal, 1, {2}, {{3, 4}}, 0.5, 2, 0, 0},
    {"exp", op_exp, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"log", op_log, 1, {2}, {{3, 4}}, 0.5, 2, 0, 0},
    {"sin", op_sin, 1, {2}, {{3, 4}}, -2, 2, 0, 0},
    {"cos", op_cos, 1, {2}, {{3, 4}}, -2, 2, 0, 0},
    {"tanh", op_tanh, 1, {2}, {{3, 4}}, -1.5, 1.5, 0, 0},
    {"sigmoid", op_sigmoid, 1, {2}, {{3, 4}}, -2, 2, 0, 0},
    {"relu", op_relu, 1, {2}, {{3, 4}}, -1, 1, 0.2, 0},
    {"leaky_relu", op_leaky_relu, 1, {2}, {{3, 4}}, -1, 1, 0.2, 0},
    {"gelu", op_gelu, 1, {2}, {{3, 4}}, -2, 2, 0, 0},
    {"gelu_tanh", op_gelu_tanh, 1, {2}, {{3, 4}}, -2, 2, 0, 0},
    {"silu", op_silu, 1, {2}, {{3, 4}}, -2, 2, 0, 0},
    {"softplus", op_softplus, 1, {2}, {{3, 4}}, -2, 2, 0, 0},
    {"clamp", op_clamp, 1, {2}, {{3, 4}}, -1, 1, 0.15, 0},
    {"where", op_where, 2, {2, 2}, {{3, 4}, {3, 4}}, -1, 1, 0.2, 0},
    {"masked_fill", op_masked_fill, 1, {2}, {{3, 4}}, -1, 1, 0.2, 0},
    {"sum", op_sum, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"mean", op_mean, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"prod", op_prod, 1, {2}, {{3, 4}}, 0.5, 1.5, 0, 0},
    {"max", op_max, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"min", op_min, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"var", op_var, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"std", op_std, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"logsumexp", op_logsumexp, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"cumsum", op_cumsum, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"softmax", op_softmax, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"log_softmax", op_log_softmax, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"matmul", op_matmul, 2, {2, 2}, {{3, 4}, {4, 2}}, -1, 1, 0, 0},
    {"matmul_sq", op_matmul_sq, 2, {2, 2}, {{3, 4}, {4, 2}}, -1, 1, 0, 0},
    {"matmul_batched", op_matmul, 2, {3, 2}, {{2, 3, 4}, {4, 2}}, -1, 1, 0, 0},
    {"linear", op_linear, 3, {2, 2, 1}, {{3, 4}, {2, 4}, {2}}, -1, 1, 0, 0},
    {"reshape", op_reshape, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"permute", op_permute, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"narrow", op_narrow, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"slice", op_slice, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"expand", op_expand, 2, {2, 2}, {{1, 4}, {3, 4}}, -1, 1, 0, 0},
    {"unsqueeze", op_squeeze, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"concat", op_concat, 2, {2, 2}, {{3, 2}, {3, 4}}, -1, 1, 0, 0},
    {"stack", op_stack, 2, {2, 2}, {{3, 4}, {3, 4}}, -1, 1, 0, 0},
    {"pad", op_pad, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"tril", op_tril, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"triu", op_triu, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"to", op_to_f32_back, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"contiguous", op_contiguous, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"index_select", op_index_select, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"gather", op_gather, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"scatter_add", op_scatter_add, 2, {2, 2}, {{3, 4}, {3, 2}}, -1, 1, 0, 0},
    {"dropout", op_dropout, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"mse_loss", op_mse_mean, 2, {2, 2}, {{3, 4}, {3, 4}}, -1, 1, 0, 0},
    {"mse_loss_none", op_mse_none, 2, {2, 2}, {{3, 4}, {3, 4}}, -1, 1, 0, 0},
    {"cross_entropy", op_cross_entropy, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"cross_entropy_smooth", op_cross_entropy_smooth, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"layer_norm", op_layer_norm, 3, {2, 1, 1}, {{3, 4}, {4}, {4}}, -1, 1, 0, 0},
    {"rms_norm", op_rms_norm, 2, {2, 1}, {{3, 4}, {4}}, -1, 1, 0, 0},
    {"batch_norm", op_batch_norm, 3, {4, 1, 1}, {{3, 2, 2, 2}, {2}, {2}}, -1, 1, 0, 0},
    {"group_norm", op_group_norm, 3, {3, 1, 1}, {{2, 4, 3}, {4}, {4}}, -1, 1, 0, 0},
    {"conv2d", op_conv2d, 3, {4, 4, 1}, {{1, 2, 3, 3}, {2, 2, 2, 2}, {2}}, -1, 1, 0, 0},
    {"conv1d", op_conv1d, 2, {3, 3}, {{1, 2, 6}, {4, 1, 2}}, -1, 1, 0, 0},
    {"conv_transpose2d", op_conv_transpose2d, 2, {4, 4}, {{1, 2, 2, 2}, {2, 1, 2, 2}}, -1, 1, 0, 0},
    {"max_pool2d", op_max_pool, 1, {4}, {{1, 2, 3, 4}}, -1, 1, 0, 0},
    {"avg_pool2d", op_avg_pool, 1, {4}, {{1, 2, 3, 4}}, -1, 1, 0, 0},
    {"adaptive_avg_pool2d", op_adaptive_pool, 1, {3}, {{2, 3, 5}}, -1, 1, 0, 0},
    {"conv3d", op_conv3d, 3, {4, 4, 1}, {{1, 2, 3, 6}, {2, 2, 2, 2}, {2}}, -1, 1, 0, 0},
    {"max_pool3d", op_max_pool3d, 1, {4}, {{1, 2, 12, 3}}, -1, 1, 0, 0},
    {"avg_pool3d", op_avg_pool3d, 1, {4}, {{1, 2, 12, 3}}, -1, 1, 0, 0},
    {"grad_checkpoint", op_grad_checkpoint, 2, {2, 2}, {{3, 4}, {4, 2}}, -1, 1, 0, 0},
    {"add_scalar", op_add_scalar, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"maximum_scalar", op_maximum_scalar, 1, {2}, {{3, 4}}, -1, 1, 0.05, 0},
    {"minimum_scalar", op_minimum_scalar, 1, {2}, {{3, 4}}, -1, 1, 0.05, 0},
    {"sub_scalar", op_sub_scalar, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"log1p", op_log1p, 1, {2}, {{3, 4}}, -0.5, 1, 0, 0},
    {"expm1", op_expm1, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"view", op_view, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"squeeze", op_squeeze_axis, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"split", op_split, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"clone", op_clone, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"sum_all", op_sum_all, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"logsumexp_2axes", op_logsumexp2, 1, {3}, {{2, 3, 2}}, -1, 1, 0, 0},
    {"var_2axes", op_var2, 1, {3}, {{2, 2, 3}}, -1, 1, 0, 0},
    {"softmax_3d", op_softmax3, 1, {3}, {{2, 2, 3}}, -1, 1, 0, 0},
    {"matmul_vec_mat", op_vecmat, 2, {1, 2}, {{4}, {4, 3}}, -1, 1, 0, 0},
    {"matmul_mat_vec", op_vecmat, 2, {2, 1}, {{3, 4}, {4}}, -1, 1, 0, 0},
    {"linear_3d", op_linear3, 2, {3, 2}, {{2, 2, 3}, {2, 3}}, -1, 1, 0, 0},
    {"mse_loss_broadcast", op_mse_bcast, 2, {2, 1}, {{3, 4}, {4}}, -1, 1, 0, 0},
    {"tril_k", op_tril_k, 1, {2}, {{4, 3}}, -1, 1, 0, 0},
    {"embedding", op_embedding, 1, {2}, {{4, 3}}, -1, 1, 0, 0},
    {"cross_entropy_ignore", op_cross_entropy_ignore, 1, {2}, {{3, 4}}, -1, 1, 0, 0},
    {"batch_norm_eval", op_batch_norm_eval, 3, {4, 1, 1}, {{2, 2, 2, 3}, {2}, {2}}, -1, 1, 0, 0},
    {"conv2d_groups", op_conv2d_groups, 2, {4, 4}, {{1, 2, 4, 3}, {2, 1, 2, 3}}, -1, 1, 0, 0},
    {"max_pool2d_padded", op_max_pool_pad, 1, {4}, {{1, 1, 4, 5}}, -1, 1, 0, 0},
    {"max_pool2d_empty_window", op_max_pool_empty, 1, {4}, {{1, 1, 1, 4}}, -1, 1, 0, 0},
    {"rope", op_rope, 1, {4}, {{1, 3, 2, 4}}, -1, 1, 0, 0},
    {"rope_partial_dims", op_rope_partial, 1, {4}, {{2, 2, 1, 6}}, -1, 1, 0, 0},
    {"rope_neox", op_rope_neox, 1, {3}, {{3, 2, 6}}, -1, 1, 0, 0},
    {"swiglu", op_swiglu, 2, {2, 2}, {{3, 4}, {3, 4}}, -1, 1, 0, 0},
    ATT("attention_gqa_causal", op_attention_causal, {1, 4, 3, 2}, {1, 2, 3, 2}, {1, 2, 3, 2}),
    ATT("attention_causal_s_gt_t", op_attention_causal, {1, 2, 2, 3}, {1, 1, 4, 3}, {1, 1, 4, 2}),
    ATT("attention_causal_t_gt_s", op_attention_causal, {1, 1, 3, 2}, {1, 1, 2, 2}, {1, 1, 2, 2}),
    ATT("attention_scale", op_attention_plain, {2, 2, 2, 2}, {2, 2, 3, 2}, {2, 2, 3, 3}),
    ATT("attention_hidden_row", op_attention_hidden_row, {1, 2, 2, 2}, {1, 1, 3, 2}, {1, 1, 3, 2}),
    {"attention_mask",
     op_att_mask,
     3,
     {4, 4, 2},
     {{1, 2, 2, 2}, {1, 1, 3, 2}, {2, 3}},
     -1,
     1,
     0,
     0},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

/* Values in [lo, hi) at least gap from 0; distinct (a shuffled grid plus
 * jitter), so max / min / pooling have no ties. */
static void fill_case(double *v, int64_t n, uint64_t seed, const gcase *c) {
    for (int64_t i = 0; i < n; i++) {
        double u = (double)((uint64_t)(i * 7 + 3) % (uint64_t)n) / (double)n;
        double j = (double)(fc_test_splitmix64(&seed) >> 11) / 9007199254740992.0;
        double x = c->lo + (c->hi - c->lo) * (u + 0.5 * j / (double)n);
        if (c->gap > 0 && fabs(x) < c->gap) x = x < 0 ? -c->gap - fabs(x) : c->gap + x;
        v[i] = x;
    }
}

static fc_status run_case(fc_ctx *ctx, const gcase *c, bool strided, bool constant,
                          fc_gradcheck_report *rep) {
    fc_tensor *in[3] = {0};
    double v[256];
    for (int k = 0; k < c->n; k++) {
        int64_t shape[4];
        int r = c->rank[k];
        memcpy(shape, c->shape[k], sizeof shape);
        if (strided && r >= 2) { /* stored the other way round */
            int64_t t = shape[r - 1];
            shape[r - 1] = shape[r - 2];
            shape[r - 2] = t;
        }
        if (strided && r == 1) shape[0] *= 2;
        int64_t n = 1;
        for (int d = 0; d < r; d++)
            n *= shape[d];
        assert_true(n <= 256);
        fill_case(v, n, 0x51ULL + (uint64_t)k * 977, c);
        in[k] = fc_tensor_from_data(ctx, FC_F64, shape, r, v);
        assert_non_null(in[k]);
        if (!(c->nograd & (1u << k))) assert_int_equal(fc_requires_grad(in[k], true), FC_OK);
    }
    gctx g = {c, strided};
    fc_gradcheck_opts o = {.seed = 23, .constant_grad_output = constant};
    fc_scope_begin(ctx);
    fc_status st = fc_gradgradcheck(ctx, case_fn, &g, in, c->n, &o, rep);
    fc_scope_end(ctx);
    for (int k = 0; k < c->n; k++)
        fc_release(in[k]);
    return st;
}

static void test_gradgrad_every_op(void **state) {
    fc_ctx *ctx = *state;
    int failed = 0;
    /* s: contiguous, strided, and contiguous under a constant grad_output */
    static const char *const how[3] = {"contiguous", "strided", "constant grad_output"};
    for (int i = 0; i < N_CASES; i++)
        for (int s = 0; s < 3; s++) {
            fc_gradcheck_report rep;
            fc_status st = run_case(ctx, &cases[i], s == 1, s == 2, &rep);
            if (st != FC_OK) {
                fprintf(stderr, "gradgradcheck %s (%s): %s: %s\n", cases[i].name, how[s],
                        fc_status_name(st), fc_ctx_error(ctx));
                failed++;
            } else {
                assert_true(rep.passed);
                assert_true(rep.checked > 0);
            }
            fc_ctx_clear_error(ctx);
        }
    assert_int_equal(failed, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gradgrad_every_op, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
