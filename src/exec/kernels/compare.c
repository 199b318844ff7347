/* SPDX-License-Identifier: MIT */
/* compare.c - the comparison, logic and selection kernels (compare.h):
 * eq/ne/lt/le/gt/ge against a tensor or an exact scalar, logical
 * and/or/not, where and masked_fill (with its attention-mask fast path).
 * The ops over them are in src/ops/compare.c.
 *
 *   a [..A], b [..B] -> bool [broadcast(A, B)]
 *   cond [..C], a [..A], b [..B] -> where [broadcast(C, A, B)], a's dtype
 *   x [..X], mask [..M broadcasting to X] -> masked_fill [..X], x's dtype
 *
 * Dtypes and semantics: see compare.h. */
#include <math.h>
#include <string.h>

#include "exec/kernels/compare.h"
#include "exec/kernels/pointwise.h"
#include "exec/parallel.h"

/* ---- tensor-tensor comparison ------------------------------------------------------ */

#define CMP_FN(NAME, T)                                                                            \
    static void NAME(fc__compare_kind k, char **p, const int64_t *s, int64_t n) {                  \
        uint8_t *o = (uint8_t *)p[0];                                                              \
        const T *a = (const T *)p[1], *b = (const T *)p[2];                                        \
        int64_t so = s[0], sa = s[1] / (int64_t)sizeof(T), sb = s[2] / (int64_t)sizeof(T);         \
        switch (k) {                                                                               \
        case FC__CMP_EQ:                                                                           \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x == y);                                 \
            break;                                                                                 \
        case FC__CMP_NE:                                                                           \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x != y);                                 \
            break;                                                                                 \
        case FC__CMP_LT:                                                                           \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x < y);                                  \
            break;                                                                                 \
        case FC__CMP_LE:                                                                           \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x <= y);                                 \
            break;                                                                                 \
        case FC__CMP_GT:                                                                           \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x > y);                                  \
            break;                                                                                 \
        case FC__CMP_GE:                                                                           \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x >= y);                                 \
            break;                                                                                 \
        }                                                                                          \
    }
CMP_FN(cmp_u8, uint8_t) /* also bool, on 0/1 copies of its bytes */
CMP_FN(cmp_u16, uint16_t)
CMP_FN(cmp_i8, int8_t)
CMP_FN(cmp_i16, int16_t)
CMP_FN(cmp_i32, int32_t)
CMP_FN(cmp_i64, int64_t)
CMP_FN(cmp_f32, float)
CMP_FN(cmp_f64, double)

typedef struct cmp_arg {
    fc__compare_kind k;
    fc_dtype dt;
    double s; /* scalar forms */
} cmp_arg;

static void cmp_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const cmp_arg *c = arg;
    switch (c->dt) {
    case FC_BOOL: { /* any nonzero byte is true, as every other op reads a bool (a byte
                     * written through fc_tensor_data_mut may be 7): compare 0/1 copies */
        uint8_t ua[FC__PW_CHUNK], ub[FC__PW_CHUNK];
        int64_t bs[3] = {s[0], s[1] ? 1 : 0, s[2] ? 1 : 0};
        for (int64_t i = 0; i < n; i += FC__PW_CHUNK) {
            int64_t m = n - i < FC__PW_CHUNK ? n - i : FC__PW_CHUNK;
            for (int64_t j = 0; j < (s[1] ? m : 1); j++)
                ua[j] = p[1][(i + j) * s[1]] != 0;
            for (int64_t j = 0; j < (s[2] ? m : 1); j++)
                ub[j] = p[2][(i + j) * s[2]] != 0;
            char *bp[3] = {p[0] + i * s[0], (char *)ua, (char *)ub};
            cmp_u8(c->k, bp, bs, m);
        }
        return;
    }
    case FC_U8:
        cmp_u8(c->k, p, s, n);
        return;
    case FC_U16:
        cmp_u16(c->k, p, s, n);
        return;
    case FC_I8:
        cmp_i8(c->k, p, s, n);
        return;
    case FC_I16:
        cmp_i16(c->k, p, s, n);
        return;
    case FC_I32:
        cmp_i32(c->k, p, s, n);
        return;
    case FC_I64:
        cmp_i64(c->k, p, s, n);
        return;
    case FC_F32:
        cmp_f32(c->k, p, s, n);
        return;
    case FC_F64:
        cmp_f64(c->k, p, s, n);
        return;
    default:
        break; /* f16, bf16: widen chunks (exactly) and compare as f32 */
    }
    float fa[FC__PW_CHUNK], fb[FC__PW_CHUNK];
    int64_t fs[3] = {s[0], s[1] ? 4 : 0, s[2] ? 4 : 0};
    for (int64_t i = 0; i < n; i += FC__PW_CHUNK) {
        int64_t m = n - i < FC__PW_CHUNK ? n - i : FC__PW_CHUNK;
        fc__pw_load_f32(c->dt, p[1] + i * s[1], s[1], s[1] ? m : 1, fa);
        fc__pw_load_f32(c->dt, p[2] + i * s[2], s[2], s[2] ? m : 1, fb);
        char *fp[3] = {p[0] + i * s[0], (char *)fa, (char *)fb};
        cmp_f32(c->k, fp, fs, m);
    }
}

void fc__compare_run(fc_ctx *ctx, fc__compare_kind k, fc_raw *out, const fc_raw *a,
                     const fc_raw *b) {
    cmp_arg c = {k, a->dtype, 0};
    fc_raw *ops[3] = {out, (fc_raw *)a, (fc_raw *)b};
    fc__pw_run(ctx, 3, ops, cmp_inner, &c);
}

/* ---- tensor-scalar comparison (exact) ----------------------------------------------------
 * Floats widen exactly to double. Integers compare as i64 against the
 * scalar split into floor(s) and "has a fraction", which is exact for every
 * i64 and every double (a double of magnitude >= 2^63 is beyond all i64). */

typedef struct int_cut {
    int always; /* -1: x < s for all x, +1: x > s for all x, 2: NaN (unordered), 0: use t */
    int64_t t;  /* floor(s) */
    bool frac;  /* s > t */
} int_cut;

static int_cut cut_of(double s) {
    int_cut c = {0, 0, false};
    if (s != s)
        c.always = 2;
    else if (s >= 9223372036854775808.0)
        c.always = -1;
    else if (s < -9223372036854775808.0)
        c.always = 1;
    else {
        double f = floor(s);
        c.t = (int64_t)f;
        c.frac = s != f;
    }
    return c;
}

static uint8_t int_vs(fc__compare_kind k, int64_t x, const int_cut *c) {
    if (c->always == 2) return 0;
    int sign; /* of x - s */
    if (c->always)
        sign = c->always;
    else if (x > c->t)
        sign = 1;
    else if (x < c->t || c->frac)
        sign = -1;
    else
        sign = 0;
    return k == FC__CMP_EQ ? sign == 0 : k == FC__CMP_LT ? sign < 0 : sign > 0;
}

static void cmp_scalar_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const cmp_arg *c = arg;
    bool ints = !fc_dtype_is_float(c->dt);
    int_cut cut = cut_of(c->s);
    for (int64_t i = 0; i < n; i += FC__PW_CHUNK) {
        int64_t m = n - i < FC__PW_CHUNK ? n - i : FC__PW_CHUNK;
        uint8_t *o = (uint8_t *)(p[0] + i * s[0]);
        if (ints) {
            int64_t x[FC__PW_CHUNK];
            fc__pw_load_i64(c->dt, p[1] + i * s[1], s[1], m, x);
            for (int64_t j = 0; j < m; j++)
                o[j * s[0]] = int_vs(c->k, x[j], &cut);
            continue;
        }
        double x[FC__PW_CHUNK], v = c->s;
        fc__pw_load_f64(c->dt, p[1] + i * s[1], s[1], m, x);
        switch (c->k) {
        case FC__CMP_EQ:
            for (int64_t j = 0; j < m; j++)
                o[j * s[0]] = x[j] == v;
            break;
        case FC__CMP_LT:
            for (int64_t j = 0; j < m; j++)
                o[j * s[0]] = x[j] < v;
            break;
        default:
            for (int64_t j = 0; j < m; j++)
                o[j * s[0]] = x[j] > v;
            break;
        }
    }
}

void fc__compare_scalar_run(fc_ctx *ctx, fc__compare_kind k, fc_raw *out, const fc_raw *a,
                            double s) {
    cmp_arg c = {k, a->dtype, s};
    fc_raw *ops[2] = {out, (fc_raw *)a};
    fc__pw_run(ctx, 2, ops, cmp_scalar_inner, &c);
}

/* ---- logic --------------------------------------------------------------------------------- */

typedef struct logic_arg {
    fc__logic_kind k;
    fc_dtype da, db;
} logic_arg;

static void logic_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const logic_arg *l = arg;
    uint8_t ta[FC__PW_CHUNK], tb[FC__PW_CHUNK];
    for (int64_t i = 0; i < n; i += FC__PW_CHUNK) {
        int64_t m = n - i < FC__PW_CHUNK ? n - i : FC__PW_CHUNK;
        uint8_t *o = (uint8_t *)(p[0] + i * s[0]);
        fc__pw_truthy(l->da, p[1] + i * s[1], s[1], m, ta);
        if (l->k == FC__LOGIC_NOT) {
            for (int64_t j = 0; j < m; j++)
                o[j * s[0]] = !ta[j];
            continue;
        }
        fc__pw_truthy(l->db, p[2] + i * s[2], s[2], m, tb);
        if (l->k == FC__LOGIC_AND)
            for (int64_t j = 0; j < m; j++)
                o[j * s[0]] = ta[j] & tb[j];
        else
            for (int64_t j = 0; j < m; j++)
                o[j * s[0]] = ta[j] | tb[j];
    }
}

void fc__compare_logic_run(fc_ctx *ctx, fc__logic_kind k, fc_raw *out, const fc_raw *a,
                           const fc_raw *b) {
    logic_arg l = {k, a->dtype, b ? b->dtype : FC_BOOL};
    fc_raw *ops[3] = {out, (fc_raw *)a, (fc_raw *)b};
    fc__pw_run(ctx, b ? 3 : 2, ops, logic_inner, &l);
}

/* ---- selection ------------------------------------------------------------------------------- */

/* o[j] = t[j] ? a[j] : b[j] for m elements of es bytes (strides in bytes;
 * 0 for a repeated value). Elements move by size, so every scalar dtype is
 * selected bit-exactly. */
#define SELECT(T)                                                                                  \
    for (int64_t j = 0; j < m; j++)                                                                \
    *(T *)(o + j * so) = t[j] ? *(const T *)(a + j * sa) : *(const T *)(b + j * sb)
static void select_run(size_t es, char *o, int64_t so, const uint8_t *t, const char *a, int64_t sa,
                       const char *b, int64_t sb, int64_t m) {
    switch (es) {
    case 1:
        SELECT(uint8_t);
        break;
    case 2:
        SELECT(uint16_t);
        break;
    case 4:
        SELECT(uint32_t);
        break;
    default:
        SELECT(uint64_t);
        break;
    }
}

typedef struct select_arg {
    fc_dtype dc;               /* condition / mask dtype */
    size_t es;                 /* element size of the selected values */
    const unsigned char *fill; /* masked_fill: the value in x's dtype */
} select_arg;

/* p = {out, cond, a, b} */
static void where_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const select_arg *w = arg;
    uint8_t t[FC__PW_CHUNK];
    for (int64_t i = 0; i < n; i += FC__PW_CHUNK) {
        int64_t m = n - i < FC__PW_CHUNK ? n - i : FC__PW_CHUNK;
        fc__pw_truthy(w->dc, p[1] + i * s[1], s[1], m, t);
        select_run(w->es, p[0] + i * s[0], s[0], t, p[2] + i * s[2], s[2], p[3] + i * s[3], s[3],
                   m);
    }
}

/* p = {out, x, mask}: the value where mask holds, x elsewhere */
static void masked_fill_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const select_arg *f = arg;
    uint8_t t[FC__PW_CHUNK];
    for (int64_t i = 0; i < n; i += FC__PW_CHUNK) {
        int64_t m = n - i < FC__PW_CHUNK ? n - i : FC__PW_CHUNK;
        fc__pw_truthy(f->dc, p[2] + i * s[2], s[2], m, t);
        select_run(f->es, p[0] + i * s[0], s[0], t, (const char *)f->fill, 0, p[1] + i * s[1], s[1],
                   m);
    }
}

/* ---- masked_fill fast path -------------------------------------------------------- */

/* The attention-mask layout: x contiguous, a contiguous one-byte mask whose
 * shape, leading 1s dropped, is the trailing part of x's shape. Element i of
 * x then pairs with mask element i % mask_numel, so the walk is a flat run
 * over x that restarts the mask every mask_numel elements: no iterator, no
 * truthiness chunk, and a select loop the compiler turns into blends. */
typedef struct mfill_job {
    char *out;
    const char *x;
    const uint8_t *mask;
    int64_t mask_n; /* mask elements; x's element count is a multiple */
    size_t es;
    const unsigned char *fill;
} mfill_job;

#define MFILL_RUN(T)                                                                               \
    do {                                                                                           \
        T *o_ = (T *)j->out + i;                                                                   \
        const T *x_ = (const T *)j->x + i;                                                         \
        T f_;                                                                                      \
        memcpy(&f_, j->fill, sizeof f_);                                                           \
        /* a bit select, not a branch: the load of x is unconditional, so it vectorizes */         \
        FC__SIMD for (int64_t k_ = 0; k_ < m; k_++) {                                              \
            T sel_ = (T)0 - (T)(mk[k_] != 0);                                                      \
            o_[k_] = (T)((x_[k_] & (T)~sel_) | (f_ & sel_));                                       \
        }                                                                                          \
    } while (0)

static void mfill_slice(void *arg, int64_t begin, int64_t end) {
    const mfill_job *j = arg;
    int64_t i = begin, mi = begin % j->mask_n; /* one division per slice */
    while (i < end) {
        int64_t m = j->mask_n - mi < end - i ? j->mask_n - mi : end - i;
        const uint8_t *mk = j->mask + mi;
        switch (j->es) {
        case 1:
            MFILL_RUN(uint8_t);
            break;
        case 2:
            MFILL_RUN(uint16_t);
            break;
        case 4:
            MFILL_RUN(uint32_t);
            break;
        default:
            MFILL_RUN(uint64_t);
            break;
        }
        i += m;
        mi = 0;
    }
}

/* Runs the fast path and returns true when x and mask have its layout. A
 * one-byte mask of any non-f8 dtype is truthy exactly where its byte is
 * non-zero, as fc__pw_truthy reads it. */
static bool masked_fill_fast(fc_ctx *ctx, fc_raw *out, const fc_raw *x, const fc_raw *mr,
                             const unsigned char *fill) {
    if (fc_dtype_size(mr->dtype) != 1 || fc_dtype_is_f8(mr->dtype) || !fc__raw_is_contiguous(mr) ||
        !fc__raw_is_contiguous(x))
        return false;
    int lead = 0;
    while (lead < mr->rank && mr->shape[lead] == 1)
        lead++;
    int tail = mr->rank - lead;
    if (tail > x->rank ||
        !fc__shape_equal(mr->shape + lead, tail, x->shape + (x->rank - tail), tail))
        return false;
    int64_t n = fc__raw_numel(x), mn = fc__raw_numel(mr);
    if (n == 0) return true;
    mfill_job j = {.out = fc__raw_base(out),
                   .x = fc__raw_base(x),
                   .mask = (const uint8_t *)fc__raw_base(mr),
                   .mask_n = mn,
                   .es = fc_dtype_size(x->dtype),
                   .fill = fill};
    fc__parallel_for(ctx, n, 32768, mfill_slice, &j);
    return true;
}

void fc__compare_where_run(fc_ctx *ctx, fc_raw *out, const fc_raw *cond, const fc_raw *a,
                           const fc_raw *b) {
    select_arg sa = {cond->dtype, fc_dtype_size(a->dtype), NULL};
    fc_raw *ops[4] = {out, (fc_raw *)cond, (fc_raw *)a, (fc_raw *)b};
    fc__pw_run(ctx, 4, ops, where_inner, &sa);
}

void fc__compare_masked_fill_run(fc_ctx *ctx, fc_raw *out, const fc_raw *x, const fc_raw *mask,
                                 const unsigned char *fill) {
    if (masked_fill_fast(ctx, out, x, mask, fill)) return;
    select_arg sa = {mask->dtype, fc_dtype_size(x->dtype), fill};
    fc_raw *ops[3] = {out, (fc_raw *)x, (fc_raw *)mask};
    fc__pw_run(ctx, 3, ops, masked_fill_inner, &sa);
}
