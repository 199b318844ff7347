/* SPDX-License-Identifier: MIT */
/* fuzz_tokenizer.c - libFuzzer target for the GGUF tokenizers.
 *
 * An input starting with "GGUF" is a whole file: it is opened from memory,
 * its tokenizer read, and when that succeeds a text is encoded and
 * decoded: a fixed text followed by the file's own special tokens run
 * together, so fuzzed vocabularies reach the special-token matcher. Any
 * other input is text for three fixture tokenizers: the two of
 * tests/data/tokenizer (read once) and "added", built here: byte-level
 * "gpt2" with special tokens that overlap, nest, share prefixes and tie in
 * length, of all three special types. Encoding must succeed, every id must
 * be in the vocabulary, and decoding must give the text back (for the
 * SentencePiece vocabulary, which spells any byte, unless the text holds
 * U+2581 itself, which it reads as a space; for byte-level BPE when the
 * text is valid UTF-8, since invalid bytes read as U+FFFD). The first byte
 * picks the flags.
 *
 * Every encoding is also checked against the literal partition rule the
 * matcher replaced: the special tokens allowed, in rank order (longest
 * first, lowest id among equal lengths), each taken leftmost first in the
 * text fragments left. The ids must be those tokens, in place, with each
 * text fragment encoded on its own between them (a fragment holds no
 * special token, and each starts the text or follows a special token, so
 * encoding it alone gives the same ids). */
#define _GNU_SOURCE /* memmem */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fucina.h"
#include "fucina/tokenizer.h"

#ifndef FUZZ_DATA_DIR
#define FUZZ_DATA_DIR "tests/data/tokenizer"
#endif

static fc_tokenizer *fixture(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", FUZZ_DATA_DIR, name);
    fc_gguf_file *f = NULL;
    fc_tokenizer *t = NULL;
    if (fc_gguf_open(path, NULL, &f) != FC_OK || fc_tokenizer_from_gguf(NULL, f, NULL, &t) != FC_OK) {
        fprintf(stderr, "fuzz_tokenizer: cannot read %s (run from the source root)\n", path);
        abort();
    }
    fc_gguf_close(f);
    return t;
}

/* "added": byte-level "gpt2" (token i < 256 is byte i's GPT-2 code point,
 * no merges) with special tokens that overlap, nest and tie in length;
 * written to a temporary file once, as the tokenizer reads only GGUF. */
static const char *const added_text[] = {
    "ab",   "ba",    "abc",          "bc",         "cab",  "aa",       "aaa",     "abab",
    "<a>",  "<a",    "a>",           "b<a>b",      "cc",   "bca",      "\xC3\xA9\xC3\xA9", "c\xC3\xA9",
    "  ",   "   ",   "\n\n",         "<|im_start|>", "<|im_end|>", "<|im", "<unk>",  "<s>",
};
static const int32_t added_type[] = {4, 4, 4, 4, 3, 4, 4, 4, 4, 3, 4, 4, 3, 4, 4, 4,
                                     4, 4, 3, 4, 4, 4, 2, 3};
enum { N_ADDED = sizeof added_text / sizeof added_text[0] };

static fc_tokenizer *added_fixture(void) {
    static char bytes[256][3];
    const char *tokens[256 + N_ADDED];
    int32_t types[256 + N_ADDED];
    for (unsigned b = 0; b < 256; b++) {
        unsigned cp = b;
        if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE))
            cp = 0x100 + (b <= 0x20 ? b : b <= 0xA0 ? 33 + (b - 0x7F) : 67);
        if (cp < 0x80) {
            bytes[b][0] = (char)cp;
        } else {
            bytes[b][0] = (char)(0xC0 | cp >> 6);
            bytes[b][1] = (char)(0x80 | (cp & 0x3F));
        }
        tokens[b] = bytes[b];
        types[b] = FC_TOKEN_NORMAL;
    }
    for (int i = 0; i < N_ADDED; i++) {
        tokens[256 + i] = added_text[i];
        types[256 + i] = added_type[i];
    }
    const fc_gguf_kv kvs[] = {
        {.key = "tokenizer.ggml.model", .type = FC_GGUF_STRING, .data = "gpt2"},
        {.key = "tokenizer.ggml.tokens", .type = FC_GGUF_ARRAY, .elem_type = FC_GGUF_STRING,
         .count = 256 + N_ADDED, .data = tokens},
        {.key = "tokenizer.ggml.token_type", .type = FC_GGUF_ARRAY, .elem_type = FC_GGUF_I32,
         .count = 256 + N_ADDED, .data = types},
        {.key = "tokenizer.ggml.merges", .type = FC_GGUF_ARRAY, .elem_type = FC_GGUF_STRING,
         .count = 0, .data = tokens},
    };
    const char *dir = getenv("TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/fuzz_tokenizer_added_%ld.gguf", dir ? dir : "/tmp", (long)getpid());
    fc_gguf_file *f = NULL;
    fc_tokenizer *t = NULL;
    if (fc_gguf_write(path, kvs, 4, NULL, 0, NULL) != FC_OK || fc_gguf_open(path, NULL, &f) != FC_OK ||
        fc_tokenizer_from_gguf(NULL, f, NULL, &t) != FC_OK) {
        fprintf(stderr, "fuzz_tokenizer: cannot build the added-token fixture at %s\n", path);
        abort();
    }
    fc_gguf_close(f);
    remove(path);
    return t;
}

/* The GGUF path's text: a fixed text, then the file's first special
 * tokens run together (some with a space between), at most 4 KiB. */
static size_t gguf_text(const fc_tokenizer *t, char *out, size_t cap) {
    static const char fixed[] = "The quick brown fox <s> jumps \xE2\x96\x81 over \xF0\x9F\x98\x80 it's 42 ";
    size_t n = sizeof fixed - 1;
    memcpy(out, fixed, n);
    int64_t vocab = fc_tokenizer_vocab_size(t);
    int taken = 0;
    for (int32_t i = 0; i < vocab && taken < 48; i++) {
        fc_token_type ty = fc_tokenizer_token_type(t, i);
        if (ty != FC_TOKEN_USER_DEFINED && ty != FC_TOKEN_CONTROL && ty != FC_TOKEN_UNKNOWN) continue;
        size_t len;
        const char *s = fc_tokenizer_token_text(t, i, &len);
        if (n + len + 1 > cap) break;
        memcpy(out + n, s, len);
        n += len;
        if (taken++ % 3 == 2) out[n++] = ' ';
    }
    return n;
}

static int valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!k || i + k > n) return 0;
        uint32_t cp = c & (0x7Fu >> k);
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + j] & 0x3Fu);
        }
        static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (k > 1 && (cp < min_of[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
        i += k;
    }
    return 1;
}

/* The literal partition: the special tokens of t allowed by flags, longest
 * first (lowest id among equal lengths), each taken leftmost first in
 * the fragments left; a fragment's id is its token, or -1 for text. */
typedef struct frag {
    size_t off, len;
    int32_t id;
} frag;

static int rank_before(const fc_tokenizer *t, int32_t a, int32_t b) {
    size_t la, lb;
    fc_tokenizer_token_text(t, a, &la);
    fc_tokenizer_token_text(t, b, &lb);
    return la > lb || (la == lb && a < b);
}

static frag *partition(const fc_tokenizer *t, const uint8_t *text, size_t n, unsigned flags,
                       size_t *nf_out) {
    int64_t vocab = fc_tokenizer_vocab_size(t);
    int32_t *sp = malloc(sizeof *sp * (size_t)(vocab + 1));
    int32_t ns = 0;
    for (int32_t i = 0; i < vocab; i++) {
        fc_token_type ty = fc_tokenizer_token_type(t, i);
        if (ty == FC_TOKEN_USER_DEFINED ||
            ((flags & FC_TOKENIZE_PARSE_SPECIAL) && (ty == FC_TOKEN_CONTROL || ty == FC_TOKEN_UNKNOWN)))
            sp[ns++] = i;
    }
    for (int32_t i = 1; i < ns; i++) { /* insertion sort: vocabularies here are small */
        int32_t v = sp[i], j = i;
        for (; j > 0 && rank_before(t, v, sp[j - 1]); j--) sp[j] = sp[j - 1];
        sp[j] = v;
    }
    size_t cap = 2 * n + 1, nf = 1;
    frag *fr = malloc(sizeof *fr * cap);
    fr[0] = (frag){0, n, -1};
    for (int32_t s = 0; s < ns; s++) {
        size_t tl;
        const char *tt = fc_tokenizer_token_text(t, sp[s], &tl);
        for (size_t f = 0; f < nf && tl; f++) {
            if (fr[f].id >= 0 || fr[f].len < tl) continue;
            const uint8_t *base = text + fr[f].off;
            size_t at = SIZE_MAX;
            for (size_t i = 0; i + tl <= fr[f].len && at == SIZE_MAX; i++)
                if (!memcmp(base + i, tt, tl)) at = i;
            if (at == SIZE_MAX) continue;
            if (nf + 2 > cap) abort(); /* each find takes a byte at least */
            memmove(fr + f + 3, fr + f + 1, (nf - f - 1) * sizeof *fr);
            nf += 2;
            fr[f + 2] = (frag){fr[f].off + at + tl, fr[f].len - at - tl, -1};
            fr[f + 1] = (frag){0, 0, sp[s]};
            fr[f].len = at;
            f++;
        }
    }
    free(sp);
    *nf_out = nf;
    return fr;
}

/* Encodes text[0, n) into a new array (*count ids); aborts unless it works. */
static int32_t *encode_all(fc_ctx *ctx, const fc_tokenizer *t, const uint8_t *text, size_t n,
                           unsigned flags, int64_t *count) {
    int64_t m = 0, got = 0;
    fc_status st = fc_tokenizer_encode(ctx, t, (const char *)text, n, flags, NULL, 0, &m);
    if (st != FC_OK && st != FC_ERR_DATA_LENGTH) abort();
    int32_t *ids = malloc(sizeof *ids * (size_t)(m + 1));
    if (fc_tokenizer_encode(ctx, t, (const char *)text, n, flags, ids, m, &got) != FC_OK || got != m)
        abort();
    *count = m;
    return ids;
}

/* encode(text) == the partition's tokens with each fragment encoded alone,
 * without ADD_SPECIAL (BOS / EOS would repeat per fragment). */
static void check_partition(fc_ctx *ctx, const fc_tokenizer *t, const uint8_t *text, size_t n,
                            unsigned flags) {
    flags &= ~(unsigned)FC_TOKENIZE_ADD_SPECIAL;
    int64_t count;
    int32_t *ids = encode_all(ctx, t, text, n, flags, &count);
    size_t nf;
    frag *fr = partition(t, text, n, flags, &nf);
    int64_t k = 0;
    for (size_t f = 0; f < nf; f++) {
        if (fr[f].id >= 0) {
            if (k >= count || ids[k] != fr[f].id) abort();
            k++;
            continue;
        }
        if (!fr[f].len) continue;
        int64_t m;
        int32_t *part = encode_all(ctx, t, text + fr[f].off, fr[f].len, flags, &m);
        if (k + m > count || memcmp(part, ids + k, sizeof *part * (size_t)m)) abort();
        free(part);
        k += m;
    }
    if (k != count) abort();
    free(fr);
    free(ids);
    fc_ctx_clear_error(ctx);
}

/* must_match: decode(encode(text)) must be the text (without
 * PARSE_SPECIAL). A fuzzed vocabulary (must_match 0) may lack the tokens
 * to spell the text: FC_ERR_INVALID_ARG is then its answer. */
static void round_trip(fc_ctx *ctx, fc_tokenizer *t, const uint8_t *text, size_t n, unsigned flags,
                       int must_match) {
    int64_t count = 0;
    fc_status st = fc_tokenizer_encode(ctx, t, (const char *)text, n, flags, NULL, 0, &count);
    if (!must_match && st == FC_ERR_INVALID_ARG) {
        fc_ctx_clear_error(ctx);
        return;
    }
    int64_t got = 0;
    int32_t *ids = encode_all(ctx, t, text, n, flags, &got);
    if (got != count) abort();
    for (int64_t i = 0; i < got; i++) {
        if (ids[i] < 0 || ids[i] >= fc_tokenizer_vocab_size(t)) abort();
    }
    check_partition(ctx, t, text, n, flags);
    size_t len = 0;
    st = fc_tokenizer_decode(ctx, t, ids, got, 0, NULL, 0, &len);
    if (st != FC_OK && st != FC_ERR_DATA_LENGTH) abort();
    char *back = malloc(len + 1);
    size_t len2 = 0;
    if (fc_tokenizer_decode(ctx, t, ids, got, 0, back, len + 1, &len2) != FC_OK || len2 != len) abort();
    /* without special tokens parsed, the decoded text is the input */
    if (must_match && !(flags & FC_TOKENIZE_PARSE_SPECIAL) && (len != n || memcmp(back, text, n)))
        abort();
    free(back);
    free(ids);
    fc_ctx_clear_error(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static fc_tokenizer *spm, *bpe, *added;
    static fc_ctx *ctx;
    if (!ctx) {
        ctx = fc_ctx_new(NULL);
        spm = fixture("spm.gguf");
        bpe = fixture("bpe.gguf");
        added = added_fixture();
    }
    if (size >= 4 && !memcmp(data, "GGUF", 4)) {
        fc_gguf_file *f = NULL;
        if (fc_gguf_open_memory(data, size, NULL, &f) != FC_OK) return 0;
        fc_tokenizer *t = NULL;
        if (fc_tokenizer_from_gguf(ctx, f, NULL, &t) == FC_OK) {
            static char text[4096];
            size_t n = gguf_text(t, text, sizeof text);
            round_trip(ctx, t, (const uint8_t *)text, n, FC_TOKENIZE_ADD_SPECIAL, 0);
            round_trip(ctx, t, (const uint8_t *)text, n, FC_TOKENIZE_PARSE_SPECIAL, 0);
        }
        fc_tokenizer_free(t);
        fc_gguf_close(f);
        fc_ctx_clear_error(ctx);
        return 0;
    }
    if (size == 0) return 0;
    unsigned flags = data[0] & 3u;
    round_trip(ctx, spm, data + 1, size - 1, flags,
               !memmem(data + 1, size - 1, "\xE2\x96\x81", 3));
    round_trip(ctx, bpe, data + 1, size - 1, flags, valid_utf8(data + 1, size - 1));
    round_trip(ctx, added, data + 1, size - 1, flags, valid_utf8(data + 1, size - 1));
    return 0;
}
