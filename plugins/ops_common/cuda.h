/* ops_common's CUDA implementations (cuda.cu: everything but the matmul;
 * cuda_matmul.cu: the matmul through cuBLASLt), behind C entry points, for f32,
 * f16 and bf16 (`dt` is the dtype the implementation was registered for).
 *
 * All of them are graph-safe: they run on the exec's stream, never synchronize,
 * allocate or read device memory from the host, and size their launches from
 * shapes alone. Values only the GPU sees (ids, positions) are bounds-checked in
 * the kernels: an id outside the vocabulary gives a NaN row, a negative rope
 * position a NaN row, and kv_write skips a position outside the cache. */
#ifndef ORIN_OPS_COMMON_CUDA_H
#define ORIN_OPS_COMMON_CUDA_H

#include "orin/ops.h"
#include "orin/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

int cuda_embedding(const orin_exec *ex, const orin_embedding_args *a, orin_dtype dt);
int cuda_rmsnorm(const orin_exec *ex, const orin_rmsnorm_args *a, orin_dtype dt);
int cuda_rope(const orin_exec *ex, const orin_rope_args *a, orin_dtype dt);
int cuda_matmul(const orin_exec *ex, const orin_matmul_args *a, orin_dtype dt);
int cuda_swiglu(const orin_exec *ex, const orin_swiglu_args *a, orin_dtype dt);
int cuda_add(const orin_exec *ex, const orin_add_args *a, orin_dtype dt);
int cuda_argmax(const orin_exec *ex, const orin_argmax_args *a, orin_dtype dt);
int cuda_kv_write(const orin_exec *ex, const orin_kv_write_args *a, orin_dtype dt);

/* The matmul's cuBLASLt workspace (the same for every call). */
size_t cuda_matmul_workspace_size(const void *args);

#ifdef __cplusplus
}
#endif
#endif
