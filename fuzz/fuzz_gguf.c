/* SPDX-License-Identifier: MIT */
/* fuzz_gguf.c - libFuzzer target for the GGUF reader. Any input must either
 * be refused with a status or yield descriptors and metadata values whose
 * bytes all lie inside the input: the target walks every value (nested
 * arrays included) through the public getters and reads the first and last
 * byte of every tensor, so AddressSanitizer reports anything outside. The
 * input is copied to an exact-size heap block (an empty input is passed as
 * NULL, as a 0-byte file's bytes are: UBSan reports arithmetic on that
 * NULL). Built by fuzz/run.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint8_t sink;

static void walk(const fc_gguf_value *v, int depth) {
    if (depth > 16) abort(); /* the reader caps nesting at 8 */
    fc_gguf_type type = fc_gguf_value_type(v), et;
    int64_t i;
    uint64_t u, n;
    double d;
    const char *s;
    size_t len;
    if (type == FC_GGUF_STRING) {
        if (fc_gguf_value_string(v, &s, &len) != FC_OK) abort();
        if (len) sink ^= (uint8_t)(s[0] ^ s[len - 1]);
        return;
    }
    if (type != FC_GGUF_ARRAY) {
        (void)fc_gguf_value_int(v, &i);
        (void)fc_gguf_value_uint(v, &u);
        (void)fc_gguf_value_float(v, &d);
        return;
    }
    if (fc_gguf_array_info(v, &et, &n) != FC_OK) abort();
    if (et == FC_GGUF_STRING || et == FC_GGUF_ARRAY) {
        for (uint64_t k = 0; k < n; k++) {
            const fc_gguf_value *item = fc_gguf_array_item(v, k);
            if (!item) abort();
            walk(item, depth + 1);
        }
    } else if (n > 0) {
        (void)fc_gguf_array_int(v, 0, &i);
        (void)fc_gguf_array_uint(v, n - 1, &u);
        (void)fc_gguf_array_float(v, n - 1, &d);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    fc_gguf_file *f = NULL;
    if (fc_gguf_open_memory(size ? copy : NULL, size, NULL, &f) == FC_OK) {
        for (int64_t i = 0; i < fc_gguf_kv_count(f); i++) {
            const char *key = fc_gguf_kv_key(f, i);
            if (!key || fc_gguf_kv_find(f, key) != fc_gguf_kv_value(f, i)) abort();
            walk(fc_gguf_kv_value(f, i), 0);
        }
        for (int64_t i = 0; i < fc_gguf_tensor_count(f); i++) {
            fc_io_tensor t;
            if (fc_gguf_tensor_info(f, i, &t) != FC_OK || t.nbytes == 0) abort();
            const uint8_t *p = t.data;
            sink ^= p[0];
            sink ^= p[t.nbytes - 1];
            if (fc_gguf_find(f, t.name) != i) abort();
        }
        fc_gguf_close(f);
    }
    free(copy);
    return 0;
}
