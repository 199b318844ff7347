/* SPDX-License-Identifier: MIT */
/* gguf_internal.h - the parsed form of a GGUF file, shared by the reader
 * (gguf.c), the metadata accessors (gguf_meta.c) and the writer's type
 * table.
 *
 * Metadata values are nodes in one array. The first n_kv nodes are the
 * key/values' values, in file order; an array of strings or of arrays owns
 * `n` consecutive child nodes starting at `child`; an array of numbers or
 * bools has no children: `p` points at its packed little-endian elements in
 * the mapping. Scalars and strings point into the mapping as well, so
 * metadata costs one node per value and copies nothing. */
#ifndef FUCINA_IO_GGUF_INTERNAL_H
#define FUCINA_IO_GGUF_INTERNAL_H

#include "io/io.h"

#define FC_GGUF_MAX_NEST 8    /* arrays inside arrays */
#define FC_GGUF_MAX_KEY 65535 /* bytes of a key or tensor name */
#define FC_GGUF_MAX_DIMS 4    /* ggml's GGML_MAX_DIMS */
#define FC_GGUF_MAX_NAME 64   /* ggml's GGML_MAX_NAME: names must be shorter */
#define FC_GGUF_DEFAULT_ALIGN 32
#define FC_GGUF_TYPE_Q2_0 42u /* two layouts share this id (see fucina/io.h) */

struct fc_gguf_value {
    uint32_t type; /* fc_gguf_type */
    uint32_t elem; /* arrays: element type */
    uint64_t n;    /* strings: bytes; arrays: elements */
    const uint8_t *p;
    int64_t child; /* arrays of strings/arrays: first child node; else -1 */
    const fc_gguf_file *file;
};

typedef struct gguf_tensor {
    const char *name;
    uint32_t ggml_type;
    fc_dtype dtype;
    int rank;
    int64_t shape[FC_GGUF_MAX_DIMS]; /* row-major (the file's dims reversed) */
    uint64_t offset;                 /* from the start of the data section */
    uint64_t nbytes;
} gguf_tensor;

typedef struct gguf_name_ix {
    const char *name;
    int64_t idx;
} gguf_name_ix;

struct fc_gguf_file {
    fc_allocator alloc;
    fc_io_map *map;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_start;
    fc_gguf_value *nodes;
    size_t n_nodes, nodes_cap;
    const char **keys; /* n_kv */
    size_t n_kv;
    gguf_name_ix *kv_sorted; /* n_kv */
    gguf_tensor *t;          /* n_t */
    size_t n_t;
    gguf_name_ix *t_sorted; /* n_t */
    char *names;            /* every key and tensor name, NUL-terminated */
    size_t names_used, names_cap;
};

/* Bytes of one element of a number or bool type; 0 for string/array/invalid. */
size_t fc__gguf_scalar_size(uint32_t type);
int fc__gguf_cmp_name(const void *a, const void *b);

#endif /* FUCINA_IO_GGUF_INTERNAL_H */
