/* SPDX-License-Identifier: MIT */
/* onednn_gemm.c - the oneDNN provider: the matmul primitive for f32, bf16
 * and f16, accumulating in f32 and returning the input dtype. Compiled only
 * when CMake found oneDNN (FUCINA_HAVE_ONEDNN). Written against the C API
 * of oneDNN 2.x (Debian's 2.6) with a thin shim for 3.x's renamed calls.
 *
 * A fc__gemm maps onto one primitive: 2-D memory descriptors for a single
 * product, 3-D ones for a batch, whose batch dimension is 1 for an operand
 * with batch stride 0 (oneDNN broadcasts it). Leading dimensions and
 * transposes are just the descriptors' strides, so nothing is copied.
 * accumulate is a sum post-op, so C = C + A.B is rounded once.
 *
 * Creating a primitive descriptor costs tens of microseconds, so each
 * context keeps a small cache (FC__DNNL_CACHE entries, least recently used
 * evicted) keyed by everything that shapes the primitive: dtype, sizes,
 * strides, transposes, accumulate and the thread count (oneDNN's OpenMP
 * runtime fixes its work split when the primitive is created). An entry also
 * owns its memory objects, which are re-pointed at each call's data; that is
 * safe because a context, and so its cache, is used by one thread at a time.
 *
 * bf16 and f16: oneDNN 2.6 implements bf16 matmul only on AVX-512 CPUs
 * (avx512_core; natively with AVX512-BF16, emulated without it) and f16 only
 * with AVX512-FP16. Whether it does on this CPU is probed once per process
 * with a tiny primitive, and supports() answers from that probe, so the
 * automatic choice never sends this provider a product it would refuse
 * (it widens those through f32 instead, widen_gemm.c) and an explicit
 * request gets an error that names the missing feature.
 *
 * FUCINA_ISA caps oneDNN too: when it is below avx512 and neither
 * ONEDNN_MAX_CPU_ISA nor DNNL_MAX_CPU_ISA is set, the first use calls
 * dnnl_set_max_cpu_isa (AVX2, or SSE4.1 for portable), so a capped
 * AVX-512 host runs the same oneDNN kernels an AVX2 host would. */
#include <stdio.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "core/buffer.h"
#include "core/cpu.h"

#ifdef FUCINA_HAVE_OPENMP
#include <omp.h>
#endif


/* ---- oneDNN 2.x / 3.x shim --------------------------------------------------------------- */

#if DNNL_VERSION_MAJOR >= 3
typedef dnnl_memory_desc_t md_t; /* an opaque handle */
static dnnl_status_t md_make(md_t *md, int nd, const dnnl_dims_t dims, dnnl_data_type_t dt,
                             const dnnl_dims_t strides) {
    return dnnl_memory_desc_create_with_strides(md, nd, dims, dt, strides);
}
static void md_drop(md_t *md) {
    if (*md) dnnl_memory_desc_destroy(*md);
    *md = NULL;
}
static const_dnnl_memory_desc_t md_ref(const md_t *md) { return *md; }
static dnnl_status_t pd_make(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, const md_t *a,
                             const md_t *b, const md_t *c, const_dnnl_primitive_attr_t attr) {
    return dnnl_matmul_primitive_desc_create(pd, eng, *a, *b, NULL, *c, attr);
}
static dnnl_status_t append_sum(dnnl_post_ops_t po) {
    return dnnl_post_ops_append_sum(po, 1.0f, 0, dnnl_data_type_undef);
}
#else
typedef dnnl_memory_desc_t md_t; /* a plain struct */
static dnnl_status_t md_make(md_t *md, int nd, const dnnl_dims_t dims, dnnl_data_type_t dt,
                             const dnnl_dims_t strides) {
    return dnnl_memory_desc_init_by_strides(md, nd, dims, dt, strides);
}
static void md_drop(md_t *md) { (void)md; }
static const md_t *md_ref(const md_t *md) { return md; }
static dnnl_status_t pd_make(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, const md_t *a,
                             const md_t *b, const md_t *c, const_dnnl_primitive_attr_t attr) {
    dnnl_matmul_desc_t desc;
    dnnl_status_t s = dnnl_matmul_desc_init(&desc, a, b, NULL, c);
    if (s != dnnl_success) return s;
    return dnnl_primitive_desc_create(pd, &desc, attr, eng, NULL);
}
static dnnl_status_t append_sum(dnnl_post_ops_t po) { return dnnl_post_ops_append_sum(po, 1.0f); }
#endif

/* ---- FUCINA_ISA ---------------------------------------------------------------------------- */

/* Caps oneDNN's dispatch at FUCINA_ISA's level before its first kernel is
 * generated (the call fails once kernels exist, which is harmless: then an
 * earlier call already capped it). oneDNN's own variables win. */
static void cap_isa(void) {
    const fc__isa cap = fc__isa_env_cap();
    if (cap < FC__ISA_AVX512 && !getenv("ONEDNN_MAX_CPU_ISA") && !getenv("DNNL_MAX_CPU_ISA"))
        (void)dnnl_set_max_cpu_isa(cap == FC__ISA_AVX2 ? dnnl_cpu_isa_avx2 : dnnl_cpu_isa_sse41);
}

/* Every engine is created after this returns, so none starts uncapped. */
static void cap_isa_once(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    (void)pthread_once(&once, cap_isa);
}

void fc__onednn_cap_isa(void) { cap_isa_once(); }

/* ---- the cache ----------------------------------------------------------------------------- */

/* Every field int64_t, so the struct has no padding and memcmp compares it. */
typedef struct dnnl_key {
    int64_t dtype, m, n, k, batch;
    int64_t lda, ldb, ldc, stride_a, stride_b, stride_c;
    int64_t trans_a, trans_b, accumulate, threads;
} dnnl_key;

typedef struct dnnl_entry {
    dnnl_key key;
    dnnl_primitive_t prim;
    dnnl_memory_t mem_a, mem_b, mem_c; /* created without data, re-pointed per call */
    uint64_t last_use;
} dnnl_entry;

typedef struct dnnl_state {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_entry *entries[FC__DNNL_CACHE];
    int count;
    uint64_t clock;
} dnnl_state;

static fc_status dnnl_error(dnnl_status_t s, const char *what, const fc__gemm *g, char *err,
                            size_t errcap) {
    snprintf(err, errcap, "gemm(onednn): %s failed (%s) for %s m=%lld n=%lld k=%lld", what,
             dnnl_status2str(s), fc_dtype_name(g->dtype), (long long)g->m, (long long)g->n,
             (long long)g->k);
    return s == dnnl_out_of_memory ? FC_ERR_OOM : FC_ERR_BACKEND;
}

/* Drops what build_entry made (all of it or part), leaving e a refusal. */
static void entry_clear(dnnl_entry *e) {
    if (e->mem_a) dnnl_memory_destroy(e->mem_a);
    if (e->mem_b) dnnl_memory_destroy(e->mem_b);
    if (e->mem_c) dnnl_memory_destroy(e->mem_c);
    if (e->prim) dnnl_primitive_destroy(e->prim);
    e->mem_a = e->mem_b = e->mem_c = NULL;
    e->prim = NULL;
}

static void entry_free(dnnl_entry *e, const fc_allocator *alloc) {
    entry_clear(e);
    fc__free(alloc, e, sizeof *e);
}

static void state_free(void *p, const fc_allocator *alloc) {
    dnnl_state *st = p;
    for (int i = 0; i < st->count; i++)
        entry_free(st->entries[i], alloc);
    if (st->stream) dnnl_stream_destroy(st->stream);
    if (st->engine) dnnl_engine_destroy(st->engine);
    fc__free(alloc, st, sizeof *st);
}

static int state_entries(const void *p) { return ((const dnnl_state *)p)->count; }

static fc_status state_new(const fc_allocator *alloc, dnnl_state **out, const fc__gemm *g,
                           char *err, size_t errcap) {
    dnnl_state *st = fc__alloc(alloc, sizeof *st, _Alignof(dnnl_state));
    if (!st) {
        snprintf(err, errcap, "gemm(onednn): out of memory for the primitive cache");
        return FC_ERR_OOM;
    }
    memset(st, 0, sizeof *st);
    cap_isa_once();
    dnnl_status_t s = dnnl_engine_create(&st->engine, dnnl_cpu, 0);
    if (s == dnnl_success)
        s = dnnl_stream_create(&st->stream, st->engine, dnnl_stream_default_flags);
    if (s != dnnl_success) {
        state_free(st, alloc);
        return dnnl_error(s, "engine/stream creation", g, err, errcap);
    }
    *out = st;
    return FC_OK;
}

static dnnl_data_type_t dnnl_dt(int64_t dt) {
    switch (dt) {
    case FC_F16:
        return dnnl_f16;
    case FC_BF16:
        return dnnl_bf16;
    default:
        return dnnl_f32;
    }
}

/* One operand's layout as oneDNN sees it: dims and element strides, with
 * the batch axis first (nb == 1 for a 2-D descriptor or a broadcast one). */
typedef struct layout {
    int nd;
    dnnl_dims_t dims, strides;
} layout;

/* rows x cols with element strides (rs, cs), nb products bstride apart.
 * oneDNN never steps a size-1 axis but still checks its stride (below), so
 * such an axis gets the stride that would make the layout dense there. */
static layout make_layout(bool batched, int64_t nb, int64_t bstride, int64_t rows, int64_t cols,
                          int64_t rs, int64_t cs) {
    if (rows == 1) rs = cols * cs;
    if (cols == 1) cs = rows * rs;
    layout l;
    if (!batched) {
        l.nd = 2;
        l.dims[0] = rows, l.dims[1] = cols;
        l.strides[0] = rs, l.strides[1] = cs;
        return l;
    }
    int64_t extent = rows * rs > cols * cs ? rows * rs : cols * cs;
    l.nd = 3;
    l.dims[0] = nb, l.dims[1] = rows, l.dims[2] = cols;
    l.strides[0] = nb > 1 ? bstride : extent, l.strides[1] = rs, l.strides[2] = cs;
    return l;
}

/* oneDNN's descriptor check: taken in increasing stride order, every axis
 * must start past the whole extent of the previous one (stride >= previous
 * stride * previous dim). BLAS-style layouts can fail it (a batch stride that
 * only clears the last row's used part, or operands that overlap); those
 * products then run one 2-D primitive per batch item. */
static bool layout_accepted(const layout *l) {
    int order[3] = {0, 1, 2};
    for (int i = 1; i < l->nd; i++) {
        for (int j = i; j > 0 && l->strides[order[j]] < l->strides[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    }
    for (int i = 1; i < l->nd; i++) {
        int prev = order[i - 1], cur = order[i];
        if (l->strides[cur] < l->strides[prev] * l->dims[prev]) return false;
    }
    return true;
}

/* The three layouts of a key: A, B, C. */
static void key_layouts(const dnnl_key *key, layout out[3]) {
    bool batched = key->batch > 1;
    out[0] = make_layout(batched, key->stride_a ? key->batch : 1, key->stride_a, key->m, key->k,
                         key->trans_a ? 1 : key->lda, key->trans_a ? key->lda : 1);
    out[1] = make_layout(batched, key->stride_b ? key->batch : 1, key->stride_b, key->k, key->n,
                         key->trans_b ? 1 : key->ldb, key->trans_b ? key->ldb : 1);
    out[2] = make_layout(batched, key->batch, key->stride_c, key->m, key->n, key->ldc, 1);
}

static dnnl_status_t build_entry(dnnl_state *st, const dnnl_key *key, dnnl_entry *e) {
    dnnl_data_type_t dt = dnnl_dt(key->dtype);
    layout l[3];
    key_layouts(key, l);
    md_t a = {0}, b = {0}, c = {0};
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = md_make(&a, l[0].nd, l[0].dims, dt, l[0].strides);
    if (s == dnnl_success) s = md_make(&b, l[1].nd, l[1].dims, dt, l[1].strides);
    if (s == dnnl_success) s = md_make(&c, l[2].nd, l[2].dims, dt, l[2].strides);
    if (s == dnnl_success) s = dnnl_primitive_attr_create(&attr);
    if (s == dnnl_success && key->accumulate) {
        s = dnnl_post_ops_create(&po);
        if (s == dnnl_success) s = append_sum(po);
        if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, po);
    }
    if (s == dnnl_success) s = pd_make(&pd, st->engine, &a, &b, &c, attr);
    if (s == dnnl_success) s = dnnl_primitive_create(&e->prim, pd);
    if (s == dnnl_success)
        s = dnnl_memory_create(&e->mem_a, md_ref(&a), st->engine, DNNL_MEMORY_NONE);
    if (s == dnnl_success)
        s = dnnl_memory_create(&e->mem_b, md_ref(&b), st->engine, DNNL_MEMORY_NONE);
    if (s == dnnl_success)
        s = dnnl_memory_create(&e->mem_c, md_ref(&c), st->engine, DNNL_MEMORY_NONE);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    md_drop(&a);
    md_drop(&b);
    md_drop(&c);
    return s;
}

/* The cached entry for key, building (and maybe evicting) on a miss. A
 * key oneDNN refuses (unimplemented, or arguments this version rejects,
 * such as a bf16 batch where both operands are broadcast) is cached too, as
 * an entry without a primitive, so the refusal costs one primitive
 * creation and not one per call: lookup then returns FC_ERR_BACKEND with
 * *refused set, and the caller takes another route. */
static fc_status lookup(dnnl_state *st, const fc_allocator *alloc, const dnnl_key *key,
                        const fc__gemm *g, dnnl_entry **out, bool *refused, char *err,
                        size_t errcap) {
    *refused = false;
    st->clock++;
    dnnl_entry *e = NULL;
    for (int i = 0; i < st->count && !e; i++) {
        if (memcmp(&st->entries[i]->key, key, sizeof *key) == 0) e = st->entries[i];
    }
    if (e) {
        e->last_use = st->clock;
    } else {
        e = fc__alloc(alloc, sizeof *e, _Alignof(dnnl_entry));
        if (!e) {
            snprintf(err, errcap, "gemm(onednn): out of memory for a cache entry");
            return FC_ERR_OOM;
        }
        memset(e, 0, sizeof *e);
        e->key = *key;
        e->last_use = st->clock;
        dnnl_status_t s = build_entry(st, key, e);
        if (s == dnnl_unimplemented || s == dnnl_invalid_arguments) {
            entry_clear(e); /* kept without a primitive: the refusal */
        } else if (s != dnnl_success) {
            entry_free(e, alloc);
            return dnnl_error(s, "primitive creation", g, err, errcap);
        }
        if (st->count == FC__DNNL_CACHE) {
            int victim = 0;
            for (int i = 1; i < st->count; i++) {
                if (st->entries[i]->last_use < st->entries[victim]->last_use) victim = i;
            }
            entry_free(st->entries[victim], alloc);
            st->entries[victim] = st->entries[--st->count];
        }
        st->entries[st->count++] = e;
    }
    if (!e->prim) {
        *refused = true;
        return dnnl_error(dnnl_unimplemented, "primitive creation", g, err, errcap);
    }
    *out = e;
    return FC_OK;
}

/* ---- execution ----------------------------------------------------------------------------- */

/* Whether a batched key's three layouts pass oneDNN's descriptor check. */
static bool batch_in_one_primitive(const dnnl_key *key) {
    layout l[3];
    key_layouts(key, l);
    return layout_accepted(&l[0]) && layout_accepted(&l[1]) && layout_accepted(&l[2]);
}

/* The primitive path for a dtype oneDNN implements here: the whole batch in
 * one primitive when its layout allows, else one 2-D primitive run per item
 * (the same primitive each time, so still one cache entry). */
static fc_status run_native(dnnl_state *st, const fc_allocator *alloc, const fc__gemm *g, char *err,
                            size_t errcap) {
    int threads = g->threads;
#ifdef FUCINA_HAVE_OPENMP
    if (omp_in_parallel()) threads = 1;
#endif
    dnnl_key key = {
        .dtype = g->dtype,
        .m = g->m,
        .n = g->n,
        .k = g->k,
        .batch = g->batch,
        .lda = g->lda,
        .ldb = g->ldb,
        .ldc = g->ldc,
        .stride_a = g->batch > 1 ? g->stride_a : 0,
        .stride_b = g->batch > 1 ? g->stride_b : 0,
        .stride_c = g->batch > 1 ? g->stride_c : 0,
        .trans_a = g->trans_a,
        .trans_b = g->trans_b,
        .accumulate = g->accumulate,
        .threads = threads,
    };
    int64_t items = 1;
    if (key.batch > 1 && !batch_in_one_primitive(&key)) {
        items = key.batch;
        key.batch = 1, key.stride_a = key.stride_b = key.stride_c = 0;
    }
    int prev = fc__omp_threads_push(threads);
    dnnl_entry *e = NULL;
    bool refused = false;
    fc_status rc = lookup(st, alloc, &key, g, &e, &refused, err, errcap);
    if (refused && key.batch > 1) { /* the whole batch refused: one 2-D primitive per item */
        items = key.batch;
        key.batch = 1, key.stride_a = key.stride_b = key.stride_c = 0;
        rc = lookup(st, alloc, &key, g, &e, &refused, err, errcap);
    }
    if (refused && g->dtype != FC_F32) {
        /* a 16-bit shape oneDNN refuses even as a 2-D product: its f32
         * primitive on widened panels (the same f32 accumulation) */
        fc__omp_threads_pop(prev);
        return fc__gemm_widened(&fc__provider_onednn, g, err, errcap);
    }
    size_t es = fc_dtype_size(g->dtype);
    for (int64_t i = 0; rc == FC_OK && i < items; i++) {
        const char *a = (const char *)g->a + (size_t)(i * g->stride_a) * es;
        const char *b = (const char *)g->b + (size_t)(i * g->stride_b) * es;
        char *c = (char *)g->c + (size_t)(i * g->stride_c) * es;
        /* oneDNN takes non-const handles but never writes SRC or WEIGHTS. */
        dnnl_status_t s = dnnl_memory_set_data_handle(e->mem_a, (void *)(uintptr_t)a);
        if (s == dnnl_success) s = dnnl_memory_set_data_handle(e->mem_b, (void *)(uintptr_t)b);
        if (s == dnnl_success) s = dnnl_memory_set_data_handle(e->mem_c, c);
        if (s == dnnl_success) {
            dnnl_exec_arg_t args[3] = {
                {DNNL_ARG_SRC, e->mem_a}, {DNNL_ARG_WEIGHTS, e->mem_b}, {DNNL_ARG_DST, e->mem_c}};
            s = dnnl_primitive_execute(e->prim, st->stream, 3, args);
        }
        if (s == dnnl_success) s = dnnl_stream_wait(st->stream);
        if (s != dnnl_success) rc = dnnl_error(s, "execution", g, err, errcap);
    }
    fc__omp_threads_pop(prev);
    return rc;
}

/* ---- what this CPU runs --------------------------------------------------------------------- */

/* Whether oneDNN creates a 16x16 matmul primitive of dtype dt here: probed
 * once per process (every racing first caller stores the same answer). */
static bool native(fc_dtype dt) {
    static atomic_int cache[2] = {-1, -1}; /* bf16, f16; -1 not probed */
    atomic_int *slot = &cache[dt == FC_F16];
    int v = atomic_load_explicit(slot, memory_order_relaxed);
    if (v >= 0) return v == 1;
    cap_isa_once();
    dnnl_engine_t eng = NULL;
    md_t a = {0}, b = {0}, c = {0};
    dnnl_primitive_desc_t pd = NULL;
    const dnnl_dims_t dims = {16, 16}, strides = {16, 1};
    const dnnl_data_type_t t = dnnl_dt(dt);
    dnnl_status_t s = dnnl_engine_create(&eng, dnnl_cpu, 0);
    if (s == dnnl_success) s = md_make(&a, 2, dims, t, strides);
    if (s == dnnl_success) s = md_make(&b, 2, dims, t, strides);
    if (s == dnnl_success) s = md_make(&c, 2, dims, t, strides);
    if (s == dnnl_success) s = pd_make(&pd, eng, &a, &b, &c, NULL);
    if (pd) dnnl_primitive_desc_destroy(pd);
    md_drop(&a);
    md_drop(&b);
    md_drop(&c);
    if (eng) dnnl_engine_destroy(eng);
    v = s == dnnl_success;
    atomic_store_explicit(slot, v, memory_order_relaxed);
    return v == 1;
}

static bool onednn_supports(fc_dtype dt) {
    if (dt == FC_F32) return true;
    return (dt == FC_BF16 || dt == FC_F16) && native(dt);
}

static const char *onednn_requirement(fc_dtype dt) {
    if (dt == FC_BF16) return "oneDNN's bf16 matmul needs AVX-512 (F, BW, VL, DQ)";
    if (dt == FC_F16) return "oneDNN's f16 matmul needs AVX512-FP16";
    return NULL;
}

static fc_status onednn_gemm(const fc__gemm *g, char *err, size_t errcap) {
    void **slot = fc__backend_cache_slot(g->cache, FC_BACKEND_ONEDNN);
    const fc_allocator *alloc = slot ? fc__backend_cache_allocator(g->cache) : g->alloc;
    dnnl_state *st = slot ? *slot : NULL;
    if (!st) {
        fc_status rc = state_new(alloc, &st, g, err, errcap);
        if (rc != FC_OK) return rc;
        if (slot) *slot = st;
    }
    fc_status rc = run_native(st, alloc, g, err, errcap);
    if (!slot) state_free(st, alloc); /* no cache: nothing outlives the call */
    return rc;
}

const fc__matmul_provider fc__provider_onednn = {
    .name = "onednn",
    .id = FC_BACKEND_ONEDNN,
    .supports = onednn_supports,
    .requirement = onednn_requirement,
    .gemm = onednn_gemm,
    .state_free = state_free,
    .state_entries = state_entries,
};
