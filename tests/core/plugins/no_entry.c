/* A shared object without the entry symbol (its name is misspelt). */
#include "orin/plugin.h"

ORIN_PLUGIN_EXPORT int orin_plugin_entry_misspelt(void) { return 1; }
