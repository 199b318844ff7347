/* SPDX-License-Identifier: MIT */
/* attention_body.h - the tile loops of the fused attention, written once
 * and instantiated by attention.c for each compute type and SIMD level, the
 * way a C++ template would be (like backend/ref_gemm_kernel.h). Not a
 * header to include elsewhere.
 *
 * Before including, attention.c defines:
 *   AT_T        the compute type (float or double)
 *   AT_FN(x)    a name suffixer (x##_f32, x##_f32avx2, ...)
 *   AT_ATTR     function attributes of the instance (a target, or nothing)
 *   AT_EXPROW   AT_T-row exp: sum = AT_EXPROW(s, p, n, m) stores p = exp(s - m)
 * and, once for all instances, the job and view types, BR and BC (the
 * query and key tile sizes).
 *
 *   AT_VB, AT_RB the vector width in bytes and the rows per register block
 *               of the tile products (gemm below)
 *
 * Products inside a tile go through one register-blocked kernel written
 * with the compiler's vector extension (no intrinsics: the same source
 * serves every target). Every element of every result is summed in one
 * fixed order, so the bits depend only on the shapes and the SIMD level.
 * Key tiles are padded to BC columns with zero keys whose scores are
 * -inf; head dims are padded to Dp, Dvp (multiples of 16) with zeros. */

/* The instance's vector: AT_VB bytes of AT_T, loadable from any address
 * aligned to an element. */
typedef AT_T AT_FN(vec) __attribute__((vector_size(AT_VB), aligned(sizeof(AT_T))));
#define AT_LANES ((int64_t)(AT_VB / sizeof(AT_T)))

/* C[r][0..ncols) = (acc ? C[r][..] : 0) + sum_k A(r, k) * B[k][0..ncols)
 * for r < rows, k < K, with A(r, k) = A[r * sar + k * sak] (so A^T is a
 * stride swap) and ncols a multiple of AT_LANES. Blocks of AT_RB rows by
 * four vectors of columns are summed in registers over all of K, each
 * element in increasing k: the order is fixed by the shapes. */
AT_ATTR static void AT_FN(gemm)(AT_T *C, int64_t ldc, const AT_T *A, int64_t sar, int64_t sak,
                                const AT_T *B, int64_t ldb, int64_t rows, int64_t K, int64_t ncols,
                                bool acc) {
    typedef AT_FN(vec) V;
    const V zero = {0};
    /* one row's four accumulators (named r0 .. r3), the B vectors p0 .. p3 */
#define AT_DECL(r)                                                                                 \
    V r##0 = zero, r##1 = zero, r##2 = zero, r##3 = zero;                                          \
    if (acc) {                                                                                     \
        const AT_T *c_ = C + (r0 + r##_i) * ldc + c0;                                              \
        r##0 = *(const V *)c_, r##1 = *(const V *)(c_ + AT_LANES);                                 \
        r##2 = *(const V *)(c_ + 2 * AT_LANES), r##3 = *(const V *)(c_ + 3 * AT_LANES);            \
    }
#define AT_FMA(r)                                                                                  \
    do {                                                                                           \
        AT_T x_ = A[(r0 + r##_i) * sar + k * sak];                                                 \
        r##0 += x_ * p0, r##1 += x_ * p1, r##2 += x_ * p2, r##3 += x_ * p3;                        \
    } while (0)
#define AT_STORE(r)                                                                                \
    do {                                                                                           \
        AT_T *c_ = C + (r0 + r##_i) * ldc + c0;                                                    \
        *(V *)c_ = r##0, *(V *)(c_ + AT_LANES) = r##1;                                             \
        *(V *)(c_ + 2 * AT_LANES) = r##2, *(V *)(c_ + 3 * AT_LANES) = r##3;                        \
    } while (0)
#define AT_LOADB()                                                                                 \
    const AT_T *b_ = B + k * ldb + c0;                                                             \
    V p0 = *(const V *)b_, p1 = *(const V *)(b_ + AT_LANES);                                       \
    V p2 = *(const V *)(b_ + 2 * AT_LANES), p3 = *(const V *)(b_ + 3 * AT_LANES)
    enum { u_i = 0, w_i = 1, x_i = 2, y_i = 3 };
    int64_t c0 = 0;
    for (; c0 + 4 * AT_LANES <= ncols; c0 += 4 * AT_LANES) {
        int64_t r0 = 0;
#if AT_RB >= 4
        for (; r0 + 4 <= rows; r0 += 4) {
            AT_DECL(u) AT_DECL(w) AT_DECL(x) AT_DECL(y) for (int64_t k = 0; k < K; k++) {
                AT_LOADB();
                AT_FMA(u);
                AT_FMA(w);
                AT_FMA(x);
                AT_FMA(y);
            }
            AT_STORE(u);
            AT_STORE(w);
            AT_STORE(x);
            AT_STORE(y);
        }
#endif
#if AT_RB >= 2
        for (; r0 + 2 <= rows; r0 += 2) {
            AT_DECL(u) AT_DECL(w) for (int64_t k = 0; k < K; k++) {
                AT_LOADB();
                AT_FMA(u);
                AT_FMA(w);
            }
            AT_STORE(u);
            AT_STORE(w);
        }
#endif
        for (; r0 < rows; r0++) {
            AT_DECL(u)
            for (int64_t k = 0; k < K; k++) {
                AT_LOADB();
                AT_FMA(u);
            }
            AT_STORE(u);
        }
    }
#undef AT_DECL
#undef AT_FMA
#undef AT_STORE
#undef AT_LOADB
    for (; c0 < ncols; c0 += AT_LANES) /* the last columns, one vector at a time */
        for (int64_t r = 0; r < rows; r++) {
            AT_T *c = C + r * ldc + c0;
            V s0 = acc ? *(V *)c : zero;
            for (int64_t k = 0; k < K; k++)
                s0 += A[r * sar + k * sak] * *(const V *)(B + k * ldb + c0);
            *(V *)c = s0;
        }
}

/* Packs rows [r0, r0 + rows) of one (b, head) slice of v (a [.., .., R, n]
 * view) into dst [rows][ld], columns n .. ld-1 zero. */
AT_ATTR static void AT_FN(pack_rows)(AT_T *restrict dst, int64_t ld, const at_view *v, int64_t b,
                                     int64_t h, int64_t r0, int64_t rows, int64_t n) {
    const AT_T *src = (const AT_T *)v->p + b * v->s[0] + h * v->s[1] + r0 * v->s[2];
    for (int64_t r = 0; r < rows; r++, src += v->s[2]) {
        AT_T *out = dst + r * ld;
        if (v->s[3] == 1) {
            memcpy(out, src, (size_t)n * sizeof(AT_T));
        } else {
            for (int64_t d = 0; d < n; d++)
                out[d] = src[d * v->s[3]];
        }
        for (int64_t d = n; d < ld; d++)
            out[d] = 0;
    }
}

/* The same rows transposed into dst [n][BC], columns rows .. BC-1 zero. */
AT_ATTR static void AT_FN(pack_cols)(AT_T *restrict dst, const at_view *v, int64_t b, int64_t h,
                                     int64_t r0, int64_t rows, int64_t n) {
    const AT_T *src = (const AT_T *)v->p + b * v->s[0] + h * v->s[1] + r0 * v->s[2];
    for (int64_t d = 0; d < n; d++) {
        const AT_T *col = src + d * v->s[3];
        AT_T *out = dst + d * BC;
        for (int64_t r = 0; r < rows; r++)
            out[r] = col[r * v->s[2]];
        for (int64_t r = rows; r < BC; r++)
            out[r] = 0;
    }
}

/* Scores of query rows [i0, i0 + br) against keys [j0, j0 + bc) of slice
 * (b, h): S = scale * Q K^T + mask, -inf where causality hides a key and on
 * the padding columns. Q is packed [br][Dp], KT [D][BC]. */
AT_ATTR static void AT_FN(scores)(const at_job *j, AT_T *restrict S, const AT_T *Q, const AT_T *KT,
                                  int64_t b, int64_t h, int64_t i0, int64_t br, int64_t j0,
                                  int64_t bc) {
    AT_FN(gemm)(S, BC, Q, j->Dp, 1, KT, BC, br, j->D, BC, false);
    const AT_T scale = (AT_T)j->scale, ninf = -(AT_T)INFINITY;
    const AT_T *m = j->mask.p ? (const AT_T *)j->mask.p + b * j->mask.s[0] + h * j->mask.s[1] +
                                    i0 * j->mask.s[2] + j0 * j->mask.s[3]
                              : NULL;
    for (int64_t i = 0; i < br; i++) {
        AT_T *row = S + i * BC;
        /* keys from lim on are hidden: the causal rule, then the tile's end */
        int64_t lim = j->causal ? i0 + i + j->S - j->T - j0 + 1 : bc;
        if (lim > bc) lim = bc;
        if (lim < 0) lim = 0;
        if (m) {
            const AT_T *mr = m + i * j->mask.s[2];
            FC__SIMD for (int64_t c = 0; c < lim; c++) row[c] =
                row[c] * scale + mr[c * j->mask.s[3]];
        } else {
            FC__SIMD for (int64_t c = 0; c < lim; c++) row[c] = row[c] * scale;
        }
        for (int64_t c = lim; c < BC; c++)
            row[c] = ninf;
    }
}

/* The last key tile a query tile starting at i0 of br rows sees (-1: none). */
static inline int64_t AT_FN(last_key_tile)(const at_job *j, int64_t i0, int64_t br) {
    if (!j->causal) return j->nkt - 1;
    int64_t last = i0 + br - 1 + j->S - j->T; /* the last key its last row sees */
    if (last < 0) return -1;
    if (last >= j->S) last = j->S - 1;
    return last / BC;
}

/* ---- forward: one (b, h, query tile) ---------------------------------------------------- */

AT_ATTR static void AT_FN(forward_item)(const at_job *j, int64_t item, AT_T *ws) {
    int64_t qt = item % j->nqt, bh = item / j->nqt, h = bh % j->Hq, b = bh / j->Hq;
    int64_t g = h / j->G, D = j->D, Dp = j->Dp, Dv = j->Dv, Dvp = j->Dvp;
    int64_t i0 = qt * BR, br = j->T - i0 < BR ? j->T - i0 : BR;
    AT_T *Q = ws, *KT = Q + BR * Dp, *V = KT + D * BC, *S = V + BC * Dvp, *O = S + BR * BC;
    AT_T *mx = O + BR * Dvp, *l = mx + BR;
    AT_FN(pack_rows)(Q, Dp, &j->q, b, h, i0, br, D);
    for (int64_t i = 0; i < br; i++) {
        mx[i] = -(AT_T)INFINITY;
        l[i] = 0;
    }
    memset(O, 0, (size_t)(BR * Dvp) * sizeof(AT_T));
    int64_t last = AT_FN(last_key_tile)(j, i0, br);
    for (int64_t kt = 0; kt <= last; kt++) {
        int64_t j0 = kt * BC, bc = j->S - j0 < BC ? j->S - j0 : BC;
        AT_FN(pack_cols)(KT, &j->k, b, g, j0, bc, D);
        AT_FN(pack_rows)(V, Dvp, &j->v, b, g, j0, bc, Dv);
        AT_FN(scores)(j, S, Q, KT, b, h, i0, br, j0, bc);
        for (int64_t i = 0; i < br; i++) {
            AT_T *row = S + i * BC, tm = mx[i];
            AT_SIMD_MAX(tm) for (int c = 0; c < BC; c++) tm = row[c] > tm ? row[c] : tm;
            if (tm == -(AT_T)INFINITY) { /* nothing visible yet: p = 0 */
                for (int c = 0; c < BC; c++)
                    row[c] = 0;
                continue;
            }
            /* online softmax: rescale what was summed under the old max */
            AT_T alpha = (AT_T)exp(mx[i] - tm);
            mx[i] = tm;
            l[i] = l[i] * alpha + (AT_T)AT_EXPROW(row, row, BC, tm);
            if (alpha != 1) {
                AT_T *o = O + i * Dvp;
                FC__SIMD for (int64_t c = 0; c < Dvp; c++) o[c] *= alpha;
            }
        }
        AT_FN(gemm)(O, Dvp, S, BC, 1, V, Dvp, br, bc, Dvp, true); /* O += P V */
    }
    AT_T *lse = (AT_T *)j->lse + bh * j->T + i0;
    for (int64_t i = 0; i < br; i++) {
        AT_T *dst = (AT_T *)j->out.p + b * j->out.s[0] + h * j->out.s[1] + (i0 + i) * j->out.s[2];
        /* a row that saw no key: zeros, and lse = +inf makes every
         * recomputed probability exp(s - lse) zero in the backward */
        AT_T inv = l[i] > 0 ? 1 / l[i] : 0;
        for (int64_t c = 0; c < Dv; c++)
            dst[c * j->out.s[3]] = O[i * Dvp + c] * inv;
        lse[i] = l[i] > 0 ? mx[i] + (AT_T)log(l[i]) : (AT_T)INFINITY;
    }
}

/* ---- backward ----------------------------------------------------------------------------- */

/* Probabilities and score gradients of one tile pair, in place: S holds the
 * scores on entry, P = exp(S - lse) on exit; dP = dO V^T becomes
 * dS = P * (dP - Di). Rows whose lse is +inf (no key seen) get P = 0. */
AT_ATTR static void AT_FN(tile_grad)(const at_job *j, AT_T *restrict S, AT_T *restrict dP,
                                     const AT_T *dO, const AT_T *VT, const AT_T *lse,
                                     const AT_T *Di, int64_t br) {
    AT_FN(gemm)(dP, BC, dO, j->Dvp, 1, VT, BC, br, j->Dv, BC, false);
    for (int64_t i = 0; i < br; i++) {
        AT_T *p = S + i * BC, *dp = dP + i * BC;
        if (lse[i] == (AT_T)INFINITY) {
            for (int c = 0; c < BC; c++)
                p[c] = dp[c] = 0;
            continue;
        }
        AT_EXPROW(p, p, BC, lse[i]);
        FC__SIMD for (int c = 0; c < BC; c++) dp[c] = p[c] * (dp[c] - Di[i]);
    }
}

/* Loads the saved lse and the row sums Di of rows [i0, i0 + br) of slice bh. */
static inline void AT_FN(row_stats)(const at_job *j, int64_t bh, int64_t i0, int64_t br, AT_T *lse,
                                    AT_T *Di) {
    memcpy(lse, (const AT_T *)j->lse + bh * j->T + i0, (size_t)br * sizeof(AT_T));
    memcpy(Di, (const AT_T *)j->dvec + bh * j->T + i0, (size_t)br * sizeof(AT_T));
}

/* Di = sum_c dO[i][c] * O[i][c] for the rows [r0, r1) of all B * Hq * T. */
AT_ATTR static void AT_FN(row_dots)(const at_job *j, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        int64_t i = r % j->T, h = (r / j->T) % j->Hq, b = r / (j->T * j->Hq);
        const AT_T *o = (const AT_T *)j->o.p + b * j->o.s[0] + h * j->o.s[1] + i * j->o.s[2];
        const AT_T *g =
            (const AT_T *)j->dout.p + b * j->dout.s[0] + h * j->dout.s[1] + i * j->dout.s[2];
        AT_T s = 0;
        for (int64_t c = 0; c < j->Dv; c++)
            s += o[c * j->o.s[3]] * g[c * j->dout.s[3]];
        ((AT_T *)j->dvec)[r] = s;
    }
}

/* dK and dV of one (b, kv head, key tile): every query head of the group,
 * every query tile that sees the keys, in order. */
AT_ATTR static void AT_FN(dkv_item)(const at_job *j, int64_t item, AT_T *ws) {
    int64_t kt = item % j->nkt, bg = item / j->nkt, g = bg % j->Hkv, b = bg / j->Hkv;
    int64_t D = j->D, Dp = j->Dp, Dv = j->Dv, Dvp = j->Dvp;
    int64_t j0 = kt * BC, bc = j->S - j0 < BC ? j->S - j0 : BC;
    AT_T *KT = ws, *VT = KT + D * BC, *dK = VT + Dv * BC, *dV = dK + BC * Dp;
    AT_T *Q = dV + BC * Dvp, *dO = Q + BR * Dp, *S = dO + BR * Dvp, *dP = S + BR * BC;
    AT_T *lse = dP + BR * BC, *Di = lse + BR;
    AT_FN(pack_cols)(KT, &j->k, b, g, j0, bc, D);
    AT_FN(pack_cols)(VT, &j->v, b, g, j0, bc, Dv);
    memset(dK, 0, (size_t)(BC * Dp) * sizeof(AT_T));
    memset(dV, 0, (size_t)(BC * Dvp) * sizeof(AT_T));
    /* with causality, the first query that sees key j0 is j0 - (S - T) */
    int64_t first = j->causal ? j0 - (j->S - j->T) : 0;
    int64_t qt0 = first > 0 ? first / BR : 0;
    for (int64_t h = g * j->G; h < (g + 1) * j->G; h++) {
        int64_t bh = b * j->Hq + h;
        for (int64_t qt = qt0; qt < j->nqt; qt++) {
            int64_t i0 = qt * BR, br = j->T - i0 < BR ? j->T - i0 : BR;
            AT_FN(pack_rows)(Q, Dp, &j->q, b, h, i0, br, D);
            AT_FN(pack_rows)(dO, Dvp, &j->dout, b, h, i0, br, Dv);
            AT_FN(row_stats)(j, bh, i0, br, lse, Di);
            AT_FN(scores)(j, S, Q, KT, b, h, i0, br, j0, bc);
            AT_FN(tile_grad)(j, S, dP, dO, VT, lse, Di, br);
            AT_FN(gemm)(dV, Dvp, S, 1, BC, dO, Dvp, bc, br, Dvp, true); /* dV += P^T dO */
            AT_FN(gemm)(dK, Dp, dP, 1, BC, Q, Dp, bc, br, Dp, true);    /* dK += dS^T Q */
        }
    }
    const AT_T scale = (AT_T)j->scale;
    for (int64_t c = 0; c < bc; c++) {
        AT_T *dk = (AT_T *)j->dk + ((bg * j->S) + j0 + c) * D;
        AT_T *dv = (AT_T *)j->dv + ((bg * j->S) + j0 + c) * Dv;
        for (int64_t d = 0; d < D; d++)
            dk[d] = dK[c * Dp + d] * scale;
        memcpy(dv, dV + c * Dvp, (size_t)Dv * sizeof(AT_T));
    }
}

/* dQ (and the mask's gradient, when wanted) of one (b, h, query tile). */
AT_ATTR static void AT_FN(dq_item)(const at_job *j, int64_t item, AT_T *ws) {
    int64_t qt = item % j->nqt, bh = item / j->nqt, h = bh % j->Hq, b = bh / j->Hq;
    int64_t g = h / j->G, D = j->D, Dp = j->Dp, Dv = j->Dv, Dvp = j->Dvp;
    int64_t i0 = qt * BR, br = j->T - i0 < BR ? j->T - i0 : BR;
    AT_T *Q = ws, *dO = Q + BR * Dp, *dQ = dO + BR * Dvp, *KT = dQ + BR * Dp, *VT = KT + D * BC;
    AT_T *K = VT + Dv * BC, *S = K + BC * Dp, *dP = S + BR * BC, *lse = dP + BR * BC,
         *Di = lse + BR;
    AT_FN(pack_rows)(Q, Dp, &j->q, b, h, i0, br, D);
    AT_FN(pack_rows)(dO, Dvp, &j->dout, b, h, i0, br, Dv);
    AT_FN(row_stats)(j, bh, i0, br, lse, Di);
    memset(dQ, 0, (size_t)(BR * Dp) * sizeof(AT_T));
    AT_T *dm = j->dmask ? (AT_T *)j->dmask + (bh * j->T + i0) * j->S : NULL;
    if (dm) memset(dm, 0, (size_t)(br * j->S) * sizeof(AT_T)); /* hidden tiles stay 0 */
    int64_t last = AT_FN(last_key_tile)(j, i0, br);
    for (int64_t kt = 0; kt <= last; kt++) {
        int64_t j0 = kt * BC, bc = j->S - j0 < BC ? j->S - j0 : BC;
        AT_FN(pack_cols)(KT, &j->k, b, g, j0, bc, D);
        AT_FN(pack_cols)(VT, &j->v, b, g, j0, bc, Dv);
        AT_FN(pack_rows)(K, Dp, &j->k, b, g, j0, bc, D);
        AT_FN(scores)(j, S, Q, KT, b, h, i0, br, j0, bc);
        AT_FN(tile_grad)(j, S, dP, dO, VT, lse, Di, br);
        AT_FN(gemm)(dQ, Dp, dP, BC, 1, K, Dp, br, bc, Dp, true); /* dQ += dS K */
        if (dm)
            for (int64_t i = 0; i < br; i++)
                memcpy(dm + i * j->S + j0, dP + i * BC, (size_t)bc * sizeof(AT_T));
    }
    const AT_T scale = (AT_T)j->scale;
    for (int64_t i = 0; i < br; i++) {
        AT_T *dq = (AT_T *)j->dq + (bh * j->T + i0 + i) * D;
        for (int64_t d = 0; d < D; d++)
            dq[d] = dQ[i * Dp + d] * scale;
    }
}

/* The team's range over items of one pass; each call takes a slice of the
 * scratch. */
AT_ATTR static void AT_FN(run_items)(at_job *j, int64_t begin, int64_t end) {
    if (j->pass == AT_PASS_ROWDOT) {
        AT_FN(row_dots)(j, begin, end);
        return;
    }
    int slice = atomic_fetch_add(&j->next_slice, 1);
    AT_T *ws = (AT_T *)j->scratch + (int64_t)slice * j->ws_elems;
    for (int64_t it = begin; it < end; it++) {
        switch (j->pass) {
        case AT_PASS_FORWARD:
            AT_FN(forward_item)(j, it, ws);
            break;
        case AT_PASS_DKV:
            AT_FN(dkv_item)(j, it, ws);
            break;
        case AT_PASS_DQ:
            AT_FN(dq_item)(j, it, ws);
            break;
        case AT_PASS_ROWDOT:
            break;
        }
    }
}

#undef AT_LANES
