/* SPDX-License-Identifier: MIT */
/* dist_allreduce.c - times fucina's deterministic all-reduce
 * (fc_dist_all_reduce: MPI_Ialltoall, a rank-order sum, MPI_Iallgather)
 * and the data-parallel wrapper's reduction of one bucket (fc_ddp_sync
 * after a backward, every bucket started there: its buffers are made once)
 * against Open MPI's own MPI_Allreduce on the same buffer, for the note's
 * communication figures (docs/dist.md). Built only with MPI; run under
 * mpirun: dist_allreduce [floats (default 820000, the GPT trainer's
 * gradient)] [repetitions (default 30)]. Prints one JSON line from rank 0:
 * the median milliseconds of each and the bus bandwidth 2 (N-1)/N bytes /
 * time. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "fucina.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 820000;
    int reps = argc > 2 ? atoi(argv[2]) : 30;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    fc_dist *d = NULL;
    if (n < 1 || reps < 1 || !ctx || fc_dist_init(ctx, &argc, &argv, NULL, &d) != FC_OK) {
        fprintf(stderr, "dist_allreduce: %s\n", ctx ? fc_ctx_error(ctx) : "bad arguments");
        return 1;
    }
    fc_tensor *t = fc_ones(ctx, FC_F32, &n, 1);
    float *buf = malloc(sizeof(float) * (size_t)n), *out = malloc(sizeof(float) * (size_t)n);
    double *ours = malloc(sizeof(double) * (size_t)reps),
           *mpi = malloc(sizeof(double) * (size_t)reps);
    double *ddp_ms = malloc(sizeof(double) * (size_t)reps);
    fc_tensor *p = fc_param_zeros(ctx, FC_F32, &n, 1), *c = fc_ones(ctx, FC_F32, &n, 1);
    fc_optim *opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_SGD, .lr = 0}, &p, 1);
    fc_ddp *w = fc_ddp_new(d, opt, &(fc_ddp_opts){.no_overlap = true});
    if (!w) {
        fprintf(stderr, "dist_allreduce: %s\n", fc_ctx_error(ctx));
        return 1;
    }
    for (int64_t i = 0; i < n; i++)
        buf[i] = 1.0f;
    for (int r = -3; r < reps; r++) { /* 3 warm-up rounds */
        fc_dist_barrier(d);
        double t0 = MPI_Wtime();
        if (fc_dist_all_reduce(d, &t, 1, FC_DIST_MEAN) != FC_OK) {
            fprintf(stderr, "dist_allreduce: %s\n", fc_ctx_error(ctx));
            return 1;
        }
        double t1 = MPI_Wtime();
        MPI_Barrier(MPI_COMM_WORLD);
        double t2 = MPI_Wtime();
        MPI_Allreduce(buf, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double t3 = MPI_Wtime();
        fc_scope_begin(ctx);
        fc_backward(ctx, fc_sum(ctx, fc_mul(ctx, p, c), NULL, 0, false));
        fc_scope_end(ctx);
        fc_dist_barrier(d);
        double t4 = MPI_Wtime();
        if (fc_ddp_sync(w) != FC_OK) {
            fprintf(stderr, "dist_allreduce: %s\n", fc_ctx_error(ctx));
            return 1;
        }
        double t5 = MPI_Wtime();
        fc_optim_zero_grad(opt);
        if (r >= 0) {
            ours[r] = 1e3 * (t1 - t0);
            mpi[r] = 1e3 * (t3 - t2);
            ddp_ms[r] = 1e3 * (t5 - t4);
        }
    }
    qsort(ours, (size_t)reps, sizeof *ours, cmp);
    qsort(mpi, (size_t)reps, sizeof *mpi, cmp);
    qsort(ddp_ms, (size_t)reps, sizeof *ddp_ms, cmp);
    int N = fc_dist_size(d);
    double bus = 2.0 * (N - 1) / N * 4.0 * (double)n;
    if (fc_dist_rank(d) == 0)
        printf("{\"ranks\": %d, \"floats\": %lld, \"fc_dist_all_reduce_ms\": %.3f, "
               "\"fc_ddp_sync_ms\": %.3f, \"mpi_allreduce_ms\": %.3f, \"ddp_bus_GBps\": %.2f, "
               "\"mpi_bus_GBps\": %.2f}\n",
               N, (long long)n, ours[reps / 2], ddp_ms[reps / 2], mpi[reps / 2],
               bus / (ddp_ms[reps / 2] * 1e6), bus / (mpi[reps / 2] * 1e6));
    free(buf);
    free(out);
    free(ours);
    free(mpi);
    free(ddp_ms);
    fc_ddp_free(w);
    fc_optim_free(opt);
    fc_release(p);
    fc_release(c);
    fc_release(t);
    fc_dist_free(d);
    fc_ctx_free(ctx);
    return 0;
}
