/* SPDX-License-Identifier: MIT */
/* test_op_list.c - FC__OP_LIST (src/ops/op_list.h) against the tree:
 *   - every op the public op headers declare has a row, in the header the
 *     row names, and every row is declared there;
 *   - every op is named in the suites its row asks for: fc_gradcheck's
 *     (the files calling fc_gradcheck or the layout helpers' lh_gradcheck)
 *     and fc_gradgradcheck's for a GRAD op, the create_graph three-form
 *     table (tests/ag/test_create_graph_all.c) for a GRAD op, the bad-input
 *     tables (tests/reliability/test_bad_input_*.c) and the OOM sweeps (the
 *     files using tests/support/oom_sweep.h) for every op.
 * A suite "names" an op when its sources hold the identifier fc_<name>
 * (a call or a table's function pointer). That is a floor, not a proof of
 * a good test, but an op added without a row here, or with a row and no
 * test in one of the suites, fails with the op and the suite named. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ops/op_list.h"

typedef enum grad_kind { GRAD, NOGRAD, INPLACE } grad_kind;
typedef enum order_kind { CURVED, CONST, NONE } order_kind;

typedef struct op_row {
    const char *name, *family, *header;
    grad_kind grad;
    order_kind order;
} op_row;

#define ROW(nm, fam, hdr, gr, ord) {#nm, #fam, #hdr, gr, ord},
static const op_row ops[] = {FC__OP_LIST(ROW)};
#undef ROW
#define N_OPS ((int)(sizeof ops / sizeof ops[0]))

/* the headers that declare ops */
static const char *const op_headers[] = {"ops", "attention", "conv", "matmul", "pool"};
#define N_HEADERS ((int)(sizeof op_headers / sizeof op_headers[0]))

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

static bool ident_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* text holds fc_<name> as a whole identifier */
static bool names_op(const char *text, const char *name) {
    char id[96];
    snprintf(id, sizeof id, "fc_%s", name);
    size_t n = strlen(id);
    for (const char *p = strstr(text, id); p; p = strstr(p + 1, id))
        if ((p == text || !ident_char(p[-1])) && !ident_char(p[n])) return true;
    return false;
}

static int find_op(const char *name) {
    for (int i = 0; i < N_OPS; i++)
        if (!strcmp(ops[i].name, name)) return i;
    return -1;
}

/* The ops one header declares: each FC_API declaration (up to its ';')
 * that returns or takes an fc_tensor. Marks seen[] and counts problems. */
static int scan_header(const char *hdr, bool *seen) {
    char path[512];
    snprintf(path, sizeof path, "%s/include/fucina/%s.h", FUCINA_SOURCE_DIR, hdr);
    char *src = slurp(path);
    assert_non_null(src);
    int bad = 0, found = 0;
    for (const char *p = strstr(src, "FC_API "); p; p = strstr(p + 1, "FC_API ")) {
        const char *end = strchr(p, ';');
        const char *paren = strchr(p, '(');
        if (!end || !paren || paren > end) continue;
        const char *q = paren;
        while (q > p && q[-1] == ' ')
            q--;
        const char *b = q;
        while (b > p && ident_char(b[-1]))
            b--;
        char decl[1024];
        size_t len = (size_t)(end - p) < sizeof decl - 1 ? (size_t)(end - p) : sizeof decl - 1;
        memcpy(decl, p, len);
        decl[len] = '\0';
        if (!strstr(decl, "fc_tensor") || q - b < 4 || strncmp(b, "fc_", 3)) continue;
        char name[96];
        snprintf(name, sizeof name, "%.*s", (int)(q - b - 3), b + 3);
        found++;
        int i = find_op(name);
        if (i < 0) {
            print_error("fucina/%s.h declares fc_%s, which FC__OP_LIST has no row for\n", hdr,
                        name);
            bad++;
        } else if (strcmp(ops[i].header, hdr)) {
            print_error("fc_%s: declared in fucina/%s.h, its row says fucina/%s.h\n", name, hdr,
                        ops[i].header);
            bad++;
        } else {
            seen[i] = true;
        }
    }
    assert_true(found > 0); /* the scan read declarations at all */
    free(src);
    return bad;
}

static void test_op_list_matches_headers(void **state) {
    (void)state;
    bool seen[N_OPS];
    memset(seen, 0, sizeof seen);
    int bad = 0;
    for (int h = 0; h < N_HEADERS; h++)
        bad += scan_header(op_headers[h], seen);
    for (int i = 0; i < N_OPS; i++) {
        if (find_op(ops[i].name) != i) {
            print_error("fc_%s has two rows\n", ops[i].name);
            bad++;
        }
        if (!seen[i]) {
            print_error("fc_%s has a row but fucina/%s.h does not declare it\n", ops[i].name,
                        ops[i].header);
            bad++;
        }
        bool no_order = ops[i].grad != GRAD;
        if (no_order != (ops[i].order == NONE)) {
            print_error("fc_%s: order NONE goes with grad NOGRAD or INPLACE, and only with them\n",
                        ops[i].name);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* ---- the suites --------------------------------------------------------------------------- */

typedef struct suite {
    const char *what;
    const char *const *dirs; /* NULL-terminated, under tests/ */
    const char *prefix;      /* a file's name starts with it (NULL: any test_*.c or .h) */
    const char *marker;      /* the file holds one of these ('|'-separated; NULL: any file) */
    bool grad_only;          /* only GRAD ops must be named */
} suite;

static bool has_marker(const char *text, const char *markers) {
    if (!markers) return true;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", markers);
    for (char *tok = strtok(buf, "|"); tok; tok = strtok(NULL, "|"))
        if (strstr(text, tok)) return true;
    return false;
}

static bool is_source(const char *name) {
    size_t n = strlen(name);
    return n > 2 && name[n - 2] == '.' && (name[n - 1] == 'c' || name[n - 1] == 'h');
}

/* The concatenated text of a suite's files; *nfiles counts them. */
static char *suite_text(const suite *s, int *nfiles) {
    size_t cap = 1 << 20, len = 0;
    char *all = malloc(cap);
    assert_non_null(all);
    all[0] = '\0';
    *nfiles = 0;
    for (const char *const *d = s->dirs; *d; d++) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/tests/%s", FUCINA_SOURCE_DIR, *d);
        DIR *dp = opendir(dir);
        assert_non_null(dp);
        for (struct dirent *e = readdir(dp); e; e = readdir(dp)) {
            if (!is_source(e->d_name)) continue;
            if (s->prefix && strncmp(e->d_name, s->prefix, strlen(s->prefix))) continue;
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            char *text = slurp(path);
            assert_non_null(text);
            if (has_marker(text, s->marker)) {
                size_t n = strlen(text);
                while (len + n + 2 > cap)
                    all = realloc(all, cap *= 2);
                assert_non_null(all);
                memcpy(all + len, text, n);
                len += n;
                all[len++] = '\n';
                all[len] = '\0';
                (*nfiles)++;
            }
            free(text);
        }
        closedir(dp);
    }
    return all;
}

static const char *const every_dir[] = {"ag",   "ops", "reliability", "models", "exec",
                                        "core", "io",  "backend",     "dist",   NULL};
static const char *const ag_dir[] = {"ag", NULL};
static const char *const rel_dir[] = {"reliability", NULL};

static const suite suites[] = {
    {"fc_gradcheck (files calling fc_gradcheck or lh_gradcheck)", every_dir, "test_",
     "fc_gradcheck(|lh_gradcheck(", true},
    {"fc_gradgradcheck (files calling it)", every_dir, "test_", "fc_gradgradcheck(", true},
    {"the create_graph three-form table", ag_dir, "test_create_graph_all.c", NULL, true},
    {"the bad-input tables", rel_dir, "test_bad_input_", NULL, false},
    {"the OOM sweeps (files using oom_sweep.h)", every_dir, "test_", "oom_sweep.h", false},
};
#define N_SUITES ((int)(sizeof suites / sizeof suites[0]))

static void test_op_list_suites_cover_every_op(void **state) {
    (void)state;
    int missing = 0;
    for (int s = 0; s < N_SUITES; s++) {
        int nfiles;
        char *text = suite_text(&suites[s], &nfiles);
        assert_true(nfiles > 0); /* the suite's files were found at all */
        int named = 0;
        for (int i = 0; i < N_OPS; i++) {
            if (suites[s].grad_only && ops[i].grad != GRAD) continue;
            if (names_op(text, ops[i].name)) {
                named++;
                continue;
            }
            print_error("fc_%s (%s) is missing from %s\n", ops[i].name, ops[i].family,
                        suites[s].what);
            missing++;
        }
        print_message("%s: %d files, %d ops named\n", suites[s].what, nfiles, named);
        free(text);
    }
    assert_int_equal(missing, 0);
}

/* The check itself: an identifier inside a longer one does not count. */
static void test_op_list_names_op_whole_identifier(void **state) {
    (void)state;
    assert_true(names_op("x = fc_add(ctx, a, b);", "add"));
    assert_true(names_op("{\"neg\", fc_neg, true},", "neg"));
    assert_false(names_op("fc_add_scalar(ctx, a, 1)", "add"));
    assert_false(names_op("my_fc_add(ctx)", "add"));
    assert_false(names_op("", "add"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_list_names_op_whole_identifier),
        cmocka_unit_test(test_op_list_matches_headers),
        cmocka_unit_test(test_op_list_suites_cover_every_op),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
