/* SPDX-License-Identifier: MIT */
/* quant.c - the public entry points of fucina/quant.h for the ggml block
 * formats: argument checks, then one family row function per row.
 *
 * All validation happens here, before any byte of dst is written, so a
 * family receives only what it can handle (see core/quant/quant.h). The
 * dtype is resolved by asking each family's lookup in turn; exactly one
 * owns each block dtype. */
#include <stdbool.h>
#include <stdint.h>

#include "core/quant/quant.h"
#include "fucina/quant.h"

static const fc__quant_fns *family_of(fc_dtype dtype) {
    const fc__quant_fns *(*const lookups[])(fc_dtype) = {
        fc__quant_family_legacy, fc__quant_family_kquant, fc__quant_family_ternary,
        fc__quant_family_fp4,    fc__quant_family_nf4,    fc__quant_family_iquant,
    };
    for (size_t i = 0; i < sizeof lookups / sizeof lookups[0]; i++) {
        const fc__quant_fns *f = lookups[i](dtype);
        if (f) return f;
    }
    return NULL;
}

/* ggml asserts on a NULL importance matrix for these three. */
static bool requires_imatrix(fc_dtype dtype) {
    return dtype == FC_IQ2_XXS || dtype == FC_IQ2_XS || dtype == FC_IQ1_S;
}

static bool finite_f32(float v) { return (fc__q_f32_bits(v) & 0x7f800000u) != 0x7f800000u; }

/* Shape and size checks shared by quantize and dequantize: fills the bytes
 * of one row and the number of floats of the whole matrix. */
static fc_status check_geometry(fc_dtype dtype, int64_t nrows, int64_t ncols, size_t *row_bytes,
                                size_t *n_values) {
    if (!fc_dtype_is_block(dtype)) return FC_ERR_DTYPE;
    if (nrows < 1 || ncols < 1) return FC_ERR_INVALID_SHAPE;
    const int64_t elems = fc_dtype_block_elems(dtype);
    if (ncols % elems != 0) return FC_ERR_INVALID_SHAPE;
    const uint64_t nblocks = (uint64_t)(ncols / elems);
    const uint64_t bsize = fc_dtype_size(dtype);
    if (nblocks > SIZE_MAX / bsize) return FC_ERR_OVERFLOW;
    const size_t rb = (size_t)(nblocks * bsize);
    if ((uint64_t)nrows > SIZE_MAX / rb) return FC_ERR_OVERFLOW;
    if ((uint64_t)ncols > SIZE_MAX / sizeof(float) / (uint64_t)nrows) return FC_ERR_OVERFLOW;
    *row_bytes = rb;
    *n_values = (size_t)nrows * (size_t)ncols;
    return FC_OK;
}

size_t fc_quant_row_bytes(fc_dtype dtype, int64_t ncols) {
    size_t rb, nv;
    return check_geometry(dtype, 1, ncols, &rb, &nv) == FC_OK ? rb : 0;
}

fc_status fc_quantize(fc_dtype dtype, const float *src, void *dst, int64_t nrows, int64_t ncols) {
    return fc_quantize_ex(dtype, src, dst, nrows, ncols, NULL, 0);
}

fc_status fc_quantize_ex(fc_dtype dtype, const float *src, void *dst, int64_t nrows, int64_t ncols,
                         const float *imatrix, unsigned flags) {
    if (!src || !dst) return FC_ERR_NULL_ARG;
    size_t row_bytes, n_values;
    fc_status st = check_geometry(dtype, nrows, ncols, &row_bytes, &n_values);
    if (st != FC_OK) return st;
    if (flags & ~(unsigned)FC_QUANT_IQ4NL_REF) return FC_ERR_INVALID_ARG;
    if ((flags & FC_QUANT_IQ4NL_REF) && dtype != FC_IQ4_NL) return FC_ERR_INVALID_ARG;
    if (requires_imatrix(dtype) && !imatrix) return FC_ERR_INVALID_ARG;
    if (imatrix) {
        for (int64_t j = 0; j < ncols; j++) {
            if (!finite_f32(imatrix[j]) || imatrix[j] < 0.0f) return FC_ERR_INVALID_ARG;
        }
    }
    for (size_t i = 0; i < n_values; i++) {
        if (!finite_f32(src[i])) return FC_ERR_NON_FINITE;
    }
    const fc__quant_fns *fns = family_of(dtype);
    if (!fns) return FC_ERR_DTYPE;
    if (flags & FC_QUANT_IQ4NL_REF) {
        /* rows are contiguous blocks in src and dst alike (no padding) */
        return fns->quantize_row(src, dst, (int64_t)n_values, NULL, flags);
    }
    uint8_t *out = dst;
    for (int64_t r = 0; r < nrows; r++) {
        st = fns->quantize_row(src + (size_t)r * (size_t)ncols, out + (size_t)r * row_bytes, ncols,
                               imatrix, flags);
        if (st != FC_OK) return st;
    }
    return FC_OK;
}

fc_status fc_dequantize(fc_dtype dtype, const void *src, float *dst, int64_t nrows, int64_t ncols) {
    if (!src || !dst) return FC_ERR_NULL_ARG;
    size_t row_bytes, n_values;
    fc_status st = check_geometry(dtype, nrows, ncols, &row_bytes, &n_values);
    if (st != FC_OK) return st;
    const fc__quant_fns *fns = family_of(dtype);
    if (!fns) return FC_ERR_DTYPE;
    const uint8_t *in = src;
    for (int64_t r = 0; r < nrows; r++) {
        fns->dequantize_row(in + (size_t)r * row_bytes, dst + (size_t)r * (size_t)ncols, ncols);
    }
    return FC_OK;
}
