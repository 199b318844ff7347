/* SPDX-License-Identifier: MIT */
/* exec/profile.h - the profiler's hooks (fucina/profile.h). The state lives
 * in the context; the hooks sit where every op ends (fc__finish), where
 * handles are made (their stamp) and where backward rules run (ag's walk),
 * each behind one test of ctx->profiling, so kernels know nothing of it. */
#ifndef FUCINA_EXEC_PROFILE_H
#define FUCINA_EXEC_PROFILE_H

#include "exec/ctx.h"
#include "fucina/profile.h"

/* Nanoseconds since the recording began (CLOCK_MONOTONIC); 1 at least, so
 * a stamp of 0 means "not stamped". */
int64_t fc__profile_now(const fc_ctx *ctx);
/* A new handle's stamp: fc__profile_now, or 0 inside a backward rule,
 * whose ops record nothing (so they skip the clock read). */
int64_t fc__profile_stamp(const fc_ctx *ctx);
/* A forward event of op that began at start_ns (the output's stamp) and
 * ends now, with the output's bytes; takes the FLOPs noted since. Inside a
 * backward rule it records nothing (the rule's event covers it). */
void fc__profile_forward(fc_ctx *ctx, const char *op, int64_t start_ns, int64_t bytes);
/* Adds FLOPs to the event the running op or rule will record. */
void fc__profile_flops(fc_ctx *ctx, int64_t flops);
/* Around a backward rule: enter returns its start; leave records the
 * outermost rule's event (a rule run inside another rule is part of it). */
int64_t fc__profile_rule_enter(fc_ctx *ctx);
void fc__profile_rule_leave(fc_ctx *ctx, const char *op, int64_t start_ns);
/* fc_ctx_free: drops the recording. */
void fc__profile_free(fc_ctx *ctx);

#endif /* FUCINA_EXEC_PROFILE_H */
