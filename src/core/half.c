/* SPDX-License-Identifier: MIT */
/* half.c - IEEE binary16 and bfloat16 <-> f32, bit-exact with ggml's software
 * conversions (see tests/data/ggml/fp): round to nearest even on narrowing,
 * NaN sign kept, NaN payload never rounded into an infinity, signalling NaNs
 * quieted on widening. Pure integer code so the result never depends on the
 * FPU rounding mode or on the compiler's choice of instructions. */
#include <string.h>

#include "fucina/dtype.h"

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float fc_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) {
        /* inf stays inf; a NaN is quieted (bit 22 set), payload kept */
        return bits_f32(sign | 0x7f800000u | (man ? 0x00400000u : 0) | (man << 13));
    }
    if (exp == 0) {
        if (man == 0) return bits_f32(sign);
        /* subnormal half: normalise into an f32 normal, exactly */
        int e = -1;
        do {
            e++;
            man <<= 1;
        } while (!(man & 0x400u));
        man &= 0x3ffu;
        return bits_f32(sign | (uint32_t)(127 - 15 - e) << 23 | (man << 13));
    }
    return bits_f32(sign | (exp + 112u) << 23 | (man << 13));
}

uint16_t fc_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00u; /* NaN: canonical quiet, sign kept */
    if (ax >= 0x477ff000u) return sign | 0x7c00u; /* rounds to >= 65520: infinity */
    if (ax < 0x38800000u) {
        /* result is subnormal or zero in f16: value = ax_float / 2^-24 */
        if (ax < 0x33000000u) return sign; /* below half the smallest subnormal */
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14 + (113 - e) - ... : bring to 2^-24 units */
        /* m * 2^(e-150) / 2^-24 = m >> (126 - e) */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return sign | (uint16_t)q;
    }
    /* normal: rebias exponent, round the 13 dropped mantissa bits to even */
    uint32_t r = ax - 0x38000000u; /* exponent 127 -> 15 */
    r += 0x0fffu + ((r >> 13) & 1u);
    return sign | (uint16_t)(r >> 13);
}

float fc_bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

uint16_t fc_f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
