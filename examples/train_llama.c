/* SPDX-License-Identifier: MIT */
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
 * list: f32, f16, bf16, q8_0, q4_k, ...), to <prefix>-<dtype>.gguf. A
 * block dtype needs every 2-D weight's rows to be a multiple of its block
 * (32 for q8_0, 256 for q4_k; the feed-forward width of the default
 * model, 688, is neither): an export that cannot be written in the dtype
 * asked is an error, said before training (exit 2), unless
 * --export-fallback names the dtype such weights are written in instead
 * (a note then says how many fell back). To export a finished run in
 * another dtype, run it again with --resume and the same schedule
 * options: no step is taken, no row is added to metrics.csv, the files
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

enum { EX_MAX_EXPORTS = 8 };

/* the dtype names an export may use, after a message */
static void print_dtypes(void) {
    for (int d = 0; d < FC_DTYPE_COUNT; d++)
        if (fc_dtype_is_float((fc_dtype)d) || fc_dtype_is_block((fc_dtype)d))
            fprintf(stderr, " %s", fc_dtype_name((fc_dtype)d));
    fprintf(stderr, "\n");
}

/* --export-dtype "f32,q4_k" -> dtypes (at most cap); -1 after printing why */
static int parse_dtypes(const char *s, fc_dtype *out, int cap) {
    int n = 0;
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf) return -1;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (n == cap) {
            fprintf(stderr, "train_llama: --export-dtype: more than %d dtypes\n", cap);
            return -1;
        }
        if (fc_dtype_from_name(tok, &out[n]) != FC_OK ||
            !(fc_dtype_is_float(out[n]) || fc_dtype_is_block(out[n]))) {
            fprintf(stderr, "train_llama: --export-dtype: unknown dtype '%s'; valid:", tok);
            print_dtypes();
            return -1;
        }
        n++;
    }
    return n;
}

/* --export-fallback: a dtype, or none (FC_DTYPE_COUNT); false after printing why */
static bool parse_fallback(const char *s, fc_dtype *out) {
    *out = FC_DTYPE_COUNT;
    if (strcmp(s, "none") == 0) return true;
    if (fc_dtype_from_name(s, out) == FC_OK && (fc_dtype_is_float(*out) || fc_dtype_is_block(*out)))
        return true;
    fprintf(stderr, "train_llama: --export-fallback: unknown dtype '%s'; valid: none", s);
    print_dtypes();
    return false;
}

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
                   .export_dtype = "f32", .export_fallback = "none",
                   .dim = 256, .n_layer = 4, .n_head = 8, .n_kv_head = 2, .ff = 688,
                   .threads = 0, .expect_drop = -1, .rope_base = 10000,
                   .loop = {.prog = "train_llama", .sample_prompt = "The ", .block = 128,
                            .batch = 8, .steps = 600, .warmup = 50, .eval_every = 100,
                            .sample_every = 300, .sample_len = 120, .ckpt_every = 200,
                            .seed = 1337, .minutes = 3, .lr = 1e-3, .min_lr = 1e-4,
                            .weight_decay = 0.1, .clip = 1.0, .temperature = 0.8}};
    // clang-format on
    const ex_arg own[] = {
        {"data", EX_ARG_STRING, &o->data, "text file to train on (or the bare argument)", EX_ANY},
        {"out", EX_ARG_STRING, &o->out, "directory for metrics, checkpoint, sample and exports",
         EX_ANY},
        {"tokenizer", EX_ARG_STRING, &o->tokenizer,
         "GGUF file whose tokenizer to use (default: byte-level)", EX_ANY},
        {"dim", EX_ARG_INT, &o->dim, "embedding width", EX_MIN(1)},
        {"layers", EX_ARG_INT, &o->n_layer, "transformer blocks", EX_MIN(1)},
        {"heads", EX_ARG_INT, &o->n_head, "query heads (divide dim)", EX_MIN(1)},
        {"kv-heads", EX_ARG_INT, &o->n_kv_head, "key/value heads (divide heads)", EX_MIN(1)},
        {"ff", EX_ARG_INT, &o->ff, "SwiGLU hidden width", EX_MIN(1)},
        {"rope-base", EX_ARG_DOUBLE, &o->rope_base, "rotary frequency base", EX_POS},
        {"block", EX_ARG_INT, &o->loop.block, "context length T (also the model's context)",
         EX_MIN(2)},
        {"resume", EX_ARG_FLAG, &o->resume,
         "continue from <out>/ckpt.safetensors with the same --steps, --warmup, --lr, --min-lr "
         "(another schedule is refused: exit 2; a complete run only writes the exports)",
         EX_ANY},
        {"export", EX_ARG_STRING, &o->export_prefix,
         "exported files are <this>-<dtype>.gguf (default <out>/model)", EX_ANY},
        {"export-dtype", EX_ARG_STRING, &o->export_dtype,
         "dtypes of the exported 2-D weights, comma-separated (f32, f16, q8_0, q4_k, ...)", EX_ANY},
        {"export-fallback", EX_ARG_STRING, &o->export_fallback,
         "dtype of a weight whose rows the block dtype does not divide (none: such an "
         "export is an error)",
         EX_ANY},
        {"threads", EX_ARG_INT, &o->threads, "worker threads (0: every core)", EX_MIN(0)},
        {"seed", EX_ARG_INT, &o->loop.seed, "seed of the initialisation and the data order",
         EX_ANY},
        {"expect-drop", EX_ARG_DOUBLE, &o->expect_drop,
         "exit 1 unless the validation loss fell by this much (for tests)", EX_ANY},
    };
    enum { NOWN = sizeof own / sizeof *own };
    ex_arg args[NOWN + EX_TRAINER_NARGS];
    memcpy(args, own, sizeof own);
    int nargs = NOWN + ex_trainer_args(&o->loop, args + NOWN);
    ex_args_result r = ex_args_parse(argc, argv, args, nargs, &o->data, "[options] [text file]");
    if (r != EX_ARGS_OK) return r == EX_ARGS_HELP ? 0 : 2;
    fc_dtype dts[EX_MAX_EXPORTS], fb;
    if (parse_dtypes(o->export_dtype, dts, EX_MAX_EXPORTS) < 0 ||
        !parse_fallback(o->export_fallback, &fb))
        return 2;
    /* each value's own range is the parser's (args.h); what is left relates two */
    if (o->dim % o->n_head || (o->dim / o->n_head) % 2) {
        fprintf(stderr, "train_llama: --heads %lld must divide --dim %lld into an even head size\n",
                (long long)o->n_head, (long long)o->dim);
        return 2;
    }
    if (o->n_head % o->n_kv_head) {
        fprintf(stderr, "train_llama: --kv-heads %lld must divide --heads %lld\n",
                (long long)o->n_kv_head, (long long)o->n_head);
        return 2;
    }
    return -1; /* go on */
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
    fc_dtype export_dtypes[EX_MAX_EXPORTS];
    int n_export;
    fc_dtype fallback;
    char sample_path[4096];
    bool bad_args; /* setup failed on the options, not on the machine: exit 2 */
} run;

/* true when t's rows (its last dim) hold whole blocks of dt */
static bool rows_fit(fc_tensor *t, fc_dtype dt) {
    return !fc_dtype_is_block(dt) ||
           fc_tensor_shape(t)[fc_tensor_rank(t) - 1] % fc_dtype_block_elems(dt) == 0;
}

/* Before training: every --export-dtype must be writable, for each 2-D
 * weight in that dtype or in --export-fallback, so that a run never ends
 * with an export it cannot write, nor writes a q4_k file holding no q4_k
 * tensor without saying so. False after printing why. */
static bool check_exports(run *r) {
    int64_t n = fc_llama_tensor_count(r->model);
    for (int i = 0; i < r->n_export; i++) {
        fc_dtype dt = r->export_dtypes[i];
        int64_t mats = 0, misfits = 0;
        const char *first = NULL;
        fc_tensor *first_t = NULL;
        for (int64_t k = 0; k < n; k++) {
            fc_tensor *t = fc_llama_tensor_at(r->model, k);
            if (fc_tensor_rank(t) != 2) continue; /* the norms stay f32 */
            mats++;
            if (rows_fit(t, dt)) continue;
            if (!misfits++) {
                first = fc_llama_tensor_name(r->model, k);
                first_t = t;
            }
            if (r->fallback != FC_DTYPE_COUNT && !rows_fit(t, r->fallback)) {
                fprintf(stderr,
                        "train_llama: --export-fallback %s cannot hold %s either (rows of %lld, "
                        "blocks of %lld)\n",
                        fc_dtype_name(r->fallback), fc_llama_tensor_name(r->model, k),
                        (long long)fc_tensor_shape(t)[1],
                        (long long)fc_dtype_block_elems(r->fallback));
                return false;
            }
        }
        if (!misfits) continue;
        if (r->fallback == FC_DTYPE_COUNT) {
            fprintf(stderr,
                    "train_llama: --export-dtype %s cannot be written: %lld of the %lld 2-D "
                    "weights (the first %s, rows of %lld) are not made of whole %s blocks of "
                    "%lld; choose sizes the block divides, another dtype, or --export-fallback "
                    "f16 to write those weights in f16\n",
                    fc_dtype_name(dt), (long long)misfits, (long long)mats, first,
                    (long long)fc_tensor_shape(first_t)[1], fc_dtype_name(dt),
                    (long long)fc_dtype_block_elems(dt));
            return false;
        }
        printf("note: %lld of the %lld 2-D weights will be exported in %s, not %s (their rows "
               "are not whole %s blocks)%s\n",
               (long long)misfits, (long long)mats, fc_dtype_name(r->fallback), fc_dtype_name(dt),
               fc_dtype_name(dt),
               misfits == mats ? ": the file will hold no tensor of that dtype" : "");
    }
    return true;
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

static volatile sig_atomic_t g_stop;
static void on_sigint(int sig) {
    g_stop = 1;
    signal(sig, SIG_DFL); /* a second Ctrl-C ends the program at once */
}

/* The last evaluation, the final sample (also into sample.txt), the
 * checkpoint, the exports, the picture and the summary; the exit code. */
static int finish(run *r) {
    ex_trainer *t = &r->t;
    if (t->complete) return export_models(r) ? 0 : 1; /* a finished run, exported again */
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
    /* parse_options checked both */
    r->n_export = parse_dtypes(o->export_dtype, r->export_dtypes, EX_MAX_EXPORTS);
    parse_fallback(o->export_fallback, &r->fallback);
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
    if (!check_exports(r)) {
        r->bad_args = true;
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
        !ex_trainer_init(t, o->out, o->resume, "no step is taken, the exports are written")) {
        r->bad_args = t->exit_code == 2;
        return false;
    }
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
    if (setup(&r) && ex_trainer_train(&r.t, &g_stop)) rc = ex_trainer_exit_code(&r.t, finish(&r));
    if (r.bad_args) rc = 2;
    teardown(&r);
    return rc;
}
