/* SPDX-License-Identifier: MIT */
/* pool.c - 2-d max, average and adaptive average pooling, forward and
 * backward (the ops and their rules are in src/ops/pool.c).
 *
 * Shapes: x [P, H, W] (P planes: every leading index), y [P, OH, OW].
 *
 * Windows are separable: output (i, j) reads the rows of window i along H
 * and the columns of window j along W. Before the loops each axis gets a
 * small table, per output index, of the first input index the window
 * touches, the number of taps inside the input and (AVG) the window's
 * extent counting padding, so the inner loops do no bounds tests and no
 * division:
 *   MAX       taps at base + k * dilation, base = i * stride - pad, k in
 *             [0, kernel), those inside [0, H);
 *   AVG       [max(base, 0), min(base + kernel, H)), extent
 *             min(base + kernel, H + pad) - base (PyTorch's pool_size, which
 *             ceil_mode can cut short);
 *   ADAPTIVE  [floor(i * H / OH), ceil((i + 1) * H / OH)).
 * The divisor of an AVG output is divisor_override, else the product of
 * the two extents (count_include_pad) or of the two tap counts; ADAPTIVE
 * divides by its tap counts.
 *
 * The compute dtype is f64 for f64 input and f32 otherwise (f16 and bf16
 * are converted first and the result converted back); sums run in double
 * as PyTorch's CPU kernels accumulate. The max comparison is PyTorch's
 * `v > m || isnan(v)` starting from -inf at the window's first tap: the
 * first maximum wins ties, a NaN propagates and the last NaN is the argmax.
 *
 * Threading: planes are split over the team (fc__parallel_for); every
 * output element, and in the backward every plane of dx, is computed by
 * one thread in a fixed order, so the bits do not depend on the thread
 * count. The backward scatters into a zeroed dx plane (max: to the argmax;
 * avg: over the window), which stays within the plane its thread owns. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/cpu.h"
#include "exec/kernels/copy.h"
#include "exec/kernels/pool.h"
#include "exec/parallel.h"

/* The generic bodies below take the compute dtype as an argument and are
 * inlined into one wrapper per dtype with a constant, so every dtype test
 * folds away and each wrapper is a plain typed loop. */
#define POOL_INLINE static inline __attribute__((always_inline))

#define POOL_GRAIN_WORK 65536 /* window reads per team slice, at least */

/* ---- axis tables ------------------------------------------------------------------------------
 */

/* Per output index along one axis: first input index, taps inside the
 * input, and (AVG) the extent counting padding. */
typedef struct axis_tab {
    int64_t *first, *taps, *span;
} axis_tab;

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; } /* a >= 0, b > 0 */

static void axis_fill(const fc__pool_geom *g, bool along_h, axis_tab t) {
    int64_t n_in = along_h ? g->ih : g->iw, n_out = along_h ? g->oh : g->ow;
    int64_t k = along_h ? g->kh : g->kw, s = along_h ? g->sh : g->sw;
    int64_t p = along_h ? g->ph : g->pw, d = along_h ? g->dh : g->dw;
    for (int64_t i = 0; i < n_out; i++) {
        int64_t base = i * s - p, lo, hi;
        switch (g->kind) {
        case FC__POOL_MAX: /* taps k0 <= k < k1 of base + k * d lie in [0, n_in) */
        {
            int64_t k0 = base < 0 ? ceil_div(-base, d) : 0;
            int64_t k1 = base >= n_in ? 0 : (n_in - 1 - base) / d + 1;
            k1 = k1 < k ? k1 : k;
            t.first[i] = base + k0 * d;
            t.taps[i] = k1 > k0 ? k1 - k0 : 0;
            t.span[i] = t.taps[i];
            break;
        }
        case FC__POOL_AVG:
            hi = base + k < n_in + p ? base + k : n_in + p;
            t.span[i] = hi - base;
            lo = base > 0 ? base : 0;
            hi = hi < n_in ? hi : n_in;
            t.first[i] = lo;
            t.taps[i] = hi > lo ? hi - lo : 0;
            break;
        default: /* ADAPTIVE: (i + 1) * n_in <= n_out * n_in, which the op checked */
            lo = i * n_in / n_out;
            hi = ceil_div((i + 1) * n_in, n_out);
            t.first[i] = lo;
            t.taps[i] = t.span[i] = hi - lo;
            break;
        }
    }
}

/* ---- element access ------------------------------------------------------------------------- */

POOL_INLINE double ld(fc_dtype ct, const void *p, int64_t i) {
    return ct == FC_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}
POOL_INLINE void st(fc_dtype ct, void *p, int64_t i, double v) {
    if (ct == FC_F32)
        ((float *)p)[i] = (float)v;
    else
        ((double *)p)[i] = v;
}
/* p[i] += v in the compute dtype's own arithmetic */
POOL_INLINE void add_at(fc_dtype ct, void *p, int64_t i, double v) {
    if (ct == FC_F32)
        ((float *)p)[i] += (float)v;
    else
        ((double *)p)[i] += v;
}

/* ---- forward -------------------------------------------------------------------------------- */

typedef struct pool_job {
    const fc__pool_geom *g;
    axis_tab h, w;
    const void *src; /* forward: x [P, ih, iw]; backward: gout [P, oh, ow] */
    void *dst;       /* forward: y [P, oh, ow]; backward: dx [P, ih, iw] */
    int64_t *idx;    /* MAX forward: argmax out; MAX backward: argmax in */
    const int64_t *cidx;
} pool_job;

POOL_INLINE double avg_divisor(const pool_job *j, int64_t oi, int64_t oj) {
    const fc__pool_geom *g = j->g;
    if (g->kind == FC__POOL_AVG && g->divisor > 0) return (double)g->divisor;
    if (g->kind == FC__POOL_AVG && g->count_include_pad)
        return (double)(j->h.span[oi] * j->w.span[oj]);
    return (double)(j->h.taps[oi] * j->w.taps[oj]);
}

/* The max of one window and its argmax (plane index; -1 for a window with
 * no tap). Two passes over the (cached) window instead of one with a
 * data-dependent branch per tap, which on real data mispredicts often:
 * the first is a branch-free max (a maxsd chain) that also notes a NaN,
 * the second finds the first tap equal to the max, or the last NaN, which
 * is the element PyTorch's `v > m || isnan(v)` scan ends on. */
POOL_INLINE double window_max(const pool_job *j, fc_dtype ct, const void *x, int64_t oi, int64_t oj,
                              int64_t *best) {
    const fc__pool_geom *g = j->g;
    const int64_t iw = g->iw, dh = g->dh, dw = g->dw;
    const int64_t h0 = j->h.first[oi], nh = j->h.taps[oi];
    const int64_t w0 = j->w.first[oj], nw = j->w.taps[oj];
    double m = -INFINITY;
    bool nan = false;
    for (int64_t th = 0, h = h0; th < nh; th++, h += dh)
        for (int64_t tw = 0, w = w0; tw < nw; tw++, w += dw) {
            double v = ld(ct, x, h * iw + w);
            m = v > m ? v : m;
            nan |= v != v;
        }
    *best = nh > 0 && nw > 0 ? h0 * iw + w0 : -1;
    for (int64_t th = 0, h = h0; th < nh; th++, h += dh)
        for (int64_t tw = 0, w = w0; tw < nw; tw++, w += dw) {
            double v = ld(ct, x, h * iw + w);
            if (nan ? v != v : v == m) {
                *best = h * iw + w;
                if (!nan) return m; /* the first maximum */
            }
        }
    return nan ? ld(ct, x, *best) : m; /* the NaN itself, payload and sign kept */
}

POOL_INLINE void max_plane(const pool_job *j, fc_dtype ct, int64_t p) {
    const fc__pool_geom *g = j->g;
    const int64_t yo = p * g->oh * g->ow;
    const char *x = (const char *)j->src + (size_t)(p * g->ih * g->iw) * fc_dtype_size(ct);
    for (int64_t oi = 0; oi < g->oh; oi++)
        for (int64_t oj = 0; oj < g->ow; oj++) {
            int64_t o = yo + oi * g->ow + oj;
            st(ct, j->dst, o, window_max(j, ct, x, oi, oj, &j->idx[o]));
        }
}

POOL_INLINE void avg_plane(const pool_job *j, fc_dtype ct, int64_t p) {
    const fc__pool_geom *g = j->g;
    const int64_t iw = g->iw, xo = p * g->ih * iw, yo = p * g->oh * g->ow;
    for (int64_t oi = 0; oi < g->oh; oi++) {
        int64_t h0 = j->h.first[oi], h1 = h0 + j->h.taps[oi];
        for (int64_t oj = 0; oj < g->ow; oj++) {
            int64_t w0 = j->w.first[oj], w1 = w0 + j->w.taps[oj];
            double s = 0;
            for (int64_t h = h0; h < h1; h++)
                for (int64_t w = w0; w < w1; w++)
                    s += ld(ct, j->src, xo + h * iw + w);
            st(ct, j->dst, yo + oi * g->ow + oj, s / avg_divisor(j, oi, oj));
        }
    }
}

/* Whether every window is 2x2 at stride 2 inside the image (no padding,
 * no dilation): the CNN's pooling, which max_plane_2x2 runs without tables. */
static bool is_2x2_max(const fc__pool_geom *g) {
    return g->kind == FC__POOL_MAX && g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 &&
           g->ph == 0 && g->pw == 0 && g->dh == 1 && g->dw == 1 && 2 * g->oh <= g->ih &&
           2 * g->ow <= g->iw;
}

/* window_max's rule as one scan of the four taps in their order: a tap
 * takes over when it is above the max so far or a NaN, so the first
 * maximum and the last NaN win. The first tap is taken as it is (from
 * -inf it would win unless it is -inf, which keeps the same value and
 * index). The picks are mask arithmetic on the bits, so the loop has no
 * data-dependent branch (gcc turned ?: on floats into jumps, and on real
 * activations the comparisons are coin flips). */
typedef struct pick {
    uint32_t m; /* the max so far, as bits */
    int64_t best;
} pick;

static inline pick pick_take(pick p, float v, int64_t at) {
    float m;
    memcpy(&m, &p.m, sizeof m);
    uint32_t vb, take = 0u - (uint32_t)((v > m) | (v != v));
    memcpy(&vb, &v, sizeof vb);
    p.m = (p.m & ~take) | (vb & take);
    uint64_t take64 = 0u - (uint64_t)(take & 1u);
    p.best = (int64_t)(((uint64_t)p.best & ~take64) | ((uint64_t)at & take64));
    return p;
}

static void max_plane_2x2(const pool_job *j, int64_t p) {
    const fc__pool_geom *g = j->g;
    const int64_t iw = g->iw;
    const float *x = (const float *)j->src + p * g->ih * iw;
    float *y = (float *)j->dst + p * g->oh * g->ow;
    int64_t *idx = j->idx + p * g->oh * g->ow;
    for (int64_t oi = 0; oi < g->oh; oi++) {
        const float *r0 = x + 2 * oi * iw, *r1 = r0 + iw;
        for (int64_t oj = 0; oj < g->ow; oj++) {
            int64_t i0 = 2 * oi * iw + 2 * oj;
            pick k = {0, i0};
            memcpy(&k.m, &r0[2 * oj], sizeof k.m);
            k = pick_take(k, r0[2 * oj + 1], i0 + 1);
            k = pick_take(k, r1[2 * oj], i0 + iw);
            k = pick_take(k, r1[2 * oj + 1], i0 + iw + 1);
            memcpy(&y[oi * g->ow + oj], &k.m, sizeof k.m);
            idx[oi * g->ow + oj] = k.best;
        }
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define POOL_X86 1
#define POOL_AVX2 __attribute__((target("avx2,fma")))

/* The even and the odd floats of r[0, 2n), n in [1, 8], masked past 2n. */
POOL_AVX2 static inline void pool_split(const float *r, int n, __m256 *even, __m256 *odd) {
    __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(2 * n), lane);
    __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(2 * n - 8), lane);
    __m256 lo = _mm256_maskload_ps(r, m0), hi = _mm256_maskload_ps(r + 8, m1);
    /* shuffle_ps picks within 128-bit lanes: 0 2 8 10 | 4 6 12 14, then the
     * 64-bit quarters put back in order */
    *even = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
    *odd = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8));
}

/* pick_take on eight lanes: the same comparisons, so the same picks. */
POOL_AVX2 static inline void pool_take(__m256 *m, __m256i *k, __m256 v, int code) {
    __m256 take = _mm256_or_ps(_mm256_cmp_ps(v, *m, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    *m = _mm256_blendv_ps(*m, v, take);
    *k = _mm256_castps_si256(_mm256_blendv_ps(
        _mm256_castsi256_ps(*k), _mm256_castsi256_ps(_mm256_set1_epi32(code)), take));
}

/* max_plane_2x2 eight outputs at a time (masked at a row's end): the pool
 * forward was a tenth of the CNN training step in the scalar loop. The
 * tap codes 0..3 become the offsets 0, 1, iw, iw + 1 when widened. */
POOL_AVX2 static void max_plane_2x2_avx2(const pool_job *j, int64_t p) {
    const fc__pool_geom *g = j->g;
    const int64_t iw = g->iw, ow = g->ow;
    const float *x = (const float *)j->src + p * g->ih * iw;
    float *y = (float *)j->dst + p * g->oh * ow;
    int64_t *idx = j->idx + p * g->oh * ow;
    __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i wide = _mm256_set1_epi64x(iw);
    for (int64_t oi = 0; oi < g->oh; oi++) {
        const float *r0 = x + 2 * oi * iw, *r1 = r0 + iw;
        for (int64_t oj = 0; oj < ow; oj += 8) {
            int n = ow - oj < 8 ? (int)(ow - oj) : 8;
            __m256 a, b, c, d;
            pool_split(r0 + 2 * oj, n, &a, &b);
            pool_split(r1 + 2 * oj, n, &c, &d);
            __m256 m = a;
            __m256i k = _mm256_setzero_si256();
            pool_take(&m, &k, b, 1);
            pool_take(&m, &k, c, 2);
            pool_take(&m, &k, d, 3);
            __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane);
            _mm256_maskstore_ps(y + oi * ow + oj, mask, m);
            int64_t i0 = 2 * oi * iw + 2 * oj;
            __m256i base = _mm256_setr_epi64x(0, 2, 4, 6);
            for (int h = 0; h < 2; h++) {
                __m128i kh = h ? _mm256_extracti128_si256(k, 1) : _mm256_castsi256_si128(k);
                __m256i c64 = _mm256_cvtepu32_epi64(kh); /* code = row * 2 + column */
                __m256i row = _mm256_sub_epi64(_mm256_setzero_si256(), _mm256_srli_epi64(c64, 1));
                __m256i at = _mm256_add_epi64(
                    _mm256_add_epi64(base, _mm256_set1_epi64x(i0 + 8 * h)),
                    _mm256_add_epi64(_mm256_and_si256(c64, _mm256_set1_epi64x(1)),
                                     _mm256_and_si256(row, wide)));
                __m256i mh = h ? _mm256_cvtepi32_epi64(_mm256_extracti128_si256(mask, 1))
                               : _mm256_cvtepi32_epi64(_mm256_castsi256_si128(mask));
                _mm256_maskstore_epi64((long long *)(idx + oi * ow + oj + 4 * h), mh, at);
            }
        }
    }
}
#endif

static void fwd_f32(void *arg, int64_t begin, int64_t end) {
    const pool_job *j = arg;
    bool fast = is_2x2_max(j->g);
#ifdef POOL_X86
    if (fast && fc__isa_enabled(FC__ISA_AVX2)) {
        for (int64_t p = begin; p < end; p++)
            max_plane_2x2_avx2(j, p);
        return;
    }
#endif
    for (int64_t p = begin; p < end; p++) {
        if (fast)
            max_plane_2x2(j, p);
        else if (j->g->kind == FC__POOL_MAX)
            max_plane(j, FC_F32, p);
        else
            avg_plane(j, FC_F32, p);
    }
}

static void fwd_f64(void *arg, int64_t begin, int64_t end) {
    const pool_job *j = arg;
    for (int64_t p = begin; p < end; p++) {
        if (j->g->kind == FC__POOL_MAX)
            max_plane(j, FC_F64, p);
        else
            avg_plane(j, FC_F64, p);
    }
}

/* ---- backward ------------------------------------------------------------------------------- */

POOL_INLINE void max_plane_back(const pool_job *j, fc_dtype ct, int64_t p) {
    const fc__pool_geom *g = j->g;
    int64_t xo = p * g->ih * g->iw, yo = p * g->oh * g->ow, no = g->oh * g->ow;
    for (int64_t o = 0; o < no; o++) {
        int64_t b = j->cidx[yo + o];
        if (b >= 0) add_at(ct, j->dst, xo + b, ld(ct, j->src, yo + o));
    }
}

POOL_INLINE void avg_plane_back(const pool_job *j, fc_dtype ct, int64_t p) {
    const fc__pool_geom *g = j->g;
    const int64_t iw = g->iw, xo = p * g->ih * iw, yo = p * g->oh * g->ow;
    for (int64_t oi = 0; oi < g->oh; oi++) {
        int64_t h0 = j->h.first[oi], h1 = h0 + j->h.taps[oi];
        for (int64_t oj = 0; oj < g->ow; oj++) {
            int64_t w0 = j->w.first[oj], w1 = w0 + j->w.taps[oj];
            double gd = ld(ct, j->src, yo + oi * g->ow + oj);
            /* the share in the compute dtype, as PyTorch divides in scalar_t */
            double v = ct == FC_F32 ? (double)((float)gd / (float)avg_divisor(j, oi, oj))
                                    : gd / avg_divisor(j, oi, oj);
            for (int64_t h = h0; h < h1; h++)
                for (int64_t w = w0; w < w1; w++)
                    add_at(ct, j->dst, xo + h * iw + w, v);
        }
    }
}

POOL_INLINE void back_planes(const pool_job *j, fc_dtype ct, int64_t begin, int64_t end) {
    size_t plane = (size_t)(j->g->ih * j->g->iw) * fc_dtype_size(ct);
    memset((char *)j->dst + (size_t)begin * plane, 0, (size_t)(end - begin) * plane);
    for (int64_t p = begin; p < end; p++) {
        if (j->g->kind == FC__POOL_MAX)
            max_plane_back(j, ct, p);
        else
            avg_plane_back(j, ct, p);
    }
}

static void back_f32(void *arg, int64_t begin, int64_t end) {
    back_planes(arg, FC_F32, begin, end);
}
static void back_f64(void *arg, int64_t begin, int64_t end) {
    back_planes(arg, FC_F64, begin, end);
}

/* ---- entry points --------------------------------------------------------------------------- */

/* The two axis tables in one pooled buffer (*buf; released by the caller). */
static fc_status tables(fc_ctx *ctx, const char *op, const fc__pool_geom *g, pool_job *j,
                        fc_buffer **buf) {
    int64_t n = g->oh + g->ow;
    *buf = fc__ctx_buffer(ctx, 3 * (size_t)n * sizeof(int64_t));
    if (!*buf) return fc__fail(ctx, FC_ERR_OOM, "%s: out of memory for the window tables", op);
    int64_t *t = (*buf)->data;
    j->h = (axis_tab){t, t + g->oh, t + 2 * g->oh};
    t += 3 * g->oh;
    j->w = (axis_tab){t, t + g->ow, t + 2 * g->ow};
    axis_fill(g, true, j->h);
    axis_fill(g, false, j->w);
    return FC_OK;
}

/* Planes per team slice: enough window reads to pay for a thread. */
static int64_t plane_grain(const fc__pool_geom *g) {
    int64_t taps = g->kind == FC__POOL_ADAPTIVE ? ceil_div(g->ih, g->oh) * ceil_div(g->iw, g->ow)
                                                : g->kh * g->kw;
    /* a nominal window (kernel up to 2^31 - 1 per axis) times the outputs
     * can pass int64 though the taps inside the image are few: such work
     * counts as plenty, one plane per slice */
    int64_t work;
    if (!fc__i64_mul(g->oh * g->ow, taps, &work) || !fc__i64_add(work, g->ih * g->iw, &work))
        return 1;
    return work >= POOL_GRAIN_WORK ? 1 : POOL_GRAIN_WORK / work;
}

fc_tensor *fc__pool2d_forward(fc_ctx *ctx, const char *op, const fc__pool_geom *g, fc_tensor *x,
                              fc_tensor **argmax) {
    fc_dtype dt = x->raw.dtype, ct = dt == FC_F64 ? FC_F64 : FC_F32;
    int rank = x->raw.rank;
    int64_t shape[FC_MAX_RANK];
    memcpy(shape, x->raw.shape, sizeof(int64_t) * (size_t)rank);
    shape[rank - 2] = g->oh;
    shape[rank - 1] = g->ow;
    bool is_max = g->kind == FC__POOL_MAX;
    fc_tensor *xc = fc__copy_contiguous_ref(ctx, op, x);
    fc_tensor *xt = xc ? fc__copy_cast(ctx, op, xc, ct) : NULL;
    fc_release(xc);
    fc_tensor *y = xt ? fc__tensor_new(ctx, op, ct, shape, rank) : NULL;
    fc_tensor *idx = y && is_max ? fc__tensor_new(ctx, op, FC_I64, shape, rank) : NULL;
    fc_buffer *buf = NULL;
    pool_job j = {.g = g};
    fc_status st = !y || (is_max && !idx) ? fc__failed(ctx) : tables(ctx, op, g, &j, &buf);
    if (st == FC_OK) {
        j.src = fc__raw_base(&xt->raw);
        j.dst = fc__raw_base(&y->raw);
        j.idx = idx ? (int64_t *)fc__raw_base(&idx->raw) : NULL;
        fc__parallel_for(ctx, g->planes, plane_grain(g), ct == FC_F32 ? fwd_f32 : fwd_f64, &j);
    }
    fc__buffer_release(buf);
    fc_release(xt);
    if (st == FC_OK && dt != ct) { /* f16 / bf16: the result back in the input's dtype */
        fc_tensor *yd = fc__copy_cast(ctx, op, y, dt);
        fc_release(y);
        y = yd;
        st = y ? FC_OK : fc__failed(ctx);
    }
    if (st != FC_OK) {
        fc_release(y);
        fc_release(idx);
        return NULL;
    }
    if (is_max) *argmax = idx;
    return y;
}

fc_tensor *fc__pool2d_backward(fc_ctx *ctx, const char *op, const fc__pool_geom *g, fc_tensor *gout,
                               fc_tensor *argmax, const int64_t *in_shape, int in_rank) {
    fc_dtype ct = gout->raw.dtype;
    fc_tensor *dx = fc__tensor_new(ctx, op, ct, in_shape, in_rank);
    fc_buffer *buf = NULL;
    pool_job j = {.g = g};
    /* MAX reads only its argmax: no window tables */
    fc_status st = !dx                       ? fc__failed(ctx)
                   : g->kind == FC__POOL_MAX ? FC_OK
                                             : tables(ctx, op, g, &j, &buf);
    if (st == FC_OK) {
        j.src = fc__raw_base(&gout->raw);
        j.dst = fc__raw_base(&dx->raw);
        j.cidx = argmax ? (const int64_t *)fc__raw_base(&argmax->raw) : NULL;
        fc__parallel_for(ctx, g->planes, plane_grain(g), ct == FC_F32 ? back_f32 : back_f64, &j);
    }
    fc__buffer_release(buf);
    if (st != FC_OK) {
        fc_release(dx);
        return NULL;
    }
    return dx;
}
