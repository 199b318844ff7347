/* SPDX-License-Identifier: MIT */
/* test_json.c - the JSON reader the model files share (models/json): the
 * tree it builds, string decoding, numbers, and the statuses of truncated,
 * malformed, too deep and out-of-memory input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fucina.h"
#include "json/json.h"
#include "oom_sweep.h"

static fc_status parse(fc_ctx *ctx, fc__json_doc *d, const char *text) {
    return fc__json_parse(ctx, "test", d, fc_default_allocator(), text, strlen(text));
}

static void test_tree(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    fc__json_doc d;
    const char *text = " {\"a\": [1, -2.5e1, true, false, null], \"b\": {\"c\": \"x\"},"
                       " \"a\": 7, \"e\": {}, \"f\": []} ";
    assert_int_equal(parse(ctx, &d, text), FC_OK);
    const fc__json *root = &d.v[0];
    assert_int_equal(root->type, FC__JSON_OBJECT);
    assert_int_equal(root->count, 5);
    /* the last of duplicate names wins */
    const fc__json *a = fc__json_get(&d, root, "a");
    assert_non_null(a);
    assert_int_equal(a->type, FC__JSON_NUMBER);
    assert_true(a->num == 7.0);
    /* the first "a", walked as the root's first child */
    const fc__json *arr = fc__json_first(&d, root);
    assert_int_equal(arr->type, FC__JSON_ARRAY);
    assert_int_equal(arr->count, 5);
    const fc__json *x = fc__json_first(&d, arr);
    assert_true(x->num == 1.0);
    x = fc__json_next(&d, x);
    assert_true(x->num == -25.0);
    x = fc__json_next(&d, x);
    assert_int_equal(x->type, FC__JSON_TRUE);
    x = fc__json_next(&d, x);
    assert_int_equal(x->type, FC__JSON_FALSE);
    x = fc__json_next(&d, x);
    assert_int_equal(x->type, FC__JSON_NULL);
    assert_null(fc__json_next(&d, x));
    const fc__json *b = fc__json_get(&d, root, "b");
    assert_true(fc__json_is(fc__json_get(&d, b, "c"), "x"));
    assert_false(fc__json_is(fc__json_get(&d, b, "c"), "xy"));
    assert_null(fc__json_get(&d, b, "missing"));
    assert_null(fc__json_get(&d, arr, "a")); /* an array has no members */
    assert_null(fc__json_first(&d, fc__json_get(&d, root, "e")));
    assert_null(fc__json_first(&d, fc__json_get(&d, root, "f")));
    assert_int_equal(fc__json_get(&d, root, "f")->count, 0);
    fc__json_free(&d);
    fc_ctx_free(ctx);
}

static void test_strings(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    fc__json_doc d;
    /* every simple escape, 1- to 3-byte \u escapes, a surrogate pair, raw UTF-8 */
    const char *text = "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\", \"\\u0041\\u00e9\\u20ac\", \"\\ud83d\\ude00\","
                       " \"\xc4\x80\", \"\", \"\\u0000z\"]";
    assert_int_equal(parse(ctx, &d, text), FC_OK);
    const fc__json *s = fc__json_first(&d, &d.v[0]);
    assert_int_equal(s->len, 8);
    assert_memory_equal(s->str, "\"\\/\b\f\n\r\t", 8);
    s = fc__json_next(&d, s);
    assert_string_equal(s->str, "A\xc3\xa9\xe2\x82\xac");
    s = fc__json_next(&d, s);
    assert_string_equal(s->str, "\xf0\x9f\x98\x80");
    s = fc__json_next(&d, s);
    assert_string_equal(s->str, "\xc4\x80");
    s = fc__json_next(&d, s);
    assert_int_equal(s->len, 0);
    s = fc__json_next(&d, s);
    assert_int_equal(s->len, 2); /* an escaped NUL is kept, with its length */
    assert_memory_equal(s->str, "\0z", 2);
    fc__json_free(&d);
    fc_ctx_free(ctx);
}

static void test_numbers(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    fc__json_doc d;
    char text[200];
    /* a number longer than the reader's stack copy */
    snprintf(text, sizeof text, "[0, -0.125, 1E3, 2e-2, 1%070d]", 0);
    assert_int_equal(parse(ctx, &d, text), FC_OK);
    const fc__json *x = fc__json_first(&d, &d.v[0]);
    assert_true(x->num == 0.0);
    x = fc__json_next(&d, x);
    assert_true(x->num == -0.125);
    x = fc__json_next(&d, x);
    assert_true(x->num == 1000.0);
    x = fc__json_next(&d, x);
    assert_true(x->num == 0.02);
    x = fc__json_next(&d, x);
    assert_true(x->num == 1e70);
    fc__json_free(&d);
    fc_ctx_free(ctx);
}

typedef struct bad_case {
    const char *text;
    fc_status want;
    const char *says; /* a piece of the message */
} bad_case;

static void test_bad(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"", FC_ERR_DATA_LENGTH, "ends at byte 0"},
        {"{\"a\": [1, 2", FC_ERR_DATA_LENGTH, "truncated"},
        {"\"abc", FC_ERR_DATA_LENGTH, "inside a string"},
        {"tru", FC_ERR_DATA_LENGTH, "true"},
        {"[\"\\u12", FC_ERR_DATA_LENGTH, "escape"},
        {"{\"a\" 1}", FC_ERR_FORMAT, "':'"},
        {"{1: 2}", FC_ERR_FORMAT, "needs a name"},
        {"[1 2]", FC_ERR_FORMAT, "byte 3"},
        {"[01]", FC_ERR_FORMAT, "leading zero"},
        {"[1.]", FC_ERR_FORMAT, "fraction"},
        {"[1e+]", FC_ERR_FORMAT, "exponent"},
        {"[-]", FC_ERR_FORMAT, "digits"},
        {"\"\\x\"", FC_ERR_FORMAT, "unknown escape"},
        {"\"\\udc00\"", FC_ERR_FORMAT, "lone low surrogate"},
        {"\"\\ud800x\"", FC_ERR_FORMAT, "high surrogate"},
        {"\"a\nb\"", FC_ERR_FORMAT, "control character"},
        {"nul!", FC_ERR_FORMAT, "start of a value"},
        {"{} {}", FC_ERR_FORMAT, "text after the document"},
    };
    fc_ctx *ctx = fc_ctx_new(NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fc__json_doc d;
        fc_ctx_clear_error(ctx);
        fc_status st = parse(ctx, &d, cases[i].text);
        if (st != cases[i].want || !strstr(fc_ctx_error(ctx), cases[i].says))
            fail_msg("case %zu (%s): status %d, message \"%s\"", i, cases[i].text, (int)st,
                     fc_ctx_error(ctx));
        fc__json_free(&d);
    }
    /* nesting past the bound is refused, not recursed into */
    char deep[2 * (FC__JSON_MAX_DEPTH + 2) + 1];
    memset(deep, '[', FC__JSON_MAX_DEPTH + 2);
    memset(deep + FC__JSON_MAX_DEPTH + 2, ']', FC__JSON_MAX_DEPTH + 2);
    deep[sizeof deep - 1] = 0;
    fc__json_doc d;
    fc_ctx_clear_error(ctx);
    assert_int_equal(parse(ctx, &d, deep), FC_ERR_FORMAT);
    assert_non_null(strstr(fc_ctx_error(ctx), "deeper than"));
    fc__json_free(&d);
    /* ...while the bound itself parses */
    char ok[2 * (FC__JSON_MAX_DEPTH + 1) + 1];
    memset(ok, '[', FC__JSON_MAX_DEPTH + 1);
    memset(ok + FC__JSON_MAX_DEPTH + 1, ']', FC__JSON_MAX_DEPTH + 1);
    ok[sizeof ok - 1] = 0;
    assert_int_equal(parse(ctx, &d, ok), FC_OK);
    fc__json_free(&d);
    fc_ctx_free(ctx);
}

static fc_status oom_doc(fc_ctx *ctx) {
    /* more values than the first table holds, and a long number */
    char text[8192];
    size_t n = 0;
    n += (size_t)snprintf(text + n, sizeof text - n, "{\"n\": 1%080d, \"v\": [", 0);
    for (int i = 0; i < 600; i++) n += (size_t)snprintf(text + n, sizeof text - n, "%s%d", i ? "," : "", i);
    snprintf(text + n, sizeof text - n, "]}");
    fc__json_doc d;
    fc_status st = fc__json_parse(ctx, "oom", &d, oom_sweep_allocator(), text, strlen(text));
    if (st == FC_OK && fc__json_get(&d, &d.v[0], "v")->count != 600) st = FC_ERR_STATE;
    fc__json_free(&d);
    return st;
}

static void test_oom(void **state) {
    (void)state;
    oom_scenario s = {"json", oom_doc};
    oom_result r = oom_sweep(&s);
    assert_true(r.failures >= 3); /* the strings, the first table, its growth */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tree),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
