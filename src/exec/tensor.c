/* SPDX-License-Identifier: MIT */
/* tensor.c - tensor handles: creation, queries, data access, casts.
 *
 * A handle wraps one raw tensor (one buffer reference) plus the autograd
 * links. Handles are refcounted (fc_retain/fc_release) and recycled through
 * a per-context free list, so steady-state loops allocate nothing. Every
 * live handle sits on the context's live list so fc_ctx_free can reclaim
 * what a caller forgot. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "exec/tensor.h"
#include "exec/pool.h"
#include "exec/profile.h"

/* ---- handle lifetime ------------------------------------------------------------
 *
 * A released header is dead: refs 0, off the live list, queued at the tail
 * of the context's free queue. Headers are handed out again from the head,
 * and only while more than FC__HANDLE_QUARANTINE others wait behind it, so
 * a dead header stays dead for at least that many later releases: a second
 * fc_release (or an fc_retain) of it in that window sees refs 0 and is
 * reported instead of destroying whichever tensor would otherwise occupy
 * the header by then. The first FC__HANDLE_QUARANTINE headers come in one
 * allocation (the slab) that starts the queue full, so a steady loop
 * reuses headers from its second iteration on, as it did with a plain free
 * list. The checks cost one compare on paths that already do an atomic. */

static bool in_slab(const fc_ctx *ctx, const fc_tensor *t) {
    const fc_tensor *s = ctx->handle_slab;
    return s && t >= s && t < s + FC__HANDLE_QUARANTINE;
}

static void queue_push(fc_ctx *ctx, fc_tensor *t) {
    t->live_next = NULL;
    if (ctx->tensor_free_tail)
        ctx->tensor_free_tail->live_next = t;
    else
        ctx->tensor_free = t;
    ctx->tensor_free_tail = t;
    ctx->tensor_free_len++;
}

/* The header to use next: the queue's head once enough wait behind it, else
 * a fresh one (the slab first). NULL when the allocator fails. */
static fc_tensor *header_take(fc_ctx *ctx) {
    if (ctx->tensor_free_len > FC__HANDLE_QUARANTINE) {
        fc_tensor *t = ctx->tensor_free;
        ctx->tensor_free = t->live_next;
        ctx->tensor_free_len--;
        return t; /* the queue holds more than one, so the tail stays */
    }
    if (!ctx->handle_slab && !ctx->handle_no_reuse) {
        fc_tensor *s = fc__ctx_alloc(ctx, sizeof *s * FC__HANDLE_QUARANTINE);
        if (!s) return NULL;
        ctx->handle_slab = s;
        for (int i = 0; i < FC__HANDLE_QUARANTINE; i++) {
            atomic_init(&s[i].refs, 0);
            s[i].ctx = ctx;
            queue_push(ctx, &s[i]);
        }
    }
    return fc__ctx_alloc(ctx, sizeof(fc_tensor));
}

/* A handle with every field but raw set; the caller writes raw whole. */
static fc_tensor *handle_new(fc_ctx *ctx) {
    fc_tensor *t = header_take(ctx);
    if (!t) return NULL;
    t->ctx = ctx;
    atomic_init(&t->refs, 1);
    t->flags = 0;
    t->scope_slot = -1;
    t->node = NULL;
    t->grad = NULL;
    t->gstage = NULL;
    t->hooks = NULL;
    t->profile_ns = ctx->profiling ? fc__profile_stamp(ctx) : 0;
    t->live_prev = NULL;
    t->live_next = ctx->live;
    if (ctx->live) ctx->live->live_prev = t;
    ctx->live = t;
    ctx->tensors_live++;
    return t;
}

static void handle_destroy(fc_tensor *t) {
    fc_ctx *ctx = t->ctx;
    if (t->scope_slot >= 0) ctx->scope_items[t->scope_slot] = NULL;
    t->scope_slot = -1; /* a stale fc_keep must not clear a reused slot */
    if (t->node && ctx->node_release) ctx->node_release(ctx, t->node);
    t->node = NULL;
    fc_tensor *g = t->grad, *gs = t->gstage;
    t->grad = NULL;
    t->gstage = NULL;
    if (t->hooks && ctx->hooks_free) ctx->hooks_free(ctx, t->hooks);
    t->hooks = NULL;
    fc__raw_release(&t->raw);
    if (t->live_prev)
        t->live_prev->live_next = t->live_next;
    else
        ctx->live = t->live_next;
    if (t->live_next) t->live_next->live_prev = t->live_prev;
    ctx->tensors_live--;
    t->live_prev = NULL;
    atomic_store_explicit(&t->refs, 0, memory_order_relaxed);
    if (ctx->handle_no_reuse && !in_slab(ctx, t))
        fc__ctx_free(ctx, t, sizeof *t);
    else
        queue_push(ctx, t);
    if (g) fc_release(g);
    if (gs) fc_release(gs);
}

/* A retain or release met a dead header (refs was 0): put the count back
 * and report it in the context the header still belongs to. */
static void dead_handle(fc_tensor *t, const char *fn, int delta) {
    atomic_fetch_add_explicit(&t->refs, delta, memory_order_relaxed);
    fc__fail(t->ctx, FC_ERR_STATE,
             "%s: handle %p already released (its last reference was dropped earlier); "
             "nothing was done",
             fn, (void *)t);
}

fc_tensor *fc_retain(fc_tensor *t) {
    if (!t) return NULL;
    if (atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed) <= 0) {
        dead_handle(t, "fc_retain", -1);
        return NULL;
    }
    return t;
}

void fc_release(fc_tensor *t) {
    if (!t) return;
    int old = atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel);
    if (old == 1)
        handle_destroy(t);
    else if (old <= 0)
        dead_handle(t, "fc_release", 1);
}

void fc__tensor_destroy_all(fc_ctx *ctx) {
    /* Drop autograd links first so destroying one handle never reaches into
     * another that is already gone. */
    for (fc_tensor *t = ctx->live; t; t = t->live_next) {
        t->scope_slot = -1;
        if (t->node && ctx->node_release) ctx->node_release(ctx, t->node);
        t->node = NULL;
        t->grad = NULL; /* grads are live handles themselves */
        t->gstage = NULL;
    }
    while (ctx->live) handle_destroy(ctx->live);
    while (ctx->tensor_free) {
        fc_tensor *n = ctx->tensor_free->live_next;
        if (!in_slab(ctx, ctx->tensor_free))
            fc__ctx_free(ctx, ctx->tensor_free, sizeof(fc_tensor));
        ctx->tensor_free = n;
    }
    ctx->tensor_free_tail = NULL;
    ctx->tensor_free_len = 0;
    fc__ctx_free(ctx, ctx->handle_slab, sizeof(fc_tensor) * FC__HANDLE_QUARANTINE);
    ctx->handle_slab = NULL;
    ctx->scope_len = 0;
    ctx->scope_depth = 0;
    ctx->scope_overflow = 0;
}

fc_ctx *fc_tensor_ctx(const fc_tensor *t) { return t ? t->ctx : NULL; }

/* ---- internal constructors ------------------------------------------------------- */

const char *fc__desc(const fc_tensor *t, char *buf, int cap) {
    if (!t) {
        snprintf(buf, (size_t)cap, "NULL");
        return buf;
    }
    char s[160];
    fc__shape_str(t->raw.shape, t->raw.rank, s, (int)sizeof s);
    snprintf(buf, (size_t)cap, "%s%s", fc_dtype_name(t->raw.dtype), s);
    return buf;
}

fc_tensor *fc__tensor_wrap(fc_ctx *ctx, const char *op, fc_raw *raw) {
    fc_tensor *t = handle_new(ctx);
    if (!t) {
        fc__raw_release(raw);
        fc__fail(ctx, FC_ERR_OOM, "%s: out of memory for a tensor handle", op);
        return NULL;
    }
    t->raw = *raw;
    if (!fc__scope_register(ctx, t)) {
        handle_destroy(t);
        fc__fail(ctx, FC_ERR_OOM, "%s: out of memory recording the result in its scope", op);
        return NULL;
    }
    return t;
}

static fc_status check_shape(fc_ctx *ctx, const char *op, fc_dtype dtype, const int64_t *shape,
                             int rank) {
    if (!fc_dtype_is_valid(dtype))
        return fc__fail(ctx, FC_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dtype);
    if (!shape) return fc__fail(ctx, FC_ERR_NULL_ARG, "%s: shape is NULL", op);
    if (rank < 1 || rank > FC_MAX_RANK)
        return fc__fail(ctx, FC_ERR_RANK, "%s: rank %d is outside 1..%d", op, rank, FC_MAX_RANK);
    fc_status st = fc__shape_storage_numel(dtype, shape, rank, NULL);
    if (st != FC_OK) {
        char s[160];
        fc__shape_str(shape, rank, s, (int)sizeof s);
        if (st == FC_ERR_INVALID_SHAPE && fc_dtype_is_block(dtype) &&
            fc__shape_validate(shape, rank) == FC_OK)
            return fc__fail(ctx, st,
                            "%s: shape %s: the last axis of a %s tensor must be a nonzero "
                            "multiple of %lld",
                            op, s, fc_dtype_name(dtype), (long long)fc_dtype_block_elems(dtype));
        if (st == FC_ERR_OVERFLOW)
            return fc__fail(ctx, st, "%s: shape %s: element or byte count overflows", op, s);
        return fc__fail(ctx, st, "%s: invalid shape %s (every dim must be >= 1)", op, s);
    }
    return FC_OK;
}

fc_buffer *fc__ctx_buffer(fc_ctx *ctx, size_t nbytes) { return fc__pool_get(ctx, nbytes); }

fc_tensor *fc__tensor_new(fc_ctx *ctx, const char *op, fc_dtype dtype, const int64_t *shape,
                          int rank) {
    /* Every op allocates through here: the common case (a scalar dtype, a
     * valid shape) sizes the storage in one pass; anything else takes
     * check_shape for its exact error. */
    int64_t n = 1;
    bool ok = shape && rank >= 1 && rank <= FC_MAX_RANK && fc_dtype_is_valid(dtype) &&
              fc_dtype_block_elems(dtype) == 1;
    for (int i = 0; ok && i < rank; i++)
        if ((ok = shape[i] >= 1 && shape[i] <= FC__MAX_ELEMS / n)) n *= shape[i];
    size_t es = ok ? fc_dtype_size(dtype) : 0;
    if (ok) ok = (uint64_t)n <= (uint64_t)PTRDIFF_MAX / es; /* fc__shape_storage_numel's limits */
    if (!ok) {
        if (check_shape(ctx, op, dtype, shape, rank) != FC_OK) return NULL;
        fc__shape_storage_numel(dtype, shape, rank, &n);
        es = fc_dtype_size(dtype);
    }
    fc_buffer *b = fc__pool_get(ctx, (size_t)n * es);
    if (!b) {
        fc__fail(ctx, FC_ERR_OOM, "%s: out of memory for %lld bytes", op,
                 (long long)((size_t)n * es));
        return NULL;
    }
    if (!ok) { /* block dtypes: core lays out the block axis */
        fc_raw raw;
        fc__raw_from_buffer(b, dtype, shape, rank, &raw); /* cannot fail: sizes checked */
        return fc__tensor_wrap(ctx, op, &raw);
    }
    fc_tensor *t = handle_new(ctx);
    if (!t) {
        fc__buffer_release(b);
        fc__fail(ctx, FC_ERR_OOM, "%s: out of memory for a tensor handle", op);
        return NULL;
    }
    /* the layout fc__raw_from_buffer gives a scalar dtype, written in place
     * (the shape was validated above, so its checks would repeat) */
    fc_raw *r = &t->raw;
    r->buf = b;
    r->dtype = dtype;
    r->rank = rank;
    r->offset = 0;
    int64_t stride = 1;
    for (int i = rank - 1; i >= 0; i--) {
        r->shape[i] = shape[i];
        r->strides[i] = stride;
        stride *= shape[i];
    }
    for (int i = rank; i < FC_MAX_RANK; i++)
        r->shape[i] = 1, r->strides[i] = 0;
    if (!fc__scope_register(ctx, t)) {
        handle_destroy(t);
        fc__fail(ctx, FC_ERR_OOM, "%s: out of memory recording the result in its scope", op);
        return NULL;
    }
    return t;
}

fc_tensor *fc__tensor_view(fc_ctx *ctx, const char *op, fc_tensor *t, const int64_t *shape,
                           const int64_t *strides, int rank, int64_t offset) {
    fc_raw v;
    fc_status st = fc__raw_view_strided(&t->raw, shape, strides, rank, offset - t->raw.offset, &v);
    if (st != FC_OK) {
        char a[160], b[160];
        fc__fail(ctx, st, "%s: cannot view %s as %s", op, fc__desc(t, a, (int)sizeof a),
                 fc__shape_str(shape, rank, b, (int)sizeof b));
        return NULL;
    }
    return fc__tensor_wrap(ctx, op, &v);
}

/* ---- check_finite ------------------------------------------------------------------ */

int64_t fc__count_non_finite(const fc_tensor *t) {
    fc_dtype dt = t->raw.dtype;
    if (!fc_dtype_is_float(dt) && !fc_dtype_is_f8(dt)) return 0;
    int64_t n = fc__raw_numel(&t->raw), bad = 0;
    if (fc__raw_is_contiguous(&t->raw) && dt == FC_F32) {
        const float *p = (const float *)fc__raw_base(&t->raw);
        for (int64_t i = 0; i < n; i++) bad += !isfinite(p[i]);
        return bad;
    }
    /* generic: walk the logical order through the odometer copy, in chunks */
    double tmp_d;
    size_t es = fc_dtype_size(dt);
    unsigned char chunk[4096];
    int64_t per = (int64_t)(sizeof chunk / es);
    for (int64_t s = 0; s < n; s += per) {
        int64_t c = n - s < per ? n - s : per;
        fc__raw_copy_range(&t->raw, chunk, s, c);
        for (int64_t i = 0; i < c; i++) {
            tmp_d = fc__load_f64(dt, chunk + (size_t)i * es);
            bad += !isfinite(tmp_d);
        }
    }
    return bad;
}

fc_tensor *fc__finish(fc_ctx *ctx, const char *op, fc_tensor *out) {
    if (!out) return NULL;
    /* a fresh output (one reference, stamped this recording) ends its op
     * here; a handle an op hands back unchanged is neither */
    if (ctx->profiling && out->profile_ns > 0 && atomic_load(&out->refs) == 1) {
        fc__profile_forward(ctx, op, out->profile_ns,
                            (int64_t)((size_t)fc__numel(&out->raw) * fc_dtype_size(out->raw.dtype)));
        out->profile_ns = 0;
    }
    if (ctx->check_finite) {
        int64_t bad = fc__count_non_finite(out);
        if (bad) {
            char d[160];
            fc__fail(ctx, FC_ERR_NON_FINITE, "%s: produced %lld non-finite value%s in %s", op,
                     (long long)bad, bad == 1 ? "" : "s", fc__desc(out, d, (int)sizeof d));
            fc_release(out);
            return NULL;
        }
    }
    return out;
}

/* ---- element helpers ------------------------------------------------------------------ */

double fc__load_f64(fc_dtype dtype, const void *p) {
    double v = 0;
    fc_cast_scalar(dtype, p, FC_F64, &v);
    return v;
}

void fc__store_f64(fc_dtype dtype, void *p, double v) { fc_cast_scalar(FC_F64, &v, dtype, p); }
