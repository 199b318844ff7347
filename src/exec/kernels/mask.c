/* SPDX-License-Identifier: MIT */
/* mask.c - the kernels behind triu, tril and dropout: ops that keep some
 * elements and zero the rest (src/ops/mask.c validates, records and holds
 * the rules).
 *
 * triu/tril work on the last two axes ([..., R, C]); every row of every
 * matrix keeps one contiguous column range, so a row is a memcpy of the kept
 * part and a memset of the rest (all-zero bytes are zero in every scalar
 * dtype). Any scalar dtype is allowed: nothing is computed.
 *
 * dropout draws its mask from the context RNG (Philox, src/exec/rng.c):
 * element i uses 32-bit word i % 4 of counter base + i / 4, where base is
 * reserved from the context stream. The mask therefore depends only on the
 * seed, the stream position and i: the same for any thread count, and a
 * checkpointed (seed, offset) replays it. An element is kept when its word
 * is >= p * 2^32 (probability 1 - p) and then scaled by 1 / (1 - p). The
 * mask can be returned (one byte per element) so backward applies the very
 * same one (fc__dropout_apply). */
#include <math.h>
#include <string.h>

#include "core/convert.h"
#include "exec/kernels/copy.h"
#include "exec/kernels/mask.h"
#include "exec/parallel.h"

/* ---- triu / tril ---------------------------------------------------------------------------- */

typedef struct tri_job {
    const char *src; /* contiguous source, or NULL when out already holds x */
    char *out;
    int64_t R, C, k;
    size_t es;
    bool upper;
} tri_job;

static void tri_rows(void *arg, int64_t r0, int64_t r1) {
    const tri_job *j = arg;
    size_t row = (size_t)j->C * j->es;
    for (int64_t r = r0; r < r1; r++) {
        int64_t i = r % j->R, lo, hi; /* kept columns [lo, hi) */
        if (j->upper) {
            lo = i + j->k < 0 ? 0 : i + j->k > j->C ? j->C : i + j->k;
            hi = j->C;
        } else {
            lo = 0;
            hi = i + j->k + 1 < 0 ? 0 : i + j->k + 1 > j->C ? j->C : i + j->k + 1;
        }
        char *o = j->out + (size_t)r * row;
        if (j->src && hi > lo)
            memcpy(o + (size_t)lo * j->es, j->src + (size_t)r * row + (size_t)lo * j->es,
                   (size_t)(hi - lo) * j->es);
        memset(o, 0, (size_t)lo * j->es);
        if (hi < lo) hi = lo;
        memset(o + (size_t)hi * j->es, 0, (size_t)(j->C - hi) * j->es);
    }
}

fc_tensor *fc__mask_triangle(fc_ctx *ctx, const char *op, fc_tensor *x, int64_t k, bool upper) {
    int r = x->raw.rank;
    fc_tensor *out = fc__tensor_new(ctx, op, x->raw.dtype, x->raw.shape, r);
    if (!out) return NULL;
    int64_t R = x->raw.shape[r - 2], C = x->raw.shape[r - 1];
    /* beyond these bounds every row is all kept or all zero: clamping keeps i + k in range */
    int64_t kc = k > C ? C : k < -R ? -R : k;
    tri_job job = {NULL, fc__raw_base(&out->raw), R, C, kc, fc_dtype_size(x->raw.dtype), upper};
    if (fc__raw_is_contiguous(&x->raw)) {
        job.src = fc__raw_base(&x->raw);
    } else {
        fc_status st = fc__raw_copy_into(&x->raw, &out->raw);
        if (st != FC_OK) {
            char d[160];
            fc__fail(ctx, st, "%s: cannot copy %s: %s", op, fc__desc(x, d, (int)sizeof d),
                     fc_strerror(st));
            fc_release(out);
            return NULL;
        }
    }
    int64_t rows = fc__raw_numel(&x->raw) / C, row_bytes = C * (int64_t)job.es;
    fc__parallel_for(ctx, rows, row_bytes >= 16384 ? 1 : 16384 / row_bytes, tri_rows, &job);
    return out;
}

/* ---- dropout -------------------------------------------------------------------------------- */

typedef struct drop_job {
    uint64_t seed, base; /* Philox key and first counter */
    uint64_t thr;        /* drop when the word < thr */
    double scale;
    fc_dtype dt;
    const char *x; /* contiguous */
    char *out;
    uint8_t *mask; /* NULL when no backward needs it */
} drop_job;

#define DROP_BLOCK 1024 /* elements per task block; a multiple of 4 */

/* Elements [i0, i1) of one block: the keep flags first (Philox words), then
 * one loop per dtype with no per-element branch on the dtype. */
static void drop_block(const drop_job *j, int64_t i0, int64_t i1) {
    uint8_t keep[DROP_BLOCK];
    for (int64_t g = i0 / 4; 4 * g < i1; g++) {
        uint32_t w[4];
        fc__philox(j->seed, j->base + (uint64_t)g, w);
        for (int t = 0; t < 4 && 4 * g + t < i1; t++)
            keep[4 * g + t - i0] = w[t] >= j->thr;
    }
    int64_t n = i1 - i0;
    if (j->mask) memcpy(j->mask + i0, keep, (size_t)n);
    float sf = (float)j->scale;
    switch (j->dt) {
    case FC_F32: {
        const float *restrict x = (const float *)j->x + i0;
        float *restrict o = (float *)j->out + i0;
        for (int64_t i = 0; i < n; i++)
            o[i] = keep[i] ? x[i] * sf : 0.0f;
        break;
    }
    case FC_F64: {
        const double *restrict x = (const double *)j->x + i0;
        double *restrict o = (double *)j->out + i0;
        for (int64_t i = 0; i < n; i++)
            o[i] = keep[i] ? x[i] * j->scale : 0.0;
        break;
    }
    default: { /* f16, bf16: through f32, rounded once */
        const uint16_t *x = (const uint16_t *)j->x + i0;
        uint16_t *o = (uint16_t *)j->out + i0;
        float buf[DROP_BLOCK];
        if (j->dt == FC_F16)
            fc__f16_to_f32_row(x, buf, (size_t)n);
        else
            fc__bf16_to_f32_row(x, buf, (size_t)n);
        for (int64_t i = 0; i < n; i++)
            buf[i] = keep[i] ? buf[i] * sf : 0.0f;
        if (j->dt == FC_F16)
            fc__f32_to_f16_row(buf, o, (size_t)n);
        else
            fc__f32_to_bf16_row(buf, o, (size_t)n);
        break;
    }
    }
}

typedef struct drop_range {
    const drop_job *job;
    int64_t n;
} drop_range;

static void drop_slice(void *arg, int64_t b0, int64_t b1) {
    const drop_range *r = arg;
    for (int64_t b = b0; b < b1; b++) {
        int64_t i0 = b * DROP_BLOCK, i1 = i0 + DROP_BLOCK < r->n ? i0 + DROP_BLOCK : r->n;
        drop_block(r->job, i0, i1);
    }
}

fc_tensor *fc__mask_dropout(fc_ctx *ctx, fc_tensor *x, double p, fc_tensor **mask) {
    fc_tensor *xc = fc__copy_contiguous_ref(ctx, "dropout", x);
    fc_tensor *out =
        xc ? fc__tensor_new(ctx, "dropout", x->raw.dtype, x->raw.shape, x->raw.rank) : NULL;
    fc_tensor *m =
        out && mask ? fc__tensor_new(ctx, "dropout", FC_U8, x->raw.shape, x->raw.rank) : NULL;
    if (!out || (mask && !m)) {
        fc_release(xc);
        fc_release(out);
        return NULL;
    }
    int64_t n = fc__raw_numel(&x->raw), groups = (n + 3) / 4;
    drop_job job = {ctx->rng_seed,
                    fc__rng_reserve(ctx, (uint64_t)groups),
                    (uint64_t)ceil(p * 4294967296.0),
                    fc__dropout_scale(p),
                    x->raw.dtype,
                    fc__raw_base(&xc->raw),
                    fc__raw_base(&out->raw),
                    m ? (uint8_t *)fc__raw_base(&m->raw) : NULL};
    drop_range range = {&job, n};
    fc__parallel_for(ctx, (n + DROP_BLOCK - 1) / DROP_BLOCK, 4, drop_slice, &range);
    fc_release(xc);
    if (mask) *mask = m;
    return out;
}

/* ---- mask application (backward of dropout) ------------------------------------------------- */

typedef struct apply_job {
    const char *g;
    const uint8_t *mask;
    char *out;
    double scale;
    bool f64;
} apply_job;

static void apply_slice(void *arg, int64_t b, int64_t e) {
    const apply_job *j = arg;
    if (j->f64) {
        const double *restrict g = (const double *)j->g;
        double *restrict o = (double *)j->out;
        for (int64_t i = b; i < e; i++)
            o[i] = j->mask[i] ? g[i] * j->scale : 0.0;
    } else {
        const float *restrict g = (const float *)j->g;
        float *restrict o = (float *)j->out;
        float s = (float)j->scale;
        for (int64_t i = b; i < e; i++)
            o[i] = j->mask[i] ? g[i] * s : 0.0f;
    }
}

fc_tensor *fc__dropout_apply(fc_ctx *ctx, fc_tensor *g, fc_tensor *mask, double scale) {
    const char *op = "backward of dropout";
    fc_tensor *gc = fc__copy_contiguous_ref(ctx, op, g);
    fc_tensor *mc = gc ? fc__copy_contiguous_ref(ctx, op, mask) : NULL;
    fc_tensor *out = mc ? fc__tensor_new(ctx, op, g->raw.dtype, g->raw.shape, g->raw.rank) : NULL;
    if (out) {
        apply_job job = {fc__raw_base(&gc->raw), (const uint8_t *)fc__raw_base(&mc->raw),
                         fc__raw_base(&out->raw), scale, g->raw.dtype == FC_F64};
        fc__parallel_for(ctx, fc__raw_numel(&g->raw), 32768, apply_slice, &job);
    }
    fc_release(gc);
    fc_release(mc);
    return out;
}
