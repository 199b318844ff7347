/* SPDX-License-Identifier: MIT */
/* rope.c - rotary position embedding (llama.cpp's ggml_rope_ext without
 * YaRN): the kernel behind fc_rope and its backward.
 *
 *   x [outer, T, H, D] (the leading axes flattened), pair i < n_dims/2 of
 *   each row (t, h): (x0, x1) -> (x0 c - x1 s, x0 s + x1 c), with
 *   c, s = cos, sin of a(t, i) = (pos_offset + t) * freq_scale * base^(-2i/n_dims)
 *   (negated for the inverse). NORM pairs elements (2i, 2i+1), NEOX
 *   elements (i, i + n_dims/2); elements n_dims .. D-1 are copied.
 *
 * The angles are computed once per call in double, into a [T, n_dims/2]
 * table of cos and sin in the compute type (f32, or f64 for f64), which
 * every head and every leading index shares: T * n_dims/2 cos/sin calls
 * for T * H * D * outer elements. f16 and bf16 go through an f32 copy and
 * are rounded once at the end. Rows are split over the thread team; each
 * element is computed the same way whatever the split. */
#include "exec/kernels/rope.h"

#include <math.h>

#include "exec/kernels/copy.h"
#include "exec/parallel.h"

typedef struct rope_job {
    const fc__rope_params *p;
    const char *x;
    char *y;
    const char *table; /* [T][half] cos, then [T][half] sin, compute type */
    int64_t T, H, D, half;
    bool wide; /* f64 */
} rope_job;

/* One body per compute type. RT is float or double. */
#define ROPE_ROWS(NAME, RT)                                                                        \
    static void NAME(const rope_job *j, int64_t r0, int64_t r1) {                                  \
        const RT *x = (const RT *)j->x, *ct = (const RT *)j->table;                                \
        const RT *st = ct + j->T * j->half;                                                        \
        RT *y = (RT *)j->y;                                                                        \
        int64_t D = j->D, half = j->half, nd = j->p->n_dims;                                       \
        int64_t step = j->p->neox ? 1 : 2, other = j->p->neox ? half : 1;                          \
        for (int64_t r = r0; r < r1; r++) { /* r = (outer, t) */                                   \
            const RT *c = ct + (r % j->T) * half, *s = st + (r % j->T) * half;                     \
            for (int64_t h = 0; h < j->H; h++) {                                                   \
                const RT *xr = x + (r * j->H + h) * D;                                             \
                RT *yr = y + (r * j->H + h) * D;                                                   \
                for (int64_t i = 0; i < half; i++) {                                               \
                    RT x0 = xr[i * step], x1 = xr[i * step + other];                               \
                    yr[i * step] = x0 * c[i] - x1 * s[i];                                          \
                    yr[i * step + other] = x0 * s[i] + x1 * c[i];                                  \
                }                                                                                  \
                for (int64_t d = nd; d < D; d++)                                                   \
                    yr[d] = xr[d];                                                                 \
            }                                                                                      \
        }                                                                                          \
    }
ROPE_ROWS(rope_rows_f32, float)
ROPE_ROWS(rope_rows_f64, double)

static void rope_range(void *arg, int64_t begin, int64_t end) {
    const rope_job *j = arg;
    if (j->wide)
        rope_rows_f64(j, begin, end);
    else
        rope_rows_f32(j, begin, end);
}

/* The cos/sin table in the compute type (see the file comment). */
static void fill_table(const fc__rope_params *p, int64_t T, int64_t half, bool wide, char *out) {
    for (int64_t t = 0; t < T; t++) {
        double pos = (double)(p->pos_offset + t) * p->freq_scale;
        for (int64_t i = 0; i < half; i++) {
            double a = pos * pow(p->freq_base, -2.0 * (double)i / (double)p->n_dims);
            double c = cos(a), s = p->inverse ? -sin(a) : sin(a);
            int64_t e = t * half + i, e2 = T * half + e;
            if (wide) {
                ((double *)out)[e] = c;
                ((double *)out)[e2] = s;
            } else {
                ((float *)out)[e] = (float)c;
                ((float *)out)[e2] = (float)s;
            }
        }
    }
}

fc_tensor *fc__rope(fc_ctx *ctx, const char *op, fc_tensor *x, const fc__rope_params *p) {
    fc_dtype dt = x->raw.dtype, ct = dt == FC_F64 ? FC_F64 : FC_F32;
    int rank = x->raw.rank;
    const int64_t *shape = x->raw.shape;
    int64_t T = shape[rank - 3], H = shape[rank - 2], D = shape[rank - 1], half = p->n_dims / 2;
    int64_t rows = 1; /* (outer, t) pairs */
    for (int i = 0; i < rank - 2; i++)
        rows *= shape[i];
    fc_tensor *xc = NULL, *y = NULL, *table = NULL, *out = NULL;
    /* the input in the compute type, contiguous (x itself when it is) */
    xc = dt == ct ? fc__copy_contiguous_ref(ctx, op, x) : fc__copy_cast(ctx, op, x, ct);
    if (!xc) goto done;
    int64_t tn = 2 * T * half > 0 ? 2 * T * half : 1;
    if (!(y = fc__tensor_new(ctx, op, ct, shape, rank))) goto done;
    if (!(table = fc__tensor_new(ctx, op, ct, &tn, 1))) goto done;
    fill_table(p, T, half, ct == FC_F64, fc__raw_base(&table->raw));
    rope_job j = {p,
                  fc__raw_base(&xc->raw),
                  fc__raw_base(&y->raw),
                  fc__raw_base(&table->raw),
                  T,
                  H,
                  D,
                  half,
                  ct == FC_F64};
    fc__parallel_for(ctx, rows, 1 + 16384 / (H * D), rope_range, &j);
    if (dt == ct) {
        out = y;
        y = NULL;
    } else {
        out = fc__copy_cast(ctx, op, y, dt);
    }
done:
    fc_release(table);
    fc_release(y);
    fc_release(xc);
    return out;
}
