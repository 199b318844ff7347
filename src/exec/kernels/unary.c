/* SPDX-License-Identifier: MIT */
/* unary.c - the unary family's layout and dispatch (unary.h): integer
 * loops, and the f32/f64 drivers that hand contiguous runs straight to the
 * formulas of unary_math.c and gather f16, bf16 and strided runs through
 * stack chunks; forward and derivative alike. The ops (validation,
 * recording, the rule) are in src/ops/unary.c.
 *
 *   x [..] -> y [..], same shape and dtype
 *   g [..], v [..] -> gin [..], g's dtype (f32 or f64)
 *
 * Float dtypes compute in f32 (f64 for f64). neg, abs, sign and square
 * also take signed integers, with wrapping (abs and neg of INT_MIN give
 * INT_MIN). */
#include "exec/kernels/unary.h"
#include "exec/kernels/pointwise.h"

/* What each kind's derivative formula in unary_math.c reads as v. */
static const fc__unary_saves saves[] = {
    [FC__UN_NEG] = FC__SAVES_NONE,          [FC__UN_ABS] = FC__SAVES_INPUT,
    [FC__UN_SIGN] = FC__SAVES_NONE,         [FC__UN_SQUARE] = FC__SAVES_INPUT,
    [FC__UN_SQRT] = FC__SAVES_OUTPUT,       [FC__UN_RSQRT] = FC__SAVES_OUTPUT,
    [FC__UN_RECIPROCAL] = FC__SAVES_OUTPUT, [FC__UN_EXP] = FC__SAVES_OUTPUT,
    [FC__UN_LOG] = FC__SAVES_INPUT,         [FC__UN_LOG1P] = FC__SAVES_INPUT,
    [FC__UN_EXPM1] = FC__SAVES_OUTPUT,      [FC__UN_SIN] = FC__SAVES_INPUT,
    [FC__UN_COS] = FC__SAVES_INPUT,         [FC__UN_TANH] = FC__SAVES_OUTPUT,
    [FC__UN_SIGMOID] = FC__SAVES_OUTPUT,    [FC__UN_RELU] = FC__SAVES_OUTPUT,
    [FC__UN_LEAKY_RELU] = FC__SAVES_INPUT,  [FC__UN_GELU] = FC__SAVES_INPUT,
    [FC__UN_GELU_TANH] = FC__SAVES_INPUT,   [FC__UN_SILU] = FC__SAVES_INPUT,
    [FC__UN_SOFTPLUS] = FC__SAVES_INPUT,    [FC__UN_CLAMP] = FC__SAVES_INPUT,
};
_Static_assert(sizeof saves / sizeof saves[0] == FC__UN_COUNT, "one saves entry per unary kind");

fc__unary_saves fc__unary_saves_of(fc__unary_kind k) { return saves[k]; }

/* ---- integer kernels (strided; integer unary math is never hot) ------------------------ */

#define INT_UNARY(NAME, T, U)                                                                      \
    static void NAME(fc__unary_kind k, char **p, const int64_t *s, int64_t n) {                    \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T x = *(const T *)(p[1] + i * s[1]), r;                                                \
            switch (k) {                                                                           \
            case FC__UN_NEG:                                                                       \
                r = (T)((U)0 - (U)x);                                                              \
                break;                                                                             \
            case FC__UN_ABS:                                                                       \
                r = x < 0 ? (T)((U)0 - (U)x) : x;                                                  \
                break;                                                                             \
            case FC__UN_SIGN:                                                                      \
                r = (T)((x > 0) - (x < 0));                                                        \
                break;                                                                             \
            default:                                                                               \
                r = (T)((U)x * (U)x);                                                              \
                break; /* square: the only other integer kind */                                   \
            }                                                                                      \
            *(T *)(p[0] + i * s[0]) = r;                                                           \
        }                                                                                          \
    }
INT_UNARY(un_i8, int8_t, uint32_t)
INT_UNARY(un_i16, int16_t, uint32_t)
INT_UNARY(un_i32, int32_t, uint32_t)
INT_UNARY(un_i64, int64_t, uint64_t)

/* ---- float dispatch ---------------------------------------------------------------------- */

typedef struct un_arg {
    fc__unary_kind k;
    fc_dtype dt; /* the input's (forward) or the saved value's (backward) */
    const double *prm;
} un_arg;

static void f64_gather(const char *p, int64_t s, int64_t n, double *out) {
    for (int64_t i = 0; i < n; i++)
        out[i] = *(const double *)(p + i * s);
}
static void f64_scatter(char *p, int64_t s, int64_t n, const double *in) {
    for (int64_t i = 0; i < n; i++)
        *(double *)(p + i * s) = in[i];
}

/* p[0] = y, p[1] = x */
static void un_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const un_arg *u = arg;
    switch (u->dt) {
    case FC_I8:
        un_i8(u->k, p, s, n);
        return;
    case FC_I16:
        un_i16(u->k, p, s, n);
        return;
    case FC_I32:
        un_i32(u->k, p, s, n);
        return;
    case FC_I64:
        un_i64(u->k, p, s, n);
        return;
    case FC_F64:
        if (s[0] == 8 && s[1] == 8) {
            fc__unary_f64(u->k, u->prm, (const double *)p[1], (double *)p[0], n);
            return;
        }
        for (int64_t c = 0; c < n; c += FC__PW_CHUNK) {
            int64_t m = n - c < FC__PW_CHUNK ? n - c : FC__PW_CHUNK;
            double x[FC__PW_CHUNK], y[FC__PW_CHUNK];
            f64_gather(p[1] + c * s[1], s[1], m, x);
            fc__unary_f64(u->k, u->prm, x, y, m);
            f64_scatter(p[0] + c * s[0], s[0], m, y);
        }
        return;
    default: /* f32, f16, bf16 */
        if (u->dt == FC_F32 && s[0] == 4 && s[1] == 4) {
            fc__unary_f32(u->k, u->prm, (const float *)p[1], (float *)p[0], n);
            return;
        }
        for (int64_t c = 0; c < n; c += FC__PW_CHUNK) {
            int64_t m = n - c < FC__PW_CHUNK ? n - c : FC__PW_CHUNK;
            float x[FC__PW_CHUNK], y[FC__PW_CHUNK];
            fc__pw_load_f32(u->dt, p[1] + c * s[1], s[1], m, x);
            fc__unary_f32(u->k, u->prm, x, y, m);
            fc__pw_store_f32(u->dt, p[0] + c * s[0], s[0], m, y);
        }
    }
}

/* p[0] = gin, p[1] = g (f32 or f64, like gin), p[2] = v (any float dtype
 * when gin is f32; f64 when gin is f64) */
static void un_grad_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const un_arg *u = arg;
    if (u->dt == FC_F64) {
        if (s[0] == 8 && s[1] == 8 && s[2] == 8) {
            fc__unary_grad_f64(u->k, u->prm, (const double *)p[1], (const double *)p[2],
                               (double *)p[0], n);
            return;
        }
        for (int64_t c = 0; c < n; c += FC__PW_CHUNK) {
            int64_t m = n - c < FC__PW_CHUNK ? n - c : FC__PW_CHUNK;
            double g[FC__PW_CHUNK], v[FC__PW_CHUNK], r[FC__PW_CHUNK];
            f64_gather(p[1] + c * s[1], s[1], m, g);
            f64_gather(p[2] + c * s[2], s[2], m, v);
            fc__unary_grad_f64(u->k, u->prm, g, v, r, m);
            f64_scatter(p[0] + c * s[0], s[0], m, r);
        }
        return;
    }
    if (u->dt == FC_F32 && s[0] == 4 && s[1] == 4 && s[2] == 4) {
        fc__unary_grad_f32(u->k, u->prm, (const float *)p[1], (const float *)p[2], (float *)p[0],
                           n);
        return;
    }
    for (int64_t c = 0; c < n; c += FC__PW_CHUNK) {
        int64_t m = n - c < FC__PW_CHUNK ? n - c : FC__PW_CHUNK;
        float g[FC__PW_CHUNK], v[FC__PW_CHUNK], r[FC__PW_CHUNK];
        fc__pw_load_f32(FC_F32, p[1] + c * s[1], s[1], m, g);
        fc__pw_load_f32(u->dt, p[2] + c * s[2], s[2], m, v);
        fc__unary_grad_f32(u->k, u->prm, g, v, r, m);
        fc__pw_store_f32(FC_F32, p[0] + c * s[0], s[0], m, r);
    }
}

void fc__unary_run(fc_ctx *ctx, fc__unary_kind k, const double *p, fc_raw *y, const fc_raw *x) {
    un_arg u = {k, x->dtype, p};
    fc_raw *ops[2] = {y, (fc_raw *)x};
    fc__pw_run(ctx, 2, ops, un_inner, &u);
}

void fc__unary_grad_run(fc_ctx *ctx, fc__unary_kind k, const double *p, fc_raw *gin,
                        const fc_raw *g, const fc_raw *v) {
    un_arg u = {k, v->dtype, p};
    fc_raw *ops[3] = {gin, (fc_raw *)g, (fc_raw *)v};
    fc__pw_run(ctx, 3, ops, un_grad_inner, &u);
}
