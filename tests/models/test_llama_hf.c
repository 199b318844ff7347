/* SPDX-License-Identifier: MIT */
/* test_llama_hf.c - Hugging Face checkpoints (fc_llama_load_hf) against
 * PyTorch float64 (fixtures of scripts/gen_hf_fixtures.py in
 * tests/data/hf: tiny random checkpoints in the hub's layout, the forward
 * written from the published equations):
 *   llama_tied      f32, tied embeddings, "linear" rope scaling, an old
 *                   rotary_emb.inv_freq buffer to skip;
 *   llama3_sharded  bf16, two shards and an index, "llama3" rope scaling;
 *   qwen2           f32, q/k/v biases, tied, rope_theta 1e6;
 *   mistral         f16, sliding window 4 over a 12-token prompt.
 * Each: logits within 1e-5 of the largest |reference logit| (f32
 * compute), greedy tokens through the KV cache equal to PyTorch's, the
 * weights still mapped in their own dtype (no copy). Then each written as
 * GGUF (Q/K rows permuted for "llama", kept for "qwen2") and read back by
 * fc_llama_load with the same logits; the composed rope with Llama 3.1's
 * factors against the fused op; fc_llama_new over the architecture table;
 * PEFT adapters across the two row orders. Bad checkpoints and the OOM
 * sweep: test_llama_hf_bad.c. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fc_test_data.h"
#include "fucina/llama.h"
#include "fucina/lora.h"
#include "llama/blocks.h"

#define DATA FUCINA_TEST_DATA_DIR
static const fc_ctx_opts ONE_THREAD = {.threads = 1};
#define REL_TOL 1e-5
#define MAX_IDS 32

typedef struct reference {
    int32_t prompt[MAX_IDS], greedy[MAX_IDS];
    int n_prompt, n_greedy_prompt, n_greedy;
    double *logits; /* [n_prompt, vocab] */
    size_t n_logits;
} reference;

static int read_ids(FILE *f, const char *tag, int32_t *out) {
    char line[1024], *p = line;
    assert_non_null(fgets(line, sizeof line, f));
    size_t n = strlen(tag);
    assert_int_equal(strncmp(line, tag, n), 0);
    p += n;
    int k = 0;
    char *end;
    for (long v = strtol(p, &end, 10); end != p && k < MAX_IDS; v = strtol(p, &end, 10)) {
        out[k++] = (int32_t)v;
        p = end;
    }
    return k;
}

static void read_reference(const char *name, reference *r) {
    char path[512];
    snprintf(path, sizeof path, "%s/hf/%s/reference.txt", DATA, name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    r->n_prompt = read_ids(f, "prompt", r->prompt);
    int32_t gp[1];
    assert_int_equal(read_ids(f, "greedy_prompt", gp), 1);
    r->n_greedy_prompt = gp[0];
    r->n_greedy = read_ids(f, "greedy", r->greedy);
    fclose(f);
    char rel[256];
    snprintf(rel, sizeof rel, "hf/%s/reference.f64", name);
    size_t n = 0;
    r->logits = fc_test_read_file(DATA, rel, &n);
    assert_non_null(r->logits);
    r->n_logits = n / sizeof(double);
}

static fc_llama *load_hf(fc_ctx *ctx, const char *name, const fc_llama_load_opts *o) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/hf/%s", DATA, name);
    fc_llama *m = NULL;
    fc_status st = fc_llama_load_hf(ctx, dir, o, &m);
    if (st) fprintf(stderr, "load %s: %s\n", name, fc_ctx_error(ctx));
    assert_int_equal(st, FC_OK);
    return m;
}

/* max |logits(m, prompt) - reference| / max |reference|. */
static double logits_rel(fc_ctx *ctx, fc_llama *m, const reference *r) {
    fc_tensor *ids = fc_tensor_from_data(ctx, FC_I32, (int64_t[]){r->n_prompt}, 1, r->prompt);
    fc_tensor *y = fc_llama_forward(ctx, m, ids);
    if (!y) fprintf(stderr, "forward: %s\n", fc_ctx_error(ctx));
    assert_non_null(y);
    assert_int_equal((size_t)fc_tensor_numel(y), r->n_logits);
    float *got = malloc(sizeof *got * r->n_logits);
    assert_int_equal(fc_tensor_copy_out(got, sizeof *got * r->n_logits, y), FC_OK);
    double worst = 0, big = 0;
    for (size_t i = 0; i < r->n_logits; i++) {
        worst = fmax(worst, fabs(got[i] - r->logits[i]));
        big = fmax(big, fabs(r->logits[i]));
    }
    free(got);
    fc_release(y);
    fc_release(ids);
    return worst / big;
}

static void check_greedy(fc_ctx *ctx, fc_llama *m, const reference *r) {
    int32_t out[MAX_IDS];
    int64_t n = 0;
    fc_status st =
        fc_llama_generate(ctx, m, r->prompt, r->n_greedy_prompt, r->n_greedy, -1, NULL, out, &n);
    if (st) fprintf(stderr, "generate: %s\n", fc_ctx_error(ctx));
    assert_int_equal(st, FC_OK);
    assert_int_equal(n, r->n_greedy);
    assert_memory_equal(out, r->greedy, sizeof *out * (size_t)n);
}

static void tmp_path(char *buf, size_t cap, const char *tag) {
    snprintf(buf, cap, "%s/tests/test_llama_hf_%ld_%s", FUCINA_BINARY_DIR, (long)getpid(), tag);
}

/* Parity of one fixture: the loaded checkpoint, then its GGUF. */
static void parity(const char *name, fc_dtype weight_dtype, const char *gguf_arch) {
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    reference r;
    read_reference(name, &r);
    fc_llama *m = load_hf(ctx, name, NULL);
    /* the weights are the file's, in its dtype: mapped, not copied */
    fc_tensor *wq = fc_llama_tensor(m, "blk.0.attn_q.weight");
    assert_non_null(wq);
    assert_int_equal(fc_tensor_dtype(wq), weight_dtype);
    assert_null(fc_tensor_data_mut(wq)); /* the file's bytes, read-only */
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_READ_ONLY);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_llama_params(m, NULL, 0), 0);
    assert_int_equal(fc_llama_get_config(m)->rope_mode, FC_ROPE_NEOX);
    double rel = logits_rel(ctx, m, &r);
    printf("%s: max |logit diff| / max |logit| = %.3g\n", name, rel);
    assert_true(rel <= REL_TOL);
    check_greedy(ctx, m, &r);

    /* GGUF: what llama.cpp's converter would write, read back as GGUF */
    char path[512];
    tmp_path(path, sizeof path, "model.gguf");
    fc_status st = fc_llama_save(ctx, m, path, NULL);
    if (gguf_arch) {
        if (st) fprintf(stderr, "save: %s\n", fc_ctx_error(ctx));
        assert_int_equal(st, FC_OK);
        fc_llama *g = NULL;
        st = fc_llama_load(ctx, path, NULL, &g);
        if (st) fprintf(stderr, "load gguf: %s\n", fc_ctx_error(ctx));
        assert_int_equal(st, FC_OK);
        const char *s = NULL;
        size_t n = 0;
        assert_int_equal(
            fc_gguf_value_string(fc_gguf_kv_find(fc_llama_gguf(g), "general.architecture"), &s, &n),
            FC_OK);
        assert_int_equal(n, strlen(gguf_arch));
        assert_memory_equal(s, gguf_arch, n);
        double grel = logits_rel(ctx, g, &r);
        printf("%s as GGUF '%s': %.3g\n", name, gguf_arch, grel);
        assert_true(grel <= REL_TOL);
        check_greedy(ctx, g, &r);
        fc_llama_free(g);
        unlink(path);
    } else { /* a window GGUF "llama" cannot carry */
        assert_int_equal(st, FC_ERR_UNSUPPORTED);
        assert_non_null(strstr(fc_ctx_error(ctx), "sliding_window = 4"));
        fc_ctx_clear_error(ctx);
    }
    fc_llama_free(m);
    free(r.logits);
    fc_ctx_stats stats;
    fc_ctx_get_stats(ctx, &stats);
    assert_int_equal(stats.tensors_live, 0);
    fc_ctx_free(ctx);
}

static void test_llama_hf_llama_tied(void **st) {
    (void)st;
    parity("llama_tied", FC_F32, "llama");
}

static void test_llama_hf_llama3_sharded(void **st) {
    (void)st;
    parity("llama3_sharded", FC_BF16, "llama");
}

static void test_llama_hf_qwen2(void **st) {
    (void)st;
    parity("qwen2", FC_F32, "qwen2");
}

static void test_llama_hf_mistral(void **st) {
    (void)st;
    parity("mistral", FC_F16, NULL);
}

/* trainable: f32 weights become parameters, and a step's backward runs. */
static void test_llama_hf_trainable(void **st) {
    (void)st;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama_load_opts o = {.trainable = true};
    fc_llama *m = load_hf(ctx, "qwen2", &o);
    const fc_llama_config *c = fc_llama_get_config(m);
    assert_int_equal(c->arch, FC_LLAMA_ARCH_QWEN2);
    assert_true(c->tied_output);
    /* embed, final norm, 2 x (9 weights + 3 biases) */
    assert_int_equal(fc_llama_params(m, NULL, 0), 2 + 2 * 12);
    int32_t ids[5] = {1, 2, 3, 4, 5}, next[5] = {2, 3, 4, 5, 6};
    fc_tensor *x = fc_tensor_from_data(ctx, FC_I32, (int64_t[]){1, 5}, 2, ids);
    fc_tensor *t = fc_tensor_from_data(ctx, FC_I64, (int64_t[]){5}, 1,
                                       (int64_t[]){next[0], next[1], next[2], next[3], next[4]});
    fc_tensor *y = fc_llama_forward(ctx, m, x);
    fc_tensor *flat = fc_reshape(ctx, y, (int64_t[]){5, c->vocab}, 2);
    fc_tensor *loss = fc_cross_entropy(ctx, flat, t, NULL);
    assert_non_null(loss);
    assert_int_equal(fc_backward(ctx, loss), FC_OK);
    fc_tensor *b = fc_llama_tensor(m, "blk.0.attn_q.bias");
    assert_non_null(fc_grad(b));
    fc_release(loss);
    fc_release(flat);
    fc_release(y);
    fc_release(t);
    fc_release(x);
    fc_llama_free(m);
    fc_ctx_free(ctx);
}

/* GGUF side: Llama 3.1's rope_freqs.weight (read above through the
 * converted checkpoint) must be f32 [rope_dims / 2]; a scaling type other
 * than none / linear is FC_ERR_UNSUPPORTED naming it. */
static void test_llama_hf_gguf_variants(void **st) {
    (void)st;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = load_hf(ctx, "llama3_sharded", NULL);
    assert_true(fc_llama_get_config(m)->rope_freqs);
    fc_tensor *ff = fc_llama_tensor(m, "rope_freqs.weight");
    assert_non_null(ff);
    /* head 8: frequencies 1, 0.1, 0.01, 0.001 against wavelengths 16 and
     * 64: kept, blended, divided by 8, divided by 8 */
    const float *f = fc_tensor_data(ff);
    assert_float_equal(f[0], 1.0, 0);
    assert_true(f[1] > 1.0 && f[1] < 8.0);
    assert_float_equal(f[2], 8.0, 0);
    assert_float_equal(f[3], 8.0, 0);
    char path[512];
    tmp_path(path, sizeof path, "variant.gguf");
    fc_gguf_kv extra[1] = {
        {.key = "llama.rope.scaling.type", .type = FC_GGUF_STRING, .data = "yarn"}};
    fc_llama_save_opts so = fc_llama_save_opts_default();
    so.kvs = extra;
    so.n_kvs = 1;
    assert_int_equal(fc_llama_save(ctx, m, path, &so), FC_OK);
    fc_llama *g = NULL;
    assert_int_equal(fc_llama_load(ctx, path, NULL, &g), FC_ERR_UNSUPPORTED);
    assert_non_null(strstr(fc_ctx_error(ctx), "llama.rope.scaling.type 'yarn' is not supported"));
    assert_null(g);
    fc_ctx_clear_error(ctx);
    unlink(path);
    fc_llama_free(m);
    fc_ctx_free(ctx);
}

/* The composed rope with per-pair factors (Llama 3.1's) against the fused
 * op: factors of 1 give the fused op's rotation in both pairings (partial
 * dims, an offset, a scale), factors of 2 the fused op at half the scale. */
static void test_llama_hf_rope_factors(void **st) {
    (void)st;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    float xs[2 * 5 * 3 * 8];
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++)
        xs[i] = (float)cos(0.37 * (double)i);
    fc_tensor *x = fc_tensor_from_data(ctx, FC_F32, (int64_t[]){2, 5, 3, 8}, 4, xs);
    static const float ones[3] = {1, 1, 1}, twos[3] = {2, 2, 2};
    for (int mode = 0; mode < FC_ROPE_MODE_COUNT; mode++)
        for (int k = 0; k < 2; k++) {
            fc_tensor *a = fc__llama_rope_factors(ctx, x, (fc_rope_mode)mode, 6, 500.0, 0.5,
                                                  k ? twos : ones, 3);
            fc_tensor *b =
                fc__llama_rope_mode(ctx, x, (fc_rope_mode)mode, 6, 500.0, k ? 0.25 : 0.5, 3);
            assert_non_null(a);
            assert_non_null(b);
            const float *pa = fc_tensor_data(a), *pb = fc_tensor_data(b);
            for (int64_t i = 0; i < fc_tensor_numel(a); i++)
                assert_float_equal(pa[i], pb[i], 1e-6);
            fc_release(a);
            fc_release(b);
        }
    fc_release(x);
    fc_ctx_free(ctx);
}

/* fc_llama_new over the table: qwen2 gets (zero) biases, a rotate-half
 * llama is written with permuted Q/K rows; both read back as GGUF with
 * the same logits. Fields out of range are named. */
static void test_llama_hf_new_archs(void **st) {
    (void)st;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    const struct {
        fc_llama_arch arch;
        fc_rope_mode mode;
        int64_t per_layer;
    } cases[] = {{FC_LLAMA_ARCH_QWEN2, FC_ROPE_NEOX, 12}, {FC_LLAMA_ARCH_LLAMA, FC_ROPE_NEOX, 9}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        fc_llama_config c = {.vocab = 16,
                             .dim = 16,
                             .n_heads = 4,
                             .n_kv_heads = 2,
                             .n_layers = 2,
                             .ff_dim = 24,
                             .context = 16,
                             .arch = cases[k].arch,
                             .rope_mode = cases[k].mode};
        fc_llama *m = NULL;
        assert_int_equal(fc_llama_new(ctx, &c, &m), FC_OK);
        assert_int_equal(fc_llama_tensor_count(m), 2 * cases[k].per_layer + 3);
        int32_t ids[6] = {1, 5, 9, 2, 14, 7};
        fc_tensor *t = fc_tensor_from_data(ctx, FC_I32, (int64_t[]){1, 6}, 2, ids);
        fc_no_grad_begin(ctx);
        fc_tensor *a = fc_llama_forward(ctx, m, t);
        char path[512];
        tmp_path(path, sizeof path, "new.gguf");
        assert_int_equal(fc_llama_save(ctx, m, path, NULL), FC_OK);
        fc_llama *g = NULL;
        assert_int_equal(fc_llama_load(ctx, path, NULL, &g), FC_OK);
        assert_int_equal(fc_llama_get_config(g)->arch, cases[k].arch);
        fc_tensor *b = fc_llama_forward(ctx, g, t);
        fc_no_grad_end(ctx);
        assert_non_null(a);
        assert_non_null(b);
        const float *pa = fc_tensor_data(a), *pb = fc_tensor_data(b);
        double worst = 0, big = 0;
        for (int64_t i = 0; i < fc_tensor_numel(a); i++) {
            worst = fmax(worst, fabs((double)pa[i] - pb[i]));
            big = fmax(big, fabs((double)pa[i]));
        }
        assert_true(worst <= 1e-6 * big);
        fc_release(a);
        fc_release(b);
        fc_release(t);
        fc_llama_free(g);
        fc_llama_free(m);
        unlink(path);
    }
    fc_llama_config bad = {.vocab = 16,
                           .dim = 16,
                           .n_heads = 4,
                           .n_layers = 1,
                           .ff_dim = 8,
                           .context = 8,
                           .arch = FC_LLAMA_ARCH_COUNT};
    fc_llama *m = NULL;
    assert_int_equal(fc_llama_new(ctx, &bad, &m), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "arch = 3"));
    fc_ctx_clear_error(ctx);
    bad.arch = FC_LLAMA_ARCH_LLAMA;
    bad.rope_freqs = true;
    assert_int_equal(fc_llama_new(ctx, &bad, &m), FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(ctx);
    fc_ctx_free(ctx);
}

/* logits of ids under m (no grad), copied out into a new buffer. */
static float *run(fc_ctx *ctx, fc_llama *m, const int32_t *ids, int64_t n, int64_t *count) {
    fc_tensor *t = fc_tensor_from_data(ctx, FC_I32, (int64_t[]){n}, 1, ids);
    fc_no_grad_begin(ctx);
    fc_tensor *y = fc_llama_forward(ctx, m, t);
    fc_no_grad_end(ctx);
    if (!y) fprintf(stderr, "forward: %s\n", fc_ctx_error(ctx));
    assert_non_null(y);
    *count = fc_tensor_numel(y);
    float *out = malloc(sizeof *out * (size_t)*count);
    assert_int_equal(fc_tensor_copy_out(out, sizeof *out * (size_t)*count, y), FC_OK);
    fc_release(y);
    fc_release(t);
    return out;
}

static double max_rel(const float *a, const float *b, int64_t n) {
    double worst = 0, big = 0;
    for (int64_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)a[i] - b[i]));
        big = fmax(big, fabs((double)a[i]));
    }
    return worst / big;
}

/* A PEFT adapter of q and k on the Hugging Face model (rows as PEFT has
 * them) means the same on its GGUF (rows permuted): loaded onto the GGUF,
 * and merged into a GGUF, the logits are the adapted checkpoint's. */
static void test_llama_hf_lora_row_order(void **st) {
    (void)st;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = load_hf(ctx, "llama_tied", NULL);
    fc_lora_config lc = {.rank = 2, .alpha = 4, .targets = FC_LORA_Q | FC_LORA_K};
    fc_lora *l = NULL;
    assert_int_equal(fc_lora_new(ctx, m, &lc, &l), FC_OK);
    fc_tensor *p[16];
    int64_t np = fc_lora_params(l, p, 16);
    assert_int_equal(np, 8);
    for (int64_t i = 1; i < np; i += 2) { /* B starts at zero: give it values */
        float *b = fc_tensor_data_mut(p[i]);
        assert_non_null(b);
        for (int64_t k = 0; k < fc_tensor_numel(p[i]); k++)
            b[k] = (float)sin(0.7 * (double)(k + 13 * i));
    }
    static const int32_t ids[8] = {3, 17, 42, 5, 9, 31, 0, 11};
    int64_t n = 0;
    float *hf = run(ctx, m, ids, 8, &n);
    char ad[512], base[512], merged[512];
    tmp_path(ad, sizeof ad, "adapter.safetensors");
    tmp_path(base, sizeof base, "base.gguf");
    tmp_path(merged, sizeof merged, "merged.gguf");
    assert_int_equal(fc_lora_save(ctx, l, ad), FC_OK);
    assert_int_equal(fc_lora_merge_save(ctx, l, merged, NULL), FC_OK);
    assert_int_equal(fc_llama_save(ctx, m, base, NULL), FC_OK);
    fc_lora_free(l);
    fc_llama_free(m);

    fc_llama *g = NULL;
    assert_int_equal(fc_llama_load(ctx, base, NULL, &g), FC_OK);
    assert_int_equal(fc_lora_load(ctx, g, ad, &l), FC_OK);
    float *gg = run(ctx, g, ids, 8, &n);
    double rel = max_rel(hf, gg, n);
    printf("adapter on the GGUF: %.3g\n", rel);
    assert_true(rel <= REL_TOL);
    fc_lora_free(l);
    fc_llama_free(g);
    free(gg);

    assert_int_equal(fc_llama_load(ctx, merged, NULL, &g), FC_OK);
    gg = run(ctx, g, ids, 8, &n);
    rel = max_rel(hf, gg, n);
    printf("merged GGUF: %.3g\n", rel);
    assert_true(rel <= REL_TOL);
    fc_llama_free(g);
    free(gg);

    /* and back onto the Hugging Face model, rows as they are */
    m = load_hf(ctx, "llama_tied", NULL);
    assert_int_equal(fc_lora_load(ctx, m, ad, &l), FC_OK);
    gg = run(ctx, m, ids, 8, &n);
    assert_true(max_rel(hf, gg, n) <= 1e-6);
    fc_lora_free(l);
    fc_llama_free(m);
    free(gg);
    free(hf);
    unlink(ad);
    unlink(base);
    unlink(merged);
    fc_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_hf_llama_tied),
        cmocka_unit_test(test_llama_hf_llama3_sharded),
        cmocka_unit_test(test_llama_hf_qwen2),
        cmocka_unit_test(test_llama_hf_mistral),
        cmocka_unit_test(test_llama_hf_trainable),
        cmocka_unit_test(test_llama_hf_gguf_variants),
        cmocka_unit_test(test_llama_hf_rope_factors),
        cmocka_unit_test(test_llama_hf_new_archs),
        cmocka_unit_test(test_llama_hf_lora_row_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
