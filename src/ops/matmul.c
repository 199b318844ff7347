/* SPDX-License-Identifier: MIT */
/* ops/matmul.c - fc_matmul, fc_linear (dense and block-quantized weights)
 * and fc_ctx_set_backend: dtype and shape checks, the autograd records,
 * and each backward rule under its forward. The products are in
 * exec/kernels/matmul.c (dense, through the providers) and qlinear.c
 * (quantized weights decoded inside the GEMM).
 *
 *   C = A . B          dA = dC . B^T        dB = A^T . dC
 *   y = x . W^T + b    dx = dy . W          dW = dy^T . x     db = sum of dy rows
 *
 * Every product in a rule is an fc_matmul of views: transposes are stride
 * swaps that reach the provider as transpose flags, so the rules copy
 * nothing but a non-contiguous x before flattening. Vector operands are
 * lifted to matrices ([k] -> [1, k] on the left, [k, 1] on the right) so
 * one formula covers every NumPy case; batch axes that an operand
 * broadcast come back summed by the engine (a rule may return a gradient
 * of the broadcast shape). The weight gradient of a batched input folds
 * the batch into the reduction ([N, out]^T . [N, in]) instead of summing N
 * small products.
 *
 * Quantized weights never require grad: a quantized linear gives x (and
 * an f32 bias) their gradients so an adapter can be trained on top of a
 * frozen quantized base. dx = dy . W needs sums across weight rows, which
 * the row-decoding kernel cannot do, so that rule dequantizes W one panel
 * of rows at a time (qlinear_dx), never all of it.
 *
 * Rules run inside the backward scope: every tensor made there is released
 * with it, so the rules release nothing (and their helpers never add
 * references). */
#include "exec/kernels/matmul.h"
#include "ag/tape.h"
#include "exec/profile.h"
#include "backend/backend.h"
#include "fucina.h"

/* The profiler's FLOP count of a product (fucina/profile.h): a multiply
 * and an add per output element and contracted index. */
static void note_flops(fc_ctx *ctx, const fc_tensor *out, const fc_tensor *a) {
    if (ctx->profiling && out)
        fc__profile_flops(ctx, 2 * fc__numel(&out->raw) * a->raw.shape[a->raw.rank - 1]);
}

/* ---- the nodes --------------------------------------------------------------------------------
 */

/* matmul: inputs {a, b}; b is saved as the dense f32 copy the product used
 * when it was block-quantized. */
enum matmul_input {
    MATMUL_IN_A,
    MATMUL_IN_B,
};
enum matmul_saved_slot {
    MATMUL_SAVED_A,
    MATMUL_SAVED_B,
};
/* linear (dense weight): inputs {x, weight, bias (may be NULL)}. */
enum linear_input {
    LINEAR_IN_X,
    LINEAR_IN_WEIGHT,
    LINEAR_IN_BIAS,
};
enum linear_saved_slot {
    LINEAR_SAVED_X,
    LINEAR_SAVED_WEIGHT,
};
/* linear (quantized weight): the linear inputs; saves only the weight. */
enum qlinear_saved_slot {
    QLINEAR_SAVED_WEIGHT,
};

/* ---- checks --------------------------------------------------------------------------------- */

static bool is_float(fc_dtype dt) {
    return dt == FC_F16 || dt == FC_BF16 || dt == FC_F32 || dt == FC_F64;
}

/* FC_ERR_DTYPE unless a and b share a float dtype; names both. */
static bool check_dtypes(fc_ctx *ctx, const char *op, const char *what_a, const fc_tensor *a,
                         const char *what_b, const fc_tensor *b) {
    fc_dtype da = a->raw.dtype, db = b->raw.dtype;
    if (!is_float(da)) {
        fc__fail(ctx, FC_ERR_DTYPE, "%s: %s has dtype %s; matmul takes f16, bf16, f32, f64", op,
                 what_a, fc_dtype_name(da));
        return false;
    }
    if (da != db) {
        fc__fail(ctx, FC_ERR_DTYPE, "%s: dtypes %s (%s) and %s (%s) differ; cast one with fc_to",
                 op, fc_dtype_name(da), what_a, fc_dtype_name(db), what_b);
        return false;
    }
    return true;
}

/* A block-quantized right operand next to an f32 left one is dequantized to
 * f32 once and the dense product runs (quantized weights never require
 * grad; the left operand's gradient uses the dequantized copy). Returns b
 * itself otherwise, or NULL with the error recorded. */
static fc_tensor *dense_rhs(fc_ctx *ctx, const char *op, fc_tensor *left, fc_tensor *b) {
    if (!fc_dtype_is_block(b->raw.dtype) || left->raw.dtype != FC_F32) return b;
    if (!fc_dtype_supports_quantized_matmul_rhs(b->raw.dtype)) {
        fc__fail(ctx, FC_ERR_DTYPE, "%s: %s is not a weight format (it quantizes activations)", op,
                 fc_dtype_name(b->raw.dtype));
        return NULL;
    }
    return fc_to(ctx, b, FC_F32);
}

/* ---- views for the rules (scope-owned, NULL propagates) ---------------------------------------
 */

/* t in dtype dt: t itself, or a scope-owned converted copy. */
static fc_tensor *as_dtype(fc_ctx *ctx, fc_tensor *t, fc_dtype dt) {
    if (!t || t->raw.dtype == dt) return t;
    return fc_to(ctx, t, dt);
}

/* t itself when contiguous, else a scope-owned contiguous copy. */
static fc_tensor *contig(fc_ctx *ctx, fc_tensor *t) {
    if (!t || fc__raw_is_contiguous(&t->raw)) return t;
    return fc_contiguous(ctx, t);
}

static fc_tensor *view(fc_ctx *ctx, fc_tensor *t, const int64_t *shape, const int64_t *strides,
                       int rank) {
    if (!t) return NULL;
    return fc__tensor_view(ctx, "backward of matmul", t, shape, strides, rank, t->raw.offset);
}

/* A contiguous tensor seen with another shape of the same size. */
static fc_tensor *reshape(fc_ctx *ctx, fc_tensor *t, const int64_t *shape, int rank) {
    /* a create_graph walk needs the recorded views (these carry no node) */
    if (fc__ag_create_graph(ctx)) return t ? fc_reshape(ctx, t, shape, rank) : NULL;
    int64_t strides[FC_MAX_RANK];
    fc__shape_contiguous_strides(shape, rank, strides);
    return view(ctx, t, shape, strides, rank);
}

/* The last two axes swapped (rank >= 2). */
static fc_tensor *swap_last2(fc_ctx *ctx, fc_tensor *t) {
    if (!t) return NULL;
    if (fc__ag_create_graph(ctx)) return fc_transpose(ctx, t, -2, -1);
    int r = t->raw.rank;
    int64_t shape[FC_MAX_RANK], strides[FC_MAX_RANK];
    for (int i = 0; i < r; i++)
        shape[i] = t->raw.shape[i], strides[i] = t->raw.strides[i];
    shape[r - 2] = t->raw.shape[r - 1], shape[r - 1] = t->raw.shape[r - 2];
    strides[r - 2] = t->raw.strides[r - 1], strides[r - 1] = t->raw.strides[r - 2];
    return view(ctx, t, shape, strides, r);
}

/* A vector [k] as a row [1, k] (left operand) or a column [k, 1] (right). */
static fc_tensor *as_matrix(fc_ctx *ctx, fc_tensor *t, bool left) {
    if (!t || t->raw.rank > 1) return t;
    if (fc__ag_create_graph(ctx)) return fc_unsqueeze(ctx, t, left ? 0 : 1);
    int64_t k = t->raw.shape[0], s = t->raw.strides[0];
    int64_t shape[2] = {left ? 1 : k, left ? k : 1};
    int64_t strides[2] = {left ? s * k : s, left ? s : 1};
    return view(ctx, t, shape, strides, 2);
}

/* ---- fc_matmul ------------------------------------------------------------------------------ */

static fc_status matmul_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

fc_tensor *fc_matmul(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "matmul", a);
    FC__CHECK_INPUT(ctx, "matmul", b);
    fc_tensor *bd = dense_rhs(ctx, "matmul", a, b);
    if (!bd) return NULL;
    fc_tensor *out = NULL;
    if (check_dtypes(ctx, "matmul", "a", a, "b", bd)) out = fc__matmul(ctx, "matmul", a, bd, NULL);
    fc_tensor *ins[2] = {[MATMUL_IN_A] = a, [MATMUL_IN_B] = b};
    if (out && fc__ag_wants(ctx, 2, ins)) {
        fc_node *nd = fc__ag_record(ctx, "matmul", matmul_backward, out, 2, ins);
        /* in the order of enum matmul_saved_slot */
        if (!nd || fc__ag_save(ctx, nd, "a", a) != FC_OK ||
            fc__ag_save(ctx, nd, "b", bd) != FC_OK) {
            fc_release(out);
            out = NULL;
        }
    }
    if (bd != b) fc_release(bd);
    note_flops(ctx, out, a);
    return out ? fc__finish(ctx, "matmul", out) : NULL;
}

static fc_status matmul_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_dtype gdt = gout->raw.dtype;
    fc_tensor *a = as_dtype(ctx, fc__ag_saved_tensor(ctx, node, MATMUL_SAVED_A), gdt);
    fc_tensor *b = as_dtype(ctx, fc__ag_saved_tensor(ctx, node, MATMUL_SAVED_B), gdt);
    if (!a || !b) return fc_ctx_status(ctx);
    bool b_vec = b->raw.rank == 1;
    fc_tensor *am = as_matrix(ctx, a, true), *bm = as_matrix(ctx, b, false);
    if (!am || !bm) return fc_ctx_status(ctx);
    int64_t m = am->raw.shape[am->raw.rank - 2], n = bm->raw.shape[bm->raw.rank - 1];
    int64_t k = am->raw.shape[am->raw.rank - 1];

    /* dC with the vector axes restored: [batch..., m, n] */
    int nb_a = am->raw.rank - 2, nb_b = bm->raw.rank - 2;
    int nb = nb_a > nb_b ? nb_a : nb_b;
    int64_t gshape[FC_MAX_RANK];
    for (int i = 0; i < nb; i++)
        gshape[i] = gout->raw.shape[i];
    gshape[nb] = m, gshape[nb + 1] = n;
    fc_tensor *g = reshape(ctx, gout, gshape, nb + 2);
    if (!g) return fc_ctx_status(ctx);

    if (node->in[MATMUL_IN_A].needs) {
        /* [batch, m, k]; a vector a's [.., 1, k] reduces to [k] in the engine */
        gin[MATMUL_IN_A] = fc_matmul(ctx, g, swap_last2(ctx, bm));
        if (!gin[MATMUL_IN_A]) return fc_ctx_status(ctx);
    }
    if (node->in[MATMUL_IN_B].needs) {
        fc_tensor *db;
        if (nb_b == 0 && nb_a > 0 && fc__raw_is_contiguous(&am->raw)) {
            /* shared 2-D b: fold the batch into the reduction */
            int64_t rows = fc__raw_numel(&am->raw) / k;
            fc_tensor *a2 = reshape(ctx, am, (int64_t[]){rows, k}, 2);
            fc_tensor *g2 = reshape(ctx, g, (int64_t[]){rows, n}, 2);
            db = a2 && g2 ? fc_matmul(ctx, swap_last2(ctx, a2), g2) : NULL;
        } else {
            db = fc_matmul(ctx, swap_last2(ctx, am), g);
        }
        if (db && b_vec) { /* [.., k, 1] -> [.., k] */
            db = reshape(ctx, db, db->raw.shape, db->raw.rank - 1);
        }
        if (!db) return fc_ctx_status(ctx);
        gin[MATMUL_IN_B] = db;
    }
    return FC_OK;
}

/* ---- fc_linear, quantized weight --------------------------------------------------------------
 */

static fc_status qlinear_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

/* fc_linear for a block-quantized w: checks, the kernel, the record. */
static fc_tensor *linear_quantized(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *bias) {
    char xs[160], ws[160], bs[160];
    const char *op = "linear";
    if (x->raw.dtype != FC_F32) {
        fc__fail(ctx, FC_ERR_DTYPE, "%s: quantized weight %s needs f32 x, got %s", op,
                 fc__desc(w, ws, 160), fc__desc(x, xs, 160));
        return NULL;
    }
    if (!fc_dtype_supports_quantized_matmul_rhs(w->raw.dtype)) {
        fc__fail(ctx, FC_ERR_DTYPE, "%s: %s is not a weight format (it quantizes activations)", op,
                 fc_dtype_name(w->raw.dtype));
        return NULL;
    }
    if (w->raw.rank != 2) {
        fc__fail(ctx, FC_ERR_RANK, "%s: weight %s must be 2-D [out, in]", op, fc__desc(w, ws, 160));
        return NULL;
    }
    int64_t n = w->raw.shape[0], k = w->raw.shape[1];
    if (x->raw.shape[x->raw.rank - 1] != k) {
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                 "%s: x %s and weight %s do not match (%lld input features vs %lld)", op,
                 fc__desc(x, xs, 160), fc__desc(w, ws, 160),
                 (long long)x->raw.shape[x->raw.rank - 1], (long long)k);
        return NULL;
    }
    if (bias && (bias->raw.dtype != FC_F32 || bias->raw.rank != 1 || bias->raw.shape[0] != n)) {
        fc__fail(ctx, bias->raw.dtype != FC_F32 ? FC_ERR_DTYPE : FC_ERR_SHAPE_MISMATCH,
                 "%s: bias %s must be f32[%lld] for weight %s", op, fc__desc(bias, bs, 160),
                 (long long)n, fc__desc(w, ws, 160));
        return NULL;
    }
    if (!fc__raw_is_contiguous(&w->raw)) {
        fc__fail(ctx, FC_ERR_UNSUPPORTED_VIEW, "%s: quantized weight %s must be contiguous", op,
                 fc__desc(w, ws, 160));
        return NULL;
    }
    fc_tensor *out = fc__qlinear(ctx, op, x, w, bias);
    if (!out) return NULL;
    fc_tensor *ins[3] = {x, w, bias};
    if (fc__ag_wants(ctx, 3, ins)) {
        fc_node *nd =
            fc__ag_record(ctx, "linear (quantized weight)", qlinear_backward, out, 3, ins);
        if (!nd || fc__ag_save(ctx, nd, "weight", w) != FC_OK) {
            fc_release(out);
            return NULL;
        }
    }
    note_flops(ctx, out, x);
    return fc__finish(ctx, op, out);
}

/* Bytes of f32 weight one panel of dx = dy . W dequantizes at most. */
#define QLINEAR_PANEL_BYTES ((int64_t)1 << 20)

/* dx = dy . W for a quantized w [out, in], gout [..., out]: a panel of
 * weight rows at a time, dx = sum over panels of dy[..., r0:r1] . f32(W[r0:r1]),
 * so the transient f32 copy is one panel (QLINEAR_PANEL_BYTES, or one row
 * when a row is larger), never the whole weight: what a QLoRA step over a
 * large quantized base relies on. A panel is a borrowed read-only tensor
 * over the panel's whole rows of blocks (block tensors have no row views).
 * The temporaries are released as the loop goes (this rule's one
 * exception to "rules release nothing"), so at most one panel lives. */
static fc_tensor *qlinear_dx(fc_ctx *ctx, fc_tensor *gout, fc_tensor *w) {
    int64_t n = w->raw.shape[0], k = w->raw.shape[1];
    int64_t rows = QLINEAR_PANEL_BYTES / (k * (int64_t)sizeof(float));
    if (rows < 1) rows = 1;
    if (rows >= n) {
        fc_tensor *wd = fc_to(ctx, w, FC_F32);       /* [out, in] */
        return wd ? fc_matmul(ctx, gout, wd) : NULL; /* [..., out] . [out, in] */
    }
    const uint8_t *base = fc_tensor_data(w); /* contiguous: checked in forward */
    if (!base) return NULL;
    size_t row_bytes = fc_tensor_nbytes(w) / (size_t)n;
    fc_tensor *acc = NULL;
    for (int64_t r0 = 0; r0 < n; r0 += rows) {
        int64_t len = n - r0 < rows ? n - r0 : rows;
        fc_tensor *wp = fc_tensor_from_borrowed(ctx, w->raw.dtype, (int64_t[]){len, k}, 2,
                                                (void *)(base + (size_t)r0 * row_bytes), true);
        fc_tensor *wd = wp ? fc_to(ctx, wp, FC_F32) : NULL;
        fc_tensor *gp = fc_narrow(ctx, gout, gout->raw.rank - 1, r0, len);
        fc_tensor *part = wd && gp ? fc_matmul(ctx, gp, wd) : NULL;
        fc_release(gp);
        fc_release(wd);
        fc_release(wp);
        fc_tensor *sum = part && acc ? fc_add(ctx, acc, part) : part;
        if (sum != part) fc_release(part);
        fc_release(acc);
        acc = sum;
        if (!acc) return NULL;
    }
    return acc;
}

static fc_status qlinear_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    if (node->in[LINEAR_IN_X].needs) {
        fc_tensor *w = fc__ag_saved_tensor(ctx, node, QLINEAR_SAVED_WEIGHT);
        gin[LINEAR_IN_X] = w ? qlinear_dx(ctx, gout, w) : NULL;
        if (!gin[LINEAR_IN_X]) return fc_ctx_status(ctx);
    }
    if (node->n_in > LINEAR_IN_BIAS && node->in[LINEAR_IN_BIAS].needs)
        gin[LINEAR_IN_BIAS] = gout; /* the engine sums leading axes */
    return FC_OK;
}

/* ---- fc_linear, dense weight ------------------------------------------------------------------
 */

/* The checks of x . w^T + bias for a dense w. */
static bool linear_dense_check(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *bias) {
    char xs[160], ws[160], bs[160];
    if (!check_dtypes(ctx, "linear", "x", x, "weight", w)) return false;
    if (bias && bias->raw.dtype != x->raw.dtype) {
        fc__fail(ctx, FC_ERR_DTYPE,
                 "linear: dtypes %s (x) and %s (bias) differ; cast one with fc_to",
                 fc_dtype_name(x->raw.dtype), fc_dtype_name(bias->raw.dtype));
        return false;
    }
    const fc_raw *wr = &w->raw, *xr = &x->raw;
    if (wr->rank != 2) {
        fc__fail(ctx, FC_ERR_RANK, "linear: weight %s must be 2-D [out, in]", fc__desc(w, ws, 160));
        return false;
    }
    if (xr->shape[xr->rank - 1] != wr->shape[1]) {
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                 "linear: x %s and weight %s do not match (%lld input features vs %lld)",
                 fc__desc(x, xs, 160), fc__desc(w, ws, 160), (long long)xr->shape[xr->rank - 1],
                 (long long)wr->shape[1]);
        return false;
    }
    if (bias && (bias->raw.rank != 1 || bias->raw.shape[0] != wr->shape[0])) {
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH, "linear: bias %s must be [%lld] for weight %s",
                 fc__desc(bias, bs, 160), (long long)wr->shape[0], fc__desc(w, ws, 160));
        return false;
    }
    return true;
}

static fc_status linear_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin);

fc_tensor *fc_linear(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *bias) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "linear", x);
    FC__CHECK_INPUT(ctx, "linear", w);
    if (FC__CHECK_SAME_CTX(ctx, "linear", bias, "bias") != FC_OK) return NULL;
    if (fc_dtype_is_block(w->raw.dtype)) return linear_quantized(ctx, x, w, bias);
    fc_tensor *wd = dense_rhs(ctx, "linear", x, w);
    if (!wd) return NULL;
    fc_tensor *out =
        linear_dense_check(ctx, x, wd, bias) ? fc__linear(ctx, "linear", x, wd, bias) : NULL;
    fc_tensor *ins[3] = {[LINEAR_IN_X] = x, [LINEAR_IN_WEIGHT] = w, [LINEAR_IN_BIAS] = bias};
    if (out && fc__ag_wants(ctx, 3, ins)) {
        fc_node *nd = fc__ag_record(ctx, "linear", linear_backward, out, 3, ins);
        /* in the order of enum linear_saved_slot */
        if (!nd || fc__ag_save(ctx, nd, "x", x) != FC_OK ||
            fc__ag_save(ctx, nd, "weight", wd) != FC_OK) {
            fc_release(out);
            out = NULL;
        }
    }
    if (wd != w) fc_release(wd);
    note_flops(ctx, out, x);
    return out ? fc__finish(ctx, "linear", out) : NULL;
}

static fc_status linear_backward(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_dtype gdt = gout->raw.dtype;
    fc_tensor *x = as_dtype(ctx, fc__ag_saved_tensor(ctx, node, LINEAR_SAVED_X), gdt);
    fc_tensor *w = as_dtype(ctx, fc__ag_saved_tensor(ctx, node, LINEAR_SAVED_WEIGHT), gdt);
    if (!x || !w) return fc_ctx_status(ctx);
    int64_t out = w->raw.shape[0], in = w->raw.shape[1];
    if (node->in[LINEAR_IN_X].needs) {
        gin[LINEAR_IN_X] = fc_matmul(ctx, gout, w); /* [..., out] . [out, in] */
        if (!gin[LINEAR_IN_X]) return fc_ctx_status(ctx);
    }
    if (node->in[LINEAR_IN_WEIGHT].needs) {
        /* dW = dy^T . x over every row of the batch: [N, out]^T . [N, in] */
        fc_tensor *xc = contig(ctx, x);
        int64_t rows = xc ? fc__raw_numel(&xc->raw) / in : 0;
        fc_tensor *x2 = reshape(ctx, xc, (int64_t[]){rows, in}, 2);
        fc_tensor *g2 = reshape(ctx, gout, (int64_t[]){rows, out}, 2);
        gin[LINEAR_IN_WEIGHT] = x2 && g2 ? fc_matmul(ctx, swap_last2(ctx, g2), x2) : NULL;
        if (!gin[LINEAR_IN_WEIGHT]) return fc_ctx_status(ctx);
    }
    if (node->n_in > LINEAR_IN_BIAS && node->in[LINEAR_IN_BIAS].needs)
        gin[LINEAR_IN_BIAS] = gout; /* the engine sums the rows */
    return FC_OK;
}

/* ---- fc_ctx_set_backend -----------------------------------------------------------------------
 */

fc_status fc_ctx_set_backend(fc_ctx *ctx, fc_backend backend) {
    if (!ctx) return FC_ERR_NULL_ARG;
    char err[256];
    fc_status st = fc__backend_check_built(backend, err, sizeof err);
    if (st != FC_OK) return fc__fail(ctx, st, "fc_ctx_set_backend: %s", err);
    ctx->backend = backend;
    return FC_OK;
}
