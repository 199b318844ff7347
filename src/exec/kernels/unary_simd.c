/* SPDX-License-Identifier: MIT */
/* unary_simd.c - vectorized f32 exp, tanh, sigmoid, silu, gelu (tanh form)
 * and softplus, with the gradients of silu, gelu (tanh form) and softplus,
 * in portable C, AVX2 + FMA and AVX-512F, picked at run time.
 *
 * Why: glibc's tanhf and friends are scalar calls, and GELU's forward and
 * backward alone took a third of a GPT training step. The math is written
 * once (unary_simd_body.h) against a vector interface defined below per
 * instruction set; the portable form is plain C that gcc vectorizes for the
 * baseline target (FC__SIMD) and the reference the others are tested
 * against. The library is built for baseline x86-64: the wider sets get
 * their instructions from target attributes, never from -march.
 *
 * Method: e^x by x = k ln2 + r, a degree-6 polynomial for e^r and 2^k in
 * two exact power-of-two factors (so subnormal results round once); every
 * other function is a rational expression of t = e^-|z| <= 1 that never
 * overflows: sigmoid(z) = 1 / (1 + t) or t / (1 + t), tanh(a) = (1 - t) /
 * (1 + t) with t = e^-2a above |x| = 0.55 and an odd polynomial below
 * (where that would cancel), silu = x sigmoid(x), gelu = x sigmoid(2u)
 * (which, unlike 0.5 x (1 + tanh(u)), does not cancel for x << 0),
 * softplus = max(x, 0) + t L(t) with L(t) = log1p(t) / t a polynomial.
 *
 * Accuracy contract (all three sets): |got - exact| <= U ulp(exact) + A,
 * ulp taken at the exact value (2^-149 where it is subnormal). Measured
 * against double-precision libm over every 97th bit pattern of the finite
 * floats plus [-16, 16] in steps of 2^-12 (44.2M inputs); worst seen in
 * brackets (portable / AVX2 = AVX-512 where they differ):
 *
 *   exp        U = 1.5  A = 0      [1.02 / 1.05]
 *   tanh       U = 2    A = 0      [1.50]
 *   sigmoid    U = 2.5  A = 0      [2.28]
 *   silu       U = 3.5  A = 0      [3.05]
 *   softplus   U = 3    A = 0      [2.42 / 2.00]
 *   gelu_tanh  U = 4    A = 2^-26  [3.20]  pure ulp up to ~200 where gelu is tiny:
 *                                          z = 2u = 2 sqrt(2/pi) (x + 0.044715 x^3) is
 *                                          itself rounded, and e^z turns z's
 *                                          rounding into |z| ulp (|z| = 87 at x = -10)
 *   silu'      U = 3    A = 2^-24  [2.04 / 1.94]  the derivatives cross zero (silu'
 *   gelu_tanh' U = 3    A = 2^-24  [2.22]         at x ~ -1.28, gelu' at x ~ -0.75),
 *                                                 where the error is absolute
 *   softplus'  as sigmoid
 *
 * (the gradients with g = 1; a general g adds the half ulp of one product).
 * test_unary_simd.c asserts these bounds on a coarser sweep. Special
 * values: NaN gives NaN; +inf / -inf give exp inf / 0, tanh 1 / -1,
 * sigmoid 1 / 0, silu and gelu inf / -0, softplus inf / 0, and the three
 * derivatives 1 / 0. Large |x| saturates with no invalid operation (no
 * inf * 0, inf - inf or inf / inf; an intermediate may overflow to inf, as
 * x^3 in gelu does, never into a NaN); subnormal inputs and results are
 * ordinary numbers here.
 * The sets may differ in the last bits (FMA against separate roundings);
 * each is deterministic and lane-wise, so thread splits never change bits. */
#include <math.h>
#include <string.h>

#include "exec/kernels/unary_simd.h"

typedef void (*usimd_map1)(const float *x, float *y, int64_t n);
typedef void (*usimd_map2)(const float *g, const float *v, float *o, int64_t n);
typedef struct usimd_table {
    usimd_map1 fwd[FC__UN_COUNT];
    usimd_map2 grad[FC__UN_COUNT];
} usimd_table;

#define US_CAT2(a, b) a##_##b
#define US_CAT(a, b) US_CAT2(a, b)
#define US_NAME(n) US_CAT(n, US_SUFFIX)

/* ---- portable: V is one float; gcc vectorizes the FC__SIMD loops -------------------------- */

static inline uint32_t f32_bits(float x) {
    union {
        float f;
        uint32_t u;
    } b = {.f = x};
    return b.u;
}
static inline float f32_from_bits(uint32_t u) {
    union {
        uint32_t u;
        float f;
    } b = {.u = u};
    return b.f;
}
/* m ? a : b as a bit blend: no branch for the compiler to thread the
 * clamp constants through (gcc then folds whole paths, including an
 * overflowing e^89, into blocks it can no longer if-convert), and both
 * sides are computed unconditionally, which is what vectorizes. */
static inline float f32_select(int m, float a, float b) {
    uint32_t mask = 0u - (uint32_t)(m != 0);
    return f32_from_bits((f32_bits(a) & mask) | (f32_bits(b) & ~mask));
}

#define V float
#define VM int
#define VU uint32_t
#define US_W 1
#define US_SUFFIX portable
#define US_FN static inline __attribute__((always_inline))
#define US_ENTRY static
#define vload(p) (*(p))
#define vstore(p, v) (*(p) = (v))
#define vset(c) (c)
#define vadd(a, b) ((a) + (b))
#define vsub(a, b) ((a) - (b))
#define vmul(a, b) ((a) * (b))
#define vdiv(a, b) ((a) / (b))
#define vabs(x) fabsf(x)
#define vcopysign(m, s) copysignf(m, s)
#define vfma(a, b, c) ((a) * (b) + (c))
#define vfnma(a, b, c) ((c) - (a) * (b))
#define vmaxk(x, lo) f32_select((x) < (lo), lo, x)
#define vmink(x, hi) f32_select((x) > (hi), hi, x)
#define vge0(x) ((x) >= 0.0f)
#define vlt(a, b) ((a) < (b))
#define vsel(m, a, b) f32_select(m, a, b)
#define vbits(x) f32_bits(x)
#define vfromu(u) f32_from_bits(u)
#define vuadd(u, c) ((u) + (c))
#define vusub(u, c) ((u) - (c))
#define vusubv(u, w) ((u) - (w))
#define vushr1(u) ((u) >> 1)
#define vushl23(u) ((u) << 23)
#include "exec/kernels/unary_simd_body.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define USIMD_X86 1
#include <immintrin.h>

/* ---- AVX2 + FMA ------------------------------------------------------------------------------ */

#define V __m256
#define VM __m256
#define VU __m256i
#define US_W 8
#define US_SUFFIX avx2
#define US_FN static inline __attribute__((always_inline, target("avx2,fma")))
#define US_ENTRY static __attribute__((target("avx2,fma")))
#define vload(p) _mm256_loadu_ps(p)
#define vstore(p, v) _mm256_storeu_ps(p, v)
#define vset(c) _mm256_set1_ps(c)
#define vadd(a, b) _mm256_add_ps(a, b)
#define vsub(a, b) _mm256_sub_ps(a, b)
#define vmul(a, b) _mm256_mul_ps(a, b)
#define vdiv(a, b) _mm256_div_ps(a, b)
#define vabs(x) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x)
#define vcopysign(m, s)                                                                            \
    _mm256_or_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), m),                                       \
                 _mm256_and_ps(_mm256_set1_ps(-0.0f), s))
#define vfma(a, b, c) _mm256_fmadd_ps(a, b, c)
#define vfnma(a, b, c) _mm256_fnmadd_ps(a, b, c)
/* max(a, b) is a > b ? a : b, so a NaN x (second operand) comes through */
#define vmaxk(x, lo) _mm256_max_ps(lo, x)
#define vmink(x, hi) _mm256_min_ps(hi, x)
#define vge0(x) _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ)
#define vlt(a, b) _mm256_cmp_ps(a, b, _CMP_LT_OQ)
#define vsel(m, a, b) _mm256_blendv_ps(b, a, m)
#define vbits(x) _mm256_castps_si256(x)
#define vfromu(u) _mm256_castsi256_ps(u)
#define vuadd(u, c) _mm256_add_epi32(u, _mm256_set1_epi32((int)(c)))
#define vusub(u, c) _mm256_sub_epi32(u, _mm256_set1_epi32((int)(c)))
#define vusubv(u, w) _mm256_sub_epi32(u, w)
#define vushr1(u) _mm256_srli_epi32(u, 1)
#define vushl23(u) _mm256_slli_epi32(u, 23)
#include "exec/kernels/unary_simd_body.h"

/* ---- AVX-512F -------------------------------------------------------------------------------- */

#define V __m512
#define VM __mmask16
#define VU __m512i
#define US_W 16
#define US_SUFFIX avx512
#define US_FN static inline __attribute__((always_inline, target("avx512f,avx2,fma")))
#define US_ENTRY static __attribute__((target("avx512f,avx2,fma")))
#define vload(p) _mm512_loadu_ps(p)
#define vstore(p, v) _mm512_storeu_ps(p, v)
#define vset(c) _mm512_set1_ps(c)
#define vadd(a, b) _mm512_add_ps(a, b)
#define vsub(a, b) _mm512_sub_ps(a, b)
#define vmul(a, b) _mm512_mul_ps(a, b)
#define vdiv(a, b) _mm512_div_ps(a, b)
/* AVX-512F has no float and/or (that is DQ): integer ones on the bits */
#define vabs(x)                                                                                    \
    _mm512_castsi512_ps(_mm512_and_epi32(_mm512_castps_si512(x), _mm512_set1_epi32(0x7FFFFFFF)))
#define vcopysign(m, s)                                                                            \
    _mm512_castsi512_ps(_mm512_ternarylogic_epi32(                                                 \
        _mm512_set1_epi32(0x7FFFFFFF), _mm512_castps_si512(m), _mm512_castps_si512(s), 0xCA))
#define vfma(a, b, c) _mm512_fmadd_ps(a, b, c)
#define vfnma(a, b, c) _mm512_fnmadd_ps(a, b, c)
#define vmaxk(x, lo) _mm512_max_ps(lo, x)
#define vmink(x, hi) _mm512_min_ps(hi, x)
#define vge0(x) _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ)
#define vlt(a, b) _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ)
#define vsel(m, a, b) _mm512_mask_blend_ps(m, b, a)
#define vbits(x) _mm512_castps_si512(x)
#define vfromu(u) _mm512_castsi512_ps(u)
#define vuadd(u, c) _mm512_add_epi32(u, _mm512_set1_epi32((int)(c)))
#define vusub(u, c) _mm512_sub_epi32(u, _mm512_set1_epi32((int)(c)))
#define vusubv(u, w) _mm512_sub_epi32(u, w)
#define vushr1(u) _mm512_srli_epi32(u, 1)
#define vushl23(u) _mm512_slli_epi32(u, 23)
#include "exec/kernels/unary_simd_body.h"
#endif

/* ---- dispatch -------------------------------------------------------------------------------- */

static const usimd_table *table_of(fc__isa isa) {
#ifdef USIMD_X86
    if (fc__isa_enabled(isa)) {
        if (isa == FC__ISA_AVX512) return &table_avx512;
        if (isa == FC__ISA_AVX2) return &table_avx2;
    }
#endif
    (void)isa;
    return &table_portable;
}

bool fc__usimd_forward(fc__isa isa, fc__unary_kind k, const float *x, float *y, int64_t n) {
    if ((unsigned)k >= FC__UN_COUNT) return false;
    usimd_map1 f = table_of(isa)->fwd[k];
    if (!f) return false;
    f(x, y, n);
    return true;
}

bool fc__usimd_grad(fc__isa isa, fc__unary_kind k, const float *g, const float *v, float *gin,
                    int64_t n) {
    if ((unsigned)k >= FC__UN_COUNT) return false;
    usimd_map2 f = table_of(isa)->grad[k];
    if (!f) return false;
    f(g, v, gin, n);
    return true;
}
