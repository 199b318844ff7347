/* SPDX-License-Identifier: MIT */
/* qdot_portable.c - activation packing and the portable dot kernels of the
 * quantized matmul (layouts in qdot.h).
 *
 * The packers are the only code that rounds activations, and every ISA
 * uses them, so the SIMD kernels see exactly the integers these kernels
 * see. The kernels here are written for clarity, not speed: they decode one
 * weight block at a time the way fc_dequantize does and sum exact integers
 * per block, then scale in f32. They are the reference the SIMD kernels are
 * compared with, and the path a CPU without AVX2 runs.
 *
 * Non-finite activations: a block of x holding a NaN or an infinity packs
 * with a NaN scale and zero codes (f32 layouts keep the value), so every
 * output of that row is NaN rather than a finite guess. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "backend/qdot.h"
#include "core/quant/quant.h"
#include "fucina/quant.h"

fc__qkind fc__qkind_of(fc_dtype wdt) {
    switch (wdt) {
    case FC_Q4_0:
        return FC__QK_Q4_0;
    case FC_Q8_0:
        return FC__QK_Q8_0;
    case FC_Q4_K:
        return FC__QK_Q4_K;
    case FC_Q6_K:
        return FC__QK_Q6_K;
    case FC_NF4:
        return FC__QK_NF4;
    default:
        return FC__QK_GENERIC;
    }
}

size_t fc__qpack_row_bytes(fc__qkind kind, int64_t k) {
    switch (kind) {
    case FC__QK_Q4_0:
        return sizeof(fc__xq_q4_0) * (size_t)((k / 32 + 3) / 4);
    case FC__QK_Q8_0:
        return sizeof(fc__xq_q8_0) * (size_t)((k / 32 + 1) / 2);
    case FC__QK_Q4_K:
    case FC__QK_Q6_K:
        return sizeof(fc__xq_k) * (size_t)(k / 256);
    case FC__QK_NF4:
        return sizeof(float) * (size_t)k;
    default:
        return 0;
    }
}

void fc__qdot_nf4_lut(float d, float lut[16]) {
    for (int i = 0; i < 16; i++)
        lut[i] = fc_nf4_level(i) * d;
}

/* ---- packing ------------------------------------------------------------------------ */

static float q8_32(const float *x, int8_t *q) {
    float amax = 0.0f;
    int bad = 0;
    for (int j = 0; j < 32; j++) {
        const float a = x[j] < 0 ? -x[j] : x[j];
        amax = a > amax ? a : amax;
        bad |= !(a <= FLT_MAX);
    }
    if (bad) {
        memset(q, 0, 32);
        return fc__q_bits_f32(0x7fc00000u);
    }
    const float d = amax / 127.0f;
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    if (!(id <= FLT_MAX)) {
        memset(q, 0, 32);
        return 0.0f;
    }
    for (int j = 0; j < 32; j++)
        q[j] = (int8_t)fc__q_clamp_i(fc__q_nearest_int(x[j] * id), -127, 127);
    return d;
}

static float q8_256(const float *x, int8_t *q) {
    float amax = 0.0f, max = 0.0f;
    int bad = 0;
    for (int j = 0; j < 256; j++) {
        const float a = x[j] < 0 ? -x[j] : x[j];
        bad |= !(a <= FLT_MAX);
        if (a > amax) {
            amax = a;
            max = x[j];
        }
    }
    if (bad || amax == 0.0f) {
        memset(q, 0, 256);
        return bad ? fc__q_bits_f32(0x7fc00000u) : 0.0f;
    }
    const float iscale = -127.0f / max;
    if (!(fabsf(iscale) <= FLT_MAX)) {
        memset(q, 0, 256);
        return 0.0f;
    }
    for (int j = 0; j < 256; j++)
        q[j] = (int8_t)fc__q_clamp_i(fc__q_nearest_int(iscale * x[j]), -127, 127);
    return 1.0f / iscale;
}

static int32_t sum_i8(const int8_t *q, int n) {
    int32_t s = 0;
    for (int j = 0; j < n; j++)
        s += q[j];
    return s;
}

static void pack_q4_0(const fc__qdot_kernels *kn, const float *x, int64_t k, fc__xq_q4_0 *rec) {
    const int64_t nb = k / 32;
    memset(rec, 0, fc__qpack_row_bytes(FC__QK_Q4_0, k));
    for (int64_t b = 0; b < nb; b++) {
        int8_t q[32];
        const float d = kn->q8_32(x + 32 * b, q);
        fc__xq_q4_0 *r = &rec[b / 4];
        const int i = (int)(b % 4);
        memcpy(r->qs + 16 * i, q, 16);
        memcpy(r->qs + 64 + 16 * i, q + 16, 16);
        for (int l = 0; l < 4; l++)
            r->d[4 * i + l] = d;
        r->c[4 * i] = -8 * sum_i8(q, 32);
    }
}

static void pack_q8_0(const fc__qdot_kernels *kn, const float *x, int64_t k, fc__xq_q8_0 *rec) {
    const int64_t nb = k / 32;
    memset(rec, 0, fc__qpack_row_bytes(FC__QK_Q8_0, k));
    for (int64_t b = 0; b < nb; b++) {
        fc__xq_q8_0 *r = &rec[b / 2];
        const int i = (int)(b % 2);
        const float d = kn->q8_32(x + 32 * b, r->qs + 32 * i);
        for (int l = 0; l < 8; l++)
            r->d[8 * i + l] = d;
    }
}

/* Within each 128 values, natural sub-block t of 32 goes to slot q4k_slot[t]. */
static const int q4k_slot[4] = {0, 2, 1, 3};

static void pack_k(const fc__qdot_kernels *kn, const float *x, int64_t k, fc__xq_k *rec, int q4k) {
    for (int64_t sb = 0; sb < k / 256; sb++) {
        fc__xq_k *r = &rec[sb];
        int8_t q[256];
        memset(r, 0, sizeof *r);
        r->d = kn->q8_256(x + 256 * sb, q);
        if (q4k) {
            for (int s = 0; s < 8; s++) {
                memcpy(r->qs + 128 * (s / 4) + 32 * q4k_slot[s % 4], q + 32 * s, 32);
                r->sums[s] = (int16_t)sum_i8(q + 32 * s, 32);
            }
        } else {
            memcpy(r->qs, q, 256);
            for (int s = 0; s < 16; s++)
                r->sums[s] = (int16_t)sum_i8(q + 16 * s, 16);
        }
    }
}

static void pack_nf4(const float *x, int64_t k, float *out) {
    for (int64_t g = 0; g < k; g += 32) {
        for (int t = 0; t < 16; t++) {
            out[g + t] = x[g + 2 * t];
            out[g + 16 + t] = x[g + 2 * t + 1];
        }
    }
}

void fc__qpack_row(const fc__qdot_kernels *kn, fc__qkind kind, const float *x, int64_t k,
                   void *dst) {
    switch (kind) {
    case FC__QK_Q4_0:
        pack_q4_0(kn, x, k, dst);
        break;
    case FC__QK_Q8_0:
        pack_q8_0(kn, x, k, dst);
        break;
    case FC__QK_Q4_K:
        pack_k(kn, x, k, dst, 1);
        break;
    case FC__QK_Q6_K:
        pack_k(kn, x, k, dst, 0);
        break;
    case FC__QK_NF4:
        pack_nf4(x, k, dst);
        break;
    default:
        break;
    }
}

/* ---- block integer dots ------------------------------------------------------------- */

int32_t fc__qdot_q4_0_block_int(const uint8_t *blk, const fc__xq_q4_0 *rec, int i) {
    const uint8_t *qs = blk + 2;
    const int8_t *lo = rec->qs + 16 * i, *hi = rec->qs + 64 + 16 * i;
    int32_t s = rec->c[4 * i];
    for (int j = 0; j < 16; j++)
        s += (qs[j] & 0x0F) * lo[j] + (qs[j] >> 4) * hi[j];
    return s;
}

int32_t fc__qdot_q8_0_block_int(const uint8_t *blk, const fc__xq_q8_0 *rec, int i) {
    const int8_t *qs = (const int8_t *)(blk + 2), *x = rec->qs + 32 * i;
    int32_t s = 0;
    for (int j = 0; j < 32; j++)
        s += qs[j] * x[j];
    return s;
}

/* ---- portable kernels --------------------------------------------------------------- */

static const void *row_at(const void *xq, size_t stride, int r) {
    return (const uint8_t *)xq + (size_t)r * stride;
}

/* The canonical 8-lane sum (qdot.h), in the order of the SIMD kernels'
 * horizontal sum. */
static float sum8(const float a[8]) {
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

static void dot_q4_0(int64_t k, const void *w, const void *xq, size_t stride, int nx, float *out) {
    const uint8_t *wb = w;
    const int64_t nb = k / 32;
    for (int r = 0; r < nx; r++) {
        const fc__xq_q4_0 *rec = row_at(xq, stride, r);
        float acc[8] = {0};
        for (int64_t g = 0; g < nb; g += 8) {
            for (int l = 0; l < 8; l++) {
                const int64_t b = g + l;
                float t = 0.0f; /* lanes past the last block add +0 */
                if (b < nb) {
                    const uint8_t *blk = wb + 18 * b;
                    const fc__xq_q4_0 *x = &rec[b / 4];
                    const int i = (int)(b % 4);
                    const int32_t s = fc__qdot_q4_0_block_int(blk, x, i);
                    t = fc__q_get_f16(blk) * x->d[4 * i] * (float)s;
                }
                acc[l] += t;
            }
        }
        out[r] = sum8(acc);
    }
}

static void dot_q8_0(int64_t k, const void *w, const void *xq, size_t stride, int nx, float *out) {
    const uint8_t *wb = w;
    const int64_t nb = k / 32;
    for (int r = 0; r < nx; r++) {
        const fc__xq_q8_0 *rec = row_at(xq, stride, r);
        float acc[8] = {0};
        for (int64_t g = 0; g < nb; g += 8) {
            for (int l = 0; l < 8; l++) {
                const int64_t b = g + l;
                float t = 0.0f;
                if (b < nb) {
                    const uint8_t *blk = wb + 34 * b;
                    const fc__xq_q8_0 *x = &rec[b / 2];
                    const int i = (int)(b % 2);
                    const int32_t s = fc__qdot_q8_0_block_int(blk, x, i);
                    t = fc__q_get_f16(blk) * x->d[8 * i] * (float)s;
                }
                acc[l] += t;
            }
        }
        out[r] = sum8(acc);
    }
}

/* The 8 six-bit scales and mins of a q4_K/q5_K super-block (ggml's
 * get_scale_min_k4 for j = 0..7). */
static void k4_scales(const uint8_t *q, uint8_t sc[8], uint8_t m[8]) {
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            sc[j] = q[j] & 63;
            m[j] = q[j + 4] & 63;
        } else {
            sc[j] = (uint8_t)((q[j + 4] & 0xF) | (q[j - 4] >> 6) << 4);
            m[j] = (uint8_t)((q[j + 4] >> 4) | (q[j] >> 6) << 4);
        }
    }
}

/* The canonical q4_k order (qdot.h): lane L (0..7) of a super-block's
 * integer sum takes values 4L .. 4L + 3 of every sub-block of 32, each
 * sub-block's products times its scale; lane i (0..3) of the mins' sum
 * takes sub-blocks 2i and 2i + 1. */
static void dot_q4_k(int64_t k, const void *w, const void *xq, size_t stride, int nx, float *out) {
    const uint8_t *wb = w;
    for (int r = 0; r < nx; r++) {
        const fc__xq_k *rec = row_at(xq, stride, r);
        float acc[8] = {0}, accm[4] = {0};
        for (int64_t sb = 0; sb < k / 256; sb++) {
            const uint8_t *blk = wb + 144 * sb, *qs = blk + 16;
            const fc__xq_k *x = &rec[sb];
            uint8_t sc[8], m[8];
            k4_scales(blk + 4, sc, m);
            int32_t ip[8] = {0};
            for (int s = 0; s < 8; s++) {
                const uint8_t *q = qs + 32 * (s / 2);
                const int shift = 4 * (s % 2);
                const int8_t *xs = x->qs + 128 * (s / 4) + 32 * q4k_slot[s % 4];
                for (int L = 0; L < 8; L++) {
                    int32_t part = 0;
                    for (int u = 0; u < 4; u++)
                        part += ((q[4 * L + u] >> shift) & 0x0F) * xs[4 * L + u];
                    ip[L] += sc[s] * part;
                }
            }
            const float dd = fc__q_get_f16(blk) * x->d, dm = fc__q_get_f16(blk + 2) * x->d;
            for (int L = 0; L < 8; L++)
                acc[L] += (float)ip[L] * dd;
            for (int i = 0; i < 4; i++)
                accm[i] +=
                    (float)(m[2 * i] * x->sums[2 * i] + m[2 * i + 1] * x->sums[2 * i + 1]) * dm;
        }
        out[r] = sum8(acc) - ((accm[0] + accm[2]) + (accm[1] + accm[3]));
    }
}

/* The 256 six-bit codes (0..63) of a q6_K super-block, in value order. */
static void q6k_codes(const uint8_t *blk, uint8_t q[256]) {
    const uint8_t *ql = blk, *qh = blk + 128;
    for (int h = 0; h < 2; h++, ql += 64, qh += 32, q += 128) {
        for (int l = 0; l < 32; l++) {
            q[l] = (uint8_t)((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4);
            q[l + 32] = (uint8_t)((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4);
            q[l + 64] = (uint8_t)((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4);
            q[l + 96] = (uint8_t)((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4);
        }
    }
}

/* The canonical q6_k order (qdot.h): lane L (0..7) of a super-block's
 * integer sum takes values 4L .. 4L + 3 of every chunk of 32 (sub-block
 * 2c + L / 4 of 16, times its scale), and -32 times the scaled code sums
 * of sub-blocks 2L and 2L + 1. */
static void dot_q6_k(int64_t k, const void *w, const void *xq, size_t stride, int nx, float *out) {
    const uint8_t *wb = w;
    for (int r = 0; r < nx; r++) {
        const fc__xq_k *rec = row_at(xq, stride, r);
        float acc[8] = {0};
        for (int64_t sb = 0; sb < k / 256; sb++) {
            const uint8_t *blk = wb + 210 * sb;
            const int8_t *sc = (const int8_t *)(blk + 192);
            const fc__xq_k *x = &rec[sb];
            uint8_t q[256];
            q6k_codes(blk, q);
            int32_t ip[8];
            for (int L = 0; L < 8; L++)
                ip[L] = -32 * (sc[2 * L] * x->sums[2 * L] + sc[2 * L + 1] * x->sums[2 * L + 1]);
            for (int c = 0; c < 8; c++) {
                for (int L = 0; L < 8; L++) {
                    int32_t part = 0;
                    for (int u = 0; u < 4; u++)
                        part += q[32 * c + 4 * L + u] * x->qs[32 * c + 4 * L + u];
                    ip[L] += sc[2 * c + L / 4] * part;
                }
            }
            const float dd = fc__q_get_f16(blk + 208) * x->d;
            for (int L = 0; L < 8; L++)
                acc[L] += (float)ip[L] * dd;
        }
        out[r] = sum8(acc);
    }
}

/* Lane l of a0 takes the even value of code byte 8q + l of each block, lane l
 * of a1 its odd one (what the SIMD kernels' two 8-lane sums hold). */
static void dot_nf4(int64_t k, const void *w, const void *xq, size_t stride, int nx, float *out) {
    const uint8_t *wb = w;
    for (int r = 0; r < nx; r++) {
        const float *x = row_at(xq, stride, r);
        float a0[8] = {0}, a1[8] = {0};
        for (int64_t b = 0; b < k / 64; b++) {
            const uint8_t *blk = wb + 34 * b;
            float lut[16];
            fc__qdot_nf4_lut(fc__q_get_f16(blk), lut);
            for (int q = 0; q < 4; q++) {
                /* code bytes 8q .. 8q + 7 meet packed values off .. off + 7 (even)
                 * and off + 16 .. off + 23 (odd) */
                const float *xv = x + 64 * b + 32 * (q / 2) + 8 * (q % 2);
                for (int l = 0; l < 8; l++) {
                    const uint8_t c = blk[2 + 8 * q + l];
                    a0[l] += lut[c & 0x0F] * xv[l];
                    a1[l] += lut[c >> 4] * xv[16 + l];
                }
            }
        }
        float s[8];
        for (int l = 0; l < 8; l++)
            s[l] = a0[l] + a1[l];
        out[r] = sum8(s);
    }
}

/* 16 values a step: lane l of a0 takes value 16 i + l, lane l of a1 value
 * 16 i + 8 + l; the tail of n % 16 values is added in order after the sum. */
static void dot_f32(int64_t n, const float *w, const float *x, int64_t ldx, int nx, float *out) {
    for (int r = 0; r < nx; r++) {
        const float *xr = x + r * ldx;
        float a0[8] = {0}, a1[8] = {0};
        int64_t i = 0;
        for (; i + 16 <= n; i += 16) {
            for (int l = 0; l < 8; l++) {
                a0[l] += w[i + l] * xr[i + l];
                a1[l] += w[i + 8 + l] * xr[i + 8 + l];
            }
        }
        float s[8];
        for (int l = 0; l < 8; l++)
            s[l] = a0[l] + a1[l];
        float t = sum8(s);
        for (; i < n; i++)
            t += w[i] * xr[i];
        out[r] = t;
    }
}

const fc__qdot_kernels fc__qdot_portable = {
    .name = "portable",
    .dot = {[FC__QK_Q4_0] = dot_q4_0,
            [FC__QK_Q8_0] = dot_q8_0,
            [FC__QK_Q4_K] = dot_q4_k,
            [FC__QK_Q6_K] = dot_q6_k,
            [FC__QK_NF4] = dot_nf4},
    .rows = {[FC__QK_Q4_0] = 4,
             [FC__QK_Q8_0] = 4,
             [FC__QK_Q4_K] = 4,
             [FC__QK_Q6_K] = 4,
             [FC__QK_NF4] = 4},
    .dot_f32 = dot_f32,
    .q8_32 = q8_32,
    .q8_256 = q8_256,
};
