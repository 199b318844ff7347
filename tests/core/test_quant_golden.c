/* test_quant_golden.c - byte-exact agreement with ggml on its golden vectors.
 *
 * tests/data/ggml/<type>/ holds ggml's own output for a 6 x 1024 input
 * (Gaussian, uniform, outliers, all zeros, tiny values, repeated values;
 * see tests/data/ggml/README.md): quant.bin from ggml_quantize_chunk with
 * no importance matrix (q8_1, q8_K: their _ref row quantizers), and
 * dequant.f32 from ggml's to_float. For every non-i-quant type:
 * fc_quantize(input) must equal quant.bin byte for byte, and
 * fc_dequantize(quant.bin) must equal dequant.f32 bit for bit (so -0.0 and
 * +0.0 are told apart). q2_0_g128 is PrismML's 128-element q2_0 (FC_Q2_0);
 * ggml master's 64-element q2_0 is FC_Q2_0_G64. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fucina.h"

#define ROWS 6
#define COLS 1024

/* Reads a whole file; fails the test when it is missing or not `expect` bytes. */
static void *read_file(const char *folder, const char *name, size_t expect) {
    char path[512];
    snprintf(path, sizeof path, "%s/ggml/%s/%s", FUCINA_TEST_DATA_DIR, folder, name);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    void *buf = malloc(expect + 1);
    assert_non_null(buf);
    size_t got = fread(buf, 1, expect + 1, f);
    fclose(f);
    if (got != expect) fail_msg("%s: %zu bytes, expected %zu", path, got, expect);
    return buf;
}

static void check_type(const char *folder, fc_dtype dtype) {
    const size_t row_bytes = fc_quant_row_bytes(dtype, COLS);
    assert_true(row_bytes > 0);
    const size_t qbytes = ROWS * row_bytes;
    float *input = read_file(folder, "input.f32", sizeof(float) * ROWS * COLS);
    uint8_t *golden_q = read_file(folder, "quant.bin", qbytes);
    uint32_t *golden_dq = read_file(folder, "dequant.f32", sizeof(float) * ROWS * COLS);

    uint8_t *q = malloc(qbytes);
    float *dq = malloc(sizeof(float) * ROWS * COLS);
    assert_non_null(q);
    assert_non_null(dq);
    /* pre-fill with garbage so an unwritten byte cannot pass by luck */
    memset(q, 0xA5, qbytes);

    assert_int_equal(fc_quantize(dtype, input, q, ROWS, COLS), FC_OK);
    for (size_t i = 0; i < qbytes; i++) {
        if (q[i] != golden_q[i]) {
            fail_msg("%s quantize: row %zu byte %zu: got 0x%02x, ggml 0x%02x", folder,
                     i / row_bytes, i % row_bytes, q[i], golden_q[i]);
        }
    }

    assert_int_equal(fc_dequantize(dtype, golden_q, dq, ROWS, COLS), FC_OK);
    for (size_t i = 0; i < (size_t)ROWS * COLS; i++) {
        uint32_t bits;
        memcpy(&bits, &dq[i], sizeof bits);
        if (bits != golden_dq[i]) {
            fail_msg("%s dequantize: row %zu col %zu: got 0x%08x, ggml 0x%08x", folder,
                     i / COLS, i % COLS, (unsigned)bits, (unsigned)golden_dq[i]);
        }
    }
    free(input);
    free(golden_q);
    free(golden_dq);
    free(q);
    free(dq);
}

#define GOLDEN_TEST(folder, dtype)                                                                 \
    static void test_quant_golden_##folder(void **state) {                                         \
        (void)state;                                                                               \
        check_type(#folder, dtype);                                                                \
    }

GOLDEN_TEST(q4_0, FC_Q4_0)
GOLDEN_TEST(q4_1, FC_Q4_1)
GOLDEN_TEST(q5_0, FC_Q5_0)
GOLDEN_TEST(q5_1, FC_Q5_1)
GOLDEN_TEST(q8_0, FC_Q8_0)
GOLDEN_TEST(q8_1, FC_Q8_1)
GOLDEN_TEST(q2_k, FC_Q2_K)
GOLDEN_TEST(q3_k, FC_Q3_K)
GOLDEN_TEST(q4_k, FC_Q4_K)
GOLDEN_TEST(q5_k, FC_Q5_K)
GOLDEN_TEST(q6_k, FC_Q6_K)
GOLDEN_TEST(q8_k, FC_Q8_K)
GOLDEN_TEST(tq1_0, FC_TQ1_0)
GOLDEN_TEST(tq2_0, FC_TQ2_0)
GOLDEN_TEST(mxfp4, FC_MXFP4)
GOLDEN_TEST(nvfp4, FC_NVFP4)
GOLDEN_TEST(q1_0, FC_Q1_0)
GOLDEN_TEST(q2_0, FC_Q2_0_G64)
GOLDEN_TEST(q2_0_g128, FC_Q2_0)

/* The golden rows include an all-zero row (row 3); q8_K must write zero
 * bsums there (ggml leaves them unwritten; the file holds zeros). This is
 * the same comparison, made explicit against a buffer pre-filled with 0xFF. */
static void test_quant_golden_q8_k_zero_row_bsums(void **state) {
    (void)state;
    float zeros[256] = {0};
    uint8_t blk[292];
    memset(blk, 0xFF, sizeof blk);
    assert_int_equal(fc_quantize(FC_Q8_K, zeros, blk, 1, 256), FC_OK);
    for (size_t i = 0; i < sizeof blk; i++) assert_int_equal(blk[i], 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quant_golden_q4_0),
        cmocka_unit_test(test_quant_golden_q4_1),
        cmocka_unit_test(test_quant_golden_q5_0),
        cmocka_unit_test(test_quant_golden_q5_1),
        cmocka_unit_test(test_quant_golden_q8_0),
        cmocka_unit_test(test_quant_golden_q8_1),
        cmocka_unit_test(test_quant_golden_q2_k),
        cmocka_unit_test(test_quant_golden_q3_k),
        cmocka_unit_test(test_quant_golden_q4_k),
        cmocka_unit_test(test_quant_golden_q5_k),
        cmocka_unit_test(test_quant_golden_q6_k),
        cmocka_unit_test(test_quant_golden_q8_k),
        cmocka_unit_test(test_quant_golden_tq1_0),
        cmocka_unit_test(test_quant_golden_tq2_0),
        cmocka_unit_test(test_quant_golden_mxfp4),
        cmocka_unit_test(test_quant_golden_nvfp4),
        cmocka_unit_test(test_quant_golden_q1_0),
        cmocka_unit_test(test_quant_golden_q2_0),
        cmocka_unit_test(test_quant_golden_q2_0_g128),
        cmocka_unit_test(test_quant_golden_q8_k_zero_row_bsums),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
