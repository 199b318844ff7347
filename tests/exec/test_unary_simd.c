/* SPDX-License-Identifier: MIT */
/* test_unary_simd.c - the vectorized f32 kernels of
 * src/exec/kernels/unary_simd.c, every instruction set this CPU runs
 * (portable always, AVX2 and AVX-512 where present):
 *
 * - accuracy against double-precision references written here, over every
 *   4099th bit pattern of the finite floats, a dense sweep of [-10, 10]
 *   and the edges of the saturating ranges, asserting the contract stated
 *   at the top of unary_simd.c: |got - exact| <= U ulp(exact) + A;
 * - NaN, infinities, signed zeros, subnormals and huge inputs, with no
 *   invalid-operation or divide-by-zero flag raised for non-NaN inputs;
 * - every array length around the vector widths: the same bits as each
 *   element alone (lane-wise, so thread splits cannot change results),
 *   nothing written past n, in place allowed;
 * - the hook: fc__unary_f32 / fc__unary_grad_f32 give the dispatched
 *   kernels' bits for the covered kinds and keep libm for the others. */
#include <fenv.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "exec/kernels/unary_simd.h"

/* ---- double-precision references ------------------------------------------------------- */

#define GELU_C 0.044715
#define SQRT_2_OVER_PI 0.79788456080286535588

/* 1 / (1 + e^-z), in the form that is accurate on both sides */
static double sigmoid_d(double z) { return z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z)); }

static double ref_exp(double x) { return exp(x); }
static double ref_tanh(double x) { return tanh(x); }
static double ref_sigmoid(double x) { return sigmoid_d(x); }
static double ref_silu(double x) { return x == -INFINITY ? -0.0 : x * sigmoid_d(x); }
/* 0.5 x (1 + tanh(u)) = x sigmoid(2u); the first form cancels even in
 * double for u << 0. */
static double ref_gelu_tanh(double x) {
    if (x == -INFINITY) return -0.0;
    return x * sigmoid_d(2 * SQRT_2_OVER_PI * (x + GELU_C * x * x * x));
}
static double ref_softplus(double x) { return fmax(x, 0) + log1p(exp(-fabs(x))); }
/* silu' = s + x s (1 - s) */
static double ref_silu_grad(double x) {
    if (fabs(x) > 800) return x > 0 ? 1 : 0;
    return sigmoid_d(x) + x * sigmoid_d(x) * sigmoid_d(-x);
}
/* gelu' = s + x z' s (1 - s) with s = sigmoid(z), z = 2u */
static double ref_gelu_tanh_grad(double x) {
    if (fabs(x) > 100) return x > 0 ? 1 : 0;
    double z = 2 * SQRT_2_OVER_PI * (x + GELU_C * x * x * x);
    double dz = 2 * SQRT_2_OVER_PI * (1 + 3 * GELU_C * x * x);
    return sigmoid_d(z) + x * dz * sigmoid_d(z) * sigmoid_d(-z);
}

typedef struct fn_case {
    const char *name;
    fc__unary_kind kind;
    bool grad; /* gin = g * f'(x) with x the saved input */
    double (*ref)(double);
    double U, A; /* the contract: |got - exact| <= U ulp(exact) + A */
} fn_case;

static const fn_case cases[] = {
    {"exp", FC__UN_EXP, false, ref_exp, 1.5, 0},
    {"tanh", FC__UN_TANH, false, ref_tanh, 2, 0},
    {"sigmoid", FC__UN_SIGMOID, false, ref_sigmoid, 2.5, 0},
    {"silu", FC__UN_SILU, false, ref_silu, 3.5, 0},
    {"gelu_tanh", FC__UN_GELU_TANH, false, ref_gelu_tanh, 4, 0x1p-26},
    {"softplus", FC__UN_SOFTPLUS, false, ref_softplus, 3, 0},
    {"silu'", FC__UN_SILU, true, ref_silu_grad, 3, 0x1p-24},
    {"gelu_tanh'", FC__UN_GELU_TANH, true, ref_gelu_tanh_grad, 3, 0x1p-24},
    {"softplus'", FC__UN_SOFTPLUS, true, ref_sigmoid, 2.5, 0},
};
#define NCASES (sizeof cases / sizeof cases[0])

static void run_case(fc__isa isa, const fn_case *c, const float *g, const float *x, float *y,
                     int64_t n) {
    bool ok = c->grad ? fc__usimd_grad(isa, c->kind, g, x, y, n)
                      : fc__usimd_forward(isa, c->kind, x, y, n);
    assert_true(ok);
}

/* ulp of the exact value: 2^(e - 23), 2^-149 below FLT_MIN */
static double ulp_of(double r) {
    r = fabs(r);
    return r < FLT_MIN ? 0x1p-149 : ldexp(1.0, ilogb(r) - 23);
}

/* inf (and any exact value past it) counts as 2^128, one ulp of FLT_MAX
 * above it, so an overflow at the rounding threshold costs an ulp rather
 * than failing outright. */
static double finite_or_2p128(double v) { return fabs(v) > 0x1p128 ? copysign(0x1p128, v) : v; }

/* The error of got against g * d (d the exact f or f') over the bound
 * |g| (U ulp(d) + A), plus, for a gradient, one ulp for rounding the
 * product g d; <= 1 meets the contract. */
static double contract_ratio(const fn_case *c, double got, double d, double g) {
    d = finite_or_2p128(d);
    double want = finite_or_2p128(g * d);
    got = finite_or_2p128(got);
    if (got == want) return 0;
    double tol = fabs(g) * (c->U * ulp_of(d) + c->A) + (c->grad ? ulp_of(want) : 0);
    return fabs(got - want) / tol;
}

static bool isa_list(fc__isa *out, int *n) {
    *n = 0;
    for (int i = 0; i < FC__ISA_COUNT; i++)
        if (fc__isa_enabled((fc__isa)i)) out[(*n)++] = (fc__isa)i;
    return *n > 0;
}

/* ---- accuracy --------------------------------------------------------------------------- */

enum { BLOCK = 4096 };

typedef struct sweep {
    float x[BLOCK], g[BLOCK], y[BLOCK];
    double want[NCASES][BLOCK];
    int64_t n;
    double worst[FC__ISA_COUNT][NCASES];
} sweep;

static void sweep_flush(sweep *s) {
    fc__isa isas[FC__ISA_COUNT];
    int ni;
    assert_true(isa_list(isas, &ni));
    for (size_t c = 0; c < NCASES; c++)
        for (int64_t i = 0; i < s->n; i++)
            s->want[c][i] = cases[c].ref(s->x[i]);
    for (int j = 0; j < ni; j++)
        for (size_t c = 0; c < NCASES; c++) {
            run_case(isas[j], &cases[c], s->g, s->x, s->y, s->n);
            for (int64_t i = 0; i < s->n; i++) {
                double g = cases[c].grad ? s->g[i] : 1;
                double r = contract_ratio(&cases[c], s->y[i], s->want[c][i], g);
                if (!(r <= 1))
                    fail_msg("%s %s: f(%a) = %a, want %a (g %a): %.3g of the bound",
                             fc__isa_name(isas[j]), cases[c].name, (double)s->x[i], (double)s->y[i],
                             g * s->want[c][i], g, r);
                if (r > s->worst[isas[j]][c]) s->worst[isas[j]][c] = r;
            }
        }
    s->n = 0;
}

static void sweep_add(sweep *s, float v, uint64_t *rng) {
    /* gradients take g in +-[0.5, 4): a general g, away from subnormal products */
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    float u = (float)((*rng >> 40) * 0x1p-24);
    s->x[s->n] = v;
    s->g[s->n] = (u < 0.5f ? -1.0f : 1.0f) * (0.5f + 7.0f * fabsf(u - 0.5f));
    if (++s->n == BLOCK) sweep_flush(s);
}

static void test_unary_simd_accuracy_sweep(void **state) {
    (void)state;
    static sweep s;
    memset(&s, 0, sizeof s);
    uint64_t rng = 7;
    /* the whole float range, every exponent */
    for (uint64_t b = 0; b < 0x100000000ull; b += 4099) {
        uint32_t bits = (uint32_t)b;
        float v;
        memcpy(&v, &bits, sizeof v);
        if (isfinite(v)) sweep_add(&s, v, &rng);
    }
    /* where the functions bend, densely */
    for (int i = -10240; i <= 10240; i++)
        sweep_add(&s, (float)i * 0x1p-10f, &rng);
    /* the edges: exp's overflow and underflow, the subnormal results of
     * sigmoid / silu, tanh's branch point, the zeros of the derivatives */
    static const float edges[] = {88.72283f, 88.7228394f, 88.72284f, -87.33654f, -87.5f,  -90.0f,
                                  -95.0f,    -103.97f,    -104.0f,   -110.0f,    -150.0f, 0.55f,
                                  -0.55f,    0.5499999f,  -1.2785f,  -0.7518f,   -10.5f,  -11.0f,
                                  20.0f,     -20.0f,      1e-30f,    -1e-30f,    1e30f,   -1e30f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        sweep_add(&s, edges[i], &rng);
    sweep_flush(&s);
    for (int j = 0; j < FC__ISA_COUNT; j++) {
        if (!fc__isa_enabled((fc__isa)j)) continue;
        printf("# %-8s", fc__isa_name((fc__isa)j));
        for (size_t c = 0; c < NCASES; c++)
            printf(" %s %.2f", cases[c].name, s.worst[j][c]);
        printf("  (worst error / bound)\n");
    }
}

/* ---- special values ---------------------------------------------------------------------- */

static float one(fc__isa isa, size_t c, float x) {
    float g = 1, y = -12345;
    run_case(isa, &cases[c], &g, &x, &y, 1);
    return y;
}

static size_t case_of(const char *name) {
    for (size_t c = 0; c < NCASES; c++)
        if (!strcmp(cases[c].name, name)) return c;
    fail_msg("no case %s", name);
    return 0;
}

static void expect_exact(fc__isa isa, const char *name, float x, float want) {
    float got = one(isa, case_of(name), x);
    if (!(got == want && signbit(got) == signbit(want)))
        fail_msg("%s %s(%a) = %a, want %a", fc__isa_name(isa), name, (double)x, (double)got,
                 (double)want);
}

/* A zero of either sign: the limit of a derivative that approaches 0 from below. */
static void expect_zero(fc__isa isa, const char *name, float x) {
    float got = one(isa, case_of(name), x);
    if (got != 0)
        fail_msg("%s %s(%a) = %a, want 0", fc__isa_name(isa), name, (double)x, (double)got);
}

static void test_unary_simd_special_values(void **state) {
    (void)state;
    fc__isa isas[FC__ISA_COUNT];
    int ni;
    assert_true(isa_list(isas, &ni));
    const float inf = INFINITY, sub = 0x1p-140f;
    for (int j = 0; j < ni; j++) {
        fc__isa isa = isas[j];
        for (size_t c = 0; c < NCASES; c++) {
            assert_true(isnan(one(isa, c, NAN)));
            assert_true(isnan(one(isa, c, -NAN)));
        }
        expect_exact(isa, "exp", inf, inf);
        expect_exact(isa, "exp", -inf, 0);
        expect_exact(isa, "exp", 89.0f, inf);
        expect_exact(isa, "exp", -104.0f, 0);
        expect_exact(isa, "exp", 0, 1);
        expect_exact(isa, "exp", sub, 1);
        expect_exact(isa, "tanh", inf, 1);
        expect_exact(isa, "tanh", -inf, -1);
        expect_exact(isa, "tanh", 10, 1);
        expect_exact(isa, "tanh", -0.0f, -0.0f);
        expect_exact(isa, "tanh", sub, sub);
        expect_exact(isa, "tanh", -sub, -sub);
        expect_exact(isa, "sigmoid", inf, 1);
        expect_exact(isa, "sigmoid", -inf, 0);
        expect_exact(isa, "sigmoid", 0, 0.5f);
        expect_exact(isa, "sigmoid", -sub, 0.5f);
        expect_exact(isa, "silu", inf, inf);
        expect_exact(isa, "silu", -inf, -0.0f);
        expect_exact(isa, "silu", 0, 0);
        expect_exact(isa, "silu", -0.0f, -0.0f);
        expect_exact(isa, "gelu_tanh", inf, inf);
        expect_exact(isa, "gelu_tanh", -inf, -0.0f);
        expect_exact(isa, "gelu_tanh", FLT_MAX, FLT_MAX);
        expect_exact(isa, "gelu_tanh", -FLT_MAX, -0.0f);
        expect_exact(isa, "gelu_tanh", 0, 0);
        expect_exact(isa, "softplus", inf, inf);
        expect_exact(isa, "softplus", -inf, 0);
        expect_exact(isa, "softplus", 20.5f, 20.5f);
        expect_exact(isa, "softplus", 1000, 1000);
        expect_exact(isa, "silu'", inf, 1);
        expect_zero(isa, "silu'", -inf);
        expect_exact(isa, "gelu_tanh'", inf, 1);
        expect_zero(isa, "gelu_tanh'", -inf);
        expect_exact(isa, "gelu_tanh'", 0, 0.5f);
        expect_exact(isa, "softplus'", inf, 1);
        expect_exact(isa, "softplus'", -inf, 0);
        expect_exact(isa, "softplus'", 25, 1);

        /* no inf * 0, inf - inf, inf / inf or x / 0 on the way for any
         * non-NaN input, however large; tails of zeros included (n = 3) */
        const float xs[] = {inf,  -inf, FLT_MAX, -FLT_MAX, 1e20f, -1e20f, 0,     -0.0f,  sub,  -sub,
                            -100, 100,  0.55f,   -0.55f,   20,    -20,    88.8f, -88.8f, -115, 115};
        float ys[sizeof xs / sizeof xs[0]], gs[sizeof xs / sizeof xs[0]];
        const int64_t nx = (int64_t)(sizeof xs / sizeof xs[0]);
        for (int64_t i = 0; i < nx; i++)
            gs[i] = 1.5f;
        for (size_t c = 0; c < NCASES; c++)
            for (int64_t n = nx; n >= 3; n -= nx - 3) {
                feclearexcept(FE_ALL_EXCEPT);
                run_case(isa, &cases[c], gs, xs, ys, n);
                int raised = fetestexcept(FE_INVALID | FE_DIVBYZERO);
                if (raised)
                    fail_msg("%s %s raised %s", fc__isa_name(isa), cases[c].name,
                             raised & FE_INVALID ? "invalid" : "divide-by-zero");
                for (int64_t i = 0; i < n; i++)
                    assert_false(isnan(ys[i]));
            }
    }
}

/* ---- lengths, tails, aliasing ------------------------------------------------------------- */

static void test_unary_simd_lengths(void **state) {
    (void)state;
    static const int64_t lengths[] = {0, 1, 7, 8, 15, 16, 17, 31, 33, 1000};
    enum { MAXN = 1000, GUARD = 8 };
    static float x[MAXN], g[MAXN], y[MAXN + GUARD], alone[MAXN], inplace[MAXN];
    uint64_t rng = 3;
    for (int i = 0; i < MAXN; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)(((double)(rng >> 40) * 0x1p-24 - 0.5) * 24);
        g[i] = 1.0f + (float)(i % 7) * 0.25f;
    }
    fc__isa isas[FC__ISA_COUNT];
    int ni;
    assert_true(isa_list(isas, &ni));
    for (int j = 0; j < ni; j++)
        for (size_t c = 0; c < NCASES; c++) {
            for (int i = 0; i < MAXN; i++)
                run_case(isas[j], &cases[c], g + i, x + i, alone + i, 1);
            for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
                int64_t n = lengths[l];
                for (int i = 0; i < MAXN + GUARD; i++)
                    y[i] = -777.0f;
                run_case(isas[j], &cases[c], g, x, y, n);
                assert_memory_equal(y, alone, sizeof *y * (size_t)n);
                for (int64_t i = n; i < n + GUARD; i++)
                    assert_true(y[i] == -777.0f);
                /* in place: the output is the input (x forward, g gradient) */
                const float *src = cases[c].grad ? g : x;
                memcpy(inplace, src, sizeof *inplace * (size_t)n);
                bool ok = cases[c].grad
                              ? fc__usimd_grad(isas[j], cases[c].kind, inplace, x, inplace, n)
                              : fc__usimd_forward(isas[j], cases[c].kind, inplace, inplace, n);
                assert_true(ok);
                assert_memory_equal(inplace, alone, sizeof *inplace * (size_t)n);
            }
        }
}

/* ---- the hook in unary_math.c ------------------------------------------------------------- */

static void test_unary_simd_dispatch(void **state) {
    (void)state;
    enum { N = 257 };
    float x[N], g[N], a[N], b[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i - 128) * 0.0625f;
        g[i] = 0.75f;
    }
    fc__isa best = fc__isa_level();
    assert_true(fc__isa_enabled(best));
    assert_true(fc__isa_enabled(FC__ISA_PORTABLE));
    assert_false(fc__isa_enabled(FC__ISA_COUNT));
    for (size_t c = 0; c < NCASES; c++) {
        run_case(best, &cases[c], g, x, a, N);
        if (cases[c].grad)
            fc__unary_grad_f32(cases[c].kind, NULL, g, x, b, N);
        else
            fc__unary_f32(cases[c].kind, NULL, x, b, N);
        assert_memory_equal(a, b, sizeof a);
    }
    /* kinds without a vectorized kernel are declined, the output untouched */
    static const fc__unary_kind declined[] = {FC__UN_SIN, FC__UN_LOG, FC__UN_GELU, FC__UN_RELU};
    for (size_t k = 0; k < sizeof declined / sizeof declined[0]; k++) {
        a[0] = -777.0f;
        assert_false(fc__usimd_forward(best, declined[k], x, a, N));
        assert_true(a[0] == -777.0f);
    }
    assert_false(fc__usimd_grad(best, FC__UN_EXP, g, x, a, N)); /* a plain loop on y already */
    assert_false(fc__usimd_forward(best, FC__UN_COUNT, x, a, N));
    /* ...and fc__unary_f32 still computes them */
    fc__unary_f32(FC__UN_SIN, NULL, x, b, N);
    for (int i = 0; i < N; i++)
        assert_true(fabs(b[i] - sin((double)x[i])) <= 1e-6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary_simd_accuracy_sweep),
        cmocka_unit_test(test_unary_simd_special_values),
        cmocka_unit_test(test_unary_simd_lengths),
        cmocka_unit_test(test_unary_simd_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
