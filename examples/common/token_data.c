/* SPDX-License-Identifier: MIT */
/* token_data.c - a text file encoded with a tokenizer, split into training
 * and validation windows (see token_data.h; the policy is text_data.c's). */
#include "token_data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "progress.h"

/* the whole file, malloc'd (*n bytes); NULL after printing why */
static char *read_all(const char *prog, const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open %s: %s\n", prog, path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += got;
        if (len == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (!buf) fprintf(stderr, "%s: out of memory reading %s\n", prog, path);
    *n = len;
    return buf;
}

bool ex_tokens_load(const char *prog, const char *path, const fc_tokenizer *tok, ex_tokens *d) {
    memset(d, 0, sizeof *d);
    size_t len = 0;
    char *text = read_all(prog, path, &len);
    if (!text) return false;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    int64_t n = 0;
    /* measure, then encode into a buffer of that size */
    fc_status st = ctx ? fc_tokenizer_encode(ctx, tok, text, len, 0, NULL, 0, &n) : FC_ERR_OOM;
    if (st == FC_ERR_DATA_LENGTH || (st == FC_OK && n == 0)) {
        d->ids = malloc(sizeof *d->ids * (size_t)(n ? n : 1));
        st = d->ids ? fc_tokenizer_encode(ctx, tok, text, len, 0, d->ids, n, &n) : FC_ERR_OOM;
    }
    if (st != FC_OK)
        fprintf(stderr, "%s: tokenizing %s: %s\n", prog, path,
                ctx ? fc_ctx_error(ctx) : "out of memory");
    fc_ctx_free(ctx);
    free(text);
    if (st != FC_OK) {
        free(d->ids);
        d->ids = NULL;
        return false;
    }
    d->n = n;
    d->bytes = (int64_t)len;
    d->hash = 0xCBF29CE484222325ull;
    for (int64_t i = 0; i < n; i++)
        for (int b = 0; b < 4; b++)
            d->hash = (d->hash ^ (((uint32_t)d->ids[i] >> (8 * b)) & 0xFF)) * 0x100000001B3ull;
    return true;
}

bool ex_tokens_split(ex_tokens *d, int64_t T) {
    int64_t seg = d->n / 20 < 16 * T ? d->n / 20 : 16 * T;
    if (seg < 2 * (T + 1)) seg = 2 * (T + 1);
    int64_t nseg = (d->n + seg - 1) / seg;
    d->seg = seg;
    d->run_lo = malloc(sizeof(int64_t) * (size_t)(nseg / 10 + 1));
    d->run_cnt = malloc(sizeof(int64_t) * (size_t)(nseg / 10 + 1));
    d->val_off = malloc(sizeof(int64_t) * (size_t)(d->n / T + 1));
    if (!d->run_lo || !d->run_cnt || !d->val_off) return false;
    for (int64_t k = 0; k < nseg; k++) {
        int64_t lo = k * seg, hi = lo + seg < d->n ? lo + seg : d->n;
        if (k % 10 == 9) { /* held out: whole windows, stride T */
            d->val_tokens += hi - lo;
            for (int64_t off = lo; off + T + 1 <= hi; off += T)
                d->val_off[d->nval++] = off;
        } else if (k % 10 == 0) { /* a run of up to 9 training blocks starts */
            int64_t end = (k + 9) * seg < d->n ? (k + 9) * seg : d->n;
            d->train_tokens += end - lo;
            if (end - lo >= T + 1) {
                d->run_lo[d->nruns] = lo;
                d->run_cnt[d->nruns] = end - lo - T;
                d->ntrain += d->run_cnt[d->nruns++];
            }
        }
    }
    return d->ntrain > 0 && d->nval > 0;
}

void ex_tokens_free(ex_tokens *d) {
    free(d->ids);
    free(d->run_lo);
    free(d->run_cnt);
    free(d->val_off);
    memset(d, 0, sizeof *d);
}

void ex_tokens_windows(const ex_tokens *d, const int64_t *off, int64_t rows, int64_t T,
                       int64_t *idx, int64_t *tgt) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t t = 0; t < T; t++) {
            idx[r * T + t] = d->ids[off[r] + t];
            tgt[r * T + t] = d->ids[off[r] + t + 1];
        }
}

void ex_tokens_batch(const ex_tokens *d, int64_t B, int64_t T, uint64_t *rng, int64_t *idx,
                     int64_t *tgt) {
    for (int64_t b = 0; b < B; b++) {
        int64_t u = (int64_t)ex_rand_below(rng, (uint64_t)d->ntrain), k = 0;
        while (u >= d->run_cnt[k])
            u -= d->run_cnt[k++];
        int64_t off = d->run_lo[k] + u;
        ex_tokens_windows(d, &off, 1, T, idx + b * T, tgt + b * T);
    }
}
