/* SPDX-License-Identifier: MIT */
/* fct_tensor.h - tensor helpers for the op tests: build a tensor of any
 * scalar dtype from doubles in a chosen memory layout (so every kernel is
 * tested on contiguous, transposed and strided storage with the same
 * logical values), read any tensor back as doubles, and round a double
 * through a dtype to form exact references. */
#ifndef FUCINA_TEST_FCT_TENSOR_H
#define FUCINA_TEST_FCT_TENSOR_H

#include <stdint.h>

#include "fucina.h"

typedef enum fct_layout {
    FCT_CONTIG,     /* plain row-major */
    FCT_TRANSPOSED, /* storage holds the last two axes swapped (rank >= 2) */
    FCT_STRIDED,    /* every other slot of a larger buffer, at offset 1 */
    FCT_LAYOUT_COUNT
} fct_layout;

extern const char *const fct_layout_names[FCT_LAYOUT_COUNT];

/* A tensor of dtype dt whose logical contents are vals (row-major, cast with
 * fc_cast_scalar), stored in layout. Unused storage slots hold a poison
 * value (99) so a kernel reading the wrong slot shows up. Returns a new
 * reference, or NULL with the ctx error. */
fc_tensor *fct_make(fc_ctx *ctx, fc_dtype dt, const int64_t *shape, int rank, const double *vals,
                    fct_layout layout);
/* The logical contents of t (any layout) as doubles into out (numel
 * values; cap is out's length). Returns numel, or -1 when t is NULL or
 * larger than cap. */
int64_t fct_read(const fc_tensor *t, double *out, int64_t cap);
/* v cast to dt and back (f64 -> dt -> f64). */
double fct_round(fc_dtype dt, double v);
/* A view of base with the given geometry (storage elements), sharing its
 * storage. Returns a new reference. */
fc_tensor *fct_view(fc_ctx *ctx, fc_tensor *base, const int64_t *shape, const int64_t *strides,
                    int rank, int64_t offset);
/* A uniform double in [lo, hi) from a splitmix64 state. */
double fct_uniform(uint64_t *state, double lo, double hi);
/* Units in the last place of dt at magnitude |v| (the spacing of dt's
 * values there; subnormal spacing below the normal range). */
double fct_ulp(fc_dtype dt, double v);
/* Live tensor handles of ctx. */
int64_t fct_live(const fc_ctx *ctx);

#endif /* FUCINA_TEST_FCT_TENSOR_H */
