/* SPDX-License-Identifier: MIT */
/* test_optim_f64.c - f64 parameters end to end: f64 leaves get f64
 * gradients through the public API, the optimizers update them in f64
 * (against double transcriptions of torch.optim's rules, to 1e-13), their
 * state is f64, clipping handles f64 and mixed gradients, gradcheck passes
 * on an f64 MLP built from fc_param_* constructors, a small f64 MLP fits
 * with Adam, and a checkpoint of f64 parameters and state round-trips
 * bit for bit. */
/* getpid, unlink: POSIX */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE
#endif

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fucina.h"

#define N 29
#define STEPS 7

static fc_ctx *new_ctx(int threads) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = threads, .seed = 11});
    assert_non_null(ctx);
    return ctx;
}

static void free_ctx(fc_ctx *ctx) {
    fc_ctx_stats st;
    fc_ctx_get_stats(ctx, &st);
    assert_int_equal(st.tensors_live, 0);
    fc_ctx_free(ctx);
}

static void grads_at(int step, double *g) {
    for (int i = 0; i < N; i++)
        g[i] = sin(0.37 * i + 1.3 * step) * (1 + 0.1 * i);
}

/* The gradient g lands in p's fc_grad through backward (sum(p * g)). */
static void set_grad(fc_ctx *ctx, fc_tensor *p, const double *g) {
    fc_zero_grad(&p, 1);
    fc_scope_begin(ctx);
    fc_tensor *gt = fc_tensor_from_data(ctx, FC_F64, (const int64_t[]){N}, 1, g);
    assert_int_equal(fc_backward(ctx, fc_sum(ctx, fc_mul(ctx, p, gt), NULL, 0, false)), FC_OK);
    fc_scope_end(ctx);
    assert_int_equal(fc_tensor_dtype(fc_grad(p)), FC_F64);
}

typedef struct ref {
    double p[N], m[N], v[N], vmax[N];
    bool first;
} ref;

static void ref_step(ref *r, const fc_optim_opts *o, const double *gs, int t) {
    for (int i = 0; i < N; i++) {
        double g = gs[i], p = r->p[i];
        if (o->kind == FC_OPTIM_SGD) {
            if (o->weight_decay) g += o->weight_decay * p;
            if (o->momentum) {
                double buf = r->first ? g : o->momentum * r->m[i] + (1 - o->dampening) * g;
                r->m[i] = buf;
                g = o->nesterov ? g + o->momentum * buf : buf;
            }
            r->p[i] = p - o->lr * g;
            continue;
        }
        double b1 = o->beta1 ? o->beta1 : 0.9, b2 = o->beta2 ? o->beta2 : 0.999;
        double eps = o->eps ? o->eps : 1e-8;
        if (o->kind == FC_OPTIM_ADAMW)
            p *= 1 - o->lr * o->weight_decay;
        else
            g += o->weight_decay * p;
        r->m[i] = b1 * r->m[i] + (1 - b1) * g;
        r->v[i] = b2 * r->v[i] + (1 - b2) * g * g;
        double v = r->v[i];
        if (o->amsgrad) {
            if (v > r->vmax[i]) r->vmax[i] = v;
            v = r->vmax[i];
        }
        double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
        r->p[i] = p - o->lr / bc1 * r->m[i] / (sqrt(v) / sqrt(bc2) + eps);
    }
    r->first = false;
}

static void run_against_ref(const fc_optim_opts *o, bool check_finite) {
    fc_ctx *ctx = new_ctx(2);
    fc_ctx_set_check_finite(ctx, check_finite);
    double init[N], g[N];
    ref r = {.first = true};
    for (int i = 0; i < N; i++)
        r.p[i] = init[i] = 0.5 - 0.03 * i + 1e-10 * i * i;
    fc_tensor *p = fc_param_from_data(ctx, FC_F64, (const int64_t[]){N}, 1, init);
    assert_non_null(p);
    fc_optim *opt = fc_optim_new(ctx, o, &p, 1);
    assert_non_null(opt);
    for (int s = 1; s <= STEPS; s++) {
        grads_at(s, g);
        set_grad(ctx, p, g);
        assert_int_equal(fc_optim_step(opt), FC_OK);
        ref_step(&r, o, g, s);
    }
    const double *pv = fc_tensor_data(p);
    for (int i = 0; i < N; i++) {
        /* f32 arithmetic would be ~1e-7 off; f64 agrees to rounding */
        if (fabs(pv[i] - r.p[i]) > 1e-13 * (1 + fabs(r.p[i])))
            fail_msg("kind %d element %d: %.17g vs reference %.17g", o->kind, i, pv[i], r.p[i]);
    }
    const char *sn = o->kind == FC_OPTIM_SGD ? (o->momentum ? "momentum_buffer" : NULL) : "exp_avg";
    if (sn) {
        fc_tensor *m = fc_optim_state(opt, 0, sn, false);
        assert_non_null(m);
        assert_int_equal(fc_tensor_dtype(m), FC_F64);
        const double *mv = fc_tensor_data(m);
        for (int i = 0; i < N; i++)
            assert_true(fabs(mv[i] - r.m[i]) <= 1e-13 * (1 + fabs(r.m[i])));
    }
    fc_optim_free(opt);
    fc_release(p);
    free_ctx(ctx);
}

static void test_optim_f64_rules(void **state) {
    (void)state;
    const fc_optim_opts cases[] = {
        {.kind = FC_OPTIM_SGD, .lr = 0.1},
        {.kind = FC_OPTIM_SGD, .lr = 0.05, .momentum = 0.9, .weight_decay = 0.01},
        {.kind = FC_OPTIM_SGD, .lr = 0.05, .momentum = 0.8, .nesterov = true},
        {.kind = FC_OPTIM_ADAM, .lr = 0.01, .weight_decay = 0.02},
        {.kind = FC_OPTIM_ADAM, .lr = 0.01, .amsgrad = true, .beta2 = 0.99},
        {.kind = FC_OPTIM_ADAMW, .lr = 0.02, .weight_decay = 0.1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        run_against_ref(&cases[k], false);
        run_against_ref(&cases[k], true); /* the scratch-copy path of check_finite */
    }
}

/* One optimizer over an f32 and an f64 parameter: each is updated in its
 * own precision, with state of its own dtype. */
static void test_optim_f64_mixed_dtypes(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    fc_tensor *a = fc_param_randn(ctx, FC_F32, (const int64_t[]){4}, 1, 0.5);
    fc_tensor *b = fc_param_randn(ctx, FC_F64, (const int64_t[]){4}, 1, 0.5);
    assert_int_equal(fc_tensor_dtype(b), FC_F64);
    fc_tensor *ps[2] = {a, b};
    fc_optim *opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 0.1}, ps, 2);
    assert_non_null(opt);
    fc_scope_begin(ctx);
    fc_tensor *l = fc_add(ctx, fc_sum(ctx, fc_mul(ctx, a, a), NULL, 0, false),
                          fc_to(ctx, fc_sum(ctx, fc_mul(ctx, b, b), NULL, 0, false), FC_F32));
    assert_int_equal(fc_backward(ctx, l), FC_OK);
    fc_scope_end(ctx);
    assert_int_equal(fc_tensor_dtype(fc_grad(a)), FC_F32);
    assert_int_equal(fc_tensor_dtype(fc_grad(b)), FC_F64);
    double b0[4];
    memcpy(b0, fc_tensor_data(b), sizeof b0);
    assert_int_equal(fc_optim_step(opt), FC_OK);
    assert_int_equal(fc_tensor_dtype(fc_optim_state(opt, 0, "exp_avg_sq", false)), FC_F32);
    assert_int_equal(fc_tensor_dtype(fc_optim_state(opt, 1, "exp_avg_sq", false)), FC_F64);
    /* Adam's first step moves each element by lr * sign(g) (to ~eps/|g|) */
    const double *bv = fc_tensor_data(b);
    for (int i = 0; i < 4; i++) {
        double want = b0[i] - 0.1 * (b0[i] > 0 ? 1 : -1);
        assert_true(fabs(bv[i] - want) < 1e-7);
    }
    fc_optim_free(opt);
    fc_release(a);
    fc_release(b);
    free_ctx(ctx);
}

/* Clipping sums f32 and f64 gradients into one f64 norm and scales each in
 * its own dtype. */
static void test_clip_grad_norm_f64(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    fc_tensor *a = fc_param_zeros(ctx, FC_F32, (const int64_t[]){2}, 1);
    fc_tensor *b = fc_param_zeros(ctx, FC_F64, (const int64_t[]){2}, 1);
    fc_scope_begin(ctx);
    fc_tensor *ga = fc_tensor_from_data(ctx, FC_F32, (const int64_t[]){2}, 1, (float[]){3, 0});
    fc_tensor *gb = fc_tensor_from_data(ctx, FC_F64, (const int64_t[]){2}, 1, (double[]){0, 4});
    assert_int_equal(fc_backward_with(ctx, a, ga, false), FC_OK);
    assert_int_equal(fc_backward_with(ctx, b, gb, false), FC_OK);
    fc_scope_end(ctx);
    fc_tensor *ps[2] = {a, b};
    double norm = 0;
    assert_int_equal(fc_clip_grad_norm(ctx, ps, 2, 1.0, &norm), FC_OK);
    assert_true(fabs(norm - 5) < 1e-12);
    const double *g = fc_tensor_data(fc_grad(b));
    assert_true(fabs(g[1] - 4 / (5 + 1e-6)) < 1e-15);
    assert_true(fabs(((const float *)fc_tensor_data(fc_grad(a)))[0] - 3 / (5 + 1e-6)) < 1e-6);
    fc_release(a);
    fc_release(b);
    free_ctx(ctx);
}

/* ---- an f64 MLP ---------------------------------------------------------------------- */

#define IN 2
#define HID 12
#define BATCH 24

typedef struct mlp {
    fc_tensor *w1, *b1, *w2, *b2;
} mlp;

static fc_tensor *mlp_forward(fc_ctx *ctx, fc_tensor *const *p, fc_tensor *x) {
    fc_tensor *h = fc_tanh(ctx, fc_add(ctx, fc_matmul(ctx, x, p[0]), p[1]));
    return fc_add(ctx, fc_matmul(ctx, h, p[2]), p[3]);
}

static void make_data(fc_ctx *ctx, fc_tensor **x, fc_tensor **y) {
    double xv[BATCH * IN], yv[BATCH];
    for (int i = 0; i < BATCH; i++) {
        double a = -1 + 2.0 * i / (BATCH - 1), b = cos(1.7 * i);
        xv[i * IN] = a;
        xv[i * IN + 1] = b;
        yv[i] = sin(2 * a) + 0.5 * b * b;
    }
    *x = fc_tensor_from_data(ctx, FC_F64, (const int64_t[]){BATCH, IN}, 2, xv);
    *y = fc_tensor_from_data(ctx, FC_F64, (const int64_t[]){BATCH, 1}, 2, yv);
}

static fc_tensor *mse(fc_ctx *ctx, fc_tensor *pred, fc_tensor *y) {
    fc_tensor *d = fc_sub(ctx, pred, y);
    return fc_mean(ctx, fc_mul(ctx, d, d), NULL, 0, false);
}

static void mlp_params(fc_ctx *ctx, fc_tensor **p) {
    p[0] = fc_param_randn(ctx, FC_F64, (const int64_t[]){IN, HID}, 2, 0.8);
    p[1] = fc_param_zeros(ctx, FC_F64, (const int64_t[]){HID}, 1);
    p[2] = fc_param_randn(ctx, FC_F64, (const int64_t[]){HID, 1}, 2, 0.3);
    p[3] = fc_param_zeros(ctx, FC_F64, (const int64_t[]){1}, 1);
    for (int k = 0; k < 4; k++)
        assert_non_null(p[k]);
}

static void test_optim_f64_mlp_fit_adam(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(2);
    fc_tensor *p[4], *x, *y;
    mlp_params(ctx, p);
    make_data(ctx, &x, &y);
    fc_optim *opt = fc_optim_new(ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 0.03}, p, 4);
    assert_non_null(opt);
    double first = 0, last = 0;
    for (int step = 0; step < 400; step++) {
        fc_scope_begin(ctx);
        fc_tensor *loss = mse(ctx, mlp_forward(ctx, p, x), y);
        assert_non_null(loss);
        assert_int_equal(fc_tensor_dtype(loss), FC_F64);
        last = *(const double *)fc_tensor_data(loss);
        if (step == 0) first = last;
        fc_optim_zero_grad(opt);
        assert_int_equal(fc_backward(ctx, loss), FC_OK);
        for (int k = 0; k < 4; k++)
            assert_int_equal(fc_tensor_dtype(fc_grad(p[k])), FC_F64);
        assert_int_equal(fc_optim_step(opt), FC_OK);
        fc_scope_end(ctx);
    }
    printf("f64 MLP: mse %.6g -> %.6g in 400 Adam steps\n", first, last);
    assert_true(last < 0.01 * first);
    assert_true(last < 2e-3);
    fc_optim_free(opt);
    for (int k = 0; k < 4; k++)
        fc_release(p[k]);
    fc_release(x);
    fc_release(y);
    free_ctx(ctx);
}

static fc_tensor *gc_mlp(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n;
    (void)user;
    return mse(ctx, mlp_forward(ctx, in, in[4]), in[5]);
}

/* Parameters marked through the public constructors (not check_all_f64):
 * the analytic f64 gradients agree with f64 central differences. */
static void test_optim_f64_mlp_gradcheck(void **state) {
    (void)state;
    fc_ctx *ctx = new_ctx(1);
    fc_tensor *in[6];
    mlp_params(ctx, in);
    make_data(ctx, &in[4], &in[5]);
    fc_gradcheck_report rep;
    assert_int_equal(fc_gradcheck(ctx, gc_mlp, NULL, in, 6, NULL, &rep), FC_OK);
    assert_true(rep.passed);
    assert_int_equal(rep.checked, IN * HID + HID + HID + 1);
    for (int k = 0; k < 6; k++)
        fc_release(in[k]);
    free_ctx(ctx);
}

/* f64 parameters and their f64 Adam state survive a checkpoint bit for bit,
 * and the resumed step equals the uninterrupted one. */
static void test_checkpoint_f64_roundtrip(void **state) {
    (void)state;
    char path[600];
    snprintf(path, sizeof path, "%s/test_optim_f64-%ld.ckpt", FUCINA_BINARY_DIR, (long)getpid());
    fc_ctx *ctx = new_ctx(1);
    double g[N];
    fc_tensor *p = fc_param_randn(ctx, FC_F64, (const int64_t[]){N}, 1, 1.0);
    fc_tensor *q = fc_param_randn(ctx, FC_F64, (const int64_t[]){N}, 1, 1.0);
    const fc_optim_opts o = {.kind = FC_OPTIM_ADAM, .lr = 0.01, .amsgrad = true};
    fc_optim *op = fc_optim_new(ctx, &o, &p, 1), *oq = NULL;
    assert_non_null(op);
    for (int s = 1; s <= 3; s++) {
        grads_at(s, g);
        set_grad(ctx, p, g);
        assert_int_equal(fc_optim_step(op), FC_OK);
    }
    const char *names[1] = {"w"};
    assert_int_equal(fc_checkpoint_save(ctx, path, names, &p, 1, op, NULL, NULL, 0), FC_OK);
    /* a fresh optimizer (no state yet) over another f64 parameter loads it */
    oq = fc_optim_new(ctx, &o, &q, 1);
    assert_non_null(oq);
    assert_int_equal(fc_checkpoint_load(ctx, path, names, &q, 1, oq), FC_OK);
    assert_memory_equal(fc_tensor_data(p), fc_tensor_data(q), sizeof(double) * N);
    const char *sn[3] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    for (int k = 0; k < 3; k++) {
        fc_tensor *a = fc_optim_state(op, 0, sn[k], false),
                  *b = fc_optim_state(oq, 0, sn[k], false);
        assert_non_null(b);
        assert_int_equal(fc_tensor_dtype(b), FC_F64);
        assert_memory_equal(fc_tensor_data(a), fc_tensor_data(b), sizeof(double) * N);
    }
    grads_at(4, g);
    set_grad(ctx, p, g);
    set_grad(ctx, q, g);
    assert_int_equal(fc_optim_step(op), FC_OK);
    assert_int_equal(fc_optim_step(oq), FC_OK);
    assert_memory_equal(fc_tensor_data(p), fc_tensor_data(q), sizeof(double) * N);
    /* an f32 parameter of the same name is refused, naming both dtypes */
    fc_tensor *f = fc_param_zeros(ctx, FC_F32, (const int64_t[]){N}, 1);
    assert_int_equal(fc_checkpoint_load(ctx, path, names, &f, 1, NULL), FC_ERR_DTYPE);
    assert_non_null(strstr(fc_ctx_error(ctx), "is f64"));
    fc_ctx_clear_error(ctx);
    fc_optim_free(op);
    fc_optim_free(oq);
    fc_release(p);
    fc_release(q);
    fc_release(f);
    free_ctx(ctx);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optim_f64_rules),
        cmocka_unit_test(test_optim_f64_mixed_dtypes),
        cmocka_unit_test(test_clip_grad_norm_f64),
        cmocka_unit_test(test_optim_f64_mlp_fit_adam),
        cmocka_unit_test(test_optim_f64_mlp_gradcheck),
        cmocka_unit_test(test_checkpoint_f64_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
