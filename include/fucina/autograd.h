/* fucina/autograd.h - reverse-mode automatic differentiation.
 *
 * A leaf of dtype f32, f16, bf16 or f64 may require a gradient. Its
 * gradient is f32 for the 16- and 32-bit dtypes and f64 for f64, so an f64
 * model trains and differentiates in f64 throughout (ops do not promote
 * across dtypes, so an f64 graph computes in f64; an fc_to between dtypes
 * hands each side the gradient of its own dtype). While grad mode is on (the default) and any input of an op
 * requires grad, the op records a node: the backward rule, links to its
 * inputs, and the values its backward needs ("saved values"), each stored
 * with its buffer's mutation generation. fc_backward walks the recorded
 * graph from a scalar loss in reverse creation order and accumulates
 * gradients into the leaves (fc_grad).
 *
 * Saved values are checked: any mutable access to a saved buffer after the
 * op ran (fc_tensor_data_mut, an in-place op, an optimizer step) bumps its
 * generation, and backward then fails with FC_ERR_SAVED_MODIFIED naming the
 * op, the value, its shape and dtype and both generations.
 *
 * The graph lives as long as a tensor that can reach it. After a
 * successful backward without retain_graph the saved values of the nodes
 * it ran are freed (at the end of the walk, not node by node); a second
 * backward through them fails with FC_ERR_STATE.
 *
 * A failed backward has no effect on gradients. Every leaf's gradient
 * (fc_grad) is exactly what it was before the call, bit for bit, and one
 * that had none still has none: contributions are summed in per-leaf
 * staging and added to the leaves only once every node has run (that last
 * addition allocates nothing and cannot fail). The saved values are kept,
 * retain_graph or not, so the same graph can be walked again: a retry
 * after a transient failure (FC_ERR_OOM) gives the same gradients as an
 * unfailed backward; a retry after a lasting one (FC_ERR_SAVED_MODIFIED)
 * meets the same error. What a failure does change: nothing the caller can
 * see but the recorded error (internal accumulators are dropped).
 *
 * check_finite mode (fc_ctx_set_check_finite) covers backward too: a
 * non-finite output gradient, a rule's gradient with NaN or inf, or a
 * leaf's summed gradient that overflowed fails it with FC_ERR_NON_FINITE,
 * naming the op and the input index (or the leaf and the op it feeds),
 * with no gradient changed as above.
 *
 * Non-differentiable points follow PyTorch: relu'(0) = 0, abs'(0) = 0,
 * sign' = 0, clamp passes the gradient where min <= x <= max, max/min
 * reductions route the gradient to the first maximal element... (see each
 * op's documentation in fucina/ops.h).
 */
#ifndef FUCINA_AUTOGRAD_H
#define FUCINA_AUTOGRAD_H

#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Marks a leaf as requiring a gradient (or not). Returns FC_OK;
 * FC_ERR_NULL_ARG for a NULL t; FC_ERR_DTYPE (when on) for dtypes other than
 * f32, f16, bf16, f64; FC_ERR_INVALID_ARG for a non-leaf (a tensor produced by a
 * recorded op). Errors but the NULL t are recorded in t's context. */
FC_API fc_status fc_requires_grad(fc_tensor *t, bool on);
/* False for NULL. */
FC_API bool fc_tensor_requires_grad(const fc_tensor *t);
/* True for tensors made by the user (not by a recorded op); false for NULL. */
FC_API bool fc_tensor_is_leaf(const fc_tensor *t);

/* Parameter constructors: like fc_zeros / fc_randn(scaled by std) /
 * fc_tensor_from_data, then fc_requires_grad(t, true). Each returns a new
 * reference, or NULL with the constructor's error or FC_ERR_DTYPE (a dtype
 * other than f32, f16, bf16, f64) recorded in ctx; fc_param_randn also
 * refuses a std that is NaN, infinite or negative (FC_ERR_INVALID_ARG
 * naming it; the RNG stream does not advance). fc_param_randn draws f64
 * normals for f64 (the others round from f32 normals). */
FC_API fc_tensor *fc_param_zeros(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank);
FC_API fc_tensor *fc_param_randn(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank,
                                 double std);
FC_API fc_tensor *fc_param_from_data(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank,
                                     const void *data);

/* Backward from a one-element loss (its gradient is 1). Gradients of leaves
 * accumulate across calls until fc_zero_grad. Borrows loss. Returns FC_OK;
 * FC_ERR_NULL_ARG for a NULL ctx (not recorded) or loss;
 * FC_ERR_INVALID_SHAPE when loss has more than one element; FC_ERR_NO_GRAD
 * when it does not require grad; FC_ERR_SAVED_MODIFIED (see above);
 * FC_ERR_STATE when the graph's saved values were freed by an earlier
 * backward; FC_ERR_NON_FINITE in check_finite mode; FC_ERR_OOM. Errors are
 * recorded in ctx; on any error the leaves' gradients are unchanged (see
 * above). */
FC_API fc_status fc_backward(fc_ctx *ctx, fc_tensor *loss);
/* Backward from any output with an explicit gradient of the same shape
 * (any float dtype; used in the output's gradient dtype: f64 for an f64
 * output, else f32). retain_graph keeps the saved values so
 * the graph can be walked again. Borrows out and grad_out. Errors as
 * fc_backward (out may have any number of elements), with FC_ERR_NULL_ARG
 * for a NULL out or grad_out, FC_ERR_SHAPE_MISMATCH when the shapes differ
 * and FC_ERR_DTYPE when grad_out is not f16, bf16, f32 or f64. */
FC_API fc_status fc_backward_with(fc_ctx *ctx, fc_tensor *out, fc_tensor *grad_out,
                                  bool retain_graph);

/* The gradient of a leaf (borrowed: valid until fc_zero_grad or the
 * leaf's release): f64 for an f64 leaf, else f32, the leaf's shape,
 * contiguous. NULL when backward has not reached it. */
FC_API fc_tensor *fc_grad(const fc_tensor *t);
/* Drops the gradient of each of n leaves (params and its entries NULL
 * allowed). */
FC_API void fc_zero_grad(fc_tensor *const *params, int n);

/* Grad mode: while any fc_no_grad_begin is open, ops record nothing.
 * Nestable; unbalanced ends are ignored; NULL is a no-op. fc_grad_enabled
 * is false inside such a block and for a NULL ctx. */
FC_API void fc_no_grad_begin(fc_ctx *ctx);
FC_API void fc_no_grad_end(fc_ctx *ctx);
FC_API bool fc_grad_enabled(const fc_ctx *ctx);
/* A view of t's storage that requires no grad and has no graph. Borrows t;
 * returns a new reference, or NULL (FC_ERR_NULL_ARG for a NULL t, FC_ERR_OOM
 * recorded in ctx). */
FC_API fc_tensor *fc_detach(fc_ctx *ctx, fc_tensor *t);

/* ---- gradcheck ------------------------------------------------------------------
 * Compares analytic gradients with central finite differences computed in
 * f64, like PyTorch's gradcheck (defaults eps 1e-6, atol 1e-5, rtol 1e-3,
 * meant for f64 inputs). fn maps the inputs to one output of any shape;
 * gradcheck checks the gradient of sum(fn(inputs) * w) for a fixed random w
 * of the output's shape (a random projection of the Jacobian), for every
 * element of every input that requires grad (f64 inputs may be marked by
 * gradcheck itself: set check_all_f64). Inputs must be contiguous leaves
 * (fn may build strided or broadcast views of them). fn must create its
 * result without side effects; it is called 2 * numel + 1 times. */
typedef fc_tensor *(*fc_gradcheck_fn)(fc_ctx *ctx, fc_tensor *const *inputs, int n, void *user);

typedef struct fc_gradcheck_opts {
    double eps, atol, rtol; /* 0 selects the defaults above */
    bool check_all_f64;     /* treat every f64 input as requiring grad */
    uint64_t seed;          /* for the projection w */
} fc_gradcheck_opts;

typedef struct fc_gradcheck_report {
    bool passed;
    int worst_input;         /* input index of the worst element */
    int64_t worst_index;     /* flat element index in that input */
    double analytic, numeric; /* at the worst element */
    double worst_excess;     /* |a - n| - (atol + rtol * |n|), > 0 when failing */
    int64_t checked;         /* elements compared */
} fc_gradcheck_report;

/* FC_OK when every element is within atol + rtol * |numeric|. A mismatch
 * is FC_ERR_STATE and a non-finite gradient FC_ERR_NON_FINITE, each with a
 * message naming the worst element (input, index, analytic, numeric); a
 * failing fn or backward passes its own error through. The report (NULL
 * allowed) is filled either way. */
FC_API fc_status fc_gradcheck(fc_ctx *ctx, fc_gradcheck_fn fn, void *user,
                              fc_tensor *const *inputs, int n, const fc_gradcheck_opts *opts,
                              fc_gradcheck_report *report);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_AUTOGRAD_H */
