/* SPDX-License-Identifier: MIT */
/* grad_api.c - fc_autograd_grad, the functional gradient (PyTorch's
 * torch.autograd.grad): gradients of outputs with respect to chosen
 * inputs, returned as new tensors, with no leaf's fc_grad touched.
 *
 * It is the backward walk in its functional mode (backward.c): the inputs
 * are flagged for the walk (FC__T_WANTED on leaves, want on nodes), rules
 * that lead to no input are pruned, a leaf input's gradient is summed in
 * its staging slot as fc_backward would, a non-leaf input's is kept when
 * its node's turn comes; then this file hands them to the caller. The
 * flags are transient: set after validation, cleared before returning,
 * success or not. */
#include <string.h>

#include "ag/tape.h"

static const char *const FN = "fc_autograd_grad";

static fc_status check_args(fc_ctx *ctx, fc_tensor *const *outputs,
                            fc_tensor *const *grad_outputs, int n_out, fc_tensor *const *inputs,
                            int n_in, fc_tensor **grads) {
    char d[160], e[160];
    if (!outputs || !inputs || !grads)
        return fc__fail(ctx, FC_ERR_NULL_ARG, "%s: %s is NULL", FN,
                        !outputs ? "outputs" : !inputs ? "inputs" : "grads");
    if (n_out < 1 || n_in < 1)
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: n_out %d and n_in %d must be >= 1", FN,
                        n_out, n_in);
    if (fc__ag_walking(ctx))
        return fc__fail(ctx, FC_ERR_STATE, "%s: called from a gradient hook during a backward",
                        FN);
    for (int i = 0; i < n_out; i++) {
        fc_tensor *o = outputs[i], *g = grad_outputs ? grad_outputs[i] : NULL;
        if (!o) return fc__fail(ctx, FC_ERR_NULL_ARG, "%s: output %d is NULL", FN, i);
        if (o->ctx != ctx)
            return fc__fail(ctx, FC_ERR_CONTEXT, "%s: output %d belongs to another context", FN,
                            i);
        if (!(o->flags & FC__T_REQUIRES_GRAD))
            return fc__fail(ctx, FC_ERR_NO_GRAD, "%s: output %d (%s) does not require grad", FN,
                            i, fc__desc(o, d, (int)sizeof d));
        if (!g) {
            if (fc__raw_numel(&o->raw) != 1)
                return fc__fail(ctx, FC_ERR_INVALID_SHAPE,
                                "%s: output %d (%s) has %lld elements; a NULL grad_output "
                                "(ones) needs a one-element output",
                                FN, i, fc__desc(o, d, (int)sizeof d),
                                (long long)fc__raw_numel(&o->raw));
            continue;
        }
        if (g->ctx != ctx)
            return fc__fail(ctx, FC_ERR_CONTEXT, "%s: grad_output %d belongs to another context",
                            FN, i);
        if (!fc__shape_equal(o->raw.shape, o->raw.rank, g->raw.shape, g->raw.rank))
            return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                            "%s: grad_output %d %s does not match output %d %s", FN, i,
                            fc__desc(g, e, (int)sizeof e), i, fc__desc(o, d, (int)sizeof d));
        if (!fc_dtype_is_float(g->raw.dtype))
            return fc__fail(ctx, FC_ERR_DTYPE, "%s: grad_output %d dtype %s is not a float", FN,
                            i, fc_dtype_name(g->raw.dtype));
    }
    for (int j = 0; j < n_in; j++) {
        fc_tensor *x = inputs[j];
        if (!x) return fc__fail(ctx, FC_ERR_NULL_ARG, "%s: input %d is NULL", FN, j);
        if (x->ctx != ctx)
            return fc__fail(ctx, FC_ERR_CONTEXT, "%s: input %d belongs to another context", FN,
                            j);
        if (!(x->flags & FC__T_REQUIRES_GRAD))
            return fc__fail(ctx, FC_ERR_NO_GRAD,
                            "%s: input %d (%s) does not require grad, so it has no gradient", FN,
                            j, fc__desc(x, d, (int)sizeof d));
    }
    return FC_OK;
}

static void mark_inputs(fc_tensor *const *inputs, int n_in, bool on) {
    for (int j = 0; j < n_in; j++) {
        fc_tensor *x = inputs[j];
        if (x->node)
            x->node->want = on;
        else if (on)
            x->flags |= FC__T_WANTED;
        else
            x->flags &= ~(unsigned)FC__T_WANTED;
    }
}

/* Takes input j's gradient out of the walk: a leaf's staging or a node's
 * kept gradient (a new reference; NULL when it got none). An input listed
 * twice gets the first one's tensor again. */
static fc_tensor *take(fc_tensor *const *inputs, int j, fc_tensor **grads) {
    fc_tensor *x = inputs[j];
    for (int i = 0; i < j; i++)
        if (inputs[i] == x || (x->node && inputs[i]->node == x->node))
            return fc_retain(grads[i]);
    fc_tensor **slot = x->node ? &x->node->gkeep : &x->gstage;
    fc_tensor *g = *slot;
    *slot = NULL;
    return g;
}

fc_status fc_autograd_grad(fc_ctx *ctx, fc_tensor *const *outputs,
                           fc_tensor *const *grad_outputs, int n_out, fc_tensor *const *inputs,
                           int n_in, const fc_autograd_grad_opts *opts, fc_tensor **grads) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (grads && n_in > 0) memset(grads, 0, sizeof *grads * (size_t)n_in);
    fc_status st = check_args(ctx, outputs, grad_outputs, n_out, inputs, n_in, grads);
    if (st != FC_OK) return st;
    fc_autograd_grad_opts o = {0};
    if (opts) o = *opts;
    fc_scope_begin(ctx);
    fc_tensor **gouts = fc__ctx_alloc(ctx, sizeof *gouts * (size_t)n_out);
    if (!gouts)
        st = fc__fail(ctx, FC_ERR_OOM, "%s: out of memory", FN);
    else
        memset(gouts, 0, sizeof *gouts * (size_t)n_out);
    for (int i = 0; i < n_out && st == FC_OK; i++) {
        fc_tensor *g = grad_outputs ? grad_outputs[i] : NULL;
        /* the caller's gradient is held once more for the walk, so the
         * engine copies it rather than adopting it as an accumulator (it
         * would otherwise be handed back, or added into, as a result) */
        gouts[i] = g ? fc_retain(g)
                     : fc_ones(ctx, fc__grad_dtype(outputs[i]->raw.dtype), outputs[i]->raw.shape,
                               outputs[i]->raw.rank);
        if (!gouts[i]) st = fc_ctx_status(ctx);
        if (!g && gouts[i]) fc_retain(gouts[i]); /* released below like the caller's */
    }
    if (st == FC_OK) {
        mark_inputs(inputs, n_in, true);
        fc__walk w = {.fn = FN,
                      .functional = true,
                      .retain = o.retain_graph || o.create_graph,
                      .inputs = o.allow_unused ? NULL : inputs,
                      .n_in = n_in,
                      .create_graph = o.create_graph};
        st = fc__ag_walk(ctx, &w, n_out, outputs, gouts);
        for (int j = 0; j < n_in; j++) {
            fc_tensor *g = take(inputs, j, grads);
            if (st == FC_OK)
                grads[j] = g;
            else
                fc_release(g); /* the walk drops them on failure; nothing is left */
        }
        mark_inputs(inputs, n_in, false);
    }
    if (gouts) {
        for (int i = 0; i < n_out; i++) fc_release(gouts[i]);
        fc__ctx_free(ctx, gouts, sizeof *gouts * (size_t)n_out);
    }
    fc_scope_end(ctx);
    return st;
}
