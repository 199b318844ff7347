/* SPDX-License-Identifier: MIT */
/* graph_grad.c - the engine's gradient arithmetic in recorded form, for
 * create_graph walks (fc_autograd_grad with create_graph).
 *
 * create_graph, how it works. A plain walk runs rules with grad mode off
 * and adds their gradients with kernels (accumulate.c), so the gradients it
 * makes are constants. A create_graph walk instead:
 *   - runs every rule with grad mode on, so the ops a rule calls record
 *     nodes like any forward op;
 *   - hands out saved values linked to the graph (fc__ag_saved_tensor: a
 *     saved input reaches its node or leaf, a saved output the node itself,
 *     through a weak link turned into a reference only while the rule runs),
 *     so the new nodes connect to the first-order graph;
 *   - accumulates with the recorded ops of this file (a sum over broadcast
 *     axes, a dtype cast, a region's embedding into a zero tensor, an
 *     addition), each of whose rules uses only recorded ops again, so the
 *     result is differentiable to any order.
 * Rules keep their fused kernels for plain walks and switch to a composite
 * path of recorded forward ops when fc__ag_create_graph(ctx) is true; the
 * engine refuses (FC_ERR_UNSUPPORTED naming the op) a rule that returned a
 * constant where the gradient depends on the graph (backward.c). These ops
 * live in src/ag, below src/ops, so they use the engine's own kernels. */
#include <string.h>

#include "ag/tape.h"
#include "exec/kernels/copy.h"

enum { GG_I_RANK = 0 }; /* region nodes: i[] holds the region's rank, ext its layout */

static fc_status pass_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    (void)ctx;
    for (int k = 0; k < node->n_in; k++)
        gin[k] = gout;
    return FC_OK;
}

/* out (made from ins by a kernel) becomes the output of a recorded node
 * with rule bw when any input requires grad (grad mode is on in a
 * create_graph walk). NULL after an error. */
static fc_tensor *recorded(fc_ctx *ctx, const char *op, fc__backward_fn bw, fc_tensor *out, int n,
                           fc_tensor *const *ins) {
    if (!out) return NULL;
    if (fc__ag_wants(ctx, n, ins) && !fc__ag_record(ctx, op, bw, out, n, ins)) return NULL;
    return out;
}

/* g summed (or repeated) to shape, as fc__ag_reduce_to; its rule hands the
 * gradient back, which the engine sums or repeats to g's shape again. */
static fc_tensor *sum_to(fc_ctx *ctx, fc_tensor *g, const int64_t *shape, int rank) {
    if (fc__shape_equal(g->raw.shape, g->raw.rank, shape, rank)) return g;
    fc_tensor *r = fc__ag_reduce_to(ctx, g, shape, rank);
    if (r == g) r = fc__copy_clone(ctx, "backward (sum_to)", g);
    return recorded(ctx, "backward (sum_to)", pass_backward, r, 1, &g);
}

/* A contiguous copy of g in dt (g itself when it already is one). */
static fc_tensor *as_dense(fc_ctx *ctx, fc_tensor *g, fc_dtype dt) {
    if (g->raw.dtype == dt && fc__raw_is_contiguous(&g->raw) && g->raw.offset == 0) return g;
    fc_tensor *c = g->raw.dtype == dt ? fc__copy_clone(ctx, "backward (copy)", g)
                                      : fc__copy_cast(ctx, "backward (cast)", g, dt);
    return recorded(ctx, "backward (cast)", pass_backward, c, 1, &g);
}

/* a + b, same shape and dtype, contiguous result. */
static fc_tensor *add(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    fc_tensor *out = fc__copy_clone(ctx, "backward (add)", a);
    if (!out) return NULL;
    fc__ag_acc_raw(ctx, &out->raw, &b->raw);
    fc_tensor *ins[2] = {a, b};
    return recorded(ctx, "backward (add)", pass_backward, out, 2, ins);
}

fc_status fc__ag_graph_add_into(fc_ctx *ctx, fc_tensor **target, fc_tensor *g, fc_dtype gdt,
                                const int64_t *shape, int rank) {
    fc_tensor *r = sum_to(ctx, g, shape, rank);
    if (r) r = as_dense(ctx, r, gdt);
    if (r && *target) r = add(ctx, *target, r);
    if (!r) return fc__failed(ctx);
    fc_tensor *old = *target;
    *target = fc_retain(r);
    fc_release(old);
    return FC_OK;
}

/* ---- regions: an embedding and its adjoint, a strided gather ------------------------ */

/* The region's layout, owned by the node (ext). */
typedef struct gg_region {
    fc__ag_region reg;
    int64_t shape[FC_MAX_RANK]; /* the region's (the gradient's) shape */
    int rank;
} gg_region;

static fc_tensor *embed(fc_ctx *ctx, fc_tensor *g, const int64_t *shape, int rank,
                        const fc__ag_region *reg);

static fc_status keep_region(fc_ctx *ctx, fc_node *nd, const fc__ag_region *reg,
                             const fc_tensor *g) {
    gg_region *r = fc__ctx_alloc(ctx, sizeof *r);
    if (!r) return fc__fail(ctx, FC_ERR_OOM, "backward (region): out of memory");
    r->reg = *reg;
    r->rank = g->raw.rank;
    memcpy(r->shape, g->raw.shape, sizeof r->shape);
    nd->ext = r;
    nd->ext_size = sizeof *r;
    return FC_OK;
}

/* gather: out = the region of t (t contiguous): its rule puts the gradient
 * back into the region (fc__ag_gin_region, recorded again by the engine). */
static fc_status gather_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    const gg_region *r = node->ext;
    gin[0] = gout;
    return fc__ag_gin_region(ctx, node, 0, r->reg.strides, r->reg.offset);
}

static fc_tensor *gather(fc_ctx *ctx, fc_tensor *t, const gg_region *r) {
    fc_tensor *src = as_dense(ctx, t, t->raw.dtype);
    if (!src) return NULL;
    fc_raw v = src->raw; /* borrowed: not released */
    v.rank = r->rank;
    memcpy(v.shape, r->shape, sizeof v.shape);
    memcpy(v.strides, r->reg.strides, sizeof v.strides);
    v.offset = src->raw.offset + r->reg.offset;
    fc_tensor *out = fc__tensor_new(ctx, "backward (region)", v.dtype, v.shape, v.rank);
    if (!out) return NULL;
    memset(fc__raw_base(&out->raw), 0, fc_tensor_nbytes(out));
    fc__ag_acc_raw(ctx, &out->raw, &v);
    if (!fc__ag_wants(ctx, 1, &src)) return out;
    fc_node *nd = fc__ag_record(ctx, "backward (region)", gather_backward, out, 1, &src);
    if (!nd || keep_region(ctx, nd, &r->reg, out) != FC_OK) return NULL;
    return out;
}

/* embed: out = zeros(shape) with g added into the region; its rule gathers
 * the region of the gradient. */
static fc_status embed_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    gin[0] = gather(ctx, gout, node->ext);
    return gin[0] ? FC_OK : fc__failed(ctx);
}

static fc_tensor *embed(fc_ctx *ctx, fc_tensor *g, const int64_t *shape, int rank,
                        const fc__ag_region *reg) {
    fc_tensor *out = fc__tensor_new(ctx, "backward (region)", g->raw.dtype, shape, rank);
    if (!out) return NULL;
    memset(fc__raw_base(&out->raw), 0, fc_tensor_nbytes(out));
    fc_raw v = out->raw; /* borrowed: not released */
    v.rank = g->raw.rank;
    memcpy(v.shape, g->raw.shape, sizeof v.shape);
    memcpy(v.strides, reg->strides, sizeof v.strides);
    v.offset = reg->offset;
    fc__ag_acc_raw(ctx, &v, &g->raw);
    if (!fc__ag_wants(ctx, 1, &g)) return out;
    fc_node *nd = fc__ag_record(ctx, "backward (region)", embed_backward, out, 1, &g);
    if (!nd || keep_region(ctx, nd, reg, g) != FC_OK) return NULL;
    return out;
}

fc_status fc__ag_graph_add_region(fc_ctx *ctx, fc_tensor **target, fc_tensor *g, fc_dtype gdt,
                                  const int64_t *shape, int rank, const fc__ag_region *reg) {
    fc_tensor *c = as_dense(ctx, g, gdt);
    fc_tensor *e = c ? embed(ctx, c, shape, rank, reg) : NULL;
    if (!e) return fc__failed(ctx);
    return fc__ag_graph_add_into(ctx, target, e, gdt, shape, rank);
}

/* ---- a rule's constant gradient, kept in the graph -------------------------------------- */

/* Its derivative is zero: a [1] zero, which the engine broadcasts. */
static fc_status constant_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    (void)node;
    gin[0] = fc__tensor_new(ctx, "backward (constant)", gout->raw.dtype, (const int64_t[]){1}, 1);
    if (!gin[0]) return fc__failed(ctx);
    fc__store_f64(gout->raw.dtype, fc__raw_base(&gin[0]->raw), 0.0);
    return FC_OK;
}

fc_tensor *fc__ag_graph_constant(fc_ctx *ctx, fc_node *src, fc_tensor *g) {
    fc_raw v;
    if (fc__raw_view(&g->raw, &v) != FC_OK) {
        fc__fail(ctx, FC_ERR_OOM, "backward (constant): out of memory");
        return NULL;
    }
    fc_tensor *out = fc__tensor_wrap(ctx, "backward (constant)", &v);
    fc_node *nd = out ? fc__ag_record(ctx, "backward (constant)", constant_backward, out, 0, NULL)
                      : NULL;
    if (!nd) return NULL;
    /* the one input is src's output, by identity: no handle of it exists
     * (its values are not needed, only the edge) */
    fc__ag_input *in = &nd->in[0];
    nd->n_in = 1;
    in->node = src;
    src->refs++;
    in->needs = true;
    in->dtype = src->out_dtype;
    in->rank = src->out_rank;
    memcpy(in->shape, src->out_shape, sizeof in->shape);
    return out;
}
