/* ag/grad_matmul.h - the backward rules of fc_matmul and fc_linear
 * (src/exec/kernels/matmul.c records them). Each follows the
 * fc__backward_fn contract of ag/tape.h.
 *
 * Node layouts:
 *   matmul: inputs {a, b}; saved[0] = a, saved[1] = b (the dequantized f32
 *           copy when b was block-quantized).
 *   linear: inputs {x, weight, bias (may be NULL)}; saved[0] = x,
 *           saved[1] = weight. */
#ifndef FUCINA_AG_GRAD_MATMUL_H
#define FUCINA_AG_GRAD_MATMUL_H

#include "ag/tape.h"

fc_status fc__grad_matmul(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_linear(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

#endif /* FUCINA_AG_GRAD_MATMUL_H */
