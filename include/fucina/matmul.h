/* SPDX-License-Identifier: MIT */
/* fucina/matmul.h - matrix products through the run-time chosen provider.
 *
 * Providers: ref (portable C; f16, bf16, f32, f64), blas (OpenBLAS; f32,
 * f64), onednn (oneDNN; f32, and bf16/f16 with f32 accumulation on CPUs
 * where oneDNN has those kernels). The context
 * option fc_ctx_opts.backend or FUCINA_BACKEND=ref|blas|onednn selects one;
 * FC_BACKEND_AUTO picks per dtype and size. Selecting a provider that was
 * not built is FC_ERR_BACKEND with a message saying how to build it.
 * Results for a given provider and thread count are the same every run. */
#ifndef FUCINA_MATMUL_H
#define FUCINA_MATMUL_H

#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* NumPy matmul semantics: 1-D x 2-D, 2-D x 1-D, 2-D x 2-D, and N-D batched
 * with broadcast batch axes; a 1-D left operand is a row, a 1-D right one a
 * column, and that axis is dropped from the result (1-D x 1-D gives shape
 * [1]). Operands share one float dtype (FC_ERR_DTYPE naming both); the
 * result has that dtype (f16/bf16 accumulate in f32 and round once, f64
 * accumulates in f64). b may also be block-quantized when a is f32
 * (quantized weights, see fucina/quant.h), read block by block inside the
 * product and never dequantized whole. Like ggml, the product quantizes the
 * activations as well for the integer dot products: a's rows are rounded
 * to 8-bit blocks (q8 per 32 values against q4_0 and q8_0, q8_K per 256
 * against q4_k and q6_k; the scale is kept in f32), so the result is not
 * exact math on the dequantized weights (about 1-2% of the largest output
 * on small models); nf4 and the other block dtypes multiply f32
 * activations. q8_1/q8_k (activation formats) are FC_ERR_DTYPE. Inner dims
 * must agree (FC_ERR_SHAPE_MISMATCH naming both shapes), as must batch axes up to
 * broadcasting. Strided operands (transposed, narrowed views) are passed to
 * the provider as transposes and leading dimensions; other layouts are
 * copied once. Provider failures are FC_ERR_BACKEND (or FC_ERR_OOM).
 * Records an autograd node when an input requires grad. Borrows a and b;
 * returns a new reference, or NULL with the error recorded in ctx. */
FC_API fc_tensor *fc_matmul(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
/* x [..., in] times w [out, in] transposed, plus bias [out] (NULL allowed):
 * [..., out]. w is read through a transposed view (never copied when its
 * layout allows); the bias is added inside the product, so 16-bit outputs
 * round once. w may be block-quantized when x is f32, like fc_matmul's b.
 * FC_ERR_RANK when w is not 2-D, FC_ERR_SHAPE_MISMATCH when x's last dim is
 * not in or bias is not [out], FC_ERR_DTYPE when dtypes differ. Borrows its
 * inputs; returns a new reference, or NULL with the error recorded. */
FC_API fc_tensor *fc_linear(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *bias);
/* Selects the provider for later calls on ctx. FC_BACKEND_AUTO restores the
 * automatic choice, which never fails for a float dtype. It takes, in this
 * order (src/backend/dispatch.c, and the measurements behind each rule):
 *  - FUCINA_BACKEND when set (read once per process), as an explicit choice;
 *  - a tiny product, m*n*k at most 4096 multiply-adds: OpenBLAS for f32 and
 *    f64 (ref when OpenBLAS was not built), ref for f16 and bf16;
 *  - one f32 row times a transposed matrix of at least 65536 values and
 *    two or more columns, unbatched (fc_linear on a single input row): no
 *    provider, one dot product per output over the context's threads;
 *  - f32 on AVX2 and AVX-512 CPUs: oneDNN up to 2^30 multiply-adds (a
 *    1024-cube), OpenBLAS above; on AVX-512 the products above stay on
 *    oneDNN unless OpenBLAS loaded AVX-512 kernels (OPENBLAS_CORETYPE can
 *    pin it lower); below AVX2, OpenBLAS. The level is fucina/cpu.h's, so
 *    FUCINA_ISA caps this choice (and oneDNN with it). Only one library
 *    built: that one; neither: ref;
 *  - f64: OpenBLAS (ref without it);
 *  - bf16 and f16: oneDNN where it has the dtype's kernel on this CPU (bf16:
 *    AVX-512; f16: AVX512-FP16), else widened to f32 and multiplied by the
 *    f32 choice above (still f32 accumulation and one rounding), ref when
 *    neither library was built.
 * FC_ERR_BACKEND when that provider was not built (the message says how to
 * build it), FC_ERR_INVALID_ARG for a value out of range, FC_ERR_NULL_ARG
 * for a NULL ctx; errors are also recorded in ctx. An explicit provider that
 * lacks an operand dtype makes that matmul fail with FC_ERR_BACKEND rather
 * than silently use another provider: OpenBLAS has no bf16 or f16, and
 * oneDNN has bf16 only on AVX-512 CPUs and f16 only with AVX512-FP16 (the
 * message names the missing feature). Under the automatic choice an unknown
 * FUCINA_BACKEND value is FC_ERR_BACKEND for every product a provider would
 * run (the one-row products above, which use none, still run). */
FC_API fc_status fc_ctx_set_backend(fc_ctx *ctx, fc_backend backend);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_MATMUL_H */
