/* SPDX-License-Identifier: MIT */
/* fucina/cpu.h - the CPU the library runs on, and the SIMD level it uses.
 *
 * Every SIMD kernel of the library (half-float conversions, row kernels,
 * transcendentals, quantized dots, optimizers) is chosen at run time from
 * one level, never from build flags:
 *
 *     "portable"  plain C; every CPU, and every CPU that is not x86-64
 *     "avx2"      x86-64 with AVX2, FMA and F16C
 *     "avx512"    "avx2" plus AVX-512 F, BW, VL and DQ
 *
 * The level is the widest the CPU and the operating system support, capped
 * by the environment variable FUCINA_ISA=portable|avx2|avx512 when it is set
 * (read once, at the first call into the library that needs it; an unknown
 * value caps nothing). Results do not depend on the level except where an
 * op's documentation says so (the transcendentals agree within their
 * stated accuracy, not bit for bit). The matmul libraries have caps of their
 * own: ONEDNN_MAX_CPU_ISA for oneDNN and OPENBLAS_CORETYPE for OpenBLAS. */
#ifndef FUCINA_CPU_H
#define FUCINA_CPU_H

#include "fucina/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CPU's brand string (e.g. "AMD EPYC 7B13 64-Core Processor"), or
 * "unknown" where the CPU does not report one. Static storage; never NULL;
 * safe from any thread. */
FC_API const char *fc_cpu_name(void);
/* The SIMD level in use: "portable", "avx2" or "avx512" (see above).
 * Static storage; never NULL; safe from any thread. */
FC_API const char *fc_cpu_isa(void);

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_CPU_H */
