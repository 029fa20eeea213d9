/* The plugin loader: dlopen, check the ABI, register inside a transaction.
 *
 * A plugin that fails any step is dlclose()d and leaves nothing behind in the
 * registry, so a broken .so costs the user an error message and nothing else. */
#include "orin/plugin.h"
#include "orin/error.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct loaded_plugin {
    void *handle;
    const orin_plugin *plugin;
    char *path; /* owned */
} loaded_plugin;

struct orin_plugin_set {
    loaded_plugin *items;
    size_t count, cap;
};

/* The smallest struct_size that holds every member ABI 1 defines. */
#define PLUGIN_MIN_STRUCT_SIZE (offsetof(orin_plugin, register_ops) + sizeof(void (*)(void)))

orin_plugin_set *orin_plugin_set_create(void)
{
    orin_plugin_set *set = calloc(1, sizeof *set);
    if (!set)
        orin_error_set("plugins: out of memory");
    return set;
}

void orin_plugin_set_destroy(orin_plugin_set *set)
{
    if (!set)
        return;
    /* Reverse order, in case a later plugin depends on an earlier one. */
    for (size_t i = set->count; i-- > 0;) {
        dlclose(set->items[i].handle);
        free(set->items[i].path);
    }
    free(set->items);
    free(set);
}

size_t orin_plugin_set_count(const orin_plugin_set *set)
{
    return set ? set->count : 0;
}

const orin_plugin *orin_plugin_set_at(const orin_plugin_set *set, size_t i)
{
    return set && i < set->count ? set->items[i].plugin : NULL;
}

const char *orin_plugin_set_path(const orin_plugin_set *set, size_t i)
{
    return set && i < set->count ? set->items[i].path : NULL;
}

static const loaded_plugin *find_by_name(const orin_plugin_set *set, const char *name)
{
    for (size_t i = 0; i < set->count; i++) {
        if (strcmp(set->items[i].plugin->name, name) == 0)
            return &set->items[i];
    }
    return NULL;
}

static int reserve_slot(orin_plugin_set *set, const char *path)
{
    if (set->count < set->cap)
        return 0;
    size_t cap = set->cap ? set->cap * 2 : 8;
    loaded_plugin *grown = realloc(set->items, cap * sizeof *grown);
    if (!grown)
        return orin_error_set("%s: out of memory", path);
    set->items = grown;
    set->cap = cap;
    return 0;
}

/* dlerror() usually starts with the path again ("x.so: invalid ELF header");
 * the message already names the file, so drop the repeat. */
static const char *dlerror_reason(const char *path)
{
    const char *msg = dlerror();
    if (!msg)
        return "unknown dlopen error";
    size_t n = strlen(path);
    if (strncmp(msg, path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
        return msg + n + 2;
    return msg;
}

/* Checks the struct the entry point returned, in an order that never reads a
 * member the plugin's ABI might not have. */
static int check_plugin(const orin_plugin_set *set, const char *path, const orin_plugin *p)
{
    if (!p)
        return orin_error_set("%s: %s() returned NULL", path, ORIN_PLUGIN_ENTRY_SYMBOL);
    if (p->abi_version != ORIN_PLUGIN_ABI_VERSION)
        return orin_error_set("%s: built for plugin ABI %u, this orin has ABI %u (rebuild the "
                              "plugin against this orin)",
                              path, (unsigned)p->abi_version, (unsigned)ORIN_PLUGIN_ABI_VERSION);
    if (p->struct_size < PLUGIN_MIN_STRUCT_SIZE)
        return orin_error_set("%s: plugin struct is %u bytes, ABI %u needs at least %zu", path,
                              (unsigned)p->struct_size, (unsigned)ORIN_PLUGIN_ABI_VERSION,
                              (size_t)PLUGIN_MIN_STRUCT_SIZE);
    if (!p->name || !p->name[0])
        return orin_error_set("%s: plugin has no name", path);
    if (!p->register_ops)
        return orin_error_set("%s: plugin \"%s\" has no register_ops function", path, p->name);
    const loaded_plugin *dup = find_by_name(set, p->name);
    if (dup)
        return orin_error_set("%s: duplicate plugin name \"%s\" (already loaded from %s)", path,
                              p->name, dup->path);
    return 0;
}

/* Runs register_ops inside a transaction: all of the plugin's ops or none. */
static int register_plugin(orin_registry *reg, const char *path, const orin_plugin *p)
{
    orin_registry_begin(reg, p->name);
    orin_error_clear();
    if (p->register_ops(reg) != 0) {
        orin_registry_rollback(reg);
        return orin_error_prefix("%s: plugin \"%s\" failed to register its ops: ", path,
                                 p->name);
    }
    /* Commit fails (and rolls back) if any add failed, even one it ignored. */
    if (orin_registry_commit(reg) != 0)
        return orin_error_prefix("%s: plugin \"%s\": ", path, p->name);
    return 0;
}

int orin_plugin_load(orin_plugin_set *set, orin_registry *reg, const char *path)
{
    void *handle = NULL;
    char *path_copy = NULL;

    if (!set || !reg || !path)
        return orin_error_set("plugins: load needs a plugin set, a registry and a path");

    dlerror(); /* clear a stale message */
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle)
        return orin_error_set("%s: cannot load: %s", path, dlerror_reason(path));

    dlerror();
    void *sym = dlsym(handle, ORIN_PLUGIN_ENTRY_SYMBOL);
    if (!sym) {
        orin_error_set("%s: not an orin plugin: no symbol %s", path, ORIN_PLUGIN_ENTRY_SYMBOL);
        goto fail;
    }
    /* POSIX guarantees that a data pointer from dlsym converts to a function
     * pointer; memcpy says so without a cast ISO C frowns on. */
    orin_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    const orin_plugin *plugin = entry();
    if (check_plugin(set, path, plugin))
        goto fail;
    /* Everything that can fail for want of memory happens before registering,
     * so that a registered plugin is always recorded. */
    path_copy = strdup(path);
    if (!path_copy) {
        orin_error_set("%s: out of memory", path);
        goto fail;
    }
    if (reserve_slot(set, path))
        goto fail;
    if (register_plugin(reg, path, plugin))
        goto fail;

    set->items[set->count++] = (loaded_plugin){
        .handle = handle,
        .plugin = plugin,
        .path = path_copy,
    };
    orin_log(ORIN_LOG_DEBUG, "loaded plugin \"%s\" %s from %s", plugin->name,
             plugin->version ? plugin->version : "", path);
    return 0;

fail:
    free(path_copy);
    dlclose(handle);
    return -1;
}

/* ---- a whole folder ---- */

static bool has_so_suffix(const char *name)
{
    size_t n = strlen(name);
    return n > 3 && strcmp(name + n - 3, ".so") == 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The names of the regular files (or links to them) ending ".so" in dir,
 * sorted bytewise so that the load order does not depend on the locale. */
static int list_plugin_files(const char *dir, char ***out, size_t *out_n)
{
    char **names = NULL;
    size_t n = 0, cap = 0;
    char full[4096];

    DIR *d = opendir(dir);
    if (!d)
        return orin_error_set("%s: cannot open plugin folder: %s", dir, strerror(errno));
    struct dirent *ent;
    while ((ent = readdir(d))) {
        if (!has_so_suffix(ent->d_name))
            continue;
        struct stat st;
        snprintf(full, sizeof full, "%s/%s", dir, ent->d_name);
        if (stat(full, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **grown = realloc(names, cap * sizeof *grown);
            if (!grown)
                goto oom;
            names = grown;
        }
        if (!(names[n] = strdup(ent->d_name)))
            goto oom;
        n++;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, compare_names);
    *out = names;
    *out_n = n;
    return 0;

oom:
    closedir(d);
    free_names(names, n);
    return orin_error_set("%s: out of memory listing plugins", dir);
}

int orin_plugin_load_dir(orin_plugin_set *set, orin_registry *reg, const char *dir)
{
    char **names = NULL;
    size_t n = 0;
    int rc = 0;
    char path[4096];

    if (!set || !reg || !dir)
        return orin_error_set("plugins: load_dir needs a plugin set, a registry and a folder");
    if (list_plugin_files(dir, &names, &n))
        return -1;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= sizeof path)
            rc = orin_error_set("%s/%s: path too long", dir, names[i]);
        else
            rc = orin_plugin_load(set, reg, path);
    }
    if (rc == 0 && n == 0)
        orin_log(ORIN_LOG_WARN, "%s: no plugins (*.so) in this folder", dir);
    free_names(names, n);
    return rc;
}
