/* ops_common: the reference implementations of every op except attention, on
 * the CPU and (where built) CUDA, registered for f32, f16 and bf16 under the
 * provider "common". */
#include "cpu.h"
#include "cuda.h"
#include "cuda_fused.h"
#include "sample.h"

#include "orin/error.h"
#include "orin/plugin.h"

/* The registry hands `run` only the exec and the call struct, so each
 * (device, op, dtype) gets a tiny entry point that names its dtype:
 * cpu_rmsnorm_f16 calls cpu_rmsnorm(..., ORIN_F16). */
#define ENTRY(dev, op, args_type, dt, suffix)                                       \
    static int dev##_##op##_##suffix(const orin_exec *ex, const void *args)         \
    {                                                                               \
        if (!args)                                                                  \
            return orin_error_set(#op " (common): no arguments");                   \
        return dev##_##op(ex, (const args_type *)args, dt);                         \
    }
#define ENTRIES(dev, op, args_type)                                                 \
    ENTRY(dev, op, args_type, ORIN_F32, f32)                                        \
    ENTRY(dev, op, args_type, ORIN_F16, f16)                                        \
    ENTRY(dev, op, args_type, ORIN_BF16, bf16)
#define CPU_ENTRIES(op, args_type) ENTRIES(cpu, op, args_type)

CPU_ENTRIES(embedding, orin_embedding_args)
CPU_ENTRIES(rmsnorm, orin_rmsnorm_args)
CPU_ENTRIES(rope, orin_rope_args)
CPU_ENTRIES(matmul, orin_matmul_args)
CPU_ENTRIES(swiglu, orin_swiglu_args)
CPU_ENTRIES(add, orin_add_args)
CPU_ENTRIES(argmax, orin_argmax_args)
CPU_ENTRIES(kv_write, orin_kv_write_args)
CPU_ENTRIES(sample_candidates, orin_sample_candidates_args)
CPU_ENTRIES(matmul_awq4, orin_matmul_quant_args)
CPU_ENTRIES(matmul_int8, orin_matmul_quant_args)
CPU_ENTRIES(layernorm, orin_layernorm_args)
CPU_ENTRIES(gelu, orin_gelu_args)
CPU_ENTRIES(rope_table, orin_rope_table_args)
CPU_ENTRIES(pos_interp, orin_pos_interp_args)

/* Everything here only reads its inputs from memory, so all of it could be
 * replayed in a graph; on the CPU there is no graph, and the flag says so for
 * whoever asks. */
#define IMPL(name, fn, dt)                                                          \
    {                                                                               \
        .op = name, .provider = "common", .device = ORIN_DEVICE_CPU, .dtype = dt,   \
        .run = fn, .flags = ORIN_OP_REFERENCE | ORIN_OP_GRAPH_SAFE,                 \
    }
#define IMPLS(name, op)                                                             \
    IMPL(name, cpu_##op##_f32, ORIN_F32), IMPL(name, cpu_##op##_f16, ORIN_F16),     \
        IMPL(name, cpu_##op##_bf16, ORIN_BF16)

/* sample.candidates, on either device, declares a workspace (sample.h);
 * the CUDA one declines outputs longer than CUDA_SAMPLE_MAX_CANDIDATES. */
#define SAMPLE_IMPL(fn, dev, dt, ws, sup)                                           \
    {                                                                               \
        .op = ORIN_OP_SAMPLE_CANDIDATES, .provider = "common", .device = dev,       \
        .dtype = dt, .run = fn, .workspace_size = ws,                               \
        .flags = ORIN_OP_REFERENCE | ORIN_OP_GRAPH_SAFE, .supports = sup,           \
    }
#define SAMPLE_IMPLS(prefix, dev, ws, sup)                                          \
    SAMPLE_IMPL(prefix##sample_candidates_f32, dev, ORIN_F32, ws, sup),             \
        SAMPLE_IMPL(prefix##sample_candidates_f16, dev, ORIN_F16, ws, sup),         \
        SAMPLE_IMPL(prefix##sample_candidates_bf16, dev, ORIN_BF16, ws, sup)

#ifdef ORIN_HAVE_CUDA
#define CUDA_ENTRIES(op, args_type) ENTRIES(cuda, op, args_type)

CUDA_ENTRIES(embedding, orin_embedding_args)
CUDA_ENTRIES(rmsnorm, orin_rmsnorm_args)
CUDA_ENTRIES(rope, orin_rope_args)
CUDA_ENTRIES(matmul, orin_matmul_args)
CUDA_ENTRIES(swiglu, orin_swiglu_args)
CUDA_ENTRIES(add, orin_add_args)
CUDA_ENTRIES(argmax, orin_argmax_args)
CUDA_ENTRIES(kv_write, orin_kv_write_args)
CUDA_ENTRIES(sample_candidates, orin_sample_candidates_args)
CUDA_ENTRIES(matmul_awq4, orin_matmul_quant_args)
CUDA_ENTRIES(matmul_int8, orin_matmul_quant_args)
CUDA_ENTRIES(layernorm, orin_layernorm_args)
CUDA_ENTRIES(gelu, orin_gelu_args)
CUDA_ENTRIES(rope_table, orin_rope_table_args)
CUDA_ENTRIES(pos_interp, orin_pos_interp_args)

/* Graph-safe for real here: launches sized from shapes only, ids and positions
 * read (and bounds-checked) on the GPU, no sync, no allocation. The matmul
 * declares cuBLASLt's workspace. */
#define CUDA_IMPL(name, fn, dt, ws)                                                 \
    {                                                                               \
        .op = name, .provider = "common", .device = ORIN_DEVICE_CUDA, .dtype = dt,  \
        .run = fn, .workspace_size = ws,                                            \
        .flags = ORIN_OP_REFERENCE | ORIN_OP_GRAPH_SAFE,                            \
    }
#define CUDA_IMPLS_WS(name, op, ws)                                                 \
    CUDA_IMPL(name, cuda_##op##_f32, ORIN_F32, ws),                                 \
        CUDA_IMPL(name, cuda_##op##_f16, ORIN_F16, ws),                             \
        CUDA_IMPL(name, cuda_##op##_bf16, ORIN_BF16, ws)
#define CUDA_IMPLS(name, op) CUDA_IMPLS_WS(name, op, NULL)

/* The quantized matmuls: a prepare puts f16/bf16 weights into their tiles. */
#define QUANT_IMPL(name, fn, dt, suffix)                                            \
    {                                                                               \
        .op = name, .provider = "common", .device = ORIN_DEVICE_CUDA, .dtype = dt,  \
        .run = cuda_##fn##_##suffix, .workspace_size = cuda_matmul_quant_workspace_size, \
        .flags = ORIN_OP_REFERENCE | ORIN_OP_GRAPH_SAFE, .prepare = cuda_##fn##_prepare, \
    }
#define QUANT_IMPLS(name, fn)                                                       \
    QUANT_IMPL(name, fn, ORIN_F32, f32), QUANT_IMPL(name, fn, ORIN_F16, f16),       \
        QUANT_IMPL(name, fn, ORIN_BF16, bf16)

/* The fused ops (cuda_fused.cu): CUDA only; a model without them runs the
 * sequence of plain ops each one stands for. */
CUDA_ENTRIES(add_rmsnorm, orin_add_rmsnorm_args)
CUDA_ENTRIES(matmul_qkv, orin_matmul_qkv_args)
CUDA_ENTRIES(matmul_swiglu, orin_matmul_swiglu_args)
CUDA_ENTRIES(rope_kv_write, orin_rope_kv_write_args)
CUDA_ENTRIES(matmul_gelu, orin_matmul_gelu_args)
CUDA_ENTRIES(matmul_add, orin_matmul_args)
CUDA_ENTRIES(matmul_argmax, orin_matmul_argmax_args)
CUDA_ENTRIES(matmul_qkv_awq4, orin_matmul_qkv_quant_args)
CUDA_ENTRIES(matmul_qkv_int8, orin_matmul_qkv_quant_args)
CUDA_ENTRIES(matmul_swiglu_awq4, orin_matmul_swiglu_quant_args)
CUDA_ENTRIES(matmul_swiglu_int8, orin_matmul_swiglu_quant_args)

#define FUSED_IMPL(name, fn, dt, ws, sup)                                           \
    {                                                                               \
        .op = name, .provider = "common", .device = ORIN_DEVICE_CUDA, .dtype = dt,  \
        .run = fn, .workspace_size = ws, .flags = ORIN_OP_GRAPH_SAFE,               \
        .supports = sup,                                                            \
    }
#define FUSED_IMPLS(name, op, ws, sup)                                              \
    FUSED_IMPL(name, cuda_##op##_f32, ORIN_F32, ws, sup),                           \
        FUSED_IMPL(name, cuda_##op##_f16, ORIN_F16, ws, sup),                       \
        FUSED_IMPL(name, cuda_##op##_bf16, ORIN_BF16, ws, sup)
#endif

static const orin_op_impl impls[] = {
    IMPLS(ORIN_OP_EMBEDDING, embedding),
    IMPLS(ORIN_OP_RMSNORM, rmsnorm),
    IMPLS(ORIN_OP_ROPE, rope),
    IMPLS(ORIN_OP_MATMUL, matmul),
    IMPLS(ORIN_OP_SWIGLU, swiglu),
    IMPLS(ORIN_OP_ADD, add),
    IMPLS(ORIN_OP_ARGMAX, argmax),
    IMPLS(ORIN_OP_KV_WRITE, kv_write),
    SAMPLE_IMPLS(cpu_, ORIN_DEVICE_CPU, cpu_sample_candidates_workspace_size, NULL),
    IMPLS(ORIN_OP_MATMUL_AWQ4, matmul_awq4),
    IMPLS(ORIN_OP_MATMUL_INT8, matmul_int8),
    /* the vision encoders' ops */
    IMPLS(ORIN_OP_LAYERNORM, layernorm),
    IMPLS(ORIN_OP_GELU, gelu),
    IMPLS(ORIN_OP_ROPE_TABLE, rope_table),
    IMPLS(ORIN_OP_POS_INTERP, pos_interp),
#ifdef ORIN_HAVE_CUDA
    CUDA_IMPLS(ORIN_OP_EMBEDDING, embedding),
    CUDA_IMPLS(ORIN_OP_RMSNORM, rmsnorm),
    CUDA_IMPLS(ORIN_OP_ROPE, rope),
    CUDA_IMPLS_WS(ORIN_OP_MATMUL, matmul, cuda_matmul_workspace_size),
    CUDA_IMPLS(ORIN_OP_SWIGLU, swiglu),
    CUDA_IMPLS(ORIN_OP_ADD, add),
    CUDA_IMPLS(ORIN_OP_ARGMAX, argmax),
    CUDA_IMPLS(ORIN_OP_KV_WRITE, kv_write),
    QUANT_IMPLS(ORIN_OP_MATMUL_AWQ4, matmul_awq4),
    QUANT_IMPLS(ORIN_OP_MATMUL_INT8, matmul_int8),
    CUDA_IMPLS(ORIN_OP_LAYERNORM, layernorm),
    CUDA_IMPLS(ORIN_OP_GELU, gelu),
    CUDA_IMPLS(ORIN_OP_ROPE_TABLE, rope_table),
    CUDA_IMPLS(ORIN_OP_POS_INTERP, pos_interp),
    SAMPLE_IMPLS(cuda_, ORIN_DEVICE_CUDA, cuda_sample_candidates_workspace_size,
                 cuda_sample_candidates_supports),
    FUSED_IMPLS(ORIN_OP_ADD_RMSNORM, add_rmsnorm, NULL, NULL),
    FUSED_IMPLS(ORIN_OP_MATMUL_QKV, matmul_qkv, cuda_matmul_qkv_workspace_size, NULL),
    FUSED_IMPLS(ORIN_OP_MATMUL_SWIGLU, matmul_swiglu, cuda_matmul_swiglu_workspace_size, NULL),
    FUSED_IMPLS(ORIN_OP_ROPE_KV_WRITE, rope_kv_write, NULL, cuda_rope_kv_write_supports),
    FUSED_IMPLS(ORIN_OP_MATMUL_GELU, matmul_gelu, cuda_matmul_workspace_size, NULL),
    FUSED_IMPLS(ORIN_OP_MATMUL_ADD, matmul_add, cuda_matmul_workspace_size, NULL),
    FUSED_IMPLS(ORIN_OP_MATMUL_ARGMAX, matmul_argmax, cuda_matmul_argmax_workspace_size, NULL),
    /* over the weights matmul.awq4 / .int8 of this plugin prepared */
    FUSED_IMPLS(ORIN_OP_MATMUL_QKV_AWQ4, matmul_qkv_awq4, cuda_matmul_qkv_quant_workspace_size,
                NULL),
    FUSED_IMPLS(ORIN_OP_MATMUL_QKV_INT8, matmul_qkv_int8, cuda_matmul_qkv_quant_workspace_size,
                NULL),
    FUSED_IMPLS(ORIN_OP_MATMUL_SWIGLU_AWQ4, matmul_swiglu_awq4,
                cuda_matmul_swiglu_quant_workspace_size, NULL),
    FUSED_IMPLS(ORIN_OP_MATMUL_SWIGLU_INT8, matmul_swiglu_int8,
                cuda_matmul_swiglu_quant_workspace_size, NULL),
#endif
};

ORIN_PLUGIN_DEFINE_TABLE("ops_common", "0.1.0",
                         "reference ops: embedding, rmsnorm, rope, matmul (OpenBLAS; cuBLASLt "
                         "and a batch-1 GEMV on cuda), matmul.awq4 and matmul.int8, swiglu, "
                         "add, argmax, kv_write, layernorm, gelu, rope.table, pos_interp; fused "
                         "on cuda: add_rmsnorm, matmul.qkv, matmul.swiglu, rope_kv_write, "
                         "matmul.gelu, matmul.add, matmul.argmax; f32, f16, bf16",
                         impls)
