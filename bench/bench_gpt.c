/* SPDX-License-Identifier: MIT */
/* bench_gpt.c - gpt_train (peers/gpt_train.py): a decoder-only character
 * transformer, vocab 65, T=64, d_model 128, 4 pre-LayerNorm blocks of 4-head
 * causal self-attention (fused qkv Linear, explicit q @ k^T scaled by
 * 1/sqrt(32), masked_fill(-inf) above the diagonal, softmax, @ v, output
 * projection) and a 128-512-128 MLP with tanh-GELU; learned token and
 * position embeddings, final LayerNorm, untied head Linear(128, 65) without
 * bias; cross-entropy (mean) over all B*T positions; AdamW (lr 3e-4, betas
 * 0.9/0.999, eps 1e-8, weight decay 0.1) on every parameter. One fixed batch
 * of B=16 uniform random token sequences. One step = zero_grad + forward +
 * loss + backward + optimizer step, inside one scope so the steady state
 * reuses the context's pool.
 *
 * Initialisation has the peer's distributions (PyTorch's defaults), not its
 * values: Linear weights and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (what
 * kaiming_uniform(a=sqrt(5)) reduces to), token embedding N(0,1), position
 * embedding N(0, 0.02), LayerNorm weight 1 and bias 0. The parameter count
 * must be the peer's, 818176; the program fails when it is not.
 *
 * gpt_train_ckpt runs the same model plain and with every block under
 * fc_grad_checkpoint (recomputed in backward), in one invocation, with the
 * measurements alternated (plain, checkpointed, plain, checkpointed) so
 * both see the same machine; it reports each one's step time and peak
 * memory (fc_ctx_stats.bytes_peak, the high-water mark of what the
 * context, its pool included, holds from the allocator, over 3 steps of a
 * fresh context; and that peak above the resting state, what is still held
 * after the steps once the gradients are dropped and the pool trimmed:
 * parameters, AdamW moments, the fixed batch). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_split.h"
#include "fucina.h"

enum { V = 65, T = 64, D = 128, L = 4, H = 4, HD = D / H, FF = 512, B = 16 };
enum { PEER_PARAMS = 818176, LOSS_STEPS = 200 };

/* one block's parameters, in this order after the two embeddings */
enum { LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC1_W, FC1_B, FC2_W, FC2_B, NB };
/* the whole table: tok, pos, L blocks, ln_f weight and bias, head */
enum { P_TOK, P_POS, P_BLK, P_LNF_W = P_BLK + L * NB, P_LNF_B, P_HEAD, NP };

typedef struct gpt gpt;

/* a block as fc_grad_checkpoint's function of its input: the user pointer */
typedef struct block_call {
    gpt *m;
    int l;
} block_call;

struct gpt {
    fc_ctx *ctx;
    fc_tensor *p[NP];
    fc_tensor *mask;  /* (T,T) bool, true above the diagonal (a future position) */
    fc_tensor *x, *y; /* (B,T) i64 inputs, (B*T) i64 targets */
    fc_optim *opt;
    double loss;
    bool ckpt; /* every block under fc_grad_checkpoint */
    block_call calls[L];
};

/* U(-bound, bound) of shape from the context RNG */
static fc_tensor *uniform(fc_ctx *ctx, const int64_t *shape, int rank, double bound) {
    fc_tensor *u = fc_rand(ctx, FC_F32, shape, rank);
    return fc_mul_scalar(ctx, fc_add_scalar(ctx, u, -0.5), 2.0 * bound);
}

/* a Linear(in, out): weight (out, in) and, unless bias is NULL, bias (out) */
static void linear_init(fc_ctx *ctx, int64_t in, int64_t out, fc_tensor **w, fc_tensor **bias) {
    double bound = 1.0 / sqrt((double)in);
    *w = uniform(ctx, (const int64_t[]){out, in}, 2, bound);
    if (bias) *bias = uniform(ctx, (const int64_t[]){out}, 1, bound);
}

static void layer_norm_init(fc_ctx *ctx, fc_tensor **w, fc_tensor **bias) {
    *w = fc_full(ctx, FC_F32, (const int64_t[]){D}, 1, 1.0);
    *bias = fc_full(ctx, FC_F32, (const int64_t[]){D}, 1, 0.0);
}

static fc_status make(gpt *m, int threads) {
    m->ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .seed = 0});
    fc_ctx *ctx = m->ctx;
    fc_tensor **p = m->p;
    fc_scope_begin(ctx);
    p[P_TOK] = fc_randn(ctx, FC_F32, (const int64_t[]){V, D}, 2);
    p[P_POS] = fc_mul_scalar(ctx, fc_randn(ctx, FC_F32, (const int64_t[]){T, D}, 2), 0.02);
    for (int l = 0; l < L; l++) {
        fc_tensor **b = p + P_BLK + l * NB;
        layer_norm_init(ctx, &b[LN1_W], &b[LN1_B]);
        linear_init(ctx, D, 3 * D, &b[QKV_W], &b[QKV_B]);
        linear_init(ctx, D, D, &b[PROJ_W], &b[PROJ_B]);
        layer_norm_init(ctx, &b[LN2_W], &b[LN2_B]);
        linear_init(ctx, D, FF, &b[FC1_W], &b[FC1_B]);
        linear_init(ctx, FF, D, &b[FC2_W], &b[FC2_B]);
    }
    layer_norm_init(ctx, &p[P_LNF_W], &p[P_LNF_B]);
    linear_init(ctx, D, V, &p[P_HEAD], NULL);
    for (int i = 0; i < NP; i++)
        fc_keep(p[i]);
    fc_scope_end(ctx);
    for (int i = 0; i < NP; i++)
        fc_requires_grad(p[i], true);

    static unsigned char mask[T][T]; /* FC_BOOL is one byte, 0 or 1 */
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
            mask[i][j] = j > i;
    m->mask = fc_tensor_from_data(ctx, FC_BOOL, (const int64_t[]){T, T}, 2, mask);
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
    m->x = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){B, T}, 2, in);
    m->y = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){B * T}, 1, tgt);
    const fc_optim_opts adamw = {.kind = FC_OPTIM_ADAMW,
                                 .lr = 3e-4,
                                 .beta1 = 0.9,
                                 .beta2 = 0.999,
                                 .eps = 1e-8,
                                 .weight_decay = 0.1};
    m->opt = fc_optim_new(ctx, &adamw, m->p, NP);
    return fc_ctx_status(ctx);
}

/* qkv (B,T,3,H,hd) -> the which-th of q, k, v as (B,H,T,hd), a view */
static fc_tensor *head(fc_ctx *ctx, fc_tensor *qkv, int which) {
    fc_tensor *t = fc_squeeze(ctx, fc_narrow(ctx, qkv, 2, which, 1), 2);
    return fc_permute(ctx, t, (const int[]){0, 2, 1, 3});
}

/* x (B,T,D) -> (B,T,D): the peer's Block.attn */
static fc_tensor *attention(fc_ctx *ctx, fc_tensor *const *b, fc_tensor *mask, fc_tensor *x) {
    fc_tensor *qkv = fc_linear(ctx, x, b[QKV_W], b[QKV_B]); /* (B,T,3D) */
    qkv = fc_view(ctx, qkv, (const int64_t[]){B, T, 3, H, HD}, 5);
    fc_tensor *q = head(ctx, qkv, 0), *k = head(ctx, qkv, 1), *v = head(ctx, qkv, 2);
    fc_tensor *att = fc_matmul(ctx, q, fc_transpose(ctx, k, 2, 3)); /* (B,H,T,T) */
    att = fc_mul_scalar(ctx, att, 1.0 / sqrt((double)HD));
    att = fc_softmax(ctx, fc_masked_fill(ctx, att, mask, -INFINITY), -1);
    fc_tensor *y = fc_permute(ctx, fc_matmul(ctx, att, v), (const int[]){0, 2, 1, 3});
    y = fc_reshape(ctx, y, (const int64_t[]){B, T, D}, 3); /* (B,T,D) */
    return fc_linear(ctx, y, b[PROJ_W], b[PROJ_B]);
}

/* x (B,T,D) -> (B,T,D): the peer's Block.forward (pre-LayerNorm, eps 1e-5) */
static fc_tensor *block(fc_ctx *ctx, fc_tensor *const *b, fc_tensor *mask, fc_tensor *x) {
    x = fc_add(ctx, x, attention(ctx, b, mask, fc_layer_norm(ctx, x, b[LN1_W], b[LN1_B], 1e-5)));
    fc_tensor *h =
        fc_linear(ctx, fc_layer_norm(ctx, x, b[LN2_W], b[LN2_B], 1e-5), b[FC1_W], b[FC1_B]);
    return fc_add(ctx, x, fc_linear(ctx, fc_gelu(ctx, h, true), b[FC2_W], b[FC2_B]));
}

static fc_tensor *block_fn(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    const block_call *c = user;
    fc_scope_begin(ctx);
    fc_tensor *y = fc_keep(block(ctx, c->m->p + P_BLK + c->l * NB, c->m->mask, in[0]));
    fc_scope_end(ctx);
    return y;
}

/* mean cross-entropy of the model on the fixed batch */
static fc_tensor *forward(gpt *m) {
    fc_ctx *ctx = m->ctx;
    fc_tensor *x = fc_add(ctx, fc_embedding(ctx, m->p[P_TOK], m->x), m->p[P_POS]);
    for (int l = 0; l < L; l++) {
        m->calls[l] = (block_call){m, l};
        x = m->ckpt && x ? fc_grad_checkpoint(ctx, block_fn, &m->calls[l], &x, 1)
                         : block(ctx, m->p + P_BLK + l * NB, m->mask, x);
    }
    x = fc_layer_norm(ctx, x, m->p[P_LNF_W], m->p[P_LNF_B], 1e-5);
    fc_tensor *logits = fc_linear(ctx, x, m->p[P_HEAD], NULL); /* (B,T,V) */
    logits = fc_view(ctx, logits, (const int64_t[]){B * T, V}, 2);
    return fc_cross_entropy(ctx, logits, m->y, NULL);
}

static void step(void *arg) {
    gpt *m = arg;
    fc_ctx *ctx = m->ctx;
    fc_optim_zero_grad(m->opt);
    fc_scope_begin(ctx);
    fc_tensor *loss = forward(m);
    if (fc_backward(ctx, loss) == FC_OK) fc_optim_step(m->opt);
    if (fc_tensor_item(loss, &m->loss) != FC_OK) m->loss = NAN;
    fc_scope_end(ctx);
}

static void destroy(gpt *m) {
    fc_optim_free(m->opt);
    fc_ctx_free(m->ctx);
    *m = (gpt){0};
}

static int64_t count_params(const gpt *m) {
    int64_t n = 0;
    for (int i = 0; i < NP; i++)
        n += fc_tensor_numel(m->p[i]);
    return n;
}

/* the peer's FLOP estimate: 6 * (2-D weights other than the embeddings) *
 * tokens for the Linears' forward and backward, plus 3 times the forward
 * FLOPs of q @ k^T and att @ v */
static double approx_flop(const gpt *m) {
    int64_t n_mm = 0;
    for (int i = P_BLK; i < NP; i++)
        if (fc_tensor_rank(m->p[i]) == 2) n_mm += fc_tensor_numel(m->p[i]);
    double att = (double)L * 2 * (2.0 * B * H * T * T * HD);
    return 6.0 * (double)n_mm * B * T + 3 * att;
}

int bench_gpt_train(int argc, char **argv) {
    (void)argc, (void)argv;
    const char *ts = getenv("FUCINA_BENCH_THREADS");
    int threads = ts && atoi(ts) > 0 ? atoi(ts) : 2;
    gpt m = {0};
    if (make(&m, threads) != FC_OK) goto fail;
    int64_t nparams = count_params(&m);
    if (nparams != PEER_PARAMS) {
        fprintf(stderr, "fucina-bench gpt_train: %lld parameters, the peer has %d\n",
                (long long)nparams, PEER_PARAMS);
        destroy(&m);
        return 1;
    }
    double first = 0, last = 0;
    for (int i = 0; i < LOSS_STEPS; i++) {
        step(&m);
        if (i == 0) first = m.loss;
        last = m.loss;
    }
    if (fc_ctx_status(m.ctx) != FC_OK) goto fail;
    if (!(last < first)) {
        fprintf(stderr, "fucina-bench gpt_train: loss %g at step 1, %g at step %d: not training\n",
                first, last, LOSS_STEPS);
        destroy(&m);
        return 1;
    }
    destroy(&m);
    if (make(&m, threads) != FC_OK) goto fail;
    bench_result r = bench_measure(step, &m);
    if (fc_ctx_status(m.ctx) != FC_OK) goto fail;
    double flop = approx_flop(&m);
    printf("{\"workload\": \"gpt_train\", ");
    bench_json_env(stdout, threads);
    printf(", \"params\": %lld, \"head\": \"untied\", ", (long long)nparams);
    bench_json_stat(stdout, "ms_per_step", &r, -1e3);
    printf(", \"approx_matmul_gflop_per_step\": %.6g, \"approx_gflops_achieved\": %.6g", flop / 1e9,
           flop / r.median_s / 1e9);
    printf(", \"loss_step1\": %.6f, \"loss_step%d\": %.6f, ", first, LOSS_STEPS, last);
    bench_json_raw(stdout, &r);
    /* after the timed repeats, so the recording cannot touch them */
    if (bench_step_split(m.ctx, step, &m, 3, stdout) != FC_OK) goto fail;
    printf("}\n");
    destroy(&m);
    return 0;
fail:
    fprintf(stderr, "fucina-bench gpt_train: %s\n", fc_ctx_error(m.ctx));
    destroy(&m);
    return 1;
}

/* ---- gpt_train_ckpt ---------------------------------------------------------------- */

typedef struct mem_figures {
    long long peak, rest; /* bytes: high-water mark; parameters + AdamW moments */
    double loss;          /* after the steps, to show both variants train alike */
} mem_figures;

/* A fresh context, 3 steps (the first creates the AdamW moments). */
static fc_status memory_of(bool ckpt, int threads, mem_figures *f) {
    gpt m = {0};
    fc_status st = make(&m, threads);
    m.ckpt = ckpt;
    for (int i = 0; i < 3 && st == FC_OK; i++) {
        step(&m);
        st = fc_ctx_status(m.ctx);
    }
    fc_ctx_stats s;
    fc_optim_zero_grad(m.opt);
    fc_ctx_pool_trim(m.ctx); /* bytes_live counts the pool's parked buffers too */
    fc_ctx_get_stats(m.ctx, &s);
    *f = (mem_figures){s.bytes_peak, s.bytes_live, m.loss};
    if (st != FC_OK) fprintf(stderr, "fucina-bench gpt_train_ckpt: %s\n", fc_ctx_error(m.ctx));
    destroy(&m);
    return st;
}

int bench_gpt_train_ckpt(int argc, char **argv) {
    (void)argc, (void)argv;
    const char *ts = getenv("FUCINA_BENCH_THREADS");
    int threads = ts && atoi(ts) > 0 ? atoi(ts) : 2;
    mem_figures mem[2];
    for (int c = 0; c < 2; c++)
        if (memory_of(c, threads, &mem[c]) != FC_OK) return 1;
    if (memcmp(&mem[0].loss, &mem[1].loss, sizeof(double))) {
        fprintf(stderr, "fucina-bench gpt_train_ckpt: loss %.9g plain, %.9g checkpointed\n",
                mem[0].loss, mem[1].loss);
        return 1;
    }
    /* alternate the measurements so a change in the machine's load hits both */
    bench_result r[2][2];
    for (int round = 0; round < 2; round++)
        for (int c = 0; c < 2; c++) {
            gpt m = {0};
            if (make(&m, threads) != FC_OK) {
                fprintf(stderr, "fucina-bench gpt_train_ckpt: %s\n", fc_ctx_error(m.ctx));
                destroy(&m);
                return 1;
            }
            m.ckpt = c;
            r[c][round] = bench_measure(step, &m);
            fc_status st = fc_ctx_status(m.ctx);
            destroy(&m);
            if (st != FC_OK) return 1;
        }
    printf("{\"workload\": \"gpt_train_ckpt\", ");
    bench_json_env(stdout, threads);
    const char *name[2] = {"plain", "ckpt"};
    double med[2];
    for (int c = 0; c < 2; c++) {
        /* the better round: the other one met more interference */
        const bench_result *b = r[c][0].median_s <= r[c][1].median_s ? &r[c][0] : &r[c][1];
        med[c] = b->median_s;
        printf(", \"%s\": {", name[c]);
        bench_json_stat(stdout, "ms_per_step", b, -1e3);
        printf(", \"round_medians_ms\": [%.4f, %.4f], \"bytes_peak\": %lld, \"bytes_rest\": %lld, "
               "\"bytes_peak_above_rest\": %lld, \"other_cpu_cores\": %.3f}",
               r[c][0].median_s * 1e3, r[c][1].median_s * 1e3, mem[c].peak, mem[c].rest,
               mem[c].peak - mem[c].rest, b->other_cpu_cores);
    }
    printf(", \"step_time_ratio\": %.4f, \"peak_above_rest_ratio\": %.4f, \"bytes_peak_ratio\": "
           "%.4f, \"loss_step3\": %.9g}\n",
           med[1] / med[0],
           (double)(mem[1].peak - mem[1].rest) / (double)(mem[0].peak - mem[0].rest),
           (double)mem[1].peak / (double)mem[0].peak, mem[0].loss);
    return 0;
}
