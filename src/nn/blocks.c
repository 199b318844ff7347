/* SPDX-License-Identifier: MIT */
/* blocks.c - layers made of layers: MLP, SwiGLU, multi-head attention and
 * Sequential.
 *
 * Composition is by name: a block's init passes name + "." + child to its
 * children's inits, so the registry holds torch's state_dict names. Every
 * forward releases its intermediates and returns only its output. */
#include <stdio.h>
#include <string.h>

#include "fucina/nn.h"
#include "nn/nn_internal.h"

/* The child's full name into buf (FC_NN_NAME_MAX bytes). */
static fc_status child(fc_nn *nn, char *buf, const char *name, const char *sub, const char *fn) {
    return fc__nn_join(nn, buf, name, sub, fn);
}

/* ---- MLP --------------------------------------------------------------------------- */
fc_status fc_nn_mlp_init(fc_nn *nn, fc_nn_mlp *m, const char *name, int64_t in, int64_t hidden,
                         int64_t out, fc_nn_act act, bool bias) {
    static const char fn[] = "fc_nn_mlp_init";
    if (!nn) return FC_ERR_NULL_ARG;
    if (!m) return fc_ctx_fail(nn->ctx, FC_ERR_NULL_ARG, "%s: NULL layer", fn);
    if ((unsigned)act >= FC_NN_ACT_COUNT)
        return fc_ctx_fail(nn->ctx, FC_ERR_INVALID_ARG, "%s: unknown activation %d", fn, (int)act);
    char buf[FC_NN_NAME_MAX];
    m->act = act;
    fc_status st = child(nn, buf, name, "fc1", fn);
    if (st == FC_OK) st = fc_nn_linear_init(nn, &m->fc1, buf, in, hidden, bias);
    if (st == FC_OK) st = child(nn, buf, name, "fc2", fn);
    if (st == FC_OK) st = fc_nn_linear_init(nn, &m->fc2, buf, hidden, out, bias);
    return st;
}

fc_tensor *fc_nn_mlp_forward(const fc_nn_mlp *m, fc_tensor *x) {
    if (!m || !x) return NULL;
    fc_ctx *ctx = m->fc1.nn->ctx;
    fc_tensor *h = fc_nn_linear_forward(&m->fc1, x);
    fc_tensor *a = fc_nn_act_forward(ctx, m->act, h);
    fc_tensor *y = fc_nn_linear_forward(&m->fc2, a);
    fc_release(h);
    fc_release(a);
    return y;
}

/* ---- SwiGLU ------------------------------------------------------------------------ */
fc_status fc_nn_swiglu_init(fc_nn *nn, fc_nn_swiglu *s, const char *name, int64_t dim,
                            int64_t hidden) {
    static const char fn[] = "fc_nn_swiglu_init";
    if (!nn) return FC_ERR_NULL_ARG;
    if (!s) return fc_ctx_fail(nn->ctx, FC_ERR_NULL_ARG, "%s: NULL layer", fn);
    char buf[FC_NN_NAME_MAX];
    fc_status st = child(nn, buf, name, "gate", fn);
    if (st == FC_OK) st = fc_nn_linear_init(nn, &s->gate, buf, dim, hidden, false);
    if (st == FC_OK) st = child(nn, buf, name, "up", fn);
    if (st == FC_OK) st = fc_nn_linear_init(nn, &s->up, buf, dim, hidden, false);
    if (st == FC_OK) st = child(nn, buf, name, "down", fn);
    if (st == FC_OK) st = fc_nn_linear_init(nn, &s->down, buf, hidden, dim, false);
    return st;
}

fc_tensor *fc_nn_swiglu_forward(const fc_nn_swiglu *s, fc_tensor *x) {
    if (!s || !x) return NULL;
    fc_ctx *ctx = s->gate.nn->ctx;
    fc_tensor *g = fc_nn_linear_forward(&s->gate, x);
    fc_tensor *u = fc_nn_linear_forward(&s->up, x);
    fc_tensor *h = fc_swiglu(ctx, g, u);
    fc_tensor *y = fc_nn_linear_forward(&s->down, h);
    fc_release(g);
    fc_release(u);
    fc_release(h);
    return y;
}

/* ---- multi-head attention ----------------------------------------------------------- */
fc_status fc_nn_mha_init(fc_nn *nn, fc_nn_mha *a, const char *name, const fc_nn_mha_opts *opts) {
    static const char fn[] = "fc_nn_mha_init";
    if (!nn) return FC_ERR_NULL_ARG;
    if (!a || !opts)
        return fc_ctx_fail(nn->ctx, FC_ERR_NULL_ARG, "%s: NULL %s", fn, !a ? "layer" : "opts");
    fc_nn_mha_opts o = *opts;
    if (o.n_kv_heads == 0) o.n_kv_heads = o.n_heads;
    if (o.dim < 1 || o.n_heads < 1 || o.n_kv_heads < 1 || o.dim % o.n_heads ||
        o.n_heads % o.n_kv_heads)
        return fc_ctx_fail(nn->ctx, FC_ERR_INVALID_ARG,
                           "%s: dim = %lld, n_heads = %lld, n_kv_heads = %lld: n_heads must "
                           "divide dim and n_kv_heads divide n_heads (all >= 1)",
                           fn, (long long)o.dim, (long long)o.n_heads, (long long)o.n_kv_heads);
    a->opts = o;
    a->head_dim = o.dim / o.n_heads;
    int64_t kv = o.n_kv_heads * a->head_dim;
    char buf[FC_NN_NAME_MAX];
    fc_status st = child(nn, buf, name, "q", fn);
    if (st == FC_OK) st = fc_nn_linear_init(nn, &a->q, buf, o.dim, o.dim, o.bias);
    if (st == FC_OK) st = child(nn, buf, name, "k", fn);
    if (st == FC_OK) st = fc_nn_linear_init(nn, &a->k, buf, o.dim, kv, o.bias);
    if (st == FC_OK) st = child(nn, buf, name, "v", fn);
    if (st == FC_OK) st = fc_nn_linear_init(nn, &a->v, buf, o.dim, kv, o.bias);
    if (st == FC_OK) st = child(nn, buf, name, "o", fn);
    if (st == FC_OK) st = fc_nn_linear_init(nn, &a->o, buf, o.dim, o.dim, o.bias);
    return st;
}

/* x [B, T, dim] projected by l into [B, T, heads, D], rotated when asked,
 * and returned as the [B, heads, T, D] view fc_attention reads. */
static fc_tensor *heads(const fc_nn_mha *a, const fc_nn_linear *l, fc_tensor *x, int64_t h,
                        bool rope) {
    fc_ctx *ctx = l->nn->ctx;
    fc_tensor *p = fc_nn_linear_forward(l, x);
    if (!p) return NULL;
    int64_t shape[4] = {fc_tensor_dim(x, 0), fc_tensor_dim(x, 1), h, a->head_dim};
    fc_tensor *v = fc_reshape(ctx, p, shape, 4);
    fc_release(p);
    if (rope && v) {
        fc_tensor *r = fc_rope(ctx, v, &a->opts.rope_opts);
        fc_release(v);
        v = r;
    }
    fc_tensor *t = fc_transpose(ctx, v, 1, 2);
    fc_release(v);
    return t;
}

fc_tensor *fc_nn_mha_forward(const fc_nn_mha *a, fc_tensor *x, fc_tensor *mask) {
    if (!a || !x) return NULL;
    fc_ctx *ctx = a->q.nn->ctx;
    char d[96];
    if (fc_tensor_rank(x) != 3 || fc_tensor_dim(x, 2) != a->opts.dim) {
        fc_ctx_fail(ctx, FC_ERR_SHAPE_MISMATCH, "fc_nn_mha_forward: input %s, needs [B, T, %lld]",
                    fc_tensor_describe(x, d, sizeof d), (long long)a->opts.dim);
        return NULL;
    }
    fc_tensor *q = heads(a, &a->q, x, a->opts.n_heads, a->opts.rope);
    fc_tensor *k = heads(a, &a->k, x, a->opts.n_kv_heads, a->opts.rope);
    fc_tensor *v = heads(a, &a->v, x, a->opts.n_kv_heads, false);
    fc_attention_opts ao = {.causal = a->opts.causal};
    fc_tensor *o = fc_attention(ctx, q, k, v, mask, &ao);
    fc_tensor *ot =
        fc_transpose(ctx, o, 1, 2); /* contiguous [B, T, H, D] (fc_attention's layout) */
    int64_t shape[3] = {fc_tensor_dim(x, 0), fc_tensor_dim(x, 1), a->opts.dim};
    fc_tensor *m = fc_reshape(ctx, ot, shape, 3);
    fc_tensor *y = fc_nn_linear_forward(&a->o, m);
    fc_release(q);
    fc_release(k);
    fc_release(v);
    fc_release(o);
    fc_release(ot);
    fc_release(m);
    return y;
}

/* ---- Sequential -------------------------------------------------------------------- */
fc_status fc_nn_seq_init(fc_nn *nn, fc_nn_seq *s, const char *name) {
    if (!nn) return FC_ERR_NULL_ARG;
    if (!s) return fc_ctx_fail(nn->ctx, FC_ERR_NULL_ARG, "fc_nn_seq_init: NULL layer");
    memset(s, 0, sizeof *s);
    s->nn = nn;
    return fc__nn_join(nn, s->name, "", name ? name : "", "fc_nn_seq_init");
}

/* The next item and its name, or NULL + FC_ERR_INVALID_ARG when full. */
static fc_nn_seq_item *next(fc_nn_seq *s, char *buf, fc_status *st) {
    if (!s) {
        *st = FC_ERR_NULL_ARG;
        return NULL;
    }
    if (s->n == FC_NN_SEQ_MAX) {
        *st = fc_ctx_fail(s->nn->ctx, FC_ERR_INVALID_ARG,
                          "fc_nn_seq: \"%s\" already holds %d layers", s->name, FC_NN_SEQ_MAX);
        return NULL;
    }
    char idx[16];
    snprintf(idx, sizeof idx, "%d", s->n);
    *st = fc__nn_join(s->nn, buf, s->name, idx, "fc_nn_seq");
    return *st == FC_OK ? &s->items[s->n] : NULL;
}

/* Counts the item in when its init succeeded. */
static fc_status done(fc_nn_seq *s, fc_status st) {
    if (st == FC_OK) s->n++;
    return st;
}

fc_status fc_nn_seq_linear(fc_nn_seq *s, int64_t in, int64_t out, bool bias) {
    char buf[FC_NN_NAME_MAX];
    fc_status st;
    fc_nn_seq_item *it = next(s, buf, &st);
    if (!it) return st;
    it->kind = FC_NN_LINEAR;
    return done(s, fc_nn_linear_init(s->nn, &it->u.linear, buf, in, out, bias));
}
fc_status fc_nn_seq_conv2d(fc_nn_seq *s, int64_t cin, int64_t cout, int64_t kh, int64_t kw,
                           const fc_conv2d_opts *opts, bool bias) {
    char buf[FC_NN_NAME_MAX];
    fc_status st;
    fc_nn_seq_item *it = next(s, buf, &st);
    if (!it) return st;
    it->kind = FC_NN_CONV2D;
    return done(s, fc_nn_conv2d_init(s->nn, &it->u.conv2d, buf, cin, cout, kh, kw, opts, bias));
}
fc_status fc_nn_seq_layer_norm(fc_nn_seq *s, int64_t dim, double eps, bool affine) {
    char buf[FC_NN_NAME_MAX];
    fc_status st;
    fc_nn_seq_item *it = next(s, buf, &st);
    if (!it) return st;
    it->kind = FC_NN_LAYER_NORM;
    return done(s, fc_nn_layer_norm_init(s->nn, &it->u.layer_norm, buf, dim, eps, affine));
}
fc_status fc_nn_seq_batch_norm(fc_nn_seq *s, int64_t channels, double momentum, double eps,
                               bool affine) {
    char buf[FC_NN_NAME_MAX];
    fc_status st;
    fc_nn_seq_item *it = next(s, buf, &st);
    if (!it) return st;
    it->kind = FC_NN_BATCH_NORM;
    return done(
        s, fc_nn_batch_norm_init(s->nn, &it->u.batch_norm, buf, channels, momentum, eps, affine));
}
fc_status fc_nn_seq_dropout(fc_nn_seq *s, double p) {
    char buf[FC_NN_NAME_MAX];
    fc_status st;
    fc_nn_seq_item *it = next(s, buf, &st);
    if (!it) return st;
    it->kind = FC_NN_DROPOUT;
    return done(s, fc_nn_dropout_init(s->nn, &it->u.dropout, p));
}

static fc_status set_act(fc_nn *nn, fc_nn_act *slot, fc_nn_act act) {
    if ((unsigned)act >= FC_NN_ACT_COUNT)
        return fc_ctx_fail(nn->ctx, FC_ERR_INVALID_ARG, "fc_nn_seq_act: unknown activation %d",
                           (int)act);
    *slot = act;
    return FC_OK;
}
fc_status fc_nn_seq_act(fc_nn_seq *s, fc_nn_act act) {
    char buf[FC_NN_NAME_MAX];
    fc_status st;
    fc_nn_seq_item *it = next(s, buf, &st);
    if (!it) return st;
    it->kind = FC_NN_ACT;
    return done(s, set_act(s->nn, &it->u.act, act));
}
fc_status fc_nn_seq_flatten(fc_nn_seq *s) {
    char buf[FC_NN_NAME_MAX];
    fc_status st;
    fc_nn_seq_item *it = next(s, buf, &st);
    if (!it) return st;
    it->kind = FC_NN_FLATTEN;
    return done(s, FC_OK);
}

static fc_tensor *flatten(fc_ctx *ctx, fc_tensor *x) {
    int64_t rest = 1;
    for (int i = 1; i < fc_tensor_rank(x); i++)
        rest *= fc_tensor_dim(x, i);
    return fc_reshape(ctx, x, (int64_t[]){fc_tensor_dim(x, 0), rest}, 2);
}

fc_tensor *fc_nn_seq_forward(const fc_nn_seq *s, fc_tensor *x) {
    if (!s || !x) return NULL;
    fc_ctx *ctx = s->nn->ctx;
    fc_tensor *h = fc_retain(x);
    for (int i = 0; i < s->n && h; i++) {
        const fc_nn_seq_item *it = &s->items[i];
        fc_tensor *y = NULL;
        switch (it->kind) {
        case FC_NN_LINEAR:
            y = fc_nn_linear_forward(&it->u.linear, h);
            break;
        case FC_NN_CONV2D:
            y = fc_nn_conv2d_forward(&it->u.conv2d, h);
            break;
        case FC_NN_LAYER_NORM:
            y = fc_nn_layer_norm_forward(&it->u.layer_norm, h);
            break;
        case FC_NN_BATCH_NORM:
            y = fc_nn_batch_norm_forward(&it->u.batch_norm, h);
            break;
        case FC_NN_DROPOUT:
            y = fc_nn_dropout_forward(&it->u.dropout, h);
            break;
        case FC_NN_ACT:
            y = fc_nn_act_forward(ctx, it->u.act, h);
            break;
        case FC_NN_FLATTEN:
            y = flatten(ctx, h);
            break;
        case FC_NN_KIND_COUNT:
            break;
        }
        fc_release(h);
        h = y;
    }
    return h;
}
