/* SPDX-License-Identifier: MIT */
/* bench.c - the measuring protocol (see bench.h). It needs nothing of
 * fucina, so bench/ggml/qmatvec.c times ggml with this very code. */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* busy CPU seconds of the whole machine, and of this process */
static double sys_busy_s(void) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return 0;
    unsigned long long v[10] = {0};
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6]) != 7) {
        fclose(f);
        return 0;
    }
    fclose(f);
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / (double)sysconf(_SC_CLK_TCK);
}

static double self_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double min_seconds(void) {
    const char *s = getenv("FUCINA_BENCH_MIN_S");
    double v = s ? atof(s) : 2.0;
    return v > 0 ? v : 2.0;
}

static void wait_idle(void) {
    double end = bench_now() + 300;
    int ok = 0;
    while (ok < 3 && bench_now() < end) {
        double b0 = sys_busy_s();
        struct timespec one = {1, 0};
        nanosleep(&one, NULL);
        ok = (sys_busy_s() - b0) < 0.05 ? ok + 1 : 0;
    }
}

/* FUCINA_BENCH_MAX_ATTEMPTS (default 8, like the peers' PEER_MAX_ATTEMPTS) */
static int max_attempts(void) {
    const char *s = getenv("FUCINA_BENCH_MAX_ATTEMPTS");
    int v = s ? atoi(s) : 8;
    return v > 0 ? v : 8;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static bench_result repeats(bench_fn fn, void *arg, long iters) {
    bench_result r = {0};
    double sb0 = sys_busy_s(), ob0 = self_cpu_s(), w0 = bench_now();
    for (int k = 0; k < 5; k++) {
        double t0 = bench_now();
        for (long i = 0; i < iters; i++)
            fn(arg);
        r.all_s[k] = (bench_now() - t0) / (double)iters;
    }
    double wall = bench_now() - w0;
    double other = (sys_busy_s() - sb0) - (self_cpu_s() - ob0);
    r.other_cpu_cores = other > 0 ? other / wall : 0;
    double s[5];
    memcpy(s, r.all_s, sizeof s);
    qsort(s, 5, sizeof s[0], cmp_d);
    r.median_s = s[2];
    r.min_s = s[0];
    r.max_s = s[4];
    r.iters = iters;
    return r;
}

bench_result bench_measure(bench_fn fn, void *arg) {
    double min_s = min_seconds();
    /* Warm-up and calibration: three calls and half a second, or for a
     * smoke protocol (min_s under half a second) one call and min_s. */
    double warm_s = min_s < 0.5 ? min_s : 0.5;
    long warm_n = min_s < 0.5 ? 1 : 3;
    double t0 = bench_now();
    long n = 0;
    while (n < warm_n || bench_now() - t0 < warm_s) {
        fn(arg);
        n++;
    }
    double per = (bench_now() - t0) / (double)n;
    long iters = (long)ceil(min_s / per);
    if (iters < 1) iters = 1;
    for (;;) {
        double a = bench_now();
        for (long i = 0; i < iters; i++)
            fn(arg);
        double dt = bench_now() - a;
        if (dt >= min_s) break;
        long next = (long)ceil((double)iters * min_s / dt * 1.05);
        iters = next > iters + 1 ? next : iters + 1;
    }
    bench_result best = {0};
    int attempts = 0;
    /* FUCINA_BENCH_NO_IDLE_WAIT: no wait before any attempt, retries included */
    bool idle_waits = !getenv("FUCINA_BENCH_NO_IDLE_WAIT");
    if (idle_waits) wait_idle();
    for (;;) {
        attempts++;
        bench_result r = repeats(fn, arg, iters);
        if (attempts == 1 || r.other_cpu_cores < best.other_cpu_cores) best = r;
        if (best.other_cpu_cores <= 0.05 || attempts >= max_attempts()) break;
        if (idle_waits) wait_idle();
    }
    best.attempts = attempts;
    best.contaminated = best.other_cpu_cores > 0.05;
    return best;
}

void bench_json_stat(FILE *f, const char *key, const bench_result *r, double factor) {
    double med, lo, hi;
    if (factor < 0) {
        med = r->median_s * -factor, lo = r->min_s * -factor, hi = r->max_s * -factor;
    } else {
        med = factor / r->median_s, lo = factor / r->max_s, hi = factor / r->min_s;
    }
    fprintf(f, "\"%s\": {\"median\": %.6g, \"min\": %.6g, \"max\": %.6g}", key, med, lo, hi);
}

void bench_json_raw(FILE *f, const bench_result *r) {
    fprintf(f,
            "\"raw\": {\"median_s\": %.9g, \"min_s\": %.9g, \"max_s\": %.9g, "
            "\"iters_per_repeat\": %ld, \"attempts\": %d, \"other_cpu_cores\": %.3f, "
            "\"contaminated\": %s}",
            r->median_s, r->min_s, r->max_s, r->iters, r->attempts, r->other_cpu_cores,
            r->contaminated ? "true" : "false");
}
