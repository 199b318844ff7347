/* SPDX-License-Identifier: MIT */
/* dtype.c - the dtype traits table and the policy of seed 000 sections 8.1-8.3.
 *
 * One table, indexed by fc_dtype and generated from FC_DTYPE_LIST, holds the
 * name, kind and geometry of every dtype; the static asserts below pin the
 * block geometry of the spec so a typo in the list cannot slip through. */
#include "fucina/dtype.h"

#include <string.h>

typedef struct dtype_traits {
    const char *name;
    fc_dtype_kind kind;
    size_t size;         /* scalar size or block bytes */
    int64_t block_elems; /* 1 for scalars */
} dtype_traits;

static const dtype_traits traits[FC_DTYPE_COUNT] = {
#define FC__TRAITS(e, name, kind, bytes, elems) [e] = {name, kind, bytes, elems},
    FC_DTYPE_LIST(FC__TRAITS)
#undef FC__TRAITS
};

/* The 40 dtypes of the spec plus the two appended ones. */
_Static_assert(FC_DTYPE_COUNT == 42, "dtype list changed: update the traits asserts");
_Static_assert(FC_NVFP4 == 39, "the spec's 40 dtypes must keep their order");

/* Block geometry of seed 000 section 8.1, pinned: {bytes, elems} per block. */
#define FC__CHECK(e, name, kind, bytes, elems) enum { e##__list_bytes = bytes, e##__list_elems = elems };
FC_DTYPE_LIST(FC__CHECK)
#undef FC__CHECK
#define FC__ASSERT_BLOCK(e, b, n)                                                                  \
    _Static_assert(e##__list_bytes == (b) && e##__list_elems == (n), #e " block geometry");
FC__ASSERT_BLOCK(FC_Q1_0, 18, 128)
FC__ASSERT_BLOCK(FC_Q2_0, 34, 128)
FC__ASSERT_BLOCK(FC_Q4_0, 18, 32)
FC__ASSERT_BLOCK(FC_Q4_1, 20, 32)
FC__ASSERT_BLOCK(FC_Q5_0, 22, 32)
FC__ASSERT_BLOCK(FC_Q5_1, 24, 32)
FC__ASSERT_BLOCK(FC_Q8_0, 34, 32)
FC__ASSERT_BLOCK(FC_Q8_1, 36, 32)
FC__ASSERT_BLOCK(FC_Q2_K, 84, 256)
FC__ASSERT_BLOCK(FC_Q3_K, 110, 256)
FC__ASSERT_BLOCK(FC_Q4_K, 144, 256)
FC__ASSERT_BLOCK(FC_Q5_K, 176, 256)
FC__ASSERT_BLOCK(FC_Q6_K, 210, 256)
FC__ASSERT_BLOCK(FC_Q8_K, 292, 256)
FC__ASSERT_BLOCK(FC_IQ1_S, 50, 256)
FC__ASSERT_BLOCK(FC_IQ1_M, 56, 256)
FC__ASSERT_BLOCK(FC_IQ2_XXS, 66, 256)
FC__ASSERT_BLOCK(FC_IQ2_XS, 74, 256)
FC__ASSERT_BLOCK(FC_IQ2_S, 82, 256)
FC__ASSERT_BLOCK(FC_IQ3_XXS, 98, 256)
FC__ASSERT_BLOCK(FC_IQ3_S, 110, 256)
FC__ASSERT_BLOCK(FC_IQ4_NL, 18, 32)
FC__ASSERT_BLOCK(FC_IQ4_XS, 136, 256)
FC__ASSERT_BLOCK(FC_TQ1_0, 54, 256)
FC__ASSERT_BLOCK(FC_TQ2_0, 66, 256)
FC__ASSERT_BLOCK(FC_MXFP4, 17, 32)
FC__ASSERT_BLOCK(FC_NVFP4, 36, 64)
FC__ASSERT_BLOCK(FC_Q2_0_G64, 18, 64)
FC__ASSERT_BLOCK(FC_NF4, 34, 64)
#undef FC__ASSERT_BLOCK

bool fc_dtype_is_valid(fc_dtype dtype) { return (int)dtype >= 0 && dtype < FC_DTYPE_COUNT; }

const char *fc_dtype_name(fc_dtype dtype) {
    return fc_dtype_is_valid(dtype) ? traits[dtype].name : "invalid";
}

fc_status fc_dtype_from_name(const char *name, fc_dtype *out) {
    if (!name || !out) return FC_ERR_NULL_ARG;
    for (int i = 0; i < FC_DTYPE_COUNT; i++) {
        if (strcmp(traits[i].name, name) == 0) {
            *out = (fc_dtype)i;
            return FC_OK;
        }
    }
    return FC_ERR_DTYPE;
}

fc_dtype_kind fc_dtype_kind_of(fc_dtype dtype) {
    return fc_dtype_is_valid(dtype) ? traits[dtype].kind : FC_KIND_SCALAR;
}
bool fc_dtype_is_scalar(fc_dtype dtype) {
    return fc_dtype_is_valid(dtype) && traits[dtype].kind == FC_KIND_SCALAR;
}
bool fc_dtype_is_block(fc_dtype dtype) {
    return fc_dtype_is_valid(dtype) && traits[dtype].kind == FC_KIND_BLOCK;
}
size_t fc_dtype_size(fc_dtype dtype) { return fc_dtype_is_valid(dtype) ? traits[dtype].size : 0; }
int64_t fc_dtype_block_elems(fc_dtype dtype) {
    return fc_dtype_is_valid(dtype) ? traits[dtype].block_elems : 0;
}

bool fc_dtype_is_f8(fc_dtype dtype) { return dtype == FC_F8_E4M3 || dtype == FC_F8_E5M2; }
bool fc_dtype_is_signed_int(fc_dtype dtype) {
    return dtype == FC_I8 || dtype == FC_I16 || dtype == FC_I32 || dtype == FC_I64;
}
bool fc_dtype_is_unsigned_int(fc_dtype dtype) { return dtype == FC_U8 || dtype == FC_U16; }
bool fc_dtype_is_float(fc_dtype dtype) {
    return dtype == FC_F16 || dtype == FC_BF16 || dtype == FC_F32 || dtype == FC_F64;
}
bool fc_dtype_supports_grad(fc_dtype dtype) {
    return dtype == FC_F16 || dtype == FC_BF16 || dtype == FC_F32 || dtype == FC_F64;
}
bool fc_dtype_supports_int_math(fc_dtype dtype) {
    return fc_dtype_is_signed_int(dtype) || fc_dtype_is_unsigned_int(dtype);
}
bool fc_dtype_supports_to_float(fc_dtype dtype) {
    return fc_dtype_is_float(dtype) || fc_dtype_is_f8(dtype) ||
           fc_dtype_is_block(dtype);
}
bool fc_dtype_supports_quantized_matmul_rhs(fc_dtype dtype) {
    return fc_dtype_is_block(dtype) && dtype != FC_Q8_1 && dtype != FC_Q8_K;
}

fc_dtype fc_dtype_logical(fc_dtype dtype) {
    if (fc_dtype_is_block(dtype) || fc_dtype_is_f8(dtype)) return FC_F32;
    return dtype;
}

fc_accum fc_dtype_accumulator(fc_dtype dtype) {
    switch (dtype) {
    case FC_F16:
    case FC_BF16:
    case FC_F32:
    case FC_F8_E4M3:
    case FC_F8_E5M2:
        return FC_ACCUM_F32;
    case FC_F64:
        return FC_ACCUM_F64;
    case FC_BOOL:
    case FC_U8:
    case FC_U16:
        return FC_ACCUM_U64;
    case FC_I8:
    case FC_I16:
    case FC_I32:
    case FC_I64:
        return FC_ACCUM_I64;
    default:
        return FC_ACCUM_NONE;
    }
}

fc_status fc_dtype_policy(fc_float_op op, fc_dtype input, fc_dtype *compute, fc_dtype *output) {
    fc_dtype c, o;
    if (!fc_dtype_is_valid(input) || (int)op < 0 || op >= FC_FLOAT_OP_COUNT) return FC_ERR_DTYPE;
    if (fc_dtype_is_block(input)) {
        c = o = input;
    } else if (fc_dtype_is_f8(input)) {
        return FC_ERR_DTYPE; /* storage-only floats: cast first */
    } else if (input == FC_F64) {
        c = o = FC_F64;
    } else if (fc_dtype_is_float(input)) {
        switch (op) {
        case FC_FLOAT_OP_POINTWISE:
            c = input == FC_BF16 ? FC_F32 : input; /* f16 computes in f16, bf16 via f32 */
            o = input;
            break;
        case FC_FLOAT_OP_WIDENED:
        case FC_FLOAT_OP_MATMUL:
            c = FC_F32;
            o = input;
            break;
        default: /* reduction */
            c = o = FC_F32;
            break;
        }
    } else if (input == FC_BOOL) {
        if (op != FC_FLOAT_OP_REDUCTION) return FC_ERR_DTYPE;
        c = o = FC_I64;
    } else { /* integers */
        if (op == FC_FLOAT_OP_POINTWISE) {
            c = o = input;
        } else if (op == FC_FLOAT_OP_REDUCTION) {
            c = o = FC_I64;
        } else {
            return FC_ERR_DTYPE;
        }
    }
    if (compute) *compute = c;
    if (output) *output = o;
    return FC_OK;
}
