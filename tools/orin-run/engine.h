/* orin-run's engine: what the modes share once the command line is parsed:
 * the device, the op registry and the plugins that fill it. Each mode opens
 * what it needs and closes everything with engine_close. */
#ifndef ORIN_RUN_ENGINE_H
#define ORIN_RUN_ENGINE_H

#include <limits.h>

#include "cli.h"
#include "orin/device.h"
#include "orin/plugin.h"
#include "orin/registry.h"

typedef struct orin_engine {
    orin_device *device;
    orin_registry *registry;
    orin_plugin_set *plugins;
    char plugin_dir[PATH_MAX];   /* the folder the plugins were loaded from */
    /* The model and the tokenizer join here (engine_open_model), opened after
     * the plugins and closed before them by engine_close. */
} orin_engine;

/* Opens runtime.device, creates the registry and loads the plugins: those of
 * plugins.load, or every *.so, from plugins.dir when set, else from "plugins"
 * next to the orin-run executable (a build tree), else from the install layout
 * <exe>/../ORIN_PLUGIN_INSTALL_DIR. Returns ORIN_EXIT_OK, or ORIN_EXIT_LOAD
 * after printing "orin-run: <reason>" on stderr. On failure the engine is
 * closed already; engine_close may be called again. */
int engine_open_plugins(orin_engine *e, const orin_cli *cli);

/* Frees whatever is open, in reverse order; the engine is zeroed. */
void engine_close(orin_engine *e);

#endif
