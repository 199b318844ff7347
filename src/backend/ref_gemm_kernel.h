/* SPDX-License-Identifier: MIT */
/* ref_gemm_kernel.h - the body of the reference GEMM, written once and
 * instantiated by ref_gemm.c for each accumulator type (f32 and f64), the
 * way a C++ template would be. Not a header to include elsewhere.
 *
 * Before including, ref_gemm.c defines:
 *   REF_T        the accumulator type (float or double)
 *   REF_FN(x)    a name suffixer (x##_f32)
 *   REF_MR/NR    micro-tile rows/columns (NR a multiple of the vector width)
 *   REF_MC/KC/NC cache blocks: an MC x NC tile of C stays in a per-thread
 *                accumulator across all of K, in KC-deep slices
 *   REF_WIDE     1 for the f64 instantiation (f64 data only), 0 for the f32
 *                one (f16, bf16 and f32 data)
 * and, once for both, REF_SIMD and REF_CLONES (see the micro-kernel).
 *
 * One tile of C is one unit of parallel work: its thread packs the slices of
 * A and B it needs (converting them to REF_T once, so the inner loop is pure
 * REF_T multiply-adds that the compiler vectorises), sums K in increasing
 * order, and writes C once. Each element's sum therefore has the same order
 * whatever the thread count or schedule, and 16-bit outputs round once. */

/* dst[i*dst_stride] = (REF_T)src[i*stride] for i < n; src in dtype dt. */
#if REF_WIDE
static void REF_FN(load_run)(fc_dtype dt, const void *src, int64_t stride, int64_t n, REF_T *dst,
                             int64_t dst_stride) {
    (void)dt; /* f64 is this instantiation's only dtype */
    const double *s = src;
    for (int64_t i = 0; i < n; i++)
        dst[i * dst_stride] = s[i * stride];
}
#else
static void REF_FN(load_run)(fc_dtype dt, const void *src, int64_t stride, int64_t n, REF_T *dst,
                             int64_t dst_stride) {
    switch (dt) {
    case FC_F16: {
        const uint16_t *s = src;
        if (stride == 1 && dst_stride == 1) {
            fc__f16_to_f32_row(s, dst, (size_t)n);
        } else if (stride == 1) {
            /* a contiguous run: the SIMD row converter into a stack chunk */
            float tmp[REF_CHUNK];
            for (int64_t i0 = 0; i0 < n; i0 += REF_CHUNK) {
                int64_t len = n - i0 < REF_CHUNK ? n - i0 : REF_CHUNK;
                fc__f16_to_f32_row(s + i0, tmp, (size_t)len);
                for (int64_t i = 0; i < len; i++)
                    dst[(i0 + i) * dst_stride] = tmp[i];
            }
        } else {
            for (int64_t i = 0; i < n; i++)
                dst[i * dst_stride] = fc_f16_to_f32(s[i * stride]);
        }
        break;
    }
    case FC_BF16: {
        /* bf16 is the top half of an f32: widening is a shift, inlined here
         * because packing converts every element many times. (A signalling
         * NaN stays signalling, unlike fc_bf16_to_f32; any NaN input still
         * gives NaN outputs.) */
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) {
            uint32_t bits = (uint32_t)s[i * stride] << 16;
            float f;
            memcpy(&f, &bits, sizeof f);
            dst[i * dst_stride] = f;
        }
        break;
    }
    default: { /* FC_F32 */
        const float *s = src;
        for (int64_t i = 0; i < n; i++)
            dst[i * dst_stride] = s[i * stride];
        break;
    }
    }
}
#endif

/* Packs rows [i0, i0+mc) x depth [p0, p0+kc) of one A into MR-row panels:
 * ap[panel*MR*kc + p*MR + r]. Rows past m are zero. (rs, cs) are A's element
 * strides; the loop reads along whichever is 1. */
static void REF_FN(pack_a)(const ref_operand *A, int64_t m, int64_t i0, int64_t mc, int64_t p0,
                           int64_t kc, REF_T *ap) {
    for (int64_t ir = 0; ir < mc; ir += REF_MR) {
        REF_T *panel = ap + ir * kc;
        int64_t rows = mc - ir < REF_MR ? mc - ir : REF_MR;
        if (i0 + ir + rows > m) rows = m - (i0 + ir);
        const char *base = A->base + ((i0 + ir) * A->rs + p0 * A->cs) * A->esize;
        if (A->rs == 1 && A->cs != 1) {
            for (int64_t p = 0; p < kc; p++) {
                REF_FN(load_run)
                (A->dtype, base + p * A->cs * A->esize, 1, rows, panel + p * REF_MR, 1);
            }
        } else {
            for (int64_t r = 0; r < rows; r++) {
                REF_FN(load_run)
                (A->dtype, base + r * A->rs * A->esize, A->cs, kc, panel + r, REF_MR);
            }
        }
        for (int64_t r = rows; r < REF_MR; r++) {
            for (int64_t p = 0; p < kc; p++)
                panel[p * REF_MR + r] = 0;
        }
    }
}

/* Packs depth [p0, p0+kc) x columns [j0, j0+nc) of one B into NR-column
 * panels: bp[panel*NR*kc + p*NR + c]. Columns past n are zero. */
static void REF_FN(pack_b)(const ref_operand *B, int64_t n, int64_t p0, int64_t kc, int64_t j0,
                           int64_t nc, REF_T *bp) {
    for (int64_t jr = 0; jr < nc; jr += REF_NR) {
        REF_T *panel = bp + jr * kc;
        int64_t cols = nc - jr < REF_NR ? nc - jr : REF_NR;
        if (j0 + jr + cols > n) cols = n - (j0 + jr);
        const char *base = B->base + (p0 * B->rs + (j0 + jr) * B->cs) * B->esize;
        if (B->cs == 1 || B->rs != 1) {
            for (int64_t p = 0; p < kc; p++) {
                REF_FN(load_run)
                (B->dtype, base + p * B->rs * B->esize, B->cs, cols, panel + p * REF_NR, 1);
                for (int64_t c = cols; c < REF_NR; c++)
                    panel[p * REF_NR + c] = 0;
            }
        } else {
            for (int64_t c = 0; c < cols; c++) {
                REF_FN(load_run)(B->dtype, base + c * B->cs * B->esize, 1, kc, panel + c, REF_NR);
            }
            for (int64_t p = 0; p < kc; p++) {
                for (int64_t c = cols; c < REF_NR; c++)
                    panel[p * REF_NR + c] = 0;
            }
        }
    }
}

/* ct (MR x NR, row stride ldt) += ap (MR x kc panel) . bp (kc x NR panel).
 * Fixed trip counts over a local accumulator: the j loops become vector
 * multiply-adds (REF_SIMD keeps the compiler from unrolling them into
 * scalar shuffles first) and acc stays in registers. REF_CLONES compiles
 * AVX-512 and AVX2 copies chosen at load time by CPU feature. */
REF_CLONES static void REF_FN(micro)(int64_t kc, const REF_T *restrict ap, const REF_T *restrict bp,
                                     REF_T *restrict ct, int64_t ldt) {
    REF_T acc[REF_MR][REF_NR];
    for (int r = 0; r < REF_MR; r++) {
        REF_SIMD
        for (int j = 0; j < REF_NR; j++)
            acc[r][j] = 0;
    }
    for (int64_t p = 0; p < kc; p++) {
        const REF_T *bv = bp + p * REF_NR;
        for (int r = 0; r < REF_MR; r++) {
            REF_T av = ap[p * REF_MR + r];
            REF_SIMD
            for (int j = 0; j < REF_NR; j++)
                acc[r][j] += av * bv[j];
        }
    }
    for (int r = 0; r < REF_MR; r++) {
        REF_SIMD
        for (int j = 0; j < REF_NR; j++)
            ct[r * ldt + j] += acc[r][j];
    }
}

/* C[i0.., j0..] (mc x nc) = [C +] ct, converted to the output dtype. */
#if REF_WIDE
static void REF_FN(store)(const ref_out *C, int64_t i0, int64_t mc, int64_t j0, int64_t nc,
                          const REF_T *ct, int64_t ldt) {
    for (int64_t i = 0; i < mc; i++) {
        const double *t = ct + i * ldt;
        double *c = (double *)(void *)(C->base + ((i0 + i) * C->ld + j0) * C->esize);
        if (C->accumulate) {
            for (int64_t j = 0; j < nc; j++)
                c[j] += t[j];
        } else {
            for (int64_t j = 0; j < nc; j++)
                c[j] = t[j];
        }
    }
}
#else
/* One 16-bit row: c = round(t [+ c]) through the SIMD row converters; the
 * sum is formed in f32 and rounded once. */
static void REF_FN(store_half)(bool bf16, bool accumulate, uint16_t *c, const float *t,
                               int64_t nc) {
    if (!accumulate) {
        if (bf16)
            fc__f32_to_bf16_row(t, c, (size_t)nc);
        else
            fc__f32_to_f16_row(t, c, (size_t)nc);
        return;
    }
    float tmp[REF_CHUNK];
    for (int64_t j0 = 0; j0 < nc; j0 += REF_CHUNK) {
        size_t len = (size_t)(nc - j0 < REF_CHUNK ? nc - j0 : REF_CHUNK);
        if (bf16)
            fc__bf16_to_f32_row(c + j0, tmp, len);
        else
            fc__f16_to_f32_row(c + j0, tmp, len);
        for (size_t j = 0; j < len; j++)
            tmp[j] += t[j0 + (int64_t)j];
        if (bf16)
            fc__f32_to_bf16_row(tmp, c + j0, len);
        else
            fc__f32_to_f16_row(tmp, c + j0, len);
    }
}

static void REF_FN(store)(const ref_out *C, int64_t i0, int64_t mc, int64_t j0, int64_t nc,
                          const REF_T *ct, int64_t ldt) {
    for (int64_t i = 0; i < mc; i++) {
        const float *t = ct + i * ldt;
        char *row = C->base + ((i0 + i) * C->ld + j0) * C->esize;
        if (C->dtype == FC_F16 || C->dtype == FC_BF16) {
            REF_FN(store_half)(C->dtype == FC_BF16, C->accumulate, (uint16_t *)(void *)row, t, nc);
            continue;
        }
        float *c = (float *)(void *)row;
        if (C->accumulate) {
            for (int64_t j = 0; j < nc; j++)
                c[j] += t[j];
        } else {
            for (int64_t j = 0; j < nc; j++)
                c[j] = t[j];
        }
    }
}
#endif

/* Tiles of the job and the workspace one thread needs, in REF_T elements:
 * an A slice (ws_m x ws_k), a B slice (ws_k x ws_n) and a C tile (ws_m x
 * ws_n), each no larger than the product needs (a 4 x 4 product must not
 * allocate the half-megabyte a full tile takes). */
static int64_t REF_FN(plan)(ref_job *job) {
    const fc__gemm *g = job->g;
    job->tiles_m = (g->m + REF_MC - 1) / REF_MC;
    job->tiles_n = (g->n + REF_NC - 1) / REF_NC;
    int64_t m_pad = (g->m + REF_MR - 1) / REF_MR * REF_MR;
    int64_t n_pad = (g->n + REF_NR - 1) / REF_NR * REF_NR;
    job->ws_m = m_pad < REF_MC ? m_pad : REF_MC;
    job->ws_n = n_pad < REF_NC ? n_pad : REF_NC;
    job->ws_k = g->k < REF_KC ? g->k : REF_KC;
    return job->ws_m * job->ws_k + job->ws_k * job->ws_n + job->ws_m * job->ws_n;
}

/* One MC x NC tile of one product of the batch. */
static void REF_FN(tile)(const ref_job *job, int64_t tile, REF_T *ws) {
    const fc__gemm *g = job->g;
    int64_t per_b = job->tiles_m * job->tiles_n;
    int64_t bi = tile / per_b, t = tile % per_b;
    int64_t i0 = (t / job->tiles_n) * REF_MC, j0 = (t % job->tiles_n) * REF_NC;
    int64_t mc = g->m - i0 < REF_MC ? g->m - i0 : REF_MC;
    int64_t nc = g->n - j0 < REF_NC ? g->n - j0 : REF_NC;

    ref_operand A = job->a, B = job->b;
    ref_out C = job->c;
    A.base += bi * g->stride_a * A.esize;
    B.base += bi * g->stride_b * B.esize;
    C.base += bi * g->stride_c * C.esize;

    int64_t ldt = job->ws_n;
    REF_T *ap = ws, *bp = ws + job->ws_m * job->ws_k, *ct = bp + job->ws_k * job->ws_n;
    int64_t mc_pad = (mc + REF_MR - 1) / REF_MR * REF_MR;
    int64_t nc_pad = (nc + REF_NR - 1) / REF_NR * REF_NR;
    for (int64_t i = 0; i < mc_pad * ldt; i++)
        ct[i] = 0;
    for (int64_t p0 = 0; p0 < g->k; p0 += REF_KC) {
        int64_t kc = g->k - p0 < REF_KC ? g->k - p0 : REF_KC;
        REF_FN(pack_a)(&A, g->m, i0, mc, p0, kc, ap);
        REF_FN(pack_b)(&B, g->n, p0, kc, j0, nc, bp);
        for (int64_t ir = 0; ir < mc_pad; ir += REF_MR) {
            for (int64_t jr = 0; jr < nc_pad; jr += REF_NR) {
                REF_FN(micro)(kc, ap + ir * kc, bp + jr * kc, ct + ir * ldt + jr, ldt);
            }
        }
    }
    REF_FN(store)(&C, i0, mc, j0, nc, ct, ldt);
}

static void REF_FN(run)(const ref_job *job, int64_t begin, int64_t end, void *ws) {
    for (int64_t t = begin; t < end; t++)
        REF_FN(tile)(job, t, ws);
}
