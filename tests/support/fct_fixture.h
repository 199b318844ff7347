/* SPDX-License-Identifier: MIT */
/* fct_fixture.h - the text fixtures of the PyTorch generator scripts: one
 * line per array, "name count v0 v1 ...", '#' lines are comments. Include
 * after <cmocka.h> (the helpers assert). */
#ifndef FUCINA_TEST_FCT_FIXTURE_H
#define FUCINA_TEST_FCT_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "fc_test_data.h"

/* The file rel under FUCINA_TEST_DATA_DIR, NUL-terminated (the caller frees). */
static inline char *fct_fixture_load(const char *rel) {
    size_t size;
    char *text = fc_test_read_file(FUCINA_TEST_DATA_DIR, rel, &size);
    assert_non_null(text);
    text = realloc(text, size + 1);
    assert_non_null(text);
    text[size] = '\0';
    return text;
}

/* The values of the line named name (at most cap; fails when missing);
 * returns the count. */
static inline int64_t fct_fixture_get(const char *text, const char *name, double *out,
                                      int64_t cap) {
    size_t len = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, name, len) || p[len] != ' ') continue;
        char *e;
        long long n = strtoll(p + len, &e, 10);
        assert_true(n >= 0 && n <= cap);
        for (long long i = 0; i < n; i++)
            out[i] = strtod(e, &e);
        return n;
    }
    fail_msg("fixture line %s missing", name);
    return -1;
}

#endif /* FUCINA_TEST_FCT_FIXTURE_H */
