/* binary.c - broadcasting binary arithmetic: add, sub, mul, div, pow,
 * maximum, minimum; their scalar forms; the in-place add_, mul_scalar_ and
 * fill_ and the destination form add_out; and the two elementwise kernels the backward rules of pow
 * and maximum/minimum need (grad_binary.c holds the rules, in this order).
 *
 *   a [..A], b [..B] -> out [broadcast(A, B)], out[i] = a[i] (op) b[i]
 *
 * Dtypes: a and b share one dtype. f32 and f64 compute in their own type;
 * f16 and bf16 widen to f32 per chunk and round once on store; integers
 * wrap (they compute in an unsigned type of at least int's width, so no
 * signed overflow, not even u16 * u16 promoted to int). Integer division
 * truncates toward zero; INT_MIN / -1 wraps to INT_MIN; a zero anywhere in
 * an integer divisor fails with FC_ERR_DIV_ZERO before anything is
 * computed. pow is float-only; bool, f8 and block dtypes are refused. */
#include <math.h>
#include <stdatomic.h>

#include "fucina.h"
#include "ag/grad_pointwise.h"
#include "exec/kernels/pointwise.h"
#include "exec/kernels/rowwise.h"

typedef enum bin_kind { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_POW, BIN_MAX, BIN_MIN } bin_kind;

/* ---- kernels ------------------------------------------------------------------------ */

/* Float kernels. maximum/minimum pick x when it wins, ties, or is NaN, and
 * y otherwise, so a NaN in either operand propagates. */
#define FLOAT_BINARY(NAME, T, POW)                                                                 \
    static void NAME(bin_kind k, char **p, const int64_t *s, int64_t n) {                          \
        T *o = (T *)p[0];                                                                          \
        const T *a = (const T *)p[1], *b = (const T *)p[2];                                        \
        int64_t so = s[0] / (int64_t)sizeof(T), sa = s[1] / (int64_t)sizeof(T),                    \
                sb = s[2] / (int64_t)sizeof(T);                                                    \
        switch (k) {                                                                               \
        case BIN_ADD:                                                                              \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x + y);                                  \
            break;                                                                                 \
        case BIN_SUB:                                                                              \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x - y);                                  \
            break;                                                                                 \
        case BIN_MUL:                                                                              \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x *y);                                   \
            break;                                                                                 \
        case BIN_DIV:                                                                              \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x / y);                                  \
            break;                                                                                 \
        case BIN_POW:                                                                              \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, POW(x, y));                              \
            break;                                                                                 \
        case BIN_MAX:                                                                              \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, (x >= y || x != x) ? x : y);             \
            break;                                                                                 \
        case BIN_MIN:                                                                              \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, (x <= y || x != x) ? x : y);             \
            break;                                                                                 \
        }                                                                                          \
    }
FLOAT_BINARY(bin_f32, float, powf)
FLOAT_BINARY(bin_f64, double, pow)

/* Integer kernels: U is the unsigned type the arithmetic wraps in. The
 * division by -1 is a negation in U because INT_MIN / -1 overflows in T;
 * SIGNED is a constant, so unsigned types never take that branch. pow is
 * refused before a kernel runs. */
#define INT_BINARY(NAME, T, U, SIGNED)                                                             \
    static void NAME(bin_kind k, char **p, const int64_t *s, int64_t n) {                          \
        T *o = (T *)p[0];                                                                          \
        const T *a = (const T *)p[1], *b = (const T *)p[2];                                        \
        int64_t so = s[0] / (int64_t)sizeof(T), sa = s[1] / (int64_t)sizeof(T),                    \
                sb = s[2] / (int64_t)sizeof(T);                                                    \
        switch (k) {                                                                               \
        case BIN_ADD:                                                                              \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, (T)((U)x + (U)y));                       \
            break;                                                                                 \
        case BIN_SUB:                                                                              \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, (T)((U)x - (U)y));                       \
            break;                                                                                 \
        case BIN_MUL:                                                                              \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, (T)((U)x * (U)y));                       \
            break;                                                                                 \
        case BIN_DIV:                                                                              \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y,                                          \
                         (SIGNED && y == (T)-1) ? (T)((U)0 - (U)x) : (T)(x / y));                  \
            break;                                                                                 \
        case BIN_MAX:                                                                              \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x > y ? x : y);                          \
            break;                                                                                 \
        case BIN_MIN:                                                                              \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x < y ? x : y);                          \
            break;                                                                                 \
        case BIN_POW:                                                                              \
            break;                                                                                 \
        }                                                                                          \
    }
INT_BINARY(bin_u8, uint8_t, uint32_t, 0)
INT_BINARY(bin_u16, uint16_t, uint32_t, 0)
INT_BINARY(bin_i8, int8_t, uint32_t, 1)
INT_BINARY(bin_i16, int16_t, uint32_t, 1)
INT_BINARY(bin_i32, int32_t, uint32_t, 1)
INT_BINARY(bin_i64, int64_t, uint64_t, 1)

/* f16/bf16: widen each operand's chunk to f32 (one element for a stride-0
 * operand), compute with the f32 kernel, narrow once. */
static void bin_half(bin_kind k, fc_dtype dt, char **p, const int64_t *s, int64_t n) {
    float fo[FC__PW_CHUNK], fa[FC__PW_CHUNK], fb[FC__PW_CHUNK];
    int64_t fs[3] = {4, s[1] ? 4 : 0, s[2] ? 4 : 0};
    char *fp[3] = {(char *)fo, (char *)fa, (char *)fb};
    for (int64_t c = 0; c < n; c += FC__PW_CHUNK) {
        int64_t m = n - c < FC__PW_CHUNK ? n - c : FC__PW_CHUNK;
        fc__pw_load_f32(dt, p[1] + c * s[1], s[1], s[1] ? m : 1, fa);
        fc__pw_load_f32(dt, p[2] + c * s[2], s[2], s[2] ? m : 1, fb);
        bin_f32(k, fp, fs, m);
        fc__pw_store_f32(dt, p[0] + c * s[0], s[0], m, fo);
    }
}

typedef struct bin_arg {
    bin_kind kind;
    fc_dtype dt;
    bool stream; /* large f32 output: written around the cache (rowwise.h) */
} bin_arg;

static void bin_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const bin_arg *ba = arg;
#ifdef FC__RW_X86
    static const char stream_op[] = {
        [BIN_ADD] = '+', [BIN_SUB] = '-', [BIN_MUL] = '*', [BIN_DIV] = '/',
        [BIN_POW] = 0,   [BIN_MAX] = 0,   [BIN_MIN] = 0};
    if (ba->stream && s[0] == 4 && s[1] == 4 && s[2] == 4 &&
        fc__rw_stream_binary(stream_op[ba->kind], (float *)p[0], (const float *)p[1],
                             (const float *)p[2], n))
        return;
#endif
    switch (ba->dt) {
    case FC_F32:
        bin_f32(ba->kind, p, s, n);
        break;
    case FC_F64:
        bin_f64(ba->kind, p, s, n);
        break;
    case FC_F16:
    case FC_BF16:
        bin_half(ba->kind, ba->dt, p, s, n);
        break;
    case FC_U8:
        bin_u8(ba->kind, p, s, n);
        break;
    case FC_U16:
        bin_u16(ba->kind, p, s, n);
        break;
    case FC_I8:
        bin_i8(ba->kind, p, s, n);
        break;
    case FC_I16:
        bin_i16(ba->kind, p, s, n);
        break;
    case FC_I32:
        bin_i32(ba->kind, p, s, n);
        break;
    case FC_I64:
        bin_i64(ba->kind, p, s, n);
        break;
    default:
        break; /* refused by validation */
    }
}

/* Any all-zero element in an integer operand (its own elements, not the
 * broadcast): an integer zero is all zero bits. */
typedef struct zero_arg {
    size_t es;
    atomic_bool found;
} zero_arg;

static void zero_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    zero_arg *z = arg;
    bool any = false;
    const char *q = p[0];
    switch (z->es) {
    case 1:
        for (int64_t i = 0; i < n; i++)
            any |= *(const uint8_t *)(q + i * s[0]) == 0;
        break;
    case 2:
        for (int64_t i = 0; i < n; i++)
            any |= *(const uint16_t *)(q + i * s[0]) == 0;
        break;
    case 4:
        for (int64_t i = 0; i < n; i++)
            any |= *(const uint32_t *)(q + i * s[0]) == 0;
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            any |= *(const uint64_t *)(q + i * s[0]) == 0;
    }
    if (any) atomic_store_explicit(&z->found, true, memory_order_relaxed);
}

static bool has_zero(fc_ctx *ctx, fc_tensor *t) {
    zero_arg z = {fc_dtype_size(t->raw.dtype), false};
    fc_raw *ops[1] = {&t->raw};
    fc__pw_run(ctx, 1, ops, zero_inner, &z);
    return atomic_load(&z.found);
}

/* ---- the ops ------------------------------------------------------------------------ */

static const fc__backward_fn bin_rules[] = {fc__grad_add,    fc__grad_sub, fc__grad_mul,
                                            fc__grad_div,    fc__grad_pow, fc__grad_maximum,
                                            fc__grad_minimum};

/* Records the node and saves what the rule of kind k reads (see
 * grad_binary.c). On failure releases out and returns NULL. */
static fc_tensor *record(fc_ctx *ctx, const char *op, bin_kind k, fc_tensor *out, fc_tensor *a,
                         fc_tensor *b) {
    fc_tensor *in[2] = {a, b};
    fc_node *nd = fc__ag_record(ctx, op, bin_rules[k], out, 2, in);
    if (!nd) {
        fc_release(out);
        return NULL;
    }
    bool na = nd->in[0].needs, nb = nd->in[1].needs;
    fc_status st = FC_OK;
    nd->i[0] = nd->i[1] = -1; /* saved slot of a, of b */
    switch (k) {
    case BIN_MUL: /* da needs b, db needs a */
        if (nb) nd->i[0] = nd->n_saved, st = fc__ag_save(ctx, nd, "input a", a);
        if (na && st == FC_OK) nd->i[1] = nd->n_saved, st = fc__ag_save(ctx, nd, "input b", b);
        break;
    case BIN_DIV: /* da = g / b, db = -(g / b) * out */
        st = fc__ag_save(ctx, nd, "input b", b);
        if (nb && st == FC_OK) st = fc__ag_save(ctx, nd, "output", out);
        break;
    case BIN_POW:
    case BIN_MAX:
    case BIN_MIN:
        st = fc__ag_save(ctx, nd, "input a", a);
        if (st == FC_OK) st = fc__ag_save(ctx, nd, "input b", b);
        break;
    default:
        break;
    }
    if (st != FC_OK) {
        fc_release(out);
        return NULL;
    }
    return out;
}

static fc_tensor *binary(fc_ctx *ctx, const char *op, bin_kind k, fc_tensor *a, fc_tensor *b) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, op, a);
    FC__CHECK_INPUT(ctx, op, b);
    fc_dtype dt = a->raw.dtype;
    if (fc__pw_same_dtype(ctx, op, a, b) != FC_OK ||
        fc__pw_math_dtype(ctx, op, dt, k != BIN_POW) != FC_OK)
        return NULL;
    int64_t shape[FC_MAX_RANK];
    int rank;
    if (fc__pw_broadcast(ctx, op, a, b, shape, &rank) != FC_OK) return NULL;
    if (k == BIN_DIV && !fc_dtype_is_float(dt) && has_zero(ctx, b)) {
        char d[160];
        fc__fail(ctx, FC_ERR_DIV_ZERO, "%s: integer division by zero (the divisor %s holds a 0)",
                 op, fc__desc(b, d, (int)sizeof d));
        return NULL;
    }
    fc_tensor *out = fc__tensor_new(ctx, op, dt, shape, rank);
    if (!out) return NULL;
    bin_arg arg = {k, dt, fc__rw_stream_output(&out->raw, FC__ISA_AVX2)};
    fc_raw *ops[3] = {&out->raw, &a->raw, &b->raw};
    fc__pw_run(ctx, 3, ops, bin_inner, &arg);
    out = fc__finish(ctx, op, out);
    fc_tensor *in[2] = {a, b};
    if (out && fc__ag_wants(ctx, 2, in)) out = record(ctx, op, k, out, a, b);
    return out;
}

fc_tensor *fc_add(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return binary(ctx, "add", BIN_ADD, a, b);
}
fc_tensor *fc_sub(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return binary(ctx, "sub", BIN_SUB, a, b);
}
fc_tensor *fc_mul(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return binary(ctx, "mul", BIN_MUL, a, b);
}
fc_tensor *fc_div(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return binary(ctx, "div", BIN_DIV, a, b);
}
fc_tensor *fc_pow(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return binary(ctx, "pow", BIN_POW, a, b);
}
fc_tensor *fc_maximum(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return binary(ctx, "maximum", BIN_MAX, a, b);
}
fc_tensor *fc_minimum(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) {
    return binary(ctx, "minimum", BIN_MIN, a, b);
}

/* ---- scalar forms ----------------------------------------------------------------------
 * The scalar becomes a one-element tensor of a's dtype (fc_cast_scalar's
 * rules), which the kernels read as a stride-0 operand; its autograd node
 * is the binary op's, with the scalar as an input that needs no gradient. */

static fc_tensor *scalar_like(fc_ctx *ctx, const char *op, fc_dtype dt, double s) {
    fc_tensor *t = fc__tensor_new(ctx, op, dt, (const int64_t[]){1}, 1);
    if (t) fc__store_f64(dt, fc__raw_base(&t->raw), s);
    return t;
}

static fc_tensor *binary_scalar(fc_ctx *ctx, const char *op, bin_kind k, fc_tensor *a, double s,
                                bool reversed) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, op, a);
    if (fc__pw_math_dtype(ctx, op, a->raw.dtype, k != BIN_POW) != FC_OK) return NULL;
    fc_tensor *st = scalar_like(ctx, op, a->raw.dtype, s);
    if (!st) return NULL;
    fc_tensor *out = reversed ? binary(ctx, op, k, st, a) : binary(ctx, op, k, a, st);
    fc_release(st);
    return out;
}

fc_tensor *fc_add_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return binary_scalar(ctx, "add_scalar", BIN_ADD, a, s, false);
}
fc_tensor *fc_sub_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return binary_scalar(ctx, "sub_scalar", BIN_SUB, a, s, false);
}
fc_tensor *fc_rsub_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return binary_scalar(ctx, "rsub_scalar", BIN_SUB, a, s, true);
}
fc_tensor *fc_mul_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return binary_scalar(ctx, "mul_scalar", BIN_MUL, a, s, false);
}
fc_tensor *fc_div_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return binary_scalar(ctx, "div_scalar", BIN_DIV, a, s, false);
}
fc_tensor *fc_pow_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return binary_scalar(ctx, "pow_scalar", BIN_POW, a, s, false);
}
fc_tensor *fc_maximum_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return binary_scalar(ctx, "maximum_scalar", BIN_MAX, a, s, false);
}
fc_tensor *fc_minimum_scalar(fc_ctx *ctx, fc_tensor *a, double s) {
    return binary_scalar(ctx, "minimum_scalar", BIN_MIN, a, s, false);
}

/* ---- in place ------------------------------------------------------------------------- */

/* What every in-place op requires of dst (and of the operands a, b, NULL
 * allowed): no gradient recording would see the write, so tensors that
 * require grad are refused while grad mode is on (optimizer-style updates
 * run inside fc_no_grad_begin/end); writable storage; no stride-0 axes,
 * whose elements share memory. */
static fc_status inplace_check(const char *op, fc_tensor *dst, const fc_tensor *a,
                               const fc_tensor *b) {
    fc_ctx *ctx = dst->ctx;
    char d[160];
    fc__desc(dst, d, (int)sizeof d);
    bool rg_dst = dst->flags & FC__T_REQUIRES_GRAD;
    bool rg_in = (a && (a->flags & FC__T_REQUIRES_GRAD)) || (b && (b->flags & FC__T_REQUIRES_GRAD));
    if (fc_grad_enabled(ctx) && (rg_dst || rg_in))
        return fc__fail(ctx, FC_ERR_INVALID_ARG,
                        "%s: %s requires grad and in-place ops are not recorded by autograd; use "
                        "the out-of-place op, or write inside fc_no_grad_begin/end",
                        op, rg_dst ? "the destination" : "an operand");
    if (fc__buffer_is_read_only(dst->raw.buf))
        return fc__fail(ctx, FC_ERR_READ_ONLY, "%s: destination %s: storage is read-only", op, d);
    for (int i = 0; i < dst->raw.rank; i++)
        if (dst->raw.strides[i] == 0 && dst->raw.shape[i] > 1)
            return fc__fail(ctx, FC_ERR_UNSUPPORTED_VIEW,
                            "%s: destination %s is a broadcast view (axis %d has stride 0), so "
                            "several of its elements share one memory location",
                            op, d, i);
    return FC_OK;
}

/* The check_finite mode for in-place results (the write already happened). */
static fc_status inplace_finish(const char *op, fc_tensor *dst) {
    if (!dst->ctx->check_finite) return FC_OK;
    int64_t bad = fc__count_non_finite(dst);
    if (!bad) return FC_OK;
    char d[160];
    return fc__fail(dst->ctx, FC_ERR_NON_FINITE, "%s: wrote %lld non-finite value%s into %s", op,
                    (long long)bad, bad == 1 ? "" : "s", fc__desc(dst, d, (int)sizeof d));
}

/* dst = a (op) b, a and b broadcast to exactly dst's shape, after every
 * check; a mutation of dst (a is dst itself for the in-place ops). */
static fc_status write_binary(const char *op, bin_kind k, fc_tensor *dst, fc_tensor *a,
                              fc_tensor *b) {
    fc_ctx *ctx = dst->ctx;
    fc_dtype dt = dst->raw.dtype;
    fc_status st;
    if ((st = fc__pw_same_dtype(ctx, op, a, b)) != FC_OK ||
        (st = fc__pw_same_dtype(ctx, op, dst, a)) != FC_OK ||
        (st = fc__pw_math_dtype(ctx, op, dt, true)) != FC_OK ||
        (st = inplace_check(op, dst, a, b)) != FC_OK)
        return st;
    int64_t shape[FC_MAX_RANK];
    int rank;
    if ((st = fc__pw_broadcast(ctx, op, a, b, shape, &rank)) != FC_OK) return st;
    if (!fc__shape_equal(shape, rank, dst->raw.shape, dst->raw.rank)) {
        char sd[160], so[160];
        return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                        "%s: the operands broadcast to %s, not to the destination %s", op,
                        FC__SHAPE_STR(shape, rank, so), fc__desc(dst, sd, (int)sizeof sd));
    }
    fc__buffer_bump_generation(dst->raw.buf);
    bin_arg arg = {k, dt, fc__rw_stream_output(&dst->raw, FC__ISA_AVX2)};
    fc_raw *ops[3] = {&dst->raw, &a->raw, &b->raw};
    fc__pw_run(ctx, 3, ops, bin_inner, &arg);
    return inplace_finish(op, dst);
}

fc_status fc_add_(fc_tensor *dst, fc_tensor *b) {
    /* a NULL dst has no context; b's records the error (first error wins,
     * so a NULL left by an earlier failure keeps that failure's message) */
    if (!dst) return b ? fc__fail(b->ctx, FC_ERR_NULL_ARG, "add_: dst is NULL") : FC_ERR_NULL_ARG;
    if (!b) return fc__fail(dst->ctx, FC_ERR_NULL_ARG, "add_: input 'b' is NULL");
    return write_binary("add_", BIN_ADD, dst, dst, b);
}

fc_status fc_add_out(fc_tensor *out, fc_tensor *a, fc_tensor *b) {
    if (!out) {
        fc_tensor *any = a ? a : b;
        return any ? fc__fail(any->ctx, FC_ERR_NULL_ARG, "add_out: out is NULL") : FC_ERR_NULL_ARG;
    }
    if (!a || !b)
        return fc__fail(out->ctx, FC_ERR_NULL_ARG, "add_out: input '%s' is NULL", !a ? "a" : "b");
    return write_binary("add_out", BIN_ADD, out, a, b);
}

fc_status fc_mul_scalar_(fc_tensor *dst, double s) {
    if (!dst) return FC_ERR_NULL_ARG;
    fc_status st = fc__pw_math_dtype(dst->ctx, "mul_scalar_", dst->raw.dtype, true);
    if (st != FC_OK) return st;
    fc_tensor *b = scalar_like(dst->ctx, "mul_scalar_", dst->raw.dtype, s);
    if (!b) return fc_ctx_status(dst->ctx);
    st = write_binary("mul_scalar_", BIN_MUL, dst, dst, b);
    fc_release(b);
    return st;
}

fc_status fc_fill_(fc_tensor *dst, double value) {
    if (!dst) return FC_ERR_NULL_ARG;
    fc_status st = fc__pw_scalar_dtype(dst->ctx, "fill_", dst->raw.dtype, true);
    if (st != FC_OK || (st = inplace_check("fill_", dst, NULL, NULL)) != FC_OK) return st;
    unsigned char v[8];
    fc__store_f64(dst->raw.dtype, v, value);
    fc__raw_fill(&dst->raw, v); /* bumps the generation; cannot fail after the checks */
    return inplace_finish("fill_", dst);
}

/* ---- kernels for the backward rules ------------------------------------------------------
 * Plain strided loops: they run once per backward, in the gradient dtype
 * (f32 or f64), over operands the rules already converted. */

typedef struct grad_arg {
    fc_dtype dt;
    int which; /* pow: 0 = d/da, 1 = d/db; minmax: 0 = maximum, 1 = minimum */
} grad_arg;

#define AT(T, p, s, i) (*(T *)((p) + (i) * (s)))

#define POW_GRAD(T, POW, LOG)                                                                      \
    for (int64_t i = 0; i < n; i++) {                                                              \
        T g = AT(T, p[1], s[1], i), x = AT(T, p[2], s[2], i), y = AT(T, p[3], s[3], i);            \
        T r;                                                                                       \
        if (ga->which == 0)                                                                        \
            r = y == 0 ? 0 : g * y * POW(x, y - 1);                                                \
        else                                                                                       \
            r = (x == 0 && y >= 0) ? 0 : g * POW(x, y) * LOG(x);                                   \
        AT(T, p[0], s[0], i) = r;                                                                  \
    }

static void pow_grad_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const grad_arg *ga = arg;
    if (ga->dt == FC_F64) {
        POW_GRAD(double, pow, log)
    } else {
        POW_GRAD(float, powf, logf)
    }
}

#define MINMAX_WEIGHT(T)                                                                           \
    for (int64_t i = 0; i < n; i++) {                                                              \
        T x = AT(T, p[1], s[1], i), y = AT(T, p[2], s[2], i);                                      \
        bool wins = ga->which ? x < y : x > y;                                                     \
        AT(T, p[0], s[0], i) = (wins || x != x) ? (T)1 : x == y ? (T)0.5 : (T)0;                   \
    }

static void minmax_weight_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const grad_arg *ga = arg;
    if (ga->dt == FC_F64) {
        MINMAX_WEIGHT(double)
    } else {
        MINMAX_WEIGHT(float)
    }
}

/* A new tensor of the broadcast shape of the inputs, filled by fn. */
static fc_tensor *grad_kernel(fc_ctx *ctx, const char *op, int nin, fc_tensor *const *in,
                              fc__inner_fn fn, grad_arg *arg) {
    int64_t shape[FC_MAX_RANK];
    int rank;
    if (fc__pw_broadcast_n(ctx, op, nin, in, shape, &rank) != FC_OK) return NULL;
    fc_tensor *out = fc__tensor_new(ctx, op, arg->dt, shape, rank);
    if (!out) return NULL;
    fc_raw *ops[FC__ITER_MAX] = {&out->raw};
    for (int k = 0; k < nin; k++)
        ops[k + 1] = &in[k]->raw;
    fc__pw_run(ctx, nin + 1, ops, fn, arg);
    return out;
}

fc_tensor *fc__mul_raw(fc_ctx *ctx, fc_tensor *g, const fc_raw *v) {
    int64_t shape[FC_MAX_RANK];
    int rank;
    if (fc__pw_broadcast_raw(ctx, "mul", &g->raw, v, shape, &rank) != FC_OK) return NULL;
    fc_tensor *out = fc__tensor_new(ctx, "mul", g->raw.dtype, shape, rank);
    if (!out) return NULL;
    bin_arg arg = {BIN_MUL, g->raw.dtype, false};
    fc_raw *ops[3] = {&out->raw, &g->raw, (fc_raw *)v};
    fc__pw_run(ctx, 3, ops, bin_inner, &arg);
    return fc__finish(ctx, "mul", out);
}

fc_tensor *fc__pow_grad_a(fc_ctx *ctx, fc_tensor *g, fc_tensor *a, fc_tensor *b) {
    grad_arg arg = {g->raw.dtype, 0};
    return grad_kernel(ctx, "backward of pow", 3, (fc_tensor *[]){g, a, b}, pow_grad_inner, &arg);
}

fc_tensor *fc__pow_grad_b(fc_ctx *ctx, fc_tensor *g, fc_tensor *a, fc_tensor *b) {
    grad_arg arg = {g->raw.dtype, 1};
    return grad_kernel(ctx, "backward of pow", 3, (fc_tensor *[]){g, a, b}, pow_grad_inner, &arg);
}

fc_tensor *fc__minmax_weight(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, bool is_min) {
    grad_arg arg = {a->raw.dtype, is_min};
    return grad_kernel(ctx, is_min ? "backward of minimum" : "backward of maximum", 2,
                       (fc_tensor *[]){a, b}, minmax_weight_inner, &arg);
}
