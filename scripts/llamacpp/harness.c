/* harness.c - llama.cpp as a peer: what the prebuilt llama.cpp of the npm
 * registry (@node-llama-cpp/linux-x64) makes of a GGUF file, printed for
 * scripts/llamacpp_parity.sh to compare with fucina. Built by that script
 * against the package's libraries and the headers of the llama.cpp release
 * they come from; not part of the fucina build.
 *
 *   harness tokenize MODEL          stdin lines "HEXTEXT FLAGS" (FLAGS bit 0:
 *                                   add_special, bit 1: parse_special);
 *                                   prints one line of ids per input line
 *   harness logits MODEL ID...      one evaluation of the ids; prints each
 *                                   position's logits on one line (%.9g)
 *   harness greedy MODEL N ID...    N greedy tokens after the ids (argmax of
 *                                   the logits, ties to the lowest id)
 * Tokenizing loads the vocabulary only. Exit status 1 with a message on
 * any failure. */
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
    if (!m) fprintf(stderr, "harness: llama.cpp cannot load %s\n", path);
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
            fprintf(stderr, "harness: llama_tokenize failed (%d)\n", n);
            return 1;
        }
        for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
    }
    llama_model_free(m);
    return 0;
}

static int evaluate(const char *path, int n_gen, int argc, char **argv) {
    struct llama_model *m = open_model(path, 0);
    if (!m) return 1;
    int n = argc;
    llama_token *ids = malloc(sizeof *ids * (size_t)(n + n_gen + 1));
    for (int i = 0; i < n; i++) ids[i] = atoi(argv[i]);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n + n_gen + 8);
    cp.n_batch = cp.n_ubatch = (uint32_t)(n + 8);
    cp.n_threads = cp.n_threads_batch = 2;
    struct llama_context *c = llama_init_from_model(m, cp);
    if (!c) {
        fprintf(stderr, "harness: no llama.cpp context\n");
        return 1;
    }
    const int nv = llama_vocab_n_tokens(llama_model_get_vocab(m));
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = ids[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = n_gen == 0 || i == n - 1; /* every position's logits for "logits" */
    }
    b.n_tokens = n;
    if (llama_decode(c, b) != 0) {
        fprintf(stderr, "harness: llama_decode failed\n");
        return 1;
    }
    if (n_gen == 0) {
        for (int i = 0; i < n; i++) {
            const float *l = llama_get_logits_ith(c, i);
            for (int k = 0; k < nv; k++) printf(k ? " %.9g" : "%.9g", l[k]);
            printf("\n");
        }
    } else {
        for (int g = 0; g < n_gen; g++) {
            const float *l = llama_get_logits_ith(c, -1);
            int best = 0;
            for (int k = 1; k < nv; k++) best = l[k] > l[best] ? k : best;
            printf(g ? " %d" : "%d", best);
            llama_token t = best;
            if (llama_decode(c, llama_batch_get_one(&t, 1)) != 0) {
                fprintf(stderr, "harness: llama_decode failed at token %d\n", g);
                return 1;
            }
        }
        printf("\n");
    }
    llama_batch_free(b);
    llama_free(c);
    llama_model_free(m);
    free(ids);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: harness tokenize|logits|greedy MODEL ...\n");
        return 2;
    }
    llama_log_set(quiet, NULL);
    const char *dir = getenv("LLAMACPP_BACKENDS");
    if (dir) {
        ggml_backend_load_all_from_path(dir);
    } else {
        ggml_backend_load_all();
    }
    llama_backend_init();
    int rc;
    if (!strcmp(argv[1], "tokenize")) {
        rc = tokenize(argv[2]);
    } else if (!strcmp(argv[1], "logits")) {
        rc = evaluate(argv[2], 0, argc - 3, argv + 3);
    } else if (!strcmp(argv[1], "greedy") && argc >= 4) {
        rc = evaluate(argv[2], atoi(argv[3]), argc - 4, argv + 4);
    } else {
        fprintf(stderr, "harness: unknown mode %s\n", argv[1]);
        rc = 2;
    }
    llama_backend_free();
    return rc;
}
