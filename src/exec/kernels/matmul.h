/* SPDX-License-Identifier: MIT */
/* exec/kernels/matmul.h - the products behind fc_matmul and fc_linear:
 * dense ones through the matmul providers (matmul.c, backend/backend.h),
 * block-quantized weights through the quantized GEMM (qlinear.c,
 * backend/qmatmul.h). The public ops, their checks and backward rules are
 * in src/ops/matmul.c. Nothing here records on the tape; every tensor
 * returned is a new reference (scope-registered), or NULL with the error
 * recorded naming op. */
#ifndef FUCINA_EXEC_KERNELS_MATMUL_H
#define FUCINA_EXEC_KERNELS_MATMUL_H

#include "exec/tensor.h"

/* a . b with NumPy matmul shapes: a [..., m, k] . b [..., k, n] ->
 * [..., m, n], batch axes broadcast, a 1-D a a row [1, k] and a 1-D b a
 * column [k, 1] whose axis is dropped from the result (1-D . 1-D: [1]).
 * a and b share one float dtype (f16, bf16, f32, f64; checked by the
 * caller), any layout: an operand is copied only when its matrix axes have
 * no BLAS layout. With bias (a's dtype, [n], any layout; NULL allowed) the
 * bias is written into every output row first and the product accumulated
 * on it. The output is new, contiguous, in a's dtype. Fails with
 * FC_ERR_SHAPE_MISMATCH when k or the batch axes do not match, and with
 * the provider's status when no provider takes the product or one fails. */
fc_tensor *fc__matmul(fc_ctx *ctx, const char *op, fc_tensor *a, fc_tensor *b, fc_tensor *bias);

/* x [..., in] . w^T + bias for a dense 2-D w [out, in] (w^T is a stride
 * view, never a copy): fc__matmul's contract with b = w^T. The caller has
 * checked that x, w and bias ([out], NULL allowed) share a float dtype and
 * that the shapes match. */
fc_tensor *fc__linear(fc_ctx *ctx, const char *op, fc_tensor *x, fc_tensor *w, fc_tensor *bias);

/* x [..., in] (f32, any layout) . w^T + bias for a contiguous 2-D
 * block-quantized w [out, in] in a weight format
 * (fc_dtype_supports_quantized_matmul_rhs), decoded inside the kernel; bias
 * f32 [out] (NULL allowed). All checked by the caller. The output is new,
 * f32 [..., out], contiguous. */
fc_tensor *fc__qlinear(fc_ctx *ctx, const char *op, fc_tensor *x, fc_tensor *w, fc_tensor *bias);

#endif /* FUCINA_EXEC_KERNELS_MATMUL_H */
