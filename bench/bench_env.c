/* SPDX-License-Identifier: MIT */
/* bench_env.c - the "env" object of every fucina-bench JSON line: which
 * machine, which SIMD level and backend a figure measured. Kept apart from
 * the protocol (bench.c), which bench/ggml/qmatvec.c reuses without fucina. */
#include <stdlib.h>

#include "bench.h"
#include "fucina.h"

void bench_json_env(FILE *f, int threads) {
    double la[3] = {0};
    FILE *l = fopen("/proc/loadavg", "r");
    if (l) {
        if (fscanf(l, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = la[1] = la[2] = 0;
        fclose(l);
    }
    const char *be = getenv("FUCINA_BACKEND");
    const char *dnnl = getenv("ONEDNN_MAX_CPU_ISA"), *ob = getenv("OPENBLAS_CORETYPE");
    /* the CPU and the SIMD level the run used, so a figure always says
     * which machine and which kernels it measured */
    fprintf(f,
            "\"env\": {\"fucina_threads\": %d, \"FUCINA_BACKEND\": \"%s\", \"cpu\": \"%s\", "
            "\"isa\": \"%s\", \"ONEDNN_MAX_CPU_ISA\": \"%s\", \"OPENBLAS_CORETYPE\": \"%s\", "
            "\"loadavg\": [%.2f, %.2f, %.2f]}",
            threads, be ? be : "auto", fc_cpu_name(), fc_cpu_isa(), dnnl ? dnnl : "", ob ? ob : "",
            la[0], la[1], la[2]);
}
