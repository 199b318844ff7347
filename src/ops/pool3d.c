/* SPDX-License-Identifier: MIT */
/* ops/pool3d.c - fc_max_pool3d and fc_avg_pool3d as two recorded 2-d
 * poolings each (fucina/pool.h). A box window is separable: the max (or
 * sum) over [d0, d1) x [h0, h1) x [w0, w1) is the max (sum) over d of the
 * max (sum) over the (h, w) rectangle of each plane d, and padding,
 * dilation, stride and ceil_mode act on each axis alone. So
 *
 *   stage 1: x as [P * D, H, W]        pooled by the (H, W) window -> [P * D, OH, OW]
 *   stage 2: that as [P, D, OH * OW]   pooled by a {kD, 1} window  -> [P, OD, OH * OW]
 *
 * (P the planes N * C). Max: both stages take the first maximum of their
 * window, so the element reached is the first maximum in (d, h, w) order,
 * PyTorch's argmax. Avg: the per-axis divisors multiply to PyTorch's
 * window count for either count_include_pad; a divisor_override sums in
 * stage 1 and divides in stage 2. Every argument is checked here first,
 * with the messages naming the 3-D op; the stages run in a scope of their
 * own and the result goes back into the caller's scope. */
#include <stdbool.h>
#include <stdint.h>

#include "core/shape.h"
#include "exec/ctx.h"
#include "exec/tensor.h"
#include "fucina.h"

#define POOL3_PARAM_MAX INT32_MAX /* fucina/pool.h: every argument below 2^31 */

/* PyTorch's pooling_output_shape for one axis; the arguments are below
 * 2^31 and in is an axis of a tensor, so only in + 2p can wrap (checked). */
static bool out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode,
                     int64_t *out) {
    int64_t num;
    if (!fc__i64_add(in, 2 * p + (ceil_mode ? s - 1 : 0), &num)) return false;
    num -= d * (k - 1) + 1;
    int64_t q = num >= 0 ? num / s : -((-num + s - 1) / s);
    int64_t o = q + 1;
    if (ceil_mode && (o - 1) * s >= in + p) o--;
    *out = o;
    return true;
}

#define V3(a) (long long)(a)[0], (long long)(a)[1], (long long)(a)[2]

/* Validates x and opts (defaults applied into k, s, p, dl) and computes
 * the output's spatial sizes out[3]. */
static bool check(fc_ctx *ctx, const char *op, bool avg, const fc_tensor *x,
                  const fc_pool3d_opts *o, int64_t k[3], int64_t s[3], int64_t p[3], int64_t dl[3],
                  int64_t out[3]) {
    char d[160];
    if (!o) {
        fc__fail(ctx, FC_ERR_NULL_ARG, "%s: opts is NULL (kernel is required)", op);
        return false;
    }
    if (x->raw.rank != 4 && x->raw.rank != 5) {
        fc__fail(ctx, FC_ERR_RANK,
                 "%s: input %s must be [N,C,D,H,W] or [C,D,H,W] (rank 5 or 4), not rank %d", op,
                 fc__desc(x, d, (int)sizeof d), x->raw.rank);
        return false;
    }
    if (!fc_dtype_is_float(x->raw.dtype)) {
        fc__fail(ctx, FC_ERR_DTYPE, "%s: dtype %s of %s is not a float dtype; cast with fc_to", op,
                 fc_dtype_name(x->raw.dtype), fc__desc(x, d, (int)sizeof d));
        return false;
    }
    for (int a = 0; a < 3; a++) {
        k[a] = o->kernel[a];
        s[a] = o->stride[a] == 0 ? k[a] : o->stride[a];
        p[a] = o->padding[a];
        dl[a] = o->dilation[a] == 0 ? 1 : o->dilation[a];
        if (k[a] < 1 || s[a] < 1 || dl[a] < 1 || p[a] < 0 || k[a] > POOL3_PARAM_MAX ||
            s[a] > POOL3_PARAM_MAX || dl[a] > POOL3_PARAM_MAX) {
            fc__fail(ctx, FC_ERR_INVALID_ARG,
                     "%s: kernel [%lld,%lld,%lld], stride [%lld,%lld,%lld] and dilation "
                     "[%lld,%lld,%lld] must be in [1, 2^31 - 1] and padding [%lld,%lld,%lld] >= 0",
                     op, V3(o->kernel), V3(o->stride), V3(o->dilation), V3(o->padding));
            return false;
        }
        if (p[a] > k[a] / 2) {
            fc__fail(ctx, FC_ERR_INVALID_ARG,
                     "%s: padding [%lld,%lld,%lld] must be at most half the kernel "
                     "[%lld,%lld,%lld]",
                     op, V3(o->padding), V3(o->kernel));
            return false;
        }
        if (avg && dl[a] != 1) {
            fc__fail(ctx, FC_ERR_INVALID_ARG,
                     "%s: average pooling has no dilation; got [%lld,%lld,%lld] (use 0 or 1)", op,
                     V3(o->dilation));
            return false;
        }
    }
    if (avg && o->divisor_override < 0) {
        fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: divisor_override %lld must be >= 0 (0: none)", op,
                 (long long)o->divisor_override);
        return false;
    }
    int r = x->raw.rank;
    for (int a = 0; a < 3; a++) {
        if (!out_size(x->raw.shape[r - 3 + a], k[a], s[a], p[a], dl[a], o->ceil_mode, &out[a])) {
            fc__fail(ctx, FC_ERR_OVERFLOW, "%s: the padded size of axis %d of %s overflows int64",
                     op, r - 3 + a, fc__desc(x, d, (int)sizeof d));
            return false;
        }
    }
    if (out[0] < 1 || out[1] < 1 || out[2] < 1) {
        fc__fail(ctx, FC_ERR_INVALID_SHAPE,
                 "%s: input %s with kernel [%lld,%lld,%lld], stride [%lld,%lld,%lld], padding "
                 "[%lld,%lld,%lld], dilation [%lld,%lld,%lld] gives output size "
                 "[%lld,%lld,%lld]; the output is too small (the kernel is larger than the "
                 "padded input)",
                 op, fc__desc(x, d, (int)sizeof d), V3(k), V3(s), V3(p), V3(dl), V3(out));
        return false;
    }
    int64_t od[5];
    for (int i = 0; i < r - 3; i++)
        od[i] = x->raw.shape[i];
    for (int a = 0; a < 3; a++)
        od[r - 3 + a] = out[a];
    if (fc__shape_numel(od, r, NULL) != FC_OK) {
        char ds[96];
        fc__fail(ctx, FC_ERR_OVERFLOW,
                 "%s: the output %s of %s has more elements than a tensor can hold", op,
                 FC__SHAPE_STR(od, r, ds), fc__desc(x, d, (int)sizeof d));
        return false;
    }
    return true;
}

typedef fc_tensor *(*pool2d_fn)(fc_ctx *ctx, fc_tensor *x, const fc_pool2d_opts *opts);

/* The two stages, in the caller's fresh scope. */
static fc_tensor *stages(fc_ctx *ctx, pool2d_fn pool, fc_tensor *x, const fc_pool3d_opts *o,
                         const int64_t k[3], const int64_t s[3], const int64_t p[3],
                         const int64_t dl[3], const int64_t out[3]) {
    int r = x->raw.rank;
    const int64_t *sh = x->raw.shape;
    int64_t planes = 1;
    for (int i = 0; i < r - 3; i++)
        planes *= sh[i];
    int64_t depth = sh[r - 3];
    bool sum_first = o->divisor_override > 0;
    fc_pool2d_opts hw = {
        .kernel = {k[1], k[2]},
        .stride = {s[1], s[2]},
        .padding = {p[1], p[2]},
        .dilation = {dl[1], dl[2]},
        .ceil_mode = o->ceil_mode,
        .exclude_pad = o->exclude_pad,
        .divisor_override = sum_first ? 1 : 0,
    };
    fc_pool2d_opts dd = {
        .kernel = {k[0], 1},
        .stride = {s[0], 1},
        .padding = {p[0], 0},
        .dilation = {dl[0], 1},
        .ceil_mode = o->ceil_mode,
        .exclude_pad = o->exclude_pad,
        .divisor_override = o->divisor_override,
    };
    fc_tensor *x3 = fc_reshape(ctx, x, (const int64_t[]){planes * depth, sh[r - 2], sh[r - 1]}, 3);
    fc_tensor *y1 = x3 ? pool(ctx, x3, &hw) : NULL;
    fc_tensor *y1v =
        y1 ? fc_reshape(ctx, y1, (const int64_t[]){planes, depth, out[1] * out[2]}, 3) : NULL;
    fc_tensor *y2 = y1v ? pool(ctx, y1v, &dd) : NULL;
    int64_t os[5];
    for (int i = 0; i < r - 3; i++)
        os[i] = sh[i];
    for (int a = 0; a < 3; a++)
        os[r - 3 + a] = out[a];
    return y2 ? fc_reshape(ctx, y2, os, r) : NULL;
}

static fc_tensor *pool3d(fc_ctx *ctx, const char *op, bool avg, fc_tensor *x,
                         const fc_pool3d_opts *o) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, op, x);
    int64_t k[3], s[3], p[3], dl[3], out[3];
    if (!check(ctx, op, avg, x, o, k, s, p, dl, out)) return NULL;
    fc_dtype dt = x->raw.dtype;
    /* two roundings of a half-precision mean would be one too many */
    bool widen = avg && (dt == FC_F16 || dt == FC_BF16);
    fc_scope_begin(ctx);
    fc_tensor *xc = widen ? fc_to(ctx, x, FC_F32) : x;
    fc_tensor *y =
        xc ? stages(ctx, avg ? fc_avg_pool2d : fc_max_pool2d, xc, o, k, s, p, dl, out) : NULL;
    if (y && widen) y = fc_to(ctx, y, dt);
    fc_keep(y);
    fc_scope_end(ctx);
    if (y && !fc__scope_register(ctx, y)) {
        fc_release(y);
        fc__fail(ctx, FC_ERR_OOM, "%s: out of memory recording the result in its scope", op);
        return NULL;
    }
    return y;
}

fc_tensor *fc_max_pool3d(fc_ctx *ctx, fc_tensor *x, const fc_pool3d_opts *opts) {
    return pool3d(ctx, "max_pool3d", false, x, opts);
}

fc_tensor *fc_avg_pool3d(fc_ctx *ctx, fc_tensor *x, const fc_pool3d_opts *opts) {
    return pool3d(ctx, "avg_pool3d", true, x, opts);
}
