/* SPDX-License-Identifier: MIT */
/* fucina-bench: one subcommand per workload of ../shared/BENCHMARKS.md, each
 * printing one JSON line whose keys mirror the PyTorch peer in
 * ../shared/peers/, so bench/compare.sh can print ratios. */
#include <stdio.h>
#include <string.h>

#include "bench.h"

typedef struct cmd {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *what;
} cmd;

int fc_bench_gemm(int argc, char **argv);     /* bench_gemm.c */
int bench_qmatvec(int argc, char **argv);     /* bench_qmatvec.c */
int bench_conv_train(int argc, char **argv);  /* bench_conv.c */
int bench_attention(int argc, char **argv);   /* bench_attention.c */
int bench_llama_train(int argc, char **argv); /* bench_llama.c */
int bench_llama_gen(int argc, char **argv);   /* bench_llama.c */
int bench_qlora_step(int argc, char **argv);  /* bench_qlora.c */
int bench_tokenizer_added(int argc, char **argv); /* bench_tokenizer.c */

static const cmd cmds[] = {
    {"gemm", fc_bench_gemm, "f32 GEMM n = 256, 1024, 2048: fc_matmul vs cblas_sgemm"},
    {"elementwise", bench_elementwise, "add (out= and fresh output) and copy of 2^24 f32"},
    {"reduce", bench_reduce, "sum of 2^24 f32 and bf16; accumulation-width checks"},
    {"norm_softmax", bench_norm_softmax, "softmax and layer_norm fwd+bwd on [4096,1024] f32"},
    {"tiny_ops", bench_tiny_ops, "(a*b + c).sum() fwd+bwd on 16 elements"},
    {"mlp_train", bench_mlp_train, "784-512-512-10 MLP, B=128, Adam, ms/step"},
    {"gpt_train", bench_gpt_train, "char GPT d=128, 4 layers, T=64, B=16, AdamW, ms/step"},
    {"gpt_train_ckpt", bench_gpt_train_ckpt,
     "gpt_train plain vs every block fc_grad_checkpoint'ed: ms/step, peak bytes"},
    {"qmatvec", bench_qmatvec, "4096x4096 quantized weights times x, batch 1 and 16"},
    {"conv_train", bench_conv_train, "conv3x3 64->64 on [16,64,32,32] fwd+bwd, GFLOP/s"},
    {"attention", bench_attention,
     "causal attention B=1 H=8 T=1024 d=64 fwd+bwd: fused vs composite, ms, peak bytes"},
    {"llama_train", bench_llama_train,
     "Llama d=256, 4 layers, 8/2 heads (GQA), T=128, B=8, AdamW, ms/step"},
    {"llama_gen", bench_llama_gen,
     "batch-1 greedy decoding tokens/s, llama_train's model in q4_k and q8_0 [or FILE.gguf...]"},
    {"qlora_step", bench_qlora_step,
     "llama_train's model: QLoRA step over q4_k and q8_0 weights vs f32 full fine-tune, "
     "tokens/s, peak RSS"},
    {"tokenizer_added", bench_tokenizer_added,
     "encode 8,000 and 32,000 pairs of word + added token: ms, ratio over linear"},
};

int main(int argc, char **argv) {
    if (argc >= 2) {
        for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
            if (!strcmp(argv[1], cmds[i].name)) return cmds[i].run(argc - 2, argv + 2);
    }
    fprintf(stderr, "usage: fucina-bench WORKLOAD\n\nworkloads:\n");
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        fprintf(stderr, "  %-13s %s\n", cmds[i].name, cmds[i].what);
    fprintf(stderr, "\nenvironment: FUCINA_BENCH_MIN_S (seconds per repeat, default 2), "
                    "FUCINA_BENCH_THREADS (default 2), FUCINA_BACKEND\n");
    return argc >= 2 ? 2 : 0;
}
