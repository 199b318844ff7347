/* bench_tokenizer.c - tokenizer_added: fc_tokenizer_encode of text full of
 * user-defined (added) tokens, at 8,000 and 32,000 pairs, to show that the
 * added-token matcher scales linearly with the text (issue 45: it was
 * quadratic, so a long input was a denial of service).
 *
 * The vocabulary is byte-level "gpt2" (token i < 256 spells byte i, no
 * merges) with 12 user-defined tokens that share prefixes and nest
 * ("<|im_start|>", "<|im_end|>", "<|im", "</tool_call>", ...) and two
 * control tokens, written as GGUF key/values, so the bench needs no file.
 * One pair is a plain word and an added token: pair i is " " + words[i % 7]
 * + added[i % 12]. One iteration encodes the whole text (no flags: control
 * tokens are text). The output is checked: exactly one added token per
 * pair, so a wrong fast path cannot pass.
 *
 * One JSON line per size: ms per encode and ns per byte; the second line
 * adds the ratio of its median to the first's and that ratio over the
 * ratio of the texts' bytes (1.0 is linear). The timer is bench.h's protocol; an old
 * quadratic matcher at 32,000 pairs takes seconds per call, so run with a
 * small FUCINA_BENCH_MIN_S to see it quickly. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "fucina.h"
#include "fucina/tokenizer.h"

enum { N_ADDED = 12, N_CONTROL = 2, N_TOKENS = 256 + N_ADDED + N_CONTROL };

static const char *const added[N_ADDED] = {
    "<|im_start|>", "<|im_end|>", "<|im", "<tool_call>", "</tool_call>", "<tool",
    "[INST]",       "[/INST]",    "<<SYS>>", "<</SYS>>", "\n\n\n",       "<|im_sep|>",
};
static const char *const words[7] = {"alpha", "be", "gamma", "delta", "ep", "zeta", "eta"};

/* GPT-2's printable code point of byte b (the vocabulary's byte tokens). */
static size_t byte_token(unsigned b, char *out) {
    unsigned cp = b;
    if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE))) {
        unsigned k = b <= 0x20 ? b : b <= 0xA0 ? 33 + (b - 0x7F) : 67;
        cp = 0x100 + k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

static fc_tokenizer *make_tokenizer(void) {
    static char bytes[256][3];
    const char *tokens[N_TOKENS];
    int32_t types[N_TOKENS];
    for (unsigned b = 0; b < 256; b++) {
        bytes[b][byte_token(b, bytes[b])] = 0;
        tokens[b] = bytes[b];
        types[b] = FC_TOKEN_NORMAL;
    }
    for (int i = 0; i < N_ADDED; i++) {
        tokens[256 + i] = added[i];
        types[256 + i] = FC_TOKEN_USER_DEFINED;
    }
    tokens[256 + N_ADDED] = "<s>";
    tokens[256 + N_ADDED + 1] = "</s>";
    types[256 + N_ADDED] = types[256 + N_ADDED + 1] = FC_TOKEN_CONTROL;
    const uint32_t bos = 256 + N_ADDED, eos = bos + 1;
    const fc_gguf_kv kvs[] = {
        {.key = "tokenizer.ggml.model", .type = FC_GGUF_STRING, .data = "gpt2"},
        {.key = "tokenizer.ggml.tokens", .type = FC_GGUF_ARRAY, .elem_type = FC_GGUF_STRING,
         .count = N_TOKENS, .data = tokens},
        {.key = "tokenizer.ggml.token_type", .type = FC_GGUF_ARRAY, .elem_type = FC_GGUF_I32,
         .count = N_TOKENS, .data = types},
        {.key = "tokenizer.ggml.merges", .type = FC_GGUF_ARRAY, .elem_type = FC_GGUF_STRING,
         .count = 0, .data = tokens},
        {.key = "tokenizer.ggml.bos_token_id", .type = FC_GGUF_U32, .data = &bos},
        {.key = "tokenizer.ggml.eos_token_id", .type = FC_GGUF_U32, .data = &eos},
    };
    char path[] = "/tmp/fucina-bench-tokenizer-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    close(fd);
    fc_gguf_file *f = NULL;
    fc_tokenizer *t = NULL;
    if (fc_gguf_write(path, kvs, (int64_t)(sizeof kvs / sizeof kvs[0]), NULL, 0, NULL) == FC_OK &&
        fc_gguf_open(path, NULL, &f) == FC_OK)
        fc_tokenizer_from_gguf(NULL, f, NULL, &t);
    fc_gguf_close(f);
    unlink(path);
    return t;
}

typedef struct enc {
    const fc_tokenizer *t;
    const char *text;
    size_t len;
    int32_t *ids;
    int64_t cap, n;
    fc_status st;
} enc;

static void encode(void *p) {
    enc *e = p;
    e->st = fc_tokenizer_encode(NULL, e->t, e->text, e->len, 0, e->ids, e->cap, &e->n);
}

static char *make_text(long pairs, size_t *len) {
    size_t cap = 1;
    for (long i = 0; i < pairs; i++)
        cap += 1 + strlen(words[i % 7]) + strlen(added[i % N_ADDED]);
    char *s = malloc(cap);
    if (!s) return NULL;
    size_t k = 0;
    for (long i = 0; i < pairs; i++) {
        s[k++] = ' ';
        size_t w = strlen(words[i % 7]), a = strlen(added[i % N_ADDED]);
        memcpy(s + k, words[i % 7], w);
        memcpy(s + k + w, added[i % N_ADDED], a);
        k += w + a;
    }
    *len = k;
    return s;
}

int bench_tokenizer_added(int argc, char **argv) {
    (void)argc, (void)argv;
    fc_tokenizer *t = make_tokenizer();
    if (!t) {
        fprintf(stderr, "fucina-bench tokenizer_added: cannot build the tokenizer\n");
        return 1;
    }
    static const long sizes[2] = {8000, 32000};
    double median[2] = {0, 0}, bytes[2] = {0, 0};
    int rc = 0;
    for (int s = 0; s < 2 && rc == 0; s++) {
        enc e = {.t = t};
        e.text = make_text(sizes[s], &e.len);
        e.cap = (int64_t)e.len + 1; /* at most one id per byte */
        e.ids = malloc(sizeof *e.ids * (size_t)e.cap);
        if (!e.text || !e.ids) {
            rc = 1;
        } else {
            encode(&e);
            long found = 0;
            for (int64_t i = 0; i < e.n; i++) found += e.ids[i] >= 256 && e.ids[i] < 256 + N_ADDED;
            if (e.st != FC_OK || found != sizes[s]) {
                fprintf(stderr, "fucina-bench tokenizer_added: status %d, %ld added tokens for %ld pairs\n",
                        (int)e.st, found, sizes[s]);
                rc = 1;
            }
        }
        if (rc == 0) {
            bench_result r = bench_measure(encode, &e);
            median[s] = r.median_s;
            bytes[s] = (double)e.len;
            printf("{\"workload\": \"tokenizer_added\", ");
            bench_json_env(stdout, 1);
            printf(", \"pairs\": %ld, \"bytes\": %zu, \"ids\": %lld, \"added_tokens\": %d, ", sizes[s],
                   e.len, (long long)e.n, N_ADDED);
            bench_json_stat(stdout, "ms_per_encode", &r, -1e3);
            printf(", ");
            bench_json_stat(stdout, "ns_per_byte", &r, -1e9 / (double)e.len);
            if (s == 1)
                printf(", \"time_ratio_over_%ld\": %.3f, \"ratio_over_linear\": %.3f", sizes[0],
                       median[1] / median[0],
                       median[1] / median[0] / (bytes[1] / bytes[0]));
            printf(", ");
            bench_json_raw(stdout, &r);
            printf("}\n");
            fflush(stdout);
        }
        free((void *)e.text);
        free(e.ids);
    }
    fc_tokenizer_free(t);
    return rc;
}
