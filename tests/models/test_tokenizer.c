/* SPDX-License-Identifier: MIT */
/* test_tokenizer.c - the GGUF tokenizers against independent encoders.
 *
 * tests/data/tokenizer/ comes from scripts/gen_tokenizer_fixtures.py: a
 * SentencePiece BPE vocabulary with byte fallback and sentencepiece's own
 * ids for each case, and a byte-level BPE vocabulary with the ids of
 * GPT-2's reference bpe() loop. Both must match exactly, and decoding must
 * give the text back. The rest: special tokens, the byte-level
 * tokenizer's GGUF round trip, bad files, bad calls, and the OOM sweep. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fc_test_data.h"
#include "fucina.h"
#include "fucina/tokenizer.h"
#include "oom_sweep.h"

#define DATA FUCINA_TEST_DATA_DIR "/tokenizer"

static fc_tokenizer *load(fc_ctx *ctx, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", DATA, name);
    fc_gguf_file *f = NULL;
    assert_int_equal(fc_gguf_open(path, NULL, &f), FC_OK);
    fc_tokenizer *t = NULL;
    assert_int_equal(fc_tokenizer_from_gguf(ctx, f, NULL, &t), FC_OK);
    fc_gguf_close(f); /* the tokenizer keeps copies */
    return t;
}

static size_t unhex(const char *h, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i + 1 < n; i += 2) {
        unsigned v;
        sscanf(h + i, "%2x", &v);
        out[k++] = (char)v;
    }
    return k;
}

/* Every case of expected.txt for `kind`: encode equals the reference, and
 * decode gives the text back. */
static void check_cases(const char *kind, const char *file) {
    fc_ctx *ctx = fc_ctx_new(NULL);
    fc_tokenizer *t = load(ctx, file);
    size_t size;
    char *raw = fc_test_read_file(DATA, "expected.txt", &size);
    assert_non_null(raw);
    char *data = malloc(size + 1); /* NUL-terminated for strtok */
    assert_non_null(data);
    memcpy(data, raw, size);
    data[size] = 0;
    free(raw);
    int cases = 0;
    for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
        char *tab1 = strchr(line, '\t'), *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
        assert_non_null(tab2);
        if ((size_t)(tab1 - line) != strlen(kind) || strncmp(line, kind, strlen(kind))) continue;
        char text[512];
        size_t len = unhex(tab1 + 1, (size_t)(tab2 - tab1 - 1), text);
        int32_t want[512];
        int64_t nw = 0;
        for (char *p = tab2 + 1; *p;) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p) break;
            want[nw++] = (int32_t)v;
            p = end;
        }
        int32_t got[512];
        int64_t ng = -1;
        assert_int_equal(fc_tokenizer_encode(ctx, t, text, len, 0, got, 512, &ng), FC_OK);
        if (ng != nw || memcmp(got, want, (size_t)nw * sizeof *got)) {
            fprintf(stderr, "%s case '%.*s': %lld ids, want %lld\n", kind, (int)len, text,
                    (long long)ng, (long long)nw);
            for (int64_t i = 0; i < ng || i < nw; i++)
                fprintf(stderr, "  %lld: got %d want %d\n", (long long)i, i < ng ? got[i] : -1,
                        i < nw ? want[i] : -1);
            fail();
        }
        char back[1024];
        size_t bl;
        assert_int_equal(fc_tokenizer_decode(ctx, t, got, ng, 0, back, sizeof back, &bl), FC_OK);
        assert_int_equal(bl, len);
        assert_memory_equal(back, text, len);
        assert_int_equal(back[bl], 0);
        cases++;
    }
    assert_true(cases >= 15);
    free(data);
    fc_tokenizer_free(t);
    fc_ctx_free(ctx);
}

static void test_spm_matches_sentencepiece(void **state) {
    (void)state;
    check_cases("spm", "spm.gguf");
}

static void test_bpe_matches_gpt2_reference(void **state) {
    (void)state;
    check_cases("bpe", "bpe.gguf");
}

static void test_spm_special_tokens(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    fc_tokenizer *t = load(ctx, "spm.gguf");
    assert_int_equal(fc_tokenizer_kind_of(t), FC_TOKENIZER_SPM);
    assert_int_equal(fc_tokenizer_bos(t), 1);
    assert_int_equal(fc_tokenizer_eos(t), 2);
    assert_int_equal(fc_tokenizer_unknown(t), 0);
    assert_int_equal(fc_tokenizer_token_type(t, 1), FC_TOKEN_CONTROL);
    assert_int_equal(fc_tokenizer_token_type(t, 3), FC_TOKEN_BYTE);
    int32_t a[64], b[64];
    int64_t na, nb;
    /* ADD_SPECIAL: BOS first (add_bos_token true), no EOS (false) */
    assert_int_equal(fc_tokenizer_encode(ctx, t, "free", 4, 0, a, 64, &na), FC_OK);
    assert_int_equal(fc_tokenizer_encode(ctx, t, "free", 4, FC_TOKENIZE_ADD_SPECIAL, b, 64, &nb), FC_OK);
    assert_int_equal(nb, na + 1);
    assert_int_equal(b[0], 1);
    assert_memory_equal(b + 1, a, (size_t)na * sizeof *a);
    /* "<s>" is text unless PARSE_SPECIAL; parsed, the text after it gets
     * its own space prefix, as llama.cpp does */
    const char *s = "<s>free";
    assert_int_equal(fc_tokenizer_encode(ctx, t, s, 7, 0, b, 64, &nb), FC_OK);
    assert_true(nb > na);
    for (int64_t i = 0; i < nb; i++) assert_int_not_equal(b[i], 1);
    assert_int_equal(fc_tokenizer_encode(ctx, t, s, 7, FC_TOKENIZE_PARSE_SPECIAL, b, 64, &nb), FC_OK);
    assert_int_equal(nb, na + 1);
    assert_int_equal(b[0], 1);
    assert_memory_equal(b + 1, a, (size_t)na * sizeof *a);
    /* decoding: control tokens vanish unless asked for; the prefix space goes */
    char out[64];
    size_t len;
    assert_int_equal(fc_tokenizer_decode(ctx, t, b, nb, 0, out, sizeof out, &len), FC_OK);
    assert_string_equal(out, "free");
    assert_int_equal(fc_tokenizer_decode(ctx, t, b, nb, FC_DECODE_SPECIAL, out, sizeof out, &len), FC_OK);
    assert_string_equal(out, "<s> free");
    assert_int_equal(fc_tokenizer_decode(ctx, t, a, na, FC_DECODE_KEEP_PREFIX, out, sizeof out, &len), FC_OK);
    assert_string_equal(out, " free");
    /* a character with no token is spelled in byte tokens <0xXX> = id 3 + byte */
    assert_int_equal(fc_tokenizer_encode(ctx, t, "\x01", 1, 0, b, 64, &nb), FC_OK);
    assert_int_equal(b[nb - 1], 3 + 1);
    /* invalid UTF-8 is spelled byte by byte too, and decodes back */
    assert_int_equal(fc_tokenizer_encode(ctx, t, "a\xff\xc3", 3, 0, b, 64, &nb), FC_OK);
    assert_int_equal(b[nb - 2], 3 + 0xff);
    assert_int_equal(b[nb - 1], 3 + 0xc3);
    assert_int_equal(fc_tokenizer_decode(ctx, t, b, nb, 0, out, sizeof out, &len), FC_OK);
    assert_int_equal(len, 3);
    assert_memory_equal(out, "a\xff\xc3", 3);
    /* many special tokens in one text: more fragments than the splitter
     * first makes room for (a fuzzer found its growth losing them) */
    char many[200 * 4 + 1];
    size_t ml = 0;
    for (int i = 0; i < 200; i++) ml += (size_t)sprintf(many + ml, i % 2 ? "<s>x" : "</s>");
    int32_t ids[512];
    int64_t ni;
    assert_int_equal(fc_tokenizer_encode(ctx, t, many, ml, FC_TOKENIZE_PARSE_SPECIAL, ids, 512, &ni), FC_OK);
    int n_bos = 0, n_eos = 0;
    for (int64_t i = 0; i < ni; i++) {
        n_bos += ids[i] == 1;
        n_eos += ids[i] == 2;
    }
    assert_int_equal(n_bos, 100);
    assert_int_equal(n_eos, 100);
    char back[2048];
    assert_int_equal(fc_tokenizer_decode(ctx, t, ids, ni, FC_DECODE_SPECIAL, back, sizeof back, &len), FC_OK);
    assert_true(len >= ml);
    /* empty text: nothing, or BOS alone */
    assert_int_equal(fc_tokenizer_encode(ctx, t, "", 0, 0, b, 64, &nb), FC_OK);
    assert_int_equal(nb, 0);
    assert_int_equal(fc_tokenizer_encode(ctx, t, NULL, 0, FC_TOKENIZE_ADD_SPECIAL, b, 64, &nb), FC_OK);
    assert_int_equal(nb, 1);
    fc_tokenizer_free(t);
    fc_ctx_free(ctx);
}

static void test_bpe_special_and_bytes(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    fc_tokenizer *t = load(ctx, "bpe.gguf");
    assert_int_equal(fc_tokenizer_kind_of(t), FC_TOKENIZER_BPE);
    assert_string_equal(fc_tokenizer_pre(t), "gpt-2");
    int32_t eot = fc_tokenizer_find(t, "<|endoftext|>", 13);
    assert_int_equal(eot, fc_tokenizer_vocab_size(t) - 1);
    assert_int_equal(fc_tokenizer_token_type(t, eot), FC_TOKEN_CONTROL);
    int32_t ids[64];
    int64_t n;
    const char *s = "a<|endoftext|>b";
    assert_int_equal(fc_tokenizer_encode(ctx, t, s, strlen(s), FC_TOKENIZE_PARSE_SPECIAL, ids, 64, &n), FC_OK);
    assert_int_equal(n, 3);
    assert_int_equal(ids[1], eot);
    assert_int_equal(fc_tokenizer_encode(ctx, t, s, strlen(s), 0, ids, 64, &n), FC_OK);
    assert_true(n > 3);
    /* add_bos_token is absent: gpt2 adds nothing by default */
    assert_int_equal(fc_tokenizer_encode(ctx, t, "a", 1, FC_TOKENIZE_ADD_SPECIAL, ids, 64, &n), FC_OK);
    assert_int_equal(n, 1);
    /* every byte value round-trips (invalid UTF-8 reads as U+FFFD, as llama.cpp does) */
    char all[128];
    for (int i = 0; i < 128; i++) all[i] = (char)i;
    int32_t many[256];
    assert_int_equal(fc_tokenizer_encode(ctx, t, all, 128, 0, many, 256, &n), FC_OK);
    char back[256];
    size_t len;
    assert_int_equal(fc_tokenizer_decode(ctx, t, many, n, 0, back, sizeof back, &len), FC_OK);
    assert_int_equal(len, 128);
    assert_memory_equal(back, all, 128);
    assert_int_equal(fc_tokenizer_encode(ctx, t, "\xff", 1, 0, ids, 64, &n), FC_OK);
    assert_int_equal(fc_tokenizer_decode(ctx, t, ids, n, 0, back, sizeof back, &len), FC_OK);
    assert_string_equal(back, "\xEF\xBF\xBD");
    fc_tokenizer_free(t);
    fc_ctx_free(ctx);
}

/* The byte-level tokenizer: ids are bytes, and it survives a GGUF round trip. */
static void test_bytes_tokenizer_gguf_round_trip(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    fc_tokenizer *t = NULL;
    assert_int_equal(fc_tokenizer_new_bytes(ctx, NULL, &t), FC_OK);
    assert_int_equal(fc_tokenizer_vocab_size(t), 258);
    const char *s = "Bytes: \xC3\xA9\n\t 'll 42";
    int32_t ids[64];
    int64_t n;
    assert_int_equal(fc_tokenizer_encode(ctx, t, s, strlen(s), 0, ids, 64, &n), FC_OK);
    assert_int_equal(n, (int64_t)strlen(s));
    for (int64_t i = 0; i < n; i++) assert_int_equal(ids[i], (unsigned char)s[i]);

    const fc_gguf_kv *kvs;
    int64_t nkv;
    assert_int_equal(fc_tokenizer_gguf_kvs(t, &kvs, &nkv), FC_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/test_tokenizer_bytes.gguf", FUCINA_BINARY_DIR);
    assert_int_equal(fc_gguf_write(path, kvs, nkv, NULL, 0, NULL), FC_OK);
    fc_gguf_file *f = NULL;
    assert_int_equal(fc_gguf_open(path, NULL, &f), FC_OK);
    fc_tokenizer *r = NULL;
    assert_int_equal(fc_tokenizer_from_gguf(ctx, f, NULL, &r), FC_OK);
    fc_gguf_close(f);
    remove(path);
    assert_int_equal(fc_tokenizer_vocab_size(r), 258);
    assert_int_equal(fc_tokenizer_bos(r), 256);
    assert_int_equal(fc_tokenizer_eos(r), 257);
    int32_t ids2[64];
    int64_t n2;
    assert_int_equal(fc_tokenizer_encode(ctx, r, s, strlen(s), 0, ids2, 64, &n2), FC_OK);
    assert_int_equal(n2, n);
    assert_memory_equal(ids2, ids, (size_t)n * sizeof *ids);
    fc_tokenizer_free(r);
    fc_tokenizer_free(t);
    fc_ctx_free(ctx);
}

static void test_bad_calls(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(NULL);
    fc_tokenizer *t = load(ctx, "spm.gguf");
    int32_t ids[4];
    int64_t n;
    assert_int_equal(fc_tokenizer_encode(ctx, NULL, "a", 1, 0, ids, 4, &n), FC_ERR_NULL_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "tokenizer_encode"));
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_tokenizer_encode(ctx, t, NULL, 3, 0, ids, 4, &n), FC_ERR_NULL_ARG);
    assert_int_equal(fc_tokenizer_encode(NULL, t, "a", 1, 1u << 7, ids, 4, &n), FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(ctx);
    /* a text over the limit is refused before it is read */
    n = -1;
    assert_int_equal(fc_tokenizer_encode(ctx, t, "ab", FC_TOKENIZER_MAX_TEXT + 1, 0, NULL, 0, &n),
                     FC_ERR_INVALID_ARG);
    assert_int_equal(n, 0);
    assert_non_null(strstr(fc_ctx_error(ctx), "536870913 bytes of text exceed"));
    fc_ctx_clear_error(ctx);
    /* too small: the count comes back, and the prefix is written */
    const char *s = "The GNU General Public License";
    assert_int_equal(fc_tokenizer_encode(ctx, t, s, strlen(s), 0, NULL, 0, &n), FC_ERR_DATA_LENGTH);
    assert_true(n > 4);
    assert_non_null(strstr(fc_ctx_error(ctx), "do not fit"));
    fc_ctx_clear_error(ctx);
    int64_t need = n;
    int32_t all[64];
    assert_int_equal(fc_tokenizer_encode(ctx, t, s, strlen(s), 0, all, 64, &n), FC_OK);
    assert_int_equal(n, need);
    assert_int_equal(fc_tokenizer_encode(ctx, t, s, strlen(s), 0, ids, 4, &n), FC_ERR_DATA_LENGTH);
    assert_memory_equal(ids, all, 4 * sizeof *ids);
    fc_ctx_clear_error(ctx);
    /* decode: ids out of range name their position and value */
    int32_t bad[3] = {5, 100000, 6};
    char buf[32];
    size_t len;
    assert_int_equal(fc_tokenizer_decode(ctx, t, bad, 3, 0, buf, sizeof buf, &len), FC_ERR_INDEX);
    assert_non_null(strstr(fc_ctx_error(ctx), "ids[1] = 100000"));
    fc_ctx_clear_error(ctx);
    int32_t neg = -1;
    assert_int_equal(fc_tokenizer_decode(ctx, t, &neg, 1, 0, buf, sizeof buf, &len), FC_ERR_INDEX);
    fc_ctx_clear_error(ctx);
    /* decode into a short buffer: a NUL-terminated prefix and the full length */
    char small[4];
    assert_int_equal(fc_tokenizer_decode(ctx, t, all, need, 0, small, sizeof small, &len), FC_ERR_DATA_LENGTH);
    assert_int_equal(len, strlen(s));
    assert_string_equal(small, "The");
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_tokenizer_decode(ctx, t, all, need, 0, NULL, 0, &len), FC_ERR_DATA_LENGTH);
    assert_int_equal(len, strlen(s));
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_tokenizer_decode(ctx, t, NULL, 2, 0, buf, sizeof buf, &len), FC_ERR_NULL_ARG);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_tokenizer_from_gguf(ctx, NULL, NULL, NULL), FC_ERR_NULL_ARG);
    assert_null(fc_tokenizer_token_text(t, -1, NULL));
    assert_null(fc_tokenizer_token_text(NULL, 0, NULL));
    assert_int_equal(fc_tokenizer_vocab_size(NULL), 0);
    fc_tokenizer_free(NULL);
    fc_tokenizer_free(t);
    fc_ctx_free(ctx);
}

/* ---- bad files: each one key or value wrong ------------------------------- */

static const char *const good_tokens[] = {"<unk>", "<s>", "</s>", "a", "b", "ab"};
static const float good_scores[] = {0, 0, 0, -1, -2, -0.5f};
static const int32_t good_types[] = {2, 3, 3, 1, 1, 1};

static fc_status open_kvs(fc_ctx *ctx, const fc_gguf_kv *kvs, int64_t n, fc_tokenizer **t) {
    char path[512];
    snprintf(path, sizeof path, "%s/test_tokenizer_bad.gguf", FUCINA_BINARY_DIR);
    assert_int_equal(fc_gguf_write(path, kvs, n, NULL, 0, NULL), FC_OK);
    fc_gguf_file *f = NULL;
    assert_int_equal(fc_gguf_open(path, NULL, &f), FC_OK);
    fc_status st = fc_tokenizer_from_gguf(ctx, f, NULL, t);
    fc_gguf_close(f);
    remove(path);
    return st;
}

static void expect_bad(fc_gguf_kv *kvs, int64_t n, const char *needle) {
    fc_ctx *ctx = fc_ctx_new(NULL);
    fc_tokenizer *t = (fc_tokenizer *)&t; /* must come back NULL */
    assert_int_equal(open_kvs(ctx, kvs, n, &t), FC_ERR_FORMAT);
    assert_null(t);
    if (!strstr(fc_ctx_error(ctx), needle)) {
        fprintf(stderr, "message '%s' lacks '%s'\n", fc_ctx_error(ctx), needle);
        fail();
    }
    fc_ctx_free(ctx);
}

static void test_bad_files(void **state) {
    (void)state;
    const uint32_t big = 99, dup_id = 1;
    const char *const dup_tokens[] = {"<unk>", "a", "b", "a", "x", "y"};
    const char *const bad_merge[] = {"ab"};
    const int32_t bad_types[] = {2, 3, 3, 1, 9, 1};
    fc_gguf_kv base[] = {
        {.key = "tokenizer.ggml.model", .type = FC_GGUF_STRING, .data = "llama"},
        {.key = "tokenizer.ggml.tokens", .type = FC_GGUF_ARRAY, .elem_type = FC_GGUF_STRING, .count = 6, .data = good_tokens},
        {.key = "tokenizer.ggml.scores", .type = FC_GGUF_ARRAY, .elem_type = FC_GGUF_F32, .count = 6, .data = good_scores},
        {.key = "tokenizer.ggml.token_type", .type = FC_GGUF_ARRAY, .elem_type = FC_GGUF_I32, .count = 6, .data = good_types},
        {.key = "tokenizer.ggml.bos_token_id", .type = FC_GGUF_U32, .data = &dup_id},
    };
    fc_gguf_kv kv[5];
    /* the good file loads, and merges by score: "ab" (-0.5) */
    {
        fc_ctx *ctx = fc_ctx_new(NULL);
        fc_tokenizer *t = NULL;
        assert_int_equal(open_kvs(ctx, base, 5, &t), FC_OK);
        int32_t ids[8];
        int64_t n;
        assert_int_equal(fc_tokenizer_encode(ctx, t, "ab", 2, 0, ids, 8, &n), FC_OK);
        /* "\u2581" has no token and no byte tokens: the unknown token, then "ab" */
        assert_int_equal(n, 2);
        assert_int_equal(ids[0], 0);
        assert_int_equal(ids[1], 5);
        fc_tokenizer_free(t);
        fc_ctx_free(ctx);
    }
    memcpy(kv, base, sizeof kv);
    kv[0].data = "t5";
    expect_bad(kv, 5, "'t5' is not a known tokenizer");
    memcpy(kv, base, sizeof kv);
    kv[0].type = FC_GGUF_U32;
    kv[0].data = &big;
    expect_bad(kv, 5, "tokenizer.ggml.model is not a string");
    expect_bad(base + 1, 4, "no tokenizer.ggml.model");
    memcpy(kv, base, sizeof kv);
    kv[1] = kv[4];
    expect_bad(kv, 2, "no tokenizer.ggml.tokens");
    memcpy(kv, base, sizeof kv);
    kv[2].count = 5;
    expect_bad(kv, 5, "tokenizer.ggml.scores has 5 entries for 6 tokens");
    memcpy(kv, base, sizeof kv);
    kv[3].data = bad_types;
    expect_bad(kv, 5, "token_type[4] = 9");
    memcpy(kv, base, sizeof kv);
    kv[4].data = &big;
    expect_bad(kv, 5, "bos_token_id = 99 is outside the 6 tokens");
    memcpy(kv, base, sizeof kv);
    kv[1].data = dup_tokens;
    expect_bad(kv, 5, "tokens 1 and 3 are both 'a'");
    memcpy(kv, base, sizeof kv);
    kv[1].elem_type = FC_GGUF_I32;
    kv[1].data = good_types;
    expect_bad(kv, 5, "holds GGUF type 5, not strings");
    memcpy(kv, base, sizeof kv);
    kv[0].data = "gpt2";
    expect_bad(kv, 5, "needs tokenizer.ggml.merges");
    fc_gguf_kv with_merges[6];
    memcpy(with_merges, kv, sizeof kv);
    with_merges[5] = (fc_gguf_kv){.key = "tokenizer.ggml.merges", .type = FC_GGUF_ARRAY,
                                  .elem_type = FC_GGUF_STRING, .count = 1, .data = bad_merge};
    expect_bad(with_merges, 6, "merges[0] 'ab' is not two words");
}

/* ---- out of memory ---------------------------------------------------------- */

static fc_status oom_scenario_tok(fc_ctx *ctx) {
    const fc_allocator *al = oom_sweep_allocator();
    char path[512];
    snprintf(path, sizeof path, "%s/%s", DATA, "bpe.gguf");
    fc_gguf_file *f = NULL;
    fc_io_opts o = {.allocator = al};
    fc_status st = fc_gguf_open(path, &o, &f);
    if (st != FC_OK) return st;
    fc_tokenizer *t = NULL;
    st = fc_tokenizer_from_gguf(ctx, f, al, &t);
    fc_gguf_close(f);
    if (st != FC_OK) return st;
    const char *s = "It's the GNU General Public License, version 3.";
    int32_t ids[64];
    int64_t n;
    st = fc_tokenizer_encode(ctx, t, s, strlen(s), FC_TOKENIZE_PARSE_SPECIAL, ids, 64, &n);
    char buf[128];
    size_t len;
    if (st == FC_OK) st = fc_tokenizer_decode(ctx, t, ids, n, 0, buf, sizeof buf, &len);
    fc_tokenizer_free(t);
    if (st != FC_OK) return st;
    st = fc_tokenizer_new_bytes(ctx, al, &t);
    if (st != FC_OK) return st;
    st = fc_tokenizer_encode(ctx, t, s, strlen(s), 0, ids, 64, &n);
    fc_tokenizer_free(t);
    return st;
}

static void test_oom_sweep(void **state) {
    (void)state;
    oom_scenario s = {"tokenizer", oom_scenario_tok};
    oom_result r = oom_sweep(&s);
    assert_true(r.failures > 10);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spm_matches_sentencepiece),
        cmocka_unit_test(test_bpe_matches_gpt2_reference),
        cmocka_unit_test(test_spm_special_tokens),
        cmocka_unit_test(test_bpe_special_and_bytes),
        cmocka_unit_test(test_bytes_tokenizer_gguf_round_trip),
        cmocka_unit_test(test_bad_calls),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_oom_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
