/* SPDX-License-Identifier: MIT */
/* onednn_conv.c - convolutions through oneDNN's direct convolution
 * primitives (backend/conv.h). Compiled only with oneDNN; written against
 * its 2.x C API (Debian's 2.6), whose operation descriptors 3.x removed:
 * under 3.x fc__conv_direct_takes says no and the portable path runs.
 *
 * Why: on the 2-core AVX-512 Xeon this was measured on, the direct kernels
 * ran the layers of the Fashion-MNIST CNN and a 3x3 64->64 layer at
 * 150-200 GFLOP/s each (forward, backward-data, backward-weights, the
 * reorders included), against 110-140 for im2col + GEMM, whose column
 * matrix costs 9-25 times the input's memory traffic.
 *
 * A primitive is created for the blocked layouts its kernels choose
 * (format "any"); the call's plain NCHW / OIHW data is reordered into the
 * workspace and the result reordered back. Creating a primitive and its
 * reorders costs milliseconds, so each cache keeps the last CONV_CACHE
 * geometries (least recently used evicted), a refusal (no JIT kernel)
 * included, so it is asked once. */
#include <stdio.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "backend/conv.h"
#include "core/buffer.h"

/* The padding after the last row (or column) that makes the sizes agree;
 * negative when the stride skips trailing input, which oneDNN refuses. */
static int64_t pad_after(int64_t out, int64_t s, int64_t k, int64_t d, int64_t in, int64_t pad) {
    return (out - 1) * s + (k - 1) * d + 1 - in - pad;
}

#if DNNL_VERSION_MAJOR >= 3

bool fc__conv_direct_takes(const fc__conv_call *c) {
    (void)c;
    (void)pad_after;
    return false;
}

fc_status fc__conv_direct(const fc__conv_call *c, char *err, size_t errcap) {
    (void)c;
    snprintf(err, errcap, "conv(onednn): direct convolutions need oneDNN 2.x");
    return FC_ERR_BACKEND;
}

#else

#define CONV_CACHE 16

/* Every field int64_t: no padding, so memcmp compares keys. */
typedef struct conv_key {
    int64_t kind, n, groups, cx, hx, wx, cy, hy, wy, kh, kw, sh, sw, ph, pw, dh, dw, bias;
} conv_key;

enum { ARG_X, ARG_GY, ARG_W, ARG_OUT, ARG_COUNT };

/* One operand: its plain memory (re-pointed at the call's data) and, when
 * the primitive wants another layout, that layout's memory (in the
 * workspace) and the reorder between them (plain -> blocked for inputs,
 * blocked -> plain for the output). */
typedef struct conv_arg {
    bool used;
    int dnnl_arg;
    dnnl_memory_t plain, blocked; /* blocked == plain without a reorder */
    dnnl_primitive_t reorder;
    size_t blocked_bytes;
} conv_arg;

typedef struct conv_entry {
    conv_key key;
    bool direct; /* false: a refusal (no primitive, or not a JIT kernel) */
    dnnl_primitive_t prim;
    conv_arg args[ARG_COUNT];
    dnnl_memory_t bias, scratch;
    size_t scratch_bytes;
    uint64_t last_use;
} conv_entry;

typedef struct conv_state {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    /* where the last call left blocked weights: its entry, the plain data
     * and the workspace they were reordered into */
    const conv_entry *w_entry;
    const void *w_data, *w_ws;
    conv_entry *entries[CONV_CACHE];
    int count;
    uint64_t clock;
} conv_state;

static void entry_free(conv_entry *e, const fc_allocator *alloc) {
    for (int i = 0; i < ARG_COUNT; i++) {
        conv_arg *a = &e->args[i];
        if (a->reorder) dnnl_primitive_destroy(a->reorder);
        if (a->blocked && a->blocked != a->plain) dnnl_memory_destroy(a->blocked);
        if (a->plain) dnnl_memory_destroy(a->plain);
    }
    if (e->bias) dnnl_memory_destroy(e->bias);
    if (e->scratch) dnnl_memory_destroy(e->scratch);
    if (e->prim) dnnl_primitive_destroy(e->prim);
    fc__free(alloc, e, sizeof *e);
}

static void state_free(void *p, const fc_allocator *alloc) {
    conv_state *st = p;
    for (int i = 0; i < st->count; i++)
        entry_free(st->entries[i], alloc);
    if (st->stream) dnnl_stream_destroy(st->stream);
    if (st->engine) dnnl_engine_destroy(st->engine);
    fc__free(alloc, st, sizeof *st);
}

/* Whether the kernel is one measured to lose to im2col + GEMM: oneDNN
 * 2.6's AVX2 backward-weights on one input channel per group (the CNN's
 * first layer, 1 -> 32 channels, 5x5 on 28x28) ran at ~8 GFLOP/s, 0.65 ms
 * per 4 images on the 2-core Sapphire Rapids capped to AVX2, a quarter of
 * the whole training step; the AVX-512 kernel took 0.06 ms. */
static bool slow_wgrad(const fc__conv_call *c, const char *impl) {
    return c->kind == FC__CONV_WGRAD && c->cx == c->groups && strncmp(impl, "jit:avx2", 8) == 0;
}

static const char *kind_name(fc__conv_kind k) {
    return k == FC__CONV_FORWARD ? "forward"
           : k == FC__CONV_DGRAD ? "backward-data"
                                 : "backward-weights";
}

static fc_status fail(dnnl_status_t s, const char *what, const fc__conv_call *c, char *err,
                      size_t errcap) {
    snprintf(err, errcap,
             "conv(onednn): %s failed (%s) for the %s of n=%lld cx=%lld %lldx%lld cy=%lld "
             "%lldx%lld kernel %lldx%lld groups %lld",
             what, dnnl_status2str(s), kind_name(c->kind), (long long)c->n, (long long)c->cx,
             (long long)c->hx, (long long)c->wx, (long long)c->cy, (long long)c->hy,
             (long long)c->wy, (long long)c->kh, (long long)c->kw, (long long)c->groups);
    return s == dnnl_out_of_memory ? FC_ERR_OOM : FC_ERR_BACKEND;
}

static conv_key key_of(const fc__conv_call *c) {
    return (conv_key){c->kind, c->n,  c->groups, c->cx, c->hx, c->wx,
                      c->cy,   c->hy, c->wy,     c->kh, c->kw, c->sh,
                      c->sw,   c->ph, c->pw,     c->dh, c->dw, c->bias != NULL};
}

/* The operand's plain memory, and its blocked twin and reorder when the
 * primitive's layout (want) differs. */
static dnnl_status_t arg_make(conv_state *st, conv_arg *a, int dnnl_arg,
                              const dnnl_memory_desc_t *plain, const dnnl_memory_desc_t *want,
                              bool input) {
    a->used = true;
    a->dnnl_arg = dnnl_arg;
    dnnl_status_t s = dnnl_memory_create(&a->plain, plain, st->engine, DNNL_MEMORY_NONE);
    if (s != dnnl_success) return s;
    if (dnnl_memory_desc_equal(plain, want)) {
        a->blocked = a->plain;
        return dnnl_success;
    }
    a->blocked_bytes = dnnl_memory_desc_get_size(want);
    s = dnnl_memory_create(&a->blocked, want, st->engine, DNNL_MEMORY_NONE);
    if (s != dnnl_success) return s;
    dnnl_primitive_desc_t rpd = NULL;
    s = input ? dnnl_reorder_primitive_desc_create(&rpd, plain, st->engine, want, st->engine, NULL)
              : dnnl_reorder_primitive_desc_create(&rpd, want, st->engine, plain, st->engine, NULL);
    if (s == dnnl_success) s = dnnl_primitive_create(&a->reorder, rpd);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    return s;
}

/* Fills e (key set, the rest zero) for c: the primitive, its operands, its
 * scratchpad. A failure leaves what was made for entry_free. */
static dnnl_status_t entry_build(conv_state *st, conv_entry *e, const fc__conv_call *c) {
    dnnl_memory_desc_t xu, yu, wu, bu, xa, ya, wa;
    dnnl_dims_t xd = {c->n, c->cx, c->hx, c->wx}, yd = {c->n, c->cy, c->hy, c->wy};
    dnnl_dims_t wd = {c->groups, c->cy / c->groups, c->cx / c->groups, c->kh, c->kw};
    dnnl_dims_t bd = {c->cy};
    bool grouped = c->groups > 1;
    int wnd = grouped ? 5 : 4;
    const int64_t *wdims = grouped ? wd : wd + 1;
    dnnl_dims_t wdd;
    memcpy(wdd, wdims, sizeof(int64_t) * (size_t)wnd);
    dnnl_status_t s = dnnl_memory_desc_init_by_tag(&xu, 4, xd, dnnl_f32, dnnl_nchw);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&yu, 4, yd, dnnl_f32, dnnl_nchw);
    if (s == dnnl_success)
        s = dnnl_memory_desc_init_by_tag(&wu, wnd, wdd, dnnl_f32, grouped ? dnnl_goihw : dnnl_oihw);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&bu, 1, bd, dnnl_f32, dnnl_x);
    if (s == dnnl_success)
        s = dnnl_memory_desc_init_by_tag(&xa, 4, xd, dnnl_f32, dnnl_format_tag_any);
    if (s == dnnl_success)
        s = dnnl_memory_desc_init_by_tag(&ya, 4, yd, dnnl_f32, dnnl_format_tag_any);
    if (s == dnnl_success)
        s = dnnl_memory_desc_init_by_tag(&wa, wnd, wdd, dnnl_f32, dnnl_format_tag_any);
    if (s != dnnl_success) return s;
    dnnl_dims_t strides = {c->sh, c->sw}, dil = {c->dh - 1, c->dw - 1}, pl = {c->ph, c->pw};
    dnnl_dims_t pr = {pad_after(c->hy, c->sh, c->kh, c->dh, c->hx, c->ph),
                      pad_after(c->wy, c->sw, c->kw, c->dw, c->wx, c->pw)};
    bool bias = c->kind == FC__CONV_FORWARD && c->bias;
    dnnl_convolution_desc_t fd, bd_desc;
    s = dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training,
                                                   dnnl_convolution_direct, &xa, &wa,
                                                   bias ? &bu : NULL, &ya, strides, dil, pl, pr);
    if (s != dnnl_success) return s;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t fpd = NULL, pd = NULL;
    s = dnnl_primitive_attr_create(&attr);
    if (s == dnnl_success)
        s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (s == dnnl_success)
        s = dnnl_primitive_desc_create(&fpd, &fd, c->kind == FC__CONV_FORWARD ? attr : NULL,
                                       st->engine, NULL);
    if (s == dnnl_success && c->kind == FC__CONV_DGRAD) {
        s = dnnl_dilated_convolution_backward_data_desc_init(&bd_desc, dnnl_convolution_direct, &xa,
                                                             &wa, &ya, strides, dil, pl, pr);
        if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &bd_desc, attr, st->engine, fpd);
    } else if (s == dnnl_success && c->kind == FC__CONV_WGRAD) {
        s = dnnl_dilated_convolution_backward_weights_desc_init(
            &bd_desc, dnnl_convolution_direct, &xa, &wa, NULL, &ya, strides, dil, pl, pr);
        if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &bd_desc, attr, st->engine, fpd);
    } else if (s == dnnl_success) {
        pd = fpd;
        fpd = NULL;
    }
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    if (s != dnnl_success) {
        if (pd) dnnl_primitive_desc_destroy(pd);
        return s;
    }
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success)
        impl = "";
    e->direct = strncmp(impl, "jit", 3) == 0 && !slow_wgrad(c, impl);
    if (!e->direct) {
        dnnl_primitive_desc_destroy(pd);
        return dnnl_success; /* a refusal, cached */
    }
    s = dnnl_primitive_create(&e->prim, pd);
    const dnnl_memory_desc_t *q;
#define MD(what) (q = dnnl_primitive_desc_query_md(pd, what, 0))
    if (s == dnnl_success && c->kind == FC__CONV_FORWARD) {
        s = arg_make(st, &e->args[ARG_X], DNNL_ARG_SRC, &xu, MD(dnnl_query_src_md), true);
        if (s == dnnl_success)
            s = arg_make(st, &e->args[ARG_W], DNNL_ARG_WEIGHTS, &wu, MD(dnnl_query_weights_md),
                         true);
        if (s == dnnl_success)
            s = arg_make(st, &e->args[ARG_OUT], DNNL_ARG_DST, &yu, MD(dnnl_query_dst_md), false);
        if (s == dnnl_success && bias)
            s = dnnl_memory_create(&e->bias, &bu, st->engine, DNNL_MEMORY_NONE);
    } else if (s == dnnl_success && c->kind == FC__CONV_DGRAD) {
        s = arg_make(st, &e->args[ARG_GY], DNNL_ARG_DIFF_DST, &yu, MD(dnnl_query_diff_dst_md),
                     true);
        if (s == dnnl_success)
            s = arg_make(st, &e->args[ARG_W], DNNL_ARG_WEIGHTS, &wu, MD(dnnl_query_weights_md),
                         true);
        if (s == dnnl_success)
            s = arg_make(st, &e->args[ARG_OUT], DNNL_ARG_DIFF_SRC, &xu, MD(dnnl_query_diff_src_md),
                         false);
    } else if (s == dnnl_success) {
        s = arg_make(st, &e->args[ARG_X], DNNL_ARG_SRC, &xu, MD(dnnl_query_src_md), true);
        if (s == dnnl_success)
            s = arg_make(st, &e->args[ARG_GY], DNNL_ARG_DIFF_DST, &yu, MD(dnnl_query_diff_dst_md),
                         true);
        if (s == dnnl_success)
            s = arg_make(st, &e->args[ARG_OUT], DNNL_ARG_DIFF_WEIGHTS, &wu,
                         MD(dnnl_query_diff_weights_md), false);
    }
    if (s == dnnl_success && MD(dnnl_query_scratchpad_md)) {
        e->scratch_bytes = dnnl_memory_desc_get_size(q);
        if (e->scratch_bytes) s = dnnl_memory_create(&e->scratch, q, st->engine, DNNL_MEMORY_NONE);
    }
#undef MD
    dnnl_primitive_desc_destroy(pd);
    return s;
}

/* The entry for c, built on first use; NULL with the error in err. */
static conv_entry *entry_get(const fc__conv_call *c, fc_status *rc, char *err, size_t errcap) {
    const fc_allocator *alloc = fc__backend_cache_allocator(c->cache);
    void **slot = fc__backend_cache_conv_slot(c->cache, state_free);
    conv_state *st = *slot;
    if (!st) {
        if (!(st = fc__alloc(alloc, sizeof *st, _Alignof(conv_state)))) {
            *rc = FC_ERR_OOM;
            snprintf(err, errcap, "conv(onednn): out of memory for the primitive cache");
            return NULL;
        }
        memset(st, 0, sizeof *st);
        fc__onednn_cap_isa();
        dnnl_status_t s = dnnl_engine_create(&st->engine, dnnl_cpu, 0);
        if (s == dnnl_success)
            s = dnnl_stream_create(&st->stream, st->engine, dnnl_stream_default_flags);
        if (s != dnnl_success) {
            state_free(st, alloc);
            *rc = fail(s, "engine creation", c, err, errcap);
            return NULL;
        }
        *slot = st;
    }
    conv_key key = key_of(c);
    for (int i = 0; i < st->count; i++) {
        if (memcmp(&st->entries[i]->key, &key, sizeof key) == 0) {
            st->entries[i]->last_use = ++st->clock;
            return st->entries[i];
        }
    }
    conv_entry *e = fc__alloc(alloc, sizeof *e, _Alignof(conv_entry));
    if (!e) {
        *rc = FC_ERR_OOM;
        snprintf(err, errcap, "conv(onednn): out of memory for a primitive");
        return NULL;
    }
    memset(e, 0, sizeof *e);
    e->key = key;
    dnnl_status_t s = entry_build(st, e, c);
    if (s != dnnl_success) {
        /* unimplemented geometries are refusals like non-JIT ones */
        if (s == dnnl_unimplemented) {
            entry_free(e, alloc);
            if (!(e = fc__alloc(alloc, sizeof *e, _Alignof(conv_entry)))) {
                *rc = FC_ERR_OOM;
                snprintf(err, errcap, "conv(onednn): out of memory for a primitive");
                return NULL;
            }
            memset(e, 0, sizeof *e);
            e->key = key;
        } else {
            entry_free(e, alloc);
            *rc = fail(s, "primitive creation", c, err, errcap);
            return NULL;
        }
    }
    if (st->count == CONV_CACHE) {
        int oldest = 0;
        for (int i = 1; i < st->count; i++)
            if (st->entries[i]->last_use < st->entries[oldest]->last_use) oldest = i;
        entry_free(st->entries[oldest], alloc);
        st->entries[oldest] = st->entries[--st->count];
    }
    e->last_use = ++st->clock;
    st->entries[st->count++] = e;
    return e;
}

static bool geometry_fits(const fc__conv_call *c) {
    return pad_after(c->hy, c->sh, c->kh, c->dh, c->hx, c->ph) >= 0 &&
           pad_after(c->wy, c->sw, c->kw, c->dw, c->wx, c->pw) >= 0;
}

bool fc__conv_direct_takes(const fc__conv_call *c) {
    if (!c->cache || !geometry_fits(c)) return false;
    int prev = fc__omp_threads_push(1);
    fc_status rc = FC_OK;
    char err[256];
    conv_entry *e = entry_get(c, &rc, err, sizeof err);
    fc__omp_threads_pop(prev);
    return e && e->direct;
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static dnnl_status_t reorder_run(conv_state *st, const conv_arg *a, bool input) {
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, input ? a->plain : a->blocked},
                               {DNNL_ARG_TO, input ? a->blocked : a->plain}};
    return dnnl_primitive_execute(a->reorder, st->stream, 2, args);
}

fc_status fc__conv_direct(const fc__conv_call *c, char *err, size_t errcap) {
    int prev = fc__omp_threads_push(1);
    fc_status rc = FC_OK;
    conv_entry *e = entry_get(c, &rc, err, errcap);
    if (!e) goto out;
    if (!e->direct) {
        rc = FC_ERR_BACKEND;
        snprintf(err, errcap, "conv(onednn): no direct kernel for this geometry");
        goto out;
    }
    conv_state *st = *fc__backend_cache_conv_slot(c->cache, state_free);
    /* workspace: scratchpad and each blocked operand */
    size_t total = align64(e->scratch_bytes);
    for (int i = 0; i < ARG_COUNT; i++)
        if (e->args[i].reorder) total += align64(e->args[i].blocked_bytes);
    char *ws = fc__backend_workspace(c->cache, total ? total : 64);
    if (!ws) {
        rc = FC_ERR_OOM;
        snprintf(err, errcap, "conv(onednn): out of memory for a %zu-byte workspace", total);
        goto out;
    }
    const void *data[ARG_COUNT] = {c->x, c->gy, c->w, c->out};
    size_t at = align64(e->scratch_bytes);
    dnnl_status_t s = dnnl_success;
    for (int i = 0; i < ARG_COUNT && s == dnnl_success; i++) {
        conv_arg *a = &e->args[i];
        if (!a->used) continue;
        s = dnnl_memory_set_data_handle(a->plain, (void *)data[i]);
        if (s == dnnl_success && a->reorder) {
            s = dnnl_memory_set_data_handle(a->blocked, ws + at);
            at += align64(a->blocked_bytes);
        }
    }
    if (s == dnnl_success && e->scratch) s = dnnl_memory_set_data_handle(e->scratch, ws);
    if (s == dnnl_success && e->bias) s = dnnl_memory_set_data_handle(e->bias, (void *)c->bias);
    bool w_ready = c->w_unchanged && st->w_entry == e && st->w_data == c->w && st->w_ws == ws;
    for (int i = 0; i < ARG_OUT && s == dnnl_success; i++)
        if (e->args[i].reorder && !(i == ARG_W && w_ready)) s = reorder_run(st, &e->args[i], true);
    st->w_entry = NULL; /* set again below once the call has succeeded */
    dnnl_exec_arg_t args[ARG_COUNT + 2];
    int n = 0;
    for (int i = 0; i < ARG_COUNT; i++)
        if (e->args[i].used) args[n++] = (dnnl_exec_arg_t){e->args[i].dnnl_arg, e->args[i].blocked};
    if (e->bias) args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, e->bias};
    if (e->scratch) args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, e->scratch};
    if (s == dnnl_success) s = dnnl_primitive_execute(e->prim, st->stream, n, args);
    if (s == dnnl_success && e->args[ARG_OUT].reorder)
        s = reorder_run(st, &e->args[ARG_OUT], false);
    if (s == dnnl_success) s = dnnl_stream_wait(st->stream);
    if (s != dnnl_success) {
        rc = fail(s, "execution", c, err, errcap);
        goto out;
    }
    if (e->args[ARG_W].reorder) st->w_entry = e, st->w_data = c->w, st->w_ws = ws;
out:
    fc__omp_threads_pop(prev);
    return rc;
}

#endif /* DNNL_VERSION_MAJOR */
