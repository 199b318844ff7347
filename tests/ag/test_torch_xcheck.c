/* SPDX-License-Identifier: MIT */
/* test_torch_xcheck.c - fucina's autograd against PyTorch on whole models.
 *
 * scripts/gen_autograd_ref.py (torch 1.13) wrote, into tests/data/ag/, fixed
 * parameters and inputs for three small models (a ReLU MLP, a GELU MLP and
 * one pre-LN transformer block with a vocabulary head, all ending in a mean
 * cross-entropy), and for each the loss, the gradient of every parameter and
 * of the input x, and the losses of 10 AdamW steps, once computed in f64
 * and once in f32. Here the same graphs are built with the public op API
 * and compared:
 *
 *   f64 loss and gradients: |ours - torch| <= 1e-10 * max|torch| per tensor
 *       (both sides compute in f64; only summation order differs, worth
 *       ~1e-15 relative, 1.3e-15 seen; 1e-10 leaves room for cancellation,
 *       not for a wrong rule).
 *   f32 loss and gradients: |ours - torch| <= 1e-5 * max|torch| per tensor,
 *       against torch's f32 run and against its f64 run (torch's own f32
 *       and f64 runs differ by at most 4e-7 on this data, ours by 3e-7).
 *   AdamW (f32 parameters, lr 1e-2, weight decay 0.1, 10 steps): each of the
 *       11 losses within 2e-6 relative of torch's f32 and f64 trajectories.
 *       Those two differ by at most 2e-7; an update that computes its moment
 *       coefficients as torch does ((float)(1 - beta2), not 1 - (float)beta2)
 *       lands within 1.3e-7 of torch's f32 run, while the float form inflates
 *       every early update by 6e-6 relative and drifts ~1e-6 per step.
 *
 * "max|torch|" is the largest magnitude in the reference tensor: a per-tensor
 * scale, so near-zero elements are judged against the tensor's size rather
 * than themselves. The parameters are f32 values; the f64 runs widen them
 * exactly, as the generator did. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fc_test_data.h"
#include "fucina.h"

#define MAXP 13  /* parameters of the largest model */
#define NLOSS 11 /* AdamW losses: before each of 10 updates, and after */
#define TOL_F64 1e-10
#define TOL_F32 1e-5
#define TOL_ADAMW 2e-6

/* ---- model descriptions ---------------------------------------------------------------- */

typedef struct tspec {
    const char *name;
    int rank;
    int64_t shape[3];
} tspec;

typedef fc_tensor *(*loss_fn)(fc_ctx *ctx, fc_tensor *const *p, fc_tensor *x, fc_tensor *tgt);

typedef struct model {
    const char *dir;
    int np;
    tspec p[MAXP];
    tspec x, tgt;
    loss_fn loss;
} model;

static int64_t numel(const tspec *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= s->shape[i];
    return n;
}

/* x [N, in] -> Linear -> ReLU or GELU(tanh) -> Linear -> mean cross-entropy.
 * p: w1, b1, w2, b2. */
static fc_tensor *mlp_loss(fc_ctx *ctx, fc_tensor *const *p, fc_tensor *x, fc_tensor *tgt,
                           bool gelu) {
    fc_tensor *h = fc_linear(ctx, x, p[0], p[1]);
    h = gelu ? fc_gelu(ctx, h, true) : fc_relu(ctx, h);
    return fc_cross_entropy(ctx, fc_linear(ctx, h, p[2], p[3]), tgt, NULL);
}

static fc_tensor *mlp_relu(fc_ctx *ctx, fc_tensor *const *p, fc_tensor *x, fc_tensor *tgt) {
    return mlp_loss(ctx, p, x, tgt, false);
}

static fc_tensor *mlp_gelu(fc_ctx *ctx, fc_tensor *const *p, fc_tensor *x, fc_tensor *tgt) {
    return mlp_loss(ctx, p, x, tgt, true);
}

enum { B = 2, T = 5, C = 8, H = 2, HD = C / H, FF = 16, V = 7 };
enum {
    LN1_W,
    LN1_B,
    QKV_W,
    QKV_B,
    PROJ_W,
    PROJ_B,
    LN2_W,
    LN2_B,
    FC1_W,
    FC1_B,
    FC2_W,
    FC2_B,
    HEAD_W
};

/* [B, T, C] -> [B, H, T, HD]; q, k, v are narrowed views, so this copies */
static fc_tensor *heads(fc_ctx *ctx, fc_tensor *t) {
    return fc_transpose(ctx, fc_reshape(ctx, t, (const int64_t[]){B, T, H, HD}, 4), 1, 2);
}

/* The generator's block_loss: pre-LN attention and MLP sublayers with
 * residuals, a bias-free head, mean cross-entropy over all B*T positions.
 * The causal mask is a bool [T, T], true above the diagonal (the positions
 * a query may not see), broadcast over B and H. */
static fc_tensor *block(fc_ctx *ctx, fc_tensor *const *p, fc_tensor *x, fc_tensor *tgt) {
    bool above[T * T];
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
            above[i * T + j] = j > i;
    fc_tensor *mask = fc_tensor_from_data(ctx, FC_BOOL, (const int64_t[]){T, T}, 2, above);

    fc_tensor *h = fc_layer_norm(ctx, x, p[LN1_W], p[LN1_B], 1e-5);
    fc_tensor *qkv[3] = {NULL, NULL, NULL};
    if (fc_split(ctx, fc_linear(ctx, h, p[QKV_W], p[QKV_B]), 2, (const int64_t[]){C, C, C}, 3,
                 qkv) != FC_OK)
        return NULL;
    fc_tensor *q = heads(ctx, qkv[0]), *k = heads(ctx, qkv[1]), *v = heads(ctx, qkv[2]);
    fc_tensor *att =
        fc_mul_scalar(ctx, fc_matmul(ctx, q, fc_transpose(ctx, k, -2, -1)), 1.0 / sqrt((double)HD));
    att = fc_softmax(ctx, fc_masked_fill(ctx, att, mask, -INFINITY), -1);
    fc_tensor *y = fc_transpose(ctx, fc_matmul(ctx, att, v), 1, 2); /* B, T, H, HD */
    y = fc_reshape(ctx, y, (const int64_t[]){B, T, C}, 3);
    x = fc_add(ctx, x, fc_linear(ctx, y, p[PROJ_W], p[PROJ_B]));

    h = fc_layer_norm(ctx, x, p[LN2_W], p[LN2_B], 1e-5);
    h = fc_gelu(ctx, fc_linear(ctx, h, p[FC1_W], p[FC1_B]), true);
    x = fc_add(ctx, x, fc_linear(ctx, h, p[FC2_W], p[FC2_B]));

    fc_tensor *logits = fc_linear(ctx, x, p[HEAD_W], NULL);
    return fc_cross_entropy(ctx, fc_reshape(ctx, logits, (const int64_t[]){B * T, V}, 2),
                            fc_reshape(ctx, tgt, (const int64_t[]){B * T}, 1), NULL);
}

static const model MODELS[] = {
    {"mlp_relu",
     4,
     {{"w1", 2, {16, 12}}, {"b1", 1, {16}}, {"w2", 2, {5, 16}}, {"b2", 1, {5}}},
     {"x", 2, {8, 12}},
     {"targets", 1, {8}},
     mlp_relu},
    {"mlp_gelu",
     4,
     {{"w1", 2, {16, 12}}, {"b1", 1, {16}}, {"w2", 2, {5, 16}}, {"b2", 1, {5}}},
     {"x", 2, {8, 12}},
     {"targets", 1, {8}},
     mlp_gelu},
    {"block",
     13,
     {{"ln1_w", 1, {C}},
      {"ln1_b", 1, {C}},
      {"qkv_w", 2, {3 * C, C}},
      {"qkv_b", 1, {3 * C}},
      {"proj_w", 2, {C, C}},
      {"proj_b", 1, {C}},
      {"ln2_w", 1, {C}},
      {"ln2_b", 1, {C}},
      {"fc1_w", 2, {FF, C}},
      {"fc1_b", 1, {FF}},
      {"fc2_w", 2, {C, FF}},
      {"fc2_b", 1, {C}},
      {"head_w", 2, {V, C}}},
     {"x", 3, {B, T, C}},
     {"targets", 2, {B, T}},
     block},
};

/* ---- reference files ------------------------------------------------------------------ */

/* Reads <dir>/<name>.<ext> (n little-endian elements of width bytes) and
 * decodes it into host doubles (f32/f64) or int64s, whatever the host's
 * byte order. */
static void load(const char *dir, const char *name, const char *ext, int64_t n, double *dbl,
                 int64_t *i64) {
    char rel[128];
    snprintf(rel, sizeof rel, "ag/%s/%s.%s", dir, name, ext);
    size_t width = strcmp(ext, "f32") == 0 ? 4 : 8, size = 0;
    unsigned char *raw = fc_test_read_file(FUCINA_TEST_DATA_DIR, rel, &size);
    if (!raw) fail_msg("cannot read %s (run scripts/gen_autograd_ref.py)", rel);
    if (size != (size_t)n * width) {
        free(raw);
        fail_msg("%s: %zu bytes, expected %lld elements of %zu", rel, size, (long long)n, width);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        uint64_t u = 0;
        for (size_t b = 0; b < width; b++)
            u |= (uint64_t)raw[(size_t)i * width + b] << (8 * b);
        if (i64) {
            i64[i] = (int64_t)u;
        } else if (width == 4) {
            uint32_t u32 = (uint32_t)u;
            float f;
            memcpy(&f, &u32, sizeof f);
            dbl[i] = f;
        } else {
            memcpy(&dbl[i], &u, sizeof u);
        }
    }
    free(raw);
}

static double *load_new(const char *dir, const tspec *s, const char *prefix, const char *ext) {
    char name[64];
    snprintf(name, sizeof name, "%s%s", prefix, s->name);
    double *d = malloc((size_t)numel(s) * sizeof *d);
    assert_non_null(d);
    load(dir, name, ext, numel(s), d, NULL);
    return d;
}

/* ---- graph helpers -------------------------------------------------------------------- */

/* A leaf of dtype dt (f32 or f64) holding the f32 values v (exact in both). */
static fc_tensor *leaf(fc_ctx *ctx, fc_dtype dt, const tspec *s, const double *v, bool grad) {
    int64_t n = numel(s);
    void *buf = malloc((size_t)n * 8);
    assert_non_null(buf);
    for (int64_t i = 0; i < n; i++) {
        if (dt == FC_F64)
            ((double *)buf)[i] = v[i];
        else
            ((float *)buf)[i] = (float)v[i];
    }
    fc_tensor *t = fc_tensor_from_data(ctx, dt, s->shape, s->rank, buf);
    free(buf);
    assert_non_null(t);
    if (grad) {
        assert_int_equal(fc_requires_grad(t, true), FC_OK);
    }
    return t;
}

static fc_tensor *targets(fc_ctx *ctx, const model *m) {
    int64_t idx[B * T * 2];
    assert_true(numel(&m->tgt) <= (int64_t)(sizeof idx / sizeof idx[0]));
    load(m->dir, m->tgt.name, "i64", numel(&m->tgt), NULL, idx);
    fc_tensor *t = fc_tensor_from_data(ctx, FC_I64, m->tgt.shape, m->tgt.rank, idx);
    assert_non_null(t);
    return t;
}

/* The first mismatch of a test, reported after its cleanup so a failing
 * comparison leaks nothing (a sanitizer run then shows only the mismatch). */
typedef struct verdict {
    char msg[512];
} verdict;

/* |got - ref| <= rtol * max|ref| elementwise; a miss notes the worst element. */
static void expect_close(verdict *v, const char *what, const double *got, const double *ref,
                         int64_t n, double rtol) {
    double scale = 0, worst = -1;
    int64_t wi = 0;
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(ref[i]));
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(got[i] - ref[i]);
        if (!(d <= worst)) { /* NaN lands here too */
            worst = d;
            wi = i;
        }
    }
    if (!(worst <= rtol * scale) && !v->msg[0])
        snprintf(v->msg, sizeof v->msg,
                 "%s: element %lld: ours %.17g, torch %.17g (|diff| %.3g > %g * max|torch| %.3g)",
                 what, (long long)wi, got[wi], ref[wi], worst, rtol, scale);
}

/* The contents of t (f32 or f64) as doubles, into out[n]. */
static void read_back(const fc_tensor *t, double *out, int64_t n) {
    assert_non_null(t);
    assert_int_equal(fc_tensor_numel(t), n);
    if (fc_tensor_dtype(t) == FC_F64) {
        assert_int_equal(fc_tensor_copy_out(out, (size_t)n * 8, t), FC_OK);
        return;
    }
    assert_int_equal(fc_tensor_dtype(t), FC_F32);
    float *f = malloc((size_t)n * sizeof *f);
    assert_non_null(f);
    assert_int_equal(fc_tensor_copy_out(f, (size_t)n * sizeof *f, t), FC_OK);
    for (int64_t i = 0; i < n; i++)
        out[i] = f[i];
    free(f);
}

static void expect_no_leak(fc_ctx *ctx) {
    fc_ctx_stats s;
    fc_ctx_get_stats(ctx, &s);
    assert_int_equal(s.tensors_live, 0);
}

/* ---- loss and gradients ----------------------------------------------------------------- */

/* One forward and backward in dt; compares the loss and the gradients of x
 * and of every parameter with torch's run in dt, and in f32 also with
 * torch's f64 run. */
static void check_gradients(const model *m, fc_dtype dt) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2});
    assert_non_null(ctx);
    const char *ext = dt == FC_F64 ? "f64" : "f32";
    double rtol = dt == FC_F64 ? TOL_F64 : TOL_F32;
    fc_tensor *p[MAXP], *x, *tgt = targets(ctx, m);
    double *v = load_new(m->dir, &m->x, "", "f32");
    x = leaf(ctx, dt, &m->x, v, true);
    free(v);
    for (int i = 0; i < m->np; i++) {
        v = load_new(m->dir, &m->p[i], "", "f32");
        p[i] = leaf(ctx, dt, &m->p[i], v, true);
        free(v);
    }

    fc_scope_begin(ctx);
    fc_tensor *loss = m->loss(ctx, p, x, tgt);
    if (!loss) fail_msg("%s %s forward: %s", m->dir, ext, fc_ctx_error(ctx));
    assert_int_equal(fc_tensor_dtype(loss), dt);
    double got;
    assert_int_equal(fc_tensor_item(loss, &got), FC_OK);
    if (fc_backward(ctx, loss) != FC_OK)
        fail_msg("%s %s backward: %s", m->dir, ext, fc_ctx_error(ctx));
    fc_scope_end(ctx);

    /* reference runs: torch in dt, and torch in f64 for the f32 case */
    verdict vd = {{0}};
    const char *refs[2] = {ext, dt == FC_F32 ? "f64" : NULL};
    for (int r = 0; r < 2 && refs[r]; r++) {
        char what[96];
        double ref;
        load(m->dir, "loss", refs[r], 1, &ref, NULL);
        snprintf(what, sizeof what, "%s %s loss vs torch %s", m->dir, ext, refs[r]);
        expect_close(&vd, what, &got, &ref, 1, rtol);
        for (int i = -1; i < m->np; i++) {
            const tspec *s = i < 0 ? &m->x : &m->p[i];
            fc_tensor *g = fc_grad(i < 0 ? x : p[i]);
            if (!g) fail_msg("%s %s: no gradient for %s", m->dir, ext, s->name);
            assert_int_equal(fc_tensor_dtype(g), dt);
            double *ours = malloc((size_t)numel(s) * sizeof *ours);
            assert_non_null(ours);
            read_back(g, ours, numel(s));
            double *want = load_new(m->dir, s, "grad_", refs[r]);
            snprintf(what, sizeof what, "%s %s grad_%s vs torch %s", m->dir, ext, s->name, refs[r]);
            expect_close(&vd, what, ours, want, numel(s), rtol);
            free(ours);
            free(want);
        }
    }

    fc_release(x);
    fc_release(tgt);
    for (int i = 0; i < m->np; i++)
        fc_release(p[i]);
    expect_no_leak(ctx);
    fc_ctx_free(ctx);
    if (vd.msg[0]) fail_msg("%s", vd.msg);
}

/* ---- AdamW ------------------------------------------------------------------------------ */

static void check_adamw(const model *m) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2});
    assert_non_null(ctx);
    fc_tensor *p[MAXP], *x, *tgt = targets(ctx, m);
    double *v = load_new(m->dir, &m->x, "", "f32");
    x = leaf(ctx, FC_F32, &m->x, v, false);
    free(v);
    for (int i = 0; i < m->np; i++) {
        v = load_new(m->dir, &m->p[i], "", "f32");
        p[i] = leaf(ctx, FC_F32, &m->p[i], v, true);
        free(v);
    }
    fc_optim_opts o = {.kind = FC_OPTIM_ADAMW, .lr = 1e-2, .weight_decay = 0.1};
    fc_optim *opt = fc_optim_new(ctx, &o, p, m->np);
    if (!opt) fail_msg("%s: fc_optim_new: %s", m->dir, fc_ctx_error(ctx));

    double losses[NLOSS];
    for (int s = 0; s < NLOSS; s++) {
        bool last = s == NLOSS - 1;
        if (last) fc_no_grad_begin(ctx);
        fc_scope_begin(ctx);
        fc_tensor *loss = m->loss(ctx, p, x, tgt);
        if (!loss) fail_msg("%s step %d forward: %s", m->dir, s, fc_ctx_error(ctx));
        assert_int_equal(fc_tensor_item(loss, &losses[s]), FC_OK);
        if (!last) {
            fc_optim_zero_grad(opt);
            if (fc_backward(ctx, loss) != FC_OK)
                fail_msg("%s step %d backward: %s", m->dir, s, fc_ctx_error(ctx));
        }
        fc_scope_end(ctx);
        if (last)
            fc_no_grad_end(ctx);
        else if (fc_optim_step(opt) != FC_OK)
            fail_msg("%s step %d: %s", m->dir, s, fc_ctx_error(ctx));
    }
    assert_int_equal(fc_optim_step_count(opt), NLOSS - 1);

    verdict vd = {{0}};
    for (int r = 0; r < 2; r++) {
        const char *ext = r ? "f64" : "f32";
        double want[NLOSS];
        load(m->dir, "adamw_losses", ext, NLOSS, want, NULL);
        for (int s = 0; s < NLOSS; s++) {
            if (!(fabs(losses[s] - want[s]) <= TOL_ADAMW * fabs(want[s])) && !vd.msg[0])
                snprintf(vd.msg, sizeof vd.msg,
                         "%s AdamW loss %d: ours %.9g, torch %s %.9g (rtol %g)", m->dir, s,
                         losses[s], ext, want[s], TOL_ADAMW);
        }
    }

    fc_optim_free(opt);
    fc_release(x);
    fc_release(tgt);
    for (int i = 0; i < m->np; i++)
        fc_release(p[i]);
    expect_no_leak(ctx);
    fc_ctx_free(ctx);
    if (vd.msg[0]) fail_msg("%s", vd.msg);
}

/* ---- tests ------------------------------------------------------------------------------- */

#define MODEL_TESTS(idx, tag)                                                                      \
    static void test_torch_xcheck_##tag##_f64(void **state) {                                      \
        (void)state;                                                                               \
        check_gradients(&MODELS[idx], FC_F64);                                                     \
    }                                                                                              \
    static void test_torch_xcheck_##tag##_f32(void **state) {                                      \
        (void)state;                                                                               \
        check_gradients(&MODELS[idx], FC_F32);                                                     \
    }                                                                                              \
    static void test_torch_xcheck_##tag##_adamw(void **state) {                                    \
        (void)state;                                                                               \
        check_adamw(&MODELS[idx]);                                                                 \
    }

MODEL_TESTS(0, mlp_relu)
MODEL_TESTS(1, mlp_gelu)
MODEL_TESTS(2, block)

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torch_xcheck_mlp_relu_f64),
        cmocka_unit_test(test_torch_xcheck_mlp_relu_f32),
        cmocka_unit_test(test_torch_xcheck_mlp_relu_adamw),
        cmocka_unit_test(test_torch_xcheck_mlp_gelu_f64),
        cmocka_unit_test(test_torch_xcheck_mlp_gelu_f32),
        cmocka_unit_test(test_torch_xcheck_mlp_gelu_adamw),
        cmocka_unit_test(test_torch_xcheck_block_f64),
        cmocka_unit_test(test_torch_xcheck_block_f32),
        cmocka_unit_test(test_torch_xcheck_block_adamw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
