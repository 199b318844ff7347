/* SPDX-License-Identifier: MIT */
/* llama/model.c - building a Llama model: from a GGUF file (keys, then
 * tensors, each checked against the other before anything is run) or from
 * a config with random weights; accessors and freeing.
 *
 * Order of the checks: the architecture, the keys (present, of an integer
 * or float type, in range), the divisions between them, then each tensor
 * the keys imply (present, of a usable dtype, of the shape they give). The
 * first failure is returned with a message naming the key or tensor, so a
 * file that contradicts itself never reaches a product.
 *
 * Memory: the model's own small tables come from malloc (the public API
 * does not hand out a context's allocator); every tensor is the context's,
 * owned by the model alone (taken out of any open scope). Every count
 * sized by a key or a config field is checked first (llama_mad): a hostile
 * size is refused by name, never wrapped. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama/lora_internal.h"

static const char *const OP = "llama";

/* ---- keys ------------------------------------------------------------------- */

static const char *const GGUF_TYPE_NAMES[FC_GGUF_TYPE_COUNT + 1] = {
    "u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
    "bool", "string", "array", "u64", "i64", "f64", "unknown"};

static const char *type_name(const fc_gguf_value *v) {
    fc_gguf_type t = fc_gguf_value_type(v);
    return GGUF_TYPE_NAMES[t < FC_GGUF_TYPE_COUNT ? t : FC_GGUF_TYPE_COUNT];
}

/* The GGUF integer types (bool is not one: fc_gguf_value_int reads it as
 * 0 or 1, which would make `true` a size). */
static bool is_int_type(fc_gguf_type t) {
    return (t >= FC_GGUF_U8 && t <= FC_GGUF_I32) || t == FC_GGUF_U64 || t == FC_GGUF_I64;
}

/* An integer key, >= lo, into *out (absent: dflt, or FC_ERR_FORMAT when
 * required). */
static fc_status key_int_min(fc_ctx *ctx, const fc_gguf_file *f, const char *key, bool required,
                             int64_t dflt, int64_t lo, int64_t *out) {
    const fc_gguf_value *v = fc_gguf_kv_find(f, key);
    if (!v) {
        if (required) return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: key '%s' is missing", OP, key);
        *out = dflt;
        return FC_OK;
    }
    if (!is_int_type(fc_gguf_value_type(v)))
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: key '%s' has GGUF type %s, not an integer", OP,
                           key, type_name(v));
    if (fc_gguf_value_int(v, out) != FC_OK) { /* a u64 above INT64_MAX */
        uint64_t u = 0;
        (void)fc_gguf_value_uint(v, &u);
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: key '%s' = %llu does not fit in an int64", OP,
                           key, (unsigned long long)u);
    }
    if (*out < lo)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: key '%s' = %lld must be >= %lld", OP, key,
                           (long long)*out, (long long)lo);
    return FC_OK;
}

static fc_status key_int(fc_ctx *ctx, const fc_gguf_file *f, const char *key, bool required,
                         int64_t dflt, int64_t *out) {
    return key_int_min(ctx, f, key, required, dflt, 1, out);
}

/* A float hyper-parameter: finite, > 0, and a normal f32 (the type
 * llama.cpp stores these keys in). The range is what keeps the forward
 * finite: with the rope scale (1 / factor) at most 1 / FLT_MIN and the
 * frequencies at most 1 / FLT_MIN, an angle over any int64 position
 * stays below 1e95; and an epsilon that is not 0 in f32 keeps rms_norm of
 * a zero row at 0 rather than 0 / 0. */
static bool float_in_range(double v) { return isfinite(v) && v >= FLT_MIN && v <= FLT_MAX; }

static fc_status key_float(fc_ctx *ctx, const fc_gguf_file *f, const char *key, double dflt,
                           double *out) {
    const fc_gguf_value *v = fc_gguf_kv_find(f, key);
    if (!v) {
        *out = dflt;
        return FC_OK;
    }
    fc_gguf_type t = fc_gguf_value_type(v);
    if (t == FC_GGUF_F32 || t == FC_GGUF_F64) {
        (void)fc_gguf_value_float(v, out);
    } else if (is_int_type(t)) {
        int64_t i;
        uint64_t u = 0;
        if (fc_gguf_value_int(v, &i) == FC_OK)
            *out = (double)i;
        else
            *out = fc_gguf_value_uint(v, &u) == FC_OK ? (double)u : NAN;
    } else {
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: key '%s' has GGUF type %s, not a number", OP,
                           key, type_name(v));
    }
    if (!float_in_range(*out))
        return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                           "%s: key '%s' = %g must be finite and in [%g, %g] (a normal f32 > 0)",
                           OP, key, *out, (double)FLT_MIN, (double)FLT_MAX);
    return FC_OK;
}

static bool string_is(const fc_gguf_value *v, const char *want) {
    const char *s;
    size_t n;
    if (fc_gguf_value_string(v, &s, &n) != FC_OK) return false;
    return n == strlen(want) && memcmp(s, want, n) == 0;
}

/* "<arch>.<suffix>" into buf (the keys llama.cpp writes per architecture). */
static const char *akey(char *buf, size_t cap, const llama_arch *a, const char *suffix) {
    snprintf(buf, cap, "%s.%s", a->gguf, suffix);
    return buf;
}

/* The keys a Llama-family file must carry, into cfg (vocab and
 * tied_output come from the tensors). */
static fc_status read_keys(fc_ctx *ctx, const fc_gguf_file *f, fc_llama_config *cfg,
                           const llama_arch **arch_out) {
    const fc_gguf_value *arch = fc_gguf_kv_find(f, "general.architecture");
    if (!arch)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: key 'general.architecture' is missing", OP);
    const char *as = "";
    size_t an = 0;
    if (fc_gguf_value_string(arch, &as, &an) != FC_OK)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: key 'general.architecture' is not a string",
                           OP);
    const llama_arch *a = fc__llama_arch_gguf(as, an);
    if (!a)
        return fc_ctx_fail(ctx, FC_ERR_UNSUPPORTED,
                           "%s: general.architecture '%.*s' is not supported (only %s)", OP,
                           (int)(an > 64 ? 64 : an), as, fc__llama_arch_list(false));
    *arch_out = a;
    cfg->arch = a->id;
    cfg->rope_mode = a->gguf_rope;
    char k[9][96];
    fc_status st;
    if ((st = key_int(ctx, f, akey(k[0], 96, a, "block_count"), true, 0, &cfg->n_layers)) ||
        (st = key_int(ctx, f, akey(k[1], 96, a, "embedding_length"), true, 0, &cfg->dim)) ||
        (st = key_int(ctx, f, akey(k[2], 96, a, "attention.head_count"), true, 0, &cfg->n_heads)) ||
        (st = key_int(ctx, f, akey(k[3], 96, a, "attention.head_count_kv"), false, cfg->n_heads,
                      &cfg->n_kv_heads)) ||
        (st = key_int(ctx, f, akey(k[4], 96, a, "feed_forward_length"), true, 0, &cfg->ff_dim)) ||
        (st = key_int(ctx, f, akey(k[5], 96, a, "context_length"), true, 0, &cfg->context)) ||
        (st = key_int(ctx, f, akey(k[6], 96, a, "rope.dimension_count"), false, 0,
                      &cfg->rope_dims)) ||
        (st = key_float(ctx, f, akey(k[7], 96, a, "rope.freq_base"), 10000.0, &cfg->rope_base)) ||
        (st = key_float(ctx, f, akey(k[8], 96, a, "attention.layer_norm_rms_epsilon"), 1e-5,
                        &cfg->rms_eps)))
        return st;
    /* Variants of the architecture this model does not compute: refused
     * by name rather than run with a wrong result. */
    int64_t n;
    if ((st = key_int_min(ctx, f, akey(k[0], 96, a, "expert_count"), false, 0, 0, &n))) return st;
    if (n > 0)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                           "%s: %s = %lld: mixture-of-experts blocks are not supported", OP, k[0],
                           (long long)n);
    /* Llama 3.1's rope scaling, as llama.cpp's converter writes it: the
     * per-frequency factors as a tensor (bound and checked in bind_all). */
    cfg->rope_freqs = fc_gguf_find(f, "rope_freqs.weight") >= 0;
    cfg->rope_scale = 1.0;
    const fc_gguf_value *stype = fc_gguf_kv_find(f, akey(k[1], 96, a, "rope.scaling.type"));
    if (stype && !string_is(stype, "none")) {
        if (!string_is(stype, "linear")) {
            const char *ts = "";
            size_t tn = 0;
            bool is_str = fc_gguf_value_string(stype, &ts, &tn) == FC_OK;
            return fc_ctx_fail(ctx, is_str ? FC_ERR_UNSUPPORTED : FC_ERR_FORMAT,
                               "%s: %s '%.*s' is not supported (only 'none' or 'linear'; Llama "
                               "3.1's scaling is a rope_freqs.weight tensor)",
                               OP, k[1], (int)(tn > 64 ? 64 : tn), is_str ? ts : "(not a string)");
        }
        double factor;
        if ((st = key_float(ctx, f, akey(k[2], 96, a, "rope.scaling.factor"), 1.0, &factor)))
            return st;
        cfg->rope_scale = 1.0 / factor;
    }
    return FC_OK;
}

bool fc__llama_float_ok(double v) { return float_in_range(v); }

fc_status fc__llama_check_sizes(fc_ctx *ctx, const fc_llama_config *c, fc_status code,
                                const llama_key_names *k) {
    if (c->dim % c->n_heads)
        return fc_ctx_fail(ctx, code, "%s: %s = %lld does not divide %s = %lld", OP, k->heads,
                           (long long)c->n_heads, k->dim, (long long)c->dim);
    if (c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads)
        return fc_ctx_fail(ctx, code, "%s: %s = %lld does not divide %s = %lld", OP, k->kv_heads,
                           (long long)c->n_kv_heads, k->heads, (long long)c->n_heads);
    int64_t hd = c->dim / c->n_heads;
    if (c->rope_dims < 1 || c->rope_dims % 2 || c->rope_dims > hd)
        return fc_ctx_fail(ctx, code,
                           "%s: %s = %lld must be even, positive and at most the head size %lld",
                           OP, k->rope_dims, (long long)c->rope_dims, (long long)hd);
    return FC_OK;
}

/* Every count fc_llama_new sizes by the config (the tensor table, each
 * layer's and the whole model's elements and bytes), checked with
 * llama_mad before anything is allocated: FC_ERR_OVERFLOW naming the
 * sizes. *n_tensors gets the table's length. */
static fc_status check_totals(fc_ctx *ctx, const fc_llama_config *c, int64_t *n_tensors) {
    int64_t D = c->dim, hd = D / c->n_heads, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    int64_t per = fc__llama_arch(c->arch)->qkv_bias ? 12 : 9;
    if (!llama_mad(per, c->n_layers, 3, n_tensors))
        return fc_ctx_fail(ctx, FC_ERR_OVERFLOW,
                           "%s_new: n_layers = %lld: its %lld tensors a layer overflow the tensor "
                           "count",
                           OP, (long long)c->n_layers, (long long)per);
    /* a layer: two norms [D], wq and wo D x qd, wk and wv D x kvd, the
     * three feed-forward weights D x ff_dim */
    int64_t D2 = 0, layer = 0;
    bool ok = llama_mad(2, D, 0, &D2) && llama_mad(D2, qd, D2, &layer) &&
              llama_mad(D2, kvd, layer, &layer) && llama_mad(D2, c->ff_dim, layer, &layer) &&
              llama_mad(D, c->ff_dim, layer, &layer);
    if (!ok)
        return fc_ctx_fail(ctx, FC_ERR_OVERFLOW,
                           "%s_new: a layer of dim = %lld and ff_dim = %lld has more than %lld "
                           "elements",
                           OP, (long long)D, (long long)c->ff_dim, (long long)INT64_MAX);
    int64_t total = 0;
    if (!llama_mad(c->vocab, D, D, &total) ||
        (!c->tied_output && !llama_mad(c->vocab, D, total, &total)))
        return fc_ctx_fail(ctx, FC_ERR_OVERFLOW,
                           "%s_new: vocab = %lld by dim = %lld embeddings have more than %lld "
                           "elements",
                           OP, (long long)c->vocab, (long long)D, (long long)INT64_MAX);
    int64_t bytes = 0;
    ok = llama_mad(c->n_layers, layer, total, &total) && llama_mad(total, 4, 0, &bytes) &&
         llama_mad(*n_tensors, (int64_t)(sizeof(char *) + sizeof(fc_tensor *)), bytes, &bytes) &&
         llama_mad(c->n_layers, (int64_t)sizeof(llama_layer), bytes, &bytes);
    if (!ok)
        return fc_ctx_fail(ctx, FC_ERR_OVERFLOW,
                           "%s_new: n_layers = %lld layers of %lld elements (and the rest) need "
                           "more than %lld bytes",
                           OP, (long long)c->n_layers, (long long)layer, (long long)INT64_MAX);
    return FC_OK;
}

/* ---- tensors ------------------------------------------------------------------ */

static fc_tensor *find(const fc_llama *m, const char *name) {
    for (int64_t i = 0; i < m->n_tensors; i++)
        if (strcmp(m->names[i], name) == 0) return m->tensors[i];
    return NULL;
}

static void shape_str(const int64_t *s, int rank, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ",%lld" : "%lld", (long long)s[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* The name a message shows for GGUF name: the checkpoint's own for a
 * Hugging Face model (the one its user knows), else name itself. */
static const char *shown(const fc_llama *m, const char *name, char *buf, size_t cap) {
    if (!m->src_names) return name;
    for (int64_t i = 0; i < m->n_tensors; i++)
        if (strcmp(m->names[i], name) == 0) return m->src_names[i] ? m->src_names[i] : name;
    return fc__llama_hf_name(name, buf, cap) ? buf : name;
}

/* The tensor name must exist with shape {d0[, d1]} (rank 1 when d1 == 0).
 * Matrices must be something fc_linear / fc_embedding can read; norms a
 * float dtype. */
static fc_status bind(fc_ctx *ctx, const fc_llama *m, const char *name, int64_t d0, int64_t d1,
                      fc_tensor **out) {
    fc_tensor *t = find(m, name);
    char hf[96];
    const char *nm = shown(m, name, hf, sizeof hf);
    if (!t) return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: tensor '%s' is missing", OP, nm);
    int rank = d1 ? 2 : 1;
    int64_t want[2] = {d0, d1};
    const int64_t *s = fc_tensor_shape(t);
    bool ok = fc_tensor_rank(t) == rank && s[0] == d0 && (rank == 1 || s[1] == d1);
    if (!ok) {
        char got[96], exp[64];
        shape_str(s, fc_tensor_rank(t), got, sizeof got);
        shape_str(want, rank, exp, sizeof exp);
        return fc_ctx_fail(ctx, FC_ERR_SHAPE_MISMATCH, "%s: tensor '%s' has shape %s, %s %s%s", OP,
                           nm, got, m->src_names ? "config.json gives" : "the keys give", exp,
                           m->src_names ? "" : " (ggml order reversed)");
    }
    fc_dtype dt = fc_tensor_dtype(t);
    bool usable = dt == FC_F32 || dt == FC_F16 || dt == FC_BF16 ||
                  (rank == 2 && fc_dtype_supports_quantized_matmul_rhs(dt));
    if (!usable)
        return fc_ctx_fail(ctx, FC_ERR_DTYPE, "%s: tensor '%s' has dtype %s, which a %s cannot use",
                           OP, nm, fc_dtype_name(dt), rank == 2 ? "product" : "norm");
    *out = t;
    return FC_OK;
}

fc_status fc__llama_bind_all(fc_ctx *ctx, fc_llama *m) {
    const fc_llama_config *c = &m->cfg;
    const llama_arch *a = fc__llama_arch(c->arch);
    int64_t hd = m->head_dim, D = c->dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    char hf[96];
    fc_tensor *embd = find(m, "token_embd.weight");
    const char *en = shown(m, "token_embd.weight", hf, sizeof hf);
    if (!embd) return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: tensor '%s' is missing", OP, en);
    int64_t vocab = fc_tensor_rank(embd) == 2 ? fc_tensor_shape(embd)[0] : 0;
    if (c->vocab && c->vocab != vocab) {
        char key[64];
        snprintf(key, sizeof key, "%s.vocab_size", a->gguf ? a->gguf : a->gguf_save);
        return fc_ctx_fail(ctx, FC_ERR_SHAPE_MISMATCH, "%s: tensor '%s' has %lld rows, %s is %lld",
                           OP, en, (long long)vocab,
                           m->src_names ? "config.json's vocab_size" : key, (long long)c->vocab);
    }
    fc_status st;
    if ((st = bind(ctx, m, "token_embd.weight", vocab > 0 ? vocab : 1, D, &m->tok_embd)) ||
        (st = bind(ctx, m, "output_norm.weight", D, 0, &m->out_norm)))
        return st;
    m->cfg.vocab = vocab;
    if (!m->src_names) m->cfg.tied_output = find(m, "output.weight") == NULL;
    if (m->cfg.tied_output)
        m->output = m->tok_embd;
    else if ((st = bind(ctx, m, "output.weight", vocab, D, &m->output)))
        return st;
    m->rope_freqs = NULL;
    if (c->rope_freqs) {
        if ((st = bind(ctx, m, "rope_freqs.weight", c->rope_dims / 2, 0, &m->rope_freqs)))
            return st;
        if (fc_tensor_dtype(m->rope_freqs) != FC_F32 || !fc_tensor_is_contiguous(m->rope_freqs))
            return fc_ctx_fail(ctx, FC_ERR_DTYPE,
                               "%s: tensor 'rope_freqs.weight' has dtype %s, not f32", OP,
                               fc_dtype_name(fc_tensor_dtype(m->rope_freqs)));
        const float *ff = fc_tensor_data(m->rope_freqs);
        for (int64_t i = 0; ff && i < c->rope_dims / 2; i++)
            if (!float_in_range(ff[i]))
                return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                                   "%s: rope_freqs.weight[%lld] = %g must be finite and in "
                                   "[%g, %g]",
                                   OP, (long long)i, (double)ff[i], (double)FLT_MIN,
                                   (double)FLT_MAX);
    }
    for (int64_t l = 0; l < c->n_layers; l++) {
        llama_layer *L = &m->layers[l];
        struct {
            const char *suffix;
            int64_t d0, d1;
            fc_tensor **slot;
        } want[] = {
            {"attn_norm.weight", D, 0, &L->attn_norm},
            {"attn_q.weight", qd, D, &L->wq},
            {"attn_k.weight", kvd, D, &L->wk},
            {"attn_v.weight", kvd, D, &L->wv},
            {"attn_output.weight", D, qd, &L->wo},
            {"ffn_norm.weight", D, 0, &L->ffn_norm},
            {"ffn_gate.weight", c->ff_dim, D, &L->w_gate},
            {"ffn_up.weight", c->ff_dim, D, &L->w_up},
            {"ffn_down.weight", D, c->ff_dim, &L->w_down},
            {"attn_q.bias", qd, 0, &L->bq},
            {"attn_k.bias", kvd, 0, &L->bk},
            {"attn_v.bias", kvd, 0, &L->bv},
        };
        size_t n = sizeof want / sizeof want[0] - (a->qkv_bias ? 0 : 3);
        for (size_t i = 0; i < n; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%lld.%s", (long long)l, want[i].suffix);
            if ((st = bind(ctx, m, name, want[i].d0, want[i].d1, want[i].slot))) return st;
        }
    }
    return FC_OK;
}

/* ---- construction ------------------------------------------------------------- */

fc_llama *fc__llama_alloc(fc_ctx *ctx, const fc_llama_config *cfg, int64_t n_tensors) {
    fc_llama *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->ctx = ctx;
    m->cfg = *cfg;
    m->head_dim = cfg->dim / cfg->n_heads;
    if (!m->cfg.rope_dims) m->cfg.rope_dims = m->head_dim;
    m->names = calloc((size_t)(n_tensors ? n_tensors : 1), sizeof *m->names);
    m->tensors = calloc((size_t)(n_tensors ? n_tensors : 1), sizeof *m->tensors);
    m->layers = calloc((size_t)cfg->n_layers, sizeof *m->layers);
    if (!m->names || !m->tensors || !m->layers) {
        free(m->names);
        free(m->tensors);
        free(m->layers);
        free(m);
        return NULL;
    }
    return m;
}

void fc_llama_free(fc_llama *m) {
    if (!m) return;
    fc__lora_orphan(m->lora); /* freed out of order: the adapter forgets m */
    for (int64_t i = 0; i < m->n_tensors; i++) {
        fc_release(m->tensors[i]);
        free(m->names[i]);
        if (m->src_names) free(m->src_names[i]);
    }
    free(m->names);
    free(m->src_names);
    free(m->tensors);
    free(m->layers);
    fc_gguf_close(m->file);
    free(m);
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

/* Appends (name, t) to the table, taking t's reference (released on
 * failure) out of any scope the caller has open (fc_keep): the model
 * outlives that scope, and its fc_llama_free is the one release. */
fc_status fc__llama_add(fc_ctx *ctx, fc_llama *m, const char *name, const char *src, fc_tensor *t) {
    if (!t) return fc_ctx_status(ctx) ? fc_ctx_status(ctx) : FC_ERR_OOM;
    char *copy = dup_str(name), *src_copy = NULL;
    if (copy && src && m->src_names && !(src_copy = dup_str(src))) {
        free(copy);
        copy = NULL;
    }
    if (!copy) {
        fc_release(t);
        return fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory for tensor names", OP);
    }
    if (m->src_names) m->src_names[m->n_tensors] = src_copy;
    m->names[m->n_tensors] = copy;
    m->tensors[m->n_tensors++] = fc_keep(t);
    return FC_OK;
}

static fc_status add_tensor(fc_ctx *ctx, fc_llama *m, const char *name, fc_tensor *t) {
    return fc__llama_add(ctx, m, name, NULL, t);
}

fc_status fc_llama_load(fc_ctx *ctx, const char *path, const fc_llama_load_opts *opts,
                        fc_llama **out) {
    if (out) *out = NULL;
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!path || !out) return fc_ctx_fail(ctx, FC_ERR_NULL_ARG, "%s: NULL path or out", OP);
    char err[256];
    fc_io_opts io = {.allocator = opts ? opts->allocator : NULL,
                     .flags = opts ? opts->io_flags & FC_IO_NO_MMAP : 0,
                     .errbuf = err,
                     .errcap = sizeof err};
    fc_gguf_file *f = NULL;
    fc_status st = fc_gguf_open(path, &io, &f);
    if (st) return fc_ctx_fail(ctx, st, "%s: %s", OP, err);
    return fc_llama_from_gguf(ctx, f, opts, out);
}

fc_status fc_llama_from_gguf(fc_ctx *ctx, fc_gguf_file *f, const fc_llama_load_opts *opts,
                             fc_llama **out) {
    if (out) *out = NULL;
    if (!ctx) {
        fc_gguf_close(f);
        return FC_ERR_NULL_ARG;
    }
    if (!f || !out) {
        fc_gguf_close(f);
        return fc_ctx_fail(ctx, FC_ERR_NULL_ARG, "%s: NULL file or out", OP);
    }
    fc_llama_load_opts o = opts ? *opts : (fc_llama_load_opts){0};
    fc_llama_config cfg = {0};
    fc_status st;
    const llama_arch *a = NULL;
    if ((st = read_keys(ctx, f, &cfg, &a))) goto fail_file;
    char kb[5][96];
    const fc_gguf_value *vs = fc_gguf_kv_find(f, akey(kb[0], 96, a, "vocab_size"));
    if (vs && (st = key_int(ctx, f, kb[0], true, 0, &cfg.vocab))) goto fail_file;
    if (!cfg.rope_dims) cfg.rope_dims = cfg.dim / cfg.n_heads;
    llama_key_names kn = {
        akey(kb[1], 96, a, "embedding_length"), akey(kb[2], 96, a, "attention.head_count"),
        akey(kb[3], 96, a, "attention.head_count_kv"), akey(kb[4], 96, a, "rope.dimension_count")};
    if ((st = fc__llama_check_sizes(ctx, &cfg, FC_ERR_FORMAT, &kn))) goto fail_file;
    const char *head_keys[2] = {akey(kb[1], 96, a, "attention.key_length"),
                                akey(kb[2], 96, a, "attention.value_length")};
    for (int i = 0; i < 2; i++) {
        int64_t len;
        if (!fc_gguf_kv_find(f, head_keys[i])) continue;
        if ((st = key_int(ctx, f, head_keys[i], true, 0, &len))) goto fail_file;
        if (len != cfg.dim / cfg.n_heads) {
            st = fc_ctx_fail(ctx, FC_ERR_FORMAT,
                             "%s: %s = %lld differs from the head size %lld (embedding / heads), "
                             "which is not supported",
                             OP, head_keys[i], (long long)len, (long long)(cfg.dim / cfg.n_heads));
            goto fail_file;
        }
    }
    /* Before sizing anything by the key: a block count above the tensor
     * count cannot be right (each block has 9), and would otherwise be a
     * huge allocation before the first missing tensor is named. */
    if (cfg.n_layers > fc_gguf_tensor_count(f)) {
        int64_t need = INT64_MAX;
        bool fits = llama_mad(9, cfg.n_layers, 2, &need);
        st = fc_ctx_fail(
            ctx, FC_ERR_FORMAT, "%s: %s = %lld needs %s%lld tensors, the file has %lld", OP,
            akey(kb[0], 96, a, "block_count"), (long long)cfg.n_layers, fits ? "" : "more than ",
            (long long)need, (long long)fc_gguf_tensor_count(f));
        goto fail_file;
    }
    fc_llama *m = fc__llama_alloc(ctx, &cfg, fc_gguf_tensor_count(f));
    if (!m) {
        st = fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory", OP);
        goto fail_file;
    }
    m->file = f;
    for (int64_t i = 0; i < fc_gguf_tensor_count(f); i++) {
        fc_io_tensor info;
        if ((st = fc_gguf_tensor_info(f, i, &info))) break;
        bool param = o.trainable && info.dtype == FC_F32;
        fc_tensor *t = fc_gguf_load(ctx, f, info.name, param ? FC_IO_COPY : 0);
        if (t && param && (st = fc_requires_grad(t, true))) {
            fc_release(t);
            break;
        }
        if ((st = add_tensor(ctx, m, info.name, t))) break;
    }
    if (!st) st = fc__llama_bind_all(ctx, m);
    if (st) {
        fc_llama_free(m);
        return st;
    }
    *out = m;
    return FC_OK;
fail_file:
    fc_gguf_close(f);
    return st;
}

fc_status fc_llama_new(fc_ctx *ctx, const fc_llama_config *cfg_in, fc_llama **out) {
    if (out) *out = NULL;
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!cfg_in || !out) return fc_ctx_fail(ctx, FC_ERR_NULL_ARG, "%s_new: NULL cfg or out", OP);
    fc_llama_config c = *cfg_in;
    if (!c.n_kv_heads) c.n_kv_heads = c.n_heads;
    struct {
        const char *name;
        int64_t v;
    } need[] = {{"vocab", c.vocab},           {"dim", c.dim},           {"n_heads", c.n_heads},
                {"n_kv_heads", c.n_kv_heads}, {"n_layers", c.n_layers}, {"ff_dim", c.ff_dim},
                {"context", c.context}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (need[i].v < 1)
            return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG, "%s_new: %s = %lld must be >= 1", OP,
                               need[i].name, (long long)need[i].v);
    if (!c.rope_dims) c.rope_dims = c.dim / c.n_heads;
    if (c.rope_base == 0) c.rope_base = 10000.0;
    if (c.rope_scale == 0) c.rope_scale = 1.0;
    if (c.rms_eps == 0) c.rms_eps = 1e-5;
    /* the ranges of the file's keys (key_float), rope_scale's through the
     * factor fc_llama_save writes for it */
    if (!float_in_range(c.rope_base) || !float_in_range(c.rms_eps))
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG,
                           "%s_new: %s = %g must be finite and in [%g, %g] (a normal f32 > 0; 0 "
                           "means the default)",
                           OP, float_in_range(c.rope_base) ? "rms_eps" : "rope_base",
                           float_in_range(c.rope_base) ? c.rms_eps : c.rope_base, (double)FLT_MIN,
                           (double)FLT_MAX);
    if (!(c.rope_scale > 0) || !float_in_range(1.0 / c.rope_scale))
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG,
                           "%s_new: rope_scale = %g must be > 0, with its inverse (the rope "
                           "scaling factor) finite and in [%g, %g] (0 means 1)",
                           OP, c.rope_scale, (double)FLT_MIN, (double)FLT_MAX);
    const llama_arch *a = fc__llama_arch(c.arch);
    if (!a || (unsigned)c.rope_mode >= FC_ROPE_MODE_COUNT || c.sliding_window < 0 || c.rope_freqs)
        return fc_ctx_fail(
            ctx, FC_ERR_INVALID_ARG,
            "%s_new: arch = %d (of %d), rope_mode = %d (of %d), sliding_window = "
            "%lld (>= 0) or rope_freqs = %d (a loader's: false here) is out of range",
            OP, (int)c.arch, (int)FC_LLAMA_ARCH_COUNT, (int)c.rope_mode, (int)FC_ROPE_MODE_COUNT,
            (long long)c.sliding_window, (int)c.rope_freqs);
    static const llama_key_names names = {"dim", "n_heads", "n_kv_heads", "rope_dims"};
    fc_status st = fc__llama_check_sizes(ctx, &c, FC_ERR_INVALID_ARG, &names);
    if (st) return st;
    int64_t n = 0;
    if ((st = check_totals(ctx, &c, &n))) return st;
    fc_llama *m = fc__llama_alloc(ctx, &c, n);
    if (!m) return fc_ctx_fail(ctx, FC_ERR_OOM, "%s_new: out of memory", OP);
    int64_t hd = m->head_dim, D = c.dim;
    const double std = 0.02;
    st = add_tensor(ctx, m, "token_embd.weight",
                    fc_param_randn(ctx, FC_F32, (int64_t[]){c.vocab, D}, 2, std));
    for (int64_t l = 0; !st && l < c.n_layers; l++) {
        struct {
            const char *suffix;
            int64_t d0, d1;
        } w[] = {{"attn_norm", D, 0},
                 {"attn_q", c.n_heads * hd, D},
                 {"attn_k", c.n_kv_heads * hd, D},
                 {"attn_v", c.n_kv_heads * hd, D},
                 {"attn_output", D, c.n_heads * hd},
                 {"ffn_norm", D, 0},
                 {"ffn_gate", c.ff_dim, D},
                 {"ffn_up", c.ff_dim, D},
                 {"ffn_down", D, c.ff_dim}};
        for (size_t i = 0; !st && i < sizeof w / sizeof w[0]; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%lld.%s.weight", (long long)l, w[i].suffix);
            fc_tensor *t = w[i].d1
                               ? fc_param_randn(ctx, FC_F32, (int64_t[]){w[i].d0, w[i].d1}, 2, std)
                               : fc_ones(ctx, FC_F32, (int64_t[]){w[i].d0}, 1);
            if (t && !w[i].d1 && (st = fc_requires_grad(t, true))) fc_release(t);
            if (!st) st = add_tensor(ctx, m, name, t);
        }
        /* the arch's q/k/v biases, zero (as PyTorch's nn.Linear is not:
         * a fresh model starts as the plain block) */
        static const char *const bias[3] = {"attn_q", "attn_k", "attn_v"};
        for (int i = 0; !st && a->qkv_bias && i < 3; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%lld.%s.bias", (long long)l, bias[i]);
            fc_tensor *t =
                fc_zeros(ctx, FC_F32, (int64_t[]){(i ? c.n_kv_heads : c.n_heads) * hd}, 1);
            if (t && (st = fc_requires_grad(t, true))) fc_release(t);
            if (!st) st = add_tensor(ctx, m, name, t);
        }
    }
    if (!st) {
        fc_tensor *t = fc_ones(ctx, FC_F32, (int64_t[]){D}, 1);
        if (t && (st = fc_requires_grad(t, true))) fc_release(t);
        if (!st) st = add_tensor(ctx, m, "output_norm.weight", t);
    }
    if (!st && !c.tied_output)
        st = add_tensor(ctx, m, "output.weight",
                        fc_param_randn(ctx, FC_F32, (int64_t[]){c.vocab, D}, 2, std));
    if (!st) st = fc__llama_bind_all(ctx, m);
    if (st) {
        fc_llama_free(m);
        return st;
    }
    *out = m;
    return FC_OK;
}

/* ---- accessors ------------------------------------------------------------------ */

const fc_llama_config *fc_llama_get_config(const fc_llama *m) { return m ? &m->cfg : NULL; }
const fc_gguf_file *fc_llama_gguf(const fc_llama *m) { return m ? m->file : NULL; }
int64_t fc_llama_tensor_count(const fc_llama *m) { return m ? m->n_tensors : 0; }

const char *fc_llama_tensor_name(const fc_llama *m, int64_t i) {
    return m && i >= 0 && i < m->n_tensors ? m->names[i] : NULL;
}

fc_tensor *fc_llama_tensor_at(const fc_llama *m, int64_t i) {
    return m && i >= 0 && i < m->n_tensors ? m->tensors[i] : NULL;
}

fc_tensor *fc_llama_tensor(const fc_llama *m, const char *name) {
    return m && name ? find(m, name) : NULL;
}

int64_t fc_llama_params(const fc_llama *m, fc_tensor **out, int64_t cap) {
    int64_t n = 0;
    for (int64_t i = 0; m && i < m->n_tensors; i++) {
        if (!fc_tensor_requires_grad(m->tensors[i])) continue;
        if (out && n < cap) out[n] = m->tensors[i];
        n++;
    }
    return n;
}
