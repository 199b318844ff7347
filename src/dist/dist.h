/* SPDX-License-Identifier: MIT */
/* dist/dist.h - what the MPI half of src/dist shares: the communicator
 * object, MPI errors as fc_status, waits with a deadline, and the
 * deterministic reduction every all-reduce here is made of.
 *
 * The reduction (fc__dist_red) runs in two non-blocking phases over two
 * communicators. Phase 1 (MPI_Ialltoall on comm): the data, padded to N
 * slices of S elements, goes out so that rank r receives every rank's
 * slice r. In between, rank r adds its N received copies in rank order, in
 * double, and rounds once into slice r of the send buffer. Phase 2
 * (MPI_Iallgather in place on comm2): every rank gets every slice. Each
 * phase has its own communicator because the two are started at times
 * that depend on when earlier operations completed, and MPI matches
 * collectives on one communicator by the order they were started in: each
 * phase on its own communicator is started in bucket order on every rank,
 * so the two orders never have to agree with each other. */
#ifndef FUCINA_DIST_INTERNAL_H
#define FUCINA_DIST_INTERNAL_H

#include <mpi.h>

#include "exec/tensor.h"
#include "fucina/autograd.h"
#include "fucina/dist.h"

/* Records FC_ERR_COMM naming what (the MPI call and its purpose) and MPI's
 * message for rc; returns FC_ERR_COMM (FC_OK for rc == MPI_SUCCESS). A
 * failure also breaks d (fc__dist_broken). */
fc_status fc__dist_check(fc_dist *d, int rc, const char *what);
/* Marks d failed (the first failure stays): st, and why (printf format:
 * what happened, for fc_dist_free's last words). From then on d's
 * collectives refuse to start and fc_dist_free ends the job instead of
 * finalizing. Returns st. */
fc_status fc__dist_broken(fc_dist *d, fc_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* FC_OK, or FC_ERR_STATE (recorded, naming fn and d's failure) when d is
 * broken: what a collective checks before it starts anything. */
fc_status fc__dist_usable(fc_dist *d, const char *fn);
/* Waits for n requests, polling until d's deadline. FC_OK, or FC_ERR_COMM
 * (an MPI error, or the deadline passed; the requests are then left). */
fc_status fc__dist_wait(fc_dist *d, MPI_Request *reqs, int n, const char *what);
/* Between two polls of a wait: nothing for the first spins, then a short
 * sleep (comm.c says why). */
void fc__dist_pause(unsigned spin);
/* Seconds on a monotonic clock. */
double fc__dist_now(void);

/* IDLE -> EXCHANGE (phase 1 in flight) -> SUMMED (summed, its phase 2 waits
 * its turn) -> GATHER (phase 2 in flight) -> DONE */
typedef enum {
    FC__RED_IDLE,
    FC__RED_EXCHANGE,
    FC__RED_SUMMED,
    FC__RED_GATHER,
    FC__RED_DONE
} fc__red_phase;

typedef struct fc__dist_red {
    bool f64;      /* elements are double, else float */
    int64_t count; /* elements the caller fills */
    int64_t shard; /* S: elements per rank's slice (count rounded up to N slices) */
    void *send;    /* N*S elements: the data, then the result */
    void *recv;    /* N*S elements: every rank's copy of this rank's slice */
    MPI_Request req;
    fc__red_phase phase;
    double scale; /* 1 for a sum, 1/N for a mean */
    size_t cap;   /* bytes of each buffer */
} fc__dist_red;

struct fc_dist {
    fc_ctx *ctx;
    MPI_Comm comm;  /* broadcasts, small collectives, reductions' phase 1 */
    MPI_Comm comm2; /* reductions' phase 2 */
    /* fc_dist_free's meeting only: a rank may reach it while a peer still
     * has collectives of comm or comm2 in flight, which it must not match */
    MPI_Comm comm_exit;
    int rank, size;
    double timeout_s;     /* < 0: none */
    bool owns_mpi;        /* made by fc_dist_init: counts towards finalizing */
    fc__dist_red scratch; /* fc_dist_all_reduce's buffers, kept between calls */
    /* FC_OK, or this rank's first failure that may leave the ranks
     * unmatched (fc__dist_broken, fc_dist_fail); why says which */
    fc_status failed;
    char why[192];
};

/* Buffers for count elements (count >= 1). FC_OK, FC_ERR_OOM,
 * FC_ERR_OVERFLOW (the slices must fit an int count for MPI). */
fc_status fc__dist_red_init(fc_dist *d, fc__dist_red *r, bool f64, int64_t count);
/* The same over r's buffers when they are large enough (else new ones). */
fc_status fc__dist_red_reuse(fc_dist *d, fc__dist_red *r, bool f64, int64_t count);
void fc__dist_red_free(fc_dist *d, fc__dist_red *r);
/* Starts phase 1 over send[0, count) (the padding is zeroed here). */
fc_status fc__dist_red_start(fc_dist *d, fc__dist_red *r, double scale);
/* One poll (MPI_Test): a completed phase 1 is summed (SUMMED); a SUMMED
 * reduction starts phase 2 only when gather_ok (the caller's turn order); a
 * completed phase 2 is DONE, the result in send[0, count). */
fc_status fc__dist_red_poll(fc_dist *d, fc__dist_red *r, bool gather_ok);

#endif /* FUCINA_DIST_INTERNAL_H */
