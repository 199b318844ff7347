/* SPDX-License-Identifier: MIT */
/* test_buffer.c - refcounted, generation-counted storage (src/core/buffer.c).
 *
 * Every test allocates through a counting allocator that checks each free
 * against its allocation (pointer and size) and the teardown refuses any
 * live block, so "no leaks" and "frees exactly what it allocated" are
 * asserted after every test. The threaded tests race retain/release and the
 * final release from 8 threads and count how often the release hook ran. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/buffer.h"
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

static unsigned refs_of(fc_buffer *b) { return atomic_load(&b->refs); }

/* ---- ownership and alignment -------------------------------------------------- */

static void test_buffer_owned_aligned(void **state) {
    (void)state;
    const size_t sizes[] = {0, 1, 3, 63, 64, 65, 1000, 4096, 100003};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        fc_buffer *b = NULL;
        assert_int_equal(fc__buffer_create(ALLOC, sizes[i], &b), FC_OK);
        assert_non_null(b);
        assert_non_null(b->data);
        assert_int_equal((uintptr_t)b->data % FC_BUFFER_ALIGN, 0);
        assert_int_equal(b->nbytes, sizes[i]);
        assert_int_equal(refs_of(b), 1);
        assert_int_equal(fc__buffer_generation(b), 0);
        assert_true(b->flags & FC_BUF_OWNED);
        assert_false(fc__buffer_is_read_only(b));
        assert_true(fc__buffer_is_unique(b));
        /* the whole region is writable (ASan would flag a short allocation) */
        memset(b->data, 0xA5, sizes[i]);
        assert_int_equal(atomic_load(&g_alloc.live_blocks), 2); /* header + data */
        fc__buffer_release(b);
        assert_true(fct_counting_clean(&g_alloc));
    }
    /* the default allocator (NULL) keeps the same alignment */
    fc_buffer *b = NULL;
    assert_int_equal(fc__buffer_create(NULL, 777, &b), FC_OK);
    assert_int_equal((uintptr_t)b->data % FC_BUFFER_ALIGN, 0);
    memset(b->data, 1, 777);
    fc__buffer_release(b);
    assert_int_equal(fc__buffer_create(ALLOC, 8, NULL), FC_ERR_NULL_ARG);
}

static void test_buffer_alloc_helpers(void **state) {
    (void)state;
    const size_t aligns[] = {1, 8, 16, 64, 256, 4096};
    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
        void *p = fc__alloc(NULL, 100, aligns[i]);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % aligns[i], 0);
        fc__free(NULL, p, 100);
        p = fc__alloc(ALLOC, 100, aligns[i]);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % aligns[i], 0);
        assert_int_equal(atomic_load(&g_alloc.live_bytes), 100);
        fc__free(ALLOC, p, 100);
    }
    fc__free(ALLOC, NULL, 5); /* harmless */
    fc__free(NULL, NULL, 5);
    assert_int_equal(atomic_load(&g_alloc.total_frees), 6);
    assert_ptr_equal(fc_default_allocator()->alloc, fc_default_allocator()->alloc);
}

static void test_buffer_retain_release_counts(void **state) {
    (void)state;
    fc_buffer *b = NULL;
    assert_int_equal(fc__buffer_create(ALLOC, 32, &b), FC_OK);
    for (unsigned i = 0; i < 5; i++) {
        fc__buffer_retain(b);
        assert_int_equal(refs_of(b), 2 + i);
        assert_false(fc__buffer_is_unique(b));
    }
    for (unsigned i = 0; i < 5; i++) {
        fc__buffer_release(b);
        assert_int_equal(refs_of(b), 5 - i);
        assert_int_equal(atomic_load(&g_alloc.live_blocks), 2); /* still alive */
    }
    assert_true(fc__buffer_is_unique(b));
    fc__buffer_release(b);
    assert_int_equal(atomic_load(&g_alloc.live_blocks), 0);
    assert_int_equal(atomic_load(&g_alloc.total_frees), 2);
    fc__buffer_release(NULL); /* harmless */
    fc__buffer_retain(NULL);
}

/* ---- the threaded release race ------------------------------------------------ */

typedef struct hook_log {
    atomic_int calls;
    atomic_int refs_seen_nonzero; /* refs must already be 0 when the hook runs */
    atomic_int caller;            /* index of the thread whose release ran it */
    fc_buffer *expected;
} hook_log;

static _Thread_local int tl_thread_index = -1;

/* Owned-buffer hook: full cleanup through the buffer's own allocator. */
static void free_owned_hook(void *ctx, fc_buffer *b) {
    hook_log *log = ctx;
    if (atomic_load(&b->refs) != 0 || b != log->expected)
        atomic_fetch_add(&log->refs_seen_nonzero, 1);
    atomic_store(&log->caller, tl_thread_index);
    atomic_fetch_add(&log->calls, 1);
    fc__free(&b->alloc, b->data, b->nbytes ? b->nbytes : 1);
    fc__buffer_destroy_header(b);
}

#define NTHREADS 8
#define PAIRS 10000

typedef struct race_shared {
    fc_buffer *buf;
    pthread_barrier_t start, before_final;
    int pairs;
} race_shared;

typedef struct race_arg {
    race_shared *sh;
    int index;
} race_arg;

static void *race_thread(void *arg) {
    race_arg *a = arg;
    race_shared *sh = a->sh;
    fc_buffer *buf = sh->buf;
    tl_thread_index = a->index;
    pthread_barrier_wait(&sh->start);
    for (int i = 0; i < sh->pairs; i++) {
        fc__buffer_retain(buf);
        fc__buffer_release(buf);
    }
    /* everyone drops its own reference at once: exactly one sees zero */
    pthread_barrier_wait(&sh->before_final);
    fc__buffer_release(buf);
    return NULL;
}

static void run_race(int pairs, hook_log *log) {
    race_shared sh;
    race_arg args[NTHREADS];
    pthread_t th[NTHREADS];
    atomic_init(&log->calls, 0);
    atomic_init(&log->refs_seen_nonzero, 0);
    atomic_init(&log->caller, -1);
    assert_int_equal(fc__buffer_create_with_release(ALLOC, 256, free_owned_hook, log, &sh.buf),
                     FC_OK);
    log->expected = sh.buf;
    sh.pairs = pairs;
    for (int i = 1; i < NTHREADS; i++)
        fc__buffer_retain(sh.buf); /* one per thread */
    assert_int_equal(refs_of(sh.buf), NTHREADS);
    assert_int_equal(pthread_barrier_init(&sh.start, NULL, NTHREADS), 0);
    assert_int_equal(pthread_barrier_init(&sh.before_final, NULL, NTHREADS), 0);
    for (int i = 0; i < NTHREADS; i++) {
        args[i].sh = &sh;
        args[i].index = i;
        assert_int_equal(pthread_create(&th[i], NULL, race_thread, &args[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&sh.start);
    pthread_barrier_destroy(&sh.before_final);
}

static void test_buffer_threaded_release_once(void **state) {
    (void)state;
    hook_log log;
    run_race(PAIRS, &log);
    assert_int_equal(atomic_load(&log.calls), 1);
    assert_int_equal(atomic_load(&log.refs_seen_nonzero), 0);
    int who = atomic_load(&log.caller);
    assert_true(who >= 0 && who < NTHREADS);
    assert_true(fct_counting_clean(&g_alloc));
    /* many short rounds: the final releases race each time */
    int seen[NTHREADS] = {0};
    for (int round = 0; round < 100; round++) {
        run_race(10, &log);
        assert_int_equal(atomic_load(&log.calls), 1);
        assert_int_equal(atomic_load(&log.refs_seen_nonzero), 0);
        seen[atomic_load(&log.caller)]++;
        assert_true(fct_counting_clean(&g_alloc));
    }
    int total = 0;
    for (int i = 0; i < NTHREADS; i++)
        total += seen[i];
    assert_int_equal(total, 100);
}

/* ---- the mutation generation ---------------------------------------------------- */

typedef struct gen_race {
    fc_buffer *buf;
    int iters;
} gen_race;

static void *gen_thread(void *arg) {
    gen_race *g = arg;
    for (int i = 0; i < g->iters; i++) {
        void *p = NULL;
        if (fc__buffer_data_mut(g->buf, &p) != FC_OK || p != g->buf->data) abort();
    }
    return NULL;
}

static void test_buffer_generation(void **state) {
    (void)state;
    fc_buffer *b = NULL;
    assert_int_equal(fc__buffer_create(ALLOC, 16, &b), FC_OK);
    void *p = NULL;
    for (uint32_t i = 1; i <= 3; i++) {
        assert_int_equal(fc__buffer_data_mut(b, &p), FC_OK);
        assert_ptr_equal(p, b->data);
        assert_int_equal(fc__buffer_generation(b), i);
    }
    /* reads, queries and refcounting never bump it */
    assert_ptr_equal(fc__buffer_data(b), b->data);
    (void)fc__buffer_is_unique(b);
    (void)fc__buffer_is_read_only(b);
    fc__buffer_retain(b);
    fc__buffer_release(b);
    assert_int_equal(fc__buffer_generation(b), 3);
    fc__buffer_bump_generation(b);
    assert_int_equal(fc__buffer_generation(b), 4);
    assert_int_equal(fc__buffer_data_mut(NULL, &p), FC_ERR_NULL_ARG);
    assert_int_equal(fc__buffer_data_mut(b, NULL), FC_ERR_NULL_ARG);
    assert_int_equal(fc__buffer_generation(b), 4);

    /* concurrent mutable accesses each count exactly once */
    pthread_t th[4];
    gen_race g = {b, 1000};
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, gen_thread, &g), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(fc__buffer_generation(b), 4004);
    fc__buffer_release(b);
}

/* ---- borrowed storage ------------------------------------------------------------ */

static void test_buffer_borrowed_read_only(void **state) {
    (void)state;
    /* caller memory from plain malloc: if the library freed it, ASan would
     * report the later use and the counting allocator a foreign free */
    unsigned char *mem = malloc(48);
    assert_non_null(mem);
    for (int i = 0; i < 48; i++)
        mem[i] = (unsigned char)i;
    fc_buffer *b = NULL;
    assert_int_equal(fc__buffer_borrow(ALLOC, mem, 48, true, NULL, NULL, &b), FC_OK);
    assert_ptr_equal(fc__buffer_data(b), mem);
    assert_int_equal(b->nbytes, 48);
    assert_true(fc__buffer_is_read_only(b));
    assert_false(b->flags & FC_BUF_OWNED);
    assert_int_equal(atomic_load(&g_alloc.live_blocks), 1); /* the header only */
    void *p = (void *)0x1;
    assert_int_equal(fc__buffer_data_mut(b, &p), FC_ERR_READ_ONLY);
    assert_ptr_equal(p, (void *)0x1);
    assert_int_equal(fc__buffer_generation(b), 0); /* a refused access is no mutation */
    fc__buffer_retain(b);
    fc__buffer_release(b);
    fc__buffer_release(b);
    assert_true(fct_counting_clean(&g_alloc));
    for (int i = 0; i < 48; i++)
        assert_int_equal(mem[i], i); /* still ours, intact */
    free(mem);

    /* stack memory too: freeing it would crash */
    float local[4] = {1, 2, 3, 4};
    assert_int_equal(fc__buffer_borrow(ALLOC, local, sizeof local, true, NULL, NULL, &b), FC_OK);
    fc__buffer_destroy(b); /* pool-style teardown frees the header only as well */
    assert_true(fct_counting_clean(&g_alloc));
    assert_true(local[3] == 4.0f);
}

static void test_buffer_borrowed_writable(void **state) {
    (void)state;
    int32_t mem[6] = {0};
    fc_buffer *b = NULL;
    assert_int_equal(fc__buffer_borrow(ALLOC, mem, sizeof mem, false, NULL, NULL, &b), FC_OK);
    assert_false(fc__buffer_is_read_only(b));
    void *p = NULL;
    assert_int_equal(fc__buffer_data_mut(b, &p), FC_OK);
    assert_ptr_equal(p, mem);
    assert_int_equal(fc__buffer_generation(b), 1);
    ((int32_t *)p)[5] = 77; /* writes land in the caller's memory */
    assert_int_equal(mem[5], 77);
    fc__buffer_release(b);
    assert_int_equal(mem[5], 77);

    /* argument checks: no header is leaked by a refused call */
    assert_int_equal(fc__buffer_borrow(ALLOC, NULL, 8, false, NULL, NULL, &b), FC_ERR_NULL_ARG);
    assert_int_equal(fc__buffer_borrow(ALLOC, mem, 8, false, NULL, NULL, NULL), FC_ERR_NULL_ARG);
    assert_int_equal(atomic_load(&g_alloc.total_allocs), 1);
    /* an empty borrow may have no bytes at all */
    assert_int_equal(fc__buffer_borrow(ALLOC, NULL, 0, true, NULL, NULL, &b), FC_OK);
    fc__buffer_release(b);
}

/* External bytes with refcount-driven cleanup: the hook frees the data by
 * the means that made it and then the header (seed 000 8.4). */
typedef struct external {
    fct_counting *alloc;
    size_t nbytes;
    atomic_int calls;
} external;

static void free_external_hook(void *ctx, fc_buffer *b) {
    external *e = ctx;
    void *data = b->data;
    fc__buffer_destroy_header(b);
    fc__free(fct_counting_allocator(e->alloc), data, e->nbytes);
    atomic_fetch_add(&e->calls, 1);
}

static atomic_int g_self_ctx_calls;
static void self_ctx_hook(void *ctx, fc_buffer *b) {
    /* a NULL ctx means the buffer itself is passed as ctx */
    if (ctx == b) atomic_fetch_add(&g_self_ctx_calls, 1);
    fc__buffer_destroy_header(b);
}

static void test_buffer_release_hook_full_cleanup(void **state) {
    (void)state;
    external e = {&g_alloc, 300, 0};
    void *bytes = fc__alloc(ALLOC, e.nbytes, 64);
    assert_non_null(bytes);
    fc_buffer *b = NULL;
    assert_int_equal(fc__buffer_borrow(ALLOC, bytes, e.nbytes, false, free_external_hook, &e, &b),
                     FC_OK);
    fc__buffer_retain(b);
    fc__buffer_retain(b);
    fc__buffer_release(b);
    fc__buffer_release(b);
    assert_int_equal(atomic_load(&e.calls), 0);
    assert_int_equal(atomic_load(&g_alloc.live_blocks), 2);
    fc__buffer_release(b);
    assert_int_equal(atomic_load(&e.calls), 1);
    assert_true(fct_counting_clean(&g_alloc)); /* data and header both gone */

    static char fixed[16];
    atomic_store(&g_self_ctx_calls, 0);
    assert_int_equal(fc__buffer_borrow(ALLOC, fixed, 16, true, self_ctx_hook, NULL, &b), FC_OK);
    fc__buffer_release(b);
    assert_int_equal(atomic_load(&g_self_ctx_calls), 1);
}

/* A pool-style hook on an owned buffer: the final release parks the buffer
 * instead of freeing it; reset_refs revives it and destroy tears it down. */
typedef struct park {
    fc_buffer *parked;
    int calls;
} park;

static void park_hook(void *ctx, fc_buffer *b) {
    park *pk = ctx;
    pk->parked = b;
    pk->calls++;
}

static void test_buffer_pool_recycle_and_destroy(void **state) {
    (void)state;
    park pk = {NULL, 0};
    fc_buffer *b = NULL;
    assert_int_equal(fc__buffer_create_with_release(ALLOC, 128, park_hook, &pk, &b), FC_OK);
    assert_true(b->flags & FC_BUF_OWNED);
    assert_int_equal((uintptr_t)b->data % FC_BUFFER_ALIGN, 0);
    for (int cycle = 1; cycle <= 3; cycle++) {
        if (cycle == 2) { /* a shared buffer reaches the hook on its last release only */
            fc__buffer_retain(b);
            fc__buffer_release(b);
            assert_int_equal(pk.calls, 1);
            assert_true(fc__buffer_is_unique(b));
        }
        uint32_t gen = fc__buffer_generation(b);
        fc__buffer_release(b);
        assert_int_equal(pk.calls, cycle);
        assert_ptr_equal(pk.parked, b);
        assert_int_equal(atomic_load(&b->refs), 0); /* parked with no owner */
        assert_int_equal(atomic_load(&g_alloc.live_blocks), 2); /* parked, not freed */
        fc__buffer_recycle(b);
        assert_true(fc__buffer_is_unique(b));
        assert_int_equal(fc__buffer_generation(b), gen + 1); /* recycled: new contents */
    }
    fc__buffer_retain(b);
    fc__buffer_retain(b);
    fc__buffer_destroy(b); /* regardless of refs: data + header */
    assert_int_equal(pk.calls, 3);
    assert_true(fct_counting_clean(&g_alloc));
    fc__buffer_destroy(NULL); /* harmless */
}

/* ---- out of memory --------------------------------------------------------------- */

static void test_buffer_oom_no_leak(void **state) {
    (void)state;
    fc_buffer *b = (fc_buffer *)0x1;
    /* header fails, then data fails: each refusal frees what it took */
    for (long n = 0; n < 2; n++) {
        fct_counting_fail_after(&g_alloc, n);
        assert_int_equal(fc__buffer_create(ALLOC, 64, &b), FC_ERR_OOM);
        assert_ptr_equal(b, (fc_buffer *)0x1);
        assert_true(fct_counting_clean(&g_alloc));
    }
    fct_counting_fail_after(&g_alloc, 2);
    assert_int_equal(fc__buffer_create(ALLOC, 64, &b), FC_OK);
    fc__buffer_release(b);
    char mem[8];
    fct_counting_fail_after(&g_alloc, 0);
    b = (fc_buffer *)0x1;
    assert_int_equal(fc__buffer_borrow(ALLOC, mem, 8, false, NULL, NULL, &b), FC_ERR_OOM);
    assert_ptr_equal(b, (fc_buffer *)0x1);
    fct_counting_fail_after(&g_alloc, -1);
    assert_int_equal(atomic_load(&g_alloc.failed), 3);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_buffer_owned_aligned),
        T(test_buffer_alloc_helpers),
        T(test_buffer_retain_release_counts),
        T(test_buffer_threaded_release_once),
        T(test_buffer_generation),
        T(test_buffer_borrowed_read_only),
        T(test_buffer_borrowed_writable),
        T(test_buffer_release_hook_full_cleanup),
        T(test_buffer_pool_recycle_and_destroy),
        T(test_buffer_oom_no_leak),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
