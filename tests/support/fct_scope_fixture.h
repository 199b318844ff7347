/* SPDX-License-Identifier: MIT */
/* fct_scope_fixture.h - the cmocka fixture of the suites that account for
 * every byte: each test runs in a fresh context (2 threads, seed 7) on a
 * counting allocator, inside an open scope; teardown closes the scope and
 * fails the test when a tensor is still alive or a byte was not given
 * back. expect_error checks the context's first error (status and a piece
 * of the message) and clears it. Header-only: one suite includes it once,
 * and its tests use g_ctx. */
#ifndef FUCINA_TEST_FCT_SCOPE_FIXTURE_H
#define FUCINA_TEST_FCT_SCOPE_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "counting_alloc.h"
#include "fucina.h"

static fct_counting g_alloc;
static fc_ctx *g_ctx;

static int setup(void **state) {
    (void)state;
    fct_counting_init(&g_alloc);
    fc_ctx_opts o = {.threads = 2, .allocator = fct_counting_allocator(&g_alloc), .seed = 7};
    g_ctx = fc_ctx_new(&o);
    if (!g_ctx) return -1;
    fc_scope_begin(g_ctx);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    fc_scope_end(g_ctx);
    fc_ctx_stats s;
    fc_ctx_get_stats(g_ctx, &s);
    int rc = 0;
    if (s.tensors_live != 0) {
        fprintf(stderr, "leak: %lld tensors alive after the scope\n", (long long)s.tensors_live);
        rc = -1;
    }
    fc_ctx_free(g_ctx);
    if (!fct_counting_clean(&g_alloc)) {
        fct_counting_report(&g_alloc, "leak check");
        rc = -1;
    }
    return rc;
}

static void expect_error(fc_status want, const char *needle) {
    assert_int_equal(fc_ctx_status(g_ctx), want);
    if (!strstr(fc_ctx_error(g_ctx), needle)) {
        print_message("error message \"%s\" lacks \"%s\"\n", fc_ctx_error(g_ctx), needle);
        fail();
    }
    fc_ctx_clear_error(g_ctx);
}

#endif
