/* SPDX-License-Identifier: MIT */
/* test_llama_bad.c - GGUF files whose metadata contradicts their tensors:
 * each gives its own status and a message naming the key or tensor, never
 * a crash or a leak. The files are written here with the library's GGUF
 * writer from a small valid model (dim 8, 2 heads, 1 kv head, ff 16,
 * vocab 10, 1 layer) with one thing changed. Also the out-of-memory sweep
 * of loading and running a model. */
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
#include "oom_sweep.h"

#define MAX_KV 16
/* One thread: these models are tiny, and an OpenMP team's spinning
 * workers only cost time on a loaded machine. */
static const fc_ctx_opts ONE_THREAD = {.threads = 1};
#define MAX_T 16

typedef struct spec {
    fc_gguf_kv kv[MAX_KV];
    int n_kv;
    fc_io_tensor t[MAX_T];
    int n_t;
    uint32_t u32[MAX_KV];
    float f32[MAX_KV];
} spec;

static float ZEROS[4096];

static void add_u32(spec *s, const char *key, uint32_t v) {
    s->u32[s->n_kv] = v;
    s->kv[s->n_kv] = (fc_gguf_kv){.key = key, .type = FC_GGUF_U32, .data = &s->u32[s->n_kv]};
    s->n_kv++;
}

static void add_f32(spec *s, const char *key, float v) {
    s->f32[s->n_kv] = v;
    s->kv[s->n_kv] = (fc_gguf_kv){.key = key, .type = FC_GGUF_F32, .data = &s->f32[s->n_kv]};
    s->n_kv++;
}

static void add_str(spec *s, const char *key, const char *v) {
    s->kv[s->n_kv++] = (fc_gguf_kv){.key = key, .type = FC_GGUF_STRING, .data = v};
}

static void add_tensor(spec *s, const char *name, int64_t d0, int64_t d1) {
    fc_io_tensor *t = &s->t[s->n_t++];
    *t = (fc_io_tensor){.name = name, .dtype = FC_F32, .rank = d1 ? 2 : 1, .data = ZEROS};
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->nbytes = sizeof(float) * (uint64_t)(d0 * (d1 ? d1 : 1));
}

/* In place: the kvs point at the spec's own value slots. */
static void valid(spec *sp) {
    memset(sp, 0, sizeof *sp);
    spec *s = sp;
    add_str(s, "general.architecture", "llama");
    add_u32(s, "llama.block_count", 1);
    add_u32(s, "llama.context_length", 8);
    add_u32(s, "llama.embedding_length", 8);
    add_u32(s, "llama.feed_forward_length", 16);
    add_u32(s, "llama.attention.head_count", 2);
    add_u32(s, "llama.attention.head_count_kv", 1);
    add_f32(s, "llama.rope.freq_base", 10000.0f);
    add_f32(s, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    add_tensor(s, "token_embd.weight", 10, 8);
    add_tensor(s, "blk.0.attn_norm.weight", 8, 0);
    add_tensor(s, "blk.0.attn_q.weight", 8, 8);
    add_tensor(s, "blk.0.attn_k.weight", 4, 8);
    add_tensor(s, "blk.0.attn_v.weight", 4, 8);
    add_tensor(s, "blk.0.attn_output.weight", 8, 8);
    add_tensor(s, "blk.0.ffn_norm.weight", 8, 0);
    add_tensor(s, "blk.0.ffn_gate.weight", 16, 8);
    add_tensor(s, "blk.0.ffn_up.weight", 16, 8);
    add_tensor(s, "blk.0.ffn_down.weight", 8, 16);
    add_tensor(s, "output_norm.weight", 8, 0);
}

static fc_gguf_kv *kv_of(spec *s, const char *key) {
    for (int i = 0; i < s->n_kv; i++)
        if (strcmp(s->kv[i].key, key) == 0) return &s->kv[i];
    fail_msg("no key %s", key);
    return NULL;
}

static void set_u32(spec *s, const char *key, uint32_t v) {
    fc_gguf_kv *kv = kv_of(s, key);
    s->u32[kv - s->kv] = v;
}

static void drop_key(spec *s, const char *key) {
    fc_gguf_kv *kv = kv_of(s, key);
    memmove(kv, kv + 1, sizeof *kv * (size_t)(s->n_kv - (kv - s->kv) - 1));
    s->n_kv--;
    /* the moved kvs keep pointing at their value slots: add nothing after a drop */
}

static fc_io_tensor *tensor_of(spec *s, const char *name) {
    for (int i = 0; i < s->n_t; i++)
        if (strcmp(s->t[i].name, name) == 0) return &s->t[i];
    fail_msg("no tensor %s", name);
    return NULL;
}

static void drop_tensor(spec *s, const char *name) {
    fc_io_tensor *t = tensor_of(s, name);
    memmove(t, t + 1, sizeof *t * (size_t)(s->n_t - (t - s->t) - 1));
    s->n_t--;
}

/* Writes s, loads it, and expects status want with a message containing
 * needle; no handle may be left alive. */
static void expect(spec *s, fc_status want, const char *needle) {
    char path[512];
    snprintf(path, sizeof path, "%s/tests/test_llama_bad_%ld.gguf", FUCINA_BINARY_DIR,
             (long)getpid());
    char err[256] = "";
    fc_io_opts io = {.errbuf = err, .errcap = sizeof err};
    fc_status wst = fc_gguf_write(path, s->kv, s->n_kv, s->t, s->n_t, &io);
    if (wst) fail_msg("writing the test file: %s", err);
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = (fc_llama *)1;
    fc_status st = fc_llama_load(ctx, path, NULL, &m);
    if (st != want || (needle && !strstr(fc_ctx_error(ctx), needle)))
        fail_msg("expected %s with '%s', got %s: %s", fc_status_name(want), needle ? needle : "",
                 fc_status_name(st), fc_ctx_error(ctx));
    if (want == FC_OK) {
        assert_non_null(m);
        fc_llama_free(m);
    } else {
        assert_null(m);
        assert_int_equal(fc_ctx_status(ctx), want);
    }
    unlink(path);
    free_ctx(ctx);
}

static void test_llama_bad_valid_baseline_loads(void **st) {
    (void)st;
    spec s;
    valid(&s);
    expect(&s, FC_OK, NULL);
}

static void test_llama_bad_architecture(void **st) {
    (void)st;
    spec s;
    valid(&s);
    s.kv[0].data = "gpt2";
    expect(&s, FC_ERR_UNSUPPORTED, "general.architecture 'gpt2' is not supported");
    valid(&s);
    drop_key(&s, "general.architecture");
    expect(&s, FC_ERR_FORMAT, "'general.architecture' is missing");
    valid(&s);
    s.kv[0] = (fc_gguf_kv){.key = "general.architecture", .type = FC_GGUF_U32, .data = &s.u32[1]};
    expect(&s, FC_ERR_FORMAT, "not a string");
}

static void test_llama_bad_keys(void **st) {
    (void)st;
    spec s;
    valid(&s);
    drop_key(&s, "llama.block_count");
    expect(&s, FC_ERR_FORMAT, "'llama.block_count' is missing");
    valid(&s);
    drop_key(&s, "llama.context_length");
    expect(&s, FC_ERR_FORMAT, "'llama.context_length' is missing");
    valid(&s);
    *kv_of(&s, "llama.embedding_length") =
        (fc_gguf_kv){.key = "llama.embedding_length", .type = FC_GGUF_STRING, .data = "8"};
    expect(&s, FC_ERR_FORMAT, "'llama.embedding_length' has GGUF type string, not an integer");
    valid(&s);
    set_u32(&s, "llama.block_count", 0);
    expect(&s, FC_ERR_FORMAT, "'llama.block_count' = 0 must be >= 1");
    valid(&s);
    s.f32[kv_of(&s, "llama.attention.layer_norm_rms_epsilon") - s.kv] = -1.0f;
    expect(&s, FC_ERR_FORMAT, "'llama.attention.layer_norm_rms_epsilon' = -1");
    valid(&s);
    s.f32[kv_of(&s, "llama.rope.freq_base") - s.kv] = NAN;
    expect(&s, FC_ERR_FORMAT, "'llama.rope.freq_base'");
    valid(&s);
    add_str(&s, "llama.rope.scaling.type", "yarn");
    expect(&s, FC_ERR_UNSUPPORTED, "llama.rope.scaling.type 'yarn' is not supported");
    valid(&s);
    add_u32(&s, "llama.rope.dimension_count", 3);
    expect(&s, FC_ERR_FORMAT, "llama.rope.dimension_count = 3 must be even");
    valid(&s);
    add_u32(&s, "llama.rope.dimension_count", 6);
    expect(&s, FC_ERR_FORMAT, "at most the head size 4");
}

/* Variants of the architecture the model does not compute are refused by
 * name. */
static void test_llama_bad_unsupported_variants(void **st) {
    (void)st;
    spec s;
    valid(&s);
    add_u32(&s, "llama.expert_count", 8);
    expect(&s, FC_ERR_FORMAT, "llama.expert_count = 8: mixture-of-experts");
    valid(&s);
    add_u32(&s, "llama.expert_count", 0);
    expect(&s, FC_OK, NULL);
    valid(&s);
    /* Llama 3.1's per-frequency factors: one per rotated pair, f32 */
    add_tensor(&s, "rope_freqs.weight", 3, 0);
    expect(&s, FC_ERR_SHAPE_MISMATCH,
           "tensor 'rope_freqs.weight' has shape [3], the keys give [2]");
    valid(&s);
    add_tensor(&s, "rope_freqs.weight", 2, 0);
    expect(&s, FC_ERR_FORMAT, "rope_freqs.weight[0] = 0 must be finite");
    valid(&s);
    add_u32(&s, "llama.attention.key_length", 8);
    expect(&s, FC_ERR_FORMAT, "llama.attention.key_length = 8 differs from the head size 4");
    valid(&s);
    add_u32(&s, "llama.attention.value_length", 4);
    expect(&s, FC_OK, NULL);
}

static void test_llama_bad_divisions(void **st) {
    (void)st;
    spec s;
    valid(&s);
    set_u32(&s, "llama.attention.head_count", 3);
    expect(&s, FC_ERR_FORMAT,
           "llama.attention.head_count = 3 does not divide llama.embedding_length = 8");
    valid(&s);
    set_u32(&s, "llama.attention.head_count", 4);
    set_u32(&s, "llama.attention.head_count_kv", 3);
    expect(&s, FC_ERR_FORMAT,
           "llama.attention.head_count_kv = 3 does not divide llama.attention.head_count = 4");
    valid(&s);
    set_u32(&s, "llama.attention.head_count_kv", 4);
    expect(&s, FC_ERR_FORMAT, "head_count_kv = 4 does not divide");
}

static void test_llama_bad_tensors(void **st) {
    (void)st;
    spec s;
    valid(&s);
    drop_tensor(&s, "blk.0.ffn_up.weight");
    expect(&s, FC_ERR_FORMAT, "tensor 'blk.0.ffn_up.weight' is missing");
    valid(&s);
    drop_tensor(&s, "token_embd.weight");
    expect(&s, FC_ERR_FORMAT, "tensor 'token_embd.weight' is missing");
    valid(&s);
    set_u32(&s, "llama.block_count", 2);
    expect(&s, FC_ERR_FORMAT, "tensor 'blk.1.attn_norm.weight' is missing");
    valid(&s);
    set_u32(&s, "llama.block_count", 201326593); /* found by fuzz_llama: no huge allocation */
    expect(&s, FC_ERR_FORMAT, "llama.block_count = 201326593 needs");
    valid(&s);
    tensor_of(&s, "blk.0.ffn_down.weight")->name = "blk.1.ffn_down.weight";
    expect(&s, FC_ERR_FORMAT, "tensor 'blk.0.ffn_down.weight' is missing");
    valid(&s);
    tensor_of(&s, "blk.0.attn_k.weight")->shape[0] = 8; /* 2 kv heads' worth */
    tensor_of(&s, "blk.0.attn_k.weight")->nbytes = sizeof(float) * 64;
    expect(&s, FC_ERR_SHAPE_MISMATCH,
           "tensor 'blk.0.attn_k.weight' has shape [8,8], the keys give [4,8]");
    valid(&s);
    set_u32(&s, "llama.feed_forward_length", 12);
    expect(&s, FC_ERR_SHAPE_MISMATCH, "tensor 'blk.0.ffn_gate.weight' has shape [16,8]");
    valid(&s);
    fc_io_tensor *e = tensor_of(&s, "token_embd.weight");
    e->shape[1] = 4;
    e->nbytes = sizeof(float) * 40;
    expect(&s, FC_ERR_SHAPE_MISMATCH, "tensor 'token_embd.weight' has shape [10,4]");
    valid(&s);
    fc_io_tensor *n = tensor_of(&s, "output_norm.weight");
    n->rank = 2;
    n->shape[0] = 2;
    n->shape[1] = 4;
    expect(&s, FC_ERR_SHAPE_MISMATCH,
           "tensor 'output_norm.weight' has shape [2,4], the keys give [8]");
    valid(&s);
    add_tensor(&s, "output.weight", 9, 8);
    expect(&s, FC_ERR_SHAPE_MISMATCH, "tensor 'output.weight' has shape [9,8]");
    valid(&s);
    add_u32(&s, "llama.vocab_size", 12);
    expect(&s, FC_ERR_SHAPE_MISMATCH, "llama.vocab_size is 12");
    valid(&s);
    fc_io_tensor *q = tensor_of(&s, "blk.0.attn_q.weight");
    q->dtype = FC_I32;
    expect(&s, FC_ERR_DTYPE, "tensor 'blk.0.attn_q.weight' has dtype i32");
}

static void test_llama_bad_files(void **st) {
    (void)st;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = NULL;
    assert_int_equal(fc_llama_load(ctx, "/nonexistent/model.gguf", NULL, &m), FC_ERR_IO);
    assert_non_null(strstr(fc_ctx_error(ctx), "llama: "));
    fc_ctx_clear_error(ctx);
    char path[512];
    snprintf(path, sizeof path, "%s/tests/test_llama_bad_text_%ld.gguf", FUCINA_BINARY_DIR,
             (long)getpid());
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("not a gguf file at all", f);
    fclose(f);
    assert_int_equal(fc_llama_load(ctx, path, NULL, &m), FC_ERR_FORMAT);
    assert_null(m);
    fc_ctx_clear_error(ctx);
    unlink(path);
    assert_int_equal(fc_llama_load(ctx, NULL, NULL, &m), FC_ERR_NULL_ARG);
    fc_ctx_clear_error(ctx);
    assert_int_equal(fc_llama_load(NULL, path, NULL, &m), FC_ERR_NULL_ARG);
    /* NULL-safe accessors */
    assert_null(fc_llama_get_config(NULL));
    assert_null(fc_llama_gguf(NULL));
    assert_int_equal(fc_llama_tensor_count(NULL), 0);
    assert_null(fc_llama_tensor(NULL, "x"));
    assert_null(fc_llama_forward(ctx, NULL, NULL));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_NULL_ARG);
    fc_llama_free(NULL);
    free_ctx(ctx);
}

/* Saving keeps every metadata value, arrays of strings, numbers and bools
 * and nested arrays included (what a tokenizer's keys are made of). */
static void test_llama_save_keeps_every_key(void **st) {
    (void)st;
    spec s;
    valid(&s);
    const char *const toks[3] = {"<s>", "h\xc3\xa9", ""};
    const float scores[3] = {0.0f, -1.5f, 2.25f};
    const bool flags[3] = {true, false, true};
    const int64_t big = -((int64_t)1 << 40);
    const int16_t inner[2] = {-7, 9};
    fc_gguf_kv nested[2] = {
        {.type = FC_GGUF_ARRAY, .elem_type = FC_GGUF_I16, .count = 2, .data = inner},
        {.type = FC_GGUF_ARRAY, .elem_type = FC_GGUF_STRING, .count = 3, .data = toks}};
    s.kv[s.n_kv++] = (fc_gguf_kv){.key = "tokenizer.ggml.tokens",
                                  .type = FC_GGUF_ARRAY,
                                  .elem_type = FC_GGUF_STRING,
                                  .count = 3,
                                  .data = toks};
    s.kv[s.n_kv++] = (fc_gguf_kv){.key = "tokenizer.ggml.scores",
                                  .type = FC_GGUF_ARRAY,
                                  .elem_type = FC_GGUF_F32,
                                  .count = 3,
                                  .data = scores};
    s.kv[s.n_kv++] = (fc_gguf_kv){.key = "x.flags",
                                  .type = FC_GGUF_ARRAY,
                                  .elem_type = FC_GGUF_BOOL,
                                  .count = 3,
                                  .data = flags};
    s.kv[s.n_kv++] = (fc_gguf_kv){.key = "x.big", .type = FC_GGUF_I64, .data = &big};
    s.kv[s.n_kv++] = (fc_gguf_kv){.key = "x.nested",
                                  .type = FC_GGUF_ARRAY,
                                  .elem_type = FC_GGUF_ARRAY,
                                  .count = 2,
                                  .data = nested};
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/tests/test_llama_keys_a_%ld.gguf", FUCINA_BINARY_DIR, (long)getpid());
    snprintf(b, sizeof b, "%s/tests/test_llama_keys_b_%ld.gguf", FUCINA_BINARY_DIR, (long)getpid());
    assert_int_equal(fc_gguf_write(a, s.kv, s.n_kv, s.t, s.n_t, NULL), FC_OK);
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = NULL;
    assert_int_equal(fc_llama_load(ctx, a, NULL, &m), FC_OK);
    assert_int_equal(fc_llama_save(ctx, m, b, NULL), FC_OK);
    fc_llama_free(m);
    /* byte-identical: the same keys, values, tensors and alignment */
    size_t na = 0, nb = 0;
    void *da = fc_test_read_file("/", a, &na), *db = fc_test_read_file("/", b, &nb);
    assert_non_null(da);
    assert_non_null(db);
    assert_int_equal(na, nb);
    assert_memory_equal(da, db, na);
    free(da);
    free(db);
    unlink(a);
    unlink(b);
    free_ctx(ctx);
}

/* Loading (trainable: the f32 tensors are copied through the context's
 * allocator) and running the tiny fixture, every allocation failed in turn. */
static fc_status oom_load_forward(fc_ctx *ctx) {
    fc_llama *m = NULL;
    fc_llama_load_opts o = {.trainable = true};
    fc_status st = fc_llama_load(ctx, FUCINA_TEST_DATA_DIR "/llama/tiny_f32.gguf", &o, &m);
    if (st) return st;
    int32_t ids[3] = {5, 1, 7};
    fc_tensor *t = fc_tensor_from_data(ctx, FC_I32, (int64_t[]){1, 3}, 2, ids);
    fc_tensor *y = fc_llama_forward(ctx, m, t);
    st = y ? FC_OK : fc_ctx_status(ctx);
    fc_release(y);
    fc_release(t);
    fc_llama_free(m);
    return st;
}

static void test_llama_bad_oom_sweep(void **st) {
    (void)st;
    oom_scenario s = {"llama load + forward", oom_load_forward};
    oom_result r = oom_sweep(&s);
    printf("oom sweep: %ld failing runs, completes at N=%ld\n", r.failures, r.largest_n);
    assert_true(r.failures > 10);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_bad_valid_baseline_loads),
        cmocka_unit_test(test_llama_bad_architecture),
        cmocka_unit_test(test_llama_bad_keys),
        cmocka_unit_test(test_llama_bad_divisions),
        cmocka_unit_test(test_llama_bad_unsupported_variants),
        cmocka_unit_test(test_llama_bad_tensors),
        cmocka_unit_test(test_llama_bad_files),
        cmocka_unit_test(test_llama_bad_oom_sweep),
        cmocka_unit_test(test_llama_save_keeps_every_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
