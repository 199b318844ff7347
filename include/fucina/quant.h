/* SPDX-License-Identifier: MIT */
/* fucina/quant.h - block-quantized rows (ggml wire formats) and the blockwise
 * int8 / int4 / NF4 quantization (QLoRA style) with double quantization.
 *
 * Part 1: ggml block formats. A matrix of nrows x ncols f32 values is stored
 * row by row; each row is ncols / fc_dtype_block_elems(dtype) packed blocks of
 * fc_dtype_size(dtype) bytes, so row r starts at r * fc_quant_row_bytes(...).
 * Blocks are the little-endian byte layouts of ggml's block structs; the
 * reference quantizers reproduce ggml's bytes exactly (tests/data/ggml):
 * fc_quantize(t, x, ...) equals ggml_quantize_chunk(t, x, ..., imatrix=NULL),
 * fc_quantize_ex with an imatrix equals ggml_quantize_chunk with that
 * imatrix, and fc_dequantize equals ggml's to_float. FC_Q2_0 is the 128-element q2_0
 * of PrismML's fork, FC_Q2_0_G64 ggml master's 64-element q2_0; q8_1 and q8_k
 * follow quantize_row_q8_1_ref / quantize_row_q8_K_ref. FC_NF4 (64 elements,
 * {f16 absmax; u8 codes[32]}) is fucina's own: absmax scale, nearest NF4
 * level, code nibbles low first.
 *
 * Where ggml's reference code has no defined result the library picks one:
 *  - a float -> integer conversion that does not fit (ggml reaches it when a
 *    block's scale underflows, e.g. rows of f32 subnormals) gives what
 *    x86-64 gives ggml (the "integer indefinite" 0x80000000, then narrowed),
 *    so such rows still match ggml built for x86-64 byte for byte;
 *  - an f16 field (a scale, a min, q8_1's sum, the i-quants' block and
 *    super-block scales) that would be infinite (beyond +-65504, e.g. rows
 *    near FLT_MAX, near-constant iq1_m rows above ~1.4e5 or iq4_nl rows
 *    above ~7.6e6, rows weighted by a huge imatrix, or q8_1 blocks whose
 *    code sum times the scale passes 65504) saturates to +-65504, and a
 *    scale that a degenerate search left NaN is stored as 0; q8_k's f32
 *    scale steps toward zero until 127 times it is finite. ggml would store
 *    inf/NaN there; fucina keeps every code and every dequantized value
 *    finite for finite input (values beyond the format's range are clipped,
 *    not preserved).
 *
 * Part 2: blockwise absmax quantization (QLoRA style). n values in
 * consecutive blocks of block_size (the last block may be shorter and is
 * scaled by its own absmax). Each block stores one f32 scale = its absmax and
 * one int8 code per value:
 *   FC_BLOCKQ_INT8: code = round(x / absmax * 127), in [-127, 127];
 *                   x' = code / 127 * absmax
 *   FC_BLOCKQ_INT4: code = round(x / absmax * 7), in [-7, 7];
 *                   x' = code / 7 * absmax
 *   FC_BLOCKQ_NF4:  code = (index of the nearest NF4 level to x / absmax) - 8,
 *                   in [-8, 7]; x' = fc_nf4_level(code + 8) * absmax
 * round() is half away from zero; ties between two NF4 levels go to the
 * lower level. A block whose absmax is 0 stores scale 0 and codes that
 * decode to 0. 4-bit codes pack two per byte with fc_pack_int4: nibble =
 * code + 8, element 2i in the low nibble of byte i, element 2i+1 in the
 * high nibble (for NF4 the nibble is the level index, the same nibble an
 * FC_NF4 block stores).
 *
 * Double quantization (QLoRA): the per-block f32 scales are themselves
 * quantized in outer blocks of outer_block scales (256 is the usual choice;
 * the last outer block may be shorter). Per outer block o covering scales
 * s[i], the layout is
 *   float   mean[o]    = mean of the s[i] (an offset, computed in double)
 *   float   absmax[o]  = max |s[i] - mean[o]|
 *   int8_t  q[i]       = round((s[i] - mean[o]) / absmax[o] * 127), [-127, 127]
 * and a scale decodes as s'[i] = q[i] / 127 * absmax[o] + mean[o], clamped to
 * [0, FLT_MAX] (scales are absmaxes, never negative). This replaces 32 bits
 * per block by 8 + 64 / outer_block bits.
 *
 * Threads: every function here is pure (no global state) and may run
 * concurrently on disjoint outputs. Nothing allocates. */
#ifndef FUCINA_QUANT_H
#define FUCINA_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/dtype.h"
#include "fucina/export.h"
#include "fucina/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ggml block formats ---------------------------------------------------- */

/* Flag for fc_quantize_ex, iq4_nl only: use ggml's quantize_row_iq4_nl_ref
 * (the type trait's from_float_ref, no scale search) instead of
 * ggml_quantize_chunk's searching quantizer. Like ggml's function applied
 * to the contiguous matrix, it runs over all rows as one sequence (an
 * all-zero block repeats the codes of the block before it; see
 * core/quant/iquant.h) and takes no imatrix (one given is ignored). Any
 * other dtype refuses the flag (FC_ERR_INVALID_ARG). */
#define FC_QUANT_IQ4NL_REF 1u

/* Bytes of one quantized row of ncols values: ncols / block_elems * block
 * bytes. Returns 0 when dtype is not a block dtype, ncols < 1, ncols is not
 * a multiple of the block size, or the size does not fit in size_t. */
FC_API size_t fc_quant_row_bytes(fc_dtype dtype, int64_t ncols);

/* Quantizes nrows x ncols row-major f32 values (src, borrowed) into dst,
 * which must hold nrows * fc_quant_row_bytes(dtype, ncols) bytes. Same as
 * fc_quantize_ex(dtype, src, dst, nrows, ncols, NULL, 0).
 * Returns FC_OK; FC_ERR_NULL_ARG for a NULL src or dst; FC_ERR_DTYPE for a
 * scalar or invalid dtype; FC_ERR_INVALID_SHAPE when nrows < 1, ncols < 1 or
 * ncols is not a multiple of the block size; FC_ERR_OVERFLOW when the byte
 * counts do not fit in size_t; FC_ERR_INVALID_ARG for dtypes that need an
 * importance matrix (iq2_xxs, iq2_xs, iq1_s); FC_ERR_NON_FINITE when src
 * holds a NaN or an infinity. All of these are checked before anything is
 * written: on such an error dst is untouched. */
FC_API fc_status fc_quantize(fc_dtype dtype, const float *src, void *dst, int64_t nrows,
                             int64_t ncols);

/* fc_quantize with an importance matrix and flags. imatrix (NULL allowed,
 * borrowed) holds ncols finite, non-negative weights, one per column, used
 * for every row the way ggml_quantize_chunk uses quant_weights: the legacy
 * q4_0/q4_1/q5_0/q5_1, the k-quants q2_k..q6_k and the i-quants switch to
 * their weighted search; the other formats ignore it, as ggml does.
 * flags: 0 or FC_QUANT_IQ4NL_REF. Errors as fc_quantize, plus
 * FC_ERR_INVALID_ARG for an imatrix value that is negative or not finite,
 * for unknown flag bits, or a flag the dtype does not take. */
FC_API fc_status fc_quantize_ex(fc_dtype dtype, const float *src, void *dst, int64_t nrows,
                                int64_t ncols, const float *imatrix, unsigned flags);

/* Dequantizes nrows rows of ncols values from src (borrowed, nrows *
 * fc_quant_row_bytes bytes) into dst (nrows * ncols floats). Any bytes are
 * accepted (scales that are inf/NaN in the data decode as such).
 * Returns FC_OK; FC_ERR_NULL_ARG, FC_ERR_DTYPE, FC_ERR_INVALID_SHAPE and
 * FC_ERR_OVERFLOW as fc_quantize. */
FC_API fc_status fc_dequantize(fc_dtype dtype, const void *src, float *dst, int64_t nrows,
                               int64_t ncols);

/* ---- blockwise int8 / int4 / NF4 ------------------------------------------------- */

/* The blockwise quantization formats of fc_blockq_quantize. */
typedef enum fc_blockq_kind {
    FC_BLOCKQ_INT8, /* symmetric, codes [-127, 127] */
    FC_BLOCKQ_INT4, /* symmetric, codes [-7, 7] */
    FC_BLOCKQ_NF4,  /* NF4 codebook, codes [-8, 7] = level index - 8 */
    FC_BLOCKQ_COUNT
} fc_blockq_kind;

/* The 16 NF4 levels (QLoRA's normal-quantile codebook): level 0 is -1.0,
 * level 7 is 0.0, level 15 is 1.0. Returns 0.0f for index outside 0..15. */
FC_API float fc_nf4_level(int index);

/* Number of blocks for n values: ceil(n / block_size); 0 when block_size is 0. */
FC_API size_t fc_blockq_block_count(size_t n, size_t block_size);

/* Quantizes x[0..n) (borrowed) blockwise: codes gets n codes, scales gets
 * fc_blockq_block_count(n, block_size) absmax scales (layout in the file
 * comment). Returns FC_OK; FC_ERR_NULL_ARG for a NULL pointer;
 * FC_ERR_INVALID_ARG for an unknown kind; FC_ERR_INVALID_SHAPE when n or
 * block_size is 0; FC_ERR_NON_FINITE when x holds a NaN or infinity (nothing
 * is written then). */
FC_API fc_status fc_blockq_quantize(fc_blockq_kind kind, const float *x, size_t n,
                                    size_t block_size, int8_t *codes, float *scales);

/* Inverse of fc_blockq_quantize: out[0..n) from n codes and the block scales.
 * INT8 takes any int8 code (-128 decodes to -128/127 * absmax); INT4 and NF4
 * take codes in [-8, 7] (an INT4 -8 decodes to -8/7 * absmax). A code
 * outside that range, or a negative or non-finite scale, is refused with
 * FC_ERR_INVALID_ARG and nothing is written. Other errors as above. */
FC_API fc_status fc_blockq_dequantize(fc_blockq_kind kind, const int8_t *codes, const float *scales,
                                      size_t n, size_t block_size, float *out);

/* Bytes that n packed 4-bit codes take: ceil(n / 2). */
FC_API size_t fc_int4_packed_bytes(size_t n);

/* Packs n codes in [-8, 7] two per byte (nibble = code + 8, low nibble
 * first); an odd trailing code leaves the high nibble 0. out must hold
 * fc_int4_packed_bytes(n) bytes. Example: [-8, 7, 0, -1, 3] -> [240, 120, 11].
 * Returns FC_OK; FC_ERR_NULL_ARG; FC_ERR_INVALID_ARG for a code outside
 * [-8, 7] (nothing written). n = 0 is a no-op. */
FC_API fc_status fc_pack_int4(const int8_t *codes, size_t n, uint8_t *out);

/* Unpacks n codes (nibble - 8) from fc_int4_packed_bytes(n) bytes.
 * Returns FC_OK or FC_ERR_NULL_ARG. n = 0 is a no-op. */
FC_API fc_status fc_unpack_int4(const uint8_t *packed, size_t n, int8_t *codes);

/* Double quantization of n_scales block scales (borrowed; finite, >= 0) in
 * outer blocks of outer_block scales: q gets n_scales codes, absmax and mean
 * get fc_blockq_block_count(n_scales, outer_block) floats each (layout in the
 * file comment). Returns FC_OK; FC_ERR_NULL_ARG; FC_ERR_INVALID_SHAPE when
 * n_scales or outer_block is 0; FC_ERR_INVALID_ARG for a negative scale;
 * FC_ERR_NON_FINITE for a NaN or infinite scale (nothing written on error). */
FC_API fc_status fc_double_quant_scales(const float *scales, size_t n_scales, size_t outer_block,
                                        int8_t *q, float *absmax, float *mean);

/* Decodes n_scales scales from the double-quantized form (see the file
 * comment); any int8 code is accepted. Returns FC_OK; FC_ERR_NULL_ARG;
 * FC_ERR_INVALID_SHAPE when n_scales or outer_block is 0; FC_ERR_INVALID_ARG
 * for an absmax or mean that is negative or not finite (nothing written). */
FC_API fc_status fc_double_dequant_scales(const int8_t *q, const float *absmax, const float *mean,
                                          size_t n_scales, size_t outer_block, float *scales);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_QUANT_H */
