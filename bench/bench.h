/* SPDX-License-Identifier: MIT */
/* bench.h - the measuring protocol shared by every fucina-bench workload.
 *
 * It is the protocol of ../shared/peers/_bench.py, so the two sides are
 * comparable: warm up (>= 3 calls and >= 0.5 s), calibrate iterations so
 * one repeat lasts >= FUCINA_BENCH_MIN_S (default 2 s), time 5 repeats,
 * report per-call median/min/max, and record how much CPU other processes
 * took meanwhile (redo up to 8 times when it exceeds 0.05 cores). */
#ifndef FUCINA_BENCH_H
#define FUCINA_BENCH_H

#include <stdbool.h>
#include <stdio.h>

typedef struct bench_result {
    double median_s, min_s, max_s;
    double all_s[5];
    long iters;
    int attempts;
    double other_cpu_cores;
    bool contaminated;
} bench_result;

typedef void (*bench_fn)(void *arg);

/* Runs the protocol on fn(arg). */
bench_result bench_measure(bench_fn fn, void *arg);
double bench_now(void);

/* JSON helpers: print a {median,min,max} object of value = factor / seconds
 * (factor > 0: a throughput) or seconds * -factor (factor < 0: a time). */
void bench_json_stat(FILE *f, const char *key, const bench_result *r, double factor);
void bench_json_raw(FILE *f, const bench_result *r);
void bench_json_env(FILE *f, int threads);

/* Workloads (each prints one JSON line; argc/argv after the subcommand). */
int bench_elementwise(int argc, char **argv);
int bench_reduce(int argc, char **argv);
int bench_norm_softmax(int argc, char **argv);
int bench_tiny_ops(int argc, char **argv);
int bench_mlp_train(int argc, char **argv);
int bench_gpt_train(int argc, char **argv);
int bench_gpt_train_ckpt(int argc, char **argv); /* bench_gpt.c */

#endif
