/* SPDX-License-Identifier: MIT */
/* bench_llama.c - llama_train (peers/llama_train.py) and llama_gen.
 *
 * llama_train: the peer's Llama-architecture decoder as fucina_models
 * builds it (fc_llama_new): vocab 256, T=128, dim 256, 4 layers, 8 query
 * and 2 key/value heads (head dim 32), RMSNorm (eps 1e-5) before attention
 * and MLP and at the end, rotary embedding on q and k (theta 10000), SwiGLU
 * MLP w2(silu(w1 x) * w3 x) of hidden 688, no biases, untied head;
 * cross-entropy (mean) over all B*T positions; AdamW (lr 3e-4, betas
 * 0.9/0.95, eps 1e-8, weight decay 0.1) on every parameter; one fixed
 * batch of B=8 uniform random sequences. One step = zero_grad + forward +
 * loss + backward + optimizer step, inside one scope. Initialisation has
 * the peer's distributions: N(0, 0.02) for every matrix and embedding,
 * norm weights 1. The parameter count must be the peer's, 2902272.
 *
 * One difference, which costs the same: the peer rotates NeoX's pairs
 * (i, i + hd/2), fucina_models the "llama" architecture's adjacent pairs
 * (2i, 2i+1), the pairing GGUF llama files need. The losses are therefore
 * close (both start at ln 256) but not equal.
 *
 * llama_gen [FILE.gguf ...]: batch-1 greedy decoding with the KV cache
 * (fc_llama_generate: a one-token prompt, then context - 1 new tokens),
 * tokens/s. Without files, the llama_train model (same seed) is written
 * as q4_k and q8_0 (each with the f16 fallback for ffn_down, whose rows of
 * 688 no block divides) to a temporary folder and those are timed; with
 * files (bench/llama_gen_vs_llamacpp.sh passes the ones it also gives
 * llama.cpp), those. Weights are mapped and stay quantized. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "bench_split.h"
#include "bench_llama.h"
#include "fucina.h"
#include "fucina/llama.h"

enum { V = 256, T = 128, D = 256, L = 4, H = 8, KV = 2, FF = 688, B = 8 };
enum { PEER_PARAMS = 2902272, LOSS_STEPS = 100 };

const fc_llama_config bench_llama_train_config = {.vocab = V,
                                                  .dim = D,
                                                  .n_heads = H,
                                                  .n_kv_heads = KV,
                                                  .n_layers = L,
                                                  .ff_dim = FF,
                                                  .context = T};
_Static_assert((int)B == (int)BENCH_LLAMA_B && (int)T == (int)BENCH_LLAMA_T &&
                   (int)PEER_PARAMS == (int)BENCH_LLAMA_PARAMS,
               "bench_llama.h's sizes are this file's");

const fc_optim_opts bench_llama_train_adamw = {.kind = FC_OPTIM_ADAMW,
                                               .lr = 3e-4,
                                               .beta1 = 0.9,
                                               .beta2 = 0.95,
                                               .eps = 1e-8,
                                               .weight_decay = 0.1};

fc_status bench_llama_train_batch(fc_ctx *ctx, fc_tensor **x, fc_tensor **y) {
    /* the peer's seq: [B, T+1] uniform in [0, V); inputs seq[:, :T], targets seq[:, 1:] */
    static int64_t seq[B][T + 1], in[B][T], tgt[B][T];
    uint64_t s = 1;
    for (int i = 0; i < B; i++)
        for (int t = 0; t <= T; t++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            seq[i][t] = (int64_t)((s >> 33) % V);
        }
    for (int i = 0; i < B; i++)
        for (int t = 0; t < T; t++)
            in[i][t] = seq[i][t], tgt[i][t] = seq[i][t + 1];
    *x = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){B, T}, 2, in);
    *y = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){B * T}, 1, tgt);
    return fc_ctx_status(ctx);
}

typedef struct llama_run {
    fc_ctx *ctx;
    fc_llama *m;
    fc_tensor *params[2 + L * 9 + 1];
    int np;
    fc_tensor *x, *y; /* (B,T) i64 inputs, (B*T) i64 targets */
    fc_optim *opt;
    double loss;
} llama_run;

static void destroy(llama_run *r) {
    fc_optim_free(r->opt);
    fc_llama_free(r->m);
    fc_ctx_free(r->ctx);
    *r = (llama_run){0};
}

static fc_status make(llama_run *r, int threads) {
    r->ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .seed = 0});
    if (!r->ctx) return FC_ERR_OOM;
    fc_ctx *ctx = r->ctx;
    if (fc_llama_new(ctx, &bench_llama_train_config, &r->m) != FC_OK) return fc_ctx_status(ctx);
    int64_t n = fc_llama_params(r->m, NULL, 0);
    if (n > (int64_t)(sizeof r->params / sizeof r->params[0]))
        return fc_ctx_fail(ctx, FC_ERR_INVALID_ARG, "llama_train: %lld parameters", (long long)n);
    r->np = (int)fc_llama_params(r->m, r->params, n);
    bench_llama_train_batch(ctx, &r->x, &r->y);
    r->opt = fc_optim_new(ctx, &bench_llama_train_adamw, r->params, r->np);
    return fc_ctx_status(ctx);
}

static void step(void *arg) {
    llama_run *r = arg;
    fc_ctx *ctx = r->ctx;
    fc_optim_zero_grad(r->opt);
    fc_scope_begin(ctx);
    fc_tensor *logits = fc_llama_forward(ctx, r->m, r->x); /* (B,T,V) */
    fc_tensor *loss =
        fc_cross_entropy(ctx, fc_view(ctx, logits, (const int64_t[]){B * T, V}, 2), r->y, NULL);
    if (fc_backward(ctx, loss) == FC_OK) fc_optim_step(r->opt);
    if (fc_tensor_item(loss, &r->loss) != FC_OK) r->loss = NAN;
    fc_scope_end(ctx);
}

int bench_llama_threads(void) {
    const char *ts = getenv("FUCINA_BENCH_THREADS");
    return ts && atoi(ts) > 0 ? atoi(ts) : 2;
}

/* the peer's FLOP estimate: 6 * (2-D weights other than the embedding) *
 * tokens, plus 3 times the forward FLOPs of q @ k^T and att @ v */
static double approx_flop(const llama_run *r) {
    int64_t n_mm = 0;
    for (int i = 0; i < r->np; i++)
        if (fc_tensor_rank(r->params[i]) == 2) n_mm += fc_tensor_numel(r->params[i]);
    n_mm -= (int64_t)V * D; /* token_embd is a lookup */
    double att = (double)L * 2 * (2.0 * B * H * T * T * (D / H));
    return 6.0 * (double)n_mm * B * T + 3 * att;
}

int bench_llama_train(int argc, char **argv) {
    (void)argc, (void)argv;
    int threads = bench_llama_threads();
    llama_run r = {0};
    if (make(&r, threads) != FC_OK) goto fail;
    int64_t nparams = 0;
    for (int i = 0; i < r.np; i++)
        nparams += fc_tensor_numel(r.params[i]);
    if (nparams != PEER_PARAMS) {
        fprintf(stderr, "fucina-bench llama_train: %lld parameters, the peer has %d\n",
                (long long)nparams, PEER_PARAMS);
        destroy(&r);
        return 1;
    }
    double first = 0, last = 0;
    for (int i = 0; i < LOSS_STEPS; i++) {
        step(&r);
        if (i == 0) first = r.loss;
        last = r.loss;
    }
    if (fc_ctx_status(r.ctx) != FC_OK) goto fail;
    if (!(last < first)) {
        fprintf(stderr, "fucina-bench llama_train: loss %g at step 1, %g at step %d\n", first, last,
                LOSS_STEPS);
        destroy(&r);
        return 1;
    }
    destroy(&r);
    if (make(&r, threads) != FC_OK) goto fail;
    bench_result m = bench_measure(step, &r);
    if (fc_ctx_status(r.ctx) != FC_OK) goto fail;
    double flop = approx_flop(&r);
    printf("{\"workload\": \"llama_train\", ");
    bench_json_env(stdout, threads);
    printf(", \"params\": %lld, \"rope\": \"adjacent pairs (peer: rotate-half)\", ",
           (long long)nparams);
    bench_json_stat(stdout, "ms_per_step", &m, -1e3);
    printf(", ");
    bench_json_stat(stdout, "tokens_per_s", &m, (double)B * T);
    printf(", \"approx_matmul_gflop_per_step\": %.6g, \"approx_gflops_achieved\": %.6g", flop / 1e9,
           flop / m.median_s / 1e9);
    printf(", \"loss_step1\": %.6f, \"loss_step%d\": %.6f, ", first, LOSS_STEPS, last);
    bench_json_raw(stdout, &m);
    /* after the timed repeats, so the recording cannot touch them */
    if (bench_step_split(r.ctx, step, &r, 3, stdout) != FC_OK) goto fail;
    printf("}\n");
    destroy(&r);
    return 0;
fail:
    fprintf(stderr, "fucina-bench llama_train: %s\n", fc_ctx_error(r.ctx));
    destroy(&r);
    return 1;
}

/* ---- llama_gen ------------------------------------------------------------------- */

typedef struct gen_run {
    fc_ctx *ctx;
    fc_llama *m;
    int32_t *out;
    int64_t n_new, got;
} gen_run;

static void gen_once(void *arg) {
    gen_run *g = arg;
    const int32_t prompt[1] = {1};
    fc_llama_generate(g->ctx, g->m, prompt, 1, g->n_new, -1, NULL, g->out, &g->got);
}

/* Times greedy decoding from path; prints "name": {...} */
static fc_status time_file(fc_ctx *ctx, const char *name, const char *path, bool comma) {
    gen_run g = {.ctx = ctx};
    fc_status st = fc_llama_load(ctx, path, NULL, &g.m);
    if (st != FC_OK) return st;
    g.n_new = fc_llama_get_config(g.m)->context - 1;
    g.out = malloc(sizeof *g.out * (size_t)g.n_new);
    if (!g.out) {
        fc_llama_free(g.m);
        return fc_ctx_fail(ctx, FC_ERR_OOM, "llama_gen: out of memory");
    }
    gen_once(&g);
    st = fc_ctx_status(ctx);
    if (st == FC_OK && g.got != g.n_new)
        st = fc_ctx_fail(ctx, FC_ERR_INVALID_ARG, "llama_gen: %lld of %lld tokens",
                         (long long)g.got, (long long)g.n_new);
    if (st == FC_OK) {
        bench_result r = bench_measure(gen_once, &g);
        st = fc_ctx_status(ctx);
        /* the one-token prompt costs one decode step: count it */
        printf("%s\"%s\": {\"file\": \"%s\", \"new_tokens\": %lld, ", comma ? ", " : "", name, path,
               (long long)g.n_new);
        bench_json_stat(stdout, "tokens_per_s", &r, (double)(g.n_new + 1));
        printf(", \"other_cpu_cores\": %.3f}", r.other_cpu_cores);
    }
    free(g.out);
    fc_llama_free(g.m);
    return st;
}

int bench_llama_gen(int argc, char **argv) {
    int threads = bench_llama_threads();
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .seed = 0});
    if (!ctx) return 1;
    char dir[] = "/tmp/fucina-llama-gen-XXXXXX", paths[2][64] = {"", ""};
    const char *names[2] = {"q4_k", "q8_0"};
    const fc_dtype dts[2] = {FC_Q4_K, FC_Q8_0};
    bool made = argc == 0;
    fc_status st = FC_OK;
    if (made) {
        fc_llama *m = NULL;
        if (!mkdtemp(dir)) {
            fprintf(stderr, "fucina-bench llama_gen: cannot make a temporary folder\n");
            fc_ctx_free(ctx);
            return 1;
        }
        st = fc_llama_new(ctx, &bench_llama_train_config, &m);
        for (int i = 0; i < 2 && st == FC_OK; i++) {
            snprintf(paths[i], sizeof paths[i], "%s/%s.gguf", dir, names[i]);
            fc_llama_save_opts o = fc_llama_save_opts_default();
            o.dtype = dts[i];
            o.fallback = FC_F16;
            st = fc_llama_save(ctx, m, paths[i], &o);
        }
        fc_llama_free(m);
    }
    if (st == FC_OK) {
        printf("{\"workload\": \"llama_gen\", ");
        bench_json_env(stdout, threads);
        printf(", \"batch\": 1, \"results\": {");
        int n = made ? 2 : argc;
        for (int i = 0; i < n && st == FC_OK; i++) {
            const char *path = made ? paths[i] : argv[i];
            const char *base = strrchr(path, '/');
            st = time_file(ctx, made ? names[i] : base ? base + 1 : path, path, i > 0);
        }
        printf("}}\n");
    }
    if (st != FC_OK) fprintf(stderr, "fucina-bench llama_gen: %s\n", fc_ctx_error(ctx));
    if (made) {
        for (int i = 0; i < 2; i++)
            if (paths[i][0]) unlink(paths[i]);
        rmdir(dir);
    }
    fc_ctx_free(ctx);
    return st == FC_OK ? 0 : 1;
}
