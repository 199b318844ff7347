/* SPDX-License-Identifier: MIT */
/* kquant.h - the scale searches shared by the k-quants and by the weighted
 * (imatrix) paths of the legacy formats (kquant_search.c).
 *
 * Each is a transcription of the ggml helper of the same name, operation for
 * operation in f32, because their choices decide the stored bytes: a
 * different summation order or rounding moves a code or a scale and breaks
 * byte equality with ggml. L receives codes already offset to be
 * non-negative; the return value is the block scale. */
#ifndef FUCINA_CORE_QUANT_KQUANT_H
#define FUCINA_CORE_QUANT_KQUANT_H

#include <stdbool.h>
#include <stdint.h>

/* Below this absmax a group counts as all zero (ggml's GROUP_MAX_EPS). */
#define FC__KQ_GROUP_MAX_EPS 1e-15f

/* Symmetric codes in [0, 2*nmax): iscale = -nmax/max, then for rmse_type != 0
 * a least-squares rescale and a search over 18 nearby iscales, weighting
 * each value by qw[i] (or, with qw NULL, x^2 for rmse_type 1, 1 for 2, |x|
 * for 3, sqrt|x| otherwise). A negative rmse_type returns after the first
 * least-squares step. */
float fc__kq_make_qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type,
                            const float *qw);

/* q3_K's variant: x^2 weights, then up to five passes of coordinate descent
 * on single codes (do_rmse), or plain rounding. */
float fc__kq_make_q3_quants(int n, int nmax, const float *x, int8_t *L, bool do_rmse);

/* Asymmetric codes in [0, nmax] with a min (x ~ scale * L - the_min): a
 * grid search over nstep+1 iscales around nmax/(max-min), each followed by
 * a weighted least-squares fit of scale and min, keeping the lowest
 * weighted error (|diff| when use_mad, diff^2 otherwise). *the_min >= 0.
 * qkx2 requires weights; qkx3 takes NULL as x^2 weights and treats
 * max <= min (not only max == min) as a constant group. */
float fc__kq_make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                              bool use_mad);
float fc__kq_make_qkx3_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                              bool use_mad);

/* Non-negative codes in [0, nmax] for non-negative x (the sub-block scales
 * of a super-block) under weights quant_weights: a search over 9 iscales,
 * then up to five passes of coordinate descent. */
float fc__kq_make_qp_quants(int n, int nmax, const float *x, uint8_t *L,
                            const float *quant_weights);

#endif /* FUCINA_CORE_QUANT_KQUANT_H */
