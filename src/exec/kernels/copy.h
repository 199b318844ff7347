/* SPDX-License-Identifier: MIT */
/* exec/kernels/copy.h - copies and dtype conversions of whole tensors, for
 * the ops layer (fc_clone, fc_contiguous, fc_to, fc_copy_ in src/ops/cast.c)
 * and for every kernel or engine that needs "this, contiguous" or "this, in
 * f32" for itself. Nothing here records on the tape: a caller that wants a
 * differentiable copy goes through the public ops. */
#ifndef FUCINA_EXEC_KERNELS_COPY_H
#define FUCINA_EXEC_KERNELS_COPY_H

#include "exec/tensor.h"

/* A new handle sharing t's storage: never t itself retained, since inside a
 * scope the caller's reference must be one the scope owns. NULL with the
 * error recorded (naming op) on failure. */
fc_tensor *fc__copy_alias(fc_ctx *ctx, const char *op, fc_tensor *t);
/* A new contiguous tensor holding t's elements (any layout, any dtype). */
fc_tensor *fc__copy_clone(fc_ctx *ctx, const char *op, fc_tensor *t);
/* t's elements, contiguous: an alias when t already is, else a clone. */
fc_tensor *fc__copy_contiguous(fc_ctx *ctx, const char *op, fc_tensor *t);
/* t itself (retained) when contiguous, else a contiguous clone: for a
 * kernel's own reading of its input. The caller releases either. */
fc_tensor *fc__copy_contiguous_ref(fc_ctx *ctx, const char *op, fc_tensor *t);
/* t converted to dtype (an alias when it already has it). Block-quantized
 * dtypes convert only to and from f32 (FC_ERR_DTYPE otherwise); an invalid
 * dtype is FC_ERR_DTYPE. Runs no check_finite pass (the ops do). */
fc_tensor *fc__copy_cast(fc_ctx *ctx, const char *op, fc_tensor *t, fc_dtype dtype);
/* dst's elements = src's (fc__raw_copy_into's checks and results), large
 * copies into a contiguous destination split over the thread team. */
fc_status fc__copy_into(fc_ctx *ctx, const fc_raw *src, fc_raw *dst);

#endif /* FUCINA_EXEC_KERNELS_COPY_H */
