/* SPDX-License-Identifier: MIT */
/* llama/lora.c - LoRA adapters on a Llama model: checking a config against
 * the model, making the adapter (PEFT's init), the forward term the model's
 * projections add, and the accessors. Files are in lora_io.c.
 *
 *   y = x W^T + (alpha / rank) * (dropout(x) A^T) B^T
 *
 * The term is two thin products ([.., in] -> [.., rank] -> [.., out]) and
 * never touches W: a block-quantized base stays quantized, and its only
 * part in the gradient is the product that carries dx back through it.
 * The scale multiplies the rank-wide intermediate, the smallest tensor of
 * the term.
 *
 * Memory: the adapter's own tables come from malloc, as the model's do;
 * every tensor is the context's, taken out of any scope the caller has
 * open (fc_keep), since the adapter outlives it. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama/lora_internal.h"

static const char *const MODULES[LORA_SLOT_COUNT] = {
    "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};

const char *fc__lora_module(int slot) { return MODULES[slot]; }
const char *fc__lora_short(int slot) { return strchr(MODULES[slot], '.') + 1; }

fc_tensor *fc__lora_weight(const llama_layer *L, int slot) {
    switch (slot) {
    case LORA_Q:
        return L->wq;
    case LORA_K:
        return L->wk;
    case LORA_V:
        return L->wv;
    case LORA_O:
        return L->wo;
    case LORA_GATE:
        return L->w_gate;
    case LORA_UP:
        return L->w_up;
    default:
        return L->w_down;
    }
}

fc_lora_config fc_lora_config_default(void) {
    return (fc_lora_config){.rank = 8, .alpha = 16.0, .dropout = 0.05, .targets = FC_LORA_ALL};
}

/* ---- making ------------------------------------------------------------------------ */

static fc_status check_config(fc_ctx *ctx, const fc_llama *m, const fc_lora_config *c,
                              const char *op) {
    if (m->lora)
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG,
                           "%s: the model already has an adapter (rank %lld); free it first", op,
                           (long long)m->lora->cfg.rank);
    if (!c->targets || (c->targets & ~(unsigned)FC_LORA_ALL))
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG,
                           "%s: targets 0x%x: need at least one FC_LORA_* bit and no others (0x%x)",
                           op, c->targets, (unsigned)FC_LORA_ALL);
    /* the scale alpha / rank multiplies f32 values: above FLT_MAX it is
     * inf there, and a new adapter's zero B would make NaN of it */
    if (!isfinite(c->alpha) || !(c->alpha > 0) || c->alpha > FLT_MAX)
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG,
                           "%s: alpha %g must be finite, > 0 and at most %g (FLT_MAX)", op,
                           c->alpha, (double)FLT_MAX);
    if (!(c->dropout >= 0 && c->dropout < 1))
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG, "%s: dropout %g must be in [0, 1)", op,
                           c->dropout);
    if (c->rank < 1)
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG, "%s: rank %lld must be >= 1", op,
                           (long long)c->rank);
    for (int64_t layer = 0; layer < m->cfg.n_layers; layer++)
        for (int s = 0; s < LORA_SLOT_COUNT; s++) {
            if (!(c->targets & (1u << s))) continue;
            fc_tensor *w = fc__lora_weight(&m->layers[layer], s);
            if (!w || fc_tensor_rank(w) != 2)
                return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                                   "%s: the model has no 2-D weight for layer %lld's %s", op,
                                   (long long)layer, MODULES[s]);
            const int64_t *sh = fc_tensor_shape(w);
            if (c->rank > sh[0] || c->rank > sh[1])
                return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG,
                                   "%s: rank %lld is larger than layer %lld's %s [%lld, %lld]", op,
                                   (long long)c->rank, (long long)layer, MODULES[s],
                                   (long long)sh[0], (long long)sh[1]);
        }
    return FC_OK;
}

static int popcount7(unsigned t) {
    int n = 0;
    for (int s = 0; s < LORA_SLOT_COUNT; s++)
        n += (t >> s) & 1u;
    return n;
}

fc_status fc__lora_alloc(fc_ctx *ctx, fc_llama *m, const fc_lora_config *cfg, const char *op,
                         fc_lora **out) {
    *out = NULL;
    fc_status st = check_config(ctx, m, cfg, op);
    if (st) return st;
    int64_t n_layers = m->cfg.n_layers, n = 2 * n_layers * popcount7(cfg->targets);
    size_t slots = (size_t)(n_layers ? n_layers : 1) * LORA_SLOT_COUNT;
    fc_lora *l = calloc(1, sizeof *l);
    if (l) {
        l->params = calloc((size_t)(n ? n : 1), sizeof *l->params);
        l->names = calloc((size_t)(n ? n : 1), sizeof *l->names);
        l->a = calloc(slots, sizeof *l->a);
        l->b = calloc(slots, sizeof *l->b);
    }
    if (!l || !l->params || !l->names || !l->a || !l->b) {
        fc__lora_destroy(l);
        return fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory", op);
    }
    l->ctx = ctx;
    l->model = m;
    l->cfg = *cfg;
    l->scale = cfg->alpha / (double)cfg->rank;
    l->n_layers = n_layers;
    l->n_heads = m->cfg.n_heads;
    l->n_kv_heads = m->cfg.n_kv_heads;
    l->permute_qk = m->cfg.rope_mode == FC_ROPE_NORM;
    l->n_params = n;
    /* the names now, so a half-made adapter is never listed without them */
    int64_t i = 0;
    for (int64_t layer = 0; layer < n_layers; layer++)
        for (int s = 0; s < LORA_SLOT_COUNT; s++) {
            if (!(cfg->targets & (1u << s))) continue;
            for (int ab = 0; ab < 2; ab++, i++) {
                char name[128];
                snprintf(name, sizeof name, "base_model.model.model.layers.%lld.%s.lora_%c.weight",
                         (long long)layer, MODULES[s], ab ? 'B' : 'A');
                size_t len = strlen(name) + 1;
                l->names[i] = malloc(len);
                if (!l->names[i]) {
                    fc__lora_destroy(l);
                    return fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory for names", op);
                }
                memcpy(l->names[i], name, len);
            }
        }
    *out = l;
    return FC_OK;
}

/* Index in params of (layer, slot)'s A: the targeted slots before it, twice. */
static int64_t param_index(const fc_lora *l, int64_t layer, int slot) {
    unsigned t = l->cfg.targets;
    return 2 * (layer * popcount7(t) + popcount7(t & ((1u << slot) - 1u)));
}

fc_status fc__lora_set(fc_lora *l, int64_t layer, int slot, bool is_b, fc_tensor *t) {
    if (!t) return fc_ctx_status(l->ctx) ? fc_ctx_status(l->ctx) : FC_ERR_OOM;
    int64_t i = param_index(l, layer, slot) + (is_b ? 1 : 0);
    fc_release(l->params[i]);
    l->params[i] = fc_keep(t);
    (is_b ? l->b : l->a)[layer * LORA_SLOT_COUNT + slot] = t;
    return FC_OK;
}

fc_status fc__lora_attach(fc_lora *l) {
    for (int64_t i = 0; i < l->n_params; i++) {
        fc_status st = fc_requires_grad(l->params[i], true);
        if (st) return st;
    }
    l->model->lora = l;
    return FC_OK;
}

void fc__lora_destroy(fc_lora *l) {
    if (!l) return;
    for (int64_t i = 0; i < l->n_params; i++) {
        if (l->params) fc_release(l->params[i]);
        if (l->names) free(l->names[i]);
    }
    free(l->params);
    free(l->names);
    free(l->a);
    free(l->b);
    free(l);
}

void fc__lora_orphan(fc_lora *l) {
    if (l) l->model = NULL;
}

/* A uniform in [-1/sqrt(in), 1/sqrt(in)] (PEFT's kaiming_uniform_ with
 * a = sqrt(5) gives exactly that bound), B zero. */
static fc_status init_params(fc_ctx *ctx, fc_lora *l) {
    const fc_llama *m = l->model;
    int64_t r = l->cfg.rank;
    for (int64_t layer = 0; layer < m->cfg.n_layers; layer++)
        for (int s = 0; s < LORA_SLOT_COUNT; s++) {
            if (!(l->cfg.targets & (1u << s))) continue;
            const int64_t *sh = fc_tensor_shape(fc__lora_weight(&m->layers[layer], s));
            int64_t out = sh[0], in = sh[1];
            fc_tensor *a = fc_rand(ctx, FC_F32, (int64_t[]){r, in}, 2);
            float *p = a ? fc_tensor_data_mut(a) : NULL;
            if (a && !p) {
                fc_release(a);
                a = NULL;
            }
            float bound = (float)(1.0 / sqrt((double)in));
            for (int64_t k = 0; p && k < r * in; k++)
                p[k] = (2.0f * p[k] - 1.0f) * bound;
            fc_status st = fc__lora_set(l, layer, s, false, a);
            if (!st)
                st = fc__lora_set(l, layer, s, true, fc_zeros(ctx, FC_F32, (int64_t[]){out, r}, 2));
            if (st) return st;
        }
    return FC_OK;
}

fc_status fc_lora_new(fc_ctx *ctx, fc_llama *m, const fc_lora_config *cfg, fc_lora **out) {
    if (out) *out = NULL;
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!m || !cfg || !out)
        return fc_ctx_fail(ctx, FC_ERR_NULL_ARG, "fc_lora_new: NULL model, config or out");
    fc_lora *l = NULL;
    fc_status st = fc__lora_alloc(ctx, m, cfg, "fc_lora_new", &l);
    if (st) return st;
    if ((st = init_params(ctx, l)) || (st = fc__lora_attach(l))) {
        m->lora = NULL;
        fc__lora_destroy(l);
        return st;
    }
    l->training = true;
    *out = l;
    return FC_OK;
}

void fc_lora_free(fc_lora *l) {
    if (!l) return;
    if (l->model && l->model->lora == l) l->model->lora = NULL;
    fc__lora_destroy(l);
}

/* ---- the forward term ------------------------------------------------------------- */

fc_tensor *fc__lora_add(fc_ctx *ctx, const fc_lora *l, int64_t layer, int slot, fc_tensor *x,
                        fc_tensor *y) {
    fc_tensor *a = l->a[layer * LORA_SLOT_COUNT + slot], *b = l->b[layer * LORA_SLOT_COUNT + slot];
    if (!a || !x || !y) return y;
    /* dropout draws from the RNG: only where it changes anything */
    bool drop = l->training && l->cfg.dropout > 0 && fc_grad_enabled(ctx);
    fc_tensor *d = drop ? fc_dropout(ctx, x, l->cfg.dropout, true) : x;
    fc_tensor *u = fc_mul_scalar(ctx, fc_linear(ctx, d, a, NULL), l->scale);
    return fc_add(ctx, y, fc_linear(ctx, u, b, NULL));
}

/* ---- accessors -------------------------------------------------------------------- */

const fc_lora_config *fc_lora_get_config(const fc_lora *l) { return l ? &l->cfg : NULL; }
fc_llama *fc_lora_model(const fc_lora *l) { return l ? l->model : NULL; }

void fc_lora_set_training(fc_lora *l, bool on) {
    if (l) l->training = on;
}

int64_t fc_lora_params(const fc_lora *l, fc_tensor **out, int64_t cap) {
    if (!l) return 0;
    for (int64_t i = 0; out && i < l->n_params && i < cap; i++)
        out[i] = l->params[i];
    return l->n_params;
}

const char *fc_lora_param_name(const fc_lora *l, int64_t i) {
    return l && i >= 0 && i < l->n_params ? l->names[i] : NULL;
}

/* ---- q/k row order ---------------------------------------------------------------- */

/* Row (h, i, j) of the model (i < hd/2, j < 2) is row (h, j, i) of the
 * Hugging Face weight: llama.cpp's converter reshapes each head's rows to
 * (2, hd/2) and swaps the two axes. Either direction is that swap, seen
 * through the other reshape. */
fc_tensor *fc__lora_permute_rows(fc_ctx *ctx, fc_tensor *b, int64_t heads, bool to_hf) {
    if (!b) return NULL;
    const int64_t *s = fc_tensor_shape(b);
    int64_t out = s[0], r = s[1], half = out / heads / 2;
    int64_t split[4] = {heads, to_hf ? half : 2, to_hf ? 2 : half, r};
    fc_scope_begin(ctx);
    fc_tensor *v = fc_reshape(ctx, b, split, 4);
    fc_tensor *p = fc_contiguous(ctx, fc_permute(ctx, v, (const int[]){0, 2, 1, 3}));
    fc_tensor *y = fc_keep(fc_reshape(ctx, p, (int64_t[]){out, r}, 2));
    fc_scope_end(ctx);
    return y;
}
