/* exec/kernels/reduce.h - the reduction engine (reduce.c) behind fc_sum,
 * fc_mean, ..., shared with the reductions' backward rules (src/ag).
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

/* A view of g (contiguous, the reduction's output values in kept-axis
 * order) with x's shape: stride 0 along the masked axes. Scope-registered;
 * NULL with the error recorded. */
fc_tensor *fc__red_expand(fc_ctx *ctx, const char *op, fc_tensor *g, const int64_t *xshape,
                          int xrank, const bool *mask);

#endif /* FUCINA_EXEC_KERNELS_REDUCE_H */
