/* The entry point exists but returns NULL. */
#include "orin/plugin.h"

ORIN_PLUGIN_EXPORT const orin_plugin *orin_plugin_entry(void) { return NULL; }
