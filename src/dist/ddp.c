/* SPDX-License-Identifier: MIT */
/* ddp.c - the data-parallel wrapper (fucina/dist.h): gradient buckets
 * reduced while backward runs.
 *
 * Each parameter has a slot: its bucket and its place in it. A bucket's
 * buffer holds its parameters' gradients end to end, then one presence
 * value per parameter (1 when this rank has a gradient for it, else 0), so
 * after the reduction every rank knows whether any rank had one: a
 * parameter no rank reached keeps no gradient (the optimizer then skips
 * it, on every rank alike), one that some rank reached gets the mean.
 *
 * A step: hooks fill slots as backward completes gradients; a bucket whose
 * slots are all filled starts when every bucket before it has started
 * (w->next_start), and every hook polls the buckets in flight, which is
 * also what moves them forward (OpenMPI progresses non-blocking
 * collectives only inside MPI calls). fc_ddp_sync fills what backward did
 * not reach, starts the rest, adds one small all-reduce of the ranks'
 * failure count (so a rank whose backward failed makes every rank fail,
 * before any gradient is written), waits, and writes the means into
 * fc_grad. Phase 2 of the buckets starts in bucket order
 * (w->next_gather): see dist/dist.h for why the orders matter. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"

typedef struct slot {
    fc_ddp *w;
    fc_tensor *p; /* retained */
    int index;    /* in the optimizer's order */
    int bucket;
    int64_t off; /* first element in the bucket */
    int64_t numel;
    int64_t pres; /* its presence value's element in the bucket */
    int64_t hook_id;
    int owner;  /* zero1: the rank that updates it */
    bool ready; /* filled for this step */
} slot;

typedef struct bucket {
    fc__dist_red red; /* gradients, then presence values */
    int first, count; /* w->order[first, first + count): its parameters */
    int pending;      /* slots not filled yet this step */
    int64_t bytes;    /* gradient bytes */
    bool early;       /* started from a hook */
} bucket;

struct fc_ddp {
    fc_dist *d;
    fc_ctx *ctx;
    fc_optim *opt;
    int n;
    slot *slots; /* n, in the optimizer's order */
    int *order;  /* n parameter indices, bucket by bucket */
    int nb;
    bucket *b;
    int next_start, next_gather;
    bool sync_on, in_step, no_overlap, zero1;
    double t_first_hook;
    fc_ddp_stats st;
};

enum { BUCKET_DEFAULT = 25 << 20 };

static bool is_f64(const slot *s) { return s->p->raw.dtype == FC_F64; }
static size_t esize(bool f64) { return f64 ? sizeof(double) : sizeof(float); }

// ----------------------------------------------------------------------------
// filling and starting

/* Slot s's part of its bucket: src (this walk's gradient, NULL when the
 * walk did not reach it) plus what fc_grad already holds (earlier
 * micro-steps), or zeros when neither exists. */
static void fill(fc_ddp *w, slot *s, const fc_tensor *src) {
    bucket *b = &w->b[s->bucket];
    const fc_tensor *prev = s->p->grad;
    const void *a = src ? fc_tensor_data(src) : NULL, *c = prev ? fc_tensor_data(prev) : NULL;
    if (is_f64(s)) {
        double *dst = (double *)b->red.send + s->off;
        const double *x = a, *y = c;
        for (int64_t i = 0; i < s->numel; i++)
            dst[i] = x && y ? y[i] + x[i] : x ? x[i] : y ? y[i] : 0.0;
        ((double *)b->red.send)[s->pres] = x || y ? 1.0 : 0.0;
    } else {
        float *dst = (float *)b->red.send + s->off;
        const float *x = a, *y = c;
        if (x && y) {
            for (int64_t i = 0; i < s->numel; i++)
                dst[i] = y[i] + x[i];
        } else if (x || y) {
            memcpy(dst, x ? x : y, sizeof(float) * (size_t)s->numel);
        } else {
            memset(dst, 0, sizeof(float) * (size_t)s->numel);
        }
        ((float *)b->red.send)[s->pres] = x || y ? 1.0f : 0.0f;
    }
    s->ready = true;
}

/* Starts, in order, every bucket whose slots (and whose predecessors') are
 * filled. */
static fc_status start_ready(fc_ddp *w, bool early) {
    fc_status st = FC_OK;
    while (st == FC_OK && w->next_start < w->nb && w->b[w->next_start].pending == 0) {
        bucket *b = &w->b[w->next_start++];
        st = fc__dist_red_start(w->d, &b->red, 1.0 / w->d->size);
        b->early = early;
        w->st.buckets++;
        w->st.started_early += early;
        w->st.bytes += b->bytes;
    }
    return st;
}

/* One poll of every bucket in flight; phase 2 starts in bucket order. */
static fc_status progress(fc_ddp *w) {
    fc_status st = FC_OK;
    for (int k = 0; k < w->next_start && st == FC_OK; k++) {
        fc__dist_red *r = &w->b[k].red;
        if (r->phase == FC__RED_DONE) continue;
        st = fc__dist_red_poll(w->d, r, k == w->next_gather);
        if (r->phase >= FC__RED_GATHER && k == w->next_gather) w->next_gather++;
    }
    return st;
}

static fc_status hook(fc_ctx *ctx, fc_tensor *grad, fc_tensor **replace, void *user) {
    (void)replace;
    slot *s = user;
    fc_ddp *w = s->w;
    if (!w->sync_on || w->d->size == 1) return FC_OK;
    fc_status ust = fc__dist_usable(w->d, "fc_ddp (gradient hook)");
    if (ust != FC_OK) return ust;
    if (s->ready)
        return fc__fail(ctx, FC_ERR_STATE,
                        "fc_ddp: the gradient of parameter %d was completed twice before "
                        "fc_ddp_sync (two backward walks with sync on); turn sync off "
                        "(fc_ddp_set_sync) for every micro-step but the last",
                        s->index);
    double t0 = fc__dist_now();
    if (!w->in_step) {
        w->in_step = true;
        w->t_first_hook = t0;
    }
    fill(w, s, grad);
    fc_status st = FC_OK;
    if (--w->b[s->bucket].pending == 0 && !w->no_overlap) st = start_ready(w, true);
    if (st == FC_OK) st = progress(w);
    w->st.hook_s += fc__dist_now() - t0;
    return st;
}

// ----------------------------------------------------------------------------
// the step's end

static void reset_step(fc_ddp *w) {
    for (int i = 0; i < w->n; i++)
        w->slots[i].ready = false;
    for (int k = 0; k < w->nb; k++) {
        w->b[k].pending = w->b[k].count;
        w->b[k].red.phase = FC__RED_IDLE;
    }
    w->next_start = w->next_gather = 0;
    w->in_step = false;
}

/* The means into fc_grad, where some rank had a gradient. */
static fc_status write_grads(fc_ddp *w) {
    for (int i = 0; i < w->n; i++) {
        slot *s = &w->slots[i];
        bucket *b = &w->b[s->bucket];
        bool f64 = is_f64(s);
        double present = f64 ? ((double *)b->red.send)[s->pres] : ((float *)b->red.send)[s->pres];
        if (!(present > 0)) continue;
        if (!s->p->grad) {
            fc_tensor *g =
                fc_keep(fc_empty(w->ctx, f64 ? FC_F64 : FC_F32, s->p->raw.shape, s->p->raw.rank));
            if (!g) return fc__failed(w->ctx);
            s->p->grad = g;
        }
        void *dst = fc_tensor_data_mut(s->p->grad);
        if (!dst) return fc__failed(w->ctx);
        memcpy(dst, (char *)b->red.send + (size_t)s->off * esize(f64),
               (size_t)s->numel * esize(f64));
    }
    return FC_OK;
}

fc_status fc_ddp_sync(fc_ddp *w) {
    if (!w) return FC_ERR_NULL_ARG;
    if (!w->sync_on || w->d->size == 1) return FC_OK;
    fc_dist *d = w->d;
    fc_status ust = fc__dist_usable(d, "fc_ddp_sync");
    if (ust != FC_OK) return ust;
    double t0 = fc__dist_now();
    if (w->in_step) w->st.backward_s += t0 - w->t_first_hook;
    fc_status st = progress(w);
    for (int k = 0; k < w->next_start; k++)
        w->st.done_early += w->b[k].red.phase == FC__RED_DONE;
    /* what backward did not reach: fc_grad or zeros */
    for (int k = w->next_start; k < w->nb; k++) {
        bucket *b = &w->b[k];
        for (int j = 0; j < b->count; j++) {
            slot *s = &w->slots[w->order[b->first + j]];
            if (!s->ready) fill(w, s, NULL);
        }
        b->pending = 0;
    }
    if (st == FC_OK) st = start_ready(w, false);
    /* the ranks' failures, counted after every bucket (same order on all) */
    int failed = fc_ctx_status(w->ctx) != FC_OK || st != FC_OK, nfailed = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    fc_status cst =
        fc__dist_check(d, MPI_Iallreduce(&failed, &nfailed, 1, MPI_INT, MPI_SUM, d->comm, &req),
                       "fc_ddp_sync: MPI_Iallreduce of the failure count");
    if (st == FC_OK) st = cst;
    double tw = fc__dist_now(), deadline = d->timeout_s < 0 ? -1 : tw + d->timeout_s;
    for (unsigned spin = 0; st == FC_OK; spin++) {
        st = progress(w);
        int flag_done = 0;
        if (st == FC_OK)
            st = fc__dist_check(d, MPI_Test(&req, &flag_done, MPI_STATUS_IGNORE),
                                "fc_ddp_sync: MPI_Test");
        if (st != FC_OK) break;
        bool all = flag_done && w->next_gather == w->nb;
        for (int k = 0; all && k < w->nb; k++)
            all = w->b[k].red.phase == FC__RED_DONE;
        if (all) break;
        if (deadline >= 0 && (spin & 63) == 0 && fc__dist_now() > deadline) {
            fc__fail(w->ctx, FC_ERR_COMM,
                     "fc_ddp_sync: rank %d of %d waited %g s for the gradient buckets (%d of "
                     "%d gathered); another rank may have died or stopped calling "
                     "fc_ddp_sync; fc_dist_free now ends the job",
                     d->rank, d->size, d->timeout_s, w->next_gather, w->nb);
            st = fc__dist_broken(d, FC_ERR_COMM, "fc_ddp_sync waited %g s in vain for the buckets",
                                 d->timeout_s);
            break;
        }
        fc__dist_pause(spin);
    }
    w->st.wait_s += fc__dist_now() - tw;
    if (st != FC_OK) return st; /* requests may be in flight: the wrapper is done for */
    w->st.syncs++;
    if (nfailed > 0) {
        reset_step(w);
        w->st.sync_s += fc__dist_now() - t0;
        return fc__fail(w->ctx, FC_ERR_STATE,
                        "fc_ddp_sync: the backward failed on %d of %d ranks%s; no gradient "
                        "was averaged (each rank keeps its own)",
                        nfailed, d->size, failed ? ", this one among them" : "");
    }
    st = write_grads(w);
    reset_step(w);
    w->st.sync_s += fc__dist_now() - t0;
    return st;
}

fc_status fc_ddp_set_sync(fc_ddp *w, bool on) {
    if (!w) return FC_ERR_NULL_ARG;
    if (w->in_step && !on)
        return fc__fail(w->ctx, FC_ERR_STATE,
                        "fc_ddp_set_sync: a backward with sync on ran and fc_ddp_sync has not; "
                        "call it first");
    w->sync_on = on;
    return FC_OK;
}

// ----------------------------------------------------------------------------
// creation: the cross-rank check, the broadcast, the buckets, the hooks

enum { DESC = 2 + FC_MAX_RANK }; /* dtype, rank, shape: one parameter's description */

static void describe(const fc_tensor *p, int64_t *v) {
    memset(v, 0, sizeof(int64_t) * DESC);
    if (!p) return;
    v[0] = (int64_t)p->raw.dtype;
    v[1] = p->raw.rank;
    for (int i = 0; i < p->raw.rank; i++)
        v[2 + i] = p->raw.shape[i];
}

static uint64_t fnv(uint64_t h, const int64_t *v, int n) {
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 8; k++)
            h = (h ^ (((uint64_t)v[i] >> (8 * k)) & 0xff)) * 0x100000001b3ull;
    return h;
}

static const char *desc_str(const int64_t *v, char *buf, int cap) {
    char s[128];
    fc__shape_str(v + 2, (int)v[1], s, (int)sizeof s);
    snprintf(buf, (size_t)cap, "%s%s", fc_dtype_name((fc_dtype)v[0]), s);
    return buf;
}

/* Every rank learns whether all have rank 0's parameter list; on a
 * difference every rank fails with a message naming it. local is this
 * rank's own verdict so far (a failed local check must not leave the
 * others waiting in the collective: it travels with the description). */
static fc_status check_lists(fc_ddp *w, fc_tensor *const *ps, fc_status local) {
    fc_dist *d = w->d;
    int N = d->size, n = w->n;
    int64_t *desc = fc__ctx_alloc(w->ctx, sizeof(int64_t) * (size_t)(n > 0 ? n : 1) * DESC);
    int64_t *all = fc__ctx_alloc(w->ctx, sizeof(int64_t) * 3 * (size_t)N);
    fc_status st = desc && all ? FC_OK : fc__fail(w->ctx, FC_ERR_OOM, "fc_ddp_new: out of memory");
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; st == FC_OK && i < n; i++) {
        describe(ps[i], desc + (size_t)i * DESC);
        h = fnv(h, desc + (size_t)i * DESC, DESC);
    }
    int64_t mine[3] = {n, (int64_t)h, st == FC_OK && local == FC_OK};
    MPI_Request req = MPI_REQUEST_NULL;
    if (st == FC_OK)
        st = fc__dist_check(
            d, MPI_Iallgather(mine, 3, MPI_INT64_T, all, 3, MPI_INT64_T, d->comm, &req),
            "fc_ddp_new: MPI_Iallgather of the parameter lists");
    if (st == FC_OK) st = fc__dist_wait(d, &req, 1, "fc_ddp_new (checking parameter lists)");
    int bad_rank = -1, failed_rank = -1;
    for (int r = 0; st == FC_OK && r < N; r++) {
        if (!all[3 * r + 2] && failed_rank < 0) failed_rank = r;
        if ((all[3 * r] != all[0] || all[3 * r + 1] != all[1]) && bad_rank < 0) bad_rank = r;
    }
    if (st == FC_OK && failed_rank >= 0 && local == FC_OK)
        st = fc__fail(w->ctx, FC_ERR_STATE,
                      "fc_ddp_new: rank %d could not take part (see its own error)", failed_rank);
    else if (st == FC_OK && local != FC_OK)
        st = local;
    if (st == FC_OK && bad_rank >= 0) {
        /* the slow path, only on error: rank 0's list to everyone */
        int n0 = (int)all[0];
        int64_t *d0 = fc__ctx_alloc(w->ctx, sizeof(int64_t) * (size_t)(n0 > 0 ? n0 : 1) * DESC);
        if (!d0) {
            st = fc__fail(w->ctx, FC_ERR_OOM, "fc_ddp_new: out of memory");
        } else {
            if (d->rank == 0) memcpy(d0, desc, sizeof(int64_t) * (size_t)n0 * DESC);
            st = fc__dist_check(d, MPI_Ibcast(d0, n0 * DESC, MPI_INT64_T, 0, d->comm, &req),
                                "fc_ddp_new: MPI_Ibcast");
            if (st == FC_OK) st = fc__dist_wait(d, &req, 1, "fc_ddp_new (rank 0's list)");
            int first = -1;
            for (int i = 0; st == FC_OK && i < (n < n0 ? n : n0) && first < 0; i++)
                if (memcmp(desc + (size_t)i * DESC, d0 + (size_t)i * DESC,
                           sizeof(int64_t) * DESC) != 0)
                    first = i;
            char a[160], b[160];
            if (st != FC_OK) {
            } else if (first >= 0) {
                st = fc__fail(w->ctx, FC_ERR_SHAPE_MISMATCH,
                              "fc_ddp_new: the ranks' parameter lists differ: this rank (%d) "
                              "has %d parameters, rank 0 has %d; parameter %d is %s here and "
                              "%s on rank 0",
                              d->rank, n, n0, first, desc_str(desc + (size_t)first * DESC, a, 160),
                              desc_str(d0 + (size_t)first * DESC, b, 160));
            } else if (n != n0) {
                st = fc__fail(w->ctx, FC_ERR_SHAPE_MISMATCH,
                              "fc_ddp_new: the ranks' parameter lists differ: this rank (%d) "
                              "has %d parameters, rank 0 has %d (the first %d agree)",
                              d->rank, n, n0, n < n0 ? n : n0);
            } else {
                st = fc__fail(w->ctx, FC_ERR_SHAPE_MISMATCH,
                              "fc_ddp_new: the ranks' parameter lists differ: rank %d has %lld "
                              "parameters and a list other than rank 0's (%d parameters); this "
                              "rank's list is rank 0's",
                              bad_rank, (long long)all[3 * bad_rank], n0);
            }
            fc__ctx_free(w->ctx, d0, sizeof(int64_t) * (size_t)(n0 > 0 ? n0 : 1) * DESC);
        }
    }
    if (desc) fc__ctx_free(w->ctx, desc, sizeof(int64_t) * (size_t)(n > 0 ? n : 1) * DESC);
    if (all) fc__ctx_free(w->ctx, all, sizeof(int64_t) * 3 * (size_t)N);
    return st;
}

/* Buckets over the parameters in reverse registration order. */
static fc_status build_buckets(fc_ddp *w, int64_t cap) {
    w->b = fc__ctx_alloc(w->ctx, sizeof *w->b * (size_t)(w->n > 0 ? w->n : 1));
    if (!w->b) return fc__fail(w->ctx, FC_ERR_OOM, "fc_ddp_new: out of memory");
    memset(w->b, 0, sizeof *w->b * (size_t)(w->n > 0 ? w->n : 1));
    int64_t elems = 0;
    for (int j = 0; j < w->n; j++) {
        int i = w->n - 1 - j;
        slot *s = &w->slots[i];
        int64_t bytes = s->numel * (int64_t)esize(is_f64(s));
        bucket *cur = w->nb > 0 ? &w->b[w->nb - 1] : NULL;
        bool same = cur && is_f64(&w->slots[w->order[cur->first]]) == is_f64(s);
        if (!cur || !same || cur->bytes + bytes > cap) {
            cur = &w->b[w->nb++];
            cur->first = j;
            elems = 0;
        }
        w->order[j] = i;
        s->bucket = w->nb - 1;
        s->off = elems;
        elems += s->numel;
        cur->count++;
        cur->bytes += bytes;
    }
    /* presence values after the gradients; then the buffers */
    for (int k = 0; k < w->nb; k++) {
        bucket *b = &w->b[k];
        int64_t e = b->bytes / (int64_t)esize(is_f64(&w->slots[w->order[b->first]]));
        for (int j = 0; j < b->count; j++)
            w->slots[w->order[b->first + j]].pres = e + j;
        b->pending = b->count;
        if (w->d->size > 1) {
            fc_status st = fc__dist_red_init(w->d, &b->red, is_f64(&w->slots[w->order[b->first]]),
                                             e + b->count);
            if (st != FC_OK) return st;
        }
    }
    return FC_OK;
}

/* zero1: each parameter, in order, to the rank holding the fewest elements
 * so far (the lowest such rank): the same on every rank, as the lists are */
static void assign_owners(fc_ddp *w) {
    int N = w->d->size;
    int64_t load[64] = {0};
    int64_t *ld = N <= 64 ? load : fc__ctx_alloc(w->ctx, sizeof(int64_t) * (size_t)N);
    if (ld && ld != load) memset(ld, 0, sizeof(int64_t) * (size_t)N);
    if (!ld) w->zero1 = false; /* no memory for N counters: no sharding, still correct */
    for (int i = 0; i < w->n; i++) {
        slot *s = &w->slots[i];
        int best = 0;
        for (int r = 1; w->zero1 && r < N; r++)
            if (ld[r] < ld[best]) best = r;
        s->owner = w->zero1 ? best : 0;
        if (w->zero1) ld[best] += s->numel;
        w->st.elems += s->numel;
        if (!w->zero1 || s->owner == w->d->rank) w->st.owned_elems += s->numel;
    }
    if (ld && ld != load) fc__ctx_free(w->ctx, ld, sizeof(int64_t) * (size_t)N);
}

fc_ddp *fc_ddp_new(fc_dist *d, fc_optim *opt, const fc_ddp_opts *opts) {
    if (!d) return NULL;
    if (fc__dist_usable(d, "fc_ddp_new") != FC_OK) return NULL;
    if (!opt) {
        fc__fail(d->ctx, FC_ERR_NULL_ARG, "fc_ddp_new: opt is NULL");
        return NULL;
    }
    fc_ddp_opts o = opts ? *opts : (fc_ddp_opts){0};
    int n = fc_optim_param_count(opt);
    fc_ctx *ctx = d->ctx;
    for (int i = 0; i < n; i++)
        if (fc_optim_param(opt, i)->ctx != ctx) {
            fc__fail(ctx, FC_ERR_CONTEXT,
                     "fc_ddp_new: the optimizer's parameter %d belongs to another context than "
                     "the fc_dist's",
                     i);
            return NULL;
        }
    if (o.bucket_bytes < 0) {
        fc__fail(ctx, FC_ERR_INVALID_ARG, "fc_ddp_new: bucket_bytes is %lld",
                 (long long)o.bucket_bytes);
        return NULL;
    }
    fc_ddp *w = fc__ctx_alloc(ctx, sizeof *w);
    if (!w) {
        fc__fail(ctx, FC_ERR_OOM, "fc_ddp_new: out of memory");
        return NULL;
    }
    *w = (fc_ddp){.d = d,
                  .ctx = ctx,
                  .opt = opt,
                  .n = n,
                  .sync_on = true,
                  .no_overlap = o.no_overlap,
                  .zero1 = o.zero1 && d->size > 1};
    size_t cap = (size_t)(n > 0 ? n : 1);
    w->slots = fc__ctx_alloc(ctx, sizeof *w->slots * cap);
    w->order = fc__ctx_alloc(ctx, sizeof *w->order * cap);
    fc_tensor **ps = fc__ctx_alloc(ctx, sizeof *ps * cap);
    fc_status local =
        w->slots && w->order && ps ? FC_OK : fc__fail(ctx, FC_ERR_OOM, "fc_ddp_new: out of memory");
    if (w->slots) memset(w->slots, 0, sizeof *w->slots * cap);
    char b[160];
    for (int i = 0; local == FC_OK && i < n; i++) {
        ps[i] = fc_optim_param(opt, i);
        if (!fc__contiguous(&ps[i]->raw))
            local = fc__fail(ctx, FC_ERR_UNSUPPORTED_VIEW,
                             "fc_ddp_new: parameter %d (%s) is not contiguous", i,
                             fc__desc(ps[i], b, (int)sizeof b));
    }
    fc_status st = local;
    if (d->size > 1 && (w->slots && w->order && ps)) st = check_lists(w, ps, local);
    if (st == FC_OK && d->size > 1) st = fc_dist_broadcast(d, ps, n, 0);
    for (int i = 0; st == FC_OK && i < n; i++)
        w->slots[i] = (slot){.w = w,
                             .p = fc_retain(ps[i]),
                             .index = i,
                             .numel = fc__numel(&ps[i]->raw),
                             .hook_id = -1};
    if (st == FC_OK)
        st = build_buckets(w, o.bucket_bytes > 0 ? o.bucket_bytes : (int64_t)BUCKET_DEFAULT);
    if (st == FC_OK) assign_owners(w);
    for (int i = 0; st == FC_OK && i < n; i++)
        st = fc_grad_hook_add(w->slots[i].p, hook, &w->slots[i], &w->slots[i].hook_id);
    if (ps) fc__ctx_free(ctx, ps, sizeof *ps * cap);
    if (st != FC_OK) {
        fc_ddp_free(w);
        return NULL;
    }
    return w;
}

void fc_ddp_free(fc_ddp *w) {
    if (!w) return;
    const char *e = getenv("FUCINA_DDP_STATS");
    if (e && *e && *e != '0' && w->st.syncs > 0) {
        const fc_ddp_stats *s = &w->st;
        fprintf(stderr,
                "fc_ddp rank %d/%d: %lld syncs, %d buckets, %.1f MB/sync; started in backward "
                "%.0f%%, done before sync %.0f%%; per sync: backward(first hook->sync) %.2f ms, "
                "hooks %.2f ms, wait %.2f ms, sync %.2f ms\n",
                w->d->rank, w->d->size, (long long)s->syncs, w->nb,
                (double)s->bytes / (double)s->syncs / 1e6,
                s->buckets ? 100.0 * (double)s->started_early / (double)s->buckets : 0.0,
                s->buckets ? 100.0 * (double)s->done_early / (double)s->buckets : 0.0,
                1e3 * s->backward_s / (double)s->syncs, 1e3 * s->hook_s / (double)s->syncs,
                1e3 * s->wait_s / (double)s->syncs, 1e3 * s->sync_s / (double)s->syncs);
        if (w->zero1)
            fprintf(stderr,
                    "fc_ddp rank %d/%d: ZeRO-1: optimizer state for %lld of %lld elements\n",
                    w->d->rank, w->d->size, (long long)s->owned_elems, (long long)s->elems);
    }
    /* Freed in the middle of a step (an error path that skipped
     * fc_ddp_sync): the peers will wait for this rank's buckets, and those
     * in flight still belong to MPI, which may write into them until the
     * job ends: they are left, and fc_dist_free ends the job. */
    if (w->in_step)
        fc__dist_broken(w->d, FC_ERR_STATE,
                        "fc_ddp_free came in the middle of a step (a backward ran, fc_ddp_sync "
                        "did not): the other ranks' gradient reductions are left unmatched");
    size_t cap = (size_t)(w->n > 0 ? w->n : 1);
    for (int i = 0; w->slots && i < w->n; i++) {
        if (!w->slots[i].p) continue;
        if (w->slots[i].hook_id >= 0) fc_grad_hook_remove(w->slots[i].p, w->slots[i].hook_id);
        fc_release(w->slots[i].p);
    }
    for (int k = 0; w->b && k < w->nb; k++)
        if (w->b[k].red.phase != FC__RED_EXCHANGE && w->b[k].red.phase != FC__RED_GATHER)
            fc__dist_red_free(w->d, &w->b[k].red);
    if (w->b) fc__ctx_free(w->ctx, w->b, sizeof *w->b * cap);
    if (w->slots) fc__ctx_free(w->ctx, w->slots, sizeof *w->slots * cap);
    if (w->order) fc__ctx_free(w->ctx, w->order, sizeof *w->order * cap);
    fc__ctx_free(w->ctx, w, sizeof *w);
}

fc_status fc_ddp_step(fc_ddp *w) {
    if (!w) return FC_ERR_NULL_ARG;
    if (!w->zero1) return fc_optim_step(w->opt);
    fc_status ust = fc__dist_usable(w->d, "fc_ddp_step");
    if (ust != FC_OK) return ust;
    /* the others' parameters get no update here, so no state either */
    for (int i = 0; i < w->n; i++)
        if (w->slots[i].owner != w->d->rank) fc_zero_grad(&w->slots[i].p, 1);
    fc_status st = fc_optim_step(w->opt);
    /* every parameter from its owner, all started, then one wait; run even
     * after a failed step so the ranks' collectives stay matched */
    MPI_Request *reqs = fc__ctx_alloc(w->ctx, sizeof *reqs * (size_t)w->n);
    if (!reqs) /* the others' broadcasts will wait for this rank's */
        return fc__dist_broken(w->d, fc__fail(w->ctx, FC_ERR_OOM, "fc_ddp_step: out of memory"),
                               "fc_ddp_step ran out of memory before its broadcasts");
    fc_status cst = FC_OK;
    int started = 0;
    for (int i = 0; i < w->n && cst == FC_OK; i++) {
        slot *s = &w->slots[i];
        size_t nb = fc_tensor_nbytes(s->p);
        void *p = s->owner == w->d->rank ? (void *)fc_tensor_data(s->p) : fc_tensor_data_mut(s->p);
        if (nb > 0x7fffffff || !p) {
            cst = fc__fail(w->ctx, FC_ERR_OVERFLOW,
                           "fc_ddp_step: parameter %d (%zu bytes) cannot be sent in one message", i,
                           nb);
            break;
        }
        cst = fc__dist_check(w->d, MPI_Ibcast(p, (int)nb, MPI_BYTE, s->owner, w->d->comm, &reqs[i]),
                             "fc_ddp_step: MPI_Ibcast of a parameter from its owner");
        if (cst == FC_OK) started++;
    }
    if (cst == FC_OK)
        cst = fc__dist_wait(w->d, reqs, started, "fc_ddp_step (parameters)");
    else if (started > 0) /* the started ones are never waited for: the ranks no longer match */
        fc__dist_broken(w->d, cst, "fc_ddp_step left %d broadcasts in flight", started);
    fc__ctx_free(w->ctx, reqs, sizeof *reqs * (size_t)w->n);
    return st != FC_OK ? st : cst;
}

int fc_ddp_owner(const fc_ddp *w, int i) {
    if (!w || i < 0 || i >= w->n) return -1;
    return w->slots[i].owner;
}

int fc_ddp_bucket_count(const fc_ddp *w) { return w ? w->nb : 0; }

fc_status fc_ddp_bucket(const fc_ddp *w, int b, const int **first, int *count, int64_t *bytes) {
    if (!w || !first || !count) return FC_ERR_NULL_ARG;
    if (b < 0 || b >= w->nb)
        return fc__fail(w->ctx, FC_ERR_INDEX, "fc_ddp_bucket: bucket %d of %d", b, w->nb);
    *first = w->order + w->b[b].first;
    *count = w->b[b].count;
    if (bytes) *bytes = w->b[b].bytes;
    return FC_OK;
}

fc_status fc_ddp_get_stats(const fc_ddp *w, fc_ddp_stats *out) {
    if (!w || !out) return FC_ERR_NULL_ARG;
    *out = w->st;
    return FC_OK;
}
