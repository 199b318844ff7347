/* SPDX-License-Identifier: MIT */
/* test_tensor_io.c - model files as fc_tensor handles: zero-copy loads that
 * outlive their file handle, copy-in loads, and saves of any layout. The
 * reference files are the ones test_safetensors.c and test_gguf.c check
 * byte by byte; here the values come back through the tensor API. Every
 * test runs its context and files on one counting allocator and ends with
 * nothing live. */
#include "io_testutil.h"

#include "counting_alloc.h"
#include "exec/tensor.h"
#include "fucina.h"

#define ST_REF FUCINA_TEST_DATA_DIR "/io/st_reference.safetensors"
#define GGUF_REF FUCINA_TEST_DATA_DIR "/io/gguf_reference_v3.gguf"

typedef struct fixture {
    fct_counting c;
    fc_ctx *ctx;
    fc_io_opts o;
    char err[256];
} fixture;

static int setup(void **state) {
    fixture *fx = calloc(1, sizeof *fx);
    fct_counting_init(&fx->c);
    fc_ctx_opts co = {.threads = 1, .allocator = fct_counting_allocator(&fx->c)};
    fx->ctx = fc_ctx_new(&co);
    fx->o = (fc_io_opts){
        .allocator = fct_counting_allocator(&fx->c), .errbuf = fx->err, .errcap = sizeof fx->err};
    *state = fx;
    return fx->ctx ? 0 : -1;
}

static int teardown(void **state) {
    fixture *fx = *state;
    fc_ctx_free(fx->ctx);
    bool clean = fct_counting_clean(&fx->c);
    if (!clean) fct_counting_report(&fx->c, "tensor_io");
    free(fx);
    return clean ? 0 : -1;
}

static void test_tensor_io_safetensors_zero_copy_outlives_file(void **state) {
    fixture *fx = *state;
    fc_st_file *f;
    assert_int_equal(fc_safetensors_open(ST_REF, &fx->o, &f), FC_OK);
    fc_tensor *t = fc_safetensors_load(fx->ctx, f, "f32", 0);
    fc_tensor *s = fc_safetensors_load(fx->ctx, f, "scalar", 0);
    fc_tensor *h = fc_safetensors_load(fx->ctx, f, "bf16", 0);
    assert_non_null(t);
    assert_non_null(s);
    assert_non_null(h);
    fc_io_tensor info;
    assert_int_equal(fc_safetensors_tensor_info(f, fc_safetensors_find(f, "f32"), &info), FC_OK);
    assert_ptr_equal(fc_tensor_data(t), info.data); /* aliases the mapping */
    fc_safetensors_close(f);                        /* the tensors keep it alive */
    assert_int_equal(fc_tensor_dtype(t), FC_F32);
    assert_int_equal(fc_tensor_rank(t), 2);
    assert_int_equal(fc_tensor_dim(t, 0), 2);
    assert_int_equal(fc_tensor_dim(t, 1), 3);
    for (int64_t i = 0; i < 2; i++)
        for (int64_t j = 0; j < 3; j++) {
            double v;
            assert_int_equal(fc_tensor_element(t, (int64_t[]){i, j}, &v), FC_OK);
            assert_true(v == (double)(i * 3 + j) * 0.5 - 1.25);
        }
    assert_null(fc_tensor_data_mut(t));
    assert_int_equal(fc_ctx_status(fx->ctx), FC_ERR_READ_ONLY);
    fc_ctx_clear_error(fx->ctx);
    assert_int_equal(fc_tensor_rank(s), 1); /* shape [] loads as [1] */
    double v;
    assert_int_equal(fc_tensor_item(s, &v), FC_OK);
    assert_true(v == 3.5);
    assert_int_equal(fc_tensor_element(h, (int64_t[]){5}, &v), FC_OK);
    assert_true(v == 1.25);
    fc_release(t);
    fc_release(s);
    /* h is still alive: fc_ctx_free in teardown releases it and, with it,
     * the mapping's last reference. */
}

static void test_tensor_io_copy_mode_and_errors(void **state) {
    fixture *fx = *state;
    fc_st_file *f;
    assert_int_equal(fc_safetensors_open(ST_REF, &fx->o, &f), FC_OK);
    fc_tensor *t = fc_safetensors_load(fx->ctx, f, "i16", FC_IO_COPY);
    assert_non_null(t);
    int16_t *p = fc_tensor_data_mut(t);
    assert_non_null(p);
    static const int16_t want[4] = {-300, -1, 1, 32767};
    assert_memory_equal(p, want, sizeof want);
    p[0] = 5; /* the file is untouched */
    fc_io_tensor info;
    assert_int_equal(fc_safetensors_tensor_info(f, fc_safetensors_find(f, "i16"), &info), FC_OK);
    assert_memory_equal(info.data, want, sizeof want);
    fc_release(t);
    assert_null(fc_safetensors_load(fx->ctx, f, "missing", 0));
    assert_int_equal(fc_ctx_status(fx->ctx), FC_ERR_INDEX);
    assert_non_null(strstr(fc_ctx_error(fx->ctx), "missing"));
    fc_ctx_clear_error(fx->ctx);
    assert_null(fc_safetensors_load(fx->ctx, f, "empty", 0));
    assert_int_equal(fc_ctx_status(fx->ctx), FC_ERR_INVALID_SHAPE);
    assert_non_null(strstr(fc_ctx_error(fx->ctx), "'empty'"));
    fc_ctx_clear_error(fx->ctx);
    assert_null(fc_safetensors_load(fx->ctx, NULL, "f32", 0));
    assert_int_equal(fc_ctx_status(fx->ctx), FC_ERR_NULL_ARG);
    fc_ctx_clear_error(fx->ctx);
    assert_null(fc_safetensors_load(NULL, f, "f32", 0));
    fc_safetensors_close(f);
}

/* A tensor at an odd offset is copied, so its pointer is aligned. */
static void test_tensor_io_misaligned_bytes_are_copied(void **state) {
    fixture *fx = *state;
    const char *json = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[1,9]}}";
    size_t hl = strlen(json), size = 8 + hl + 9;
    uint8_t *blob = aligned_alloc(64, (size + 63) / 64 * 64);
    memset(blob, 0, size);
    for (int i = 0; i < 8; i++)
        blob[i] = (uint8_t)(hl >> (8 * i));
    memcpy(blob + 8, json, hl);
    const float vals[2] = {2.5f, -7.0f};
    memcpy(blob + 8 + hl + 1, vals, sizeof vals);
    fc_st_file *f;
    assert_int_equal(fc_safetensors_open_memory(blob, size, &fx->o, &f), FC_OK);
    fc_io_tensor info;
    assert_int_equal(fc_safetensors_tensor_info(f, 1, &info), FC_OK);
    assert_int_not_equal((uintptr_t)info.data % 4, 0); /* the case under test */
    fc_tensor *b = fc_safetensors_load(fx->ctx, f, "b", 0);
    assert_non_null(b);
    const void *data = fc_tensor_data(b);
    assert_ptr_not_equal(data, info.data);
    assert_int_equal((uintptr_t)data % 4, 0);
    assert_memory_equal(data, vals, sizeof vals);
    fc_safetensors_close(f);
    fc_release(b);
    free(blob);
}

static void test_tensor_io_gguf_quantized_zero_copy(void **state) {
    fixture *fx = *state;
    fc_gguf_file *f;
    assert_int_equal(fc_gguf_open(GGUF_REF, &fx->o, &f), FC_OK);
    fc_tensor *q = fc_gguf_load(fx->ctx, f, "q2_0_g128.t", 0);
    fc_tensor *g = fc_gguf_load(fx->ctx, f, "q2_0_g64.t", FC_IO_COPY);
    assert_non_null(q);
    assert_non_null(g);
    fc_gguf_close(f);
    assert_int_equal(fc_tensor_dtype(q), FC_Q2_0);
    assert_int_equal(fc_tensor_dtype(g), FC_Q2_0_G64);
    assert_int_equal(fc_tensor_dim(q, 0), 6);
    assert_int_equal(fc_tensor_dim(q, 1), 1024);
    size_t n;
    char path[512];
    snprintf(path, sizeof path, "%s/ggml/q2_0_g128/quant.bin", FUCINA_TEST_DATA_DIR);
    uint8_t *want = io_read_file(path, &n);
    assert_int_equal(fc_tensor_nbytes(q), n);
    assert_memory_equal(fc_tensor_data(q), want, n);
    free(want);
    snprintf(path, sizeof path, "%s/ggml/q2_0/quant.bin", FUCINA_TEST_DATA_DIR);
    want = io_read_file(path, &n);
    assert_int_equal(fc_tensor_nbytes(g), n);
    assert_memory_equal(fc_tensor_data(g), want, n);
    free(want);
    fc_release(q);
    fc_release(g);
}

/* Saving a contiguous tensor and a transposed view; both formats. */
static void test_tensor_io_save_any_layout(void **state) {
    fixture *fx = *state;
    char dir[512], st_path[600], gguf_path[600];
    io_scratch_dir(dir, sizeof dir, "tio");
    io_path(st_path, sizeof st_path, dir, "m.safetensors");
    io_path(gguf_path, sizeof gguf_path, dir, "m.gguf");
    const float v[6] = {1, 2, 3, 4, 5, 6};
    fc_tensor *a = fc_tensor_from_data(fx->ctx, FC_F32, (int64_t[]){2, 3}, 2, v);
    assert_non_null(a);
    /* a^T as a strided view: shape [3, 2], strides [1, 3] */
    fc_tensor *at = fc__tensor_view(fx->ctx, "test", a, (int64_t[]){3, 2}, (int64_t[]){1, 3}, 2, 0);
    assert_non_null(at);
    assert_false(fc_tensor_is_contiguous(at));
    const char *names[2] = {"a", "a_t"};
    fc_tensor *ts[2] = {a, at};
    const char *mk[1] = {"who"}, *mv[1] = {"fucina"};
    assert_int_equal(fc_safetensors_save(fx->ctx, st_path, names, ts, 2, mk, mv, 1), FC_OK);
    const char *arch = "t";
    fc_gguf_kv kv = {"general.architecture", FC_GGUF_STRING, 0, 0, arch};
    assert_int_equal(fc_gguf_save(fx->ctx, gguf_path, &kv, 1, names, ts, 2), FC_OK);
    static const float want_t[6] = {1, 4, 2, 5, 3, 6};
    fc_st_file *sf;
    fc_gguf_file *gf;
    assert_int_equal(fc_safetensors_open(st_path, &fx->o, &sf), FC_OK);
    assert_int_equal(fc_gguf_open(gguf_path, &fx->o, &gf), FC_OK);
    fc_tensor *back[4] = {fc_safetensors_load(fx->ctx, sf, "a", 0),
                          fc_safetensors_load(fx->ctx, sf, "a_t", 0),
                          fc_gguf_load(fx->ctx, gf, "a", 0), fc_gguf_load(fx->ctx, gf, "a_t", 0)};
    for (int k = 0; k < 4; k++) {
        assert_non_null(back[k]);
        bool tr = k % 2 == 1;
        assert_int_equal(fc_tensor_dim(back[k], 0), tr ? 3 : 2);
        assert_memory_equal(fc_tensor_data(back[k]), tr ? want_t : v, sizeof v);
        fc_release(back[k]);
    }
    assert_string_equal(fc_safetensors_meta_find(sf, "who"), "fucina");
    fc_safetensors_close(sf);
    fc_gguf_close(gf);
    /* Errors are returned and recorded: a block dtype has no safetensors
     * name; a NULL tensor. */
    static uint8_t blocks[18];
    fc_tensor *q = fc_tensor_from_data(fx->ctx, FC_Q4_0, (int64_t[]){32}, 1, blocks);
    assert_non_null(q);
    fc_tensor *qs[1] = {q};
    assert_int_equal(fc_safetensors_save(fx->ctx, st_path, names, qs, 1, NULL, NULL, 0),
                     FC_ERR_DTYPE);
    assert_non_null(strstr(fc_ctx_error(fx->ctx), "fc_safetensors_save"));
    fc_ctx_clear_error(fx->ctx);
    fc_tensor *nul[1] = {NULL};
    assert_int_equal(fc_gguf_save(fx->ctx, gguf_path, NULL, 0, names, nul, 1), FC_ERR_NULL_ARG);
    fc_ctx_clear_error(fx->ctx);
    fc_release(q);
    fc_release(at);
    fc_release(a);
    io_rm_rf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tensor_io_safetensors_zero_copy_outlives_file, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_tensor_io_copy_mode_and_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tensor_io_misaligned_bytes_are_copied, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_tensor_io_gguf_quantized_zero_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tensor_io_save_any_layout, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
