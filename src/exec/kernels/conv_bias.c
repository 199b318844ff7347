/* SPDX-License-Identifier: MIT */
/* exec/kernels/conv_bias.c - the bias gradient of the convolutions: the
 * sum of the output gradient over the batch and the positions, per
 * channel, in f64 with a fixed order (the same bits at any thread count
 * and at every SIMD level). Apart from conv.c, whose products it shares
 * nothing with. */
#include "exec/kernels/conv.h"

#include "core/cpu.h"
#include "exec/kernels/copy.h"
#include "exec/parallel.h"

/* ---- the bias gradient -------------------------------------------------------------------------
 */

typedef struct sum_job {
    const char *t;
    char *out;
    fc_dtype dt;
    int64_t n, c, plane;
} sum_job;

/* Eight interleaved f64 partial sums per channel (element i of each row into
 * sum i mod 8, the row's tail into the first ones), combined pairwise at
 * the end: one dependent add chain would take four cycles per element. The
 * order depends on the shapes only. */
#define SUM_LANES 8

#define CHANNEL_ROW(T)                                                                             \
    static void channel_row_##T(const T *v, int64_t len, double *acc) {                            \
        int64_t i = 0;                                                                             \
        for (; i + SUM_LANES <= len; i += SUM_LANES)                                               \
            for (int k = 0; k < SUM_LANES; k++)                                                    \
                acc[k] += (double)v[i + k];                                                        \
        for (int k = 0; i < len; i++, k++)                                                         \
            acc[k] += (double)v[i];                                                                \
    }
CHANNEL_ROW(float)
CHANNEL_ROW(double)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define CONV_SUM_AVX2 1
/* channel_row_float with the eight sums in two 4-lane vectors: element i
 * still goes into sum i mod 8 and each add rounds as the scalar one does,
 * so the bits are the same; the scalar loop was ~2% of the CNN step. */
__attribute__((target("avx2"))) static void channel_row_float_avx2(const float *v, int64_t len,
                                                                   double *acc) {
    __m256d lo = _mm256_loadu_pd(acc), hi = _mm256_loadu_pd(acc + 4);
    int64_t i = 0;
    for (; i + SUM_LANES <= len; i += SUM_LANES) {
        __m256 x = _mm256_loadu_ps(v + i);
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(x)));
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
    }
    _mm256_storeu_pd(acc, lo);
    _mm256_storeu_pd(acc + 4, hi);
    for (int k = 0; i < len; i++, k++)
        acc[k] += (double)v[i];
}
#endif

static void channel_sum_range(void *arg, int64_t begin, int64_t end) {
    const sum_job *j = arg;
    void (*row_f32)(const float *, int64_t, double *) = channel_row_float;
#ifdef CONV_SUM_AVX2
    if (fc__isa_enabled(FC__ISA_AVX2)) row_f32 = channel_row_float_avx2;
#endif
    for (int64_t ch = begin; ch < end; ch++) {
        double acc[SUM_LANES] = {0};
        for (int64_t b = 0; b < j->n; b++) {
            int64_t off = (b * j->c + ch) * j->plane;
            if (j->dt == FC_F32)
                row_f32((const float *)j->t + off, j->plane, acc);
            else
                channel_row_double((const double *)j->t + off, j->plane, acc);
        }
        double s =
            ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        if (j->dt == FC_F32)
            ((float *)j->out)[ch] = (float)s;
        else
            ((double *)j->out)[ch] = s;
    }
}

fc_tensor *fc__conv_channel_sum(fc_ctx *ctx, const char *op, fc_tensor *t, int64_t n, int64_t c,
                                int64_t plane) {
    fc_dtype dt = t->raw.dtype == FC_F64 ? FC_F64 : FC_F32;
    fc_tensor *tc =
        t->raw.dtype == dt ? fc__copy_contiguous_ref(ctx, op, t) : fc__copy_cast(ctx, op, t, dt);
    fc_tensor *out = tc ? fc__tensor_new(ctx, op, dt, &c, 1) : NULL;
    if (out) {
        sum_job j = {fc__raw_base(&tc->raw), fc__raw_base(&out->raw), dt, n, c, plane};
        fc__parallel_for(ctx, c, 1 + 65536 / (n * plane + 1), channel_sum_range, &j);
    }
    fc_release(tc);
    return out;
}
