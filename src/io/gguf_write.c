/* SPDX-License-Identifier: MIT */
/* gguf_write.c - the GGUF writer (version 3).
 *
 * Layout written: "GGUF", u32 3, u64 tensor count, u64 key/value count, the
 * key/values, the tensor infos (dims innermost first: our row-major shape
 * reversed), zero padding to the alignment, then each tensor's data padded
 * with zeros to the alignment, in the caller's order, so offsets are
 * exactly sequential as ggml's reader requires (it recomputes each offset
 * and refuses any other).
 *
 * Everything is validated before the temporary file is created, with the
 * reader's rules plus ggml's name limit (names of 64 bytes or more do not
 * load in ggml), and numbers are written byte by byte in little-endian
 * order whatever the host. */
#include <stdlib.h>
#include <string.h>

#include "io/gguf_internal.h"
#include "io/json.h"

static const char *const FN = "gguf_write";

static uint64_t pad_to(uint64_t x, uint64_t a) { return x + (a - x % a) % a; }

/* ---- validation -------------------------------------------------------------------------- */

static fc_status check_value(const fc_gguf_kv *v, const char *key, int depth, const fc_io_opts *o) {
    if ((unsigned)v->type >= FC_GGUF_TYPE_COUNT)
        return fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: key '%s': bad value type %d", FN, key,
                           (int)v->type);
    if (v->type != FC_GGUF_ARRAY) {
        if (!v->data) return fc__io_fail(o, FC_ERR_NULL_ARG, "%s: key '%s': data is NULL", FN, key);
        return FC_OK;
    }
    if (depth >= FC_GGUF_MAX_NEST)
        return fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: key '%s': arrays nested deeper than %d", FN,
                           key, FC_GGUF_MAX_NEST);
    if ((unsigned)v->elem_type >= FC_GGUF_TYPE_COUNT)
        return fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: key '%s': bad array element type %d", FN,
                           key, (int)v->elem_type);
    if (v->count == 0) return FC_OK;
    if (!v->data)
        return fc__io_fail(o, FC_ERR_NULL_ARG, "%s: key '%s': array data is NULL", FN, key);
    if (v->elem_type == FC_GGUF_STRING) {
        const char *const *s = v->data;
        for (uint64_t i = 0; i < v->count; i++)
            if (!s[i])
                return fc__io_fail(o, FC_ERR_NULL_ARG, "%s: key '%s': string %llu is NULL", FN, key,
                                   (unsigned long long)i);
    } else if (v->elem_type == FC_GGUF_ARRAY) {
        const fc_gguf_kv *sub = v->data;
        for (uint64_t i = 0; i < v->count; i++) {
            if (sub[i].type != FC_GGUF_ARRAY)
                return fc__io_fail(
                    o, FC_ERR_INVALID_ARG,
                    "%s: key '%s': element %llu of an array of arrays is not an array", FN, key,
                    (unsigned long long)i);
            fc_status st = check_value(&sub[i], key, depth + 1, o);
            if (st != FC_OK) return st;
        }
    }
    return FC_OK;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static fc_status check_unique(const fc_allocator *a, const char **names, int64_t n,
                              const char *what, const fc_io_opts *o) {
    if (n < 2) return FC_OK;
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int64_t i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            return fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: duplicate %s '%s'", FN, what, names[i]);
    (void)a;
    return FC_OK;
}

/* Byte size of a tensor as dtype; FC_ERR_INVALID_SHAPE / FC_ERR_OVERFLOW. */
static fc_status row_major_bytes(const fc_io_tensor *t, uint64_t *out) {
    int64_t blk = fc_dtype_block_elems(t->dtype);
    int64_t inner = t->shape[t->rank - 1];
    if (inner % blk != 0) return FC_ERR_INVALID_SHAPE;
    uint64_t n = (uint64_t)(inner / blk);
    for (int k = 0; k < t->rank - 1; k++) {
        if (n > (uint64_t)INT64_MAX / (uint64_t)t->shape[k]) return FC_ERR_OVERFLOW;
        n *= (uint64_t)t->shape[k];
    }
    uint64_t bs = fc_dtype_size(t->dtype);
    if (n > (uint64_t)INT64_MAX / (uint64_t)blk || n > (uint64_t)INT64_MAX / bs)
        return FC_ERR_OVERFLOW;
    *out = n * bs;
    return FC_OK;
}

/* The two layouts of id 42 must stay distinguishable by size (gguf.c's
 * resolve_q2): the other layout must not fit the room this one gets. */
static bool q2_ambiguous(const fc_io_tensor *t, uint64_t align) {
    if (t->dtype != FC_Q2_0 && t->dtype != FC_Q2_0_G64) return false;
    fc_io_tensor other = *t;
    other.dtype = t->dtype == FC_Q2_0 ? FC_Q2_0_G64 : FC_Q2_0;
    uint64_t mine, theirs;
    if (row_major_bytes(t, &mine) != FC_OK || row_major_bytes(&other, &theirs) != FC_OK)
        return false;
    uint64_t room = pad_to(mine, align);
    return theirs <= room && room <= pad_to(theirs, align);
}

static fc_status check_tensor(const fc_io_tensor *t, int64_t i, uint64_t align,
                              const fc_io_opts *o) {
    if (!t->name)
        return fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: tensor %lld has no name", FN, (long long)i);
    if (strlen(t->name) >= FC_GGUF_MAX_NAME)
        return fc__io_fail(o, FC_ERR_INVALID_ARG,
                           "%s: tensor name '%.40s...' is %zu bytes; ggml loads names shorter than "
                           "%d",
                           FN, t->name, strlen(t->name), FC_GGUF_MAX_NAME);
    if (!fc__utf8_valid(t->name, strlen(t->name)))
        return fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: tensor %lld: name is not valid UTF-8", FN,
                           (long long)i);
    uint32_t id;
    if (fc_gguf_type_of(t->dtype, &id) != FC_OK)
        return fc__io_fail(o, FC_ERR_DTYPE, "%s: tensor '%s': dtype %s has no ggml type", FN,
                           t->name, fc_dtype_name(t->dtype));
    if (t->rank < 1 || t->rank > FC_GGUF_MAX_DIMS)
        return fc__io_fail(o, FC_ERR_RANK, "%s: tensor '%s': rank %d outside 1..%d", FN, t->name,
                           t->rank, FC_GGUF_MAX_DIMS);
    for (int d = 0; d < t->rank; d++)
        if (t->shape[d] < 1)
            return fc__io_fail(o, FC_ERR_INVALID_SHAPE, "%s: tensor '%s': dim %d is %lld", FN,
                               t->name, d, (long long)t->shape[d]);
    uint64_t need;
    fc_status st = row_major_bytes(t, &need);
    if (st == FC_ERR_INVALID_SHAPE)
        return fc__io_fail(o, st,
                           "%s: tensor '%s': last dim %lld is not a multiple of %s's block %lld",
                           FN, t->name, (long long)t->shape[t->rank - 1], fc_dtype_name(t->dtype),
                           (long long)fc_dtype_block_elems(t->dtype));
    if (st != FC_OK) return fc__io_fail(o, st, "%s: tensor '%s': byte size overflows", FN, t->name);
    if (need != t->nbytes)
        return fc__io_fail(o, FC_ERR_DATA_LENGTH,
                           "%s: tensor '%s': nbytes %llu, the shape needs %llu", FN, t->name,
                           (unsigned long long)t->nbytes, (unsigned long long)need);
    if (!t->data)
        return fc__io_fail(o, FC_ERR_NULL_ARG, "%s: tensor '%s': data is NULL", FN, t->name);
    if (q2_ambiguous(t, align))
        return fc__io_fail(o, FC_ERR_DTYPE,
                           "%s: tensor '%s': q2_0 and q2_0_g64 share ggml type 42, and at %llu "
                           "bytes with alignment %llu a reader could not tell which this is",
                           FN, t->name, (unsigned long long)t->nbytes, (unsigned long long)align);
    return FC_OK;
}

static fc_status check_args(const fc_gguf_kv *kvs, int64_t n_kv, const fc_io_tensor *t, int64_t n,
                            const fc_io_opts *o, uint64_t *align) {
    if (n < 0 || n_kv < 0)
        return fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: negative count (%lld kvs, %lld tensors)", FN,
                           (long long)n_kv, (long long)n);
    if ((n > 0 && !t) || (n_kv > 0 && !kvs))
        return fc__io_fail(o, FC_ERR_NULL_ARG, "%s: NULL array", FN);
    *align = FC_GGUF_DEFAULT_ALIGN;
    for (int64_t i = 0; i < n_kv; i++) {
        const char *key = kvs[i].key;
        if (!key)
            return fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: key %lld is NULL", FN, (long long)i);
        if (strlen(key) > FC_GGUF_MAX_KEY)
            return fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: key %lld longer than %d bytes", FN,
                               (long long)i, FC_GGUF_MAX_KEY);
        if (!fc__utf8_valid(key, strlen(key)))
            return fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: key %lld is not valid UTF-8", FN,
                               (long long)i);
        fc_status st = check_value(&kvs[i], key, 0, o);
        if (st != FC_OK) return st;
        if (strcmp(key, "general.alignment") == 0) {
            uint32_t al = 0;
            if (kvs[i].type == FC_GGUF_U32) memcpy(&al, kvs[i].data, 4);
            if (kvs[i].type != FC_GGUF_U32 || al == 0 || (al & (al - 1)) != 0)
                return fc__io_fail(o, FC_ERR_INVALID_ARG,
                                   "%s: general.alignment must be a u32 power of two", FN);
            *align = al;
        }
    }
    for (int64_t i = 0; i < n; i++) {
        fc_status st = check_tensor(&t[i], i, *align, o);
        if (st != FC_OK) return st;
    }
    const fc_allocator *a = fc__io_alloc(o);
    int64_t most = n > n_kv ? n : n_kv;
    const char **names = most ? fc__alloc(a, (size_t)most * sizeof *names, 16) : NULL;
    if (most && !names) return fc__io_fail(o, FC_ERR_OOM, "%s: out of memory", FN);
    for (int64_t i = 0; i < n_kv; i++)
        names[i] = kvs[i].key;
    fc_status st = check_unique(a, names, n_kv, "key", o);
    if (st == FC_OK) {
        for (int64_t i = 0; i < n; i++)
            names[i] = t[i].name;
        st = check_unique(a, names, n, "tensor name", o);
    }
    fc__free(a, names, (size_t)most * sizeof *names);
    return st;
}

/* ---- emission ------------------------------------------------------------------------------- */

static void put_u32(fc_io_out *w, uint32_t v) {
    uint8_t b[4];
    fc__put_le32(b, v);
    fc__io_out_write(w, b, 4);
}
static void put_u64(fc_io_out *w, uint64_t v) {
    uint8_t b[8];
    fc__put_le64(b, v);
    fc__io_out_write(w, b, 8);
}
static void put_str(fc_io_out *w, const char *s) {
    size_t n = strlen(s);
    put_u64(w, n);
    fc__io_out_write(w, s, n);
}

/* One number or bool of `type` from the C value at p. */
static void put_scalar(fc_io_out *w, uint32_t type, const void *p) {
    uint8_t b[8];
    switch (type) {
    case FC_GGUF_BOOL:
        b[0] = *(const bool *)p ? 1 : 0;
        break;
    case FC_GGUF_U8:
    case FC_GGUF_I8:
        memcpy(b, p, 1);
        break;
    case FC_GGUF_U16:
    case FC_GGUF_I16: {
        uint16_t v;
        memcpy(&v, p, 2);
        b[0] = (uint8_t)v;
        b[1] = (uint8_t)(v >> 8);
        break;
    }
    case FC_GGUF_U32:
    case FC_GGUF_I32:
    case FC_GGUF_F32: {
        uint32_t v;
        memcpy(&v, p, 4);
        fc__put_le32(b, v);
        break;
    }
    default: { /* 64-bit types */
        uint64_t v;
        memcpy(&v, p, 8);
        fc__put_le64(b, v);
        break;
    }
    }
    fc__io_out_write(w, b, fc__gguf_scalar_size(type));
}

/* C size of one element as the caller passes it. */
static size_t c_size(uint32_t type) {
    return type == FC_GGUF_BOOL ? sizeof(bool) : fc__gguf_scalar_size(type);
}

static void put_value(fc_io_out *w, const fc_gguf_kv *v) {
    if (v->type == FC_GGUF_STRING) {
        put_str(w, v->data);
    } else if (v->type != FC_GGUF_ARRAY) {
        put_scalar(w, v->type, v->data);
    } else {
        put_u32(w, v->elem_type);
        put_u64(w, v->count);
        for (uint64_t i = 0; i < v->count && w->st == FC_OK; i++) {
            if (v->elem_type == FC_GGUF_STRING)
                put_str(w, ((const char *const *)v->data)[i]);
            else if (v->elem_type == FC_GGUF_ARRAY)
                put_value(w, &((const fc_gguf_kv *)v->data)[i]);
            else
                put_scalar(w, v->elem_type, (const char *)v->data + i * c_size(v->elem_type));
        }
    }
}

fc_status fc__gguf_write_faulty(const char *path, const fc_gguf_kv *kvs, int64_t n_kv,
                                const fc_io_tensor *tensors, int64_t n, const fc_io_opts *opts,
                                const fc_io_fault *fault) {
    if (!path) return fc__io_fail(opts, FC_ERR_NULL_ARG, "%s: NULL path", FN);
    fc__io_clear(opts);
    uint64_t align = FC_GGUF_DEFAULT_ALIGN;
    fc_status st = check_args(kvs, n_kv, tensors, n, opts, &align);
    if (st != FC_OK) return st;
    fc_io_out w;
    st = fc__io_out_open(&w, FN, path, opts, fault);
    if (st != FC_OK) return st;
    fc__io_out_write(&w, "GGUF", 4);
    put_u32(&w, 3);
    put_u64(&w, (uint64_t)n);
    put_u64(&w, (uint64_t)n_kv);
    for (int64_t i = 0; i < n_kv; i++) {
        put_str(&w, kvs[i].key);
        put_u32(&w, kvs[i].type);
        put_value(&w, &kvs[i]);
    }
    uint64_t off = 0;
    for (int64_t i = 0; i < n; i++) {
        const fc_io_tensor *t = &tensors[i];
        uint32_t id = 0;
        fc_gguf_type_of(t->dtype, &id);
        put_str(&w, t->name);
        put_u32(&w, (uint32_t)t->rank);
        for (int d = t->rank - 1; d >= 0; d--)
            put_u64(&w, (uint64_t)t->shape[d]);
        put_u32(&w, id);
        put_u64(&w, off);
        if (pad_to(t->nbytes, align) > UINT64_MAX - off) {
            w.st = fc__io_fail(opts, FC_ERR_OVERFLOW, "%s: total data size overflows", FN);
            break;
        }
        off += pad_to(t->nbytes, align);
    }
    uint64_t header = w.written + w.buf_used;
    fc__io_out_fill(&w, 0, (size_t)(pad_to(header, align) - header));
    for (int64_t i = 0; i < n && w.st == FC_OK; i++) {
        const fc_io_tensor *t = &tensors[i];
        if (t->nbytes > SIZE_MAX) {
            w.st = fc__io_fail(opts, FC_ERR_OVERFLOW, "%s: tensor '%s' too large", FN, t->name);
            break;
        }
        fc__io_out_write(&w, t->data, (size_t)t->nbytes);
        fc__io_out_fill(&w, 0, (size_t)(pad_to(t->nbytes, align) - t->nbytes));
    }
    return fc__io_out_commit(&w);
}

fc_status fc_gguf_write(const char *path, const fc_gguf_kv *kvs, int64_t n_kv,
                        const fc_io_tensor *tensors, int64_t n, const fc_io_opts *opts) {
    return fc__gguf_write_faulty(path, kvs, n_kv, tensors, n, opts, NULL);
}
