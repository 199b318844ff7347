/* SPDX-License-Identifier: MIT */
/* binary.c - the broadcasting binary arithmetic kernels (binary.h): add,
 * sub, mul, div, pow, maximum, minimum in every dtype they take, the
 * integer zero-divisor scan, and the elementwise kernels the backward rules
 * of mul, pow and maximum/minimum read. The ops over them (validation,
 * recording, the rules) are in src/ops/binary.c.
 *
 *   a [..A], b [..B] -> out [broadcast(A, B)], out[i] = a[i] (op) b[i]
 *
 * Dtypes: see binary.h. A large contiguous f32 output of add/sub/mul/div is
 * written around the cache with streaming stores (rowwise.h). */
#include <math.h>
#include <stdatomic.h>

#include "exec/kernels/binary.h"
#include "exec/kernels/pointwise.h"
#include "exec/kernels/rowwise.h"

/* ---- kernels ------------------------------------------------------------------------ */

/* Float kernels. maximum/minimum pick x when it wins, ties, or is NaN, and
 * y otherwise, so a NaN in either operand propagates. */
#define FLOAT_BINARY(NAME, T, POW)                                                                 \
    static void NAME(fc__binary_kind k, char **p, const int64_t *s, int64_t n) {                   \
        T *o = (T *)p[0];                                                                          \
        const T *a = (const T *)p[1], *b = (const T *)p[2];                                        \
        int64_t so = s[0] / (int64_t)sizeof(T), sa = s[1] / (int64_t)sizeof(T),                    \
                sb = s[2] / (int64_t)sizeof(T);                                                    \
        switch (k) {                                                                               \
        case FC__BIN_ADD:                                                                          \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x + y);                                  \
            break;                                                                                 \
        case FC__BIN_SUB:                                                                          \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x - y);                                  \
            break;                                                                                 \
        case FC__BIN_MUL:                                                                          \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x *y);                                   \
            break;                                                                                 \
        case FC__BIN_DIV:                                                                          \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x / y);                                  \
            break;                                                                                 \
        case FC__BIN_POW:                                                                          \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, POW(x, y));                              \
            break;                                                                                 \
        case FC__BIN_MAX:                                                                          \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, (x >= y || x != x) ? x : y);             \
            break;                                                                                 \
        case FC__BIN_MIN:                                                                          \
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
    static void NAME(fc__binary_kind k, char **p, const int64_t *s, int64_t n) {                   \
        T *o = (T *)p[0];                                                                          \
        const T *a = (const T *)p[1], *b = (const T *)p[2];                                        \
        int64_t so = s[0] / (int64_t)sizeof(T), sa = s[1] / (int64_t)sizeof(T),                    \
                sb = s[2] / (int64_t)sizeof(T);                                                    \
        switch (k) {                                                                               \
        case FC__BIN_ADD:                                                                          \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, (T)((U)x + (U)y));                       \
            break;                                                                                 \
        case FC__BIN_SUB:                                                                          \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, (T)((U)x - (U)y));                       \
            break;                                                                                 \
        case FC__BIN_MUL:                                                                          \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, (T)((U)x * (U)y));                       \
            break;                                                                                 \
        case FC__BIN_DIV:                                                                          \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y,                                          \
                         (SIGNED && y == (T)-1) ? (T)((U)0 - (U)x) : (T)(x / y));                  \
            break;                                                                                 \
        case FC__BIN_MAX:                                                                          \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x > y ? x : y);                          \
            break;                                                                                 \
        case FC__BIN_MIN:                                                                          \
            FC__PW_LOOP2(T, o, a, b, so, sa, sb, n, x, y, x < y ? x : y);                          \
            break;                                                                                 \
        case FC__BIN_POW:                                                                          \
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
static void bin_half(fc__binary_kind k, fc_dtype dt, char **p, const int64_t *s, int64_t n) {
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
    fc__binary_kind kind;
    fc_dtype dt;
    bool stream; /* large f32 output: written around the cache (rowwise.h) */
} bin_arg;

static void bin_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const bin_arg *ba = arg;
#ifdef FC__RW_X86
    static const char stream_op[] = {
        [FC__BIN_ADD] = '+', [FC__BIN_SUB] = '-', [FC__BIN_MUL] = '*', [FC__BIN_DIV] = '/',
        [FC__BIN_POW] = 0,   [FC__BIN_MAX] = 0,   [FC__BIN_MIN] = 0};
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

bool fc__binary_has_zero(fc_ctx *ctx, const fc_raw *t) {
    zero_arg z = {fc_dtype_size(t->dtype), false};
    fc_raw *ops[1] = {(fc_raw *)t};
    fc__pw_run(ctx, 1, ops, zero_inner, &z);
    return atomic_load(&z.found);
}

/* ---- running ----------------------------------------------------------------------- */

void fc__binary_run(fc_ctx *ctx, fc__binary_kind k, fc_raw *out, const fc_raw *a, const fc_raw *b) {
    bin_arg arg = {k, out->dtype, fc__rw_stream_output(out)};
    fc_raw *ops[3] = {out, (fc_raw *)a, (fc_raw *)b};
    fc__pw_run(ctx, 3, ops, bin_inner, &arg);
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

fc_tensor *fc__binary_mul_raw(fc_ctx *ctx, fc_tensor *g, const fc_raw *v) {
    int64_t shape[FC_MAX_RANK];
    int rank;
    if (fc__pw_broadcast_raw(ctx, "mul", &g->raw, v, shape, &rank) != FC_OK) return NULL;
    fc_tensor *out = fc__tensor_new(ctx, "mul", g->raw.dtype, shape, rank);
    if (!out) return NULL;
    bin_arg arg = {FC__BIN_MUL, g->raw.dtype, false};
    fc_raw *ops[3] = {&out->raw, &g->raw, (fc_raw *)v};
    fc__pw_run(ctx, 3, ops, bin_inner, &arg);
    return fc__finish(ctx, "mul", out);
}

fc_tensor *fc__binary_pow_grad_a(fc_ctx *ctx, fc_tensor *g, fc_tensor *a, fc_tensor *b) {
    grad_arg arg = {g->raw.dtype, 0};
    return grad_kernel(ctx, "backward of pow", 3, (fc_tensor *[]){g, a, b}, pow_grad_inner, &arg);
}

fc_tensor *fc__binary_pow_grad_b(fc_ctx *ctx, fc_tensor *g, fc_tensor *a, fc_tensor *b) {
    grad_arg arg = {g->raw.dtype, 1};
    return grad_kernel(ctx, "backward of pow", 3, (fc_tensor *[]){g, a, b}, pow_grad_inner, &arg);
}

fc_tensor *fc__binary_minmax_weight(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, bool is_min) {
    grad_arg arg = {a->raw.dtype, is_min};
    return grad_kernel(ctx, is_min ? "backward of minimum" : "backward of maximum", 2,
                       (fc_tensor *[]){a, b}, minmax_weight_inner, &arg);
}
