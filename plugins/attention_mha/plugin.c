/* attention_mha: the reference attention (provider "mha"), prefill and decode,
 * on the CPU and (where built) CUDA, for f32, f16 and bf16. */
#include "cpu.h"
#include "cuda.h"

#include "orin/error.h"
#include "orin/plugin.h"

#define ENTRIES(dt, suffix)                                                         \
    static int prefill_##suffix(const orin_exec *ex, const void *args)              \
    {                                                                               \
        return mha_cpu_attention(ex, args, dt, false);                              \
    }                                                                               \
    static int decode_##suffix(const orin_exec *ex, const void *args)               \
    {                                                                               \
        return mha_cpu_attention(ex, args, dt, true);                               \
    }                                                                               \
    static int full_##suffix(const orin_exec *ex, const void *args)                 \
    {                                                                               \
        return mha_cpu_attention_full(ex, args, dt);                                \
    }

ENTRIES(ORIN_F32, f32)
ENTRIES(ORIN_F16, f16)
ENTRIES(ORIN_BF16, bf16)

/* Decode reads its position from memory (positions[0]) and sizes nothing from
 * it on the host beyond max_kv_len, so it is graph-safe. */
#define IMPLS(dt, suffix)                                                           \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_PREFILL, .provider = "mha",                         \
        .device = ORIN_DEVICE_CPU, .dtype = dt, .run = prefill_##suffix,            \
        .flags = ORIN_OP_REFERENCE,                                                 \
    },                                                                              \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_DECODE, .provider = "mha",                          \
        .device = ORIN_DEVICE_CPU, .dtype = dt, .run = decode_##suffix,             \
        .flags = ORIN_OP_REFERENCE | ORIN_OP_GRAPH_SAFE,                            \
    },                                                                              \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_FULL, .provider = "mha",                            \
        .device = ORIN_DEVICE_CPU, .dtype = dt, .run = full_##suffix,               \
        .flags = ORIN_OP_REFERENCE,                                                 \
    }

#ifdef ORIN_HAVE_CUDA
#define CUDA_ENTRIES(dt, suffix)                                                    \
    static int cuda_prefill_##suffix(const orin_exec *ex, const void *args)         \
    {                                                                               \
        if (!args)                                                                  \
            return orin_error_set("attention.prefill (mha): no arguments");         \
        return mha_cuda_attention(ex, args, dt, false);                             \
    }                                                                               \
    static int cuda_decode_##suffix(const orin_exec *ex, const void *args)          \
    {                                                                               \
        if (!args)                                                                  \
            return orin_error_set("attention.decode (mha): no arguments");          \
        return mha_cuda_attention(ex, args, dt, true);                              \
    }                                                                               \
    static int cuda_full_##suffix(const orin_exec *ex, const void *args)            \
    {                                                                               \
        return mha_cuda_attention_full(ex, args, dt);                               \
    }

CUDA_ENTRIES(ORIN_F32, f32)
CUDA_ENTRIES(ORIN_F16, f16)
CUDA_ENTRIES(ORIN_BF16, bf16)

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

static int register_ops(orin_registry *reg)
{
    return orin_registry_add_all(reg, impls, sizeof impls / sizeof impls[0]);
}

#ifdef ORIN_HAVE_CUDA
#define MHA_DEVICES "cpu, cuda"
#else
#define MHA_DEVICES "cpu"
#endif

ORIN_PLUGIN_DEFINE("attention_mha", "0.1.0",
                   "reference attention: scores materialised, softmax, P.V (" MHA_DEVICES
                   ": f32, f16, bf16), attention.full too",
                   register_ops)
