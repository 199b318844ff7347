/* SPDX-License-Identifier: MIT */
/* qmatmul.h - the quantized matmul engine: f32 activations times the
 * transpose of block-quantized weights, decoding the weights inside the
 * kernel (a block at a time, in registers) and never materializing an f32
 * copy of them.
 *
 *     y[i, j] = sum_p x[i, p] * W[j, p] (+ bias[j])     i < m, j < n, p < k
 *
 * W holds n rows of k values in one of the block dtypes that
 * fc_dtype_supports_quantized_matmul_rhs accepts (every block dtype but
 * q8_1 and q8_k), each row fc_quant_row_bytes(wdt, k) bytes, which is
 * exactly fc_linear's weight layout [out, in]. The op layer
 * (fc_matmul/fc_linear) builds an fc__qgemm from tensors and calls
 * fc__qgemm_run; nothing here knows about fc_ctx.
 *
 * Numerics. q4_0, q8_0, q4_k and q6_k quantize each activation row to
 * 8-bit codes first, as ggml does (q8 per 32 values for q4_0/q8_0, q8_K per
 * 256 for q4_k/q6_k; see backend/qdot.h), and sum exact integer products
 * per block; the result differs from dequantize-then-multiply by at most
 * sum over activation blocks of (absmax of the block / 254) * (sum of |W|
 * over the block), plus f32 rounding. nf4 and every other dtype multiply
 * f32 activations by the decoded weights (only f32 rounding). A NaN or an
 * infinity in x[i, :] makes y[i, :] NaN or infinite. For a given ISA the
 * result bits do not depend on the thread count.
 *
 * ISA. Kernels for AVX-512 (the avx512 level of core/cpu.h plus VNNI),
 * AVX2 (the avx2 level: FMA, F16C) and portable C are built into every
 * x86-64 binary and chosen at run time from the level in effect
 * (per-function target attributes, no -march flags), so FUCINA_ISA caps
 * them like every other SIMD family.
 *
 * Threads: fc__qgemm_run splits the n weight rows over g->threads OpenMP
 * threads (in FUCINA_HAVE_OPENMP builds; inline when called from inside a
 * parallel region). It may be called concurrently on disjoint outputs. */
#ifndef FUCINA_BACKEND_QMATMUL_H
#define FUCINA_BACKEND_QMATMUL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cpu.h"
#include "fucina/alloc.h"
#include "fucina/dtype.h"
#include "fucina/status.h"

typedef struct fc__qgemm {
    fc_dtype wdt;              /* weight dtype, fc__qmatmul_supported */
    const void *w;             /* n rows of k values; any alignment */
    size_t ldw;                /* bytes from one weight row to the next; 0: packed rows */
    int64_t n, k;              /* n >= 1; k >= 1, a multiple of wdt's block size */
    const float *x;            /* m rows of k f32, row i at x + i * ldx */
    int64_t m, ldx;            /* m >= 1, ldx >= k */
    const float *bias;         /* n values added to every row; NULL allowed */
    float *y;                  /* m rows of n f32, row i at y + i * ldy; overlaps no input */
    int64_t ldy;               /* >= n */
    int threads;               /* >= 1 */
    const fc_allocator *alloc; /* the packed activations; NULL: the default allocator */
    bool pin_isa;              /* run exactly isa's kernels (tests, benchmarks); false: the best */
    fc__isa isa;               /* with pin_isa: the kernel family to run */
} fc__qgemm;

/* True for the weight dtypes fc__qgemm_run takes: exactly
 * fc_dtype_supports_quantized_matmul_rhs(wdt). */
bool fc__qmatmul_supported(fc_dtype wdt);

/* Whether this CPU and build run isa's kernels now: portable always, avx2
 * at that level, avx512 at that level on a CPU with AVX512-VNNI. */
bool fc__qmatmul_isa_runs(fc__isa isa);
/* The family an unpinned fc__qgemm runs: the widest that runs. */
fc__isa fc__qmatmul_isa(void);

/* Computes g->y as described above. On error y is untouched, and err
 * (errcap bytes, NULL allowed when errcap is 0) gets a message starting
 * "qmatmul: " that names the values.
 * Returns FC_OK; FC_ERR_NULL_ARG for a NULL g, w, x or y; FC_ERR_DTYPE for
 * a weight dtype that is not supported (scalar dtypes, q8_1, q8_k, out of
 * range); FC_ERR_INVALID_SHAPE for m, n or k < 1 or k not a multiple of the
 * block size; FC_ERR_INVALID_ARG for ldx < k, ldy < n, a nonzero ldw below
 * the row bytes, threads < 1 or isa out of range; FC_ERR_BACKEND for an isa
 * this CPU or build cannot run; FC_ERR_OVERFLOW when a size does not fit
 * in memory arithmetic; FC_ERR_OOM when the packed activations cannot be
 * allocated. That is the only allocation, one block from g->alloc per call:
 * m rows of about 2 bytes per value (q4_0, q8_0), 1.25 (q4_k, q6_k) or 4
 * (nf4), times the thread count when m <= 16 (each thread then packs its
 * own copy and no thread waits for another); the other dtypes allocate
 * nothing. */
fc_status fc__qgemm_run(const fc__qgemm *g, char *err, size_t errcap);

#endif /* FUCINA_BACKEND_QMATMUL_H */
