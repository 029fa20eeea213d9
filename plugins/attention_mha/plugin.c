/* attention_mha: the reference attention (provider "mha"), prefill and decode,
 * on the CPU and (where built) CUDA, for f32, f16 and bf16. */
#include "cpu.h"
#include "cuda.h"

#include "orin/plugin.h"

/* The registry hands `run` only the exec and the call struct, so each
 * (device, dtype) gets an entry point that names its dtype: dev_prefill_f32
 * calls mha_dev_attention(..., ORIN_F32, false), dev cpu or cuda. The
 * functions check their arguments, a NULL call struct too. */
#define ENTRIES(dev, dt, suffix)                                                    \
    static int dev##_prefill_##suffix(const orin_exec *ex, const void *args)        \
    {                                                                               \
        return mha_##dev##_attention(ex, args, dt, false);                          \
    }                                                                               \
    static int dev##_decode_##suffix(const orin_exec *ex, const void *args)         \
    {                                                                               \
        return mha_##dev##_attention(ex, args, dt, true);                           \
    }                                                                               \
    static int dev##_full_##suffix(const orin_exec *ex, const void *args)           \
    {                                                                               \
        return mha_##dev##_attention_full(ex, args, dt);                            \
    }

ENTRIES(cpu, ORIN_F32, f32)
ENTRIES(cpu, ORIN_F16, f16)
ENTRIES(cpu, ORIN_BF16, bf16)

/* Decode reads its position from memory (positions[0]) and sizes nothing from
 * it on the host beyond max_kv_len, so it is graph-safe. */
#define IMPLS(dt, suffix)                                                           \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_PREFILL, .provider = "mha",                         \
        .device = ORIN_DEVICE_CPU, .dtype = dt, .run = cpu_prefill_##suffix,        \
        .flags = ORIN_OP_REFERENCE,                                                 \
    },                                                                              \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_DECODE, .provider = "mha",                          \
        .device = ORIN_DEVICE_CPU, .dtype = dt, .run = cpu_decode_##suffix,         \
        .flags = ORIN_OP_REFERENCE | ORIN_OP_GRAPH_SAFE,                            \
    },                                                                              \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_FULL, .provider = "mha",                            \
        .device = ORIN_DEVICE_CPU, .dtype = dt, .run = cpu_full_##suffix,           \
        .flags = ORIN_OP_REFERENCE,                                                 \
    }

#ifdef ORIN_HAVE_CUDA
ENTRIES(cuda, ORIN_F32, f32)
ENTRIES(cuda, ORIN_F16, f16)
ENTRIES(cuda, ORIN_BF16, bf16)

static size_t cuda_workspace(const void *args)
{
    return mha_cuda_workspace_size(args);
}

/* The grid is (n, H), the workspace [n, H, max_kv_len]: nothing follows the
 * position, so decode is graph-safe. Every head_dim runs. attention.full
 * needs no workspace (and reads cu_seqlens on the device only). */
#define CUDA_IMPLS(dt, suffix)                                                      \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_PREFILL, .provider = "mha",                         \
        .device = ORIN_DEVICE_CUDA, .dtype = dt, .run = cuda_prefill_##suffix,      \
        .workspace_size = cuda_workspace, .flags = ORIN_OP_REFERENCE,               \
    },                                                                              \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_DECODE, .provider = "mha",                          \
        .device = ORIN_DEVICE_CUDA, .dtype = dt, .run = cuda_decode_##suffix,       \
        .workspace_size = cuda_workspace,                                           \
        .flags = ORIN_OP_REFERENCE | ORIN_OP_GRAPH_SAFE,                            \
    },                                                                              \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_FULL, .provider = "mha",                            \
        .device = ORIN_DEVICE_CUDA, .dtype = dt, .run = cuda_full_##suffix,         \
        .flags = ORIN_OP_REFERENCE,                                                 \
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

ORIN_PLUGIN_DEFINE_TABLE("attention_mha", "0.1.0",
                         "reference attention: scores materialised, softmax, P.V ("
                         ORIN_PLUGIN_DEVICES ": f32, f16, bf16), attention.full too",
                         impls)
