/* SPDX-License-Identifier: MIT */
/* test_convert_f16.c - f16 and bf16 <-> f32, scalar and row, against ggml's
 * golden bits (tests/data/ggml/fp, see its README), against a brute-force
 * nearest-even search written here, and every SIMD row path the machine can
 * run against the portable one. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/convert.h"
#include "fc_test_data.h"
#include "fucina/dtype.h"

#define N_RANDOM (1u << 21) /* pseudo-random f32 patterns per encode check */

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

/* Counts a mismatch and prints the first few. */
static size_t mismatch(size_t bad, const char *what, size_t i, uint32_t in, uint32_t got,
                       uint32_t want) {
    if (bad < 8)
        print_message("%s: #%zu input 0x%08x got 0x%08x want 0x%08x\n", what, i, (unsigned)in,
                      (unsigned)got, (unsigned)want);
    return bad + 1;
}

static void *load(const char *rel, size_t elem, size_t *count) {
    size_t size = 0;
    void *p = fc_test_read_file(FUCINA_TEST_DATA_DIR, rel, &size);
    assert_non_null(p);
    assert_int_equal(size % elem, 0);
    *count = size / elem;
    return p;
}

/* ---- an independent reference: nearest-even search over a decoder ----- */

typedef float (*decode_fn)(uint16_t);

/* |a| rounded to nearest even among the positive codes 0..max_code of a
 * format whose decoding is monotonic in the code; max_code + 1 stands for the
 * value one step above (the infinity code, at its exponent-extended value
 * `beyond`). Done in double, where every midpoint here is exact. */
static uint16_t nearest_even(double a, decode_fn dec, uint16_t max_code, double beyond) {
    uint32_t lo = 0, hi = max_code; /* largest code with value <= a */
    if (a >= (double)dec(max_code)) {
        lo = max_code;
    } else {
        while (lo < hi) {
            uint32_t mid = (lo + hi + 1) / 2;
            if ((double)dec((uint16_t)mid) <= a)
                lo = mid;
            else
                hi = mid - 1;
        }
    }
    double below = dec((uint16_t)lo);
    double above = lo == max_code ? beyond : (double)dec((uint16_t)(lo + 1));
    if (a - below < above - a) return (uint16_t)lo;
    if (a - below > above - a) return (uint16_t)(lo + 1);
    return (uint16_t)((lo & 1u) ? lo + 1 : lo);
}

static uint16_t ref_f32_to_f16(float x) {
    uint16_t sign = (uint16_t)((bits_of(x) >> 16) & 0x8000u);
    if (isnan(x)) return sign | 0x7e00u; /* ggml: every NaN -> sign | 0x7e00 */
    return sign | nearest_even(fabs((double)x), fc_f16_to_f32, 0x7bff, 65536.0);
}

static uint16_t ref_f32_to_bf16(float x) {
    uint32_t u = bits_of(x);
    if (isnan(x)) return (uint16_t)((u >> 16) | 0x40u); /* ggml: quiet, payload kept */
    return (uint16_t)((u >> 16) & 0x8000u) |
           nearest_even(fabs((double)x), fc_bf16_to_f32, 0x7f7f, ldexp(1.0, 128));
}

/* ---- golden files --------------------------------------------------------- */

static void test_f16_decode_every_pattern_matches_ggml(void **state) {
    (void)state;
    size_t n_bits, n_out;
    uint16_t *bits = load("ggml/fp/f16_to_f32/bits.u16", 2, &n_bits);
    uint32_t *out = load("ggml/fp/f16_to_f32/output.f32", 4, &n_out);
    assert_int_equal(n_bits, 65536);
    assert_int_equal(n_out, 65536);
    size_t bad = 0;
    for (size_t i = 0; i < 65536; i++) {
        assert_int_equal(bits[i], i);
        uint32_t got = bits_of(fc_f16_to_f32(bits[i]));
        if (got != out[i]) bad = mismatch(bad, "f16->f32", i, bits[i], got, out[i]);
    }
    assert_int_equal(bad, 0);
    free(bits);
    free(out);
}

static void test_f16_encode_matches_ggml(void **state) {
    (void)state;
    size_t n_in, n_bits, n_cpu;
    float *in = load("ggml/fp/f16/input.f32", 4, &n_in);
    uint16_t *want = load("ggml/fp/f16/bits.u16", 2, &n_bits);
    uint16_t *cpu = load("ggml/fp/f16/bits_cpu.u16", 2, &n_cpu);
    assert_int_equal(n_in, 4096);
    assert_int_equal(n_bits, n_in);
    assert_int_equal(n_cpu, n_in);
    size_t bad = 0, nan_diffs = 0;
    for (size_t i = 0; i < n_in; i++) {
        uint16_t got = fc_f32_to_f16(in[i]);
        if (got != want[i]) bad = mismatch(bad, "f32->f16", i, bits_of(in[i]), got, want[i]);
        if (ref_f32_to_f16(in[i]) != want[i])
            bad = mismatch(bad, "reference f32->f16", i, bits_of(in[i]), ref_f32_to_f16(in[i]),
                           want[i]);
        /* ggml's hardware path differs only on NaNs (payload kept) */
        if (cpu[i] != want[i]) {
            assert_true(isnan(in[i]));
            nan_diffs++;
        }
    }
    assert_int_equal(bad, 0);
    assert_int_equal(nan_diffs, 13); /* as the golden README says */
    free(in);
    free(want);
    free(cpu);
}

static void test_bf16_encode_matches_ggml(void **state) {
    (void)state;
    size_t n_in, n_bits;
    float *in = load("ggml/fp/bf16/input.f32", 4, &n_in);
    uint16_t *want = load("ggml/fp/bf16/bits.u16", 2, &n_bits);
    assert_int_equal(n_bits, n_in);
    size_t bad = 0;
    for (size_t i = 0; i < n_in; i++) {
        uint16_t got = fc_f32_to_bf16(in[i]);
        if (got != want[i]) bad = mismatch(bad, "f32->bf16", i, bits_of(in[i]), got, want[i]);
        if (ref_f32_to_bf16(in[i]) != want[i])
            bad = mismatch(bad, "reference f32->bf16", i, bits_of(in[i]), ref_f32_to_bf16(in[i]),
                           want[i]);
    }
    assert_int_equal(bad, 0);
    free(in);
    free(want);
}

static void test_bf16_decode_every_pattern_is_a_shift(void **state) {
    (void)state;
    size_t bad = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        uint32_t got = bits_of(fc_bf16_to_f32((uint16_t)b));
        if (got != b << 16) bad = mismatch(bad, "bf16->f32", b, b, got, b << 16);
    }
    assert_int_equal(bad, 0);
}

static void test_worked_values(void **state) {
    (void)state;
    assert_true(fc_bf16_to_f32(fc_f32_to_bf16(3.14159f)) == 3.140625f);
    assert_int_equal(fc_f32_to_bf16(3.14159f), 0x4049);
    assert_int_equal(fc_f32_to_bf16(-0.75f), 0xbf40);
    assert_int_equal(fc_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(fc_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(fc_f32_to_f16(65520.0f), 0x7c00);     /* the tie above max -> inf */
    assert_int_equal(fc_f32_to_f16(ldexpf(1.0f, -25)), 0); /* tie -> even (zero) */
    assert_int_equal(fc_f32_to_f16(-ldexpf(1.5f, -25)), 0x8001);
    assert_int_equal(fc_f32_to_bf16(from_bits(0x7f800001u)), 0x7fc0); /* sNaN stays NaN */
    assert_int_equal(fc_f32_to_bf16(from_bits(0xff810000u)), 0xffc1);
    float x = 1.5f;
    unsigned char bytes[4];
    memcpy(bytes, &x, sizeof bytes);
    const unsigned char want[4] = {0x00, 0x00, 0xc0, 0x3f}; /* little-endian IEEE binary32 */
    assert_memory_equal(bytes, want, 4);
}

/* ---- rows: every available ISA against the scalar functions ------------------ */

/* The implementations to test: every ISA level this CPU runs, plus the
 * dispatched entry points as one more "implementation". */
static size_t collect_rows(const fc__half_rows **out) {
    static const fc__half_rows dispatched = {"dispatched", fc__f16_to_f32_row, fc__f32_to_f16_row,
                                             fc__bf16_to_f32_row, fc__f32_to_bf16_row};
    size_t k = 0;
    for (int isa = 0; isa < FC__ISA_COUNT; isa++) {
        const fc__half_rows *r = fc__half_rows_for((fc__isa)isa);
        if (r)
            out[k++] = r;
        else
            print_message("row ISA %d not available on this machine\n", isa);
    }
    out[k++] = &dispatched;
    assert_non_null(fc__half_rows_best());
    assert_ptr_equal(fc__half_rows_for(FC__ISA_PORTABLE)->f16_to_f32, fc__f16_to_f32_row_portable);
    return k;
}

static void test_rows_decode_every_pattern(void **state) {
    (void)state;
    const fc__half_rows *impl[FC__ISA_COUNT + 1];
    size_t n_impl = collect_rows(impl);
    uint16_t *src = malloc(65536 * sizeof *src);
    float *dst = malloc(65536 * sizeof *dst);
    assert_non_null(src);
    assert_non_null(dst);
    for (uint32_t i = 0; i < 65536; i++)
        src[i] = (uint16_t)i;
    /* offsets and lengths that leave vector tails of every size */
    static const size_t starts[] = {0, 1, 3, 7, 13};
    for (size_t k = 0; k < n_impl; k++) {
        for (size_t s = 0; s < sizeof starts / sizeof *starts; s++) {
            size_t off = starts[s], n = 65536 - off - s;
            size_t bad = 0;
            memset(dst, 0xa5, 65536 * sizeof *dst);
            impl[k]->f16_to_f32(src + off, dst + off, n);
            for (size_t i = off; i < off + n; i++) {
                uint32_t want = bits_of(fc_f16_to_f32(src[i]));
                if (bits_of(dst[i]) != want)
                    bad = mismatch(bad, impl[k]->name, i, src[i], bits_of(dst[i]), want);
            }
            impl[k]->bf16_to_f32(src + off, dst + off, n);
            for (size_t i = off; i < off + n; i++) {
                uint32_t want = bits_of(fc_bf16_to_f32(src[i]));
                if (bits_of(dst[i]) != want)
                    bad = mismatch(bad, impl[k]->name, i, src[i], bits_of(dst[i]), want);
            }
            /* nothing written past the end */
            if (off + n < 65536) assert_int_equal(bits_of(dst[off + n]), 0xa5a5a5a5u);
            assert_int_equal(bad, 0);
        }
    }
    free(src);
    free(dst);
}

/* Golden inputs, then the f32 neighbourhood of every f16 and bf16 value
 * (the value, +-1 ulp, the bf16 ties), then pseudo-random bit patterns. */
static float *encode_inputs(size_t *count) {
    size_t n_golden;
    float *golden = load("ggml/fp/f16/input.f32", 4, &n_golden);
    size_t n = n_golden + 65536 * 6 + N_RANDOM;
    float *in = malloc(n * sizeof *in);
    assert_non_null(in);
    size_t k = 0;
    for (size_t i = 0; i < n_golden; i++)
        in[k++] = golden[i];
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t f = bits_of(fc_f16_to_f32((uint16_t)h));
        in[k++] = from_bits(f);
        in[k++] = from_bits(f + 1);
        in[k++] = from_bits(f - 1);
        in[k++] = from_bits(h << 16 | 0x8000u);
        in[k++] = from_bits(h << 16 | 0x7fffu);
        in[k++] = from_bits(h << 16 | 0x8001u);
    }
    uint64_t seed = 0x5eed0001u;
    for (size_t i = 0; i < N_RANDOM; i++)
        in[k++] = from_bits((uint32_t)fc_test_splitmix64(&seed));
    free(golden);
    *count = k;
    return in;
}

static void test_rows_encode_match_scalar(void **state) {
    (void)state;
    const fc__half_rows *impl[FC__ISA_COUNT + 1];
    size_t n_impl = collect_rows(impl);
    size_t n;
    float *in = encode_inputs(&n);
    uint16_t *want_h = malloc(n * sizeof *want_h), *want_b = malloc(n * sizeof *want_b);
    uint16_t *got = malloc(n * sizeof *got);
    assert_non_null(want_h);
    assert_non_null(want_b);
    assert_non_null(got);
    for (size_t i = 0; i < n; i++) {
        want_h[i] = fc_f32_to_f16(in[i]);
        want_b[i] = fc_f32_to_bf16(in[i]);
    }
    for (size_t k = 0; k < n_impl; k++) {
        size_t bad = 0;
        /* start one element in so the vector loop meets a tail at both ends */
        impl[k]->f32_to_f16(in + 1, got + 1, n - 1);
        for (size_t i = 1; i < n; i++)
            if (got[i] != want_h[i])
                bad = mismatch(bad, impl[k]->name, i, bits_of(in[i]), got[i], want_h[i]);
        impl[k]->f32_to_bf16(in + 1, got + 1, n - 1);
        for (size_t i = 1; i < n; i++)
            if (got[i] != want_b[i])
                bad = mismatch(bad, impl[k]->name, i, bits_of(in[i]), got[i], want_b[i]);
        assert_int_equal(bad, 0);
    }
    free(in);
    free(want_h);
    free(want_b);
    free(got);
}

/* The scalar encoders against the brute-force search, on the same inputs. */
static void test_scalar_encode_matches_reference(void **state) {
    (void)state;
    size_t n, bad = 0;
    float *in = encode_inputs(&n);
    for (size_t i = 0; i < n; i++) {
        uint16_t h = fc_f32_to_f16(in[i]), rh = ref_f32_to_f16(in[i]);
        if (h != rh) bad = mismatch(bad, "f16 vs reference", i, bits_of(in[i]), h, rh);
        uint16_t b = fc_f32_to_bf16(in[i]), rb = ref_f32_to_bf16(in[i]);
        if (b != rb) bad = mismatch(bad, "bf16 vs reference", i, bits_of(in[i]), b, rb);
    }
    assert_int_equal(bad, 0);
    free(in);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_decode_every_pattern_matches_ggml),
        cmocka_unit_test(test_f16_encode_matches_ggml),
        cmocka_unit_test(test_bf16_encode_matches_ggml),
        cmocka_unit_test(test_bf16_decode_every_pattern_is_a_shift),
        cmocka_unit_test(test_worked_values),
        cmocka_unit_test(test_rows_decode_every_pattern),
        cmocka_unit_test(test_rows_encode_match_scalar),
        cmocka_unit_test(test_scalar_encode_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
