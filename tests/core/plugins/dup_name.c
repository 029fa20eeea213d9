/* A different plugin that takes test_good_a's name. */
#include "orin/plugin.h"

static int run(const orin_exec *ex, const void *args) { return 0; }

static int register_ops(orin_registry *reg)
{
    const orin_op_impl impl = {
        .op = "test.other", .provider = "x", .device = ORIN_DEVICE_CPU, .dtype = ORIN_F32,
        .run = run,
    };
    return orin_registry_add(reg, &impl);
}

ORIN_PLUGIN_DEFINE("test_good_a", "2.0", "an impostor", register_ops)
