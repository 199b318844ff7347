/* generate - text generation from any GGUF Llama model with fucina_models.
 *
 *   generate MODEL.gguf --prompt 1,15043,29892 [--n 32] [--temp 0.8]
 *            [--top-k 40] [--top-p 0.95] [--seed 1] [--stop -1] [--threads 0]
 *            [--logits FILE]
 *
 * Until the tokenizer lands the prompt is a list of token ids and the
 * output is the generated ids, one line, then a timing line on stderr.
 * --temp 0 (the default) is greedy decoding. --logits writes the prompt's
 * logits (f32 little-endian [T, vocab], one full forward) to FILE, for
 * scripts/llama_cpp_parity.sh. The model is mapped, not
 * read: quantized weights stay quantized. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/args.h"
#include "fucina/llama.h"

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
    int rc = !buf || fc_tensor_copy_to(y, buf, bytes) != FC_OK;
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

int main(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *logits_path = NULL;
    int64_t n_new = 32, top_k = 0, seed = 1, stop = -1, threads = 0;
    double temp = 0.0, top_p = 0.0;
    const ex_arg args[] = {
        {"prompt", EX_ARG_STRING, &prompt, "prompt token ids, comma-separated"},
        {"n", EX_ARG_INT, &n_new, "tokens to generate"},
        {"temp", EX_ARG_DOUBLE, &temp, "temperature (0: greedy)"},
        {"top-k", EX_ARG_INT, &top_k, "keep the k most likely tokens (0: all)"},
        {"top-p", EX_ARG_DOUBLE, &top_p, "nucleus probability (0: off)"},
        {"seed", EX_ARG_INT, &seed, "sampler seed"},
        {"stop", EX_ARG_INT, &stop, "stop after this token id (-1: none)"},
        {"threads", EX_ARG_INT, &threads, "threads (0: all cores)"},
        {"logits", EX_ARG_STRING, &logits_path, "write the prompt's logits (f32 [T, vocab]) here"},
    };
    ex_args_result ar = ex_args_parse(argc, argv, args, (int)(sizeof args / sizeof args[0]),
                                      &model_path, "generate MODEL.gguf --prompt IDS [options]");
    if (ar != EX_ARGS_OK) return ar == EX_ARGS_HELP ? 0 : 2;
    if (!model_path || !prompt) {
        fprintf(stderr, "generate: a model path and --prompt are required (--help)\n");
        return 2;
    }
    int32_t *ids = NULL;
    int64_t n_prompt = parse_ids(prompt, &ids);
    if (n_prompt < 1 || n_new < 0 || stop < -1 || stop > INT32_MAX) {
        fprintf(stderr, "generate: bad --prompt, --n or --stop\n");
        free(ids);
        return 2;
    }
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = (int)threads});
    fc_llama *m = NULL;
    int32_t *out = malloc(sizeof *out * (size_t)(n_new ? n_new : 1));
    int rc = 1;
    if (!ctx || !out) goto done;
    double t0 = now();
    if (fc_llama_load(ctx, model_path, NULL, &m)) goto fail;
    if (logits_path && write_logits(ctx, m, ids, n_prompt, logits_path)) goto fail;
    double t1 = now();
    fc_llama_sample_opts o = {
        .temperature = temp, .top_k = top_k, .top_p = top_p, .seed = (uint64_t)seed};
    int64_t n = 0;
    if (fc_llama_generate(ctx, m, ids, n_prompt, n_new, (int32_t)stop, &o, out, &n)) goto fail;
    double t2 = now();
    for (int64_t i = 0; i < n; i++)
        printf(i ? " %d" : "%d", (int)out[i]);
    printf("\n");
    fflush(stdout); /* the ids first, then the timing line */
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
    fc_llama_free(m);
    fc_ctx_free(ctx);
    free(out);
    free(ids);
    return rc;
}
