/* SPDX-License-Identifier: MIT */
/* models/json/json.h - a small JSON reader for the files a Hugging Face
 * checkpoint carries (config.json, tokenizer.json, the safetensors index).
 * models/ sees only the public API, so it has its own reader.
 *
 * fc__json_parse reads a whole document (RFC 8259) into one array of
 * values: strings are decoded (escapes, surrogate pairs) into one buffer,
 * NUL-terminated; containers link their children by index. Nesting deeper
 * than FC__JSON_MAX_DEPTH is refused, so hostile input cannot exhaust the
 * stack. Errors name the byte offset: FC_ERR_DATA_LENGTH when the text
 * ends inside a value (truncated input), FC_ERR_FORMAT for anything else
 * malformed, FC_ERR_OOM. */
#ifndef FUCINA_MODELS_JSON_JSON_H
#define FUCINA_MODELS_JSON_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "fucina.h"

#define FC__JSON_MAX_DEPTH 128

typedef enum fc__json_type {
    FC__JSON_NULL,
    FC__JSON_FALSE,
    FC__JSON_TRUE,
    FC__JSON_NUMBER,
    FC__JSON_STRING,
    FC__JSON_ARRAY,
    FC__JSON_OBJECT,
} fc__json_type;

typedef struct fc__json {
    uint8_t type;       /* fc__json_type */
    uint32_t len;       /* a string's bytes */
    uint32_t key_len;   /* the member name's bytes, in an object */
    int32_t count;      /* a container's children */
    int32_t first;      /* a container's first child, -1 for none */
    int32_t next;       /* the next sibling, -1 for none */
    const char *str;    /* a string's bytes (NUL-terminated) */
    const char *key;    /* the member name, or NULL outside objects */
    double num;         /* a number's value */
    size_t off;         /* where the value starts in the text */
} fc__json;

typedef struct fc__json_doc {
    fc__json *v; /* v[0] is the root */
    int32_t n, cap;
    char *strs;
    size_t strs_cap, strs_n;
    const fc_allocator *al;
} fc__json_doc;

/* Parses text[0, len) into d (which the caller frees with fc__json_free,
 * also after a failure). The message, naming fn and the offset, goes to ctx. */
fc_status fc__json_parse(fc_ctx *ctx, const char *fn, fc__json_doc *d, const fc_allocator *al,
                         const char *text, size_t len);
void fc__json_free(fc__json_doc *d);

/* The member named key of object o, or NULL (also when o is no object). */
const fc__json *fc__json_get(const fc__json_doc *d, const fc__json *o, const char *key);
/* The child after c, or NULL; the first child of container o, or NULL. */
const fc__json *fc__json_next(const fc__json_doc *d, const fc__json *c);
const fc__json *fc__json_first(const fc__json_doc *d, const fc__json *o);
/* Whether v is a string equal to s. */
int fc__json_is(const fc__json *v, const char *s);

#endif
