/* SPDX-License-Identifier: MIT */
/* test_llama_export.c - fc_llama_save_opts.kvs, the seam examples/
 * train_llama writes its tokenizer through: a model from fc_llama_new saved
 * with the byte-level tokenizer's keys must carry them (the "none"
 * tokenizer.ggml.model replaced in its place, not duplicated), read back
 * into the same tokenizer, still load as the same model, and keep an extra
 * key of its own; bad extra metadata is refused before anything is written. */
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
#include "fucina/tokenizer.h"

static const fc_ctx_opts ONE_THREAD = {.threads = 1};

static void tmp_path(char *buf, size_t cap, const char *tag) {
    snprintf(buf, cap, "%s/tests/test_llama_export_%ld_%s.gguf", FUCINA_BINARY_DIR, (long)getpid(),
             tag);
}

static fc_llama *small_model(fc_ctx *ctx, int64_t vocab) {
    fc_llama_config c = {.vocab = vocab,
                         .dim = 32,
                         .n_heads = 4,
                         .n_kv_heads = 2,
                         .n_layers = 1,
                         .ff_dim = 48,
                         .context = 16};
    fc_llama *m = NULL;
    assert_int_equal(fc_llama_new(ctx, &c, &m), FC_OK);
    return m;
}

static void test_save_with_tokenizer_keys(void **s) {
    (void)s;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_tokenizer *tok = NULL;
    assert_int_equal(fc_tokenizer_new_bytes(ctx, NULL, &tok), FC_OK);
    fc_llama *m = small_model(ctx, fc_tokenizer_vocab_size(tok));
    const fc_gguf_kv *tk = NULL;
    int64_t ntk = 0;
    assert_int_equal(fc_tokenizer_gguf_kvs(tok, &tk, &ntk), FC_OK);
    /* the tokenizer's keys and one more */
    fc_gguf_kv *kvs = calloc((size_t)ntk + 1, sizeof *kvs);
    assert_non_null(kvs);
    memcpy(kvs, tk, sizeof *kvs * (size_t)ntk);
    kvs[ntk] = (fc_gguf_kv){.key = "general.name", .type = FC_GGUF_STRING, .data = "test"};
    fc_llama_save_opts o = fc_llama_save_opts_default();
    o.kvs = kvs;
    o.n_kvs = ntk + 1;
    char path[512];
    tmp_path(path, sizeof path, "tok");
    assert_int_equal(fc_llama_save(ctx, m, path, &o), FC_OK);

    fc_gguf_file *g = NULL;
    assert_int_equal(fc_gguf_open(path, NULL, &g), FC_OK);
    int n_model_keys = 0;
    for (int64_t i = 0; i < fc_gguf_kv_count(g); i++)
        n_model_keys += !strcmp(fc_gguf_kv_key(g, i), "tokenizer.ggml.model");
    assert_int_equal(n_model_keys, 1);
    const char *str = NULL;
    size_t len = 0;
    assert_int_equal(fc_gguf_value_string(fc_gguf_kv_find(g, "tokenizer.ggml.model"), &str, &len),
                     FC_OK);
    assert_int_equal(len, 4);
    assert_memory_equal(str, "gpt2", 4);
    assert_int_equal(fc_gguf_value_string(fc_gguf_kv_find(g, "general.name"), &str, &len), FC_OK);
    assert_int_equal(len, 4);
    assert_memory_equal(str, "test", 4);
    /* the tokenizer read back encodes and decodes as the original */
    fc_tokenizer *back = NULL;
    assert_int_equal(fc_tokenizer_from_gguf(ctx, g, NULL, &back), FC_OK);
    assert_int_equal(fc_tokenizer_vocab_size(back), 258);
    assert_int_equal(fc_tokenizer_eos(back), fc_tokenizer_eos(tok));
    const char text[] = "h\xc3\xa9llo, w\x00rld\n";
    int32_t a[32], b[32];
    int64_t na = 0, nb = 0;
    assert_int_equal(fc_tokenizer_encode(ctx, tok, text, sizeof text - 1, 0, a, 32, &na), FC_OK);
    assert_int_equal(fc_tokenizer_encode(ctx, back, text, sizeof text - 1, 0, b, 32, &nb), FC_OK);
    assert_int_equal(na, (int64_t)sizeof text - 1); /* one token per byte */
    assert_int_equal(nb, na);
    assert_memory_equal(a, b, sizeof *a * (size_t)na);
    char dec[64];
    size_t dlen = 0;
    assert_int_equal(fc_tokenizer_decode(ctx, back, b, nb, 0, dec, sizeof dec, &dlen), FC_OK);
    assert_int_equal(dlen, sizeof text - 1);
    assert_memory_equal(dec, text, dlen);
    fc_tokenizer_free(back);
    fc_gguf_close(g);

    /* and the file is still the same model */
    fc_llama *r = NULL;
    assert_int_equal(fc_llama_load(ctx, path, NULL, &r), FC_OK);
    fc_tensor *t = fc_tensor_from_data(ctx, FC_I32, (int64_t[]){5}, 1, a);
    fc_tensor *y0 = fc_llama_forward(ctx, m, t), *y1 = fc_llama_forward(ctx, r, t);
    assert_non_null(y0);
    assert_non_null(y1);
    size_t bytes = fc_tensor_nbytes(y0);
    float *l0 = malloc(bytes), *l1 = malloc(bytes);
    assert_int_equal(fc_tensor_copy_out(l0, bytes, y0), FC_OK);
    assert_int_equal(fc_tensor_copy_out(l1, bytes, y1), FC_OK);
    assert_memory_equal(l0, l1, bytes);
    free(l0);
    free(l1);
    fc_release(t);
    fc_release(y0);
    fc_release(y1);
    fc_llama_free(r);
    unlink(path);
    free(kvs);
    fc_llama_free(m);
    fc_tokenizer_free(tok);
    free_ctx(ctx);
}

/* general.file_type of path: its value, -1 when the key is absent. */
static int64_t file_type(const char *path) {
    fc_gguf_file *g = NULL;
    assert_int_equal(fc_gguf_open(path, NULL, &g), FC_OK);
    const fc_gguf_value *v = fc_gguf_kv_find(g, "general.file_type");
    int64_t ft = -1;
    if (v) assert_int_equal(fc_gguf_value_int(v, &ft), FC_OK);
    fc_gguf_close(g);
    return ft;
}

/* general.file_type follows the dtypes written (llama.cpp's enum
 * llama_ftype): set for a new model, rewritten when a save converts the
 * weights, kept when nothing changes, dropped for a dtype llama.cpp's enum
 * does not name, and the caller's own value wins. */
static void test_file_type(void **s) {
    (void)s;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = small_model(ctx, 64);
    char f32[512], q8[512], again[512], back[512], mx[512], own[512];
    tmp_path(f32, sizeof f32, "ft_f32");
    tmp_path(q8, sizeof q8, "ft_q8");
    tmp_path(again, sizeof again, "ft_again");
    tmp_path(back, sizeof back, "ft_back");
    tmp_path(mx, sizeof mx, "ft_mx");
    tmp_path(own, sizeof own, "ft_own");
    assert_int_equal(fc_llama_save(ctx, m, f32, NULL), FC_OK);
    assert_int_equal(file_type(f32), 0); /* ALL_F32 */
    fc_llama *r = NULL;
    assert_int_equal(fc_llama_load(ctx, f32, NULL, &r), FC_OK);
    fc_llama_save_opts o = fc_llama_save_opts_default();
    o.dtype = FC_Q8_0;
    o.fallback = FC_F32; /* ffn_down's rows of 48: the one f32 weight */
    assert_int_equal(fc_llama_save(ctx, r, q8, &o), FC_OK);
    assert_int_equal(file_type(q8), 7); /* MOSTLY_Q8_0 */
    fc_llama_free(r);
    assert_int_equal(fc_llama_load(ctx, q8, NULL, &r), FC_OK);
    assert_int_equal(fc_llama_save(ctx, r, again, NULL), FC_OK); /* as it is: kept */
    assert_int_equal(file_type(again), 7);
    o.dtype = FC_F32;
    assert_int_equal(fc_llama_save(ctx, r, back, &o), FC_OK);
    assert_int_equal(file_type(back), 0);
    o.dtype = FC_MXFP4; /* a ggml type without a llama_ftype of its own */
    assert_int_equal(fc_llama_save(ctx, r, mx, &o), FC_OK);
    assert_int_equal(file_type(mx), -1);
    uint32_t mine = 15;
    fc_gguf_kv kv = {.key = "general.file_type", .type = FC_GGUF_U32, .data = &mine};
    o.dtype = FC_F32;
    o.kvs = &kv;
    o.n_kvs = 1;
    assert_int_equal(fc_llama_save(ctx, r, own, &o), FC_OK);
    assert_int_equal(file_type(own), 15);
    fc_llama_free(r);
    unlink(f32), unlink(q8), unlink(again), unlink(back), unlink(mx), unlink(own);
    fc_llama_free(m);
    free_ctx(ctx);
}

static void test_bad_extra_keys(void **s) {
    (void)s;
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama *m = small_model(ctx, 8);
    char path[512];
    tmp_path(path, sizeof path, "bad");
    unlink(path);
    fc_llama_save_opts o = fc_llama_save_opts_default();
    o.n_kvs = -1;
    assert_int_equal(fc_llama_save(ctx, m, path, &o), FC_ERR_INVALID_ARG);
    assert_non_null(strstr(fc_ctx_error(ctx), "fc_llama_save"));
    fc_ctx_clear_error(ctx);
    o.n_kvs = 1; /* and kvs NULL */
    assert_int_equal(fc_llama_save(ctx, m, path, &o), FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(ctx);
    /* the same new key twice: the writer refuses the duplicate */
    const fc_gguf_kv twice[2] = {{.key = "general.name", .type = FC_GGUF_STRING, .data = "a"},
                                 {.key = "general.name", .type = FC_GGUF_STRING, .data = "b"}};
    o.kvs = twice;
    o.n_kvs = 2;
    assert_int_equal(fc_llama_save(ctx, m, path, &o), FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(ctx);
    assert_int_equal(access(path, F_OK), -1); /* nothing written */
    fc_llama_free(m);
    free_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_save_with_tokenizer_keys),
        cmocka_unit_test(test_file_type),
        cmocka_unit_test(test_bad_extra_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
