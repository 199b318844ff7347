/* SPDX-License-Identifier: MIT */
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
    fc_tensor *bq, *bk, *bv; /* [H*hd], [Hkv*hd]: the arch's q/k/v biases, or NULL */
} llama_layer;

/* One row of the architecture table (arch.c): what an architecture changes
 * in the one block of forward.c, and how its files name it. */
typedef struct llama_arch {
    fc_llama_arch id;
    const char *gguf;       /* general.architecture and key prefix; NULL: not a GGUF name */
    const char *gguf_save;  /* the architecture a GGUF of it is written as */
    const char *hf;         /* config.json model_type */
    fc_rope_mode gguf_rope; /* the rope layout of its GGUF weights */
    bool qkv_bias;          /* attn_q/k/v carry biases */
    bool window;            /* config.json's sliding_window applies */
} llama_arch;

const llama_arch *fc__llama_arch(fc_llama_arch id);
/* By GGUF name (n bytes, not NUL-terminated) or config.json model_type;
 * NULL when unknown. */
const llama_arch *fc__llama_arch_gguf(const char *s, size_t n);
const llama_arch *fc__llama_arch_hf(const char *s);
/* The names of the architectures (for messages), "a, b, c". */
const char *fc__llama_arch_list(bool hf);

struct fc_llama {
    fc_ctx *ctx;
    fc_llama_config cfg;
    int64_t head_dim;
    fc_gguf_file *file; /* NULL for fc_llama_new */
    int64_t n_tensors;
    char **names;        /* n_tensors NUL-terminated copies */
    fc_tensor **tensors; /* n_tensors owned references */
    char **src_names;    /* NULL, or the checkpoint's own names (Hugging Face), beside names */
    fc_tensor *tok_embd, *out_norm, *output; /* output == tok_embd when tied */
    fc_tensor *rope_freqs;                   /* cfg.rope_freqs: [rope_dims / 2] f32, or NULL */
    llama_layer *layers;                     /* cfg.n_layers */
    struct fc_lora *lora;                    /* the attached adapter (borrowed; lora.c), or NULL */
};

struct fc_llama_cache {
    fc_llama *model;
    int64_t batch, max_len, len;
    fc_tensor **k, **v; /* per layer [B, Hkv, max_len, hd] f32 */
};

/* Checked size arithmetic (the public API has no form of core's shape.h
 * checks, so models/ keeps this one): *out = a * b + c for a, b, c >= 0,
 * grown by division against the limit so nothing wraps. False (*out
 * untouched) when the result passes INT64_MAX. */
static inline bool llama_mad(int64_t a, int64_t b, int64_t c, int64_t *out) {
    if (a && b > (INT64_MAX - c) / a) return false;
    *out = a * b + c;
    return true;
}

/* ---- shared by the loaders (model.c) ---- */
/* A normal, finite f32 > 0: the range every float hyper-parameter keeps. */
bool fc__llama_float_ok(double v);
/* The model shell for cfg with room for n_tensors (malloc'd tables); NULL
 * when out of memory. */
fc_llama *fc__llama_alloc(fc_ctx *ctx, const fc_llama_config *cfg, int64_t n_tensors);
/* Appends (name, t) taking t's reference (released on failure); src (NULL
 * allowed) is the checkpoint's own name, kept in src_names. */
fc_status fc__llama_add(fc_ctx *ctx, fc_llama *m, const char *name, const char *src, fc_tensor *t);
/* The divisions between the sizes; key names for the messages. */
typedef struct llama_key_names {
    const char *dim, *heads, *kv_heads, *rope_dims;
} llama_key_names;
fc_status fc__llama_check_sizes(fc_ctx *ctx, const fc_llama_config *c, fc_status code,
                                const llama_key_names *k);
/* Points the model's fields at its tensors, checking each against cfg. */
fc_status fc__llama_bind_all(fc_ctx *ctx, fc_llama *m);
/* The Hugging Face name of GGUF tensor name gguf into buf (hf.c); false
 * when it has none. */
bool fc__llama_hf_name(const char *gguf, char *buf, size_t cap);

/* Checks ids (any integer dtype, [B, T] or [T]) against the vocabulary and
 * reads them as i64 into a new tensor [B, T]. NULL with the error recorded. */
fc_tensor *fc__llama_ids(fc_ctx *ctx, const fc_llama *m, fc_tensor *ids, const char *op);
/* The forward over positions pos0.. with an optional cache (NULL: none). */
fc_tensor *fc__llama_run(fc_ctx *ctx, fc_llama *m, fc_tensor *ids, fc_llama_cache *cache,
                         const char *op);

/* Gives a substitute value for tensor i of m on saving: *out a new f32
 * reference of the tensor's shape, or NULL to write the tensor as it is;
 * non-OK stops the save (recorded in ctx). */
typedef fc_status (*fc__llama_subst_fn)(fc_ctx *ctx, const fc_llama *m, int64_t i, void *user,
                                        fc_tensor **out);
/* fc_llama_save (m, path checked non-NULL by the caller) with op naming the
 * caller in messages and subst (NULL allowed) asked for every tensor. */
fc_status fc__llama_save(fc_ctx *ctx, const fc_llama *m, const char *path,
                         const fc_llama_save_opts *opts, const char *op, fc__llama_subst_fn subst,
                         void *user);

#endif
