/* SPDX-License-Identifier: MIT */
/* bench_memory.c - the memory-bound workloads: elementwise (peers/elementwise.py)
 * and reduce (peers/reduce.py), on n = 2^24. */
#include <stdlib.h>

#include "bench.h"
#include "fucina.h"

#define N (1LL << 24)

static int threads(void) {
    const char *s = getenv("FUCINA_BENCH_THREADS");
    return s && atoi(s) > 0 ? atoi(s) : 2;
}

typedef struct ew {
    fc_ctx *ctx;
    fc_tensor *x, *y, *z;
} ew;

static void add_out(void *p) {
    ew *e = p;
    fc_add_out(e->z, e->x, e->y);
}
static void add_alloc(void *p) {
    ew *e = p;
    fc_scope_begin(e->ctx);
    fc_add(e->ctx, e->x, e->y); /* a fresh output, released by the scope */
    fc_scope_end(e->ctx);
}
static void copy(void *p) {
    ew *e = p;
    fc_copy_(e->z, e->x);
}

static int fail(fc_ctx *ctx, const char *what) {
    fprintf(stderr, "fucina-bench %s: %s\n", what, fc_ctx_error(ctx));
    fc_ctx_free(ctx);
    return 1;
}

int bench_elementwise(int argc, char **argv) {
    (void)argc, (void)argv;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads(), .seed = 0});
    const int64_t shape[1] = {N};
    ew e = {ctx, fc_randn(ctx, FC_F32, shape, 1), fc_randn(ctx, FC_F32, shape, 1),
            fc_zeros(ctx, FC_F32, shape, 1)};
    if (!e.x || !e.y || !e.z) return fail(ctx, "elementwise");
    struct {
        const char *name;
        bench_fn fn;
        double bytes;
    } w[] = {{"add_out", add_out, 12.0 * N}, {"add_alloc", add_alloc, 12.0 * N},
             {"copy", copy, 8.0 * N}};
    bench_result r[3];
    for (int i = 0; i < 3; i++) r[i] = bench_measure(w[i].fn, &e);
    if (fc_ctx_status(ctx) != FC_OK) return fail(ctx, "elementwise");
    printf("{\"workload\": \"elementwise\", ");
    bench_json_env(stdout, threads());
    printf(", \"n\": %lld, \"results\": {", N);
    for (int i = 0; i < 3; i++) {
        printf("%s\"%s\": {", i ? ", " : "", w[i].name);
        bench_json_stat(stdout, "GBps", &r[i], w[i].bytes / 1e9);
        printf(", ");
        bench_json_stat(stdout, "ms", &r[i], -1e3);
        printf(", ");
        bench_json_raw(stdout, &r[i]);
        printf("}");
    }
    printf("}}\n");
    fc_ctx_free(ctx);
    return 0;
}

typedef struct red {
    fc_ctx *ctx;
    fc_tensor *x;
} red;

static void sum_all(void *p) {
    red *r = p;
    fc_scope_begin(r->ctx);
    fc_sum(r->ctx, r->x, NULL, 0, false);
    fc_scope_end(r->ctx);
}

static double sum_of(fc_ctx *ctx, fc_tensor *x, fc_dtype *dt) {
    double v = -1;
    fc_tensor *s = fc_sum(ctx, x, NULL, 0, false);
    if (s) {
        fc_tensor_item(s, &v);
        *dt = fc_tensor_dtype(s);
    }
    fc_release(s);
    return v;
}

int bench_reduce(int argc, char **argv) {
    (void)argc, (void)argv;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads(), .seed = 0});
    const int64_t shape[1] = {N}, shape2[1] = {2 * N};
    fc_tensor *xf = fc_randn(ctx, FC_F32, shape, 1);
    fc_tensor *xb = fc_randn(ctx, FC_BF16, shape, 1);
    if (!xf || !xb) return fail(ctx, "reduce");
    red rf = {ctx, xf}, rb = {ctx, xb};
    bench_result a = bench_measure(sum_all, &rf), b = bench_measure(sum_all, &rb);
    fc_tensor *ob = fc_ones(ctx, FC_BF16, shape, 1), *of = fc_ones(ctx, FC_F32, shape, 1);
    fc_tensor *of2 = fc_ones(ctx, FC_F32, shape2, 1);
    fc_dtype d1 = FC_DTYPE_COUNT, d2 = d1, d3 = d1;
    double sb = sum_of(ctx, ob, &d1), s24 = sum_of(ctx, of, &d2), s25 = sum_of(ctx, of2, &d3);
    if (fc_ctx_status(ctx) != FC_OK) return fail(ctx, "reduce");
    printf("{\"workload\": \"reduce\", ");
    bench_json_env(stdout, threads());
    printf(", \"n\": %lld, \"results\": {\"sum_f32\": {", N);
    bench_json_stat(stdout, "GBps", &a, 4.0 * N / 1e9);
    printf(", ");
    bench_json_stat(stdout, "ms", &a, -1e3);
    printf(", ");
    bench_json_raw(stdout, &a);
    printf(", \"result_dtype\": \"f32\"}, \"sum_bf16\": {");
    bench_json_stat(stdout, "GBps", &b, 2.0 * N / 1e9);
    printf(", ");
    bench_json_stat(stdout, "ms", &b, -1e3);
    printf(", ");
    bench_json_raw(stdout, &b);
    printf(", \"result_dtype\": \"%s\"}}, \"bf16_ones_sum\": %.1f, \"bf16_ones_sum_dtype\": \"%s\", "
           "\"f32_ones_sum_2pow24\": %.1f, \"f32_ones_sum_2pow25\": %.1f}\n",
           fc_dtype_name(d1), sb, fc_dtype_name(d1), s24, s25);
    fc_ctx_free(ctx);
    return 0;
}
