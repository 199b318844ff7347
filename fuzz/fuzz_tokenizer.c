/* fuzz_tokenizer.c - libFuzzer target for the GGUF tokenizers.
 *
 * An input starting with "GGUF" is a whole file: it is opened from memory,
 * its tokenizer read, and when that succeeds a fixed text is encoded and
 * decoded. Any other input is text for the two fixture tokenizers of
 * tests/data/tokenizer (read once): encoding must succeed, every id must be
 * in the vocabulary, and decoding must give the text back (for the
 * SentencePiece vocabulary, which spells any byte, unless the text holds
 * U+2581 itself, which it reads as a space; for byte-level BPE when the
 * text is valid UTF-8, since invalid bytes read as U+FFFD). The first byte
 * picks the flags. */
#define _GNU_SOURCE /* memmem */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void round_trip(fc_ctx *ctx, fc_tokenizer *t, const uint8_t *text, size_t n, unsigned flags,
                       int must_match) {
    int64_t count = 0;
    fc_status st = fc_tokenizer_encode(ctx, t, (const char *)text, n, flags, NULL, 0, &count);
    if (st != FC_OK && st != FC_ERR_DATA_LENGTH) abort();
    int32_t *ids = malloc(sizeof *ids * (size_t)(count + 1));
    int64_t got = 0;
    if (fc_tokenizer_encode(ctx, t, (const char *)text, n, flags, ids, count, &got) != FC_OK || got != count)
        abort();
    for (int64_t i = 0; i < got; i++) {
        if (ids[i] < 0 || ids[i] >= fc_tokenizer_vocab_size(t)) abort();
    }
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
    static fc_tokenizer *spm, *bpe;
    static fc_ctx *ctx;
    if (!ctx) {
        ctx = fc_ctx_new(NULL);
        spm = fixture("spm.gguf");
        bpe = fixture("bpe.gguf");
    }
    if (size >= 4 && !memcmp(data, "GGUF", 4)) {
        fc_gguf_file *f = NULL;
        if (fc_gguf_open_memory(data, size, NULL, &f) != FC_OK) return 0;
        fc_tokenizer *t = NULL;
        if (fc_tokenizer_from_gguf(ctx, f, NULL, &t) == FC_OK) {
            static const char text[] = "The quick brown fox <s> jumps \xE2\x96\x81 over \xF0\x9F\x98\x80 it's 42";
            round_trip(ctx, t, (const uint8_t *)text, sizeof text - 1, FC_TOKENIZE_ADD_SPECIAL, 0);
            round_trip(ctx, t, (const uint8_t *)text, sizeof text - 1, FC_TOKENIZE_PARSE_SPECIAL, 0);
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
    return 0;
}
