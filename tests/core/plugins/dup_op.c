/* Registers an op that test_good_a registers too: (test.op, a, cpu, f32). */
#include "orin/plugin.h"

static int run(const orin_exec *ex, const void *args) { return 0; }

static int register_ops(orin_registry *reg)
{
    const orin_op_impl impl = {
        .op = "test.op", .provider = "a", .device = ORIN_DEVICE_CPU, .dtype = ORIN_F32,
        .run = run,
    };
    return orin_registry_add(reg, &impl);
}

ORIN_PLUGIN_DEFINE("test_dup_op", "1.0", "duplicates test_good_a", register_ops)
