/* SPDX-License-Identifier: MIT */
/* iter.c - strided multi-operand iteration for elementwise kernels.
 *
 * Every operand is viewed over one common shape with byte strides (0 where
 * it broadcasts). Adjacent axes merge when every operand steps through them
 * as one (stride[i] == stride[i+1] * shape[i+1]); size-1 axes vanish. The
 * outer axes are split across the team; each slice places its odometer with
 * one division and then only increments. */
#include <string.h>

#include "exec/iter.h"
#include "exec/parallel.h"
#include "exec/tensor.h"

void fc__bcast_strides(const fc_raw *t, const int64_t *shape, int rank, int64_t *out) {
    int64_t es = (int64_t)fc_dtype_size(t->dtype);
    for (int i = 0; i < rank; i++) {
        int j = i - (rank - t->rank);
        out[i] = (j < 0 || t->shape[j] == 1) ? 0 : t->strides[j] * es;
        (void)shape;
    }
}

void fc__iter_init(fc__iter *it, const int64_t *shape, int rank, int nops, fc_raw *const *ops) {
    int64_t st[FC__ITER_MAX][FC_MAX_RANK];
    for (int k = 0; k < nops; k++) {
        fc__bcast_strides(ops[k], shape, rank, st[k]);
        it->base[k] = fc__raw_base(ops[k]);
    }
    it->nops = nops;
    int r = 0;
    for (int i = 0; i < rank; i++) {
        if (shape[i] == 1) continue;
        if (r > 0) {
            bool merge = true;
            for (int k = 0; k < nops; k++)
                if (it->strides[k][r - 1] != st[k][i] * shape[i]) merge = false;
            if (merge) {
                it->shape[r - 1] *= shape[i];
                for (int k = 0; k < nops; k++) it->strides[k][r - 1] = st[k][i];
                continue;
            }
        }
        it->shape[r] = shape[i];
        for (int k = 0; k < nops; k++) it->strides[k][r] = st[k][i];
        r++;
    }
    if (r == 0) { /* a single element */
        it->shape[0] = 1;
        for (int k = 0; k < nops; k++) it->strides[k][0] = 0;
        r = 1;
    }
    it->rank = r;
}

typedef struct iter_job {
    const fc__iter *it;
    fc__inner_fn fn;
    void *arg;
} iter_job;

static void iter_slice(void *p, int64_t begin, int64_t end) {
    iter_job *j = p;
    const fc__iter *it = j->it;
    int r = it->rank, nops = it->nops;
    int64_t inner = it->shape[r - 1];
    int64_t idx[FC_MAX_RANK] = {0};
    char *ptr[FC__ITER_MAX];
    int64_t istr[FC__ITER_MAX];
    /* place the odometer at row `begin` (one division per axis, once) */
    int64_t q = begin;
    for (int i = r - 2; i >= 0; i--) {
        idx[i] = q % it->shape[i];
        q /= it->shape[i];
    }
    for (int k = 0; k < nops; k++) {
        ptr[k] = it->base[k];
        for (int i = 0; i < r - 1; i++) ptr[k] += idx[i] * it->strides[k][i];
        istr[k] = it->strides[k][r - 1];
    }
    for (int64_t row = begin; row < end; row++) {
        j->fn(j->arg, ptr, istr, inner);
        for (int i = r - 2; i >= 0; i--) {
            for (int k = 0; k < nops; k++) ptr[k] += it->strides[k][i];
            if (++idx[i] < it->shape[i]) break;
            for (int k = 0; k < nops; k++) ptr[k] -= it->strides[k][i] * it->shape[i];
            idx[i] = 0;
        }
    }
}

/* A fully coalesced walk is one long run: split the run itself. */
static void flat_slice(void *p, int64_t begin, int64_t end) {
    iter_job *j = p;
    const fc__iter *it = j->it;
    char *ptr[FC__ITER_MAX];
    int64_t istr[FC__ITER_MAX];
    for (int k = 0; k < it->nops; k++) {
        istr[k] = it->strides[k][0];
        ptr[k] = it->base[k] + begin * istr[k];
    }
    j->fn(j->arg, ptr, istr, end - begin);
}

void fc__iter_run(fc_ctx *ctx, const fc__iter *it, fc__inner_fn fn, void *arg) {
    if (it->rank == 1) {
        iter_job j = {it, fn, arg};
        fc__parallel_for(ctx, it->shape[0], 32768, flat_slice, &j);
        return;
    }
    int64_t rows = fc__shape_product(it->shape, it->rank - 1);
    int64_t inner = it->shape[it->rank - 1];
    /* aim for slices of at least ~32K elements so threads pay off */
    int64_t grain = inner >= 32768 ? 1 : 32768 / inner;
    iter_job j = {it, fn, arg};
    fc__parallel_for(ctx, rows, grain, iter_slice, &j);
}
