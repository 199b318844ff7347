/* SPDX-License-Identifier: MIT */
/* test_oom_layout.c - out-of-memory sweep over the layout, join, index and
 * mask ops, forward and backward (see oom_sweep.h for what is checked at
 * every N): views of a parameter, a reshape that copies, a split, a join of
 * more inputs than one tape node holds, pad, index_select/embedding,
 * gather/scatter_add, triu and dropout, each followed by a backward. A
 * failed op returns NULL and the NULL flows through the rest, so every
 * scenario ends with the first error recorded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "counting_alloc.h"
#include "oom_sweep.h"

static fc_status done(fc_ctx *ctx) { return fc_ctx_status(ctx); }

/* backward from out with a gradient of ones, when everything so far worked */
static fc_status backward_ones(fc_ctx *ctx, fc_tensor *out) {
    fc_status st = done(ctx);
    if (st != FC_OK) return st;
    fc_tensor *g = fc_ones(ctx, FC_F32, fc_tensor_shape(out), fc_tensor_rank(out));
    return g ? fc_backward_with(ctx, out, g, false) : done(ctx);
}

static fc_status sc_views_and_joins(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *x = fc_param_randn(ctx, FC_F32, (const int64_t[]){4, 6}, 2, 1.0);
    fc_tensor *t = fc_transpose(ctx, x, 0, 1);
    fc_tensor *flat = fc_reshape(ctx, t, (const int64_t[]){4, 6}, 2); /* copies */
    fc_tensor *parts[3] = {NULL, NULL, NULL};
    if (x) fc_split(ctx, x, 1, (const int64_t[]){1, 2, 3}, 3, parts);
    fc_tensor *e = fc_expand(ctx, fc_unsqueeze(ctx, fc_narrow(ctx, x, 0, 1, 1), 0),
                             (const int64_t[]){4, 1, 6}, 3);
    fc_tensor *xs[6] = {
        flat,
        /* views of x's storage, flattened and back */
        fc_view(ctx, fc_slice(ctx, fc_view(ctx, x, (const int64_t[]){24}, 1), 0, 0, 24, 1),
                (const int64_t[]){4, 6}, 2),
        fc_squeeze(ctx, e, 1), fc_pad(ctx, parts[0], (const int64_t[]){0, 0, 2, 3}, 1.0),
        fc_concat(ctx, (fc_tensor *[]){parts[2], parts[1], parts[0]}, 3, 1),
        fc_permute(ctx, fc_transpose(ctx, x, 1, 0), (const int[]){1, 0})};
    fc_tensor *out = fc_stack(ctx, xs, 6, 0);
    fc_status st = backward_ones(ctx, out);
    fc_scope_end(ctx);
    return st;
}

static fc_status sc_indexing(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *table = fc_param_randn(ctx, FC_F32, (const int64_t[]){7, 5}, 2, 1.0);
    int32_t ids_v[6] = {4, 0, 4, 2, 3, 3};
    int64_t gidx_v[14] = {4, 0, 1, 1, 2, 3, 0, 0, 4, 4, 3, 2, 1, 0};
    fc_tensor *ids = fc_tensor_from_data(ctx, FC_I32, (const int64_t[]){2, 3}, 2, ids_v);
    fc_tensor *emb = fc_embedding(ctx, table, ids);
    fc_tensor *sel = fc_index_select(ctx, table, 1, ids);
    fc_tensor *gidx = fc_tensor_from_data(ctx, FC_I64, (const int64_t[]){7, 2}, 2, gidx_v);
    fc_tensor *g = fc_gather(ctx, table, 1, gidx);
    fc_tensor *z = fc_zeros(ctx, FC_F32, (const int64_t[]){7, 5, 2}, 3);
    fc_tensor *sc = fc_scatter_add(ctx, z, 0, fc_unsqueeze(ctx, ids, 2), emb);
    fc_one_hot(ctx, ids, 7, FC_F32);
    fc_status st = backward_ones(ctx, sc);
    if (st == FC_OK) st = backward_ones(ctx, g);
    if (st == FC_OK) st = backward_ones(ctx, sel);
    fc_scope_end(ctx);
    return st;
}

static fc_status sc_masks(fc_ctx *ctx) {
    fc_scope_begin(ctx);
    fc_tensor *x = fc_param_randn(ctx, FC_BF16, (const int64_t[]){3, 4, 4}, 3, 1.0);
    fc_tensor *y = fc_dropout(ctx, fc_tril(ctx, fc_triu(ctx, x, -1), 1), 0.5, true);
    fc_tensor *w = fc_dropout(ctx, y, 0.5, false);
    fc_status st = backward_ones(ctx, w);
    fc_scope_end(ctx);
    return st;
}

static const oom_scenario scenarios[] = {
    {"views and joins", sc_views_and_joins},
    {"indexing", sc_indexing},
    {"triangles and dropout", sc_masks},
};

static void test_oom_layout_scenarios(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        oom_result r = oom_sweep(&scenarios[i]);
        printf("oom sweep: %-24s completed at N=%ld after %ld faulted runs\n", scenarios[i].name,
               r.largest_n, r.failures);
        assert_true(r.largest_n > 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_oom_layout_scenarios)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
