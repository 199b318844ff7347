/* SPDX-License-Identifier: MIT */
/* rnn.c - LSTM and GRU layers (one layer, one direction, batch first),
 * torch.nn's gate order and parameter names.
 *
 * The input projection x W_ih^T + b_ih is one fc_linear over all T steps;
 * the recurrence is one fc_linear of the state per step and the gates'
 * elementwise ops on column slices (fc_narrow views, no copies), recorded
 * as ordinary ops, so autograd unrolls the sequence. The per-step outputs
 * are stacked along axis 1 at the end. */
#include <math.h>
#include <string.h>

#include "fucina/nn.h"
#include "nn/nn_internal.h"

static fc_status rnn_init(fc_nn *nn, fc_nn_rnn *r, const char *name, int64_t in, int64_t hidden,
                          bool bias, int64_t gates, const char *fn) {
    if (!nn) return FC_ERR_NULL_ARG;
    if (!r) return fc_ctx_fail(nn->ctx, FC_ERR_NULL_ARG, "%s: NULL layer", fn);
    if (in < 1 || hidden < 1)
        return fc_ctx_fail(nn->ctx, FC_ERR_INVALID_ARG,
                           "%s: in = %lld, hidden = %lld, must be >= 1", fn, (long long)in,
                           (long long)hidden);
    memset(r, 0, sizeof *r);
    r->nn = nn;
    r->in = in;
    r->hidden = hidden;
    r->gates = gates;
    double bound = 1.0 / sqrt((double)hidden);
    int64_t gh = gates * hidden;
    const struct {
        const char *name;
        int64_t shape[2];
        int rank;
        fc_tensor **slot;
        unsigned flags;
    } t[4] = {{"weight_ih_l0", {gh, in}, 2, &r->weight_ih, 0},
              {"weight_hh_l0", {gh, hidden}, 2, &r->weight_hh, 0},
              {"bias_ih_l0", {gh, 0}, 1, &r->bias_ih, FC_NN_NO_DECAY},
              {"bias_hh_l0", {gh, 0}, 1, &r->bias_hh, FC_NN_NO_DECAY}};
    for (int i = 0; i < (bias ? 4 : 2); i++) {
        fc_tensor *p = fc__nn_uniform(nn->ctx, t[i].shape, t[i].rank, bound);
        *t[i].slot = p;
        if (!p) return fc_ctx_status(nn->ctx);
        fc_status st = fc_nn_register(nn, name, t[i].name, p, t[i].flags);
        if (st != FC_OK) return st;
    }
    return FC_OK;
}

fc_status fc_nn_lstm_init(fc_nn *nn, fc_nn_rnn *r, const char *name, int64_t in, int64_t hidden,
                          bool bias) {
    return rnn_init(nn, r, name, in, hidden, bias, 4, "fc_nn_lstm_init");
}

fc_status fc_nn_gru_init(fc_nn *nn, fc_nn_rnn *r, const char *name, int64_t in, int64_t hidden,
                         bool bias) {
    return rnn_init(nn, r, name, in, hidden, bias, 3, "fc_nn_gru_init");
}

/* Checks x [B, T, in] and a state [B, hidden] (NULL allowed); the state,
 * or zeros, as a new reference in *out. */
static bool check(const fc_nn_rnn *r, fc_tensor *x, fc_tensor *s, const char *fn, fc_tensor **out) {
    fc_ctx *ctx = r->nn->ctx;
    char d[96];
    if (fc_tensor_rank(x) != 3 || fc_tensor_dim(x, 2) != r->in) {
        fc_ctx_fail(ctx, FC_ERR_SHAPE_MISMATCH, "%s: input %s, needs [B, T, %lld]", fn,
                    fc_tensor_describe(x, d, sizeof d), (long long)r->in);
        return false;
    }
    int64_t b = fc_tensor_dim(x, 0);
    if (!s) {
        *out = fc_zeros(ctx, fc_tensor_dtype(x), (int64_t[]){b, r->hidden}, 2);
        return *out != NULL;
    }
    if (fc_tensor_rank(s) != 2 || fc_tensor_dim(s, 0) != b || fc_tensor_dim(s, 1) != r->hidden) {
        fc_ctx_fail(ctx, FC_ERR_SHAPE_MISMATCH, "%s: state %s, needs [%lld, %lld]", fn,
                    fc_tensor_describe(s, d, sizeof d), (long long)b, (long long)r->hidden);
        return false;
    }
    *out = fc_retain(s);
    return true;
}

/* Column block k (of width hidden) of g [B, G * hidden], a view. */
static fc_tensor *gate(fc_ctx *ctx, fc_tensor *g, int k, int64_t hidden) {
    return fc_narrow(ctx, g, 1, k * hidden, hidden);
}

/* The recurrence of either kind; c is NULL for GRU. Steals h (and c). */
static fc_tensor *run(const fc_nn_rnn *r, fc_tensor *x, fc_tensor *h, fc_tensor *c, fc_tensor **h_n,
                      fc_tensor **c_n) {
    fc_ctx *ctx = r->nn->ctx;
    int64_t T = fc_tensor_dim(x, 1), H = r->hidden;
    void *mem;
    fc_tensor *hs_mem = fc__nn_mem(ctx, (size_t)T * sizeof(fc_tensor *), &mem);
    fc_tensor **hs = mem;
    fc_tensor *xw = fc_linear(ctx, x, r->weight_ih, r->bias_ih); /* [B, T, G*H] */
    for (int64_t t = 0; hs && xw && h && t < T; t++) {
        fc_tensor *xt0 = fc_narrow(ctx, xw, 1, t, 1);
        fc_tensor *xt = fc_squeeze(ctx, xt0, 1); /* [B, G*H] */
        fc_tensor *hw = fc_linear(ctx, h, r->weight_hh, r->bias_hh);
        fc_tensor *nh = NULL, *nc = NULL;
        if (c) { /* LSTM: i, f, g, o */
            fc_tensor *g = fc_add(ctx, xt, hw);
            fc_tensor *gi = gate(ctx, g, 0, H), *gf = gate(ctx, g, 1, H);
            fc_tensor *gg = gate(ctx, g, 2, H), *go = gate(ctx, g, 3, H);
            fc_tensor *i = fc_sigmoid(ctx, gi), *f = fc_sigmoid(ctx, gf);
            fc_tensor *gt = fc_tanh(ctx, gg), *o = fc_sigmoid(ctx, go);
            fc_tensor *fc = fc_mul(ctx, f, c), *ig = fc_mul(ctx, i, gt);
            nc = fc_add(ctx, fc, ig);
            fc_tensor *tc = fc_tanh(ctx, nc);
            nh = fc_mul(ctx, o, tc);
            fc_tensor *tmp[] = {g, gi, gf, gg, go, i, f, gt, o, fc, ig, tc};
            for (size_t k = 0; k < sizeof tmp / sizeof *tmp; k++)
                fc_release(tmp[k]);
            fc_release(c);
            c = nc;
        } else { /* GRU: r, z, n; h' = n + z * (h - n) */
            fc_tensor *xr = gate(ctx, xt, 0, H), *xz = gate(ctx, xt, 1, H),
                      *xn = gate(ctx, xt, 2, H);
            fc_tensor *hr = gate(ctx, hw, 0, H), *hz = gate(ctx, hw, 1, H),
                      *hn = gate(ctx, hw, 2, H);
            fc_tensor *ar = fc_add(ctx, xr, hr), *az = fc_add(ctx, xz, hz);
            fc_tensor *rg = fc_sigmoid(ctx, ar), *zg = fc_sigmoid(ctx, az);
            fc_tensor *rh = fc_mul(ctx, rg, hn);
            fc_tensor *an = fc_add(ctx, xn, rh);
            fc_tensor *n = fc_tanh(ctx, an);
            fc_tensor *hmn = fc_sub(ctx, h, n);
            fc_tensor *zd = fc_mul(ctx, zg, hmn);
            nh = fc_add(ctx, n, zd);
            fc_tensor *tmp[] = {xr, xz, xn, hr, hz, hn, ar, az, rg, zg, rh, an, n, hmn, zd};
            for (size_t k = 0; k < sizeof tmp / sizeof *tmp; k++)
                fc_release(tmp[k]);
        }
        fc_release(xt0);
        fc_release(xt);
        fc_release(hw);
        fc_release(h);
        h = nh;
        hs[t] = fc_retain(h);
    }
    fc_tensor *y = hs && h ? fc_stack(ctx, hs, (int)T, 1) : NULL;
    if (y && h_n) *h_n = fc_retain(h);
    if (y && c_n) *c_n = fc_retain(c);
    for (int64_t t = 0; hs && t < T; t++)
        fc_release(hs[t]);
    fc_release(hs_mem);
    fc_release(xw);
    fc_release(h);
    fc_release(c);
    return y;
}

fc_tensor *fc_nn_lstm_forward(const fc_nn_rnn *r, fc_tensor *x, fc_tensor *h0, fc_tensor *c0,
                              fc_tensor **h_n, fc_tensor **c_n) {
    static const char fn[] = "fc_nn_lstm_forward";
    if (h_n) *h_n = NULL;
    if (c_n) *c_n = NULL;
    if (!r || !x) return NULL;
    if (r->gates != 4) {
        fc_ctx_fail(r->nn->ctx, FC_ERR_INVALID_ARG, "%s: the layer is not an LSTM (%lld gates)", fn,
                    (long long)r->gates);
        return NULL;
    }
    fc_tensor *h = NULL, *c = NULL;
    if (!check(r, x, h0, fn, &h) || !check(r, x, c0, fn, &c)) {
        fc_release(h);
        return NULL;
    }
    return run(r, x, h, c, h_n, c_n);
}

fc_tensor *fc_nn_gru_forward(const fc_nn_rnn *r, fc_tensor *x, fc_tensor *h0, fc_tensor **h_n) {
    static const char fn[] = "fc_nn_gru_forward";
    if (h_n) *h_n = NULL;
    if (!r || !x) return NULL;
    if (r->gates != 3) {
        fc_ctx_fail(r->nn->ctx, FC_ERR_INVALID_ARG, "%s: the layer is not a GRU (%lld gates)", fn,
                    (long long)r->gates);
        return NULL;
    }
    fc_tensor *h = NULL;
    if (!check(r, x, h0, fn, &h)) return NULL;
    return run(r, x, h, NULL, h_n, NULL);
}
