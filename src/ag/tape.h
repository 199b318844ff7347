/* SPDX-License-Identifier: MIT */
/* ag/tape.h - the recorded graph and how ops write into it.
 *
 * An op that wants a gradient (fc__ag_wants) records one node for its one
 * output (fc__ag_record), saves what its backward needs (fc__ag_save, each
 * with the buffer's generation), and stores its parameters in node->i /
 * node->f. Its backward rule receives the gradient of the output (gout, in
 * the gradient dtype: f64 for f64 graphs, f32 otherwise, contiguous, output
 * shape) and sets gin[k] for every input k with node->in[k].needs: a new
 * tensor of the input's shape, or of any shape that broadcasts with it: the
 * engine reads it broadcast to the common shape and sums that down to the
 * input's (so the op's broadcast output shape sums away, and a [1] zero
 * serves any input); a shape that does not broadcast fails the backward
 * with FC_ERR_SHAPE_MISMATCH naming the op. A window op's rule may instead
 * hand over gout as the gradient of a region of its input
 * (fc__ag_gin_region), which the engine adds straight into that region of
 * the accumulator. Rules run inside a scope and may use every forward op:
 * every tensor they create is released when the node is done, so rules
 * release nothing; gin[k] may be such a temporary, gout itself or a saved
 * tensor (the engine retains what it keeps). Returning an error status
 * (recorded with fc__fail) fails the backward.
 *
 * Grad mode: off in a plain walk, where rules may use fused kernels. In a
 * create_graph walk (fc__ag_create_graph true) it is on and the rule must
 * build each gin[k] from recorded ops, so the gradient is differentiable
 * again. Making a rule create_graph-ready:
 *   - branch on fc__ag_create_graph(ctx) and write the formula with public
 *     ops (fc_mul, fc_sum, fc_matmul, ...) instead of the fused kernel;
 *   - read saved inputs and outputs with fc__ag_saved_tensor: in such a
 *     walk the handle is linked to the graph (an input to its node or leaf,
 *     the node's own output through a weak link), so the new nodes connect
 *     to it; values used only as constants (masks, argmax, tie weights) are
 *     read with fc__ag_saved_const;
 *   - a saved value that is a copy of an input (a contiguous copy made by
 *     the forward) links to it by setting saved[k].link to the input's
 *     index after fc__ag_save;
 *   - views of gout or of saved values must be recorded ops (fc_reshape,
 *     fc_transpose, fc_narrow), not fc__tensor_view; region gradients
 *     (fc__ag_gin_region) are recorded by the engine;
 *   - an op with no composite form (a fused kernel only) gets a recorded
 *     pair of its own: an op whose rule is its adjoint op and back (the
 *     bilinear convolution products of ops/conv.c, pooling's adjoint pair in
 *     ops/pool.c), or returns fc__ag_unsupported(ctx, op).
 * A gradient that does not depend on the graph (relu's g * mask for a
 * constant g, a bias's row sum of a constant) is returned as the constant
 * it is: its higher derivatives are zero, and asking for them is no error.
 * The engine checks constants (backward.c, check_recorded): a nonzero
 * constant gin[k] although gout requires grad fails the walk with
 * FC_ERR_UNSUPPORTED naming the op (a gradient is linear in gout; a zero
 * of one value is allowed), and so does a constant from a rule that read
 * saved values with their graph identity (fc__ag_saved_tensor's linked
 * handles, fc__ag_saved_raw of a value that carries one) without asking
 * fc__ag_create_graph (or declaring fc__ag_recorded_rule): a rule that
 * asked took its recorded form, and its constants stand.
 *
 * Nodes are refcounted: by the output handle that points at them and by
 * consumer nodes. Node memory is recycled per context. */
#ifndef FUCINA_AG_TAPE_H
#define FUCINA_AG_TAPE_H

#include "exec/tensor.h"
#include "fucina/autograd.h"

#define FC__AG_MAX_IN 4
#define FC__AG_MAX_SAVED 6 /* attention saves q, k, v, mask, output and logsumexp */

typedef struct fc_node fc_node;
typedef fc_status (*fc__backward_fn)(fc_ctx *ctx, fc_node *node, fc_tensor *gout,
                                     fc_tensor **gin);

typedef struct fc__saved {
    fc_raw raw; /* a view holding one buffer reference; raw.buf NULL when freed */
    uint32_t generation;
    const char *role; /* "input", "output", "weight", ... for messages */
    /* Where the value sits in the graph, for create_graph walks (a saved
     * value read there must carry its autograd identity): FC__SAVED_OUTPUT
     * (the node's own output: a weak link, so no node holds itself), the
     * index of the input it is, or FC__SAVED_NONE (a constant). */
    int8_t link;
} fc__saved;
enum { FC__SAVED_NONE = -1, FC__SAVED_OUTPUT = -2 };

/* Gradient hooks (hooks.c): a list per leaf (fc_tensor.hooks) or per node
 * (the gradient of its output), in registration order. pending counts, for
 * a leaf during a walk, the edges of nodes still to run that feed it: at 0
 * its gradient for this walk is final and its hooks run. */
typedef struct fc__hook {
    struct fc__hook *next;
    fc_grad_hook_fn fn;
    void *user;
    int64_t id;
} fc__hook;

typedef struct fc__hook_list {
    fc__hook *head;
    int64_t pending;
} fc__hook_list;

/* Where a region gradient lands (fc__ag_gin_region). */
typedef struct fc__ag_region {
    int64_t strides[FC_MAX_RANK]; /* per axis of the gradient, in input elements */
    int64_t offset;               /* input element of the gradient's first element */
    bool on;
} fc__ag_region;

typedef struct fc__ag_input {
    fc_node *node;   /* producing node (retained), or NULL */
    fc_tensor *leaf; /* a leaf requiring grad (retained), or NULL */
    bool needs;      /* this input needs a gradient */
    fc_dtype dtype;
    int rank;
    int64_t shape[FC_MAX_RANK];
} fc__ag_input;

struct fc_node {
    const char *op;
    fc__backward_fn backward;
    int64_t id; /* creation order within the context: backward walks ids downward */
    int refs;
    bool freed; /* saved values dropped by a backward without retain_graph */
    int n_in, n_saved;
    fc__ag_input in[FC__AG_MAX_IN];
    fc__saved saved[FC__AG_MAX_SAVED];
    fc_dtype out_dtype;
    int out_rank;
    int64_t out_shape[FC_MAX_RANK];
    int64_t i[8];   /* integer parameters (axes, flags) */
    double f[4];    /* float parameters (eps, slopes) */
    fc_tensor *aux; /* one extra owned tensor (e.g. an index), released with the node */
    void *ext;       /* engine-owned state of ext_size bytes (a checkpoint's closure), freed
                      * with the node; NULL for ops */
    size_t ext_size;
    /* backward bookkeeping */
    fc_tensor *gacc;              /* accumulated output gradient during a backward */
    fc__ag_region *regions;       /* one per input while the rule runs, NULL otherwise */
    fc__hook_list *hooks;         /* hooks on the output's gradient (owned), or NULL */
    fc_tensor *gkeep;             /* fc_autograd_grad: the output's gradient, kept for the caller */
    bool want;                    /* fc_autograd_grad: the output is one of its inputs */
    bool run;                     /* this walk runs the rule (false: pruned) */
    fc_node *next_all, *prev_all; /* every live node of the context */
    int64_t mark;                 /* visit stamp of the current backward */
};

/* True when grad mode is on and at least one input requires grad. NULL
 * entries are skipped. */
bool fc__ag_wants(fc_ctx *ctx, int n, fc_tensor *const *inputs);
/* Records a node for out with n inputs; sets out's node and requires_grad.
 * Returns the node, or NULL after recording FC_ERR_OOM (the caller then
 * releases out and returns NULL). */
fc_node *fc__ag_record(fc_ctx *ctx, const char *op, fc__backward_fn backward, fc_tensor *out,
                       int n, fc_tensor *const *inputs);
/* Saves a view of t (its current generation) as saved value number
 * node->n_saved; FC_ERR_OOM/FC_ERR_INVALID_ARG recorded on failure. */
fc_status fc__ag_save(fc_ctx *ctx, fc_node *node, const char *role, const fc_tensor *t);
/* A new tensor handle over saved value k (shares storage), in the current
 * scope; NULL on failure. */
fc_tensor *fc__ag_saved_tensor(fc_ctx *ctx, fc_node *node, int k);
/* Saved value k as a constant: a new handle (as fc__ag_saved_tensor) that
 * is never linked into a create_graph walk's graph. For what a rule
 * derives only constants from (a mask, a tie weight, an argmax). */
fc_tensor *fc__ag_saved_const(fc_ctx *ctx, fc_node *node, int k);
/* Saved value k itself, borrowed (valid while the node keeps its saved
 * values): what a rule reads when it needs no handle for it. NULL after
 * recording the error fc__ag_saved_tensor records. */
const fc_raw *fc__ag_saved_raw(fc_ctx *ctx, fc_node *node, int k);
/* The gradient dtype for a graph computing in dtype. */
static inline fc_dtype fc__grad_dtype(fc_dtype dtype) { return dtype == FC_F64 ? FC_F64 : FC_F32; }

/* ---- the walk (backward.c), shared by fc_backward and fc_autograd_grad ------- */

/* One walk from n outputs with their gradients (validated by the caller:
 * same context, each output requires grad, gradient of its shape in a float
 * dtype). functional: fc_autograd_grad's walk: only the leaves flagged
 * FC__T_WANTED and the nodes with want get gradients, rules that lead to
 * none of them are pruned, each wanted node's gradient is kept in gkeep and
 * each wanted leaf's stays in its gstage for the caller to take (on success;
 * on failure both are dropped); the leaves' fc_grad is not touched.
 * Otherwise fc_backward's: every leaf's staged gradient lands in its
 * fc_grad on success. Runs hooks in both. Refuses a walk started from a
 * hook (FC_ERR_STATE naming fn). */
typedef struct fc__walk {
    const char *fn; /* the public entry point, for messages */
    bool functional;
    bool retain;
    /* functional without allow_unused: the inputs, each of which must be
     * reached (else FC_ERR_INVALID_ARG naming it, before any rule runs) */
    fc_tensor *const *inputs;
    int n_in;
    /* nested: a walk run from inside a backward rule (fc_grad_checkpoint's
     * recompute). It may start while another walk runs, uses its own node
     * list, refuses nodes older than min_id (the recompute's graph is all
     * it may reach) and leaf hooks on what it reaches, and lands no leaf
     * gradient: it leaves them staged and lists the leaves on the tape
     * (fc__ag_extra_add), so the outermost walk lands them with its own,
     * all or nothing, or drops them when it fails. */
    bool nested;
    int64_t min_id;
    /* create_graph: the walk is itself recorded (rules run with grad mode
     * on, saved values carry their identity, accumulation is recorded) so
     * the gradients it returns are differentiable again. Implies retain. */
    bool create_graph;
    /* a nested create_graph walk (a checkpoint's recompute in a create_graph
     * walk): the nodes older than min_id it may reach, the checkpoint's
     * inputs, which it does not walk but adds into (their accumulators are
     * the outer walk's, which runs them later) */
    fc_node *const *bounds;
    int n_bounds;
} fc__walk;
fc_status fc__ag_walk(fc_ctx *ctx, const fc__walk *w, int n, fc_tensor *const *outs,
                      fc_tensor *const *gouts);

/* True while a create_graph walk runs a rule: the rule must then build
 * every gradient from recorded ops (its composite path) instead of fused
 * kernels, reading saved values through fc__ag_saved_tensor (which links
 * them into the graph). See "create_graph" in ag/graph_grad.c. A true
 * answer is counted (fc__ag_form_count): asking is how a rule tells the
 * engine it has a recorded form, so the constants it returns are meant. */
bool fc__ag_create_graph(const fc_ctx *ctx);
/* The same declaration from a rule that has only a recorded form (every
 * gradient it returns is built from recorded ops, in any walk, so it has
 * no fused path to branch from: the convolution products of ops/conv.c):
 * in a create_graph walk its constants stand. A no-op elsewhere. */
void fc__ag_recorded_rule(const fc_ctx *ctx);
/* Fails the running rule of op: it has no recorded (create_graph) form.
 * Records FC_ERR_UNSUPPORTED naming op and returns it. */
fc_status fc__ag_unsupported(fc_ctx *ctx, const char *op);

/* The walk now running (NULL when none): a nested walk takes its mode. */
const fc__walk *fc__ag_current_walk(const fc_ctx *ctx);
/* The id the next recorded node will get (0 without a tape). */
int64_t fc__ag_next_id(const fc_ctx *ctx);

/* ---- hooks (hooks.c) ------------------------------------------------------------ */
/* Runs the hooks of list h on *g (the gradient, of shape/rank and *g's
 * dtype) in order; a replacement is checked and becomes *g (a private
 * contiguous tensor the engine owns; the old *g is released). who names the
 * tensor for messages. Returns the first failure (the hook's own status,
 * or a mismatch). */
fc_status fc__ag_run_hooks(fc_ctx *ctx, fc__hook_list *h, fc_tensor **g, const int64_t *shape,
                           int rank, const char *who);
/* Frees a hook list (node teardown, handle destroy). */
void fc__ag_hooks_free(fc_ctx *ctx, fc__hook_list *h);
/* Number of leaves of ctx with hooks (0 without a tape): walks count
 * pending edges only when some exist. True while a walk runs. */
int64_t fc__ag_leaf_hook_count(const fc_ctx *ctx);
bool fc__ag_walking(const fc_ctx *ctx);
void fc__ag_set_walking(fc_ctx *ctx, bool on);
/* The tape, created on demand (NULL on OOM); its hook id counter. */
int64_t fc__ag_next_hook_id(fc_ctx *ctx);
void fc__ag_leaf_hooks_add(fc_ctx *ctx, int64_t delta);

/* For backward.c's walk: drops a node's saved values (they are done with),
 * starts a new visit stamp (-1 without a tape), and returns the tape's
 * scratch stack grown to hold need nodes (NULL on OOM or without a tape). */
void fc__ag_release_saved(fc_node *node);
/* A walk's bookkeeping swapped in and out around a nested walk: the node
 * list (the outer walk's stays untouched: it is read after the nested walk
 * returns), the running walk and the walking flag. */
typedef struct fc__ag_walk_save {
    fc_node **stack;
    int64_t stack_cap;
    const fc__walk *walk;
    bool walking, nested;
} fc__ag_walk_save;
void fc__ag_walk_enter(fc_ctx *ctx, const fc__walk *w, fc__ag_walk_save *save);
void fc__ag_walk_leave(fc_ctx *ctx, fc__ag_walk_save *save);
/* Nested walks' staged leaves (see fc__walk.nested). fc__ag_extra_reserve
 * makes room for n more (FC_ERR_OOM recorded on failure, nothing changed);
 * fc__ag_extra_add then lists leaf (retained, once) and cannot fail.
 * fc__ag_extra_list returns the list and its length for the outermost
 * walk, which lands or drops each, then calls fc__ag_extra_clear. */
fc_status fc__ag_extra_reserve(fc_ctx *ctx, int64_t n);
void fc__ag_extra_add(fc_ctx *ctx, fc_tensor *leaf);
fc_tensor **fc__ag_extra_list(fc_ctx *ctx, int64_t *count);
void fc__ag_extra_clear(fc_ctx *ctx);
int64_t fc__ag_new_stamp(fc_ctx *ctx);
fc_node **fc__ag_stack(fc_ctx *ctx, int64_t need);

/* ---- gradient arithmetic (accumulate.c) ---------------------------------------- */

/* Declares, from inside a backward rule, that gin[k] covers only a region
 * of input k: element (i_0, .., i_{r-1}) of gin[k] adds to element
 * offset + sum_d i_d * strides[d] of the input's gradient read in
 * row-major order (strides has one entry per axis of gin[k], the rest
 * ignored). The engine then adds gin[k] straight into that region of the
 * accumulator (creating it zeroed on first use) instead of a full-size
 * tensor that is zero elsewhere: a window op's (narrow, slice, split)
 * adjoint. gin[k] keeps the gradient dtype rules, but does not broadcast:
 * its shape is the region's. The region must lie inside the input and map
 * no two elements to one position; the engine checks that and fails the
 * backward with FC_ERR_STATE otherwise. Returns FC_OK, or FC_ERR_STATE
 * when called outside a rule. */
fc_status fc__ag_gin_region(fc_ctx *ctx, fc_node *node, int k, const int64_t *strides,
                            int64_t offset);
/* The engine's check of the region r the rule declared for input k against
 * its gradient g (FC_ERR_STATE recorded when it is not a window of the
 * input). */
fc_status fc__ag_region_check(fc_ctx *ctx, const fc_node *node, int k, const fc__ag_region *r,
                              const fc_tensor *g);

/* Sums g over the broadcast axes so it has exactly `shape` (rank <= g's
 * rank). Returns g itself when the shapes match, else a new scope-owned
 * tensor (call inside a scope, as backward rules are). The sum adds the
 * rows of g in order whatever the thread count. */
fc_tensor *fc__ag_reduce_to(fc_ctx *ctx, fc_tensor *g, const int64_t *shape, int rank);
/* *target += g (g has the target's shape or broadcasts to it) in gdt,
 * creating the target on first use (taking g itself when nobody else can
 * see its storage, else a copy), and bumping the target's generation when
 * it adds in place. Runs inside a scope: temporaries are scope-owned and
 * the target gets its own reference. */
fc_status fc__ag_add_into(fc_ctx *ctx, fc_tensor **target, fc_tensor *g, fc_dtype gdt,
                          const int64_t *shape, int rank);
/* The same for a node's accumulator (node->gacc), which only the engine
 * sees until the node's rule reads it: a dense gradient in gdt is taken as
 * it is even when other accumulators hold it too (a sum's rule hands its
 * gradient to both inputs), and while the target is shared a later
 * gradient is added out of place, into a new tensor that replaces it.
 * That saves the copy a private accumulator costs; the sums are the same
 * bits. A node's accumulator may therefore be shared: whoever writes into
 * one in place, or hands one to a user, first makes it private
 * (fc__ag_private). */
fc_status fc__ag_add_into_node(fc_ctx *ctx, fc_tensor **target, fc_tensor *g, fc_dtype gdt,
                               const int64_t *shape, int rank);
/* t itself (a new reference) when nobody else sees its storage, else a
 * private contiguous copy (a new reference; NULL with the error recorded). */
fc_tensor *fc__ag_private(fc_ctx *ctx, fc_tensor *t);
/* The same as fc__ag_add_into for a region gradient (reg checked by
 * fc__ag_region_check): adds g into that region of *target, which is
 * created zeroed of `shape` on first use; a shared target (see
 * fc__ag_add_into_node) is replaced, never written. */
fc_status fc__ag_add_region(fc_ctx *ctx, fc_tensor **target, fc_tensor *g, fc_dtype gdt,
                            const int64_t *shape, int rank, const fc__ag_region *reg);

/* ---- recorded gradient arithmetic (graph_grad.c): create_graph walks ----------
 * The same contracts as fc__ag_add_into / fc__ag_add_region, but every step
 * (summing broadcast axes away, the dtype cast, a region's embedding, the
 * addition into the accumulator) is a recorded node whose own rule is
 * recorded too, so the accumulated gradients are differentiable to any
 * order. The target is never written in place: it is replaced by a new
 * tensor (contiguous, gdt). */
fc_status fc__ag_graph_add_into(fc_ctx *ctx, fc_tensor **target, fc_tensor *g, fc_dtype gdt,
                                const int64_t *shape, int rank);
fc_status fc__ag_graph_add_region(fc_ctx *ctx, fc_tensor **target, fc_tensor *g, fc_dtype gdt,
                                  const int64_t *shape, int rank, const fc__ag_region *reg);
/* A rule's constant gradient g (it depends on no value of the graph) as
 * a tensor of the new graph: a new scope-owned handle over g's storage,
 * the output of a recorded node whose one input is src's output (src the
 * node whose rule made g) and whose rule gives zero. So it requires grad
 * as the rule's result would if it were made of recorded ops over src's
 * linked values (PyTorch's backward ops take their saved tensors as
 * inputs), and differentiating it again reaches what src depends on and
 * gives zeros there instead of FC_ERR_NO_GRAD. NULL after an error. */
fc_tensor *fc__ag_graph_constant(fc_ctx *ctx, fc_node *src, fc_tensor *g);
/* accumulate.c's dst += src over their broadcast (f32 or f64, same dtype). */
void fc__ag_acc_raw(fc_ctx *ctx, const fc_raw *dst, const fc_raw *src);
/* How many saved values a create_graph walk's rules have read with their
 * graph identity so far (linked by fc__ag_saved_tensor, or read raw by
 * fc__ag_saved_raw): the engine's evidence that a rule read the graph. */
int64_t fc__ag_linked_count(const fc_ctx *ctx);
/* How many times fc__ag_create_graph has answered true so far. */
int64_t fc__ag_form_count(const fc_ctx *ctx);

#endif /* FUCINA_AG_TAPE_H */
