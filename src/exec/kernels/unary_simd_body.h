/* SPDX-License-Identifier: MIT */
/* exec/kernels/unary_simd_body.h - the math of unary_simd.c, written once
 * against a small vector interface and included by unary_simd.c once per
 * instruction set (no include guard on purpose). The includer defines:
 *
 *   V, VM, VU        lanes of float, a lane mask, lanes of uint32
 *   US_W             lanes per V (1: the portable scalar form)
 *   US_NAME(n)       n with the instruction set's suffix
 *   US_FN, US_ENTRY  attributes of the inline math / the array loops
 *   vload vstore vset vadd vsub vmul vdiv vabs vcopysign(mag, sgn)
 *   vfma(a, b, c) = a b + c        vfnma(a, b, c) = c - a b
 *   vmaxk(x, lo) = x < lo ? lo : x vmink(x, hi) = x > hi ? hi : x
 *                                  (both keep a NaN x)
 *   vge0(x) = x >= 0 (false for NaN)  vlt(a, b) = a < b  vsel(m, a, b) = m ? a : b
 *   vbits vfromu (reinterpret)  vuadd(u, c) vusub(u, c) vusubv(u, w) vushr1 vushl23
 *
 * and this file undefines all of them at its end, so the next set can
 * define its own. Every function here is a pure lane-wise map: an element
 * gets the same bits at any position, whatever the array length. */

/* ---- e^x as a significand part and a scale ------------------------------------------------ */

/* e^x = m * s. m = p 2^k1 is always a normal number and s = 2^k2 an exact
 * power of two, so a caller that multiplies e^x by something can do it on
 * m and round only once into the subnormals with the final * s. x is
 * clamped to [-120, 89]: e^-120 still rounds to 0 after the largest factor
 * a caller applies (|x z'| < 2000 in gelu'), e^89 to inf; a NaN survives
 * the clamps and poisons p. k = round(x / ln2) comes from the float bits
 * of x / ln2 + 1.5 * 2^23 (no float-to-int conversion, so a NaN is no
 * undefined behaviour); r = x - k ln2 in two parts (ln2_hi has 9 trailing
 * zero bits: k ln2_hi is exact for |k| < 512); e^r = 1 + r + r^2 Q(r) on
 * |r| <= 0.35. k in [-173, 128] is split into k1 = floor((k + 180) / 2) - 90
 * and k2 = k - k1, both in [-87, 64].
 *
 * The polynomials here (Q; tanh's P; softplus's L) are Chebyshev
 * interpolants computed in long double and rounded to float, of degree
 * just high enough that their error stays well under half an ulp. */
US_FN V US_NAME(exp_ms)(V x, V *s) {
    x = vmaxk(x, vset(-120.0f));
    x = vmink(x, vset(89.0f));
    V kf = vfma(x, vset(1.44269504088896341f), vset(12582912.0f));
    V k = vsub(kf, vset(12582912.0f));
    V r = vfnma(k, vset(0.693145751953125f), x);
    r = vfnma(k, vset(1.428606765330187045e-06f), r);
    V q = vfma(vset(1.392691862e-03f), r, vset(8.363766596e-03f));
    q = vfma(q, r, vset(4.166654870e-02f));
    q = vfma(q, r, vset(1.666657329e-01f));
    q = vfma(q, r, vset(0.5f));
    V p = vadd(vfma(vmul(r, r), q, r), vset(1.0f));
    VU kb = vusub(vbits(kf), 0x4B400000u - 180u); /* k + 180, in [7, 308] */
    VU k1 = vushr1(kb);
    VU k2 = vusubv(kb, k1);
    *s = vfromu(vushl23(vuadd(k2, 37u))); /* exponent field (k2 - 90) + 127 */
    return vmul(p, vfromu(vushl23(vuadd(k1, 37u))));
}

/* x * sigmoid(z) (sigmoid: x = 1; silu: z = x; gelu: z = x (k0 + k1 x^2)).
 * With t = e^-|z| = m s: x / (1 + t) for z >= 0, (x m) / (1 + t) * s below,
 * which stays accurate where the result is tiny and never forms inf / inf.
 * The negative branch clamps x at -120 so that x = -inf meets a finite m;
 * that is exact for callers whose z <= -120 wherever x <= -120 (all three:
 * the result is 0 there). */
US_FN V US_NAME(x_sigmoid)(V x, V z) {
    V s;
    V m = US_NAME(exp_ms)(vmul(vabs(z), vset(-1.0f)), &s);
    V t = vmul(m, s);
    VM pos = vge0(z);
    V num = vsel(pos, x, vmul(vmaxk(x, vset(-120.0f)), m));
    return vmul(vdiv(num, vadd(vset(1.0f), t)), vsel(pos, vset(1.0f), s));
}

/* g * d/dx [x sigmoid(z(x))] given z and xdz = x z'(x). With sg = sigmoid(z),
 * sg (1 - sg) = t w^2 where t = e^-|z|, w = 1 / (1 + t), so the derivative
 * sg + x z' sg (1 - sg) is w (1 + x z' t w) for z >= 0 and m w (1 + x z' w) s
 * below: the factor m is common to both terms (its error stays relative
 * where they cancel, at the zero of the derivative) and the final * s is
 * the one rounding into the subnormals. The caller clamps x so that x z'
 * stays finite where t is 0. */
US_FN V US_NAME(d_x_sigmoid)(V g, V z, V xdz) {
    V s;
    V m = US_NAME(exp_ms)(vmul(vabs(z), vset(-1.0f)), &s);
    V t = vmul(m, s);
    VM pos = vge0(z);
    V w = vdiv(vset(1.0f), vadd(vset(1.0f), t));
    V b = vsel(pos, vmul(t, w), w);
    V d = vmul(vmul(w, vsel(pos, vset(1.0f), m)), vfma(xdz, b, vset(1.0f)));
    return vmul(g, vmul(d, vsel(pos, vset(1.0f), s)));
}

/* ---- the element functions ------------------------------------------------------------------ */

US_FN V US_NAME(exp1)(V x) {
    V s;
    V m = US_NAME(exp_ms)(x, &s);
    return vmul(m, s);
}

/* tanh on a = |x|, the sign copied back at the end (so tanh(-0) = -0).
 * Below 0.55 (tanh < 0.5), where 1 - 2 / (e^2a + 1) would cancel, an odd
 * polynomial a + a^3 P(a^2); above, (1 - t) / (1 + t) with t = e^-2a <= 1/3,
 * which has no cancellation and saturates to 1 (t = 0) without overflow. */
US_FN V US_NAME(tanh1)(V x) {
    V a = vabs(x);
    V as = vmink(a, vset(0.55f)); /* the polynomial never sees inf (inf - inf) */
    V a2 = vmul(as, as);
    V p = vfma(vset(-6.610227749e-03f), a2, vset(2.130938880e-02f));
    p = vfma(p, a2, vset(-5.390942842e-02f));
    p = vfma(p, a2, vset(1.333311349e-01f));
    p = vfma(p, a2, vset(-3.333333135e-01f));
    V small = vfma(vmul(as, a2), p, as);
    V s;
    V m = US_NAME(exp_ms)(vmul(a, vset(-2.0f)), &s);
    V t = vmul(m, s);
    V big = vdiv(vsub(vset(1.0f), t), vadd(vset(1.0f), t));
    return vcopysign(vsel(vlt(a, vset(0.55f)), small, big), x);
}

US_FN V US_NAME(sigmoid1)(V x) { return US_NAME(x_sigmoid)(vset(1.0f), x); }

US_FN V US_NAME(silu1)(V x) { return US_NAME(x_sigmoid)(x, x); }

/* 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3):
 * the sigmoid form does not cancel for x << 0, where 1 + tanh(u) would. */
#define US_GELU_K0 1.5957691216057308f   /* 2 sqrt(2/pi) */
#define US_GELU_K1 0.071354816272600474f /* 2 sqrt(2/pi) 0.044715 */
US_FN V US_NAME(gelu_tanh1)(V x) {
    V z = vmul(x, vfma(vmul(x, x), vset(US_GELU_K1), vset(US_GELU_K0)));
    return US_NAME(x_sigmoid)(x, z);
}

/* softplus = max(x, 0) + log1p(e^-|x|), log1p(t) = t L(t) on t in [0, 1]
 * by a degree-10 polynomial. Above x = 20 the log1p term is below half an
 * ulp of x, so the result is exactly x, as PyTorch's threshold gives. */
US_FN V US_NAME(softplus1)(V x) {
    V s;
    V m = US_NAME(exp_ms)(vmul(vabs(x), vset(-1.0f)), &s);
    V t = vmul(m, s);
    V l = vfma(vset(1.986696618e-03f), t, vset(-1.318782661e-02f));
    l = vfma(l, t, vset(4.100657254e-02f));
    l = vfma(l, t, vset(-8.188040555e-02f));
    l = vfma(l, t, vset(1.237799600e-01f));
    l = vfma(l, t, vset(-1.608762294e-01f));
    l = vfma(l, t, vset(1.988582015e-01f));
    l = vfma(l, t, vset(-2.498649657e-01f));
    l = vfma(l, t, vset(3.333249688e-01f));
    l = vfma(l, t, vset(-4.999997914e-01f));
    l = vfma(l, t, vset(1.0f));
    return vadd(vmaxk(x, vset(0.0f)), vmul(vmul(m, l), s));
}

/* Gradients: v is the saved input. x is clamped where t is 0 already (|z|
 * past 120) so that x z' cannot meet t = 0 as inf * 0. */
US_FN V US_NAME(silu_grad1)(V g, V x) {
    x = vmink(vmaxk(x, vset(-120.0f)), vset(120.0f));
    return US_NAME(d_x_sigmoid)(g, x, x);
}

US_FN V US_NAME(gelu_tanh_grad1)(V g, V x) {
    x = vmink(vmaxk(x, vset(-20.0f)), vset(20.0f)); /* |z(20)| = 603 */
    V x2 = vmul(x, x);
    V z = vmul(x, vfma(x2, vset(US_GELU_K1), vset(US_GELU_K0)));
    V dz = vfma(x2, vset(3.0f * US_GELU_K1), vset(US_GELU_K0));
    return US_NAME(d_x_sigmoid)(g, z, vmul(x, dz));
}

/* softplus' = sigmoid(x); for x > 20 that is exactly 1 in f32 (t < 2^-28). */
US_FN V US_NAME(softplus_grad1)(V g, V x) { return vmul(g, US_NAME(sigmoid1)(x)); }

/* ---- array loops and the table -------------------------------------------------------------- */

#if US_W == 1
#define US_MAP1(F)                                                                                 \
    US_ENTRY void US_NAME(F##_n)(const float *x, float *y, int64_t n) {                            \
        FC__SIMD for (int64_t i = 0; i < n; i++) y[i] = US_NAME(F)(x[i]);                          \
    }
#define US_MAP2(F)                                                                                 \
    US_ENTRY void US_NAME(F##_n)(const float *g, const float *v, float *o, int64_t n) {            \
        FC__SIMD for (int64_t i = 0; i < n; i++) o[i] = US_NAME(F)(g[i], v[i]);                    \
    }
#else
/* The tail runs through a zero-padded lane buffer: same lanes, same bits. */
#define US_MAP1(F)                                                                                 \
    US_ENTRY void US_NAME(F##_n)(const float *x, float *y, int64_t n) {                            \
        int64_t i = 0;                                                                             \
        for (; i + US_W <= n; i += US_W)                                                           \
            vstore(y + i, US_NAME(F)(vload(x + i)));                                               \
        if (i < n) {                                                                               \
            float b[US_W] = {0};                                                                   \
            memcpy(b, x + i, sizeof *b * (size_t)(n - i));                                         \
            vstore(b, US_NAME(F)(vload(b)));                                                       \
            memcpy(y + i, b, sizeof *b * (size_t)(n - i));                                         \
        }                                                                                          \
    }
#define US_MAP2(F)                                                                                 \
    US_ENTRY void US_NAME(F##_n)(const float *g, const float *v, float *o, int64_t n) {            \
        int64_t i = 0;                                                                             \
        for (; i + US_W <= n; i += US_W)                                                           \
            vstore(o + i, US_NAME(F)(vload(g + i), vload(v + i)));                                 \
        if (i < n) {                                                                               \
            float bg[US_W] = {0}, bv[US_W] = {0};                                                  \
            memcpy(bg, g + i, sizeof *bg * (size_t)(n - i));                                       \
            memcpy(bv, v + i, sizeof *bv * (size_t)(n - i));                                       \
            vstore(bg, US_NAME(F)(vload(bg), vload(bv)));                                          \
            memcpy(o + i, bg, sizeof *bg * (size_t)(n - i));                                       \
        }                                                                                          \
    }
#endif

US_MAP1(exp1)
US_MAP1(tanh1)
US_MAP1(sigmoid1)
US_MAP1(silu1)
US_MAP1(gelu_tanh1)
US_MAP1(softplus1)
US_MAP2(silu_grad1)
US_MAP2(gelu_tanh_grad1)
US_MAP2(softplus_grad1)

static const usimd_table US_NAME(table) = {
    .fwd =
        {
            [FC__UN_EXP] = US_NAME(exp1_n),
            [FC__UN_TANH] = US_NAME(tanh1_n),
            [FC__UN_SIGMOID] = US_NAME(sigmoid1_n),
            [FC__UN_SILU] = US_NAME(silu1_n),
            [FC__UN_GELU_TANH] = US_NAME(gelu_tanh1_n),
            [FC__UN_SOFTPLUS] = US_NAME(softplus1_n),
        },
    .grad =
        {
            [FC__UN_SILU] = US_NAME(silu_grad1_n),
            [FC__UN_GELU_TANH] = US_NAME(gelu_tanh_grad1_n),
            [FC__UN_SOFTPLUS] = US_NAME(softplus_grad1_n),
        },
};

#undef US_MAP1
#undef US_MAP2
#undef US_GELU_K0
#undef US_GELU_K1
#undef V
#undef VM
#undef VU
#undef US_W
#undef US_SUFFIX
#undef US_FN
#undef US_ENTRY
#undef vload
#undef vstore
#undef vset
#undef vadd
#undef vsub
#undef vmul
#undef vdiv
#undef vabs
#undef vcopysign
#undef vfma
#undef vfnma
#undef vmaxk
#undef vmink
#undef vge0
#undef vlt
#undef vsel
#undef vbits
#undef vfromu
#undef vuadd
#undef vusub
#undef vusubv
#undef vushr1
#undef vushl23
