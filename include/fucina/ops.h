/* SPDX-License-Identifier: MIT */
/* fucina/ops.h - the forward op library.
 *
 * Every op borrows its inputs and returns a new reference, or NULL after
 * recording an error in the context (see fucina/tensor.h). Shapes broadcast
 * NumPy-style, right-aligned, wherever an op combines several tensors.
 * Inputs may be any view (transposed, narrowed, broadcast).
 *
 * Dtype policy: operands of one op must share a dtype
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

/* ---- binary arithmetic (broadcasting) ------------------------------------------
 * out has the broadcast shape of a and b and their common dtype: f16, bf16,
 * f32, f64, or (all but pow) an integer dtype, where + - * wrap modulo 2^bits.
 * Errors: FC_ERR_DTYPE when the dtypes differ ("add: dtypes f32 and f16
 * differ; cast one with fc_to") or are not allowed (bool, f8, blocks);
 * FC_ERR_SHAPE_MISMATCH when the shapes do not broadcast; FC_ERR_NULL_ARG
 * for a NULL input (an earlier error is kept). Gradients of broadcast
 * inputs are summed back to their shapes. */
FC_API fc_tensor *fc_add(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_sub(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_mul(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
/* Integer division truncates toward zero and INT_MIN / -1 wraps to INT_MIN.
 * A zero anywhere in an integer divisor is FC_ERR_DIV_ZERO, detected before
 * anything is computed. Floats follow IEEE (x / 0 is +-inf or NaN). */
FC_API fc_tensor *fc_div(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
/* Float dtypes only. Gradient for a is 0 where b == 0; for b it is 0 where
 * a == 0 and b >= 0 (PyTorch's masks). */
FC_API fc_tensor *fc_pow(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
/* Elementwise max/min; a NaN in either operand propagates. Gradient: to the
 * winning operand (to a NaN operand that propagated), split 0.5 / 0.5 on
 * ties like torch.maximum/minimum (so it agrees with central differences). */
FC_API fc_tensor *fc_maximum(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_minimum(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);

/* Scalar forms: the scalar is first converted to the tensor's dtype with
 * fc_cast_scalar's rules (an integer tensor truncates 2.7 to 2; an f16
 * tensor rounds 0.1 to f16), then the binary op runs with it broadcast, with
 * the same dtypes, errors and gradients as the tensor form (so
 * fc_div_scalar(i32, 0.5) is FC_ERR_DIV_ZERO). */
FC_API fc_tensor *fc_add_scalar(fc_ctx *ctx, fc_tensor *a, double s);
FC_API fc_tensor *fc_sub_scalar(fc_ctx *ctx, fc_tensor *a, double s);  /* a - s */
FC_API fc_tensor *fc_rsub_scalar(fc_ctx *ctx, fc_tensor *a, double s); /* s - a */
FC_API fc_tensor *fc_mul_scalar(fc_ctx *ctx, fc_tensor *a, double s);
FC_API fc_tensor *fc_div_scalar(fc_ctx *ctx, fc_tensor *a, double s);
FC_API fc_tensor *fc_pow_scalar(fc_ctx *ctx, fc_tensor *a, double s);
FC_API fc_tensor *fc_maximum_scalar(fc_ctx *ctx, fc_tensor *a, double s);
FC_API fc_tensor *fc_minimum_scalar(fc_ctx *ctx, fc_tensor *a, double s);

/* In place and into a destination. Each is a mutation of dst/out: it bumps
 * the storage generation (so a value saved for backward that lives there
 * makes that backward fail with FC_ERR_SAVED_MODIFIED). Dtypes as for the
 * binary ops (fc_fill_ takes every scalar dtype). Not recorded by autograd,
 * so while grad mode is on a destination or operand that requires grad is
 * FC_ERR_INVALID_ARG; inside fc_no_grad_begin/end (optimizer-style updates)
 * it is allowed. Also FC_ERR_READ_ONLY for read-only storage,
 * FC_ERR_UNSUPPORTED_VIEW for a destination with stride-0 (broadcast) axes,
 * FC_ERR_SHAPE_MISMATCH when the operands do not broadcast to exactly the
 * destination's shape, and in check_finite mode FC_ERR_NON_FINITE after
 * writing a NaN/inf. Nothing is written when a check fails (check_finite
 * aside). dst may be any other view; an operand may be the destination
 * itself, while other overlaps with it give unspecified values. Borrows
 * every argument. */
FC_API fc_status fc_add_(fc_tensor *dst, fc_tensor *b);
/* out = a + b into an existing tensor of the broadcast shape and the
 * operands' dtype (out may not alias a or b unless identical to it). */
FC_API fc_status fc_add_out(fc_tensor *out, fc_tensor *a, fc_tensor *b);
FC_API fc_status fc_mul_scalar_(fc_tensor *dst, double s);
/* value is converted with fc_cast_scalar's rules. */
FC_API fc_status fc_fill_(fc_tensor *dst, double value);

/* ---- comparison and logic (result dtype bool, never recorded by autograd) ------------
 * Comparisons need one dtype on both sides: any scalar dtype but the f8
 * storage formats (FC_ERR_DTYPE otherwise, as for mixed dtypes); shapes
 * broadcast (FC_ERR_SHAPE_MISMATCH otherwise); a NULL input is
 * FC_ERR_NULL_ARG. IEEE semantics: every comparison with NaN is false
 * except ne, and -0.0 == 0.0. */
FC_API fc_tensor *fc_eq(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_ne(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_lt(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_le(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_gt(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_ge(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
/* Unlike the arithmetic scalar forms these compare exact values: s is not
 * rounded to a's dtype (i32 2 < 2.5 is true; an i64 above 2^53 compares
 * exactly; a NaN s gives all false). */
FC_API fc_tensor *fc_eq_scalar(fc_ctx *ctx, fc_tensor *a, double s);
FC_API fc_tensor *fc_lt_scalar(fc_ctx *ctx, fc_tensor *a, double s);
FC_API fc_tensor *fc_gt_scalar(fc_ctx *ctx, fc_tensor *a, double s);
/* Operands of any non-block dtype (they may differ), read with fc_is_truthy
 * (-0.0 false, NaN true); shapes broadcast. FC_ERR_DTYPE for a block
 * dtype, FC_ERR_SHAPE_MISMATCH, FC_ERR_NULL_ARG. */
FC_API fc_tensor *fc_logical_and(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_logical_or(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_logical_not(fc_ctx *ctx, fc_tensor *a);
/* cond ? a : b. cond of any non-block dtype (truthiness); a and b of one
 * scalar dtype (any, f8 and bool included: elements are copied bit-exactly),
 * which is the result's; all three broadcast ("where: shapes [2,3], [4] and
 * [3] do not broadcast": FC_ERR_SHAPE_MISMATCH). FC_ERR_DTYPE when a and b
 * differ in dtype or cond is block-quantized. Gradient: g to a where cond
 * holds, to b elsewhere, zero to cond. */
FC_API fc_tensor *fc_where(fc_ctx *ctx, fc_tensor *cond, fc_tensor *a, fc_tensor *b);
/* x (any scalar dtype) with value (converted to x's dtype) wherever mask
 * (any non-block dtype, truthiness) holds; mask must broadcast to x's shape
 * (FC_ERR_SHAPE_MISMATCH); FC_ERR_DTYPE for a block-quantized x or mask.
 * Gradient: g where the mask is false, 0 where it filled, zero to the
 * mask. */
FC_API fc_tensor *fc_masked_fill(fc_ctx *ctx, fc_tensor *x, fc_tensor *mask, double value);

/* ---- unary (float dtypes; neg/abs/sign/square also on signed integers) ------------
 * Same shape and dtype as x; f16/bf16/f32 compute in f32 and f64 in f64.
 * Integers wrap (neg and abs of INT_MIN give INT_MIN). Other dtypes are
 * FC_ERR_DTYPE (naming the op and the dtype); a NULL x is FC_ERR_NULL_ARG.
 * NaN propagates through every op. */
FC_API fc_tensor *fc_neg(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_abs(fc_ctx *ctx, fc_tensor *x); /* abs'(0) = 0 */
/* -1, 0 or 1 (a zero keeps its sign, NaN stays NaN); gradient 0. */
FC_API fc_tensor *fc_sign(fc_ctx *ctx, fc_tensor *x);
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
/* 1 / (1 + exp(-x)): exactly 0 and 1 in the saturated tails, never NaN. */
FC_API fc_tensor *fc_sigmoid(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_relu(fc_ctx *ctx, fc_tensor *x); /* relu(-0.0) = +0; relu'(0) = 0 */
/* x for x > 0, slope * x otherwise; the gradient at 0 is slope (PyTorch). */
FC_API fc_tensor *fc_leaky_relu(fc_ctx *ctx, fc_tensor *x, double slope);
/* GELU: exact erf form, or the tanh approximation when tanh_approx. */
FC_API fc_tensor *fc_gelu(fc_ctx *ctx, fc_tensor *x, bool tanh_approx);
FC_API fc_tensor *fc_silu(fc_ctx *ctx, fc_tensor *x);
/* SwiGLU, silu(a) * b elementwise in one op (a LLaMA MLP's gate): a and b
 * of the same shape and float dtype, f16 and bf16 computed in f32 and
 * rounded once (FC_ERR_SHAPE_MISMATCH / FC_ERR_DTYPE otherwise). Returns a new
 * contiguous tensor. Gradients: da = g * b * s * (1 + a * (1 - s)) with
 * s = sigmoid(a), db = g * silu(a); in a create_graph walk they are
 * built from recorded ops, so higher derivatives follow. */
FC_API fc_tensor *fc_swiglu(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
/* log(1 + exp(x)), computed stably (linear above x > 20 like PyTorch). */
FC_API fc_tensor *fc_softplus(fc_ctx *ctx, fc_tensor *x);
/* Clamp to [lo, hi]; pass -INFINITY / INFINITY for no bound. Gradient 1
 * where lo <= x <= hi, else 0. lo > hi or a NaN bound is FC_ERR_INVALID_ARG. */
FC_API fc_tensor *fc_clamp(fc_ctx *ctx, fc_tensor *x, double lo, double hi);

/* ---- reductions ---------------------------------------------------------------------
 * axes: naxes axes (negative allowed, no repeats), or naxes == 0 for all
 * axes (the result then has shape [1], or rank ones with keepdim). Errors:
 * FC_ERR_AXIS for an axis out of range, FC_ERR_INVALID_ARG for a repeated
 * axis or naxes < 0, FC_ERR_RANK for more axes than dims, FC_ERR_NULL_ARG
 * for NULL axes with naxes > 0, FC_ERR_DTYPE for a dtype the op does not
 * take (f8 and block dtypes everywhere but fc_all/fc_any: cast first).
 *
 * Accumulation is wide and deterministic: f16/bf16/f32 sum in f32 partials
 * of at most 512 elements added into a double (300 bf16 ones sum to 300),
 * f64 in f64, integers and bool in wrapping 64-bit integers; long
 * reductions are split into fixed chunks merged in order, so the bits never
 * depend on the thread count. Result dtypes: sum/prod/max/min give f32 for
 * f16, bf16 and f32, f64 for f64, i64 for integers and bool. NaN
 * propagates through every float reduction. */
/* Floats, integers, bool. Gradient: g broadcast back. */
FC_API fc_tensor *fc_sum(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim);
/* Float dtypes only (f32 or f64 result). Gradient: g / count. */
FC_API fc_tensor *fc_mean(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim);
/* Floats, integers (wrapping), bool. Gradient: g * prod / x when the
 * reduced set has no zero; with exactly one zero that element gets
 * g * (product of the others) and the rest 0; with two or more zeros 0. */
FC_API fc_tensor *fc_prod(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim);
/* max/min values (float result dtype per the reduction policy; integers and
 * bool give i64). The gradient goes to the first extremal element in
 * row-major order of the reduced elements (PyTorch's choice for
 * max(dim); unlike its amax, ties are not shared). */
FC_API fc_tensor *fc_max(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim);
FC_API fc_tensor *fc_min(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim);
/* Index (i64) of the first max/min along one axis; the first NaN when the
 * row has one (as PyTorch). Floats, integers, bool (FC_ERR_DTYPE for f8 and
 * blocks); FC_ERR_AXIS for an axis out of range. Not differentiable. */
FC_API fc_tensor *fc_argmax(fc_ctx *ctx, fc_tensor *x, int axis, bool keepdim);
FC_API fc_tensor *fc_argmin(fc_ctx *ctx, fc_tensor *x, int axis, bool keepdim);
/* Variance / standard deviation: sum((x - mean)^2) / max(0, n - correction)
 * (1 = unbiased, 0 = population; n <= correction gives inf or NaN like
 * PyTorch). Float dtypes only. The std gradient at std == 0 is NaN. */
FC_API fc_tensor *fc_var(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, int correction,
                         bool keepdim);
FC_API fc_tensor *fc_std(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, int correction,
                         bool keepdim);
/* log(sum(exp(x))) computed stably (max-shifted); -inf for all -inf, +inf
 * when an element is +inf. Float dtypes only. Gradient: g * exp(x - out). */
FC_API fc_tensor *fc_logsumexp(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim);
/* Truthiness reductions (fc_is_truthy: -0.0 false, NaN true), result bool;
 * every scalar dtype, the f8 floats included. */
FC_API fc_tensor *fc_all(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim);
FC_API fc_tensor *fc_any(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim);
/* Inclusive prefix sum along axis: f32 for f16/bf16/f32 (the running sum is
 * a double, each prefix rounded once), f64 for f64, i64 (wrapping) for
 * integers and bool; FC_ERR_AXIS for an axis out of range, FC_ERR_DTYPE for
 * f8 and block dtypes. Gradient: the reverse cumulative sum of g. */
FC_API fc_tensor *fc_cumsum(fc_ctx *ctx, fc_tensor *x, int axis);

/* ---- softmax, normalisation, losses ---------------------------------------------------
 * Float dtypes only; the result has the input's dtype (f16/bf16 compute in
 * f32). Backward rules are fused kernels. */
/* softmax / log_softmax along any axis (negative allowed; FC_ERR_AXIS when
 * out of range; FC_ERR_DTYPE for a non-float x). A row containing NaN, or
 * only -inf, gives NaN (as PyTorch). */
FC_API fc_tensor *fc_softmax(fc_ctx *ctx, fc_tensor *x, int axis);
FC_API fc_tensor *fc_log_softmax(fc_ctx *ctx, fc_tensor *x, int axis);
/* Normalises over the last axis: (x - mean) / sqrt(var + eps) * weight +
 * bias with the biased variance. weight and bias are [D], D the last axis's
 * length, of x's dtype (NULL allowed: no scale / no shift); FC_ERR_SHAPE_MISMATCH
 * / FC_ERR_DTYPE otherwise; eps must be finite and >= 0 (FC_ERR_INVALID_ARG). */
FC_API fc_tensor *fc_layer_norm(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, fc_tensor *bias,
                                double eps);
/* x / sqrt(mean(x^2) + eps) * weight over the last axis; weight as above. */
FC_API fc_tensor *fc_rms_norm(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, double eps);
/* Batch normalisation of x [N, C, ...] (rank >= 2; FC_ERR_RANK otherwise)
 * per channel: (x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c].
 * weight and bias are [C] of x's dtype (NULL allowed: no scale / no shift).
 * training true: mean and var are the batch's, over the N and spatial axes
 * (the biased variance), and when running_mean and running_var are given
 * they are UPDATED IN PLACE after the output is made (a documented
 * mutation, which bumps their generation, so a node that saved them sees
 * the change):
 *   running_mean = (1 - momentum) * running_mean + momentum * mean
 *   running_var  = (1 - momentum) * running_var  + momentum * var * M / (M - 1)
 * with M = N * spatial size (the unbiased variance, as PyTorch); M must be
 * > 1 (FC_ERR_INVALID_SHAPE) and momentum in [0, 1] (FC_ERR_INVALID_ARG).
 * training false (eval): normalises with running_mean and running_var,
 * which are required (FC_ERR_INVALID_ARG when NULL) and only read. The
 * running statistics are [C] of x's dtype, or f32 for an f16/bf16 x (else
 * FC_ERR_DTYPE / FC_ERR_SHAPE_MISMATCH), given both or neither
 * (FC_ERR_INVALID_ARG), must not require grad (FC_ERR_INVALID_ARG) and,
 * when training updates them, be writable (FC_ERR_READ_ONLY) and not a
 * broadcast view (FC_ERR_UNSUPPORTED_VIEW); any layout. eps finite and
 * >= 0 (FC_ERR_INVALID_ARG). Gradients flow to x, weight and bias in both
 * modes (eval: the per-channel affine map gy * weight / sqrt(running_var +
 * eps), using the statistics of the forward); the running statistics get
 * none. Statistics accumulate in double, in an order that does not depend
 * on the thread count. A failed call changes nothing. */
FC_API fc_tensor *fc_batch_norm(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, fc_tensor *bias,
                                fc_tensor *running_mean, fc_tensor *running_var, bool training,
                                double momentum, double eps);
/* Group normalisation of x [N, C, ...] (rank >= 2; FC_ERR_RANK): the C
 * channels form num_groups groups of C / num_groups consecutive channels;
 * each (sample, group) is normalised with its own mean and biased variance
 * over the group's channels and spatial axes, then weight[c] and bias[c]
 * ([C], x's dtype, NULL allowed; FC_ERR_SHAPE_MISMATCH / FC_ERR_DTYPE)
 * apply per channel. num_groups must be >= 1 and divide C
 * (FC_ERR_INVALID_ARG); eps as above. Gradients for x, weight, bias. */
FC_API fc_tensor *fc_group_norm(fc_ctx *ctx, fc_tensor *x, int64_t num_groups, fc_tensor *weight,
                                fc_tensor *bias, double eps);

/* How a loss reduces its per-element values. */
typedef enum fc_reduction {
    FC_REDUCE_MEAN,
    FC_REDUCE_SUM,
    FC_REDUCE_NONE,
    FC_REDUCE_COUNT
} fc_reduction;
/* Options of fc_cross_entropy; zero-initialised is a mean with no ignored target. */
typedef struct fc_ce_opts {
    fc_reduction reduction; /* default (0) mean over non-ignored targets */
    int64_t ignore_index;   /* targets equal to it contribute nothing; set use_ignore */
    bool use_ignore;
    double label_smoothing; /* 0 .. 1 */
} fc_ce_opts;
/* Fused log-softmax + NLL. logits [N, C] (or [C] with a one-element
 * target), targets of any integer dtype, [N], with values in [0, C)
 * (FC_ERR_INDEX names the first bad target and its position; FC_ERR_RANK
 * for logits of rank > 2, FC_ERR_SHAPE_MISMATCH for a targets shape that
 * does not match, FC_ERR_INVALID_ARG for an unknown reduction or a
 * smoothing outside [0, 1]). With smoothing eps each row's loss is
 * (1 - eps) * nll + eps * mean over classes of -log p (PyTorch's).
 * Ignored rows contribute 0 and leave the mean's denominator; a mean over
 * no row is NaN. Result: [1] for mean/sum, [N] for none, in the logits'
 * dtype. opts NULL: mean, no ignore, no smoothing. */
FC_API fc_tensor *fc_cross_entropy(fc_ctx *ctx, fc_tensor *logits, fc_tensor *targets,
                                   const fc_ce_opts *opts);
/* (a - b)^2 over the broadcast shape, then mean/sum ([1]) or none; one
 * float dtype for both (FC_ERR_DTYPE), shapes must broadcast
 * (FC_ERR_SHAPE_MISMATCH). The result has the inputs' dtype. */
FC_API fc_tensor *fc_mse_loss(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, fc_reduction reduction);

/* ---- layout (views share storage; no copy unless stated) -------------------------------- *
 * Every tensor has 1 to FC_MAX_RANK axes (there are no rank-0 tensors) and
 * every dim is >= 1. Axes may be negative (counting from the end); an axis
 * out of range is FC_ERR_AXIS. A block-quantized tensor only gets the
 * identity view: any view that changes its shape or start is
 * FC_ERR_UNSUPPORTED_VIEW (convert with fc_to(..., FC_F32) first). Each op
 * borrows x and returns a new reference, or NULL with the error recorded;
 * the gradient is routed back to x's elements. */
/* A view when x is contiguous, else a contiguous copy. One dim may be -1
 * (inferred). FC_ERR_NULL_ARG for a NULL shape, FC_ERR_RANK for rank outside
 * 1..FC_MAX_RANK, FC_ERR_INVALID_SHAPE for another dim < 1 or an element
 * count that differs from x's. */
FC_API fc_tensor *fc_reshape(fc_ctx *ctx, fc_tensor *x, const int64_t *shape, int rank);
/* Always a view: as fc_reshape, plus FC_ERR_UNSUPPORTED_VIEW when x is not
 * contiguous. */
FC_API fc_tensor *fc_view(fc_ctx *ctx, fc_tensor *x, const int64_t *shape, int rank);
/* View with axes reordered: result axis i is x's axis perm[i]. perm holds
 * rank(x) axes, each once. FC_ERR_NULL_ARG for a NULL perm, FC_ERR_AXIS for
 * an axis out of range, FC_ERR_INVALID_ARG for a repeated axis. */
FC_API fc_tensor *fc_permute(fc_ctx *ctx, fc_tensor *x, const int *perm);
/* View with axes axis0 and axis1 swapped (equal axes: the identity view).
 * FC_ERR_AXIS for an axis out of range. */
FC_API fc_tensor *fc_transpose(fc_ctx *ctx, fc_tensor *x, int axis0, int axis1);
/* View of length elements of axis from start. FC_ERR_EMPTY_SELECTION for
 * length 0, FC_ERR_INVALID_ARG for length < 0, FC_ERR_INDEX when start is
 * not in [0, dim) or start + length > dim. */
FC_API fc_tensor *fc_narrow(fc_ctx *ctx, fc_tensor *x, int axis, int64_t start, int64_t length);
/* Python-style start:stop:step view (negative start/stop count from the end;
 * clamped like Python). FC_ERR_INVALID_ARG for step < 1, an empty result is
 * FC_ERR_EMPTY_SELECTION. */
FC_API fc_tensor *fc_slice(fc_ctx *ctx, fc_tensor *x, int axis, int64_t start, int64_t stop,
                           int64_t step);
/* Broadcast view to shape, aligned right: new leading axes and size-1 axes
 * that grow get stride 0; -1 keeps an existing dim. FC_ERR_NULL_ARG for a
 * NULL shape; FC_ERR_RANK for rank outside 1..FC_MAX_RANK or below x's;
 * FC_ERR_INVALID_SHAPE for a dim < 1 (or -1 on a new axis);
 * FC_ERR_SHAPE_MISMATCH when an axis of size > 1 would change;
 * FC_ERR_OVERFLOW when the element count does not fit. */
FC_API fc_tensor *fc_expand(fc_ctx *ctx, fc_tensor *x, const int64_t *shape, int rank);
/* View without axis, which must have size 1: FC_ERR_INVALID_SHAPE when its
 * size is not 1, FC_ERR_RANK when x has only that one axis (a tensor keeps
 * at least one). */
FC_API fc_tensor *fc_squeeze(fc_ctx *ctx, fc_tensor *x, int axis);
/* View with a new size-1 axis at position axis, in [-(rank + 1), rank].
 * FC_ERR_RANK when x already has FC_MAX_RANK axes. */
FC_API fc_tensor *fc_unsqueeze(fc_ctx *ctx, fc_tensor *x, int axis);
/* Joins n >= 1 tensors along an existing axis (of xs[0]'s rank) into a new
 * contiguous tensor (a copy; block dtypes too). Borrows every xs[i].
 * FC_ERR_NULL_ARG for a NULL xs or entry, FC_ERR_INVALID_ARG for n < 1,
 * FC_ERR_AXIS, and when input k differs from input 0: FC_ERR_DTYPE (dtype),
 * FC_ERR_RANK (rank) or FC_ERR_SHAPE_MISMATCH (a dim off axis);
 * FC_ERR_OVERFLOW when the joined axis grows too long. */
FC_API fc_tensor *fc_concat(fc_ctx *ctx, fc_tensor *const *xs, int n, int axis);
/* Joins n >= 1 tensors of one dtype and one shape along a new axis of size
 * n at position axis, in [-(rank + 1), rank] (a copy). Errors as
 * fc_concat, with any dim that differs FC_ERR_SHAPE_MISMATCH; also
 * FC_ERR_RANK when the inputs already have FC_MAX_RANK axes, and
 * FC_ERR_UNSUPPORTED_VIEW for a new last axis on block-quantized inputs. */
FC_API fc_tensor *fc_stack(fc_ctx *ctx, fc_tensor *const *xs, int n, int axis);
/* Views: out[i] gets sizes[i] elements of axis (sizes >= 1, summing to the
 * dim), each a new reference. Returns FC_OK; FC_ERR_NULL_ARG for a NULL
 * ctx, x, sizes or out; FC_ERR_AXIS; FC_ERR_INVALID_ARG for n < 1 or a size
 * < 1; FC_ERR_SHAPE_MISMATCH when the sizes do not sum to the dim;
 * FC_ERR_OOM. Errors are also recorded in ctx (when it is not NULL); on
 * error no out[] is set. */
FC_API fc_status fc_split(fc_ctx *ctx, fc_tensor *x, int axis, const int64_t *sizes, int n,
                          fc_tensor **out);
/* Constant padding into a new tensor: pads[2*i], pads[2*i+1] = before/after
 * for axis i (rank pairs, >= 0), value converted with fc_cast_scalar's
 * rules. FC_ERR_NULL_ARG for NULL pads, FC_ERR_DTYPE for block dtypes,
 * FC_ERR_INVALID_ARG for a negative pad, FC_ERR_OVERFLOW when an axis grows
 * too long. */
FC_API fc_tensor *fc_pad(fc_ctx *ctx, fc_tensor *x, const int64_t *pads, double value);

/* ---- indexing ------------------------------------------------------------------------------ */
/* Indexing. An index tensor has an integer dtype (u8, u16, i8, i16, i32,
 * i64; FC_ERR_DTYPE otherwise) and values in [0, dim) of the axis it
 * indexes: FC_ERR_INDEX names the first bad value, its position and the
 * bound (negative indices are not allowed). An axis out of range is
 * FC_ERR_AXIS; a NULL input FC_ERR_NULL_ARG. Gradients flow to x (and to
 * src for scatter_add), never to an index. */
/* Rows of x along axis picked by an index of any rank: the result replaces
 * that axis by the index's shape (FC_ERR_RANK when that passes
 * FC_MAX_RANK). Block-quantized x is dequantized row by row to f32 (it must
 * be contiguous: FC_ERR_UNSUPPORTED_VIEW). */
FC_API fc_tensor *fc_index_select(fc_ctx *ctx, fc_tensor *x, int axis, fc_tensor *index);
/* table [V, D], ids any shape -> [..., D] (index_select on axis 0);
 * FC_ERR_RANK for a table that is not rank 2. */
FC_API fc_tensor *fc_embedding(fc_ctx *ctx, fc_tensor *table, fc_tensor *ids);
/* out[i][j] = x[i][index[i][j]] along axis. index has x's rank
 * (FC_ERR_RANK) and no dim off the axis larger than x's
 * (FC_ERR_SHAPE_MISMATCH); the result has the index's shape.
 * FC_ERR_DTYPE for block-quantized x. */
FC_API fc_tensor *fc_gather(fc_ctx *ctx, fc_tensor *x, int axis, fc_tensor *index);
/* x with src added at index along axis (a copy of x, not in place): the
 * index fits x and src as for fc_gather; x and src share one float or
 * integer dtype (FC_ERR_DTYPE). Repeated indices add up. */
FC_API fc_tensor *fc_scatter_add(fc_ctx *ctx, fc_tensor *x, int axis, fc_tensor *index,
                                 fc_tensor *src);
/* index's shape plus a last axis of num_classes (>= 1, FC_ERR_INVALID_ARG;
 * values in [0, num_classes), FC_ERR_INDEX), ones and zeros in dtype (any
 * scalar dtype, FC_ERR_DTYPE otherwise); FC_ERR_RANK when index already has
 * FC_MAX_RANK axes. Not differentiable. */
FC_API fc_tensor *fc_one_hot(fc_ctx *ctx, fc_tensor *index, int64_t num_classes, fc_dtype dtype);
/* ---- sorting ------------------------------------------------------------------------------- */
/* Sorting along one axis (negative counts from the end; FC_ERR_AXIS out of
 * range) of a tensor of any float, f8, integer or bool dtype (FC_ERR_DTYPE
 * for block-quantized x; FC_ERR_NULL_ARG for a NULL x; a NULL ctx returns
 * NULL and records nothing). The sort is stable
 * (equal elements keep their order along the axis, ascending and
 * descending alike) and NaN sorts as larger than every number, as
 * PyTorch's sort(stable=True): NaNs come last ascending, first descending.
 * The values have x's dtype, bit for bit; the indices are i64 positions
 * along the axis, both contiguous. Each op borrows x and returns a new
 * reference; indices_out (NULL allowed: the indices are then dropped) is
 * set to NULL first and receives a new reference to the indices only on
 * success. Gradient (values only, float x):
 * each value's gradient goes back to the position it came from (a recorded
 * scatter_add, so differentiable to any order); the indices never carry
 * one. */
/* x sorted along axis (ascending unless descending). */
FC_API fc_tensor *fc_sort(fc_ctx *ctx, fc_tensor *x, int axis, bool descending,
                          fc_tensor **indices_out);
/* The indices fc_sort would return (i64). Not differentiable. */
FC_API fc_tensor *fc_argsort(fc_ctx *ctx, fc_tensor *x, int axis, bool descending);
/* The k largest (smallest unless largest) elements along axis: the first k
 * of the stable descending (ascending) sort, so ties go to the earlier
 * position. sorted: in that order; otherwise the same k elements in the
 * order of their positions along the axis. 1 <= k <= the axis dim
 * (FC_ERR_INVALID_ARG otherwise); the results have the axis dim k. */
FC_API fc_tensor *fc_topk(fc_ctx *ctx, fc_tensor *x, int64_t k, int axis, bool largest, bool sorted,
                          fc_tensor **indices_out);

/* Upper/lower triangle of the last two axes (diagonal offset k; any k),
 * zeros elsewhere. x needs at least two axes (FC_ERR_RANK) and a scalar
 * dtype (FC_ERR_DTYPE for blocks). Gradient: g masked the same way. */
FC_API fc_tensor *fc_triu(fc_ctx *ctx, fc_tensor *x, int64_t k);
FC_API fc_tensor *fc_tril(fc_ctx *ctx, fc_tensor *x, int64_t k);

/* ---- random ops (src/ops/random.c) ----------------------------------------------------
 * They draw from the context RNG (fc_ctx_set_seed). */
/* Zeroes each element with probability p and scales the rest by 1/(1-p)
 * (identity when !training or p == 0), from the context RNG: the mask
 * depends on the seed, the stream position and the shape, never on the
 * thread count. Float
 * dtypes only (FC_ERR_DTYPE); p outside [0, 1) is FC_ERR_INVALID_ARG.
 * Gradient: g through the same mask and scale. */
FC_API fc_tensor *fc_dropout(fc_ctx *ctx, fc_tensor *x, double p, bool training);

/* ---- Einstein summation (src/ops/einsum.c) -------------------------------------------- */
/* PyTorch's einsum over n operands: equation holds one subscript term per
 * operand, comma-separated, then optionally "->" and the output's term.
 * A term is letters (a-z, A-Z, each one axis) and at most one "..." (the
 * axes no letter names; the operands' ellipsis dims broadcast, aligned
 * right); spaces are ignored. A letter repeated in one operand takes the
 * diagonal; letters not in the output are summed; sizes of one label must
 * match or be 1 (broadcast). Without "->" the output is the ellipsis dims
 * then every letter that appears once, upper case before lower case, each
 * alphabetically. The operands are contracted pairwise, left to right. The
 * result is lowered to recorded ops (permute, reshape, slice, expand, sum,
 * matmul), which give the gradient to every order; a result with no axes
 * has shape [1] (there are no rank-0 tensors). Borrows equation and every
 * xs[i]; returns a new tensor (or view), or NULL with the error recorded:
 * FC_ERR_NULL_ARG for a NULL equation, xs or entry; FC_ERR_CONTEXT;
 * FC_ERR_INVALID_ARG for n outside 1..64, a term count that differs from
 * n, a character that is not a subscript, a second "...", an output letter
 * repeated or in no operand (messages name the string and the position);
 * FC_ERR_DTYPE unless all operands share one float dtype; FC_ERR_RANK when
 * an operand's rank differs from its term's letters (without "...") or the
 * output or an intermediate product would pass FC_MAX_RANK axes;
 * FC_ERR_SHAPE_MISMATCH when a label's sizes disagree (naming the label,
 * the operand and both sizes). */
FC_API fc_tensor *fc_einsum(fc_ctx *ctx, const char *equation, fc_tensor *const *xs, int n);

/* ---- resampling (src/ops/interpolate.c) ------------------------------------------------ */
/* How fc_interpolate computes an output element from its source. */
typedef enum fc_interp_mode {
    FC_INTERP_NEAREST = 0, /* PyTorch's "nearest": source floor(i * in / out) */
    FC_INTERP_LINEAR = 1,  /* "linear" for [N, C, W], "bilinear" for [N, C, H, W] */
    FC_INTERP_MODE_COUNT
} fc_interp_mode;

/* Zero means default: mode nearest; exactly one of size and scale is set.
 * For [N, C, H, W] size and scale are (H, W); for [N, C, W] only entry 0
 * is used and entry 1 must be 0. */
typedef struct fc_interpolate_opts {
    fc_interp_mode mode;
    int64_t size[2];    /* the output's spatial sizes, each in [1, 2^31 - 1] */
    double scale[2];    /* scale factors: out = floor(in * scale), each > 0 */
    bool align_corners; /* linear only: the corner samples line up */
} fc_interpolate_opts;

/* torch.nn.functional.interpolate of x, [N, C, W] or [N, C, H, W], in
 * mode nearest or linear (bilinear in 2-d) with align_corners true or
 * false. With a scale factor the source coordinates use 1 / scale, not the
 * size ratio, as PyTorch does when recompute_scale_factor is not set
 * (align_corners uses (in - 1) / (out - 1) either way). Nearest takes
 * source index min(floor(i * s), in - 1) with s computed in float, as
 * PyTorch. Float dtypes (f16 and bf16 computed in f32); the result is a
 * new contiguous tensor of x's dtype. Gradient: the transpose of the
 * resampling (a scatter-add of the weights), itself recorded under
 * create_graph, so every order is available (higher ones are zero).
 * Borrows x and opts; returns a new reference, or NULL with the error
 * recorded: FC_ERR_NULL_ARG (x, opts), FC_ERR_CONTEXT, FC_ERR_RANK (rank
 * not 3 or 4), FC_ERR_DTYPE (not a float dtype), FC_ERR_INVALID_ARG (mode
 * out of range, align_corners with nearest, both or neither of size and
 * scale, a size outside [1, 2^31 - 1], a scale not finite and > 0, entry
 * 1 set for 3-d input), FC_ERR_INVALID_SHAPE (a scale that leaves an
 * axis empty), FC_ERR_OVERFLOW (an output too large). */
FC_API fc_tensor *fc_interpolate(fc_ctx *ctx, fc_tensor *x, const fc_interpolate_opts *opts);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_OPS_H */
