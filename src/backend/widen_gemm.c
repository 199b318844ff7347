/* SPDX-License-Identifier: MIT */
/* widen_gemm.c - f16 and bf16 products through an f32 provider.
 *
 * Where no provider has a native 16-bit kernel on the running CPU (oneDNN
 * 2.6 multiplies bf16 only on AVX-512 CPUs and f16 only with AVX512-FP16),
 * the automatic choice still has to run the product, and fast: this
 * adapter widens A and B into dense f32 panels, multiplies them with the
 * f32 provider the automatic choice takes for that shape (OpenBLAS or
 * oneDNN), and rounds C once, adding the old C in f32 first when
 * accumulating. That is the numerics the native kernels promise (f32
 * accumulation, one rounding), so a product gives the same answer within
 * f32 rounding whichever way it ran.
 *
 * The panels live in the one workspace the call may take
 * (fc__gemm_workspace); the inner f32 provider gets dense, untransposed
 * operands and takes no workspace of its own (OpenBLAS and oneDNN never
 * do), so workspaces do not nest. */
#include <stdint.h>
#include <stdio.h>

#include "backend/backend.h"
#include "core/convert.h"

static void widen_row(fc_dtype dt, const uint16_t *src, float *dst, size_t n) {
    if (dt == FC_BF16)
        fc__bf16_to_f32_row(src, dst, n);
    else
        fc__f16_to_f32_row(src, dst, n);
}

static float widen_one(fc_dtype dt, uint16_t v) {
    return dt == FC_BF16 ? fc_bf16_to_f32(v) : fc_f16_to_f32(v);
}

/* dst (rows x cols, dense) = f32 of a 16-bit matrix with element strides
 * (rs, cs); rows with unit column stride go through the SIMD row converter. */
static void widen(fc_dtype dt, const uint16_t *src, int64_t rs, int64_t cs, int64_t rows,
                  int64_t cols, float *dst) {
    for (int64_t i = 0; i < rows; i++) {
        if (cs == 1) {
            widen_row(dt, src + i * rs, dst + i * cols, (size_t)cols);
            continue;
        }
        for (int64_t j = 0; j < cols; j++)
            dst[i * cols + j] = widen_one(dt, src[i * rs + j * cs]);
    }
}

/* c (one row of n 16-bit values) = round(src [+ c]); the sum is formed in
 * f32 in place in src (a workspace row) and rounded once. */
static void narrow_row(fc_dtype dt, uint16_t *c, float *src, int64_t n, bool accumulate) {
    if (accumulate) {
        float tmp[256];
        for (int64_t j0 = 0; j0 < n; j0 += 256) {
            size_t len = (size_t)(n - j0 < 256 ? n - j0 : 256);
            widen_row(dt, c + j0, tmp, len);
            for (size_t j = 0; j < len; j++)
                src[j0 + (int64_t)j] += tmp[j];
        }
    }
    if (dt == FC_BF16)
        fc__f32_to_bf16_row(src, c, (size_t)n);
    else
        fc__f32_to_f16_row(src, c, (size_t)n);
}

/* *out = x * y * z floats rounded up to 64 bytes; false when that overflows. */
static bool panel_bytes(int64_t x, int64_t y, int64_t z, size_t *out) {
    const size_t lim = (SIZE_MAX - 63) / sizeof(float);
    if ((uint64_t)x > lim || (uint64_t)y > lim / (size_t)x ||
        (uint64_t)z > lim / (size_t)x / (size_t)y)
        return false;
    *out = ((size_t)x * (size_t)y * (size_t)z * sizeof(float) + 63) / 64 * 64;
    return true;
}

static bool widen_supports(fc_dtype dt) {
    /* any size: the f32 choice is NULL only when neither library was built */
    return (dt == FC_F16 || dt == FC_BF16) && fc__backend_f32_inner(1, 1, 1) != NULL;
}

fc_status fc__gemm_widened(const fc__matmul_provider *inner, const fc__gemm *g, char *err,
                           size_t errcap) {
    const int64_t na = g->batch > 1 && g->stride_a ? g->batch : 1;
    const int64_t nb = g->batch > 1 && g->stride_b ? g->batch : 1;
    /* one workspace: A, B and C in f32, each 64-byte aligned; operands
     * with overlapping batch strides can be far smaller than their panels */
    size_t bytes_a, bytes_b, bytes_c;
    if (!panel_bytes(na, g->m, g->k, &bytes_a) || !panel_bytes(nb, g->k, g->n, &bytes_b) ||
        !panel_bytes(g->batch, g->m, g->n, &bytes_c) || bytes_a + bytes_b > SIZE_MAX - bytes_c) {
        snprintf(err, errcap,
                 "gemm(widen): f32 panels of %s m=%lld n=%lld k=%lld batch=%lld overflow size_t",
                 fc_dtype_name(g->dtype), (long long)g->m, (long long)g->n, (long long)g->k,
                 (long long)g->batch);
        return FC_ERR_OVERFLOW;
    }
    const size_t total = bytes_a + bytes_b + bytes_c;
    char *ws = fc__gemm_workspace(g, total);
    if (!ws) {
        snprintf(err, errcap, "gemm(widen): out of memory widening %s operands (%zu bytes)",
                 fc_dtype_name(g->dtype), total);
        return FC_ERR_OOM;
    }
    float *fa = (float *)(void *)ws;
    float *fb = (float *)(void *)(ws + bytes_a);
    float *fcw = (float *)(void *)(ws + bytes_a + bytes_b);
    const uint16_t *a = g->a, *b = g->b;
    for (int64_t i = 0; i < na; i++) {
        widen(g->dtype, a + i * g->stride_a, g->trans_a ? 1 : g->lda, g->trans_a ? g->lda : 1, g->m,
              g->k, fa + i * g->m * g->k);
    }
    for (int64_t i = 0; i < nb; i++) {
        widen(g->dtype, b + i * g->stride_b, g->trans_b ? 1 : g->ldb, g->trans_b ? g->ldb : 1, g->k,
              g->n, fb + i * g->k * g->n);
    }
    fc__gemm w = *g;
    w.dtype = FC_F32;
    w.a = fa, w.lda = g->k, w.trans_a = false, w.stride_a = na > 1 ? g->m * g->k : 0;
    w.b = fb, w.ldb = g->n, w.trans_b = false, w.stride_b = nb > 1 ? g->k * g->n : 0;
    w.c = fcw, w.ldc = g->n, w.stride_c = g->m * g->n, w.accumulate = false;
    fc_status rc = inner->gemm(&w, err, errcap);
    if (rc == FC_OK) {
        for (int64_t bi = 0; bi < g->batch; bi++) {
            uint16_t *c = (uint16_t *)g->c + bi * g->stride_c;
            float *src = fcw + bi * g->m * g->n;
            for (int64_t i = 0; i < g->m; i++)
                narrow_row(g->dtype, c + i * g->ldc, src + i * g->n, g->n, g->accumulate);
        }
    }
    fc__gemm_workspace_done(g, ws, total);
    return rc;
}

static fc_status widen_gemm(const fc__gemm *g, char *err, size_t errcap) {
    const fc__matmul_provider *inner = fc__backend_f32_inner(g->m, g->n, g->k);
    if (!inner) { /* unreachable through the dispatch: widen_supports said no */
        snprintf(err, errcap, "gemm(widen): no f32 provider (OpenBLAS or oneDNN) was built");
        return FC_ERR_BACKEND;
    }
    return fc__gemm_widened(inner, g, err, errcap);
}

const fc__matmul_provider fc__provider_widen = {
    .name = "widen",
    .id = FC_BACKEND_AUTO, /* not selectable: only the automatic choice takes it */
    .supports = widen_supports,
    .gemm = widen_gemm,
};
