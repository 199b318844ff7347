/* SPDX-License-Identifier: MIT */
/* exec/kernels/reduce.h - the reduction engine (reduce.c) behind fc_sum,
 * fc_mean, ... (their public ops and backward rules are in src/ops/
 * reduce.c), and the tape-free backward kernels those rules call
 * (reduce_backward.c). Other families (the losses) reduce through
 * fc__red_run too. Nothing here records on the tape.
 *
 * One engine reduces any strided tensor over any set of axes: the kept and
 * the reduced axes are coalesced separately; when the innermost kept axis
 * is tighter in memory than every reduced axis the engine walks columns
 * (one accumulator per kept lane, the reduced axes outside), otherwise rows
 * (one accumulator per output, runs along the innermost reduced axis).
 * Long reductions are cut into fixed chunks of the reduced index space
 * whose partial states are merged in chunk order, so the result depends
 * on the shape and layout only, never on the thread count. Accumulation is
 * wide: f16/bf16/f32 inputs sum in f32 lanes flushed into a double every
 * 512 elements, f64 in f64, integers and bool in 64-bit wrapping integers. */
#ifndef FUCINA_EXEC_KERNELS_REDUCE_H
#define FUCINA_EXEC_KERNELS_REDUCE_H

#include "exec/tensor.h"

typedef enum fc__red_op {
    FC__RED_SUM,
    FC__RED_PROD,
    FC__RED_MAX,
    FC__RED_MIN,
    FC__RED_ARGMAX, /* flat index among the reduced elements, row-major */
    FC__RED_ARGMIN,
    FC__RED_ALL,
    FC__RED_ANY,
    FC__RED_VAR,     /* params: correction, take_sqrt */
    FC__RED_LSE,     /* log-sum-exp */
    FC__RED_NZPROD,  /* product of the nonzero elements (prod's backward) */
    FC__RED_NZCOUNT, /* count of zero elements (prod's backward) */
    FC__RED_COUNT
} fc__red_op;

typedef struct fc__red_params {
    double scale;      /* multiplies a float SUM (mean: 1/n); 0 means 1 */
    double correction; /* VAR: divide by max(0, n - correction) */
    bool take_sqrt;    /* VAR: standard deviation */
} fc__red_params;

/* ---- the forward (reduce.c) -------------------------------------------------------------- */

/* Checks axes for op on x (FC_ERR_RANK: more axes than dims; FC_ERR_NULL_ARG:
 * NULL axes with naxes > 0; FC_ERR_AXIS: out of range; FC_ERR_INVALID_ARG:
 * repeated or naxes < 0) and fills mask[rank] (naxes == 0: every axis), the
 * output shape (keepdim: ones at the reduced axes; otherwise without them,
 * or [1] when none is left) and *count, the number of elements reduced into
 * each output. Records the error and returns it. */
fc_status fc__red_axes(fc_ctx *ctx, const char *op, const fc_tensor *x, const int *axes, int naxes,
                       bool keepdim, bool *mask, int64_t *oshape, int *orank, int64_t *count);

/* Reduces x (any layout; integers/bool for SUM PROD MAX MIN ARG* ALL ANY,
 * floats for every op) over mask into out: contiguous, one element per
 * output position in row-major order of the kept axes, dtype f32/f64 for
 * float results, i64 for integer sums/products/extrema and indices, bool
 * for ALL/ANY. FC_ERR_OOM (recorded, naming opname) when the chunk
 * partials cannot be allocated. */
fc_status fc__red_run(fc_ctx *ctx, const char *opname, fc__red_op op, const fc_raw *x,
                      const bool *mask, const fc__red_params *params, fc_raw *out);

/* ---- backward kernels (reduce_backward.c) -------------------------------------------------
 * The reductions' rules see the output gradient g (contiguous, f32 or f64,
 * one value per output in kept-axis order) and per-output values computed
 * by fc__red_run; these kernels bring them back to the input's shape.
 * Tensors they return are new and scope-registered (NULL with the error
 * recorded, naming op). */

/* A view of g (contiguous, the reduction's output values in kept-axis
 * order) with x's shape: stride 0 along the masked axes. Scope-registered;
 * NULL with the error recorded. */
fc_tensor *fc__red_expand(fc_ctx *ctx, const char *op, fc_tensor *g, const int64_t *xshape,
                          int xrank, const bool *mask);

/* g * scale (computed in double, stored in g's dtype, f32 or f64; g
 * contiguous): mean's gradient per output. */
fc_tensor *fc__red_scaled(fc_ctx *ctx, const char *op, const fc_tensor *g, double scale);

/* v[o] *= g[o] in place: v f64 and g f32 or f64, both contiguous with the
 * same element count. Cannot fail. */
void fc__red_mul_into(fc_tensor *v, const fc_tensor *g);

/* Per-output factor of var / std's gradient, f64 of shape oshape: 2 / den
 * (sd NULL: var) or 1 / (den * sd[o]) (std; sd the saved output, f32 or
 * f64, contiguous). */
fc_tensor *fc__red_var_factor(fc_ctx *ctx, const char *op, const fc_tensor *sd, double den,
                              const int64_t *oshape, int orank);

/* How fc__red_combine forms dx from x and the per-output a, b. */
typedef enum fc__red_combine_mode {
    FC__RED_AFFINE, /* a * (x - b): var and std (a the factor, b the mean) */
    FC__RED_EXP,    /* a * exp(x - b): logsumexp (a = g, b = the output) */
    FC__RED_ZEROS,  /* prod: a = g * product of the nonzeros, b = number of zeros */
    FC__RED_COMBINE_COUNT
} fc__red_combine_mode;

/* dx (new, dtype dxdt f32 or f64, x's shape xshape) elementwise from x (f32
 * or f64, any layout) and a, b (contiguous per-output f32/f64 values, seen
 * broadcast over the masked axes), computed in double. */
fc_tensor *fc__red_combine(fc_ctx *ctx, const char *op, fc__red_combine_mode mode, fc_tensor *x,
                           fc_tensor *a, fc_tensor *b, const int64_t *xshape, int xrank,
                           const bool *mask, fc_dtype dxdt);

/* dx (new, zero, g's dtype, shape xshape, contiguous) with g[o] written at
 * the element of output o that idx[o] names: idx i64 per output (contiguous),
 * a flat row-major index among o's reduced elements, as FC__RED_ARGMAX
 * gives. max / min's gradient. */
fc_tensor *fc__red_scatter(fc_ctx *ctx, const char *op, const fc_tensor *idx, const fc_tensor *g,
                           const int64_t *xshape, int xrank, const bool *mask);

#endif /* FUCINA_EXEC_KERNELS_REDUCE_H */
