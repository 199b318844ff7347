/* SPDX-License-Identifier: MIT */
/* qmatmul.c - fc__qgemm_run: argument checks, ISA choice, activation
 * packing and the split of the work over threads (see qmatmul.h).
 *
 * Work split. Each thread owns a set of weight rows and computes every
 * output column of them, so no two threads write the same y element and the
 * summation order of each element does not depend on the thread count. With
 * few activation rows (the private-packing case below, matrix-vector
 * products) the rows go in chunks of CHUNK_ROWS that threads take as they
 * come free, so a core that a neighbour slows (or a slower core of a hybrid
 * CPU) does not hold the others up; otherwise each thread owns a contiguous
 * range, fixed in advance.
 *
 * Blocking. From TWO_ROW_MIN_M activation rows on, a thread walks blocks of
 * its weight rows that stay in L2, and each block meets panels of 4 to 16
 * activation rows (as many as fit in L1) a slice of 2048 values at
 * a time, so a panel's slice stays in L1 while every row of the block meets
 * it; inside a panel the kernels take tiles of as many activation rows as
 * the ISA's kernel of the kind takes (4, or 8 for AVX-512's q4_0 and q8_0),
 * so a decoded weight block serves that many rows of x, and, where
 * they have a two-row form, two weight rows per pass, halving the loads of
 * the tile (both forms give the same bits). Streaming a 16-row panel of
 * 4096 values from L2 for every weight row, as before, ran at about 0.6 to
 * 0.75 of this on Zen 5. With fewer activation rows they sit in L1 whole
 * and each weight row goes through one kernel call over all k.
 *
 * The packed activations are the only allocation (one buffer, m rows); the
 * generic path (dtypes without their own kernel) reads x in place and
 * dequantizes its weight row GENERIC_CHUNK values at a time into a stack
 * buffer. */
#include "backend/qmatmul.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/qdot.h"
#include "core/buffer.h"
#include "fucina/quant.h"

#ifdef FUCINA_HAVE_OPENMP
#include <omp.h>
#endif

/* Values of one weight row dequantized per step on the generic path: a
 * multiple of every block size (32, 64, 128, 256), 4 KiB of stack. */
#define GENERIC_CHUNK 1024
/* From this many activation rows on, kernels take two weight rows a pass. */
#define TWO_ROW_MIN_M 4
/* Up to this many activation rows, each thread packs all of them itself. */
#define PRIVATE_PACK_ROWS 16
/* Weight rows per chunk when threads take chunks as they come free (even,
 * so two-row kernels keep their pairs). */
#define CHUNK_ROWS 32
/* Weight rows that meet every panel of activations before the next rows
 * come: as many as fit in L2_BLOCK_BYTES, so they stay in L2 while the
 * panels stream by; when a dot takes several slices, at most ROW_BLOCK_MAX
 * (their partial sums wait in a stack array). */
#define L2_BLOCK_BYTES (256 * 1024)
#define ROW_BLOCK_MAX 128
/* The most activation rows per panel, and the bytes of packed activations a
 * panel's slice may take: short rows go 16 to a panel, so a decoded weight
 * tile meets more of them while it sits in L1. */
#define PANEL_MAX 16
#define L1_PANEL_BYTES 32768
/* Values per slice of the dot products: 2048 whatever the ISA, so a
 * product's slices, and so its bits, are the same at every ISA level (the
 * kernels give the portable bits for each slice; qdot.h). A multiple of
 * every packed record (64, 128 and 256 values), and short enough that a
 * tile's packed rows of one slice (2 bytes a value for q4_0 and q8_0, 1.25
 * for q4_k and q6_k; tiles of up to FC__QDOT_MAX_ROWS = 8 rows) fit in a
 * 48 KiB L1 beside two weight rows. Each slice costs a kernel call and a
 * horizontal sum per output, so they are no shorter than that. The slices
 * of a dot are summed in order, one after the other, however the rows are
 * split over threads. (So with k longer than a slice a row of x times W may
 * differ in its last bits between a product of fewer than TWO_ROW_MIN_M
 * rows, which does not slice, and a larger one.) */
#define SLICE_VALUES 2048

bool fc__qmatmul_supported(fc_dtype wdt) { return fc_dtype_supports_quantized_matmul_rhs(wdt); }

/* ---- ISA ------------------------------------------------------------------------------ */

bool fc__qmatmul_isa_runs(fc__isa isa) {
    switch (isa) {
    case FC__ISA_PORTABLE:
        return true;
#ifdef FC__QDOT_X86
    case FC__ISA_AVX2:
        return fc__isa_enabled(FC__ISA_AVX2);
    case FC__ISA_AVX512: /* the dots use vpdpbusd */
        return fc__isa_enabled(FC__ISA_AVX512) && fc__cpu()->avx512vnni;
#endif
    default:
        return false;
    }
}

fc__isa fc__qmatmul_isa(void) {
    for (int i = FC__ISA_COUNT - 1; i > FC__ISA_PORTABLE; i--) {
        if (fc__qmatmul_isa_runs((fc__isa)i)) return (fc__isa)i;
    }
    return FC__ISA_PORTABLE;
}

static const fc__qdot_kernels *kernels_of(fc__isa isa) {
    switch (isa) {
#ifdef FC__QDOT_X86
    case FC__ISA_AVX2: /* AVX-VNNI is an extra, not a level: taken where the CPU has it */
        return fc__cpu()->avxvnni ? &fc__qdot_avxvnni : &fc__qdot_avx2;
    case FC__ISA_AVX512:
        return &fc__qdot_avx512;
#endif
    default:
        return &fc__qdot_portable;
    }
}

/* ---- validation --------------------------------------------------------------------- */

static fc_status fail(char *err, size_t cap, fc_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static fc_status fail(char *err, size_t cap, fc_status st, const char *fmt, ...) {
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* Checks g and fills the row bytes of W and of one packed activation row. */
static fc_status validate(const fc__qgemm *g, size_t *w_row, size_t *xq_row, char *err,
                          size_t cap) {
    if (!g) return fail(err, cap, FC_ERR_NULL_ARG, "qmatmul: NULL arguments");
    if (!g->w || !g->x || !g->y)
        return fail(err, cap, FC_ERR_NULL_ARG, "qmatmul: NULL %s",
                    !g->w   ? "weights"
                    : !g->x ? "x"
                            : "y");
    if (!fc__qmatmul_supported(g->wdt))
        return fail(err, cap, FC_ERR_DTYPE,
                    "qmatmul: weight dtype %s (%d) is not a quantized matmul dtype (every block "
                    "dtype but q8_1 and q8_k)",
                    fc_dtype_name(g->wdt), (int)g->wdt);
    const int64_t be = fc_dtype_block_elems(g->wdt);
    if (g->m < 1 || g->n < 1 || g->k < 1 || g->k % be != 0)
        return fail(err, cap, FC_ERR_INVALID_SHAPE,
                    "qmatmul: m=%lld n=%lld k=%lld must be >= 1 with k a multiple of %s's block "
                    "size %lld",
                    (long long)g->m, (long long)g->n, (long long)g->k, fc_dtype_name(g->wdt),
                    (long long)be);
    *w_row = fc_quant_row_bytes(g->wdt, g->k);
    if (*w_row == 0)
        return fail(err, cap, FC_ERR_OVERFLOW, "qmatmul: a %s row of k=%lld does not fit in memory",
                    fc_dtype_name(g->wdt), (long long)g->k);
    if (g->ldx < g->k || g->ldy < g->n || (g->ldw != 0 && g->ldw < *w_row))
        return fail(err, cap, FC_ERR_INVALID_ARG,
                    "qmatmul: leading dimensions ldx=%lld (k=%lld), ldy=%lld (n=%lld), ldw=%zu "
                    "(row bytes %zu) are too small",
                    (long long)g->ldx, (long long)g->k, (long long)g->ldy, (long long)g->n, g->ldw,
                    *w_row);
    if (g->threads < 1)
        return fail(err, cap, FC_ERR_INVALID_ARG, "qmatmul: threads=%d must be >= 1", g->threads);
    if (g->pin_isa && (unsigned)g->isa >= FC__ISA_COUNT)
        return fail(err, cap, FC_ERR_INVALID_ARG, "qmatmul: isa %d out of range", (int)g->isa);
    if (g->pin_isa && !fc__qmatmul_isa_runs(g->isa))
        return fail(err, cap, FC_ERR_BACKEND,
                    "qmatmul: this CPU or build cannot run the %s kernels (best here: %s)",
                    fc__isa_name(g->isa), fc__isa_name(fc__qmatmul_isa()));
    /* Every byte any pointer below reaches must be addressable. */
    const size_t ldw = g->ldw ? g->ldw : *w_row;
    const uint64_t n = (uint64_t)g->n, m = (uint64_t)g->m;
    *xq_row = fc__qpack_row_bytes(fc__qkind_of(g->wdt), g->k);
    if ((uint64_t)(n - 1) > (SIZE_MAX - *w_row) / ldw ||
        (uint64_t)g->ldx > SIZE_MAX / sizeof(float) / m ||
        (uint64_t)g->ldy > SIZE_MAX / sizeof(float) / m || (*xq_row && m > SIZE_MAX / *xq_row))
        return fail(err, cap, FC_ERR_OVERFLOW,
                    "qmatmul: m=%lld n=%lld k=%lld with ldx=%lld ldy=%lld overflow size_t",
                    (long long)g->m, (long long)g->n, (long long)g->k, (long long)g->ldx,
                    (long long)g->ldy);
    return FC_OK;
}

/* ---- the work of one thread --------------------------------------------------------- */

typedef struct job {
    const fc__qgemm *g;
    const fc__qdot_kernels *kern;
    fc__qkind kind;
    size_t w_row; /* bytes between weight rows */
    uint8_t *xq;  /* m packed rows (fast kinds), or one such set per thread */
    size_t xq_row;
    int64_t slice;     /* values per slice: SLICE_VALUES */
    size_t w_slice;    /* bytes of a slice of a weight row */
    size_t xq_slice;   /* bytes of a slice of a packed row */
    int tile;          /* activation rows per kernel call: the table's rows[kind] */
    int64_t panel;     /* activation rows per panel: a multiple of tile */
    int64_t row_block; /* weight rows per block: even; <= ROW_BLOCK_MAX with slices */
    bool private_xq;   /* each thread packs every row into its own set */
} job;

static void pack_rows(const job *jb, uint8_t *xq, int64_t i0, int64_t i1) {
    const fc__qgemm *g = jb->g;
    for (int64_t i = i0; i < i1; i++)
        fc__qpack_row(jb->kern, jb->kind, g->x + i * g->ldx, g->k, xq + (size_t)i * jb->xq_row);
}

/* y[i .. i + nx, j] = v (+ bias). */
static void store(const fc__qgemm *g, int64_t i, int64_t j, int nx, const float *v) {
    const float b = g->bias ? g->bias[j] : 0.0f;
    for (int r = 0; r < nx; r++)
        g->y[(i + r) * g->ldy + j] = v[r] + b;
}

/* Weight rows [j0, j1) against activation rows [p0, p1) (at most PANEL_MAX)
 * over values [c0, c0 + len): y gets the result when that is all of k;
 * otherwise acc[j - j0][i - p0] gets the partial dot (c0 == 0) or has it
 * added. */
static void slice_fast(const job *jb, const uint8_t *xq, int64_t j0, int64_t j1, int64_t p0,
                       int64_t p1, int64_t c0, int64_t len, float (*acc)[PANEL_MAX]) {
    const fc__qgemm *g = jb->g;
    const fc__qdot_fn dot = jb->kern->dot[jb->kind];
    const fc__qdot2_fn dot2 = jb->kern->dot2[jb->kind];
    /* c0 is a multiple of the slice, so both offsets land on a whole block
     * and a whole packed record */
    const int64_t s = c0 / jb->slice;
    const size_t x_off = (size_t)s * jb->xq_slice;
    const uint8_t *w = (const uint8_t *)g->w + (size_t)s * jb->w_slice;
    for (int64_t j = j0; j < j1;) {
        const uint8_t *wr = w + (size_t)j * jb->w_row;
        const bool two = dot2 && j + 1 < j1;
        for (int64_t i = p0; i < p1; i += jb->tile) {
            const int nx = (int)(p1 - i < jb->tile ? p1 - i : jb->tile);
            const uint8_t *xi = xq + (size_t)i * jb->xq_row + x_off;
            float v[2][FC__QDOT_MAX_ROWS];
            if (two)
                dot2(len, wr, wr + jb->w_row, xi, jb->xq_row, nx, v[0], v[1]);
            else
                dot(len, wr, xi, jb->xq_row, nx, v[0]);
            for (int q = 0; q < (two ? 2 : 1); q++) {
                if (len == g->k) { /* the only slice */
                    store(g, i, j + q, nx, v[q]);
                    continue;
                }
                float *a = acc[j + q - j0] + (i - p0);
                for (int r = 0; r < nx; r++)
                    a[r] = c0 == 0 ? v[q][r] : a[r] + v[q][r];
            }
        }
        j += two ? 2 : 1;
    }
}

/* Weight rows [j0, j1). With TWO_ROW_MIN_M activation rows or more, in
 * blocks of jb->row_block weight rows that stay in L2 while every panel of
 * jb->panel activation rows meets them a slice of jb->slice values at a
 * time (the panel's slice stays in L1). The partial sums of the slices wait
 * in acc; a single slice goes straight to y. */
static void rows_fast(const job *jb, const uint8_t *xq, int64_t j0, int64_t j1) {
    const fc__qgemm *g = jb->g;
    if (g->m < TWO_ROW_MIN_M) {
        /* the rows of x sit in L1 whole; a matrix-vector product spends a
         * few hundred cycles a row, and slices would add a call and a
         * horizontal sum to each */
        const fc__qdot_fn dot = jb->kern->dot[jb->kind];
        for (int64_t j = j0; j < j1; j++) {
            float v[FC__QDOT_MAX_ROWS];
            dot(g->k, (const uint8_t *)g->w + (size_t)j * jb->w_row, xq, jb->xq_row, (int)g->m, v);
            store(g, 0, j, (int)g->m, v);
        }
        return;
    }
    float acc[ROW_BLOCK_MAX][PANEL_MAX];
    for (int64_t b0 = j0; b0 < j1; b0 += jb->row_block) {
        const int64_t b1 = b0 + jb->row_block < j1 ? b0 + jb->row_block : j1;
        for (int64_t p0 = 0; p0 < g->m; p0 += jb->panel) {
            const int64_t p1 = p0 + jb->panel < g->m ? p0 + jb->panel : g->m;
            for (int64_t c0 = 0; c0 < g->k; c0 += jb->slice) {
                const int64_t len = g->k - c0 < jb->slice ? g->k - c0 : jb->slice;
                slice_fast(jb, xq, b0, b1, p0, p1, c0, len, acc);
            }
            for (int64_t j = b0; j < b1 && g->k > jb->slice; j++) {
                const float b = g->bias ? g->bias[j] : 0.0f;
                for (int64_t i = p0; i < p1; i++)
                    g->y[i * g->ldy + j] = acc[j - b0][i - p0] + b;
            }
        }
    }
}

static void rows_generic(const job *jb, int64_t j0, int64_t j1) {
    const fc__qgemm *g = jb->g;
    const int64_t be = fc_dtype_block_elems(g->wdt);
    const size_t bbytes = fc_dtype_size(g->wdt);
    const uint8_t *w = g->w;
    float buf[GENERIC_CHUNK];
    for (int64_t j = j0; j < j1; j++) {
        const uint8_t *wr = w + (size_t)j * jb->w_row;
        for (int64_t c0 = 0; c0 < g->k; c0 += GENERIC_CHUNK) {
            const int64_t len = g->k - c0 < GENERIC_CHUNK ? g->k - c0 : GENERIC_CHUNK;
            /* Arguments were validated: this cannot fail. */
            (void)fc_dequantize(g->wdt, wr + (size_t)(c0 / be) * bbytes, buf, 1, len);
            for (int64_t i = 0; i < g->m; i += FC__QDOT_F32_ROWS) {
                const int nx = (int)(g->m - i < FC__QDOT_F32_ROWS ? g->m - i : FC__QDOT_F32_ROWS);
                float v[FC__QDOT_F32_ROWS];
                jb->kern->dot_f32(len, buf, g->x + i * g->ldx + c0, g->ldx, nx, v);
                if (c0 == 0) {
                    store(g, i, j, nx, v);
                } else {
                    for (int r = 0; r < nx; r++)
                        g->y[(i + r) * g->ldy + j] += v[r];
                }
            }
        }
    }
}

/* Every weight row, in chunks of CHUNK_ROWS that the threads of the
 * enclosing parallel region take as they come free (run alone, one thread
 * takes them all). */
static void rows_chunked(const job *jb, const uint8_t *xq) {
    const int64_t n = jb->g->n, nc = (n + CHUNK_ROWS - 1) / CHUNK_ROWS;
#ifdef FUCINA_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1) nowait
#endif
    for (int64_t c = 0; c < nc; c++) {
        const int64_t j1 = (c + 1) * CHUNK_ROWS;
        rows_fast(jb, xq, c * CHUNK_ROWS, j1 < n ? j1 : n);
    }
}

/* The start of part t of n split into nt nearly equal parts (no overflow
 * for any n). */
static int64_t split(int64_t n, int t, int nt) {
    const int64_t q = n / nt, r = n % nt;
    return q * t + (t < r ? t : r);
}

/* Thread t of nt: pack the activation rows (every row into its own set, or
 * its share of the shared set and wait for the others), then compute its
 * weight rows. */
static void run_thread(const job *jb, int t, int nt) {
    const fc__qgemm *g = jb->g;
    const int64_t j0 = split(g->n, t, nt), j1 = split(g->n, t + 1, nt);
    if (jb->kind == FC__QK_GENERIC) {
        rows_generic(jb, j0, j1);
        return;
    }
    if (jb->private_xq) {
        uint8_t *xq = jb->xq + (size_t)t * (size_t)g->m * jb->xq_row;
        pack_rows(jb, xq, 0, g->m);
        rows_chunked(jb, xq);
        return;
    }
    pack_rows(jb, jb->xq, split(g->m, t, nt), split(g->m, t + 1, nt));
#ifdef FUCINA_HAVE_OPENMP
    if (nt > 1) {
#pragma omp barrier
    }
#endif
    rows_fast(jb, jb->xq, j0, j1);
}

fc_status fc__qgemm_run(const fc__qgemm *g, char *err, size_t errcap) {
    size_t w_row = 0, xq_row = 0;
    fc_status st = validate(g, &w_row, &xq_row, err, errcap);
    if (st != FC_OK) return st;
    const fc__isa isa = g->pin_isa ? g->isa : fc__qmatmul_isa();
    job jb = {
        .g = g,
        .kern = kernels_of(isa),
        .kind = fc__qkind_of(g->wdt),
        .w_row = g->ldw ? g->ldw : w_row,
        .xq_row = xq_row,
    };
    jb.tile = jb.kind == FC__QK_GENERIC ? FC__QDOT_F32_ROWS : jb.kern->rows[jb.kind];
    jb.slice = SLICE_VALUES;
    jb.w_slice = (size_t)(jb.slice / fc_dtype_block_elems(g->wdt)) * fc_dtype_size(g->wdt);
    jb.xq_slice = fc__qpack_row_bytes(jb.kind, jb.slice);
    /* as many whole tiles as keep a panel's slice within L1_PANEL_BYTES */
    const size_t slice_row = fc__qpack_row_bytes(jb.kind, g->k < jb.slice ? g->k : jb.slice);
    jb.panel = jb.tile;
    while (jb.panel + jb.tile <= PANEL_MAX &&
           (size_t)(jb.panel + jb.tile) * slice_row <= L1_PANEL_BYTES)
        jb.panel += jb.tile;
    /* as many weight rows as fit in L2_BLOCK_BYTES (partial sums for at
     * most ROW_BLOCK_MAX rows when there are several slices) */
    const size_t fit = L2_BLOCK_BYTES / jb.w_row;
    const size_t cap = g->k > jb.slice ? ROW_BLOCK_MAX : (size_t)g->n + 1;
    jb.row_block = (int64_t)(fit < 2 ? 2 : fit > cap ? cap : fit) & ~(int64_t)1;
    /* Threads that will run: one inside another parallel region or
     * without OpenMP, and never more than there are weight rows. */
    int nt = g->threads;
    if (nt > g->n) nt = (int)g->n;
#ifdef FUCINA_HAVE_OPENMP
    if (omp_in_parallel()) nt = 1;
#else
    nt = 1;
#endif
    /* Few rows: packing them is cheap next to the product, so every thread
     * packs its own copy and the threads never wait for each other. */
    size_t copies = 1;
    if (nt > 1 && g->m <= PRIVATE_PACK_ROWS && xq_row * (size_t)g->m <= SIZE_MAX / (size_t)nt) {
        jb.private_xq = true;
        copies = (size_t)nt;
    }
    const size_t xq_bytes = xq_row * (size_t)g->m * copies;
    if (xq_bytes) {
        jb.xq = fc__alloc(g->alloc, xq_bytes, 64);
        if (!jb.xq)
            return fail(err, errcap, FC_ERR_OOM,
                        "qmatmul: cannot allocate %zu bytes of packed activations", xq_bytes);
    }
#ifdef FUCINA_HAVE_OPENMP
    if (nt > 1) {
#pragma omp parallel num_threads(nt)
        run_thread(&jb, omp_get_thread_num(), omp_get_num_threads());
    } else {
        run_thread(&jb, 0, 1);
    }
#else
    run_thread(&jb, 0, 1);
#endif
    if (jb.xq) fc__free(g->alloc, jb.xq, xq_bytes);
    return FC_OK;
}
