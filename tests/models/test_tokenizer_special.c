/* SPDX-License-Identifier: MIT */
/* test_tokenizer_special.c - the special-token matcher (models/tokenizer/
 * special.c) against the literal rule it replaced.
 *
 * The vocabulary is byte-level "gpt2" without merges, so every byte of
 * plain text is its own token (id = byte) and the ids of an encoding spell
 * out exactly where the special tokens were taken. Its special tokens
 * overlap, nest, share prefixes and suffixes, repeat themselves ("aa",
 * "aaa") and tie in length. The reference is the fragment-list partition
 * the tokenizer had before (llama.cpp's tokenizer_st_partition): each
 * token in turn, longest first and lowest id among equal lengths, taken
 * leftmost first in every text fragment left, the fragment after a find
 * searched again. Random texts are made of the tokens, their prefixes and
 * suffixes and single characters; hand-worked cases pin the rule; long
 * runs and a long text check the same answer at size; an OOM sweep covers
 * the matcher's work memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fucina.h"
#include "fucina/tokenizer.h"
#include "oom_sweep.h"

enum {
    N_SPECIAL = 19,
    N_TOKENS = 256 + N_SPECIAL,
    U = FC_TOKEN_USER_DEFINED,
    C = FC_TOKEN_CONTROL
};

/* id 256 + i */
static const char *const special[N_SPECIAL] = {
    "ab",        "ba",    "abc",  "bc",   "cab",
    "aa",        "aaa",   "abab", "<a>",  "<a",
    "a>",        "b<a>b", "cc",   "bca",  "\xC3\xA9\xC3\xA9",
    "c\xC3\xA9", "  ",    "   ",  "\n\n",
};
static const int special_type[N_SPECIAL] = {U, U, U, U, C, U, U, U, U, C,
                                            U, U, C, U, U, U, U, U, C};

/* GPT-2's printable code point of byte b: the vocabulary's byte tokens. */
static size_t byte_token(unsigned b, char *out) {
    unsigned cp = b;
    if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE))
        cp = 0x100 + (b <= 0x20 ? b : b <= 0xA0 ? 33 + (b - 0x7F) : 67);
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

static char gguf_path[512];

/* Writes the vocabulary's GGUF file once. */
static void write_vocab(void) {
    static char bytes[256][3];
    const char *tokens[N_TOKENS];
    int32_t types[N_TOKENS];
    for (unsigned b = 0; b < 256; b++) {
        bytes[b][byte_token(b, bytes[b])] = 0;
        tokens[b] = bytes[b];
        types[b] = FC_TOKEN_NORMAL;
    }
    for (int i = 0; i < N_SPECIAL; i++) {
        tokens[256 + i] = special[i];
        types[256 + i] = special_type[i];
    }
    const fc_gguf_kv kvs[] = {
        {.key = "tokenizer.ggml.model", .type = FC_GGUF_STRING, .data = "gpt2"},
        {.key = "tokenizer.ggml.tokens",
         .type = FC_GGUF_ARRAY,
         .elem_type = FC_GGUF_STRING,
         .count = N_TOKENS,
         .data = tokens},
        {.key = "tokenizer.ggml.token_type",
         .type = FC_GGUF_ARRAY,
         .elem_type = FC_GGUF_I32,
         .count = N_TOKENS,
         .data = types},
        {.key = "tokenizer.ggml.merges",
         .type = FC_GGUF_ARRAY,
         .elem_type = FC_GGUF_STRING,
         .count = 0,
         .data = tokens},
    };
    snprintf(gguf_path, sizeof gguf_path, "%s/test_tokenizer_special.gguf", FUCINA_BINARY_DIR);
    assert_int_equal(fc_gguf_write(gguf_path, kvs, 4, NULL, 0, NULL), FC_OK);
}

static fc_status open_vocab(fc_ctx *ctx, const fc_allocator *al, fc_tokenizer **t) {
    fc_gguf_file *f = NULL;
    fc_io_opts o = {.allocator = al};
    fc_status st = fc_gguf_open(gguf_path, al ? &o : NULL, &f);
    if (st != FC_OK) return st;
    st = fc_tokenizer_from_gguf(ctx, f, al, t);
    fc_gguf_close(f);
    return st;
}

/* ---- the reference: the literal partition ----------------------------------- */

typedef struct frag {
    size_t off, len;
    int32_t id; /* -1: text */
} frag;

/* The ids text[0, n) must encode to: the fragment-list partition, then
 * each text byte as its own token. */
static int64_t reference(const char *text, size_t n, bool parse_special, int32_t *ids) {
    int order[N_SPECIAL];
    for (int i = 0; i < N_SPECIAL; i++)
        order[i] = i;
    for (int i = 0; i < N_SPECIAL; i++) { /* selection sort: longest, then lowest id */
        int best = i;
        for (int j = i + 1; j < N_SPECIAL; j++) {
            size_t lj = strlen(special[order[j]]), lb = strlen(special[order[best]]);
            if (lj > lb || (lj == lb && order[j] < order[best])) best = j;
        }
        int v = order[i];
        order[i] = order[best];
        order[best] = v;
    }
    size_t cap = 2 * n + 2, nf = 1;
    frag *fr = malloc(cap * sizeof *fr);
    assert_non_null(fr);
    fr[0] = (frag){0, n, -1};
    for (int s = 0; s < N_SPECIAL; s++) {
        int k = order[s];
        if (special_type[k] != U && !parse_special) continue;
        const char *tt = special[k];
        size_t tl = strlen(tt);
        for (size_t f = 0; f < nf; f++) {
            if (fr[f].id >= 0 || fr[f].len < tl) continue;
            const char *base = text + fr[f].off;
            size_t at = SIZE_MAX;
            for (size_t i = 0; i + tl <= fr[f].len && at == SIZE_MAX; i++)
                if (!memcmp(base + i, tt, tl)) at = i;
            if (at == SIZE_MAX) continue;
            assert_true(nf + 2 <= cap);
            memmove(fr + f + 3, fr + f + 1, (nf - f - 1) * sizeof *fr);
            nf += 2;
            fr[f + 2] = (frag){fr[f].off + at + tl, fr[f].len - at - tl, -1};
            fr[f + 1] = (frag){0, 0, 256 + k};
            fr[f].len = at;
            f++;
        }
    }
    int64_t m = 0;
    for (size_t f = 0; f < nf; f++) {
        if (fr[f].id >= 0) {
            ids[m++] = fr[f].id;
        } else {
            for (size_t i = 0; i < fr[f].len; i++)
                ids[m++] = (unsigned char)text[fr[f].off + i];
        }
    }
    free(fr);
    return m;
}

/* encode == reference for both flag settings. */
static void check_text(fc_ctx *ctx, const fc_tokenizer *t, const char *text, size_t n) {
    int32_t *want = malloc((n + 1) * sizeof *want), *got = malloc((n + 1) * sizeof *got);
    assert_non_null(want);
    assert_non_null(got);
    for (int parse = 0; parse < 2; parse++) {
        int64_t nw = reference(text, n, parse, want), ng = -1;
        unsigned flags = parse ? FC_TOKENIZE_PARSE_SPECIAL : 0;
        assert_int_equal(fc_tokenizer_encode(ctx, t, text, n, flags, got, (int64_t)n + 1, &ng),
                         FC_OK);
        if (ng != nw || memcmp(got, want, (size_t)nw * sizeof *got)) {
            fprintf(stderr, "text '%.*s' (%zu bytes, parse_special %d): %lld ids, want %lld\n",
                    (int)(n > 200 ? 200 : n), text, n, parse, (long long)ng, (long long)nw);
            for (int64_t i = 0; (i < ng || i < nw) && i < 80; i++)
                fprintf(stderr, "  %lld: got %d want %d\n", (long long)i, i < ng ? got[i] : -1,
                        i < nw ? want[i] : -1);
            fail();
        }
    }
    free(want);
    free(got);
}

/* ---- tests ---------------------------------------------------------------- */

static int setup(void **state) {
    (void)state;
    write_vocab();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    remove(gguf_path);
    return 0;
}

static void expect_ids(fc_ctx *ctx, const fc_tokenizer *t, const char *text, unsigned flags,
                       const int32_t *want, int64_t nw) {
    int32_t got[64];
    int64_t ng = -1;
    assert_int_equal(fc_tokenizer_encode(ctx, t, text, strlen(text), flags, got, 64, &ng), FC_OK);
    assert_int_equal(ng, nw);
    assert_memory_equal(got, want, (size_t)nw * sizeof *got);
}

/* The rule, worked by hand: longest first wherever it is, lowest id among
 * equal lengths, leftmost first for one token; control tokens only when
 * parsed. */
static void test_tokenizer_special_rule(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    fc_tokenizer *t = NULL;
    assert_int_equal(open_vocab(ctx, NULL, &t), FC_OK);
    enum {
        AB = 256,
        BA,
        ABC,
        BC,
        CAB,
        AA,
        AAA,
        ABAB,
        LAR,
        LA,
        AR,
        BLARB,
        CC,
        BCA,
        EE,
        CE,
        S2,
        S3,
        NN
    };
    /* "abc" (3) before "ab" and "bc" (2) */
    expect_ids(ctx, t, "abc", 0, (int32_t[]){ABC}, 1);
    /* "abab" (4) first, then "ab" in what is left */
    expect_ids(ctx, t, "ababab", 0, (int32_t[]){ABAB, AB}, 2);
    /* "aaa" leftmost, then "aa" */
    expect_ids(ctx, t, "aaaaa", 0, (int32_t[]){AAA, AA}, 2);
    expect_ids(ctx, t, "aaaa", 0, (int32_t[]){AAA, 'a'}, 2);
    /* equal lengths: "ab" (lower id) before "ba", wherever they are */
    expect_ids(ctx, t, "bab", 0, (int32_t[]){'b', AB}, 2);
    /* "bca" (user) unless "cab" (control, same length, lower id) is parsed */
    expect_ids(ctx, t, "bcab", 0, (int32_t[]){BCA, 'b'}, 2);
    expect_ids(ctx, t, "bcab", FC_TOKENIZE_PARSE_SPECIAL, (int32_t[]){'b', CAB}, 2);
    /* the longest token to the right wins over an earlier shorter one */
    expect_ids(ctx, t, "<a>b<a>b", 0, (int32_t[]){LAR, BLARB}, 2);
    expect_ids(ctx, t, "<a<a>", FC_TOKENIZE_PARSE_SPECIAL, (int32_t[]){LA, LAR}, 2);
    expect_ids(ctx, t, "<a<a>", 0, (int32_t[]){'<', 'a', LAR}, 3);
    /* multi-byte text; runs of spaces and newlines */
    expect_ids(ctx, t, "c\xC3\xA9\xC3\xA9", 0, (int32_t[]){'c', EE}, 2);
    expect_ids(ctx, t, "c\xC3\xA9", 0, (int32_t[]){CE}, 1);
    expect_ids(ctx, t, "     x", 0, (int32_t[]){S3, S2, 'x'}, 3);
    expect_ids(ctx, t, "\n\n\n", FC_TOKENIZE_PARSE_SPECIAL, (int32_t[]){NN, '\n'}, 2);
    expect_ids(ctx, t, "\n\n\n", 0, (int32_t[]){'\n', '\n', '\n'}, 3);
    expect_ids(ctx, t, "cc", 0, (int32_t[]){'c', 'c'}, 2);
    expect_ids(ctx, t, "cc", FC_TOKENIZE_PARSE_SPECIAL, (int32_t[]){CC}, 1);
    expect_ids(ctx, t, "xyz", FC_TOKENIZE_PARSE_SPECIAL, (int32_t[]){'x', 'y', 'z'}, 3);
    fc_tokenizer_free(t);
    fc_ctx_free(ctx);
}

static uint64_t rng_next(uint64_t *s) {
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return *s >> 33;
}

/* A piece of random text: a special token, one of its prefixes or suffixes
 * (cut between characters, so the text stays UTF-8), or a character. */
static size_t piece(uint64_t *rng, char *out) {
    static const char *const chars[] = {"a", "b", "c", "<", ">", " ", "\n", "x", "\xC3\xA9"};
    uint64_t kind = rng_next(rng) % 4;
    if (kind == 3) {
        const char *c = chars[rng_next(rng) % (sizeof chars / sizeof chars[0])];
        memcpy(out, c, strlen(c));
        return strlen(c);
    }
    const char *s = special[rng_next(rng) % N_SPECIAL];
    size_t n = strlen(s), cut = 1 + rng_next(rng) % n;
    while (cut < n && ((unsigned char)s[cut] & 0xC0) == 0x80)
        cut++;
    if (kind == 0) cut = n;
    if (kind == 1) { /* a prefix */
        memcpy(out, s, cut);
        return cut;
    }
    size_t from = n - cut; /* a suffix */
    while (from > 0 && ((unsigned char)s[from] & 0xC0) == 0x80)
        from--;
    memcpy(out, s + from, n - from);
    return n - from;
}

static void test_tokenizer_special_random_texts(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    fc_tokenizer *t = NULL;
    assert_int_equal(open_vocab(ctx, NULL, &t), FC_OK);
    uint64_t rng = 45;
    char text[40 * 8];
    for (int c = 0; c < 4000; c++) {
        size_t n = 0, pieces = rng_next(&rng) % 40;
        for (size_t p = 0; p < pieces; p++)
            n += piece(&rng, text + n);
        check_text(ctx, t, text, n);
    }
    fc_tokenizer_free(t);
    fc_ctx_free(ctx);
}

/* Long runs (each token's own character, self-overlapping tokens, nested
 * suffixes) and one long text give the reference's answer too. */
static void test_tokenizer_special_long_texts(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    fc_tokenizer *t = NULL;
    assert_int_equal(open_vocab(ctx, NULL, &t), FC_OK);
    enum { RUN = 3001, LONG = 2000 };
    char *s = malloc(LONG * 8);
    assert_non_null(s);
    static const char *const units[] = {"a", " ", "ab", "ba", "\n", "abc", "<a>b", "c\xC3\xA9"};
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        size_t n = 0, ul = strlen(units[u]);
        while (n + ul <= RUN) {
            memcpy(s + n, units[u], ul);
            n += ul;
        }
        check_text(ctx, t, s, n);
    }
    uint64_t rng = 7;
    size_t n = 0;
    for (int p = 0; p < LONG; p++)
        n += piece(&rng, s + n);
    check_text(ctx, t, s, n);
    free(s);
    fc_tokenizer_free(t);
    fc_ctx_free(ctx);
}

/* Out of memory anywhere in building the matcher or matching: FC_ERR_OOM,
 * nothing leaked (the sweep checks both). */
static fc_status oom_scenario_special(fc_ctx *ctx) {
    fc_tokenizer *t = NULL;
    fc_status st = open_vocab(ctx, oom_sweep_allocator(), &t);
    if (st != FC_OK) return st;
    const char *s = "x<a>b<a>baaaaa  \n\n\n bcab c\xC3\xA9\xC3\xA9 ababab";
    int32_t ids[64];
    int64_t n;
    st = fc_tokenizer_encode(ctx, t, s, strlen(s), 0, ids, 64, &n);
    if (st == FC_OK)
        st = fc_tokenizer_encode(ctx, t, s, strlen(s), FC_TOKENIZE_PARSE_SPECIAL, ids, 64, &n);
    fc_tokenizer_free(t);
    return st;
}

static void test_tokenizer_special_oom_sweep(void **state) {
    (void)state;
    oom_scenario s = {"tokenizer_special", oom_scenario_special};
    oom_result r = oom_sweep(&s);
    assert_true(r.failures > 10);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenizer_special_rule),
        cmocka_unit_test(test_tokenizer_special_random_texts),
        cmocka_unit_test(test_tokenizer_special_long_texts),
        cmocka_unit_test(test_tokenizer_special_oom_sweep),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
