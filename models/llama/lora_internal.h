/* SPDX-License-Identifier: MIT */
/* llama/lora_internal.h - the adapter's layout, shared by lora.c (making,
 * the forward term, accessors), lora_io.c (safetensors save / load, the
 * merged GGUF) and forward.c (the hook). Not installed.
 *
 * The adapter owns one reference to each of its tensors, listed in
 * fc_lora_params' order (layer-major, targets in the enum's order, A then
 * B); a and b index the same tensors by (layer, target) for the forward.
 * q_proj and k_proj lora_B rows are held in the model's (GGUF) row order,
 * so the forward and the merge add them to the weights as they are; only
 * the file holds the Hugging Face order. */
#ifndef FUCINA_MODELS_LLAMA_LORA_INTERNAL_H
#define FUCINA_MODELS_LLAMA_LORA_INTERNAL_H

#include "fucina/lora.h"
#include "llama/llama_internal.h"

/* The projections by index (bit i of fc_lora_target). */
enum lora_slot { LORA_Q, LORA_K, LORA_V, LORA_O, LORA_GATE, LORA_UP, LORA_DOWN, LORA_SLOT_COUNT };

struct fc_lora {
    fc_ctx *ctx;
    fc_llama *model; /* NULL once the model was freed first */
    fc_lora_config cfg;
    double scale;                /* alpha / rank */
    int64_t n_layers;            /* the model's, kept for a model freed first */
    int64_t n_heads, n_kv_heads; /* for the q/k row order */
    /* the model's q/k rows are llama.cpp's permutation of Hugging Face's
     * (adjacent-pair rope, FC_ROPE_NORM), so PEFT's lora_B rows are
     * permuted on reading and writing; false for a rotate-half model (a
     * Hugging Face checkpoint, GGUF qwen2), whose rows are PEFT's own */
    bool permute_qk;
    bool training;
    int64_t n_params;
    fc_tensor **params; /* n_params owned references */
    char **names;       /* n_params PEFT names */
    fc_tensor **a, **b; /* [n_layers * LORA_SLOT_COUNT], borrowed from params; NULL: untargeted */
};

/* The base weight of slot s of layer L (never NULL for a bound model). */
fc_tensor *fc__lora_weight(const llama_layer *L, int slot);
/* PEFT's module path of slot s: "self_attn.q_proj", ..., "mlp.down_proj";
 * and its short name "q_proj", .... */
const char *fc__lora_module(int slot);
const char *fc__lora_short(int slot);

/* Checks cfg against m (the rules of fc_lora_new; op names the caller) and
 * makes an adapter with empty tensor slots, not attached. */
fc_status fc__lora_alloc(fc_ctx *ctx, fc_llama *m, const fc_lora_config *cfg, const char *op,
                         fc_lora **out);
/* Stores t (a new reference, stolen; f32 [rank, in] for A, [out, rank] for
 * B, in the model's row order) as A or B of (layer, slot). */
fc_status fc__lora_set(fc_lora *l, int64_t layer, int slot, bool is_b, fc_tensor *t);
/* Marks every tensor as requiring grad and attaches l to its model. */
fc_status fc__lora_attach(fc_lora *l);
/* Frees an adapter that was never attached (or is detached). */
void fc__lora_destroy(fc_lora *l);
/* The model is going away first: the adapter forgets it. */
void fc__lora_orphan(fc_lora *l);

/* y + scale * (dropout(x) A^T) B^T for the projection (layer, slot) when
 * the adapter targets it, else y itself. Scope-registered like an op's
 * result; NULL propagates. */
fc_tensor *fc__lora_add(fc_ctx *ctx, const fc_lora *l, int64_t layer, int slot, fc_tensor *x,
                        fc_tensor *y);

/* The rows of a q_proj / k_proj B [heads * hd, rank] moved between the
 * model's order (GGUF, llama.cpp's converter permuted them) and Hugging
 * Face's: to_hf true gives HF from GGUF. A new contiguous f32 reference. */
fc_tensor *fc__lora_permute_rows(fc_ctx *ctx, fc_tensor *b, int64_t heads, bool to_hf);

#endif
