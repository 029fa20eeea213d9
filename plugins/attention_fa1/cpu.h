/* attention_fa1's CPU kernel: FlashAttention-1, tile for tile. */
#ifndef ORIN_ATTENTION_FA1_CPU_H
#define ORIN_ATTENTION_FA1_CPU_H

#include "orin/ops.h"
#include "orin/registry.h"

/* The tiles the CUDA kernel uses too: FA1_BLOCK_Q query rows by FA1_BLOCK_KV
 * cache positions per step (64 x 64: S, and K and V tiles of 64 x head_dim up to
 * 128 in f16, fit the shared memory of one block with room for double buffering). */
#define FA1_BLOCK_Q 64
#define FA1_BLOCK_KV 64

/* Workspace (bytes) for a call: FA1 keeps the output O, its running row max m and
 * running row sum l in memory between KV tiles (f32, n * H * (head_dim + 2)). */
size_t fa1_workspace_size(const orin_attention_args *a);

int fa1_cpu_attention(const orin_exec *ex, const orin_attention_args *a, orin_dtype dt,
                      bool decode);

#endif
