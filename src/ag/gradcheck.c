/* SPDX-License-Identifier: MIT */
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

#define FC__GG_MAX_IN 8 /* inputs fc_gradgradcheck takes */

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

/* The report before anything was compared: what every early return leaves
 * (the header promises a filled report on every path). */
static const fc_gradcheck_report NOTHING_CHECKED = {
    .passed = false, .worst_input = -1, .worst_index = -1, .worst_excess = -INFINITY};

/* An input the check differentiates (it requires grad): a contiguous,
 * writable f64 leaf. f64 because central differences with eps 1e-6 in
 * f32 are rounding noise (a unit in the last place of L, about 1e-7 |L|,
 * divided by 2 eps, is 0.06 |L|), so a correct rule would be reported
 * wrong; PyTorch's gradcheck warns on such inputs, this one refuses them. */
static fc_status check_input(fc_ctx *ctx, const char *fn, const fc_tensor *x, int k) {
    char d[160];
    if (!fc__raw_is_contiguous(&x->raw) || x->node || fc__buffer_is_read_only(x->raw.buf))
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: input %d must be a contiguous, writable leaf",
                        fn, k);
    if (x->raw.dtype != FC_F64)
        return fc__fail(ctx, FC_ERR_DTYPE,
                        "%s: input %d (%s) requires grad but is not f64: central differences "
                        "need f64 (in %s they are rounding noise); pass f64 inputs (fc_to) or "
                        "mark it as not requiring grad",
                        fn, k, fc__desc(x, d, (int)sizeof d), fc_dtype_name(x->raw.dtype));
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

static fc_status gradcheck(fc_ctx *ctx, fc_gradcheck_fn fn, void *user, fc_tensor *const *inputs,
                           int n, const fc_gradcheck_opts *opts, fc_gradcheck_report *report) {
    if (!fn || !inputs || n < 1)
        return fc__fail(ctx, fn && inputs ? FC_ERR_INVALID_ARG : FC_ERR_NULL_ARG,
                        "fc_gradcheck: need fn and at least one input");
    fc_gradcheck_opts o = {0};
    if (opts) o = *opts;
    if (o.eps <= 0) o.eps = 1e-6;
    if (o.atol <= 0) o.atol = 1e-5;
    if (o.rtol <= 0) o.rtol = 1e-3;
    fc_gradcheck_report rep = NOTHING_CHECKED;
    for (int k = 0; k < n; k++) {
        fc_tensor *x = inputs[k];
        if (!x) return fc__fail(ctx, FC_ERR_NULL_ARG, "fc_gradcheck: input %d is NULL", k);
        if (o.check_all_f64 && x->raw.dtype == FC_F64 && !x->node) {
            fc_status st = fc_requires_grad(x, true);
            if (st != FC_OK) return st;
        }
        fc_status st = (x->flags & FC__T_REQUIRES_GRAD) ? check_input(ctx, "fc_gradcheck", x, k)
                                                        : FC_OK;
        if (st != FC_OK) return st;
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

fc_status fc_gradcheck(fc_ctx *ctx, fc_gradcheck_fn fn, void *user, fc_tensor *const *inputs,
                       int n, const fc_gradcheck_opts *opts, fc_gradcheck_report *report) {
    if (report) *report = NOTHING_CHECKED; /* what an early return leaves */
    if (!ctx) return FC_ERR_NULL_ARG;
    return gradcheck(ctx, fn, user, inputs, n, opts, report);
}

/* ---- gradgradcheck ---------------------------------------------------------------------
 * Second derivatives the same way, one level up (PyTorch's gradgradcheck):
 * with a random grad_output w (a leaf that requires grad) the first-order
 * gradients G_j = d sum(y * w) / dx_j are taken with create_graph, and the
 * function checked is L2 = sum_j sum(G_j * u_j) for fixed random u_j: its
 * analytic gradient (a second fc_autograd_grad over the recorded G_j) with
 * respect to every x_j and to w, against central differences of L2, each
 * evaluation of which is a plain first-order walk. So the check covers the
 * dependence of the recorded backward on the inputs (the Hessian projected
 * on u) and on w (the Jacobian applied to u). With constant_grad_output w
 * requires no grad: the upstream gradient of every rule is then a constant
 * wherever it does not depend on the inputs, the path a leaf w never takes
 * (sum(relu(x)), whose first-order gradient is a constant of the new
 * graph), and only the inputs are checked. */

typedef struct gg_state {
    fc_gradcheck_fn fn;
    void *user;
    fc_tensor *const *inputs;
    int n;
    fc_tensor *x[FC__GG_MAX_IN]; /* the inputs that require grad */
    int m;
    fc_tensor *w;             /* the grad_output: a leaf, or a constant (constant_grad_output) */
    int n_wrt;                /* what the second-order gradient is taken for: x, and w if a leaf */
    double *u[FC__GG_MAX_IN]; /* projections of each G_j (numel of x_j each) */
} gg_state;

/* L2 at the current values, with a first-order walk. */
static fc_status gg_eval(fc_ctx *ctx, gg_state *s, double *out) {
    fc_scope_begin(ctx);
    fc_tensor *y = s->fn(ctx, s->inputs, s->n, s->user);
    fc_tensor *g[FC__GG_MAX_IN] = {0};
    fc_status st;
    if (!y)
        st = fc_ctx_status(ctx) != FC_OK
                 ? fc_ctx_status(ctx)
                 : fc__fail(ctx, FC_ERR_STATE, "fc_gradgradcheck: fn returned NULL");
    else if (!(y->flags & FC__T_REQUIRES_GRAD))
        st = FC_OK; /* nothing depends on the inputs: every G_j is 0 */
    else
        st = fc_autograd_grad(ctx, &y, &s->w, 1, s->x, s->m,
                              &(fc_autograd_grad_opts){.allow_unused = true}, g);
    double acc = 0;
    for (int j = 0; j < s->m && st == FC_OK; j++) {
        double p = 0;
        if (g[j]) st = project(ctx, g[j], s->u[j], &p);
        acc += p;
    }
    for (int j = 0; j < s->m; j++)
        fc_release(g[j]);
    fc_scope_end(ctx);
    *out = acc;
    return st;
}

/* Central difference of L2 in element i of t against the analytic value. */
static fc_status gg_element(fc_ctx *ctx, gg_state *s, fc_tensor *t, int64_t i, double analytic,
                            const fc_gradcheck_opts *o, int k, fc_gradcheck_report *rep) {
    char *p = fc__raw_base(&t->raw);
    size_t es = fc_dtype_size(t->raw.dtype);
    double x0 = fc__load_f64(t->raw.dtype, p + (size_t)i * es), lp = 0, lm = 0;
    fc__store_f64(t->raw.dtype, p + (size_t)i * es, x0 + o->eps);
    fc__buffer_bump_generation(t->raw.buf);
    fc_status st = gg_eval(ctx, s, &lp);
    fc__store_f64(t->raw.dtype, p + (size_t)i * es, x0 - o->eps);
    fc__buffer_bump_generation(t->raw.buf);
    if (st == FC_OK) st = gg_eval(ctx, s, &lm);
    fc__store_f64(t->raw.dtype, p + (size_t)i * es, x0);
    fc__buffer_bump_generation(t->raw.buf);
    if (st != FC_OK) return st;
    double numeric = (lp - lm) / (2 * o->eps);
    double excess = fabs(analytic - numeric) - (o->atol + o->rtol * fabs(numeric));
    if (!isfinite(analytic) || !isfinite(numeric)) excess = INFINITY;
    rep->checked++;
    if (excess > rep->worst_excess) {
        rep->worst_excess = excess;
        rep->worst_input = k;
        rep->worst_index = i;
        rep->analytic = analytic;
        rep->numeric = numeric;
    }
    return FC_OK;
}

/* Random values in [-1, 1) into a tensor's (f32/f64, contiguous) storage. */
static void gg_fill(fc_tensor *t, uint64_t seed, double *copy) {
    int64_t n = fc__raw_numel(&t->raw);
    char *p = fc__raw_base(&t->raw);
    size_t es = fc_dtype_size(t->raw.dtype);
    for (int64_t i = 0; i < n; i++) {
        uint32_t r[4];
        fc__philox(seed, (uint64_t)i, r);
        double v = ((double)r[0] / 4294967296.0) * 2.0 - 1.0;
        fc__store_f64(t->raw.dtype, p + (size_t)i * es, v);
        if (copy) copy[i] = fc__load_f64(t->raw.dtype, p + (size_t)i * es);
    }
}

/* The analytic pass: G with create_graph, then the gradient of L2 with
 * respect to x and w into hx[0, m) and hw (NULL entries: zero). */
static fc_status gg_analytic(fc_ctx *ctx, gg_state *s, fc_tensor **hx, fc_tensor **hw) {
    fc_tensor *y = s->fn(ctx, s->inputs, s->n, s->user);
    if (!y)
        return fc_ctx_status(ctx) != FC_OK
                   ? fc_ctx_status(ctx)
                   : fc__fail(ctx, FC_ERR_STATE, "fc_gradgradcheck: fn returned NULL");
    if (!(y->flags & FC__T_REQUIRES_GRAD)) return FC_OK;
    fc_tensor *g[FC__GG_MAX_IN] = {0}, *outs[FC__GG_MAX_IN], *us[FC__GG_MAX_IN];
    fc_status st =
        fc_autograd_grad(ctx, &y, &s->w, 1, s->x, s->m,
                         &(fc_autograd_grad_opts){.allow_unused = true, .create_graph = true}, g);
    int no = 0;
    for (int j = 0; j < s->m && st == FC_OK; j++) {
        if (!g[j]) continue;
        if (!fc__scope_register(ctx, g[j])) { /* the scope owns it from here */
            for (int q = j; q < s->m; q++)
                fc_release(g[q]);
            return fc__fail(ctx, FC_ERR_OOM, "fc_gradgradcheck: out of memory");
        }
        if (!(g[j]->flags & FC__T_REQUIRES_GRAD)) continue; /* a constant: no second order */
        us[no] = fc_tensor_from_data(ctx, FC_F64, g[j]->raw.shape, g[j]->raw.rank, s->u[j]);
        if (!us[no]) st = fc_ctx_status(ctx);
        outs[no++] = g[j];
    }
    if (st != FC_OK || no == 0) return st;
    fc_tensor *wrt[FC__GG_MAX_IN + 1], *h[FC__GG_MAX_IN + 1] = {0};
    for (int j = 0; j < s->m; j++)
        wrt[j] = s->x[j];
    wrt[s->m] = s->w; /* listed only when it is a leaf (n_wrt) */
    st = fc_autograd_grad(ctx, outs, us, no, wrt, s->n_wrt,
                          &(fc_autograd_grad_opts){.allow_unused = true}, h);
    for (int j = 0; j < s->n_wrt; j++)
        if (h[j] && !fc__scope_register(ctx, h[j])) {
            for (int q = j; q < s->n_wrt; q++)
                fc_release(h[q]);
            return fc__fail(ctx, FC_ERR_OOM, "fc_gradgradcheck: out of memory");
        }
    if (st != FC_OK) return st;
    for (int j = 0; j < s->m; j++)
        hx[j] = h[j];
    *hw = s->n_wrt > s->m ? h[s->m] : NULL;
    return FC_OK;
}

static fc_status gradgradcheck(fc_ctx *ctx, fc_gradcheck_fn fn, void *user,
                               fc_tensor *const *inputs, int n, const fc_gradcheck_opts *opts,
                               fc_gradcheck_report *report) {
    if (!fn || !inputs || n < 1 || n > FC__GG_MAX_IN)
        return fc__fail(ctx, fn && inputs ? FC_ERR_INVALID_ARG : FC_ERR_NULL_ARG,
                        "fc_gradgradcheck: need fn and 1 to %d inputs (got %d)", FC__GG_MAX_IN, n);
    fc_gradcheck_opts o = {0};
    if (opts) o = *opts;
    if (o.eps <= 0) o.eps = 1e-6;
    if (o.atol <= 0) o.atol = 1e-5;
    if (o.rtol <= 0) o.rtol = 1e-3;
    fc_gradcheck_report rep = NOTHING_CHECKED;
    gg_state s = {.fn = fn, .user = user, .inputs = inputs, .n = n};
    for (int k = 0; k < n; k++) {
        fc_tensor *x = inputs[k];
        if (!x) return fc__fail(ctx, FC_ERR_NULL_ARG, "fc_gradgradcheck: input %d is NULL", k);
        if (o.check_all_f64 && x->raw.dtype == FC_F64 && !x->node) {
            fc_status st = fc_requires_grad(x, true);
            if (st != FC_OK) return st;
        }
        if (!(x->flags & FC__T_REQUIRES_GRAD)) continue;
        fc_status st = check_input(ctx, "fc_gradgradcheck", x, k);
        if (st != FC_OK) return st;
        s.x[s.m++] = x;
    }
    if (s.m == 0)
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "fc_gradgradcheck: no input requires grad");
    fc_status st = FC_OK;
    fc_scope_begin(ctx);
    fc_tensor *y = fn(ctx, inputs, n, user);
    if (!y) {
        st = fc_ctx_status(ctx) != FC_OK
                 ? fc_ctx_status(ctx)
                 : fc__fail(ctx, FC_ERR_STATE, "fc_gradgradcheck: fn returned NULL");
        goto done;
    }
    s.w = fc_empty(ctx, fc__grad_dtype(y->raw.dtype), y->raw.shape, y->raw.rank);
    for (int j = 0; j < s.m && st == FC_OK; j++) {
        fc_tensor *u = fc_empty(ctx, FC_F64, s.x[j]->raw.shape, s.x[j]->raw.rank);
        st = u ? FC_OK : fc_ctx_status(ctx);
        if (u) {
            s.u[j] = (double *)fc__raw_base(&u->raw);
            gg_fill(u, o.seed ^ (0x7575ULL + (uint64_t)j * 0x9e3779b97f4a7c15ULL), NULL);
        }
    }
    if (!s.w || st != FC_OK) {
        st = fc_ctx_status(ctx);
        goto done;
    }
    gg_fill(s.w, o.seed ^ 0x6772616467726164ULL, NULL);
    s.n_wrt = o.constant_grad_output ? s.m : s.m + 1;
    if (!o.constant_grad_output && (st = fc_requires_grad(s.w, true)) != FC_OK) goto done;
    fc_tensor *hx[FC__GG_MAX_IN] = {0}, *hw = NULL;
    if ((st = gg_analytic(ctx, &s, hx, &hw)) != FC_OK) goto done;
    for (int j = 0; j < s.n_wrt && st == FC_OK; j++) {
        fc_tensor *t = j < s.m ? s.x[j] : s.w, *h = j < s.m ? hx[j] : hw;
        int64_t tn = fc__raw_numel(&t->raw);
        for (int64_t i = 0; i < tn && st == FC_OK; i++) {
            double a = h ? fc__load_f64(h->raw.dtype, (char *)fc__raw_base(&h->raw) +
                                                          (size_t)i * fc_dtype_size(h->raw.dtype))
                         : 0;
            /* the input index reported: the position in inputs, or n for w */
            int k = n;
            for (int q = 0; q < n && j < s.m; q++)
                if (inputs[q] == t) k = q;
            st = gg_element(ctx, &s, t, i, a, &o, k, &rep);
        }
    }
    if (st == FC_OK) {
        rep.passed = rep.worst_excess <= 0;
        if (!rep.passed)
            st =
                fc__fail(ctx, isfinite(rep.worst_excess) ? FC_ERR_STATE : FC_ERR_NON_FINITE,
                         "fc_gradgradcheck: second-order mismatch at %s %d element %lld: "
                         "analytic %.10g, numeric %.10g (atol %g, rtol %g)",
                         rep.worst_input == n ? "the grad_output, input" : "input", rep.worst_input,
                         (long long)rep.worst_index, rep.analytic, rep.numeric, o.atol, o.rtol);
    }
done:
    fc_scope_end(ctx);
    if (report) *report = rep;
    return st;
}

fc_status fc_gradgradcheck(fc_ctx *ctx, fc_gradcheck_fn fn, void *user, fc_tensor *const *inputs,
                           int n, const fc_gradcheck_opts *opts, fc_gradcheck_report *report) {
    if (report) *report = NOTHING_CHECKED; /* what an early return leaves */
    if (!ctx) return FC_ERR_NULL_ARG;
    return gradgradcheck(ctx, fn, user, inputs, n, opts, report);
}
