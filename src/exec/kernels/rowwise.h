/* SPDX-License-Identifier: MIT */
/* exec/kernels/rowwise.h - what the reduction, softmax, norm, loss and scan
 * kernels share: the row driver, the f32 row primitives (sums with wide
 * partials, max/min, a vectorized exp; AVX2 or AVX-512 picked at run
 * time) and the streamed-store helpers. Each family's own entry points are
 * declared in its header (kernels/norm.h, softmax.h, loss.h, scan.h).
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
 * SIMD. The library is built for baseline x86-64. Reductions inside a row
 * (max, sums, exp) are primitives with hand-written AVX2 versions, because
 * C forbids the compiler to reorder float sums or max chains; the simple
 * elementwise loops around them are always-inline bodies compiled twice
 * (default and target("avx2")) and picked at run time. */
#ifndef FUCINA_EXEC_KERNELS_ROWWISE_H
#define FUCINA_EXEC_KERNELS_ROWWISE_H

#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "exec/tensor.h"
#include "exec/kernels/copy.h"
#include "exec/parallel.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FC__RW_X86 1
#define FC__RW_AVX2 __attribute__((target("avx2,fma")))
#define FC__RW_AVX512 __attribute__((target("avx512f,avx2,fma")))
#endif
#define FC__RW_INLINE static inline __attribute__((always_inline))

/* True when the dispatched calls run AVX2 + FMA code (or wider): the level
 * of core/cpu.h, under FUCINA_ISA and the test cap. */
static inline bool fc__rw_avx2(void) { return fc__isa_enabled(FC__ISA_AVX2); }
static inline bool fc__rw_avx512(void) { return fc__isa_enabled(FC__ISA_AVX512); }

/* ---- f32 row primitives (rowsimd.c) ------------------------------------------------------
 * The hot inner loops, written once with AVX2 intrinsics (picked at run
 * time) and once in portable C (the reference the tests compare against).
 * Sums keep f32 lane partials of at most 32 terms and add them into a
 * double, so a long row is as accurate as a short one. */

/* Largest element ignoring NaN (-inf if none); *nan tells whether any is NaN. */
float fc__rw_max(const float *x, int64_t n, bool *nan);
float fc__rw_min(const float *x, int64_t n, bool *nan);
double fc__rw_sum(const float *x, int64_t n);
double fc__rw_dot(const float *a, const float *b, int64_t n);
/* sum of (x - c)^2 */
double fc__rw_sumsq_dev(const float *x, int64_t n, float c);
/* *s1 = sum (x - c), *s2 = sum (x - c)^2 in one pass. */
void fc__rw_sum_sumsq(const float *x, int64_t n, float c, double *s1, double *s2);
/* y = exp(x - m) (y may be x; NULL: not stored); returns sum of them. exp
 * is within 2 ulp of expf for x - m <= 88 (above, e^88), exactly 0 below
 * -88 and NaN for NaN. */
double fc__rw_exp(const float *x, float *y, int64_t n, float m);
/* *sa = sum g*w, *sb = sum g*w*(x - mu)*rs: the two row sums of the norms' backward. */
void fc__rw_norm_sums(const float *x, const float *g, const float *w, int64_t n, float mu, float rs,
                      double *sa, double *sb);

/* sum of n bf16 (bf16 true) or f16 values taken as f32: the same bits as
 * fc__rw_sum over the converted row when n <= 512 (one block), or when
 * summed per 512-element piece by the caller. AVX-512 reads the halves
 * directly; other CPUs convert a block at a time and call fc__rw_sum. */
double fc__rw_sum_half(const uint16_t *x, int64_t n, bool bf16);

/* The portable twins (always available; for tests and non-AVX2 CPUs). */
float fc__rw_max_portable(const float *x, int64_t n, bool *nan);
float fc__rw_min_portable(const float *x, int64_t n, bool *nan);
double fc__rw_sum_portable(const float *x, int64_t n);
double fc__rw_dot_portable(const float *a, const float *b, int64_t n);
double fc__rw_sumsq_dev_portable(const float *x, int64_t n, float c);
void fc__rw_sum_sumsq_portable(const float *x, int64_t n, float c, double *s1, double *s2);
double fc__rw_exp_portable(const float *x, float *y, int64_t n, float m);
void fc__rw_norm_sums_portable(const float *x, const float *g, const float *w, int64_t n, float mu,
                               float rs, double *sa, double *sb);

#ifdef FC__RW_X86
/* The AVX-512 set (rowsimd512.c); call only when fc__rw_avx512(). */
float fc__rw_max_avx512(const float *x, int64_t n, bool *nan);
float fc__rw_min_avx512(const float *x, int64_t n, bool *nan);
double fc__rw_sum_avx512(const float *x, int64_t n);
double fc__rw_sum_half_avx512(const uint16_t *x, int64_t n, bool bf16);
double fc__rw_dot_avx512(const float *a, const float *b, int64_t n);
double fc__rw_sumsq_dev_avx512(const float *x, int64_t n, float c);
void fc__rw_sum_sumsq_avx512(const float *x, int64_t n, float c, double *s1, double *s2);
double fc__rw_exp_avx512(const float *x, float *y, int64_t n, float m);
void fc__rw_norm_sums_avx512(const float *x, const float *g, const float *w, int64_t n, float mu,
                             float rs, double *sa, double *sb);
#endif

/* ---- streaming stores -----------------------------------------------------------------
 * An f32 output of at least FC__RW_STREAM_MIN_BYTES is written around the
 * cache (non-temporal stores) by softmax, the norms and add, sub, mul, div
 * on AVX2 and AVX-512 CPUs: it cannot stay cached
 * until the next op reads it, and a plain store first reads every line it
 * writes, a third more memory traffic. A
 * row kernel (rows up to FC__RW_STREAM_ROW_MAX floats, 64-byte aligned and
 * a whole number of vectors) either stages a row in L1 scratch and streams
 * it out, or streams each vector as it computes it. The bits are the same
 * either way. */
#define FC__RW_STREAM_MIN_BYTES ((int64_t)8 << 20)
#define FC__RW_STREAM_ROW_MAX 4096

/* Whether an f32 output is large enough to be streamed out, on a CPU with
 * the streamed kernels (AVX2 and up); the row kernels stream only rows they
 * write in place (inner == 1). */
static inline bool fc__rw_stream_output(const fc_raw *out) {
    return out->dtype == FC_F32 && fc__raw_numel(out) >= FC__RW_STREAM_MIN_BYTES / 4 &&
           fc__isa_enabled(FC__ISA_AVX2);
}
/* Whether rows of dim floats starting at y can be streamed. */
static inline bool fc__rw_stream_rows_ok(const void *y, int64_t dim) {
    return dim % 16 == 0 && dim <= FC__RW_STREAM_ROW_MAX && (uintptr_t)y % 64 == 0;
}
#ifdef FC__RW_X86
/* dst = src * s with non-temporal stores; n % 16 == 0, dst 64-byte aligned.
 * The stores are weakly ordered: a kernel calls fc__rw_stream_fence before
 * it returns to the row driver. The first picks AVX-512 or AVX2 (call it
 * only when fc__rw_avx2()); the second is AVX-512 only. */
void fc__rw_stream_scaled(float *dst, const float *src, int64_t n, float s);
void fc__rw_stream_scaled_avx512(float *dst, const float *src, int64_t n, float s);
void fc__rw_stream_fence(void);
/* o = a op b over n contiguous floats, o streamed out (any alignment: the
 * unaligned head and the tail are plain stores), not fenced; one per op in
 * the order + - * /. The AVX-512 set (rowsimd512.c); rowsimd.c has AVX2's. */
typedef void (*fc__rw_stream_fn)(float *o, const float *a, const float *b, int64_t n);
extern const fc__rw_stream_fn fc__rw_stream_binary_avx512[4];
/* o = a op b (op one of + - * /) with the streamed kernel of the widest
 * level in use, then fenced; false, touching nothing, below AVX2 or for
 * another op. */
bool fc__rw_stream_binary(char op, float *o, const float *a, const float *b, int64_t n);
#endif

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
    int nin, nout;                 /* operands: nin inputs, then nout outputs */
    fc_raw *ops[FC__ROWS_MAX_OPS]; /* contiguous [outer, dim, inner] tensors */
    fc_dtype ct;                   /* compute dtype: FC_F32, FC_F64 or FC_I64 */
    int64_t groups;                /* 0: fc__rows_default_groups */
    fc__rows_fn fn;
    void *arg;
} fc__rows_job;

/* Groups for rows x dim elements: about 16K elements each, at most 1024. */
int64_t fc__rows_default_groups(int64_t rows, int64_t dim);
/* Runs job over every row; FC_ERR_OOM (recorded, naming op) when the
 * scratch tiles cannot be allocated. */
fc_status fc__rows_run(fc_ctx *ctx, const char *op, fc__rows_job *job);

/* Compute dtype of the row kernels for a float storage dtype. */
static inline fc_dtype fc__rw_float_ct(fc_dtype dt) { return dt == FC_F64 ? FC_F64 : FC_F32; }

#endif /* FUCINA_EXEC_KERNELS_ROWWISE_H */
