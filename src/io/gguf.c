/* SPDX-License-Identifier: MIT */
/* gguf.c - the GGUF reader (versions 2 and 3, little-endian).
 *
 * The checks follow the hardened ggml reader and add a few of our own; all
 * happen at open, so later accessors trust the descriptors:
 *  - magic "GGUF"; version 2 or 3 (1 used 32-bit counts; a byte-swapped
 *    version means a big-endian file, refused by name);
 *  - the key/value and tensor counts must fit in the bytes left (every
 *    entry has a minimum size), so a huge count fails before any allocation;
 *  - string and array lengths are checked against the bytes left before
 *    use, keys and names are at most 65535 bytes and hold no NUL, bools are
 *    0 or 1, arrays nest at most 8 deep;
 *  - keys and tensor names are unique;
 *  - general.alignment, when present, is a u32 power of two (default 32);
 *  - a tensor has 1..4 dims, each >= 1; its element and byte counts are
 *    overflow-checked; the innermost dim is a multiple of the block size;
 *    its offset is aligned, and sorted by offset the tensors neither overlap
 *    nor run past the end of the file;
 *  - ggml type 42 is resolved by the room the tensor has (gguf_internal.h).
 * Nothing is ever read outside [data, data + size): every read goes through
 * the cursor's `need`. */
#include <stdlib.h>
#include <string.h>

#include "io/gguf_internal.h"
#include "io/json.h"

static const char *const FN = "gguf_open";

typedef struct cur {
    const uint8_t *begin, *p, *end;
    const fc_io_opts *o;
} cur;

static uint64_t left(const cur *c) { return (uint64_t)(c->end - c->p); }

static fc_status truncated(const cur *c, const char *what) {
    return fc__io_fail(c->o, FC_ERR_FORMAT, "%s: truncated at byte %zu while reading %s", FN,
                       (size_t)(c->p - c->begin), what);
}

static fc_status rd_u32(cur *c, uint32_t *v, const char *what) {
    if (left(c) < 4) return truncated(c, what);
    *v = fc__le32(c->p);
    c->p += 4;
    return FC_OK;
}

static fc_status rd_u64(cur *c, uint64_t *v, const char *what) {
    if (left(c) < 8) return truncated(c, what);
    *v = fc__le64(c->p);
    c->p += 8;
    return FC_OK;
}

/* A gguf string: u64 length + bytes, length capped by `cap` and the file. */
static fc_status rd_str(cur *c, uint64_t cap, const uint8_t **s, uint64_t *len, const char *what) {
    fc_status st = rd_u64(c, len, what);
    if (st != FC_OK) return st;
    if (*len > cap)
        return fc__io_fail(c->o, FC_ERR_FORMAT, "%s: %s of length %llu exceeds the limit of %llu",
                           FN, what, (unsigned long long)*len, (unsigned long long)cap);
    if (*len > left(c))
        return fc__io_fail(c->o, FC_ERR_FORMAT,
                           "%s: %s of length %llu runs past the end of the file (byte %zu)", FN,
                           what, (unsigned long long)*len, (size_t)(c->p - c->begin));
    *s = c->p;
    c->p += *len;
    return FC_OK;
}

/* Copies key or tensor name number ix into the names arena; returns its
 * offset. Both are UTF-8 by the format's word (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF) and NUL-free (they are handed out as
 * C strings). */
static fc_status keep_name(fc_gguf_file *f, cur *c, const uint8_t *s, uint64_t len,
                           const char *what, size_t ix, size_t *off) {
    if (memchr(s, 0, (size_t)len))
        return fc__io_fail(c->o, FC_ERR_FORMAT, "%s: %s %zu contains a NUL byte", FN, what, ix);
    if (!fc__utf8_valid((const char *)s, (size_t)len))
        return fc__io_fail(c->o, FC_ERR_FORMAT, "%s: %s %zu (%llu bytes) is not valid UTF-8", FN,
                           what, ix, (unsigned long long)len);
    fc_status st = fc__io_grow(&f->alloc, (void **)&f->names, &f->names_cap, 1,
                               f->names_used + (size_t)len + 1);
    if (st != FC_OK) return fc__io_fail(c->o, st, "%s: out of memory", FN);
    memcpy(f->names + f->names_used, s, (size_t)len);
    f->names[f->names_used + len] = '\0';
    *off = f->names_used;
    f->names_used += (size_t)len + 1;
    return FC_OK;
}

/* ---- metadata values ------------------------------------------------------------ */

static fc_status parse_value(fc_gguf_file *f, cur *c, uint32_t type, size_t ix, int depth,
                             const char *key) {
    fc_gguf_value v = {.type = type, .elem = 0, .n = 0, .p = c->p, .child = -1, .file = f};
    fc_status st = FC_OK;
    size_t esize = fc__gguf_scalar_size(type);
    if (esize) {
        if (left(c) < esize) return truncated(c, "a metadata value");
        if (type == FC_GGUF_BOOL && *c->p > 1)
            return fc__io_fail(c->o, FC_ERR_FORMAT, "%s: key '%s': bool value %u is not 0 or 1", FN,
                               key, *c->p);
        c->p += esize;
    } else if (type == FC_GGUF_STRING) {
        st = rd_str(c, UINT64_MAX, &v.p, &v.n, "a string value");
    } else if (type == FC_GGUF_ARRAY) {
        if (depth >= FC_GGUF_MAX_NEST)
            return fc__io_fail(c->o, FC_ERR_FORMAT, "%s: key '%s': arrays nested deeper than %d",
                               FN, key, FC_GGUF_MAX_NEST);
        if ((st = rd_u32(c, &v.elem, "an array type")) != FC_OK) return st;
        if ((st = rd_u64(c, &v.n, "an array length")) != FC_OK) return st;
        if (v.elem >= FC_GGUF_TYPE_COUNT)
            return fc__io_fail(c->o, FC_ERR_FORMAT, "%s: key '%s': unknown array element type %u",
                               FN, key, v.elem);
        size_t es = fc__gguf_scalar_size(v.elem);
        uint64_t min = es ? es : v.elem == FC_GGUF_STRING ? 8 : 12; /* smallest element */
        if (v.n > left(c) / min)
            return fc__io_fail(c->o, FC_ERR_FORMAT,
                               "%s: key '%s': array of %llu elements cannot fit in the %llu bytes "
                               "left",
                               FN, key, (unsigned long long)v.n, (unsigned long long)left(c));
        v.p = c->p;
        if (es) {
            if (v.elem == FC_GGUF_BOOL)
                for (uint64_t i = 0; i < v.n; i++)
                    if (c->p[i] > 1)
                        return fc__io_fail(c->o, FC_ERR_FORMAT,
                                           "%s: key '%s': bool element %llu is %u, not 0 or 1", FN,
                                           key, (unsigned long long)i, c->p[i]);
            c->p += v.n * es;
        } else if (v.n > 0) {
            size_t first = f->n_nodes;
            st = fc__io_grow(&f->alloc, (void **)&f->nodes, &f->nodes_cap, sizeof *f->nodes,
                             first + (size_t)v.n);
            if (st != FC_OK) return fc__io_fail(c->o, st, "%s: out of memory", FN);
            f->n_nodes += (size_t)v.n;
            v.child = (int64_t)first;
            for (uint64_t i = 0; i < v.n && st == FC_OK; i++)
                st = parse_value(f, c, v.elem, first + (size_t)i, depth + 1, key);
        }
    } else {
        return fc__io_fail(c->o, FC_ERR_FORMAT, "%s: key '%s': unknown value type %u", FN, key,
                           type);
    }
    f->nodes[ix] = v; /* nodes may have moved while children were parsed */
    return st;
}

static fc_status parse_kvs(fc_gguf_file *f, cur *c, size_t *key_off) {
    for (size_t i = 0; i < f->n_kv; i++) {
        const uint8_t *s = NULL;
        uint64_t len = 0;
        uint32_t type = 0;
        fc_status st = rd_str(c, FC_GGUF_MAX_KEY, &s, &len, "a key");
        if (st == FC_OK) st = keep_name(f, c, s, len, "key", i, &key_off[i]);
        if (st == FC_OK) st = rd_u32(c, &type, "a value type");
        if (st == FC_OK) st = parse_value(f, c, type, i, 0, f->names + key_off[i]);
        if (st != FC_OK) return st;
    }
    return FC_OK;
}

static fc_status parse_infos(fc_gguf_file *f, cur *c, size_t *name_off) {
    for (size_t i = 0; i < f->n_t; i++) {
        gguf_tensor *t = &f->t[i];
        const uint8_t *s = NULL;
        uint64_t len = 0, dims[FC_GGUF_MAX_DIMS] = {0};
        uint32_t nd = 0;
        fc_status st = rd_str(c, FC_GGUF_MAX_KEY, &s, &len, "a tensor name");
        if (st == FC_OK) st = keep_name(f, c, s, len, "tensor name", i, &name_off[i]);
        if (st == FC_OK) st = rd_u32(c, &nd, "n_dims");
        if (st != FC_OK) return st;
        const char *name = f->names + name_off[i];
        if (nd < 1 || nd > FC_GGUF_MAX_DIMS)
            return fc__io_fail(c->o, FC_ERR_RANK, "%s: tensor '%s': n_dims %u outside 1..%d", FN,
                               name, nd, FC_GGUF_MAX_DIMS);
        for (uint32_t d = 0; d < nd; d++) {
            if ((st = rd_u64(c, &dims[d], "a dim")) != FC_OK) return st;
            if (dims[d] < 1)
                return fc__io_fail(c->o, FC_ERR_INVALID_SHAPE, "%s: tensor '%s': dim %u is 0", FN,
                                   name, d);
            if (dims[d] > (uint64_t)INT64_MAX)
                return fc__io_fail(c->o, FC_ERR_OVERFLOW, "%s: tensor '%s': dim %u exceeds 2^63-1",
                                   FN, name, d);
        }
        t->rank = (int)nd;
        for (uint32_t d = 0; d < nd; d++)
            t->shape[nd - 1 - d] = (int64_t)dims[d];
        if ((st = rd_u32(c, &t->ggml_type, "a tensor type")) != FC_OK) return st;
        if ((st = rd_u64(c, &t->offset, "a tensor offset")) != FC_OK) return st;
    }
    return FC_OK;
}

/* ---- tensors -------------------------------------------------------------------------- */

static uint64_t pad_to(uint64_t x, uint64_t a) { return x + (a - x % a) % a; }

/* Bytes of t as dtype d; FC_ERR_INVALID_SHAPE / FC_ERR_OVERFLOW. */
static fc_status tensor_bytes(const gguf_tensor *t, fc_dtype d, uint64_t *out) {
    int64_t blk = fc_dtype_block_elems(d);
    int64_t inner = t->shape[t->rank - 1];
    if (inner % blk != 0) return FC_ERR_INVALID_SHAPE;
    uint64_t n = (uint64_t)(inner / blk);
    for (int k = 0; k < t->rank - 1; k++) {
        if (n > (uint64_t)INT64_MAX / (uint64_t)t->shape[k]) return FC_ERR_OVERFLOW;
        n *= (uint64_t)t->shape[k];
    }
    /* Element count = blocks * blk must also fit in int64. */
    if (n > (uint64_t)INT64_MAX / (uint64_t)blk) return FC_ERR_OVERFLOW;
    uint64_t bs = fc_dtype_size(d);
    if (n > (uint64_t)INT64_MAX / bs) return FC_ERR_OVERFLOW;
    *out = n * bs;
    return FC_OK;
}

static fc_status size_error(const fc_io_opts *o, fc_status st, const gguf_tensor *t, fc_dtype d) {
    if (st == FC_ERR_INVALID_SHAPE)
        return fc__io_fail(o, st,
                           "%s: tensor '%s': innermost dim %lld is not a multiple of %s's "
                           "block of %lld",
                           FN, t->name, (long long)t->shape[t->rank - 1], fc_dtype_name(d),
                           (long long)fc_dtype_block_elems(d));
    return fc__io_fail(o, st, "%s: tensor '%s': element or byte count overflows", FN, t->name);
}

static int cmp_offset(const void *a, const void *b) {
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Id 42: the layout whose size fits the room before the next tensor. */
static fc_status resolve_q2(gguf_tensor *t, uint64_t room, uint64_t align, const fc_io_opts *o) {
    static const fc_dtype cand[2] = {FC_Q2_0_G64, FC_Q2_0};
    uint64_t g64;
    fc_status st = tensor_bytes(t, FC_Q2_0_G64, &g64); /* the finer block: a shape error */
    if (st != FC_OK) return st;                        /* here is one for both layouts */
    int fits = 0;
    fc_dtype pick = FC_Q2_0_G64;
    uint64_t sizes[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        if (tensor_bytes(t, cand[k], &sizes[k]) != FC_OK) continue;
        if (sizes[k] <= room && room <= pad_to(sizes[k], align)) {
            fits++;
            pick = cand[k];
        }
    }
    if (fits == 1) {
        t->dtype = pick;
        return tensor_bytes(t, pick, &t->nbytes);
    }
    if (fits == 2)
        return fc__io_fail(o, FC_ERR_FORMAT,
                           "%s: tensor '%s': ggml type 42 is ambiguous: both q2_0_g64 (%llu bytes) "
                           "and q2_0 (%llu bytes) fit its %llu bytes of room at alignment %llu",
                           FN, t->name, (unsigned long long)sizes[0], (unsigned long long)sizes[1],
                           (unsigned long long)room, (unsigned long long)align);
    return fc__io_fail(o, FC_ERR_FORMAT,
                       "%s: tensor '%s': ggml type 42 fits neither q2_0_g64 nor q2_0 in its %llu "
                       "bytes of room",
                       FN, t->name, (unsigned long long)room);
}

static fc_status check_tensors(fc_gguf_file *f, uint64_t data_size, const fc_io_opts *o) {
    for (size_t i = 0; i < f->n_t; i++) {
        gguf_tensor *t = &f->t[i];
        if (t->offset % f->alignment != 0)
            return fc__io_fail(o, FC_ERR_FORMAT,
                               "%s: tensor '%s': offset %llu is not a multiple of "
                               "the alignment %llu",
                               FN, t->name, (unsigned long long)t->offset,
                               (unsigned long long)f->alignment);
        if (t->offset >= data_size)
            return fc__io_fail(o, FC_ERR_FORMAT,
                               "%s: tensor '%s': offset %llu is past the end of "
                               "the data (%llu bytes)",
                               FN, t->name, (unsigned long long)t->offset,
                               (unsigned long long)data_size);
        if (t->ggml_type == FC_GGUF_TYPE_Q2_0) continue; /* sized below, from its room */
        fc_status st = fc_gguf_dtype_of(t->ggml_type, &t->dtype);
        if (st != FC_OK)
            return fc__io_fail(o, st, "%s: tensor '%s': unknown ggml type id %u", FN, t->name,
                               t->ggml_type);
        st = tensor_bytes(t, t->dtype, &t->nbytes);
        if (st != FC_OK) return size_error(o, st, t, t->dtype);
    }
    if (f->n_t == 0) return FC_OK;
    const gguf_tensor **by_off = fc__alloc(&f->alloc, f->n_t * sizeof *by_off, 16);
    if (!by_off) return fc__io_fail(o, FC_ERR_OOM, "%s: out of memory", FN);
    for (size_t i = 0; i < f->n_t; i++)
        by_off[i] = &f->t[i];
    qsort(by_off, f->n_t, sizeof *by_off, cmp_offset);
    fc_status st = FC_OK;
    for (size_t i = 0; i < f->n_t && st == FC_OK; i++) {
        gguf_tensor *t = (gguf_tensor *)by_off[i];
        uint64_t next = i + 1 < f->n_t ? by_off[i + 1]->offset : data_size;
        uint64_t room = next - t->offset;
        if (t->ggml_type == FC_GGUF_TYPE_Q2_0) {
            st = resolve_q2(t, room, f->alignment, o);
            if (st == FC_ERR_INVALID_SHAPE || st == FC_ERR_OVERFLOW)
                st = size_error(o, st, t, FC_Q2_0_G64);
            if (st != FC_OK) break;
        }
        if (t->nbytes > room) {
            if (i + 1 < f->n_t)
                st = fc__io_fail(
                    o, FC_ERR_FORMAT, "%s: tensor '%s' [%llu, +%llu) overlaps tensor '%s' at %llu",
                    FN, t->name, (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                    by_off[i + 1]->name, (unsigned long long)next);
            else
                st = fc__io_fail(o, FC_ERR_FORMAT,
                                 "%s: tensor '%s' [%llu, +%llu) runs past the end of the file "
                                 "(data section of %llu bytes)",
                                 FN, t->name, (unsigned long long)t->offset,
                                 (unsigned long long)t->nbytes, (unsigned long long)data_size);
        }
    }
    fc__free(&f->alloc, by_off, f->n_t * sizeof *by_off);
    return st;
}

/* ---- names and the alignment ------------------------------------------------------------- */

int fc__gguf_cmp_name(const void *a, const void *b) {
    return strcmp(((const gguf_name_ix *)a)->name, ((const gguf_name_ix *)b)->name);
}

static fc_status index_names(fc_gguf_file *f, const fc_io_opts *o) {
    if (f->n_kv) {
        f->kv_sorted = fc__alloc(&f->alloc, f->n_kv * sizeof *f->kv_sorted, 16);
        if (!f->kv_sorted) return fc__io_fail(o, FC_ERR_OOM, "%s: out of memory", FN);
        for (size_t i = 0; i < f->n_kv; i++)
            f->kv_sorted[i] = (gguf_name_ix){f->keys[i], (int64_t)i};
        qsort(f->kv_sorted, f->n_kv, sizeof *f->kv_sorted, fc__gguf_cmp_name);
        for (size_t i = 1; i < f->n_kv; i++)
            if (strcmp(f->kv_sorted[i - 1].name, f->kv_sorted[i].name) == 0)
                return fc__io_fail(o, FC_ERR_FORMAT, "%s: duplicate key '%s'", FN,
                                   f->kv_sorted[i].name);
    }
    if (f->n_t) {
        f->t_sorted = fc__alloc(&f->alloc, f->n_t * sizeof *f->t_sorted, 16);
        if (!f->t_sorted) return fc__io_fail(o, FC_ERR_OOM, "%s: out of memory", FN);
        for (size_t i = 0; i < f->n_t; i++)
            f->t_sorted[i] = (gguf_name_ix){f->t[i].name, (int64_t)i};
        qsort(f->t_sorted, f->n_t, sizeof *f->t_sorted, fc__gguf_cmp_name);
        for (size_t i = 1; i < f->n_t; i++)
            if (strcmp(f->t_sorted[i - 1].name, f->t_sorted[i].name) == 0)
                return fc__io_fail(o, FC_ERR_FORMAT, "%s: duplicate tensor name '%s'", FN,
                                   f->t_sorted[i].name);
    }
    f->alignment = FC_GGUF_DEFAULT_ALIGN;
    const fc_gguf_value *al = fc_gguf_kv_find(f, "general.alignment");
    if (al) {
        if (al->type != FC_GGUF_U32)
            return fc__io_fail(o, FC_ERR_FORMAT, "%s: general.alignment has type %u, not u32", FN,
                               al->type);
        uint32_t a = fc__le32(al->p);
        if (a == 0 || (a & (a - 1)) != 0)
            return fc__io_fail(o, FC_ERR_FORMAT, "%s: general.alignment %u is not a power of two",
                               FN, a);
        f->alignment = a;
    }
    return FC_OK;
}

/* ---- open / close ------------------------------------------------------------------------------
 */

void fc_gguf_close(fc_gguf_file *f) {
    if (!f) return;
    fc_allocator a = f->alloc;
    fc__free(&a, f->nodes, f->nodes_cap * sizeof *f->nodes);
    fc__free(&a, f->keys, f->n_kv * sizeof *f->keys);
    fc__free(&a, f->kv_sorted, f->n_kv * sizeof *f->kv_sorted);
    fc__free(&a, f->t, f->n_t * sizeof *f->t);
    fc__free(&a, f->t_sorted, f->n_t * sizeof *f->t_sorted);
    fc__free(&a, f->names, f->names_cap);
    fc__io_map_release(f->map);
    fc__free(&a, f, sizeof *f);
}

static fc_status parse_header(fc_gguf_file *f, cur *c) {
    const fc_io_opts *o = c->o;
    uint32_t magic = 0, version = 0;
    uint64_t n_t = 0, n_kv = 0;
    if (left(c) < 4 || memcmp(c->p, "GGUF", 4) != 0)
        return fc__io_fail(o, FC_ERR_FORMAT, "%s: bad magic (not a GGUF file)", FN);
    fc_status st = rd_u32(c, &magic, "the magic");
    if (st == FC_OK) st = rd_u32(c, &version, "the version");
    if (st != FC_OK) return st;
    if (version != 2 && version != 3) {
        if (version == 0x02000000u || version == 0x03000000u)
            return fc__io_fail(o, FC_ERR_FORMAT, "%s: big-endian GGUF is not supported", FN);
        return fc__io_fail(o, FC_ERR_FORMAT, "%s: GGUF version %u is not supported (2 and 3 are)",
                           FN, version);
    }
    f->version = version;
    if ((st = rd_u64(c, &n_t, "the tensor count")) != FC_OK) return st;
    if ((st = rd_u64(c, &n_kv, "the key/value count")) != FC_OK) return st;
    /* Smallest entries: a key/value is 8 (key length) + 4 (type) + 1; a
     * tensor info is 8 (name length) + 4 + 8 (one dim) + 4 + 8. */
    if (n_kv > left(c) / 13)
        return fc__io_fail(o, FC_ERR_FORMAT, "%s: key/value count %llu cannot fit in the file", FN,
                           (unsigned long long)n_kv);
    if (n_t > left(c) / 32)
        return fc__io_fail(o, FC_ERR_FORMAT, "%s: tensor count %llu cannot fit in the file", FN,
                           (unsigned long long)n_t);
    f->n_kv = (size_t)n_kv;
    f->n_t = (size_t)n_t;
    return FC_OK;
}

/* Takes the caller's mapping reference (released on failure). */
static fc_status open_map(fc_io_map *map, const fc_io_opts *o, fc_gguf_file **out) {
    const fc_allocator *a = fc__io_alloc(o);
    fc_gguf_file *f = fc__alloc(a, sizeof *f, _Alignof(fc_gguf_file));
    if (!f) {
        fc__io_map_release(map);
        return fc__io_fail(o, FC_ERR_OOM, "%s: out of memory", FN);
    }
    memset(f, 0, sizeof *f);
    f->alloc = a ? *a : *fc_default_allocator();
    f->map = map;
    /* an empty file has no bytes and may have no address: NULL + 0 is
     * undefined in C, so the cursor's end is only computed from a base */
    const uint8_t *base = map->data;
    cur c = {base, base, base ? base + map->size : base, o};
    size_t *offs = NULL, n_offs = 0;
    fc_status st = map->size ? parse_header(f, &c)
                             : fc__io_fail(o, FC_ERR_FORMAT, "%s: empty file (bad magic)", FN);
    size_t n_kv = f->n_kv, n_t = f->n_t;
    f->n_kv = f->n_t = 0; /* grow as parsed, so close frees exactly what exists */
    if (st == FC_OK) {
        n_offs = n_kv + n_t;
        offs = n_offs ? fc__alloc(&f->alloc, n_offs * sizeof *offs, 16) : NULL;
        f->keys = n_kv ? fc__alloc(&f->alloc, n_kv * sizeof *f->keys, 16) : NULL;
        f->t = n_t ? fc__alloc(&f->alloc, n_t * sizeof *f->t, 16) : NULL;
        if (n_kv)
            st = fc__io_grow(&f->alloc, (void **)&f->nodes, &f->nodes_cap, sizeof *f->nodes, n_kv);
        if ((n_offs && !offs) || (n_kv && !f->keys) || (n_t && !f->t) || st != FC_OK)
            st = fc__io_fail(o, FC_ERR_OOM, "%s: out of memory", FN);
        if (f->keys) f->n_kv = n_kv;
        if (f->t) {
            f->n_t = n_t;
            memset(f->t, 0, n_t * sizeof *f->t);
        }
    }
    if (st == FC_OK) {
        f->n_nodes = n_kv;
        st = parse_kvs(f, &c, offs);
    }
    if (st == FC_OK) st = parse_infos(f, &c, offs ? offs + n_kv : NULL);
    if (st == FC_OK) {
        /* The names arena no longer grows: offsets become pointers. */
        for (size_t i = 0; i < n_kv; i++)
            f->keys[i] = f->names + offs[i];
        for (size_t i = 0; i < n_t; i++)
            f->t[i].name = f->names + offs[n_kv + i];
        st = index_names(f, o);
    }
    if (st == FC_OK) {
        uint64_t pos = (uint64_t)(c.p - c.begin);
        f->data_start = pad_to(pos, f->alignment);
        uint64_t data_size = map->size > f->data_start ? map->size - f->data_start : 0;
        st = check_tensors(f, data_size, o);
    }
    fc__free(&f->alloc, offs, n_offs * sizeof *offs);
    if (st != FC_OK) {
        fc_gguf_close(f);
        return st;
    }
    *out = f;
    return FC_OK;
}

fc_status fc_gguf_open(const char *path, const fc_io_opts *opts, fc_gguf_file **out) {
    if (out) *out = NULL;
    if (!path || !out) return fc__io_fail(opts, FC_ERR_NULL_ARG, "%s: NULL argument", FN);
    fc__io_clear(opts);
    fc_io_map *m;
    fc_status st = fc__io_map_file(FN, path, opts, &m);
    if (st != FC_OK) return st;
    return open_map(m, opts, out);
}

fc_status fc_gguf_open_memory(const void *data, size_t size, const fc_io_opts *opts,
                              fc_gguf_file **out) {
    if (out) *out = NULL;
    if (!out || (!data && size)) return fc__io_fail(opts, FC_ERR_NULL_ARG, "%s: NULL argument", FN);
    fc__io_clear(opts);
    fc_io_map *m;
    fc_status st = fc__io_map_memory(data, size, opts, &m);
    if (st != FC_OK) return st;
    return open_map(m, opts, out);
}
