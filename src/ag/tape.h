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
 * with FC_ERR_SHAPE_MISMATCH naming the op. Rules run with grad mode off inside a
 * scope and may use every forward op: every tensor they create is released
 * when the node is done, so rules release nothing; gin[k] may be such a
 * temporary, gout itself or a saved tensor (the engine retains what it
 * keeps). Returning an error status (recorded with fc__fail) fails the
 * backward.
 *
 * Nodes are refcounted: by the output handle that points at them and by
 * consumer nodes. Node memory is recycled per context. */
#ifndef FUCINA_AG_TAPE_H
#define FUCINA_AG_TAPE_H

#include "exec/internal.h"
#include "fucina/autograd.h"

#define FC__AG_MAX_IN 4
#define FC__AG_MAX_SAVED 4

typedef struct fc_node fc_node;
typedef fc_status (*fc__backward_fn)(fc_ctx *ctx, fc_node *node, fc_tensor *gout,
                                     fc_tensor **gin);

typedef struct fc__saved {
    fc_raw raw; /* a view holding one buffer reference; raw.buf NULL when freed */
    uint32_t generation;
    const char *role; /* "input", "output", "weight", ... for messages */
} fc__saved;

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
    /* backward bookkeeping */
    fc_tensor *gacc; /* accumulated output gradient during a backward */
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
/* The gradient dtype for a graph computing in dtype. */
static inline fc_dtype fc__grad_dtype(fc_dtype dtype) { return dtype == FC_F64 ? FC_F64 : FC_F32; }
/* Marks a leaf of any float dtype (f64 included, for gradcheck) as requiring grad. */
fc_status fc__ag_set_requires_grad(fc_tensor *t, bool on, bool allow_f64);

/* For backward.c's walk: drops a node's saved values (they are done with),
 * starts a new visit stamp (-1 without a tape), and returns the tape's
 * scratch stack grown to hold need nodes (NULL on OOM or without a tape). */
void fc__ag_release_saved(fc_node *node);
int64_t fc__ag_new_stamp(fc_ctx *ctx);
fc_node **fc__ag_stack(fc_ctx *ctx, int64_t need);

/* Sums g over the broadcast axes so it has exactly `shape` (rank <= g's
 * rank). Returns g itself when the shapes match, else a new scope-owned
 * tensor (call inside a scope, as backward rules are). */
fc_tensor *fc__ag_reduce_to(fc_ctx *ctx, fc_tensor *g, const int64_t *shape, int rank);

#endif /* FUCINA_AG_TAPE_H */
