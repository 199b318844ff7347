/* SPDX-License-Identifier: MIT */
/* test_bad_input_ops.c - every op of fucina/ops.h and fucina/matmul.h fed
 * its bad inputs, table-driven (see bad_input.h for what each case checks).
 *
 * Op families that share a signature and a policy are crossed with one set
 * of bad inputs each (every binary op gets a NULL operand, two dtypes,
 * shapes that do not broadcast, a block-quantized and a storage-only
 * operand); the irregular ops (layout, indexing, losses, matmul) get their
 * own rows. The expected codes are the ones the headers document. */
#include <math.h>

#include "bad_input.h"

/* ---- binary ops: one table, run once per op --------------------------------------------- */

typedef fc_tensor *(*bin_fn)(fc_ctx *, fc_tensor *, fc_tensor *);
static bin_fn g_bin;

static fc_tensor *bin_null_a(fx *f) { return g_bin(f->ctx, NULL, f->f_23); }
static fc_tensor *bin_null_b(fx *f) { return g_bin(f->ctx, f->f_23, NULL); }
static fc_tensor *bin_dtypes(fx *f) { return g_bin(f->ctx, f->f_23, f->d_23); }
static fc_tensor *bin_shapes(fx *f) { return g_bin(f->ctx, f->f_23, f->f_4); }
static fc_tensor *bin_shapes_3d(fx *f) { return g_bin(f->ctx, f->f_234, f->f_32); }
static fc_tensor *bin_block(fx *f) { return g_bin(f->ctx, f->q_232, f->q_232); }
static fc_tensor *bin_f8(fx *f) { return g_bin(f->ctx, f->e8_23, f->e8_23); }

static const bad_case bin_cases[] = {
    BAD_T(bin_null_a, FC_ERR_NULL_ARG, NULL),
    BAD_T(bin_null_b, FC_ERR_NULL_ARG, NULL),
    BAD_T(bin_dtypes, FC_ERR_DTYPE, NULL),
    BAD_T(bin_shapes, FC_ERR_SHAPE_MISMATCH, NULL),
    BAD_T(bin_shapes_3d, FC_ERR_SHAPE_MISMATCH, NULL),
    BAD_T(bin_block, FC_ERR_DTYPE, NULL),
    BAD_T(bin_f8, FC_ERR_DTYPE, NULL),
};
/* logical ops read any non-block dtype (mixed dtypes are allowed) */
static const bad_case logic_cases[] = {
    BAD_T(bin_null_a, FC_ERR_NULL_ARG, NULL),
    BAD_T(bin_null_b, FC_ERR_NULL_ARG, NULL),
    BAD_T(bin_shapes, FC_ERR_SHAPE_MISMATCH, NULL),
    BAD_T(bin_block, FC_ERR_DTYPE, NULL),
};

static const struct {
    const char *name;
    bin_fn fn;
    bool logical;
} bin_ops[] = {
    {"add", fc_add, false},
    {"sub", fc_sub, false},
    {"mul", fc_mul, false},
    {"div", fc_div, false},
    {"pow", fc_pow, false},
    {"maximum", fc_maximum, false},
    {"minimum", fc_minimum, false},
    {"eq", fc_eq, false},
    {"ne", fc_ne, false},
    {"lt", fc_lt, false},
    {"le", fc_le, false},
    {"gt", fc_gt, false},
    {"ge", fc_ge, false},
    {"logical_and", fc_logical_and, true},
    {"logical_or", fc_logical_or, true},
};

static void test_bad_input_ops_binary(void **state) {
    fx *f = *state;
    int bad = 0;
    for (size_t i = 0; i < sizeof bin_ops / sizeof bin_ops[0]; i++) {
        g_bin = bin_ops[i].fn;
        if (bin_ops[i].logical)
            bad += bad_run(f, logic_cases, sizeof logic_cases / sizeof logic_cases[0],
                           bin_ops[i].name);
        else
            bad += bad_run(f, bin_cases, sizeof bin_cases / sizeof bin_cases[0], bin_ops[i].name);
    }
    assert_int_equal(bad, 0);
}

/* ---- scalar forms ---------------------------------------------------------------------------- */

typedef fc_tensor *(*scal_fn)(fc_ctx *, fc_tensor *, double);
static scal_fn g_scal;

static fc_tensor *scal_null(fx *f) { return g_scal(f->ctx, NULL, 1.0); }
static fc_tensor *scal_block(fx *f) { return g_scal(f->ctx, f->q_232, 1.0); }
static fc_tensor *scal_f8(fx *f) { return g_scal(f->ctx, f->e8_23, 1.0); }

static const bad_case scal_cases[] = {
    BAD_T(scal_null, FC_ERR_NULL_ARG, NULL),
    BAD_T(scal_block, FC_ERR_DTYPE, NULL),
    BAD_T(scal_f8, FC_ERR_DTYPE, NULL),
};

static const struct {
    const char *name;
    scal_fn fn;
} scal_ops[] = {
    {"add_scalar", fc_add_scalar},         {"sub_scalar", fc_sub_scalar},
    {"rsub_scalar", fc_rsub_scalar},       {"mul_scalar", fc_mul_scalar},
    {"div_scalar", fc_div_scalar},         {"pow_scalar", fc_pow_scalar},
    {"maximum_scalar", fc_maximum_scalar}, {"minimum_scalar", fc_minimum_scalar},
    {"eq_scalar", fc_eq_scalar},           {"lt_scalar", fc_lt_scalar},
    {"gt_scalar", fc_gt_scalar},
};

/* irregular arithmetic rows */
static fc_tensor *pow_int(fx *f) { return fc_pow(f->ctx, f->i_23, f->i_23); }
static fc_tensor *pow_scalar_int(fx *f) { return fc_pow_scalar(f->ctx, f->i_23, 2); }
static fc_tensor *div_int_zero(fx *f) { return fc_div(f->ctx, f->i_23, f->i_23_zero); }
static fc_tensor *div_scalar_int_zero(fx *f) { return fc_div_scalar(f->ctx, f->i_23, 0); }

static const bad_case arith_cases[] = {
    BAD_T(pow_int, FC_ERR_DTYPE, "pow"),
    BAD_T(pow_scalar_int, FC_ERR_DTYPE, "pow_scalar"),
    BAD_T(div_int_zero, FC_ERR_DIV_ZERO, "div"),
    BAD_T(div_scalar_int_zero, FC_ERR_DIV_ZERO, "div_scalar"),
};

static void test_bad_input_ops_scalar_forms(void **state) {
    fx *f = *state;
    int bad = 0;
    for (size_t i = 0; i < sizeof scal_ops / sizeof scal_ops[0]; i++) {
        g_scal = scal_ops[i].fn;
        bad += bad_run(f, scal_cases, sizeof scal_cases / sizeof scal_cases[0], scal_ops[i].name);
    }
    bad += bad_run(f, arith_cases, sizeof arith_cases / sizeof arith_cases[0], NULL);
    assert_int_equal(bad, 0);
}

/* ---- unary ops ---------------------------------------------------------------------------------
 */

typedef fc_tensor *(*un_fn)(fc_ctx *, fc_tensor *);
static un_fn g_un;

static fc_tensor *un_null(fx *f) { return g_un(f->ctx, NULL); }
static fc_tensor *un_int(fx *f) { return g_un(f->ctx, f->i_23); }
static fc_tensor *un_bool(fx *f) { return g_un(f->ctx, f->b_23); }
static fc_tensor *un_block(fx *f) { return g_un(f->ctx, f->q_232); }
static fc_tensor *un_f8(fx *f) { return g_un(f->ctx, f->e8_23); }

/* float-only functions refuse integers too */
static const bad_case un_float_cases[] = {
    BAD_T(un_null, FC_ERR_NULL_ARG, NULL), BAD_T(un_int, FC_ERR_DTYPE, NULL),
    BAD_T(un_bool, FC_ERR_DTYPE, NULL),    BAD_T(un_block, FC_ERR_DTYPE, NULL),
    BAD_T(un_f8, FC_ERR_DTYPE, NULL),
};
/* neg, abs, sign, square also take signed integers, not bool */
static const bad_case un_signed_cases[] = {
    BAD_T(un_null, FC_ERR_NULL_ARG, NULL),
    BAD_T(un_bool, FC_ERR_DTYPE, NULL),
    BAD_T(un_block, FC_ERR_DTYPE, NULL),
};

static fc_tensor *gelu_tanh(fc_ctx *c, fc_tensor *x) { return fc_gelu(c, x, true); }
static fc_tensor *gelu_erf(fc_ctx *c, fc_tensor *x) { return fc_gelu(c, x, false); }
static fc_tensor *leaky(fc_ctx *c, fc_tensor *x) { return fc_leaky_relu(c, x, 0.1); }
static fc_tensor *clamp01(fc_ctx *c, fc_tensor *x) { return fc_clamp(c, x, 0, 1); }

static const struct {
    const char *name;
    un_fn fn;
    bool signed_ok;
} un_ops[] = {
    {"neg", fc_neg, true},
    {"abs", fc_abs, true},
    {"sign", fc_sign, true},
    {"square", fc_square, true},
    {"sqrt", fc_sqrt, false},
    {"rsqrt", fc_rsqrt, false},
    {"reciprocal", fc_reciprocal, false},
    {"exp", fc_exp, false},
    {"log", fc_log, false},
    {"log1p", fc_log1p, false},
    {"expm1", fc_expm1, false},
    {"sin", fc_sin, false},
    {"cos", fc_cos, false},
    {"tanh", fc_tanh, false},
    {"sigmoid", fc_sigmoid, false},
    {"relu", fc_relu, false},
    {"gelu", gelu_tanh, false},
    {"gelu", gelu_erf, false},
    {"silu", fc_silu, false},
    {"softplus", fc_softplus, false},
    {"leaky_relu", leaky, false},
    {"clamp", clamp01, false},
    {"logical_not", fc_logical_not, true},
};

static fc_tensor *clamp_empty(fx *f) { return fc_clamp(f->ctx, f->f_23, 1, 0); }
static fc_tensor *clamp_nan(fx *f) { return fc_clamp(f->ctx, f->f_23, NAN, 1); }
static fc_tensor *logical_not_block(fx *f) { return fc_logical_not(f->ctx, f->q_232); }

static const bad_case un_extra_cases[] = {
    BAD_T(clamp_empty, FC_ERR_INVALID_ARG, "clamp"),
    BAD_T(clamp_nan, FC_ERR_INVALID_ARG, "clamp"),
    BAD_T(logical_not_block, FC_ERR_DTYPE, "logical_not"),
};

static void test_bad_input_ops_unary(void **state) {
    fx *f = *state;
    int bad = 0;
    for (size_t i = 0; i < sizeof un_ops / sizeof un_ops[0]; i++) {
        g_un = un_ops[i].fn;
        if (!strcmp(un_ops[i].name, "logical_not")) {
            /* any non-block dtype; only NULL and blocks are bad */
            bad += bad_run(f, un_signed_cases, 1, un_ops[i].name);
        } else if (un_ops[i].signed_ok) {
            bad += bad_run(f, un_signed_cases, sizeof un_signed_cases / sizeof un_signed_cases[0],
                           un_ops[i].name);
        } else {
            bad += bad_run(f, un_float_cases, sizeof un_float_cases / sizeof un_float_cases[0],
                           un_ops[i].name);
        }
    }
    bad += bad_run(f, un_extra_cases, sizeof un_extra_cases / sizeof un_extra_cases[0], NULL);
    assert_int_equal(bad, 0);
}

/* ---- reductions over axes
 * ------------------------------------------------------------------------- */

typedef fc_tensor *(*red_fn)(fc_ctx *, fc_tensor *, const int *, int, bool);
static red_fn g_red;

static fc_tensor *red_null(fx *f) { return g_red(f->ctx, NULL, NULL, 0, false); }
static fc_tensor *red_axis(fx *f) { return g_red(f->ctx, f->f_23, (const int[]){2}, 1, false); }
static fc_tensor *red_axis_neg(fx *f) {
    return g_red(f->ctx, f->f_23, (const int[]){-3}, 1, false);
}
static fc_tensor *red_repeat(fx *f) {
    return g_red(f->ctx, f->f_23, (const int[]){1, -1}, 2, false);
}
static fc_tensor *red_axes_null(fx *f) { return g_red(f->ctx, f->f_23, NULL, 1, false); }
static fc_tensor *red_naxes_neg(fx *f) {
    return g_red(f->ctx, f->f_23, (const int[]){0}, -1, false);
}
static fc_tensor *red_block(fx *f) { return g_red(f->ctx, f->q_232, NULL, 0, false); }
static fc_tensor *red_int(fx *f) { return g_red(f->ctx, f->i_23, NULL, 0, false); }

static const bad_case red_cases[] = {
    BAD_T(red_null, FC_ERR_NULL_ARG, NULL),
    BAD_T(red_axis, FC_ERR_AXIS, NULL),
    BAD_T(red_axis_neg, FC_ERR_AXIS, NULL),
    BAD_T(red_repeat, FC_ERR_INVALID_ARG, NULL),
    BAD_T(red_axes_null, FC_ERR_NULL_ARG, NULL),
    BAD_T(red_naxes_neg, FC_ERR_INVALID_ARG, NULL),
    BAD_T(red_block, FC_ERR_DTYPE, NULL),
    BAD_T(red_int, FC_ERR_DTYPE, NULL), /* float-only reductions: keep last */
};

static fc_tensor *var1(fc_ctx *c, fc_tensor *x, const int *a, int n, bool k) {
    return fc_var(c, x, a, n, 1, k);
}
static fc_tensor *std0(fc_ctx *c, fc_tensor *x, const int *a, int n, bool k) {
    return fc_std(c, x, a, n, 0, k);
}

static const struct {
    const char *name;
    red_fn fn;
    bool float_only;
} red_ops[] = {
    {"sum", fc_sum, false},   {"mean", fc_mean, true},
    {"prod", fc_prod, false}, {"max", fc_max, false},
    {"min", fc_min, false},   {"var", var1, true},
    {"std", std0, true},      {"logsumexp", fc_logsumexp, true},
    {"all", fc_all, false},   {"any", fc_any, false},
};

/* single-axis ops */
static fc_tensor *argmax_axis(fx *f) { return fc_argmax(f->ctx, f->f_23, 2, false); }
static fc_tensor *argmin_axis(fx *f) { return fc_argmin(f->ctx, f->f_23, -3, true); }
static fc_tensor *argmax_block(fx *f) { return fc_argmax(f->ctx, f->q_232, 0, false); }
static fc_tensor *cumsum_axis(fx *f) { return fc_cumsum(f->ctx, f->f_23, 2); }
static fc_tensor *cumsum_null(fx *f) { return fc_cumsum(f->ctx, NULL, 0); }
static fc_tensor *cumsum_block(fx *f) { return fc_cumsum(f->ctx, f->q_232, 0); }

static const bad_case axis_cases[] = {
    BAD_T(argmax_axis, FC_ERR_AXIS, "argmax"),     BAD_T(argmin_axis, FC_ERR_AXIS, "argmin"),
    BAD_T(argmax_block, FC_ERR_DTYPE, "argmax"),   BAD_T(cumsum_axis, FC_ERR_AXIS, "cumsum"),
    BAD_T(cumsum_null, FC_ERR_NULL_ARG, "cumsum"), BAD_T(cumsum_block, FC_ERR_DTYPE, "cumsum"),
};

static void test_bad_input_ops_reductions(void **state) {
    fx *f = *state;
    int bad = 0;
    size_t n = sizeof red_cases / sizeof red_cases[0];
    for (size_t i = 0; i < sizeof red_ops / sizeof red_ops[0]; i++) {
        g_red = red_ops[i].fn;
        bad += bad_run(f, red_cases, red_ops[i].float_only ? n : n - 1, red_ops[i].name);
    }
    bad += bad_run(f, axis_cases, sizeof axis_cases / sizeof axis_cases[0], NULL);
    assert_int_equal(bad, 0);
}

/* ---- softmax, norms, losses
 * ------------------------------------------------------------------------ */

static fc_tensor *softmax_axis(fx *f) { return fc_softmax(f->ctx, f->f_23, 2); }
static fc_tensor *softmax_int(fx *f) { return fc_softmax(f->ctx, f->i_23, 0); }
static fc_tensor *softmax_null(fx *f) { return fc_softmax(f->ctx, NULL, 0); }
static fc_tensor *log_softmax_axis(fx *f) { return fc_log_softmax(f->ctx, f->f_23, -3); }
static fc_tensor *log_softmax_block(fx *f) { return fc_log_softmax(f->ctx, f->q_232, 0); }
static fc_tensor *ln_weight_shape(fx *f) {
    return fc_layer_norm(f->ctx, f->f_23, f->f_4, NULL, 1e-5);
}
static fc_tensor *ln_bias_dtype(fx *f) {
    return fc_layer_norm(f->ctx, f->d_23, NULL, f->f_3, 1e-5);
}
static fc_tensor *ln_eps(fx *f) { return fc_layer_norm(f->ctx, f->f_23, NULL, NULL, -1); }
static fc_tensor *ln_eps_nan(fx *f) { return fc_layer_norm(f->ctx, f->f_23, NULL, NULL, NAN); }
static fc_tensor *ln_int(fx *f) { return fc_layer_norm(f->ctx, f->i_23, NULL, NULL, 1e-5); }
static fc_tensor *rms_weight_dtype(fx *f) { return fc_rms_norm(f->ctx, f->f_23, f->d_23, 1e-5); }
static fc_tensor *rms_weight_shape(fx *f) { return fc_rms_norm(f->ctx, f->f_23, f->f_4, 1e-5); }
static fc_tensor *rms_null(fx *f) { return fc_rms_norm(f->ctx, NULL, NULL, 1e-5); }
static fc_tensor *bn_rank(fx *f) {
    return fc_batch_norm(f->ctx, f->f_3, NULL, NULL, NULL, NULL, true, 0.1, 1e-5);
}
static fc_tensor *bn_weight_shape(fx *f) {
    return fc_batch_norm(f->ctx, f->f_23, f->f_4, NULL, NULL, NULL, true, 0.1, 1e-5);
}
static fc_tensor *bn_eps(fx *f) {
    return fc_batch_norm(f->ctx, f->f_23, NULL, NULL, NULL, NULL, true, 0.1, -1);
}
static fc_tensor *gn_groups(fx *f) { return fc_group_norm(f->ctx, f->f_234, 2, NULL, NULL, 1e-5); }
static fc_tensor *gn_rank(fx *f) { return fc_group_norm(f->ctx, f->f_3, 1, NULL, NULL, 1e-5); }
static fc_tensor *rope_rank(fx *f) { return fc_rope(f->ctx, f->f_23, NULL); }
static fc_tensor *rope_odd_dims(fx *f) {
    return fc_rope(f->ctx, f->f_234, &(fc_rope_opts){.n_dims = 3});
}
static fc_tensor *swiglu_shape(fx *f) { return fc_swiglu(f->ctx, f->f_23, f->f_32); }
static fc_tensor *swiglu_dtype(fx *f) { return fc_swiglu(f->ctx, f->f_23, f->d_23); }
static fc_tensor *ce_target_range(fx *f) {
    return fc_cross_entropy(f->ctx, f->f_23, f->idx_bad, NULL);
}
static fc_tensor *ce_target_neg(fx *f) {
    return fc_cross_entropy(f->ctx, f->f_23, f->idx_neg, NULL);
}
static fc_tensor *ce_target_float(fx *f) { return fc_cross_entropy(f->ctx, f->f_23, f->f_3, NULL); }
static fc_tensor *ce_target_shape(fx *f) {
    return fc_cross_entropy(f->ctx, f->f_23, f->i_23, NULL);
}
static fc_tensor *ce_logits_rank(fx *f) { return fc_cross_entropy(f->ctx, f->f_234, f->t_2, NULL); }
static fc_tensor *ce_logits_int(fx *f) { return fc_cross_entropy(f->ctx, f->i_23, f->t_2, NULL); }
static fc_tensor *ce_smoothing(fx *f) {
    return fc_cross_entropy(f->ctx, f->f_23, f->t_2, &(fc_ce_opts){.label_smoothing = 1.5});
}
static fc_tensor *ce_reduction(fx *f) {
    return fc_cross_entropy(f->ctx, f->f_23, f->t_2, &(fc_ce_opts){.reduction = 9});
}
static fc_tensor *mse_shape(fx *f) { return fc_mse_loss(f->ctx, f->f_23, f->f_4, FC_REDUCE_MEAN); }
static fc_tensor *mse_dtype(fx *f) { return fc_mse_loss(f->ctx, f->f_23, f->d_23, FC_REDUCE_SUM); }
static fc_tensor *mse_reduction(fx *f) { return fc_mse_loss(f->ctx, f->f_23, f->f_23, 7); }
static fc_tensor *mse_null(fx *f) { return fc_mse_loss(f->ctx, f->f_23, NULL, FC_REDUCE_SUM); }

static const bad_case norm_loss_cases[] = {
    BAD_T(softmax_axis, FC_ERR_AXIS, "softmax"),
    BAD_T(softmax_int, FC_ERR_DTYPE, "softmax"),
    BAD_T(softmax_null, FC_ERR_NULL_ARG, "softmax"),
    BAD_T(log_softmax_axis, FC_ERR_AXIS, "log_softmax"),
    BAD_T(log_softmax_block, FC_ERR_DTYPE, "log_softmax"),
    BAD_T(ln_weight_shape, FC_ERR_SHAPE_MISMATCH, "layer_norm"),
    BAD_T(ln_bias_dtype, FC_ERR_DTYPE, "layer_norm"),
    BAD_T(ln_eps, FC_ERR_INVALID_ARG, "layer_norm"),
    BAD_T(ln_eps_nan, FC_ERR_INVALID_ARG, "layer_norm"),
    BAD_T(ln_int, FC_ERR_DTYPE, "layer_norm"),
    BAD_T(rms_weight_dtype, FC_ERR_DTYPE, "rms_norm"),
    BAD_T(rms_weight_shape, FC_ERR_SHAPE_MISMATCH, "rms_norm"),
    BAD_T(rms_null, FC_ERR_NULL_ARG, "rms_norm"),
    BAD_T(bn_rank, FC_ERR_RANK, "batch_norm"),
    BAD_T(bn_weight_shape, FC_ERR_SHAPE_MISMATCH, "batch_norm"),
    BAD_T(bn_eps, FC_ERR_INVALID_ARG, "batch_norm"),
    BAD_T(gn_groups, FC_ERR_INVALID_ARG, "group_norm"),
    BAD_T(gn_rank, FC_ERR_RANK, "group_norm"),
    BAD_T(rope_rank, FC_ERR_RANK, "rope"),
    BAD_T(rope_odd_dims, FC_ERR_INVALID_ARG, "rope"),
    BAD_T(swiglu_shape, FC_ERR_SHAPE_MISMATCH, "swiglu"),
    BAD_T(swiglu_dtype, FC_ERR_DTYPE, "swiglu"),
    BAD_T(ce_target_range, FC_ERR_INDEX, "cross_entropy"),
    BAD_T(ce_target_neg, FC_ERR_INDEX, "cross_entropy"),
    BAD_T(ce_target_float, FC_ERR_DTYPE, "cross_entropy"),
    BAD_T(ce_target_shape, FC_ERR_SHAPE_MISMATCH, "cross_entropy"),
    BAD_T(ce_logits_rank, FC_ERR_RANK, "cross_entropy"),
    BAD_T(ce_logits_int, FC_ERR_DTYPE, "cross_entropy"),
    BAD_T(ce_smoothing, FC_ERR_INVALID_ARG, "cross_entropy"),
    BAD_T(ce_reduction, FC_ERR_INVALID_ARG, "cross_entropy"),
    BAD_T(mse_shape, FC_ERR_SHAPE_MISMATCH, "mse_loss"),
    BAD_T(mse_dtype, FC_ERR_DTYPE, "mse_loss"),
    BAD_T(mse_reduction, FC_ERR_INVALID_ARG, "mse_loss"),
    BAD_T(mse_null, FC_ERR_NULL_ARG, "mse_loss"),
};

static void test_bad_input_ops_softmax_norm_loss(void **state) {
    fx *f = *state;
    assert_int_equal(
        bad_run(f, norm_loss_cases, sizeof norm_loss_cases / sizeof norm_loss_cases[0], NULL), 0);
}

/* ---- layout
 * ---------------------------------------------------------------------------------------- */

static fc_tensor *reshape_numel(fx *f) {
    return fc_reshape(f->ctx, f->f_23, (const int64_t[]){4, 2}, 2);
}
static fc_tensor *reshape_two_inferred(fx *f) {
    return fc_reshape(f->ctx, f->f_23, (const int64_t[]){-1, -1}, 2);
}
static fc_tensor *reshape_negative(fx *f) {
    return fc_reshape(f->ctx, f->f_23, (const int64_t[]){-2, -3}, 2);
}
static fc_tensor *reshape_zero(fx *f) {
    return fc_reshape(f->ctx, f->f_23, (const int64_t[]){0, 6}, 2);
}
static fc_tensor *reshape_overflow(fx *f) {
    return fc_reshape(f->ctx, f->f_23, (const int64_t[]){INT64_MAX, 2}, 2);
}
static fc_tensor *reshape_shape_null(fx *f) { return fc_reshape(f->ctx, f->f_23, NULL, 2); }
static fc_tensor *reshape_rank0(fx *f) {
    return fc_reshape(f->ctx, f->f_23, (const int64_t[]){6}, 0);
}
static fc_tensor *reshape_rank9(fx *f) {
    return fc_reshape(f->ctx, f->f_23, (const int64_t[]){6}, 9);
}
static fc_tensor *view_strided(fx *f) { return fc_view(f->ctx, f->nc_32, (const int64_t[]){6}, 1); }
static fc_tensor *permute_dup(fx *f) { return fc_permute(f->ctx, f->f_23, (const int[]){0, 0}); }
static fc_tensor *permute_range(fx *f) { return fc_permute(f->ctx, f->f_23, (const int[]){0, 2}); }
static fc_tensor *permute_null(fx *f) { return fc_permute(f->ctx, f->f_23, NULL); }
static fc_tensor *transpose_axis(fx *f) { return fc_transpose(f->ctx, f->f_23, 0, 2); }
static fc_tensor *narrow_window(fx *f) { return fc_narrow(f->ctx, f->f_23, 1, 2, 2); }
static fc_tensor *narrow_start(fx *f) { return fc_narrow(f->ctx, f->f_23, 1, -1, 1); }
static fc_tensor *narrow_overflow(fx *f) {
    return fc_narrow(f->ctx, f->f_23, 1, INT64_MAX, INT64_MAX);
}
static fc_tensor *narrow_axis(fx *f) { return fc_narrow(f->ctx, f->f_23, 3, 0, 1); }
static fc_tensor *narrow_empty(fx *f) { return fc_narrow(f->ctx, f->f_23, 1, 0, 0); }
static fc_tensor *slice_step(fx *f) { return fc_slice(f->ctx, f->f_23, 1, 0, 3, 0); }
static fc_tensor *slice_neg_step(fx *f) { return fc_slice(f->ctx, f->f_23, 1, 0, 3, -1); }
static fc_tensor *slice_empty(fx *f) { return fc_slice(f->ctx, f->f_23, 1, 3, 1, 1); }
static fc_tensor *slice_axis(fx *f) { return fc_slice(f->ctx, f->f_23, -3, 0, 1, 1); }
static fc_tensor *expand_size(fx *f) {
    return fc_expand(f->ctx, f->f_23, (const int64_t[]){2, 4}, 2);
}
static fc_tensor *expand_rank(fx *f) { return fc_expand(f->ctx, f->f_23, (const int64_t[]){3}, 1); }
static fc_tensor *squeeze_size(fx *f) { return fc_squeeze(f->ctx, f->f_23, 0); }
static fc_tensor *squeeze_axis(fx *f) { return fc_squeeze(f->ctx, f->f_23, 5); }
static fc_tensor *unsqueeze_axis(fx *f) { return fc_unsqueeze(f->ctx, f->f_23, 4); }
static fc_tensor *unsqueeze_axis_neg(fx *f) { return fc_unsqueeze(f->ctx, f->f_23, -4); }
static fc_tensor *concat_shapes(fx *f) {
    return fc_concat(f->ctx, (fc_tensor *[]){f->f_23, f->f_32}, 2, 0);
}
static fc_tensor *concat_ranks(fx *f) {
    return fc_concat(f->ctx, (fc_tensor *[]){f->f_23, f->f_4}, 2, 0);
}
static fc_tensor *concat_dtypes(fx *f) {
    return fc_concat(f->ctx, (fc_tensor *[]){f->f_23, f->d_23}, 2, 0);
}
static fc_tensor *concat_none(fx *f) { return fc_concat(f->ctx, (fc_tensor *[]){f->f_23}, 0, 0); }
static fc_tensor *concat_axis(fx *f) {
    return fc_concat(f->ctx, (fc_tensor *[]){f->f_23, f->f_23}, 2, 2);
}
static fc_tensor *concat_null_list(fx *f) { return fc_concat(f->ctx, NULL, 2, 0); }
static fc_tensor *concat_null_item(fx *f) {
    return fc_concat(f->ctx, (fc_tensor *[]){f->f_23, NULL}, 2, 0);
}
static fc_tensor *stack_shapes(fx *f) {
    return fc_stack(f->ctx, (fc_tensor *[]){f->f_23, f->f_32}, 2, 0);
}
static fc_tensor *stack_axis(fx *f) {
    return fc_stack(f->ctx, (fc_tensor *[]){f->f_23, f->f_23}, 2, 3);
}
static fc_tensor *pad_negative(fx *f) {
    return fc_pad(f->ctx, f->f_23, (const int64_t[]){0, 0, -1, 0}, 0);
}
static fc_tensor *pad_null(fx *f) { return fc_pad(f->ctx, f->f_23, NULL, 0); }
static fc_tensor *pad_overflow(fx *f) {
    return fc_pad(f->ctx, f->f_23, (const int64_t[]){0, 0, INT64_MAX, 1}, 0);
}

static fc_tensor *split_out[3];
static fc_status split_sum(fx *f) {
    return fc_split(f->ctx, f->f_23, 1, (const int64_t[]){1, 1}, 2, split_out);
}
static fc_status split_zero(fx *f) {
    return fc_split(f->ctx, f->f_23, 1, (const int64_t[]){0, 3}, 2, split_out);
}
static fc_status split_axis(fx *f) {
    return fc_split(f->ctx, f->f_23, 2, (const int64_t[]){1, 2}, 2, split_out);
}
static fc_status split_sizes_null(fx *f) {
    return fc_split(f->ctx, f->f_23, 1, NULL, 2, split_out);
}
static fc_status split_out_null(fx *f) {
    return fc_split(f->ctx, f->f_23, 1, (const int64_t[]){1, 2}, 2, NULL);
}
static fc_status split_n(fx *f) {
    return fc_split(f->ctx, f->f_23, 1, (const int64_t[]){3}, 0, split_out);
}
static fc_status split_x_null(fx *f) {
    return fc_split(f->ctx, NULL, 1, (const int64_t[]){3}, 1, split_out);
}

static const bad_case layout_cases[] = {
    BAD_T(reshape_numel, FC_ERR_INVALID_SHAPE, "reshape"),
    BAD_T(reshape_two_inferred, FC_ERR_INVALID_SHAPE, "reshape"),
    BAD_T(reshape_negative, FC_ERR_INVALID_SHAPE, "reshape"),
    BAD_T(reshape_zero, FC_ERR_INVALID_SHAPE, "reshape"),
    BAD_T(reshape_overflow, FC_ERR_INVALID_SHAPE, "reshape"), /* the count is not 6 */
    BAD_T(reshape_shape_null, FC_ERR_NULL_ARG, "reshape"),
    BAD_T(reshape_rank0, FC_ERR_RANK, "reshape"),
    BAD_T(reshape_rank9, FC_ERR_RANK, "reshape"),
    BAD_T(view_strided, FC_ERR_UNSUPPORTED_VIEW, "view"),
    BAD_T(permute_dup, FC_ERR_INVALID_ARG, "permute"),
    BAD_T(permute_range, FC_ERR_AXIS, "permute"),
    BAD_T(permute_null, FC_ERR_NULL_ARG, "permute"),
    BAD_T(transpose_axis, FC_ERR_AXIS, "transpose"),
    BAD_T(narrow_window, FC_ERR_INDEX, "narrow"),
    BAD_T(narrow_start, FC_ERR_INDEX, "narrow"),
    BAD_T(narrow_overflow, FC_ERR_INDEX, "narrow"),
    BAD_T(narrow_axis, FC_ERR_AXIS, "narrow"),
    BAD_T(narrow_empty, FC_ERR_EMPTY_SELECTION, "narrow"),
    BAD_T(slice_step, FC_ERR_INVALID_ARG, "slice"),
    BAD_T(slice_neg_step, FC_ERR_INVALID_ARG, "slice"),
    BAD_T(slice_empty, FC_ERR_EMPTY_SELECTION, "slice"),
    BAD_T(slice_axis, FC_ERR_AXIS, "slice"),
    BAD_T(expand_size, FC_ERR_SHAPE_MISMATCH, "expand"),
    BAD_T(expand_rank, FC_ERR_RANK, "expand"),
    BAD_T(squeeze_size, FC_ERR_INVALID_SHAPE, "squeeze"),
    BAD_T(squeeze_axis, FC_ERR_AXIS, "squeeze"),
    BAD_T(unsqueeze_axis, FC_ERR_AXIS, "unsqueeze"),
    BAD_T(unsqueeze_axis_neg, FC_ERR_AXIS, "unsqueeze"),
    BAD_T(concat_shapes, FC_ERR_SHAPE_MISMATCH, "concat"),
    BAD_T(concat_ranks, FC_ERR_RANK, "concat"),
    BAD_T(concat_dtypes, FC_ERR_DTYPE, "concat"),
    BAD_T(concat_none, FC_ERR_INVALID_ARG, "concat"),
    BAD_T(concat_axis, FC_ERR_AXIS, "concat"),
    BAD_T(concat_null_list, FC_ERR_NULL_ARG, "concat"),
    BAD_T(concat_null_item, FC_ERR_NULL_ARG, "concat"),
    BAD_T(stack_shapes, FC_ERR_SHAPE_MISMATCH, "stack"),
    BAD_T(stack_axis, FC_ERR_AXIS, "stack"),
    BAD_T(pad_negative, FC_ERR_INVALID_ARG, "pad"),
    BAD_T(pad_null, FC_ERR_NULL_ARG, "pad"),
    BAD_T(pad_overflow, FC_ERR_OVERFLOW, "pad"),
    BAD_S(split_sum, FC_ERR_SHAPE_MISMATCH, "split"),
    BAD_S(split_zero, FC_ERR_INVALID_ARG, "split"),
    BAD_S(split_axis, FC_ERR_AXIS, "split"),
    BAD_S(split_sizes_null, FC_ERR_NULL_ARG, "split"),
    BAD_S(split_out_null, FC_ERR_NULL_ARG, "split"),
    BAD_S(split_n, FC_ERR_INVALID_ARG, "split"),
    BAD_S(split_x_null, FC_ERR_NULL_ARG, "split"),
};

static void test_bad_input_ops_layout(void **state) {
    fx *f = *state;
    assert_int_equal(bad_run(f, layout_cases, sizeof layout_cases / sizeof layout_cases[0], NULL),
                     0);
}

/* ---- indexing, masks, dropout
 * ---------------------------------------------------------------------- */

static fc_tensor *isel_range(fx *f) { return fc_index_select(f->ctx, f->f_23, 0, f->idx_bad); }
static fc_tensor *isel_negative(fx *f) { return fc_index_select(f->ctx, f->f_23, 1, f->idx_neg); }
static fc_tensor *isel_float(fx *f) { return fc_index_select(f->ctx, f->f_23, 0, f->f_3); }
static fc_tensor *isel_axis(fx *f) { return fc_index_select(f->ctx, f->f_23, 2, f->idx_2); }
static fc_tensor *isel_null(fx *f) { return fc_index_select(f->ctx, f->f_23, 0, NULL); }
static fc_tensor *emb_range(fx *f) { return fc_embedding(f->ctx, f->f_23, f->idx_bad); }
static fc_tensor *emb_rank(fx *f) { return fc_embedding(f->ctx, f->f_4, f->idx_2); }
static fc_tensor *emb_float_ids(fx *f) { return fc_embedding(f->ctx, f->f_23, f->f_3); }
static fc_tensor *gather_rank(fx *f) { return fc_gather(f->ctx, f->f_23, 0, f->idx_2); }
static fc_tensor *gather_axis(fx *f) { return fc_gather(f->ctx, f->f_23, 3, f->i_23); }
static fc_tensor *gather_float(fx *f) { return fc_gather(f->ctx, f->f_23, 0, f->f_23); }
static fc_tensor *scatter_rank(fx *f) {
    return fc_scatter_add(f->ctx, f->f_23, 0, f->idx_2, f->f_23);
}
static fc_tensor *scatter_dtype(fx *f) {
    return fc_scatter_add(f->ctx, f->f_23, 0, f->i_23, f->d_23);
}
static fc_tensor *one_hot_range(fx *f) { return fc_one_hot(f->ctx, f->idx_bad, 3, FC_F32); }
static fc_tensor *one_hot_classes(fx *f) { return fc_one_hot(f->ctx, f->idx_2, 0, FC_F32); }
static fc_tensor *one_hot_float(fx *f) { return fc_one_hot(f->ctx, f->f_3, 3, FC_F32); }
static fc_tensor *one_hot_block(fx *f) { return fc_one_hot(f->ctx, f->idx_2, 8, FC_Q8_0); }
static fc_tensor *triu_rank(fx *f) { return fc_triu(f->ctx, f->f_4, 0); }
static fc_tensor *tril_null(fx *f) { return fc_tril(f->ctx, NULL, 0); }
static fc_tensor *dropout_p_high(fx *f) { return fc_dropout(f->ctx, f->f_23, 1.5, true); }
static fc_tensor *dropout_p_neg(fx *f) { return fc_dropout(f->ctx, f->f_23, -0.1, true); }
static fc_tensor *dropout_p_nan(fx *f) { return fc_dropout(f->ctx, f->f_23, NAN, true); }
static fc_tensor *dropout_int(fx *f) { return fc_dropout(f->ctx, f->i_23, 0.5, true); }
static fc_tensor *where_dtypes(fx *f) { return fc_where(f->ctx, f->b_23, f->f_23, f->d_23); }
static fc_tensor *where_cond_block(fx *f) { return fc_where(f->ctx, f->q_232, f->f_23, f->f_23); }
static fc_tensor *where_shapes(fx *f) { return fc_where(f->ctx, f->b_23, f->f_23, f->f_4); }
static fc_tensor *where_null(fx *f) { return fc_where(f->ctx, NULL, f->f_23, f->f_23); }
static fc_tensor *mfill_shape(fx *f) { return fc_masked_fill(f->ctx, f->f_23, f->f_4, 0); }
static fc_tensor *mfill_block(fx *f) { return fc_masked_fill(f->ctx, f->q_232, f->b_23, 0); }
static fc_tensor *sort_null(fx *f) { return fc_sort(f->ctx, NULL, 0, false, NULL); }
static fc_tensor *sort_axis(fx *f) { return fc_sort(f->ctx, f->f_23, 2, false, NULL); }
static fc_tensor *sort_block(fx *f) { return fc_sort(f->ctx, f->q_232, 0, true, NULL); }
static fc_tensor *argsort_null(fx *f) { return fc_argsort(f->ctx, NULL, 0, false); }
static fc_tensor *argsort_axis(fx *f) { return fc_argsort(f->ctx, f->f_23, -3, false); }
static fc_tensor *argsort_block(fx *f) { return fc_argsort(f->ctx, f->q_232, 0, false); }
static fc_tensor *topk_null(fx *f) { return fc_topk(f->ctx, NULL, 1, 0, true, true, NULL); }
static fc_tensor *topk_axis(fx *f) { return fc_topk(f->ctx, f->f_23, 1, 2, true, true, NULL); }
static fc_tensor *topk_block(fx *f) { return fc_topk(f->ctx, f->q_232, 1, 0, true, true, NULL); }
static fc_tensor *topk_k_big(fx *f) { return fc_topk(f->ctx, f->f_23, 4, 1, true, true, NULL); }
static fc_tensor *topk_k_zero(fx *f) { return fc_topk(f->ctx, f->f_23, 0, 1, true, true, NULL); }
static fc_tensor *topk_k_neg(fx *f) { return fc_topk(f->ctx, f->f_23, -1, 0, false, false, NULL); }

static const bad_case index_cases[] = {
    BAD_T(isel_range, FC_ERR_INDEX, "index_select"),
    BAD_T(isel_negative, FC_ERR_INDEX, "index_select"),
    BAD_T(isel_float, FC_ERR_DTYPE, "index_select"),
    BAD_T(isel_axis, FC_ERR_AXIS, "index_select"),
    BAD_T(isel_null, FC_ERR_NULL_ARG, "index_select"),
    BAD_T(emb_range, FC_ERR_INDEX, "embedding"),
    BAD_T(emb_rank, FC_ERR_RANK, "embedding"),
    BAD_T(emb_float_ids, FC_ERR_DTYPE, "embedding"),
    BAD_T(gather_rank, FC_ERR_RANK, "gather"),
    BAD_T(gather_axis, FC_ERR_AXIS, "gather"),
    BAD_T(gather_float, FC_ERR_DTYPE, "gather"),
    BAD_T(scatter_rank, FC_ERR_RANK, "scatter_add"),
    BAD_T(scatter_dtype, FC_ERR_DTYPE, "scatter_add"),
    BAD_T(one_hot_range, FC_ERR_INDEX, "one_hot"),
    BAD_T(one_hot_classes, FC_ERR_INVALID_ARG, "one_hot"),
    BAD_T(one_hot_float, FC_ERR_DTYPE, "one_hot"),
    BAD_T(one_hot_block, FC_ERR_DTYPE, "one_hot"),
    BAD_T(triu_rank, FC_ERR_RANK, "triu"),
    BAD_T(tril_null, FC_ERR_NULL_ARG, "tril"),
    BAD_T(dropout_p_high, FC_ERR_INVALID_ARG, "dropout"),
    BAD_T(dropout_p_neg, FC_ERR_INVALID_ARG, "dropout"),
    BAD_T(dropout_p_nan, FC_ERR_INVALID_ARG, "dropout"),
    BAD_T(dropout_int, FC_ERR_DTYPE, "dropout"),
    BAD_T(where_dtypes, FC_ERR_DTYPE, "where"),
    BAD_T(where_cond_block, FC_ERR_DTYPE, "where"),
    BAD_T(where_shapes, FC_ERR_SHAPE_MISMATCH, "where"),
    BAD_T(where_null, FC_ERR_NULL_ARG, "where"),
    BAD_T(mfill_shape, FC_ERR_SHAPE_MISMATCH, "masked_fill"),
    BAD_T(mfill_block, FC_ERR_DTYPE, "masked_fill"),
    BAD_T(sort_null, FC_ERR_NULL_ARG, "sort"),
    BAD_T(sort_axis, FC_ERR_AXIS, "sort"),
    BAD_T(sort_block, FC_ERR_DTYPE, "sort"),
    BAD_T(argsort_null, FC_ERR_NULL_ARG, "argsort"),
    BAD_T(argsort_axis, FC_ERR_AXIS, "argsort"),
    BAD_T(argsort_block, FC_ERR_DTYPE, "argsort"),
    BAD_T(topk_null, FC_ERR_NULL_ARG, "topk"),
    BAD_T(topk_axis, FC_ERR_AXIS, "topk"),
    BAD_T(topk_block, FC_ERR_DTYPE, "topk"),
    BAD_T(topk_k_big, FC_ERR_INVALID_ARG, "topk"),
    BAD_T(topk_k_zero, FC_ERR_INVALID_ARG, "topk"),
    BAD_T(topk_k_neg, FC_ERR_INVALID_ARG, "topk"),
};

static void test_bad_input_ops_indexing(void **state) {
    fx *f = *state;
    assert_int_equal(bad_run(f, index_cases, sizeof index_cases / sizeof index_cases[0], NULL), 0);
}

/* ---- matmul
 * ---------------------------------------------------------------------------------------- */

static fc_tensor *mm_inner(fx *f) { return fc_matmul(f->ctx, f->f_23, f->f_23); }
static fc_tensor *mm_batch(fx *f) { return fc_matmul(f->ctx, f->f_234, f->f_345); }
static fc_tensor *mm_dtypes(fx *f) { return fc_matmul(f->ctx, f->f_23, f->d_23); }
static fc_tensor *mm_int(fx *f) { return fc_matmul(f->ctx, f->i_23, f->i_23); }
static fc_tensor *mm_f8(fx *f) { return fc_matmul(f->ctx, f->e8_23, f->e8_23); }
static fc_tensor *mm_block_lhs(fx *f) { return fc_matmul(f->ctx, f->q_232, f->q_232); }
static fc_tensor *mm_block_rhs_f64(fx *f) { return fc_matmul(f->ctx, f->d_23, f->q_232); }
static fc_tensor *mm_null(fx *f) { return fc_matmul(f->ctx, NULL, f->f_23); }
static fc_tensor *linear_rank(fx *f) { return fc_linear(f->ctx, f->f_23, f->f_4, NULL); }
static fc_tensor *linear_in(fx *f) { return fc_linear(f->ctx, f->f_23, f->f_32, NULL); }
static fc_tensor *linear_bias(fx *f) { return fc_linear(f->ctx, f->f_23, f->f_23, f->f_4); }
static fc_tensor *linear_bias_dtype(fx *f) { return fc_linear(f->ctx, f->f_32, f->f_32, f->d_3); }
static fc_status backend_range(fx *f) { return fc_ctx_set_backend(f->ctx, FC_BACKEND_COUNT); }
static fc_status backend_negative(fx *f) { return fc_ctx_set_backend(f->ctx, (fc_backend)-1); }

static const bad_case matmul_cases[] = {
    BAD_T(mm_inner, FC_ERR_SHAPE_MISMATCH, "matmul"),
    BAD_T(mm_batch, FC_ERR_SHAPE_MISMATCH, "matmul"),
    BAD_T(mm_dtypes, FC_ERR_DTYPE, "matmul"),
    BAD_T(mm_int, FC_ERR_DTYPE, "matmul"),
    BAD_T(mm_f8, FC_ERR_DTYPE, "matmul"),
    BAD_T(mm_block_lhs, FC_ERR_DTYPE, "matmul"),
    BAD_T(mm_block_rhs_f64, FC_ERR_DTYPE, "matmul"),
    BAD_T(mm_null, FC_ERR_NULL_ARG, "matmul"),
    BAD_T(linear_rank, FC_ERR_RANK, "linear"),
    BAD_T(linear_in, FC_ERR_SHAPE_MISMATCH, "linear"),
    BAD_T(linear_bias, FC_ERR_SHAPE_MISMATCH, "linear"),
    BAD_T(linear_bias_dtype, FC_ERR_DTYPE, "linear"),
    BAD_S(backend_range, FC_ERR_INVALID_ARG, "fc_ctx_set_backend"),
    BAD_S(backend_negative, FC_ERR_INVALID_ARG, "fc_ctx_set_backend"),
};

static void test_bad_input_ops_matmul(void **state) {
    fx *f = *state;
    assert_int_equal(bad_run(f, matmul_cases, sizeof matmul_cases / sizeof matmul_cases[0], NULL),
                     0);
}

/* ---- fixture
 * ------------------------------------------------------------------------------------------ */

static int setup(void **state) {
    fx *f = fx_new();
    *state = f;
    return f->ctx && fc_ctx_status(f->ctx) == FC_OK ? 0 : -1;
}

static int teardown(void **state) {
    fx_free(*state);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input_ops_binary),
        cmocka_unit_test(test_bad_input_ops_scalar_forms),
        cmocka_unit_test(test_bad_input_ops_unary),
        cmocka_unit_test(test_bad_input_ops_reductions),
        cmocka_unit_test(test_bad_input_ops_softmax_norm_loss),
        cmocka_unit_test(test_bad_input_ops_layout),
        cmocka_unit_test(test_bad_input_ops_indexing),
        cmocka_unit_test(test_bad_input_ops_matmul),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
