/* SPDX-License-Identifier: MIT */
/* dispatch.c - the provider table, the choice of provider, the GEMM input
 * check and the per-context cache that holds provider state.
 *
 * The table is fixed at build time: a provider whose library was not found
 * has a NULL slot, and asking for it explicitly is an error that says how to
 * build it, never a silent fallback (a user who picked oneDNN to measure it
 * must not be measuring ref). FUCINA_BACKEND is read once per process: the
 * environment is a deployment knob, and getenv on every matmul would cost
 * time in the tiny-op benchmarks for nothing. */
#include "backend/backend.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buffer.h"
#include "core/cpu.h"

#ifdef FUCINA_HAVE_OPENMP
#include <omp.h>
#endif

static const char *const names[FC_BACKEND_COUNT] = {
    [FC_BACKEND_AUTO] = "auto",
    [FC_BACKEND_REF] = "ref",
    [FC_BACKEND_BLAS] = "blas",
    [FC_BACKEND_ONEDNN] = "onednn",
};
_Static_assert(FC_BACKEND_COUNT == 4, "backend list changed: update names and hints");

/* How to get a provider that this build lacks. */
static const char *const build_hints[FC_BACKEND_COUNT] = {
    [FC_BACKEND_BLAS] = "install libopenblas-openmp-dev and reconfigure with "
                        "-DFUCINA_WITH_OPENBLAS=ON",
    [FC_BACKEND_ONEDNN] = "install libdnnl-dev and reconfigure with -DFUCINA_WITH_ONEDNN=ON",
};

static const fc__matmul_provider *const providers[FC_BACKEND_COUNT] = {
    [FC_BACKEND_REF] = &fc__provider_ref,
#ifdef FUCINA_HAVE_OPENBLAS
    [FC_BACKEND_BLAS] = &fc__provider_blas,
#endif
#ifdef FUCINA_HAVE_ONEDNN
    [FC_BACKEND_ONEDNN] = &fc__provider_onednn,
#endif
};

static bool backend_in_range(fc_backend id) { return (int)id >= 0 && id < FC_BACKEND_COUNT; }

const fc__matmul_provider *fc__backend_get(fc_backend id) {
    return backend_in_range(id) ? providers[id] : NULL;
}

const char *fc__backend_name(fc_backend id) { return backend_in_range(id) ? names[id] : "invalid"; }

fc_status fc__backend_from_name(const char *name, fc_backend *out) {
    if (!name || !out) return FC_ERR_NULL_ARG;
    for (int i = 0; i < FC_BACKEND_COUNT; i++) {
        if (strcmp(names[i], name) == 0) {
            *out = (fc_backend)i;
            return FC_OK;
        }
    }
    return FC_ERR_INVALID_ARG;
}

fc_status fc__backend_check_built(fc_backend id, char *err, size_t errcap) {
    if (!err || errcap == 0) return FC_ERR_NULL_ARG;
    err[0] = '\0';
    if (!backend_in_range(id)) {
        snprintf(err, errcap, "backend value %d is out of range", (int)id);
        return FC_ERR_INVALID_ARG;
    }
    if (id != FC_BACKEND_AUTO && !providers[id]) {
        snprintf(err, errcap, "backend '%s' was not built (%s)", names[id], build_hints[id]);
        return FC_ERR_BACKEND;
    }
    return FC_OK;
}

static bool is_gemm_dtype(fc_dtype dt) {
    return dt == FC_F16 || dt == FC_BF16 || dt == FC_F32 || dt == FC_F64;
}

/* ---- FUCINA_BACKEND ---------------------------------------------------------------------- */

enum { ENV_UNREAD = -1, ENV_INVALID = -2 };
static atomic_int env_choice = ENV_UNREAD;

/* Racing first reads compute the same value, so a relaxed store suffices. */
static int env_backend(void) {
    int v = atomic_load_explicit(&env_choice, memory_order_relaxed);
    if (v != ENV_UNREAD) return v;
    const char *s = getenv("FUCINA_BACKEND");
    fc_backend id = FC_BACKEND_AUTO;
    if (s && *s && fc__backend_from_name(s, &id) != FC_OK) {
        v = ENV_INVALID;
    } else {
        v = (int)id;
    }
    atomic_store_explicit(&env_choice, v, memory_order_relaxed);
    return v;
}

fc_backend fc__backend_requested(fc_backend requested) {
    if (requested != FC_BACKEND_AUTO) return requested;
    int env = env_backend();
    return env >= 0 ? (fc_backend)env : FC_BACKEND_AUTO;
}

void fc__backend_env_refresh(void) {
    atomic_store_explicit(&env_choice, ENV_UNREAD, memory_order_relaxed);
}

/* ---- choosing a provider --------------------------------------------------------------- */

/* "f32, f64" for the dtypes p supports. */
static void supported_list(const fc__matmul_provider *p, char *buf, size_t cap) {
    static const fc_dtype all[] = {FC_F16, FC_BF16, FC_F32, FC_F64};
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (!p->supports(all[i])) continue;
        int w = snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", fc_dtype_name(all[i]));
        if (w < 0 || (size_t)w >= cap - len) break;
        len += (size_t)w;
    }
}

/* An explicit choice: built and supporting dtype, or an error. `via` says
 * where the choice came from, for the message. */
static fc_status take_explicit(fc_backend id, fc_dtype dtype, const char *via,
                               const fc__matmul_provider **out, char *err, size_t errcap) {
    const fc__matmul_provider *p = providers[id];
    if (!p) {
        snprintf(err, errcap, "matmul: backend '%s'%s was not built (%s)", names[id], via,
                 build_hints[id]);
        return FC_ERR_BACKEND;
    }
    if (!p->supports(dtype)) {
        const char *needs = p->requirement ? p->requirement(dtype) : NULL;
        if (needs) {
            snprintf(err, errcap,
                     "matmul: backend '%s'%s cannot run %s on this CPU: %s, absent here or "
                     "capped (level in use: %s); 'auto' runs it through f32",
                     names[id], via, fc_dtype_name(dtype), needs, fc__isa_name(fc__isa_level()));
            return FC_ERR_BACKEND;
        }
        char list[64];
        supported_list(p, list, sizeof list);
        snprintf(err, errcap,
                 "matmul: backend '%s'%s does not support %s on this machine (it takes %s; "
                 "'ref' takes every float dtype)",
                 names[id], via, fc_dtype_name(dtype), list);
        return FC_ERR_BACKEND;
    }
    *out = p;
    return FC_OK;
}

/* The f32 choice follows the SIMD level in use and the size of the
 * product. Measured on 2-core VMs, 2 threads:
 *  - AVX-512 (AMD Zen 4): f32 n=1024 ran at 326 GFLOP/s through oneDNN
 *    against 187 through OpenBLAS, whose environment there pinned it to its
 *    Haswell kernel; the MLP and GPT training steps took 0.56x and 0.66x
 *    the time. oneDNN's JIT kernels follow the CPU, OpenBLAS's core type
 *    may not.
 *  - AVX2 only: the two libraries' AVX2 kernels are close. On Zen 3,
 *    fc_matmul through oneDNN reached only 0.91-1.06x and 0.83-1.00x of
 *    torch.mm (OpenBLAS underneath) at n = 1024 and 2048; on a Xeon
 *    (Sapphire Rapids) capped to AVX2, alternating runs put the two within
 *    their noise (n = 1024: oneDNN 97-134, OpenBLAS 121-133 GFLOP/s;
 *    n = 2048: 147-151 against 131-161). A later pairing there (Release
 *    build, 2026-12-02) put them level at n = 256 and 1024 (103 / 99 and
 *    111 / 111) but gave OpenBLAS n = 2048 (130 against 68). The training
 *    steps' products are much smaller (1024 x 128 x 512 in the GPT step),
 *    and there OpenBLAS's own thread start-up and packing per call cost
 *    more than oneDNN's cached primitives: with every product on oneDNN
 *    the GPT step took 69-76 ms against 83, the MLP step 4.4 against 5.7,
 *    the CNN step 38-44 against 64 and the Llama step 214 against 256.
 *    So AVX2 takes oneDNN up to FC__GEMM_DNNL_MAX and OpenBLAS above.
 *  - AVX-512 again (AMD Zen 5, 2026-12-03), OpenBLAS on its own Cooperlake
 *    kernels: alternating runs gave n = 1024 to oneDNN (396-420 against
 *    351-381 GFLOP/s) but n = 2048 to OpenBLAS (396-420 against 379-394,
 *    torch.mm 401-428 beside them). With OPENBLAS_CORETYPE=Haswell, which
 *    that host's environment exported, OpenBLAS ran ~240 there. So AVX-512
 *    follows the AVX2 rule when OpenBLAS loaded AVX-512 kernels, and keeps
 *    oneDNN for every size when it did not.
 * A level taken from core/cpu.h also follows FUCINA_ISA, which caps oneDNN
 * too (onednn_gemm.c), so a capped host chooses as a smaller CPU would. */
const fc__matmul_provider *fc__backend_f32_inner(int64_t m, int64_t n, int64_t k) {
    const fc__matmul_provider *blas = providers[FC_BACKEND_BLAS];
    const fc__matmul_provider *dnnl = providers[FC_BACKEND_ONEDNN];
    if (!dnnl || !blas) return dnnl ? dnnl : blas;
    const fc__isa level = fc__isa_level();
    if (level < FC__ISA_AVX2) return blas;
    /* the division form cannot overflow (sizes are >= 1) */
    if (m <= FC__GEMM_DNNL_MAX / n / k) return dnnl;
    if (level >= FC__ISA_AVX512) {
        const int blas_level = blas->kernel_level ? blas->kernel_level() : (int)level;
        return blas_level >= FC__ISA_AVX512 ? blas : dnnl;
    }
    return blas;
}

static const fc__matmul_provider *automatic(fc_dtype dtype, int64_t m, int64_t n, int64_t k) {
    const fc__matmul_provider *blas = providers[FC_BACKEND_BLAS];
    const fc__matmul_provider *dnnl = providers[FC_BACKEND_ONEDNN];
    /* OpenBLAS keeps the tiny products (its small-matrix path costs ~0.2 us
     * for 4x4; a oneDNN primitive or a widening pass costs more than the
     * product) and f64, which oneDNN lacks. The division form cannot
     * overflow. */
    const bool tiny = m <= FC__GEMM_TINY / n / k;
    const fc__matmul_provider *f32 = fc__backend_f32_inner(m, n, k);
    switch (dtype) {
    case FC_F32:
        if (tiny) return blas ? blas : &fc__provider_ref;
        return f32 ? f32 : &fc__provider_ref;
    case FC_F64:
        return blas ? blas : &fc__provider_ref;
    default: /* bf16, f16 */
        if (tiny) return &fc__provider_ref;
        if (dnnl && dnnl->supports(dtype)) return dnnl;
        if (fc__provider_widen.supports(dtype)) return &fc__provider_widen;
        return &fc__provider_ref;
    }
}

fc_status fc__backend_resolve(fc_backend requested, fc_dtype dtype, int64_t m, int64_t n, int64_t k,
                              const fc__matmul_provider **out, char *err, size_t errcap) {
    if (!out || !err || errcap == 0) return FC_ERR_NULL_ARG;
    err[0] = '\0';
    if (!backend_in_range(requested)) {
        snprintf(err, errcap, "matmul: backend value %d is out of range", (int)requested);
        return FC_ERR_INVALID_ARG;
    }
    if (!is_gemm_dtype(dtype)) {
        snprintf(err, errcap, "matmul: dtype %s is not supported (f16, bf16, f32, f64)",
                 fc_dtype_name(dtype));
        return FC_ERR_DTYPE;
    }
    if (m < 1 || n < 1 || k < 1) {
        snprintf(err, errcap, "matmul: sizes m=%lld n=%lld k=%lld must be >= 1", (long long)m,
                 (long long)n, (long long)k);
        return FC_ERR_INVALID_SHAPE;
    }
    if (requested != FC_BACKEND_AUTO) return take_explicit(requested, dtype, "", out, err, errcap);
    int env = env_backend();
    if (env == ENV_INVALID) {
        const char *s = getenv("FUCINA_BACKEND");
        snprintf(err, errcap,
                 "matmul: FUCINA_BACKEND='%s' is not a backend (use ref, blas, onednn or auto)",
                 s ? s : "");
        return FC_ERR_BACKEND;
    }
    if (env != FC_BACKEND_AUTO) {
        return take_explicit((fc_backend)env, dtype, " (from FUCINA_BACKEND)", out, err, errcap);
    }
    *out = automatic(dtype, m, n, k);
    return FC_OK;
}

/* ---- input check ------------------------------------------------------------------------- */

fc_status fc__gemm_validate(const fc__gemm *g, char *err, size_t errcap) {
    if (!g || !err || errcap == 0) return FC_ERR_NULL_ARG;
    err[0] = '\0';
    if (!g->a || !g->b || !g->c) {
        snprintf(err, errcap, "gemm: NULL operand pointer");
        return FC_ERR_NULL_ARG;
    }
    if (!is_gemm_dtype(g->dtype)) {
        snprintf(err, errcap, "gemm: dtype %s is not f16, bf16, f32 or f64",
                 fc_dtype_name(g->dtype));
        return FC_ERR_DTYPE;
    }
    if (g->m < 1 || g->n < 1 || g->k < 1 || g->batch < 1) {
        snprintf(err, errcap, "gemm: sizes m=%lld n=%lld k=%lld batch=%lld must be >= 1",
                 (long long)g->m, (long long)g->n, (long long)g->k, (long long)g->batch);
        return FC_ERR_INVALID_SHAPE;
    }
    int64_t min_lda = g->trans_a ? g->m : g->k, min_ldb = g->trans_b ? g->k : g->n;
    if (g->lda < min_lda || g->ldb < min_ldb || g->ldc < g->n) {
        snprintf(err, errcap,
                 "gemm: leading dimensions lda=%lld ldb=%lld ldc=%lld below their minimum "
                 "%lld %lld %lld",
                 (long long)g->lda, (long long)g->ldb, (long long)g->ldc, (long long)min_lda,
                 (long long)min_ldb, (long long)g->n);
        return FC_ERR_INVALID_ARG;
    }
    if (g->stride_a < 0 || g->stride_b < 0 || g->stride_c < 0 ||
        (g->batch > 1 && g->stride_c == 0)) {
        snprintf(
            err, errcap,
            "gemm: batch strides a=%lld b=%lld c=%lld must be >= 0 (c > 0 when batch %lld > 1)",
            (long long)g->stride_a, (long long)g->stride_b, (long long)g->stride_c,
            (long long)g->batch);
        return FC_ERR_INVALID_ARG;
    }
    if (g->threads < 1) {
        snprintf(err, errcap, "gemm: threads %d < 1", g->threads);
        return FC_ERR_INVALID_ARG;
    }
    return FC_OK;
}

fc_status fc__gemm_run(const fc__matmul_provider *p, const fc__gemm *g, char *err, size_t errcap) {
    if (!p) {
        if (err && errcap) snprintf(err, errcap, "gemm: NULL provider");
        return FC_ERR_NULL_ARG;
    }
    fc_status st = fc__gemm_validate(g, err, errcap);
    if (st != FC_OK) return st;
    if (!p->supports(g->dtype)) {
        snprintf(err, errcap, "gemm: backend '%s' does not support %s", p->name,
                 fc_dtype_name(g->dtype));
        return FC_ERR_BACKEND;
    }
    return p->gemm(g, err, errcap);
}

/* ---- per-context state --------------------------------------------------------------------- */

struct fc__backend_cache {
    fc_allocator alloc;
    void *slots[FC_BACKEND_COUNT];
    void *scratch; /* grow-only workspace, see fc__gemm_workspace */
    size_t scratch_bytes;
    void *conv_state; /* the convolution primitives (backend/conv.h) */
    void (*conv_state_free)(void *state, const fc_allocator *alloc);
};

fc__backend_cache *fc__backend_cache_new(const fc_allocator *alloc) {
    if (!alloc) alloc = fc_default_allocator();
    fc__backend_cache *c = fc__alloc(alloc, sizeof *c, _Alignof(fc__backend_cache));
    if (!c) return NULL;
    c->alloc = *alloc;
    for (int i = 0; i < FC_BACKEND_COUNT; i++)
        c->slots[i] = NULL;
    c->scratch = NULL;
    c->scratch_bytes = 0;
    c->conv_state = NULL;
    c->conv_state_free = NULL;
    return c;
}

void fc__backend_cache_free(fc__backend_cache *cache) {
    if (!cache) return;
    for (int i = 0; i < FC_BACKEND_COUNT; i++) {
        const fc__matmul_provider *p = providers[i];
        if (p && p->state_free && cache->slots[i]) p->state_free(cache->slots[i], &cache->alloc);
    }
    if (cache->conv_state && cache->conv_state_free)
        cache->conv_state_free(cache->conv_state, &cache->alloc);
    fc_allocator a = cache->alloc;
    fc__free(&a, cache->scratch, cache->scratch_bytes);
    fc__free(&a, cache, sizeof *cache);
}

void *fc__gemm_workspace(const fc__gemm *g, size_t nbytes) {
    if (!g->cache) return fc__alloc(g->alloc, nbytes ? nbytes : 1, 64);
    return fc__backend_workspace(g->cache, nbytes);
}

void *fc__backend_workspace(fc__backend_cache *c, size_t nbytes) {
    if (nbytes <= c->scratch_bytes) return c->scratch;
    /* grow by half again, so a slowly growing size does not reallocate
     * on every call */
    size_t want = c->scratch_bytes + c->scratch_bytes / 2;
    if (want < nbytes) want = nbytes;
    void *p = fc__alloc(&c->alloc, want, 64);
    if (!p && want > nbytes) p = fc__alloc(&c->alloc, want = nbytes, 64);
    if (!p) return NULL;
    fc__free(&c->alloc, c->scratch, c->scratch_bytes);
    c->scratch = p;
    c->scratch_bytes = want;
    return p;
}

void fc__gemm_workspace_done(const fc__gemm *g, void *p, size_t nbytes) {
    if (!g->cache) fc__free(g->alloc, p, nbytes ? nbytes : 1);
}

void **fc__backend_cache_slot(fc__backend_cache *cache, fc_backend id) {
    if (!cache || !backend_in_range(id)) return NULL;
    return &cache->slots[id];
}

void **fc__backend_cache_conv_slot(fc__backend_cache *cache,
                                   void (*state_free)(void *state, const fc_allocator *alloc)) {
    if (!cache) return NULL;
    cache->conv_state_free = state_free;
    return &cache->conv_state;
}

const fc_allocator *fc__backend_cache_allocator(const fc__backend_cache *cache) {
    return cache ? &cache->alloc : NULL;
}

int fc__backend_cache_entries(const fc__backend_cache *cache, fc_backend id) {
    if (!cache || !backend_in_range(id)) return 0;
    const fc__matmul_provider *p = providers[id];
    if (!p || !p->state_entries || !cache->slots[id]) return 0;
    return p->state_entries(cache->slots[id]);
}

/* ---- OpenMP thread count ----------------------------------------------------------------------
 */

int fc__omp_threads_push(int threads) {
#ifdef FUCINA_HAVE_OPENMP
    int prev = omp_get_max_threads();
    if (threads >= 1 && threads != prev) omp_set_num_threads(threads);
    return prev;
#else
    (void)threads;
    return 1;
#endif
}

void fc__omp_threads_pop(int previous) {
#ifdef FUCINA_HAVE_OPENMP
    if (previous >= 1 && omp_get_max_threads() != previous) omp_set_num_threads(previous);
#else
    (void)previous;
#endif
}
