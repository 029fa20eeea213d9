/* A good plugin: "test.op" from provider "b" at cpu/f32. */
#include "orin/plugin.h"

static int run(const orin_exec *ex, const void *args) { return 0; }

static int register_ops(orin_registry *reg)
{
    const orin_op_impl impl = {
        .op = "test.op", .provider = "b", .device = ORIN_DEVICE_CPU, .dtype = ORIN_F32,
        .run = run,
    };
    return orin_registry_add(reg, &impl);
}

ORIN_PLUGIN_DEFINE("test_good_b", "1.0", "test plugin B", register_ops)
