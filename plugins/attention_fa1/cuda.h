/* attention_fa1's CUDA kernel (cuda.cu): FlashAttention-1 (Dao et al. 2022,
 * Algorithm 1), KV tiles outer, Q tiles inner, O, m and l kept in the f32
 * workspace between KV tiles. Reads K and V through orin_kv_offset and its
 * positions from device memory; never synchronizes or allocates. */
#ifndef ORIN_ATTENTION_FA1_CUDA_H
#define ORIN_ATTENTION_FA1_CUDA_H

#include "orin/ops.h"
#include "orin/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* decode: the call must have one token (attention.decode); `dt` is the dtype
 * the implementation was registered for. The workspace is fa1_workspace_size's
 * (cpu.h), 16-byte aligned. Decode launches one block per kv head whatever the
 * position: graph-safe. */
int fa1_cuda_attention(const orin_exec *ex, const orin_attention_args *a, orin_dtype dt,
                       bool decode);

/* The calls the kernel runs: head_dim 64 or 128. Otherwise false with the
 * reason, and the registry binds another provider (mha). */
bool fa1_cuda_supports(const void *args, char *why, size_t why_cap);

#ifdef __cplusplus
}
#endif
#endif
