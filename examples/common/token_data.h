/* SPDX-License-Identifier: MIT */
/* token_data.h - a text file as token-level training data, tokenized with
 * any fucina tokenizer (fucina/tokenizer.h): the train_llama counterpart of
 * text_data.h, with the same split. The text is cut into blocks of `seg`
 * tokens and every 10th block is held out for validation, so the
 * validation set samples the whole document. A window is T input tokens
 * plus the T next ones as targets (T + 1 tokens), and never crosses from a
 * training block into a held-out one.
 */
#ifndef EX_TOKEN_DATA_H
#define EX_TOKEN_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "fucina/tokenizer.h"

typedef struct ex_tokens {
    int32_t *ids;              /* the whole text as token ids */
    int64_t n;                 /* tokens */
    int64_t bytes;             /* bytes of the text */
    uint64_t hash;             /* FNV-1a of the ids (the text and the tokenizer, for resume) */
    int64_t seg;               /* block length of the split, in tokens */
    int64_t nruns;             /* stretches of consecutive training blocks */
    int64_t *run_lo, *run_cnt; /* first window offset of each run, and its window count */
    int64_t ntrain;            /* training windows in all runs */
    int64_t *val_off, nval;    /* validation windows: stride T inside each held-out block */
    int64_t train_tokens, val_tokens;
} ex_tokens;

/* Reads path and encodes it with tok (no BOS/EOS added; special tokens in
 * the text are read as text). False after printing why (naming prog). */
bool ex_tokens_load(const char *prog, const char *path, const fc_tokenizer *tok, ex_tokens *d);

/* Builds the window tables for context T (blocks of 16T tokens, fewer for
 * short texts, never under 2(T+1); block k held out when k % 10 == 9).
 * False when either side would have no whole window, or out of memory. */
bool ex_tokens_split(ex_tokens *d, int64_t T);

void ex_tokens_free(ex_tokens *d);

/* rows windows starting at off[] -> idx (rows,T) and next tokens tgt (rows*T). */
void ex_tokens_windows(const ex_tokens *d, const int64_t *off, int64_t rows, int64_t T,
                       int64_t *idx, int64_t *tgt);

/* B windows drawn uniformly from all training windows with the PRNG *rng. */
void ex_tokens_batch(const ex_tokens *d, int64_t B, int64_t T, uint64_t *rng, int64_t *idx,
                     int64_t *tgt);

#endif /* EX_TOKEN_DATA_H */
