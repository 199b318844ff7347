/* fucina/checkpoint.h - resumable training checkpoints.
 *
 * A checkpoint is one safetensors file (written atomically: the previous
 * file survives any failure) holding
 *   - each parameter as tensor "param.<name>" in its own dtype,
 *   - the optimizer's state tensors as "optim.<i>.<state>" (f32; <state> is
 *     exp_avg, exp_avg_sq, max_exp_avg_sq or momentum_buffer),
 *   - in __metadata__: the optimizer kind, step count (the schedule
 *     position), every group's hyper-parameters printed exactly (%.17g),
 *     each parameter's group, the context RNG state (seed, offset), and any
 *     caller key/value pairs (keys must not start with "fucina.", "optim."
 *     or "rng.").
 * Loading the same names into a fresh process restores parameters,
 * optimizer and RNG bit for bit, so training resumes exactly. Caller
 * metadata can be read back with fc_safetensors_open/fc_safetensors_meta_get.
 */
#ifndef FUCINA_CHECKPOINT_H
#define FUCINA_CHECKPOINT_H

#include "fucina/optim.h"
#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Saves n named parameters, the optimizer (NULL allowed) and ctx's RNG.
 * Names are unique, non-empty, at most 200 bytes. Errors (also recorded in
 * ctx): FC_ERR_NULL_ARG, FC_ERR_INVALID_ARG (names, reserved keys),
 * FC_ERR_DTYPE (a block-quantized parameter), FC_ERR_OOM, FC_ERR_IO (with
 * the path and the system's reason; the previous file is intact). */
FC_API fc_status fc_checkpoint_save(fc_ctx *ctx, const char *path, const char *const *names,
                                    fc_tensor *const *params, int n, const fc_optim *opt,
                                    const char *const *meta_keys, const char *const *meta_values,
                                    int n_meta);
/* Loads into existing parameters (same names, dtypes and shapes:
 * FC_ERR_INDEX for a missing name, FC_ERR_DTYPE / FC_ERR_SHAPE_MISMATCH
 * naming the parameter), the optimizer (NULL allowed: its kind and
 * parameter count must match the file's, FC_ERR_FORMAT otherwise) and
 * ctx's RNG. Parameter writes bump their generations. Everything is
 * checked before anything is written: a failed load (FC_ERR_READ_ONLY or
 * FC_ERR_UNSUPPORTED_VIEW for a destination that cannot be written in
 * place, FC_ERR_IO, FC_ERR_OOM, ...) leaves the parameters, the optimizer
 * and the RNG as they were. */
FC_API fc_status fc_checkpoint_load(fc_ctx *ctx, const char *path, const char *const *names,
                                    fc_tensor *const *params, int n, fc_optim *opt);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_CHECKPOINT_H */
