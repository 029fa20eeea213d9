/* Claims plugin ABI 7; the loader must refuse it before reading anything else. */
#include "orin/plugin.h"

static int register_ops(orin_registry *reg) { return 0; }

ORIN_PLUGIN_EXPORT const orin_plugin *orin_plugin_entry(void)
{
    static const orin_plugin plugin = {
        .abi_version = 7,
        .struct_size = sizeof(orin_plugin),
        .name = "test_wrong_abi",
        .version = "1.0",
        .register_ops = register_ops,
    };
    return &plugin;
}
