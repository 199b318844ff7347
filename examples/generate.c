/* SPDX-License-Identifier: MIT */
/* generate - text generation from any GGUF Llama model with fucina_models.
 *
 *   generate MODEL.gguf --text "Once upon a time" [--n 32] [--temp 0.8]
 *   generate MODEL.gguf --prompt 1,15043,29892 [--n 32] [--temp 0.8]
 *            [--top-k 40] [--top-p 0.95] [--seed 1] [--stop ID] [--threads 0]
 *            [--logits FILE]
 *
 * --text: the prompt is text, encoded with the file's own tokenizer
 * (tokenizer.ggml.*, with BOS when the file asks for it), and the output
 * is the prompt followed by the generated text, decoded token by token
 * (each with FC_DECODE_KEEP_PREFIX, so a "llama" vocabulary's spaces stay),
 * written as it comes; generation stops at the tokenizer's EOS unless
 * --stop says otherwise; --print-ids prints the prompt's ids instead (one
 * line, comma-separated as --prompt takes them) and generates nothing
 * (scripts/llama_cpp_parity.sh compares them with llama.cpp's).
 * --prompt: the prompt is a list of token ids and the output is the
 * generated ids, one line. Either way a timing line follows on stderr.
 * --temp 0 (the default) is greedy decoding. --logits writes the prompt's
 * logits (f32 little-endian [T, vocab], one full forward) to FILE, for
 * scripts/llama_cpp_parity.sh. The model is mapped, not read: quantized
 * weights stay quantized. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/args.h"
#include "fucina/llama.h"
#include "fucina/tokenizer.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "1,2,3" -> ids (malloc'd); -1 on a bad list. */
static int64_t parse_ids(const char *s, int32_t **out) {
    int64_t n = 1;
    for (const char *p = s; *p; p++)
        n += *p == ',';
    int32_t *ids = malloc(sizeof *ids * (size_t)n);
    if (!ids) return -1;
    const char *p = s;
    for (int64_t i = 0; i < n; i++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || v < 0 || v > INT32_MAX) {
            free(ids);
            return -1;
        }
        ids[i] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    *out = ids;
    return n;
}

/* The prompt's logits, one forward without a cache, as raw f32. */
static int write_logits(fc_ctx *ctx, fc_llama *m, const int32_t *ids, int64_t n, const char *path) {
    fc_tensor *t = fc_tensor_from_data(ctx, FC_I32, (int64_t[]){1, n}, 2, ids);
    fc_tensor *y = fc_llama_forward(ctx, m, t);
    size_t bytes = y ? fc_tensor_nbytes(y) : 0;
    float *buf = y ? malloc(bytes) : NULL;
    int rc = !buf || fc_tensor_copy_out(buf, bytes, y) != FC_OK;
    FILE *f = rc ? NULL : fopen(path, "wb");
    if (!rc && (!f || fwrite(buf, 1, bytes, f) != bytes)) {
        fc_ctx_fail(ctx, FC_ERR_IO, "generate: cannot write %s", path);
        rc = 1;
    }
    if (f) fclose(f);
    free(buf);
    fc_release(y);
    fc_release(t);
    return rc;
}

/* --text: the prompt encoded with m's tokenizer into *ids (malloc'd);
 * the count, or -1 with the error in ctx. *stop becomes the EOS when it
 * was left at its default (-2). */
static int64_t encode_text(fc_ctx *ctx, const fc_tokenizer *tok, const char *text, int64_t *stop,
                           int32_t **ids) {
    int64_t n = 0;
    size_t len = strlen(text);
    /* measuring with a NULL ctx: the FC_ERR_DATA_LENGTH it answers would
     * stay in ctx as its first error */
    fc_status st = fc_tokenizer_encode(NULL, tok, text, len, FC_TOKENIZE_ADD_SPECIAL, NULL, 0, &n);
    if (st != FC_OK && st != FC_ERR_DATA_LENGTH) {
        fc_ctx_fail(ctx, st, "generate: cannot encode --text");
        return -1;
    }
    if (n < 1) {
        fc_ctx_fail(ctx, FC_ERR_INVALID_ARG, "generate: --text gives no tokens");
        return -1;
    }
    *ids = malloc(sizeof **ids * (size_t)n);
    if (!*ids || fc_tokenizer_encode(ctx, tok, text, len, FC_TOKENIZE_ADD_SPECIAL, *ids, n, &n))
        return -1;
    if (*stop == -2) *stop = fc_tokenizer_eos(tok);
    return n;
}

/* Prints ids[0, n) decoded one at a time (a stream); 1 on error. */
static int print_text(fc_ctx *ctx, const fc_tokenizer *tok, const int32_t *ids, int64_t n) {
    char small[256], *buf = small;
    size_t cap = sizeof small;
    for (int64_t i = 0; i < n; i++) {
        size_t len = 0;
        fc_tokenizer_decode(NULL, tok, ids + i, 1, FC_DECODE_KEEP_PREFIX, NULL, 0, &len);
        if (len + 1 > cap) { /* a token longer than any before */
            if (buf != small) free(buf);
            cap = len + 1;
            buf = malloc(cap);
            if (!buf) return 1;
        }
        fc_status st =
            fc_tokenizer_decode(ctx, tok, ids + i, 1, FC_DECODE_KEEP_PREFIX, buf, cap, &len);
        if (st != FC_OK) break;
        fwrite(buf, 1, len, stdout);
        fflush(stdout); /* a stream: each token as it is decoded */
    }
    if (buf != small) free(buf);
    return fc_ctx_status(ctx) != FC_OK;
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *text = NULL, *logits_path = NULL;
    int64_t n_new = 32, top_k = 0, seed = 1, stop = -2, threads = 0;
    double temp = 0.0, top_p = 1.0;
    bool print_ids = false;
    const ex_arg args[] = {
        {"text", EX_ARG_STRING, &text, "prompt text (the file's tokenizer encodes it)", EX_ANY},
        {"print-ids", EX_ARG_FLAG, &print_ids, "with --text: print its token ids and stop", EX_ANY},
        {"prompt", EX_ARG_STRING, &prompt, "prompt token ids, comma-separated", EX_ANY},
        {"n", EX_ARG_INT, &n_new, "tokens to generate", EX_MIN(0)},
        {"temp", EX_ARG_DOUBLE, &temp, "temperature (0: greedy)", EX_MIN(0)},
        {"top-k", EX_ARG_INT, &top_k, "keep the k most likely tokens (0: all)", EX_MIN(0)},
        {"top-p", EX_ARG_DOUBLE, &top_p,
         "nucleus: sample from the most likely tokens holding this probability (1: all)", EX_POS,
         EX_MAX(1)},
        {"seed", EX_ARG_INT, &seed, "sampler seed", EX_ANY},
        {"stop", EX_ARG_INT, &stop,
         "stop after this token id (-1: none; default: EOS with --text, none with --prompt)",
         EX_MIN(-1), EX_MAX(2147483647)},
        {"threads", EX_ARG_INT, &threads, "threads (0: all cores)", EX_MIN(0)},
        {"logits", EX_ARG_STRING, &logits_path, "write the prompt's logits (f32 [T, vocab]) here",
         EX_ANY},
    };
    ex_args_result ar =
        ex_args_parse(argc, argv, args, (int)(sizeof args / sizeof args[0]), &model_path,
                      "MODEL.gguf (--text TEXT | --prompt IDS) [options]");
    if (ar != EX_ARGS_OK) return ar == EX_ARGS_HELP ? 0 : 2;
    if (!model_path || !prompt == !text) {
        fprintf(stderr, "generate: a model path and one of --text, --prompt are required "
                        "(--help)\n");
        return 2;
    }
    int32_t *ids = NULL;
    int64_t n_prompt = prompt ? parse_ids(prompt, &ids) : 1;
    if (n_prompt < 1) {
        fprintf(stderr, "generate: --prompt wants token ids separated by commas, got '%s'\n",
                prompt);
        free(ids);
        return 2;
    }
    if (prompt && stop == -2) stop = -1;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = (int)threads});
    fc_llama *m = NULL;
    fc_tokenizer *tok = NULL;
    int32_t *out = malloc(sizeof *out * (size_t)(n_new ? n_new : 1));
    int rc = 1;
    if (!ctx || !out) goto done;
    double t0 = now();
    if (fc_llama_load(ctx, model_path, NULL, &m)) goto fail;
    if (text && (fc_tokenizer_from_gguf(ctx, fc_llama_gguf(m), NULL, &tok) ||
                 (n_prompt = encode_text(ctx, tok, text, &stop, &ids)) < 0))
        goto fail;
    if (text && print_ids) {
        for (int64_t i = 0; i < n_prompt; i++)
            printf(i ? ",%d" : "%d", (int)ids[i]);
        printf("\n");
        rc = 0;
        goto done;
    }
    if (logits_path && write_logits(ctx, m, ids, n_prompt, logits_path)) goto fail;
    double t1 = now();
    fc_llama_sample_opts o = {
        .temperature = temp, .top_k = top_k, .top_p = top_p, .seed = (uint64_t)seed};
    int64_t n = 0;
    if (fc_llama_generate(ctx, m, ids, n_prompt, n_new, (int32_t)stop, &o, out, &n)) goto fail;
    double t2 = now();
    if (text) {
        fputs(text, stdout);
        if (print_text(ctx, tok, out, n)) goto fail;
    } else {
        for (int64_t i = 0; i < n; i++)
            printf(i ? " %d" : "%d", (int)out[i]);
    }
    printf("\n");
    fflush(stdout); /* the output first, then the timing line */
    const fc_llama_config *c = fc_llama_get_config(m);
    fprintf(stderr,
            "generate: %lld layers, dim %lld, vocab %lld; load %.3f s; %lld prompt + %lld new "
            "tokens in %.3f s (%.1f tokens/s)\n",
            (long long)c->n_layers, (long long)c->dim, (long long)c->vocab, t1 - t0,
            (long long)n_prompt, (long long)n, t2 - t1, (double)(n_prompt + n) / (t2 - t1));
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "generate: %s\n", fc_ctx_error(ctx));
done:
    fc_tokenizer_free(tok);
    fc_llama_free(m);
    fc_ctx_free(ctx);
    free(out);
    free(ids);
    return rc;
}
