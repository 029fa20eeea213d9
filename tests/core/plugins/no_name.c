/* A plugin without a name. */
#include "orin/plugin.h"

static int register_ops(orin_registry *reg) { return 0; }

ORIN_PLUGIN_DEFINE(NULL, "1.0", "no name", register_ops)
