/* SPDX-License-Identifier: MIT */
/* exec/kernels/sort.c - the stable sort kernel of sort, argsort and topk.
 *
 * x is read once into a key array (float dtypes as double, integer ones
 * and bool as int64: both conversions are exact, so the order is x's own)
 * in row-major order, viewed as [O, D, I] around the axis. Each fiber (one
 * (o, i) pair, D keys at stride I) sorts a permutation of 0..D-1 with a
 * top-down merge sort that takes from the right run only when its head
 * strictly comes first: that is what makes it stable, which a quicksort
 * (qsort) is not. Fibers are independent and run in parallel, each on its
 * own part of one scratch buffer, so the result never depends on the
 * thread count. The values are copied from x's elements (not converted
 * back from the keys), bit for bit. */
#include <math.h>
#include <string.h>

#include "exec/kernels/sort.h"
#include "exec/parallel.h"

typedef struct sort_job {
    const double *fk;  /* float keys, or NULL */
    const int64_t *ik; /* integer keys when fk is NULL */
    int64_t *perm;     /* D per fiber, then D more as the merge buffer */
    int64_t D, I, k;
    bool desc, sorted;
    const char *src; /* x's elements, contiguous */
    size_t es;
    char *vals; /* NULL for argsort */
    int64_t *idx;
} sort_job;

/* Does the element at offset a come strictly before the one at offset b? */
static inline bool before(const sort_job *j, int64_t a, int64_t b) {
    if (j->fk) {
        double x = j->fk[a], y = j->fk[b];
        bool nx = isnan(x), ny = isnan(y);
        if (j->desc) return x > y || (nx && !ny);
        return x < y || (ny && !nx);
    }
    return j->desc ? j->ik[a] > j->ik[b] : j->ik[a] < j->ik[b];
}

/* Sorts p[0..n) (positions along the fiber at base, stride I); tmp has n
 * slots. by_pos sorts by the positions themselves (all distinct). */
static void merge_sort(const sort_job *j, int64_t base, int64_t *p, int64_t *tmp, int64_t n,
                       bool by_pos) {
    if (n < 2) return;
    int64_t h = n / 2;
    merge_sort(j, base, p, tmp, h, by_pos);
    merge_sort(j, base, p + h, tmp, n - h, by_pos);
    int64_t a = 0, b = h, o = 0;
    while (a < h && b < n) {
        bool right = by_pos ? p[b] < p[a] : before(j, base + p[b] * j->I, base + p[a] * j->I);
        tmp[o++] = right ? p[b++] : p[a++];
    }
    while (a < h)
        tmp[o++] = p[a++];
    while (b < n)
        tmp[o++] = p[b++];
    memcpy(p, tmp, sizeof(int64_t) * (size_t)n);
}

static void sort_fibers(void *arg, int64_t f0, int64_t f1) {
    const sort_job *j = arg;
    for (int64_t f = f0; f < f1; f++) {
        int64_t o = f / j->I, i = f % j->I, base = o * j->D * j->I + i;
        int64_t *p = j->perm + 2 * f * j->D, *tmp = p + j->D;
        for (int64_t d = 0; d < j->D; d++)
            p[d] = d;
        merge_sort(j, base, p, tmp, j->D, false);
        if (!j->sorted) merge_sort(j, base, p, tmp, j->k, true);
        int64_t ob = o * j->k * j->I + i;
        for (int64_t d = 0; d < j->k; d++) {
            j->idx[ob + d * j->I] = p[d];
            if (j->vals)
                memcpy(j->vals + (size_t)(ob + d * j->I) * j->es,
                       j->src + (size_t)(base + p[d] * j->I) * j->es, j->es);
        }
    }
}

bool fc__sort_run(fc_ctx *ctx, const char *op, const fc_tensor *x, int axis, int64_t k,
                  bool descending, bool sorted, fc_tensor **values, fc_tensor **indices) {
    const fc_raw *r = &x->raw;
    fc_dtype dt = r->dtype;
    int64_t shape[FC_MAX_RANK], n = fc__numel(r), D = r->shape[axis], I = 1;
    for (int d = 0; d < r->rank; d++)
        shape[d] = d == axis ? k : r->shape[d];
    for (int d = axis + 1; d < r->rank; d++)
        I *= r->shape[d];
    *indices = NULL;
    if (values) *values = NULL;
    fc_tensor *idx = fc__tensor_new(ctx, op, FC_I64, shape, r->rank);
    fc_tensor *vals = idx && values ? fc__tensor_new(ctx, op, dt, shape, r->rank) : NULL;
    if (!idx || (values && !vals)) goto fail;
    bool contiguous = fc__contiguous(r);
    size_t es = fc_dtype_size(dt);
    /* keys (8n), permutations and merge buffers (16n), a contiguous copy */
    size_t need = (size_t)n * 24 + (contiguous ? 0 : (size_t)n * es);
    fc_buffer *b = fc__ctx_buffer(ctx, need);
    if (!b) {
        char d[160];
        fc__fail(ctx, FC_ERR_OOM, "%s: out of memory for the sort scratch of %s", op,
                 fc__desc(x, d, (int)sizeof d));
        goto fail;
    }
    char *base = b->data;
    const char *src = fc__raw_base(r);
    if (!contiguous) {
        char *c = base + (size_t)n * 24;
        fc__raw_copy_to(r, c, (size_t)n * es);
        src = c;
    }
    bool fl = fc_dtype_is_float(dt) || fc_dtype_is_f8(dt);
    fc_convert_row(dt, src, fl ? FC_F64 : FC_I64, base, (size_t)n);
    sort_job j = {fl ? (const double *)(void *)base : NULL,
                  fl ? NULL : (const int64_t *)(void *)base,
                  (int64_t *)(void *)(base + (size_t)n * 8),
                  D,
                  I,
                  k,
                  descending,
                  sorted,
                  src,
                  es,
                  vals ? (char *)fc__raw_base(&vals->raw) : NULL,
                  (int64_t *)fc__raw_base(&idx->raw)};
    int64_t fibers = n / D;
    fc__parallel_for(ctx, fibers, D >= 4096 ? 1 : 4096 / D, sort_fibers, &j);
    fc__buffer_release(b);
    *indices = idx;
    if (values) *values = vals;
    return true;
fail:
    if (vals) fc_release(vals);
    if (idx) fc_release(idx);
    return false;
}
