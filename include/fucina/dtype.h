/* SPDX-License-Identifier: MIT */
/* fucina/dtype.h - the dtype registry, its predicates, the float
 * compute/output policy and the scalar conversions.
 *
 * The enum values are fixed: new dtypes only ever go at the end. The last two
 * were added after the first 40:
 *
 *   FC_Q2_0_G64  ggml master's q2_0: 64 elements / 18 bytes ({f16 d; u8 qs[16]}).
 *                It shares GGUF type id 42 with the 128-element q2_0
 *                (FC_Q2_0, the PrismML layout); readers tell them apart by size.
 *   FC_NF4       16-level NF4 codebook, 64 elements / 34 bytes per block:
 *                {f16 absmax; u8 codes[32]}, codes packed low nibble first.
 *                Double quantization of the absmax scales is a separate API
 *                (fucina/quant.h), because it spans many blocks.
 *
 * Scalar dtypes hold one storage element per logical element; block dtypes
 * hold one packed block per fc_dtype_block_elems() elements of the last axis.
 */
#ifndef FUCINA_DTYPE_H
#define FUCINA_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fucina/export.h"
#include "fucina/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(enum name, lower-case name, kind, scalar size or block bytes, block elems) */
#define FC_DTYPE_LIST(X)                                                                           \
    X(FC_BOOL, "bool", FC_KIND_SCALAR, 1, 1)                                                       \
    X(FC_U8, "u8", FC_KIND_SCALAR, 1, 1)                                                           \
    X(FC_U16, "u16", FC_KIND_SCALAR, 2, 1)                                                         \
    X(FC_I8, "i8", FC_KIND_SCALAR, 1, 1)                                                           \
    X(FC_I16, "i16", FC_KIND_SCALAR, 2, 1)                                                         \
    X(FC_I32, "i32", FC_KIND_SCALAR, 4, 1)                                                         \
    X(FC_I64, "i64", FC_KIND_SCALAR, 8, 1)                                                         \
    X(FC_F16, "f16", FC_KIND_SCALAR, 2, 1)                                                         \
    X(FC_BF16, "bf16", FC_KIND_SCALAR, 2, 1)                                                       \
    X(FC_F32, "f32", FC_KIND_SCALAR, 4, 1)                                                         \
    X(FC_F64, "f64", FC_KIND_SCALAR, 8, 1)                                                         \
    X(FC_F8_E4M3, "f8_e4m3", FC_KIND_SCALAR, 1, 1)                                                 \
    X(FC_F8_E5M2, "f8_e5m2", FC_KIND_SCALAR, 1, 1)                                                 \
    X(FC_Q1_0, "q1_0", FC_KIND_BLOCK, 18, 128)                                                     \
    X(FC_Q2_0, "q2_0", FC_KIND_BLOCK, 34, 128)                                                     \
    X(FC_Q4_0, "q4_0", FC_KIND_BLOCK, 18, 32)                                                      \
    X(FC_Q4_1, "q4_1", FC_KIND_BLOCK, 20, 32)                                                      \
    X(FC_Q5_0, "q5_0", FC_KIND_BLOCK, 22, 32)                                                      \
    X(FC_Q5_1, "q5_1", FC_KIND_BLOCK, 24, 32)                                                      \
    X(FC_Q8_0, "q8_0", FC_KIND_BLOCK, 34, 32)                                                      \
    X(FC_Q8_1, "q8_1", FC_KIND_BLOCK, 36, 32)                                                      \
    X(FC_Q2_K, "q2_k", FC_KIND_BLOCK, 84, 256)                                                     \
    X(FC_Q3_K, "q3_k", FC_KIND_BLOCK, 110, 256)                                                    \
    X(FC_Q4_K, "q4_k", FC_KIND_BLOCK, 144, 256)                                                    \
    X(FC_Q5_K, "q5_k", FC_KIND_BLOCK, 176, 256)                                                    \
    X(FC_Q6_K, "q6_k", FC_KIND_BLOCK, 210, 256)                                                    \
    X(FC_Q8_K, "q8_k", FC_KIND_BLOCK, 292, 256)                                                    \
    X(FC_IQ1_S, "iq1_s", FC_KIND_BLOCK, 50, 256)                                                   \
    X(FC_IQ1_M, "iq1_m", FC_KIND_BLOCK, 56, 256)                                                   \
    X(FC_IQ2_XXS, "iq2_xxs", FC_KIND_BLOCK, 66, 256)                                               \
    X(FC_IQ2_XS, "iq2_xs", FC_KIND_BLOCK, 74, 256)                                                 \
    X(FC_IQ2_S, "iq2_s", FC_KIND_BLOCK, 82, 256)                                                   \
    X(FC_IQ3_XXS, "iq3_xxs", FC_KIND_BLOCK, 98, 256)                                               \
    X(FC_IQ3_S, "iq3_s", FC_KIND_BLOCK, 110, 256)                                                  \
    X(FC_IQ4_NL, "iq4_nl", FC_KIND_BLOCK, 18, 32)                                                  \
    X(FC_IQ4_XS, "iq4_xs", FC_KIND_BLOCK, 136, 256)                                                \
    X(FC_TQ1_0, "tq1_0", FC_KIND_BLOCK, 54, 256)                                                   \
    X(FC_TQ2_0, "tq2_0", FC_KIND_BLOCK, 66, 256)                                                   \
    X(FC_MXFP4, "mxfp4", FC_KIND_BLOCK, 17, 32)                                                    \
    X(FC_NVFP4, "nvfp4", FC_KIND_BLOCK, 36, 64)                                                    \
    X(FC_Q2_0_G64, "q2_0_g64", FC_KIND_BLOCK, 18, 64)                                              \
    X(FC_NF4, "nf4", FC_KIND_BLOCK, 34, 64)

/* The element types, one per row of FC_DTYPE_LIST above. */
typedef enum fc_dtype {
#define FC__DTYPE_ENUM(e, name, kind, bytes, elems) e,
    FC_DTYPE_LIST(FC__DTYPE_ENUM)
#undef FC__DTYPE_ENUM
        FC_DTYPE_COUNT
} fc_dtype;

/* A scalar type stores one value per element; a block type packs elements in blocks. */
typedef enum fc_dtype_kind { FC_KIND_SCALAR, FC_KIND_BLOCK, FC_KIND_COUNT } fc_dtype_kind;

/* ---- registry ---------------------------------------------------------- */

/* True for 0 <= dtype < FC_DTYPE_COUNT. Every query below answers a
 * harmless default (false, 0, "invalid") for an invalid dtype. */
FC_API bool fc_dtype_is_valid(fc_dtype dtype);
/* Lower-case tag name ("q4_k"); "invalid" for an invalid dtype. Static storage. */
FC_API const char *fc_dtype_name(fc_dtype dtype);
/* Name -> dtype, case-sensitive, accepting the names of fc_dtype_name.
 * Returns FC_ERR_NULL_ARG for NULL pointers, FC_ERR_DTYPE for an unknown name. */
FC_API fc_status fc_dtype_from_name(const char *name, fc_dtype *out);
/* The dtype's kind; FC_KIND_SCALAR for an invalid dtype (fc_dtype_is_scalar and
 * fc_dtype_is_block are both false for it). */
FC_API fc_dtype_kind fc_dtype_kind_of(fc_dtype dtype);
FC_API bool fc_dtype_is_scalar(fc_dtype dtype);
FC_API bool fc_dtype_is_block(fc_dtype dtype);
/* Bytes of one storage element: the scalar size, or the block's byte size. */
FC_API size_t fc_dtype_size(fc_dtype dtype);
/* Logical elements per storage element: 1 for scalars, the block size otherwise. */
FC_API int64_t fc_dtype_block_elems(fc_dtype dtype);

/* ---- predicates (false for an invalid dtype) ------------------------------ */
FC_API bool fc_dtype_is_f8(fc_dtype dtype);              /* f8_e4m3, f8_e5m2 */
FC_API bool fc_dtype_is_signed_int(fc_dtype dtype);      /* i8 i16 i32 i64 */
FC_API bool fc_dtype_is_unsigned_int(fc_dtype dtype);    /* u8 u16 */
FC_API bool fc_dtype_is_float(fc_dtype dtype);           /* f16 bf16 f32 f64: float math runs */
FC_API bool fc_dtype_supports_grad(fc_dtype dtype);      /* f16 bf16 f32 f64 (grads f32; f64's f64) */
FC_API bool fc_dtype_supports_int_math(fc_dtype dtype);  /* u8 u16 i8 i16 i32 i64 */
FC_API bool fc_dtype_supports_to_float(fc_dtype dtype);  /* floats, f8, every block dtype */
FC_API bool fc_dtype_supports_quantized_matmul_rhs(fc_dtype dtype); /* blocks but q8_1, q8_k */
/* Block dtypes and the f8 storage floats map to f32; other scalars (and an
 * invalid dtype) to themselves. */
FC_API fc_dtype fc_dtype_logical(fc_dtype dtype);

/* The accumulator a reduction over this dtype uses. */
typedef enum fc_accum {
    FC_ACCUM_NONE, /* block dtypes and invalid input: no scalar accumulator */
    FC_ACCUM_F32,  /* f16, bf16, f32, f8 storage floats */
    FC_ACCUM_F64,  /* f64 */
    FC_ACCUM_U64,  /* bool, u8, u16 */
    FC_ACCUM_I64,  /* i8, i16, i32, i64 */
    FC_ACCUM_COUNT
} fc_accum;
FC_API fc_accum fc_dtype_accumulator(fc_dtype dtype);

/* ---- float compute/output policy ------------------------------------------ */
/* The op families fc_dtype_policy resolves dtypes for. */
typedef enum fc_float_op {
    FC_FLOAT_OP_POINTWISE,
    FC_FLOAT_OP_WIDENED,
    FC_FLOAT_OP_REDUCTION,
    FC_FLOAT_OP_MATMUL,
    FC_FLOAT_OP_COUNT
} fc_float_op;

/* Resolves the compute and output dtype for an op family on an input dtype:
 * f64 computes and outputs f64 for every op; f16 and f32 pointwise compute in
 * themselves, bf16 pointwise in f32; widened and matmul ops on f16, bf16 and
 * f32 compute in f32 and output the input dtype; their reductions compute
 * and output f32; integers pointwise stay themselves, and integer and bool
 * reductions give i64. Block dtypes return themselves (the quantized paths
 * handle them). Returns FC_OK, or FC_ERR_DTYPE, leaving the outputs
 * untouched, for an invalid dtype or op, an f8 dtype (any op), bool in any
 * op but FC_FLOAT_OP_REDUCTION, and integers in widened or matmul ops.
 * Either output pointer may be NULL. */
FC_API fc_status fc_dtype_policy(fc_float_op op, fc_dtype input, fc_dtype *compute,
                                 fc_dtype *output);

/* ---- scalar conversions --------------------------------------------------
 * f16 and bf16 are passed as raw uint16_t bits, the FP8 formats as uint8_t.
 * f32 -> f16/bf16 round to nearest even; a NaN stays a NaN (quiet) with its
 * sign; bf16 never truncates a NaN payload into an infinity. e4m3 is OCP
 * E4M3FN (no infinities; overflow and infinities saturate to the NaN code
 * 0x7f with the input's sign); e5m2 overflows to +-inf. */
FC_API float fc_f16_to_f32(uint16_t bits);
FC_API uint16_t fc_f32_to_f16(float value);
FC_API float fc_bf16_to_f32(uint16_t bits);
FC_API uint16_t fc_f32_to_bf16(float value);
FC_API float fc_e4m3_to_f32(uint8_t bits);
FC_API uint8_t fc_f32_to_e4m3(float value);
FC_API float fc_e5m2_to_f32(uint8_t bits);
FC_API uint8_t fc_f32_to_e5m2(float value);

/* General scalar cast between non-block dtypes: integer ->
 * integer wraps (two's complement), float -> integer truncates toward zero
 * and saturates with NaN -> 0, anything -> bool is (value != 0), bool ->
 * number is 0/1, float -> float rounds to nearest even (through f64 when the
 * target is f64, through f32 otherwise; the f8 formats are floats), integer
 * -> float is (double)v for f64 and (float)v then the f32 bridge otherwise
 * (like torch). A dtype cast to itself copies its bits unchanged. src and
 * dst point at one element each in the dtype's storage representation, any
 * alignment. FC_ERR_NULL_ARG for NULL, FC_ERR_DTYPE for block or invalid
 * dtypes; dst is untouched on error. */
FC_API fc_status fc_cast_scalar(fc_dtype src_dtype, const void *src, fc_dtype dst_dtype,
                                void *dst);
/* Mask truthiness: value != 0; -0.0 is false and NaN is true for every
 * float format. Block or invalid dtypes and NULL give false. */
FC_API bool fc_is_truthy(fc_dtype dtype, const void *value);

/* Bulk conversion of n contiguous elements between any two non-block
 * dtypes, with the semantics of fc_cast_scalar (a dtype into itself copies
 * the bits; bool into bool writes 0/1). Uses SIMD (F16C, AVX-512) where the
 * CPU has it; results are bit-identical to the portable path. src and dst
 * must not overlap; any alignment works (aligned rows are faster).
 * FC_ERR_DTYPE for block or invalid dtypes; FC_ERR_NULL_ARG for a NULL
 * pointer when n > 0 (n == 0 is a no-op and allows NULL). */
FC_API fc_status fc_convert_row(fc_dtype src_dtype, const void *src, fc_dtype dst_dtype, void *dst,
                                size_t n);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_DTYPE_H */
