/* SPDX-License-Identifier: MIT */
/* ops/reduce.c - the public reductions of fucina/ops.h: axes and dtype
 * checks, the output dtype policy, the autograd records, and each
 * backward rule under its forward. The reducing is done by the engine in
 * exec/kernels/reduce.c, the rules' elementwise passes by the kernels of
 * exec/kernels/reduce_backward.c.
 *
 * Output dtypes: sum/prod/max/min give f32 for f16, bf16 and f32, f64 for
 * f64 and i64 for integers and bool; mean/var/std/logsumexp take floats
 * only and give f32 or f64; argmax/argmin give i64; all/any give bool.
 *
 * Rules (g the output gradient, seen broadcast over the reduced axes):
 *   sum   dx = g                         mean  dx = g / n
 *   prod  no zero in the set: dx = g * prod / x; exactly one zero: the zero
 *         gets g * (product of the others), the rest 0; two or more: 0
 *   max/min  g goes to the first extremal element (row-major over the
 *         reduced axes; the first NaN when there is one), 0 elsewhere
 *   var   dx = g * 2 (x - mean) / (n - correction); std divides by 2 std
 *   logsumexp  dx = g * exp(x - out)
 * argmax, argmin, all and any record nothing. */
#include <string.h>

#include "exec/kernels/reduce.h"
#include "ag/tape.h"
#include "fucina.h"

/* ---- the node ------------------------------------------------------------------------------- */

/* Every differentiable reduction records one node with this layout. */
enum red_int_slot {
    RED_I_AXES,  /* bit k set: axis k of the input is reduced */
    RED_I_COUNT, /* elements reduced into each output */
    RED_I_SQRT,  /* 1 for std, 0 otherwise */
    RED_I_OP,    /* the engine op (fc__red_op): tells max from min */
};
enum red_float_slot {
    RED_F_CORRECTION, /* var / std: divide by max(0, n - correction) */
};
/* Saved values: the input when the rule needs it, then the output (only
 * ever saved together with the input, so its index is fixed). */
enum red_saved_slot {
    RED_SAVED_INPUT,
    RED_SAVED_OUTPUT,
};

static void node_mask(const fc_node *node, bool *mask) {
    for (int i = 0; i < node->in[0].rank; i++)
        mask[i] = (node->i[RED_I_AXES] >> i) & 1;
}

/* The saved input as f32 or f64 (16-bit floats widened); scope-owned. */
static fc_tensor *saved_float_input(fc_ctx *ctx, fc_node *node) {
    fc_tensor *t = fc__ag_saved_tensor(ctx, node, RED_SAVED_INPUT);
    if (!t || t->raw.dtype == FC_F32 || t->raw.dtype == FC_F64) return t;
    return fc_to(ctx, t, FC_F32);
}

/* A per-output f64 reduction of x (engine op) with the output's element
 * order; scope-owned. */
static fc_tensor *per_output(fc_ctx *ctx, const fc_node *node, fc_tensor *x, fc__red_op op,
                             double scale) {
    bool mask[FC_MAX_RANK];
    node_mask(node, mask);
    fc_tensor *t = fc__tensor_new(ctx, node->op, FC_F64, node->out_shape, node->out_rank);
    if (!t) return NULL;
    fc__red_params prm = {.scale = scale};
    if (fc__red_run(ctx, node->op, op, &x->raw, mask, &prm, &t->raw) != FC_OK) return NULL;
    return t;
}

/* dx of x's shape, in the gradient dtype, from x and the per-output a, b. */
static fc_tensor *combine(fc_ctx *ctx, fc_node *node, fc__red_combine_mode mode, fc_tensor *x,
                          fc_tensor *a, fc_tensor *b) {
    bool mask[FC_MAX_RANK];
    node_mask(node, mask);
    return fc__red_combine(ctx, node->op, mode, x, a, b, node->in[0].shape, node->in[0].rank, mask,
                           fc__grad_dtype(node->in[0].dtype));
}

/* ---- create_graph: the rules from recorded ops ------------------------------------------------
 * g is reshaped to the input's rank with the reduced axes kept as 1, so it
 * broadcasts over them (the engine repeats it to the input's shape). */

/* The reduced axes of the node; returns their count. */
static int node_axes(const fc_node *node, int *axes) {
    int n = 0;
    for (int i = 0; i < node->in[0].rank; i++)
        if ((node->i[RED_I_AXES] >> i) & 1) axes[n++] = i;
    return n;
}

/* t (of the output's shape) with the reduced axes put back as 1. */
static fc_tensor *kept(fc_ctx *ctx, const fc_node *node, fc_tensor *t) {
    int64_t shape[FC_MAX_RANK];
    int r = node->in[0].rank;
    for (int i = 0; i < r; i++)
        shape[i] = (node->i[RED_I_AXES] >> i) & 1 ? 1 : node->in[0].shape[i];
    return fc_reshape(ctx, t, shape, r);
}

/* The saved input, linked, in g's dtype. */
static fc_tensor *graph_input(fc_ctx *ctx, fc_node *node, const fc_tensor *g) {
    fc_tensor *x = fc__ag_saved_tensor(ctx, node, RED_SAVED_INPUT);
    return x && x->raw.dtype != g->raw.dtype ? fc_to(ctx, x, g->raw.dtype) : x;
}

/* prod's rule where the set holds a zero (prod / x is undefined there):
 * dx_i = g * prod over k != i of x_k, each exclusive product a recorded
 * fc_prod of the set with x_i replaced by 1 (an n x n matrix per output,
 * n the set's size: meant for the small sets higher-order code meets). x
 * is permuted so the reduced axes come last and flattened to n. */
static fc_status prod_exclusive(fc_ctx *ctx, fc_node *node, fc_tensor *x, fc_tensor *g,
                                const int *axes, int na, fc_tensor **gin) {
    int r = x->raw.rank, perm[FC_MAX_RANK], inv[FC_MAX_RANK], nk = 0;
    int64_t n = 1, shape[FC_MAX_RANK + 1], pshape[FC_MAX_RANK];
    for (int i = 0; i < r; i++)
        if (!((node->i[RED_I_AXES] >> i) & 1)) perm[nk++] = i;
    for (int j = 0; j < na; j++) perm[nk + j] = axes[j], n *= x->raw.shape[axes[j]];
    for (int i = 0; i < r; i++) inv[perm[i]] = i, pshape[i] = x->raw.shape[perm[i]];
    for (int i = 0; i < nk; i++) shape[i] = pshape[i];
    shape[nk] = n;
    fc_tensor *xr = fc_reshape(ctx, fc_permute(ctx, x, perm), shape, nk + 1); /* [K.., n] */
    shape[nk + 1] = n;
    fc_tensor *e = fc_expand(ctx, fc_unsqueeze(ctx, xr, nk), shape, nk + 2); /* [K.., n, n] */
    fc_tensor *eye = fc_zeros(ctx, FC_BOOL, (int64_t[]){n, n}, 2);
    if (!e || !eye) return fc__failed(ctx);
    for (int64_t i = 0; i < n; i++) ((bool *)fc__raw_base(&eye->raw))[i * n + i] = true;
    int last = nk + 1;
    fc_tensor *ex = fc_prod(ctx, fc_masked_fill(ctx, e, eye, 1.0), &last, 1, false); /* [K.., n] */
    shape[nk] = 1;
    fc_tensor *d = fc_mul(ctx, ex, fc_reshape(ctx, g, shape, nk + 1));
    fc_tensor *dx = fc_permute(ctx, fc_reshape(ctx, d, pshape, r), inv);
    gin[0] = dx;
    return fc_ctx_status(ctx);
}

static fc_status graph_rule(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_tensor *g = kept(ctx, node, gout);
    int axes[FC_MAX_RANK], na = node_axes(node, axes);
    const char *op = node->op;
    if (!g) return fc__failed(ctx);
    if (!strcmp(op, "sum")) {
        gin[0] = g;
        return FC_OK;
    }
    if (!strcmp(op, "mean")) {
        gin[0] = fc_mul_scalar(ctx, g, 1.0 / (double)node->i[RED_I_COUNT]);
        return fc_ctx_status(ctx);
    }
    if (node->i[RED_I_OP] == FC__RED_MAX || node->i[RED_I_OP] == FC__RED_MIN) {
        /* g times the (constant) one-hot of the chosen element */
        bool mask[FC_MAX_RANK];
        node_mask(node, mask);
        fc_tensor *x = fc__ag_saved_const(ctx, node, RED_SAVED_INPUT);
        fc_tensor *idx = fc__tensor_new(ctx, op, FC_I64, node->out_shape, node->out_rank);
        fc_tensor *one = fc_ones(ctx, gout->raw.dtype, node->out_shape, node->out_rank);
        if (!x || !idx || !one) return fc__failed(ctx);
        if (fc__red_run(ctx, op, node->i[RED_I_OP] == FC__RED_MAX ? FC__RED_ARGMAX : FC__RED_ARGMIN,
                        &x->raw, mask, NULL, &idx->raw) != FC_OK)
            return fc__failed(ctx);
        fc_tensor *hot =
            fc__red_scatter(ctx, op, idx, one, node->in[0].shape, node->in[0].rank, mask);
        gin[0] = fc_mul(ctx, g, hot);
        return fc_ctx_status(ctx);
    }
    fc_tensor *x = graph_input(ctx, node, gout);
    if (!x) return fc__failed(ctx);
    switch (node->i[RED_I_OP]) {
    case FC__RED_PROD: { /* g * prod / x without zeros in the set, else exclusive products */
        fc_tensor *c = fc__ag_saved_const(ctx, node, RED_SAVED_INPUT);
        fc_tensor *z = c ? fc_any(ctx, fc_eq_scalar(ctx, c, 0.0), NULL, 0, false) : NULL;
        bool b = false;
        if (z && fc_tensor_copy_out(&b, sizeof b, z) == FC_OK && b)
            return prod_exclusive(ctx, node, x, g, axes, na, gin);
        gin[0] = fc_div(ctx, fc_mul(ctx, g, fc_prod(ctx, x, axes, na, true)), x);
        return fc_ctx_status(ctx);
    }
    case FC__RED_VAR: { /* g 2 (x - mean) / den, std: g (x - mean) / (den std) */
        double n = (double)node->i[RED_I_COUNT], den = n - node->f[RED_F_CORRECTION];
        den = den > 0 ? den : 0.0;
        fc_tensor *d = fc_sub(ctx, x, fc_mean(ctx, x, axes, na, true));
        if (!node->i[RED_I_SQRT]) {
            gin[0] = fc_mul(ctx, g, fc_mul_scalar(ctx, d, 2.0 / den));
        } else {
            fc_tensor *sd = fc__ag_saved_tensor(ctx, node, RED_SAVED_OUTPUT);
            if (sd && sd->raw.dtype != gout->raw.dtype) sd = fc_to(ctx, sd, gout->raw.dtype);
            gin[0] =
                fc_div(ctx, fc_mul(ctx, g, fc_mul_scalar(ctx, d, 1.0 / den)), kept(ctx, node, sd));
        }
        return fc_ctx_status(ctx);
    }
    case FC__RED_LSE: { /* g exp(x - out) */
        fc_tensor *out = fc__ag_saved_tensor(ctx, node, RED_SAVED_OUTPUT);
        if (out && out->raw.dtype != gout->raw.dtype) out = fc_to(ctx, out, gout->raw.dtype);
        gin[0] = fc_mul(ctx, g, fc_exp(ctx, fc_sub(ctx, x, kept(ctx, node, out))));
        return fc_ctx_status(ctx);
    }
    default:
        return fc__ag_unsupported(ctx, op);
    }
}

/* ---- the shared forward --------------------------------------------------------------------- */

typedef enum dclass {
    D_NUMERIC, /* floats, integers, bool */
    D_FLOAT,   /* f16 bf16 f32 f64 */
    D_TRUTH    /* every scalar dtype, the f8 floats included */
} dclass;

static bool dtype_ok(dclass c, fc_dtype dt) {
    if (!fc_dtype_is_scalar(dt)) return false;
    switch (c) {
    case D_NUMERIC:
        return !fc_dtype_is_f8(dt);
    case D_FLOAT:
        return fc_dtype_is_float(dt);
    default:
        return true;
    }
}

static fc_dtype out_dtype(fc__red_op op, fc_dtype dt) {
    if (op == FC__RED_ALL || op == FC__RED_ANY) return FC_BOOL;
    if (op == FC__RED_ARGMAX || op == FC__RED_ARGMIN) return FC_I64;
    if (fc_dtype_is_float(dt)) return dt == FC_F64 ? FC_F64 : FC_F32;
    return FC_I64;
}

typedef struct red_spec {
    const char *name;
    fc__red_op op;
    dclass dc;
    bool mean;
    fc__red_params prm;
    fc__backward_fn backward;     /* NULL: not differentiable */
    bool save_input, save_output; /* save_output only with save_input */
} red_spec;

static fc_tensor *reduce(fc_ctx *ctx, const red_spec *sp, fc_tensor *x, const int *axes, int naxes,
                         bool keepdim) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, sp->name, x);
    fc_dtype dt = x->raw.dtype;
    if (!dtype_ok(sp->dc, dt)) {
        char d[160];
        fc__fail(ctx, FC_ERR_DTYPE, "%s: dtype %s of %s is not supported (%s); cast with fc_to",
                 sp->name, fc_dtype_name(dt), fc__desc(x, d, (int)sizeof d),
                 sp->dc == D_FLOAT     ? "float dtypes only"
                 : sp->dc == D_NUMERIC ? "floats, integers and bool"
                                       : "scalar dtypes only");
        return NULL;
    }
    bool mask[FC_MAX_RANK];
    int64_t oshape[FC_MAX_RANK], count;
    int orank;
    if (fc__red_axes(ctx, sp->name, x, axes, naxes, keepdim, mask, oshape, &orank, &count) != FC_OK)
        return NULL;
    fc__red_params prm = sp->prm;
    if (sp->mean) prm.scale = 1.0 / (double)count;
    fc_tensor *out = fc__tensor_new(ctx, sp->name, out_dtype(sp->op, dt), oshape, orank);
    if (!out) return NULL;
    if (fc__red_run(ctx, sp->name, sp->op, &x->raw, mask, &prm, &out->raw) != FC_OK) {
        fc_release(out);
        return NULL;
    }
    if (sp->backward && fc__ag_wants(ctx, 1, &x)) {
        fc_node *nd = fc__ag_record(ctx, sp->name, sp->backward, out, 1, &x);
        if (!nd) {
            fc_release(out);
            return NULL;
        }
        int64_t bits = 0;
        for (int i = 0; i < x->raw.rank; i++)
            bits |= (int64_t)mask[i] << i;
        nd->i[RED_I_AXES] = bits;
        nd->i[RED_I_COUNT] = count;
        nd->i[RED_I_SQRT] = prm.take_sqrt;
        nd->i[RED_I_OP] = sp->op;
        nd->f[RED_F_CORRECTION] = prm.correction;
        /* in the order of enum red_saved_slot */
        if ((sp->save_input && fc__ag_save(ctx, nd, "input", x) != FC_OK) ||
            (sp->save_output && fc__ag_save(ctx, nd, "output", out) != FC_OK)) {
            fc_release(out);
            return NULL;
        }
    }
    return fc__finish(ctx, sp->name, out);
}

/* ---- sum ------------------------------------------------------------------------------------ */

static fc_status sum_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

fc_tensor *fc_sum(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim) {
    static const red_spec sp = {
        .name = "sum", .op = FC__RED_SUM, .dc = D_NUMERIC, .backward = sum_backward};
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}

static fc_status sum_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (fc__ag_create_graph(ctx)) return graph_rule(ctx, node, gout, gin);
    if (fc__numel(&gout->raw) == 1) { /* broadcasts to the input: the engine repeats it */
        gin[0] = gout;
        return FC_OK;
    }
    bool mask[FC_MAX_RANK];
    node_mask(node, mask);
    gin[0] = fc__red_expand(ctx, node->op, gout, node->in[0].shape, node->in[0].rank, mask);
    return gin[0] ? FC_OK : fc__failed(ctx);
}

/* ---- mean ----------------------------------------------------------------------------------- */

static fc_status mean_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

fc_tensor *fc_mean(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim) {
    static const red_spec sp = {
        .name = "mean", .op = FC__RED_SUM, .dc = D_FLOAT, .mean = true, .backward = mean_backward};
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}

static fc_status mean_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (fc__ag_create_graph(ctx)) return graph_rule(ctx, node, gout, gin);
    fc_tensor *q = fc__red_scaled(ctx, node->op, gout, 1.0 / (double)node->i[RED_I_COUNT]);
    if (!q) return fc__failed(ctx);
    bool mask[FC_MAX_RANK];
    node_mask(node, mask);
    gin[0] = fc__red_expand(ctx, node->op, q, node->in[0].shape, node->in[0].rank, mask);
    return gin[0] ? FC_OK : fc__failed(ctx);
}

/* ---- prod ----------------------------------------------------------------------------------- */

static fc_status prod_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

fc_tensor *fc_prod(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim) {
    static const red_spec sp = {.name = "prod",
                                .op = FC__RED_PROD,
                                .dc = D_NUMERIC,
                                .backward = prod_backward,
                                .save_input = true};
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}

static fc_status prod_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (fc__ag_create_graph(ctx)) return graph_rule(ctx, node, gout, gin);
    fc_tensor *x = saved_float_input(ctx, node);
    if (!x) return fc__failed(ctx);
    fc_tensor *a = per_output(ctx, node, x, FC__RED_NZPROD, 0);
    fc_tensor *z = per_output(ctx, node, x, FC__RED_NZCOUNT, 0);
    if (!a || !z) return fc__failed(ctx);
    fc__red_mul_into(a, gout);
    gin[0] = combine(ctx, node, FC__RED_ZEROS, x, a, z);
    return gin[0] ? FC_OK : fc__failed(ctx);
}

/* ---- max, min ------------------------------------------------------------------------------- */

static fc_status extremum_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

fc_tensor *fc_max(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim) {
    static const red_spec sp = {.name = "max",
                                .op = FC__RED_MAX,
                                .dc = D_NUMERIC,
                                .backward = extremum_backward,
                                .save_input = true};
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}

fc_tensor *fc_min(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim) {
    static const red_spec sp = {.name = "min",
                                .op = FC__RED_MIN,
                                .dc = D_NUMERIC,
                                .backward = extremum_backward,
                                .save_input = true};
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}

static fc_status extremum_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (fc__ag_create_graph(ctx)) return graph_rule(ctx, node, gout, gin);
    fc_tensor *x = fc__ag_saved_tensor(ctx, node, RED_SAVED_INPUT);
    if (!x) return fc__failed(ctx);
    bool mask[FC_MAX_RANK];
    node_mask(node, mask);
    bool is_max = node->i[RED_I_OP] == FC__RED_MAX;
    fc_tensor *idx = fc__tensor_new(ctx, node->op, FC_I64, node->out_shape, node->out_rank);
    if (!idx) return fc__failed(ctx);
    if (fc__red_run(ctx, node->op, is_max ? FC__RED_ARGMAX : FC__RED_ARGMIN, &x->raw, mask, NULL,
                    &idx->raw) != FC_OK)
        return fc__failed(ctx);
    gin[0] = fc__red_scatter(ctx, node->op, idx, gout, node->in[0].shape, node->in[0].rank, mask);
    return gin[0] ? FC_OK : fc__failed(ctx);
}

/* ---- argmax, argmin (not differentiable) ---------------------------------------------------- */

fc_tensor *fc_argmax(fc_ctx *ctx, fc_tensor *x, int axis, bool keepdim) {
    static const red_spec sp = {.name = "argmax", .op = FC__RED_ARGMAX, .dc = D_NUMERIC};
    return reduce(ctx, &sp, x, &axis, 1, keepdim);
}

fc_tensor *fc_argmin(fc_ctx *ctx, fc_tensor *x, int axis, bool keepdim) {
    static const red_spec sp = {.name = "argmin", .op = FC__RED_ARGMIN, .dc = D_NUMERIC};
    return reduce(ctx, &sp, x, &axis, 1, keepdim);
}

/* ---- var, std ------------------------------------------------------------------------------- */

static fc_status var_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

fc_tensor *fc_var(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, int correction,
                  bool keepdim) {
    red_spec sp = {.name = "var",
                   .op = FC__RED_VAR,
                   .dc = D_FLOAT,
                   .backward = var_backward,
                   .save_input = true};
    sp.prm.correction = correction;
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}

fc_tensor *fc_std(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, int correction,
                  bool keepdim) {
    red_spec sp = {.name = "std",
                   .op = FC__RED_VAR,
                   .dc = D_FLOAT,
                   .backward = var_backward,
                   .save_input = true,
                   .save_output = true};
    sp.prm.correction = correction;
    sp.prm.take_sqrt = true;
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}

/* var and std (RED_I_SQRT), which saves its output as well. */
static fc_status var_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (fc__ag_create_graph(ctx)) return graph_rule(ctx, node, gout, gin);
    fc_tensor *x = saved_float_input(ctx, node);
    if (!x) return fc__failed(ctx);
    double n = (double)node->i[RED_I_COUNT], den = n - node->f[RED_F_CORRECTION];
    den = den > 0 ? den : 0.0;
    fc_tensor *mean = per_output(ctx, node, x, FC__RED_SUM, 1.0 / n);
    if (!mean) return fc__failed(ctx);
    fc_tensor *sd = NULL;
    if (node->i[RED_I_SQRT]) {
        sd = fc__ag_saved_tensor(ctx, node, RED_SAVED_OUTPUT);
        if (!sd) return fc__failed(ctx);
    }
    fc_tensor *q = fc__red_var_factor(ctx, node->op, sd, den, node->out_shape, node->out_rank);
    if (!q) return fc__failed(ctx);
    fc__red_mul_into(q, gout);
    gin[0] = combine(ctx, node, FC__RED_AFFINE, x, q, mean);
    return gin[0] ? FC_OK : fc__failed(ctx);
}

/* ---- logsumexp ------------------------------------------------------------------------------ */

static fc_status logsumexp_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

fc_tensor *fc_logsumexp(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim) {
    static const red_spec sp = {.name = "logsumexp",
                                .op = FC__RED_LSE,
                                .dc = D_FLOAT,
                                .backward = logsumexp_backward,
                                .save_input = true,
                                .save_output = true};
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}

static fc_status logsumexp_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (fc__ag_create_graph(ctx)) return graph_rule(ctx, node, gout, gin);
    fc_tensor *x = saved_float_input(ctx, node);
    fc_tensor *out = fc__ag_saved_tensor(ctx, node, RED_SAVED_OUTPUT);
    if (!x || !out) return fc__failed(ctx);
    gin[0] = combine(ctx, node, FC__RED_EXP, x, gout, out);
    return gin[0] ? FC_OK : fc__failed(ctx);
}

/* ---- all, any (not differentiable) ---------------------------------------------------------- */

fc_tensor *fc_all(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim) {
    static const red_spec sp = {.name = "all", .op = FC__RED_ALL, .dc = D_TRUTH};
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}

fc_tensor *fc_any(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim) {
    static const red_spec sp = {.name = "any", .op = FC__RED_ANY, .dc = D_TRUTH};
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}
