/* Adds one op, then a duplicate of test_good_a's, ignores that failure and
 * reports success: the loader must still reject the whole plugin. */
#include "orin/plugin.h"

static int run(const orin_exec *ex, const void *args) { return 0; }

static int register_ops(orin_registry *reg)
{
    const orin_op_impl mine = {
        .op = "test.ignored", .provider = "i", .device = ORIN_DEVICE_CPU, .dtype = ORIN_F32,
        .run = run,
    };
    const orin_op_impl taken = {
        .op = "test.op", .provider = "a", .device = ORIN_DEVICE_CPU, .dtype = ORIN_F32,
        .run = run,
    };
    (void)orin_registry_add(reg, &mine);
    (void)orin_registry_add(reg, &taken);
    return 0;
}

ORIN_PLUGIN_DEFINE("test_ignore_error", "1.0", "ignores an add error", register_ops)
