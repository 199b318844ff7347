/* SPDX-License-Identifier: MIT */
/* fuzz_checkpoint.c - libFuzzer target for fc_checkpoint_load, the reader
 * of the files a trainer resumes from. Each input is written to a memfd and
 * loaded by path into four destinations built fresh per input in a new
 * context (checkpoint_model.h): no optimizer, Adam with amsgrad, AdamW with
 * two groups, SGD with momentum. Beyond "no crash, no sanitizer report,
 * no leak", every load must keep the loader's contract:
 *   - a refusal returns an error status, records a message naming
 *     fc_checkpoint_load, and changes nothing: the parameters' bytes and
 *     generations, every existing optimizer state's bytes, the step count
 *     and the RNG are as before;
 *   - a success leaves a model that can take a training step.
 * Built by fuzz/run.sh against the library compiled with clang and
 * -fsanitize=fuzzer-no-link,address,undefined; seeds in
 * fuzz/corpus/checkpoint (gen_checkpoint_seeds.c). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "checkpoint_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fd = -1;
static char path[64];

/* Everything a load may change, to compare after a refusal. */
typedef struct snap {
    unsigned char bytes[2][96];
    uint32_t gen[2];
    float states[2][3][24];
    int have[2][3];
    int64_t steps;
    uint64_t seed, offset;
} snap;

static int n_state_names(const fc_optim *opt, const char **sn) {
    fc_optim_opts o;
    if (!opt || fc_optim_group_opts(opt, 0, &o) != FC_OK) return 0;
    if (o.kind == FC_OPTIM_SGD) {
        sn[0] = "momentum_buffer";
        return 1;
    }
    sn[0] = "exp_avg", sn[1] = "exp_avg_sq", sn[2] = "max_exp_avg_sq";
    return 3;
}

static void take(fc_ctx *ctx, ckm *m, snap *s) {
    memset(s, 0, sizeof *s);
    const char *sn[3];
    int ns = n_state_names(m->opt, sn);
    for (int k = 0; k < 2; k++) {
        memcpy(s->bytes[k], fc_tensor_data(m->p[k]), fc_tensor_nbytes(m->p[k]));
        s->gen[k] = fc_tensor_generation(m->p[k]);
        for (int j = 0; j < ns; j++) {
            fc_tensor *t = fc_optim_state(m->opt, k, sn[j], false);
            s->have[k][j] = t != NULL;
            if (t) memcpy(s->states[k][j], fc_tensor_data(t), fc_tensor_nbytes(t));
        }
    }
    s->steps = fc_optim_step_count(m->opt);
    fc_ctx_get_rng(ctx, &s->seed, &s->offset);
}

static void load_into(fc_ctx *ctx, ckm *m) {
    snap before, after;
    take(ctx, m, &before);
    fc_status st = fc_checkpoint_load(ctx, path, ckm_names, m->p, 2, m->opt);
    if (st == FC_OK) {
        if (m->opt && ckm_step(ctx, m) != 0) {
            fprintf(stderr, "a loaded checkpoint cannot step: %s\n", fc_ctx_error(ctx));
            abort();
        }
        return;
    }
    const char *msg = fc_ctx_error(ctx);
    if (st > 0 || !msg || !strstr(msg, "fc_checkpoint_load")) {
        fprintf(stderr, "refusal %d without a message naming the loader: '%s'\n", (int)st,
                msg ? msg : "(null)");
        abort();
    }
    take(ctx, m, &after);
    if (memcmp(&before, &after, sizeof before) != 0) {
        fprintf(stderr, "a refused load (%s: %s) changed the model\n", fc_status_name(st), msg);
        abort();
    }
    fc_ctx_clear_error(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fd < 0) {
        fd = memfd_create("fuzz_checkpoint", MFD_CLOEXEC);
        if (fd < 0) abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0) abort();
    for (size_t done = 0; done < size;) {
        ssize_t w = pwrite(fd, data + done, size - done, (off_t)done);
        if (w <= 0) abort();
        done += (size_t)w;
    }
    const fc_optim_opts adam = {
        .kind = FC_OPTIM_ADAM, .lr = 0.05, .amsgrad = true, .weight_decay = 0.01};
    const fc_optim_opts adamw = {.kind = FC_OPTIM_ADAMW, .lr = 0.01, .weight_decay = 0.1};
    const fc_optim_opts sgd = {.kind = FC_OPTIM_SGD, .lr = 0.1, .momentum = 0.9, .dampening = 0.1};
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 3});
    if (!ctx) abort();
    ckm none, a, aw, s;
    if (ckm_new(ctx, &none, NULL) || ckm_new(ctx, &a, &adam) || ckm_new(ctx, &s, &sgd)) abort();
    /* AdamW in two groups: w in group 0, b in group 1 (as the seed) */
    if (ckm_new(ctx, &aw, NULL)) abort();
    aw.opt = fc_optim_new(ctx, &adamw, aw.p, 1);
    fc_optim_opts half = adamw;
    half.lr /= 2;
    if (!aw.opt || fc_optim_add_group(aw.opt, &half, aw.p + 1, 1) != FC_OK) abort();
    /* give the optimizers state before the load, so a load must reset or
     * replace it (and a refusal keep it) */
    if (ckm_step(ctx, &a) || ckm_step(ctx, &s)) abort();
    load_into(ctx, &none);
    load_into(ctx, &a);
    load_into(ctx, &aw);
    load_into(ctx, &s);
    ckm_free(&none);
    ckm_free(&a);
    ckm_free(&aw);
    ckm_free(&s);
    fc_ctx_free(ctx);
    return 0;
}
