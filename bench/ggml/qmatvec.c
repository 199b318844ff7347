/* SPDX-License-Identifier: MIT */
/* qmatvec.c - ggml-qmatvec, the peer of `fucina-bench qmatvec`: ggml's CPU
 * mul_mat on the same workload, timed by the same protocol, printing the
 * same JSON shape, so bench/ratios.py can divide one by the other.
 *
 *   ggml-qmatvec LIBDIR [--variant NAME] [--buffer NAME] [TYPE ...]
 *
 * LIBDIR holds ggml's prebuilt CPU backends (libggml-cpu-<variant>.so, as
 * the npm package @node-llama-cpp/linux-x64 ships them; bench/qmatvec_vs_ggml.sh
 * installs it and builds this file against its headers). Without --variant
 * ggml loads every variant there and keeps the best one this CPU runs
 * (ggml_backend_load_all_from_path: its own scoring); --variant haswell
 * loads that one alone (AVX2+FMA+F16C), which caps ggml to AVX2 the way
 * FUCINA_ISA=avx2 caps fucina. --buffer picks where the weights live: CPU
 * (the default buffer, what ggml_backend_alloc_ctx_tensors gives) or one of
 * the CPU device's extra buffer types, e.g. CPU_REPACK (weights interleaved
 * for its GEMM kernels, what llama.cpp uses for weights) or AMX. TYPE picks
 * among q4_0 q8_0 q4_k q6_k f32 (default: all).
 *
 * The workload is fucina-bench qmatvec's (bench/bench_qmatvec.c): W is
 * 4096 x 4096 (out x in) filled from the same LCG with the same seeds, x has
 * 1 and 16 rows; W is quantized by ggml's own ggml_quantize_chunk without an
 * importance matrix, which is byte-exact with fc_quantize (the golden files
 * of ../shared/golden/ggml), so both sides multiply the same bytes. Generating
 * them here rather than reading a dump from fucina keeps 64 MiB of files and
 * a file format out of the comparison. One timed call is one
 * ggml_backend_graph_compute of Y = ggml_mul_mat(W, X): like fc_linear, it
 * includes converting x to the weight's dot-product type. The protocol is
 * bench/bench.c itself (warm-up, calibration to FUCINA_BENCH_MIN_S per
 * repeat, 5 repeats, median/min/max, redone while other processes take CPU).
 * Threads: FUCINA_BENCH_THREADS (default 2), as fucina-bench. ggml runs on a
 * persistent thread pool (ggml_threadpool_new, as llama.cpp does): without
 * one, this build (no OpenMP) would start and join its threads on every call.
 * GGML_BENCH_THREADPOOL=0 measures that instead.
 *
 * A type a buffer cannot hold (no repacked layout for it on this CPU) is
 * reported as {"unsupported": true} rather than silently moved elsewhere.
 * Exits 0 on success, 1 when ggml fails, 2 on bad arguments. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

enum { OUT = 4096, IN = 4096 };

static int threads(void) {
    const char *s = getenv("FUCINA_BENCH_THREADS");
    return s && atoi(s) > 0 ? atoi(s) : 2;
}

/* bench_qmatvec.c's fill_uniform, so both sides see the same floats. */
static void fill_uniform(float *p, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        p[i] = (float)((double)(seed >> 11) * 0x1p-53 * 2.0 - 1.0);
    }
}

/* ggml reports which file it loaded only in its log: keep that line's path
 * for the JSON, and pass warnings and errors on to stderr. */
static char loaded_from[512];

static void on_log(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    const char *k = strstr(text, "loaded CPU backend from ");
    if (k) {
        snprintf(loaded_from, sizeof loaded_from, "%s", k + strlen("loaded CPU backend from "));
        loaded_from[strcspn(loaded_from, "\n")] = 0;
    }
    if (level >= GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

typedef struct gcase {
    ggml_backend_t backend;
    struct ggml_cgraph *graph;
    enum ggml_status status;
} gcase;

static void compute(void *p) {
    gcase *c = p;
    enum ggml_status st = ggml_backend_graph_compute(c->backend, c->graph);
    if (st != GGML_STATUS_SUCCESS) c->status = st;
}

/* ggml hands its optional entry points out as void *; ISO C cannot cast
 * that to a function pointer, but may copy its bytes (what POSIX dlsym's
 * users do). Leaves *fn NULL when the backend lacks `name`. */
static void lookup(ggml_backend_reg_t reg, const char *name, void *fn, size_t size) {
    void *p = ggml_backend_reg_get_proc_address(reg, name);
    memset(fn, 0, size);
    if (p && size == sizeof p) memcpy(fn, &p, size);
}

static ggml_backend_buffer_type_t find_buft(ggml_backend_dev_t dev, const char *name) {
    if (!strcmp(name, "CPU")) return ggml_backend_dev_buffer_type(dev);
    ggml_backend_dev_get_extra_bufts_t extra;
    lookup(ggml_backend_dev_backend_reg(dev), "ggml_backend_dev_get_extra_bufts", &extra,
           sizeof extra);
    for (ggml_backend_buffer_type_t *b = extra ? extra(dev) : NULL; b && *b; b++)
        if (!strcmp(ggml_backend_buft_name(*b), name)) return *b;
    return NULL;
}

/* The extra buffer types on offer, for the error message and the JSON. */
static void print_extra_bufts(FILE *f, ggml_backend_dev_t dev) {
    ggml_backend_dev_get_extra_bufts_t extra;
    lookup(ggml_backend_dev_backend_reg(dev), "ggml_backend_dev_get_extra_bufts", &extra,
           sizeof extra);
    int i = 0;
    for (ggml_backend_buffer_type_t *b = extra ? extra(dev) : NULL; b && *b; b++)
        fprintf(f, "%s\"%s\"", i++ ? ", " : "", ggml_backend_buft_name(*b));
}

static void print_features(FILE *f, ggml_backend_reg_t reg) {
    ggml_backend_get_features_t get;
    lookup(reg, "ggml_backend_get_features", &get, sizeof get);
    int i = 0;
    for (struct ggml_backend_feature *ft = get ? get(reg) : NULL; ft && ft->name; ft++)
        if (!strcmp(ft->value, "1")) fprintf(f, "%s%s", i++ ? " " : "", ft->name);
}

static const char *cpu_name(char *buf, size_t n) {
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10)) continue;
        const char *v = strchr(line, ':');
        if (v) snprintf(buf, n, "%s", v + 1 + (v[1] == ' '));
        buf[strcspn(buf, "\n")] = 0;
        break;
    }
    if (f) fclose(f);
    return buf;
}

static bool wanted(int argc, char **argv, const char *name) {
    if (argc < 1) return true;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], name)) return true;
    return false;
}

/* One weight type at rows 1 and 16: prints `"key": {...}`. Returns 0, or 1
 * when ggml fails (after printing what it could). */
static int run_type(ggml_backend_t backend, ggml_backend_dev_t dev,
                    ggml_backend_buffer_type_t wbuft, const char *key, enum ggml_type type,
                    const float *wf, const float *xf) {
    static const int64_t rows[2] = {1, 16};
    struct ggml_init_params ip = {.mem_size = 8 * ggml_tensor_overhead() + ggml_graph_overhead(),
                                  .mem_buffer = NULL,
                                  .no_alloc = true};
    struct ggml_context *wctx = ggml_init(ip);
    struct ggml_tensor *w = wctx ? ggml_new_tensor_2d(wctx, type, IN, OUT) : NULL;
    ggml_backend_buffer_t wbuf = w ? ggml_backend_alloc_ctx_tensors_from_buft(wctx, wbuft) : NULL;
    void *wq = malloc(ggml_row_size(type, IN) * OUT);
    int rc = 0;
    printf("\"%s\": {", key);
    if (!wbuf || !wq) {
        fprintf(stderr, "ggml-qmatvec %s: cannot allocate the weights\n", key);
        rc = 1;
        goto done;
    }
    if (type == GGML_TYPE_F32)
        memcpy(wq, wf, sizeof(float) * OUT * IN);
    else
        ggml_quantize_chunk(type, wf, wq, 0, OUT, IN, NULL);
    bool data_set = false;
    for (int r = 0; r < 2 && rc == 0; r++) {
        struct ggml_context *ctx = ggml_init(ip);
        struct ggml_tensor *x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, IN, rows[r]);
        struct ggml_tensor *y = ggml_mul_mat(ctx, w, x);
        /* Asked before the weights are written: an extra buffer cannot
         * even store a type it has no layout for. */
        if (!ggml_backend_dev_supports_op(dev, y)) {
            printf("%s\"unsupported\": true", r ? ", " : "");
            ggml_free(ctx);
            break;
        }
        if (!data_set) ggml_backend_tensor_set(w, wq, 0, ggml_nbytes(w)), data_set = true;
        struct ggml_cgraph *graph = ggml_new_graph(ctx);
        ggml_build_forward_expand(graph, y);
        ggml_backend_buffer_t xbuf =
            ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_dev_buffer_type(dev));
        gcase c = {backend, graph, GGML_STATUS_SUCCESS};
        if (xbuf) {
            ggml_backend_tensor_set(x, xf, 0, ggml_nbytes(x));
            compute(&c); /* fail early and clearly */
        }
        if (!xbuf || c.status != GGML_STATUS_SUCCESS) {
            fprintf(stderr, "ggml-qmatvec %s rows %lld: %s\n", key, (long long)rows[r],
                    xbuf ? ggml_status_to_string(c.status) : "cannot allocate x and y");
            rc = 1;
        } else {
            const bench_result res = bench_measure(compute, &c);
            printf("%s\"%lld\": {", r ? ", " : "", (long long)rows[r]);
            bench_json_stat(stdout, "gflops", &res, 2.0 * OUT * IN * (double)rows[r] / 1e9);
            printf(", ");
            bench_json_raw(stdout, &res);
            printf("}");
            if (c.status != GGML_STATUS_SUCCESS) rc = 1;
        }
        ggml_backend_buffer_free(xbuf);
        ggml_free(ctx);
    }
done:
    printf("}");
    free(wq);
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
    return rc;
}

int main(int argc, char **argv) {
    const char *libdir = NULL, *variant = NULL, *buffer = "CPU";
    int ntypes = 0;
    char **types = calloc((size_t)argc, sizeof *types);
    for (int i = 1; i < argc && types; i++) {
        if (!strcmp(argv[i], "--variant") && i + 1 < argc)
            variant = argv[++i];
        else if (!strcmp(argv[i], "--buffer") && i + 1 < argc)
            buffer = argv[++i];
        else if (!libdir)
            libdir = argv[i];
        else
            types[ntypes++] = argv[i];
    }
    if (!libdir) {
        fprintf(stderr, "usage: ggml-qmatvec LIBDIR [--variant NAME] [--buffer CPU|CPU_REPACK|"
                        "AMX] [q4_0 q8_0 q4_k q6_k f32]\n");
        free(types);
        return 2;
    }
    ggml_log_set(on_log, NULL);
    if (variant) {
        char path[1024];
        snprintf(path, sizeof path, "%s/libggml-cpu-%s.so", libdir, variant);
        if (!ggml_backend_load(path)) {
            fprintf(stderr, "ggml-qmatvec: cannot load %s\n", path);
            free(types);
            return 1;
        }
    } else {
        ggml_backend_load_all_from_path(libdir);
    }
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_backend_t backend = dev ? ggml_backend_dev_init(dev, NULL) : NULL;
    if (!backend) {
        fprintf(stderr, "ggml-qmatvec: no CPU backend in %s\n", libdir);
        free(types);
        return 1;
    }
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    ggml_backend_buffer_type_t wbuft = find_buft(dev, buffer);
    if (!wbuft) {
        fprintf(stderr,
                "ggml-qmatvec: no buffer type %s; this CPU backend offers CPU and: ", buffer);
        print_extra_bufts(stderr, dev);
        fprintf(stderr, "\n");
        ggml_backend_free(backend);
        free(types);
        return 2;
    }
    const int nth = threads();
    ggml_backend_set_n_threads_t set_threads;
    lookup(reg, "ggml_backend_set_n_threads", &set_threads, sizeof set_threads);
    if (set_threads) set_threads(backend, nth);
    typedef struct ggml_threadpool *(*tp_new_t)(struct ggml_threadpool_params *);
    typedef void (*tp_free_t)(struct ggml_threadpool *);
    typedef void (*tp_set_t)(ggml_backend_t, ggml_threadpool_t);
    tp_new_t tp_new;
    tp_free_t tp_free;
    tp_set_t tp_set;
    lookup(reg, "ggml_threadpool_new", &tp_new, sizeof tp_new);
    lookup(reg, "ggml_threadpool_free", &tp_free, sizeof tp_free);
    lookup(reg, "ggml_backend_cpu_set_threadpool", &tp_set, sizeof tp_set);
    const char *tp_env = getenv("GGML_BENCH_THREADPOOL");
    struct ggml_threadpool *tp = NULL;
    if (!(tp_env && !strcmp(tp_env, "0")) && tp_new && tp_free && tp_set) {
        struct ggml_threadpool_params tpp = ggml_threadpool_params_default(nth);
        tp = tp_new(&tpp);
        if (tp) tp_set(backend, tp);
    }

    float *wf = malloc(sizeof(float) * OUT * IN), *xf = malloc(sizeof(float) * 16 * IN);
    if (!wf || !xf || !types) {
        fprintf(stderr, "ggml-qmatvec: out of memory\n");
        free(wf), free(xf), free(types);
        return 1;
    }
    fill_uniform(wf, (size_t)OUT * IN, 1);
    fill_uniform(xf, (size_t)16 * IN, 2);

    double la[3] = {0};
    FILE *l = fopen("/proc/loadavg", "r");
    if (l) {
        if (fscanf(l, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = la[1] = la[2] = 0;
        fclose(l);
    }
    char cpu[256];
    const char *base = strrchr(loaded_from, '/');
    printf("{\"workload\": \"qmatvec\", \"peer\": \"ggml\", \"buffer\": \"%s\", ",
           ggml_backend_buft_name(wbuft));
    printf("\"env\": {\"ggml_threads\": %d, \"threadpool\": %s, \"cpu\": \"%s\", "
           "\"ggml_version\": \"%s\", \"ggml_commit\": \"%s\", \"cpu_backend\": \"%s\", "
           "\"features\": \"",
           nth, tp ? "true" : "false", cpu_name(cpu, sizeof cpu), ggml_version(), ggml_commit(),
           base ? base + 1 : loaded_from);
    print_features(stdout, reg);
    printf("\", \"extra_buffers\": [");
    print_extra_bufts(stdout, dev);
    printf("], \"loadavg\": [%.2f, %.2f, %.2f]}, \"out\": %d, \"in\": %d, \"results\": {", la[0],
           la[1], la[2], OUT, IN);
    static const struct {
        const char *key;
        enum ggml_type type;
    } kinds[] = {
        {"q4_0", GGML_TYPE_Q4_0}, {"q8_0", GGML_TYPE_Q8_0}, {"q4_k", GGML_TYPE_Q4_K},
        {"q6_k", GGML_TYPE_Q6_K}, {"f32", GGML_TYPE_F32},
    };
    int rc = 0, printed = 0;
    for (size_t t = 0; t < sizeof kinds / sizeof kinds[0] && rc == 0; t++) {
        if (!wanted(ntypes, types, kinds[t].key)) continue;
        if (printed++) printf(", ");
        rc = run_type(backend, dev, wbuft, kinds[t].key, kinds[t].type, wf, xf);
    }
    printf("}}\n");
    free(wf), free(xf), free(types);
    ggml_backend_free(backend);
    if (tp) tp_free(tp);
    return rc;
}
