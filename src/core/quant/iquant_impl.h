/* SPDX-License-Identifier: MIT */
/* iquant_impl.h - internals shared by the i-quant files (iquant_*.c).
 *
 * Block layouts are byte arrays, so every struct is packed by construction
 * and multi-byte fields are read and written little-endian explicitly, as
 * ggml stores them on the machines that write GGUF files. The arithmetic of
 * the quantizers follows ggml's reference quantizers operation for operation
 * (same order of float operations, same tie rules), which is what makes their
 * output byte-exact; where ggml would abort or read out of bounds (only for
 * non-finite intermediate values) these files pick a defined fallback.
 */
#ifndef FUCINA_CORE_QUANT_IQUANT_IMPL_H
#define FUCINA_CORE_QUANT_IQUANT_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/quant/iquant.h"
#include "core/quant/quant.h"

/* Contracted multiply-adds would change the bits of the search scores. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define FC__IQ_QK 256 /* elements per super-block */
#define FC__IQ4NL_QK 32

/* ---- block layouts (ggml's block_iq*) ------------------------------------ */
typedef struct {
    uint8_t d[2];   /* f16 super-block scale */
    uint8_t qs[64]; /* per 32: 4 grid bytes, then u32 LE: 4 x 7 sign bits | scale << 28 */
} fc__block_iq2_xxs;
typedef struct {
    uint8_t d[2];
    uint8_t qs[64];    /* 32 x u16 LE: 9-bit grid index | 7 sign bits << 9 */
    uint8_t scales[8]; /* 4-bit scale per 16 elements, low nibble first */
} fc__block_iq2_xs;
typedef struct {
    uint8_t d[2];
    uint8_t qs[64];    /* 32 low grid-index bytes, then 32 sign bytes */
    uint8_t qh[8];     /* 2 high index bits per group of 8 */
    uint8_t scales[8]; /* 4-bit scale per 16 elements */
} fc__block_iq2_s;
typedef struct {
    uint8_t d[2];
    uint8_t qs[96]; /* 64 grid bytes, then 8 x u32 LE: 4 x 7 sign bits | scale << 28 */
} fc__block_iq3_xxs;
typedef struct {
    uint8_t d[2];
    uint8_t qs[64];    /* low grid-index bytes, one per 4 elements */
    uint8_t qh[8];     /* ninth index bit, one byte per 32 elements */
    uint8_t signs[32]; /* one sign bit per element */
    uint8_t scales[4]; /* 4-bit scale per 32 elements */
} fc__block_iq3_s;
typedef struct {
    uint8_t d[2];
    uint8_t qs[32]; /* low grid-index bytes, one per 8 elements */
    uint8_t qh[16]; /* 8 x u16 LE: 4 x 3 high index bits | 3-bit scale << 12 | shift sign << 15 */
} fc__block_iq1_s;
typedef struct {
    uint8_t qs[32];    /* low grid-index bytes */
    uint8_t qh[16];    /* per 16 elements: 2 x (3 high index bits | shift sign << 3) */
    uint8_t scales[8]; /* 4 x u16 LE: 4 x 3-bit scales, top nibble = a quarter of the f16 d */
} fc__block_iq1_m;
typedef struct {
    uint8_t d[2];
    uint8_t qs[16]; /* element j in the low nibble of byte j, element j+16 in the high one */
} fc__block_iq4_nl;
typedef struct {
    uint8_t d[2];
    uint8_t scales_h[2]; /* u16 LE: 2 high bits of each 6-bit scale */
    uint8_t scales_l[4]; /* 4 low bits of each scale, low nibble first */
    uint8_t qs[128];
} fc__block_iq4_xs;

_Static_assert(sizeof(fc__block_iq1_s) == 50, "iq1_s block is 50 bytes");
_Static_assert(sizeof(fc__block_iq1_m) == 56, "iq1_m block is 56 bytes");
_Static_assert(sizeof(fc__block_iq2_xxs) == 66, "iq2_xxs block is 66 bytes");
_Static_assert(sizeof(fc__block_iq2_xs) == 74, "iq2_xs block is 74 bytes");
_Static_assert(sizeof(fc__block_iq2_s) == 82, "iq2_s block is 82 bytes");
_Static_assert(sizeof(fc__block_iq3_xxs) == 98, "iq3_xxs block is 98 bytes");
_Static_assert(sizeof(fc__block_iq3_s) == 110, "iq3_s block is 110 bytes");
_Static_assert(sizeof(fc__block_iq4_nl) == 18, "iq4_nl block is 18 bytes");
_Static_assert(sizeof(fc__block_iq4_xs) == 136, "iq4_xs block is 136 bytes");

/* ---- grids (iquant_grids.c, iquant_grid_iq1s.c) ---------------------------- */
extern const uint64_t fc__iq2xxs_grid[256];
extern const uint64_t fc__iq2xs_grid[512];
extern const uint64_t fc__iq2s_grid[1024];
extern const uint64_t fc__iq1s_grid[2048];
extern const uint32_t fc__iq3xxs_grid[256];
extern const uint32_t fc__iq3s_grid[512];
extern const int8_t fc__iq4nl_values[16];

/* ---- quantizer lattices (iquant_lattice.c) --------------------------------
 * A lattice is a grid seen as points of small level indices ("digits",
 * 0..radix-1 per coordinate; a grid coordinate in level form is 2*digit+1).
 * map[key(digits)] is the grid index of an on-grid digit vector, or
 * -(offset+1) where pool[offset] = n and pool[offset+1 .. offset+n] list
 * the grid points nearest to that vector (squared distance in level form):
 * every point at the `nwant` smallest distinct distances, ordered by
 * (distance, grid index). That is the candidate set ggml builds in
 * iq2xs_init_impl / iq3xs_init_impl. */
typedef enum fc__iq_lattice_id {
    FC__IQ_LAT_IQ2XXS,
    FC__IQ_LAT_IQ2XS,
    FC__IQ_LAT_IQ2S,
    FC__IQ_LAT_IQ1S, /* shared by iq1_s and iq1_m */
    FC__IQ_LAT_IQ3XXS,
    FC__IQ_LAT_IQ3S,
    FC__IQ_LAT_COUNT
} fc__iq_lattice_id;

typedef struct fc__iq_lattice {
    int dim;               /* coordinates per point: 8 or 4 */
    int radix;             /* digits per coordinate: 3 or 8 */
    int ngrid;             /* grid points */
    const uint8_t *levels; /* ngrid * dim odd levels 2*digit+1 */
    const int32_t *map;    /* radix^dim entries */
    const uint16_t *pool;  /* neighbour lists */
} fc__iq_lattice;

/* The lattice, built on first use (thread-safe, static storage, never freed
 * because nothing was allocated). NULL only if the grid tables were
 * inconsistent, which the tests rule out. */
const fc__iq_lattice *fc__iq_lattice_get(fc__iq_lattice_id id);

/* key of a digit vector; digits must lie in 0..radix-1. */
static inline int fc__iq_key(const fc__iq_lattice *lat, const int8_t *digits) {
    int key = 0;
    for (int i = lat->dim - 1; i >= 0; --i)
        key = key * lat->radix + digits[i];
    return key;
}

/* Among the neighbours of an off-grid key, the point closest to xval in the
 * metric sum w[i] * (scale * level[i] - xval[i])^2 (first one on ties);
 * writes its digits to L and returns its grid index. If no score is below
 * FLT_MAX (non-finite input; ggml aborts there) the first neighbour wins. */
int fc__iq_best_neighbour(const fc__iq_lattice *lat, int key, const float *xval, const float *w,
                          float scale, int8_t *L);

/* ---- shared numeric helpers ------------------------------------------------ */

/* Round to nearest, ties to even, for |f| < 2^22, by adding 1.5 * 2^23 and
 * reading the mantissa: the same integer ggml's nearest_int gives, for every
 * float (out-of-range and non-finite inputs give a defined, meaningless int). */
static inline int fc__iq_nearest_int(float f) {
    float v = f + 12582912.f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}
static inline int fc__iq_clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }
/* ggml's MAX for floats: a NaN in b is taken, a NaN in a is kept only if b is not larger. */
static inline float fc__iq_maxf(float a, float b) { return a > b ? a : b; }

static inline uint16_t fc__iq_rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline void fc__iq_wr16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)(v >> 8);
}
/* Every i-quant block scale is stored with fc__q_f16_scale (core/quant/quant.h),
 * the k-quants' conversion: ggml's f32 -> f16 wherever that is finite (so the
 * bytes match ggml there), +-65504 where ggml would store an infinity, 0 for a
 * NaN. Finite input thus always decodes to finite values. */
static inline void fc__iq_wr_scale(uint8_t *p, float d) { fc__iq_wr16(p, fc__q_f16_scale(d)); }
static inline uint32_t fc__iq_rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void fc__iq_wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; ++i)
        p[i] = (uint8_t)(v >> (8 * i));
}
/* The 8 sign bits of a 7-bit iq2/iq3 sign code: bit 7 restores even parity. */
static inline uint8_t fc__iq_sign_byte(unsigned code) {
    unsigned c = code & 127u; /* bits above the 7 belong to other groups */
    unsigned p = c ^ (c >> 4);
    p ^= p >> 2;
    p ^= p >> 1;
    return (uint8_t)(c | ((p & 1u) << 7));
}

/* ---- the signed-lattice scale search (iquant_search.c) ---------------------
 * Shared by iq2_xxs, iq2_xs, iq2_s, iq3_xxs and iq3_s. xval holds the
 * magnitudes of one sub-block (signs are coded separately), weight the
 * importance of each element, waux = sqrt(weight). The search tries the
 * inverse scales (2*kmaxq - 1 + is*step) / max for is in [is_lo, is_hi],
 * snaps every group of `dim` elements to the lattice (neighbour search when
 * the rounded point is off the grid), keeps the trial with the best
 * weighted fit, then refits once. */
typedef enum fc__iq_refine {
    FC__IQ_REFINE_ALL,        /* iq2_xxs: re-snap every group whenever scale > 0 */
    FC__IQ_REFINE_OFFGRID,    /* iq2_xs, iq2_s, iq3_xxs: re-snap the off-grid groups */
    FC__IQ_REFINE_ALL_IF_OFF, /* iq3_s: re-snap every group if any was off-grid */
} fc__iq_refine;

typedef struct fc__iq_search {
    const fc__iq_lattice *lat;
    int n;                /* elements in the sub-block: 16 or 32 */
    int kmaxq;            /* digits 0..kmaxq-1 */
    int is_lo, is_hi;     /* trial range */
    float step;           /* trial step */
    bool start_on_grid;   /* what "on grid" means before any trial is accepted */
    fc__iq_refine refine; /* final refit rule */
} fc__iq_search;

/* Runs the search from the initial scale `scale`; max is the divisor of the
 * trials. L (n entries) receives the digits of the chosen points; when no
 * trial is accepted and no refit runs (only for NaN scales) it keeps what it
 * held on entry, which fc__iq_grid_index then maps safely. Returns the final
 * scale, which may be <= 0 or NaN. */
float fc__iq_search_scale(const fc__iq_search *s, const float *xval, const float *weight,
                          const float *waux, float max, float scale, int8_t *L);

/* Grid index of the digit vector L (dim entries). A vector outside the digit
 * range or off the grid (reachable only through NaN scales, where ggml
 * aborts) maps to grid point 0. */
static inline int fc__iq_grid_index(const fc__iq_lattice *lat, const int8_t *L) {
    for (int i = 0; i < lat->dim; ++i)
        if (L[i] < 0 || L[i] >= lat->radix) return 0;
    int32_t g = lat->map[fc__iq_key(lat, L)];
    return g >= 0 ? (int)g : 0;
}

/* Folds the signs of 8 elements into xval (magnitudes) and returns the sign
 * bits (bit i set = element i negative). With even_parity the count of set
 * bits is made even by flipping the element of least weight*x^2, which is
 * then carried as a negative magnitude; the returned code drops bit 7. */
uint8_t fc__iq_fold_signs(const float *x, const float *weight, float *xval, bool even_parity);

/* ---- per-type row functions (k = elements, a multiple of the block size) -- */
void fc__iq2_xxs_quantize(const float *x, fc__block_iq2_xxs *y, int64_t k, const float *qw);
void fc__iq2_xs_quantize(const float *x, fc__block_iq2_xs *y, int64_t k, const float *qw);
void fc__iq2_s_quantize(const float *x, fc__block_iq2_s *y, int64_t k, const float *qw);
void fc__iq3_xxs_quantize(const float *x, fc__block_iq3_xxs *y, int64_t k, const float *qw);
void fc__iq3_s_quantize(const float *x, fc__block_iq3_s *y, int64_t k, const float *qw);
void fc__iq1_s_quantize(const float *x, fc__block_iq1_s *y, int64_t k, const float *qw);
void fc__iq1_m_quantize(const float *x, fc__block_iq1_m *y, int64_t k, const float *qw);
void fc__iq4_nl_quantize(const float *x, fc__block_iq4_nl *y, int64_t k, const float *qw, bool ref);
void fc__iq4_xs_quantize(const float *x, fc__block_iq4_xs *y, int64_t k, const float *qw);

void fc__iq2_xxs_dequantize(const fc__block_iq2_xxs *x, float *y, int64_t k);
void fc__iq2_xs_dequantize(const fc__block_iq2_xs *x, float *y, int64_t k);
void fc__iq2_s_dequantize(const fc__block_iq2_s *x, float *y, int64_t k);
void fc__iq3_xxs_dequantize(const fc__block_iq3_xxs *x, float *y, int64_t k);
void fc__iq3_s_dequantize(const fc__block_iq3_s *x, float *y, int64_t k);
void fc__iq1_s_dequantize(const fc__block_iq1_s *x, float *y, int64_t k);
void fc__iq1_m_dequantize(const fc__block_iq1_m *x, float *y, int64_t k);
void fc__iq4_nl_dequantize(const fc__block_iq4_nl *x, float *y, int64_t k);
void fc__iq4_xs_dequantize(const fc__block_iq4_xs *x, float *y, int64_t k);

#endif /* FUCINA_CORE_QUANT_IQUANT_IMPL_H */
