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
#include "orin/tokenizer.h"
#include "model.h"

typedef struct orin_engine {
    orin_device *device;
    orin_registry *registry;
    orin_plugin_set *plugins;
    char plugin_dir[PATH_MAX];   /* the folder the plugins were loaded from */
    /* Opened by engine_open_model, after the plugins; closed before them. */
    orin_tokenizer *tokenizer;
    orin_model *model;
    double load_seconds;         /* orin_model_load's wall time */
} orin_engine;

/* Opens runtime.device, creates the registry and loads the plugins: those of
 * plugins.load, or every *.so, from plugins.dir when set, else from "plugins"
 * next to the orin-run executable (a build tree), else from the install layout
 * <exe>/../ORIN_PLUGIN_INSTALL_DIR. Returns ORIN_EXIT_OK, or ORIN_EXIT_LOAD
 * after printing "orin-run: <reason>" on stderr. On failure the engine is
 * closed already; engine_close may be called again. */
int engine_open_plugins(orin_engine *e, const orin_cli *cli);

/* engine_open_plugins, then the tokenizer and the model of model.path.
 * Returns ORIN_EXIT_OK, or ORIN_EXIT_LOAD after printing the reason. */
int engine_open_model(orin_engine *e, const orin_cli *cli);

/* Reads a file (at most ORIN_RUN_MAX_TEXT_BYTES) and encodes its text (no
 * template). 0, or -1 with orin_error_set(). */
int engine_encode_file(orin_engine *e, const char *path, int32_t **ids, size_t *n_ids);

/* GB/s decode meets on dev, measured now: on the host every op thread reading
 * a 1 GiB buffer; on a GPU a 1 GiB device-to-device copy (bytes read + written).
 * 0 when it cannot be measured. (bandwidth.c) */
double engine_bandwidth(orin_device *dev);

/* Frees whatever is open, in reverse order; the engine is zeroed. */
void engine_close(orin_engine *e);

#endif
