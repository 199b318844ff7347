/* SPDX-License-Identifier: MIT */
/* bench_qmatvec.c - qmatvec (BENCHMARKS.md): y = fc_linear(x, W) with W of
 * 4096 x 4096 (out x in) in q4_0, q8_0, q4_k, q6_k, nf4 and f32, and x of 1
 * and 16 rows; GFLOP/s = 2 * 4096 * 4096 * rows / seconds per call. The
 * peer is ggml's CPU backend on the same shapes
 * (../shared/golden/ggml/perf_anchors.md: W and x uniform in [-1, 1), W
 * quantized without an importance matrix, the time includes quantizing x).
 * "dequant_sgemm_q4_0" is what a library without quantized kernels does:
 * dequantize the q4_0 weights to f32 (fc_to) on every call, then an f32
 * fc_linear. Arguments, if any, pick the weight types to run by name. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "fucina.h"

enum { OUT = 4096, IN = 4096 };

static int threads(void) {
    const char *s = getenv("FUCINA_BENCH_THREADS");
    return s && atoi(s) > 0 ? atoi(s) : 2;
}

typedef struct qcase {
    fc_ctx *ctx;
    fc_tensor *x, *w;
    bool dequant_first;
} qcase;

static void linear(void *p) {
    qcase *c = p;
    fc_scope_begin(c->ctx);
    fc_tensor *w = c->dequant_first ? fc_to(c->ctx, c->w, FC_F32) : c->w;
    fc_linear(c->ctx, c->x, w, NULL);
    fc_scope_end(c->ctx);
}

/* Uniform [-1, 1) from a fixed LCG, as ggml's harness fills its tensors. */
static void fill_uniform(float *p, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        p[i] = (float)((double)(seed >> 11) * 0x1p-53 * 2.0 - 1.0);
    }
}

static bool wanted(int argc, char **argv, const char *name) {
    if (argc < 1) return true;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], name)) return true;
    return false;
}

int bench_qmatvec(int argc, char **argv) {
    static const struct {
        const char *key;
        fc_dtype dtype;
        bool dequant_first;
    } kinds[] = {
        {"q4_0", FC_Q4_0, false},
        {"q8_0", FC_Q8_0, false},
        {"q4_k", FC_Q4_K, false},
        {"q6_k", FC_Q6_K, false},
        {"nf4", FC_NF4, false},
        {"f32", FC_F32, false},
        {"dequant_sgemm_q4_0", FC_Q4_0, true},
    };
    static const int64_t rows[2] = {1, 16};
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads(), .seed = 0});
    float *wf = malloc(sizeof(float) * OUT * IN), *xf = malloc(sizeof(float) * 16 * IN);
    void *wq = malloc(sizeof(float) * OUT * IN); /* the largest encoding: f32 */
    if (!ctx || !wf || !xf || !wq) {
        fprintf(stderr, "fucina-bench qmatvec: out of memory\n");
        free(wf), free(xf), free(wq), fc_ctx_free(ctx);
        return 1;
    }
    fill_uniform(wf, (size_t)OUT * IN, 1);
    fill_uniform(xf, (size_t)16 * IN, 2);
    printf("{\"workload\": \"qmatvec\", ");
    bench_json_env(stdout, threads());
    printf(", \"out\": %d, \"in\": %d, \"results\": {", OUT, IN);
    int printed = 0, rc = 0;
    for (size_t t = 0; t < sizeof kinds / sizeof kinds[0] && rc == 0; t++) {
        if (!wanted(argc, argv, kinds[t].key)) continue;
        const fc_dtype dt = kinds[t].dtype;
        const int64_t wshape[2] = {OUT, IN};
        fc_status st = FC_OK;
        if (dt == FC_F32) {
            memcpy(wq, wf, sizeof(float) * OUT * IN);
        } else {
            st = fc_quantize(dt, wf, wq, OUT, IN);
        }
        qcase c = {ctx, NULL, fc_tensor_from_data(ctx, dt, wshape, 2, wq), kinds[t].dequant_first};
        printf("%s\"%s\": {", printed++ ? ", " : "", kinds[t].key);
        for (int r = 0; r < 2 && st == FC_OK; r++) {
            c.x = fc_tensor_from_data(ctx, FC_F32, (const int64_t[]){rows[r], IN}, 2, xf);
            linear(&c); /* fail early and clearly if the op is refused */
            if (fc_ctx_status(ctx) != FC_OK) {
                fc_release(c.x);
                break;
            }
            const bench_result res = bench_measure(linear, &c);
            printf("%s\"%lld\": {", r ? ", " : "", (long long)rows[r]);
            bench_json_stat(stdout, "gflops", &res, 2.0 * OUT * IN * (double)rows[r] / 1e9);
            printf(", ");
            bench_json_raw(stdout, &res);
            printf("}");
            fc_release(c.x);
        }
        printf("}");
        fc_release(c.w);
        if (st != FC_OK || fc_ctx_status(ctx) != FC_OK) {
            fprintf(stderr, "fucina-bench qmatvec %s: %s\n", kinds[t].key,
                    st != FC_OK ? fc_strerror(st) : fc_ctx_error(ctx));
            rc = 1;
        }
    }
    printf("}}\n");
    free(wf), free(xf), free(wq);
    fc_ctx_free(ctx);
    return rc;
}
