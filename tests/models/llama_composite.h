/* SPDX-License-Identifier: MIT */
/* llama_composite.h - the Llama blocks (models/llama/blocks.h) composed
 * from public ops, for tests that cross-check the fused ones. Same
 * contracts as fc__llama_rope, fc__llama_swiglu and fc__llama_attention:
 * inputs borrowed, a new reference in the caller's scope or NULL with the
 * error recorded; NULL inputs propagate. */
#ifndef FUCINA_TESTS_LLAMA_COMPOSITE_H
#define FUCINA_TESTS_LLAMA_COMPOSITE_H

#include "fucina.h"

fc_tensor *lc_rope(fc_ctx *ctx, fc_tensor *x, int64_t n_dims, double base, double scale,
                   int64_t pos0);
fc_tensor *lc_swiglu(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
fc_tensor *lc_attention(fc_ctx *ctx, fc_tensor *q, fc_tensor *k, fc_tensor *v);

#endif
