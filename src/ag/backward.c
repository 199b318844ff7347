/* backward.c - the backward engine and the public autograd entry points.
 *
 * Backward collects the nodes reachable from the output, orders them by
 * creation id (descending: a node is always created after its inputs'
 * nodes, so this is a topological order), checks each node's saved values
 * against their generations, runs its rule with grad mode off, reduces
 * broadcast gradients to the input shapes and accumulates them into the
 * input nodes or the leaves' staging slots (the arithmetic, region
 * gradients included, is in accumulate.c). Gradient tensors are pooled like
 * any other.
 *
 * A failed backward has no effect: leaf gradients are staged and land in
 * the leaves only after every node ran (finish_walk), and saved values are
 * freed only then, so a failure leaves the leaves as they were and the
 * graph walkable again. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/copy.h"
#include "ag/tape.h"


/* ---- the engine -------------------------------------------------------------------- */

static int cmp_id_desc(const void *a, const void *b) {
    const fc_node *x = *(fc_node *const *)a, *y = *(fc_node *const *)b;
    return x->id < y->id ? 1 : x->id > y->id ? -1 : 0;
}

/* Small graphs (the common per-step case of a few ops) sort by insertion:
 * the DFS already lists them almost in order, and qsort's set-up costs
 * more than the whole sort. */
static void sort_by_id_desc(fc_node **list, int64_t count) {
    if (count > 32) {
        qsort(list, (size_t)count, sizeof *list, cmp_id_desc);
        return;
    }
    for (int64_t i = 1; i < count; i++) {
        fc_node *x = list[i];
        int64_t j = i;
        for (; j > 0 && list[j - 1]->id < x->id; j--) list[j] = list[j - 1];
        list[j] = x;
    }
}

static fc_status check_saved(fc_ctx *ctx, fc_node *n) {
    for (int k = 0; k < n->n_saved; k++) {
        fc__saved *s = &n->saved[k];
        if (!s->raw.buf) continue;
        uint32_t now = fc__buffer_generation(s->raw.buf);
        if (now != s->generation) {
            char sh[160];
            fc__shape_str(s->raw.shape, s->raw.rank, sh, (int)sizeof sh);
            return fc__fail(ctx, FC_ERR_SAVED_MODIFIED,
                            "backward of %s (tape node %lld): saved %s %s %s was modified in "
                            "place after it was saved (generation %u, now %u)",
                            n->op, (long long)n->id, s->role, sh, fc_dtype_name(s->raw.dtype),
                            s->generation, now);
        }
    }
    return FC_OK;
}

/* check_finite mode: refuses a gradient with NaN or inf, naming who made it. */
static fc_status check_gin(fc_ctx *ctx, const fc_node *n, int k, const fc_tensor *g) {
    int64_t bad = fc__count_non_finite(g);
    if (!bad) return FC_OK;
    char d[160];
    return fc__fail(ctx, FC_ERR_NON_FINITE,
                    "backward of %s (tape node %lld): its gradient %s for input %d%s has %lld "
                    "non-finite value%s; no gradient was changed",
                    n->op, (long long)n->id, fc__desc(g, d, (int)sizeof d), k,
                    n->in[k].leaf ? " (a leaf)" : "", (long long)bad, bad == 1 ? "" : "s");
}

/* Runs node n's rule and adds its input gradients into the input nodes'
 * accumulators and the leaves' staging slots (gstage: a leaf's grad is
 * only changed when the whole backward succeeds). */
static fc_status run_node(fc_ctx *ctx, fc_node *n) {
    fc_status st;
    if (n->freed)
        return fc__fail(ctx, FC_ERR_STATE,
                        "backward of %s (tape node %lld): its saved values were freed by an "
                        "earlier backward; pass retain_graph to walk a graph twice",
                        n->op, (long long)n->id);
    if ((st = check_saved(ctx, n)) != FC_OK) return st;
    fc_tensor *gin[FC__AG_MAX_IN] = {0};
    fc__ag_region reg[FC__AG_MAX_IN]; /* only .on is read unless a rule sets a region */
    for (int k = 0; k < FC__AG_MAX_IN; k++) reg[k].on = false;
    fc_tensor *gout = n->gacc;
    n->gacc = NULL;
    n->regions = reg;
    /* the rule's own ops do not check: the engine checks what the rule
     * returns, so the message names this node and the input */
    bool check = ctx->check_finite;
    ctx->check_finite = false;
    st = n->backward(ctx, n, gout, gin);
    ctx->check_finite = check;
    n->regions = NULL;
    if (st == FC_OK) st = fc_ctx_status(ctx);
    /* gout is done with unless a rule handed it on as it is: dropping it now
     * leaves a view of it (a reshape's gradient) the only user of its storage,
     * so the view can become the next accumulator without a copy */
    bool handed_on = false;
    for (int k = 0; k < n->n_in; k++) handed_on |= gin[k] == gout;
    if (!handed_on) {
        fc_release(gout);
        gout = NULL;
    }
    for (int k = 0; k < n->n_in && st == FC_OK; k++) {
        fc__ag_input *in = &n->in[k];
        if (!in->needs) continue;
        if (!gin[k]) {
            st = fc__fail(ctx, FC_ERR_STATE, "backward of %s: no gradient for input %d", n->op, k);
            break;
        }
        if (check && (st = check_gin(ctx, n, k, gin[k])) != FC_OK) break;
        fc_dtype gdt = fc__grad_dtype(in->dtype);
        fc_tensor **target = in->node ? &in->node->gacc : &in->leaf->gstage;
        if (reg[k].on) {
            st = fc__ag_region_check(ctx, n, k, &reg[k], gin[k]);
            if (st == FC_OK)
                st = fc__ag_add_region(ctx, target, gin[k], gdt, in->shape, in->rank, &reg[k]);
            continue;
        }
        int64_t common[FC_MAX_RANK];
        int cr;
        if (!fc__shape_equal(gin[k]->raw.shape, gin[k]->raw.rank, in->shape, in->rank) &&
            fc__shape_broadcast(gin[k]->raw.shape, gin[k]->raw.rank, in->shape, in->rank, common,
                                &cr) != FC_OK) {
            char a[160], b[160];
            st = fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                          "backward of %s (tape node %lld): the gradient %s of input %d does not "
                          "broadcast with the input's shape %s",
                          n->op, (long long)n->id, fc__desc(gin[k], a, (int)sizeof a), k,
                          fc__shape_str(in->shape, in->rank, b, (int)sizeof b));
            break;
        }
        if (in->node || in->leaf)
            st = fc__ag_add_into(ctx, target, gin[k], gdt, in->shape, in->rank);
    }
    if (gout) fc_release(gout); /* gin[] are scope-owned or borrowed */
    return st;
}

/* The end of a walk over list[0, ran) (the nodes whose rules ran, in
 * order). On success each staged leaf gradient lands in the leaf's grad (a
 * move, or one in-place add that allocates nothing, so it cannot fail) and,
 * without retain, the saved values are freed; in check_finite mode a
 * staged sum that overflowed fails the whole backward first. On failure
 * the staging is dropped and the saved values kept: the leaves' gradients
 * are what they were before the call and the graph can be walked again. */
static fc_status finish_walk(fc_ctx *ctx, fc_node **list, int64_t ran, fc_status st,
                             bool retain) {
    for (int64_t i = 0; i < ran && st == FC_OK && ctx->check_finite; i++)
        for (int k = 0; k < list[i]->n_in && st == FC_OK; k++) {
            fc_tensor *leaf = list[i]->in[k].leaf;
            if (!leaf || !leaf->gstage) continue;
            int64_t bad = fc__count_non_finite(leaf->gstage);
            if (bad) {
                char d[160];
                st = fc__fail(ctx, FC_ERR_NON_FINITE,
                              "backward: the summed gradient of the leaf %s (input %d of %s, tape "
                              "node %lld) has %lld non-finite value%s; no gradient was changed",
                              fc__desc(leaf, d, (int)sizeof d), k, list[i]->op,
                              (long long)list[i]->id, (long long)bad, bad == 1 ? "" : "s");
            }
        }
    for (int64_t i = 0; i < ran; i++) {
        fc_node *n = list[i];
        for (int k = 0; k < n->n_in; k++) {
            fc_tensor *leaf = n->in[k].leaf;
            if (!leaf || !leaf->gstage) continue;
            fc_tensor *g = leaf->gstage;
            leaf->gstage = NULL;
            if (st == FC_OK && !leaf->grad) {
                leaf->grad = g; /* the staging reference moves */
                continue;
            }
            if (st == FC_OK) /* same shape and dtype: adds in place, allocates nothing */
                fc__ag_add_into(ctx, &leaf->grad, g, g->raw.dtype, leaf->raw.shape,
                                leaf->raw.rank);
            fc_release(g);
        }
        if (st == FC_OK && !retain) {
            fc__ag_release_saved(n);
            n->freed = true;
        }
    }
    return st;
}

static fc_status backward_graph(fc_ctx *ctx, fc_tensor *out, fc_tensor *grad_out, bool retain);

/* Everything backward creates lives in this scope unless it is kept as a
 * gradient. */
static fc_status backward_impl(fc_ctx *ctx, fc_tensor *out, fc_tensor *grad_out, bool retain) {
    if (ctx->check_finite) {
        int64_t bad = fc__count_non_finite(grad_out);
        if (bad)
            return fc__fail(ctx, FC_ERR_NON_FINITE,
                            "fc_backward: the output gradient has %lld non-finite value%s",
                            (long long)bad, bad == 1 ? "" : "s");
    }
    fc_scope_begin(ctx);
    fc_no_grad_begin(ctx);
    fc_status st = backward_graph(ctx, out, grad_out, retain);
    fc_no_grad_end(ctx);
    fc_scope_end(ctx);
    return st;
}

static fc_status backward_graph(fc_ctx *ctx, fc_tensor *out, fc_tensor *grad_out, bool retain) {
    if (!out->node) {
        if (out->flags & FC__T_LEAF) { /* d out / d out = grad_out; one add: all or nothing */
            return fc__ag_add_into(ctx, &out->grad, grad_out, fc__grad_dtype(out->raw.dtype),
                                   out->raw.shape, out->raw.rank);
        }
        return fc__fail(ctx, FC_ERR_NO_GRAD,
                        "fc_backward: the output does not require grad (no input of the ops "
                        "that made it requires grad, or it was made under fc_no_grad_begin)");
    }
    int64_t stamp = fc__ag_new_stamp(ctx);
    if (stamp < 0) return fc__fail(ctx, FC_ERR_OOM, "fc_backward: out of memory");
    /* collect reachable nodes (iterative DFS); the stack array doubles as the
     * result list: [0, count) visited, pushed in order */
    int64_t count = 0, top = 0;
    fc_node **list = fc__ag_stack(ctx, 64);
    if (!list) return fc__fail(ctx, FC_ERR_OOM, "fc_backward: out of memory");
    out->node->mark = stamp;
    list[count++] = out->node;
    while (top < count) {
        fc_node *n = list[top++];
        for (int k = 0; k < n->n_in; k++) {
            fc_node *m = n->in[k].node;
            if (!m || m->mark == stamp) continue;
            m->mark = stamp;
            list = fc__ag_stack(ctx, count + 1);
            if (!list) return fc__fail(ctx, FC_ERR_OOM, "fc_backward: out of memory");
            list[count++] = m;
        }
    }
    sort_by_id_desc(list, count);

    fc_status st = FC_OK;
    fc_dtype gdt = fc__grad_dtype(out->raw.dtype);
    st = fc__ag_add_into(ctx, &out->node->gacc, grad_out, gdt, out->raw.shape, out->raw.rank);
    /* the nodes that ran are packed to the front, in order: list[0, ran) */
    int64_t ran = 0;
    for (int64_t i = 0; i < count && st == FC_OK; i++) {
        fc_node *n = list[i];
        if (!n->gacc) continue; /* reachable but no gradient flowed (e.g. unused branch) */
        fc_scope_begin(ctx);
        st = run_node(ctx, n);
        fc_scope_end(ctx);
        list[ran++] = n; /* a failed node may have staged some inputs too */
    }
    /* on failure drop partial accumulations so a retry starts clean (the
     * packing above only overwrote nodes whose gacc is already NULL) */
    for (int64_t i = 0; i < count; i++) {
        if (list[i]->gacc) {
            fc_release(list[i]->gacc);
            list[i]->gacc = NULL;
        }
    }
    return finish_walk(ctx, list, ran, st, retain);
}

fc_status fc_backward_with(fc_ctx *ctx, fc_tensor *out, fc_tensor *grad_out, bool retain_graph) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!out || !grad_out)
        return fc__fail(ctx, FC_ERR_NULL_ARG, "fc_backward_with: %s is NULL",
                        !out ? "out" : "grad_out");
    fc_status same = FC__CHECK_SAME_CTX(ctx, "fc_backward_with", out, "out");
    if (same == FC_OK) same = FC__CHECK_SAME_CTX(ctx, "fc_backward_with", grad_out, "grad_out");
    if (same != FC_OK) return same;
    if (!fc__shape_equal(out->raw.shape, out->raw.rank, grad_out->raw.shape, grad_out->raw.rank)) {
        char a[160], b[160];
        return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                        "fc_backward_with: grad_out %s does not match the output %s",
                        fc__desc(grad_out, b, (int)sizeof b), fc__desc(out, a, (int)sizeof a));
    }
    if (!fc_dtype_is_float(grad_out->raw.dtype))
        return fc__fail(ctx, FC_ERR_DTYPE, "fc_backward_with: grad_out dtype %s is not a float",
                        fc_dtype_name(grad_out->raw.dtype));
    return backward_impl(ctx, out, grad_out, retain_graph);
}

fc_status fc_backward(fc_ctx *ctx, fc_tensor *loss) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!loss) return fc__fail(ctx, FC_ERR_NULL_ARG, "fc_backward: loss is NULL");
    if (loss->ctx != ctx) return FC__CHECK_SAME_CTX(ctx, "fc_backward", loss, "the loss");
    if (fc__raw_numel(&loss->raw) != 1) {
        char d[160];
        return fc__fail(ctx, FC_ERR_INVALID_SHAPE,
                        "fc_backward: the loss %s has %lld elements; use fc_backward_with for "
                        "non-scalar outputs",
                        fc__desc(loss, d, (int)sizeof d), (long long)fc__raw_numel(&loss->raw));
    }
    fc_scope_begin(ctx);
    fc_tensor *one = fc_ones(ctx, fc__grad_dtype(loss->raw.dtype), loss->raw.shape, loss->raw.rank);
    fc_status st = one ? backward_impl(ctx, loss, one, false) : fc_ctx_status(ctx);
    fc_scope_end(ctx);
    return st;
}
