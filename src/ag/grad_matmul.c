/* grad_matmul.c - backward rules of the matmul family, in the order of
 * src/exec/kernels/matmul.c.
 *
 *   C = A . B          dA = dC . B^T        dB = A^T . dC
 *   y = x . W^T + b    dx = dy . W          dW = dy^T . x     db = sum of dy rows
 *
 * Every product here is an fc_matmul of views: transposes are stride swaps
 * that reach the provider as transpose flags, so the rules copy nothing but
 * a non-contiguous x before flattening. Vector operands are lifted to
 * matrices ([k] -> [1, k] on the left, [k, 1] on the right) so one formula
 * covers every NumPy case; batch axes that an operand broadcast come back
 * summed by the engine (a rule may return a gradient of the broadcast
 * shape). The weight gradient of a batched input folds the batch into the
 * reduction ([N, out]^T . [N, in]) instead of summing N small products.
 *
 * Rules run inside the backward scope: every tensor made here is released
 * there, so nothing is released here (and helpers never add references). */
#include "ag/grad_matmul.h"

#include "fucina/matmul.h"

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
    int64_t strides[FC_MAX_RANK];
    fc__shape_contiguous_strides(shape, rank, strides);
    return view(ctx, t, shape, strides, rank);
}

/* The last two axes swapped (rank >= 2). */
static fc_tensor *swap_last2(fc_ctx *ctx, fc_tensor *t) {
    if (!t) return NULL;
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
    int64_t k = t->raw.shape[0], s = t->raw.strides[0];
    int64_t shape[2] = {left ? 1 : k, left ? k : 1};
    int64_t strides[2] = {left ? s * k : s, left ? s : 1};
    return view(ctx, t, shape, strides, 2);
}

/* ---- fc_matmul ---------------------------------------------------------------------------------
 */

fc_status fc__grad_matmul(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_dtype gdt = gout->raw.dtype;
    fc_tensor *a = as_dtype(ctx, fc__ag_saved_tensor(ctx, node, 0), gdt);
    fc_tensor *b = as_dtype(ctx, fc__ag_saved_tensor(ctx, node, 1), gdt);
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

    if (node->in[0].needs) {
        /* [batch, m, k]; a vector a's [.., 1, k] reduces to [k] in the engine */
        gin[0] = fc_matmul(ctx, g, swap_last2(ctx, bm));
        if (!gin[0]) return fc_ctx_status(ctx);
    }
    if (node->in[1].needs) {
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
        gin[1] = db;
    }
    return FC_OK;
}

/* ---- fc_linear ----------------------------------------------------------------------------------
 */

fc_status fc__grad_linear(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    fc_dtype gdt = gout->raw.dtype;
    fc_tensor *x = as_dtype(ctx, fc__ag_saved_tensor(ctx, node, 0), gdt);
    fc_tensor *w = as_dtype(ctx, fc__ag_saved_tensor(ctx, node, 1), gdt);
    if (!x || !w) return fc_ctx_status(ctx);
    int64_t out = w->raw.shape[0], in = w->raw.shape[1];
    if (node->in[0].needs) {
        gin[0] = fc_matmul(ctx, gout, w); /* [..., out] . [out, in] */
        if (!gin[0]) return fc_ctx_status(ctx);
    }
    if (node->in[1].needs) {
        /* dW = dy^T . x over every row of the batch: [N, out]^T . [N, in] */
        fc_tensor *xc = contig(ctx, x);
        int64_t rows = xc ? fc__raw_numel(&xc->raw) / in : 0;
        fc_tensor *x2 = reshape(ctx, xc, (int64_t[]){rows, in}, 2);
        fc_tensor *g2 = reshape(ctx, gout, (int64_t[]){rows, out}, 2);
        gin[1] = x2 && g2 ? fc_matmul(ctx, swap_last2(ctx, g2), x2) : NULL;
        if (!gin[1]) return fc_ctx_status(ctx);
    }
    if (node->n_in > 2 && node->in[2].needs) gin[2] = gout; /* the engine sums the rows */
    return FC_OK;
}
