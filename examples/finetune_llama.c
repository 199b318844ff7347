/* SPDX-License-Identifier: MIT */
/* finetune_llama.c - QLoRA: a LoRA adapter (fucina/lora.h) trained on a
 * text file over a frozen GGUF Llama model whose weights stay as they are
 * stored, block-quantized ones included.
 *
 * The base is loaded mapped and frozen (fc_llama_load without trainable):
 * a q4_k or q8_0 weight is read quantized by every product, forward and
 * backward, and never copied to f32, so the memory is the mapped file plus
 * the adapter, its AdamW moments and the activations. Only the adapter's
 * tensors (fc_lora_params) are trained, by the loop train_llama uses
 * (common/llama_trainer.c: AdamW with warm-up and cosine decay, gradient
 * clipping, the held-out split, samples, metrics.csv and loss.png,
 * checkpoints and --resume, which continues bit-identically). The text is
 * tokenized with the base file's own tokenizer (tokenizer.ggml.*; the
 * exports of train_llama carry theirs).
 *
 * At the end:
 *   - the adapter is written as safetensors with PEFT's tensor names
 *     (--adapter-out, default <out>/adapter_model.safetensors) and the
 *     adapter_config.json PEFT reads beside it (the text fc_lora_save puts
 *     in the file's metadata), so the folder is a PEFT adapter folder;
 *   - with --merge-out, the base with the adapter merged into its weights
 *     is written as GGUF (fc_lora_merge_save), each weight re-quantized to
 *     its own dtype (--merge-type keep) or to the one given; the merged
 *     file is then loaded back and its held-out loss printed beside the
 *     adapted model's (--expect-merged bounds the difference);
 *   - the base file is hashed again (FNV-1a 64 of its bytes, and its size
 *     and modification time) and must be what it was before training.
 *
 * Run: finetune_llama --base MODEL.gguf [text file] (default
 * /usr/share/common-licenses/Apache-2.0). scripts/qlora_workflow.sh runs
 * the whole offline workflow around it.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <fucina.h>

#include "common/args.h"
#include "common/llama_trainer.h"
#include "common/progress.h"
#include "common/token_data.h"
#include "fucina/llama.h"
#include "fucina/lora.h"
#include "fucina/tokenizer.h"

// ----------------------------------------------------------------------------
// options

typedef struct options {
    const char *base, *data, *out, *targets, *adapter_out, *merge_out, *merge_type;
    const char *merge_fallback;
    int64_t rank, threads;
    double alpha, dropout, expect_drop, expect_merged;
    bool resume;
    ex_trainer_opts loop; /* the shared loop's (llama_trainer.h); block 0: the model's */
} options;

/* name -> *dt (a float or block dtype); false after naming the bad dtype
 * and the valid ones */
static bool dtype_arg(const char *opt, const char *name, fc_dtype *dt) {
    if (fc_dtype_from_name(name, dt) == FC_OK && (fc_dtype_is_float(*dt) || fc_dtype_is_block(*dt)))
        return true;
    fprintf(stderr, "finetune_llama: %s: unknown dtype '%s'; valid:%s", opt, name,
            strcmp(opt, "--merge-type") == 0 ? " keep" : "");
    for (int d = 0; d < FC_DTYPE_COUNT; d++)
        if (fc_dtype_is_float((fc_dtype)d) || fc_dtype_is_block((fc_dtype)d))
            fprintf(stderr, " %s", fc_dtype_name((fc_dtype)d));
    fprintf(stderr, "\n");
    return false;
}

static int parse_options(int argc, char **argv, options *o) {
    // clang-format off
    *o = (options){.data = "/usr/share/common-licenses/Apache-2.0", .out = "finetune_llama_out",
                   .targets = "q,k,v,o,gate,up,down", .merge_type = "keep",
                   .merge_fallback = "f16", .rank = 8, .alpha = 16, .dropout = 0.05,
                   .threads = 0, .expect_drop = -1, .expect_merged = -1,
                   .loop = {.prog = "finetune_llama", .sample_prompt = "The ", .block = 0,
                            .batch = 8, .steps = 200, .warmup = 20, .eval_every = 50,
                            .sample_every = 0, .sample_len = 80, .ckpt_every = 100,
                            .seed = 1337, .minutes = 3, .lr = 1e-3, .min_lr = 1e-4,
                            .weight_decay = 0, .clip = 1.0, .temperature = 0.8}};
    // clang-format on
    const ex_arg own[] = {
        {"base", EX_ARG_STRING, &o->base, "the base model (GGUF, llama; stays frozen)", EX_ANY},
        {"data", EX_ARG_STRING, &o->data, "text file to fine-tune on (or the bare argument)",
         EX_ANY},
        {"out", EX_ARG_STRING, &o->out, "directory for metrics, checkpoint, sample, adapter",
         EX_ANY},
        {"rank", EX_ARG_INT, &o->rank, "LoRA rank r", EX_MIN(1)},
        {"alpha", EX_ARG_DOUBLE, &o->alpha, "LoRA alpha (the scale is alpha / rank)", EX_POS},
        {"dropout", EX_ARG_DOUBLE, &o->dropout, "dropout on the adapter's input", EX_MIN(0),
         EX_MAX(1), .hi_open = true},
        {"targets", EX_ARG_STRING, &o->targets,
         "projections to adapt: q,k,v,o,gate,up,down (or all, attn, mlp)", EX_ANY},
        {"block", EX_ARG_INT, &o->loop.block, "context length T (0: the model's, at most 256)",
         EX_MIN(0)},
        {"resume", EX_ARG_FLAG, &o->resume,
         "continue from <out>/ckpt.safetensors with the same --steps, --warmup, --lr, --min-lr "
         "(another schedule is refused: exit 2; a complete run has nothing to do)",
         EX_ANY},
        {"adapter-out", EX_ARG_STRING, &o->adapter_out,
         "adapter file (default <out>/adapter_model.safetensors; adapter_config.json beside)",
         EX_ANY},
        {"merge-out", EX_ARG_STRING, &o->merge_out, "also write the merged model here (GGUF)",
         EX_ANY},
        {"merge-type", EX_ARG_STRING, &o->merge_type,
         "dtype of the merged 2-D weights: keep (each its own), q4_k, q8_0, f16, f32, ...", EX_ANY},
        {"merge-fallback", EX_ARG_STRING, &o->merge_fallback,
         "dtype of a merged weight whose rows the block dtype does not divide", EX_ANY},
        {"threads", EX_ARG_INT, &o->threads, "worker threads (0: every core)", EX_MIN(0)},
        {"seed", EX_ARG_INT, &o->loop.seed,
         "seed of the adapter's initialisation, dropout, data order", EX_ANY},
        {"expect-drop", EX_ARG_DOUBLE, &o->expect_drop,
         "exit 1 unless the validation loss fell by this much (for tests)", EX_ANY},
        {"expect-merged", EX_ARG_DOUBLE, &o->expect_merged,
         "exit 1 unless the merged file's validation loss is this close to the adapter's", EX_ANY},
    };
    enum { NOWN = sizeof own / sizeof *own };
    ex_arg args[NOWN + EX_TRAINER_NARGS];
    memcpy(args, own, sizeof own);
    int nargs = NOWN + ex_trainer_args(&o->loop, args + NOWN);
    ex_args_result r =
        ex_args_parse(argc, argv, args, nargs, &o->data, "--base MODEL.gguf [options] [text file]");
    if (r != EX_ARGS_OK) return r == EX_ARGS_HELP ? 0 : 2;
    /* each value's own range is the parser's (args.h; fc_lora_new checks
     * rank, alpha and dropout again); what is left: */
    const char *bad = !o->base             ? "--base MODEL.gguf is required"
                      : o->loop.block == 1 ? "--block must be 0 or at least 2, got 1"
                                           : NULL;
    if (bad) {
        fprintf(stderr, "finetune_llama: %s\n", bad);
        return 2;
    }
    fc_dtype dt;
    if ((strcmp(o->merge_type, "keep") && !dtype_arg("--merge-type", o->merge_type, &dt)) ||
        !dtype_arg("--merge-fallback", o->merge_fallback, &dt))
        return 2;
    return -1; /* go on */
}

/* "q,k,v,gate" -> FC_LORA_* bits (PEFT's "q_proj" names too); 0 after
 * printing why */
static unsigned parse_targets(const char *s) {
    static const struct {
        const char *name, *peft;
        unsigned bits;
    } names[] = {{"q", "q_proj", FC_LORA_Q},          {"k", "k_proj", FC_LORA_K},
                 {"v", "v_proj", FC_LORA_V},          {"o", "o_proj", FC_LORA_O},
                 {"gate", "gate_proj", FC_LORA_GATE}, {"up", "up_proj", FC_LORA_UP},
                 {"down", "down_proj", FC_LORA_DOWN}, {"attn", "attn", FC_LORA_ATTN},
                 {"mlp", "mlp", FC_LORA_MLP},         {"all", "all", FC_LORA_ALL}};
    char buf[256];
    unsigned bits = 0;
    if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf) return 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        size_t i = 0, n = sizeof names / sizeof *names;
        while (i < n && strcmp(tok, names[i].name) && strcmp(tok, names[i].peft))
            i++;
        if (i == n) {
            fprintf(stderr,
                    "finetune_llama: --targets: '%s' is not one of q, k, v, o, gate, up, down, "
                    "attn, mlp, all\n",
                    tok);
            return 0;
        }
        bits |= names[i].bits;
    }
    if (!bits) fprintf(stderr, "finetune_llama: --targets names no projection\n");
    return bits;
}

// ----------------------------------------------------------------------------
// the base file's fingerprint: it must be the same after training

typedef struct fingerprint {
    uint64_t fnv; /* FNV-1a 64 of every byte */
    long long size;
    struct timespec mtime;
} fingerprint;

static bool fingerprint_of(const char *path, fingerprint *fp) {
    struct stat st;
    FILE *f = fopen(path, "rb");
    if (!f || fstat(fileno(f), &st) != 0) {
        fprintf(stderr, "finetune_llama: cannot read %s: %s\n", path, strerror(errno));
        if (f) fclose(f);
        return false;
    }
    static unsigned char buf[1 << 16];
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;)
        for (size_t i = 0; i < n; i++)
            h = (h ^ buf[i]) * 0x100000001B3ull;
    bool ok = !ferror(f);
    fclose(f);
    if (!ok) fprintf(stderr, "finetune_llama: reading %s failed\n", path);
    *fp = (fingerprint){.fnv = h, .size = (long long)st.st_size, .mtime = st.st_mtim};
    return ok;
}

// ----------------------------------------------------------------------------
// the run

typedef struct run {
    options o;
    fc_ctx *ctx;
    fc_llama *model;
    fc_tokenizer *tok;
    fc_lora *lora;
    ex_tokens data;
    fc_tensor **params; /* borrowed from the adapter */
    const char **names; /* their PEFT names (borrowed) */
    ex_trainer t;
    fingerprint base_before;
    fc_dtype merge_dtype, merge_fallback; /* FC_DTYPE_COUNT: keep */
    char adapter_path[4096], config_path[4096], sample_path[4096];
    int exit_code; /* when setup fails or finds nothing to do: how main exits */
} run;

static volatile sig_atomic_t g_stop;
static void on_sigint(int sig) {
    g_stop = 1;
    signal(sig, SIG_DFL); /* a second Ctrl-C ends the program at once */
}

/* "<out>/<file>" into dst; false when --out is too long */
static bool out_path(char *dst, size_t cap, const char *out, const char *file) {
    if (snprintf(dst, cap, "%s/%s", out, file) < (int)cap) return true;
    fprintf(stderr, "finetune_llama: --out is too long\n");
    return false;
}

static uint64_t bits_of(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* One line on what the base holds: its 2-D weights by dtype. */
static void describe_base(const run *r) {
    int64_t count[FC_DTYPE_COUNT] = {0}, bytes = 0;
    for (int64_t i = 0; i < fc_llama_tensor_count(r->model); i++) {
        fc_tensor *w = fc_llama_tensor_at(r->model, i);
        bytes += (int64_t)fc_tensor_nbytes(w);
        if (fc_tensor_rank(w) == 2) count[fc_tensor_dtype(w)]++;
    }
    printf("base: %s: %lld bytes, fnv1a64 %016llx; weights stay as stored (frozen, mapped):",
           r->o.base, r->base_before.size, (unsigned long long)r->base_before.fnv);
    for (int d = 0; d < FC_DTYPE_COUNT; d++)
        if (count[d]) printf(" %lld %s", (long long)count[d], fc_dtype_name((fc_dtype)d));
    printf(" (%lld bytes of tensors)\n", (long long)bytes);
}

static bool open_model(run *r) {
    const options *o = &r->o;
    if (!fingerprint_of(o->base, &r->base_before)) return false;
    if (fc_llama_load(r->ctx, o->base, NULL, &r->model) != FC_OK ||
        fc_tokenizer_from_gguf(r->ctx, fc_llama_gguf(r->model), NULL, &r->tok) != FC_OK) {
        fprintf(stderr, "finetune_llama: %s: %s\n", o->base, fc_ctx_error(r->ctx));
        return false;
    }
    const fc_llama_config *c = fc_llama_get_config(r->model);
    if (fc_tokenizer_vocab_size(r->tok) > c->vocab) {
        fprintf(stderr, "finetune_llama: %s: its tokenizer has %lld tokens, the model %lld\n",
                o->base, (long long)fc_tokenizer_vocab_size(r->tok), (long long)c->vocab);
        return false;
    }
    if (o->loop.block > c->context) {
        fprintf(stderr, "finetune_llama: --block %lld is longer than the model's context %lld\n",
                (long long)o->loop.block, (long long)c->context);
        return false;
    }
    if (r->o.loop.block == 0) r->o.loop.block = c->context < 256 ? c->context : 256;
    return true;
}

static bool make_adapter(run *r) {
    const options *o = &r->o;
    fc_lora_config lc = {.rank = o->rank,
                         .alpha = o->alpha,
                         .dropout = o->dropout,
                         .targets = parse_targets(o->targets)};
    if (!lc.targets) return false;
    if (fc_lora_new(r->ctx, r->model, &lc, &r->lora) != FC_OK) {
        fprintf(stderr, "finetune_llama: the adapter: %s\n", fc_ctx_error(r->ctx));
        return false;
    }
    int64_t np = fc_lora_params(r->lora, NULL, 0);
    r->params = calloc((size_t)np, sizeof *r->params);
    r->names = calloc((size_t)np, sizeof *r->names);
    if (!r->params || !r->names || np > INT32_MAX) {
        fprintf(stderr, "finetune_llama: out of memory\n");
        return false;
    }
    fc_lora_params(r->lora, r->params, np);
    for (int64_t i = 0; i < np; i++)
        r->names[i] = fc_lora_param_name(r->lora, i);
    ex_trainer *t = &r->t;
    t->nparams = (int)np;
    t->params = r->params;
    t->names = r->names;
    /* a resume must be of this base, tokenizer, context and adapter */
    const fc_llama_config *c = fc_llama_get_config(r->model);
    static const char *const keys[] = {"finetune_llama.base_fnv1a64", "finetune_llama.vocab",
                                       "finetune_llama.block",        "finetune_llama.rank",
                                       "finetune_llama.targets",      "finetune_llama.alpha_bits",
                                       "finetune_llama.dropout_bits"};
    const uint64_t vals[] = {r->base_before.fnv, (uint64_t)c->vocab,   (uint64_t)o->loop.block,
                             (uint64_t)lc.rank,  (uint64_t)lc.targets, bits_of(lc.alpha),
                             bits_of(lc.dropout)};
    t->nmatch = (int)(sizeof vals / sizeof *vals);
    for (int i = 0; i < t->nmatch; i++) {
        t->match_keys[i] = keys[i];
        t->match_vals[i] = vals[i];
    }
    return true;
}

static bool setup(run *r) {
    options *o = &r->o;
    r->ctx = fc_ctx_new(&(fc_ctx_opts){.threads = (int)o->threads, .seed = (uint64_t)o->loop.seed});
    if (!r->ctx) {
        fprintf(stderr, "finetune_llama: cannot create a context\n");
        return false;
    }
    r->merge_dtype = FC_DTYPE_COUNT; /* keep; parse_options checked both names */
    if (strcmp(o->merge_type, "keep")) dtype_arg("--merge-type", o->merge_type, &r->merge_dtype);
    dtype_arg("--merge-fallback", o->merge_fallback, &r->merge_fallback);
    if (!open_model(r) || !ex_tokens_load("finetune_llama", o->data, r->tok, &r->data))
        return false;
    if (!ex_tokens_split(&r->data, o->loop.block)) {
        fprintf(stderr,
                "finetune_llama: %s has %lld tokens, too few for a context of %lld (both splits "
                "need whole windows)\n",
                o->data, (long long)r->data.n, (long long)o->loop.block);
        return false;
    }
    if (!make_adapter(r)) return false;
    ex_trainer *t = &r->t;
    t->o = o->loop;
    t->ctx = r->ctx;
    t->model = r->model;
    t->tok = r->tok;
    t->data = &r->data;
    if (o->adapter_out) {
        snprintf(r->adapter_path, sizeof r->adapter_path, "%s", o->adapter_out);
    } else if (!out_path(r->adapter_path, sizeof r->adapter_path, o->out,
                         "adapter_model.safetensors")) {
        return false;
    }
    /* adapter_config.json goes in the adapter's folder, as PEFT wants it */
    const char *slash = strrchr(r->adapter_path, '/');
    int dirlen = slash ? (int)(slash - r->adapter_path) : 1;
    if (snprintf(r->config_path, sizeof r->config_path, "%.*s/adapter_config.json", dirlen,
                 slash ? r->adapter_path : ".") >= (int)sizeof r->config_path ||
        !out_path(t->csv_path, sizeof t->csv_path, o->out, "metrics.csv") ||
        !out_path(t->png_path, sizeof t->png_path, o->out, "loss.png") ||
        !out_path(t->ckpt_path, sizeof t->ckpt_path, o->out, "ckpt.safetensors") ||
        !out_path(r->sample_path, sizeof r->sample_path, o->out, "sample.txt"))
        return false;
    if (!ex_trainer_init(t, o->out, o->resume, "nothing to do")) {
        r->exit_code = t->exit_code;
        return false;
    }
    if (t->complete) {
        r->exit_code = 0;
        return false;
    }
    describe_base(r);
    const fc_llama_config *c = fc_llama_get_config(r->model);
    int64_t numel = 0;
    for (int i = 0; i < t->nparams; i++)
        numel += fc_tensor_numel(r->params[i]);
    printf("finetune_llama: %s: %lld bytes, %lld tokens (the base's tokenizer, vocabulary %lld); "
           "train %lld, validation %lld tokens (every 10th block of %lld, %lld windows)\n",
           o->data, (long long)r->data.bytes, (long long)r->data.n,
           (long long)fc_tokenizer_vocab_size(r->tok), (long long)r->data.train_tokens,
           (long long)r->data.val_tokens, (long long)r->data.seg, (long long)r->data.nval);
    printf("adapter: rank %lld, alpha %g, dropout %g, targets %s on %lld layers: %lld "
           "parameters in %d tensors (dim %lld, ff %lld, T=%lld); batch %lld; AdamW lr %g -> %g "
           "(warm-up %lld), %lld steps, budget %g min, %d threads\n",
           (long long)o->rank, o->alpha, o->dropout, o->targets, (long long)c->n_layers,
           (long long)numel, t->nparams, (long long)c->dim, (long long)c->ff_dim,
           (long long)o->loop.block, (long long)o->loop.batch, o->loop.lr, o->loop.min_lr,
           (long long)o->loop.warmup, (long long)o->loop.steps, o->loop.minutes,
           fc_ctx_threads(r->ctx));
    return true;
}

// ----------------------------------------------------------------------------
// the end: adapter, its config, the merge, the base's fingerprint

/* The adapter and adapter_config.json (the text fc_lora_save keeps in the
 * file's metadata, so the two always agree). */
static bool save_adapter(run *r) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s",
             (int)(strlen(r->config_path) - strlen("/adapter_config.json")), r->config_path);
    if (!ex_mkdir_p(dir)) return false;
    if (fc_lora_save(r->ctx, r->lora, r->adapter_path) != FC_OK) {
        fprintf(stderr, "finetune_llama: saving %s: %s\n", r->adapter_path, fc_ctx_error(r->ctx));
        return false;
    }
    char msg[256] = "";
    fc_st_file *f = NULL;
    if (fc_safetensors_open(r->adapter_path, &(fc_io_opts){.errbuf = msg, .errcap = sizeof msg},
                            &f) != FC_OK) {
        fprintf(stderr, "finetune_llama: reading %s back: %s\n", r->adapter_path, msg);
        return false;
    }
    const char *json = fc_safetensors_meta_find(f, "adapter_config");
    FILE *out = json ? fopen(r->config_path, "wb") : NULL;
    bool ok = out && fputs(json, out) >= 0 && fputc('\n', out) != EOF;
    if (out && fclose(out) != 0) ok = false;
    if (!ok)
        fprintf(stderr, "finetune_llama: %s\n",
                json ? "cannot write adapter_config.json"
                     : "the adapter file has no adapter_config metadata");
    else
        printf("wrote %s (%lld tensors, PEFT names) and %s\n", r->adapter_path,
               (long long)fc_safetensors_tensor_count(f), r->config_path);
    fc_safetensors_close(f);
    return ok;
}

/* The merged GGUF, loaded back: its held-out loss beside the adapter's. */
static bool merge(run *r, double *merged_val) {
    const char *path = r->o.merge_out;
    fc_llama_save_opts so = fc_llama_save_opts_default();
    so.dtype = r->merge_dtype;
    so.fallback = r->merge_fallback;
    if (fc_lora_merge_save(r->ctx, r->lora, path, &so) != FC_OK) {
        fprintf(stderr, "finetune_llama: merging into %s: %s\n", path, fc_ctx_error(r->ctx));
        return false;
    }
    fc_llama *m = NULL;
    if (fc_llama_load(r->ctx, path, NULL, &m) != FC_OK) {
        fprintf(stderr, "finetune_llama: loading the merged %s: %s\n", path, fc_ctx_error(r->ctx));
        return false;
    }
    *merged_val = ex_trainer_eval_loss(r->ctx, m, &r->data, r->o.loop.block, r->o.loop.batch);
    fc_llama_free(m);
    if (isnan(*merged_val)) {
        fprintf(stderr, "finetune_llama: evaluating %s: %s\n", path, fc_ctx_error(r->ctx));
        return false;
    }
    printf("merged %s (weights %s%s): val loss %.4f (base + adapter in memory: %.4f)\n", path,
           r->merge_dtype == FC_DTYPE_COUNT ? "each in its own dtype" : "in ",
           r->merge_dtype == FC_DTYPE_COUNT ? "" : r->o.merge_type, *merged_val, r->t.val_last);
    return true;
}

static bool base_unchanged(const run *r) {
    fingerprint now;
    if (!fingerprint_of(r->o.base, &now)) return false;
    const fingerprint *b = &r->base_before;
    bool same = now.fnv == b->fnv && now.size == b->size && now.mtime.tv_sec == b->mtime.tv_sec &&
                now.mtime.tv_nsec == b->mtime.tv_nsec;
    if (same)
        printf("base unchanged: %s: %lld bytes, fnv1a64 %016llx, same modification time\n",
               r->o.base, now.size, (unsigned long long)now.fnv);
    else
        fprintf(stderr,
                "finetune_llama: the base %s changed: fnv1a64 %016llx -> %016llx, %lld -> %lld "
                "bytes\n",
                r->o.base, (unsigned long long)b->fnv, (unsigned long long)now.fnv, b->size,
                now.size);
    return same;
}

static int finish(run *r) {
    ex_trainer *t = &r->t;
    const options *o = &r->o;
    double merged_val = NAN;
    if (!ex_trainer_finish(t, r->sample_path) || !save_adapter(r) ||
        (o->merge_out && !merge(r, &merged_val)))
        return 1;
    ex_trainer_report(t, "finetune_llama: cross-entropy per token (LoRA over a frozen base)");
    printf("held-out loss of the base on %s: %.4f before, %.4f after fine-tuning\n", o->data,
           t->val_first, t->val_last);
    if (!base_unchanged(r)) return 1;
    if (o->expect_drop >= 0 && !(t->val_last <= t->val_first - o->expect_drop)) {
        fprintf(stderr,
                "finetune_llama: expected the validation loss to fall by %g, it went from "
                "%.4f to %.4f\n",
                o->expect_drop, t->val_first, t->val_last);
        return 1;
    }
    if (o->expect_merged >= 0 && o->merge_out &&
        !(fabs(merged_val - t->val_last) <= o->expect_merged)) {
        fprintf(stderr,
                "finetune_llama: the merged file's validation loss %.4f is not within %g of the "
                "adapter's %.4f\n",
                merged_val, o->expect_merged, t->val_last);
        return 1;
    }
    return 0;
}

static void teardown(run *r) {
    ex_trainer_free(&r->t);
    fc_lora_free(r->lora); /* before its model */
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
    r.exit_code = 1;
    if (setup(&r))
        rc = ex_trainer_train(&r.t, &g_stop) ? ex_trainer_exit_code(&r.t, finish(&r)) : 1;
    else
        rc = r.exit_code;
    teardown(&r);
    return rc;
}
