/* SPDX-License-Identifier: MIT */
/* checkpoint.c - fc_grad_checkpoint: recompute instead of store.
 *
 * The forward runs the user's function with grad mode off, so none of its
 * intermediate values is kept, and records one node over the checkpoint's
 * inputs that saves just them (with their generations, like any saved
 * value), the function and the RNG state it started from. The node's rule
 * rebuilds the function's graph: it restores the RNG, runs the function
 * again with grad mode on over stand-ins for the saved inputs (leaves that
 * require grad as the originals did), and walks that graph from the
 * incoming gradient with a nested walk (backward.c, fc__walk.nested).
 *
 * Bit identity with the plain run comes from making the recompute add
 * every contribution in the order and into the accumulator the plain walk
 * would have used:
 *   - the recomputed graph's nodes are created in the original order, so
 *     the nested walk runs them in the order the plain walk would;
 *   - parameters the function uses directly (leaves that are not inputs)
 *     are staged by the nested walk in their own staging slot, where the
 *     outer walk's contributions also go, and the outermost walk lands
 *     them with the rest (all or nothing);
 *   - before the recompute, the gradient the outer walk has already summed
 *     for input k is moved into stand-in k's staging slot, so the
 *     recompute's contributions add onto it one by one, as they would
 *     onto the input's own accumulator, instead of being summed apart and
 *     added once (which rounds differently when the input has other uses).
 * The rule hands the stand-ins' sums back as the inputs' gradients, and
 * the engine moves each into its (now empty) accumulator.
 *
 * In a create_graph walk (ckpt_graph) there are no stand-ins: the function
 * runs again on the inputs themselves, linked to the graph, so the
 * recomputed graph hangs off the first-order one, and a nested
 * create_graph walk stops at the inputs' nodes (fc__walk.bounds) and adds
 * straight into their accumulators, which the outer walk runs later. */
#include <string.h>

#include "ag/tape.h"

static const char *const FN = "fc_grad_checkpoint";

/* node->ext: what the rule needs to run the function again */
typedef struct ckpt_closure {
    fc_grad_checkpoint_fn fn;
    void *user;
    uint64_t seed, offset; /* the context RNG when the forward started */
} ckpt_closure;

/* saved value k is input k (node->n_saved == node->n_in) */

/* Where the outer walk sums input k's gradient. */
static fc_tensor **outer_target(fc_node *node, int k) {
    fc__ag_input *in = &node->in[k];
    return in->node ? &in->node->gacc : &in->leaf->gstage;
}

/* Whether the running walk wants input k's gradient (fc_autograd_grad
 * prunes the others). */
static bool outer_wants(const fc__walk *w, const fc_node *node, int k) {
    const fc__ag_input *in = &node->in[k];
    if (!in->needs) return false;
    if (!w || !w->functional) return true;
    return in->leaf ? (in->leaf->flags & FC__T_WANTED) != 0
                    : in->node && (in->node->run || in->node->want);
}

/* The earlier input index with the same source as input k, or k. */
static int first_of(const fc_node *node, int k) {
    for (int j = 0; j < k; j++) {
        const fc__ag_input *a = &node->in[j], *b = &node->in[k];
        if (b->needs && a->needs && a->node == b->node && a->leaf == b->leaf) return j;
    }
    return k;
}

static fc_status check_output(fc_ctx *ctx, const fc_node *node, const fc_tensor *out) {
    char a[160], b[160];
    if (out->ctx != ctx)
        return fc__fail(ctx, FC_ERR_CONTEXT, "%s: the recomputed output belongs to another context",
                        FN);
    if (!fc__shape_equal(out->raw.shape, out->raw.rank, node->out_shape, node->out_rank))
        return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                        "%s: the function returned %s when recomputed for backward, but %s in "
                        "the forward; a checkpointed function must compute the same thing",
                        FN, fc__desc(out, a, (int)sizeof a),
                        fc__shape_str(node->out_shape, node->out_rank, b, (int)sizeof b));
    if (out->raw.dtype != node->out_dtype)
        return fc__fail(ctx, FC_ERR_STATE,
                        "%s: the function returned dtype %s when recomputed for backward, but %s "
                        "in the forward; a checkpointed function must compute the same thing",
                        FN, fc_dtype_name(out->raw.dtype), fc_dtype_name(node->out_dtype));
    return FC_OK;
}

/* Runs the function again, grad mode on, from the saved RNG state; the
 * context's stream and grad mode are put back whatever happens. */
static fc_tensor *recompute(fc_ctx *ctx, const ckpt_closure *c, fc_tensor *const *alias, int n) {
    uint64_t seed = ctx->rng_seed, offset = ctx->rng_offset;
    int depth = ctx->no_grad_depth;
    ctx->rng_seed = c->seed;
    ctx->rng_offset = c->offset;
    ctx->no_grad_depth = 0;
    fc_tensor *out = c->fn(ctx, alias, n, c->user);
    ctx->no_grad_depth = depth;
    ctx->rng_seed = seed;
    ctx->rng_offset = offset;
    return out;
}

/* In a create_graph walk: fn runs again on the inputs themselves (linked
 * to the graph, so the recomputed graph hangs off the first-order one and
 * stays alive while the recorded gradients use it), and a nested
 * create_graph walk takes gout through it, adding straight into the
 * inputs' accumulators and staging the parameters' gradients, recorded;
 * the rule's own gradients are then zeros. */
static fc_status ckpt_graph(fc_ctx *ctx, fc_node *node, const ckpt_closure *c,
                            const fc__walk *outer, fc_tensor *gout, fc_tensor **gin) {
    int n = node->n_in, nb = 0;
    fc_tensor *in[FC__AG_MAX_IN] = {0};
    fc_node *bounds[FC__AG_MAX_IN];
    int64_t min_id = fc__ag_next_id(ctx); /* a leaf input's link node is part of the recompute */
    fc_status st = FC_OK;
    for (int k = 0; k < n && st == FC_OK; k++) {
        in[k] = fc__ag_saved_tensor(ctx, node, k);
        if (!in[k]) st = fc_ctx_status(ctx);
        if (node->in[k].node) bounds[nb++] = node->in[k].node;
    }
    fc_tensor *out = st == FC_OK ? recompute(ctx, c, in, n) : NULL;
    if (st == FC_OK && !out)
        st = fc_ctx_status(ctx) != FC_OK
                 ? fc_ctx_status(ctx)
                 : fc__fail(ctx, FC_ERR_STATE,
                            "%s: the function returned NULL when recomputed for backward "
                            "without recording an error",
                            FN);
    if (st == FC_OK) st = check_output(ctx, node, out);
    if (st == FC_OK && (out->flags & FC__T_REQUIRES_GRAD)) {
        fc__walk w = {.fn = FN,
                      .functional = outer->functional,
                      .retain = true,
                      .nested = true,
                      .min_id = min_id,
                      .create_graph = true,
                      .bounds = bounds,
                      .n_bounds = nb};
        st = fc__ag_walk(ctx, &w, 1, &out, &gout);
    }
    fc_release(out);
    for (int k = 0; k < n && st == FC_OK; k++) {
        if (!node->in[k].needs) continue;
        gin[k] = fc_zeros(ctx, fc__grad_dtype(node->in[k].dtype), (int64_t[]){1}, 1);
        if (!gin[k]) st = fc_ctx_status(ctx);
    }
    return st;
}

static fc_status ckpt_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    const ckpt_closure *c = node->ext;
    const fc__walk *outer = fc__ag_current_walk(ctx);
    int n = node->n_in;
    if (outer && outer->create_graph) return ckpt_graph(ctx, node, c, outer, gout, gin);
    fc_tensor *alias[FC__AG_MAX_IN] = {0};
    fc_status st = FC_OK;
    for (int k = 0; k < n && st == FC_OK; k++) {
        int j = first_of(node, k);
        if (j < k) {
            alias[k] = alias[j];
            continue;
        }
        alias[k] = fc__ag_saved_tensor(ctx, node, k); /* scope-owned: the rule's scope */
        if (!alias[k]) {
            st = fc_ctx_status(ctx);
            break;
        }
        if (!node->in[k].needs) continue;
        alias[k]->flags |= FC__T_REQUIRES_GRAD | FC__T_LEAF | FC__T_ALIAS;
        if (outer_wants(outer, node, k)) {
            alias[k]->flags |= FC__T_WANTED;
            fc_tensor **target = outer_target(node, k);
            /* see the top: contributions add onto it in place, so a node's
             * accumulator that others share (fc__ag_add_into_node) goes
             * over as a private copy */
            fc_tensor *own = *target ? fc__ag_private(ctx, *target) : NULL;
            if (*target && !own) {
                st = fc_ctx_status(ctx);
                break;
            }
            fc_release(*target);
            alias[k]->gstage = own;
            *target = NULL;
        }
    }
    fc_tensor *out = NULL;
    if (st == FC_OK) {
        int64_t min_id = fc__ag_next_id(ctx);
        out = recompute(ctx, c, alias, n);
        if (!out) {
            st = fc_ctx_status(ctx);
            if (st == FC_OK)
                st = fc__fail(ctx, FC_ERR_STATE,
                              "%s: the function returned NULL when recomputed for backward "
                              "without recording an error",
                              FN);
        }
        if (st == FC_OK) st = check_output(ctx, node, out);
        /* an output that needs no gradient (nothing inside requires grad)
         * contributes nothing */
        if (st == FC_OK && (out->flags & FC__T_REQUIRES_GRAD)) {
            fc__walk w = {.fn = FN,
                          .functional = outer && outer->functional,
                          .nested = true,
                          .min_id = min_id};
            st = fc__ag_walk(ctx, &w, 1, &out, &gout);
        }
    }
    fc_release(out); /* frees the recomputed graph (its saved values went with the walk) */
    for (int k = 0; k < n && st == FC_OK; k++) {
        if (!node->in[k].needs) continue;
        /* the stand-in's sum, or a zero for an input nothing reached, a
         * repeated input (its first listing carries the whole sum) or one
         * the walk does not want */
        fc_tensor *g = first_of(node, k) == k ? alias[k]->gstage : NULL;
        gin[k] = g ? g : fc_zeros(ctx, fc__grad_dtype(node->in[k].dtype), (int64_t[]){1}, 1);
        if (!gin[k]) st = fc_ctx_status(ctx);
    }
    for (int k = 0; k < n; k++)
        if (alias[k]) alias[k]->flags &= ~(unsigned)(FC__T_WANTED | FC__T_ALIAS);
    return st; /* the stand-ins, and with them gin[], live until the rule's scope ends */
}

fc_tensor *fc_grad_checkpoint(fc_ctx *ctx, fc_grad_checkpoint_fn fn, void *user,
                              fc_tensor *const *inputs, int n) {
    FC__CHECK_CTX(ctx);
    if (!fn || !inputs) {
        fc__fail(ctx, FC_ERR_NULL_ARG, "%s: %s is NULL", FN, !fn ? "fn" : "inputs");
        return NULL;
    }
    if (n < 1 || n > FC__AG_MAX_IN) {
        fc__fail(ctx, FC_ERR_INVALID_ARG,
                 "%s: n = %d inputs, expected 1 to %d (pass more through user: leaves used "
                 "that way get their gradients too)",
                 FN, n, FC__AG_MAX_IN);
        return NULL;
    }
    for (int k = 0; k < n; k++) {
        if (!inputs[k]) {
            fc__fail(ctx, FC_ERR_NULL_ARG, "%s: input %d is NULL", FN, k);
            return NULL;
        }
        if (inputs[k]->ctx != ctx) {
            fc__fail(ctx, FC_ERR_CONTEXT, "%s: input %d belongs to another context", FN, k);
            return NULL;
        }
    }
    bool record = ctx->no_grad_depth == 0;
    uint64_t seed = ctx->rng_seed, offset = ctx->rng_offset;
    fc_no_grad_begin(ctx);
    fc_tensor *res = fn(ctx, inputs, n, user);
    fc_no_grad_end(ctx);
    if (!res) {
        if (fc_ctx_status(ctx) == FC_OK)
            fc__fail(ctx, FC_ERR_STATE,
                     "%s: the function returned NULL without recording an "
                     "error",
                     FN);
        return NULL;
    }
    if (res->ctx != ctx) {
        fc__fail(ctx, FC_ERR_CONTEXT, "%s: the function returned a tensor of another context", FN);
        return NULL; /* not ours to release */
    }
    /* the result goes on a handle of our own, in the current scope like any
     * op's: the function may have returned a tensor the caller also holds
     * (an input, a parameter), or one kept out of its scopes */
    fc_raw v;
    fc_tensor *out = fc__raw_view(&res->raw, &v) == FC_OK ? fc__tensor_wrap(ctx, FN, &v) : NULL;
    fc_release(res);
    if (!out) {
        if (fc_ctx_status(ctx) == FC_OK) fc__fail(ctx, FC_ERR_OOM, "%s: out of memory", FN);
        return NULL;
    }
    if (!record) return out; /* grad mode off: the checkpoint is just a call */
    ckpt_closure *c = fc__ctx_alloc(ctx, sizeof *c);
    fc_node *nd = c ? fc__ag_record(ctx, "grad_checkpoint", ckpt_backward, out, n, inputs) : NULL;
    if (!nd) {
        if (c)
            fc__ctx_free(ctx, c, sizeof *c);
        else
            fc__fail(ctx, FC_ERR_OOM, "%s: out of memory", FN);
        fc_release(out);
        return NULL;
    }
    *c = (ckpt_closure){.fn = fn, .user = user, .seed = seed, .offset = offset};
    nd->ext = c;
    nd->ext_size = sizeof *c;
    for (int k = 0; k < n; k++)
        if (fc__ag_save(ctx, nd, "input", inputs[k]) != FC_OK) {
            fc_release(out); /* frees the node, the closure and what was saved */
            return NULL;
        }
    return out; /* the function's own ops ran the check_finite mode */
}
