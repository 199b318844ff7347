/* SPDX-License-Identifier: MIT */
/* test_cast.c - the scalar cast rules of seed 000 section 8.2 and
 * fc_convert_row.
 *
 * Worked values pin each rule; then a model of the rules written here (in
 * f64 and int64, sharing only the already-tested f16/bf16/fp8 bridges with
 * the library) checks fc_cast_scalar on every ordered pair of the 13 scalar
 * dtypes over a table of awkward values, and fc_convert_row is checked
 * against fc_cast_scalar on the same table, aligned and misaligned, in rows
 * long enough to reach the SIMD loops and the chunk boundaries. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fucina/dtype.h"

#define N_SCALAR 13 /* FC_BOOL .. FC_F8_E5M2 */

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static uint64_t f64_bits(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* ---- worked values, one rule at a time ----------------------------------- */

/* Casts one value given as int64 / double source storage. */
static int64_t cast_to_i64(fc_dtype src_t, const void *src, fc_dtype dst_t) {
    unsigned char out[8] = {0};
    assert_int_equal(fc_cast_scalar(src_t, src, dst_t, out), FC_OK);
    switch (dst_t) {
    case FC_BOOL:
    case FC_U8:
        return out[0];
    case FC_I8:
        return (int8_t)out[0];
    case FC_U16: {
        uint16_t v;
        memcpy(&v, out, 2);
        return v;
    }
    case FC_I16: {
        int16_t v;
        memcpy(&v, out, 2);
        return v;
    }
    case FC_I32: {
        int32_t v;
        memcpy(&v, out, 4);
        return v;
    }
    default: {
        int64_t v;
        memcpy(&v, out, 8);
        return v;
    }
    }
}

static int64_t from_f64(double d, fc_dtype dst_t) { return cast_to_i64(FC_F64, &d, dst_t); }
static int64_t from_i64(int64_t v, fc_dtype dst_t) { return cast_to_i64(FC_I64, &v, dst_t); }

static void test_integer_to_integer_wraps(void **state) {
    (void)state;
    assert_int_equal(from_i64(300, FC_U8), 44);
    assert_int_equal(from_i64(-1, FC_U8), 255);
    assert_int_equal(from_i64(-1, FC_U16), 65535);
    assert_int_equal(from_i64(0x100000080LL, FC_I8), -128);
    assert_int_equal(from_i64(65535, FC_I16), -1);
    assert_int_equal(from_i64(INT64_MIN, FC_I32), 0);
    assert_int_equal(from_i64(0x7fffffffffffffffLL, FC_I32), -1);
    uint8_t u8 = 200;
    assert_int_equal(cast_to_i64(FC_U8, &u8, FC_I8), -56);
    int8_t i8 = -1;
    assert_int_equal(cast_to_i64(FC_I8, &i8, FC_U16), 65535);
    assert_int_equal(cast_to_i64(FC_I8, &i8, FC_I64), -1);
    uint16_t u16 = 40000;
    assert_int_equal(cast_to_i64(FC_U16, &u16, FC_I16), 40000 - 65536);
}

static void test_float_to_integer_truncates_and_saturates(void **state) {
    (void)state;
    assert_int_equal(from_f64(2.9, FC_I32), 2);
    assert_int_equal(from_f64(-2.9, FC_I32), -2);
    assert_int_equal(from_f64(-0.9, FC_U8), 0);
    assert_int_equal(from_f64(255.9, FC_U8), 255);
    assert_int_equal(from_f64(300.0, FC_U8), 255);
    assert_int_equal(from_f64(-5.0, FC_U16), 0);
    assert_int_equal(from_f64(200.0, FC_I8), 127);
    assert_int_equal(from_f64(-200.0, FC_I8), -128);
    assert_int_equal(from_f64(1e10, FC_I32), INT32_MAX);
    assert_int_equal(from_f64(-1e10, FC_I32), INT32_MIN);
    assert_int_equal(from_f64(ldexp(1.0, 63), FC_I64), INT64_MAX);
    assert_int_equal(from_f64(-ldexp(1.0, 63), FC_I64), INT64_MIN);
    assert_int_equal(from_f64(ldexp(1.0, 62), FC_I64), 1LL << 62);
    assert_int_equal(from_f64(1e300, FC_I64), INT64_MAX);
    assert_int_equal(from_f64(INFINITY, FC_I16), INT16_MAX);
    assert_int_equal(from_f64(-INFINITY, FC_I64), INT64_MIN);
    for (int t = FC_U8; t <= FC_I64; t++) {
        assert_int_equal(from_f64(NAN, (fc_dtype)t), 0);
        assert_int_equal(from_f64(-NAN, (fc_dtype)t), 0);
    }
    /* the storage floats go through their value, never their raw bits */
    uint16_t h = 0x7bff; /* 65504 */
    assert_int_equal(cast_to_i64(FC_F16, &h, FC_I16), INT16_MAX);
    assert_int_equal(cast_to_i64(FC_F16, &h, FC_I32), 65504);
    uint16_t b = 0xc2c9; /* bf16 -100.5 */
    assert_int_equal(cast_to_i64(FC_BF16, &b, FC_I32), -100);
    uint8_t e = 0x45; /* e4m3 3.25 */
    assert_int_equal(cast_to_i64(FC_F8_E4M3, &e, FC_I32), 3);
    uint8_t ninf = 0xfc; /* e5m2 -inf */
    assert_int_equal(cast_to_i64(FC_F8_E5M2, &ninf, FC_I8), -128);
    float f = -7.99f;
    assert_int_equal(cast_to_i64(FC_F32, &f, FC_I64), -7);
}

static void test_bool_rules(void **state) {
    (void)state;
    /* anything -> bool is value != 0, never a wrap of the low bits */
    assert_int_equal(from_i64(256, FC_BOOL), 1);
    assert_int_equal(from_i64(0, FC_BOOL), 0);
    assert_int_equal(from_f64(0.25, FC_BOOL), 1);
    assert_int_equal(from_f64(-0.0, FC_BOOL), 0);
    assert_int_equal(from_f64(NAN, FC_BOOL), 1);
    uint16_t h = 0x0001; /* smallest f16 subnormal */
    assert_int_equal(cast_to_i64(FC_F16, &h, FC_BOOL), 1);
    uint8_t e = 0x80; /* e4m3 -0.0 */
    assert_int_equal(cast_to_i64(FC_F8_E4M3, &e, FC_BOOL), 0);
    /* bool -> number is 0/1, whatever non-zero byte encodes true */
    uint8_t t = 2, out8 = 0;
    assert_int_equal(cast_to_i64(FC_BOOL, &t, FC_I64), 1);
    assert_int_equal(cast_to_i64(FC_BOOL, &t, FC_BOOL), 1);
    uint16_t out16 = 0;
    assert_int_equal(fc_cast_scalar(FC_BOOL, &t, FC_F16, &out16), FC_OK);
    assert_int_equal(out16, 0x3c00);
    assert_int_equal(fc_cast_scalar(FC_BOOL, &t, FC_BF16, &out16), FC_OK);
    assert_int_equal(out16, 0x3f80);
    assert_int_equal(fc_cast_scalar(FC_BOOL, &t, FC_F8_E4M3, &out8), FC_OK);
    assert_int_equal(out8, 0x38);
    assert_int_equal(fc_cast_scalar(FC_BOOL, &t, FC_F8_E5M2, &out8), FC_OK);
    assert_int_equal(out8, 0x3c);
    double d = -1.0;
    uint8_t f = 0;
    assert_int_equal(fc_cast_scalar(FC_BOOL, &f, FC_F64, &d), FC_OK);
    assert_int_equal(f64_bits(d), f64_bits(0.0)); /* +0.0, not -0.0 */
}

static void test_truthiness(void **state) {
    (void)state;
    const float nz32 = -0.0f, nan32 = NAN, tiny32 = 1e-45f;
    const double nz64 = -0.0, nan64 = -NAN;
    const uint16_t h_nz = 0x8000, h_nan = 0x7e00, h_snan = 0xfc01, h_one = 0x3c00;
    const uint16_t b_nz = 0x8000, b_nan = 0xffc1, b_tiny = 0x0001;
    const uint8_t e_nz = 0x80, e4_nan = 0xff, e5_nan = 0x7d, e5_inf = 0xfc, e_min = 0x01;
    assert_false(fc_is_truthy(FC_F32, &nz32));
    assert_true(fc_is_truthy(FC_F32, &nan32));
    assert_true(fc_is_truthy(FC_F32, &tiny32));
    assert_false(fc_is_truthy(FC_F64, &nz64));
    assert_true(fc_is_truthy(FC_F64, &nan64));
    assert_false(fc_is_truthy(FC_F16, &h_nz));
    assert_true(fc_is_truthy(FC_F16, &h_nan));
    assert_true(fc_is_truthy(FC_F16, &h_snan));
    assert_true(fc_is_truthy(FC_F16, &h_one));
    assert_false(fc_is_truthy(FC_BF16, &b_nz));
    assert_true(fc_is_truthy(FC_BF16, &b_nan));
    assert_true(fc_is_truthy(FC_BF16, &b_tiny));
    assert_false(fc_is_truthy(FC_F8_E4M3, &e_nz));
    assert_true(fc_is_truthy(FC_F8_E4M3, &e4_nan));
    assert_true(fc_is_truthy(FC_F8_E4M3, &e_min));
    assert_false(fc_is_truthy(FC_F8_E5M2, &e_nz));
    assert_true(fc_is_truthy(FC_F8_E5M2, &e5_nan));
    assert_true(fc_is_truthy(FC_F8_E5M2, &e5_inf));
    const int64_t i_zero = 0, i_min = INT64_MIN;
    const uint8_t b2 = 2, b0 = 0;
    const int16_t i16 = -1;
    assert_false(fc_is_truthy(FC_I64, &i_zero));
    assert_true(fc_is_truthy(FC_I64, &i_min));
    assert_true(fc_is_truthy(FC_I16, &i16));
    assert_true(fc_is_truthy(FC_BOOL, &b2));
    assert_false(fc_is_truthy(FC_BOOL, &b0));
    /* harmless defaults */
    assert_false(fc_is_truthy(FC_F32, NULL));
    unsigned char block[64];
    memset(block, 0xff, sizeof block);
    assert_false(fc_is_truthy(FC_Q4_0, block));
    assert_false(fc_is_truthy(FC_DTYPE_COUNT, block));
}

static void test_float_routes(void **state) {
    (void)state;
    /* into f64 straight, no f32 on the way */
    int64_t big = (1LL << 53) + 1;
    double d = 0;
    assert_int_equal(fc_cast_scalar(FC_I64, &big, FC_F64, &d), FC_OK);
    assert_true(d == 9007199254740992.0); /* 2^53 + 1 is not a double: RNE */
    big = (1LL << 52) + 1;
    assert_int_equal(fc_cast_scalar(FC_I64, &big, FC_F64, &d), FC_OK);
    assert_true(d == 4503599627370497.0); /* exact in f64, would round in f32 */
    uint16_t h = 0x3555;
    assert_int_equal(fc_cast_scalar(FC_F16, &h, FC_F64, &d), FC_OK);
    assert_true(d == 0.333251953125);
    float f = 0.1f;
    assert_int_equal(fc_cast_scalar(FC_F32, &f, FC_F64, &d), FC_OK);
    assert_true(d == (double)0.1f);
    /* f64 -> f32 rounds to nearest even */
    d = 1.0 / 3.0;
    assert_int_equal(fc_cast_scalar(FC_F64, &d, FC_F32, &f), FC_OK);
    assert_int_equal(f32_bits(f), 0x3eaaaaabu);
    /* into the narrow floats through f32: 1 + 2^-11 + 2^-40 becomes the f16
     * tie 1 + 2^-11 first and then 1.0 (even), as the seed's castFloat does */
    d = 1.0 + ldexp(1.0, -11) + ldexp(1.0, -40);
    assert_int_equal(fc_cast_scalar(FC_F64, &d, FC_F16, &h), FC_OK);
    assert_int_equal(h, 0x3c00);
    /* integers into narrow floats go (float)v first too, like torch:
     * 2^32 + 2^24 + 1 -> f32 2^32 + 2^24 -> bf16 tie -> 2^32 */
    big = (1LL << 32) + (1LL << 24) + 1;
    assert_int_equal(fc_cast_scalar(FC_I64, &big, FC_BF16, &h), FC_OK);
    assert_int_equal(h, 0x4f80);
    int32_t i32 = 16777217; /* 2^24 + 1 -> f32 rounds to even */
    assert_int_equal(fc_cast_scalar(FC_I32, &i32, FC_F32, &f), FC_OK);
    assert_true(f == 16777216.0f);
    /* the f8 formats bridge through f32 in both directions */
    uint8_t e4 = 0x7f, e5 = 0;
    assert_int_equal(fc_cast_scalar(FC_F8_E4M3, &e4, FC_F8_E5M2, &e5), FC_OK);
    assert_int_equal(e5, 0x7f); /* NaN stays NaN */
    e5 = 0xfc;                  /* -inf */
    assert_int_equal(fc_cast_scalar(FC_F8_E5M2, &e5, FC_F8_E4M3, &e4), FC_OK);
    assert_int_equal(e4, 0xff); /* saturates to the NaN code, sign kept */
    i32 = 100;
    assert_int_equal(fc_cast_scalar(FC_I32, &i32, FC_F8_E4M3, &e4), FC_OK);
    assert_true(fc_e4m3_to_f32(e4) == 96.0f);
    /* a dtype into itself copies its bits, NaN payloads included */
    h = 0x7c01;
    uint16_t h2 = 0;
    assert_int_equal(fc_cast_scalar(FC_F16, &h, FC_F16, &h2), FC_OK);
    assert_int_equal(h2, 0x7c01);
    /* any alignment */
    unsigned char raw[16] = {0};
    double one = 1.0;
    memcpy(raw + 3, &one, sizeof one);
    assert_int_equal(fc_cast_scalar(FC_F64, raw + 3, FC_F32, raw + 9), FC_OK);
    memcpy(&f, raw + 9, sizeof f);
    assert_true(f == 1.0f);
}

static void test_errors(void **state) {
    (void)state;
    float f = 1.0f, out = 5.0f;
    unsigned char block[64] = {0};
    assert_int_equal(fc_cast_scalar(FC_F32, NULL, FC_F32, &out), FC_ERR_NULL_ARG);
    assert_int_equal(fc_cast_scalar(FC_F32, &f, FC_F32, NULL), FC_ERR_NULL_ARG);
    assert_int_equal(fc_cast_scalar(FC_Q4_0, block, FC_F32, &out), FC_ERR_DTYPE);
    assert_int_equal(fc_cast_scalar(FC_F32, &f, FC_NF4, block), FC_ERR_DTYPE);
    assert_int_equal(fc_cast_scalar(FC_DTYPE_COUNT, &f, FC_F32, &out), FC_ERR_DTYPE);
    assert_int_equal(fc_cast_scalar(FC_F32, &f, (fc_dtype)-1, &out), FC_ERR_DTYPE);
    assert_true(out == 5.0f); /* untouched */
    for (int t = FC_Q1_0; t < FC_DTYPE_COUNT; t++) {
        assert_int_equal(fc_convert_row((fc_dtype)t, block, FC_F32, &out, 1), FC_ERR_DTYPE);
        assert_int_equal(fc_convert_row(FC_F32, &f, (fc_dtype)t, block, 1), FC_ERR_DTYPE);
    }
    assert_int_equal(fc_convert_row(FC_DTYPE_COUNT, &f, FC_F32, &out, 1), FC_ERR_DTYPE);
    assert_int_equal(fc_convert_row(FC_F32, NULL, FC_F16, block, 1), FC_ERR_NULL_ARG);
    assert_int_equal(fc_convert_row(FC_F32, &f, FC_F16, NULL, 1), FC_ERR_NULL_ARG);
    assert_int_equal(fc_convert_row(FC_F32, NULL, FC_F16, NULL, 0), FC_OK);
    assert_int_equal(fc_convert_row(FC_Q8_0, NULL, FC_F16, NULL, 0), FC_ERR_DTYPE);
    assert_true(out == 5.0f);
}

/* ---- the model -------------------------------------------------------------- */

typedef struct model_value {
    bool is_float;
    int64_t i;
    double f;  /* every float, widened */
    float f32; /* every float but f64 exactly (a float sNaN stays signalling) */
} model_value;

static bool is_int_dtype(fc_dtype t) { return t >= FC_U8 && t <= FC_I64; }

static model_value model_load(fc_dtype t, const unsigned char *p) {
    model_value v = {false, 0, 0.0, 0.0f};
    uint16_t u16;
    switch (t) {
    case FC_BOOL:
        v.i = p[0] != 0;
        break;
    case FC_U8:
        v.i = p[0];
        break;
    case FC_I8:
        v.i = (int8_t)p[0];
        break;
    case FC_U16:
        memcpy(&u16, p, 2);
        v.i = u16;
        break;
    case FC_I16: {
        int16_t x;
        memcpy(&x, p, 2);
        v.i = x;
        break;
    }
    case FC_I32: {
        int32_t x;
        memcpy(&x, p, 4);
        v.i = x;
        break;
    }
    case FC_I64:
        memcpy(&v.i, p, 8);
        break;
    default:
        v.is_float = true;
        if (t == FC_F64) {
            memcpy(&v.f, p, 8);
            v.f32 = (float)v.f;
            break;
        }
        if (t == FC_F32) {
            memcpy(&v.f32, p, 4);
        } else if (t == FC_F16 || t == FC_BF16) {
            memcpy(&u16, p, 2);
            v.f32 = t == FC_F16 ? fc_f16_to_f32(u16) : fc_bf16_to_f32(u16);
        } else {
            v.f32 = t == FC_F8_E4M3 ? fc_e4m3_to_f32(p[0]) : fc_e5m2_to_f32(p[0]);
        }
        v.f = v.f32;
        break;
    }
    return v;
}

static const int64_t int_lo[] = {[FC_U8] = 0,          [FC_U16] = 0,         [FC_I8] = INT8_MIN,
                                 [FC_I16] = INT16_MIN, [FC_I32] = INT32_MIN, [FC_I64] = INT64_MIN};
static const int64_t int_hi[] = {[FC_U8] = UINT8_MAX,  [FC_U16] = UINT16_MAX, [FC_I8] = INT8_MAX,
                                 [FC_I16] = INT16_MAX, [FC_I32] = INT32_MAX,  [FC_I64] = INT64_MAX};

static void model_cast(fc_dtype s, const unsigned char *src, fc_dtype t, unsigned char *out) {
    size_t tsize = fc_dtype_size(t);
    if (s == t && t != FC_BOOL) {
        memcpy(out, src, tsize);
        return;
    }
    model_value v = model_load(s, src);
    if (t == FC_BOOL) {
        out[0] = v.is_float ? v.f != 0.0 : v.i != 0;
    } else if (is_int_dtype(t)) {
        int64_t r;
        if (!v.is_float) {
            r = v.i; /* the low bytes below are the two's complement wrap */
        } else if (isnan(v.f)) {
            r = 0;
        } else {
            double tr = trunc(v.f);
            if (tr >= 9223372036854775808.0)
                r = INT64_MAX;
            else if (tr < -9223372036854775808.0)
                r = INT64_MIN;
            else
                r = (int64_t)tr;
            if (r < int_lo[t]) r = int_lo[t];
            if (r > int_hi[t]) r = int_hi[t];
        }
        uint64_t u = (uint64_t)r;
        for (size_t k = 0; k < tsize; k++)
            out[k] = (unsigned char)(u >> (8 * k));
    } else if (t == FC_F64) {
        double d = v.is_float ? v.f : (double)v.i;
        memcpy(out, &d, 8);
    } else {
        float x = v.is_float ? v.f32 : (float)v.i;
        uint16_t u16;
        switch (t) {
        case FC_F32:
            memcpy(out, &x, 4);
            break;
        case FC_F16:
        case FC_BF16:
            u16 = t == FC_F16 ? fc_f32_to_f16(x) : fc_f32_to_bf16(x);
            memcpy(out, &u16, 2);
            break;
        default:
            out[0] = t == FC_F8_E4M3 ? fc_f32_to_e4m3(x) : fc_f32_to_e5m2(x);
            break;
        }
    }
}

/* ---- the table of awkward values ------------------------------------------- */

static const int64_t int_values[] = {0,
                                     1,
                                     -1,
                                     2,
                                     127,
                                     128,
                                     -128,
                                     -129,
                                     200,
                                     255,
                                     256,
                                     300,
                                     32767,
                                     32768,
                                     -32769,
                                     65504,
                                     65520,
                                     65535,
                                     65536,
                                     16777217,
                                     -16777217,
                                     INT32_MAX,
                                     INT32_MIN,
                                     (1LL << 53) + 1,
                                     (1LL << 32) + (1LL << 24) + 1,
                                     INT64_MAX,
                                     INT64_MIN,
                                     0x0123456789abcdefLL};

static const double float_values[] = {0.0,
                                      -0.0,
                                      0.5,
                                      -0.5,
                                      1.0,
                                      -1.0,
                                      1.5,
                                      2.5,
                                      -2.5,
                                      2.9,
                                      -2.9,
                                      1.0 / 3.0,
                                      100.0,
                                      127.5,
                                      128.0,
                                      -128.5,
                                      -129.0,
                                      200.0,
                                      255.5,
                                      256.0,
                                      300.0,
                                      -300.0,
                                      448.0,
                                      464.0,
                                      480.0,
                                      32767.5,
                                      32768.0,
                                      -32769.0,
                                      57344.0,
                                      61440.0,
                                      65504.0,
                                      65520.0,
                                      65535.0,
                                      65536.0,
                                      1e6,
                                      2147483647.0,
                                      2147483648.0,
                                      -2147483649.0,
                                      9007199254740993.0,
                                      9.2233720368547758e18,
                                      -9.2233720368547758e18,
                                      1e19,
                                      -1e30,
                                      3.5e38,
                                      1e300,
                                      -1e300,
                                      1e-5,
                                      6e-8,
                                      1e-40,
                                      1e-320,
                                      1.0 + 0x1p-11 + 0x1p-40,
                                      INFINITY,
                                      -INFINITY,
                                      NAN,
                                      -NAN};

/* Extra raw patterns: NaN payloads and signalling NaNs in each format. */
static const uint16_t f16_raw[] = {0x7c01, 0xfe01, 0x7fff, 0x0001, 0x83ff};
static const uint16_t bf16_raw[] = {0x7f81, 0xffc1, 0x0001, 0x8080};
static const uint8_t f8_raw[] = {0x7f, 0xff, 0x7d, 0xfe, 0x01, 0x80, 0x7c};
static const uint64_t f64_raw[] = {0x7ff0000000000001ull, 0xfff8000000000123ull,
                                   0x0000000000000001ull};

/* Fills buf with the table for dtype t; returns the element count. */
static size_t make_values(fc_dtype t, unsigned char *buf) {
    size_t size = fc_dtype_size(t), n = 0;
    if (t == FC_BOOL) {
        static const uint8_t b[] = {0, 1, 2, 255};
        memcpy(buf, b, sizeof b);
        return sizeof b;
    }
    if (is_int_dtype(t)) {
        for (size_t i = 0; i < sizeof int_values / sizeof *int_values; i++, n++) {
            uint64_t u = (uint64_t)int_values[i];
            for (size_t k = 0; k < size; k++)
                buf[n * size + k] = (unsigned char)(u >> (8 * k));
        }
        return n;
    }
    for (size_t i = 0; i < sizeof float_values / sizeof *float_values; i++, n++)
        assert_int_equal(fc_cast_scalar(FC_F64, &float_values[i], t, buf + n * size), FC_OK);
    if (t == FC_F16 || t == FC_BF16) {
        const uint16_t *raw = t == FC_F16 ? f16_raw : bf16_raw;
        size_t count = t == FC_F16 ? sizeof f16_raw / 2 : sizeof bf16_raw / 2;
        memcpy(buf + n * size, raw, count * 2);
        n += count;
    } else if (t == FC_F8_E4M3 || t == FC_F8_E5M2) {
        memcpy(buf + n, f8_raw, sizeof f8_raw);
        n += sizeof f8_raw;
    } else if (t == FC_F64) {
        memcpy(buf + n * size, f64_raw, sizeof f64_raw);
        n += sizeof f64_raw / 8;
    } else if (t == FC_F32) {
        static const uint32_t raw[] = {0x7f800001u, 0xffa00000u, 0x00000001u, 0x7fffffffu};
        memcpy(buf + n * size, raw, sizeof raw);
        n += sizeof raw / 4;
    }
    return n;
}

static void test_cast_scalar_matches_model_on_every_pair(void **state) {
    (void)state;
    unsigned char src[128 * 8], got[8], want[8];
    size_t bad = 0;
    for (int s = 0; s < N_SCALAR; s++) {
        size_t n = make_values((fc_dtype)s, src), ss = fc_dtype_size((fc_dtype)s);
        for (int t = 0; t < N_SCALAR; t++) {
            size_t ts = fc_dtype_size((fc_dtype)t);
            for (size_t i = 0; i < n; i++) {
                memset(got, 0xcc, sizeof got);
                memset(want, 0xcc, sizeof want);
                assert_int_equal(fc_cast_scalar((fc_dtype)s, src + i * ss, (fc_dtype)t, got),
                                 FC_OK);
                model_cast((fc_dtype)s, src + i * ss, (fc_dtype)t, want);
                if (memcmp(got, want, sizeof got) != 0 && bad++ < 8) {
                    uint64_t g = 0, w = 0;
                    memcpy(&g, got, ts);
                    memcpy(&w, want, ts);
                    print_message("%s -> %s #%zu: got 0x%llx want 0x%llx\n",
                                  fc_dtype_name((fc_dtype)s), fc_dtype_name((fc_dtype)t), i,
                                  (unsigned long long)g, (unsigned long long)w);
                }
            }
        }
    }
    assert_int_equal(bad, 0);
}

/* Rows of ROW_LEN elements (the table repeated), so the SIMD loops and the
 * 256-element chunks of the generic path both see full blocks and tails. */
#define ROW_LEN 700

static void test_convert_row_matches_cast_scalar_on_every_pair(void **state) {
    (void)state;
    unsigned char table[128 * 8];
    unsigned char *src = malloc(ROW_LEN * 8 + 16), *dst = malloc(ROW_LEN * 8 + 16);
    unsigned char one[8];
    assert_non_null(src);
    assert_non_null(dst);
    size_t bad = 0;
    for (int s = 0; s < N_SCALAR; s++) {
        size_t n = make_values((fc_dtype)s, table), ss = fc_dtype_size((fc_dtype)s);
        for (int t = 0; t < N_SCALAR; t++) {
            size_t ts = fc_dtype_size((fc_dtype)t);
            /* offset 0: aligned (malloc), offset 1: misaligned for every
             * dtype wider than a byte */
            for (size_t off = 0; off < 2; off++) {
                unsigned char *sp = src + off * 8 + off, *dp = dst + off * 8 + off;
                for (size_t i = 0; i < ROW_LEN; i++)
                    memcpy(sp + i * ss, table + (i % n) * ss, ss);
                memset(dp, 0xcc, ROW_LEN * ts + 1);
                assert_int_equal(fc_convert_row((fc_dtype)s, sp, (fc_dtype)t, dp, ROW_LEN - 1),
                                 FC_OK);
                assert_int_equal(dp[(ROW_LEN - 1) * ts], 0xcc); /* n respected */
                for (size_t i = 0; i + 1 < ROW_LEN; i++) {
                    assert_int_equal(fc_cast_scalar((fc_dtype)s, sp + i * ss, (fc_dtype)t, one),
                                     FC_OK);
                    if (memcmp(one, dp + i * ts, ts) != 0 && bad++ < 8)
                        print_message("row %s -> %s #%zu (offset %zu) differs\n",
                                      fc_dtype_name((fc_dtype)s), fc_dtype_name((fc_dtype)t), i,
                                      off);
                }
            }
        }
    }
    assert_int_equal(bad, 0);
    free(src);
    free(dst);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_integer_to_integer_wraps),
        cmocka_unit_test(test_float_to_integer_truncates_and_saturates),
        cmocka_unit_test(test_bool_rules),
        cmocka_unit_test(test_truthiness),
        cmocka_unit_test(test_float_routes),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_cast_scalar_matches_model_on_every_pair),
        cmocka_unit_test(test_convert_row_matches_cast_scalar_on_every_pair),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
