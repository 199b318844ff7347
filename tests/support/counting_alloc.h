/* SPDX-License-Identifier: MIT */
/* counting_alloc.h - an fc_allocator for tests that counts, checks and can fail.
 *
 * Every block carries a hidden header (base pointer, size, alignment, magic)
 * in front of the pointer handed out, so a free can be checked: it must name
 * a pointer this allocator returned, with the size that was asked for. Wrong
 * frees are counted (bad_frees) rather than crashing, so a test can assert on
 * them. Counters are atomic: the allocator may serve several threads.
 *
 * Failure injection follows SQLite's out-of-memory tests: with fail_after = N
 * the first N allocations succeed and every later one returns NULL, so a test
 * can sweep N = 0, 1, 2, ... until a call succeeds and check for leaks after
 * each failure. */
#ifndef FUCINA_TEST_COUNTING_ALLOC_H
#define FUCINA_TEST_COUNTING_ALLOC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "fucina/alloc.h"

typedef struct fct_counting {
    fc_allocator alloc;       /* pass &c->alloc (or fct_counting_allocator(c)) */
    atomic_long live_blocks;  /* allocations not yet freed */
    atomic_long live_bytes;   /* bytes asked for and not yet freed */
    atomic_long total_allocs; /* successful allocations */
    atomic_long total_frees;  /* well-formed frees */
    atomic_long failed;       /* allocations refused by fail_after */
    atomic_long bad_frees;    /* foreign pointer, double free or wrong size */
    atomic_long misaligned;   /* never expected: alignment contract self-check */
    atomic_long fail_after;   /* -1: never fail; N: allocations after the Nth fail */
} fct_counting;

/* Zeroes the counters and disables failure injection. */
void fct_counting_init(fct_counting *c);
static inline const fc_allocator *fct_counting_allocator(fct_counting *c) { return &c->alloc; }
/* -1 turns failure injection off; N >= 0 lets N more allocations succeed
 * (counted from now) before every further one fails. */
void fct_counting_fail_after(fct_counting *c, long n);
/* True when nothing is live and no free was malformed. */
bool fct_counting_clean(fct_counting *c);
/* Prints the counters to stderr with a label (for failure messages). */
void fct_counting_report(fct_counting *c, const char *label);

#endif /* FUCINA_TEST_COUNTING_ALLOC_H */
