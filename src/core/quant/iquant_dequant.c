/* SPDX-License-Identifier: MIT */
/* iquant_dequant.c - block -> float for every i-quant type.
 *
 * Each value is computed with ggml's float expression, operand for operand
 * (e.g. d * (0.5f + s) * 0.25f * level * sign), so the output is ggml's to
 * the bit, including the sign of zeros when a scale is 0. Block layouts are
 * described in iquant_impl.h.
 */
#include "core/quant/iquant_impl.h"

/* +1 or -1 for sign bit j of an 8-bit sign mask. */
static inline float sign_of(unsigned signs, int j) { return (signs >> j) & 1u ? -1.f : 1.f; }

static inline uint8_t grid_coord64(const uint64_t *grid, unsigned index, int j) {
    return (uint8_t)(grid[index] >> (8 * j));
}
static inline uint8_t grid_coord32(const uint32_t *grid, unsigned index, int j) {
    return (uint8_t)(grid[index] >> (8 * j));
}

void fc__iq2_xxs_dequantize(const fc__block_iq2_xxs *x, float *y, int64_t k) {
    for (int64_t i = 0; i < k / FC__IQ_QK; ++i) {
        const float d = fc_f16_to_f32(fc__iq_rd16(x[i].d));
        for (int ib = 0; ib < 8; ++ib) {
            const uint8_t *q = x[i].qs + 8 * ib;
            const uint32_t aux = fc__iq_rd32(q + 4);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
            for (int g = 0; g < 4; ++g) {
                const unsigned signs = fc__iq_sign_byte(aux >> (7 * g));
                for (int j = 0; j < 8; ++j)
                    y[j] = db * (float)grid_coord64(fc__iq2xxs_grid, q[g], j) * sign_of(signs, j);
                y += 8;
            }
        }
    }
}

void fc__iq2_xs_dequantize(const fc__block_iq2_xs *x, float *y, int64_t k) {
    for (int64_t i = 0; i < k / FC__IQ_QK; ++i) {
        const float d = fc_f16_to_f32(fc__iq_rd16(x[i].d));
        for (int ib = 0; ib < 8; ++ib) {
            const float db[2] = {d * (0.5f + (float)(x[i].scales[ib] & 0xf)) * 0.25f,
                                 d * (0.5f + (float)(x[i].scales[ib] >> 4)) * 0.25f};
            for (int g = 0; g < 4; ++g) {
                const unsigned code = fc__iq_rd16(x[i].qs + 2 * (4 * ib + g));
                const unsigned signs = fc__iq_sign_byte(code >> 9);
                for (int j = 0; j < 8; ++j)
                    y[j] = db[g / 2] * (float)grid_coord64(fc__iq2xs_grid, code & 511u, j) *
                           sign_of(signs, j);
                y += 8;
            }
        }
    }
}

void fc__iq2_s_dequantize(const fc__block_iq2_s *x, float *y, int64_t k) {
    for (int64_t i = 0; i < k / FC__IQ_QK; ++i) {
        const float d = fc_f16_to_f32(fc__iq_rd16(x[i].d));
        for (int ib = 0; ib < 8; ++ib) {
            const float db[2] = {d * (0.5f + (float)(x[i].scales[ib] & 0xf)) * 0.25f,
                                 d * (0.5f + (float)(x[i].scales[ib] >> 4)) * 0.25f};
            for (int g = 0; g < 4; ++g) {
                const unsigned index = x[i].qs[4 * ib + g] | ((x[i].qh[ib] << (8 - 2 * g)) & 0x300);
                const unsigned signs = x[i].qs[32 + 4 * ib + g];
                for (int j = 0; j < 8; ++j)
                    y[j] = db[g / 2] * (float)grid_coord64(fc__iq2s_grid, index, j) *
                           sign_of(signs, j);
                y += 8;
            }
        }
    }
}

void fc__iq3_xxs_dequantize(const fc__block_iq3_xxs *x, float *y, int64_t k) {
    for (int64_t i = 0; i < k / FC__IQ_QK; ++i) {
        const float d = fc_f16_to_f32(fc__iq_rd16(x[i].d));
        for (int ib = 0; ib < 8; ++ib) {
            const uint8_t *q = x[i].qs + 8 * ib;
            const uint32_t aux = fc__iq_rd32(x[i].qs + 64 + 4 * ib);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int g = 0; g < 4; ++g) {
                const unsigned signs = fc__iq_sign_byte(aux >> (7 * g));
                for (int j = 0; j < 4; ++j) {
                    y[j] =
                        db * (float)grid_coord32(fc__iq3xxs_grid, q[2 * g], j) * sign_of(signs, j);
                    y[j + 4] = db * (float)grid_coord32(fc__iq3xxs_grid, q[2 * g + 1], j) *
                               sign_of(signs, j + 4);
                }
                y += 8;
            }
        }
    }
}

void fc__iq3_s_dequantize(const fc__block_iq3_s *x, float *y, int64_t k) {
    for (int64_t i = 0; i < k / FC__IQ_QK; ++i) {
        const float d = fc_f16_to_f32(fc__iq_rd16(x[i].d));
        for (int ib = 0; ib < 8; ++ib) {
            const int scale = (x[i].scales[ib / 2] >> 4 * (ib % 2)) & 0xf;
            const float db = d * (float)(1 + 2 * scale);
            const uint8_t *q = x[i].qs + 8 * ib;
            const unsigned qh = x[i].qh[ib];
            for (int g = 0; g < 4; ++g) {
                const unsigned i1 = q[2 * g] | ((qh << (8 - 2 * g)) & 256u);
                const unsigned i2 = q[2 * g + 1] | ((qh << (7 - 2 * g)) & 256u);
                const unsigned signs = x[i].signs[4 * ib + g];
                for (int j = 0; j < 4; ++j) {
                    y[j] = db * (float)grid_coord32(fc__iq3s_grid, i1, j) * sign_of(signs, j);
                    y[j + 4] =
                        db * (float)grid_coord32(fc__iq3s_grid, i2, j) * sign_of(signs, j + 4);
                }
                y += 8;
            }
        }
    }
}

void fc__iq1_s_dequantize(const fc__block_iq1_s *x, float *y, int64_t k) {
    for (int64_t i = 0; i < k / FC__IQ_QK; ++i) {
        const float d = fc_f16_to_f32(fc__iq_rd16(x[i].d));
        for (int ib = 0; ib < 8; ++ib) {
            const unsigned qh = fc__iq_rd16(x[i].qh + 2 * ib);
            const float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
            const float delta = qh & 0x8000 ? -0.125f : 0.125f;
            for (int g = 0; g < 4; ++g) {
                const unsigned index = x[i].qs[4 * ib + g] | (((qh >> 3 * g) & 7) << 8);
                for (int j = 0; j < 8; ++j)
                    y[j] = dl * ((float)(int8_t)grid_coord64(fc__iq1s_grid, index, j) + delta);
                y += 8;
            }
        }
    }
}

void fc__iq1_m_dequantize(const fc__block_iq1_m *x, float *y, int64_t k) {
    for (int64_t i = 0; i < k / FC__IQ_QK; ++i) {
        uint16_t sc[4];
        for (int s = 0; s < 4; ++s)
            sc[s] = fc__iq_rd16(x[i].scales + 2 * s);
        const uint16_t dbits = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                          ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        const float d = fc_f16_to_f32(dbits);
        /* per 32 elements: two 3-bit scales (one per 16) and four groups of 8,
         * each with 3 high index bits and a shift sign in a qh nibble */
        for (int ib = 0; ib < 8; ++ib) {
            const unsigned s = sc[ib / 2] >> (6 * (ib % 2));
            const float dl[2] = {d * (float)(2 * (s & 7) + 1), d * (float)(2 * ((s >> 3) & 7) + 1)};
            for (int g = 0; g < 4; ++g) {
                const unsigned h = x[i].qh[2 * ib + g / 2];
                const unsigned index = x[i].qs[4 * ib + g] | ((h << (g % 2 ? 4 : 8)) & 0x700);
                const float delta = h & (g % 2 ? 0x80 : 0x08) ? -0.125f : 0.125f;
                for (int j = 0; j < 8; ++j)
                    y[j] =
                        dl[g / 2] * ((float)(int8_t)grid_coord64(fc__iq1s_grid, index, j) + delta);
                y += 8;
            }
        }
    }
}

void fc__iq4_nl_dequantize(const fc__block_iq4_nl *x, float *y, int64_t k) {
    for (int64_t i = 0; i < k / FC__IQ4NL_QK; ++i) {
        const float d = fc_f16_to_f32(fc__iq_rd16(x[i].d));
        for (int j = 0; j < 16; ++j) {
            y[j] = d * (float)fc__iq4nl_values[x[i].qs[j] & 0xf];
            y[j + 16] = d * (float)fc__iq4nl_values[x[i].qs[j] >> 4];
        }
        y += 32;
    }
}

void fc__iq4_xs_dequantize(const fc__block_iq4_xs *x, float *y, int64_t k) {
    for (int64_t i = 0; i < k / FC__IQ_QK; ++i) {
        const float d = fc_f16_to_f32(fc__iq_rd16(x[i].d));
        const unsigned scales_h = fc__iq_rd16(x[i].scales_h);
        for (int ib = 0; ib < 8; ++ib) {
            const int ls = (int)(((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
                                 (((scales_h >> 2 * ib) & 3) << 4));
            const float dl = d * (float)(ls - 32);
            const uint8_t *q = x[i].qs + 16 * ib;
            for (int j = 0; j < 16; ++j) {
                y[j] = dl * (float)fc__iq4nl_values[q[j] & 0xf];
                y[j + 16] = dl * (float)fc__iq4nl_values[q[j] >> 4];
            }
            y += 32;
        }
    }
}
