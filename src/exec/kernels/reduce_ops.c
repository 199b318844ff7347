/* reduce_ops.c - the public reductions of fucina/ops.h on top of the engine
 * in reduce.c: axes and dtype checks, the output dtype policy, and the
 * autograd records (the rules are in src/ag/grad_reduce.c, same order).
 *
 * Output dtypes: sum/prod/max/min give f32 for f16, bf16 and f32, f64 for
 * f64 and i64 for integers and bool; mean/var/std/logsumexp take floats
 * only and give f32 or f64; argmax/argmin give i64; all/any give bool. */
#include "fucina.h"
#include "ag/tape.h"
#include "exec/kernels/reduce.h"
#include "fucina/ops.h"

/* Backward rules (src/ag/grad_reduce.c). */
fc_status fc__grad_sum(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_mean(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_prod(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_extremum(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_var(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);
fc_status fc__grad_logsumexp(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

/* ---- axes and gradient views ---------------------------------------------------------------- */

fc_status fc__red_axes(fc_ctx *ctx, const char *op, const fc_tensor *x, const int *axes, int naxes,
                       bool keepdim, bool *mask, int64_t *oshape, int *orank, int64_t *count) {
    int rank = x->raw.rank;
    char d[160];
    if (naxes < 0) return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: naxes %d is negative", op, naxes);
    if (naxes > rank)
        return fc__fail(ctx, FC_ERR_RANK, "%s: %d axes given for %s of rank %d", op, naxes,
                        fc__desc(x, d, (int)sizeof d), rank);
    if (naxes > 0 && !axes)
        return fc__fail(ctx, FC_ERR_NULL_ARG, "%s: axes is NULL with naxes %d", op, naxes);
    for (int i = 0; i < rank; i++)
        mask[i] = naxes == 0;
    for (int k = 0; k < naxes; k++) {
        int a;
        if (fc__shape_norm_axis(axes[k], rank, &a) != FC_OK)
            return fc__fail(ctx, FC_ERR_AXIS, "%s: axis %d is out of range for %s", op, axes[k],
                            fc__desc(x, d, (int)sizeof d));
        if (mask[a])
            return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: axis %d is repeated in the axes of %s",
                            op, axes[k], fc__desc(x, d, (int)sizeof d));
        mask[a] = true;
    }
    int r = 0;
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (mask[i]) n *= x->raw.shape[i];
        if (!mask[i] || keepdim) oshape[r++] = mask[i] ? 1 : x->raw.shape[i];
    }
    if (r == 0) oshape[r++] = 1;
    *orank = r;
    if (count) *count = n;
    return FC_OK;
}

fc_tensor *fc__red_expand(fc_ctx *ctx, const char *op, fc_tensor *g, const int64_t *xshape,
                          int xrank, const bool *mask) {
    int64_t st[FC_MAX_RANK], acc = 1;
    for (int i = xrank - 1; i >= 0; i--) {
        if (mask[i] || xshape[i] == 1) {
            st[i] = 0;
        } else {
            st[i] = acc;
            acc *= xshape[i];
        }
    }
    return fc__tensor_view(ctx, op, g, xshape, st, xrank, g->raw.offset);
}

/* ---- the public reductions ------------------------------------------------------------------ */

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

/* What a recorded node keeps: node->i[0] the reduced-axes bit mask,
 * i[1] the element count per output, i[2] take_sqrt, i[3] the engine op,
 * f[0] the correction. */
typedef struct red_spec {
    const char *name;
    fc__red_op op;
    dclass dc;
    bool mean;
    fc__red_params prm;
    fc__backward_fn backward; /* NULL: not differentiable */
    bool save_input, save_output;
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
        nd->i[0] = bits;
        nd->i[1] = count;
        nd->i[2] = prm.take_sqrt;
        nd->i[3] = sp->op;
        nd->f[0] = prm.correction;
        if ((sp->save_input && fc__ag_save(ctx, nd, "input", x) != FC_OK) ||
            (sp->save_output && fc__ag_save(ctx, nd, "output", out) != FC_OK)) {
            fc_release(out);
            return NULL;
        }
    }
    return fc__finish(ctx, sp->name, out);
}

fc_tensor *fc_sum(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim) {
    static const red_spec sp = {
        .name = "sum", .op = FC__RED_SUM, .dc = D_NUMERIC, .backward = fc__grad_sum};
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}

fc_tensor *fc_mean(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim) {
    static const red_spec sp = {
        .name = "mean", .op = FC__RED_SUM, .dc = D_FLOAT, .mean = true, .backward = fc__grad_mean};
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}

fc_tensor *fc_prod(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim) {
    static const red_spec sp = {.name = "prod",
                                .op = FC__RED_PROD,
                                .dc = D_NUMERIC,
                                .backward = fc__grad_prod,
                                .save_input = true};
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}

fc_tensor *fc_max(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim) {
    static const red_spec sp = {.name = "max",
                                .op = FC__RED_MAX,
                                .dc = D_NUMERIC,
                                .backward = fc__grad_extremum,
                                .save_input = true};
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}

fc_tensor *fc_min(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim) {
    static const red_spec sp = {.name = "min",
                                .op = FC__RED_MIN,
                                .dc = D_NUMERIC,
                                .backward = fc__grad_extremum,
                                .save_input = true};
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}

fc_tensor *fc_argmax(fc_ctx *ctx, fc_tensor *x, int axis, bool keepdim) {
    static const red_spec sp = {.name = "argmax", .op = FC__RED_ARGMAX, .dc = D_NUMERIC};
    return reduce(ctx, &sp, x, &axis, 1, keepdim);
}

fc_tensor *fc_argmin(fc_ctx *ctx, fc_tensor *x, int axis, bool keepdim) {
    static const red_spec sp = {.name = "argmin", .op = FC__RED_ARGMIN, .dc = D_NUMERIC};
    return reduce(ctx, &sp, x, &axis, 1, keepdim);
}

fc_tensor *fc_var(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, int correction,
                  bool keepdim) {
    red_spec sp = {.name = "var",
                   .op = FC__RED_VAR,
                   .dc = D_FLOAT,
                   .backward = fc__grad_var,
                   .save_input = true};
    sp.prm.correction = correction;
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}

fc_tensor *fc_std(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, int correction,
                  bool keepdim) {
    red_spec sp = {.name = "std",
                   .op = FC__RED_VAR,
                   .dc = D_FLOAT,
                   .backward = fc__grad_var,
                   .save_input = true,
                   .save_output = true};
    sp.prm.correction = correction;
    sp.prm.take_sqrt = true;
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}

fc_tensor *fc_logsumexp(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim) {
    static const red_spec sp = {.name = "logsumexp",
                                .op = FC__RED_LSE,
                                .dc = D_FLOAT,
                                .backward = fc__grad_logsumexp,
                                .save_input = true,
                                .save_output = true};
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}

fc_tensor *fc_all(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim) {
    static const red_spec sp = {.name = "all", .op = FC__RED_ALL, .dc = D_TRUTH};
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}

fc_tensor *fc_any(fc_ctx *ctx, fc_tensor *x, const int *axes, int naxes, bool keepdim) {
    static const red_spec sp = {.name = "any", .op = FC__RED_ANY, .dc = D_TRUTH};
    return reduce(ctx, &sp, x, axes, naxes, keepdim);
}
