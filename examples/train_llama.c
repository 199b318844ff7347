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
#include "common/llama_trainer.h"
#include "common/progress.h"
#include "common/token_data.h"
#include "fucina/llama.h"
#include "fucina/tokenizer.h"

// ----------------------------------------------------------------------------
// options

typedef struct options {
    const char *data, *out, *tokenizer, *export_prefix, *export_dtype, *export_fallback;
    int64_t dim, n_layer, n_head, n_kv_head, ff, threads;
    double expect_drop, rope_base;
    bool resume;
    ex_trainer_opts loop; /* the shared loop's (llama_trainer.h) */
} options;

static int parse_options(int argc, char **argv, options *o) {
    // clang-format off
    *o = (options){.data = "/usr/share/common-licenses/GPL-3", .out = "train_llama_out",
                   .export_dtype = "f32", .export_fallback = "f16",
                   .dim = 256, .n_layer = 4, .n_head = 8, .n_kv_head = 2, .ff = 688,
                   .threads = 0, .expect_drop = -1, .rope_base = 10000,
                   .loop = {.prog = "train_llama", .sample_prompt = "The ", .block = 128,
                            .batch = 8, .steps = 600, .warmup = 50, .eval_every = 100,
                            .sample_every = 300, .sample_len = 120, .ckpt_every = 200,
                            .seed = 1337, .minutes = 3, .lr = 1e-3, .min_lr = 1e-4,
                            .weight_decay = 0.1, .clip = 1.0, .temperature = 0.8}};
    // clang-format on
    const ex_arg own[] = {
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
        {"block", EX_ARG_INT, &o->loop.block, "context length T (also the model's context)"},
        {"resume", EX_ARG_FLAG, &o->resume, "continue from <out>/ckpt.safetensors"},
        {"export", EX_ARG_STRING, &o->export_prefix,
         "exported files are <this>-<dtype>.gguf (default <out>/model)"},
        {"export-dtype", EX_ARG_STRING, &o->export_dtype,
         "dtypes of the exported 2-D weights, comma-separated (f32, f16, q8_0, q4_k, ...)"},
        {"export-fallback", EX_ARG_STRING, &o->export_fallback,
         "dtype of a weight whose rows the block dtype does not divide"},
        {"threads", EX_ARG_INT, &o->threads, "worker threads (0: every core)"},
        {"seed", EX_ARG_INT, &o->loop.seed, "seed of the initialisation and the data order"},
        {"expect-drop", EX_ARG_DOUBLE, &o->expect_drop,
         "exit 1 unless the validation loss fell by this much (for tests)"},
    };
    enum { NOWN = sizeof own / sizeof *own };
    ex_arg args[NOWN + EX_TRAINER_NARGS];
    memcpy(args, own, sizeof own);
    int nargs = NOWN + ex_trainer_args(&o->loop, args + NOWN);
    ex_args_result r = ex_args_parse(argc, argv, args, nargs, &o->data, "[options] [text file]");
    if (r != EX_ARGS_OK) return r == EX_ARGS_HELP ? 0 : 2;
    const char *bad = o->dim < 1 || o->n_head < 1 || o->dim % o->n_head || (o->dim / o->n_head) % 2
                          ? "--heads must divide --dim into an even head size"
                      : o->n_kv_head < 1 || o->n_head % o->n_kv_head
                          ? "--kv-heads must divide --heads"
                      : o->n_layer < 1 || o->loop.block < 2 || o->ff < 1
                          ? "--layers and --ff must be positive, --block at least 2"
                      : o->threads < 0      ? "--threads must not be negative"
                      : !(o->rope_base > 0) ? "--rope-base must be positive"
                                            : ex_trainer_opts_check(&o->loop);
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
// the run: the model and its export here, the loop in common/llama_trainer.c

typedef struct run {
    options o;
    fc_tokenizer *tok;
    ex_tokens data;
    fc_ctx *ctx;
    fc_llama *model;
    fc_tensor **params; /* borrowed from the model */
    const char **names; /* their GGUF names (borrowed), the checkpoint's keys */
    ex_trainer t;
    fc_dtype export_dtypes[8];
    int n_export;
    fc_dtype fallback;
    char sample_path[4096];
} run;

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

static volatile sig_atomic_t g_stop;
static void on_sigint(int sig) {
    g_stop = 1;
    signal(sig, SIG_DFL); /* a second Ctrl-C ends the program at once */
}

/* The last evaluation, the final sample (also into sample.txt), the
 * checkpoint, the exports, the picture and the summary; the exit code. */
static int finish(run *r) {
    ex_trainer *t = &r->t;
    if (!ex_trainer_finish(t, r->sample_path) || !export_models(r)) return 1;
    ex_trainer_report(t, "train_llama: cross-entropy per token");
    if (r->o.expect_drop >= 0 && !(t->val_last <= t->val_first - r->o.expect_drop)) {
        fprintf(stderr,
                "train_llama: expected the validation loss to fall by %g, it went from "
                "%.4f to %.4f\n",
                r->o.expect_drop, t->val_first, t->val_last);
        return 1;
    }
    return 0;
}

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

/* "<out>/<file>" into dst; false when --out is too long */
static bool out_path(char *dst, size_t cap, const char *out, const char *file) {
    if (snprintf(dst, cap, "%s/%s", out, file) < (int)cap) return true;
    fprintf(stderr, "train_llama: --out is too long\n");
    return false;
}

static bool setup(run *r) {
    const options *o = &r->o;
    int64_t B = o->loop.batch, T = o->loop.block;
    r->ctx = fc_ctx_new(&(fc_ctx_opts){.threads = (int)o->threads, .seed = (uint64_t)o->loop.seed});
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
    int np = (int)fc_llama_params(r->model, NULL, 0);
    r->params = calloc((size_t)np, sizeof *r->params);
    r->names = calloc((size_t)np, sizeof *r->names);
    if (!r->params || !r->names) {
        fprintf(stderr, "train_llama: out of memory\n");
        return false;
    }
    fc_llama_params(r->model, r->params, np);
    for (int64_t i = 0, k = 0; i < fc_llama_tensor_count(r->model); i++)
        if (k < np && fc_llama_tensor_at(r->model, i) == r->params[k])
            r->names[k++] = fc_llama_tensor_name(r->model, i);
    ex_trainer *t = &r->t;
    t->o = o->loop;
    t->o.block = T;
    t->o.batch = B;
    t->ctx = r->ctx;
    t->model = r->model;
    t->tok = r->tok;
    t->data = &r->data;
    t->nparams = np;
    t->params = r->params;
    t->names = r->names;
    /* a resume must match the model's sizes (the checkpoint's keys of before) */
    static const char *const keys[] = {
        "train_llama.vocab",  "train_llama.block",     "train_llama.dim", "train_llama.n_layer",
        "train_llama.n_head", "train_llama.n_kv_head", "train_llama.ff"};
    const uint64_t vals[] = {(uint64_t)cfg.vocab,   (uint64_t)cfg.context,
                             (uint64_t)cfg.dim,     (uint64_t)cfg.n_layers,
                             (uint64_t)cfg.n_heads, (uint64_t)cfg.n_kv_heads,
                             (uint64_t)cfg.ff_dim};
    t->nmatch = (int)(sizeof vals / sizeof *vals);
    for (int i = 0; i < t->nmatch; i++) {
        t->match_keys[i] = keys[i];
        t->match_vals[i] = vals[i];
    }
    if (!out_path(t->csv_path, sizeof t->csv_path, o->out, "metrics.csv") ||
        !out_path(t->png_path, sizeof t->png_path, o->out, "loss.png") ||
        !out_path(t->ckpt_path, sizeof t->ckpt_path, o->out, "ckpt.safetensors") ||
        !out_path(r->sample_path, sizeof r->sample_path, o->out, "sample.txt") ||
        !ex_trainer_init(t, o->out, o->resume))
        return false;
    int64_t numel = 0;
    for (int i = 0; i < np; i++)
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
           (long long)o->n_kv_head, (long long)o->ff, (long long)T, (long long)B, o->loop.lr,
           o->loop.min_lr, (long long)o->loop.warmup, (long long)o->loop.steps, o->loop.minutes,
           fc_ctx_threads(r->ctx));
    return true;
}

static void teardown(run *r) {
    ex_trainer_free(&r->t);
    fc_llama_free(r->model);
    fc_tokenizer_free(r->tok);
    fc_ctx_free(r->ctx);
    ex_tokens_free(&r->data);
    free(r->params);
    free(r->names);
}

int main(int argc, char **argv) {
    static run r; /* large (paths); zero-initialised */
    int rc = parse_options(argc, argv, &r.o);
    if (rc >= 0) return rc;
    signal(SIGINT, on_sigint);
    rc = 1;
    if (setup(&r) && ex_trainer_train(&r.t, &g_stop)) rc = finish(&r);
    teardown(&r);
    return rc;
}
