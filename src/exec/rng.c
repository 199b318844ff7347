/* SPDX-License-Identifier: MIT */
/* rng.c - the context's counter-based RNG (Philox 4x32-10, Salmon et al.,
 * SC'11). Element i of a random op draws from counter (offset + i), so the
 * values depend only on (seed, offset, i): never on the thread count or the
 * schedule, and a checkpoint restores the stream with two integers. */
#include <math.h>

#include "exec/tensor.h"
#include "exec/parallel.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static inline uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

void fc__philox(uint64_t seed, uint64_t counter, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = mulhilo(PHILOX_M0, c0, &hi0);
        uint32_t lo1 = mulhilo(PHILOX_M1, c2, &hi1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

uint64_t fc__rng_reserve(fc_ctx *ctx, uint64_t n) {
    uint64_t first = ctx->rng_offset;
    ctx->rng_offset += n;
    return first;
}

/* uniform in [0, 1) with 53 random bits */
static inline double u01(uint32_t a, uint32_t b) {
    return (double)(((uint64_t)a << 21) ^ (b >> 11)) * 0x1.0p-53;
}

typedef struct rand_job {
    uint64_t seed, base;
    fc_dtype dtype;
    char *out;
    bool normal;
    double top; /* uniform: the largest value of dtype below 1 */
} rand_job;

/* A uniform draw in [1 - 2^-(p+1), 1) rounds up to 1.0 in a dtype of p
 * explicit mantissa bits (one in 2^12 draws for f16); clamping to the
 * largest value below 1 keeps the documented [0, 1). */
static double largest_below_one(fc_dtype dt) {
    switch (dt) {
    case FC_F16: return 1.0 - 0x1.0p-11;
    case FC_BF16: return 1.0 - 0x1.0p-8;
    case FC_F32: return 1.0 - 0x1.0p-24;
    default: return 1.0 - 0x1.0p-53;
    }
}

static void rand_slice(void *p, int64_t b, int64_t e) {
    rand_job *j = p;
    size_t es = fc_dtype_size(j->dtype);
    for (int64_t i = b; i < e; i++) {
        uint32_t w[4];
        fc__philox(j->seed, j->base + (uint64_t)i, w);
        double v;
        if (j->normal) {
            double u1 = u01(w[0], w[1]), u2 = u01(w[2], w[3]);
            v = sqrt(-2.0 * log1p(-u1)) * cos(6.283185307179586 * u2);
        } else {
            v = u01(w[0], w[1]);
            if (v > j->top) v = j->top;
        }
        if (j->dtype == FC_F32)
            ((float *)j->out)[i] = (float)v;
        else if (j->dtype == FC_F64)
            ((double *)j->out)[i] = v;
        else
            fc__store_f64(j->dtype, j->out + (size_t)i * es, v);
    }
}

static fc_tensor *random_tensor(fc_ctx *ctx, const char *op, fc_dtype dtype, const int64_t *shape,
                                int rank, bool normal) {
    FC__CHECK_CTX(ctx);
    if (!fc_dtype_is_float(dtype)) {
        fc__fail(ctx, FC_ERR_DTYPE, "%s: dtype %s is not a float dtype (f16, bf16, f32, f64)", op,
                 fc_dtype_name(dtype));
        return NULL;
    }
    fc_tensor *t = fc__tensor_new(ctx, op, dtype, shape, rank);
    if (!t) return NULL;
    int64_t n = fc__raw_numel(&t->raw);
    rand_job j = {ctx->rng_seed, fc__rng_reserve(ctx, (uint64_t)n), dtype, fc__raw_base(&t->raw),
                  normal, largest_below_one(dtype)};
    fc__parallel_for(ctx, n, 16384, rand_slice, &j);
    return t;
}

fc_tensor *fc_rand(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank) {
    return random_tensor(ctx, "fc_rand", dtype, shape, rank, false);
}

fc_tensor *fc_randn(fc_ctx *ctx, fc_dtype dtype, const int64_t *shape, int rank) {
    return random_tensor(ctx, "fc_randn", dtype, shape, rank, true);
}
