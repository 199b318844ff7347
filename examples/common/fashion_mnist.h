/* SPDX-License-Identifier: MIT */
/* common/fashion_mnist.h - the Fashion-MNIST data set of Debian's
 * dataset-fashion-mnist package, for the trainers: IDX files (gzip, read
 * with zlib when it is built in; an unpacked copy also works), loaded into
 * memory, standardized through a 256-entry pixel table, and copied into
 * batches. Errors are printed with the calling program's name. */
#ifndef FUCINA_EXAMPLES_FASHION_MNIST_H
#define FUCINA_EXAMPLES_FASHION_MNIST_H

#include <stdbool.h>
#include <stdint.h>

enum { FM_PIXELS = 28 * 28, FM_CLASSES = 10 };

/* Debian's location of the data set. */
#define FM_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"

typedef struct fm_split {
    uint8_t *images; /* n * FM_PIXELS */
    uint8_t *labels; /* n, each < FM_CLASSES */
    int64_t n;
} fm_split;

/* Loads "<dir>/<prefix>-images-idx3-ubyte[.gz]" and its labels ("train" or
 * "t10k"). false after printing why (prog names the program); the split may
 * hold a partial load: fm_split_free it either way. */
bool fm_split_load(const char *prog, const char *dir, const char *prefix, fm_split *s);
void fm_split_free(fm_split *s);
/* true when the first file of the data set exists (to tell "missing" from
 * "broken"). */
bool fm_dataset_present(const char *dir);
/* Pixel bytes -> standardized floats, (p/255 - mean) / std over the
 * training images, as a 256-entry table. */
void fm_pixel_table(const fm_split *train, float *lut);
/* Images order[0..B) of s -> x (B * FM_PIXELS floats, row-major, which is
 * [B, 784] or [B, 1, 28, 28] alike) and their labels -> y. */
void fm_fill_batch(const fm_split *s, const int64_t *order, int64_t B, const float *lut, float *x,
                   int64_t *y);

#endif /* FUCINA_EXAMPLES_FASHION_MNIST_H */
