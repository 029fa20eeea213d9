/* ops_common's CPU kernels, one per op, for f32, f16 and bf16 (`dt` is the
 * dtype the implementation was registered for; float math is f32 inside). */
#ifndef ORIN_OPS_COMMON_CPU_H
#define ORIN_OPS_COMMON_CPU_H

#include "orin/ops.h"
#include "orin/registry.h"

int cpu_embedding(const orin_exec *ex, const orin_embedding_args *a, orin_dtype dt);
int cpu_rmsnorm(const orin_exec *ex, const orin_rmsnorm_args *a, orin_dtype dt);
int cpu_rope(const orin_exec *ex, const orin_rope_args *a, orin_dtype dt);
int cpu_matmul(const orin_exec *ex, const orin_matmul_args *a, orin_dtype dt);
int cpu_swiglu(const orin_exec *ex, const orin_swiglu_args *a, orin_dtype dt);
int cpu_add(const orin_exec *ex, const orin_add_args *a, orin_dtype dt);
int cpu_argmax(const orin_exec *ex, const orin_argmax_args *a, orin_dtype dt);
int cpu_kv_write(const orin_exec *ex, const orin_kv_write_args *a, orin_dtype dt);

#endif
