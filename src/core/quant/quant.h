/* SPDX-License-Identifier: MIT */
/* quant.h - the internal registry of block-format families and the scalar
 * helpers they share.
 *
 * Each family file (legacy.c, kquant*.c, ternary.c, fp4.c, nf4.c, iquant*.c)
 * owns some block dtypes and exports one lookup that returns its row
 * functions for a dtype it owns and NULL for every other one; quant.c asks
 * the lookups in turn. A family never validates arguments: quant.c has
 * already checked pointers, shapes, flags and the imatrix, refused
 * non-finite input, and hands over one row at a time (n = ncols, a nonzero
 * multiple of the block size; imatrix NULL or ncols finite weights >= 0).
 * The one exception is iq4_nl with FC_QUANT_IQ4NL_REF: the whole matrix in
 * one call (n = nrows * ncols, imatrix NULL), as ggml's from_float_ref runs
 * over a contiguous matrix.
 *
 * Block structs are declared with byte arrays only (alignment 1), so a
 * caller's buffer needs no alignment, and multi-byte fields are read and
 * written little-endian with the helpers below, whatever the host order.
 *
 * The helpers replace the spots where ggml's reference C is undefined or
 * produces inf/NaN, with a result stated once here (see fucina/quant.h). */
#ifndef FUCINA_CORE_QUANT_QUANT_H
#define FUCINA_CORE_QUANT_QUANT_H

#include <stdint.h>
#include <string.h>

#include "fucina/dtype.h"
#include "fucina/status.h"

/* Byte exactness needs every product rounded on its own: a fused
 * multiply-add would change results once a build targets FMA hardware.
 * clang contracts within an expression by default, so it is told not to;
 * gcc does not contract in the ISO C mode the build uses (-std=c11). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* core/quant/iquant.h carries an identical copy behind the same guard, so
 * either header may come first. */
#ifndef FC__QUANT_FNS_DEFINED
#define FC__QUANT_FNS_DEFINED
typedef struct fc__quant_fns {
    /* Quantizes one row of n values. Returns FC_OK (families whose work
     * cannot fail) or a status the family documents. */
    fc_status (*quantize_row)(const float *src, void *dst, int64_t n, const float *imatrix,
                              unsigned flags);
    /* Dequantizes one row of n values. Cannot fail. */
    void (*dequantize_row)(const void *src, float *dst, int64_t n);
} fc__quant_fns;
#endif

const fc__quant_fns *fc__quant_family_legacy(fc_dtype dtype);  /* legacy.c */
const fc__quant_fns *fc__quant_family_kquant(fc_dtype dtype);  /* kquant.c */
const fc__quant_fns *fc__quant_family_ternary(fc_dtype dtype); /* ternary.c */
const fc__quant_fns *fc__quant_family_fp4(fc_dtype dtype);     /* fp4.c */
const fc__quant_fns *fc__quant_family_nf4(fc_dtype dtype);     /* nf4.c */
const fc__quant_fns *fc__quant_family_iquant(fc_dtype dtype);  /* iquant.c */

/* ---- bits and little-endian fields -------------------------------------------- */

static inline uint32_t fc__q_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float fc__q_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline uint16_t fc__q_get_u16(const uint8_t *p) {
    return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}
static inline void fc__q_put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v & 0xffu);
    p[1] = (uint8_t)(v >> 8);
}
static inline uint32_t fc__q_get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void fc__q_put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
/* An f16 field as f32 (exact widening). */
static inline float fc__q_get_f16(const uint8_t *p) { return fc_f16_to_f32(fc__q_get_u16(p)); }
static inline float fc__q_get_f32(const uint8_t *p) { return fc__q_bits_f32(fc__q_get_u32(p)); }
static inline void fc__q_put_f32(uint8_t *p, float v) { fc__q_put_u32(p, fc__q_f32_bits(v)); }

/* ---- conversions with a stated result everywhere ---------------------------- */

/* f32 -> f16 for a block scale: ggml's round-to-nearest-even conversion,
 * except that a result that would be infinite saturates to +-65504 and a
 * NaN (left by a degenerate search on extreme input) becomes +0. Equal to
 * GGML_FP32_TO_FP16 wherever that is finite. */
static inline uint16_t fc__q_f16_scale(float v) {
    if (v != v) return 0;
    uint16_t h = fc_f32_to_f16(v);
    if ((h & 0x7fffu) == 0x7c00u) h = (uint16_t)((h & 0x8000u) | 0x7bffu);
    return h;
}
static inline void fc__q_put_f16(uint8_t *p, float v) { fc__q_put_u16(p, fc__q_f16_scale(v)); }

/* C's (int)v truncation, defined for every float: a value whose truncation
 * does not fit in int32, or a NaN, gives INT32_MIN, which is what x86-64's
 * cvttss2si/cvttps2dq return. ggml's reference quantizers convert out of
 * range on extreme input (a block scale whose reciprocal overflows); this
 * reproduces the bytes ggml gives on x86-64 without undefined behaviour. */
static inline int32_t fc__q_trunc(float v) {
    if (v >= -2147483648.0f && v < 2147483648.0f) return (int32_t)v;
    return INT32_MIN;
}
/* Two's complement narrowing (what gcc and clang do, written out). */
static inline int8_t fc__q_wrap_i8(int32_t v) {
    uint32_t u = (uint32_t)v & 0xffu;
    return (int8_t)(u < 0x80u ? (int32_t)u : (int32_t)u - 256);
}
static inline uint8_t fc__q_wrap_u8(int32_t v) { return (uint8_t)((uint32_t)v & 0xffu); }

/* ggml's nearest_int: round half to even through the 1.5 * 2^23 trick.
 * Exact for |v| <= 4194303; beyond that (and for NaN/inf) it returns the
 * same well-defined garbage as ggml, which the callers then clamp. */
static inline int fc__q_nearest_int(float v) {
    float t = v + 12582912.0f;
    return (int)(fc__q_f32_bits(t) & 0x007fffffu) - 0x00400000;
}

static inline int fc__q_min_i(int a, int b) { return a < b ? a : b; }
static inline int fc__q_max_i(int a, int b) { return a > b ? a : b; }
static inline int fc__q_clamp_i(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

#endif /* FUCINA_CORE_QUANT_QUANT_H */
