/* SPDX-License-Identifier: MIT */
/* exec/tensor.h - the tensor handle: a raw strided view plus its context,
 * references, scope slot, autograd links and leaf gradient; the helpers that
 * create handles and the layout queries every kernel asks. */
#ifndef FUCINA_EXEC_TENSOR_H
#define FUCINA_EXEC_TENSOR_H

#include "exec/ctx.h"

enum {
    FC__T_REQUIRES_GRAD = 1u << 0, /* leaf parameter or result of a recorded op */
    FC__T_LEAF = 1u << 1,          /* a parameter: its gradient lands in ->grad */
    FC__T_WANTED = 1u << 2,        /* transient: an input of the running fc_autograd_grad */
    FC__T_REACHED = 1u << 3,       /* transient: such an input is fed by the walk */
    FC__T_ALIAS = 1u << 4,   /* transient: a checkpoint's stand-in for an input (ag/checkpoint.c) */
    FC__T_EXTRA = 1u << 5,   /* transient: listed as staged by a nested walk (ag/tape.c) */
};

struct fc_tensor {
    fc_raw raw;
    fc_ctx *ctx;
    atomic_int refs;
    unsigned flags;
    int32_t scope_slot;    /* index in ctx->scope_items, -1 when not scoped */
    struct fc_node *node;  /* producing tape node (retained), NULL otherwise */
    fc_tensor *grad;       /* f32 gradient of a leaf (owned), NULL until backward */
    fc_tensor *gstage;     /* a leaf's gradient staged by a running backward (owned) */
    struct fc__hook_list *hooks; /* a leaf's gradient hooks (src/ag owns them), or NULL */
    fc_tensor *live_prev;  /* every live tensor of the context, for fc_ctx_free */
    fc_tensor *live_next;
    int64_t profile_ns;    /* creation stamp while profiling (exec/profile.h), else 0 */
};

/* "f32[2,3]" of a tensor into buf. */
const char *fc__desc(const fc_tensor *t, char *buf, int cap);
/* Shape string of a raw shape. */
#define FC__SHAPE_STR(shape, rank, buf) fc__shape_str((shape), (rank), (buf), (int)sizeof(buf))

/* ---- tensors ------------------------------------------------------------------- */
/* Contiguous, uninitialised, from the pool; registered in the current scope.
 * Records the error and returns NULL on failure (op names the caller). */
fc_tensor *fc__tensor_new(fc_ctx *ctx, const char *op, fc_dtype dtype, const int64_t *shape,
                          int rank);
/* Wraps a raw tensor (steals its buffer reference, also on failure). */
fc_tensor *fc__tensor_wrap(fc_ctx *ctx, const char *op, fc_raw *raw);
/* A view of t with new shape/strides/offset (storage units), sharing storage. */
fc_tensor *fc__tensor_view(fc_ctx *ctx, const char *op, fc_tensor *t, const int64_t *shape,
                           const int64_t *strides, int rank, int64_t offset);
/* After an op computed out: check_finite mode, then return out (or NULL). */
fc_tensor *fc__finish(fc_ctx *ctx, const char *op, fc_tensor *out);
/* Counts non-finite values of a float tensor (0 for other dtypes). */
int64_t fc__count_non_finite(const fc_tensor *t);

/* ---- layout queries every op asks --------------------------------------------------- */
/* fc__raw_numel and fc__raw_is_contiguous of core/raw.h, inline for the
 * per-op hot path (the core versions copy the shape to divide the block
 * axis; scalar dtypes need no copy). */
static inline int64_t fc__numel(const fc_raw *t) {
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->shape[i];
    return n;
}
static inline bool fc__contiguous(const fc_raw *t) {
    if (fc_dtype_block_elems(t->dtype) != 1) return fc__raw_is_contiguous(t);
    int64_t s = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != s) return false;
        s *= t->shape[i];
    }
    return true;
}
/* True when every element of t is one storage element (all axes of size
 * > 1 have stride 0): a single value broadcast, readable at stride 0. */
static inline bool fc__single_value(const fc_raw *t) {
    for (int i = 0; i < t->rank; i++)
        if (t->shape[i] != 1 && t->strides[i] != 0) return false;
    return true;
}

/* ---- element access helpers ---------------------------------------------------------- */
/* Reads one element of a non-block dtype as double / writes one from double
 * (with fc_cast_scalar's rules). Slow path helpers for generic code. */
double fc__load_f64(fc_dtype dtype, const void *p);
void fc__store_f64(fc_dtype dtype, void *p, double v);

#endif /* FUCINA_EXEC_TENSOR_H */
