/* SPDX-License-Identifier: MIT */
/* fucina-demo: exercises the public API end to end and says what it did.
 * (The char-level GPT trainer replaces it as the main job.) */
#include <fucina.h>
#include <stdio.h>

int main(void) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.seed = 42});
    if (!ctx) {
        fprintf(stderr, "fucina-demo: cannot create a context\n");
        return 1;
    }
    fc_scope_begin(ctx);
    fc_tensor *x = fc_randn(ctx, FC_F32, (const int64_t[]){4, 8}, 2);
    fc_tensor *h = fc_to(ctx, x, FC_BF16);
    if (!x || !h) {
        fprintf(stderr, "fucina-demo: %s\n", fc_ctx_error(ctx));
        fc_ctx_free(ctx);
        return 1;
    }
    char d1[64], d2[64];
    const float *xp = fc_tensor_data(x);
    const uint16_t *hp = fc_tensor_data(h);
    printf("created %s from the counter-based RNG (seed 42)\n", fc_tensor_describe(x, d1, sizeof d1));
    printf("cast to %s: x[0] = %.7f -> bf16 bits 0x%04x = %.7f\n",
           fc_tensor_describe(h, d2, sizeof d2), xp[0], hp[0], fc_bf16_to_f32(hp[0]));
    fc_tensor *bad = fc_zeros(ctx, FC_Q4_K, (const int64_t[]){2, 100}, 2);
    printf("asking for a q4_k tensor of shape [2,100] gives %s: %s\n",
           bad ? "a tensor" : fc_status_name(fc_ctx_status(ctx)), fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_scope_end(ctx);
    fc_ctx_stats st;
    fc_ctx_get_stats(ctx, &st);
    printf("after the scope: %lld live tensors, %llu allocator calls, peak %lld bytes\n",
           (long long)st.tensors_live, (unsigned long long)st.alloc_calls,
           (long long)st.bytes_peak);
    fc_ctx_free(ctx);
    return 0;
}
