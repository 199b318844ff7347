/* join.c - concat, stack, split, pad.
 *
 * concat and stack share one copy kernel. Seen through its storage shape
 * (the last axis in blocks for block dtypes) the output is [O, R]: O outer
 * rows (the axes before `axis`) of R bytes, and each input contributes one
 * contiguous chunk of every output row (its axes from `axis` on; for stack
 * the new axis has size 1 in every input). A contiguous input is then a
 * memcpy per row, rows split across the team; other inputs are copied
 * through their strided window of the output. Every dtype moves as bytes.
 *
 * Autograd: a node holds at most FC__AG_MAX_IN inputs, so a join of more
 * inputs records a tree: groups of inputs get nodes on views of their part
 * of the output (no copy), and a concat node joins the groups. Backward
 * narrows the gradient per input either way.
 *
 * split returns views (one node per piece, placing its gradient into the
 * base's shape); pad fills a fresh tensor and copies x into its interior. */
#include <string.h>

#include "exec/parallel.h"
#include "fucina.h"
#include "exec/kernels/shape_ops.h"

/* ---- argument checks ------------------------------------------------------------------------ */

/* A non-empty list without NULL entries. */
static bool check_list(fc_ctx *ctx, const char *op, fc_tensor *const *xs, int n) {
    if (!xs) {
        fc__fail(ctx, FC_ERR_NULL_ARG, "%s: xs is NULL", op);
        return false;
    }
    if (n < 1) {
        fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: n is %d; need at least one input", op, n);
        return false;
    }
    for (int k = 0; k < n; k++) {
        if (!xs[k]) {
            fc__fail(ctx, FC_ERR_NULL_ARG, "%s: input %d is NULL", op, k);
            return false;
        }
    }
    return true;
}

/* Same dtype, same rank and same shape (except `skip_axis`, -1 for none). */
static bool check_same(fc_ctx *ctx, const char *op, fc_tensor *const *xs, int n, int skip_axis) {
    const fc_raw *a = &xs[0]->raw;
    char d0[160], dk[160];
    for (int k = 1; k < n; k++) {
        const fc_raw *b = &xs[k]->raw;
        fc_status st = FC_OK;
        if (b->dtype != a->dtype)
            st = FC_ERR_DTYPE;
        else if (b->rank != a->rank)
            st = FC_ERR_RANK;
        else
            for (int i = 0; i < a->rank; i++)
                if (i != skip_axis && a->shape[i] != b->shape[i]) st = FC_ERR_SHAPE_MISMATCH;
        if (st == FC_OK) continue;
        fc__desc(xs[0], d0, (int)sizeof d0);
        fc__desc(xs[k], dk, (int)sizeof dk);
        if (st == FC_ERR_DTYPE)
            fc__fail(ctx, st, "%s: input 0 is %s but input %d is %s; cast one with fc_to", op, d0,
                     k, dk);
        else if (skip_axis >= 0)
            fc__fail(ctx, st, "%s: input 0 is %s but input %d is %s; shapes must match off axis %d",
                     op, d0, k, dk, skip_axis);
        else
            fc__fail(ctx, st, "%s: input 0 is %s but input %d is %s; shapes must match", op, d0, k,
                     dk);
        return false;
    }
    return true;
}

/* ---- the copy kernel ------------------------------------------------------------------------ */

typedef struct join_job {
    fc_tensor *const *xs;
    int n;
    int axis; /* in input coordinates: the first axis of each input's chunk */
    char *out;
    int64_t row_bytes;
} join_job;

/* Bytes of input k's chunk of one output row (storage elements from axis on). */
static int64_t chunk_bytes(const fc_raw *x, int axis) {
    int64_t s[FC_MAX_RANK];
    fc__raw_storage_shape(x, s);
    return fc__shape_product(s + axis, x->rank - axis) * (int64_t)fc_dtype_size(x->dtype);
}

static void join_rows(void *arg, int64_t o0, int64_t o1) {
    const join_job *j = arg;
    int64_t col = 0;
    for (int k = 0; k < j->n; k++) {
        const fc_raw *x = &j->xs[k]->raw;
        int64_t cb = chunk_bytes(x, j->axis);
        if (fc__raw_is_contiguous(x)) {
            const char *src = fc__raw_base(x);
            for (int64_t o = o0; o < o1; o++)
                memcpy(j->out + o * j->row_bytes + col, src + o * cb, (size_t)cb);
        }
        col += cb;
    }
}

/* Copies every input into out (contiguous, fresh). stack: each input
 * occupies index k of the new axis `axis`; concat: consecutive ranges. */
static bool join_copy(fc_ctx *ctx, const char *op, fc_tensor *const *xs, int n, int axis,
                      bool stack, fc_tensor *out) {
    const fc_raw *x0 = &xs[0]->raw;
    int64_t s[FC_MAX_RANK];
    fc__raw_storage_shape(x0, s);
    int64_t outer = fc__shape_product(s, axis);
    int64_t row_bytes = 0;
    for (int k = 0; k < n; k++)
        row_bytes += chunk_bytes(&xs[k]->raw, axis);
    join_job job = {xs, n, axis, fc__raw_base(&out->raw), row_bytes};
    fc__parallel_for(ctx, outer, row_bytes >= 32768 ? 1 : 32768 / row_bytes, join_rows, &job);
    /* strided inputs: copy into their window of out */
    int64_t pos = 0; /* index along out's axis where input k starts */
    for (int k = 0; k < n; k++) {
        const fc_raw *x = &xs[k]->raw;
        int64_t span = stack ? 1 : x->shape[axis];
        if (!fc__raw_is_contiguous(x)) {
            fc_raw win = out->raw; /* a plain value: no reference taken */
            win.offset += pos * out->raw.strides[axis];
            if (stack) { /* drop the new axis: the window has x's shape */
                for (int i = axis; i + 1 < out->raw.rank; i++)
                    win.strides[i] = win.strides[i + 1];
                win.rank = x->rank;
            }
            memcpy(win.shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
            fc_status st = fc__raw_copy_into(x, &win);
            if (st != FC_OK) {
                char d[160];
                fc__fail(ctx, st, "%s: cannot copy input %d (%s): %s", op, k,
                         fc__desc(xs[k], d, (int)sizeof d), fc_strerror(st));
                return false;
            }
        }
        pos += span;
    }
    return true;
}

/* ---- autograd: nodes of at most FC__AG_MAX_IN inputs ---------------------------------------- */

/* Records out = join(xs) along output axis `axis`. Groups of inputs get
 * nodes on views of their slab of out; the top node joins the slabs. */
static bool record_join(fc_ctx *ctx, const char *op, fc__backward_fn bw, fc_tensor *out,
                        fc_tensor *const *xs, int n, int axis, bool stack) {
    if (n <= FC__AG_MAX_IN) {
        fc_node *nd = fc__ag_record(ctx, op, bw, out, n, xs);
        if (!nd) return false;
        nd->i[0] = axis;
        return true;
    }
    int per = (n + FC__AG_MAX_IN - 1) / FC__AG_MAX_IN, ng = (n + per - 1) / per;
    fc_tensor *groups[FC__AG_MAX_IN] = {NULL};
    bool ok = true;
    int64_t pos = 0;
    for (int g = 0; g < ng && ok; g++) {
        int lo = g * per, hi = lo + per < n ? lo + per : n;
        int64_t span = 0;
        for (int k = lo; k < hi; k++)
            span += stack ? 1 : xs[k]->raw.shape[axis];
        int64_t shape[FC_MAX_RANK];
        memcpy(shape, out->raw.shape, sizeof shape);
        shape[axis] = span;
        groups[g] = fc__tensor_view(ctx, op, out, shape, out->raw.strides, out->raw.rank,
                                    out->raw.offset + pos * out->raw.strides[axis]);
        ok = groups[g] != NULL;
        if (ok && fc__ag_wants(ctx, hi - lo, xs + lo))
            ok = record_join(ctx, op, bw, groups[g], xs + lo, hi - lo, axis, stack);
        pos += span;
    }
    if (ok) {
        fc_node *nd = fc__ag_record(ctx, op, fc__bw_concat, out, ng, groups);
        ok = nd != NULL;
        if (ok) nd->i[0] = axis;
    }
    for (int g = 0; g < ng; g++)
        fc_release(groups[g]);
    return ok;
}

static fc_tensor *finish_join(fc_ctx *ctx, const char *op, fc__backward_fn bw, fc_tensor *out,
                              fc_tensor *const *xs, int n, int axis, bool stack) {
    out = fc__finish(ctx, op, out);
    if (out && fc__ag_wants(ctx, n, xs) && !record_join(ctx, op, bw, out, xs, n, axis, stack)) {
        fc_release(out);
        return NULL;
    }
    return out;
}

/* ---- concat / stack ------------------------------------------------------------------------- */

fc_tensor *fc_concat(fc_ctx *ctx, fc_tensor *const *xs, int n, int axis) {
    FC__CHECK_CTX(ctx);
    int a;
    if (!check_list(ctx, "concat", xs, n) ||
        !fc__op_axis(ctx, "concat", axis, xs[0]->raw.rank, xs[0], &a) ||
        !check_same(ctx, "concat", xs, n, a))
        return NULL;
    const fc_raw *x0 = &xs[0]->raw;
    int64_t shape[FC_MAX_RANK];
    memcpy(shape, x0->shape, sizeof shape);
    shape[a] = 0;
    for (int k = 0; k < n; k++) {
        int64_t d = xs[k]->raw.shape[a];
        if (shape[a] > FC__MAX_ELEMS - d) {
            fc__fail(ctx, FC_ERR_OVERFLOW, "concat: axis %d grows past %lld elements", a,
                     (long long)FC__MAX_ELEMS);
            return NULL;
        }
        shape[a] += d;
    }
    fc_tensor *out = fc__tensor_new(ctx, "concat", x0->dtype, shape, x0->rank);
    if (!out) return NULL;
    if (!join_copy(ctx, "concat", xs, n, a, false, out)) {
        fc_release(out);
        return NULL;
    }
    return finish_join(ctx, "concat", fc__bw_concat, out, xs, n, a, false);
}

fc_tensor *fc_stack(fc_ctx *ctx, fc_tensor *const *xs, int n, int axis) {
    FC__CHECK_CTX(ctx);
    if (!check_list(ctx, "stack", xs, n) || !check_same(ctx, "stack", xs, n, -1)) return NULL;
    const fc_raw *x0 = &xs[0]->raw;
    char d[160];
    if (x0->rank == FC_MAX_RANK) {
        fc__fail(ctx, FC_ERR_RANK, "stack: inputs %s already have the maximum rank %d",
                 fc__desc(xs[0], d, (int)sizeof d), FC_MAX_RANK);
        return NULL;
    }
    int a;
    if (!fc__op_axis(ctx, "stack", axis, x0->rank + 1, xs[0], &a)) return NULL;
    if (fc_dtype_is_block(x0->dtype) && a == x0->rank) {
        fc__fail(ctx, FC_ERR_UNSUPPORTED_VIEW,
                 "stack: %s is block-quantized: a new last axis would split its blocks",
                 fc__desc(xs[0], d, (int)sizeof d));
        return NULL;
    }
    int64_t shape[FC_MAX_RANK];
    for (int i = 0, k = 0; i <= x0->rank; i++)
        shape[i] = i == a ? n : x0->shape[k++];
    fc_tensor *out = fc__tensor_new(ctx, "stack", x0->dtype, shape, x0->rank + 1);
    if (!out) return NULL;
    if (!join_copy(ctx, "stack", xs, n, a, true, out)) {
        fc_release(out);
        return NULL;
    }
    return finish_join(ctx, "stack", fc__bw_stack, out, xs, n, a, true);
}

/* ---- split ---------------------------------------------------------------------------------- */

/* One piece: `len` elements of axis from `start`, a view with its own node. */
static fc_tensor *split_piece(fc_ctx *ctx, fc_tensor *x, int axis, int64_t start, int64_t len) {
    int64_t shape[FC_MAX_RANK];
    memcpy(shape, x->raw.shape, sizeof shape);
    shape[axis] = len;
    fc_tensor *p = fc__layout_view(ctx, "split", x, shape, x->raw.strides, x->raw.rank,
                                   x->raw.offset + start * x->raw.strides[axis]);
    p = fc__finish(ctx, "split", p);
    if (!p || !fc__ag_wants(ctx, 1, &x)) return p;
    fc_node *nd = fc__ag_record(ctx, "split", fc__bw_slice, p, 1, &x);
    if (!nd) {
        fc_release(p);
        return NULL;
    }
    nd->i[0] = axis;
    nd->i[1] = start;
    nd->i[2] = 1;
    return p;
}

fc_status fc_split(fc_ctx *ctx, fc_tensor *x, int axis, const int64_t *sizes, int n,
                   fc_tensor **out) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!x || !sizes || !out)
        return fc__fail(ctx, FC_ERR_NULL_ARG, "split: %s is NULL",
                        !x       ? "input 'x'"
                        : !sizes ? "sizes"
                                 : "out");
    int a;
    if (!fc__op_axis(ctx, "split", axis, x->raw.rank, x, &a)) return FC_ERR_AXIS;
    char d[160];
    if (n < 1) return fc__fail(ctx, FC_ERR_INVALID_ARG, "split: n is %d; need n >= 1", n);
    int64_t total = 0, dim = x->raw.shape[a];
    for (int k = 0; k < n; k++) {
        if (sizes[k] < 1)
            return fc__fail(ctx, FC_ERR_INVALID_ARG, "split: sizes[%d] is %lld; need >= 1", k,
                            (long long)sizes[k]);
        total += sizes[k] > dim ? dim + 1 : sizes[k];
        if (total > dim) break;
    }
    if (total != dim)
        return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                        "split: the %d sizes do not sum to %lld, the size of axis %d of %s", n,
                        (long long)dim, a, fc__desc(x, d, (int)sizeof d));
    /* build every piece before touching out[], so a failure leaves it as it was */
    size_t bytes = sizeof(fc_tensor *) * (size_t)n;
    fc_tensor **tmp = fc__ctx_alloc(ctx, bytes);
    if (!tmp) return fc__fail(ctx, FC_ERR_OOM, "split: out of memory for %d pieces", n);
    int64_t start = 0;
    int made = 0;
    for (; made < n; made++) {
        tmp[made] = split_piece(ctx, x, a, start, sizes[made]);
        if (!tmp[made]) break;
        start += sizes[made];
    }
    fc_status st = made == n ? FC_OK : fc_ctx_status(ctx);
    if (st == FC_OK)
        memcpy(out, tmp, bytes);
    else
        for (int k = 0; k < made; k++)
            fc_release(tmp[k]);
    fc__ctx_free(ctx, tmp, bytes);
    return st;
}

/* ---- pad ------------------------------------------------------------------------------------ */

fc_tensor *fc_pad(fc_ctx *ctx, fc_tensor *x, const int64_t *pads, double value) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "pad", x);
    char d[160];
    if (!pads) {
        fc__fail(ctx, FC_ERR_NULL_ARG, "pad: pads is NULL");
        return NULL;
    }
    if (fc_dtype_is_block(x->raw.dtype)) {
        fc__fail(ctx, FC_ERR_DTYPE, "pad: %s is block-quantized; convert with fc_to first",
                 fc__desc(x, d, (int)sizeof d));
        return NULL;
    }
    int r = x->raw.rank;
    int64_t shape[FC_MAX_RANK];
    for (int i = 0; i < r; i++) {
        int64_t b = pads[2 * i], e = pads[2 * i + 1], dim = x->raw.shape[i];
        if (b < 0 || e < 0) {
            fc__fail(ctx, FC_ERR_INVALID_ARG, "pad: pads %lld, %lld of axis %d of %s: need >= 0",
                     (long long)b, (long long)e, i, fc__desc(x, d, (int)sizeof d));
            return NULL;
        }
        if (b > FC__MAX_ELEMS - dim || e > FC__MAX_ELEMS - dim - b) {
            fc__fail(ctx, FC_ERR_OVERFLOW, "pad: axis %d of %s grows past %lld elements", i,
                     fc__desc(x, d, (int)sizeof d), (long long)FC__MAX_ELEMS);
            return NULL;
        }
        shape[i] = dim + b + e;
    }
    fc_tensor *out = fc__tensor_new(ctx, "pad", x->raw.dtype, shape, r);
    if (!out) return NULL;
    unsigned char v[8] = {0}, zero[8] = {0};
    fc__store_f64(x->raw.dtype, v, value);
    size_t es = fc_dtype_size(x->raw.dtype);
    if (memcmp(v, zero, es) == 0)
        memset(fc__raw_base(&out->raw), 0, fc_tensor_nbytes(out));
    else
        fc__raw_fill(&out->raw, v);
    fc_raw inner = out->raw; /* a plain value: no reference taken */
    memcpy(inner.shape, x->raw.shape, sizeof inner.shape);
    for (int i = 0; i < r; i++)
        inner.offset += pads[2 * i] * out->raw.strides[i];
    fc_status st = fc__raw_copy_into(&x->raw, &inner);
    if (st != FC_OK) {
        fc__fail(ctx, st, "pad: cannot copy %s: %s", fc__desc(x, d, (int)sizeof d),
                 fc_strerror(st));
        fc_release(out);
        return NULL;
    }
    out = fc__finish(ctx, "pad", out);
    if (out && fc__ag_wants(ctx, 1, &x)) {
        fc_node *nd = fc__ag_record(ctx, "pad", fc__bw_pad, out, 1, &x);
        if (!nd) {
            fc_release(out);
            return NULL;
        }
        for (int i = 0; i < r; i++)
            nd->i[i] = pads[2 * i];
    }
    return out;
}
