/* SPDX-License-Identifier: MIT */
/* fucina/tokenizer.h - the tokenizers GGUF model files carry: text to
 * token ids and back.
 *
 * Two vocabularies, as llama.cpp reads them from a file's tokenizer.ggml.*
 * keys:
 *   - "llama" (FC_TOKENIZER_SPM): a SentencePiece-style vocabulary with a
 *     score per token. Spaces become U+2581 ("\xE2\x96\x81"), a space is put
 *     in front of the text (tokenizer.ggml.add_space_prefix, default true),
 *     then, starting from single UTF-8 characters, the adjacent pair whose
 *     concatenation is a token of the highest score is merged (the leftmost
 *     on a tie) until no pair is a token. A character that is no token is
 *     spelled with the byte tokens "<0xXX>", or the unknown token when the
 *     vocabulary has no byte token for it. A byte that starts no valid
 *     UTF-8 sequence is a character of its own.
 *   - "gpt2" (FC_TOKENIZER_BPE): byte-level BPE with a merge list. The text
 *     is split into words with GPT-2's pattern
 *       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *     (Unicode letters, numbers and white space from the tables of
 *     scripts/gen_unicode_tables.py), each byte of a word is mapped to its
 *     printable code point as GPT-2 does, and the adjacent pair of lowest
 *     rank in tokenizer.ggml.merges is merged until none is listed. Any
 *     tokenizer.ggml.pre value is read with this pattern (other
 *     pre-tokenizers, such as Llama 3's, are not implemented: the file's
 *     value is reported by fc_tokenizer_pre). Invalid UTF-8 is read as
 *     U+FFFD per bad byte, as llama.cpp does.
 * Token types are GGUF's (tokenizer.ggml.token_type): normal, unknown,
 * control, user-defined, unused, byte.
 *
 * Special tokens. With FC_TOKENIZE_ADD_SPECIAL, encode puts the BOS token
 * first when the file asks for it (tokenizer.ggml.add_bos_token; default
 * true for "llama", false for "gpt2") and the EOS token last when it asks
 * for that (add_eos_token, default false). User-defined tokens found in the
 * text are always taken whole; control tokens (such as "<s>") only with
 * FC_TOKENIZE_PARSE_SPECIAL, otherwise their text is tokenized as text.
 * Matches are taken longest token first (the lowest id among equal
 * lengths), each leftmost first in the text the longer ones left, as
 * llama.cpp partitions; finding them takes time and memory linear in the
 * text for a given vocabulary.
 * For "llama", the text after a special token gets its own space prefix,
 * as llama.cpp does.
 *
 * Decoding maps each token back to its bytes: U+2581 to a space and byte
 * tokens to their byte ("llama"), GPT-2's code points back to bytes
 * ("gpt2"). Control and unknown tokens decode to nothing unless
 * FC_DECODE_SPECIAL is given (then to their text). For "llama" with a space
 * prefix, the first decoded token loses one leading space (unless
 * FC_DECODE_KEEP_PREFIX), so decode(encode(s)) == s for any UTF-8 text
 * the vocabulary can spell. llama.cpp's optional "clean up tokenization
 * spaces" of gpt2 vocabularies is not applied.
 *
 * Errors: every function returning fc_status records the error, with a
 * message naming the function and the values, in ctx when ctx is not NULL
 * (fc_ctx_error); the tokenizer itself is never changed by a failure.
 * Threads: a tokenizer is read-only after creation; any number of threads
 * may encode and decode with one at once (each with its own ctx). */
#ifndef FUCINA_TOKENIZER_H
#define FUCINA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "fucina.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A tokenizer: its vocabulary, merges or scores, and special tokens. */
typedef struct fc_tokenizer fc_tokenizer;

/* The tokenizer algorithms: SentencePiece-style and byte-level BPE. */
typedef enum fc_tokenizer_kind {
    FC_TOKENIZER_SPM = 1, /* tokenizer.ggml.model "llama" */
    FC_TOKENIZER_BPE = 2, /* tokenizer.ggml.model "gpt2" */
    FC_TOKENIZER_KIND_COUNT /* one past the last kind */
} fc_tokenizer_kind;

/* GGUF's token types (tokenizer.ggml.token_type). */
typedef enum fc_token_type {
    FC_TOKEN_NORMAL = 1,
    FC_TOKEN_UNKNOWN = 2,
    FC_TOKEN_CONTROL = 3,
    FC_TOKEN_USER_DEFINED = 4,
    FC_TOKEN_UNUSED = 5,
    FC_TOKEN_BYTE = 6,
    FC_TOKEN_TYPE_COUNT /* one past the last type */
} fc_token_type;

enum {
    FC_TOKENIZE_ADD_SPECIAL = 1u << 0,   /* BOS / EOS as the file asks */
    FC_TOKENIZE_PARSE_SPECIAL = 1u << 1, /* control tokens in the text are tokens */
};
enum {
    FC_DECODE_SPECIAL = 1u << 0,     /* control and unknown tokens decode to their text */
    FC_DECODE_KEEP_PREFIX = 1u << 1, /* "llama": keep the first token's leading space */
};

/* Reads the tokenizer of a GGUF file (tokenizer.ggml.model, .tokens, and
 * .scores, .token_type, .merges, .bos_token_id, .eos_token_id,
 * .unknown_token_id, .padding_token_id, .add_bos_token, .add_eos_token,
 * .add_space_prefix, .pre where present). The tokenizer copies what it
 * needs: f may be closed afterwards. allocator NULL: the default one.
 * Errors: FC_ERR_NULL_ARG; FC_ERR_FORMAT (no tokenizer.ggml.model or
 * tokens, a model other than "llama" and "gpt2", a key of the wrong type,
 * scores or token types not one per token, a token type outside 0..6, a
 * merge that is not two words, a special token id out of range, a
 * duplicate token): the message names the key and the value; FC_ERR_OOM.
 * An empty token is renamed "[EMPTY_<id>]", as llama.cpp does; type 0
 * (undefined) reads as normal. */
FC_API fc_status fc_tokenizer_from_gguf(fc_ctx *ctx, const fc_gguf_file *f,
                                        const fc_allocator *allocator, fc_tokenizer **out);

/* A byte-level tokenizer for models trained from scratch on any text: a
 * "gpt2" vocabulary whose token i < 256 is byte i (no merges), then
 * "<s>" (BOS, 256) and "</s>" (EOS, 257) as control tokens; add_bos_token
 * false. fc_tokenizer_gguf_kvs writes it so that llama.cpp reads it.
 * Errors: FC_ERR_NULL_ARG, FC_ERR_OOM. */
FC_API fc_status fc_tokenizer_new_bytes(fc_ctx *ctx, const fc_allocator *allocator,
                                        fc_tokenizer **out);

/* NULL is a harmless no-op. */
FC_API void fc_tokenizer_free(fc_tokenizer *tok);

/* Accessors; for NULL: 0, -1 or NULL. Special ids are -1 when absent. */
FC_API fc_tokenizer_kind fc_tokenizer_kind_of(const fc_tokenizer *tok);
FC_API int64_t fc_tokenizer_vocab_size(const fc_tokenizer *tok);
FC_API int32_t fc_tokenizer_bos(const fc_tokenizer *tok);
FC_API int32_t fc_tokenizer_eos(const fc_tokenizer *tok);
FC_API int32_t fc_tokenizer_unknown(const fc_tokenizer *tok);
/* tokenizer.ggml.pre as read ("" when absent). */
FC_API const char *fc_tokenizer_pre(const fc_tokenizer *tok);
/* Token id's text as stored (NUL-terminated, *len its bytes if len is not
 * NULL) and type; NULL / 0 for an id out of range. */
FC_API const char *fc_tokenizer_token_text(const fc_tokenizer *tok, int32_t id, size_t *len);
FC_API fc_token_type fc_tokenizer_token_type(const fc_tokenizer *tok, int32_t id);
/* The id of a token's exact text, or -1. */
FC_API int32_t fc_tokenizer_find(const fc_tokenizer *tok, const char *text, size_t len);

/* The longest text one encode call takes (512 MiB): the merge work keeps
 * 32-bit offsets and counts. Longer texts are encoded in pieces. */
#define FC_TOKENIZER_MAX_TEXT ((size_t)1 << 29)

/* Encodes text[0, len) (len bytes; NUL bytes are text too) into ids[0,
 * cap). *n receives the number of ids of the whole encoding, also when it
 * does not fit: FC_ERR_DATA_LENGTH then, with the first cap ids written, so
 * a call with cap 0 measures. ids may be NULL when cap is 0. Time and
 * memory are linear in len for a given vocabulary (n log n for the merges
 * of one long word). Errors: FC_ERR_NULL_ARG (tok, n, or text with len >
 * 0); FC_ERR_DATA_LENGTH; FC_ERR_INVALID_ARG (unknown flag bits; len over
 * FC_TOKENIZER_MAX_TEXT, checked before text is read; a piece the
 * vocabulary cannot spell when it has no unknown token); FC_ERR_OOM (work
 * memory comes from the tokenizer's allocator). */
FC_API fc_status fc_tokenizer_encode(fc_ctx *ctx, const fc_tokenizer *tok, const char *text,
                                     size_t len, unsigned flags, int32_t *ids, int64_t cap,
                                     int64_t *n);

/* Decodes ids[0, n) into buf[0, cap), NUL-terminated when it fits (cap >=
 * bytes + 1). *len receives the decoded bytes (without the NUL) also when
 * they do not fit: FC_ERR_DATA_LENGTH then, with buf holding a NUL-
 * terminated prefix when cap > 0. buf may be NULL when cap is 0. To decode
 * a stream token by token (generation), pass each token alone with
 * FC_DECODE_KEEP_PREFIX after the first. Errors: FC_ERR_NULL_ARG;
 * FC_ERR_INDEX (an id outside [0, vocab size), naming its position and
 * value); FC_ERR_INVALID_ARG (unknown flag bits); FC_ERR_DATA_LENGTH. */
FC_API fc_status fc_tokenizer_decode(fc_ctx *ctx, const fc_tokenizer *tok, const int32_t *ids,
                                     int64_t n, unsigned flags, char *buf, size_t cap,
                                     size_t *len);

/* The tokenizer as GGUF key/values (tokenizer.ggml.model, .pre for "gpt2",
 * .tokens, .scores, .token_type, .merges for "gpt2", the special ids that
 * exist, .add_bos_token, .add_eos_token, .add_space_prefix for "llama"),
 * to pass to fc_gguf_write / fc_gguf_save beside the model's keys. *kvs
 * points into tok (valid while tok lives); *n is the count. Errors:
 * FC_ERR_NULL_ARG. */
FC_API fc_status fc_tokenizer_gguf_kvs(const fc_tokenizer *tok, const fc_gguf_kv **kvs,
                                       int64_t *n);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_TOKENIZER_H */
