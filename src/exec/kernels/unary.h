/* SPDX-License-Identifier: MIT */
/* exec/kernels/unary.h - the unary family's kernels: unary.c lays out and
 * dispatches (integer loops, f16/bf16 and strided chunks), unary_math.c
 * holds the formulas, forward and derivative side by side, and
 * unary_simd.c the vectorized f32 transcendentals. The ops over them
 * (fc_neg .. fc_clamp: validation, recording, the rule) are in
 * src/ops/unary.c. Nothing here validates or records on the tape.
 *
 *   x [..] -> y [..] = f(x), same shape and dtype
 *   g [..], v [..] -> gin [..] = g * f'(v), g's dtype (f32 or f64)
 *
 * Float dtypes compute in f32 (f64 for f64); neg, abs, sign and square
 * also take signed integers, with wrapping (abs and neg of INT_MIN give
 * INT_MIN). */
#ifndef FUCINA_EXEC_KERNELS_UNARY_H
#define FUCINA_EXEC_KERNELS_UNARY_H

#include "exec/tensor.h"

typedef enum fc__unary_kind {
    FC__UN_NEG,
    FC__UN_ABS,
    FC__UN_SIGN,
    FC__UN_SQUARE,
    FC__UN_SQRT,
    FC__UN_RSQRT,
    FC__UN_RECIPROCAL,
    FC__UN_EXP,
    FC__UN_LOG,
    FC__UN_LOG1P,
    FC__UN_EXPM1,
    FC__UN_SIN,
    FC__UN_COS,
    FC__UN_TANH,
    FC__UN_SIGMOID,
    FC__UN_RELU,
    FC__UN_LEAKY_RELU, /* p[0] = slope */
    FC__UN_GELU,
    FC__UN_GELU_TANH,
    FC__UN_SILU,
    FC__UN_SOFTPLUS,
    FC__UN_CLAMP, /* p[0] = lo, p[1] = hi */
    FC__UN_COUNT
} fc__unary_kind;

/* What a kind's derivative is written in terms of: its input, its output,
 * or nothing (neg: -1, sign: 0). The derivative kernels read exactly that
 * value as v, so it is what a forward saves for its backward. */
typedef enum fc__unary_saves { FC__SAVES_NONE, FC__SAVES_INPUT, FC__SAVES_OUTPUT } fc__unary_saves;
fc__unary_saves fc__unary_saves_of(fc__unary_kind k);

/* ---- whole tensors (unary.c) --------------------------------------------------------- */

/* y = f(x) with parameters p (see fc__unary_kind; NULL-safe for kinds
 * without any); x a float dtype, or a signed integer for neg, abs, sign,
 * square; y x's dtype and shape, any layout without stride-0 axes of size
 * > 1. Cannot fail. */
void fc__unary_run(fc_ctx *ctx, fc__unary_kind k, const double *p, fc_raw *y, const fc_raw *x);
/* gin = g * f'(v): g f32 or f64 (gin's dtype and shape), v the kind's
 * saved value in g's shape, any float dtype when g is f32, f64 when g is
 * f64 (any layout; for FC__SAVES_NONE kinds pass g itself). Cannot fail. */
void fc__unary_grad_run(fc_ctx *ctx, fc__unary_kind k, const double *p, fc_raw *gin,
                        const fc_raw *g, const fc_raw *v);

/* ---- contiguous arrays (unary_math.c) --------------------------------------------------- */

/* y = f(x) over n contiguous elements. */
void fc__unary_f32(fc__unary_kind k, const double *p, const float *x, float *y, int64_t n);
void fc__unary_f64(fc__unary_kind k, const double *p, const double *x, double *y, int64_t n);
/* gin = g * f'(v), v being the kind's saved value (input or output). */
void fc__unary_grad_f32(fc__unary_kind k, const double *p, const float *g, const float *v,
                        float *gin, int64_t n);
void fc__unary_grad_f64(fc__unary_kind k, const double *p, const double *g, const double *v,
                        double *gin, int64_t n);

#endif /* FUCINA_EXEC_KERNELS_UNARY_H */
