/* SPDX-License-Identifier: MIT */
/* ops/pointwise_grad.h - what the recording code of the pointwise op files
 * (ops/binary.c, compare.c, unary.c) shares. Private to src/ops. */
#ifndef FUCINA_OPS_POINTWISE_GRAD_H
#define FUCINA_OPS_POINTWISE_GRAD_H

#include <assert.h>

#include "ag/tape.h"

/* Saves t as saved value number `slot` of nd (fc__ag_save's results).
 * fc__ag_save appends, so a node's values are saved in the order of the
 * named slots its file declares; the assertion holds the recording code to
 * that order. */
static inline fc_status pw_save_at(fc_ctx *ctx, fc_node *nd, int slot, const char *role,
                                   const fc_tensor *t) {
    assert(nd->n_saved == slot);
    (void)slot;
    return fc__ag_save(ctx, nd, role, t);
}

#endif /* FUCINA_OPS_POINTWISE_GRAD_H */
