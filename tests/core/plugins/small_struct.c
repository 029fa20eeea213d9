/* The right ABI version but a struct_size too small to hold register_ops. */
#include "orin/plugin.h"

static int register_ops(orin_registry *reg) { return 0; }

ORIN_PLUGIN_EXPORT const orin_plugin *orin_plugin_entry(void)
{
    static const orin_plugin plugin = {
        .abi_version = ORIN_PLUGIN_ABI_VERSION,
        .struct_size = 8,
        .name = "test_small_struct",
        .register_ops = register_ops,
    };
    return &plugin;
}
