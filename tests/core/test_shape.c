/* SPDX-License-Identifier: MIT */
/* test_shape.c - checked shape arithmetic and NumPy broadcasting (src/core/shape.c).
 *
 * References used here are independent of the code under test: element
 * counts against __builtin_mul_overflow, contiguity against the definition
 * (every index maps to its row-major position), broadcasting against the
 * NumPy results quoted in seed 004 plus a brute-force rule written from
 * NumPy's documentation ("two dimensions are compatible when they are equal
 * or one of them is 1", shapes aligned on the right). */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/shape.h"

/* ---- validation ------------------------------------------------------------ */

static void test_shape_validate_rank_dims_null(void **state) {
    (void)state;
    int64_t ok[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    assert_int_equal(fc__shape_validate(ok, 1), FC_OK);
    assert_int_equal(fc__shape_validate(ok, 8), FC_OK);
    assert_int_equal(fc__shape_validate(ok, 0), FC_ERR_RANK);
    assert_int_equal(fc__shape_validate(ok, 9), FC_ERR_RANK);
    assert_int_equal(fc__shape_validate(ok, -1), FC_ERR_RANK);
    assert_int_equal(fc__shape_validate(NULL, 2), FC_ERR_NULL_ARG);
    assert_int_equal(fc__shape_validate(NULL, 0), FC_ERR_NULL_ARG);

    /* a bad dim anywhere is refused, whatever its sign or size */
    const int64_t bad[] = {0, -1, -7, INT64_MIN};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        for (int pos = 0; pos < 8; pos++) {
            int64_t s[8] = {2, 2, 2, 2, 2, 2, 2, 2};
            s[pos] = bad[b];
            assert_int_equal(fc__shape_validate(s, 8), FC_ERR_INVALID_SHAPE);
            int64_t n = 42;
            assert_int_equal(fc__shape_numel(s, 8, &n), FC_ERR_INVALID_SHAPE);
            assert_int_equal(n, 42); /* untouched on error */
        }
    }
    /* rank is checked before dims: a rank-9 shape of valid dims is a rank error */
    assert_int_equal(fc__shape_numel(ok, 9, NULL), FC_ERR_RANK);
    assert_int_equal(fc__shape_numel(NULL, 1, NULL), FC_ERR_NULL_ARG);
}

/* ---- element counts -------------------------------------------------------- */

/* Reference: the exact product with the compiler's overflow-checked multiply,
 * then compared against the documented limit. */
static fc_status ref_numel(const int64_t *s, int rank, int64_t *out) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        if (__builtin_mul_overflow(n, s[i], &n)) return FC_ERR_OVERFLOW;
    if (n > FC__MAX_ELEMS) return FC_ERR_OVERFLOW;
    *out = n;
    return FC_OK;
}

static void test_shape_numel_overflow_by_division(void **state) {
    (void)state;
    /* Seed 004: 3 * 6148914691236517206 wraps to 2 in 64-bit arithmetic. */
    uint64_t wrapped = (uint64_t)3 * (uint64_t)6148914691236517206ull;
    assert_int_equal(wrapped, 2);
    int64_t n = -5;
    assert_int_equal(fc__shape_numel((int64_t[]){3, 6148914691236517206}, 2, &n), FC_ERR_OVERFLOW);
    assert_int_equal(fc__shape_numel((int64_t[]){6148914691236517206, 3}, 2, &n), FC_ERR_OVERFLOW);
    assert_int_equal(n, -5);
    assert_int_equal(fc__shape_numel((int64_t[]){INT64_MAX}, 1, &n), FC_ERR_OVERFLOW);
    /* every partial product fits but the full one does not: 2^20 cubed is 2^60 */
    assert_int_equal(fc__shape_numel((int64_t[]){1 << 20, 1 << 20, 1 << 20}, 3, &n),
                     FC_ERR_OVERFLOW);
    /* a product that wraps to a small positive number after many factors */
    int64_t eight[8] = {256, 256, 256, 256, 256, 256, 256, 256}; /* 2^64 wraps to 0 */
    assert_int_equal(fc__shape_numel(eight, 8, &n), FC_ERR_OVERFLOW);

    /* large but fitting */
    assert_int_equal(fc__shape_numel((int64_t[]){1 << 20, 1 << 20, 1 << 19}, 3, &n), FC_OK);
    assert_int_equal(n, (int64_t)1 << 59);
    int64_t e2[8] = {128, 128, 128, 128, 128, 128, 128, 128}; /* 2^56 */
    assert_int_equal(fc__shape_numel(e2, 8, &n), FC_OK);
    assert_int_equal(n, (int64_t)1 << 56);
    /* exactly at the limit, and one past it (2^60 - 1 = 3 * 384307168202282325) */
    assert_int_equal(FC__MAX_ELEMS, ((int64_t)1 << 60) - 1);
    assert_int_equal(fc__shape_numel((int64_t[]){FC__MAX_ELEMS}, 1, &n), FC_OK);
    assert_int_equal(n, FC__MAX_ELEMS);
    assert_int_equal(fc__shape_numel((int64_t[]){3, 384307168202282325}, 2, &n), FC_OK);
    assert_int_equal(n, FC__MAX_ELEMS);
    assert_int_equal(fc__shape_numel((int64_t[]){3, 384307168202282326}, 2, &n), FC_ERR_OVERFLOW);
    assert_int_equal(fc__shape_numel((int64_t[]){FC__MAX_ELEMS + 1}, 1, &n), FC_ERR_OVERFLOW);
    assert_int_equal(fc__shape_numel((int64_t[]){1, 1, FC__MAX_ELEMS, 1}, 4, NULL), FC_OK);

    /* deterministic sweep against the reference: dims drawn from a spread of
     * magnitudes so both sides of the limit are hit often */
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int over = 0, fit = 0;
    for (int it = 0; it < 20000; it++) {
        int rank = 1 + (int)(x % 8);
        int64_t s[8];
        for (int i = 0; i < rank; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            int bits = (int)((x >> 33) % 20);
            s[i] = 1 + (int64_t)((x >> 7) & (((uint64_t)1 << bits) - 1));
        }
        int64_t got = -1, want = -1;
        fc_status sw = ref_numel(s, rank, &want);
        assert_int_equal(fc__shape_numel(s, rank, &got), sw);
        if (sw == FC_OK) {
            assert_int_equal(got, want);
            assert_int_equal(fc__shape_product(s, rank), want);
            fit++;
        } else {
            over++;
        }
    }
    assert_true(over > 1000 && fit > 1000);
}

static void test_shape_storage_numel_blocks(void **state) {
    (void)state;
    int64_t n = 0;
    assert_int_equal(fc__shape_storage_numel(FC_Q4_K, (int64_t[]){4, 256}, 2, &n), FC_OK);
    assert_int_equal(n, 4);
    assert_int_equal(fc__shape_storage_numel(FC_Q4_K, (int64_t[]){4, 512}, 2, &n), FC_OK);
    assert_int_equal(n, 8);
    n = 77;
    assert_int_equal(fc__shape_storage_numel(FC_Q4_K, (int64_t[]){4, 255}, 2, &n),
                     FC_ERR_INVALID_SHAPE);
    assert_int_equal(fc__shape_storage_numel(FC_Q4_K, (int64_t[]){4, 128}, 2, &n),
                     FC_ERR_INVALID_SHAPE);
    assert_int_equal(fc__shape_storage_numel(FC_Q4_K, (int64_t[]){4, 257}, 2, &n),
                     FC_ERR_INVALID_SHAPE);
    /* the block axis is the last one, whatever the others hold */
    assert_int_equal(fc__shape_storage_numel(FC_Q4_K, (int64_t[]){256, 4}, 2, &n),
                     FC_ERR_INVALID_SHAPE);
    assert_int_equal(fc__shape_storage_numel(FC_Q4_K, (int64_t[]){4, 0}, 2, &n),
                     FC_ERR_INVALID_SHAPE);
    assert_int_equal(n, 77);
    assert_int_equal(fc__shape_storage_numel(FC_Q8_0, (int64_t[]){3, 64}, 2, &n), FC_OK);
    assert_int_equal(n, 6);
    assert_int_equal(fc__shape_storage_numel(FC_F32, (int64_t[]){3, 5}, 2, &n), FC_OK);
    assert_int_equal(n, 15);
    assert_int_equal(fc__shape_storage_numel(FC_DTYPE_COUNT, (int64_t[]){3}, 1, &n), FC_ERR_DTYPE);
    assert_int_equal(fc__shape_storage_numel((fc_dtype)-1, (int64_t[]){3}, 1, &n), FC_ERR_DTYPE);
    assert_int_equal(fc__shape_storage_numel(FC_F32, (int64_t[]){3}, 0, &n), FC_ERR_RANK);
    assert_int_equal(fc__shape_storage_numel(FC_F32, NULL, 1, &n), FC_ERR_NULL_ARG);

    /* every dtype: scalars count elements, blocks count blocks of the last axis */
    for (int d = 0; d < FC_DTYPE_COUNT; d++) {
        int64_t be = fc_dtype_block_elems((fc_dtype)d);
        assert_true(be >= 1);
        assert_int_equal(fc__shape_storage_numel((fc_dtype)d, (int64_t[]){5, 2, be * 3}, 3, &n),
                         FC_OK);
        assert_int_equal(n, 30);
        if (be > 1) {
            assert_int_equal(fc__shape_storage_numel((fc_dtype)d, (int64_t[]){2, be + 1}, 2, &n),
                             FC_ERR_INVALID_SHAPE);
            assert_int_equal(fc__shape_storage_numel((fc_dtype)d, (int64_t[]){be / 2}, 1, &n),
                             FC_ERR_INVALID_SHAPE);
        }
        /* at the element limit the byte size still fits in a ptrdiff_t */
        int64_t top = FC__MAX_ELEMS / be * be;
        assert_int_equal(fc__shape_storage_numel((fc_dtype)d, (int64_t[]){top}, 1, &n), FC_OK);
        assert_int_equal(n, top / be);
        assert_true((uint64_t)n <= (uint64_t)PTRDIFF_MAX / fc_dtype_size((fc_dtype)d));
        /* one element-axis step past it is refused as an overflow, for every
         * dtype, never as a wrapped byte count */
        assert_int_equal(fc__shape_storage_numel((fc_dtype)d, (int64_t[]){2, top}, 2, &n),
                         FC_ERR_OVERFLOW);
        assert_int_equal(
            fc__shape_storage_numel((fc_dtype)d, (int64_t[]){3, 6148914691236517206}, 2, &n),
            FC_ERR_OVERFLOW);
    }
    /* the widest scalar at the limit: 8 * (2^60 - 1) bytes is below 2^63 */
    assert_int_equal(fc__shape_storage_numel(FC_F64, (int64_t[]){FC__MAX_ELEMS}, 1, &n), FC_OK);
    assert_int_equal(fc__shape_storage_numel(FC_F64, (int64_t[]){FC__MAX_ELEMS + 1}, 1, &n),
                     FC_ERR_OVERFLOW);
}

/* ---- strides and contiguity ------------------------------------------------ */

static void test_shape_contiguous_strides(void **state) {
    (void)state;
    int64_t st[8];
    fc__shape_contiguous_strides((int64_t[]){2, 3, 4}, 3, st);
    assert_int_equal(st[0], 12);
    assert_int_equal(st[1], 4);
    assert_int_equal(st[2], 1);
    fc__shape_contiguous_strides((int64_t[]){5}, 1, st);
    assert_int_equal(st[0], 1);
    fc__shape_contiguous_strides((int64_t[]){3, 1, 2}, 3, st);
    assert_int_equal(st[0], 2);
    assert_int_equal(st[1], 2);
    assert_int_equal(st[2], 1);
    int64_t s8[8] = {2, 2, 2, 2, 2, 2, 2, 2};
    fc__shape_contiguous_strides(s8, 8, st);
    for (int i = 0; i < 8; i++)
        assert_int_equal(st[i], (int64_t)1 << (7 - i));
    assert_true(fc__shape_is_contiguous(s8, st, 8));
}

/* Definition of contiguity: every index lands on its row-major position. */
static bool ref_contiguous(const int64_t *shape, const int64_t *strides, int rank) {
    int64_t n = fc__shape_product(shape, rank);
    for (int64_t lin = 0; lin < n; lin++) {
        int64_t rem = lin, off = 0;
        for (int i = rank - 1; i >= 0; i--) {
            off += (rem % shape[i]) * strides[i];
            rem /= shape[i];
        }
        if (off != lin) return false;
    }
    return true;
}

static void test_shape_is_contiguous_size1_axes(void **state) {
    (void)state;
    assert_true(fc__shape_is_contiguous((int64_t[]){2, 3}, (int64_t[]){3, 1}, 2));
    assert_false(fc__shape_is_contiguous((int64_t[]){2, 3}, (int64_t[]){1, 2}, 2));
    assert_false(fc__shape_is_contiguous((int64_t[]){2, 3}, (int64_t[]){4, 1}, 2)); /* padded */
    /* size-1 axes are never stepped, so their stride is irrelevant */
    assert_true(fc__shape_is_contiguous((int64_t[]){3, 1, 2}, (int64_t[]){2, 999, 1}, 3));
    assert_true(fc__shape_is_contiguous((int64_t[]){1, 4}, (int64_t[]){0, 1}, 2));
    assert_true(fc__shape_is_contiguous((int64_t[]){4, 1}, (int64_t[]){1, 0}, 2));
    assert_true(fc__shape_is_contiguous((int64_t[]){1}, (int64_t[]){0}, 1));
    /* a broadcast axis of size > 1 is not contiguous */
    assert_false(fc__shape_is_contiguous((int64_t[]){4}, (int64_t[]){0}, 1));
    assert_false(fc__shape_is_contiguous((int64_t[]){4, 3}, (int64_t[]){0, 1}, 2));

    /* exhaustive against the definition: ranks 1..3, dims 1..3, strides 0..6 */
    int checked = 0, contiguous = 0;
    for (int rank = 1; rank <= 3; rank++) {
        int nshapes = 1, nstrides = 1;
        for (int i = 0; i < rank; i++)
            nshapes *= 3, nstrides *= 7;
        for (int si = 0; si < nshapes; si++) {
            int64_t shape[3];
            for (int i = 0, c = si; i < rank; i++, c /= 3)
                shape[i] = 1 + c % 3;
            for (int ti = 0; ti < nstrides; ti++) {
                int64_t strides[3];
                for (int i = 0, c = ti; i < rank; i++, c /= 7)
                    strides[i] = c % 7;
                bool want = ref_contiguous(shape, strides, rank);
                assert_int_equal(fc__shape_is_contiguous(shape, strides, rank), want);
                checked++;
                contiguous += want;
            }
        }
    }
    assert_true(checked > 9000 && contiguous > 100);
}

static void test_shape_equal(void **state) {
    (void)state;
    assert_true(fc__shape_equal((int64_t[]){2, 3}, 2, (int64_t[]){2, 3}, 2));
    assert_false(fc__shape_equal((int64_t[]){2, 3}, 2, (int64_t[]){3, 2}, 2));
    assert_false(fc__shape_equal((int64_t[]){2, 3}, 2, (int64_t[]){2, 3, 1}, 3));
    assert_false(fc__shape_equal((int64_t[]){3}, 1, (int64_t[]){1, 3}, 2));
}

/* ---- broadcasting ------------------------------------------------------------ */

static void expect_bcast(const int64_t *a, int ra, const int64_t *b, int rb, const int64_t *want,
                         int rw) {
    int64_t out[FC_MAX_RANK];
    int r = -1;
    assert_int_equal(fc__shape_broadcast(a, ra, b, rb, out, &r), FC_OK);
    assert_true(fc__shape_equal(out, r, want, rw));
    /* the rule is symmetric */
    assert_int_equal(fc__shape_broadcast(b, rb, a, ra, out, &r), FC_OK);
    assert_true(fc__shape_equal(out, r, want, rw));
}

static void expect_bcast_refused(const int64_t *a, int ra, const int64_t *b, int rb) {
    int64_t out[FC_MAX_RANK] = {-9, -9, -9, -9, -9, -9, -9, -9};
    int r = -9;
    assert_int_equal(fc__shape_broadcast(a, ra, b, rb, out, &r), FC_ERR_SHAPE_MISMATCH);
    assert_int_equal(fc__shape_broadcast(b, rb, a, ra, out, &r), FC_ERR_SHAPE_MISMATCH);
    assert_int_equal(r, -9);
    for (int i = 0; i < FC_MAX_RANK; i++)
        assert_int_equal(out[i], -9);
}

static void test_shape_broadcast_seed_examples(void **state) {
    (void)state;
    /* seed 004, each matching numpy.broadcast_shapes */
    expect_bcast((int64_t[]){3}, 1, (int64_t[]){4, 3}, 2, (int64_t[]){4, 3}, 2);
    expect_bcast((int64_t[]){5, 1, 4}, 3, (int64_t[]){1, 3, 4}, 3, (int64_t[]){5, 3, 4}, 3);
    expect_bcast_refused((int64_t[]){2, 3}, 2, (int64_t[]){3, 2}, 2);
    /* leading pad: (3,) is (1,3) against (3,1); a trailing pad would say (3,1) */
    expect_bcast((int64_t[]){3}, 1, (int64_t[]){3, 1}, 2, (int64_t[]){3, 3}, 2);
}

static void test_shape_broadcast_more(void **state) {
    (void)state;
    /* NumPy's documentation examples */
    expect_bcast((int64_t[]){8, 1, 6, 1}, 4, (int64_t[]){7, 1, 5}, 3, (int64_t[]){8, 7, 6, 5}, 4);
    expect_bcast((int64_t[]){5, 4}, 2, (int64_t[]){1}, 1, (int64_t[]){5, 4}, 2);
    expect_bcast((int64_t[]){5, 4}, 2, (int64_t[]){4}, 1, (int64_t[]){5, 4}, 2);
    expect_bcast((int64_t[]){15, 3, 5}, 3, (int64_t[]){15, 1, 5}, 3, (int64_t[]){15, 3, 5}, 3);
    expect_bcast((int64_t[]){15, 3, 5}, 3, (int64_t[]){3, 5}, 2, (int64_t[]){15, 3, 5}, 3);
    expect_bcast((int64_t[]){15, 3, 5}, 3, (int64_t[]){3, 1}, 2, (int64_t[]){15, 3, 5}, 3);
    expect_bcast_refused((int64_t[]){3}, 1, (int64_t[]){4}, 1);
    expect_bcast_refused((int64_t[]){2, 1}, 2, (int64_t[]){8, 4, 3}, 3);
    expect_bcast_refused((int64_t[]){4, 3}, 2, (int64_t[]){4}, 1); /* (4,) aligns with the 3 */
    /* identical shapes, all-ones, and rank 8 against rank 1 */
    expect_bcast((int64_t[]){2, 3}, 2, (int64_t[]){2, 3}, 2, (int64_t[]){2, 3}, 2);
    expect_bcast((int64_t[]){1, 1, 1}, 3, (int64_t[]){1}, 1, (int64_t[]){1, 1, 1}, 3);
    int64_t r8[8] = {2, 1, 3, 1, 2, 1, 3, 7};
    int64_t w8[8] = {2, 5, 3, 4, 2, 6, 3, 7};
    expect_bcast(r8, 8, (int64_t[]){5, 1, 4, 1, 6, 1, 7}, 7, w8, 8);
    expect_bcast(r8, 8, (int64_t[]){7}, 1, r8, 8);

    /* out may alias an input */
    int64_t a[3] = {5, 1, 4};
    int r = 0;
    assert_int_equal(fc__shape_broadcast(a, 3, (int64_t[]){3, 1}, 2, a, &r), FC_OK);
    assert_true(fc__shape_equal(a, r, (int64_t[]){5, 3, 4}, 3));

    /* invalid inputs get their own codes */
    int64_t out[8];
    assert_int_equal(fc__shape_broadcast(NULL, 1, (int64_t[]){3}, 1, out, &r), FC_ERR_NULL_ARG);
    assert_int_equal(fc__shape_broadcast((int64_t[]){3}, 1, (int64_t[]){3}, 1, NULL, &r),
                     FC_ERR_NULL_ARG);
    assert_int_equal(fc__shape_broadcast((int64_t[]){3}, 1, (int64_t[]){3}, 1, out, NULL),
                     FC_ERR_NULL_ARG);
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    assert_int_equal(fc__shape_broadcast(nine, 9, (int64_t[]){3}, 1, out, &r), FC_ERR_RANK);
    assert_int_equal(fc__shape_broadcast((int64_t[]){3}, 1, nine, 0, out, &r), FC_ERR_RANK);
    assert_int_equal(fc__shape_broadcast((int64_t[]){0}, 1, (int64_t[]){3}, 1, out, &r),
                     FC_ERR_INVALID_SHAPE);
    assert_int_equal(fc__shape_broadcast((int64_t[]){3}, 1, (int64_t[]){2, -1}, 2, out, &r),
                     FC_ERR_INVALID_SHAPE);
}

/* Brute force from NumPy's stated rule, written independently: pad both to
 * rank 8 with leading ones, then an axis pair is compatible when equal or
 * one side is 1, and the result takes the larger. */
static void test_shape_broadcast_sweep(void **state) {
    (void)state;
    uint64_t x = 12345;
    int ok = 0, refused = 0;
    for (int it = 0; it < 20000; it++) {
        int64_t a[8], b[8];
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int ra = 1 + (int)((x >> 40) % 8), rb = 1 + (int)((x >> 50) % 8);
        for (int i = 0; i < 8; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            /* mostly 1 or a shared size so that many pairs broadcast */
            static const int64_t pool[] = {1, 1, 1, 3, 3, 3, 2};
            a[i] = pool[(x >> 33) % 7];
            b[i] = pool[(x >> 45) % 7];
        }
        int64_t pa[8], pb[8], want[8];
        bool compatible = true;
        int rw = ra > rb ? ra : rb;
        for (int i = 0; i < 8; i++) {
            pa[i] = i < 8 - ra ? 1 : a[i - (8 - ra)];
            pb[i] = i < 8 - rb ? 1 : b[i - (8 - rb)];
            if (pa[i] != pb[i] && pa[i] != 1 && pb[i] != 1) compatible = false;
            want[i] = pa[i] > pb[i] ? pa[i] : pb[i];
        }
        int64_t out[8];
        int r = 0;
        fc_status st = fc__shape_broadcast(a, ra, b, rb, out, &r);
        if (compatible) {
            assert_int_equal(st, FC_OK);
            assert_true(fc__shape_equal(out, r, want + (8 - rw), rw));
            ok++;
        } else {
            assert_int_equal(st, FC_ERR_SHAPE_MISMATCH);
            refused++;
        }
    }
    assert_true(ok > 1000 && refused > 1000);
}

/* ---- axes ------------------------------------------------------------------ */

static void test_shape_axis_geometry(void **state) {
    (void)state;
    int64_t s[3] = {2, 3, 4}, outer, dim, inner;
    fc__shape_axis_geometry(s, 3, 0, &outer, &dim, &inner);
    assert_int_equal(outer, 1);
    assert_int_equal(dim, 2);
    assert_int_equal(inner, 12);
    fc__shape_axis_geometry(s, 3, 1, &outer, &dim, &inner);
    assert_int_equal(outer, 2);
    assert_int_equal(dim, 3);
    assert_int_equal(inner, 4);
    fc__shape_axis_geometry(s, 3, 2, &outer, &dim, &inner);
    assert_int_equal(outer, 6);
    assert_int_equal(dim, 4);
    assert_int_equal(inner, 1);
    fc__shape_axis_geometry((int64_t[]){9}, 1, 0, &outer, &dim, &inner);
    assert_int_equal(outer, 1);
    assert_int_equal(dim, 9);
    assert_int_equal(inner, 1);

    /* element (o, k, i) of the axis walk sits at (o*dim + k)*inner + i in
     * row-major order: check against the strides for every axis of a rank-5 shape */
    int64_t s5[5] = {2, 1, 3, 4, 2}, st[5];
    fc__shape_contiguous_strides(s5, 5, st);
    for (int ax = 0; ax < 5; ax++) {
        fc__shape_axis_geometry(s5, 5, ax, &outer, &dim, &inner);
        assert_int_equal(outer * dim * inner, 48);
        assert_int_equal(dim, s5[ax]);
        assert_int_equal(inner, st[ax]);
        assert_int_equal(outer, ax == 0 ? 1 : 48 / (st[ax - 1]));
    }
}

static void test_shape_norm_axis(void **state) {
    (void)state;
    int a = -100;
    assert_int_equal(fc__shape_norm_axis(-1, 3, &a), FC_OK);
    assert_int_equal(a, 2);
    assert_int_equal(fc__shape_norm_axis(-3, 3, &a), FC_OK);
    assert_int_equal(a, 0);
    assert_int_equal(fc__shape_norm_axis(2, 3, &a), FC_OK);
    assert_int_equal(a, 2);
    assert_int_equal(fc__shape_norm_axis(0, 1, &a), FC_OK);
    assert_int_equal(a, 0);
    assert_int_equal(fc__shape_norm_axis(-1, 1, &a), FC_OK);
    assert_int_equal(a, 0);
    a = -100;
    assert_int_equal(fc__shape_norm_axis(-4, 3, &a), FC_ERR_AXIS);
    assert_int_equal(fc__shape_norm_axis(3, 3, &a), FC_ERR_AXIS);
    assert_int_equal(fc__shape_norm_axis(INT_MIN, 8, &a), FC_ERR_AXIS);
    assert_int_equal(fc__shape_norm_axis(INT_MAX, 8, &a), FC_ERR_AXIS);
    assert_int_equal(fc__shape_norm_axis(0, 0, &a), FC_ERR_AXIS);
    assert_int_equal(fc__shape_norm_axis(-1, 0, &a), FC_ERR_AXIS);
    assert_int_equal(a, -100);
    assert_int_equal(fc__shape_norm_axis(0, 3, NULL), FC_ERR_NULL_ARG);
    /* every axis of every rank round-trips between its two spellings */
    for (int rank = 1; rank <= FC_MAX_RANK; rank++) {
        for (int ax = 0; ax < rank; ax++) {
            assert_int_equal(fc__shape_norm_axis(ax, rank, &a), FC_OK);
            assert_int_equal(a, ax);
            assert_int_equal(fc__shape_norm_axis(ax - rank, rank, &a), FC_OK);
            assert_int_equal(a, ax);
        }
        assert_int_equal(fc__shape_norm_axis(rank, rank, &a), FC_ERR_AXIS);
        assert_int_equal(fc__shape_norm_axis(-rank - 1, rank, &a), FC_ERR_AXIS);
    }
}

/* ---- formatting ------------------------------------------------------------- */

static void test_shape_str(void **state) {
    (void)state;
    char buf[128];
    assert_ptr_equal(fc__shape_str((int64_t[]){2, 3, 4}, 3, buf, sizeof buf), buf);
    assert_string_equal(buf, "[2,3,4]");
    assert_string_equal(fc__shape_str((int64_t[]){7}, 1, buf, sizeof buf), "[7]");
    assert_string_equal(fc__shape_str((int64_t[]){INT64_MAX, -1}, 2, buf, sizeof buf),
                        "[9223372036854775807,-1]");
    int64_t s8[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_string_equal(fc__shape_str(s8, 8, buf, sizeof buf), "[1,2,3,4,5,6,7,8]");
    assert_string_equal(fc__shape_str(NULL, 2, buf, sizeof buf), "(null)");

    /* truncation: always a NUL-terminated prefix of the full text */
    const char *full = "[1,2,3,4,5,6,7,8]";
    for (int cap = 1; cap <= (int)strlen(full) + 1; cap++) {
        char small[32];
        memset(small, 'x', sizeof small);
        fc__shape_str(s8, 8, small, cap);
        size_t len = strlen(small);
        assert_true(len == (size_t)cap - 1);
        assert_memory_equal(small, full, len);
        assert_int_equal(small[cap], 'x'); /* nothing written past cap */
    }
    /* cap <= 0 leaves the buffer alone */
    buf[0] = 'q';
    assert_ptr_equal(fc__shape_str(s8, 8, buf, 0), buf);
    assert_int_equal(buf[0], 'q');
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape_validate_rank_dims_null),
        cmocka_unit_test(test_shape_numel_overflow_by_division),
        cmocka_unit_test(test_shape_storage_numel_blocks),
        cmocka_unit_test(test_shape_contiguous_strides),
        cmocka_unit_test(test_shape_is_contiguous_size1_axes),
        cmocka_unit_test(test_shape_equal),
        cmocka_unit_test(test_shape_broadcast_seed_examples),
        cmocka_unit_test(test_shape_broadcast_more),
        cmocka_unit_test(test_shape_broadcast_sweep),
        cmocka_unit_test(test_shape_axis_geometry),
        cmocka_unit_test(test_shape_norm_axis),
        cmocka_unit_test(test_shape_str),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
