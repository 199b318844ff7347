/* SPDX-License-Identifier: MIT */
/* cast.c - the scalar cast rules of seed 000 section 8.2, as row "legs".
 *
 * Every cast between two non-block dtypes runs as load -> intermediate ->
 * store, with the intermediate fixed by the pair (fc__cast_route_of):
 *
 *   dst bool                 truthiness (value != 0; -0.0 false, NaN true)
 *   src integer or bool      i64: integers wrap (two's complement) on store;
 *                            a float target gets (double)v for f64 and
 *                            (float)v then the f32 bridge otherwise, the
 *                            route torch takes (so i64 -> bf16 rounds twice)
 *   src float, dst int/f64   f64: every float widens exactly; integers
 *                            truncate toward zero and saturate, NaN -> 0
 *   src float, other float   f32 (f64 narrows with round-to-nearest-even),
 *                            then the f16/bf16/fp8 bridge
 *   src == dst (not bool)    the bits are copied unchanged (NaN payloads too)
 *
 * The f8 formats are floats here, so their raw u8 storage never takes the
 * integer legs. No leg converts an out-of-range float to an integer type or
 * overflows a signed type: saturation is decided in f64 before the C
 * conversion, and wrapping stores go through unsigned types.
 *
 * fc_cast_scalar is the legs with n == 1 over aligned local copies, so it
 * accepts pointers of any alignment; convert_row.c runs the same legs in
 * chunks for the pairs that have no direct loop. */
#include <string.h>

#include "core/convert.h"

static bool is_int(fc_dtype t) { return fc_dtype_supports_int_math(t); }

fc__cast_route fc__cast_route_of(fc_dtype src, fc_dtype dst) {
    if (dst == FC_BOOL) return FC__ROUTE_BOOL;
    if (src == dst) return FC__ROUTE_COPY;
    if (src == FC_BOOL || is_int(src)) return FC__ROUTE_I64;
    if (is_int(dst) || dst == FC_F64) return FC__ROUTE_F64;
    return FC__ROUTE_F32;
}

/* ---- loads -------------------------------------------------------------- */

void fc__truthy_row(fc_dtype src_dtype, const void *src, uint8_t *dst, size_t n) {
    switch (src_dtype) {
    case FC_BOOL:
    case FC_U8:
    case FC_I8:
        for (size_t i = 0; i < n; i++)
            dst[i] = ((const uint8_t *)src)[i] != 0;
        break;
    case FC_U16:
    case FC_I16:
        for (size_t i = 0; i < n; i++)
            dst[i] = ((const uint16_t *)src)[i] != 0;
        break;
    case FC_I32:
        for (size_t i = 0; i < n; i++)
            dst[i] = ((const int32_t *)src)[i] != 0;
        break;
    case FC_I64:
        for (size_t i = 0; i < n; i++)
            dst[i] = ((const int64_t *)src)[i] != 0;
        break;
    case FC_F64:
        for (size_t i = 0; i < n; i++)
            dst[i] = ((const double *)src)[i] != 0.0;
        break;
    case FC_F16:
    case FC_BF16:
    case FC_F32:
    case FC_F8_E4M3:
    case FC_F8_E5M2: {
        /* through the f32 value: -0.0 == 0 is false, NaN != 0 is true */
        float tmp[256];
        size_t elem = fc_dtype_size(src_dtype);
        for (size_t done = 0; done < n;) {
            size_t k = n - done < 256 ? n - done : 256;
            fc__load_f32_row(src_dtype, (const char *)src + done * elem, tmp, k);
            for (size_t i = 0; i < k; i++)
                dst[done + i] = tmp[i] != 0.0f;
            done += k;
        }
        break;
    }
    default: /* block dtypes are refused before any leg runs */
        memset(dst, 0, n);
        break;
    }
}

void fc__load_i64_row(fc_dtype src_dtype, const void *src, int64_t *dst, size_t n) {
    switch (src_dtype) {
    case FC_BOOL:
        for (size_t i = 0; i < n; i++)
            dst[i] = ((const uint8_t *)src)[i] != 0;
        break;
    case FC_U8:
        for (size_t i = 0; i < n; i++)
            dst[i] = ((const uint8_t *)src)[i];
        break;
    case FC_U16:
        for (size_t i = 0; i < n; i++)
            dst[i] = ((const uint16_t *)src)[i];
        break;
    case FC_I8:
        for (size_t i = 0; i < n; i++)
            dst[i] = ((const int8_t *)src)[i];
        break;
    case FC_I16:
        for (size_t i = 0; i < n; i++)
            dst[i] = ((const int16_t *)src)[i];
        break;
    case FC_I32:
        for (size_t i = 0; i < n; i++)
            dst[i] = ((const int32_t *)src)[i];
        break;
    case FC_I64:
        memcpy(dst, src, n * sizeof *dst);
        break;
    default: /* floats take the f32/f64 legs */
        memset(dst, 0, n * sizeof *dst);
        break;
    }
}

void fc__load_f32_row(fc_dtype src_dtype, const void *src, float *dst, size_t n) {
    switch (src_dtype) {
    case FC_F16:
        fc__f16_to_f32_row(src, dst, n);
        break;
    case FC_BF16:
        fc__bf16_to_f32_row(src, dst, n);
        break;
    case FC_F32:
        memcpy(dst, src, n * sizeof *dst);
        break;
    case FC_F64:
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)((const double *)src)[i];
        break;
    case FC_F8_E4M3:
        fc__e4m3_to_f32_row(src, dst, n);
        break;
    case FC_F8_E5M2:
        fc__e5m2_to_f32_row(src, dst, n);
        break;
    default: /* integers take the i64 leg */
        memset(dst, 0, n * sizeof *dst);
        break;
    }
}

void fc__load_f64_row(fc_dtype src_dtype, const void *src, double *dst, size_t n) {
    if (src_dtype == FC_F64) {
        memcpy(dst, src, n * sizeof *dst);
        return;
    }
    /* every other float is exact in f32, and f32 is exact in f64 */
    float tmp[256];
    size_t elem = fc_dtype_size(src_dtype);
    for (size_t done = 0; done < n;) {
        size_t k = n - done < 256 ? n - done : 256;
        fc__load_f32_row(src_dtype, (const char *)src + done * elem, tmp, k);
        for (size_t i = 0; i < k; i++)
            dst[done + i] = tmp[i];
        done += k;
    }
}

/* ---- stores ------------------------------------------------------------- */

void fc__store_i64_row(fc_dtype dst_dtype, const int64_t *src, void *dst, size_t n) {
    /* wrapping: keep the low bits, written through the unsigned type of the
     * same width (the signed dtypes share the two's complement bytes) */
    switch (dst_dtype) {
    case FC_BOOL:
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = src[i] != 0;
        break;
    case FC_U8:
    case FC_I8:
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = (uint8_t)(uint64_t)src[i];
        break;
    case FC_U16:
    case FC_I16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = (uint16_t)(uint64_t)src[i];
        break;
    case FC_I32:
        for (size_t i = 0; i < n; i++)
            ((uint32_t *)dst)[i] = (uint32_t)(uint64_t)src[i];
        break;
    case FC_I64:
        memcpy(dst, src, n * sizeof *src);
        break;
    case FC_F64:
        for (size_t i = 0; i < n; i++)
            ((double *)dst)[i] = (double)src[i];
        break;
    default: { /* the narrower floats: (float)v, then the f32 bridge */
        float tmp[256];
        size_t elem = fc_dtype_size(dst_dtype);
        for (size_t done = 0; done < n;) {
            size_t k = n - done < 256 ? n - done : 256;
            for (size_t i = 0; i < k; i++)
                tmp[i] = (float)src[done + i];
            fc__store_f32_row(dst_dtype, tmp, (char *)dst + done * elem, k);
            done += k;
        }
        break;
    }
    }
}

void fc__store_f64_row(fc_dtype dst_dtype, const double *src, void *dst, size_t n) {
    switch (dst_dtype) {
    case FC_BOOL:
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = src[i] != 0.0;
        break;
    case FC_U8:
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = (uint8_t)fc__f64_to_int_sat(src[i], 0, UINT8_MAX);
        break;
    case FC_U16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = (uint16_t)fc__f64_to_int_sat(src[i], 0, UINT16_MAX);
        break;
    case FC_I8:
        for (size_t i = 0; i < n; i++)
            ((int8_t *)dst)[i] = (int8_t)fc__f64_to_int_sat(src[i], INT8_MIN, INT8_MAX);
        break;
    case FC_I16:
        for (size_t i = 0; i < n; i++)
            ((int16_t *)dst)[i] = (int16_t)fc__f64_to_int_sat(src[i], INT16_MIN, INT16_MAX);
        break;
    case FC_I32:
        for (size_t i = 0; i < n; i++)
            ((int32_t *)dst)[i] = (int32_t)fc__f64_to_int_sat(src[i], INT32_MIN, INT32_MAX);
        break;
    case FC_I64:
        for (size_t i = 0; i < n; i++)
            ((int64_t *)dst)[i] = fc__f64_to_int_sat(src[i], INT64_MIN, INT64_MAX);
        break;
    case FC_F64:
        memcpy(dst, src, n * sizeof *src);
        break;
    default: { /* the narrower floats: through f32, like castFloat */
        float tmp[256];
        size_t elem = fc_dtype_size(dst_dtype);
        for (size_t done = 0; done < n;) {
            size_t k = n - done < 256 ? n - done : 256;
            for (size_t i = 0; i < k; i++)
                tmp[i] = (float)src[done + i];
            fc__store_f32_row(dst_dtype, tmp, (char *)dst + done * elem, k);
            done += k;
        }
        break;
    }
    }
}

void fc__store_f32_row(fc_dtype dst_dtype, const float *src, void *dst, size_t n) {
    switch (dst_dtype) {
    case FC_F16:
        fc__f32_to_f16_row(src, dst, n);
        break;
    case FC_BF16:
        fc__f32_to_bf16_row(src, dst, n);
        break;
    case FC_F32:
        memcpy(dst, src, n * sizeof *src);
        break;
    case FC_F8_E4M3:
        fc__f32_to_e4m3_row(src, dst, n);
        break;
    case FC_F8_E5M2:
        fc__f32_to_e5m2_row(src, dst, n);
        break;
    default: { /* integers, bool and f64 take the f64 leg (f32 -> f64 is exact) */
        double tmp[256];
        for (size_t done = 0; done < n;) {
            size_t k = n - done < 256 ? n - done : 256;
            for (size_t i = 0; i < k; i++)
                tmp[i] = src[done + i];
            fc__store_f64_row(dst_dtype, tmp, (char *)dst + done * fc_dtype_size(dst_dtype), k);
            done += k;
        }
        break;
    }
    }
}

/* ---- the public scalar entries ------------------------------------------- */

/* One element of any scalar dtype, suitably aligned. */
typedef union scalar_slot {
    uint8_t u8;
    uint16_t u16;
    int32_t i32;
    int64_t i64;
    float f32;
    double f64;
    unsigned char bytes[8];
} scalar_slot;

void fc__cast_run(fc_dtype src_dtype, const void *src, fc_dtype dst_dtype, void *dst, size_t n) {
    fc__cast_route route = fc__cast_route_of(src_dtype, dst_dtype);
    if (route == FC__ROUTE_BOOL) {
        fc__truthy_row(src_dtype, src, dst, n);
        return;
    }
    if (route == FC__ROUTE_COPY) {
        memcpy(dst, src, n * fc_dtype_size(src_dtype));
        return;
    }
    /* chunk through an intermediate of 256 elements */
    union {
        int64_t i64[256];
        double f64[256];
        float f32[256];
    } tmp;
    size_t src_elem = fc_dtype_size(src_dtype), dst_elem = fc_dtype_size(dst_dtype);
    for (size_t done = 0; done < n;) {
        size_t k = n - done < 256 ? n - done : 256;
        const void *s = (const char *)src + done * src_elem;
        void *d = (char *)dst + done * dst_elem;
        if (route == FC__ROUTE_I64) {
            fc__load_i64_row(src_dtype, s, tmp.i64, k);
            fc__store_i64_row(dst_dtype, tmp.i64, d, k);
        } else if (route == FC__ROUTE_F64) {
            fc__load_f64_row(src_dtype, s, tmp.f64, k);
            fc__store_f64_row(dst_dtype, tmp.f64, d, k);
        } else {
            fc__load_f32_row(src_dtype, s, tmp.f32, k);
            fc__store_f32_row(dst_dtype, tmp.f32, d, k);
        }
        done += k;
    }
}

fc_status fc_cast_scalar(fc_dtype src_dtype, const void *src, fc_dtype dst_dtype, void *dst) {
    if (!src || !dst) return FC_ERR_NULL_ARG;
    if (!fc_dtype_is_scalar(src_dtype) || !fc_dtype_is_scalar(dst_dtype)) return FC_ERR_DTYPE;
    scalar_slot in, out;
    memcpy(in.bytes, src, fc_dtype_size(src_dtype));
    fc__cast_run(src_dtype, &in, dst_dtype, &out, 1);
    memcpy(dst, out.bytes, fc_dtype_size(dst_dtype));
    return FC_OK;
}

bool fc_is_truthy(fc_dtype dtype, const void *value) {
    if (!value || !fc_dtype_is_scalar(dtype)) return false;
    scalar_slot in;
    uint8_t t;
    memcpy(in.bytes, value, fc_dtype_size(dtype));
    fc__truthy_row(dtype, &in, &t, 1);
    return t != 0;
}
