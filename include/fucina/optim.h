/* fucina/optim.h - optimizers, gradient clipping, learning-rate schedules.
 *
 * An optimizer updates its parameters from their gradients (fc_grad) in one
 * fused pass per parameter. Parameters are leaves of dtype f32, f16 or bf16;
 * the update is computed in f32 (16-bit parameters are read, updated and
 * rounded back once). A step is a mutation: it bumps each parameter's
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

typedef enum fc_optim_kind { FC_OPTIM_SGD, FC_OPTIM_ADAM, FC_OPTIM_ADAMW, FC_OPTIM_KIND_COUNT } fc_optim_kind;

/* Zero beta1/beta2/eps select PyTorch's defaults (0.9, 0.999, 1e-8);
 * weight_decay 0 means none. lr must be > 0. */
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
} fc_optim_opts;

typedef struct fc_optim fc_optim;

/* Creates an optimizer over n parameters (retained; one parameter group
 * with opts). NULL on error (recorded in ctx): FC_ERR_INVALID_ARG for bad
 * hyper-parameters (named in the message) or a parameter given twice,
 * FC_ERR_DTYPE for a parameter that cannot carry a gradient. */
FC_API fc_optim *fc_optim_new(fc_ctx *ctx, const fc_optim_opts *opts, fc_tensor *const *params,
                              int n);
/* Adds a parameter group with its own options (same kind as the first).
 * Errors as fc_optim_new; a parameter already in any group is
 * FC_ERR_INVALID_ARG (it would be updated twice per step). */
FC_API fc_status fc_optim_add_group(fc_optim *opt, const fc_optim_opts *opts,
                                    fc_tensor *const *params, int n);
/* Releases the parameters and the state. NULL is a no-op. */
FC_API void fc_optim_free(fc_optim *opt);
/* One update of every parameter that has a gradient. */
FC_API fc_status fc_optim_step(fc_optim *opt);
/* Drops every parameter's gradient. */
FC_API void fc_optim_zero_grad(fc_optim *opt);
/* Learning rate of every group (for schedules), or of one group. */
FC_API fc_status fc_optim_set_lr(fc_optim *opt, double lr);
FC_API fc_status fc_optim_set_group_lr(fc_optim *opt, int group, double lr);
FC_API double fc_optim_get_lr(const fc_optim *opt, int group);

/* ---- state, for checkpoints ---------------------------------------------------- */
FC_API int fc_optim_num_params(const fc_optim *opt);
FC_API int fc_optim_num_groups(const fc_optim *opt);
/* The i-th parameter (borrowed). */
FC_API fc_tensor *fc_optim_param(const fc_optim *opt, int i);
/* Group options (copy), and which group parameter i belongs to. */
FC_API fc_status fc_optim_group_opts(const fc_optim *opt, int group, fc_optim_opts *out);
FC_API int fc_optim_param_group(const fc_optim *opt, int i);
/* Replaces a group's options (same kind; validated like fc_optim_new). */
FC_API fc_status fc_optim_set_group_opts(fc_optim *opt, int group, const fc_optim_opts *opts);
/* Number of steps taken (Adam's t). */
FC_API int64_t fc_optim_step_count(const fc_optim *opt);
FC_API fc_status fc_optim_set_step_count(fc_optim *opt, int64_t steps);
/* State tensor of parameter i: "exp_avg", "exp_avg_sq", "max_exp_avg_sq"
 * (Adam/AdamW) or "momentum_buffer" (SGD), f32, the parameter's shape.
 * Borrowed; created (zeros) on demand with create = true, else NULL when
 * it does not exist yet. Write it with fc_copy_ to restore a checkpoint.
 * NULL plus an error in the context for a NULL name (FC_ERR_NULL_ARG), a
 * name this kind has no state for (FC_ERR_INVALID_ARG), or i out of range
 * (FC_ERR_INDEX). */
FC_API fc_tensor *fc_optim_state(fc_optim *opt, int i, const char *name, bool create);

/* ---- clipping -------------------------------------------------------------------- */
/* Scales all gradients so their global L2 norm is at most max_norm
 * (like torch.nn.utils.clip_grad_norm_). total_norm (NULL allowed) gets
 * the norm before clipping. */
FC_API fc_status fc_clip_grad_norm(fc_ctx *ctx, fc_tensor *const *params, int n, double max_norm,
                                   double *total_norm);

/* ---- learning-rate schedules --------------------------------------------------------- */
typedef enum fc_lr_kind { FC_LR_CONSTANT, FC_LR_STEP, FC_LR_COSINE } fc_lr_kind;
typedef struct fc_lr_schedule {
    fc_lr_kind kind;
    double base_lr;
    int64_t warmup_steps; /* linear warm-up from 0 over these steps (all kinds) */
    int64_t step_size;    /* FC_LR_STEP: multiply by gamma every step_size steps */
    double gamma;
    int64_t total_steps; /* FC_LR_COSINE: decay to min_lr at total_steps */
    double min_lr;
} fc_lr_schedule;
/* Learning rate at step (0-based). */
FC_API double fc_lr_at(const fc_lr_schedule *s, int64_t step);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_OPTIM_H */
