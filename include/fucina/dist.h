/* SPDX-License-Identifier: MIT */
/* fucina/dist.h - data-parallel training across processes on MPI.
 *
 * An optional part of the library (CMake option FUCINA_WITH_MPI, found with
 * FindMPI). These declarations are always present, so a program compiles
 * and links the same way with or without it: in a build without MPI,
 * fc_dist_available() is false and every function that would communicate
 * returns FC_ERR_BACKEND ("built without MPI"), recorded in the context;
 * fc_dist_rank is 0 and fc_dist_size 1 for a NULL handle, so single-process
 * code paths need no #ifdef. This header never includes <mpi.h>.
 *
 * A fc_dist is one communicator for one context: the library duplicates the
 * communicator it is given (so its messages never mix with the caller's)
 * and sets MPI_ERRORS_RETURN on the duplicate: an MPI error is returned as
 * FC_ERR_COMM with MPI's own message (MPI_Error_string) and the MPI call
 * that failed, never an abort from inside MPI. All calls are collective
 * unless said otherwise: every rank makes them in the same order with
 * matching arguments. MPI is used from the thread that calls fucina
 * (MPI_THREAD_FUNNELED); kernels' worker threads never call MPI.
 *
 * Determinism. Every reduction here (fc_dist_all_reduce and the gradient
 * buckets of fc_ddp) is computed by fucina, not by MPI_Allreduce: each
 * rank owns a slice of the data, receives every rank's copy of it
 * (MPI_Ialltoall), adds them in ascending rank order in double precision,
 * rounds once, and the slices are gathered back (MPI_Iallgather). The
 * result is a function of the inputs and the world size only: the same
 * bits on every rank, run after run, whatever the message timing, the MPI
 * library or its tuning. (MPI_Allreduce promises neither: the standard only
 * recommends it, and lets the implementation pick an association of the
 * sum per message size and algorithm.) The traffic is that of a ring or
 * reduce-scatter + all-gather all-reduce: 2 (N-1)/N of the data per rank.
 *
 * Faults. Rank failure: a rank that exits or is killed makes OpenMPI's
 * launcher (mpirun 4.x) terminate the whole job, so the survivors do not
 * return from MPI at all; they are killed, promptly on one machine (the
 * local daemon sees the child exit). A machine that disappears without
 * closing its connections (power loss, cable) is noticed by OpenMPI only
 * when TCP reports it, which is not bounded by OpenMPI. fucina bounds it
 * itself: every wait of this API polls with a deadline (fc_dist_opts
 * timeout_s, default 300 s, env FUCINA_DIST_TIMEOUT_S) and then fails with
 * FC_ERR_COMM naming what it waited for.
 *
 * Leaving on an error: the one error path. Whatever failed, on whichever
 * rank, the program frees what it made the way it does on success and
 * calls fc_dist_free, without calling any other collective first; for an
 * error of its own (one fucina did not record: a file of its own it cannot
 * write, a check of its own) it calls fc_dist_fail(d, status) before:
 *
 *   fail:  fc_dist_fail(d, st);   // may be left out when st came from fucina
 *          fc_ddp_free(w); fc_optim_free(opt); fc_dist_free(d);   // ends the job
 *
 * With more than one rank, fc_dist_free then does not finalize
 * (MPI_Finalize waits for every rank, and the others may be waiting for
 * this one in a collective) but prints why to stderr and ends the whole
 * job with MPI_Abort, exit code -status (mpirun passes it on). It takes
 * that way when this rank failed: d's context holds an error
 * (fc_ctx_status: the first one not cleared, e.g. of the backward or of a
 * checkpoint write; clear a handled one with fc_ctx_clear_error), or
 * fc_dist_status is not FC_OK (a call of this API failed with FC_ERR_COMM,
 * fc_ddp_free abandoned a step with its reductions in flight, or
 * fc_dist_fail was called). A rank that reaches fc_dist_free without a
 * failure waits there for the others at most the deadline, then ends the
 * job the same way (exit code 24, FC_ERR_COMM); a healthy rank blocked in
 * a collective because a peer left is released by the same deadline
 * (FC_ERR_COMM, then its own error path) unless the peer's MPI_Abort ended
 * it first. So a job with a failed rank ends at once, or one deadline
 * later, and never hangs. Checkpoints survive it: a process killed during
 * fc_checkpoint_save leaves the previous file whole (fucina/checkpoint.h).
 * fc_dist_abort is the same end without the cleanup.
 *
 * Usage (error checks left out):
 *
 *   fc_dist *d; fc_dist_init(ctx, &argc, &argv, NULL, &d);
 *   fc_optim *opt = fc_optim_new(ctx, &oo, params, n);
 *   fc_ddp *w = fc_ddp_new(d, opt, NULL);   // broadcasts rank 0's parameters
 *   for (each step) {
 *       loss = model(ctx, params, this rank's shard of the batch);
 *       fc_backward(ctx, loss);             // buckets all-reduce as they fill
 *       fc_ddp_sync(w);                     // waits; fc_grad = mean over ranks
 *       fc_ddp_step(w); fc_optim_zero_grad(opt);   // fc_optim_step, or ZeRO-1's
 *   }
 *   fc_ddp_free(w); fc_optim_free(opt); fc_dist_free(d);   // finalizes MPI
 */
#ifndef FUCINA_DIST_H
#define FUCINA_DIST_H

#include "fucina/optim.h"
#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A process group: this rank's handle on the job (fc_dist_init). */
typedef struct fc_dist fc_dist;

/* True when this build of fucina has MPI (FUCINA_WITH_MPI). */
FC_API bool fc_dist_available(void);

/* Zero-init options (or NULL) are the defaults. */
typedef struct fc_dist_opts {
    /* Longest wait for one collective, in seconds: 0 selects the default
     * (the environment variable FUCINA_DIST_TIMEOUT_S when set, else 300);
     * a negative value waits for ever. */
    double timeout_s;
} fc_dist_opts;

/* Initialises MPI when it is not yet (MPI_Init_thread with argc and argv,
 * both NULL allowed) and creates a fc_dist over a duplicate of
 * MPI_COMM_WORLD. *out gets the handle (NULL on error). MPI is finalized
 * when the last fc_dist made by fc_dist_init is freed, but only if this
 * call initialised it. Returns FC_OK; FC_ERR_NULL_ARG for a NULL ctx (not
 * recorded) or out; FC_ERR_BACKEND in a build without MPI; FC_ERR_COMM when
 * MPI fails (or gives less than MPI_THREAD_FUNNELED); FC_ERR_OOM. Errors
 * are recorded in ctx. Collective over MPI_COMM_WORLD. */
FC_API fc_status fc_dist_init(fc_ctx *ctx, int *argc, char ***argv, const fc_dist_opts *opts,
                              fc_dist **out);
/* The same over the caller's communicator: mpi_comm points to an MPI_Comm
 * (borrowed; the library keeps a duplicate). MPI must already be
 * initialised (FC_ERR_STATE otherwise) and is never finalized by fucina.
 * Collective over that communicator. Errors as fc_dist_init, with
 * FC_ERR_NULL_ARG for a NULL mpi_comm. */
FC_API fc_status fc_dist_init_comm(fc_ctx *ctx, const void *mpi_comm, const fc_dist_opts *opts,
                                   fc_dist **out);
/* Frees the duplicate communicators (and finalizes MPI, see fc_dist_init).
 * Collective: it first waits, at most the deadline, until every rank has
 * called it. With more than one rank it does not return, but ends the job
 * (MPI_Abort, exit code -status, the reason on stderr), when this rank
 * failed (see "Leaving on an error" above: an error in d's context,
 * fc_dist_status not FC_OK) or when the wait passes the deadline. NULL is a
 * no-op. */
FC_API void fc_dist_free(fc_dist *d);
/* Marks this rank failed with st (FC_OK counts as FC_ERR_STATE), for an
 * error fucina did not record: the next fc_dist_free ends the job, and d's
 * collectives refuse to start (FC_ERR_STATE). The first failure stays. Not
 * collective; NULL is a no-op. */
FC_API void fc_dist_fail(fc_dist *d, fc_status st);
/* FC_OK while this rank's calls have kept the ranks matched; else its
 * first failure: FC_ERR_COMM (an MPI error, or a wait past the deadline,
 * which may leave requests in flight), FC_ERR_STATE (fc_ddp_free in the
 * middle of a step), FC_ERR_OOM (fc_ddp_step could not start its
 * broadcasts), or fc_dist_fail's status. Once it is not FC_OK, d's
 * collectives and fc_ddp's return FC_ERR_STATE without communicating.
 * FC_ERR_NULL_ARG for a NULL d. Not collective. */
FC_API fc_status fc_dist_status(const fc_dist *d);
/* This process's rank in [0, size), and the number of ranks. A NULL d is
 * rank 0 of 1. Not collective. */
FC_API int fc_dist_rank(const fc_dist *d);
FC_API int fc_dist_size(const fc_dist *d);
/* Ends every process of the communicator now (MPI_Abort with code), as
 * fc_dist_free does after a failure but without the cleanup before it.
 * Does nothing for a NULL d (not collective; does not return otherwise). */
FC_API void fc_dist_abort(fc_dist *d, int code);

/* Waits until every rank has called it. FC_ERR_NULL_ARG, FC_ERR_COMM,
 * FC_ERR_STATE when d failed earlier (fc_dist_status). */
FC_API fc_status fc_dist_barrier(fc_dist *d);

/* Copies root's data of each of the n tensors into the same tensor of the
 * other ranks (raw bytes: any dtype). Each tensor must be contiguous and
 * writable, of d's context, and have the same dtype and shape on every
 * rank (the caller's promise: MPI sees only byte counts). Borrows them.
 * Returns FC_OK; FC_ERR_NULL_ARG for a NULL d (not recorded), ts or entry;
 * FC_ERR_INVALID_ARG for n < 0 or a root outside [0, size);
 * FC_ERR_CONTEXT; FC_ERR_UNSUPPORTED_VIEW for a non-contiguous tensor;
 * FC_ERR_READ_ONLY; FC_ERR_COMM; FC_ERR_STATE when d failed earlier
 * (fc_dist_status). Errors are recorded in d's context. */
FC_API fc_status fc_dist_broadcast(fc_dist *d, fc_tensor *const *ts, int n, int root);

/* The reduction of fc_dist_all_reduce: the sum, or the sum divided by the rank count. */
typedef enum fc_dist_op { FC_DIST_SUM, FC_DIST_MEAN, FC_DIST_OP_COUNT } fc_dist_op;

/* Replaces each of the n tensors, on every rank, by the sum (or the mean:
 * the sum divided by the world size) of that tensor over the ranks, computed
 * deterministically (see the top of this file): f32 and f64 tensors, summed
 * in f64 and rounded once. Same shape and dtype on every rank (the
 * caller's promise). Errors as fc_dist_broadcast, with FC_ERR_DTYPE for a
 * tensor that is not f32 or f64 and FC_ERR_INVALID_ARG for a bad op. On
 * error the tensors may hold partial results. */
FC_API fc_status fc_dist_all_reduce(fc_dist *d, fc_tensor *const *ts, int n, fc_dist_op op);
/* The same on a plain array of n doubles (losses, counts). FC_ERR_NULL_ARG
 * for a NULL v with n > 0. */
FC_API fc_status fc_dist_all_reduce_f64(fc_dist *d, double *v, int n, fc_dist_op op);

/* ---- data-parallel wrapper ------------------------------------------------------------
 * fc_ddp keeps the gradients of an optimizer's parameters equal across ranks:
 * after each backward, fc_ddp_sync leaves in fc_grad of every parameter
 * the mean over the ranks of the ranks' gradients (so N ranks with a batch
 * of B each, every loss a mean over its batch, take the step one rank takes
 * with the batch of N*B, up to rounding).
 *
 * Buckets. The parameters are grouped, in reverse registration order (the
 * order in which backward usually completes them: last layers first), into
 * buckets of at most bucket_bytes of gradient (25 MiB by default; a
 * parameter larger than that has a bucket of its own; f32 and f64
 * gradients never share one). A gradient hook on each parameter
 * (fucina/autograd.h) copies its gradient into its bucket the moment
 * backward has completed it; once every gradient of a bucket, and of every
 * bucket before it, is in, the bucket's reduction starts (non-blocking)
 * while backward goes on, and each later hook lets MPI progress. Buckets
 * start in the same order on every rank whatever order the hooks come in.
 * fc_ddp_sync starts what is left (parameters this backward did not reach
 * contribute their fc_grad, or zeros), waits for all, and writes the means.
 *
 * Gradient accumulation: fc_ddp_set_sync(w, false) turns communication off;
 * backward then only accumulates into fc_grad as without the wrapper. Turn
 * it back on before the last micro-step's backward: its hooks send the
 * whole accumulated gradient (fc_grad so far plus this backward's part).
 *
 * Contract: while sync is on, every backward walk that reaches a parameter
 * (fc_backward, fc_backward_with, fc_autograd_grad) counts as the step's
 * backward; one walk per fc_ddp_sync (a second is FC_ERR_STATE from the
 * hook, failing that backward). Call fc_ddp_sync on every rank after every
 * such backward, also after one that failed: the ranks then agree that a
 * rank failed, every rank returns FC_ERR_STATE, and no fc_grad is changed
 * by the sync (each rank keeps its local gradient; skip the step).
 *
 * Memory: two copies of the gradients (bucket send and receive buffers),
 * allocated once at creation. With one rank the wrapper does nothing. */
typedef struct fc_ddp fc_ddp;

/* Options of fc_ddp_new; zero-initialised is the defaults. */
typedef struct fc_ddp_opts {
    int64_t bucket_bytes; /* 0: 25 MiB (PyTorch DDP's default) */
    /* Start every bucket in fc_ddp_sync instead of during backward (to
     * measure what the overlap buys). */
    bool no_overlap;
    /* ZeRO stage 1: the optimizer state is sharded across the ranks. Each
     * parameter gets an owner (whole parameters, balanced by size, the same
     * assignment on every rank: fc_ddp_owner); fc_ddp_step updates only the
     * parameters this rank owns (so the optimizer creates state for those
     * only: about 1/N of it per rank) and then sends each parameter from its
     * owner to the others. The parameters end bit-identical to a run
     * without it. A checkpoint of the optimizer then holds only this
     * rank's share of the state. */
    bool zero1;
} fc_ddp_opts;

/* Creates the wrapper over opt's parameters (every group; opt borrowed, it
 * must outlive w; the parameters are retained). Checks, with one small
 * all-gather, that every rank has the same number of parameters with the
 * same dtypes and shapes; then broadcasts rank 0's parameter values to the
 * others and registers a gradient hook on each parameter. Collective.
 * Returns a new wrapper, or NULL with the error recorded in opt's context:
 * FC_ERR_NULL_ARG for a NULL d or opt (not recorded when there is no
 * context to record in); FC_ERR_CONTEXT when opt's context is not d's;
 * FC_ERR_INVALID_ARG for a negative bucket_bytes; FC_ERR_SHAPE_MISMATCH on
 * every rank when the parameter lists differ (the message gives this rank's
 * and rank 0's counts, and the first parameter that differs with both
 * descriptions); FC_ERR_UNSUPPORTED_VIEW for a non-contiguous parameter;
 * FC_ERR_COMM; FC_ERR_STATE when d failed earlier (fc_dist_status);
 * FC_ERR_OOM. */
FC_API fc_ddp *fc_ddp_new(fc_dist *d, fc_optim *opt, const fc_ddp_opts *opts);
/* Removes the hooks and releases the parameters and buffers. Not
 * collective. Freed in the middle of a step (a backward ran with sync on
 * and fc_ddp_sync did not: an error path), it leaves the buffers of the
 * reductions in flight to MPI and marks the fc_dist failed (FC_ERR_STATE),
 * so that fc_dist_free ends the job. NULL is a no-op. */
FC_API void fc_ddp_free(fc_ddp *w);
/* Communication on (true, the default) or off for the next backwards.
 * FC_ERR_NULL_ARG; FC_ERR_STATE while a step's buckets are in flight (a
 * backward ran with sync on and fc_ddp_sync has not run). */
FC_API fc_status fc_ddp_set_sync(fc_ddp *w, bool on);
/* Finishes the step's reductions and writes the mean gradients into
 * fc_grad (a parameter no rank has a gradient for keeps none). With sync
 * off it returns FC_OK and changes nothing. Collective. Returns FC_OK;
 * FC_ERR_NULL_ARG; FC_ERR_STATE when a rank's backward failed (its context
 * had an error when it called fc_ddp_sync) - on every rank - or, on this
 * rank only and without communicating, when the fc_dist failed earlier
 * (fc_dist_status); FC_ERR_COMM (MPI's error, or the deadline);
 * FC_ERR_OOM creating a gradient. Errors are recorded in the context;
 * after the first FC_ERR_STATE the wrapper is ready for the next step,
 * after FC_ERR_COMM it is not: take the error path (fc_dist_free). */
FC_API fc_status fc_ddp_sync(fc_ddp *w);
/* The optimizer step of a data-parallel step: call it after fc_ddp_sync
 * (and any clipping) on every rank, in place of fc_optim_step. Without
 * zero1 it is fc_optim_step. With zero1 it drops the gradients of the
 * parameters this rank does not own, steps the optimizer, and broadcasts
 * every parameter from its owner (collective). Returns FC_OK,
 * FC_ERR_NULL_ARG, fc_optim_step's error (the broadcasts still run, so the
 * ranks stay matched), FC_ERR_COMM, or (zero1) FC_ERR_STATE when the
 * fc_dist failed earlier. */
FC_API fc_status fc_ddp_step(fc_ddp *w);
/* The rank that owns parameter i (opt's order) under zero1; 0 without it
 * or with one rank; -1 for a NULL w or i out of range. */
FC_API int fc_ddp_owner(const fc_ddp *w, int i);

/* Number of buckets, and the parameter indices (in opt's order) of bucket
 * b: *first gets a borrowed array of *count indices. FC_ERR_NULL_ARG,
 * FC_ERR_INDEX for b out of range. */
FC_API int fc_ddp_bucket_count(const fc_ddp *w);
FC_API fc_status fc_ddp_bucket(const fc_ddp *w, int b, const int **first, int *count,
                               int64_t *bytes);

/* Counters and timers since creation (for tuning; the environment variable
 * FUCINA_DDP_STATS=1 also prints them to stderr from fc_ddp_free). */
typedef struct fc_ddp_stats {
    int64_t syncs;         /* fc_ddp_sync calls that communicated */
    int64_t buckets;       /* bucket reductions started */
    int64_t started_early; /* ...of them from a hook, during backward */
    int64_t done_early;    /* ...of them already complete when fc_ddp_sync began */
    int64_t bytes;         /* gradient bytes reduced (per rank, payload) */
    double hook_s;         /* in hooks: copying into buckets, starting, progressing */
    double backward_s;     /* from each step's first hook to its fc_ddp_sync */
    double wait_s;         /* in fc_ddp_sync waiting for communication */
    double sync_s;         /* in fc_ddp_sync in all (waiting, summing, writing) */
    int64_t elems;         /* parameter elements in all */
    int64_t owned_elems;   /* ...of the parameters whose optimizer state this rank keeps
                            * (all of them without zero1) */
} fc_ddp_stats;
/* Fills *out. FC_ERR_NULL_ARG for a NULL w or out. Not collective. */
FC_API fc_status fc_ddp_get_stats(const fc_ddp *w, fc_ddp_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_DIST_H */
