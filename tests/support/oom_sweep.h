/* SPDX-License-Identifier: MIT */
/* oom_sweep.h - SQLite-style out-of-memory sweep over the public API.
 *
 * A scenario is a function that uses a fresh context (built on a counting
 * allocator that fails every allocation after the first N) and returns an
 * fc_status. The harness runs it with N = 0, 1, 2, ... until it completes
 * without the allocator ever refusing, and at every N checks that
 *   - the call reports FC_ERR_OOM (a status or the context's error),
 *   - no tensor handle is left alive,
 *   - the context is still usable: the same scenario succeeds once the
 *     fault is removed,
 *   - after fc_ctx_free every byte went back to the allocator. */
#ifndef FUCINA_TEST_OOM_SWEEP_H
#define FUCINA_TEST_OOM_SWEEP_H

#include "fucina.h"

typedef fc_status (*oom_scenario_fn)(fc_ctx *ctx);

typedef struct oom_scenario {
    const char *name;
    oom_scenario_fn fn;
} oom_scenario;

typedef struct oom_result {
    long largest_n; /* N at which the scenario first completed */
    long failures;  /* runs that hit the fault */
} oom_result;

/* Runs the sweep; fails the current cmocka test on any violation. */
oom_result oom_sweep(const oom_scenario *s);

/* The failing allocator of the sweep now running on this thread (NULL
 * outside a sweep). Scenarios that call functions taking an allocator
 * directly (fc_io_opts.allocator) pass it, so those allocations are
 * counted and failed like the context's. */
const fc_allocator *oom_sweep_allocator(void);

#endif
