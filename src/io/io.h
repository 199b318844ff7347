/* SPDX-License-Identifier: MIT */
/* io.h - internals shared by the model-file readers and writers.
 *
 * Three pieces live here:
 *  - fc_io_map: the bytes of one file (an mmap, a heap copy, or caller
 *    memory), refcounted. The open file handle holds one reference and every
 *    tensor buffer borrowed from the mapping holds another, through an
 *    fc_buffer release hook, so closing the handle never pulls bytes out
 *    from under a live tensor; the last reference unmaps.
 *  - fc_io_out: the atomic writer (temporary file in the target's directory,
 *    buffered writes, fsync, rename, directory fsync), with an optional fault
 *    plan so tests can make it fail after any number of bytes or at any
 *    step and check that the old file survives.
 *  - error text: fc__io_fail formats "<fn>: <detail>" into the caller's
 *    errbuf (if any) and returns the status, so a check reads
 *    `return fc__io_fail(o, FC_ERR_FORMAT, "...", ...)`.
 */
#ifndef FUCINA_IO_IO_H
#define FUCINA_IO_IO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buffer.h"
#include "fucina/io.h"

/* ---- errors -------------------------------------------------------------- */

fc_status fc__io_fail(const fc_io_opts *o, fc_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Clears errbuf (a successful call leaves an empty message). */
void fc__io_clear(const fc_io_opts *o);
/* The allocator of o (NULL when o or its allocator is NULL: the default). */
static inline const fc_allocator *fc__io_alloc(const fc_io_opts *o) {
    return o ? o->allocator : NULL;
}

/* ---- little-endian access ---------------------------------------------------- */

static inline uint16_t fc__le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t fc__le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t fc__le64(const uint8_t *p) {
    return (uint64_t)fc__le32(p) | ((uint64_t)fc__le32(p + 4) << 32);
}
static inline void fc__put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void fc__put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- growable arrays over an fc_allocator -------------------------------------- */

/* Makes room for `need` elements of `elem` bytes in *p (capacity *cap),
 * doubling. FC_ERR_OOM / FC_ERR_OVERFLOW leave *p untouched. */
fc_status fc__io_grow(const fc_allocator *a, void **p, size_t *cap, size_t elem, size_t need);

/* ---- the mapping ----------------------------------------------------------------- */

typedef enum { FC_IO_MAP_MMAP, FC_IO_MAP_HEAP, FC_IO_MAP_BORROWED } fc_io_map_kind;

typedef struct fc_io_map {
    atomic_uint refs;
    fc_allocator alloc; /* frees this struct (and heap bytes) */
    fc_io_map_kind kind;
    const uint8_t *data; /* NULL only when size == 0 */
    size_t size;
    int fd; /* MMAP: the open file, for fc__io_map_read (closed by the last release); else -1 */
} fc_io_map;

/* Maps path read-only (or reads it, with FC_IO_NO_MMAP). refs == 1.
 * FC_ERR_IO names the path and strerror; FC_ERR_OOM. fn names the caller in
 * messages. */
fc_status fc__io_map_file(const char *fn, const char *path, const fc_io_opts *o, fc_io_map **out);
/* Wraps caller memory without copying. refs == 1. */
fc_status fc__io_map_memory(const void *data, size_t size, const fc_io_opts *o, fc_io_map **out);
void fc__io_map_retain(fc_io_map *m);
/* The last release unmaps / frees. NULL is a no-op. */
void fc__io_map_release(fc_io_map *m);
/* Copies n bytes of m starting at src (a pointer into m->data) into dst.
 * A mapped file is read with pread(2) from its descriptor, never through
 * the mapping: a file truncated since it was mapped gives FC_ERR_IO (the
 * message, in err, says how many bytes were left) where a read of the lost
 * pages would raise SIGBUS. Heap and caller memory are copied. FC_OK. */
fc_status fc__io_map_read(const fc_io_map *m, const void *src, size_t n, void *dst, char *err,
                          size_t errcap);
/* FC_OK when the file behind m still holds [src, src + n): its size now
 * (fstat) covers the range. FC_ERR_IO (message in err) when the file
 * shrank below it since open. Always FC_OK for heap and caller memory. */
fc_status fc__io_map_check_range(const fc_io_map *m, const void *src, size_t n, char *err,
                                 size_t errcap);
/* A read-only buffer aliasing [data, data + nbytes) inside m, whose header
 * comes from allocator a; it holds a reference on m until its last release.
 * refs == 1. FC_ERR_INDEX when the range is not inside the mapping. */
fc_status fc__io_map_buffer(fc_io_map *m, const fc_allocator *a, const void *data, size_t nbytes,
                            fc_buffer **out);

/* ---- the atomic writer --------------------------------------------------------------- */

/* Where a planned fault strikes (tests). */
typedef enum {
    FC_IO_FAULT_NONE,
    FC_IO_FAULT_OPEN,    /* creating the temporary file */
    FC_IO_FAULT_WRITE,   /* write() fails once `after_bytes` bytes are written */
    FC_IO_FAULT_FSYNC,   /* fsync of the temporary file */
    FC_IO_FAULT_CLOSE,   /* close of the temporary file */
    FC_IO_FAULT_RENAME,  /* the rename over the target */
    FC_IO_FAULT_DIRSYNC, /* fsync of the directory (after the rename) */
} fc_io_fault_step;

typedef struct fc_io_fault {
    fc_io_fault_step step;
    uint64_t after_bytes; /* FC_IO_FAULT_WRITE: bytes that still succeed */
    int errnum;           /* the errno to report (0: EIO) */
} fc_io_fault;

typedef struct fc_io_out {
    const fc_io_opts *o;
    const fc_io_fault *fault; /* NULL: none */
    const char *fn;           /* caller name for messages */
    const char *path;         /* target (borrowed) */
    char *tmp;                /* temporary path (allocated) */
    size_t tmp_size;
    int fd;
    uint8_t *buf; /* write buffer */
    size_t buf_used;
    uint64_t written; /* bytes handed to write() so far */
    fc_status st;     /* sticky: first failure */
} fc_io_out;

/* Creates the temporary file. On failure nothing is left behind. */
fc_status fc__io_out_open(fc_io_out *w, const char *fn, const char *path, const fc_io_opts *o,
                          const fc_io_fault *fault);
/* Buffered write; the first failure sticks and later calls return it. */
fc_status fc__io_out_write(fc_io_out *w, const void *p, size_t n);
/* n copies of byte. */
fc_status fc__io_out_fill(fc_io_out *w, uint8_t byte, size_t n);
/* Flush, fsync, close, rename over the target, fsync the directory. On a
 * failure before the rename the temporary file is removed and the target
 * is untouched. Always releases w's resources. */
fc_status fc__io_out_commit(fc_io_out *w);
/* Abandons the temporary file (removes it). Always releases w's resources. */
void fc__io_out_abort(fc_io_out *w);

/* ---- writers with a fault plan (tests) ------------------------------------------ */

fc_status fc__safetensors_write_faulty(const char *path, const fc_io_tensor *tensors, int64_t n,
                                       const char *const *meta_keys, const char *const *meta_values,
                                       int64_t n_meta, const fc_io_opts *opts,
                                       const fc_io_fault *fault);
fc_status fc__gguf_write_faulty(const char *path, const fc_gguf_kv *kvs, int64_t n_kv,
                                const fc_io_tensor *tensors, int64_t n, const fc_io_opts *opts,
                                const fc_io_fault *fault);

/* ---- safetensors dtype strings (shared by reader and writer) ---------------------- */

typedef struct fc_st_dtype_name {
    const char *name;
    fc_dtype dtype;
} fc_st_dtype_name;
#define FC__ST_DTYPE_COUNT 13
extern const fc_st_dtype_name fc__st_dtypes[FC__ST_DTYPE_COUNT];

/* ---- handles' mappings (tensor construction) ---------------------------------------- */

fc_io_map *fc__safetensors_map(const fc_st_file *f);
fc_io_map *fc__gguf_map(const fc_gguf_file *f);

#endif /* FUCINA_IO_IO_H */
