/* train_llama.c - a Llama-architecture model trained from scratch with
 * fucina_models (fucina/llama.h), written out as a GGUF file that
 * examples/generate and llama.cpp load.
 *
 * The Llama counterpart of train_gpt.c: the model is fc_llama_new's (token
 * embedding, RMSNorm blocks of rotary grouped-query causal attention and a
 * SwiGLU MLP, an untied output head, no biases), so this file holds only
 * the training around it: the data, AdamW with warm-up and cosine decay,
 * gradient clipping, evaluation on a held-out split, samples, the metrics
 * CSV and loss picture, checkpoints and --resume, and the export.
 *
 * Tokens: byte-level by default (fc_tokenizer_new_bytes: byte i is token
 * i, then <s> and </s>), or the tokenizer of any GGUF file (--tokenizer
 * FILE.gguf: its "llama" or "gpt2" vocabulary; the model's vocabulary is
 * then that tokenizer's size). The text is tokenized once at the start.
 *
 * Export: at the end the model is written as GGUF with the tokenizer's
 * keys (fc_tokenizer_gguf_kvs), once per dtype of --export-dtype (a comma
 * list: f32, f16, bf16, q8_0, q4_k, ...), to <prefix>-<dtype>.gguf; a
 * weight whose rows a block dtype does not divide (the feed-forward width
 * of the default model, 688, for every block dtype) is written in
 * --export-fallback. To export a finished run in another dtype, run it
 * again with --resume and the same --steps: no step is taken, the files
 * are written. The final sample (--sample-prompt continued by the model)
 * is also written to <out>/sample.txt; `generate <file> --text PROMPT`
 * with the same settings prints the same text for an f32 export (the ctest
 * examples/train_llama_export checks that).
 *
 * Run: train_llama [text file] (default /usr/share/common-licenses/GPL-3).
 * The default sizes are the llama_train benchmark's (dim 256, 4 layers, 8
 * heads, 2 kv heads, feed-forward 688, T=128, B=8). Output goes to --out:
 * metrics.csv, loss.png (with gnuplot), ckpt.safetensors, sample.txt and
 * the exported models.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fucina.h>

#include "common/args.h"
#include "common/progress.h"
#include "common/token_data.h"
#include "fucina/llama.h"
#include "fucina/tokenizer.h"

// ----------------------------------------------------------------------------
// options

typedef struct options {
    const char *data, *out, *tokenizer, *export_prefix, *export_dtype, *export_fallback;
    const char *sample_prompt;
    int64_t dim, n_layer, n_head, n_kv_head, ff, block, batch;
    int64_t steps, stop_after, warmup, eval_every, sample_every, sample_len, ckpt_every;
    int64_t threads, seed;
    double minutes, lr, min_lr, weight_decay, clip, temperature, expect_drop, rope_base;
    bool resume;
} options;

static int parse_options(int argc, char **argv, options *o) {
    // clang-format off
    *o = (options){.data = "/usr/share/common-licenses/GPL-3", .out = "train_llama_out",
                   .export_dtype = "f32", .export_fallback = "f16", .sample_prompt = "The ",
                   .dim = 256, .n_layer = 4, .n_head = 8, .n_kv_head = 2, .ff = 688,
                   .block = 128, .batch = 8, .steps = 600, .warmup = 50, .eval_every = 100,
                   .sample_every = 300, .sample_len = 120, .ckpt_every = 200, .threads = 0,
                   .seed = 1337, .minutes = 3, .lr = 1e-3, .min_lr = 1e-4,
                   .weight_decay = 0.1, .clip = 1.0, .temperature = 0.8, .expect_drop = -1,
                   .rope_base = 10000};
    // clang-format on
    const ex_arg args[] = {
        {"data", EX_ARG_STRING, &o->data, "text file to train on (or the bare argument)"},
        {"out", EX_ARG_STRING, &o->out, "directory for metrics, checkpoint, sample and exports"},
        {"tokenizer", EX_ARG_STRING, &o->tokenizer,
         "GGUF file whose tokenizer to use (default: byte-level)"},
        {"dim", EX_ARG_INT, &o->dim, "embedding width"},
        {"layers", EX_ARG_INT, &o->n_layer, "transformer blocks"},
        {"heads", EX_ARG_INT, &o->n_head, "query heads (divide dim)"},
        {"kv-heads", EX_ARG_INT, &o->n_kv_head, "key/value heads (divide heads)"},
        {"ff", EX_ARG_INT, &o->ff, "SwiGLU hidden width"},
        {"rope-base", EX_ARG_DOUBLE, &o->rope_base, "rotary frequency base"},
        {"block", EX_ARG_INT, &o->block, "context length T (also the model's context)"},
        {"batch", EX_ARG_INT, &o->batch, "sequences per step B"},
        {"steps", EX_ARG_INT, &o->steps, "optimizer steps (the schedule's length)"},
        {"stop-after", EX_ARG_INT, &o->stop_after,
         "stop at this step, keeping the schedule of --steps (0: no stop)"},
        {"minutes", EX_ARG_DOUBLE, &o->minutes, "wall-clock budget; 0 for none"},
        {"lr", EX_ARG_DOUBLE, &o->lr, "peak learning rate"},
        {"min-lr", EX_ARG_DOUBLE, &o->min_lr, "learning rate at the end of the cosine"},
        {"warmup", EX_ARG_INT, &o->warmup, "linear warm-up steps"},
        {"weight-decay", EX_ARG_DOUBLE, &o->weight_decay, "AdamW decoupled weight decay"},
        {"clip", EX_ARG_DOUBLE, &o->clip, "clip the global gradient norm to this (0: off)"},
        {"eval-every", EX_ARG_INT, &o->eval_every, "validation loss period in steps"},
        {"sample-every", EX_ARG_INT, &o->sample_every, "sample period in steps (0: end only)"},
        {"sample-len", EX_ARG_INT, &o->sample_len, "tokens per sample"},
        {"sample-prompt", EX_ARG_STRING, &o->sample_prompt, "text the samples continue"},
        {"temperature", EX_ARG_DOUBLE, &o->temperature, "sampling temperature (0: greedy)"},
        {"ckpt-every", EX_ARG_INT, &o->ckpt_every, "checkpoint period in steps (0: end only)"},
        {"resume", EX_ARG_FLAG, &o->resume, "continue from <out>/ckpt.safetensors"},
        {"export", EX_ARG_STRING, &o->export_prefix,
         "exported files are <this>-<dtype>.gguf (default <out>/model)"},
        {"export-dtype", EX_ARG_STRING, &o->export_dtype,
         "dtypes of the exported 2-D weights, comma-separated (f32, f16, q8_0, q4_k, ...)"},
        {"export-fallback", EX_ARG_STRING, &o->export_fallback,
         "dtype of a weight whose rows the block dtype does not divide"},
        {"threads", EX_ARG_INT, &o->threads, "worker threads (0: every core)"},
        {"seed", EX_ARG_INT, &o->seed, "seed of the initialisation and the data order"},
        {"expect-drop", EX_ARG_DOUBLE, &o->expect_drop,
         "exit 1 unless the validation loss fell by this much (for tests)"},
    };
    ex_args_result r = ex_args_parse(argc, argv, args, (int)(sizeof args / sizeof *args), &o->data,
                                     "[options] [text file]");
    if (r != EX_ARGS_OK) return r == EX_ARGS_HELP ? 0 : 2;
    const char *bad = o->dim < 1 || o->n_head < 1 || o->dim % o->n_head || (o->dim / o->n_head) % 2
                          ? "--heads must divide --dim into an even head size"
                      : o->n_kv_head < 1 || o->n_head % o->n_kv_head
                          ? "--kv-heads must divide --heads"
                      : o->n_layer < 1 || o->block < 2 || o->ff < 1 || o->batch < 1
                          ? "--layers, --ff and --batch must be positive, --block at least 2"
                      : o->steps < 1 || o->warmup < 0 || o->eval_every < 1
                          ? "--steps and --eval-every must be positive, --warmup not negative"
                      : o->sample_every < 0 || o->sample_len < 0 || o->ckpt_every < 0 ||
                              o->stop_after < 0 || o->threads < 0 || o->minutes < 0
                          ? "periods, --threads and --minutes must not be negative"
                      : !(o->lr > 0) || o->min_lr < 0 || o->clip < 0 || o->weight_decay < 0
                          ? "--lr must be positive; --min-lr, --clip, --weight-decay not negative"
                      : !(o->rope_base > 0) ? "--rope-base must be positive"
                                            : NULL;
    if (bad) {
        fprintf(stderr, "train_llama: %s\n", bad);
        return 2;
    }
    return -1; /* go on */
}

/* --export-dtype "f32,q4_k" -> dtypes (at most cap); -1 after printing why */
static int parse_dtypes(const char *s, fc_dtype *out, int cap) {
    int n = 0;
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf) return -1;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (n == cap || fc_dtype_from_name(tok, &out[n]) != FC_OK) {
            fprintf(stderr, "train_llama: --export-dtype: '%s' is not a dtype (or too many)\n",
                    tok);
            return -1;
        }
        n++;
    }
    return n;
}

// ----------------------------------------------------------------------------
// the run

typedef struct run {
    options o;
    fc_tokenizer *tok;
    ex_tokens data;
    fc_ctx *ctx;
    fc_llama *model;
    int nparams;
    fc_tensor **params; /* borrowed from the model */
    const char **names; /* their GGUF names (borrowed), the checkpoint's keys */
    fc_optim *opt;
    fc_lr_schedule sched;
    fc_tensor *idx, *tgt; /* the step's batch, (B,T) and (B*T) i64, refilled each step */
    uint64_t data_rng, sample_rng;
    int64_t step, planned;
    FILE *csv;
    ex_progress bar;
    double train_last, val_first, val_last, val_best;
    int64_t val_step, best_step;
    double *step_ms;
    int64_t nsteps_run;
    fc_dtype export_dtypes[8];
    int n_export;
    fc_dtype fallback;
    char path[4][4096]; /* csv, png, ckpt, sample */
} run;

/* idx (B,T), targets (B*T) -> mean cross-entropy over all B*T positions */
static fc_tensor *loss_of(run *r, fc_tensor *idx, fc_tensor *targets) {
    fc_ctx *ctx = r->ctx;
    int64_t BT = fc_tensor_dim(idx, 0) * fc_tensor_dim(idx, 1);
    int64_t V = fc_llama_get_config(r->model)->vocab;
    /* (B,T,V); called inside a scope, which releases it */
    fc_tensor *logits = fc_llama_forward(ctx, r->model, idx);
    return fc_cross_entropy(ctx, fc_view(ctx, logits, (const int64_t[]){BT, V}, 2), targets, NULL);
}

/* mean loss over every validation window, B at a time; NAN on error */
static double eval_loss(run *r) {
    fc_ctx *ctx = r->ctx;
    const ex_tokens *d = &r->data;
    int64_t T = r->o.block, B = r->o.batch, nw = d->nval;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(2 * B * T));
    if (!idx) return NAN;
    int64_t *tgt = idx + B * T;
    double total = 0;
    fc_no_grad_begin(ctx);
    for (int64_t w0 = 0; w0 < nw; w0 += B) {
        int64_t rows = nw - w0 < B ? nw - w0 : B;
        ex_tokens_windows(d, d->val_off + w0, rows, T, idx, tgt);
        fc_scope_begin(ctx);
        fc_tensor *ti = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){rows, T}, 2, idx);
        fc_tensor *tt = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){rows * T}, 1, tgt);
        double l = NAN;
        fc_tensor_item(loss_of(r, ti, tt), &l);
        fc_scope_end(ctx);
        total += l * (double)rows;
    }
    fc_no_grad_end(ctx);
    free(idx);
    return fc_ctx_status(ctx) == FC_OK ? total / (double)nw : NAN;
}

/* The sample: --sample-prompt (encoded as generate --text encodes it,
 * BOS when the tokenizer asks) continued by up to --sample-len tokens
 * (fewer when the context cannot hold them), stopping at EOS, decoded
 * token by token. A malloc'd string, or NULL with the error in ctx. */
static char *sample_text(run *r, double temperature, uint64_t seed) {
    fc_ctx *ctx = r->ctx;
    const char *p = r->o.sample_prompt;
    int64_t np = 0, T = r->o.block;
    /* measuring: a NULL ctx, since the FC_ERR_DATA_LENGTH it answers would
     * stay in ctx as its first error */
    fc_status st =
        fc_tokenizer_encode(NULL, r->tok, p, strlen(p), FC_TOKENIZE_ADD_SPECIAL, NULL, 0, &np);
    if (st != FC_OK && st != FC_ERR_DATA_LENGTH) {
        fc_ctx_fail(ctx, st, "train_llama: cannot encode --sample-prompt");
        return NULL;
    }
    if (np < 1 || np >= T) {
        fc_ctx_fail(ctx, FC_ERR_INVALID_ARG,
                    "train_llama: --sample-prompt is %lld tokens; the context holds %lld",
                    (long long)np, (long long)T);
        return NULL;
    }
    int64_t n_new = r->o.sample_len < T - np ? r->o.sample_len : T - np;
    int32_t *ids = malloc(sizeof *ids * (size_t)(np + n_new + 1));
    int64_t got = 0;
    if (!ids) {
        fc_ctx_fail(ctx, FC_ERR_OOM, "train_llama: out of memory for a sample");
        return NULL;
    }
    if (fc_tokenizer_encode(ctx, r->tok, p, strlen(p), FC_TOKENIZE_ADD_SPECIAL, ids, np, &np))
        goto fail;
    fc_llama_sample_opts so = {.temperature = temperature, .seed = seed};
    if (n_new > 0 && fc_llama_generate(ctx, r->model, ids, np, n_new, fc_tokenizer_eos(r->tok), &so,
                                       ids + np, &got))
        goto fail;
    /* the text's size first (NULL ctx again), then the text */
    size_t len = strlen(p), cap = len + 1;
    for (int64_t i = 0; i < got; i++) {
        size_t piece = 0;
        fc_tokenizer_decode(NULL, r->tok, ids + np + i, 1, FC_DECODE_KEEP_PREFIX, NULL, 0, &piece);
        cap += piece;
    }
    char *text = malloc(cap);
    if (!text) {
        fc_ctx_fail(ctx, FC_ERR_OOM, "train_llama: out of memory for a sample");
        goto fail;
    }
    memcpy(text, p, len);
    for (int64_t i = 0; i < got; i++) {
        size_t piece = 0;
        /* after the prompt every token keeps its leading space */
        if (fc_tokenizer_decode(ctx, r->tok, ids + np + i, 1, FC_DECODE_KEEP_PREFIX, text + len,
                                cap - len, &piece)) {
            free(text);
            goto fail;
        }
        len += piece;
    }
    text[len] = '\0';
    free(ids);
    return text;
fail:
    free(ids);
    return NULL;
}

static bool print_sample(run *r) {
    char *s = sample_text(r, r->o.temperature, ex_rand_u64(&r->sample_rng));
    if (!s) return false;
    ex_progress_note(&r->bar, "---- sample at step %lld (temperature %g) ----\n%s\n----",
                     (long long)r->step, r->o.temperature, s);
    free(s);
    return true;
}

// ----------------------------------------------------------------------------
// checkpoints: the parameters (by their GGUF names), the AdamW state and the
// context RNG (fucina/checkpoint.h), plus this trainer's position, its data
// PRNG, and the sizes and token stream a resume must match.

enum { V_STEP, V_DATA_RNG, V_TOKENS, V_VOCAB, V_BLOCK, V_DIM, V_L, V_H, V_KV, V_FF, NVALUES };
static const char *const META_KEYS[NVALUES] = {"train_llama.step",        "train_llama.data_rng",
                                               "train_llama.tokens_hash", "train_llama.vocab",
                                               "train_llama.block",       "train_llama.dim",
                                               "train_llama.n_layer",     "train_llama.n_head",
                                               "train_llama.n_kv_head",   "train_llama.ff"};

static void meta_values(const run *r, uint64_t *v) {
    const fc_llama_config *c = fc_llama_get_config(r->model);
    const uint64_t x[NVALUES] = {
        (uint64_t)r->step,       r->data_rng,        r->data.hash,          (uint64_t)c->vocab,
        (uint64_t)c->context,    (uint64_t)c->dim,   (uint64_t)c->n_layers, (uint64_t)c->n_heads,
        (uint64_t)c->n_kv_heads, (uint64_t)c->ff_dim};
    memcpy(v, x, sizeof x);
}

static fc_status save_checkpoint(run *r) {
    uint64_t v[NVALUES];
    char text[NVALUES][24];
    const char *vals[NVALUES];
    meta_values(r, v);
    for (int i = 0; i < NVALUES; i++) {
        snprintf(text[i], sizeof text[i], "%llu", (unsigned long long)v[i]);
        vals[i] = text[i];
    }
    fc_status st = fc_checkpoint_save(r->ctx, r->path[2], r->names, r->params, r->nparams, r->opt,
                                      META_KEYS, vals, NVALUES);
    if (st != FC_OK)
        fprintf(stderr, "train_llama: saving %s: %s\n", r->path[2], fc_ctx_error(r->ctx));
    return st;
}

static fc_status load_checkpoint(run *r) {
    const char *path = r->path[2];
    char msg[256] = "";
    fc_st_file *f = NULL;
    fc_status st =
        fc_safetensors_open(path, &(fc_io_opts){.errbuf = msg, .errcap = sizeof msg}, &f);
    if (st != FC_OK) {
        fprintf(stderr, "train_llama: cannot resume: %s\n", msg);
        return st;
    }
    uint64_t got[NVALUES], want[NVALUES];
    meta_values(r, want);
    for (int i = 0; i < NVALUES && st == FC_OK; i++) {
        const char *s = fc_safetensors_meta_get(f, META_KEYS[i]);
        char *end = NULL;
        got[i] = s ? strtoull(s, &end, 10) : 0;
        if (!s || !*s || *end) {
            fprintf(stderr, "train_llama: %s has no valid %s: not a train_llama checkpoint\n", path,
                    META_KEYS[i]);
            st = FC_ERR_FORMAT;
        } else if (i >= V_TOKENS && got[i] != want[i]) {
            fprintf(stderr, "train_llama: %s was made with %s = %llu, this run has %llu\n", path,
                    META_KEYS[i], (unsigned long long)got[i], (unsigned long long)want[i]);
            st = FC_ERR_FORMAT;
        }
    }
    fc_safetensors_close(f);
    if (st != FC_OK) return st;
    st = fc_checkpoint_load(r->ctx, path, r->names, r->params, r->nparams, r->opt);
    if (st != FC_OK) {
        fprintf(stderr, "train_llama: loading %s: %s\n", path, fc_ctx_error(r->ctx));
        return st;
    }
    r->step = (int64_t)got[V_STEP];
    r->data_rng = got[V_DATA_RNG];
    return FC_OK;
}

/* Every --export-dtype file, with the tokenizer's keys. */
static bool export_models(run *r) {
    const fc_gguf_kv *kvs = NULL;
    int64_t nkv = 0;
    if (fc_tokenizer_gguf_kvs(r->tok, &kvs, &nkv) != FC_OK) return false;
    char prefix[4000];
    snprintf(prefix, sizeof prefix, "%s", r->o.export_prefix ? r->o.export_prefix : "");
    if (!r->o.export_prefix) snprintf(prefix, sizeof prefix, "%s/model", r->o.out);
    for (int i = 0; i < r->n_export; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s-%s.gguf", prefix, fc_dtype_name(r->export_dtypes[i]));
        fc_llama_save_opts so = fc_llama_save_opts_default();
        so.dtype = r->export_dtypes[i];
        so.fallback = r->fallback;
        so.kvs = kvs;
        so.n_kvs = nkv;
        if (fc_llama_save(r->ctx, r->model, path, &so) != FC_OK) {
            fprintf(stderr, "train_llama: exporting %s: %s\n", path, fc_ctx_error(r->ctx));
            return false;
        }
        printf("exported %s\n", path);
    }
    return true;
}

// ----------------------------------------------------------------------------
// training (the loop of train_gpt.c)

static volatile sig_atomic_t g_stop;
static void on_sigint(int sig) {
    g_stop = 1;
    signal(sig, SIG_DFL); /* a second Ctrl-C ends the program at once */
}

static double train_step(run *r, double *grad_norm) {
    fc_ctx *ctx = r->ctx;
    int64_t B = r->o.batch, T = r->o.block;
    double loss = NAN;
    *grad_norm = NAN;
    fc_scope_begin(ctx);
    int64_t *idx = fc_tensor_data_mut(r->idx), *tgt = fc_tensor_data_mut(r->tgt);
    if (idx && tgt) ex_tokens_batch(&r->data, B, T, &r->data_rng, idx, tgt);
    fc_tensor *l = loss_of(r, r->idx, r->tgt);
    if (l && fc_backward(ctx, l) == FC_OK &&
        (r->o.clip == 0 ||
         fc_clip_grad_norm(ctx, r->params, r->nparams, r->o.clip, grad_norm) == FC_OK) &&
        fc_optim_set_lr(r->opt, fc_lr_at(&r->sched, r->step)) == FC_OK &&
        fc_optim_step(r->opt) == FC_OK)
        fc_tensor_item(l, &loss);
    fc_optim_zero_grad(r->opt);
    fc_scope_end(ctx);
    return fc_ctx_status(ctx) == FC_OK ? loss : NAN;
}

static bool evaluate(run *r) {
    double v = eval_loss(r);
    if (isnan(v)) return false;
    if (isnan(r->val_first)) r->val_first = v;
    r->val_last = v;
    r->val_step = r->step;
    if (!(v >= r->val_best)) {
        r->val_best = v;
        r->best_step = r->step;
    }
    ex_progress_note(&r->bar, "step %lld: val loss %.4f", (long long)r->step, v);
    return true;
}

static void csv_row(run *r, double lr, double loss, double val, double gnorm, double tps) {
    if (!r->csv) return;
    fprintf(r->csv, "%lld,%.6g,", (long long)r->step, lr);
    if (!isnan(loss)) fprintf(r->csv, "%.6f", loss);
    fputc(',', r->csv);
    if (!isnan(val)) fprintf(r->csv, "%.6f", val);
    fputc(',', r->csv);
    if (!isnan(gnorm)) fprintf(r->csv, "%.4f", gnorm);
    fprintf(r->csv, ",%.1f,%.2f\n", tps, ex_progress_elapsed(&r->bar));
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* With a time budget that cannot hold --steps, the cosine ends at the step
 * it can hold (as train_gpt.c does; 10% kept for evaluations and samples). */
static void fit_schedule(run *r) {
    enum { N = 20 };
    double ms[N];
    memcpy(ms, r->step_ms + r->nsteps_run - N, sizeof ms);
    qsort(ms, N, sizeof *ms, cmp_double);
    double left = r->o.minutes * 60 - ex_progress_elapsed(&r->bar);
    int64_t fits = r->step + (int64_t)(0.9 * left / (ms[N / 2] * 1e-3));
    if (fits >= r->planned) return;
    if (fits < r->step + 1) fits = r->step + 1;
    if (r->sched.warmup_steps > fits / 4) r->sched.warmup_steps = fits / 4;
    r->planned = r->sched.total_steps = r->bar.total_steps = fits;
    ex_progress_note(&r->bar,
                     "the %g min budget holds about %lld steps at %.0f ms/step: the "
                     "schedule now ends there (--minutes 0 keeps --steps %lld)",
                     r->o.minutes, (long long)fits, ms[N / 2], (long long)r->o.steps);
}

static bool train(run *r) {
    const options *o = &r->o;
    double ema_ms = 0, tps = 0, budget = o->minutes * 60;
    while (r->step < r->planned && !(o->stop_after > 0 && r->step >= o->stop_after) && !g_stop) {
        if (budget > 0 && ex_progress_elapsed(&r->bar) >= budget) {
            ex_progress_note(&r->bar, "time budget of %g min reached at step %lld of %lld",
                             o->minutes, (long long)r->step, (long long)r->planned);
            break;
        }
        double lr = fc_lr_at(&r->sched, r->step), gnorm;
        double t0 = ex_now();
        double loss = train_step(r, &gnorm);
        double ms = 1e3 * (ex_now() - t0);
        if (isnan(loss)) {
            ex_progress_finish(&r->bar);
            fprintf(stderr, "train_llama: step %lld failed: %s\n", (long long)r->step + 1,
                    fc_ctx_status(r->ctx) != FC_OK ? fc_ctx_error(r->ctx) : "the loss is NaN");
            return false;
        }
        r->step++;
        r->train_last = loss;
        r->step_ms[r->nsteps_run++] = ms;
        if (budget > 0 && r->nsteps_run == 20) fit_schedule(r);
        ema_ms = ema_ms == 0 ? ms : 0.9 * ema_ms + 0.1 * ms;
        tps = (double)(o->batch * o->block) / (ema_ms * 1e-3);
        ex_progress_update(&r->bar, r->step, loss, tps);
        double val = NAN;
        if (r->step % o->eval_every == 0 || r->step == r->planned) {
            if (!evaluate(r)) break;
            val = r->val_last;
        }
        csv_row(r, lr, loss, val, gnorm, tps);
        if (o->sample_every > 0 && o->sample_len > 0 && r->step % o->sample_every == 0 &&
            !print_sample(r))
            break;
        if (o->ckpt_every > 0 && r->step % o->ckpt_every == 0 && save_checkpoint(r) != FC_OK)
            return false;
    }
    if (fc_ctx_status(r->ctx) != FC_OK) {
        ex_progress_finish(&r->bar);
        fprintf(stderr, "train_llama: %s\n", fc_ctx_error(r->ctx));
        return false;
    }
    return true;
}

/* The final sample (also into sample.txt), the last evaluation, the
 * checkpoint, the exports, the picture and the summary; the exit code. */
static int finish(run *r) {
    const options *o = &r->o;
    ex_progress_finish(&r->bar);
    if (r->val_step != r->step) {
        if (!evaluate(r)) {
            fprintf(stderr, "train_llama: evaluation failed: %s\n", fc_ctx_error(r->ctx));
            return 1;
        }
        csv_row(r, fc_lr_at(&r->sched, r->step), NAN, r->val_last, NAN, 0);
    }
    if (o->sample_len > 0) {
        /* a seed of its own, so the file does not depend on how many
         * samples the run printed before (a resumed run prints fewer) */
        char *s = sample_text(r, o->temperature, (uint64_t)o->seed);
        FILE *f = s ? fopen(r->path[3], "wb") : NULL;
        if (!s || !f || fputs(s, f) < 0) {
            fprintf(stderr, "train_llama: the final sample: %s\n",
                    s ? r->path[3] : fc_ctx_error(r->ctx));
            if (f) fclose(f);
            free(s);
            return 1;
        }
        fclose(f);
        if (!(o->sample_every > 0 && r->step % o->sample_every == 0)) /* not just printed */
            printf("---- sample at step %lld (temperature %g) ----\n%s\n----\n", (long long)r->step,
                   o->temperature, s);
        free(s);
    }
    if (save_checkpoint(r) != FC_OK || !export_models(r)) return 1;
    if (r->csv) fclose(r->csv);
    r->csv = NULL;
    const ex_curve curves[] = {{3, "train loss", false}, {4, "validation loss", true}};
    bool plotted = ex_plot_png(r->path[0], r->path[1], "train_llama: cross-entropy per token",
                               "step", "loss (nats)", 1, curves, 2);
    double med = 0, best = 0;
    if (r->nsteps_run > 0) {
        qsort(r->step_ms, (size_t)r->nsteps_run, sizeof *r->step_ms, cmp_double);
        med = r->step_ms[r->nsteps_run / 2];
        best = r->step_ms[0];
    }
    printf("done: step %lld of %lld; this run: %lld steps in %.1f s, step time median %.2f ms "
           "(min %.2f), %.0f tokens/s\n",
           (long long)r->step, (long long)r->planned, (long long)r->nsteps_run,
           ex_progress_elapsed(&r->bar), med, best,
           med > 0 ? (double)(o->batch * o->block) / (med * 1e-3) : 0.0);
    printf("val loss: %.4f -> %.4f at step %lld (best %.4f at step %lld)\n", r->val_first,
           r->val_last, (long long)r->val_step, r->val_best, (long long)r->best_step);
    printf("final: step %lld train_loss %.9g val_loss %.9g\n", (long long)r->step, r->train_last,
           r->val_last);
    printf("wrote %s, %s%s%s\n", r->path[0], r->path[2], plotted ? ", " : "",
           plotted ? r->path[1] : "");
    if (o->expect_drop >= 0 && !(r->val_last <= r->val_first - o->expect_drop)) {
        fprintf(stderr,
                "train_llama: expected the validation loss to fall by %g, it went from "
                "%.4f to %.4f\n",
                o->expect_drop, r->val_first, r->val_last);
        return 1;
    }
    return 0;
}

/* the tokenizer of --tokenizer, or the byte-level one */
static bool open_tokenizer(run *r) {
    fc_ctx *ctx = r->ctx;
    fc_status st;
    if (!r->o.tokenizer) {
        st = fc_tokenizer_new_bytes(ctx, NULL, &r->tok);
    } else {
        fc_gguf_file *g = NULL;
        st = fc_gguf_open(r->o.tokenizer, NULL, &g);
        if (st != FC_OK) {
            fprintf(stderr, "train_llama: cannot read %s (%s)\n", r->o.tokenizer, fc_strerror(st));
            return false;
        }
        st = fc_tokenizer_from_gguf(ctx, g, NULL, &r->tok);
        fc_gguf_close(g);
    }
    if (st != FC_OK) fprintf(stderr, "train_llama: the tokenizer: %s\n", fc_ctx_error(ctx));
    return st == FC_OK;
}

static bool setup(run *r) {
    const options *o = &r->o;
    int64_t B = o->batch, T = o->block;
    r->ctx = fc_ctx_new(&(fc_ctx_opts){.threads = (int)o->threads, .seed = (uint64_t)o->seed});
    if (!r->ctx) {
        fprintf(stderr, "train_llama: cannot create a context\n");
        return false;
    }
    r->n_export = parse_dtypes(o->export_dtype, r->export_dtypes, 8);
    if (r->n_export < 0) return false;
    if (fc_dtype_from_name(o->export_fallback, &r->fallback) != FC_OK) {
        fprintf(stderr, "train_llama: --export-fallback: '%s' is not a dtype\n",
                o->export_fallback);
        return false;
    }
    if (!open_tokenizer(r) || !ex_tokens_load("train_llama", o->data, r->tok, &r->data))
        return false;
    if (!ex_tokens_split(&r->data, T)) {
        fprintf(stderr,
                "train_llama: %s has %lld tokens, too few for a context of %lld (both splits "
                "need whole windows)\n",
                o->data, (long long)r->data.n, (long long)T);
        return false;
    }
    fc_llama_config cfg = {.vocab = fc_tokenizer_vocab_size(r->tok),
                           .dim = o->dim,
                           .n_heads = o->n_head,
                           .n_kv_heads = o->n_kv_head,
                           .n_layers = o->n_layer,
                           .ff_dim = o->ff,
                           .context = T,
                           .rope_base = o->rope_base};
    if (fc_llama_new(r->ctx, &cfg, &r->model) != FC_OK) {
        fprintf(stderr, "train_llama: building the model: %s\n", fc_ctx_error(r->ctx));
        return false;
    }
    r->nparams = (int)fc_llama_params(r->model, NULL, 0);
    r->params = calloc((size_t)r->nparams, sizeof *r->params);
    r->names = calloc((size_t)r->nparams, sizeof *r->names);
    r->step_ms = malloc(sizeof(double) * (size_t)o->steps);
    if (!r->params || !r->names || !r->step_ms) {
        fprintf(stderr, "train_llama: out of memory\n");
        return false;
    }
    fc_llama_params(r->model, r->params, r->nparams);
    for (int64_t i = 0, k = 0; i < fc_llama_tensor_count(r->model); i++)
        if (k < r->nparams && fc_llama_tensor_at(r->model, i) == r->params[k])
            r->names[k++] = fc_llama_tensor_name(r->model, i);
    fc_optim_opts oo = {.kind = FC_OPTIM_ADAMW, .lr = o->lr, .weight_decay = o->weight_decay};
    r->opt = fc_optim_new(r->ctx, &oo, r->params, r->nparams);
    r->idx = fc_empty(r->ctx, FC_I64, (const int64_t[]){B, T}, 2);
    r->tgt = fc_empty(r->ctx, FC_I64, (const int64_t[]){B * T}, 1);
    if (fc_ctx_status(r->ctx) != FC_OK || !r->opt) {
        fprintf(stderr, "train_llama: building the optimizer failed: %s\n", fc_ctx_error(r->ctx));
        return false;
    }
    r->sched = (fc_lr_schedule){.kind = FC_LR_COSINE,
                                .base_lr = o->lr,
                                .warmup_steps = o->warmup,
                                .total_steps = o->steps,
                                .min_lr = o->min_lr};
    r->planned = o->steps;
    r->data_rng = (uint64_t)o->seed ^ 0xD1B54A32D192ED03ull;
    r->sample_rng = (uint64_t)o->seed ^ 0x8CB92BA72F3D8DD7ull;
    r->train_last = r->val_first = r->val_last = r->val_best = NAN;
    r->val_step = r->best_step = -1;
    if (!ex_mkdir_p(o->out)) return false;
    const char *files[4] = {"metrics.csv", "loss.png", "ckpt.safetensors", "sample.txt"};
    for (int i = 0; i < 4; i++) {
        if (snprintf(r->path[i], sizeof r->path[i], "%s/%s", o->out, files[i]) >=
            (int)sizeof r->path[i]) {
            fprintf(stderr, "train_llama: --out is too long\n");
            return false;
        }
    }
    if (o->resume) {
        if (load_checkpoint(r) != FC_OK) return false;
        printf("resumed from %s at step %lld\n", r->path[2], (long long)r->step);
    }
    r->csv = ex_csv_open(r->path[0], "step,lr,train_loss,val_loss,grad_norm,tokens_per_s,elapsed_s",
                         o->resume);
    if (!r->csv) return false;
    int64_t numel = 0;
    for (int i = 0; i < r->nparams; i++)
        numel += fc_tensor_numel(r->params[i]);
    printf("train_llama: %s: %lld bytes, %lld tokens (%s tokenizer, vocabulary %lld); train %lld, "
           "validation %lld tokens (every 10th block of %lld, %lld windows)\n",
           o->data, (long long)r->data.bytes, (long long)r->data.n,
           o->tokenizer ? o->tokenizer : "byte-level", (long long)cfg.vocab,
           (long long)r->data.train_tokens, (long long)r->data.val_tokens, (long long)r->data.seg,
           (long long)r->data.nval);
    printf("model: %lld parameters (dim %lld, %lld layers, %lld heads, %lld kv heads, ff %lld, "
           "T=%lld); batch %lld; AdamW lr %g -> %g (warm-up %lld), %lld steps, budget %g min, "
           "%d threads\n",
           (long long)numel, (long long)o->dim, (long long)o->n_layer, (long long)o->n_head,
           (long long)o->n_kv_head, (long long)o->ff, (long long)T, (long long)B, o->lr, o->min_lr,
           (long long)o->warmup, (long long)o->steps, o->minutes, fc_ctx_threads(r->ctx));
    return true;
}

static void teardown(run *r) {
    if (r->csv) fclose(r->csv);
    fc_optim_free(r->opt);
    fc_release(r->idx);
    fc_release(r->tgt);
    fc_llama_free(r->model);
    fc_tokenizer_free(r->tok);
    fc_ctx_free(r->ctx);
    ex_tokens_free(&r->data);
    free(r->params);
    free(r->names);
    free(r->step_ms);
}

int main(int argc, char **argv) {
    static run r; /* large (paths); zero-initialised */
    int rc = parse_options(argc, argv, &r.o);
    if (rc >= 0) return rc;
    signal(SIGINT, on_sigint);
    rc = 1;
    if (setup(&r)) {
        int64_t every = r.o.eval_every / 5 > 0 ? r.o.eval_every / 5 : 1;
        ex_progress_start(&r.bar, r.o.steps, r.o.minutes * 60, "tok", (int)every);
        if (!evaluate(&r)) {
            fprintf(stderr, "train_llama: evaluation failed: %s\n", fc_ctx_error(r.ctx));
        } else {
            csv_row(&r, fc_lr_at(&r.sched, r.step), NAN, r.val_last, NAN, 0);
            if (train(&r)) rc = finish(&r);
        }
    }
    teardown(&r);
    return rc;
}
