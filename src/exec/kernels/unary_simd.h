/* SPDX-License-Identifier: MIT */
/* exec/kernels/unary_simd.h - the vectorized f32 transcendental kernels of
 * the unary family (unary_simd.c): exp, tanh, sigmoid, silu, gelu (tanh
 * form) and softplus forward, and the gradients of silu, gelu (tanh form)
 * and softplus. fc__unary_f32 / fc__unary_grad_f32 (unary_math.c) try them
 * first and keep libm for every other kind; f64 never comes here.
 *
 * Each kernel exists once per instruction set: portable C (no libm calls;
 * the compiler vectorizes it for the baseline target), AVX2 + FMA and
 * AVX-512F. They agree within the accuracy contract stated in
 * unary_simd.c, not bit for bit; each is deterministic and gives the same
 * bits for an element wherever it sits in the array. */
#ifndef FUCINA_EXEC_KERNELS_UNARY_SIMD_H
#define FUCINA_EXEC_KERNELS_UNARY_SIMD_H

#include "core/cpu.h"
#include "exec/kernels/pointwise.h"
#include "exec/kernels/unary.h"

/* y = f(x) over n contiguous floats with isa's kernel (an unsupported isa
 * runs the portable one); y may be x itself, not a partial overlap.
 * Returns false, touching nothing, when kind k has no vectorized forward. */
bool fc__usimd_forward(fc__isa isa, fc__unary_kind k, const float *x, float *y, int64_t n);
/* gin = g * f'(v) (v is the kind's saved input, see fc__unary_saves_of),
 * likewise; gin may be g or v. False when k has no vectorized gradient. */
bool fc__usimd_grad(fc__isa isa, fc__unary_kind k, const float *g, const float *v, float *gin,
                    int64_t n);

#endif /* FUCINA_EXEC_KERNELS_UNARY_SIMD_H */
