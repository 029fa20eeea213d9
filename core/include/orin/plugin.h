/* The plugin ABI.
 *
 * A plugin is a shared object that exports one C symbol, ORIN_PLUGIN_ENTRY_SYMBOL,
 * returning a pointer to a static orin_plugin. The loader checks abi_version (the
 * first member, never moved) before touching anything else, then calls
 * register_ops inside a registry transaction: a plugin registers all of its ops
 * or none of them.
 *
 * ORIN_PLUGIN_ABI_VERSION covers this struct, orin_op_impl and every call struct
 * in orin/ops.h: changing any of them bumps it (2: orin_op_impl.supports; 3:
 * orin_op_impl.prepare and orin_qweight.layout; 4: orin_norm_in in the fused
 * products' calls; 5: orin_rope_scaling in rope's and rope_kv_write's calls).
 *
 *     static int register_ops(orin_registry *reg) { ... orin_registry_add(reg, &impl) ... }
 *     ORIN_PLUGIN_DEFINE("my_plugin", "1.0", "what it offers", register_ops)
 *
 * or, where the ops are one static array (the bundled plugins):
 *
 *     static const orin_op_impl impls[] = { {.op = ..., .run = ...}, ... };
 *     ORIN_PLUGIN_DEFINE_TABLE("my_plugin", "1.0", "what it offers", impls)
 */
#ifndef ORIN_PLUGIN_H
#define ORIN_PLUGIN_H

#include <stdint.h>
#include "orin/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ORIN_PLUGIN_ABI_VERSION 5u
#define ORIN_PLUGIN_ENTRY_SYMBOL "orin_plugin_entry"

typedef struct orin_plugin {
    uint32_t abi_version;    /* ORIN_PLUGIN_ABI_VERSION the plugin was built with */
    uint32_t struct_size;    /* sizeof(orin_plugin) at build time */
    const char *name;        /* unique: "ops_common", "attention_fa2" */
    const char *version;
    const char *description;
    int (*register_ops)(orin_registry *reg); /* 0 on success, -1 with orin_error_set() */
} orin_plugin;

typedef const orin_plugin *(*orin_plugin_entry_fn)(void);

#if defined(__GNUC__)
#define ORIN_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define ORIN_PLUGIN_EXPORT
#endif

#define ORIN_PLUGIN_DEFINE(NAME, VERSION, DESCRIPTION, REGISTER)                     \
    ORIN_PLUGIN_EXPORT const orin_plugin *orin_plugin_entry(void)                    \
    {                                                                                \
        static const orin_plugin plugin = {                                          \
            .abi_version = ORIN_PLUGIN_ABI_VERSION,                                  \
            .struct_size = sizeof(orin_plugin),                                      \
            .name = NAME,                                                            \
            .version = VERSION,                                                      \
            .description = DESCRIPTION,                                              \
            .register_ops = REGISTER,                                                \
        };                                                                           \
        return &plugin;                                                              \
    }

/* A plugin whose ops are one static array of orin_op_impl: ORIN_PLUGIN_DEFINE
 * with a register_ops that adds the whole array (orin_registry_add_all). */
#define ORIN_PLUGIN_DEFINE_TABLE(NAME, VERSION, DESCRIPTION, IMPLS)                  \
    static int orin_plugin_register_table(orin_registry *reg)                        \
    {                                                                                \
        return orin_registry_add_all(reg, (IMPLS), sizeof(IMPLS) / sizeof((IMPLS)[0])); \
    }                                                                                \
    ORIN_PLUGIN_DEFINE(NAME, VERSION, DESCRIPTION, orin_plugin_register_table)

/* The devices a plugin of this build runs on, for its description. */
#ifdef ORIN_HAVE_CUDA
#define ORIN_PLUGIN_DEVICES "cpu, cuda"
#else
#define ORIN_PLUGIN_DEVICES "cpu"
#endif

/* ---- loader (core side) ---- */

typedef struct orin_plugin_set orin_plugin_set; /* the dlopen'ed plugins */

orin_plugin_set *orin_plugin_set_create(void);
/* dlclose()s every plugin; destroy the registry that references them first. */
void orin_plugin_set_destroy(orin_plugin_set *set);

/* Loads one plugin file. Errors name the file and the reason: dlopen's message,
 * a missing entry symbol, an ABI mismatch, a duplicate plugin name or op. */
int orin_plugin_load(orin_plugin_set *set, orin_registry *reg, const char *path);
/* Loads every "*.so" in dir, in name order. Stops at the first failure. */
int orin_plugin_load_dir(orin_plugin_set *set, orin_registry *reg, const char *dir);

size_t orin_plugin_set_count(const orin_plugin_set *set);
const orin_plugin *orin_plugin_set_at(const orin_plugin_set *set, size_t i);
const char *orin_plugin_set_path(const orin_plugin_set *set, size_t i);

#ifdef __cplusplus
}
#endif
#endif
