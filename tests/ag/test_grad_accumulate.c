/* SPDX-License-Identifier: MIT */
/* test_grad_accumulate.c - the engine's gradient arithmetic (src/ag/accumulate.c).
 *
 * Region gradients: pieces of one tensor taken by narrow, strided slice and
 * split (overlapping and not, some through squeeze/permute, of a leaf or
 * of an intermediate node) are weighted, summed and differentiated; each
 * element's gradient must equal the double sum of the weights of the
 * pieces that contain it, plus a full gradient the same tensor receives
 * either before or after the pieces' (both accumulation orders), and
 * retain_graph must add the same again (bumping the accumulator's
 * generation). A rule declaring an overlapping or out-of-range region, or
 * declaring one outside a rule, is refused with FC_ERR_STATE.
 *
 * Leading-axes sums (a bias gradient): the result must be the row-order
 * f32 sum bit for bit (the order of the strided walk it replaces), the
 * same bits for 1 and 2 threads, and close to a double reference; shapes
 * off the fast path (a middle broadcast axis) are checked too. A leaf used
 * twice accumulates same-shape gradients (flat path, large enough to be
 * split across threads). A node's accumulator may share a gradient with
 * other holders: a later contribution is added out of place, never into
 * the caller's grad_out, and gradients handed back are private. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ag/tape.h"
#include "core/buffer.h"
#include "fct_f64.h"

static fc_ctx *new_ctx(int threads) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .seed = 5});
    assert_non_null(ctx);
    return ctx;
}

static fc_tensor *f32_random(fc_ctx *ctx, const int64_t *shape, int rank, uint64_t seed,
                             double **keep) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= shape[d];
    double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    fill_random(v, n, seed, -1.0, 1.0);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)v[i]; /* exactly representable */
    fc_tensor *t = from_f64(ctx, FC_F32, shape, rank, v);
    if (keep)
        *keep = v;
    else
        free(v);
    return t;
}

/* ---- region gradients ---------------------------------------------------------------- */

enum { A = 4, B = 6, C = 5 }; /* x is [A, B, C] */
#define NX (A * B * C)

/* One piece: a window of x described by its start and step per axis, and
 * the weights it is multiplied by (row-major over the piece's extent). */
typedef struct piece {
    int64_t start[3], step[3], len[3];
    double *w;
} piece;

/* sum(piece * w) where the piece's tensor may have a different layout than
 * [len] (squeezed / permuted): w is given in the piece's own layout. */
static fc_tensor *weighted(fc_ctx *ctx, fc_tensor *p, piece *pc, uint64_t seed) {
    pc->w = NULL;
    fc_tensor *w =
        f32_random(ctx, (const int64_t[]){pc->len[0], pc->len[1], pc->len[2]}, 3, seed, &pc->w);
    fc_tensor *wv = fc_reshape(ctx, w, fc_tensor_shape(p), fc_tensor_rank(p));
    assert_non_null(wv);
    return fc_sum(ctx, fc_mul(ctx, p, wv), NULL, 0, false);
}

/* grad[e] += scale * w(piece) for each element e of x inside the piece. */
static void expect_piece(double *grad, const piece *pc, double scale) {
    for (int64_t i = 0; i < pc->len[0]; i++)
        for (int64_t j = 0; j < pc->len[1]; j++)
            for (int64_t k = 0; k < pc->len[2]; k++) {
                int64_t a = pc->start[0] + i * pc->step[0], b = pc->start[1] + j * pc->step[1],
                        c = pc->start[2] + k * pc->step[2];
                grad[(a * B + b) * C + c] += scale * pc->w[(i * pc->len[1] + j) * pc->len[2] + k];
            }
}

/* The pieces: narrow axis 1 [0,3) and [2,5) (overlapping), a strided slice
 * of axis 2, the two parts of a split of axis 0, and a squeezed+permuted
 * narrow of axis 2 (the attention q/k/v pattern). Each one's weighted sum
 * is added to *loss. */
static fc_tensor *pieces_loss(fc_ctx *ctx, fc_tensor *x, piece *pc) {
    fc_tensor *sp[2];
    assert_int_equal(fc_split(ctx, x, 0, (const int64_t[]){1, 3}, 2, sp), FC_OK);
    fc_tensor *t[6] = {
        fc_narrow(ctx, x, 1, 0, 3),
        fc_narrow(ctx, x, 1, 2, 3),
        fc_slice(ctx, x, 2, 1, 5, 2),
        sp[0],
        sp[1],
        fc_narrow(ctx, x, 2, 4, 1),
    };
    piece def[6] = {
        {{0, 0, 0}, {1, 1, 1}, {A, 3, C}, NULL}, {{0, 2, 0}, {1, 1, 1}, {A, 3, C}, NULL},
        {{0, 0, 1}, {1, 1, 2}, {A, B, 2}, NULL}, {{0, 0, 0}, {1, 1, 1}, {1, B, C}, NULL},
        {{1, 0, 0}, {1, 1, 1}, {3, B, C}, NULL}, {{0, 0, 4}, {1, 1, 1}, {A, B, 1}, NULL},
    };
    memcpy(pc, def, sizeof def);
    /* the last piece as [B, A] after squeeze + permute: weights [A, B, 1]
     * laid out as [B, A] are read back in that order below */
    fc_tensor *q = fc_permute(ctx, fc_squeeze(ctx, t[5], 2), (const int[]){1, 0});
    fc_tensor *loss = NULL;
    for (int i = 0; i < 6; i++) {
        fc_tensor *term;
        if (i == 5) {
            pc[5].w = NULL;
            fc_tensor *w = f32_random(ctx, (const int64_t[]){B, A}, 2, 700, &pc[5].w);
            term = fc_sum(ctx, fc_mul(ctx, q, w), NULL, 0, false);
            /* w[b][a] weighs x[a][b][4]: transpose into piece order [A, B, 1] */
            double *wt = malloc(sizeof *wt * A * B);
            for (int a = 0; a < A; a++)
                for (int b = 0; b < B; b++)
                    wt[a * B + b] = pc[5].w[b * A + a];
            free(pc[5].w);
            pc[5].w = wt;
        } else {
            term = weighted(ctx, t[i], &pc[i], 100 + (uint64_t)i);
        }
        loss = loss ? fc_add(ctx, loss, term) : term;
    }
    assert_non_null(loss);
    return loss;
}

static void free_pieces(piece *pc) {
    for (int i = 0; i < 6; i++)
        free(pc[i].w);
}

static void check_grad(fc_tensor *g, const double *want, double tol) {
    assert_non_null(g);
    double *got = values(g);
    for (int i = 0; i < NX; i++) {
        if (fabs(got[i] - want[i]) > tol * (1.0 + fabs(want[i])))
            fail_msg("element %d: got %.9g want %.9g", i, got[i], want[i]);
    }
    free(got);
}

/* full: where x also gets a full gradient (sum(x * c)): 0 none, 1 created
 * before the pieces (its gradient arrives last), 2 after (arrives first);
 * through: the pieces come from y = 3 x (an intermediate node) */
static void run_regions(int full, bool through) {
    fc_ctx *ctx = new_ctx(2);
    fc_scope_begin(ctx);
    fc_tensor *x = f32_random(ctx, (const int64_t[]){A, B, C}, 3, 1, NULL);
    assert_int_equal(fc_requires_grad(x, true), FC_OK);
    double *cw = NULL;
    fc_tensor *c = f32_random(ctx, (const int64_t[]){A, B, C}, 3, 2, &cw);
    fc_tensor *fullterm = NULL;
    if (full == 1) fullterm = fc_sum(ctx, fc_mul(ctx, x, c), NULL, 0, false);
    fc_tensor *src = through ? fc_mul_scalar(ctx, x, 3.0) : x;
    piece pc[6];
    fc_tensor *loss = pieces_loss(ctx, src, pc);
    if (full == 2) fullterm = fc_sum(ctx, fc_mul(ctx, x, c), NULL, 0, false);
    if (fullterm) loss = fc_add(ctx, fullterm, loss);
    assert_non_null(loss);

    double want[NX] = {0};
    for (int i = 0; i < 6; i++)
        expect_piece(want, &pc[i], through ? 3.0 : 1.0);
    if (full)
        for (int i = 0; i < NX; i++)
            want[i] += cw[i];

    fc_tensor *one = fc_ones(ctx, FC_F32, fc_tensor_shape(loss), fc_tensor_rank(loss));
    assert_int_equal(fc_backward_with(ctx, loss, one, true), FC_OK);
    check_grad(fc_grad(x), want, 1e-6);
    /* a retained graph walked again adds in place into the same accumulator */
    fc_tensor *g = fc_grad(x);
    uint32_t gen = fc__buffer_generation(g->raw.buf);
    assert_int_equal(fc_backward_with(ctx, loss, one, false), FC_OK);
    assert_ptr_equal(fc_grad(x), g);
    assert_int_not_equal(fc__buffer_generation(g->raw.buf), gen);
    double twice[NX];
    for (int i = 0; i < NX; i++)
        twice[i] = 2.0 * want[i];
    check_grad(fc_grad(x), twice, 1e-6);
    /* the graph is freed now */
    assert_int_equal(fc_backward_with(ctx, loss, one, false), FC_ERR_STATE);

    fc_zero_grad(&x, 1);
    free_pieces(pc);
    free(cw);
    fc_scope_end(ctx);
    free_ctx(ctx);
}

static void test_regions_leaf(void **state) {
    (void)state;
    run_regions(0, false);
}
static void test_regions_leaf_full_after(void **state) {
    (void)state;
    run_regions(1, false);
}
static void test_regions_leaf_full_first(void **state) {
    (void)state;
    run_regions(2, false);
}
static void test_regions_node(void **state) {
    (void)state;
    run_regions(0, true);
    run_regions(2, true);
}

/* A region gradient of an f64 graph stays f64 and exact; a split piece that
 * gets no gradient leaves its window zero. */
static void test_regions_f64_unused_piece(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    fc_scope_begin(ctx);
    double v[12];
    for (int i = 0; i < 12; i++)
        v[i] = i + 0.25;
    fc_tensor *x = fc_tensor_from_data(ctx, FC_F64, (const int64_t[]){3, 4}, 2, v);
    assert_int_equal(fc_requires_grad(x, true), FC_OK);
    fc_tensor *sp[3];
    assert_int_equal(fc_split(ctx, x, 1, (const int64_t[]){1, 2, 1}, 3, sp), FC_OK);
    fc_tensor *l = fc_add(ctx, fc_sum(ctx, fc_mul_scalar(ctx, sp[0], 0.5), NULL, 0, false),
                          fc_sum(ctx, fc_mul(ctx, sp[2], sp[2]), NULL, 0, false));
    assert_int_equal(fc_backward(ctx, l), FC_OK);
    fc_tensor *g = fc_grad(x);
    assert_int_equal(fc_tensor_dtype(g), FC_F64);
    const double *gv = fc_tensor_data(g);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++) {
            double want = c == 0 ? 0.5 : c == 3 ? 2.0 * v[r * 4 + 3] : 0.0;
            assert_true(gv[r * 4 + c] == want);
        }
    fc_zero_grad(&x, 1);
    fc_scope_end(ctx);
    free_ctx(ctx);
}

/* A rule that declares the region held in node->i: i[0] offset, i[1..2]
 * the strides of its [2, 3] gradient. */
static fc_status bad_region_rule(fc_ctx *ctx, fc_node *node, fc_tensor *gout, fc_tensor **gin) {
    gin[0] = gout;
    int64_t st[FC_MAX_RANK] = {node->i[1], node->i[2]};
    return fc__ag_gin_region(ctx, node, 0, st, node->i[0]);
}

static fc_status region_backward(int64_t offset, int64_t s0, int64_t s1) {
    fc_ctx *ctx = new_ctx(1);
    fc_scope_begin(ctx);
    fc_tensor *x = fc_zeros(ctx, FC_F32, (const int64_t[]){4, 3}, 2);
    assert_int_equal(fc_requires_grad(x, true), FC_OK);
    fc_no_grad_begin(ctx);
    fc_tensor *y = fc_zeros(ctx, FC_F32, (const int64_t[]){2, 3}, 2);
    fc_no_grad_end(ctx);
    fc_node *nd = fc__ag_record(ctx, "bad_region", bad_region_rule, y, 1, &x);
    assert_non_null(nd);
    nd->i[0] = offset;
    nd->i[1] = s0;
    nd->i[2] = s1;
    fc_status st =
        fc_backward_with(ctx, y, fc_ones(ctx, FC_F32, (const int64_t[]){2, 3}, 2), false);
    if (st == FC_OK) {
        /* rows 0..1 at the offset (s0 = 3, s1 = 1) */
        const float *g = fc_tensor_data(fc_grad(x));
        for (int i = 0; i < 12; i++)
            assert_true(g[i] == ((i >= offset && i < offset + 6) ? 1.0f : 0.0f));
    } else {
        assert_non_null(strstr(fc_ctx_error(ctx), "bad_region"));
        assert_null(fc_grad(x));
    }
    fc_zero_grad(&x, 1);
    fc_scope_end(ctx);
    free_ctx(ctx);
    return st;
}

static void test_region_checks(void **state) {
    (void)state;
    assert_int_equal(region_backward(0, 3, 1), FC_OK);
    assert_int_equal(region_backward(6, 3, 1), FC_OK);
    assert_int_equal(region_backward(7, 3, 1), FC_ERR_STATE);  /* past the end */
    assert_int_equal(region_backward(-1, 3, 1), FC_ERR_STATE); /* before the start */
    assert_int_equal(region_backward(0, 1, 1), FC_ERR_STATE);  /* rows overlap */
    assert_int_equal(region_backward(0, 3, 0), FC_ERR_STATE);  /* a broadcast, not a window */
    /* outside a rule there is nowhere to declare a region */
    fc_ctx *ctx = new_ctx(1);
    fc_scope_begin(ctx);
    fc_tensor *x = fc_zeros(ctx, FC_F32, (const int64_t[]){4}, 1);
    assert_int_equal(fc_requires_grad(x, true), FC_OK);
    fc_tensor *y = fc_narrow(ctx, x, 0, 1, 2);
    int64_t st[FC_MAX_RANK] = {1};
    assert_int_equal(fc__ag_gin_region(ctx, y->node, 0, st, 0), FC_ERR_STATE);
    fc_scope_end(ctx);
    free_ctx(ctx);
}

/* ---- leading-axes sums ---------------------------------------------------------------- */

/* bias b of shape bshape added to x of shape xshape; returns b's gradient
 * for the output gradient g (seeded) as floats, and g's values */
static float *bias_grad(int threads, const int64_t *xs, int xr, const int64_t *bs, int br,
                        double **gv) {
    fc_ctx *ctx = new_ctx(threads);
    fc_scope_begin(ctx);
    fc_tensor *x = fc_zeros(ctx, FC_F32, xs, xr);
    fc_tensor *b = fc_zeros(ctx, FC_F32, bs, br);
    assert_int_equal(fc_requires_grad(b, true), FC_OK);
    fc_tensor *y = fc_add(ctx, x, b);
    fc_tensor *g = f32_random(ctx, xs, xr, 42, gv);
    assert_int_equal(fc_backward_with(ctx, y, g, false), FC_OK);
    int64_t n = fc_tensor_numel(b);
    float *out = malloc(sizeof *out * (size_t)n);
    assert_int_equal(fc_tensor_copy_out(out, sizeof *out * (size_t)n, fc_grad(b)), FC_OK);
    fc_zero_grad(&b, 1);
    fc_scope_end(ctx);
    free_ctx(ctx);
    return out;
}

/* xs = [rows..., cols] summed to [cols] (bshape any leading 1s) */
static void check_colsum(const int64_t *xs, int xr, const int64_t *bs, int br) {
    double *g = NULL, *g2 = NULL;
    float *r1 = bias_grad(1, xs, xr, bs, br, &g);
    float *r2 = bias_grad(2, xs, xr, bs, br, &g2);
    int64_t n = 1, cols = 1;
    for (int d = 0; d < xr; d++)
        n *= xs[d];
    for (int d = 0; d < br; d++)
        cols *= bs[d];
    int64_t rows = n / cols;
    for (int64_t c = 0; c < cols; c++) {
        float fsum = 0.0f;
        double dsum = 0.0, asum = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            fsum += (float)g[r * cols + c];
            dsum += g[r * cols + c];
            asum += fabs(g[r * cols + c]);
        }
        assert_memory_equal(&r1[c], &fsum, sizeof fsum);  /* row order, bit for bit */
        assert_memory_equal(&r1[c], &r2[c], sizeof fsum); /* any thread count */
        assert_true(fabs(r1[c] - dsum) <= 1e-6 * asum + 1e-30);
    }
    free(r1);
    free(r2);
    free(g);
    free(g2);
}

static void test_bias_column_sums(void **state) {
    (void)state;
    check_colsum((const int64_t[]){7, 33, 37}, 3, (const int64_t[]){37}, 1);
    check_colsum((const int64_t[]){3, 1, 50}, 3, (const int64_t[]){1, 50}, 2);
    check_colsum((const int64_t[]){64, 40, 37}, 3, (const int64_t[]){37}, 1); /* threaded */
    check_colsum((const int64_t[]){2100, 3, 16}, 3, (const int64_t[]){3, 16}, 2);
    check_colsum((const int64_t[]){5, 4, 3}, 3, (const int64_t[]){1, 1, 1}, 3); /* one column */
    check_colsum((const int64_t[]){9}, 1, (const int64_t[]){9}, 1);             /* no rows to sum */
    /* 64-column blocks summed in registers, and a short last block */
    check_colsum((const int64_t[]){300, 200}, 2, (const int64_t[]){200}, 1);
    check_colsum((const int64_t[]){1024, 128}, 2, (const int64_t[]){128}, 1);
}

/* A middle broadcast axis is off the fast path: the walk still sums it. */
static void test_bias_middle_axis(void **state) {
    (void)state;
    const int64_t xs[3] = {5, 4, 3}, bs[3] = {5, 1, 3};
    double *g = NULL;
    float *r = bias_grad(2, xs, 3, bs, 3, &g);
    for (int a = 0; a < 5; a++)
        for (int c = 0; c < 3; c++) {
            float want = 0.0f;
            for (int b = 0; b < 4; b++)
                want += (float)g[(a * 4 + b) * 3 + c];
            assert_memory_equal(&r[a * 3 + c], &want, sizeof want);
        }
    free(r);
    free(g);
}

/* A leaf used twice: its two same-shape gradients add elementwise (the
 * flat path, split across threads at this size). */
static void test_same_shape_accumulate(void **state) {
    (void)state;
    const int64_t shape[2] = {300, 257};
    int64_t n = shape[0] * shape[1];
    fc_ctx *ctx = new_ctx(2);
    fc_scope_begin(ctx);
    fc_tensor *x = fc_zeros(ctx, FC_F32, shape, 2);
    assert_int_equal(fc_requires_grad(x, true), FC_OK);
    double *a = NULL, *b = NULL;
    fc_tensor *ta = f32_random(ctx, shape, 2, 7, &a), *tb = f32_random(ctx, shape, 2, 8, &b);
    fc_tensor *l = fc_add(ctx, fc_sum(ctx, fc_mul(ctx, x, ta), NULL, 0, false),
                          fc_sum(ctx, fc_mul(ctx, x, tb), NULL, 0, false));
    assert_int_equal(fc_backward(ctx, l), FC_OK);
    const float *g = fc_tensor_data(fc_grad(x));
    for (int64_t i = 0; i < n; i++) {
        float want = (float)a[i] + (float)b[i];
        assert_true(g[i] == want);
    }
    free(a);
    free(b);
    fc_zero_grad(&x, 1);
    fc_scope_end(ctx);
    free_ctx(ctx);
}

/* One gradient handed on to two consumers (an add's rule passes its output
 * gradient to both inputs), one of which also receives a second
 * contribution: accumulating that must not write into the storage the
 * other consumer (leaf c) reads. L = sum((y + c) + y), y = 3 x:
 * dL/dx = 6, dL/dc = 1, in either order of the outer add's operands. (A
 * copy-free accumulator that borrowed such gradients failed this.) */
static void test_shared_gradient_not_written(void **state) {
    (void)state;
    for (int order = 0; order < 2; order++) {
        fc_ctx *ctx = new_ctx(1);
        const int64_t n[1] = {5};
        fc_tensor *x = fc_ones(ctx, FC_F32, n, 1), *c = fc_ones(ctx, FC_F32, n, 1);
        assert_int_equal(fc_requires_grad(x, true), FC_OK);
        assert_int_equal(fc_requires_grad(c, true), FC_OK);
        fc_scope_begin(ctx);
        fc_tensor *y = fc_mul_scalar(ctx, x, 3.0);
        fc_tensor *inner = fc_add(ctx, y, c);
        fc_tensor *outer = order ? fc_add(ctx, y, inner) : fc_add(ctx, inner, y);
        assert_int_equal(fc_backward(ctx, fc_sum(ctx, outer, NULL, 0, false)), FC_OK);
        fc_scope_end(ctx);
        const float *gx = fc_tensor_data(fc_grad(x)), *gc = fc_tensor_data(fc_grad(c));
        for (int i = 0; i < 5; i++) {
            assert_true(gx[i] == 6.0f);
            assert_true(gc[i] == 1.0f);
        }
        fc_release(x);
        fc_release(c);
        fc_ctx_free(ctx);
    }
}

/* A node's accumulator takes a gradient as it is even when others hold it
 * (no copy), and adds a later one out of place while it is shared. Here
 * the user's grad_out g becomes the output node's accumulator and an add
 * of y to itself hands it to y's node twice: y's gradient is g + g in a
 * new tensor, x's 4 g, and g itself stays as the caller wrote it. */
static void test_shared_accumulator_added_out_of_place(void **state) {
    (void)state;
    for (int threads = 1; threads <= 2; threads++) {
        fc_ctx *ctx = new_ctx(threads);
        const int64_t shape[2] = {64, 1500}; /* large enough to split the sum */
        double *gv = NULL;
        fc_tensor *x = fc_ones(ctx, FC_F32, shape, 2);
        assert_int_equal(fc_requires_grad(x, true), FC_OK);
        fc_scope_begin(ctx);
        fc_tensor *g = f32_random(ctx, shape, 2, 11, &gv);
        fc_tensor *y = fc_mul_scalar(ctx, x, 2.0);
        assert_int_equal(fc_backward_with(ctx, fc_add(ctx, y, y), g, false), FC_OK);
        const float *gd = fc_tensor_data(g), *gx = fc_tensor_data(fc_grad(x));
        for (int64_t i = 0; i < shape[0] * shape[1]; i++) {
            assert_true(gd[i] == (float)gv[i]);
            assert_true(gx[i] == 2.0f * ((float)gv[i] + (float)gv[i]));
        }
        fc_scope_end(ctx);
        free(gv);
        fc_release(x);
        fc_ctx_free(ctx);
    }
}

/* The two inputs of a sum get one shared gradient inside the walk; asked
 * for by fc_autograd_grad they come back as two private tensors, so
 * writing one leaves the other as it was. */
static void test_shared_accumulator_returned_private(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    const int64_t n[1] = {6};
    fc_tensor *x = fc_ones(ctx, FC_F32, n, 1);
    assert_int_equal(fc_requires_grad(x, true), FC_OK);
    fc_scope_begin(ctx);
    fc_tensor *a = fc_mul_scalar(ctx, x, 2.0), *b = fc_mul_scalar(ctx, x, 3.0);
    fc_tensor *s = fc_sum(ctx, fc_add(ctx, a, b), NULL, 0, false);
    fc_tensor *grads[2] = {NULL, NULL};
    assert_int_equal(fc_autograd_grad(ctx, &s, NULL, 1, (fc_tensor *[]){a, b}, 2, NULL, grads),
                     FC_OK);
    float *ga = fc_tensor_data_mut(grads[0]);
    const float *gb = fc_tensor_data(grads[1]);
    assert_ptr_not_equal(ga, gb);
    for (int i = 0; i < 6; i++)
        ga[i] = 7.0f;
    for (int i = 0; i < 6; i++)
        assert_true(gb[i] == 1.0f);
    fc_release(grads[0]);
    fc_release(grads[1]);
    fc_scope_end(ctx);
    fc_release(x);
    fc_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regions_leaf),
        cmocka_unit_test(test_regions_leaf_full_after),
        cmocka_unit_test(test_regions_leaf_full_first),
        cmocka_unit_test(test_regions_node),
        cmocka_unit_test(test_regions_f64_unused_piece),
        cmocka_unit_test(test_region_checks),
        cmocka_unit_test(test_bias_column_sums),
        cmocka_unit_test(test_bias_middle_axis),
        cmocka_unit_test(test_same_shape_accumulate),
        cmocka_unit_test(test_shared_gradient_not_written),
        cmocka_unit_test(test_shared_accumulator_added_out_of_place),
        cmocka_unit_test(test_shared_accumulator_returned_private),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
