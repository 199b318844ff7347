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
 * second for a model fucina made, which llama.cpp must load. */
#include <stdio.h>

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

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr,
                "usage: %s IN.gguf OUT.gguf DTYPE [FALLBACK]\n"
                "       %s --new VOCAB,DIM,HEADS,KV_HEADS,LAYERS,FF,CONTEXT[,SEED] OUT.gguf DTYPE "
                "[FALLBACK]\n",
                argv[0], argv[0]);
        return 2;
    }
    bool fresh = argv[1][0] == '-' && argv[1][1] == '-';
    const char *src = fresh ? NULL : argv[1], *spec = fresh ? argv[2] : NULL;
    if (fresh && argc != 5) {
        fprintf(stderr, "%s: --new takes CONFIG OUT.gguf DTYPE\n", argv[0]);
        return 2;
    }
    const char *out = fresh ? argv[3] : argv[2], *dt = fresh ? argv[4] : argv[3];
    const char *fb = !fresh && argc == 5 ? argv[4] : NULL;
    fc_llama_save_opts o = fc_llama_save_opts_default();
    if (fc_dtype_from_name(dt, &o.dtype) != FC_OK ||
        (fb && fc_dtype_from_name(fb, &o.fallback) != FC_OK)) {
        fprintf(stderr, "%s: unknown dtype\n", argv[0]);
        return 2;
    }
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
