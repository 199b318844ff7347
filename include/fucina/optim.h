/* SPDX-License-Identifier: MIT */
/* fucina/optim.h - optimizers, gradient clipping, learning-rate schedules.
 *
 * An optimizer updates its parameters from their gradients (fc_grad) in one
 * fused pass per parameter. Parameters are leaves of dtype f32, f16, bf16
 * or f64. The update of f32, f16 and bf16 parameters is computed in f32
 * (16-bit parameters are read, updated and rounded back once); that of an
 * f64 parameter in f64, from its f64 gradient, with f64 state. A step is a mutation: it bumps each parameter's
 * storage generation, so a graph that saved a parameter before the step
 * refuses to run backward after it (FC_ERR_SAVED_MODIFIED).
 *
 * Update rules follow PyTorch's torch.optim exactly:
 *   SGD:   g += wd*p; buf = momentum*buf + (1-dampening)*g (buf = g at the
 *          first step); g = nesterov ? g + momentum*buf : buf; p -= lr*g
 *   Adam:  g += wd*p; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
 *          vmax = max(vmax, v) with amsgrad;
 *          p -= lr/(1-b1^t) * m / (sqrt(v or vmax)/sqrt(1-b2^t) + eps)
 *   AdamW: p *= 1 - lr*wd, then Adam without the wd term.
 *   RMSprop: g += wd*p; sq = alpha*sq + (1-alpha)*g^2; centered:
 *          ga = alpha*ga + (1-alpha)*g, den = sqrt(sq - ga^2) + eps, else
 *          den = sqrt(sq) + eps; momentum > 0: buf = momentum*buf + g/den
 *          (buf starts at 0), p -= lr*buf; else p -= lr*g/den
 *   Adagrad: clr = lr / (1 + (t-1)*lr_decay); g += wd*p; sum += g^2
 *          (sum starts at initial_accumulator_value); p -= clr*g/(sqrt(sum)+eps)
 *   Lion:  (Chen et al. 2023, as lion-pytorch) p *= 1 - lr*wd;
 *          p -= lr*sign(b1*m + (1-b1)*g); m = b2*m + (1-b2)*g
 *   LAMB:  (You et al. 2020; torch has none) per parameter tensor:
 *          m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2 (g without weight
 *          decay); r = (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd*p;
 *          ratio = ||p|| / ||r|| (L2 norms of the whole tensor, summed in
 *          f64), 1 when either norm is 0; p -= lr*ratio*r. This variant has
 *          bias correction on, the weight decay inside the trust ratio, no
 *          clamp of ||p|| or of the ratio, the ratio applied whatever wd
 *          is, and no gradient pre-normalization (clip first with
 *          fc_clip_grad_norm for that). Two passes: the first moves the
 *          moments and sums the norms, the second recomputes r and
 *          applies it.
 * Parameters without a gradient are skipped (their state does not move).
 *
 * State (moments, step count) is readable and writable so checkpoints can
 * save and restore it exactly.
 */
#ifndef FUCINA_OPTIM_H
#define FUCINA_OPTIM_H

#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The optimizer algorithms (fc_optim_opts.kind). */
typedef enum fc_optim_kind {
    FC_OPTIM_SGD,
    FC_OPTIM_ADAM,
    FC_OPTIM_ADAMW,
    FC_OPTIM_RMSPROP,
    FC_OPTIM_ADAGRAD,
    FC_OPTIM_LION,
    FC_OPTIM_LAMB,
    FC_OPTIM_KIND_COUNT
} fc_optim_kind;

/* Zero beta1/beta2/eps/alpha select PyTorch's defaults: Adam/AdamW (0.9,
 * 0.999, 1e-8), RMSprop alpha 0.99 and eps 1e-8, Adagrad eps 1e-10, Lion
 * betas (0.9, 0.99); LAMB (0.9, 0.999) and eps 1e-6 (the LAMB paper's). lr is taken as given (torch's default lr differs per
 * optimizer: 1e-2 for RMSprop and Adagrad, 1e-4 for Lion). weight_decay 0
 * means none. lr must be finite and >= 0 (as torch.optim; 0 lets a
 * schedule decay to nothing, and fc_optim_set_lr takes the same range);
 * weight_decay, momentum and dampening must be >= 0, betas in [0, 1), eps
 * >= 0; for RMSprop, Adagrad, Lion and LAMB also alpha in [0, 1), lr_decay and
 * initial_accumulator_value >= 0, these and eps, momentum, weight_decay
 * finite, and centered only with RMSprop. Anything else is
 * FC_ERR_INVALID_ARG naming the value. Only the fields a kind reads
 * matter to its step (Adagrad ignores momentum, say). */
typedef struct fc_optim_opts {
    fc_optim_kind kind;
    double lr;
    double weight_decay;
    /* SGD */
    double momentum, dampening;
    bool nesterov;
    /* Adam / AdamW */
    double beta1, beta2, eps;
    bool amsgrad;
    /* RMSprop: smoothing constant (also uses momentum, eps) */
    double alpha;
    bool centered;
    /* Adagrad */
    double lr_decay, initial_accumulator_value;
} fc_optim_opts;

/* An optimizer over a set of parameters (fc_optim_new). */
typedef struct fc_optim fc_optim;

/* Creates an optimizer over n parameters (retained; one parameter group
 * with opts). NULL on error (recorded in ctx): FC_ERR_INVALID_ARG for bad
 * hyper-parameters (named in the message) or a parameter given twice,
 * FC_ERR_DTYPE for a parameter that cannot carry a gradient (not f32, f16,
 * bf16 or f64). Groups may mix dtypes. */
FC_API fc_optim *fc_optim_new(fc_ctx *ctx, const fc_optim_opts *opts, fc_tensor *const *params,
                              int n);
/* Adds a parameter group with its own options (same kind as the first).
 * Errors as fc_optim_new; a parameter already in any group is
 * FC_ERR_INVALID_ARG (it would be updated twice per step). */
FC_API fc_status fc_optim_add_group(fc_optim *opt, const fc_optim_opts *opts,
                                    fc_tensor *const *params, int n);
/* Releases the parameters and the state. NULL is a no-op. */
FC_API void fc_optim_free(fc_optim *opt);
/* One update of every parameter that has a gradient; counts one step.
 * Returns FC_OK; FC_ERR_NULL_ARG for a NULL opt; FC_ERR_OVERFLOW when the
 * step count is already INT64_MAX; FC_ERR_READ_ONLY or
 * FC_ERR_UNSUPPORTED_VIEW for a parameter that cannot be written in place;
 * FC_ERR_OOM creating state (or, in check_finite mode, scratch copies);
 * in check_finite mode FC_ERR_NON_FINITE for a gradient with NaN or inf or
 * an update that would write one into a parameter or its state. Errors are
 * recorded in the context, naming the parameter index and its group.
 * All or nothing: on any error no parameter, no state tensor (present or
 * absent) and not the step count has changed, so the step can be retried.
 * check_finite mode computes the updates into scratch copies and copies
 * them back once all are finite (one extra pass and the memory of the
 * parameters and their state). */
FC_API fc_status fc_optim_step(fc_optim *opt);
/* Drops every parameter's gradient. NULL is a no-op. */
FC_API void fc_optim_zero_grad(fc_optim *opt);
/* Learning rate of every group (for schedules), or of one group: finite and
 * >= 0, else FC_ERR_INVALID_ARG; FC_ERR_INDEX for a group out of range;
 * FC_ERR_NULL_ARG for a NULL opt. Errors but the NULL opt are recorded in
 * the context. fc_optim_lr gives 0 for a NULL opt or a bad group. */
FC_API fc_status fc_optim_set_lr(fc_optim *opt, double lr);
FC_API fc_status fc_optim_set_group_lr(fc_optim *opt, int group, double lr);
FC_API double fc_optim_lr(const fc_optim *opt, int group);

/* ---- state, for checkpoints ---------------------------------------------------- */
/* Counts; 0 for NULL. */
FC_API int fc_optim_param_count(const fc_optim *opt);
FC_API int fc_optim_group_count(const fc_optim *opt);
/* The i-th parameter (borrowed), or NULL for a NULL opt or i out of range. */
FC_API fc_tensor *fc_optim_param(const fc_optim *opt, int i);
/* Group options (copy): FC_OK, FC_ERR_NULL_ARG for a NULL opt (not
 * recorded) or out, or FC_ERR_INDEX for a group out of range; errors but
 * the NULL opt are recorded in the context. Which group parameter i belongs
 * to: -1 for a NULL opt or i out of range. */
FC_API fc_status fc_optim_group_opts(const fc_optim *opt, int group, fc_optim_opts *out);
FC_API int fc_optim_param_group(const fc_optim *opt, int i);
/* Replaces a group's options (same kind; validated like fc_optim_new).
 * FC_ERR_NULL_ARG, FC_ERR_INDEX for a group out of range, FC_ERR_INVALID_ARG
 * for another kind or a bad option (recorded in the context). */
FC_API fc_status fc_optim_set_group_opts(fc_optim *opt, int group, const fc_optim_opts *opts);
/* Number of steps taken (Adam's t); 0 for NULL. The setter takes steps >= 0
 * (FC_ERR_INVALID_ARG otherwise, recorded; FC_ERR_NULL_ARG for NULL). */
FC_API int64_t fc_optim_step_count(const fc_optim *opt);
FC_API fc_status fc_optim_set_step_count(fc_optim *opt, int64_t steps);
/* State tensor of parameter i: "exp_avg", "exp_avg_sq", "max_exp_avg_sq"
 * (Adam/AdamW), "momentum_buffer" (SGD), "square_avg", "momentum_buffer",
 * "grad_avg" (RMSprop), "sum" (Adagrad; created filled with
 * initial_accumulator_value), "exp_avg" (Lion), "exp_avg", "exp_avg_sq"
 * (LAMB), the parameter's shape,
 * f32 (f64 for an f64 parameter).
 * Borrowed; created (zeros) on demand with create = true, else NULL when
 * it does not exist yet. Write it with fc_copy_ to restore a checkpoint.
 * NULL plus an error in the context for a NULL name (FC_ERR_NULL_ARG), a
 * name this kind has no state for (FC_ERR_INVALID_ARG), or i out of range
 * (FC_ERR_INDEX). */
FC_API fc_tensor *fc_optim_state(fc_optim *opt, int i, const char *name, bool create);

/* ---- clipping -------------------------------------------------------------------- */
/* Scales all gradients so their global L2 norm is at most max_norm
 * (like torch.nn.utils.clip_grad_norm_: by max_norm / (norm + 1e-6) when
 * that is below 1). Gradients may be f32 and f64 in any mix: the norm is
 * summed in f64, f64 gradients are scaled in f64. total_norm (NULL
 * allowed) gets the norm before clipping. Parameters without a gradient, and NULL entries, are skipped.
 * Returns FC_OK; FC_ERR_NULL_ARG for a NULL ctx or (n > 0) params;
 * FC_ERR_INVALID_ARG for n < 0 or max_norm not > 0. Errors but the NULL ctx
 * are recorded in ctx. */
FC_API fc_status fc_clip_grad_norm(fc_ctx *ctx, fc_tensor *const *params, int n, double max_norm,
                                   double *total_norm);

/* ---- learning-rate schedules --------------------------------------------------------- */
/* Closed-form schedules: fc_lr_at(s, k) is the learning rate of step k
 * (0-based: the k-th optimizer step; a negative k counts as 0), to pass to
 * fc_optim_set_lr before that step. Each kind follows
 * torch.optim.lr_scheduler, with torch's step k being the lr after k calls
 * of sched.step():
 *   FC_LR_CONSTANT     base_lr
 *   FC_LR_STEP         StepLR: base_lr * gamma^floor(k/step_size)
 *   FC_LR_MULTISTEP    MultiStepLR: base_lr * gamma^(milestones <= k)
 *   FC_LR_EXPONENTIAL  ExponentialLR: base_lr * gamma^k
 *   FC_LR_COSINE       CosineAnnealingLR (T_max = total_steps - warmup_steps,
 *                      eta_min = min_lr); min_lr from then on (torch's
 *                      cosine would climb again)
 *   FC_LR_ONECYCLE     OneCycleLR with anneal_strategy "cos", three_phase
 *                      off, T = total_steps - warmup_steps: max_lr =
 *                      base_lr, initial = base_lr/div_factor, final =
 *                      initial/final_div_factor; e1 = pct_start*T - 1; k <=
 *                      e1 anneals initial -> max over [0, e1], then max ->
 *                      final over [e1, T-1] (anneal(a, b, x) = b + (a-b)/2 *
 *                      (cos(pi*x) + 1), torch's arithmetic); final from
 *                      T - 1 on (torch raises past T). Momentum is not
 *                      cycled (cycle_momentum=False).
 * Warm-up (every kind): for k < warmup_steps the lr is start * (k + 1) /
 * warmup_steps, start being base_lr (for one-cycle base_lr/div_factor, its
 * first lr, as torch's SequentialLR gives); then the kind runs with
 * k - warmup_steps in place of k. This is torch's SequentialLR([LinearLR(start_factor =
 * 1/w, total_iters = w - 1), S], milestones = [w]) (the schedules run one
 * after the other), not ChainedScheduler (which would multiply them); S
 * takes total_steps - warmup_steps as its length, so total_steps counts
 * the warm-up, while step_size and milestones count from its end.
 * Zero fields take torch's defaults: gamma 0.1 (STEP and MULTISTEP; for
 * EXPONENTIAL it is required), pct_start 0.3, div_factor 25,
 * final_div_factor 1e4. Sequences match torch's to 1e-12 relative over
 * 300 steps (tests/ag/test_lr_sched.c). */
typedef enum fc_lr_kind {
    FC_LR_CONSTANT,
    FC_LR_STEP,
    FC_LR_COSINE,
    FC_LR_MULTISTEP,
    FC_LR_EXPONENTIAL,
    FC_LR_ONECYCLE,
    FC_LR_KIND_COUNT
} fc_lr_kind;
/* A closed-form schedule: its kind and the fields the kinds above read. */
typedef struct fc_lr_schedule {
    fc_lr_kind kind;
    double base_lr;       /* max_lr for FC_LR_ONECYCLE */
    int64_t warmup_steps; /* linear warm-up over these steps (all kinds) */
    int64_t step_size;    /* FC_LR_STEP: multiply by gamma every step_size steps */
    double gamma;         /* FC_LR_STEP, FC_LR_MULTISTEP, FC_LR_EXPONENTIAL */
    int64_t total_steps;  /* FC_LR_COSINE, FC_LR_ONECYCLE: the end, warm-up included */
    double min_lr;        /* FC_LR_COSINE */
    /* FC_LR_MULTISTEP: n_milestones steps (strictly increasing, >= 0,
     * counted from the end of the warm-up) at each of which the lr is
     * multiplied by gamma; borrowed, read by every fc_lr_at */
    const int64_t *milestones;
    int n_milestones;
    /* FC_LR_ONECYCLE */
    double pct_start, div_factor, final_div_factor;
} fc_lr_schedule;
/* The learning rate at step (see above); 0 for a NULL s. Defined for every
 * field value (no integer overflow, no read past a NULL milestones):
 * warmup_steps <= 0 means none; STEP with step_size <= 0 stays at
 * base_lr; COSINE and ONECYCLE with total_steps <= the warm-up give their
 * final lr after it; fields fc_lr_schedule_check refuses give a value, not
 * necessarily a useful one. */
FC_API double fc_lr_at(const fc_lr_schedule *s, int64_t step);
/* Checks a schedule before use: FC_OK, FC_ERR_NULL_ARG for a NULL ctx (not
 * recorded) or s, FC_ERR_INVALID_ARG naming the field and its value for an
 * unknown kind, base_lr not finite and >= 0, warmup_steps < 0, and for the
 * kind that reads it: step_size <= 0, gamma (after its default) not finite
 * and > 0, total_steps <= warmup_steps, min_lr not finite and >= 0,
 * n_milestones < 0, NULL milestones with n_milestones > 0, a milestone < 0
 * or not above the one before, pct_start outside (0, 1], pct_start *
 * (total_steps - warmup_steps) == 1 (a first phase of length 0: torch
 * divides by zero), div_factor or final_div_factor not finite and > 0. */
FC_API fc_status fc_lr_schedule_check(fc_ctx *ctx, const fc_lr_schedule *s);

/* Reduce-on-plateau: torch's ReduceLROnPlateau with mode "min" and
 * threshold_mode "rel", for one learning rate. After each metric m (a
 * validation loss, say):
 *   m < best * (1 - threshold): best = m, bad_steps = 0; else bad_steps++
 *   (a NaN metric is never better, as in torch);
 *   in cooldown (cooldown_left > 0): cooldown_left--, bad_steps = 0;
 *   bad_steps > patience: new = max(lr * factor, min_lr), taken when
 *   lr - new > eps; cooldown_left = cooldown, bad_steps = 0.
 * Zero factor and eps take torch's defaults (0.1, 1e-8); patience,
 * threshold, cooldown and min_lr are taken as given (0 is meaningful for
 * each), so torch's defaults for them (10, 1e-4, 0, 0) come from
 * fc_lr_plateau_opts_default(). factor must be in (0, 1), patience and
 * cooldown >= 0, threshold in [0, 1), min_lr and eps finite and >= 0.
 * To warm up first, use fc_lr_at of an FC_LR_CONSTANT schedule with
 * warmup_steps for those steps (torch's SequentialLR takes no plateau). */
typedef struct fc_lr_plateau_opts {
    double factor;
    int64_t patience;
    double threshold;
    int64_t cooldown;
    double min_lr;
    double eps;
} fc_lr_plateau_opts;
/* torch's defaults: factor 0.1, patience 10, threshold 1e-4, cooldown 0,
 * min_lr 0, eps 1e-8. */
FC_API fc_lr_plateau_opts fc_lr_plateau_opts_default(void);
/* The whole state, a plain struct: save it by its fields (or
 * fc_lr_plateau_to_text) and restore it by assigning them back. opts
 * hold the defaults filled in. */
typedef struct fc_lr_plateau {
    fc_lr_plateau_opts opts;
    double lr;             /* the current learning rate */
    double best;           /* the best metric so far; +inf before the first */
    int64_t bad_steps;     /* metrics since the best (torch's num_bad_epochs) */
    int64_t cooldown_left; /* metrics to go before bad ones count again */
} fc_lr_plateau;
/* Starts a plateau state at learning rate lr (finite, >= 0) with opts
 * (NULL: fc_lr_plateau_opts_default()). FC_OK; FC_ERR_NULL_ARG for a NULL
 * ctx (not recorded) or p; FC_ERR_INVALID_ARG naming the option and its
 * value (p is left unchanged). */
FC_API fc_status fc_lr_plateau_init(fc_ctx *ctx, fc_lr_plateau *p, double lr,
                                    const fc_lr_plateau_opts *opts);
/* Takes one metric and updates p (p->lr is then the lr of the next
 * steps). FC_OK; FC_ERR_NULL_ARG as above; FC_ERR_INVALID_ARG for a state
 * no sequence of steps makes (options out of range, lr not finite and >=
 * 0, best NaN, negative counts: a corrupted restore), p unchanged. */
FC_API fc_status fc_lr_plateau_step(fc_ctx *ctx, fc_lr_plateau *p, double metric);
/* The state as one line of text, every number exact (%.17g), for a
 * checkpoint's metadata value (fc_checkpoint_save's meta_values); the
 * number of characters it needs (without the NUL), as snprintf: dst holds
 * it all when that is < cap. A NULL p gives 0 and writes nothing. */
FC_API int fc_lr_plateau_to_text(char *dst, size_t cap, const fc_lr_plateau *p);
/* Restores a state from fc_lr_plateau_to_text's line. FC_OK;
 * FC_ERR_NULL_ARG as above; FC_ERR_FORMAT naming the field for text that is
 * not such a line; FC_ERR_INVALID_ARG for a line whose state
 * fc_lr_plateau_step would refuse. p is unchanged on error. */
FC_API fc_status fc_lr_plateau_from_text(fc_ctx *ctx, fc_lr_plateau *p, const char *text);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_OPTIM_H */
