/* attention_mha's CUDA kernel (cuda.cu): the textbook algorithm, the reference
 * the flash kernels are tested against on the GPU. */
#ifndef ORIN_ATTENTION_MHA_CUDA_H
#define ORIN_ATTENTION_MHA_CUDA_H

#include "orin/ops.h"
#include "orin/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* decode: the call must have one token (attention.decode); `dt` is the dtype
 * the implementation was registered for. Never synchronizes or allocates; the
 * launch depends on n, H, head_dim and max_kv_len only (graph-safe). */
int mha_cuda_attention(const orin_exec *ex, const orin_attention_args *a, orin_dtype dt,
                       bool decode);

/* attention.full: no workspace; cu_seqlens stays in device memory, unread
 * by the host (a row its values do not frame comes out NaN). */
int mha_cuda_attention_full(const orin_exec *ex, const orin_attention_full_args *a,
                            orin_dtype dt);

/* Workspace (bytes): the scores, f32 [n, H, max_kv_len]. */
size_t mha_cuda_workspace_size(const orin_attention_args *a);

#ifdef __cplusplus
}
#endif
#endif
