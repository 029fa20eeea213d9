/* --list-plugins: the loaded plugins, then every op implementation they
 * registered, sorted by op, provider, device and dtype; --json for a machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "engine.h"
#include "orin/error.h"

typedef struct impl_row {
    const orin_op_impl *impl;
    const char *owner;
} impl_row;

static int compare_rows(const void *pa, const void *pb)
{
    const orin_op_impl *a = ((const impl_row *)pa)->impl, *b = ((const impl_row *)pb)->impl;
    int c = strcmp(a->op, b->op);
    if (!c)
        c = strcmp(a->provider, b->provider);
    if (!c)
        c = (int)a->device - (int)b->device;
    if (!c)
        c = (int)a->dtype - (int)b->dtype;
    return c;
}

/* The registry's entries, sorted; NULL with an error when out of memory. */
static impl_row *sorted_rows(const orin_registry *reg, size_t *n)
{
    *n = orin_registry_count(reg);
    impl_row *rows = calloc(*n ? *n : 1, sizeof *rows);
    if (!rows) {
        orin_error_set("out of memory listing op implementations");
        return NULL;
    }
    for (size_t i = 0; i < *n; i++)
        rows[i] = (impl_row){.impl = orin_registry_at(reg, i), .owner = orin_registry_owner(reg, i)};
    qsort(rows, *n, sizeof *rows, compare_rows);
    return rows;
}

static const struct {
    uint32_t bit;
    const char *name;
} flag_names[] = {
    {ORIN_OP_GRAPH_SAFE, "graph-safe"},
    {ORIN_OP_REFERENCE, "reference"},
};

/* "graph-safe,reference", "-" for none; unknown bits as hex. */
static void flags_text(uint32_t flags, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof flag_names / sizeof flag_names[0]; i++) {
        if (!(flags & flag_names[i].bit))
            continue;
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? "," : "", flag_names[i].name);
        flags &= ~flag_names[i].bit;
        if (len >= cap)
            return;
    }
    if (flags)
        len += (size_t)snprintf(buf + len, cap - len, "%s0x%x", len ? "," : "", (unsigned)flags);
    if (!len)
        snprintf(buf, cap, "-");
}

static int width(int current, const char *s)
{
    int n = (int)strlen(s);
    return n > current ? n : current;
}

static void print_table(const orin_engine *e, const impl_row *rows, size_t n)
{
    size_t np = orin_plugin_set_count(e->plugins);
    int wn = 4, wv = 7;
    for (size_t i = 0; i < np; i++) {
        const orin_plugin *p = orin_plugin_set_at(e->plugins, i);
        wn = width(wn, p->name);
        wv = width(wv, p->version ? p->version : "");
    }
    printf("plugins in %s:\n", e->plugin_dir);
    if (!np)
        printf("  (none)\n");
    else
        printf("  %-*s  %-*s  %s\n", wn, "name", wv, "version", "path");
    for (size_t i = 0; i < np; i++) {
        const orin_plugin *p = orin_plugin_set_at(e->plugins, i);
        printf("  %-*s  %-*s  %s\n", wn, p->name, wv, p->version ? p->version : "",
               orin_plugin_set_path(e->plugins, i));
    }
    printf("\n");

    char flags[128];
    int wo = 2, wp = 8, wd = 6, wt = 5, wf = 5;
    for (size_t i = 0; i < n; i++) {
        const orin_op_impl *im = rows[i].impl;
        flags_text(im->flags, flags, sizeof flags);
        wo = width(wo, im->op);
        wp = width(wp, im->provider);
        wd = width(wd, orin_device_kind_name(im->device));
        wt = width(wt, orin_dtype_name(im->dtype));
        wf = width(wf, flags);
    }
    if (!n) {
        printf("no op implementations registered\n");
        return;
    }
    printf("%-*s  %-*s  %-*s  %-*s  %-*s  %s\n", wo, "op", wp, "provider", wd, "device", wt, "dtype",
           wf, "flags", "plugin");
    for (size_t i = 0; i < n; i++) {
        const orin_op_impl *im = rows[i].impl;
        flags_text(im->flags, flags, sizeof flags);
        printf("%-*s  %-*s  %-*s  %-*s  %-*s  %s\n", wo, im->op, wp, im->provider, wd,
               orin_device_kind_name(im->device), wt, orin_dtype_name(im->dtype), wf, flags,
               *rows[i].owner ? rows[i].owner : "(core)");
    }
    printf("\n%zu op implementations from %zu plugins\n", n, np);
}

/* {"plugin_dir": ..., "plugins": [{name, version, description, path}],
 *  "ops": [{op, provider, device, dtype, flags: [...], plugin}]} */
static char *json_text(const orin_engine *e, const impl_row *rows, size_t n)
{
    cJSON *root = cJSON_CreateObject();
    char *text = NULL;
    cJSON *dir = cJSON_AddStringToObject(root, "plugin_dir", e->plugin_dir);
    cJSON *plugins = cJSON_AddArrayToObject(root, "plugins");
    cJSON *ops = cJSON_AddArrayToObject(root, "ops");
    if (!dir || !plugins || !ops)
        goto out;
    for (size_t i = 0; i < orin_plugin_set_count(e->plugins); i++) {
        const orin_plugin *p = orin_plugin_set_at(e->plugins, i);
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(plugins, o))
            goto out;
        cJSON_AddStringToObject(o, "name", p->name);
        cJSON_AddStringToObject(o, "version", p->version ? p->version : "");
        cJSON_AddStringToObject(o, "description", p->description ? p->description : "");
        cJSON_AddStringToObject(o, "path", orin_plugin_set_path(e->plugins, i));
    }
    for (size_t i = 0; i < n; i++) {
        const orin_op_impl *im = rows[i].impl;
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(ops, o))
            goto out;
        cJSON_AddStringToObject(o, "op", im->op);
        cJSON_AddStringToObject(o, "provider", im->provider);
        cJSON_AddStringToObject(o, "device", orin_device_kind_name(im->device));
        cJSON_AddStringToObject(o, "dtype", orin_dtype_name(im->dtype));
        cJSON *flags = cJSON_AddArrayToObject(o, "flags");
        for (size_t f = 0; flags && f < sizeof flag_names / sizeof flag_names[0]; f++)
            if (im->flags & flag_names[f].bit)
                cJSON_AddItemToArray(flags, cJSON_CreateString(flag_names[f].name));
        cJSON_AddStringToObject(o, "plugin", rows[i].owner);
    }
    text = cJSON_PrintUnformatted(root);
out:
    cJSON_Delete(root);
    if (!text)
        orin_error_set("out of memory writing JSON");
    return text;
}

int mode_list_plugins(const orin_cli *cli)
{
    orin_engine e;
    int rc = engine_open_plugins(&e, cli);
    if (rc)
        return rc;
    size_t n;
    impl_row *rows = sorted_rows(e.registry, &n);
    if (!rows) {
        rc = ORIN_EXIT_RUNTIME;
        goto out;
    }
    if (cli->json) {
        char *text = json_text(&e, rows, n);
        if (!text) {
            rc = ORIN_EXIT_RUNTIME;
            goto out;
        }
        printf("%s\n", text);
        cJSON_free(text);
    } else {
        print_table(&e, rows, n);
    }
    if (cli_flush_stdout() != 0)
        rc = ORIN_EXIT_RUNTIME;
out:
    if (rc)
        fprintf(stderr, "orin-run: %s\n", orin_error());
    free(rows);
    engine_close(&e);
    return rc;
}
