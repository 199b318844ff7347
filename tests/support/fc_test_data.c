/* SPDX-License-Identifier: MIT */
/* fc_test_data.c - golden-file reading for the tests (see fc_test_data.h).
 * Test code may use malloc directly: the library's allocator rule does not
 * apply to the harness. */
#include "fc_test_data.h"

#include <stdio.h>
#include <stdlib.h>

void *fc_test_read_file(const char *dir, const char *rel, size_t *size) {
    char path[1024];
    int len = snprintf(path, sizeof path, "%s/%s", dir, rel);
    if (len < 0 || (size_t)len >= sizeof path) {
        fprintf(stderr, "fc_test_read_file: path too long: %s/%s\n", dir, rel);
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fc_test_read_file: cannot open %s\n", path);
        return NULL;
    }
    void *buf = NULL;
    long end = -1;
    if (fseek(f, 0, SEEK_END) == 0) end = ftell(f);
    if (end >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc(end > 0 ? (size_t)end : 1);
        if (buf && fread(buf, 1, (size_t)end, f) != (size_t)end) {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "fc_test_read_file: cannot read %s\n", path);
        return NULL;
    }
    *size = (size_t)end;
    return buf;
}
