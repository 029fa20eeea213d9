/* A plugin built out of tree against the installed SDK, with nothing but
 * `cc -shared -fPIC $(pkg-config --cflags --libs orin)`. */
#include <orin/plugin.h>
#include <orin/ops.h>

static int run(const orin_exec *ex, const void *args)
{
    (void)ex;
    (void)args;
    return 0;
}

static int register_ops(orin_registry *reg)
{
    const orin_op_impl impl = {
        .op = ORIN_OP_ADD, .provider = "sdk", .device = ORIN_DEVICE_CPU, .dtype = ORIN_F32,
        .run = run,
    };
    return orin_registry_add(reg, &impl);
}

ORIN_PLUGIN_DEFINE("sdk_example", "0.1", "built out of tree", register_ops)
