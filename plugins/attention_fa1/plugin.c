/* attention_fa1: FlashAttention-1 (provider "fa1"), prefill and decode, on the
 * CPU and (where built) CUDA, for f32, f16 and bf16. */
#include "cpu.h"
#include "cuda.h"

#include "orin/error.h"
#include "orin/plugin.h"

#define ENTRIES(dt, suffix)                                                         \
    static int prefill_##suffix(const orin_exec *ex, const void *args)              \
    {                                                                               \
        return fa1_cpu_attention(ex, args, dt, false);                              \
    }                                                                               \
    static int decode_##suffix(const orin_exec *ex, const void *args)               \
    {                                                                               \
        return fa1_cpu_attention(ex, args, dt, true);                               \
    }

ENTRIES(ORIN_F32, f32)
ENTRIES(ORIN_F16, f16)
ENTRIES(ORIN_BF16, bf16)

/* The CUDA kernel keeps O, m and l in a workspace of the same shape. */
static size_t workspace(const void *args)
{
    return fa1_workspace_size(args);
}

/* Decode reads its position from memory (positions[0]): graph-safe. */
#define IMPLS(dt, suffix)                                                           \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_PREFILL, .provider = "fa1",                         \
        .device = ORIN_DEVICE_CPU, .dtype = dt, .run = prefill_##suffix,            \
        .workspace_size = workspace,                                                \
    },                                                                              \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_DECODE, .provider = "fa1",                          \
        .device = ORIN_DEVICE_CPU, .dtype = dt, .run = decode_##suffix,             \
        .workspace_size = workspace, .flags = ORIN_OP_GRAPH_SAFE,                   \
    }

#ifdef ORIN_HAVE_CUDA
#define CUDA_ENTRIES(dt, suffix)                                                    \
    static int cuda_prefill_##suffix(const orin_exec *ex, const void *args)         \
    {                                                                               \
        if (!args)                                                                  \
            return orin_error_set("attention.prefill (fa1): no arguments");         \
        return fa1_cuda_attention(ex, args, dt, false);                             \
    }                                                                               \
    static int cuda_decode_##suffix(const orin_exec *ex, const void *args)          \
    {                                                                               \
        if (!args)                                                                  \
            return orin_error_set("attention.decode (fa1): no arguments");          \
        return fa1_cuda_attention(ex, args, dt, true);                              \
    }

CUDA_ENTRIES(ORIN_F32, f32)
CUDA_ENTRIES(ORIN_F16, f16)
CUDA_ENTRIES(ORIN_BF16, bf16)

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

static int register_ops(orin_registry *reg)
{
    return orin_registry_add_all(reg, impls, sizeof impls / sizeof impls[0]);
}

#ifdef ORIN_HAVE_CUDA
#define FA1_DEVICES "cpu, cuda"
#else
#define FA1_DEVICES "cpu"
#endif

ORIN_PLUGIN_DEFINE("attention_fa1", "0.1.0",
                   "FlashAttention-1: KV tiles outer, online softmax rescaled every tile "
                   "(" FA1_DEVICES ": f32, f16, bf16)",
                   register_ops)
