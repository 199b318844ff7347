/* gradcheck.c - analytic vs numeric gradients, in f64.
 *
 * Instead of the full Jacobian we check the gradient of L = sum(y * w) for
 * a fixed random w: backward_with(y, w) gives dL/dx analytically, and each
 * element's central difference (L(x+eps) - L(x-eps)) / 2eps gives it
 * numerically. A wrong rule changes dL/dx for almost every w, so one
 * projection catches it while costing two forward passes per element. */
#include <math.h>
#include <string.h>

#include "exec/kernels/copy.h"
#include "ag/tape.h"

/* L = sum(y * w) in f64 (y any layout/dtype) */
static fc_status project(fc_ctx *ctx, fc_tensor *y, const double *w, double *out) {
    int64_t n = fc__raw_numel(&y->raw);
    size_t es = fc_dtype_size(y->raw.dtype);
    unsigned char buf[4096];
    int64_t per = (int64_t)(sizeof buf / es);
    double acc = 0;
    for (int64_t s = 0; s < n; s += per) {
        int64_t c = n - s < per ? n - s : per;
        fc_status st = fc__raw_copy_range(&y->raw, buf, s, c);
        if (st != FC_OK) return fc__fail(ctx, st, "fc_gradcheck: cannot read the output");
        for (int64_t i = 0; i < c; i++) acc += fc__load_f64(y->raw.dtype, buf + (size_t)i * es) * w[s + i];
    }
    *out = acc;
    return FC_OK;
}

static fc_status eval(fc_ctx *ctx, fc_gradcheck_fn fn, void *user, fc_tensor *const *inputs,
                      int n, const double *w, int64_t wn, double *out) {
    fc_scope_begin(ctx);
    fc_tensor *y = fn(ctx, inputs, n, user);
    fc_status st;
    if (!y)
        st = fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx)
                                          : fc__fail(ctx, FC_ERR_STATE, "fc_gradcheck: fn returned NULL");
    else if (fc__raw_numel(&y->raw) != wn)
        st = fc__fail(ctx, FC_ERR_SHAPE_MISMATCH, "fc_gradcheck: fn's output changed size");
    else
        st = project(ctx, y, w, out);
    fc_scope_end(ctx);
    return st;
}

fc_status fc_gradcheck(fc_ctx *ctx, fc_gradcheck_fn fn, void *user, fc_tensor *const *inputs,
                       int n, const fc_gradcheck_opts *opts, fc_gradcheck_report *report) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!fn || !inputs || n < 1)
        return fc__fail(ctx, fn && inputs ? FC_ERR_INVALID_ARG : FC_ERR_NULL_ARG,
                        "fc_gradcheck: need fn and at least one input");
    fc_gradcheck_opts o = {0};
    if (opts) o = *opts;
    if (o.eps <= 0) o.eps = 1e-6;
    if (o.atol <= 0) o.atol = 1e-5;
    if (o.rtol <= 0) o.rtol = 1e-3;
    fc_gradcheck_report rep = {.passed = false, .worst_input = -1, .worst_index = -1,
                               .worst_excess = -INFINITY};
    for (int k = 0; k < n; k++) {
        fc_tensor *x = inputs[k];
        if (!x) return fc__fail(ctx, FC_ERR_NULL_ARG, "fc_gradcheck: input %d is NULL", k);
        if (o.check_all_f64 && x->raw.dtype == FC_F64 && !x->node) {
            fc_status st = fc_requires_grad(x, true);
            if (st != FC_OK) return st;
        }
        if ((x->flags & FC__T_REQUIRES_GRAD) &&
            (!fc__raw_is_contiguous(&x->raw) || x->node || fc__buffer_is_read_only(x->raw.buf)))
            return fc__fail(ctx, FC_ERR_INVALID_ARG,
                            "fc_gradcheck: input %d must be a contiguous, writable leaf", k);
    }
    fc_status st = FC_OK;
    fc_scope_begin(ctx);
    /* analytic pass */
    fc_tensor *y = fn(ctx, inputs, n, user);
    if (!y) {
        st = fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx)
                                          : fc__fail(ctx, FC_ERR_STATE, "fc_gradcheck: fn returned NULL");
        goto done;
    }
    int64_t wn = fc__raw_numel(&y->raw);
    fc_tensor *wt = fc_empty(ctx, FC_F64, y->raw.shape, y->raw.rank);
    if (!wt) {
        st = fc_ctx_status(ctx);
        goto done;
    }
    double *w = (double *)fc__raw_base(&wt->raw);
    for (int64_t i = 0; i < wn; i++) {
        uint32_t r[4];
        fc__philox(o.seed ^ 0x6772616463686bULL, (uint64_t)i, r);
        w[i] = ((double)r[0] / 4294967296.0) * 2.0 - 1.0;
    }
    fc_tensor *const *in = inputs;
    fc_zero_grad(in, n);
    fc_tensor *wg = y->raw.dtype == FC_F64 ? fc_retain(wt) : fc__copy_cast(ctx, "fc_gradcheck", wt, FC_F32);
    st = wg ? fc_backward_with(ctx, y, wg, false) : fc_ctx_status(ctx);
    fc_release(wg);
    if (st != FC_OK) goto done;
    fc_no_grad_begin(ctx);
    for (int k = 0; k < n && st == FC_OK; k++) {
        fc_tensor *x = inputs[k];
        if (!(x->flags & FC__T_REQUIRES_GRAD)) continue;
        fc_tensor *g = x->grad;
        int64_t xn = fc__raw_numel(&x->raw);
        char *xp = fc__raw_base(&x->raw);
        size_t es = fc_dtype_size(x->raw.dtype);
        for (int64_t i = 0; i < xn && st == FC_OK; i++) {
            double analytic = 0;
            if (g) analytic = fc__load_f64(g->raw.dtype, (char *)fc__raw_base(&g->raw) +
                                                          (size_t)i * fc_dtype_size(g->raw.dtype));
            double x0 = fc__load_f64(x->raw.dtype, xp + (size_t)i * es), lp, lm;
            fc__store_f64(x->raw.dtype, xp + (size_t)i * es, x0 + o.eps);
            fc__buffer_bump_generation(x->raw.buf);
            st = eval(ctx, fn, user, inputs, n, w, wn, &lp);
            fc__store_f64(x->raw.dtype, xp + (size_t)i * es, x0 - o.eps);
            if (st == FC_OK) st = eval(ctx, fn, user, inputs, n, w, wn, &lm);
            fc__store_f64(x->raw.dtype, xp + (size_t)i * es, x0);
            if (st != FC_OK) break;
            double numeric = (lp - lm) / (2 * o.eps);
            double excess = fabs(analytic - numeric) - (o.atol + o.rtol * fabs(numeric));
            if (!isfinite(analytic) || !isfinite(numeric)) excess = INFINITY;
            rep.checked++;
            if (excess > rep.worst_excess) {
                rep.worst_excess = excess;
                rep.worst_input = k;
                rep.worst_index = i;
                rep.analytic = analytic;
                rep.numeric = numeric;
            }
        }
    }
    fc_no_grad_end(ctx);
    if (st == FC_OK) {
        rep.passed = rep.worst_excess <= 0;
        if (!rep.passed)
            st = fc__fail(ctx, isfinite(rep.worst_excess) ? FC_ERR_STATE : FC_ERR_NON_FINITE,
                          "fc_gradcheck: gradient mismatch at input %d element %lld: analytic "
                          "%.10g, numeric %.10g (atol %g, rtol %g)",
                          rep.worst_input, (long long)rep.worst_index, rep.analytic, rep.numeric,
                          o.atol, o.rtol);
    }
done:
    fc_scope_end(ctx);
    if (report) *report = rep;
    return st;
}
