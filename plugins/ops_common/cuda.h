/* ops_common's CUDA implementations (cuda.cu: everything but the matmuls and
 * the vision ops; cuda_matmul.cu: the matmul through cuBLASLt; cuda_quant.cu:
 * the matmuls over quantized weights, their one-row GEMV in
 * cuda_qmma_gemv.cuh; cuda_vision.cu: layernorm, gelu and
 * rope.table), behind C entry points, for f32,
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
/* The SwiGLU of a stacked gate/up product: out [n, f] from wide [n, 2f] (gate
 * columns, then up's); matmul.swiglu's prefill over stacked weights. */
int cuda_swiglu_rows(const orin_exec *ex, const void *wide, void *out, int64_t n, int64_t f,
                     orin_dtype dt);
int cuda_add(const orin_exec *ex, const orin_add_args *a, orin_dtype dt);
int cuda_argmax(const orin_exec *ex, const orin_argmax_args *a, orin_dtype dt);
int cuda_kv_write(const orin_exec *ex, const orin_kv_write_args *a, orin_dtype dt);
/* The vision encoders' ops (cuda_vision.cu). */
int cuda_layernorm(const orin_exec *ex, const orin_layernorm_args *a, orin_dtype dt);
int cuda_gelu(const orin_exec *ex, const orin_gelu_args *a, orin_dtype dt);
int cuda_rope_table(const orin_exec *ex, const orin_rope_table_args *a, orin_dtype dt);
int cuda_pos_interp(const orin_exec *ex, const orin_pos_interp_args *a, orin_dtype dt);

/* The matmul's cuBLASLt workspace (the same for every call). */
size_t cuda_matmul_workspace_size(const void *args);

/* The part of a workspace cuBLASLt gets: 256-byte aligned, at most
 * cuda_matmul_workspace_size's bytes; *ws NULL (0 returned) when too small. */
size_t cuda_matmul_usable_workspace(void *workspace, size_t size, void **ws);

/* y [n, out] (row stride ldy) = x [n, in] . w^T (+ bias [out]) through
 * cuBLASLt, f32 accumulation (cuda_matmul.cu). w is [out][in] row-major with
 * row stride ldw, or, w_kmajor, [in][out] row-major with row stride ldw (the
 * layout a dequantized AWQ slice comes in). No argument checks: the caller's
 * op has made them. */
typedef struct cuda_gemm {
    int64_t n, in, out;
    const void *x, *w, *bias;
    void *y;
    bool w_kmajor;
    int64_t ldw, ldy;
    bool accumulate;  /* y += x . w^T + bias: y's contents are added (beta 1) */
    bool gelu_tanh;   /* y = gelu_tanh(x . w^T + bias), in cuBLASLt's epilogue where it
                         has one, else a pass over y after (needs ldy == out) */
} cuda_gemm;
int cuda_lt_gemm(const orin_exec *ex, const char *label, orin_dtype dt, const cuda_gemm *g,
                 void *ws, size_t ws_bytes);

/* matmul.awq4 and matmul.int8 (cuda_quant.cu). */
int cuda_matmul_awq4(const orin_exec *ex, const orin_matmul_quant_args *a, orin_dtype dt);
int cuda_matmul_int8(const orin_exec *ex, const orin_matmul_quant_args *a, orin_dtype dt);
size_t cuda_matmul_quant_workspace_size(const void *args);
/* Their prepare (orin_op_impl.prepare): f16/bf16 weights into mma tiles. */
int cuda_matmul_awq4_prepare(const orin_exec *ex, void *args);
int cuda_matmul_int8_prepare(const orin_exec *ex, void *args);
/* matmul.qkv.* and matmul.swiglu.* over the same weights: one GEMV launch where
 * the weights are in tiles and x is one row, else the sequence they stand for. */
int cuda_matmul_qkv_awq4(const orin_exec *ex, const orin_matmul_qkv_quant_args *a, orin_dtype dt);
int cuda_matmul_qkv_int8(const orin_exec *ex, const orin_matmul_qkv_quant_args *a, orin_dtype dt);
int cuda_matmul_swiglu_awq4(const orin_exec *ex, const orin_matmul_swiglu_quant_args *a,
                            orin_dtype dt);
int cuda_matmul_swiglu_int8(const orin_exec *ex, const orin_matmul_swiglu_quant_args *a,
                            orin_dtype dt);
size_t cuda_matmul_qkv_quant_workspace_size(const void *args);
size_t cuda_matmul_swiglu_quant_workspace_size(const void *args);

#ifdef __cplusplus
}
#endif
#endif
