/* SPDX-License-Identifier: MIT */
/* test_llama_hostile.c - hostile sizes, types and values given to the
 * Llama model (issue 45), and the lifetimes of what it owns:
 *   - GGUF keys whose values overflow the sizes computed from them
 *     (llama.block_count 2^62 as u64, INT64_MAX as i64), keys of the wrong
 *     GGUF type (a bool block count), float keys out of range (a rope
 *     scaling factor of 1e-308, whose angles are inf): each refused at load
 *     with FC_ERR_FORMAT and a message naming the key and the value;
 *   - fc_llama_new with sizes whose products overflow (FC_ERR_OVERFLOW
 *     naming the field) and values out of range (FC_ERR_INVALID_ARG);
 *   - NULL ids (FC_ERR_NULL_ARG); a model, cache or adapter made inside a
 *     scope that then closes (each must keep working and free cleanly);
 *   - the sampler on +inf and -inf logits.
 * Every case returns its status under ASan+UBSan: none may overflow. The
 * files are written here with the library's GGUF writer from a small valid
 * model (dim 8, 2 heads, 1 kv head, ff 16, vocab 10, 1 layer, context 8). */
#include <float.h>
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

static const fc_ctx_opts ONE_THREAD = {.threads = 1};
#define MAX_KV 16
#define MAX_T 16

typedef union kv_val {
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
    bool b;
} kv_val;

typedef struct spec {
    fc_gguf_kv kv[MAX_KV];
    kv_val val[MAX_KV];
    int n_kv;
    fc_io_tensor t[MAX_T];
    int n_t;
} spec;

/* Weights with a pattern, not zeros, so a forward has something to show. */
static float PATTERN[4096];

static kv_val *set_kv(spec *s, const char *key, fc_gguf_type type) {
    int i = 0;
    while (i < s->n_kv && strcmp(s->kv[i].key, key))
        i++;
    if (i == s->n_kv) s->n_kv++;
    s->kv[i] = (fc_gguf_kv){.key = key, .type = type, .data = &s->val[i]};
    memset(&s->val[i], 0, sizeof s->val[i]);
    return &s->val[i];
}

static void add_tensor(spec *s, const char *name, int64_t d0, int64_t d1) {
    fc_io_tensor *t = &s->t[s->n_t++];
    *t = (fc_io_tensor){.name = name, .dtype = FC_F32, .rank = d1 ? 2 : 1, .data = PATTERN};
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->nbytes = sizeof(float) * (uint64_t)(d0 * (d1 ? d1 : 1));
}

static void valid(spec *s) {
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 4096; i++)
        PATTERN[i] = (float)(0.3 * sin(0.7 * i + 0.2));
    s->kv[s->n_kv++] =
        (fc_gguf_kv){.key = "general.architecture", .type = FC_GGUF_STRING, .data = "llama"};
    set_kv(s, "llama.block_count", FC_GGUF_U32)->u32 = 1;
    set_kv(s, "llama.context_length", FC_GGUF_U32)->u32 = 8;
    set_kv(s, "llama.embedding_length", FC_GGUF_U32)->u32 = 8;
    set_kv(s, "llama.feed_forward_length", FC_GGUF_U32)->u32 = 16;
    set_kv(s, "llama.attention.head_count", FC_GGUF_U32)->u32 = 2;
    set_kv(s, "llama.attention.head_count_kv", FC_GGUF_U32)->u32 = 1;
    set_kv(s, "llama.rope.freq_base", FC_GGUF_F32)->f32 = 10000.0f;
    set_kv(s, "llama.attention.layer_norm_rms_epsilon", FC_GGUF_F32)->f32 = 1e-5f;
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

static void linear_scaling(spec *s, fc_gguf_type type, double factor) {
    s->kv[s->n_kv++] =
        (fc_gguf_kv){.key = "llama.rope.scaling.type", .type = FC_GGUF_STRING, .data = "linear"};
    kv_val *v = set_kv(s, "llama.rope.scaling.factor", type);
    if (type == FC_GGUF_F32)
        v->f32 = (float)factor;
    else
        v->f64 = factor;
}

/* Every logit of a forward over 8 positions is finite. */
static void forward_is_finite(fc_ctx *ctx, fc_llama *m) {
    int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 9};
    fc_tensor *x = fc_tensor_from_data(ctx, FC_I32, (int64_t[]){1, 8}, 2, ids);
    fc_tensor *y = fc_llama_forward(ctx, m, x);
    if (!y) fail_msg("forward: %s", fc_ctx_error(ctx));
    float got[80];
    assert_int_equal(fc_tensor_numel(y), 80);
    assert_int_equal(fc_tensor_copy_out(got, sizeof got, y), FC_OK);
    for (int i = 0; i < 80; i++)
        if (!isfinite(got[i])) fail_msg("logit %d is %g", i, (double)got[i]);
    fc_release(y);
    fc_release(x);
}

/* Writes s, loads it, and expects status want with a message containing
 * needle (NULL: any); a model that loads must run to finite logits. */
static void expect(spec *s, fc_status want, const char *needle) {
    char path[512];
    snprintf(path, sizeof path, "%s/tests/test_llama_hostile_%ld.gguf", FUCINA_BINARY_DIR,
             (long)getpid());
    char err[256] = "";
    fc_io_opts io = {.errbuf = err, .errcap = sizeof err};
    if (fc_gguf_write(path, s->kv, s->n_kv, s->t, s->n_t, &io)) fail_msg("writing: %s", err);
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = (fc_llama *)1;
    fc_status st = fc_llama_load(ctx, path, NULL, &m);
    if (st != want || (needle && !strstr(fc_ctx_error(ctx), needle)))
        fail_msg("expected %s with '%s', got %s: %s", fc_status_name(want), needle ? needle : "",
                 fc_status_name(st), fc_ctx_error(ctx));
    if (want == FC_OK) {
        forward_is_finite(ctx, m);
        fc_llama_free(m);
    } else {
        assert_null(m);
        assert_int_equal(fc_ctx_status(ctx), want);
    }
    unlink(path);
    free_ctx(ctx);
}

/* ---- the loader ----------------------------------------------------------------- */

static void test_llama_hostile_block_count_huge(void **st) {
    (void)st;
    spec s;
    valid(&s);
    expect(&s, FC_OK, NULL);
    valid(&s);
    set_kv(&s, "llama.block_count", FC_GGUF_U64)->u64 = (uint64_t)1 << 62;
    expect(&s, FC_ERR_FORMAT, "llama.block_count = 4611686018427387904 needs");
    valid(&s);
    set_kv(&s, "llama.block_count", FC_GGUF_I64)->i64 = INT64_MAX;
    expect(&s, FC_ERR_FORMAT, "llama.block_count = 9223372036854775807 needs");
    valid(&s);
    set_kv(&s, "llama.block_count", FC_GGUF_U64)->u64 = UINT64_MAX;
    expect(&s, FC_ERR_FORMAT, "key 'llama.block_count' = 18446744073709551615 does not fit");
    valid(&s);
    set_kv(&s, "llama.block_count", FC_GGUF_I64)->i64 = INT64_MIN;
    expect(&s, FC_ERR_FORMAT, "key 'llama.block_count' = -9223372036854775808 must be >= 1");
    /* the other sizes: each huge value is refused by a shape or a division,
     * never multiplied past int64 */
    valid(&s);
    set_kv(&s, "llama.embedding_length", FC_GGUF_I64)->i64 = INT64_MAX;
    expect(&s, FC_ERR_FORMAT, "does not divide llama.embedding_length = 9223372036854775807");
    valid(&s);
    set_kv(&s, "llama.embedding_length", FC_GGUF_U64)->u64 = (uint64_t)1 << 62;
    set_kv(&s, "llama.attention.head_count", FC_GGUF_U64)->u64 = (uint64_t)1 << 61;
    expect(&s, FC_ERR_SHAPE_MISMATCH, "tensor 'token_embd.weight' has shape [10,8]");
    valid(&s);
    set_kv(&s, "llama.feed_forward_length", FC_GGUF_I64)->i64 = INT64_MAX;
    expect(&s, FC_ERR_SHAPE_MISMATCH, "tensor 'blk.0.ffn_gate.weight' has shape [16,8]");
    valid(&s);
    set_kv(&s, "llama.vocab_size", FC_GGUF_I64)->i64 = INT64_MAX;
    expect(&s, FC_ERR_SHAPE_MISMATCH, "llama.vocab_size is 9223372036854775807");
    /* a context of INT64_MAX sizes nothing: it loads and runs */
    valid(&s);
    set_kv(&s, "llama.context_length", FC_GGUF_I64)->i64 = INT64_MAX;
    expect(&s, FC_OK, NULL);
}

static void test_llama_hostile_key_types(void **st) {
    (void)st;
    spec s;
    valid(&s);
    set_kv(&s, "llama.block_count", FC_GGUF_BOOL)->b = true;
    expect(&s, FC_ERR_FORMAT, "key 'llama.block_count' has GGUF type bool, not an integer");
    valid(&s);
    set_kv(&s, "llama.attention.head_count_kv", FC_GGUF_BOOL)->b = true;
    expect(&s, FC_ERR_FORMAT, "key 'llama.attention.head_count_kv' has GGUF type bool");
    valid(&s);
    set_kv(&s, "llama.embedding_length", FC_GGUF_F32)->f32 = 8.0f;
    expect(&s, FC_ERR_FORMAT, "key 'llama.embedding_length' has GGUF type f32, not an integer");
    valid(&s);
    set_kv(&s, "llama.rope.freq_base", FC_GGUF_BOOL)->b = true;
    expect(&s, FC_ERR_FORMAT, "key 'llama.rope.freq_base' has GGUF type bool, not a number");
    valid(&s);
    set_kv(&s, "llama.attention.layer_norm_rms_epsilon", FC_GGUF_BOOL)->b = true;
    expect(&s, FC_ERR_FORMAT, "'llama.attention.layer_norm_rms_epsilon' has GGUF type bool");
    valid(&s);
    linear_scaling(&s, FC_GGUF_F32, 2.0);
    set_kv(&s, "llama.rope.scaling.factor", FC_GGUF_BOOL)->b = true;
    expect(&s, FC_ERR_FORMAT, "key 'llama.rope.scaling.factor' has GGUF type bool");
    valid(&s);
    set_kv(&s, "llama.expert_count", FC_GGUF_BOOL)->b = true;
    expect(&s, FC_ERR_FORMAT, "key 'llama.expert_count' has GGUF type bool");
    /* a whole number of another integer type, or an integer for a float, is read */
    valid(&s);
    set_kv(&s, "llama.block_count", FC_GGUF_I64)->i64 = 1;
    set_kv(&s, "llama.rope.freq_base", FC_GGUF_U32)->u32 = 10000;
    expect(&s, FC_OK, NULL);
}

static void test_llama_hostile_float_keys(void **st) {
    (void)st;
    spec s;
    valid(&s);
    linear_scaling(&s, FC_GGUF_F64, 1e-308);
    expect(&s, FC_ERR_FORMAT, "key 'llama.rope.scaling.factor' = 1e-308 must be");
    valid(&s);
    linear_scaling(&s, FC_GGUF_F32, 1e-45); /* an f32 subnormal */
    expect(&s, FC_ERR_FORMAT, "key 'llama.rope.scaling.factor' = 1.4013e-45 must be");
    valid(&s);
    linear_scaling(&s, FC_GGUF_F64, 1e300);
    expect(&s, FC_ERR_FORMAT, "key 'llama.rope.scaling.factor' = 1e+300 must be");
    valid(&s);
    linear_scaling(&s, FC_GGUF_F32, INFINITY);
    expect(&s, FC_ERR_FORMAT, "key 'llama.rope.scaling.factor' = inf must be");
    valid(&s);
    linear_scaling(&s, FC_GGUF_F32, -2.0);
    expect(&s, FC_ERR_FORMAT, "key 'llama.rope.scaling.factor' = -2 must be");
    valid(&s);
    set_kv(&s, "llama.rope.freq_base", FC_GGUF_F64)->f64 = 1e-300;
    expect(&s, FC_ERR_FORMAT, "key 'llama.rope.freq_base' = 1e-300 must be");
    valid(&s);
    set_kv(&s, "llama.rope.freq_base", FC_GGUF_F64)->f64 = 1e300;
    expect(&s, FC_ERR_FORMAT, "key 'llama.rope.freq_base' = 1e+300 must be");
    valid(&s);
    set_kv(&s, "llama.attention.layer_norm_rms_epsilon", FC_GGUF_F64)->f64 = 1e-320;
    expect(&s, FC_ERR_FORMAT, "key 'llama.attention.layer_norm_rms_epsilon' = 9.99989e-321");
    valid(&s);
    set_kv(&s, "llama.attention.layer_norm_rms_epsilon", FC_GGUF_F32)->f32 = -INFINITY;
    expect(&s, FC_ERR_FORMAT, "key 'llama.attention.layer_norm_rms_epsilon' = -inf");
    /* in range, as f64 too: loads, and the logits are finite */
    valid(&s);
    linear_scaling(&s, FC_GGUF_F64, 4.0);
    set_kv(&s, "llama.rope.freq_base", FC_GGUF_F64)->f64 = 500000.0;
    expect(&s, FC_OK, NULL);
    valid(&s);
    linear_scaling(&s, FC_GGUF_F32, 1e-30); /* tiny, but every angle is finite */
    expect(&s, FC_OK, NULL);
}

/* ---- fc_llama_new ------------------------------------------------------------------ */

static fc_llama_config small_cfg(void) {
    return (fc_llama_config){.n_layers = 1,
                             .dim = 8,
                             .n_heads = 2,
                             .n_kv_heads = 1,
                             .ff_dim = 16,
                             .vocab = 10,
                             .context = 8};
}

/* fc_llama_new(cfg) returns want, the message holds needle, nothing leaks. */
static void expect_new(const fc_llama_config *cfg, fc_status want, const char *needle) {
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = (fc_llama *)1;
    fc_status st = fc_llama_new(ctx, cfg, &m);
    if (st != want || (needle && !strstr(fc_ctx_error(ctx), needle)))
        fail_msg("expected %s with '%s', got %s: %s", fc_status_name(want), needle ? needle : "",
                 fc_status_name(st), fc_ctx_error(ctx));
    if (want == FC_OK) {
        forward_is_finite(ctx, m);
        fc_llama_free(m);
    } else {
        assert_null(m);
    }
    free_ctx(ctx);
}

static void test_llama_hostile_new_sizes(void **st) {
    (void)st;
    fc_llama_config c = small_cfg();
    expect_new(&c, FC_OK, NULL);
    c.n_layers = (int64_t)1 << 61; /* 9 tensors a layer: 9 * 2^61 overflows */
    expect_new(&c, FC_ERR_OVERFLOW, "n_layers = 2305843009213693952");
    c.n_layers = INT64_MAX;
    expect_new(&c, FC_ERR_OVERFLOW, "n_layers = 9223372036854775807");
    c.n_layers = (int64_t)1 << 57; /* a tensor count that fits, bytes that do not */
    expect_new(&c, FC_ERR_OVERFLOW, "n_layers = 144115188075855872");
    c = small_cfg();
    c.vocab = INT64_MAX;
    expect_new(&c, FC_ERR_OVERFLOW, "vocab = 9223372036854775807");
    c = small_cfg();
    c.ff_dim = (int64_t)1 << 62;
    expect_new(&c, FC_ERR_OVERFLOW, "ff_dim = 4611686018427387904");
    c = small_cfg();
    c.dim = (int64_t)1 << 62;
    c.n_heads = 1;
    c.n_kv_heads = 1;
    expect_new(&c, FC_ERR_OVERFLOW, "dim = 4611686018427387904");
    c = small_cfg();
    c.n_heads = INT64_MAX;
    expect_new(&c, FC_ERR_INVALID_ARG, "n_heads = 9223372036854775807 does not divide dim = 8");
    c = small_cfg();
    c.n_layers = INT64_MIN;
    expect_new(&c, FC_ERR_INVALID_ARG, "n_layers = -9223372036854775808 must be >= 1");
    /* a huge context sizes nothing */
    c = small_cfg();
    c.context = INT64_MAX;
    expect_new(&c, FC_OK, NULL);
}

static void test_llama_hostile_new_values(void **st) {
    (void)st;
    fc_llama_config c = small_cfg();
    c.rope_dims = -2;
    expect_new(&c, FC_ERR_INVALID_ARG, "rope_dims = -2 must be");
    c.rope_dims = INT64_MIN;
    expect_new(&c, FC_ERR_INVALID_ARG, "rope_dims = -9223372036854775808 must be");
    c.rope_dims = 3;
    expect_new(&c, FC_ERR_INVALID_ARG, "rope_dims = 3 must be");
    c.rope_dims = 2;
    expect_new(&c, FC_OK, NULL);
    c = small_cfg();
    c.rope_scale = 1e308; /* the factor 1e-308: inf angles */
    expect_new(&c, FC_ERR_INVALID_ARG, "rope_scale = 1e+308");
    c.rope_scale = 1e-300;
    expect_new(&c, FC_ERR_INVALID_ARG, "rope_scale = 1e-300");
    c.rope_scale = NAN;
    expect_new(&c, FC_ERR_INVALID_ARG, "rope_scale = nan");
    c.rope_scale = -1;
    expect_new(&c, FC_ERR_INVALID_ARG, "rope_scale = -1");
    c.rope_scale = 0.25;
    expect_new(&c, FC_OK, NULL);
    c = small_cfg();
    c.rope_base = 1e-300;
    expect_new(&c, FC_ERR_INVALID_ARG, "rope_base = 1e-300");
    c.rope_base = INFINITY;
    expect_new(&c, FC_ERR_INVALID_ARG, "rope_base = inf");
    c = small_cfg();
    c.rms_eps = 1e-320;
    expect_new(&c, FC_ERR_INVALID_ARG, "rms_eps = 9.99989e-321");
    c.rms_eps = 1e39;
    expect_new(&c, FC_ERR_INVALID_ARG, "rms_eps = 1e+39");
    c.rms_eps = -0.5;
    expect_new(&c, FC_ERR_INVALID_ARG, "rms_eps = -0.5");
}

/* A model from fc_llama_new whose sizes pass u32 is written with u64 keys
 * and reads back the same, rather than truncated. */
static void test_llama_hostile_save_wide_sizes(void **st) {
    (void)st;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama_config c = small_cfg();
    c.context = (int64_t)1 << 40;
    fc_llama *m = NULL;
    assert_int_equal(fc_llama_new(ctx, &c, &m), FC_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/tests/test_llama_hostile_wide_%ld.gguf", FUCINA_BINARY_DIR,
             (long)getpid());
    assert_int_equal(fc_llama_save(ctx, m, path, NULL), FC_OK);
    /* extra keys: a count whose table size overflows is refused */
    fc_gguf_kv kv = {.key = "x.y", .type = FC_GGUF_STRING, .data = "z"};
    fc_llama_save_opts o = fc_llama_save_opts_default();
    o.kvs = &kv;
    o.n_kvs = INT64_MAX;
    assert_int_equal(fc_llama_save(ctx, m, path, &o), FC_ERR_OVERFLOW);
    assert_non_null(strstr(fc_ctx_error(ctx), "n_kvs = 9223372036854775807"));
    fc_ctx_clear_error(ctx);
    fc_llama_free(m);
    assert_int_equal(fc_llama_load(ctx, path, NULL, &m), FC_OK);
    assert_int_equal(fc_llama_get_config(m)->context, (int64_t)1 << 40);
    const fc_gguf_value *v = fc_gguf_kv_find(fc_llama_gguf(m), "llama.context_length");
    assert_int_equal(fc_gguf_value_type(v), FC_GGUF_U64);
    v = fc_gguf_kv_find(fc_llama_gguf(m), "llama.block_count");
    assert_int_equal(fc_gguf_value_type(v), FC_GGUF_U32); /* what llama.cpp reads */
    fc_llama_free(m);
    unlink(path);
    free_ctx(ctx);
}

/* ---- NULL ids --------------------------------------------------------------------- */

static void test_llama_hostile_null_ids(void **st) {
    (void)st;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama_config c = small_cfg();
    fc_llama *m = NULL;
    assert_int_equal(fc_llama_new(ctx, &c, &m), FC_OK);
    assert_null(fc_llama_forward(ctx, m, NULL));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_NULL_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "fc_llama_forward: NULL ids"));
    fc_ctx_clear_error(ctx);
    fc_llama_cache *cache = NULL;
    assert_int_equal(fc_llama_cache_new(ctx, m, 1, 4, &cache), FC_OK);
    assert_null(fc_llama_forward_cached(ctx, m, cache, NULL));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_NULL_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "fc_llama_forward_cached: NULL ids"));
    assert_int_equal(fc_llama_cache_len(cache), 0);
    fc_ctx_clear_error(ctx);
    /* a cache whose keys no tensor can hold */
    fc_llama_cache *big = (fc_llama_cache *)1;
    assert_int_equal(fc_llama_cache_new(ctx, m, INT64_MAX, 8, &big), FC_ERR_OVERFLOW);
    assert_null(big);
    fc_ctx_clear_error(ctx);
    /* an earlier error is kept: the NULL is its propagation */
    fc_ctx_fail(ctx, FC_ERR_STATE, "an earlier failure");
    assert_null(fc_llama_forward(ctx, m, NULL));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_STATE);
    assert_string_equal(fc_ctx_error(ctx), "an earlier failure");
    fc_ctx_clear_error(ctx);
    fc_llama_cache_free(cache);
    fc_llama_free(m);
    free_ctx(ctx);
}

/* ---- lifetimes: made inside a scope that closes ------------------------------------- */

static float *logits_of(fc_ctx *ctx, fc_llama *m, const int32_t *ids, int64_t T) {
    fc_tensor *x = fc_tensor_from_data(ctx, FC_I32, (int64_t[]){1, T}, 2, ids);
    fc_tensor *y = fc_llama_forward(ctx, m, x);
    if (!y) fail_msg("forward: %s", fc_ctx_error(ctx));
    size_t n = sizeof(float) * (size_t)fc_tensor_numel(y);
    float *out = malloc(n);
    assert_int_equal(fc_tensor_copy_out(out, n, y), FC_OK);
    fc_release(y);
    fc_release(x);
    return out;
}

static const int32_t IDS[5] = {5, 1, 7, 0, 95};

/* Loaded (frozen and trainable) or made inside a scope: the model's
 * tensors outlive the scope; its forward matches one made outside it;
 * freeing it releases each tensor once. */
static void test_llama_hostile_model_outlives_scope(void **st) {
    (void)st;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    const char *path = FUCINA_TEST_DATA_DIR "/llama/tiny_f32.gguf";
    fc_llama *ref = NULL;
    assert_int_equal(fc_llama_load(ctx, path, NULL, &ref), FC_OK);
    float *want = logits_of(ctx, ref, IDS, 5);
    int64_t n_tensors = fc_llama_tensor_count(ref);
    fc_llama_free(ref);
    for (int trainable = 0; trainable < 2; trainable++) {
        fc_llama_load_opts o = {.trainable = trainable};
        fc_llama *m = NULL;
        fc_scope_begin(ctx);
        fc_scope_begin(ctx); /* nested: the inner one closes first */
        assert_int_equal(fc_llama_load(ctx, path, &o, &m), FC_OK);
        fc_scope_end(ctx);
        fc_scope_end(ctx);
        fc_ctx_stats s;
        fc_ctx_get_stats(ctx, &s);
        assert_int_equal(s.tensors_live, n_tensors);
        float *got = logits_of(ctx, m, IDS, 5);
        assert_memory_equal(got, want, sizeof(float) * 5 * 96);
        free(got);
        fc_llama_free(m);
        assert_int_equal(fc_ctx_status(ctx), FC_OK); /* no double release */
        fc_ctx_get_stats(ctx, &s);
        assert_int_equal(s.tensors_live, 0);
    }
    free(want);
    /* fc_llama_new: the same against a model made outside the scope from
     * the same RNG state */
    fc_llama_config c = small_cfg();
    c.tied_output = false;
    fc_ctx_set_rng(ctx, 7, 0);
    assert_int_equal(fc_llama_new(ctx, &c, &ref), FC_OK);
    int32_t ids[3] = {1, 9, 4};
    want = logits_of(ctx, ref, ids, 3);
    fc_llama_free(ref);
    fc_ctx_set_rng(ctx, 7, 0);
    fc_llama *m = NULL;
    fc_scope_begin(ctx);
    assert_int_equal(fc_llama_new(ctx, &c, &m), FC_OK);
    fc_scope_end(ctx);
    float *got = logits_of(ctx, m, ids, 3);
    assert_memory_equal(got, want, sizeof(float) * 3 * 10);
    free(got);
    free(want);
    /* and it trains: backward reaches every parameter */
    fc_tensor *params[16];
    assert_int_equal(fc_llama_params(m, params, 16), 12);
    fc_scope_begin(ctx);
    fc_tensor *x = fc_tensor_from_data(ctx, FC_I32, (int64_t[]){1, 3}, 2, ids);
    fc_tensor *y = fc_llama_forward(ctx, m, x);
    fc_tensor *loss = fc_sum(ctx, fc_mul(ctx, y, y), NULL, 0, false);
    assert_int_equal(fc_backward(ctx, loss), FC_OK);
    fc_scope_end(ctx);
    for (int i = 0; i < 12; i++)
        assert_non_null(fc_grad(params[i]));
    fc_llama_free(m);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
    free_ctx(ctx);
}

static void test_llama_hostile_cache_outlives_scope(void **st) {
    (void)st;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = NULL;
    assert_int_equal(fc_llama_load(ctx, FUCINA_TEST_DATA_DIR "/llama/tiny_f32.gguf", NULL, &m),
                     FC_OK);
    float *want = logits_of(ctx, m, IDS, 5);
    fc_llama_cache *cache = NULL;
    fc_scope_begin(ctx);
    assert_int_equal(fc_llama_cache_new(ctx, m, 1, 8, &cache), FC_OK);
    fc_scope_end(ctx);
    for (int64_t t = 0; t < 5; t++) {
        fc_tensor *x = fc_tensor_from_data(ctx, FC_I32, (int64_t[]){1, 1}, 2, &IDS[t]);
        fc_tensor *y = fc_llama_forward_cached(ctx, m, cache, x);
        if (!y) fail_msg("step %lld: %s", (long long)t, fc_ctx_error(ctx));
        float got[96];
        assert_int_equal(fc_tensor_copy_out(got, sizeof got, y), FC_OK);
        for (int i = 0; i < 96; i++)
            assert_float_equal(got[i], want[t * 96 + i], 1e-4);
        fc_release(y);
        fc_release(x);
    }
    assert_int_equal(fc_llama_cache_len(cache), 5);
    free(want);
    fc_llama_cache_free(cache);
    fc_llama_free(m);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
    free_ctx(ctx);
}

/* An adapter made, or read from a file, inside a scope keeps its tensors. */
static void test_llama_hostile_lora_outlives_scope(void **st) {
    (void)st;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = NULL;
    assert_int_equal(fc_llama_load(ctx, FUCINA_TEST_DATA_DIR "/llama/tiny_f32.gguf", NULL, &m),
                     FC_OK);
    fc_lora_config c = fc_lora_config_default();
    c.rank = 2;
    fc_lora *l = NULL;
    fc_scope_begin(ctx);
    assert_int_equal(fc_lora_new(ctx, m, &c, &l), FC_OK);
    fc_scope_end(ctx);
    int64_t n = fc_lora_params(l, NULL, 0);
    assert_int_equal(n, 28);
    fc_tensor *p[28];
    fc_lora_params(l, p, 28);
    fc_no_grad_begin(ctx);
    for (int64_t i = 1; i < n; i += 2)
        assert_int_equal(fc_fill_(p[i], 0.05), FC_OK); /* B: the adapter now shows */
    fc_no_grad_end(ctx);
    fc_lora_set_training(l, false);
    float *want = logits_of(ctx, m, IDS, 5);
    char path[512];
    snprintf(path, sizeof path, "%s/tests/test_llama_hostile_lora_%ld.safetensors",
             FUCINA_BINARY_DIR, (long)getpid());
    assert_int_equal(fc_lora_save(ctx, l, path), FC_OK);
    fc_lora_free(l);
    fc_scope_begin(ctx);
    assert_int_equal(fc_lora_load(ctx, m, path, &l), FC_OK);
    fc_scope_end(ctx);
    float *got = logits_of(ctx, m, IDS, 5);
    for (int i = 0; i < 5 * 96; i++)
        assert_float_equal(got[i], want[i], 1e-5);
    free(got);
    free(want);
    fc_lora_free(l);
    fc_llama_free(m);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
    unlink(path);
    free_ctx(ctx);
}

/* The hostile seeds of fuzz_llama (fuzz/gen_llama_seeds.c) give their
 * statuses, so the corpus stays what it says it is. */
static void test_llama_hostile_fuzz_seeds(void **st) {
    (void)st;
    static const struct {
        const char *leaf;
        fc_status want;
        const char *needle;
    } seeds[] = {
        {"hostile_block_count_u64_2p62", FC_ERR_FORMAT, "llama.block_count = 4611686018427387904"},
        {"hostile_block_count_i64_max", FC_ERR_FORMAT, "llama.block_count = 9223372036854775807"},
        {"hostile_block_count_bool", FC_ERR_FORMAT, "'llama.block_count' has GGUF type bool"},
        {"hostile_expert_count_bool", FC_ERR_FORMAT, "'llama.expert_count' has GGUF type bool"},
        {"hostile_rope_factor_f64_tiny", FC_ERR_FORMAT, "'llama.rope.scaling.factor' = 1e-308"},
        {"hostile_rope_factor_f32_subnormal", FC_ERR_FORMAT,
         "'llama.rope.scaling.factor' = 1.4013e-45"},
        {"hostile_rms_eps_f64_subnormal", FC_ERR_FORMAT,
         "'llama.attention.layer_norm_rms_epsilon' = 9.99989e-321"},
        {"hostile_freq_base_bool", FC_ERR_FORMAT, "'llama.rope.freq_base' has GGUF type bool"},
        {"hostile_valid_wide_types", FC_OK, NULL},
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/fuzz/corpus/llama/%s.gguf", FUCINA_SOURCE_DIR,
                 seeds[i].leaf);
        fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
        fc_llama *m = NULL;
        fc_status got = fc_llama_load(ctx, path, NULL, &m);
        if (got != seeds[i].want ||
            (seeds[i].needle && !strstr(fc_ctx_error(ctx), seeds[i].needle)))
            fail_msg("%s: expected %s with '%s', got %s: %s", seeds[i].leaf,
                     fc_status_name(seeds[i].want), seeds[i].needle ? seeds[i].needle : "",
                     fc_status_name(got), fc_ctx_error(ctx));
        if (m) {
            assert_int_equal(fc_llama_get_config(m)->context, INT64_MAX);
            assert_true(fc_llama_get_config(m)->rope_scale == 0.5);
            forward_is_finite(ctx, m);
        }
        fc_llama_free(m);
        free_ctx(ctx);
    }
}

/* ---- the sampler on infinite logits ------------------------------------------------ */

static void test_llama_hostile_sample_inf(void **st) {
    (void)st;
    const float one_inf[4] = {0.0f, 3.0f, INFINITY, -INFINITY};
    fc_llama_sample_opts opts[] = {{.temperature = 1.0},
                                   {.temperature = 1.0, .top_p = 0.9},
                                   {.temperature = 0.7, .top_k = 2},
                                   {.temperature = 1e-300},
                                   {.temperature = INFINITY}};
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
        uint64_t rng = 42;
        for (int i = 0; i < 200; i++) {
            int32_t tok = -1;
            assert_int_equal(fc_llama_sample(one_inf, 4, &opts[k], &rng, &tok), FC_OK);
            assert_int_equal(tok, 2);
        }
    }
    /* two +inf logits share the whole probability */
    const float two_inf[5] = {INFINITY, 1.0f, 50.0f, INFINITY, -1.0f};
    int count[5] = {0};
    uint64_t rng = 1;
    for (int i = 0; i < 200; i++) {
        int32_t tok = -1;
        assert_int_equal(fc_llama_sample(two_inf, 5, &opts[1], &rng, &tok), FC_OK);
        count[tok]++;
    }
    assert_int_equal(count[0] + count[3], 200);
    assert_true(count[0] > 60 && count[3] > 60);
    /* -inf has probability 0, even at an infinite temperature (which is
     * uniform over the rest) */
    const float neg[3] = {-INFINITY, 0.0f, -INFINITY};
    for (int i = 0; i < 50; i++) {
        int32_t tok = -1;
        assert_int_equal(fc_llama_sample(neg, 3, &opts[4], &rng, &tok), FC_OK);
        assert_int_equal(tok, 1);
    }
    /* NaN logits and all -inf are refused */
    const float bad[3] = {0.0f, NAN, 1.0f};
    int32_t tok = -1;
    assert_int_equal(fc_llama_sample(bad, 3, &opts[0], &rng, &tok), FC_ERR_INVALID_ARG);
    const float none[2] = {-INFINITY, -INFINITY};
    assert_int_equal(fc_llama_sample(none, 2, &opts[0], &rng, &tok), FC_ERR_INVALID_ARG);
    assert_int_equal(tok, -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_hostile_block_count_huge),
        cmocka_unit_test(test_llama_hostile_key_types),
        cmocka_unit_test(test_llama_hostile_float_keys),
        cmocka_unit_test(test_llama_hostile_new_sizes),
        cmocka_unit_test(test_llama_hostile_new_values),
        cmocka_unit_test(test_llama_hostile_save_wide_sizes),
        cmocka_unit_test(test_llama_hostile_null_ids),
        cmocka_unit_test(test_llama_hostile_model_outlives_scope),
        cmocka_unit_test(test_llama_hostile_cache_outlives_scope),
        cmocka_unit_test(test_llama_hostile_lora_outlives_scope),
        cmocka_unit_test(test_llama_hostile_fuzz_seeds),
        cmocka_unit_test(test_llama_hostile_sample_inf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
