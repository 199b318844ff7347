/* SPDX-License-Identifier: MIT */
/* json.c - the JSON reader behind the safetensors header.
 *
 * Why not a library. Debian ships jansson, cJSON and yyjson, and any of them
 * parses JSON well; but each builds a whole document tree through its own
 * allocator (jansson and cJSON take global malloc hooks, not a per-call
 * allocator), which would put the header's allocations outside the caller's
 * fc_allocator and its out-of-memory tests, and adds a build dependency for
 * a grammar this small. The safetensors header needs objects, arrays,
 * strings and unsigned integers; everything else only has to be recognised
 * and skipped. This file is that: a recursive-descent reader of RFC 8259
 * with no allocation of its own (strings are decoded into an arena the
 * caller sized from the input), an explicit depth limit, a cursor that never
 * moves past `end`, and UTF-8 validation of every string. It is fuzzed
 * through fuzz/fuzz_safetensors.c.
 *
 * Accepted exactly as RFC 8259 says: whitespace is space, tab, LF, CR;
 * numbers are -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?; strings hold no
 * raw control characters, and \u escapes pair surrogates properly. */
#include "io/json.h"

#include <string.h>

#include "io/io.h"

void fc__json_init(fc_json *j, const char *fn, const char *text, size_t len, char *arena,
                   size_t arena_cap, const fc_io_opts *o) {
    j->begin = text;
    j->p = text;
    j->end = text + len;
    j->arena = arena;
    j->arena_used = 0;
    j->arena_cap = arena_cap;
    j->depth = 0;
    j->o = o;
    j->fn = fn;
}

fc_status fc__json_error(fc_json *j, const char *what) {
    return fc__io_fail(j->o, FC_ERR_FORMAT, "%s: invalid JSON header at byte %zu: %s", j->fn,
                       (size_t)(j->p - j->begin), what);
}

static void skip_ws(fc_json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

bool fc__json_peek(fc_json *j, char c) {
    skip_ws(j);
    return j->p < j->end && *j->p == c;
}

bool fc__json_accept(fc_json *j, char c) {
    if (!fc__json_peek(j, c)) return false;
    j->p++;
    return true;
}

fc_status fc__json_expect(fc_json *j, char c) {
    if (fc__json_accept(j, c)) return FC_OK;
    char what[32];
    memcpy(what, "expected '?'", 13);
    what[10] = c;
    return fc__json_error(j, j->p < j->end ? what : "unexpected end");
}

bool fc__utf8_valid(const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s, *e = p + len;
    while (p < e) {
        unsigned c = *p;
        if (c < 0x80) {
            p++;
            continue;
        }
        int n;
        unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
        if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            if (c == 0xE0)
                lo = 0xA0; /* no overlongs */
            else if (c == 0xED)
                hi = 0x9F; /* no surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            if (c == 0xF0)
                lo = 0x90; /* no overlongs */
            else if (c == 0xF4)
                hi = 0x8F; /* <= U+10FFFF */
        } else {
            return false;
        }
        if (e - p <= n) return false;
        if (p[1] < lo || p[1] > hi) return false;
        for (int k = 2; k <= n; k++)
            if ((p[k] & 0xC0) != 0x80) return false;
        p += n + 1;
    }
    return true;
}

static int hex4(const char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return 0;
    }
    *out = v;
    return 1;
}

static size_t put_utf8(char *d, unsigned cp) {
    if (cp < 0x80) {
        d[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (char)(0xC0 | (cp >> 6));
        d[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (char)(0xE0 | (cp >> 12));
        d[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    d[0] = (char)(0xF0 | (cp >> 18));
    d[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    d[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    d[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes one escape after the backslash at j->p - 1 into d; returns bytes
 * written or 0 on error (message recorded in *st). */
static size_t unescape(fc_json *j, char *d, fc_status *st) {
    if (j->p >= j->end) {
        *st = fc__json_error(j, "unterminated escape");
        return 0;
    }
    char c = *j->p++;
    switch (c) {
    case '"':
        *d = '"';
        return 1;
    case '\\':
        *d = '\\';
        return 1;
    case '/':
        *d = '/';
        return 1;
    case 'b':
        *d = '\b';
        return 1;
    case 'f':
        *d = '\f';
        return 1;
    case 'n':
        *d = '\n';
        return 1;
    case 'r':
        *d = '\r';
        return 1;
    case 't':
        *d = '\t';
        return 1;
    case 'u':
        break;
    default:
        *st = fc__json_error(j, "unknown escape");
        return 0;
    }
    unsigned cp;
    if (j->end - j->p < 4 || !hex4(j->p, &cp)) {
        *st = fc__json_error(j, "bad \\u escape");
        return 0;
    }
    j->p += 4;
    if (cp >= 0xDC00 && cp <= 0xDFFF) {
        *st = fc__json_error(j, "lone low surrogate");
        return 0;
    }
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        unsigned lo;
        if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' || !hex4(j->p + 2, &lo) ||
            lo < 0xDC00 || lo > 0xDFFF) {
            *st = fc__json_error(j, "high surrogate without its low half");
            return 0;
        }
        j->p += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    return put_utf8(d, cp);
}

fc_status fc__json_string(fc_json *j, const char **out, size_t *len) {
    skip_ws(j);
    if (j->p >= j->end || *j->p != '"') return fc__json_error(j, "expected a string");
    j->p++;
    /* Decoded length <= source length including both quotes, and the NUL
     * takes the place of one quote: room is guaranteed when the arena is as
     * large as the input. Checked anyway, since the caller sized it. */
    char *d = j->arena + j->arena_used;
    char *start = d;
    fc_status st = FC_OK;
    for (;;) {
        if (j->p >= j->end) return fc__json_error(j, "unterminated string");
        if ((size_t)(d - j->arena) + 5 > j->arena_cap)
            return fc__json_error(j, "string arena exhausted");
        unsigned char c = (unsigned char)*j->p;
        if (c == '"') {
            j->p++;
            break;
        }
        if (c < 0x20) return fc__json_error(j, "raw control character in a string");
        if (c == '\\') {
            j->p++;
            size_t k = unescape(j, d, &st);
            if (k == 0) return st;
            d += k;
        } else {
            *d++ = (char)c;
            j->p++;
        }
    }
    size_t n = (size_t)(d - start);
    if (!fc__utf8_valid(start, n)) return fc__json_error(j, "string is not valid UTF-8");
    *d = '\0';
    j->arena_used += n + 1;
    *out = start;
    if (len) *len = n;
    return FC_OK;
}

/* Scans a number per RFC 8259 without consuming it; reports where it ends
 * and whether it is a plain non-negative integer. */
static fc_status scan_number(fc_json *j, bool *plain_int, const char **stop) {
    const char *p = j->p, *e = j->end;
    bool plain = true;
    if (p < e && *p == '-') {
        plain = false;
        p++;
    }
    if (p >= e || *p < '0' || *p > '9') return fc__json_error(j, "bad number");
    if (*p == '0') {
        p++;
    } else {
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < e && *p == '.') {
        plain = false;
        p++;
        if (p >= e || *p < '0' || *p > '9') return fc__json_error(j, "bad fraction");
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        plain = false;
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p >= e || *p < '0' || *p > '9') return fc__json_error(j, "bad exponent");
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    *plain_int = plain;
    *stop = p;
    return FC_OK;
}

fc_status fc__json_u64(fc_json *j, uint64_t *out) {
    skip_ws(j);
    bool plain;
    const char *stop;
    fc_status st = scan_number(j, &plain, &stop);
    if (st != FC_OK) return st;
    if (!plain) return fc__json_error(j, "expected a non-negative integer");
    uint64_t v = 0;
    while (j->p < stop) {
        unsigned dgt = (unsigned)(*j->p - '0');
        if (v > (UINT64_MAX - dgt) / 10) return fc__json_error(j, "integer above 2^64-1");
        v = v * 10 + dgt;
        j->p++;
    }
    *out = v;
    return FC_OK;
}

static fc_status skip_literal(fc_json *j, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0)
        return fc__json_error(j, "unexpected token");
    j->p += n;
    return FC_OK;
}

fc_status fc__json_skip(fc_json *j) {
    skip_ws(j);
    if (j->p >= j->end) return fc__json_error(j, "unexpected end");
    fc_status st = FC_OK;
    char c = *j->p;
    if (c == '{' || c == '[') {
        if (++j->depth > FC_JSON_MAX_DEPTH) return fc__json_error(j, "nesting too deep");
        j->p++;
        char close = c == '{' ? '}' : ']';
        if (!fc__json_accept(j, close)) {
            do {
                const char *ignored;
                if (c == '{') {
                    size_t mark = j->arena_used;
                    st = fc__json_string(j, &ignored, NULL);
                    j->arena_used = mark; /* skipped keys need no room */
                    if (st == FC_OK) st = fc__json_expect(j, ':');
                }
                if (st == FC_OK) st = fc__json_skip(j);
                if (st != FC_OK) return st;
            } while (fc__json_accept(j, ','));
            st = fc__json_expect(j, close);
        }
        j->depth--;
        return st;
    }
    if (c == '"') {
        const char *ignored;
        size_t mark = j->arena_used;
        st = fc__json_string(j, &ignored, NULL);
        j->arena_used = mark;
        return st;
    }
    if (c == 't') return skip_literal(j, "true");
    if (c == 'f') return skip_literal(j, "false");
    if (c == 'n') return skip_literal(j, "null");
    bool plain;
    const char *stop;
    st = scan_number(j, &plain, &stop);
    if (st == FC_OK) j->p = stop;
    return st;
}

fc_status fc__json_finish(fc_json *j) {
    skip_ws(j);
    if (j->p != j->end) return fc__json_error(j, "trailing characters after the object");
    return FC_OK;
}
