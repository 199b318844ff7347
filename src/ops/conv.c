/* SPDX-License-Identifier: MIT */
/* ops/conv.c - fc_conv1d, fc_conv2d and fc_conv_transpose2d: argument and
 * shape checks, the autograd records, and each backward rule under its
 * forward. The products are in exec/kernels/conv.c, which sees every
 * convolution as one geometry (x image side, y filtered side):
 *
 *   conv             y = conv(x, w) + b     dx = conv^T(dy, w)   dw = wgrad(x, dy)
 *   conv_transpose   y = conv^T(x, w) + b   dx = conv(dy, w)     dw = wgrad(dy, x)
 *   both             db = dy summed over the batch and the spatial axes
 *
 * conv1d is conv2d with a height of 1: its tensors are read in the same
 * row-major order as [N, C, 1, L], so it shares the kernels and the rule,
 * which reshapes its results back to the inputs' shapes.
 *
 * The node keeps only the integer arguments; the sizes come back from the
 * node's input and output shapes, so padding_same is stored as the padding
 * it chose (the smaller half first) and output_padding is the output size.
 * Rules run inside the backward scope and release nothing. */
#include "exec/kernels/conv.h"
#include "ag/tape.h"
#include "exec/profile.h"
#include "exec/kernels/copy.h"
#include "fucina.h"

/* The profiler's FLOP count of a convolution (fucina/profile.h): each
 * element of side (the output; the input of a transposed one) takes a
 * multiply and an add per weight of one output channel (of one input
 * channel when transposed): numel(w) / w's first dimension. */
static void note_flops(fc_ctx *ctx, const fc_tensor *side, const fc_tensor *w) {
    if (ctx->profiling && side)
        fc__profile_flops(ctx, 2 * fc__numel(&side->raw) * (fc__numel(&w->raw) / w->raw.shape[0]));
}

/* ---- the nodes --------------------------------------------------------------------------------
 */

/* Inputs {x, weight, bias (may be NULL)}; saved x and weight as given. */
enum conv_input {
    CONV_IN_X,
    CONV_IN_WEIGHT,
    CONV_IN_BIAS,
    CONV_N_IN,
};
enum conv_saved_slot {
    CONV_SAVED_X,
    CONV_SAVED_WEIGHT,
};
/* i[]: the arguments of the height (conv1d: a fixed 1 / 0 / 1) and width
 * axes, and groups. */
enum conv_i_slot {
    CONV_I_STRIDE_H,
    CONV_I_STRIDE_W,
    CONV_I_PAD_H,
    CONV_I_PAD_W,
    CONV_I_DIL_H,
    CONV_I_DIL_W,
    CONV_I_GROUPS,
};

/* The arguments of any of the three ops, per axis (0: height, 1: width). */
typedef struct conv_args {
    int64_t stride[2], pad[2], outpad[2], dil[2], groups;
    bool same;
} conv_args;

/* ---- checks -----------------------------------------------------------------------------------
 */

static bool is_float(fc_dtype dt) {
    return dt == FC_F16 || dt == FC_BF16 || dt == FC_F32 || dt == FC_F64;
}

/* Dtypes and ranks of x, weight and bias (NULL allowed). */
static bool check_tensors(fc_ctx *ctx, const char *op, int rank, const fc_tensor *x,
                          const fc_tensor *w, const fc_tensor *b) {
    char d[160];
    fc_dtype dt = x->raw.dtype;
    if (!is_float(dt)) {
        fc__fail(ctx, FC_ERR_DTYPE, "%s: x %s must be f16, bf16, f32 or f64; cast with fc_to", op,
                 fc__desc(x, d, (int)sizeof d));
        return false;
    }
    const fc_tensor *other[2] = {w, b};
    const char *role[2] = {"weight", "bias"};
    for (int i = 0; i < 2; i++) {
        if (other[i] && other[i]->raw.dtype != dt) {
            fc__fail(ctx, FC_ERR_DTYPE, "%s: %s dtype %s differs from x's %s; cast with fc_to", op,
                     role[i], fc_dtype_name(other[i]->raw.dtype), fc_dtype_name(dt));
            return false;
        }
    }
    const fc_tensor *t = x->raw.rank != rank ? x : w->raw.rank != rank ? w : NULL;
    if (t) {
        fc__fail(ctx, FC_ERR_RANK, "%s: %s %s must be %d-D (%s)", op, t == x ? "x" : "weight",
                 fc__desc(t, d, (int)sizeof d), rank,
                 t == x ? (rank == 3 ? "[N, C, L]" : "[N, C, H, W]")
                        : (rank == 3 ? "[Cout, Cin/groups, k]" : "[Cout, Cin/groups, kH, kW]"));
        return false;
    }
    if (b && b->raw.rank != 1) {
        fc__fail(ctx, FC_ERR_RANK, "%s: bias %s must be 1-D [Cout]", op,
                 fc__desc(b, d, (int)sizeof d));
        return false;
    }
    return true;
}

/* The option structs' convention: a zero stride, dilation or groups means
 * the default, 1 (negative values stay errors, for check_args). */
static int64_t or_one(int64_t v) { return v == 0 ? 1 : v; }

/* The integer arguments of axes [first, 2). */
static bool check_args(fc_ctx *ctx, const char *op, const conv_args *a, int first,
                       bool transposed) {
    static const char *axis[2] = {"height", "width"};
    if (a->groups < 1) {
        fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: groups %lld must be >= 1", op, (long long)a->groups);
        return false;
    }
    for (int i = first; i < 2; i++) {
        const char *ax = first == 1 ? "" : axis[i];
        const char *sp = first == 1 ? "" : " ";
        if (a->stride[i] < 1 || a->dil[i] < 1) {
            bool s = a->stride[i] < 1;
            fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: %s%s%s %lld must be >= 1", op, ax, sp,
                     s ? "stride" : "dilation", (long long)(s ? a->stride[i] : a->dil[i]));
            return false;
        }
        if (!a->same && a->pad[i] < 0) {
            fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: %s%spadding %lld must be >= 0", op, ax, sp,
                     (long long)a->pad[i]);
            return false;
        }
        if (a->same && a->stride[i] != 1) {
            fc__fail(ctx, FC_ERR_INVALID_ARG,
                     "%s: padding_same needs stride 1, got %s%sstride %lld (as PyTorch)", op, ax,
                     sp, (long long)a->stride[i]);
            return false;
        }
        if (transposed &&
            (a->outpad[i] < 0 || (a->outpad[i] >= a->stride[i] && a->outpad[i] >= a->dil[i]))) {
            fc__fail(ctx, FC_ERR_INVALID_ARG,
                     "%s: %s%soutput_padding %lld must be >= 0 and below the stride %lld or the "
                     "dilation %lld",
                     op, ax, sp, (long long)a->outpad[i], (long long)a->stride[i],
                     (long long)a->dil[i]);
            return false;
        }
    }
    return true;
}

/* Channel counts against groups: x's channels cx, weight [w0, w1, ...];
 * conv: cx = w1 * groups, Cout = w0; transposed: cx = w0, Cout = w1 * groups. */
static bool check_channels(fc_ctx *ctx, const char *op, bool transposed, const fc_tensor *x,
                           const fc_tensor *w, const fc_tensor *b, int64_t groups, int64_t *cout) {
    char xs[160], ws[160];
    int64_t cx = x->raw.shape[1], w0 = w->raw.shape[0], w1 = w->raw.shape[1];
    int64_t cin_div = transposed ? w0 : cx;
    if (cin_div % groups != 0 || (!transposed && w0 % groups != 0)) {
        bool in = cin_div % groups != 0;
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                 "%s: %s channels %lld of x %s / weight %s are not divisible by groups %lld", op,
                 in ? "input" : "output", (long long)(in ? cin_div : w0),
                 fc__desc(x, xs, (int)sizeof xs), fc__desc(w, ws, (int)sizeof ws),
                 (long long)groups);
        return false;
    }
    /* groups divides cin_div, so groups <= cin_div: conv compares cx / groups
     * with w1 instead of forming w1 * groups, and a transposed conv's
     * w1 * groups is at most w1 * w0, the weight's element count (a checked
     * size): neither can wrap. */
    int64_t other = transposed ? w1 * groups : w0;
    if (transposed ? cx != w0 : cx / groups != w1) {
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                 "%s: x %s has %lld channels, weight %s expects %lld %s (groups %lld)", op,
                 fc__desc(x, xs, (int)sizeof xs), (long long)cx, fc__desc(w, ws, (int)sizeof ws),
                 (long long)(transposed ? w0 : w1), transposed ? "in all" : "per group",
                 (long long)groups);
        return false;
    }
    *cout = other;
    if (b && b->raw.shape[0] != other) {
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH, "%s: bias %s must be [%lld] (Cout) for weight %s", op,
                 fc__desc(b, xs, (int)sizeof xs), (long long)other,
                 fc__desc(w, ws, (int)sizeof ws));
        return false;
    }
    return true;
}

/* Output size of one axis: input n, kernel k, arguments of axis i. The
 * padding_same choice (the smaller half before) is written into a->pad.
 * Every size on the way is checked (core/shape.h): the dilated kernel
 * extent d*(k-1)+1, the padded input n+2p (conv) or the uncropped output
 * (n-1)*s + extent + output_padding (transposed). The kernels index within
 * these, so once they fit no index sum can wrap. Records FC_ERR_OVERFLOW
 * naming the axis and every value when one does not fit, and
 * FC_ERR_INVALID_SHAPE for a size below 1. */
static bool out_size(fc_ctx *ctx, const char *op, const fc_tensor *x, conv_args *a, int i,
                     bool one_axis, int64_t n, int64_t k, bool transposed, int64_t *out) {
    static const char *axis[2] = {"height", "width"};
    char xs[160];
    const char *what = "the dilated kernel extent dilation*(kernel-1)+1";
    int64_t ext = 0, padded = 0, o = 0, twice_pad = 0;
    bool ok = fc__i64_mul(a->dil[i], k - 1, &ext) && fc__i64_add(ext, 1, &ext);
    if (ok && a->same) { /* total padding ext - 1, the smaller half before */
        a->pad[i] = (ext - 1) / 2;
        what = "the padded input size input+dilation*(kernel-1)";
        ok = fc__i64_add(n, ext - 1, &padded);
        o = n;
    } else if (ok && !transposed) {
        what = "the padded input size input+2*padding";
        ok = fc__i64_mul(a->pad[i], 2, &twice_pad) && fc__i64_add(n, twice_pad, &padded);
        o = padded < ext ? 0 : (padded - ext) / a->stride[i] + 1;
    } else if (ok) {
        what = "the uncropped output size (input-1)*stride+dilation*(kernel-1)+1+output_padding";
        ok = fc__i64_mul(n - 1, a->stride[i], &o) && fc__i64_add(o, ext, &o) &&
             fc__i64_add(o, a->outpad[i], &o);
        if (ok) {
            what = "twice the padding";
            ok = fc__i64_mul(a->pad[i], 2, &twice_pad);
            if (ok) o -= twice_pad; /* both >= 0: cannot wrap */
        }
    }
    if (!ok) {
        fc__fail(ctx, FC_ERR_OVERFLOW,
                 "%s: %s along the %s axis of x %s overflows int64 (input %lld, kernel %lld, "
                 "stride %lld, padding %lld, dilation %lld%s%lld)",
                 op, what, one_axis ? "length" : axis[i], fc__desc(x, xs, (int)sizeof xs),
                 (long long)n, (long long)k, (long long)a->stride[i], (long long)a->pad[i],
                 (long long)a->dil[i], transposed ? ", output_padding " : ", groups ",
                 (long long)(transposed ? a->outpad[i] : a->groups));
        return false;
    }
    if (o < 1) {
        fc__fail(ctx, FC_ERR_INVALID_SHAPE,
                 "%s: output size %lld below 1 along an axis of x %s (input %lld, kernel %lld, "
                 "dilation %lld, padding %lld, stride %lld)",
                 op, (long long)o, fc__desc(x, xs, (int)sizeof xs), (long long)n, (long long)k,
                 (long long)a->dil[i], (long long)a->pad[i], (long long)a->stride[i]);
        return false;
    }
    *out = o;
    return true;
}

/* The output's 4-D dims d fit a tensor: FC_ERR_OVERFLOW naming them
 * otherwise (each axis fits int64, their product may not). */
static bool out_fits(fc_ctx *ctx, const char *op, const fc_tensor *x, const int64_t d[4]) {
    if (fc__shape_numel(d, 4, NULL) == FC_OK) return true;
    char xs[160], ds[96];
    fc__fail(ctx, FC_ERR_OVERFLOW,
             "%s: the output %s of x %s has more elements than a tensor can hold", op,
             FC__SHAPE_STR(d, 4, ds), fc__desc(x, xs, (int)sizeof xs));
    return false;
}

/* ---- geometry ---------------------------------------------------------------------------------
 */

/* The 4-D dims of a rank-3 or rank-4 shape (a length becomes [1, L]). */
static void dims4(const int64_t *shape, int rank, int64_t out[4]) {
    out[0] = shape[0], out[1] = shape[1];
    out[2] = rank == 4 ? shape[2] : 1;
    out[3] = shape[rank - 1];
}

/* The kernel geometry for image-side dims xi[4], filtered-side dims yf[4]
 * and weight dims w4[4]. */
static fc__conv_geom geom(const int64_t xi[4], const int64_t yf[4], const int64_t w4[4],
                          const conv_args *a) {
    return (fc__conv_geom){
        .n = xi[0],
        .groups = a->groups,
        .cx = xi[1],
        .hx = xi[2],
        .wx = xi[3],
        .cy = yf[1],
        .hy = yf[2],
        .wy = yf[3],
        .kh = w4[2],
        .kw = w4[3],
        .sh = a->stride[0],
        .sw = a->stride[1],
        .ph = a->pad[0],
        .pw = a->pad[1],
        .dh = a->dil[0],
        .dw = a->dil[1],
    };
}

/* The arguments a node stored. */
static conv_args node_args(const fc_node *nd) {
    return (conv_args){
        .stride = {nd->i[CONV_I_STRIDE_H], nd->i[CONV_I_STRIDE_W]},
        .pad = {nd->i[CONV_I_PAD_H], nd->i[CONV_I_PAD_W]},
        .dil = {nd->i[CONV_I_DIL_H], nd->i[CONV_I_DIL_W]},
        .groups = nd->i[CONV_I_GROUPS],
    };
}

/* A contiguous t seen with shape (same element count): a new view in the
 * current scope, or NULL (error recorded). t is not released. */
static fc_tensor *as_shape(fc_ctx *ctx, const char *op, fc_tensor *t, const int64_t *shape,
                           int rank) {
    if (!t) return NULL;
    int64_t strides[FC_MAX_RANK];
    fc__shape_contiguous_strides(shape, rank, strides);
    return fc__tensor_view(ctx, op, t, shape, strides, rank, t->raw.offset);
}

/* The forward's result y (compute dtype, 4-D) as the op returns it: in
 * dtype dt and shaped [N, C, L] for conv1d. Steals y. */
static fc_tensor *finish_output(fc_ctx *ctx, const char *op, fc_tensor *y, fc_dtype dt, int rank) {
    if (!y) return NULL;
    fc_tensor *out = y;
    if (y->raw.dtype != dt) {
        out = fc__copy_cast(ctx, op, y, dt);
        fc_release(y);
        if (!out) return NULL;
    }
    if (rank == 4) return out;
    const int64_t *s = out->raw.shape;
    fc_tensor *v = as_shape(ctx, op, out, (const int64_t[]){s[0], s[1], s[3]}, 3);
    fc_release(out);
    return v;
}

/* Records the node of a conv or conv_transpose output. */
static fc_tensor *record(fc_ctx *ctx, const char *op, fc__backward_fn rule, fc_tensor *out,
                         fc_tensor *const in[CONV_N_IN], const conv_args *a) {
    fc_node *nd = fc__ag_record(ctx, op, rule, out, CONV_N_IN, in);
    /* in the order of enum conv_saved_slot */
    if (!nd || fc__ag_save(ctx, nd, "x", in[CONV_IN_X]) != FC_OK ||
        fc__ag_save(ctx, nd, "weight", in[CONV_IN_WEIGHT]) != FC_OK) {
        fc_release(out);
        return NULL;
    }
    nd->i[CONV_I_STRIDE_H] = a->stride[0], nd->i[CONV_I_STRIDE_W] = a->stride[1];
    nd->i[CONV_I_PAD_H] = a->pad[0], nd->i[CONV_I_PAD_W] = a->pad[1];
    nd->i[CONV_I_DIL_H] = a->dil[0], nd->i[CONV_I_DIL_W] = a->dil[1];
    nd->i[CONV_I_GROUPS] = a->groups;
    return out;
}

/* ---- fc_conv1d, fc_conv2d ----------------------------------------------------------------------
 */

static fc_status conv_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

static fc_tensor *conv_impl(fc_ctx *ctx, const char *op, int rank, fc_tensor *x, fc_tensor *w,
                            fc_tensor *b, conv_args a) {
    int64_t cout, xd[4], wd[4], yd[4];
    if (!check_tensors(ctx, op, rank, x, w, b) || !check_args(ctx, op, &a, rank == 3, false) ||
        !check_channels(ctx, op, false, x, w, b, a.groups, &cout))
        return NULL;
    dims4(x->raw.shape, rank, xd);
    dims4(w->raw.shape, rank, wd);
    yd[0] = xd[0], yd[1] = cout;
    for (int i = 0; i < 2; i++)
        if (!out_size(ctx, op, x, &a, i, rank == 3, xd[2 + i], wd[2 + i], false, &yd[2 + i]))
            return NULL;
    if (!out_fits(ctx, op, x, yd)) return NULL;
    fc__conv_geom g = geom(xd, yd, wd, &a);
    fc_tensor *y = fc__conv_forward(ctx, op, &g, x, w, b);
    y = finish_output(ctx, op, y, x->raw.dtype, rank);
    fc_tensor *in[CONV_N_IN] = {[CONV_IN_X] = x, [CONV_IN_WEIGHT] = w, [CONV_IN_BIAS] = b};
    if (y && fc__ag_wants(ctx, CONV_N_IN, in)) y = record(ctx, op, conv_backward, y, in, &a);
    note_flops(ctx, y, w);
    return y ? fc__finish(ctx, op, y) : NULL;
}

/* ---- create_graph: the three products as recorded bilinear ops --------------------------------
 * F(x, w) = conv, D(gy, w) = conv^T (dgrad), W(x, gy) = wgrad, over one
 * geometry. Each is bilinear and the other two are its partial adjoints:
 *   F: dx = D(gbar, w)   dw = W(x, gbar)
 *   D: dgy = F(gbar, w)  dw = W(gbar, gy)
 *   W: dx = D(gy, gbar)  dgy = F(x, gbar)
 * so a convolution's rule written with them is differentiable to any
 * order. The node keeps the geometry and the kind in ext. */
typedef enum cp_kind { CP_F, CP_D, CP_W } cp_kind;
typedef struct cp_state {
    fc__conv_geom g;
    cp_kind kind;
} cp_state;

static fc_tensor *cprod(fc_ctx *ctx, const fc__conv_geom *g, cp_kind k, fc_tensor *a, fc_tensor *b);

static fc_status cprod_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    const cp_state *s = node->ext;
    /* recorded in every walk: a gradient through a constant operand under a
     * constant gout is a constant the engine keeps (third order of a conv) */
    fc__ag_recorded_rule(ctx);
    fc_tensor *a = fc__ag_saved_tensor(ctx, node, 0), *b = fc__ag_saved_tensor(ctx, node, 1);
    if (!a || !b) return fc__failed(ctx);
    const fc__conv_geom *g = &s->g;
    bool na = node->in[0].needs, nb = node->in[1].needs;
    switch (s->kind) {
    case CP_F:
        if (na) gin[0] = cprod(ctx, g, CP_D, gout, b);
        if (nb) gin[1] = cprod(ctx, g, CP_W, a, gout);
        break;
    case CP_D:
        if (na) gin[0] = cprod(ctx, g, CP_F, gout, b);
        if (nb) gin[1] = cprod(ctx, g, CP_W, gout, a);
        break;
    case CP_W:
        if (na) gin[0] = cprod(ctx, g, CP_D, b, gout);
        if (nb) gin[1] = cprod(ctx, g, CP_F, a, gout);
        break;
    }
    return fc_ctx_status(ctx);
}

static fc_tensor *cprod(fc_ctx *ctx, const fc__conv_geom *g, cp_kind k, fc_tensor *a,
                        fc_tensor *b) {
    const char *op = "conv (create_graph)";
    if (!a || !b) return NULL;
    fc_tensor *out = k == CP_F   ? fc__conv_forward(ctx, op, g, a, b, NULL)
                     : k == CP_D ? fc__conv_dgrad(ctx, op, g, a, b, NULL)
                                 : fc__conv_wgrad(ctx, op, g, a, b);
    fc_tensor *in[2] = {a, b};
    if (!out || !fc__ag_wants(ctx, 2, in)) return out;
    fc_node *nd = fc__ag_record(ctx, op, cprod_backward, out, 2, in);
    cp_state *st = nd ? fc__ctx_alloc(ctx, sizeof *st) : NULL;
    if (!st) {
        if (nd) fc__fail(ctx, FC_ERR_OOM, "%s: out of memory", op);
        return NULL;
    }
    *st = (cp_state){*g, k};
    nd->ext = st;
    nd->ext_size = sizeof *st;
    if (fc__ag_save(ctx, nd, "a", a) != FC_OK || fc__ag_save(ctx, nd, "b", b) != FC_OK) return NULL;
    return out;
}

/* The convolutions' rules from cprod: x, w and gout seen as 4-D (recorded
 * reshapes), the results reshaped back; transposed: the image side is the
 * output. */
static fc_status conv_graph(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin,
                            const fc__conv_geom *g, bool transposed) {
    fc_dtype gdt = gout->raw.dtype;
    const fc__ag_input *ix = &node->in[CONV_IN_X], *iw = &node->in[CONV_IN_WEIGHT];
    int64_t xd[4], wd[4], yd[4];
    dims4(ix->shape, ix->rank, xd);
    dims4(iw->shape, iw->rank, wd);
    dims4(node->out_shape, node->out_rank, yd);
    fc_tensor *x = fc__ag_saved_tensor(ctx, node, CONV_SAVED_X);
    fc_tensor *w = fc__ag_saved_tensor(ctx, node, CONV_SAVED_WEIGHT);
    if (x && x->raw.dtype != gdt) x = fc_to(ctx, x, gdt);
    if (w && w->raw.dtype != gdt) w = fc_to(ctx, w, gdt);
    x = x ? fc_reshape(ctx, x, xd, 4) : NULL;
    w = w ? fc_reshape(ctx, w, wd, 4) : NULL;
    fc_tensor *gy = fc_reshape(ctx, gout, yd, 4);
    if (!x || !w || !gy) return fc__failed(ctx);
    if (ix->needs)
        gin[CONV_IN_X] =
            fc_reshape(ctx, transposed ? cprod(ctx, g, CP_F, gy, w) : cprod(ctx, g, CP_D, gy, w),
                       ix->shape, ix->rank);
    if (iw->needs)
        gin[CONV_IN_WEIGHT] =
            fc_reshape(ctx, transposed ? cprod(ctx, g, CP_W, gy, x) : cprod(ctx, g, CP_W, x, gy),
                       iw->shape, iw->rank);
    if (node->in[CONV_IN_BIAS].needs)
        gin[CONV_IN_BIAS] = fc_sum(ctx, gy, (int[]){0, 2, 3}, 3, false);
    return fc_ctx_status(ctx);
}

/* dx = conv^T(dy, w), dw = wgrad(x, dy), db = channel sums of dy; the
 * geometry from the node's shapes (conv1d's rank-3 ones read as 4-D). */
static fc_status conv_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    const fc__ag_input *ix = &node->in[CONV_IN_X], *iw = &node->in[CONV_IN_WEIGHT];
    int64_t xd[4], wd[4], yd[4];
    dims4(ix->shape, ix->rank, xd);
    dims4(iw->shape, iw->rank, wd);
    dims4(node->out_shape, node->out_rank, yd);
    conv_args a = node_args(node);
    fc__conv_geom g = geom(xd, yd, wd, &a);
    if (fc__ag_create_graph(ctx)) return conv_graph(ctx, node, gout, gin, &g, false);
    const char *op = node->op;
    if (ix->needs) {
        fc_tensor *w = fc__ag_saved_tensor(ctx, node, CONV_SAVED_WEIGHT);
        fc_tensor *gx = w ? fc__conv_dgrad(ctx, op, &g, gout, w, NULL) : NULL;
        if (!(gin[CONV_IN_X] = as_shape(ctx, op, gx, ix->shape, ix->rank))) return fc__failed(ctx);
    }
    if (iw->needs) {
        fc_tensor *x = fc__ag_saved_tensor(ctx, node, CONV_SAVED_X);
        fc_tensor *gw = x ? fc__conv_wgrad(ctx, op, &g, x, gout) : NULL;
        if (!(gin[CONV_IN_WEIGHT] = as_shape(ctx, op, gw, iw->shape, iw->rank)))
            return fc__failed(ctx);
    }
    if (node->in[CONV_IN_BIAS].needs) {
        gin[CONV_IN_BIAS] = fc__conv_channel_sum(ctx, op, gout, g.n, g.cy, g.hy * g.wy);
        if (!gin[CONV_IN_BIAS]) return fc__failed(ctx);
    }
    return FC_OK;
}

fc_tensor *fc_conv2d(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, fc_tensor *bias,
                     const fc_conv2d_opts *opts) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "conv2d", x);
    FC__CHECK_INPUT(ctx, "conv2d", weight);
    fc_conv2d_opts o = opts ? *opts : fc_conv2d_opts_default();
    conv_args a = {
        .stride = {or_one(o.stride[0]), or_one(o.stride[1])},
        .pad = {o.padding[0], o.padding[1]},
        .dil = {or_one(o.dilation[0]), or_one(o.dilation[1])},
        .groups = or_one(o.groups),
        .same = o.padding_same,
    };
    return conv_impl(ctx, "conv2d", 4, x, weight, bias, a);
}

fc_tensor *fc_conv1d(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, fc_tensor *bias,
                     const fc_conv1d_opts *opts) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "conv1d", x);
    FC__CHECK_INPUT(ctx, "conv1d", weight);
    fc_conv1d_opts o = opts ? *opts : fc_conv1d_opts_default();
    conv_args a = {
        .stride = {1, or_one(o.stride)},
        .pad = {0, o.padding},
        .dil = {1, or_one(o.dilation)},
        .groups = or_one(o.groups),
        .same = o.padding_same,
    };
    return conv_impl(ctx, "conv1d", 3, x, weight, bias, a);
}

/* ---- fc_conv_transpose2d ------------------------------------------------------------------------
 */

static fc_status conv_transpose_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout,
                                         fc_tensor **gin);

fc_tensor *fc_conv_transpose2d(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, fc_tensor *bias,
                               const fc_conv_transpose2d_opts *opts) {
    const char *op = "conv_transpose2d";
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, op, x);
    FC__CHECK_INPUT(ctx, op, weight);
    fc_conv_transpose2d_opts o = opts ? *opts : fc_conv_transpose2d_opts_default();
    conv_args a = {
        .stride = {or_one(o.stride[0]), or_one(o.stride[1])},
        .pad = {o.padding[0], o.padding[1]},
        .outpad = {o.output_padding[0], o.output_padding[1]},
        .dil = {or_one(o.dilation[0]), or_one(o.dilation[1])},
        .groups = or_one(o.groups),
    };
    int64_t cout, xd[4], wd[4], od[4];
    if (!check_tensors(ctx, op, 4, x, weight, bias) || !check_args(ctx, op, &a, 0, true) ||
        !check_channels(ctx, op, true, x, weight, bias, a.groups, &cout))
        return NULL;
    dims4(x->raw.shape, 4, xd);
    dims4(weight->raw.shape, 4, wd);
    od[0] = xd[0], od[1] = cout;
    for (int i = 0; i < 2; i++)
        if (!out_size(ctx, op, x, &a, i, false, xd[2 + i], wd[2 + i], true, &od[2 + i]))
            return NULL;
    if (!out_fits(ctx, op, x, od)) return NULL;
    /* the convolution this one is the adjoint of: image side = our output */
    fc__conv_geom g = geom(od, xd, wd, &a);
    fc_tensor *y = fc__conv_dgrad(ctx, op, &g, x, weight, bias);
    y = finish_output(ctx, op, y, x->raw.dtype, 4);
    fc_tensor *in[CONV_N_IN] = {[CONV_IN_X] = x, [CONV_IN_WEIGHT] = weight, [CONV_IN_BIAS] = bias};
    if (y && fc__ag_wants(ctx, CONV_N_IN, in))
        y = record(ctx, op, conv_transpose_backward, y, in, &a);
    if (y) note_flops(ctx, x, weight);
    return y ? fc__finish(ctx, op, y) : NULL;
}

/* With the adjoint convolution's geometry (image side = the output):
 * dx = conv(dy, w), dw = wgrad(dy, x), db = channel sums of dy. */
static fc_status conv_transpose_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout,
                                         fc_tensor **gin) {
    int64_t xd[4], wd[4], od[4];
    dims4(node->in[CONV_IN_X].shape, 4, xd);
    dims4(node->in[CONV_IN_WEIGHT].shape, 4, wd);
    dims4(node->out_shape, 4, od);
    conv_args a = node_args(node);
    fc__conv_geom g = geom(od, xd, wd, &a);
    if (fc__ag_create_graph(ctx)) return conv_graph(ctx, node, gout, gin, &g, true);
    const char *op = node->op;
    if (node->in[CONV_IN_X].needs) {
        fc_tensor *w = fc__ag_saved_tensor(ctx, node, CONV_SAVED_WEIGHT);
        if (!(gin[CONV_IN_X] = w ? fc__conv_forward(ctx, op, &g, gout, w, NULL) : NULL))
            return fc__failed(ctx);
    }
    if (node->in[CONV_IN_WEIGHT].needs) {
        fc_tensor *x = fc__ag_saved_tensor(ctx, node, CONV_SAVED_X);
        if (!(gin[CONV_IN_WEIGHT] = x ? fc__conv_wgrad(ctx, op, &g, gout, x) : NULL))
            return fc__failed(ctx);
    }
    if (node->in[CONV_IN_BIAS].needs) {
        gin[CONV_IN_BIAS] = fc__conv_channel_sum(ctx, op, gout, g.n, g.cx, g.hx * g.wx);
        if (!gin[CONV_IN_BIAS]) return fc__failed(ctx);
    }
    return FC_OK;
}
