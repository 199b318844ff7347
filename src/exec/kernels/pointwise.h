/* SPDX-License-Identifier: MIT */
/* exec/kernels/pointwise.h - the shared pointwise engine (pointwise.c):
 * what the elementwise kernel files (binary.c, compare.c, unary.c,
 * unary_math.c) share with each other and with the ops over them in
 * src/ops (which validate through the fc__pw_ checks). Records nothing.
 *
 * Every elementwise kernel is an fc__inner_fn: it gets one run of n
 * elements per operand (operand 0 is the output) with byte strides, either
 * from the flat fast path of fc__pw_run (contiguous operands, or a single
 * element broadcast with stride 0) or from the strided iterator. Native
 * types (f32, f64, the integers) are computed in place in their own type;
 * f16 and bf16 are widened to f32 in stack chunks of FC__PW_CHUNK elements,
 * computed, and narrowed once on store (seed 000 section 8.3). */
#ifndef FUCINA_EXEC_KERNELS_POINTWISE_H
#define FUCINA_EXEC_KERNELS_POINTWISE_H

#include "exec/tensor.h"
#include "exec/iter.h"

/* Marks a loop whose iterations are independent: each reads and writes
 * index i only, which still holds when the output is exactly an input (the
 * in-place ops). Lets the compiler vectorize without runtime alias checks
 * and also at -O2. */
#ifdef FUCINA_HAVE_OPENMP
#define FC__SIMD _Pragma("omp simd")
#else
#define FC__SIMD
#endif
#ifdef __clang__
/* clang reports every marked loop it leaves scalar (integer division,
 * sanitizer builds); the mark is a permission, not a requirement. */
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

/* Elements per widening chunk (a few KB of stack per operand). */
#define FC__PW_CHUNK 256

/* The body of a two-input elementwise kernel: o[i] = EXPR for n elements,
 * where EXPR reads the input elements through the names passed as x and y
 * (declared here with type TI). Strides are in elements. The three layouts
 * a hot run has (all contiguous, either input a broadcast scalar) get their
 * own vectorizable loop; anything else takes the plain strided loop. */
#define FC__PW_LOOP2(TI, o, a, b, so, sa, sb, n, x, y, EXPR)                                       \
    do {                                                                                           \
        if ((so) == 1 && (sa) == 1 && (sb) == 1) {                                                 \
            FC__SIMD for (int64_t i_ = 0; i_ < (n); i_++) {                                        \
                TI x = (a)[i_], y = (b)[i_];                                                       \
                (o)[i_] = (EXPR);                                                                  \
            }                                                                                      \
        } else if ((so) == 1 && (sa) == 1 && (sb) == 0) {                                          \
            const TI y = (b)[0];                                                                   \
            FC__SIMD for (int64_t i_ = 0; i_ < (n); i_++) {                                        \
                TI x = (a)[i_];                                                                    \
                (o)[i_] = (EXPR);                                                                  \
            }                                                                                      \
        } else if ((so) == 1 && (sa) == 0 && (sb) == 1) {                                          \
            const TI x = (a)[0];                                                                   \
            FC__SIMD for (int64_t i_ = 0; i_ < (n); i_++) {                                        \
                TI y = (b)[i_];                                                                    \
                (o)[i_] = (EXPR);                                                                  \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t i_ = 0; i_ < (n); i_++) {                                                 \
                TI x = (a)[i_ * (sa)], y = (b)[i_ * (sb)];                                         \
                (o)[i_ * (so)] = (EXPR);                                                           \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* ---- validation: each records the error (message names op, dtypes,
 * shapes) and returns its status --------------------------------------------- */

/* FC_ERR_DTYPE "add: dtypes f32 and f16 differ; cast one with fc_to". */
fc_status fc__pw_same_dtype(fc_ctx *ctx, const char *op, const fc_tensor *a, const fc_tensor *b);
/* FC_ERR_DTYPE unless dt is a float dtype (f16, bf16, f32, f64) or, with
 * ints_ok, an integer dtype. */
fc_status fc__pw_math_dtype(fc_ctx *ctx, const char *op, fc_dtype dt, bool ints_ok);
/* FC_ERR_DTYPE for block-quantized dtypes (and f8 unless f8_ok). */
fc_status fc__pw_scalar_dtype(fc_ctx *ctx, const char *op, fc_dtype dt, bool f8_ok);
/* The NumPy broadcast of a and b into shape/rank; FC_ERR_SHAPE_MISMATCH
 * "add: shapes [2,3] and [4] do not broadcast". */
fc_status fc__pw_broadcast(fc_ctx *ctx, const char *op, const fc_tensor *a, const fc_tensor *b,
                           int64_t *shape, int *rank);
/* The same for raw operands (a rule reading a saved value in place). */
fc_status fc__pw_broadcast_raw(fc_ctx *ctx, const char *op, const fc_raw *a, const fc_raw *b,
                               int64_t *shape, int *rank);
/* The same over n tensors ("where: shapes [2,3], [4] and [3] do not
 * broadcast"). */
fc_status fc__pw_broadcast_n(fc_ctx *ctx, const char *op, int n, fc_tensor *const *t,
                             int64_t *shape, int *rank);

/* ---- running ------------------------------------------------------------------- */

/* Runs fn over ops[0]'s shape (every other operand broadcasts to it; the
 * caller checked). When ops[0] is contiguous and every other operand is
 * contiguous with the same element count or is a single element, the whole
 * range is one flat run split across the team, with no iterator set-up;
 * otherwise the strided iterator walks it. ops[0] must not have stride-0
 * axes of size > 1 (threads would race on them). */
void fc__pw_run(fc_ctx *ctx, int nops, fc_raw *const *ops, fc__inner_fn fn, void *arg);

/* ---- widening helpers for chunked loops (n <= FC__PW_CHUNK is not required) -- */

/* n elements of f16, bf16 or f32 at byte stride s, into f32 (exact). */
void fc__pw_load_f32(fc_dtype dt, const char *p, int64_t s, int64_t n, float *out);
/* n f32 values into f16, bf16 (round to nearest even) or f32 at stride s. */
void fc__pw_store_f32(fc_dtype dt, char *p, int64_t s, int64_t n, const float *in);
/* n elements of any scalar dtype widened to f64 (exact but for i64 beyond
 * 2^53, which rounds). */
void fc__pw_load_f64(fc_dtype dt, const char *p, int64_t s, int64_t n, double *out);
/* n elements of an integer or bool dtype widened to i64 (exact). */
void fc__pw_load_i64(fc_dtype dt, const char *p, int64_t s, int64_t n, int64_t *out);
/* Truthiness (value != 0; -0.0 false, NaN true) of n elements of any
 * non-block dtype, as 0/1. */
void fc__pw_truthy(fc_dtype dt, const char *p, int64_t s, int64_t n, uint8_t *out);

#endif /* FUCINA_EXEC_KERNELS_POINTWISE_H */
