/* SPDX-License-Identifier: MIT */
/* llama_logits - llama.cpp's logits and greedy tokens for a GGUF model,
 * the peer side of scripts/llama_cpp_parity.sh. Built there against the
 * llama.h of the llama.cpp release inside node-llama-cpp and linked with
 * the prebuilt libllama of @node-llama-cpp/linux-x64 (nothing is built
 * from fetched source but this file).
 *
 *   llama_logits LIBDIR MODEL.gguf N_GREEDY ID...
 *
 * Prints "logits T V" then T lines of V logits (%.9g) for the prompt (one
 * batch, every position's logits), then "greedy" and N_GREEDY ids chosen
 * by argmax (the lowest id on ties), each decoded one at a time through
 * llama.cpp's KV cache. Runs on the CPU, one sequence, context = prompt +
 * N_GREEDY, an f32 key/value cache and no flash attention, one thread
 * (LLAMA_LOGITS_THREADS=N: N). The timing
 * of the prompt and of the greedy steps goes to stderr. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ggml-backend.h"
#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level >= GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int argmax(const float *l, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: llama_logits LIBDIR MODEL.gguf N_GREEDY ID...\n");
        return 2;
    }
    int n_greedy = atoi(argv[3]), T = argc - 4;
    llama_token *ids = malloc(sizeof *ids * (size_t)(T + 1));
    for (int i = 0; i < T; i++)
        ids[i] = atoi(argv[4 + i]);
    llama_log_set(quiet, NULL);
    ggml_backend_load_all_from_path(argv[1]);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(argv[2], mp);
    if (!model) {
        fprintf(stderr, "llama_logits: cannot load %s\n", argv[2]);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(T + n_greedy + 1);
    cp.n_batch = cp.n_ubatch = (uint32_t)T;
    cp.n_seq_max = 1;
    /* one thread for the parity checks; bench/llama_gen_vs_llamacpp.sh
     * sets LLAMA_LOGITS_THREADS to fucina-bench's count */
    const char *th = getenv("LLAMA_LOGITS_THREADS");
    cp.n_threads = cp.n_threads_batch = th && atoi(th) > 0 ? atoi(th) : 1;
    /* exact keys and values: llama.cpp's default f16 cache moves f32
     * logits by ~1e-3; flash attention off keeps the softmax in f32 */
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llama_logits: cannot create a context\n");
        return 1;
    }
    int V = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_batch b = llama_batch_init(T, 0, 1);
    for (int i = 0; i < T; i++) {
        b.token[i] = ids[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = T;
    double t0 = now();
    if (llama_decode(ctx, b)) {
        fprintf(stderr, "llama_logits: decode failed\n");
        return 1;
    }
    printf("logits %d %d\n", T, V);
    for (int t = 0; t < T; t++) {
        const float *l = llama_get_logits_ith(ctx, t);
        for (int v = 0; v < V; v++)
            printf(v ? " %.9g" : "%.9g", l[v]);
        printf("\n");
    }
    double t1 = now();
    printf("greedy");
    int tok = argmax(llama_get_logits_ith(ctx, T - 1), V);
    for (int i = 0; i < n_greedy; i++) {
        printf(" %d", tok);
        if (i + 1 == n_greedy) break;
        llama_token one = tok;
        if (llama_decode(ctx, llama_batch_get_one(&one, 1))) {
            fprintf(stderr, "llama_logits: decode failed\n");
            return 1;
        }
        tok = argmax(llama_get_logits_ith(ctx, -1), V);
    }
    printf("\n");
    double t2 = now();
    fprintf(stderr,
            "llama_logits: prompt of %d in %.4f s, %d greedy steps in %.4f s (%.1f tokens/s)\n", T,
            t1 - t0, n_greedy, t2 - t1, (n_greedy - 1) / (t2 - t1));
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    free(ids);
    return 0;
}
