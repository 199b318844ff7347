/* SPDX-License-Identifier: MIT */
/* exec/kernels/conv_cols.h - the column matrix of conv.c's im2col + GEMM
 * path and the team's buffer-shaping kernels: im2col and its adjoint
 * col2im, the per-channel bias fills and the [b][c] -> [c][b] regrouping of
 * an output gradient, and the ordered sum of the wgrad partials. Each
 * *_range function is an fc__range_fn over items that write disjoint
 * outputs, so any split over the team gives the same bits; the fills and
 * the regrouping run on the calling thread (a team item's own rows).
 * Internal to exec/kernels. */
#ifndef FUCINA_EXEC_KERNELS_CONV_COLS_H
#define FUCINA_EXEC_KERNELS_CONV_COLS_H

#include "exec/kernels/conv.h"

/* The sizes of one product, fixed by the geometry and the compute dtype. */
typedef struct fc__conv_plan {
    const fc__conv_geom *g;
    fc_dtype dt;      /* compute dtype: f32 or f64 */
    size_t es;        /* its size */
    int64_t P;        /* output positions per image: hy * wy */
    int64_t X;        /* image elements per channel: hx * wx */
    int64_t K, Kg;    /* column rows: all channels, one group */
    int64_t cyg, cxg; /* channels per group */
    int64_t nb;       /* images per chunk */
    bool identity;    /* 1x1, stride 1, no padding: col(x) is x */
} fc__conv_plan;

/* An im2col / col2im job: the column matrix [K][nb][P] of images
 * [n0, n0 + nb) of the image side x ([n, cx, hx, wx], contiguous; col2im
 * writes it). */
typedef struct fc__col_job {
    const fc__conv_plan *p;
    const char *x; /* image side, contiguous [n, cx, hx, wx] */
    char *col;     /* [K][nb][P] */
    int64_t n0, nb;
} fc__col_job;

/* Rows (row, b) of the column matrix, items row * nb + b. */
void fc__im2col_range(void *arg, int64_t begin, int64_t end);
/* Image planes (b, c), items b * cx + c: zeroed, then the kh*kw column rows
 * of that channel added in kernel-offset order (the adjoint of im2col). */
void fc__col2im_range(void *arg, int64_t begin, int64_t end);

/* Bias fills over rows of len values: row r of dst (rows of a [..][c][len]
 * block, r counted from the block's first row) gets bias[r % c] written, or
 * added when add is set. */
void fc__conv_fill_bias(const char *bias, char *dst, size_t es, int64_t c, int64_t rows,
                        int64_t len, bool add);
/* The regrouping [nb][c][len] -> [c][nb][len] of src into dst. */
void fc__conv_regroup(const char *src, char *dst, size_t es, int64_t c, int64_t nb, int64_t len);

/* out[i] = partial 0 [i] + partial 1 [i] + ... (parts partials of elems
 * values each, back to back), in part order, over the team. */
void fc__conv_sum_parts(fc_ctx *ctx, const fc__conv_plan *p, const char *partials, int64_t parts,
                        int64_t elems, char *out);

#endif /* FUCINA_EXEC_KERNELS_CONV_COLS_H */
