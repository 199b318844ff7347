/* SPDX-License-Identifier: MIT */
/* llama/arch.c - the Llama-family architectures as one table of
 * differences over the one block of forward.c. Everything an architecture
 * changes is a column here; the loaders (model.c for GGUF, hf.c for
 * config.json) and the writer (save.c) read the row, the forward reads
 * what the row put in the config (rope layout, window) and the layer's
 * tensors (biases present or not).
 *
 *   llama:   RMSNorm, rope, GQA attention, SwiGLU; GGUF Q/K rows permuted
 *            by llama.cpp's converter for adjacent-pair rope.
 *   qwen2:   the same with biases on q, k and v; llama.cpp keeps the
 *            checkpoint's rows and uses rotate-half rope (its NEOX type).
 *   mistral: the same as llama with sliding-window attention;
 *            llama.cpp's converter writes it as "llama". */
#include <string.h>

#include "llama/llama_internal.h"

static const llama_arch ARCHS[FC_LLAMA_ARCH_COUNT] = {
    [FC_LLAMA_ARCH_LLAMA] = {.id = FC_LLAMA_ARCH_LLAMA,
                             .gguf = "llama",
                             .gguf_save = "llama",
                             .hf = "llama",
                             .gguf_rope = FC_ROPE_NORM},
    [FC_LLAMA_ARCH_QWEN2] = {.id = FC_LLAMA_ARCH_QWEN2,
                             .gguf = "qwen2",
                             .gguf_save = "qwen2",
                             .hf = "qwen2",
                             .gguf_rope = FC_ROPE_NEOX,
                             .qkv_bias = true},
    [FC_LLAMA_ARCH_MISTRAL] = {.id = FC_LLAMA_ARCH_MISTRAL,
                               .gguf = NULL,
                               .gguf_save = "llama",
                               .hf = "mistral",
                               .gguf_rope = FC_ROPE_NORM,
                               .window = true},
};

const llama_arch *fc__llama_arch(fc_llama_arch id) {
    return (unsigned)id < FC_LLAMA_ARCH_COUNT ? &ARCHS[id] : NULL;
}

const llama_arch *fc__llama_arch_gguf(const char *s, size_t n) {
    for (int i = 0; i < FC_LLAMA_ARCH_COUNT; i++)
        if (ARCHS[i].gguf && strlen(ARCHS[i].gguf) == n && memcmp(ARCHS[i].gguf, s, n) == 0)
            return &ARCHS[i];
    return NULL;
}

const llama_arch *fc__llama_arch_hf(const char *s) {
    for (int i = 0; s && i < FC_LLAMA_ARCH_COUNT; i++)
        if (strcmp(ARCHS[i].hf, s) == 0) return &ARCHS[i];
    return NULL;
}

const char *fc__llama_arch_list(bool hf) { return hf ? "llama, qwen2, mistral" : "llama, qwen2"; }
