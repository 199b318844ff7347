/* SPDX-License-Identifier: MIT */
/* text_data.h - a text file as character-level training data.
 *
 * Tokens are the file's distinct bytes, numbered in byte order (so the
 * vocabulary is at most 256 and a file maps to the same ids every time).
 * The split cuts the text into blocks of `seg` characters and holds out
 * every 10th block for validation, so the validation set samples the whole
 * document; the tail of a file alone is often a different kind of text
 * (a licence's "how to apply" appendix, a book's index). A window is T
 * inputs plus the T next characters as targets, so it spans T + 1
 * characters, and never crosses from a training block into a held-out one.
 */
#ifndef EX_TEXT_DATA_H
#define EX_TEXT_DATA_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ex_text {
    uint8_t *ids;              /* the whole text as token ids */
    int64_t n;                 /* characters */
    int vocab;                 /* distinct bytes */
    unsigned char chars[256];  /* id -> byte */
    uint64_t hash;             /* FNV-1a of the bytes (to recognise the file on resume) */
    int64_t seg;               /* block length of the split */
    int64_t nruns;             /* training runs: stretches of consecutive training blocks */
    int64_t *run_lo, *run_cnt; /* first window offset of each run, and its window count */
    int64_t ntrain;            /* training windows in all runs */
    int64_t *val_off, nval;    /* validation windows: stride T inside each held-out block */
    int64_t train_chars, val_chars;
} ex_text;

/* Reads path and numbers its bytes. False after printing why (the
 * message names prog). */
bool ex_text_load(const char *prog, const char *path, ex_text *d);

/* Builds the window tables for context T: blocks of 16T characters (fewer
 * for short texts, never under 2(T+1)), block k held out when k % 10 == 9.
 * False when either side would have no whole window (or out of memory). */
bool ex_text_split(ex_text *d, int64_t T);

/* Frees what load and split allocated. */
void ex_text_free(ex_text *d);

/* rows windows starting at off[] -> idx (rows,T) and next characters tgt
 * (rows*T). */
void ex_text_windows(const ex_text *d, const int64_t *off, int64_t rows, int64_t T, int64_t *idx,
                     int64_t *tgt);

/* B windows drawn uniformly from all training windows with the PRNG state
 * *rng -> idx (B,T) and tgt (B*T). */
void ex_text_batch(const ex_text *d, int64_t B, int64_t T, uint64_t *rng, int64_t *idx,
                   int64_t *tgt);

#endif /* EX_TEXT_DATA_H */
