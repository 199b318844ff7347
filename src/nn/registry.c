/* SPDX-License-Identifier: MIT */
/* registry.c - the fc_nn registry: named tensors, mode, freezing, optimizer
 * groups.
 *
 * A flat array in registration order, so a state dict is written in the
 * order the model was built (as torch's state_dict lists modules). Names are
 * looked up linearly: models hold hundreds of tensors, and lookups happen at
 * init and load, never per step. The registry's own memory is the storage
 * of u8 tensors (fc__nn_mem), so it goes through the context's allocator
 * like everything else and the out-of-memory sweeps reach it. */
#include <string.h>

#include "fucina/nn.h"
#include "nn/nn_internal.h"

fc_tensor *fc__nn_mem(fc_ctx *ctx, size_t n, void **p) {
    *p = NULL;
    if (n > (size_t)INT64_MAX) {
        fc_ctx_fail(ctx, FC_ERR_OVERFLOW, "fc_nn: %zu bytes do not fit a tensor", n);
        return NULL;
    }
    fc_tensor *t = fc_keep(fc_zeros(ctx, FC_U8, (int64_t[]){n ? (int64_t)n : 1}, 1));
    if (t) *p = fc_tensor_data_mut(t);
    if (t && !*p) {
        fc_release(t);
        return NULL;
    }
    return t;
}

fc_nn *fc_nn_new(fc_ctx *ctx) {
    if (!ctx) return NULL;
    void *mem;
    fc_tensor *self = fc__nn_mem(ctx, sizeof(fc_nn), &mem);
    if (!self) return NULL;
    fc_nn *nn = mem;
    nn->self = self;
    nn->ctx = ctx;
    nn->training = true;
    return nn;
}

void fc_nn_free(fc_nn *nn) {
    if (!nn) return;
    for (int64_t i = 0; i < nn->n; i++)
        fc_release(nn->e[i].t);
    fc_release(nn->e_mem);
    fc_release(nn->self); /* last: nn lives in it */
}

fc_ctx *fc_nn_ctx(const fc_nn *nn) { return nn ? nn->ctx : NULL; }

fc_status fc__nn_join(fc_nn *nn, char *dst, const char *prefix, const char *name, const char *fn) {
    const char *p = prefix ? prefix : "";
    const char *sep = (*p && *name) ? "." : "";
    size_t need = strlen(p) + strlen(sep) + strlen(name);
    if (need >= FC_NN_NAME_MAX)
        return fc_ctx_fail(nn->ctx, FC_ERR_INVALID_ARG,
                           "%s: name \"%s%s%s\" is %zu bytes, the limit is %d", fn, p, sep, name,
                           need, FC_NN_NAME_MAX - 1);
    memcpy(dst, p, strlen(p));
    memcpy(dst + strlen(p), sep, strlen(sep));
    memcpy(dst + strlen(p) + strlen(sep), name, strlen(name) + 1);
    return FC_OK;
}

int64_t fc__nn_index(const fc_nn *nn, const char *name) {
    for (int64_t i = 0; i < nn->n; i++)
        if (strcmp(nn->e[i].name, name) == 0) return i;
    return -1;
}

fc_status fc_nn_register(fc_nn *nn, const char *prefix, const char *name, fc_tensor *t,
                         unsigned flags) {
    if (!nn || !name || !t) {
        fc_release(t);
        if (nn && fc_ctx_status(nn->ctx) == FC_OK)
            fc_ctx_fail(nn->ctx, FC_ERR_NULL_ARG, "fc_nn_register: NULL %s", !name ? "name" : "t");
        return nn ? fc_ctx_status(nn->ctx) : FC_ERR_NULL_ARG;
    }
    char full[FC_NN_NAME_MAX];
    fc_status st = fc__nn_join(nn, full, prefix, name, "fc_nn_register");
    if (st == FC_OK && fc__nn_index(nn, full) >= 0)
        st = fc_ctx_fail(nn->ctx, FC_ERR_INVALID_ARG,
                         "fc_nn_register: \"%s\" is already registered", full);
    if (st == FC_OK && !(flags & FC_NN_BUFFER)) st = fc_requires_grad(t, true);
    if (st == FC_OK && nn->n == nn->cap) {
        int64_t cap = nn->cap ? nn->cap * 2 : 16;
        void *mem;
        fc_tensor *m = fc__nn_mem(nn->ctx, (size_t)cap * sizeof(nn_entry), &mem);
        if (!m) {
            st = fc_ctx_status(nn->ctx);
        } else {
            if (nn->n) memcpy(mem, nn->e, (size_t)nn->n * sizeof(nn_entry));
            fc_release(nn->e_mem);
            nn->e_mem = m;
            nn->e = mem;
            nn->cap = cap;
        }
    }
    if (st != FC_OK) {
        fc_release(t);
        return st;
    }
    nn_entry *e = &nn->e[nn->n++];
    memcpy(e->name, full, sizeof full);
    e->t = fc_keep(t); /* the registry owns it now, past any open scope */
    e->flags = flags;
    return FC_OK;
}

int64_t fc_nn_count(const fc_nn *nn) { return nn ? nn->n : 0; }
const char *fc_nn_name_at(const fc_nn *nn, int64_t i) {
    return nn && i >= 0 && i < nn->n ? nn->e[i].name : NULL;
}
fc_tensor *fc_nn_tensor_at(const fc_nn *nn, int64_t i) {
    return nn && i >= 0 && i < nn->n ? nn->e[i].t : NULL;
}
unsigned fc_nn_flags_at(const fc_nn *nn, int64_t i) {
    return nn && i >= 0 && i < nn->n ? nn->e[i].flags : 0u;
}
fc_tensor *fc_nn_find(const fc_nn *nn, const char *name) {
    if (!nn || !name) return NULL;
    int64_t i = fc__nn_index(nn, name);
    return i < 0 ? NULL : nn->e[i].t;
}

void fc_nn_set_training(fc_nn *nn, bool training) {
    if (nn) nn->training = training;
}
bool fc_nn_training(const fc_nn *nn) { return nn ? nn->training : false; }

/* Backtracking glob over '*' and '?': the last '*' seen is retried one
 * character further on a mismatch, which is enough for patterns without
 * character classes and is linear-times-pattern in the worst case. */
bool fc_nn_name_matches(const char *pattern, const char *name) {
    if (!pattern || !name) return false;
    const char *p = pattern, *s = name, *star = NULL, *retry = NULL;
    while (*s) {
        if (*p == '*') {
            star = p++;
            retry = s;
        } else if (*p == '?' || *p == *s) {
            p++;
            s++;
        } else if (star) {
            p = star + 1;
            s = ++retry;
        } else {
            return false;
        }
    }
    while (*p == '*')
        p++;
    return *p == '\0';
}

fc_status fc_nn_set_frozen(fc_nn *nn, const char *pattern, bool frozen, int64_t *matched) {
    if (matched) *matched = 0;
    if (!nn) return FC_ERR_NULL_ARG;
    if (!pattern) return fc_ctx_fail(nn->ctx, FC_ERR_NULL_ARG, "fc_nn_set_frozen: NULL pattern");
    int64_t count = 0;
    for (int64_t i = 0; i < nn->n; i++) {
        nn_entry *e = &nn->e[i];
        if ((e->flags & FC_NN_BUFFER) || !fc_nn_name_matches(pattern, e->name)) continue;
        fc_status st = fc_requires_grad(e->t, !frozen);
        if (st != FC_OK) return st;
        count++;
    }
    if (matched) *matched = count;
    if (count == 0)
        return fc_ctx_fail(nn->ctx, FC_ERR_INVALID_ARG,
                           "fc_nn_set_frozen: pattern \"%s\" matches no parameter", pattern);
    return FC_OK;
}

int64_t fc_nn_trainable(const fc_nn *nn, fc_tensor **out, int64_t cap) {
    if (!nn) return 0;
    int64_t k = 0;
    for (int64_t i = 0; i < nn->n; i++) {
        const nn_entry *e = &nn->e[i];
        if ((e->flags & FC_NN_BUFFER) || !fc_tensor_requires_grad(e->t)) continue;
        if (out && k < cap) out[k] = e->t;
        k++;
    }
    return k;
}

static bool no_decay(const nn_entry *e, const char *const *pats, int n) {
    if (e->flags & FC_NN_NO_DECAY) return true;
    for (int i = 0; i < n; i++)
        if (fc_nn_name_matches(pats[i], e->name)) return true;
    return false;
}

fc_optim *fc_nn_optim_new(fc_nn *nn, const fc_optim_opts *opts, const char *const *pats,
                          int n_pats) {
    if (!nn) return NULL;
    if (!opts) {
        fc_ctx_fail(nn->ctx, FC_ERR_NULL_ARG, "fc_nn_optim_new: NULL opts");
        return NULL;
    }
    if (n_pats < 0 || (n_pats > 0 && !pats)) {
        fc_ctx_fail(nn->ctx, FC_ERR_INVALID_ARG,
                    "fc_nn_optim_new: n_no_decay = %d with %s patterns", n_pats,
                    pats ? "given" : "NULL");
        return NULL;
    }
    int64_t n = fc_nn_trainable(nn, NULL, 0);
    if (n == 0 || n > INT32_MAX) {
        fc_ctx_fail(nn->ctx, FC_ERR_INVALID_ARG, "fc_nn_optim_new: %lld trainable parameters",
                    (long long)n);
        return NULL;
    }
    void *mem;
    fc_tensor *m = fc__nn_mem(nn->ctx, (size_t)n * 2 * sizeof(fc_tensor *), &mem);
    if (!m) return NULL;
    fc_tensor **decay = mem;
    fc_tensor **plain = decay + n;
    int nd = 0, np = 0;
    for (int64_t i = 0; i < nn->n; i++) {
        const nn_entry *e = &nn->e[i];
        if ((e->flags & FC_NN_BUFFER) || !fc_tensor_requires_grad(e->t)) continue;
        if (no_decay(e, pats, n_pats))
            plain[np++] = e->t;
        else
            decay[nd++] = e->t;
    }
    fc_optim *opt = fc_optim_new(nn->ctx, opts, decay, nd);
    fc_optim_opts o1 = *opts;
    o1.weight_decay = 0;
    if (opt && fc_optim_add_group(opt, &o1, plain, np) != FC_OK) {
        fc_optim_free(opt);
        opt = NULL;
    }
    fc_release(m);
    return opt;
}
