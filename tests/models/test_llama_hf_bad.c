/* SPDX-License-Identifier: MIT */
/* test_llama_hf_bad.c - Hugging Face checkpoints fc_llama_load_hf must
 * refuse, each with its own status and a message naming the key, tensor
 * or file, never a crash or a leak: config.json with contradictory keys
 * (heads that do not divide, a vocab size the embedding disagrees with,
 * sizes the tensors disagree with), unknown keys, model types, rope
 * scaling types and variants (FC_ERR_UNSUPPORTED naming them), mistyped
 * or missing keys, broken JSON; files missing; shards whose index names a
 * tensor they lack, that hold one the index does not list, that miss one
 * the model needs, or that overlap. Each case is a scratch directory
 * holding an edited config.json beside links to (or rewritten copies of)
 * the fixtures' weights (tests/data/hf). Then the OOM sweep of loading
 * the sharded checkpoint and running it. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fc_test_data.h"
#include "fucina/llama.h"
#include "oom_sweep.h"

#define DATA FUCINA_TEST_DATA_DIR
static const fc_ctx_opts ONE_THREAD = {.threads = 1};

static void tmp_path(char *buf, size_t cap, const char *tag) {
    snprintf(buf, cap, "%s/tests/test_llama_hf_bad_%ld_%s", FUCINA_BINARY_DIR, (long)getpid(), tag);
}

/* ---- bad checkpoints -------------------------------------------------------------- */

static char *slurp(const char *path) {
    size_t n = 0;
    char *s = fc_test_read_file("/", path, &n);
    assert_non_null(s);
    char *z = realloc(s, n + 1);
    assert_non_null(z);
    z[n] = 0;
    return z;
}

/* text with the first `from` replaced by `to` (a new string). */
static char *replace(const char *text, const char *from, const char *to) {
    const char *p = strstr(text, from);
    if (!p) fprintf(stderr, "replace: '%s' not found\n", from);
    assert_non_null(p);
    size_t a = (size_t)(p - text), nf = strlen(from), nt = strlen(to), rest = strlen(p + nf);
    char *s = malloc(a + nt + rest + 1);
    memcpy(s, text, a);
    memcpy(s + a, to, nt);
    memcpy(s + a + nt, p + nf, rest + 1);
    return s;
}

static void write_text(const char *dir, const char *name, const char *text) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A fresh directory holding config text and links to the fixture's files
 * named in links (NULL-terminated). */
static void make_dir(char *dir, size_t cap, const char *tag, const char *config,
                     const char *fixture, const char *const *links) {
    tmp_path(dir, cap, tag);
    mkdir(dir, 0755);
    char path[600], target[600];
    static const char *const all[] = {"config.json",
                                      "model.safetensors",
                                      "model.safetensors.index.json",
                                      "model-00001-of-00002.safetensors",
                                      "model-00002-of-00002.safetensors",
                                      "model-00003.safetensors"};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, all[i]);
        unlink(path);
    }
    if (config) write_text(dir, "config.json", config);
    for (int i = 0; links && links[i]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, links[i]);
        snprintf(target, sizeof target, "%s/hf/%s/%s", DATA, fixture, links[i]);
        assert_int_equal(symlink(target, path), 0);
    }
}

static void remove_dir(const char *dir) {
    static const char *const all[] = {"config.json",
                                      "model.safetensors",
                                      "model.safetensors.index.json",
                                      "model-00001-of-00002.safetensors",
                                      "model-00002-of-00002.safetensors",
                                      "model-00003.safetensors"};
    char path[600];
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, all[i]);
        unlink(path);
    }
    rmdir(dir);
}

static void expect_load(const char *dir, fc_status want, const char *msg) {
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = (fc_llama *)ctx; /* must be set to NULL */
    fc_status st = fc_llama_load_hf(ctx, dir, NULL, &m);
    if (st != want || (msg && !strstr(fc_ctx_error(ctx), msg)))
        fprintf(stderr, "want %s '%s', got %s '%s'\n", fc_status_name(want), msg ? msg : "",
                fc_status_name(st), fc_ctx_error(ctx));
    assert_int_equal(st, want);
    if (msg) assert_non_null(strstr(fc_ctx_error(ctx), msg));
    if (st) assert_null(m);
    fc_llama_free(m);
    fc_ctx_free(ctx);
}

static const char *const ONE_FILE[] = {"model.safetensors", NULL};

/* The llama_tied fixture with config.json edited (from -> to). */
static void bad_config(const char *from, const char *to, fc_status want, const char *msg) {
    char src[512], dir[512];
    snprintf(src, sizeof src, "%s/hf/llama_tied/config.json", DATA);
    char *text = slurp(src);
    char *edited = replace(text, from, to);
    make_dir(dir, sizeof dir, "cfg", edited, "llama_tied", ONE_FILE);
    expect_load(dir, want, msg);
    remove_dir(dir);
    free(edited);
    free(text);
}

static void test_llama_hf_bad_config(void **st) {
    (void)st;
    bad_config("\"num_attention_heads\": 4", "\"num_attention_heads\": 3", FC_ERR_FORMAT,
               "num_attention_heads = 3 does not divide hidden_size = 32");
    bad_config("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3", FC_ERR_FORMAT,
               "num_key_value_heads = 3 does not divide num_attention_heads = 4");
    bad_config("\"vocab_size\": 48", "\"vocab_size\": 50", FC_ERR_SHAPE_MISMATCH,
               "tensor 'model.embed_tokens.weight' has 48 rows, config.json's vocab_size is 50");
    bad_config("\"intermediate_size\": 48", "\"intermediate_size\": 40", FC_ERR_SHAPE_MISMATCH,
               "tensor 'model.layers.0.mlp.gate_proj.weight' has shape [48,32], config.json "
               "gives [40,32]");
    bad_config("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1", FC_ERR_FORMAT,
               "tensor 'model.layers.1.input_layernorm.weight' is of layer 1, config.json's "
               "num_hidden_layers is 1");
    bad_config("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 3", FC_ERR_FORMAT,
               "tensor 'model.layers.2.input_layernorm.weight' is missing");
    bad_config("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1000000000", FC_ERR_FORMAT,
               "num_hidden_layers = 1000000000 needs more tensors");
    bad_config("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false", FC_ERR_FORMAT,
               "tensor 'lm_head.weight' is missing");
    bad_config("\"hidden_size\": 32", "\"hidden_size\": \"32\"", FC_ERR_FORMAT,
               "'hidden_size' is a string, not an integer");
    bad_config("\"hidden_size\": 32", "\"hidden_size\": 32.5", FC_ERR_FORMAT,
               "'hidden_size' = 32.5 must be an integer");
    bad_config("\"hidden_size\": 32,", "", FC_ERR_FORMAT, "key 'hidden_size' is missing");
    bad_config("\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": -1", FC_ERR_FORMAT,
               "'rms_norm_eps' = -1 must be finite");
    bad_config("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": 1", FC_ERR_FORMAT,
               "'tie_word_embeddings' is a number, not a boolean");
    /* variants: FC_ERR_UNSUPPORTED naming them */
    bad_config("\"model_type\": \"llama\"", "\"model_type\": \"gpt_neox\"", FC_ERR_UNSUPPORTED,
               "model_type 'gpt_neox' is not supported");
    bad_config("\"type\": \"linear\"", "\"type\": \"yarn\"", FC_ERR_UNSUPPORTED,
               "rope_scaling type 'yarn' is not supported");
    bad_config("\"type\": \"linear\"", "\"type\": \"dynamic\"", FC_ERR_UNSUPPORTED,
               "rope_scaling type 'dynamic'");
    bad_config("\"model_type\": \"llama\",",
               "\"model_type\": \"llama\", \"partial_rotary_factor\": 0.5,", FC_ERR_UNSUPPORTED,
               "key 'partial_rotary_factor' is not known");
    bad_config("\"model_type\": \"llama\",", "\"model_type\": \"llama\", \"head_dim\": 16,",
               FC_ERR_UNSUPPORTED, "head_dim = 16 differs");
    bad_config("\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", FC_ERR_UNSUPPORTED,
               "hidden_act 'gelu'");
    bad_config("\"attention_bias\": false", "\"attention_bias\": true", FC_ERR_UNSUPPORTED,
               "attention_bias = true");
    bad_config("\"model_type\": \"llama\",",
               "\"model_type\": \"llama\", \"sliding_window\": 8, "
               "\"use_sliding_window\": true,",
               FC_ERR_UNSUPPORTED, "use_sliding_window = true");
    /* the JSON itself */
    bad_config("\"model_type\"", "\"model_type", FC_ERR_FORMAT, NULL);
    bad_config("{", "[", FC_ERR_FORMAT, NULL);
}

/* A Qwen2 config over a Llama checkpoint: the missing biases are named;
 * a Llama config over Qwen2 weights: the extra ones are refused. */
static void test_llama_hf_bad_arch_mix(void **st) {
    (void)st;
    char src[512], dir[512];
    snprintf(src, sizeof src, "%s/hf/llama_tied/config.json", DATA);
    char *text = slurp(src);
    char *edited = replace(text, "\"model_type\": \"llama\"", "\"model_type\": \"qwen2\"");
    make_dir(dir, sizeof dir, "mix1", edited, "llama_tied", ONE_FILE);
    expect_load(dir, FC_ERR_FORMAT, "tensor 'model.layers.0.self_attn.q_proj.bias' is missing");
    remove_dir(dir);
    free(edited);
    free(text);
    snprintf(src, sizeof src, "%s/hf/qwen2/config.json", DATA);
    text = slurp(src);
    char *e1 = replace(text, "\"model_type\": \"qwen2\"", "\"model_type\": \"llama\"");
    edited = replace(e1, "\"use_sliding_window\": false,", "");
    make_dir(dir, sizeof dir, "mix2", edited, "qwen2", ONE_FILE);
    expect_load(dir, FC_ERR_UNSUPPORTED, "model_type llama has no q/k/v biases");
    remove_dir(dir);
    free(edited);
    free(e1);
    free(text);
}

static void test_llama_hf_bad_files(void **st) {
    (void)st;
    char dir[512], src[512];
    make_dir(dir, sizeof dir, "nocfg", NULL, "llama_tied", ONE_FILE);
    expect_load(dir, FC_ERR_IO, "config.json");
    snprintf(src, sizeof src, "%s/hf/llama_tied/config.json", DATA);
    char *text = slurp(src);
    make_dir(dir, sizeof dir, "noweights", text, "llama_tied", NULL);
    expect_load(dir, FC_ERR_IO, "has neither model.safetensors nor");
    text[strlen(text) / 2] = 0; /* truncated inside the object */
    make_dir(dir, sizeof dir, "truncated", text, "llama_tied", ONE_FILE);
    expect_load(dir, FC_ERR_DATA_LENGTH, "config.json");
    remove_dir(dir);
    free(text);
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = NULL;
    assert_int_equal(fc_llama_load_hf(ctx, NULL, NULL, &m), FC_ERR_NULL_ARG);
    assert_int_equal(fc_llama_load_hf(ctx, DATA, NULL, NULL), FC_ERR_NULL_ARG);
    assert_int_equal(fc_llama_load_hf(NULL, DATA, NULL, &m), FC_ERR_NULL_ARG);
    fc_ctx_free(ctx);
}

/* Writes a shard of the fixture's tensors of shard `from` (all but
 * `drop`, NULL for none), or only `only` when given, to dir/name. */
static void write_shard(const char *dir, const char *name, const char *from, const char *drop,
                        const char *only) {
    char path[600];
    snprintf(path, sizeof path, "%s/hf/llama3_sharded/%s", DATA, from);
    fc_st_file *f = NULL;
    assert_int_equal(fc_safetensors_open(path, NULL, &f), FC_OK);
    fc_io_tensor t[64];
    int64_t n = 0;
    for (int64_t i = 0; i < fc_safetensors_tensor_count(f); i++) {
        fc_io_tensor info;
        assert_int_equal(fc_safetensors_tensor_info(f, i, &info), FC_OK);
        if ((drop && !strcmp(info.name, drop)) || (only && strcmp(info.name, only))) continue;
        t[n++] = info;
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(fc_safetensors_write(path, t, n, NULL, NULL, 0, NULL), FC_OK);
    fc_safetensors_close(f);
}

static void test_llama_hf_bad_shards(void **st) {
    (void)st;
    char dir[512], src[512];
    snprintf(src, sizeof src, "%s/hf/llama3_sharded/config.json", DATA);
    char *config = slurp(src);
    snprintf(src, sizeof src, "%s/hf/llama3_sharded/model.safetensors.index.json", DATA);
    char *index = slurp(src);
    static const char *const shards[] = {"model-00001-of-00002.safetensors",
                                         "model-00002-of-00002.safetensors", NULL};
    static const char S1[] = "model-00001-of-00002.safetensors";
    static const char S2[] = "model-00002-of-00002.safetensors";
    /* which shard holds the final norm (the generator splits in order) */
    const char *np = strstr(index, "\"model.norm.weight\"");
    assert_non_null(np);
    const char *eol = strchr(np, '\n'), *in1 = strstr(np, S1);
    const char *norm_shard = in1 && (!eol || in1 < eol) ? S1 : S2;

    /* the index names a tensor its shard lacks */
    char *ix = replace(index, "\"weight_map\": {",
                       "\"weight_map\": {\n    \"model.layers.0.mlp.extra.weight\": "
                       "\"model-00001-of-00002.safetensors\",");
    make_dir(dir, sizeof dir, "lacks", config, "llama3_sharded", shards);
    write_text(dir, "model.safetensors.index.json", ix);
    expect_load(dir, FC_ERR_FORMAT,
                "weight_map puts tensor 'model.layers.0.mlp.extra.weight' in "
                "'model-00001-of-00002.safetensors', which lacks it");
    free(ix);

    /* a shard has a tensor the index does not list */
    char line[160];
    snprintf(line, sizeof line, "\"model.norm.weight\": \"%s\",", norm_shard);
    char *probe = strstr(index, line);
    if (!probe) { /* the last entry has no comma: drop the one before instead */
        snprintf(line, sizeof line, ",\n    \"model.norm.weight\": \"%s\"", norm_shard);
    }
    ix = replace(index, line, "");
    make_dir(dir, sizeof dir, "unlisted", config, "llama3_sharded", shards);
    write_text(dir, "model.safetensors.index.json", ix);
    expect_load(dir, FC_ERR_FORMAT, "tensor 'model.norm.weight' is in shard");
    free(ix);

    /* a tensor no shard has: the model names it */
    make_dir(dir, sizeof dir, "missing", config, "llama3_sharded", NULL);
    write_shard(dir, S1, S1, "model.norm.weight", NULL);
    write_shard(dir, S2, S2, "model.norm.weight", NULL);
    ix = replace(index, line, "");
    write_text(dir, "model.safetensors.index.json", ix);
    expect_load(dir, FC_ERR_FORMAT, "tensor 'model.norm.weight' is missing");
    free(ix);

    /* overlapping shards: a third holds a copy of the final norm */
    make_dir(dir, sizeof dir, "overlap", config, "llama3_sharded", shards);
    write_shard(dir, "model-00003.safetensors", norm_shard, NULL, "model.norm.weight");
    char to[160];
    snprintf(to, sizeof to, "%s\n    \"model.extra\": \"model-00003.safetensors\",",
             "\"weight_map\": {");
    ix = replace(index, "\"weight_map\": {", to);
    write_text(dir, "model.safetensors.index.json", ix);
    expect_load(dir, FC_ERR_FORMAT, "shards overlap: tensor 'model.norm.weight' is in both");
    free(ix);

    /* weight_map is not an object; a shard name that leaves the directory */
    make_dir(dir, sizeof dir, "badmap", config, "llama3_sharded", shards);
    write_text(dir, "model.safetensors.index.json", "{\"weight_map\": []}");
    expect_load(dir, FC_ERR_FORMAT, "'weight_map' is missing or not an object");
    write_text(dir, "model.safetensors.index.json",
               "{\"weight_map\": {\"model.norm.weight\": \"../x.safetensors\"}}");
    expect_load(dir, FC_ERR_FORMAT, "weight_map['model.norm.weight'] is not a file name");
    remove_dir(dir);
    free(index);
    free(config);
}

/* Loading a checkpoint (JSON and shard reads through the
 * sweep's allocator: FC_IO_NO_MMAP) and running n_ids tokens, every allocation
 * failed in turn. */
static fc_status oom_run(fc_ctx *ctx, const char *dir, int64_t n_ids) {
    fc_llama *m = NULL;
    fc_llama_load_opts o = {.io_flags = FC_IO_NO_MMAP, .allocator = oom_sweep_allocator()};
    fc_status st = fc_llama_load_hf(ctx, dir, &o, &m);
    if (st) return st;
    int32_t ids[8] = {5, 1, 7, 2, 9, 4, 3, 8};
    fc_tensor *t = fc_tensor_from_data(ctx, FC_I32, (int64_t[]){1, n_ids}, 2, ids);
    fc_tensor *y = fc_llama_forward(ctx, m, t);
    st = y ? FC_OK : fc_ctx_status(ctx);
    fc_release(y);
    fc_release(t);
    fc_llama_free(m);
    return st;
}

static fc_status oom_sharded(fc_ctx *ctx) { return oom_run(ctx, DATA "/hf/llama3_sharded", 3); }
/* 8 positions past a window of 4: the window's mask is made */
static fc_status oom_window(fc_ctx *ctx) { return oom_run(ctx, DATA "/hf/mistral", 8); }

static void test_llama_hf_oom_sweep(void **st) {
    (void)st;
    const oom_scenario s[2] = {{"llama_hf sharded llama3 load + forward", oom_sharded},
                               {"llama_hf mistral load + windowed forward", oom_window}};
    for (int i = 0; i < 2; i++) {
        oom_result r = oom_sweep(&s[i]);
        printf("%s: %ld failing runs, completes at N=%ld\n", s[i].name, r.failures, r.largest_n);
        assert_true(r.failures > 10);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_hf_bad_config), cmocka_unit_test(test_llama_hf_bad_arch_mix),
        cmocka_unit_test(test_llama_hf_bad_files),  cmocka_unit_test(test_llama_hf_bad_shards),
        cmocka_unit_test(test_llama_hf_oom_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
