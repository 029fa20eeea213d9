/* attention_fa2: FlashAttention-2 (provider "fa2"): prefill, and split-KV decode,
 * on the CPU and (where built) CUDA, for f32, f16 and bf16. */
#include "cpu.h"
#include "cuda.h"

#include "orin/plugin.h"

/* The registry hands `run` only the exec and the call struct, so each
 * (device, dtype) gets an entry point that names its dtype: dev_prefill_f32
 * calls fa2_dev_prefill(..., ORIN_F32), dev cpu or cuda. The functions check
 * their arguments, a NULL call struct too. */
#define ENTRIES(dev, dt, suffix)                                                    \
    static int dev##_prefill_##suffix(const orin_exec *ex, const void *args)        \
    {                                                                               \
        return fa2_##dev##_prefill(ex, args, dt);                                   \
    }                                                                               \
    static int dev##_decode_##suffix(const orin_exec *ex, const void *args)         \
    {                                                                               \
        return fa2_##dev##_decode(ex, args, dt);                                    \
    }

ENTRIES(cpu, ORIN_F32, f32)
ENTRIES(cpu, ORIN_F16, f16)
ENTRIES(cpu, ORIN_BF16, bf16)

static size_t decode_workspace(const void *args)
{
    return fa2_decode_workspace_size(args);
}

/* Decode reads its position from memory and sizes its split grid from
 * max_kv_len only: graph-safe. */
#define IMPLS(dt, suffix)                                                           \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_PREFILL, .provider = "fa2",                         \
        .device = ORIN_DEVICE_CPU, .dtype = dt, .run = cpu_prefill_##suffix,        \
    },                                                                              \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_DECODE, .provider = "fa2",                          \
        .device = ORIN_DEVICE_CPU, .dtype = dt, .run = cpu_decode_##suffix,         \
        .workspace_size = decode_workspace, .flags = ORIN_OP_GRAPH_SAFE,            \
    }

#ifdef ORIN_HAVE_CUDA
ENTRIES(cuda, ORIN_F32, f32)
ENTRIES(cuda, ORIN_F16, f16)
ENTRIES(cuda, ORIN_BF16, bf16)

static int cuda_full_f16(const orin_exec *ex, const void *args)
{
    return fa2_cuda_attention_full(ex, args, ORIN_F16);
}

static int cuda_full_bf16(const orin_exec *ex, const void *args)
{
    return fa2_cuda_attention_full(ex, args, ORIN_BF16);
}

static size_t cuda_decode_workspace(const void *args)
{
    return fa2_cuda_decode_workspace_size(args);
}

/* The decode grid follows max_kv_len and the SM count, never the position:
 * graph-safe. head_dim other than 64 and 128 is declined (supports). */
#define CUDA_IMPLS(dt, suffix)                                                      \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_PREFILL, .provider = "fa2",                         \
        .device = ORIN_DEVICE_CUDA, .dtype = dt, .run = cuda_prefill_##suffix,      \
        .supports = fa2_cuda_supports,                                              \
    },                                                                              \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_DECODE, .provider = "fa2",                          \
        .device = ORIN_DEVICE_CUDA, .dtype = dt, .run = cuda_decode_##suffix,       \
        .workspace_size = cuda_decode_workspace, .flags = ORIN_OP_GRAPH_SAFE,       \
        .supports = fa2_cuda_supports,                                              \
    }
#endif

static const orin_op_impl impls[] = {
    IMPLS(ORIN_F32, f32),
    IMPLS(ORIN_F16, f16),
    IMPLS(ORIN_BF16, bf16),
#ifdef ORIN_HAVE_CUDA
    CUDA_IMPLS(ORIN_F32, f32),
    CUDA_IMPLS(ORIN_F16, f16),
    CUDA_IMPLS(ORIN_BF16, bf16),
    /* attention.full (vision encoders): tensor cores only, so f16 and bf16;
     * f32 and the CPU bind mha's. */
    {
        .op = ORIN_OP_ATTENTION_FULL, .provider = "fa2", .device = ORIN_DEVICE_CUDA,
        .dtype = ORIN_F16, .run = cuda_full_f16, .supports = fa2_cuda_full_supports,
    },
    {
        .op = ORIN_OP_ATTENTION_FULL, .provider = "fa2", .device = ORIN_DEVICE_CUDA,
        .dtype = ORIN_BF16, .run = cuda_full_bf16, .supports = fa2_cuda_full_supports,
    },
#endif
};

ORIN_PLUGIN_DEFINE_TABLE("attention_fa2", "0.1.0",
                         "FlashAttention-2: Q tiles outer, one normalisation at the end, "
                         "causal tiles skipped; split-KV decode (" ORIN_PLUGIN_DEVICES
                         ": f32, f16, bf16); attention.full (cuda: f16, bf16)",
                         impls)
