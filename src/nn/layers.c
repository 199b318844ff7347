/* SPDX-License-Identifier: MIT */
/* layers.c - the single-op layers: Linear, Embedding, the norms, Dropout,
 * Conv2d and the activations.
 *
 * Each init validates its sizes first (so a bad size registers nothing),
 * then creates and registers its tensors with torch's default values. Each
 * forward checks what the layer knows about its input (the feature axis)
 * so the message names the layer, then calls one public op. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fucina/nn.h"
#include "nn/nn_internal.h"

static fc_status need(fc_nn *nn, const void *layer, const char *fn) {
    if (!nn) return FC_ERR_NULL_ARG;
    if (!layer) return fc_ctx_fail(nn->ctx, FC_ERR_NULL_ARG, "%s: NULL layer", fn);
    return FC_OK;
}

static fc_status positive(fc_nn *nn, const char *fn, const char *what, int64_t v) {
    if (v >= 1) return FC_OK;
    return fc_ctx_fail(nn->ctx, FC_ERR_INVALID_ARG, "%s: %s = %lld, must be >= 1", fn, what,
                       (long long)v);
}

static fc_status eps_ok(fc_nn *nn, const char *fn, double eps) {
    if (isfinite(eps) && eps >= 0) return FC_OK;
    return fc_ctx_fail(nn->ctx, FC_ERR_INVALID_ARG, "%s: eps = %g, must be finite and >= 0", fn,
                       eps);
}

/* The last axis of x must be want (the layer's feature size). */
static bool last_axis_ok(const fc_nn *nn, fc_tensor *x, int64_t want, const char *fn) {
    if (!x) return false;
    int r = fc_tensor_rank(x);
    if (fc_tensor_dim(x, r - 1) == want) return true;
    char d[96];
    fc_ctx_fail(nn->ctx, FC_ERR_SHAPE_MISMATCH, "%s: input %s, the last axis must be %lld", fn,
                fc_tensor_describe(x, d, sizeof d), (long long)want);
    return false;
}

/* Axis 1 of x [N, C, ...] must be want. */
static bool channels_ok(const fc_nn *nn, fc_tensor *x, int64_t want, const char *fn) {
    if (!x) return false;
    char d[96];
    if (fc_tensor_rank(x) < 2) {
        fc_ctx_fail(nn->ctx, FC_ERR_RANK, "%s: input %s, needs [N, C, ...]", fn,
                    fc_tensor_describe(x, d, sizeof d));
        return false;
    }
    if (fc_tensor_dim(x, 1) == want) return true;
    fc_ctx_fail(nn->ctx, FC_ERR_SHAPE_MISMATCH, "%s: input %s, axis 1 must be %lld channels", fn,
                fc_tensor_describe(x, d, sizeof d), (long long)want);
    return false;
}

static fc_status reg_const(fc_nn *nn, const char *prefix, const char *name, int64_t n, double value,
                           unsigned flags, fc_tensor **slot) {
    fc_tensor *t = fc_full(nn->ctx, FC_F32, (int64_t[]){n}, 1, value);
    *slot = t;
    if (!t) return fc_ctx_status(nn->ctx);
    return fc_nn_register(nn, prefix, name, t, flags);
}

static fc_status reg_uniform(fc_nn *nn, const char *prefix, const char *name, const int64_t *shape,
                             int rank, double bound, unsigned flags, fc_tensor **slot) {
    fc_tensor *t = fc__nn_uniform(nn->ctx, shape, rank, bound);
    *slot = t;
    if (!t) return fc_ctx_status(nn->ctx);
    return fc_nn_register(nn, prefix, name, t, flags);
}

/* ---- Linear ------------------------------------------------------------------------ */
fc_status fc_nn_linear_init(fc_nn *nn, fc_nn_linear *l, const char *name, int64_t in, int64_t out,
                            bool bias) {
    static const char fn[] = "fc_nn_linear_init";
    fc_status st = need(nn, l, fn);
    if (st == FC_OK) st = positive(nn, fn, "in", in);
    if (st == FC_OK) st = positive(nn, fn, "out", out);
    if (st != FC_OK) return st;
    memset(l, 0, sizeof *l);
    l->nn = nn;
    l->in = in;
    l->out = out;
    /* kaiming_uniform(a = sqrt(5)): bound sqrt(6 / (6 fan_in)) = 1 / sqrt(fan_in) */
    double bound = 1.0 / sqrt((double)in);
    st = reg_uniform(nn, name, "weight", (int64_t[]){out, in}, 2, bound, 0, &l->weight);
    if (st == FC_OK && bias)
        st = reg_uniform(nn, name, "bias", (int64_t[]){out}, 1, bound, FC_NN_NO_DECAY, &l->bias);
    return st;
}

fc_tensor *fc_nn_linear_forward(const fc_nn_linear *l, fc_tensor *x) {
    if (!l || !last_axis_ok(l->nn, x, l->in, "fc_nn_linear_forward")) return NULL;
    return fc_linear(l->nn->ctx, x, l->weight, l->bias);
}

/* ---- Embedding --------------------------------------------------------------------- */
fc_status fc_nn_embedding_init(fc_nn *nn, fc_nn_embedding *e, const char *name, int64_t num,
                               int64_t dim) {
    static const char fn[] = "fc_nn_embedding_init";
    fc_status st = need(nn, e, fn);
    if (st == FC_OK) st = positive(nn, fn, "num", num);
    if (st == FC_OK) st = positive(nn, fn, "dim", dim);
    if (st != FC_OK) return st;
    memset(e, 0, sizeof *e);
    e->nn = nn;
    e->num = num;
    e->dim = dim;
    e->weight = fc_randn(nn->ctx, FC_F32, (int64_t[]){num, dim}, 2);
    if (!e->weight) return fc_ctx_status(nn->ctx);
    return fc_nn_register(nn, name, "weight", e->weight, 0);
}

fc_tensor *fc_nn_embedding_forward(const fc_nn_embedding *e, fc_tensor *ids) {
    if (!e || !ids) return NULL;
    return fc_embedding(e->nn->ctx, e->weight, ids);
}

/* ---- LayerNorm, RMSNorm, GroupNorm ------------------------------------------------- */
fc_status fc_nn_layer_norm_init(fc_nn *nn, fc_nn_layer_norm *n, const char *name, int64_t dim,
                                double eps, bool affine) {
    static const char fn[] = "fc_nn_layer_norm_init";
    fc_status st = need(nn, n, fn);
    if (st == FC_OK) st = positive(nn, fn, "dim", dim);
    if (st == FC_OK) st = eps_ok(nn, fn, eps);
    if (st != FC_OK) return st;
    memset(n, 0, sizeof *n);
    n->nn = nn;
    n->dim = dim;
    n->eps = eps == 0 ? 1e-5 : eps;
    if (!affine) return FC_OK;
    st = reg_const(nn, name, "weight", dim, 1.0, FC_NN_NO_DECAY, &n->weight);
    if (st == FC_OK) st = reg_const(nn, name, "bias", dim, 0.0, FC_NN_NO_DECAY, &n->bias);
    return st;
}

fc_tensor *fc_nn_layer_norm_forward(const fc_nn_layer_norm *n, fc_tensor *x) {
    if (!n || !last_axis_ok(n->nn, x, n->dim, "fc_nn_layer_norm_forward")) return NULL;
    return fc_layer_norm(n->nn->ctx, x, n->weight, n->bias, n->eps);
}

fc_status fc_nn_rms_norm_init(fc_nn *nn, fc_nn_rms_norm *n, const char *name, int64_t dim,
                              double eps) {
    static const char fn[] = "fc_nn_rms_norm_init";
    fc_status st = need(nn, n, fn);
    if (st == FC_OK) st = positive(nn, fn, "dim", dim);
    if (st == FC_OK) st = eps_ok(nn, fn, eps);
    if (st != FC_OK) return st;
    memset(n, 0, sizeof *n);
    n->nn = nn;
    n->dim = dim;
    n->eps = eps == 0 ? 1e-6 : eps;
    return reg_const(nn, name, "weight", dim, 1.0, FC_NN_NO_DECAY, &n->weight);
}

fc_tensor *fc_nn_rms_norm_forward(const fc_nn_rms_norm *n, fc_tensor *x) {
    if (!n || !last_axis_ok(n->nn, x, n->dim, "fc_nn_rms_norm_forward")) return NULL;
    return fc_rms_norm(n->nn->ctx, x, n->weight, n->eps);
}

fc_status fc_nn_group_norm_init(fc_nn *nn, fc_nn_group_norm *g, const char *name, int64_t groups,
                                int64_t channels, double eps, bool affine) {
    static const char fn[] = "fc_nn_group_norm_init";
    fc_status st = need(nn, g, fn);
    if (st == FC_OK) st = positive(nn, fn, "groups", groups);
    if (st == FC_OK) st = positive(nn, fn, "channels", channels);
    if (st == FC_OK) st = eps_ok(nn, fn, eps);
    if (st == FC_OK && channels % groups != 0)
        st = fc_ctx_fail(nn->ctx, FC_ERR_INVALID_ARG,
                         "%s: groups = %lld does not divide channels = %lld", fn, (long long)groups,
                         (long long)channels);
    if (st != FC_OK) return st;
    memset(g, 0, sizeof *g);
    g->nn = nn;
    g->groups = groups;
    g->channels = channels;
    g->eps = eps == 0 ? 1e-5 : eps;
    if (!affine) return FC_OK;
    st = reg_const(nn, name, "weight", channels, 1.0, FC_NN_NO_DECAY, &g->weight);
    if (st == FC_OK) st = reg_const(nn, name, "bias", channels, 0.0, FC_NN_NO_DECAY, &g->bias);
    return st;
}

fc_tensor *fc_nn_group_norm_forward(const fc_nn_group_norm *g, fc_tensor *x) {
    if (!g || !channels_ok(g->nn, x, g->channels, "fc_nn_group_norm_forward")) return NULL;
    return fc_group_norm(g->nn->ctx, x, g->groups, g->weight, g->bias, g->eps);
}

/* ---- BatchNorm --------------------------------------------------------------------- */
fc_status fc_nn_batch_norm_init(fc_nn *nn, fc_nn_batch_norm *b, const char *name, int64_t channels,
                                double momentum, double eps, bool affine) {
    static const char fn[] = "fc_nn_batch_norm_init";
    fc_status st = need(nn, b, fn);
    if (st == FC_OK) st = positive(nn, fn, "channels", channels);
    if (st == FC_OK) st = eps_ok(nn, fn, eps);
    if (st == FC_OK && !(momentum >= 0 && momentum <= 1))
        st = fc_ctx_fail(nn->ctx, FC_ERR_INVALID_ARG, "%s: momentum = %g, must be in [0, 1]", fn,
                         momentum);
    if (st != FC_OK) return st;
    memset(b, 0, sizeof *b);
    b->nn = nn;
    b->channels = channels;
    b->momentum = momentum == 0 ? 0.1 : momentum;
    b->eps = eps == 0 ? 1e-5 : eps;
    if (affine) {
        st = reg_const(nn, name, "weight", channels, 1.0, FC_NN_NO_DECAY, &b->weight);
        if (st == FC_OK) st = reg_const(nn, name, "bias", channels, 0.0, FC_NN_NO_DECAY, &b->bias);
    }
    if (st == FC_OK)
        st = reg_const(nn, name, "running_mean", channels, 0.0, FC_NN_BUFFER, &b->running_mean);
    if (st == FC_OK)
        st = reg_const(nn, name, "running_var", channels, 1.0, FC_NN_BUFFER, &b->running_var);
    if (st == FC_OK) {
        b->num_batches_tracked = fc_zeros(nn->ctx, FC_I64, (int64_t[]){1}, 1);
        if (!b->num_batches_tracked) return fc_ctx_status(nn->ctx);
        st = fc_nn_register(nn, name, "num_batches_tracked", b->num_batches_tracked,
                            FC_NN_BUFFER | FC_NN_SCALAR);
    }
    return st;
}

fc_tensor *fc_nn_batch_norm_forward(const fc_nn_batch_norm *b, fc_tensor *x) {
    if (!b || !channels_ok(b->nn, x, b->channels, "fc_nn_batch_norm_forward")) return NULL;
    bool training = b->nn->training;
    fc_tensor *y = fc_batch_norm(b->nn->ctx, x, b->weight, b->bias, b->running_mean, b->running_var,
                                 training, b->momentum, b->eps);
    if (y && training) {
        int64_t *count = fc_tensor_data_mut(b->num_batches_tracked);
        if (count) count[0]++;
    }
    return y;
}

/* ---- Dropout ----------------------------------------------------------------------- */
fc_status fc_nn_dropout_init(fc_nn *nn, fc_nn_dropout *d, double p) {
    fc_status st = need(nn, d, "fc_nn_dropout_init");
    if (st != FC_OK) return st;
    if (!(p >= 0 && p < 1))
        return fc_ctx_fail(nn->ctx, FC_ERR_INVALID_ARG,
                           "fc_nn_dropout_init: p = %g, must be in [0, 1)", p);
    d->nn = nn;
    d->p = p;
    return FC_OK;
}

fc_tensor *fc_nn_dropout_forward(const fc_nn_dropout *d, fc_tensor *x) {
    if (!d || !x) return NULL;
    return fc_dropout(d->nn->ctx, x, d->p, d->nn->training);
}

static fc_status groups_ok(fc_nn *nn, const char *fn, int64_t groups, int64_t cin, int64_t cout) {
    if (groups >= 1 && cin % groups == 0 && cout % groups == 0) return FC_OK;
    return fc_ctx_fail(nn->ctx, FC_ERR_INVALID_ARG,
                       "%s: groups = %lld must divide cin = %lld and cout = %lld", fn,
                       (long long)groups, (long long)cin, (long long)cout);
}

/* ---- Conv2d ------------------------------------------------------------------------ */
fc_status fc_nn_conv2d_init(fc_nn *nn, fc_nn_conv2d *c, const char *name, int64_t cin, int64_t cout,
                            int64_t kh, int64_t kw, const fc_conv2d_opts *opts, bool bias) {
    static const char fn[] = "fc_nn_conv2d_init";
    fc_status st = need(nn, c, fn);
    if (st == FC_OK) st = positive(nn, fn, "cin", cin);
    if (st == FC_OK) st = positive(nn, fn, "cout", cout);
    if (st == FC_OK) st = positive(nn, fn, "kh", kh);
    if (st == FC_OK) st = positive(nn, fn, "kw", kw);
    fc_conv2d_opts o = opts ? *opts : fc_conv2d_opts_default();
    int64_t groups = o.groups == 0 ? 1 : o.groups;
    if (st == FC_OK) st = groups_ok(nn, fn, groups, cin, cout);
    if (st != FC_OK) return st;
    memset(c, 0, sizeof *c);
    c->nn = nn;
    c->cin = cin;
    c->cout = cout;
    c->kh = kh;
    c->kw = kw;
    c->opts = o;
    double bound = 1.0 / sqrt((double)(cin / groups * kh * kw));
    st = reg_uniform(nn, name, "weight", (int64_t[]){cout, cin / groups, kh, kw}, 4, bound, 0,
                     &c->weight);
    if (st == FC_OK && bias)
        st = reg_uniform(nn, name, "bias", (int64_t[]){cout}, 1, bound, FC_NN_NO_DECAY, &c->bias);
    return st;
}

fc_tensor *fc_nn_conv2d_forward(const fc_nn_conv2d *c, fc_tensor *x) {
    if (!c || !channels_ok(c->nn, x, c->cin, "fc_nn_conv2d_forward")) return NULL;
    return fc_conv2d(c->nn->ctx, x, c->weight, c->bias, &c->opts);
}

/* ---- Conv1d, Conv3d, ConvTranspose2d ------------------------------------------------ */
fc_status fc_nn_conv1d_init(fc_nn *nn, fc_nn_conv1d *c, const char *name, int64_t cin, int64_t cout,
                            int64_t k, const fc_conv1d_opts *opts, bool bias) {
    static const char fn[] = "fc_nn_conv1d_init";
    fc_status st = need(nn, c, fn);
    if (st == FC_OK) st = positive(nn, fn, "cin", cin);
    if (st == FC_OK) st = positive(nn, fn, "cout", cout);
    if (st == FC_OK) st = positive(nn, fn, "k", k);
    fc_conv1d_opts o = opts ? *opts : fc_conv1d_opts_default();
    int64_t groups = o.groups == 0 ? 1 : o.groups;
    if (st == FC_OK) st = groups_ok(nn, fn, groups, cin, cout);
    if (st != FC_OK) return st;
    memset(c, 0, sizeof *c);
    c->nn = nn;
    c->cin = cin;
    c->cout = cout;
    c->k = k;
    c->opts = o;
    double bound = 1.0 / sqrt((double)(cin / groups * k));
    st = reg_uniform(nn, name, "weight", (int64_t[]){cout, cin / groups, k}, 3, bound, 0,
                     &c->weight);
    if (st == FC_OK && bias)
        st = reg_uniform(nn, name, "bias", (int64_t[]){cout}, 1, bound, FC_NN_NO_DECAY, &c->bias);
    return st;
}

fc_tensor *fc_nn_conv1d_forward(const fc_nn_conv1d *c, fc_tensor *x) {
    if (!c || !channels_ok(c->nn, x, c->cin, "fc_nn_conv1d_forward")) return NULL;
    return fc_conv1d(c->nn->ctx, x, c->weight, c->bias, &c->opts);
}

fc_status fc_nn_conv3d_init(fc_nn *nn, fc_nn_conv3d *c, const char *name, int64_t cin, int64_t cout,
                            int64_t kd, int64_t kh, int64_t kw, const fc_conv3d_opts *opts,
                            bool bias) {
    static const char fn[] = "fc_nn_conv3d_init";
    fc_status st = need(nn, c, fn);
    if (st == FC_OK) st = positive(nn, fn, "cin", cin);
    if (st == FC_OK) st = positive(nn, fn, "cout", cout);
    if (st == FC_OK) st = positive(nn, fn, "kd", kd);
    if (st == FC_OK) st = positive(nn, fn, "kh", kh);
    if (st == FC_OK) st = positive(nn, fn, "kw", kw);
    fc_conv3d_opts o = opts ? *opts : fc_conv3d_opts_default();
    int64_t groups = o.groups == 0 ? 1 : o.groups;
    if (st == FC_OK) st = groups_ok(nn, fn, groups, cin, cout);
    if (st != FC_OK) return st;
    memset(c, 0, sizeof *c);
    c->nn = nn;
    c->cin = cin;
    c->cout = cout;
    c->kd = kd;
    c->kh = kh;
    c->kw = kw;
    c->opts = o;
    double bound = 1.0 / sqrt((double)(cin / groups) * (double)kd * (double)kh * (double)kw);
    st = reg_uniform(nn, name, "weight", (int64_t[]){cout, cin / groups, kd, kh, kw}, 5, bound, 0,
                     &c->weight);
    if (st == FC_OK && bias)
        st = reg_uniform(nn, name, "bias", (int64_t[]){cout}, 1, bound, FC_NN_NO_DECAY, &c->bias);
    return st;
}

fc_tensor *fc_nn_conv3d_forward(const fc_nn_conv3d *c, fc_tensor *x) {
    if (!c || !channels_ok(c->nn, x, c->cin, "fc_nn_conv3d_forward")) return NULL;
    return fc_conv3d(c->nn->ctx, x, c->weight, c->bias, &c->opts);
}

fc_status fc_nn_conv_transpose2d_init(fc_nn *nn, fc_nn_conv_transpose2d *c, const char *name,
                                      int64_t cin, int64_t cout, int64_t kh, int64_t kw,
                                      const fc_conv_transpose2d_opts *opts, bool bias) {
    static const char fn[] = "fc_nn_conv_transpose2d_init";
    fc_status st = need(nn, c, fn);
    if (st == FC_OK) st = positive(nn, fn, "cin", cin);
    if (st == FC_OK) st = positive(nn, fn, "cout", cout);
    if (st == FC_OK) st = positive(nn, fn, "kh", kh);
    if (st == FC_OK) st = positive(nn, fn, "kw", kw);
    fc_conv_transpose2d_opts o = opts ? *opts : fc_conv_transpose2d_opts_default();
    int64_t groups = o.groups == 0 ? 1 : o.groups;
    if (st == FC_OK) st = groups_ok(nn, fn, groups, cin, cout);
    if (st != FC_OK) return st;
    memset(c, 0, sizeof *c);
    c->nn = nn;
    c->cin = cin;
    c->cout = cout;
    c->kh = kh;
    c->kw = kw;
    c->opts = o;
    /* torch's fan_in of a [cin, cout / groups, kh, kw] weight is its axis 1 times kh kw */
    double bound = 1.0 / sqrt((double)(cout / groups * kh * kw));
    st = reg_uniform(nn, name, "weight", (int64_t[]){cin, cout / groups, kh, kw}, 4, bound, 0,
                     &c->weight);
    if (st == FC_OK && bias)
        st = reg_uniform(nn, name, "bias", (int64_t[]){cout}, 1, bound, FC_NN_NO_DECAY, &c->bias);
    return st;
}

fc_tensor *fc_nn_conv_transpose2d_forward(const fc_nn_conv_transpose2d *c, fc_tensor *x) {
    if (!c || !channels_ok(c->nn, x, c->cin, "fc_nn_conv_transpose2d_forward")) return NULL;
    return fc_conv_transpose2d(c->nn->ctx, x, c->weight, c->bias, &c->opts);
}

/* ---- activations ------------------------------------------------------------------- */
fc_tensor *fc_nn_act_forward(fc_ctx *ctx, fc_nn_act act, fc_tensor *x) {
    if (!x) return NULL;
    switch (act) {
    case FC_NN_ACT_GELU:
        return fc_gelu(ctx, x, false);
    case FC_NN_ACT_GELU_TANH:
        return fc_gelu(ctx, x, true);
    case FC_NN_ACT_RELU:
        return fc_relu(ctx, x);
    case FC_NN_ACT_SILU:
        return fc_silu(ctx, x);
    case FC_NN_ACT_TANH:
        return fc_tanh(ctx, x);
    case FC_NN_ACT_COUNT:
        break;
    }
    fc_ctx_fail(ctx, FC_ERR_INVALID_ARG, "fc_nn_act_forward: unknown activation %d", (int)act);
    return NULL;
}
