/* SPDX-License-Identifier: MIT */
/* test_bool_bytes.c - bool bytes other than 0 and 1, by every way they can
 * reach a tensor.
 *
 * A bool is one byte, 0 false and 1 true. Ops read it two ways: as
 * "nonzero" (sums, casts, logic, where) or by value (comparisons compared
 * the bytes), so a 7 was true to one op and not to another. The entry
 * points now keep bytes 0/1 where they can (fc_tensor_from_data
 * normalises its copy; fc_tensor_from_borrowed refuses other bytes;
 * safetensors refuses them at open and writes 0/1), and every op that
 * reads values treats any nonzero byte as true, for the bytes no entry
 * point sees (written through fc_tensor_data_mut). For each path: sum,
 * casts and comparisons agree that a true counts as 1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fucina.h"

static const uint8_t raw[6] = {0, 1, 7, 255, 2, 0};
static const double truth[6] = {0, 1, 1, 1, 1, 0};

/* t (bool, 6 elements) reads as truth[] in every op that reads values.
 * Runs in a scope: every intermediate is released at its end. */
static void assert_reads_as_truth(fc_ctx *c, fc_tensor *t) {
    assert_non_null(t);
    assert_int_equal(fc_tensor_dtype(t), FC_BOOL);
    fc_scope_begin(c);
    double v;
    /* sum: a true counts as 1 */
    assert_int_equal(fc_tensor_item(fc_sum(c, t, NULL, 0, false), &v), FC_OK);
    assert_true(v == 4.0);
    /* casts to every integer width and to floats: 1 per true */
    const fc_dtype to[] = {FC_U8, FC_I8, FC_I16, FC_I32, FC_I64, FC_F16, FC_F32, FC_F64};
    for (size_t d = 0; d < sizeof to / sizeof to[0]; d++) {
        fc_tensor *x = fc_to(c, fc_to(c, t, to[d]), FC_F64);
        assert_non_null(x);
        const double *p = fc_tensor_data(x);
        for (int i = 0; i < 6; i++)
            assert_true(p[i] == truth[i]);
    }
    /* comparisons with canonical bools, logic, where */
    fc_tensor *ones = fc_ones(c, FC_BOOL, (const int64_t[]){6}, 1);
    fc_tensor *zeros = fc_zeros(c, FC_BOOL, (const int64_t[]){6}, 1);
    fc_tensor *one = fc_ones(c, FC_F32, (const int64_t[]){1}, 1);
    fc_tensor *zero = fc_zeros(c, FC_F32, (const int64_t[]){1}, 1);
    fc_tensor *r[] = {
        fc_eq(c, t, ones),
        fc_ne(c, t, zeros),
        fc_ge(c, t, ones),
        fc_logical_not(c, fc_lt(c, t, ones)),
        fc_logical_and(c, t, t),
        fc_where(c, t, one, zero),
        fc_max(c, fc_reshape(c, t, (const int64_t[]){6, 1}, 2), (const int[]){1}, 1, false),
    };
    for (size_t k = 0; k < sizeof r / sizeof r[0]; k++) {
        fc_tensor *x = fc_to(c, r[k], FC_F64);
        assert_non_null(x);
        const double *p = fc_tensor_data(x);
        for (int i = 0; i < 6; i++)
            assert_true(p[i] == truth[i]);
    }
    /* 7 > 1 by value, but true > true is false: no element is above a true */
    assert_int_equal(fc_tensor_item(fc_any(c, fc_gt(c, t, ones), NULL, 0, false), &v), FC_OK);
    assert_true(v == 0.0);
    /* and two different true bytes are equal (7 == 255 when t holds raw[]) */
    assert_int_equal(
        fc_tensor_item(fc_eq(c, fc_narrow(c, t, 0, 2, 1), fc_narrow(c, t, 0, 3, 1)), &v), FC_OK);
    assert_true(v == 1.0);
    assert_int_equal(fc_ctx_status(c), FC_OK);
    fc_scope_end(c);
}

static void test_bool_bytes_from_data_normalised(void **state) {
    fc_ctx *c = *state;
    fc_tensor *t = fc_tensor_from_data(c, FC_BOOL, (const int64_t[]){6}, 1, raw);
    assert_non_null(t);
    const uint8_t *p = fc_tensor_data(t);
    for (int i = 0; i < 6; i++)
        assert_int_equal(p[i], (uint8_t)truth[i]); /* stored as 0/1 */
    assert_reads_as_truth(c, t);
    fc_release(t);
}

/* u8 bytes cast to bool: any nonzero byte becomes a stored 1 */
static void test_bool_bytes_cast_from_u8(void **state) {
    fc_ctx *c = *state;
    fc_tensor *u = fc_tensor_from_data(c, FC_U8, (const int64_t[]){6}, 1, raw);
    fc_tensor *t = fc_to(c, u, FC_BOOL);
    assert_non_null(t);
    const uint8_t *p = fc_tensor_data(t);
    for (int i = 0; i < 6; i++)
        assert_int_equal(p[i], (uint8_t)truth[i]);
    assert_reads_as_truth(c, t);
    fc_release(t);
    fc_release(u);
}

static void test_bool_bytes_borrowed_refused(void **state) {
    fc_ctx *c = *state;
    uint8_t mem[6];
    memcpy(mem, raw, sizeof mem);
    assert_null(fc_tensor_from_borrowed(c, FC_BOOL, (const int64_t[]){6}, 1, mem, true));
    assert_int_equal(fc_ctx_status(c), FC_ERR_INVALID_ARG);
    const char *m = fc_ctx_error(c);
    assert_non_null(strstr(m, "fc_tensor_from_borrowed"));
    assert_non_null(strstr(m, "byte 2 is 7"));
    assert_int_equal(mem[2], 7); /* caller memory untouched */
    fc_ctx_clear_error(c);
    /* 0/1 memory is accepted and aliased */
    uint8_t ok[6] = {0, 1, 1, 1, 1, 0};
    fc_tensor *t = fc_tensor_from_borrowed(c, FC_BOOL, (const int64_t[]){6}, 1, ok, false);
    assert_non_null(t);
    assert_ptr_equal(fc_tensor_data(t), ok);
    assert_reads_as_truth(c, t);
    /* bytes changed later through the mutable pointer still read as truth */
    uint8_t *w = fc_tensor_data_mut(t);
    w[2] = 7, w[3] = 255, w[4] = 2;
    assert_reads_as_truth(c, t);
    fc_release(t);
}

static void test_bool_bytes_written_through_data_mut(void **state) {
    fc_ctx *c = *state;
    fc_tensor *t = fc_zeros(c, FC_BOOL, (const int64_t[]){6}, 1);
    uint8_t *w = fc_tensor_data_mut(t);
    assert_non_null(w);
    memcpy(w, raw, sizeof raw);
    assert_reads_as_truth(c, t);
    /* through transposed views and their copies (the bytes move as they
     * are) the values read the same */
    fc_scope_begin(c);
    fc_tensor *tt =
        fc_contiguous(c, fc_transpose(c, fc_reshape(c, t, (const int64_t[]){3, 2}, 2), 0, 1));
    fc_tensor *back =
        fc_reshape(c, fc_contiguous(c, fc_transpose(c, tt, 0, 1)), (const int64_t[]){6}, 1);
    assert_reads_as_truth(c, back);
    fc_scope_end(c);
    fc_release(t);
}

/* A safetensors save of such bytes writes 0/1: the file opens (open
 * refuses other bytes) and loads back as truth. */
static void test_bool_bytes_safetensors_round_trip(void **state) {
    fc_ctx *c = *state;
    fc_tensor *t = fc_zeros(c, FC_BOOL, (const int64_t[]){6}, 1);
    memcpy(fc_tensor_data_mut(t), raw, sizeof raw);
    char path[512];
    snprintf(path, sizeof path, "%s/bool-bytes-%d.safetensors", FUCINA_BINARY_DIR, (int)getpid());
    const char *names[1] = {"mask"};
    assert_int_equal(fc_safetensors_save(c, path, names, &t, 1, NULL, NULL, 0), FC_OK);
    fc_st_file *f = NULL;
    char err[256] = "";
    fc_io_opts o = {.errbuf = err, .errcap = sizeof err};
    assert_int_equal(fc_safetensors_open(path, &o, &f), FC_OK);
    fc_tensor *r = fc_safetensors_load(c, f, "mask", FC_IO_COPY);
    assert_non_null(r);
    const uint8_t *p = fc_tensor_data(r);
    for (int i = 0; i < 6; i++)
        assert_int_equal(p[i], (uint8_t)truth[i]);
    assert_reads_as_truth(c, r);
    fc_release(r);
    fc_safetensors_close(f);
    unlink(path);
    fc_release(t);
}

static int setup(void **state) {
    fc_ctx *c = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    *state = c;
    return c ? 0 : -1;
}
static int teardown(void **state) {
    fc_ctx *c = *state;
    fc_ctx_stats s;
    fc_ctx_get_stats(c, &s);
    int leaked = (int)s.tensors_live;
    fc_ctx_free(c);
    return leaked == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bool_bytes_from_data_normalised, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bool_bytes_cast_from_u8, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bool_bytes_borrowed_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bool_bytes_written_through_data_mut, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bool_bytes_safetensors_round_trip, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
