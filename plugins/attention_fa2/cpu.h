/* attention_fa2's CPU kernels: FlashAttention-2 prefill and split-KV decode. */
#ifndef ORIN_ATTENTION_FA2_CPU_H
#define ORIN_ATTENTION_FA2_CPU_H

#include "orin/ops.h"
#include "orin/registry.h"

/* One block per FA2_BLOCK_Q query rows x head, stepping over the cache
 * FA2_BLOCK_KV positions at a time: the CUDA prefill's default tile on Hopper
 * too (4 warps of 32 rows); its other tile configs are in cuda_prefill_mma.cuh. */
#define FA2_BLOCK_Q 128
#define FA2_BLOCK_KV 64

/* Decode (Flash-Decoding): the cache is cut into splits of FA2_SPLIT_KV positions,
 * each giving a partial output and its log-sum-exp, merged by a combine step. The
 * split count follows max_kv_len (a host-side bound), so a graph replayed at any
 * position launches the same grid; splits past the position are empty. */
#define FA2_SPLIT_KV 256

/* Decode workspace (bytes): the partial outputs and log-sum-exps of every split
 * max_kv_len allows, f32 [splits, H, head_dim + 1]. */
size_t fa2_decode_workspace_size(const orin_attention_args *a);

int fa2_cpu_prefill(const orin_exec *ex, const orin_attention_args *a, orin_dtype dt);
int fa2_cpu_decode(const orin_exec *ex, const orin_attention_args *a, orin_dtype dt);

#endif
