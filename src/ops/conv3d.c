/* SPDX-License-Identifier: MIT */
/* ops/conv3d.c - fc_conv3d as a composite of recorded ops: every argument
 * is checked here (the messages name conv3d), then the volume convolution
 * becomes 2-D convolutions over the depth taps r < kD:
 *
 *   y[:, :, t] = bias + sum over r of conv2d(x[:, :, t*sD - pD + r*dD], w[:, :, r])
 *
 * Two ways to form that sum, the same numbers:
 *   - fused (the usual case): x padded along depth, the kD strided depth
 *     slices stacked next to the input channels (a "vol2col" along depth
 *     only) as [N * OD, groups * kD * Cin/groups, H, W], the weight seen as
 *     [Cout, kD * Cin/groups, kH, kW], and ONE conv2d does the whole
 *     reduction (oneDNN or im2col + the matmul provider). It costs a copy
 *     of x kD times over, and is taken while the depth padding is at most
 *     the dilated kernel's reach d*(k-1), that reach at most twice the
 *     depth (so the padded copy stays small) and kD at most FUSED_MAX_TAPS;
 *   - per tap (any padding, however large): for tap r the output depths
 *     whose input depth lies inside x form one run [lo, hi], read by one
 *     strided slice; the slices of all N images go into one conv2d as a
 *     batch of N * (hi - lo + 1) images, the product is padded with zeros
 *     along the output depth and the taps are added. The depth padding is
 *     never materialised.
 *
 * Gradients come from the pieces' rules (slice, pad, stack, reshape,
 * permute, conv2d, add), every one of them differentiable again under
 * create_graph, so conv3d reaches any order with no rule of its own. The
 * pieces run in a scope of their own, so a failure (out of memory) leaves
 * nothing behind, and the result goes back into the caller's scope. */
#include <stdbool.h>
#include <stdint.h>

#include "core/shape.h"
#include "exec/ctx.h"
#include "exec/tensor.h"
#include "fucina.h"

#define OP "conv3d"
#define FUSED_MAX_TAPS 16 /* the fused path's slice handles sit on the stack */

static const char *const axis_name[3] = {"depth", "height", "width"};

typedef struct c3_args {
    int64_t stride[3], pad[3], dil[3], groups;
    bool same;
} c3_args;

static int64_t or_one(int64_t v) { return v == 0 ? 1 : v; }

/* dtypes and ranks of x, weight and bias (NULL allowed) */
static bool check_tensors(fc_ctx *ctx, const fc_tensor *x, const fc_tensor *w, const fc_tensor *b) {
    char d[160];
    fc_dtype dt = x->raw.dtype;
    if (!fc_dtype_is_float(dt)) {
        fc__fail(ctx, FC_ERR_DTYPE, OP ": x %s must be f16, bf16, f32 or f64; cast with fc_to",
                 fc__desc(x, d, (int)sizeof d));
        return false;
    }
    if (w->raw.dtype != dt || (b && b->raw.dtype != dt)) {
        const fc_tensor *o = w->raw.dtype != dt ? w : b;
        fc__fail(ctx, FC_ERR_DTYPE, OP ": %s dtype %s differs from x's %s; cast with fc_to",
                 o == w ? "weight" : "bias", fc_dtype_name(o->raw.dtype), fc_dtype_name(dt));
        return false;
    }
    if (x->raw.rank != 5 || w->raw.rank != 5) {
        const fc_tensor *t = x->raw.rank != 5 ? x : w;
        fc__fail(ctx, FC_ERR_RANK, OP ": %s %s must be 5-D (%s)", t == x ? "x" : "weight",
                 fc__desc(t, d, (int)sizeof d),
                 t == x ? "[N, C, D, H, W]" : "[Cout, Cin/groups, kD, kH, kW]");
        return false;
    }
    if (b && b->raw.rank != 1) {
        fc__fail(ctx, FC_ERR_RANK, OP ": bias %s must be 1-D [Cout]",
                 fc__desc(b, d, (int)sizeof d));
        return false;
    }
    return true;
}

static bool check_args(fc_ctx *ctx, const c3_args *a) {
    if (a->groups < 1) {
        fc__fail(ctx, FC_ERR_INVALID_ARG, OP ": groups %lld must be >= 1", (long long)a->groups);
        return false;
    }
    for (int i = 0; i < 3; i++) {
        if (a->stride[i] < 1 || a->dil[i] < 1) {
            bool s = a->stride[i] < 1;
            fc__fail(ctx, FC_ERR_INVALID_ARG, OP ": %s %s %lld must be >= 1", axis_name[i],
                     s ? "stride" : "dilation", (long long)(s ? a->stride[i] : a->dil[i]));
            return false;
        }
        if (!a->same && a->pad[i] < 0) {
            fc__fail(ctx, FC_ERR_INVALID_ARG, OP ": %s padding %lld must be >= 0", axis_name[i],
                     (long long)a->pad[i]);
            return false;
        }
        if (a->same && a->stride[i] != 1) {
            fc__fail(ctx, FC_ERR_INVALID_ARG,
                     OP ": padding_same needs stride 1, got %s stride %lld (as PyTorch)",
                     axis_name[i], (long long)a->stride[i]);
            return false;
        }
    }
    return true;
}

/* Cin = w1 * groups and Cout = w0 divisible by groups; bias [Cout]. */
static bool check_channels(fc_ctx *ctx, const fc_tensor *x, const fc_tensor *w, const fc_tensor *b,
                           int64_t groups) {
    char xs[160], ws[160];
    int64_t cx = x->raw.shape[1], w0 = w->raw.shape[0], w1 = w->raw.shape[1];
    if (cx % groups != 0 || w0 % groups != 0) {
        bool in = cx % groups != 0;
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                 OP ": %s channels %lld of x %s / weight %s are not divisible by groups %lld",
                 in ? "input" : "output", (long long)(in ? cx : w0),
                 fc__desc(x, xs, (int)sizeof xs), fc__desc(w, ws, (int)sizeof ws),
                 (long long)groups);
        return false;
    }
    if (cx / groups != w1) { /* groups divides cx: no product that could wrap */
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                 OP ": x %s has %lld channels, weight %s expects %lld per group (groups %lld)",
                 fc__desc(x, xs, (int)sizeof xs), (long long)cx, fc__desc(w, ws, (int)sizeof ws),
                 (long long)w1, (long long)groups);
        return false;
    }
    if (b && b->raw.shape[0] != w0) {
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH, OP ": bias %s must be [%lld] (Cout) for weight %s",
                 fc__desc(b, xs, (int)sizeof xs), (long long)w0, fc__desc(w, ws, (int)sizeof ws));
        return false;
    }
    return true;
}

/* Output size of axis i (input n, kernel k), every size on the way checked
 * (core/shape.h): the dilated extent d*(k-1)+1 and the padded input n+2p
 * (padding_same: n+d*(k-1), its before-half written into a->pad). */
static bool out_size(fc_ctx *ctx, const fc_tensor *x, c3_args *a, int i, int64_t n, int64_t k,
                     int64_t *out) {
    char xs[160];
    const char *what = "the dilated kernel extent dilation*(kernel-1)+1";
    int64_t ext = 0, padded = 0, twice = 0, o = 0;
    bool ok = fc__i64_mul(a->dil[i], k - 1, &ext) && fc__i64_add(ext, 1, &ext);
    if (ok && a->same) {
        a->pad[i] = (ext - 1) / 2;
        what = "the padded input size input+dilation*(kernel-1)";
        ok = fc__i64_add(n, ext - 1, &padded);
        o = n;
    } else if (ok) {
        what = "the padded input size input+2*padding";
        ok = fc__i64_mul(a->pad[i], 2, &twice) && fc__i64_add(n, twice, &padded);
        o = padded < ext ? 0 : (padded - ext) / a->stride[i] + 1;
    }
    if (!ok) {
        fc__fail(ctx, FC_ERR_OVERFLOW,
                 OP ": %s along the %s axis of x %s overflows int64 (input %lld, kernel %lld, "
                    "stride %lld, padding %lld, dilation %lld)",
                 what, axis_name[i], fc__desc(x, xs, (int)sizeof xs), (long long)n, (long long)k,
                 (long long)a->stride[i], (long long)a->pad[i], (long long)a->dil[i]);
        return false;
    }
    if (o < 1) {
        fc__fail(ctx, FC_ERR_INVALID_SHAPE,
                 OP ": output size %lld below 1 along the %s axis of x %s (input %lld, kernel "
                    "%lld, dilation %lld, padding %lld, stride %lld)",
                 (long long)o, axis_name[i], fc__desc(x, xs, (int)sizeof xs), (long long)n,
                 (long long)k, (long long)a->dil[i], (long long)a->pad[i], (long long)a->stride[i]);
        return false;
    }
    *out = o;
    return true;
}

/* The run [lo, hi] of output depths t whose input depth t*s + off (off =
 * r*dD - pD for tap r) lies in [0, D): false when there is none. Every
 * value stays within the checked sizes: |off| is at most the extent or
 * the padding, and D - 1 - off at most D + pD. */
static bool depth_run(int64_t d, int64_t od, int64_t s, int64_t off, int64_t *lo, int64_t *hi) {
    int64_t l = off >= 0 ? 0 : (-off + s - 1) / s;
    if (d - 1 - off < 0) return false;
    int64_t h = (d - 1 - off) / s;
    if (h > od - 1) h = od - 1;
    if (l > h) return false;
    *lo = l, *hi = h;
    return true;
}

/* The fused path (see the top of the file), in the caller's fresh scope. */
static fc_tensor *compose_fused(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *b,
                                const c3_args *a, const fc_conv2d_opts *o2, const int64_t yd[5]) {
    const int64_t *xs = x->raw.shape;
    int64_t n = yd[0], cout = yd[1], od = yd[2], g = a->groups, cg = xs[1] / g;
    int64_t kd = w->raw.shape[2], sd = a->stride[0];
    /* padding_same puts the odd zero after */
    int64_t after = a->same ? a->dil[0] * (kd - 1) - a->pad[0] : a->pad[0];
    fc_tensor *xp = x;
    if (a->pad[0] > 0 || after > 0) {
        int64_t pads[10] = {0, 0, 0, 0, a->pad[0], after, 0, 0, 0, 0};
        if (!(xp = fc_pad(ctx, x, pads, 0.0))) return NULL;
    }
    fc_tensor *taps[FUSED_MAX_TAPS];
    for (int64_t r = 0; r < kd; r++) {
        int64_t start = r * a->dil[0];
        if (!(taps[r] = fc_slice(ctx, xp, 2, start, start + (od - 1) * sd + 1, sd))) return NULL;
    }
    /* [N, Cin, kD, OD, H, W] -> [N, OD, groups, kD, Cin/groups, H, W] */
    fc_tensor *st = fc_stack(ctx, taps, (int)kd, 2);
    fc_tensor *v =
        st ? fc_reshape(ctx, st, (const int64_t[]){n, g, cg, kd, od, xs[3], xs[4]}, 7) : NULL;
    fc_tensor *pv = v ? fc_permute(ctx, v, (const int[]){0, 4, 1, 3, 2, 5, 6}) : NULL;
    fc_tensor *x4 =
        pv ? fc_reshape(ctx, pv, (const int64_t[]){n * od, g * kd * cg, xs[3], xs[4]}, 4) : NULL;
    /* weight [Cout, Cin/groups, kD, kH, kW] -> [Cout, kD * Cin/groups, kH, kW] */
    const int64_t *ws = w->raw.shape;
    fc_tensor *wp = fc_permute(ctx, w, (const int[]){0, 2, 1, 3, 4});
    fc_tensor *w4 =
        wp ? fc_reshape(ctx, wp, (const int64_t[]){cout, kd * cg, ws[3], ws[4]}, 4) : NULL;
    fc_tensor *y4 = x4 && w4 ? fc_conv2d(ctx, x4, w4, b, o2) : NULL;
    fc_tensor *y5 =
        y4 ? fc_reshape(ctx, y4, (const int64_t[]){n, od, cout, yd[3], yd[4]}, 5) : NULL;
    fc_tensor *y = y5 ? fc_permute(ctx, y5, (const int[]){0, 2, 1, 3, 4}) : NULL;
    return y ? fc_contiguous(ctx, y) : NULL;
}

/* The per-tap path, in the caller's fresh scope: y as [N, Cout, OD, OH,
 * OW] (contiguous, compute dtype), or NULL with the error recorded. */
static fc_tensor *compose(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *b, const c3_args *a,
                          const fc_conv2d_opts *o2, const int64_t yd[5]) {
    int64_t n = yd[0], cout = yd[1], od = yd[2], oh = yd[3], ow = yd[4];
    int64_t depth = x->raw.shape[2], kd = w->raw.shape[2];
    const int64_t acc_shape[5] = {n, od, cout, oh, ow};
    fc_tensor *acc = NULL;
    for (int64_t r = 0; r < kd; r++) {
        int64_t lo, hi, off = r * a->dil[0] - a->pad[0];
        if (!depth_run(depth, od, a->stride[0], off, &lo, &hi)) continue;
        int64_t cnt = hi - lo + 1, start = lo * a->stride[0] + off;
        /* x's depths start, start + s, ... (cnt of them): [N, Cin, cnt, H, W] */
        fc_tensor *xs =
            fc_slice(ctx, x, 2, start, start + (cnt - 1) * a->stride[0] + 1, a->stride[0]);
        fc_tensor *xb = fc_permute(ctx, xs, (const int[]){0, 2, 1, 3, 4});
        const int64_t *xsh = xb ? xb->raw.shape : NULL;
        fc_tensor *x4 =
            xb ? fc_reshape(ctx, xb, (const int64_t[]){n * cnt, xsh[2], xsh[3], xsh[4]}, 4) : NULL;
        fc_tensor *w4 = fc_squeeze(ctx, fc_narrow(ctx, w, 2, r, 1), 2);
        fc_tensor *y4 = x4 && w4 ? fc_conv2d(ctx, x4, w4, NULL, o2) : NULL;
        fc_tensor *y5 = y4 ? fc_reshape(ctx, y4, (const int64_t[]){n, cnt, cout, oh, ow}, 5) : NULL;
        if (y5 && cnt < od) {
            int64_t pads[10] = {0, 0, lo, od - 1 - hi, 0, 0, 0, 0, 0, 0};
            y5 = fc_pad(ctx, y5, pads, 0.0);
        }
        if (!y5) return NULL;
        acc = acc ? fc_add(ctx, acc, y5) : y5;
        if (!acc) return NULL;
    }
    /* every tap reads only padding (a dilation larger than the volume): the
     * output is the bias alone */
    if (!acc && !(acc = fc_zeros(ctx, x->raw.dtype, acc_shape, 5))) return NULL;
    if (b) {
        fc_tensor *b3 = fc_reshape(ctx, b, (const int64_t[]){cout, 1, 1}, 3);
        if (!b3 || !(acc = fc_add(ctx, acc, b3))) return NULL;
    }
    fc_tensor *y = fc_permute(ctx, acc, (const int[]){0, 2, 1, 3, 4});
    return y ? fc_contiguous(ctx, y) : NULL;
}

fc_tensor *fc_conv3d(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, fc_tensor *bias,
                     const fc_conv3d_opts *opts) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, OP, x);
    FC__CHECK_INPUT(ctx, OP, weight);
    if (bias && bias->ctx != ctx) {
        fc__fail(ctx, FC_ERR_CONTEXT, OP ": input 'bias' belongs to another context");
        return NULL;
    }
    fc_conv3d_opts o = opts ? *opts : fc_conv3d_opts_default();
    c3_args a = {.groups = or_one(o.groups), .same = o.padding_same};
    for (int i = 0; i < 3; i++) {
        a.stride[i] = or_one(o.stride[i]);
        a.pad[i] = o.padding[i];
        a.dil[i] = or_one(o.dilation[i]);
    }
    if (!check_tensors(ctx, x, weight, bias) || !check_args(ctx, &a) ||
        !check_channels(ctx, x, weight, bias, a.groups))
        return NULL;
    int64_t yd[5] = {x->raw.shape[0], weight->raw.shape[0]};
    for (int i = 0; i < 3; i++)
        if (!out_size(ctx, x, &a, i, x->raw.shape[2 + i], weight->raw.shape[2 + i], &yd[2 + i]))
            return NULL;
    if (fc__shape_numel(yd, 5, NULL) != FC_OK) {
        char xs[160], ds[96];
        fc__fail(ctx, FC_ERR_OVERFLOW,
                 OP ": the output %s of x %s has more elements than a tensor can hold",
                 FC__SHAPE_STR(yd, 5, ds), fc__desc(x, xs, (int)sizeof xs));
        return NULL;
    }
    fc_dtype dt = x->raw.dtype;
    bool half = dt == FC_F16 || dt == FC_BF16;
    fc_scope_begin(ctx);
    fc_tensor *xc = half ? fc_to(ctx, x, FC_F32) : x;
    fc_tensor *wc = half ? fc_to(ctx, weight, FC_F32) : weight;
    fc_tensor *bc = half && bias ? fc_to(ctx, bias, FC_F32) : bias;
    /* the fused path pads x along depth: only while that stays small */
    int64_t reach = a.dil[0] * (weight->raw.shape[2] - 1); /* checked in out_size */
    bool fused =
        weight->raw.shape[2] <= FUSED_MAX_TAPS && a.pad[0] <= reach && reach <= 2 * x->raw.shape[2];
    fc_conv2d_opts o2 = {
        .stride = {a.stride[1], a.stride[2]},
        .padding = {a.pad[1], a.pad[2]},
        .dilation = {a.dil[1], a.dil[2]},
        .groups = a.groups,
        .padding_same = a.same,
    };
    fc_tensor *y = !xc || !wc || (bias && !bc) ? NULL
                   : fused                     ? compose_fused(ctx, xc, wc, bc, &a, &o2, yd)
                                               : compose(ctx, xc, wc, bc, &a, &o2, yd);
    if (y && half) y = fc_to(ctx, y, dt);
    fc_keep(y);
    fc_scope_end(ctx);
    if (y && !fc__scope_register(ctx, y)) {
        fc_release(y);
        fc__fail(ctx, FC_ERR_OOM, OP ": out of memory recording the result in its scope");
        return NULL;
    }
    return y;
}
