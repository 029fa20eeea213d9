/* The op registry: a flat list of implementations in registration order.
 *
 * A few hundred entries at most, looked up once per op when a model binds its
 * graph, so linear scans are fast enough and keep the order --list-plugins shows. */
#include "orin/registry.h"
#include "orin/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REGISTRY_MSG_CAP 1024

typedef struct registry_entry {
    orin_op_impl impl;
    char *owner; /* plugin name, "" for the core; owned */
} registry_entry;

struct orin_registry {
    registry_entry *entries;
    size_t count, cap;

    /* The open transaction, if any. */
    bool in_txn;
    size_t txn_mark;               /* entries before it are not the plugin's */
    char *txn_owner;               /* owned */
    bool txn_failed;               /* an add failed inside it */
    char txn_error[REGISTRY_MSG_CAP]; /* the first failure, for commit to report */
};

orin_registry *orin_registry_create(void)
{
    orin_registry *reg = calloc(1, sizeof *reg);
    if (!reg)
        orin_error_set("registry: out of memory");
    return reg;
}

static void drop_entries_from(orin_registry *reg, size_t first)
{
    for (size_t i = first; i < reg->count; i++)
        free(reg->entries[i].owner);
    reg->count = first;
}

static void end_txn(orin_registry *reg)
{
    free(reg->txn_owner);
    reg->txn_owner = NULL;
    reg->in_txn = false;
    reg->txn_failed = false;
    reg->txn_error[0] = '\0';
}

void orin_registry_destroy(orin_registry *reg)
{
    if (!reg)
        return;
    drop_entries_from(reg, 0);
    end_txn(reg);
    free(reg->entries);
    free(reg);
}

static const char *owner_phrase(const char *owner, char *buf, size_t cap)
{
    if (!owner || !owner[0])
        return "the core";
    snprintf(buf, cap, "plugin \"%s\"", owner);
    return buf;
}

static int check_impl(const orin_op_impl *impl)
{
    if (!impl)
        return orin_error_set("registry: NULL implementation");
    if (!impl->op || !impl->op[0])
        return orin_error_set("registry: implementation without an op name");
    if (!impl->provider || !impl->provider[0])
        return orin_error_set("registry: %s: implementation without a provider name", impl->op);
    if ((int)impl->device < 0 || impl->device >= ORIN_DEVICE_KIND_COUNT)
        return orin_error_set("registry: %s/%s: invalid device %d", impl->op, impl->provider,
                              (int)impl->device);
    if ((int)impl->dtype < 0 || impl->dtype >= ORIN_DTYPE_COUNT)
        return orin_error_set("registry: %s/%s: invalid dtype %d", impl->op, impl->provider,
                              (int)impl->dtype);
    if (!impl->run)
        return orin_error_set("registry: %s/%s/%s/%s: no run function", impl->op,
                              impl->provider, orin_device_kind_name(impl->device),
                              orin_dtype_name(impl->dtype));
    return 0;
}

static bool entry_matches(const registry_entry *e, const char *op, const char *provider,
                          orin_device_kind device, orin_dtype dtype)
{
    return e->impl.device == device && e->impl.dtype == dtype && strcmp(e->impl.op, op) == 0 &&
           (!provider || strcmp(e->impl.provider, provider) == 0);
}

static const registry_entry *find_entry(const orin_registry *reg, const char *op,
                                        const char *provider, orin_device_kind device,
                                        orin_dtype dtype)
{
    for (size_t i = 0; i < reg->count; i++) {
        if (entry_matches(&reg->entries[i], op, provider, device, dtype))
            return &reg->entries[i];
    }
    return NULL;
}

static int add_entry(orin_registry *reg, const orin_op_impl *impl)
{
    if (check_impl(impl))
        return -1;
    const registry_entry *dup =
        find_entry(reg, impl->op, impl->provider, impl->device, impl->dtype);
    if (dup) {
        char buf[128];
        return orin_error_set("duplicate op implementation %s/%s/%s/%s (already registered by %s)",
                              impl->op, impl->provider, orin_device_kind_name(impl->device),
                              orin_dtype_name(impl->dtype),
                              owner_phrase(dup->owner, buf, sizeof buf));
    }
    if (reg->count == reg->cap) {
        size_t cap = reg->cap ? reg->cap * 2 : 32;
        registry_entry *grown = realloc(reg->entries, cap * sizeof *grown);
        if (!grown)
            return orin_error_set("registry: out of memory");
        reg->entries = grown;
        reg->cap = cap;
    }
    char *owner = strdup(reg->in_txn && reg->txn_owner ? reg->txn_owner : "");
    if (!owner)
        return orin_error_set("registry: out of memory");
    reg->entries[reg->count++] = (registry_entry){.impl = *impl, .owner = owner};
    return 0;
}

int orin_registry_add(orin_registry *reg, const orin_op_impl *impl)
{
    if (!reg)
        return orin_error_set("registry: NULL registry");
    if (add_entry(reg, impl) == 0)
        return 0;
    /* Remember the first failure: a plugin that ignores it still must not
     * half-register, so commit reports it. */
    if (reg->in_txn && !reg->txn_failed) {
        reg->txn_failed = true;
        snprintf(reg->txn_error, sizeof reg->txn_error, "%s", orin_error());
    }
    return -1;
}

int orin_registry_add_all(orin_registry *reg, const orin_op_impl *impls, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (orin_registry_add(reg, &impls[i]) != 0)
            return -1;
    return 0;
}

const orin_op_impl *orin_registry_find(const orin_registry *reg, const char *op,
                                       const char *provider, orin_device_kind device,
                                       orin_dtype dtype)
{
    if (!reg || !op || !provider)
        return NULL;
    const registry_entry *e = find_entry(reg, op, provider, device, dtype);
    return e ? &e->impl : NULL;
}

/* ---- binding ---- */

static bool op_known(const orin_registry *reg, const char *op)
{
    for (size_t i = 0; i < reg->count; i++) {
        if (strcmp(reg->entries[i].impl.op, op) == 0)
            return true;
    }
    return false;
}

/* Step 2: the first implementation flagged as the op's reference. */
/* Whether impl takes calls shaped like args (see orin_op_supports_fn). */
static bool impl_supports(const orin_op_impl *impl, const void *args, char *why, size_t cap)
{
    if (!impl->supports || !args)
        return true;
    why[0] = '\0';
    return impl->supports(args, why, cap);
}

static const orin_op_impl *find_reference(const orin_registry *reg, const char *op,
                                          orin_device_kind device, orin_dtype dtype,
                                          const void *args)
{
    char why[8];
    for (size_t i = 0; i < reg->count; i++) {
        const registry_entry *e = &reg->entries[i];
        if ((e->impl.flags & ORIN_OP_REFERENCE) && entry_matches(e, op, NULL, device, dtype) &&
            impl_supports(&e->impl, args, why, sizeof why))
            return &e->impl;
    }
    return NULL;
}

/* Step 3: the provider first in alphabetical (byte) order. */
static const orin_op_impl *find_first_alphabetical(const orin_registry *reg, const char *op,
                                                   orin_device_kind device, orin_dtype dtype,
                                                   const void *args)
{
    const orin_op_impl *best = NULL;
    char why[8];
    for (size_t i = 0; i < reg->count; i++) {
        const registry_entry *e = &reg->entries[i];
        if (entry_matches(e, op, NULL, device, dtype) &&
            impl_supports(&e->impl, args, why, sizeof why) &&
            (!best || strcmp(e->impl.provider, best->provider) < 0))
            best = &e->impl;
    }
    return best;
}

/* Appends the providers of `op`, as "name (device/dtype)", to buf. */
static void list_providers(const orin_registry *reg, const char *op, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < reg->count && len < cap; i++) {
        const orin_op_impl *impl = &reg->entries[i].impl;
        if (strcmp(impl->op, op) != 0)
            continue;
        int n = snprintf(buf + len, cap - len, "%s%s %s/%s", len ? ", " : "", impl->provider,
                         orin_device_kind_name(impl->device), orin_dtype_name(impl->dtype));
        if (n < 0)
            break;
        len += (size_t)n;
    }
}

const orin_op_impl *orin_registry_bind(const orin_registry *reg, const orin_bind_request *req)
{
    if (!reg || !req || !req->op) {
        orin_error_set("registry: bind without an op name");
        return NULL;
    }
    const char *op = req->op;
    const char *dev = orin_device_kind_name(req->device);
    const char *dt = orin_dtype_name(req->dtype);
    char available[512];

    if (!op_known(reg, op)) {
        orin_error_set("%s: unknown op (no loaded plugin registers it)", op);
        return NULL;
    }
    char declined[160] = "";
    if (req->provider) {
        const orin_op_impl *exact = orin_registry_find(reg, op, req->provider, req->device,
                                                       req->dtype);
        if (exact && impl_supports(exact, req->args, declined, sizeof declined)) {
            orin_log(ORIN_LOG_DEBUG, "%s: bound \"%s\" at %s/%s as asked", op, exact->provider,
                     dev, dt);
            return exact;
        }
        if (exact && !declined[0])
            snprintf(declined, sizeof declined, "a call of this shape");
    }

    const char *why_bound = "the reference";
    const orin_op_impl *found = find_reference(reg, op, req->device, req->dtype, req->args);
    if (!found) {
        found = find_first_alphabetical(reg, op, req->device, req->dtype, req->args);
        why_bound = "first provider in alphabetical order";
    }
    if (!found) {
        list_providers(reg, op, available, sizeof available);
        if (declined[0])
            orin_error_set("%s: provider \"%s\" does not run %s at %s/%s, and no other "
                           "registered one does (registered: %s)",
                           op, req->provider, declined, dev, dt, available);
        else if (req->provider)
            orin_error_set("%s: no implementation at %s/%s (asked for provider \"%s\"; "
                           "registered: %s)",
                           op, dev, dt, req->provider, available);
        else
            orin_error_set("%s: no implementation at %s/%s (registered: %s)", op, dev, dt,
                           available);
        return NULL;
    }
    if (!req->provider)
        return found; /* no preference: nothing to explain */

    /* A fallback: say why the provider asked for did not fit. */
    char why[256];
    if (declined[0])
        snprintf(why, sizeof why, "provider \"%s\" does not run %s at %s/%s", req->provider,
                 declined, dev, dt);
    else if (orin_registry_provides(reg, op, req->provider))
        snprintf(why, sizeof why, "provider \"%s\" has no %s/%s implementation", req->provider,
                 dev, dt);
    else
        snprintf(why, sizeof why, "no provider \"%s\" is registered for it", req->provider);
    if (req->strict) {
        orin_error_set("%s: %s; strict forbids falling back to \"%s\" (%s)", op, why,
                       found->provider, why_bound);
        return NULL;
    }
    orin_log(ORIN_LOG_INFO, "%s: %s; bound \"%s\" (%s)", op, why, found->provider, why_bound);
    return found;
}

/* ---- iteration ---- */

bool orin_registry_provides(const orin_registry *reg, const char *op, const char *provider)
{
    for (size_t i = 0; reg && i < reg->count; i++) {
        const orin_op_impl *impl = &reg->entries[i].impl;
        if (strcmp(impl->op, op) == 0 && strcmp(impl->provider, provider) == 0)
            return true;
    }
    return false;
}

size_t orin_registry_count(const orin_registry *reg)
{
    return reg ? reg->count : 0;
}

const orin_op_impl *orin_registry_at(const orin_registry *reg, size_t i)
{
    return reg && i < reg->count ? &reg->entries[i].impl : NULL;
}

const char *orin_registry_owner(const orin_registry *reg, size_t i)
{
    return reg && i < reg->count ? reg->entries[i].owner : "";
}

/* ---- transactions ---- */

void orin_registry_begin(orin_registry *reg, const char *owner)
{
    if (!reg)
        return;
    if (reg->in_txn) {
        /* No nesting: the open transaction fails as a whole at commit. */
        if (!reg->txn_failed) {
            reg->txn_failed = true;
            snprintf(reg->txn_error, sizeof reg->txn_error,
                     "registry: transaction for \"%s\" begun inside the one for \"%s\"",
                     owner ? owner : "", reg->txn_owner ? reg->txn_owner : "");
        }
        return;
    }
    reg->in_txn = true;
    reg->txn_mark = reg->count;
    reg->txn_failed = false;
    reg->txn_error[0] = '\0';
    reg->txn_owner = strdup(owner ? owner : "");
    if (!reg->txn_owner) {
        reg->txn_failed = true;
        snprintf(reg->txn_error, sizeof reg->txn_error, "registry: out of memory");
    }
}

int orin_registry_commit(orin_registry *reg)
{
    if (!reg || !reg->in_txn)
        return orin_error_set("registry: commit without a transaction");
    if (reg->txn_failed) {
        orin_error_set("%s", reg->txn_error);
        orin_registry_rollback(reg);
        return -1;
    }
    end_txn(reg);
    return 0;
}

void orin_registry_rollback(orin_registry *reg)
{
    if (!reg || !reg->in_txn)
        return;
    drop_entries_from(reg, reg->txn_mark);
    end_txn(reg);
}
