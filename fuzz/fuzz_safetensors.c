/* SPDX-License-Identifier: MIT */
/* fuzz_safetensors.c - libFuzzer target for the safetensors reader (and the
 * JSON reader under it). Any input must either be refused with a status or
 * yield descriptors whose bytes all lie inside the input: the target reads
 * the first and last byte of every tensor and every metadata string, so
 * AddressSanitizer reports any descriptor that points outside. The input is
 * copied to an exact-size heap block so reads past its end are caught too
 * (an empty input is passed as NULL, as a 0-byte file's bytes are: UBSan
 * reports arithmetic on that NULL).
 * Built by fuzz/run.sh with clang -fsanitize=fuzzer,address,undefined. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    fc_st_file *f = NULL;
    volatile uint8_t sink = 0;
    if (fc_safetensors_open_memory(size ? copy : NULL, size, NULL, &f) == FC_OK) {
        for (int64_t i = 0; i < fc_safetensors_tensor_count(f); i++) {
            fc_io_tensor t;
            if (fc_safetensors_tensor_info(f, i, &t) != FC_OK) abort();
            if (t.nbytes) {
                const uint8_t *p = t.data;
                sink ^= p[0];
                sink ^= p[t.nbytes - 1];
            }
            if (fc_safetensors_find(f, t.name) != i) abort();
        }
        for (int64_t i = 0; i < fc_safetensors_meta_count(f); i++) {
            const char *k, *v;
            if (fc_safetensors_meta_at(f, i, &k, &v) != FC_OK) abort();
            sink ^= (uint8_t)strlen(k) ^ (uint8_t)strlen(v);
            if (fc_safetensors_meta_find(f, k) != v) abort();
        }
        fc_safetensors_close(f);
    }
    (void)sink;
    free(copy);
    return 0;
}
