/* SPDX-License-Identifier: MIT */
/* iquant_lattice.c - the quantizer's view of the i-quant grids, built lazily.
 *
 * ggml's quantizers for the grid types round each group of 4 or 8 magnitudes
 * to level indices ("digits") and look the digit vector up: either it is a
 * grid point, or the search is restricted to a precomputed list of nearby
 * grid points. ggml builds that list at init time (iq2xs_init_impl,
 * iq3xs_init_impl) by sorting all grid points by (squared distance, index)
 * and keeping every point whose distance is among the `nwant` smallest
 * distinct distances. We build the same lists, but only for digit vectors the
 * quantizers can produce (digits 0..2 for the 8-dimensional grids, 0..7 for
 * the 4-dimensional ones), and select by a distance histogram instead of a
 * sort; the order (distance, then index) is the same, so every tie between
 * candidates resolves as in ggml.
 *
 * Everything lives in static storage, sized for these exact grids; building
 * checks that the grids fit, and pthread_once makes first use thread-safe.
 * Nothing is ever freed because nothing is allocated.
 */
#include <float.h>
#include <pthread.h>

#include "core/quant/iquant_impl.h"

/* Digit vectors per lattice: 3^8 and 8^4. */
#define KEYS_8D 6561
#define KEYS_4D 4096
/* Neighbour-pool sizes: per off-grid key one count plus its candidates. These
 * follow from the grids (build() verifies them exactly). */
#define POOL_IQ2XXS 119462
#define POOL_IQ2XS 187770
#define POOL_IQ2S 50253
#define POOL_IQ1S 332234
#define POOL_IQ3XXS 22825
#define POOL_IQ3S 28317
/* Largest squared distance in level form: 4 coordinates differing by 14. */
#define MAX_DIST2 (4 * 14 * 14)

typedef struct lattice_spec {
    int dim, radix, ngrid, nwant;
    const void *grid; /* uint64_t[] for dim 8, uint32_t[] for dim 4 */
    uint8_t byte_of_digit[8];
    uint8_t *levels;
    int32_t *map;
    uint16_t *pool;
    int pool_size;
} lattice_spec;

static uint8_t levels_iq2xxs[256 * 8], levels_iq2xs[512 * 8], levels_iq2s[1024 * 8];
static uint8_t levels_iq1s[2048 * 8], levels_iq3xxs[256 * 4], levels_iq3s[512 * 4];
static int32_t map_iq2xxs[KEYS_8D], map_iq2xs[KEYS_8D], map_iq2s[KEYS_8D], map_iq1s[KEYS_8D];
static int32_t map_iq3xxs[KEYS_4D], map_iq3s[KEYS_4D];
static uint16_t pool_iq2xxs[POOL_IQ2XXS], pool_iq2xs[POOL_IQ2XS], pool_iq2s[POOL_IQ2S];
static uint16_t pool_iq1s[POOL_IQ1S], pool_iq3xxs[POOL_IQ3XXS], pool_iq3s[POOL_IQ3S];

/* nwant and the grid byte of each digit are ggml's (see iquant_grids.c). */
/* clang-format off */
static lattice_spec specs[FC__IQ_LAT_COUNT] = {
    [FC__IQ_LAT_IQ2XXS] = {8, 3, 256, 2, fc__iq2xxs_grid, {8, 25, 43}, levels_iq2xxs, map_iq2xxs,
                           pool_iq2xxs, POOL_IQ2XXS},
    [FC__IQ_LAT_IQ2XS] = {8, 3, 512, 2, fc__iq2xs_grid, {8, 25, 43}, levels_iq2xs, map_iq2xs,
                          pool_iq2xs, POOL_IQ2XS},
    [FC__IQ_LAT_IQ2S] = {8, 3, 1024, 1, fc__iq2s_grid, {8, 25, 43}, levels_iq2s, map_iq2s,
                         pool_iq2s, POOL_IQ2S},
    [FC__IQ_LAT_IQ1S] = {8, 3, 2048, 3, fc__iq1s_grid, {0xff, 0x00, 0x01}, levels_iq1s, map_iq1s,
                         pool_iq1s, POOL_IQ1S},
    [FC__IQ_LAT_IQ3XXS] = {4, 8, 256, 2, fc__iq3xxs_grid, {4, 12, 20, 28, 36, 44, 52, 62},
                           levels_iq3xxs, map_iq3xxs, pool_iq3xxs, POOL_IQ3XXS},
    [FC__IQ_LAT_IQ3S] = {4, 8, 512, 3, fc__iq3s_grid, {1, 3, 5, 7, 9, 11, 13, 15}, levels_iq3s,
                         map_iq3s, pool_iq3s, POOL_IQ3S},
};
/* clang-format on */

static fc__iq_lattice lattices[FC__IQ_LAT_COUNT];
static bool built_ok[FC__IQ_LAT_COUNT];

static unsigned grid_byte(const lattice_spec *sp, int point, int coord) {
    if (sp->dim == 8) return (unsigned)(((const uint64_t *)sp->grid)[point] >> (8 * coord)) & 0xffu;
    return (unsigned)(((const uint32_t *)sp->grid)[point] >> (8 * coord)) & 0xffu;
}

/* Grid bytes -> odd levels, and the key map of the grid points. */
static bool build_levels_and_map(lattice_spec *sp, int nkeys) {
    for (int key = 0; key < nkeys; ++key)
        sp->map[key] = -1;
    for (int p = 0; p < sp->ngrid; ++p) {
        int8_t digits[8];
        for (int c = 0; c < sp->dim; ++c) {
            unsigned b = grid_byte(sp, p, c);
            int d = 0;
            while (d < sp->radix && sp->byte_of_digit[d] != b)
                ++d;
            if (d == sp->radix) return false; /* a byte the level table lacks */
            digits[c] = (int8_t)d;
            sp->levels[p * sp->dim + c] = (uint8_t)(2 * d + 1);
        }
        int key = 0;
        for (int c = sp->dim - 1; c >= 0; --c)
            key = key * sp->radix + digits[c];
        if (sp->map[key] >= 0) return false; /* duplicate point */
        sp->map[key] = p;
    }
    return sp->map[0] >= 0; /* the all-zero vector must be on the grid */
}

/* Candidate lists for every off-grid key, appended in key order. */
static bool build_neighbours(lattice_spec *sp, int nkeys) {
    int used = 0;
    for (int key = 0; key < nkeys; ++key) {
        if (sp->map[key] >= 0) continue;
        int pos[8];
        for (int c = 0, k = key; c < sp->dim; ++c, k /= sp->radix)
            pos[c] = 2 * (k % sp->radix) + 1;

        uint16_t dist[2048];
        int hist[MAX_DIST2 + 1] = {0};
        for (int p = 0; p < sp->ngrid; ++p) {
            int d2 = 0;
            for (int c = 0; c < sp->dim; ++c) {
                int diff = sp->levels[p * sp->dim + c] - pos[c];
                d2 += diff * diff;
            }
            dist[p] = (uint16_t)d2;
            hist[d2]++;
        }
        /* the nwant smallest distinct distances, ascending */
        int chosen[3], nchosen = 0, count = 0;
        for (int d = 0; d <= MAX_DIST2 && nchosen < sp->nwant; ++d) {
            if (!hist[d]) continue;
            chosen[nchosen++] = d;
            count += hist[d];
        }
        if (used + 1 + count > sp->pool_size) return false;
        sp->map[key] = -(used + 1);
        sp->pool[used++] = (uint16_t)count;
        for (int c = 0; c < nchosen; ++c)
            for (int p = 0; p < sp->ngrid; ++p)
                if (dist[p] == chosen[c]) sp->pool[used++] = (uint16_t)p;
    }
    return used == sp->pool_size;
}

static void build(fc__iq_lattice_id id) {
    lattice_spec *sp = &specs[id];
    int nkeys = sp->dim == 8 ? KEYS_8D : KEYS_4D;
    if (!build_levels_and_map(sp, nkeys) || !build_neighbours(sp, nkeys)) return;
    lattices[id] = (fc__iq_lattice){.dim = sp->dim,
                                    .radix = sp->radix,
                                    .ngrid = sp->ngrid,
                                    .levels = sp->levels,
                                    .map = sp->map,
                                    .pool = sp->pool};
    built_ok[id] = true;
}

/* pthread_once takes no argument, hence one trampoline per lattice. */
static void build_iq2xxs(void) { build(FC__IQ_LAT_IQ2XXS); }
static void build_iq2xs(void) { build(FC__IQ_LAT_IQ2XS); }
static void build_iq2s(void) { build(FC__IQ_LAT_IQ2S); }
static void build_iq1s(void) { build(FC__IQ_LAT_IQ1S); }
static void build_iq3xxs(void) { build(FC__IQ_LAT_IQ3XXS); }
static void build_iq3s(void) { build(FC__IQ_LAT_IQ3S); }

static pthread_once_t once[FC__IQ_LAT_COUNT] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT,
                                                PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT,
                                                PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT};
static void (*const builders[FC__IQ_LAT_COUNT])(void) = {build_iq2xxs, build_iq2xs,  build_iq2s,
                                                         build_iq1s,   build_iq3xxs, build_iq3s};

const fc__iq_lattice *fc__iq_lattice_get(fc__iq_lattice_id id) {
    if ((unsigned)id >= FC__IQ_LAT_COUNT) return NULL;
    if (pthread_once(&once[id], builders[id]) != 0) return NULL;
    return built_ok[id] ? &lattices[id] : NULL;
}

int fc__iq_best_neighbour(const fc__iq_lattice *lat, int key, const float *xval, const float *w,
                          float scale, int8_t *L) {
    const uint16_t *list = lat->pool + (-lat->map[key] - 1);
    int n = list[0];
    int best = list[1];
    float best_d2 = FLT_MAX;
    for (int j = 1; j <= n; ++j) {
        const uint8_t *lv = lat->levels + (size_t)list[j] * (size_t)lat->dim;
        float d2 = 0;
        for (int i = 0; i < lat->dim; ++i) {
            float diff = scale * (float)lv[i] - xval[i];
            d2 += w[i] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = list[j];
        }
    }
    const uint8_t *lv = lat->levels + (size_t)best * (size_t)lat->dim;
    for (int i = 0; i < lat->dim; ++i)
        L[i] = (int8_t)((lv[i] - 1) / 2);
    return best;
}
