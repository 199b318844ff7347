/* matmul.c - fc_matmul, fc_linear and fc_ctx_set_backend: tensors in,
 * fc__gemm calls out (src/backend/backend.h). The op never knows which
 * provider ran.
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
 * views) is copied once with fc_contiguous. Batch axes are coalesced where
 * the strides allow; the innermost mergeable run becomes the gemm's batch
 * (one provider call) and the rest an outer odometer loop. A shared right
 * operand with a row-contiguous batched left operand ([B, T, C] . [C, N], the
 * linear-layer shape) folds the batch into m: one large product instead of
 * B small ones.
 *
 * fc_linear computes x . w^T + bias by viewing w [out, in] as its transpose
 * (no copy) and, with a bias, first writing the bias into every output row
 * and then accumulating (C += x.w^T), so 16-bit outputs round once.
 *
 * Autograd: both ops record a node (rules in src/ag/grad_matmul.c). */
#include <stdio.h>
#include <string.h>

#include "fucina.h"
#include "ag/grad_matmul.h"
#include "ag/tape.h"
#include "backend/backend.h"
#include "exec/tensor.h"
#include "exec/parallel.h"

static bool is_float(fc_dtype dt) {
    return dt == FC_F16 || dt == FC_BF16 || dt == FC_F32 || dt == FC_F64;
}

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

/* Replaces o's tensor by a contiguous copy (owned by o). Records the error
 * on failure. */
static bool operand_make_contiguous(fc_ctx *ctx, const char *op, bool left, operand *o) {
    fc_tensor *c = fc_contiguous(ctx, o->t);
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

/* a . b (+ bias in every row); a, b already of one float dtype. */
static fc_tensor *mm_forward(fc_ctx *ctx, const char *op, fc_tensor *a, fc_tensor *b,
                             fc_tensor *bias) {
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
    const fc__matmul_provider *p = NULL;
    char err[FC__ERR_CAP - 64];
    fc_status rc = fc__backend_resolve(ctx->backend, dt, m, s.n, s.k, &p, err, sizeof err);
    if (rc != FC_OK) {
        fc__fail(ctx, rc, "%s", err);
        goto done;
    }
    out = fc__tensor_new(ctx, op, dt, s.out_shape, s.out_rank);
    if (!out) goto done;
    if (bias) {
        bias_c = fc_contiguous(ctx, bias);
        if (!bias_c) goto fail;
        fill_rows(ctx, out, bias_c, s.n);
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

/* ---- public ops ---------------------------------------------------------------------------- */

/* FC_ERR_DTYPE unless a and b share a float dtype; names both. */
static bool check_dtypes(fc_ctx *ctx, const char *op, const char *what_a, const fc_tensor *a,
                         const char *what_b, const fc_tensor *b) {
    fc_dtype da = a->raw.dtype, db = b->raw.dtype;
    if (!is_float(da)) {
        fc__fail(ctx, FC_ERR_DTYPE, "%s: %s has dtype %s; matmul takes f16, bf16, f32, f64", op,
                 what_a, fc_dtype_name(da));
        return false;
    }
    if (da != db) {
        fc__fail(ctx, FC_ERR_DTYPE, "%s: dtypes %s (%s) and %s (%s) differ; cast one with fc_to",
                 op, fc_dtype_name(da), what_a, fc_dtype_name(db), what_b);
        return false;
    }
    return true;
}

/* A block-quantized right operand next to an f32 left one is dequantized to
 * f32 once and the dense product runs (quantized weights never require
 * grad; the left operand's gradient uses the dequantized copy). Returns b
 * itself otherwise, or NULL with the error recorded. */
static fc_tensor *dense_rhs(fc_ctx *ctx, const char *op, fc_tensor *left, fc_tensor *b) {
    if (!fc_dtype_is_block(b->raw.dtype) || left->raw.dtype != FC_F32) return b;
    if (!fc_dtype_supports_quantized_matmul_rhs(b->raw.dtype)) {
        fc__fail(ctx, FC_ERR_DTYPE, "%s: %s is not a weight format (it quantizes activations)", op,
                 fc_dtype_name(b->raw.dtype));
        return NULL;
    }
    return fc_to(ctx, b, FC_F32);
}

fc_tensor *fc_matmul(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "matmul", a);
    FC__CHECK_INPUT(ctx, "matmul", b);
    fc_tensor *bd = dense_rhs(ctx, "matmul", a, b);
    if (!bd) return NULL;
    fc_tensor *out = NULL;
    if (check_dtypes(ctx, "matmul", "a", a, "b", bd)) out = mm_forward(ctx, "matmul", a, bd, NULL);
    if (out && fc__ag_wants(ctx, 2, (fc_tensor *[]){a, b})) {
        fc_node *nd = fc__ag_record(ctx, "matmul", fc__grad_matmul, out, 2, (fc_tensor *[]){a, b});
        if (!nd || fc__ag_save(ctx, nd, "a", a) != FC_OK ||
            fc__ag_save(ctx, nd, "b", bd) != FC_OK) {
            fc_release(out);
            out = NULL;
        }
    }
    if (bd != b) fc_release(bd);
    return out ? fc__finish(ctx, "matmul", out) : NULL;
}

static fc_tensor *linear_dense(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *bias);
/* qlinear.c: block-quantized weights decoded inside the kernel */
fc_tensor *fc__linear_quantized(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *bias);

fc_tensor *fc_linear(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *bias) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "linear", x);
    FC__CHECK_INPUT(ctx, "linear", w);
    if (fc_dtype_is_block(w->raw.dtype)) return fc__linear_quantized(ctx, x, w, bias);
    fc_tensor *wd = dense_rhs(ctx, "linear", x, w);
    if (!wd) return NULL;
    fc_tensor *out = linear_dense(ctx, x, wd, bias);
    fc_tensor *ins[3] = {x, w, bias};
    if (out && fc__ag_wants(ctx, 3, ins)) {
        fc_node *nd = fc__ag_record(ctx, "linear", fc__grad_linear, out, 3, ins);
        if (!nd || fc__ag_save(ctx, nd, "x", x) != FC_OK ||
            fc__ag_save(ctx, nd, "weight", wd) != FC_OK) {
            fc_release(out);
            out = NULL;
        }
    }
    if (wd != w) fc_release(wd);
    return out ? fc__finish(ctx, "linear", out) : NULL;
}

/* x . w^T + bias for a dense w: checks, then the shared forward. */
static fc_tensor *linear_dense(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *bias) {
    char xs[160], ws[160], bs[160];
    if (!check_dtypes(ctx, "linear", "x", x, "weight", w)) return NULL;
    if (bias && bias->raw.dtype != x->raw.dtype) {
        fc__fail(ctx, FC_ERR_DTYPE,
                 "linear: dtypes %s (x) and %s (bias) differ; cast one with fc_to",
                 fc_dtype_name(x->raw.dtype), fc_dtype_name(bias->raw.dtype));
        return NULL;
    }
    const fc_raw *wr = &w->raw, *xr = &x->raw;
    if (wr->rank != 2) {
        fc__fail(ctx, FC_ERR_RANK, "linear: weight %s must be 2-D [out, in]", fc__desc(w, ws, 160));
        return NULL;
    }
    if (xr->shape[xr->rank - 1] != wr->shape[1]) {
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                 "linear: x %s and weight %s do not match (%lld input features vs %lld)",
                 fc__desc(x, xs, 160), fc__desc(w, ws, 160), (long long)xr->shape[xr->rank - 1],
                 (long long)wr->shape[1]);
        return NULL;
    }
    if (bias && (bias->raw.rank != 1 || bias->raw.shape[0] != wr->shape[0])) {
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH, "linear: bias %s must be [%lld] for weight %s",
                 fc__desc(bias, bs, 160), (long long)wr->shape[0], fc__desc(w, ws, 160));
        return NULL;
    }
    /* w^T as a view: [in, out] with the strides swapped, no copy */
    int64_t shape[2] = {wr->shape[1], wr->shape[0]}, strides[2] = {wr->strides[1], wr->strides[0]};
    fc_tensor *wt = fc__tensor_view(ctx, "linear", w, shape, strides, 2, wr->offset);
    if (!wt) return NULL;
    fc_tensor *out = mm_forward(ctx, "linear", x, wt, bias);
    fc_release(wt);
    return out;
}

fc_status fc_ctx_set_backend(fc_ctx *ctx, fc_backend backend) {
    if (!ctx) return FC_ERR_NULL_ARG;
    char err[256];
    fc_status st = fc__backend_check_built(backend, err, sizeof err);
    if (st != FC_OK) return fc__fail(ctx, st, "fc_ctx_set_backend: %s", err);
    ctx->backend = backend;
    return FC_OK;
}
