/* SPDX-License-Identifier: MIT */
/* rowwise.c - the row driver of rowwise.h.
 *
 * Work split. The rows are cut into `groups` fixed ranges (shape-only) and
 * the groups into one contiguous range per thread slot. A slot walks its
 * groups tile by tile: a tile is up to T rows that share the outer index
 * (so with inner > 1 its rows are T adjacent lanes, and gathering a tile
 * reads T contiguous elements per position along the row: whole cache
 * lines instead of one element per line). Scratch for every slot is taken
 * from the pool before the team starts, so workers never allocate. */
#include "exec/kernels/rowwise.h"

#include "core/convert.h"

int64_t fc__rows_default_groups(int64_t rows, int64_t dim) {
    int64_t total = rows * dim, g = (total + 16383) / 16384;
    if (g > 1024) g = 1024;
    if (g > rows) g = rows;
    return g < 1 ? 1 : g;
}

/* ---- conversion between storage and compute rows ------------------------------------------ */

static void load_ct(fc_dtype ct, fc_dtype dt, const void *src, void *dst, int64_t n) {
    if (ct == FC_F32)
        fc__load_f32_row(dt, src, dst, (size_t)n);
    else if (ct == FC_F64)
        fc__load_f64_row(dt, src, dst, (size_t)n);
    else
        fc__load_i64_row(dt, src, dst, (size_t)n);
}

static void store_ct(fc_dtype ct, fc_dtype dt, const void *src, void *dst, int64_t n) {
    if (ct == FC_F32)
        fc__store_f32_row(dt, src, dst, (size_t)n);
    else if (ct == FC_F64)
        fc__store_f64_row(dt, src, dst, (size_t)n);
    else
        fc__store_i64_row(dt, src, dst, (size_t)n);
}

#define TILE_LANES 16 /* rows per tile when inner > 1 */

typedef struct rows_state {
    fc__rows_job *job;
    bool direct[FC__ROWS_MAX_OPS]; /* operand used in place */
    int64_t tile;                  /* rows per tile */
    int64_t slots;
    size_t slot_bytes;
    char *scratch;
} rows_state;

/* Tile [r, r+n) of operand k (inner > 1: lanes i..i+n of outer o) to or
 * from its scratch rows, through a small lane buffer per position. */
static void transpose_tile(const rows_state *s, int k, int64_t r, int64_t n, void *buf,
                           bool to_scratch) {
    const fc__rows_job *j = s->job;
    fc_raw *t = j->ops[k];
    size_t es = fc_dtype_size(t->dtype), cs = fc_dtype_size(j->ct);
    int64_t o = r / j->inner, i = r % j->inner, dim = j->dim;
    char *base = fc__raw_base(t) + (size_t)((o * dim * j->inner + i) * (int64_t)es);
    union {
        float f[TILE_LANES];
        double d[TILE_LANES];
    } lane;
    void *lp = cs == 4 ? (void *)lane.f : (void *)lane.d;
    for (int64_t d = 0; d < dim; d++) {
        char *src = base + (size_t)(d * j->inner * (int64_t)es);
        if (to_scratch) load_ct(j->ct, t->dtype, src, lp, n);
        for (int64_t q = 0; q < n; q++) {
            /* 8-byte compute values (f64, i64) move as bytes */
            char *cell = (char *)buf + (size_t)(q * dim + d) * cs;
            if (to_scratch)
                memcpy(cell, (char *)lp + q * (int64_t)cs, cs);
            else
                memcpy((char *)lp + q * (int64_t)cs, cell, cs);
        }
        if (!to_scratch) store_ct(j->ct, t->dtype, lp, src, n);
    }
}

static void run_tile(const rows_state *s, int64_t g, int64_t r, int64_t n, char *scratch) {
    fc__rows_job *j = s->job;
    int nops = j->nin + j->nout;
    void *rows[FC__ROWS_MAX_OPS];
    size_t cs = fc_dtype_size(j->ct);
    size_t per = (size_t)(s->tile * j->dim) * cs;
    for (int k = 0; k < nops; k++) {
        fc_raw *t = j->ops[k];
        size_t es = fc_dtype_size(t->dtype);
        char *at = fc__raw_base(t) + (size_t)(r * j->dim) * es;
        if (s->direct[k]) {
            rows[k] = at;
            continue;
        }
        rows[k] = scratch + per * (size_t)k;
        if (k >= j->nin) continue; /* outputs are written by the kernel */
        if (j->inner == 1)
            load_ct(j->ct, t->dtype, at, rows[k], n * j->dim);
        else
            transpose_tile(s, k, r, n, rows[k], true);
    }
    j->fn(j->arg, g, r, n, j->dim, rows);
    for (int k = j->nin; k < nops; k++) {
        if (s->direct[k]) continue;
        fc_raw *t = j->ops[k];
        char *at = fc__raw_base(t) + (size_t)(r * j->dim) * fc_dtype_size(t->dtype);
        if (j->inner == 1)
            store_ct(j->ct, t->dtype, rows[k], at, n * j->dim);
        else
            transpose_tile(s, k, r, n, rows[k], false);
    }
}

static void run_group(const rows_state *s, int64_t g, char *scratch) {
    const fc__rows_job *j = s->job;
    int64_t rows = j->outer * j->inner;
    int64_t r0 = rows * g / j->groups, r1 = rows * (g + 1) / j->groups;
    bool all_direct = true;
    for (int k = 0; k < j->nin + j->nout; k++)
        all_direct &= s->direct[k];
    if (all_direct) { /* rows are the tensors' own memory: one call per group */
        if (r1 > r0) run_tile(s, g, r0, r1 - r0, scratch);
        return;
    }
    for (int64_t r = r0; r < r1;) {
        int64_t n = r1 - r < s->tile ? r1 - r : s->tile;
        if (j->inner > 1) {
            int64_t lane_left = j->inner - r % j->inner;
            if (n > lane_left) n = lane_left;
        }
        run_tile(s, g, r, n, scratch);
        r += n;
    }
}

static void run_slots(void *arg, int64_t b, int64_t e) {
    rows_state *s = arg;
    int64_t G = s->job->groups;
    for (int64_t slot = b; slot < e; slot++) {
        char *scratch = s->scratch ? s->scratch + s->slot_bytes * (size_t)slot : NULL;
        for (int64_t g = G * slot / s->slots; g < G * (slot + 1) / s->slots; g++)
            run_group(s, g, scratch);
    }
}

fc_status fc__rows_run(fc_ctx *ctx, const char *op, fc__rows_job *job) {
    int nops = job->nin + job->nout;
    int64_t rows = job->outer * job->inner;
    if (rows <= 0 || job->dim <= 0) return FC_OK;
    if (job->groups <= 0) job->groups = fc__rows_default_groups(rows, job->dim);
    if (job->groups > rows) job->groups = rows;
    rows_state s = {.job = job};
    int nconv = 0;
    for (int k = 0; k < nops; k++) {
        s.direct[k] = job->inner == 1 && job->ops[k]->dtype == job->ct;
        nconv += !s.direct[k];
    }
    if (job->inner > 1)
        s.tile = job->inner < TILE_LANES ? job->inner : TILE_LANES;
    else {
        s.tile = 8192 / job->dim;
        s.tile = s.tile < 1 ? 1 : s.tile > 256 ? 256 : s.tile;
    }
    int64_t work = rows * job->dim;
    s.slots = (work + 32767) / 32768;
    if (s.slots > ctx->threads) s.slots = ctx->threads;
    if (s.slots > job->groups) s.slots = job->groups;
    if (s.slots < 1) s.slots = 1;
    fc_buffer *buf = NULL;
    if (nconv > 0) {
        /* every operand slot is sized alike so operand k's rows sit at k * per */
        s.slot_bytes = (size_t)nops * (size_t)(s.tile * job->dim) * fc_dtype_size(job->ct);
        s.slot_bytes = (s.slot_bytes + 63) & ~(size_t)63;
        buf = fc__ctx_buffer(ctx, s.slot_bytes * (size_t)s.slots);
        if (!buf)
            return fc__fail(ctx, FC_ERR_OOM, "%s: out of memory for %zu bytes of row scratch", op,
                            s.slot_bytes * (size_t)s.slots);
        s.scratch = buf->data;
    }
    fc__parallel_for(ctx, s.slots, 1, run_slots, &s);
    if (buf) fc__buffer_release(buf);
    return FC_OK;
}
