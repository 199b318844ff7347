/* SPDX-License-Identifier: MIT */
/* test_lora_bad.c - bad input to the adapter API: configs out of range, a
 * second adapter, NULLs, a base without a targeted weight, and adapter
 * files whose names, shapes, dtypes, pairing or metadata do not fit the
 * model, truncated or mutated files. Each gets its own status and a
 * message naming the value (fc_ctx_error), leaves the model without an
 * adapter and *out NULL, and never crashes. The out-of-memory sweeps are
 * in test_lora_oom.c.
 *
 * The base is the tiny fixture (2 layers, dim 64, 4 heads, 2 kv heads: q
 * [64, 64], k and v [32, 64], ff 128). Bad files are written with the safetensors
 * writer from descriptors over a static buffer. */
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
#include "llama/lora_internal.h" /* to take a weight away from a loaded model */

#define DATA FUCINA_TEST_DATA_DIR
static const fc_ctx_opts ONE_THREAD = {.threads = 1};

static fc_llama *load(fc_ctx *ctx, const char *path) {
    fc_llama *m = NULL;
    fc_status st = fc_llama_load(ctx, path, NULL, &m);
    if (st) fprintf(stderr, "load %s: %s\n", path, fc_ctx_error(ctx));
    assert_int_equal(st, FC_OK);
    return m;
}

static void tmp_path(char *buf, size_t cap, const char *tag) {
    snprintf(buf, cap, "%s/tests/test_lora_bad_%ld_%s", FUCINA_BINARY_DIR, (long)getpid(), tag);
}

/* The call failed with st, the message holds every one of the strings, and
 * the model can still take an adapter (it has none). */
static void expect(fc_ctx *ctx, fc_llama *m, fc_status got, fc_status st, const char *const *has,
                   int n) {
    if (got != st) fprintf(stderr, "got %d (%s), want %d\n", got, fc_ctx_error(ctx), st);
    assert_int_equal(got, st);
    assert_int_equal(fc_ctx_status(ctx), st);
    for (int i = 0; i < n; i++) {
        if (!strstr(fc_ctx_error(ctx), has[i]))
            fprintf(stderr, "'%s' not in '%s'\n", has[i], fc_ctx_error(ctx));
        assert_non_null(strstr(fc_ctx_error(ctx), has[i]));
    }
    fc_ctx_clear_error(ctx);
    if (m) {
        fc_lora_config c = fc_lora_config_default();
        fc_lora *l = NULL;
        assert_int_equal(fc_lora_new(ctx, m, &c, &l), FC_OK);
        fc_lora_free(l);
    }
}
#define EXPECT(ctx, m, got, st, ...)                                                               \
    expect(ctx, m, got, st, (const char *const[]){__VA_ARGS__},                                    \
           (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)))

/* ---- configs ---------------------------------------------------------------------- */

static fc_status try_new(fc_ctx *ctx, fc_llama *m, int64_t rank, double alpha, double dropout,
                         unsigned targets) {
    fc_lora_config c = {.rank = rank, .alpha = alpha, .dropout = dropout, .targets = targets};
    fc_lora *l = (fc_lora *)&c; /* must come back NULL */
    fc_status st = fc_lora_new(ctx, m, &c, &l);
    if (st) assert_null(l);
    if (!st) fc_lora_free(l);
    return st;
}

static void test_lora_bad_configs(void **s) {
    (void)s;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = load(ctx, DATA "/llama/tiny_f32.gguf");
    const fc_status INV = FC_ERR_INVALID_ARG;
    EXPECT(ctx, m, try_new(ctx, m, 0, 16, 0, FC_LORA_ALL), INV, "fc_lora_new", "rank 0");
    EXPECT(ctx, m, try_new(ctx, m, -3, 16, 0, FC_LORA_ALL), INV, "rank -3");
    /* k_proj is [32, 64]: rank 33 passes its out size; q alone takes 64 */
    EXPECT(ctx, m, try_new(ctx, m, 33, 16, 0, FC_LORA_ALL), INV, "rank 33", "self_attn.k_proj",
           "[32, 64]");
    assert_int_equal(try_new(ctx, m, 64, 16, 0, FC_LORA_Q), FC_OK);
    EXPECT(ctx, m, try_new(ctx, m, 65, 16, 0, FC_LORA_Q), INV, "rank 65", "q_proj");
    EXPECT(ctx, m, try_new(ctx, m, 8, 0, 0, FC_LORA_ALL), INV, "alpha 0");
    EXPECT(ctx, m, try_new(ctx, m, 8, -2, 0, FC_LORA_ALL), INV, "alpha -2");
    EXPECT(ctx, m, try_new(ctx, m, 8, NAN, 0, FC_LORA_ALL), INV, "alpha nan");
    EXPECT(ctx, m, try_new(ctx, m, 8, INFINITY, 0, FC_LORA_ALL), INV, "alpha inf");
    /* finite, but inf as the f32 scale: NaN logits from a fresh adapter */
    EXPECT(ctx, m, try_new(ctx, m, 8, 1e300, 0, FC_LORA_ALL), INV, "alpha 1e+300");
    EXPECT(ctx, m, try_new(ctx, m, 8, 16, -0.25, FC_LORA_ALL), INV, "dropout -0.25");
    EXPECT(ctx, m, try_new(ctx, m, 8, 16, 1.0, FC_LORA_ALL), INV, "dropout 1 ");
    EXPECT(ctx, m, try_new(ctx, m, 8, 16, NAN, FC_LORA_ALL), INV, "dropout nan");
    EXPECT(ctx, m, try_new(ctx, m, 8, 16, 0, 0), INV, "targets 0x0");
    EXPECT(ctx, m, try_new(ctx, m, 8, 16, 0, 0x80), INV, "targets 0x80");
    EXPECT(ctx, m, try_new(ctx, m, 8, 16, 0, FC_LORA_Q | 0x100), INV, "targets 0x101");
    /* a second adapter on the same model */
    fc_lora_config c = fc_lora_config_default();
    fc_lora *l = NULL, *l2 = (fc_lora *)&c;
    assert_int_equal(fc_lora_new(ctx, m, &c, &l), FC_OK);
    EXPECT(ctx, NULL, fc_lora_new(ctx, m, &c, &l2), INV, "already has an adapter", "rank 8");
    assert_null(l2);
    fc_lora_free(l);
    /* NULLs */
    assert_int_equal(fc_lora_new(NULL, m, &c, &l), FC_ERR_NULL_ARG);
    assert_null(l);
    EXPECT(ctx, m, fc_lora_new(ctx, NULL, &c, &l), FC_ERR_NULL_ARG, "fc_lora_new");
    EXPECT(ctx, m, fc_lora_new(ctx, m, NULL, &l), FC_ERR_NULL_ARG, "fc_lora_new");
    EXPECT(ctx, m, fc_lora_new(ctx, m, &c, NULL), FC_ERR_NULL_ARG, "fc_lora_new");
    fc_lora_free(NULL);
    fc_lora_set_training(NULL, true);
    assert_null(fc_lora_get_config(NULL));
    assert_null(fc_lora_model(NULL));
    assert_int_equal(fc_lora_params(NULL, NULL, 0), 0);
    assert_null(fc_lora_param_name(NULL, 0));
    assert_int_equal(fc_lora_save(NULL, NULL, "x"), FC_ERR_NULL_ARG);
    EXPECT(ctx, m, fc_lora_save(ctx, NULL, "x"), FC_ERR_NULL_ARG, "fc_lora_save");
    EXPECT(ctx, m, fc_lora_load(ctx, m, NULL, &l), FC_ERR_NULL_ARG, "fc_lora_load");
    EXPECT(ctx, m, fc_lora_load(ctx, NULL, "x", &l), FC_ERR_NULL_ARG, "fc_lora_load");
    EXPECT(ctx, m, fc_lora_load(ctx, m, "x", NULL), FC_ERR_NULL_ARG, "fc_lora_load");
    assert_int_equal(fc_lora_merge_save(NULL, NULL, "x", NULL), FC_ERR_NULL_ARG);
    EXPECT(ctx, m, fc_lora_merge_save(ctx, NULL, "x", NULL), FC_ERR_NULL_ARG, "fc_lora_merge_save");
    /* a base without a targeted weight (a loaded model always has them
     * all: fc_llama_load refuses a file without one, test_llama_bad.c;
     * this takes one away from the model to reach the adapter's own check) */
    llama_layer *L = &m->layers[1];
    fc_tensor *keep = L->w_up;
    L->w_up = NULL;
    EXPECT(ctx, NULL, try_new(ctx, m, 4, 8, 0, FC_LORA_MLP), FC_ERR_FORMAT, "layer 1",
           "mlp.up_proj");
    assert_int_equal(try_new(ctx, m, 4, 8, 0, FC_LORA_ATTN), FC_OK); /* not targeted: fine */
    L->w_up = keep;
    fc_llama_free(m);
    free_ctx(ctx);
}

/* Writing, saving and merging into a path that cannot be written. */
static void test_lora_bad_write_paths(void **s) {
    (void)s;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = load(ctx, DATA "/llama/tiny_f32.gguf");
    fc_lora_config c = fc_lora_config_default();
    fc_lora *l = NULL;
    assert_int_equal(fc_lora_new(ctx, m, &c, &l), FC_OK);
    const char *bad = "/nonexistent-dir/x/adapter.safetensors";
    assert_int_equal(fc_lora_save(ctx, l, bad), FC_ERR_IO);
    assert_non_null(strstr(fc_ctx_error(ctx), "nonexistent-dir"));
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_lora_merge_save(ctx, l, bad, NULL), FC_ERR_IO);
    fc_ctx_clear_error(ctx);
    fc_llama_save_opts o = fc_llama_save_opts_default();
    o.n_kvs = -1;
    assert_int_equal(fc_lora_merge_save(ctx, l, "unused.gguf", &o), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "fc_lora_merge_save"));
    assert_non_null(strstr(fc_ctx_error(ctx), "-1"));
    fc_ctx_clear_error(ctx);
    o = fc_llama_save_opts_default();
    o.dtype = FC_Q4_K; /* rows of 64 are not blocks of 256, and no fallback */
    assert_int_equal(fc_lora_merge_save(ctx, l, "unused.gguf", &o), FC_ERR_INVALID_SHAPE);
    assert_non_null(strstr(fc_ctx_error(ctx), "fc_lora_merge_save"));
    fc_ctx_clear_error(ctx);
    fc_lora *l2 = (fc_lora *)&c;
    EXPECT(ctx, NULL, fc_lora_load(ctx, m, "/nonexistent-dir/a.safetensors", &l2),
           FC_ERR_INVALID_ARG, "already has an adapter");
    assert_null(l2);
    fc_lora_free(l);
    EXPECT(ctx, m, fc_lora_load(ctx, m, "/nonexistent-dir/a.safetensors", &l2), FC_ERR_IO,
           "fc_lora_load", "nonexistent-dir");
    assert_null(l2);
    fc_llama_free(m);
    free_ctx(ctx);
}

/* ---- adapter files ------------------------------------------------------------------ */

static float VALUES[64 * 128];

typedef struct file_spec {
    fc_io_tensor t[32];
    char names[32][96];
    int n;
    const char *keys[8], *vals[8];
    int n_meta;
} file_spec;

static void add(file_spec *f, const char *name, fc_dtype dt, int64_t d0, int64_t d1) {
    fc_io_tensor *t = &f->t[f->n];
    snprintf(f->names[f->n], sizeof f->names[f->n], "%s", name);
    *t = (fc_io_tensor){.name = f->names[f->n], .dtype = dt, .rank = d1 ? 2 : 1, .data = VALUES};
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->nbytes = (uint64_t)(d0 * (d1 ? d1 : 1)) * (uint64_t)fc_dtype_size(dt);
    f->n++;
}

/* layer N's module, A [r, in] and B [out, r] in f32 */
static void add_pair(file_spec *f, int layer, const char *mod, int64_t r, int64_t out, int64_t in) {
    char a[96], b[96];
    snprintf(a, sizeof a, "base_model.model.model.layers.%d.%s.lora_A.weight", layer, mod);
    snprintf(b, sizeof b, "base_model.model.model.layers.%d.%s.lora_B.weight", layer, mod);
    add(f, a, FC_F32, r, in);
    add(f, b, FC_F32, out, r);
}

static void meta(file_spec *f, const char *k, const char *v) {
    f->keys[f->n_meta] = k;
    f->vals[f->n_meta++] = v;
}

/* A valid file: q and v of both layers, rank 2. */
static void valid(file_spec *f) {
    memset(f, 0, sizeof *f);
    for (int layer = 0; layer < 2; layer++) {
        add_pair(f, layer, "self_attn.q_proj", 2, 64, 64);
        add_pair(f, layer, "self_attn.v_proj", 2, 32, 64);
    }
    meta(f, "format", "pt");
}

static void write_spec(const file_spec *f, const char *path) {
    assert_int_equal(fc_safetensors_write(path, f->t, f->n, f->keys, f->vals, f->n_meta, NULL),
                     FC_OK);
}

static fc_status try_load(fc_ctx *ctx, fc_llama *m, const file_spec *f, const char *path) {
    write_spec(f, path);
    fc_lora *l = (fc_lora *)f;
    fc_status st = fc_lora_load(ctx, m, path, &l);
    if (st) assert_null(l);
    if (!st) fc_lora_free(l);
    return st;
}

static void test_lora_bad_files(void **s) {
    (void)s;
    for (size_t i = 0; i < sizeof VALUES / sizeof VALUES[0]; i++)
        VALUES[i] = (float)((int)(i % 17) - 8) / 64.0f;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = load(ctx, DATA "/llama/tiny_f32.gguf");
    char path[512];
    tmp_path(path, sizeof path, "bad.safetensors");
    file_spec f;
    const fc_status FMT = FC_ERR_FORMAT, SHP = FC_ERR_SHAPE_MISMATCH;

    valid(&f);
    assert_int_equal(try_load(ctx, m, &f, path), FC_OK);
    /* shapes */
    valid(&f);
    f.t[0].shape[1] = 63;
    f.t[0].nbytes = 2 * 63 * 4;
    EXPECT(ctx, m, try_load(ctx, m, &f, path), SHP, "layers.0.self_attn.q_proj.lora_A.weight",
           "[2, 63]", "[2, 64]");
    valid(&f);
    f.t[3].shape[1] = 3; /* v B [32, 3] beside rank 2 */
    f.t[3].nbytes = 32 * 3 * 4;
    EXPECT(ctx, m, try_load(ctx, m, &f, path), SHP, "v_proj.lora_B", "[32, 3]", "[32, 2]");
    valid(&f);
    f.t[1].rank = 1; /* q B [64] */
    f.t[1].nbytes = 64 * 4;
    EXPECT(ctx, m, try_load(ctx, m, &f, path), SHP, "q_proj.lora_B", "[64]", "[64, 2]");
    valid(&f);
    f.t[0].rank = 1; /* the first A [2]: no rank to expect yet */
    f.t[0].nbytes = 2 * 4;
    EXPECT(ctx, m, try_load(ctx, m, &f, path), SHP, "q_proj.lora_A", "[2]", "[rank, 64]");
    /* rank from the file larger than k_proj's out */
    memset(&f, 0, sizeof f);
    for (int layer = 0; layer < 2; layer++)
        add_pair(&f, layer, "self_attn.k_proj", 40, 32, 64);
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FC_ERR_INVALID_ARG, "rank 40", "k_proj");
    /* names */
    valid(&f);
    snprintf(f.names[4], sizeof f.names[4],
             "base_model.model.model.layers.1.self_attn.x_proj.lora_A.weight");
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FMT, "x_proj", "not a LoRA tensor");
    valid(&f);
    snprintf(f.names[0], sizeof f.names[0], "model.layers.0.self_attn.q_proj.lora_A.weight");
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FMT, "'model.layers.0.self_attn.q_proj");
    valid(&f);
    snprintf(f.names[0], sizeof f.names[0],
             "base_model.model.model.layers.00.self_attn.q_proj.lora_A.weight");
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FMT, "layers.00.");
    valid(&f);
    snprintf(f.names[1], sizeof f.names[1],
             "base_model.model.model.layers.0.self_attn.q_proj.lora_B.bias");
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FMT, "lora_B.bias");
    valid(&f);
    add_pair(&f, 2, "self_attn.q_proj", 2, 64, 64);
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FMT, "layer 2", "the model has 2");
    valid(&f);
    add_pair(&f, 99999999, "self_attn.q_proj", 2, 64, 64);
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FMT, "layer 99999999");
    /* pairing and completeness */
    valid(&f);
    f.n = 7; /* layer 1's v_proj lora_B dropped */
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FMT, "layer 1", "v_proj has lora_A but no lora_B");
    valid(&f);
    f.t[2] = f.t[7]; /* layer 0's v_proj lora_A dropped, in its place layer 1's v B */
    f.n = 7;
    snprintf(f.names[2], sizeof f.names[2], "%s", f.names[7]);
    f.t[2].name = f.names[2];
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FMT, "layer 0", "v_proj has lora_B but no lora_A");
    valid(&f);
    f.n = 6; /* layer 1's v_proj missing altogether */
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FMT, "layer 1 has no self_attn.v_proj adapter");
    memset(&f, 0, sizeof f);
    meta(&f, "format", "pt");
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FMT, "no LoRA tensors");
    /* dtypes */
    valid(&f);
    f.t[5].dtype = FC_F64;
    f.t[5].nbytes *= 2;
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FC_ERR_DTYPE, "layers.1.self_attn.q_proj.lora_B",
           "f64");
    valid(&f);
    f.t[0].dtype = FC_I32;
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FC_ERR_DTYPE, "i32");
    /* metadata against the tensors, and out of range */
    valid(&f);
    meta(&f, "r", "4");
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FMT, "r = 4", "rank 2");
    valid(&f);
    meta(&f, "r", "two");
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FMT, "'two'");
    valid(&f);
    meta(&f, "target_modules", "[\"q_proj\"]");
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FMT, "[\"q_proj\"]", "[\"q_proj\",\"v_proj\"]");
    valid(&f);
    meta(&f, "target_modules", "[\"q_proj\", \"lm_head\"]");
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FMT, "lm_head");
    valid(&f);
    meta(&f, "lora_alpha", "sixteen");
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FMT, "lora_alpha 'sixteen'");
    valid(&f);
    meta(&f, "lora_alpha", "-1");
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FC_ERR_INVALID_ARG, "alpha -1");
    valid(&f);
    meta(&f, "lora_dropout", "1.5");
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FC_ERR_INVALID_ARG, "dropout 1.5");
    valid(&f);
    meta(&f, "lora_dropout", "nan");
    EXPECT(ctx, m, try_load(ctx, m, &f, path), FC_ERR_INVALID_ARG, "dropout nan");
    /* consistent metadata is taken */
    valid(&f);
    meta(&f, "r", "2");
    meta(&f, "lora_alpha", "3.5");
    meta(&f, "lora_dropout", "0.25");
    meta(&f, "target_modules", "[\"v_proj\", \"q_proj\"]");
    write_spec(&f, path);
    fc_lora *l = NULL;
    assert_int_equal(fc_lora_load(ctx, m, path, &l), FC_OK);
    assert_true(fc_lora_get_config(l)->alpha == 3.5 && fc_lora_get_config(l)->dropout == 0.25);
    fc_lora_free(l);
    /* a base without a targeted weight */
    llama_layer *L = &m->layers[0];
    fc_tensor *keep = L->wv;
    L->wv = NULL;
    valid(&f);
    EXPECT(ctx, NULL, try_load(ctx, m, &f, path), FMT, "layer 0", "v_proj");
    L->wv = keep;
    unlink(path);
    fc_llama_free(m);
    free_ctx(ctx);
}

/* Truncated and byte-mutated copies of a valid adapter file: an error
 * (the reader's, or ours), never a crash, a leak or an adapter. */
static void test_lora_bad_damaged_files(void **s) {
    (void)s;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = load(ctx, DATA "/llama/tiny_f32.gguf");
    fc_lora_config c = {.rank = 2, .alpha = 4, .dropout = 0, .targets = FC_LORA_Q | FC_LORA_V};
    fc_lora *l = NULL;
    assert_int_equal(fc_lora_new(ctx, m, &c, &l), FC_OK);
    char good[512], path[512];
    tmp_path(good, sizeof good, "good.safetensors");
    tmp_path(path, sizeof path, "damaged.safetensors");
    assert_int_equal(fc_lora_save(ctx, l, good), FC_OK);
    fc_lora_free(l);
    FILE *fp = fopen(good, "rb");
    assert_non_null(fp);
    static unsigned char buf[16384], mut[16384];
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    assert_true(n > 1000 && n < sizeof buf);
    /* truncated: the reader's FC_ERR_FORMAT naming the file */
    size_t cuts[] = {0, 7, 8, 100, n / 2, n - 1};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        fp = fopen(path, "wb");
        fwrite(buf, 1, cuts[k], fp);
        fclose(fp);
        l = (fc_lora *)&c;
        fc_status st = fc_lora_load(ctx, m, path, &l);
        assert_int_equal(st, FC_ERR_FORMAT);
        assert_null(l);
        assert_non_null(strstr(fc_ctx_error(ctx), "fc_lora_load"));
        fc_ctx_clear_error(ctx);
    }
    /* mutated: a few bytes of the header or data changed */
    uint64_t seed = 12345;
    int loaded = 0;
    for (int k = 0; k < 150; k++) {
        memcpy(mut, buf, n);
        for (int b = 0; b < 1 + k % 3; b++) {
            uint64_t r = fc_test_splitmix64(&seed);
            /* mostly in the header (the first ~1000 bytes), where names and shapes are */
            size_t at = (size_t)(r % (k % 4 ? 1000 : n));
            mut[at] = (unsigned char)(r >> 32);
        }
        fp = fopen(path, "wb");
        fwrite(mut, 1, n, fp);
        fclose(fp);
        l = NULL;
        fc_status st = fc_lora_load(ctx, m, path, &l);
        if (!st) {
            loaded++;
            fc_lora_free(l);
        } else {
            assert_null(l);
            assert_true(strlen(fc_ctx_error(ctx)) > 0);
        }
        fc_ctx_clear_error(ctx);
    }
    printf("mutated adapter files: %d of 150 still loaded (changed data bytes)\n", loaded);
    unlink(good);
    unlink(path);
    fc_llama_free(m);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lora_bad_configs),
        cmocka_unit_test(test_lora_bad_write_paths),
        cmocka_unit_test(test_lora_bad_files),
        cmocka_unit_test(test_lora_bad_damaged_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
