/* SPDX-License-Identifier: MIT */
/* fucina/checkpoint.h - resumable training checkpoints.
 *
 * A checkpoint is one safetensors file (written atomically: the previous
 * file survives any failure) holding
 *   - each parameter as tensor "param.<name>" in its own dtype,
 *   - the optimizer's state tensors as "optim.<i>.<state>" (f32, or f64
 *     for an f64 parameter; <state> is exp_avg, exp_avg_sq, max_exp_avg_sq
 *     or momentum_buffer),
 *   - in __metadata__: "fucina.checkpoint" (the format version, 2), the
 *     optimizer kind, step count (the schedule position), every group's
 *     hyper-parameters printed exactly (%.17g), each parameter's group and
 *     which of its states existed ("optim.param.<i>.states", a bit mask in
 *     the order above), the context RNG state (seed, offset, plain decimal
 *     uint64), and any caller key/value pairs (keys must not start with
 *     "fucina.", "optim." or "rng.").
 * Loading the same names into a fresh process restores parameters,
 * optimizer and RNG bit for bit, so training resumes exactly. Caller
 * metadata can be read back with fc_safetensors_open/fc_safetensors_meta_find.
 *
 * A checkpoint restores exactly the optimizer state it describes, or is
 * refused. A state the file says did not exist yet (e.g. every moment of a
 * checkpoint saved before the first step) is reset to zeros in the loading
 * optimizer, which is what a fresh optimizer would create, so the next step
 * equals a fresh resume bit for bit. A state the file says existed but does
 * not hold (a stripped or partial file), or holds without saying so, is
 * FC_ERR_FORMAT naming the tensor. Version 1 files (no state lists) are
 * read as holding what they hold, except that after steps > 0 a file with
 * no state at all (Adam, or SGD with momentum) or half an Adam pair
 * (exp_avg without exp_avg_sq or the reverse) is refused the same way.
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
 * and the RNG as they were.
 * Further FC_ERR_FORMAT cases, each naming the key and its value: a
 * metadata number that is missing, not a number, not finite, not an
 * integer where one is expected, or out of range (checked before any
 * conversion); an RNG seed or offset, or the step count, that is not a
 * plain decimal integer (digits only: no sign, space, point or exponent)
 * within uint64 (int64 for the step count); a parameter's group that
 * differs from the optimizer's; an unknown format version; group options
 * the optimizer refuses (fc_optim_set_group_opts's reason is quoted, e.g.
 * a beta outside [0, 1)). FC_ERR_STATE
 * for the one state the optimizer API cannot reset: an SGD momentum buffer
 * the loading optimizer already has, for a parameter the file (after
 * steps > 0) has none for; load into a fresh optimizer instead.
 * The file is read into memory with read(2), never mapped, so another
 * program truncating it during the load gives FC_ERR_IO ("file shrank
 * while reading"), not SIGBUS; the whole file is held in memory meanwhile
 * (allocated through ctx's allocator). */
FC_API fc_status fc_checkpoint_load(fc_ctx *ctx, const char *path, const char *const *names,
                                    fc_tensor *const *params, int n, fc_optim *opt);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_CHECKPOINT_H */
