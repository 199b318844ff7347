/* llama/llama_internal.h - the model's layout, shared by the files of
 * models/llama (loader, forward, cache, generation, writer). Not installed.
 *
 * The model owns one reference to every tensor of its file (or of its
 * random init), in the file's order; the per-layer pointers below borrow
 * from that table. */
#ifndef FUCINA_MODELS_LLAMA_INTERNAL_H
#define FUCINA_MODELS_LLAMA_INTERNAL_H

#include "fucina/llama.h"

typedef struct llama_layer {
    fc_tensor *attn_norm, *wq, *wk, *wv,
        *wo; /* norm [D]; wq [H*hd, D]; wk, wv [Hkv*hd, D]; wo [D, H*hd] */
    fc_tensor *ffn_norm, *w_gate, *w_up, *w_down; /* gate, up [F, D]; down [D, F] */
} llama_layer;

struct fc_llama {
    fc_ctx *ctx;
    fc_llama_config cfg;
    int64_t head_dim;
    fc_gguf_file *file; /* NULL for fc_llama_new */
    int64_t n_tensors;
    char **names;                            /* n_tensors NUL-terminated copies */
    fc_tensor **tensors;                     /* n_tensors owned references */
    fc_tensor *tok_embd, *out_norm, *output; /* output == tok_embd when tied */
    llama_layer *layers;                     /* cfg.n_layers */
};

struct fc_llama_cache {
    fc_llama *model;
    int64_t batch, max_len, len;
    fc_tensor **k, **v; /* per layer [B, Hkv, max_len, hd] f32 */
};

/* Checks ids (any integer dtype, [B, T] or [T]) against the vocabulary and
 * reads them as i64 into a new tensor [B, T]. NULL with the error recorded. */
fc_tensor *fc__llama_ids(fc_ctx *ctx, const fc_llama *m, fc_tensor *ids, const char *op);
/* The forward over positions pos0.. with an optional cache (NULL: none). */
fc_tensor *fc__llama_run(fc_ctx *ctx, fc_llama *m, fc_tensor *ids, fc_llama_cache *cache,
                         const char *op);

#endif
