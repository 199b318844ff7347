/* SPDX-License-Identifier: MIT */
/* fuzz_llama_hf.c - libFuzzer target for the Hugging Face checkpoint
 * loader (fc_llama_load_hf). The input is config.json, and after its first
 * NUL byte (when there is one) model.safetensors.index.json; both are
 * written into a scratch directory that also holds the weights of two
 * fixtures (tests/data/hf: llama_tied's model.safetensors, llama3_sharded's
 * two shards), so the fuzzed text meets real tensors. Any input must be
 * refused with a status or give a model that runs: a forward of two
 * tokens and two greedy steps through the cache. Seeds: the fixtures'
 * configs, and the sharded one's config + NUL + index (fuzz/corpus/
 * llama_hf). Run from the repository root (fuzz/run.sh does). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fucina/llama.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char DIR_[256];

static void put(const char *name, const uint8_t *p, size_t n) {
    char path[320];
    snprintf(path, sizeof path, "%s/%s", DIR_, name);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(p, 1, n, f) != n) abort();
    fclose(f);
}

static void link_fixture(const char *fixture, const char *name) {
    char cwd[1024], target[1400], path[320];
    if (!getcwd(cwd, sizeof cwd)) abort();
    snprintf(target, sizeof target, "%s/tests/data/hf/%s/%s", cwd, fixture, name);
    snprintf(path, sizeof path, "%s/%s", DIR_, name);
    if (symlink(target, path) != 0) abort();
}

static void setup(void) {
    snprintf(DIR_, sizeof DIR_, "/tmp/fuzz_llama_hf_XXXXXX");
    if (!mkdtemp(DIR_)) abort();
    link_fixture("llama_tied", "model.safetensors");
    link_fixture("llama3_sharded", "model-00001-of-00002.safetensors");
    link_fixture("llama3_sharded", "model-00002-of-00002.safetensors");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!DIR_[0]) setup();
    const uint8_t *nul = memchr(data, 0, size);
    size_t n_cfg = nul ? (size_t)(nul - data) : size;
    put("config.json", data, n_cfg);
    char index[320];
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", DIR_);
    if (nul)
        put("model.safetensors.index.json", nul + 1, size - n_cfg - 1);
    else
        unlink(index);
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    fc_llama *m = NULL;
    if (ctx && fc_llama_load_hf(ctx, DIR_, NULL, &m) == FC_OK) {
        const fc_llama_config *c = fc_llama_get_config(m);
        if (c->vocab < 1 || c->context < 1) abort();
        int32_t ids[2] = {0, (int32_t)(c->vocab - 1)}, out[2];
        fc_tensor *t = fc_tensor_from_data(ctx, FC_I32, (int64_t[]){1, 2}, 2, ids);
        fc_tensor *y = fc_llama_forward(ctx, m, t);
        if (y && fc_tensor_dim(y, 2) != c->vocab) abort();
        fc_release(y);
        fc_release(t);
        fc_ctx_clear_error(ctx);
        (void)fc_llama_generate(ctx, m, ids, 1, 2, -1, NULL, out, NULL);
        fc_llama_free(m);
    }
    fc_ctx_free(ctx);
    return 0;
}
