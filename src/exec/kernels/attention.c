/* SPDX-License-Identifier: MIT */
/* attention.c - fused scaled dot-product attention (the flash-attention
 * method), forward and backward; the shapes are in attention.h, the tile
 * loops in attention_body.h.
 *
 * Forward, per (b, h, query tile of BR rows): the tile's queries are
 * packed once; for each key tile it may see (causality stops the loop at
 * the diagonal) the keys are packed transposed and the values as rows, the
 * scores computed into a BR x BC tile, and an online softmax folds them
 * in: per row a running max m and sum l, the output accumulator rescaled
 * by exp(m_old - m_new) whenever the max grows. At the end out = acc / l
 * and lse = m + log(l) is kept for the backward. Memory beyond the
 * output: B * Hq * T values of lse, plus one scratch block per thread
 * (a few tiles: about 100 KB in f32 for D = 64).
 *
 * Backward (FlashAttention-2's equations): with P = exp(S - lse)
 * recomputed per tile and Di = sum_c dO_ic O_ic,
 *     dV = P^T dO,  dP = dO V^T,  dS = P * (dP - Di),
 *     dQ = scale dS K,  dK = scale dS^T Q,  dmask = dS.
 * Two passes keep every gradient element owned by one item: one over
 * (b, kv head, key tile) sums dK and dV over the group's query heads and
 * all query tiles; one over (b, h, query tile) sums dQ over key tiles.
 * Scores are recomputed twice (once per pass) instead of accumulating
 * dQ with atomics, whose order, and so whose bits, would depend on the
 * threads.
 *
 * SIMD: the f32 loops are compiled three times (baseline, AVX2+FMA,
 * AVX-512) and picked at run time by the level of core/cpu.h; the f64
 * loops once (they serve gradcheck). Exp rows use rowwise.h's vectorized
 * exp in f32 and libm in f64. */
#include "exec/kernels/attention.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "exec/kernels/pointwise.h"
#include "exec/kernels/rowwise.h"
#include "exec/parallel.h"

/* FC__SIMD (pointwise.h) for the elementwise loops over a tile's rows, and
 * a max reduction: the row max picks the largest value whatever the order
 * (a NaN score gives a NaN row either way, through exp). */
#ifdef FUCINA_HAVE_OPENMP
#define AT_PRAGMA(x) _Pragma(#x)
#define AT_SIMD_MAX(v) AT_PRAGMA(omp simd reduction(max : v))
#else
#define AT_SIMD_MAX(v)
#endif

#define BR 64 /* query rows per tile */
#define BC 64 /* keys per tile (the fixed width of the score rows) */

typedef struct at_view {
    const char *p;
    int64_t s[4]; /* element strides */
} at_view;

typedef enum at_pass { AT_PASS_FORWARD, AT_PASS_ROWDOT, AT_PASS_DKV, AT_PASS_DQ } at_pass;

typedef struct at_job {
    at_pass pass;
    int64_t B, Hq, Hkv, G, T, S, D, Dv, nqt, nkt;
    int64_t Dp, Dvp; /* D and Dv rounded up to a multiple of 16: the packed rows */
    bool causal, wide;
    double scale;
    at_view q, k, v, mask, out, o, dout; /* mask.p NULL: none */
    char *lse, *dvec, *dq, *dk, *dv, *dmask;
    char *scratch;
    int64_t ws_elems; /* per slice */
    atomic_int next_slice;
} at_job;

static double exprow_f64(const double *s, double *p, int64_t n, double m) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        p[i] = exp(s[i] - m);
        sum += p[i];
    }
    return sum;
}

/* The instances. Register blocks: rows x 4 vectors of accumulators plus 4
 * of B must fit the target's registers (16 xmm/ymm, 32 zmm). */
#define AT_T double
#define AT_FN(x) x##_f64
#define AT_ATTR
#define AT_EXPROW exprow_f64
#define AT_VB 64
#define AT_RB 1
#include "exec/kernels/attention_body.h"
#undef AT_T
#undef AT_FN
#undef AT_ATTR
#undef AT_EXPROW
#undef AT_VB
#undef AT_RB

#define AT_T float
#define AT_EXPROW fc__rw_exp
#define AT_FN(x) x##_f32
#define AT_ATTR
#define AT_VB 32
#define AT_RB 1
#include "exec/kernels/attention_body.h"
#undef AT_FN
#undef AT_ATTR
#undef AT_RB
#ifdef FC__RW_X86
#define AT_FN(x) x##_f32avx2
#define AT_ATTR FC__RW_AVX2
#define AT_RB 2
#include "exec/kernels/attention_body.h"
#undef AT_FN
#undef AT_ATTR
#undef AT_VB
#undef AT_RB
#define AT_FN(x) x##_f32avx512
#define AT_ATTR FC__RW_AVX512
#define AT_VB 64
#define AT_RB 4
#include "exec/kernels/attention_body.h"
#undef AT_FN
#undef AT_ATTR
#undef AT_RB
#endif
#undef AT_VB
#undef AT_T
#undef AT_EXPROW

static void team_range(void *arg, int64_t begin, int64_t end) {
    at_job *j = arg;
    if (j->wide) {
        run_items_f64(j, begin, end);
        return;
    }
#ifdef FC__RW_X86
    if (fc__rw_avx512()) {
        run_items_f32avx512(j, begin, end);
        return;
    }
    if (fc__rw_avx2()) {
        run_items_f32avx2(j, begin, end);
        return;
    }
#endif
    run_items_f32(j, begin, end);
}

static at_view view_of(const fc_raw *r) {
    at_view v = {fc__raw_base(r), {r->strides[0], r->strides[1], r->strides[2], r->strides[3]}};
    return v;
}

static void job_init(at_job *j, const fc__attn_in *in) {
    memset(j, 0, sizeof *j);
    const int64_t *qs = in->q->shape, *vs = in->v->shape;
    j->B = qs[0];
    j->Hq = qs[1];
    j->T = qs[2];
    j->D = qs[3];
    j->Hkv = in->k->shape[1];
    j->S = in->k->shape[2];
    j->Dv = vs[3];
    j->Dp = (j->D + 15) / 16 * 16;
    j->Dvp = (j->Dv + 15) / 16 * 16;
    j->G = j->Hq / j->Hkv;
    j->nqt = (j->T + BR - 1) / BR;
    j->nkt = (j->S + BC - 1) / BC;
    j->causal = in->causal;
    j->scale = in->scale;
    j->wide = in->q->dtype == FC_F64;
    j->q = view_of(in->q);
    j->k = view_of(in->k);
    j->v = view_of(in->v);
    if (in->mask) j->mask = view_of(in->mask);
}

/* Runs one pass over items, with per-slice scratch of ws_elems (0: none). */
static fc_status run_pass(fc_ctx *ctx, const char *op, at_job *j, at_pass pass, int64_t items,
                          int64_t ws_elems) {
    int64_t nt = ctx->threads > 0 ? ctx->threads : 1;
    int64_t slices = nt < items ? nt : items;
    fc_tensor *scratch = NULL;
    if (ws_elems > 0) {
        int64_t n = slices * ws_elems;
        scratch = fc__tensor_new(ctx, op, j->wide ? FC_F64 : FC_F32, &n, 1);
        if (!scratch) return fc__failed(ctx);
    }
    j->pass = pass;
    j->scratch = scratch ? fc__raw_base(&scratch->raw) : NULL;
    j->ws_elems = ws_elems;
    atomic_init(&j->next_slice, 0);
    fc__parallel_for(ctx, items, pass == AT_PASS_ROWDOT ? 256 : 1, team_range, j);
    fc_release(scratch);
    return FC_OK;
}

fc_status fc__attention_forward(fc_ctx *ctx, const char *op, const fc__attn_in *in, fc_raw *out,
                                fc_raw *lse) {
    at_job j;
    job_init(&j, in);
    j.out = view_of(out);
    j.lse = fc__raw_base(lse);
    int64_t ws = BR * j.Dp + j.D * BC + BC * j.Dvp + BR * BC + BR * j.Dvp + 2 * BR;
    return run_pass(ctx, op, &j, AT_PASS_FORWARD, j.B * j.Hq * j.nqt, ws);
}

fc_status fc__attention_backward(fc_ctx *ctx, const char *op, const fc__attn_in *in,
                                 const fc_raw *out, const fc_raw *lse, const fc_raw *dout,
                                 fc_raw *dq, fc_raw *dk, fc_raw *dv, fc_raw *dmask) {
    at_job j;
    job_init(&j, in);
    j.o = view_of(out);
    j.dout = view_of(dout);
    j.lse = fc__raw_base(lse);
    int64_t rows = j.B * j.Hq * j.T;
    fc_tensor *dvec = fc__tensor_new(ctx, op, in->q->dtype, &rows, 1);
    if (!dvec) return fc__failed(ctx);
    j.dvec = fc__raw_base(&dvec->raw);
    fc_status st = run_pass(ctx, op, &j, AT_PASS_ROWDOT, rows, 0);
    int64_t D = j.D, Dv = j.Dv, Dp = j.Dp, Dvp = j.Dvp;
    if (st == FC_OK && dk) {
        j.dk = fc__raw_base(dk);
        j.dv = fc__raw_base(dv);
        int64_t ws =
            D * BC + Dv * BC + BC * Dp + BC * Dvp + BR * Dp + BR * Dvp + 2 * BR * BC + 2 * BR;
        st = run_pass(ctx, op, &j, AT_PASS_DKV, j.B * j.Hkv * j.nkt, ws);
    }
    if (st == FC_OK && dq) {
        j.dq = fc__raw_base(dq);
        j.dmask = dmask ? fc__raw_base(dmask) : NULL;
        int64_t ws = 2 * BR * Dp + BR * Dvp + D * BC + Dv * BC + BC * Dp + 2 * BR * BC + 2 * BR;
        st = run_pass(ctx, op, &j, AT_PASS_DQ, j.B * j.Hq * j.nqt, ws);
    }
    fc_release(dvec);
    return st;
}
