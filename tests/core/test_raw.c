/* SPDX-License-Identifier: MIT */
/* test_raw.c - the raw strided tensor (src/core/raw.c): construction,
 * ownership, views and their checks, data access and in-place helpers.
 *
 * The copy paths (copy_to, copy_range, copy_into, clone, fill) are tested in
 * test_raw_copy.c against a plain index-computing reference. Every test runs
 * on a counting allocator and the teardown refuses live blocks or malformed
 * frees, so each test also proves it leaks nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/raw.h"
#include "counting_alloc.h"

static fct_counting g_alloc;
#define ALLOC fct_counting_allocator(&g_alloc)

static int setup(void **state) {
    (void)state;
    fct_counting_init(&g_alloc);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    if (!fct_counting_clean(&g_alloc)) {
        fct_counting_report(&g_alloc, "leak check");
        return -1;
    }
    return 0;
}

static unsigned refs_of(const fc_raw *t) { return atomic_load(&t->buf->refs); }

static fc_raw make_f32(const int64_t *shape, int rank) {
    fc_raw t;
    int64_t n = fc__shape_product(shape, rank);
    float vals[256];
    assert_true(n <= 256);
    for (int64_t i = 0; i < n; i++)
        vals[i] = (float)(i + 1);
    assert_int_equal(
        fc__raw_from_data(ALLOC, FC_F32, shape, rank, vals, (size_t)n * sizeof(float), &t), FC_OK);
    return t;
}

static float at_f32(const fc_raw *t, const int64_t *idx) {
    int64_t off = t->offset;
    for (int i = 0; i < t->rank; i++)
        off += idx[i] * t->strides[i];
    float v;
    memcpy(&v, (const char *)t->buf->data + off * 4, 4);
    return v;
}

/* ---- construction ---------------------------------------------------------------- */

static void test_raw_empty_zeros(void **state) {
    (void)state;
    fc_raw t;
    assert_int_equal(fc__raw_empty(ALLOC, FC_I16, (int64_t[]){2, 3, 4}, 3, &t), FC_OK);
    assert_int_equal(t.rank, 3);
    assert_int_equal(t.offset, 0);
    assert_int_equal(t.dtype, FC_I16);
    assert_int_equal(t.strides[0], 12);
    assert_int_equal(t.strides[1], 4);
    assert_int_equal(t.strides[2], 1);
    assert_int_equal(t.buf->nbytes, 48);
    assert_int_equal(refs_of(&t), 1);
    assert_true(fc__raw_is_contiguous(&t));
    assert_int_equal(fc__raw_numel(&t), 24);
    assert_int_equal((uintptr_t)t.buf->data % FC_BUFFER_ALIGN, 0);
    fc__raw_release(&t);
    assert_null(t.buf);  /* poisoned */
    fc__raw_release(&t); /* and a second release is then harmless */
    fc__raw_release(NULL);

    assert_int_equal(fc__raw_zeros(ALLOC, FC_F64, (int64_t[]){3, 5}, 2, &t), FC_OK);
    for (size_t i = 0; i < t.buf->nbytes; i++)
        assert_int_equal(((unsigned char *)t.buf->data)[i], 0);
    fc__raw_release(&t);

    /* block dtype: strides count blocks, the shape stays logical */
    assert_int_equal(fc__raw_zeros(ALLOC, FC_Q4_K, (int64_t[]){2, 512}, 2, &t), FC_OK);
    assert_int_equal(t.shape[1], 512);
    assert_int_equal(t.strides[0], 2);
    assert_int_equal(t.strides[1], 1);
    assert_int_equal(t.buf->nbytes, 4 * 144);
    assert_int_equal(fc__raw_numel(&t), 1024);
    assert_int_equal(fc__raw_storage_numel(&t), 4);
    int64_t ss[2];
    fc__raw_storage_shape(&t, ss);
    assert_int_equal(ss[0], 2);
    assert_int_equal(ss[1], 2);
    assert_true(fc__raw_is_contiguous(&t));
    fc__raw_release(&t);

    /* refusals allocate nothing and leave out alone */
    memset(&t, 0x5A, sizeof t);
    fc_raw before = t;
    assert_int_equal(fc__raw_empty(ALLOC, FC_F32, (int64_t[]){2}, 0, &t), FC_ERR_RANK);
    assert_int_equal(fc__raw_empty(ALLOC, FC_F32, (int64_t[]){2, 0}, 2, &t), FC_ERR_INVALID_SHAPE);
    assert_int_equal(fc__raw_empty(ALLOC, FC_Q4_K, (int64_t[]){2, 100}, 2, &t),
                     FC_ERR_INVALID_SHAPE);
    assert_int_equal(fc__raw_empty(ALLOC, FC_DTYPE_COUNT, (int64_t[]){2}, 1, &t), FC_ERR_DTYPE);
    assert_int_equal(fc__raw_empty(ALLOC, FC_F32, (int64_t[]){3, 6148914691236517206}, 2, &t),
                     FC_ERR_OVERFLOW);
    assert_int_equal(fc__raw_empty(ALLOC, FC_F32, NULL, 1, &t), FC_ERR_NULL_ARG);
    assert_int_equal(fc__raw_zeros(ALLOC, FC_F32, (int64_t[]){2}, 1, NULL), FC_ERR_NULL_ARG);
    assert_memory_equal(&t, &before, sizeof t);
    assert_int_equal(atomic_load(&g_alloc.total_allocs), 6);
}

static void test_raw_from_data(void **state) {
    (void)state;
    int16_t src[6] = {1, -2, 3, -4, 5, -6};
    fc_raw t;
    assert_int_equal(fc__raw_from_data(ALLOC, FC_I16, (int64_t[]){2, 3}, 2, src, sizeof src, &t),
                     FC_OK);
    src[0] = 99; /* an owned copy: later changes to the source do not show */
    assert_int_equal(((int16_t *)t.buf->data)[0], 1);
    assert_int_equal(((int16_t *)t.buf->data)[5], -6);
    assert_true(t.buf->flags & FC_BUF_OWNED);
    fc__raw_release(&t);

    assert_int_equal(
        fc__raw_from_data(ALLOC, FC_I16, (int64_t[]){2, 3}, 2, src, sizeof src - 1, &t),
        FC_ERR_DATA_LENGTH);
    assert_int_equal(
        fc__raw_from_data(ALLOC, FC_I16, (int64_t[]){2, 3}, 2, src, sizeof src + 2, &t),
        FC_ERR_DATA_LENGTH);
    assert_int_equal(fc__raw_from_data(ALLOC, FC_I16, (int64_t[]){2, 3}, 2, NULL, 12, &t),
                     FC_ERR_NULL_ARG);
    assert_int_equal(fc__raw_from_data(ALLOC, FC_I16, (int64_t[]){2, 0}, 2, src, 0, &t),
                     FC_ERR_INVALID_SHAPE);

    /* block dtype from storage elements: 4 x 64 q8_0 is 8 blocks of 34 bytes */
    unsigned char blocks[8 * 34];
    for (size_t i = 0; i < sizeof blocks; i++)
        blocks[i] = (unsigned char)(i * 7);
    assert_int_equal(
        fc__raw_from_data(ALLOC, FC_Q8_0, (int64_t[]){4, 64}, 2, blocks, sizeof blocks, &t), FC_OK);
    assert_int_equal(fc__raw_storage_numel(&t), 8);
    assert_memory_equal(t.buf->data, blocks, sizeof blocks);
    fc__raw_release(&t);
    assert_int_equal(fc__raw_from_data(ALLOC, FC_Q8_0, (int64_t[]){4, 64}, 2, blocks, 4 * 64, &t),
                     FC_ERR_DATA_LENGTH); /* logical bytes are not storage bytes */
}

static void test_raw_from_borrowed(void **state) {
    (void)state;
    float mem[6] = {1, 2, 3, 4, 5, 6};
    fc_raw t;
    assert_int_equal(
        fc__raw_from_borrowed(ALLOC, FC_F32, (int64_t[]){3, 2}, 2, mem, sizeof mem, false, &t),
        FC_OK);
    assert_ptr_equal(t.buf->data, mem);
    mem[4] = 50; /* aliasing: the caller's writes show through the tensor */
    assert_true(at_f32(&t, (int64_t[]){2, 0}) == 50.0f);
    void *p;
    assert_int_equal(fc__raw_data_mut(&t, &p), FC_OK);
    ((float *)p)[1] = -2;
    assert_true(mem[1] == -2.0f);
    assert_true(fc__raw_can_take_in_place(&t)); /* unique, writable, whole */
    fc__raw_release(&t);
    assert_true(mem[5] == 6.0f); /* released the header, not the bytes */

    const float ro[4] = {9, 8, 7, 6};
    assert_int_equal(
        fc__raw_from_borrowed(ALLOC, FC_F32, (int64_t[]){4}, 1, (void *)ro, sizeof ro, true, &t),
        FC_OK);
    assert_int_equal(fc__raw_data_mut(&t, &p), FC_ERR_READ_ONLY);
    assert_int_equal(fc__buffer_generation(t.buf), 0);
    const void *cp = NULL;
    assert_int_equal(fc__raw_data(&t, &cp), FC_OK);
    assert_ptr_equal(cp, ro);
    assert_false(fc__raw_can_take_in_place(&t));
    float v = 1;
    assert_int_equal(fc__raw_fill(&t, &v), FC_ERR_READ_ONLY);
    fc_raw src = make_f32((int64_t[]){4}, 1);
    assert_int_equal(fc__raw_copy_into(&src, &t), FC_ERR_READ_ONLY);
    assert_true(ro[0] == 9.0f);
    fc__raw_release(&src);
    fc__raw_release(&t);

    assert_int_equal(
        fc__raw_from_borrowed(ALLOC, FC_F32, (int64_t[]){4}, 1, mem, sizeof mem, false, &t),
        FC_ERR_DATA_LENGTH);
    assert_int_equal(fc__raw_from_borrowed(ALLOC, FC_F32, (int64_t[]){4}, 1, NULL, 16, false, &t),
                     FC_ERR_NULL_ARG);
}

static void test_raw_from_buffer_steals(void **state) {
    (void)state;
    fc_buffer *b;
    assert_int_equal(fc__buffer_create(ALLOC, 24, &b), FC_OK);
    fc_raw t;
    assert_int_equal(fc__raw_from_buffer(b, FC_F32, (int64_t[]){2, 3}, 2, &t), FC_OK);
    assert_ptr_equal(t.buf, b);
    assert_int_equal(refs_of(&t), 1); /* the caller's reference moved into t */
    fc__raw_release(&t);
    assert_true(fct_counting_clean(&g_alloc));

    /* oversized (a pooled buffer) is fine */
    assert_int_equal(fc__buffer_create(ALLOC, 1000, &b), FC_OK);
    assert_int_equal(fc__raw_from_buffer(b, FC_F64, (int64_t[]){5}, 1, &t), FC_OK);
    assert_int_equal(fc__raw_storage_numel(&t), 5);
    fc__raw_release(&t);
    assert_true(fct_counting_clean(&g_alloc));

    /* too small: the reference stays with the caller */
    assert_int_equal(fc__buffer_create(ALLOC, 23, &b), FC_OK);
    assert_int_equal(fc__raw_from_buffer(b, FC_F32, (int64_t[]){2, 3}, 2, &t), FC_ERR_DATA_LENGTH);
    assert_int_equal(atomic_load(&b->refs), 1);
    assert_int_equal(fc__raw_from_buffer(b, FC_F32, (int64_t[]){2, 0}, 2, &t),
                     FC_ERR_INVALID_SHAPE);
    assert_int_equal(fc__raw_from_buffer(NULL, FC_F32, (int64_t[]){2}, 1, &t), FC_ERR_NULL_ARG);
    assert_int_equal(fc__raw_from_buffer(b, FC_F32, (int64_t[]){2}, 1, NULL), FC_ERR_NULL_ARG);
    fc__buffer_release(b);
}

static void test_raw_oom_sweep(void **state) {
    (void)state;
    /* SQLite style: fail the Nth allocation for N = 0, 1, ... until the call
     * succeeds; every failure must leave nothing behind */
    float vals[6] = {1, 2, 3, 4, 5, 6};
    int succeeded_at[4] = {-1, -1, -1, -1};
    for (long n = 0; n < 8; n++) {
        fc_raw t, c;
        fct_counting_fail_after(&g_alloc, n);
        fc_status st = fc__raw_from_data(ALLOC, FC_F32, (int64_t[]){2, 3}, 2, vals, 24, &t);
        if (st == FC_OK) {
            if (succeeded_at[0] < 0) succeeded_at[0] = (int)n;
            fct_counting_fail_after(&g_alloc, -1);
            fc_raw tr;
            assert_int_equal(
                fc__raw_view_strided(&t, (int64_t[]){3, 2}, (int64_t[]){1, 3}, 2, 0, &tr), FC_OK);
            fct_counting_fail_after(&g_alloc, n);
            st = fc__raw_clone(ALLOC, &tr, &c);
            if (st == FC_OK) {
                if (succeeded_at[1] < 0) succeeded_at[1] = (int)n;
                fc__raw_release(&c);
            } else {
                assert_int_equal(st, FC_ERR_OOM);
            }
            fc__raw_release(&tr);
            fc__raw_release(&t);
        } else {
            assert_int_equal(st, FC_ERR_OOM);
        }
        fct_counting_fail_after(&g_alloc, n);
        st = fc__raw_from_borrowed(ALLOC, FC_F32, (int64_t[]){6}, 1, vals, 24, true, &t);
        if (st == FC_OK) {
            if (succeeded_at[2] < 0) succeeded_at[2] = (int)n;
            fc__raw_release(&t);
        } else {
            assert_int_equal(st, FC_ERR_OOM);
        }
        fct_counting_fail_after(&g_alloc, -1);
        assert_true(fct_counting_clean(&g_alloc));
    }
    assert_int_equal(succeeded_at[0], 2); /* header + data */
    assert_int_equal(succeeded_at[1], 2);
    assert_int_equal(succeeded_at[2], 1); /* header only */
}

/* ---- views ------------------------------------------------------------------------ */

static void test_raw_views_share_storage(void **state) {
    (void)state;
    fc_raw x = make_f32((int64_t[]){2, 3}, 2), v;
    assert_int_equal(fc__raw_view(&x, &v), FC_OK);
    assert_ptr_equal(v.buf, x.buf);
    assert_int_equal(refs_of(&x), 2);
    void *p;
    assert_int_equal(fc__raw_data_mut(&v, &p), FC_OK);
    ((float *)p)[4] = -5;
    assert_true(at_f32(&x, (int64_t[]){1, 1}) == -5.0f);
    /* a transposed view sees the same element at the swapped index */
    fc_raw tr;
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){3, 2}, (int64_t[]){1, 3}, 2, 0, &tr),
                     FC_OK);
    assert_true(at_f32(&tr, (int64_t[]){1, 1}) == -5.0f);
    assert_int_equal(refs_of(&x), 3);
    fc__raw_release(&x); /* the views keep the storage alive */
    assert_true(at_f32(&tr, (int64_t[]){2, 0}) == 3.0f);
    fc__raw_release(&v);
    assert_int_equal(refs_of(&tr), 1);
    fc__raw_release(&tr);
    assert_int_equal(fc__raw_view(NULL, &v), FC_ERR_NULL_ARG);
}

static void test_raw_reshape(void **state) {
    (void)state;
    fc_raw x = make_f32((int64_t[]){2, 3}, 2), r;
    assert_int_equal(fc__raw_reshape(&x, (int64_t[]){6}, 1, &r), FC_OK);
    assert_ptr_equal(r.buf, x.buf);
    assert_int_equal(r.strides[0], 1);
    assert_true(at_f32(&r, (int64_t[]){4}) == 5.0f);
    fc__raw_release(&r);
    assert_int_equal(fc__raw_reshape(&x, (int64_t[]){1, 3, 1, 2}, 4, &r), FC_OK);
    assert_true(at_f32(&r, (int64_t[]){0, 2, 0, 1}) == 6.0f);
    assert_true(fc__raw_is_contiguous(&r));
    fc__raw_release(&r);

    /* an offset contiguous view reshapes and keeps its offset */
    fc_raw row;
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){3}, (int64_t[]){1}, 1, 3, &row), FC_OK);
    assert_int_equal(fc__raw_reshape(&row, (int64_t[]){3, 1}, 2, &r), FC_OK);
    assert_int_equal(r.offset, 3);
    assert_true(at_f32(&r, (int64_t[]){0, 0}) == 4.0f);
    fc__raw_release(&r);
    fc__raw_release(&row);

    fc_raw tr;
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){3, 2}, (int64_t[]){1, 3}, 2, 0, &tr),
                     FC_OK);
    unsigned refs = refs_of(&x);
    assert_int_equal(fc__raw_reshape(&tr, (int64_t[]){6}, 1, &r), FC_ERR_UNSUPPORTED_VIEW);
    assert_int_equal(fc__raw_reshape(&x, (int64_t[]){4}, 1, &r), FC_ERR_INVALID_SHAPE);
    assert_int_equal(fc__raw_reshape(&x, (int64_t[]){7}, 1, &r), FC_ERR_INVALID_SHAPE);
    assert_int_equal(fc__raw_reshape(&x, (int64_t[]){6, 0}, 2, &r), FC_ERR_INVALID_SHAPE);
    assert_int_equal(fc__raw_reshape(&x, (int64_t[]){6}, 0, &r), FC_ERR_RANK);
    assert_int_equal(fc__raw_reshape(&x, (int64_t[]){3, 6148914691236517206}, 2, &r),
                     FC_ERR_OVERFLOW);
    assert_int_equal(refs_of(&x), refs); /* refusals retain nothing */
    fc__raw_release(&tr);
    fc__raw_release(&x);
}

static void test_raw_view_strided_bounds(void **state) {
    (void)state;
    fc_raw x = make_f32((int64_t[]){3, 4}, 2), v; /* 12 storage elements */
    unsigned refs = refs_of(&x);
    /* reach = delta + (2-1)*4 + (2-1)*1 must stay below 12 */
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){2, 2}, (int64_t[]){4, 1}, 2, 6, &v),
                     FC_OK);
    assert_true(at_f32(&v, (int64_t[]){1, 1}) == 12.0f);
    fc__raw_release(&v);
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){2, 2}, (int64_t[]){4, 1}, 2, 7, &v),
                     FC_ERR_INDEX);
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){2, 2}, (int64_t[]){4, 1}, 2, 10, &v),
                     FC_ERR_INDEX);
    /* offset_delta alone: the last element is reachable, one past is not */
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){1}, (int64_t[]){1}, 1, 11, &v), FC_OK);
    assert_true(at_f32(&v, (int64_t[]){0}) == 12.0f);
    fc__raw_release(&v);
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){1}, (int64_t[]){1}, 1, 12, &v),
                     FC_ERR_INDEX);
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){1}, (int64_t[]){1}, 1, INT64_MAX, &v),
                     FC_ERR_INDEX);
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){1}, (int64_t[]){1}, 1, -1, &v),
                     FC_ERR_INDEX);
    /* a stride so large the reach would overflow int64 is refused, not wrapped */
    assert_int_equal(
        fc__raw_view_strided(&x, (int64_t[]){3}, (int64_t[]){INT64_MAX / 2 + 1}, 1, 0, &v),
        FC_ERR_INDEX);
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){12, 2}, (int64_t[]){1, 1}, 2, 0, &v),
                     FC_ERR_INDEX);
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){2}, (int64_t[]){-1}, 1, 5, &v),
                     FC_ERR_INVALID_ARG);
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){2}, NULL, 1, 0, &v), FC_ERR_NULL_ARG);
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){0}, (int64_t[]){1}, 1, 0, &v),
                     FC_ERR_INVALID_SHAPE);
    /* zero strides may repeat one element any number of times */
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){1000, 7}, (int64_t[]){0, 0}, 2, 11, &v),
                     FC_OK);
    assert_true(at_f32(&v, (int64_t[]){999, 6}) == 12.0f);
    /* a view of a view: bounds are the buffer's, the delta is relative */
    fc_raw w;
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){4}, (int64_t[]){1}, 1, 4, &w), FC_OK);
    fc_raw w2;
    assert_int_equal(fc__raw_view_strided(&w, (int64_t[]){2}, (int64_t[]){3}, 1, 4, &w2), FC_OK);
    assert_int_equal(w2.offset, 8);
    assert_true(at_f32(&w2, (int64_t[]){1}) == 12.0f);
    fc__raw_release(&w2);
    assert_int_equal(fc__raw_view_strided(&w, (int64_t[]){2}, (int64_t[]){3}, 1, 5, &w2),
                     FC_ERR_INDEX);
    fc__raw_release(&w);
    fc__raw_release(&v);
    assert_int_equal(refs_of(&x), refs);
    fc__raw_release(&x);
}

static void test_raw_broadcast_to(void **state) {
    (void)state;
    fc_raw a = make_f32((int64_t[]){3}, 1), b;
    assert_int_equal(fc__raw_broadcast_to(&a, (int64_t[]){4, 3}, 2, &b), FC_OK);
    assert_ptr_equal(b.buf, a.buf);
    assert_int_equal(b.strides[0], 0);
    assert_int_equal(b.strides[1], 1);
    assert_false(fc__raw_is_contiguous(&b));
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 3; j++)
            assert_true(at_f32(&b, (int64_t[]){i, j}) == (float)(j + 1));
    fc__raw_release(&b);

    fc_raw col = make_f32((int64_t[]){3, 1}, 2);
    assert_int_equal(fc__raw_broadcast_to(&col, (int64_t[]){2, 3, 3}, 3, &b), FC_OK);
    assert_int_equal(b.strides[0], 0);
    assert_int_equal(b.strides[1], 1);
    assert_int_equal(b.strides[2], 0);
    assert_true(at_f32(&b, (int64_t[]){1, 2, 0}) == 3.0f);
    assert_true(at_f32(&b, (int64_t[]){0, 1, 2}) == 2.0f);
    fc__raw_release(&b);

    /* the seed's cases at the view level */
    fc_raw m = make_f32((int64_t[]){2, 3}, 2);
    unsigned refs = refs_of(&m);
    assert_int_equal(fc__raw_broadcast_to(&m, (int64_t[]){3, 2}, 2, &b), FC_ERR_SHAPE_MISMATCH);
    assert_int_equal(fc__raw_broadcast_to(&m, (int64_t[]){3}, 1, &b), FC_ERR_SHAPE_MISMATCH);
    assert_int_equal(fc__raw_broadcast_to(&m, (int64_t[]){4, 2, 2}, 3, &b), FC_ERR_SHAPE_MISMATCH);
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 2, 3};
    assert_int_equal(fc__raw_broadcast_to(&m, nine, 9, &b), FC_ERR_RANK);
    assert_int_equal(fc__raw_broadcast_to(&m, (int64_t[]){0, 3}, 2, &b), FC_ERR_INVALID_SHAPE);
    assert_int_equal(refs_of(&m), refs);
    /* identity broadcast keeps the layout */
    assert_int_equal(fc__raw_broadcast_to(&m, (int64_t[]){2, 3}, 2, &b), FC_OK);
    assert_true(fc__raw_is_contiguous(&b));
    fc__raw_release(&b);
    fc__raw_release(&m);
    fc__raw_release(&col);
    fc__raw_release(&a);
}

static void test_raw_block_identity_only(void **state) {
    (void)state;
    unsigned char blocks[8 * 34];
    for (size_t i = 0; i < sizeof blocks; i++)
        blocks[i] = (unsigned char)(i ^ 0x5C);
    fc_raw w, v;
    assert_int_equal(
        fc__raw_from_data(ALLOC, FC_Q8_0, (int64_t[]){4, 64}, 2, blocks, sizeof blocks, &w), FC_OK);
    unsigned refs = refs_of(&w);
    assert_int_equal(fc__raw_reshape(&w, (int64_t[]){256}, 1, &v), FC_ERR_UNSUPPORTED_VIEW);
    assert_int_equal(fc__raw_reshape(&w, (int64_t[]){2, 128}, 2, &v), FC_ERR_UNSUPPORTED_VIEW);
    assert_int_equal(fc__raw_reshape(&w, (int64_t[]){8, 32}, 2, &v), FC_ERR_UNSUPPORTED_VIEW);
    assert_int_equal(fc__raw_reshape(&w, (int64_t[]){1, 4, 64}, 3, &v), FC_ERR_UNSUPPORTED_VIEW);
    assert_int_equal(fc__raw_view_strided(&w, (int64_t[]){4, 64}, (int64_t[]){2, 1}, 2, 1, &v),
                     FC_ERR_UNSUPPORTED_VIEW);
    assert_int_equal(fc__raw_view_strided(&w, (int64_t[]){64, 4}, (int64_t[]){1, 2}, 2, 0, &v),
                     FC_ERR_UNSUPPORTED_VIEW);
    assert_int_equal(fc__raw_view_strided(&w, (int64_t[]){2, 64}, (int64_t[]){2, 1}, 2, 0, &v),
                     FC_ERR_UNSUPPORTED_VIEW);
    assert_int_equal(fc__raw_view_strided(&w, (int64_t[]){4, 32}, (int64_t[]){2, 1}, 2, 0, &v),
                     FC_ERR_UNSUPPORTED_VIEW);
    assert_int_equal(refs_of(&w), refs);
    /* the identity is a view */
    assert_int_equal(fc__raw_reshape(&w, (int64_t[]){4, 64}, 2, &v), FC_OK);
    assert_ptr_equal(v.buf, w.buf);
    fc__raw_release(&v);
    assert_int_equal(fc__raw_view_strided(&w, (int64_t[]){4, 64}, (int64_t[]){2, 1}, 2, 0, &v),
                     FC_OK);
    const void *p;
    assert_int_equal(fc__raw_data(&v, &p), FC_OK);
    assert_ptr_equal(p, w.buf->data);
    unsigned char out[8 * 34];
    assert_int_equal(fc__raw_copy_to(&v, out, sizeof out), FC_OK);
    assert_memory_equal(out, blocks, sizeof blocks);
    assert_int_equal(fc__raw_copy_to(&v, out, 4 * 64), FC_ERR_DATA_LENGTH);
    fc__raw_release(&v);

    /* leading-axis broadcast is a view, but it cannot be materialised */
    assert_int_equal(fc__raw_broadcast_to(&w, (int64_t[]){3, 4, 64}, 3, &v), FC_OK);
    assert_int_equal(v.strides[0], 0);
    assert_int_equal(v.strides[1], 2);
    assert_int_equal(v.strides[2], 1);
    unsigned char big[3 * 8 * 34];
    assert_int_equal(fc__raw_copy_to(&v, big, sizeof big), FC_ERR_UNSUPPORTED_VIEW);
    fc_raw c;
    assert_int_equal(fc__raw_clone(ALLOC, &v, &c), FC_ERR_UNSUPPORTED_VIEW);
    assert_int_equal(fc__raw_copy_range(&w, out, 0, 1), FC_ERR_DTYPE);
    unsigned char blk[34] = {0};
    assert_int_equal(fc__raw_fill(&w, blk), FC_ERR_DTYPE);
    assert_int_equal(fc__raw_broadcast_to(&w, (int64_t[]){4, 128}, 2, &c), FC_ERR_SHAPE_MISMATCH);
    fc__raw_release(&v);

    /* clone of a contiguous block tensor is a fresh copy */
    assert_int_equal(fc__raw_clone(ALLOC, &w, &c), FC_OK);
    assert_ptr_not_equal(c.buf, w.buf);
    assert_memory_equal(c.buf->data, blocks, sizeof blocks);
    fc__raw_release(&c);
    fc__raw_release(&w);
}

/* ---- data access ----------------------------------------------------------------- */

static void test_raw_data_access(void **state) {
    (void)state;
    fc_raw x = make_f32((int64_t[]){2, 3}, 2), tr, row;
    const void *cp = NULL;
    void *p = NULL;
    assert_int_equal(fc__raw_data(&x, &cp), FC_OK);
    assert_ptr_equal(cp, x.buf->data);
    assert_int_equal(fc__buffer_generation(x.buf), 0); /* reads do not bump */
    assert_int_equal(fc__raw_data_mut(&x, &p), FC_OK);
    assert_int_equal(fc__buffer_generation(x.buf), 1);
    assert_int_equal(fc__raw_data_mut(&x, &p), FC_OK);
    assert_int_equal(fc__buffer_generation(x.buf), 2);

    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){3, 2}, (int64_t[]){1, 3}, 2, 0, &tr),
                     FC_OK);
    cp = (const void *)0x1;
    assert_int_equal(fc__raw_data(&tr, &cp), FC_ERR_UNSUPPORTED_VIEW);
    assert_int_equal(fc__raw_data_mut(&tr, &p), FC_ERR_UNSUPPORTED_VIEW);
    assert_ptr_equal(cp, (const void *)0x1);
    assert_int_equal(fc__buffer_generation(x.buf), 2);

    /* an offset row is contiguous: the pointer starts at its first element */
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){1, 3}, (int64_t[]){99, 1}, 2, 3, &row),
                     FC_OK);
    assert_int_equal(fc__raw_data(&row, &cp), FC_OK);
    assert_ptr_equal(cp, (const float *)x.buf->data + 3);
    assert_true(*(const float *)cp == 4.0f);
    assert_int_equal(fc__raw_data(NULL, &cp), FC_ERR_NULL_ARG);
    assert_int_equal(fc__raw_data(&row, NULL), FC_ERR_NULL_ARG);
    assert_int_equal(fc__raw_data_mut(&row, NULL), FC_ERR_NULL_ARG);
    fc__raw_release(&row);
    fc__raw_release(&tr);
    fc__raw_release(&x);
}

/* ---- in place -------------------------------------------------------------------- */

static void test_raw_can_take_in_place(void **state) {
    (void)state;
    fc_raw x = make_f32((int64_t[]){2, 3}, 2), v;
    assert_true(fc__raw_can_take_in_place(&x));
    assert_int_equal(fc__raw_view(&x, &v), FC_OK);
    assert_false(fc__raw_can_take_in_place(&x)); /* shared */
    assert_false(fc__raw_can_take_in_place(&v));
    fc__raw_release(&v);
    assert_true(fc__raw_can_take_in_place(&x));

    /* unique but not the whole buffer */
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){3}, (int64_t[]){1}, 1, 3, &v), FC_OK);
    fc__raw_release(&x);
    assert_true(fc__raw_is_contiguous(&v));
    assert_false(fc__raw_can_take_in_place(&v)); /* offset 3 */
    fc__raw_release(&v);

    /* unique, offset 0, but transposed */
    x = make_f32((int64_t[]){2, 3}, 2);
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){3, 2}, (int64_t[]){1, 3}, 2, 0, &v),
                     FC_OK);
    fc__raw_release(&x);
    assert_true(fc__buffer_is_unique(v.buf));
    assert_false(fc__raw_can_take_in_place(&v));
    fc__raw_release(&v);

    /* unique, offset 0, broadcast */
    x = make_f32((int64_t[]){3}, 1);
    assert_int_equal(fc__raw_broadcast_to(&x, (int64_t[]){2, 3}, 2, &v), FC_OK);
    fc__raw_release(&x);
    assert_false(fc__raw_can_take_in_place(&v));
    fc__raw_release(&v);

    /* a reshape of a unique tensor is still whole and contiguous */
    x = make_f32((int64_t[]){2, 3}, 2);
    assert_int_equal(fc__raw_reshape(&x, (int64_t[]){6}, 1, &v), FC_OK);
    fc__raw_release(&x);
    assert_true(fc__raw_can_take_in_place(&v));
    fc__raw_release(&v);
    assert_false(fc__raw_can_take_in_place(NULL));
}

/* ---- the seed's rawViewTour (000 section 8.5.3) --------------------------------- */

static void test_raw_view_tour(void **state) {
    (void)state;
    fc_raw x = make_f32((int64_t[]){2, 3}, 2);

    /* transposed view: same buffer, swapped strides, not contiguous */
    fc_raw t;
    assert_int_equal(fc__raw_view_strided(&x, (int64_t[]){3, 2}, (int64_t[]){1, 3}, 2, 0, &t),
                     FC_OK);
    assert_ptr_equal(t.buf, x.buf);
    assert_false(fc__raw_is_contiguous(&t));
    const void *p;
    assert_int_equal(fc__raw_data(&t, &p), FC_ERR_UNSUPPORTED_VIEW);

    /* clone materialises any view into fresh contiguous storage */
    fc_raw m;
    assert_int_equal(fc__raw_clone(ALLOC, &t, &m), FC_OK);
    assert_true(fc__raw_is_contiguous(&m) && fc__raw_can_take_in_place(&m));
    const float want_m[6] = {1, 4, 2, 5, 3, 6};
    assert_memory_equal(m.buf->data, want_m, sizeof want_m);

    /* zero-stride broadcast view; reshape of a contiguous tensor is a view */
    fc_raw b, flat;
    assert_int_equal(fc__raw_broadcast_to(&x, (int64_t[]){4, 2, 3}, 3, &b), FC_OK);
    assert_true(at_f32(&b, (int64_t[]){3, 1, 2}) == 6.0f);
    assert_int_equal(fc__raw_reshape(&x, (int64_t[]){6}, 1, &flat), FC_OK);
    assert_ptr_equal(flat.buf, x.buf);
    assert_int_equal(refs_of(&x), 4);

    /* a non-f32 raw tensor */
    fc_raw ids;
    const uint16_t idv[6] = {1, 2, 3, 4, 5, 6};
    assert_int_equal(fc__raw_from_data(ALLOC, FC_U16, (int64_t[]){2, 3}, 2, idv, sizeof idv, &ids),
                     FC_OK);
    assert_int_equal(((const uint16_t *)ids.buf->data)[5], 6);

    /* block-quantized: last axis logical, storage in blocks (4*64/32 == 8) */
    unsigned char blocks[8 * 34] = {0};
    fc_raw w;
    assert_int_equal(
        fc__raw_from_data(ALLOC, FC_Q8_0, (int64_t[]){4, 64}, 2, blocks, sizeof blocks, &w), FC_OK);
    assert_int_equal(fc__raw_storage_numel(&w), 8);

    fc__raw_release(&w);
    fc__raw_release(&ids);
    fc__raw_release(&flat);
    fc__raw_release(&b);
    fc__raw_release(&m);
    fc__raw_release(&t);
    assert_int_equal(refs_of(&x), 1);
    fc__raw_release(&x);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_raw_empty_zeros),   T(test_raw_from_data),
        T(test_raw_from_borrowed), T(test_raw_from_buffer_steals),
        T(test_raw_oom_sweep),     T(test_raw_views_share_storage),
        T(test_raw_reshape),       T(test_raw_view_strided_bounds),
        T(test_raw_broadcast_to),  T(test_raw_block_identity_only),
        T(test_raw_data_access),   T(test_raw_can_take_in_place),
        T(test_raw_view_tour),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
