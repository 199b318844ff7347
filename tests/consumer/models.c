/* SPDX-License-Identifier: MIT */
/* A program outside the tree using the installed fucina_models: the
 * byte-level tokenizer round-trips a text, and a tiny Llama runs. */
#include <fucina.h>
#include <fucina/llama.h>
#include <fucina/tokenizer.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    fc_ctx *ctx = fc_ctx_new(NULL);
    fc_tokenizer *tok = NULL;
    if (!ctx || fc_tokenizer_new_bytes(ctx, NULL, &tok) != FC_OK) return 1;
    const char text[] = "fucina";
    int32_t ids[16];
    int64_t n = 0;
    if (fc_tokenizer_encode(ctx, tok, text, strlen(text), 0, ids, 16, &n) != FC_OK || n != 6)
        return 2;
    char back[16];
    size_t len = 0;
    if (fc_tokenizer_decode(ctx, tok, ids, n, 0, back, sizeof back, &len) != FC_OK || len != 6 ||
        memcmp(back, text, 6))
        return 3;
    fc_llama_config c = {.vocab = fc_tokenizer_vocab_size(tok), .dim = 16, .n_heads = 2,
                         .n_kv_heads = 1, .n_layers = 1, .ff_dim = 32, .context = 8};
    fc_llama *m = NULL;
    if (fc_llama_new(ctx, &c, &m) != FC_OK) return 4;
    fc_tensor *t = fc_tensor_from_data(ctx, FC_I32, (const int64_t[]){6}, 1, ids);
    fc_tensor *y = fc_llama_forward(ctx, m, t);
    if (!y || fc_tensor_dim(y, 2) != c.vocab) return 5;
    printf("consumer_models: logits [%lld, %lld, %lld]\n", (long long)fc_tensor_dim(y, 0),
           (long long)fc_tensor_dim(y, 1), (long long)fc_tensor_dim(y, 2));
    fc_release(y);
    fc_release(t);
    fc_llama_free(m);
    fc_tokenizer_free(tok);
    fc_ctx_free(ctx);
    return 0;
}
