/* SPDX-License-Identifier: MIT */
/* json.h - a strict, pull-style JSON reader for the safetensors header.
 *
 * See json.c for why fucina has its own. The reader walks a byte range
 * with a cursor; the caller asks for exactly what it expects next (a '{',
 * a string, an unsigned integer, any value to skip) and every call either
 * consumes that or fails with FC_ERR_FORMAT and a message giving the byte
 * offset. Decoded strings land in a caller-provided arena: a decoded string
 * plus its NUL never needs more bytes than its quoted source form, so an
 * arena as large as the whole input can never overflow. */
#ifndef FUCINA_IO_JSON_H
#define FUCINA_IO_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fucina/io.h"

#define FC_JSON_MAX_DEPTH 64

typedef struct fc_json {
    const char *begin, *p, *end;
    char *arena; /* decoded strings, NUL-terminated */
    size_t arena_used, arena_cap;
    int depth;
    const fc_io_opts *o; /* message sink */
    const char *fn;      /* caller name for messages */
} fc_json;

void fc__json_init(fc_json *j, const char *fn, const char *text, size_t len, char *arena,
                   size_t arena_cap, const fc_io_opts *o);
/* Skips whitespace; true when the next byte is c (not consumed). */
bool fc__json_peek(fc_json *j, char c);
/* Skips whitespace and consumes c when it is next. */
bool fc__json_accept(fc_json *j, char c);
/* Like accept, but a different byte is an error naming what was expected. */
fc_status fc__json_expect(fc_json *j, char c);
/* A string: decoded (escapes, surrogate pairs), validated as UTF-8, copied
 * into the arena with a NUL. *len excludes the NUL; embedded NULs are kept
 * (the caller decides whether to allow them). */
fc_status fc__json_string(fc_json *j, const char **out, size_t *len);
/* A non-negative integer without fraction or exponent, at most UINT64_MAX. */
fc_status fc__json_u64(fc_json *j, uint64_t *out);
/* Any value (object, array, string, number, true, false, null), validated
 * and discarded. Nesting deeper than FC_JSON_MAX_DEPTH fails. */
fc_status fc__json_skip(fc_json *j);
/* Only whitespace may remain. */
fc_status fc__json_finish(fc_json *j);
/* FC_ERR_FORMAT with "fn: invalid JSON at byte N: what". */
fc_status fc__json_error(fc_json *j, const char *what);

/* UTF-8 well-formedness (RFC 3629: no overlongs, no surrogates, <= U+10FFFF). */
bool fc__utf8_valid(const char *s, size_t len);

#endif /* FUCINA_IO_JSON_H */
