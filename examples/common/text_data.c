/* SPDX-License-Identifier: MIT */
/* text_data.c - loading a text file and splitting it into training and
 * validation windows (see text_data.h). Training windows are sampled by a
 * flat index over all runs, so every window is equally likely whatever the
 * run lengths. */
#include "text_data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "progress.h"

bool ex_text_load(const char *prog, const char *path, ex_text *d) {
    memset(d, 0, sizeof *d);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open %s: %s\n", prog, path, strerror(errno));
        return false;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            unsigned char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "%s: out of memory reading %s\n", prog, path);
        return false;
    }
    int id_of[256];
    bool seen[256] = {false};
    d->hash = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) {
        seen[buf[i]] = true;
        d->hash = (d->hash ^ buf[i]) * 0x100000001B3ull;
    }
    for (int c = 0; c < 256; c++) {
        id_of[c] = seen[c] ? d->vocab : -1;
        if (seen[c]) d->chars[d->vocab++] = (unsigned char)c;
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)id_of[buf[i]];
    d->ids = buf;
    d->n = (int64_t)n;
    return true;
}

bool ex_text_split(ex_text *d, int64_t T) {
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
            d->val_chars += hi - lo;
            for (int64_t off = lo; off + T + 1 <= hi; off += T)
                d->val_off[d->nval++] = off;
        } else if (k % 10 == 0) { /* a run of up to 9 training blocks starts */
            int64_t end = (k + 9) * seg < d->n ? (k + 9) * seg : d->n;
            d->train_chars += end - lo;
            if (end - lo >= T + 1) {
                d->run_lo[d->nruns] = lo;
                d->run_cnt[d->nruns] = end - lo - T;
                d->ntrain += d->run_cnt[d->nruns++];
            }
        }
    }
    return d->ntrain > 0 && d->nval > 0;
}

void ex_text_free(ex_text *d) {
    free(d->ids);
    free(d->run_lo);
    free(d->run_cnt);
    free(d->val_off);
}

void ex_text_windows(const ex_text *d, const int64_t *off, int64_t rows, int64_t T, int64_t *idx,
                     int64_t *tgt) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t t = 0; t < T; t++) {
            idx[r * T + t] = d->ids[off[r] + t];
            tgt[r * T + t] = d->ids[off[r] + t + 1];
        }
}

void ex_text_batch(const ex_text *d, int64_t B, int64_t T, uint64_t *rng, int64_t *idx,
                   int64_t *tgt) {
    for (int64_t b = 0; b < B; b++) {
        int64_t u = (int64_t)ex_rand_below(rng, (uint64_t)d->ntrain), k = 0;
        while (u >= d->run_cnt[k])
            u -= d->run_cnt[k++];
        int64_t off = d->run_lo[k] + u;
        ex_text_windows(d, &off, 1, T, idx + b * T, tgt + b * T);
    }
}
