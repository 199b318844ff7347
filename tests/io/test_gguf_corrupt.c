/* SPDX-License-Identifier: MIT */
/* test_gguf_corrupt.c - GGUF files assembled byte by byte: every broken
 * one must fail with its own status code and message and leak nothing
 * (counting allocator); id 42 must resolve by the room a tensor has; the
 * smallest valid file opens. The reader's rules are listed in src/io/gguf.c. */
#include "io_testutil.h"

#include "io/io.h"

#define REF_V2 FUCINA_TEST_DATA_DIR "/io/gguf_reference_v2.gguf"
/* ---- corrupt files -----------------------------------------------------------------------------
 */

typedef struct gb {
    uint8_t b[2048];
    size_t n;
} gb;

static void gb_raw(gb *g, const void *p, size_t n) {
    memcpy(g->b + g->n, p, n);
    g->n += n;
}
static void gb_u32(gb *g, uint32_t v) {
    for (int i = 0; i < 4; i++)
        g->b[g->n++] = (uint8_t)(v >> (8 * i));
}
static void gb_u64(gb *g, uint64_t v) {
    for (int i = 0; i < 8; i++)
        g->b[g->n++] = (uint8_t)(v >> (8 * i));
}
static void gb_str(gb *g, const char *s) {
    gb_u64(g, strlen(s));
    gb_raw(g, s, strlen(s));
}
static void gb_head(gb *g, uint32_t version, uint64_t n_t, uint64_t n_kv) {
    g->n = 0;
    gb_raw(g, "GGUF", 4);
    gb_u32(g, version);
    gb_u64(g, n_t);
    gb_u64(g, n_kv);
}
static void gb_info(gb *g, const char *name, uint32_t nd, const uint64_t *dims, uint32_t type,
                    uint64_t off) {
    gb_str(g, name);
    gb_u32(g, nd);
    for (uint32_t i = 0; i < nd; i++)
        gb_u64(g, dims[i]);
    gb_u32(g, type);
    gb_u64(g, off);
}
static void gb_pad(gb *g, size_t align) {
    while (g->n % align)
        g->b[g->n++] = 0;
}
static void gb_zeros(gb *g, size_t n) {
    memset(g->b + g->n, 0, n);
    g->n += n;
}

static void expect_bad(const gb *g, fc_status want, const char *msg, const char *label) {
    io_count c;
    io_count_init(&c);
    char err[320] = "";
    fc_io_opts o = {.allocator = &c.a, .errbuf = err, .errcap = sizeof err};
    uint8_t *copy = malloc(g->n ? g->n : 1);
    memcpy(copy, g->b, g->n);
    fc_gguf_file *f = NULL;
    fc_status st = fc_gguf_open_memory(copy, g->n, &o, &f);
    if (st != want || !strstr(err, msg))
        fprintf(stderr, "case %s: got %s '%s', want %s '%s'\n", label, fc_status_name(st), err,
                fc_status_name(want), msg);
    assert_int_equal(st, want);
    assert_non_null(strstr(err, msg));
    assert_null(f);
    io_count_assert_clean(&c);
    free(copy);
}

/* One f32 tensor "t" of dims {4} at offset 0 with an optional override. */
static void gb_one_tensor(gb *g, uint32_t nd, const uint64_t *dims, uint32_t type, uint64_t off,
                          size_t data) {
    gb_head(g, 3, 1, 0);
    gb_info(g, "t", nd, dims, type, off);
    gb_pad(g, 32);
    gb_zeros(g, data);
}

static void test_gguf_rejects_corrupt_files(void **state) {
    (void)state;
    gb g;
    const uint64_t d4[1] = {4};
    /* magic, version */
    gb_head(&g, 3, 0, 0);
    g.b[0] = 'X';
    expect_bad(&g, FC_ERR_FORMAT, "bad magic", "magic");
    g.n = 0;
    expect_bad(&g, FC_ERR_FORMAT, "bad magic", "empty");
    gb_head(&g, 1, 0, 0);
    expect_bad(&g, FC_ERR_FORMAT, "version 1 is not supported", "v1");
    gb_head(&g, 4, 0, 0);
    expect_bad(&g, FC_ERR_FORMAT, "version 4", "v4");
    gb_head(&g, 0x03000000u, 0, 0);
    expect_bad(&g, FC_ERR_FORMAT, "big-endian", "be");
    gb_head(&g, 3, 0, 0);
    g.n = 12;
    expect_bad(&g, FC_ERR_FORMAT, "truncated", "short header");
    /* huge counts */
    gb_head(&g, 3, UINT64_MAX, 0);
    expect_bad(&g, FC_ERR_FORMAT, "tensor count", "n_t");
    gb_head(&g, 3, 0, (uint64_t)1 << 60);
    expect_bad(&g, FC_ERR_FORMAT, "key/value count", "n_kv");
    /* strings */
    gb_head(&g, 3, 0, 1);
    gb_u64(&g, 1000);
    gb_raw(&g, "abc", 3);
    gb_zeros(&g, 16);
    expect_bad(&g, FC_ERR_FORMAT, "runs past the end", "key past EOF");
    gb_head(&g, 3, 0, 1);
    gb_u64(&g, 70000);
    gb_zeros(&g, 16);
    expect_bad(&g, FC_ERR_FORMAT, "exceeds the limit", "key too long");
    gb_head(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, FC_GGUF_STRING);
    gb_u64(&g, UINT64_MAX);
    expect_bad(&g, FC_ERR_FORMAT, "runs past the end", "value past EOF");
    gb_head(&g, 3, 0, 1);
    gb_u64(&g, 3);
    gb_raw(&g, "a\0b", 3);
    gb_u32(&g, FC_GGUF_U8);
    gb_u32(&g, 0);
    expect_bad(&g, FC_ERR_FORMAT, "NUL", "NUL key");
    /* values */
    gb_head(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, 13);
    gb_u64(&g, 0);
    expect_bad(&g, FC_ERR_FORMAT, "unknown value type 13", "vtype");
    gb_head(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, FC_GGUF_BOOL);
    gb_u32(&g, 2);
    expect_bad(&g, FC_ERR_FORMAT, "not 0 or 1", "bool");
    gb_head(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, FC_GGUF_ARRAY);
    gb_u32(&g, FC_GGUF_U32);
    gb_u64(&g, (uint64_t)1 << 62);
    gb_zeros(&g, 16);
    expect_bad(&g, FC_ERR_FORMAT, "cannot fit", "array count");
    gb_head(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, FC_GGUF_ARRAY);
    gb_u32(&g, 99);
    gb_u64(&g, 0);
    expect_bad(&g, FC_ERR_FORMAT, "unknown array element type 99", "array elem");
    gb_head(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, FC_GGUF_ARRAY);
    for (int i = 0; i < 10; i++) {
        gb_u32(&g, FC_GGUF_ARRAY);
        gb_u64(&g, 1);
    }
    gb_zeros(&g, 16);
    expect_bad(&g, FC_ERR_FORMAT, "nested deeper", "nesting");
    gb_head(&g, 3, 0, 2);
    gb_str(&g, "k");
    gb_u32(&g, FC_GGUF_U8);
    gb_zeros(&g, 1);
    gb_str(&g, "k");
    gb_u32(&g, FC_GGUF_U8);
    gb_zeros(&g, 1);
    expect_bad(&g, FC_ERR_FORMAT, "duplicate key 'k'", "dup key");
    gb_head(&g, 3, 0, 1);
    gb_str(&g, "general.alignment");
    gb_u32(&g, FC_GGUF_U32);
    gb_u32(&g, 48);
    expect_bad(&g, FC_ERR_FORMAT, "not a power of two", "align 48");
    gb_head(&g, 3, 0, 1);
    gb_str(&g, "general.alignment");
    gb_u32(&g, FC_GGUF_U64);
    gb_u64(&g, 32);
    expect_bad(&g, FC_ERR_FORMAT, "not u32", "align type");
    /* tensor infos */
    gb_one_tensor(&g, 0, d4, 0, 0, 16);
    expect_bad(&g, FC_ERR_RANK, "n_dims 0", "nd 0");
    const uint64_t d5[5] = {1, 1, 1, 1, 1};
    gb_one_tensor(&g, 5, d5, 0, 0, 16);
    expect_bad(&g, FC_ERR_RANK, "n_dims 5", "nd 5");
    const uint64_t d0[2] = {4, 0};
    gb_one_tensor(&g, 2, d0, 0, 0, 16);
    expect_bad(&g, FC_ERR_INVALID_SHAPE, "dim 1 is 0", "dim 0");
    const uint64_t dbig[3] = {(uint64_t)1 << 32, (uint64_t)1 << 32, 4};
    gb_one_tensor(&g, 3, dbig, 0, 0, 16);
    expect_bad(&g, FC_ERR_OVERFLOW, "overflows", "numel overflow");
    const uint64_t dbytes[2] = {(uint64_t)1 << 31, (uint64_t)1 << 31};
    gb_one_tensor(&g, 2, dbytes, 28, 0, 16); /* 2^62 f64 = 2^65 bytes */
    expect_bad(&g, FC_ERR_OVERFLOW, "overflows", "bytes overflow");
    const uint64_t dneg[1] = {(uint64_t)1 << 63};
    gb_one_tensor(&g, 1, dneg, 0, 0, 16);
    expect_bad(&g, FC_ERR_OVERFLOW, "exceeds 2^63-1", "dim sign");
    const uint64_t d16[1] = {16};
    gb_one_tensor(&g, 1, d16, 2, 0, 64); /* q4_0 needs multiples of 32 */
    expect_bad(&g, FC_ERR_INVALID_SHAPE, "not a multiple of q4_0's block of 32", "block");
    gb_one_tensor(&g, 1, d4, 31, 0, 16);
    expect_bad(&g, FC_ERR_FORMAT, "tensor 't': unknown ggml type id 31", "type 31");
    gb_one_tensor(&g, 1, d4, 1000, 0, 16);
    expect_bad(&g, FC_ERR_FORMAT, "unknown ggml type id 1000", "type 1000");
    gb_one_tensor(&g, 1, d4, 0, 8, 64);
    expect_bad(&g, FC_ERR_FORMAT, "not a multiple of the alignment 32", "misaligned");
    gb_one_tensor(&g, 1, d4, 0, 4096, 16);
    expect_bad(&g, FC_ERR_FORMAT, "past the end of the data", "offset out");
    gb_one_tensor(&g, 1, d4, 0, UINT64_MAX - 31, 16);
    expect_bad(&g, FC_ERR_FORMAT, "past the end of the data", "offset max");
    gb_one_tensor(&g, 1, d4, 0, 0, 8);
    expect_bad(&g, FC_ERR_FORMAT, "runs past the end of the file", "short data");
    /* two tensors: duplicates and overlap */
    gb_head(&g, 3, 2, 0);
    gb_info(&g, "t", 1, d4, 0, 0);
    gb_info(&g, "t", 1, d4, 0, 32);
    gb_pad(&g, 32);
    gb_zeros(&g, 64);
    expect_bad(&g, FC_ERR_FORMAT, "duplicate tensor name 't'", "dup name");
    const uint64_t d16f[1] = {16};
    gb_head(&g, 3, 2, 0);
    gb_info(&g, "a", 1, d16f, 0, 0); /* 64 bytes */
    gb_info(&g, "b", 1, d4, 0, 32);
    gb_pad(&g, 32);
    gb_zeros(&g, 96);
    expect_bad(&g, FC_ERR_FORMAT, "overlaps tensor 'b'", "overlap");
    /* id 42 that fits both layouts, and one that fits neither */
    const uint64_t d128[1] = {128};
    gb_one_tensor(&g, 1, d128, 42, 0, 64);
    expect_bad(&g, FC_ERR_FORMAT, "ambiguous", "q2 both");
    gb_one_tensor(&g, 1, d128, 42, 0, 30);
    expect_bad(&g, FC_ERR_FORMAT, "fits neither", "q2 none");
    const uint64_t d96[1] = {96};
    gb_one_tensor(&g, 1, d96, 42, 0, 64);
    expect_bad(&g, FC_ERR_INVALID_SHAPE, "block", "q2 block");
}

/* Id 42 resolved by room: the last tensor with exact or padded room, and a
 * tensor followed by another. */
/* Keys and tensor names must be UTF-8 (RFC 3629): overlong forms,
 * surrogates, code points above U+10FFFF, stray continuation bytes and
 * truncated sequences are refused naming which key or tensor it is. */
static const char *const bad_utf8[] = {
    "\xc0\xaf",         /* overlong '/' */
    "\xe0\x80\xaf",     /* overlong, 3 bytes */
    "\xf0\x80\x80\xaf", /* overlong, 4 bytes */
    "\xed\xa0\x80",     /* U+D800, a surrogate */
    "\xed\xbf\xbf",     /* U+DFFF */
    "\xf4\x90\x80\x80", /* U+110000 */
    "\xf5\x80\x80\x80", /* lead byte beyond U+10FFFF */
    "\x80",             /* continuation without a lead */
    "a\xe2\x82",        /* truncated at the end */
    "\xff",
};
static void test_gguf_rejects_non_utf8_names(void **state) {
    (void)state;
    gb g;
    const uint64_t d4[1] = {4};
    for (size_t i = 0; i < sizeof bad_utf8 / sizeof *bad_utf8; i++) {
        char label[32];
        snprintf(label, sizeof label, "key %zu", i);
        gb_head(&g, 3, 0, 2);
        gb_str(&g, "fine.key");
        gb_u32(&g, FC_GGUF_U8);
        g.b[g.n++] = 1;
        gb_str(&g, bad_utf8[i]);
        gb_u32(&g, FC_GGUF_U8);
        g.b[g.n++] = 1;
        expect_bad(&g, FC_ERR_FORMAT, "key 1 (", label);
        snprintf(label, sizeof label, "tensor %zu", i);
        gb_head(&g, 3, 2, 0);
        gb_info(&g, "ok", 1, d4, 0, 0);
        gb_info(&g, bad_utf8[i], 1, d4, 0, 32);
        gb_pad(&g, 32);
        gb_zeros(&g, 64);
        expect_bad(&g, FC_ERR_FORMAT, "tensor name 1 (", label);
    }
    /* the edges that are valid: U+10FFFF, U+E000 after the surrogates,
     * U+0800 (the smallest 3-byte form), 2-byte U+0080 */
    gb_head(&g, 3, 1, 1);
    gb_str(&g, "\xf4\x8f\xbf\xbf.\xee\x80\x80");
    gb_u32(&g, FC_GGUF_U8);
    g.b[g.n++] = 1;
    gb_info(&g, "\xe0\xa0\x80\xc2\x80", 1, d4, 0, 0);
    gb_pad(&g, 32);
    gb_zeros(&g, 16);
    fc_gguf_file *f = NULL;
    assert_int_equal(fc_gguf_open_memory(g.b, g.n, NULL, &f), FC_OK);
    assert_int_equal(fc_gguf_find(f, "\xe0\xa0\x80\xc2\x80"), 0);
    fc_gguf_close(f);
}

static void test_gguf_resolves_type_42_by_size(void **state) {
    (void)state;
    gb g;
    const uint64_t d256[1] = {256}; /* g64: 72 bytes, g128: 68 bytes */
    struct {
        size_t room;
        fc_dtype want;
    } cases[] = {{72, FC_Q2_0_G64}, {68, FC_Q2_0}};
    for (size_t i = 0; i < 2; i++) {
        gb_head(&g, 3, 1, 1);
        gb_str(&g, "general.alignment");
        gb_u32(&g, FC_GGUF_U32);
        gb_u32(&g, 2);
        gb_info(&g, "q", 1, d256, 42, 0);
        gb_pad(&g, 2);
        gb_zeros(&g, cases[i].room);
        fc_gguf_file *f;
        assert_int_equal(fc_gguf_open_memory(g.b, g.n, NULL, &f), FC_OK);
        fc_io_tensor t;
        assert_int_equal(fc_gguf_tensor_info(f, 0, &t), FC_OK);
        assert_int_equal(t.dtype, cases[i].want);
        assert_int_equal(t.nbytes, cases[i].want == FC_Q2_0 ? 68 : 72);
        fc_gguf_close(f);
    }
    /* Followed by another tensor: 2048 elements are 576 bytes as q2_0_g64
     * and 544 as q2_0; the next tensor at 544 leaves room for q2_0 only. */
    const uint64_t d2048[1] = {2048}, d4[1] = {4};
    gb_head(&g, 3, 2, 0);
    gb_info(&g, "q", 1, d2048, 42, 0);
    gb_info(&g, "z", 1, d4, 0, 544);
    gb_pad(&g, 32);
    gb_zeros(&g, 544 + 16);
    fc_gguf_file *f;
    assert_int_equal(fc_gguf_open_memory(g.b, g.n, NULL, &f), FC_OK);
    fc_io_tensor t;
    assert_int_equal(fc_gguf_tensor_info(f, 0, &t), FC_OK);
    assert_int_equal(t.dtype, FC_Q2_0);
    fc_gguf_close(f);
}

static void test_gguf_null_and_range_arguments(void **state) {
    (void)state;
    /* The smallest valid file: a header with no key/values and no tensors
     * (found by the fuzzer: no name offsets at all). */
    gb g;
    gb_head(&g, 3, 0, 0);
    fc_gguf_file *empty;
    assert_int_equal(fc_gguf_open_memory(g.b, g.n, NULL, &empty), FC_OK);
    assert_int_equal(fc_gguf_tensor_count(empty), 0);
    assert_int_equal(fc_gguf_kv_count(empty), 0);
    assert_int_equal(fc_gguf_alignment(empty), 32);
    assert_null(fc_gguf_kv_find(empty, "general.alignment"));
    fc_gguf_close(empty);
    fc_gguf_file *f = NULL;
    assert_int_equal(fc_gguf_open(NULL, NULL, &f), FC_ERR_NULL_ARG);
    assert_int_equal(fc_gguf_open_memory(NULL, 3, NULL, &f), FC_ERR_NULL_ARG);
    char err[256];
    fc_io_opts o = {.errbuf = err, .errcap = sizeof err};
    assert_int_equal(fc_gguf_open("/nonexistent.gguf", &o, &f), FC_ERR_IO);
    assert_non_null(strstr(err, "No such file"));
    assert_int_equal(fc_gguf_tensor_count(NULL), 0);
    assert_int_equal(fc_gguf_kv_count(NULL), 0);
    assert_int_equal(fc_gguf_version(NULL), 0);
    assert_null(fc_gguf_kv_find(NULL, "x"));
    assert_int_equal(fc_gguf_find(NULL, "x"), -1);
    fc_gguf_close(NULL);
    assert_int_equal(fc_gguf_open(REF_V2, NULL, &f), FC_OK);
    fc_io_tensor t;
    assert_int_equal(fc_gguf_tensor_info(f, 2, &t), FC_ERR_INDEX);
    assert_int_equal(fc_gguf_tensor_info(f, -1, &t), FC_ERR_INDEX);
    assert_null(fc_gguf_kv_value(f, 5));
    int64_t i;
    assert_int_equal(fc_gguf_value_int(NULL, &i), FC_ERR_NULL_ARG);
    fc_gguf_close(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf_rejects_corrupt_files),
        cmocka_unit_test(test_gguf_resolves_type_42_by_size),
        cmocka_unit_test(test_gguf_rejects_non_utf8_names),
        cmocka_unit_test(test_gguf_null_and_range_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
