/* A plugin without a register_ops function. */
#include "orin/plugin.h"

ORIN_PLUGIN_DEFINE("test_no_register", "1.0", "no register_ops", NULL)
