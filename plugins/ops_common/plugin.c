/* ops_common: the CPU reference implementations of every op except attention,
 * registered for f32, f16 and bf16 under the provider "common". */
#include "cpu.h"

#include "orin/error.h"
#include "orin/plugin.h"

/* The registry hands `run` only the exec and the call struct, so each
 * (op, dtype) gets a tiny entry point that names its dtype. */
#define CPU_ENTRY(op, args_type, dt, suffix)                                        \
    static int op##_##suffix(const orin_exec *ex, const void *args)                 \
    {                                                                               \
        if (!args)                                                                  \
            return orin_error_set(#op " (common): no arguments");                   \
        return cpu_##op(ex, (const args_type *)args, dt);                           \
    }
#define CPU_ENTRIES(op, args_type)                                                  \
    CPU_ENTRY(op, args_type, ORIN_F32, f32)                                         \
    CPU_ENTRY(op, args_type, ORIN_F16, f16)                                         \
    CPU_ENTRY(op, args_type, ORIN_BF16, bf16)

CPU_ENTRIES(embedding, orin_embedding_args)
CPU_ENTRIES(rmsnorm, orin_rmsnorm_args)
CPU_ENTRIES(rope, orin_rope_args)
CPU_ENTRIES(matmul, orin_matmul_args)
CPU_ENTRIES(swiglu, orin_swiglu_args)
CPU_ENTRIES(add, orin_add_args)
CPU_ENTRIES(argmax, orin_argmax_args)
CPU_ENTRIES(kv_write, orin_kv_write_args)

/* Everything here only reads its inputs from memory, so all of it could be
 * replayed in a graph; on the CPU there is no graph, and the flag says so for
 * whoever asks. */
#define IMPL(name, fn, dt)                                                          \
    {                                                                               \
        .op = name, .provider = "common", .device = ORIN_DEVICE_CPU, .dtype = dt,   \
        .run = fn, .flags = ORIN_OP_REFERENCE | ORIN_OP_GRAPH_SAFE,                 \
    }
#define IMPLS(name, op)                                                             \
    IMPL(name, op##_f32, ORIN_F32), IMPL(name, op##_f16, ORIN_F16),                 \
        IMPL(name, op##_bf16, ORIN_BF16)

static const orin_op_impl impls[] = {
    IMPLS(ORIN_OP_EMBEDDING, embedding),
    IMPLS(ORIN_OP_RMSNORM, rmsnorm),
    IMPLS(ORIN_OP_ROPE, rope),
    IMPLS(ORIN_OP_MATMUL, matmul),
    IMPLS(ORIN_OP_SWIGLU, swiglu),
    IMPLS(ORIN_OP_ADD, add),
    IMPLS(ORIN_OP_ARGMAX, argmax),
    IMPLS(ORIN_OP_KV_WRITE, kv_write),
};

static int register_ops(orin_registry *reg)
{
    return orin_registry_add_all(reg, impls, sizeof impls / sizeof impls[0]);
}

ORIN_PLUGIN_DEFINE("ops_common", "0.1.0",
                   "CPU reference ops: embedding, rmsnorm, rope, matmul (OpenBLAS), swiglu, "
                   "add, argmax, kv_write; f32, f16, bf16",
                   register_ops)
