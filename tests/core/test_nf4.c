/* SPDX-License-Identifier: MIT */
/* test_nf4.c - NF4, blockwise int8/int4 quantization, 4-bit packing and
 * double quantization (seed 004), plus the FC_NF4 block dtype.
 *
 * The seed's worked examples are checked literally; everything else against
 * a double-precision reference written here (the QLoRA codebook as published
 * by bitsandbytes, nearest level by exhaustive search). Error bounds, with
 * A = the block's absmax: int8 A/254, int4 A/14 (half a code step), NF4
 * A * 0.3038/2 (half the widest gap between levels, between -1 and level 1),
 * each plus 1e-6 A for f32 rounding. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fucina.h"

static const double ref_levels[16] = {
    -1.0,
    -0.6961928009986877,
    -0.5250730514526367,
    -0.39491748809814453,
    -0.28444138169288635,
    -0.18477343022823334,
    -0.09105003625154495,
    0.0,
    0.07958029955625534,
    0.16093020141124725,
    0.24611230194568634,
    0.33791524171829224,
    0.44070982933044434,
    0.5626170039176941,
    0.7229568362236023,
    1.0,
};
#define NF4_HALF_GAP ((1.0 - 0.6961928009986877) / 2)

static int ref_nearest(double v) {
    int best = 0;
    for (int i = 1; i < 16; i++) {
        if (fabs(v - ref_levels[i]) < fabs(v - ref_levels[best])) best = i;
    }
    return best;
}

static uint64_t rng_state;
static double rng_uniform(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}
static double rng_normal(void) {
    double u1 = rng_uniform(), u2 = rng_uniform();
    return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}

/* ---- the seed's examples ----------------------------------------------------- */

static void test_nf4_pack_int4_seed_example(void **state) {
    (void)state;
    const int8_t codes[5] = {-8, 7, 0, -1, 3};
    uint8_t out[3] = {0xEE, 0xEE, 0xEE};
    assert_int_equal(fc_int4_packed_bytes(5), 3);
    assert_int_equal(fc_pack_int4(codes, 5, out), FC_OK);
    /* -8 -> nibble 0, 7 -> nibble 15: byte 0 = 15 << 4 | 0 = 240 */
    assert_int_equal(out[0], 240);
    assert_int_equal(out[1], 120);
    assert_int_equal(out[2], 11);
    int8_t back[5];
    assert_int_equal(fc_unpack_int4(out, 5, back), FC_OK);
    assert_memory_equal(back, codes, sizeof codes);
}

static const float seed_x[8] = {0.5f, -0.25f, 1.0f, -1.0f, 0.125f, 0.0f, -0.75f, 0.33f};

static void test_nf4_blockwise_seed_example(void **state) {
    (void)state;
    int8_t codes[8];
    float scales[2];
    assert_int_equal(fc_blockq_block_count(8, 4), 2);
    assert_int_equal(fc_blockq_quantize(FC_BLOCKQ_NF4, seed_x, 8, 4, codes, scales), FC_OK);
    assert_true(scales[0] == 1.0f);
    assert_true(scales[1] == 0.75f);
    for (int i = 0; i < 8; i++) {
        const double a = i < 4 ? 1.0 : 0.75;
        assert_int_equal(codes[i], ref_nearest((double)seed_x[i] / a) - 8);
    }
}

/* "NF4 reconstructs with a lower max absolute error than the uniform int4
 * grid at the same 4-bit width" on the seed's x. */
static void test_nf4_beats_int4_on_seed_example(void **state) {
    (void)state;
    int8_t codes[8];
    float scales[2], y_nf4[8], y_int4[8];
    assert_int_equal(fc_blockq_quantize(FC_BLOCKQ_NF4, seed_x, 8, 4, codes, scales), FC_OK);
    assert_int_equal(fc_blockq_dequantize(FC_BLOCKQ_NF4, codes, scales, 8, 4, y_nf4), FC_OK);
    assert_int_equal(fc_blockq_quantize(FC_BLOCKQ_INT4, seed_x, 8, 4, codes, scales), FC_OK);
    assert_int_equal(fc_blockq_dequantize(FC_BLOCKQ_INT4, codes, scales, 8, 4, y_int4), FC_OK);
    double e_nf4 = 0, e_int4 = 0;
    for (int i = 0; i < 8; i++) {
        e_nf4 = fmax(e_nf4, fabs((double)seed_x[i] - y_nf4[i]));
        e_int4 = fmax(e_int4, fabs((double)seed_x[i] - y_int4[i]));
    }
    /* by hand: int4 worst is 0.5 -> 4/7 (0.0714), NF4 worst 0.5 -> 0.4407 (0.0593) */
    assert_true(fabs(e_int4 - (4.0 / 7.0 - 0.5)) < 1e-6);
    assert_true(fabs(e_nf4 - (0.5 - 0.44070982933044434)) < 1e-6);
    assert_true(e_nf4 < e_int4);
}

static void test_nf4_codebook(void **state) {
    (void)state;
    assert_true(fc_nf4_level(0) == -1.0f);
    assert_true(fc_nf4_level(7) == 0.0f);
    assert_true(fc_nf4_level(15) == 1.0f);
    for (int i = 0; i < 16; i++) {
        assert_true(fc_nf4_level(i) == (float)ref_levels[i]);
        if (i) assert_true(fc_nf4_level(i) > fc_nf4_level(i - 1));
    }
    assert_true(fc_nf4_level(-1) == 0.0f);
    assert_true(fc_nf4_level(16) == 0.0f);
}

/* ---- blockwise quantization ---------------------------------------------------- */

/* Every kind, a block size that leaves a short last block, the bounds of
 * the file comment, and the codes against the reference encoder. */
static void test_nf4_blockwise_bounds_partial_block(void **state) {
    (void)state;
    enum { N = 1000, BS = 64 };
    float x[N], y[N], scales[16];
    int8_t codes[N];
    rng_state = 4;
    for (int i = 0; i < N; i++)
        x[i] = (float)rng_normal();
    /* the last block (40 values) is much smaller: it must keep its own scale */
    for (int i = 960; i < N; i++)
        x[i] *= 1e-3f;
    const size_t nb = fc_blockq_block_count(N, BS);
    assert_int_equal(nb, 16);
    for (int kind = 0; kind < FC_BLOCKQ_COUNT; kind++) {
        assert_int_equal(fc_blockq_quantize((fc_blockq_kind)kind, x, N, BS, codes, scales), FC_OK);
        assert_int_equal(fc_blockq_dequantize((fc_blockq_kind)kind, codes, scales, N, BS, y),
                         FC_OK);
        for (size_t b = 0; b < nb; b++) {
            const size_t lo = b * BS, hi = lo + BS < N ? lo + BS : N;
            double amax = 0;
            for (size_t i = lo; i < hi; i++)
                amax = fmax(amax, fabs((double)x[i]));
            assert_true(scales[b] == (float)amax);
            const double bound = (kind == FC_BLOCKQ_INT8   ? amax / 254
                                  : kind == FC_BLOCKQ_INT4 ? amax / 14
                                                           : amax * NF4_HALF_GAP) +
                                 1e-6 * amax;
            for (size_t i = lo; i < hi; i++) {
                /* the documented encoder, in its f32 arithmetic */
                const float v = x[i] / scales[b];
                const int want = kind == FC_BLOCKQ_NF4    ? ref_nearest(v) - 8
                                 : kind == FC_BLOCKQ_INT8 ? (int)lroundf(v * 127.0f)
                                                          : (int)lroundf(v * 7.0f);
                assert_int_equal(codes[i], want);
                if (!(fabs((double)x[i] - y[i]) <= bound)) {
                    fail_msg("kind %d value %zu: x %g y %g bound %g", kind, i, (double)x[i],
                             (double)y[i], bound);
                }
            }
        }
        /* the short block: error relative to its own absmax, not block 0's */
        assert_true(scales[15] < 0.01f);
    }
}

/* A tie between NF4 levels 7 (0.0) and 8 goes to the lower level. */
static void test_nf4_tie_goes_low(void **state) {
    (void)state;
    const float x[2] = {1.0f, (float)ref_levels[8] / 2};
    int8_t codes[2];
    float scale;
    assert_int_equal(fc_blockq_quantize(FC_BLOCKQ_NF4, x, 2, 2, codes, &scale), FC_OK);
    assert_int_equal(codes[0], 7);
    assert_int_equal(codes[1], 7 - 8);
}

static void test_nf4_zero_and_extreme_blocks(void **state) {
    (void)state;
    float x[12] = {0, -0.0f, 0, 0, FLT_MAX, -FLT_MAX, 1.0f, 0, 0x1p-149f, -0x1p-149f, 0, 0x1p-149f};
    float y[12], scales[3];
    int8_t codes[12];
    for (int kind = 0; kind < FC_BLOCKQ_COUNT; kind++) {
        assert_int_equal(fc_blockq_quantize((fc_blockq_kind)kind, x, 12, 4, codes, scales), FC_OK);
        assert_int_equal(fc_blockq_dequantize((fc_blockq_kind)kind, codes, scales, 12, 4, y),
                         FC_OK);
        for (int i = 0; i < 12; i++)
            assert_true(isfinite(y[i]));
        for (int i = 0; i < 4; i++)
            assert_true(y[i] == 0.0f);
        assert_true(y[4] == FLT_MAX && y[5] == -FLT_MAX);
        /* the block of the smallest subnormals is scaled by its own absmax */
        assert_true(y[8] == 0x1p-149f && y[9] == -0x1p-149f && y[11] == 0x1p-149f);
    }
}

static void test_nf4_pack_exhaustive(void **state) {
    (void)state;
    uint8_t bytes[256], again[256];
    int8_t codes[512];
    for (int i = 0; i < 256; i++)
        bytes[i] = (uint8_t)i;
    assert_int_equal(fc_unpack_int4(bytes, 512, codes), FC_OK);
    for (int i = 0; i < 256; i++) {
        assert_int_equal(codes[2 * i], (i & 15) - 8);
        assert_int_equal(codes[2 * i + 1], (i >> 4) - 8);
    }
    assert_int_equal(fc_pack_int4(codes, 512, again), FC_OK);
    assert_memory_equal(again, bytes, sizeof bytes);
}

/* ---- double quantization --------------------------------------------------------- */

static void test_nf4_double_quant_round_trip(void **state) {
    (void)state;
    enum { N = 4096, BS = 64, NB = N / BS, OUTER = 48 }; /* 64 scales: a short outer block */
    static float x[N], y[N];
    static int8_t codes[N];
    float scales[NB], rescaled[NB], absmax[2], mean[2];
    int8_t q[NB];
    rng_state = 77;
    for (int i = 0; i < N; i++)
        x[i] = (float)(rng_normal() * (1.0 + (i / BS) % 7));
    assert_int_equal(fc_blockq_quantize(FC_BLOCKQ_NF4, x, N, BS, codes, scales), FC_OK);
    assert_int_equal(fc_blockq_block_count(NB, OUTER), 2);
    assert_int_equal(fc_double_quant_scales(scales, NB, OUTER, q, absmax, mean), FC_OK);
    for (int o = 0; o < 2; o++) {
        const int lo = o * OUTER, hi = lo + OUTER < NB ? lo + OUTER : NB;
        double sum = 0, dev = 0;
        for (int i = lo; i < hi; i++)
            sum += scales[i];
        assert_true(fabs(mean[o] - sum / (hi - lo)) <= 1e-6 * fabs(sum / (hi - lo)));
        for (int i = lo; i < hi; i++)
            dev = fmax(dev, fabs((double)scales[i] - mean[o]));
        assert_true(fabs(absmax[o] - dev) <= 1e-6 * dev);
    }
    assert_int_equal(fc_double_dequant_scales(q, absmax, mean, NB, OUTER, rescaled), FC_OK);
    for (int i = 0; i < NB; i++) {
        const double bound = absmax[i / OUTER] / 254 + 1e-6 * scales[i];
        assert_true(fabs((double)rescaled[i] - scales[i]) <= bound);
    }
    /* end to end: weights decoded with the double-quantized scales */
    assert_int_equal(fc_blockq_dequantize(FC_BLOCKQ_NF4, codes, rescaled, N, BS, y), FC_OK);
    for (int i = 0; i < N; i++) {
        const int b = i / BS;
        const double bound =
            scales[b] * NF4_HALF_GAP + fabs((double)rescaled[b] - scales[b]) + 1e-6 * scales[b];
        assert_true(fabs((double)x[i] - y[i]) <= bound);
    }
}

static void test_nf4_double_quant_constant_scales(void **state) {
    (void)state;
    float s[5] = {2.5f, 2.5f, 2.5f, 2.5f, 2.5f}, back[5], absmax, mean;
    int8_t q[5];
    assert_int_equal(fc_double_quant_scales(s, 5, 256, q, &absmax, &mean), FC_OK);
    assert_true(absmax == 0.0f && mean == 2.5f);
    assert_int_equal(fc_double_dequant_scales(q, &absmax, &mean, 5, 256, back), FC_OK);
    for (int i = 0; i < 5; i++)
        assert_true(back[i] == 2.5f);
}

/* ---- FC_NF4 block dtype ------------------------------------------------------------ */

static void test_nf4_block_dtype(void **state) {
    (void)state;
    float x[128], y[128];
    uint8_t blk[2 * 34];
    rng_state = 9;
    for (int i = 0; i < 64; i++)
        x[i] = (float)(0.02 * rng_normal());
    for (int i = 64; i < 128; i++)
        x[i] = 0.0f;
    assert_int_equal(fc_quant_row_bytes(FC_NF4, 128), sizeof blk);
    assert_int_equal(fc_quantize(FC_NF4, x, blk, 1, 128), FC_OK);
    assert_int_equal(fc_dequantize(FC_NF4, blk, y, 1, 128), FC_OK);
    double amax = 0;
    for (int i = 0; i < 64; i++)
        amax = fmax(amax, fabs((double)x[i]));
    const uint16_t d16 = (uint16_t)(blk[0] | blk[1] << 8);
    assert_int_equal(d16, fc_f32_to_f16((float)amax));
    const double d = fc_f16_to_f32(d16);
    for (int i = 0; i < 64; i++) {
        const int want = ref_nearest((double)x[i] / d);
        const int got = i % 2 ? blk[2 + i / 2] >> 4 : blk[2 + i / 2] & 15;
        assert_int_equal(got, want);
        assert_true(y[i] == (float)ref_levels[want] * (float)d);
    }
    /* the zero block: scale 0, every nibble the 0.0 level (7) */
    assert_int_equal(blk[34] | blk[35], 0);
    for (int i = 36; i < 68; i++)
        assert_int_equal(blk[i], 0x77);
    for (int i = 64; i < 128; i++)
        assert_true(y[i] == 0.0f);
}

/* With an absmax that f16 holds exactly, an FC_NF4 block carries the
 * nibbles fc_pack_int4 makes of the blockwise NF4 codes. */
static void test_nf4_block_matches_blockwise(void **state) {
    (void)state;
    float x[64], scale;
    int8_t codes[64];
    uint8_t blk[34], packed[32];
    rng_state = 10;
    for (int i = 0; i < 64; i++)
        x[i] = (float)(0.3 * rng_normal());
    x[17] = 1.5f; /* the absmax, exact in f16 */
    assert_int_equal(fc_quantize(FC_NF4, x, blk, 1, 64), FC_OK);
    assert_int_equal(fc_blockq_quantize(FC_BLOCKQ_NF4, x, 64, 64, codes, &scale), FC_OK);
    assert_int_equal(fc_pack_int4(codes, 64, packed), FC_OK);
    assert_true(fc_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8)) == scale);
    assert_memory_equal(blk + 2, packed, sizeof packed);
}

/* ---- errors --------------------------------------------------------------------------- */

static void test_nf4_errors(void **state) {
    (void)state;
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, s[2], y[8];
    int8_t c[8];
    uint8_t p[4];
    assert_int_equal(fc_blockq_quantize(FC_BLOCKQ_INT8, NULL, 8, 4, c, s), FC_ERR_NULL_ARG);
    assert_int_equal(fc_blockq_quantize(FC_BLOCKQ_INT8, x, 8, 4, NULL, s), FC_ERR_NULL_ARG);
    assert_int_equal(fc_blockq_quantize(FC_BLOCKQ_INT8, x, 8, 4, c, NULL), FC_ERR_NULL_ARG);
    assert_int_equal(fc_blockq_quantize(FC_BLOCKQ_COUNT, x, 8, 4, c, s), FC_ERR_INVALID_ARG);
    assert_int_equal(fc_blockq_quantize((fc_blockq_kind)-1, x, 8, 4, c, s), FC_ERR_INVALID_ARG);
    assert_int_equal(fc_blockq_quantize(FC_BLOCKQ_INT8, x, 0, 4, c, s), FC_ERR_INVALID_SHAPE);
    assert_int_equal(fc_blockq_quantize(FC_BLOCKQ_INT8, x, 8, 0, c, s), FC_ERR_INVALID_SHAPE);
    memset(c, 0x11, sizeof c);
    x[6] = NAN;
    assert_int_equal(fc_blockq_quantize(FC_BLOCKQ_NF4, x, 8, 4, c, s), FC_ERR_NON_FINITE);
    x[6] = INFINITY;
    assert_int_equal(fc_blockq_quantize(FC_BLOCKQ_INT4, x, 8, 4, c, s), FC_ERR_NON_FINITE);
    for (int i = 0; i < 8; i++)
        assert_int_equal(c[i], 0x11);
    x[6] = 7;

    assert_int_equal(fc_blockq_quantize(FC_BLOCKQ_INT4, x, 8, 4, c, s), FC_OK);
    memset(y, 0, sizeof y);
    c[3] = 8;
    assert_int_equal(fc_blockq_dequantize(FC_BLOCKQ_INT4, c, s, 8, 4, y), FC_ERR_INVALID_ARG);
    assert_int_equal(fc_blockq_dequantize(FC_BLOCKQ_NF4, c, s, 8, 4, y), FC_ERR_INVALID_ARG);
    c[3] = 7;
    s[1] = -1.0f;
    assert_int_equal(fc_blockq_dequantize(FC_BLOCKQ_INT4, c, s, 8, 4, y), FC_ERR_INVALID_ARG);
    s[1] = NAN;
    assert_int_equal(fc_blockq_dequantize(FC_BLOCKQ_INT8, c, s, 8, 4, y), FC_ERR_INVALID_ARG);
    for (int i = 0; i < 8; i++)
        assert_true(y[i] == 0.0f);
    assert_int_equal(fc_blockq_dequantize(FC_BLOCKQ_INT8, c, s, 0, 4, y), FC_ERR_INVALID_SHAPE);
    assert_int_equal(fc_blockq_dequantize(FC_BLOCKQ_INT8, NULL, s, 8, 4, y), FC_ERR_NULL_ARG);
    assert_int_equal(fc_blockq_block_count(8, 0), 0);

    const int8_t bad[3] = {0, -9, 1};
    memset(p, 0xCC, sizeof p);
    assert_int_equal(fc_pack_int4(bad, 3, p), FC_ERR_INVALID_ARG);
    for (int i = 0; i < 4; i++)
        assert_int_equal(p[i], 0xCC);
    assert_int_equal(fc_pack_int4(NULL, 3, p), FC_ERR_NULL_ARG);
    assert_int_equal(fc_pack_int4(bad, 0, p), FC_OK);
    assert_int_equal(fc_unpack_int4(p, 3, NULL), FC_ERR_NULL_ARG);

    float sc[3] = {1, 2, 3}, am, mn;
    int8_t q[3];
    assert_int_equal(fc_double_quant_scales(NULL, 3, 2, q, &am, &mn), FC_ERR_NULL_ARG);
    assert_int_equal(fc_double_quant_scales(sc, 0, 2, q, &am, &mn), FC_ERR_INVALID_SHAPE);
    assert_int_equal(fc_double_quant_scales(sc, 3, 0, q, &am, &mn), FC_ERR_INVALID_SHAPE);
    sc[1] = -2;
    assert_int_equal(fc_double_quant_scales(sc, 3, 4, q, &am, &mn), FC_ERR_INVALID_ARG);
    sc[1] = INFINITY;
    assert_int_equal(fc_double_quant_scales(sc, 3, 4, q, &am, &mn), FC_ERR_NON_FINITE);
    am = -1;
    mn = 1;
    assert_int_equal(fc_double_dequant_scales(q, &am, &mn, 3, 4, sc), FC_ERR_INVALID_ARG);
    am = 1;
    mn = NAN;
    assert_int_equal(fc_double_dequant_scales(q, &am, &mn, 3, 4, sc), FC_ERR_INVALID_ARG);
    assert_int_equal(fc_double_dequant_scales(q, &am, &mn, 0, 4, sc), FC_ERR_INVALID_SHAPE);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nf4_pack_int4_seed_example),
        cmocka_unit_test(test_nf4_blockwise_seed_example),
        cmocka_unit_test(test_nf4_beats_int4_on_seed_example),
        cmocka_unit_test(test_nf4_codebook),
        cmocka_unit_test(test_nf4_blockwise_bounds_partial_block),
        cmocka_unit_test(test_nf4_tie_goes_low),
        cmocka_unit_test(test_nf4_zero_and_extreme_blocks),
        cmocka_unit_test(test_nf4_pack_exhaustive),
        cmocka_unit_test(test_nf4_double_quant_round_trip),
        cmocka_unit_test(test_nf4_double_quant_constant_scales),
        cmocka_unit_test(test_nf4_block_dtype),
        cmocka_unit_test(test_nf4_block_matches_blockwise),
        cmocka_unit_test(test_nf4_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
