/* attention_fa1: FlashAttention-1 (provider "fa1"), prefill and decode, on the
 * CPU and (where built) CUDA, for f32, f16 and bf16. */
#include "cpu.h"
#include "cuda.h"

#include "orin/plugin.h"

/* The registry hands `run` only the exec and the call struct, so each
 * (device, dtype) gets an entry point that names its dtype: dev_prefill_f32
 * calls fa1_dev_attention(..., ORIN_F32, false), dev cpu or cuda. The
 * functions check their arguments, a NULL call struct too. */
#define ENTRIES(dev, dt, suffix)                                                    \
    static int dev##_prefill_##suffix(const orin_exec *ex, const void *args)        \
    {                                                                               \
        return fa1_##dev##_attention(ex, args, dt, false);                          \
    }                                                                               \
    static int dev##_decode_##suffix(const orin_exec *ex, const void *args)         \
    {                                                                               \
        return fa1_##dev##_attention(ex, args, dt, true);                           \
    }

ENTRIES(cpu, ORIN_F32, f32)
ENTRIES(cpu, ORIN_F16, f16)
ENTRIES(cpu, ORIN_BF16, bf16)

/* The CUDA kernel keeps O, m and l in a workspace of the same shape. */
static size_t workspace(const void *args)
{
    return fa1_workspace_size(args);
}

/* Decode reads its position from memory (positions[0]): graph-safe. */
#define IMPLS(dt, suffix)                                                           \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_PREFILL, .provider = "fa1",                         \
        .device = ORIN_DEVICE_CPU, .dtype = dt, .run = cpu_prefill_##suffix,        \
        .workspace_size = workspace,                                                \
    },                                                                              \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_DECODE, .provider = "fa1",                          \
        .device = ORIN_DEVICE_CPU, .dtype = dt, .run = cpu_decode_##suffix,         \
        .workspace_size = workspace, .flags = ORIN_OP_GRAPH_SAFE,                   \
    }

#ifdef ORIN_HAVE_CUDA
ENTRIES(cuda, ORIN_F32, f32)
ENTRIES(cuda, ORIN_F16, f16)
ENTRIES(cuda, ORIN_BF16, bf16)

/* Decode launches one block per kv head, whatever the position: graph-safe.
 * head_dim other than 64 and 128 is declined (supports): mha takes it. */
#define CUDA_IMPLS(dt, suffix)                                                      \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_PREFILL, .provider = "fa1",                         \
        .device = ORIN_DEVICE_CUDA, .dtype = dt, .run = cuda_prefill_##suffix,      \
        .workspace_size = workspace, .supports = fa1_cuda_supports,                 \
    },                                                                              \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_DECODE, .provider = "fa1",                          \
        .device = ORIN_DEVICE_CUDA, .dtype = dt, .run = cuda_decode_##suffix,       \
        .workspace_size = workspace, .flags = ORIN_OP_GRAPH_SAFE,                   \
        .supports = fa1_cuda_supports,                                              \
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
#endif
};

ORIN_PLUGIN_DEFINE_TABLE("attention_fa1", "0.1.0",
                         "FlashAttention-1: KV tiles outer, online softmax rescaled every tile "
                         "(" ORIN_PLUGIN_DEVICES ": f32, f16, bf16)",
                         impls)
