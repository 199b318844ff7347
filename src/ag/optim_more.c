/* SPDX-License-Identifier: MIT */
/* optim_more.c - RMSprop, Adagrad, Lion and LAMB as fused updates (one
 * pass; LAMB two, as its trust ratio needs two norms first).
 *
 * optim.c owns the optimizer object, the all-or-nothing step and the state
 * tensors; this file holds the update rules of the kinds beyond SGD and
 * Adam and the facts about them optim.c asks for. Each rule is written
 * once per precision: in f32 for f32, f16 and bf16 parameters (read,
 * updated, rounded back once) and in f64 for f64 ones, following the
 * order of operations of torch.optim's single-tensor code so the steps
 * stay within rounding of torch's. */
#include <math.h>

#include "ag/optim_more.h"
#include "exec/parallel.h"

static const char *const state_names[FC_OPTIM_KIND_COUNT][FC__OPTIM_SLOTS] = {
    [FC_OPTIM_SGD] = {"momentum_buffer", NULL, NULL},
    [FC_OPTIM_ADAM] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    [FC_OPTIM_ADAMW] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    [FC_OPTIM_RMSPROP] = {"momentum_buffer", "square_avg", "grad_avg"},
    [FC_OPTIM_ADAGRAD] = {NULL, "sum", NULL},
    [FC_OPTIM_LION] = {"exp_avg", NULL, NULL},
    [FC_OPTIM_LAMB] = {"exp_avg", "exp_avg_sq", NULL},
};

const char *fc__optim_state_name(fc_optim_kind kind, int slot) {
    if ((int)kind < 0 || kind >= FC_OPTIM_KIND_COUNT || slot < 0 || slot >= FC__OPTIM_SLOTS)
        return NULL;
    return state_names[kind][slot];
}

bool fc__optim_uses(fc_optim_kind kind, const fc_optim_opts *o, int slot) {
    switch (kind) {
    case FC_OPTIM_SGD: return slot == 0 && o->momentum != 0;
    case FC_OPTIM_ADAM:
    case FC_OPTIM_ADAMW: return slot < 2 || o->amsgrad;
    case FC_OPTIM_RMSPROP: return slot == 1 || (slot == 0 && o->momentum != 0) ||
                                  (slot == 2 && o->centered);
    case FC_OPTIM_ADAGRAD: return slot == 1;
    case FC_OPTIM_LION: return slot == 0;
    case FC_OPTIM_LAMB: return slot < 2;
    default: return false;
    }
}

double fc__optim_state_init(fc_optim_kind kind, const fc_optim_opts *o, int slot) {
    return kind == FC_OPTIM_ADAGRAD && slot == 1 ? o->initial_accumulator_value : 0;
}

void fc__optim_defaults(fc_optim_opts *r) {
    if (r->beta1 == 0) r->beta1 = 0.9;
    if (r->beta2 == 0) r->beta2 = r->kind == FC_OPTIM_LION ? 0.99 : 0.999;
    if (r->eps == 0)
        r->eps = r->kind == FC_OPTIM_ADAGRAD ? 1e-10 : r->kind == FC_OPTIM_LAMB ? 1e-6 : 1e-8;
    if (r->alpha == 0 && r->kind == FC_OPTIM_RMSPROP) r->alpha = 0.99;
}

fc_status fc__optim_check_more(fc_ctx *ctx, const char *fn, const fc_optim_opts *o) {
    if (!(o->alpha >= 0 && o->alpha < 1))
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: alpha %g must be in [0, 1)", fn, o->alpha);
    if (!(o->lr_decay >= 0) || !isfinite(o->lr_decay))
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: lr_decay %g must be finite and >= 0", fn,
                        o->lr_decay);
    if (!(o->initial_accumulator_value >= 0) || !isfinite(o->initial_accumulator_value))
        return fc__fail(ctx, FC_ERR_INVALID_ARG,
                        "%s: initial_accumulator_value %g must be finite and >= 0", fn,
                        o->initial_accumulator_value);
    if (!isfinite(o->eps) || !isfinite(o->momentum) || !isfinite(o->weight_decay))
        return fc__fail(ctx, FC_ERR_INVALID_ARG,
                        "%s: eps %g, momentum %g and weight_decay %g must be finite", fn, o->eps,
                        o->momentum, o->weight_decay);
    if (o->centered && o->kind != FC_OPTIM_RMSPROP)
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: centered is an RMSprop option", fn);
    return FC_OK;
}

typedef struct upd {
    const fc_optim_opts *o;
    fc_dtype pdt;
    void *p;
    const void *g;
    void *m, *v, *ga; /* slots 0, 1, 2 */
    double clr;       /* Adagrad: lr / (1 + (t-1)*lr_decay) */
} upd;

/* torch computes 1 - beta in double and rounds once (as optim.c's Adam) */
static void rmsprop_range(void *arg, int64_t b, int64_t e) {
    const upd *u = arg;
    const float alpha = (float)u->o->alpha, oma = (float)(1 - u->o->alpha);
    const float eps = (float)u->o->eps, wd = (float)u->o->weight_decay;
    const float mom = (float)u->o->momentum, lr = (float)u->o->lr;
    const float *gg = u->g;
    float *buf = u->m, *sq = u->v, *ga = u->ga;
    for (int64_t i = b; i < e; i++) {
        float p = fc__optim_load(u->pdt, u->p, i), g = gg[i];
        if (wd != 0) g += wd * p;
        float s = alpha * sq[i] + oma * g * g, den;
        sq[i] = s;
        if (ga) {
            float a = alpha * ga[i] + oma * g;
            ga[i] = a;
            den = sqrtf(s - a * a) + eps;
        } else {
            den = sqrtf(s) + eps;
        }
        if (buf) {
            float bb = mom * buf[i] + g / den;
            buf[i] = bb;
            p -= lr * bb;
        } else {
            p -= lr * (g / den);
        }
        fc__optim_store(u->pdt, u->p, i, p);
    }
}

static void rmsprop_range_f64(void *arg, int64_t b, int64_t e) {
    const upd *u = arg;
    const double alpha = u->o->alpha, eps = u->o->eps, wd = u->o->weight_decay;
    const double mom = u->o->momentum, lr = u->o->lr;
    const double *gg = u->g;
    double *pp = u->p, *buf = u->m, *sq = u->v, *ga = u->ga;
    for (int64_t i = b; i < e; i++) {
        double g = gg[i];
        if (wd != 0) g += wd * pp[i];
        double s = alpha * sq[i] + (1 - alpha) * g * g, den;
        sq[i] = s;
        if (ga) {
            double a = alpha * ga[i] + (1 - alpha) * g;
            ga[i] = a;
            den = sqrt(s - a * a) + eps;
        } else {
            den = sqrt(s) + eps;
        }
        if (buf) {
            double bb = mom * buf[i] + g / den;
            buf[i] = bb;
            pp[i] -= lr * bb;
        } else {
            pp[i] -= lr * (g / den);
        }
    }
}

static void adagrad_range(void *arg, int64_t b, int64_t e) {
    const upd *u = arg;
    const float eps = (float)u->o->eps, wd = (float)u->o->weight_decay, clr = (float)u->clr;
    const float *gg = u->g;
    float *sum = u->v;
    for (int64_t i = b; i < e; i++) {
        float p = fc__optim_load(u->pdt, u->p, i), g = gg[i];
        if (wd != 0) g += wd * p;
        float s = sum[i] + g * g;
        sum[i] = s;
        p -= clr * (g / (sqrtf(s) + eps));
        fc__optim_store(u->pdt, u->p, i, p);
    }
}

static void adagrad_range_f64(void *arg, int64_t b, int64_t e) {
    const upd *u = arg;
    const double eps = u->o->eps, wd = u->o->weight_decay, clr = u->clr;
    const double *gg = u->g;
    double *pp = u->p, *sum = u->v;
    for (int64_t i = b; i < e; i++) {
        double g = gg[i];
        if (wd != 0) g += wd * pp[i];
        double s = sum[i] + g * g;
        sum[i] = s;
        pp[i] -= clr * (g / (sqrt(s) + eps));
    }
}

/* sign with sign(0) = 0 (torch.sign); NaN passes through */
static inline float signf_(float x) { return x > 0 ? 1.0f : x < 0 ? -1.0f : x; }
static inline double sign_(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x; }

static void lion_range(void *arg, int64_t b, int64_t e) {
    const upd *u = arg;
    const float b1 = (float)u->o->beta1, b2 = (float)u->o->beta2;
    const float omb1 = (float)(1 - u->o->beta1), omb2 = (float)(1 - u->o->beta2);
    const float lr = (float)u->o->lr, decay = (float)(1 - u->o->lr * u->o->weight_decay);
    const float *gg = u->g;
    float *mm = u->m;
    for (int64_t i = b; i < e; i++) {
        float p = fc__optim_load(u->pdt, u->p, i), g = gg[i];
        p *= decay;
        p -= lr * signf_(b1 * mm[i] + omb1 * g);
        mm[i] = b2 * mm[i] + omb2 * g;
        fc__optim_store(u->pdt, u->p, i, p);
    }
}

static void lion_range_f64(void *arg, int64_t b, int64_t e) {
    const upd *u = arg;
    const double b1 = u->o->beta1, b2 = u->o->beta2, lr = u->o->lr;
    const double decay = 1 - u->o->lr * u->o->weight_decay;
    const double *gg = u->g;
    double *pp = u->p, *mm = u->m;
    for (int64_t i = b; i < e; i++) {
        double g = gg[i];
        pp[i] = pp[i] * decay - lr * sign_(b1 * mm[i] + (1 - b1) * g);
        mm[i] = b2 * mm[i] + (1 - b2) * g;
    }
}

/* LAMB (You et al. 2020) with bias correction and an unclamped trust
 * ratio: pass 1 moves the moments and sums w^2 and r^2 in f64 per fixed
 * chunk (at most LAMB_CHUNKS, so the partials live here and the sum is
 * the same for any thread count); pass 2 recomputes r from the new moments
 * (the same expression, so the same bits) and applies lr * ratio * r. */
enum { LAMB_CHUNKS = 64 };
typedef struct lamb {
    const fc_optim_opts *o;
    fc_dtype pdt;
    void *p;
    const void *g;
    void *m, *v;
    double bc1, bc2, step; /* step: lr * trust ratio, for pass 2 */
    double part[LAMB_CHUNKS][2];
} lamb;

static inline float lamb_r(float m, float v, float p, float bc1, float bc2, float eps, float wd) {
    float r = (m / bc1) / (sqrtf(v / bc2) + eps);
    return wd != 0 ? r + wd * p : r;
}
static inline double lamb_r64(double m, double v, double p, double bc1, double bc2, double eps,
                              double wd) {
    double r = (m / bc1) / (sqrt(v / bc2) + eps);
    return wd != 0 ? r + wd * p : r;
}

static void lamb_moments(void *arg, int64_t c, int64_t b, int64_t e) {
    lamb *u = arg;
    const float b1 = (float)u->o->beta1, b2 = (float)u->o->beta2;
    const float omb1 = (float)(1 - u->o->beta1), omb2 = (float)(1 - u->o->beta2);
    const float eps = (float)u->o->eps, wd = (float)u->o->weight_decay;
    const float bc1 = (float)u->bc1, bc2 = (float)u->bc2;
    const float *gg = u->g;
    float *mm = u->m, *vv = u->v;
    double sw = 0, sr = 0;
    for (int64_t i = b; i < e; i++) {
        float p = fc__optim_load(u->pdt, u->p, i), g = gg[i];
        float m = b1 * mm[i] + omb1 * g;
        float v = b2 * vv[i] + omb2 * g * g;
        mm[i] = m;
        vv[i] = v;
        float r = lamb_r(m, v, p, bc1, bc2, eps, wd);
        sw += (double)p * p;
        sr += (double)r * r;
    }
    u->part[c][0] = sw;
    u->part[c][1] = sr;
}

static void lamb_moments_f64(void *arg, int64_t c, int64_t b, int64_t e) {
    lamb *u = arg;
    const double b1 = u->o->beta1, b2 = u->o->beta2, eps = u->o->eps, wd = u->o->weight_decay;
    const double *gg = u->g, *pp = u->p;
    double *mm = u->m, *vv = u->v, sw = 0, sr = 0;
    for (int64_t i = b; i < e; i++) {
        double g = gg[i];
        double m = b1 * mm[i] + (1 - b1) * g;
        double v = b2 * vv[i] + (1 - b2) * g * g;
        mm[i] = m;
        vv[i] = v;
        double r = lamb_r64(m, v, pp[i], u->bc1, u->bc2, eps, wd);
        sw += pp[i] * pp[i];
        sr += r * r;
    }
    u->part[c][0] = sw;
    u->part[c][1] = sr;
}

static void lamb_apply(void *arg, int64_t b, int64_t e) {
    const lamb *u = arg;
    const float eps = (float)u->o->eps, wd = (float)u->o->weight_decay;
    const float bc1 = (float)u->bc1, bc2 = (float)u->bc2, step = (float)u->step;
    const float *mm = u->m, *vv = u->v;
    for (int64_t i = b; i < e; i++) {
        float p = fc__optim_load(u->pdt, u->p, i);
        p -= step * lamb_r(mm[i], vv[i], p, bc1, bc2, eps, wd);
        fc__optim_store(u->pdt, u->p, i, p);
    }
}

static void lamb_apply_f64(void *arg, int64_t b, int64_t e) {
    const lamb *u = arg;
    const double eps = u->o->eps, wd = u->o->weight_decay;
    const double *mm = u->m, *vv = u->v;
    double *pp = u->p;
    for (int64_t i = b; i < e; i++)
        pp[i] -= u->step * lamb_r64(mm[i], vv[i], pp[i], u->bc1, u->bc2, eps, wd);
}

static void lamb_update(fc_ctx *ctx, const fc_optim_opts *o, fc_dtype pdt, void *p,
                        const void *g, void *m, void *v, int64_t n, int64_t t) {
    lamb u = {.o = o, .pdt = pdt, .p = p, .g = g, .m = m, .v = v,
              .bc1 = 1 - pow(o->beta1, (double)t), .bc2 = 1 - pow(o->beta2, (double)t)};
    bool f64 = pdt == FC_F64;
    int64_t chunk = (n + LAMB_CHUNKS - 1) / LAMB_CHUNKS;
    if (chunk < 65536) chunk = 65536;
    fc__parallel_chunks(ctx, n, chunk, f64 ? lamb_moments_f64 : lamb_moments, &u);
    double sw = 0, sr = 0;
    for (int64_t c = 0, nc = fc__chunk_count(n, chunk); c < nc; c++) {
        sw += u.part[c][0];
        sr += u.part[c][1];
    }
    double wn = sqrt(sw), rn = sqrt(sr);
    /* 1 when either norm is 0 (a zero parameter, or no update); a NaN
     * norm also gives 1, so the NaN reaches the parameter, where
     * check_finite mode sees it */
    double ratio = wn > 0 && rn > 0 ? wn / rn : 1;
    u.step = o->lr * ratio;
    fc__parallel_for(ctx, n, 65536, f64 ? lamb_apply_f64 : lamb_apply, &u);
}

void fc__optim_update_more(fc_ctx *ctx, fc_optim_kind kind, const fc_optim_opts *o, fc_dtype pdt,
                           void *p, const void *g, void *const *s, int64_t n, int64_t t) {
    upd u = {.o = o, .pdt = pdt, .p = p, .g = g, .m = s[0], .v = s[1], .ga = s[2]};
    /* only the slots the options use: a state left from other options
     * (momentum set to 0 after a checkpoint load, say) is not read */
    void **slot[FC__OPTIM_SLOTS] = {&u.m, &u.v, &u.ga};
    for (int k = 0; k < FC__OPTIM_SLOTS; k++)
        if (!fc__optim_uses(kind, o, k)) *slot[k] = NULL;
    bool f64 = pdt == FC_F64;
    void (*fn)(void *, int64_t, int64_t) = NULL;
    switch (kind) {
    case FC_OPTIM_RMSPROP: fn = f64 ? rmsprop_range_f64 : rmsprop_range; break;
    case FC_OPTIM_ADAGRAD:
        u.clr = o->lr / (1 + (double)(t - 1) * o->lr_decay);
        fn = f64 ? adagrad_range_f64 : adagrad_range;
        break;
    case FC_OPTIM_LION: fn = f64 ? lion_range_f64 : lion_range; break;
    case FC_OPTIM_LAMB: lamb_update(ctx, o, pdt, p, g, u.m, u.v, n, t); return;
    default: return;
    }
    fc__parallel_for(ctx, n, 65536, fn, &u);
}
