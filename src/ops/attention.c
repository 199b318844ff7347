/* SPDX-License-Identifier: MIT */
/* ops/attention.c - fc_attention: fused scaled dot-product attention with
 * grouped-query heads, an optional additive mask and causality, as one
 * differentiable op. The kernels (flash attention, forward and the two
 * backward passes) are exec/kernels/attention.c; this file validates,
 * converts f16/bf16 to f32 around them, records, and holds the rule.
 *
 *   q [B, Hq, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv], mask -> [B, Hq, T, Dv]
 *
 * The output is stored as [B, T, Hq, Dv] and returned as its [B, Hq, T, Dv]
 * transposed view: a model transposes it back and merges the heads, which
 * is then a free reshape instead of a copy.
 *
 * Rule: the kernel's backward from the saved q, k, v, output and per-row
 * logsumexp (and the mask), into dq, dk, dv and, when the mask requires
 * grad, the [B, Hq, T, S] score gradient that the engine sums down to the
 * mask's shape. In a create_graph walk the rule instead recomputes the
 * probabilities from the linked q, k (and mask) with recorded matmul,
 * additive-mask and softmax ops, and writes the backward over them with
 * recorded ops (attention_graph below), so its gradients differentiate
 * again. That path holds the [B, Hq, T, S] scores: it is for the small
 * problems higher-order gradients are taken of, not a flash kernel. */
#include <math.h>
#include <string.h>

#include "ag/tape.h"
#include "exec/kernels/attention.h"
#include "exec/kernels/copy.h"
#include "fucina.h"

/* The node's saved layout: the mask, when there is one, comes last. */
enum {
    ATT_SAVED_Q = 0,
    ATT_SAVED_K = 1,
    ATT_SAVED_V = 2,
    ATT_SAVED_OUT = 3,
    ATT_SAVED_LSE = 4,
    ATT_SAVED_MASK = 5,
};
enum { ATT_IN_Q, ATT_IN_K, ATT_IN_V, ATT_IN_MASK };
enum { ATT_I_CAUSAL = 0 };
enum { ATT_F_SCALE = 0 };

/* t in the compute dtype ct: t itself retained when it has it, else an f32
 * copy (f16/bf16). NULL with the error recorded. */
static fc_tensor *in_compute(fc_ctx *ctx, fc_tensor *t, fc_dtype ct) {
    if (t->raw.dtype == ct) {
        fc_retain(t);
        return t;
    }
    return fc__copy_cast(ctx, "attention", t, ct);
}

/* ---- validation ----------------------------------------------------------------------- */

static fc_status check_rank4(fc_ctx *ctx, const fc_tensor *t, const char *name, const char *want) {
    char d[160];
    if (t->raw.rank != 4)
        return fc__fail(ctx, FC_ERR_RANK, "attention: %s %s has rank %d; it needs %s", name,
                        fc__desc(t, d, (int)sizeof d), t->raw.rank, want);
    return FC_OK;
}

static fc_status check_inputs(fc_ctx *ctx, fc_tensor *q, fc_tensor *k, fc_tensor *v,
                              fc_tensor *mask) {
    char dq[160], dk[160], dv[160], dm[160];
    fc__desc(q, dq, (int)sizeof dq);
    fc__desc(k, dk, (int)sizeof dk);
    fc__desc(v, dv, (int)sizeof dv);
    fc_dtype dt = q->raw.dtype;
    if (!fc_dtype_is_float(dt))
        return fc__fail(ctx, FC_ERR_DTYPE, "attention: q %s is not a float dtype; cast with fc_to",
                        dq);
    fc_tensor *others[3] = {k, v, mask};
    const char *names[3] = {"k", "v", "mask"};
    for (int i = 0; i < 3; i++) {
        if (others[i] && others[i]->raw.dtype != dt)
            return fc__fail(ctx, FC_ERR_DTYPE,
                            "attention: dtypes of q (%s) and %s (%s) differ; cast one with fc_to",
                            fc_dtype_name(dt), names[i], fc_dtype_name(others[i]->raw.dtype));
    }
    if (check_rank4(ctx, q, "q", "[B, Hq, T, D]") != FC_OK ||
        check_rank4(ctx, k, "k", "[B, Hkv, S, D]") != FC_OK ||
        check_rank4(ctx, v, "v", "[B, Hkv, S, Dv]") != FC_OK)
        return fc_ctx_status(ctx);
    const int64_t *qs = q->raw.shape, *ks = k->raw.shape, *vs = v->raw.shape;
    for (int i = 0; i < 4; i++)
        if (qs[i] < 1 || ks[i] < 1 || vs[i] < 1)
            return fc__fail(ctx, FC_ERR_INVALID_SHAPE,
                            "attention: q %s, k %s and v %s need every axis >= 1", dq, dk, dv);
    if (qs[0] != ks[0] || ks[0] != vs[0])
        return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                        "attention: batch sizes of q %s, k %s and v %s differ", dq, dk, dv);
    if (qs[3] != ks[3])
        return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                        "attention: head dims of q %s and k %s differ (%lld, %lld)", dq, dk,
                        (long long)qs[3], (long long)ks[3]);
    if (ks[1] != vs[1] || ks[2] != vs[2])
        return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                        "attention: k %s and v %s need the same kv heads and keys", dk, dv);
    if (qs[1] % ks[1] != 0)
        return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                        "attention: %lld query heads (q %s) are not a multiple of %lld kv heads "
                        "(k %s)",
                        (long long)qs[1], dq, (long long)ks[1], dk);
    /* Every view's element count fits (a checked size), but the output
     * [B, Hq, T, Dv] and the scores [B, Hq, T, S] mix two tensors' axes, so
     * broadcast views can make them too big; their strides and loops are
     * then never formed. The scores only materialise with a mask (its
     * broadcast view) or a mask gradient. */
    const int64_t oshape[4] = {qs[0], qs[1], qs[2], vs[3]};
    const int64_t full[4] = {qs[0], qs[1], qs[2], ks[2]};
    for (int i = 0; i < (mask ? 2 : 1); i++) {
        const int64_t *sh = i == 0 ? oshape : full;
        if (fc__shape_numel(sh, 4, NULL) != FC_OK) {
            char ss[96];
            FC__SHAPE_STR(sh, 4, ss);
            return fc__fail(ctx, FC_ERR_OVERFLOW,
                            "attention: the %s %s of q %s, k %s and v %s has more elements than "
                            "a tensor can hold",
                            i == 0 ? "output [B, Hq, T, Dv]" : "scores [B, Hq, T, S]", ss, dq, dk,
                            dv);
        }
    }
    if (!mask) return FC_OK;
    fc__desc(mask, dm, (int)sizeof dm);
    int mr = mask->raw.rank;
    bool ok = mr >= 1 && mr <= 4;
    for (int i = 0; ok && i < mr; i++) {
        int64_t m = mask->raw.shape[i], f = full[4 - mr + i];
        ok = m == f || m == 1;
    }
    if (!ok) {
        char fs[96];
        FC__SHAPE_STR(full, 4, fs);
        return fc__fail(ctx, mr >= 1 && mr <= 4 ? FC_ERR_SHAPE_MISMATCH : FC_ERR_RANK,
                        "attention: mask %s does not broadcast to the scores' [B, Hq, T, S] %s", dm,
                        fs);
    }
    return FC_OK;
}

/* ---- the rule ----------------------------------------------------------------------------- */

/* ---- create_graph: the backward as recorded ops --------------------------------------------
 * With G = Hq / Hkv the G query heads sharing kv head j are stacked as
 * G * T rows of one product with that head's keys (query head h reads kv
 * head h / G): qg [B, Hkv, G * T, D] (a reshape of q), and the same for
 * everything of query shape. Then, with P the probabilities,
 *   S = scale qg k^T (+ causal, + mask),  P = softmax(S),
 *   dP = dOg v^T,  dS = P (dP - rowsum(dP P)),
 *   dq = scale dSg k,  dk = scale dSg^T qg,  dv = Pg^T dOg,  dmask = dS,
 * where the products over the stacked rows sum over the group. */

/* The causal rule as a constant of dtype dt: the additive [T, S] mask, 0
 * where query i sees key j <= i + (S - T), -inf past it. */
static fc_tensor *causal_const(fc_ctx *ctx, fc_dtype dt, int64_t T, int64_t S) {
    fc_tensor *a = fc__tensor_new(ctx, "attention_backward", FC_F64, (const int64_t[]){T, S}, 2);
    double *m = NULL;
    if (!a || fc__raw_data_mut(&a->raw, (void **)&m) != FC_OK) return NULL;
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < S; j++)
            m[i * S + j] = j <= i + (S - T) ? 0.0 : -INFINITY;
    return dt == FC_F64 ? a : fc_to(ctx, a, dt);
}

/* x [B, Hq, T, C] <-> [B, Hkv, G * T, C]: recorded reshapes. */
static fc_tensor *stack_groups(fc_ctx *ctx, fc_tensor *x, int64_t Hkv) {
    if (!x) return NULL; /* an earlier step failed: its error is recorded */
    const int64_t *s = fc_tensor_shape(x);
    return fc_reshape(ctx, x, (const int64_t[]){s[0], Hkv, s[1] / Hkv * s[2], s[3]}, 4);
}
static fc_tensor *unstack_groups(fc_ctx *ctx, fc_tensor *x, int64_t Hq, int64_t T) {
    if (!x) return NULL;
    const int64_t *s = fc_tensor_shape(x);
    return fc_reshape(ctx, x, (const int64_t[]){s[0], Hq, T, s[3]}, 4);
}

static fc_status attention_graph(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_dtype ct = gout->raw.dtype;
    bool has_mask = node->n_in > ATT_IN_MASK;
    const int ids[4] = {ATT_SAVED_Q, ATT_SAVED_K, ATT_SAVED_V, ATT_SAVED_MASK};
    fc_tensor *in[4] = {NULL};
    for (int i = 0; i < (has_mask ? 4 : 3); i++) {
        fc_tensor *t = fc__ag_saved_tensor(ctx, node, ids[i]);
        if (t && t->raw.dtype != ct) t = fc_to(ctx, t, ct);
        if (!(in[i] = t)) return fc__failed(ctx);
    }
    fc_tensor *q = in[0], *k = in[1], *v = in[2];
    const int64_t *qs = fc_tensor_shape(q), *ks = fc_tensor_shape(k);
    int64_t B = qs[0], Hq = qs[1], T = qs[2], Hkv = ks[1], S = ks[2];
    double scale = node->f[ATT_F_SCALE];
    fc_tensor *qg = stack_groups(ctx, q, Hkv), *kt = fc_transpose(ctx, k, 2, 3);
    fc_tensor *sc = fc_mul_scalar(ctx, fc_matmul(ctx, qg, kt), scale);
    sc = fc_reshape(ctx, sc, (const int64_t[]){B, Hq, T, S}, 4);
    if (node->i[ATT_I_CAUSAL]) sc = fc_add(ctx, sc, causal_const(ctx, ct, T, S));
    if (has_mask) sc = fc_add(ctx, sc, in[3]);
    /* A query that sees no key (causal with T > S, or a mask hiding its
     * whole row) has softmax NaN; the kernel's contract is a zero row and
     * zero gradients: such rows (a constant, from the detached scores) get
     * finite scores and zero probabilities. */
    fc_tensor *hidden = NULL;
    if ((node->i[ATT_I_CAUSAL] && T > S) || has_mask) {
        const int lastax[1] = {-1};
        fc_tensor *rm = fc_max(ctx, fc_detach(ctx, sc), lastax, 1, true);
        hidden = fc_logical_not(ctx, fc_gt_scalar(ctx, rm, -INFINITY));
        sc = fc_masked_fill(ctx, sc, hidden, 0.0);
    }
    fc_tensor *p = fc_softmax(ctx, sc, -1);
    if (hidden) p = fc_masked_fill(ctx, p, hidden, 0.0);
    fc_tensor *pg = stack_groups(ctx, p, Hkv), *dog = stack_groups(ctx, gout, Hkv);
    const int last[1] = {-1};
    fc_tensor *dp = unstack_groups(ctx, fc_matmul(ctx, dog, fc_transpose(ctx, v, 2, 3)), Hq, T);
    fc_tensor *ds = fc_mul(ctx, p, fc_sub(ctx, dp, fc_sum(ctx, fc_mul(ctx, dp, p), last, 1, true)));
    fc_tensor *dsg = stack_groups(ctx, ds, Hkv);
    if (node->in[ATT_IN_Q].needs)
        gin[ATT_IN_Q] =
            unstack_groups(ctx, fc_mul_scalar(ctx, fc_matmul(ctx, dsg, k), scale), Hq, T);
    if (node->in[ATT_IN_K].needs)
        gin[ATT_IN_K] = fc_mul_scalar(ctx, fc_matmul(ctx, fc_transpose(ctx, dsg, 2, 3), qg), scale);
    if (node->in[ATT_IN_V].needs) gin[ATT_IN_V] = fc_matmul(ctx, fc_transpose(ctx, pg, 2, 3), dog);
    if (has_mask && node->in[ATT_IN_MASK].needs) gin[ATT_IN_MASK] = ds;
    return fc_ctx_status(ctx);
}

static fc_status attention_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (fc__ag_create_graph(ctx)) return attention_graph(ctx, node, gout, gin);
    fc_dtype ct = gout->raw.dtype;
    bool has_mask = node->n_in > ATT_IN_MASK;
    fc_tensor *s[6] = {NULL};
    for (int i = 0; i < (has_mask ? 6 : 5); i++) {
        fc_tensor *t = fc__ag_saved_tensor(ctx, node, i);
        if (!t ||
            !(s[i] = i == ATT_SAVED_LSE ? t : fc__copy_cast(ctx, "attention_backward", t, ct)))
            return fc__failed(ctx);
    }
    fc_raw mb;
    const fc_tensor *q = s[ATT_SAVED_Q], *k = s[ATT_SAVED_K], *v = s[ATT_SAVED_V];
    const int64_t *qs = q->raw.shape, *ks = k->raw.shape;
    const int64_t full[4] = {qs[0], qs[1], qs[2], ks[2]};
    if (has_mask) {
        fc_status st = fc__raw_broadcast_to(&s[ATT_SAVED_MASK]->raw, full, 4, &mb);
        if (st != FC_OK) return fc__fail(ctx, st, "attention_backward: mask broadcast failed");
    }
    fc__attn_in in = {&q->raw,
                      &k->raw,
                      &v->raw,
                      has_mask ? &mb : NULL,
                      node->i[ATT_I_CAUSAL] != 0,
                      node->f[ATT_F_SCALE]};
    bool want_q = node->in[ATT_IN_Q].needs,
         want_kv = node->in[ATT_IN_K].needs || node->in[ATT_IN_V].needs;
    bool want_m = has_mask && node->in[ATT_IN_MASK].needs;
    const char *op = "attention_backward";
    fc_tensor *dq = NULL, *dk = NULL, *dv = NULL, *dm = NULL;
    fc_status st = FC_OK;
    if ((want_q || want_m) && !(dq = fc__tensor_new(ctx, op, ct, qs, 4))) st = fc__failed(ctx);
    if (st == FC_OK && want_kv &&
        (!(dk = fc__tensor_new(ctx, op, ct, ks, 4)) ||
         !(dv = fc__tensor_new(ctx, op, ct, v->raw.shape, 4))))
        st = fc__failed(ctx);
    if (st == FC_OK && want_m && !(dm = fc__tensor_new(ctx, op, ct, full, 4))) st = fc__failed(ctx);
    if (st == FC_OK)
        st = fc__attention_backward(ctx, op, &in, &s[ATT_SAVED_OUT]->raw, &s[ATT_SAVED_LSE]->raw,
                                    &gout->raw, dq ? &dq->raw : NULL, dk ? &dk->raw : NULL,
                                    dv ? &dv->raw : NULL, dm ? &dm->raw : NULL);
    if (has_mask) fc__raw_release(&mb);
    if (st != FC_OK) return st;
    if (want_q) gin[ATT_IN_Q] = dq;
    if (node->in[ATT_IN_K].needs) gin[ATT_IN_K] = dk;
    if (node->in[ATT_IN_V].needs) gin[ATT_IN_V] = dv;
    if (want_m) gin[ATT_IN_MASK] = dm;
    return FC_OK;
}

/* ---- the op ------------------------------------------------------------------------------- */

/* Records the node for y: inputs q, k, v (, mask); saves q, k, v, y, lse
 * (, mask). */
static fc_status record(fc_ctx *ctx, fc_tensor *y, fc_tensor *const *in, int n, fc_tensor *lse,
                        bool causal, double scale) {
    fc_node *nd = fc__ag_record(ctx, "attention", attention_backward, y, n, in);
    if (!nd) return fc__failed(ctx);
    nd->i[ATT_I_CAUSAL] = causal;
    nd->f[ATT_F_SCALE] = scale;
    const char *roles[6] = {"q", "k", "v", "output", "logsumexp", "mask"};
    const fc_tensor *vals[6] = {in[0], in[1], in[2], y, lse, n > 3 ? in[3] : NULL};
    for (int i = 0; i < (n > 3 ? 6 : 5); i++) {
        fc_status st = fc__ag_save(ctx, nd, roles[i], vals[i]);
        if (st != FC_OK) return st;
    }
    return FC_OK;
}

fc_tensor *fc_attention(fc_ctx *ctx, fc_tensor *q, fc_tensor *k, fc_tensor *v, fc_tensor *mask,
                        const fc_attention_opts *opts) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "attention", q);
    FC__CHECK_INPUT(ctx, "attention", k);
    FC__CHECK_INPUT(ctx, "attention", v);
    if (FC__CHECK_SAME_CTX(ctx, "attention", mask, "mask") != FC_OK) return NULL;
    if (check_inputs(ctx, q, k, v, mask) != FC_OK) return NULL;
    fc_attention_opts o = opts ? *opts : (fc_attention_opts){0};
    if (!(o.scale >= 0) || !isfinite(o.scale)) {
        fc__fail(ctx, FC_ERR_INVALID_ARG,
                 "attention: scale %g must be finite and >= 0 (0 means 1/sqrt(D))", o.scale);
        return NULL;
    }
    const int64_t *qs = q->raw.shape;
    int64_t B = qs[0], Hq = qs[1], T = qs[2], S = k->raw.shape[2], Dv = v->raw.shape[3];
    double scale = o.scale == 0 ? 1.0 / sqrt((double)qs[3]) : o.scale;
    fc_dtype dt = q->raw.dtype, ct = dt == FC_F64 ? FC_F64 : FC_F32;
    const char *op = "attention";

    fc_tensor *qc = NULL, *kc = NULL, *vc = NULL, *mc = NULL, *phys = NULL, *lse = NULL;
    fc_tensor *y = NULL;
    fc_raw mb, yv;
    bool mb_ok = false;
    if (!(qc = in_compute(ctx, q, ct)) || !(kc = in_compute(ctx, k, ct)) ||
        !(vc = in_compute(ctx, v, ct)) || (mask && !(mc = in_compute(ctx, mask, ct))))
        goto done;
    const int64_t full[4] = {B, Hq, T, S};
    if (mc) {
        fc_status st = fc__raw_broadcast_to(&mc->raw, full, 4, &mb);
        if (st != FC_OK) {
            fc__fail(ctx, st, "attention: mask broadcast failed");
            goto done;
        }
        mb_ok = true;
    }
    /* the output in its storage order [B, T, Hq, Dv], seen as [B, Hq, T, Dv] */
    const int64_t pshape[4] = {B, T, Hq, Dv}, vshape[4] = {B, Hq, T, Dv};
    const int64_t vstrides[4] = {T * Hq * Dv, Dv, Hq * Dv, 1};
    const int64_t lshape[3] = {B, Hq, T};
    if (!(phys = fc__tensor_new(ctx, op, ct, pshape, 4)) ||
        !(lse = fc__tensor_new(ctx, op, ct, lshape, 3)))
        goto done;
    yv = phys->raw;
    memcpy(yv.shape, vshape, sizeof vshape);
    memcpy(yv.strides, vstrides, sizeof vstrides);
    fc__attn_in in = {&qc->raw, &kc->raw, &vc->raw, mb_ok ? &mb : NULL, o.causal, scale};
    if (fc__attention_forward(ctx, op, &in, &yv, &lse->raw) != FC_OK) goto done;
    if (dt != ct) {
        fc_tensor *c = fc__copy_cast(ctx, op, phys, dt);
        fc_release(phys);
        if (!(phys = c)) goto done;
    }
    if (!(y = fc__tensor_view(ctx, op, phys, vshape, vstrides, 4, phys->raw.offset))) goto done;
    fc_tensor *ins[4] = {q, k, v, mask};
    int n = mask ? 4 : 3;
    if (fc__ag_wants(ctx, n, ins) && record(ctx, y, ins, n, lse, o.causal, scale) != FC_OK) {
        fc_release(y);
        y = NULL;
        goto done;
    }
    y = fc__finish(ctx, op, y);
done:
    if (mb_ok) fc__raw_release(&mb);
    fc_release(lse);
    fc_release(phys);
    fc_release(mc);
    fc_release(vc);
    fc_release(kc);
    fc_release(qc);
    return y;
}
