/* attention_fa2: FlashAttention-2 (provider "fa2"): prefill, and split-KV decode,
 * on the CPU for f32, f16 and bf16. */
#include "cpu.h"

#include "orin/plugin.h"

#define ENTRIES(dt, suffix)                                                         \
    static int prefill_##suffix(const orin_exec *ex, const void *args)              \
    {                                                                               \
        return fa2_cpu_prefill(ex, args, dt);                                       \
    }                                                                               \
    static int decode_##suffix(const orin_exec *ex, const void *args)               \
    {                                                                               \
        return fa2_cpu_decode(ex, args, dt);                                        \
    }

ENTRIES(ORIN_F32, f32)
ENTRIES(ORIN_F16, f16)
ENTRIES(ORIN_BF16, bf16)

static size_t decode_workspace(const void *args)
{
    return fa2_decode_workspace_size(args);
}

/* Decode reads its position from memory and sizes its split grid from
 * max_kv_len only: graph-safe. */
#define IMPLS(dt, suffix)                                                           \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_PREFILL, .provider = "fa2",                         \
        .device = ORIN_DEVICE_CPU, .dtype = dt, .run = prefill_##suffix,            \
    },                                                                              \
    {                                                                               \
        .op = ORIN_OP_ATTENTION_DECODE, .provider = "fa2",                          \
        .device = ORIN_DEVICE_CPU, .dtype = dt, .run = decode_##suffix,             \
        .workspace_size = decode_workspace, .flags = ORIN_OP_GRAPH_SAFE,            \
    }

static const orin_op_impl impls[] = {
    IMPLS(ORIN_F32, f32),
    IMPLS(ORIN_F16, f16),
    IMPLS(ORIN_BF16, bf16),
};

static int register_ops(orin_registry *reg)
{
    return orin_registry_add_all(reg, impls, sizeof impls / sizeof impls[0]);
}

ORIN_PLUGIN_DEFINE("attention_fa2", "0.1.0",
                   "FlashAttention-2: Q tiles outer, one normalisation at the end, causal tiles "
                   "skipped; split-KV decode (cpu: f32, f16, bf16)",
                   register_ops)
