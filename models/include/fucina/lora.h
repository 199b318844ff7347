/* SPDX-License-Identifier: MIT */
/* fucina/lora.h - LoRA adapters on a Llama model (fucina_models).
 *
 * An adapter adds a trained low-rank term to chosen projections of every
 * block of a frozen base model:
 *
 *     y = x W^T + (alpha / rank) * (dropout(x) A^T) B^T
 *
 * with A [rank, in] and B [out, rank] f32 tensors that require grad, and
 * W the base weight as it is stored. When the base weights are
 * block-quantized (a q4_k or q8_0 GGUF loaded without `trainable`), this
 * is QLoRA: the products read W quantized, the gradient reaches x through
 * the quantized product, and no f32 copy of a base weight is made in the
 * forward or the backward pass.
 *
 * Initialisation follows PEFT's LoRA defaults: A uniform in
 * [-1/sqrt(in), 1/sqrt(in)] from the context RNG, B zero, so a new
 * adapter leaves the model's output unchanged.
 *
 * Attaching. fc_lora_new and fc_lora_load attach the adapter to the model:
 * from then on fc_llama_forward and fc_llama_forward_cached (and so
 * fc_llama_generate) compute the adapted projections, until fc_lora_free
 * detaches it. A model holds at most one adapter. The base model's tensors
 * are not changed; load the base without `trainable` so that only the
 * adapter's tensors require grad (fc_lora_params lists them for an
 * optimizer).
 *
 * Dropout applies to the adapter's input only, only while the adapter is
 * in training mode (the default after fc_lora_new; fc_lora_set_training),
 * and only when grad mode is on; it draws from the context RNG.
 *
 * Files. fc_lora_save writes the adapter as a safetensors file with the
 * tensor names and shapes PEFT uses for a Llama model:
 *
 *     base_model.model.model.layers.N.self_attn.{q,k,v,o}_proj.lora_{A,B}.weight
 *     base_model.model.model.layers.N.mlp.{gate,up,down}_proj.lora_{A,B}.weight
 *
 * (lora_A [rank, in], lora_B [out, rank], f32), in the row order of the
 * Hugging Face model: GGUF files from llama.cpp's converter hold the rows of
 * the query and key projections permuted within each head, so the q_proj
 * and k_proj lora_B rows are written un-permuted, and read back permuted.
 * A model whose rows are already Hugging Face's (rotate-half rope:
 * fc_llama_load_hf, GGUF qwen2) reads and writes them as they are.
 * The metadata holds PEFT's adapter_config values as strings: "format"
 * "pt", "peft_type" "LORA", "task_type" "CAUSAL_LM", "r", "lora_alpha",
 * "lora_dropout", "target_modules" (a JSON list such as
 * ["q_proj","v_proj"]), "bias" "none", and "adapter_config" (the whole
 * adapter_config.json text).
 *
 * fc_lora_merge_save writes the base model with every adapted weight
 * replaced by W + (alpha / rank) B A (computed from a transient f32 copy
 * of one weight at a time, then stored in the dtype opts gives: by default
 * each weight's own dtype, re-quantized), keeping every metadata key and
 * every other tensor of the base file; llama.cpp and fc_llama_load read
 * the result as a plain model.
 *
 * Errors are recorded in ctx as everywhere (fc_ctx_error names the values).
 */
#ifndef FUCINA_LORA_H
#define FUCINA_LORA_H

#include <stdbool.h>
#include <stdint.h>

#include "fucina.h"
#include "fucina/llama.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The projections an adapter can target (PEFT's module names). */
typedef enum fc_lora_target {
    FC_LORA_Q = 1u << 0,    /* self_attn.q_proj = blk.N.attn_q */
    FC_LORA_K = 1u << 1,    /* self_attn.k_proj = blk.N.attn_k */
    FC_LORA_V = 1u << 2,    /* self_attn.v_proj = blk.N.attn_v */
    FC_LORA_O = 1u << 3,    /* self_attn.o_proj = blk.N.attn_output */
    FC_LORA_GATE = 1u << 4, /* mlp.gate_proj = blk.N.ffn_gate */
    FC_LORA_UP = 1u << 5,   /* mlp.up_proj = blk.N.ffn_up */
    FC_LORA_DOWN = 1u << 6, /* mlp.down_proj = blk.N.ffn_down */
    FC_LORA_ATTN = 0x0f,    /* q, k, v, o */
    FC_LORA_MLP = 0x70,     /* gate, up, down */
    FC_LORA_ALL = 0x7f,
    FC_LORA_TARGET_COUNT = 7 /* single targets: the bits 0 .. 6 */
} fc_lora_target;

/* A LoRA adapter's shape: rank, alpha, dropout and the weights it targets. */
typedef struct fc_lora_config {
    int64_t rank;     /* >= 1, at most min(in, out) of every targeted weight */
    double alpha;     /* the scale is alpha / rank; finite, > 0 and <= FLT_MAX */
    double dropout;   /* probability on the adapter's input, in [0, 1) */
    unsigned targets; /* FC_LORA_* bits, at least one, no others */
} fc_lora_config;

/* A LoRA adapter over a model (fc_lora_new). */
typedef struct fc_lora fc_lora;

/* rank 8, alpha 16, dropout 0.05, targets FC_LORA_ALL. */
FC_API fc_lora_config fc_lora_config_default(void);

/* Makes an adapter for every block of m as cfg says and attaches it.
 * Errors: FC_ERR_NULL_ARG; FC_ERR_INVALID_ARG for a rank < 1 or larger than
 * a targeted weight's in or out size, alpha not finite, <= 0 or above
 * FLT_MAX (the scale is applied in f32), dropout
 * outside [0, 1) or NaN, target bits that are none or unknown, or a model
 * that already has an adapter (each message names the value); FC_ERR_FORMAT
 * for a model without a targeted tensor; FC_ERR_OOM. On failure *out is
 * NULL and the model is as it was. */
FC_API fc_status fc_lora_new(fc_ctx *ctx, fc_llama *m, const fc_lora_config *cfg, fc_lora **out);
/* Detaches the adapter from its model and releases its tensors (handles
 * the caller retained stay valid). NULL is a no-op. Free it before the
 * model; an adapter whose model was freed first still saves and frees, but
 * fc_lora_model gives NULL and fc_lora_merge_save FC_ERR_INVALID_ARG. */
FC_API void fc_lora_free(fc_lora *l);

/* The config (borrowed), the model it is attached to; NULL for NULL. */
FC_API const fc_lora_config *fc_lora_get_config(const fc_lora *l);
FC_API fc_llama *fc_lora_model(const fc_lora *l);
/* Training mode turns dropout on (see above); NULL is a no-op. */
FC_API void fc_lora_set_training(fc_lora *l, bool on);
/* Writes up to cap borrowed handles of the adapter's tensors into out (NULL
 * allowed with cap 0) and returns how many there are: for each layer, for
 * each target in the order of the enum, A then B. */
FC_API int64_t fc_lora_params(const fc_lora *l, fc_tensor **out, int64_t cap);
/* The PEFT name of parameter i (as listed by fc_lora_params; borrowed),
 * NULL out of range. */
FC_API const char *fc_lora_param_name(const fc_lora *l, int64_t i);

/* Writes the adapter to path as safetensors (above), atomically. Errors:
 * FC_ERR_NULL_ARG; the writer's (FC_ERR_IO, ...); FC_ERR_OOM. */
FC_API fc_status fc_lora_save(fc_ctx *ctx, const fc_lora *l, const char *path);
/* Reads an adapter file written by fc_lora_save or by PEFT (its rank,
 * alpha, dropout and targets from the metadata when present, else rank
 * from the tensors, alpha = rank, dropout 0, targets from the names) and
 * attaches it to m, in training mode off. Errors: FC_ERR_NULL_ARG; the
 * reader's (FC_ERR_IO, FC_ERR_FORMAT, ...); FC_ERR_FORMAT for a tensor
 * name that is not a LoRA tensor of a layer of m, a layer or target with
 * only one of A and B, metadata that contradicts the tensors, or a model
 * without a targeted tensor; FC_ERR_SHAPE_MISMATCH for a tensor whose
 * shape does not fit the base weight (the message names the tensor and
 * both shapes); FC_ERR_DTYPE for a tensor that is not f32, f16 or bf16;
 * FC_ERR_INVALID_ARG as fc_lora_new (a model that already has an adapter,
 * values out of range); FC_ERR_OOM. */
FC_API fc_status fc_lora_load(fc_ctx *ctx, fc_llama *m, const char *path, fc_lora **out);

/* Writes the adapter's model as GGUF with the adapter merged into its
 * weights (above), atomically, as fc_llama_save does with opts (NULL: each
 * weight keeps its dtype). The model and the adapter are not changed.
 * Errors: FC_ERR_NULL_ARG; FC_ERR_INVALID_ARG when the model was freed;
 * those of fc_llama_save. */
FC_API fc_status fc_lora_merge_save(fc_ctx *ctx, const fc_lora *l, const char *path,
                                    const fc_llama_save_opts *opts);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_LORA_H */
