/* SPDX-License-Identifier: MIT */
/* gguf_meta.c - GGUF lookups: the ggml type table, tensor descriptors and
 * the typed metadata getters.
 *
 * The type table is the one place that knows ggml's ids (ggml.h, enum
 * ggml_type). Each row's geometry must equal our dtype registry's: the test
 * suite checks the table against ggml's block sizes independently. Ids
 * 4, 5 (old q4_2/q4_3) and 31..33, 36..38 (repacked layouts that GGUF files
 * no longer carry) are unknown on purpose. */
#include <stdlib.h>
#include <string.h>

#include "io/gguf_internal.h"

static const struct {
    uint32_t id;
    fc_dtype dtype;
} ggml_types[] = {
    {0, FC_F32},     {1, FC_F16},      {2, FC_Q4_0},   {3, FC_Q4_1},    {6, FC_Q5_0},
    {7, FC_Q5_1},    {8, FC_Q8_0},     {9, FC_Q8_1},   {10, FC_Q2_K},   {11, FC_Q3_K},
    {12, FC_Q4_K},   {13, FC_Q5_K},    {14, FC_Q6_K},  {15, FC_Q8_K},   {16, FC_IQ2_XXS},
    {17, FC_IQ2_XS}, {18, FC_IQ3_XXS}, {19, FC_IQ1_S}, {20, FC_IQ4_NL}, {21, FC_IQ3_S},
    {22, FC_IQ2_S},  {23, FC_IQ4_XS},  {24, FC_I8},    {25, FC_I16},    {26, FC_I32},
    {27, FC_I64},    {28, FC_F64},     {29, FC_IQ1_M}, {30, FC_BF16},   {34, FC_TQ1_0},
    {35, FC_TQ2_0},  {39, FC_MXFP4},   {40, FC_NVFP4}, {41, FC_Q1_0},   {42, FC_Q2_0_G64},
    {42, FC_Q2_0},
};
#define N_GGML_TYPES (sizeof ggml_types / sizeof *ggml_types)

fc_status fc_gguf_dtype_of(uint32_t ggml_type, fc_dtype *dtype) {
    if (!dtype) return FC_ERR_NULL_ARG;
    for (size_t i = 0; i < N_GGML_TYPES; i++) {
        if (ggml_types[i].id == ggml_type) {
            *dtype = ggml_types[i].dtype;
            return FC_OK;
        }
    }
    return FC_ERR_FORMAT;
}

fc_status fc_gguf_type_of(fc_dtype dtype, uint32_t *ggml_type) {
    if (!ggml_type) return FC_ERR_NULL_ARG;
    for (size_t i = 0; i < N_GGML_TYPES; i++) {
        if (ggml_types[i].dtype == dtype) {
            *ggml_type = ggml_types[i].id;
            return FC_OK;
        }
    }
    return FC_ERR_DTYPE;
}

size_t fc__gguf_scalar_size(uint32_t type) {
    switch (type) {
    case FC_GGUF_U8:
    case FC_GGUF_I8:
    case FC_GGUF_BOOL:
        return 1;
    case FC_GGUF_U16:
    case FC_GGUF_I16:
        return 2;
    case FC_GGUF_U32:
    case FC_GGUF_I32:
    case FC_GGUF_F32:
        return 4;
    case FC_GGUF_U64:
    case FC_GGUF_I64:
    case FC_GGUF_F64:
        return 8;
    default:
        return 0;
    }
}

/* ---- file-level accessors ------------------------------------------------------------ */

uint32_t fc_gguf_version(const fc_gguf_file *f) { return f ? f->version : 0; }
uint64_t fc_gguf_alignment(const fc_gguf_file *f) { return f ? f->alignment : 0; }
int64_t fc_gguf_tensor_count(const fc_gguf_file *f) { return f ? (int64_t)f->n_t : 0; }
int64_t fc_gguf_kv_count(const fc_gguf_file *f) { return f ? (int64_t)f->n_kv : 0; }
fc_io_map *fc__gguf_map(const fc_gguf_file *f) { return f ? f->map : NULL; }

fc_status fc_gguf_tensor_info(const fc_gguf_file *f, int64_t i, fc_io_tensor *out) {
    if (!f || !out) return FC_ERR_NULL_ARG;
    if (i < 0 || (uint64_t)i >= f->n_t) return FC_ERR_INDEX;
    const gguf_tensor *t = &f->t[i];
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->dtype = t->dtype;
    out->rank = t->rank;
    memcpy(out->shape, t->shape, sizeof t->shape);
    out->offset = f->data_start + t->offset;
    out->nbytes = t->nbytes;
    out->data = f->map->data + out->offset;
    out->ggml_type = t->ggml_type;
    return FC_OK;
}

static int64_t lookup(const gguf_name_ix *ix, size_t n, const char *name) {
    if (!ix || !name || n == 0) return -1;
    gguf_name_ix key = {name, 0};
    const gguf_name_ix *hit = bsearch(&key, ix, n, sizeof *ix, fc__gguf_cmp_name);
    return hit ? hit->idx : -1;
}

int64_t fc_gguf_find(const fc_gguf_file *f, const char *name) {
    return f ? lookup(f->t_sorted, f->n_t, name) : -1;
}

const char *fc_gguf_kv_key(const fc_gguf_file *f, int64_t i) {
    if (!f || i < 0 || (uint64_t)i >= f->n_kv) return NULL;
    return f->keys[i];
}

const fc_gguf_value *fc_gguf_kv_value(const fc_gguf_file *f, int64_t i) {
    if (!f || i < 0 || (uint64_t)i >= f->n_kv) return NULL;
    return &f->nodes[i];
}

const fc_gguf_value *fc_gguf_kv_find(const fc_gguf_file *f, const char *key) {
    if (!f) return NULL;
    int64_t i = lookup(f->kv_sorted, f->n_kv, key);
    return i < 0 ? NULL : &f->nodes[i];
}

/* ---- values ------------------------------------------------------------------------------- */

fc_gguf_type fc_gguf_value_type(const fc_gguf_value *v) {
    return v ? (fc_gguf_type)v->type : FC_GGUF_TYPE_COUNT;
}

/* Decodes one number or bool element of `type` at p. Integers land in *i
 * (signed types) or *u (unsigned and bool); floats in *d. Returns 0 for an
 * integer that is signed, 1 unsigned, 2 float. */
static int decode(uint32_t type, const uint8_t *p, int64_t *i, uint64_t *u, double *d) {
    switch (type) {
    case FC_GGUF_U8:
    case FC_GGUF_BOOL:
        *u = p[0];
        return 1;
    case FC_GGUF_I8:
        *i = (int8_t)p[0];
        return 0;
    case FC_GGUF_U16:
        *u = fc__le16(p);
        return 1;
    case FC_GGUF_I16:
        *i = (int16_t)fc__le16(p);
        return 0;
    case FC_GGUF_U32:
        *u = fc__le32(p);
        return 1;
    case FC_GGUF_I32:
        *i = (int32_t)fc__le32(p);
        return 0;
    case FC_GGUF_U64:
        *u = fc__le64(p);
        return 1;
    case FC_GGUF_I64:
        *i = (int64_t)fc__le64(p);
        return 0;
    case FC_GGUF_F32: {
        uint32_t b = fc__le32(p);
        float x;
        memcpy(&x, &b, 4);
        *d = x;
        return 2;
    }
    default: { /* FC_GGUF_F64: callers pass number types only */
        uint64_t b = fc__le64(p);
        memcpy(d, &b, 8);
        return 2;
    }
    }
}

static fc_status get_int(uint32_t type, const uint8_t *p, int64_t *out) {
    if (!fc__gguf_scalar_size(type)) return FC_ERR_DTYPE;
    int64_t i = 0;
    uint64_t u = 0;
    double d;
    int k = decode(type, p, &i, &u, &d);
    if (k == 2) return FC_ERR_DTYPE;
    if (k == 1) {
        if (u > (uint64_t)INT64_MAX) return FC_ERR_OVERFLOW;
        i = (int64_t)u;
    }
    *out = i;
    return FC_OK;
}

static fc_status get_uint(uint32_t type, const uint8_t *p, uint64_t *out) {
    if (!fc__gguf_scalar_size(type)) return FC_ERR_DTYPE;
    int64_t i = 0;
    uint64_t u = 0;
    double d;
    int k = decode(type, p, &i, &u, &d);
    if (k == 2) return FC_ERR_DTYPE;
    if (k == 0) {
        if (i < 0) return FC_ERR_OVERFLOW;
        u = (uint64_t)i;
    }
    *out = u;
    return FC_OK;
}

static fc_status get_float(uint32_t type, const uint8_t *p, double *out) {
    if (type != FC_GGUF_F32 && type != FC_GGUF_F64) return FC_ERR_DTYPE;
    int64_t i;
    uint64_t u;
    decode(type, p, &i, &u, out);
    return FC_OK;
}

fc_status fc_gguf_value_int(const fc_gguf_value *v, int64_t *out) {
    if (!v || !out) return FC_ERR_NULL_ARG;
    return get_int(v->type, v->p, out);
}

fc_status fc_gguf_value_uint(const fc_gguf_value *v, uint64_t *out) {
    if (!v || !out) return FC_ERR_NULL_ARG;
    return get_uint(v->type, v->p, out);
}

fc_status fc_gguf_value_float(const fc_gguf_value *v, double *out) {
    if (!v || !out) return FC_ERR_NULL_ARG;
    return get_float(v->type, v->p, out);
}

fc_status fc_gguf_value_bool(const fc_gguf_value *v, bool *out) {
    if (!v || !out) return FC_ERR_NULL_ARG;
    if (v->type != FC_GGUF_BOOL) return FC_ERR_DTYPE;
    *out = v->p[0] != 0;
    return FC_OK;
}

fc_status fc_gguf_value_string(const fc_gguf_value *v, const char **s, size_t *len) {
    if (!v || !s || !len) return FC_ERR_NULL_ARG;
    if (v->type != FC_GGUF_STRING) return FC_ERR_DTYPE;
    *s = (const char *)v->p;
    *len = (size_t)v->n;
    return FC_OK;
}

fc_status fc_gguf_array_info(const fc_gguf_value *v, fc_gguf_type *elem_type, uint64_t *count) {
    if (!v || !elem_type || !count) return FC_ERR_NULL_ARG;
    if (v->type != FC_GGUF_ARRAY) return FC_ERR_DTYPE;
    *elem_type = (fc_gguf_type)v->elem;
    *count = v->n;
    return FC_OK;
}

const fc_gguf_value *fc_gguf_array_item(const fc_gguf_value *v, uint64_t i) {
    if (!v || v->type != FC_GGUF_ARRAY || v->child < 0 || i >= v->n) return NULL;
    return &v->file->nodes[(size_t)v->child + (size_t)i];
}

/* Pointer to element i of a number/bool array, or an error. */
static fc_status elem_at(const fc_gguf_value *v, uint64_t i, const uint8_t **p) {
    if (!v) return FC_ERR_NULL_ARG;
    if (v->type != FC_GGUF_ARRAY) return FC_ERR_DTYPE;
    size_t es = fc__gguf_scalar_size(v->elem);
    if (!es) return FC_ERR_DTYPE;
    if (i >= v->n) return FC_ERR_INDEX;
    *p = v->p + (size_t)i * es;
    return FC_OK;
}

fc_status fc_gguf_array_int(const fc_gguf_value *v, uint64_t i, int64_t *out) {
    const uint8_t *p;
    if (!out) return FC_ERR_NULL_ARG;
    fc_status st = elem_at(v, i, &p);
    return st != FC_OK ? st : get_int(v->elem, p, out);
}

fc_status fc_gguf_array_uint(const fc_gguf_value *v, uint64_t i, uint64_t *out) {
    const uint8_t *p;
    if (!out) return FC_ERR_NULL_ARG;
    fc_status st = elem_at(v, i, &p);
    return st != FC_OK ? st : get_uint(v->elem, p, out);
}

fc_status fc_gguf_array_float(const fc_gguf_value *v, uint64_t i, double *out) {
    const uint8_t *p;
    if (!out) return FC_ERR_NULL_ARG;
    fc_status st = elem_at(v, i, &p);
    return st != FC_OK ? st : get_float(v->elem, p, out);
}

fc_status fc_gguf_array_data(const fc_gguf_value *v, const void **data, size_t *elem_size) {
    if (!v || !data || !elem_size) return FC_ERR_NULL_ARG;
    if (v->type != FC_GGUF_ARRAY) return FC_ERR_DTYPE;
    size_t es = fc__gguf_scalar_size(v->elem);
    if (!es) return FC_ERR_DTYPE;
    *data = v->p;
    *elem_size = es;
    return FC_OK;
}
