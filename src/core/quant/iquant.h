/* SPDX-License-Identifier: MIT */
/* iquant.h - the i-quant family's entry in the block-quantization registry.
 *
 * fc__quant_family_iquant(dtype) hands out the row quantizer and dequantizer
 * of ggml's i-quant formats: iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs,
 * iq3_s, iq4_nl and iq4_xs. Both produce and consume ggml's exact bytes
 * (tests/data/ggml holds the oracle).
 *
 * The registry types (fc__quant_fns, FC_QUANT_IQ4NL_REF) are owned by
 * core/quant/quant.h. Until that header exists everywhere, this one carries an
 * identical copy behind the same guards, so either header may come first.
 */
#ifndef FUCINA_CORE_QUANT_IQUANT_H
#define FUCINA_CORE_QUANT_IQUANT_H

#include <stdint.h>

#include "fucina/dtype.h"
#include "fucina/status.h"

#ifndef FC__QUANT_FNS_DEFINED
#define FC__QUANT_FNS_DEFINED
/* quantize_row: n elements of src -> n / block_elems blocks at dst. imatrix
 * (NULL allowed unless the type requires one) holds one importance weight per
 * element of the row. dequantize_row: n / block_elems blocks -> n floats. */
typedef struct fc__quant_fns {
    fc_status (*quantize_row)(const float *src, void *dst, int64_t n, const float *imatrix,
                              unsigned flags);
    void (*dequantize_row)(const void *src, float *dst, int64_t n);
} fc__quant_fns;
#endif

#ifndef FC_QUANT_IQ4NL_REF
/* iq4_nl only: use ggml's quantize_row_iq4_nl_ref (no scale search) instead of
 * the scale-searching quantizer that ggml_quantize_chunk runs. */
#define FC_QUANT_IQ4NL_REF 1u
#endif

/* The functions for an i-quant dtype, or NULL for every other dtype (the
 * registry then asks the next family). Static storage; never fails.
 *
 * quantize_row contract, for every type here:
 *  - FC_ERR_NULL_ARG when src or dst is NULL;
 *  - FC_ERR_INVALID_SHAPE when n < 0 or n is not a multiple of the block size
 *    (32 for iq4_nl, 256 for the others); n == 0 writes nothing and succeeds;
 *  - FC_ERR_INVALID_ARG when imatrix is NULL for iq2_xxs, iq2_xs or iq1_s,
 *    which ggml only defines with an importance matrix;
 *  - FC_ERR_STATE if a grid type's lookup tables could not be built (only a
 *    corrupted grid table could cause it; the tests rule it out);
 *  - flags: FC_QUANT_IQ4NL_REF selects iq4_nl's reference variant; every
 *    other bit is ignored.
 * Checks run in this order; on any error dst is untouched.
 * In FC_QUANT_IQ4NL_REF mode a block whose largest magnitude is below 1e-15
 * keeps the codes of the block before it in the same call (ggml reuses its
 * code buffer there); the first block of a call starts from code 8 (level +1).
 * Its scale is 0, so only the sign of the zeros it decodes to depends on this.
 * Quantizing several rows in one call therefore reproduces ggml exactly.
 *
 * dequantize_row decodes n / block_size whole blocks; with NULL pointers or
 * n <= 0 it does nothing (the registry validates shapes before calling). */
const fc__quant_fns *fc__quant_family_iquant(fc_dtype dtype);

#endif /* FUCINA_CORE_QUANT_IQUANT_H */
