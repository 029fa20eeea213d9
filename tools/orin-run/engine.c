/* Opening the device, the registry and the plugins for orin-run's modes. */
#include "engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orin/error.h"

/* Where `cmake --install` puts the plugins, relative to the install prefix
 * (tools/CMakeLists.txt passes the configured value). */
#ifndef ORIN_PLUGIN_INSTALL_DIR
#define ORIN_PLUGIN_INSTALL_DIR "lib/orin/plugins"
#endif

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The folder holding the running executable. /proc/self/exe names the real
 * file even when orin-run was started through a symlink or from $PATH. */
static int exe_dir(const orin_cli *cli, char *out, size_t cap)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n > 0) {
        path[n] = '\0';
    } else if (!cli->argv0 || !strchr(cli->argv0, '/') || !realpath(cli->argv0, path)) {
        return orin_error_set("cannot find the orin-run executable to locate its plugins; "
                              "set plugins.dir");
    }
    char *slash = strrchr(path, '/');
    *slash = '\0';
    if ((size_t)snprintf(out, cap, "%s", path) >= cap)
        return orin_error_set("%s: folder name too long", path);
    return 0;
}

/* plugins.dir, or the build tree's plugins/ beside the executable, or the
 * installed <prefix>/lib/orin/plugins (the executable being <prefix>/bin). */
static int find_plugin_dir(const orin_cli *cli, char *out, size_t cap)
{
    const char *dir = cli->cfg.plugins.dir;
    if (*dir) {
        struct stat st;
        if (stat(dir, &st) != 0)
            return orin_error_set("plugins.dir: %s: %s", dir, strerror(errno));
        if (!S_ISDIR(st.st_mode))
            return orin_error_set("plugins.dir: %s: not a folder", dir);
        if ((size_t)snprintf(out, cap, "%s", dir) >= cap)
            return orin_error_set("plugins.dir: %s: name too long", dir);
        return 0;
    }

    char exe[PATH_MAX], build[PATH_MAX + 16], installed[2 * PATH_MAX];
    if (exe_dir(cli, exe, sizeof exe))
        return -1;
    snprintf(build, sizeof build, "%s/plugins", exe);
    if (ORIN_PLUGIN_INSTALL_DIR[0] == '/')
        snprintf(installed, sizeof installed, "%s", ORIN_PLUGIN_INSTALL_DIR);
    else
        snprintf(installed, sizeof installed, "%s/../%s", exe, ORIN_PLUGIN_INSTALL_DIR);
    const char *found = is_dir(build) ? build : is_dir(installed) ? installed : NULL;
    if (!found)
        return orin_error_set("no plugin folder: neither %s nor %s exists; set plugins.dir", build,
                              installed);
    if ((size_t)snprintf(out, cap, "%s", found) >= cap)
        return orin_error_set("%s: name too long", found);
    return 0;
}

/* Loads the comma-separated files of plugins.load from dir; ".so" may be
 * left out of a name. */
static int load_listed(orin_engine *e, const char *list)
{
    const char *s = list;
    while (*s) {
        size_t n = strcspn(s, ",");
        const char *start = s, *end = s + n;
        while (start < end && (*start == ' ' || *start == '\t'))
            start++;
        while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        size_t len = (size_t)(end - start);
        bool has_so = len > 3 && !memcmp(end - 3, ".so", 3);
        char path[2 * PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/%.*s%s", e->plugin_dir, (int)len, start,
                             has_so ? "" : ".so") >= sizeof path)
            return orin_error_set("plugins.load: %.*s: name too long", (int)len, start);
        if (len && orin_plugin_load(e->plugins, e->registry, path))
            return -1;
        s += n + (s[n] == ',');
    }
    return 0;
}

static bool registry_has(const orin_registry *reg, const char *op, orin_device_kind kind,
                         orin_dtype dtype)
{
    for (size_t i = 0; i < orin_registry_count(reg); i++) {
        const orin_op_impl *impl = orin_registry_at(reg, i);
        if (impl->device == kind && impl->dtype == dtype && strcmp(impl->op, op) == 0)
            return true;
    }
    return false;
}

/* What the model of model.path needs beyond orin_model_ops: its quantized
 * matmul (config.json's quantization_config, or model.quant; NULL for float
 * weights) and, for a Qwen3-VL model, orin_model_vl_ops. False when the
 * folder cannot be read (loading the model says why later). */
static bool model_needs(const orin_config *cfg, const char **quant_op, bool *vl)
{
    orin_model_config mc;
    *quant_op = NULL;
    *vl = false;
    if (!cfg->model.path[0] || orin_model_config_load(cfg->model.path, &mc) != 0) {
        orin_error_clear();
        return false;
    }
    *quant_op = orin_model_quant_op(&mc, cfg->model.quant == ORIN_LOAD_QUANT_INT8
                                             ? ORIN_WEIGHT_INT8
                                             : ORIN_WEIGHT_FLOAT);
    *vl = mc.vl.is_vl;
    return true;
}

/* Whether a loaded plugin runs `op` on cuda in model.dtype; if not, a line at
 * `level` says that the CPU is used instead. */
static bool runs_on_cuda(const orin_engine *e, const orin_config *cfg, const char *op,
                         orin_log_level level)
{
    if (registry_has(e->registry, op, ORIN_DEVICE_CUDA, cfg->model.dtype))
        return true;
    orin_log(level, "runtime.device = auto: a GPU is present, but no loaded plugin runs %s on "
                    "cuda/%s; using the CPU", op, orin_dtype_name(cfg->model.dtype));
    return false;
}

/* Whether the loaded plugins run every op of `ops` on cuda in model.dtype. */
static bool runs_all_on_cuda(const orin_engine *e, const orin_config *cfg,
                             const char *const *ops)
{
    for (const char *const *op = ops; *op; op++)
        if (!runs_on_cuda(e, cfg, *op, ORIN_LOG_DEBUG))
            return false;
    return true;
}

/* runtime.device = auto: CUDA when a GPU is visible and the loaded plugins
 * run every op of the model there in model.dtype (its quantized matmul too:
 * that one is said, being the likely reason; a Qwen3-VL model's vision ops
 * too), else the host. */
static const char *resolve_device(const orin_engine *e, const orin_config *cfg)
{
    if (strcmp(cfg->runtime.device, "auto") != 0)
        return cfg->runtime.device;
    if (!orin_cuda_available() || !runs_all_on_cuda(e, cfg, orin_model_ops))
        return "cpu";
    const char *quant_op;
    bool vl;
    if (!model_needs(cfg, &quant_op, &vl))
        return "cuda";
    if (quant_op && !runs_on_cuda(e, cfg, quant_op, ORIN_LOG_INFO))
        return "cpu";
    if (vl && !runs_all_on_cuda(e, cfg, orin_model_vl_ops))
        return "cpu";
    return "cuda";
}

int engine_open_plugins(orin_engine *e, const orin_cli *cli)
{
    const orin_config *cfg = &cli->cfg;
    memset(e, 0, sizeof *e);

    e->registry = orin_registry_create();
    e->plugins = orin_plugin_set_create();
    if (!e->registry || !e->plugins) {
        orin_error_set("out of memory creating the op registry");
        goto fail;
    }
    if (find_plugin_dir(cli, e->plugin_dir, sizeof e->plugin_dir))
        goto fail;
    int rc = *cfg->plugins.load ? load_listed(e, cfg->plugins.load)
                                : orin_plugin_load_dir(e->plugins, e->registry, e->plugin_dir);
    if (rc)
        goto fail;
    orin_log(ORIN_LOG_DEBUG, "plugins: %zu loaded from %s, %zu op implementations",
             orin_plugin_set_count(e->plugins), e->plugin_dir, orin_registry_count(e->registry));

    /* The device comes after the plugins: "auto" depends on what they offer. */
    e->device = orin_device_open(resolve_device(e, cfg));
    if (!e->device)
        goto fail;
    e->device->threads = cfg->runtime.threads;
    orin_log(ORIN_LOG_DEBUG, "device: %s", e->device->name);
    return ORIN_EXIT_OK;

fail:
    fprintf(stderr, "orin-run: %s\n", orin_error());
    engine_close(e);
    return ORIN_EXIT_LOAD;
}

void engine_close(orin_engine *e)
{
    /* The model holds bound ops, which point into the plugins: it goes first,
     * then the registry, which points into the plugins' memory too. */
    orin_model_free(e->model);
    orin_tokenizer_free(e->tokenizer);
    if (e->registry)
        orin_registry_destroy(e->registry);
    if (e->plugins)
        orin_plugin_set_destroy(e->plugins);
    if (e->device)
        orin_device_close(e->device);
    memset(e, 0, sizeof *e);
}
