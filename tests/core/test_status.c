/* SPDX-License-Identifier: MIT */
/* test_status.c - the status vocabulary: distinct values, a text and a name
 * for every code, and the documented answers for codes not in the list. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fucina/status.h"

typedef struct status_row {
    fc_status code;
    const char *identifier;
} status_row;

/* The identifiers as the preprocessor spells them, next to their values. */
static const status_row rows[] = {
#define ROW(name, value, text) {name, #name},
    FC_STATUS_LIST(ROW)
#undef ROW
};

static void test_every_status_is_distinct_and_described(void **state) {
    (void)state;
    size_t n = sizeof rows / sizeof *rows;
    assert_int_equal(n, FC_STATUS_COUNT);
    assert_int_equal(FC_OK, 0);
    for (size_t i = 0; i < n; i++) {
        fc_status c = rows[i].code;
        if (c != FC_OK) assert_true(c < 0); /* errors are negative */
        const char *text = fc_strerror(c);
        assert_non_null(text);
        assert_true(strlen(text) > 0);
        assert_string_not_equal(text, "unknown status");
        assert_string_equal(fc_status_name(c), rows[i].identifier);
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(rows[j].code, c);
            assert_string_not_equal(fc_strerror(rows[j].code), text);
        }
    }
    /* a few fixed points of the public contract */
    assert_string_equal(fc_status_name(FC_ERR_OOM), "FC_ERR_OOM");
    assert_string_equal(fc_strerror(FC_ERR_OOM), "out of memory");
    assert_string_equal(fc_status_name(FC_ERR_DTYPE), "FC_ERR_DTYPE");
    assert_string_equal(fc_status_name(FC_ERR_NULL_ARG), "FC_ERR_NULL_ARG");
}

static void test_unknown_codes(void **state) {
    (void)state;
    /* positive values are never codes; the negative ones are far past the
     * list (checked, so a new code cannot silently make this vacuous) */
    static const int unknown[] = {1, 7, 12345, -999, -100000};
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
        fc_status c = (fc_status)unknown[i];
        for (size_t j = 0; j < sizeof rows / sizeof *rows; j++)
            assert_int_not_equal(rows[j].code, c);
        assert_string_equal(fc_strerror(c), "unknown status");
        assert_string_equal(fc_status_name(c), "FC_UNKNOWN");
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_status_is_distinct_and_described),
        cmocka_unit_test(test_unknown_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
