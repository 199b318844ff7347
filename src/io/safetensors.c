/* SPDX-License-Identifier: MIT */
/* safetensors.c - the safetensors reader.
 *
 * Layout (the format's specification): u64 little-endian N; N bytes of
 * UTF-8 JSON, an object mapping each tensor name to {"dtype", "shape",
 * "data_offsets": [begin, end)} plus an optional "__metadata__" object of
 * string values; then the data buffer. Offsets are relative to the buffer,
 * end exclusive.
 *
 * Invariants established by open, so that every later accessor can trust
 * the descriptors without re-checking:
 *  - 8 + N <= file size and N <= 100,000,000 (the reference limit);
 *  - every tensor's byte size, computed with overflow checks from its shape
 *    and dtype, equals end - begin;
 *  - sorted by begin, the ranges tile [0, buffer size) exactly: no holes, no
 *    overlaps, nothing missing at the end and nothing after it (the
 *    specification forbids holes to rule out polyglot files);
 *  - names and metadata keys are unique, NUL-free UTF-8;
 *  - every byte of a BOOL tensor is 0 or 1.
 * Hence data = file + 8 + N + begin is inside the file for every tensor.
 *
 * Memory: one arena for every decoded string (sized from N, see json.h), an
 * entry array, and sorted indexes for name and key lookup. */
#include <stdlib.h>
#include <string.h>

#include "core/shape.h"
#include "io/io.h"
#include "io/json.h"

#define ST_MAX_HEADER ((uint64_t)100000000)

typedef struct st_entry {
    const char *name;
    fc_dtype dtype;
    int rank;
    int64_t shape[FC_IO_MAX_RANK];
    uint64_t begin, end;
} st_entry;

struct fc_st_file {
    fc_allocator alloc;
    fc_io_map *map;
    char *arena;
    size_t arena_cap;
    st_entry *t;
    size_t n, t_cap;
    const st_entry **by_name;        /* n entries sorted by name */
    const char **meta;               /* key, value, key, value, ... */
    size_t n_meta, meta_cap;         /* pairs; meta_cap counts pointers */
    const char *const **meta_sorted; /* n_meta pointers to key slots of meta, by key */
    uint64_t data_start;             /* 8 + N */
};

static const char *const FN = "safetensors_open";

/* ---- dtype strings ------------------------------------------------------------ */

const fc_st_dtype_name fc__st_dtypes[FC__ST_DTYPE_COUNT] = {
    {"BOOL", FC_BOOL},       {"U8", FC_U8},   {"I8", FC_I8},   {"U16", FC_U16},
    {"I16", FC_I16},         {"I32", FC_I32}, {"I64", FC_I64}, {"F16", FC_F16},
    {"BF16", FC_BF16},       {"F32", FC_F32}, {"F64", FC_F64}, {"F8_E4M3", FC_F8_E4M3},
    {"F8_E5M2", FC_F8_E5M2},
};

/* Valid in the specification, but without an fc_dtype. */
static const char *const st_unsupported[] = {"U32", "U64",     "F8_E8M0", "F8_E4M3FNUZ",
                                             "F4",  "F6_E2M3", "F6_E3M2", "C64"};

static fc_status parse_dtype(const char *s, const char *tensor, const fc_io_opts *o,
                             fc_dtype *out) {
    for (int i = 0; i < FC__ST_DTYPE_COUNT; i++) {
        if (strcmp(s, fc__st_dtypes[i].name) == 0) {
            *out = fc__st_dtypes[i].dtype;
            return FC_OK;
        }
    }
    for (size_t i = 0; i < sizeof st_unsupported / sizeof *st_unsupported; i++)
        if (strcmp(s, st_unsupported[i]) == 0)
            return fc__io_fail(o, FC_ERR_DTYPE, "%s: tensor '%s': dtype '%s' is not supported", FN,
                               tensor, s);
    return fc__io_fail(o, FC_ERR_DTYPE, "%s: tensor '%s': unknown dtype '%.32s'", FN, tensor, s);
}

/* ---- header parsing --------------------------------------------------------------- */

static fc_status parse_shape(fc_json *j, st_entry *e, const fc_io_opts *o) {
    fc_status st = fc__json_expect(j, '[');
    if (st != FC_OK) return st;
    e->rank = 0;
    if (fc__json_accept(j, ']')) return FC_OK;
    do {
        uint64_t d;
        if ((st = fc__json_u64(j, &d)) != FC_OK) return st;
        if (e->rank == FC_IO_MAX_RANK)
            return fc__io_fail(o, FC_ERR_RANK, "%s: tensor '%s': more than %d dims", FN, e->name,
                               FC_IO_MAX_RANK);
        if (d > (uint64_t)INT64_MAX)
            return fc__io_fail(o, FC_ERR_OVERFLOW, "%s: tensor '%s': dim %llu exceeds 2^63-1", FN,
                               e->name, (unsigned long long)d);
        e->shape[e->rank++] = (int64_t)d;
    } while (fc__json_accept(j, ','));
    return fc__json_expect(j, ']');
}

static fc_status parse_offsets(fc_json *j, st_entry *e, const fc_io_opts *o) {
    fc_status st;
    if ((st = fc__json_expect(j, '[')) != FC_OK || (st = fc__json_u64(j, &e->begin)) != FC_OK ||
        (st = fc__json_expect(j, ',')) != FC_OK || (st = fc__json_u64(j, &e->end)) != FC_OK)
        return st;
    if (fc__json_peek(j, ','))
        return fc__io_fail(o, FC_ERR_FORMAT,
                           "%s: tensor '%s': data_offsets has more than 2 numbers", FN, e->name);
    if ((st = fc__json_expect(j, ']')) != FC_OK) return st;
    if (e->begin > e->end)
        return fc__io_fail(o, FC_ERR_FORMAT,
                           "%s: tensor '%s': data_offsets [%llu, %llu] are out of order", FN,
                           e->name, (unsigned long long)e->begin, (unsigned long long)e->end);
    return FC_OK;
}

/* {"dtype": ..., "shape": [...], "data_offsets": [b, e], other fields skipped} */
static fc_status parse_tensor(fc_json *j, st_entry *e, const fc_io_opts *o) {
    fc_status st = fc__json_expect(j, '{');
    if (st != FC_OK) return st;
    bool seen[3] = {false, false, false};
    static const char *const fields[3] = {"dtype", "shape", "data_offsets"};
    if (!fc__json_accept(j, '}')) {
        do {
            const char *key;
            size_t mark = j->arena_used, klen;
            if ((st = fc__json_string(j, &key, &klen)) != FC_OK) return st;
            /* "dtype\u0000x" must not pass for "dtype" */
            if (strlen(key) != klen)
                return fc__io_fail(o, FC_ERR_FORMAT,
                                   "%s: tensor '%s': field name '%s\\u0000...' contains a NUL", FN,
                                   e->name, key);
            int which = -1;
            for (int k = 0; k < 3; k++)
                if (strcmp(key, fields[k]) == 0) which = k;
            j->arena_used = mark; /* field names are not kept */
            if ((st = fc__json_expect(j, ':')) != FC_OK) return st;
            if (which < 0) {
                st = fc__json_skip(j);
            } else if (seen[which]) {
                return fc__io_fail(o, FC_ERR_FORMAT, "%s: tensor '%s': field \"%s\" appears twice",
                                   FN, e->name, fields[which]);
            } else if (which == 0) {
                const char *ds;
                size_t mark2 = j->arena_used, dlen;
                st = fc__json_string(j, &ds, &dlen);
                if (st == FC_OK && strlen(ds) != dlen)
                    st = fc__io_fail(o, FC_ERR_FORMAT,
                                     "%s: tensor '%s': dtype '%s\\u0000...' contains a NUL", FN,
                                     e->name, ds);
                if (st == FC_OK) st = parse_dtype(ds, e->name, o, &e->dtype);
                j->arena_used = mark2;
            } else if (which == 1) {
                st = parse_shape(j, e, o);
            } else {
                st = parse_offsets(j, e, o);
            }
            if (st != FC_OK) return st;
            if (which >= 0) seen[which] = true;
        } while (fc__json_accept(j, ','));
        if ((st = fc__json_expect(j, '}')) != FC_OK) return st;
    }
    for (int k = 0; k < 3; k++)
        if (!seen[k])
            return fc__io_fail(o, FC_ERR_FORMAT, "%s: tensor '%s' has no \"%s\" field", FN, e->name,
                               fields[k]);
    return FC_OK;
}

static fc_status parse_metadata(fc_st_file *f, fc_json *j, const fc_io_opts *o) {
    fc_status st = fc__json_expect(j, '{');
    if (st != FC_OK) return st;
    if (fc__json_accept(j, '}')) return FC_OK;
    do {
        const char *key, *val;
        size_t klen, vlen;
        if ((st = fc__json_string(j, &key, &klen)) != FC_OK) return st;
        if ((st = fc__json_expect(j, ':')) != FC_OK) return st;
        if (!fc__json_peek(j, '"'))
            return fc__io_fail(o, FC_ERR_FORMAT, "%s: __metadata__ value of '%s' is not a string",
                               FN, key);
        if ((st = fc__json_string(j, &val, &vlen)) != FC_OK) return st;
        if (strlen(key) != klen || strlen(val) != vlen)
            return fc__io_fail(o, FC_ERR_FORMAT, "%s: __metadata__ %s of '%s%s' contains a NUL", FN,
                               strlen(key) != klen ? "key" : "value", key,
                               strlen(key) != klen ? "\\u0000..." : "");
        st = fc__io_grow(&f->alloc, (void **)&f->meta, &f->meta_cap, sizeof *f->meta,
                         2 * f->n_meta + 2);
        if (st != FC_OK) return fc__io_fail(o, st, "%s: out of memory", FN);
        f->meta[2 * f->n_meta] = key;
        f->meta[2 * f->n_meta + 1] = val;
        f->n_meta++;
    } while (fc__json_accept(j, ','));
    return fc__json_expect(j, '}');
}

static fc_status parse_header(fc_st_file *f, const char *text, size_t len, const fc_io_opts *o) {
    fc_json j;
    fc__json_init(&j, FN, text, len, f->arena, f->arena_cap, o);
    if (len == 0 || text[0] != '{')
        return fc__io_fail(o, FC_ERR_FORMAT, "%s: the JSON header does not start with '{'", FN);
    fc_status st = fc__json_expect(&j, '{');
    bool have_meta = false;
    if (st == FC_OK && !fc__json_accept(&j, '}')) {
        do {
            const char *name;
            size_t nlen;
            if ((st = fc__json_string(&j, &name, &nlen)) != FC_OK) return st;
            if ((st = fc__json_expect(&j, ':')) != FC_OK) return st;
            /* before the name is compared: "__metadata__\u0000" is a name
             * with a NUL, not the metadata */
            if (strlen(name) != nlen)
                return fc__io_fail(o, FC_ERR_FORMAT,
                                   "%s: tensor name '%s\\u0000...' contains a NUL", FN, name);
            if (strcmp(name, "__metadata__") == 0) {
                if (have_meta)
                    return fc__io_fail(o, FC_ERR_FORMAT, "%s: \"__metadata__\" appears twice", FN);
                have_meta = true;
                st = parse_metadata(f, &j, o);
            } else {
                st = fc__io_grow(&f->alloc, (void **)&f->t, &f->t_cap, sizeof *f->t, f->n + 1);
                if (st != FC_OK) return fc__io_fail(o, st, "%s: out of memory", FN);
                st_entry *e = &f->t[f->n];
                memset(e, 0, sizeof *e);
                e->name = name;
                st = parse_tensor(&j, e, o);
                if (st == FC_OK) f->n++;
            }
            if (st != FC_OK) return st;
        } while (fc__json_accept(&j, ','));
        st = fc__json_expect(&j, '}');
    }
    if (st == FC_OK) st = fc__json_finish(&j);
    return st;
}

/* ---- validation ------------------------------------------------------------------- */

static int cmp_entry_name(const void *a, const void *b) {
    return strcmp((*(const st_entry *const *)a)->name, (*(const st_entry *const *)b)->name);
}
static int cmp_entry_range(const void *a, const void *b) {
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}
static int cmp_key(const void *a, const void *b) {
    return strcmp(**(const char *const *const *)a, **(const char *const *const *)b);
}

/* Byte size from shape and dtype, overflow-checked in the order of the dims
 * (as the reference implementation multiplies). */
static fc_status entry_bytes(const st_entry *e, const fc_io_opts *o, uint64_t *out) {
    uint64_t n = 1;
    for (int d = 0; d < e->rank; d++) {
        uint64_t dim = (uint64_t)e->shape[d];
        if (dim != 0 && n > UINT64_MAX / dim)
            return fc__io_fail(o, FC_ERR_OVERFLOW, "%s: tensor '%s': element count overflows", FN,
                               e->name);
        n *= dim;
    }
    uint64_t size = fc_dtype_size(e->dtype);
    if (n > UINT64_MAX / size)
        return fc__io_fail(o, FC_ERR_OVERFLOW, "%s: tensor '%s': byte size overflows", FN, e->name);
    *out = n * size;
    return FC_OK;
}

static fc_status validate(fc_st_file *f, uint64_t buffer_size, const fc_io_opts *o) {
    const fc_allocator *a = &f->alloc;
    for (size_t i = 0; i < f->n; i++) {
        const st_entry *e = &f->t[i];
        uint64_t need = 0;
        fc_status st = entry_bytes(e, o, &need);
        if (st != FC_OK) return st;
        if (e->end - e->begin != need) {
            char sh[96];
            return fc__io_fail(
                o, FC_ERR_DATA_LENGTH,
                "%s: tensor '%s': data_offsets [%llu, %llu) hold %llu bytes but %s%s "
                "needs %llu",
                FN, e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                (unsigned long long)(e->end - e->begin), fc_dtype_name(e->dtype),
                e->rank ? fc__shape_str(e->shape, e->rank, sh, sizeof sh) : "[]",
                (unsigned long long)need);
        }
    }
    if (f->n) {
        f->by_name = fc__alloc(a, f->n * sizeof *f->by_name, 16);
        if (!f->by_name) return fc__io_fail(o, FC_ERR_OOM, "%s: out of memory", FN);
        for (size_t i = 0; i < f->n; i++)
            f->by_name[i] = &f->t[i];
        /* by_name serves first as the range order, then as the name index. */
        qsort(f->by_name, f->n, sizeof *f->by_name, cmp_entry_range);
        uint64_t expect = 0;
        for (size_t i = 0; i < f->n; i++) {
            const st_entry *e = f->by_name[i];
            if (e->begin < expect)
                return fc__io_fail(
                    o, FC_ERR_FORMAT,
                    "%s: tensor '%s' [%llu, %llu) overlaps tensor '%s' (ends at %llu)", FN, e->name,
                    (unsigned long long)e->begin, (unsigned long long)e->end,
                    f->by_name[i - 1]->name, (unsigned long long)expect);
            if (e->begin > expect)
                return fc__io_fail(o, FC_ERR_FORMAT,
                                   "%s: hole: data bytes [%llu, %llu) belong to no tensor", FN,
                                   (unsigned long long)expect, (unsigned long long)e->begin);
            expect = e->end;
        }
        if (expect > buffer_size)
            return fc__io_fail(
                o, FC_ERR_FORMAT,
                "%s: truncated: the tensors need %llu data bytes, the file holds %llu", FN,
                (unsigned long long)expect, (unsigned long long)buffer_size);
        if (expect < buffer_size)
            return fc__io_fail(o, FC_ERR_FORMAT,
                               "%s: %llu bytes after the last tensor belong to no tensor", FN,
                               (unsigned long long)(buffer_size - expect));
        qsort(f->by_name, f->n, sizeof *f->by_name, cmp_entry_name);
        for (size_t i = 1; i < f->n; i++)
            if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0)
                return fc__io_fail(o, FC_ERR_FORMAT, "%s: duplicate tensor name '%s'", FN,
                                   f->by_name[i]->name);
    } else if (buffer_size != 0) {
        return fc__io_fail(o, FC_ERR_FORMAT,
                           "%s: %llu data bytes but no tensor: they belong to no tensor", FN,
                           (unsigned long long)buffer_size);
    }
    if (f->n_meta) {
        f->meta_sorted = fc__alloc(a, f->n_meta * sizeof *f->meta_sorted, 16);
        if (!f->meta_sorted) return fc__io_fail(o, FC_ERR_OOM, "%s: out of memory", FN);
        for (size_t i = 0; i < f->n_meta; i++)
            f->meta_sorted[i] = &f->meta[2 * i];
        qsort(f->meta_sorted, f->n_meta, sizeof *f->meta_sorted, cmp_key);
        for (size_t i = 1; i < f->n_meta; i++) {
            const char *k0 = *f->meta_sorted[i - 1];
            const char *k1 = *f->meta_sorted[i];
            if (strcmp(k0, k1) == 0)
                return fc__io_fail(o, FC_ERR_FORMAT, "%s: duplicate __metadata__ key '%s'", FN, k1);
        }
    }
    return FC_OK;
}

/* BOOL bytes must be 0 or 1: the ops read a bool byte sometimes as "nonzero"
 * (sum, any) and sometimes by value (eq), so a 7 would be true to one and
 * not to the other. This reads every BOOL tensor's bytes once at open (for
 * a mapped file: the pages of BOOL tensors are touched then). */
static fc_status check_bools(const fc_st_file *f, const uint8_t *buf, const fc_io_opts *o) {
    for (size_t i = 0; i < f->n; i++) {
        const st_entry *e = &f->t[i];
        if (e->dtype != FC_BOOL) continue;
        const uint8_t *p = buf + e->begin;
        for (uint64_t k = 0; k < e->end - e->begin; k++)
            if (p[k] > 1)
                return fc__io_fail(o, FC_ERR_FORMAT,
                                   "%s: tensor '%s': BOOL byte %llu (file offset %llu) is %u, "
                                   "not 0 or 1",
                                   FN, e->name, (unsigned long long)k,
                                   (unsigned long long)(f->data_start + e->begin + k),
                                   (unsigned)p[k]);
    }
    return FC_OK;
}

/* ---- handle --------------------------------------------------------------------------- */

void fc_safetensors_close(fc_st_file *f) {
    if (!f) return;
    fc_allocator a = f->alloc;
    fc__free(&a, f->arena, f->arena_cap);
    fc__free(&a, f->t, f->t_cap * sizeof *f->t);
    fc__free(&a, f->by_name, f->n * sizeof *f->by_name);
    fc__free(&a, f->meta, f->meta_cap * sizeof *f->meta);
    fc__free(&a, f->meta_sorted, f->n_meta * sizeof *f->meta_sorted);
    fc__io_map_release(f->map);
    fc__free(&a, f, sizeof *f);
}

/* Takes the caller's mapping reference (released on failure). */
static fc_status open_map(fc_io_map *map, const fc_io_opts *o, fc_st_file **out) {
    const fc_allocator *a = fc__io_alloc(o);
    fc_st_file *f = fc__alloc(a, sizeof *f, _Alignof(fc_st_file));
    if (!f) {
        fc__io_map_release(map);
        return fc__io_fail(o, FC_ERR_OOM, "%s: out of memory", FN);
    }
    memset(f, 0, sizeof *f);
    f->alloc = a ? *a : *fc_default_allocator();
    f->map = map;
    fc_status st;
    const uint8_t *d = map->data;
    size_t size = map->size;
    if (size < 8) {
        st = fc__io_fail(o, FC_ERR_FORMAT, "%s: %zu bytes: too short for the 8-byte header length",
                         FN, size);
        goto fail;
    }
    uint64_t n = fc__le64(d);
    if (n > ST_MAX_HEADER) {
        st = fc__io_fail(o, FC_ERR_FORMAT, "%s: header length %llu exceeds the limit of %llu bytes",
                         FN, (unsigned long long)n, (unsigned long long)ST_MAX_HEADER);
        goto fail;
    }
    if (n > size - 8) {
        st = fc__io_fail(o, FC_ERR_FORMAT,
                         "%s: header length %llu runs past the end of the file (%zu bytes)", FN,
                         (unsigned long long)n, size);
        goto fail;
    }
    f->data_start = 8 + n;
    f->arena_cap = (size_t)n + 8;
    f->arena = fc__alloc(&f->alloc, f->arena_cap, 16);
    if (!f->arena) {
        f->arena_cap = 0;
        st = fc__io_fail(o, FC_ERR_OOM, "%s: out of memory", FN);
        goto fail;
    }
    st = parse_header(f, (const char *)d + 8, (size_t)n, o);
    if (st == FC_OK) st = validate(f, size - f->data_start, o);
    if (st == FC_OK) st = check_bools(f, d + f->data_start, o);
    if (st != FC_OK) goto fail;
    *out = f;
    return FC_OK;
fail:
    fc_safetensors_close(f);
    return st;
}

fc_status fc_safetensors_open(const char *path, const fc_io_opts *opts, fc_st_file **out) {
    if (out) *out = NULL;
    if (!path || !out) return fc__io_fail(opts, FC_ERR_NULL_ARG, "%s: NULL argument", FN);
    fc__io_clear(opts);
    fc_io_map *m;
    fc_status st = fc__io_map_file(FN, path, opts, &m);
    if (st != FC_OK) return st;
    return open_map(m, opts, out);
}

fc_status fc_safetensors_open_memory(const void *data, size_t size, const fc_io_opts *opts,
                                     fc_st_file **out) {
    if (out) *out = NULL;
    if (!out || (!data && size)) return fc__io_fail(opts, FC_ERR_NULL_ARG, "%s: NULL argument", FN);
    fc__io_clear(opts);
    fc_io_map *m;
    fc_status st = fc__io_map_memory(data, size, opts, &m);
    if (st != FC_OK) return st;
    return open_map(m, opts, out);
}

int64_t fc_safetensors_tensor_count(const fc_st_file *f) { return f ? (int64_t)f->n : 0; }

fc_status fc_safetensors_tensor_info(const fc_st_file *f, int64_t i, fc_io_tensor *out) {
    if (!f || !out) return FC_ERR_NULL_ARG;
    if (i < 0 || (uint64_t)i >= f->n) return FC_ERR_INDEX;
    const st_entry *e = &f->t[i];
    memset(out, 0, sizeof *out);
    out->name = e->name;
    out->dtype = e->dtype;
    out->rank = e->rank;
    memcpy(out->shape, e->shape, sizeof e->shape);
    out->offset = f->data_start + e->begin;
    out->nbytes = e->end - e->begin;
    out->data = f->map->data + out->offset;
    return FC_OK;
}

int64_t fc_safetensors_find(const fc_st_file *f, const char *name) {
    if (!f || !name || f->n == 0) return -1;
    st_entry key = {.name = name};
    const st_entry *kp = &key;
    const st_entry **hit = bsearch(&kp, f->by_name, f->n, sizeof *f->by_name, cmp_entry_name);
    return hit ? (int64_t)(*hit - f->t) : -1;
}

int64_t fc_safetensors_meta_count(const fc_st_file *f) { return f ? (int64_t)f->n_meta : 0; }

fc_status fc_safetensors_meta_at(const fc_st_file *f, int64_t i, const char **key,
                                 const char **value) {
    if (!f || !key || !value) return FC_ERR_NULL_ARG;
    if (i < 0 || (uint64_t)i >= f->n_meta) return FC_ERR_INDEX;
    *key = f->meta[2 * i];
    *value = f->meta[2 * i + 1];
    return FC_OK;
}

const char *fc_safetensors_meta_find(const fc_st_file *f, const char *key) {
    if (!f || !key || f->n_meta == 0) return NULL;
    const char *const *kp = &key;
    const char *const **hit =
        bsearch(&kp, f->meta_sorted, f->n_meta, sizeof *f->meta_sorted, cmp_key);
    return hit ? (*hit)[1] : NULL;
}

fc_io_map *fc__safetensors_map(const fc_st_file *f) { return f ? f->map : NULL; }
