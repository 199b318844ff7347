/* qgather.c - fc__qget_rows: embedding rows gathered from a block-quantized
 * table (see qmatmul.h).
 *
 * A lookup touches a handful of rows of a table that may be huge (a
 * vocabulary), so only the selected rows are decoded, each straight into
 * its output row with the quant registry's row decoder (fc_dequantize on one
 * row): the values are bit for bit what dequantizing the whole table would
 * give. All indices are checked first, so a bad one leaves out untouched. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/qmatmul.h"
#include "fucina/quant.h"

#ifdef FUCINA_HAVE_OPENMP
#include <omp.h>
#endif

/* Values decoded per thread before a second thread is worth waking. */
#define GATHER_VALUES_PER_THREAD 65536

static fc_status fail(char *err, size_t cap, fc_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static fc_status fail(char *err, size_t cap, fc_status st, const char *fmt, ...) {
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return st;
}

static fc_status validate(fc_dtype wdt, const void *table, size_t ldt, int64_t nrows, int64_t k,
                          const int64_t *idx, int64_t nidx, const float *out, int64_t ldo,
                          int threads, size_t *row_bytes, char *err, size_t cap) {
    if (!table || (nidx > 0 && (!idx || !out)))
        return fail(err, cap, FC_ERR_NULL_ARG, "qget_rows: NULL %s",
                    !table ? "table"
                    : !idx ? "indices"
                           : "out");
    if (!fc_dtype_supports_quantized_get_rows(wdt))
        return fail(err, cap, FC_ERR_DTYPE, "qget_rows: table dtype %s (%d) is not a block dtype",
                    fc_dtype_name(wdt), (int)wdt);
    const int64_t be = fc_dtype_block_elems(wdt);
    if (nrows < 1 || k < 1 || k % be != 0 || nidx < 0)
        return fail(err, cap, FC_ERR_INVALID_SHAPE,
                    "qget_rows: nrows=%lld k=%lld nidx=%lld (k must be a multiple of %s's block "
                    "size %lld)",
                    (long long)nrows, (long long)k, (long long)nidx, fc_dtype_name(wdt),
                    (long long)be);
    *row_bytes = fc_quant_row_bytes(wdt, k);
    if (*row_bytes == 0)
        return fail(err, cap, FC_ERR_OVERFLOW, "qget_rows: a %s row of k=%lld does not fit",
                    fc_dtype_name(wdt), (long long)k);
    if (ldo < k || (ldt != 0 && ldt < *row_bytes) || threads < 1)
        return fail(err, cap, FC_ERR_INVALID_ARG,
                    "qget_rows: ldo=%lld (k=%lld), ldt=%zu (row bytes %zu), threads=%d",
                    (long long)ldo, (long long)k, ldt, *row_bytes, threads);
    const size_t stride = ldt ? ldt : *row_bytes;
    if ((uint64_t)(nrows - 1) > (SIZE_MAX - *row_bytes) / stride ||
        (nidx > 0 && (uint64_t)ldo > SIZE_MAX / sizeof(float) / (uint64_t)nidx))
        return fail(err, cap, FC_ERR_OVERFLOW, "qget_rows: nrows=%lld nidx=%lld ldo=%lld overflow",
                    (long long)nrows, (long long)nidx, (long long)ldo);
    for (int64_t r = 0; r < nidx; r++) {
        if (idx[r] < 0 || idx[r] >= nrows)
            return fail(err, cap, FC_ERR_INDEX,
                        "qget_rows: index %lld at position %lld is outside [0, %lld)",
                        (long long)idx[r], (long long)r, (long long)nrows);
    }
    return FC_OK;
}

fc_status fc__qget_rows(fc_dtype wdt, const void *table, size_t ldt, int64_t nrows, int64_t k,
                        const int64_t *idx, int64_t nidx, float *out, int64_t ldo, int threads,
                        char *err, size_t errcap) {
    size_t row_bytes = 0;
    const fc_status st =
        validate(wdt, table, ldt, nrows, k, idx, nidx, out, ldo, threads, &row_bytes, err, errcap);
    if (st != FC_OK || nidx == 0) return st;
    const size_t stride = ldt ? ldt : row_bytes;
    const uint8_t *t = table;
    /* nidx * k floats fit in memory (validated), so the product cannot overflow */
    int64_t nt = nidx * k / GATHER_VALUES_PER_THREAD;
    if (nt > threads) nt = threads;
    if (nt > nidx) nt = nidx;
    if (nt < 1) nt = 1;
    (void)nt;
#ifdef FUCINA_HAVE_OPENMP
#pragma omp parallel for schedule(static) num_threads((int)nt) if (nt > 1 && !omp_in_parallel())
#endif
    for (int64_t r = 0; r < nidx; r++) {
        /* validated above: cannot fail */
        (void)fc_dequantize(wdt, t + (size_t)idx[r] * stride, out + r * ldo, 1, k);
    }
    return FC_OK;
}
