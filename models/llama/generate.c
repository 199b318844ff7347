/* SPDX-License-Identifier: MIT */
/* llama/generate.c - token sampling (greedy, temperature, top-k, top-p)
 * and generation through the key/value cache.
 *
 * The sampler owns its random stream (splitmix64 from the caller's seed),
 * so the tokens depend on the seed and the logits only, never on the
 * context's RNG or the thread count. Filters apply in the order of
 * llama.cpp's default chain: top-k on the logits, top-p on the
 * probabilities of what is left (at temperature 1), then the temperature
 * on what top-p kept. Infinite logits are the softmax's limits: -inf is
 * never drawn, and when any logit is +inf the +inf ones share the whole
 * probability (fucina/llama.h); NaN is refused. */
#include <math.h>
#include <stdlib.h>

#include "llama/llama_internal.h"

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct cand {
    float logit;
    int32_t id;
} cand;

/* Most likely first; the lower id first among equals (a total order, so
 * qsort's instability cannot change the result). */
static int cand_cmp(const void *pa, const void *pb) {
    const cand *a = pa, *b = pb;
    if (a->logit != b->logit) return a->logit > b->logit ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

fc_status fc_llama_sample(const float *logits, int64_t n, const fc_llama_sample_opts *opts,
                          uint64_t *rng, int32_t *token) {
    if (!logits || !rng || !token) return FC_ERR_NULL_ARG;
    fc_llama_sample_opts o = opts ? *opts : (fc_llama_sample_opts){0};
    if (n < 1 || n > INT32_MAX || o.top_k < 0 || isnan(o.temperature) || isnan(o.top_p))
        return FC_ERR_INVALID_ARG;
    int64_t best = -1;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(logits[i])) return FC_ERR_INVALID_ARG;
        if (logits[i] > -INFINITY && (best < 0 || logits[i] > logits[best])) best = i;
    }
    if (best < 0) return FC_ERR_INVALID_ARG; /* every logit -inf */
    if (o.temperature <= 0 || o.top_k == 1) {
        *token = (int32_t)best;
        return FC_OK;
    }
    cand *c = malloc(sizeof *c * (size_t)n);
    if (!c) return FC_ERR_OOM;
    for (int64_t i = 0; i < n; i++)
        c[i] = (cand){logits[i], (int32_t)i};
    qsort(c, (size_t)n, sizeof *c, cand_cmp);
    int64_t keep = o.top_k > 0 && o.top_k < n ? o.top_k : n;
    /* -inf has probability 0 at any temperature (an infinite one would
     * make it -inf / inf = NaN below): never a candidate. c[0] is finite or
     * +inf, since not every logit is -inf. */
    while (keep > 1 && c[keep - 1].logit == -INFINITY)
        keep--;
    if (c[0].logit == INFINITY) {
        /* the softmax's limit: the +inf logits share the whole probability
         * evenly, whatever the temperature and top-p (which keeps them all:
         * they alone reach any p) */
        int64_t k = 1;
        while (k < keep && c[k].logit == INFINITY)
            k++;
        double u = (double)(splitmix64(rng) >> 11) * 0x1.0p-53;
        int64_t j = (int64_t)(u * (double)k);
        *token = c[j < k ? j : k - 1].id;
        free(c);
        return FC_OK;
    }
    /* top-p on the untempered probabilities (unnormalised, in double; c[0]
     * holds the maximum), then the temperature on what is kept */
    double *p = malloc(sizeof *p * (size_t)keep), total = 0;
    if (!p) {
        free(c);
        return FC_ERR_OOM;
    }
    if (o.top_p > 0 && o.top_p < 1) {
        for (int64_t i = 0; i < keep; i++)
            total += p[i] = exp((double)c[i].logit - c[0].logit);
        double cum = 0;
        for (int64_t i = 0; i < keep; i++) {
            cum += p[i];
            if (cum >= o.top_p * total) {
                keep = i + 1;
                break;
            }
        }
    }
    total = 0;
    for (int64_t i = 0; i < keep; i++) {
        p[i] = exp(((double)c[i].logit - (double)c[0].logit) / o.temperature);
        total += p[i];
    }
    double u = (double)(splitmix64(rng) >> 11) * 0x1.0p-53 * total, acc = 0;
    int32_t pick = c[keep - 1].id;
    for (int64_t i = 0; i < keep; i++) {
        acc += p[i];
        if (u < acc) {
            pick = c[i].id;
            break;
        }
    }
    free(p);
    free(c);
    *token = pick;
    return FC_OK;
}

/* Samples from the last position of logits [1, T, V]. */
static fc_status sample_last(fc_ctx *ctx, fc_tensor *logits, const fc_llama_sample_opts *opts,
                             uint64_t *rng, int32_t *tok) {
    if (!logits) return fc_ctx_status(ctx);
    int64_t T = fc_tensor_dim(logits, 1), V = fc_tensor_dim(logits, 2);
    fc_tensor *c = fc_contiguous(ctx, logits);
    const float *d = c ? fc_tensor_data(c) : NULL;
    fc_status st = d ? fc_llama_sample(d + (T - 1) * V, V, opts, rng, tok) : fc_ctx_status(ctx);
    fc_release(c);
    if (st && st != fc_ctx_status(ctx))
        fc_ctx_fail(ctx, st, "fc_llama_generate: cannot sample (%s)", fc_strerror(st));
    return st;
}

fc_status fc_llama_generate(fc_ctx *ctx, fc_llama *m, const int32_t *prompt, int64_t n_prompt,
                            int64_t n_new, int32_t stop_token, const fc_llama_sample_opts *opts,
                            int32_t *out, int64_t *n_out) {
    static const char *const op = "fc_llama_generate";
    if (n_out) *n_out = 0;
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!m || !prompt || (!out && n_new > 0))
        return fc_ctx_fail(ctx, FC_ERR_NULL_ARG, "%s: NULL model, prompt or out", op);
    int64_t C = m->cfg.context;
    if (n_prompt < 1 || n_new < 0)
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG,
                           "%s: n_prompt %lld must be >= 1, n_new %lld >= 0", op,
                           (long long)n_prompt, (long long)n_new);
    if (n_prompt > C)
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG,
                           "%s: prompt of %lld tokens is longer than the context of %lld", op,
                           (long long)n_prompt, (long long)C);
    if (n_new > C - n_prompt)
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG,
                           "%s: prompt of %lld tokens plus %lld new ones pass the context of %lld",
                           op, (long long)n_prompt, (long long)n_new, (long long)C);
    for (int64_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= m->cfg.vocab)
            return fc_ctx_fail(ctx, FC_ERR_INDEX,
                               "%s: prompt token %lld is %d, outside the vocabulary of %lld", op,
                               (long long)i, (int)prompt[i], (long long)m->cfg.vocab);
    if (n_new == 0) return FC_OK;
    fc_llama_cache *cache = NULL;
    fc_status st = fc_llama_cache_new(ctx, m, 1, n_prompt + n_new, &cache);
    if (st) return st;
    uint64_t rng = opts ? opts->seed : 0;
    int64_t n = 0;
    fc_scope_begin(ctx);
    fc_tensor *ids = fc_tensor_from_data(ctx, FC_I32, (int64_t[]){1, n_prompt}, 2, prompt);
    fc_tensor *logits = fc_llama_forward_cached(ctx, m, cache, ids);
    int32_t tok = 0;
    st = sample_last(ctx, logits, opts, &rng, &tok);
    fc_scope_end(ctx);
    while (!st) {
        out[n++] = tok;
        if (n == n_new || tok == stop_token) break;
        fc_scope_begin(ctx);
        ids = fc_tensor_from_data(ctx, FC_I32, (int64_t[]){1, 1}, 2, &tok);
        logits = fc_llama_forward_cached(ctx, m, cache, ids);
        st = sample_last(ctx, logits, opts, &rng, &tok);
        fc_scope_end(ctx);
    }
    fc_llama_cache_free(cache);
    if (n_out) *n_out = n;
    return st;
}
