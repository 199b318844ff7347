/* SPDX-License-Identifier: MIT */
/* core/convert.h - internal row converters between the scalar dtypes.
 *
 * The exec layer calls these hot loops directly (no dtype switch per call);
 * fc_convert_row (fucina/dtype.h) is the checked public entry over all of
 * them. Every converter gives exactly the bits of the matching scalar
 * function of fucina/dtype.h for every input, whatever SIMD path the CPU
 * selects: the portable twins below are the reference the tests compare the
 * dispatched versions against. Pointers must be valid for n elements and
 * naturally aligned for their type; src and dst must not overlap. n == 0 is a
 * no-op. None of these can fail. */
#ifndef FUCINA_CORE_CONVERT_H
#define FUCINA_CORE_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "core/cpu.h"
#include "fucina/dtype.h"

/* ---- f16 / bf16 <-> f32: dispatched to the best ISA the CPU has ------------ */
void fc__f16_to_f32_row(const uint16_t *src, float *dst, size_t n);
void fc__f32_to_f16_row(const float *src, uint16_t *dst, size_t n);
void fc__bf16_to_f32_row(const uint16_t *src, float *dst, size_t n);
void fc__f32_to_bf16_row(const float *src, uint16_t *dst, size_t n);

/* The same four in plain C, one scalar conversion per element. */
void fc__f16_to_f32_row_portable(const uint16_t *src, float *dst, size_t n);
void fc__f32_to_f16_row_portable(const float *src, uint16_t *dst, size_t n);
void fc__bf16_to_f32_row_portable(const uint16_t *src, float *dst, size_t n);
void fc__f32_to_bf16_row_portable(const float *src, uint16_t *dst, size_t n);

/* One implementation of the four half-precision row converters. */
typedef struct fc__half_rows {
    const char *name; /* "portable", "avx2-f16c", "avx512" */
    void (*f16_to_f32)(const uint16_t *src, float *dst, size_t n);
    void (*f32_to_f16)(const float *src, uint16_t *dst, size_t n);
    void (*bf16_to_f32)(const uint16_t *src, float *dst, size_t n);
    void (*f32_to_bf16)(const float *src, uint16_t *dst, size_t n);
} fc__half_rows;

/* The implementation for one ISA level (core/cpu.h), or NULL when this
 * build or this CPU lacks it or the level is capped (FC__ISA_PORTABLE always
 * exists). Lets the tests run every path the machine can run, not only the
 * one dispatch picks. */
const fc__half_rows *fc__half_rows_for(fc__isa isa);
/* The implementation the dispatched fc__*_row functions use (the best one). */
const fc__half_rows *fc__half_rows_best(void);

#if defined(__x86_64__)
/* convert_x86.c: the SIMD tables (the caller checks the level). */
const fc__half_rows *fc__half_rows_avx2(void);
const fc__half_rows *fc__half_rows_avx512(void);
#endif

/* ---- FP8 <-> f32 (fp8.c): table decode, scalar round-to-nearest-even ---- */
void fc__e4m3_to_f32_row(const uint8_t *src, float *dst, size_t n);
void fc__e5m2_to_f32_row(const uint8_t *src, float *dst, size_t n);
void fc__f32_to_e4m3_row(const float *src, uint8_t *dst, size_t n);
void fc__f32_to_e5m2_row(const float *src, uint8_t *dst, size_t n);

/* ---- the generic cast legs (cast.c) ---------------------------------------
 * A cast of src -> dst goes through one intermediate, chosen by
 * fc__cast_route: integers and bool through i64 (wrapping on store), floats
 * into an integer or f64 through f64, floats into the other floats through
 * f32, anything into bool through truthiness, and a dtype into itself by
 * copying. fc_cast_scalar is fc__cast_run with n == 1; fc_convert_row calls
 * it for the pairs that have no direct loop. Both dtypes must be scalar and
 * the pointers naturally aligned (callers check). */
typedef enum fc__cast_route {
    FC__ROUTE_BOOL, /* dst is bool: fc__truthy_row straight into dst */
    FC__ROUTE_COPY, /* src == dst (not bool): the bits are copied */
    FC__ROUTE_I64,  /* src is an integer or bool */
    FC__ROUTE_F64,  /* src is a float, dst an integer or f64 */
    FC__ROUTE_F32   /* src is a float, dst a float other than f64 */
} fc__cast_route;

fc__cast_route fc__cast_route_of(fc_dtype src, fc_dtype dst);
/* The whole cast of n elements along the route of the pair. */
void fc__cast_run(fc_dtype src_dtype, const void *src, fc_dtype dst_dtype, void *dst, size_t n);
/* Value != 0 per element (-0.0 false, NaN true); writes 0 or 1. */
void fc__truthy_row(fc_dtype src_dtype, const void *src, uint8_t *dst, size_t n);
/* Loads: integers and bool into i64 (bool as 0/1); floats into f64 (exact)
 * or into f32 (exact but for f64, which rounds to nearest even). */
void fc__load_i64_row(fc_dtype src_dtype, const void *src, int64_t *dst, size_t n);
void fc__load_f64_row(fc_dtype src_dtype, const void *src, double *dst, size_t n);
void fc__load_f32_row(fc_dtype src_dtype, const void *src, float *dst, size_t n);
/* Stores: from i64 into integers (wrap) or floats (through f32, or straight
 * to f64); from f64 into integers (truncate, saturate, NaN -> 0) or f64;
 * from f32 into the floats other than f64. */
void fc__store_i64_row(fc_dtype dst_dtype, const int64_t *src, void *dst, size_t n);
void fc__store_f64_row(fc_dtype dst_dtype, const double *src, void *dst, size_t n);
void fc__store_f32_row(fc_dtype dst_dtype, const float *src, void *dst, size_t n);

/* The float -> integer rule for one value widened to f64 (every float dtype
 * is exact in f64): NaN -> 0, truncation toward zero, saturation at [lo, hi].
 * The comparisons run before the C conversion, so it is never out of range;
 * (double)hi rounds up to 2^63 for i64 only, where >= still saturates at the
 * first double that does not fit. */
static inline int64_t fc__f64_to_int_sat(double v, int64_t lo, int64_t hi) {
    if (v != v) return 0;
    if (v <= (double)lo) return lo;
    if (v >= (double)hi) return hi;
    return (int64_t)v;
}

#endif /* FUCINA_CORE_CONVERT_H */
