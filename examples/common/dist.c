/* SPDX-License-Identifier: MIT */
/* dist.c - see dist.h. */
#define _POSIX_C_SOURCE 200809L

#include "common/dist.h"

#include <stdio.h>
#include <stdlib.h>

static int launched_size(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (int i = 0; i < 3; i++) {
        const char *e = getenv(vars[i]);
        if (e && atoi(e) > 0) return atoi(e);
    }
    return 0;
}

bool ex_dist_start(ex_dist *x, const char *prog, fc_ctx *ctx) {
    *x = (ex_dist){.ctx = ctx, .rank = 0, .size = 1};
    int n = launched_size();
    if (n == 0) return true; /* started by hand: no MPI at all */
    if (!fc_dist_available()) {
        if (n == 1) return true;
        fprintf(stderr,
                "%s: started as %d processes, but fucina was built without MPI "
                "(FUCINA_WITH_MPI=OFF): each would train alone\n",
                prog, n);
        return false;
    }
    if (fc_dist_init(ctx, NULL, NULL, NULL, &x->d) != FC_OK) {
        fprintf(stderr, "%s: %s\n", prog, fc_ctx_error(ctx));
        return false;
    }
    x->rank = fc_dist_rank(x->d);
    x->size = fc_dist_size(x->d);
    /* one copy of the progress and the summaries */
    if (x->rank != 0 && !freopen("/dev/null", "w", stdout))
        fprintf(stderr, "%s: rank %d: cannot silence stdout\n", prog, x->rank);
    return true;
}

bool ex_dist_wrap(ex_dist *x, const char *prog, fc_optim *opt) {
    if (!x->d) return true;
    /* tuning knobs for measurements: bucket size, and the overlap off */
    const char *kb = getenv("FUCINA_DDP_BUCKET_KB"), *no = getenv("FUCINA_DDP_NO_OVERLAP");
    fc_ddp_opts o = {.bucket_bytes = kb ? 1024 * atoll(kb) : 0, .no_overlap = no && *no == '1'};
    x->ddp = fc_ddp_new(x->d, opt, &o);
    if (!x->ddp) {
        fprintf(stderr, "%s: rank %d: %s\n", prog, x->rank,
                fc_ctx_error(fc_tensor_ctx(fc_optim_param(opt, 0))));
        return false;
    }
    return true;
}

fc_status ex_dist_sync(ex_dist *x) { return x->ddp ? fc_ddp_sync(x->ddp) : FC_OK; }

bool ex_dist_mean(ex_dist *x, double *v, int n) {
    return !x->d || fc_dist_all_reduce_f64(x->d, v, n, FC_DIST_MEAN) == FC_OK;
}

bool ex_dist_sum(ex_dist *x, double *v, int n) {
    return !x->d || fc_dist_all_reduce_f64(x->d, v, n, FC_DIST_SUM) == FC_OK;
}

void ex_dist_share(const ex_dist *x, int64_t n, int64_t *lo, int64_t *hi) {
    *lo = n * x->rank / x->size;
    *hi = n * (x->rank + 1) / x->size;
}

void ex_dist_end(ex_dist *x, bool ok) {
    /* fucina/dist.h's error path: fc_dist_fail, then the same frees as on
     * success; fc_dist_free ends the job (MPI_Abort) instead of finalizing
     * when this rank failed. fc_dist_fail carries the context's error when
     * it has one (the exit code), and marks failures fucina did not record
     * (a file of the trainer's own it could not write) */
    if (!ok && x->d) {
        fc_status st = fc_ctx_status(x->ctx);
        fc_dist_fail(x->d, st != FC_OK ? st : FC_ERR_STATE);
        fflush(stdout);
        fprintf(stderr, "rank %d failed: ending the job\n", x->rank);
    }
    fc_ddp_free(x->ddp);
    fc_dist_free(x->d); /* does not return after a failure, with several ranks */
    *x = (ex_dist){.rank = 0, .size = 1};
}
