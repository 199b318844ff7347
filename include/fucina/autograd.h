/* SPDX-License-Identifier: MIT */
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

/* ---- functional gradients --------------------------------------------------------
 * fc_autograd_grad is PyTorch's torch.autograd.grad: the gradients of
 * outputs[0, n_out) (weighted by grad_outputs) with respect to inputs[0,
 * n_in), returned as new tensors; no leaf's fc_grad changes. Zero-init
 * options (or NULL opts) are the defaults:
 *   retain_graph: keep the saved values of the nodes the walk ran, so the
 *     graph can be walked again (by either call); without it they are freed
 *     as by fc_backward.
 *   allow_unused: an input no gradient path reaches gets a NULL slot;
 *     without it such an input is FC_ERR_INVALID_ARG naming its index and
 *     tensor, found before any rule runs.
 *   create_graph: record the backward pass itself, so the returned
 *     gradients are recorded tensors (they require grad when they depend on
 *     anything that does) and can be differentiated again, to any order:
 *     pass them as outputs of another fc_autograd_grad (Hessian-vector
 *     products, gradient penalties), or fold them into a loss for
 *     fc_backward. Implies retain_graph (the first-order graph is part of
 *     the new one). The walk records whatever grad mode the caller is in;
 *     hooks on the way run with grad mode on, and a replacement they return
 *     is used as given: recorded when the hook computed it from the
 *     gradient with ops (fc_mul_scalar(ctx, grad, 0.5) stays differentiable),
 *     a constant when it is one (such as an fc_detach copy). Every op
 *     with a backward rule supports it, its rule then built from recorded
 *     ops instead of its fused kernel (slower, and the new graph lives
 *     until the returned gradients are released; fc_prod over a set that
 *     holds a zero takes n^2 memory per output for its n-element sets).
 *     Through fc_grad_checkpoint the function is recomputed on the inputs
 *     and its recomputed graph kept as part of the new one (so the memory
 *     saving is the first-order pass's only). A gradient that depends
 *     on no value of the graph is the constant it is, with zero higher
 *     derivatives, and no error: sum(relu(x))'s (g times a constant
 *     mask; likewise abs, leaky_relu, clamp, a hinge loss), a bias's under
 *     a constant upstream gradient, a matmul's, linear's, conv's or
 *     attention's at the order where it no longer depends on the inputs.
 *     Where the rule that made it read values of the graph (relu's saved
 *     output, linear's x and weight) it is kept in the new graph: it
 *     requires grad, and differentiating it again gives zeros there
 *     (PyTorch's threshold_backward of a saved result does the same). One
 *     made from constants alone (sum(x)'s ones) requires no grad, as in
 *     PyTorch, so it cannot be an output of another fc_autograd_grad
 *     (FC_ERR_NO_GRAD, as for any constant). A rule that returns a
 *     constant where the gradient does depend on the graph (an op added
 *     without a recorded form) fails the walk with FC_ERR_UNSUPPORTED
 *     naming the op.
 *     Without create_graph the walk is the plain one of fc_backward: fused
 *     kernels, nothing recorded. */
typedef struct fc_autograd_grad_opts {
    bool retain_graph;
    bool allow_unused;
    bool create_graph;
} fc_autograd_grad_opts;

/* Each output must require grad. grad_outputs (NULL allowed, as is each
 * entry) gives each output's gradient: its shape, any float dtype, used in
 * the output's gradient dtype; a NULL one means ones and needs a
 * one-element output. Each input must require grad: a leaf, or any
 * non-leaf (the output of a recorded op: its gradient is the whole
 * gradient flowing into it, as with a hook). grads[j] gets a new reference
 * to input j's gradient (the input's shape, contiguous, f64 for f64 and
 * f32 otherwise), or NULL for an unreached input with allow_unused; an
 * input listed twice gets the same tensor twice (two references). The
 * caller owns these references, not the current scope: unlike an op's
 * result, fc_scope_end does not release them (a gradient is usually kept
 * past the step's scope, for an optimizer or an accumulator, and with
 * create_graph it holds the new graph alive), so release each with
 * fc_release, inside the scope or after it. Rules
 * that lead to no input are not run. Leaf hooks run only on the inputs
 * that are leaves (the walk computes no other leaf's gradient), after
 * which the returned gradient is the hooks' result; non-leaf hooks on the
 * way run as in fc_backward (see "gradient hooks" below). Borrows every
 * tensor passed. Returns FC_OK; FC_ERR_NULL_ARG for a NULL ctx (not
 * recorded), outputs, inputs, grads or entry of outputs or inputs;
 * FC_ERR_INVALID_ARG for n_out or n_in < 1 or an unreached input;
 * FC_ERR_CONTEXT for a tensor of another context; FC_ERR_NO_GRAD for an
 * output or input that does not require grad; FC_ERR_INVALID_SHAPE for a
 * NULL grad_output of a many-element output; FC_ERR_SHAPE_MISMATCH /
 * FC_ERR_DTYPE for a grad_output of another shape / not a float;
 * FC_ERR_STATE from a hook, or for saved values freed by an earlier walk;
 * FC_ERR_UNSUPPORTED with create_graph through an op that cannot record
 * its backward;
 * and fc_backward's other errors (FC_ERR_SAVED_MODIFIED, FC_ERR_NON_FINITE,
 * FC_ERR_OOM, a hook's). Errors name the argument's index and are recorded
 * in ctx; on any error every grads[j] is NULL, no fc_grad changed, and the
 * saved values are kept (retain_graph or not). */
FC_API fc_status fc_autograd_grad(fc_ctx *ctx, fc_tensor *const *outputs,
                                  fc_tensor *const *grad_outputs, int n_out,
                                  fc_tensor *const *inputs, int n_in,
                                  const fc_autograd_grad_opts *opts, fc_tensor **grads);

/* ---- gradient checkpointing: recompute instead of store ---------------------------
 * (Not to be confused with fc_checkpoint_save / fc_checkpoint_load in
 * fucina/checkpoint.h, which write training state to files.)
 *
 * fc_grad_checkpoint(ctx, fn, user, inputs, n) returns fn(ctx, inputs, n,
 * user) but keeps none of fn's intermediate values for backward: fn runs
 * with grad mode off, and one node is recorded whose inputs are inputs[0,
 * n). What it keeps: references to the n inputs (saved values, checked for
 * in-place changes like any other), fn, user and the context RNG state
 * (seed and offset) at the call. When a backward reaches the node, fn runs
 * again with grad mode on, from the saved RNG state (so fc_dropout draws
 * the same mask; the RNG is put back afterwards, so the stream position
 * after the backward is as without the checkpoint), over stand-ins for
 * the inputs (views of the same storage that require grad where the
 * inputs do); the gradient flowing into the output is walked through the
 * recomputed graph, the inputs get their gradients from the stand-ins,
 * and the recomputed graph is freed before the backward goes on. Peak
 * memory is then the inputs of every checkpoint plus one function's
 * intermediate values, at the price of running each forward twice.
 *
 * Parameters: a leaf that requires grad and is used by fn without being an
 * input (a layer's weights reached through user) gets its gradient
 * exactly as without the checkpoint, including the all-or-nothing rule of
 * a failed backward: its contributions are staged with the rest and land
 * in fc_grad only when the whole outer backward succeeds. A tensor that
 * requires grad but is neither an input nor a leaf (the output of an
 * earlier recorded op) must be passed as an input; using it through user
 * fails the backward with FC_ERR_INVALID_ARG naming it.
 *
 * Bit identity: every gradient (of the inputs and of the parameters) is
 * bit for bit the one the same graph gives without the checkpoint, at any
 * thread count, provided fn is deterministic given its inputs, the RNG
 * state and the tensors it reads through user (which must not change
 * between the forward and the backward), and fn uses the RNG only through
 * the context (fc_rand, fc_randn, fc_dropout). The recompute adds each
 * contribution in the order, and into the accumulator, the plain backward
 * would. (Two exceptions, both about signs of zero: an input listed twice
 * gets its whole gradient through the first listing plus a zero through
 * the second, and an input fn ignores gets a zero where the plain graph
 * gives it nothing.)
 *
 * Grad mode off at the call (fc_no_grad_begin): fc_grad_checkpoint is just
 * a call of fn and records nothing. On, it records the node even when no
 * input requires grad, since fn may use parameters: the output then
 * requires grad. Nesting works: a checkpoint inside a checkpointed fn
 * records nothing in the forward and its own node during the recompute.
 * fc_backward, fc_backward_with and fc_autograd_grad all recompute
 * (with create_graph the recompute is recorded and stays alive with the
 * returned gradients, which are then differentiable through fn as through
 * the plain graph; the bit identity above is the plain walk's)
 * (fc_autograd_grad with respect to a parameter used only inside fn needs
 * allow_unused, since the graph it inspects before running shows no path
 * to it; the gradient is still returned). retain_graph keeps the saved
 * inputs: the next walk recomputes again.
 *
 * fn returns a new reference (it may return an input or a parameter
 * itself) or NULL with an error recorded in ctx; it must release what else
 * it creates (or use a scope), may record errors, and must compute a
 * result of the same shape and dtype each time. It runs on the calling
 * thread, inside the backward's walk during recompute (so it may not start
 * a backward itself or add hooks: FC_ERR_STATE); kernels inside use the
 * context's thread team as usual. check_finite mode checks fn's ops in
 * the forward, and in backward the inputs' and parameters' gradients.
 * Leaves with gradient hooks may not be used inside fn (the backward
 * fails with FC_ERR_STATE naming the leaf); hooks on the inputs and the
 * output work as usual.
 *
 * Returns a new reference (a handle of its own in the current scope, like
 * any op's result, whatever fn returned), or NULL: NULL ctx (nothing recorded);
 * FC_ERR_NULL_ARG for a NULL fn, inputs or entry of inputs;
 * FC_ERR_INVALID_ARG for n outside [1, 4]; FC_ERR_CONTEXT for an input or
 * result of another context; fn's own error when it returns NULL
 * (FC_ERR_STATE if it recorded none); FC_ERR_OOM. In the backward: a
 * recomputed result of another shape is FC_ERR_SHAPE_MISMATCH and of
 * another dtype FC_ERR_STATE, each naming fc_grad_checkpoint and both
 * shapes or dtypes; fn returning NULL fails it with fn's error; every
 * failure leaves the gradients as a failed backward does (unchanged).
 * Borrows inputs; user is passed through. */
typedef fc_tensor *(*fc_grad_checkpoint_fn)(fc_ctx *ctx, fc_tensor *const *inputs, int n,
                                            void *user);
FC_API fc_tensor *fc_grad_checkpoint(fc_ctx *ctx, fc_grad_checkpoint_fn fn, void *user,
                                     fc_tensor *const *inputs, int n);

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

/* ---- gradient hooks -------------------------------------------------------------
 * A hook is a callback on a tensor that runs during a backward walk
 * (fc_backward, fc_backward_with, fc_autograd_grad) once that tensor's
 * gradient for the walk is final:
 *   - on a leaf that requires grad: the sum of every contribution of this
 *     walk (not what fc_grad held before), before it is added to fc_grad
 *     (or, in fc_autograd_grad, returned). It runs as soon as the last node
 *     that feeds the leaf has run, in the middle of the walk, not at its end;
 *   - on a non-leaf (the output of a recorded op): the output's complete
 *     gradient, before the op's backward rule uses it.
 * A tensor that gets no gradient in a walk (unreached, or pruned by
 * fc_autograd_grad) runs no hook. In fc_autograd_grad only the leaves it
 * was asked for get gradients, so only their leaf hooks run; hooks on
 * non-leaves along the way run in both calls.
 *
 * The hook receives grad, borrowed for the call: contiguous, the tensor's
 * shape, the gradient dtype (f64 for f64, else f32). It must not write into
 * grad, and a reference it retains may later be added into (a leaf's
 * fc_grad accumulates in place): copy what must stay. To change the
 * gradient it sets *replace (NULL on entry) to a tensor of the same shape
 * and dtype, any layout, borrowed (the engine keeps its own reference or a
 * copy); later hooks, the rule and fc_grad then see the replacement.
 * Leaving *replace NULL (or setting grad) keeps the gradient. A hook runs
 * inside a scope with grad mode off, like a backward rule: the tensors it
 * creates are released when it returns, so it releases nothing it made,
 * and *replace may be such a temporary. user is the pointer given at
 * registration.
 *
 * Order: hooks of one tensor run in registration order, each seeing the
 * previous one's result. Across tensors they run in the walk's order,
 * which is deterministic: nodes in descending creation order (a non-leaf's
 * hooks run when its node's turn comes), a leaf's hooks right after the
 * node that completes its gradient (several leaves completed by one node:
 * in that node's input order), and a leaf that is itself an output and
 * feeds no node in the walk before any node. So the parameters of the last
 * layers of a network finish first.
 *
 * Threads: hooks run on the thread that called the backward, one at a
 * time, never concurrently with each other or with the walk (the walk is
 * sequential; kernels inside it use the context's thread team). A hook may
 * use any op of its context, but may not start a backward or
 * fc_autograd_grad on it, nor add or remove hooks (FC_ERR_STATE), nor
 * release tensors it does not own.
 *
 * Errors: a hook that returns a status other than FC_OK fails the walk with
 * that status (with the hook's own message if it recorded one in ctx, else
 * one naming the hook's index on its tensor and the tensor); a replacement
 * of another shape is FC_ERR_SHAPE_MISMATCH, of another dtype FC_ERR_DTYPE,
 * from another context FC_ERR_CONTEXT, and in check_finite mode one with
 * NaN or inf FC_ERR_NON_FINITE, each naming the hook and the tensor ("the
 * leaf f64[3,4]", "the output of matmul (tape node 12)"). Like every failed
 * backward, the failed walk leaves the leaves' gradients exactly as they
 * were; what the hooks that ran did outside the engine is theirs to undo.
 *
 * For data-parallel training: a hook on each parameter learns the moment
 * that parameter's gradient is complete, in an order fixed by the graph,
 * so a layer above can copy it into a bucket and start a non-blocking
 * all-reduce of each bucket as it fills while the walk goes on, then wait
 * for the reductions and write the averaged values into fc_grad after the
 * backward returns (and drop them if it returns an error). */
typedef fc_status (*fc_grad_hook_fn)(fc_ctx *ctx, fc_tensor *grad, fc_tensor **replace,
                                     void *user);
/* Registers fn on t, after the hooks it already has. t must require grad
 * (a leaf marked with fc_requires_grad, or a recorded op's output). *id
 * (NULL allowed) gets an identifier, unique in t's context, for
 * fc_grad_hook_remove. A leaf's hooks live as long as the leaf; a non-leaf's
 * as long as the graph node that made it. Returns FC_OK; FC_ERR_NULL_ARG for
 * a NULL t (not recorded) or fn; FC_ERR_NO_GRAD when t does not require
 * grad; FC_ERR_STATE when called from a hook; FC_ERR_OOM. Errors but the
 * NULL t are recorded in t's context; on error nothing is registered. */
FC_API fc_status fc_grad_hook_add(fc_tensor *t, fc_grad_hook_fn fn, void *user, int64_t *id);
/* Removes hook id from t. Returns FC_OK; FC_ERR_NULL_ARG for a NULL t (not
 * recorded); FC_ERR_INDEX when t has no hook id; FC_ERR_STATE when called
 * from a hook. */
FC_API fc_status fc_grad_hook_remove(fc_tensor *t, int64_t id);

/* ---- gradcheck ------------------------------------------------------------------
 * Compares analytic gradients with central finite differences computed in
 * f64, like PyTorch's gradcheck (defaults eps 1e-6, atol 1e-5, rtol 1e-3,
 * meant for f64 inputs). fn maps the inputs to one output of any shape;
 * gradcheck checks the gradient of sum(fn(inputs) * w) for a fixed random w
 * of the output's shape (a random projection of the Jacobian), for every
 * element of every input that requires grad (f64 inputs may be marked by
 * gradcheck itself: set check_all_f64). Inputs that require grad must be
 * contiguous, writable f64 leaves (fn may build strided or broadcast views
 * of them); inputs that do not are constants of any dtype. f64 because in
 * f32 a central difference at eps 1e-6 is rounding noise (one unit in the
 * last place of the output over 2 eps), so a correct gradient would be
 * reported wrong: PyTorch's gradcheck warns about such inputs, these
 * checks refuse them (FC_ERR_DTYPE naming the input). fn must create its
 * result without side effects; it is called 2 * numel + 1 times. */
typedef fc_tensor *(*fc_gradcheck_fn)(fc_ctx *ctx, fc_tensor *const *inputs, int n, void *user);

/* Options of fc_gradcheck and fc_gradgradcheck; zero-initialised is the defaults. */
typedef struct fc_gradcheck_opts {
    double eps, atol, rtol; /* 0 selects the defaults above */
    bool check_all_f64;     /* treat every f64 input as requiring grad */
    uint64_t seed;          /* for the projection w */
    /* fc_gradgradcheck only: its grad_output w is a constant instead of a
     * leaf that requires grad (see fc_gradgradcheck); fc_gradcheck ignores it */
    bool constant_grad_output;
} fc_gradcheck_opts;

/* What a gradient check found, filled on every return (see below). */
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
 * failing fn or backward passes its own error through. Argument errors:
 * FC_ERR_NULL_ARG for a NULL ctx (not recorded), fn, inputs or entry of
 * inputs; FC_ERR_INVALID_ARG for n < 1 or an input that requires grad but
 * is not a contiguous, writable leaf; FC_ERR_DTYPE for one that is not
 * f64 (see above); and fc_requires_grad's errors from check_all_f64.
 * Errors are recorded in ctx. The report (NULL allowed) is filled on every
 * path, errors included: before anything is compared (any argument error,
 * a first call of fn that fails) it reads passed false, checked 0,
 * worst_input and worst_index -1, analytic and numeric 0 and worst_excess
 * -INFINITY; after a failure partway, what was compared so far. */
FC_API fc_status fc_gradcheck(fc_ctx *ctx, fc_gradcheck_fn fn, void *user,
                              fc_tensor *const *inputs, int n, const fc_gradcheck_opts *opts,
                              fc_gradcheck_report *report);

/* Second derivatives, like PyTorch's gradgradcheck (same defaults; f64
 * inputs, which check_all_f64 marks as above). With a random grad_output w
 * of fn's output shape (a leaf fc_gradgradcheck makes, requiring grad; a
 * constant with constant_grad_output, below) it
 * takes the first-order gradients G_j of sum(fn(inputs) * w) with
 * create_graph, and checks the gradient of L2 = sum_j sum(G_j * u_j) (u_j
 * fixed and random) with respect to every input that requires grad and to
 * w, computed by a second fc_autograd_grad over the recorded G_j, against
 * central differences of L2 (each a plain first-order backward). So it
 * checks both the recorded backward's dependence on the inputs (a random
 * projection of the Hessian) and on w (of the Jacobian). Inputs as for
 * fc_gradcheck (contiguous f64 leaves, 1 to 8 of them); fn is called
 * 2 * (numel of the inputs checked + numel of the output) + 2 times, each
 * followed by a backward.
 *
 * constant_grad_output: w is the same random tensor but a constant (it
 * requires no grad), as the upstream gradient of a loss sum(fn(inputs) * w)
 * with fixed w is (sum(fn(x)) is w = 1). A leaf w makes every first-order
 * gradient depend on the graph; a constant one leaves constant the
 * gradients that do not depend on the inputs (relu's g * mask, a bias's
 * row sum, a matmul's gradient through a constant operand), which the
 * create_graph walk must then return as constants with zero higher
 * derivatives rather than refuse. Only the inputs are checked (not w), and
 * fn is called 2 * (numel of the inputs checked) + 2 times.
 *
 * Errors as fc_gradcheck's (FC_ERR_STATE for a mismatch, FC_ERR_NON_FINITE,
 * FC_ERR_DTYPE, fn's or the walks' own, FC_ERR_UNSUPPORTED for an op whose
 * backward cannot be recorded), plus FC_ERR_INVALID_ARG for n > 8 or when
 * no input requires grad; the report is filled on every path as
 * fc_gradcheck's. In the report, worst_input is n for w. */
FC_API fc_status fc_gradgradcheck(fc_ctx *ctx, fc_gradcheck_fn fn, void *user,
                                  fc_tensor *const *inputs, int n, const fc_gradcheck_opts *opts,
                                  fc_gradcheck_report *report);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_AUTOGRAD_H */
