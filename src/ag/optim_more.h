/* SPDX-License-Identifier: MIT */
/* optim_more.h - private: the optimizers beyond SGD and Adam (RMSprop,
 * Adagrad, Lion) that optim.c dispatches to, and the per-kind facts it
 * needs (state names, which state a step uses, defaults, validation). */
#ifndef FUCINA_AG_OPTIM_MORE_H
#define FUCINA_AG_OPTIM_MORE_H

#include "ag/tape.h"
#include "fucina/optim.h"

/* State slots of a parameter: 0 is optim.c's m, 1 its v, 2 its vmax. */
enum { FC__OPTIM_SLOTS = 3 };

static inline float fc__optim_load(fc_dtype dt, const void *p, int64_t i) {
    if (dt == FC_F32) return ((const float *)p)[i];
    if (dt == FC_BF16) return fc_bf16_to_f32(((const uint16_t *)p)[i]);
    return fc_f16_to_f32(((const uint16_t *)p)[i]);
}
static inline void fc__optim_store(fc_dtype dt, void *p, int64_t i, float v) {
    if (dt == FC_F32)
        ((float *)p)[i] = v;
    else if (dt == FC_BF16)
        ((uint16_t *)p)[i] = fc_f32_to_bf16(v);
    else
        ((uint16_t *)p)[i] = fc_f32_to_f16(v);
}

/* Name of state slot k of this kind ("exp_avg", ...), NULL where it has none. */
const char *fc__optim_state_name(fc_optim_kind kind, int slot);
/* Whether a step of this kind with options o uses state slot k. */
bool fc__optim_uses(fc_optim_kind kind, const fc_optim_opts *o, int slot);
/* The value a fresh state slot k holds (Adagrad's sum starts at
 * initial_accumulator_value; everything else at 0). */
double fc__optim_state_init(fc_optim_kind kind, const fc_optim_opts *o, int slot);
/* Fills the zero fields that select a default for this kind. */
void fc__optim_defaults(fc_optim_opts *o);
/* Checks the options only the kinds of optim_more.c read; fn names the
 * public function for the message. */
fc_status fc__optim_check_more(fc_ctx *ctx, const char *fn, const fc_optim_opts *o);
/* One update (step t >= 1) of n elements of a parameter of dtype pdt of a
 * kind of optim_more.c: p its data, g its gradient (f64 for an f64
 * parameter, else f32), s[k] state slot k (NULL where unused). Cannot fail. */
void fc__optim_update_more(fc_ctx *ctx, fc_optim_kind kind, const fc_optim_opts *o, fc_dtype pdt,
                           void *p, const void *g, void *const *s, int64_t n, int64_t t);

#endif /* FUCINA_AG_OPTIM_MORE_H */
