/* SPDX-License-Identifier: MIT */
/* bench_qlora.c - qlora_step: one QLoRA training step over the llama_train
 * model (bench_llama.c) with its weights block-quantized, beside the f32
 * full fine-tune of the same model, in the same run.
 *
 * Variants, each in a child process of its own so that its peak resident
 * set (wait4's ru_maxrss) is its own:
 *   f32_full  every weight f32 and trained: the llama_train step;
 *   lora_f32  the model written as f32 GGUF, loaded mapped and frozen, a
 *             LoRA adapter (fc_lora_config_default: rank 8, alpha 16,
 *             dropout 0.05, every projection) trained over it: the same
 *             adapter and activations as below, with the base in f32;
 *   q4_k      the model written as q4_k GGUF (ffn_down, whose rows of 688
 *             no block of 256 divides, in f16), loaded mapped and frozen,
 *             a LoRA adapter (fc_lora_config_default: rank 8, alpha 16,
 *             dropout 0.05, every projection) trained over it;
 *   q8_0      the same with q8_0 (ffn_down f16 again: 688 = 21.5 x 32).
 * One step is llama_train's: zero_grad + forward + cross-entropy + backward
 * + AdamW (the same options) over the trained tensors, inside one scope, on
 * the same fixed batch. Reported per variant: tokens/s (B*T per step), the
 * peak RSS of the child (KiB as getrusage gives it, the file mapping's
 * touched pages included), the context allocator's high-water mark
 * (fc_ctx_stats.bytes_peak: every tensor, gradient, optimizer moment and
 * activation, not the mapping), the trained parameter count, and the base
 * file's size. The f32 weights are 4 x 2902272 bytes (11.6 MB); full
 * fine-tuning adds their gradients and two AdamW moments. At B=8, T=128
 * the activations (some 100 MB) dominate every variant, so the figure that
 * shows the base is never materialised in f32 is q4_k / q8_0 beside
 * lora_f32 (same adapter, same activations): their peak RSS is lower by
 * about the f32 weights less the quantized file, and their allocator peak
 * is lora_f32's (plus the transient dequantized panels of the backward,
 * at most 1 MiB of rows at a time), never that plus an f32 copy.
 *
 * The GGUF files are written by a first child (so the parent, whose
 * footprint every child starts from, stays small) into a temporary
 * folder removed at the end. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* wait4 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "bench_llama.h"
#include "fucina.h"
#include "fucina/llama.h"
#include "fucina/lora.h"

enum { NVAR = 4 };
static const char *const VARIANT[NVAR] = {"f32_full", "lora_f32", "q4_k", "q8_0"};
static const fc_dtype BASE_DTYPE[NVAR] = {FC_F32, FC_F32, FC_Q4_K, FC_Q8_0};

typedef struct qrun {
    fc_ctx *ctx;
    fc_llama *m;
    fc_lora *lora;
    fc_tensor **params;
    int np;
    fc_tensor *x, *y;
    fc_optim *opt;
    double loss;
} qrun;

/* what a child sends back through its pipe */
typedef struct qfig {
    int ok;
    bench_result r;
    int64_t trained, bytes_peak, file_bytes;
    double loss_first, loss_last;
} qfig;

static void qstep(void *arg) {
    qrun *q = arg;
    fc_ctx *ctx = q->ctx;
    fc_optim_zero_grad(q->opt);
    fc_scope_begin(ctx);
    fc_tensor *logits = fc_llama_forward(ctx, q->m, q->x);
    fc_tensor *loss = fc_cross_entropy(
        ctx, fc_view(ctx, logits, (const int64_t[]){BENCH_LLAMA_B * BENCH_LLAMA_T, 256}, 2), q->y,
        NULL);
    if (fc_backward(ctx, loss) == FC_OK) fc_optim_step(q->opt);
    if (fc_tensor_item(loss, &q->loss) != FC_OK) q->loss = NAN;
    fc_scope_end(ctx);
}

/* The variant's model and trained tensors; path NULL for f32_full. */
static fc_status qmake(qrun *q, const char *path, int threads) {
    q->ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .seed = 0});
    if (!q->ctx) return FC_ERR_OOM;
    fc_ctx *ctx = q->ctx;
    if (!path) {
        if (fc_llama_new(ctx, &bench_llama_train_config, &q->m) != FC_OK) return fc_ctx_status(ctx);
        q->np = (int)fc_llama_params(q->m, NULL, 0);
    } else {
        fc_lora_config lc = fc_lora_config_default();
        if (fc_llama_load(ctx, path, NULL, &q->m) != FC_OK ||
            fc_lora_new(ctx, q->m, &lc, &q->lora) != FC_OK)
            return fc_ctx_status(ctx);
        q->np = (int)fc_lora_params(q->lora, NULL, 0);
    }
    q->params = malloc(sizeof *q->params * (size_t)q->np);
    if (!q->params) return fc_ctx_fail(ctx, FC_ERR_OOM, "qlora_step: out of memory");
    if (path)
        fc_lora_params(q->lora, q->params, q->np);
    else
        fc_llama_params(q->m, q->params, q->np);
    if (bench_llama_train_batch(ctx, &q->x, &q->y) != FC_OK) return fc_ctx_status(ctx);
    q->opt = fc_optim_new(ctx, &bench_llama_train_adamw, q->params, q->np);
    return fc_ctx_status(ctx);
}

static void qfree(qrun *q) {
    fc_optim_free(q->opt);
    fc_release(q->x);
    fc_release(q->y);
    fc_lora_free(q->lora);
    fc_llama_free(q->m);
    fc_ctx_free(q->ctx);
    free(q->params);
}

/* In the child: 5 steps (the loss must fall), then the protocol. */
static qfig measure_variant(const char *path, int threads) {
    qfig f = {0};
    qrun q = {0};
    fc_status st = qmake(&q, path, threads);
    for (int i = 0; i < 5 && st == FC_OK; i++) {
        qstep(&q);
        if (i == 0) f.loss_first = q.loss;
        f.loss_last = q.loss;
        st = fc_ctx_status(q.ctx);
    }
    if (st == FC_OK) {
        f.r = bench_measure(qstep, &q);
        st = fc_ctx_status(q.ctx);
    }
    if (st == FC_OK) {
        fc_ctx_stats s;
        fc_ctx_get_stats(q.ctx, &s);
        f.bytes_peak = s.bytes_peak;
        for (int i = 0; i < q.np; i++)
            f.trained += fc_tensor_numel(q.params[i]);
        f.ok = isfinite(f.loss_last) && f.loss_last < f.loss_first;
        if (!f.ok)
            fprintf(stderr, "fucina-bench qlora_step: loss %g at step 1, %g at step 5\n",
                    f.loss_first, f.loss_last);
    } else {
        fprintf(stderr, "fucina-bench qlora_step: %s\n", fc_ctx_error(q.ctx));
    }
    qfree(&q);
    return f;
}

/* In the child: the llama_train model (seed 0) as q4_k and q8_0. */
static int write_bases(char paths[NVAR][64]) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 0});
    fc_llama *m = NULL;
    fc_status st = ctx ? fc_llama_new(ctx, &bench_llama_train_config, &m) : FC_ERR_OOM;
    for (int v = 1; v < NVAR && st == FC_OK; v++) {
        fc_llama_save_opts o = fc_llama_save_opts_default();
        o.dtype = BASE_DTYPE[v];
        o.fallback = FC_F16;
        st = fc_llama_save(ctx, m, paths[v], &o);
    }
    if (st != FC_OK) fprintf(stderr, "fucina-bench qlora_step: %s\n", ctx ? fc_ctx_error(ctx) : "");
    fc_llama_free(m);
    fc_ctx_free(ctx);
    return st == FC_OK ? 0 : 1;
}

/* Runs fn in a child; *maxrss_kib its peak RSS; the child's figures (if
 * any) into *f. False when the child failed. */
static bool in_child(int v, char paths[NVAR][64], int threads, qfig *f, long *maxrss_kib) {
    int fd[2];
    if (pipe(fd) != 0) return false;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        close(fd[0]);
        qfig got = {0};
        if (v < 0)
            got.ok = write_bases(paths) == 0;
        else
            got = measure_variant(v == 0 ? NULL : paths[v], threads);
        ssize_t w = write(fd[1], &got, sizeof got);
        _exit(w == (ssize_t)sizeof got && got.ok ? 0 : 1);
    }
    close(fd[1]);
    qfig got = {0};
    ssize_t n = read(fd[0], &got, sizeof got);
    close(fd[0]);
    int status = 0;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid) return false;
    *maxrss_kib = ru.ru_maxrss;
    *f = got;
    return n == (ssize_t)sizeof got && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int bench_qlora_step(int argc, char **argv) {
    (void)argc, (void)argv;
    int threads = bench_llama_threads();
    char dir[] = "/tmp/fucina-qlora-XXXXXX", paths[NVAR][64] = {"", "", "", ""};
    if (!mkdtemp(dir)) {
        fprintf(stderr, "fucina-bench qlora_step: cannot make a temporary folder\n");
        return 1;
    }
    for (int v = 1; v < NVAR; v++)
        snprintf(paths[v], sizeof paths[v], "%s/%s.gguf", dir, VARIANT[v]);
    qfig f[NVAR];
    long rss[NVAR] = {0}, rss_write = 0;
    bool ok = in_child(-1, paths, threads, &f[0], &rss_write);
    for (int v = 0; v < NVAR && ok; v++) {
        ok = in_child(v, paths, threads, &f[v], &rss[v]);
        if (v > 0) {
            FILE *fp = fopen(paths[v], "rb");
            if (fp && fseek(fp, 0, SEEK_END) == 0) f[v].file_bytes = ftell(fp);
            if (fp) fclose(fp);
        }
    }
    for (int v = 1; v < NVAR; v++)
        unlink(paths[v]);
    rmdir(dir);
    if (!ok) {
        fprintf(stderr, "fucina-bench qlora_step: a variant failed\n");
        return 1;
    }
    struct rusage self;
    getrusage(RUSAGE_SELF, &self);
    printf("{\"workload\": \"qlora_step\", ");
    bench_json_env(stdout, threads);
    printf(", \"model\": \"llama_train\", \"batch\": %d, \"seq\": %d, "
           "\"f32_weight_bytes\": %lld, \"parent_maxrss_kib\": %ld, \"results\": {",
           BENCH_LLAMA_B, BENCH_LLAMA_T, 4LL * BENCH_LLAMA_PARAMS, self.ru_maxrss);
    for (int v = 0; v < NVAR; v++) {
        printf("%s\"%s\": {\"trained_params\": %lld, ", v ? ", " : "", VARIANT[v],
               (long long)f[v].trained);
        if (v > 0) printf("\"base_file_bytes\": %lld, ", (long long)f[v].file_bytes);
        bench_json_stat(stdout, "tokens_per_s", &f[v].r, (double)BENCH_LLAMA_B * BENCH_LLAMA_T);
        printf(", ");
        bench_json_stat(stdout, "ms_per_step", &f[v].r, -1e3);
        printf(", \"peak_rss_kib\": %ld, \"ctx_bytes_peak\": %lld, \"loss_step1\": %.6f, "
               "\"loss_step5\": %.6f, \"other_cpu_cores\": %.3f}",
               rss[v], (long long)f[v].bytes_peak, f[v].loss_first, f[v].loss_last,
               f[v].r.other_cpu_cores);
    }
    printf("}, \"peak_rss_kib_lora_f32_minus_q4_k\": %ld, \"peak_rss_kib_lora_f32_minus_q8_0\": %ld"
           ", \"ctx_bytes_peak_q4_k_minus_lora_f32\": %lld}\n",
           rss[1] - rss[2], rss[1] - rss[3], (long long)(f[2].bytes_peak - f[1].bytes_peak));
    return 0;
}
