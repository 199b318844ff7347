/* SPDX-License-Identifier: MIT */
/* fc_test_data.h - helpers shared by the test executables: reading a golden
 * file and a small deterministic PRNG for pseudo-random bit patterns. */
#ifndef FC_TEST_DATA_H
#define FC_TEST_DATA_H

#include <stddef.h>
#include <stdint.h>

/* Reads the whole file dir/rel (dir is normally FUCINA_TEST_DATA_DIR) into a
 * new malloc'd buffer and stores its length in *size. Returns NULL (and
 * prints why to stderr) if the file cannot be read; the caller frees. */
void *fc_test_read_file(const char *dir, const char *rel, size_t *size);

/* splitmix64: a full-period 64-bit generator; the same seed gives the same
 * sequence everywhere, so a failure reproduces. */
static inline uint64_t fc_test_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

#endif /* FC_TEST_DATA_H */
