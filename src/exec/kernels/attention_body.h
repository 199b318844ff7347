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
 * Products inside a tile are written as axpy loops over a fixed-length
 * row (BC columns, or a head dim), the form the compiler vectorizes without
 * reordering any sum: every element of every result is summed in one fixed
 * order, so the bits depend only on the shapes and the SIMD level. Key tiles
 * are padded to BC columns with zero keys whose scores are -inf. */

/* S[i][0..BC) = sum_d A[i][d] * BT[d][0..BC), i < rows; A rows of length n,
 * BT an [n][BC] panel. */
AT_ATTR static void AT_FN(tile_abt)(AT_T *restrict S, const AT_T *restrict A, int64_t rows,
                                    int64_t n, const AT_T *restrict BT) {
    for (int64_t i = 0; i < rows; i++) {
        AT_T acc[BC];
        for (int j = 0; j < BC; j++)
            acc[j] = 0;
        const AT_T *a = A + i * n;
        for (int64_t d = 0; d < n; d++) {
            AT_T x = a[d];
            const AT_T *b = BT + d * BC;
            for (int j = 0; j < BC; j++)
                acc[j] += x * b[j];
        }
        for (int j = 0; j < BC; j++)
            S[i * BC + j] = acc[j];
    }
}

/* y[0..n) += x * r[0..n) */
AT_ATTR static inline void AT_FN(axpy)(AT_T *restrict y, AT_T x, const AT_T *restrict r,
                                       int64_t n) {
    for (int64_t c = 0; c < n; c++)
        y[c] += x * r[c];
}

/* Packs rows [r0, r0 + rows) of one (b, head) slice of v (a [.., .., R, n]
 * view) into dst [rows][n]. */
AT_ATTR static void AT_FN(pack_rows)(AT_T *restrict dst, const at_view *v, int64_t b, int64_t h,
                                     int64_t r0, int64_t rows, int64_t n) {
    const AT_T *src = (const AT_T *)v->p + b * v->s[0] + h * v->s[1] + r0 * v->s[2];
    for (int64_t r = 0; r < rows; r++, src += v->s[2]) {
        if (v->s[3] == 1) {
            memcpy(dst + r * n, src, (size_t)n * sizeof(AT_T));
        } else {
            for (int64_t d = 0; d < n; d++)
                dst[r * n + d] = src[d * v->s[3]];
        }
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
 * the padding columns. Q is packed [br][D], KT [D][BC]. */
AT_ATTR static void AT_FN(scores)(const at_job *j, AT_T *restrict S, const AT_T *Q, const AT_T *KT,
                                  int64_t b, int64_t h, int64_t i0, int64_t br, int64_t j0,
                                  int64_t bc) {
    AT_FN(tile_abt)(S, Q, br, j->D, KT);
    const AT_T scale = (AT_T)j->scale, ninf = -(AT_T)INFINITY;
    const AT_T *m = j->mask.p ? (const AT_T *)j->mask.p + b * j->mask.s[0] + h * j->mask.s[1] +
                                    i0 * j->mask.s[2] + j0 * j->mask.s[3]
                              : NULL;
    for (int64_t i = 0; i < br; i++) {
        AT_T *row = S + i * BC;
        /* keys beyond lim are hidden: the causal rule, then the tile's end */
        int64_t lim = j->causal ? i0 + i + j->S - j->T - j0 + 1 : bc;
        if (lim > bc) lim = bc;
        if (lim < 0) lim = 0;
        if (m) {
            const AT_T *mr = m + i * j->mask.s[2];
            for (int64_t c = 0; c < lim; c++)
                row[c] = row[c] * scale + mr[c * j->mask.s[3]];
        } else {
            for (int64_t c = 0; c < lim; c++)
                row[c] = row[c] * scale;
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
    int64_t g = h / j->G, D = j->D, Dv = j->Dv;
    int64_t i0 = qt * BR, br = j->T - i0 < BR ? j->T - i0 : BR;
    AT_T *Q = ws, *KT = Q + BR * D, *V = KT + D * BC, *S = V + BC * Dv, *O = S + BR * BC;
    AT_T *mx = O + BR * Dv, *l = mx + BR;
    AT_FN(pack_rows)(Q, &j->q, b, h, i0, br, D);
    for (int64_t i = 0; i < br; i++) {
        mx[i] = -(AT_T)INFINITY;
        l[i] = 0;
        for (int64_t c = 0; c < Dv; c++)
            O[i * Dv + c] = 0;
    }
    int64_t last = AT_FN(last_key_tile)(j, i0, br);
    for (int64_t kt = 0; kt <= last; kt++) {
        int64_t j0 = kt * BC, bc = j->S - j0 < BC ? j->S - j0 : BC;
        AT_FN(pack_cols)(KT, &j->k, b, g, j0, bc, D);
        AT_FN(pack_rows)(V, &j->v, b, g, j0, bc, Dv);
        AT_FN(scores)(j, S, Q, KT, b, h, i0, br, j0, bc);
        for (int64_t i = 0; i < br; i++) {
            AT_T *row = S + i * BC, tm = mx[i];
            for (int c = 0; c < BC; c++)
                tm = row[c] > tm ? row[c] : tm;
            if (tm == -(AT_T)INFINITY) continue; /* nothing visible yet: p = 0 */
            /* online softmax: rescale what was summed under the old max */
            AT_T alpha = exp(mx[i] - tm);
            mx[i] = tm;
            AT_T sum = (AT_T)AT_EXPROW(row, row, BC, tm);
            l[i] = l[i] * alpha + sum;
            AT_T *o = O + i * Dv;
            if (alpha != 1)
                for (int64_t c = 0; c < Dv; c++)
                    o[c] *= alpha;
            for (int64_t c = 0; c < bc; c++)
                if (row[c] != 0) AT_FN(axpy)(o, row[c], V + c * Dv, Dv);
        }
    }
    AT_T *lse = (AT_T *)j->lse + bh * j->T + i0;
    for (int64_t i = 0; i < br; i++) {
        AT_T *dst = (AT_T *)j->out.p + b * j->out.s[0] + h * j->out.s[1] + (i0 + i) * j->out.s[2];
        /* a row that saw no key: zeros, and lse = +inf makes every
         * recomputed probability exp(s - lse) zero in the backward */
        AT_T inv = l[i] > 0 ? 1 / l[i] : 0;
        for (int64_t c = 0; c < Dv; c++)
            dst[c * j->out.s[3]] = O[i * Dv + c] * inv;
        lse[i] = l[i] > 0 ? mx[i] + log(l[i]) : (AT_T)INFINITY;
    }
}

/* ---- backward ----------------------------------------------------------------------------- */

/* Probabilities and score gradients of one tile pair, in place: S holds the
 * scores on entry, P = exp(S - lse) on exit; dP = dO V^T becomes
 * dS = P * (dP - Di). Rows whose lse is +inf (no key seen) get P = 0. */
AT_ATTR static void AT_FN(tile_grad)(const at_job *j, AT_T *restrict S, AT_T *restrict dP,
                                     const AT_T *dO, const AT_T *VT, const AT_T *lse,
                                     const AT_T *Di, int64_t br) {
    AT_FN(tile_abt)(dP, dO, br, j->Dv, VT);
    for (int64_t i = 0; i < br; i++) {
        AT_T *p = S + i * BC, *dp = dP + i * BC;
        if (lse[i] == (AT_T)INFINITY) {
            for (int c = 0; c < BC; c++)
                p[c] = dp[c] = 0;
            continue;
        }
        AT_EXPROW(p, p, BC, lse[i]);
        for (int c = 0; c < BC; c++)
            dp[c] = p[c] * (dp[c] - Di[i]);
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
        const AT_T *g = (const AT_T *)j->dout.p + b * j->dout.s[0] + h * j->dout.s[1] +
                        i * j->dout.s[2];
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
    int64_t D = j->D, Dv = j->Dv, j0 = kt * BC, bc = j->S - j0 < BC ? j->S - j0 : BC;
    AT_T *KT = ws, *VT = KT + D * BC, *dK = VT + Dv * BC, *dV = dK + BC * D;
    AT_T *Q = dV + BC * Dv, *dO = Q + BR * D, *S = dO + BR * Dv, *dP = S + BR * BC;
    AT_T *lse = dP + BR * BC, *Di = lse + BR;
    AT_FN(pack_cols)(KT, &j->k, b, g, j0, bc, D);
    AT_FN(pack_cols)(VT, &j->v, b, g, j0, bc, Dv);
    memset(dK, 0, (size_t)(BC * D) * sizeof(AT_T));
    memset(dV, 0, (size_t)(BC * Dv) * sizeof(AT_T));
    /* with causality, the first query that sees key j0 is j0 - (S - T) */
    int64_t first = j->causal ? j0 - (j->S - j->T) : 0;
    int64_t qt0 = first > 0 ? first / BR : 0;
    for (int64_t h = g * j->G; h < (g + 1) * j->G; h++) {
        int64_t bh = b * j->Hq + h;
        for (int64_t qt = qt0; qt < j->nqt; qt++) {
            int64_t i0 = qt * BR, br = j->T - i0 < BR ? j->T - i0 : BR;
            AT_FN(pack_rows)(Q, &j->q, b, h, i0, br, D);
            AT_FN(pack_rows)(dO, &j->dout, b, h, i0, br, Dv);
            AT_FN(row_stats)(j, bh, i0, br, lse, Di);
            AT_FN(scores)(j, S, Q, KT, b, h, i0, br, j0, bc);
            AT_FN(tile_grad)(j, S, dP, dO, VT, lse, Di, br);
            for (int64_t i = 0; i < br; i++)
                for (int64_t c = 0; c < bc; c++) {
                    AT_T p = S[i * BC + c], ds = dP[i * BC + c];
                    if (p != 0) AT_FN(axpy)(dV + c * Dv, p, dO + i * Dv, Dv);
                    if (ds != 0) AT_FN(axpy)(dK + c * D, ds, Q + i * D, D);
                }
        }
    }
    const AT_T scale = (AT_T)j->scale;
    for (int64_t c = 0; c < bc; c++) {
        AT_T *dk = (AT_T *)j->dk + ((bg * j->S) + j0 + c) * D;
        AT_T *dv = (AT_T *)j->dv + ((bg * j->S) + j0 + c) * Dv;
        for (int64_t d = 0; d < D; d++)
            dk[d] = dK[c * D + d] * scale;
        memcpy(dv, dV + c * Dv, (size_t)Dv * sizeof(AT_T));
    }
}

/* dQ (and the mask's gradient, when wanted) of one (b, h, query tile). */
AT_ATTR static void AT_FN(dq_item)(const at_job *j, int64_t item, AT_T *ws) {
    int64_t qt = item % j->nqt, bh = item / j->nqt, h = bh % j->Hq, b = bh / j->Hq;
    int64_t g = h / j->G, D = j->D, Dv = j->Dv;
    int64_t i0 = qt * BR, br = j->T - i0 < BR ? j->T - i0 : BR;
    AT_T *Q = ws, *dO = Q + BR * D, *dQ = dO + BR * Dv, *KT = dQ + BR * D, *VT = KT + D * BC;
    AT_T *K = VT + Dv * BC, *S = K + BC * D, *dP = S + BR * BC, *lse = dP + BR * BC,
         *Di = lse + BR;
    AT_FN(pack_rows)(Q, &j->q, b, h, i0, br, D);
    AT_FN(pack_rows)(dO, &j->dout, b, h, i0, br, Dv);
    AT_FN(row_stats)(j, bh, i0, br, lse, Di);
    memset(dQ, 0, (size_t)(BR * D) * sizeof(AT_T));
    AT_T *dm = j->dmask ? (AT_T *)j->dmask + (bh * j->T + i0) * j->S : NULL;
    if (dm) memset(dm, 0, (size_t)(br * j->S) * sizeof(AT_T)); /* hidden tiles stay 0 */
    int64_t last = AT_FN(last_key_tile)(j, i0, br);
    for (int64_t kt = 0; kt <= last; kt++) {
        int64_t j0 = kt * BC, bc = j->S - j0 < BC ? j->S - j0 : BC;
        AT_FN(pack_cols)(KT, &j->k, b, g, j0, bc, D);
        AT_FN(pack_cols)(VT, &j->v, b, g, j0, bc, Dv);
        AT_FN(pack_rows)(K, &j->k, b, g, j0, bc, D);
        AT_FN(scores)(j, S, Q, KT, b, h, i0, br, j0, bc);
        AT_FN(tile_grad)(j, S, dP, dO, VT, lse, Di, br);
        for (int64_t i = 0; i < br; i++) {
            const AT_T *ds = dP + i * BC;
            for (int64_t c = 0; c < bc; c++)
                if (ds[c] != 0) AT_FN(axpy)(dQ + i * D, ds[c], K + c * D, D);
            if (dm) memcpy(dm + i * j->S + j0, ds, (size_t)bc * sizeof(AT_T));
        }
    }
    const AT_T scale = (AT_T)j->scale;
    AT_T *dq = (AT_T *)j->dq + (bh * j->T + i0) * D;
    for (int64_t e = 0; e < br * D; e++)
        dq[e] = dQ[e] * scale;
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
        case AT_PASS_ROWDOT:
            break;
        case AT_PASS_DKV:
            AT_FN(dkv_item)(j, it, ws);
            break;
        case AT_PASS_DQ:
            AT_FN(dq_item)(j, it, ws);
            break;
        }
    }
}
