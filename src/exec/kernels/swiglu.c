/* swiglu.c - SwiGLU forward and derivatives over the pointwise engine
 * (pointwise.h): one pass over a and b instead of silu's output written
 * and read back by a separate multiply. Formulas in swiglu.h. Runs come
 * from fc__pw_run (contiguous fast path or the strided iterator); f32 and
 * f64 runs compute in place, anything else (f16, bf16, and saved values
 * of another dtype than the gradient) is widened in stack chunks. */
#include <math.h>

#include "exec/kernels/pointwise.h"
#include "exec/kernels/swiglu.h"
#include "exec/kernels/unary_simd.h"

typedef struct sg_arg {
    fc_dtype out_dt, in_dt[3]; /* operand dtypes after the output */
    bool grad, wrt_a;
} sg_arg;

/* One chunk in f32 / f64: the forward reads x = a, y = b; a gradient reads
 * g, x = a, y = b. */
#define SG_CHUNK(NAME, T, EXP)                                                                     \
    static void NAME(const sg_arg *s, T *o, const T *g, const T *x, const T *y, int64_t n) {       \
        const T one = 1;                                                                           \
        if (!s->grad) {                                                                            \
            for (int64_t i = 0; i < n; i++)                                                        \
                o[i] = x[i] / (one + EXP(-x[i])) * y[i];                                           \
        } else if (s->wrt_a) {                                                                     \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T sg = one / (one + EXP(-x[i]));                                                   \
                o[i] = g[i] * y[i] * sg * (one + x[i] * (one - sg));                               \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++)                                                        \
                o[i] = g[i] * (x[i] / (one + EXP(-x[i])));                                         \
        }                                                                                          \
    }
SG_CHUNK(sg_f32_libm, float, expf)
SG_CHUNK(sg_f64, double, exp)

/* f32: sigmoid(a) from the unary family's vectorized kernel (the one
 * fc_sigmoid and fc_silu use, within its accuracy contract), the rest
 * plain arithmetic the compiler vectorizes; scalar expf calls made this
 * op several times slower than silu and mul composed. */
static void sg_f32(const sg_arg *s, float *o, const float *g, const float *x, const float *y,
                   int64_t n) {
    float sg[FC__PW_CHUNK];
    if (n > FC__PW_CHUNK || !fc__usimd_forward(fc__isa_level(), FC__UN_SIGMOID, x, sg, n)) {
        sg_f32_libm(s, o, g, x, y, n);
        return;
    }
    if (!s->grad) {
        for (int64_t i = 0; i < n; i++)
            o[i] = x[i] * sg[i] * y[i];
    } else if (s->wrt_a) {
        for (int64_t i = 0; i < n; i++)
            o[i] = g[i] * y[i] * sg[i] * (1.0f + x[i] * (1.0f - sg[i]));
    } else {
        for (int64_t i = 0; i < n; i++)
            o[i] = g[i] * (x[i] * sg[i]);
    }
}

/* ptrs[0] = out; forward: a, b; gradient: g, a, b. */
static void sg_inner(void *arg, char **p, const int64_t *st, int64_t n) {
    const sg_arg *s = arg;
    int nin = s->grad ? 3 : 2;
    if (s->out_dt == FC_F64) {
        double buf[4][FC__PW_CHUNK];
        for (int64_t i0 = 0; i0 < n; i0 += FC__PW_CHUNK) {
            int64_t len = n - i0 < FC__PW_CHUNK ? n - i0 : FC__PW_CHUNK;
            for (int k = 0; k < nin; k++)
                fc__pw_load_f64(s->in_dt[k], p[k + 1] + i0 * st[k + 1], st[k + 1], len, buf[k]);
            if (s->grad)
                sg_f64(s, buf[3], buf[0], buf[1], buf[2], len);
            else
                sg_f64(s, buf[3], NULL, buf[0], buf[1], len);
            char *o = p[0] + i0 * st[0];
            for (int64_t i = 0; i < len; i++)
                *(double *)(o + i * st[0]) = buf[3][i];
        }
        return;
    }
    float buf[4][FC__PW_CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += FC__PW_CHUNK) {
        int64_t len = n - i0 < FC__PW_CHUNK ? n - i0 : FC__PW_CHUNK;
        for (int k = 0; k < nin; k++)
            fc__pw_load_f32(s->in_dt[k], p[k + 1] + i0 * st[k + 1], st[k + 1], len, buf[k]);
        if (s->grad)
            sg_f32(s, buf[3], buf[0], buf[1], buf[2], len);
        else
            sg_f32(s, buf[3], NULL, buf[0], buf[1], len);
        fc__pw_store_f32(s->out_dt, p[0] + i0 * st[0], st[0], len, buf[3]);
    }
}

void fc__swiglu_run(fc_ctx *ctx, fc_raw *out, const fc_raw *a, const fc_raw *b) {
    sg_arg s = {out->dtype, {a->dtype, b->dtype, FC_F32}, false, false};
    fc_raw *ops[3] = {out, (fc_raw *)a, (fc_raw *)b};
    fc__pw_run(ctx, 3, ops, sg_inner, &s);
}

void fc__swiglu_grad_run(fc_ctx *ctx, bool wrt_a, fc_raw *gin, const fc_raw *g, const fc_raw *a,
                         const fc_raw *b) {
    sg_arg s = {gin->dtype, {g->dtype, a->dtype, b->dtype}, true, wrt_a};
    fc_raw *ops[4] = {gin, (fc_raw *)g, (fc_raw *)a, (fc_raw *)b};
    fc__pw_run(ctx, 4, ops, sg_inner, &s);
}
