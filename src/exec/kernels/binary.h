/* SPDX-License-Identifier: MIT */
/* exec/kernels/binary.h - the broadcasting binary arithmetic kernels
 * (binary.c) behind fc_add .. fc_minimum, their scalar and in-place forms
 * (src/ops/binary.c), and the elementwise kernels the backward rules of
 * mul, pow and maximum/minimum read. Nothing here validates what the ops
 * validate or records on the tape.
 *
 *   a [..A], b [..B] -> out [broadcast(A, B)], out[i] = a[i] (op) b[i]
 *
 * Dtypes: a, b and out share one dtype. f32 and f64 compute in their own
 * type; f16 and bf16 widen to f32 per chunk and round once on store;
 * integers wrap (they compute in an unsigned type of at least int's width).
 * Integer division truncates toward zero and INT_MIN / -1 wraps to
 * INT_MIN; a zero integer divisor is the caller's to refuse first
 * (fc__binary_has_zero). */
#ifndef FUCINA_EXEC_KERNELS_BINARY_H
#define FUCINA_EXEC_KERNELS_BINARY_H

#include "exec/tensor.h"

typedef enum fc__binary_kind {
    FC__BIN_ADD,
    FC__BIN_SUB,
    FC__BIN_MUL,
    FC__BIN_DIV,
    FC__BIN_POW, /* float dtypes only */
    FC__BIN_MAX, /* a float NaN in either operand propagates */
    FC__BIN_MIN
} fc__binary_kind;

/* out = a (k) b over out's shape, which a and b broadcast to; one dtype for
 * all three, a float dtype for pow, an f16/bf16/f32/f64 or integer dtype
 * otherwise (bool, f8 and block dtypes are refused before this). out must
 * not have stride-0 axes of size > 1, and may be a itself (the in-place
 * ops), never a partial overlap. A large contiguous f32 out is written
 * with streaming stores (rowwise.h). Cannot fail. */
void fc__binary_run(fc_ctx *ctx, fc__binary_kind k, fc_raw *out, const fc_raw *a, const fc_raw *b);

/* True when the integer operand t holds a zero among its own elements (the
 * integer divide-by-zero check, run before anything is computed). */
bool fc__binary_has_zero(fc_ctx *ctx, const fc_raw *t);

/* ---- kernels the backward rules call ----------------------------------------------------
 * g is the output gradient (f32 or f64, contiguous); the other operands
 * share its dtype (rules convert 16-bit saved values first). Each returns
 * a new scope-registered tensor of the broadcast shape of its operands, or
 * NULL with the error recorded. */

/* g * v where v is a raw view in g's dtype (a saved value, read without a
 * handle of its own): what fc_mul(g, v) computes, the same bits and the
 * same "mul" messages (check_finite included), written with plain stores. */
fc_tensor *fc__binary_mul_raw(fc_ctx *ctx, fc_tensor *g, const fc_raw *v);
/* d pow(a, b) / da * g = g * b * a^(b-1), 0 where b == 0 (PyTorch). */
fc_tensor *fc__binary_pow_grad_a(fc_ctx *ctx, fc_tensor *g, fc_tensor *a, fc_tensor *b);
/* d pow(a, b) / db * g = g * a^b * log(a), 0 where a == 0 and b >= 0. */
fc_tensor *fc__binary_pow_grad_b(fc_ctx *ctx, fc_tensor *g, fc_tensor *a, fc_tensor *b);
/* The share of the gradient of maximum(a, b) (minimum when is_min) that
 * goes to a: 1 where a wins or is NaN, 0.5 on ties, 0 where b wins; a and
 * b are f32 or f64, in one dtype. */
fc_tensor *fc__binary_minmax_weight(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, bool is_min);

#endif /* FUCINA_EXEC_KERNELS_BINARY_H */
