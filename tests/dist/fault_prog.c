/* SPDX-License-Identifier: MIT */
/* fault_prog.c - the program tests/dist/fault.cmake runs as 2 ranks to see
 * what a fault at one point of a data-parallel step does to the job.
 *
 *   fault_prog MODE DIR         (under mpirun, 2 ranks)
 *   fault_prog check DIR STEPS  (one process, no MPI)
 *
 * Both ranks train two parameters (two gradient buckets) through fc_ddp,
 * SGD with momentum; after every step rank 0 writes DIR/ckpt.safetensors
 * (steps done in its metadata) and the ranks meet in fc_dist_barrier, so
 * the file holds step 3 whenever the fault strikes at step 3, as here:
 *   ok         no fault: both ranks finish (6 steps) and exit 0
 *   exit       rank 1 exits at once (status 3, no MPI_Finalize), as a crash
 *   backward   rank 1's backward fails half way: a hook of its own returns
 *              FC_ERR_NON_FINITE after fc_ddp's hooks started both buckets
 *   stall      rank 1 sleeps instead of taking part, without exiting: rank
 *              0's fc_ddp_sync fails at its deadline (FUCINA_DIST_TIMEOUT_S)
 *   sync_kill  rank 1 is killed (SIGALRM) inside fc_ddp_sync, waiting for a
 *              rank 0 that is late
 *   ckpt       rank 0's checkpoint write fails half way through the file
 *              (FC_ERR_IO from the atomic writer's fault plan)
 *   ckpt_kill  rank 0 is killed (SIGXFSZ: RLIMIT_FSIZE) half way through
 *              writing the checkpoint
 *   user       rank 1 has an error of its own, not fucina's: it says so with
 *              fc_dist_fail(d, FC_ERR_IO)
 *   leave      rank 1 leaves without any error while rank 0 is stalled: its
 *              fc_dist_free waits the deadline for rank 0, then ends the job
 * A rank that sees an error takes the error path of fucina/dist.h as a
 * program would: it frees everything and calls fc_dist_free, which must end
 * the job (MPI_Abort) instead of hanging it; only "user" calls fc_dist_fail
 * (fucina did not record that error). Each rank prints "rank R finished"
 * only if it got through every step.
 *
 * check loads DIR/ckpt.safetensors into a fresh model and optimizer and
 * requires it to hold STEPS steps, bit for bit what STEPS steps of the same
 * training give in one process, optimizer state included (one more step
 * from each must agree too); it prints how many temporary files of the
 * atomic writer were left in DIR (a write killed half way leaves one). */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fucina.h"
#include "io/io.h"

/* the atomic writer's fault plan (src/io/checkpoint.c; tests only) */
fc_status fc__checkpoint_save_faulty(fc_ctx *ctx, const char *path, const char *const *names,
                                     fc_tensor *const *params, int n, const fc_optim *opt,
                                     const char *const *meta_keys, const char *const *meta_values,
                                     int n_meta, const void *fault);

enum { STEPS = 6, FAULT_STEP = 3, V_NUMEL = 256 * 1024 };
static const char *const g_names[2] = {"w", "v"};

typedef struct model {
    fc_ctx *ctx;
    fc_tensor *p[2]; /* w 64x64 (16 KiB), v 1 MiB: the checkpoint is about 2 MiB */
    fc_optim *opt;
} model;

static bool model_new(model *m) {
    m->ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 1});
    if (!m->ctx) return false;
    m->p[0] = fc_param_randn(m->ctx, FC_F32, (const int64_t[]){64, 64}, 2, 0.1);
    m->p[1] = fc_param_randn(m->ctx, FC_F32, (const int64_t[]){V_NUMEL}, 1, 0.1);
    fc_optim_opts oo = {.kind = FC_OPTIM_SGD, .lr = 0.1, .momentum = 0.9};
    m->opt = fc_ctx_status(m->ctx) == FC_OK ? fc_optim_new(m->ctx, &oo, m->p, 2) : NULL;
    return m->opt != NULL;
}

static void model_free(model *m) {
    fc_optim_free(m->opt);
    fc_release(m->p[0]);
    fc_release(m->p[1]);
}

/* loss = sum(w*w) + sum(v*v); FC_OK or the backward's error */
static fc_status backward(model *m) {
    fc_ctx *ctx = m->ctx;
    fc_scope_begin(ctx);
    fc_tensor *loss = fc_add(ctx, fc_sum(ctx, fc_mul(ctx, m->p[0], m->p[0]), NULL, 0, false),
                             fc_sum(ctx, fc_mul(ctx, m->p[1], m->p[1]), NULL, 0, false));
    fc_status st = fc_backward(ctx, loss);
    fc_scope_end(ctx);
    return st;
}

/* "backward": armed, the second parameter's hook fails (fc_ddp's hook on it
 * ran first: both buckets have started) */
static int g_hook_calls = -1;
static fc_status failing_hook(fc_ctx *ctx, fc_tensor *grad, fc_tensor **replace, void *user) {
    (void)ctx, (void)grad, (void)replace, (void)user;
    if (g_hook_calls < 0) return FC_OK;
    return ++g_hook_calls == 2 ? FC_ERR_NON_FINITE : FC_OK;
}

static fc_status save(model *m, const char *path, int steps, const fc_io_fault *fault) {
    char buf[16];
    snprintf(buf, sizeof buf, "%d", steps);
    const char *k = "fault.steps", *v = buf;
    return fc__checkpoint_save_faulty(m->ctx, path, g_names, m->p, 2, m->opt, &k, &v, 1, fault);
}

static int count_tmp(const char *dir) {
    DIR *dp = opendir(dir);
    int n = 0;
    for (struct dirent *e; dp && (e = readdir(dp));)
        n += strncmp(e->d_name, ".ckpt.safetensors.tmp-", 22) == 0;
    if (dp) closedir(dp);
    return n;
}

/* One plain step (one process: the mean over ranks of equal gradients is
 * the gradient itself, exactly). */
static bool step_once(model *m) {
    if (backward(m) != FC_OK || fc_optim_step(m->opt) != FC_OK) return false;
    fc_optim_zero_grad(m->opt);
    return true;
}

static bool same(const model *a, const model *b) {
    for (int i = 0; i < 2; i++)
        if (memcmp(fc_tensor_data(a->p[i]), fc_tensor_data(b->p[i]), fc_tensor_nbytes(a->p[i])))
            return false;
    return true;
}

static int check(const char *dir, int steps) {
    char path[4096];
    snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
    model ref, got;
    if (!model_new(&ref) || !model_new(&got)) return fprintf(stderr, "check: no model\n"), 1;
    for (int s = 0; s < steps; s++)
        if (!step_once(&ref)) return fprintf(stderr, "check: %s\n", fc_ctx_error(ref.ctx)), 1;
    if (fc_checkpoint_load(got.ctx, path, g_names, got.p, 2, got.opt) != FC_OK)
        return fprintf(stderr, "check: %s does not load: %s\n", path, fc_ctx_error(got.ctx)), 1;
    fc_st_file *f = NULL;
    const char *meta = fc_safetensors_open(path, NULL, &f) == FC_OK
                           ? fc_safetensors_meta_find(f, "fault.steps")
                           : NULL;
    int says = meta ? atoi(meta) : -1;
    fc_safetensors_close(f);
    if (says != steps)
        return fprintf(stderr, "check: %s holds step %d, not %d\n", path, says, steps), 1;
    if (!same(&ref, &got))
        return fprintf(stderr, "check: %s: the parameters are not step %d's\n", path, steps), 1;
    if (!step_once(&ref) || !step_once(&got) || !same(&ref, &got))
        return fprintf(stderr, "check: one step after loading, the parameters differ "
                               "(the optimizer state)\n"),
               1;
    printf("checkpoint: step %d, loads, bit-exact; temporary files left: %d\n", steps,
           count_tmp(dir));
    model_free(&ref);
    model_free(&got);
    fc_ctx_free(ref.ctx);
    fc_ctx_free(got.ctx);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "", *dir = argc > 2 ? argv[2] : ".";
    if (strcmp(mode, "check") == 0) return check(dir, argc > 3 ? atoi(argv[3]) : -1);
    model m;
    fc_dist *d = NULL;
    if (!model_new(&m) || fc_dist_init(m.ctx, &argc, &argv, NULL, &d) != FC_OK) {
        fprintf(stderr, "fault_prog: %s\n", m.ctx ? fc_ctx_error(m.ctx) : "no context");
        return 1;
    }
    int rank = fc_dist_rank(d);
    char path[4096];
    snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
    fc_ddp *ddp = fc_ddp_new(d, m.opt, &(fc_ddp_opts){.bucket_bytes = 64 << 10});
    fc_status st = ddp && fc_ddp_bucket_count(ddp) == 2 ? FC_OK : FC_ERR_STATE;
    for (int i = 0; i < 2 && st == FC_OK; i++)
        st = fc_grad_hook_add(m.p[i], failing_hook, NULL, NULL);
    bool me = rank == (strncmp(mode, "ckpt", 4) == 0 ? 0 : 1); /* the rank that misbehaves */
    int step = 0;
    for (; step < STEPS && st == FC_OK; step += st == FC_OK) { /* a failed step keeps its number */
        if (step == FAULT_STEP && me) {
            fprintf(stderr, "fault_prog: rank %d: %s at step %d\n", rank, mode, step);
            fflush(stderr);
        }
        bool fault = step == FAULT_STEP;
        if (fault && me && strcmp(mode, "exit") == 0) _exit(3);
        if (fault && me && strcmp(mode, "stall") == 0) sleep(60); /* an abort ends it */
        if (fault && me && strcmp(mode, "user") == 0) {
            fc_dist_fail(d, FC_ERR_IO);
            break;
        }
        if (fault && me && strcmp(mode, "leave") == 0) break; /* no error at all */
        if (fault && !me && (strcmp(mode, "sync_kill") == 0 || strcmp(mode, "leave") == 0))
            sleep(60); /* late (or stalled): the other rank waits for this one */
        if (fault && me && strcmp(mode, "backward") == 0) g_hook_calls = 0;
        if (fault && me && strcmp(mode, "sync_kill") == 0) alarm(1); /* lands in fc_ddp_sync */
        st = backward(&m);
        if (st == FC_OK) st = fc_ddp_sync(ddp);
        if (st == FC_OK) st = fc_ddp_step(ddp);
        fc_optim_zero_grad(m.opt);
        if (st == FC_OK && rank == 0) {
            /* half way through the file: about 1 MiB of 2 */
            fc_io_fault half = {.step = FC_IO_FAULT_WRITE, .after_bytes = 1 << 20, .errnum = 28};
            if (fault && strcmp(mode, "ckpt_kill") == 0) {
                setrlimit(RLIMIT_CORE, &(struct rlimit){0, 0});
                setrlimit(RLIMIT_FSIZE, &(struct rlimit){1 << 20, 1 << 20});
            }
            st = save(&m, path, step + 1, fault && strcmp(mode, "ckpt") == 0 ? &half : NULL);
        }
        if (st == FC_OK) st = fc_dist_barrier(d);
    }
    if (st != FC_OK)
        fprintf(stderr, "fault_prog: rank %d step %d: %s: %s\n", rank, step, fc_status_name(st),
                fc_ctx_error(m.ctx));
    else if (step == STEPS)
        printf("rank %d finished\n", rank);
    fflush(stdout);
    fflush(stderr);
    /* the error path and the way out of a success are the same */
    fc_ddp_free(ddp);
    model_free(&m);
    fc_dist_free(d); /* ends the job if this rank failed */
    fc_ctx_free(m.ctx);
    return st == FC_OK && step == STEPS ? 0 : 1;
}
