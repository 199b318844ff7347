/* SPDX-License-Identifier: MIT */
/* test_convert_fp8.c - OCP FP8 E4M3FN and E5M2 <-> f32.
 *
 * The decode tables are recomputed here from the format definitions with
 * ldexp; the encoders are checked against a brute-force nearest-even search
 * over every code, on every f16 value (which holds every rounding midpoint of
 * both formats) and on the f32 neighbours one ulp either side. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/convert.h"
#include "fucina/dtype.h"

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* One format described by its fields, independent of the library. */
typedef struct fp8_format {
    const char *name;
    int mbits, bias;
    bool has_inf;      /* E5M2: exponent all ones, mantissa 0 is +-inf */
    unsigned max_code; /* largest finite positive code */
    double beyond;     /* the value one code above max_code, if it were finite */
    unsigned overflow; /* what a too-large magnitude encodes to (sign added) */
    float (*decode)(uint8_t);
    uint8_t (*encode)(float);
} fp8_format;

static const fp8_format e4m3 = {"e4m3",        3, 7, false, 0x7e, 480.0, 0x7f, fc_e4m3_to_f32,
                                fc_f32_to_e4m3};
static const fp8_format e5m2 = {"e5m2",        2, 15, true, 0x7b, 65536.0, 0x7c, fc_e5m2_to_f32,
                                fc_f32_to_e5m2};

static bool is_nan_code(const fp8_format *f, unsigned c) {
    unsigned mag = c & 0x7fu;
    return f->has_inf ? mag > 0x7cu : mag == 0x7fu;
}

/* The value of a non-NaN code, from the field definitions. */
static double code_value(const fp8_format *f, unsigned c) {
    unsigned exp_all = (0x7fu >> f->mbits);
    unsigned e = (c & 0x7fu) >> f->mbits, m = c & ((1u << f->mbits) - 1u);
    double v;
    if (f->has_inf && e == exp_all)
        v = INFINITY;
    else if (e == 0)
        v = ldexp((double)m, 1 - f->bias - f->mbits);
    else
        v = ldexp(1.0 + ldexp((double)m, -f->mbits), (int)e - f->bias);
    return (c & 0x80u) ? -v : v;
}

/* Brute-force encoder: scan every positive finite code for the nearest one,
 * ties to the even code, and treat `beyond` as one more (overflowing) code. */
static unsigned ref_encode(const fp8_format *f, float x) {
    unsigned sign = signbit(x) ? 0x80u : 0u;
    if (isnan(x)) return sign | 0x7fu;
    double a = fabs((double)x);
    /* at or past `beyond` the nearest candidate is `beyond` itself (checked
     * apart because FLT_MAX - 448 and FLT_MAX - 480 round alike in f64) */
    if (a >= f->beyond) return sign | f->overflow;
    unsigned best = 0;
    double best_d = INFINITY;
    for (unsigned c = 0; c <= f->max_code + 1; c++) {
        double v = c <= f->max_code ? code_value(f, c) : f->beyond;
        double d = fabs(v - a);
        if (d < best_d || (d == best_d && (c & 1u) == 0)) {
            best = c;
            best_d = d;
        }
    }
    return sign | (best > f->max_code ? f->overflow : best);
}

static void check_decode_table(const fp8_format *f) {
    for (unsigned c = 0; c < 256; c++) {
        float got = f->decode((uint8_t)c);
        if (is_nan_code(f, c)) {
            assert_true(isnan(got));
            assert_int_equal(signbit(got) != 0, (c & 0x80u) != 0);
            continue;
        }
        double want = code_value(f, c);
        if ((double)got != want) {
            print_message("%s decode 0x%02x: got %a want %a\n", f->name, c, (double)got, want);
            fail();
        }
        assert_int_equal(signbit(got) != 0, (c & 0x80u) != 0); /* -0.0 keeps its sign */
    }
}

static void test_decode_tables_match_the_definitions(void **state) {
    (void)state;
    check_decode_table(&e4m3);
    check_decode_table(&e5m2);
    /* the NaN codes: e4m3 has exactly two, e5m2 decodes like the f16 with
     * the same top byte (quieted, payload kept) */
    assert_int_equal(bits_of(fc_e4m3_to_f32(0x7f)), 0x7fc00000u);
    assert_int_equal(bits_of(fc_e4m3_to_f32(0xff)), 0xffc00000u);
    for (unsigned c = 0; c < 256; c++)
        assert_int_equal(bits_of(fc_e5m2_to_f32((uint8_t)c)),
                         bits_of(fc_f16_to_f32((uint16_t)(c << 8))));
}

static void check_round_trip(const fp8_format *f) {
    for (unsigned c = 0; c < 256; c++) {
        if (is_nan_code(f, c)) continue;
        unsigned back = f->encode(f->decode((uint8_t)c));
        if (back != c) {
            print_message("%s round trip 0x%02x -> 0x%02x\n", f->name, c, back);
            fail();
        }
    }
}

static void test_every_non_nan_code_round_trips(void **state) {
    (void)state;
    check_round_trip(&e4m3);
    check_round_trip(&e5m2);
}

/* Every f16 value, and its f32 neighbours one ulp away, against ref_encode. */
static void check_encode_vs_brute_force(const fp8_format *f) {
    size_t bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t base = bits_of(fc_f16_to_f32((uint16_t)h));
        const uint32_t probes[3] = {base, base + 1u, base - 1u};
        for (int k = 0; k < 3; k++) {
            float x = from_bits(probes[k]);
            unsigned got = f->encode(x), want = ref_encode(f, x);
            if (got != want && bad++ < 8)
                print_message("%s encode 0x%08x (%a): got 0x%02x want 0x%02x\n", f->name,
                              (unsigned)probes[k], (double)x, got, want);
        }
    }
    assert_int_equal(bad, 0);
}

static void test_e4m3_encode_matches_brute_force(void **state) {
    (void)state;
    check_encode_vs_brute_force(&e4m3);
}

static void test_e5m2_encode_matches_brute_force(void **state) {
    (void)state;
    check_encode_vs_brute_force(&e5m2);
}

static void test_worked_values(void **state) {
    (void)state;
    /* exact values */
    assert_int_equal(fc_f32_to_e4m3(3.25f), 0x45);
    assert_true(fc_e4m3_to_f32(fc_f32_to_e4m3(3.25f)) == 3.25f);
    assert_int_equal(fc_f32_to_e5m2(3.0f), 0x42);
    assert_true(fc_e5m2_to_f32(fc_f32_to_e5m2(3.0f)) == 3.0f);
    assert_int_equal(fc_f32_to_e4m3(1.0f), 0x38); /* one(.f8_e4m3) */
    assert_int_equal(fc_f32_to_e5m2(1.0f), 0x3c); /* one(.f8_e5m2) */
    /* 100 sits halfway between 96 and 104 in e4m3 (ties to even: 96) and is
     * nearest to 96 in e5m2 */
    assert_true(fc_e4m3_to_f32(fc_f32_to_e4m3(100.0f)) == 96.0f);
    assert_true(fc_e5m2_to_f32(fc_f32_to_e5m2(100.0f)) == 96.0f);
    /* e4m3 overflow: the NaN code with the input's sign */
    assert_int_equal(fc_f32_to_e4m3(1e6f), 0x7f);
    assert_int_equal(fc_f32_to_e4m3(-1e6f), 0xff);
    assert_int_equal(fc_f32_to_e4m3(INFINITY), 0x7f);
    assert_int_equal(fc_f32_to_e4m3(-INFINITY), 0xff);
    assert_int_equal(fc_f32_to_e4m3(448.0f), 0x7e);
    assert_int_equal(fc_f32_to_e4m3(464.0f), 0x7e); /* tie between 448 and 480: even */
    assert_int_equal(fc_f32_to_e4m3(nextafterf(464.0f, 500.0f)), 0x7f);
    assert_true(isnan(fc_e4m3_to_f32(fc_f32_to_e4m3(1e6f))));
    /* e5m2 overflow: +-inf */
    assert_int_equal(fc_f32_to_e5m2(1e6f), 0x7c);
    assert_int_equal(fc_f32_to_e5m2(-1e6f), 0xfc);
    assert_true(fc_e5m2_to_f32(0x7c) == INFINITY);
    assert_int_equal(fc_f32_to_e5m2(57344.0f), 0x7b);
    assert_int_equal(fc_f32_to_e5m2(61440.0f), 0x7c); /* tie between 57344 and 65536 */
    assert_int_equal(fc_f32_to_e5m2(nextafterf(61440.0f, 0.0f)), 0x7b);
    /* NaN keeps its sign, canonical code 0x7f */
    assert_int_equal(fc_f32_to_e4m3(from_bits(0xffc00000u)), 0xff);
    assert_int_equal(fc_f32_to_e5m2(from_bits(0x7f800001u)), 0x7f);
    assert_int_equal(fc_f32_to_e5m2(from_bits(0xffc00000u)), 0xff);
    /* subnormals and signed zero */
    assert_int_equal(fc_f32_to_e4m3(ldexpf(1.0f, -9)), 0x01);
    assert_int_equal(fc_f32_to_e4m3(ldexpf(1.0f, -10)), 0x00);  /* tie -> even (zero) */
    assert_int_equal(fc_f32_to_e4m3(ldexpf(3.0f, -11)), 0x01);  /* 0.75 units of 2^-9 */
    assert_int_equal(fc_f32_to_e4m3(ldexpf(3.0f, -10)), 0x02);  /* 1.5 units: tie -> 2 */
    assert_int_equal(fc_f32_to_e4m3(ldexpf(15.0f, -10)), 0x08); /* 7.5 units -> min normal */
    assert_int_equal(fc_f32_to_e5m2(-ldexpf(1.0f, -16)), 0x81);
    assert_int_equal(fc_f32_to_e5m2(-0.0f), 0x80);
    assert_int_equal(fc_f32_to_e4m3(from_bits(0x00000001u)), 0x00); /* f32 subnormal */
}

static void test_rows_match_scalar(void **state) {
    (void)state;
    uint8_t codes[256], back[256];
    float vals[256];
    for (unsigned c = 0; c < 256; c++)
        codes[c] = (uint8_t)c;
    fc__e4m3_to_f32_row(codes, vals, 256);
    for (unsigned c = 0; c < 256; c++)
        assert_int_equal(bits_of(vals[c]), bits_of(fc_e4m3_to_f32((uint8_t)c)));
    fc__f32_to_e4m3_row(vals, back, 256);
    for (unsigned c = 0; c < 256; c++)
        assert_int_equal(back[c], fc_f32_to_e4m3(vals[c]));
    fc__e5m2_to_f32_row(codes, vals, 256);
    for (unsigned c = 0; c < 256; c++)
        assert_int_equal(bits_of(vals[c]), bits_of(fc_e5m2_to_f32((uint8_t)c)));
    fc__f32_to_e5m2_row(vals, back, 256);
    for (unsigned c = 0; c < 256; c++)
        assert_int_equal(back[c], fc_f32_to_e5m2(vals[c]));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_tables_match_the_definitions),
        cmocka_unit_test(test_every_non_nan_code_round_trips),
        cmocka_unit_test(test_e4m3_encode_matches_brute_force),
        cmocka_unit_test(test_e5m2_encode_matches_brute_force),
        cmocka_unit_test(test_worked_values),
        cmocka_unit_test(test_rows_match_scalar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
