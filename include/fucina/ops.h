/* fucina/ops.h - the forward op library.
 *
 * Every op borrows its inputs and returns a new reference, or NULL after
 * recording an error in the context (see fucina/tensor.h). Shapes broadcast
 * NumPy-style, right-aligned, wherever an op combines several tensors.
 * Inputs may be any view (transposed, narrowed, broadcast).
 *
 * Dtype policy (seed 000 section 8.3): operands of one op must share a dtype
 * (FC_ERR_DTYPE naming both otherwise; cast with fc_to). Pointwise math runs
 * on f16, bf16 (through f32, rounded once on store), f32, f64 and, for the
 * arithmetic ops, on integers with wrapping semantics; the "widened" ops
 * (unary functions, softmax, norms, ...) take float dtypes only, compute in
 * f32 (f64 for f64) and return the input dtype; reductions of f16/bf16/f32
 * return f32, f64 returns f64, integers and bool return i64. Integer
 * division by zero is FC_ERR_DIV_ZERO. Storage-only dtypes (f8, blocks)
 * must be cast first.
 *
 * When an input requires grad (fucina/autograd.h) every differentiable op
 * records its backward; the notes on non-differentiable points follow
 * PyTorch.
 */
#ifndef FUCINA_OPS_H
#define FUCINA_OPS_H

#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- binary arithmetic (broadcasting) ------------------------------------------ */
FC_API fc_tensor *fc_add(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_sub(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_mul(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
/* Integer division truncates toward zero; a zero divisor is FC_ERR_DIV_ZERO. */
FC_API fc_tensor *fc_div(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
/* Float dtypes only. */
FC_API fc_tensor *fc_pow(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
/* Elementwise max/min; NaN propagates. Gradient goes to a on ties (a >= b). */
FC_API fc_tensor *fc_maximum(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_minimum(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);

/* Scalar forms: the scalar is converted to the tensor's dtype first. */
FC_API fc_tensor *fc_add_scalar(fc_ctx *ctx, fc_tensor *a, double s);
FC_API fc_tensor *fc_sub_scalar(fc_ctx *ctx, fc_tensor *a, double s);  /* a - s */
FC_API fc_tensor *fc_rsub_scalar(fc_ctx *ctx, fc_tensor *a, double s); /* s - a */
FC_API fc_tensor *fc_mul_scalar(fc_ctx *ctx, fc_tensor *a, double s);
FC_API fc_tensor *fc_div_scalar(fc_ctx *ctx, fc_tensor *a, double s);
FC_API fc_tensor *fc_pow_scalar(fc_ctx *ctx, fc_tensor *a, double s);
FC_API fc_tensor *fc_maximum_scalar(fc_ctx *ctx, fc_tensor *a, double s);
FC_API fc_tensor *fc_minimum_scalar(fc_ctx *ctx, fc_tensor *a, double s);

/* In place (a mutation: bumps the storage generation; FC_ERR_READ_ONLY on
 * read-only storage; b broadcasts to dst's shape). Not recorded by autograd:
 * in-place ops on tensors that require grad are FC_ERR_INVALID_ARG. */
FC_API fc_status fc_add_(fc_tensor *dst, fc_tensor *b);
/* out = a + b into an existing tensor of the broadcast shape and the
 * operands' dtype (out may not alias a or b unless identical to it). */
FC_API fc_status fc_add_out(fc_tensor *out, fc_tensor *a, fc_tensor *b);
FC_API fc_status fc_mul_scalar_(fc_tensor *dst, double s);
FC_API fc_status fc_fill_(fc_tensor *dst, double value);

/* ---- comparison and logic (result dtype bool) ------------------------------------ */
FC_API fc_tensor *fc_eq(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_ne(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_lt(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_le(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_gt(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_ge(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_eq_scalar(fc_ctx *ctx, fc_tensor *a, double s);
FC_API fc_tensor *fc_lt_scalar(fc_ctx *ctx, fc_tensor *a, double s);
FC_API fc_tensor *fc_gt_scalar(fc_ctx *ctx, fc_tensor *a, double s);
/* Operands of any non-block dtype, read with fc_is_truthy. */
FC_API fc_tensor *fc_logical_and(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_logical_or(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_logical_not(fc_ctx *ctx, fc_tensor *a);
/* cond ? a : b, cond of any non-block dtype (truthiness), a and b one dtype;
 * all three broadcast. */
FC_API fc_tensor *fc_where(fc_ctx *ctx, fc_tensor *cond, fc_tensor *a, fc_tensor *b);
/* x with value wherever mask is true (mask broadcasts to x). */
FC_API fc_tensor *fc_masked_fill(fc_ctx *ctx, fc_tensor *x, fc_tensor *mask, double value);

/* ---- unary (float dtypes; neg/abs/sign/square also on signed integers) ------------ */
FC_API fc_tensor *fc_neg(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_abs(fc_ctx *ctx, fc_tensor *x);  /* abs'(0) = 0 */
FC_API fc_tensor *fc_sign(fc_ctx *ctx, fc_tensor *x); /* gradient 0 */
FC_API fc_tensor *fc_square(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_sqrt(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_rsqrt(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_reciprocal(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_exp(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_log(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_log1p(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_expm1(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_sin(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_cos(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_tanh(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_sigmoid(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_relu(fc_ctx *ctx, fc_tensor *x); /* relu'(0) = 0 */
FC_API fc_tensor *fc_leaky_relu(fc_ctx *ctx, fc_tensor *x, double slope);
/* GELU: exact erf form, or the tanh approximation when tanh_approx. */
FC_API fc_tensor *fc_gelu(fc_ctx *ctx, fc_tensor *x, bool tanh_approx);
FC_API fc_tensor *fc_silu(fc_ctx *ctx, fc_tensor *x);
/* log(1 + exp(x)), computed stably (linear above x > 20 like PyTorch). */
FC_API fc_tensor *fc_softplus(fc_ctx *ctx, fc_tensor *x);
/* Clamp to [lo, hi]; pass -INFINITY / INFINITY for no bound. Gradient 1
 * where lo <= x <= hi. */
FC_API fc_tensor *fc_clamp(fc_ctx *ctx, fc_tensor *x, double lo, double hi);

/* ---- reductions ---------------------------------------------------------------------
 * axes: naxes axes (negative allowed, no repeats), or naxes == 0 for all
 * axes (the result then has shape [1], or rank ones with keepdim). */
FC_API fc_tensor *fc_sum(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim);
FC_API fc_tensor *fc_mean(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim);
FC_API fc_tensor *fc_prod(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim);
/* max/min values (float result dtype per the reduction policy; integers keep
 * i64). The gradient goes to the first extremal element. */
FC_API fc_tensor *fc_max(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim);
FC_API fc_tensor *fc_min(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim);
/* Index (i64) of the first max/min along one axis. */
FC_API fc_tensor *fc_argmax(fc_ctx *ctx, fc_tensor *x, int axis, bool keepdim);
FC_API fc_tensor *fc_argmin(fc_ctx *ctx, fc_tensor *x, int axis, bool keepdim);
/* Variance / standard deviation with Bessel-style correction (1 = unbiased). */
FC_API fc_tensor *fc_var(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, int correction,
                         bool keepdim);
FC_API fc_tensor *fc_std(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, int correction,
                         bool keepdim);
FC_API fc_tensor *fc_logsumexp(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes,
                               bool keepdim);
/* Truthiness reductions, result bool. */
FC_API fc_tensor *fc_all(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim);
FC_API fc_tensor *fc_any(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim);
/* Inclusive prefix sum along axis (reduction dtype policy for the result). */
FC_API fc_tensor *fc_cumsum(fc_ctx *ctx, fc_tensor *x, int axis);

/* ---- softmax, normalisation, losses --------------------------------------------------- */
FC_API fc_tensor *fc_softmax(fc_ctx *ctx, fc_tensor *x, int axis);
FC_API fc_tensor *fc_log_softmax(fc_ctx *ctx, fc_tensor *x, int axis);
/* Normalises over the last axis; weight and bias have the last axis's
 * length (NULL allowed). */
FC_API fc_tensor *fc_layer_norm(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, fc_tensor *bias,
                                double eps);
FC_API fc_tensor *fc_rms_norm(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, double eps);

typedef enum fc_reduction { FC_REDUCE_MEAN, FC_REDUCE_SUM, FC_REDUCE_NONE } fc_reduction;
typedef struct fc_ce_opts {
    fc_reduction reduction; /* default (0) mean over non-ignored targets */
    int64_t ignore_index;   /* targets equal to it contribute nothing; set use_ignore */
    bool use_ignore;
    double label_smoothing; /* 0 .. 1 */
} fc_ce_opts;
/* Fused log-softmax + NLL. logits [N, C] (or [C] with a one-element
 * target), targets integer [N] with values in [0, C) (FC_ERR_INDEX names
 * the bad target). opts NULL: mean, no ignore, no smoothing. */
FC_API fc_tensor *fc_cross_entropy(fc_ctx *ctx, fc_tensor *logits, fc_tensor *targets,
                                   const fc_ce_opts *opts);
FC_API fc_tensor *fc_mse_loss(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, fc_reduction reduction);

/* ---- layout (views share storage; no copy unless stated) -------------------------------- */
/* A view when x is contiguous, else a contiguous copy. One dim may be -1. */
FC_API fc_tensor *fc_reshape(fc_ctx *ctx, fc_tensor *x, const int64_t *shape, int rank);
/* Always a view: FC_ERR_UNSUPPORTED_VIEW when x is not contiguous. */
FC_API fc_tensor *fc_view(fc_ctx *ctx, fc_tensor *x, const int64_t *shape, int rank);
FC_API fc_tensor *fc_permute(fc_ctx *ctx, fc_tensor *x, const int *perm);
FC_API fc_tensor *fc_transpose(fc_ctx *ctx, fc_tensor *x, int axis0, int axis1);
/* length elements of axis from start. */
FC_API fc_tensor *fc_narrow(fc_ctx *ctx, fc_tensor *x, int axis, int64_t start, int64_t length);
/* Python-style start:stop:step (step >= 1; negative start/stop count from
 * the end; clamped like Python; an empty result is FC_ERR_EMPTY_SELECTION). */
FC_API fc_tensor *fc_slice(fc_ctx *ctx, fc_tensor *x, int axis, int64_t start, int64_t stop,
                           int64_t step);
/* Broadcast view to shape (-1 keeps a dim). */
FC_API fc_tensor *fc_expand(fc_ctx *ctx, fc_tensor *x, const int64_t *shape, int rank);
FC_API fc_tensor *fc_squeeze(fc_ctx *ctx, fc_tensor *x, int axis);
FC_API fc_tensor *fc_unsqueeze(fc_ctx *ctx, fc_tensor *x, int axis);
/* Copies; every input has the same dtype and the same shape off axis. */
FC_API fc_tensor *fc_concat(fc_ctx *ctx, fc_tensor *const *xs, int n, int axis);
FC_API fc_tensor *fc_stack(fc_ctx *ctx, fc_tensor *const *xs, int n, int axis);
/* Views: out[i] gets sizes[i] elements of axis (sum must equal the dim).
 * Returns FC_OK or the error; on error no out[] is set. */
FC_API fc_status fc_split(fc_ctx *ctx, fc_tensor *x, int axis, const int64_t *sizes, int n,
                          fc_tensor **out);
/* Constant padding: pads[2*i], pads[2*i+1] = before/after for axis i
 * (rank pairs, >= 0). */
FC_API fc_tensor *fc_pad(fc_ctx *ctx, fc_tensor *x, const int64_t *pads, double value);

/* ---- indexing ------------------------------------------------------------------------------ */
/* Rows of x along axis picked by an integer index tensor (any rank; the
 * result replaces that axis by the index's shape). FC_ERR_INDEX names the
 * bad index. Block-quantized x is dequantized row by row to f32. */
FC_API fc_tensor *fc_index_select(fc_ctx *ctx, fc_tensor *x, int axis, fc_tensor *index);
/* table [V, D], ids any shape -> [..., D] (index_select on axis 0). */
FC_API fc_tensor *fc_embedding(fc_ctx *ctx, fc_tensor *table, fc_tensor *ids);
/* out[i][j] = x[i][index[i][j]] along axis (index has x's rank). */
FC_API fc_tensor *fc_gather(fc_ctx *ctx, fc_tensor *x, int axis, fc_tensor *index);
/* x with src added at index along axis (a copy of x, not in place). */
FC_API fc_tensor *fc_scatter_add(fc_ctx *ctx, fc_tensor *x, int axis, fc_tensor *index,
                                 fc_tensor *src);
FC_API fc_tensor *fc_one_hot(fc_ctx *ctx, fc_tensor *index, int64_t num_classes, fc_dtype dtype);
/* Upper/lower triangle of the last two axes (diagonal offset k). */
FC_API fc_tensor *fc_triu(fc_ctx *ctx, fc_tensor *x, int64_t k);
FC_API fc_tensor *fc_tril(fc_ctx *ctx, fc_tensor *x, int64_t k);
/* Zeroes each element with probability p and scales the rest by 1/(1-p)
 * (identity when !training or p == 0), from the context RNG. */
FC_API fc_tensor *fc_dropout(fc_ctx *ctx, fc_tensor *x, double p, bool training);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_OPS_H */
