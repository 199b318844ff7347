/* SPDX-License-Identifier: MIT */
/* oom_sweep.c - the sweep harness (see oom_sweep.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "counting_alloc.h"
#include "oom_sweep.h"

static _Thread_local const fc_allocator *current;

const fc_allocator *oom_sweep_allocator(void) { return current; }

oom_result oom_sweep(const oom_scenario *s) {
    oom_result r = {-1, 0};
    for (long n = 0; n < 100000; n++) {
        fct_counting c;
        fct_counting_init(&c);
        fct_counting_fail_after(&c, n);
        fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.allocator = &c.alloc, .threads = 1, .seed = 7});
        if (!ctx) {
            if (!fct_counting_clean(&c)) {
                fct_counting_report(&c, s->name);
                fail_msg("%s: fc_ctx_new leaked at N=%ld", s->name, n);
            }
            r.failures++;
            continue;
        }
        current = &c.alloc;
        fc_status st = s->fn(ctx);
        bool hit = c.failed > 0;
        fc_ctx_stats stats;
        fc_ctx_get_stats(ctx, &stats);
        if (stats.tensors_live != 0)
            fail_msg("%s: %lld tensor handles alive after the scenario at N=%ld (status %s)",
                     s->name, (long long)stats.tensors_live, n, fc_status_name(st));
        if (hit) {
            r.failures++;
            /* a refused allocation must surface: no silent fallback, no
             * other code standing in for it */
            fc_status seen = st != FC_OK ? st : fc_ctx_status(ctx);
            if (seen != FC_ERR_OOM)
                fail_msg("%s: at N=%ld the fault gave %s (%s), not FC_ERR_OOM", s->name, n,
                         fc_status_name(seen), fc_ctx_error(ctx));
            /* still usable once memory is back */
            fct_counting_fail_after(&c, -1);
            fc_ctx_clear_error(ctx);
            fc_status again = s->fn(ctx);
            if (again != FC_OK)
                fail_msg("%s: after the fault at N=%ld the scenario fails with %s: %s", s->name, n,
                         fc_status_name(again), fc_ctx_error(ctx));
        } else if (st != FC_OK) {
            fail_msg("%s: fails without any fault: %s: %s", s->name, fc_status_name(st),
                     fc_ctx_error(ctx));
        }
        fc_ctx_free(ctx);
        current = NULL;
        if (!fct_counting_clean(&c)) {
            fct_counting_report(&c, s->name);
            fail_msg("%s: allocator not clean after fc_ctx_free at N=%ld", s->name, n);
        }
        if (!hit) {
            r.largest_n = n;
            return r;
        }
    }
    fail_msg("%s: never completed", s->name);
    return r;
}
