/* SPDX-License-Identifier: MIT */
/* safetensors_write.c - the safetensors writer.
 *
 * The header is produced in two passes over the same emitter: the first
 * only measures, the second fills an exactly-sized buffer, so no growth
 * logic and no truncation is possible. Then it pads the header with spaces
 * so that 8 + N is a multiple of 8 (the buffer starts 8-aligned, as the
 * reference writer does), and lays the data out widest element first
 * (stable in the caller's order), so each tensor starts aligned to its
 * element size and a reader can use it in place.
 *
 * Everything a reader would refuse is refused here first, with the
 * reader's rules: unique names, "__metadata__" reserved, UTF-8 text,
 * nbytes equal to the shape's size, the 100 MB header limit. */
#include <stdlib.h>
#include <string.h>

#include "core/convert.h"
#include "io/io.h"
#include "io/json.h"

static const char *const FN = "safetensors_write";

typedef struct sink {
    char *buf; /* NULL: measure only */
    size_t len;
} sink;

static void put(sink *s, const char *p, size_t n) {
    if (s->buf) memcpy(s->buf + s->len, p, n);
    s->len += n;
}
static void puts_(sink *s, const char *p) { put(s, p, strlen(p)); }
static void put_u64(sink *s, uint64_t v) {
    char tmp[24];
    int i = 0;
    do {
        tmp[i++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (i > 0)
        put(s, &tmp[--i], 1);
}
/* A JSON string literal; the text is already known to be valid UTF-8. */
static void put_str(sink *s, const char *str) {
    static const char hex[] = "0123456789abcdef";
    put(s, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            put(s, e, 2);
        } else if (*p < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15]};
            put(s, e, 6);
        } else {
            put(s, (const char *)p, 1);
        }
    }
    put(s, "\"", 1);
}

static const char *st_name(fc_dtype d) {
    for (int i = 0; i < FC__ST_DTYPE_COUNT; i++)
        if (fc__st_dtypes[i].dtype == d) return fc__st_dtypes[i].name;
    return NULL;
}

/* {"__metadata__":{...},"name":{"dtype":"F32","shape":[2,3],"data_offsets":[b,e]},...} */
static void emit_header(sink *s, const fc_io_tensor *t, int64_t n, const uint64_t *begin,
                        const char *const *mk, const char *const *mv, int64_t n_meta) {
    put(s, "{", 1);
    bool first = true;
    if (n_meta > 0) {
        puts_(s, "\"__metadata__\":{");
        for (int64_t i = 0; i < n_meta; i++) {
            if (i) put(s, ",", 1);
            put_str(s, mk[i]);
            put(s, ":", 1);
            put_str(s, mv[i]);
        }
        put(s, "}", 1);
        first = false;
    }
    for (int64_t i = 0; i < n; i++) {
        if (!first) put(s, ",", 1);
        first = false;
        put_str(s, t[i].name);
        puts_(s, ":{\"dtype\":\"");
        puts_(s, st_name(t[i].dtype));
        puts_(s, "\",\"shape\":[");
        for (int d = 0; d < t[i].rank; d++) {
            if (d) put(s, ",", 1);
            put_u64(s, (uint64_t)t[i].shape[d]);
        }
        puts_(s, "],\"data_offsets\":[");
        put_u64(s, begin[i]);
        put(s, ",", 1);
        put_u64(s, begin[i] + t[i].nbytes);
        puts_(s, "]}");
    }
    put(s, "}", 1);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorts a copy of the strings and reports the first duplicate (or NULL). */
static fc_status find_duplicate(const fc_allocator *a, const char *const *strs, int64_t n,
                                const char **dup) {
    *dup = NULL;
    if (n < 2) return FC_OK;
    const char **tmp = fc__alloc(a, (size_t)n * sizeof *tmp, 16);
    if (!tmp) return FC_ERR_OOM;
    memcpy(tmp, strs, (size_t)n * sizeof *tmp);
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_str);
    for (int64_t i = 1; i < n && !*dup; i++)
        if (strcmp(tmp[i - 1], tmp[i]) == 0) *dup = tmp[i];
    fc__free(a, tmp, (size_t)n * sizeof *tmp);
    return FC_OK;
}

static fc_status check_tensor(const fc_io_tensor *t, int64_t i, const fc_io_opts *o) {
    if (!t->name)
        return fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: tensor %lld has no name", FN, (long long)i);
    if (!fc__utf8_valid(t->name, strlen(t->name)))
        return fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: tensor %lld: name is not valid UTF-8", FN,
                           (long long)i);
    if (strcmp(t->name, "__metadata__") == 0)
        return fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: tensor name \"__metadata__\" is reserved",
                           FN);
    if (!st_name(t->dtype))
        return fc__io_fail(o, FC_ERR_DTYPE, "%s: tensor '%s': dtype %s has no safetensors name", FN,
                           t->name, fc_dtype_name(t->dtype));
    if (t->rank < 0 || t->rank > FC_IO_MAX_RANK)
        return fc__io_fail(o, FC_ERR_RANK, "%s: tensor '%s': rank %d outside 0..%d", FN, t->name,
                           t->rank, FC_IO_MAX_RANK);
    uint64_t numel = 1;
    for (int d = 0; d < t->rank; d++) {
        if (t->shape[d] < 0)
            return fc__io_fail(o, FC_ERR_INVALID_SHAPE, "%s: tensor '%s': dim %d is %lld", FN,
                               t->name, d, (long long)t->shape[d]);
        uint64_t dim = (uint64_t)t->shape[d];
        if (dim != 0 && numel > UINT64_MAX / dim)
            return fc__io_fail(o, FC_ERR_OVERFLOW, "%s: tensor '%s': element count overflows", FN,
                               t->name);
        numel *= dim;
    }
    uint64_t esize = fc_dtype_size(t->dtype);
    if (numel > UINT64_MAX / esize)
        return fc__io_fail(o, FC_ERR_OVERFLOW, "%s: tensor '%s': byte size overflows", FN, t->name);
    if (numel * esize != t->nbytes)
        return fc__io_fail(o, FC_ERR_DATA_LENGTH,
                           "%s: tensor '%s': nbytes %llu, the shape needs %llu", FN, t->name,
                           (unsigned long long)t->nbytes, (unsigned long long)(numel * esize));
    if (t->nbytes && !t->data)
        return fc__io_fail(o, FC_ERR_NULL_ARG, "%s: tensor '%s': data is NULL", FN, t->name);
    return FC_OK;
}

static fc_status check_args(const fc_io_tensor *t, int64_t n, const char *const *mk,
                            const char *const *mv, int64_t n_meta, const fc_io_opts *o) {
    if (n < 0 || n_meta < 0)
        return fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: negative count (%lld tensors, %lld meta)",
                           FN, (long long)n, (long long)n_meta);
    if ((n > 0 && !t) || (n_meta > 0 && (!mk || !mv)))
        return fc__io_fail(o, FC_ERR_NULL_ARG, "%s: NULL array", FN);
    for (int64_t i = 0; i < n; i++) {
        fc_status st = check_tensor(&t[i], i, o);
        if (st != FC_OK) return st;
    }
    for (int64_t i = 0; i < n_meta; i++) {
        if (!mk[i] || !mv[i])
            return fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: metadata entry %lld is NULL", FN,
                               (long long)i);
        if (!fc__utf8_valid(mk[i], strlen(mk[i])) || !fc__utf8_valid(mv[i], strlen(mv[i])))
            return fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: metadata entry %lld is not valid UTF-8",
                               FN, (long long)i);
    }
    const fc_allocator *a = fc__io_alloc(o);
    const char *dup;
    const char **names = NULL;
    if (n > 1) {
        names = fc__alloc(a, (size_t)n * sizeof *names, 16);
        if (!names) return fc__io_fail(o, FC_ERR_OOM, "%s: out of memory", FN);
        for (int64_t i = 0; i < n; i++)
            names[i] = t[i].name;
    }
    fc_status st = find_duplicate(a, names, n, &dup);
    if (st == FC_OK && dup)
        st = fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: duplicate tensor name '%s'", FN, dup);
    fc__free(a, names, (size_t)n * sizeof *names);
    if (st == FC_ERR_OOM) return fc__io_fail(o, st, "%s: out of memory", FN);
    if (st != FC_OK) return st;
    st = find_duplicate(a, mk, n_meta, &dup);
    if (st == FC_ERR_OOM) return fc__io_fail(o, st, "%s: out of memory", FN);
    if (dup) return fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: duplicate metadata key '%s'", FN, dup);
    return FC_OK;
}

/* BOOL bytes as 0/1 (any nonzero byte is true, as the ops read it): the
 * reader refuses other bytes, so a tensor whose bytes were written through
 * fc_tensor_data_mut still saves a file that opens. */
static void write_bools(fc_io_out *w, const void *data, size_t n) {
    uint8_t chunk[4096];
    for (size_t done = 0; done < n;) {
        size_t k = n - done < sizeof chunk ? n - done : sizeof chunk;
        fc__truthy_row(FC_BOOL, (const uint8_t *)data + done, chunk, k);
        fc__io_out_write(w, chunk, k);
        done += k;
    }
}

fc_status fc__safetensors_write_faulty(const char *path, const fc_io_tensor *tensors, int64_t n,
                                       const char *const *meta_keys, const char *const *meta_values,
                                       int64_t n_meta, const fc_io_opts *opts,
                                       const fc_io_fault *fault) {
    if (!path) return fc__io_fail(opts, FC_ERR_NULL_ARG, "%s: NULL path", FN);
    fc__io_clear(opts);
    fc_status st = check_args(tensors, n, meta_keys, meta_values, n_meta, opts);
    if (st != FC_OK) return st;
    const fc_allocator *a = fc__io_alloc(opts);
    size_t nn = (size_t)n;
    /* order[k] = index of the k-th tensor in the data buffer; begin[i] its offset. */
    size_t scratch = nn * (sizeof(int64_t) + sizeof(uint64_t));
    void *mem = nn ? fc__alloc(a, scratch, 16) : NULL;
    if (nn && !mem) return fc__io_fail(opts, FC_ERR_OOM, "%s: out of memory", FN);
    uint64_t *begin = mem;
    int64_t *order = mem ? (int64_t *)(begin + nn) : NULL; /* n == 0: no arithmetic on NULL */
    size_t k = 0;
    for (size_t size = 8; size >= 1; size /= 2)
        for (size_t i = 0; i < nn; i++)
            if (fc_dtype_size(tensors[i].dtype) == size) order[k++] = (int64_t)i;
    uint64_t off = 0;
    for (size_t j = 0; j < nn; j++) {
        begin[order[j]] = off;
        if (tensors[order[j]].nbytes > UINT64_MAX - off) {
            fc__free(a, mem, scratch);
            return fc__io_fail(opts, FC_ERR_OVERFLOW, "%s: total data size overflows", FN);
        }
        off += tensors[order[j]].nbytes;
    }
    sink measure = {NULL, 0};
    emit_header(&measure, tensors, n, begin, meta_keys, meta_values, n_meta);
    size_t pad = (8 - (8 + measure.len) % 8) % 8;
    size_t hlen = measure.len + pad;
    char *hdr = NULL;
    if (hlen > 100000000u) {
        st = fc__io_fail(opts, FC_ERR_INVALID_ARG,
                         "%s: header of %zu bytes exceeds the 100000000-byte limit of readers", FN,
                         hlen);
    } else if (!(hdr = fc__alloc(a, hlen + 8, 16))) {
        st = fc__io_fail(opts, FC_ERR_OOM, "%s: out of memory", FN);
    }
    if (st == FC_OK) {
        fc__put_le64((uint8_t *)hdr, hlen);
        sink fill = {hdr + 8, 0};
        emit_header(&fill, tensors, n, begin, meta_keys, meta_values, n_meta);
        memset(hdr + 8 + fill.len, ' ', pad);
        fc_io_out w;
        st = fc__io_out_open(&w, FN, path, opts, fault);
        if (st == FC_OK) {
            fc__io_out_write(&w, hdr, hlen + 8);
            for (size_t j = 0; j < nn; j++) {
                const fc_io_tensor *t = &tensors[order[j]];
                if (t->nbytes > SIZE_MAX) {
                    w.st = fc__io_fail(opts, FC_ERR_OVERFLOW, "%s: tensor '%s' too large", FN,
                                       t->name);
                    break;
                }
                if (t->dtype == FC_BOOL)
                    write_bools(&w, t->data, (size_t)t->nbytes);
                else
                    fc__io_out_write(&w, t->data, (size_t)t->nbytes);
            }
            st = fc__io_out_commit(&w);
        }
    }
    fc__free(a, hdr, hlen + 8);
    fc__free(a, mem, scratch);
    return st;
}

fc_status fc_safetensors_write(const char *path, const fc_io_tensor *tensors, int64_t n,
                               const char *const *meta_keys, const char *const *meta_values,
                               int64_t n_meta, const fc_io_opts *opts) {
    return fc__safetensors_write_faulty(path, tensors, n, meta_keys, meta_values, n_meta, opts,
                                        NULL);
}
