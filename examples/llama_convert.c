/* SPDX-License-Identifier: MIT */
/* llama_convert - rewrites a GGUF Llama model with its 2-D weights in
 * another dtype, keeping every metadata key (fucina/llama.h, fc_llama_save);
 * or writes a new random-initialised one (fc_llama_new).
 *
 *   llama_convert IN.gguf OUT.gguf DTYPE [FALLBACK]
 *   llama_convert --new VOCAB,DIM,HEADS,KV_HEADS,LAYERS,FF,CONTEXT[,SEED] OUT.gguf DTYPE [FALLBACK]
 *
 * DTYPE and FALLBACK are fucina dtype names (f32, f16, bf16, q8_0, q4_k,
 * ...); FALLBACK is used for weights whose rows the block of DTYPE does not
 * divide. Norms stay as they are. scripts/gen_llama_fixture.py uses the
 * first form for the quantized fixtures, scripts/llama_cpp_parity.sh the
 * second for a model fucina made, which llama.cpp must load.
 *
 * --help prints this usage on stdout and exits 0; a wrong command line
 * prints it on stderr and exits 2, an unknown dtype names itself and the
 * dtype names there are. */
#include <stdio.h>
#include <string.h>

#include "fucina/llama.h"

static int parse_config(const char *s, fc_llama_config *c, unsigned long long *seed) {
    long long v[8] = {0};
    int n = sscanf(s, "%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld", &v[0], &v[1], &v[2], &v[3], &v[4],
                   &v[5], &v[6], &v[7]);
    if (n < 7) return -1;
    *c = (fc_llama_config){.vocab = v[0],
                           .dim = v[1],
                           .n_heads = v[2],
                           .n_kv_heads = v[3],
                           .n_layers = v[4],
                           .ff_dim = v[5],
                           .context = v[6]};
    *seed = n == 8 ? (unsigned long long)v[7] : 1;
    return 0;
}

static void usage(FILE *f, const char *prog) {
    fprintf(f,
            "usage: %s IN.gguf OUT.gguf DTYPE [FALLBACK]\n"
            "       %s --new VOCAB,DIM,HEADS,KV_HEADS,LAYERS,FF,CONTEXT[,SEED] OUT.gguf DTYPE "
            "[FALLBACK]\n"
            "       %s --help\n\n"
            "Rewrites a GGUF Llama model with its 2-D weights in DTYPE (norms stay as they\n"
            "are), or writes a new random-initialised one. FALLBACK is the dtype of a weight\n"
            "whose rows the block of DTYPE does not divide; without it such a weight is an\n"
            "error. Dtypes:",
            prog, prog, prog);
    for (int d = 0; d < FC_DTYPE_COUNT; d++)
        if (fc_dtype_is_float((fc_dtype)d) || fc_dtype_is_block((fc_dtype)d))
            fprintf(f, " %s", fc_dtype_name((fc_dtype)d));
    fprintf(f, "\n");
}

/* name -> *dt; false after naming the bad dtype and the valid ones */
static bool dtype_arg(const char *prog, const char *what, const char *name, fc_dtype *dt) {
    if (fc_dtype_from_name(name, dt) == FC_OK && (fc_dtype_is_float(*dt) || fc_dtype_is_block(*dt)))
        return true;
    fprintf(stderr, "%s: %s: unknown dtype '%s'; valid:", prog, what, name);
    for (int d = 0; d < FC_DTYPE_COUNT; d++)
        if (fc_dtype_is_float((fc_dtype)d) || fc_dtype_is_block((fc_dtype)d))
            fprintf(stderr, " %s", fc_dtype_name((fc_dtype)d));
    fprintf(stderr, "\n");
    return false;
}

int main(int argc, char **argv) {
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout, argv[0]);
        return 0;
    }
    if (argc != 4 && argc != 5) {
        usage(stderr, argv[0]);
        return 2;
    }
    bool fresh = strcmp(argv[1], "--new") == 0;
    if (!fresh && argv[1][0] == '-' && argv[1][1] == '-') {
        fprintf(stderr, "%s: unknown option %s (--help)\n", argv[0], argv[1]);
        return 2;
    }
    const char *src = fresh ? NULL : argv[1], *spec = fresh ? argv[2] : NULL;
    if (fresh && argc != 5) {
        fprintf(stderr, "%s: --new takes CONFIG OUT.gguf DTYPE\n", argv[0]);
        return 2;
    }
    const char *out = fresh ? argv[3] : argv[2], *dt = fresh ? argv[4] : argv[3];
    const char *fb = !fresh && argc == 5 ? argv[4] : NULL;
    fc_llama_save_opts o = fc_llama_save_opts_default();
    if (!dtype_arg(argv[0], "DTYPE", dt, &o.dtype) ||
        (fb && !dtype_arg(argv[0], "FALLBACK", fb, &o.fallback)))
        return 2;
    fc_llama_config cfg;
    unsigned long long seed = 1;
    if (fresh && parse_config(spec, &cfg, &seed)) {
        fprintf(stderr, "%s: --new wants VOCAB,DIM,HEADS,KV_HEADS,LAYERS,FF,CONTEXT[,SEED]\n",
                argv[0]);
        return 2;
    }
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.seed = seed});
    fc_llama *m = NULL;
    if (!ctx) return 1;
    fc_status st = fresh ? fc_llama_new(ctx, &cfg, &m) : fc_llama_load(ctx, src, NULL, &m);
    if (!st) st = fc_llama_save(ctx, m, out, &o);
    if (st) fprintf(stderr, "%s: %s\n", argv[0], fc_ctx_error(ctx));
    fc_llama_free(m);
    fc_ctx_free(ctx);
    return st ? 1 : 0;
}
