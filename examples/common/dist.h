/* SPDX-License-Identifier: MIT */
/* dist.h - the trainers' data-parallel side, on fucina/dist.h: one place
 * for what train_mlp, train_gpt and train_cnn do the same way when started
 * by mpirun, so each trainer only asks "which rows are mine" and "what do
 * the ranks agree on".
 *
 * A trainer joins an MPI job only when a launcher started it (mpirun sets
 * OMPI_COMM_WORLD_SIZE, MPICH's hydra PMI_SIZE); started by hand it makes no
 * MPI call at all and runs exactly as without MPI. In a job:
 *   - every rank builds the same model from the same seed, and fc_ddp
 *     broadcasts rank 0's parameters anyway; gradients are averaged after
 *     each backward (--batch is per rank: the step sees size * batch);
 *   - each step draws the global batch from the shared data PRNG (so N
 *     ranks with --batch B read what one rank with --batch N*B reads) and a
 *     rank takes its slice;
 *   - evaluation is split into contiguous shares and the sums added;
 *   - only rank 0 prints (stdout of the others goes to /dev/null; stderr
 *     stays, for errors), writes metrics, pictures and checkpoints;
 *   - decisions that must match on every rank (stop on Ctrl-C, the time
 *     budget, the schedule a budget fits) are taken on values averaged
 *     across ranks, which the deterministic reduction makes bit-identical.
 * With size 1 every function here is a no-op that succeeds. */
#ifndef EX_DIST_H
#define EX_DIST_H

#include <stdbool.h>
#include <stdint.h>

#include <fucina.h>

typedef struct ex_dist {
    fc_ctx *ctx; /* borrowed: the trainer's */
    fc_dist *d;  /* NULL: one process */
    fc_ddp *ddp; /* NULL until ex_dist_wrap, or with one process */
    int rank, size;
} ex_dist;

/* Joins the job when started by a launcher. false after printing why (MPI
 * failed, or a launcher started several copies of a build without MPI,
 * which would each train alone). */
bool ex_dist_start(ex_dist *x, const char *prog, fc_ctx *ctx);
/* Wraps opt's parameters (collective). false after printing why. For
 * measurements, FUCINA_DDP_BUCKET_KB sets the bucket size (default 25 MiB)
 * and FUCINA_DDP_NO_OVERLAP=1 starts every bucket after backward. */
bool ex_dist_wrap(ex_dist *x, const char *prog, fc_optim *opt);
/* After each backward: the mean gradients (fc_ddp_sync). */
fc_status ex_dist_sync(ex_dist *x);
/* v[0, n) replaced, on every rank, by its mean (or sum) over the ranks. */
bool ex_dist_mean(ex_dist *x, double *v, int n);
bool ex_dist_sum(ex_dist *x, double *v, int n);
/* This rank's contiguous share [*lo, *hi) of n items. */
void ex_dist_share(const ex_dist *x, int64_t n, int64_t *lo, int64_t *hi);
static inline bool ex_dist_is_main(const ex_dist *x) { return x->rank == 0; }
/* Frees the wrapper and leaves the job (FUCINA_DDP_STATS=1 prints the
 * wrapper's counters first). After a failure (ok false) it takes
 * fucina/dist.h's error path (fc_dist_fail, with the context's error if
 * any, then fc_dist_free): in a job of several ranks that ends the whole
 * job (MPI_Abort) and does not return, since the others may be waiting
 * for this one in a collective. fc_dist_free takes that path by itself
 * when the context holds an error, even with ok true. */
void ex_dist_end(ex_dist *x, bool ok);

#endif /* EX_DIST_H */
