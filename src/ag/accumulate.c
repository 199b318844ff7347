/* SPDX-License-Identifier: MIT */
/* accumulate.c - the gradient arithmetic of the backward engine: adding a
 * rule's gradient into an accumulator (a node's gacc or a leaf's grad),
 * summing broadcast axes away, and adding a gradient that covers only a
 * region of its input (fc__ag_gin_region).
 *
 * Determinism: every element of an accumulator receives its terms in one
 * fixed order that does not depend on the thread count. Threads only ever
 * split disjoint sets of destination elements (flat ranges of a same-shape
 * add, column blocks of a leading-axes sum, rows of an injective region);
 * a destination element that sums several source elements (a broadcast
 * axis) is always summed by one thread in row order. */
#include <string.h>

#include "exec/kernels/binary.h"
#include "exec/kernels/copy.h"
#include "exec/kernels/rowwise.h"
#include "ag/tape.h"
#include "exec/iter.h"
#include "exec/parallel.h"

/* Work per thread below which a second thread costs more than it saves. */
#define ACC_GRAIN 32768
/* Columns per block of a leading-axes sum: their partial sums stay in
 * registers (or one stack line each) across the rows, so a row's adds are
 * independent of one another and pipeline; with blocks of one cache line
 * each row's add waited on the previous row's store (measured 5x slower
 * for a [1024, 512] f32 bias gradient, the GPT bench's fc1). */
#define COL_BLOCK 64

/* ---- kernels ------------------------------------------------------------------------ */

typedef struct acc_arg {
    fc_dtype dt;
} acc_arg;

/* d[i] += s[i] over one run; the dense case is a plain loop the compiler
 * vectorizes (no restrict: a rule may hand one fresh tensor to two inputs
 * that are the same node, and the second addition then reads what it
 * writes, element for element, which is well defined only without it). */
static void add_dense(fc_dtype dt, char *dst, const char *src, int64_t n) {
    if (dt == FC_F64) {
        double *d = (double *)dst;
        const double *s = (const double *)src;
        for (int64_t i = 0; i < n; i++)
            d[i] += s[i];
    } else {
        float *d = (float *)dst;
        const float *s = (const float *)src;
        for (int64_t i = 0; i < n; i++)
            d[i] += s[i];
    }
}

static void acc_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    acc_arg *a = arg;
    int64_t es = a->dt == FC_F64 ? 8 : 4;
    if (s[0] == es && s[1] == es) {
        add_dense(a->dt, p[0], p[1], n);
    } else if (a->dt == FC_F64) {
        for (int64_t i = 0; i < n; i++)
            *(double *)(p[0] + i * s[0]) += *(const double *)(p[1] + i * s[1]);
    } else {
        for (int64_t i = 0; i < n; i++)
            *(float *)(p[0] + i * s[0]) += *(const float *)(p[1] + i * s[1]);
    }
}

typedef struct flat_job {
    fc_dtype dt;
    char *d;
    const char *s;
    int64_t es;
} flat_job;

static void flat_slice(void *arg, int64_t b, int64_t e) {
    flat_job *j = arg;
    add_dense(j->dt, j->d + b * j->es, j->s + b * j->es, e - b);
}

/* Sum of the leading axes: d[c] += s[r][c] for r = 0, 1, ... in order (the
 * strided iterator's order, so the bits are the same as its), split across
 * threads by blocks of columns. */
typedef struct colsum_job {
    fc_dtype dt;
    char *d;
    const char *s;
    int64_t rows, cols;
} colsum_job;

/* d[0, w) += rows r = 0, 1, ... of s (ld apart), each column in row order:
 * the same additions, in the same order, as a row-by-row walk. A full
 * block keeps its sums in a local array the compiler holds in vector
 * registers or stack lines; a partial one walks row by row. */
#define COLSUM_BODY(T)                                                                             \
    FC__RW_INLINE void colsum_body_##T(T *d, const T *s, int64_t rows, int64_t ld, int64_t w) {    \
        if (w != COL_BLOCK) {                                                                      \
            for (int64_t r = 0; r < rows; r++)                                                     \
                for (int64_t i = 0; i < w; i++)                                                    \
                    d[i] += s[r * ld + i];                                                         \
            return;                                                                                \
        }                                                                                          \
        T acc[COL_BLOCK];                                                                          \
        for (int i = 0; i < COL_BLOCK; i++)                                                        \
            acc[i] = d[i];                                                                         \
        for (int64_t r = 0; r < rows; r++) {                                                       \
            const T *row = s + r * ld;                                                             \
            for (int i = 0; i < COL_BLOCK; i++)                                                    \
                acc[i] += row[i];                                                                  \
        }                                                                                          \
        for (int i = 0; i < COL_BLOCK; i++)                                                        \
            d[i] = acc[i];                                                                         \
    }
COLSUM_BODY(float)
COLSUM_BODY(double)

typedef void (*colsum_f32_fn)(float *, const float *, int64_t, int64_t, int64_t);
static void colsum_f32(float *d, const float *s, int64_t rows, int64_t ld, int64_t w) {
    colsum_body_float(d, s, rows, ld, w);
}
#ifdef FC__RW_X86
/* the same body with wider vectors: only the speed differs */
FC__RW_AVX2 static void colsum_f32_avx2(float *d, const float *s, int64_t rows, int64_t ld,
                                        int64_t w) {
    colsum_body_float(d, s, rows, ld, w);
}
FC__RW_AVX512 static void colsum_f32_avx512(float *d, const float *s, int64_t rows, int64_t ld,
                                            int64_t w) {
    colsum_body_float(d, s, rows, ld, w);
}
#endif

static colsum_f32_fn colsum_f32_pick(void) {
#ifdef FC__RW_X86
    if (fc__rw_avx512()) return colsum_f32_avx512;
    if (fc__rw_avx2()) return colsum_f32_avx2;
#endif
    return colsum_f32;
}

static void colsum_slice(void *arg, int64_t b, int64_t e) {
    colsum_job *j = arg;
    int64_t c0 = b * COL_BLOCK, c1 = e * COL_BLOCK < j->cols ? e * COL_BLOCK : j->cols;
    colsum_f32_fn f32 = j->dt == FC_F32 ? colsum_f32_pick() : NULL;
    for (int64_t c = c0; c < c1; c += COL_BLOCK) {
        int64_t w = c1 - c < COL_BLOCK ? c1 - c : COL_BLOCK;
        if (f32)
            f32((float *)j->d + c, (const float *)j->s + c, j->rows, j->cols, w);
        else
            colsum_body_double((double *)j->d + c, (const double *)j->s + c, j->rows, j->cols, w);
    }
}

/* Is dst's shape, leading 1s dropped, the trailing part of src's shape? Then
 * src is rows of dst's element count, in order. */
static bool is_trailing(const fc_raw *dst, const fc_raw *src) {
    int lead = 0;
    while (lead < dst->rank && dst->shape[lead] == 1)
        lead++;
    int tail = dst->rank - lead;
    return tail <= src->rank &&
           fc__shape_equal(dst->shape + lead, tail, src->shape + (src->rank - tail), tail);
}

/* dst += src over the broadcast of their shapes (the caller checked that
 * they broadcast and that both hold dst's dtype, f32 or f64): axes dst has
 * as 1 (or lacks) sum src, axes src has as 1 (or lacks) repeat it. dst
 * never maps two positions of its shape to one element (a dense
 * accumulator, or a region fc__ag_region_check passed), so threads may
 * split it; a walk that sums into broadcast positions runs on one thread,
 * in order. */
void fc__ag_acc_raw(fc_ctx *ctx, const fc_raw *dst, const fc_raw *src) {
    fc_dtype dt = dst->dtype;
    int64_t es = (int64_t)fc_dtype_size(dt);
    bool dense = fc__contiguous(dst) && fc__contiguous(src);
    int64_t nd = fc__numel(dst), ns = fc__numel(src);
    if (dense && nd == ns && fc__shape_equal(dst->shape, dst->rank, src->shape, src->rank)) {
        flat_job j = {dt, fc__raw_base(dst), fc__raw_base(src), es};
        fc__parallel_for(ctx, nd, ACC_GRAIN, flat_slice, &j);
        return;
    }
    if (dense && nd > 0 && ns > nd && is_trailing(dst, src)) {
        colsum_job j = {dt, fc__raw_base(dst), fc__raw_base(src), ns / nd, nd};
        int64_t blocks = (nd + COL_BLOCK - 1) / COL_BLOCK;
        int64_t per_block = j.rows * COL_BLOCK;
        fc__parallel_for(ctx, blocks, per_block >= ACC_GRAIN ? 1 : ACC_GRAIN / per_block,
                         colsum_slice, &j);
        return;
    }
    int64_t shape[FC_MAX_RANK];
    int r;
    fc__shape_broadcast(dst->shape, dst->rank, src->shape, src->rank, shape, &r);
    bool sums = !fc__shape_equal(shape, r, dst->shape, dst->rank);
    fc__iter it;
    fc_raw *ops[2] = {(fc_raw *)dst, (fc_raw *)src};
    fc__iter_init(&it, shape, r, 2, ops);
    acc_arg a = {dt};
    fc__iter_run(sums ? NULL : ctx, &it, acc_inner, &a);
}

/* ---- accumulators ---------------------------------------------------------------------- */

/* Every element of t (contiguous, f32 or f64) = the value at v, bit for bit. */
static void fill_value(fc_tensor *t, const char *v) {
    int64_t n = fc__numel(&t->raw);
    if (t->raw.dtype == FC_F64) {
        double x = *(const double *)v, *d = (double *)fc__raw_base(&t->raw);
        for (int64_t i = 0; i < n; i++)
            d[i] = x;
    } else {
        float x = *(const float *)v, *d = (float *)fc__raw_base(&t->raw);
        for (int64_t i = 0; i < n; i++)
            d[i] = x;
    }
}

/* g is read as broadcast to the common shape of g and the input, then
 * summed down to the input's shape: a gradient at the op's (broadcast)
 * output shape sums, a smaller one ([1] for a zero gradient) repeats. */
fc_tensor *fc__ag_reduce_to(fc_ctx *ctx, fc_tensor *g, const int64_t *shape, int rank) {
    if (fc__shape_equal(g->raw.shape, g->raw.rank, shape, rank)) return g;
    int64_t common[FC_MAX_RANK];
    int cr;
    if (fc__shape_broadcast(g->raw.shape, g->raw.rank, shape, rank, common, &cr) != FC_OK) {
        char a[160], b[160];
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                 "backward: a gradient of shape %s does not fit an input of shape %s",
                 fc__shape_str(g->raw.shape, g->raw.rank, a, (int)sizeof a),
                 fc__shape_str(shape, rank, b, (int)sizeof b));
        return NULL;
    }
    fc_tensor *out = fc__tensor_new(ctx, "backward", g->raw.dtype, shape, rank);
    if (!out) return NULL;
    fc_dtype dt = g->raw.dtype;
    if ((dt == FC_F32 || dt == FC_F64) && fc__shape_equal(common, cr, shape, rank) &&
        fc__single_value(&g->raw)) {
        /* nothing sums: one value repeated (a full reduction's gradient),
         * copied as it is */
        fill_value(out, fc__raw_base(&g->raw));
        return out;
    }
    memset(fc__raw_base(&out->raw), 0, fc_tensor_nbytes(out));
    fc__ag_acc_raw(ctx, &out->raw, &g->raw);
    return out;
}

/* Nobody else can see t's storage: one handle reference, one buffer
 * reference, writable. Only such a target is added into in place. */
static bool exclusive(const fc_tensor *t) {
    return atomic_load(&((fc_tensor *)t)->refs) == 1 && !fc__buffer_is_read_only(t->raw.buf) &&
           fc__buffer_is_unique(t->raw.buf);
}

/* Can r hold a sum as it is: plain contiguous layout, the gradient dtype,
 * and a gradient rather than an op's output on the tape? */
static bool dense_gradient(const fc_tensor *r, fc_dtype gdt) {
    return r->raw.dtype == gdt && !r->node && r->raw.offset == 0 && fc__contiguous(&r->raw);
}

/* Can r become a private accumulation target as it is? */
static bool takeable(const fc_tensor *r, fc_dtype gdt) {
    return dense_gradient(r, gdt) && exclusive(r);
}

/* A private contiguous copy of r (gradient dtype, scope-owned). A single
 * value seen at every position (a sum's gradient, expanded with stride 0)
 * is written by a fill, with no strided walk. */
static fc_tensor *own_copy(fc_ctx *ctx, fc_tensor *r) {
    if (!fc__single_value(&r->raw)) return fc__copy_clone(ctx, "backward", r);
    fc_tensor *c = fc__tensor_new(ctx, "backward", r->raw.dtype, r->raw.shape, r->raw.rank);
    if (c) fill_value(c, fc__raw_base(&r->raw));
    return c;
}

/* t + c in a new scope-owned tensor of t's shape (c: any layout of that
 * shape, t's dtype), by the binary kernel: each element is t[i] + c[i], as
 * the in-place add computes it. */
static fc_tensor *sum_fresh(fc_ctx *ctx, fc_tensor *t, fc_tensor *c) {
    fc_tensor *out = fc__tensor_new(ctx, "backward", t->raw.dtype, t->raw.shape, t->raw.rank);
    if (out) fc__binary_run(ctx, FC__BIN_ADD, &out->raw, &t->raw, &c->raw);
    return out;
}

/* node: the target is a node's accumulator (fc__ag_add_into_node). */
static fc_status add_into(fc_ctx *ctx, fc_tensor **target, fc_tensor *g, fc_dtype gdt,
                          const int64_t *shape, int rank, bool node) {
    fc_tensor *r = fc__ag_reduce_to(ctx, g, shape, rank);
    if (!r) return fc_ctx_status(ctx);
    if (!*target) {
        bool as_is = node ? dense_gradient(r, gdt) : takeable(r, gdt);
        fc_tensor *c = as_is                 ? r
                       : r->raw.dtype == gdt ? own_copy(ctx, r)
                                             : fc__copy_cast(ctx, "backward", r, gdt);
        if (!c) return fc_ctx_status(ctx);
        *target = fc_retain(c);
        return FC_OK;
    }
    fc_tensor *c = r->raw.dtype == gdt ? r : fc__copy_cast(ctx, "backward", r, gdt);
    if (!c) return fc_ctx_status(ctx);
    if (node && !exclusive(*target)) {
        fc_tensor *sum = sum_fresh(ctx, *target, c);
        if (!sum) return fc_ctx_status(ctx);
        fc_tensor *old = *target;
        *target = fc_retain(sum);
        fc_release(old);
        return FC_OK;
    }
    fc__buffer_bump_generation((*target)->raw.buf);
    fc__ag_acc_raw(ctx, &(*target)->raw, &c->raw);
    return FC_OK;
}

fc_status fc__ag_add_into(fc_ctx *ctx, fc_tensor **target, fc_tensor *g, fc_dtype gdt,
                          const int64_t *shape, int rank) {
    return add_into(ctx, target, g, gdt, shape, rank, false);
}

fc_status fc__ag_add_into_node(fc_ctx *ctx, fc_tensor **target, fc_tensor *g, fc_dtype gdt,
                               const int64_t *shape, int rank) {
    return add_into(ctx, target, g, gdt, shape, rank, true);
}

fc_tensor *fc__ag_private(fc_ctx *ctx, fc_tensor *t) {
    if (exclusive(t)) return fc_retain(t);
    fc_tensor *c = fc__copy_clone(ctx, "backward", t);
    return c ? fc_retain(c) : NULL;
}

/* ---- region gradients ------------------------------------------------------------------ */

fc_status fc__ag_gin_region(fc_ctx *ctx, fc_node *node, int k, const int64_t *strides,
                            int64_t offset) {
    if (!node->regions || k < 0 || k >= node->n_in)
        return fc__fail(ctx, FC_ERR_STATE,
                        "backward of %s: a gradient region for input %d outside its rule", node->op,
                        k);
    fc__ag_region *r = &node->regions[k];
    memcpy(r->strides, strides, sizeof(int64_t) * FC_MAX_RANK);
    r->offset = offset;
    r->on = true;
    return FC_OK;
}

/* Does the region place every element of a gradient of shape g inside an
 * input of n elements, no two on one position? Sufficient test: with the
 * axes of size > 1 sorted by stride, each stride exceeds the farthest
 * reach of the axes before it (windows, strided slices and permutations of
 * them pass). */
fc_status fc__ag_region_check(fc_ctx *ctx, const fc_node *node, int k, const fc__ag_region *r,
                              const fc_tensor *g) {
    const fc__ag_input *in = &node->in[k];
    int64_t n = fc__shape_product(in->shape, in->rank);
    int64_t st[FC_MAX_RANK], sz[FC_MAX_RANK], reach = 0;
    int m = 0;
    bool ok = r->offset >= 0;
    for (int d = 0; d < g->raw.rank && ok; d++) {
        if (g->raw.shape[d] == 0) return FC_OK; /* an empty gradient places nothing */
        if (g->raw.shape[d] == 1) continue;
        ok = r->strides[d] > 0;
        int i = m++;
        while (i > 0 && st[i - 1] > r->strides[d]) { /* insertion sort, rank <= 8 */
            st[i] = st[i - 1];
            sz[i] = sz[i - 1];
            i--;
        }
        st[i] = r->strides[d];
        sz[i] = g->raw.shape[d];
    }
    for (int i = 0; i < m && ok; i++) {
        ok = st[i] > reach;
        reach += (sz[i] - 1) * st[i];
    }
    if (ok && r->offset + reach < n) return FC_OK;
    char a[160], b[160];
    return fc__fail(ctx, FC_ERR_STATE,
                    "backward of %s (tape node %lld): the gradient region (offset %lld) of input "
                    "%d for a gradient %s is not a window of the input's shape %s",
                    node->op, (long long)node->id, (long long)r->offset, k,
                    fc__desc(g, a, (int)sizeof a),
                    fc__shape_str(in->shape, in->rank, b, (int)sizeof b));
}

fc_status fc__ag_add_region(fc_ctx *ctx, fc_tensor **target, fc_tensor *g, fc_dtype gdt,
                            const int64_t *shape, int rank, const fc__ag_region *reg) {
    fc_tensor *c = g->raw.dtype == gdt ? g : fc__copy_cast(ctx, "backward", g, gdt);
    if (!c) return fc_ctx_status(ctx);
    fc_tensor *dst = *target;
    bool fresh = !dst;
    if (fresh || dst->raw.offset != 0 || !fc__raw_is_contiguous(&dst->raw) || !exclusive(dst)) {
        /* a zeroed accumulator (or, for a shared target or one of another
         * layout, which the engine never makes, a zeroed temporary added as
         * a whole) */
        dst = fc_zeros(ctx, gdt, shape, rank);
        if (!dst) return fc_ctx_status(ctx);
    }
    fc_raw v = dst->raw; /* borrowed: not released */
    v.rank = c->raw.rank;
    memcpy(v.shape, c->raw.shape, sizeof v.shape);
    memcpy(v.strides, reg->strides, sizeof v.strides);
    v.offset = dst->raw.offset + reg->offset;
    if (!fresh && dst == *target) fc__buffer_bump_generation(dst->raw.buf);
    fc__ag_acc_raw(ctx, &v, &c->raw);
    if (fresh) {
        *target = fc_retain(dst);
        return FC_OK;
    }
    return dst == *target ? FC_OK : fc__ag_add_into_node(ctx, target, dst, gdt, shape, rank);
}
