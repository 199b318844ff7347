/* SPDX-License-Identifier: MIT */
/* exec/kernels/compare.h - the comparison, logic and selection kernels
 * (compare.c) behind fc_eq .. fc_ge, their scalar forms, fc_logical_*,
 * fc_where and fc_masked_fill (src/ops/compare.c validates and records).
 * Nothing here validates or records on the tape; every entry point runs
 * over an output the caller allocated with the broadcast shape and cannot
 * fail.
 *
 *   a [..A], b [..B] -> bool [broadcast(A, B)]
 *   cond [..C], a [..A], b [..B] -> where [broadcast(C, A, B)], a's dtype
 *   x [..X], mask [..M broadcasting to X] -> masked_fill [..X], x's dtype
 *
 * Comparisons follow IEEE: every comparison with NaN is false except ne;
 * f16/bf16 compare exactly through f32. Logic and conditions read any
 * non-block dtype by truthiness (value != 0; -0.0 false, NaN true).
 * Selections move elements by size, so every scalar dtype is selected
 * bit-exactly. */
#ifndef FUCINA_EXEC_KERNELS_COMPARE_H
#define FUCINA_EXEC_KERNELS_COMPARE_H

#include "exec/tensor.h"

typedef enum fc__compare_kind {
    FC__CMP_EQ,
    FC__CMP_NE,
    FC__CMP_LT,
    FC__CMP_LE,
    FC__CMP_GT,
    FC__CMP_GE
} fc__compare_kind;

/* out (bool) = a (k) b; a and b share one scalar dtype other than f8, and
 * broadcast to out's shape. */
void fc__compare_run(fc_ctx *ctx, fc__compare_kind k, fc_raw *out, const fc_raw *a,
                     const fc_raw *b);
/* out (bool, a's shape) = a (k) s for k EQ, LT or GT, comparing the exact
 * values: s is NOT rounded to a's dtype first (i32 2 < 2.5 is true; an
 * i64 beyond 2^53 still compares exactly). a: any scalar dtype but f8. */
void fc__compare_scalar_run(fc_ctx *ctx, fc__compare_kind k, fc_raw *out, const fc_raw *a,
                            double s);

typedef enum fc__logic_kind { FC__LOGIC_AND, FC__LOGIC_OR, FC__LOGIC_NOT } fc__logic_kind;

/* out (bool) = truthy(a) (k) truthy(b), or !truthy(a) for NOT (b NULL);
 * a and b: any scalar dtype (they may differ), broadcasting to out. */
void fc__compare_logic_run(fc_ctx *ctx, fc__logic_kind k, fc_raw *out, const fc_raw *a,
                           const fc_raw *b);

/* out = truthy(cond) ? a : b; cond any scalar dtype, a, b and out one
 * scalar dtype; all broadcast to out's shape. */
void fc__compare_where_run(fc_ctx *ctx, fc_raw *out, const fc_raw *cond, const fc_raw *a,
                           const fc_raw *b);
/* out = truthy(mask) ? value : x, value being one element of x's dtype (its
 * bytes at fill); out has x's shape, mask broadcasts to it. The attention-
 * mask layout (contiguous x, a contiguous one-byte mask matching x's
 * trailing axes) takes a flat path. */
void fc__compare_masked_fill_run(fc_ctx *ctx, fc_raw *out, const fc_raw *x, const fc_raw *mask,
                                 const unsigned char *fill);

#endif /* FUCINA_EXEC_KERNELS_COMPARE_H */
