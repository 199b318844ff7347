/* SPDX-License-Identifier: MIT */
/* bench_tokenizer.c - tokenizer_added: fc_tokenizer_encode of text full of
 * user-defined (added) tokens, at 8,000 and 32,000 pairs, to show that the
 * added-token matcher scales linearly with the text (issue 45: it was
 * quadratic, so a long input was a denial of service).
 *
 * The vocabulary is byte-level "gpt2" (token i < 256 spells byte i, no
 * merges) with 12 user-defined tokens that share prefixes and nest
 * ("<|im_start|>", "<|im_end|>", "<|im", "</tool_call>", ...), 256 more
 * that the text never holds ("<|reserved_N|>", as models reserve them)
 * and two control tokens, written as GGUF key/values: no file needed.
 * One pair is a plain word and an added token: pair i is " " + words[i % 7]
 * + added[i % 12]. One iteration encodes the whole text (no flags: control
 * tokens are text). The output is checked: exactly one added token per
 * pair, so a wrong fast path cannot pass.
 *
 * One JSON line per size: ms per encode and ns per byte by bench.h's
 * protocol (each size timed on its own), then the least wall and thread
 * CPU time of each size over about 2 s more of encodes with the two sizes
 * alternating ("wall_ms_min", "cpu_ms_min"), so that the load of a shared
 * machine, which changes between the protocol's two runs, hits both
 * alike. The second line adds "ratio_over_linear": its wall_ms_min over
 * the first's, divided by the ratio of the texts' bytes (1.0 is linear),
 * and the same of cpu_ms_min and of the protocol's medians. An old
 * quadratic matcher at 32,000 pairs takes seconds per call, so run it
 * with a small FUCINA_BENCH_MIN_S. Two arguments replace the
 * two sizes (pairs). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "fucina.h"
#include "fucina/tokenizer.h"

enum { N_ADDED = 12, N_RESERVED = 256, N_TOKENS = 256 + N_ADDED + N_RESERVED + 2 };

static const char *const added[N_ADDED] = {
    "<|im_start|>", "<|im_end|>", "<|im",    "<tool_call>", "</tool_call>", "<tool",
    "[INST]",       "[/INST]",    "<<SYS>>", "<</SYS>>",    "\n\n\n",       "<|im_sep|>",
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
    static char bytes[256][3], reserved[N_RESERVED][24];
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
    for (int i = 0; i < N_RESERVED; i++) {
        snprintf(reserved[i], sizeof reserved[i], "<|reserved_%d|>", i);
        tokens[256 + N_ADDED + i] = reserved[i];
        types[256 + N_ADDED + i] = FC_TOKEN_USER_DEFINED;
    }
    const uint32_t bos = N_TOKENS - 2, eos = N_TOKENS - 1;
    tokens[bos] = "<s>";
    tokens[eos] = "</s>";
    types[bos] = types[eos] = FC_TOKEN_CONTROL;
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

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The least wall and thread CPU time of each text's encode, the two
 * alternating for about 2 s (at least 10 rounds). */
static void interleaved_min(enc *e, double *wall, double *cpu) {
    double end = bench_now() + 2;
    for (long round = 0; round < 10 || bench_now() < end; round++) {
        for (int s = 0; s < 2; s++) {
            double w0 = bench_now(), c0 = cpu_now();
            encode(&e[s]);
            double dc = cpu_now() - c0, dw = bench_now() - w0;
            if (round == 0 || dw < wall[s]) wall[s] = dw;
            if (round == 0 || dc < cpu[s]) cpu[s] = dc;
        }
    }
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
    long sizes[2] = {8000, 32000};
    if (argc == 2) { /* other sizes, to look closer */
        sizes[0] = atol(argv[0]);
        sizes[1] = atol(argv[1]);
    }
    if (argc != 0 && (argc != 2 || sizes[0] < 1 || sizes[1] < 1)) {
        fprintf(stderr, "usage: fucina-bench tokenizer_added [PAIRS PAIRS]\n");
        return 2;
    }
    fc_tokenizer *t = make_tokenizer();
    if (!t) {
        fprintf(stderr, "fucina-bench tokenizer_added: cannot build the tokenizer\n");
        return 1;
    }
    enc e[2] = {{.t = t}, {.t = t}};
    bench_result r[2];
    int rc = 0;
    for (int s = 0; s < 2 && rc == 0; s++) {
        e[s].text = make_text(sizes[s], &e[s].len);
        e[s].cap = (int64_t)e[s].len + 1; /* at most one id per byte */
        e[s].ids = malloc(sizeof *e[s].ids * (size_t)e[s].cap);
        if (!e[s].text || !e[s].ids) {
            rc = 1;
            break;
        }
        encode(&e[s]);
        long found = 0;
        for (int64_t i = 0; i < e[s].n; i++)
            found += e[s].ids[i] >= 256 && e[s].ids[i] < 256 + N_ADDED;
        if (e[s].st != FC_OK || found != sizes[s]) {
            fprintf(stderr,
                    "fucina-bench tokenizer_added: status %d, %ld added tokens for %ld pairs\n",
                    (int)e[s].st, found, sizes[s]);
            rc = 1;
        }
    }
    double wall[2] = {0, 0}, cpu[2] = {0, 0};
    if (rc == 0) {
        for (int s = 0; s < 2; s++)
            r[s] = bench_measure(encode, &e[s]);
        interleaved_min(e, wall, cpu);
    }
    double linear = (double)e[1].len / (double)e[0].len;
    for (int s = 0; s < 2 && rc == 0; s++) {
        printf("{\"workload\": \"tokenizer_added\", ");
        bench_json_env(stdout, 1);
        printf(", \"pairs\": %ld, \"bytes\": %zu, \"ids\": %lld, \"added_tokens\": %d, "
               "\"added_tokens_absent\": %d, ",
               sizes[s], e[s].len, (long long)e[s].n, N_ADDED, N_RESERVED);
        bench_json_stat(stdout, "ms_per_encode", &r[s], -1e3);
        printf(", ");
        bench_json_stat(stdout, "ns_per_byte", &r[s], -1e9 / (double)e[s].len);
        printf(", \"wall_ms_min\": %.6g, \"cpu_ms_min\": %.6g", wall[s] * 1e3, cpu[s] * 1e3);
        if (s == 1)
            printf(", \"time_ratio_over_%ld_pairs\": %.3f, \"ratio_over_linear\": %.3f, "
                   "\"cpu_ratio_over_linear\": %.3f, \"median_ratio_over_linear\": %.3f",
                   sizes[0], wall[1] / wall[0], wall[1] / wall[0] / linear,
                   cpu[1] / cpu[0] / linear, r[1].median_s / r[0].median_s / linear);
        printf(", ");
        bench_json_raw(stdout, &r[s]);
        printf("}\n");
    }
    for (int s = 0; s < 2; s++) {
        free((void *)e[s].text);
        free(e[s].ids);
    }
    fc_tokenizer_free(t);
    return rc;
}
