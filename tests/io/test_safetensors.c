/* SPDX-License-Identifier: MIT */
/* test_safetensors.c - the safetensors reader and writer.
 *
 * The reference file tests/data/io/st_reference.safetensors was written by
 * scripts/gen_safetensors.py (struct + json + torch, no fucina code); the
 * expected contents below are this file's own table: the f16 and bf16 bit
 * patterns are written out by hand, not computed with fucina's converters.
 * Files fucina writes are checked by reading them back, by their raw layout,
 * and, when /usr/bin/python3 has torch, by the generator's `check` mode.
 * Every corrupt file must fail with its own status code and message and
 * leak nothing (counting allocator). */
#include "io_testutil.h"

#include "core/buffer.h"
#include "io/io.h"

/* ---- the expected contents ------------------------------------------------------ */

typedef struct exp_tensor {
    const char *name;
    fc_dtype dtype;
    int rank;
    int64_t shape[2];
    size_t nbytes;
    uint8_t bytes[48];
} exp_tensor;

#define N_EXP 16
static exp_tensor EXP[N_EXP];

static void put_bytes(exp_tensor *e, const void *p, size_t n) {
    memcpy(e->bytes, p, n);
    e->nbytes = n;
}

static void build_expected(void) {
    int k = 0;
    exp_tensor *e;
    float f32[6];
    for (int i = 0; i < 6; i++)
        f32[i] = (float)i * 0.5f - 1.25f;
    e = &EXP[k++], *e = (exp_tensor){"f32", FC_F32, 2, {2, 3}, 0, {0}};
    put_bytes(e, f32, sizeof f32);
    /* -1.25 -0.75 -0.25 0.25 0.75 1.25 as IEEE half and bfloat16 bits */
    const uint16_t f16[6] = {0xBD00, 0xBA00, 0xB400, 0x3400, 0x3A00, 0x3D00};
    const uint16_t bf16[6] = {0xBFA0, 0xBF40, 0xBE80, 0x3E80, 0x3F40, 0x3FA0};
    e = &EXP[k++], *e = (exp_tensor){"f16", FC_F16, 2, {3, 2}, 0, {0}};
    put_bytes(e, f16, sizeof f16);
    e = &EXP[k++], *e = (exp_tensor){"bf16", FC_BF16, 1, {6, 0}, 0, {0}};
    put_bytes(e, bf16, sizeof bf16);
    double f64[4];
    for (int i = 0; i < 4; i++)
        f64[i] = (double)i * 0.1;
    e = &EXP[k++], *e = (exp_tensor){"f64", FC_F64, 2, {2, 2}, 0, {0}};
    put_bytes(e, f64, sizeof f64);
    const int64_t i64[3] = {-((int64_t)1 << 40), 0, ((int64_t)1 << 62) + 5};
    e = &EXP[k++], *e = (exp_tensor){"i64", FC_I64, 1, {3, 0}, 0, {0}};
    put_bytes(e, i64, sizeof i64);
    const int32_t i32[4] = {-7, 0, 7, INT32_MAX};
    e = &EXP[k++], *e = (exp_tensor){"i32", FC_I32, 1, {4, 0}, 0, {0}};
    put_bytes(e, i32, sizeof i32);
    const int16_t i16[4] = {-300, -1, 1, 32767};
    e = &EXP[k++], *e = (exp_tensor){"i16", FC_I16, 2, {2, 2}, 0, {0}};
    put_bytes(e, i16, sizeof i16);
    const int8_t i8[4] = {-128, -1, 0, 127};
    e = &EXP[k++], *e = (exp_tensor){"i8", FC_I8, 1, {4, 0}, 0, {0}};
    put_bytes(e, i8, sizeof i8);
    const uint16_t u16[3] = {0, 1000, 65535};
    e = &EXP[k++], *e = (exp_tensor){"u16", FC_U16, 1, {3, 0}, 0, {0}};
    put_bytes(e, u16, sizeof u16);
    const uint8_t u8[5] = {0, 1, 2, 254, 255};
    e = &EXP[k++], *e = (exp_tensor){"u8", FC_U8, 1, {5, 0}, 0, {0}};
    put_bytes(e, u8, sizeof u8);
    const uint8_t bl[4] = {1, 0, 0, 1};
    e = &EXP[k++], *e = (exp_tensor){"bool", FC_BOOL, 2, {2, 2}, 0, {0}};
    put_bytes(e, bl, sizeof bl);
    const uint8_t e4[4] = {0x38, 0xB8, 0x40, 0x7F}, e5[4] = {0x3C, 0xBC, 0x40, 0x7C};
    e = &EXP[k++], *e = (exp_tensor){"f8_e4m3", FC_F8_E4M3, 1, {4, 0}, 0, {0}};
    put_bytes(e, e4, 4);
    e = &EXP[k++], *e = (exp_tensor){"f8_e5m2", FC_F8_E5M2, 1, {4, 0}, 0, {0}};
    put_bytes(e, e5, 4);
    const float sc = 3.5f;
    e = &EXP[k++], *e = (exp_tensor){"scalar", FC_F32, 0, {0, 0}, 0, {0}};
    put_bytes(e, &sc, 4);
    e = &EXP[k++], *e = (exp_tensor){"empty", FC_F32, 2, {0, 3}, 0, {0}};
    const float w[2] = {1.0f, -2.0f};
    e = &EXP[k++], *e = (exp_tensor){"layers.0.w\xc3\xa9ight", FC_F32, 1, {2, 0}, 0, {0}};
    put_bytes(e, w, sizeof w);
    assert_int_equal(k, N_EXP);
}

static const char *META_K[2] = {"format", "note"};
static const char *META_V[2] = {"pt", "fucina \xe2\x9c\x93 \"quoted\""};

/* Checks an open file against EXP and the metadata. */
static void check_contents(const fc_st_file *f, size_t file_size) {
    assert_int_equal(fc_safetensors_tensor_count(f), N_EXP);
    for (int i = 0; i < N_EXP; i++) {
        const exp_tensor *e = &EXP[i];
        int64_t ix = fc_safetensors_find(f, e->name);
        assert_true(ix >= 0);
        fc_io_tensor t;
        assert_int_equal(fc_safetensors_tensor_info(f, ix, &t), FC_OK);
        assert_string_equal(t.name, e->name);
        assert_int_equal(t.dtype, e->dtype);
        assert_int_equal(t.rank, e->rank);
        for (int d = 0; d < e->rank; d++)
            assert_int_equal(t.shape[d], e->shape[d]);
        assert_int_equal(t.nbytes, e->nbytes);
        assert_true(t.offset + t.nbytes <= file_size);
        if (e->nbytes) assert_memory_equal(t.data, e->bytes, e->nbytes);
    }
    assert_int_equal(fc_safetensors_find(f, "missing"), -1);
    assert_int_equal(fc_safetensors_meta_count(f), 2);
    for (int i = 0; i < 2; i++)
        assert_string_equal(fc_safetensors_meta_find(f, META_K[i]), META_V[i]);
    assert_null(fc_safetensors_meta_find(f, "absent"));
    const char *k, *v;
    assert_int_equal(fc_safetensors_meta_at(f, 0, &k, &v), FC_OK);
    assert_int_equal(fc_safetensors_meta_at(f, 2, &k, &v), FC_ERR_INDEX);
}

static const char *reference_path(void) {
    return FUCINA_TEST_DATA_DIR "/io/st_reference.safetensors";
}

/* ---- reading the reference file ------------------------------------------------------------ */

static void test_safetensors_reads_reference_file(void **state) {
    (void)state;
    size_t size;
    uint8_t *blob = io_read_file(reference_path(), &size);
    assert_non_null(blob);
    for (int mode = 0; mode < 3; mode++) {
        io_count c;
        io_count_init(&c);
        fc_io_opts o = {.allocator = &c.a, .flags = mode == 1 ? FC_IO_NO_MMAP : 0};
        fc_st_file *f = NULL;
        fc_status st = mode == 2 ? fc_safetensors_open_memory(blob, size, &o, &f)
                                 : fc_safetensors_open(reference_path(), &o, &f);
        assert_int_equal(st, FC_OK);
        check_contents(f, size);
        fc_safetensors_close(f);
        io_count_assert_clean(&c);
    }
    free(blob);
}

/* A tensor buffer borrowed from the mapping outlives the handle, refuses
 * writes, and its last release unmaps. */
static void test_safetensors_borrowed_buffer_keeps_mapping(void **state) {
    (void)state;
    io_count c;
    io_count_init(&c);
    fc_io_opts o = {.allocator = &c.a};
    fc_st_file *f;
    assert_int_equal(fc_safetensors_open(reference_path(), &o, &f), FC_OK);
    fc_io_tensor t;
    assert_int_equal(fc_safetensors_tensor_info(f, fc_safetensors_find(f, "f64"), &t), FC_OK);
    fc_buffer *b = NULL;
    assert_int_equal(fc__io_map_buffer(fc__safetensors_map(f), &c.a, t.data, t.nbytes, &b), FC_OK);
    fc_buffer *z = NULL; /* the zero-size tensor gets a buffer too */
    assert_int_equal(fc__io_map_buffer(fc__safetensors_map(f), &c.a, t.data, 0, &z), FC_OK);
    fc_safetensors_close(f);
    assert_true(c.live > 0);
    double want[4];
    for (int i = 0; i < 4; i++)
        want[i] = (double)i * 0.1;
    assert_memory_equal(fc__buffer_data(b), want, sizeof want);
    void *mut;
    assert_int_equal(fc__buffer_data_mut(b, &mut), FC_ERR_READ_ONLY);
    fc__buffer_release(b);
    fc__buffer_release(z);
    io_count_assert_clean(&c);
}

/* ---- writing ----------------------------------------------------------------------------------
 */

static void fill_tensors(fc_io_tensor *t) {
    for (int i = 0; i < N_EXP; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].name = EXP[i].name;
        t[i].dtype = EXP[i].dtype;
        t[i].rank = EXP[i].rank;
        memcpy(t[i].shape, EXP[i].shape, sizeof EXP[i].shape);
        t[i].data = EXP[i].nbytes ? EXP[i].bytes : NULL;
        t[i].nbytes = EXP[i].nbytes;
    }
}

static void write_expected(const char *path, const fc_allocator *a) {
    fc_io_tensor t[N_EXP];
    fill_tensors(t);
    char msg[256];
    fc_io_opts o = {.allocator = a, .errbuf = msg, .errcap = sizeof msg};
    fc_status st = fc_safetensors_write(path, t, N_EXP, META_K, META_V, 2, &o);
    if (st != FC_OK) fprintf(stderr, "%s\n", msg);
    assert_int_equal(st, FC_OK);
}

static void test_safetensors_write_then_read(void **state) {
    (void)state;
    char dir[512], path[600];
    io_scratch_dir(dir, sizeof dir, "st-rw");
    io_path(path, sizeof path, dir, "out.safetensors");
    io_count c;
    io_count_init(&c);
    write_expected(path, &c.a);
    io_count_assert_clean(&c);
    size_t size;
    uint8_t *blob = io_read_file(path, &size);
    assert_non_null(blob);
    /* Layout: N, header padded with spaces to 8-aligned data, each tensor
     * aligned to its element size. */
    uint64_t n = 0;
    for (int i = 0; i < 8; i++)
        n |= (uint64_t)blob[i] << (8 * i);
    assert_int_equal((8 + n) % 8, 0);
    assert_int_equal(blob[8], '{');
    size_t last = 8 + (size_t)n - 1;
    while (blob[last] == ' ')
        last--;
    assert_int_equal(blob[last], '}');
    fc_st_file *f;
    fc_io_opts o = {.allocator = &c.a};
    assert_int_equal(fc_safetensors_open(path, &o, &f), FC_OK);
    check_contents(f, size);
    for (int i = 0; i < N_EXP; i++) {
        fc_io_tensor t;
        assert_int_equal(fc_safetensors_tensor_info(f, i, &t), FC_OK);
        assert_string_equal(t.name, EXP[i].name); /* header keeps the caller's order */
        assert_int_equal(t.offset % fc_dtype_size(t.dtype), 0);
    }
    fc_safetensors_close(f);
    io_count_assert_clean(&c);
    assert_int_equal(io_count_temps(dir), 0);
    free(blob);
    io_rm_rf(dir);
}

/* find_spec looks the modules up without importing torch (which takes
 * seconds); answered once per run. */
static bool have_torch(void) {
    static int known = -1;
    if (known < 0) {
        known = access("/usr/bin/python3", X_OK) == 0 &&
                system("/usr/bin/python3 -c \"import importlib.util as u, sys; "
                       "sys.exit(not (u.find_spec('torch') and u.find_spec('numpy')))\" "
                       ">/dev/null 2>&1") == 0;
    }
    return known == 1;
}

/* A file fucina writes is read by the independent Python reader (torch). */
static void test_safetensors_interop_python_reads_ours(void **state) {
    (void)state;
    if (!have_torch()) {
        fprintf(stderr, "SKIP: /usr/bin/python3 with torch and numpy not found "
                        "(apt-get install python3-torch python3-numpy)\n");
        skip();
    }
    char dir[512], path[600], cmd[1400];
    io_scratch_dir(dir, sizeof dir, "st-py");
    io_path(path, sizeof path, dir, "ours.safetensors");
    write_expected(path, NULL);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/gen_safetensors.py check '%s'",
             FUCINA_SOURCE_DIR, path);
    assert_int_equal(system(cmd), 0);
    io_rm_rf(dir);
}

/* The committed reference file is exactly what the generator makes today. */
static void test_safetensors_interop_reference_is_generated(void **state) {
    (void)state;
    if (!have_torch()) {
        fprintf(stderr, "SKIP: /usr/bin/python3 with torch and numpy not found\n");
        skip();
    }
    char dir[512], path[600], cmd[1400];
    io_scratch_dir(dir, sizeof dir, "st-gen");
    io_path(path, sizeof path, dir, "gen.safetensors");
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/gen_safetensors.py gen '%s'",
             FUCINA_SOURCE_DIR, path);
    assert_int_equal(system(cmd), 0);
    size_t a_size, b_size;
    uint8_t *a = io_read_file(path, &a_size), *b = io_read_file(reference_path(), &b_size);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a_size, b_size);
    assert_memory_equal(a, b, a_size);
    free(a);
    free(b);
    io_rm_rf(dir);
}

/* ---- out of memory -------------------------------------------------------------------------- */

static void test_safetensors_oom_sweep(void **state) {
    (void)state;
    char dir[512], path[600];
    io_scratch_dir(dir, sizeof dir, "st-oom");
    io_path(path, sizeof path, dir, "oom.safetensors");
    fc_io_tensor t[N_EXP];
    fill_tensors(t);
    int write_ok_at = -1, open_ok_at = -1;
    for (int n = 0; n < 200 && write_ok_at < 0; n++) {
        io_count c;
        io_count_init(&c);
        c.fail_after = n;
        fc_io_opts o = {.allocator = &c.a};
        fc_status st = fc_safetensors_write(path, t, N_EXP, META_K, META_V, 2, &o);
        assert_true(st == FC_OK || st == FC_ERR_OOM);
        io_count_assert_clean(&c);
        assert_int_equal(io_count_temps(dir), 0);
        if (st == FC_OK) write_ok_at = n;
    }
    assert_true(write_ok_at > 0);
    for (int n = 0; n < 200 && open_ok_at < 0; n++) {
        io_count c;
        io_count_init(&c);
        c.fail_after = n;
        fc_io_opts o = {.allocator = &c.a};
        fc_st_file *f = (fc_st_file *)&c; /* must be reset to NULL on failure */
        fc_status st = fc_safetensors_open(path, &o, &f);
        assert_true(st == FC_OK || st == FC_ERR_OOM);
        if (st == FC_OK) {
            open_ok_at = n;
            check_contents(f, 1u << 20);
            fc_safetensors_close(f);
        } else {
            assert_null(f);
        }
        io_count_assert_clean(&c);
    }
    assert_true(open_ok_at > 0);
    io_rm_rf(dir);
}

/* ---- corrupt files
 * ------------------------------------------------------------------------------- */

/* 8-byte length + header text + data bytes. */
static uint8_t *make_st(const char *json, uint64_t claimed_len, const void *data, size_t dlen,
                        size_t *size) {
    size_t hl = strlen(json);
    *size = 8 + hl + dlen;
    uint8_t *b = malloc(*size);
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(claimed_len >> (8 * i));
    memcpy(b + 8, json, hl);
    if (dlen) memcpy(b + 8 + hl, data, dlen);
    return b;
}

typedef struct bad_case {
    const char *json;
    size_t dlen;
    fc_status want;
    const char *msg; /* substring of the message */
} bad_case;

static void expect_fail_bytes(const uint8_t *b, size_t size, fc_status want, const char *msg,
                              const char *label) {
    for (int mode = 0; mode < 2; mode++) {
        io_count c;
        io_count_init(&c);
        char err[320] = "";
        fc_io_opts o = {.allocator = &c.a, .errbuf = err, .errcap = sizeof err};
        fc_st_file *f = NULL;
        fc_status st;
        if (mode == 0) {
            st = fc_safetensors_open_memory(b, size, &o, &f);
        } else {
            char dir[512], path[600];
            io_scratch_dir(dir, sizeof dir, "st-bad");
            io_path(path, sizeof path, dir, "bad.safetensors");
            io_write_file(path, b, size);
            st = fc_safetensors_open(path, &o, &f);
            io_rm_rf(dir);
        }
        if (st != want || !strstr(err, msg))
            fprintf(stderr, "case %s: got %s '%s', want %s '%s'\n", label, fc_status_name(st), err,
                    fc_status_name(want), msg);
        assert_int_equal(st, want);
        assert_non_null(strstr(err, msg));
        assert_null(f);
        io_count_assert_clean(&c);
    }
}

static void test_safetensors_rejects_corrupt_headers(void **state) {
    (void)state;
    static const uint8_t zeros[64];
    static const bad_case cases[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, FC_ERR_FORMAT,
         "invalid JSON"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},}", 4, FC_ERR_FORMAT,
         "invalid JSON"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}x", 4, FC_ERR_FORMAT,
         "trailing"},
        {" {}", 0, FC_ERR_FORMAT, "does not start with '{'"},
        {"{\"a\\q\":{}}", 0, FC_ERR_FORMAT, "unknown escape"},
        {"{\"a\tb\":{}}", 0, FC_ERR_FORMAT, "control character"},
        {"{\"\xff\":{}}", 0, FC_ERR_FORMAT, "UTF-8"},
        {"{\"\xc0\xaf\":{}}", 0, FC_ERR_FORMAT, "UTF-8"},
        {"{\"\\ud800\":{}}", 0, FC_ERR_FORMAT, "surrogate"},
        {"{\"\\udc00\":{}}", 0, FC_ERR_FORMAT, "surrogate"},
        {"{\"a\":{\"dtype\":\"Q9\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, FC_ERR_DTYPE,
         "unknown dtype 'Q9'"},
        {"{\"a\":{\"dtype\":\"U32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, FC_ERR_DTYPE,
         "not supported"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, FC_ERR_DATA_LENGTH,
         "hold 4 bytes but f32[2] needs 8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,4]}}",
         4, FC_ERR_OVERFLOW, "overflows"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952,2,1],\"data_offsets\":[0,8]}}",
         8, FC_ERR_OVERFLOW, "byte size overflows"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1,
         FC_ERR_RANK, "more than 8 dims"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[18446744073709551615],\"data_offsets\":[0,1]}}", 1,
         FC_ERR_OVERFLOW, "exceeds 2^63-1"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[18446744073709551616],\"data_offsets\":[0,1]}}", 1,
         FC_ERR_FORMAT, "above 2^64-1"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1, FC_ERR_FORMAT,
         "non-negative integer"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1.5]}}", 1, FC_ERR_FORMAT,
         "non-negative integer"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", 1, FC_ERR_FORMAT,
         "more than 2"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[1,0]}}", 1, FC_ERR_FORMAT,
         "out of order"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}",
         12, FC_ERR_FORMAT, "overlaps"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]}}",
         12, FC_ERR_FORMAT, "hole"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}", 8, FC_ERR_FORMAT,
         "hole"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
         8, FC_ERR_FORMAT, "duplicate tensor name 'a'"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}", 4, FC_ERR_FORMAT,
         "truncated"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 6, FC_ERR_FORMAT,
         "2 bytes after the last tensor"},
        {"{}", 3, FC_ERR_FORMAT, "belong to no tensor"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4]}}", 4, FC_ERR_FORMAT, "no \"data_offsets\""},
        {"{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4,
         FC_ERR_FORMAT, "appears twice"},
        {"{\"__metadata__\":{\"k\":1}}", 0, FC_ERR_FORMAT, "not a string"},
        {"{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, FC_ERR_FORMAT,
         "duplicate __metadata__"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, FC_ERR_FORMAT, "appears twice"},
        {"{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0,
         FC_ERR_FORMAT, "tensor name 'a\\u0000...' contains a NUL"},
        /* a NUL would make these pass for a shorter string (ended at the NUL) */
        {"{\"a\":{\"dtype\":\"U8\\u0000x\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0,
         FC_ERR_FORMAT, "tensor 'a': dtype 'U8\\u0000...' contains a NUL"},
        {"{\"a\":{\"dtype\\u0000\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0, FC_ERR_FORMAT,
         "tensor 'a': field name 'dtype\\u0000...' contains a NUL"},
        {"{\"a\":{\"shape\\u0000x\":[1],\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0,
         FC_ERR_FORMAT, "tensor 'a': field name 'shape\\u0000...' contains a NUL"},
        {"{\"__metadata__\\u0000\":{\"k\":\"v\"}}", 0, FC_ERR_FORMAT,
         "tensor name '__metadata__\\u0000...' contains a NUL"},
        {"{\"__metadata__\":{\"k\\u0000z\":\"v\"}}", 0, FC_ERR_FORMAT,
         "__metadata__ key of 'k\\u0000...' contains a NUL"},
        {"{\"__metadata__\":{\"k\":\"v\\u0000z\"}}", 0, FC_ERR_FORMAT,
         "__metadata__ value of 'k' contains a NUL"},
        {"{\"a\":[]}", 0, FC_ERR_FORMAT, "expected '{'"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0],\"x\":"
         "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]"
         "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}",
         0, FC_ERR_FORMAT, "too deep"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0],\"x\":tru}}", 0,
         FC_ERR_FORMAT, "unexpected token"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0],\"x\":01}}", 0,
         FC_ERR_FORMAT, "expected '}'"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0],\"x\":1e}}", 0,
         FC_ERR_FORMAT, "bad exponent"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0],\"x\":\"\\u12G4\"}}", 0,
         FC_ERR_FORMAT, "bad \\u escape"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t size;
        uint8_t *b = make_st(cases[i].json, strlen(cases[i].json), zeros, cases[i].dlen, &size);
        char label[16];
        snprintf(label, sizeof label, "%zu", i);
        expect_fail_bytes(b, size, cases[i].want, cases[i].msg, label);
        free(b);
    }
}

/* A BOOL byte other than 0 or 1 is refused at open, naming the tensor, the
 * byte and its value (it would read as true to sum and false to eq). */
static void test_safetensors_rejects_bad_bool_bytes(void **state) {
    (void)state;
    static const char *json = "{\"f\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                              "\"b\":{\"dtype\":\"BOOL\",\"shape\":[4],\"data_offsets\":[2,6]}}";
    const uint8_t bad[6] = {9, 9, 1, 0, 7, 1}, bad_last[6] = {9, 9, 0, 0, 0, 255};
    const uint8_t good[6] = {9, 9, 1, 0, 0, 1};
    size_t size;
    uint8_t *b = make_st(json, strlen(json), bad, 6, &size);
    char want[96];
    snprintf(want, sizeof want, "tensor 'b': BOOL byte 2 (file offset %zu) is 7",
             8 + strlen(json) + 4);
    expect_fail_bytes(b, size, FC_ERR_FORMAT, want, "bool 7");
    free(b);
    b = make_st(json, strlen(json), bad_last, 6, &size);
    expect_fail_bytes(b, size, FC_ERR_FORMAT, "tensor 'b': BOOL byte 3", "bool 255");
    free(b);
    b = make_st(json, strlen(json), good, 6, &size); /* U8 bytes of 9 are fine */
    fc_st_file *f = NULL;
    assert_int_equal(fc_safetensors_open_memory(b, size, NULL, &f), FC_OK);
    fc_safetensors_close(f);
    free(b);
}

static void test_safetensors_rejects_bad_header_lengths(void **state) {
    (void)state;
    size_t size;
    uint8_t *b = make_st("{}", 100000001, NULL, 0, &size);
    expect_fail_bytes(b, size, FC_ERR_FORMAT, "exceeds the limit", "huge");
    free(b);
    b = make_st("{}", 3, NULL, 0, &size);
    expect_fail_bytes(b, size, FC_ERR_FORMAT, "runs past the end", "past");
    free(b);
    b = make_st("{}", UINT64_MAX, NULL, 0, &size);
    expect_fail_bytes(b, size, FC_ERR_FORMAT, "exceeds the limit", "max");
    free(b);
    static const uint8_t tiny[5] = {2, 0, 0, 0, 0};
    expect_fail_bytes(tiny, sizeof tiny, FC_ERR_FORMAT, "too short", "tiny");
    b = make_st("", 0, NULL, 0, &size);
    expect_fail_bytes(b, size, FC_ERR_FORMAT, "does not start", "empty header");
    free(b);
}

/* Every proper prefix of the reference fails cleanly (the buffer must be
 * covered exactly), reading nothing past the end (exact-size copies). */
static void test_safetensors_every_truncation_fails(void **state) {
    (void)state;
    size_t size;
    uint8_t *blob = io_read_file(reference_path(), &size);
    assert_non_null(blob);
    io_count c;
    io_count_init(&c);
    fc_io_opts o = {.allocator = &c.a};
    for (size_t cut = 0; cut < size; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1);
        memcpy(copy, blob, cut);
        fc_st_file *f = NULL;
        assert_int_equal(fc_safetensors_open_memory(copy, cut, &o, &f), FC_ERR_FORMAT);
        assert_null(f);
        free(copy);
    }
    io_count_assert_clean(&c);
    free(blob);
}

static void test_safetensors_accepts_spec_corners(void **state) {
    (void)state;
    /* Unknown fields are skipped, whitespace and escapes anywhere, empty
     * shapes are scalars, zero-size tensors sit anywhere in the order. */
    const char *json =
        " {\n\t\"z\" : {\"data_offsets\":[0,0],\"extra\":{\"k\":[1,-2.5e3,true,null,\"s\"]},"
        "\"shape\":[0],\"dtype\":\"BF16\"} , \"\\u00e9\\ud83d\\ude00/\\\"q\\\"\":"
        "{\"dtype\":\"I16\",\"shape\":[],\"data_offsets\":[0,2]},"
        "\"e\":{\"dtype\":\"BOOL\",\"shape\":[0,5],\"data_offsets\":[2,2]}}   ";
    static const uint8_t data[2] = {0x34, 0x12};
    size_t size;
    uint8_t *b = make_st(json + 1, strlen(json + 1), data, 2, &size); /* header starts at '{' */
    io_count c;
    io_count_init(&c);
    char err[256] = "";
    fc_io_opts o = {.allocator = &c.a, .errbuf = err, .errcap = sizeof err};
    fc_st_file *f;
    fc_status st = fc_safetensors_open_memory(b, size, &o, &f);
    if (st != FC_OK) fprintf(stderr, "%s\n", err);
    assert_int_equal(st, FC_OK);
    assert_int_equal(fc_safetensors_tensor_count(f), 3);
    int64_t ix = fc_safetensors_find(f, "\xc3\xa9\xf0\x9f\x98\x80/\"q\"");
    assert_int_equal(ix, 1);
    fc_io_tensor t;
    assert_int_equal(fc_safetensors_tensor_info(f, ix, &t), FC_OK);
    assert_int_equal(t.rank, 0);
    assert_int_equal(t.nbytes, 2);
    assert_int_equal(t.dtype, FC_I16);
    assert_memory_equal(t.data, data, 2);
    assert_int_equal(fc_safetensors_tensor_info(f, 3, &t), FC_ERR_INDEX);
    assert_int_equal(fc_safetensors_tensor_info(f, -1, &t), FC_ERR_INDEX);
    assert_int_equal(fc_safetensors_meta_count(f), 0);
    fc_safetensors_close(f);
    free(b);
    /* The empty file: "{}" and no data. */
    b = make_st("{}      ", 8, NULL, 0, &size);
    assert_int_equal(fc_safetensors_open_memory(b, size, &o, &f), FC_OK);
    assert_int_equal(fc_safetensors_tensor_count(f), 0);
    assert_int_equal(fc_safetensors_find(f, "x"), -1);
    fc_safetensors_close(f);
    free(b);
    io_count_assert_clean(&c);
}

static void test_safetensors_open_reports_io_errors(void **state) {
    (void)state;
    char err[256] = "";
    fc_io_opts o = {.errbuf = err, .errcap = sizeof err};
    fc_st_file *f = NULL;
    assert_int_equal(fc_safetensors_open("/nonexistent/x.safetensors", &o, &f), FC_ERR_IO);
    assert_non_null(strstr(err, "/nonexistent/x.safetensors"));
    assert_non_null(strstr(err, "No such file"));
    assert_null(f);
    assert_int_equal(fc_safetensors_open("/", &o, &f), FC_ERR_IO);
    assert_int_equal(fc_safetensors_open(NULL, &o, &f), FC_ERR_NULL_ARG);
    assert_int_equal(fc_safetensors_open_memory(NULL, 4, NULL, &f), FC_ERR_NULL_ARG);
    assert_int_equal(fc_safetensors_tensor_count(NULL), 0);
    assert_int_equal(fc_safetensors_find(NULL, "a"), -1);
    assert_null(fc_safetensors_meta_find(NULL, "a"));
    fc_safetensors_close(NULL);
}

static void test_safetensors_write_refuses_bad_input(void **state) {
    (void)state;
    char dir[512], path[600];
    io_scratch_dir(dir, sizeof dir, "st-wbad");
    io_path(path, sizeof path, dir, "w.safetensors");
    const float x[4] = {0};
    fc_io_tensor base = {
        .name = "x", .dtype = FC_F32, .rank = 1, .shape = {4}, .data = x, .nbytes = 16};
    struct {
        fc_io_tensor t[2];
        int n;
        fc_status want;
        const char *msg;
    } cases[8];
    for (int i = 0; i < 8; i++) {
        cases[i].t[0] = cases[i].t[1] = base;
        cases[i].n = 1;
    }
    cases[0].t[0].dtype = FC_Q4_0, cases[0].want = FC_ERR_DTYPE,
    cases[0].msg = "no safetensors name";
    cases[1].n = 2, cases[1].want = FC_ERR_INVALID_ARG, cases[1].msg = "duplicate tensor name 'x'";
    cases[2].t[0].name = "__metadata__", cases[2].want = FC_ERR_INVALID_ARG,
    cases[2].msg = "reserved";
    cases[3].t[0].nbytes = 12, cases[3].want = FC_ERR_DATA_LENGTH, cases[3].msg = "nbytes 12";
    cases[4].t[0].shape[0] = -4, cases[4].want = FC_ERR_INVALID_SHAPE, cases[4].msg = "is -4";
    cases[5].t[0].rank = 9, cases[5].want = FC_ERR_RANK, cases[5].msg = "rank 9";
    cases[6].t[0].name = "\xff", cases[6].want = FC_ERR_INVALID_ARG, cases[6].msg = "UTF-8";
    cases[7].t[0].data = NULL, cases[7].want = FC_ERR_NULL_ARG, cases[7].msg = "data is NULL";
    for (int i = 0; i < 8; i++) {
        io_count c;
        io_count_init(&c);
        char err[256] = "";
        fc_io_opts o = {.allocator = &c.a, .errbuf = err, .errcap = sizeof err};
        fc_status st = fc_safetensors_write(path, cases[i].t, cases[i].n, NULL, NULL, 0, &o);
        if (st != cases[i].want || !strstr(err, cases[i].msg))
            fprintf(stderr, "case %d: %s '%s'\n", i, fc_status_name(st), err);
        assert_int_equal(st, cases[i].want);
        assert_non_null(strstr(err, cases[i].msg));
        io_count_assert_clean(&c);
        assert_int_equal(access(path, F_OK), -1); /* nothing was created */
        assert_int_equal(io_count_temps(dir), 0);
    }
    const char *k[2] = {"a", "a"}, *v[2] = {"1", "2"};
    assert_int_equal(fc_safetensors_write(path, &base, 1, k, v, 2, NULL), FC_ERR_INVALID_ARG);
    assert_int_equal(fc_safetensors_write(path, &base, -1, NULL, NULL, 0, NULL),
                     FC_ERR_INVALID_ARG);
    assert_int_equal(fc_safetensors_write(NULL, &base, 1, NULL, NULL, 0, NULL), FC_ERR_NULL_ARG);
    char dirpath[600];
    snprintf(dirpath, sizeof dirpath, "%s/", dir);
    assert_int_equal(fc_safetensors_write(dirpath, &base, 1, NULL, NULL, 0, NULL),
                     FC_ERR_INVALID_ARG);
    /* An unwritable place is FC_ERR_IO naming the path. */
    char err[256] = "";
    fc_io_opts o = {.errbuf = err, .errcap = sizeof err};
    assert_int_equal(fc_safetensors_write("/nonexistent-dir/w.st", &base, 1, NULL, NULL, 0, &o),
                     FC_ERR_IO);
    assert_non_null(strstr(err, "/nonexistent-dir/"));
    io_rm_rf(dir);
}

int main(void) {
    build_expected();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_safetensors_reads_reference_file),
        cmocka_unit_test(test_safetensors_borrowed_buffer_keeps_mapping),
        cmocka_unit_test(test_safetensors_write_then_read),
        cmocka_unit_test(test_safetensors_interop_python_reads_ours),
        cmocka_unit_test(test_safetensors_interop_reference_is_generated),
        cmocka_unit_test(test_safetensors_oom_sweep),
        cmocka_unit_test(test_safetensors_rejects_corrupt_headers),
        cmocka_unit_test(test_safetensors_rejects_bad_header_lengths),
        cmocka_unit_test(test_safetensors_rejects_bad_bool_bytes),
        cmocka_unit_test(test_safetensors_every_truncation_fails),
        cmocka_unit_test(test_safetensors_accepts_spec_corners),
        cmocka_unit_test(test_safetensors_open_reports_io_errors),
        cmocka_unit_test(test_safetensors_write_refuses_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
