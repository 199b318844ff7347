/* SPDX-License-Identifier: MIT */
/* test_gguf.c - the GGUF reader and writer.
 *
 * References: tests/data/io/gguf_reference_v{2,3}.gguf, written by
 * scripts/gen_gguf.py from the specification with struct alone; their
 * quantized tensors are ggml's own bytes (tests/data/ggml/<type>/quant.bin),
 * compared here byte for byte. The expected metadata values are literals in
 * this file. The ggml type geometry table below restates ggml's
 * type_traits (blck_size, type_size) to check the id map against. Corrupt
 * files are in test_gguf_corrupt.c. */
#include "io_testutil.h"

#include "io/io.h"

#define REF_V3 FUCINA_TEST_DATA_DIR "/io/gguf_reference_v3.gguf"
#define REF_V2 FUCINA_TEST_DATA_DIR "/io/gguf_reference_v2.gguf"

static uint8_t *golden(const char *type, size_t *size) {
    char path[512];
    snprintf(path, sizeof path, "%s/ggml/%s/quant.bin", FUCINA_TEST_DATA_DIR, type);
    uint8_t *b = io_read_file(path, size);
    assert_non_null(b);
    return b;
}

/* ---- the type table --------------------------------------------------------------------- */

static void test_gguf_type_ids_match_ggml(void **state) {
    (void)state;
    /* id, dtype, ggml blck_size, ggml type_size (ggml type_traits) */
    static const struct {
        uint32_t id;
        fc_dtype dtype;
        int64_t blck;
        size_t bytes;
    } rows[] = {
        {0, FC_F32, 1, 4},         {1, FC_F16, 1, 2},         {2, FC_Q4_0, 32, 18},
        {3, FC_Q4_1, 32, 20},      {6, FC_Q5_0, 32, 22},      {7, FC_Q5_1, 32, 24},
        {8, FC_Q8_0, 32, 34},      {9, FC_Q8_1, 32, 36},      {10, FC_Q2_K, 256, 84},
        {11, FC_Q3_K, 256, 110},   {12, FC_Q4_K, 256, 144},   {13, FC_Q5_K, 256, 176},
        {14, FC_Q6_K, 256, 210},   {15, FC_Q8_K, 256, 292},   {16, FC_IQ2_XXS, 256, 66},
        {17, FC_IQ2_XS, 256, 74},  {18, FC_IQ3_XXS, 256, 98}, {19, FC_IQ1_S, 256, 50},
        {20, FC_IQ4_NL, 32, 18},   {21, FC_IQ3_S, 256, 110},  {22, FC_IQ2_S, 256, 82},
        {23, FC_IQ4_XS, 256, 136}, {24, FC_I8, 1, 1},         {25, FC_I16, 1, 2},
        {26, FC_I32, 1, 4},        {27, FC_I64, 1, 8},        {28, FC_F64, 1, 8},
        {29, FC_IQ1_M, 256, 56},   {30, FC_BF16, 1, 2},       {34, FC_TQ1_0, 256, 54},
        {35, FC_TQ2_0, 256, 66},   {39, FC_MXFP4, 32, 17},    {40, FC_NVFP4, 64, 36},
        {41, FC_Q1_0, 128, 18},    {42, FC_Q2_0_G64, 64, 18},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        fc_dtype d;
        uint32_t id;
        assert_int_equal(fc_gguf_dtype_of(rows[i].id, &d), FC_OK);
        assert_int_equal(d, rows[i].dtype);
        assert_int_equal(fc_dtype_block_elems(d), rows[i].blck);
        assert_int_equal(fc_dtype_size(d), rows[i].bytes);
        assert_int_equal(fc_gguf_type_of(d, &id), FC_OK);
        assert_int_equal(id, rows[i].id);
    }
    uint32_t id;
    assert_int_equal(fc_gguf_type_of(FC_Q2_0, &id), FC_OK); /* PrismML layout shares 42 */
    assert_int_equal(id, 42);
    static const uint32_t unknown[] = {4, 5, 31, 32, 33, 36, 37, 38, 43, 142, 0xFFFFFFFFu};
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
        fc_dtype d;
        assert_int_equal(fc_gguf_dtype_of(unknown[i], &d), FC_ERR_FORMAT);
    }
    static const fc_dtype none[] = {FC_BOOL, FC_U8, FC_U16, FC_F8_E4M3, FC_F8_E5M2, FC_NF4};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++)
        assert_int_equal(fc_gguf_type_of(none[i], &id), FC_ERR_DTYPE);
}

/* ---- reading the references ----------------------------------------------------------------- */

static void expect_tensor(const fc_gguf_file *f, const char *name, fc_dtype dtype, uint32_t gtype,
                          int rank, const int64_t *shape, const void *bytes, size_t n) {
    int64_t ix = fc_gguf_find(f, name);
    assert_true(ix >= 0);
    fc_io_tensor t;
    assert_int_equal(fc_gguf_tensor_info(f, ix, &t), FC_OK);
    assert_string_equal(t.name, name);
    assert_int_equal(t.dtype, dtype);
    assert_int_equal(t.ggml_type, gtype);
    assert_int_equal(t.rank, rank);
    for (int d = 0; d < rank; d++)
        assert_int_equal(t.shape[d], shape[d]);
    assert_int_equal(t.nbytes, n);
    assert_int_equal(t.offset % fc_gguf_alignment(f), 0);
    assert_memory_equal(t.data, bytes, n);
}

static void check_v3_metadata(const fc_gguf_file *f) {
    assert_int_equal(fc_gguf_version(f), 3);
    assert_int_equal(fc_gguf_alignment(f), 64);
    assert_int_equal(fc_gguf_kv_count(f), 20);
    assert_string_equal(fc_gguf_kv_key(f, 0), "general.architecture");
    assert_null(fc_gguf_kv_key(f, 20));
    const char *s;
    size_t len;
    assert_int_equal(fc_gguf_value_string(fc_gguf_kv_value(f, 0), &s, &len), FC_OK);
    assert_int_equal(len, 11);
    assert_memory_equal(s, "fucina-test", 11);
    int64_t i;
    uint64_t u;
    double d;
    bool b;
    assert_int_equal(fc_gguf_value_uint(fc_gguf_kv_find(f, "t.u8"), &u), FC_OK);
    assert_int_equal(u, 200);
    assert_int_equal(fc_gguf_value_int(fc_gguf_kv_find(f, "t.i8"), &i), FC_OK);
    assert_int_equal(i, -100);
    assert_int_equal(fc_gguf_value_uint(fc_gguf_kv_find(f, "t.i8"), &u), FC_ERR_OVERFLOW);
    assert_int_equal(fc_gguf_value_int(fc_gguf_kv_find(f, "t.u16"), &i), FC_OK);
    assert_int_equal(i, 60000);
    assert_int_equal(fc_gguf_value_int(fc_gguf_kv_find(f, "t.i16"), &i), FC_OK);
    assert_int_equal(i, -30000);
    assert_int_equal(fc_gguf_value_uint(fc_gguf_kv_find(f, "t.u32"), &u), FC_OK);
    assert_int_equal(u, 4000000000u);
    assert_int_equal(fc_gguf_value_int(fc_gguf_kv_find(f, "t.i32"), &i), FC_OK);
    assert_int_equal(i, -2000000000);
    assert_int_equal(fc_gguf_value_float(fc_gguf_kv_find(f, "t.f32"), &d), FC_OK);
    assert_true(d == 0.15625);
    assert_int_equal(fc_gguf_value_int(fc_gguf_kv_find(f, "t.f32"), &i), FC_ERR_DTYPE);
    assert_int_equal(fc_gguf_value_bool(fc_gguf_kv_find(f, "t.bool"), &b), FC_OK);
    assert_true(b);
    assert_int_equal(fc_gguf_value_uint(fc_gguf_kv_find(f, "t.u64"), &u), FC_OK);
    assert_true(u == ((uint64_t)1 << 63) + 7);
    assert_int_equal(fc_gguf_value_int(fc_gguf_kv_find(f, "t.u64"), &i), FC_ERR_OVERFLOW);
    assert_int_equal(fc_gguf_value_int(fc_gguf_kv_find(f, "t.i64"), &i), FC_OK);
    assert_true(i == -((int64_t)1 << 62));
    assert_int_equal(fc_gguf_value_float(fc_gguf_kv_find(f, "t.f64"), &d), FC_OK);
    assert_true(d == 0.1);
    assert_int_equal(fc_gguf_value_string(fc_gguf_kv_find(f, "t.str.empty"), &s, &len), FC_OK);
    assert_int_equal(len, 0);
    assert_int_equal(fc_gguf_value_string(fc_gguf_kv_find(f, "t.u8"), &s, &len), FC_ERR_DTYPE);
    /* arrays */
    const fc_gguf_value *a = fc_gguf_kv_find(f, "t.arr.i32");
    fc_gguf_type et;
    uint64_t n;
    assert_int_equal(fc_gguf_array_info(a, &et, &n), FC_OK);
    assert_int_equal(et, FC_GGUF_I32);
    assert_int_equal(n, 3);
    static const int64_t want_i[3] = {1, -2, 3};
    for (uint64_t k = 0; k < 3; k++) {
        assert_int_equal(fc_gguf_array_int(a, k, &i), FC_OK);
        assert_int_equal(i, want_i[k]);
    }
    assert_int_equal(fc_gguf_array_int(a, 3, &i), FC_ERR_INDEX);
    assert_null(fc_gguf_array_item(a, 0)); /* numbers have no item nodes */
    const void *raw;
    size_t es;
    assert_int_equal(fc_gguf_array_data(a, &raw, &es), FC_OK);
    assert_int_equal(es, 4);
    a = fc_gguf_kv_find(f, "t.arr.str");
    assert_int_equal(fc_gguf_array_info(a, &et, &n), FC_OK);
    assert_int_equal(et, FC_GGUF_STRING);
    assert_int_equal(n, 3);
    static const char *want_s[3] = {"a", "", "h\xc3\xa9llo"};
    for (uint64_t k = 0; k < 3; k++) {
        assert_int_equal(fc_gguf_value_string(fc_gguf_array_item(a, k), &s, &len), FC_OK);
        assert_int_equal(len, strlen(want_s[k]));
        assert_memory_equal(s, want_s[k], len);
    }
    assert_null(fc_gguf_array_item(a, 3));
    assert_int_equal(fc_gguf_array_int(a, 0, &i), FC_ERR_DTYPE);
    a = fc_gguf_kv_find(f, "t.arr.nested");
    assert_int_equal(fc_gguf_array_info(a, &et, &n), FC_OK);
    assert_int_equal(et, FC_GGUF_ARRAY);
    assert_int_equal(n, 3);
    const fc_gguf_value *a0 = fc_gguf_array_item(a, 0), *a1 = fc_gguf_array_item(a, 1),
                        *a2 = fc_gguf_array_item(a, 2);
    assert_int_equal(fc_gguf_array_info(a0, &et, &n), FC_OK);
    assert_true(et == FC_GGUF_U8 && n == 2);
    assert_int_equal(fc_gguf_array_uint(a0, 1, &u), FC_OK);
    assert_int_equal(u, 2);
    assert_int_equal(fc_gguf_array_info(a1, &et, &n), FC_OK);
    assert_true(et == FC_GGUF_STRING && n == 1);
    assert_int_equal(fc_gguf_value_string(fc_gguf_array_item(a1, 0), &s, &len), FC_OK);
    assert_true(len == 1 && s[0] == 'x');
    assert_int_equal(fc_gguf_array_info(a2, &et, &n), FC_OK);
    assert_true(et == FC_GGUF_F32 && n == 0);
    a = fc_gguf_kv_find(f, "t.arr.bool");
    static const int64_t want_b[3] = {1, 0, 1};
    for (uint64_t k = 0; k < 3; k++) {
        assert_int_equal(fc_gguf_array_int(a, k, &i), FC_OK);
        assert_int_equal(i, want_b[k]);
    }
    a = fc_gguf_kv_find(f, "t.arr.f64");
    assert_int_equal(fc_gguf_array_float(a, 1, &d), FC_OK);
    assert_true(d == -0.25);
    assert_int_equal(fc_gguf_array_info(fc_gguf_kv_find(f, "t.arr.empty"), &et, &n), FC_OK);
    assert_true(et == FC_GGUF_U32 && n == 0);
    assert_null(fc_gguf_kv_find(f, "absent"));
    assert_int_equal(fc_gguf_value_type(NULL), FC_GGUF_TYPE_COUNT);
    assert_int_equal(fc_gguf_array_info(fc_gguf_kv_find(f, "t.u8"), &et, &n), FC_ERR_DTYPE);
}

static void check_v3_tensors(const fc_gguf_file *f) {
    assert_int_equal(fc_gguf_tensor_count(f), 7);
    float f32[6];
    for (int k = 0; k < 6; k++)
        f32[k] = (float)k * 0.5f - 1.25f;
    expect_tensor(f, "f32.t", FC_F32, 0, 2, (int64_t[]){2, 3}, f32, sizeof f32);
    static const uint16_t f16[4] = {0x3C00, 0xC000, 0x3800, 0x7BFF}; /* 1 -2 0.5 65504 */
    expect_tensor(f, "f16.t", FC_F16, 1, 1, (int64_t[]){4}, f16, sizeof f16);
    static const int8_t i8[5] = {-128, -1, 0, 1, 127};
    expect_tensor(f, "i8.t", FC_I8, 24, 1, (int64_t[]){5}, i8, sizeof i8);
    static const uint16_t bf16[4] = {0x3F80, 0xC000, 0x3F00, 0x7F80};
    expect_tensor(f, "bf16.t", FC_BF16, 30, 2, (int64_t[]){2, 2}, bf16, sizeof bf16);
    size_t n;
    uint8_t *q = golden("q4_0", &n);
    expect_tensor(f, "q4_0.t", FC_Q4_0, 2, 2, (int64_t[]){6, 1024}, q, n);
    free(q);
    q = golden("q2_0", &n);
    expect_tensor(f, "q2_0_g64.t", FC_Q2_0_G64, 42, 2, (int64_t[]){6, 1024}, q, n);
    free(q);
    q = golden("q2_0_g128", &n);
    expect_tensor(f, "q2_0_g128.t", FC_Q2_0, 42, 2, (int64_t[]){6, 1024}, q, n);
    free(q);
}

static void test_gguf_reads_reference_v3(void **state) {
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        io_count c;
        io_count_init(&c);
        char err[256] = "";
        fc_io_opts o = {.allocator = &c.a,
                        .flags = mode ? FC_IO_NO_MMAP : 0,
                        .errbuf = err,
                        .errcap = sizeof err};
        fc_gguf_file *f;
        fc_status st = fc_gguf_open(REF_V3, &o, &f);
        if (st != FC_OK) fprintf(stderr, "%s\n", err);
        assert_int_equal(st, FC_OK);
        check_v3_metadata(f);
        check_v3_tensors(f);
        fc_gguf_close(f);
        io_count_assert_clean(&c);
    }
}

static void test_gguf_reads_reference_v2(void **state) {
    (void)state;
    io_count c;
    io_count_init(&c);
    fc_io_opts o = {.allocator = &c.a};
    fc_gguf_file *f;
    assert_int_equal(fc_gguf_open(REF_V2, &o, &f), FC_OK);
    assert_int_equal(fc_gguf_version(f), 2);
    assert_int_equal(fc_gguf_alignment(f), 32);
    uint64_t u;
    assert_int_equal(fc_gguf_value_uint(fc_gguf_kv_find(f, "t.u32"), &u), FC_OK);
    assert_int_equal(u, 7);
    size_t n;
    uint8_t *q = golden("q8_0", &n);
    expect_tensor(f, "q8_0.t", FC_Q8_0, 8, 2, (int64_t[]){6, 1024}, q, n);
    free(q);
    fc_gguf_close(f);
    io_count_assert_clean(&c);
}

/* Every proper prefix of a valid file fails cleanly: nothing is read past
 * the end (ASan would see it) and nothing leaks. */
static void test_gguf_every_truncation_fails(void **state) {
    (void)state;
    size_t size;
    uint8_t *blob = io_read_file(REF_V3, &size);
    assert_non_null(blob);
    io_count c;
    io_count_init(&c);
    fc_io_opts o = {.allocator = &c.a};
    /* The shortest valid prefix ends with the last tensor's data (the
     * padding after it is optional). */
    fc_gguf_file *f = NULL;
    assert_int_equal(fc_gguf_open_memory(blob, size, &o, &f), FC_OK);
    fc_io_tensor last;
    assert_int_equal(fc_gguf_tensor_info(f, fc_gguf_tensor_count(f) - 1, &last), FC_OK);
    size_t min_ok = (size_t)(last.offset + last.nbytes);
    fc_gguf_close(f);
    for (size_t cut = 0; cut <= size; cut += (cut < 1200 || cut + 80 > min_ok ? 1 : 61)) {
        uint8_t *copy = malloc(cut ? cut : 1); /* exact size: ASan guards the end */
        memcpy(copy, blob, cut);
        f = NULL;
        fc_status st = fc_gguf_open_memory(copy, cut, &o, &f);
        assert_int_equal(st, cut < min_ok ? FC_ERR_FORMAT : FC_OK);
        if (st != FC_OK) assert_null(f);
        fc_gguf_close(f);
        free(copy);
    }
    io_count_assert_clean(&c);
    free(blob);
}

/* ---- writing --------------------------------------------------------------------------------- */

/* The v3 reference, rebuilt through fc_gguf_write: must be byte-identical
 * to what the independent Python writer produced. */
static void test_gguf_writer_reproduces_reference(void **state) {
    (void)state;
    const uint8_t u8 = 200;
    const int8_t i8v = -100;
    const uint16_t u16 = 60000;
    const int16_t i16 = -30000;
    const uint32_t u32 = 4000000000u, al = 64;
    const int32_t i32 = -2000000000;
    const float f32v = 0.15625f;
    const bool bt = true;
    const uint64_t u64 = ((uint64_t)1 << 63) + 7;
    const int64_t i64 = -((int64_t)1 << 62);
    const double f64 = 0.1;
    const int32_t ai32[3] = {1, -2, 3};
    const char *astr[3] = {"a", "", "h\xc3\xa9llo"};
    const uint8_t nu8[2] = {1, 2};
    const char *nstr[1] = {"x"};
    const fc_gguf_kv nested[3] = {
        {NULL, FC_GGUF_ARRAY, FC_GGUF_U8, 2, nu8},
        {NULL, FC_GGUF_ARRAY, FC_GGUF_STRING, 1, nstr},
        {NULL, FC_GGUF_ARRAY, FC_GGUF_F32, 0, NULL},
    };
    const bool abool[3] = {true, false, true};
    const double af64[2] = {0.5, -0.25};
    const fc_gguf_kv kvs[20] = {
        {"general.architecture", FC_GGUF_STRING, 0, 0, "fucina-test"},
        {"general.alignment", FC_GGUF_U32, 0, 0, &al},
        {"t.u8", FC_GGUF_U8, 0, 0, &u8},
        {"t.i8", FC_GGUF_I8, 0, 0, &i8v},
        {"t.u16", FC_GGUF_U16, 0, 0, &u16},
        {"t.i16", FC_GGUF_I16, 0, 0, &i16},
        {"t.u32", FC_GGUF_U32, 0, 0, &u32},
        {"t.i32", FC_GGUF_I32, 0, 0, &i32},
        {"t.f32", FC_GGUF_F32, 0, 0, &f32v},
        {"t.bool", FC_GGUF_BOOL, 0, 0, &bt},
        {"t.u64", FC_GGUF_U64, 0, 0, &u64},
        {"t.i64", FC_GGUF_I64, 0, 0, &i64},
        {"t.f64", FC_GGUF_F64, 0, 0, &f64},
        {"t.str.empty", FC_GGUF_STRING, 0, 0, ""},
        {"t.arr.i32", FC_GGUF_ARRAY, FC_GGUF_I32, 3, ai32},
        {"t.arr.str", FC_GGUF_ARRAY, FC_GGUF_STRING, 3, astr},
        {"t.arr.nested", FC_GGUF_ARRAY, FC_GGUF_ARRAY, 3, nested},
        {"t.arr.bool", FC_GGUF_ARRAY, FC_GGUF_BOOL, 3, abool},
        {"t.arr.f64", FC_GGUF_ARRAY, FC_GGUF_F64, 2, af64},
        {"t.arr.empty", FC_GGUF_ARRAY, FC_GGUF_U32, 0, NULL},
    };
    float f32[6];
    for (int k = 0; k < 6; k++)
        f32[k] = (float)k * 0.5f - 1.25f;
    static const uint16_t f16[4] = {0x3C00, 0xC000, 0x3800, 0x7BFF};
    static const int8_t ti8[5] = {-128, -1, 0, 1, 127};
    static const uint16_t bf16[4] = {0x3F80, 0xC000, 0x3F00, 0x7F80};
    size_t nq4, nq2, nq2b;
    uint8_t *q4 = golden("q4_0", &nq4), *q2 = golden("q2_0", &nq2),
            *q2b = golden("q2_0_g128", &nq2b);
    const fc_io_tensor t[7] = {
        {.name = "f32.t", .dtype = FC_F32, .rank = 2, .shape = {2, 3}, .data = f32, .nbytes = 24},
        {.name = "f16.t", .dtype = FC_F16, .rank = 1, .shape = {4}, .data = f16, .nbytes = 8},
        {.name = "q4_0.t",
         .dtype = FC_Q4_0,
         .rank = 2,
         .shape = {6, 1024},
         .data = q4,
         .nbytes = nq4},
        {.name = "q2_0_g64.t",
         .dtype = FC_Q2_0_G64,
         .rank = 2,
         .shape = {6, 1024},
         .data = q2,
         .nbytes = nq2},
        {.name = "q2_0_g128.t",
         .dtype = FC_Q2_0,
         .rank = 2,
         .shape = {6, 1024},
         .data = q2b,
         .nbytes = nq2b},
        {.name = "i8.t", .dtype = FC_I8, .rank = 1, .shape = {5}, .data = ti8, .nbytes = 5},
        {.name = "bf16.t", .dtype = FC_BF16, .rank = 2, .shape = {2, 2}, .data = bf16, .nbytes = 8},
    };
    char dir[512], path[600];
    io_scratch_dir(dir, sizeof dir, "gguf-w");
    io_path(path, sizeof path, dir, "out.gguf");
    io_count c;
    io_count_init(&c);
    char err[256] = "";
    fc_io_opts o = {.allocator = &c.a, .errbuf = err, .errcap = sizeof err};
    fc_status st = fc_gguf_write(path, kvs, 20, t, 7, &o);
    if (st != FC_OK) fprintf(stderr, "%s\n", err);
    assert_int_equal(st, FC_OK);
    io_count_assert_clean(&c);
    size_t a_size, b_size;
    uint8_t *a = io_read_file(path, &a_size), *b = io_read_file(REF_V3, &b_size);
    assert_int_equal(a_size, b_size);
    assert_memory_equal(a, b, a_size);
    fc_gguf_file *f;
    assert_int_equal(fc_gguf_open(path, &o, &f), FC_OK);
    check_v3_metadata(f);
    check_v3_tensors(f);
    fc_gguf_close(f);
    /* Out-of-memory sweep of the writer: the old file stays intact. */
    int ok_at = -1;
    for (int n = 0; n < 100 && ok_at < 0; n++) {
        io_count cc;
        io_count_init(&cc);
        cc.fail_after = n;
        fc_io_opts oo = {.allocator = &cc.a};
        st = fc_gguf_write(path, kvs, 20, t, 7, &oo);
        assert_true(st == FC_OK || st == FC_ERR_OOM);
        io_count_assert_clean(&cc);
        if (st == FC_OK) ok_at = n;
        size_t now_size;
        uint8_t *now = io_read_file(path, &now_size);
        assert_int_equal(now_size, b_size);
        assert_memory_equal(now, b, b_size);
        free(now);
    }
    assert_true(ok_at > 0);
    assert_int_equal(io_count_temps(dir), 0);
    io_count_assert_clean(&c);
    free(a);
    free(b);
    free(q4);
    free(q2);
    free(q2b);
    io_rm_rf(dir);
}

static void test_gguf_open_oom_sweep(void **state) {
    (void)state;
    int ok_at = -1;
    for (int n = 0; n < 200 && ok_at < 0; n++) {
        io_count c;
        io_count_init(&c);
        c.fail_after = n;
        fc_io_opts o = {.allocator = &c.a};
        fc_gguf_file *f = NULL;
        fc_status st = fc_gguf_open(REF_V3, &o, &f);
        assert_true(st == FC_OK || st == FC_ERR_OOM);
        if (st == FC_OK) {
            ok_at = n;
            check_v3_metadata(f);
            fc_gguf_close(f);
        }
        io_count_assert_clean(&c);
    }
    assert_true(ok_at > 0);
}

static void test_gguf_write_refuses_bad_input(void **state) {
    (void)state;
    char dir[512], path[600];
    io_scratch_dir(dir, sizeof dir, "gguf-wbad");
    io_path(path, sizeof path, dir, "w.gguf");
    static uint8_t blocks[34 * 8];
    const float x[4] = {0};
    const fc_io_tensor ok = {
        .name = "x", .dtype = FC_F32, .rank = 1, .shape = {4}, .data = x, .nbytes = 16};
    struct {
        fc_io_tensor t;
        fc_status want;
        const char *msg;
    } cases[] = {
        {ok, FC_ERR_DTYPE, "has no ggml type"},
        {ok, FC_ERR_RANK, "rank 5"},
        {ok, FC_ERR_INVALID_SHAPE, "dim 0 is 0"},
        {ok, FC_ERR_INVALID_SHAPE, "not a multiple of q4_0's block 32"},
        {ok, FC_ERR_DATA_LENGTH, "nbytes 12"},
        {ok, FC_ERR_INVALID_ARG, "ggml loads names shorter than 64"},
        /* 128 elements: q2_0 is 34 bytes, q2_0_g64 36; both pad to 64 at
         * alignment 32, so a reader could not tell them apart. */
        {{.name = "q", .dtype = FC_Q2_0, .rank = 1, .shape = {128}, .data = blocks, .nbytes = 34},
         FC_ERR_DTYPE,
         "could not tell"},
        {{.name = "q",
          .dtype = FC_Q2_0_G64,
          .rank = 1,
          .shape = {128},
          .data = blocks,
          .nbytes = 36},
         FC_ERR_DTYPE,
         "could not tell"},
    };
    cases[0].t.dtype = FC_U8, cases[0].t.nbytes = 4;
    cases[1].t.rank = 5;
    cases[2].t.shape[0] = 0;
    cases[3].t.dtype = FC_Q4_0, cases[3].t.shape[0] = 16;
    cases[4].t.nbytes = 12;
    cases[5].t.name = "a_name_that_is_exactly_sixty_four_bytes_long_which_ggml_refuses_";
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        io_count c;
        io_count_init(&c);
        char err[256] = "";
        fc_io_opts o = {.allocator = &c.a, .errbuf = err, .errcap = sizeof err};
        fc_status st = fc_gguf_write(path, NULL, 0, &cases[i].t, 1, &o);
        if (st != cases[i].want || !strstr(err, cases[i].msg))
            fprintf(stderr, "case %zu: %s '%s'\n", i, fc_status_name(st), err);
        assert_int_equal(st, cases[i].want);
        assert_non_null(strstr(err, cases[i].msg));
        io_count_assert_clean(&c);
        assert_int_equal(access(path, F_OK), -1);
    }
    /* Duplicates, bad alignment, bad types. */
    fc_io_tensor two[2] = {ok, ok};
    assert_int_equal(fc_gguf_write(path, NULL, 0, two, 2, NULL), FC_ERR_INVALID_ARG);
    const uint32_t three = 3, one = 1;
    fc_gguf_kv kv = {"general.alignment", FC_GGUF_U32, 0, 0, &three};
    assert_int_equal(fc_gguf_write(path, &kv, 1, &ok, 1, NULL), FC_ERR_INVALID_ARG);
    kv.type = FC_GGUF_U64;
    assert_int_equal(fc_gguf_write(path, &kv, 1, &ok, 1, NULL), FC_ERR_INVALID_ARG);
    fc_gguf_kv dup[2] = {{"k", FC_GGUF_U32, 0, 0, &one}, {"k", FC_GGUF_U32, 0, 0, &one}};
    assert_int_equal(fc_gguf_write(path, dup, 2, NULL, 0, NULL), FC_ERR_INVALID_ARG);
    fc_gguf_kv badt = {"k", (fc_gguf_type)13, 0, 0, &one};
    assert_int_equal(fc_gguf_write(path, &badt, 1, NULL, 0, NULL), FC_ERR_INVALID_ARG);
    fc_gguf_kv nullv = {"k", FC_GGUF_STRING, 0, 0, NULL};
    assert_int_equal(fc_gguf_write(path, &nullv, 1, NULL, 0, NULL), FC_ERR_NULL_ARG);
    /* keys and tensor names must be UTF-8: an overlong, a surrogate, a code
     * point above U+10FFFF, a truncated sequence; the message names which */
    static const char *const bad_utf8[] = {"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                           "a\xe2\x82"};
    for (size_t i = 0; i < sizeof bad_utf8 / sizeof *bad_utf8; i++) {
        char err[256] = "";
        fc_io_opts o = {.errbuf = err, .errcap = sizeof err};
        fc_gguf_kv kvs[2] = {{"fine", FC_GGUF_U32, 0, 0, &one},
                             {bad_utf8[i], FC_GGUF_U32, 0, 0, &one}};
        assert_int_equal(fc_gguf_write(path, kvs, 2, NULL, 0, &o), FC_ERR_INVALID_ARG);
        assert_non_null(strstr(err, "gguf_write: key 1 is not valid UTF-8"));
        fc_io_tensor ts[2] = {ok, ok};
        ts[1].name = bad_utf8[i];
        assert_int_equal(fc_gguf_write(path, NULL, 0, ts, 2, &o), FC_ERR_INVALID_ARG);
        assert_non_null(strstr(err, "gguf_write: tensor 1: name is not valid UTF-8"));
    }
    assert_int_equal(access(path, F_OK), -1);
    /* With alignment 1 the two layouts of id 42 stay distinguishable. */
    kv = (fc_gguf_kv){"general.alignment", FC_GGUF_U32, 0, 0, &one};
    assert_int_equal(fc_gguf_write(path, &kv, 1, &cases[6].t, 1, NULL), FC_OK);
    fc_gguf_file *f;
    assert_int_equal(fc_gguf_open(path, NULL, &f), FC_OK);
    fc_io_tensor got;
    assert_int_equal(fc_gguf_tensor_info(f, 0, &got), FC_OK);
    assert_int_equal(got.dtype, FC_Q2_0);
    assert_int_equal(got.nbytes, 34);
    fc_gguf_close(f);
    io_rm_rf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf_type_ids_match_ggml),
        cmocka_unit_test(test_gguf_reads_reference_v3),
        cmocka_unit_test(test_gguf_reads_reference_v2),
        cmocka_unit_test(test_gguf_every_truncation_fails),
        cmocka_unit_test(test_gguf_writer_reproduces_reference),
        cmocka_unit_test(test_gguf_open_oom_sweep),
        cmocka_unit_test(test_gguf_write_refuses_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
