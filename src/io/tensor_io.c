/* SPDX-License-Identifier: MIT */
/* tensor_io.c - model files as fc_tensor handles.
 *
 * Loading. By default a loaded tensor aliases the file's bytes: its buffer
 * is a read-only borrow of the mapping whose release hook drops a mapping
 * reference (io/mapping.c), so tensors outlive the file handle and the last
 * one unmaps. Two cases copy into an owned, writable buffer from the
 * context's pool instead: FC_IO_COPY, and bytes that are not aligned to the
 * dtype's natural alignment (a safetensors file from another writer may
 * place an f32 tensor at an odd offset; kernels read elements through typed
 * pointers, which needs alignment). GGUF data is always aligned.
 *
 * Copies never read through a mapping: fc__io_map_read preads the file,
 * so a file truncated since open is FC_ERR_IO instead of SIGBUS, and an
 * aliasing load first checks that the file still covers the tensor (a
 * truncation after that is the caller's contract, fucina/io.h).
 *
 * A tensor has rank 1..8 and dims >= 1, so a safetensors scalar (shape [])
 * loads as shape [1], and a tensor with a zero dim cannot be loaded (its
 * descriptor is still available through *_tensor_info).
 *
 * Saving takes each tensor's contiguous form (fc_contiguous: the tensor
 * itself when it already is) and hands the bytes to the format writer. */
#include <string.h>

#include "exec/kernels/copy.h"
#include "exec/tensor.h"
#include "io/io.h"

/* Largest power of two dividing the element (or block) size, at most 8. */
static size_t natural_align(fc_dtype d) {
    size_t s = fc_dtype_size(d), a = 1;
    while (a < 8 && s % (a * 2) == 0)
        a *= 2;
    return a;
}

static fc_tensor *load(fc_ctx *ctx, const char *op, fc_io_map *map, const fc_io_tensor *info,
                       unsigned flags) {
    int64_t one = 1;
    const int64_t *shape = info->rank ? info->shape : &one;
    int rank = info->rank ? info->rank : 1;
    int64_t n;
    fc_status st = fc__shape_storage_numel(info->dtype, shape, rank, &n);
    if (st != FC_OK) {
        char s[160];
        fc__fail(ctx, st, "%s: tensor '%s' of shape %s cannot be a tensor (%s)", op, info->name,
                 fc__shape_str(shape, rank, s, (int)sizeof s), fc_strerror(st));
        return NULL;
    }
    size_t nbytes = (size_t)info->nbytes;
    bool aligned = ((uintptr_t)info->data % natural_align(info->dtype)) == 0;
    char err[192];
    if ((flags & FC_IO_COPY) || !aligned) {
        fc_tensor *t = fc__tensor_new(ctx, op, info->dtype, shape, rank);
        if (!t) return NULL;
        void *dst = fc_tensor_data_mut(t);
        st = fc__io_map_read(map, info->data, nbytes, dst, err, sizeof err);
        if (st != FC_OK) {
            fc_release(t);
            fc__fail(ctx, st, "%s: tensor '%s': %s", op, info->name, err);
            return NULL;
        }
        return t;
    }
    st = fc__io_map_check_range(map, info->data, nbytes, err, sizeof err);
    if (st != FC_OK) {
        fc__fail(ctx, st, "%s: tensor '%s': %s", op, info->name, err);
        return NULL;
    }
    fc_buffer *buf;
    st = fc__io_map_buffer(map, &ctx->alloc, info->data, nbytes, &buf);
    if (st != FC_OK) {
        fc__fail(ctx, st, "%s: tensor '%s': cannot borrow the mapping (%s)", op, info->name,
                 fc_strerror(st));
        return NULL;
    }
    fc_raw raw;
    st = fc__raw_from_buffer(buf, info->dtype, shape, rank, &raw);
    if (st != FC_OK) {
        fc__buffer_release(buf);
        fc__fail(ctx, st, "%s: tensor '%s': %s", op, info->name, fc_strerror(st));
        return NULL;
    }
    return fc__tensor_wrap(ctx, op, &raw);
}

fc_tensor *fc_safetensors_load(fc_ctx *ctx, const fc_st_file *f, const char *name, unsigned flags) {
    static const char *const op = "fc_safetensors_load";
    FC__CHECK_CTX(ctx);
    if (!f || !name) {
        fc__fail(ctx, FC_ERR_NULL_ARG, "%s: file or name is NULL", op);
        return NULL;
    }
    fc_io_tensor info;
    if (fc_safetensors_tensor_info(f, fc_safetensors_find(f, name), &info) != FC_OK) {
        fc__fail(ctx, FC_ERR_INDEX, "%s: no tensor named '%s'", op, name);
        return NULL;
    }
    return load(ctx, op, fc__safetensors_map(f), &info, flags);
}

fc_tensor *fc_gguf_load(fc_ctx *ctx, const fc_gguf_file *f, const char *name, unsigned flags) {
    static const char *const op = "fc_gguf_load";
    FC__CHECK_CTX(ctx);
    if (!f || !name) {
        fc__fail(ctx, FC_ERR_NULL_ARG, "%s: file or name is NULL", op);
        return NULL;
    }
    fc_io_tensor info;
    if (fc_gguf_tensor_info(f, fc_gguf_find(f, name), &info) != FC_OK) {
        fc__fail(ctx, FC_ERR_INDEX, "%s: no tensor named '%s'", op, name);
        return NULL;
    }
    return load(ctx, op, fc__gguf_map(f), &info, flags);
}

/* ---- saving ----------------------------------------------------------------------------- */

typedef struct save_set {
    fc_io_tensor *desc;
    fc_tensor **contig;
    int64_t n;
} save_set;

static void save_set_free(fc_ctx *ctx, save_set *s) {
    for (int64_t i = 0; i < s->n; i++)
        if (s->contig) fc_release(s->contig[i]);
    fc__ctx_free(ctx, s->desc, (size_t)s->n * sizeof *s->desc);
    fc__ctx_free(ctx, s->contig, (size_t)s->n * sizeof *s->contig);
}

/* Descriptors over the contiguous form of each tensor. */
static fc_status save_set_make(fc_ctx *ctx, const char *op, const char *const *names,
                               fc_tensor *const *tensors, int64_t n, save_set *s) {
    memset(s, 0, sizeof *s);
    if (n < 0) return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: n = %lld", op, (long long)n);
    if (n == 0) return FC_OK;
    if (!names || !tensors)
        return fc__fail(ctx, FC_ERR_NULL_ARG, "%s: names or tensors is NULL", op);
    s->desc = fc__ctx_alloc(ctx, (size_t)n * sizeof *s->desc);
    s->contig = fc__ctx_alloc(ctx, (size_t)n * sizeof *s->contig);
    if (!s->desc || !s->contig) {
        fc__ctx_free(ctx, s->desc, (size_t)n * sizeof *s->desc);
        fc__ctx_free(ctx, s->contig, (size_t)n * sizeof *s->contig);
        s->desc = NULL;
        s->contig = NULL;
        return fc__fail(ctx, FC_ERR_OOM, "%s: out of memory", op);
    }
    memset(s->contig, 0, (size_t)n * sizeof *s->contig);
    s->n = n;
    for (int64_t i = 0; i < n; i++) {
        if (!tensors[i])
            return fc__fail(ctx, FC_ERR_NULL_ARG, "%s: tensor %lld is NULL", op, (long long)i);
        if (tensors[i]->ctx != ctx)
            return fc__fail(ctx, FC_ERR_CONTEXT, "%s: tensor %lld belongs to another context", op,
                            (long long)i);
        fc_tensor *c = fc__copy_contiguous(ctx, op, tensors[i]);
        if (!c) return fc_ctx_status(ctx);
        s->contig[i] = c;
        fc_io_tensor *d = &s->desc[i];
        memset(d, 0, sizeof *d);
        d->name = names[i];
        d->dtype = c->raw.dtype;
        d->rank = c->raw.rank;
        memcpy(d->shape, c->raw.shape, (size_t)c->raw.rank * sizeof *d->shape);
        d->data = fc__raw_base(&c->raw);
        d->nbytes = fc_tensor_nbytes(c);
    }
    return FC_OK;
}

fc_status fc_safetensors_save(fc_ctx *ctx, const char *path, const char *const *names,
                              fc_tensor *const *tensors, int64_t n, const char *const *meta_keys,
                              const char *const *meta_values, int64_t n_meta) {
    static const char *const op = "fc_safetensors_save";
    if (!ctx) return FC_ERR_NULL_ARG;
    save_set s;
    fc_status st = save_set_make(ctx, op, names, tensors, n, &s);
    if (st == FC_OK) {
        char err[FC__ERR_CAP];
        fc_io_opts o = {.allocator = &ctx->alloc, .errbuf = err, .errcap = sizeof err};
        st = fc_safetensors_write(path, s.desc, n, meta_keys, meta_values, n_meta, &o);
        if (st != FC_OK) fc__fail(ctx, st, "%s: %s", op, err);
    }
    save_set_free(ctx, &s);
    return st;
}

fc_status fc_gguf_save(fc_ctx *ctx, const char *path, const fc_gguf_kv *kvs, int64_t n_kv,
                       const char *const *names, fc_tensor *const *tensors, int64_t n) {
    static const char *const op = "fc_gguf_save";
    if (!ctx) return FC_ERR_NULL_ARG;
    save_set s;
    fc_status st = save_set_make(ctx, op, names, tensors, n, &s);
    if (st == FC_OK) {
        char err[FC__ERR_CAP];
        fc_io_opts o = {.allocator = &ctx->alloc, .errbuf = err, .errcap = sizeof err};
        st = fc_gguf_write(path, kvs, n_kv, s.desc, n, &o);
        if (st != FC_OK) fc__fail(ctx, st, "%s: %s", op, err);
    }
    save_set_free(ctx, &s);
    return st;
}
