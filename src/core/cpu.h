/* SPDX-License-Identifier: MIT */
/* core/cpu.h - the one CPU-feature module of the library.
 *
 * Every SIMD family (half-float rows, the row kernels, the unary
 * transcendentals, the quantized dots, the optimizer) asks this module
 * which instruction sets it may use; none probes the CPU itself. The
 * answer is a level, narrowest first:
 *
 *     portable   plain C, every CPU (what aarch64 and other ISAs run)
 *     avx2       x86-64 with AVX2, FMA and F16C (x86-64-v3: Haswell, Zen 1)
 *     avx512     avx2 plus AVX-512 F, BW, VL and DQ (x86-64-v4: Skylake-SP,
 *                Ice Lake, Sapphire Rapids, Zen 4)
 *
 * A family whose kernels need one more feature than its level gives
 * (the AVX-512 quantized dots use VNNI) checks that feature in fc__cpu()
 * as well as the level.
 *
 * The level in effect is the smallest of three:
 *  - what the CPU, the OS (saved register state) and this build run,
 *    detected once per process;
 *  - the environment's cap, FUCINA_ISA=portable|avx2|avx512, read once
 *    (an unknown value caps nothing), so an AVX-512 host can run every
 *    family exactly as an AVX2-only host or a non-x86 host would;
 *  - the test cap set with fc__isa_set_cap, which lets a test run every
 *    set the machine has in one process.
 * Queries are a relaxed atomic load once detection has run; they are safe
 * from any thread. */
#ifndef FUCINA_CORE_CPU_H
#define FUCINA_CORE_CPU_H

#include <stdbool.h>

/* SIMD levels, narrowest first; each includes the ones before it. */
typedef enum fc__isa { FC__ISA_PORTABLE, FC__ISA_AVX2, FC__ISA_AVX512, FC__ISA_COUNT } fc__isa;

/* What the CPU offers (and the OS enables), independent of any cap. */
typedef struct fc__cpu_info {
    bool x86;                                         /* built for x86-64 */
    bool avx2, fma, f16c;                             /* the avx2 level */
    bool avx512f, avx512bw, avx512vl, avx512dq;       /* the avx512 level */
    bool avx512vnni, avx512bf16, avx512fp16, avxvnni; /* extras some kernels use */
    char name[64];                                    /* brand string; "unknown" when absent */
} fc__cpu_info;

/* The CPU's features, detected on the first call. Never NULL; static storage. */
const fc__cpu_info *fc__cpu(void);

/* The widest level the CPU, OS and build run, ignoring every cap. */
fc__isa fc__isa_detected(void);
/* The level every dispatched kernel uses now: detected, FUCINA_ISA and the
 * test cap, whichever is narrowest. */
fc__isa fc__isa_level(void);
/* Whether isa's kernels may run now (isa <= fc__isa_level()); false out of range. */
bool fc__isa_enabled(fc__isa isa);

/* The test cap: the level kernels may use at most (FUCINA_ISA still caps
 * below it). Returns the previous test cap; FC__ISA_COUNT - 1 (the default)
 * removes it. Not for use while kernels run on other threads: a kernel
 * that asked before the change may finish on the old level. */
fc__isa fc__isa_set_cap(fc__isa cap);
/* The environment's cap (FC__ISA_COUNT - 1 when FUCINA_ISA is unset or unknown). */
fc__isa fc__isa_env_cap(void);

/* "portable", "avx2", "avx512"; "invalid" out of range. Static storage. */
const char *fc__isa_name(fc__isa isa);
/* The level named s (exactly as fc__isa_name spells it); false for
 * anything else, leaving *out untouched. */
bool fc__isa_from_name(const char *s, fc__isa *out);

#endif /* FUCINA_CORE_CPU_H */
