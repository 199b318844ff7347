/* SPDX-License-Identifier: MIT */
/* fucina/llama.h - Llama-family models (llama, qwen2, mistral) from GGUF
 * files or Hugging Face checkpoints (fucina_models).
 *
 * A model is built from a GGUF file whose general.architecture is "llama"
 * or "qwen2": its sizes come from the <arch>.* keys, its weights from the
 * standard tensor names (token_embd, blk.N.attn_norm / attn_q / attn_k /
 * attn_v / attn_output / ffn_norm / ffn_gate / ffn_up / ffn_down,
 * blk.N.attn_q / attn_k / attn_v biases for qwen2, output_norm, and
 * output, which when absent is tied to token_embd, and rope_freqs for
 * Llama 3.1's rope scaling); or from a Hugging Face directory
 * (fc_llama_load_hf), whose tensors get the same names. The architectures
 * differ only as the table of models/llama/arch.c says: biases, the rope
 * pairing, the attention window.
 *
 * Weights. Block-quantized tensors stay quantized and memory-mapped (the
 * products read them quantized, rounding the activations to 8-bit blocks
 * as ggml does: blocks of 32 against q8_0, ggml's q8_K against the
 * k-quants; no f32 copy of such a weight is ever made); f32, f16 and bf16 tensors keep their dtype
 * (f16 and bf16 weights are widened to f32 for each product, and freed after it). With
 * fc_llama_load_opts.trainable, f32 tensors are copied out of the mapping
 * into writable tensors that require grad (the parameters of a trainer);
 * every other tensor stays frozen.
 *
 * Conventions (those llama.cpp computes for "llama"):
 *   - ggml lists dims innermost first, so a weight PyTorch holds as
 *     [out, in] is stored as ne {in, out} and read here as [out, in];
 *   - rotary embedding rotates adjacent pairs (2i, 2i+1) of each head's
 *     first llama.rope.dimension_count dims, angle pos * scale *
 *     base^(-2i / n_rot) (llama.cpp's convert script permutes the Q/K rows
 *     of Hugging Face checkpoints so that this matches their rotate-half);
 *   - query head h reads kv head h / (heads / kv_heads).
 *
 * Errors. Functions returning fc_status record the same status and a
 * message in ctx (fc_ctx_error): the message names the key or tensor and
 * the values that disagree ("llama: llama.attention.head_count_kv = 3 does
 * not divide llama.attention.head_count = 4"). Tensor-producing functions
 * return NULL with the error recorded, and propagate NULL inputs.
 *
 * Tokenizer seam: fc_llama_gguf gives the open GGUF handle the model was
 * read from, so a tokenizer can be read from the same file (tokenizer.*).
 *
 * Threads: a model and its caches belong to the context they were made
 * with, and are used from one thread at a time, like that context.
 */
#ifndef FUCINA_LLAMA_H
#define FUCINA_LLAMA_H

#include <stdbool.h>
#include <stdint.h>

#include "fucina.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The Llama-family architectures: one block implementation, and a table
 * of what differs (models/llama/arch.c). */
typedef enum fc_llama_arch {
    FC_LLAMA_ARCH_LLAMA = 0, /* GGUF "llama", config.json model_type "llama" */
    FC_LLAMA_ARCH_QWEN2,     /* q/k/v biases; GGUF "qwen2", config.json "qwen2" */
    FC_LLAMA_ARCH_MISTRAL,   /* config.json "mistral": sliding-window attention
                              * (llama.cpp writes these as GGUF "llama") */
    FC_LLAMA_ARCH_COUNT
} fc_llama_arch;

/* The sizes of a model (from the file's llama.* keys, or config.json, or
 * given to fc_llama_new). */
typedef struct fc_llama_config {
    int64_t n_layers;   /* llama.block_count */
    int64_t dim;        /* llama.embedding_length */
    int64_t n_heads;    /* llama.attention.head_count */
    int64_t n_kv_heads; /* llama.attention.head_count_kv (absent: n_heads) */
    int64_t ff_dim;     /* llama.feed_forward_length */
    int64_t vocab;      /* rows of token_embd (or llama.vocab_size) */
    int64_t context;    /* llama.context_length: the longest sequence */
    int64_t rope_dims;  /* llama.rope.dimension_count (absent: head_dim) */
    double rope_base;   /* llama.rope.freq_base (absent: 10000) */
    double rope_scale;  /* 1 / llama.rope.scaling.factor when linear (absent: 1) */
    double rms_eps;     /* llama.attention.layer_norm_rms_epsilon (absent: 1e-5) */
    bool tied_output;   /* no "output" tensor: logits use token_embd */
    /* The fields below are zero for a GGUF "llama" model (and the
     * defaults of fc_llama_new). */
    fc_llama_arch arch; /* general.architecture / config.json model_type */
    /* How rope pairs a head's dims: FC_ROPE_NORM (adjacent pairs) for
     * GGUF "llama", whose Q/K rows llama.cpp's converter permuted;
     * FC_ROPE_NEOX (rotate-half, (i, i + n_rot/2)) for Hugging Face
     * checkpoints, read unpermuted, and GGUF "qwen2". */
    fc_rope_mode rope_mode;
    /* > 0: the query at position p sees the keys at p - sliding_window + 1
     * .. p only (Mistral); 0: every earlier key. */
    int64_t sliding_window;
    /* Per-frequency rope factors (tensor "rope_freqs.weight", f32
     * [rope_dims / 2]): pair i turns at angle pos * rope_scale *
     * rope_base^(-2i / rope_dims) / factor[i], llama.cpp's form of Llama
     * 3.1's "llama3" rope scaling. Set by the loaders; fc_llama_new
     * refuses true. */
    bool rope_freqs;
} fc_llama_config;

/* A Llama-architecture model: its config, its weights and their names. */
typedef struct fc_llama fc_llama;

/* Options of fc_llama_load; zero-initialised is the defaults. */
typedef struct fc_llama_load_opts {
    unsigned io_flags; /* FC_IO_NO_MMAP to read the file instead of mapping it */
    bool trainable;    /* f32 tensors become writable parameters requiring grad */
    /* NULL: fc_default_allocator(). fc_llama_load_hf reads config.json,
     * the shard index and (with FC_IO_NO_MMAP) the shards through it. */
    const fc_allocator *allocator;
} fc_llama_load_opts;

/* Reads path (opts NULL allowed: mapped, frozen). On success *out is a new
 * model to be freed with fc_llama_free; on failure *out is NULL, nothing is
 * leaked and the error is in ctx. Errors: FC_ERR_NULL_ARG; the GGUF
 * reader's (FC_ERR_IO, FC_ERR_FORMAT, ...); FC_ERR_FORMAT for a missing
 * key, a size key that is not
 * of a GGUF integer type (bool is not one) or is < 1 or above INT64_MAX,
 * a float key (llama.rope.freq_base, llama.attention.layer_norm_rms_epsilon,
 * llama.rope.scaling.factor) that is not of a number type or not a finite
 * normal f32 > 0 (in [FLT_MIN, FLT_MAX]: the range that keeps every rope
 * angle and norm finite), each message naming the key and its type or
 * value; a missing tensor, sizes that do not divide (heads into dim, kv
 * heads into heads), an odd or too large rope dimension count, a block
 * count above the file's tensor count (checked before anything is sized
 * by it), and
 * for variants this model does not compute (<arch>.expert_count > 0, key
 * or value lengths other than the head size); FC_ERR_UNSUPPORTED for an
 * architecture other than "llama" or "qwen2" and a rope scaling type other
 * than none or linear (yarn, ...: Llama 3.1's is the rope_freqs.weight
 * tensor, which must be f32 [rope_dims / 2] of finite normal values);
 * FC_ERR_SHAPE_MISMATCH for a
 * tensor whose shape is not what the keys give (the message names the
 * tensor, both shapes); FC_ERR_DTYPE for a weight whose dtype a product
 * cannot take; FC_ERR_OOM. */
FC_API fc_status fc_llama_load(fc_ctx *ctx, const char *path, const fc_llama_load_opts *opts,
                               fc_llama **out);
/* The same over a GGUF handle the caller opened (fc_gguf_open_memory, say).
 * Steals f: it is closed with the model, or before returning on failure
 * (NULL f is FC_ERR_NULL_ARG). opts->io_flags is not used. */
FC_API fc_status fc_llama_from_gguf(fc_ctx *ctx, fc_gguf_file *f, const fc_llama_load_opts *opts,
                                    fc_llama **out);
/* Reads a Hugging Face checkpoint directory: dir/config.json and the
 * weights, dir/model.safetensors or, when dir/model.safetensors.index.json
 * exists, the shards its "weight_map" names (each opened once). The
 * tokenizer (dir/tokenizer.json) is not read here: it is models/tokenizer's
 * to load, beside this call.
 *
 * config.json: model_type "llama", "qwen2" or "mistral"; hidden_size,
 * num_hidden_layers, num_attention_heads, intermediate_size, vocab_size,
 * max_position_embeddings (required), num_key_value_heads, rms_norm_eps
 * (absent: 1e-6), rope_theta (10000), tie_word_embeddings (false),
 * rope_scaling (null, or rope_type / type "default", "linear" with factor,
 * "llama3" with factor, low_freq_factor, high_freq_factor and
 * original_max_position_embeddings), sliding_window (mistral: null or the
 * window), head_dim (when present, hidden_size / num_attention_heads),
 * hidden_act ("silu"). Keys that do not change the forward (token ids,
 * dtypes, dropout, versions) are ignored; any other key is refused, so a
 * variant is never run as if it were the plain model.
 *
 * Weights: the Hugging Face names (model.embed_tokens.weight,
 * model.layers.N.self_attn.q_proj.weight / .bias, ..., lm_head.weight)
 * become the GGUF names fc_llama_tensor knows (token_embd.weight,
 * blk.N.attn_q.weight / .bias, ..., output.weight), in the files' order;
 * a "llama3" rope scaling adds rope_freqs.weight (the factors, computed
 * here). Q and K keep their rows as the checkpoint has them: the model
 * uses rotate-half rope (rope_mode FC_ROPE_NEOX), which is what the
 * checkpoint was trained with, so f32, f16 and bf16 weights stay mapped,
 * zero-copy (opts->trainable copies the f32 ones, as fc_llama_load does).
 * rotary_emb.inv_freq buffers of old checkpoints are skipped.
 *
 * Errors (each message names the key, tensor or file): FC_ERR_NULL_ARG;
 * FC_ERR_IO for a file that cannot be read (config.json, the weights);
 * the JSON and safetensors readers' (FC_ERR_FORMAT, FC_ERR_DATA_LENGTH,
 * ...); FC_ERR_UNSUPPORTED for a model_type, rope scaling type (yarn,
 * dynamic, longrope, ...), hidden_act or key this model does not compute;
 * FC_ERR_FORMAT for a missing or mistyped key (sizes must be integers >= 1,
 * floats finite normal f32 > 0), sizes that do not divide (heads into
 * hidden_size, kv heads into heads), a tensor no file has, a tensor of an
 * unknown name, a weight_map entry whose shard lacks it, and shards that
 * overlap (a tensor in two of them); FC_ERR_SHAPE_MISMATCH for a tensor
 * whose shape is not what config.json gives, vocab_size included;
 * FC_ERR_DTYPE as fc_llama_load; FC_ERR_OOM. On failure *out is NULL and
 * nothing is leaked. */
FC_API fc_status fc_llama_load_hf(fc_ctx *ctx, const char *dir, const fc_llama_load_opts *opts,
                                  fc_llama **out);
/* Random-initialised f32 model (normal weights of std 0.02, norm weights 1)
 * requiring grad, from the ctx RNG, for training from scratch. cfg->vocab,
 * dim, n_heads, n_layers, ff_dim and context must be >= 1, with the
 * divisions above; rope_dims 0 means head_dim, else it must be even and
 * in 2..head_dim; rope_base / rms_eps / rope_scale 0 mean the defaults,
 * else rope_base, rms_eps and 1 / rope_scale (the rope scaling factor)
 * must be finite normal f32 values > 0, as the file's keys
 * (FC_ERR_INVALID_ARG naming the field and value). FC_ERR_OVERFLOW (naming
 * the sizes) when the tensor count 9 * n_layers + 3, a layer's elements,
 * the embeddings' or the whole model's bytes pass INT64_MAX, checked
 * before anything is allocated; a single weight of more elements than a
 * tensor may hold is the tensor constructors' FC_ERR_OVERFLOW; FC_ERR_OOM.
 * cfg->arch (a valid fc_llama_arch; qwen2 adds zero q/k/v biases, 12
 * tensors a layer), rope_mode (a valid fc_rope_mode) and sliding_window
 * (>= 0) are taken as given; rope_freqs must be false (FC_ERR_INVALID_ARG
 * otherwise). The model has no file (fc_llama_gguf is NULL); fc_llama_save
 * writes its config as <arch>.* keys. */
FC_API fc_status fc_llama_new(fc_ctx *ctx, const fc_llama_config *cfg, fc_llama **out);
/* Frees the model and releases its tensors (tensors the caller retained
 * stay valid, and keep the file mapping alive). NULL is a harmless no-op.
 *
 * Scopes: a model (like a cache, below, and an adapter, fucina/lora.h)
 * owns its tensors alone: made inside fc_scope_begin / fc_scope_end, it
 * takes them out of the scope (fc_keep), so it outlives the scope, and
 * only its own free releases them. */
FC_API void fc_llama_free(fc_llama *m);

/* The config (borrowed, valid while m lives); NULL for NULL. */
FC_API const fc_llama_config *fc_llama_get_config(const fc_llama *m);
/* The GGUF handle the model was read from (borrowed; open while m lives),
 * or NULL for a model made by fc_llama_new. */
FC_API const fc_gguf_file *fc_llama_gguf(const fc_llama *m);
/* Number of tensors the model holds (every tensor of its file, in the
 * file's order), and tensor i's name and tensor (borrowed; NULL out of
 * range). */
FC_API int64_t fc_llama_tensor_count(const fc_llama *m);
FC_API const char *fc_llama_tensor_name(const fc_llama *m, int64_t i);
FC_API fc_tensor *fc_llama_tensor_at(const fc_llama *m, int64_t i);
/* The tensor of that GGUF name (borrowed), or NULL. */
FC_API fc_tensor *fc_llama_tensor(const fc_llama *m, const char *name);
/* Writes up to cap borrowed handles of the tensors that require grad into
 * out (NULL allowed with cap 0) and returns how many there are. */
FC_API int64_t fc_llama_params(const fc_llama *m, fc_tensor **out, int64_t cap);

/* ---- forward ---------------------------------------------------------------------
 * ids (NULL: FC_ERR_NULL_ARG, or the earlier error it propagates):
 * [B, T] (or [T], read as B = 1) of an integer dtype, each in
 * [0, vocab) (FC_ERR_INDEX naming the first bad id and its position);
 * T <= context (FC_ERR_INVALID_ARG). Returns logits [B, T, vocab] f32, a
 * new reference; recorded on the tape when a parameter requires grad and
 * grad mode is on, so fc_cross_entropy + fc_backward train the model. */
FC_API fc_tensor *fc_llama_forward(fc_ctx *ctx, fc_llama *m, fc_tensor *ids);

/* A key/value cache for incremental decoding: per layer, room for
 * max_len positions of B sequences. */
typedef struct fc_llama_cache fc_llama_cache;
/* batch >= 1, 1 <= max_len <= context (FC_ERR_INVALID_ARG); keys and
 * values too large for a tensor are FC_ERR_OVERFLOW. The cache belongs to
 * m and must be freed before it; it outlives any scope it is made in. */
FC_API fc_status fc_llama_cache_new(fc_ctx *ctx, fc_llama *m, int64_t batch, int64_t max_len,
                                    fc_llama_cache **out);
FC_API void fc_llama_cache_free(fc_llama_cache *c); /* NULL: no-op */
/* Positions held (0 for NULL) and forgetting them all. */
FC_API int64_t fc_llama_cache_len(const fc_llama_cache *c);
FC_API void fc_llama_cache_reset(fc_llama_cache *c);
/* Runs ids [B, T] at positions len .. len + T - 1 against the cached keys
 * and values, appends theirs, and returns logits [B, T, vocab] (new
 * reference). Never recorded on the tape. FC_ERR_SHAPE_MISMATCH when B is
 * not the cache's; FC_ERR_INVALID_ARG when len + T passes max_len (the
 * cache is then unchanged); FC_ERR_INDEX for an id outside the vocabulary. */
FC_API fc_tensor *fc_llama_forward_cached(fc_ctx *ctx, fc_llama *m, fc_llama_cache *c,
                                          fc_tensor *ids);

/* ---- sampling and generation ------------------------------------------------------ */
/* Options of fc_llama_sample and fc_llama_generate; zero-initialised is greedy. */
typedef struct fc_llama_sample_opts {
    double temperature; /* <= 0: greedy (argmax, the lowest id on ties) */
    int64_t top_k;      /* keep the k most likely (0: all) */
    double top_p;       /* then keep the smallest set whose probability (at temperature 1)
                         * reaches p (0 or >= 1: all); the temperature applies last */
    uint64_t seed;      /* the sampler's own stream: same seed, same tokens */
} fc_llama_sample_opts;

/* One token from logits[0..n) (opts NULL: greedy). *rng is the stream state
 * (start it at the seed; it advances by one draw per non-greedy call).
 * Infinite logits are taken as the softmax's limits, at every temperature
 * (an infinite one included, which is uniform over the rest): a -inf
 * logit has probability 0 and is never drawn; when some logits are +inf,
 * they share the whole probability evenly (one +inf logit is drawn every
 * time; top-k and top-p keep them first), as greedy picks the first.
 * FC_ERR_NULL_ARG; FC_ERR_INVALID_ARG for n < 1, top_k < 0, a NaN
 * temperature or top_p, or logits that are all -inf or hold a NaN. */
FC_API fc_status fc_llama_sample(const float *logits, int64_t n, const fc_llama_sample_opts *opts,
                                 uint64_t *rng, int32_t *token);
/* Runs the prompt (n_prompt >= 1 ids) through a fresh cache and samples
 * n_new tokens into out (each fed back); opts NULL: greedy. Stops early at
 * stop_token when stop_token >= 0 (it is written). Returns the number of
 * tokens written through *n_out (NULL allowed). FC_ERR_INVALID_ARG when
 * n_prompt + n_new passes the context ("prompt of ... tokens"), FC_ERR_INDEX
 * for an id outside the vocabulary. */
FC_API fc_status fc_llama_generate(fc_ctx *ctx, fc_llama *m, const int32_t *prompt,
                                   int64_t n_prompt, int64_t n_new, int32_t stop_token,
                                   const fc_llama_sample_opts *opts, int32_t *out, int64_t *n_out);

/* ---- writing back as GGUF ---------------------------------------------------------- */
/* Chooses the dtype of one tensor on saving (FC_DTYPE_COUNT: keep it). */
typedef fc_dtype (*fc_llama_dtype_fn)(const char *name, fc_tensor *t, void *user);

/* Options of fc_llama_save (start from fc_llama_save_opts_default). */
typedef struct fc_llama_save_opts {
    /* Dtype of every 2-D weight; FC_DTYPE_COUNT keeps each one's (start
     * from fc_llama_save_opts_default, not a zeroed struct). 1-D tensors
     * (the norms) stay as they are: llama.cpp expects f32 norms. */
    fc_dtype dtype;
    /* For a block dtype whose block does not divide a weight's rows: the
     * dtype used instead (FC_DTYPE_COUNT: such a weight is FC_ERR_INVALID_SHAPE). */
    fc_dtype fallback;
    fc_llama_dtype_fn pick; /* NULL allowed: overrides dtype per tensor */
    void *user;
    /* Extra metadata (NULL allowed with n_kvs 0), such as a tokenizer's
     * keys from fc_tokenizer_gguf_kvs: a key the model's metadata already
     * has takes the value given here, in its place; the others follow, in
     * this order. Borrowed for the call. */
    const fc_gguf_kv *kvs;
    int64_t n_kvs;
} fc_llama_save_opts;

/* Every tensor kept as it is. */
FC_API fc_llama_save_opts fc_llama_save_opts_default(void);

/* Writes the model to path atomically as GGUF v3: every metadata key of the
 * file it came from, unchanged, in the same order, or for a model from
 * fc_llama_new general.architecture, the llama.* keys (sizes as u32, or
 * u64 for one above UINT32_MAX, which llama.cpp cannot read; floats as
 * f32) and tokenizer.ggml.model "none"; except that when a tensor's dtype changes
 * (and for a model from fc_llama_new), general.file_type is set to
 * llama.cpp's value for the dtype most 2-D weights are written in (its
 * "_S" mix for a k-quant: 14 for q4_k), or dropped where llama.cpp has no
 * such value. opts->kvs replace or extend those keys (general.file_type
 * included; give a tokenizer's, and llama.cpp tokenizes with it); then
 * every tensor with its current
 * values (trained ones included) in the model's order, converted as opts
 * says (any dtype with a ggml type; a block dtype quantizes from a
 * transient f32 copy of that one tensor; the converted tensors are held
 * until the file is written).
 * A model without a file (fc_llama_new, fc_llama_load_hf) is written as
 * GGUF "llama" (llama and mistral) or "qwen2"; a rotate-half model written
 * as "llama" (a Hugging Face checkpoint) gets its attn_q / attn_k rows
 * permuted as llama.cpp's converter does, so that adjacent-pair rope over
 * the file computes what the checkpoint does (FC_ERR_UNSUPPORTED when
 * that cannot be: a block-quantized Q/K, partial rotary dims, or a
 * sliding window below the context, which GGUF "llama" does not carry).
 * opts NULL: as default. Errors: FC_ERR_INVALID_ARG for n_kvs < 0, or
 * kvs NULL with n_kvs > 0; FC_ERR_OVERFLOW for an n_kvs whose key table
 * would not fit in memory's address range; the writer's (FC_ERR_IO, FC_ERR_DTYPE for
 * a dtype without a ggml type, ...), FC_ERR_INVALID_SHAPE (above),
 * FC_ERR_NON_FINITE from quantizing NaN or inf, FC_ERR_OOM. */
FC_API fc_status fc_llama_save(fc_ctx *ctx, const fc_llama *m, const char *path,
                               const fc_llama_save_opts *opts);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_LLAMA_H */
