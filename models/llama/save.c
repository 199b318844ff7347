/* SPDX-License-Identifier: MIT */
/* llama/save.c - writing a model back as GGUF.
 *
 * Metadata: every key/value of the source file is rebuilt as an fc_gguf_kv
 * (the reader hands out values, the writer takes C data), in the file's
 * order, so a round trip keeps them all, tokenizer arrays included. A
 * model without a file gets the keys its config implies.
 *
 * A Hugging Face checkpoint (rotate-half rope over unpermuted Q/K rows)
 * written as GGUF "llama" gets llama.cpp converter's row permutation, so
 * the file means the same under adjacent-pair rope; "qwen2" keeps the rows.
 *
 * Tensors: each is converted on its own (a block dtype quantizes from a
 * transient f32 copy of that one tensor, released at once); the converted
 * tensors are then written in the model's order by fc_gguf_save.
 *
 * fc__llama_save is the same with a seam for fc_lora_merge_save: a
 * callback may hand a substitute f32 value for a tensor, which is then
 * converted as the tensor itself would be and released at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama/llama_internal.h"

/* Every allocation of one save, freed together. */
typedef struct arena {
    void **blocks;
    size_t n, cap;
    bool failed;
} arena;

static void *arena_alloc(arena *a, size_t size) {
    if (a->failed) return NULL;
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        void **b = realloc(a->blocks, cap * sizeof *b);
        if (!b) {
            a->failed = true;
            return NULL;
        }
        a->blocks = b;
        a->cap = cap;
    }
    void *p = calloc(1, size ? size : 1);
    if (!p) {
        a->failed = true;
        return NULL;
    }
    a->blocks[a->n++] = p;
    return p;
}

static void arena_free(arena *a) {
    for (size_t i = 0; i < a->n; i++)
        free(a->blocks[i]);
    free(a->blocks);
}

static const char *dup_string(arena *a, const fc_gguf_value *v) {
    const char *s = "";
    size_t n = 0;
    fc_gguf_value_string(v, &s, &n);
    char *c = arena_alloc(a, n + 1);
    if (c) memcpy(c, s, n);
    return c;
}

static size_t scalar_size(fc_gguf_type t) {
    switch (t) {
    case FC_GGUF_U8:
    case FC_GGUF_I8:
        return 1;
    case FC_GGUF_BOOL:
        return sizeof(bool);
    case FC_GGUF_U16:
    case FC_GGUF_I16:
        return 2;
    case FC_GGUF_U32:
    case FC_GGUF_I32:
    case FC_GGUF_F32:
        return 4;
    default:
        return 8;
    }
}

/* One scalar into C storage of its type. */
static void *scalar_copy(arena *a, const fc_gguf_value *v, fc_gguf_type t) {
    void *p = arena_alloc(a, 8);
    if (!p) return NULL;
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    bool b = false;
    switch (t) {
    case FC_GGUF_U8:
        fc_gguf_value_uint(v, &u);
        *(uint8_t *)p = (uint8_t)u;
        break;
    case FC_GGUF_U16:
        fc_gguf_value_uint(v, &u);
        *(uint16_t *)p = (uint16_t)u;
        break;
    case FC_GGUF_U32:
        fc_gguf_value_uint(v, &u);
        *(uint32_t *)p = (uint32_t)u;
        break;
    case FC_GGUF_U64:
        fc_gguf_value_uint(v, &u);
        *(uint64_t *)p = u;
        break;
    case FC_GGUF_I8:
        fc_gguf_value_int(v, &i);
        *(int8_t *)p = (int8_t)i;
        break;
    case FC_GGUF_I16:
        fc_gguf_value_int(v, &i);
        *(int16_t *)p = (int16_t)i;
        break;
    case FC_GGUF_I32:
        fc_gguf_value_int(v, &i);
        *(int32_t *)p = (int32_t)i;
        break;
    case FC_GGUF_I64:
        fc_gguf_value_int(v, &i);
        *(int64_t *)p = i;
        break;
    case FC_GGUF_F32:
        fc_gguf_value_float(v, &d);
        *(float *)p = (float)d;
        break;
    case FC_GGUF_F64:
        fc_gguf_value_float(v, &d);
        *(double *)p = d;
        break;
    case FC_GGUF_BOOL:
        fc_gguf_value_bool(v, &b);
        *(bool *)p = b;
        break;
    default:
        break;
    }
    return p;
}

/* Fills kv (key excluded) from v; nested arrays recurse. */
static void value_to_kv(arena *a, const fc_gguf_value *v, fc_gguf_kv *kv) {
    fc_gguf_type t = fc_gguf_value_type(v);
    kv->type = t;
    if (t == FC_GGUF_STRING) {
        kv->data = dup_string(a, v);
        return;
    }
    if (t != FC_GGUF_ARRAY) {
        kv->data = scalar_copy(a, v, t);
        return;
    }
    fc_gguf_type et = FC_GGUF_U8;
    uint64_t count = 0;
    fc_gguf_array_info(v, &et, &count);
    kv->elem_type = et;
    kv->count = count;
    if (et == FC_GGUF_STRING) {
        const char **s = arena_alloc(a, sizeof *s * (size_t)count);
        for (uint64_t i = 0; s && i < count; i++)
            s[i] = dup_string(a, fc_gguf_array_item(v, i));
        kv->data = s;
    } else if (et == FC_GGUF_ARRAY) {
        fc_gguf_kv *sub = arena_alloc(a, sizeof *sub * (size_t)count);
        for (uint64_t i = 0; sub && i < count; i++)
            value_to_kv(a, fc_gguf_array_item(v, i), &sub[i]);
        kv->data = sub;
    } else {
        const void *raw = NULL;
        size_t es = 0;
        fc_gguf_array_data(v, &raw, &es);
        size_t cs = scalar_size(et);
        uint8_t *d = arena_alloc(a, cs * (size_t)count);
        /* bool is one byte 0/1 in the file; the writer reads C bools */
        for (uint64_t i = 0; d && raw && i < count; i++) {
            if (et == FC_GGUF_BOOL)
                ((bool *)d)[i] = ((const uint8_t *)raw)[i] != 0;
            else
                memcpy(d + i * cs, (const uint8_t *)raw + i * es, cs);
        }
        kv->data = d;
    }
}

/* "<arch>.<suffix>", kept in the arena. */
static const char *akey(arena *a, const char *arch, const char *suffix) {
    size_t n = strlen(arch) + strlen(suffix) + 2;
    char *k = arena_alloc(a, n);
    if (k) snprintf(k, n, "%s.%s", arch, suffix);
    return k ? k : "";
}

/* The keys of a model without a file (fc_llama_new, a Hugging Face
 * checkpoint), under the architecture its table row is written as. */
static int64_t config_kvs(arena *a, const fc_llama_config *c, fc_gguf_kv *kv) {
    const char *arch = fc__llama_arch(c->arch)->gguf_save;
    int64_t n = 0;
    kv[n++] = (fc_gguf_kv){.key = "general.architecture", .type = FC_GGUF_STRING, .data = arch};
    struct {
        const char *key;
        int64_t v;
    } ints[] = {{"context_length", c->context},         {"embedding_length", c->dim},
                {"block_count", c->n_layers},           {"feed_forward_length", c->ff_dim},
                {"attention.head_count", c->n_heads},   {"attention.head_count_kv", c->n_kv_heads},
                {"rope.dimension_count", c->rope_dims}, {"vocab_size", c->vocab}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        const char *key = akey(a, arch, ints[i].key);
        /* u32, llama.cpp's type for these keys, when it holds the value;
         * u64 rather than a truncated u32 when not (every size is >= 1) */
        if (ints[i].v <= UINT32_MAX) {
            uint32_t *p = arena_alloc(a, sizeof *p);
            if (p) *p = (uint32_t)ints[i].v;
            kv[n++] = (fc_gguf_kv){.key = key, .type = FC_GGUF_U32, .data = p};
        } else {
            uint64_t *p = arena_alloc(a, sizeof *p);
            if (p) *p = (uint64_t)ints[i].v;
            kv[n++] = (fc_gguf_kv){.key = key, .type = FC_GGUF_U64, .data = p};
        }
    }
    struct {
        const char *key;
        double v;
    } fl[] = {{"rope.freq_base", c->rope_base},
              {"attention.layer_norm_rms_epsilon", c->rms_eps},
              {"rope.scaling.factor", 1.0 / c->rope_scale}};
    for (size_t i = 0; i < (c->rope_scale != 1.0 ? 3u : 2u); i++) {
        float *p = arena_alloc(a, sizeof *p);
        if (p) *p = (float)fl[i].v;
        kv[n++] = (fc_gguf_kv){.key = akey(a, arch, fl[i].key), .type = FC_GGUF_F32, .data = p};
    }
    if (c->rope_scale != 1.0)
        kv[n++] = (fc_gguf_kv){
            .key = akey(a, arch, "rope.scaling.type"), .type = FC_GGUF_STRING, .data = "linear"};
    /* no vocabulary: llama.cpp's loader requires the key, and takes ids as
     * they are with "none" */
    kv[n++] = (fc_gguf_kv){.key = "tokenizer.ggml.model", .type = FC_GGUF_STRING, .data = "none"};
    return n;
}

/* Whether a model without a file can be written as its GGUF
 * architecture, and whether its Q/K rows need llama.cpp's permutation
 * (a rotate-half model, a Hugging Face checkpoint, written for an
 * adjacent-pair architecture): the error recorded when it cannot. */
static fc_status layout_check(fc_ctx *ctx, const fc_llama *m, const char *op, bool *permute) {
    const fc_llama_config *c = &m->cfg;
    const llama_arch *a = fc__llama_arch(c->arch);
    *permute = false;
    if (m->file) return FC_OK;
    if (c->sliding_window > 0 && c->sliding_window < c->context)
        return fc_ctx_fail(ctx, FC_ERR_UNSUPPORTED,
                           "%s: sliding_window = %lld below the context %lld: GGUF '%s' has no "
                           "window llama.cpp would apply",
                           op, (long long)c->sliding_window, (long long)c->context, a->gguf_save);
    if (c->rope_mode == a->gguf_rope) return FC_OK;
    if (c->rope_mode != FC_ROPE_NEOX || c->rope_dims != m->head_dim)
        return fc_ctx_fail(ctx, FC_ERR_UNSUPPORTED,
                           "%s: rope_mode %d with %lld of %lld dims rotated has no GGUF '%s' "
                           "layout",
                           op, (int)c->rope_mode, (long long)c->rope_dims, (long long)m->head_dim,
                           a->gguf_save);
    *permute = true;
    return FC_OK;
}

/* The head count of name when it is a Q or K weight (rows to permute),
 * else 0. */
static int64_t qk_heads(const fc_llama *m, const char *name) {
    const char *p = strncmp(name, "blk.", 4) == 0 ? strchr(name + 4, '.') : NULL;
    if (!p) return 0;
    if (strcmp(p, ".attn_q.weight") == 0) return m->cfg.n_heads;
    if (strcmp(p, ".attn_k.weight") == 0) return m->cfg.n_kv_heads;
    return 0;
}

/* llama.cpp's convert permutation of Q/K rows: within each head, the
 * rotate-half pair (i, i + hd/2) moves to the adjacent pair (2i, 2i + 1),
 * so adjacent-pair rope over the result computes rotate-half rope over
 * w: row (h, i, j) of the result is row (h, j, i) of w viewed as
 * [heads, 2, hd/2, in]. A new reference. */
static fc_tensor *permute_rows(fc_ctx *ctx, fc_tensor *w, int64_t heads) {
    const int64_t *s = fc_tensor_shape(w);
    int64_t rows = s[0], cols = s[1], hd = rows / heads;
    fc_tensor *v = fc_reshape(ctx, w, (int64_t[]){heads, 2, hd / 2, cols}, 4);
    fc_tensor *p = fc_permute(ctx, v, (const int[]){0, 2, 1, 3});
    fc_tensor *c = fc_contiguous(ctx, p);
    fc_tensor *y = fc_reshape(ctx, c, (int64_t[]){rows, cols}, 2);
    fc_release(v);
    fc_release(p);
    fc_release(c);
    return y;
}

/* kvs[0, n) with extra[0, n_extra) laid over it: a key already there takes
 * the extra value in its place, the rest are appended (kvs has room).
 * Returns the new count. */
static int64_t merge_kvs(fc_gguf_kv *kvs, int64_t n, const fc_gguf_kv *extra, int64_t n_extra) {
    int64_t total = n;
    for (int64_t e = 0; e < n_extra; e++) {
        int64_t i = 0;
        while (i < n && !(kvs[i].key && extra[e].key && !strcmp(kvs[i].key, extra[e].key)))
            i++;
        kvs[i < n ? i : total++] = extra[e];
    }
    return total;
}

fc_llama_save_opts fc_llama_save_opts_default(void) {
    return (fc_llama_save_opts){.dtype = FC_DTYPE_COUNT, .fallback = FC_DTYPE_COUNT};
}

/* The dtype tensor t is written in, or FC_DTYPE_COUNT with the error recorded. */
static fc_dtype target_dtype(fc_ctx *ctx, const char *op, const fc_llama_save_opts *o,
                             const char *name, fc_tensor *t) {
    fc_dtype dt = fc_tensor_dtype(t), want = dt;
    if (fc_tensor_rank(t) == 2 && o->dtype != FC_DTYPE_COUNT) want = o->dtype;
    if (o->pick) {
        fc_dtype p = o->pick(name, t, o->user);
        if (p != FC_DTYPE_COUNT) want = p;
    }
    if (!fc_dtype_is_valid(want)) {
        fc_ctx_fail(ctx, FC_ERR_DTYPE, "%s: tensor '%s': invalid dtype %d", op, name, (int)want);
        return FC_DTYPE_COUNT;
    }
    int64_t cols = fc_tensor_shape(t)[fc_tensor_rank(t) - 1];
    if (want != dt && fc_dtype_is_block(want) && cols % fc_dtype_block_elems(want)) {
        if (o->fallback != FC_DTYPE_COUNT && o->fallback != want) {
            fc_llama_save_opts f = *o;
            f.dtype = o->fallback;
            f.fallback = FC_DTYPE_COUNT;
            f.pick = NULL;
            return target_dtype(ctx, op, &f, name, t);
        }
        fc_ctx_fail(ctx, FC_ERR_INVALID_SHAPE,
                    "%s: tensor '%s' has rows of %lld, not a multiple of %s's block "
                    "of %lld (set a fallback dtype)",
                    op, name, (long long)cols, fc_dtype_name(want),
                    (long long)fc_dtype_block_elems(want));
        return FC_DTYPE_COUNT;
    }
    return want;
}

/* llama.cpp's general.file_type (its enum llama_ftype: "mostly" this dtype,
 * 1-D tensors aside) for a model whose 2-D weights are mostly dt, or -1
 * where the enum has no member for dt. A k-quant maps to its "_S" mix,
 * the one nearest to a single type throughout. */
static int64_t file_type_of(fc_dtype dt) {
    switch (dt) {
    case FC_F32: return 0;
    case FC_F16: return 1;
    case FC_Q4_0: return 2;
    case FC_Q4_1: return 3;
    case FC_Q8_0: return 7;
    case FC_Q5_0: return 8;
    case FC_Q5_1: return 9;
    case FC_Q2_K: return 10;
    case FC_Q3_K: return 11;
    case FC_Q4_K: return 14;
    case FC_Q5_K: return 16;
    case FC_Q6_K: return 18;
    case FC_IQ2_XXS: return 19;
    case FC_IQ2_XS: return 20;
    case FC_IQ3_XXS: return 23;
    case FC_IQ1_S: return 24;
    case FC_IQ4_NL: return 25;
    case FC_IQ3_S: return 26;
    case FC_IQ2_S: return 28;
    case FC_IQ4_XS: return 30;
    case FC_IQ1_M: return 31;
    case FC_BF16: return 32;
    case FC_TQ1_0: return 36;
    case FC_TQ2_0: return 37;
    case FC_NVFP4: return 39;
    case FC_Q1_0: return 40;
    case FC_Q2_0: return 41;
    default: return -1;
    }
}

/* When the save changes any tensor's dtype (or the model has no file),
 * general.file_type is set from the dtype most 2-D tensors are written in
 * (the first met among equals), so that readers such as llama.cpp name
 * the file's type rightly; it is dropped when llama.cpp's enum has no
 * member for that dtype. A value the caller's extra keys give stays.
 * kvs has room for one more key. Returns the new count. */
static int64_t set_file_type(arena *a, const fc_llama *m, fc_tensor *const *out,
                             const fc_llama_save_opts *o, fc_gguf_kv *kvs, int64_t n_kv) {
    static const char KEY[] = "general.file_type";
    for (int64_t e = 0; e < o->n_kvs; e++)
        if (o->kvs[e].key && !strcmp(o->kvs[e].key, KEY)) return n_kv;
    bool changed = !m->file;
    int64_t count[FC_DTYPE_COUNT] = {0};
    fc_dtype most = FC_DTYPE_COUNT;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        fc_dtype dt = fc_tensor_dtype(out[i]);
        changed = changed || dt != fc_tensor_dtype(m->tensors[i]);
        if (fc_tensor_rank(out[i]) != 2) continue;
        if (++count[dt] > (most == FC_DTYPE_COUNT ? 0 : count[most])) most = dt;
    }
    if (!changed || most == FC_DTYPE_COUNT) return n_kv;
    int64_t ft = file_type_of(most), i = 0;
    while (i < n_kv && strcmp(kvs[i].key, KEY))
        i++;
    if (ft < 0) { /* no name for it: no key rather than a wrong one */
        if (i < n_kv) memmove(kvs + i, kvs + i + 1, sizeof *kvs * (size_t)(n_kv - i - 1));
        return i < n_kv ? n_kv - 1 : n_kv;
    }
    uint32_t *v = arena_alloc(a, sizeof *v);
    if (v) *v = (uint32_t)ft;
    kvs[i] = (fc_gguf_kv){.key = KEY, .type = FC_GGUF_U32, .data = v};
    return i < n_kv ? n_kv : n_kv + 1;
}

static fc_tensor *convert(fc_ctx *ctx, fc_tensor *t, fc_dtype want) {
    fc_dtype dt = fc_tensor_dtype(t);
    if (want == dt) return fc_retain(t);
    if (!fc_dtype_is_block(want) && !fc_dtype_is_block(dt)) return fc_to(ctx, t, want);
    fc_tensor *f = dt == FC_F32 ? fc_retain(t) : fc_to(ctx, t, FC_F32);
    fc_tensor *y = want == FC_F32 ? fc_retain(f) : fc_to(ctx, f, want);
    fc_release(f);
    return y;
}

fc_status fc_llama_save(fc_ctx *ctx, const fc_llama *m, const char *path,
                        const fc_llama_save_opts *opts) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!m || !path) return fc_ctx_fail(ctx, FC_ERR_NULL_ARG, "fc_llama_save: NULL model or path");
    return fc__llama_save(ctx, m, path, opts, "fc_llama_save", NULL, NULL);
}

fc_status fc__llama_save(fc_ctx *ctx, const fc_llama *m, const char *path,
                         const fc_llama_save_opts *opts, const char *op, fc__llama_subst_fn subst,
                         void *user) {
    fc_llama_save_opts o = opts ? *opts : fc_llama_save_opts_default();
    if (o.n_kvs < 0 || (o.n_kvs > 0 && !o.kvs))
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG, "%s: extra metadata of %lld keys at %p", op,
                           (long long)o.n_kvs, (const void *)o.kvs);
    int64_t n_kv = m->file ? fc_gguf_kv_count(m->file) : 0;
    /* room for the model's keys (or config_kvs' 16), every extra one and
     * general.file_type, its size checked: n_kvs is the caller's */
    int64_t room = 0, bytes = 0;
    if (!llama_mad(1, o.n_kvs, (n_kv ? n_kv : 16) + 1, &room) ||
        !llama_mad(room, (int64_t)sizeof(fc_gguf_kv), 0, &bytes) || (uint64_t)bytes > SIZE_MAX)
        return fc_ctx_fail(ctx, FC_ERR_OVERFLOW,
                           "%s: extra metadata of n_kvs = %lld keys: the key table's size "
                           "overflows",
                           op, (long long)o.n_kvs);
    arena a = {0};
    fc_gguf_kv *kvs = arena_alloc(&a, (size_t)bytes);
    fc_tensor **out = calloc((size_t)(m->n_tensors ? m->n_tensors : 1), sizeof *out);
    fc_status st = FC_OK;
    if (!kvs || !out) {
        st = fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory", op);
        goto done;
    }
    if (m->file) {
        for (int64_t i = 0; i < n_kv; i++) {
            kvs[i].key = fc_gguf_kv_key(m->file, i);
            value_to_kv(&a, fc_gguf_kv_value(m->file, i), &kvs[i]);
        }
    } else {
        n_kv = config_kvs(&a, &m->cfg, kvs);
    }
    n_kv = merge_kvs(kvs, n_kv, o.kvs, o.n_kvs);
    if (a.failed) {
        st = fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory for the metadata", op);
        goto done;
    }
    bool permute = false;
    if ((st = layout_check(ctx, m, op, &permute))) goto done;
    fc_no_grad_begin(ctx);
    for (int64_t i = 0; i < m->n_tensors && !st; i++) {
        /* the dtype is the model tensor's choice; a substitute (f32, the
         * same shape) only changes the values converted to it */
        fc_dtype want = target_dtype(ctx, op, &o, m->names[i], m->tensors[i]);
        fc_tensor *sub = NULL;
        if (want != FC_DTYPE_COUNT && subst && (st = subst(ctx, m, i, user, &sub))) break;
        fc_tensor *src = sub ? sub : m->tensors[i];
        int64_t heads = permute ? qk_heads(m, m->names[i]) : 0;
        if (heads && fc_dtype_is_block(fc_tensor_dtype(src))) {
            st = fc_ctx_fail(ctx, FC_ERR_UNSUPPORTED,
                             "%s: tensor '%s' (%s): rows of a block dtype cannot be permuted", op,
                             m->names[i], fc_dtype_name(fc_tensor_dtype(src)));
            fc_release(sub);
            break;
        }
        fc_tensor *perm = heads && want != FC_DTYPE_COUNT ? permute_rows(ctx, src, heads) : NULL;
        out[i] = want == FC_DTYPE_COUNT || (heads && !perm) ? NULL
                                                            : convert(ctx, perm ? perm : src, want);
        fc_release(perm);
        fc_release(sub); /* one transient copy at a time */
        if (!out[i]) st = fc_ctx_status(ctx) ? fc_ctx_status(ctx) : FC_ERR_OOM;
    }
    fc_no_grad_end(ctx);
    if (!st) n_kv = set_file_type(&a, m, out, &o, kvs, n_kv);
    if (!st && a.failed) st = fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory for the metadata", op);
    if (!st)
        st = fc_gguf_save(ctx, path, kvs, n_kv, (const char *const *)m->names, out, m->n_tensors);
done:
    for (int64_t i = 0; out && i < m->n_tensors; i++)
        fc_release(out[i]);
    free(out);
    arena_free(&a);
    return st;
}
