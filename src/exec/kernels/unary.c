/* unary.c - the unary family's entry points: validation, layout, dispatch
 * and autograd recording. The formulas live in unary_math.c; the backward
 * rule (one for the whole family) in src/ag/grad_unary.c.
 *
 *   x [..] -> y [..], same shape and dtype
 *
 * Float dtypes compute in f32 (f64 for f64): a contiguous f32 or f64 run
 * goes straight to the math kernel; f16, bf16 and strided runs go through
 * stack chunks. neg, abs, sign and square also take signed integers, with
 * wrapping (abs and neg of INT_MIN give INT_MIN). */
#include "fucina.h"
#include "ag/grad_pointwise.h"
#include "exec/kernels/pointwise.h"
#include "fucina/ops.h"

static const struct {
    const char *name;
    bool ints; /* also defined on signed integers */
    fc__unary_saves saves;
} info[] = {
    [FC__UN_NEG] = {"neg", true, FC__SAVES_NONE},
    [FC__UN_ABS] = {"abs", true, FC__SAVES_INPUT},
    [FC__UN_SIGN] = {"sign", true, FC__SAVES_NONE},
    [FC__UN_SQUARE] = {"square", true, FC__SAVES_INPUT},
    [FC__UN_SQRT] = {"sqrt", false, FC__SAVES_OUTPUT},
    [FC__UN_RSQRT] = {"rsqrt", false, FC__SAVES_OUTPUT},
    [FC__UN_RECIPROCAL] = {"reciprocal", false, FC__SAVES_OUTPUT},
    [FC__UN_EXP] = {"exp", false, FC__SAVES_OUTPUT},
    [FC__UN_LOG] = {"log", false, FC__SAVES_INPUT},
    [FC__UN_LOG1P] = {"log1p", false, FC__SAVES_INPUT},
    [FC__UN_EXPM1] = {"expm1", false, FC__SAVES_OUTPUT},
    [FC__UN_SIN] = {"sin", false, FC__SAVES_INPUT},
    [FC__UN_COS] = {"cos", false, FC__SAVES_INPUT},
    [FC__UN_TANH] = {"tanh", false, FC__SAVES_OUTPUT},
    [FC__UN_SIGMOID] = {"sigmoid", false, FC__SAVES_OUTPUT},
    [FC__UN_RELU] = {"relu", false, FC__SAVES_OUTPUT},
    [FC__UN_LEAKY_RELU] = {"leaky_relu", false, FC__SAVES_INPUT},
    [FC__UN_GELU] = {"gelu", false, FC__SAVES_INPUT},
    [FC__UN_GELU_TANH] = {"gelu", false, FC__SAVES_INPUT},
    [FC__UN_SILU] = {"silu", false, FC__SAVES_INPUT},
    [FC__UN_SOFTPLUS] = {"softplus", false, FC__SAVES_INPUT},
    [FC__UN_CLAMP] = {"clamp", false, FC__SAVES_INPUT},
};
_Static_assert(sizeof info / sizeof info[0] == FC__UN_COUNT, "one info row per unary kind");

fc__unary_saves fc__unary_saves_of(fc__unary_kind k) { return info[k].saves; }

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

fc_tensor *fc__unary_grad(fc_ctx *ctx, fc__unary_kind k, const double *prm, fc_tensor *g,
                          fc_tensor *v) {
    fc_tensor *out = fc__tensor_new(ctx, info[k].name, g->raw.dtype, g->raw.shape, g->raw.rank);
    if (!out) return NULL;
    un_arg u = {k, v->raw.dtype, prm};
    fc_raw *ops[3] = {&out->raw, &g->raw, &v->raw};
    fc__pw_run(ctx, 3, ops, un_grad_inner, &u);
    return out;
}

/* ---- the ops --------------------------------------------------------------------------- */

static fc_tensor *unary(fc_ctx *ctx, fc__unary_kind k, fc_tensor *x, double p0, double p1) {
    const char *op = info[k].name;
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, op, x);
    fc_dtype dt = x->raw.dtype;
    if (!fc_dtype_is_float(dt) && !(info[k].ints && fc_dtype_is_signed_int(dt))) {
        fc__fail(ctx, FC_ERR_DTYPE,
                 "%s: dtype %s is not supported (float dtypes%s only; cast with fc_to)", op,
                 fc_dtype_name(dt), info[k].ints ? " and signed integers" : "");
        return NULL;
    }
    fc_tensor *out = fc__tensor_new(ctx, op, dt, x->raw.shape, x->raw.rank);
    if (!out) return NULL;
    double prm[2] = {p0, p1};
    un_arg u = {k, dt, prm};
    fc_raw *ops[2] = {&out->raw, &x->raw};
    fc__pw_run(ctx, 2, ops, un_inner, &u);
    out = fc__finish(ctx, op, out);
    if (!out || !fc__ag_wants(ctx, 1, &x)) return out;

    fc_node *nd = fc__ag_record(ctx, op, fc__grad_unary, out, 1, &x);
    fc_status st = nd ? FC_OK : FC_ERR_OOM;
    if (nd) {
        nd->i[0] = k;
        nd->f[0] = p0;
        nd->f[1] = p1;
        if (info[k].saves == FC__SAVES_INPUT) st = fc__ag_save(ctx, nd, "input", x);
        if (info[k].saves == FC__SAVES_OUTPUT) st = fc__ag_save(ctx, nd, "output", out);
    }
    if (st != FC_OK) {
        fc_release(out);
        return NULL;
    }
    return out;
}

fc_tensor *fc_neg(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_NEG, x, 0, 0); }
fc_tensor *fc_abs(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_ABS, x, 0, 0); }
fc_tensor *fc_sign(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_SIGN, x, 0, 0); }
fc_tensor *fc_square(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_SQUARE, x, 0, 0); }
fc_tensor *fc_sqrt(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_SQRT, x, 0, 0); }
fc_tensor *fc_rsqrt(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_RSQRT, x, 0, 0); }
fc_tensor *fc_reciprocal(fc_ctx *ctx, fc_tensor *x) {
    return unary(ctx, FC__UN_RECIPROCAL, x, 0, 0);
}
fc_tensor *fc_exp(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_EXP, x, 0, 0); }
fc_tensor *fc_log(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_LOG, x, 0, 0); }
fc_tensor *fc_log1p(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_LOG1P, x, 0, 0); }
fc_tensor *fc_expm1(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_EXPM1, x, 0, 0); }
fc_tensor *fc_sin(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_SIN, x, 0, 0); }
fc_tensor *fc_cos(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_COS, x, 0, 0); }
fc_tensor *fc_tanh(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_TANH, x, 0, 0); }
fc_tensor *fc_sigmoid(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_SIGMOID, x, 0, 0); }
fc_tensor *fc_relu(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_RELU, x, 0, 0); }
fc_tensor *fc_leaky_relu(fc_ctx *ctx, fc_tensor *x, double slope) {
    return unary(ctx, FC__UN_LEAKY_RELU, x, slope, 0);
}
fc_tensor *fc_gelu(fc_ctx *ctx, fc_tensor *x, bool tanh_approx) {
    return unary(ctx, tanh_approx ? FC__UN_GELU_TANH : FC__UN_GELU, x, 0, 0);
}
fc_tensor *fc_silu(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_SILU, x, 0, 0); }
fc_tensor *fc_softplus(fc_ctx *ctx, fc_tensor *x) { return unary(ctx, FC__UN_SOFTPLUS, x, 0, 0); }

fc_tensor *fc_clamp(fc_ctx *ctx, fc_tensor *x, double lo, double hi) {
    FC__CHECK_CTX(ctx);
    FC__CHECK_INPUT(ctx, "clamp", x);
    if (lo != lo || hi != hi || lo > hi) {
        fc__fail(ctx, FC_ERR_INVALID_ARG,
                 "clamp: bounds [%g, %g] are not an interval (need lo <= "
                 "hi, neither NaN)",
                 lo, hi);
        return NULL;
    }
    return unary(ctx, FC__UN_CLAMP, x, lo, hi);
}
