/* SPDX-License-Identifier: MIT */
/* optim.c - the optimizer object and its all-or-nothing step; SGD, Adam,
 * AdamW as fused one-pass updates (the other kinds' rules: optim_more.c).
 *
 * Each parameter is updated by one kernel that reads the gradient, the
 * state and the parameter once and writes the state and the parameter
 * once, split across the team by element ranges. Parameters are accessed
 * through fc__buffer_data_mut, so every step bumps their generation. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "exec/kernels/copy.h"
#include "exec/parallel.h"
#include "ag/optim_more.h"
#include "ag/tape.h"
#include "core/cpu.h"
#include "fucina/optim.h"

typedef struct pstate {
    fc_tensor *param;
    int group;
    fc_tensor *m, *v, *vmax; /* exp_avg / momentum_buffer, exp_avg_sq, max_exp_avg_sq */
    bool has_momentum;       /* SGD: the buffer holds a value */
    unsigned fresh;          /* FRESH_*: state the step in progress created */
} pstate;

enum { FRESH_M = 1u, FRESH_V = 2u, FRESH_VMAX = 4u };

struct fc_optim {
    fc_ctx *ctx;
    fc_optim_kind kind;
    int64_t steps;
    pstate *p;
    int n, cap;
    fc_optim_opts *groups;
    int ngroups, gcap;
};

/* fn names the public function the caller called, for the message */
static fc_status check_opts(fc_ctx *ctx, const char *fn, const fc_optim_opts *o) {
    if ((int)o->kind < 0 || o->kind >= FC_OPTIM_KIND_COUNT)
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: unknown kind %d", fn, (int)o->kind);
    if (!(o->lr >= 0) || !isfinite(o->lr))
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: lr %g must be finite and >= 0", fn, o->lr);
    if (o->weight_decay < 0 || o->momentum < 0 || o->dampening < 0)
        return fc__fail(ctx, FC_ERR_INVALID_ARG,
                        "%s: weight_decay %g, momentum %g, dampening %g must be >= 0", fn,
                        o->weight_decay, o->momentum, o->dampening);
    if (o->nesterov && (o->momentum <= 0 || o->dampening != 0))
        return fc__fail(ctx, FC_ERR_INVALID_ARG,
                        "%s: nesterov needs momentum > 0 and dampening 0", fn);
    if (o->beta1 < 0 || o->beta1 >= 1 || o->beta2 < 0 || o->beta2 >= 1 || o->eps < 0)
        return fc__fail(ctx, FC_ERR_INVALID_ARG,
                        "%s: betas (%g, %g) must be in [0, 1) and eps %g >= 0", fn, o->beta1,
                        o->beta2, o->eps);
    /* the kinds before RMSprop never read these fields, and callers that
     * predate them may leave anything there */
    if (o->kind >= FC_OPTIM_RMSPROP) return fc__optim_check_more(ctx, fn, o);
    return FC_OK;
}

static fc_optim_opts with_defaults(const fc_optim_opts *o) {
    fc_optim_opts r = *o;
    fc__optim_defaults(&r);
    return r;
}

static fc_status add_group(fc_optim *opt, const char *fn, const fc_optim_opts *opts,
                           fc_tensor *const *params, int n) {
    fc_ctx *ctx = opt->ctx;
    if (!opts || (!params && n > 0))
        return fc__fail(ctx, FC_ERR_NULL_ARG, "%s: opts or params is NULL", fn);
    if (n < 0) return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: n = %d < 0", fn, n);
    if (n > INT_MAX / 2 - opt->n || opt->ngroups >= INT_MAX / 2)
        return fc__fail(ctx, FC_ERR_OVERFLOW, "%s: %d more parameters (%d already, %d groups) "
                        "is too many", fn, n, opt->n, opt->ngroups);
    fc_status st = check_opts(ctx, fn, opts);
    if (st != FC_OK) return st;
    if (opt->ngroups > 0 && opts->kind != opt->kind)
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: kind differs from the first group", fn);
    for (int i = 0; i < n; i++) {
        if (!params[i]) return fc__fail(ctx, FC_ERR_NULL_ARG, "%s: param %d is NULL", fn, i);
        if (params[i]->ctx != ctx)
            return fc__fail(ctx, FC_ERR_CONTEXT, "%s: param %d belongs to another context", fn, i);
        if (!fc_dtype_supports_grad(params[i]->raw.dtype))
            return fc__fail(ctx, FC_ERR_DTYPE,
                            "%s: param %d has dtype %s (f32, f16, bf16, f64 only)",
                            fn, i, fc_dtype_name(params[i]->raw.dtype));
        if (!fc__raw_is_contiguous(&params[i]->raw))
            return fc__fail(ctx, FC_ERR_UNSUPPORTED_VIEW, "%s: param %d is not contiguous", fn, i);
        /* a parameter listed twice would be updated twice per step */
        for (int j = 0; j < opt->n + i; j++)
            if ((j < opt->n ? opt->p[j].param : params[j - opt->n]) == params[i])
                return fc__fail(ctx, FC_ERR_INVALID_ARG,
                                "%s: param %d is already in this optimizer", fn, i);
    }
    if (opt->ngroups == opt->gcap) {
        int cap = opt->gcap ? opt->gcap * 2 : 4;
        fc_optim_opts *g = fc__ctx_alloc(ctx, sizeof *g * (size_t)cap);
        if (!g) return fc__fail(ctx, FC_ERR_OOM, "%s: out of memory", fn);
        if (opt->groups) {
            memcpy(g, opt->groups, sizeof *g * (size_t)opt->gcap);
            fc__ctx_free(ctx, opt->groups, sizeof *g * (size_t)opt->gcap);
        }
        opt->groups = g;
        opt->gcap = cap;
    }
    if (opt->n + n > opt->cap) {
        int cap = opt->cap ? opt->cap : 8;
        while (cap < opt->n + n) cap *= 2;
        pstate *p = fc__ctx_alloc(ctx, sizeof *p * (size_t)cap);
        if (!p) return fc__fail(ctx, FC_ERR_OOM, "%s: out of memory", fn);
        if (opt->p) {
            memcpy(p, opt->p, sizeof *p * (size_t)opt->cap);
            fc__ctx_free(ctx, opt->p, sizeof *p * (size_t)opt->cap);
        }
        opt->p = p;
        opt->cap = cap;
    }
    opt->kind = opts->kind;
    opt->groups[opt->ngroups] = with_defaults(opts);
    for (int i = 0; i < n; i++) {
        opt->p[opt->n++] = (pstate){.param = fc_retain(params[i]), .group = opt->ngroups};
    }
    opt->ngroups++;
    return FC_OK;
}

fc_status fc_optim_add_group(fc_optim *opt, const fc_optim_opts *opts, fc_tensor *const *params,
                             int n) {
    if (!opt) return FC_ERR_NULL_ARG;
    return add_group(opt, "fc_optim_add_group", opts, params, n);
}

fc_optim *fc_optim_new(fc_ctx *ctx, const fc_optim_opts *opts, fc_tensor *const *params, int n) {
    FC__CHECK_CTX(ctx);
    fc_optim *opt = fc__ctx_alloc(ctx, sizeof *opt);
    if (!opt) {
        fc__fail(ctx, FC_ERR_OOM, "fc_optim_new: out of memory");
        return NULL;
    }
    memset(opt, 0, sizeof *opt);
    opt->ctx = ctx;
    if (add_group(opt, "fc_optim_new", opts, params, n) != FC_OK) {
        fc_optim_free(opt);
        return NULL;
    }
    return opt;
}

void fc_optim_free(fc_optim *opt) {
    if (!opt) return;
    fc_ctx *ctx = opt->ctx;
    for (int i = 0; i < opt->n; i++) {
        fc_release(opt->p[i].param);
        fc_release(opt->p[i].m);
        fc_release(opt->p[i].v);
        fc_release(opt->p[i].vmax);
    }
    fc__ctx_free(ctx, opt->p, sizeof *opt->p * (size_t)opt->cap);
    fc__ctx_free(ctx, opt->groups, sizeof *opt->groups * (size_t)opt->gcap);
    fc__ctx_free(ctx, opt, sizeof *opt);
}

/* State tensor in the gradient dtype (f64 for an f64 parameter, else f32),
 * filled with init (0 but for Adagrad's sum), owned by the optimizer
 * (outside any scope) */
static fc_tensor *state_new(fc_ctx *ctx, const fc_tensor *p, double init) {
    fc_dtype dt = fc__grad_dtype(p->raw.dtype);
    fc_tensor *t = init == 0 ? fc_zeros(ctx, dt, p->raw.shape, p->raw.rank)
                             : fc_full(ctx, dt, p->raw.shape, p->raw.rank, init);
    return fc_keep(t);
}

/* ---- the fused kernels ------------------------------------------------------------- */

typedef struct upd {
    const fc_optim_opts *o;
    fc_optim_kind kind;
    fc_dtype pdt;
    void *p;
    const void *g;       /* float, or double for an f64 parameter (as the state) */
    void *m, *v, *vmax;
    bool first; /* SGD: momentum buffer not yet set */
    double bc1, bc2_sqrt, step_size;
} upd;

#define load_p fc__optim_load
#define store_p fc__optim_store

static void sgd_range(void *arg, int64_t b, int64_t e) {
    const upd *u = arg;
    const float lr = (float)u->o->lr, wd = (float)u->o->weight_decay, mom = (float)u->o->momentum;
    const float damp = (float)u->o->dampening;
    const float *gg = u->g;
    float *mm = u->m;
    for (int64_t i = b; i < e; i++) {
        float p = load_p(u->pdt, u->p, i), g = gg[i];
        if (wd != 0) g += wd * p;
        if (mom != 0) {
            float buf = u->first ? g : mom * mm[i] + (1 - damp) * g;
            mm[i] = buf;
            g = u->o->nesterov ? g + mom * buf : buf;
        }
        store_p(u->pdt, u->p, i, p - lr * g);
    }
}

/* The common Adam case (f32 parameters, no amsgrad) as one branch-free
 * loop the compiler vectorizes. The step is bound by its two divisions
 * (torch's formula, kept for bit-equality), so on x86 a copy built for AVX
 * (8 lanes; no FMA, so no contraction changes a bit) is picked at run time.
 * c: beta1, beta2, 1-beta1, 1-beta2, step size, sqrt(bias corr. 2), eps, decay. */
#define ADAM_F32_LOOP                                                                              \
    {                                                                                              \
        const float b1 = c[0], b2 = c[1], omb1 = c[2], omb2 = c[3], step = c[4], bc2s = c[5];      \
        const float eps = c[6], decay = c[7];                                                      \
        for (int64_t i = b; i < e; i++) {                                                          \
            float p = pp[i] * decay, g = gg[i] + l2 * pp[i];                                       \
            float m = b1 * mm[i] + omb1 * g;                                                       \
            float v = b2 * vv[i] + omb2 * g * g;                                                   \
            mm[i] = m;                                                                             \
            vv[i] = v;                                                                             \
            pp[i] = p - step * m / (sqrtf(v) / bc2s + eps);                                        \
        }                                                                                          \
    }
static void adam_f32_plain(float *restrict pp, float *restrict mm, float *restrict vv,
                           const float *restrict gg, const float *c, float l2, int64_t b,
                           int64_t e) ADAM_F32_LOOP
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__)
#define ADAM_HAVE_AVX 1
__attribute__((target("avx"))) static void
adam_f32_avx(float *restrict pp, float *restrict mm, float *restrict vv, const float *restrict gg,
             const float *c, float l2, int64_t b, int64_t e) ADAM_F32_LOOP
#endif

static void adam_range(void *arg, int64_t b, int64_t e) {
    const upd *u = arg;
    /* torch computes 1 - beta in double and rounds once; rounding beta
     * first (1 - 0.999f) would be 6e-6 off and drift from torch's steps */
    const float b1 = (float)u->o->beta1, b2 = (float)u->o->beta2, eps = (float)u->o->eps;
    const float omb1 = (float)(1 - u->o->beta1), omb2 = (float)(1 - u->o->beta2);
    const float wd = (float)u->o->weight_decay, lr = (float)u->o->lr;
    const float step = (float)u->step_size, bc2s = (float)u->bc2_sqrt;
    const bool adamw = u->kind == FC_OPTIM_ADAMW;
    if (u->pdt == FC_F32 && !u->vmax) {
        const float decay = adamw ? 1 - lr * wd : 1, l2 = adamw ? 0 : wd;
        const float c[8] = {b1, b2, omb1, omb2, step, bc2s, eps, decay};
#ifdef ADAM_HAVE_AVX
        /* the avx2 level implies AVX; the one CPU module decides (core/cpu.h) */
        if (fc__isa_enabled(FC__ISA_AVX2)) {
            adam_f32_avx((float *)u->p, u->m, u->v, u->g, c, l2, b, e);
            return;
        }
#endif
        adam_f32_plain((float *)u->p, u->m, u->v, u->g, c, l2, b, e);
        return;
    }
    const float *gg = u->g;
    float *mm = u->m, *vv = u->v, *vmax = u->vmax;
    for (int64_t i = b; i < e; i++) {
        float p = load_p(u->pdt, u->p, i), g = gg[i];
        if (adamw)
            p *= 1 - lr * wd;
        else if (wd != 0)
            g += wd * p;
        float m = b1 * mm[i] + omb1 * g;
        float v = b2 * vv[i] + omb2 * g * g;
        mm[i] = m;
        vv[i] = v;
        if (vmax) {
            if (v > vmax[i]) vmax[i] = v;
            v = vmax[i];
        }
        p -= step * m / (sqrtf(v) / bc2s + eps);
        store_p(u->pdt, u->p, i, p);
    }
}

/* f64 parameters: the same rules with every quantity in double (their
 * gradient and state are f64), as torch.optim does for float64. */
static void sgd_range_f64(void *arg, int64_t b, int64_t e) {
    const upd *u = arg;
    const double lr = u->o->lr, wd = u->o->weight_decay, mom = u->o->momentum;
    const double damp = u->o->dampening;
    double *pp = u->p, *mm = u->m;
    const double *gg = u->g;
    for (int64_t i = b; i < e; i++) {
        double g = gg[i];
        if (wd != 0) g += wd * pp[i];
        if (mom != 0) {
            double buf = u->first ? g : mom * mm[i] + (1 - damp) * g;
            mm[i] = buf;
            g = u->o->nesterov ? g + mom * buf : buf;
        }
        pp[i] -= lr * g;
    }
}

static void adam_range_f64(void *arg, int64_t b, int64_t e) {
    const upd *u = arg;
    const double b1 = u->o->beta1, b2 = u->o->beta2, eps = u->o->eps;
    const double wd = u->o->weight_decay, lr = u->o->lr;
    const bool adamw = u->kind == FC_OPTIM_ADAMW;
    double *pp = u->p, *mm = u->m, *vv = u->v, *vmax = u->vmax;
    const double *gg = u->g;
    for (int64_t i = b; i < e; i++) {
        double p = pp[i], g = gg[i];
        if (adamw)
            p *= 1 - lr * wd;
        else if (wd != 0)
            g += wd * p;
        double m = b1 * mm[i] + (1 - b1) * g;
        double v = b2 * vv[i] + (1 - b2) * g * g;
        mm[i] = m;
        vv[i] = v;
        if (vmax) {
            if (v > vmax[i]) vmax[i] = v;
            v = vmax[i];
        }
        pp[i] = p - u->step_size * m / (sqrt(v) / u->bc2_sqrt + eps);
    }
}

/* ---- the step: all or nothing ------------------------------------------------------
 *
 * A failed step has no effect (SQLite's rule): first every parameter with a
 * gradient is checked (writable, and in check_finite mode a finite
 * gradient) and every state tensor it needs is created; a failure there
 * drops exactly the state this call created and returns. Only then are the
 * parameters updated and the step counted, by kernels that cannot fail. In
 * check_finite mode the updates are computed into scratch copies first and
 * committed only when every new value is finite (the one extra pass that
 * mode pays for). */

static bool need_m(const fc_optim *opt, const fc_optim_opts *o) {
    return fc__optim_uses(opt->kind, o, 0);
}

/* Creates the state s needs (at its initial value), marking what it
 * created in s->fresh. */
static fc_status ensure_state(fc_optim *opt, pstate *s) {
    fc_ctx *ctx = opt->ctx;
    const fc_optim_opts *o = &opt->groups[s->group];
    fc_tensor **slot[3] = {&s->m, &s->v, &s->vmax};
    for (int k = 0; k < 3; k++) {
        if (!fc__optim_uses(opt->kind, o, k) || *slot[k]) continue;
        *slot[k] = state_new(ctx, s->param, fc__optim_state_init(opt->kind, o, k));
        if (!*slot[k]) return fc__failed(ctx);
        s->fresh |= 1u << k; /* FRESH_M, FRESH_V, FRESH_VMAX */
    }
    return FC_OK;
}

/* After a failed step: drops the state it created, so none appears. */
static void drop_fresh(fc_optim *opt) {
    for (int i = 0; i < opt->n; i++) {
        pstate *s = &opt->p[i];
        if (s->fresh & FRESH_M) fc_release(s->m), s->m = NULL;
        if (s->fresh & FRESH_V) fc_release(s->v), s->v = NULL;
        if (s->fresh & FRESH_VMAX) fc_release(s->vmax), s->vmax = NULL;
        s->fresh = 0;
    }
}

/* Runs parameter s's update for step t on p (the parameter's data) and the
 * state arrays m, v, vmax (NULL where the rule has none). Cannot fail. */
static void run_update(fc_optim *opt, const pstate *s, int64_t t, void *p, void *m, void *v,
                       void *vmax) {
    const fc_optim_opts *o = &opt->groups[s->group];
    upd u = {.o = o, .kind = opt->kind, .pdt = s->param->raw.dtype, .p = p,
             .g = fc__raw_base(&s->param->grad->raw), .m = m, .v = v,
             .vmax = o->amsgrad ? vmax : NULL};
    int64_t n = fc__raw_numel(&s->param->raw);
    bool f64 = u.pdt == FC_F64;
    if (opt->kind >= FC_OPTIM_RMSPROP) {
        void *const st[3] = {m, v, vmax};
        fc__optim_update_more(opt->ctx, opt->kind, o, u.pdt, p, u.g, st, n, t);
    } else if (opt->kind == FC_OPTIM_SGD) {
        u.first = !s->has_momentum;
        fc__parallel_for(opt->ctx, n, 65536, f64 ? sgd_range_f64 : sgd_range, &u);
    } else {
        u.bc1 = 1 - pow(o->beta1, (double)t);
        u.bc2_sqrt = sqrt(1 - pow(o->beta2, (double)t));
        u.step_size = o->lr / u.bc1;
        fc__parallel_for(opt->ctx, n, 65536, f64 ? adam_range_f64 : adam_range, &u);
    }
}

static void *state_data(fc_tensor *t) { return t ? fc__raw_base(&t->raw) : NULL; }

/* The in-place update of every parameter with a gradient (each one's
 * writes bump the generations of what they change). */
static void update_in_place(fc_optim *opt, int64_t t) {
    for (int i = 0; i < opt->n; i++) {
        pstate *s = &opt->p[i];
        if (!s->param->grad) continue;
        void *pp;
        fc__raw_data_mut(&s->param->raw, &pp); /* cannot fail: checked by validate */
        fc_tensor *st[3] = {s->m, s->v, s->vmax};
        for (int k = 0; k < 3; k++)
            if (st[k]) fc__buffer_bump_generation(st[k]->raw.buf);
        run_update(opt, s, t, pp, state_data(s->m), state_data(s->v), state_data(s->vmax));
    }
}

/* check_finite mode: every update computed into scratch copies of the
 * parameter and its state, checked, and copied back only when all are
 * finite. Runs inside a scope (the copies are scope-owned). */
static fc_status update_checked(fc_optim *opt, int64_t t) {
    fc_ctx *ctx = opt->ctx;
    int n = 0;
    for (int i = 0; i < opt->n; i++) n += opt->p[i].param->grad != NULL;
    if (n == 0) return FC_OK;
    /* per updated parameter: new param, m, v, vmax (NULL where absent) */
    size_t bytes = sizeof(fc_tensor *) * 4 * (size_t)n;
    fc_tensor **scr = fc__ctx_alloc(ctx, bytes);
    if (!scr) return fc__fail(ctx, FC_ERR_OOM, "fc_optim_step: out of memory");
    memset(scr, 0, bytes);
    fc_status st = FC_OK;
    for (int i = 0, j = 0; i < opt->n && st == FC_OK; i++) {
        pstate *s = &opt->p[i];
        if (!s->param->grad) continue;
        fc_tensor **c = &scr[4 * j++];
        fc_tensor *src[4] = {s->param, s->m, s->v, s->vmax};
        for (int k = 0; k < 4 && st == FC_OK; k++)
            if (src[k] && !(c[k] = fc__copy_clone(ctx, "fc_optim_step", src[k])))
                st = fc__failed(ctx);
        if (st != FC_OK) break;
        run_update(opt, s, t, fc__raw_base(&c[0]->raw), state_data(c[1]), state_data(c[2]),
                   state_data(c[3]));
        for (int k = 0; k < 4 && st == FC_OK; k++) {
            int64_t bad = c[k] ? fc__count_non_finite(c[k]) : 0;
            if (bad) {
                char d[160];
                st = fc__fail(ctx, FC_ERR_NON_FINITE,
                              "fc_optim_step: parameter %d (group %d, %s): the update gives %lld "
                              "non-finite value%s in its %s; nothing was updated",
                              i, s->group, fc__desc(s->param, d, (int)sizeof d), (long long)bad,
                              bad == 1 ? "" : "s",
                              k == 0 ? "parameter"
                              : fc__optim_state_name(opt->kind, k - 1)
                                  ? fc__optim_state_name(opt->kind, k - 1)
                                  : "state");
            }
        }
    }
    if (st == FC_OK) { /* commit: copies of equal size, nothing can fail */
        for (int i = 0, j = 0; i < opt->n; i++) {
            pstate *s = &opt->p[i];
            if (!s->param->grad) continue;
            fc_tensor **c = &scr[4 * j++];
            fc_tensor *dst[4] = {s->param, s->m, s->v, s->vmax};
            for (int k = 0; k < 4; k++) {
                if (!dst[k]) continue;
                void *d;
                fc__raw_data_mut(&dst[k]->raw, &d); /* bumps the generation */
                memcpy(d, fc__raw_base(&c[k]->raw), fc_tensor_nbytes(dst[k]));
            }
        }
    }
    fc__ctx_free(ctx, scr, bytes);
    return st;
}

/* Checks every parameter with a gradient and creates the state each needs. */
static fc_status validate(fc_optim *opt) {
    fc_ctx *ctx = opt->ctx;
    for (int i = 0; i < opt->n; i++) {
        pstate *s = &opt->p[i];
        fc_tensor *g = s->param->grad;
        if (!g) continue;
        char d[160];
        if (fc__buffer_is_read_only(s->param->raw.buf))
            return fc__fail(ctx, FC_ERR_READ_ONLY,
                            "fc_optim_step: parameter %d (group %d, %s) is read-only; nothing "
                            "was updated",
                            i, s->group, fc__desc(s->param, d, (int)sizeof d));
        if (!fc__raw_is_contiguous(&s->param->raw))
            return fc__fail(ctx, FC_ERR_UNSUPPORTED_VIEW,
                            "fc_optim_step: parameter %d (group %d) is not contiguous", i,
                            s->group);
        if (ctx->check_finite) {
            int64_t bad = fc__count_non_finite(g);
            if (bad)
                return fc__fail(ctx, FC_ERR_NON_FINITE,
                                "fc_optim_step: parameter %d (group %d, %s) has %lld non-finite "
                                "gradient value%s; nothing was updated",
                                i, s->group, fc__desc(s->param, d, (int)sizeof d),
                                (long long)bad, bad == 1 ? "" : "s");
        }
        fc_status st = ensure_state(opt, s);
        if (st != FC_OK) return st;
    }
    return FC_OK;
}

fc_status fc_optim_step(fc_optim *opt) {
    if (!opt) return FC_ERR_NULL_ARG;
    fc_ctx *ctx = opt->ctx;
    if (opt->steps == INT64_MAX)
        return fc__fail(ctx, FC_ERR_OVERFLOW,
                        "fc_optim_step: the step count %lld cannot advance (it is INT64_MAX); "
                        "nothing was updated",
                        (long long)opt->steps);
    int64_t t = opt->steps + 1;
    fc_status st = validate(opt);
    if (st == FC_OK) {
        if (ctx->check_finite) {
            fc_scope_begin(ctx);
            st = update_checked(opt, t);
            fc_scope_end(ctx);
        } else {
            update_in_place(opt, t);
        }
    }
    if (st != FC_OK) {
        drop_fresh(opt);
        return st;
    }
    for (int i = 0; i < opt->n; i++) {
        pstate *s = &opt->p[i];
        s->fresh = 0;
        if (s->param->grad && opt->kind == FC_OPTIM_SGD && need_m(opt, &opt->groups[s->group]))
            s->has_momentum = true;
    }
    opt->steps = t;
    return FC_OK;
}

void fc_optim_zero_grad(fc_optim *opt) {
    if (!opt) return;
    for (int i = 0; i < opt->n; i++) fc_zero_grad(&opt->p[i].param, 1);
}

fc_status fc_optim_set_lr(fc_optim *opt, double lr) {
    if (!opt) return FC_ERR_NULL_ARG;
    if (!(lr >= 0) || !isfinite(lr))
        return fc__fail(opt->ctx, FC_ERR_INVALID_ARG,
                        "fc_optim_set_lr: lr %g must be finite and >= 0", lr);
    for (int g = 0; g < opt->ngroups; g++) opt->groups[g].lr = lr;
    return FC_OK;
}

fc_status fc_optim_set_group_lr(fc_optim *opt, int group, double lr) {
    if (!opt) return FC_ERR_NULL_ARG;
    if (group < 0 || group >= opt->ngroups)
        return fc__fail(opt->ctx, FC_ERR_INDEX, "fc_optim_set_group_lr: group %d of %d", group,
                        opt->ngroups);
    if (!(lr >= 0) || !isfinite(lr))
        return fc__fail(opt->ctx, FC_ERR_INVALID_ARG,
                        "fc_optim_set_group_lr: lr %g of group %d must be finite and >= 0", lr,
                        group);
    opt->groups[group].lr = lr;
    return FC_OK;
}

double fc_optim_lr(const fc_optim *opt, int group) {
    if (!opt || group < 0 || group >= opt->ngroups) return 0;
    return opt->groups[group].lr;
}

int fc_optim_param_count(const fc_optim *opt) { return opt ? opt->n : 0; }
int fc_optim_group_count(const fc_optim *opt) { return opt ? opt->ngroups : 0; }
fc_tensor *fc_optim_param(const fc_optim *opt, int i) {
    return opt && i >= 0 && i < opt->n ? opt->p[i].param : NULL;
}
int fc_optim_param_group(const fc_optim *opt, int i) {
    return opt && i >= 0 && i < opt->n ? opt->p[i].group : -1;
}
fc_status fc_optim_group_opts(const fc_optim *opt, int group, fc_optim_opts *out) {
    if (!opt) return FC_ERR_NULL_ARG;
    if (!out) return fc__fail(opt->ctx, FC_ERR_NULL_ARG, "fc_optim_group_opts: out is NULL");
    if (group < 0 || group >= opt->ngroups)
        return fc__fail(opt->ctx, FC_ERR_INDEX, "fc_optim_group_opts: group %d of %d", group,
                        opt->ngroups);
    *out = opt->groups[group];
    return FC_OK;
}
fc_status fc_optim_set_group_opts(fc_optim *opt, int group, const fc_optim_opts *opts) {
    if (!opt || !opts) return FC_ERR_NULL_ARG;
    if (group < 0 || group >= opt->ngroups)
        return fc__fail(opt->ctx, FC_ERR_INDEX, "fc_optim_set_group_opts: group %d of %d", group,
                        opt->ngroups);
    if (opts->kind != opt->kind)
        return fc__fail(opt->ctx, FC_ERR_INVALID_ARG, "fc_optim_set_group_opts: kind differs");
    fc_status st = check_opts(opt->ctx, "fc_optim_set_group_opts", opts);
    if (st != FC_OK) return st;
    opt->groups[group] = with_defaults(opts);
    return FC_OK;
}

int64_t fc_optim_step_count(const fc_optim *opt) { return opt ? opt->steps : 0; }
fc_status fc_optim_set_step_count(fc_optim *opt, int64_t steps) {
    if (!opt) return FC_ERR_NULL_ARG;
    if (steps < 0)
        return fc__fail(opt->ctx, FC_ERR_INVALID_ARG, "fc_optim_set_step_count: %lld < 0",
                        (long long)steps);
    opt->steps = steps;
    /* SGD momentum restarts from the gradient only before the first step */
    for (int i = 0; i < opt->n; i++) opt->p[i].has_momentum = steps > 0 && opt->p[i].m;
    return FC_OK;
}

fc_tensor *fc_optim_state(fc_optim *opt, int i, const char *name, bool create) {
    if (!opt) return NULL;
    if (!name) {
        fc__fail(opt->ctx, FC_ERR_NULL_ARG, "fc_optim_state: name is NULL");
        return NULL;
    }
    if (i < 0 || i >= opt->n) {
        fc__fail(opt->ctx, FC_ERR_INDEX, "fc_optim_state: parameter %d of %d", i, opt->n);
        return NULL;
    }
    pstate *s = &opt->p[i];
    fc_tensor **slot = NULL, **slots[3] = {&s->m, &s->v, &s->vmax};
    bool sgd = opt->kind == FC_OPTIM_SGD;
    int k = 0;
    for (; k < 3 && !slot; k++) {
        const char *sn = fc__optim_state_name(opt->kind, k);
        if (sn && !strcmp(name, sn)) slot = slots[k];
    }
    k--;
    if (!slot) {
        fc__fail(opt->ctx, FC_ERR_INVALID_ARG, "fc_optim_state: no state '%s' for this optimizer",
                 name);
        return NULL;
    }
    if (!*slot && create) {
        *slot = state_new(opt->ctx, s->param,
                          fc__optim_state_init(opt->kind, &opt->groups[s->group], k));
        if (sgd && *slot) s->has_momentum = opt->steps > 0;
    }
    return *slot;
}
