/* SPDX-License-Identifier: MIT */
/* fucina.h - the one public header of fucina, a tensor and autograd library
 * in C11. Include only this; it pulls in the area headers under fucina/.
 *
 *   fucina/status.h   status codes, fc_strerror, fc_status_name
 *   fucina/dtype.h    dtypes, predicates, dtype policy, scalar conversions
 *   fucina/alloc.h    the allocator contract
 *   fucina/cpu.h      the CPU and the SIMD level in use (FUCINA_ISA)
 *   fucina/tensor.h   context, tensors, creation, data access, scopes
 *   fucina/ops.h      the forward op library (swiglu among the activations)
 *   fucina/matmul.h   matmul and linear through OpenBLAS, oneDNN or the reference
 *   fucina/conv.h     1-d and 2-d convolutions and the 2-d transposed one
 *   fucina/pool.h     2-d max, average and adaptive average pooling
 *   fucina/attention.h rope and fused (flash) attention with grouped-query heads
 *   fucina/autograd.h gradients, backward, grad mode, gradcheck
 *   fucina/optim.h    optimizers, gradient clipping, learning-rate schedules
 *   fucina/checkpoint.h resumable training checkpoints
 *   fucina/quant.h    ggml block formats, blockwise int8/int4/NF4, double quant
 *   fucina/io.h       model files: safetensors and GGUF, read (mmap) and written
 *   fucina/dist.h     data-parallel training on MPI (FC_ERR_BACKEND without it)
 */
#ifndef FUCINA_H
#define FUCINA_H

#include "fucina/alloc.h"
#include "fucina/attention.h"
#include "fucina/autograd.h"
#include "fucina/backend.h"
#include "fucina/checkpoint.h"
#include "fucina/conv.h"
#include "fucina/cpu.h"
#include "fucina/dist.h"
#include "fucina/dtype.h"
#include "fucina/io.h"
#include "fucina/matmul.h"
#include "fucina/ops.h"
#include "fucina/optim.h"
#include "fucina/pool.h"
#include "fucina/profile.h"
#include "fucina/quant.h"
#include "fucina/status.h"
#include "fucina/tensor.h"
#include "fucina/version.h"

#endif /* FUCINA_H */
