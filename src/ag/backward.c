/* backward.c - the backward engine and the public autograd entry points.
 *
 * Backward collects the nodes reachable from the output, orders them by
 * creation id (descending: a node is always created after its inputs'
 * nodes, so this is a topological order), checks each node's saved values
 * against their generations, runs its rule with grad mode off, reduces
 * broadcast gradients to the input shapes and accumulates them into the
 * input nodes or the leaves. Gradient tensors are pooled like any other. */
#include <stdlib.h>
#include <string.h>

#include "ag/tape.h"


/* ---- gradient arithmetic (single-threaded, deterministic) ------------------------- */

typedef struct acc_arg {
    fc_dtype dt;
} acc_arg;

static void acc_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    acc_arg *a = arg;
    if (a->dt == FC_F64) {
        for (int64_t i = 0; i < n; i++)
            *(double *)(p[0] + i * s[0]) += *(const double *)(p[1] + i * s[1]);
    } else {
        for (int64_t i = 0; i < n; i++)
            *(float *)(p[0] + i * s[0]) += *(const float *)(p[1] + i * s[1]);
    }
}

/* dst += src over the broadcast of their shapes: axes dst has as 1 (or
 * lacks) sum src, axes src has as 1 (or lacks) repeat it. With ctx == NULL
 * the walk is single-threaded, so accumulating into broadcast (stride-0)
 * positions of dst is race-free and ordered. The caller checked that the
 * shapes broadcast. */
static void accumulate(fc_tensor *dst, fc_tensor *src) {
    if (dst->raw.dtype == FC_F32 && src->raw.dtype == FC_F32 &&
        fc__shape_equal(dst->raw.shape, dst->raw.rank, src->raw.shape, src->raw.rank) &&
        fc__raw_is_contiguous(&dst->raw) && fc__raw_is_contiguous(&src->raw)) {
        /* the usual case (same shape, both dense): one flat loop, no iterator */
        float *d = (float *)fc__raw_base(&dst->raw);
        const float *s = (const float *)fc__raw_base(&src->raw);
        int64_t n = fc__raw_numel(&dst->raw);
        for (int64_t i = 0; i < n; i++) d[i] += s[i];
        return;
    }
    int64_t shape[FC_MAX_RANK];
    int r;
    fc__shape_broadcast(dst->raw.shape, dst->raw.rank, src->raw.shape, src->raw.rank, shape, &r);
    fc__iter it;
    fc_raw *ops[2] = {&dst->raw, &src->raw};
    fc__iter_init(&it, shape, r, 2, ops);
    acc_arg a = {dst->raw.dtype};
    fc__iter_run(NULL, &it, acc_inner, &a);
}

/* g is read as broadcast to the common shape of g and the input, then
 * summed down to the input's shape: a gradient at the op's (broadcast)
 * output shape sums, a smaller one ([1] for a zero gradient) repeats. */
fc_tensor *fc__ag_reduce_to(fc_ctx *ctx, fc_tensor *g, const int64_t *shape, int rank) {
    if (fc__shape_equal(g->raw.shape, g->raw.rank, shape, rank)) return g;
    int64_t common[FC_MAX_RANK];
    int cr;
    if (fc__shape_broadcast(g->raw.shape, g->raw.rank, shape, rank, common, &cr) != FC_OK) {
        char a[160], b[160];
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                 "backward: a gradient of shape %s does not fit an input of shape %s",
                 fc__shape_str(g->raw.shape, g->raw.rank, a, (int)sizeof a),
                 fc__shape_str(shape, rank, b, (int)sizeof b));
        return NULL;
    }
    fc_tensor *out = fc__tensor_new(ctx, "backward", g->raw.dtype, shape, rank);
    if (!out) return NULL;
    memset(fc__raw_base(&out->raw), 0, fc_tensor_nbytes(out));
    accumulate(out, g);
    return out;
}

/* Can r become an accumulation target as it is? Only when nobody else can
 * see its storage: one handle reference, one buffer reference, plain
 * contiguous layout, writable, already in the gradient dtype. */
static bool takeable(const fc_tensor *r, fc_dtype gdt) {
    return r->raw.dtype == gdt && atomic_load(&((fc_tensor *)r)->refs) == 1 && !r->node &&
           r->raw.offset == 0 && fc__raw_is_contiguous(&r->raw) &&
           !fc__buffer_is_read_only(r->raw.buf) && fc__buffer_is_unique(r->raw.buf);
}

/* *target += g (g has the target's shape or broadcasts to it), creating the
 * target on first use. Runs inside a scope: temporaries are scope-owned and
 * the target gets its own reference. */
static fc_status add_into(fc_ctx *ctx, fc_tensor **target, fc_tensor *g, fc_dtype gdt,
                          const int64_t *shape, int rank) {
    fc_tensor *r = fc__ag_reduce_to(ctx, g, shape, rank);
    if (!r) return fc_ctx_status(ctx);
    if (!*target) {
        fc_tensor *c = takeable(r, gdt)        ? r
                       : r->raw.dtype == gdt ? fc_clone(ctx, r)
                                             : fc_to(ctx, r, gdt);
        if (!c) return fc_ctx_status(ctx);
        *target = fc_retain(c);
        return FC_OK;
    }
    fc_tensor *c = r->raw.dtype == gdt ? r : fc_to(ctx, r, gdt);
    if (!c) return fc_ctx_status(ctx);
    fc__buffer_bump_generation((*target)->raw.buf);
    accumulate(*target, c);
    return FC_OK;
}

/* ---- the engine -------------------------------------------------------------------- */

static int cmp_id_desc(const void *a, const void *b) {
    const fc_node *x = *(fc_node *const *)a, *y = *(fc_node *const *)b;
    return x->id < y->id ? 1 : x->id > y->id ? -1 : 0;
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

static fc_status run_node(fc_ctx *ctx, fc_node *n, bool retain) {
    fc_status st;
    if (n->freed)
        return fc__fail(ctx, FC_ERR_STATE,
                        "backward of %s (tape node %lld): its saved values were freed by an "
                        "earlier backward; pass retain_graph to walk a graph twice",
                        n->op, (long long)n->id);
    if ((st = check_saved(ctx, n)) != FC_OK) return st;
    fc_tensor *gin[FC__AG_MAX_IN] = {0};
    fc_tensor *gout = n->gacc;
    n->gacc = NULL;
    st = n->backward(ctx, n, gout, gin);
    if (st == FC_OK) st = fc_ctx_status(ctx);
    for (int k = 0; k < n->n_in && st == FC_OK; k++) {
        fc__ag_input *in = &n->in[k];
        if (!in->needs) continue;
        if (!gin[k]) {
            st = fc__fail(ctx, FC_ERR_STATE, "backward of %s: no gradient for input %d", n->op, k);
            break;
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
        fc_dtype gdt = fc__grad_dtype(in->dtype);
        if (in->node) {
            st = add_into(ctx, &in->node->gacc, gin[k], gdt, in->shape, in->rank);
        } else if (in->leaf) {
            fc_tensor *leaf = in->leaf;
            st = add_into(ctx, &leaf->grad, gin[k], gdt, in->shape, in->rank);
        }
    }
    fc_release(gout); /* gin[] are scope-owned or borrowed */
    if (!retain) {
        fc__ag_release_saved(n);
        n->freed = true;
    }
    return st;
}

static fc_status backward_graph(fc_ctx *ctx, fc_tensor *out, fc_tensor *grad_out, bool retain);

/* Everything backward creates lives in this scope unless it is kept as a
 * gradient. */
static fc_status backward_impl(fc_ctx *ctx, fc_tensor *out, fc_tensor *grad_out, bool retain) {
    fc_scope_begin(ctx);
    fc_no_grad_begin(ctx);
    fc_status st = backward_graph(ctx, out, grad_out, retain);
    fc_no_grad_end(ctx);
    fc_scope_end(ctx);
    return st;
}

static fc_status backward_graph(fc_ctx *ctx, fc_tensor *out, fc_tensor *grad_out, bool retain) {
    if (!out->node) {
        if (out->flags & FC__T_LEAF) { /* d out / d out = grad_out */
            return add_into(ctx, &out->grad, grad_out, fc__grad_dtype(out->raw.dtype),
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
    qsort(list, (size_t)count, sizeof *list, cmp_id_desc);

    fc_status st = FC_OK;
    fc_dtype gdt = fc__grad_dtype(out->raw.dtype);
    st = add_into(ctx, &out->node->gacc, grad_out, gdt, out->raw.shape, out->raw.rank);
    for (int64_t i = 0; i < count && st == FC_OK; i++) {
        fc_node *n = list[i];
        if (!n->gacc) continue; /* reachable but no gradient flowed (e.g. unused branch) */
        fc_scope_begin(ctx);
        st = run_node(ctx, n, retain);
        fc_scope_end(ctx);
    }
    /* on failure drop partial accumulations so a retry starts clean */
    for (int64_t i = 0; i < count; i++) {
        if (list[i]->gacc) {
            fc_release(list[i]->gacc);
            list[i]->gacc = NULL;
        }
    }
    return st;
}

fc_status fc_backward_with(fc_ctx *ctx, fc_tensor *out, fc_tensor *grad_out, bool retain_graph) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!out || !grad_out)
        return fc__fail(ctx, FC_ERR_NULL_ARG, "fc_backward_with: %s is NULL",
                        !out ? "out" : "grad_out");
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

/* ---- leaves and grad mode ----------------------------------------------------------- */

fc_status fc__ag_set_requires_grad(fc_tensor *t, bool on, bool allow_f64) {
    if (!t) return FC_ERR_NULL_ARG;
    fc_dtype dt = t->raw.dtype;
    if (on && !fc_dtype_supports_grad(dt) && !(allow_f64 && dt == FC_F64))
        return fc__fail(t->ctx, FC_ERR_DTYPE,
                        "fc_requires_grad: dtype %s cannot carry a gradient (f32, f16, bf16 only)",
                        fc_dtype_name(dt));
    if (t->node)
        return fc__fail(t->ctx, FC_ERR_INVALID_ARG,
                        "fc_requires_grad: the tensor was made by %s; only leaves can be marked "
                        "(use fc_detach first)",
                        t->node->op);
    if (on)
        t->flags |= FC__T_REQUIRES_GRAD | FC__T_LEAF;
    else
        t->flags &= ~(unsigned)(FC__T_REQUIRES_GRAD | FC__T_LEAF);
    return FC_OK;
}

fc_status fc_requires_grad(fc_tensor *t, bool on) { return fc__ag_set_requires_grad(t, on, false); }
bool fc_tensor_requires_grad(const fc_tensor *t) {
    return t && (t->flags & FC__T_REQUIRES_GRAD);
}
bool fc_tensor_is_leaf(const fc_tensor *t) { return t && !t->node; }

static fc_tensor *make_param(fc_ctx *ctx, fc_tensor *t) {
    if (!t) return NULL;
    if (fc_requires_grad(t, true) != FC_OK) {
        fc_release(t);
        return NULL;
    }
    return t;
}

fc_tensor *fc_param_zeros(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank) {
    return make_param(ctx, fc_zeros(ctx, dtype, shape, rank));
}

fc_tensor *fc_param_from_data(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank,
                              const void *data) {
    return make_param(ctx, fc_tensor_from_data(ctx, dtype, shape, rank, data));
}

fc_tensor *fc_param_randn(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank,
                          double std) {
    FC__CHECK_CTX(ctx);
    fc_tensor *t = fc_randn(ctx, FC_F32, shape, rank);
    if (!t) return NULL;
    float *p = (float *)fc__raw_base(&t->raw);
    int64_t n = fc__raw_numel(&t->raw);
    for (int64_t i = 0; i < n; i++) p[i] = (float)(p[i] * std);
    if (dtype != FC_F32) {
        fc_tensor *c = fc_to(ctx, t, dtype);
        fc_release(t);
        t = c;
    }
    return make_param(ctx, t);
}

fc_tensor *fc_grad(const fc_tensor *t) { return t ? t->grad : NULL; }

void fc_zero_grad(fc_tensor *const *params, int n) {
    if (!params) return;
    for (int i = 0; i < n; i++) {
        if (params[i] && params[i]->grad) {
            fc_release(params[i]->grad);
            params[i]->grad = NULL;
        }
    }
}

void fc_no_grad_begin(fc_ctx *ctx) {
    if (ctx) ctx->no_grad_depth++;
}
void fc_no_grad_end(fc_ctx *ctx) {
    if (ctx && ctx->no_grad_depth > 0) ctx->no_grad_depth--;
}
bool fc_grad_enabled(const fc_ctx *ctx) { return ctx && ctx->no_grad_depth == 0; }

fc_tensor *fc_detach(fc_ctx *ctx, fc_tensor *t) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "fc_detach", t);
    fc_raw v;
    if (fc__raw_view(&t->raw, &v) != FC_OK) return NULL;
    return fc__tensor_wrap(ctx, "fc_detach", &v);
}
