/* SPDX-License-Identifier: MIT */
/* matmul.c - the dense products behind fc_matmul and fc_linear (their
 * checks, records and rules are in src/ops/matmul.c): tensors in, fc__gemm
 * calls out (src/backend/backend.h). The caller never knows which provider
 * ran. Nothing here records on the tape.
 *
 * Shapes follow NumPy's matmul: a [..., m, k] . b [..., k, n] -> [..., m, n]
 * with the batch axes broadcast; a 1-D a is a row [1, k] and a 1-D b a
 * column [k, 1], and that axis is dropped from the result (1-D . 1-D gives
 * shape [1], the library having no rank-0 tensors).
 *
 * Layout: each operand's matrix axes must reach BLAS as (transpose flag,
 * leading dimension): one of its two strides 1 and the other at least the
 * row length. Transposed and narrowed views qualify and are never copied;
 * anything else (a stride-0 expand inside the matrix, every-other-column
 * views) is copied once (fc__copy_contiguous_ref). Batch axes are coalesced
 * where the strides allow; the innermost mergeable run becomes the gemm's
 * batch (one provider call) and the rest an outer odometer loop. A shared
 * right operand with a row-contiguous batched left operand ([B, T, C] .
 * [C, N], the linear-layer shape) folds the batch into m: one large product
 * instead of B small ones.
 *
 * fc__linear computes x . w^T + bias by viewing w [out, in] as its
 * transpose (no copy) and, with a bias, first writing the bias into every
 * output row and then accumulating (C += x.w^T), so 16-bit outputs round
 * once. */
#include <stdio.h>
#include <string.h>

#include "exec/kernels/matmul.h"

#include "backend/backend.h"
#include "exec/kernels/copy.h"
#include "exec/kernels/rowwise.h"
#include "exec/parallel.h"

/* ---- layout analysis ------------------------------------------------------------------------ */

/* One matrix operand as a provider sees it. */
typedef struct mat_layout {
    int64_t ld;
    bool trans;
} mat_layout;

/* rows x cols with element strides (rs, cs): the (ld, trans) that reaches it
 * without a copy, or false. A size-1 axis is never stepped, so its stride is
 * free and gets the value that satisfies the provider's ld minimum. */
static bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, mat_layout *out) {
    if (cols == 1 && rows == 1) {
        *out = (mat_layout){1, false};
        return true;
    }
    if ((cs == 1 || cols == 1) && (rows == 1 || rs >= cols)) {
        *out = (mat_layout){rows == 1 ? cols : rs, false};
        return true;
    }
    if ((rs == 1 || rows == 1) && (cols == 1 || cs >= rows)) {
        *out = (mat_layout){cols == 1 ? rows : cs, true};
        return true;
    }
    return false;
}

/* The matrix geometry of one operand: a vector operand becomes [1, k] (left)
 * or [k, 1] (right). */
typedef struct operand {
    fc_tensor *t; /* the tensor in use (maybe a contiguous copy, owned then) */
    bool owned;
    int64_t rows, cols, rs, cs;
    int batch_rank; /* leading axes before the matrix axes */
    mat_layout lay;
} operand;

static void operand_geometry(operand *o, bool left) {
    const fc_raw *r = &o->t->raw;
    if (r->rank == 1) {
        o->batch_rank = 0;
        if (left) {
            o->rows = 1, o->cols = r->shape[0], o->rs = 0, o->cs = r->strides[0];
        } else {
            o->rows = r->shape[0], o->cols = 1, o->rs = r->strides[0], o->cs = 0;
        }
        return;
    }
    o->batch_rank = r->rank - 2;
    o->rows = r->shape[r->rank - 2], o->cols = r->shape[r->rank - 1];
    o->rs = r->strides[r->rank - 2], o->cs = r->strides[r->rank - 1];
}

/* t with its last two axes swapped: a view, no copy. NULL with the error
 * recorded. */
static fc_tensor *matrix_axes_swapped(fc_ctx *ctx, const char *op, fc_tensor *t) {
    int r = t->raw.rank;
    int64_t shape[FC_MAX_RANK], strides[FC_MAX_RANK];
    memcpy(shape, t->raw.shape, sizeof shape[0] * (size_t)r);
    memcpy(strides, t->raw.strides, sizeof strides[0] * (size_t)r);
    shape[r - 2] = t->raw.shape[r - 1], shape[r - 1] = t->raw.shape[r - 2];
    strides[r - 2] = t->raw.strides[r - 1], strides[r - 1] = t->raw.strides[r - 2];
    return fc__tensor_view(ctx, op, t, shape, strides, r, t->raw.offset);
}

/* A compact copy of t. A transposed matrix (its rows the unit-stride axis,
 * as k^T in attention) is copied as its transpose and viewed back: the copy
 * then moves whole rows instead of one element at a time (an element-wise
 * gather made the batched q.k^T of a small GPT 2.5x slower than the
 * product itself), and the provider reads it transposed, as before. */
static fc_tensor *compact_copy(fc_ctx *ctx, const char *op, fc_tensor *t, bool trans) {
    if (!trans || t->raw.rank < 2 || fc__raw_is_contiguous(&t->raw))
        return fc__copy_contiguous_ref(ctx, op, t);
    fc_tensor *swapped = matrix_axes_swapped(ctx, op, t);
    if (!swapped) return NULL;
    fc_tensor *c = fc__copy_contiguous_ref(ctx, op, swapped);
    fc_release(swapped);
    if (!c) return NULL;
    fc_tensor *back = matrix_axes_swapped(ctx, op, c);
    fc_release(c);
    return back;
}

/* Replaces o's tensor by a compact copy (owned by o), keeping the matrix
 * transposed when o->lay says it is (an operand with no layout yet has
 * trans false). Records the error on failure. */
static bool operand_make_contiguous(fc_ctx *ctx, const char *op, bool left, operand *o) {
    fc_tensor *c = compact_copy(ctx, op, o->t, o->lay.trans);
    if (!c) return false;
    o->t = c;
    o->owned = true;
    operand_geometry(o, left);
    if (blas_layout(o->rows, o->cols, o->rs, o->cs, &o->lay)) return true;
    fc__fail(ctx, FC_ERR_UNSUPPORTED_VIEW, "%s: no BLAS layout for a contiguous operand", op);
    return false;
}

/* Fills o for tensor t, copying it to a contiguous tensor only when its
 * matrix layout cannot be expressed. Records the error on failure. */
static bool operand_prepare(fc_ctx *ctx, const char *op, fc_tensor *t, bool left, operand *o) {
    o->t = t;
    o->owned = false;
    o->lay.trans = false;
    operand_geometry(o, left);
    if (blas_layout(o->rows, o->cols, o->rs, o->cs, &o->lay)) return true;
    return operand_make_contiguous(ctx, op, left, o);
}

/* ---- batch axes ---------------------------------------------------------------------------- */

/* Batch iteration after coalescing: `outer` axes walked by an odometer, then
 * one run of `inner` products, strides in elements per operand (A, B, C). */
typedef struct batch_plan {
    int outer;
    int64_t dims[FC_MAX_RANK];
    int64_t strides[3][FC_MAX_RANK];
    int64_t inner;
    int64_t inner_stride[3];
} batch_plan;

/* The batch strides of operand o along the nb result batch axes (0 where
 * the operand lacks the axis or broadcasts it). */
static void operand_batch_strides(const operand *o, const int64_t *bshape, int nb, int64_t *out) {
    const fc_raw *r = &o->t->raw;
    int off = nb - o->batch_rank;
    for (int i = 0; i < nb; i++) {
        int j = i - off;
        out[i] = (j >= 0 && r->shape[j] == bshape[i]) ? r->strides[j] : 0;
    }
}

static void plan_batches(const int64_t *bshape, int nb, int64_t st[3][FC_MAX_RANK], batch_plan *p) {
    /* drop size-1 axes, then merge neighbours whose strides chain */
    int64_t dims[FC_MAX_RANK], s[3][FC_MAX_RANK];
    int n = 0;
    for (int i = 0; i < nb; i++) {
        if (bshape[i] == 1) continue;
        bool merge = n > 0;
        for (int o = 0; o < 3 && merge; o++)
            merge = s[o][n - 1] == st[o][i] * bshape[i];
        if (merge) {
            dims[n - 1] *= bshape[i];
            for (int o = 0; o < 3; o++)
                s[o][n - 1] = st[o][i];
            continue;
        }
        dims[n] = bshape[i];
        for (int o = 0; o < 3; o++)
            s[o][n] = st[o][i];
        n++;
    }
    p->inner = 1;
    p->inner_stride[0] = p->inner_stride[1] = p->inner_stride[2] = 0;
    p->outer = 0;
    if (n == 0) return;
    p->inner = dims[n - 1];
    for (int o = 0; o < 3; o++)
        p->inner_stride[o] = s[o][n - 1];
    p->outer = n - 1;
    for (int i = 0; i < n - 1; i++) {
        p->dims[i] = dims[i];
        for (int o = 0; o < 3; o++)
            p->strides[o][i] = s[o][i];
    }
}

/* Does an operand with batch strides st broadcast along a (non-1) batch
 * axis? A copy could not make such an operand chain. */
static bool batch_has_zero_stride(const int64_t *bshape, int nb, const int64_t *st) {
    for (int i = 0; i < nb; i++)
        if (bshape[i] > 1 && st[i] == 0) return true;
    return false;
}

/* A batch walked as several provider calls pays each call's fixed cost
 * (oneDNN: about 10 us; OpenBLAS less, but it cannot split one small
 * product across threads). Attention's head views of a fused qkv tensor
 * are such a batch: [B, H] axes whose strides do not chain. When the
 * products are small (below this many multiply-adds per call), a
 * contiguous copy of the operand that breaks the chain costs less than the
 * calls it saves, and the batch becomes one call. */
#define MM_SMALL_CALL (1 << 23)

/* ---- the shared forward ------------------------------------------------------------------------
 */

/* The provider state of ctx (oneDNN primitives, the shared workspace),
 * created on first use; NULL only when that allocation fails, and the
 * providers then run uncached, which is still correct. */
static fc__backend_cache *ctx_cache(fc_ctx *ctx) {
    if (!ctx->backend_cache) ctx->backend_cache = fc__backend_cache_new(&ctx->alloc);
    return ctx->backend_cache;
}

/* Writes bias (contiguous, n elements) into every row of out, rows split
 * over the team (a [1024, 512] f32 output is 2 MB: one thread alone takes
 * longer than the product's own share of some small linears). */
typedef struct fill_arg {
    char *dst;
    const char *src;
    size_t row;
} fill_arg;

static void fill_range(void *p, int64_t begin, int64_t end) {
    const fill_arg *a = p;
    for (int64_t r = begin; r < end; r++)
        memcpy(a->dst + (size_t)r * a->row, a->src, a->row);
}

static void fill_rows(fc_ctx *ctx, fc_tensor *out, const fc_tensor *bias, int64_t n) {
    fill_arg a = {fc__raw_base(&out->raw), fc__raw_base(&bias->raw),
                  (size_t)n * fc_dtype_size(out->raw.dtype)};
    int64_t rows = fc__raw_numel(&out->raw) / n;
    int64_t grain = (int64_t)(65536 / a.row) + 1; /* about 64 KB per slice */
    fc__parallel_for(ctx, rows, grain, fill_range, &a);
}

typedef struct mm_shapes {
    int64_t m, n, k;
    int nb;
    int64_t bshape[FC_MAX_RANK];
    int out_rank;
    int64_t out_shape[FC_MAX_RANK];
} mm_shapes;

/* NumPy matmul shapes of a . b; records the error and returns false. */
static bool mm_shape(fc_ctx *ctx, const char *op, const operand *A, const operand *B,
                     mm_shapes *s) {
    const fc_raw *ra = &A->t->raw, *rb = &B->t->raw;
    if (A->cols != B->rows) {
        char x[160], y[160];
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                 "%s: shapes %s and %s do not match (a has %lld columns, b has %lld rows)", op,
                 FC__SHAPE_STR(ra->shape, ra->rank, x), FC__SHAPE_STR(rb->shape, rb->rank, y),
                 (long long)A->cols, (long long)B->rows);
        return false;
    }
    s->m = A->rows, s->k = A->cols, s->n = B->cols;
    s->nb = A->batch_rank > B->batch_rank ? A->batch_rank : B->batch_rank;
    for (int i = 0; i < s->nb; i++) {
        int ia = i - (s->nb - A->batch_rank), ib = i - (s->nb - B->batch_rank);
        int64_t da = ia >= 0 ? ra->shape[ia] : 1, db = ib >= 0 ? rb->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char x[160], y[160];
            fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                     "%s: batch dims of %s and %s do not broadcast (%lld vs %lld)", op,
                     FC__SHAPE_STR(ra->shape, ra->rank, x), FC__SHAPE_STR(rb->shape, rb->rank, y),
                     (long long)da, (long long)db);
            return false;
        }
        s->bshape[i] = da > db ? da : db;
    }
    s->out_rank = 0;
    for (int i = 0; i < s->nb; i++)
        s->out_shape[s->out_rank++] = s->bshape[i];
    if (ra->rank > 1) s->out_shape[s->out_rank++] = s->m;
    if (rb->rank > 1) s->out_shape[s->out_rank++] = s->n;
    if (s->out_rank == 0) s->out_shape[s->out_rank++] = 1; /* 1-D . 1-D */
    return true;
}

/* Runs every product of the plan through provider p. */
static fc_status run_plan(fc_ctx *ctx, const fc__matmul_provider *p, fc__gemm *g,
                          const batch_plan *bp, char *err, size_t errcap) {
    size_t es = fc_dtype_size(g->dtype);
    const char *a0 = g->a, *b0 = g->b;
    char *c0 = g->c;
    int64_t idx[FC_MAX_RANK] = {0};
    for (;;) {
        int64_t off[3] = {0, 0, 0};
        for (int i = 0; i < bp->outer; i++) {
            for (int o = 0; o < 3; o++)
                off[o] += idx[i] * bp->strides[o][i];
        }
        g->a = a0 + (size_t)off[0] * es;
        g->b = b0 + (size_t)off[1] * es;
        g->c = c0 + (size_t)off[2] * es;
        fc_status st = fc__gemm_run(p, g, err, errcap);
        if (st != FC_OK) return st;
        int i = bp->outer - 1;
        while (i >= 0 && ++idx[i] == bp->dims[i])
            idx[i--] = 0;
        if (i < 0) return FC_OK;
    }
}

/* ---- matrix-vector products ---------------------------------------------------------------
 *
 * One f32 row times the transpose of a row-major matrix (fc_linear with one
 * input row: a weight [out, in] times x) is one dot product per output, and
 * its time is the time to stream the matrix once. Under the automatic
 * provider choice such products of at least GEMV_MIN_ELEMS matrix values
 * run here: the output rows in static slices over the team, each a
 * fc__rw_dot (f32 lane partials added into a double, rounded once). Neither
 * provider streams a 4096 x 4096 f32 weight at memory speed for one row:
 * 12-30 GFLOP/s from oneDNN and OpenBLAS on a 2-core AMD Zen 5 against about
 * 40 here. Each output's bits depend on neither the thread count nor the
 * slice it falls in. An explicit provider (fc_ctx_set_backend,
 * FUCINA_BACKEND) is always honoured. It sits here rather than among the
 * providers because its kernel is the row layer's dot (exec/kernels), which
 * the backend layer below cannot reach. */
#define GEMV_MIN_ELEMS ((int64_t)1 << 16)

typedef struct gemv_job {
    const float *x; /* k values */
    const float *w; /* n rows of k values, ldw apart */
    float *y;       /* n values */
    int64_t k, ldw;
    bool accumulate; /* y += x . w^T (y holds the bias) */
} gemv_job;

static void gemv_rows(void *arg, int64_t j0, int64_t j1) {
    const gemv_job *g = arg;
    for (int64_t j = j0; j < j1; j++) {
        double d = fc__rw_dot(g->x, g->w + j * g->ldw, g->k);
        g->y[j] = g->accumulate ? (float)(g->y[j] + d) : (float)d;
    }
}

/* Whether the product planned as (m, batch) by A . B runs as gemv_rows. */
static bool gemv_applies(const fc_ctx *ctx, fc_dtype dt, int64_t m, int64_t batch,
                         const batch_plan *bp, const operand *A, const operand *B,
                         const mm_shapes *s) {
    return dt == FC_F32 && m == 1 && batch == 1 && bp->outer == 0 && B->lay.trans &&
           !A->lay.trans && s->n >= 2 && s->k >= 1 && s->k >= GEMV_MIN_ELEMS / s->n &&
           fc__backend_requested(ctx->backend) == FC_BACKEND_AUTO;
}

fc_tensor *fc__matmul(fc_ctx *ctx, const char *op, fc_tensor *a, fc_tensor *b, fc_tensor *bias) {
    operand A = {0}, B = {0};
    fc_tensor *out = NULL, *bias_c = NULL;
    if (!operand_prepare(ctx, op, a, true, &A)) goto done;
    if (!operand_prepare(ctx, op, b, false, &B)) goto done;
    mm_shapes s;
    if (!mm_shape(ctx, op, &A, &B, &s)) goto done;

    int64_t st[3][FC_MAX_RANK];
    operand_batch_strides(&A, s.bshape, s.nb, st[0]);
    operand_batch_strides(&B, s.bshape, s.nb, st[1]);
    int64_t run = s.m * s.n; /* the output is contiguous */
    for (int i = s.nb - 1; i >= 0; i--) {
        st[2][i] = run;
        run *= s.bshape[i];
    }
    batch_plan bp;
    plan_batches(s.bshape, s.nb, st, &bp);
    if (bp.outer > 0 && s.n > 0 && s.k > 0 && bp.inner * s.m <= MM_SMALL_CALL / s.n / s.k) {
        operand *ops[2] = {&A, &B};
        bool copied = false;
        for (int o = 0; o < 2; o++) {
            if (ops[o]->owned || batch_has_zero_stride(s.bshape, s.nb, st[o])) continue;
            if (fc__raw_is_contiguous(&ops[o]->t->raw)) continue;
            if (!operand_make_contiguous(ctx, op, o == 0, ops[o])) goto done;
            operand_batch_strides(ops[o], s.bshape, s.nb, st[o]);
            copied = true;
        }
        if (copied) plan_batches(s.bshape, s.nb, st, &bp);
    }
    int64_t m = s.m, batch = bp.inner;
    /* [B, m, k] rows back to back . one shared [k, n]: one (B*m) x n product */
    if (bp.inner > 1 && bp.inner_stride[1] == 0 && !A.lay.trans &&
        bp.inner_stride[0] == s.m * A.lay.ld && bp.inner_stride[2] == s.m * s.n) {
        m = s.m * bp.inner;
        batch = 1;
    }

    fc_dtype dt = a->raw.dtype;
    const bool gemv = gemv_applies(ctx, dt, m, batch, &bp, &A, &B, &s);
    const fc__matmul_provider *p = NULL;
    char err[FC__ERR_CAP - 64];
    fc_status rc = FC_OK;
    if (!gemv) {
        rc = fc__backend_resolve(ctx->backend, dt, m, s.n, s.k, &p, err, sizeof err);
        if (rc != FC_OK) {
            fc__fail(ctx, rc, "%s", err);
            goto done;
        }
    }
    out = fc__tensor_new(ctx, op, dt, s.out_shape, s.out_rank);
    if (!out) goto done;
    if (bias) {
        bias_c = fc__copy_contiguous_ref(ctx, op, bias);
        if (!bias_c) goto fail;
        fill_rows(ctx, out, bias_c, s.n);
    }
    if (gemv) {
        gemv_job job = {.x = (const float *)fc__raw_base(&A.t->raw),
                        .w = (const float *)fc__raw_base(&B.t->raw),
                        .y = (float *)fc__raw_base(&out->raw),
                        .k = s.k,
                        .ldw = B.lay.ld,
                        .accumulate = bias != NULL};
        /* slices of at least 64 K values: the team's start-up is not free */
        fc__parallel_for(ctx, s.n, GEMV_MIN_ELEMS / s.k + 1, gemv_rows, &job);
        goto done;
    }
    fc__gemm g = {
        .dtype = dt,
        .m = m,
        .n = s.n,
        .k = s.k,
        .a = fc__raw_base(&A.t->raw),
        .lda = A.lay.ld,
        .trans_a = A.lay.trans,
        .b = fc__raw_base(&B.t->raw),
        .ldb = B.lay.ld,
        .trans_b = B.lay.trans,
        .c = fc__raw_base(&out->raw),
        .ldc = s.n,
        .accumulate = bias != NULL,
        .batch = batch,
        .stride_a = batch > 1 ? bp.inner_stride[0] : 0,
        .stride_b = batch > 1 ? bp.inner_stride[1] : 0,
        .stride_c = batch > 1 ? bp.inner_stride[2] : 0,
        .threads = ctx->threads > 0 ? ctx->threads : 1,
        .alloc = &ctx->alloc,
        .cache = ctx_cache(ctx),
    };
    rc = run_plan(ctx, p, &g, &bp, err, sizeof err);
    if (rc != FC_OK) {
        char x[160], y[160];
        fc__fail(ctx, rc, "%s: %s . %s: %s", op, fc__desc(a, x, (int)sizeof x),
                 fc__desc(b, y, (int)sizeof y), err);
        goto fail;
    }
    goto done;
fail:
    fc_release(out);
    out = NULL;
done:
    fc_release(bias_c);
    if (A.owned) fc_release(A.t);
    if (B.owned) fc_release(B.t);
    return out;
}

fc_tensor *fc__linear(fc_ctx *ctx, const char *op, fc_tensor *x, fc_tensor *w, fc_tensor *bias) {
    /* w^T as a view: [in, out] with the strides swapped, no copy */
    const fc_raw *wr = &w->raw;
    int64_t shape[2] = {wr->shape[1], wr->shape[0]}, strides[2] = {wr->strides[1], wr->strides[0]};
    fc_tensor *wt = fc__tensor_view(ctx, op, w, shape, strides, 2, wr->offset);
    if (!wt) return NULL;
    fc_tensor *out = fc__matmul(ctx, op, x, wt, bias);
    fc_release(wt);
    return out;
}
