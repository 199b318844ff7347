/* llama_convert - rewrites a GGUF Llama model with its 2-D weights in
 * another dtype, keeping every metadata key (fucina/llama.h, fc_llama_save).
 *
 *   llama_convert IN.gguf OUT.gguf DTYPE [FALLBACK]
 *
 * DTYPE and FALLBACK are fucina dtype names (f32, f16, bf16, q8_0, q4_k,
 * ...); FALLBACK is used for weights whose rows the block of DTYPE does not
 * divide. Norms stay as they are. scripts/gen_llama_fixture.py uses it to
 * make the quantized fixtures. */
#include <stdio.h>

#include "fucina/llama.h"

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s IN.gguf OUT.gguf DTYPE [FALLBACK]\n", argv[0]);
        return 2;
    }
    fc_llama_save_opts o = fc_llama_save_opts_default();
    if (fc_dtype_from_name(argv[3], &o.dtype) != FC_OK ||
        (argc == 5 && fc_dtype_from_name(argv[4], &o.fallback) != FC_OK)) {
        fprintf(stderr, "%s: unknown dtype\n", argv[0]);
        return 2;
    }
    fc_ctx *ctx = fc_ctx_new(NULL);
    fc_llama *m = NULL;
    if (!ctx) return 1;
    fc_status st = fc_llama_load(ctx, argv[1], NULL, &m);
    if (!st) st = fc_llama_save(ctx, m, argv[2], &o);
    if (st) fprintf(stderr, "%s: %s\n", argv[0], fc_ctx_error(ctx));
    fc_llama_free(m);
    fc_ctx_free(ctx);
    return st ? 1 : 0;
}
