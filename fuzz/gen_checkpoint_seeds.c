/* SPDX-License-Identifier: MIT */
/* gen_checkpoint_seeds.c - writes the seed corpus of fuzz_checkpoint
 * (fuzz/corpus/checkpoint/) with the library itself: small valid
 * checkpoints of the model in checkpoint_model.h. Built and run by
 *   fuzz/run.sh --seeds
 * (the seeds are committed; rerun it when the checkpoint format changes).
 *   adam_amsgrad_3.ckpt   Adam + amsgrad + weight decay after 3 steps
 *   adam_step0.ckpt       Adam saved before its first step (no state)
 *   adamw_2groups_2.ckpt  AdamW, w and b in two groups, after 2 steps
 *   sgd_momentum_2.ckpt   SGD with momentum, dampening, nesterov off, 2 steps
 *   params_only.ckpt      no optimizer, with caller metadata
 *   adam_plain_2.ckpt     Adam after 2 steps
 *   adam_v1_2.ckpt        Adam after 2 steps in the version 1 layout (no
 *                         optim.param.<i>.states), as older savers wrote */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_model.h"

static int save(const char *dir, const char *leaf, const fc_optim_opts *o, int steps,
                int two_groups) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, leaf);
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 7});
    ckm m;
    int rc = ckm_new(ctx, &m, o) ? 1 : 0;
    if (!rc && two_groups) {
        /* rebuild: w alone in group 0, b in group 1 with its own lr */
        fc_optim_free(m.opt);
        m.opt = fc_optim_new(ctx, o, m.p, 1);
        fc_optim_opts o2 = *o;
        o2.lr = o->lr / 2;
        if (!m.opt || fc_optim_add_group(m.opt, &o2, m.p + 1, 1) != FC_OK) rc = 1;
    }
    for (int s = 0; s < steps && !rc; s++)
        rc = ckm_step(ctx, &m) ? 1 : 0;
    const char *mk[1] = {"epoch"}, *mv[1] = {"2"};
    if (!rc && fc_checkpoint_save(ctx, path, ckm_names, m.p, 2, m.opt, mk, mv, 1) != FC_OK) rc = 1;
    if (rc) fprintf(stderr, "gen_checkpoint_seeds: %s: %s\n", path, fc_ctx_error(ctx));
    ckm_free(&m);
    fc_ctx_free(ctx);
    return rc;
}

/* The version 1 layout: the same file without the state lists. */
static int to_v1(const char *dir, const char *from, const char *leaf) {
    char src[1024], dst[1024];
    snprintf(src, sizeof src, "%s/%s", dir, from);
    snprintf(dst, sizeof dst, "%s/%s", dir, leaf);
    fc_st_file *f = NULL;
    if (fc_safetensors_open(src, NULL, &f) != FC_OK) return 1;
    int64_t nt = fc_safetensors_tensor_count(f), nm = fc_safetensors_meta_count(f), km = 0;
    fc_io_tensor *t = calloc((size_t)nt + 1, sizeof *t);
    const char **k = calloc((size_t)nm + 1, sizeof *k), **v = calloc((size_t)nm + 1, sizeof *v);
    int rc = !t || !k || !v;
    for (int64_t i = 0; i < nt && !rc; i++)
        rc = fc_safetensors_tensor_info(f, i, &t[i]) != FC_OK;
    for (int64_t i = 0; i < nm && !rc; i++) {
        rc = fc_safetensors_meta_at(f, i, &k[km], &v[km]) != FC_OK;
        size_t n = strlen(k[km]);
        if (n > 7 && !strcmp(k[km] + n - 7, ".states")) continue;
        if (!strcmp(k[km], "fucina.checkpoint")) v[km] = "1";
        km++;
    }
    if (!rc) rc = fc_safetensors_write(dst, t, nt, k, v, km, NULL) != FC_OK;
    free(t);
    free(k);
    free(v);
    fc_safetensors_close(f);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    const fc_optim_opts adam = {
        .kind = FC_OPTIM_ADAM, .lr = 0.05, .amsgrad = true, .weight_decay = 0.01};
    const fc_optim_opts adamw = {.kind = FC_OPTIM_ADAMW, .lr = 0.01, .weight_decay = 0.1};
    const fc_optim_opts plain = {.kind = FC_OPTIM_ADAM, .lr = 0.05};
    const fc_optim_opts sgd = {.kind = FC_OPTIM_SGD, .lr = 0.1, .momentum = 0.9, .dampening = 0.1};
    int rc = save(dir, "adam_amsgrad_3.ckpt", &adam, 3, 0);
    rc |= save(dir, "adam_step0.ckpt", &adam, 0, 0);
    rc |= save(dir, "adamw_2groups_2.ckpt", &adamw, 2, 1);
    rc |= save(dir, "sgd_momentum_2.ckpt", &sgd, 2, 0);
    rc |= save(dir, "params_only.ckpt", NULL, 0, 0);
    rc |= save(dir, "adam_plain_2.ckpt", &plain, 2, 0);
    rc |= to_v1(dir, "adam_plain_2.ckpt", "adam_v1_2.ckpt");
    return rc;
}
