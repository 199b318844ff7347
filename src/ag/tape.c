/* SPDX-License-Identifier: MIT */
/* tape.c - recording nodes, saved values, and node lifetime.
 *
 * Nodes are reference counted: the output handle holds one reference and
 * each consumer node holds one per input edge. Releasing the last one frees
 * the saved values, drops the references on input nodes and leaves, and
 * parks the node on the context's free list (steady state: no allocator
 * calls). The context keeps a list of live nodes so teardown can free the
 * whole graph without walking handles. */
#include <string.h>

#include "ag/tape.h"

typedef struct fc__tape {
    fc_node *all;       /* live nodes */
    fc_node *free_list; /* recycled nodes (linked through next_all) */
    int64_t next_id;
    int64_t stamp; /* backward visit stamps */
    fc_node **stack;
    int64_t stack_cap;
    int64_t next_hook_id;
    int64_t leaf_hooks; /* leaves with a hook list */
    bool walking;       /* a backward walk is running (hooks may not start another) */
    const fc__walk *walk; /* the walk running now (the innermost when nested) */
    fc_node **spare;      /* a nested walk's node list, kept for the next one */
    int64_t spare_cap;
    fc_tensor **extra; /* leaves staged by nested walks (retained), for the outermost */
    int64_t n_extra, extra_cap;
    /* create_graph walks' evidence for backward.c's check of what a rule
     * returns (sampled around each rule): saved values read with their
     * graph identity (linked handles and raw reads of values that carry
     * one), and the times a rule asked fc__ag_create_graph and was told
     * yes (it took its recorded form) */
    int64_t linked;
    int64_t forms;
} fc__tape;

static void node_release(fc_ctx *ctx, fc_node *n);

static void node_drop_saved(fc_node *n) {
    for (int k = 0; k < n->n_saved; k++) fc__raw_release(&n->saved[k].raw);
}

static void node_drop_ext(fc_ctx *ctx, fc_node *n) {
    if (n->ext) fc__ctx_free(ctx, n->ext, n->ext_size);
    n->ext = NULL;
    n->ext_size = 0;
}

static void node_free(fc_ctx *ctx, fc_node *n) {
    fc__tape *tp = ctx->tape;
    node_drop_saved(n);
    node_drop_ext(ctx, n);
    if (n->aux) fc_release(n->aux);
    if (n->gacc) fc_release(n->gacc);
    if (n->gkeep) fc_release(n->gkeep);
    if (n->hooks) fc__ag_hooks_free(ctx, n->hooks);
    n->hooks = NULL;
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k].node) node_release(ctx, n->in[k].node);
        if (n->in[k].leaf) fc_release(n->in[k].leaf);
    }
    if (n->prev_all)
        n->prev_all->next_all = n->next_all;
    else
        tp->all = n->next_all;
    if (n->next_all) n->next_all->prev_all = n->prev_all;
    n->next_all = tp->free_list;
    tp->free_list = n;
}

static void node_release(fc_ctx *ctx, fc_node *n) {
    if (--n->refs == 0) node_free(ctx, n);
}

/* Context teardown: every handle is about to be destroyed, so free nodes
 * without touching handles, then the recycled nodes and the tape itself. */
static void tape_free(fc_ctx *ctx) {
    fc__tape *tp = ctx->tape;
    if (!tp) return;
    for (fc_tensor *t = ctx->live; t; t = t->live_next) t->node = NULL;
    fc_node *n = tp->all;
    while (n) {
        fc_node *next = n->next_all;
        node_drop_saved(n);
        node_drop_ext(ctx, n);
        if (n->hooks) fc__ag_hooks_free(ctx, n->hooks);
        fc__ctx_free(ctx, n, sizeof *n);
        n = next;
    }
    n = tp->free_list;
    while (n) {
        fc_node *next = n->next_all;
        fc__ctx_free(ctx, n, sizeof *n);
        n = next;
    }
    fc__ctx_free(ctx, tp->stack, sizeof(fc_node *) * (size_t)tp->stack_cap);
    fc__ctx_free(ctx, tp->spare, sizeof(fc_node *) * (size_t)tp->spare_cap);
    /* the extra list is empty between walks; its leaves are handles, freed by the caller */
    fc__ctx_free(ctx, tp->extra, sizeof(fc_tensor *) * (size_t)tp->extra_cap);
    fc__ctx_free(ctx, tp, sizeof *tp);
    ctx->tape = NULL;
}

static fc__tape *tape_get(fc_ctx *ctx) {
    if (ctx->tape) return ctx->tape;
    fc__tape *tp = fc__ctx_alloc(ctx, sizeof *tp);
    if (!tp) return NULL;
    memset(tp, 0, sizeof *tp);
    ctx->tape = tp;
    ctx->tape_free = tape_free;
    ctx->node_release = node_release;
    return tp;
}

bool fc__ag_wants(fc_ctx *ctx, int n, fc_tensor *const *inputs) {
    if (ctx->no_grad_depth > 0) return false;
    for (int k = 0; k < n; k++)
        if (inputs[k] && (inputs[k]->flags & FC__T_REQUIRES_GRAD)) return true;
    return false;
}

fc_node *fc__ag_record(fc_ctx *ctx, const char *op, fc__backward_fn backward, fc_tensor *out,
                       int n, fc_tensor *const *inputs) {
    fc__tape *tp = tape_get(ctx);
    fc_node *node = NULL;
    if (tp && tp->free_list) {
        node = tp->free_list;
        tp->free_list = node->next_all;
    } else if (tp) {
        node = fc__ctx_alloc(ctx, sizeof *node);
    }
    if (!node || n > FC__AG_MAX_IN) {
        if (node) { /* too many inputs is a programming error of the op */
            node->next_all = tp->free_list;
            tp->free_list = node;
        }
        fc__fail(ctx, n > FC__AG_MAX_IN ? FC_ERR_INVALID_ARG : FC_ERR_OOM,
                 "%s: cannot record an autograd node (%s)", op,
                 n > FC__AG_MAX_IN ? "too many inputs" : "out of memory");
        return NULL;
    }
    /* Every field but the saved slots past n_saved (which nothing reads) is
     * set here: zeroing the whole node, saved raws included, cost more than
     * the rest of the record. */
    node->op = op;
    node->backward = backward;
    node->id = tp->next_id++;
    node->refs = 1; /* the output handle's */
    node->freed = false;
    node->n_in = n;
    node->n_saved = 0;
    memset(node->i, 0, sizeof node->i);
    memset(node->f, 0, sizeof node->f);
    node->aux = NULL;
    node->ext = NULL;
    node->ext_size = 0;
    node->gacc = NULL;
    node->regions = NULL;
    node->hooks = NULL;
    node->gkeep = NULL;
    node->want = false;
    node->run = false;
    node->prev_all = NULL;
    node->mark = 0;
    for (int k = 0; k < FC__AG_MAX_IN; k++) {
        fc__ag_input *in = &node->in[k];
        in->node = NULL;
        in->leaf = NULL;
        in->needs = false;
        in->dtype = (fc_dtype)0;
        in->rank = 0;
    }
    for (int k = 0; k < n; k++) {
        fc_tensor *x = inputs[k];
        fc__ag_input *in = &node->in[k];
        if (!x) { /* a NULL input reads as a zeroed entry */
            memset(in->shape, 0, sizeof in->shape);
            continue;
        }
        in->dtype = x->raw.dtype;
        in->rank = x->raw.rank;
        memcpy(in->shape, x->raw.shape, sizeof in->shape);
        if (!(x->flags & FC__T_REQUIRES_GRAD)) continue;
        in->needs = true;
        if (x->node) {
            in->node = x->node;
            x->node->refs++;
        } else {
            in->leaf = fc_retain(x);
        }
    }
    node->out_dtype = out->raw.dtype;
    node->out_rank = out->raw.rank;
    memcpy(node->out_shape, out->raw.shape, sizeof node->out_shape);
    node->next_all = tp->all;
    if (tp->all) tp->all->prev_all = node;
    tp->all = node;
    if (out->node) node_release(ctx, out->node);
    out->node = node;
    out->flags |= FC__T_REQUIRES_GRAD;
    out->flags &= ~(unsigned)FC__T_LEAF;
    return node;
}

fc_status fc__ag_save(fc_ctx *ctx, fc_node *node, const char *role, const fc_tensor *t) {
    if (node->n_saved >= FC__AG_MAX_SAVED || !t)
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: cannot save %s for backward", node->op,
                        role);
    fc__saved *s = &node->saved[node->n_saved];
    fc_status st = fc__raw_view(&t->raw, &s->raw);
    if (st != FC_OK) return fc__fail(ctx, st, "%s: cannot save %s", node->op, role);
    s->generation = fc__buffer_generation(t->raw.buf);
    s->role = role;
    s->link = FC__SAVED_NONE;
    if (t->node == node) {
        s->link = FC__SAVED_OUTPUT;
    } else if (t->flags & FC__T_REQUIRES_GRAD) {
        for (int k = 0; k < node->n_in && s->link == FC__SAVED_NONE; k++) {
            const fc__ag_input *in = &node->in[k];
            if ((t->node && in->node == t->node) || (!t->node && in->leaf == t))
                s->link = (int8_t)k;
        }
    }
    node->n_saved++;
    return FC_OK;
}

/* True while a create_graph walk runs with grad mode on (what
 * fc__ag_create_graph answers, without counting as a rule's question). */
static bool graph_walk(const fc_ctx *ctx) {
    return ctx->tape && ctx->tape->walk && ctx->tape->walk->create_graph && ctx->no_grad_depth == 0;
}

static const fc_raw *saved_at(fc_ctx *ctx, fc_node *node, int k) {
    if (k < 0 || k >= node->n_saved || !node->saved[k].raw.buf) {
        fc__fail(ctx, FC_ERR_STATE, "backward of %s: saved value %d is not available", node->op,
                 k);
        return NULL;
    }
    return &node->saved[k].raw;
}

/* A raw read of a value that carries the graph's identity is a read of the
 * graph, as a linked handle is: a rule that computes from it with a kernel
 * and returns a constant has no recorded form. */
const fc_raw *fc__ag_saved_raw(fc_ctx *ctx, fc_node *node, int k) {
    const fc_raw *r = saved_at(ctx, node, k);
    if (r && node->saved[k].link != FC__SAVED_NONE && graph_walk(ctx)) ctx->tape->linked++;
    return r;
}

/* A leaf's saved value, in a create_graph walk: the handle is a view of
 * the leaf's storage, so it reaches the leaf through one recorded
 * identity node. */
static fc_status link_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    (void)ctx;
    (void)node;
    gin[0] = gout;
    return FC_OK;
}

/* In a create_graph walk, t (a new handle over saved value s of node)
 * gets the autograd identity of what was saved: the node's output (the
 * weak link becomes a reference held by t), an input's node, or, through
 * an identity node, an input leaf. */
static fc_tensor *link_saved(fc_ctx *ctx, fc_node *node, const fc__saved *s, fc_tensor *t) {
    fc_node *src = s->link == FC__SAVED_OUTPUT ? node
                   : s->link >= 0              ? node->in[s->link].node
                                               : NULL;
    fc_tensor *leaf = s->link >= 0 ? node->in[s->link].leaf : NULL;
    if (!src && !leaf) return t;
    ctx->tape->linked++;
    if (src) {
        src->refs++;
        t->node = src;
        t->flags |= FC__T_REQUIRES_GRAD;
        return t;
    }
    if (!fc__ag_record(ctx, "saved leaf", link_backward, t, 1, &leaf)) return NULL;
    return t;
}

fc_tensor *fc__ag_saved_tensor(fc_ctx *ctx, fc_node *node, int k) {
    fc_raw v;
    const fc_raw *s = saved_at(ctx, node, k);
    if (!s || fc__raw_view(s, &v) != FC_OK) return NULL;
    fc_tensor *t = fc__tensor_wrap(ctx, node->op, &v);
    if (t && node->saved[k].link != FC__SAVED_NONE && graph_walk(ctx))
        t = link_saved(ctx, node, &node->saved[k], t);
    return t;
}

fc_tensor *fc__ag_saved_const(fc_ctx *ctx, fc_node *node, int k) {
    fc_raw v;
    const fc_raw *s = saved_at(ctx, node, k);
    if (!s || fc__raw_view(s, &v) != FC_OK) return NULL;
    return fc__tensor_wrap(ctx, node->op, &v);
}

/* ctx is const for the callers' sake; the tape it points to is not. */
bool fc__ag_create_graph(const fc_ctx *ctx) {
    if (!graph_walk(ctx)) return false;
    ctx->tape->forms++;
    return true;
}

void fc__ag_recorded_rule(const fc_ctx *ctx) {
    if (graph_walk(ctx)) ctx->tape->forms++;
}

int64_t fc__ag_linked_count(const fc_ctx *ctx) { return ctx->tape ? ctx->tape->linked : 0; }
int64_t fc__ag_form_count(const fc_ctx *ctx) { return ctx->tape ? ctx->tape->forms : 0; }

fc_status fc__ag_unsupported(fc_ctx *ctx, const char *op) {
    return fc__fail(ctx, FC_ERR_UNSUPPORTED,
                    "fc_autograd_grad: create_graph: the backward of %s has no recorded form, so "
                    "its gradient cannot be differentiated again",
                    op);
}

void fc__ag_release_saved(fc_node *node) { node_drop_saved(node); }

/* ---- visiting support for backward.c ---------------------------------------------- */

int64_t fc__ag_next_hook_id(fc_ctx *ctx) {
    fc__tape *tp = tape_get(ctx);
    return tp ? ++tp->next_hook_id : -1;
}
void fc__ag_leaf_hooks_add(fc_ctx *ctx, int64_t delta) {
    if (ctx->tape) ctx->tape->leaf_hooks += delta; /* no tape: the context is being freed */
}
int64_t fc__ag_leaf_hook_count(const fc_ctx *ctx) { return ctx->tape ? ctx->tape->leaf_hooks : 0; }
bool fc__ag_walking(const fc_ctx *ctx) { return ctx->tape && ctx->tape->walking; }
void fc__ag_set_walking(fc_ctx *ctx, bool on) {
    if (ctx->tape) ctx->tape->walking = on;
}

int64_t fc__ag_new_stamp(fc_ctx *ctx) {
    fc__tape *tp = tape_get(ctx);
    return tp ? ++tp->stamp : -1;
}

fc_node **fc__ag_stack(fc_ctx *ctx, int64_t need) {
    fc__tape *tp = ctx->tape;
    if (!tp) return NULL;
    if (need > tp->stack_cap) {
        int64_t cap = tp->stack_cap ? tp->stack_cap : 64;
        while (cap < need) cap *= 2;
        fc_node **s = fc__ctx_alloc(ctx, sizeof(fc_node *) * (size_t)cap);
        if (!s) return NULL;
        if (tp->stack) {
            memcpy(s, tp->stack, sizeof(fc_node *) * (size_t)tp->stack_cap);
            fc__ctx_free(ctx, tp->stack, sizeof(fc_node *) * (size_t)tp->stack_cap);
        }
        tp->stack = s;
        tp->stack_cap = cap;
    }
    return tp->stack;
}

const fc__walk *fc__ag_current_walk(const fc_ctx *ctx) { return ctx->tape ? ctx->tape->walk : NULL; }
int64_t fc__ag_next_id(const fc_ctx *ctx) { return ctx->tape ? ctx->tape->next_id : 0; }

/* ---- nested walks ------------------------------------------------------------------ */

void fc__ag_walk_enter(fc_ctx *ctx, const fc__walk *w, fc__ag_walk_save *save) {
    fc__tape *tp = tape_get(ctx);
    *save = (fc__ag_walk_save){0};
    if (!tp) return; /* the walk's collect reports the OOM */
    save->walk = tp->walk;
    save->walking = tp->walking;
    tp->walk = w;
    tp->walking = true;
    if (!w->nested) return;
    save->nested = true;
    /* the outer walk holds a pointer into its list: the nested one gets its own */
    save->stack = tp->stack;
    save->stack_cap = tp->stack_cap;
    tp->stack = tp->spare;
    tp->stack_cap = tp->spare_cap;
    tp->spare = NULL;
    tp->spare_cap = 0;
}

void fc__ag_walk_leave(fc_ctx *ctx, fc__ag_walk_save *save) {
    fc__tape *tp = ctx->tape;
    if (!tp) return;
    tp->walk = save->walk;
    tp->walking = save->walking;
    if (!save->nested) return;
    /* keep the nested list for the next nested walk (one level deep is the
     * common case: a checkpointed block), free a deeper level's */
    if (!tp->spare) {
        tp->spare = tp->stack;
        tp->spare_cap = tp->stack_cap;
    } else {
        fc__ctx_free(ctx, tp->stack, sizeof(fc_node *) * (size_t)tp->stack_cap);
    }
    tp->stack = save->stack;
    tp->stack_cap = save->stack_cap;
}

fc_status fc__ag_extra_reserve(fc_ctx *ctx, int64_t n) {
    fc__tape *tp = tape_get(ctx);
    if (!tp) return fc__fail(ctx, FC_ERR_OOM, "fc_grad_checkpoint: out of memory");
    if (tp->n_extra + n <= tp->extra_cap) return FC_OK;
    int64_t cap = tp->extra_cap ? tp->extra_cap : 16;
    while (cap < tp->n_extra + n) cap *= 2;
    fc_tensor **e = fc__ctx_alloc(ctx, sizeof(fc_tensor *) * (size_t)cap);
    if (!e) return fc__fail(ctx, FC_ERR_OOM, "fc_grad_checkpoint: out of memory");
    if (tp->extra) {
        memcpy(e, tp->extra, sizeof(fc_tensor *) * (size_t)tp->n_extra);
        fc__ctx_free(ctx, tp->extra, sizeof(fc_tensor *) * (size_t)tp->extra_cap);
    }
    tp->extra = e;
    tp->extra_cap = cap;
    return FC_OK;
}

void fc__ag_extra_add(fc_ctx *ctx, fc_tensor *leaf) {
    fc__tape *tp = ctx->tape;
    if (leaf->flags & FC__T_EXTRA) return;
    leaf->flags |= FC__T_EXTRA;
    tp->extra[tp->n_extra++] = fc_retain(leaf);
}

fc_tensor **fc__ag_extra_list(fc_ctx *ctx, int64_t *count) {
    *count = ctx->tape ? ctx->tape->n_extra : 0;
    return ctx->tape ? ctx->tape->extra : NULL;
}

void fc__ag_extra_clear(fc_ctx *ctx) {
    fc__tape *tp = ctx->tape;
    if (!tp) return;
    for (int64_t i = 0; i < tp->n_extra; i++) {
        tp->extra[i]->flags &= ~(unsigned)FC__T_EXTRA;
        fc_release(tp->extra[i]);
    }
    tp->n_extra = 0;
}
