/* test_lora.c - LoRA adapters on the Llama fixtures (fucina/lora.h): a new
 * adapter leaves the logits unchanged, its gradients match finite
 * differences in f64, a few Adam steps over a quantized base lower the
 * loss without touching the base, the safetensors file round-trips (and
 * holds q/k rows in Hugging Face order), the merged GGUF gives the
 * adapted model's logits, and the cached forward applies the adapter.
 * Bad input and the OOM sweep are in test_lora_bad.c.
 *
 * Tolerances: the adapter's term is computed in f32 beside the base
 * product, so "unchanged" (B = 0) and the save/load round trip are exact;
 * the merge of an f32 base differs from base + adapter only by the order
 * of f32 sums (1e-4 of max |logit|); a q8_0 merge re-quantizes W + sBA, so
 * it is compared against the adapted q8_0 model with QUANT_TOL (see
 * merge test). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fct_f64.h"
#include "fucina/llama.h"
#include "fucina/lora.h"

#define DATA FUCINA_TEST_DATA_DIR
static const fc_ctx_opts ONE_THREAD = {.threads = 1};

static fc_llama *load(fc_ctx *ctx, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/llama/%s.gguf", DATA, name);
    fc_llama *m = NULL;
    fc_status st = fc_llama_load(ctx, path, NULL, &m);
    if (st) fprintf(stderr, "load %s: %s\n", name, fc_ctx_error(ctx));
    assert_int_equal(st, FC_OK);
    return m;
}

static void tmp_path(char *buf, size_t cap, const char *tag, const char *ext) {
    snprintf(buf, cap, "%s/tests/test_lora_%ld_%s.%s", FUCINA_BINARY_DIR, (long)getpid(), tag, ext);
}

static fc_tensor *ids(fc_ctx *ctx, int64_t vocab, int64_t T, int seed) {
    int32_t v[64];
    for (int64_t i = 0; i < T; i++)
        v[i] = (int32_t)((i * 7 + 3 + seed * 11) % vocab);
    fc_tensor *t = fc_tensor_from_data(ctx, FC_I32, (int64_t[]){1, T}, 2, v);
    assert_non_null(t);
    return t;
}

/* Logits as a malloc'd float array (n floats). */
static float *logits_of(fc_ctx *ctx, fc_llama *m, fc_tensor *x, size_t *n) {
    fc_tensor *y = fc_llama_forward(ctx, m, x);
    if (!y) fprintf(stderr, "forward: %s\n", fc_ctx_error(ctx));
    assert_non_null(y);
    size_t bytes = fc_tensor_nbytes(y);
    float *v = malloc(bytes);
    assert_int_equal(fc_tensor_copy_to(y, v, bytes), FC_OK);
    fc_release(y);
    *n = bytes / sizeof *v;
    return v;
}

static double max_abs(const float *v, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)v[i]));
    return m;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* Gives every B random values (scale s), so the adapter changes the output. */
static void randomize_b(fc_ctx *ctx, fc_lora *l, double s) {
    int64_t n = fc_lora_params(l, NULL, 0);
    fc_tensor **p = malloc(sizeof *p * (size_t)n);
    assert_int_equal(fc_lora_params(l, p, n), n);
    fc_no_grad_begin(ctx); /* a parameter's in-place write */
    for (int64_t i = 1; i < n; i += 2) {
        fc_tensor *r = fc_randn(ctx, FC_F32, fc_tensor_shape(p[i]), 2);
        assert_non_null(r);
        assert_int_equal(fc_mul_scalar_(r, s), FC_OK);
        assert_int_equal(fc_copy_(p[i], r), FC_OK);
        fc_release(r);
    }
    fc_no_grad_end(ctx);
    free(p);
}

/* ---- a new adapter ------------------------------------------------------------ */

static void test_lora_new_leaves_logits_unchanged(void **s) {
    (void)s;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = load(ctx, "tiny_q8_0");
    fc_tensor *x = ids(ctx, 96, 10, 0);
    size_t n0, n1;
    float *y0 = logits_of(ctx, m, x, &n0);
    fc_lora_config c = fc_lora_config_default();
    fc_lora *l = NULL;
    assert_int_equal(fc_lora_new(ctx, m, &c, &l), FC_OK);
    assert_ptr_equal(fc_lora_model(l), m);
    assert_int_equal(fc_lora_get_config(l)->rank, 8);
    assert_true(fc_lora_get_config(l)->alpha == 16.0);
    /* 2 layers x 7 targets x (A, B) */
    assert_int_equal(fc_lora_params(l, NULL, 0), 28);
    assert_string_equal(fc_lora_param_name(l, 0),
                        "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
    assert_string_equal(fc_lora_param_name(l, 27),
                        "base_model.model.model.layers.1.mlp.down_proj.lora_B.weight");
    assert_null(fc_lora_param_name(l, 28));
    assert_null(fc_lora_param_name(l, -1));
    fc_tensor *p[28];
    assert_int_equal(fc_lora_params(l, p, 28), 28);
    /* A [rank, in] uniform within 1/sqrt(in), B [out, rank] zero */
    assert_int_equal(fc_tensor_dim(p[0], 0), 8);
    assert_int_equal(fc_tensor_dim(p[0], 1), 64);
    assert_int_equal(fc_tensor_dim(p[27], 0), 64);  /* down: out = dim */
    assert_int_equal(fc_tensor_dim(p[26], 1), 128); /* down: in = ff */
    double *a = values(p[0]), amax = 0;
    for (int i = 0; i < 8 * 64; i++)
        amax = fmax(amax, fabs(a[i]));
    assert_true(amax <= 1.0 / 8.0 && amax > 0.1);
    free(a);
    double *b = values(p[1]);
    for (int i = 0; i < 64 * 8; i++)
        assert_true(b[i] == 0.0);
    free(b);
    for (int i = 0; i < 28; i++)
        assert_true(fc_tensor_requires_grad(p[i]));
    assert_int_equal(fc_llama_params(m, NULL, 0), 0); /* the base stays frozen */
    /* training mode but grad mode off: no dropout, B = 0: identical */
    fc_no_grad_begin(ctx);
    float *y1 = logits_of(ctx, m, x, &n1);
    fc_no_grad_end(ctx);
    assert_int_equal(n0, n1);
    assert_memory_equal(y0, y1, n0 * sizeof *y0);
    free(y1);
    fc_lora_free(l);
    fc_release(x);
    free(y0);
    fc_llama_free(m);
    free_ctx(ctx);
}

/* ---- training over a quantized base ----------------------------------------------- */

static double lm_loss(fc_ctx *ctx, fc_llama *m, fc_tensor *x, fc_tensor *y, int64_t T,
                      int64_t vocab, bool backward) {
    fc_scope_begin(ctx);
    fc_tensor *logits = fc_llama_forward(ctx, m, x);
    fc_tensor *flat = fc_reshape(ctx, logits, (int64_t[]){T, vocab}, 2);
    fc_tensor *l = fc_cross_entropy(ctx, flat, y, NULL);
    if (!l) fprintf(stderr, "loss: %s\n", fc_ctx_error(ctx));
    assert_non_null(l);
    double v;
    assert_int_equal(fc_tensor_item(l, &v), FC_OK);
    if (backward) assert_int_equal(fc_backward(ctx, l), FC_OK);
    fc_scope_end(ctx);
    return v;
}

static void train_on(const char *name, int64_t vocab) {
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_ctx_seed(ctx, 7);
    fc_llama *m = load(ctx, name);
    /* the base's bytes before */
    int64_t nt = fc_llama_tensor_count(m);
    uint64_t *sums = calloc((size_t)nt, sizeof *sums);
    for (int64_t i = 0; i < nt; i++) {
        fc_tensor *t = fc_llama_tensor_at(m, i);
        const uint8_t *d = fc_tensor_data(t);
        uint64_t h = 1469598103934665603ull;
        for (size_t k = 0; k < fc_tensor_nbytes(t); k++)
            h = (h ^ d[k]) * 1099511628211ull;
        sums[i] = h;
    }
    fc_lora_config c = {.rank = 4, .alpha = 8, .dropout = 0.1, .targets = FC_LORA_ALL};
    fc_lora *l = NULL;
    assert_int_equal(fc_lora_new(ctx, m, &c, &l), FC_OK);
    int64_t np = fc_lora_params(l, NULL, 0);
    fc_tensor **p = malloc(sizeof *p * (size_t)np);
    fc_lora_params(l, p, np);
    fc_optim_opts oo = {.kind = FC_OPTIM_ADAM, .lr = 1e-2};
    fc_optim *opt = fc_optim_new(ctx, &oo, p, (int)np);
    assert_non_null(opt);
    enum { T = 12 };
    int32_t in[T];
    int64_t tgt[T];
    for (int i = 0; i < T; i++) {
        in[i] = (int32_t)((i * 5 + 1) % vocab);
        tgt[i] = (i * 5 + 6) % vocab;
    }
    fc_tensor *x = fc_tensor_from_data(ctx, FC_I32, (int64_t[]){1, T}, 2, in);
    fc_tensor *y = fc_tensor_from_data(ctx, FC_I64, (int64_t[]){T}, 1, tgt);
    fc_lora_set_training(l, false);
    double before = lm_loss(ctx, m, x, y, T, vocab, false);
    fc_lora_set_training(l, true);
    for (int step = 0; step < 5; step++) {
        fc_optim_zero_grad(opt);
        lm_loss(ctx, m, x, y, T, vocab, true);
        for (int64_t i = 0; i < nt; i++)
            assert_null(fc_grad(fc_llama_tensor_at(m, i)));
        assert_non_null(fc_grad(p[0]));
        assert_int_equal(fc_optim_step(opt), FC_OK);
    }
    fc_lora_set_training(l, false);
    double after = lm_loss(ctx, m, x, y, T, vocab, false);
    printf("%s: loss %.4f -> %.4f after 5 Adam steps\n", name, before, after);
    assert_true(after < before - 0.05);
    for (int64_t i = 0; i < nt; i++) {
        fc_tensor *t = fc_llama_tensor_at(m, i);
        const uint8_t *d = fc_tensor_data(t);
        uint64_t h = 1469598103934665603ull;
        for (size_t k = 0; k < fc_tensor_nbytes(t); k++)
            h = (h ^ d[k]) * 1099511628211ull;
        assert_true(h == sums[i]);
        assert_false(fc_tensor_requires_grad(t));
    }
    fc_release(x);
    fc_release(y);
    fc_optim_free(opt);
    free(p);
    free(sums);
    fc_lora_free(l);
    fc_llama_free(m);
    free_ctx(ctx);
}

static void test_lora_trains_over_q8_0(void **s) {
    (void)s;
    train_on("tiny_q8_0", 96);
}

static void test_lora_trains_over_q4_k(void **s) {
    (void)s;
    train_on("small_q4_k", 64);
}

/* ---- files -------------------------------------------------------------------- */

static void test_lora_save_load_round_trip(void **s) {
    (void)s;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = load(ctx, "tiny_f32");
    fc_lora_config c = {
        .rank = 3, .alpha = 5.5, .dropout = 0.05, .targets = FC_LORA_ATTN | FC_LORA_UP};
    fc_lora *l = NULL;
    assert_int_equal(fc_lora_new(ctx, m, &c, &l), FC_OK);
    randomize_b(ctx, l, 0.05);
    fc_lora_set_training(l, false);
    fc_tensor *x = ids(ctx, 96, 9, 1);
    size_t n0, n1;
    float *y0 = logits_of(ctx, m, x, &n0);
    char path[512];
    tmp_path(path, sizeof path, "rt", "safetensors");
    assert_int_equal(fc_lora_save(ctx, l, path), FC_OK);
    fc_lora_free(l);
    /* detached: the base logits again, which differ */
    float *yb = logits_of(ctx, m, x, &n1);
    assert_true(max_diff(y0, yb, n0) > 1e-3);
    free(yb);
    assert_int_equal(fc_lora_load(ctx, m, path, &l), FC_OK);
    const fc_lora_config *g = fc_lora_get_config(l);
    assert_int_equal(g->rank, 3);
    assert_true(g->alpha == 5.5 && g->dropout == 0.05);
    assert_int_equal(g->targets, FC_LORA_ATTN | FC_LORA_UP);
    /* loaded in training mode off: even with grad on, no dropout */
    float *y1 = logits_of(ctx, m, x, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(y0, y1, n0 * sizeof *y0);
    free(y1);
    fc_lora_free(l);
    unlink(path);
    free(y0);
    fc_release(x);
    fc_llama_free(m);
    free_ctx(ctx);
}

/* merged = W + (alpha/rank) B A, written as GGUF: loaded as a plain model it
 * gives the adapted model's logits. f32: up to the order of f32 sums.
 * q8_0: W + sBA re-quantized to q8_0 (round-off up to half a step of each
 * block's scale, the same size as the base's own quantization error),
 * compared with the adapted q8_0 model within QUANT_TOL of max |logit| (the
 * bound test_llama.c uses for q8_0 against exact math: measured below). */
#define QUANT_TOL 3e-2
static void merge_on(const char *name, double tol) {
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_ctx_seed(ctx, 3);
    fc_llama *m = load(ctx, name);
    fc_lora_config c = {.rank = 4, .alpha = 4, .dropout = 0, .targets = FC_LORA_ALL};
    fc_lora *l = NULL;
    assert_int_equal(fc_lora_new(ctx, m, &c, &l), FC_OK);
    randomize_b(ctx, l, 0.05);
    fc_tensor *x = ids(ctx, 96, 11, 2);
    size_t n0, n1, nb;
    float *y0 = logits_of(ctx, m, x, &n0);
    char path[512];
    tmp_path(path, sizeof path, name, "gguf");
    assert_int_equal(fc_lora_merge_save(ctx, l, path, NULL), FC_OK);
    float *yb;
    { /* the model is unchanged: detached, the base logits */
        fc_lora_free(l);
        yb = logits_of(ctx, m, x, &nb);
    }
    fc_llama *r = NULL;
    assert_int_equal(fc_llama_load(ctx, path, NULL, &r), FC_OK);
    /* every key and tensor of the base, the same dtypes */
    const fc_gguf_file *gb = fc_llama_gguf(m), *gr = fc_llama_gguf(r);
    assert_int_equal(fc_gguf_kv_count(gb), fc_gguf_kv_count(gr));
    for (int64_t i = 0; i < fc_gguf_kv_count(gb); i++)
        assert_string_equal(fc_gguf_kv_key(gb, i), fc_gguf_kv_key(gr, i));
    assert_int_equal(fc_llama_tensor_count(m), fc_llama_tensor_count(r));
    for (int64_t i = 0; i < fc_llama_tensor_count(m); i++)
        assert_int_equal(fc_tensor_dtype(fc_llama_tensor_at(m, i)),
                         fc_tensor_dtype(fc_llama_tensor_at(r, i)));
    float *y1 = logits_of(ctx, r, x, &n1);
    assert_int_equal(n0, n1);
    double d = max_diff(y0, y1, n0), big = max_abs(y0, n0), moved = max_diff(y0, yb, n0);
    printf("%s merged: max |diff| %.3g of max |logit| %.3g (the adapter moved them by %.3g)\n",
           name, d, big, moved);
    assert_true(d <= tol * big);
    /* the adapter is really in the merged file: it moved the logits well
     * past the re-quantization's error */
    assert_true(moved > 4 * d);
    free(y0);
    free(y1);
    free(yb);
    unlink(path);
    fc_release(x);
    fc_llama_free(r);
    fc_llama_free(m);
    free_ctx(ctx);
}

static void test_lora_merge_f32(void **s) {
    (void)s;
    merge_on("tiny_f32", 1e-4);
}

static void test_lora_merge_q8_0(void **s) {
    (void)s;
    merge_on("tiny_q8_0", QUANT_TOL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lora_new_leaves_logits_unchanged),
        cmocka_unit_test(test_lora_trains_over_q8_0),
        cmocka_unit_test(test_lora_trains_over_q4_k),
        cmocka_unit_test(test_lora_save_load_round_trip),
        cmocka_unit_test(test_lora_merge_f32),
        cmocka_unit_test(test_lora_merge_q8_0),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
