/* A good plugin: "test.op" from provider "a" (the reference) at cpu/f32 and cpu/f16. */
#include "orin/plugin.h"

static int run(const orin_exec *ex, const void *args) { return 0; }

static int register_ops(orin_registry *reg)
{
    const orin_op_impl impls[] = {
        {.op = "test.op", .provider = "a", .device = ORIN_DEVICE_CPU, .dtype = ORIN_F32,
         .run = run, .flags = ORIN_OP_REFERENCE},
        {.op = "test.op", .provider = "a", .device = ORIN_DEVICE_CPU, .dtype = ORIN_F16,
         .run = run, .flags = ORIN_OP_REFERENCE},
    };
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++) {
        if (orin_registry_add(reg, &impls[i]))
            return -1;
    }
    return 0;
}

ORIN_PLUGIN_DEFINE("test_good_a", "1.0", "test plugin A", register_ops)
