/* SPDX-License-Identifier: MIT */
/* unary_math.c - the formulas of the unary family, forward and derivative
 * side by side, in f32 (the compute dtype of f16, bf16 and f32) and f64.
 * unary.c lays out and dispatches (src/ops/unary.c validates); this file
 * only maps contiguous arrays.
 *
 *   x [n] -> y [n] = f(x);   g [n], v [n] -> gin [n] = g * f'(v)
 *
 * v is what fc__unary_saves_of names: the output where f' is cheapest in
 * terms of it (exp, sqrt, tanh, sigmoid, relu, ...), else the input.
 * Non-differentiable points follow PyTorch: abs'(0) = 0, relu'(0) = 0,
 * leaky_relu'(0) = slope, sign' = 0, clamp passes g where lo <= x <= hi,
 * softplus is linear above x > 20. Both float widths come from one
 * template; <tgmath.h> picks expf or exp by argument type, and every
 * constant is typed T so nothing is silently computed in double.
 *
 * f32 first offers the kind to the vectorized kernels of unary_simd.c
 * (exp, tanh, sigmoid, silu, gelu tanh form, softplus; the gradients of
 * silu, gelu tanh form and softplus), which replace per-element libm calls
 * the compiler cannot vectorize; the formulas below stay the f64 path (the
 * reference of the gradient checks) and f32's for every other kind. */
#include <tgmath.h>

#include "exec/kernels/pointwise.h"
#include "exec/kernels/unary.h"
#include "exec/kernels/unary_simd.h"

/* The fast paths the template takes before its switch: f32 asks
 * unary_simd.c, which declines the kinds it does not cover; f64 has none. */
#define FAST_FWD_F32(k, x, y, n) fc__usimd_forward(fc__isa_level(), k, x, y, n)
#define FAST_GRAD_F32(k, g, v, gin, n) fc__usimd_grad(fc__isa_level(), k, g, v, gin, n)
#define FAST_FWD_F64(k, x, y, n) false
#define FAST_GRAD_F64(k, g, v, gin, n) false

/* 1/sqrt(2), 1/sqrt(2 pi), sqrt(2/pi) and the cubic coefficient of the
 * tanh approximation of GELU (Hendrycks & Gimpel). */
#define C_RSQRT2 0.70710678118654752440
#define C_RSQRT2PI 0.39894228040143267794
#define C_SQRT2_PI 0.79788456080286535588
#define C_GELU_CUBIC 0.044715

#define UNARY_FORWARD(NAME, T, FAST)                                                               \
    void NAME(fc__unary_kind k, const double *p, const T *x, T *y, int64_t n) {                    \
        const T one = 1, half = (T)0.5, zero = 0;                                                  \
        if (FAST(k, x, y, n)) return;                                                              \
        switch (k) {                                                                               \
        case FC__UN_NEG:                                                                           \
            FC__SIMD for (int64_t i = 0; i < n; i++) y[i] = -x[i];                                 \
            break;                                                                                 \
        case FC__UN_ABS:                                                                           \
            FC__SIMD for (int64_t i = 0; i < n; i++) y[i] = fabs(x[i]);                            \
            break;                                                                                 \
        case FC__UN_SIGN: /* NaN stays NaN, a zero keeps its sign */                               \
            for (int64_t i = 0; i < n; i++)                                                        \
                y[i] = x[i] > 0 ? one : x[i] < 0 ? -one : x[i];                                    \
            break;                                                                                 \
        case FC__UN_SQUARE:                                                                        \
            FC__SIMD for (int64_t i = 0; i < n; i++) y[i] = x[i] * x[i];                           \
            break;                                                                                 \
        case FC__UN_SQRT:                                                                          \
            for (int64_t i = 0; i < n; i++)                                                        \
                y[i] = sqrt(x[i]);                                                                 \
            break;                                                                                 \
        case FC__UN_RSQRT:                                                                         \
            for (int64_t i = 0; i < n; i++)                                                        \
                y[i] = one / sqrt(x[i]);                                                           \
            break;                                                                                 \
        case FC__UN_RECIPROCAL:                                                                    \
            FC__SIMD for (int64_t i = 0; i < n; i++) y[i] = one / x[i];                            \
            break;                                                                                 \
        case FC__UN_EXP:                                                                           \
            for (int64_t i = 0; i < n; i++)                                                        \
                y[i] = exp(x[i]);                                                                  \
            break;                                                                                 \
        case FC__UN_LOG:                                                                           \
            for (int64_t i = 0; i < n; i++)                                                        \
                y[i] = log(x[i]);                                                                  \
            break;                                                                                 \
        case FC__UN_LOG1P:                                                                         \
            for (int64_t i = 0; i < n; i++)                                                        \
                y[i] = log1p(x[i]);                                                                \
            break;                                                                                 \
        case FC__UN_EXPM1:                                                                         \
            for (int64_t i = 0; i < n; i++)                                                        \
                y[i] = expm1(x[i]);                                                                \
            break;                                                                                 \
        case FC__UN_SIN:                                                                           \
            for (int64_t i = 0; i < n; i++)                                                        \
                y[i] = sin(x[i]);                                                                  \
            break;                                                                                 \
        case FC__UN_COS:                                                                           \
            for (int64_t i = 0; i < n; i++)                                                        \
                y[i] = cos(x[i]);                                                                  \
            break;                                                                                 \
        case FC__UN_TANH:                                                                          \
            for (int64_t i = 0; i < n; i++)                                                        \
                y[i] = tanh(x[i]);                                                                 \
            break;                                                                                 \
        case FC__UN_SIGMOID: /* exp(-x) overflows to inf for x << 0: 1/inf = 0, no NaN */          \
            for (int64_t i = 0; i < n; i++)                                                        \
                y[i] = one / (one + exp(-x[i]));                                                   \
            break;                                                                                 \
        case FC__UN_RELU: /* NaN passes through (NaN <= 0 is false) */                             \
            FC__SIMD for (int64_t i = 0; i < n; i++) y[i] = x[i] <= 0 ? zero : x[i];               \
            break;                                                                                 \
        case FC__UN_LEAKY_RELU: {                                                                  \
            const T slope = (T)p[0];                                                               \
            FC__SIMD for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : x[i] * slope;        \
            break;                                                                                 \
        }                                                                                          \
        case FC__UN_GELU:                                                                          \
            for (int64_t i = 0; i < n; i++)                                                        \
                y[i] = half * x[i] * (one + erf(x[i] * (T)C_RSQRT2));                              \
            break;                                                                                 \
        case FC__UN_GELU_TANH:                                                                     \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T u = (T)C_SQRT2_PI * (x[i] + (T)C_GELU_CUBIC * x[i] * x[i] * x[i]);               \
                y[i] = half * x[i] * (one + tanh(u));                                              \
            }                                                                                      \
            break;                                                                                 \
        case FC__UN_SILU:                                                                          \
            for (int64_t i = 0; i < n; i++)                                                        \
                y[i] = x[i] / (one + exp(-x[i]));                                                  \
            break;                                                                                 \
        case FC__UN_SOFTPLUS:                                                                      \
            for (int64_t i = 0; i < n; i++)                                                        \
                y[i] = x[i] > 20 ? x[i] : log1p(exp(x[i]));                                        \
            break;                                                                                 \
        case FC__UN_CLAMP: { /* NaN passes through: both comparisons are false */                  \
            const T lo = (T)p[0], hi = (T)p[1];                                                    \
            FC__SIMD for (int64_t i = 0; i < n; i++) y[i] = x[i] < lo   ? lo                       \
                                                            : x[i] > hi ? hi                       \
                                                                        : x[i];                    \
            break;                                                                                 \
        }                                                                                          \
        case FC__UN_COUNT:                                                                         \
            break;                                                                                 \
        }                                                                                          \
    }

#define UNARY_GRAD(NAME, T, FAST)                                                                  \
    void NAME(fc__unary_kind k, const double *p, const T *g, const T *v, T *gin, int64_t n) {      \
        const T one = 1, half = (T)0.5, zero = 0, two = 2;                                         \
        if (FAST(k, g, v, gin, n)) return;                                                         \
        switch (k) {                                                                               \
        case FC__UN_NEG:                                                                           \
            FC__SIMD for (int64_t i = 0; i < n; i++) gin[i] = -g[i];                               \
            break;                                                                                 \
        case FC__UN_ABS: /* v = x; abs'(0) = 0 */                                                  \
            FC__SIMD for (int64_t i = 0; i < n; i++) {                                             \
                T gi = g[i], vi = v[i];                                                            \
                gin[i] = vi > 0 ? gi : vi < 0 ? -gi : zero;                                        \
            }                                                                                      \
            break;                                                                                 \
        case FC__UN_SIGN:                                                                          \
            for (int64_t i = 0; i < n; i++)                                                        \
                gin[i] = zero;                                                                     \
            break;                                                                                 \
        case FC__UN_SQUARE: /* v = x */                                                            \
            FC__SIMD for (int64_t i = 0; i < n; i++) gin[i] = two * v[i] * g[i];                   \
            break;                                                                                 \
        case FC__UN_SQRT: /* v = y = sqrt(x): 1 / (2 y) */                                         \
            FC__SIMD for (int64_t i = 0; i < n; i++) gin[i] = g[i] / (two * v[i]);                 \
            break;                                                                                 \
        case FC__UN_RSQRT: /* v = y = x^-1/2: -y^3 / 2 */                                          \
            FC__SIMD for (int64_t i = 0; i < n; i++) gin[i] = -half * g[i] * v[i] * v[i] * v[i];   \
            break;                                                                                 \
        case FC__UN_RECIPROCAL: /* v = y = 1/x: -y^2 */                                            \
            FC__SIMD for (int64_t i = 0; i < n; i++) gin[i] = -g[i] * v[i] * v[i];                 \
            break;                                                                                 \
        case FC__UN_EXP: /* v = y */                                                               \
            FC__SIMD for (int64_t i = 0; i < n; i++) gin[i] = g[i] * v[i];                         \
            break;                                                                                 \
        case FC__UN_LOG: /* v = x */                                                               \
            FC__SIMD for (int64_t i = 0; i < n; i++) gin[i] = g[i] / v[i];                         \
            break;                                                                                 \
        case FC__UN_LOG1P: /* v = x */                                                             \
            FC__SIMD for (int64_t i = 0; i < n; i++) gin[i] = g[i] / (one + v[i]);                 \
            break;                                                                                 \
        case FC__UN_EXPM1: /* v = y = e^x - 1: e^x = y + 1 */                                      \
            FC__SIMD for (int64_t i = 0; i < n; i++) gin[i] = g[i] * (v[i] + one);                 \
            break;                                                                                 \
        case FC__UN_SIN:                                                                           \
            for (int64_t i = 0; i < n; i++)                                                        \
                gin[i] = g[i] * cos(v[i]);                                                         \
            break;                                                                                 \
        case FC__UN_COS:                                                                           \
            for (int64_t i = 0; i < n; i++)                                                        \
                gin[i] = -g[i] * sin(v[i]);                                                        \
            break;                                                                                 \
        case FC__UN_TANH: /* v = y: 1 - y^2 */                                                     \
            FC__SIMD for (int64_t i = 0; i < n; i++) gin[i] = g[i] * (one - v[i] * v[i]);          \
            break;                                                                                 \
        case FC__UN_SIGMOID: /* v = y: y (1 - y) */                                                \
            FC__SIMD for (int64_t i = 0; i < n; i++) gin[i] = g[i] * v[i] * (one - v[i]);          \
            break;                                                                                 \
        case FC__UN_RELU: /* v = y; relu'(0) = 0 */                                                \
            FC__SIMD for (int64_t i = 0; i < n; i++) {                                             \
                T gi = g[i]; /* unconditional load: a blend, not a branch per element */           \
                gin[i] = v[i] > 0 ? gi : zero;                                                     \
            }                                                                                      \
            break;                                                                                 \
        case FC__UN_LEAKY_RELU: { /* v = x */                                                      \
            const T slope = (T)p[0];                                                               \
            FC__SIMD for (int64_t i = 0; i < n; i++) {                                             \
                T gi = g[i];                                                                       \
                gin[i] = v[i] > 0 ? gi : gi * slope;                                               \
            }                                                                                      \
            break;                                                                                 \
        }                                                                                          \
        case FC__UN_GELU: /* v = x: Phi(x) + x phi(x) */                                           \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T cdf = half * (one + erf(v[i] * (T)C_RSQRT2));                                    \
                T pdf = exp(-half * v[i] * v[i]) * (T)C_RSQRT2PI;                                  \
                gin[i] = g[i] * (cdf + v[i] * pdf);                                                \
            }                                                                                      \
            break;                                                                                 \
        case FC__UN_GELU_TANH: /* v = x */                                                         \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T x2 = v[i] * v[i];                                                                \
                T t = tanh((T)C_SQRT2_PI * (v[i] + (T)C_GELU_CUBIC * x2 * v[i]));                  \
                T du = (T)C_SQRT2_PI * (one + (T)(3 * C_GELU_CUBIC) * x2);                         \
                gin[i] = g[i] * (half * (one + t) + half * v[i] * (one - t * t) * du);             \
            }                                                                                      \
            break;                                                                                 \
        case FC__UN_SILU: /* v = x: s (1 + x (1 - s)), s = sigmoid(x) */                           \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T s = one / (one + exp(-v[i]));                                                    \
                gin[i] = g[i] * s * (one + v[i] * (one - s));                                      \
            }                                                                                      \
            break;                                                                                 \
        case FC__UN_SOFTPLUS: /* v = x: sigmoid(x), 1 in the linear region */                      \
            for (int64_t i = 0; i < n; i++)                                                        \
                gin[i] = v[i] > 20 ? g[i] : g[i] / (one + exp(-v[i]));                             \
            break;                                                                                 \
        case FC__UN_CLAMP: { /* v = x: 1 where lo <= x <= hi */                                    \
            const T lo = (T)p[0], hi = (T)p[1];                                                    \
            FC__SIMD for (int64_t i = 0; i < n; i++) {                                             \
                T gi = g[i];                                                                       \
                gin[i] = (v[i] >= lo && v[i] <= hi) ? gi : zero;                                   \
            }                                                                                      \
            break;                                                                                 \
        }                                                                                          \
        case FC__UN_COUNT:                                                                         \
            break;                                                                                 \
        }                                                                                          \
    }

UNARY_FORWARD(fc__unary_f32, float, FAST_FWD_F32)
UNARY_FORWARD(fc__unary_f64, double, FAST_FWD_F64)
UNARY_GRAD(fc__unary_grad_f32, float, FAST_GRAD_F32)
UNARY_GRAD(fc__unary_grad_f64, double, FAST_GRAD_F64)
