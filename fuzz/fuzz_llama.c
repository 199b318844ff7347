/* SPDX-License-Identifier: MIT */
/* fuzz_llama.c - libFuzzer target for the Llama model loader
 * (fucina/llama.h). Any input must either be refused with a status or
 * give a model that runs: the target opens the bytes as GGUF from memory,
 * builds the model inside a scope that it then closes (the model must
 * outlive it), and on success runs a forward of two tokens, samples from
 * its last logits at temperature 1 with top-p 0.9 (any logits, infinite
 * ones included, must give a token or a status), and two sampled steps
 * through the cache, whose status it also only checks. Seeds: the
 * fixtures, and fuzz/gen_llama_seeds.c's hostile keys (huge and bool
 * block counts, tiny rope factors, ...). Sizes
 * are bounded by the input (every tensor the keys imply must be in it), so
 * a run stays short. Built by fuzz/run.sh with the library and the models'
 * sources. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/llama.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    fc_gguf_file *f = NULL;
    if (ctx && fc_gguf_open_memory(size ? copy : NULL, size, NULL, &f) == FC_OK) {
        fc_llama *m = NULL;
        fc_scope_begin(ctx);
        fc_status st = fc_llama_from_gguf(ctx, f, NULL, &m);
        fc_scope_end(ctx);
        if (st == FC_OK) {
            const fc_llama_config *c = fc_llama_get_config(m);
            if (c->vocab < 1 || c->context < 1) abort();
            int32_t ids[2] = {0, (int32_t)(c->vocab - 1)}, out[2];
            fc_tensor *t = fc_tensor_from_data(ctx, FC_I32, (int64_t[]){1, 2}, 2, ids);
            fc_tensor *y = fc_llama_forward(ctx, m, t);
            if (y && fc_tensor_dim(y, 2) != c->vocab) abort();
            const float *lg = y ? fc_tensor_data(y) : NULL;
            fc_llama_sample_opts so = {.temperature = 1.0, .top_p = 0.9, .seed = 1};
            uint64_t rng = so.seed;
            int32_t tok = -1;
            if (lg && fc_llama_sample(lg + c->vocab, c->vocab, &so, &rng, &tok) == FC_OK &&
                (tok < 0 || tok >= c->vocab))
                abort();
            fc_release(y);
            fc_release(t);
            fc_ctx_clear_error(ctx);
            (void)fc_llama_generate(ctx, m, ids, 1, 2, -1, &so, out, NULL);
            fc_llama_free(m);
        }
    }
    fc_ctx_free(ctx);
    free(copy);
    return 0;
}
