/* SPDX-License-Identifier: MIT */
/* models/tokenizer/internal.h - what the tokenizer's files share: the
 * vocabulary with its lookup tables, the allocator wrappers, the growable
 * id list and the code point classes. */
#ifndef FUCINA_MODELS_TOKENIZER_INTERNAL_H
#define FUCINA_MODELS_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fucina/tokenizer.h"

/* Open-addressing table from byte strings to indices (slots hold index + 1,
 * 0 is empty); the strings live elsewhere, named by the owner's arrays. */
typedef struct fc__tok_map {
    uint32_t *slots;
    uint32_t mask; /* slot count - 1, a power of two at least twice the entries */
} fc__tok_map;

/* The special-token matcher (special.c): an Aho-Corasick automaton over
 * the texts of special[], built once with the tokenizer. Node 0 is the
 * root; a node is the prefix of some special token that leads to it. */
typedef struct fc__tok_ac {
    int32_t nodes_cap;   /* the per-node arrays' length: one node per special-token byte, + 1 */
    int32_t *fail;       /* the node of the longest proper suffix that is a node */
    int32_t *out;        /* the rank (index in special[]) of the token ending here, or -1 */
    int32_t *first_all;  /* this node or the nearest on its fail chain with a token, or -1 */
    int32_t *first_user; /* the same, for user-defined tokens only */
    uint64_t *edge_key;  /* goto edges (node, byte) as node * 256 + byte + 1; 0 is empty */
    int32_t *edge_to;
    uint32_t edge_mask;     /* slot count - 1, a power of two at least twice the edges */
    int32_t root_next[256]; /* the root's edges, 0 for none */
    int32_t n_user;         /* user-defined tokens among special[] */
    int32_t max_class;      /* the most special tokens of one length */
} fc__tok_ac;

struct fc_tokenizer {
    fc_allocator al;
    fc_tokenizer_kind kind;
    int32_t n;        /* tokens */
    char **text;      /* NUL-terminated texts, in one arena */
    uint32_t *len;    /* their bytes */
    float *score;     /* n scores (0 when the file has none) */
    int32_t *type;    /* n fc_token_type values */
    char *arena;      /* every token and merge text */
    size_t arena_size;
    fc__tok_map tokens;
    int64_t n_merges; /* "gpt2": merges, rank = index */
    char **merge;     /* "left right", in the arena */
    uint32_t *merge_len;
    fc__tok_map merges;
    int32_t bos, eos, unk, pad; /* -1 when absent */
    bool add_bos, add_eos, add_space_prefix;
    char *pre; /* tokenizer.ggml.pre, "" when absent (in the arena) */
    int32_t byte_token[256]; /* the token spelling byte b, or -1 */
    int32_t *special;        /* control, unknown and user-defined ids, longest text first,
                                ids ascending among equal lengths: a token's rank is its index */
    int32_t n_special;
    fc__tok_ac ac;
    /* fc_tokenizer_gguf_kvs's view of the above */
    fc_gguf_kv kvs[12];
    int64_t n_kvs;
    uint32_t kv_ids[4];
    bool kv_flags[3];
};

void *fc__tok_alloc(const fc_allocator *al, size_t size);
void fc__tok_free(const fc_allocator *al, void *p, size_t size);

/* FNV-1a over len bytes. */
uint64_t fc__tok_hash(const char *s, size_t len);
/* The index whose string (names[i], lens[i]) equals s, or -1. */
int64_t fc__tok_map_find(const fc__tok_map *m, char *const *names, const uint32_t *lens,
                         const char *s, size_t len);

/* A growable list of ids in the tokenizer's allocator. */
typedef struct fc__tok_ids {
    int32_t *v;
    int64_t n, cap;
    const fc_allocator *al;
    bool oom;
} fc__tok_ids;
void fc__tok_ids_push(fc__tok_ids *ids, int32_t id);
void fc__tok_ids_free(fc__tok_ids *ids);

/* Builds t->ac over t->special (sorted already); FC_OK or FC_ERR_OOM. */
fc_status fc__tok_ac_build(fc_tokenizer *t);
void fc__tok_ac_free(fc_tokenizer *t);

/* A special token found in a text: its byte offset and id. */
typedef struct fc__tok_hit {
    size_t off;
    int32_t id;
} fc__tok_hit;

/* The special tokens encode takes from text[0, len) as tokens (user-defined
 * ones, and with parse_special control and unknown ones too), in text
 * order. The rule is llama.cpp's partition: the tokens are taken in rank
 * order (longest first, then lowest id), each at every place where it
 * occurs, leftmost first, in what earlier tokens left as text. Time
 * O(len + ends x lengths), memory O(len): ends counts the places where a
 * token ends, lengths the distinct token lengths among them (special.c
 * says more). *hits (n entries, NULL when n is 0) is in the
 * tokenizer's allocator: free it with fc__tok_free(&t->al, *hits, *n *
 * sizeof **hits). Errors: FC_ERR_OOM (nothing to free then). */
fc_status fc__tok_find_special(const fc_tokenizer *t, const char *text, size_t len,
                               bool parse_special, fc__tok_hit **hits, size_t *n);

/* The byte length of the UTF-8 sequence led by byte c (1 for a stray
 * continuation byte), as llama.cpp splits text into characters. */
static inline size_t fc__utf8_len(unsigned char c) {
    static const uint8_t lengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lengths[c >> 4];
}
/* Decodes one code point at s[0, n) (n >= 1): the code point and its byte
 * count; an invalid or truncated sequence is U+FFFD over one byte. */
uint32_t fc__utf8_decode(const unsigned char *s, size_t n, size_t *used);
/* Encodes cp into out (4 bytes of room); returns the byte count. */
size_t fc__utf8_encode(uint32_t cp, char *out);

/* Code point classes of the GPT-2 pattern (unicode.c). */
bool fc__uni_is_letter(uint32_t cp);
bool fc__uni_is_number(uint32_t cp);
bool fc__uni_is_space(uint32_t cp);

/* GPT-2's printable code point for byte b, and back (-1: none). */
uint32_t fc__gpt2_byte_cp(unsigned b);
int fc__gpt2_cp_byte(uint32_t cp);

/* Splits cps[0, n) into GPT-2 words: calls fn for each [start, end). */
void fc__gpt2_split(const uint32_t *cps, size_t n,
                    void (*fn)(void *user, size_t start, size_t end), void *user);

#endif
