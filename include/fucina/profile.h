/* SPDX-License-Identifier: MIT */
/* fucina/profile.h - a per-context profiler of ops: forward and backward
 * wall time per call, output bytes and (matmul, linear, conv) FLOPs,
 * written as a Chrome trace or a text table.
 *
 * fc_profile_begin starts a recording in a context; from then until
 * fc_profile_end every op that finishes records one event:
 *   - forward ("forward" phase): an op's time from the allocation of its
 *     output handle to its end (validation before the allocation is not
 *     counted), named by the op ("matmul", "relu", ...), with the output's
 *     bytes. An op built from other public ops records theirs too, and its
 *     own span covers those made after its output: times are inclusive, so
 *     such an op's share in the table counts its parts twice. An op that
 *     returns an existing handle (a no-op cast) records nothing.
 *   - backward ("backward" phase): each backward rule's time, named by the
 *     op that recorded the node. The ops a rule runs are part of it and
 *     record no events of their own (so a checkpoint's recompute is inside
 *     the checkpoint's rule), but their FLOPs add to the rule's.
 * FLOPs are counted for matmul and linear (2 * output elements * the
 * contracted length; linear's bias adds none) and the convolutions (2 *
 * output elements * the weights of one output channel; for a transposed
 * one, input elements * those of one input channel) and 0 (unknown)
 * elsewhere.
 * Times are CLOCK_MONOTONIC nanoseconds since fc_profile_begin, measured
 * on the calling thread; threads an op uses internally are not shown
 * separately (team waits are not recorded).
 *
 * Cost: with no recording, one predictable branch per op and per backward
 * rule, and no allocation. While recording, events go into a buffer
 * allocated by fc_profile_begin (max_events of them); nothing allocates
 * while recording, and events past the buffer are counted as dropped.
 * Each forward event reads the clock twice (at its output's creation and
 * at its end) and each rule's event twice: CLOCK_MONOTONIC costs tens of
 * nanoseconds with a TSC clock source and more under some virtual
 * machines' (about 0.3 us under kvm-clock), which bounds how small an op
 * can be timed meaningfully.
 *
 * The recording belongs to the context: fc_profile_end stops it and keeps
 * the events for the writers and fc_profile_get_event until the next
 * fc_profile_begin or fc_ctx_free, which free them.
 */
#ifndef FUCINA_PROFILE_H
#define FUCINA_PROFILE_H

#include <stdio.h>

#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether an event timed an op's forward or a backward rule. */
typedef enum fc_profile_phase {
    FC_PROFILE_FORWARD = 0,
    FC_PROFILE_BACKWARD,
    FC_PROFILE_PHASE_COUNT
} fc_profile_phase;

/* Options of fc_profile_begin; NULL or zero fields mean the defaults. */
typedef struct fc_profile_opts {
    int64_t max_events; /* buffer size in events; 0: 65536 */
} fc_profile_opts;

/* One recorded event (a copy: it owns nothing). */
typedef struct fc_profile_event {
    char name[48];          /* the op's name, cut to 47 bytes */
    fc_profile_phase phase;
    int64_t start_ns;       /* since fc_profile_begin, >= 0 */
    int64_t dur_ns;         /* >= 0 */
    int64_t flops;          /* 0: not known */
    int64_t bytes;          /* output bytes of a forward event; 0 for backward */
} fc_profile_event;

/* Starts a recording in ctx, dropping the events of an earlier one.
 * Returns FC_OK; FC_ERR_NULL_ARG for a NULL ctx; FC_ERR_STATE when a
 * recording is already running (it goes on unchanged); FC_ERR_INVALID_ARG
 * for max_events < 0; FC_ERR_OOM when the event buffer cannot be allocated
 * (no recording then, the earlier events are gone). Errors but the NULL
 * ctx are recorded in ctx. */
FC_API fc_status fc_profile_begin(fc_ctx *ctx, const fc_profile_opts *opts);
/* Stops the recording; its events stay readable. FC_OK; FC_ERR_NULL_ARG
 * for a NULL ctx; FC_ERR_STATE (recorded) when none is running. */
FC_API fc_status fc_profile_end(fc_ctx *ctx);
/* True while a recording runs; false for NULL. */
FC_API bool fc_profile_running(const fc_ctx *ctx);
/* Events recorded (kept) by the current or last recording; 0 for NULL or
 * when there was none. */
FC_API int64_t fc_profile_event_count(const fc_ctx *ctx);
/* Events that did not fit in the buffer; 0 for NULL or none. */
FC_API int64_t fc_profile_dropped_count(const fc_ctx *ctx);
/* Copies event i (in the order they ended) into *out. FC_OK;
 * FC_ERR_NULL_ARG for a NULL ctx or out; FC_ERR_INDEX (recorded) for i
 * outside [0, fc_profile_event_count). */
FC_API fc_status fc_profile_get_event(const fc_ctx *ctx, int64_t i, fc_profile_event *out);

/* Writes the events as a Chrome trace (the JSON object format: a
 * "traceEvents" array of complete "X" events with name, cat "forward" or
 * "backward", ph, ts and dur in microseconds, pid, tid and args flops and
 * bytes), which Perfetto and chrome://tracing open. Works while recording
 * too (what was recorded so far). FC_OK; FC_ERR_NULL_ARG for a NULL ctx or
 * path; FC_ERR_STATE when nothing was ever recorded in ctx; FC_ERR_IO when
 * the file cannot be written. Errors but the NULL ctx are recorded. */
FC_API fc_status fc_profile_write_trace(fc_ctx *ctx, const char *path);
/* Writes a text table to out, one row per op name sorted by total time
 * (forward + backward), largest first: calls, total ms, mean us per call,
 * share % of the summed totals, forward and backward ms, GFLOP/s over the
 * calls with known FLOPs ("-" when none). Same errors as
 * fc_profile_write_trace (NULL out is FC_ERR_NULL_ARG), plus FC_ERR_OOM
 * for the table's scratch memory. */
FC_API fc_status fc_profile_write_table(fc_ctx *ctx, FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* FUCINA_PROFILE_H */
