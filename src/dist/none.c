/* SPDX-License-Identifier: MIT */
/* none.c - fucina/dist.h in a build without MPI (FUCINA_WITH_MPI off):
 * every call that would communicate records and returns FC_ERR_BACKEND,
 * so programs link and run the same way and take their single-process
 * path (fc_dist_rank 0, fc_dist_size 1). Compiled instead of comm.c and
 * ddp.c; no fc_dist or fc_ddp can exist here. */
#include "exec/ctx.h"
#include "fucina/dist.h"

static fc_status none(fc_ctx *ctx, const char *fn) {
    if (!ctx) return FC_ERR_NULL_ARG;
    return fc__fail(ctx, FC_ERR_BACKEND,
                    "%s: fucina was built without MPI (configure with -DFUCINA_WITH_MPI=ON "
                    "and an MPI such as Debian's libopenmpi-dev)",
                    fn);
}

bool fc_dist_available(void) { return false; }

fc_status fc_dist_init(fc_ctx *ctx, int *argc, char ***argv, const fc_dist_opts *opts,
                       fc_dist **out) {
    (void)argc, (void)argv, (void)opts;
    if (out) *out = NULL;
    return none(ctx, "fc_dist_init");
}

fc_status fc_dist_init_comm(fc_ctx *ctx, const void *mpi_comm, const fc_dist_opts *opts,
                            fc_dist **out) {
    (void)mpi_comm, (void)opts;
    if (out) *out = NULL;
    return none(ctx, "fc_dist_init_comm");
}

/* No fc_dist exists in this build, so every handle is NULL. */
void fc_dist_free(fc_dist *d) { (void)d; }
int fc_dist_rank(const fc_dist *d) { return (void)d, 0; }
int fc_dist_size(const fc_dist *d) { return (void)d, 1; }
void fc_dist_abort(fc_dist *d, int code) { (void)d, (void)code; }
void fc_dist_fail(fc_dist *d, fc_status st) { (void)d, (void)st; }
fc_status fc_dist_status(const fc_dist *d) { return (void)d, FC_ERR_NULL_ARG; }
fc_status fc_dist_barrier(fc_dist *d) { return (void)d, FC_ERR_NULL_ARG; }
fc_status fc_dist_broadcast(fc_dist *d, fc_tensor *const *ts, int n, int root) {
    (void)d, (void)ts, (void)n, (void)root;
    return FC_ERR_NULL_ARG;
}
fc_status fc_dist_all_reduce(fc_dist *d, fc_tensor *const *ts, int n, fc_dist_op op) {
    (void)d, (void)ts, (void)n, (void)op;
    return FC_ERR_NULL_ARG;
}
fc_status fc_dist_all_reduce_f64(fc_dist *d, double *v, int n, fc_dist_op op) {
    (void)d, (void)v, (void)n, (void)op;
    return FC_ERR_NULL_ARG;
}
fc_ddp *fc_ddp_new(fc_dist *d, fc_optim *opt, const fc_ddp_opts *opts) {
    (void)d, (void)opt, (void)opts;
    return NULL;
}
void fc_ddp_free(fc_ddp *w) { (void)w; }
fc_status fc_ddp_set_sync(fc_ddp *w, bool on) { return (void)w, (void)on, FC_ERR_NULL_ARG; }
fc_status fc_ddp_sync(fc_ddp *w) { return (void)w, FC_ERR_NULL_ARG; }
fc_status fc_ddp_step(fc_ddp *w) { return (void)w, FC_ERR_NULL_ARG; }
int fc_ddp_owner(const fc_ddp *w, int i) { return (void)w, (void)i, -1; }
int fc_ddp_bucket_count(const fc_ddp *w) { return (void)w, 0; }
fc_status fc_ddp_bucket(const fc_ddp *w, int b, const int **first, int *count, int64_t *bytes) {
    (void)w, (void)b, (void)first, (void)count, (void)bytes;
    return FC_ERR_NULL_ARG;
}
fc_status fc_ddp_get_stats(const fc_ddp *w, fc_ddp_stats *out) {
    (void)w, (void)out;
    return FC_ERR_NULL_ARG;
}
