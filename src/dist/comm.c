/* SPDX-License-Identifier: MIT */
/* comm.c - the communicator object, MPI errors as fc_status, waits with a
 * deadline, the deterministic two-phase reduction (dist/dist.h), and the
 * list collectives of fucina/dist.h built on them.
 *
 * Why every wait polls: MPI_Wait on a peer that vanished without closing
 * its sockets blocks until TCP notices, which OpenMPI does not bound; a
 * loop of MPI_Testall with a deadline bounds it here. The loop also drives
 * MPI's progress (OpenMPI moves non-blocking collectives only inside MPI
 * calls). It spins for about a millisecond, where a finished transfer is
 * seen at once, then sleeps 20 us between polls: a long wait means a peer
 * far behind, and a rank that busy-waits then takes a core from it
 * whenever there are fewer cores than ranks. (On this project's loaded
 * 2-core machine neither choice measured better beyond the noise; the
 * sleep only bounds the waste.)
 *
 * Why fc_dist_free may abort: MPI_Finalize waits for every rank, so a rank
 * that failed and finalizes hangs itself and the ranks waiting for it in
 * a collective until their deadline. A handle remembers this rank's first
 * failure that may leave the ranks unmatched (fc__dist_broken); with one,
 * or an error in the context, fc_dist_free ends the job (MPI_Abort). */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist.h"

/* fc_dist objects made by fc_dist_init alive, and whether fucina called
 * MPI_Init (then the last one's free finalizes). MPI is one per process,
 * so this is per process too; only the calling thread touches it (MPI is
 * FUNNELED). */
static int g_owned;
static bool g_initialised_mpi;

bool fc_dist_available(void) { return true; }

void fc__dist_pause(unsigned spin) {
    if (spin < 5000) return;         /* about a millisecond of polls */
    struct timespec ts = {0, 20000}; /* 20 us: small against a step, big for a CPU */
    nanosleep(&ts, NULL);
}

double fc__dist_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

fc_status fc__dist_check(fc_dist *d, int rc, const char *what) {
    if (rc == MPI_SUCCESS) return FC_OK;
    char msg[MPI_MAX_ERROR_STRING + 1] = "";
    int len = 0, cls = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", rc);
    MPI_Error_class(rc, &cls);
    fc__fail(d->ctx, FC_ERR_COMM, "%s failed on rank %d of %d: %s (MPI error class %d)", what,
             d->rank, d->size, msg, cls);
    return fc__dist_broken(d, FC_ERR_COMM, "%s failed (MPI error class %d)", what, cls);
}

fc_status fc__dist_broken(fc_dist *d, fc_status st, const char *fmt, ...) {
    if (d->failed != FC_OK) return st;
    d->failed = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->why, sizeof d->why, fmt, ap);
    va_end(ap);
    return st;
}

fc_status fc__dist_usable(fc_dist *d, const char *fn) {
    if (d->failed == FC_OK) return FC_OK;
    return fc__fail(d->ctx, FC_ERR_STATE,
                    "%s: rank %d of %d cannot communicate any more: earlier, %s (%s), so "
                    "the ranks' collectives may no longer match; end the job with "
                    "fc_dist_free",
                    fn, d->rank, d->size, d->why, fc_status_name(d->failed));
}

fc_status fc__dist_wait(fc_dist *d, MPI_Request *reqs, int n, const char *what) {
    double deadline = d->timeout_s < 0 ? -1 : fc__dist_now() + d->timeout_s;
    for (unsigned spin = 0;; spin++) {
        int done = 0;
        fc_status st = fc__dist_check(d, MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE), what);
        if (st != FC_OK || done) return st;
        if (deadline >= 0 && (spin & 63) == 0 && fc__dist_now() > deadline) {
            fc__fail(d->ctx, FC_ERR_COMM,
                     "%s: rank %d of %d waited %g s without the other ranks (one may have "
                     "died or stopped calling the same collectives); fc_dist_free now ends "
                     "the job",
                     what, d->rank, d->size, d->timeout_s);
            return fc__dist_broken(d, FC_ERR_COMM, "%s waited %g s in vain", what, d->timeout_s);
        }
        fc__dist_pause(spin);
    }
}

// ----------------------------------------------------------------------------
// creation

static double default_timeout(const fc_dist_opts *opts) {
    if (opts && opts->timeout_s != 0) return opts->timeout_s;
    const char *e = getenv("FUCINA_DIST_TIMEOUT_S");
    char *end = NULL;
    double v = e ? strtod(e, &end) : 0;
    return e && end != e && v != 0 ? v : 300;
}

static fc_status make(fc_ctx *ctx, MPI_Comm base, const fc_dist_opts *opts, bool owns,
                      fc_dist **out) {
    fc_dist *d = fc__ctx_alloc(ctx, sizeof *d);
    if (!d) return fc__fail(ctx, FC_ERR_OOM, "fc_dist_init: out of memory");
    *d = (fc_dist){.ctx = ctx,
                   .comm = MPI_COMM_NULL,
                   .comm2 = MPI_COMM_NULL,
                   .comm_exit = MPI_COMM_NULL,
                   .size = 1,
                   .timeout_s = default_timeout(opts),
                   .owns_mpi = owns};
    /* the base communicator's handler is the caller's (often fatal): the
     * duplicates get MPI_ERRORS_RETURN before anything else runs on them */
    fc_status st = fc__dist_check(d, MPI_Comm_dup(base, &d->comm), "MPI_Comm_dup");
    if (st == FC_OK)
        st = fc__dist_check(d, MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN),
                            "MPI_Comm_set_errhandler");
    MPI_Comm *more[2] = {&d->comm2, &d->comm_exit};
    for (int i = 0; i < 2 && st == FC_OK; i++) {
        st = fc__dist_check(d, MPI_Comm_dup(d->comm, more[i]), "MPI_Comm_dup");
        if (st == FC_OK)
            st = fc__dist_check(d, MPI_Comm_set_errhandler(*more[i], MPI_ERRORS_RETURN),
                                "MPI_Comm_set_errhandler");
    }
    if (st == FC_OK) st = fc__dist_check(d, MPI_Comm_rank(d->comm, &d->rank), "MPI_Comm_rank");
    if (st == FC_OK) st = fc__dist_check(d, MPI_Comm_size(d->comm, &d->size), "MPI_Comm_size");
    if (st != FC_OK) {
        if (d->comm_exit != MPI_COMM_NULL) MPI_Comm_free(&d->comm_exit);
        if (d->comm2 != MPI_COMM_NULL) MPI_Comm_free(&d->comm2);
        if (d->comm != MPI_COMM_NULL) MPI_Comm_free(&d->comm);
        fc__ctx_free(ctx, d, sizeof *d);
        return st;
    }
    if (owns) g_owned++;
    *out = d;
    return FC_OK;
}

fc_status fc_dist_init(fc_ctx *ctx, int *argc, char ***argv, const fc_dist_opts *opts,
                       fc_dist **out) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!out) return fc__fail(ctx, FC_ERR_NULL_ARG, "fc_dist_init: out is NULL");
    *out = NULL;
    int inited = 0, finalized = 0, provided = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized) return fc__fail(ctx, FC_ERR_STATE, "fc_dist_init: MPI was already finalized");
    if (!inited) {
        int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS)
            return fc__fail(ctx, FC_ERR_COMM, "fc_dist_init: MPI_Init_thread failed (%d)", rc);
        g_initialised_mpi = true;
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_FUNNELED)
        return fc__fail(ctx, FC_ERR_COMM,
                        "fc_dist_init: MPI gives thread level %d, fucina needs "
                        "MPI_THREAD_FUNNELED (%d)",
                        provided, MPI_THREAD_FUNNELED);
    return make(ctx, MPI_COMM_WORLD, opts, true, out);
}

fc_status fc_dist_init_comm(fc_ctx *ctx, const void *mpi_comm, const fc_dist_opts *opts,
                            fc_dist **out) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!out || !mpi_comm)
        return fc__fail(ctx, FC_ERR_NULL_ARG, "fc_dist_init_comm: %s is NULL",
                        out ? "mpi_comm" : "out");
    *out = NULL;
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (!inited || finalized)
        return fc__fail(ctx, FC_ERR_STATE, "fc_dist_init_comm: MPI is %s",
                        finalized ? "already finalized" : "not initialised");
    return make(ctx, *(const MPI_Comm *)mpi_comm, opts, false, out);
}

/* Appends to msg[0, cap) at *n, truncating. */
static void add(char *msg, size_t cap, size_t *n, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static void add(char *msg, size_t cap, size_t *n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(msg + *n, cap - *n, fmt, ap);
    va_end(ap);
    if (k > 0) *n = *n + (size_t)k < cap ? *n + (size_t)k : cap - 1;
}

/* fc_dist_free's way out after a failure: MPI_Finalize would wait for
 * ranks that may never come (or that wait for this one), MPI_Abort ends
 * them all. The exit code is the first error's status, negated: the
 * context's (the error the program met first) or else d's. */
static void end_job_if_failed(fc_dist *d) {
    fc_status cs = fc_ctx_status(d->ctx);
    if (cs == FC_OK && d->failed == FC_OK) return;
    fc_status st = cs != FC_OK ? cs : d->failed;
    int code = st < 0 && st > -128 ? -(int)st : 1;
    /* one write: the launcher forwards stderr in pieces as they come */
    char msg[1024];
    size_t cap = sizeof msg - 1, n = 0; /* the last byte for the newline */
    add(msg, cap, &n,
        "fc_dist_free: rank %d of %d ends the job (MPI_Abort, exit code %d) instead of "
        "finalizing:",
        d->rank, d->size, code);
    if (cs != FC_OK)
        add(msg, cap, &n, " its context holds an error (%s: %s)", fc_status_name(cs),
            fc_ctx_error(d->ctx));
    if (d->failed != FC_OK)
        add(msg, cap, &n, "%s %s (%s)", cs != FC_OK ? ";" : "", d->why, fc_status_name(d->failed));
    msg[n++] = '\n';
    fflush(stdout);
    fwrite(msg, 1, n, stderr);
    fflush(stderr);
    MPI_Abort(d->comm, code);
    _exit(code); /* MPI_Abort returned: it should not */
}

void fc_dist_free(fc_dist *d) {
    if (!d) return;
    /* A failed rank must not finalize: its peers may be waiting for it in a
     * collective (or it for them). Healthy ranks first meet, with the
     * deadline, on their own communicator (a peer stuck in a collective of
     * comm must not have it matched by this one): a rank that never comes
     * (stalled, or blocked in a collective this one skipped) ends the job
     * after the deadline instead of hanging it in MPI_Finalize. */
    if (d->size > 1) {
        end_job_if_failed(d);
        MPI_Request req = MPI_REQUEST_NULL;
        if (fc__dist_check(d, MPI_Ibarrier(d->comm_exit, &req), "fc_dist_free: MPI_Ibarrier") ==
            FC_OK)
            fc__dist_wait(d, &req, 1, "fc_dist_free (waiting for every rank to call it)");
        end_job_if_failed(d);
    }
    fc__dist_red_free(d, &d->scratch);
    MPI_Comm_free(&d->comm_exit);
    MPI_Comm_free(&d->comm2);
    MPI_Comm_free(&d->comm);
    bool owns = d->owns_mpi;
    fc__ctx_free(d->ctx, d, sizeof *d);
    if (owns && --g_owned == 0 && g_initialised_mpi) {
        MPI_Finalize();
        g_initialised_mpi = false;
    }
}

int fc_dist_rank(const fc_dist *d) { return d ? d->rank : 0; }
int fc_dist_size(const fc_dist *d) { return d ? d->size : 1; }

void fc_dist_abort(fc_dist *d, int code) {
    if (d) MPI_Abort(d->comm, code);
}

void fc_dist_fail(fc_dist *d, fc_status st) {
    if (d) fc__dist_broken(d, st != FC_OK ? st : FC_ERR_STATE, "fc_dist_fail was called");
}

fc_status fc_dist_status(const fc_dist *d) { return d ? d->failed : FC_ERR_NULL_ARG; }

fc_status fc_dist_barrier(fc_dist *d) {
    if (!d) return FC_ERR_NULL_ARG;
    fc_status ust = fc__dist_usable(d, "fc_dist_barrier");
    if (ust != FC_OK) return ust;
    MPI_Request req = MPI_REQUEST_NULL;
    fc_status st = fc__dist_check(d, MPI_Ibarrier(d->comm, &req), "fc_dist_barrier: MPI_Ibarrier");
    return st == FC_OK ? fc__dist_wait(d, &req, 1, "fc_dist_barrier") : st;
}

// ----------------------------------------------------------------------------
// the deterministic reduction

fc_status fc__dist_red_init(fc_dist *d, fc__dist_red *r, bool f64, int64_t count) {
    memset(r, 0, sizeof *r);
    return fc__dist_red_reuse(d, r, f64, count);
}

fc_status fc__dist_red_reuse(fc_dist *d, fc__dist_red *r, bool f64, int64_t count) {
    r->req = MPI_REQUEST_NULL;
    r->phase = FC__RED_IDLE;
    r->f64 = f64;
    r->count = count;
    r->shard = (count + d->size - 1) / d->size;
    size_t esz = f64 ? sizeof(double) : sizeof(float);
    int64_t total = r->shard * d->size;
    if (r->shard > 0x7fffffff || (uint64_t)total > SIZE_MAX / esz)
        return fc__fail(d->ctx, FC_ERR_OVERFLOW,
                        "fc_dist: a reduction of %lld elements over %d ranks does not fit "
                        "MPI's int counts",
                        (long long)count, d->size);
    if ((size_t)total * esz <= r->cap) return FC_OK;
    fc__dist_red_free(d, r);
    r->send = fc__ctx_alloc(d->ctx, (size_t)total * esz);
    r->recv = fc__ctx_alloc(d->ctx, (size_t)total * esz);
    r->cap = (size_t)total * esz;
    if (!r->send || !r->recv) {
        fc__dist_red_free(d, r);
        return fc__fail(d->ctx, FC_ERR_OOM, "fc_dist: out of memory for %lld-element buffers",
                        (long long)total);
    }
    return FC_OK;
}

void fc__dist_red_free(fc_dist *d, fc__dist_red *r) {
    if (r->send) fc__ctx_free(d->ctx, r->send, r->cap);
    if (r->recv) fc__ctx_free(d->ctx, r->recv, r->cap);
    r->send = r->recv = NULL;
    r->cap = 0;
}

fc_status fc__dist_red_start(fc_dist *d, fc__dist_red *r, double scale) {
    size_t esz = r->f64 ? sizeof(double) : sizeof(float);
    int64_t total = r->shard * d->size;
    memset((char *)r->send + (size_t)r->count * esz, 0, (size_t)(total - r->count) * esz);
    r->scale = scale;
    MPI_Datatype t = r->f64 ? MPI_DOUBLE : MPI_FLOAT;
    fc_status st = fc__dist_check(
        d, MPI_Ialltoall(r->send, (int)r->shard, t, r->recv, (int)r->shard, t, d->comm, &r->req),
        "fc_dist reduction: MPI_Ialltoall");
    r->phase = st == FC_OK ? FC__RED_EXCHANGE : FC__RED_IDLE;
    return st;
}

/* This rank's slice: the N received copies added in rank order, in double,
 * rounded once. The order is what makes the result independent of timing
 * and of the MPI library: nothing is added in the order it arrived. */
static void sum_slice(const fc_dist *d, fc__dist_red *r) {
    int64_t S = r->shard, N = d->size;
    if (r->f64) {
        const double *in = r->recv;
        double *out = (double *)r->send + d->rank * S;
        for (int64_t i = 0; i < S; i++) {
            double s = 0;
            for (int64_t k = 0; k < N; k++)
                s += in[k * S + i];
            out[i] = s * r->scale;
        }
    } else {
        const float *in = r->recv;
        float *out = (float *)r->send + d->rank * S;
        for (int64_t i = 0; i < S; i++) {
            double s = 0;
            for (int64_t k = 0; k < N; k++)
                s += (double)in[k * S + i];
            out[i] = (float)(s * r->scale);
        }
    }
}

fc_status fc__dist_red_poll(fc_dist *d, fc__dist_red *r, bool gather_ok) {
    int done = 0;
    fc_status st = FC_OK;
    if (r->phase == FC__RED_EXCHANGE) {
        st = fc__dist_check(d, MPI_Test(&r->req, &done, MPI_STATUS_IGNORE),
                            "fc_dist reduction: MPI_Test (MPI_Ialltoall)");
        if (st != FC_OK || !done) return st;
        sum_slice(d, r);
        r->phase = FC__RED_SUMMED;
    }
    if (r->phase == FC__RED_SUMMED && gather_ok) {
        MPI_Datatype t = r->f64 ? MPI_DOUBLE : MPI_FLOAT;
        st = fc__dist_check(
            d, MPI_Iallgather(MPI_IN_PLACE, 0, t, r->send, (int)r->shard, t, d->comm2, &r->req),
            "fc_dist reduction: MPI_Iallgather");
        if (st != FC_OK) return st;
        r->phase = FC__RED_GATHER;
    }
    if (r->phase == FC__RED_GATHER) {
        st = fc__dist_check(d, MPI_Test(&r->req, &done, MPI_STATUS_IGNORE),
                            "fc_dist reduction: MPI_Test (MPI_Iallgather)");
        if (st == FC_OK && done) r->phase = FC__RED_DONE;
    }
    return st;
}

/* Runs one reduction to the end, with d's deadline. */
static fc_status red_run(fc_dist *d, fc__dist_red *r, double scale, const char *what) {
    fc_status st = fc__dist_red_start(d, r, scale);
    double deadline = d->timeout_s < 0 ? -1 : fc__dist_now() + d->timeout_s;
    for (unsigned spin = 0; st == FC_OK && r->phase != FC__RED_DONE; spin++) {
        st = fc__dist_red_poll(d, r, true);
        if (st == FC_OK && r->phase != FC__RED_DONE && deadline >= 0 && (spin & 63) == 0 &&
            fc__dist_now() > deadline) {
            fc__fail(d->ctx, FC_ERR_COMM,
                     "%s: rank %d of %d waited %g s without the other ranks (one may have "
                     "died); fc_dist_free now ends the job",
                     what, d->rank, d->size, d->timeout_s);
            st = fc__dist_broken(d, FC_ERR_COMM, "%s waited %g s in vain", what, d->timeout_s);
        }
        fc__dist_pause(spin);
    }
    return st;
}

// ----------------------------------------------------------------------------
// the list collectives

/* The checks every list collective makes on its tensors. */
static fc_status check_list(fc_dist *d, const char *fn, fc_tensor *const *ts, int n, bool floats) {
    if (n < 0) return fc__fail(d->ctx, FC_ERR_INVALID_ARG, "%s: n is %d", fn, n);
    if (n > 0 && !ts) return fc__fail(d->ctx, FC_ERR_NULL_ARG, "%s: the tensor list is NULL", fn);
    char b[160];
    for (int i = 0; i < n; i++) {
        const fc_tensor *t = ts[i];
        if (!t) return fc__fail(d->ctx, FC_ERR_NULL_ARG, "%s: tensor %d is NULL", fn, i);
        if (t->ctx != d->ctx)
            return fc__fail(d->ctx, FC_ERR_CONTEXT,
                            "%s: tensor %d belongs to another context than the fc_dist's", fn, i);
        if (floats && t->raw.dtype != FC_F32 && t->raw.dtype != FC_F64)
            return fc__fail(d->ctx, FC_ERR_DTYPE, "%s: tensor %d is %s; only f32 and f64 reduce",
                            fn, i, fc__desc(t, b, (int)sizeof b));
        if (!fc__contiguous(&t->raw))
            return fc__fail(d->ctx, FC_ERR_UNSUPPORTED_VIEW,
                            "%s: tensor %d (%s) is not contiguous; pass fc_contiguous of it", fn, i,
                            fc__desc(t, b, (int)sizeof b));
        if (fc__buffer_is_read_only(t->raw.buf))
            return fc__fail(d->ctx, FC_ERR_READ_ONLY, "%s: tensor %d (%s) is read-only", fn, i,
                            fc__desc(t, b, (int)sizeof b));
    }
    return FC_OK;
}

fc_status fc_dist_broadcast(fc_dist *d, fc_tensor *const *ts, int n, int root) {
    if (!d) return FC_ERR_NULL_ARG;
    fc_status st = fc__dist_usable(d, "fc_dist_broadcast");
    if (st == FC_OK) st = check_list(d, "fc_dist_broadcast", ts, n, false);
    if (st != FC_OK) return st;
    if (root < 0 || root >= d->size)
        return fc__fail(d->ctx, FC_ERR_INVALID_ARG,
                        "fc_dist_broadcast: root %d is not a rank (world size %d)", root, d->size);
    for (int i = 0; i < n && st == FC_OK; i++) {
        size_t nb = fc_tensor_nbytes(ts[i]);
        char *p = fc_tensor_data_mut(ts[i]);
        /* MPI counts are int: a tensor over 2 GiB goes in pieces */
        for (size_t off = 0; off < nb && st == FC_OK; off += (size_t)1 << 30) {
            size_t len = nb - off < ((size_t)1 << 30) ? nb - off : (size_t)1 << 30;
            MPI_Request req = MPI_REQUEST_NULL;
            st = fc__dist_check(d, MPI_Ibcast(p + off, (int)len, MPI_BYTE, root, d->comm, &req),
                                "fc_dist_broadcast: MPI_Ibcast");
            if (st == FC_OK) st = fc__dist_wait(d, &req, 1, "fc_dist_broadcast");
        }
    }
    return st;
}

static fc_status reduce_array(fc_dist *d, void *v, int64_t n, bool f64, fc_dist_op op,
                              const char *fn) {
    if (n == 0 || d->size == 1) return FC_OK; /* one rank: the sum and the mean are the data */
    /* the handle's scratch reduction: its buffers stay for the next call */
    fc__dist_red *r = &d->scratch;
    fc_status st = fc__dist_red_reuse(d, r, f64, n);
    if (st != FC_OK) return st;
    size_t esz = f64 ? sizeof(double) : sizeof(float);
    memcpy(r->send, v, (size_t)n * esz);
    st = red_run(d, r, op == FC_DIST_MEAN ? 1.0 / d->size : 1.0, fn);
    if (st == FC_OK) memcpy(v, r->send, (size_t)n * esz);
    return st;
}

fc_status fc_dist_all_reduce(fc_dist *d, fc_tensor *const *ts, int n, fc_dist_op op) {
    if (!d) return FC_ERR_NULL_ARG;
    fc_status st = fc__dist_usable(d, "fc_dist_all_reduce");
    if (st != FC_OK) return st;
    if ((unsigned)op >= FC_DIST_OP_COUNT)
        return fc__fail(d->ctx, FC_ERR_INVALID_ARG, "fc_dist_all_reduce: op %d is not an op",
                        (int)op);
    st = check_list(d, "fc_dist_all_reduce", ts, n, true);
    for (int i = 0; i < n && st == FC_OK; i++) {
        int64_t m = fc__numel(&ts[i]->raw);
        if (m > 0)
            st = reduce_array(d, fc_tensor_data_mut(ts[i]), m, ts[i]->raw.dtype == FC_F64, op,
                              "fc_dist_all_reduce");
    }
    return st;
}

fc_status fc_dist_all_reduce_f64(fc_dist *d, double *v, int n, fc_dist_op op) {
    if (!d) return FC_ERR_NULL_ARG;
    fc_status st = fc__dist_usable(d, "fc_dist_all_reduce_f64");
    if (st != FC_OK) return st;
    if ((unsigned)op >= FC_DIST_OP_COUNT)
        return fc__fail(d->ctx, FC_ERR_INVALID_ARG, "fc_dist_all_reduce_f64: op %d is not an op",
                        (int)op);
    if (n < 0 || (n > 0 && !v))
        return fc__fail(d->ctx, n < 0 ? FC_ERR_INVALID_ARG : FC_ERR_NULL_ARG,
                        "fc_dist_all_reduce_f64: %s", n < 0 ? "n is negative" : "v is NULL");
    return n > 0 ? reduce_array(d, v, n, true, op, "fc_dist_all_reduce_f64") : FC_OK;
}
