/* checkpoint.h - save and restore a training run, for --resume.
 *
 * fucina's own checkpoint API (fc_checkpoint_save / fc_checkpoint_load in
 * fucina/io.h) was not on main when these examples were written, so the
 * trainers use this small format of their own, built only on the public
 * state accessors: the parameters, the optimizer's moments and step count
 * (fc_optim_state, fc_optim_step_count) and the context RNG
 * (fc_ctx_rng_get), plus named integers the trainer chooses (its step, its
 * data-order PRNG, the model sizes it checks on load).
 *
 * File layout (all integers little-endian, as written by this machine;
 * a byte-order mark refuses files from the other endianness):
 *
 *   magic     8 bytes  "FCEXCKPT"
 *   bom       u32      0x01020304
 *   version   u32      1
 *   count     u32      number of records
 *   records   count times:
 *     name_len u16, name bytes (no NUL)
 *     kind     u8      1 = u64 value, 2 = f32 array
 *     u64 value                              (kind 1)
 *     rank u8, dims i64[rank], f32 data      (kind 2)
 *   checksum  u64      FNV-1a of every byte before it
 *
 * Record names: "param.<name>", "optim.<name>.exp_avg", ".exp_avg_sq",
 * "optim.<name>.max_exp_avg_sq" (AMSGrad), "optim.<name>.momentum_buffer"
 * (SGD), "optim.steps", "rng.seed", "rng.offset", and "user.<name>" for
 * the caller's integers. Writing is atomic (a temporary file renamed over
 * the target), so an interrupted save leaves the previous checkpoint. */
#ifndef EX_CHECKPOINT_H
#define EX_CHECKPOINT_H

#include <stdint.h>

#include <fucina.h>

/* A named integer the trainer stores (save) or gets back (load). */
typedef struct ex_ckpt_value {
    const char *name;
    uint64_t value;
} ex_ckpt_value;

/* Writes the parameters of opt (named by names[i], one per
 * fc_optim_param), its state and step count, ctx's RNG position and the
 * values to path. FC_OK, or FC_ERR_IO / FC_ERR_INVALID_ARG with a message
 * on stderr naming the path and the reason. */
fc_status ex_ckpt_save(const char *path, fc_ctx *ctx, fc_optim *opt, const char *const *names,
                       const ex_ckpt_value *values, int nvalues);

/* Restores what ex_ckpt_save wrote into the same model (every parameter's
 * shape must match) and fills values[i].value from the file. FC_ERR_IO
 * (cannot read), FC_ERR_FORMAT (bad magic, checksum, truncated, a missing
 * record, a shape that differs), each with a message on stderr. On error
 * the parameters may be partly overwritten: start afresh. */
fc_status ex_ckpt_load(const char *path, fc_ctx *ctx, fc_optim *opt, const char *const *names,
                       ex_ckpt_value *values, int nvalues);

#endif /* EX_CHECKPOINT_H */
