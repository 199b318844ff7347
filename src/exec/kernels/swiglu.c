/* SPDX-License-Identifier: MIT */
/* swiglu.c - SwiGLU forward and derivatives over the pointwise engine
 * (pointwise.h): one pass over a and b instead of silu's output written
 * and read back by a separate multiply. Formulas in swiglu.h. Runs come
 * from fc__pw_run (contiguous fast path or the strided iterator); dense f32
 * operands are read and written where they lie, the others (strided runs,
 * f64, f16, bf16, saved values of another dtype than the gradient) go
 * through stack chunks. With both gradients wanted, one pass writes da and
 * db (five operands). */
#include <math.h>

#include "exec/kernels/pointwise.h"
#include "exec/kernels/swiglu.h"
#include "exec/kernels/unary_simd.h"

typedef struct sg_arg {
    fc_dtype out_dt, in_dt[3]; /* input dtypes: a, b (forward) or g, a, b */
    bool grad, wrt_a;
    bool both; /* a gradient run writing da and db together */
} sg_arg;

/* One chunk in f32 / f64: the forward reads x = a, y = b; a gradient reads
 * g, x = a, y = b. o[0] gets the forward, da (wrt_a or both) or db; o[1]
 * gets db when both. */
#define SG_CHUNK(NAME, T, EXP)                                                                     \
    static void NAME(const sg_arg *s, T *const *o, const T *g, const T *x, const T *y,             \
                     int64_t n) {                                                                  \
        const T one = 1;                                                                           \
        if (!s->grad) {                                                                            \
            for (int64_t i = 0; i < n; i++)                                                        \
                o[0][i] = x[i] / (one + EXP(-x[i])) * y[i];                                        \
            return;                                                                                \
        }                                                                                          \
        if (s->wrt_a || s->both) {                                                                 \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T sg = one / (one + EXP(-x[i]));                                                   \
                o[0][i] = g[i] * y[i] * sg * (one + x[i] * (one - sg));                            \
            }                                                                                      \
        }                                                                                          \
        if (!s->wrt_a || s->both) {                                                                \
            T *db = o[s->both ? 1 : 0];                                                            \
            for (int64_t i = 0; i < n; i++)                                                        \
                db[i] = g[i] * (x[i] / (one + EXP(-x[i])));                                        \
        }                                                                                          \
    }
SG_CHUNK(sg_f32_libm, float, expf)
SG_CHUNK(sg_f64, double, exp)

/* f32: sigmoid(a) from the unary family's vectorized kernel (the one
 * fc_sigmoid and fc_silu use, within its accuracy contract), the rest
 * plain arithmetic the compiler vectorizes; scalar expf calls made this
 * op several times slower than silu and mul composed. Both gradients
 * share one sigmoid pass. */
static void sg_f32(const sg_arg *s, float *const *o, const float *g, const float *x, const float *y,
                   int64_t n) {
    float sg[FC__PW_CHUNK];
    if (n > FC__PW_CHUNK || !fc__usimd_forward(fc__isa_level(), FC__UN_SIGMOID, x, sg, n)) {
        sg_f32_libm(s, o, g, x, y, n);
        return;
    }
    float *o0 = o[0];
    if (!s->grad) {
        for (int64_t i = 0; i < n; i++)
            o0[i] = x[i] * sg[i] * y[i];
    } else if (s->both) {
        float *o1 = o[1];
        for (int64_t i = 0; i < n; i++) {
            o0[i] = g[i] * y[i] * sg[i] * (1.0f + x[i] * (1.0f - sg[i]));
            o1[i] = g[i] * (x[i] * sg[i]);
        }
    } else if (s->wrt_a) {
        for (int64_t i = 0; i < n; i++)
            o0[i] = g[i] * y[i] * sg[i] * (1.0f + x[i] * (1.0f - sg[i]));
    } else {
        for (int64_t i = 0; i < n; i++)
            o0[i] = g[i] * (x[i] * sg[i]);
    }
}

/* ptrs[0] = out (and ptrs[1] = db when both); then forward: a, b;
 * gradient: g, a, b. Dense f32 operands are used where they lie; the
 * others go through stack chunks (widened on load, rounded on store). */
static void sg_inner(void *arg, char **p, const int64_t *st, int64_t n) {
    const sg_arg *s = arg;
    int nin = s->grad ? 3 : 2, nout = s->both ? 2 : 1;
    if (s->out_dt == FC_F64) {
        double buf[3][FC__PW_CHUNK], obuf[2][FC__PW_CHUNK];
        double *o[2] = {obuf[0], obuf[1]};
        for (int64_t i0 = 0; i0 < n; i0 += FC__PW_CHUNK) {
            int64_t len = n - i0 < FC__PW_CHUNK ? n - i0 : FC__PW_CHUNK;
            for (int k = 0; k < nin; k++)
                fc__pw_load_f64(s->in_dt[k], p[nout + k] + i0 * st[nout + k], st[nout + k], len,
                                buf[k]);
            if (s->grad)
                sg_f64(s, o, buf[0], buf[1], buf[2], len);
            else
                sg_f64(s, o, NULL, buf[0], buf[1], len);
            for (int j = 0; j < nout; j++) {
                char *out = p[j] + i0 * st[j];
                for (int64_t i = 0; i < len; i++)
                    *(double *)(out + i * st[j]) = obuf[j][i];
            }
        }
        return;
    }
    float buf[3][FC__PW_CHUNK], obuf[2][FC__PW_CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += FC__PW_CHUNK) {
        int64_t len = n - i0 < FC__PW_CHUNK ? n - i0 : FC__PW_CHUNK;
        const float *in[3] = {NULL, NULL, NULL};
        for (int k = 0; k < nin; k++) {
            const char *src = p[nout + k] + i0 * st[nout + k];
            if (s->in_dt[k] == FC_F32 && st[nout + k] == 4) {
                in[k] = (const float *)(const void *)src;
            } else {
                fc__pw_load_f32(s->in_dt[k], src, st[nout + k], len, buf[k]);
                in[k] = buf[k];
            }
        }
        bool direct = s->out_dt == FC_F32 && st[0] == 4 && (nout == 1 || st[1] == 4);
        float *o[2] = {obuf[0], obuf[1]};
        for (int j = 0; direct && j < nout; j++)
            o[j] = (float *)(void *)(p[j] + i0 * st[j]);
        if (s->grad)
            sg_f32(s, o, in[0], in[1], in[2], len);
        else
            sg_f32(s, o, NULL, in[0], in[1], len);
        for (int j = 0; !direct && j < nout; j++)
            fc__pw_store_f32(s->out_dt, p[j] + i0 * st[j], st[j], len, obuf[j]);
    }
}

void fc__swiglu_run(fc_ctx *ctx, fc_raw *out, const fc_raw *a, const fc_raw *b) {
    sg_arg s = {out->dtype, {a->dtype, b->dtype, FC_F32}, false, false, false};
    fc_raw *ops[3] = {out, (fc_raw *)a, (fc_raw *)b};
    fc__pw_run(ctx, 3, ops, sg_inner, &s);
}

void fc__swiglu_grad_run(fc_ctx *ctx, bool wrt_a, fc_raw *gin, const fc_raw *g, const fc_raw *a,
                         const fc_raw *b) {
    sg_arg s = {gin->dtype, {g->dtype, a->dtype, b->dtype}, true, wrt_a, false};
    fc_raw *ops[4] = {gin, (fc_raw *)g, (fc_raw *)a, (fc_raw *)b};
    fc__pw_run(ctx, 4, ops, sg_inner, &s);
}

void fc__swiglu_grads_run(fc_ctx *ctx, fc_raw *ga, fc_raw *gb, const fc_raw *g, const fc_raw *a,
                          const fc_raw *b) {
    sg_arg s = {ga->dtype, {g->dtype, a->dtype, b->dtype}, true, true, true};
    fc_raw *ops[5] = {ga, gb, (fc_raw *)g, (fc_raw *)a, (fc_raw *)b};
    fc__pw_run(ctx, 5, ops, sg_inner, &s);
}
