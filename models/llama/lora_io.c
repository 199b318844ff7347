/* SPDX-License-Identifier: MIT */
/* llama/lora_io.c - adapter files: PEFT-named safetensors written and read,
 * and the base model written back as GGUF with the adapter merged in.
 *
 * The file is what PEFT's save_pretrained writes for a Llama model: one
 * lora_A [rank, in] and lora_B [out, rank] per adapted projection, named
 * base_model.model.model.layers.N.<module>.lora_{A,B}.weight, in the Hugging
 * Face row order (q_proj / k_proj lora_B rows un-permuted, see
 * fc__lora_permute_rows), with adapter_config's values as metadata strings.
 *
 * Reading trusts nothing: the safetensors reader has validated the file's
 * structure; here every name is parsed against the model (layer in range,
 * a known module, A or B), every shape against the base weight it adapts,
 * the dtype, the A/B pairing, the same targets in every layer, and the
 * metadata against the tensors, all before a tensor is loaded. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama/lora_internal.h"

static const char PREFIX[] = "base_model.model.model.layers.";

/* A number as the shortest of %.15g / %.17g that reads back exactly. */
static void fmt_num(char *buf, size_t cap, double v) {
    snprintf(buf, cap, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, cap, "%.17g", v);
}

/* ["q_proj","v_proj"] for the targets, in the enum's order. */
static void fmt_targets(char *buf, size_t cap, unsigned targets) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int s = 0; s < LORA_SLOT_COUNT && n < cap; s++)
        if (targets & (1u << s))
            n +=
                (size_t)snprintf(buf + n, cap - n, "%s\"%s\"", n > 1 ? "," : "", fc__lora_short(s));
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* ---- save ------------------------------------------------------------------------- */

fc_status fc_lora_save(fc_ctx *ctx, const fc_lora *l, const char *path) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!l || !path) return fc_ctx_fail(ctx, FC_ERR_NULL_ARG, "fc_lora_save: NULL adapter or path");
    fc_tensor **ts = calloc((size_t)(l->n_params ? l->n_params : 1), sizeof *ts);
    if (!ts) return fc_ctx_fail(ctx, FC_ERR_OOM, "fc_lora_save: out of memory");
    fc_status st = FC_OK;
    fc_no_grad_begin(ctx);
    int64_t i = 0;
    for (int64_t layer = 0; layer < l->n_layers; layer++)
        for (int s = 0; s < LORA_SLOT_COUNT; s++) {
            if (!(l->cfg.targets & (1u << s))) continue;
            ts[i] = fc_retain(l->params[i]);
            i++;
            fc_tensor *b = l->params[i];
            int64_t heads = s == LORA_Q ? l->n_heads : l->n_kv_heads;
            ts[i] = l->permute_qk && (s == LORA_Q || s == LORA_K)
                        ? fc__lora_permute_rows(ctx, b, heads, true)
                        : fc_retain(b);
            if (!ts[i] && !st) st = fc_ctx_status(ctx) ? fc_ctx_status(ctx) : FC_ERR_OOM;
            i++;
        }
    fc_no_grad_end(ctx);
    char r[32], alpha[40], drop[40], targets[128], config[512];
    snprintf(r, sizeof r, "%lld", (long long)l->cfg.rank);
    fmt_num(alpha, sizeof alpha, l->cfg.alpha);
    fmt_num(drop, sizeof drop, l->cfg.dropout);
    fmt_targets(targets, sizeof targets, l->cfg.targets);
    /* adapter_config.json as PEFT writes it, the fields a loader needs */
    snprintf(config, sizeof config,
             "{\"peft_type\": \"LORA\", \"task_type\": \"CAUSAL_LM\", \"r\": %s, "
             "\"lora_alpha\": %s, \"lora_dropout\": %s, \"target_modules\": %s, "
             "\"bias\": \"none\", \"fan_in_fan_out\": false, \"inference_mode\": true}",
             r, alpha, drop, targets);
    const char *keys[] = {"format",        "peft_type",    "task_type",      "r",
                          "lora_alpha",    "lora_dropout", "target_modules", "bias",
                          "adapter_config"};
    const char *vals[] = {"pt", "LORA", "CAUSAL_LM", r, alpha, drop, targets, "none", config};
    if (!st)
        st = fc_safetensors_save(ctx, path, (const char *const *)l->names, ts, l->n_params, keys,
                                 vals, (int64_t)(sizeof keys / sizeof keys[0]));
    for (int64_t k = 0; k < l->n_params; k++)
        fc_release(ts[k]);
    free(ts);
    return st;
}

/* ---- load ------------------------------------------------------------------------- */

/* One tensor name parsed: layer, slot, B or A. False for a name that is not
 * base_model.model.model.layers.<N>.<module>.lora_<A|B>.weight. */
static bool parse_name(const char *name, int64_t *layer, int *slot, bool *is_b) {
    size_t np = sizeof PREFIX - 1;
    if (strncmp(name, PREFIX, np) != 0) return false;
    const char *p = name + np;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return false;
    int64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (INT64_MAX - 9) / 10) return false;
        v = v * 10 + (*p - '0');
    }
    if (*p++ != '.') return false;
    for (int s = 0; s < LORA_SLOT_COUNT; s++) {
        const char *mod = fc__lora_module(s);
        size_t n = strlen(mod);
        if (strncmp(p, mod, n) != 0) continue;
        const char *rest = p + n;
        if (strcmp(rest, ".lora_A.weight") && strcmp(rest, ".lora_B.weight")) return false;
        *layer = v;
        *slot = s;
        *is_b = rest[6] == 'B';
        return true;
    }
    return false;
}

/* A metadata integer / number: the whole string, or false. */
static bool parse_i64(const char *s, int64_t *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

static bool parse_f64(const char *s, double *out) {
    if (!s || !*s) return false;
    char *end;
    double v = strtod(s, &end);
    if (*end) return false;
    *out = v;
    return true;
}

/* target_modules, a JSON list of module names ("q_proj", ...), into bits;
 * false for anything else (an unknown name, escapes, a trailing comma). */
static bool parse_targets(const char *s, unsigned *out) {
    unsigned t = 0;
    const char *p = s;
    while (*p == ' ')
        p++;
    if (*p++ != '[') return false;
    while (*p == ' ')
        p++;
    if (*p == ']') return false; /* an empty list targets nothing */
    for (;;) {
        while (*p == ' ')
            p++;
        if (*p++ != '"') return false;
        const char *e = strchr(p, '"');
        if (!e) return false;
        int hit = -1;
        for (int k = 0; k < LORA_SLOT_COUNT; k++) {
            const char *n = fc__lora_short(k);
            if ((size_t)(e - p) == strlen(n) && !memcmp(p, n, (size_t)(e - p))) hit = k;
        }
        if (hit < 0) return false;
        t |= 1u << hit;
        p = e + 1;
        while (*p == ' ')
            p++;
        if (*p == ']') break;
        if (*p++ != ',') return false;
    }
    p++;
    while (*p == ' ')
        p++;
    if (*p) return false;
    *out = t;
    return true;
}

static void shape_str(const int64_t *s, int rank, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ", %lld" : "%lld", (long long)s[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* The file's tensors, indexed by (layer, slot, A/B); checked against m. */
typedef struct plan {
    int64_t *idx; /* [n_layers * LORA_SLOT_COUNT * 2]: file index or -1 */
    fc_lora_config cfg;
} plan;

#define PLAN_AT(p, layer, s, b) ((p)->idx[((layer)*LORA_SLOT_COUNT + (s)) * 2 + (b)])

static const char *const OPL = "fc_lora_load";

/* Names and dtypes into pl->idx, and the targets. */
static fc_status scan_names(fc_ctx *ctx, const fc_llama *m, const fc_st_file *f, const char *path,
                            plan *pl) {
    int64_t n = fc_safetensors_tensor_count(f);
    for (int64_t i = 0; i < n; i++) {
        fc_io_tensor info;
        fc_status st = fc_safetensors_tensor_info(f, i, &info);
        if (st)
            return fc_ctx_fail(ctx, st, "%s: %s: tensor %lld unreadable", OPL, path, (long long)i);
        int64_t layer;
        int s;
        bool b;
        if (!parse_name(info.name, &layer, &s, &b))
            return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                               "%s: %s: tensor '%.200s' is not a LoRA tensor of a Llama layer "
                               "(base_model.model.model.layers.N.<module>.lora_A/B.weight)",
                               OPL, path, info.name);
        if (layer >= m->cfg.n_layers)
            return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                               "%s: %s: tensor '%.200s' is for layer %lld, the model has %lld", OPL,
                               path, info.name, (long long)layer, (long long)m->cfg.n_layers);
        if (info.dtype != FC_F32 && info.dtype != FC_F16 && info.dtype != FC_BF16)
            return fc_ctx_fail(ctx, FC_ERR_DTYPE,
                               "%s: %s: tensor '%.200s' has dtype %s (f32, f16 or bf16 expected)",
                               OPL, path, info.name, fc_dtype_name(info.dtype));
        PLAN_AT(pl, layer, s, b) = i;
        pl->cfg.targets |= 1u << s;
    }
    if (!pl->cfg.targets)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: %s: no LoRA tensors", OPL, path);
    /* every layer carries A and B of every target */
    for (int64_t layer = 0; layer < m->cfg.n_layers; layer++)
        for (int s = 0; s < LORA_SLOT_COUNT; s++) {
            if (!(pl->cfg.targets & (1u << s))) continue;
            bool ha = PLAN_AT(pl, layer, s, 0) >= 0, hb = PLAN_AT(pl, layer, s, 1) >= 0;
            if (ha != hb)
                return fc_ctx_fail(
                    ctx, FC_ERR_FORMAT, "%s: %s: layer %lld's %s has lora_%c but no lora_%c", OPL,
                    path, (long long)layer, fc__lora_module(s), ha ? 'A' : 'B', ha ? 'B' : 'A');
            if (!ha)
                return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                                   "%s: %s: layer %lld has no %s adapter, which other layers have",
                                   OPL, path, (long long)layer, fc__lora_module(s));
        }
    return FC_OK;
}

/* Shapes against the base weights; the rank from the first A. */
static fc_status check_shapes(fc_ctx *ctx, const fc_llama *m, const fc_st_file *f, const char *path,
                              plan *pl) {
    int64_t rank = -1;
    for (int64_t layer = 0; layer < m->cfg.n_layers; layer++)
        for (int s = 0; s < LORA_SLOT_COUNT; s++) {
            if (!(pl->cfg.targets & (1u << s))) continue;
            fc_tensor *w = fc__lora_weight(&m->layers[layer], s);
            if (!w || fc_tensor_rank(w) != 2)
                return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                                   "%s: the model has no 2-D weight for layer %lld's %s", OPL,
                                   (long long)layer, fc__lora_module(s));
            const int64_t *ws = fc_tensor_shape(w);
            for (int b = 0; b < 2; b++) {
                fc_io_tensor info;
                fc_status st = fc_safetensors_tensor_info(f, PLAN_AT(pl, layer, s, b), &info);
                if (st) return fc_ctx_fail(ctx, st, "%s: %s: tensor unreadable", OPL, path);
                if (rank < 0 && info.rank == 2) rank = b ? info.shape[1] : info.shape[0];
                int64_t want[2] = {b ? ws[0] : rank, b ? rank : ws[1]};
                if (info.rank != 2 || info.shape[0] != want[0] || info.shape[1] != want[1]) {
                    char got[160], exp[64];
                    shape_str(info.shape, info.rank, got, sizeof got);
                    if (rank < 0) /* no rank yet: this is the first A, not 2-D */
                        snprintf(exp, sizeof exp, "[rank, %lld]", (long long)ws[1]);
                    else
                        shape_str(want, 2, exp, sizeof exp);
                    return fc_ctx_fail(ctx, FC_ERR_SHAPE_MISMATCH,
                                       "%s: %s: tensor '%.200s' has shape %s; the base weight "
                                       "[%lld, %lld] needs %s",
                                       OPL, path, info.name, got, (long long)ws[0],
                                       (long long)ws[1], exp);
                }
            }
        }
    pl->cfg.rank = rank;
    return FC_OK;
}

/* The metadata's values, checked against the tensors; PEFT's defaults
 * where absent. */
static fc_status read_meta(fc_ctx *ctx, const fc_st_file *f, const char *path, plan *pl) {
    const char *r = fc_safetensors_meta_find(f, "r");
    const char *a = fc_safetensors_meta_find(f, "lora_alpha");
    const char *d = fc_safetensors_meta_find(f, "lora_dropout");
    const char *t = fc_safetensors_meta_find(f, "target_modules");
    int64_t rank;
    if (r && !parse_i64(r, &rank))
        return fc_ctx_fail(ctx, FC_ERR_FORMAT, "%s: %s: metadata r '%.64s' is not an integer", OPL,
                           path, r);
    if (r && rank != pl->cfg.rank)
        return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                           "%s: %s: metadata r = %lld, the tensors have rank %lld", OPL, path,
                           (long long)rank, (long long)pl->cfg.rank);
    pl->cfg.alpha = (double)pl->cfg.rank;
    if (a && !parse_f64(a, &pl->cfg.alpha))
        return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                           "%s: %s: metadata lora_alpha '%.64s' is not a number", OPL, path, a);
    pl->cfg.dropout = 0;
    if (d && !parse_f64(d, &pl->cfg.dropout))
        return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                           "%s: %s: metadata lora_dropout '%.64s' is not a number", OPL, path, d);
    unsigned bits;
    if (t && !parse_targets(t, &bits))
        return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                           "%s: %s: metadata target_modules '%.200s' is not a list of Llama "
                           "projections",
                           OPL, path, t);
    if (t && bits != pl->cfg.targets) {
        char have[128];
        fmt_targets(have, sizeof have, pl->cfg.targets);
        return fc_ctx_fail(ctx, FC_ERR_FORMAT,
                           "%s: %s: metadata target_modules %.200s, the tensors adapt %s", OPL,
                           path, t, have);
    }
    return FC_OK;
}

/* The file's tensor as f32 in the model's row order (a new reference). */
static fc_tensor *load_one(fc_ctx *ctx, const fc_lora *l, const fc_st_file *f, int64_t i, int s,
                           bool is_b) {
    fc_io_tensor info;
    if (fc_safetensors_tensor_info(f, i, &info) != FC_OK) return NULL;
    fc_scope_begin(ctx);
    fc_tensor *t = fc_safetensors_load(ctx, f, info.name, FC_IO_COPY);
    if (t && fc_tensor_dtype(t) != FC_F32) t = fc_to(ctx, t, FC_F32);
    if (is_b && l->permute_qk && (s == LORA_Q || s == LORA_K))
        t = fc__lora_permute_rows(ctx, t, s == LORA_Q ? l->n_heads : l->n_kv_heads, false);
    fc_keep(t);
    fc_scope_end(ctx);
    return t;
}

fc_status fc_lora_load(fc_ctx *ctx, fc_llama *m, const char *path, fc_lora **out) {
    if (out) *out = NULL;
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!m || !path || !out)
        return fc_ctx_fail(ctx, FC_ERR_NULL_ARG, "%s: NULL model, path or out", OPL);
    if (m->lora)
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG,
                           "%s: the model already has an adapter (rank %lld); free it first", OPL,
                           (long long)m->lora->cfg.rank);
    char err[256];
    /* read, not mapped: the adapter is small, and nothing then depends on
     * the file staying as it is */
    fc_io_opts io = {.flags = FC_IO_NO_MMAP, .errbuf = err, .errcap = sizeof err};
    fc_st_file *f = NULL;
    fc_status st = fc_safetensors_open(path, &io, &f);
    if (st) return fc_ctx_fail(ctx, st, "%s: %s", OPL, err);
    size_t n_idx = (size_t)(m->cfg.n_layers ? m->cfg.n_layers : 1) * LORA_SLOT_COUNT * 2;
    plan pl = {.idx = malloc(n_idx * sizeof *pl.idx)};
    fc_lora *l = NULL;
    if (!pl.idx) {
        st = fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory", OPL);
        goto done;
    }
    for (size_t k = 0; k < n_idx; k++)
        pl.idx[k] = -1;
    if ((st = scan_names(ctx, m, f, path, &pl)) || (st = check_shapes(ctx, m, f, path, &pl)) ||
        (st = read_meta(ctx, f, path, &pl)) || (st = fc__lora_alloc(ctx, m, &pl.cfg, OPL, &l)))
        goto done;
    for (int64_t layer = 0; !st && layer < m->cfg.n_layers; layer++)
        for (int s = 0; !st && s < LORA_SLOT_COUNT; s++) {
            if (!(pl.cfg.targets & (1u << s))) continue;
            for (int b = 0; !st && b < 2; b++)
                st = fc__lora_set(l, layer, s, b,
                                  load_one(ctx, l, f, PLAN_AT(&pl, layer, s, b), s, b));
        }
    if (!st) st = fc__lora_attach(l);
    if (st) {
        m->lora = NULL;
        fc__lora_destroy(l);
        goto done;
    }
    l->training = false;
    *out = l;
done:
    free(pl.idx);
    fc_safetensors_close(f);
    return st;
}

/* ---- merge ------------------------------------------------------------------------ */

/* W + scale * B A for the adapted weights, from one transient f32 copy. */
static fc_status merged(fc_ctx *ctx, const fc_llama *m, int64_t i, void *user, fc_tensor **out) {
    const fc_lora *l = user;
    fc_tensor *w = m->tensors[i];
    *out = NULL;
    for (int64_t layer = 0; layer < m->cfg.n_layers; layer++)
        for (int s = 0; s < LORA_SLOT_COUNT; s++) {
            fc_tensor *a = l->a[layer * LORA_SLOT_COUNT + s];
            if (!a || fc__lora_weight(&m->layers[layer], s) != w) continue;
            fc_tensor *b = l->b[layer * LORA_SLOT_COUNT + s];
            fc_scope_begin(ctx);
            /* a copy even for an f32 weight: the model is not changed */
            fc_tensor *wf = fc_tensor_dtype(w) == FC_F32 ? fc_clone(ctx, w) : fc_to(ctx, w, FC_F32);
            fc_tensor *ba = fc_matmul(ctx, b, a); /* [out, rank] . [rank, in] */
            fc_status st = wf && ba ? fc_mul_scalar_(ba, l->scale) : FC_ERR_OOM;
            if (!st) st = fc_add_(wf, ba);
            if (!st) *out = fc_keep(wf);
            fc_scope_end(ctx);
            if (st) return fc_ctx_status(ctx) ? fc_ctx_status(ctx) : st;
            return FC_OK;
        }
    return FC_OK;
}

fc_status fc_lora_merge_save(fc_ctx *ctx, const fc_lora *l, const char *path,
                             const fc_llama_save_opts *opts) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!l || !path)
        return fc_ctx_fail(ctx, FC_ERR_NULL_ARG, "fc_lora_merge_save: NULL adapter or path");
    if (!l->model)
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG,
                           "fc_lora_merge_save: the adapter's model was freed");
    return fc__llama_save(ctx, l->model, path, opts, "fc_lora_merge_save", merged, (void *)l);
}
