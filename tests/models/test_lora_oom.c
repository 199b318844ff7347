/* SPDX-License-Identifier: MIT */
/* test_lora_oom.c - the out-of-memory sweeps of the adapter API (see
 * oom_sweep.h for what is checked at every failing allocation): making an
 * adapter over a q8_0 base and one training step (forward with dropout,
 * backward through the quantized products, Adam), loading and saving an
 * adapter file, and loading it and writing the merged GGUF. The base is a
 * 1-layer q8_0 model written at setup. Apart from test_lora_bad.c because
 * every recovered run of the file sweeps writes a file (and fsyncs it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fucina/llama.h"
#include "fucina/lora.h"
#include "oom_sweep.h"

static const fc_ctx_opts ONE_THREAD = {.threads = 1};
/* The base read, not mapped: a mapping per run costs more than the run. */
static const fc_llama_load_opts READ = {.io_flags = FC_IO_NO_MMAP};

static void tmp_path(char *buf, size_t cap, const char *tag) {
    snprintf(buf, cap, "%s/tests/test_lora_oom_%ld_%s", FUCINA_BINARY_DIR, (long)getpid(), tag);
}

/* Where the sweeps write: a memory file system when there is one. Every
 * recovered run writes the file once and the atomic writer fsyncs it
 * twice; on a disk that is most of this test's time, and durability is
 * not what a sweep checks. */
static void out_path(char *buf, size_t cap, const char *tag) {
    if (access("/dev/shm", W_OK) == 0)
        snprintf(buf, cap, "/dev/shm/test_lora_oom_%ld_%s", (long)getpid(), tag);
    else
        tmp_path(buf, cap, tag);
}

static char SWEEP_BASE[512]; /* a 1-layer q8_0 model, written at setup */
static char SWEEP_LORA[512]; /* an adapter of it */
static char SWEEP_OUT[512];  /* where the scenarios write */

static int setup(void **s) {
    (void)s;
    tmp_path(SWEEP_BASE, sizeof SWEEP_BASE, "sweep.gguf");
    tmp_path(SWEEP_LORA, sizeof SWEEP_LORA, "sweep.safetensors");
    out_path(SWEEP_OUT, sizeof SWEEP_OUT, "sweep_out");
    fc_ctx *ctx = fc_ctx_new(&ONE_THREAD);
    fc_llama_config c = {.vocab = 16,
                         .dim = 32,
                         .n_heads = 2,
                         .n_kv_heads = 1,
                         .n_layers = 1,
                         .ff_dim = 64,
                         .context = 8};
    fc_llama *m = NULL;
    if (fc_llama_new(ctx, &c, &m)) return -1;
    fc_llama_save_opts o = fc_llama_save_opts_default();
    o.dtype = FC_Q8_0;
    fc_status st = fc_llama_save(ctx, m, SWEEP_BASE, &o);
    fc_llama_free(m);
    if (!st) st = fc_llama_load(ctx, SWEEP_BASE, &READ, &m);
    /* two targets: every run of the file sweeps writes (and fsyncs) once */
    fc_lora_config lc = {
        .rank = 2, .alpha = 4, .dropout = 0.1, .targets = FC_LORA_Q | FC_LORA_DOWN};
    fc_lora *l = NULL;
    if (!st) st = fc_lora_new(ctx, m, &lc, &l);
    if (!st) st = fc_lora_save(ctx, l, SWEEP_LORA);
    fc_lora_free(l);
    fc_llama_free(m);
    fc_ctx_free(ctx);
    return st ? -1 : 0;
}

static int teardown(void **s) {
    (void)s;
    unlink(SWEEP_BASE);
    unlink(SWEEP_LORA);
    unlink(SWEEP_OUT);
    return 0;
}

/* An adapter over the q8_0 base and one training step: forward with
 * dropout, cross-entropy, backward, Adam. */
static fc_status oom_new_and_step(fc_ctx *ctx) {
    fc_llama *m = NULL;
    fc_status st = fc_llama_load(ctx, SWEEP_BASE, &READ, &m);
    if (st) return st;
    fc_lora_config lc = {.rank = 2, .alpha = 4, .dropout = 0.1, .targets = FC_LORA_ALL};
    fc_lora *l = NULL;
    st = fc_lora_new(ctx, m, &lc, &l);
    fc_optim *opt = NULL;
    if (!st) {
        fc_tensor *p[14];
        fc_lora_params(l, p, 14);
        fc_optim_opts oo = {.kind = FC_OPTIM_ADAM, .lr = 1e-3};
        opt = fc_optim_new(ctx, &oo, p, 14);
        if (!opt) st = fc_ctx_status(ctx) ? fc_ctx_status(ctx) : FC_ERR_OOM;
    }
    if (!st) {
        fc_scope_begin(ctx);
        fc_tensor *x =
            fc_tensor_from_data(ctx, FC_I32, (int64_t[]){1, 4}, 2, (const int32_t[]){1, 5, 9, 2});
        fc_tensor *y =
            fc_tensor_from_data(ctx, FC_I64, (int64_t[]){4}, 1, (const int64_t[]){5, 9, 2, 3});
        fc_tensor *logits = fc_llama_forward(ctx, m, x);
        fc_tensor *loss =
            fc_cross_entropy(ctx, fc_reshape(ctx, logits, (int64_t[]){4, 16}, 2), y, NULL);
        st = loss ? fc_backward(ctx, loss) : fc_ctx_status(ctx);
        if (!st) st = fc_optim_step(opt);
        fc_scope_end(ctx);
    }
    fc_optim_free(opt);
    fc_lora_free(l);
    fc_llama_free(m);
    return st ? st : fc_ctx_status(ctx);
}

static fc_status oom_save_load(fc_ctx *ctx) {
    fc_llama *m = NULL;
    fc_status st = fc_llama_load(ctx, SWEEP_BASE, &READ, &m);
    if (st) return st;
    fc_lora *l = NULL;
    st = fc_lora_load(ctx, m, SWEEP_LORA, &l);
    if (!st) st = fc_lora_save(ctx, l, SWEEP_OUT);
    fc_lora_free(l);
    fc_llama_free(m);
    return st;
}

static fc_status oom_merge(fc_ctx *ctx) {
    fc_llama *m = NULL;
    fc_status st = fc_llama_load(ctx, SWEEP_BASE, &READ, &m);
    if (st) return st;
    fc_lora *l = NULL;
    st = fc_lora_load(ctx, m, SWEEP_LORA, &l);
    if (!st) st = fc_lora_merge_save(ctx, l, SWEEP_OUT, NULL);
    fc_lora_free(l);
    fc_llama_free(m);
    return st;
}

static void test_lora_oom_sweeps(void **s) {
    (void)s;
    const oom_scenario sc[] = {{"lora new + training step", oom_new_and_step},
                               {"lora load + save", oom_save_load},
                               {"lora load + merge_save", oom_merge}};
    for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++) {
        oom_result r = oom_sweep(&sc[i]);
        printf("oom sweep %s: %ld failing runs, completes at N=%ld\n", sc[i].name, r.failures,
               r.largest_n);
        assert_true(r.failures > 10);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lora_oom_sweeps),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
