/* attention_fa1: FlashAttention-1 (provider "fa1"), prefill and decode, on the
 * CPU for f32, f16 and bf16. */
#include "cpu.h"

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

static const orin_op_impl impls[] = {
    IMPLS(ORIN_F32, f32),
    IMPLS(ORIN_F16, f16),
    IMPLS(ORIN_BF16, bf16),
};

static int register_ops(orin_registry *reg)
{
    return orin_registry_add_all(reg, impls, sizeof impls / sizeof impls[0]);
}

ORIN_PLUGIN_DEFINE("attention_fa1", "0.1.0",
                   "FlashAttention-1: KV tiles outer, online softmax rescaled every tile "
                   "(cpu: f32, f16, bf16)",
                   register_ops)
