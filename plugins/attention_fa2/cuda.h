/* attention_fa2's CUDA kernels (cuda_prefill.cu, cuda_decode.cu), behind C entry
 * points. Both read K and V through orin_kv_offset and their positions from
 * device memory; neither synchronizes or allocates. */
#ifndef ORIN_ATTENTION_FA2_CUDA_H
#define ORIN_ATTENTION_FA2_CUDA_H

#include "orin/ops.h"
#include "orin/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Prefill: tensor-core FlashAttention-2 for f16/bf16, CUDA cores for f32. */
int fa2_cuda_prefill(const orin_exec *ex, const orin_attention_args *a, orin_dtype dt);

/* Decode: split-KV (Flash-Decoding) and its combine kernel; graph-safe. */
int fa2_cuda_decode(const orin_exec *ex, const orin_attention_args *a, orin_dtype dt);
size_t fa2_cuda_decode_workspace_size(const orin_attention_args *a);

/* The calls these kernels run (head_dim 64 or 128); otherwise false with the
 * reason, and the registry binds another provider. */
bool fa2_cuda_supports(const void *args, char *why, size_t why_cap);

/* attention.full, f16 and bf16 on tensor cores: the prefill kernel without its
 * causal mask, each row over its segment (cu_seqlens read on the device only);
 * head_dim 64, 72 and 128, others declined by fa2_cuda_full_supports. */
int fa2_cuda_attention_full(const orin_exec *ex, const orin_attention_full_args *a,
                            orin_dtype dt);
bool fa2_cuda_full_supports(const void *args, char *why, size_t why_cap);

#ifdef __cplusplus
}
#endif
#endif
