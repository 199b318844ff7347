/* SPDX-License-Identifier: MIT */
/* lr_sched.c - learning-rate schedules: the closed-form kinds as one pure
 * function of the step, their checks, and reduce-on-plateau's small state.
 *
 * Each formula follows the arithmetic of torch.optim.lr_scheduler's closed
 * form (one-cycle: its get_lr, operation for operation), so a sequence
 * stays within a few ulps of torch's, whose chainable forms multiply step
 * by step. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ag/tape.h"
#include "fucina/optim.h"

static const double pi = 3.141592653589793; /* math.pi */

/* zero fields that select torch's defaults */
static double gamma_of(const fc_lr_schedule *s) {
    return s->gamma == 0 && s->kind != FC_LR_EXPONENTIAL ? 0.1 : s->gamma;
}
static double pct_start_of(const fc_lr_schedule *s) {
    return s->pct_start == 0 ? 0.3 : s->pct_start;
}
static double div_of(const fc_lr_schedule *s) { return s->div_factor == 0 ? 25 : s->div_factor; }
static double final_div_of(const fc_lr_schedule *s) {
    return s->final_div_factor == 0 ? 1e4 : s->final_div_factor;
}

/* OneCycleLR's _annealing_cos */
static double anneal_cos(double start, double end, double pct) {
    double c = cos(pi * pct) + 1;
    return end + (start - end) / 2.0 * c;
}

/* One-cycle at step k >= 0 of span steps (span > 0), torch's get_lr for
 * two phases; past the last step it stays at the last step's lr. */
static double one_cycle(const fc_lr_schedule *s, int64_t k, int64_t span) {
    const double max_lr = s->base_lr, initial = max_lr / div_of(s);
    const double final = initial / final_div_of(s);
    const double t = (double)span, e1 = pct_start_of(s) * t - 1, e2 = t - 1;
    const double x = (double)(k < span ? k : span - 1);
    if (x <= e1) return anneal_cos(initial, max_lr, x / e1);
    return anneal_cos(max_lr, final, (x - e1) / (e2 - e1));
}

double fc_lr_at(const fc_lr_schedule *s, int64_t step) {
    if (!s) return 0;
    if (step < 0) step = 0;
    /* a negative warm-up counts as none; with w >= 0 and step >= 0 every
     * difference below stays inside int64 whatever the fields hold */
    const int64_t w = s->warmup_steps > 0 ? s->warmup_steps : 0;
    if (step < w) {
        /* up to the schedule's first lr, as torch's SequentialLR gives */
        double start = s->kind == FC_LR_ONECYCLE ? s->base_lr / div_of(s) : s->base_lr;
        return start * (double)(step + 1) / (double)w;
    }
    const int64_t k = step - w;
    switch (s->kind) {
    case FC_LR_STEP:
        if (s->step_size <= 0) return s->base_lr;
        return s->base_lr * pow(gamma_of(s), (double)(k / s->step_size));
    case FC_LR_MULTISTEP: {
        int passed = 0;
        for (int i = 0; s->milestones && i < s->n_milestones; i++) passed += s->milestones[i] <= k;
        return s->base_lr * pow(gamma_of(s), (double)passed);
    }
    case FC_LR_EXPONENTIAL: return s->base_lr * pow(s->gamma, (double)k);
    case FC_LR_COSINE: {
        if (s->total_steps <= w) return s->min_lr;
        int64_t span = s->total_steps - w; /* > 0: total_steps > w >= 0 */
        double t = (double)k / (double)span;
        if (t > 1) t = 1;
        return s->min_lr + 0.5 * (s->base_lr - s->min_lr) * (1 + cos(pi * t));
    }
    case FC_LR_ONECYCLE:
        if (s->total_steps <= w) return s->base_lr / div_of(s) / final_div_of(s);
        return one_cycle(s, k, s->total_steps - w);
    default: return s->base_lr;
    }
}

#define BAD(...) fc__fail(ctx, FC_ERR_INVALID_ARG, "fc_lr_schedule_check: " __VA_ARGS__)

static bool pos_finite(double v) { return v > 0 && isfinite(v); }

fc_status fc_lr_schedule_check(fc_ctx *ctx, const fc_lr_schedule *s) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!s) return fc__fail(ctx, FC_ERR_NULL_ARG, "fc_lr_schedule_check: s is NULL");
    if ((int)s->kind < 0 || s->kind >= FC_LR_KIND_COUNT)
        return BAD("unknown kind %d", (int)s->kind);
    if (!(s->base_lr >= 0) || !isfinite(s->base_lr))
        return BAD("base_lr %g must be finite and >= 0", s->base_lr);
    if (s->warmup_steps < 0)
        return BAD("warmup_steps %" PRId64 " must be >= 0", s->warmup_steps);
    switch (s->kind) {
    case FC_LR_STEP:
        if (s->step_size <= 0) return BAD("step_size %" PRId64 " must be > 0", s->step_size);
        if (!pos_finite(gamma_of(s))) return BAD("gamma %g must be finite and > 0", s->gamma);
        break;
    case FC_LR_MULTISTEP:
        if (!pos_finite(gamma_of(s))) return BAD("gamma %g must be finite and > 0", s->gamma);
        if (s->n_milestones < 0) return BAD("n_milestones %d must be >= 0", s->n_milestones);
        if (s->n_milestones > 0 && !s->milestones)
            return BAD("milestones is NULL with n_milestones %d", s->n_milestones);
        for (int i = 0; i < s->n_milestones; i++) {
            if (s->milestones[i] < 0)
                return BAD("milestones[%d] %" PRId64 " must be >= 0", i, s->milestones[i]);
            if (i > 0 && s->milestones[i] <= s->milestones[i - 1])
                return BAD("milestones[%d] %" PRId64 " must be above milestones[%d] %" PRId64, i,
                           s->milestones[i], i - 1, s->milestones[i - 1]);
        }
        break;
    case FC_LR_EXPONENTIAL:
        if (!pos_finite(s->gamma))
            return BAD("gamma %g must be finite and > 0 (FC_LR_EXPONENTIAL has no default)",
                       s->gamma);
        break;
    case FC_LR_COSINE:
    case FC_LR_ONECYCLE:
        if (s->total_steps <= s->warmup_steps)
            return BAD("total_steps %" PRId64 " must be above warmup_steps %" PRId64,
                       s->total_steps, s->warmup_steps);
        if (s->kind == FC_LR_COSINE) {
            if (!(s->min_lr >= 0) || !isfinite(s->min_lr))
                return BAD("min_lr %g must be finite and >= 0", s->min_lr);
            break;
        }
        if (!(pct_start_of(s) > 0 && pct_start_of(s) <= 1))
            return BAD("pct_start %g must be in (0, 1]", s->pct_start);
        if (pct_start_of(s) * (double)(s->total_steps - s->warmup_steps) == 1)
            return BAD("pct_start %g of %" PRId64 " steps leaves a first phase of length 0",
                       pct_start_of(s), s->total_steps - s->warmup_steps);
        if (!pos_finite(div_of(s)))
            return BAD("div_factor %g must be finite and > 0", s->div_factor);
        if (!pos_finite(final_div_of(s)))
            return BAD("final_div_factor %g must be finite and > 0", s->final_div_factor);
        break;
    default: break;
    }
    return FC_OK;
}
#undef BAD

/* ---- reduce on plateau ------------------------------------------------------------ */

fc_lr_plateau_opts fc_lr_plateau_opts_default(void) {
    return (fc_lr_plateau_opts){.factor = 0.1, .patience = 10, .threshold = 1e-4, .eps = 1e-8};
}

static fc_status check_plateau(fc_ctx *ctx, const char *fn, const fc_lr_plateau *p) {
    const fc_lr_plateau_opts *o = &p->opts;
    if (!(o->factor > 0 && o->factor < 1))
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: factor %g must be in (0, 1)", fn, o->factor);
    if (o->patience < 0 || o->cooldown < 0)
        return fc__fail(ctx, FC_ERR_INVALID_ARG,
                        "%s: patience %" PRId64 " and cooldown %" PRId64 " must be >= 0", fn,
                        o->patience, o->cooldown);
    if (!(o->threshold >= 0 && o->threshold < 1))
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: threshold %g must be in [0, 1)", fn,
                        o->threshold);
    if (!(o->min_lr >= 0) || !isfinite(o->min_lr))
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: min_lr %g must be finite and >= 0", fn,
                        o->min_lr);
    if (!(o->eps >= 0) || !isfinite(o->eps))
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: eps %g must be finite and >= 0", fn, o->eps);
    if (!(p->lr >= 0) || !isfinite(p->lr))
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: lr %g must be finite and >= 0", fn, p->lr);
    if (isnan(p->best)) return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: best is NaN", fn);
    if (p->bad_steps < 0 || p->cooldown_left < 0)
        return fc__fail(ctx, FC_ERR_INVALID_ARG,
                        "%s: bad_steps %" PRId64 " and cooldown_left %" PRId64 " must be >= 0",
                        fn, p->bad_steps, p->cooldown_left);
    return FC_OK;
}

fc_status fc_lr_plateau_init(fc_ctx *ctx, fc_lr_plateau *p, double lr,
                             const fc_lr_plateau_opts *opts) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!p) return fc__fail(ctx, FC_ERR_NULL_ARG, "fc_lr_plateau_init: p is NULL");
    fc_lr_plateau q = {.opts = opts ? *opts : fc_lr_plateau_opts_default(), .lr = lr,
                       .best = INFINITY};
    if (q.opts.factor == 0) q.opts.factor = 0.1;
    if (q.opts.eps == 0) q.opts.eps = 1e-8;
    fc_status st = check_plateau(ctx, "fc_lr_plateau_init", &q);
    if (st == FC_OK) *p = q;
    return st;
}

fc_status fc_lr_plateau_step(fc_ctx *ctx, fc_lr_plateau *p, double metric) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!p) return fc__fail(ctx, FC_ERR_NULL_ARG, "fc_lr_plateau_step: p is NULL");
    fc_status st = check_plateau(ctx, "fc_lr_plateau_step", p);
    if (st != FC_OK) return st;
    const fc_lr_plateau_opts *o = &p->opts;
    if (metric < p->best * (1 - o->threshold)) {
        p->best = metric;
        p->bad_steps = 0;
    } else if (p->bad_steps < INT64_MAX) { /* patience may be INT64_MAX */
        p->bad_steps++;
    }
    if (p->cooldown_left > 0) {
        p->cooldown_left--;
        p->bad_steps = 0;
    }
    if (p->bad_steps > o->patience) {
        double lr = fmax(p->lr * o->factor, o->min_lr);
        if (p->lr - lr > o->eps) p->lr = lr;
        p->cooldown_left = o->cooldown;
        p->bad_steps = 0;
    }
    return FC_OK;
}

/* the text's fields, in order; 'i' an int64, 'd' a double */
static const struct {
    const char *name;
    char type;
} text_fields[10] = {{"lr", 'd'},     {"best", 'd'},     {"bad_steps", 'i'}, {"cooldown_left", 'i'},
                     {"factor", 'd'}, {"patience", 'i'}, {"threshold", 'd'}, {"cooldown", 'i'},
                     {"min_lr", 'd'}, {"eps", 'd'}};

static void *field_ptr(fc_lr_plateau *p, int k) {
    void *ptr[10] = {&p->lr,          &p->best,          &p->bad_steps,      &p->cooldown_left,
                     &p->opts.factor, &p->opts.patience, &p->opts.threshold, &p->opts.cooldown,
                     &p->opts.min_lr, &p->opts.eps};
    return ptr[k];
}

int fc_lr_plateau_to_text(char *dst, size_t cap, const fc_lr_plateau *p) {
    if (!p) return 0;
    fc_lr_plateau q = *p;
    size_t used = 0;
    int total = 0;
    for (int k = 0; k < 10; k++) {
        const char *sep = k ? " " : "";
        const void *v = field_ptr(&q, k);
        char *at = dst && used < cap ? dst + used : NULL;
        size_t room = at ? cap - used : 0;
        int n = text_fields[k].type == 'd'
                    ? snprintf(at, room, "%s%s=%.17g", sep, text_fields[k].name, *(const double *)v)
                    : snprintf(at, room, "%s%s=%" PRId64, sep, text_fields[k].name,
                               *(const int64_t *)v);
        if (n < 0) return 0;
        total += n;
        used += (size_t)n;
    }
    return total;
}

static bool isspace_(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

fc_status fc_lr_plateau_from_text(fc_ctx *ctx, fc_lr_plateau *p, const char *text) {
    static const char fn[] = "fc_lr_plateau_from_text";
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!p || !text) return fc__fail(ctx, FC_ERR_NULL_ARG, "%s: p or text is NULL", fn);
    fc_lr_plateau q = {0};
    const char *at = text;
    for (int k = 0; k < 10; k++) {
        const char *name = text_fields[k].name;
        size_t len = strlen(name);
        if (k && *at++ != ' ')
            return fc__fail(ctx, FC_ERR_FORMAT, "%s: no space before field '%s'", fn, name);
        if (strncmp(at, name, len) != 0 || at[len] != '=')
            return fc__fail(ctx, FC_ERR_FORMAT, "%s: expected '%s=' at '%.40s'", fn, name, at);
        at += len + 1;
        char *end = NULL;
        errno = 0;
        bool range = false;
        if (text_fields[k].type == 'd') {
            double v = strtod(at, &end);
            range = errno == ERANGE && isinf(v); /* overflow; an underflow keeps its value */
            *(double *)field_ptr(&q, k) = v;
        } else {
            /* digits with an optional '-' only: no space, '+' or point */
            if (!(*at == '-' || (*at >= '0' && *at <= '9')))
                return fc__fail(ctx, FC_ERR_FORMAT, "%s: field '%s' is not an integer: '%.40s'",
                                fn, name, at);
            long long v = strtoll(at, &end, 10);
            range = errno == ERANGE;
            *(int64_t *)field_ptr(&q, k) = (int64_t)v;
        }
        if (end == at || range || (*end != ' ' && *end != '\0') || isspace_(*at))
            return fc__fail(ctx, FC_ERR_FORMAT, "%s: field '%s' has a bad value '%.40s'", fn,
                            name, at);
        at = end;
    }
    if (*at != '\0')
        return fc__fail(ctx, FC_ERR_FORMAT, "%s: text after the last field: '%.40s'", fn, at);
    fc_status st = check_plateau(ctx, fn, &q);
    if (st == FC_OK) *p = q;
    return st;
}
