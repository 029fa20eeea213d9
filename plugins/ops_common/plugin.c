/* Placeholder until the CPU ops land: loads and registers nothing. */
#include "orin/plugin.h"
static int register_ops(orin_registry *reg) { (void)reg; return 0; }
ORIN_PLUGIN_DEFINE("ops_common", "0.1.0", "placeholder", register_ops)
