/* SPDX-License-Identifier: MIT */
/* llama/hf.c - a Llama-family model from a Hugging Face checkpoint
 * directory: config.json (models/json), then model.safetensors or the
 * shards model.safetensors.index.json names, read through the public
 * safetensors reader (mapped: f32, f16 and bf16 weights are borrowed from
 * the mapping, never copied, unless opts->trainable asks for writable f32).
 *
 * Order of the checks, as the GGUF loader's: config.json's keys (known,
 * present, typed, in range), the divisions between them, the shards
 * (each listed tensor where the index says, none in two), then each
 * tensor against the sizes (model.c's bind). The first failure is
 * returned with a message naming the key, tensor or file.
 *
 * Rope: Hugging Face's Llama, Qwen2 and Mistral rotate half of each head
 * against the other half (rotate_half: pairs (i, i + hd/2)). llama.cpp's
 * converter permutes the Q and K rows of such checkpoints so that its
 * adjacent-pair rope computes the same; here the rows stay as they are
 * (zero-copy) and the model runs rotate-half rope (FC_ROPE_NEOX).
 *
 * Tokenizer: dir/tokenizer.json is not read here. models/tokenizer loads
 * it (its own call, beside this one); a caller that wants both opens the
 * same directory with each. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama/llama_internal.h"
#include "json/json.h"

static const char *const OP = "llama_hf";

/* The largest JSON file read: far above any real config or index. */
#define HF_MAX_JSON ((size_t)64 << 20)

/* ---- names ------------------------------------------------------------------- */

static const struct {
    const char *hf, *gguf;
} GLOBAL_NAMES[] = {{"model.embed_tokens.weight", "token_embd.weight"},
                    {"model.norm.weight", "output_norm.weight"},
                    {"lm_head.weight", "output.weight"}};

static const struct {
    const char *hf, *gguf;
} LAYER_NAMES[] = {{"input_layernorm.weight", "attn_norm.weight"},
                   {"self_attn.q_proj.weight", "attn_q.weight"},
                   {"self_attn.k_proj.weight", "attn_k.weight"},
                   {"self_attn.v_proj.weight", "attn_v.weight"},
                   {"self_attn.o_proj.weight", "attn_output.weight"},
                   {"self_attn.q_proj.bias", "attn_q.bias"},
                   {"self_attn.k_proj.bias", "attn_k.bias"},
                   {"self_attn.v_proj.bias", "attn_v.bias"},
                   {"post_attention_layernorm.weight", "ffn_norm.weight"},
                   {"mlp.gate_proj.weight", "ffn_gate.weight"},
                   {"mlp.up_proj.weight", "ffn_up.weight"},
                   {"mlp.down_proj.weight", "ffn_down.weight"}};

#define N_GLOBAL (sizeof GLOBAL_NAMES / sizeof GLOBAL_NAMES[0])
#define N_LAYER (sizeof LAYER_NAMES / sizeof LAYER_NAMES[0])

/* Reads a layer number "N." at s (decimal, no leading zero, below 2^31):
 * the number, and *rest after the dot; -1 when s is not one. */
static int64_t layer_index(const char *s, const char **rest) {
    int64_t n = 0;
    const char *p = s;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        n = n * 10 + (*p - '0');
        if (n > INT32_MAX) return -1;
    }
    if (*p != '.') return -1;
    *rest = p + 1;
    return n;
}

enum { NAME_UNKNOWN, NAME_MAPPED, NAME_SKIPPED };

/* The GGUF name of Hugging Face tensor hf into buf, and its layer in
 * *layer (-1 for the global ones). NAME_SKIPPED for the buffers old
 * checkpoints saved (rotary_emb.inv_freq, recomputed from rope_theta). */
static int map_name(const char *hf, char *buf, size_t cap, int64_t *layer) {
    *layer = -1;
    for (size_t i = 0; i < N_GLOBAL; i++)
        if (strcmp(hf, GLOBAL_NAMES[i].hf) == 0) {
            snprintf(buf, cap, "%s", GLOBAL_NAMES[i].gguf);
            return NAME_MAPPED;
        }
    static const char prefix[] = "model.layers.";
    if (strncmp(hf, prefix, sizeof prefix - 1) != 0) return NAME_UNKNOWN;
    const char *rest = NULL;
    int64_t l = layer_index(hf + sizeof prefix - 1, &rest);
    if (l < 0) return NAME_UNKNOWN;
    *layer = l;
    if (strcmp(rest, "self_attn.rotary_emb.inv_freq") == 0) return NAME_SKIPPED;
    for (size_t i = 0; i < N_LAYER; i++)
        if (strcmp(rest, LAYER_NAMES[i].hf) == 0) {
            snprintf(buf, cap, "blk.%lld.%s", (long long)l, LAYER_NAMES[i].gguf);
            return NAME_MAPPED;
        }
    return NAME_UNKNOWN;
}

bool fc__llama_hf_name(const char *gguf, char *buf, size_t cap) {
    for (size_t i = 0; i < N_GLOBAL; i++)
        if (strcmp(gguf, GLOBAL_NAMES[i].gguf) == 0) {
            snprintf(buf, cap, "%s", GLOBAL_NAMES[i].hf);
            return true;
        }
    static const char prefix[] = "blk.";
    if (strncmp(gguf, prefix, sizeof prefix - 1) != 0) return false;
    const char *rest = NULL;
    int64_t l = layer_index(gguf + sizeof prefix - 1, &rest);
    for (size_t i = 0; l >= 0 && i < N_LAYER; i++)
        if (strcmp(rest, LAYER_NAMES[i].gguf) == 0) {
            snprintf(buf, cap, "model.layers.%lld.%s", (long long)l, LAYER_NAMES[i].hf);
            return true;
        }
    return false;
}

/* ---- files ------------------------------------------------------------------- */

static char *join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

static bool exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* The whole of path into al memory (*len bytes, *cap allocated). */
static fc_status read_all(fc_ctx *ctx, const fc_allocator *al, const char *path, char **out,
                          size_t *len, size_t *cap) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return fc_ctx_fail(ctx, FC_ERR_IO, "%s: cannot open '%s'", OP, path);
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return fc_ctx_fail(ctx, FC_ERR_IO, "%s: cannot size '%s'", OP, path);
    }
    if ((size_t)n > HF_MAX_JSON) {
        fclose(f);
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: '%s' has %ld bytes, more than the %zu read", OP,
                           path, n, HF_MAX_JSON);
    }
    *cap = (size_t)n + 1;
    char *buf = al->alloc(al->user, *cap, 16);
    if (!buf) {
        fclose(f);
        return fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory reading '%s'", OP, path);
    }
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n) {
        al->free(al->user, buf, *cap);
        return fc_ctx_fail(ctx, FC_ERR_IO, "%s: short read of '%s'", OP, path);
    }
    buf[n] = 0;
    *out = buf;
    *len = (size_t)n;
    return FC_OK;
}

/* A JSON file of dir parsed into d (freed by the caller, also on failure). */
static fc_status read_json(fc_ctx *ctx, const fc_allocator *al, const char *path, fc__json_doc *d) {
    char *text = NULL;
    size_t len = 0, cap = 0;
    fc_status st = read_all(ctx, al, path, &text, &len, &cap);
    if (st) return st;
    char fn[96];
    const char *base = strrchr(path, '/');
    snprintf(fn, sizeof fn, "%s: %s", OP, base ? base + 1 : path);
    st = fc__json_parse(ctx, fn, d, al, text, len);
    al->free(al->user, text, cap);
    if (!st && d->v[0].type != FC__JSON_OBJECT)
        st = fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: '%s' is not a JSON object", OP, path);
    return st;
}

/* ---- config.json -------------------------------------------------------------- */

static const char *const JSON_TYPES[] = {"null",     "false",    "true",     "a number",
                                         "a string", "an array", "an object"};

/* The member key of the root, NULL when absent or null (Hugging Face
 * writes null for "not set"). */
static const fc__json *member(const fc__json_doc *d, const fc__json *o, const char *key) {
    const fc__json *v = fc__json_get(d, o, key);
    return v && v->type != FC__JSON_NULL ? v : NULL;
}

/* An integer key >= 1 (at most 2^53, exact in a double). */
static fc_status cfg_int(fc_ctx *ctx, const fc__json_doc *d, const fc__json *o, const char *key,
                         bool required, int64_t dflt, int64_t *out) {
    const fc__json *v = member(d, o, key);
    if (!v) {
        if (required)
            return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: config.json: key '%s' is missing", OP, key);
        *out = dflt;
        return FC_OK;
    }
    if (v->type != FC__JSON_NUMBER)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: config.json: '%s' is %s, not an integer", OP,
                           key, JSON_TYPES[v->type]);
    if (!(v->num >= 1 && v->num <= 9007199254740992.0) || v->num != floor(v->num))
        return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                           "%s: config.json: '%s' = %g must be an integer in [1, 2^53]", OP, key,
                           v->num);
    *out = (int64_t)v->num;
    return FC_OK;
}

/* A float hyper-parameter: finite normal f32 > 0, as the GGUF keys. */
static fc_status cfg_float(fc_ctx *ctx, const fc__json_doc *d, const fc__json *o, const char *key,
                           bool required, double dflt, double *out) {
    const fc__json *v = member(d, o, key);
    if (!v) {
        if (required)
            return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: config.json: key '%s' is missing", OP, key);
        *out = dflt;
        return FC_OK;
    }
    if (v->type != FC__JSON_NUMBER)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: config.json: '%s' is %s, not a number", OP, key,
                           JSON_TYPES[v->type]);
    if (!fc__llama_float_ok(v->num))
        return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                           "%s: config.json: '%s' = %g must be finite and in [%g, %g]", OP, key,
                           v->num, (double)FLT_MIN, (double)FLT_MAX);
    *out = v->num;
    return FC_OK;
}

static fc_status cfg_bool(fc_ctx *ctx, const fc__json_doc *d, const fc__json *o, const char *key,
                          bool *out) {
    const fc__json *v = member(d, o, key);
    if (!v) return FC_OK;
    if (v->type != FC__JSON_TRUE && v->type != FC__JSON_FALSE)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: config.json: '%s' is %s, not a boolean", OP,
                           key, JSON_TYPES[v->type]);
    *out = v->type == FC__JSON_TRUE;
    return FC_OK;
}

/* Keys that do not change the forward pass (ids, dtypes, training
 * settings, provenance), and those read below. Any other key is refused:
 * it may name a variant this model would run wrongly. */
static const char *const KNOWN_KEYS[] = {
    /* read */
    "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "intermediate_size", "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta",
    "rope_scaling", "rope_parameters", "tie_word_embeddings", "hidden_act", "head_dim",
    "attention_bias", "mlp_bias", "sliding_window", "use_sliding_window", "max_window_layers",
    "layer_types", "architectures",
    /* no effect on the forward */
    "_name_or_path", "torch_dtype", "dtype", "transformers_version", "bos_token_id", "eos_token_id",
    "pad_token_id", "initializer_range", "use_cache", "pretraining_tp", "attention_dropout",
    "output_attentions", "output_hidden_states", "return_dict", "tokenizer_class",
    "_attn_implementation_autoset", "unsloth_version", "is_llama_config", "torchscript",
    "use_return_dict"};

static fc_status check_known(fc_ctx *ctx, const fc__json_doc *d, const fc__json *root) {
    for (const fc__json *c = fc__json_first(d, root); c; c = fc__json_next(d, c)) {
        bool known = false;
        for (size_t i = 0; !known && i < sizeof KNOWN_KEYS / sizeof KNOWN_KEYS[0]; i++)
            known = strcmp(c->key, KNOWN_KEYS[i]) == 0;
        if (!known)
            return fc_ctx_fail(ctx, FC_ERR_UNSUPPORTED,
                               "%s: config.json: key '%.64s' is not known here (it may change "
                               "the model, so it is not ignored)",
                               OP, c->key);
    }
    return FC_OK;
}

/* Llama 3.1's rope scaling, as llama.cpp's converter turns it into
 * rope_freqs factors: pair i of inverse frequency f = base^(-2i/n) keeps
 * f where its wavelength 2 pi / f is below orig / high, is divided by
 * factor where above orig / low, and in between by the blend
 * 1 / ((1 - s) / factor + s), s = (orig / wavelength - low) / (high - low).
 * That is Hugging Face's _compute_llama3_parameters written as a divisor. */
static void llama3_factors(float *ff, int64_t half, double base, double factor, double low,
                           double high, double orig) {
    for (int64_t i = 0; i < half; i++) {
        double f = pow(base, -2.0 * (double)i / (double)(2 * half));
        double wl = 2.0 * M_PI / f;
        double d;
        if (wl < orig / high)
            d = 1.0;
        else if (wl > orig / low)
            d = factor;
        else {
            double s = (orig / wl - low) / (high - low);
            d = 1.0 / ((1.0 - s) / factor + s);
        }
        ff[i] = (float)d;
    }
}

typedef struct hf_rope {
    bool llama3;
    double factor, low, high, orig;
} hf_rope;

static fc_status read_rope(fc_ctx *ctx, const fc__json_doc *d, const fc__json *root,
                           fc_llama_config *cfg, hf_rope *r) {
    fc_status st;
    const fc__json *params = member(d, root, "rope_parameters"); /* transformers 5 */
    const fc__json *sc = params ? params : member(d, root, "rope_scaling");
    const char *where = params ? "rope_parameters" : "rope_scaling";
    if ((st = cfg_float(ctx, d, root, "rope_theta", false, 10000.0, &cfg->rope_base))) return st;
    if (params &&
        (st = cfg_float(ctx, d, params, "rope_theta", false, cfg->rope_base, &cfg->rope_base)))
        return st;
    cfg->rope_scale = 1.0;
    if (!sc) return FC_OK;
    if (sc->type != FC__JSON_OBJECT)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: config.json: '%s' is %s, not an object", OP,
                           where, JSON_TYPES[sc->type]);
    const fc__json *t = member(d, sc, "rope_type");
    if (!t) t = member(d, sc, "type");
    if (!t || t->type != FC__JSON_STRING)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: config.json: '%s' has no rope_type string", OP,
                           where);
    if (fc__json_is(t, "default")) return FC_OK;
    if (fc__json_is(t, "linear")) {
        double factor;
        if ((st = cfg_float(ctx, d, sc, "factor", true, 1.0, &factor))) return st;
        cfg->rope_scale = 1.0 / factor;
        return FC_OK;
    }
    if (fc__json_is(t, "llama3")) {
        int64_t orig;
        if ((st = cfg_float(ctx, d, sc, "factor", true, 1.0, &r->factor)) ||
            (st = cfg_float(ctx, d, sc, "low_freq_factor", true, 1.0, &r->low)) ||
            (st = cfg_float(ctx, d, sc, "high_freq_factor", true, 1.0, &r->high)) ||
            (st = cfg_int(ctx, d, sc, "original_max_position_embeddings", true, 0, &orig)))
            return st;
        if (!(r->high > r->low))
            return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                               "%s: config.json: %s.high_freq_factor = %g must exceed "
                               "low_freq_factor = %g",
                               OP, where, r->high, r->low);
        r->llama3 = true;
        r->orig = (double)orig;
        cfg->rope_freqs = true;
        return FC_OK;
    }
    return fc_ctx_fail(ctx, FC_ERR_UNSUPPORTED,
                       "%s: config.json: %s type '%.64s' is not supported (only default, linear, "
                       "llama3)",
                       OP, where, t->str);
}

/* config.json into cfg and *arch, every key checked. */
static fc_status read_config(fc_ctx *ctx, const fc__json_doc *d, fc_llama_config *cfg,
                             const llama_arch **arch, hf_rope *rope) {
    const fc__json *root = &d->v[0];
    const fc__json *mt = member(d, root, "model_type");
    if (!mt)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: config.json: key 'model_type' is missing", OP);
    if (mt->type != FC__JSON_STRING)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: config.json: 'model_type' is %s, not a string",
                           OP, JSON_TYPES[mt->type]);
    const llama_arch *a = fc__llama_arch_hf(mt->str);
    if (!a)
        return fc_ctx_fail(ctx, FC_ERR_UNSUPPORTED,
                           "%s: config.json: model_type '%.64s' is not supported (only %s)", OP,
                           mt->str, fc__llama_arch_list(true));
    *arch = a;
    fc_status st;
    if ((st = check_known(ctx, d, root))) return st;
    cfg->arch = a->id;
    cfg->rope_mode = FC_ROPE_NEOX;
    if ((st = cfg_int(ctx, d, root, "hidden_size", true, 0, &cfg->dim)) ||
        (st = cfg_int(ctx, d, root, "num_hidden_layers", true, 0, &cfg->n_layers)) ||
        (st = cfg_int(ctx, d, root, "num_attention_heads", true, 0, &cfg->n_heads)) ||
        (st =
             cfg_int(ctx, d, root, "num_key_value_heads", false, cfg->n_heads, &cfg->n_kv_heads)) ||
        (st = cfg_int(ctx, d, root, "intermediate_size", true, 0, &cfg->ff_dim)) ||
        (st = cfg_int(ctx, d, root, "vocab_size", true, 0, &cfg->vocab)) ||
        (st = cfg_int(ctx, d, root, "max_position_embeddings", true, 0, &cfg->context)) ||
        (st = cfg_float(ctx, d, root, "rms_norm_eps", false, 1e-6, &cfg->rms_eps)) ||
        (st = cfg_bool(ctx, d, root, "tie_word_embeddings", &cfg->tied_output)) ||
        (st = read_rope(ctx, d, root, cfg, rope)))
        return st;
    static const llama_key_names names = {"hidden_size", "num_attention_heads",
                                          "num_key_value_heads", "head_dim"};
    cfg->rope_dims = cfg->dim % cfg->n_heads ? 2 : cfg->dim / cfg->n_heads;
    if ((st = fc__llama_check_sizes(ctx, cfg, FC_ERR_FORMAT, &names))) return st;
    int64_t hd = cfg->dim / cfg->n_heads, v;
    if ((st = cfg_int(ctx, d, root, "head_dim", false, hd, &v))) return st;
    if (v != hd)
        return fc_ctx_fail(ctx, FC_ERR_UNSUPPORTED,
                           "%s: config.json: head_dim = %lld differs from hidden_size / "
                           "num_attention_heads = %lld, which is not supported",
                           OP, (long long)v, (long long)hd);
    const fc__json *act = member(d, root, "hidden_act");
    if (act && !fc__json_is(act, "silu"))
        return fc_ctx_fail(ctx, FC_ERR_UNSUPPORTED,
                           "%s: config.json: hidden_act '%.64s' is not supported (only silu)", OP,
                           act->type == FC__JSON_STRING ? act->str : JSON_TYPES[act->type]);
    static const char *const biases[2] = {"attention_bias", "mlp_bias"};
    for (int i = 0; i < 2; i++) {
        bool b = false;
        if ((st = cfg_bool(ctx, d, root, biases[i], &b))) return st;
        if (b)
            return fc_ctx_fail(ctx, FC_ERR_UNSUPPORTED,
                               "%s: config.json: %s = true is not supported for model_type %s", OP,
                               biases[i], a->hf);
    }
    bool use_window = a->window;
    if ((st = cfg_bool(ctx, d, root, "use_sliding_window", &use_window))) return st;
    if (use_window && !a->window)
        return fc_ctx_fail(ctx, FC_ERR_UNSUPPORTED,
                           "%s: config.json: use_sliding_window = true (windows on some layers) "
                           "is not supported for model_type %s",
                           OP, a->hf);
    if (use_window &&
        (st = cfg_int(ctx, d, root, "sliding_window", false, 0, &cfg->sliding_window)))
        return st;
    const fc__json *lt = member(d, root, "layer_types");
    if (lt && lt->type != FC__JSON_ARRAY)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: config.json: 'layer_types' is %s, not an array",
                           OP, JSON_TYPES[lt->type]);
    const char *want = cfg->sliding_window ? "sliding_attention" : "full_attention";
    for (const fc__json *c = lt ? fc__json_first(d, lt) : NULL; c; c = fc__json_next(d, c))
        if (!fc__json_is(c, want))
            return fc_ctx_fail(ctx, FC_ERR_UNSUPPORTED,
                               "%s: config.json: layer_types mixes attention kinds (an entry is "
                               "not '%s'), which is not supported",
                               OP, want);
    return FC_OK;
}

/* ---- shards ------------------------------------------------------------------- */

typedef struct shard {
    const char *name; /* borrowed from the index document, or "model.safetensors" */
    fc_st_file *f;
} shard;

typedef struct loader {
    fc_ctx *ctx;
    const fc_allocator *al;
    const char *dir;
    fc__json_doc index; /* the shard index, when there is one */
    const fc__json *weight_map;
    shard *shards;
    int64_t n_shards;
} loader;

static int64_t shard_of(const loader *L, const char *name) {
    for (int64_t i = 0; i < L->n_shards; i++)
        if (strcmp(L->shards[i].name, name) == 0) return i;
    return -1;
}

/* Reads the index (when present) and opens every shard once. */
static fc_status open_shards(loader *L, unsigned io_flags) {
    fc_ctx *ctx = L->ctx;
    char *ipath = join(L->dir, "model.safetensors.index.json");
    if (!ipath) return fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory", OP);
    fc_status st = FC_OK;
    int64_t cap = 1;
    if (exists(ipath)) {
        st = read_json(ctx, L->al, ipath, &L->index);
        free(ipath);
        if (st) return st;
        L->weight_map = member(&L->index, &L->index.v[0], "weight_map");
        if (!L->weight_map || L->weight_map->type != FC__JSON_OBJECT)
            return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                               "%s: model.safetensors.index.json: 'weight_map' is missing or not "
                               "an object",
                               OP);
        cap = L->weight_map->count > 0 ? L->weight_map->count : 1;
    } else {
        free(ipath);
    }
    L->shards = calloc((size_t)cap, sizeof *L->shards);
    if (!L->shards) return fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory", OP);
    if (!L->weight_map) {
        L->shards[L->n_shards++].name = "model.safetensors";
    } else {
        for (const fc__json *e = fc__json_first(&L->index, L->weight_map); e;
             e = fc__json_next(&L->index, e)) {
            if (e->type != FC__JSON_STRING || !e->len || strchr(e->str, '/') || e->str[0] == '.')
                return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                                   "%s: model.safetensors.index.json: weight_map['%.64s'] is not "
                                   "a file name of the directory",
                                   OP, e->key);
            if (shard_of(L, e->str) < 0) L->shards[L->n_shards++].name = e->str;
        }
    }
    char err[256];
    fc_io_opts io = {
        .allocator = L->al, .flags = io_flags & FC_IO_NO_MMAP, .errbuf = err, .errcap = sizeof err};
    for (int64_t i = 0; i < L->n_shards && !st; i++) {
        char *p = join(L->dir, L->shards[i].name);
        if (!p) return fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory", OP);
        if (!L->weight_map && !exists(p))
            st = fc_ctx_fail(ctx, FC_ERR_IO,
                             "%s: '%s' has neither model.safetensors nor "
                             "model.safetensors.index.json",
                             OP, L->dir);
        else if ((st = fc_safetensors_open(p, &io, &L->shards[i].f)))
            st = fc_ctx_fail(ctx, st, "%s: %s", OP, err);
        free(p);
    }
    return st;
}

/* Every tensor where the index says, none in two shards; the count of
 * tensors the model will hold into *n_mapped. */
static fc_status check_shards(loader *L, int64_t n_layers, int64_t *n_mapped) {
    fc_ctx *ctx = L->ctx;
    *n_mapped = 0;
    for (int64_t s = 0; s < L->n_shards; s++) {
        const fc_st_file *f = L->shards[s].f;
        for (int64_t i = 0; i < fc_safetensors_tensor_count(f); i++) {
            fc_io_tensor info;
            fc_status st = fc_safetensors_tensor_info(f, i, &info);
            if (st)
                return fc_ctx_fail(ctx, st, "%s: %s: tensor %lld", OP, L->shards[s].name,
                                   (long long)i);
            for (int64_t o = 0; o < L->n_shards; o++)
                if (o != s && fc_safetensors_find(L->shards[o].f, info.name) >= 0)
                    return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                                       "%s: shards overlap: tensor '%s' is in both '%s' and '%s'",
                                       OP, info.name, L->shards[s].name, L->shards[o].name);
            if (L->weight_map) {
                const fc__json *w = fc__json_get(&L->index, L->weight_map, info.name);
                if (!w || !fc__json_is(w, L->shards[s].name))
                    return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                                       "%s: tensor '%s' is in shard '%s', but weight_map %s%s%s",
                                       OP, info.name, L->shards[s].name,
                                       w ? "puts it in '" : "does not list it",
                                       w && w->type == FC__JSON_STRING ? w->str : "", w ? "'" : "");
            }
            char g[96];
            int64_t layer;
            int kind = map_name(info.name, g, sizeof g, &layer);
            if (kind == NAME_UNKNOWN)
                return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                                   "%s: %s: tensor '%s' is not a weight of this architecture", OP,
                                   L->shards[s].name, info.name);
            if (layer >= n_layers)
                return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                                   "%s: tensor '%s' is of layer %lld, config.json's "
                                   "num_hidden_layers is %lld",
                                   OP, info.name, (long long)layer, (long long)n_layers);
            if (kind == NAME_MAPPED) ++*n_mapped;
        }
    }
    for (const fc__json *e = L->weight_map ? fc__json_first(&L->index, L->weight_map) : NULL; e;
         e = fc__json_next(&L->index, e)) {
        int64_t s = shard_of(L, e->str);
        if (fc_safetensors_find(L->shards[s].f, e->key) < 0)
            return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                               "%s: weight_map puts tensor '%.96s' in '%s', which lacks it", OP,
                               e->key, e->str);
    }
    return FC_OK;
}

static void loader_free(loader *L) {
    for (int64_t i = 0; L->shards && i < L->n_shards; i++)
        fc_safetensors_close(L->shards[i].f);
    free(L->shards);
    if (L->index.al) fc__json_free(&L->index);
}

/* ---- the model ------------------------------------------------------------------ */

static fc_status load_tensors(loader *L, fc_llama *m, const fc_llama_load_opts *o,
                              const fc_llama_config *cfg) {
    fc_ctx *ctx = L->ctx;
    fc_status st = FC_OK;
    for (int64_t s = 0; s < L->n_shards && !st; s++) {
        const fc_st_file *f = L->shards[s].f;
        for (int64_t i = 0; i < fc_safetensors_tensor_count(f) && !st; i++) {
            fc_io_tensor info;
            if ((st = fc_safetensors_tensor_info(f, i, &info))) break;
            char g[96];
            int64_t layer;
            if (map_name(info.name, g, sizeof g, &layer) != NAME_MAPPED) continue;
            if (!fc__llama_arch(cfg->arch)->qkv_bias && strstr(g, ".bias"))
                return fc_ctx_fail(ctx, FC_ERR_UNSUPPORTED,
                                   "%s: tensor '%s': model_type %s has no q/k/v biases", OP,
                                   info.name, fc__llama_arch(cfg->arch)->hf);
            /* tied: the head is the embedding, whatever lm_head holds */
            if (cfg->tied_output && strcmp(g, "output.weight") == 0) continue;
            bool param = o->trainable && info.dtype == FC_F32;
            fc_tensor *t = fc_safetensors_load(ctx, f, info.name, param ? FC_IO_COPY : 0);
            if (t && param && (st = fc_requires_grad(t, true))) {
                fc_release(t);
                break;
            }
            st = fc__llama_add(ctx, m, g, info.name, t);
        }
    }
    return st;
}

fc_status fc_llama_load_hf(fc_ctx *ctx, const char *dir, const fc_llama_load_opts *opts,
                           fc_llama **out) {
    if (out) *out = NULL;
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!dir || !out) return fc_ctx_fail(ctx, FC_ERR_NULL_ARG, "%s: NULL dir or out", OP);
    fc_llama_load_opts o = opts ? *opts : (fc_llama_load_opts){0};
    loader L = {.ctx = ctx, .al = o.allocator ? o.allocator : fc_default_allocator(), .dir = dir};
    fc_llama_config cfg = {0};
    const llama_arch *arch = NULL;
    hf_rope rope = {0};
    fc__json_doc conf = {0};
    fc_llama *m = NULL;
    int64_t n_mapped = 0;
    char *cpath = join(dir, "config.json");
    fc_status st = cpath ? read_json(ctx, L.al, cpath, &conf)
                         : fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory", OP);
    free(cpath);
    if (!st) st = read_config(ctx, &conf, &cfg, &arch, &rope);
    if (conf.al) fc__json_free(&conf); /* parsed, or failed part way */
    if (!st) st = open_shards(&L, o.io_flags);
    if (!st) st = check_shards(&L, cfg.n_layers, &n_mapped);
    /* every layer has 9 tensors or more: a layer count above the
     * tensors' is refused before anything is sized by it */
    if (!st && cfg.n_layers > n_mapped)
        st = fc_ctx_fail(ctx, FC_ERR_FORMAT,
                         "%s: config.json's num_hidden_layers = %lld needs more tensors than the "
                         "%lld the checkpoint has",
                         OP, (long long)cfg.n_layers, (long long)n_mapped);
    if (!st) {
        m = fc__llama_alloc(ctx, &cfg, n_mapped + 1);
        if (m) m->src_names = calloc((size_t)(n_mapped + 1), sizeof *m->src_names);
        if (!m || !m->src_names) st = fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory", OP);
    }
    if (!st) st = load_tensors(&L, m, &o, &cfg);
    if (!st && rope.llama3) {
        int64_t half = m->cfg.rope_dims / 2;
        float *ff = malloc(sizeof *ff * (size_t)half);
        if (!ff) {
            st = fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory", OP);
        } else {
            llama3_factors(ff, half, cfg.rope_base, rope.factor, rope.low, rope.high, rope.orig);
            st = fc__llama_add(ctx, m, "rope_freqs.weight", NULL,
                               fc_tensor_from_data(ctx, FC_F32, (int64_t[]){half}, 1, ff));
            free(ff);
        }
    }
    if (!st) st = fc__llama_bind_all(ctx, m);
    loader_free(&L);
    if (st) {
        fc_llama_free(m);
        return st;
    }
    *out = m;
    return FC_OK;
}
