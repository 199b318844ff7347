/* SPDX-License-Identifier: MIT */
/* backward.c - the backward engine and the public autograd entry points.
 *
 * Backward collects the nodes reachable from the output, orders them by
 * creation id (descending: a node is always created after its inputs'
 * nodes, so this is a topological order), checks each node's saved values
 * against their generations, runs its rule with grad mode off, reduces
 * broadcast gradients to the input shapes and accumulates them into the
 * input nodes or the leaves' staging slots (the arithmetic, region
 * gradients included, is in accumulate.c). Gradient tensors are pooled like
 * any other. A create_graph walk (fc_autograd_grad's create_graph) runs the
 * rules with grad mode on instead and accumulates with recorded ops
 * (graph_grad.c), so the gradients it makes can be differentiated again.
 *
 * A failed backward has no effect: leaf gradients are staged and land in
 * the leaves only after every node ran (finish_walk), and saved values are
 * freed only then, so a failure leaves the leaves as they were and the
 * graph walkable again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/copy.h"
#include "ag/tape.h"
#include "exec/profile.h"


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

/* A create_graph walk's handling of a rule's constant gradient *g (one
 * that requires no grad). A constant is the right answer where the
 * gradient depends on no value of the graph (relu's g * mask under a
 * constant upstream gradient, a bias's row sum of a constant, a product's
 * gradient through a constant factor: their higher derivatives are zero),
 * and wrong where a rule computed it with a fused kernel from values that
 * carry the graph. What tells the two apart:
 *   - the upstream gradient carries the graph (gout_graph): a gradient is
 *     linear in it, so a constant that is not zero ignored it; refused
 *     whatever the rule, bar the "[1] zero" a rule may return;
 *   - the rule read saved values with their graph identity (read_graph)
 *     and never asked fc__ag_create_graph (formed false): it has no
 *     recorded form, so its constant came from a kernel; refused.
 * A rule that took its recorded form (formed) knows which gradient reads
 * which value, so its constants stand: the engine cannot see that relu's
 * rule read y only to build a constant mask. When such a rule read the
 * graph, its constant joins the new graph (fc__ag_graph_constant: an
 * edge to the node, zero derivative), as PyTorch's threshold_backward of
 * a saved result requires grad, so asking for its higher derivatives
 * gives zeros; one made from constants alone (sum's ones) stays one. */
static fc_status graph_gin(fc_ctx *ctx, fc_node *n, bool gout_graph, bool read_graph, bool formed,
                           fc_tensor **g) {
    if ((*g)->flags & FC__T_REQUIRES_GRAD) return FC_OK;
    if (fc__single_value(&(*g)->raw) && fc__raw_numel(&(*g)->raw) > 0) {
        double v = fc__load_f64((*g)->raw.dtype, fc__raw_base(&(*g)->raw));
        if (v == 0) return FC_OK;
    }
    if (gout_graph || (read_graph && !formed)) return fc__ag_unsupported(ctx, n->op);
    if (!read_graph) return FC_OK;
    *g = fc__ag_graph_constant(ctx, n, *g);
    return *g ? FC_OK : fc__failed(ctx);
}

/* Runs node n's rule and adds its input gradients into the input nodes'
 * accumulators and the leaves' staging slots (gstage: a leaf's grad is
 * only changed when the whole backward succeeds); a create_graph walk
 * (w->create_graph) adds with recorded ops (graph_grad.c). */
static fc_status run_node(fc_ctx *ctx, fc_node *n, const fc__walk *w) {
    fc_status st;
    bool functional = w->functional, graph = w->create_graph;
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
    int64_t linked = graph ? fc__ag_linked_count(ctx) : 0;
    int64_t forms = graph ? fc__ag_form_count(ctx) : 0;
    bool gout_graph = graph && (gout->flags & FC__T_REQUIRES_GRAD);
    int64_t prof_start = ctx->profiling ? fc__profile_rule_enter(ctx) : 0;
    st = n->backward(ctx, n, gout, gin);
    if (ctx->profiling) fc__profile_rule_leave(ctx, n->op, prof_start);
    bool read_graph = graph && fc__ag_linked_count(ctx) != linked;
    bool formed = graph && fc__ag_form_count(ctx) != forms;
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
        /* fc_autograd_grad: a gradient nobody asked for goes nowhere */
        if (functional && (in->leaf ? !(in->leaf->flags & FC__T_WANTED)
                                    : !(in->node->run || in->node->want)))
            continue;
        if (check && (st = check_gin(ctx, n, k, gin[k])) != FC_OK) break;
        if (graph && (st = graph_gin(ctx, n, gout_graph, read_graph, formed, &gin[k])) != FC_OK)
            break;
        fc_dtype gdt = fc__grad_dtype(in->dtype);
        fc_tensor **target = in->node ? &in->node->gacc : &in->leaf->gstage;
        if (reg[k].on) {
            st = fc__ag_region_check(ctx, n, k, &reg[k], gin[k]);
            if (st == FC_OK && graph)
                st =
                    fc__ag_graph_add_region(ctx, target, gin[k], gdt, in->shape, in->rank, &reg[k]);
            else if (st == FC_OK)
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
        if ((in->node || in->leaf) && graph)
            st = fc__ag_graph_add_into(ctx, target, gin[k], gdt, in->shape, in->rank);
        else if (in->node)
            st = fc__ag_add_into_node(ctx, target, gin[k], gdt, in->shape, in->rank);
        else if (in->leaf)
            st = fc__ag_add_into(ctx, target, gin[k], gdt, in->shape, in->rank);
    }
    if (gout) fc_release(gout); /* gin[] are scope-owned or borrowed */
    return st;
}

/* The end of a walk over list[0, ran) (the nodes whose rules ran, in
 * order) and the leaf outputs outs[0, n). On success each staged leaf
 * gradient lands in the leaf's grad (a move, or one in-place add that
 * allocates nothing, so it cannot fail; fc_autograd_grad leaves it staged
 * for the caller) and, without retain, the saved values are freed; in
 * check_finite mode a staged sum that overflowed fails the whole backward
 * first. On failure the staging is dropped and the saved values kept: the
 * leaves' gradients are what they were before the call and the graph can
 * be walked again. */
static fc_status check_stage(fc_ctx *ctx, fc_tensor *leaf, int k, const fc_node *n) {
    int64_t bad = leaf->gstage ? fc__count_non_finite(leaf->gstage) : 0;
    if (!bad) return FC_OK;
    char d[160], where[96] = "an output";
    if (!n && k < 0) snprintf(where, sizeof where, "used inside a checkpointed function");
    if (n)
        snprintf(where, sizeof where, "input %d of %s, tape node %lld", k, n->op,
                 (long long)n->id);
    return fc__fail(ctx, FC_ERR_NON_FINITE,
                    "backward: the summed gradient of the leaf %s (%s) has %lld non-finite "
                    "value%s; no gradient was changed",
                    fc__desc(leaf, d, (int)sizeof d), where, (long long)bad, bad == 1 ? "" : "s");
}

static void land_stage(fc_ctx *ctx, fc_tensor *leaf, fc_status st, bool functional) {
    if (!leaf || !leaf->gstage) return;
    if (st == FC_OK && functional) return; /* the caller takes it */
    fc_tensor *g = leaf->gstage;
    leaf->gstage = NULL;
    if (st == FC_OK && !leaf->grad) {
        leaf->grad = g; /* the staging reference moves */
        return;
    }
    if (st == FC_OK) /* same shape and dtype: adds in place, allocates nothing */
        fc__ag_add_into(ctx, &leaf->grad, g, g->raw.dtype, leaf->raw.shape, leaf->raw.rank);
    fc_release(g);
}

/* A nested walk's end: its leaves keep their staged gradients, listed on
 * the tape for the outermost walk (the list grows first, so a failure to
 * list one changes nothing but the outcome); on failure they are dropped
 * here, as the outer walk fails too. A checkpoint's stand-ins (FC__T_ALIAS)
 * are not listed: the checkpoint's rule takes their gradients. */
static fc_status finish_nested(fc_ctx *ctx, const fc__walk *w, fc_node **list, int64_t ran,
                               int n_out, fc_tensor *const *outs, fc_status st) {
    int64_t edges = n_out;
    for (int64_t i = 0; i < ran; i++) edges += list[i]->n_in;
    if (st == FC_OK) st = fc__ag_extra_reserve(ctx, edges);
    for (int64_t i = 0; i <= ran; i++) {
        int n_leaf = i < ran ? list[i]->n_in : n_out;
        for (int k = 0; k < n_leaf; k++) {
            fc_tensor *leaf = i < ran ? list[i]->in[k].leaf : outs[k]->node ? NULL : outs[k];
            if (!leaf || !leaf->gstage) continue;
            if (st != FC_OK) {
                fc_release(leaf->gstage);
                leaf->gstage = NULL;
            } else if (!(leaf->flags & FC__T_ALIAS)) {
                fc__ag_extra_add(ctx, leaf);
            }
        }
    }
    for (int64_t i = 0; i < ran && st == FC_OK && !w->retain; i++) {
        fc__ag_release_saved(list[i]);
        list[i]->freed = true;
    }
    return st;
}

static fc_status finish_walk(fc_ctx *ctx, const fc__walk *w, fc_node **list, int64_t ran,
                             int n_out, fc_tensor *const *outs, fc_status st) {
    if (w->nested) return finish_nested(ctx, w, list, ran, n_out, outs, st);
    int64_t n_extra = 0;
    fc_tensor **extra = fc__ag_extra_list(ctx, &n_extra); /* from checkpoints' recomputes */
    for (int64_t i = 0; i < ran && st == FC_OK && ctx->check_finite; i++)
        for (int k = 0; k < list[i]->n_in && st == FC_OK; k++)
            if (list[i]->in[k].leaf) st = check_stage(ctx, list[i]->in[k].leaf, k, list[i]);
    for (int i = 0; i < n_out && st == FC_OK && ctx->check_finite; i++)
        if (!outs[i]->node) st = check_stage(ctx, outs[i], 0, NULL);
    for (int64_t i = 0; i < n_extra && st == FC_OK && ctx->check_finite; i++)
        st = check_stage(ctx, extra[i], -1, NULL);
    for (int64_t i = 0; i < ran; i++) {
        fc_node *n = list[i];
        for (int k = 0; k < n->n_in; k++) land_stage(ctx, n->in[k].leaf, st, w->functional);
        if (st == FC_OK && !w->retain) {
            fc__ag_release_saved(n);
            n->freed = true;
        }
    }
    for (int i = 0; i < n_out; i++)
        if (!outs[i]->node) land_stage(ctx, outs[i], st, w->functional);
    for (int64_t i = 0; i < n_extra; i++) land_stage(ctx, extra[i], st, w->functional);
    fc__ag_extra_clear(ctx);
    return st;
}

/* ---- hooks in the walk: when is a gradient final? ----------------------------------
 * A node's output gradient is final when its turn comes (every consumer has
 * a higher id and ran before it). A leaf's is final once every node that
 * feeds it has run: with leaf hooks present the walk counts, per hooked
 * leaf, the edges of the nodes that will run (hooks->pending) and runs the
 * leaf's hooks when the count reaches 0, so they fire in the middle of the
 * walk, as early as the graph allows. */

static bool leaf_counts(const fc__walk *w, const fc_tensor *leaf) {
    return leaf && leaf->hooks && (!w->functional || (leaf->flags & FC__T_WANTED));
}

static fc_status leaf_hooks(fc_ctx *ctx, fc_tensor *leaf) {
    char d[160], who[200];
    snprintf(who, sizeof who, "the leaf %s", fc__desc(leaf, d, (int)sizeof d));
    return fc__ag_run_hooks(ctx, leaf->hooks, &leaf->gstage, leaf->raw.shape, leaf->raw.rank,
                            who);
}

/* After node n ran (or was skipped): its hooked leaves whose last edge this
 * was get their hooks. */
static fc_status leaf_edges_done(fc_ctx *ctx, const fc__walk *w, fc_node *n) {
    fc_status st = FC_OK;
    for (int k = 0; k < n->n_in && st == FC_OK; k++) {
        fc_tensor *leaf = n->in[k].leaf;
        if (!leaf_counts(w, leaf)) continue;
        if (--leaf->hooks->pending == 0 && leaf->gstage) st = leaf_hooks(ctx, leaf);
    }
    return st;
}

static fc_status node_hooks(fc_ctx *ctx, fc_node *n) {
    char who[200];
    snprintf(who, sizeof who, "the output of %s (tape node %lld)", n->op, (long long)n->id);
    return fc__ag_run_hooks(ctx, n->hooks, &n->gacc, n->out_shape, n->out_rank, who);
}

/* ---- the walk ----------------------------------------------------------------------- */

/* Collects the nodes reachable from the outputs (iterative DFS; the stack
 * array doubles as the result list: [0, count) visited, pushed in order),
 * sorted by descending id. NULL after recording FC_ERR_OOM. */
static fc_node **collect(fc_ctx *ctx, const fc__walk *w, int n_out, fc_tensor *const *outs,
                         int64_t *count_out) {
    int64_t stamp = fc__ag_new_stamp(ctx);
    fc_node **list = stamp < 0 ? NULL : fc__ag_stack(ctx, 64 + (int64_t)n_out);
    if (!list) {
        fc__fail(ctx, FC_ERR_OOM, "%s: out of memory", w->fn);
        return NULL;
    }
    int64_t count = 0, top = 0;
    for (int i = 0; i < n_out; i++) {
        fc_node *m = outs[i]->node;
        if (!m || m->mark == stamp) continue;
        m->mark = stamp;
        list[count++] = m;
    }
    while (top < count) {
        fc_node *n = list[top++];
        bool bound = false;
        for (int b = 0; b < w->n_bounds && n->id < w->min_id; b++) bound |= n == w->bounds[b];
        for (int k = 0; k < n->n_in && !bound; k++) {
            fc_node *m = n->in[k].node;
            if (!m || m->mark == stamp) continue;
            m->mark = stamp;
            list = fc__ag_stack(ctx, count + 1);
            if (!list) {
                fc__fail(ctx, FC_ERR_OOM, "%s: out of memory", w->fn);
                return NULL;
            }
            list[count++] = m;
        }
    }
    if (w->n_bounds) { /* drop the bounds: the outer walk runs them */
        int64_t kept = 0;
        for (int64_t i = 0; i < count; i++) {
            bool bound = false;
            for (int b = 0; b < w->n_bounds && list[i]->id < w->min_id; b++)
                bound |= list[i] == w->bounds[b];
            if (!bound) list[kept++] = list[i];
        }
        count = kept;
    }
    for (int64_t i = 0; i < count && w->nested; i++) {
        if (list[i]->id >= w->min_id) continue;
        fc__fail(ctx, FC_ERR_INVALID_ARG,
                 "%s: the function used the output of %s (tape node %lld), a tensor made before "
                 "the checkpoint that requires grad but is not one of its inputs; pass it as "
                 "an input (leaves, such as parameters, may be used directly)",
                 w->fn, list[i]->op, (long long)list[i]->id);
        return NULL;
    }
    sort_by_id_desc(list, count);
    *count_out = count;
    return list;
}

/* Which rules run: all for fc_backward; for fc_autograd_grad those with an
 * input that is a wanted leaf or a node that runs or is wanted (ascending
 * ids: a node's inputs are decided before it). */
static void plan_runs(const fc__walk *w, fc_node **list, int64_t count) {
    for (int64_t i = count - 1; i >= 0; i--) {
        fc_node *n = list[i];
        bool run = !w->functional;
        for (int k = 0; k < n->n_in && !run; k++) {
            const fc__ag_input *in = &n->in[k];
            run = in->leaf ? (in->leaf->flags & FC__T_WANTED) != 0
                           : in->node && (in->node->run || in->node->want);
        }
        n->run = run;
    }
}

/* fc_autograd_grad without allow_unused: every input must get a gradient.
 * A wanted node does when the walk reaches it (every reachable node's
 * consumers hand it one), a wanted leaf when it is an output or a running
 * rule's input. Checked before any rule runs, so a refusal changes nothing. */
static fc_status check_reached(fc_ctx *ctx, const fc__walk *w, fc_node **list, int64_t count,
                               int n_out, fc_tensor *const *outs) {
    int64_t stamp = count ? list[0]->mark : -1;
    const unsigned wanted = FC__T_WANTED; /* only inputs get the mark: they are cleared below */
    for (int64_t i = 0; i < count; i++)
        for (int k = 0; k < list[i]->n_in && list[i]->run; k++) {
            fc_tensor *leaf = list[i]->in[k].leaf;
            if (leaf && (leaf->flags & wanted)) leaf->flags |= FC__T_REACHED;
        }
    for (int i = 0; i < n_out; i++)
        if (!outs[i]->node && (outs[i]->flags & wanted)) outs[i]->flags |= FC__T_REACHED;
    fc_status st = FC_OK;
    for (int j = 0; j < w->n_in && st == FC_OK; j++) {
        const fc_tensor *x = w->inputs[j];
        bool reached = x->node ? x->node->mark == stamp : (x->flags & FC__T_REACHED) != 0;
        if (!reached) {
            char d[160];
            st = fc__fail(ctx, FC_ERR_INVALID_ARG,
                          "%s: input %d (%s) is not reached from the outputs (no gradient path "
                          "leads to it); set allow_unused to get NULL for it",
                          w->fn, j, fc__desc(x, d, (int)sizeof d));
        }
    }
    for (int j = 0; j < w->n_in; j++) w->inputs[j]->flags &= ~(unsigned)FC__T_REACHED;
    return st;
}

static fc_status walk_graph(fc_ctx *ctx, const fc__walk *w, int n_out, fc_tensor *const *outs,
                            fc_tensor *const *gouts) {
    int64_t count = 0;
    fc_node **list = collect(ctx, w, n_out, outs, &count);
    if (!list) return fc_ctx_status(ctx);
    plan_runs(w, list, count);
    if (w->inputs) {
        fc_status st = check_reached(ctx, w, list, count, n_out, outs);
        if (st != FC_OK) return st;
    }
    bool count_leaves = fc__ag_leaf_hook_count(ctx) > 0;
    for (int64_t i = 0; i < count && count_leaves && w->nested; i++)
        for (int k = 0; k < list[i]->n_in; k++) {
            fc_tensor *leaf = list[i]->in[k].leaf;
            if (!leaf || !leaf->hooks) continue;
            char d[160];
            return fc__fail(ctx, FC_ERR_STATE,
                            "%s: the leaf %s used inside the checkpointed function has gradient "
                            "hooks, which a checkpoint does not support (its gradient is only "
                            "final after the outer backward)",
                            w->fn, fc__desc(leaf, d, (int)sizeof d));
        }
    if (count_leaves) {
        for (int pass = 0; pass < 2; pass++)
            for (int64_t i = 0; i < count; i++)
                for (int k = 0; k < list[i]->n_in; k++) {
                    fc_tensor *leaf = list[i]->in[k].leaf;
                    if (!leaf_counts(w, leaf)) continue;
                    leaf->hooks->pending = pass == 0 ? 0 : leaf->hooks->pending + list[i]->run;
                }
        for (int i = 0; i < n_out; i++)
            if (!outs[i]->node && outs[i]->hooks) outs[i]->hooks->pending = 0;
    }
    fc_status st = FC_OK;
    for (int i = 0; i < n_out && st == FC_OK; i++) {
        fc_tensor *o = outs[i];
        fc_dtype gdt = fc__grad_dtype(o->raw.dtype);
        fc_tensor **target = o->node ? &o->node->gacc /* d out / d out = grad_out */
                             : !w->functional || (o->flags & FC__T_WANTED) ? &o->gstage
                                                                           : NULL;
        if (target && w->create_graph)
            st = fc__ag_graph_add_into(ctx, target, gouts[i], gdt, o->raw.shape, o->raw.rank);
        else if (target && o->node)
            st = fc__ag_add_into_node(ctx, target, gouts[i], gdt, o->raw.shape, o->raw.rank);
        else if (target)
            st = fc__ag_add_into(ctx, target, gouts[i], gdt, o->raw.shape, o->raw.rank);
    }
    /* a leaf output nothing else feeds is final already (once, if listed twice) */
    for (int i = 0; i < n_out && st == FC_OK && count_leaves; i++) {
        fc_tensor *o = outs[i];
        if (o->node || !leaf_counts(w, o) || o->hooks->pending != 0 || !o->gstage) continue;
        o->hooks->pending = -1;
        st = leaf_hooks(ctx, o);
    }
    /* the nodes that ran are packed to the front, in order: list[0, ran) */
    int64_t ran = 0;
    for (int64_t i = 0; i < count && st == FC_OK; i++) {
        fc_node *n = list[i];
        if (n->gacc && n->hooks) st = node_hooks(ctx, n);
        /* the kept gradient goes to the user: private (an accumulator may
         * be shared, fc__ag_add_into_node) */
        if (st == FC_OK && n->gacc && n->want) {
            n->gkeep = fc__ag_private(ctx, n->gacc);
            if (!n->gkeep) st = fc_ctx_status(ctx);
        }
        if (st == FC_OK && n->gacc && n->run) {
            fc_scope_begin(ctx);
            st = run_node(ctx, n, w);
            fc_scope_end(ctx);
            list[ran++] = n; /* a failed node may have staged some inputs too */
        } else if (n->gacc) { /* pruned, or no gradient flowed (e.g. an unused branch) */
            fc_release(n->gacc);
            n->gacc = NULL;
        }
        if (st == FC_OK && count_leaves && n->run) st = leaf_edges_done(ctx, w, n);
    }
    /* on failure drop partial accumulations so a retry starts clean (the
     * packing above only overwrote nodes whose gacc is already NULL) */
    for (int64_t i = 0; i < count; i++) {
        if (list[i]->gacc) {
            fc_release(list[i]->gacc);
            list[i]->gacc = NULL;
        }
        if (st != FC_OK && list[i]->gkeep) {
            fc_release(list[i]->gkeep);
            list[i]->gkeep = NULL;
        }
    }
    return finish_walk(ctx, w, list, ran, n_out, outs, st);
}

/* Everything the walk creates lives in this scope unless it is kept as a
 * gradient. */
fc_status fc__ag_walk(fc_ctx *ctx, const fc__walk *w, int n_out, fc_tensor *const *outs,
                      fc_tensor *const *gouts) {
    if (fc__ag_walking(ctx) && !w->nested)
        return fc__fail(ctx, FC_ERR_STATE,
                        "%s: called from a gradient hook during a backward of the same context",
                        w->fn);
    if (ctx->check_finite) {
        for (int i = 0; i < n_out; i++) {
            int64_t bad = fc__count_non_finite(gouts[i]);
            char which[32] = "";
            if (n_out > 1) snprintf(which, sizeof which, " %d", i);
            if (bad)
                return fc__fail(ctx, FC_ERR_NON_FINITE,
                                "%s: the output gradient%s has %lld non-finite value%s", w->fn,
                                which, (long long)bad, bad == 1 ? "" : "s");
        }
    }
    fc_scope_begin(ctx);
    /* a plain walk records nothing; a create_graph walk records everything,
     * whatever grad mode the caller is in */
    int depth = ctx->no_grad_depth;
    if (w->create_graph)
        ctx->no_grad_depth = 0;
    else
        fc_no_grad_begin(ctx);
    fc__ag_walk_save save;
    fc__ag_walk_enter(ctx, w, &save);
    fc_status st = walk_graph(ctx, w, n_out, outs, gouts);
    fc__ag_walk_leave(ctx, &save);
    if (w->create_graph)
        ctx->no_grad_depth = depth;
    else
        fc_no_grad_end(ctx);
    fc_scope_end(ctx);
    return st;
}

static fc_status backward_impl(fc_ctx *ctx, fc_tensor *out, fc_tensor *grad_out, bool retain,
                               const char *fn) {
    fc__walk w = {.fn = fn, .functional = false, .retain = retain};
    if (fc__ag_walking(ctx)) return fc__ag_walk(ctx, &w, 1, &out, &grad_out); /* refuses */
    if (!out->node && !(out->flags & FC__T_LEAF))
        return fc__fail(ctx, FC_ERR_NO_GRAD,
                        "%s: the output does not require grad (no input of the ops that made it "
                        "requires grad, or it was made under fc_no_grad_begin)",
                        fn);
    return fc__ag_walk(ctx, &w, 1, &out, &grad_out);
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
    /* a leaf output's gradient is grad_out itself: held once more for the
     * call, the engine copies it instead of adopting the caller's tensor as
     * fc_grad (which later backwards would then add into in place) */
    bool hold = !out->node;
    if (hold) fc_retain(grad_out);
    fc_status st = backward_impl(ctx, out, grad_out, retain_graph, "fc_backward_with");
    if (hold) fc_release(grad_out);
    return st;
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
    fc_status st = one ? backward_impl(ctx, loss, one, false, "fc_backward") : fc_ctx_status(ctx);
    fc_scope_end(ctx);
    return st;
}
