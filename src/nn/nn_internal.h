/* SPDX-License-Identifier: MIT */
/* nn_internal.h - the registry's layout and the helpers the layer files
 * share. Internal to src/nn. */
#ifndef FUCINA_NN_INTERNAL_H
#define FUCINA_NN_INTERNAL_H

#include "fucina/nn.h"

typedef struct nn_entry {
    char name[FC_NN_NAME_MAX];
    fc_tensor *t; /* owned */
    unsigned flags;
} nn_entry;

struct fc_nn {
    fc_ctx *ctx;
    fc_tensor *self;  /* the storage this struct lives in */
    fc_tensor *e_mem; /* the storage of e */
    nn_entry *e;
    int64_t n, cap;
    bool training;
};

/* dst = prefix "." name (or name alone); FC_ERR_INVALID_ARG past
 * FC_NN_NAME_MAX - 1 bytes, recorded with fn's name. */
fc_status fc__nn_join(fc_nn *nn, char *dst, const char *prefix, const char *name, const char *fn);
/* Index of name, or -1. */
int64_t fc__nn_index(const fc_nn *nn, const char *name);
/* n bytes (n >= 1), zeroed, from the context's allocator: the storage of
 * a u8 tensor, taken out of any open scope. Returns that tensor (release
 * it to free the bytes) and the bytes in *p; NULL with FC_ERR_OOM (or the
 * context's error) recorded. The library's code goes through the
 * allocator hooks (tests/reliability/test_alloc_hooks.c), and nn sees only
 * the public API, so its bookkeeping lives in tensors. */
fc_tensor *fc__nn_mem(fc_ctx *ctx, size_t n, void **p);
/* An f32 tensor U(-bound, bound) of shape, or NULL + the context's error. */
fc_tensor *fc__nn_uniform(fc_ctx *ctx, const int64_t *shape, int rank, double bound);

#endif /* FUCINA_NN_INTERNAL_H */
