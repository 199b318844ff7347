/* SPDX-License-Identifier: MIT */
/* index.c - integer indexing kernels: index_select (and embedding),
 * gather, scatter_add, one_hot, and the index-add kernel the index_select
 * backward uses (src/ops/index.c validates, records and holds the rules).
 *
 * Index tensors may have any integer dtype and any layout; they are read
 * once into int64 (fc__index_load) and every value is checked
 * (fc__index_check) before any output is touched: a negative or too large
 * value is FC_ERR_INDEX with the value, its position in the index tensor
 * and the bound (negative indices are errors here, not Python-style counts
 * from the end).
 *
 * index_select views x as [O, D, I] around the axis (O rows before it, I
 * elements after it) and copies O * J rows of I elements, J = the index's
 * element count: a memcpy per row when x is contiguous (embedding lookups
 * on the GPT path), a strided row copy otherwise. A block-quantized x gives
 * an f32 result: the selected rows are dequantized (fc_dequantize).
 *
 * gather/scatter_add walk "fibers": the index positions that differ only in
 * the axis coordinate. A fiber reads and writes only the elements of x that
 * share its other coordinates, so fibers run in parallel, and scatter_add's
 * repeated destinations are summed within one fiber in index order: the
 * result does not depend on the thread count. */
#include <stdio.h>
#include <string.h>

#include "exec/kernels/copy.h"
#include "exec/kernels/index.h"
#include "exec/parallel.h"
#include "fucina/quant.h"

/* ---- index tensors -------------------------------------------------------------------------- */

bool fc__index_load(fc_ctx *ctx, const char *op, const fc_tensor *index, fc__index *out) {
    fc_dtype dt = index->raw.dtype;
    char d[160];
    if (!fc_dtype_supports_int_math(dt)) {
        fc__fail(ctx, FC_ERR_DTYPE,
                 "%s: index %s must have an integer dtype (u8, u16, i8, i16, i32, i64)", op,
                 fc__desc(index, d, (int)sizeof d));
        return false;
    }
    int64_t n = fc__raw_numel(&index->raw);
    size_t es = fc_dtype_size(dt);
    bool contiguous = fc__raw_is_contiguous(&index->raw);
    out->n = n;
    out->scratch = NULL;
    if (dt == FC_I64 && contiguous) {
        out->v = (const int64_t *)fc__raw_base(&index->raw);
        return true;
    }
    size_t need = (size_t)n * 8 + (contiguous || dt == FC_I64 ? 0 : (size_t)n * es);
    fc_buffer *b = fc__ctx_buffer(ctx, need);
    if (!b) {
        fc__fail(ctx, FC_ERR_OOM, "%s: out of memory reading index %s", op,
                 fc__desc(index, d, (int)sizeof d));
        return false;
    }
    int64_t *v = b->data;
    const void *src = fc__raw_base(&index->raw);
    if (dt == FC_I64) { /* strided i64: one ordered copy is the whole conversion */
        fc__raw_copy_to(&index->raw, v, (size_t)n * 8);
    } else {
        if (!contiguous) {
            char *tmp = (char *)b->data + (size_t)n * 8;
            fc__raw_copy_to(&index->raw, tmp, (size_t)n * es);
            src = tmp;
        }
        fc_convert_row(dt, src, FC_I64, v, (size_t)n);
    }
    out->v = v;
    out->scratch = b;
    return true;
}

bool fc__index_check(fc_ctx *ctx, const char *op, const fc__index *ix, const fc_tensor *index,
                     int64_t bound, const char *what) {
    int64_t p = 0;
    for (; p < ix->n; p++)
        if ((uint64_t)ix->v[p] >= (uint64_t)bound) break; /* negatives wrap to huge */
    if (p == ix->n) return true;
    int64_t pos[FC_MAX_RANK], q = p;
    for (int i = index->raw.rank - 1; i >= 0; i--) {
        pos[i] = q % index->raw.shape[i];
        q /= index->raw.shape[i];
    }
    char ps[160], d[160];
    fc__fail(ctx, FC_ERR_INDEX,
             "%s: index value %lld at position %s of index %s is out of range [0, %lld) for %s%s",
             op, (long long)ix->v[p], FC__SHAPE_STR(pos, index->raw.rank, ps),
             fc__desc(index, d, (int)sizeof d), (long long)bound, what,
             ix->v[p] < 0 ? " (negative indices are not allowed)" : "");
    return false;
}

void fc__index_free(fc__index *ix) {
    if (ix->scratch) fc__buffer_release(ix->scratch);
    ix->scratch = NULL;
    ix->v = NULL;
}

/* ---- index_select / embedding --------------------------------------------------------------- */

typedef struct select_job {
    const fc_raw *x;
    int axis;
    const int64_t *idx;
    int64_t J, D, I; /* index count, axis size, elements after the axis */
    char *out;
    size_t es;
} select_job;

/* rows [r0, r1) of O * J; x contiguous: one memcpy per row */
static void select_contiguous(void *arg, int64_t r0, int64_t r1) {
    const select_job *j = arg;
    size_t row = (size_t)j->I * j->es;
    const char *base = fc__raw_base(j->x);
    for (int64_t r = r0; r < r1; r++) {
        int64_t o = r / j->J, v = j->idx[r % j->J];
        memcpy(j->out + (size_t)r * row, base + (size_t)(o * j->D + v) * row, row);
    }
}

/* rows [r0, r1); x strided: the outer coordinates advance like an odometer */
static void select_strided(void *arg, int64_t r0, int64_t r1) {
    const select_job *j = arg;
    const fc_raw *x = j->x;
    int a = j->axis;
    fc_raw row = *x; /* a plain value over x's buffer: no reference taken */
    row.rank = x->rank - a - 1;
    if (row.rank == 0) { /* the axis is the last one: rows are single elements */
        row.rank = 1;
        row.shape[0] = 1;
        row.strides[0] = 1;
    } else {
        memmove(row.shape, x->shape + a + 1, sizeof(int64_t) * (size_t)row.rank);
        memmove(row.strides, x->strides + a + 1, sizeof(int64_t) * (size_t)row.rank);
    }
    int64_t oidx[FC_MAX_RANK], o = r0 / j->J, jj = r0 % j->J, ooff = x->offset;
    for (int i = a - 1; i >= 0; i--) {
        oidx[i] = o % x->shape[i];
        o /= x->shape[i];
        ooff += oidx[i] * x->strides[i];
    }
    for (int64_t r = r0; r < r1; r++) {
        row.offset = ooff + j->idx[jj] * x->strides[a];
        fc__raw_copy_range(&row, j->out + (size_t)r * (size_t)j->I * j->es, 0, j->I);
        if (++jj < j->J) continue;
        jj = 0;
        for (int i = a - 1; i >= 0; i--) { /* next outer position */
            ooff += x->strides[i];
            if (++oidx[i] < x->shape[i]) break;
            ooff -= x->strides[i] * x->shape[i];
            oidx[i] = 0;
        }
    }
}

/* Block-quantized x (contiguous): the result is f32. Off the last axis a
 * selected row of I elements is I / C whole quantized rows of the last axis
 * (C elements), dequantized straight into the output. On the last axis each
 * selected element sits inside one block, which is dequantized on the stack
 * (at most 256 elements) to pick it out. */
typedef struct block_job {
    fc_dtype dt;
    const char *x;
    const int64_t *idx;
    int64_t J, D, I, C, be;
    size_t bbytes; /* bytes of one block */
    float *out;
    atomic_int status;
} block_job;

static void select_block_rows(void *arg, int64_t r0, int64_t r1) {
    block_job *j = arg;
    size_t row_bytes = (size_t)(j->I / j->be) * j->bbytes;
    for (int64_t r = r0; r < r1; r++) {
        int64_t o = r / j->J, v = j->idx[r % j->J];
        fc_status st = fc_dequantize(j->dt, j->x + (size_t)(o * j->D + v) * row_bytes,
                                     j->out + r * j->I, j->I / j->C, j->C);
        if (st != FC_OK) atomic_store(&j->status, (int)st);
    }
}

static void select_block_elems(void *arg, int64_t r0, int64_t r1) {
    block_job *j = arg;
    float tmp[256];
    size_t row_bytes = (size_t)(j->C / j->be) * j->bbytes;
    for (int64_t r = r0; r < r1; r++) {
        int64_t o = r / j->J, v = j->idx[r % j->J];
        const char *blk = j->x + (size_t)o * row_bytes + (size_t)(v / j->be) * j->bbytes;
        fc_status st = fc_dequantize(j->dt, blk, tmp, 1, j->be);
        if (st != FC_OK) atomic_store(&j->status, (int)st);
        j->out[r] = tmp[v % j->be];
    }
}

static fc_status select_block(fc_ctx *ctx, const fc_tensor *x, int a, const fc__index *ix,
                              fc_tensor *out) {
    const fc_raw *xr = &x->raw;
    block_job job = {.dt = xr->dtype,
                     .x = fc__raw_base(xr),
                     .idx = ix->v,
                     .J = ix->n,
                     .D = xr->shape[a],
                     .I = fc__shape_product(xr->shape + a + 1, xr->rank - a - 1),
                     .C = xr->shape[xr->rank - 1],
                     .be = fc_dtype_block_elems(xr->dtype),
                     .bbytes = fc_dtype_size(xr->dtype),
                     .out = (float *)fc__raw_base(&out->raw)};
    atomic_init(&job.status, FC_OK);
    int64_t rows = fc__shape_product(xr->shape, a) * ix->n;
    if (a == xr->rank - 1) {
        if (job.be > 256) return FC_ERR_DTYPE; /* no such format today */
        fc__parallel_for(ctx, rows, 1024, select_block_elems, &job);
    } else {
        fc__parallel_for(ctx, rows, job.I >= 4096 ? 1 : 4096 / job.I, select_block_rows, &job);
    }
    return (fc_status)atomic_load(&job.status);
}

fc_tensor *fc__index_select(fc_ctx *ctx, const char *op, const fc_tensor *x, int a,
                            const fc_tensor *index, const fc__index *ix) {
    bool block = fc_dtype_is_block(x->raw.dtype);
    int xr = x->raw.rank, ir = index->raw.rank, r = xr - 1 + ir;
    int64_t shape[FC_MAX_RANK];
    memcpy(shape, x->raw.shape, sizeof(int64_t) * (size_t)a);
    memcpy(shape + a, index->raw.shape, sizeof(int64_t) * (size_t)ir);
    memcpy(shape + a + ir, x->raw.shape + a + 1, sizeof(int64_t) * (size_t)(xr - a - 1));
    fc_tensor *out = fc__tensor_new(ctx, op, block ? FC_F32 : x->raw.dtype, shape, r);
    if (!out) return NULL;
    if (block) {
        fc_status st = select_block(ctx, x, a, ix, out);
        if (st != FC_OK) {
            char d[160];
            fc__fail(ctx, st, "%s: cannot dequantize rows of %s: %s", op,
                     fc__desc(x, d, (int)sizeof d), fc_strerror(st));
            fc_release(out);
            return NULL;
        }
        return out;
    }
    select_job job = {&x->raw,
                      a,
                      ix->v,
                      ix->n,
                      x->raw.shape[a],
                      fc__shape_product(x->raw.shape + a + 1, xr - a - 1),
                      fc__raw_base(&out->raw),
                      fc_dtype_size(x->raw.dtype)};
    int64_t rows = fc__shape_product(x->raw.shape, a) * ix->n;
    int64_t row_bytes = job.I * (int64_t)job.es;
    int64_t grain = row_bytes >= 16384 ? 1 : 16384 / row_bytes;
    fc__parallel_for(ctx, rows, grain,
                     fc__raw_is_contiguous(&x->raw) ? select_contiguous : select_strided, &job);
    return out;
}

/* ---- index add (backward of index_select) --------------------------------------------------- */

#define ADD_COLS 512 /* columns per task: tasks own disjoint destination columns */

typedef struct add_job {
    const int64_t *idx;
    int64_t J, D, I, chunks;
    const char *g;
    char *out;
    bool f64;
} add_job;

static void add_rows(void *arg, int64_t t0, int64_t t1) {
    const add_job *j = arg;
    for (int64_t t = t0; t < t1; t++) {
        int64_t o = t / j->chunks, c0 = (t % j->chunks) * ADD_COLS;
        int64_t c1 = c0 + ADD_COLS < j->I ? c0 + ADD_COLS : j->I;
        for (int64_t k = 0; k < j->J; k++) {
            int64_t src = (o * j->J + k) * j->I, dst = (o * j->D + j->idx[k]) * j->I;
            if (j->f64) {
                double *restrict dp = (double *)j->out + dst;
                const double *restrict sp = (const double *)j->g + src;
                for (int64_t c = c0; c < c1; c++)
                    dp[c] += sp[c];
            } else {
                float *restrict dp = (float *)j->out + dst;
                const float *restrict sp = (const float *)j->g + src;
                for (int64_t c = c0; c < c1; c++)
                    dp[c] += sp[c];
            }
        }
    }
}

fc_tensor *fc__index_add_rows(fc_ctx *ctx, fc_tensor *g, const int64_t *xshape, int xrank, int axis,
                              fc_tensor *index) {
    const char *op = "backward of index_select";
    fc__index ix;
    if (!fc__index_load(ctx, op, index, &ix)) return NULL;
    char what[64];
    snprintf(what, sizeof what, "axis %d", axis);
    fc_tensor *out = NULL, *gc = NULL;
    if (!fc__index_check(ctx, op, &ix, index, xshape[axis], what)) goto done;
    gc = fc__copy_contiguous_ref(ctx, op, g);
    out = gc ? fc_zeros(ctx, g->raw.dtype, xshape, xrank) : NULL;
    if (!out) goto done;
    int64_t I = fc__shape_product(xshape + axis + 1, xrank - axis - 1);
    add_job job = {ix.v,
                   ix.n,
                   xshape[axis],
                   I,
                   (I + ADD_COLS - 1) / ADD_COLS,
                   fc__raw_base(&gc->raw),
                   fc__raw_base(&out->raw),
                   g->raw.dtype == FC_F64};
    int64_t tasks = fc__shape_product(xshape, axis) * job.chunks;
    int64_t work = ix.n * (I < ADD_COLS ? I : ADD_COLS); /* elements per task */
    fc__parallel_for(ctx, tasks, work >= 16384 ? 1 : 16384 / work, add_rows, &job);
done:
    fc_release(gc);
    fc__index_free(&ix);
    return out;
}

/* ---- fibers (gather / scatter_add) ---------------------------------------------------------- */

/* Index positions with the axis coordinate 0, each with the element offsets
 * of up to three operands; fn handles one whole fiber. */
typedef void (*fiber_fn)(void *arg, const int64_t *off);
typedef struct fiber_walk {
    int rank, nops;
    int64_t shape[FC_MAX_RANK]; /* the index shape with the axis dim set to 1 */
    int64_t strides[3][FC_MAX_RANK], base[3];
    fiber_fn fn;
    void *arg;
} fiber_walk;

static void fiber_slice(void *arg, int64_t f0, int64_t f1) {
    const fiber_walk *w = arg;
    int64_t idx[FC_MAX_RANK], off[3], q = f0;
    for (int k = 0; k < w->nops; k++)
        off[k] = w->base[k];
    for (int i = w->rank - 1; i >= 0; i--) {
        idx[i] = q % w->shape[i];
        q /= w->shape[i];
        for (int k = 0; k < w->nops; k++)
            off[k] += idx[i] * w->strides[k][i];
    }
    for (int64_t f = f0; f < f1; f++) {
        w->fn(w->arg, off);
        for (int i = w->rank - 1; i >= 0; i--) {
            for (int k = 0; k < w->nops; k++)
                off[k] += w->strides[k][i];
            if (++idx[i] < w->shape[i]) break;
            for (int k = 0; k < w->nops; k++)
                off[k] -= w->strides[k][i] * w->shape[i];
            idx[i] = 0;
        }
    }
}

static void fibers_run(fc_ctx *ctx, fiber_walk *w, const fc_raw *index, int axis) {
    w->rank = index->rank;
    memcpy(w->shape, index->shape, sizeof(int64_t) * (size_t)index->rank);
    int64_t len = w->shape[axis];
    w->shape[axis] = 1;
    int64_t fibers = fc__shape_product(w->shape, w->rank);
    fc__parallel_for(ctx, fibers, len >= 4096 ? 1 : 4096 / len, fiber_slice, w);
}

/* Element strides of raw t, 0 on the axis (fibers start at coordinate 0). */
static void fiber_strides(const fc_raw *t, int axis, int64_t *out, int64_t *along) {
    memcpy(out, t->strides, sizeof(int64_t) * (size_t)t->rank);
    *along = t->strides[axis];
    out[axis] = 0;
}

/* ---- gather --------------------------------------------------------------------------------- */

typedef struct gather_job {
    const int64_t *idx;
    int64_t len, is, xs; /* fiber length, index/out stride and x stride along the axis */
    const char *x;
    char *out;
    size_t es;
} gather_job;

static void gather_fiber(void *arg, const int64_t *off) {
    const gather_job *j = arg;
    const int64_t *idx = j->idx + off[0];
    char *out = j->out + (size_t)off[0] * j->es; /* out has the index's layout */
    const char *x = j->x + (size_t)off[1] * j->es;
    for (int64_t k = 0; k < j->len; k++)
        memcpy(out + (size_t)(k * j->is) * j->es, x + (size_t)(idx[k * j->is] * j->xs) * j->es,
               j->es);
}

fc_tensor *fc__index_gather(fc_ctx *ctx, const char *op, const fc_tensor *x, int a,
                            const fc_tensor *index, const fc__index *ix) {
    fc_tensor *out = fc__tensor_new(ctx, op, x->raw.dtype, index->raw.shape, index->raw.rank);
    if (!out) return NULL;
    gather_job job = {ix->v,
                      index->raw.shape[a],
                      0,
                      0,
                      fc__raw_base(&x->raw),
                      fc__raw_base(&out->raw),
                      fc_dtype_size(x->raw.dtype)};
    fiber_walk w = {.nops = 2, .fn = gather_fiber, .arg = &job};
    fiber_strides(&out->raw, a, w.strides[0], &job.is);
    fiber_strides(&x->raw, a, w.strides[1], &job.xs);
    fibers_run(ctx, &w, &index->raw, a);
    return out;
}

/* ---- scatter_add ---------------------------------------------------------------------------- */

typedef struct scatter_job {
    const int64_t *idx;
    int64_t len, is, ss, os; /* strides along the axis: index, src, out */
    const char *src;
    char *out;
    fc_dtype dt;
} scatter_job;

/* One element of src added into dst; integers wrap (added in the unsigned
 * type of the same width). The slow path for dtypes other than f32/f64. */
static void add_elem(fc_dtype dt, char *dp, const char *sp) {
    switch (dt) {
    case FC_F16:
        *(uint16_t *)dp = fc_f32_to_f16(fc_f16_to_f32(*(const uint16_t *)dp) +
                                        fc_f16_to_f32(*(const uint16_t *)sp));
        break;
    case FC_BF16:
        *(uint16_t *)dp = fc_f32_to_bf16(fc_bf16_to_f32(*(const uint16_t *)dp) +
                                         fc_bf16_to_f32(*(const uint16_t *)sp));
        break;
    case FC_U8:
    case FC_I8:
        *(uint8_t *)dp = (uint8_t)(*(uint8_t *)dp + *(const uint8_t *)sp);
        break;
    case FC_U16:
    case FC_I16:
        *(uint16_t *)dp = (uint16_t)(*(uint16_t *)dp + *(const uint16_t *)sp);
        break;
    case FC_I32:
        *(uint32_t *)dp += *(const uint32_t *)sp;
        break;
    default:
        *(uint64_t *)dp += *(const uint64_t *)sp;
        break; /* i64 */
    }
}

static void scatter_fiber(void *arg, const int64_t *off) {
    const scatter_job *j = arg;
    const int64_t *idx = j->idx + off[0];
    if (j->dt == FC_F32) {
        const float *s = (const float *)j->src + off[1];
        float *o = (float *)j->out + off[2];
        for (int64_t k = 0; k < j->len; k++)
            o[idx[k * j->is] * j->os] += s[k * j->ss];
    } else if (j->dt == FC_F64) {
        const double *s = (const double *)j->src + off[1];
        double *o = (double *)j->out + off[2];
        for (int64_t k = 0; k < j->len; k++)
            o[idx[k * j->is] * j->os] += s[k * j->ss];
    } else {
        size_t es = fc_dtype_size(j->dt);
        const char *s = j->src + (size_t)off[1] * es;
        char *o = j->out + (size_t)off[2] * es;
        for (int64_t k = 0; k < j->len; k++)
            add_elem(j->dt, o + (size_t)(idx[k * j->is] * j->os) * es,
                     s + (size_t)(k * j->ss) * es);
    }
}

fc_tensor *fc__index_scatter_add(fc_ctx *ctx, const char *op, const fc_tensor *x, int a,
                                 const fc_tensor *index, const fc__index *ix,
                                 const fc_tensor *src) {
    fc_dtype dt = x->raw.dtype;
    fc_tensor *out = fc__tensor_new(ctx, op, dt, x->raw.shape, x->raw.rank);
    fc_status st =
        out ? fc__raw_copy_to(&x->raw, fc__raw_base(&out->raw), fc_tensor_nbytes(out)) : FC_ERR_OOM;
    if (st != FC_OK) {
        if (out) fc__fail(ctx, st, "%s: cannot copy x: %s", op, fc_strerror(st));
        fc_release(out);
        return NULL;
    }
    scatter_job job = {
        ix->v, index->raw.shape[a], 0, 0, 0, fc__raw_base(&src->raw), fc__raw_base(&out->raw), dt};
    int64_t istr[FC_MAX_RANK];
    fc__shape_contiguous_strides(index->raw.shape, index->raw.rank, istr);
    fiber_walk w = {.nops = 3, .fn = scatter_fiber, .arg = &job};
    memcpy(w.strides[0], istr, sizeof istr);
    job.is = istr[a];
    w.strides[0][a] = 0;
    fiber_strides(&src->raw, a, w.strides[1], &job.ss);
    fiber_strides(&out->raw, a, w.strides[2], &job.os);
    fibers_run(ctx, &w, &index->raw, a);
    return out;
}

/* ---- one_hot -------------------------------------------------------------------------------- */

fc_tensor *fc__index_one_hot(fc_ctx *ctx, const char *op, const fc_tensor *index,
                             const fc__index *ix, int64_t num_classes, fc_dtype dtype) {
    int r = index->raw.rank;
    int64_t shape[FC_MAX_RANK];
    memcpy(shape, index->raw.shape, sizeof(int64_t) * (size_t)r);
    shape[r] = num_classes;
    fc_tensor *out = fc__tensor_new(ctx, op, dtype, shape, r + 1);
    if (!out) return NULL;
    size_t es = fc_dtype_size(dtype);
    unsigned char one[8];
    fc__store_f64(dtype, one, 1.0);
    char *p = fc__raw_base(&out->raw);
    memset(p, 0, fc_tensor_nbytes(out));
    for (int64_t i = 0; i < ix->n; i++)
        memcpy(p + (size_t)(i * num_classes + ix->v[i]) * es, one, es);
    return out;
}
