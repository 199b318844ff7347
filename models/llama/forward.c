/* SPDX-License-Identifier: MIT */
/* llama/forward.c - the Llama forward pass, with and without a key/value
 * cache.
 *
 * One block, x [B, T, D]:
 *   h = rms_norm(x) * attn_norm
 *   q = rope(h Wq^T) [B, T, H, hd], k = rope(h Wk^T), v = h Wv^T [B, T, Hkv, hd]
 *   x = x + attention(q, k, v) Wo^T           (causal, GQA)
 *   h = rms_norm(x) * ffn_norm
 *   x = x + (silu(h Wgate^T) * (h Wup^T)) Wdown^T
 * then logits = (rms_norm(x) * output_norm) Wout^T [B, T, vocab].
 *
 * Weights go to fc_linear as they are: block-quantized ones are read
 * quantized by the product; f16 and bf16 ones are widened to f32 for the
 * call only (products need one dtype), and freed after it. The cache holds
 * f32 keys and values at their positions; a cached step writes its rows
 * in place (no grad: the cache is for inference) and attends to the rows
 * 0 .. len + T - 1. The architecture's differences (arch.c) reach the
 * block as data: q/k/v biases where the layer has them, the rope pairing
 * and factors, the attention window. With an adapter attached (fucina/lora.h), each of
 * the seven projections adds its low-rank term (proj). */
#include <stdlib.h>
#include <string.h>

#include "llama/blocks.h"
#include "llama/lora_internal.h"

fc_tensor *fc__llama_ids(fc_ctx *ctx, const fc_llama *m, fc_tensor *ids, const char *op) {
    if (!ids) { /* an earlier error, when there is one, stays the first */
        fc_ctx_fail(ctx, FC_ERR_NULL_ARG, "%s: NULL ids", op);
        return NULL;
    }
    fc_dtype dt = fc_tensor_dtype(ids);
    int rank = fc_tensor_rank(ids);
    if (!fc_dtype_supports_int_math(dt)) {
        fc_ctx_fail(ctx, FC_ERR_DTYPE, "%s: token ids must have an integer dtype, not %s", op,
                    fc_dtype_name(dt));
        return NULL;
    }
    if (rank != 1 && rank != 2) {
        fc_ctx_fail(ctx, FC_ERR_RANK, "%s: token ids must be [T] or [B, T], not rank %d", op, rank);
        return NULL;
    }
    const int64_t *s = fc_tensor_shape(ids);
    int64_t B = rank == 2 ? s[0] : 1, T = s[rank - 1];
    fc_tensor *i64 = fc_to(ctx, ids, FC_I64);
    fc_tensor *flat = fc_reshape(ctx, i64, (int64_t[]){B, T}, 2);
    fc_release(i64);
    if (!flat) return NULL;
    fc_tensor *c = fc_contiguous(ctx, flat);
    fc_release(flat);
    const int64_t *v = c ? fc_tensor_data(c) : NULL;
    for (int64_t i = 0; v && i < B * T; i++)
        if (v[i] < 0 || v[i] >= m->cfg.vocab) {
            fc_ctx_fail(ctx, FC_ERR_INDEX,
                        "%s: token id %lld at [%lld, %lld] is outside the vocabulary of %lld", op,
                        (long long)v[i], (long long)(i / T), (long long)(i % T),
                        (long long)m->cfg.vocab);
            fc_release(c);
            return NULL;
        }
    return c;
}

/* f16/bf16 tensors widened to f32 for one use (a new reference either way). */
static fc_tensor *as_f32(fc_ctx *ctx, fc_tensor *w) {
    fc_dtype dt = fc_tensor_dtype(w);
    return dt == FC_F16 || dt == FC_BF16 ? fc_to(ctx, w, FC_F32) : fc_retain(w);
}

/* x W^T (+ b when b is not NULL). */
static fc_tensor *lin_b(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *b) {
    fc_tensor *wf = as_f32(ctx, w), *bf = b ? as_f32(ctx, b) : NULL;
    fc_tensor *y = fc_linear(ctx, x, wf, bf);
    fc_release(wf);
    fc_release(bf);
    return y;
}

static fc_tensor *lin(fc_ctx *ctx, fc_tensor *x, fc_tensor *w) { return lin_b(ctx, x, w, NULL); }

/* Projection slot (enum lora_slot) of layer l: x W^T (+ the arch's bias),
 * plus the attached adapter's term when it targets this projection
 * (lora.c). */
static fc_tensor *proj(fc_ctx *ctx, const fc_llama *m, int64_t l, int slot, fc_tensor *x,
                       fc_tensor *w, fc_tensor *b) {
    fc_tensor *y = lin_b(ctx, x, w, b);
    return m->lora ? fc__lora_add(ctx, m->lora, l, slot, x, y) : y;
}

static fc_tensor *norm(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, double eps) {
    fc_tensor *wf = as_f32(ctx, w);
    fc_tensor *y = fc_rms_norm(ctx, x, wf, eps);
    fc_release(wf);
    return y;
}

/* [B, T, D] -> [B, heads, T, hd] after rope (rope false: v). */
static fc_tensor *heads(fc_ctx *ctx, const fc_llama *m, fc_tensor *y, int64_t n_heads, bool rope,
                        int64_t pos0) {
    const int64_t *s = y ? fc_tensor_shape(y) : NULL;
    if (!s) return NULL;
    fc_tensor *h = fc_reshape(ctx, y, (int64_t[]){s[0], s[1], n_heads, m->head_dim}, 4);
    if (!rope) return fc_permute(ctx, h, (const int[]){0, 2, 1, 3});
    const fc_llama_config *c = &m->cfg;
    fc_tensor *r = m->rope_freqs
                       ? fc__llama_rope_factors(ctx, h, c->rope_mode, c->rope_dims, c->rope_base,
                                                c->rope_scale, fc_tensor_data(m->rope_freqs), pos0)
                       : fc__llama_rope_mode(ctx, h, c->rope_mode, c->rope_dims, c->rope_base,
                                             c->rope_scale, pos0);
    return fc_permute(ctx, r, (const int[]){0, 2, 1, 3});
}

/* Writes x [B, Hkv, T, hd] at positions pos0.. of cache tensor c and
 * returns the view of positions 0 .. pos0 + T - 1. */
static fc_tensor *cache_append(fc_ctx *ctx, fc_tensor *c, fc_tensor *x, int64_t pos0, int64_t T) {
    if (!x) return NULL;
    fc_tensor *dst = fc_narrow(ctx, c, 2, pos0, T);
    if (!dst || fc_copy_(dst, x) != FC_OK) return NULL;
    return fc_narrow(ctx, c, 2, 0, pos0 + T);
}

static fc_tensor *block(fc_ctx *ctx, fc_llama *m, int64_t l, fc_tensor *x, fc_llama_cache *cache,
                        int64_t pos0, fc_tensor *mask) {
    const llama_layer *L = &m->layers[l];
    const fc_llama_config *c = &m->cfg;
    const int64_t *s = fc_tensor_shape(x);
    int64_t B = s[0], T = s[1];
    fc_tensor *h = norm(ctx, x, L->attn_norm, c->rms_eps);
    fc_tensor *q = heads(ctx, m, proj(ctx, m, l, LORA_Q, h, L->wq, L->bq), c->n_heads, true, pos0);
    fc_tensor *k =
        heads(ctx, m, proj(ctx, m, l, LORA_K, h, L->wk, L->bk), c->n_kv_heads, true, pos0);
    fc_tensor *v =
        heads(ctx, m, proj(ctx, m, l, LORA_V, h, L->wv, L->bv), c->n_kv_heads, false, pos0);
    if (cache) {
        k = cache_append(ctx, cache->k[l], k, pos0, T);
        v = cache_append(ctx, cache->v[l], v, pos0, T);
    }
    fc_tensor *a =
        fc_permute(ctx, fc__llama_attention_masked(ctx, q, k, v, mask), (const int[]){0, 2, 1, 3});
    a = fc_reshape(ctx, a, (int64_t[]){B, T, c->n_heads * m->head_dim}, 3);
    x = fc_add(ctx, x, proj(ctx, m, l, LORA_O, a, L->wo, NULL));
    h = norm(ctx, x, L->ffn_norm, c->rms_eps);
    fc_tensor *f = fc__llama_swiglu(ctx, proj(ctx, m, l, LORA_GATE, h, L->w_gate, NULL),
                                    proj(ctx, m, l, LORA_UP, h, L->w_up, NULL));
    return fc_add(ctx, x, proj(ctx, m, l, LORA_DOWN, f, L->w_down, NULL));
}

fc_tensor *fc__llama_run(fc_ctx *ctx, fc_llama *m, fc_tensor *ids_in, fc_llama_cache *cache,
                         const char *op) {
    int64_t pos0 = cache ? cache->len : 0;
    fc_scope_begin(ctx);
    fc_tensor *logits = NULL;
    fc_tensor *ids = fc__llama_ids(ctx, m, ids_in, op);
    if (!ids) goto done;
    int64_t B = fc_tensor_dim(ids, 0), T = fc_tensor_dim(ids, 1);
    int64_t limit = cache ? cache->max_len : m->cfg.context;
    if (pos0 + T > limit) {
        fc_ctx_fail(ctx, FC_ERR_INVALID_ARG,
                    "%s: %lld positions (%lld cached + %lld new) pass the %s of %lld", op,
                    (long long)(pos0 + T), (long long)pos0, (long long)T,
                    cache ? "cache length" : "context", (long long)limit);
        goto done;
    }
    if (cache && B != cache->batch) {
        fc_ctx_fail(ctx, FC_ERR_SHAPE_MISMATCH, "%s: %lld sequences for a cache of %lld", op,
                    (long long)B, (long long)cache->batch);
        goto done;
    }
    /* the sliding window's mask, one for every layer (NULL: none needed) */
    fc_tensor *mask = NULL;
    if (fc__llama_window_mask(ctx, FC_F32, T, pos0 + T, m->cfg.sliding_window, &mask)) goto done;
    fc_tensor *e = fc_embedding(ctx, m->tok_embd, ids);
    fc_tensor *x = e && fc_tensor_dtype(e) != FC_F32 ? fc_to(ctx, e, FC_F32) : e;
    for (int64_t l = 0; x && l < m->cfg.n_layers; l++) {
        fc_scope_begin(ctx);
        fc_tensor *nx = fc_keep(block(ctx, m, l, x, cache, pos0, mask));
        fc_scope_end(ctx);
        if (l > 0) fc_release(x); /* kept by the previous layer: ours */
        x = nx;
    }
    logits = lin(ctx, norm(ctx, x, m->out_norm, m->cfg.rms_eps), m->output);
    if (m->cfg.n_layers > 0) fc_release(x);
    if (logits && cache) cache->len = pos0 + T;
done:
    fc_keep(logits);
    fc_scope_end(ctx);
    /* A new handle on the same storage, made after the scope closed, so the
     * result belongs to the caller's scope as an op's result does. */
    fc_tensor *out = logits ? fc_contiguous(ctx, logits) : NULL;
    fc_release(logits);
    return out;
}

fc_tensor *fc_llama_forward(fc_ctx *ctx, fc_llama *m, fc_tensor *ids) {
    if (!ctx) return NULL;
    if (!m) {
        fc_ctx_fail(ctx, FC_ERR_NULL_ARG, "fc_llama_forward: NULL model");
        return NULL;
    }
    return fc__llama_run(ctx, m, ids, NULL, "fc_llama_forward");
}

/* ---- cache ---------------------------------------------------------------------- */

fc_status fc_llama_cache_new(fc_ctx *ctx, fc_llama *m, int64_t batch, int64_t max_len,
                             fc_llama_cache **out) {
    if (out) *out = NULL;
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!m || !out) return fc_ctx_fail(ctx, FC_ERR_NULL_ARG, "fc_llama_cache_new: NULL argument");
    if (batch < 1 || max_len < 1 || max_len > m->cfg.context)
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG,
                           "fc_llama_cache_new: batch %lld and max_len %lld must be >= 1, max_len "
                           "at most the context %lld",
                           (long long)batch, (long long)max_len, (long long)m->cfg.context);
    fc_llama_cache *c = calloc(1, sizeof *c);
    int64_t n = m->cfg.n_layers;
    if (c) {
        c->k = calloc((size_t)n, sizeof *c->k);
        c->v = calloc((size_t)n, sizeof *c->v);
    }
    if (!c || !c->k || !c->v) {
        fc_llama_cache_free(c);
        return fc_ctx_fail(ctx, FC_ERR_OOM, "fc_llama_cache_new: out of memory");
    }
    c->model = m;
    c->batch = batch;
    c->max_len = max_len;
    int64_t shape[4] = {batch, m->cfg.n_kv_heads, max_len, m->head_dim};
    for (int64_t l = 0; l < n; l++) {
        /* the cache's own references, out of any open scope: it outlives it */
        c->k[l] = fc_keep(fc_zeros(ctx, FC_F32, shape, 4));
        c->v[l] = fc_keep(fc_zeros(ctx, FC_F32, shape, 4));
        if (!c->k[l] || !c->v[l]) {
            fc_status st = fc_ctx_status(ctx);
            fc_llama_cache_free(c);
            return st ? st : FC_ERR_OOM;
        }
    }
    *out = c;
    return FC_OK;
}

void fc_llama_cache_free(fc_llama_cache *c) {
    if (!c) return;
    for (int64_t l = 0; c->model && l < c->model->cfg.n_layers; l++) {
        if (c->k) fc_release(c->k[l]);
        if (c->v) fc_release(c->v[l]);
    }
    free(c->k);
    free(c->v);
    free(c);
}

int64_t fc_llama_cache_len(const fc_llama_cache *c) { return c ? c->len : 0; }
void fc_llama_cache_reset(fc_llama_cache *c) {
    if (c) c->len = 0;
}

fc_tensor *fc_llama_forward_cached(fc_ctx *ctx, fc_llama *m, fc_llama_cache *c, fc_tensor *ids) {
    if (!ctx) return NULL;
    if (!m || !c || c->model != m) {
        fc_ctx_fail(ctx, FC_ERR_INVALID_ARG,
                    "fc_llama_forward_cached: NULL model or cache, or a cache of another model");
        return NULL;
    }
    fc_no_grad_begin(ctx);
    fc_tensor *y = fc__llama_run(ctx, m, ids, c, "fc_llama_forward_cached");
    fc_no_grad_end(ctx);
    return y;
}
