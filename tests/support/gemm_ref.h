/* SPDX-License-Identifier: MIT */
/* gemm_ref.h - the double-precision reference the matmul tests compare
 * every provider against, and the error bound they use.
 *
 * The bound is the classical one for a dot product of length K summed in
 * any order with unit roundoff u (Higham, "Accuracy and Stability of
 * Numerical Algorithms", section 3.1):
 *     |fl(sum a_p b_p) - sum a_p b_p| <= gamma_K * sum |a_p b_p|,
 *     gamma_K = K u / (1 - K u),
 * where u is the ACCUMULATOR's roundoff (2^-24 for f16/bf16/f32, 2^-53 for
 * f64). We use gamma_{K+2}: one more term for an accumulated C, one for the
 * final add of the blocked partial sums. A 16-bit output then rounds once
 * more, adding u_out * |result| (u_out = 2^-11 for f16, 2^-8 for bf16), plus
 * half the f16 subnormal spacing (2^-25) where the result lands there.
 * Inputs are generated in the operand dtype, so the reference reads them
 * exactly. A provider that rounded its accumulator to 16 bits, or lost a
 * term, exceeds this bound by orders of magnitude for K >= 17. */
#ifndef FUCINA_TEST_GEMM_REF_H
#define FUCINA_TEST_GEMM_REF_H

#include <stdbool.h>
#include <stdint.h>

#include "fucina/dtype.h"

/* Element idx of an array of dtype (f16, bf16, f32, f64) as double. */
double fct_load(fc_dtype dt, const void *base, int64_t idx);
/* Rounds v to dtype (through f32 for 16-bit types) and stores it. */
void fct_store(fc_dtype dt, void *base, int64_t idx, double v);

/* A deterministic generator (splitmix64) for test data. */
typedef struct fct_rng {
    uint64_t s;
} fct_rng;
uint64_t fct_rng_next(fct_rng *r);
/* Uniform in [lo, hi). */
double fct_rng_uniform(fct_rng *r, double lo, double hi);
/* Uniform integer in [0, n). */
int64_t fct_rng_below(fct_rng *r, int64_t n);

/* One strided product in element units, the fc__gemm addressing:
 * A(i,p) = a[i*a_rs + p*a_cs], B(p,j) = b[p*b_rs + j*b_cs], C(i,j) = c[i*c_rs + j*c_cs]. */
typedef struct fct_mat {
    fc_dtype dtype;
    const void *data;
    int64_t rs, cs;
} fct_mat;

/* ref[i*n + j] = (c0 ? C0(i,j) : 0) + sum_p A(i,p) B(p,j) in double, and
 * mag[i*n + j] = (c0 ? |C0(i,j)| : 0) + sum_p |A(i,p) B(p,j)|. c0 may be NULL. */
void fct_gemm_ref(int64_t m, int64_t n, int64_t k, const fct_mat *a, const fct_mat *b,
                  const fct_mat *c0, double *ref, double *mag);

/* The allowed |got - ref| for one element (see the comment at the top). */
double fct_gemm_tol(fc_dtype dt, int64_t k, double ref, double mag);

#endif /* FUCINA_TEST_GEMM_REF_H */
