/* SPDX-License-Identifier: MIT */
/* iquant.c - the i-quant family's registry entry: argument checks and the
 * table of row functions (see iquant.h for the contract).
 *
 * The per-type quantizers in iquant_{1,2,3,4}.c trust their arguments; this
 * file is the only door to them, so every check lives here. The lattice
 * tables are built on the first quantize call of a type that needs them.
 */
#include "core/quant/iquant_impl.h"

typedef struct iq_type {
    fc__iq_lattice_id lattice; /* FC__IQ_LAT_COUNT: no lattice (iq4 types) */
    int64_t block_elems;
    bool needs_imatrix;
} iq_type;

static iq_type type_info(fc_dtype dtype) {
    switch (dtype) {
    case FC_IQ1_S:
        return (iq_type){FC__IQ_LAT_IQ1S, FC__IQ_QK, true};
    case FC_IQ1_M:
        return (iq_type){FC__IQ_LAT_IQ1S, FC__IQ_QK, false};
    case FC_IQ2_XXS:
        return (iq_type){FC__IQ_LAT_IQ2XXS, FC__IQ_QK, true};
    case FC_IQ2_XS:
        return (iq_type){FC__IQ_LAT_IQ2XS, FC__IQ_QK, true};
    case FC_IQ2_S:
        return (iq_type){FC__IQ_LAT_IQ2S, FC__IQ_QK, false};
    case FC_IQ3_XXS:
        return (iq_type){FC__IQ_LAT_IQ3XXS, FC__IQ_QK, false};
    case FC_IQ3_S:
        return (iq_type){FC__IQ_LAT_IQ3S, FC__IQ_QK, false};
    case FC_IQ4_NL:
        return (iq_type){FC__IQ_LAT_COUNT, FC__IQ4NL_QK, false};
    default:
        return (iq_type){FC__IQ_LAT_COUNT, FC__IQ_QK, false}; /* FC_IQ4_XS */
    }
}

static fc_status quantize_any(fc_dtype dtype, const float *src, void *dst, int64_t n,
                              const float *imatrix, unsigned flags) {
    const iq_type t = type_info(dtype);
    if (!src || !dst) return FC_ERR_NULL_ARG;
    if (n < 0 || n % t.block_elems != 0) return FC_ERR_INVALID_SHAPE;
    if (t.needs_imatrix && !imatrix) return FC_ERR_INVALID_ARG;
    if (t.lattice != FC__IQ_LAT_COUNT && !fc__iq_lattice_get(t.lattice)) return FC_ERR_STATE;
    switch (dtype) {
    case FC_IQ1_S:
        fc__iq1_s_quantize(src, dst, n, imatrix);
        break;
    case FC_IQ1_M:
        fc__iq1_m_quantize(src, dst, n, imatrix);
        break;
    case FC_IQ2_XXS:
        fc__iq2_xxs_quantize(src, dst, n, imatrix);
        break;
    case FC_IQ2_XS:
        fc__iq2_xs_quantize(src, dst, n, imatrix);
        break;
    case FC_IQ2_S:
        fc__iq2_s_quantize(src, dst, n, imatrix);
        break;
    case FC_IQ3_XXS:
        fc__iq3_xxs_quantize(src, dst, n, imatrix);
        break;
    case FC_IQ3_S:
        fc__iq3_s_quantize(src, dst, n, imatrix);
        break;
    case FC_IQ4_NL:
        fc__iq4_nl_quantize(src, dst, n, imatrix, (flags & FC_QUANT_IQ4NL_REF) != 0);
        break;
    default:
        fc__iq4_xs_quantize(src, dst, n, imatrix);
        break;
    }
    return FC_OK;
}

static void dequantize_any(fc_dtype dtype, const void *src, float *dst, int64_t n) {
    if (!src || !dst || n <= 0) return;
    switch (dtype) {
    case FC_IQ1_S:
        fc__iq1_s_dequantize(src, dst, n);
        break;
    case FC_IQ1_M:
        fc__iq1_m_dequantize(src, dst, n);
        break;
    case FC_IQ2_XXS:
        fc__iq2_xxs_dequantize(src, dst, n);
        break;
    case FC_IQ2_XS:
        fc__iq2_xs_dequantize(src, dst, n);
        break;
    case FC_IQ2_S:
        fc__iq2_s_dequantize(src, dst, n);
        break;
    case FC_IQ3_XXS:
        fc__iq3_xxs_dequantize(src, dst, n);
        break;
    case FC_IQ3_S:
        fc__iq3_s_dequantize(src, dst, n);
        break;
    case FC_IQ4_NL:
        fc__iq4_nl_dequantize(src, dst, n);
        break;
    default:
        fc__iq4_xs_dequantize(src, dst, n);
        break;
    }
}

/* The registry stores plain function pointers, hence one thin pair per type. */
static fc_status q_iq1_s(const float *s, void *d, int64_t n, const float *im, unsigned f) {
    return quantize_any(FC_IQ1_S, s, d, n, im, f);
}
static fc_status q_iq1_m(const float *s, void *d, int64_t n, const float *im, unsigned f) {
    return quantize_any(FC_IQ1_M, s, d, n, im, f);
}
static fc_status q_iq2_xxs(const float *s, void *d, int64_t n, const float *im, unsigned f) {
    return quantize_any(FC_IQ2_XXS, s, d, n, im, f);
}
static fc_status q_iq2_xs(const float *s, void *d, int64_t n, const float *im, unsigned f) {
    return quantize_any(FC_IQ2_XS, s, d, n, im, f);
}
static fc_status q_iq2_s(const float *s, void *d, int64_t n, const float *im, unsigned f) {
    return quantize_any(FC_IQ2_S, s, d, n, im, f);
}
static fc_status q_iq3_xxs(const float *s, void *d, int64_t n, const float *im, unsigned f) {
    return quantize_any(FC_IQ3_XXS, s, d, n, im, f);
}
static fc_status q_iq3_s(const float *s, void *d, int64_t n, const float *im, unsigned f) {
    return quantize_any(FC_IQ3_S, s, d, n, im, f);
}
static fc_status q_iq4_nl(const float *s, void *d, int64_t n, const float *im, unsigned f) {
    return quantize_any(FC_IQ4_NL, s, d, n, im, f);
}
static fc_status q_iq4_xs(const float *s, void *d, int64_t n, const float *im, unsigned f) {
    return quantize_any(FC_IQ4_XS, s, d, n, im, f);
}
static void dq_iq1_s(const void *s, float *d, int64_t n) { dequantize_any(FC_IQ1_S, s, d, n); }
static void dq_iq1_m(const void *s, float *d, int64_t n) { dequantize_any(FC_IQ1_M, s, d, n); }
static void dq_iq2_xxs(const void *s, float *d, int64_t n) { dequantize_any(FC_IQ2_XXS, s, d, n); }
static void dq_iq2_xs(const void *s, float *d, int64_t n) { dequantize_any(FC_IQ2_XS, s, d, n); }
static void dq_iq2_s(const void *s, float *d, int64_t n) { dequantize_any(FC_IQ2_S, s, d, n); }
static void dq_iq3_xxs(const void *s, float *d, int64_t n) { dequantize_any(FC_IQ3_XXS, s, d, n); }
static void dq_iq3_s(const void *s, float *d, int64_t n) { dequantize_any(FC_IQ3_S, s, d, n); }
static void dq_iq4_nl(const void *s, float *d, int64_t n) { dequantize_any(FC_IQ4_NL, s, d, n); }
static void dq_iq4_xs(const void *s, float *d, int64_t n) { dequantize_any(FC_IQ4_XS, s, d, n); }

static const fc__quant_fns fns_iq1_s = {q_iq1_s, dq_iq1_s};
static const fc__quant_fns fns_iq1_m = {q_iq1_m, dq_iq1_m};
static const fc__quant_fns fns_iq2_xxs = {q_iq2_xxs, dq_iq2_xxs};
static const fc__quant_fns fns_iq2_xs = {q_iq2_xs, dq_iq2_xs};
static const fc__quant_fns fns_iq2_s = {q_iq2_s, dq_iq2_s};
static const fc__quant_fns fns_iq3_xxs = {q_iq3_xxs, dq_iq3_xxs};
static const fc__quant_fns fns_iq3_s = {q_iq3_s, dq_iq3_s};
static const fc__quant_fns fns_iq4_nl = {q_iq4_nl, dq_iq4_nl};
static const fc__quant_fns fns_iq4_xs = {q_iq4_xs, dq_iq4_xs};

const fc__quant_fns *fc__quant_family_iquant(fc_dtype dtype) {
    switch (dtype) {
    case FC_IQ1_S:
        return &fns_iq1_s;
    case FC_IQ1_M:
        return &fns_iq1_m;
    case FC_IQ2_XXS:
        return &fns_iq2_xxs;
    case FC_IQ2_XS:
        return &fns_iq2_xs;
    case FC_IQ2_S:
        return &fns_iq2_s;
    case FC_IQ3_XXS:
        return &fns_iq3_xxs;
    case FC_IQ3_S:
        return &fns_iq3_s;
    case FC_IQ4_NL:
        return &fns_iq4_nl;
    case FC_IQ4_XS:
        return &fns_iq4_xs;
    default:
        return NULL;
    }
}
