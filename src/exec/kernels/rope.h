/* SPDX-License-Identifier: MIT */
/* exec/kernels/rope.h - the rotary position embedding kernel (rope.c),
 * forward and its inverse (the backward), for src/ops/rope.c. Records
 * nothing on the tape. */
#ifndef FUCINA_EXEC_KERNELS_ROPE_H
#define FUCINA_EXEC_KERNELS_ROPE_H

#include "exec/tensor.h"

/* The validated parameters (the op resolved the defaults). */
typedef struct fc__rope_params {
    bool neox;         /* pairs (i, i + n_dims/2), else (2i, 2i+1) */
    int64_t n_dims;    /* even, 2 <= n_dims <= D */
    double freq_base;  /* > 0 */
    double freq_scale; /* >= 0 */
    int64_t pos_offset;
    bool inverse; /* rotate by -angle: the adjoint, for the backward */
} fc__rope_params;

/* x [..., T, H, D] (rank >= 3, float dtype, any layout) rotated into a new
 * contiguous tensor of x's shape and dtype (f16/bf16 computed in f32).
 * NULL with the error recorded (naming op) on failure. */
fc_tensor *fc__rope(fc_ctx *ctx, const char *op, fc_tensor *x, const fc__rope_params *p);

#endif /* FUCINA_EXEC_KERNELS_ROPE_H */
