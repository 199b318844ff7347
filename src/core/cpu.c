/* SPDX-License-Identifier: MIT */
/* cpu.c - detection of the CPU's features, once, and the caps on the level.
 *
 * x86-64 features come from CPUID and XGETBV directly rather than from
 * __builtin_cpu_supports: compilers disagree on which names the builtin
 * accepts (clang 14 refuses "f16c" and the newer AVX-512 extensions), and a
 * feature is only usable when the OS saves its registers, which XCR0 says.
 * CPUID may trap to a hypervisor, so it runs once (pthread_once) and the
 * answers are cached; the levels read them with relaxed loads. */
#include "core/cpu.h"
#include "fucina/cpu.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CPU_X86 1
#include <cpuid.h>
#endif

static const char *const isa_names[FC__ISA_COUNT] = {"portable", "avx2", "avx512"};

const char *fc__isa_name(fc__isa isa) {
    return (unsigned)isa < FC__ISA_COUNT ? isa_names[isa] : "invalid";
}

bool fc__isa_from_name(const char *s, fc__isa *out) {
    for (int i = 0; s && i < FC__ISA_COUNT; i++) {
        if (strcmp(s, isa_names[i]) == 0) {
            *out = (fc__isa)i;
            return true;
        }
    }
    return false;
}

/* ---- detection ------------------------------------------------------------------------------ */

#ifdef CPU_X86
static bool bit(unsigned reg, int b) { return (reg >> b & 1u) != 0; }

static unsigned long long xcr0(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (unsigned long long)hi << 32 | lo;
}

static void detect_x86(fc__cpu_info *c) {
    unsigned a, b, cx, d;
    c->x86 = true;
    if (!__get_cpuid(1, &a, &b, &cx, &d)) return;
    /* OSXSAVE: the OS manages extended state, so XCR0 can be read */
    const unsigned long long xcr = bit(cx, 27) ? xcr0() : 0;
    const bool ymm = (xcr & 0x6) == 0x6;          /* SSE and AVX state saved */
    const bool zmm = ymm && (xcr & 0xe0) == 0xe0; /* opmask, ZMM0-15 high, ZMM16-31 */
    const bool avx = ymm && bit(cx, 28);
    c->fma = avx && bit(cx, 12);
    c->f16c = avx && bit(cx, 29);
    const unsigned max_leaf = (unsigned)__get_cpuid_max(0, NULL);
    if (max_leaf >= 7 && __get_cpuid_count(7, 0, &a, &b, &cx, &d)) {
        c->avx2 = avx && bit(b, 5);
        c->avx512f = zmm && bit(b, 16);
        c->avx512dq = c->avx512f && bit(b, 17);
        c->avx512bw = c->avx512f && bit(b, 30);
        c->avx512vl = c->avx512f && bit(b, 31);
        c->avx512vnni = c->avx512f && bit(cx, 11);
        c->avx512fp16 = c->avx512f && bit(d, 23);
        if (__get_cpuid_count(7, 1, &a, &b, &cx, &d)) {
            c->avxvnni = avx && bit(a, 4);
            c->avx512bf16 = c->avx512f && bit(a, 5);
        }
    }
    /* gcc declares the result unsigned, clang int */
    if ((unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x80000004u) {
        unsigned r[12];
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
        char raw[49];
        memcpy(raw, r, 48);
        raw[48] = '\0';
        /* brand strings are padded with leading blanks on some parts */
        const char *s = raw;
        while (*s == ' ')
            s++;
        size_t len = strlen(s);
        while (len > 0 && s[len - 1] == ' ')
            len--;
        if (len >= sizeof c->name) len = sizeof c->name - 1;
        if (len > 0) {
            memcpy(c->name, s, len);
            c->name[len] = '\0';
        }
    }
}
#endif

static fc__cpu_info info;
static pthread_once_t info_once = PTHREAD_ONCE_INIT;

static void detect(void) {
    memset(&info, 0, sizeof info);
    strcpy(info.name, "unknown");
#ifdef CPU_X86
    detect_x86(&info);
#endif
}

const fc__cpu_info *fc__cpu(void) {
    /* pthread_once cannot fail here: its routine never cancels the thread */
    (void)pthread_once(&info_once, detect);
    return &info;
}

static fc__isa detect_level(void) {
    const fc__cpu_info *c = fc__cpu();
    if (!(c->avx2 && c->fma && c->f16c)) return FC__ISA_PORTABLE;
    if (!(c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq)) return FC__ISA_AVX2;
    return FC__ISA_AVX512;
}

/* ---- the caps ------------------------------------------------------------------------------ */

enum { UNKNOWN = -1 };
static atomic_int detected = UNKNOWN;
static atomic_int env_cap = UNKNOWN;
static atomic_int test_cap = FC__ISA_COUNT - 1;

fc__isa fc__isa_detected(void) {
    int v = atomic_load_explicit(&detected, memory_order_relaxed);
    if (v == UNKNOWN) {
        v = (int)detect_level();
        atomic_store_explicit(&detected, v, memory_order_relaxed);
    }
    return (fc__isa)v;
}

fc__isa fc__isa_env_cap(void) {
    int v = atomic_load_explicit(&env_cap, memory_order_relaxed);
    if (v == UNKNOWN) {
        fc__isa cap = FC__ISA_COUNT - 1;
        const char *s = getenv("FUCINA_ISA");
        if (s && *s) (void)fc__isa_from_name(s, &cap);
        v = (int)cap;
        atomic_store_explicit(&env_cap, v, memory_order_relaxed);
    }
    return (fc__isa)v;
}

fc__isa fc__isa_level(void) {
    int v = (int)fc__isa_detected();
    int e = (int)fc__isa_env_cap();
    int t = atomic_load_explicit(&test_cap, memory_order_relaxed);
    if (e < v) v = e;
    if (t < v) v = t;
    return (fc__isa)v;
}

bool fc__isa_enabled(fc__isa isa) {
    return (unsigned)isa < FC__ISA_COUNT && (int)isa <= (int)fc__isa_level();
}

fc__isa fc__isa_set_cap(fc__isa cap) {
    if ((unsigned)cap >= FC__ISA_COUNT) cap = FC__ISA_COUNT - 1;
    return (fc__isa)atomic_exchange_explicit(&test_cap, (int)cap, memory_order_relaxed);
}

/* ---- public ---------------------------------------------------------------------------------- */

const char *fc_cpu_name(void) { return fc__cpu()->name; }

const char *fc_cpu_isa(void) { return fc__isa_name(fc__isa_level()); }
