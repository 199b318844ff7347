/* SPDX-License-Identifier: MIT */
/* test_alloc_hooks.c - no allocation bypasses the allocator hooks.
 *
 * The out-of-memory sweeps can only fail what goes through the context's
 * (or fc_io_opts') allocator. A raw malloc anywhere in the library would be
 * invisible to them, so this test reads the symbol tables of the static
 * library's objects (readelf, which reads the ELF symbol table itself: nm
 * would answer from the LTO plugin for the fat LTO objects of a Release
 * build, and that view omits builtins such as free) and fails when any object other than the default
 * allocator's (core/buffer.c: posix_memalign and free behind
 * fc_default_allocator) references a C allocation function. This catches
 * calls hidden behind macros and helpers (strdup, asprintf, open_memstream,
 * getline...) as well, since it looks at what the compiled code links to.
 *
 * Allocations inside libc (stdio buffers of fopen), the OpenMP runtime,
 * OpenBLAS and oneDNN are outside the hooks by design; include/fucina/alloc.h
 * lists where they happen. */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define ARCHIVE FUCINA_BINARY_DIR "/libfucina.a"

static const char *const forbidden[] = {
    "malloc",         "calloc",        "realloc",  "reallocarray", "free",
    "posix_memalign", "aligned_alloc", "memalign", "valloc",       "pvalloc",
    "strdup",         "strndup",       "asprintf", "vasprintf",    "open_memstream",
    "getline",        "getdelim",      "tempnam",  "__strdup",     "__libc_malloc",
};

/* The one object allowed to call the C allocator: fc_default_allocator. */
static bool allowed_object(const char *obj) { return strcmp(obj, "buffer.c.o") == 0; }

static bool is_forbidden(const char *sym) {
    for (size_t i = 0; i < sizeof forbidden / sizeof forbidden[0]; i++)
        if (!strcmp(sym, forbidden[i])) return true;
    return false;
}

static void test_alloc_hooks_no_raw_allocation_in_library(void **state) {
    (void)state;
    FILE *f = fopen(ARCHIVE, "rb");
    if (!f) {
        printf("alloc hooks: %s not found, skipped\n", ARCHIVE);
        skip();
    }
    fclose(f);
    FILE *p = popen("readelf -Ws '" ARCHIVE "' 2>/dev/null", "r");
    assert_non_null(p);
    char line[1024];
    int objects_seen = 0, default_alloc_seen = 0, bad = 0;
    char obj[256] = "";
    while (fgets(line, sizeof line, p)) {
        /* "File: .../libfucina.a(object.c.o)" starts each member; then
         * "  Num: Value Size Type Bind Vis Ndx Name" rows, Ndx UND for an
         * undefined (external) symbol */
        if (strncmp(line, "File: ", 6) == 0) {
            char *open = strrchr(line, '('), *close = strrchr(line, ')');
            if (open && close && close > open) {
                *close = '\0';
                snprintf(obj, sizeof obj, "%s", open + 1);
                objects_seen++;
            }
            continue;
        }
        char num[32], value[64], size[32], type[32], bind[32], vis[32], ndx[32], sym[512];
        if (sscanf(line, " %31s %63s %31s %31s %31s %31s %31s %511s", num, value, size, type,
                   bind, vis, ndx, sym) != 8 ||
            strcmp(ndx, "UND") != 0)
            continue;
        if (!is_forbidden(sym)) continue;
        if (allowed_object(obj)) {
            default_alloc_seen++;
        } else {
            printf("alloc hooks: %s calls %s directly (use fc__alloc/fc__free)\n", obj, sym);
            bad++;
        }
    }
    int rc = pclose(p);
    if (objects_seen == 0) {
        printf("alloc hooks: readelf gave no symbols (rc %d), skipped\n", rc);
        skip();
    }
    printf("alloc hooks: %d objects checked\n", objects_seen);
    /* the check looks at the right thing: the default allocator is seen */
    assert_true(default_alloc_seen >= 2);
    assert_int_equal(bad, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_hooks_no_raw_allocation_in_library),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
