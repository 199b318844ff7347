/* SPDX-License-Identifier: MIT */
/* fucina/nn.h - layers over the public ops: plain structs, an init function
 * and a forward function each, and a registry of named parameters.
 *
 * A model is a struct holding layer structs. Every layer's init registers
 * its tensors in one fc_nn registry under hierarchical names, PyTorch's
 * state_dict names: a Linear initialised as "blocks.3.attn.q" registers
 * "blocks.3.attn.q.weight" and "blocks.3.attn.q.bias". The registry owns
 * the tensors; a layer struct holds borrowed pointers to them, valid until
 * fc_nn_free. Layers are composed by passing a longer name to the inner
 * layer's init; nothing is a vtable.
 *
 * Parameters are f32 leaves that require grad, initialised as PyTorch's
 * layers initialise them by default (kaiming-uniform with a = sqrt(5) for
 * Linear and Conv2d weights, which is U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
 * the same bound for their biases, N(0, 1) for Embedding, ones and zeros
 * for the norms), drawn from the context RNG (the values differ from
 * torch's, whose generator is another). The fc_nn_init_* functions
 * re-initialise a tensor in place with the usual alternatives.
 *
 * Buffers (BatchNorm's running statistics) are registered too: they are in
 * the state dict but never trainable. num_batches_tracked is kept as an
 * i64 [1] tensor and written as a scalar (shape []), as torch saves it.
 *
 * Forward functions borrow their inputs and return a new reference, or
 * NULL with the error in the context (a NULL input propagates, as for the
 * ops). Inconsistent sizes are refused by the op that meets them, with its
 * message naming the shapes; the layers check what they know first
 * (FC_ERR_SHAPE_MISMATCH naming the layer, the expected and the given
 * size).
 *
 * Init functions return FC_OK or an error recorded in the registry's
 * context: FC_ERR_NULL_ARG, FC_ERR_INVALID_ARG (a size < 1, a bad option,
 * a name already registered or longer than FC_NN_NAME_MAX - 1, naming
 * it), FC_ERR_OOM. On error what the call registered stays registered and
 * is freed with the registry; the layer struct must not be used. */
#ifndef FUCINA_NN_H
#define FUCINA_NN_H

#include <stdbool.h>
#include <stdint.h>

#include "fucina.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The longest parameter name, in bytes with its NUL, that a registry holds. */
#define FC_NN_NAME_MAX 256

/* ---- the registry -------------------------------------------------------------- */
/* A parameter registry (fc_nn_new). */
typedef struct fc_nn fc_nn;

/* Flags of a registered tensor. */
enum {
    FC_NN_BUFFER = 1u << 0,   /* state, not a parameter: never trainable */
    FC_NN_NO_DECAY = 1u << 1, /* bias or norm weight: fc_nn_optim_new's no-decay group */
    FC_NN_SCALAR = 1u << 2,   /* a [1] tensor saved as shape [] */
};

/* A new empty registry in training mode over ctx (borrowed; it must
 * outlive the registry). Its bookkeeping is allocated through ctx's
 * allocator (as tensor storage, so fc_ctx_get_stats counts it). NULL with FC_ERR_NULL_ARG /
 * FC_ERR_OOM recorded in ctx (when not NULL). */
FC_API fc_nn *fc_nn_new(fc_ctx *ctx);
/* Releases every registered tensor. NULL is a harmless no-op. */
FC_API void fc_nn_free(fc_nn *nn);
FC_API fc_ctx *fc_nn_ctx(const fc_nn *nn);

/* Registers t (steals the reference, also on error; a t made inside an
 * open scope is taken out of it, as fc_keep does) as prefix + "." +
 * name (prefix NULL or "": name alone) with FC_NN_* flags. A parameter
 * (no FC_NN_BUFFER) is made to require grad. Errors: FC_ERR_NULL_ARG (nn,
 * name or t), FC_ERR_INVALID_ARG for a duplicate or too long name,
 * FC_ERR_OOM; any of them recorded in the context. */
FC_API fc_status fc_nn_register(fc_nn *nn, const char *prefix, const char *name, fc_tensor *t,
                                unsigned flags);

/* Registered tensors in registration order: the count (0 for NULL), the
 * name, tensor (borrowed) and flags of entry i (NULL / 0 out of range). */
FC_API int64_t fc_nn_count(const fc_nn *nn);
FC_API const char *fc_nn_name_at(const fc_nn *nn, int64_t i);
FC_API fc_tensor *fc_nn_tensor_at(const fc_nn *nn, int64_t i);
FC_API unsigned fc_nn_flags_at(const fc_nn *nn, int64_t i);
/* The tensor registered as name (borrowed), or NULL. */
FC_API fc_tensor *fc_nn_find(const fc_nn *nn, const char *name);

/* Training (the default) or evaluation mode: Dropout and BatchNorm read it
 * at each forward. */
FC_API void fc_nn_set_training(fc_nn *nn, bool training);
FC_API bool fc_nn_training(const fc_nn *nn);

/* Glob match of a whole name: '*' matches any run of characters (dots
 * included), '?' any one; false for NULL. "blocks.*.attn.*", "*.bias". */
FC_API bool fc_nn_name_matches(const char *pattern, const char *name);
/* Freezes (requires_grad off) or unfreezes the parameters whose names
 * match pattern; buffers are never touched. *matched (NULL allowed) gets
 * the number matched. FC_ERR_NULL_ARG; FC_ERR_INVALID_ARG when nothing
 * matches (naming the pattern: a typo would otherwise freeze nothing). */
FC_API fc_status fc_nn_set_frozen(fc_nn *nn, const char *pattern, bool frozen, int64_t *matched);
/* Writes up to cap trainable parameters (not buffers, not frozen;
 * borrowed) to out (NULL allowed with cap 0) in registration order and
 * returns how many there are. */
FC_API int64_t fc_nn_trainable(const fc_nn *nn, fc_tensor **out, int64_t cap);

/* An optimizer over the trainable parameters in two groups: group 0 with
 * opts, group 1 with opts but weight_decay 0, holding the parameters
 * registered with FC_NN_NO_DECAY (the layers' biases and norm weights) and
 * those matching one of the n_no_decay patterns (NULL allowed when 0).
 * A group with no parameter is still created, empty, so the group numbers
 * are fixed. NULL with the error in the context: FC_ERR_NULL_ARG,
 * FC_ERR_INVALID_ARG (n_no_decay < 0, no trainable parameter), and
 * fc_optim_new's errors. */
FC_API fc_optim *fc_nn_optim_new(fc_nn *nn, const fc_optim_opts *opts, const char *const *no_decay,
                                 int n_no_decay);

/* ---- state dict (safetensors, PyTorch's names) ------------------------------------ */
/* Writes every registered tensor under its name, atomically, with the
 * errors of fc_safetensors_save. A torch.nn model with the same layers
 * loads the file (safetensors.torch.load_file then load_state_dict). */
FC_API fc_status fc_nn_save(fc_nn *nn, const char *path);

/* Options of fc_nn_load; zero-initialised is strict. */
typedef struct fc_nn_load_opts {
    bool non_strict; /* false (default): any missing or unexpected name is an error */
} fc_nn_load_opts;

/* What a load found. The lists are the names, comma-separated, truncated
 * with "..." past the buffer; the counts are exact. */
typedef struct fc_nn_load_report {
    int64_t loaded, missing, unexpected;
    char missing_names[1024];
    char unexpected_names[1024];
} fc_nn_load_report;

/* Loads path into the registered tensors (copies; dtypes converted as
 * fc_to does). Missing names (registered, not in the file) and unexpected
 * ones (in the file, not registered) are reported in report (NULL
 * allowed); strict (the default) refuses them with FC_ERR_INVALID_ARG and
 * a message listing them. A tensor of another shape is
 * FC_ERR_SHAPE_MISMATCH naming it and both shapes, strict or not (as
 * torch). The file's errors are fc_safetensors_open's. Nothing is written
 * to any tensor unless the whole load succeeds. NULL opts: strict. */
FC_API fc_status fc_nn_load(fc_nn *nn, const char *path, const fc_nn_load_opts *opts,
                            fc_nn_load_report *report);

/* ---- init schemes (in place, grad mode off for the copy) ---------------------------
 * fan_in = shape[1] * receptive, fan_out = shape[0] * receptive, receptive
 * the product of the dims after the second (torch's rule; rank >= 2 for the
 * fan-based ones: FC_ERR_RANK). Float tensors only (FC_ERR_DTYPE).
 * Errors are recorded in t's context. */
FC_API fc_status fc_nn_init_uniform_(fc_tensor *t, double lo, double hi);
FC_API fc_status fc_nn_init_normal_(fc_tensor *t, double mean, double std);
FC_API fc_status fc_nn_init_constant_(fc_tensor *t, double value);
/* U(-b, b), b = sqrt(6 / ((1 + a^2) fan_in)) (leaky_relu gain). */
FC_API fc_status fc_nn_init_kaiming_uniform_(fc_tensor *t, double a);
/* N(0, s), s = sqrt(2 / ((1 + a^2) fan_in)). */
FC_API fc_status fc_nn_init_kaiming_normal_(fc_tensor *t, double a);
/* U(-b, b), b = gain sqrt(6 / (fan_in + fan_out)). */
FC_API fc_status fc_nn_init_xavier_uniform_(fc_tensor *t, double gain);
/* N(0, gain sqrt(2 / (fan_in + fan_out))). */
FC_API fc_status fc_nn_init_xavier_normal_(fc_tensor *t, double gain);

/* ---- layers ----------------------------------------------------------------------- */
/* y = x w^T + b: x [..., in] -> [..., out]; weight [out, in], bias [out]. */
typedef struct fc_nn_linear {
    const fc_nn *nn;
    fc_tensor *weight, *bias; /* bias NULL without one */
    int64_t in, out;
} fc_nn_linear;
FC_API fc_status fc_nn_linear_init(fc_nn *nn, fc_nn_linear *l, const char *name, int64_t in,
                                   int64_t out, bool bias);
FC_API fc_tensor *fc_nn_linear_forward(const fc_nn_linear *l, fc_tensor *x);

/* ids (integer, any shape) -> [..., dim] rows of weight [num, dim]. */
typedef struct fc_nn_embedding {
    const fc_nn *nn;
    fc_tensor *weight;
    int64_t num, dim;
} fc_nn_embedding;
FC_API fc_status fc_nn_embedding_init(fc_nn *nn, fc_nn_embedding *e, const char *name, int64_t num,
                                      int64_t dim);
FC_API fc_tensor *fc_nn_embedding_forward(const fc_nn_embedding *e, fc_tensor *ids);

/* Over the last axis of length dim. eps 0 means 1e-5 (torch's default). */
typedef struct fc_nn_layer_norm {
    const fc_nn *nn;
    fc_tensor *weight, *bias; /* NULL without affine */
    int64_t dim;
    double eps;
} fc_nn_layer_norm;
FC_API fc_status fc_nn_layer_norm_init(fc_nn *nn, fc_nn_layer_norm *n, const char *name,
                                       int64_t dim, double eps, bool affine);
FC_API fc_tensor *fc_nn_layer_norm_forward(const fc_nn_layer_norm *n, fc_tensor *x);

/* x / sqrt(mean(x^2) + eps) * weight over the last axis. eps 0 means 1e-6. */
typedef struct fc_nn_rms_norm {
    const fc_nn *nn;
    fc_tensor *weight;
    int64_t dim;
    double eps;
} fc_nn_rms_norm;
FC_API fc_status fc_nn_rms_norm_init(fc_nn *nn, fc_nn_rms_norm *n, const char *name, int64_t dim,
                                     double eps);
FC_API fc_tensor *fc_nn_rms_norm_forward(const fc_nn_rms_norm *n, fc_tensor *x);

/* Active in training mode only. p in [0, 1) (FC_ERR_INVALID_ARG). No
 * tensors, so no name. */
typedef struct fc_nn_dropout {
    const fc_nn *nn;
    double p;
} fc_nn_dropout;
FC_API fc_status fc_nn_dropout_init(fc_nn *nn, fc_nn_dropout *d, double p);
FC_API fc_tensor *fc_nn_dropout_forward(const fc_nn_dropout *d, fc_tensor *x);

/* The activations an fc_nn_mlp and an fc_nn_seq apply. */
typedef enum fc_nn_act {
    FC_NN_ACT_GELU = 0, /* exact (erf) GELU, torch's nn.GELU() */
    FC_NN_ACT_GELU_TANH,
    FC_NN_ACT_RELU,
    FC_NN_ACT_SILU,
    FC_NN_ACT_TANH,
    FC_NN_ACT_COUNT
} fc_nn_act;
/* The activation applied to x (FC_ERR_INVALID_ARG for an unknown one). */
FC_API fc_tensor *fc_nn_act_forward(fc_ctx *ctx, fc_nn_act act, fc_tensor *x);

/* fc2(act(fc1(x))): Linears "fc1" [hidden, in] and "fc2" [out, hidden]. */
typedef struct fc_nn_mlp {
    fc_nn_linear fc1, fc2;
    fc_nn_act act;
} fc_nn_mlp;
FC_API fc_status fc_nn_mlp_init(fc_nn *nn, fc_nn_mlp *m, const char *name, int64_t in,
                                int64_t hidden, int64_t out, fc_nn_act act, bool bias);
FC_API fc_tensor *fc_nn_mlp_forward(const fc_nn_mlp *m, fc_tensor *x);

/* down(silu(gate(x)) * up(x)), bias-free Linears "gate", "up" [hidden, dim]
 * and "down" [dim, hidden] (Llama's feed-forward). */
typedef struct fc_nn_swiglu {
    fc_nn_linear gate, up, down;
} fc_nn_swiglu;
FC_API fc_status fc_nn_swiglu_init(fc_nn *nn, fc_nn_swiglu *s, const char *name, int64_t dim,
                                   int64_t hidden);
FC_API fc_tensor *fc_nn_swiglu_forward(const fc_nn_swiglu *s, fc_tensor *x);

/* Multi-head self-attention with Linears "q" [H*D, dim], "k", "v"
 * [Hkv*D, dim] and "o" [dim, H*D], D = dim / n_heads (n_heads must divide
 * dim, n_kv_heads divide n_heads: FC_ERR_INVALID_ARG). x [B, T, dim] ->
 * [B, T, dim] through fc_attention (grouped-query heads when n_kv_heads <
 * n_heads), with fc_rope on q and k ([B, T, H, D]) when rope is set. */
typedef struct fc_nn_mha_opts {
    int64_t dim, n_heads;
    int64_t n_kv_heads; /* 0 means n_heads */
    bool bias;          /* on all four Linears */
    bool causal;
    bool rope;
    fc_rope_opts rope_opts; /* its pos_offset is the first row's position */
} fc_nn_mha_opts;
typedef struct fc_nn_mha {
    fc_nn_linear q, k, v, o;
    fc_nn_mha_opts opts;
    int64_t head_dim;
} fc_nn_mha;
FC_API fc_status fc_nn_mha_init(fc_nn *nn, fc_nn_mha *a, const char *name,
                                const fc_nn_mha_opts *opts);
/* mask: NULL or additive, as fc_attention's. */
FC_API fc_tensor *fc_nn_mha_forward(const fc_nn_mha *a, fc_tensor *x, fc_tensor *mask);

/* weight [cout, cin / groups, kh, kw], bias [cout]; NULL opts: defaults. */
typedef struct fc_nn_conv2d {
    const fc_nn *nn;
    fc_tensor *weight, *bias;
    int64_t cin, cout, kh, kw;
    fc_conv2d_opts opts;
} fc_nn_conv2d;
FC_API fc_status fc_nn_conv2d_init(fc_nn *nn, fc_nn_conv2d *c, const char *name, int64_t cin,
                                   int64_t cout, int64_t kh, int64_t kw, const fc_conv2d_opts *opts,
                                   bool bias);
FC_API fc_tensor *fc_nn_conv2d_forward(const fc_nn_conv2d *c, fc_tensor *x);

/* weight [cout, cin / groups, k], bias [cout]; x [N, cin, L]. */
typedef struct fc_nn_conv1d {
    const fc_nn *nn;
    fc_tensor *weight, *bias;
    int64_t cin, cout, k;
    fc_conv1d_opts opts;
} fc_nn_conv1d;
FC_API fc_status fc_nn_conv1d_init(fc_nn *nn, fc_nn_conv1d *c, const char *name, int64_t cin,
                                   int64_t cout, int64_t k, const fc_conv1d_opts *opts, bool bias);
FC_API fc_tensor *fc_nn_conv1d_forward(const fc_nn_conv1d *c, fc_tensor *x);

/* torch's Conv3d: weight [cout, cin / groups, kd, kh, kw] and bias [cout],
 * kaiming-uniform as Conv2d (bound 1 / sqrt(cin / groups * kd * kh * kw));
 * x [N, cin, D, H, W]; NULL opts: defaults. */
typedef struct fc_nn_conv3d {
    const fc_nn *nn;
    fc_tensor *weight, *bias;
    int64_t cin, cout, kd, kh, kw;
    fc_conv3d_opts opts;
} fc_nn_conv3d;
FC_API fc_status fc_nn_conv3d_init(fc_nn *nn, fc_nn_conv3d *c, const char *name, int64_t cin,
                                   int64_t cout, int64_t kd, int64_t kh, int64_t kw,
                                   const fc_conv3d_opts *opts, bool bias);
FC_API fc_tensor *fc_nn_conv3d_forward(const fc_nn_conv3d *c, fc_tensor *x);

/* torch's ConvTranspose2d: weight [cin, cout / groups, kh, kw] (fan_in
 * from its second axis, as torch computes it), bias [cout]. */
typedef struct fc_nn_conv_transpose2d {
    const fc_nn *nn;
    fc_tensor *weight, *bias;
    int64_t cin, cout, kh, kw;
    fc_conv_transpose2d_opts opts;
} fc_nn_conv_transpose2d;
FC_API fc_status fc_nn_conv_transpose2d_init(fc_nn *nn, fc_nn_conv_transpose2d *c, const char *name,
                                             int64_t cin, int64_t cout, int64_t kh, int64_t kw,
                                             const fc_conv_transpose2d_opts *opts, bool bias);
FC_API fc_tensor *fc_nn_conv_transpose2d_forward(const fc_nn_conv_transpose2d *c, fc_tensor *x);

/* torch's BatchNorm1d/2d over x [N, C, ...]: "weight", "bias" (affine),
 * buffers "running_mean", "running_var", "num_batches_tracked". Training
 * mode normalises with the batch statistics and updates the running ones;
 * eval mode uses the running ones. momentum 0 means 0.1, eps 0 means 1e-5. */
typedef struct fc_nn_batch_norm {
    const fc_nn *nn;
    fc_tensor *weight, *bias, *running_mean, *running_var, *num_batches_tracked;
    int64_t channels;
    double momentum, eps;
} fc_nn_batch_norm;
FC_API fc_status fc_nn_batch_norm_init(fc_nn *nn, fc_nn_batch_norm *b, const char *name,
                                       int64_t channels, double momentum, double eps, bool affine);
FC_API fc_tensor *fc_nn_batch_norm_forward(const fc_nn_batch_norm *b, fc_tensor *x);

/* x [N, C, ...] in groups of C / groups channels; eps 0 means 1e-5. */
typedef struct fc_nn_group_norm {
    const fc_nn *nn;
    fc_tensor *weight, *bias;
    int64_t groups, channels;
    double eps;
} fc_nn_group_norm;
FC_API fc_status fc_nn_group_norm_init(fc_nn *nn, fc_nn_group_norm *g, const char *name,
                                       int64_t groups, int64_t channels, double eps, bool affine);
FC_API fc_tensor *fc_nn_group_norm_forward(const fc_nn_group_norm *g, fc_tensor *x);

/* ---- recurrent layers ----------------------------------------------------------------
 * torch.nn.LSTM / GRU with one layer, one direction and batch_first: x
 * [B, T, in] -> [B, T, hidden], h0 (and c0) [B, hidden] or NULL for zeros;
 * *h_n (and *c_n), NULL allowed, get new references to the last state.
 * Tensors "weight_ih_l0" [G * hidden, in], "weight_hh_l0" [G * hidden,
 * hidden], "bias_ih_l0", "bias_hh_l0" [G * hidden], all U(-1/sqrt(hidden),
 * 1/sqrt(hidden)) as torch; G = 4 gates (i, f, g, o) for LSTM, 3 (r, z, n)
 * for GRU, torch's order. The input projection runs once over all steps;
 * each step is one fc_linear of the state and the gates' elementwise ops,
 * so autograd unrolls the sequence. */
typedef struct fc_nn_rnn {
    const fc_nn *nn;
    fc_tensor *weight_ih, *weight_hh, *bias_ih, *bias_hh; /* biases NULL without */
    int64_t in, hidden, gates;
} fc_nn_rnn;
FC_API fc_status fc_nn_lstm_init(fc_nn *nn, fc_nn_rnn *r, const char *name, int64_t in,
                                 int64_t hidden, bool bias);
FC_API fc_status fc_nn_gru_init(fc_nn *nn, fc_nn_rnn *r, const char *name, int64_t in,
                                int64_t hidden, bool bias);
/* Errors: FC_ERR_SHAPE_MISMATCH naming the layer and the sizes when x is
 * not [B, T, in] or a state not [B, hidden]; FC_ERR_INVALID_ARG when r
 * was made by the other init. */
FC_API fc_tensor *fc_nn_lstm_forward(const fc_nn_rnn *r, fc_tensor *x, fc_tensor *h0, fc_tensor *c0,
                                     fc_tensor **h_n, fc_tensor **c_n);
FC_API fc_tensor *fc_nn_gru_forward(const fc_nn_rnn *r, fc_tensor *x, fc_tensor *h0,
                                    fc_tensor **h_n);

/* ---- Sequential ----------------------------------------------------------------------
 * A chain of up to FC_NN_SEQ_MAX layers applied in order, held by value;
 * item i's tensors are named name + "." + i, as torch.nn.Sequential names
 * them (activations and dropout take an index too). */
#define FC_NN_SEQ_MAX 32
typedef enum fc_nn_kind {
    FC_NN_LINEAR,
    FC_NN_CONV2D,
    FC_NN_LAYER_NORM,
    FC_NN_BATCH_NORM,
    FC_NN_DROPOUT,
    FC_NN_ACT,
    FC_NN_FLATTEN, /* [N, ...] -> [N, rest] (torch's nn.Flatten()) */
    FC_NN_KIND_COUNT
} fc_nn_kind;
/* One layer of a chain: its kind and the layer itself. */
typedef struct fc_nn_seq_item {
    fc_nn_kind kind;
    union {
        fc_nn_linear linear;
        fc_nn_conv2d conv2d;
        fc_nn_layer_norm layer_norm;
        fc_nn_batch_norm batch_norm;
        fc_nn_dropout dropout;
        fc_nn_act act;
    } u;
} fc_nn_seq_item;
/* A chain of at most FC_NN_SEQ_MAX layers applied in order, named name. */
typedef struct fc_nn_seq {
    fc_nn *nn;
    char name[FC_NN_NAME_MAX];
    int n;
    fc_nn_seq_item items[FC_NN_SEQ_MAX];
} fc_nn_seq;
/* Empty chain named name. FC_ERR_NULL_ARG, FC_ERR_INVALID_ARG (too long). */
FC_API fc_status fc_nn_seq_init(fc_nn *nn, fc_nn_seq *s, const char *name);
/* Append a layer, with its init's arguments and errors; FC_ERR_INVALID_ARG
 * when the chain is full. */
FC_API fc_status fc_nn_seq_linear(fc_nn_seq *s, int64_t in, int64_t out, bool bias);
FC_API fc_status fc_nn_seq_conv2d(fc_nn_seq *s, int64_t cin, int64_t cout, int64_t kh, int64_t kw,
                                  const fc_conv2d_opts *opts, bool bias);
FC_API fc_status fc_nn_seq_layer_norm(fc_nn_seq *s, int64_t dim, double eps, bool affine);
FC_API fc_status fc_nn_seq_batch_norm(fc_nn_seq *s, int64_t channels, double momentum, double eps,
                                      bool affine);
FC_API fc_status fc_nn_seq_dropout(fc_nn_seq *s, double p);
FC_API fc_status fc_nn_seq_act(fc_nn_seq *s, fc_nn_act act);
FC_API fc_status fc_nn_seq_flatten(fc_nn_seq *s);
FC_API fc_tensor *fc_nn_seq_forward(const fc_nn_seq *s, fc_tensor *x);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_NN_H */
