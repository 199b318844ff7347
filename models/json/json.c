/* SPDX-License-Identifier: MIT */
/* models/json/json.c - the JSON reader of json.h: one recursive
 * descent, bounded in depth, over a cursor that knows where the text ends
 * (so "ended early" and "wrong byte" are told apart). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "json/json.h"

static void *json_alloc(const fc_allocator *al, size_t size) {
    return al->alloc(al->user, size ? size : 1, 16);
}

static void json_release(const fc_allocator *al, void *p, size_t size) {
    if (p) al->free(al->user, p, size ? size : 1);
}

/* cp (at most 0x10FFFF, as a \u escape or a surrogate pair gives) as UTF-8
 * at o; returns the bytes written. */
static int utf8_put(uint32_t cp, char *o) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

typedef struct cur {
    fc_ctx *ctx;
    const char *fn;
    fc__json_doc *d;
    const char *s;
    size_t len, i;
    fc_status st;
} cur;

static fc_status fail(cur *c, const char *what) {
    if (c->st != FC_OK) return c->st;
    if (c->i >= c->len) {
        c->st = fc_ctx_fail(c->ctx, FC_ERR_DATA_LENGTH,
                            "%s: the JSON text ends at byte %zu inside %s (truncated?)", c->fn,
                            c->len, what);
    } else {
        unsigned char b = (unsigned char)c->s[c->i];
        c->st = fc_ctx_fail(c->ctx, FC_ERR_FORMAT, "%s: malformed JSON at byte %zu (0x%02x): %s",
                            c->fn, c->i, b, what);
    }
    return c->st;
}

static void skip_ws(cur *c) {
    while (c->i < c->len) {
        char ch = c->s[c->i];
        if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') break;
        c->i++;
    }
}

static int32_t new_value(cur *c, fc__json_type type) {
    fc__json_doc *d = c->d;
    if (d->n == d->cap) {
        if (d->cap >= INT32_MAX / 2) {
            c->st = fc_ctx_fail(c->ctx, FC_ERR_FORMAT, "%s: more than 2^30 JSON values", c->fn);
            return -1;
        }
        int32_t cap = d->cap ? d->cap * 2 : 256;
        fc__json *v = json_alloc(d->al, (size_t)cap * sizeof *v);
        if (!v) {
            c->st = fc_ctx_fail(c->ctx, FC_ERR_OOM, "%s: out of memory for %d JSON values", c->fn, cap);
            return -1;
        }
        if (d->n) memcpy(v, d->v, (size_t)d->n * sizeof *v);
        json_release(d->al, d->v, (size_t)d->cap * sizeof *v);
        d->v = v;
        d->cap = cap;
    }
    fc__json *v = &d->v[d->n];
    memset(v, 0, sizeof *v);
    v->type = (uint8_t)type;
    v->first = v->next = -1;
    v->off = c->i;
    return d->n++;
}

static int hex4(cur *c, uint32_t *out) {
    if (c->len - c->i < 4) {
        c->i = c->len;
        return fail(c, "a \\u escape"), 0;
    }
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        char h = c->s[c->i];
        int x = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (x < 0) return fail(c, "a \\u escape needs 4 hex digits"), 0;
        v = v << 4 | (uint32_t)x;
        c->i++;
    }
    *out = v;
    return 1;
}

/* A string at c->i (the opening quote): decoded into the string buffer. */
static int parse_string(cur *c, const char **out, uint32_t *out_len) {
    fc__json_doc *d = c->d;
    c->i++; /* the quote */
    char *o = d->strs + d->strs_n, *start = o;
    for (;;) {
        if (c->i >= c->len) return fail(c, "a string"), 0;
        unsigned char ch = (unsigned char)c->s[c->i];
        if (ch == '"') {
            c->i++;
            break;
        }
        if (ch < 0x20) return fail(c, "a control character inside a string"), 0;
        if (ch != '\\') {
            *o++ = (char)ch;
            c->i++;
            continue;
        }
        if (++c->i >= c->len) return fail(c, "an escape"), 0;
        char e = c->s[c->i++];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char map[] = "\"\\/\b\f\n\r\t";
            *o++ = map[simple - "\"\\/bfnrt"];
            continue;
        }
        if (e != 'u') {
            c->i--;
            return fail(c, "an unknown escape"), 0;
        }
        uint32_t cp;
        if (!hex4(c, &cp)) return 0;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(c, "a lone low surrogate"), 0;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo;
            if (c->len - c->i < 2) {
                c->i = c->len;
                return fail(c, "a surrogate pair"), 0;
            }
            if (c->s[c->i] != '\\' || c->s[c->i + 1] != 'u')
                return fail(c, "a high surrogate not followed by a low one"), 0;
            c->i += 2;
            if (!hex4(c, &lo)) return 0;
            if (lo < 0xDC00 || lo > 0xDFFF) return fail(c, "a high surrogate not followed by a low one"), 0;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        /* every escape is at least as long as its UTF-8 encoding */
        o += utf8_put(cp, o);
    }
    *o = 0;
    *out = start;
    *out_len = (uint32_t)(o - start);
    d->strs_n += (size_t)(o - start) + 1;
    return 1;
}

static int parse_number(cur *c, double *out) {
    size_t b = c->i;
    if (c->i < c->len && c->s[c->i] == '-') c->i++;
    size_t digits = c->i;
    while (c->i < c->len && c->s[c->i] >= '0' && c->s[c->i] <= '9') c->i++;
    if (c->i == digits) return fail(c, "a number needs digits"), 0;
    if (c->s[digits] == '0' && c->i - digits > 1) {
        c->i = digits + 1;
        return fail(c, "a number with a leading zero"), 0;
    }
    if (c->i < c->len && c->s[c->i] == '.') {
        size_t f = ++c->i;
        while (c->i < c->len && c->s[c->i] >= '0' && c->s[c->i] <= '9') c->i++;
        if (c->i == f) return fail(c, "a fraction needs digits"), 0;
    }
    if (c->i < c->len && (c->s[c->i] == 'e' || c->s[c->i] == 'E')) {
        c->i++;
        if (c->i < c->len && (c->s[c->i] == '+' || c->s[c->i] == '-')) c->i++;
        size_t e = c->i;
        while (c->i < c->len && c->s[c->i] >= '0' && c->s[c->i] <= '9') c->i++;
        if (c->i == e) return fail(c, "an exponent needs digits"), 0;
    }
    char tmp[64];
    size_t n = c->i - b;
    if (n >= sizeof tmp) {
        /* long numbers: strtod needs a terminated copy */
        char *p = json_alloc(c->d->al, n + 1);
        if (!p) return c->st = fc_ctx_fail(c->ctx, FC_ERR_OOM, "%s: out of memory", c->fn), 0;
        memcpy(p, c->s + b, n);
        p[n] = 0;
        *out = strtod(p, NULL);
        json_release(c->d->al, p, n + 1);
    } else {
        memcpy(tmp, c->s + b, n);
        tmp[n] = 0;
        *out = strtod(tmp, NULL);
    }
    return 1;
}

static int32_t parse_value(cur *c, int depth);

static int32_t parse_container(cur *c, int depth, bool object) {
    int32_t self = new_value(c, object ? FC__JSON_OBJECT : FC__JSON_ARRAY);
    if (self < 0) return -1;
    c->i++; /* [ or { */
    int32_t last = -1, count = 0;
    skip_ws(c);
    if (c->i < c->len && c->s[c->i] == (object ? '}' : ']')) {
        c->i++;
        return self;
    }
    for (;;) {
        const char *key = NULL;
        uint32_t key_len = 0;
        skip_ws(c);
        if (object) {
            if (c->i >= c->len || c->s[c->i] != '"') return fail(c, "an object member needs a name"), -1;
            if (!parse_string(c, &key, &key_len)) return -1;
            skip_ws(c);
            if (c->i >= c->len || c->s[c->i] != ':') return fail(c, "a ':' after a member name"), -1;
            c->i++;
        }
        int32_t ch = parse_value(c, depth + 1);
        if (ch < 0) return -1;
        fc__json *v = &c->d->v[ch];
        v->key = key;
        v->key_len = key_len;
        if (last < 0) {
            c->d->v[self].first = ch;
        } else {
            c->d->v[last].next = ch;
        }
        last = ch;
        if (count == INT32_MAX) return fail(c, "too many members"), -1;
        count++;
        skip_ws(c);
        if (c->i >= c->len) return fail(c, object ? "an object" : "an array"), -1;
        char e = c->s[c->i++];
        if (e == ',') continue;
        if (e == (object ? '}' : ']')) break;
        c->i--;
        return fail(c, object ? "a ',' or '}' in an object" : "a ',' or ']' in an array"), -1;
    }
    c->d->v[self].count = count;
    return self;
}

static int32_t parse_value(cur *c, int depth) {
    if (depth > FC__JSON_MAX_DEPTH) {
        c->st = fc_ctx_fail(c->ctx, FC_ERR_FORMAT, "%s: JSON nested deeper than %d at byte %zu",
                            c->fn, FC__JSON_MAX_DEPTH, c->i);
        return -1;
    }
    skip_ws(c);
    if (c->i >= c->len) return fail(c, "a value"), -1;
    char ch = c->s[c->i];
    if (ch == '{' || ch == '[') return parse_container(c, depth, ch == '{');
    if (ch == '"') {
        int32_t k = new_value(c, FC__JSON_STRING);
        if (k < 0) return -1;
        const char *s;
        uint32_t n;
        if (!parse_string(c, &s, &n)) return -1;
        c->d->v[k].str = s;
        c->d->v[k].len = n;
        return k;
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        int32_t k = new_value(c, FC__JSON_NUMBER);
        if (k < 0) return -1;
        double x;
        if (!parse_number(c, &x)) return -1;
        c->d->v[k].num = x;
        return k;
    }
    static const char *const words[3] = {"null", "false", "true"};
    for (int w = 0; w < 3; w++) {
        size_t wl = strlen(words[w]);
        size_t have = c->len - c->i < wl ? c->len - c->i : wl;
        if (memcmp(c->s + c->i, words[w], have) != 0) continue;
        if (have < wl) {
            c->i = c->len;
            return fail(c, words[w]), -1;
        }
        int32_t k = new_value(c, (fc__json_type)w);
        c->i += wl;
        return k;
    }
    return fail(c, "not the start of a value"), -1;
}

fc_status fc__json_parse(fc_ctx *ctx, const char *fn, fc__json_doc *d, const fc_allocator *al,
                         const char *text, size_t len) {
    memset(d, 0, sizeof *d);
    d->al = al;
    if (len >= ((size_t)1 << 31))
        return fc_ctx_fail(ctx, FC_ERR_UNSUPPORTED, "%s: %zu bytes of JSON exceed 2^31", fn, len);
    d->strs_cap = len + 1;
    d->strs = json_alloc(al, d->strs_cap);
    if (!d->strs) return fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory for %zu bytes", fn, len);
    cur c = {ctx, fn, d, text, len, 0, FC_OK};
    if (parse_value(&c, 0) < 0) return c.st;
    skip_ws(&c);
    if (c.i < len) return fail(&c, "text after the document");
    return FC_OK;
}

void fc__json_free(fc__json_doc *d) {
    json_release(d->al, d->v, (size_t)d->cap * sizeof *d->v);
    json_release(d->al, d->strs, d->strs_cap);
    memset(d, 0, sizeof *d);
}

const fc__json *fc__json_first(const fc__json_doc *d, const fc__json *o) {
    if (!o || (o->type != FC__JSON_ARRAY && o->type != FC__JSON_OBJECT) || o->first < 0) return NULL;
    return &d->v[o->first];
}

const fc__json *fc__json_next(const fc__json_doc *d, const fc__json *c) {
    return c && c->next >= 0 ? &d->v[c->next] : NULL;
}

const fc__json *fc__json_get(const fc__json_doc *d, const fc__json *o, const char *key) {
    if (!o || o->type != FC__JSON_OBJECT) return NULL;
    size_t kl = strlen(key);
    const fc__json *found = NULL; /* the last of duplicate names wins, as serde_json's maps do */
    for (const fc__json *m = fc__json_first(d, o); m; m = fc__json_next(d, m))
        if (m->key_len == kl && !memcmp(m->key, key, kl)) found = m;
    return found;
}

int fc__json_is(const fc__json *v, const char *s) {
    return v && v->type == FC__JSON_STRING && v->len == strlen(s) && !memcmp(v->str, s, v->len);
}
