/* SPDX-License-Identifier: MIT */
/* hooks.c - gradient hooks: registration, removal, and running a tensor's
 * hooks on its final gradient (fucina/autograd.h states the contract).
 *
 * A leaf's hooks hang on its handle (fc_tensor.hooks, freed by the exec
 * layer through ctx->hooks_free when the handle dies); a non-leaf's on the
 * node that made it, since the gradient of the output is the node's
 * accumulator and the node may outlive the handle. The walk (backward.c)
 * decides when a gradient is final and calls fc__ag_run_hooks; this file
 * only runs the list and checks what each hook hands back, so a wrong
 * replacement fails the walk before anything downstream reads it. */
#include <string.h>

#include "ag/tape.h"

void fc__ag_hooks_free(fc_ctx *ctx, fc__hook_list *h) {
    if (!h) return;
    fc__hook *e = h->head;
    while (e) {
        fc__hook *next = e->next;
        fc__ctx_free(ctx, e, sizeof *e);
        e = next;
    }
    fc__ctx_free(ctx, h, sizeof *h);
}

/* The exec layer's callback for a dying leaf handle. */
static void leaf_hooks_free(fc_ctx *ctx, fc__hook_list *h) {
    fc__ag_leaf_hooks_add(ctx, -1);
    fc__ag_hooks_free(ctx, h);
}

fc_status fc_grad_hook_add(fc_tensor *t, fc_grad_hook_fn fn, void *user, int64_t *id) {
    if (!t) return FC_ERR_NULL_ARG;
    fc_ctx *ctx = t->ctx;
    char d[160];
    if (!fn) return fc__fail(ctx, FC_ERR_NULL_ARG, "fc_grad_hook_add: fn is NULL");
    if (!(t->flags & FC__T_REQUIRES_GRAD))
        return fc__fail(ctx, FC_ERR_NO_GRAD,
                        "fc_grad_hook_add: the tensor %s does not require grad, so it never "
                        "gets a gradient",
                        fc__desc(t, d, (int)sizeof d));
    if (fc__ag_walking(ctx))
        return fc__fail(ctx, FC_ERR_STATE,
                        "fc_grad_hook_add: called during a backward (from a hook); register "
                        "hooks before backward");
    fc__hook_list **slot = t->node ? &t->node->hooks : &t->hooks;
    int64_t hid = fc__ag_next_hook_id(ctx);
    fc__hook *e = hid > 0 ? fc__ctx_alloc(ctx, sizeof *e) : NULL;
    fc__hook_list *h = *slot;
    if (e && !h) {
        h = fc__ctx_alloc(ctx, sizeof *h);
        if (h) memset(h, 0, sizeof *h);
    }
    if (!e || !h) {
        if (e) fc__ctx_free(ctx, e, sizeof *e);
        return fc__fail(ctx, FC_ERR_OOM, "fc_grad_hook_add: out of memory");
    }
    *e = (fc__hook){.next = NULL, .fn = fn, .user = user, .id = hid};
    if (!*slot) {
        *slot = h;
        if (!t->node) {
            ctx->hooks_free = leaf_hooks_free;
            fc__ag_leaf_hooks_add(ctx, 1);
        }
    }
    fc__hook **tail = &h->head;
    while (*tail) tail = &(*tail)->next;
    *tail = e;
    if (id) *id = hid;
    return FC_OK;
}

fc_status fc_grad_hook_remove(fc_tensor *t, int64_t id) {
    if (!t) return FC_ERR_NULL_ARG;
    fc_ctx *ctx = t->ctx;
    if (fc__ag_walking(ctx))
        return fc__fail(ctx, FC_ERR_STATE,
                        "fc_grad_hook_remove: called during a backward (from a hook)");
    fc__hook_list **slot = t->node ? &t->node->hooks : &t->hooks;
    fc__hook_list *h = *slot;
    for (fc__hook **p = h ? &h->head : NULL; p && *p; p = &(*p)->next) {
        if ((*p)->id != id) continue;
        fc__hook *e = *p;
        *p = e->next;
        fc__ctx_free(ctx, e, sizeof *e);
        if (!h->head) { /* the last one: the tensor has no hooks again */
            fc__ctx_free(ctx, h, sizeof *h);
            *slot = NULL;
            if (!t->node) fc__ag_leaf_hooks_add(ctx, -1);
        }
        return FC_OK;
    }
    char d[160];
    return fc__fail(ctx, FC_ERR_INDEX, "fc_grad_hook_remove: the tensor %s has no hook %lld",
                    fc__desc(t, d, (int)sizeof d), (long long)id);
}

/* Checks a hook's replacement r for a gradient like g. */
static fc_status check_replacement(fc_ctx *ctx, int k, const char *who, const fc_tensor *g,
                                   const fc_tensor *r, bool check_finite) {
    char a[160], b[160];
    if (r->ctx != ctx)
        return fc__fail(ctx, FC_ERR_CONTEXT,
                        "backward: gradient hook %d on %s returned a tensor of another context",
                        k, who);
    if (r->raw.dtype != g->raw.dtype)
        return fc__fail(ctx, FC_ERR_DTYPE,
                        "backward: gradient hook %d on %s returned a %s gradient; it must be %s "
                        "(the gradient dtype)",
                        k, who, fc_dtype_name(r->raw.dtype), fc_dtype_name(g->raw.dtype));
    if (!fc__shape_equal(r->raw.shape, r->raw.rank, g->raw.shape, g->raw.rank))
        return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                        "backward: gradient hook %d on %s returned a gradient of shape %s; it "
                        "must be %s",
                        k, who, fc__shape_str(r->raw.shape, r->raw.rank, a, (int)sizeof a),
                        fc__shape_str(g->raw.shape, g->raw.rank, b, (int)sizeof b));
    if (check_finite) {
        int64_t bad = fc__count_non_finite(r);
        if (bad)
            return fc__fail(ctx, FC_ERR_NON_FINITE,
                            "backward: gradient hook %d on %s returned a gradient with %lld "
                            "non-finite value%s; no gradient was changed",
                            k, who, (long long)bad, bad == 1 ? "" : "s");
    }
    return FC_OK;
}

fc_status fc__ag_run_hooks(fc_ctx *ctx, fc__hook_list *h, fc_tensor **g, const int64_t *shape,
                           int rank, const char *who) {
    fc_status st = FC_OK;
    int k = 0;
    for (fc__hook *e = h->head; e && st == FC_OK; e = e->next, k++) {
        fc_tensor *r = NULL;
        fc_scope_begin(ctx);
        /* as for rules, the hook's own ops do not check: the engine checks
         * what it returns, so the message names the hook and the tensor */
        bool check = ctx->check_finite;
        ctx->check_finite = false;
        st = e->fn(ctx, *g, &r, e->user);
        ctx->check_finite = check;
        if (st == FC_OK) st = fc_ctx_status(ctx); /* an op in the hook failed */
        if (st != FC_OK) {
            /* keeps the hook's own message when it recorded one */
            fc__fail(ctx, st, "backward: gradient hook %d on %s failed (%s)", k, who,
                     fc_status_name(st));
        } else if (r && r != *g) {
            st = check_replacement(ctx, k, who, *g, r, check);
            fc_tensor *c = NULL;
            /* a private contiguous tensor: the replacement itself when only
             * the hook's scope holds it, else a copy (the engine may add
             * into it in place later) */
            if (st == FC_OK && fc__ag_create_graph(ctx)) /* keeps a recorded one's graph */
                st = fc__ag_graph_add_into(ctx, &c, r, r->raw.dtype, shape, rank);
            else if (st == FC_OK)
                st = fc__ag_add_into(ctx, &c, r, r->raw.dtype, shape, rank);
            if (st == FC_OK) {
                fc_release(*g);
                *g = c;
            }
        }
        fc_scope_end(ctx);
    }
    return st;
}
