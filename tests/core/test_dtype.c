/* SPDX-License-Identifier: MIT */
/* test_dtype.c - the dtype registry, predicates, accumulators and the float
 * compute/output policy, each against an explicit table written here from
 * seed 000 sections 8.1-8.3 (not generated from FC_DTYPE_LIST). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fucina/dtype.h"

/* ---- section 8.1: names, kinds, sizes, block geometry ---------------------- */

typedef struct traits_row {
    fc_dtype dtype;
    const char *name;
    bool block;
    size_t bytes;  /* scalar size, or bytes per block */
    int64_t elems; /* 1, or elements per block */
} traits_row;

static const traits_row traits[] = {
    {FC_BOOL, "bool", false, 1, 1},
    {FC_U8, "u8", false, 1, 1},
    {FC_U16, "u16", false, 2, 1},
    {FC_I8, "i8", false, 1, 1},
    {FC_I16, "i16", false, 2, 1},
    {FC_I32, "i32", false, 4, 1},
    {FC_I64, "i64", false, 8, 1},
    {FC_F16, "f16", false, 2, 1},
    {FC_BF16, "bf16", false, 2, 1},
    {FC_F32, "f32", false, 4, 1},
    {FC_F64, "f64", false, 8, 1},
    {FC_F8_E4M3, "f8_e4m3", false, 1, 1},
    {FC_F8_E5M2, "f8_e5m2", false, 1, 1},
    {FC_Q1_0, "q1_0", true, 18, 128},
    {FC_Q2_0, "q2_0", true, 34, 128},
    {FC_Q4_0, "q4_0", true, 18, 32},
    {FC_Q4_1, "q4_1", true, 20, 32},
    {FC_Q5_0, "q5_0", true, 22, 32},
    {FC_Q5_1, "q5_1", true, 24, 32},
    {FC_Q8_0, "q8_0", true, 34, 32},
    {FC_Q8_1, "q8_1", true, 36, 32},
    {FC_Q2_K, "q2_k", true, 84, 256},
    {FC_Q3_K, "q3_k", true, 110, 256},
    {FC_Q4_K, "q4_k", true, 144, 256},
    {FC_Q5_K, "q5_k", true, 176, 256},
    {FC_Q6_K, "q6_k", true, 210, 256},
    {FC_Q8_K, "q8_k", true, 292, 256},
    {FC_IQ1_S, "iq1_s", true, 50, 256},
    {FC_IQ1_M, "iq1_m", true, 56, 256},
    {FC_IQ2_XXS, "iq2_xxs", true, 66, 256},
    {FC_IQ2_XS, "iq2_xs", true, 74, 256},
    {FC_IQ2_S, "iq2_s", true, 82, 256},
    {FC_IQ3_XXS, "iq3_xxs", true, 98, 256},
    {FC_IQ3_S, "iq3_s", true, 110, 256},
    {FC_IQ4_NL, "iq4_nl", true, 18, 32},
    {FC_IQ4_XS, "iq4_xs", true, 136, 256},
    {FC_TQ1_0, "tq1_0", true, 54, 256},
    {FC_TQ2_0, "tq2_0", true, 66, 256},
    {FC_MXFP4, "mxfp4", true, 17, 32},
    {FC_NVFP4, "nvfp4", true, 36, 64},
    {FC_Q2_0_G64, "q2_0_g64", true, 18, 64},
    {FC_NF4, "nf4", true, 34, 64},
};

static void test_traits_table(void **state) {
    (void)state;
    size_t n = sizeof traits / sizeof *traits;
    assert_int_equal(n, FC_DTYPE_COUNT);
    for (size_t i = 0; i < n; i++) {
        const traits_row *r = &traits[i];
        assert_int_equal(r->dtype, (fc_dtype)i); /* the spec's order */
        assert_true(fc_dtype_is_valid(r->dtype));
        assert_string_equal(fc_dtype_name(r->dtype), r->name);
        fc_dtype back = FC_DTYPE_COUNT;
        assert_int_equal(fc_dtype_from_name(r->name, &back), FC_OK);
        assert_int_equal(back, r->dtype);
        assert_int_equal(fc_dtype_kind_of(r->dtype), r->block ? FC_KIND_BLOCK : FC_KIND_SCALAR);
        assert_int_equal(fc_dtype_is_block(r->dtype), r->block);
        assert_int_equal(fc_dtype_is_scalar(r->dtype), !r->block);
        assert_int_equal(fc_dtype_size(r->dtype), r->bytes);
        assert_int_equal(fc_dtype_block_elems(r->dtype), r->elems);
    }
}

static void test_names_and_invalid_dtypes(void **state) {
    (void)state;
    fc_dtype out = FC_F32;
    static const char *const unknown[] = {"", "F32", "q4_K", "f8", "float", "bool ", "nf4x"};
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
        assert_int_equal(fc_dtype_from_name(unknown[i], &out), FC_ERR_DTYPE);
        assert_int_equal(out, FC_F32); /* untouched */
    }
    assert_int_equal(fc_dtype_from_name(NULL, &out), FC_ERR_NULL_ARG);
    assert_int_equal(fc_dtype_from_name("f32", NULL), FC_ERR_NULL_ARG);
    static const fc_dtype bad[] = {FC_DTYPE_COUNT, (fc_dtype)-1, (fc_dtype)1000};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fc_dtype t = bad[i];
        assert_false(fc_dtype_is_valid(t));
        assert_string_equal(fc_dtype_name(t), "invalid");
        assert_int_equal(fc_dtype_size(t), 0);
        assert_int_equal(fc_dtype_block_elems(t), 0);
        assert_false(fc_dtype_is_scalar(t));
        assert_false(fc_dtype_is_block(t));
        assert_false(fc_dtype_is_f8(t));
        assert_false(fc_dtype_is_float(t));
        assert_false(fc_dtype_supports_to_float(t));
        assert_int_equal(fc_dtype_accumulator(t), FC_ACCUM_NONE);
        assert_int_equal(fc_dtype_policy(FC_FLOAT_OP_POINTWISE, t, NULL, NULL), FC_ERR_DTYPE);
    }
}

/* ---- section 8.2: predicates and accumulators -------------------------------- */

typedef struct pred_row {
    fc_dtype dtype;
    bool f8, sint, uint, is_float, grad, imath, to_float, qrhs, block;
    fc_dtype logical;
    fc_accum accum;
} pred_row;

/* f8 sint uint is_float grad imath to_float qrhs block logical accum */
#define B(t)                                                                                       \
    { t, 0, 0, 0, 0, 0, 0, 1, 1, 1, FC_F32, FC_ACCUM_NONE } /* a block dtype */
static const pred_row preds[] = {
    {FC_BOOL, 0, 0, 0, 0, 0, 0, 0, 0, 0, FC_BOOL, FC_ACCUM_U64},
    {FC_U8, 0, 0, 1, 0, 0, 1, 0, 0, 0, FC_U8, FC_ACCUM_U64},
    {FC_U16, 0, 0, 1, 0, 0, 1, 0, 0, 0, FC_U16, FC_ACCUM_U64},
    {FC_I8, 0, 1, 0, 0, 0, 1, 0, 0, 0, FC_I8, FC_ACCUM_I64},
    {FC_I16, 0, 1, 0, 0, 0, 1, 0, 0, 0, FC_I16, FC_ACCUM_I64},
    {FC_I32, 0, 1, 0, 0, 0, 1, 0, 0, 0, FC_I32, FC_ACCUM_I64},
    {FC_I64, 0, 1, 0, 0, 0, 1, 0, 0, 0, FC_I64, FC_ACCUM_I64},
    {FC_F16, 0, 0, 0, 1, 1, 0, 1, 0, 0, FC_F16, FC_ACCUM_F32},
    {FC_BF16, 0, 0, 0, 1, 1, 0, 1, 0, 0, FC_BF16, FC_ACCUM_F32},
    {FC_F32, 0, 0, 0, 1, 1, 0, 1, 0, 0, FC_F32, FC_ACCUM_F32},
    {FC_F64, 0, 0, 0, 1, 1, 0, 1, 0, 0, FC_F64, FC_ACCUM_F64},
    {FC_F8_E4M3, 1, 0, 0, 0, 0, 0, 1, 0, 0, FC_F32, FC_ACCUM_F32},
    {FC_F8_E5M2, 1, 0, 0, 0, 0, 0, 1, 0, 0, FC_F32, FC_ACCUM_F32},
    B(FC_Q1_0),
    B(FC_Q2_0),
    B(FC_Q4_0),
    B(FC_Q4_1),
    B(FC_Q5_0),
    B(FC_Q5_1),
    B(FC_Q8_0),
    /* the two activation-side formats are not matmul right-hand sides */
    {FC_Q8_1, 0, 0, 0, 0, 0, 0, 1, 0, 1, FC_F32, FC_ACCUM_NONE},
    B(FC_Q2_K),
    B(FC_Q3_K),
    B(FC_Q4_K),
    B(FC_Q5_K),
    B(FC_Q6_K),
    {FC_Q8_K, 0, 0, 0, 0, 0, 0, 1, 0, 1, FC_F32, FC_ACCUM_NONE},
    B(FC_IQ1_S),
    B(FC_IQ1_M),
    B(FC_IQ2_XXS),
    B(FC_IQ2_XS),
    B(FC_IQ2_S),
    B(FC_IQ3_XXS),
    B(FC_IQ3_S),
    B(FC_IQ4_NL),
    B(FC_IQ4_XS),
    B(FC_TQ1_0),
    B(FC_TQ2_0),
    B(FC_MXFP4),
    B(FC_NVFP4),
    B(FC_Q2_0_G64),
    B(FC_NF4),
};
#undef B

/* Compares one property; prints the dtype and property on a mismatch. */
static int expect(const char *dtype, const char *what, long got, long want) {
    if (got == want) return 0;
    print_message("%s: %s is %ld, expected %ld\n", dtype, what, got, want);
    return 1;
}

static void test_predicates(void **state) {
    (void)state;
    size_t n = sizeof preds / sizeof *preds;
    assert_int_equal(n, FC_DTYPE_COUNT);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const pred_row *r = &preds[i];
        fc_dtype t = r->dtype;
        const char *nm = fc_dtype_name(t);
        assert_int_equal(t, (fc_dtype)i);
        bad += expect(nm, "is_f8", fc_dtype_is_f8(t), r->f8);
        bad += expect(nm, "is_signed_int", fc_dtype_is_signed_int(t), r->sint);
        bad += expect(nm, "is_unsigned_int", fc_dtype_is_unsigned_int(t), r->uint);
        bad += expect(nm, "is_float", fc_dtype_is_float(t), r->is_float);
        bad += expect(nm, "supports_grad", fc_dtype_supports_grad(t), r->grad);
        bad += expect(nm, "int_math", fc_dtype_supports_int_math(t), r->imath);
        bad += expect(nm, "to_float", fc_dtype_supports_to_float(t), r->to_float);
        bad += expect(nm, "qmatmul_rhs", fc_dtype_supports_quantized_matmul_rhs(t), r->qrhs);
        bad += expect(nm, "is_block", fc_dtype_is_block(t), r->block);
        bad += expect(nm, "logical", fc_dtype_logical(t), r->logical);
        bad += expect(nm, "accumulator", fc_dtype_accumulator(t), r->accum);
    }
    assert_int_equal(bad, 0);
}

/* ---- section 8.3: the float compute/output policy ----------------------------- */

typedef struct policy_row {
    fc_dtype dtype;
    fc_float_op op;
    fc_status status;
    fc_dtype compute, output; /* meaningful when status == FC_OK */
} policy_row;

#define PW FC_FLOAT_OP_POINTWISE
#define WI FC_FLOAT_OP_WIDENED
#define RE FC_FLOAT_OP_REDUCTION
#define MM FC_FLOAT_OP_MATMUL
#define OK FC_OK
#define NO FC_ERR_DTYPE
#define INT_ROWS(t)                                                                                \
    {t, PW, OK, t, t}, {t, WI, NO, t, t}, {t, RE, OK, FC_I64, FC_I64}, { t, MM, NO, t, t }
#define F8_ROWS(t)                                                                                 \
    {t, PW, NO, t, t}, {t, WI, NO, t, t}, {t, RE, NO, t, t}, { t, MM, NO, t, t }
static const policy_row policy[] = {
    {FC_BOOL, PW, NO, FC_BOOL, FC_BOOL},
    {FC_BOOL, WI, NO, FC_BOOL, FC_BOOL},
    {FC_BOOL, RE, OK, FC_I64, FC_I64},
    {FC_BOOL, MM, NO, FC_BOOL, FC_BOOL},
    INT_ROWS(FC_U8),
    INT_ROWS(FC_U16),
    INT_ROWS(FC_I8),
    INT_ROWS(FC_I16),
    INT_ROWS(FC_I32),
    INT_ROWS(FC_I64),
    {FC_F16, PW, OK, FC_F16, FC_F16},
    {FC_F16, WI, OK, FC_F32, FC_F16},
    {FC_F16, RE, OK, FC_F32, FC_F32},
    {FC_F16, MM, OK, FC_F32, FC_F16},
    {FC_BF16, PW, OK, FC_F32, FC_BF16},
    {FC_BF16, WI, OK, FC_F32, FC_BF16},
    {FC_BF16, RE, OK, FC_F32, FC_F32},
    {FC_BF16, MM, OK, FC_F32, FC_BF16},
    {FC_F32, PW, OK, FC_F32, FC_F32},
    {FC_F32, WI, OK, FC_F32, FC_F32},
    {FC_F32, RE, OK, FC_F32, FC_F32},
    {FC_F32, MM, OK, FC_F32, FC_F32},
    {FC_F64, PW, OK, FC_F64, FC_F64},
    {FC_F64, WI, OK, FC_F64, FC_F64},
    {FC_F64, RE, OK, FC_F64, FC_F64},
    {FC_F64, MM, OK, FC_F64, FC_F64},
    F8_ROWS(FC_F8_E4M3),
    F8_ROWS(FC_F8_E5M2),
};
#undef INT_ROWS
#undef F8_ROWS

static void test_policy_scalar_dtypes(void **state) {
    (void)state;
    size_t n = sizeof policy / sizeof *policy;
    assert_int_equal(n, 13 * FC_FLOAT_OP_COUNT);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const policy_row *r = &policy[i];
        static const char *const ops[] = {"pointwise", "widened", "reduction", "matmul"};
        char nm[48];
        snprintf(nm, sizeof nm, "%s %s", fc_dtype_name(r->dtype), ops[r->op]);
        fc_dtype compute = FC_NF4, output = FC_NF4; /* sentinels: untouched on error */
        bad += expect(nm, "policy status", fc_dtype_policy(r->op, r->dtype, &compute, &output),
                      r->status);
        if (r->status == FC_OK) {
            bad += expect(nm, "compute", compute, r->compute);
            bad += expect(nm, "output", output, r->output);
            /* either output may be NULL */
            compute = output = FC_NF4;
            bad += expect(nm, "status (NULL output)",
                          fc_dtype_policy(r->op, r->dtype, &compute, NULL), FC_OK);
            bad += expect(nm, "status (NULL compute)",
                          fc_dtype_policy(r->op, r->dtype, NULL, &output), FC_OK);
            bad += expect(nm, "compute alone", compute, r->compute);
            bad += expect(nm, "output alone", output, r->output);
        } else {
            bad += expect(nm, "compute untouched", compute, FC_NF4);
            bad += expect(nm, "output untouched", output, FC_NF4);
        }
    }
    assert_int_equal(bad, 0);
    /* every (scalar dtype, op) pair appears exactly once */
    for (int t = 0; t < 13; t++)
        for (int op = 0; op < FC_FLOAT_OP_COUNT; op++) {
            int seen = 0;
            for (size_t i = 0; i < n; i++)
                seen += policy[i].dtype == (fc_dtype)t && policy[i].op == (fc_float_op)op;
            assert_int_equal(seen, 1);
        }
}
#undef PW
#undef WI
#undef RE
#undef MM
#undef OK
#undef NO

static void test_policy_block_dtypes_and_bad_ops(void **state) {
    (void)state;
    for (int t = FC_Q1_0; t < FC_DTYPE_COUNT; t++) {
        for (int op = 0; op < FC_FLOAT_OP_COUNT; op++) {
            fc_dtype compute = FC_BOOL, output = FC_BOOL;
            assert_int_equal(fc_dtype_policy((fc_float_op)op, (fc_dtype)t, &compute, &output),
                             FC_OK);
            assert_int_equal(compute, t);
            assert_int_equal(output, t);
        }
    }
    fc_dtype compute = FC_BOOL;
    assert_int_equal(fc_dtype_policy(FC_FLOAT_OP_COUNT, FC_F32, &compute, NULL), FC_ERR_DTYPE);
    assert_int_equal(fc_dtype_policy((fc_float_op)-1, FC_F32, &compute, NULL), FC_ERR_DTYPE);
    assert_int_equal(compute, FC_BOOL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_traits_table),
        cmocka_unit_test(test_names_and_invalid_dtypes),
        cmocka_unit_test(test_predicates),
        cmocka_unit_test(test_policy_scalar_dtypes),
        cmocka_unit_test(test_policy_block_dtypes_and_bad_ops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
