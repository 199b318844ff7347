/* SPDX-License-Identifier: MIT */
/* counting_alloc.c - see counting_alloc.h.
 *
 * Layout of one block: [padding][hdr][user bytes], where the user pointer is
 * aligned to max(align, 32) and hdr sits immediately below it. The header is
 * 32 bytes, so a prefix of one alignment unit always holds it. */
#define _POSIX_C_SOURCE 200809L
#include "counting_alloc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FCT_MAGIC_LIVE ((uint64_t)0xFC0CA11C0FFEE001ull)
#define FCT_MAGIC_DEAD ((uint64_t)0xFC0CA11CDEADBEEFull)

typedef struct hdr {
    void *base;
    uint64_t size;
    uint64_t align;
    uint64_t magic;
} hdr;

static void *counting_alloc_fn(void *user, size_t size, size_t align) {
    fct_counting *c = user;
    long budget = atomic_load(&c->fail_after);
    if (budget >= 0) {
        /* claim one unit of budget; when none is left, refuse */
        while (budget > 0 && !atomic_compare_exchange_weak(&c->fail_after, &budget, budget - 1)) {
        }
        if (budget == 0) {
            atomic_fetch_add(&c->failed, 1);
            return NULL;
        }
    }
    if (align < sizeof(hdr)) align = sizeof(hdr);
    if ((align & (align - 1)) != 0) return NULL; /* contract: a power of two */
    if (size > SIZE_MAX - align) return NULL;
    void *base = NULL;
    if (posix_memalign(&base, align, align + size) != 0) return NULL;
    char *user_ptr = (char *)base + align;
    hdr *h = (hdr *)(void *)(user_ptr - sizeof(hdr));
    h->base = base;
    h->size = size;
    h->align = align;
    h->magic = FCT_MAGIC_LIVE;
    if ((uintptr_t)user_ptr % align != 0) atomic_fetch_add(&c->misaligned, 1);
    atomic_fetch_add(&c->live_blocks, 1);
    atomic_fetch_add(&c->live_bytes, (long)size);
    atomic_fetch_add(&c->total_allocs, 1);
    return user_ptr;
}

static void counting_free_fn(void *user, void *ptr, size_t size) {
    fct_counting *c = user;
    if (!ptr) return;
    hdr *h = (hdr *)(void *)((char *)ptr - sizeof(hdr));
    if (h->magic != FCT_MAGIC_LIVE) {
        /* foreign pointer or double free: do not touch it further */
        atomic_fetch_add(&c->bad_frees, 1);
        return;
    }
    if (h->size != size) atomic_fetch_add(&c->bad_frees, 1);
    atomic_fetch_sub(&c->live_blocks, 1);
    atomic_fetch_sub(&c->live_bytes, (long)h->size);
    atomic_fetch_add(&c->total_frees, 1);
    h->magic = FCT_MAGIC_DEAD;
    free(h->base);
}

void fct_counting_init(fct_counting *c) {
    c->alloc.alloc = counting_alloc_fn;
    c->alloc.free = counting_free_fn;
    c->alloc.user = c;
    atomic_init(&c->live_blocks, 0);
    atomic_init(&c->live_bytes, 0);
    atomic_init(&c->total_allocs, 0);
    atomic_init(&c->total_frees, 0);
    atomic_init(&c->failed, 0);
    atomic_init(&c->bad_frees, 0);
    atomic_init(&c->misaligned, 0);
    atomic_init(&c->fail_after, -1);
}

void fct_counting_fail_after(fct_counting *c, long n) {
    atomic_store(&c->fail_after, n < 0 ? -1 : n);
}

bool fct_counting_clean(fct_counting *c) {
    return atomic_load(&c->live_blocks) == 0 && atomic_load(&c->live_bytes) == 0 &&
           atomic_load(&c->bad_frees) == 0 && atomic_load(&c->misaligned) == 0;
}

void fct_counting_report(fct_counting *c, const char *label) {
    fprintf(stderr,
            "%s: live_blocks=%ld live_bytes=%ld allocs=%ld frees=%ld failed=%ld bad_frees=%ld "
            "misaligned=%ld\n",
            label ? label : "allocator", atomic_load(&c->live_blocks), atomic_load(&c->live_bytes),
            atomic_load(&c->total_allocs), atomic_load(&c->total_frees), atomic_load(&c->failed),
            atomic_load(&c->bad_frees), atomic_load(&c->misaligned));
}
