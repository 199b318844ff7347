/* SPDX-License-Identifier: MIT */
/* models/tokenizer/encode.c - text to ids and back.
 *
 * Both vocabularies merge a sequence of symbols (adjacent byte ranges of
 * one buffer) pair by pair: the candidate pairs sit in a binary heap keyed
 * by the pair's priority (SentencePiece: the merged token's score, highest
 * first; BPE: the merge's rank, lowest first) and then by position, leftmost
 * first. A popped pair whose symbols changed since it was pushed is stale
 * and skipped: symbols only grow, so "both still have the lengths that
 * summed to the pair's size" is the whole test. */
#include <string.h>

#include "tokenizer/internal.h"

typedef struct sym {
    int32_t prev, next;
    uint32_t off, len; /* bytes of the work buffer; len 0 once merged away */
} sym;

typedef struct pair {
    double key; /* smaller pops first */
    int32_t left, right;
    uint32_t size;
} pair;

typedef struct heap {
    pair *v;
    size_t n, cap;
    const fc_allocator *al;
    bool oom;
} heap;

static bool pair_before(const pair *a, const pair *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

static void heap_push(heap *h, pair p) {
    if (h->oom) return;
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        pair *v = fc__tok_alloc(h->al, cap * sizeof *v);
        if (!v) {
            h->oom = true;
            return;
        }
        if (h->n) memcpy(v, h->v, h->n * sizeof *v);
        fc__tok_free(h->al, h->v, h->cap * sizeof *v);
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && pair_before(&p, &h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = p;
}

static pair heap_pop(heap *h) {
    pair top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && pair_before(&h->v[c + 1], &h->v[c])) c++;
        if (!pair_before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

/* The work of one encode call. */
typedef struct work {
    fc_ctx *ctx;
    const fc_tokenizer *t;
    fc__tok_ids out;
    heap h;
    sym *syms;
    size_t syms_cap;
    char *buf; /* the symbols' bytes */
    size_t buf_cap;
    char *scratch; /* "left right" for merge lookups */
    size_t scratch_cap;
    fc_status st;
} work;

/* Grows *p to hold need elements, keeping what it held. */
static bool reserve(work *w, void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *v = fc__tok_alloc(w->out.al, c * elem);
    if (!v) {
        w->st = FC_ERR_OOM;
        return false;
    }
    if (*cap) memcpy(v, *p, *cap * elem);
    fc__tok_free(w->out.al, *p, *cap * elem);
    *p = v;
    *cap = c;
    return true;
}

/* Symbols of the buffer's first n bytes: one per UTF-8 character (SPM) or
 * per encoded byte (BPE: each is one character of the buffer too). A byte
 * that starts no valid sequence is a character of its own (llama.cpp would
 * take a stray lead byte together with the bytes after it, which then fail
 * to round-trip). */
static int32_t split_chars(work *w, size_t n) {
    if (!reserve(w, (void **)&w->syms, &w->syms_cap, n ? n : 1, sizeof(sym))) return -1;
    int32_t k = 0;
    for (size_t off = 0; off < n; k++) {
        size_t len;
        fc__utf8_decode((const unsigned char *)w->buf + off, n - off, &len);
        w->syms[k] = (sym){.prev = k - 1, .next = -1, .off = (uint32_t)off, .len = (uint32_t)len};
        if (k) w->syms[k - 1].next = k;
        off += len;
    }
    return k;
}

/* The priority of merging symbols a and b, or false when they may not merge. */
static bool pair_key(work *w, int32_t a, int32_t b, double *key) {
    const fc_tokenizer *t = w->t;
    const sym *l = &w->syms[a], *r = &w->syms[b];
    if (t->kind == FC_TOKENIZER_SPM) {
        int64_t id = fc__tok_map_find(&t->tokens, t->text, t->len, w->buf + l->off, l->len + r->len);
        if (id < 0) return false;
        *key = -(double)t->score[id];
        return true;
    }
    size_t need = (size_t)l->len + r->len + 1;
    if (!reserve(w, (void **)&w->scratch, &w->scratch_cap, need, 1)) return false;
    memcpy(w->scratch, w->buf + l->off, l->len);
    w->scratch[l->len] = ' ';
    memcpy(w->scratch + l->len + 1, w->buf + r->off, r->len);
    int64_t rank = fc__tok_map_find(&t->merges, t->merge, t->merge_len, w->scratch, need);
    if (rank < 0) return false;
    *key = (double)rank;
    return true;
}

static void try_pair(work *w, int32_t a, int32_t b) {
    double key;
    if (a < 0 || b < 0 || !pair_key(w, a, b, &key)) return;
    heap_push(&w->h, (pair){key, a, b, w->syms[a].len + w->syms[b].len});
}

/* Emits a symbol no token spells: its bytes' tokens, else the unknown token. */
static void spell_bytes(work *w, const unsigned char *bytes, size_t n) {
    const fc_tokenizer *t = w->t;
    bool all = true;
    for (size_t i = 0; i < n; i++) all = all && t->byte_token[bytes[i]] >= 0;
    if (all) {
        for (size_t i = 0; i < n; i++) fc__tok_ids_push(&w->out, t->byte_token[bytes[i]]);
    } else if (t->unk >= 0) {
        fc__tok_ids_push(&w->out, t->unk);
    } else if (w->st == FC_OK) {
        w->st = fc_ctx_fail(w->ctx, FC_ERR_INVALID_ARG,
                            "tokenizer_encode: the vocabulary cannot spell the %zu bytes '%.*s' "
                            "and has no unknown token",
                            n, (int)(n > 40 ? 40 : n), (const char *)bytes);
    }
}

/* Merges the first n_syms symbols of the buffer and emits their tokens.
 * bytes_of: BPE's buffer holds encoded bytes; their originals for spelling. */
static void merge_and_emit(work *w, int32_t n_syms, const unsigned char *orig) {
    const fc_tokenizer *t = w->t;
    w->h.n = 0;
    for (int32_t i = 1; i < n_syms; i++) try_pair(w, i - 1, i);
    while (w->h.n && !w->h.oom && w->st == FC_OK) {
        pair p = heap_pop(&w->h);
        sym *l = &w->syms[p.left], *r = &w->syms[p.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != p.size) continue;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) w->syms[r->next].prev = p.left;
        try_pair(w, l->prev, p.left);
        try_pair(w, p.left, l->next);
    }
    if (w->h.oom) w->st = FC_ERR_OOM;
    int32_t k = 0; /* BPE: symbol i of the buffer is original byte i before merging */
    for (int32_t i = n_syms ? 0 : -1; i >= 0 && w->st == FC_OK; i = w->syms[i].next) {
        const sym *s = &w->syms[i];
        int64_t id = fc__tok_map_find(&t->tokens, t->text, t->len, w->buf + s->off, s->len);
        if (id >= 0) {
            fc__tok_ids_push(&w->out, (int32_t)id);
        } else if (t->kind == FC_TOKENIZER_SPM) {
            spell_bytes(w, (const unsigned char *)w->buf + s->off, s->len);
        } else {
            /* the original bytes this symbol encodes: one per character */
            int32_t chars = 0;
            for (uint32_t o = 0; o < s->len; o += (uint32_t)fc__utf8_len((unsigned char)w->buf[s->off + o]))
                chars++;
            spell_bytes(w, orig + k, (size_t)chars);
        }
        if (t->kind == FC_TOKENIZER_BPE) {
            for (uint32_t o = 0; o < s->len; o += (uint32_t)fc__utf8_len((unsigned char)w->buf[s->off + o]))
                k++;
        }
    }
}

/* SentencePiece: spaces as U+2581, with the prefix space when asked. */
static void encode_spm(work *w, const char *text, size_t len, bool prefix) {
    size_t spaces = 0;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    size_t n = 3 * (size_t)prefix + len + 2 * spaces; /* ' ' (1 byte) becomes 3 bytes */
    if (!reserve(w, (void **)&w->buf, &w->buf_cap, n ? n : 1, 1)) return;
    char *o = w->buf;
    if (prefix) {
        memcpy(o, "\xE2\x96\x81", 3);
        o += 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(o, "\xE2\x96\x81", 3);
            o += 3;
        } else {
            *o++ = text[i];
        }
    }
    int32_t k = split_chars(w, n);
    if (k >= 0) merge_and_emit(w, k, NULL);
}

/* Byte-level BPE over one word of code points. */
typedef struct bpe_words {
    work *w;
    const uint32_t *cps;
    unsigned char *bytes; /* the word's bytes */
    size_t bytes_cap;
} bpe_words;

static void bpe_word(void *user, size_t start, size_t end) {
    bpe_words *bw = user;
    work *w = bw->w;
    if (w->st != FC_OK) return;
    size_t nb = 0;
    if (!reserve(w, (void **)&bw->bytes, &bw->bytes_cap, 4 * (end - start), 1)) return;
    for (size_t i = start; i < end; i++) nb += fc__utf8_encode(bw->cps[i], (char *)bw->bytes + nb);
    if (!reserve(w, (void **)&w->buf, &w->buf_cap, 2 * nb, 1)) return;
    size_t n = 0;
    for (size_t i = 0; i < nb; i++) n += fc__utf8_encode(fc__gpt2_byte_cp(bw->bytes[i]), w->buf + n);
    int32_t k = split_chars(w, n);
    if (k >= 0) merge_and_emit(w, k, bw->bytes);
}

static void encode_bpe(work *w, const char *text, size_t len) {
    uint32_t *cps = fc__tok_alloc(w->out.al, (len ? len : 1) * sizeof *cps);
    if (!cps) {
        w->st = FC_ERR_OOM;
        return;
    }
    size_t n = 0;
    for (size_t off = 0; off < len;) {
        size_t used;
        cps[n++] = fc__utf8_decode((const unsigned char *)text + off, len - off, &used);
        off += used;
    }
    bpe_words bw = {.w = w, .cps = cps};
    fc__gpt2_split(cps, n, bpe_word, &bw);
    fc__tok_free(w->out.al, bw.bytes, bw.bytes_cap);
    fc__tok_free(w->out.al, cps, (len ? len : 1) * sizeof *cps);
}

static void encode_text(work *w, const char *text, size_t len, bool after_special) {
    if (w->t->kind == FC_TOKENIZER_SPM) {
        encode_spm(w, text, len, w->t->add_space_prefix && after_special);
    } else if (len) {
        encode_bpe(w, text, len);
    }
}

/* Encodes text around the special tokens allowed (special.c finds them,
 * with llama.cpp's rule: longest first, then leftmost), in text order. */
static void encode_all(work *w, const char *text, size_t len, bool parse_special) {
    const fc_tokenizer *t = w->t;
    fc__tok_hit *hits;
    size_t nh;
    if (fc__tok_find_special(t, text, len, parse_special, &hits, &nh) != FC_OK) {
        w->st = FC_ERR_OOM;
        return;
    }
    bool after_special = true; /* the text's start counts as after a special token */
    size_t at = 0;
    for (size_t h = 0; h <= nh && w->st == FC_OK; h++) {
        size_t end = h < nh ? hits[h].off : len;
        if (end > at) {
            encode_text(w, text + at, end - at, after_special);
            after_special = false;
        }
        if (h < nh) {
            fc__tok_ids_push(&w->out, hits[h].id);
            after_special = true;
            at = end + t->len[hits[h].id];
        }
    }
    fc__tok_free(&t->al, hits, nh * sizeof *hits);
}

fc_status fc_tokenizer_encode(fc_ctx *ctx, const fc_tokenizer *t, const char *text, size_t len,
                              unsigned flags, int32_t *ids, int64_t cap, int64_t *n) {
    if (n) *n = 0;
    if (!t || !n || (!text && len) || (!ids && cap > 0))
        return fc_ctx_fail(ctx, FC_ERR_NULL_ARG, "tokenizer_encode: %s is NULL",
                           !t ? "the tokenizer" : !n ? "n" : !ids && cap > 0 ? "ids" : "text");
    if (flags & ~(unsigned)(FC_TOKENIZE_ADD_SPECIAL | FC_TOKENIZE_PARSE_SPECIAL))
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG, "tokenizer_encode: unknown flag bits 0x%x", flags);
    if (cap < 0) return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG, "tokenizer_encode: cap %lld < 0", (long long)cap);
    /* sym offsets are uint32 and symbol counts int32: SPM's buffer is up to
     * 3 bytes per text byte (1.5 GiB here), a BPE word's up to 6 (3 GiB),
     * its symbols half that */
    if (len > FC_TOKENIZER_MAX_TEXT)
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG,
                           "tokenizer_encode: %zu bytes of text exceed FC_TOKENIZER_MAX_TEXT (%zu)", len,
                           FC_TOKENIZER_MAX_TEXT);
    work w = {.ctx = ctx, .t = t, .out = {.al = &t->al}, .h = {.al = &t->al}, .st = FC_OK};
    bool special = flags & FC_TOKENIZE_ADD_SPECIAL;
    if (special && t->add_bos && t->bos >= 0) fc__tok_ids_push(&w.out, t->bos);
    encode_all(&w, text ? text : "", len, flags & FC_TOKENIZE_PARSE_SPECIAL);
    if (special && t->add_eos && t->eos >= 0) fc__tok_ids_push(&w.out, t->eos);
    if (w.out.oom) w.st = FC_ERR_OOM;
    fc__tok_free(&t->al, w.h.v, w.h.cap * sizeof *w.h.v);
    fc__tok_free(&t->al, w.syms, w.syms_cap * sizeof *w.syms);
    fc__tok_free(&t->al, w.buf, w.buf_cap);
    fc__tok_free(&t->al, w.scratch, w.scratch_cap);
    fc_status st = w.st;
    if (st == FC_ERR_OOM) {
        fc_ctx_fail(ctx, st, "tokenizer_encode: out of memory encoding %zu bytes", len);
    } else if (st == FC_OK) {
        *n = w.out.n;
        int64_t k = w.out.n < cap ? w.out.n : cap;
        if (k) memcpy(ids, w.out.v, (size_t)k * sizeof *ids);
        if (w.out.n > cap)
            st = fc_ctx_fail(ctx, FC_ERR_DATA_LENGTH, "tokenizer_encode: %lld ids do not fit in %lld",
                             (long long)w.out.n, (long long)cap);
    }
    fc__tok_ids_free(&w.out);
    return st;
}

/* ---- decoding ------------------------------------------------------------- */

/* The decoded bytes: written while they fit (keeping room for the NUL),
 * counted always. strip drops the next byte if it is a space (the space
 * prefix in front of the first piece). */
typedef struct sink {
    char *buf;
    size_t cap, len;
    bool strip;
} sink;

static void put(sink *s, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        bool skip = s->strip && p[i] == ' ';
        s->strip = false;
        if (skip) continue;
        if (s->len + 1 < s->cap) s->buf[s->len] = p[i];
        s->len++;
    }
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Token id's bytes ("llama": U+2581 is a space, "<0xXX>" byte tokens their
 * byte; "gpt2": GPT-2's code points back to bytes). */
static void put_piece(sink *s, const fc_tokenizer *t, int32_t id) {
    const char *p = t->text[id];
    size_t pl = t->len[id];
    int32_t ty = t->type[id];
    if (ty == FC_TOKEN_USER_DEFINED) {
        put(s, p, pl);
    } else if (t->kind == FC_TOKENIZER_SPM) {
        if (ty == FC_TOKEN_BYTE && pl == 6 && hexval(p[3]) >= 0 && hexval(p[4]) >= 0) {
            char b = (char)(hexval(p[3]) << 4 | hexval(p[4]));
            put(s, &b, 1);
            return;
        }
        for (size_t k = 0; k < pl;) {
            if (pl - k >= 3 && !memcmp(p + k, "\xE2\x96\x81", 3)) {
                put(s, " ", 1);
                k += 3;
            } else {
                put(s, p + k++, 1);
            }
        }
    } else {
        for (size_t k = 0; k < pl;) {
            size_t used;
            uint32_t cp = fc__utf8_decode((const unsigned char *)p + k, pl - k, &used);
            int b = fc__gpt2_cp_byte(cp);
            if (b >= 0) {
                char c = (char)b;
                put(s, &c, 1);
            } else {
                put(s, p + k, used); /* not one of GPT-2's byte code points: as stored */
            }
            k += used;
        }
    }
}

fc_status fc_tokenizer_decode(fc_ctx *ctx, const fc_tokenizer *t, const int32_t *ids, int64_t n,
                              unsigned flags, char *buf, size_t cap, size_t *len) {
    if (len) *len = 0;
    if (!t || !len || (!ids && n > 0) || (!buf && cap > 0))
        return fc_ctx_fail(ctx, FC_ERR_NULL_ARG, "tokenizer_decode: %s is NULL",
                           !t ? "the tokenizer" : !len ? "len" : !ids && n > 0 ? "ids" : "buf");
    if (flags & ~(unsigned)(FC_DECODE_SPECIAL | FC_DECODE_KEEP_PREFIX))
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG, "tokenizer_decode: unknown flag bits 0x%x", flags);
    if (n < 0) return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG, "tokenizer_decode: n %lld < 0", (long long)n);
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n)
            return fc_ctx_fail(ctx, FC_ERR_INDEX,
                               "tokenizer_decode: ids[%lld] = %d is outside the vocabulary of %d tokens",
                               (long long)i, ids[i], t->n);
    }
    sink s = {buf, cap, 0, false};
    bool strip = t->add_space_prefix && !(flags & FC_DECODE_KEEP_PREFIX);
    for (int64_t i = 0; i < n; i++) {
        int32_t id = ids[i], ty = t->type[id];
        if (ty == FC_TOKEN_CONTROL || ty == FC_TOKEN_UNKNOWN || ty == FC_TOKEN_UNUSED) {
            if (flags & FC_DECODE_SPECIAL) {
                put(&s, t->text[id], t->len[id]);
                strip = false; /* the prefix space is no longer first */
            }
            continue;
        }
        s.strip = strip; /* only the first piece of text loses its prefix space */
        strip = false;
        put_piece(&s, t, id);
        s.strip = false;
    }
    if (cap) buf[s.len < cap ? s.len : cap - 1] = 0;
    *len = s.len;
    if (s.len >= cap && !(s.len == 0 && cap == 0))
        return fc_ctx_fail(ctx, FC_ERR_DATA_LENGTH, "tokenizer_decode: %zu bytes do not fit in %zu",
                           s.len, cap);
    return FC_OK;
}
