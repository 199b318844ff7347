/* SPDX-License-Identifier: MIT */
/* qdot.h - the kernels behind fc__qgemm_run: packed activation layouts,
 * the dot-product kernel interface and the per-ISA kernel tables.
 *
 * A product y[m, n] = x[m, :] . W[n, :] runs in two steps. First every
 * activation row x[m, :] is "packed" once (qdot_portable.c): quantized to
 * 8-bit codes (or, for nf4, only reordered in f32) into a layout that lets a
 * SIMD kernel feed a weight block straight into integer dot instructions.
 * Then a kernel dots one weight row against 1..FC__QDOT_MAX_ROWS packed
 * activation rows, decoding each weight block once in registers and using it
 * for all of them. Every ISA reads the same packed bytes and every kernel
 * gives the portable kernel's bits, at any number of rows per call (the
 * canonical order below), so a product is the same bits at every ISA
 * level. (It must be: the next layer quantizes these outputs, and one ulp
 * at a rounding half-step moves a code by one, which on a row with an
 * outlier is a jump of amax / 127 in that activation.)
 *
 * Canonical order (what the portable kernels do and the SIMD ones
 * reproduce). No FMA anywhere: each product and each sum rounds once.
 *   q4_0, q8_0  s_b = the exact integer dot of block b (with q4_0's -8
 *               offset); t_b = (d_w * d_x) * (float)s_b; 8 lanes, block b
 *               adding t_b to lane b % 8 (one group of 8 blocks at a time,
 *               a partial last group adding +0 to the lanes past the
 *               end); the result sum8(lanes).
 *   q4_k        8 lanes: lane L's exact integer per super-block is the sum
 *               over its 8 sub-blocks of scale * (the products of values
 *               4L .. 4L + 3 of the sub-block), and acc[L] += (float)int *
 *               (d * d_x); 4 lanes of mins: lane i's integer m[2i] *
 *               sums[2i] + m[2i + 1] * sums[2i + 1], accm[i] += (float)int
 *               * (dmin * d_x); the result sum8(acc) - sum4(accm), sum4(a)
 *               = (a0 + a2) + (a1 + a3). (AVX2's registers as they come;
 *               AVX-512 folds lanes L and L + 8.)
 *   q6_k        8 lanes: lane L's integer per super-block is the sum over
 *               the 8 chunks c of 32 values of sc[2c + L / 4] * (the
 *               products of values 32c + 4L .. 32c + 4L + 3), minus 32 *
 *               (sc[2L] sums[2L] + sc[2L + 1] sums[2L + 1]); acc[L] +=
 *               (float)int * (d * d_x); the result sum8(acc).
 *   nf4         two 8-lane sums: lane l of a0 adds lut[low nibble] * x of
 *               code byte 8q + l of every block (q = 0..3), a1 the high
 *               nibble's; the result sum8(a0 + a1).
 *   f32 dot     16 values a step, value 16i + l to lane l of a0, 16i + 8 + l
 *               to lane l of a1; t = sum8(a0 + a1), then the n % 16 tail
 *               values added to t in order.
 *   sum8(a) = ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)), the
 *   order of an AVX2 horizontal sum.
 *
 * Activation quantization per weight dtype (ggml's vec_dot_type where it has
 * one; d is kept in f32 where ggml rounds q8_0's to f16):
 *   q4_0, q8_0  q8 per 32 values: d = amax / 127, code = x * (1 / d)
 *               rounded half to even, as ggml's quantize_row_q8_0 (which
 *               rounds halves away from zero in its reference C).
 *   q4_k, q6_k  q8_K per 256 values: ggml's quantize_row_q8_K (iscale =
 *               -127 / the value of largest magnitude, codes <= 127) plus
 *               the sums of the codes of each 16 (q6_k) or 32 (q4_k).
 *   nf4         none: the 16 NF4 levels are not integers, so the kernel
 *               looks them up in f32 registers (scaled by the block absmax)
 *               and multiplies f32 activations; nf4 adds no rounding of x.
 *   every other supported dtype: none; the weight row is dequantized 1024
 *               values at a time into a stack buffer and dotted in f32.
 *
 * Packed layouts (one activation row of k values; records are 64-byte
 * aligned and rows are laid out one after the other):
 *   q4_0  one fc__xq_q4_0 per 4 blocks of 32 (the last may hold 1..3).
 *         Block i of the record keeps the values that meet the low nibbles
 *         (j = 0..15) at qs[16 i + j] and those that meet the high nibbles
 *         (j = 16..31) at qs[64 + 16 i + j - 16], so one 64-byte load of
 *         "low" codes matches the low nibbles of 4 blocks. d[4 i .. 4 i + 3]
 *         all hold the block's scale and c[4 i] = -8 * (sum of its codes),
 *         c[4 i + 1 .. 3] = 0: the SIMD lanes of block i are 4 i .. 4 i + 3.
 *         (The code sum, which ggml's q8_1 carries as an f16, is kept as an
 *         exact integer: with it the kernel multiplies the unsigned nibbles
 *         as they are, sum (q - 8) x = sum q x - 8 sum x.)
 *   q8_0  one fc__xq_q8_0 per 2 blocks: codes in natural order, d[8 i ..
 *         8 i + 7] the scale of block i (8 lanes per block).
 *   q6_k  one fc__xq_k per 256 values: natural order, sums[s] = sum of the
 *         codes s*16 .. s*16+15, d the q8_K scale.
 *   q4_k  one fc__xq_k per 256 values, each 128 stored as the 32-value
 *         sub-blocks in the order 0, 2, 1, 3 (what the low and high nibbles
 *         of one 64-byte load of q4_k codes meet); sums[s] (s = 0..7) the
 *         sum of the codes of natural sub-block s.
 *   nf4   f32, each 32 values stored as the 16 even ones then the 16 odd
 *         ones (the low and high nibbles of 16 code bytes).
 *
 * Kernels may read whole records of the packed row (padding included) but
 * only the bytes of the weight row they are given. */
#ifndef FUCINA_BACKEND_QDOT_H
#define FUCINA_BACKEND_QDOT_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/dtype.h"

/* At most this many activation rows per kernel call, in any table (each
 * table says how many its kernels of a kind take: fc__qdot_kernels.rows). */
#define FC__QDOT_MAX_ROWS 8
/* At most this many activation rows per call of a table's dot_f32. */
#define FC__QDOT_F32_ROWS 4

/* Records are 64-byte aligned (the kernels load them with aligned loads). */
typedef struct fc__xq_q4_0 {
    _Alignas(64) int8_t qs[128];
    float d[16];
    int32_t c[16];
} fc__xq_q4_0;

typedef struct fc__xq_q8_0 {
    _Alignas(64) int8_t qs[64];
    float d[16];
} fc__xq_q8_0;

typedef struct fc__xq_k {
    _Alignas(64) int8_t qs[256];
    int16_t sums[16];
    float d;
    uint8_t pad[28];
} fc__xq_k;

_Static_assert(sizeof(fc__xq_q4_0) == 256, "q4_0 activation record is 256 bytes");
_Static_assert(sizeof(fc__xq_q8_0) == 128, "q8_0 activation record is 128 bytes");
_Static_assert(sizeof(fc__xq_k) == 320, "q8_K activation record is 320 bytes");

/* The weight dtypes with their own kernels; the rest go through the generic
 * dequantize-and-dot path. */
typedef enum fc__qkind {
    FC__QK_Q4_0,
    FC__QK_Q8_0,
    FC__QK_Q4_K,
    FC__QK_Q6_K,
    FC__QK_NF4,
    FC__QK_FAST_COUNT,
    FC__QK_GENERIC = FC__QK_FAST_COUNT
} fc__qkind;

/* The kind of a supported weight dtype. */
fc__qkind fc__qkind_of(fc_dtype wdt);

/* Bytes of one packed activation row of k values for a fast kind (a
 * multiple of 64), or 0 for the generic kind, which reads x directly. k is
 * a positive multiple of the weight block size. */
size_t fc__qpack_row_bytes(fc__qkind kind, int64_t k);

typedef struct fc__qdot_kernels fc__qdot_kernels;

/* Packs one activation row x[0..k) into dst (fc__qpack_row_bytes bytes,
 * 64-byte aligned) with kn's block quantizers; every ISA's quantizers give
 * the same bytes. A block holding a NaN or an infinity gets a NaN scale and
 * zero codes; a block whose largest magnitude is below 127 / FLT_MAX (about
 * 3.7e-37, where 1 / d would overflow) counts as all zero. */
void fc__qpack_row(const fc__qdot_kernels *kn, fc__qkind kind, const float *x, int64_t k,
                   void *dst);

/* out[r] = W_row . x_r for r < nx (1 <= nx <= the table's rows[kind]): w is one
 * weight row of k values in the kind's block format, xq the first packed
 * activation row, the next ones xq_stride bytes apart. */
typedef void (*fc__qdot_fn)(int64_t k, const void *w, const void *xq, size_t xq_stride, int nx,
                            float *out);

/* Two weight rows at once (each activation tile is read once for both):
 * out0[r] = W0 . x_r, out1[r] = W1 . x_r. */
typedef void (*fc__qdot2_fn)(int64_t k, const void *w0, const void *w1, const void *xq,
                             size_t xq_stride, int nx, float *out0, float *out1);

/* The generic path's f32 dot: out[r] = sum_i w[i] * x[r * ldx + i], i < n. */
typedef void (*fc__dot_f32_fn)(int64_t n, const float *w, const float *x, int64_t ldx, int nx,
                               float *out);

struct fc__qdot_kernels {
    const char *name;
    fc__qdot_fn dot[FC__QK_FAST_COUNT];
    /* NULL where the ISA has no two-row kernel for that kind. A two-row
     * result is the same bits as two one-row calls. */
    fc__qdot2_fn dot2[FC__QK_FAST_COUNT];
    /* The most activation rows one dot or dot2 call of a kind takes (1 ..
     * FC__QDOT_MAX_ROWS): as many as the ISA has registers to keep their
     * sums in while a decoded weight block serves them all. */
    int rows[FC__QK_FAST_COUNT];
    fc__dot_f32_fn dot_f32; /* takes 1 .. FC__QDOT_F32_ROWS rows */
    /* Activation block quantizers: q (32 or 256 codes) and the returned
     * scale d follow the rules in the file comment; bit-identical across
     * ISAs (the conversions round half to even like the portable code). */
    float (*q8_32)(const float *x, int8_t *q);
    float (*q8_256)(const float *x, int8_t *q);
};

/* Portable C: always available; the reference the SIMD kernels are tested
 * against. */
extern const fc__qdot_kernels fc__qdot_portable;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FC__QDOT_X86 1
/* AVX2 + FMA + F16C (qdot_avx2.c). */
extern const fc__qdot_kernels fc__qdot_avx2;
/* The same with AVX-VNNI (vpdpbusd / vpdpwssd on 256 bits) for the q8-code
 * dots: what the avx2 level runs on a CPU with AVX-VNNI (fc__cpu()->avxvnni;
 * Alder Lake, Sapphire Rapids, Zen 5). The same bits as fc__qdot_avx2. */
extern const fc__qdot_kernels fc__qdot_avxvnni;
/* AVX-512 F/BW/VL/DQ with VNNI (qdot_avx512.c). */
extern const fc__qdot_kernels fc__qdot_avx512;
/* The AVX2 activation block quantizers, which both SIMD tables use. */
float fc__q8_32_avx2(const float *x, int8_t *q);
float fc__q8_256_avx2(const float *x, int8_t *q);
/* The AVX2 nf4 and f32 kernels, which the AVX-512 table uses as they are. */
void fc__qdot_nf4_avx2(int64_t k, const void *w, const void *xq, size_t stride, int nx, float *out);
void fc__dot_f32_avx2(int64_t n, const float *w, const float *x, int64_t ldx, int nx, float *out);
#endif

/* ---- single-block helpers the SIMD kernels use for their tails ---------------- */

/* The integer dot of q4_0 block i (0..3) of a record against its codes,
 * including the -8 offset: sum_j (q_j - 8) * x_j. */
int32_t fc__qdot_q4_0_block_int(const uint8_t *blk, const fc__xq_q4_0 *rec, int i);
/* sum_j q_j * x_j for q8_0 block i (0..1) of a record. */
int32_t fc__qdot_q8_0_block_int(const uint8_t *blk, const fc__xq_q8_0 *rec, int i);

/* lut[i] = fc_nf4_level(i) * d for i < 16: the values an nf4 block of
 * absmax d decodes to, rounded exactly as fc_dequantize rounds them. */
void fc__qdot_nf4_lut(float d, float lut[16]);

#endif /* FUCINA_BACKEND_QDOT_H */
