/* SPDX-License-Identifier: MIT */
/* test_matmul.c - fc_matmul, fc_linear and fc_ctx_set_backend through the
 * public API, with every provider this build has, against a
 * double-precision reference written here.
 *
 * Tolerance: fct_gemm_tol (tests/support/gemm_ref.h): gamma_{K+2} *
 * sum|a b| with the accumulator's roundoff (2^-24 for f16/bf16/f32, 2^-53
 * for f64), plus one rounding to the output dtype (2^-11 f16, 2^-8 bf16).
 *
 * Operand layouts exercised: contiguous; transposed (the matrix axes stored
 * the other way round and viewed back, which must reach the provider as a
 * transpose flag); narrowed (a column window of a wider buffer: a leading
 * dimension); every other column (no BLAS layout: copied); a batch axis
 * broadcast with stride 0. The storage outside the view holds NaN, so any
 * read outside the logical operand shows up as NaN. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "core/cpu.h"
#include "counting_alloc.h"
#include "exec/tensor.h"
#include "fucina.h"
#include "gemm_ref.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const fc_dtype float_dtypes[] = {FC_F16, FC_BF16, FC_F32, FC_F64};
static const fc_backend provider_ids[] = {FC_BACKEND_REF, FC_BACKEND_BLAS, FC_BACKEND_ONEDNN};

enum layout { L_CONTIG, L_TRANS, L_NARROW, L_STEP2, L_BCAST0, L_COUNT };
static const char *const layout_names[] = {"contiguous", "transposed", "narrowed", "step-2",
                                           "broadcast-batch"};

/* ---- building operands ------------------------------------------------------------------------
 */

/* A tensor of `shape` (rank r) in layout lay, filled with uniform [-1, 1)
 * values of dtype dt; its storage outside the view holds NaN. The storage
 * tensor's reference is dropped: the view keeps the buffer alive. */
static fc_tensor *make_operand(fc_ctx *ctx, fct_rng *rng, fc_dtype dt, const int64_t *shape, int r,
                               enum layout lay) {
    int64_t sshape[FC_MAX_RANK], vstr[FC_MAX_RANK];
    memcpy(sshape, shape, sizeof(int64_t) * (size_t)r);
    if (lay == L_TRANS && r >= 2) { /* stored [..., cols, rows] */
        sshape[r - 2] = shape[r - 1], sshape[r - 1] = shape[r - 2];
    } else if (lay == L_NARROW) {
        sshape[r - 1] = shape[r - 1] + 3;
    } else if (lay == L_STEP2) {
        sshape[r - 1] = shape[r - 1] * 2;
    } else if (lay == L_BCAST0 && r >= 3) {
        sshape[0] = 1;
    }
    int64_t numel = 1;
    for (int i = 0; i < r; i++)
        numel *= sshape[i];
    size_t es = fc_dtype_size(dt);
    char *data = malloc((size_t)numel * es);
    assert_non_null(data);
    for (int64_t i = 0; i < numel; i++)
        fct_store(dt, data, i, NAN);

    int64_t sstr[FC_MAX_RANK];
    fc__shape_contiguous_strides(sshape, r, sstr);
    memcpy(vstr, sstr, sizeof(int64_t) * (size_t)r);
    if (lay == L_TRANS && r >= 2) {
        vstr[r - 2] = sstr[r - 1], vstr[r - 1] = sstr[r - 2];
    } else if (lay == L_STEP2) {
        vstr[r - 1] = 2;
    } else if (lay == L_BCAST0 && r >= 3) {
        vstr[0] = 0;
    }
    /* the logical elements get values; padding stays NaN */
    int64_t idx[FC_MAX_RANK] = {0};
    int64_t vnumel = 1;
    for (int i = 0; i < r; i++)
        vnumel *= shape[i];
    for (int64_t e = 0; e < vnumel; e++) {
        int64_t off = 0;
        for (int i = 0; i < r; i++)
            off += idx[i] * vstr[i];
        fct_store(dt, data, off, fct_rng_uniform(rng, -1, 1));
        for (int i = r - 1; i >= 0 && ++idx[i] == shape[i]; i--)
            idx[i] = 0;
    }
    fc_tensor *base = fc_tensor_from_data(ctx, dt, sshape, r, data);
    free(data);
    assert_non_null(base);
    fc_tensor *v = fc__tensor_view(ctx, "test", base, shape, vstr, r, base->raw.offset);
    fc_release(base);
    assert_non_null(v);
    return v;
}

/* The logical contents of t as doubles (row-major); free() it. */
static double *dense(const fc_tensor *t) {
    size_t nb = fc_tensor_nbytes(t);
    int64_t n = fc_tensor_numel(t);
    void *raw = malloc(nb);
    double *d = malloc(sizeof(double) * (size_t)n);
    assert_true(raw && d);
    assert_int_equal(fc_tensor_copy_out(raw, nb, t), FC_OK);
    for (int64_t i = 0; i < n; i++)
        d[i] = fct_load(fc_tensor_dtype(t), raw, i);
    free(raw);
    return d;
}

/* ---- the reference ------------------------------------------------------------------------------
 */

/* NumPy matmul of the logical contents, in double, with sum|a b| alongside.
 * Vectors are lifted ([k] -> [1, k] / [k, 1]); out is [batch..., m, n]
 * flattened, which is also the order of the real result. Returns k. */
static int64_t ref_matmul(const fc_tensor *a, const fc_tensor *b, double **ref, double **mag,
                          int64_t *count) {
    int ra = fc_tensor_rank(a), rb = fc_tensor_rank(b);
    const int64_t *as = fc_tensor_shape(a), *bs = fc_tensor_shape(b);
    int64_t m = ra == 1 ? 1 : as[ra - 2], k = as[ra - 1], n = rb == 1 ? 1 : bs[rb - 1];
    int na = ra > 2 ? ra - 2 : 0, nbb = rb > 2 ? rb - 2 : 0, nb = na > nbb ? na : nbb;
    int64_t bshape[FC_MAX_RANK], batches = 1;
    for (int i = 0; i < nb; i++) {
        int ia = i - (nb - na), ib = i - (nb - nbb);
        int64_t da = ia >= 0 ? as[ia] : 1, db = ib >= 0 ? bs[ib] : 1;
        bshape[i] = da > db ? da : db;
        batches *= bshape[i];
    }
    double *A = dense(a), *B = dense(b);
    *count = batches * m * n;
    *ref = calloc((size_t)*count, sizeof(double));
    *mag = calloc((size_t)*count, sizeof(double));
    assert_true(*ref && *mag);
    int64_t idx[FC_MAX_RANK] = {0};
    for (int64_t t = 0; t < batches; t++) {
        int64_t oa = 0, ob = 0; /* matrix offsets in the dense copies */
        int64_t stride_a = m * k, stride_b = k * n;
        for (int i = nb - 1; i >= 0; i--) {
            int ia = i - (nb - na), ib = i - (nb - nbb);
            if (ia >= 0) {
                oa += (as[ia] == 1 ? 0 : idx[i]) * stride_a;
                stride_a *= as[ia];
            }
            if (ib >= 0) {
                ob += (bs[ib] == 1 ? 0 : idx[i]) * stride_b;
                stride_b *= bs[ib];
            }
        }
        for (int64_t i = 0; i < m; i++) {
            for (int64_t j = 0; j < n; j++) {
                double s = 0, u = 0;
                for (int64_t p = 0; p < k; p++) {
                    double x = A[oa + i * k + p] * B[ob + p * n + j];
                    s += x;
                    u += fabs(x);
                }
                (*ref)[t * m * n + i * n + j] = s;
                (*mag)[t * m * n + i * n + j] = u;
            }
        }
        for (int i = nb - 1; i >= 0 && ++idx[i] == bshape[i]; i--)
            idx[i] = 0;
    }
    free(A);
    free(B);
    return k;
}

/* out against the reference, element by element. */
static void check_against_ref(const char *what, const fc_tensor *out, const fc_tensor *a,
                              const fc_tensor *b) {
    double *ref, *mag;
    int64_t count;
    int64_t k = ref_matmul(a, b, &ref, &mag, &count);
    assert_int_equal(fc_tensor_numel(out), count);
    double *got = dense(out);
    fc_dtype dt = fc_tensor_dtype(out);
    for (int64_t i = 0; i < count; i++) {
        double tol = fct_gemm_tol(dt, k, ref[i], mag[i]);
        if (!(fabs(got[i] - ref[i]) <= tol)) {
            fail_msg("%s: element %lld = %.9g, want %.9g (tol %.3g)", what, (long long)i, got[i],
                     ref[i], tol);
        }
    }
    free(got);
    free(ref);
    free(mag);
}

/* ---- per-provider fixtures
 * ------------------------------------------------------------------------ */

static fc_ctx *ctx_for(fc_backend id) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 1});
    assert_non_null(ctx);
    fc_status st = fc_ctx_set_backend(ctx, id);
    if (fc__backend_get(id)) {
        assert_int_equal(st, FC_OK);
    } else {
        assert_int_equal(st, FC_ERR_BACKEND);
        assert_non_null(strstr(fc_ctx_error(ctx), "was not built"));
        fc_ctx_free(ctx);
        return NULL;
    }
    return ctx;
}

static void expect_no_leaks(fc_ctx *ctx) {
    fc_ctx_stats s;
    fc_ctx_get_stats(ctx, &s);
    assert_int_equal(s.tensors_live, 0);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
}

/* One product a . b with the given shapes and layouts, checked. */
static void run_mm(fc_ctx *ctx, fct_rng *rng, fc_dtype dt, const int64_t *ash, int ra,
                   enum layout la, const int64_t *bsh, int rb, enum layout lb) {
    fc_tensor *a = make_operand(ctx, rng, dt, ash, ra, la);
    fc_tensor *b = make_operand(ctx, rng, dt, bsh, rb, lb);
    fc_tensor *c = fc_matmul(ctx, a, b);
    char what[256], x[64], y[64];
    snprintf(what, sizeof what, "%s %s(%s) . %s(%s)", fc__backend_name(ctx->backend),
             fc_tensor_describe(a, x, sizeof x), layout_names[la],
             fc_tensor_describe(b, y, sizeof y), layout_names[lb]);
    if (!c) fail_msg("%s: %s", what, fc_ctx_error(ctx));
    check_against_ref(what, c, a, b);
    fc_release(a);
    fc_release(b);
    fc_release(c);
}

/* ---- shapes and layouts ------------------------------------------------------------------------
 */

static const int64_t odd[] = {1, 3, 17, 63, 65, 129};

/* 2-D . 2-D over odd sizes (1xN, Nx1 included) in every layout pair. */
static void test_matmul_2d_layouts_every_provider(void **state) {
    (void)state;
    for (int pi = 0; pi < COUNT(provider_ids); pi++) {
        fc_ctx *ctx = ctx_for(provider_ids[pi]);
        if (!ctx) continue;
        const fc__matmul_provider *p = fc__backend_get(provider_ids[pi]);
        for (int di = 0; di < COUNT(float_dtypes); di++) {
            if (!p->supports(float_dtypes[di])) continue;
            fct_rng rng = {100u + (uint64_t)(pi * 8 + di)};
            for (int t = 0; t < 14; t++) {
                int64_t m = odd[fct_rng_below(&rng, COUNT(odd))];
                int64_t k = odd[fct_rng_below(&rng, COUNT(odd))];
                int64_t n = odd[fct_rng_below(&rng, COUNT(odd))];
                enum layout la = (enum layout)(t % 4), lb = (enum layout)((t / 4 + t) % 4);
                run_mm(ctx, &rng, float_dtypes[di], (int64_t[]){m, k}, 2, la, (int64_t[]){k, n}, 2,
                       lb);
            }
        }
        expect_no_leaks(ctx);
        fc_ctx_free(ctx);
    }
}

/* Vector operands: 1-D . 2-D, 2-D . 1-D, 1-D . 1-D, N-D . 1-D, 1-D . N-D. */
static void test_matmul_vectors(void **state) {
    (void)state;
    for (int pi = 0; pi < COUNT(provider_ids); pi++) {
        fc_ctx *ctx = ctx_for(provider_ids[pi]);
        if (!ctx) continue;
        const fc__matmul_provider *p = fc__backend_get(provider_ids[pi]);
        fct_rng rng = {7};
        for (int di = 0; di < COUNT(float_dtypes); di++) {
            fc_dtype dt = float_dtypes[di];
            if (!p->supports(dt)) continue;
            run_mm(ctx, &rng, dt, (int64_t[]){65}, 1, L_CONTIG, (int64_t[]){65, 17}, 2, L_TRANS);
            run_mm(ctx, &rng, dt, (int64_t[]){17, 65}, 2, L_NARROW, (int64_t[]){65}, 1, L_CONTIG);
            run_mm(ctx, &rng, dt, (int64_t[]){129}, 1, L_STEP2, (int64_t[]){129}, 1, L_CONTIG);
            run_mm(ctx, &rng, dt, (int64_t[]){3, 17, 63}, 3, L_CONTIG, (int64_t[]){63}, 1, L_STEP2);
            run_mm(ctx, &rng, dt, (int64_t[]){17}, 1, L_CONTIG, (int64_t[]){2, 17, 5}, 3, L_TRANS);
            /* result shapes follow NumPy */
            fc_tensor *a = make_operand(ctx, &rng, dt, (int64_t[]){4}, 1, L_CONTIG);
            fc_tensor *b = make_operand(ctx, &rng, dt, (int64_t[]){2, 3, 4, 5}, 4, L_CONTIG);
            fc_tensor *c = fc_matmul(ctx, a, b);
            assert_non_null(c);
            assert_int_equal(fc_tensor_rank(c), 3);
            assert_true(fc_tensor_dim(c, 0) == 2 && fc_tensor_dim(c, 1) == 3 &&
                        fc_tensor_dim(c, 2) == 5);
            fc_tensor *d = fc_matmul(ctx, a, a);
            assert_non_null(d);
            assert_int_equal(fc_tensor_rank(d), 1);
            assert_int_equal(fc_tensor_dim(d, 0), 1);
            fc_release(a);
            fc_release(b);
            fc_release(c);
            fc_release(d);
        }
        expect_no_leaks(ctx);
        fc_ctx_free(ctx);
    }
}

/* Broadcast batch axes: [2,1,m,k] . [3,k,n], shared 2-D operands on
 * either side (the left one folds into m), stride-0 batch axes, 4-D. */
static void test_matmul_broadcast_batches(void **state) {
    (void)state;
    for (int pi = 0; pi < COUNT(provider_ids); pi++) {
        fc_ctx *ctx = ctx_for(provider_ids[pi]);
        if (!ctx) continue;
        const fc__matmul_provider *p = fc__backend_get(provider_ids[pi]);
        fct_rng rng = {11};
        for (int di = 0; di < COUNT(float_dtypes); di++) {
            fc_dtype dt = float_dtypes[di];
            if (!p->supports(dt)) continue;
            run_mm(ctx, &rng, dt, (int64_t[]){2, 1, 17, 63}, 4, L_CONTIG, (int64_t[]){3, 63, 5}, 3,
                   L_TRANS);
            run_mm(ctx, &rng, dt, (int64_t[]){4, 17, 65}, 3, L_CONTIG, (int64_t[]){65, 3}, 2,
                   L_CONTIG);
            run_mm(ctx, &rng, dt, (int64_t[]){4, 17, 65}, 3, L_NARROW, (int64_t[]){65, 3}, 2,
                   L_TRANS);
            run_mm(ctx, &rng, dt, (int64_t[]){17, 3}, 2, L_TRANS, (int64_t[]){4, 3, 63}, 3,
                   L_NARROW);
            run_mm(ctx, &rng, dt, (int64_t[]){3, 5, 17}, 3, L_BCAST0, (int64_t[]){3, 17, 4}, 3,
                   L_CONTIG);
            run_mm(ctx, &rng, dt, (int64_t[]){3, 5, 17}, 3, L_TRANS, (int64_t[]){3, 17, 4}, 3,
                   L_BCAST0);
            run_mm(ctx, &rng, dt, (int64_t[]){2, 3, 1, 17}, 4, L_STEP2, (int64_t[]){2, 1, 17, 6}, 4,
                   L_BCAST0);
        }
        expect_no_leaks(ctx);
        fc_ctx_free(ctx);
    }
}

/* ---- fc_linear
 * -------------------------------------------------------------------------------------- */

/* y = x . w^T + bias against a double loop, for 1-D, 2-D and 3-D x, a
 * weight stored either way round, with and without a bias. */
static void test_linear_every_provider(void **state) {
    (void)state;
    for (int pi = 0; pi < COUNT(provider_ids); pi++) {
        fc_ctx *ctx = ctx_for(provider_ids[pi]);
        if (!ctx) continue;
        const fc__matmul_provider *p = fc__backend_get(provider_ids[pi]);
        fct_rng rng = {21};
        for (int di = 0; di < COUNT(float_dtypes); di++) {
            fc_dtype dt = float_dtypes[di];
            if (!p->supports(dt)) continue;
            static const int64_t xshapes[][3] = {{65, 0, 0}, {17, 65, 0}, {2, 3, 65}};
            for (int v = 0; v < 6; v++) {
                int rx = v % 3 + 1;
                int64_t xs[3];
                for (int i = 0; i < rx; i++)
                    xs[i] = xshapes[rx - 1][i];
                int64_t in = 65, outf = 17;
                fc_tensor *x = make_operand(ctx, &rng, dt, xs, rx, v == 4 ? L_NARROW : L_CONTIG);
                fc_tensor *w = make_operand(ctx, &rng, dt, (int64_t[]){outf, in}, 2,
                                            v % 2 ? L_TRANS : L_CONTIG);
                fc_tensor *bias =
                    v < 3 ? make_operand(ctx, &rng, dt, (int64_t[]){outf}, 1, L_CONTIG) : NULL;
                fc_tensor *y = fc_linear(ctx, x, w, bias);
                if (!y) fail_msg("linear: %s", fc_ctx_error(ctx));
                assert_int_equal(fc_tensor_rank(y), rx);
                assert_int_equal(fc_tensor_dim(y, -1), outf);
                double *X = dense(x), *W = dense(w), *B = bias ? dense(bias) : NULL;
                double *Y = dense(y);
                int64_t rows = fc_tensor_numel(x) / in;
                for (int64_t r = 0; r < rows; r++) {
                    for (int64_t o = 0; o < outf; o++) {
                        double s = B ? B[o] : 0, u = B ? fabs(B[o]) : 0;
                        for (int64_t i = 0; i < in; i++) {
                            s += X[r * in + i] * W[o * in + i];
                            u += fabs(X[r * in + i] * W[o * in + i]);
                        }
                        double tol = fct_gemm_tol(dt, in, s, u);
                        if (!(fabs(Y[r * outf + o] - s) <= tol))
                            fail_msg("linear %s %s v=%d: y[%lld][%lld] = %.9g, want %.9g",
                                     fc__backend_name(ctx->backend), fc_dtype_name(dt), v,
                                     (long long)r, (long long)o, Y[r * outf + o], s);
                    }
                }
                free(X), free(W), free(B), free(Y);
                fc_release(x), fc_release(w), fc_release(bias), fc_release(y);
            }
        }
        expect_no_leaks(ctx);
        fc_ctx_free(ctx);
    }
}

/* ---- errors
 * ------------------------------------------------------------------------------------------ */

static void test_matmul_errors(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    fc_tensor *a = fc_zeros(ctx, FC_F32, (int64_t[]){2, 3}, 2);
    fc_tensor *b = fc_zeros(ctx, FC_F32, (int64_t[]){4, 5}, 2);
    fc_tensor *h = fc_zeros(ctx, FC_F16, (int64_t[]){3, 5}, 2);
    fc_tensor *i32 = fc_zeros(ctx, FC_I32, (int64_t[]){3, 5}, 2);
    fc_tensor *b3 = fc_zeros(ctx, FC_F32, (int64_t[]){2, 3, 4}, 3);
    fc_tensor *b4 = fc_zeros(ctx, FC_F32, (int64_t[]){5, 4, 6}, 3);

    assert_null(fc_matmul(ctx, a, b));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(fc_ctx_error(ctx), "[2,3]"));
    assert_non_null(strstr(fc_ctx_error(ctx), "[4,5]"));
    assert_non_null(strstr(fc_ctx_error(ctx), "matmul"));
    fc_ctx_clear_error(ctx);

    assert_null(fc_matmul(ctx, b3, b4));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(fc_ctx_error(ctx), "batch dims of [2,3,4] and [5,4,6]"));
    fc_ctx_clear_error(ctx);

    assert_null(fc_matmul(ctx, a, h));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_DTYPE);
    assert_non_null(strstr(fc_ctx_error(ctx), "f32"));
    assert_non_null(strstr(fc_ctx_error(ctx), "f16"));
    fc_ctx_clear_error(ctx);

    assert_null(fc_matmul(ctx, i32, i32));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_DTYPE);
    assert_non_null(strstr(fc_ctx_error(ctx), "i32"));
    fc_ctx_clear_error(ctx);

    /* NULL propagates without replacing the first error */
    assert_null(fc_matmul(ctx, a, b));
    assert_null(fc_matmul(ctx, NULL, a));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_SHAPE_MISMATCH);
    fc_ctx_clear_error(ctx);
    assert_null(fc_matmul(ctx, a, NULL));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_NULL_ARG);
    fc_ctx_clear_error(ctx);
    assert_null(fc_matmul(NULL, a, b));

    /* linear */
    fc_tensor *w = fc_zeros(ctx, FC_F32, (int64_t[]){5, 3}, 2);
    fc_tensor *bias_bad = fc_zeros(ctx, FC_F32, (int64_t[]){4}, 1);
    assert_null(fc_linear(ctx, a, b3, NULL));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_RANK);
    fc_ctx_clear_error(ctx);
    assert_null(fc_linear(ctx, a, b, NULL));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(fc_ctx_error(ctx), "f32[2,3]"));
    assert_non_null(strstr(fc_ctx_error(ctx), "f32[4,5]"));
    fc_ctx_clear_error(ctx);
    assert_null(fc_linear(ctx, a, w, bias_bad));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(fc_ctx_error(ctx), "bias"));
    fc_ctx_clear_error(ctx);
    assert_null(fc_linear(ctx, a, h, NULL));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_DTYPE);
    fc_ctx_clear_error(ctx);
    fc_tensor *y = fc_linear(ctx, a, w, NULL);
    assert_non_null(y);
    assert_true(fc_tensor_dim(y, 0) == 2 && fc_tensor_dim(y, 1) == 5);

    fc_release(a), fc_release(b), fc_release(h), fc_release(i32), fc_release(b3);
    fc_release(b4), fc_release(w), fc_release(bias_bad), fc_release(y);
    expect_no_leaks(ctx);
    fc_ctx_free(ctx);
}

/* fc_ctx_set_backend and FUCINA_BACKEND through the public entry points. */
static void test_matmul_backend_selection(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    assert_int_equal(fc_ctx_set_backend(ctx, (fc_backend)9), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "fc_ctx_set_backend"));
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_ctx_set_backend(NULL, FC_BACKEND_REF), FC_ERR_NULL_ARG);
    assert_int_equal(fc_ctx_set_backend(ctx, FC_BACKEND_AUTO), FC_OK);
    assert_int_equal(fc_ctx_set_backend(ctx, FC_BACKEND_REF), FC_OK);
    fc_status st = fc_ctx_set_backend(ctx, FC_BACKEND_ONEDNN);
    if (!fc__backend_get(FC_BACKEND_ONEDNN)) {
        assert_int_equal(st, FC_ERR_BACKEND);
        assert_non_null(strstr(fc_ctx_error(ctx), "libdnnl-dev"));
        fc_ctx_clear_error(ctx);
    }
    if (fc__backend_get(FC_BACKEND_BLAS)) {
        /* blas has no bf16: the op fails with the provider's message */
        assert_int_equal(fc_ctx_set_backend(ctx, FC_BACKEND_BLAS), FC_OK);
        fc_tensor *a = fc_ones(ctx, FC_BF16, (int64_t[]){8, 8}, 2);
        assert_null(fc_matmul(ctx, a, a));
        assert_int_equal(fc_ctx_status(ctx), FC_ERR_BACKEND);
        assert_non_null(strstr(fc_ctx_error(ctx), "'blas' does not support bf16"));
        fc_ctx_clear_error(ctx);
        fc_release(a);
    }
    /* the environment steers FC_BACKEND_AUTO */
    setenv("FUCINA_BACKEND", "nope", 1);
    fc__backend_env_refresh();
    assert_int_equal(fc_ctx_set_backend(ctx, FC_BACKEND_AUTO), FC_OK);
    fc_tensor *a = fc_ones(ctx, FC_F32, (int64_t[]){64, 64}, 2);
    assert_null(fc_matmul(ctx, a, a));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_BACKEND);
    assert_non_null(strstr(fc_ctx_error(ctx), "FUCINA_BACKEND='nope'"));
    fc_ctx_clear_error(ctx);
    setenv("FUCINA_BACKEND", "ref", 1);
    fc__backend_env_refresh();
    fc_tensor *c = fc_matmul(ctx, a, a);
    assert_non_null(c);
    double v;
    assert_int_equal(fc_tensor_element(c, (int64_t[]){3, 5}, &v), FC_OK);
    assert_true(v == 64.0);
    unsetenv("FUCINA_BACKEND");
    fc__backend_env_refresh();
    fc_release(a), fc_release(c);
    expect_no_leaks(ctx);
    fc_ctx_free(ctx);
}

/* The automatic choice never fails for a dtype the library supports, at
 * every level this CPU has (the f32 choice and the widening of f16/bf16
 * follow the level; CI also runs the suite under FUCINA_ISA and
 * ONEDNN_MAX_CPU_ISA caps): tiny, mid-size and batched products in every
 * layout, each checked against the double reference, with the gradient of
 * a 16-bit product too. */
static void test_matmul_automatic_choice_never_fails(void **state) {
    (void)state;
    static const int64_t shapes[][3] = {{4, 4, 4}, {17, 63, 65}, {65, 129, 33}, {1, 257, 64}};
    const fc__isa keep = fc__isa_set_cap(FC__ISA_PORTABLE);
    for (int lv = FC__ISA_PORTABLE; lv <= (int)fc__isa_detected(); lv++) {
        fc__isa_set_cap((fc__isa)lv);
        fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 1});
        assert_non_null(ctx);
        for (int di = 0; di < COUNT(float_dtypes); di++) {
            const fc_dtype dt = float_dtypes[di];
            fct_rng rng = {7000u + (uint64_t)(lv * 8 + di)};
            for (int s = 0; s < COUNT(shapes); s++) {
                const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                const enum layout la = (enum layout)(s % 4), lb = (enum layout)((s + 1) % 4);
                run_mm(ctx, &rng, dt, (int64_t[]){m, k}, 2, la, (int64_t[]){k, n}, 2, lb);
                run_mm(ctx, &rng, dt, (int64_t[]){3, m, k}, 3, L_BCAST0, (int64_t[]){k, n}, 2,
                       L_CONTIG);
            }
            if (dt == FC_F64) continue; /* gradients are for f32, f16 and bf16 leaves */
            fc_scope_begin(ctx);
            fc_tensor *a = fc_param_randn(ctx, dt, (const int64_t[]){33, 64}, 2, 1.0);
            fc_tensor *b = fc_param_randn(ctx, dt, (const int64_t[]){64, 65}, 2, 1.0);
            fc_tensor *loss = fc_sum(ctx, fc_matmul(ctx, a, b), NULL, 0, false);
            if (!loss || fc_backward(ctx, loss) != FC_OK)
                fail_msg("level %s, %s: %s", fc__isa_name((fc__isa)lv), fc_dtype_name(dt),
                         fc_ctx_error(ctx));
            assert_non_null(fc_grad(a));
            assert_non_null(fc_grad(b));
            fc_scope_end(ctx);
        }
        assert_int_equal(fc_ctx_status(ctx), FC_OK);
        expect_no_leaks(ctx);
        fc_ctx_free(ctx);
    }
    fc__isa_set_cap(keep);
}

/* Attention's heads: q and k are [B, H, T, D] views of one [B, T, 3, H, D]
 * buffer, whose batch axes do not merge, so small products are first
 * compacted into one batched call; k^T is compacted as k and read
 * transposed. The result matches the reference, and has the same bits as
 * the product of contiguous copies (the provider sees the same call). */
static void test_matmul_attention_heads(void **state) {
    (void)state;
    enum { B = 3, T = 9, H = 4, D = 5 };
    for (int pi = 0; pi < COUNT(provider_ids); pi++) {
        fc_ctx *ctx = ctx_for(provider_ids[pi]);
        if (!ctx) continue;
        fct_rng rng = {17};
        fc_scope_begin(ctx); /* the views' intermediate handles go at its end */
        fc_tensor *qkv = make_operand(ctx, &rng, FC_F32, (int64_t[]){B, T, 3, H, D}, 5, L_CONTIG);
        fc_tensor *head[2];
        for (int w = 0; w < 2; w++)
            head[w] = fc_permute(ctx, fc_squeeze(ctx, fc_narrow(ctx, qkv, 2, w, 1), 2),
                                 (const int[]){0, 2, 1, 3});
        fc_tensor *kt = fc_transpose(ctx, head[1], 2, 3);
        fc_tensor *s = fc_matmul(ctx, head[0], kt);
        if (!s) fail_msg("%s: %s", fc__backend_name(ctx->backend), fc_ctx_error(ctx));
        check_against_ref("q . k^T of strided heads", s, head[0], kt);
        fc_tensor *qc = fc_contiguous(ctx, head[0]), *kc = fc_contiguous(ctx, head[1]);
        fc_tensor *kct = fc_transpose(ctx, kc, 2, 3);
        fc_tensor *sc = fc_matmul(ctx, qc, kct);
        assert_non_null(sc);
        assert_memory_equal(fc_tensor_data(s), fc_tensor_data(sc), fc_tensor_nbytes(s));
        /* and k^T on the left: the compacted operand is then A */
        fc_tensor *u = fc_matmul(ctx, kt, head[0]), *uc = fc_matmul(ctx, kct, qc);
        assert_true(u && uc);
        check_against_ref("k^T . q of strided heads", u, kt, head[0]);
        assert_memory_equal(fc_tensor_data(u), fc_tensor_data(uc), fc_tensor_nbytes(u));
        fc_scope_end(ctx);
        expect_no_leaks(ctx);
        fc_ctx_free(ctx);
    }
}

/* Matrix-vector products under the automatic choice (one f32 row times a
 * large enough transposed matrix: the dot-per-output path of
 * exec/kernels/matmul.c): against the reference, with and without a bias,
 * a 1-D x, a narrowed weight; the same bits at 1 and 2 threads; an explicit
 * provider still gets the product. */
enum { GV_K = 700, GV_N = 131 }; /* K * N above the path's 64 K threshold */

static void vector_rows(fc_ctx *ctx, fc_tensor *y[4]) {
    fct_rng rng = {23};
    fc_tensor *x = make_operand(ctx, &rng, FC_F32, (int64_t[]){1, GV_K}, 2, L_CONTIG);
    fc_tensor *x1 = make_operand(ctx, &rng, FC_F32, (int64_t[]){GV_K}, 1, L_CONTIG);
    fc_tensor *w = make_operand(ctx, &rng, FC_F32, (int64_t[]){GV_N, GV_K}, 2, L_NARROW);
    fc_tensor *bias = make_operand(ctx, &rng, FC_F32, (int64_t[]){GV_N}, 1, L_CONTIG);
    fc_tensor *wt = fc_transpose(ctx, w, 0, 1);
    y[0] = fc_matmul(ctx, x, wt);
    y[1] = fc_matmul(ctx, x1, wt);
    y[2] = fc_linear(ctx, x, w, bias);
    y[3] = fc_linear(ctx, x1, w, NULL);
    for (int i = 0; i < 4; i++)
        if (!y[i]) fail_msg("product %d: %s", i, fc_ctx_error(ctx));
    check_against_ref("x . w^T", y[0], x, wt);
    check_against_ref("x1 . w^T", y[1], x1, wt);
    check_against_ref("linear of x1, no bias", y[3], x1, wt);
    const float *yb = fc_tensor_data(y[2]), *y0 = fc_tensor_data(y[0]), *bv = fc_tensor_data(bias);
    for (int j = 0; j < GV_N; j++) /* bias + dot: one rounding of each */
        assert_true(fabsf(yb[j] - (bv[j] + y0[j])) <= 1e-6f * (1 + fabsf(yb[j])));
    /* an explicit provider still runs the product */
    assert_int_equal(fc_ctx_set_backend(ctx, FC_BACKEND_REF), FC_OK);
    fc_tensor *r = fc_matmul(ctx, x, wt);
    assert_non_null(r);
    check_against_ref("ref provider", r, x, wt);
    assert_int_equal(fc_ctx_set_backend(ctx, FC_BACKEND_AUTO), FC_OK);
    fc_release(r), fc_release(x), fc_release(x1), fc_release(w), fc_release(bias), fc_release(wt);
}

static void test_matmul_vector_rows_automatic(void **state) {
    (void)state;
    fc_ctx *c1 = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 1});
    fc_ctx *c2 = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 1});
    assert_true(c1 && c2);
    fc_tensor *y1[4], *y2[4];
    vector_rows(c1, y1);
    vector_rows(c2, y2);
    for (int i = 0; i < 4; i++) {
        assert_memory_equal(fc_tensor_data(y1[i]), fc_tensor_data(y2[i]), fc_tensor_nbytes(y1[i]));
        fc_release(y1[i]), fc_release(y2[i]);
    }
    expect_no_leaks(c1);
    expect_no_leaks(c2);
    fc_ctx_free(c1);
    fc_ctx_free(c2);
}

/* Same inputs, same provider, same thread count: the same bits. */
static void test_matmul_deterministic(void **state) {
    (void)state;
    for (int pi = 0; pi < COUNT(provider_ids); pi++) {
        fc_ctx *ctx = ctx_for(provider_ids[pi]);
        if (!ctx) continue;
        fct_rng rng = {5};
        fc_tensor *a = make_operand(ctx, &rng, FC_F32, (int64_t[]){3, 70, 200}, 3, L_CONTIG);
        fc_tensor *b = make_operand(ctx, &rng, FC_F32, (int64_t[]){200, 90}, 2, L_TRANS);
        fc_tensor *c1 = fc_matmul(ctx, a, b), *c2 = fc_matmul(ctx, a, b);
        assert_true(c1 && c2);
        assert_memory_equal(fc_tensor_data(c1), fc_tensor_data(c2), fc_tensor_nbytes(c1));
        fc_release(a), fc_release(b), fc_release(c1), fc_release(c2);
        expect_no_leaks(ctx);
        fc_ctx_free(ctx);
    }
}

/* Every byte the op layer and the providers allocate (oneDNN's cache
 * included) goes through the context's allocator and is back at
 * fc_ctx_free. */
static void test_matmul_allocations_return(void **state) {
    (void)state;
    for (int pi = 0; pi < COUNT(provider_ids); pi++) {
        if (!fc__backend_get(provider_ids[pi])) continue;
        fct_counting ca;
        fct_counting_init(&ca);
        fc_ctx *ctx = fc_ctx_new(
            &(fc_ctx_opts){.threads = 2, .backend = provider_ids[pi], .allocator = &ca.alloc});
        assert_non_null(ctx);
        fct_rng rng = {9};
        fc_tensor *a = make_operand(ctx, &rng, FC_F32, (int64_t[]){2, 30, 40}, 3, L_STEP2);
        fc_tensor *b = make_operand(ctx, &rng, FC_F32, (int64_t[]){40, 20}, 2, L_CONTIG);
        for (int r = 0; r < 3; r++) {
            fc_tensor *c = fc_matmul(ctx, a, b);
            assert_non_null(c);
            fc_release(c);
        }
        fc_release(a), fc_release(b);
        expect_no_leaks(ctx);
        fc_ctx_free(ctx);
        assert_true(fct_counting_clean(&ca));
    }
}

/* Steady state: once the first product of a shape has run, repeating it
 * calls the allocator zero times (pooled outputs, the providers' workspace
 * and oneDNN primitives cached in the context). */
static void test_matmul_steady_state_allocates_nothing(void **state) {
    (void)state;
    for (int pi = 0; pi < COUNT(provider_ids); pi++) {
        fc_ctx *ctx = ctx_for(provider_ids[pi]);
        if (!ctx) continue;
        const fc__matmul_provider *p = fc__backend_get(provider_ids[pi]);
        for (int di = 0; di < COUNT(float_dtypes); di++) {
            fc_dtype dt = float_dtypes[di];
            if (!p->supports(dt)) continue;
            fct_rng rng = {17};
            fc_tensor *a = make_operand(ctx, &rng, dt, (int64_t[]){4, 33, 40}, 3, L_CONTIG);
            fc_tensor *b = make_operand(ctx, &rng, dt, (int64_t[]){4, 40, 20}, 3, L_TRANS);
            fc_tensor *c = fc_matmul(ctx, a, b);
            assert_non_null(c);
            fc_release(c);
            fc_ctx_stats before, after;
            fc_ctx_get_stats(ctx, &before);
            for (int r = 0; r < 5; r++) {
                c = fc_matmul(ctx, a, b);
                assert_non_null(c);
                fc_release(c);
            }
            fc_ctx_get_stats(ctx, &after);
            if (after.alloc_calls != before.alloc_calls) {
                fail_msg("%s %s: %llu allocations in steady state", p->name, fc_dtype_name(dt),
                         (unsigned long long)(after.alloc_calls - before.alloc_calls));
            }
            fc_release(a), fc_release(b);
        }
        expect_no_leaks(ctx);
        fc_ctx_free(ctx);
    }
}

/* An f32 a times a q8_0 b ({f16 d; i8 q[32]} per 32 elements of a row):
 * a . (d * q) in double. The dequantization is fc_to's; when this build's
 * fc_to cannot dequantize q8_0 yet, fc_matmul must report fc_to's code. */
static void test_matmul_quantized_rhs(void **state) {
    (void)state;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2});
    const int64_t m = 5, k = 7, n = 64;
    unsigned char blocks[7 * 2 * 34];
    double deq[7 * 64];
    fct_rng rng = {3};
    for (int64_t p = 0; p < k; p++) {
        for (int64_t blk = 0; blk < n / 32; blk++) {
            unsigned char *q = blocks + (p * (n / 32) + blk) * 34;
            double d = 0.125 * (double)(1 + fct_rng_below(&rng, 4));
            uint16_t dh = fc_f32_to_f16((float)d);
            memcpy(q, &dh, 2);
            for (int i = 0; i < 32; i++) {
                int8_t v = (int8_t)(fct_rng_below(&rng, 255) - 127);
                memcpy(q + 2 + i, &v, 1);
                deq[p * n + blk * 32 + i] = d * v;
            }
        }
    }
    fc_tensor *b = fc_tensor_from_data(ctx, FC_Q8_0, (int64_t[]){k, n}, 2, blocks);
    assert_non_null(b);
    fc_tensor *a = make_operand(ctx, &rng, FC_F32, (int64_t[]){m, k}, 2, L_TRANS);
    fc_tensor *probe = fc_to(ctx, b, FC_F32);
    fc_status deq_status = fc_ctx_status(ctx);
    fc_release(probe);
    fc_ctx_clear_error(ctx);
    fc_tensor *c = fc_matmul(ctx, a, b);
    if (deq_status != FC_OK) {
        assert_null(c);
        assert_int_equal(fc_ctx_status(ctx), deq_status);
    } else {
        assert_non_null(c);
        double *A = dense(a), *C = dense(c);
        for (int64_t i = 0; i < m; i++) {
            for (int64_t j = 0; j < n; j++) {
                double s = 0, u = 0;
                for (int64_t p = 0; p < k; p++) {
                    s += A[i * k + p] * deq[p * n + j];
                    u += fabs(A[i * k + p] * deq[p * n + j]);
                }
                assert_true(fabs(C[i * n + j] - s) <= fct_gemm_tol(FC_F32, k, s, u));
            }
        }
        free(A), free(C);
    }
    /* q8_1 quantizes activations: never a weight */
    fc_ctx_clear_error(ctx);
    unsigned char zeros81[7 * 2 * 36] = {0};
    fc_tensor *q81 = fc_tensor_from_data(ctx, FC_Q8_1, (int64_t[]){k, n}, 2, zeros81);
    assert_non_null(q81);
    assert_null(fc_matmul(ctx, a, q81));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_DTYPE);
    assert_non_null(strstr(fc_ctx_error(ctx), "q8_1 is not a weight format"));
    fc_ctx_clear_error(ctx);
    fc_release(a), fc_release(b), fc_release(c), fc_release(q81);
    expect_no_leaks(ctx);
    fc_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_2d_layouts_every_provider),
        cmocka_unit_test(test_matmul_vectors),
        cmocka_unit_test(test_matmul_broadcast_batches),
        cmocka_unit_test(test_linear_every_provider),
        cmocka_unit_test(test_matmul_errors),
        cmocka_unit_test(test_matmul_backend_selection),
        cmocka_unit_test(test_matmul_automatic_choice_never_fails),
        cmocka_unit_test(test_matmul_attention_heads),
        cmocka_unit_test(test_matmul_vector_rows_automatic),
        cmocka_unit_test(test_matmul_deterministic),
        cmocka_unit_test(test_matmul_allocations_return),
        cmocka_unit_test(test_matmul_steady_state_allocates_nothing),
        cmocka_unit_test(test_matmul_quantized_rhs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
