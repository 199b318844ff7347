/* SPDX-License-Identifier: MIT */
/* models/tokenizer/tokenizer.c - building a tokenizer: from a GGUF file's
 * tokenizer.ggml.* keys or as the byte-level vocabulary, the lookup tables
 * behind it, its accessors, and writing it back as GGUF key/values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/internal.h"

#define FN "tokenizer_from_gguf"

void *fc__tok_alloc(const fc_allocator *al, size_t size) {
    return al->alloc(al->user, size ? size : 1, 16);
}

void fc__tok_free(const fc_allocator *al, void *p, size_t size) {
    if (p) al->free(al->user, p, size ? size : 1);
}

uint64_t fc__tok_hash(const char *s, size_t len) {
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3u;
    return h;
}

int64_t fc__tok_map_find(const fc__tok_map *m, char *const *names, const uint32_t *lens,
                         const char *s, size_t len) {
    if (!m->slots) return -1;
    for (uint32_t k = (uint32_t)fc__tok_hash(s, len) & m->mask;; k = (k + 1) & m->mask) {
        uint32_t v = m->slots[k];
        if (v == 0) return -1;
        if (lens[v - 1] == len && memcmp(names[v - 1], s, len) == 0) return (int64_t)v - 1;
    }
}

/* Builds the table over names[0, n); a duplicate name gives its first
 * index in *dup (else -1) and stops. */
static fc_status map_build(const fc_allocator *al, fc__tok_map *m, char *const *names,
                           const uint32_t *lens, int64_t n, int64_t *dup) {
    uint32_t cap = 16;
    while (cap < 2 * (uint64_t)n) cap <<= 1;
    m->slots = fc__tok_alloc(al, (size_t)cap * sizeof *m->slots);
    if (!m->slots) return FC_ERR_OOM;
    memset(m->slots, 0, (size_t)cap * sizeof *m->slots);
    m->mask = cap - 1;
    *dup = -1;
    for (int64_t i = 0; i < n; i++) {
        uint32_t k = (uint32_t)fc__tok_hash(names[i], lens[i]) & m->mask;
        for (;; k = (k + 1) & m->mask) {
            uint32_t v = m->slots[k];
            if (v == 0) break;
            if (lens[v - 1] == lens[i] && memcmp(names[v - 1], names[i], lens[i]) == 0) {
                *dup = (int64_t)v - 1;
                return FC_ERR_FORMAT;
            }
        }
        m->slots[k] = (uint32_t)i + 1;
    }
    return FC_OK;
}

static void map_free(const fc_allocator *al, fc__tok_map *m) {
    if (m->slots) fc__tok_free(al, m->slots, ((size_t)m->mask + 1) * sizeof *m->slots);
    m->slots = NULL;
}

void fc__tok_ids_push(fc__tok_ids *ids, int32_t id) {
    if (ids->oom) return;
    if (ids->n == ids->cap) {
        int64_t cap = ids->cap ? ids->cap * 2 : 64;
        int32_t *v = fc__tok_alloc(ids->al, (size_t)cap * sizeof *v);
        if (!v) {
            ids->oom = true;
            return;
        }
        if (ids->n) memcpy(v, ids->v, (size_t)ids->n * sizeof *v);
        fc__tok_free(ids->al, ids->v, (size_t)ids->cap * sizeof *v);
        ids->v = v;
        ids->cap = cap;
    }
    ids->v[ids->n++] = id;
}

void fc__tok_ids_free(fc__tok_ids *ids) {
    fc__tok_free(ids->al, ids->v, (size_t)ids->cap * sizeof *ids->v);
    ids->v = NULL;
    ids->n = ids->cap = 0;
}

void fc_tokenizer_free(fc_tokenizer *t) {
    if (!t) return;
    fc_allocator al = t->al;
    size_t n = (size_t)t->n;
    map_free(&al, &t->tokens);
    map_free(&al, &t->merges);
    fc__tok_ac_free(t);
    fc__tok_free(&al, t->text, n * sizeof *t->text);
    fc__tok_free(&al, t->len, n * sizeof *t->len);
    fc__tok_free(&al, t->score, n * sizeof *t->score);
    fc__tok_free(&al, t->type, n * sizeof *t->type);
    fc__tok_free(&al, t->merge, (size_t)t->n_merges * sizeof *t->merge);
    fc__tok_free(&al, t->merge_len, (size_t)t->n_merges * sizeof *t->merge_len);
    fc__tok_free(&al, t->special, (size_t)t->n_special * sizeof *t->special);
    fc__tok_free(&al, t->arena, t->arena_size);
    fc__tok_free(&al, t, sizeof *t);
}

static fc_tokenizer *tok_new(const fc_allocator *allocator) {
    const fc_allocator *al = allocator ? allocator : fc_default_allocator();
    fc_tokenizer *t = fc__tok_alloc(al, sizeof *t);
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    t->al = *al;
    t->bos = t->eos = t->unk = t->pad = -1;
    return t;
}

/* Allocates the per-token arrays and the arena for `arena` bytes. */
static fc_status tok_arrays(fc_tokenizer *t, int32_t n, int64_t n_merges, size_t arena) {
    t->n = n;
    t->n_merges = n_merges;
    t->text = fc__tok_alloc(&t->al, (size_t)n * sizeof *t->text);
    t->len = fc__tok_alloc(&t->al, (size_t)n * sizeof *t->len);
    t->score = fc__tok_alloc(&t->al, (size_t)n * sizeof *t->score);
    t->type = fc__tok_alloc(&t->al, (size_t)n * sizeof *t->type);
    t->merge = fc__tok_alloc(&t->al, (size_t)n_merges * sizeof *t->merge);
    t->merge_len = fc__tok_alloc(&t->al, (size_t)n_merges * sizeof *t->merge_len);
    t->arena = fc__tok_alloc(&t->al, arena);
    t->arena_size = arena;
    if (!t->text || !t->len || !t->score || !t->type || !t->merge || !t->merge_len || !t->arena)
        return FC_ERR_OOM;
    return FC_OK;
}

/* Built once at creation, so that a tokenizer is read-only afterwards. */
static void build_kvs(fc_tokenizer *t) {
    fc_gguf_kv *kv = t->kvs;
    int k = 0;
    bool spm = t->kind == FC_TOKENIZER_SPM;
    kv[k++] = (fc_gguf_kv){.key = "tokenizer.ggml.model", .type = FC_GGUF_STRING,
                           .data = spm ? "llama" : "gpt2"};
    if (!spm) kv[k++] = (fc_gguf_kv){.key = "tokenizer.ggml.pre", .type = FC_GGUF_STRING,
                                     .data = t->pre[0] ? t->pre : "gpt-2"};
    kv[k++] = (fc_gguf_kv){.key = "tokenizer.ggml.tokens", .type = FC_GGUF_ARRAY,
                           .elem_type = FC_GGUF_STRING, .count = (uint64_t)t->n, .data = t->text};
    kv[k++] = (fc_gguf_kv){.key = "tokenizer.ggml.scores", .type = FC_GGUF_ARRAY,
                           .elem_type = FC_GGUF_F32, .count = (uint64_t)t->n, .data = t->score};
    kv[k++] = (fc_gguf_kv){.key = "tokenizer.ggml.token_type", .type = FC_GGUF_ARRAY,
                           .elem_type = FC_GGUF_I32, .count = (uint64_t)t->n, .data = t->type};
    if (!spm) kv[k++] = (fc_gguf_kv){.key = "tokenizer.ggml.merges", .type = FC_GGUF_ARRAY,
                                     .elem_type = FC_GGUF_STRING, .count = (uint64_t)t->n_merges,
                                     .data = t->merge};
    static const char *const id_keys[4] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                           "tokenizer.ggml.unknown_token_id",
                                           "tokenizer.ggml.padding_token_id"};
    const int32_t ids[4] = {t->bos, t->eos, t->unk, t->pad};
    for (int i = 0; i < 4; i++) {
        if (ids[i] < 0) continue;
        t->kv_ids[i] = (uint32_t)ids[i];
        kv[k++] = (fc_gguf_kv){.key = id_keys[i], .type = FC_GGUF_U32, .data = &t->kv_ids[i]};
    }
    t->kv_flags[0] = t->add_bos;
    t->kv_flags[1] = t->add_eos;
    t->kv_flags[2] = t->add_space_prefix;
    kv[k++] = (fc_gguf_kv){.key = "tokenizer.ggml.add_bos_token", .type = FC_GGUF_BOOL, .data = &t->kv_flags[0]};
    kv[k++] = (fc_gguf_kv){.key = "tokenizer.ggml.add_eos_token", .type = FC_GGUF_BOOL, .data = &t->kv_flags[1]};
    if (spm) kv[k++] = (fc_gguf_kv){.key = "tokenizer.ggml.add_space_prefix", .type = FC_GGUF_BOOL,
                                    .data = &t->kv_flags[2]};
    t->n_kvs = k;
}

fc_status fc_tokenizer_gguf_kvs(const fc_tokenizer *t, const fc_gguf_kv **kvs, int64_t *n) {
    if (!t || !kvs || !n) return FC_ERR_NULL_ARG;
    *kvs = t->kvs;
    *n = t->n_kvs;
    return FC_OK;
}

typedef struct special_key {
    uint32_t len;
    int32_t id;
} special_key;

static int special_before(const void *pa, const void *pb) {
    const special_key *a = pa, *b = pb;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* The tables derived from the vocabulary: text -> id, merges -> rank, the
 * byte tokens and the special tokens, longest first. */
static fc_status tok_index(fc_ctx *ctx, fc_tokenizer *t, const char *fn) {
    int64_t dup;
    fc_status st = map_build(&t->al, &t->tokens, t->text, t->len, t->n, &dup);
    if (st == FC_ERR_FORMAT) {
        for (int32_t i = 0; i < t->n; i++) {
            if (i != dup && t->len[i] == t->len[dup] && !memcmp(t->text[i], t->text[dup], t->len[i])) {
                return fc_ctx_fail(ctx, st, "%s: tokenizer.ggml.tokens: tokens %lld and %d are both '%.40s'",
                                   fn, (long long)dup, i, t->text[dup]);
            }
        }
    }
    if (st != FC_OK) return fc_ctx_fail(ctx, st, "%s: out of memory", fn);
    st = map_build(&t->al, &t->merges, t->merge, t->merge_len, t->n_merges, &dup);
    if (st == FC_ERR_FORMAT)
        return fc_ctx_fail(ctx, st, "%s: tokenizer.ggml.merges: merge %lld '%.40s' is listed twice", fn,
                           (long long)dup, t->merge[dup]);
    if (st != FC_OK) return fc_ctx_fail(ctx, st, "%s: out of memory", fn);
    for (unsigned b = 0; b < 256; b++) {
        char s[8];
        size_t n;
        if (t->kind == FC_TOKENIZER_SPM) {
            n = (size_t)snprintf(s, sizeof s, "<0x%02X>", b);
        } else {
            n = fc__utf8_encode(fc__gpt2_byte_cp(b), s);
        }
        t->byte_token[b] = (int32_t)fc__tok_map_find(&t->tokens, t->text, t->len, s, n);
    }
    int32_t ns = 0;
    for (int32_t i = 0; i < t->n; i++) {
        int32_t ty = t->type[i];
        ns += ty == FC_TOKEN_CONTROL || ty == FC_TOKEN_UNKNOWN || ty == FC_TOKEN_USER_DEFINED;
    }
    t->special = fc__tok_alloc(&t->al, (size_t)ns * sizeof *t->special);
    if (!t->special) return fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory", fn);
    t->n_special = ns;
    int32_t k = 0;
    for (int32_t i = 0; i < t->n; i++) {
        int32_t ty = t->type[i];
        if (ty == FC_TOKEN_CONTROL || ty == FC_TOKEN_UNKNOWN || ty == FC_TOKEN_USER_DEFINED)
            t->special[k++] = i;
    }
    /* by length, longest first, ids ascending among equals (qsort, not an
     * insertion sort: a file may mark a million tokens user-defined) */
    if (ns > 1) {
        special_key *keys = fc__tok_alloc(&t->al, (size_t)ns * sizeof *keys);
        if (!keys) return fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory", fn);
        for (int32_t i = 0; i < ns; i++) keys[i] = (special_key){t->len[t->special[i]], t->special[i]};
        qsort(keys, (size_t)ns, sizeof *keys, special_before);
        for (int32_t i = 0; i < ns; i++) t->special[i] = keys[i].id;
        fc__tok_free(&t->al, keys, (size_t)ns * sizeof *keys);
    }
    if (fc__tok_ac_build(t) != FC_OK)
        return fc_ctx_fail(ctx, FC_ERR_OOM,
                           "%s: out of memory for the matcher of %d special tokens "
                           "(it takes at most 2^30 bytes of their text)",
                           fn, ns);
    build_kvs(t);
    return FC_OK;
}

/* ---- reading a GGUF file ----------------------------------------------------- */

static fc_status get_string(fc_ctx *ctx, const fc_gguf_file *f, const char *key, const char **s,
                            size_t *n) {
    const fc_gguf_value *v = fc_gguf_kv_find(f, key);
    if (!v) return FC_ERR_INDEX;
    if (fc_gguf_value_string(v, s, n) != FC_OK)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, FN ": %s is not a string (GGUF type %d)", key,
                           (int)fc_gguf_value_type(v));
    return FC_OK;
}

static fc_status get_bool(fc_ctx *ctx, const fc_gguf_file *f, const char *key, bool *out) {
    const fc_gguf_value *v = fc_gguf_kv_find(f, key);
    if (!v) return FC_OK;
    if (fc_gguf_value_bool(v, out) != FC_OK)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, FN ": %s is not a bool (GGUF type %d)", key,
                           (int)fc_gguf_value_type(v));
    return FC_OK;
}

static fc_status get_id(fc_ctx *ctx, const fc_gguf_file *f, const char *key, int32_t n,
                        int32_t *out) {
    const fc_gguf_value *v = fc_gguf_kv_find(f, key);
    if (!v) return FC_OK;
    int64_t id;
    if (fc_gguf_value_int(v, &id) != FC_OK)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, FN ": %s is not an integer (GGUF type %d)", key,
                           (int)fc_gguf_value_type(v));
    if (id < 0 || id >= n)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, FN ": %s = %lld is outside the %d tokens", key,
                           (long long)id, n);
    *out = (int32_t)id;
    return FC_OK;
}

/* A string array's count, checked against want (-1: any). */
static fc_status get_array(fc_ctx *ctx, const fc_gguf_file *f, const char *key, bool strings,
                           int64_t want, const fc_gguf_value **v, uint64_t *count) {
    *v = fc_gguf_kv_find(f, key);
    if (!*v) return FC_ERR_INDEX;
    fc_gguf_type et;
    if (fc_gguf_array_info(*v, &et, count) != FC_OK)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, FN ": %s is not an array (GGUF type %d)", key,
                           (int)fc_gguf_value_type(*v));
    bool numeric = et != FC_GGUF_STRING && et != FC_GGUF_ARRAY && et != FC_GGUF_BOOL;
    if (strings ? et != FC_GGUF_STRING : !numeric)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, FN ": %s holds GGUF type %d, not %s", key, (int)et,
                           strings ? "strings" : "numbers");
    if (want >= 0 && *count != (uint64_t)want)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, FN ": %s has %llu entries for %lld tokens", key,
                           (unsigned long long)*count, (long long)want);
    return FC_OK;
}

static fc_status read_gguf(fc_ctx *ctx, const fc_gguf_file *f, fc_tokenizer *t) {
    const char *model, *pre = "";
    size_t model_len, pre_len = 0;
    fc_status st = get_string(ctx, f, "tokenizer.ggml.model", &model, &model_len);
    if (st == FC_ERR_INDEX) return fc_ctx_fail(ctx, FC_ERR_FORMAT, FN ": the file has no tokenizer.ggml.model");
    if (st != FC_OK) return st;
    if (model_len == 5 && !memcmp(model, "llama", 5)) {
        t->kind = FC_TOKENIZER_SPM;
    } else if (model_len == 4 && !memcmp(model, "gpt2", 4)) {
        t->kind = FC_TOKENIZER_BPE;
    } else {
        return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                           FN ": tokenizer.ggml.model '%.*s' is not a known tokenizer (\"llama\", \"gpt2\")",
                           (int)(model_len > 40 ? 40 : model_len), model);
    }
    st = get_string(ctx, f, "tokenizer.ggml.pre", &pre, &pre_len);
    if (st != FC_OK && st != FC_ERR_INDEX) return st;

    const fc_gguf_value *tokens, *scores = NULL, *types = NULL, *merges = NULL;
    uint64_t n, n_merges = 0, cnt;
    st = get_array(ctx, f, "tokenizer.ggml.tokens", true, -1, &tokens, &n);
    if (st == FC_ERR_INDEX) return fc_ctx_fail(ctx, FC_ERR_FORMAT, FN ": the file has no tokenizer.ggml.tokens");
    if (st != FC_OK) return st;
    if (n == 0 || n > INT32_MAX)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, FN ": tokenizer.ggml.tokens has %llu tokens (1 .. 2^31-1)",
                           (unsigned long long)n);
    st = get_array(ctx, f, "tokenizer.ggml.scores", false, (int64_t)n, &scores, &cnt);
    if (st == FC_ERR_INDEX) scores = NULL;
    else if (st != FC_OK) return st;
    st = get_array(ctx, f, "tokenizer.ggml.token_type", false, (int64_t)n, &types, &cnt);
    if (st == FC_ERR_INDEX) types = NULL;
    else if (st != FC_OK) return st;
    if (t->kind == FC_TOKENIZER_BPE) {
        st = get_array(ctx, f, "tokenizer.ggml.merges", true, -1, &merges, &n_merges);
        if (st == FC_ERR_INDEX)
            return fc_ctx_fail(ctx, FC_ERR_FORMAT, FN ": a \"gpt2\" tokenizer needs tokenizer.ggml.merges");
        if (st != FC_OK) return st;
        if (n_merges > INT32_MAX)
            return fc_ctx_fail(ctx, FC_ERR_FORMAT, FN ": tokenizer.ggml.merges has %llu entries",
                               (unsigned long long)n_merges);
    }

    /* one arena for every text, each NUL-terminated */
    size_t arena = pre_len + 1;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        fc_gguf_value_string(fc_gguf_array_item(tokens, i), &s, &len);
        arena += (len ? len : 24) + 1;
    }
    for (uint64_t i = 0; i < n_merges; i++) {
        const char *s;
        size_t len;
        fc_gguf_value_string(fc_gguf_array_item(merges, i), &s, &len);
        arena += len + 1;
    }
    if (tok_arrays(t, (int32_t)n, (int64_t)n_merges, arena) != FC_OK)
        return fc_ctx_fail(ctx, FC_ERR_OOM, FN ": out of memory for %llu tokens", (unsigned long long)n);
    char *p = t->arena;
    memcpy(p, pre, pre_len);
    p[pre_len] = 0;
    t->pre = p;
    p += pre_len + 1;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        fc_gguf_value_string(fc_gguf_array_item(tokens, i), &s, &len);
        if (len > UINT32_MAX / 2)
            return fc_ctx_fail(ctx, FC_ERR_FORMAT, FN ": token %llu is %zu bytes long",
                               (unsigned long long)i, len);
        t->text[i] = p;
        if (len == 0) { /* llama.cpp's name for an empty token */
            len = (size_t)snprintf(p, 24, "[EMPTY_%llu]", (unsigned long long)i);
        } else {
            memcpy(p, s, len);
        }
        p[len] = 0;
        t->len[i] = (uint32_t)len;
        p += len + 1;
        double sc = 0;
        int64_t ty = FC_TOKEN_NORMAL;
        if (scores && fc_gguf_array_float(scores, i, &sc) != FC_OK) {
            int64_t si = 0;
            fc_gguf_array_int(scores, i, &si);
            sc = (double)si;
        }
        if (types && fc_gguf_array_int(types, i, &ty) != FC_OK) ty = -1;
        if (ty < 0 || ty > FC_TOKEN_BYTE)
            return fc_ctx_fail(ctx, FC_ERR_FORMAT, FN ": tokenizer.ggml.token_type[%llu] = %lld is not a token type (0..6)",
                               (unsigned long long)i, (long long)ty);
        t->score[i] = (float)sc;
        t->type[i] = ty == 0 ? FC_TOKEN_NORMAL : (int32_t)ty;
    }
    for (uint64_t i = 0; i < n_merges; i++) {
        const char *s;
        size_t len;
        fc_gguf_value_string(fc_gguf_array_item(merges, i), &s, &len);
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp || sp == s + len - 1)
            return fc_ctx_fail(ctx, FC_ERR_FORMAT, FN ": tokenizer.ggml.merges[%llu] '%.*s' is not two words",
                               (unsigned long long)i, (int)(len > 40 ? 40 : len), s);
        memcpy(p, s, len);
        p[len] = 0;
        t->merge[i] = p;
        t->merge_len[i] = (uint32_t)len;
        p += len + 1;
    }

    /* special tokens and flags, with llama.cpp's defaults per model */
    bool spm = t->kind == FC_TOKENIZER_SPM;
    if (spm) {
        t->unk = 0;
        t->bos = t->n > 1 ? 1 : -1;
        t->eos = t->n > 2 ? 2 : -1;
    }
    t->add_bos = spm;
    t->add_space_prefix = spm;
    if ((st = get_id(ctx, f, "tokenizer.ggml.bos_token_id", t->n, &t->bos)) != FC_OK ||
        (st = get_id(ctx, f, "tokenizer.ggml.eos_token_id", t->n, &t->eos)) != FC_OK ||
        (st = get_id(ctx, f, "tokenizer.ggml.unknown_token_id", t->n, &t->unk)) != FC_OK ||
        (st = get_id(ctx, f, "tokenizer.ggml.padding_token_id", t->n, &t->pad)) != FC_OK ||
        (st = get_bool(ctx, f, "tokenizer.ggml.add_bos_token", &t->add_bos)) != FC_OK ||
        (st = get_bool(ctx, f, "tokenizer.ggml.add_eos_token", &t->add_eos)) != FC_OK ||
        (st = get_bool(ctx, f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix)) != FC_OK)
        return st;
    if (!spm) t->add_space_prefix = false;
    return tok_index(ctx, t, FN);
}

fc_status fc_tokenizer_from_gguf(fc_ctx *ctx, const fc_gguf_file *f, const fc_allocator *allocator,
                                 fc_tokenizer **out) {
    if (out) *out = NULL;
    if (!f || !out) return fc_ctx_fail(ctx, FC_ERR_NULL_ARG, FN ": %s is NULL", f ? "out" : "the file");
    fc_tokenizer *t = tok_new(allocator);
    if (!t) return fc_ctx_fail(ctx, FC_ERR_OOM, FN ": out of memory");
    fc_status st = read_gguf(ctx, f, t);
    if (st != FC_OK) {
        fc_tokenizer_free(t);
        return st;
    }
    *out = t;
    return FC_OK;
}

fc_status fc_tokenizer_new_bytes(fc_ctx *ctx, const fc_allocator *allocator, fc_tokenizer **out) {
    if (out) *out = NULL;
    if (!out) return fc_ctx_fail(ctx, FC_ERR_NULL_ARG, "tokenizer_new_bytes: out is NULL");
    fc_tokenizer *t = tok_new(allocator);
    if (!t) return fc_ctx_fail(ctx, FC_ERR_OOM, "tokenizer_new_bytes: out of memory");
    t->kind = FC_TOKENIZER_BPE;
    if (tok_arrays(t, 258, 0, 256 * 3 + 16 + 6) != FC_OK) {
        fc_tokenizer_free(t);
        return fc_ctx_fail(ctx, FC_ERR_OOM, "tokenizer_new_bytes: out of memory");
    }
    char *p = t->arena;
    memcpy(p, "gpt-2", 6); /* llama.cpp reads this pre-tokenizer name as GPT-2's pattern */
    t->pre = p;
    p += 6;
    for (int32_t i = 0; i < 258; i++) {
        size_t len;
        if (i < 256) {
            len = fc__utf8_encode(fc__gpt2_byte_cp((unsigned)i), p);
        } else {
            len = i == 256 ? 3 : 4;
            memcpy(p, i == 256 ? "<s>" : "</s>", len);
        }
        p[len] = 0;
        t->text[i] = p;
        t->len[i] = (uint32_t)len;
        t->score[i] = 0;
        t->type[i] = i < 256 ? FC_TOKEN_NORMAL : FC_TOKEN_CONTROL;
        p += len + 1;
    }
    t->bos = 256;
    t->eos = 257;
    if (tok_index(ctx, t, "tokenizer_new_bytes") != FC_OK) {
        fc_tokenizer_free(t);
        return fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_OOM;
    }
    *out = t;
    return FC_OK;
}

/* ---- accessors ------------------------------------------------------------- */

fc_tokenizer_kind fc_tokenizer_kind_of(const fc_tokenizer *t) { return t ? t->kind : (fc_tokenizer_kind)0; }
int64_t fc_tokenizer_vocab_size(const fc_tokenizer *t) { return t ? t->n : 0; }
int32_t fc_tokenizer_bos(const fc_tokenizer *t) { return t ? t->bos : -1; }
int32_t fc_tokenizer_eos(const fc_tokenizer *t) { return t ? t->eos : -1; }
int32_t fc_tokenizer_unknown(const fc_tokenizer *t) { return t ? t->unk : -1; }
const char *fc_tokenizer_pre(const fc_tokenizer *t) { return t ? t->pre : NULL; }

const char *fc_tokenizer_token_text(const fc_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = t->len[id];
    return t->text[id];
}

fc_token_type fc_tokenizer_token_type(const fc_tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n ? (fc_token_type)t->type[id] : (fc_token_type)0;
}

int32_t fc_tokenizer_find(const fc_tokenizer *t, const char *s, size_t len) {
    if (!t || (!s && len)) return -1;
    return (int32_t)fc__tok_map_find(&t->tokens, t->text, t->len, s ? s : "", len);
}

