/* SPDX-License-Identifier: MIT */
/* bench_split.h - where a training step's time goes: its matrix products
 * against the rest, from the profiler (fucina/profile.h). */
#ifndef FUCINA_BENCH_SPLIT_H
#define FUCINA_BENCH_SPLIT_H

#include <stdio.h>

#include "bench.h"
#include "fucina.h"

/* Runs `steps` calls of step(arg) under a profiler recording in ctx and
 * prints `, "step_split": {...}` to out: the mean step time, the time
 * covered by product events (those with known FLOPs: matmul, linear, the
 * convolutions, forward and backward rules; nested events are counted
 * once, as the union of their intervals), the same for the fused
 * attention (whose products the profiler does not count as FLOPs), the
 * share outside products, and the five op names that take the most of
 * the rest. Returns the profiler's status (FC_OK when printed). */
fc_status bench_step_split(fc_ctx *ctx, bench_fn step, void *arg, int steps, FILE *out);

#endif
