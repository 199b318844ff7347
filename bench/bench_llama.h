/* SPDX-License-Identifier: MIT */
/* bench_llama.h - the llama_train model (bench_llama.c), shared with the
 * workloads that train it another way (bench_qlora.c). */
#ifndef FUCINA_BENCH_LLAMA_H
#define FUCINA_BENCH_LLAMA_H

#include "fucina.h"
#include "fucina/llama.h"

enum { BENCH_LLAMA_B = 8, BENCH_LLAMA_T = 128, BENCH_LLAMA_PARAMS = 2902272 };

/* vocab 256, dim 256, 4 layers, 8/2 heads, ff 688, context 128 */
extern const fc_llama_config bench_llama_train_config;
/* the peer's AdamW: lr 3e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 */
extern const fc_optim_opts bench_llama_train_adamw;

/* The peer's fixed batch: inputs (B,T) i64 and targets (B*T) i64, new
 * references (the error in ctx on failure). */
fc_status bench_llama_train_batch(fc_ctx *ctx, fc_tensor **x, fc_tensor **y);
/* FUCINA_BENCH_THREADS, default 2 */
int bench_llama_threads(void);

#endif
