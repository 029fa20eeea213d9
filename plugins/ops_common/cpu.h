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
/* layernorm, gelu and rope.table (cpu_vision.c). */
int cpu_layernorm(const orin_exec *ex, const orin_layernorm_args *a, orin_dtype dt);
int cpu_gelu(const orin_exec *ex, const orin_gelu_args *a, orin_dtype dt);
int cpu_rope_table(const orin_exec *ex, const orin_rope_table_args *a, orin_dtype dt);
int cpu_pos_interp(const orin_exec *ex, const orin_pos_interp_args *a, orin_dtype dt);
/* matmul.awq4 and matmul.int8 (cpu_quant.c). */
int cpu_matmul_awq4(const orin_exec *ex, const orin_matmul_quant_args *a, orin_dtype dt);
int cpu_matmul_int8(const orin_exec *ex, const orin_matmul_quant_args *a, orin_dtype dt);

/* The matmuls' tiling (cpu.c): tiles of CPU_MATMUL_W_ROWS outputs handed to
 * the op threads, CPU_MATMUL_X_ROWS rows of x at a time; OpenBLAS runs one
 * thread (told so by cpu_blas_single_thread before each product). */
#define CPU_MATMUL_X_ROWS 256
#define CPU_MATMUL_W_ROWS 64
void cpu_blas_single_thread(void);
/* Threads for a job of `tiles` tiles: runtime.threads, no more than tiles. */
int cpu_w_tile_workers(const orin_exec *ex, int64_t tiles);

/* The matmuls' pass over x a block of rows at a time: rows r0.. (at most
 * block_rows of the n) as f32 in *xt, x itself for f32, else converted into
 * buf (block_rows * in floats). Returns the block's row count. */
int cpu_x_block(const orin_tensor *x, orin_dtype dt, int64_t r0, int64_t n, int64_t in,
                int block_rows, float *buf, const float **xt);

/* Token i of x [n, heads, hd] rotated in place by cos_t/sin_t [hd / 2]
 * (rotate-half; each product rounded to f32 first, as transformers'
 * (x * cos) + (rotate_half(x) * sin)), through `row` (hd floats of scratch):
 * rope's and rope.table's arithmetic. */
void cpu_rope_token(const orin_tensor *x, orin_dtype dt, int64_t i, const float *cos_t,
                    const float *sin_t, float *row);

#endif
