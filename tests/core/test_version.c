/* SPDX-License-Identifier: MIT */
/* test_version.c - fc_version() agrees with the header's numbers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>
#include "fucina.h"

static void test_version_matches_header(void **state) {
    (void)state;
    const char *v = fc_version();
    assert_non_null(v);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", FC_VERSION_MAJOR, FC_VERSION_MINOR, FC_VERSION_PATCH);
    assert_string_equal(v, want);
    assert_int_equal(FC_VERSION_NUMBER,
                     FC_VERSION_MAJOR * 10000 + FC_VERSION_MINOR * 100 + FC_VERSION_PATCH);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_version_matches_header)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
