/* SPDX-License-Identifier: MIT */
/* convert_row.c - fc_convert_row, the portable half-precision row loops and
 * the run-time choice of their SIMD versions.
 *
 * The pairs the exec layer converts all the time (every float format to and
 * from f32, f32 <-> f64, the integers and bool to and from f32, a dtype to
 * itself) get direct loops; every other pair runs the generic legs of cast.c
 * (fc__cast_run), so both give exactly fc_cast_scalar's bits. The direct
 * loops apply the same rules in the same order as the legs they replace
 * (test_cast compares every ordered pair on a table of awkward values).
 *
 * The half-precision loops take the implementation of the level in effect
 * (core/cpu.h: the best the CPU has, under FUCINA_ISA and the test cap);
 * all of them produce identical bits, so the choice is invisible except in
 * speed.
 * The hot loops assume naturally aligned pointers; fc_convert_row stages
 * misaligned rows through aligned chunks (mmapped files can be misaligned). */
#include <string.h>

#include "core/convert.h"

/* ---- portable half-precision rows --------------------------------------- */

void fc__f16_to_f32_row_portable(const uint16_t *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = fc_f16_to_f32(src[i]);
}
void fc__f32_to_f16_row_portable(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = fc_f32_to_f16(src[i]);
}
void fc__bf16_to_f32_row_portable(const uint16_t *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = fc_bf16_to_f32(src[i]);
}
void fc__f32_to_bf16_row_portable(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = fc_f32_to_bf16(src[i]);
}

static const fc__half_rows portable_rows = {
    "portable",
    fc__f16_to_f32_row_portable,
    fc__f32_to_f16_row_portable,
    fc__bf16_to_f32_row_portable,
    fc__f32_to_bf16_row_portable,
};

/* ---- dispatch ----------------------------------------------------------- */

const fc__half_rows *fc__half_rows_for(fc__isa isa) {
    if (!fc__isa_enabled(isa)) return NULL;
    switch (isa) {
    case FC__ISA_PORTABLE:
        return &portable_rows;
#if defined(__x86_64__)
    case FC__ISA_AVX2:
        return fc__half_rows_avx2();
    case FC__ISA_AVX512:
        return fc__half_rows_avx512();
#endif
    default:
        return NULL;
    }
}

/* Looked up per call (one relaxed load and a switch): the level can change
 * under a test's cap, and a cached pointer would outlive it. */
const fc__half_rows *fc__half_rows_best(void) {
    const fc__half_rows *rows = fc__half_rows_for(fc__isa_level());
    return rows ? rows : &portable_rows;
}

void fc__f16_to_f32_row(const uint16_t *src, float *dst, size_t n) {
    fc__half_rows_best()->f16_to_f32(src, dst, n);
}
void fc__f32_to_f16_row(const float *src, uint16_t *dst, size_t n) {
    fc__half_rows_best()->f32_to_f16(src, dst, n);
}
void fc__bf16_to_f32_row(const uint16_t *src, float *dst, size_t n) {
    fc__half_rows_best()->bf16_to_f32(src, dst, n);
}
void fc__f32_to_bf16_row(const float *src, uint16_t *dst, size_t n) {
    fc__half_rows_best()->f32_to_bf16(src, dst, n);
}

/* ---- direct loops ------------------------------------------------------- */

/* Anything -> f32 for the dtypes with a one-step rule; false when the pair
 * has no direct loop. Integers: (float)v, one rounding to nearest even. */
static bool to_f32_direct(fc_dtype src_dtype, const void *src, float *dst, size_t n) {
    switch (src_dtype) {
    case FC_F16:
        fc__f16_to_f32_row(src, dst, n);
        return true;
    case FC_BF16:
        fc__bf16_to_f32_row(src, dst, n);
        return true;
    case FC_F8_E4M3:
        fc__e4m3_to_f32_row(src, dst, n);
        return true;
    case FC_F8_E5M2:
        fc__e5m2_to_f32_row(src, dst, n);
        return true;
    case FC_F64:
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)((const double *)src)[i];
        return true;
    case FC_BOOL:
        for (size_t i = 0; i < n; i++)
            dst[i] = ((const uint8_t *)src)[i] != 0 ? 1.0f : 0.0f;
        return true;
    case FC_U8:
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)((const uint8_t *)src)[i];
        return true;
    case FC_U16:
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)((const uint16_t *)src)[i];
        return true;
    case FC_I8:
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)((const int8_t *)src)[i];
        return true;
    case FC_I16:
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)((const int16_t *)src)[i];
        return true;
    case FC_I32:
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)((const int32_t *)src)[i];
        return true;
    case FC_I64:
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)((const int64_t *)src)[i];
        return true;
    default:
        return false;
    }
}

/* f32 -> an integer of at most 32 bits by the float -> integer rule, in a
 * form compilers turn into vector min/max: clamping to [lo, hi] (exact in
 * f64) before truncating gives what truncating and then saturating gives,
 * and the conversion runs only on non-NaN (so in-range) values. */
static inline int32_t f32_to_narrow_sat(float x, double lo, double hi) {
    double v = x;
    double c = v < lo ? lo : v;
    c = c > hi ? hi : c;
    return x == x ? (int32_t)c : 0;
}

/* f32 -> anything with a one-step rule. Integers: NaN -> 0, truncate,
 * saturate (i64 through fc__f64_to_int_sat; f32 widens to f64 exactly). */
static bool from_f32_direct(const float *src, fc_dtype dst_dtype, void *dst, size_t n) {
    switch (dst_dtype) {
    case FC_F16:
        fc__f32_to_f16_row(src, dst, n);
        return true;
    case FC_BF16:
        fc__f32_to_bf16_row(src, dst, n);
        return true;
    case FC_F8_E4M3:
        fc__f32_to_e4m3_row(src, dst, n);
        return true;
    case FC_F8_E5M2:
        fc__f32_to_e5m2_row(src, dst, n);
        return true;
    case FC_F64:
        for (size_t i = 0; i < n; i++)
            ((double *)dst)[i] = src[i];
        return true;
    case FC_BOOL:
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = src[i] != 0.0f;
        return true;
    case FC_U8:
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = (uint8_t)f32_to_narrow_sat(src[i], 0, UINT8_MAX);
        return true;
    case FC_U16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = (uint16_t)f32_to_narrow_sat(src[i], 0, UINT16_MAX);
        return true;
    case FC_I8:
        for (size_t i = 0; i < n; i++)
            ((int8_t *)dst)[i] = (int8_t)f32_to_narrow_sat(src[i], INT8_MIN, INT8_MAX);
        return true;
    case FC_I16:
        for (size_t i = 0; i < n; i++)
            ((int16_t *)dst)[i] = (int16_t)f32_to_narrow_sat(src[i], INT16_MIN, INT16_MAX);
        return true;
    case FC_I32:
        for (size_t i = 0; i < n; i++)
            ((int32_t *)dst)[i] = (int32_t)f32_to_narrow_sat(src[i], INT32_MIN, INT32_MAX);
        return true;
    case FC_I64:
        for (size_t i = 0; i < n; i++)
            ((int64_t *)dst)[i] = fc__f64_to_int_sat(src[i], INT64_MIN, INT64_MAX);
        return true;
    default:
        return false;
    }
}

/* Both pointers naturally aligned, dtypes scalar. */
static void convert_aligned(fc_dtype src_dtype, const void *src, fc_dtype dst_dtype, void *dst,
                            size_t n) {
    if (src_dtype == dst_dtype && src_dtype != FC_BOOL) {
        memcpy(dst, src, n * fc_dtype_size(src_dtype));
        return;
    }
    if (dst_dtype == FC_F32 && to_f32_direct(src_dtype, src, dst, n)) return;
    if (src_dtype == FC_F32 && from_f32_direct(src, dst_dtype, dst, n)) return;
    fc__cast_run(src_dtype, src, dst_dtype, dst, n);
}

fc_status fc_convert_row(fc_dtype src_dtype, const void *src, fc_dtype dst_dtype, void *dst,
                         size_t n) {
    if (!fc_dtype_is_scalar(src_dtype) || !fc_dtype_is_scalar(dst_dtype)) return FC_ERR_DTYPE;
    if (n == 0) return FC_OK;
    if (!src || !dst) return FC_ERR_NULL_ARG;
    size_t src_elem = fc_dtype_size(src_dtype), dst_elem = fc_dtype_size(dst_dtype);
    if ((uintptr_t)src % src_elem == 0 && (uintptr_t)dst % dst_elem == 0) {
        convert_aligned(src_dtype, src, dst_dtype, dst, n);
        return FC_OK;
    }
    /* misaligned: stage 256 elements at a time through aligned buffers */
    union chunk {
        uint8_t u8[256];
        uint16_t u16[256];
        int32_t i32[256];
        float f32[256];
        int64_t i64[256];
        double f64[256];
        unsigned char bytes[256 * 8];
    } in, out;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < 256 ? n - done : 256;
        memcpy(in.bytes, (const char *)src + done * src_elem, k * src_elem);
        convert_aligned(src_dtype, in.bytes, dst_dtype, out.bytes, k);
        memcpy((char *)dst + done * dst_elem, out.bytes, k * dst_elem);
        done += k;
    }
    return FC_OK;
}
