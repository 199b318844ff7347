/* checkpoint.c - the example trainers' checkpoint file (layout in
 * checkpoint.h).
 *
 * Saving streams records straight to a temporary file while folding every
 * byte into the checksum, then renames it over the target. Loading reads
 * the whole file, checks magic, byte order, version and checksum before
 * trusting any length in it, indexes the records, and only then copies
 * into the model, so a damaged file is refused before anything changes
 * (a missing record or a shape mismatch can still stop a load half way;
 * the header says so). */
#define _POSIX_C_SOURCE 200809L

#include "checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CKPT_MAGIC "FCEXCKPT"
#define CKPT_BOM 0x01020304u
#define CKPT_VERSION 1u
enum { KIND_U64 = 1, KIND_F32 = 2 };

/* optimizer state names that fc_optim_state may hold, in save order */
static const char *const STATE_NAMES[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq",
                                          "momentum_buffer"};
enum { NSTATES = sizeof STATE_NAMES / sizeof STATE_NAMES[0] };

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}
#define FNV_OFFSET 0xCBF29CE484222325ull

// ----------------------------------------------------------------------------
// writing

typedef struct writer {
    FILE *f;
    uint64_t hash;
    bool failed;
} writer;

static void put(writer *w, const void *p, size_t n) {
    if (w->failed) return;
    if (fwrite(p, 1, n, w->f) != n) w->failed = true;
    w->hash = fnv1a(w->hash, p, n);
}

static void put_name(writer *w, const char *a, const char *b, const char *c) {
    char name[512];
    int len = snprintf(name, sizeof name, "%s%s%s", a, b, c ? c : "");
    if (len < 0 || len >= (int)sizeof name) {
        w->failed = true;
        return;
    }
    uint16_t n16 = (uint16_t)len;
    put(w, &n16, sizeof n16);
    put(w, name, (size_t)len);
}

static void put_u64(writer *w, const char *prefix, const char *name, uint64_t v) {
    put_name(w, prefix, name, NULL);
    uint8_t kind = KIND_U64;
    put(w, &kind, 1);
    put(w, &v, sizeof v);
}

static void put_tensor(writer *w, const char *a, const char *b, const char *c, fc_tensor *t) {
    put_name(w, a, b, c);
    uint8_t kind = KIND_F32, rank = (uint8_t)fc_tensor_rank(t);
    put(w, &kind, 1);
    put(w, &rank, 1);
    put(w, fc_tensor_shape(t), sizeof(int64_t) * rank);
    const void *data = fc_tensor_data(t);
    if (!data) {
        w->failed = true;
        return;
    }
    put(w, data, (size_t)fc_tensor_numel(t) * sizeof(float));
}

fc_status ex_ckpt_save(const char *path, fc_ctx *ctx, fc_optim *opt, const char *const *names,
                       const ex_ckpt_value *values, int nvalues) {
    int np = fc_optim_num_params(opt);
    for (int i = 0; i < np; i++) {
        fc_tensor *p = fc_optim_param(opt, i);
        if (fc_tensor_dtype(p) != FC_F32 || !fc_tensor_is_contiguous(p)) {
            fprintf(stderr, "checkpoint: %s: parameter %s is not a contiguous f32 tensor\n", path,
                    names[i]);
            return FC_ERR_INVALID_ARG;
        }
    }
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        fprintf(stderr, "checkpoint: path too long: %s\n", path);
        return FC_ERR_INVALID_ARG;
    }
    writer w = {.f = fopen(tmp, "wb"), .hash = FNV_OFFSET};
    if (!w.f) {
        fprintf(stderr, "checkpoint: cannot write %s: %s\n", tmp, strerror(errno));
        return FC_ERR_IO;
    }
    /* count the records first: the header carries the number */
    uint32_t count = 4 + (uint32_t)nvalues;
    for (int i = 0; i < np; i++) {
        count++;
        for (int s = 0; s < NSTATES; s++) count += fc_optim_state(opt, i, STATE_NAMES[s], false) != NULL;
    }
    uint32_t bom = CKPT_BOM, version = CKPT_VERSION;
    put(&w, CKPT_MAGIC, 8);
    put(&w, &bom, 4);
    put(&w, &version, 4);
    put(&w, &count, 4);
    uint64_t seed, offset;
    fc_ctx_rng_get(ctx, &seed, &offset);
    put_u64(&w, "optim.", "steps", (uint64_t)fc_optim_step_count(opt));
    put_u64(&w, "rng.", "seed", seed);
    put_u64(&w, "rng.", "offset", offset);
    put_u64(&w, "optim.", "num_params", (uint64_t)np);
    for (int i = 0; i < nvalues; i++) put_u64(&w, "user.", values[i].name, values[i].value);
    for (int i = 0; i < np; i++) {
        put_tensor(&w, "param.", names[i], NULL, fc_optim_param(opt, i));
        for (int s = 0; s < NSTATES; s++) {
            fc_tensor *st = fc_optim_state(opt, i, STATE_NAMES[s], false);
            if (!st) continue;
            char suffix[64];
            snprintf(suffix, sizeof suffix, ".%s", STATE_NAMES[s]);
            put_tensor(&w, "optim.", names[i], suffix, st);
        }
    }
    uint64_t h = w.hash;
    put(&w, &h, sizeof h);
    bool ok = !w.failed && fflush(w.f) == 0;
    if (fclose(w.f) != 0) ok = false;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "checkpoint: writing %s failed: %s\n", path, strerror(errno));
        remove(tmp);
        return FC_ERR_IO;
    }
    return FC_OK;
}

// ----------------------------------------------------------------------------
// reading

typedef struct record {
    const char *name;
    uint16_t name_len;
    uint8_t kind;
    uint64_t value;       /* KIND_U64 */
    int rank;             /* KIND_F32 */
    int64_t dims[8];
    const unsigned char *data;
    uint64_t numel;
} record;

typedef struct reader {
    const unsigned char *p, *end;
    bool bad;
} reader;

static const unsigned char *take(reader *r, uint64_t n) {
    if (r->bad || (uint64_t)(r->end - r->p) < n) {
        r->bad = true;
        return NULL;
    }
    const unsigned char *q = r->p;
    r->p += n;
    return q;
}

static bool parse_record(reader *r, record *rec) {
    const unsigned char *q = take(r, 2);
    if (!q) return false;
    memcpy(&rec->name_len, q, 2);
    rec->name = (const char *)take(r, rec->name_len);
    q = take(r, 1);
    if (!q) return false;
    rec->kind = *q;
    if (rec->kind == KIND_U64) {
        q = take(r, 8);
        if (q) memcpy(&rec->value, q, 8);
        return q != NULL;
    }
    if (rec->kind != KIND_F32 || !(q = take(r, 1)) || *q > 8) return false;
    rec->rank = *q;
    rec->numel = 1;
    for (int d = 0; d < rec->rank; d++) {
        q = take(r, 8);
        if (!q) return false;
        memcpy(&rec->dims[d], q, 8);
        if (rec->dims[d] < 1 || (uint64_t)rec->dims[d] > (UINT64_MAX / 8) / rec->numel) return false;
        rec->numel *= (uint64_t)rec->dims[d];
    }
    rec->data = take(r, rec->numel * sizeof(float));
    return rec->data != NULL;
}

static const record *find(const record *recs, uint32_t n, const char *a, const char *b,
                          const char *c) {
    char name[512];
    int len = snprintf(name, sizeof name, "%s%s%s", a, b, c ? c : "");
    if (len < 0 || len >= (int)sizeof name) return NULL;
    for (uint32_t i = 0; i < n; i++)
        if (recs[i].name_len == len && memcmp(recs[i].name, name, (size_t)len) == 0) return &recs[i];
    return NULL;
}

/* copies a KIND_F32 record into t after checking the shape */
static bool restore_tensor(const char *path, const record *rec, fc_tensor *t) {
    bool same = rec->kind == KIND_F32 && rec->rank == fc_tensor_rank(t);
    for (int d = 0; same && d < rec->rank; d++) same = rec->dims[d] == fc_tensor_dim(t, d);
    if (!same) {
        char desc[128];
        fprintf(stderr, "checkpoint: %s: record %.*s does not have the model's shape %s\n", path,
                rec->name_len, rec->name, fc_tensor_describe(t, desc, sizeof desc));
        return false;
    }
    void *dst = fc_tensor_data_mut(t);
    if (!dst) return false;
    memcpy(dst, rec->data, rec->numel * sizeof(float));
    return true;
}

static unsigned char *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    bool ok = true;
    for (;;) {
        if (len == cap) {
            unsigned char *nb = realloc(buf, cap ? cap * 2 : (size_t)1 << 20);
            if (!nb) {
                ok = false;
                break;
            }
            buf = nb;
            cap = cap ? cap * 2 : (size_t)1 << 20;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) ok = false;
    fclose(f);
    if (!ok) {
        free(buf);
        return NULL;
    }
    *size = len;
    return buf;
}

static fc_status load_records(const char *path, const unsigned char *buf, size_t size,
                              record **out, uint32_t *nout) {
    const size_t head = 8 + 4 + 4 + 4;
    uint32_t bom, version, count;
    if (size < head + 8 || memcmp(buf, CKPT_MAGIC, 8) != 0) {
        fprintf(stderr, "checkpoint: %s is not an example checkpoint (bad magic)\n", path);
        return FC_ERR_FORMAT;
    }
    memcpy(&bom, buf + 8, 4);
    memcpy(&version, buf + 12, 4);
    memcpy(&count, buf + 16, 4);
    uint64_t stored;
    memcpy(&stored, buf + size - 8, 8);
    if (bom != CKPT_BOM || version != CKPT_VERSION || fnv1a(FNV_OFFSET, buf, size - 8) != stored) {
        fprintf(stderr, "checkpoint: %s: wrong byte order, version %u or checksum "
                        "(damaged or from another machine)\n", path, version);
        return FC_ERR_FORMAT;
    }
    if (count > (size - head) / 12) {
        fprintf(stderr, "checkpoint: %s: %u records cannot fit in %zu bytes\n", path, count, size);
        return FC_ERR_FORMAT;
    }
    record *recs = calloc(count ? count : 1, sizeof *recs);
    if (!recs) return FC_ERR_OOM;
    reader r = {.p = buf + head, .end = buf + size - 8};
    for (uint32_t i = 0; i < count; i++) {
        if (!parse_record(&r, &recs[i])) {
            fprintf(stderr, "checkpoint: %s: record %u is malformed\n", path, i);
            free(recs);
            return FC_ERR_FORMAT;
        }
    }
    *out = recs;
    *nout = count;
    return FC_OK;
}

static const record *need(const char *path, const record *recs, uint32_t n, const char *a,
                          const char *b, const char *c, int kind) {
    const record *rec = find(recs, n, a, b, c);
    if (!rec || rec->kind != kind)
        fprintf(stderr, "checkpoint: %s: no record %s%s%s\n", path, a, b, c ? c : "");
    return rec && rec->kind == kind ? rec : NULL;
}

fc_status ex_ckpt_load(const char *path, fc_ctx *ctx, fc_optim *opt, const char *const *names,
                       ex_ckpt_value *values, int nvalues) {
    size_t size = 0;
    unsigned char *buf = read_all(path, &size);
    if (!buf) {
        fprintf(stderr, "checkpoint: cannot read %s: %s\n", path, strerror(errno));
        return FC_ERR_IO;
    }
    record *recs = NULL;
    uint32_t n = 0;
    fc_status st = load_records(path, buf, size, &recs, &n);
    if (st != FC_OK) {
        free(buf);
        return st;
    }
    st = FC_ERR_FORMAT;
    const record *steps = need(path, recs, n, "optim.", "steps", NULL, KIND_U64);
    const record *seed = need(path, recs, n, "rng.", "seed", NULL, KIND_U64);
    const record *offset = need(path, recs, n, "rng.", "offset", NULL, KIND_U64);
    const record *np = need(path, recs, n, "optim.", "num_params", NULL, KIND_U64);
    if (!steps || !seed || !offset || !np) goto done;
    if (np->value != (uint64_t)fc_optim_num_params(opt)) {
        fprintf(stderr, "checkpoint: %s holds %llu parameters, the model has %d\n", path,
                (unsigned long long)np->value, fc_optim_num_params(opt));
        goto done;
    }
    for (int i = 0; i < nvalues; i++) {
        const record *v = need(path, recs, n, "user.", values[i].name, NULL, KIND_U64);
        if (!v) goto done;
        values[i].value = v->value;
    }
    for (int i = 0; i < fc_optim_num_params(opt); i++) {
        const record *p = need(path, recs, n, "param.", names[i], NULL, KIND_F32);
        if (!p || !restore_tensor(path, p, fc_optim_param(opt, i))) goto done;
        for (int s = 0; s < NSTATES; s++) {
            char suffix[64];
            snprintf(suffix, sizeof suffix, ".%s", STATE_NAMES[s]);
            const record *r = find(recs, n, "optim.", names[i], suffix);
            if (!r) continue;
            fc_tensor *t = fc_optim_state(opt, i, STATE_NAMES[s], true);
            if (!t || !restore_tensor(path, r, t)) goto done;
        }
    }
    st = fc_optim_set_step_count(opt, (int64_t)steps->value);
    if (st != FC_OK) goto done;
    fc_ctx_rng_set(ctx, seed->value, offset->value);
done:
    free(recs);
    free(buf);
    return st;
}
