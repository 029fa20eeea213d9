/* ops_common's fused CUDA ops (cuda_fused.cu) and the batch-1 GEMV behind the
 * matmul of one row. Same contract as cuda.h: graph-safe, checked, f32/f16/bf16. */
#ifndef ORIN_OPS_COMMON_CUDA_FUSED_H
#define ORIN_OPS_COMMON_CUDA_FUSED_H

#include "orin/ops.h"
#include "orin/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = x . w^T (+ bias) for one row of x, streaming w at the memory bandwidth;
 * cuda_matmul takes it when cuda_gemv_fits. */
bool cuda_gemv_fits(const orin_matmul_args *a);
int cuda_gemv(const orin_exec *ex, const orin_matmul_args *a, orin_dtype dt);

int cuda_add_rmsnorm(const orin_exec *ex, const orin_add_rmsnorm_args *a, orin_dtype dt);
int cuda_matmul_qkv(const orin_exec *ex, const orin_matmul_qkv_args *a, orin_dtype dt);
size_t cuda_matmul_qkv_workspace_size(const void *args);
int cuda_matmul_swiglu(const orin_exec *ex, const orin_matmul_swiglu_args *a, orin_dtype dt);
size_t cuda_matmul_swiglu_workspace_size(const void *args);
/* matmul.argmax: final norm + lm_head + the greedy pick, no logits written. */
int cuda_matmul_argmax(const orin_exec *ex, const orin_matmul_argmax_args *a, orin_dtype dt);
size_t cuda_matmul_argmax_workspace_size(const void *args);
/* The fused products' norm in front (orin_norm_in; matmul.qkv, matmul.swiglu
 * and their quantized forms): cuda_norm_in_folds when a GEMV kernel can
 * normalise the row itself (one row of whole aligned 16-byte vectors, the row
 * twice in 48 KB of shared memory: gemv_norm_row, cuda_gemv.cuh; the quantized
 * GEMV on tiles does); else cuda_norm_in_apart runs the add_rmsnorm kernel
 * first, the sum into x_out and the normalised rows into the workspace's first
 * cuda_norm_in_bytes, and points x there and rest at the workspace after it
 * (the float products always: bench/notes/decode.md). */
bool cuda_norm_in_folds(const orin_norm_in *norm, const orin_tensor *x);
size_t cuda_norm_in_bytes(const orin_norm_in *norm, const orin_tensor *x);
int cuda_norm_in_apart(const orin_exec *ex, const orin_norm_in *norm, orin_tensor *x,
                       orin_exec *rest, orin_dtype dt, const char *label);
int cuda_rope_kv_write(const orin_exec *ex, const orin_rope_kv_write_args *a, orin_dtype dt);
bool cuda_rope_kv_write_supports(const void *args, char *why, size_t cap);
/* matmul.gelu and matmul.add: cuBLASLt's epilogues (cuda_matmul.cu); their
 * workspace is the matmul's (cuda_matmul_workspace_size). */
int cuda_matmul_gelu(const orin_exec *ex, const orin_matmul_gelu_args *a, orin_dtype dt);
int cuda_matmul_add(const orin_exec *ex, const orin_matmul_args *a, orin_dtype dt);

#ifdef __cplusplus
}
#endif
#endif
