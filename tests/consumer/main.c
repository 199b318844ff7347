/* SPDX-License-Identifier: MIT */
/* A program outside the tree, built against the installed package. */
#include <fucina.h>
#include <stdio.h>

int main(void) {
    fc_dtype dt;
    if (fc_dtype_from_name("q4_k", &dt) != FC_OK || dt != FC_Q4_K) return 1;
    fc_ctx *ctx = fc_ctx_new(NULL);
    if (!ctx) return 2;
    fc_tensor *t = fc_ones(ctx, FC_F32, (const int64_t[]){2, 3}, 2);
    if (!t || fc_tensor_numel(t) != 6) return 3;
    printf("consumer: %s has %lld elements; fc_strerror(FC_ERR_OOM) = \"%s\"\n",
           fc_dtype_name(fc_tensor_dtype(t)), (long long)fc_tensor_numel(t),
           fc_strerror(FC_ERR_OOM));
    fc_release(t);
    fc_ctx_free(ctx);
    return 0;
}
