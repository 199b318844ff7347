/* SPDX-License-Identifier: MIT */
/* exec/kernels/loss.h - cross_entropy (fused log-softmax + NLL) and
 * mse_loss, the forward and backward kernels (loss.c). They record
 * nothing: the ops and their rules are in src/ops/loss.c. */
#ifndef FUCINA_EXEC_KERNELS_LOSS_H
#define FUCINA_EXEC_KERNELS_LOSS_H

#include "exec/tensor.h"

/* How cross_entropy reduces and smooths. */
typedef struct fc__ce_params {
    bool per_row;    /* no reduction: one loss per row */
    bool mean;       /* else: the mean over the rows not ignored (false: the sum) */
    bool use_ignore; /* rows whose target is ignore_index add 0 and leave the mean */
    int64_t ignore_index;
    double smoothing; /* label smoothing eps in [0, 1] */
} fc__ce_params;

/* cross_entropy of logits [N, C] (or [C]: N = 1; a float dtype, any
 * layout) against targets, i64 [N] contiguous, each in [0, C) or
 * ignore_index when p->use_ignore (the caller checks all that). Returns the
 * loss in the logits' dtype, [N] when p->per_row, else [1]; a mean over no
 * row is NaN. Unless per_row, *count is the number of rows not ignored
 * (per_row: 0). logits_c and lse, when not NULL, receive new references to
 * what the backward needs: the logits made contiguous and the per-row
 * log-sum-exp [N] in the compute dtype (f64 for f64, f32 otherwise), NULL
 * on failure. NULL with the error recorded on failure. */
fc_tensor *fc__cross_entropy_forward(fc_ctx *ctx, fc_tensor *logits, fc_tensor *targets,
                                     const fc__ce_params *p, int64_t *count, fc_tensor **logits_c,
                                     fc_tensor **lse);
/* cross_entropy backward: dx = scale_i * (softmax(x_i) - eps / C - (1 - eps)
 * onehot(t_i)) with scale_i = g (sum), g * mean_scale (mean), g_i (per
 * row) and 0 for ignored rows. logits [N, C] (contiguous), lse [N] and
 * targets i64 [N] as the forward gave them; g the loss gradient, contiguous
 * in the compute dtype ([N] when per_row, else [1]). dx is a new tensor of
 * g's dtype and the logits' shape; NULL with the error recorded. */
fc_tensor *fc__cross_entropy_backward(fc_ctx *ctx, fc_tensor *logits, fc_tensor *lse,
                                      fc_tensor *targets, fc_tensor *g, const fc__ce_params *p,
                                      double mean_scale);

/* mse_loss of a and b (one float dtype, any layouts, broadcasting to
 * shape[rank], the caller checks): (a - b)^2 computed in the compute dtype
 * over the broadcast shape; reduce false: returned as is in a's dtype
 * (shape), true: summed by the reduction engine (fixed chunks), times
 * scale, as [1] in a's dtype. NULL with the error recorded on failure. */
fc_tensor *fc__mse_forward(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, const int64_t *shape, int rank,
                           bool reduce, double scale);
/* mse_loss backward: sign * 2 * scale * g * (a - b) over the broadcast
 * shape; a and b in g's dtype (any layout), g [1]-shaped (seen with stride
 * 0) or of the broadcast shape. A new tensor of g's dtype and shape
 * shape[rank]; NULL with the error recorded. */
fc_tensor *fc__mse_backward(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, fc_tensor *g,
                            const int64_t *shape, int rank, double scale, double sign);

#endif /* FUCINA_EXEC_KERNELS_LOSS_H */
