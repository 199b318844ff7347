/* SPDX-License-Identifier: MIT */
/* test_binary.c - binary arithmetic (src/ops/binary.c over
 * src/exec/kernels/binary.c): add, sub, mul, div, pow, maximum, minimum,
 * the scalar forms, the in-place forms and add_out; and the gradient split
 * of maximum/minimum ties (the finite-difference checks of every
 * pointwise gradient are in test_pointwise_grad.c).
 *
 * References are plain double-precision code in this file. For + - * / and
 * max/min the expected value is the exact result rounded once to the dtype
 * (the kernels compute f16/bf16 through f32, and rounding twice there is
 * innocuous because f32 carries more than twice their precision plus two
 * bits), so those compare for equality; pow allows a few ulps. Integers are
 * checked against wrap-around arithmetic done in uint64. Every test runs in
 * its own context with two threads and ends with zero live tensors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/cpu.h"
#include "fc_test_data.h"
#include "fct_tensor.h"
#include "fucina.h"

typedef enum op { ADD, SUB, MUL, DIV, POW, MAX, MIN, OP_COUNT } op;
static const char *const op_names[OP_COUNT] = {"add", "sub",     "mul",    "div",
                                               "pow", "maximum", "minimum"};
typedef fc_tensor *(*bin_fn)(fc_ctx *, fc_tensor *, fc_tensor *);
static const bin_fn op_fns[OP_COUNT] = {fc_add, fc_sub,     fc_mul,    fc_div,
                                        fc_pow, fc_maximum, fc_minimum};

static int setup(void **state) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 2, .seed = 7});
    *state = ctx;
    return ctx ? 0 : -1;
}

static int teardown(void **state) {
    fc_ctx *ctx = *state;
    int64_t live = fct_live(ctx);
    fc_ctx_free(ctx);
    if (live != 0) {
        fprintf(stderr, "leak check: %lld tensors still live\n", (long long)live);
        return -1;
    }
    return 0;
}

static double ref_float(op o, double x, double y) {
    switch (o) {
    case ADD:
        return x + y;
    case SUB:
        return x - y;
    case MUL:
        return x * y;
    case DIV:
        return x / y;
    case POW:
        return pow(x, y);
    case MAX:
        return (x >= y || isnan(x)) ? x : y;
    default:
        return (x <= y || isnan(x)) ? x : y;
    }
}

static bool same(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

/* Broadcast: the flat index into an input of shape `in` for output multi-index idx. */
static int64_t bidx(const int64_t *idx, int orank, const int64_t *in, int irank) {
    int64_t f = 0;
    for (int i = 0; i < irank; i++) {
        int64_t d = in[i], k = idx[orank - irank + i];
        f = f * d + (d == 1 ? 0 : k);
    }
    return f;
}

static void next_index(int64_t *idx, const int64_t *shape, int rank) {
    for (int i = rank - 1; i >= 0; i--) {
        if (++idx[i] < shape[i]) return;
        idx[i] = 0;
    }
}

static const fc_dtype float_dts[] = {FC_F32, FC_F64, FC_F16, FC_BF16};

/* Inputs that suit the op: nonzero divisors, positive pow bases, and for
 * max/min some exact ties. */
static void gen_inputs(op o, fc_dtype dt, uint64_t *rng, double *a, double *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        a[i] = fct_round(dt, o == POW ? fct_uniform(rng, 0.1, 3) : fct_uniform(rng, -4, 4));
        b[i] = fct_round(dt, o == POW ? fct_uniform(rng, -2, 2) : fct_uniform(rng, -4, 4));
        if (o == DIV && fabs(b[i]) < 0.25) b[i] = 0.5;
        if ((o == MAX || o == MIN) && i % 5 == 0) b[i] = a[i];
    }
}

static void check_float_result(fc_tensor *out, op o, fc_dtype dt, const double *a, const double *b,
                               int64_t n, const char *what) {
    double got[512];
    assert_non_null(out);
    assert_int_equal(fc_tensor_dtype(out), dt);
    assert_int_equal(fct_read(out, got, 512), n);
    for (int64_t i = 0; i < n; i++) {
        double want = fct_round(dt, ref_float(o, a[i], b[i]));
        bool ok = o == POW ? fabs(got[i] - want) <= 2 * fct_ulp(dt, want) : same(got[i], want);
        if (!ok) {
            fprintf(stderr, "%s %s %s [%lld]: %.17g (op) %.17g = %.17g, want %.17g\n", op_names[o],
                    fc_dtype_name(dt), what, (long long)i, a[i], b[i], got[i], want);
            fail();
        }
    }
}

/* Every op, every float dtype, every pair of layouts, same shape. */
static void test_binary_float_layouts(void **state) {
    fc_ctx *ctx = *state;
    const int64_t shape[2] = {5, 7};
    double a[35], b[35];
    uint64_t rng = 1;
    fc_scope_begin(ctx);
    for (size_t d = 0; d < sizeof float_dts / sizeof float_dts[0]; d++) {
        fc_dtype dt = float_dts[d];
        for (int o = 0; o < OP_COUNT; o++) {
            gen_inputs(o, dt, &rng, a, b, 35);
            for (int la = 0; la < FCT_LAYOUT_COUNT; la++) {
                for (int lb = 0; lb < FCT_LAYOUT_COUNT; lb++) {
                    fc_tensor *ta = fct_make(ctx, dt, shape, 2, a, la);
                    fc_tensor *tb = fct_make(ctx, dt, shape, 2, b, lb);
                    char what[64];
                    snprintf(what, sizeof what, "%s/%s", fct_layout_names[la],
                             fct_layout_names[lb]);
                    check_float_result(op_fns[o](ctx, ta, tb), o, dt, a, b, 35, what);
                }
            }
        }
    }
    fc_scope_end(ctx);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
}

/* [4,1,3] (op) [5,1] -> [4,5,3], a [1] against [2,3], and an explicit
 * stride-0 view as input. */
static void test_binary_broadcast(void **state) {
    fc_ctx *ctx = *state;
    uint64_t rng = 2;
    fc_scope_begin(ctx);
    const int64_t sa[3] = {4, 1, 3}, sb[2] = {5, 1}, so[3] = {4, 5, 3};
    double a[12], b[5], got[60];
    for (int o = 0; o < OP_COUNT; o++) {
        for (int i = 0; i < 12; i++)
            a[i] = fct_round(FC_F32, fct_uniform(&rng, 0.5, 2));
        for (int i = 0; i < 5; i++)
            b[i] = fct_round(FC_F32, fct_uniform(&rng, 0.5, 2));
        for (int la = 0; la < FCT_LAYOUT_COUNT; la++) {
            fc_tensor *out = op_fns[o](ctx, fct_make(ctx, FC_F32, sa, 3, a, la),
                                       fct_make(ctx, FC_F32, sb, 2, b, FCT_STRIDED));
            assert_non_null(out);
            assert_int_equal(fc_tensor_rank(out), 3);
            assert_memory_equal(fc_tensor_shape(out), so, sizeof so);
            assert_int_equal(fct_read(out, got, 60), 60);
            int64_t idx[3] = {0};
            for (int k = 0; k < 60; k++, next_index(idx, so, 3)) {
                double want =
                    fct_round(FC_F32, ref_float(o, a[bidx(idx, 3, sa, 3)], b[bidx(idx, 3, sb, 2)]));
                if (o == POW)
                    assert_true(fabs(got[k] - want) <= 2 * fct_ulp(FC_F32, want));
                else
                    assert_true(same(got[k], want));
            }
        }
    }
    /* a one-element tensor against a matrix, on either side */
    double six[6] = {1, 2, 3, 4, 5, 6}, ten = 10;
    fc_tensor *m = fct_make(ctx, FC_F64, (const int64_t[]){2, 3}, 2, six, FCT_TRANSPOSED);
    fc_tensor *s = fct_make(ctx, FC_F64, (const int64_t[]){1}, 1, &ten, FCT_CONTIG);
    assert_int_equal(fct_read(fc_sub(ctx, s, m), got, 6), 6);
    for (int i = 0; i < 6; i++)
        assert_true(got[i] == 10 - six[i]);
    assert_int_equal(fct_read(fc_div(ctx, m, s), got, 6), 6);
    for (int i = 0; i < 6; i++)
        assert_true(got[i] == six[i] / 10);
    /* an explicit broadcast view: row [3] expanded to [4,3] with stride 0 */
    fc_tensor *row = fct_make(ctx, FC_F64, (const int64_t[]){3}, 1, six, FCT_CONTIG);
    fc_tensor *ex = fct_view(ctx, row, (const int64_t[]){4, 3}, (const int64_t[]){0, 1}, 2, 0);
    fc_tensor *col = fct_make(ctx, FC_F64, (const int64_t[]){4, 1}, 2, six, FCT_STRIDED);
    assert_int_equal(fct_read(fc_mul(ctx, ex, col), got, 12), 12);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            assert_true(got[i * 3 + j] == six[j] * six[i]);
    fc_scope_end(ctx);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
}

/* Sizes above the parallel grain, contiguous (the flat fast path), a
 * broadcast row and a transposed input (the strided iterator), with two
 * threads; f32 and bf16. */
static void test_binary_large(void **state) {
    fc_ctx *ctx = *state;
    enum { R = 300, C = 257, N = R * C };
    static double a[N], b[N], got[N];
    uint64_t rng = 3;
    fc_scope_begin(ctx);
    for (int d = 0; d < 2; d++) {
        fc_dtype dt = d ? FC_BF16 : FC_F32;
        for (int i = 0; i < N; i++) {
            a[i] = fct_round(dt, fct_uniform(&rng, -8, 8));
            b[i] = fct_round(dt, fct_uniform(&rng, -8, 8));
        }
        const int64_t flat = N, mat[2] = {R, C}, row = C;
        fc_tensor *fa = fct_make(ctx, dt, &flat, 1, a, FCT_CONTIG);
        fc_tensor *fb = fct_make(ctx, dt, &flat, 1, b, FCT_CONTIG);
        assert_int_equal(fct_read(fc_add(ctx, fa, fb), got, N), N);
        for (int i = 0; i < N; i++)
            assert_true(got[i] == fct_round(dt, a[i] + b[i]));
        assert_int_equal(fct_read(fc_mul(ctx, fa, fb), got, N), N);
        for (int i = 0; i < N; i++)
            assert_true(got[i] == fct_round(dt, a[i] * b[i]));
        fc_tensor *ma = fct_make(ctx, dt, mat, 2, a, FCT_CONTIG);
        fc_tensor *rb = fct_make(ctx, dt, &row, 1, b, FCT_CONTIG);
        assert_int_equal(fct_read(fc_sub(ctx, ma, rb), got, N), N);
        for (int i = 0; i < N; i++)
            assert_true(got[i] == fct_round(dt, a[i] - b[i % C]));
        fc_tensor *ta = fct_make(ctx, dt, mat, 2, a, FCT_TRANSPOSED);
        fc_tensor *tb = fct_make(ctx, dt, mat, 2, b, FCT_STRIDED);
        assert_int_equal(fct_read(fc_maximum(ctx, ta, tb), got, N), N);
        for (int i = 0; i < N; i++)
            assert_true(got[i] == (a[i] >= b[i] ? a[i] : b[i]));
    }
    fc_scope_end(ctx);
}

/* f32 outputs of 8 MiB and more are streamed around the cache on AVX2 and
 * AVX-512 CPUs (contiguous chunks; plain stores for an unaligned head and the
 * tail): add, sub, mul, div into fresh outputs, into an out= destination
 * that starts one element past a cache line, and in place; every element
 * against the double reference, rounded once. */
static void large_streamed_once(fc_ctx *ctx) {
    const int64_t N = ((int64_t)8 << 20) / 4 + 37; /* just over the threshold, odd tail */
    float *a = malloc(sizeof *a * (size_t)N), *b = malloc(sizeof *b * (size_t)N);
    uint64_t rng = 11;
    for (int64_t i = 0; i < N; i++) {
        a[i] = (float)fct_uniform(&rng, -8, 8);
        b[i] = (float)fct_uniform(&rng, 0.5, 8);
    }
    fc_scope_begin(ctx);
    fc_tensor *fa = fc_tensor_from_data(ctx, FC_F32, &N, 1, a);
    fc_tensor *fb = fc_tensor_from_data(ctx, FC_F32, &N, 1, b);
    const int64_t n1 = N + 1;
    fc_tensor *wide = fc_zeros(ctx, FC_F32, &n1, 1);
    fc_tensor *dst = fc_narrow(ctx, wide, 0, 1, N); /* 4 bytes past the allocation's start */
    assert_true(fa && fb && dst);
    for (op o = ADD; o <= DIV; o++) {
        fc_tensor *r = op_fns[o](ctx, fa, fb);
        assert_non_null(r);
        const float *got = fc_tensor_data(r);
        for (int64_t i = 0; i < N; i++)
            if (got[i] != (float)ref_float(o, a[i], b[i]))
                fail_msg("%s element %lld: got %g", op_names[o], (long long)i, (double)got[i]);
    }
    assert_int_equal(fc_add_out(dst, fa, fb), FC_OK);
    const float *d = fc_tensor_data(dst);
    for (int64_t i = 0; i < N; i++)
        assert_true(d[i] == (float)((double)a[i] + b[i]));
    assert_int_equal(fc_add_(fa, fb), FC_OK); /* dst is a itself */
    const float *p = fc_tensor_data(fa);
    for (int64_t i = 0; i < N; i++)
        assert_true(p[i] == (float)((double)a[i] + b[i]));
    fc_scope_end(ctx);
    free(a);
    free(b);
}

/* ...at every level this CPU has (AVX-512 and AVX2 stream, portable does not). */
static void test_binary_large_streamed(void **state) {
    fc_ctx *ctx = *state;
    const fc__isa keep = fc__isa_set_cap(FC__ISA_PORTABLE);
    for (int lv = FC__ISA_PORTABLE; lv <= (int)fc__isa_detected(); lv++) {
        fc__isa_set_cap((fc__isa)lv);
        large_streamed_once(ctx);
    }
    fc__isa_set_cap(keep);
}

/* ---- integers ------------------------------------------------------------------------ */

static const fc_dtype int_dts[] = {FC_U8, FC_U16, FC_I8, FC_I16, FC_I32, FC_I64};

static int64_t wrap(fc_dtype dt, uint64_t v) {
    switch (dt) {
    case FC_U8:
        return (uint8_t)v;
    case FC_U16:
        return (uint16_t)v;
    case FC_I8:
        return (int8_t)(uint8_t)v;
    case FC_I16:
        return (int16_t)(uint16_t)v;
    case FC_I32:
        return (int32_t)(uint32_t)v;
    default:
        return (int64_t)v;
    }
}

static int64_t int_at(const fc_tensor *t, int64_t i) {
    const char *p = fc_tensor_data(t);
    switch (fc_tensor_dtype(t)) {
    case FC_U8:
        return ((const uint8_t *)p)[i];
    case FC_U16:
        return ((const uint16_t *)p)[i];
    case FC_I8:
        return ((const int8_t *)p)[i];
    case FC_I16:
        return ((const int16_t *)p)[i];
    case FC_I32:
        return ((const int32_t *)p)[i];
    default:
        return ((const int64_t *)p)[i];
    }
}

static fc_tensor *int_tensor(fc_ctx *ctx, fc_dtype dt, const int64_t *v, int64_t n) {
    fc_tensor *t = fc_empty(ctx, dt, &n, 1);
    char *p = fc_tensor_data_mut(t);
    size_t es = fc_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) {
        uint64_t u = (uint64_t)v[i];
        memcpy(p + (size_t)i * es, &u, es); /* little-endian: the low bytes */
    }
    return t;
}

static int64_t ref_int(op o, fc_dtype dt, int64_t x, int64_t y) {
    bool is_signed = fc_dtype_is_signed_int(dt);
    switch (o) {
    case ADD:
        return wrap(dt, (uint64_t)x + (uint64_t)y);
    case SUB:
        return wrap(dt, (uint64_t)x - (uint64_t)y);
    case MUL:
        return wrap(dt, (uint64_t)x * (uint64_t)y);
    case DIV:
        if (is_signed && y == -1) return wrap(dt, 0 - (uint64_t)x);
        return wrap(dt, (uint64_t)(x / y));
    case MAX:
        return x > y ? x : y;
    default:
        return x < y ? x : y;
    }
}

/* Wrapping + - *, truncating / (INT_MIN / -1 wraps), max/min, at the
 * extremes of every integer dtype; the divisor is broadcast. */
static void test_binary_int(void **state) {
    fc_ctx *ctx = *state;
    uint64_t rng = 4;
    fc_scope_begin(ctx);
    for (size_t d = 0; d < sizeof int_dts / sizeof int_dts[0]; d++) {
        fc_dtype dt = int_dts[d];
        int bits = (int)fc_dtype_size(dt) * 8;
        bool sg = fc_dtype_is_signed_int(dt);
        int64_t lo = sg ? (bits == 64 ? INT64_MIN : -((int64_t)1 << (bits - 1))) : 0;
        int64_t hi = sg ? (bits == 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1)
                        : ((int64_t)1 << bits) - 1;
        enum { N = 40 };
        int64_t a[N], b[N];
        const int64_t special[] = {lo, hi, 0, 1, sg ? -1 : 2, lo + 1, hi - 1, 7};
        for (int i = 0; i < N; i++) {
            a[i] = i < 8 ? special[i] : wrap(dt, fc_test_splitmix64(&rng));
            b[i] = i < 8 ? special[(i * 3 + 1) % 8] : wrap(dt, fc_test_splitmix64(&rng));
            if (b[i] == 0) b[i] = 3;
        }
        a[8] = lo, b[8] = sg ? -1 : hi; /* INT_MIN / -1 */
        fc_tensor *ta = int_tensor(ctx, dt, a, N), *tb = int_tensor(ctx, dt, b, N);
        for (int o = 0; o < OP_COUNT; o++) {
            if (o == POW) continue;
            fc_tensor *out = op_fns[o](ctx, ta, tb);
            assert_non_null(out);
            assert_int_equal(fc_tensor_dtype(out), dt);
            for (int i = 0; i < N; i++) {
                int64_t want = ref_int(o, dt, a[i], b[i]), got = int_at(out, i);
                if (got != want) {
                    fprintf(stderr, "%s %s [%d]: %lld, %lld -> %lld, want %lld\n", op_names[o],
                            fc_dtype_name(dt), i, (long long)a[i], (long long)b[i], (long long)got,
                            (long long)want);
                    fail();
                }
            }
        }
        /* a broadcast divisor: [N] / [1] */
        int64_t three = 3;
        fc_tensor *q = fc_div(ctx, ta, int_tensor(ctx, dt, &three, 1));
        for (int i = 0; i < N; i++)
            assert_true(int_at(q, i) == ref_int(DIV, dt, a[i], 3));
    }
    fc_scope_end(ctx);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
}

/* A zero anywhere in an integer divisor fails before computing; floats
 * divide by zero per IEEE. */
static void test_binary_div_zero(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    int64_t a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 0, 4};
    fc_tensor *ta = int_tensor(ctx, FC_I32, a, 4);
    assert_null(fc_div(ctx, ta, int_tensor(ctx, FC_I32, b, 4)));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_DIV_ZERO);
    assert_non_null(strstr(fc_ctx_error(ctx), "div: integer division by zero"));
    assert_non_null(strstr(fc_ctx_error(ctx), "i32[4]"));
    fc_ctx_clear_error(ctx);
    /* a zero that is broadcast, in a strided view of u8 */
    int64_t z = 0;
    assert_null(fc_div(ctx, int_tensor(ctx, FC_U8, a, 4), int_tensor(ctx, FC_U8, &z, 1)));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_DIV_ZERO);
    fc_ctx_clear_error(ctx);
    double bz[6] = {1, 2, 3, 0, 5, 6};
    fc_tensor *tz = fct_make(ctx, FC_I64, (const int64_t[]){2, 3}, 2, bz, FCT_TRANSPOSED);
    assert_null(fc_div(ctx, fct_make(ctx, FC_I64, (const int64_t[]){2, 3}, 2, bz, FCT_CONTIG), tz));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_DIV_ZERO);
    fc_ctx_clear_error(ctx);
    /* the scalar forms convert first: 0.5 becomes 0 in i32 */
    assert_null(fc_div_scalar(ctx, ta, 0));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_DIV_ZERO);
    assert_non_null(strstr(fc_ctx_error(ctx), "div_scalar"));
    fc_ctx_clear_error(ctx);
    assert_null(fc_div_scalar(ctx, ta, 0.5));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_DIV_ZERO);
    fc_ctx_clear_error(ctx);
    /* floats: +-inf and NaN, no error */
    double fa[3] = {1, -1, 0}, fz[3] = {0, 0, 0}, got[3];
    fc_tensor *q = fc_div(ctx, fct_make(ctx, FC_F32, (const int64_t[]){3}, 1, fa, FCT_CONTIG),
                          fct_make(ctx, FC_F32, (const int64_t[]){3}, 1, fz, FCT_CONTIG));
    assert_int_equal(fct_read(q, got, 3), 3);
    assert_true(isinf(got[0]) && got[0] > 0 && isinf(got[1]) && got[1] < 0 && isnan(got[2]));
    fc_scope_end(ctx);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
}

/* ---- scalar forms -------------------------------------------------------------------- */

static void test_binary_scalar_forms(void **state) {
    fc_ctx *ctx = *state;
    typedef fc_tensor *(*sfn)(fc_ctx *, fc_tensor *, double);
    const struct {
        sfn fn;
        op o;
        bool reversed;
        const char *name;
    } forms[] = {{fc_add_scalar, ADD, false, "add_scalar"},
                 {fc_sub_scalar, SUB, false, "sub_scalar"},
                 {fc_rsub_scalar, SUB, true, "rsub_scalar"},
                 {fc_mul_scalar, MUL, false, "mul_scalar"},
                 {fc_div_scalar, DIV, false, "div_scalar"},
                 {fc_pow_scalar, POW, false, "pow_scalar"},
                 {fc_maximum_scalar, MAX, false, "maximum_scalar"},
                 {fc_minimum_scalar, MIN, false, "minimum_scalar"}};
    double x[12], got[12];
    uint64_t rng = 5;
    fc_scope_begin(ctx);
    for (size_t d = 0; d < sizeof float_dts / sizeof float_dts[0]; d++) {
        fc_dtype dt = float_dts[d];
        for (int i = 0; i < 12; i++)
            x[i] = fct_round(dt, fct_uniform(&rng, 0.25, 3));
        fc_tensor *t = fct_make(ctx, dt, (const int64_t[]){3, 4}, 2, x, FCT_TRANSPOSED);
        for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
            double s = 1.3; /* converted to dt first */
            double sd = fct_round(dt, s);
            assert_int_equal(fct_read(forms[f].fn(ctx, t, s), got, 12), 12);
            for (int i = 0; i < 12; i++) {
                double want = fct_round(dt, forms[f].reversed ? ref_float(forms[f].o, sd, x[i])
                                                              : ref_float(forms[f].o, x[i], sd));
                if (forms[f].o == POW)
                    assert_true(fabs(got[i] - want) <= 2 * fct_ulp(dt, want));
                else
                    assert_true(same(got[i], want));
            }
        }
    }
    /* integers: the scalar is cast (truncated) to the dtype first */
    int64_t iv[3] = {-7, 0, 9};
    fc_tensor *ti = int_tensor(ctx, FC_I32, iv, 3);
    fc_tensor *r = fc_add_scalar(ctx, ti, 2.7);
    for (int i = 0; i < 3; i++)
        assert_true(int_at(r, i) == iv[i] + 2);
    r = fc_rsub_scalar(ctx, ti, 1);
    for (int i = 0; i < 3; i++)
        assert_true(int_at(r, i) == 1 - iv[i]);
    r = fc_div_scalar(ctx, ti, -2);
    assert_true(int_at(r, 0) == 3 && int_at(r, 1) == 0 && int_at(r, 2) == -4);
    assert_null(fc_pow_scalar(ctx, ti, 2));
    assert_int_equal(fc_ctx_status(ctx), FC_ERR_DTYPE);
    assert_non_null(strstr(fc_ctx_error(ctx), "pow_scalar: dtype i32"));
    fc_ctx_clear_error(ctx);
    fc_scope_end(ctx);
}

/* NaN propagates through maximum and minimum from either side. */
static void test_binary_minmax_nan(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    double a[4] = {NAN, 1, NAN, 2}, b[4] = {1, NAN, NAN, -3}, got[4];
    for (size_t d = 0; d < sizeof float_dts / sizeof float_dts[0]; d++) {
        fc_tensor *ta = fct_make(ctx, float_dts[d], (const int64_t[]){4}, 1, a, FCT_CONTIG);
        fc_tensor *tb = fct_make(ctx, float_dts[d], (const int64_t[]){4}, 1, b, FCT_STRIDED);
        assert_int_equal(fct_read(fc_maximum(ctx, ta, tb), got, 4), 4);
        assert_true(isnan(got[0]) && isnan(got[1]) && isnan(got[2]) && got[3] == 2);
        assert_int_equal(fct_read(fc_minimum(ctx, ta, tb), got, 4), 4);
        assert_true(isnan(got[0]) && isnan(got[1]) && isnan(got[2]) && got[3] == -3);
    }
    fc_scope_end(ctx);
}

/* ---- refusals -------------------------------------------------------------------------- */

static void expect_error(fc_ctx *ctx, fc_tensor *r, fc_status st, const char *text) {
    assert_null(r);
    assert_int_equal(fc_ctx_status(ctx), st);
    if (!strstr(fc_ctx_error(ctx), text)) {
        fprintf(stderr, "error \"%s\" lacks \"%s\"\n", fc_ctx_error(ctx), text);
        fail();
    }
    fc_ctx_clear_error(ctx);
}

static void test_binary_errors(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    const int64_t s23[2] = {2, 3}, s4 = 4;
    fc_tensor *f32 = fc_ones(ctx, FC_F32, s23, 2), *f16 = fc_ones(ctx, FC_F16, s23, 2);
    fc_tensor *v4 = fc_ones(ctx, FC_F32, &s4, 1);
    expect_error(ctx, fc_add(ctx, f32, f16), FC_ERR_DTYPE,
                 "add: dtypes f32 and f16 differ; cast one with fc_to");
    expect_error(ctx, fc_maximum(ctx, f16, f32), FC_ERR_DTYPE, "maximum: dtypes f16 and f32");
    expect_error(ctx, fc_add(ctx, f32, v4), FC_ERR_SHAPE_MISMATCH,
                 "add: shapes [2,3] and [4] do not broadcast");
    fc_tensor *i32 = fc_ones(ctx, FC_I32, s23, 2), *bl = fc_ones(ctx, FC_BOOL, s23, 2);
    fc_tensor *f8 = fc_ones(ctx, FC_F8_E4M3, s23, 2);
    expect_error(ctx, fc_pow(ctx, i32, i32), FC_ERR_DTYPE, "pow: dtype i32 is not supported");
    expect_error(ctx, fc_mul(ctx, bl, bl), FC_ERR_DTYPE, "mul: dtype bool is not supported");
    expect_error(ctx, fc_sub(ctx, f8, f8), FC_ERR_DTYPE, "sub: dtype f8_e4m3");
    fc_tensor *q = fc_empty(ctx, FC_Q8_0, (const int64_t[]){32}, 1);
    expect_error(ctx, fc_div(ctx, q, q), FC_ERR_DTYPE, "div: dtype q8_0");
    expect_error(ctx, fc_mul_scalar(ctx, q, 2), FC_ERR_DTYPE, "mul_scalar: dtype q8_0");
    /* NULL inputs: NULL_ARG first, and an earlier error is never overwritten */
    expect_error(ctx, fc_add(ctx, NULL, f32), FC_ERR_NULL_ARG, "add: input 'a' is NULL");
    expect_error(ctx, fc_mul_scalar(ctx, NULL, 2), FC_ERR_NULL_ARG, "mul_scalar");
    assert_null(fc_add(ctx, f32, f16));
    assert_null(fc_mul(ctx, fc_add(ctx, f32, f16), f32));
    assert_null(fc_sub_scalar(ctx, fc_div(ctx, NULL, NULL), 1));
    expect_error(ctx, NULL, FC_ERR_DTYPE, "add: dtypes f32 and f16");
    assert_null(fc_add(NULL, f32, f32));
    fc_scope_end(ctx);
}

/* check_finite mode turns a non-finite result into FC_ERR_NON_FINITE. */
static void test_binary_check_finite(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    fc_tensor *one = fc_ones(ctx, FC_F32, (const int64_t[]){3}, 1);
    fc_tensor *zero = fc_zeros(ctx, FC_F32, (const int64_t[]){3}, 1);
    fc_ctx_set_check_finite(ctx, true);
    expect_error(ctx, fc_div(ctx, one, zero), FC_ERR_NON_FINITE,
                 "div: produced 3 non-finite values");
    assert_non_null(fc_div(ctx, one, one));
    assert_int_equal(fc_mul_scalar_(zero, INFINITY), FC_ERR_NON_FINITE);
    assert_non_null(strstr(fc_ctx_error(ctx), "mul_scalar_: wrote 3 non-finite values"));
    fc_ctx_clear_error(ctx);
    fc_ctx_set_check_finite(ctx, false);
    fc_scope_end(ctx);
}

/* ---- in place and add_out ----------------------------------------------------------------- */

static void test_binary_inplace_ops(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    double x[6] = {1, 2, 3, 4, 5, 6}, row[3] = {10, 20, 30}, got[6];
    const int64_t s23[2] = {2, 3}, s3 = 3;
    /* dst a transposed view; b a broadcast row */
    fc_tensor *d = fct_make(ctx, FC_F32, s23, 2, x, FCT_TRANSPOSED);
    uint32_t g0 = fc_tensor_generation(d);
    assert_int_equal(fc_add_(d, fct_make(ctx, FC_F32, &s3, 1, row, FCT_STRIDED)), FC_OK);
    assert_true(fc_tensor_generation(d) != g0);
    assert_int_equal(fct_read(d, got, 6), 6);
    for (int i = 0; i < 6; i++)
        assert_true(got[i] == x[i] + row[i % 3]);
    /* dst + dst */
    fc_tensor *c = fct_make(ctx, FC_I16, s23, 2, x, FCT_CONTIG);
    assert_int_equal(fc_add_(c, c), FC_OK);
    assert_int_equal(fct_read(c, got, 6), 6);
    for (int i = 0; i < 6; i++)
        assert_true(got[i] == 2 * x[i]);
    uint32_t g1 = fc_tensor_generation(c);
    assert_int_equal(fc_mul_scalar_(c, -3), FC_OK);
    assert_true(fc_tensor_generation(c) != g1);
    assert_int_equal(fct_read(c, got, 6), 6);
    for (int i = 0; i < 6; i++)
        assert_true(got[i] == -6 * x[i]);
    fc_tensor *h = fct_make(ctx, FC_BF16, s23, 2, x, FCT_STRIDED);
    assert_int_equal(fc_mul_scalar_(h, 0.5), FC_OK);
    assert_int_equal(fct_read(h, got, 6), 6);
    for (int i = 0; i < 6; i++)
        assert_true(got[i] == 0.5 * x[i]);
    assert_int_equal(fc_fill_(h, 1.0 / 3), FC_OK);
    assert_int_equal(fct_read(h, got, 6), 6);
    for (int i = 0; i < 6; i++)
        assert_true(got[i] == fct_round(FC_BF16, 1.0 / 3));
    fc_tensor *b8 = fc_zeros(ctx, FC_BOOL, s23, 2);
    assert_int_equal(fc_fill_(b8, 2), FC_OK); /* any nonzero is true */
    assert_int_equal(fct_read(b8, got, 6), 6);
    assert_true(got[0] == 1 && got[5] == 1);
    /* add_out into an existing tensor, a broadcast against a matrix */
    fc_tensor *out = fc_zeros(ctx, FC_F64, s23, 2);
    fc_tensor *m = fct_make(ctx, FC_F64, s23, 2, x, FCT_TRANSPOSED);
    fc_tensor *r = fct_make(ctx, FC_F64, &s3, 1, row, FCT_CONTIG);
    assert_int_equal(fc_add_out(out, r, m), FC_OK);
    assert_int_equal(fct_read(out, got, 6), 6);
    for (int i = 0; i < 6; i++)
        assert_true(got[i] == x[i] + row[i % 3]);
    assert_int_equal(fc_add_out(out, m, m), FC_OK); /* out distinct from both */
    assert_int_equal(fct_read(out, got, 6), 6);
    for (int i = 0; i < 6; i++)
        assert_true(got[i] == 2 * x[i]);
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
    fc_scope_end(ctx);
}

static void expect_status(fc_ctx *ctx, fc_status got, fc_status want, const char *text) {
    assert_int_equal(got, want);
    assert_int_equal(fc_ctx_status(ctx), want);
    if (!strstr(fc_ctx_error(ctx), text)) {
        fprintf(stderr, "error \"%s\" lacks \"%s\"\n", fc_ctx_error(ctx), text);
        fail();
    }
    fc_ctx_clear_error(ctx);
}

static void test_binary_inplace_refusals(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    const int64_t s23[2] = {2, 3}, s3 = 3;
    float buf[6] = {1, 2, 3, 4, 5, 6};
    fc_tensor *ro = fc_tensor_from_borrowed(ctx, FC_F32, s23, 2, buf, true);
    fc_tensor *one = fc_ones(ctx, FC_F32, s23, 2);
    expect_status(ctx, fc_add_(ro, one), FC_ERR_READ_ONLY, "add_: destination f32[2,3]");
    expect_status(ctx, fc_mul_scalar_(ro, 2), FC_ERR_READ_ONLY, "storage is read-only");
    expect_status(ctx, fc_fill_(ro, 0), FC_ERR_READ_ONLY, "fill_");
    expect_status(ctx, fc_add_out(ro, one, one), FC_ERR_READ_ONLY, "add_out");
    assert_true(buf[0] == 1 && buf[5] == 6);
    /* requires grad: refused while grad mode is on, allowed inside no_grad */
    fc_tensor *p = fc_param_zeros(ctx, FC_F32, s23, 2);
    expect_status(ctx, fc_add_(p, one), FC_ERR_INVALID_ARG, "add_: the destination requires grad");
    expect_status(ctx, fc_fill_(p, 1), FC_ERR_INVALID_ARG, "fill_");
    expect_status(ctx, fc_add_(one, p), FC_ERR_INVALID_ARG, "an operand requires grad");
    fc_no_grad_begin(ctx);
    assert_int_equal(fc_mul_scalar_(p, 2), FC_OK);
    assert_int_equal(fc_add_(p, one), FC_OK);
    fc_no_grad_end(ctx);
    double got[6];
    assert_int_equal(fct_read(p, got, 6), 6);
    assert_true(got[0] == 1 && got[5] == 1);
    /* a broadcast destination, a shape that does not fit, dtypes */
    fc_tensor *row = fc_ones(ctx, FC_F32, &s3, 1);
    fc_tensor *ex = fct_view(ctx, row, s23, (const int64_t[]){0, 1}, 2, 0);
    expect_status(ctx, fc_add_(ex, one), FC_ERR_UNSUPPORTED_VIEW, "broadcast view (axis 0");
    expect_status(ctx, fc_add_(row, one), FC_ERR_SHAPE_MISMATCH,
                  "add_: the operands broadcast to [2,3], not to the destination f32[3]");
    expect_status(ctx, fc_add_(one, fc_ones(ctx, FC_F64, s23, 2)), FC_ERR_DTYPE,
                  "add_: dtypes f32 and f64 differ");
    expect_status(ctx, fc_add_out(fc_zeros(ctx, FC_F64, s23, 2), one, one), FC_ERR_DTYPE,
                  "add_out: dtypes f64 and f32 differ");
    expect_status(ctx, fc_mul_scalar_(fc_zeros(ctx, FC_BOOL, s23, 2), 2), FC_ERR_DTYPE,
                  "mul_scalar_: dtype bool");
    expect_status(ctx, fc_add_(one, NULL), FC_ERR_NULL_ARG, "add_: input 'b' is NULL");
    expect_status(ctx, fc_add_(NULL, one), FC_ERR_NULL_ARG, "add_: dst is NULL");
    expect_status(ctx, fc_add_out(NULL, one, one), FC_ERR_NULL_ARG, "add_out: out is NULL");
    assert_int_equal(fc_fill_(NULL, 1), FC_ERR_NULL_ARG); /* nothing to record it in */
    assert_int_equal(fc_ctx_status(ctx), FC_OK);
    fc_scope_end(ctx);
}

/* ---- gradients: ties of maximum/minimum split the gradient 0.5 / 0.5 (PyTorch's rule) --- */

static void test_binary_grad_minmax_ties_split(void **state) {
    fc_ctx *ctx = *state;
    fc_scope_begin(ctx);
    double av[4] = {1, 2, 3, NAN}, bv[4] = {1, 5, -1, 0};
    for (int m = 0; m < 2; m++) {
        fc_tensor *a = fct_make(ctx, FC_F32, (const int64_t[]){4}, 1, av, FCT_CONTIG);
        fc_tensor *b = fct_make(ctx, FC_F32, (const int64_t[]){4}, 1, bv, FCT_CONTIG);
        assert_int_equal(fc_requires_grad(a, true), FC_OK);
        assert_int_equal(fc_requires_grad(b, true), FC_OK);
        fc_tensor *y = m ? fc_minimum(ctx, a, b) : fc_maximum(ctx, a, b);
        assert_int_equal(
            fc_backward_with(ctx, y, fc_ones(ctx, FC_F32, (const int64_t[]){4}, 1), false), FC_OK);
        double ga[4], gb[4];
        fct_read(fc_grad(a), ga, 4);
        fct_read(fc_grad(b), gb, 4);
        assert_true(ga[0] == 0.5 && gb[0] == 0.5); /* tie */
        assert_true(ga[1] == (m ? 1 : 0) && gb[1] == (m ? 0 : 1));
        assert_true(ga[2] == (m ? 0 : 1) && gb[2] == (m ? 1 : 0));
        assert_true(ga[3] == 1 && gb[3] == 0); /* the NaN that propagated gets it */
    }
    fc_scope_end(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_binary_float_layouts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_broadcast, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_large, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_large_streamed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_int, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_div_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_scalar_forms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_minmax_nan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_check_finite, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_inplace_ops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_inplace_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_grad_minmax_ties_split, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
