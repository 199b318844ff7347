/* fucina/matmul.h - matrix products through the run-time chosen provider.
 *
 * Providers: ref (portable C; f16, bf16, f32, f64), blas (OpenBLAS; f32,
 * f64), onednn (oneDNN; f32, bf16, f16 with f32 accumulation). The context
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
 * with broadcast batch axes. Operands share one float dtype (FC_ERR_DTYPE);
 * b may also be block-quantized when a is f32 (quantized weights, see
 * fucina/quant.h). Inner dims must agree (FC_ERR_SHAPE_MISMATCH naming both
 * shapes). Strided operands are passed to the provider as transposes and
 * leading dimensions when the layout allows; otherwise copied. */
FC_API fc_tensor *fc_matmul(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
/* x [..., in] times w [out, in] transposed, plus bias [out] (NULL allowed). */
FC_API fc_tensor *fc_linear(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *bias);
/* Selects the provider for later calls on ctx (FC_BACKEND_AUTO restores the
 * automatic choice). FC_ERR_BACKEND when that provider was not built. */
FC_API fc_status fc_ctx_set_backend(fc_ctx *ctx, fc_backend backend);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_MATMUL_H */
