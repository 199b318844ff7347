/* SPDX-License-Identifier: MIT */
/* llama_trainer.c - the loop of the Llama trainers (see llama_trainer.h);
 * it is train_gpt.c's loop over fucina_models. */
#define _POSIX_C_SOURCE 200809L
#include "llama_trainer.h"

#include "resume.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ----------------------------------------------------------------------------
// loss, evaluation, samples

fc_tensor *ex_trainer_loss(fc_ctx *ctx, fc_llama *m, fc_tensor *idx, fc_tensor *targets) {
    int64_t BT = fc_tensor_dim(idx, 0) * fc_tensor_dim(idx, 1);
    int64_t V = fc_llama_get_config(m)->vocab;
    /* (B,T,V); called inside a scope, which releases it */
    fc_tensor *logits = fc_llama_forward(ctx, m, idx);
    return fc_cross_entropy(ctx, fc_view(ctx, logits, (const int64_t[]){BT, V}, 2), targets, NULL);
}

double ex_trainer_eval_loss(fc_ctx *ctx, fc_llama *m, const ex_tokens *d, int64_t T, int64_t B) {
    int64_t nw = d->nval;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(2 * B * T));
    if (!idx) return NAN;
    int64_t *tgt = idx + B * T;
    double total = 0;
    /* no grad: no tape, and no dropout draws from the context RNG */
    fc_no_grad_begin(ctx);
    for (int64_t w0 = 0; w0 < nw; w0 += B) {
        int64_t rows = nw - w0 < B ? nw - w0 : B;
        ex_tokens_windows(d, d->val_off + w0, rows, T, idx, tgt);
        fc_scope_begin(ctx);
        fc_tensor *ti = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){rows, T}, 2, idx);
        fc_tensor *tt = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){rows * T}, 1, tgt);
        double l = NAN;
        fc_tensor_item(ex_trainer_loss(ctx, m, ti, tt), &l);
        fc_scope_end(ctx);
        total += l * (double)rows;
    }
    fc_no_grad_end(ctx);
    free(idx);
    return fc_ctx_status(ctx) == FC_OK ? total / (double)nw : NAN;
}

bool ex_trainer_evaluate(ex_trainer *t) {
    double v = ex_trainer_eval_loss(t->ctx, t->model, t->data, t->o.block, t->o.batch);
    if (isnan(v)) return false;
    if (isnan(t->val_first)) t->val_first = v;
    t->val_last = v;
    t->val_step = t->step;
    if (!(v >= t->val_best)) {
        t->val_best = v;
        t->best_step = t->step;
    }
    ex_progress_note(&t->bar, "step %lld: val loss %.4f", (long long)t->step, v);
    return true;
}

char *ex_trainer_sample(ex_trainer *t, double temperature, uint64_t seed) {
    fc_ctx *ctx = t->ctx;
    const char *p = t->o.sample_prompt;
    int64_t np = 0, T = t->o.block;
    /* measuring: a NULL ctx, since the FC_ERR_DATA_LENGTH it answers would
     * stay in ctx as its first error */
    fc_status st =
        fc_tokenizer_encode(NULL, t->tok, p, strlen(p), FC_TOKENIZE_ADD_SPECIAL, NULL, 0, &np);
    if (st != FC_OK && st != FC_ERR_DATA_LENGTH) {
        fc_ctx_fail(ctx, st, "%s: cannot encode --sample-prompt", t->o.prog);
        return NULL;
    }
    if (np < 1 || np >= T) {
        fc_ctx_fail(ctx, FC_ERR_INVALID_ARG,
                    "%s: --sample-prompt is %lld tokens; the context "
                    "holds %lld",
                    t->o.prog, (long long)np, (long long)T);
        return NULL;
    }
    int64_t n_new = t->o.sample_len < T - np ? t->o.sample_len : T - np;
    int32_t *ids = malloc(sizeof *ids * (size_t)(np + n_new + 1));
    int64_t got = 0;
    if (!ids) {
        fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory for a sample", t->o.prog);
        return NULL;
    }
    if (fc_tokenizer_encode(ctx, t->tok, p, strlen(p), FC_TOKENIZE_ADD_SPECIAL, ids, np, &np))
        goto fail;
    fc_llama_sample_opts so = {.temperature = temperature, .seed = seed};
    if (n_new > 0 && fc_llama_generate(ctx, t->model, ids, np, n_new, fc_tokenizer_eos(t->tok), &so,
                                       ids + np, &got))
        goto fail;
    /* the text's size first (NULL ctx again), then the text */
    size_t len = strlen(p), cap = len + 1;
    for (int64_t i = 0; i < got; i++) {
        size_t piece = 0;
        fc_tokenizer_decode(NULL, t->tok, ids + np + i, 1, FC_DECODE_KEEP_PREFIX, NULL, 0, &piece);
        cap += piece;
    }
    char *text = malloc(cap);
    if (!text) {
        fc_ctx_fail(ctx, FC_ERR_OOM, "%s: out of memory for a sample", t->o.prog);
        goto fail;
    }
    memcpy(text, p, len);
    for (int64_t i = 0; i < got; i++) {
        size_t piece = 0;
        /* after the prompt every token keeps its leading space */
        if (fc_tokenizer_decode(ctx, t->tok, ids + np + i, 1, FC_DECODE_KEEP_PREFIX, text + len,
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

static bool print_sample(ex_trainer *t) {
    char *s = ex_trainer_sample(t, t->o.temperature, ex_rand_u64(&t->sample_rng));
    if (!s) return false;
    ex_progress_note(&t->bar, "---- sample at step %lld (temperature %g) ----\n%s\n----",
                     (long long)t->step, t->o.temperature, s);
    free(s);
    return true;
}

// ----------------------------------------------------------------------------
// checkpoints: the tensors, the AdamW state and the context RNG
// (fucina/checkpoint.h), plus the position, the data PRNG, and the values a
// resume must match.

enum { V_STEP, V_DATA_RNG, V_TOKENS, V_OWN };
/* texts (common/resume.h); a checkpoint written before them has none */
enum { X_ELAPSED, X_SCHEDULE, X_SCHEDULE_NOW, NEXTRA };
static const char *const EXTRA[NEXTRA] = {"elapsed_ms", "schedule", "schedule_now"};

/* keys and values: the trainer's three, then the caller's */
static int meta(const ex_trainer *t, char (*keybuf)[64], const char **keys, uint64_t *vals) {
    const char *own[V_OWN] = {"step", "data_rng", "tokens_hash"};
    const uint64_t ownv[V_OWN] = {(uint64_t)t->step, t->data_rng, t->data->hash};
    for (int i = 0; i < V_OWN; i++) {
        snprintf(keybuf[i], 64, "%s.%s", t->o.prog, own[i]);
        keys[i] = keybuf[i];
        vals[i] = ownv[i];
    }
    for (int i = 0; i < t->nmatch; i++) {
        keys[V_OWN + i] = t->match_keys[i];
        vals[V_OWN + i] = t->match_vals[i];
    }
    return V_OWN + t->nmatch;
}

fc_status ex_trainer_save(ex_trainer *t) {
    enum { N = V_OWN + EX_TRAINER_MAX_MATCH + NEXTRA };
    char keybuf[V_OWN + NEXTRA][64], text[N][160];
    const char *keys[N], *vals[N];
    uint64_t v[N];
    int n = meta(t, keybuf, keys, v);
    for (int i = 0; i < n; i++) {
        snprintf(text[i], sizeof text[i], "%llu", (unsigned long long)v[i]);
        vals[i] = text[i];
    }
    snprintf(text[n + X_ELAPSED], sizeof text[0], "%.0f", 1e3 * ex_progress_total(&t->bar));
    ex_schedule_text(&t->asked, text[n + X_SCHEDULE], sizeof text[0]);
    ex_schedule_text(&t->sched, text[n + X_SCHEDULE_NOW], sizeof text[0]);
    for (int i = 0; i < NEXTRA; i++) {
        snprintf(keybuf[V_OWN + i], 64, "%s.%s", t->o.prog, EXTRA[i]);
        keys[n + i] = keybuf[V_OWN + i];
        vals[n + i] = text[n + i];
    }
    fc_status st = fc_checkpoint_save(t->ctx, t->ckpt_path, t->names, t->params, t->nparams, t->opt,
                                      keys, vals, n + NEXTRA);
    if (st != FC_OK)
        fprintf(stderr, "%s: saving %s: %s\n", t->o.prog, t->ckpt_path, fc_ctx_error(t->ctx));
    return st;
}

/* Restores the run; extra gets the texts ("" for those it lacks). */
static fc_status load_checkpoint(ex_trainer *t, char (*extra)[160]) {
    const char *path = t->ckpt_path;
    char msg[256] = "";
    fc_st_file *f = NULL;
    fc_status st =
        fc_safetensors_open(path, &(fc_io_opts){.errbuf = msg, .errcap = sizeof msg}, &f);
    if (st != FC_OK) {
        fprintf(stderr, "%s: cannot resume: %s\n", t->o.prog, msg);
        return st;
    }
    char keybuf[V_OWN][64];
    const char *keys[V_OWN + EX_TRAINER_MAX_MATCH];
    uint64_t got[V_OWN + EX_TRAINER_MAX_MATCH], want[V_OWN + EX_TRAINER_MAX_MATCH];
    int n = meta(t, keybuf, keys, want);
    for (int i = 0; i < n && st == FC_OK; i++) {
        const char *s = fc_safetensors_meta_find(f, keys[i]);
        char *end = NULL;
        got[i] = s ? strtoull(s, &end, 10) : 0;
        if (!s || !*s || *end) {
            fprintf(stderr, "%s: %s has no valid %s: not a %s checkpoint\n", t->o.prog, path,
                    keys[i], t->o.prog);
            st = FC_ERR_FORMAT;
        } else if (i >= V_TOKENS && got[i] != want[i]) {
            fprintf(stderr, "%s: %s was made with %s = %llu, this run has %llu\n", t->o.prog, path,
                    keys[i], (unsigned long long)got[i], (unsigned long long)want[i]);
            st = FC_ERR_FORMAT;
        }
    }
    for (int i = 0; i < NEXTRA; i++) {
        char key[64];
        snprintf(key, sizeof key, "%s.%s", t->o.prog, EXTRA[i]);
        const char *s = fc_safetensors_meta_find(f, key);
        snprintf(extra[i], 160, "%s", s ? s : "");
    }
    fc_safetensors_close(f);
    if (st != FC_OK) return st;
    st = fc_checkpoint_load(t->ctx, path, t->names, t->params, t->nparams, t->opt);
    if (st != FC_OK) {
        fprintf(stderr, "%s: loading %s: %s\n", t->o.prog, path, fc_ctx_error(t->ctx));
        return st;
    }
    t->step = (int64_t)got[V_STEP];
    t->data_rng = got[V_DATA_RNG];
    return FC_OK;
}

// ----------------------------------------------------------------------------
// setup

bool ex_trainer_init(ex_trainer *t, const char *out_dir, bool resume, const char *then_complete) {
    const ex_trainer_opts *o = &t->o;
    int64_t B = o->batch, T = o->block;
    t->step_ms = malloc(sizeof(double) * (size_t)o->steps);
    fc_optim_opts oo = {.kind = FC_OPTIM_ADAMW, .lr = o->lr, .weight_decay = o->weight_decay};
    t->opt = fc_optim_new(t->ctx, &oo, t->params, t->nparams);
    t->idx = fc_empty(t->ctx, FC_I64, (const int64_t[]){B, T}, 2);
    t->tgt = fc_empty(t->ctx, FC_I64, (const int64_t[]){B * T}, 1);
    if (fc_ctx_status(t->ctx) != FC_OK || !t->opt || !t->step_ms) {
        fprintf(stderr, "%s: building the optimizer failed: %s\n", o->prog,
                t->step_ms ? fc_ctx_error(t->ctx) : "out of memory");
        return false;
    }
    t->sched = (fc_lr_schedule){.kind = FC_LR_COSINE,
                                .base_lr = o->lr,
                                .warmup_steps = o->warmup,
                                .total_steps = o->steps,
                                .min_lr = o->min_lr};
    t->asked = t->sched;
    t->planned = o->steps;
    t->row.step = -1;
    t->exit_code = 1;
    t->data_rng = (uint64_t)o->seed ^ 0xD1B54A32D192ED03ull;
    t->sample_rng = (uint64_t)o->seed ^ 0x8CB92BA72F3D8DD7ull;
    t->train_last = t->val_first = t->val_last = t->val_best = NAN;
    t->val_step = t->best_step = -1;
    if (!ex_mkdir_p(out_dir)) return false;
    const char *header = "step,lr,train_loss,val_loss,grad_norm,tokens_per_s,elapsed_s";
    if (!resume) {
        t->csv = ex_csv_open(t->csv_path, header, false);
        return t->csv != NULL;
    }
    char extra[NEXTRA][160];
    if (load_checkpoint(t, extra) != FC_OK) return false;
    t->resumed = true;
    if (!ex_schedule_check(o->prog, t->ckpt_path, extra[X_SCHEDULE][0] ? extra[X_SCHEDULE] : NULL,
                           &t->asked, t->step)) {
        t->exit_code = 2;
        return false;
    }
    if (ex_schedule_parse(extra[X_SCHEDULE_NOW], &t->sched)) t->planned = t->sched.total_steps;
    t->before_s = ex_elapsed_from_text(extra[X_ELAPSED]);
    t->complete =
        ex_run_complete(o->prog, out_dir, t->step, t->planned, o->stop_after, then_complete);
    if (t->complete) return true;
    printf("resumed from %s at step %lld\n", t->ckpt_path, (long long)t->step);
    t->csv = ex_csv_resume(t->csv_path, header, t->step, &t->csv_last);
    return t->csv != NULL;
}

static void csv_flush(ex_trainer *t);

void ex_trainer_free(ex_trainer *t) {
    csv_flush(t);
    if (t->csv) fclose(t->csv);
    t->csv = NULL;
    fc_optim_free(t->opt);
    t->opt = NULL;
    fc_release(t->idx);
    fc_release(t->tgt);
    t->idx = t->tgt = NULL;
    free(t->step_ms);
    t->step_ms = NULL;
}

// ----------------------------------------------------------------------------
// the loop

static double train_step(ex_trainer *t, double *grad_norm) {
    fc_ctx *ctx = t->ctx;
    int64_t B = t->o.batch, T = t->o.block;
    double loss = NAN;
    *grad_norm = NAN;
    fc_scope_begin(ctx);
    int64_t *idx = fc_tensor_data_mut(t->idx), *tgt = fc_tensor_data_mut(t->tgt);
    if (idx && tgt) ex_tokens_batch(t->data, B, T, &t->data_rng, idx, tgt);
    fc_tensor *l = ex_trainer_loss(ctx, t->model, t->idx, t->tgt);
    if (l && fc_backward(ctx, l) == FC_OK &&
        (t->o.clip == 0 ||
         fc_clip_grad_norm(ctx, t->params, t->nparams, t->o.clip, grad_norm) == FC_OK) &&
        fc_optim_set_lr(t->opt, fc_lr_at(&t->sched, t->step)) == FC_OK &&
        fc_optim_step(t->opt) == FC_OK)
        fc_tensor_item(l, &loss);
    fc_optim_zero_grad(t->opt);
    fc_scope_end(ctx);
    return fc_ctx_status(ctx) == FC_OK ? loss : NAN;
}

/* writes the held row, if any */
static void csv_flush(ex_trainer *t) {
    const struct ex_trainer_row *w = &t->row;
    if (!t->csv || w->step < 0) return;
    fprintf(t->csv, "%lld,%.6g,", (long long)w->step, w->lr);
    if (!isnan(w->loss)) fprintf(t->csv, "%.6f", w->loss);
    fputc(',', t->csv);
    if (!isnan(w->val)) fprintf(t->csv, "%.6f", w->val);
    fputc(',', t->csv);
    if (!isnan(w->gnorm)) fprintf(t->csv, "%.4f", w->gnorm);
    fprintf(t->csv, ",%.1f,%.2f\n", w->tps, w->elapsed);
    fflush(t->csv);
    t->row.step = -1;
}

void ex_trainer_csv_row(ex_trainer *t, double lr, double loss, double val, double gnorm,
                        double tps) {
    if (t->row.step == t->step) {
        if (!isnan(val)) t->row.val = val;
        return;
    }
    csv_flush(t);
    t->row =
        (struct ex_trainer_row){t->step, lr, loss, val, gnorm, tps, ex_progress_total(&t->bar)};
}

int ex_trainer_exit_code(const ex_trainer *t, int rc) {
    if (rc != 0 || !t->interrupted) return rc;
    printf("%s: stopped by Ctrl-C at step %lld of %lld; %s holds it (--resume continues)\n",
           t->o.prog, (long long)t->step, (long long)t->planned, t->ckpt_path);
    return 130;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* With a time budget that cannot hold --steps, the cosine ends at the step
 * it can hold (as train_gpt.c does; 10% kept for evaluations and samples). */
static void fit_schedule(ex_trainer *t) {
    enum { N = 20 };
    double ms[N];
    memcpy(ms, t->step_ms + t->nsteps_run - N, sizeof ms);
    qsort(ms, N, sizeof *ms, cmp_double);
    double left = t->o.minutes * 60 - ex_progress_elapsed(&t->bar);
    int64_t fits = t->step + (int64_t)(0.9 * left / (ms[N / 2] * 1e-3));
    if (fits >= t->planned) return;
    if (fits < t->step + 1) fits = t->step + 1;
    if (t->sched.warmup_steps > fits / 4) t->sched.warmup_steps = fits / 4;
    t->planned = t->sched.total_steps = t->bar.total_steps = fits;
    ex_progress_note(&t->bar,
                     "the %g min budget holds about %lld steps at %.0f ms/step: the "
                     "schedule now ends there (--minutes 0 keeps --steps %lld)",
                     t->o.minutes, (long long)fits, ms[N / 2], (long long)t->o.steps);
}

bool ex_trainer_train(ex_trainer *t, volatile sig_atomic_t *stop) {
    const ex_trainer_opts *o = &t->o;
    if (t->complete) return true;
    int64_t every = o->eval_every / 5 > 0 ? o->eval_every / 5 : 1;
    ex_progress_start(&t->bar, t->planned, o->minutes * 60, "tok", (int)every);
    t->bar.before_s = t->before_s;
    if (!ex_trainer_evaluate(t)) {
        fprintf(stderr, "%s: evaluation failed: %s\n", o->prog, fc_ctx_error(t->ctx));
        return false;
    }
    /* a resumed run's first row is its checkpoint's last, already written */
    if (!t->resumed || t->csv_last < t->step)
        ex_trainer_csv_row(t, fc_lr_at(&t->sched, t->step), NAN, t->val_last, NAN, 0);
    double ema_ms = 0, tps = 0, budget = o->minutes * 60;
    while (t->step < t->planned && !(o->stop_after > 0 && t->step >= o->stop_after) && !*stop) {
        if (budget > 0 && ex_progress_elapsed(&t->bar) >= budget) {
            ex_progress_note(&t->bar, "time budget of %g min reached at step %lld of %lld",
                             o->minutes, (long long)t->step, (long long)t->planned);
            break;
        }
        double lr = fc_lr_at(&t->sched, t->step), gnorm;
        double t0 = ex_now();
        double loss = train_step(t, &gnorm);
        double ms = 1e3 * (ex_now() - t0);
        if (isnan(loss)) {
            ex_progress_finish(&t->bar);
            fprintf(stderr, "%s: step %lld failed: %s\n", o->prog, (long long)t->step + 1,
                    fc_ctx_status(t->ctx) != FC_OK ? fc_ctx_error(t->ctx) : "the loss is NaN");
            return false;
        }
        t->step++;
        t->train_last = loss;
        t->step_ms[t->nsteps_run++] = ms;
        if (budget > 0 && t->nsteps_run == 20) fit_schedule(t);
        ema_ms = ema_ms == 0 ? ms : 0.9 * ema_ms + 0.1 * ms;
        tps = (double)(o->batch * o->block) / (ema_ms * 1e-3);
        ex_progress_update(&t->bar, t->step, loss, tps);
        double val = NAN;
        if (t->step % o->eval_every == 0 || t->step == t->planned) {
            if (!ex_trainer_evaluate(t)) break;
            val = t->val_last;
        }
        ex_trainer_csv_row(t, lr, loss, val, gnorm, tps);
        if (o->sample_every > 0 && o->sample_len > 0 && t->step % o->sample_every == 0 &&
            !print_sample(t))
            break;
        if (o->ckpt_every > 0 && t->step % o->ckpt_every == 0 && ex_trainer_save(t) != FC_OK)
            return false;
    }
    if (*stop && t->step < t->planned) t->interrupted = true;
    if (fc_ctx_status(t->ctx) != FC_OK) {
        ex_progress_finish(&t->bar);
        fprintf(stderr, "%s: %s\n", o->prog, fc_ctx_error(t->ctx));
        return false;
    }
    return true;
}

bool ex_trainer_finish(ex_trainer *t, const char *sample_path) {
    const ex_trainer_opts *o = &t->o;
    ex_progress_finish(&t->bar);
    if (t->val_step != t->step) {
        if (!ex_trainer_evaluate(t)) {
            fprintf(stderr, "%s: evaluation failed: %s\n", o->prog, fc_ctx_error(t->ctx));
            return false;
        }
        ex_trainer_csv_row(t, fc_lr_at(&t->sched, t->step), NAN, t->val_last, NAN, 0);
    }
    if (o->sample_len > 0) {
        /* a seed of its own, so the file does not depend on how many
         * samples the run printed before (a resumed run prints fewer) */
        char *s = ex_trainer_sample(t, o->temperature, (uint64_t)o->seed);
        FILE *f = s && sample_path ? fopen(sample_path, "wb") : NULL;
        if (!s || (sample_path && (!f || fputs(s, f) < 0))) {
            fprintf(stderr, "%s: the final sample: %s\n", o->prog,
                    s ? sample_path : fc_ctx_error(t->ctx));
            if (f) fclose(f);
            free(s);
            return false;
        }
        if (f) fclose(f);
        if (!(o->sample_every > 0 && t->step % o->sample_every == 0)) /* not just printed */
            printf("---- sample at step %lld (temperature %g) ----\n%s\n----\n", (long long)t->step,
                   o->temperature, s);
        free(s);
    }
    return ex_trainer_save(t) == FC_OK;
}

void ex_trainer_report(ex_trainer *t, const char *title) {
    const ex_trainer_opts *o = &t->o;
    csv_flush(t);
    if (t->csv) fclose(t->csv);
    t->csv = NULL;
    const ex_curve curves[] = {{3, "train loss", false}, {4, "validation loss", true}};
    bool plotted =
        ex_plot_png(t->csv_path, t->png_path, title, "step", "loss (nats)", 1, curves, 2);
    double med = 0, best = 0;
    if (t->nsteps_run > 0) {
        qsort(t->step_ms, (size_t)t->nsteps_run, sizeof *t->step_ms, cmp_double);
        med = t->step_ms[t->nsteps_run / 2];
        best = t->step_ms[0];
    }
    printf("done: step %lld of %lld; this run: %lld steps in %.1f s, step time median %.2f ms "
           "(min %.2f), %.0f tokens/s\n",
           (long long)t->step, (long long)t->planned, (long long)t->nsteps_run,
           ex_progress_elapsed(&t->bar), med, best,
           med > 0 ? (double)(o->batch * o->block) / (med * 1e-3) : 0.0);
    printf("val loss: %.4f -> %.4f at step %lld (best %.4f at step %lld)\n", t->val_first,
           t->val_last, (long long)t->val_step, t->val_best, (long long)t->best_step);
    printf("final: step %lld train_loss %.9g val_loss %.9g\n", (long long)t->step, t->train_last,
           t->val_last);
    printf("wrote %s, %s%s%s\n", t->csv_path, t->ckpt_path, plotted ? ", " : "",
           plotted ? t->png_path : "");
}

/* ---- the loop's options --------------------------------------------------------- */

int ex_trainer_args(ex_trainer_opts *o, ex_arg *args) {
    const ex_arg loop[EX_TRAINER_NARGS] = {
        {"batch", EX_ARG_INT, &o->batch, "sequences per step B", EX_MIN(1)},
        {"steps", EX_ARG_INT, &o->steps,
         "optimizer steps (the schedule's length; a --resume keeps it)", EX_MIN(1)},
        {"stop-after", EX_ARG_INT, &o->stop_after,
         "stop at this step, keeping the schedule of --steps (0: no stop)", EX_MIN(0)},
        {"minutes", EX_ARG_DOUBLE, &o->minutes, "wall-clock budget; 0 for none", EX_MIN(0)},
        {"lr", EX_ARG_DOUBLE, &o->lr, "peak learning rate", EX_POS},
        {"min-lr", EX_ARG_DOUBLE, &o->min_lr, "learning rate at the end of the cosine", EX_MIN(0)},
        {"warmup", EX_ARG_INT, &o->warmup, "linear warm-up steps", EX_MIN(0)},
        {"weight-decay", EX_ARG_DOUBLE, &o->weight_decay, "AdamW decoupled weight decay",
         EX_MIN(0)},
        {"clip", EX_ARG_DOUBLE, &o->clip, "clip the global gradient norm to this (0: off)",
         EX_MIN(0)},
        {"eval-every", EX_ARG_INT, &o->eval_every, "validation loss period in steps", EX_MIN(1)},
        {"sample-every", EX_ARG_INT, &o->sample_every, "sample period in steps (0: end only)",
         EX_MIN(0)},
        {"sample-len", EX_ARG_INT, &o->sample_len, "tokens per sample", EX_MIN(0)},
        {"sample-prompt", EX_ARG_STRING, &o->sample_prompt, "text the samples continue", EX_ANY},
        {"temperature", EX_ARG_DOUBLE, &o->temperature, "sampling temperature (0: greedy)",
         EX_MIN(0)},
        {"ckpt-every", EX_ARG_INT, &o->ckpt_every, "checkpoint period in steps (0: end only)",
         EX_MIN(0)},
    };
    memcpy(args, loop, sizeof loop);
    return EX_TRAINER_NARGS;
}
