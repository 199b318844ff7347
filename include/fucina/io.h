/* SPDX-License-Identifier: MIT */
/* fucina/io.h - model files: safetensors and GGUF, read and written.
 *
 * Reading. An open file is a handle over the whole file, mapped read-only
 * with mmap (or read into memory with FC_IO_NO_MMAP, or borrowed from the
 * caller with the *_open_memory variants). Opening validates everything the
 * format promises before returning, so every descriptor handed out later
 * points inside the file: nothing is ever read outside it. Descriptors
 * (fc_io_tensor) give each tensor's name, dtype, row-major shape, byte
 * offset and size, and a read-only pointer into the mapping that stays
 * valid until the handle is closed.
 *
 * A mapped file must not shrink while it is mapped. mmap shares the file's
 * pages: when another program truncates the file in place (ftruncate, or
 * rewriting it with O_TRUNC rather than writing a new file and renaming it,
 * which is what fucina's writers do), a read of a page past the new end
 * raises SIGBUS and kills the process; no status can report it (the library
 * installs no signal handler). What the library does about it:
 *   - copying loads (fc_*_load with FC_IO_COPY, and the copy made of bytes
 *     not aligned for their dtype) read the file with pread(2), never
 *     through the mapping: a file truncated since open gives FC_ERR_IO
 *     naming the tensor, and the copy is independent of the file after;
 *   - an aliasing (zero-copy) load first checks that the file still covers
 *     the tensor's bytes (FC_ERR_IO when it no longer does);
 *   - open itself reads the header (and the bytes of BOOL safetensors)
 *     through the mapping, so a truncation racing with open can still
 *     raise SIGBUS there;
 *   - fc_checkpoint_load (fucina/checkpoint.h) always reads, never maps,
 *     since checkpoints are the files trainers rewrite.
 * The aliasing contract: a tensor loaded without FC_IO_COPY from a mapped
 * file reads the file's pages at every element access for as long as any
 * reference to it (or a view of it) lives, after the handle is closed too.
 * The caller must keep the file from shrinking below it until the last
 * reference is released; a truncation in that window raises SIGBUS at the
 * next read. A mapped file keeps its descriptor open (for pread) until the
 * handle is closed and the last tensor aliasing it is released.
 * FC_IO_NO_MMAP at open (copy on open) removes every dependence on the
 * file after open: it reads the whole file into allocator memory with
 * read(2) (a file that shrinks or grows during that read is FC_ERR_IO), at
 * the cost of holding it in memory; tensors aliasing that copy never fault.
 * Files that may change while in use should be opened with FC_IO_NO_MMAP,
 * or replaced by rename (as fucina's writers do), never truncated in place.
 *
 * Writing. Every writer is atomic: it writes a temporary file in the target's
 * directory, flushes and fsyncs it, renames it over the target and fsyncs the
 * directory. A failure before the rename leaves the previous file untouched
 * and removes the temporary; FC_ERR_IO messages name the path and the
 * system's reason.
 *
 * Errors. Every function returns an fc_status; with opts->errbuf set, a
 * failure also writes a message naming the function, the file and the
 * offending values ("safetensors_open: x.st: tensor 'w': unknown dtype 'Q9'").
 *
 * Threads. A handle may be read from several threads at once; open, close
 * and write calls on distinct handles and paths are independent.
 */
#ifndef FUCINA_IO_H
#define FUCINA_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fucina/alloc.h"
#include "fucina/dtype.h"
#include "fucina/export.h"
#include "fucina/status.h"
#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- shared options and descriptors --------------------------------------- */

/* Most dims an fc_io_tensor carries (safetensors files with more are refused
 * with FC_ERR_RANK; GGUF allows at most 4). */
#define FC_IO_MAX_RANK 8

enum {
    /* Read the file into allocator memory instead of mapping it (for file
     * systems without mmap, to drop the file descriptor at once, or for a
     * file another program may truncate: no SIGBUS later, see above). */
    FC_IO_NO_MMAP = 1u << 0,
    /* fc_safetensors_load / fc_gguf_load: copy into an owned, writable
     * tensor instead of aliasing the file's bytes (the tensor no longer
     * depends on the file; a mapped file is read with pread, so a file
     * truncated since open is FC_ERR_IO, not SIGBUS). */
    FC_IO_COPY = 1u << 1,
};

/* Options of every open and write call; NULL means all defaults.
 *   char msg[256]; fc_io_opts o = {.errbuf = msg, .errcap = sizeof msg}; */
typedef struct fc_io_opts {
    const fc_allocator *allocator; /* NULL: fc_default_allocator(); used for every byte */
    unsigned flags;                /* FC_IO_* bits */
    char *errbuf;                  /* NULL allowed: receives a failure's message */
    size_t errcap;                 /* bytes at errbuf (the message is NUL-terminated) */
} fc_io_opts;

/* One tensor of a file. On reading, filled by *_tensor_info: name, data and
 * shape are valid until the handle is closed. On writing, the caller fills
 * name, dtype, rank, shape, data and nbytes; offset and ggml_type are
 * ignored. */
typedef struct fc_io_tensor {
    const char *name; /* NUL-terminated UTF-8 */
    fc_dtype dtype;
    int rank;                      /* safetensors: 0 (a scalar) .. 8; GGUF: 1 .. 4 */
    int64_t shape[FC_IO_MAX_RANK]; /* row-major, outermost first; safetensors allows 0 */
    const void *data;              /* the tensor's bytes (read-only when read) */
    uint64_t nbytes;               /* storage bytes: numel * size, or blocks * block bytes */
    uint64_t offset;               /* read: byte offset of data from the start of the file */
    uint32_t ggml_type;            /* GGUF read: the file's ggml type id; else 0 */
} fc_io_tensor;

/* ---- safetensors ------------------------------------------------------------
 * Format: an 8-byte little-endian header length N, N bytes of JSON header
 * ({"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}, ...,
 * optional "__metadata__": {string: string}}), then the byte buffer, which
 * the tensors' [b, e) ranges cover exactly, without holes or overlaps.
 * Dtypes: BOOL U8 I8 U16 I16 I32 I64 F16 BF16 F32 F64 F8_E4M3 F8_E5M2.
 *
 * Open errors: FC_ERR_NULL_ARG; FC_ERR_IO (cannot open, stat, map or read);
 * FC_ERR_OOM; FC_ERR_FORMAT (header length past the file or over 100 MB,
 * invalid JSON, a field missing or of the wrong kind, duplicate names,
 * begin > end, overlapping ranges, holes, truncated data, bytes after the
 * last tensor); FC_ERR_DTYPE (unknown or unsupported dtype string);
 * FC_ERR_RANK (more than 8 dims); FC_ERR_OVERFLOW (element or byte count
 * does not fit in 64 bits); FC_ERR_DATA_LENGTH (e - b differs from the size
 * the shape and dtype give); FC_ERR_FORMAT also for a name, field name,
 * dtype, metadata key or value holding an escaped NUL (\u0000), and for a
 * BOOL tensor byte other than 0 or 1 (message: the tensor, the byte's index
 * and file offset, its value; to check this, open reads every BOOL tensor's
 * bytes once, which for a mapped file touches those pages). Unknown fields inside a tensor entry are
 * ignored, as the reference implementation does. */

/* An open safetensors file (fc_safetensors_open). */
typedef struct fc_st_file fc_st_file;

/* Opens and validates path. On success *out is a new handle (close it with
 * fc_safetensors_close); on failure *out is NULL and nothing is leaked.
 * Mapped (the default) unless opts->flags has FC_IO_NO_MMAP: see the file
 * comment for a mapped file truncated by another program (copying loads
 * report FC_ERR_IO; reads of zero-copy tensors raise SIGBUS). */
FC_API fc_status fc_safetensors_open(const char *path, const fc_io_opts *opts, fc_st_file **out);
/* Same over caller memory, which must stay valid and unchanged until the
 * handle is closed and every buffer borrowed from it is released. */
FC_API fc_status fc_safetensors_open_memory(const void *data, size_t size, const fc_io_opts *opts,
                                            fc_st_file **out);
/* Drops the handle. The mapping itself lives on while tensors borrowed from
 * it are alive. NULL is a harmless no-op. */
FC_API void fc_safetensors_close(fc_st_file *f);
/* Number of tensors (0 for NULL). */
FC_API int64_t fc_safetensors_tensor_count(const fc_st_file *f);
/* Descriptor of tensor i (0 <= i < count), in the header's order.
 * FC_ERR_NULL_ARG, FC_ERR_INDEX. */
FC_API fc_status fc_safetensors_tensor_info(const fc_st_file *f, int64_t i, fc_io_tensor *out);
/* Index of the tensor named name, or -1 (also for NULL arguments). */
FC_API int64_t fc_safetensors_find(const fc_st_file *f, const char *name);
/* The __metadata__ map: its entry count, entry i (borrowed strings valid
 * until close; FC_ERR_NULL_ARG, FC_ERR_INDEX), and a lookup by key that
 * returns NULL when absent. */
FC_API int64_t fc_safetensors_meta_count(const fc_st_file *f);
FC_API fc_status fc_safetensors_meta_at(const fc_st_file *f, int64_t i, const char **key,
                                        const char **value);
FC_API const char *fc_safetensors_meta_find(const fc_st_file *f, const char *key);

/* Writes n tensors and n_meta metadata pairs (both may be 0; the key and
 * value arrays may then be NULL) to path atomically. The header lists the
 * tensors in the caller's order; the data buffer orders them by element
 * size, widest first, so every tensor starts aligned to its element size;
 * the header is padded with spaces so the buffer starts 8-aligned; BOOL
 * bytes are written as 0 and 1 (any nonzero byte is true), the only bytes
 * the reader accepts.
 * Errors: FC_ERR_NULL_ARG; FC_ERR_INVALID_ARG (n < 0, a NULL, duplicate,
 * reserved "__metadata__" or non-UTF-8 name, key or value); FC_ERR_DTYPE
 * (a block dtype); FC_ERR_RANK; FC_ERR_INVALID_SHAPE (a negative dim);
 * FC_ERR_OVERFLOW; FC_ERR_DATA_LENGTH (nbytes differs from the shape's
 * size); FC_ERR_OOM; FC_ERR_IO. */
FC_API fc_status fc_safetensors_write(const char *path, const fc_io_tensor *tensors, int64_t n,
                                      const char *const *meta_keys, const char *const *meta_values,
                                      int64_t n_meta, const fc_io_opts *opts);

/* ---- GGUF ---------------------------------------------------------------------
 * Format (versions 2 and 3, little-endian): magic "GGUF", u32 version, u64
 * tensor count, u64 key/value count, the key/values, the tensor infos (name,
 * u32 n_dims, u64 dims innermost first, u32 ggml type, u64 offset), padding
 * to the alignment (general.alignment, default 32), the tensor data.
 * Shapes are reported row-major (the file's dims reversed).
 *
 * Every ggml type id maps to a dtype (F32 0, F16 1, Q4_0 2, Q4_1 3, Q5_0 6,
 * Q5_1 7, Q8_0 8, Q8_1 9, Q2_K..Q8_K 10..15, IQ2_XXS 16, IQ2_XS 17, IQ3_XXS
 * 18, IQ1_S 19, IQ4_NL 20, IQ3_S 21, IQ2_S 22, IQ4_XS 23, I8 24, I16 25, I32
 * 26, I64 27, F64 28, IQ1_M 29, BF16 30, TQ1_0 34, TQ2_0 35, MXFP4 39, NVFP4
 * 40, Q1_0 41, Q2_0 42). Id 42 names two layouts: ggml's 64-element q2_0
 * (FC_Q2_0_G64, 18 bytes) and the PrismML 128-element one (FC_Q2_0, 34
 * bytes); the reader tells them apart by the room the tensor has before the
 * next tensor (or the end of the file) and refuses when both fit.
 *
 * Open errors: FC_ERR_NULL_ARG, FC_ERR_IO, FC_ERR_OOM; FC_ERR_FORMAT (bad
 * magic, unsupported version or byte order, counts or lengths that cannot
 * fit in the file, truncation, unknown value type, bool not 0/1, arrays
 * nested deeper than 8, duplicate keys or tensor names, a key or tensor
 * name that holds a NUL or is not UTF-8 (RFC 3629: overlong forms,
 * surrogates and code points above U+10FFFF are refused; the message names
 * the key's or tensor's index), a bad
 * general.alignment, unknown ggml type id, misaligned, overlapping or
 * out-of-file data, an ambiguous type 42); FC_ERR_RANK (n_dims outside
 * 1..4); FC_ERR_INVALID_SHAPE (a dim of 0, or the innermost dim not a
 * multiple of the block size); FC_ERR_OVERFLOW (element or byte count). */

/* An open GGUF file (fc_gguf_open). */
typedef struct fc_gguf_file fc_gguf_file;
/* A metadata value, owned by its file (valid until close). */
typedef struct fc_gguf_value fc_gguf_value;

/* GGUF metadata value types, with the file format's numbering. */
typedef enum fc_gguf_type {
    FC_GGUF_U8 = 0,
    FC_GGUF_I8 = 1,
    FC_GGUF_U16 = 2,
    FC_GGUF_I16 = 3,
    FC_GGUF_U32 = 4,
    FC_GGUF_I32 = 5,
    FC_GGUF_F32 = 6,
    FC_GGUF_BOOL = 7,
    FC_GGUF_STRING = 8,
    FC_GGUF_ARRAY = 9,
    FC_GGUF_U64 = 10,
    FC_GGUF_I64 = 11,
    FC_GGUF_F64 = 12,
    FC_GGUF_TYPE_COUNT
} fc_gguf_type;

/* Open and validate; see fc_safetensors_open / _open_memory for ownership,
 * and for mmap, FC_IO_NO_MMAP and a file truncated while mapped (SIGBUS). */
FC_API fc_status fc_gguf_open(const char *path, const fc_io_opts *opts, fc_gguf_file **out);
FC_API fc_status fc_gguf_open_memory(const void *data, size_t size, const fc_io_opts *opts,
                                     fc_gguf_file **out);
/* NULL is a harmless no-op. */
FC_API void fc_gguf_close(fc_gguf_file *f);
/* The file's version (2 or 3) and data alignment; 0 for NULL. */
FC_API uint32_t fc_gguf_version(const fc_gguf_file *f);
FC_API uint64_t fc_gguf_alignment(const fc_gguf_file *f);

/* Tensors, in the file's order; see the safetensors twins. */
FC_API int64_t fc_gguf_tensor_count(const fc_gguf_file *f);
FC_API fc_status fc_gguf_tensor_info(const fc_gguf_file *f, int64_t i, fc_io_tensor *out);
FC_API int64_t fc_gguf_find(const fc_gguf_file *f, const char *name);

/* Key/values, in the file's order. Keys are NUL-terminated; NULL when out of
 * range. fc_gguf_kv_find returns NULL when key is absent. */
FC_API int64_t fc_gguf_kv_count(const fc_gguf_file *f);
FC_API const char *fc_gguf_kv_key(const fc_gguf_file *f, int64_t i);
FC_API const fc_gguf_value *fc_gguf_kv_value(const fc_gguf_file *f, int64_t i);
FC_API const fc_gguf_value *fc_gguf_kv_find(const fc_gguf_file *f, const char *key);

/* The value's type; FC_GGUF_TYPE_COUNT for NULL. */
FC_API fc_gguf_type fc_gguf_value_type(const fc_gguf_value *v);
/* Scalar getters. _int takes every integer type and bool (FC_ERR_OVERFLOW for
 * a u64 above INT64_MAX); _uint every integer type and bool (FC_ERR_OVERFLOW
 * for a negative value); _float f32 and f64; _bool bool only; _string gives
 * the bytes in the file, NOT NUL-terminated, and their length. A type that
 * does not fit is FC_ERR_DTYPE; NULL arguments FC_ERR_NULL_ARG. */
FC_API fc_status fc_gguf_value_int(const fc_gguf_value *v, int64_t *out);
FC_API fc_status fc_gguf_value_uint(const fc_gguf_value *v, uint64_t *out);
FC_API fc_status fc_gguf_value_float(const fc_gguf_value *v, double *out);
FC_API fc_status fc_gguf_value_bool(const fc_gguf_value *v, bool *out);
FC_API fc_status fc_gguf_value_string(const fc_gguf_value *v, const char **s, size_t *len);

/* Arrays: element type and count (FC_ERR_DTYPE when v is not an array). */
FC_API fc_status fc_gguf_array_info(const fc_gguf_value *v, fc_gguf_type *elem_type,
                                    uint64_t *count);
/* Element i of an array of strings or arrays, as a value; NULL when v is not
 * such an array or i is out of range. */
FC_API const fc_gguf_value *fc_gguf_array_item(const fc_gguf_value *v, uint64_t i);
/* Element i of an array of numbers or bools, with the scalar getters' rules
 * (FC_ERR_INDEX out of range). */
FC_API fc_status fc_gguf_array_int(const fc_gguf_value *v, uint64_t i, int64_t *out);
FC_API fc_status fc_gguf_array_uint(const fc_gguf_value *v, uint64_t i, uint64_t *out);
FC_API fc_status fc_gguf_array_float(const fc_gguf_value *v, uint64_t i, double *out);
/* The packed little-endian elements of an array of numbers or bools, in the
 * file (zero-copy; not necessarily aligned: copy with memcpy). */
FC_API fc_status fc_gguf_array_data(const fc_gguf_value *v, const void **data, size_t *elem_size);

/* A key/value to write. data depends on type:
 *   numbers and bool  one value of the C type (uint8_t ... double; bool as bool)
 *   FC_GGUF_STRING    the NUL-terminated string itself (const char *)
 *   FC_GGUF_ARRAY     count elements of elem_type: C values for numbers and
 *                     bools, const char *const * for strings, and const
 *                     fc_gguf_kv * (their keys ignored) for nested arrays.
 * A "general.alignment" entry (FC_GGUF_U32, a power of two) sets the data
 * alignment; without one it is 32. */
typedef struct fc_gguf_kv {
    const char *key;
    fc_gguf_type type;
    fc_gguf_type elem_type; /* FC_GGUF_ARRAY only */
    uint64_t count;         /* FC_GGUF_ARRAY only */
    const void *data;
} fc_gguf_kv;

/* Writes a GGUF version 3 file atomically: the key/values and tensors in the
 * caller's order, each tensor's data padded to the alignment. Errors:
 * FC_ERR_NULL_ARG; FC_ERR_INVALID_ARG (negative counts, NULL, duplicate
 * or non-UTF-8 keys or names (the message names the index), a bad type, a bad general.alignment, names of 64 bytes or
 * more, which ggml cannot load); FC_ERR_DTYPE (a dtype without a ggml type:
 * bool, u8, u16, f8, nf4; or a q2_0 / q2_0_g64 tensor whose size at this
 * alignment would not tell the two layouts of id 42 apart on reading);
 * FC_ERR_RANK (rank outside 1..4); FC_ERR_INVALID_SHAPE; FC_ERR_OVERFLOW;
 * FC_ERR_DATA_LENGTH; FC_ERR_OOM; FC_ERR_IO. */
FC_API fc_status fc_gguf_write(const char *path, const fc_gguf_kv *kvs, int64_t n_kv,
                               const fc_io_tensor *tensors, int64_t n, const fc_io_opts *opts);

/* The ggml type id of dtype (FC_ERR_DTYPE when it has none), and the dtype
 * of an id (FC_ERR_FORMAT for an unknown id; id 42 gives FC_Q2_0_G64, ggml's
 * own layout). */
FC_API fc_status fc_gguf_type_of(fc_dtype dtype, uint32_t *ggml_type);
FC_API fc_status fc_gguf_dtype_of(uint32_t ggml_type, fc_dtype *dtype);

/* ---- tensors ------------------------------------------------------------------
 * Loading returns a new reference (or NULL + the context's error). Without
 * FC_IO_COPY the tensor aliases the file's bytes read-only (mutable access
 * fails with FC_ERR_READ_ONLY) and keeps the mapping alive after the handle
 * is closed; bytes not aligned to the dtype's element size are copied
 * anyway. FC_IO_COPY gives an owned, writable copy. A safetensors scalar
 * (shape []) loads as shape [1]. Errors: FC_ERR_NULL_ARG, FC_ERR_INDEX (no
 * tensor of that name), FC_ERR_INVALID_SHAPE (a zero dim: such a tensor is
 * only available as a descriptor), FC_ERR_OOM, FC_ERR_IO (a mapped file
 * that no longer holds the tensor's bytes: truncated since open, or a
 * failed pread; the message names the tensor and the sizes). The aliasing
 * contract of the file comment applies to tensors loaded without
 * FC_IO_COPY from a mapped file. */
FC_API fc_tensor *fc_safetensors_load(fc_ctx *ctx, const fc_st_file *f, const char *name,
                                      unsigned flags);
FC_API fc_tensor *fc_gguf_load(fc_ctx *ctx, const fc_gguf_file *f, const char *name,
                               unsigned flags);

/* Save n tensors (borrowed; any layout: non-contiguous ones are copied to a
 * contiguous form first) under names[i], atomically, with the writers'
 * rules and errors above. The error is also recorded in ctx. */
FC_API fc_status fc_safetensors_save(fc_ctx *ctx, const char *path, const char *const *names,
                                     fc_tensor *const *tensors, int64_t n,
                                     const char *const *meta_keys, const char *const *meta_values,
                                     int64_t n_meta);
FC_API fc_status fc_gguf_save(fc_ctx *ctx, const char *path, const fc_gguf_kv *kvs, int64_t n_kv,
                              const char *const *names, fc_tensor *const *tensors, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_IO_H */
