/* compare.c - comparisons, logic and selection: eq/ne/lt/le/gt/ge (tensor
 * and scalar forms), logical and/or/not, where and masked_fill. The two
 * selections are differentiable (grad_compare.c); the rest make bool masks
 * and record nothing.
 *
 *   a [..A], b [..B] -> bool [broadcast(A, B)]
 *   cond [..C], a [..A], b [..B] -> where [broadcast(C, A, B)], a's dtype
 *   x [..X], mask [..M broadcasting to X] -> masked_fill [..X], x's dtype
 *
 * Comparisons need one dtype on both sides (any scalar dtype but the f8
 * storage formats; f16/bf16 compare exactly through f32) and follow IEEE:
 * every comparison with NaN is false except ne. The scalar forms compare
 * the exact values: the scalar is NOT rounded to the tensor's dtype first
 * (i32 2 < 2.5 is true; an i64 beyond 2^53 still compares exactly).
 * Logic and conditions read any non-block dtype by truthiness (value != 0;
 * -0.0 false, NaN true), so operand dtypes may differ there. where and
 * masked_fill move elements by size, so they take every scalar dtype. */
#include <math.h>
#include <string.h>

#include "fucina.h"
#include "ag/grad_pointwise.h"
#include "exec/kernels/pointwise.h"
#include "exec/parallel.h"

typedef enum cmp_kind { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE } cmp_kind;

/* ---- tensor-tensor comparison ------------------------------------------------------ */

#define CMP_FN(NAME, T)                                                                            \
    static void NAME(cmp_kind k, char **p, const int64_t *s, int64_t n) {                          \
        uint8_t *o = (uint8_t *)p[0];                                                              \
        const T *a = (const T *)p[1], *b = (const T *)p[2];                                        \
        int64_t so = s[0], sa = s[1] / (int64_t)sizeof(T), sb = s[2] / (int64_t)sizeof(T);         \
        switch (k) {                                                                               \
        case CMP_EQ:                                                                               \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x == y);                                 \
            break;                                                                                 \
        case CMP_NE:                                                                               \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x != y);                                 \
            break;                                                                                 \
        case CMP_LT:                                                                               \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x < y);                                  \
            break;                                                                                 \
        case CMP_LE:                                                                               \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x <= y);                                 \
            break;                                                                                 \
        case CMP_GT:                                                                               \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x > y);                                  \
            break;                                                                                 \
        case CMP_GE:                                                                               \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x >= y);                                 \
            break;                                                                                 \
        }                                                                                          \
    }
CMP_FN(cmp_u8, uint8_t) /* also bool, whose bytes are 0/1 */
CMP_FN(cmp_u16, uint16_t)
CMP_FN(cmp_i8, int8_t)
CMP_FN(cmp_i16, int16_t)
CMP_FN(cmp_i32, int32_t)
CMP_FN(cmp_i64, int64_t)
CMP_FN(cmp_f32, float)
CMP_FN(cmp_f64, double)

typedef struct cmp_arg {
    cmp_kind k;
    fc_dtype dt;
    double s; /* scalar forms */
} cmp_arg;

static void cmp_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const cmp_arg *c = arg;
    switch (c->dt) {
    case FC_BOOL:
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

static fc_tensor *compare(fc_ctx *ctx, const char *op, cmp_kind k, fc_tensor *a, fc_tensor *b) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, op, a);
    FC__CHECK_INPUT(ctx, op, b);
    fc_dtype dt = a->raw.dtype;
    int64_t shape[FC_MAX_RANK];
    int rank;
    if (fc__pw_same_dtype(ctx, op, a, b) != FC_OK ||
        fc__pw_scalar_dtype(ctx, op, dt, false) != FC_OK ||
        fc__pw_broadcast(ctx, op, a, b, shape, &rank) != FC_OK)
        return NULL;
    fc_tensor *out = fc__tensor_new(ctx, op, FC_BOOL, shape, rank);
    if (!out) return NULL;
    cmp_arg c = {k, dt, 0};
    fc_raw *ops[3] = {&out->raw, &a->raw, &b->raw};
    fc__pw_run(ctx, 3, ops, cmp_inner, &c);
    return fc__finish(ctx, op, out);
}

fc_tensor *fc_eq(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return compare(ctx, "eq", CMP_EQ, a, b);
}
fc_tensor *fc_ne(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return compare(ctx, "ne", CMP_NE, a, b);
}
fc_tensor *fc_lt(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return compare(ctx, "lt", CMP_LT, a, b);
}
fc_tensor *fc_le(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return compare(ctx, "le", CMP_LE, a, b);
}
fc_tensor *fc_gt(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return compare(ctx, "gt", CMP_GT, a, b);
}
fc_tensor *fc_ge(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return compare(ctx, "ge", CMP_GE, a, b);
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

static uint8_t int_vs(cmp_kind k, int64_t x, const int_cut *c) {
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
    return k == CMP_EQ ? sign == 0 : k == CMP_LT ? sign < 0 : sign > 0;
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
        case CMP_EQ:
            for (int64_t j = 0; j < m; j++)
                o[j * s[0]] = x[j] == v;
            break;
        case CMP_LT:
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

static fc_tensor *compare_scalar(fc_ctx *ctx, const char *op, cmp_kind k, fc_tensor *a, double v) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, op, a);
    if (fc__pw_scalar_dtype(ctx, op, a->raw.dtype, false) != FC_OK) return NULL;
    fc_tensor *out = fc__tensor_new(ctx, op, FC_BOOL, a->raw.shape, a->raw.rank);
    if (!out) return NULL;
    cmp_arg c = {k, a->raw.dtype, v};
    fc_raw *ops[2] = {&out->raw, &a->raw};
    fc__pw_run(ctx, 2, ops, cmp_scalar_inner, &c);
    return fc__finish(ctx, op, out);
}

fc_tensor *fc_eq_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return compare_scalar(ctx, "eq_scalar", CMP_EQ, a, s);
}
fc_tensor *fc_lt_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return compare_scalar(ctx, "lt_scalar", CMP_LT, a, s);
}
fc_tensor *fc_gt_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return compare_scalar(ctx, "gt_scalar", CMP_GT, a, s);
}

/* ---- logic --------------------------------------------------------------------------------- */

typedef enum logic_kind { LOGIC_AND, LOGIC_OR, LOGIC_NOT } logic_kind;

typedef struct logic_arg {
    logic_kind k;
    fc_dtype da, db;
} logic_arg;

static void logic_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const logic_arg *l = arg;
    uint8_t ta[FC__PW_CHUNK], tb[FC__PW_CHUNK];
    for (int64_t i = 0; i < n; i += FC__PW_CHUNK) {
        int64_t m = n - i < FC__PW_CHUNK ? n - i : FC__PW_CHUNK;
        uint8_t *o = (uint8_t *)(p[0] + i * s[0]);
        fc__pw_truthy(l->da, p[1] + i * s[1], s[1], m, ta);
        if (l->k == LOGIC_NOT) {
            for (int64_t j = 0; j < m; j++)
                o[j * s[0]] = !ta[j];
            continue;
        }
        fc__pw_truthy(l->db, p[2] + i * s[2], s[2], m, tb);
        if (l->k == LOGIC_AND)
            for (int64_t j = 0; j < m; j++)
                o[j * s[0]] = ta[j] & tb[j];
        else
            for (int64_t j = 0; j < m; j++)
                o[j * s[0]] = ta[j] | tb[j];
    }
}

static fc_tensor *logic(fc_ctx *ctx, const char *op, logic_kind k, fc_tensor *a, fc_tensor *b) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, op, a);
    if (k != LOGIC_NOT) FC__CHECK_INPUT(ctx, op, b);
    if (fc__pw_scalar_dtype(ctx, op, a->raw.dtype, true) != FC_OK ||
        (b && fc__pw_scalar_dtype(ctx, op, b->raw.dtype, true) != FC_OK))
        return NULL;
    int64_t shape[FC_MAX_RANK];
    int rank = a->raw.rank;
    memcpy(shape, a->raw.shape, sizeof shape);
    if (b && fc__pw_broadcast(ctx, op, a, b, shape, &rank) != FC_OK) return NULL;
    fc_tensor *out = fc__tensor_new(ctx, op, FC_BOOL, shape, rank);
    if (!out) return NULL;
    logic_arg l = {k, a->raw.dtype, b ? b->raw.dtype : FC_BOOL};
    fc_raw *ops[3] = {&out->raw, &a->raw, b ? &b->raw : NULL};
    fc__pw_run(ctx, b ? 3 : 2, ops, logic_inner, &l);
    return fc__finish(ctx, op, out);
}

fc_tensor *fc_logical_and(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return logic(ctx, "logical_and", LOGIC_AND, a, b);
}
fc_tensor *fc_logical_or(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return logic(ctx, "logical_or", LOGIC_OR, a, b);
}
fc_tensor *fc_logical_not(fc_ctx *ctx, fc_tensor *a) {
    return logic(ctx, "logical_not", LOGIC_NOT, a, NULL);
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
static bool masked_fill_fast(fc_ctx *ctx, fc_tensor *out, const fc_tensor *x, const fc_tensor *mask,
                             const unsigned char *fill) {
    const fc_raw *mr = &mask->raw;
    if (fc_dtype_size(mr->dtype) != 1 || fc_dtype_is_f8(mr->dtype) || !fc__raw_is_contiguous(mr) ||
        !fc__raw_is_contiguous(&x->raw))
        return false;
    int lead = 0;
    while (lead < mr->rank && mr->shape[lead] == 1)
        lead++;
    int tail = mr->rank - lead;
    if (tail > x->raw.rank ||
        !fc__shape_equal(mr->shape + lead, tail, x->raw.shape + (x->raw.rank - tail), tail))
        return false;
    int64_t n = fc__raw_numel(&x->raw), mn = fc__raw_numel(mr);
    if (n == 0) return true;
    mfill_job j = {.out = fc__raw_base(&out->raw),
                   .x = fc__raw_base(&x->raw),
                   .mask = (const uint8_t *)fc__raw_base(mr),
                   .mask_n = mn,
                   .es = fc_dtype_size(x->raw.dtype),
                   .fill = fill};
    fc__parallel_for(ctx, n, 32768, mfill_slice, &j);
    return true;
}

fc_tensor *fc_where(fc_ctx *ctx, fc_tensor *cond, fc_tensor *a, fc_tensor *b) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "where", cond);
    FC__CHECK_INPUT(ctx, "where", a);
    FC__CHECK_INPUT(ctx, "where", b);
    fc_tensor *all[3] = {cond, a, b};
    int64_t shape[FC_MAX_RANK];
    int rank;
    if (fc__pw_scalar_dtype(ctx, "where", cond->raw.dtype, true) != FC_OK ||
        fc__pw_same_dtype(ctx, "where", a, b) != FC_OK ||
        fc__pw_scalar_dtype(ctx, "where", a->raw.dtype, true) != FC_OK ||
        fc__pw_broadcast_n(ctx, "where", 3, all, shape, &rank) != FC_OK)
        return NULL;
    fc_tensor *out = fc__tensor_new(ctx, "where", a->raw.dtype, shape, rank);
    if (!out) return NULL;
    select_arg sa = {cond->raw.dtype, fc_dtype_size(a->raw.dtype), NULL};
    fc_raw *ops[4] = {&out->raw, &cond->raw, &a->raw, &b->raw};
    fc__pw_run(ctx, 4, ops, where_inner, &sa);
    out = fc__finish(ctx, "where", out);
    if (!out || !fc__ag_wants(ctx, 3, all)) return out;
    fc_node *nd = fc__ag_record(ctx, "where", fc__grad_where, out, 3, all);
    if (!nd || fc__ag_save(ctx, nd, "condition", cond) != FC_OK) {
        fc_release(out);
        return NULL;
    }
    return out;
}

fc_tensor *fc_masked_fill(fc_ctx *ctx, fc_tensor *x, fc_tensor *mask, double value) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "masked_fill", x);
    FC__CHECK_INPUT(ctx, "masked_fill", mask);
    fc_dtype dt = x->raw.dtype;
    int64_t shape[FC_MAX_RANK];
    int rank;
    if (fc__pw_scalar_dtype(ctx, "masked_fill", dt, true) != FC_OK ||
        fc__pw_scalar_dtype(ctx, "masked_fill", mask->raw.dtype, true) != FC_OK ||
        fc__pw_broadcast(ctx, "masked_fill", x, mask, shape, &rank) != FC_OK)
        return NULL;
    if (!fc__shape_equal(shape, rank, x->raw.shape, x->raw.rank)) {
        char a[160], b[160];
        fc__fail(ctx, FC_ERR_SHAPE_MISMATCH, "masked_fill: mask %s does not broadcast to x %s",
                 fc__desc(mask, b, (int)sizeof b), fc__desc(x, a, (int)sizeof a));
        return NULL;
    }
    fc_tensor *out = fc__tensor_new(ctx, "masked_fill", dt, shape, rank);
    if (!out) return NULL;
    unsigned char v[8];
    fc__store_f64(dt, v, value);
    select_arg sa = {mask->raw.dtype, fc_dtype_size(dt), v};
    fc_raw *ops[3] = {&out->raw, &x->raw, &mask->raw};
    if (!masked_fill_fast(ctx, out, x, mask, v)) fc__pw_run(ctx, 3, ops, masked_fill_inner, &sa);
    out = fc__finish(ctx, "masked_fill", out);
    fc_tensor *in[2] = {x, mask};
    if (!out || !fc__ag_wants(ctx, 2, in)) return out;
    fc_node *nd = fc__ag_record(ctx, "masked_fill", fc__grad_masked_fill, out, 2, in);
    if (!nd || fc__ag_save(ctx, nd, "mask", mask) != FC_OK) {
        fc_release(out);
        return NULL;
    }
    return out;
}
