/* SPDX-License-Identifier: MIT */
/* test_iquant_golden.c - the i-quant formats against ggml's own output.
 *
 * tests/data/ggml/<type>/ holds a 6 x 1024 input, the bytes ggml's quantizer
 * wrote for it (quant.bin) and ggml's dequantization of those bytes
 * (dequant.f32); see tests/data/ggml/README.md. Every type must reproduce
 * quant.bin byte for byte (row by row, with the all-ones imatrix.f32 where
 * ggml requires one) and dequant.f32 bit for bit. iq4_nl is checked twice:
 * the default quantizer against quant.bin, and FC_QUANT_IQ4NL_REF against
 * quant_ref.bin / dequant_ref.f32. The reference variant is run over the
 * whole matrix in one call, as ggml's generator did (its zero row 3 repeats
 * the codes of row 2's last block, see iquant.h).
 */
/* cmocka.h needs these three first */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/quant/iquant.h"

#define ROWS 6
#define COLS 1024

static void *load_file(const char *type, const char *name, size_t want) {
    char path[512];
    snprintf(path, sizeof path, "%s/ggml/%s/%s", FUCINA_TEST_DATA_DIR, type, name);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    void *buf = malloc(want + 1);
    assert_non_null(buf);
    size_t got = fread(buf, 1, want + 1, f);
    fclose(f);
    if (got != want) fail_msg("%s: %zu bytes, expected %zu", path, got, want);
    return buf;
}

/* Reports the first differing byte with its row, block and offset. */
static void expect_bytes(const char *what, const uint8_t *got, const uint8_t *want, size_t n,
                         size_t row_bytes, size_t block_bytes) {
    for (size_t i = 0; i < n; ++i) {
        if (got[i] != want[i]) {
            size_t r = i / row_bytes, in_row = i % row_bytes;
            fail_msg("%s: first difference at byte %zu (row %zu, block %zu, offset %zu): "
                     "got 0x%02x, ggml 0x%02x",
                     what, i, r, in_row / block_bytes, in_row % block_bytes, got[i], want[i]);
        }
    }
}

static void expect_float_bits(const char *what, const float *got, const float *want, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        uint32_t a, b;
        memcpy(&a, &got[i], 4);
        memcpy(&b, &want[i], 4);
        if (a != b)
            fail_msg("%s: element %zu (row %zu col %zu): got %a (0x%08x), ggml %a (0x%08x)", what,
                     i, i / COLS, i % COLS, (double)got[i], a, (double)want[i], b);
    }
}

typedef struct golden_case {
    fc_dtype dtype;
    const char *folder;
    bool imatrix;
} golden_case;

/* quant_name/dequant_name select the oracle files; whole_matrix quantizes all
 * rows in one call instead of one call per row. */
static void check_type(const golden_case *gc, const char *quant_name, const char *dequant_name,
                       unsigned flags, bool whole_matrix) {
    const fc__quant_fns *fns = fc__quant_family_iquant(gc->dtype);
    assert_non_null(fns);
    const size_t row_bytes =
        (size_t)(COLS / fc_dtype_block_elems(gc->dtype)) * fc_dtype_size(gc->dtype);
    const size_t nbytes = ROWS * row_bytes;
    float *input = load_file(gc->folder, "input.f32", sizeof(float) * ROWS * COLS);
    uint8_t *want_q = load_file(gc->folder, quant_name, nbytes);
    float *want_dq = load_file(gc->folder, dequant_name, sizeof(float) * ROWS * COLS);
    float *imatrix =
        gc->imatrix ? load_file(gc->folder, "imatrix.f32", sizeof(float) * COLS) : NULL;

    uint8_t *got_q = malloc(nbytes);
    float *got_dq = malloc(sizeof(float) * ROWS * COLS);
    assert_non_null(got_q);
    assert_non_null(got_dq);
    memset(got_q, 0xa5, nbytes); /* every byte must be written */
    if (whole_matrix) {
        assert_int_equal(fns->quantize_row(input, got_q, ROWS * COLS, NULL, flags), FC_OK);
    } else {
        for (int r = 0; r < ROWS; ++r)
            assert_int_equal(
                fns->quantize_row(input + r * COLS, got_q + r * row_bytes, COLS, imatrix, flags),
                FC_OK);
    }
    char what[96];
    snprintf(what, sizeof what, "%s %s", gc->folder, quant_name);
    expect_bytes(what, got_q, want_q, nbytes, row_bytes, fc_dtype_size(gc->dtype));

    for (int r = 0; r < ROWS; ++r)
        fns->dequantize_row(want_q + r * row_bytes, got_dq + r * COLS, COLS);
    snprintf(what, sizeof what, "%s %s", gc->folder, dequant_name);
    expect_float_bits(what, got_dq, want_dq, ROWS * COLS);

    free(input);
    free(want_q);
    free(want_dq);
    free(imatrix);
    free(got_q);
    free(got_dq);
}

/* One test per type, so a failure names the format. */
#define GOLDEN_TEST(name, dtype, needs_imatrix)                                                    \
    static void test_iquant_golden_##name(void **state) {                                          \
        (void)state;                                                                               \
        const golden_case gc = {dtype, #name, needs_imatrix};                                      \
        check_type(&gc, "quant.bin", "dequant.f32", 0, false);                                     \
    }
GOLDEN_TEST(iq1_s, FC_IQ1_S, true)
GOLDEN_TEST(iq1_m, FC_IQ1_M, false)
GOLDEN_TEST(iq2_xxs, FC_IQ2_XXS, true)
GOLDEN_TEST(iq2_xs, FC_IQ2_XS, true)
GOLDEN_TEST(iq2_s, FC_IQ2_S, false)
GOLDEN_TEST(iq3_xxs, FC_IQ3_XXS, false)
GOLDEN_TEST(iq3_s, FC_IQ3_S, false)
GOLDEN_TEST(iq4_nl, FC_IQ4_NL, false)
GOLDEN_TEST(iq4_xs, FC_IQ4_XS, false)
#undef GOLDEN_TEST

static void test_iquant_golden_iq4_nl_ref(void **state) {
    (void)state;
    const golden_case gc = {FC_IQ4_NL, "iq4_nl", false};
    check_type(&gc, "quant_ref.bin", "dequant_ref.f32", FC_QUANT_IQ4NL_REF, true);
}

/* The whole-matrix call above and per-row calls agree except where a row
 * starts with all-zero blocks: those keep row 2's codes only in one call. */
static void test_iquant_golden_iq4_nl_ref_per_row(void **state) {
    (void)state;
    const fc__quant_fns *fns = fc__quant_family_iquant(FC_IQ4_NL);
    const size_t row_bytes = 576;
    float *input = load_file("iq4_nl", "input.f32", sizeof(float) * ROWS * COLS);
    uint8_t *want = load_file("iq4_nl", "quant_ref.bin", ROWS * row_bytes);
    uint8_t got[576];
    for (int r = 0; r < ROWS; ++r) {
        assert_int_equal(fns->quantize_row(input + r * COLS, got, COLS, NULL, FC_QUANT_IQ4NL_REF),
                         FC_OK);
        if (r != 3) {
            assert_memory_equal(got, want + r * row_bytes, row_bytes);
            continue;
        }
        for (size_t b = 0; b < row_bytes / 18; ++b) {
            assert_int_equal(got[18 * b] | got[18 * b + 1], 0); /* d = +0 */
            for (int j = 2; j < 18; ++j)
                assert_int_equal(got[18 * b + j], 0x88);
        }
    }
    free(input);
    free(want);
}

static void test_iquant_golden_unowned_dtypes(void **state) {
    (void)state;
    int owned = 0;
    for (int t = 0; t < FC_DTYPE_COUNT; ++t)
        owned += fc__quant_family_iquant((fc_dtype)t) != NULL;
    assert_int_equal(owned, 9);
    assert_null(fc__quant_family_iquant(FC_Q4_K));
    assert_null(fc__quant_family_iquant(FC_F32));
    assert_null(fc__quant_family_iquant(FC_DTYPE_COUNT));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iquant_golden_iq1_s),
        cmocka_unit_test(test_iquant_golden_iq1_m),
        cmocka_unit_test(test_iquant_golden_iq2_xxs),
        cmocka_unit_test(test_iquant_golden_iq2_xs),
        cmocka_unit_test(test_iquant_golden_iq2_s),
        cmocka_unit_test(test_iquant_golden_iq3_xxs),
        cmocka_unit_test(test_iquant_golden_iq3_s),
        cmocka_unit_test(test_iquant_golden_iq4_nl),
        cmocka_unit_test(test_iquant_golden_iq4_xs),
        cmocka_unit_test(test_iquant_golden_iq4_nl_ref),
        cmocka_unit_test(test_iquant_golden_iq4_nl_ref_per_row),
        cmocka_unit_test(test_iquant_golden_unowned_dtypes),
    };
    return cmocka_run_group_tests_name("iquant_golden", tests, NULL, NULL);
}
