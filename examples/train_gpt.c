/* SPDX-License-Identifier: MIT */
/* train_gpt.c - a character-level GPT trained with fucina's public API.
 *
 * Goals: one readable file that trains a real decoder-only transformer on
 * any text file, so a reader can see the whole model at once and check it
 * against the PyTorch peer (gpt_train.py in the benchmark peers folder, ../shared/peers
 * beside the project, see bench/compare.sh): token and
 * learned position embeddings, pre-LayerNorm blocks of causal multi-head
 * self-attention and a GELU MLP, a final LayerNorm, an untied linear head,
 * cross-entropy over every position, AdamW with warm-up and cosine decay,
 * gradient clipping. Only the forward pass is written here; fucina's
 * autograd records it and runs the backward.
 *
 * Efficiency: one fused [3C, C] projection makes q, k and v, which are then
 * views of its output (view/narrow/permute, no copies); the causal mask is a
 * bool tensor built once; biases ride inside fc_linear; the loss is the fused
 * fc_cross_entropy; every step runs inside a scope, so its tensors return to
 * the context's pool and the steady state allocates nothing.
 *
 * Run: train_gpt [text file] (default /usr/share/common-licenses/GPL-3,
 * present on every Debian machine). --help lists the options. The default
 * sizes are the gpt_train benchmark's (C=128, 4 layers, 4 heads, T=64,
 * B=16); the default length, 800 steps (fewer when --minutes cannot hold
 * them), suits the default text: it has only 35K characters, and past ~700
 * steps this model starts to memorise it and the validation loss rises.
 * Output goes to --out: metrics.csv, loss.png when gnuplot is installed,
 * and ckpt.safetensors, the checkpoint --resume continues from.
 *
 * Under mpirun (a build with FUCINA_WITH_MPI) the ranks split every batch
 * and average the gradients (common/dist.h): mpirun -np 2 train_gpt
 * --batch 8 --threads 1 takes the steps of --batch 16, and --resume works
 * from a checkpoint of any world size (it holds the data PRNG, which
 * every rank draws the whole batch from).
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fucina.h>

#include "common/args.h"
#include "common/dist.h"
#include "common/progress.h"
#include "common/resume.h"
#include "common/text_data.h"

// ----------------------------------------------------------------------------
// the layers (forward only: autograd records each op for the backward)
// Shapes: B batch, T time, C channels, H heads, hd = C/H, F the MLP width,
// V the vocabulary.

/* one transformer block's parameters, in this order in the model's table */
// clang-format off
enum { LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC1_W, FC1_B, FC2_W, FC2_B,
       NBLOCK };
static const char *const BLOCK_NAMES[NBLOCK] = {
    "ln1.w", "ln1.b", "qkv.w", "qkv.b", "proj.w", "proj.b",
    "ln2.w", "ln2.b", "fc1.w", "fc1.b", "fc2.w", "fc2.b"};
// clang-format on

/* idx (B,T) token ids -> (B,T,C): token embedding plus learned position */
static fc_tensor *embed(fc_ctx *ctx, fc_tensor *wte, fc_tensor *wpe, fc_tensor *idx) {
    int64_t T = fc_tensor_dim(idx, 1);
    return fc_add(ctx, fc_embedding(ctx, wte, idx), fc_narrow(ctx, wpe, 0, 0, T));
}

/* qkv (B,T,3,H,hd) -> the which-th of q, k, v as a view permuted by perm */
static fc_tensor *head_view(fc_ctx *ctx, fc_tensor *qkv, int which, const int *perm) {
    return fc_permute(ctx, fc_squeeze(ctx, fc_narrow(ctx, qkv, 2, which, 1), 2), perm);
}

/* x (B,T,C) -> (B,T,C): causal multi-head self-attention. mask (T,T) is
 * true above the diagonal, where a query would see the future. */
static fc_tensor *attention(fc_ctx *ctx, fc_tensor *const *p, int64_t H, fc_tensor *mask,
                            fc_tensor *x) {
    int64_t B = fc_tensor_dim(x, 0), T = fc_tensor_dim(x, 1), C = fc_tensor_dim(x, 2);
    int64_t hd = C / H;
    fc_tensor *qkv = fc_linear(ctx, x, p[QKV_W], p[QKV_B]);            /* (B,T,3C) */
    qkv = fc_view(ctx, qkv, (const int64_t[]){B, T, 3, H, hd}, 5);     /* (B,T,3,H,hd) */
    fc_tensor *q = head_view(ctx, qkv, 0, (const int[]){0, 2, 1, 3});  /* (B,H,T,hd) */
    fc_tensor *kt = head_view(ctx, qkv, 1, (const int[]){0, 2, 3, 1}); /* (B,H,hd,T) */
    fc_tensor *v = head_view(ctx, qkv, 2, (const int[]){0, 2, 1, 3});  /* (B,H,T,hd) */
    /* scaling q (T*hd per head) is cheaper than scaling the scores (T*T) */
    fc_tensor *att = fc_matmul(ctx, fc_mul_scalar(ctx, q, 1.0 / sqrt((double)hd)), kt);
    att = fc_softmax(ctx, fc_masked_fill(ctx, att, mask, -INFINITY), -1); /* (B,H,T,T) */
    fc_tensor *y = fc_matmul(ctx, att, v);                                /* (B,H,T,hd) */
    y = fc_permute(ctx, y, (const int[]){0, 2, 1, 3});                    /* (B,T,H,hd) */
    y = fc_reshape(ctx, y, (const int64_t[]){B, T, C}, 3);                /* (B,T,C) */
    return fc_linear(ctx, y, p[PROJ_W], p[PROJ_B]);
}

/* x (B,T,C) -> (B,T,C): Linear(C,F), GELU (tanh form), Linear(F,C) */
static fc_tensor *mlp(fc_ctx *ctx, fc_tensor *const *p, fc_tensor *x) {
    fc_tensor *h = fc_gelu(ctx, fc_linear(ctx, x, p[FC1_W], p[FC1_B]), true); /* (B,T,F) */
    return fc_linear(ctx, h, p[FC2_W], p[FC2_B]);
}

/* x (B,T,C) -> (B,T,C): pre-LayerNorm residual block */
static fc_tensor *block(fc_ctx *ctx, fc_tensor *const *p, int64_t H, fc_tensor *mask,
                        fc_tensor *x) {
    const double eps = 1e-5;
    x = fc_add(ctx, x, attention(ctx, p, H, mask, fc_layer_norm(ctx, x, p[LN1_W], p[LN1_B], eps)));
    return fc_add(ctx, x, mlp(ctx, p, fc_layer_norm(ctx, x, p[LN2_W], p[LN2_B], eps)));
}

// ----------------------------------------------------------------------------
// the model: sizes, parameters, initialisation, forward, loss

typedef struct gpt_config {
    int64_t vocab;   /* V: distinct bytes of the text */
    int64_t block;   /* T: the longest context */
    int64_t d_model; /* C */
    int64_t n_layer; /* L */
    int64_t n_head;  /* H (divides C) */
    int64_t d_ff;    /* F: the MLP's hidden width */
} gpt_config;

typedef struct block_call block_call;

typedef struct gpt_model {
    gpt_config cfg;
    int nparams;
    fc_tensor **params; /* wte, wpe, L * NBLOCK block params, lnf.w, lnf.b, head.w */
    char **names;       /* one per parameter, for checkpoints */
    fc_tensor *mask;    /* (T,T) bool, true above the diagonal */
    bool recompute;     /* --checkpoint: each block recomputed in backward */
    block_call *calls;  /* one per block, the user pointer of its checkpoint */
} gpt_model;

/* --checkpoint: block l of m as a function of its input alone, for
 * fc_grad_checkpoint (which keeps this pointer until the backward) */
struct block_call {
    const gpt_model *m;
    int64_t l;
};

enum { P_WTE, P_WPE, P_BLOCKS };
static fc_tensor *const *block_params(const gpt_model *m, int64_t l) {
    return m->params + P_BLOCKS + l * NBLOCK;
}
static int p_lnf(const gpt_model *m) { return P_BLOCKS + (int)m->cfg.n_layer * NBLOCK; }

/* a leaf of shape with U(-bound, bound) entries from the context RNG */
static fc_tensor *param_uniform(fc_ctx *ctx, const int64_t *shape, int rank, double bound) {
    fc_tensor *t = fc_rand(ctx, FC_F32, shape, rank);
    fc_tensor *lo = fc_scalar(ctx, FC_F32, -bound);
    bool ok = t && lo && fc_mul_scalar_(t, 2 * bound) == FC_OK && fc_add_(t, lo) == FC_OK &&
              fc_requires_grad(t, true) == FC_OK;
    fc_release(lo);
    if (!ok) {
        fc_release(t);
        return NULL;
    }
    return t;
}

static fc_tensor *param_const(fc_ctx *ctx, int64_t n, double value) {
    fc_tensor *t = fc_full(ctx, FC_F32, &n, 1, value);
    if (t && fc_requires_grad(t, true) != FC_OK) {
        fc_release(t);
        return NULL;
    }
    return t;
}

/* PyTorch's default initialisation, as in the peer: Linear weights and
 * biases U(-1/sqrt(in), 1/sqrt(in)), token embedding N(0,1), position
 * embedding N(0, 0.02), LayerNorm weight 1 and bias 0. */
static fc_status gpt_init(fc_ctx *ctx, gpt_model *m, const gpt_config *cfg) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    int64_t V = cfg->vocab, T = cfg->block, C = cfg->d_model, F = cfg->d_ff;
    m->nparams = P_BLOCKS + (int)cfg->n_layer * NBLOCK + 3;
    m->params = calloc((size_t)m->nparams, sizeof *m->params);
    m->names = calloc((size_t)m->nparams, sizeof *m->names);
    m->calls = calloc((size_t)cfg->n_layer, sizeof *m->calls);
    if (!m->params || !m->names || !m->calls) return FC_ERR_OOM;
    for (int64_t l = 0; l < cfg->n_layer; l++)
        m->calls[l] = (block_call){m, l};
    fc_tensor **p = m->params;
    p[P_WTE] = fc_param_randn(ctx, FC_F32, (const int64_t[]){V, C}, 2, 1.0);
    p[P_WPE] = fc_param_randn(ctx, FC_F32, (const int64_t[]){T, C}, 2, 0.02);
    double bc = 1 / sqrt((double)C), bf = 1 / sqrt((double)F);
    for (int64_t l = 0; l < cfg->n_layer; l++) {
        fc_tensor **b = p + P_BLOCKS + l * NBLOCK;
        b[LN1_W] = param_const(ctx, C, 1);
        b[LN1_B] = param_const(ctx, C, 0);
        b[QKV_W] = param_uniform(ctx, (const int64_t[]){3 * C, C}, 2, bc);
        b[QKV_B] = param_uniform(ctx, (const int64_t[]){3 * C}, 1, bc);
        b[PROJ_W] = param_uniform(ctx, (const int64_t[]){C, C}, 2, bc);
        b[PROJ_B] = param_uniform(ctx, (const int64_t[]){C}, 1, bc);
        b[LN2_W] = param_const(ctx, C, 1);
        b[LN2_B] = param_const(ctx, C, 0);
        b[FC1_W] = param_uniform(ctx, (const int64_t[]){F, C}, 2, bc);
        b[FC1_B] = param_uniform(ctx, (const int64_t[]){F}, 1, bc);
        b[FC2_W] = param_uniform(ctx, (const int64_t[]){C, F}, 2, bf);
        b[FC2_B] = param_uniform(ctx, (const int64_t[]){C}, 1, bf);
    }
    int f = p_lnf(m);
    p[f] = param_const(ctx, C, 1);
    p[f + 1] = param_const(ctx, C, 0);
    p[f + 2] = param_uniform(ctx, (const int64_t[]){V, C}, 2, bc);
    for (int i = 0; i < m->nparams; i++) {
        char name[64];
        if (i < P_BLOCKS)
            snprintf(name, sizeof name, "%s", i == P_WTE ? "wte" : "wpe");
        else if (i < f)
            snprintf(name, sizeof name, "h%d.%s", (i - P_BLOCKS) / NBLOCK,
                     BLOCK_NAMES[(i - P_BLOCKS) % NBLOCK]);
        else
            snprintf(name, sizeof name, "%s", (const char *[]){"lnf.w", "lnf.b", "head.w"}[i - f]);
        m->names[i] = strdup(name);
        if (!m->names[i]) return FC_ERR_OOM;
    }
    /* the causal mask, once: row i may look at columns 0..i */
    unsigned char *mk = malloc((size_t)(T * T));
    if (!mk) return FC_ERR_OOM;
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < T; j++)
            mk[i * T + j] = j > i;
    m->mask = fc_tensor_from_data(ctx, FC_BOOL, (const int64_t[]){T, T}, 2, mk);
    free(mk);
    return fc_ctx_status(ctx);
}

static void gpt_free(gpt_model *m) {
    for (int i = 0; m->params && i < m->nparams; i++)
        fc_release(m->params[i]);
    for (int i = 0; m->names && i < m->nparams; i++)
        free(m->names[i]);
    free(m->params);
    free(m->names);
    free(m->calls);
    fc_release(m->mask);
    memset(m, 0, sizeof *m);
}

static int64_t gpt_numel(const gpt_model *m) {
    int64_t n = 0;
    for (int i = 0; i < m->nparams; i++)
        n += fc_tensor_numel(m->params[i]);
    return n;
}

static fc_tensor *causal_mask(fc_ctx *ctx, const gpt_model *m, int64_t T) {
    return fc_narrow(ctx, fc_narrow(ctx, m->mask, 0, 0, T), 1, 0, T); /* (T,T) */
}

/* --checkpoint: x (B,T,C) -> block(x), its intermediates released (only
 * the input is kept; fc_grad_checkpoint runs this again in backward) */
static fc_tensor *block_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    const block_call *c = user;
    const gpt_model *m = c->m;
    fc_scope_begin(ctx);
    fc_tensor *mask = causal_mask(ctx, m, fc_tensor_dim(in[0], 1));
    fc_tensor *y = fc_keep(block(ctx, block_params(m, c->l), m->cfg.n_head, mask, in[0]));
    fc_scope_end(ctx);
    return y;
}

/* idx (B,T) i64, T <= block -> logits (B,T,V) */
static fc_tensor *gpt_forward(fc_ctx *ctx, const gpt_model *m, fc_tensor *idx) {
    int64_t T = fc_tensor_dim(idx, 1);
    fc_tensor *mask = causal_mask(ctx, m, T);                           /* (T,T) */
    fc_tensor *x = embed(ctx, m->params[P_WTE], m->params[P_WPE], idx); /* (B,T,C) */
    for (int64_t l = 0; l < m->cfg.n_layer; l++)
        x = m->recompute && x ? fc_grad_checkpoint(ctx, block_fn, &m->calls[l], &x, 1)
                              : block(ctx, block_params(m, l), m->cfg.n_head, mask, x);
    int f = p_lnf(m);
    x = fc_layer_norm(ctx, x, m->params[f], m->params[f + 1], 1e-5);
    return fc_linear(ctx, x, m->params[f + 2], NULL); /* (B,T,V) */
}

/* idx (B,T), targets (B*T) -> mean cross-entropy over all B*T positions */
static fc_tensor *gpt_loss(fc_ctx *ctx, const gpt_model *m, fc_tensor *idx, fc_tensor *targets) {
    int64_t BT = fc_tensor_dim(idx, 0) * fc_tensor_dim(idx, 1);
    fc_tensor *logits = gpt_forward(ctx, m, idx);
    return fc_cross_entropy(ctx, fc_view(ctx, logits, (const int64_t[]){BT, m->cfg.vocab}, 2),
                            targets, NULL);
}

// ----------------------------------------------------------------------------
// the data (common/text_data.h): the text as byte-level tokens, every 10th
// block held out for validation, random training windows per step

// ----------------------------------------------------------------------------
// evaluation and sampling (no graph is recorded for either)

/* mean loss over every validation window (this rank's share, the ranks'
 * sums added), B at a time; NAN when an op failed (the error is in ctx) */
static double eval_loss(fc_ctx *ctx, const gpt_model *m, const ex_text *d, int64_t B,
                        ex_dist *dist) {
    int64_t T = m->cfg.block, nw = d->nval, lo, hi;
    ex_dist_share(dist, nw, &lo, &hi);
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(2 * B * T));
    if (!idx) return NAN;
    int64_t *tgt = idx + B * T;
    double total = 0;
    fc_no_grad_begin(ctx);
    for (int64_t w0 = lo; w0 < hi; w0 += B) {
        int64_t rows = hi - w0 < B ? hi - w0 : B;
        ex_text_windows(d, d->val_off + w0, rows, T, idx, tgt);
        fc_scope_begin(ctx);
        fc_tensor *ti = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){rows, T}, 2, idx);
        fc_tensor *tt = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){rows * T}, 1, tgt);
        double l = NAN;
        fc_tensor_item(gpt_loss(ctx, m, ti, tt), &l);
        fc_scope_end(ctx);
        total += l * (double)rows;
    }
    fc_no_grad_end(ctx);
    free(idx);
    if (fc_ctx_status(ctx) != FC_OK || !ex_dist_sum(dist, &total, 1)) return NAN;
    return total / (double)nw;
}

/* n characters sampled from the model into out (n+1 bytes), starting after
 * a newline; temperature <= 0 picks the most likely character */
static fc_status sample_text(fc_ctx *ctx, const gpt_model *m, const ex_text *d, int64_t n,
                             double temperature, uint64_t *rng, char *out) {
    int64_t T = m->cfg.block, V = m->cfg.vocab;
    int64_t *ctxt = malloc(sizeof(int64_t) * (size_t)(n + 1));
    float *logits = calloc((size_t)V, sizeof(float));
    if (!ctxt || !logits) {
        free(ctxt);
        free(logits);
        return FC_ERR_OOM;
    }
    const unsigned char *nl = memchr(d->chars, '\n', (size_t)d->vocab);
    ctxt[0] = nl ? nl - d->chars : 0;
    fc_no_grad_begin(ctx);
    for (int64_t i = 0; i < n && fc_ctx_status(ctx) == FC_OK; i++) {
        int64_t len = i + 1, t = len < T ? len : T;
        fc_scope_begin(ctx);
        fc_tensor *in =
            fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){1, t}, 2, ctxt + len - t);
        fc_tensor *last = fc_narrow(ctx, gpt_forward(ctx, m, in), 1, t - 1, 1); /* (1,1,V) */
        if (last) fc_tensor_copy_out(logits, sizeof(float) * (size_t)V, last);
        fc_scope_end(ctx);
        /* softmax(logits / temperature), then one draw from it */
        int64_t pick = 0;
        for (int64_t k = 1; k < V; k++)
            if (logits[k] > logits[pick]) pick = k;
        if (temperature > 0) {
            double z = 0, u;
            for (int64_t k = 0; k < V; k++)
                z += exp((logits[k] - logits[pick]) / temperature);
            u = ex_rand_unit(rng) * z;
            for (int64_t k = 0; k < V; k++) {
                u -= exp((logits[k] - logits[pick]) / temperature);
                if (u < 0) {
                    pick = k;
                    break;
                }
            }
        }
        ctxt[len] = pick;
        out[i] = (char)d->chars[pick];
    }
    fc_no_grad_end(ctx);
    out[n] = '\0';
    free(ctxt);
    free(logits);
    return fc_ctx_status(ctx);
}

// ----------------------------------------------------------------------------
// options

typedef struct options {
    const char *data, *out, *profile;
    int64_t d_model, n_layer, n_head, block, d_ff, batch;
    int64_t steps, stop_after, warmup, eval_every, sample_every, sample_len, ckpt_every;
    int64_t threads, seed;
    double minutes, lr, min_lr, weight_decay, clip, temperature, expect_drop;
    bool resume, checkpoint;
} options;

static int parse_options(int argc, char **argv, options *o) {
    // clang-format off
    *o = (options){.data = "/usr/share/common-licenses/GPL-3", .out = "train_gpt_out",
                   .d_model = 128, .n_layer = 4, .n_head = 4, .block = 64, .d_ff = 0,
                   .batch = 16, .steps = 800, .warmup = 50, .eval_every = 100,
                   .sample_every = 400, .sample_len = 240, .ckpt_every = 200, .threads = 0,
                   .seed = 1337, .minutes = 3, .lr = 3e-3, .min_lr = 1e-4,
                   .weight_decay = 0.1, .clip = 1.0, .temperature = 0.8, .expect_drop = -1,
                   .profile = ""};
    // clang-format on
    const ex_arg args[] = {
        {"data", EX_ARG_STRING, &o->data, "text file to train on (or the bare argument)", EX_ANY},
        {"out", EX_ARG_STRING, &o->out, "directory for metrics.csv, loss.png, ckpt.safetensors",
         EX_ANY},
        {"d-model", EX_ARG_INT, &o->d_model, "embedding width C", EX_MIN(1)},
        {"layers", EX_ARG_INT, &o->n_layer, "transformer blocks", EX_MIN(1)},
        {"heads", EX_ARG_INT, &o->n_head, "attention heads (divide d-model)", EX_MIN(1)},
        {"block", EX_ARG_INT, &o->block, "context length T", EX_MIN(2)},
        {"ff", EX_ARG_INT, &o->d_ff, "MLP hidden width (0: 4 * d-model)", EX_MIN(0)},
        {"batch", EX_ARG_INT, &o->batch, "sequences per step B", EX_MIN(1)},
        {"steps", EX_ARG_INT, &o->steps,
         "optimizer steps (the schedule's length; a --resume keeps it)", EX_MIN(1)},
        {"stop-after", EX_ARG_INT, &o->stop_after,
         "stop at this step, keeping the schedule of --steps (0: no stop)", EX_MIN(0)},
        {"minutes", EX_ARG_DOUBLE, &o->minutes, "wall-clock budget; 0 for none", EX_MIN(0)},
        {"lr", EX_ARG_DOUBLE, &o->lr, "peak learning rate", EX_POS},
        {"min-lr", EX_ARG_DOUBLE, &o->min_lr, "learning rate at the end of the cosine", EX_MIN(0)},
        {"warmup", EX_ARG_INT, &o->warmup, "linear warm-up steps", EX_MIN(0)},
        {"weight-decay", EX_ARG_DOUBLE, &o->weight_decay, "AdamW decoupled weight decay",
         EX_MIN(0)},
        {"clip", EX_ARG_DOUBLE, &o->clip, "clip the global gradient norm to this (0: off)",
         EX_MIN(0)},
        {"eval-every", EX_ARG_INT, &o->eval_every, "validation loss period in steps", EX_MIN(1)},
        {"sample-every", EX_ARG_INT, &o->sample_every, "sample period in steps (0: end only)",
         EX_MIN(0)},
        {"sample-len", EX_ARG_INT, &o->sample_len, "characters per sample", EX_MIN(0)},
        {"temperature", EX_ARG_DOUBLE, &o->temperature, "sampling temperature (0: greedy)",
         EX_MIN(0)},
        {"ckpt-every", EX_ARG_INT, &o->ckpt_every, "checkpoint period in steps (0: end only)",
         EX_MIN(0)},
        {"resume", EX_ARG_FLAG, &o->resume,
         "continue from <out>/ckpt.safetensors with the same --steps, --warmup, --lr, --min-lr "
         "(another schedule is refused: exit 2; a complete run has nothing to do)",
         EX_ANY},
        {"checkpoint", EX_ARG_FLAG, &o->checkpoint,
         "gradient checkpointing: keep only each block's input, recompute it in backward", EX_ANY},
        {"threads", EX_ARG_INT, &o->threads, "worker threads (0: every core)", EX_MIN(0)},
        {"seed", EX_ARG_INT, &o->seed, "seed of the initialisation and the data order", EX_ANY},
        {"profile", EX_ARG_STRING, &o->profile,
         "profile the training steps: a Chrome trace to this file, a table per op to stdout "
         "(empty: off)",
         EX_ANY},
        {"expect-drop", EX_ARG_DOUBLE, &o->expect_drop,
         "exit 1 unless the validation loss fell by this much (for tests)", EX_ANY},
    };
    ex_args_result r = ex_args_parse(argc, argv, args, (int)(sizeof args / sizeof *args), &o->data,
                                     "[options] [text file]");
    if (r != EX_ARGS_OK) return r == EX_ARGS_HELP ? 0 : 2;
    if (o->d_ff == 0) o->d_ff = 4 * o->d_model;
    /* each value's own range is the parser's (args.h); what is left relates two */
    if (o->d_model % o->n_head) {
        fprintf(stderr, "train_gpt: --heads %lld must divide --d-model %lld\n",
                (long long)o->n_head, (long long)o->d_model);
        return 2;
    }
    return -1; /* go on */
}

// ----------------------------------------------------------------------------
// checkpoints: the whole run state, so --resume continues exactly
// fucina's checkpoint file (fucina/checkpoint.h) holds the parameters, the
// AdamW moments and step count and the context RNG; the trainer adds its own
// integers as metadata: where it is, its data-order PRNG, and the sizes and
// text it was made with, which a resume must match; and as texts
// (common/resume.h) the run's elapsed time, the schedule it was asked for
// (which a resume must ask for too) and the schedule as a time budget may
// have shortened it (which a resume continues).

/* the texts; a checkpoint written before them has none ("" on loading) */
enum { X_ELAPSED, X_SCHEDULE, X_SCHEDULE_NOW, NEXTRA };
static const char *const EXTRA_KEYS[NEXTRA] = {"train_gpt.elapsed_ms", "train_gpt.schedule",
                                               "train_gpt.schedule_now"};
typedef struct ckpt_extra {
    char text[NEXTRA][160];
} ckpt_extra;

enum { V_STEP, V_DATA_RNG, V_TEXT, V_VOCAB, V_BLOCK, V_C, V_L, V_H, V_F, NVALUES };
static const char *const META_KEYS[NVALUES] = {
    "train_gpt.step",    "train_gpt.data_rng", "train_gpt.text_hash",
    "train_gpt.vocab",   "train_gpt.block",    "train_gpt.d_model",
    "train_gpt.n_layer", "train_gpt.n_head",   "train_gpt.d_ff"};

static void meta_values(uint64_t *v, int64_t step, uint64_t data_rng, const ex_text *d,
                        const gpt_config *c) {
    const uint64_t x[NVALUES] = {(uint64_t)step,
                                 data_rng,
                                 d->hash,
                                 (uint64_t)c->vocab,
                                 (uint64_t)c->block,
                                 (uint64_t)c->d_model,
                                 (uint64_t)c->n_layer,
                                 (uint64_t)c->n_head,
                                 (uint64_t)c->d_ff};
    memcpy(v, x, sizeof x);
}

static fc_status save_checkpoint(const char *path, fc_ctx *ctx, fc_optim *opt, const gpt_model *m,
                                 const ex_text *d, int64_t step, uint64_t data_rng,
                                 const ckpt_extra *x) {
    uint64_t v[NVALUES];
    char text[NVALUES][24];
    const char *keys[NVALUES + NEXTRA], *vals[NVALUES + NEXTRA];
    meta_values(v, step, data_rng, d, &m->cfg);
    for (int i = 0; i < NVALUES; i++) {
        snprintf(text[i], sizeof text[i], "%llu", (unsigned long long)v[i]);
        keys[i] = META_KEYS[i];
        vals[i] = text[i];
    }
    for (int i = 0; i < NEXTRA; i++) {
        keys[NVALUES + i] = EXTRA_KEYS[i];
        vals[NVALUES + i] = x->text[i];
    }
    fc_status st = fc_checkpoint_save(ctx, path, (const char *const *)m->names, m->params,
                                      m->nparams, opt, keys, vals, NVALUES + NEXTRA);
    if (st != FC_OK) fprintf(stderr, "train_gpt: saving %s: %s\n", path, fc_ctx_error(ctx));
    return st;
}

/* Restores the run; *step and *data_rng get the saved position, *x the
 * texts ("" for those the checkpoint lacks). */
static fc_status load_checkpoint(const char *path, fc_ctx *ctx, fc_optim *opt, const gpt_model *m,
                                 const ex_text *d, int64_t *step, uint64_t *data_rng,
                                 ckpt_extra *x) {
    char msg[256] = "";
    fc_st_file *f = NULL;
    fc_status st =
        fc_safetensors_open(path, &(fc_io_opts){.errbuf = msg, .errcap = sizeof msg}, &f);
    if (st != FC_OK) {
        fprintf(stderr, "train_gpt: cannot resume: %s\n", msg);
        return st;
    }
    uint64_t got[NVALUES], want[NVALUES];
    meta_values(want, 0, 0, d, &m->cfg);
    for (int i = 0; i < NVALUES && st == FC_OK; i++) {
        const char *s = fc_safetensors_meta_find(f, META_KEYS[i]);
        char *end = NULL;
        got[i] = s ? strtoull(s, &end, 10) : 0;
        if (!s || !*s || *end) {
            fprintf(stderr, "train_gpt: %s has no valid %s: not a train_gpt checkpoint\n", path,
                    META_KEYS[i]);
            st = FC_ERR_FORMAT;
        } else if (i >= V_TEXT && got[i] != want[i]) {
            fprintf(stderr, "train_gpt: %s was made with %s = %llu, this run has %llu\n", path,
                    META_KEYS[i], (unsigned long long)got[i], (unsigned long long)want[i]);
            st = FC_ERR_FORMAT;
        }
    }
    for (int i = 0; i < NEXTRA; i++) {
        const char *s = fc_safetensors_meta_find(f, EXTRA_KEYS[i]);
        snprintf(x->text[i], sizeof x->text[i], "%s", s ? s : "");
    }
    fc_safetensors_close(f);
    if (st != FC_OK) return st;
    st = fc_checkpoint_load(ctx, path, (const char *const *)m->names, m->params, m->nparams, opt);
    if (st != FC_OK) {
        fprintf(stderr, "train_gpt: loading %s: %s\n", path, fc_ctx_error(ctx));
        return st;
    }
    *step = (int64_t)got[V_STEP];
    *data_rng = got[V_DATA_RNG];
    return FC_OK;
}

// ----------------------------------------------------------------------------
// training

static volatile sig_atomic_t g_stop;
static void on_sigint(int sig) {
    g_stop = 1;
    signal(sig, SIG_DFL); /* a second Ctrl-C ends the program at once */
}

/* one row of metrics.csv (NAN fields are left empty) */
typedef struct csv_row_vals {
    int64_t step; /* -1: none pending */
    double lr, loss, val, gnorm, tps, elapsed;
} csv_row_vals;

typedef struct run {
    options o;
    ex_text data;
    gpt_model model;
    fc_ctx *ctx;
    ex_dist dist;
    fc_optim *opt;
    fc_lr_schedule sched;
    fc_tensor *idx, *tgt; /* the step's batch, (B,T) and (B*T) i64, refilled each step */
    int64_t *all_idx;     /* with several ranks: the whole step's batch, (size*B,T) and targets */
    uint64_t data_rng, sample_rng;
    int64_t step;         /* optimizer steps done */
    int64_t planned;      /* where the schedule ends: --steps, or what the budget fits */
    fc_lr_schedule asked; /* the schedule of the options, before a budget shortens it */
    FILE *csv;
    csv_row_vals row; /* the latest step's row, not yet written (see csv_row) */
    bool interrupted; /* the loop ended on Ctrl-C */
    double before_s;  /* the run's seconds before this process (a resume's) */
    int64_t csv_last; /* on resume: the step of metrics.csv's last row kept */
    int exit_code;    /* when setup fails or finds nothing to do: how main exits */
    ex_progress bar;
    double train_last;                    /* the latest step's training loss */
    double val_first, val_last, val_best; /* this run's first, latest and best val loss */
    int64_t val_step, best_step;          /* when val_last and val_best were measured */
    double *step_ms;                      /* wall time of each step of this run */
    int64_t nsteps_run;
    char path[3][4096]; /* csv, png, ckpt */
} run;

/* one optimizer step on a fresh training batch (this rank's slice of it);
 * the loss (the ranks' mean), or NAN on error */
static double train_step(run *r, double *grad_norm) {
    fc_ctx *ctx = r->ctx;
    int64_t B = r->o.batch, T = r->o.block;
    double loss = NAN;
    *grad_norm = NAN;
    fc_scope_begin(ctx);
    int64_t *idx = fc_tensor_data_mut(r->idx), *tgt = fc_tensor_data_mut(r->tgt);
    if (idx && tgt && r->dist.size == 1) ex_text_batch(&r->data, B, T, &r->data_rng, idx, tgt);
    if (idx && tgt && r->dist.size > 1) {
        /* every rank draws the same whole batch and keeps its rows */
        int64_t n = r->dist.size * B * T, *all_tgt = r->all_idx + n, off = r->dist.rank * B * T;
        ex_text_batch(&r->data, r->dist.size * B, T, &r->data_rng, r->all_idx, all_tgt);
        memcpy(idx, r->all_idx + off, sizeof(int64_t) * (size_t)(B * T));
        memcpy(tgt, all_tgt + off, sizeof(int64_t) * (size_t)(B * T));
    }
    fc_tensor *l = gpt_loss(ctx, &r->model, r->idx, r->tgt);
    if (l && fc_backward(ctx, l) == FC_OK && ex_dist_sync(&r->dist) == FC_OK &&
        (r->o.clip == 0 || fc_clip_grad_norm(ctx, r->model.params, r->model.nparams, r->o.clip,
                                             grad_norm) == FC_OK) &&
        fc_optim_set_lr(r->opt, fc_lr_at(&r->sched, r->step)) == FC_OK &&
        fc_optim_step(r->opt) == FC_OK)
        fc_tensor_item(l, &loss);
    fc_optim_zero_grad(r->opt);
    fc_scope_end(ctx);
    if (fc_ctx_status(ctx) != FC_OK || !ex_dist_mean(&r->dist, &loss, 1)) return NAN;
    return loss;
}

static bool evaluate(run *r) {
    double v = eval_loss(r->ctx, &r->model, &r->data, r->o.batch, &r->dist);
    if (isnan(v)) return false;
    if (isnan(r->val_first)) r->val_first = v;
    r->val_last = v;
    r->val_step = r->step;
    if (!(v >= r->val_best)) {
        r->val_best = v;
        r->best_step = r->step;
    }
    ex_progress_note(&r->bar, "step %lld: val loss %.4f", (long long)r->step, v);
    return true;
}

static bool print_sample(run *r) {
    if (!ex_dist_is_main(&r->dist)) return true; /* rank 0 samples and prints */
    char *s = malloc((size_t)r->o.sample_len + 1);
    if (!s) return false;
    fc_status st = sample_text(r->ctx, &r->model, &r->data, r->o.sample_len, r->o.temperature,
                               &r->sample_rng, s);
    if (st == FC_OK)
        ex_progress_note(&r->bar, "---- sample at step %lld (temperature %g) ----\n%s\n----",
                         (long long)r->step, r->o.temperature, s);
    free(s);
    return st == FC_OK;
}

/* Writes the pending row, if any. */
static void csv_flush(run *r) {
    const csv_row_vals *w = &r->row;
    if (!r->csv || w->step < 0) return;
    fprintf(r->csv, "%lld,%.6g,", (long long)w->step, w->lr);
    if (!isnan(w->loss)) fprintf(r->csv, "%.6f", w->loss);
    fputc(',', r->csv);
    if (!isnan(w->val)) fprintf(r->csv, "%.6f", w->val);
    fputc(',', r->csv);
    if (!isnan(w->gnorm)) fprintf(r->csv, "%.4f", w->gnorm);
    fprintf(r->csv, ",%.1f,%.2f\n", w->tps, w->elapsed);
    fflush(r->csv);
    r->row.step = -1;
}

/* The row of step r->step. It is held until the next row or the end,
 * so that an evaluation after the loop (Ctrl-C, --stop-after, the budget)
 * fills its val_loss instead of adding a second row for the same step. */
static void csv_row(run *r, double lr, double loss, double val, double gnorm, double tps) {
    if (r->row.step == r->step) {
        if (!isnan(val)) r->row.val = val;
        return;
    }
    csv_flush(r);
    r->row = (csv_row_vals){r->step, lr, loss, val, gnorm, tps, ex_progress_total(&r->bar)};
}

/* the checkpoint's texts for the run as it is now */
static ckpt_extra run_extra(const run *r) {
    ckpt_extra x;
    snprintf(x.text[X_ELAPSED], sizeof x.text[X_ELAPSED], "%.0f", 1e3 * ex_progress_total(&r->bar));
    ex_schedule_text(&r->asked, x.text[X_SCHEDULE], sizeof x.text[X_SCHEDULE]);
    ex_schedule_text(&r->sched, x.text[X_SCHEDULE_NOW], sizeof x.text[X_SCHEDULE_NOW]);
    return x;
}

static bool save_run(run *r) {
    ckpt_extra x = run_extra(r);
    return !ex_dist_is_main(&r->dist) ||
           save_checkpoint(r->path[2], r->ctx, r->opt, &r->model, &r->data, r->step, r->data_rng,
                           &x) == FC_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* With a time budget, once the first steps are timed: when the budget
 * cannot hold --steps, end the cosine schedule at the step it can hold, so
 * a bounded run still decays its learning rate (10% is kept for the
 * evaluations and samples). The steps already taken used the original
 * warm-up, which only matters when it is shortened here. */
static void fit_schedule(run *r) {
    enum { N = 20 };
    double ms[N];
    memcpy(ms, r->step_ms + r->nsteps_run - N, sizeof ms);
    qsort(ms, N, sizeof *ms, cmp_double);
    /* the ranks' means, so every rank fits the same schedule */
    double agree[2] = {ms[N / 2], ex_progress_elapsed(&r->bar)};
    if (!ex_dist_mean(&r->dist, agree, 2)) return;
    ms[N / 2] = agree[0];
    double left = r->o.minutes * 60 - agree[1];
    int64_t fits = r->step + (int64_t)(0.9 * left / (ms[N / 2] * 1e-3));
    if (fits >= r->planned) return;
    if (fits < r->step + 1) fits = r->step + 1;
    /* a warm-up longer than a quarter of a short run would leave no decay */
    if (r->sched.warmup_steps > fits / 4) r->sched.warmup_steps = fits / 4;
    r->planned = r->sched.total_steps = r->bar.total_steps = fits;
    ex_progress_note(&r->bar,
                     "the %g min budget holds about %lld steps at %.0f ms/step: the "
                     "schedule now ends there (--minutes 0 keeps --steps %lld)",
                     r->o.minutes, (long long)fits, ms[N / 2], (long long)r->o.steps);
}

/* the main loop; false after an error (already printed) */
static bool train(run *r) {
    const options *o = &r->o;
    double ema_ms = 0, tps = 0;
    double budget = o->minutes * 60;
    for (;;) {
        /* every rank must take the same decision: on the ranks' mean */
        double agree[2] = {ex_progress_elapsed(&r->bar), g_stop};
        if (!ex_dist_mean(&r->dist, agree, 2)) return false;
        if (agree[1] > 0 && r->step < r->planned) r->interrupted = true;
        if (r->step >= r->planned || (o->stop_after > 0 && r->step >= o->stop_after) ||
            agree[1] > 0)
            break;
        if (budget > 0 && agree[0] >= budget) {
            ex_progress_note(&r->bar, "time budget of %g min reached at step %lld of %lld",
                             o->minutes, (long long)r->step, (long long)r->planned);
            break;
        }
        double lr = fc_lr_at(&r->sched, r->step), gnorm;
        double t0 = ex_now();
        double loss = train_step(r, &gnorm);
        double ms = 1e3 * (ex_now() - t0);
        if (isnan(loss)) {
            ex_progress_finish(&r->bar);
            fprintf(stderr, "train_gpt: step %lld failed: %s\n", (long long)r->step + 1,
                    fc_ctx_status(r->ctx) != FC_OK ? fc_ctx_error(r->ctx) : "the loss is NaN");
            return false;
        }
        r->step++;
        r->train_last = loss;
        r->step_ms[r->nsteps_run++] = ms;
        if (budget > 0 && r->nsteps_run == 20) fit_schedule(r);
        ema_ms = ema_ms == 0 ? ms : 0.9 * ema_ms + 0.1 * ms;
        tps = (double)(r->dist.size * o->batch * o->block) / (ema_ms * 1e-3);
        ex_progress_update(&r->bar, r->step, loss, tps);
        double val = NAN;
        if (r->step % o->eval_every == 0 || r->step == r->planned) {
            if (!evaluate(r)) break;
            val = r->val_last;
        }
        csv_row(r, lr, loss, val, gnorm, tps);
        if (o->sample_every > 0 && r->step % o->sample_every == 0 && !print_sample(r)) break;
        if (o->ckpt_every > 0 && r->step % o->ckpt_every == 0 && !save_run(r)) return false;
    }
    if (fc_ctx_status(r->ctx) != FC_OK) {
        ex_progress_finish(&r->bar);
        fprintf(stderr, "train_gpt: %s\n", fc_ctx_error(r->ctx));
        return false;
    }
    return true;
}

/* the last evaluation, sample, checkpoint, picture and summary; the exit code */
static int finish(run *r) {
    const options *o = &r->o;
    ex_progress_finish(&r->bar);
    if (r->val_step != r->step) {
        if (!evaluate(r)) {
            fprintf(stderr, "train_gpt: evaluation failed: %s\n", fc_ctx_error(r->ctx));
            return 1;
        }
        csv_row(r, fc_lr_at(&r->sched, r->step), NAN, r->val_last, NAN, 0);
    }
    if (o->sample_len > 0 && !(o->sample_every > 0 && r->step % o->sample_every == 0) &&
        !print_sample(r)) {
        fprintf(stderr, "train_gpt: sampling failed: %s\n", fc_ctx_error(r->ctx));
        return 1;
    }
    if (!save_run(r)) return 1;
    csv_flush(r);
    if (r->csv) fclose(r->csv);
    r->csv = NULL;
    const ex_curve curves[] = {{3, "train loss", false}, {4, "validation loss", true}};
    bool plotted = ex_dist_is_main(&r->dist) &&
                   ex_plot_png(r->path[0], r->path[1], "train_gpt: cross-entropy per character",
                               "step", "loss (nats)", 1, curves, 2);
    double med = 0, best = 0;
    if (r->nsteps_run > 0) {
        qsort(r->step_ms, (size_t)r->nsteps_run, sizeof *r->step_ms, cmp_double);
        med = r->step_ms[r->nsteps_run / 2];
        best = r->step_ms[0];
    }
    printf("done: step %lld of %lld; this run: %lld steps in %.1f s, step time median %.2f ms "
           "(min %.2f), %.0f tokens/s\n",
           (long long)r->step, (long long)r->planned, (long long)r->nsteps_run,
           ex_progress_elapsed(&r->bar), med, best,
           med > 0 ? (double)(r->dist.size * o->batch * o->block) / (med * 1e-3) : 0.0);
    printf("val loss: %.4f -> %.4f at step %lld (best %.4f at step %lld)\n", r->val_first,
           r->val_last, (long long)r->val_step, r->val_best, (long long)r->best_step);
    /* full precision, so runs can be compared exactly (the resume test does) */
    printf("final: step %lld train_loss %.9g val_loss %.9g\n", (long long)r->step, r->train_last,
           r->val_last);
    printf("wrote %s, %s%s%s\n", r->path[0], r->path[2], plotted ? ", " : "",
           plotted ? r->path[1] : "");
    if (o->expect_drop >= 0 && !(r->val_last <= r->val_first - o->expect_drop)) {
        fprintf(stderr,
                "train_gpt: expected the validation loss to fall by %g, it went from "
                "%.4f to %.4f\n",
                o->expect_drop, r->val_first, r->val_last);
        return 1;
    }
    return 0;
}

/* builds everything train() needs; false after printing why */
static bool setup(run *r) {
    const options *o = &r->o;
    if (!ex_text_load("train_gpt", o->data, &r->data)) return false;
    int64_t B = o->batch, T = o->block;
    if (!ex_text_split(&r->data, T)) {
        fprintf(stderr,
                "train_gpt: %s has %lld characters, too few for a context of %lld "
                "(both splits need whole windows)\n",
                o->data, (long long)r->data.n, (long long)T);
        return false;
    }
    r->ctx = fc_ctx_new(&(fc_ctx_opts){.threads = (int)o->threads, .seed = (uint64_t)o->seed});
    if (!r->ctx) {
        fprintf(stderr, "train_gpt: cannot create a context\n");
        return false;
    }
    if (!ex_dist_start(&r->dist, "train_gpt", r->ctx)) return false;
    gpt_config cfg = {.vocab = r->data.vocab,
                      .block = T,
                      .d_model = o->d_model,
                      .n_layer = o->n_layer,
                      .n_head = o->n_head,
                      .d_ff = o->d_ff};
    fc_optim_opts oo = {.kind = FC_OPTIM_ADAMW, .lr = o->lr, .weight_decay = o->weight_decay};
    if (gpt_init(r->ctx, &r->model, &cfg) == FC_OK) {
        r->model.recompute = o->checkpoint;
        r->opt = fc_optim_new(r->ctx, &oo, r->model.params, r->model.nparams);
    }
    if (r->opt && !ex_dist_wrap(&r->dist, "train_gpt", r->opt)) return false;
    r->idx = fc_empty(r->ctx, FC_I64, (const int64_t[]){B, T}, 2);
    r->tgt = fc_empty(r->ctx, FC_I64, (const int64_t[]){B * T}, 1);
    r->step_ms = malloc(sizeof(double) * (size_t)o->steps);
    if (r->dist.size > 1) r->all_idx = malloc(sizeof(int64_t) * (size_t)(2 * r->dist.size * B * T));
    if (fc_ctx_status(r->ctx) != FC_OK || !r->opt || !r->step_ms ||
        (r->dist.size > 1 && !r->all_idx)) {
        fprintf(stderr, "train_gpt: building the model failed: %s\n",
                fc_ctx_status(r->ctx) != FC_OK ? fc_ctx_error(r->ctx) : "out of memory");
        return false;
    }
    r->sched = (fc_lr_schedule){.kind = FC_LR_COSINE,
                                .base_lr = o->lr,
                                .warmup_steps = o->warmup,
                                .total_steps = o->steps,
                                .min_lr = o->min_lr};
    r->asked = r->sched;
    r->planned = o->steps;
    r->row.step = -1;
    r->data_rng = (uint64_t)o->seed ^ 0xD1B54A32D192ED03ull;
    r->sample_rng = (uint64_t)o->seed ^ 0x8CB92BA72F3D8DD7ull;
    r->train_last = r->val_first = r->val_last = r->val_best = NAN;
    r->val_step = r->best_step = -1;
    if (ex_dist_is_main(&r->dist) && !ex_mkdir_p(o->out)) return false;
    const char *files[3] = {"metrics.csv", "loss.png", "ckpt.safetensors"};
    for (int i = 0; i < 3; i++) {
        if (snprintf(r->path[i], sizeof r->path[i], "%s/%s", o->out, files[i]) >=
            (int)sizeof r->path[i]) {
            fprintf(stderr, "train_gpt: --out is too long\n");
            return false;
        }
    }
    /* every rank reads the checkpoint (one machine, or a shared directory) */
    if (o->resume) {
        ckpt_extra x;
        if (load_checkpoint(r->path[2], r->ctx, r->opt, &r->model, &r->data, &r->step, &r->data_rng,
                            &x) != FC_OK)
            return false;
        if (!ex_schedule_check("train_gpt", r->path[2],
                               x.text[X_SCHEDULE][0] ? x.text[X_SCHEDULE] : NULL, &r->asked,
                               r->step)) {
            r->exit_code = 2;
            return false;
        }
        if (ex_schedule_parse(x.text[X_SCHEDULE_NOW], &r->sched)) r->planned = r->sched.total_steps;
        r->before_s = ex_elapsed_from_text(x.text[X_ELAPSED]);
        if (ex_run_complete("train_gpt", o->out, r->step, r->planned, o->stop_after,
                            "nothing to do")) {
            r->exit_code = 0;
            return false;
        }
        printf("resumed from %s at step %lld\n", r->path[2], (long long)r->step);
    }
    if (ex_dist_is_main(&r->dist)) { /* rank 0 writes the files */
        const char *header = "step,lr,train_loss,val_loss,grad_norm,tokens_per_s,elapsed_s";
        r->csv = o->resume ? ex_csv_resume(r->path[0], header, r->step, &r->csv_last)
                           : ex_csv_open(r->path[0], header, false);
        if (!r->csv) return false;
    }
    printf("train_gpt: %s: %lld characters, vocabulary %d; train %lld, validation %lld "
           "(every 10th block of %lld, %lld windows)\n",
           o->data, (long long)r->data.n, r->data.vocab, (long long)r->data.train_chars,
           (long long)r->data.val_chars, (long long)r->data.seg, (long long)r->data.nval);
    printf("model: %lld parameters (C=%lld, L=%lld, H=%lld, T=%lld, F=%lld); batch %lld; "
           "AdamW lr %g -> %g (warm-up %lld), %lld steps, budget %g min, %d threads\n",
           (long long)gpt_numel(&r->model), (long long)o->d_model, (long long)o->n_layer,
           (long long)o->n_head, (long long)T, (long long)o->d_ff, (long long)B, o->lr, o->min_lr,
           (long long)o->warmup, (long long)o->steps, o->minutes, fc_ctx_threads(r->ctx));
    if (r->dist.size > 1)
        printf("data parallel: %d ranks x batch %lld = %lld sequences per step\n", r->dist.size,
               (long long)B, (long long)(r->dist.size * B));
    return true;
}

static void teardown(run *r, bool ok) {
    csv_flush(r);
    if (r->csv) fclose(r->csv);
    ex_dist_end(&r->dist, ok);
    fc_optim_free(r->opt);
    gpt_free(&r->model);
    free(r->all_idx);
    fc_release(r->idx);
    fc_release(r->tgt);
    fc_ctx_free(r->ctx);
    ex_text_free(&r->data);
    free(r->step_ms);
}

/* --profile FILE: the training steps under the op profiler (fucina/profile.h);
 * the trace goes to FILE (Perfetto or chrome://tracing open it), the table
 * per op to stdout. */
static bool train_profiled(run *r) {
    if (!r->o.profile[0]) return train(r);
    if (fc_profile_begin(r->ctx, &(fc_profile_opts){.max_events = 1 << 18}) != FC_OK) {
        fprintf(stderr, "train_gpt: --profile: %s\n", fc_ctx_error(r->ctx));
        return false;
    }
    bool ok = train(r);
    fc_profile_end(r->ctx);
    if (fc_profile_write_trace(r->ctx, r->o.profile) != FC_OK ||
        fc_profile_write_table(r->ctx, stdout) != FC_OK) {
        fprintf(stderr, "train_gpt: --profile: %s\n", fc_ctx_error(r->ctx));
        return false;
    }
    printf("train_gpt: profile of %lld events written to %s\n",
           (long long)fc_profile_event_count(r->ctx), r->o.profile);
    return ok;
}

int main(int argc, char **argv) {
    static run r; /* large (paths); zero-initialised */
    int rc = parse_options(argc, argv, &r.o);
    if (rc >= 0) return rc;
    signal(SIGINT, on_sigint);
    r.exit_code = 1;
    rc = 1;
    if (setup(&r)) {
        int64_t every = r.o.eval_every / 5 > 0 ? r.o.eval_every / 5 : 1;
        ex_progress_start(&r.bar, r.planned, r.o.minutes * 60, "tok", (int)every);
        r.bar.before_s = r.before_s;
        if (!evaluate(&r)) {
            fprintf(stderr, "train_gpt: evaluation failed: %s\n", fc_ctx_error(r.ctx));
        } else {
            /* a resumed run's first row is its checkpoint's last, written unless
             * the run died between the checkpoint and the row */
            if (!r.o.resume || r.csv_last < r.step)
                csv_row(&r, fc_lr_at(&r.sched, r.step), NAN, r.val_last, NAN, 0);
            if (train_profiled(&r)) rc = finish(&r);
        }
        if (rc == 0 && r.interrupted) {
            /* a script must tell a stopped run from a finished one: 128 + SIGINT */
            printf("train_gpt: stopped by Ctrl-C at step %lld of %lld; %s holds it (--resume "
                   "continues)\n",
                   (long long)r.step, (long long)r.planned, r.path[2]);
            rc = 130;
        }
    } else {
        rc = r.exit_code;
    }
    teardown(&r, rc == 0 || rc == 130);
    return rc;
}
