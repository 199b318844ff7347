/* SPDX-License-Identifier: MIT */
/* checkpoint_model.h - the model that fuzz_checkpoint.c loads into and
 * gen_checkpoint_seeds.c saves from: two parameters ("w" f32 [4, 6] and
 * "b" bf16 [6]) and an optimizer over them, so the seeds are checkpoints
 * the target's destinations accept and mutations reach every check of the
 * loader. Header-only (static functions) so both programs share it. */
#ifndef FUCINA_FUZZ_CHECKPOINT_MODEL_H
#define FUCINA_FUZZ_CHECKPOINT_MODEL_H

#include <math.h>
#include <stdint.h>

#include "fucina.h"

static const char *const ckm_names[2] = {"w", "b"};

typedef struct ckm {
    fc_tensor *p[2];
    fc_optim *opt;
} ckm;

/* Parameters with fixed values and an optimizer of the given options
 * (NULL: none). Returns 0, or -1 when the context failed. */
static int ckm_new(fc_ctx *ctx, ckm *m, const fc_optim_opts *o) {
    float w[24];
    uint16_t b[6];
    for (int i = 0; i < 24; i++)
        w[i] = (float)sin(i * 0.7);
    for (int i = 0; i < 6; i++)
        b[i] = fc_f32_to_bf16((float)i / 7);
    m->p[0] = fc_param_from_data(ctx, FC_F32, (const int64_t[]){4, 6}, 2, w);
    m->p[1] = fc_param_from_data(ctx, FC_BF16, (const int64_t[]){6}, 1, b);
    m->opt = o && m->p[0] && m->p[1] ? fc_optim_new(ctx, o, m->p, 2) : NULL;
    return m->p[0] && m->p[1] && (!o || m->opt) ? 0 : -1;
}

static void ckm_free(ckm *m) {
    fc_optim_free(m->opt);
    fc_release(m->p[0]);
    fc_release(m->p[1]);
}

/* One optimizer step on the gradient g = 0.5 p - 0.3 + 0.1 noise (noise
 * from the context RNG, so the RNG state moves as in training). */
static int ckm_step(fc_ctx *ctx, ckm *m) {
    int ok = 1;
    fc_scope_begin(ctx);
    fc_optim_zero_grad(m->opt);
    for (int k = 0; k < 2 && ok; k++) {
        fc_tensor *p = m->p[k];
        fc_tensor *pf = fc_to(ctx, p, FC_F32);
        fc_tensor *noise = fc_randn(ctx, FC_F32, fc_tensor_shape(p), fc_tensor_rank(p));
        fc_tensor *g = fc_empty(ctx, FC_F32, fc_tensor_shape(p), fc_tensor_rank(p));
        if (!pf || !noise || !g) {
            ok = 0;
            break;
        }
        const float *pp = fc_tensor_data(pf), *nn = fc_tensor_data(noise);
        float *gg = fc_tensor_data_mut(g);
        for (int64_t i = 0; i < fc_tensor_numel(p); i++)
            gg[i] = 0.5f * pp[i] - 0.3f + 0.1f * nn[i];
        ok = fc_backward_with(ctx, p, g, false) == FC_OK;
    }
    if (ok) ok = fc_optim_step(m->opt) == FC_OK;
    fc_scope_end(ctx);
    return ok ? 0 : -1;
}

#endif /* FUCINA_FUZZ_CHECKPOINT_MODEL_H */
