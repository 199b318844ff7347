/* fault_prog.c - the program tests/dist/fault.cmake runs as 2 ranks to see
 * what a fault does to the other rank. Both ranks train a small model
 * through fc_ddp; at step 3 rank 1 misbehaves:
 *   exit   it exits at once with status 3 (no MPI_Finalize), as a crash
 *          would: mpirun must end rank 0, which is waiting in
 *          fc_ddp_sync, and the job must fail;
 *   stall  it sleeps instead of taking part, without exiting (a hung or
 *          unreachable peer): rank 0's fc_ddp_sync must fail with
 *          FC_ERR_COMM at its deadline (FUCINA_DIST_TIMEOUT_S), and its
 *          fc_dist_abort must end the job.
 * Rank 0 prints "rank 0 finished" only if it got through every step, which
 * it must not. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fucina.h"

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 1});
    fc_dist *d = NULL;
    if (!ctx || fc_dist_init(ctx, &argc, &argv, NULL, &d) != FC_OK) {
        fprintf(stderr, "fault_prog: %s\n", ctx ? fc_ctx_error(ctx) : "no context");
        return 1;
    }
    int rank = fc_dist_rank(d);
    fc_tensor *w = fc_param_randn(ctx, FC_F32, (const int64_t[]){64, 64}, 2, 0.1);
    fc_optim *opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_SGD, .lr = 0.1}, &w, 1);
    fc_ddp *ddp = opt ? fc_ddp_new(d, opt, NULL) : NULL;
    if (!ddp) {
        fprintf(stderr, "fault_prog: %s\n", fc_ctx_error(ctx));
        return 1;
    }
    for (int step = 0; step < 6; step++) {
        if (step == 3 && rank == 1) {
            fprintf(stderr, "fault_prog: rank 1 %s at step %d\n", mode, step);
            fflush(stderr);
            if (strcmp(mode, "exit") == 0) _exit(3);
            for (int i = 0; i < 60; i++)
                sleep(1); /* mpirun's abort ends this */
        }
        fc_scope_begin(ctx);
        fc_tensor *loss = fc_sum(ctx, fc_mul(ctx, w, w), NULL, 0, false);
        fc_status st = fc_backward(ctx, loss);
        fc_scope_end(ctx);
        if (st == FC_OK) st = fc_ddp_sync(ddp);
        if (st != FC_OK) {
            fprintf(stderr, "fault_prog: rank %d step %d: %s: %s\n", rank, step, fc_status_name(st),
                    fc_ctx_error(ctx));
            fflush(stderr);
            fc_dist_abort(d, 4);
        }
        fc_optim_step(opt);
        fc_optim_zero_grad(opt);
    }
    printf("rank %d finished\n", rank);
    fc_ddp_free(ddp);
    fc_optim_free(opt);
    fc_release(w);
    fc_dist_free(d);
    fc_ctx_free(ctx);
    return 0;
}
