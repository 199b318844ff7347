/* SPDX-License-Identifier: MIT */
/* models/tokenizer/unicode.c - UTF-8, the code point classes and the GPT-2
 * pre-tokenizer (the word split before byte-level BPE). */
#include "tokenizer/internal.h"

#include "tokenizer/unicode_tables.h"

static bool in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < r[mid][0]) {
            hi = mid;
        } else if (cp > r[mid][1]) {
            lo = mid + 1;
        } else {
            return true;
        }
    }
    return false;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

bool fc__uni_is_letter(uint32_t cp) { return in_ranges(fc__uni_letter, COUNT(fc__uni_letter), cp); }
bool fc__uni_is_number(uint32_t cp) { return in_ranges(fc__uni_number, COUNT(fc__uni_number), cp); }
bool fc__uni_is_space(uint32_t cp) { return in_ranges(fc__uni_space, COUNT(fc__uni_space), cp); }

uint32_t fc__utf8_decode(const unsigned char *s, size_t n, size_t *used) {
    unsigned char c = s[0];
    size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    *used = 1;
    if (need == 1) return c;
    if (need == 0 || need > n) return 0xFFFD;
    uint32_t cp = c & (0x7Fu >> need);
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0xFFFD;
        cp = cp << 6 | (s[i] & 0x3Fu);
    }
    /* overlong forms, surrogates and values past U+10FFFF are not UTF-8 */
    static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_of[need] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0xFFFD;
    *used = need;
    return cp;
}

size_t fc__utf8_encode(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* GPT-2 shows every byte as a printable code point: the printable bytes
 * '!'..'~', 0xA1..0xAC and 0xAE..0xFF as themselves, the other 68 (controls,
 * space, 0x7F..0xA0, 0xAD) as U+0100 onwards in byte order. */
static bool gpt2_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* The 68 others, in order: 0x00..0x20 (33), 0x7F..0xA0 (34), 0xAD (1). */
uint32_t fc__gpt2_byte_cp(unsigned b) {
    if (gpt2_printable(b)) return b;
    uint32_t k = b <= 0x20 ? b : b <= 0xA0 ? 33 + (b - 0x7F) : 67;
    return 0x100 + k;
}

int fc__gpt2_cp_byte(uint32_t cp) {
    if (cp < 0x100) return gpt2_printable(cp) ? (int)cp : -1;
    uint32_t k = cp - 0x100;
    if (k < 33) return (int)k;
    if (k < 67) return (int)(0x7F + (k - 33));
    return k == 67 ? 0xAD : -1;
}

/* The pattern's alternatives, tried in order at each position (as a
 * backtracking regex engine would, for this pattern):
 *   's|'t|'re|'ve|'m|'ll|'d     contractions (ASCII, lower case)
 *    ?\p{L}+  | ?\p{N}+         a run of letters or of numbers, with one
 *                               optional leading space
 *    ?[^\s\p{L}\p{N}]+          a run of other characters, likewise
 *   \s+(?!\S)                   white space not followed by a non-space:
 *                               a run of k >= 2 before a non-space gives
 *                               k-1 (the last one joins the next word)
 *   \s+                         any other white space run */
enum { CLS_LETTER = 1, CLS_NUMBER = 2, CLS_SPACE = 4, CLS_OTHER = 8 };

static int cls_at(const uint32_t *cps, size_t n, size_t i) {
    if (i >= n) return 0;
    uint32_t cp = cps[i];
    if (fc__uni_is_letter(cp)) return CLS_LETTER;
    if (fc__uni_is_number(cp)) return CLS_NUMBER;
    if (fc__uni_is_space(cp)) return CLS_SPACE;
    return CLS_OTHER;
}

static size_t contraction(const uint32_t *cps, size_t n, size_t i) {
    if (cps[i] != '\'' || i + 1 >= n) return 0;
    uint32_t a = cps[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 >= n) return 0;
    uint32_t b = cps[i + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

void fc__gpt2_split(const uint32_t *cps, size_t n,
                    void (*fn)(void *user, size_t start, size_t end), void *user) {
    size_t i = 0;
    while (i < n) {
        size_t start = i;
        size_t c = contraction(cps, n, i);
        if (c) {
            fn(user, start, i + c);
            i += c;
            continue;
        }
        /* one optional space before a letter, number or other run */
        int lead = cps[i] == ' ' ? cls_at(cps, n, i + 1) : cls_at(cps, n, i);
        if (lead == CLS_LETTER || lead == CLS_NUMBER || lead == CLS_OTHER) {
            i += cps[i] == ' ';
            while (cls_at(cps, n, i) == lead) i++;
            fn(user, start, i);
            continue;
        }
        size_t spaces = 0;
        while (cls_at(cps, n, i + spaces) == CLS_SPACE) spaces++;
        if (spaces > 1 && i + spaces < n) {
            i += spaces - 1; /* \s+(?!\S): leave the last space to the next word */
        } else if (spaces > 0) {
            i += spaces;
        } else {
            i++; /* unreachable: every code point has a class */
        }
        fn(user, start, i);
    }
}
