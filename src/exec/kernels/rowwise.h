/* exec/kernels/rowwise.h - what the reduction, softmax, norm, loss and scan
 * kernels share: the row driver, vectorizable f32 helpers (sums with wide
 * partials, a branch-free exp), run-time AVX2 clones, and the internal
 * entry points the backward rules in src/ag call.
 *
 * Row driver. Softmax, the norms, the losses and cumsum all work on rows:
 * an operand is viewed as a contiguous [outer, dim, inner] block and a row
 * is the dim elements at one (outer, inner) position. The driver hands the
 * kernel blocks of rows that are contiguous in the compute dtype (f32, f64
 * or i64): operands whose rows already are (inner == 1, dtype == compute)
 * are passed in place; the others are converted and, when inner > 1,
 * transposed into per-thread scratch tiles and written back afterwards.
 * Rows are split into a fixed number of groups that depends only on the
 * shape, so a kernel that accumulates per group (layer_norm's weight
 * gradient) gives the same bits for any thread count.
 *
 * SIMD. The library is built for baseline x86-64; the hot loops are written
 * as plain always-inline bodies that the compiler vectorizes, instantiated
 * twice (default and target("avx2")) and picked at run time. */
#ifndef FUCINA_EXEC_KERNELS_ROWWISE_H
#define FUCINA_EXEC_KERNELS_ROWWISE_H

#include <math.h>
#include <string.h>

#include "exec/internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FC__RW_X86 1
#define FC__RW_AVX2 __attribute__((target("avx2")))
#endif
#define FC__RW_INLINE static inline __attribute__((always_inline))

/* True when the CPU (and OS) run AVX2 code; false off x86-64. */
bool fc__rw_avx2(void);

/* ---- vectorizable f32 helpers ------------------------------------------------------------
 * Written with explicit lanes because C forbids reassociating a float sum:
 * the compiler keeps 16 independent partials in vector registers. */
#define FC__RW_LANES 16

/* exp(x) for x <= 88 (larger x returns e^88), within 2 ulp of expf; -inf
 * and anything below -88 give 0; NaN stays NaN. Branch-free so loops over
 * it vectorize: x = k ln2 + r, e^r by its degree-7 Taylor polynomial on
 * |r| <= ln2/2, 2^k built in the exponent bits. */
FC__RW_INLINE float fc__rw_expf(float x) {
    union {
        float f;
        uint32_t u;
    } kb, sc;
    x = x < -88.0f ? -88.0f : x;
    x = x > 88.0f ? 88.0f : x;
    kb.f = x * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23 rounds to an integer */
    float k = kb.f - 12582912.0f;
    uint32_t ki = kb.u - 0x4B400000u;
    float r = x - k * 0.693145751953125f;
    r = r - k * 1.428606765330187045e-06f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    sc.u = (ki + 127u) << 23; /* k = -127 gives +0: the result underflows */
    return p * sc.f;
}

/* Sum of n floats: f32 lanes over blocks of 512, each block added to a
 * double, so the error stays that of a 32-term f32 sum per lane. */
FC__RW_INLINE double fc__rw_sum_f32(const float *x, int64_t n) {
    double total = 0;
    for (int64_t i = 0; i < n;) {
        int64_t m = n - i < 512 ? n - i : 512;
        const float *p = x + i;
        float acc[FC__RW_LANES] = {0};
        int64_t j = 0;
        for (; j + FC__RW_LANES <= m; j += FC__RW_LANES)
            for (int l = 0; l < FC__RW_LANES; l++) acc[l] += p[j + l];
        double t = 0;
        for (; j < m; j++) t += p[j];
        for (int l = 0; l < FC__RW_LANES; l++) t += acc[l];
        total += t;
        i += m;
    }
    return total;
}

/* Sum of (x - c)^2, same scheme. */
FC__RW_INLINE double fc__rw_sumsq_dev_f32(const float *x, int64_t n, float c) {
    double total = 0;
    for (int64_t i = 0; i < n;) {
        int64_t m = n - i < 512 ? n - i : 512;
        const float *p = x + i;
        float acc[FC__RW_LANES] = {0};
        int64_t j = 0;
        for (; j + FC__RW_LANES <= m; j += FC__RW_LANES)
            for (int l = 0; l < FC__RW_LANES; l++) {
                float d = p[j + l] - c;
                acc[l] += d * d;
            }
        double t = 0;
        for (; j < m; j++) t += (double)(p[j] - c) * (p[j] - c);
        for (int l = 0; l < FC__RW_LANES; l++) t += acc[l];
        total += t;
        i += m;
    }
    return total;
}

/* Sum of a[i] * b[i], same scheme. */
FC__RW_INLINE double fc__rw_dot_f32(const float *a, const float *b, int64_t n) {
    double total = 0;
    for (int64_t i = 0; i < n;) {
        int64_t m = n - i < 512 ? n - i : 512;
        float acc[FC__RW_LANES] = {0};
        int64_t j = 0;
        for (; j + FC__RW_LANES <= m; j += FC__RW_LANES)
            for (int l = 0; l < FC__RW_LANES; l++) acc[l] += a[i + j + l] * b[i + j + l];
        double t = 0;
        for (; j < m; j++) t += (double)a[i + j] * b[i + j];
        for (int l = 0; l < FC__RW_LANES; l++) t += acc[l];
        total += t;
        i += m;
    }
    return total;
}

/* Largest element ignoring NaN (-inf for none); *nan set when any is NaN. */
FC__RW_INLINE float fc__rw_max_f32(const float *x, int64_t n, bool *nan) {
    float acc[FC__RW_LANES];
    int bad[FC__RW_LANES];
    for (int l = 0; l < FC__RW_LANES; l++) {
        acc[l] = -INFINITY;
        bad[l] = 0;
    }
    int64_t j = 0;
    for (; j + FC__RW_LANES <= n; j += FC__RW_LANES)
        for (int l = 0; l < FC__RW_LANES; l++) {
            float v = x[j + l];
            acc[l] = v > acc[l] ? v : acc[l];
            bad[l] |= v != v;
        }
    float m = -INFINITY;
    int b = 0;
    for (; j < n; j++) {
        m = x[j] > m ? x[j] : m;
        b |= x[j] != x[j];
    }
    for (int l = 0; l < FC__RW_LANES; l++) {
        m = acc[l] > m ? acc[l] : m;
        b |= bad[l];
    }
    *nan = b != 0;
    return m;
}

/* Smallest element ignoring NaN (+inf for none); *nan as above. */
FC__RW_INLINE float fc__rw_min_f32(const float *x, int64_t n, bool *nan) {
    float acc[FC__RW_LANES];
    int bad[FC__RW_LANES];
    for (int l = 0; l < FC__RW_LANES; l++) {
        acc[l] = INFINITY;
        bad[l] = 0;
    }
    int64_t j = 0;
    for (; j + FC__RW_LANES <= n; j += FC__RW_LANES)
        for (int l = 0; l < FC__RW_LANES; l++) {
            float v = x[j + l];
            acc[l] = v < acc[l] ? v : acc[l];
            bad[l] |= v != v;
        }
    float m = INFINITY;
    int b = 0;
    for (; j < n; j++) {
        m = x[j] < m ? x[j] : m;
        b |= x[j] != x[j];
    }
    for (int l = 0; l < FC__RW_LANES; l++) {
        m = acc[l] < m ? acc[l] : m;
        b |= bad[l];
    }
    *nan = b != 0;
    return m;
}

/* Sum of exp(x[i] - m): the map loop vectorizes on its own, the sum by
 * lanes (through a 512-float stack buffer). */
FC__RW_INLINE double fc__rw_sumexp_f32(const float *x, int64_t n, float m) {
    float tmp[512];
    double total = 0;
    for (int64_t i = 0; i < n; i += 512) {
        int64_t k = n - i < 512 ? n - i : 512;
        for (int64_t q = 0; q < k; q++) tmp[q] = fc__rw_expf(x[i + q] - m);
        total += fc__rw_sum_f32(tmp, k);
    }
    return total;
}

/* ---- the row driver ------------------------------------------------------------------- */
#define FC__ROWS_MAX_OPS 4

/* Called for nrows consecutive rows starting at row0 (row = o * inner + i),
 * all inside group `group`; rows[k] points at operand k's rows, contiguous
 * (row t at rows[k] + t * dim elements) in the compute dtype. Outputs must
 * be fully written. Must not fail. */
typedef void (*fc__rows_fn)(void *arg, int64_t group, int64_t row0, int64_t nrows, int64_t dim,
                            void *const *rows);

typedef struct fc__rows_job {
    int64_t outer, dim, inner;
    int nin, nout;                   /* operands: nin inputs, then nout outputs */
    fc_raw *ops[FC__ROWS_MAX_OPS];   /* contiguous [outer, dim, inner] tensors */
    fc_dtype ct;                     /* compute dtype: FC_F32, FC_F64 or FC_I64 */
    int64_t groups;                  /* 0: fc__rows_default_groups */
    fc__rows_fn fn;
    void *arg;
} fc__rows_job;

/* Groups for rows x dim elements: about 16K elements each, at most 1024. */
int64_t fc__rows_default_groups(int64_t rows, int64_t dim);
/* Runs job over every row; FC_ERR_OOM (recorded, naming op) when the
 * scratch tiles cannot be allocated. */
fc_status fc__rows_run(fc_ctx *ctx, const char *op, fc__rows_job *job);

/* The status after a call that returned NULL: the recorded error (which
 * that call recorded unless an earlier one was kept), never FC_OK. */
static inline fc_status fc__failed(const fc_ctx *ctx) {
    fc_status st = fc_ctx_status(ctx);
    return st != FC_OK ? st : FC_ERR_STATE;
}

/* Compute dtype of the row kernels for a float storage dtype. */
static inline fc_dtype fc__rw_float_ct(fc_dtype dt) { return dt == FC_F64 ? FC_F64 : FC_F32; }

/* ---- internal kernels used by the backward rules (src/ag) --------------------------------
 * Each returns a new scope-registered tensor (or NULL with the error
 * recorded). Tensors passed in are contiguous unless stated. */

/* dx along axis: softmax y * (g - sum(g * y)); log_softmax g - exp(y) * sum(g).
 * y has the forward's dtype, g the gradient dtype; dx has g's dtype. */
fc_tensor *fc__softmax_backward(fc_ctx *ctx, fc_tensor *y, fc_tensor *g, int axis, bool is_log);
/* Inclusive prefix sum along axis (reverse: suffix sum) of x of any layout,
 * in the reduction policy's dtype. */
fc_tensor *fc__cumsum(fc_ctx *ctx, const char *op, fc_tensor *x, int axis, bool reverse);
/* layer_norm / rms_norm backward over the last axis. x is the saved
 * (contiguous) input, g the output gradient, w the weight (NULL allowed),
 * mean (layer_norm only) and rstd the saved per-row statistics in the
 * gradient dtype. Sets *dx, *dw (when w and want_w), *db (when want_b). */
fc_status fc__norm_backward(fc_ctx *ctx, bool rms, fc_tensor *x, fc_tensor *g, fc_tensor *w,
                            fc_tensor *mean, fc_tensor *rstd, bool want_x, bool want_w,
                            bool want_b, fc_tensor **dx, fc_tensor **dw, fc_tensor **db);
/* cross_entropy backward: logits [N, C] (contiguous), per-row lse [N] and
 * targets i64 [N], g the loss gradient ([1] or [N] for reduction none). */
fc_tensor *fc__cross_entropy_backward(fc_ctx *ctx, fc_tensor *logits, fc_tensor *lse,
                                      fc_tensor *targets, fc_tensor *g, int reduction,
                                      double smoothing, double mean_scale, bool use_ignore,
                                      int64_t ignore_index);

/* mse_loss backward: sign * 2 * scale * g * (a - b) over the broadcast
 * shape; a and b in g's dtype (any layout), g [1]-shaped (seen with stride
 * 0) or of the broadcast shape. */
fc_tensor *fc__mse_backward(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, fc_tensor *g,
                            const int64_t *shape, int rank, double scale, double sign);

#endif /* FUCINA_EXEC_KERNELS_ROWWISE_H */
