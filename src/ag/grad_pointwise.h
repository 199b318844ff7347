/* ag/grad_pointwise.h - the backward rules of the pointwise families, which
 * the forward ops in src/exec/kernels/{binary,unary,compare}.c record.
 * Each follows the fc__backward_fn contract of ag/tape.h; the node layout
 * each expects (saved values, node->i / node->f) is described next to the
 * rule. */
#ifndef FUCINA_AG_GRAD_POINTWISE_H
#define FUCINA_AG_GRAD_POINTWISE_H

#include "ag/tape.h"

/* grad_binary.c */
fc_status fc__grad_add(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_sub(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_mul(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_div(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_pow(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_maximum(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_minimum(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

/* grad_compare.c */
fc_status fc__grad_where(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_masked_fill(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

/* grad_unary.c */
fc_status fc__grad_unary(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

/* A tensor in the gradient dtype gdt: t itself when it already is, else a
 * scope-owned converted copy (never an extra reference: rules release
 * nothing). NULL + error on failure. */
fc_tensor *fc__grad_as(fc_ctx *ctx, fc_tensor *t, fc_dtype gdt);

#endif /* FUCINA_AG_GRAD_POINTWISE_H */
