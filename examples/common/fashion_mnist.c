/* SPDX-License-Identifier: MIT */
/* common/fashion_mnist.c - see fashion_mnist.h.
 *
 * IDX files: a big-endian header, then unsigned bytes.
 *   images: magic 0x00000803, count, rows, cols, count*rows*cols pixels
 *   labels: magic 0x00000801, count, count labels in 0..9 */
#define _POSIX_C_SOURCE 200809L

#include "common/fashion_mnist.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifdef EX_HAVE_ZLIB
#include <zlib.h>
#endif

/* A file handle over the .gz name with zlib (which also reads plain files),
 * or over the plain name with stdio when zlib is not built in. */
typedef struct idx_file {
#ifdef EX_HAVE_ZLIB
    gzFile gz;
#else
    FILE *f;
#endif
} idx_file;

static bool idx_open(idx_file *h, const char *dir, const char *name, char *path, size_t cap) {
#ifdef EX_HAVE_ZLIB
    snprintf(path, cap, "%s/%s.gz", dir, name);
    h->gz = gzopen(path, "rb");
    if (!h->gz) {
        snprintf(path, cap, "%s/%s", dir, name); /* an unpacked copy will do */
        h->gz = gzopen(path, "rb");
        if (!h->gz) snprintf(path, cap, "%s/%s.gz", dir, name);
    }
    return h->gz != NULL;
#else
    snprintf(path, cap, "%s/%s", dir, name);
    h->f = fopen(path, "rb");
    return h->f != NULL;
#endif
}

static bool idx_read(idx_file *h, void *dst, size_t n) {
#ifdef EX_HAVE_ZLIB
    unsigned char *p = dst;
    while (n > 0) { /* gzread takes an unsigned count: read in chunks */
        unsigned chunk = n > (1u << 30) ? 1u << 30 : (unsigned)n;
        int got = gzread(h->gz, p, chunk);
        if (got <= 0) return false;
        p += got;
        n -= (size_t)got;
    }
    return true;
#else
    return fread(dst, 1, n, h->f) == n;
#endif
}

static void idx_close(idx_file *h) {
#ifdef EX_HAVE_ZLIB
    gzclose(h->gz);
#else
    fclose(h->f);
#endif
}

/* Reads one IDX file of the expected magic into a malloc'ed array; dims
 * gets its dimensions. Returns NULL after printing why. */
static uint8_t *idx_load(const char *prog, const char *dir, const char *name, uint32_t magic,
                         uint32_t *dims, int ndims) {
    char path[4096];
    idx_file h;
    if (!idx_open(&h, dir, name, path, sizeof path)) {
        fprintf(stderr, "%s: cannot open %s: %s\n", prog, path, strerror(errno));
        return NULL;
    }
    unsigned char head[4 * 4];
    uint8_t *data = NULL;
    size_t n = 1;
    bool ok = idx_read(&h, head, 4 * (size_t)(1 + ndims));
    uint32_t m = ok ? (uint32_t)head[0] << 24 | head[1] << 16 | head[2] << 8 | head[3] : 0;
    ok = ok && m == magic;
    for (int i = 0; ok && i < ndims; i++) {
        const unsigned char *b = head + 4 * (i + 1);
        dims[i] = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
        ok = dims[i] > 0 && dims[i] < (1u << 24);
        n *= dims[i];
    }
    if (ok) data = malloc(n);
    if (data && !idx_read(&h, data, n)) {
        free(data);
        data = NULL;
    }
    idx_close(&h);
    if (!data)
        fprintf(stderr, "%s: %s is not a complete IDX file with magic 0x%08x\n", prog, path, magic);
    return data;
}

bool fm_split_load(const char *prog, const char *dir, const char *prefix, fm_split *s) {
    char iname[64], lname[64];
    snprintf(iname, sizeof iname, "%s-images-idx3-ubyte", prefix);
    snprintf(lname, sizeof lname, "%s-labels-idx1-ubyte", prefix);
    uint32_t idims[3], ldims[1];
    s->images = idx_load(prog, dir, iname, 0x803, idims, 3);
    s->labels = s->images ? idx_load(prog, dir, lname, 0x801, ldims, 1) : NULL;
    if (!s->labels) return false;
    if (idims[0] != ldims[0] || idims[1] * idims[2] != FM_PIXELS) {
        fprintf(stderr, "%s: %s: %u images of %ux%u but %u labels (want 28x28)\n", prog, dir,
                idims[0], idims[1], idims[2], ldims[0]);
        return false;
    }
    s->n = idims[0];
    for (int64_t i = 0; i < s->n; i++) {
        if (s->labels[i] >= FM_CLASSES) {
            fprintf(stderr, "%s: %s: label %d of image %lld is not a class\n", prog, dir,
                    s->labels[i], (long long)i);
            return false;
        }
    }
    return true;
}

bool fm_dataset_present(const char *dir) {
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
    if (stat(path, &sb) == 0) return true;
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", dir);
    return stat(path, &sb) == 0;
}

void fm_pixel_table(const fm_split *train, float *lut) {
    double sum = 0, sq = 0;
    int64_t n = train->n * FM_PIXELS;
    for (int64_t i = 0; i < n; i++) {
        double v = train->images[i] / 255.0;
        sum += v;
        sq += v * v;
    }
    double mean = sum / (double)n, sd = sqrt(sq / (double)n - mean * mean);
    for (int p = 0; p < 256; p++)
        lut[p] = (float)((p / 255.0 - mean) / sd);
}

void fm_fill_batch(const fm_split *s, const int64_t *order, int64_t B, const float *lut, float *x,
                   int64_t *y) {
    for (int64_t b = 0; b < B; b++) {
        const uint8_t *img = s->images + order[b] * FM_PIXELS;
        for (int k = 0; k < FM_PIXELS; k++)
            x[b * FM_PIXELS + k] = lut[img[k]];
        y[b] = s->labels[order[b]];
    }
}

void fm_split_free(fm_split *s) {
    free(s->images);
    free(s->labels);
    s->images = s->labels = NULL;
    s->n = 0;
}
