/* SPDX-License-Identifier: MIT */
/* test_raw_copy.c - the raw tensor's copy paths (src/core/raw.c): copy_to,
 * copy_range, copy_into, clone and fill, on every kind of view.
 *
 * The reference is deliberately naive: for each row-major position it
 * recomputes the multi-index by division and reads the element at
 * offset + sum(index * stride), one element at a time. The library's
 * odometer must agree with it byte for byte, for u8, i16, f32 and f64, on
 * named views (transposed, narrowed, stepped, broadcast, size-1 axes,
 * rank 8) and on thousands of random strided views. Every test runs on a
 * counting allocator and must leave nothing allocated. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
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

static const fc_dtype k_dtypes[] = {FC_U8, FC_I16, FC_F32, FC_F64};
#define NDTYPES 4

static uint32_t rnd(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

/* A contiguous rank-1 tensor of n elements with pseudo-random bytes, so that
 * every element is (very nearly always) distinguishable from its neighbours. */
static fc_raw make_base(fc_dtype dt, int64_t n, uint64_t seed) {
    size_t bytes = (size_t)n * fc_dtype_size(dt);
    unsigned char *v = malloc(bytes);
    assert_non_null(v);
    for (size_t i = 0; i < bytes; i++)
        v[i] = (unsigned char)rnd(&seed);
    fc_raw t;
    assert_int_equal(fc__raw_from_data(ALLOC, dt, (int64_t[]){n}, 1, v, bytes, &t), FC_OK);
    free(v);
    return t;
}

static int64_t ref_offset(const fc_raw *t, int64_t lin) {
    int64_t off = t->offset;
    for (int i = t->rank - 1; i >= 0; i--) {
        off += (lin % t->shape[i]) * t->strides[i];
        lin /= t->shape[i];
    }
    return off;
}

/* The plain reference: element lin of the row-major order, by division. */
static void ref_copy(const fc_raw *t, unsigned char *dst) {
    size_t es = fc_dtype_size(t->dtype);
    int64_t n = fc__raw_numel(t);
    for (int64_t lin = 0; lin < n; lin++)
        memcpy(dst + (size_t)lin * es,
               (const unsigned char *)t->buf->data + ref_offset(t, lin) * es, es);
}

/* copy_to, clone and copy_range over random splits, all against ref_copy. */
static void check_view(const fc_raw *v, uint64_t *rng) {
    size_t es = fc_dtype_size(v->dtype);
    int64_t n = fc__raw_numel(v);
    size_t bytes = (size_t)n * es;
    unsigned char *want = malloc(bytes), *got = malloc(bytes + 1);
    assert_non_null(want);
    assert_non_null(got);
    ref_copy(v, want);

    unsigned gen = fc__buffer_generation(v->buf), refs = atomic_load(&v->buf->refs);
    memset(got, 0xCC, bytes + 1);
    assert_int_equal(fc__raw_copy_to(v, got, bytes), FC_OK);
    assert_memory_equal(got, want, bytes);
    assert_int_equal(got[bytes], 0xCC);
    assert_int_equal(fc__raw_copy_to(v, got, bytes - 1), FC_ERR_DATA_LENGTH);
    assert_int_equal(fc__raw_copy_to(v, got, bytes + 1), FC_ERR_DATA_LENGTH);

    fc_raw c;
    assert_int_equal(fc__raw_clone(ALLOC, v, &c), FC_OK);
    assert_ptr_not_equal(c.buf, v->buf);
    assert_int_equal(c.offset, 0);
    assert_true(fc__raw_is_contiguous(&c));
    assert_true(fc__shape_equal(c.shape, c.rank, v->shape, v->rank));
    assert_int_equal(c.buf->nbytes, bytes);
    assert_memory_equal(c.buf->data, want, bytes);
    assert_true(fc__raw_can_take_in_place(&c));
    fc__raw_release(&c);

    /* a random partition of [0, n) into ranges, concatenated */
    memset(got, 0xCC, bytes + 1);
    int64_t start = 0;
    while (start < n) {
        int64_t count = (int64_t)(rnd(rng) % (uint32_t)(n - start + 1));
        if (rnd(rng) % 4 == 0) count = 1;
        assert_int_equal(fc__raw_copy_range(v, got + (size_t)start * es, start, count), FC_OK);
        start += count;
    }
    assert_memory_equal(got, want, bytes);
    assert_int_equal(got[bytes], 0xCC);
    /* reading never counts as a mutation and retains nothing */
    assert_int_equal(fc__buffer_generation(v->buf), gen);
    assert_int_equal(atomic_load(&v->buf->refs), refs);
    free(want);
    free(got);
}

static fc_raw view(const fc_raw *base, const int64_t *shape, const int64_t *strides, int rank,
                   int64_t delta) {
    fc_raw v;
    assert_int_equal(fc__raw_view_strided(base, shape, strides, rank, delta, &v), FC_OK);
    return v;
}

/* ---- named views ------------------------------------------------------------------ */

static void test_raw_copy_named_views(void **state) {
    (void)state;
    uint64_t rng = 7;
    for (int d = 0; d < NDTYPES; d++) {
        fc_raw x = make_base(k_dtypes[d], 120, 100 + (uint64_t)d); /* read as {4,5,6} */
        fc_raw x8 = make_base(k_dtypes[d], 256, 200 + (uint64_t)d);
        fc_raw vs[16];
        int nv = 0;
        /* the tensor itself, as {4,5,6}: one memcpy */
        vs[nv++] = view(&x, (int64_t[]){4, 5, 6}, (int64_t[]){30, 6, 1}, 3, 0);
        /* transposed (axes 2,0,1) and a plain 2-D transpose */
        vs[nv++] = view(&x, (int64_t[]){6, 4, 5}, (int64_t[]){1, 30, 6}, 3, 0);
        vs[nv++] = view(&x, (int64_t[]){6, 20}, (int64_t[]){1, 6}, 2, 0);
        /* narrowed [1:3, 1:4, 2:5]: the last axis is a short contiguous run */
        vs[nv++] = view(&x, (int64_t[]){2, 3, 3}, (int64_t[]){30, 6, 1}, 3, 38);
        /* narrowed rows [1:4] of full width: a contiguous suffix of two axes */
        vs[nv++] = view(&x, (int64_t[]){4, 3, 6}, (int64_t[]){30, 6, 1}, 3, 6);
        /* stepped: every other element of the last axis */
        vs[nv++] = view(&x, (int64_t[]){4, 5, 3}, (int64_t[]){30, 6, 2}, 3, 1);
        /* size-1 axes with arbitrary strides, contiguous and not */
        vs[nv++] = view(&x, (int64_t[]){4, 1, 5, 1, 6}, (int64_t[]){30, 777, 6, 0, 1}, 5, 0);
        vs[nv++] = view(&x, (int64_t[]){6, 1, 4}, (int64_t[]){1, 13, 30}, 3, 0);
        vs[nv++] = view(&x, (int64_t[]){1}, (int64_t[]){5}, 1, 119);
        /* rank 8: all axes reversed, and a mixed one with size-1 and zero strides */
        vs[nv++] = view(&x8, (int64_t[]){2, 2, 2, 2, 2, 2, 2, 2},
                        (int64_t[]){1, 2, 4, 8, 16, 32, 64, 128}, 8, 0);
        vs[nv++] = view(&x8, (int64_t[]){2, 1, 3, 2, 1, 2, 2, 3},
                        (int64_t[]){128, 9, 32, 0, 5, 8, 1, 2}, 8, 3);
        /* broadcasts: new leading axes, a middle size-1 axis, the innermost axis */
        fc_raw row = view(&x, (int64_t[]){6}, (int64_t[]){1}, 1, 12);
        fc_raw col = view(&x, (int64_t[]){4, 1}, (int64_t[]){30, 1}, 2, 2);
        fc_raw mid = view(&x, (int64_t[]){4, 1, 6}, (int64_t[]){30, 6, 1}, 3, 0);
        assert_int_equal(fc__raw_broadcast_to(&row, (int64_t[]){3, 4, 6}, 3, &vs[nv++]), FC_OK);
        assert_int_equal(fc__raw_broadcast_to(&col, (int64_t[]){4, 6}, 2, &vs[nv++]), FC_OK);
        assert_int_equal(fc__raw_broadcast_to(&col, (int64_t[]){2, 4, 3}, 3, &vs[nv++]), FC_OK);
        assert_int_equal(fc__raw_broadcast_to(&mid, (int64_t[]){4, 5, 6}, 3, &vs[nv++]), FC_OK);
        assert_int_equal(vs[nv - 3].strides[1], 0); /* (4,1)->(4,6): innermost stride 0 */
        for (int i = 0; i < nv; i++) {
            check_view(&vs[i], &rng);
            fc__raw_release(&vs[i]);
        }
        fc__raw_release(&row);
        fc__raw_release(&col);
        fc__raw_release(&mid);
        assert_int_equal(atomic_load(&x.buf->refs), 1);
        fc__raw_release(&x);
        fc__raw_release(&x8);
    }
}

/* A broadcast on the innermost axis, spelled out: (3,1) -> (3,4) must give
 * a0 a0 a0 a0 a1 a1 a1 a1 a2 a2 a2 a2. */
static void test_raw_copy_innermost_broadcast(void **state) {
    (void)state;
    const int16_t v[3] = {10, 20, 30};
    fc_raw a, b;
    assert_int_equal(fc__raw_from_data(ALLOC, FC_I16, (int64_t[]){3, 1}, 2, v, sizeof v, &a),
                     FC_OK);
    assert_int_equal(fc__raw_broadcast_to(&a, (int64_t[]){3, 4}, 2, &b), FC_OK);
    int16_t out[12];
    const int16_t want[12] = {10, 10, 10, 10, 20, 20, 20, 20, 30, 30, 30, 30};
    assert_int_equal(fc__raw_copy_to(&b, out, sizeof out), FC_OK);
    assert_memory_equal(out, want, sizeof want);
    for (int64_t s = 0; s < 12; s++) {
        int16_t one = -1;
        assert_int_equal(fc__raw_copy_range(&b, &one, s, 1), FC_OK);
        assert_int_equal(one, want[s]);
    }
    /* and the seed's (3,) against (3,1): both broadcast to (3,3) */
    fc_raw r, bc, br;
    assert_int_equal(fc__raw_from_data(ALLOC, FC_I16, (int64_t[]){3}, 1, v, sizeof v, &r), FC_OK);
    assert_int_equal(fc__raw_broadcast_to(&a, (int64_t[]){3, 3}, 2, &bc), FC_OK);
    assert_int_equal(fc__raw_broadcast_to(&r, (int64_t[]){3, 3}, 2, &br), FC_OK);
    int16_t oc[9], orow[9];
    assert_int_equal(fc__raw_copy_to(&bc, oc, sizeof oc), FC_OK);
    assert_int_equal(fc__raw_copy_to(&br, orow, sizeof orow), FC_OK);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            assert_int_equal(oc[i * 3 + j], v[i]);
            assert_int_equal(orow[i * 3 + j], v[j]);
        }
    fc__raw_release(&br);
    fc__raw_release(&bc);
    fc__raw_release(&r);
    fc__raw_release(&b);
    fc__raw_release(&a);
}

/* ---- random strided views ---------------------------------------------------------- */

typedef struct coverage {
    int total, contiguous, inner_strided, inner_zero, has_zero, rank8, size1;
} coverage;

static void random_view(const fc_raw *base, uint64_t *rng, fc_raw *out, coverage *cov) {
    int64_t cap = fc__raw_numel(base);
    for (;;) {
        int rank = 1 + (int)(rnd(rng) % 8);
        int64_t dims[8], strides[8], numel = 1;
        for (int i = 0; i < rank; i++) {
            dims[i] = 1 + rnd(rng) % 4;
            if (numel * dims[i] > 400) dims[i] = 1;
            numel *= dims[i];
        }
        /* start from a row-major layout, maybe with padding, then disturb it */
        int64_t s = 1 + (rnd(rng) % 3 == 0 ? (int64_t)(rnd(rng) % 3) : 0);
        for (int i = rank - 1; i >= 0; i--) {
            strides[i] = s;
            s *= dims[i] + (rnd(rng) % 4 == 0 ? 1 : 0);
        }
        for (int i = 0; i < rank; i++) {
            switch (rnd(rng) % 10) {
            case 0:
                strides[i] = 0;
                break;
            case 1:
                strides[i] = rnd(rng) % 10;
                break;
            case 2:
                strides[i] *= 2;
                break;
            default:
                break;
            }
        }
        if (rnd(rng) % 3 == 0) { /* a random permutation of the axes */
            for (int i = rank - 1; i > 0; i--) {
                int j = (int)(rnd(rng) % (uint32_t)(i + 1));
                int64_t td = dims[i], ts = strides[i];
                dims[i] = dims[j], strides[i] = strides[j];
                dims[j] = td, strides[j] = ts;
            }
        }
        int64_t reach = 0;
        for (int i = 0; i < rank; i++)
            reach += (dims[i] - 1) * strides[i];
        if (reach >= cap) continue;
        int64_t delta = (int64_t)(rnd(rng) % (uint32_t)(cap - reach));
        /* the first start that reaches past the end is refused */
        fc_raw bad;
        assert_int_equal(fc__raw_view_strided(base, dims, strides, rank, cap - reach, &bad),
                         FC_ERR_INDEX);
        *out = view(base, dims, strides, rank, delta);
        cov->total++;
        cov->contiguous += fc__raw_is_contiguous(out);
        cov->inner_strided += dims[rank - 1] > 1 && strides[rank - 1] > 1;
        cov->inner_zero += dims[rank - 1] > 1 && strides[rank - 1] == 0;
        cov->rank8 += rank == 8;
        bool z = false, one = false;
        for (int i = 0; i < rank; i++) {
            z |= dims[i] > 1 && strides[i] == 0;
            one |= dims[i] == 1;
        }
        cov->has_zero += z;
        cov->size1 += one;
        return;
    }
}

static void test_raw_copy_random_views(void **state) {
    (void)state;
    uint64_t rng = 0xC0FFEE;
    coverage cov = {0};
    for (int d = 0; d < NDTYPES; d++) {
        fc_raw base = make_base(k_dtypes[d], 1500, 300 + (uint64_t)d);
        for (int it = 0; it < 600; it++) {
            fc_raw v;
            random_view(&base, &rng, &v, &cov);
            check_view(&v, &rng);
            fc__raw_release(&v);
        }
        fc__raw_release(&base);
    }
    /* the sweep must have exercised every path of the odometer */
    assert_int_equal(cov.total, 2400);
    assert_true(cov.contiguous > 50);
    assert_true(cov.inner_strided > 100);
    assert_true(cov.inner_zero > 50);
    assert_true(cov.has_zero > 200);
    assert_true(cov.rank8 > 100);
    assert_true(cov.size1 > 500);
}

/* ---- copy_range --------------------------------------------------------------------- */

static void test_raw_copy_range_every_split(void **state) {
    (void)state;
    fc_raw x = make_base(FC_F32, 24, 9);
    fc_raw views[4];
    views[0] = view(&x, (int64_t[]){2, 3, 4}, (int64_t[]){12, 4, 1}, 3, 0); /* contiguous */
    views[1] = view(&x, (int64_t[]){4, 3, 2}, (int64_t[]){1, 4, 12}, 3, 0); /* transposed */
    views[2] = view(&x, (int64_t[]){2, 2, 6}, (int64_t[]){12, 0, 2}, 3, 1); /* zero + step */
    views[3] = view(&x, (int64_t[]){3, 2, 4}, (int64_t[]){4, 0, 1}, 3, 12); /* run + zero */
    for (int vi = 0; vi < 4; vi++) {
        const fc_raw *v = &views[vi];
        int64_t n = fc__raw_numel(v);
        assert_int_equal(n, 24);
        float want[24], got[26];
        ref_copy(v, (unsigned char *)want);
        for (int64_t start = 0; start <= n; start++) {
            for (int64_t count = 0; start + count <= n; count++) {
                memset(got, 0xCC, sizeof got);
                assert_int_equal(fc__raw_copy_range(v, got + 1, start, count), FC_OK);
                assert_memory_equal(got + 1, want + start, (size_t)count * sizeof(float));
                const unsigned char *g = (const unsigned char *)got;
                for (size_t b = 0; b < sizeof(float); b++) {
                    assert_int_equal(g[b], 0xCC); /* nothing before dst */
                    assert_int_equal(g[(size_t)(count + 1) * sizeof(float) + b], 0xCC);
                }
            }
        }
        float one;
        assert_int_equal(fc__raw_copy_range(v, &one, -1, 1), FC_ERR_INDEX);
        assert_int_equal(fc__raw_copy_range(v, &one, 0, -1), FC_ERR_INDEX);
        assert_int_equal(fc__raw_copy_range(v, &one, n + 1, 0), FC_ERR_INDEX);
        assert_int_equal(fc__raw_copy_range(v, &one, n - 1, 2), FC_ERR_INDEX);
        assert_int_equal(fc__raw_copy_range(v, &one, 1, INT64_MAX), FC_ERR_INDEX);
        assert_int_equal(fc__raw_copy_range(v, NULL, 0, 1), FC_ERR_NULL_ARG);
        assert_int_equal(fc__raw_copy_range(v, &one, n, 0), FC_OK);
        fc__raw_release(&views[vi]);
    }
    fc__raw_release(&x);
}

/* Disjoint ranges of one view copied from several threads at once (how the
 * exec layer parallelises a large materialisation) give copy_to's result. */
typedef struct range_job {
    const fc_raw *v;
    unsigned char *dst;
    int64_t start, count;
    fc_status st;
} range_job;

static void *range_thread(void *arg) {
    range_job *j = arg;
    size_t es = fc_dtype_size(j->v->dtype);
    j->st = fc__raw_copy_range(j->v, j->dst + (size_t)j->start * es, j->start, j->count);
    return NULL;
}

static void test_raw_copy_range_concurrent(void **state) {
    (void)state;
    fc_raw x = make_base(FC_I16, 96 * 70, 77);
    /* a transposed, stepped view: every other column of a 96x70 block */
    fc_raw v = view(&x, (int64_t[]){35, 96}, (int64_t[]){2, 70}, 2, 1);
    int64_t n = fc__raw_numel(&v);
    size_t bytes = (size_t)n * 2;
    unsigned char *want = malloc(bytes), *got = malloc(bytes);
    assert_non_null(want);
    assert_non_null(got);
    ref_copy(&v, want);
    memset(got, 0, bytes);
    enum { NT = 6 };
    range_job jobs[NT];
    pthread_t th[NT];
    for (int i = 0; i < NT; i++) {
        /* uneven split points that fall inside rows */
        int64_t a = n * i / NT + (i ? 7 : 0), b = i + 1 < NT ? n * (i + 1) / NT + 7 : n;
        jobs[i] = (range_job){&v, got, a, b - a, FC_ERR_STATE};
        assert_int_equal(pthread_create(&th[i], NULL, range_thread, &jobs[i]), 0);
    }
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(jobs[i].st, FC_OK);
    }
    assert_memory_equal(got, want, bytes);
    free(want);
    free(got);
    fc__raw_release(&v);
    fc__raw_release(&x);
}

/* ---- copy_into -------------------------------------------------------------------- */

/* Copies src into dst and checks every element of dst's buffer: the ones the
 * view covers now hold src's values, all others are unchanged. dst must be
 * injective (no zero strides, no overlapping elements). */
static void check_copy_into(const fc_raw *src, fc_raw *dst) {
    size_t es = fc_dtype_size(src->dtype);
    int64_t n = fc__raw_numel(src);
    size_t cap = dst->buf->nbytes;
    unsigned char *before = malloc(cap), *want = malloc(cap), *vals = malloc((size_t)n * es);
    assert_non_null(before);
    assert_non_null(want);
    assert_non_null(vals);
    memcpy(before, dst->buf->data, cap);
    memcpy(want, before, cap);
    ref_copy(src, vals);
    for (int64_t lin = 0; lin < n; lin++)
        memcpy(want + ref_offset(dst, lin) * (int64_t)es, vals + (size_t)lin * es, es);
    unsigned dgen = fc__buffer_generation(dst->buf), sgen = fc__buffer_generation(src->buf);
    assert_int_equal(fc__raw_copy_into(src, dst), FC_OK);
    assert_memory_equal(dst->buf->data, want, cap);
    assert_int_equal(fc__buffer_generation(dst->buf), dgen + 1);
    if (src->buf != dst->buf) assert_int_equal(fc__buffer_generation(src->buf), sgen);
    free(before);
    free(want);
    free(vals);
}

static void test_raw_copy_into_strided_dst(void **state) {
    (void)state;
    uint64_t rng = 31337;
    for (int d = 0; d < NDTYPES; d++) {
        fc_dtype dt = k_dtypes[d];
        fc_raw sbase = make_base(dt, 64, 11 + (uint64_t)d), dbase = make_base(dt, 64, 99);
        /* columns 1,3,5 of a 4x6 block, written through a transposed index */
        fc_raw dst = view(&dbase, (int64_t[]){3, 4}, (int64_t[]){2, 6}, 2, 1);
        fc_raw src = view(&sbase, (int64_t[]){3, 4}, (int64_t[]){1, 3}, 2, 0); /* transposed */
        check_copy_into(&src, &dst);
        fc__raw_release(&src);
        /* a broadcast source into a strided destination */
        fc_raw r = view(&sbase, (int64_t[]){4}, (int64_t[]){1}, 1, 7);
        assert_int_equal(fc__raw_broadcast_to(&r, (int64_t[]){3, 4}, 2, &src), FC_OK);
        check_copy_into(&src, &dst);
        fc__raw_release(&src);
        fc__raw_release(&r);
        fc__raw_release(&dst);
        /* contiguous destination with an offset, strided source */
        dst = view(&dbase, (int64_t[]){2, 5}, (int64_t[]){5, 1}, 2, 20);
        src = view(&sbase, (int64_t[]){2, 5}, (int64_t[]){1, 7}, 2, 3);
        check_copy_into(&src, &dst);
        fc__raw_release(&src);
        fc__raw_release(&dst);
        /* random injective destinations: a padded row-major layout, permuted */
        for (int it = 0; it < 150; it++) {
            int rank = 1 + (int)(rnd(&rng) % 4);
            int64_t dims[4], ds[4], ss[4], s = 1 + rnd(&rng) % 2, sreach = 0, dreach = 0;
            for (int i = rank - 1; i >= 0; i--) {
                dims[i] = 1 + rnd(&rng) % 3;
                ds[i] = s;
                s *= dims[i] + rnd(&rng) % 2;
            }
            /* permuting (dim, stride) pairs together keeps the layout injective */
            for (int i = rank - 1; i > 0; i--) {
                int j = (int)(rnd(&rng) % (uint32_t)(i + 1));
                int64_t td = dims[i], ts = ds[i];
                dims[i] = dims[j], ds[i] = ds[j];
                dims[j] = td, ds[j] = ts;
            }
            for (int i = 0; i < rank; i++) {
                ss[i] = rnd(&rng) % 4;
                sreach += (dims[i] - 1) * ss[i];
                dreach += (dims[i] - 1) * ds[i];
            }
            if (dreach >= 64 || sreach >= 64) continue;
            dst = view(&dbase, dims, ds, rank, (int64_t)(rnd(&rng) % (uint32_t)(64 - dreach)));
            src = view(&sbase, dims, ss, rank, (int64_t)(rnd(&rng) % (uint32_t)(64 - sreach)));
            check_copy_into(&src, &dst);
            fc__raw_release(&src);
            fc__raw_release(&dst);
        }
        fc__raw_release(&sbase);
        fc__raw_release(&dbase);
    }
}

static void test_raw_copy_into_refusals(void **state) {
    (void)state;
    fc_raw a = make_base(FC_F32, 6, 1), b = make_base(FC_F32, 6, 2), c = make_base(FC_I32, 6, 3);
    fc_raw a23 = view(&a, (int64_t[]){2, 3}, (int64_t[]){3, 1}, 2, 0);
    fc_raw b32 = view(&b, (int64_t[]){3, 2}, (int64_t[]){2, 1}, 2, 0);
    fc_raw b23 = view(&b, (int64_t[]){2, 3}, (int64_t[]){3, 1}, 2, 0);
    unsigned char snap[24];
    memcpy(snap, b.buf->data, 24);
    assert_int_equal(fc__raw_copy_into(&a23, &b32), FC_ERR_SHAPE_MISMATCH);
    assert_int_equal(fc__raw_copy_into(&a, &b23), FC_ERR_SHAPE_MISMATCH); /* rank 1 vs 2 */
    assert_int_equal(fc__raw_copy_into(&a, &c), FC_ERR_DTYPE);
    fc_raw bc;
    assert_int_equal(fc__raw_broadcast_to(&a, (int64_t[]){2, 6}, 2, &bc), FC_OK);
    fc_raw b26 = view(&b, (int64_t[]){2, 6}, (int64_t[]){0, 1}, 2, 0);
    assert_int_equal(fc__raw_copy_into(&bc, &b26), FC_ERR_UNSUPPORTED_VIEW); /* dst broadcast */
    fc__raw_release(&b26);
    fc__raw_release(&bc);
    assert_int_equal(fc__raw_copy_into(NULL, &b), FC_ERR_NULL_ARG);
    assert_int_equal(fc__raw_copy_into(&a, NULL), FC_ERR_NULL_ARG);
    /* refusals neither write nor count as a mutation */
    assert_memory_equal(b.buf->data, snap, 24);
    assert_int_equal(fc__buffer_generation(b.buf), 0);
    /* block tensors: a contiguous copy works, a strided one is refused untouched */
    unsigned char blocks[4 * 34];
    for (size_t i = 0; i < sizeof blocks; i++)
        blocks[i] = (unsigned char)(i * 3);
    fc_raw q, q2, qb;
    assert_int_equal(
        fc__raw_from_data(ALLOC, FC_Q8_0, (int64_t[]){2, 64}, 2, blocks, sizeof blocks, &q), FC_OK);
    assert_int_equal(fc__raw_zeros(ALLOC, FC_Q8_0, (int64_t[]){2, 64}, 2, &q2), FC_OK);
    assert_int_equal(fc__raw_copy_into(&q, &q2), FC_OK);
    assert_memory_equal(q2.buf->data, blocks, sizeof blocks);
    fc_raw q1;
    assert_int_equal(fc__raw_from_data(ALLOC, FC_Q8_0, (int64_t[]){1, 64}, 2, blocks, 68, &q1),
                     FC_OK);
    assert_int_equal(fc__raw_broadcast_to(&q1, (int64_t[]){2, 64}, 2, &qb), FC_OK);
    unsigned gen = fc__buffer_generation(q2.buf);
    memset(q2.buf->data, 0, sizeof blocks);
    assert_int_equal(fc__raw_copy_into(&qb, &q2), FC_ERR_UNSUPPORTED_VIEW);
    assert_int_equal(fc__buffer_generation(q2.buf), gen);
    for (size_t i = 0; i < sizeof blocks; i++)
        assert_int_equal(((unsigned char *)q2.buf->data)[i], 0);
    fc__raw_release(&qb);
    fc__raw_release(&q1);
    fc__raw_release(&q2);
    fc__raw_release(&q);
    fc__raw_release(&b23);
    fc__raw_release(&b32);
    fc__raw_release(&a23);
    fc__raw_release(&a);
    fc__raw_release(&b);
    fc__raw_release(&c);
}

/* ---- clone -------------------------------------------------------------------------- */

static void test_raw_clone_independent(void **state) {
    (void)state;
    fc_raw x = make_base(FC_F64, 30, 5);
    fc_raw v = view(&x, (int64_t[]){3, 2}, (int64_t[]){1, 10}, 2, 7);
    unsigned char before[30 * 8];
    memcpy(before, x.buf->data, sizeof before);
    fc_raw c;
    assert_int_equal(fc__raw_clone(ALLOC, &v, &c), FC_OK);
    assert_int_equal(c.offset, 0);
    assert_int_equal(c.strides[0], 2);
    assert_int_equal(c.strides[1], 1);
    assert_int_equal(atomic_load(&c.buf->refs), 1);
    assert_int_equal(atomic_load(&x.buf->refs), 2); /* x and v only */
    double want[6];
    ref_copy(&v, (unsigned char *)want);
    assert_memory_equal(c.buf->data, want, sizeof want);
    /* writes to the clone do not reach the source, and the reverse */
    double z = 0.0;
    assert_int_equal(fc__raw_fill(&c, &z), FC_OK);
    assert_memory_equal(x.buf->data, before, sizeof before);
    ((double *)x.buf->data)[7] = 1234.5;
    for (int i = 0; i < 6; i++)
        assert_true(((double *)c.buf->data)[i] == 0.0);
    fc__raw_release(&c);
    assert_int_equal(fc__raw_clone(ALLOC, NULL, &c), FC_ERR_NULL_ARG);
    assert_int_equal(fc__raw_clone(ALLOC, &v, NULL), FC_ERR_NULL_ARG);
    fc__raw_release(&v);
    fc__raw_release(&x);
}

/* ---- fill ---------------------------------------------------------------------------- */

static void check_fill(fc_raw *v, const void *value) {
    size_t es = fc_dtype_size(v->dtype);
    size_t cap = v->buf->nbytes;
    unsigned char *want = malloc(cap);
    assert_non_null(want);
    memcpy(want, v->buf->data, cap);
    for (int64_t lin = 0; lin < fc__raw_numel(v); lin++)
        memcpy(want + ref_offset(v, lin) * (int64_t)es, value, es);
    unsigned gen = fc__buffer_generation(v->buf);
    assert_int_equal(fc__raw_fill(v, value), FC_OK);
    assert_memory_equal(v->buf->data, want, cap);
    assert_int_equal(fc__buffer_generation(v->buf), gen + 1);
    free(want);
}

static void test_raw_fill_strided(void **state) {
    (void)state;
    const uint8_t v8 = 0xAB;
    const int16_t v16 = -12345;
    const float v32 = -2.5f;
    const double v64 = 3.0e100;
    const void *vals[NDTYPES] = {&v8, &v16, &v32, &v64};
    for (int d = 0; d < NDTYPES; d++) {
        fc_raw x = make_base(k_dtypes[d], 256, 40 + (uint64_t)d), v;
        const void *val = vals[d];
        /* every other column of a 4x6 block, through a transposed index */
        v = view(&x, (int64_t[]){3, 4}, (int64_t[]){2, 6}, 2, 1);
        check_fill(&v, val);
        fc__raw_release(&v);
        /* narrowed contiguous, size-1 axes, rank 8, a single element */
        v = view(&x, (int64_t[]){2, 3}, (int64_t[]){3, 1}, 2, 50);
        check_fill(&v, val);
        fc__raw_release(&v);
        v = view(&x, (int64_t[]){3, 1, 4}, (int64_t[]){10, 99, 2}, 3, 100);
        check_fill(&v, val);
        fc__raw_release(&v);
        v = view(&x, (int64_t[]){2, 2, 2, 2, 2, 2, 2, 1}, (int64_t[]){1, 2, 4, 8, 16, 32, 64, 5}, 8,
                 0);
        check_fill(&v, val);
        fc__raw_release(&v);
        v = view(&x, (int64_t[]){1}, (int64_t[]){1}, 1, 255);
        check_fill(&v, val);
        fc__raw_release(&v);
        /* a broadcast view writes its one underlying element */
        v = view(&x, (int64_t[]){5, 3}, (int64_t[]){0, 0}, 2, 200);
        check_fill(&v, val);
        fc__raw_release(&v);
        /* the whole tensor */
        check_fill(&x, val);
        assert_int_equal(fc__raw_fill(&x, NULL), FC_ERR_NULL_ARG);
        assert_int_equal(fc__raw_fill(NULL, val), FC_ERR_NULL_ARG);
        fc__raw_release(&x);
    }
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_raw_copy_named_views),      T(test_raw_copy_innermost_broadcast),
        T(test_raw_copy_random_views),     T(test_raw_copy_range_every_split),
        T(test_raw_copy_range_concurrent), T(test_raw_copy_into_strided_dst),
        T(test_raw_copy_into_refusals),    T(test_raw_clone_independent),
        T(test_raw_fill_strided),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
