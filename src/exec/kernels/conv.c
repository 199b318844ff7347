/* SPDX-License-Identifier: MIT */
/* exec/kernels/conv.c - convolution as im2col + GEMM (Darknet's recipe):
 *
 *     forward   y_b   = W . col(x_b)                  per group
 *     dgrad     x_b   = col2im(W^T . gy_b)            per group
 *     wgrad     W    += gy . col(x)^T                 per group, over the batch
 *
 * col(x) holds, for every (channel, kernel row, kernel column) of the image
 * side, the image values each output position reads: K = cx*kh*kw rows of
 * P = hy*wy values. The batch is cut into chunks of nb images (nb from the
 * shapes alone, so the column buffer stays within COL_BUDGET bytes where it
 * can, and the result bits never depend on the thread count), laid out as
 *     col[row][b][p]        row < K, b < nb, p < P
 * so one buffer serves all three products:
 *   - forward and dgrad are batched GEMMs over the chunk's images (image b's
 *     columns are at offset b*P with leading dimension nb*P);
 *   - wgrad is ONE GEMM per chunk and group whose reduction runs over the
 *     chunk's nb*P positions: the output gradient is first regrouped
 *     [b][c][p] -> [c][b][p] so both operands step uniformly along it.
 * Chunks follow one another in index order and each wgrad GEMM accumulates
 * into the weight gradient, so the sum order is fixed.
 *
 * The work is cut into items that the thread team shares (see "the team"
 * below). An item's GEMMs go through the context's matmul provider
 * (fc__backend_resolve) on one thread with that slice's primitive cache, or
 * the whole item is one call of the provider's direct convolutions
 * (backend/conv.h) where those are faster; its im2col, col2im, regrouping
 * and bias fills (conv_cols.c) run on the same thread. A 1x1 kernel with
 * stride 1 and no padding reads and writes the images directly (its column
 * matrix is the image itself) in forward and dgrad.
 *
 * Buffers (the column matrix, the regrouped gradient, contiguous f32 / f64
 * copies of the operands) are pool tensors released before returning, so a
 * repeated call allocates nothing once the pool holds their size classes. */
#include <stdatomic.h>
#include <stdio.h>

#include "exec/kernels/conv.h"
#include "exec/kernels/conv_cols.h"

#include "backend/backend.h"
#include "backend/conv.h"
#include "core/cpu.h"
#include "exec/kernels/copy.h"
#include "exec/parallel.h"

/* Bytes of column matrix per chunk: small images batch up into long GEMMs
 * (a 28x28 image with 25 rows is 78 KB), while a large one runs alone so
 * its columns stay in the caches between im2col and the product (a 32x32
 * image with 576 rows is 2.25 MB; measured on a 2-core AVX-512 Xeon with
 * 2 MB of L2 per core, one image per chunk took 4% less CPU time than
 * three and 15% less than sixteen). */
#define COL_BUDGET ((int64_t)4 << 20)
/* Items worth having: enough for a team of 16 threads to share evenly. */
#define TEAM_ITEMS 16

/* ---- sizes ------------------------------------------------------------------------------------
 */

static bool plan_make(fc_ctx *ctx, const char *op, const fc__conv_geom *g, fc_dtype dt,
                      fc__conv_plan *p) {
    *p = (fc__conv_plan){.g = g, .dt = dt, .es = fc_dtype_size(dt)};
    int64_t kk, col_image;
    if (__builtin_mul_overflow(g->hy, g->wy, &p->P) ||
        __builtin_mul_overflow(g->hx, g->wx, &p->X) || __builtin_mul_overflow(g->kh, g->kw, &kk) ||
        __builtin_mul_overflow(g->cx, kk, &p->K) ||
        __builtin_mul_overflow(p->K, p->P, &col_image) ||
        __builtin_mul_overflow(col_image, (int64_t)p->es, &col_image)) {
        fc__fail(ctx, FC_ERR_OVERFLOW, "%s: the column matrix of one image does not fit", op);
        return false;
    }
    p->cxg = g->cx / g->groups;
    p->cyg = g->cy / g->groups;
    p->Kg = p->cxg * kk;
    /* as many images as COL_BUDGET holds, but no more than leave
     * TEAM_ITEMS chunks for the team to share */
    p->nb = COL_BUDGET / col_image;
    int64_t spread = (g->n + TEAM_ITEMS - 1) / TEAM_ITEMS;
    if (p->nb > spread) p->nb = spread;
    if (p->nb < 1) p->nb = 1;
    p->identity = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 &&
                  g->pw == 0 && g->hx == g->hy && g->wx == g->wy;
    return true;
}

/* The dtype the products run in. */
static fc_dtype compute_dtype(const fc_tensor *a, const fc_tensor *b) {
    return a->raw.dtype == FC_F64 || b->raw.dtype == FC_F64 ? FC_F64 : FC_F32;
}

/* t contiguous in dt: t itself (retained) or a converted / compacted copy. */
static fc_tensor *operand(fc_ctx *ctx, const char *op, fc_tensor *t, fc_dtype dt) {
    if (t->raw.dtype == dt) return fc__copy_contiguous_ref(ctx, op, t);
    return fc__copy_cast(ctx, op, t, dt);
}

static fc_tensor *scratch(fc_ctx *ctx, const char *op, fc_dtype dt, int64_t n) {
    return fc__tensor_new(ctx, op, dt, &n, 1);
}

/* ---- the team ---------------------------------------------------------------------------------
 *
 * The work of a product is cut into items fixed by the shapes alone:
 *   forward, dgrad: (chunk of images, block of channels) pairs, the
 *     channels of the side being written (y's for forward, x's for dgrad);
 *   wgrad: (part, block of output channels) pairs, where a part is a fixed
 *     run of chunks whose weight gradients one item sums in chunk order
 *     into that part's partial sum (the direct kernels take the part's
 *     images in one call and sum them inside: 10% less time per image than
 *     a call per one-image chunk plus the adding, for the 3x3 64->64 layer
 *     of bench conv_train at AVX2, and no gain from parts above 2 images);
 *     the partials are added in part order at the end.
 * Channel blocks are used only when there are too few chunks to keep a
 * team busy (a batch of one, say). Each item runs its im2col, GEMMs (one
 * thread each) and col2im by itself, and items are handed to the team in
 * static slices, so no value depends on which thread computed it or on how
 * many there are: the result bits are the same at every thread count. A
 * slice owns one column buffer and one provider cache (its oneDNN
 * primitives and workspace: a cache serves one thread at a time), both set
 * up before the team starts; a slice that receives consecutive items of one
 * chunk fills its column buffer once. */

/* wgrad partial sums at most (each the size of the weight) and the bytes
 * they may take together. */
#define WGRAD_PARTS 8
#define WGRAD_PARTIAL_BUDGET ((int64_t)64 << 20)

typedef enum conv_kind { CONV_FORWARD, CONV_DGRAD, CONV_WGRAD } conv_kind;

typedef struct conv_team {
    fc_ctx *ctx;
    const char *op;
    const fc__conv_plan *p;
    conv_kind kind;
    const char *x, *w, *gy, *bias;         /* contiguous operands in the compute dtype */
    char *out;                             /* y, gx, or gw (written by items) */
    int64_t nchunks, parts, blocks, block; /* items = (nchunks or parts) x blocks */
    char *cols;                            /* one column buffer per slice */
    char *regrouped;                       /* wgrad: one [cy][nb][P] buffer per slice */
    char *partials; /* wgrad: parts x weight elements (NULL: one part, into out) */
    int64_t col_elems, rg_elems, w_elems;
    fc__backend_cache **caches; /* one per slice */
    bool direct;                /* the provider's direct convolutions (backend/conv.h) */
    atomic_int next_slice;
    atomic_int failed;
    fc_status rc;
    char err[FC__ERR_CAP - 64];
} conv_team;

static void team_fail(conv_team *t, fc_status rc, const char *msg) {
    if (atomic_exchange(&t->failed, 1) == 0) {
        t->rc = rc;
        snprintf(t->err, sizeof t->err, "%s", msg);
    }
}

/* g (dtype, sizes, operands) on one thread with the slice's cache. */
static bool team_gemm(conv_team *t, fc__backend_cache *cache, fc__gemm g) {
    const fc__matmul_provider *prov = NULL;
    char err[FC__ERR_CAP - 64];
    fc_status rc =
        fc__backend_resolve(t->ctx->backend, g.dtype, g.m, g.n, g.k, &prov, err, sizeof err);
    if (rc == FC_OK) {
        g.threads = 1;
        g.alloc = &t->ctx->alloc;
        g.cache = cache;
        rc = fc__gemm_run(prov, &g, err, sizeof err);
    }
    if (rc != FC_OK) team_fail(t, rc, err);
    return rc == FC_OK;
}

/* The images [*n0, *n0 + *nb) of chunk c. */
static void chunk_images(const fc__conv_plan *p, int64_t c, int64_t *n0, int64_t *nb) {
    *n0 = c * p->nb;
    *nb = p->g->n - *n0 < p->nb ? p->g->n - *n0 : p->nb;
}

/* The chunks [*c0, *c1) of wgrad part r. */
static void part_chunks(const conv_team *t, int64_t r, int64_t *c0, int64_t *c1) {
    *c0 = r * t->nchunks / t->parts;
    *c1 = (r + 1) * t->nchunks / t->parts;
}

/* The images [*n0, *n0 + *nb) of wgrad part r: those of its chunks. */
static void part_images(const conv_team *t, int64_t r, int64_t *n0, int64_t *nb) {
    int64_t c0, c1;
    part_chunks(t, r, &c0, &c1);
    int64_t end = c1 * t->p->nb < t->p->g->n ? c1 * t->p->nb : t->p->g->n;
    *n0 = c0 * t->p->nb;
    *nb = end - *n0;
}

/* Channel block b of a side with `channels` per group: [*lo, *hi) within
 * every group (blocks never straddle groups: a block is a range inside
 * each group, the same for all groups). */
static void block_range(const conv_team *t, int64_t b, int64_t channels, int64_t *lo, int64_t *hi) {
    *lo = b * t->block;
    *hi = *lo + t->block < channels ? *lo + t->block : channels;
}

/* The direct-convolution call for chunk c's images [n0, n0 + nb). */
static fc__conv_call direct_call(const conv_team *t, fc__conv_kind kind, int64_t n0, int64_t nb,
                                 fc__backend_cache *cache) {
    const fc__conv_plan *p = t->p;
    const fc__conv_geom *g = p->g;
    fc__conv_call c = {
        .kind = kind,
        .n = nb,
        .groups = g->groups,
        .cx = g->cx,
        .hx = g->hx,
        .wx = g->wx,
        .cy = g->cy,
        .hy = g->hy,
        .wy = g->wy,
        .kh = g->kh,
        .kw = g->kw,
        .sh = g->sh,
        .sw = g->sw,
        .ph = g->ph,
        .pw = g->pw,
        .dh = g->dh,
        .dw = g->dw,
        .cache = cache,
    };
    if (t->x) c.x = (const float *)t->x + n0 * g->cx * p->X;
    if (t->gy) c.gy = (const float *)t->gy + n0 * g->cy * p->P;
    c.w = (const float *)t->w;
    if (kind == FC__CONV_FORWARD) {
        c.bias = (const float *)t->bias;
        c.out = (float *)t->out + n0 * g->cy * p->P;
    } else if (kind == FC__CONV_DGRAD) {
        c.out = (float *)t->out + n0 * g->cx * p->X;
    }
    return c;
}

static bool direct_run(conv_team *t, const fc__conv_call *c) {
#ifdef FUCINA_HAVE_ONEDNN
    char err[FC__ERR_CAP - 64];
    fc_status rc = fc__conv_direct(c, err, sizeof err);
    if (rc != FC_OK) team_fail(t, rc, err);
    return rc == FC_OK;
#else /* never reached: direct_wanted says no without oneDNN */
    (void)c;
    team_fail(t, FC_ERR_BACKEND, "no direct convolutions in this build (no oneDNN)");
    return false;
#endif
}

/* Forward, chunk c, output channels [lo, hi) of every group. */
static bool forward_item(conv_team *t, fc__backend_cache *cache, char *col, int64_t c, int64_t lo,
                         int64_t hi, int64_t *col_chunk, bool w_unchanged) {
    const fc__conv_plan *p = t->p;
    const fc__conv_geom *g = p->g;
    size_t es = p->es;
    int64_t n0, nb;
    chunk_images(p, c, &n0, &nb);
    if (t->direct) {
        fc__conv_call dc = direct_call(t, FC__CONV_FORWARD, n0, nb, cache);
        dc.w_unchanged = w_unchanged;
        return direct_run(t, &dc);
    }
    if (!p->identity && *col_chunk != c) {
        fc__col_job j = {p, t->x, col, n0, nb};
        fc__im2col_range(&j, 0, p->K * nb);
        *col_chunk = c;
    }
    char *yc = t->out + (size_t)(n0 * g->cy * p->P) * es;
    for (int64_t gr = 0; gr < g->groups; gr++) {
        int64_t o0 = gr * p->cyg + lo, rows = hi - lo;
        if (t->bias) {
            for (int64_t b = 0; b < nb; b++) {
                fc__conv_fill_bias(t->bias + (size_t)o0 * es,
                                   yc + (size_t)((b * g->cy + o0) * p->P) * es, es, rows, rows,
                                   p->P, false);
            }
        }
        fc__gemm gm = {
            .dtype = p->dt,
            .m = rows,
            .n = p->P,
            .k = p->Kg,
            .a = t->w + (size_t)(o0 * p->Kg) * es,
            .lda = p->Kg,
            .c = yc + (size_t)(o0 * p->P) * es,
            .ldc = p->P,
            .accumulate = t->bias != NULL,
            .batch = nb,
            .stride_c = g->cy * p->P,
        };
        if (p->identity) {
            gm.b = t->x + (size_t)((n0 * g->cx + gr * p->cxg) * p->P) * es;
            gm.ldb = p->P, gm.stride_b = g->cx * p->P;
        } else {
            gm.b = col + (size_t)(gr * p->Kg * nb * p->P) * es;
            gm.ldb = nb * p->P, gm.stride_b = p->P;
        }
        if (nb == 1) gm.stride_b = gm.stride_c = 0;
        if (!team_gemm(t, cache, gm)) return false;
    }
    return true;
}

/* dgrad, chunk c, image-side channels [lo, hi) of every group. */
static bool dgrad_item(conv_team *t, fc__backend_cache *cache, char *col, int64_t c, int64_t lo,
                       int64_t hi, bool w_unchanged) {
    const fc__conv_plan *p = t->p;
    const fc__conv_geom *g = p->g;
    size_t es = p->es;
    int64_t n0, nb, kk = g->kh * g->kw;
    chunk_images(p, c, &n0, &nb);
    if (t->direct) {
        fc__conv_call dc = direct_call(t, FC__CONV_DGRAD, n0, nb, cache);
        dc.w_unchanged = w_unchanged;
        if (!direct_run(t, &dc)) return false;
        if (t->bias) {
            fc__conv_fill_bias(t->bias, t->out + (size_t)(n0 * g->cx * p->X) * es, es, g->cx,
                               nb * g->cx, p->X, true);
        }
        return true;
    }
    for (int64_t gr = 0; gr < g->groups; gr++) {
        /* col rows of channels [lo, hi) of group gr (Kg-row block of the group) =
         * W_g[:, rows]^T . gy_b,g */
        int64_t r0 = lo * kk, rows = (hi - lo) * kk;
        fc__gemm gm = {
            .dtype = p->dt,
            .m = rows,
            .n = p->P,
            .k = p->cyg,
            .a = t->w + (size_t)(gr * p->cyg * p->Kg + r0) * es,
            .lda = p->Kg,
            .trans_a = true,
            .b = t->gy + (size_t)((n0 * g->cy + gr * p->cyg) * p->P) * es,
            .ldb = p->P,
            .batch = nb,
            .stride_b = g->cy * p->P,
        };
        if (p->identity) {
            gm.c = t->out + (size_t)((n0 * g->cx + gr * p->cxg + lo) * p->P) * es;
            gm.ldc = p->P, gm.stride_c = g->cx * p->P;
        } else {
            gm.c = col + (size_t)((gr * p->Kg + r0) * nb * p->P) * es;
            gm.ldc = nb * p->P, gm.stride_c = p->P;
        }
        if (nb == 1) gm.stride_b = gm.stride_c = 0;
        if (!team_gemm(t, cache, gm)) return false;
        int64_t ch0 = gr * p->cxg + lo;
        if (!p->identity) {
            fc__col_job j = {p, t->out, col, n0, nb};
            for (int64_t b = 0; b < nb; b++)
                for (int64_t ch = ch0; ch < gr * p->cxg + hi; ch++)
                    fc__col2im_range(&j, b * g->cx + ch, b * g->cx + ch + 1);
        }
        if (t->bias) {
            for (int64_t b = 0; b < nb; b++) {
                fc__conv_fill_bias(t->bias + (size_t)ch0 * es,
                                   t->out + (size_t)(((n0 + b) * g->cx + ch0) * p->X) * es, es,
                                   hi - lo, hi - lo, p->X, true);
            }
        }
    }
    return true;
}

/* wgrad, part r (its chunks in order), output channels [lo, hi) of every
 * group, into the part's partial sum (or the result for a single part). */
static bool wgrad_item(conv_team *t, fc__backend_cache *cache, char *col, char *rg, int64_t r,
                       int64_t lo, int64_t hi, int64_t *col_chunk) {
    const fc__conv_plan *p = t->p;
    const fc__conv_geom *g = p->g;
    size_t es = p->es;
    char *dst = t->partials ? t->partials + (size_t)(r * t->w_elems) * es : t->out;
    if (t->direct) { /* the part's images in one call: the kernel sums over them */
        int64_t n0, nb;
        part_images(t, r, &n0, &nb);
        fc__conv_call dc = direct_call(t, FC__CONV_WGRAD, n0, nb, cache);
        dc.out = (float *)dst;
        return direct_run(t, &dc);
    }
    int64_t c0, c1;
    part_chunks(t, r, &c0, &c1);
    for (int64_t c = c0; c < c1; c++) {
        int64_t n0, nb;
        chunk_images(p, c, &n0, &nb);
        const char *gyc = t->gy + (size_t)(n0 * g->cy * p->P) * es;
        if (*col_chunk != c) {
            fc__col_job j = {p, t->x, col, n0, nb};
            fc__im2col_range(&j, 0, p->K * nb);
            if (nb > 1) {
                fc__conv_regroup(gyc, rg, es, g->cy, nb, p->P);
            }
            *col_chunk = c;
        }
        const char *a = nb > 1 ? rg : gyc; /* [cy][nb*P] */
        for (int64_t gr = 0; gr < g->groups; gr++) {
            int64_t o0 = gr * p->cyg + lo;
            /* gW rows [o0, o0 + hi - lo) += gy rows . col_g^T (nb*P x Kg) */
            fc__gemm gm = {
                .dtype = p->dt,
                .m = hi - lo,
                .n = p->Kg,
                .k = nb * p->P,
                .a = a + (size_t)(o0 * nb * p->P) * es,
                .lda = nb * p->P,
                .b = col + (size_t)(gr * p->Kg * nb * p->P) * es,
                .ldb = nb * p->P,
                .trans_b = true,
                .c = dst + (size_t)(o0 * p->Kg) * es,
                .ldc = p->Kg,
                .accumulate = c > c0,
                .batch = 1,
            };
            if (!team_gemm(t, cache, gm)) return false;
        }
    }
    return true;
}

/* One slice of items, run by one thread with its own buffers. The weights
 * do not change during a product, so after a slice's first item a direct
 * call may reuse the blocked weights its previous call left. */
static void team_range(void *arg, int64_t begin, int64_t end) {
    conv_team *t = arg;
    int slice = atomic_fetch_add(&t->next_slice, 1);
    const fc__conv_plan *p = t->p;
    char *col = t->cols ? t->cols + (size_t)(slice * t->col_elems) * p->es : NULL;
    char *rg = t->regrouped ? t->regrouped + (size_t)(slice * t->rg_elems) * p->es : NULL;
    fc__backend_cache *cache = t->caches[slice];
    int64_t col_chunk = -1; /* the chunk whose columns col holds */
    for (int64_t it = begin; it < end && !atomic_load(&t->failed); it++) {
        int64_t major = it / t->blocks, lo, hi;
        bool ok;
        switch (t->kind) {
        case CONV_FORWARD:
            block_range(t, it % t->blocks, p->cyg, &lo, &hi);
            ok = forward_item(t, cache, col, major, lo, hi, &col_chunk, it > begin);
            break;
        case CONV_DGRAD:
            block_range(t, it % t->blocks, p->cxg, &lo, &hi);
            ok = dgrad_item(t, cache, col, major, lo, hi, it > begin);
            break;
        default:
            block_range(t, it % t->blocks, p->cyg, &lo, &hi);
            ok = wgrad_item(t, cache, col, rg, major, lo, hi, &col_chunk);
            break;
        }
        if (!ok) break;
    }
}

/* The slices the team will run for `items` items: what fc__parallel_for
 * makes of them with a grain of one. */
static int team_slices(const fc_ctx *ctx, int64_t items) {
    int64_t nt = ctx->threads > 0 ? ctx->threads : 1;
    return (int)(nt < items ? nt : items);
}

/* The per-slice provider caches, grown on first need and kept in the
 * context (they hold oneDNN primitives worth keeping). */
static fc__backend_cache **team_caches(fc_ctx *ctx, const char *op, int slices) {
    if (ctx->team_cache_count < slices) {
        size_t old = (size_t)ctx->team_cache_count * sizeof *ctx->team_caches;
        fc__backend_cache **grown =
            fc__alloc(&ctx->alloc, (size_t)slices * sizeof *grown, _Alignof(fc__backend_cache *));
        if (!grown) {
            fc__fail(ctx, FC_ERR_OOM, "%s: out of memory for %d thread caches", op, slices);
            return NULL;
        }
        for (int i = 0; i < slices; i++)
            grown[i] = i < ctx->team_cache_count ? ctx->team_caches[i] : NULL;
        fc__free(&ctx->alloc, ctx->team_caches, old);
        ctx->team_caches = grown;
        ctx->team_cache_count = slices;
    }
    for (int i = 0; i < slices; i++) {
        if (!ctx->team_caches[i] && !(ctx->team_caches[i] = fc__backend_cache_new(&ctx->alloc))) {
            fc__fail(ctx, FC_ERR_OOM, "%s: out of memory for a thread's matmul cache", op);
            return NULL;
        }
    }
    return ctx->team_caches;
}

/* Channel blocks for a side of `channels` per group when `majors` items
 * would be too few: blocks of at least 8 channels, fixed by the shapes. */
static int64_t team_block(int64_t majors, int64_t channels) {
    if (majors >= TEAM_ITEMS / 2) return channels;
    int64_t want = (TEAM_ITEMS + majors - 1) / majors;
    int64_t block = (channels + want - 1) / want;
    return block < 8 ? (channels < 8 ? channels : 8) : block;
}

/* Whether t runs on the provider's direct convolutions: f32, the context
 * asking for oneDNN or leaving the choice to the library, enough chunks to
 * keep a team busy without channel blocks (the direct calls take whole
 * images), and a JIT kernel for the chunk's geometry and the tail chunk's.
 * Shapes and CPU decide, never the thread count. Measured on a 2-core
 * AVX-512 Xeon: see backend/onednn_conv.c. */
static bool direct_wanted(conv_team *t, fc__backend_cache *cache) {
#ifdef FUCINA_HAVE_ONEDNN
    const fc__conv_plan *p = t->p;
    fc_backend want = fc__backend_requested(t->ctx->backend);
    if (p->dt != FC_F32 || (want != FC_BACKEND_AUTO && want != FC_BACKEND_ONEDNN)) return false;
    if (t->nchunks < TEAM_ITEMS / 2) return false;
    fc__conv_kind kind = t->kind == CONV_FORWARD ? FC__CONV_FORWARD
                         : t->kind == CONV_DGRAD ? FC__CONV_DGRAD
                                                 : FC__CONV_WGRAD;
    fc__conv_call c = direct_call(t, kind, 0, p->nb, cache);
    if (kind == FC__CONV_WGRAD) { /* one call per part: every part's size */
        for (int64_t r = 0; r < t->parts; r++) {
            int64_t n0, nb;
            part_images(t, r, &n0, &nb);
            c.n = nb;
            if (!fc__conv_direct_takes(&c)) return false;
        }
        return true;
    }
    int64_t tail = p->g->n - (t->nchunks - 1) * p->nb;
    if (!fc__conv_direct_takes(&c)) return false;
    c.n = tail;
    return tail == p->nb || fc__conv_direct_takes(&c);
#else
    (void)t, (void)cache;
    return false;
#endif
}

/* Runs t (kind, operands and out set) over the team; false with the error
 * recorded when an allocation or a product failed. */
static bool team_run(conv_team *t) {
    fc_ctx *ctx = t->ctx;
    const fc__conv_plan *p = t->p;
    const fc__conv_geom *g = p->g;
    fc_tensor *cols = NULL, *rg = NULL, *partials = NULL;
    bool ok = false;
    t->nchunks = (g->n + p->nb - 1) / p->nb;
    int64_t majors = t->nchunks, channels = t->kind == CONV_DGRAD ? p->cxg : p->cyg;
    if (t->kind == CONV_WGRAD) {
        t->w_elems = g->cy * p->Kg;
        int64_t by_budget = WGRAD_PARTIAL_BUDGET / (t->w_elems * (int64_t)p->es);
        t->parts = t->nchunks < WGRAD_PARTS ? t->nchunks : WGRAD_PARTS;
        if (t->parts > by_budget) t->parts = by_budget > 1 ? by_budget : 1;
        majors = t->parts;
    }
    if (!(t->caches = team_caches(ctx, t->op, 1))) goto done;
    t->direct = direct_wanted(t, t->caches[0]);
    t->block = t->direct ? channels : team_block(majors, channels);
    t->blocks = (channels + t->block - 1) / t->block;
    int64_t items = majors * t->blocks;
    int slices = team_slices(ctx, items);
    bool needs_cols = !t->direct && (!p->identity || t->kind == CONV_WGRAD);
    t->col_elems = p->K * p->nb * p->P;
    t->rg_elems = g->cy * p->nb * p->P;
    if (needs_cols && !(cols = scratch(ctx, t->op, p->dt, slices * t->col_elems))) goto done;
    if (t->kind == CONV_WGRAD && p->nb > 1 && !t->direct &&
        !(rg = scratch(ctx, t->op, p->dt, slices * t->rg_elems)))
        goto done;
    if (t->kind == CONV_WGRAD && t->parts > 1 &&
        !(partials = scratch(ctx, t->op, p->dt, t->parts * t->w_elems)))
        goto done;
    if (!(t->caches = team_caches(ctx, t->op, slices))) goto done;
    t->cols = cols ? fc__raw_base(&cols->raw) : NULL;
    t->regrouped = rg ? fc__raw_base(&rg->raw) : NULL;
    t->partials = partials ? fc__raw_base(&partials->raw) : NULL;
    atomic_init(&t->next_slice, 0);
    atomic_init(&t->failed, 0);
    fc__parallel_for(ctx, items, 1, team_range, t);
    if (atomic_load(&t->failed)) {
        fc__fail(ctx, t->rc, "%s: %s", t->op, t->err);
        goto done;
    }
    if (t->partials) { /* out = partial 0 + partial 1 + ... in part order */
        fc__conv_sum_parts(ctx, p, t->partials, t->parts, t->w_elems, t->out);
    }
    if (t->direct) ctx->conv_direct_products++;
    ok = true;
done:
    fc_release(partials);
    fc_release(rg);
    fc_release(cols);
    return ok;
}

/* ---- the three products ------------------------------------------------------------------------
 */

static fc_tensor *new4(fc_ctx *ctx, const char *op, fc_dtype dt, int64_t a, int64_t b, int64_t c,
                       int64_t d) {
    return fc__tensor_new(ctx, op, dt, (const int64_t[]){a, b, c, d}, 4);
}

/* The shared body: operands made contiguous in the compute dtype, the
 * result allocated, the team run. a and b are the kind's two operands
 * (forward: x, w; dgrad: gy, w; wgrad: x, gy). */
static fc_tensor *conv_product(fc_ctx *ctx, const char *op, const fc__conv_geom *g, conv_kind kind,
                               fc_tensor *a, fc_tensor *b, fc_tensor *bias) {
    fc__conv_plan p;
    fc_dtype dt = compute_dtype(a, b);
    if (!plan_make(ctx, op, g, dt, &p)) return NULL;
    fc_tensor *ac = operand(ctx, op, a, dt), *bc = ac ? operand(ctx, op, b, dt) : NULL;
    fc_tensor *biasc = bc && bias ? operand(ctx, op, bias, dt) : NULL;
    fc_tensor *out = NULL;
    if (!bc || (bias && !biasc)) goto done;
    if (kind == CONV_FORWARD)
        out = new4(ctx, op, dt, g->n, g->cy, g->hy, g->wy);
    else if (kind == CONV_DGRAD)
        out = new4(ctx, op, dt, g->n, g->cx, g->hx, g->wx);
    else
        out = new4(ctx, op, dt, g->cy, p.cxg, g->kh, g->kw);
    if (!out) goto done;
    conv_team t = {.ctx = ctx,
                   .op = op,
                   .p = &p,
                   .kind = kind,
                   .out = fc__raw_base(&out->raw),
                   .bias = biasc ? fc__raw_base(&biasc->raw) : NULL};
    const char *ad = fc__raw_base(&ac->raw), *bd = fc__raw_base(&bc->raw);
    if (kind == CONV_FORWARD)
        t.x = ad, t.w = bd;
    else if (kind == CONV_DGRAD)
        t.gy = ad, t.w = bd;
    else
        t.x = ad, t.gy = bd;
    if (!team_run(&t)) {
        fc_release(out);
        out = NULL;
    }
done:
    fc_release(biasc);
    fc_release(bc);
    fc_release(ac);
    return out;
}

fc_tensor *fc__conv_forward(fc_ctx *ctx, const char *op, const fc__conv_geom *g, fc_tensor *x,
                            fc_tensor *w, fc_tensor *bias) {
    return conv_product(ctx, op, g, CONV_FORWARD, x, w, bias);
}

fc_tensor *fc__conv_dgrad(fc_ctx *ctx, const char *op, const fc__conv_geom *g, fc_tensor *gy,
                          fc_tensor *w, fc_tensor *bias) {
    return conv_product(ctx, op, g, CONV_DGRAD, gy, w, bias);
}

fc_tensor *fc__conv_wgrad(fc_ctx *ctx, const char *op, const fc__conv_geom *g, fc_tensor *x,
                          fc_tensor *gy) {
    return conv_product(ctx, op, g, CONV_WGRAD, x, gy, NULL);
}
