/* SPDX-License-Identifier: MIT */
/* llama_tokenize - llama.cpp's tokenizer on a GGUF vocabulary, the peer
 * side of the tokenizer half of scripts/llama_cpp_parity.sh (llama_logits.c
 * is the model half). Built there against the llama.h of the llama.cpp
 * release inside node-llama-cpp and linked with the prebuilt libllama of
 * @node-llama-cpp/linux-x64; not part of the fucina build.
 *
 *   llama_tokenize LIBDIR MODEL.gguf    stdin lines "HEXTEXT FLAGS" (HEXTEXT
 *                                       "-" for the empty text; FLAGS bit 0:
 *                                       add_special, bit 1: parse_special)
 * prints one line of ids per input line. Loads the vocabulary only. Exit
 * status 1 with a message on any failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static struct llama_model *open_model(const char *path, int vocab_only) {
    struct llama_model_params p = llama_model_default_params();
    p.vocab_only = vocab_only != 0;
    p.n_gpu_layers = 0;
    struct llama_model *m = llama_model_load_from_file(path, p);
    if (!m) fprintf(stderr, "llama_tokenize: llama.cpp cannot load %s\n", path);
    return m;
}

static int tokenize(const char *path) {
    struct llama_model *m = open_model(path, 1);
    if (!m) return 1;
    const struct llama_vocab *v = llama_model_get_vocab(m);
    char line[8192];
    while (fgets(line, sizeof line, stdin)) {
        char hex[8000];
        unsigned flags = 0;
        if (sscanf(line, "%7999s %u", hex, &flags) < 1) continue;
        if (!strcmp(hex, "-")) hex[0] = 0; /* the empty text */
        char text[4000];
        int len = 0;
        for (size_t i = 0; hex[i] && hex[i + 1]; i += 2) {
            unsigned b;
            sscanf(hex + i, "%2x", &b);
            text[len++] = (char)b;
        }
        llama_token ids[4096];
        int n = llama_tokenize(v, text, len, ids, 4096, flags & 1, (flags & 2) != 0);
        if (n < 0) {
            fprintf(stderr, "llama_tokenize: llama_tokenize failed (%d)\n", n);
            return 1;
        }
        for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
    }
    llama_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: llama_tokenize LIBDIR MODEL.gguf < cases\n");
        return 2;
    }
    llama_log_set(quiet, NULL);
    ggml_backend_load_all_from_path(argv[1]);
    llama_backend_init();
    int rc = tokenize(argv[2]);
    llama_backend_free();
    return rc;
}
