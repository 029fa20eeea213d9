/* The op registry: every op implementation the loaded plugins offer.
 *
 * An implementation is keyed by (op, provider, device, dtype) and carries a `run`
 * function that takes the op's call struct (see orin/ops.h). Models never name a
 * plugin: they ask the registry to bind an op for their device and dtype, naming a
 * provider only where the user chose one (attention.backend).
 *
 * Resolution order of orin_registry_bind() (documented in --help too):
 *   1. the provider asked for, at the exact (device, dtype);
 *   2. an implementation flagged ORIN_OP_REFERENCE for that op at (device, dtype)
 *      ("mha" is the reference attention);
 *   3. any other provider at (device, dtype), in alphabetical order.
 * At every step an implementation whose `supports` declines the request's args
 * (a head_dim it has no kernel for, say) is passed over, and the line says why.
 * Devices and dtypes are never substituted: data would be in the wrong place or
 * format. Steps 2 and 3 are fallbacks: they log one line saying what was bound and
 * why, and with `strict` they are an error instead. */
#ifndef ORIN_REGISTRY_H
#define ORIN_REGISTRY_H

#include "orin/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per-call execution context handed to every op. */
typedef struct orin_exec {
    orin_device *device;     /* where the tensors live; device->stream is the stream */
    void *workspace;         /* at least impl->workspace_size(args) bytes on `device` */
    size_t workspace_size;
} orin_exec;

/* Runs one op. `args` points at the call struct named by the op (orin/ops.h).
 * Returns 0, or -1 with orin_error_set(). */
typedef int (*orin_op_run_fn)(const orin_exec *ex, const void *args);
/* Bytes of device workspace the op needs for these args; NULL means none. */
typedef size_t (*orin_op_workspace_fn)(const void *args);
/* Whether the implementation runs calls shaped like `args` (it reads shapes and
 * scalars, never data). false with a reason in why, e.g. "head_dim 96 (fa2 runs
 * 64 and 128)". NULL means every call its checks accept. */
typedef bool (*orin_op_supports_fn)(const void *args, char *why, size_t why_cap);
/* Rearranges the weights of a call struct in place, once, at load, into the
 * layout the implementation's kernels read, and records that layout in the
 * struct (matmul.awq4 and matmul.int8: orin_qweight.layout); the caller keeps
 * the struct's weights for every later call to that implementation. `args`
 * describes the calls to come (x and y may have no data). NULL: the weights
 * are read as stored. Returns 0, or -1 with orin_error_set(). */
typedef int (*orin_op_prepare_fn)(const orin_exec *ex, void *args);

enum {
    ORIN_OP_GRAPH_SAFE = 1u << 0, /* may be captured into a CUDA graph and replayed */
    ORIN_OP_REFERENCE  = 1u << 1, /* the fallback provider for this op */
};

typedef struct orin_op_impl {
    const char *op;          /* "rmsnorm", "attention.prefill", ... (ORIN_OP_* names) */
    const char *provider;    /* "common", "mha", "fa1", "fa2", ... */
    orin_device_kind device;
    orin_dtype dtype;        /* the compute dtype of its float tensors */
    orin_op_run_fn run;
    orin_op_workspace_fn workspace_size;
    uint32_t flags;
    orin_op_supports_fn supports;
    orin_op_prepare_fn prepare;
} orin_op_impl;

typedef struct orin_registry orin_registry;

orin_registry *orin_registry_create(void);
void orin_registry_destroy(orin_registry *reg);

/* Adds an implementation (copied; its strings must outlive the registry, which
 * static strings in a loaded plugin do). A duplicate key is an error naming the
 * key and the plugin that registered it first. Called by plugins from register_ops. */
int orin_registry_add(orin_registry *reg, const orin_op_impl *impl);
/* Adds impls[0..n) in order, stopping at the first failure: a plugin's
 * register_ops is usually just this over its static table. */
int orin_registry_add_all(orin_registry *reg, const orin_op_impl *impls, size_t n);

/* Exact lookup; NULL when absent (no error set). */
const orin_op_impl *orin_registry_find(const orin_registry *reg, const char *op,
                                       const char *provider, orin_device_kind device,
                                       orin_dtype dtype);

typedef struct orin_bind_request {
    const char *op;
    const char *provider;    /* NULL: no preference (steps 2 and 3 only, no log line) */
    orin_device_kind device;
    orin_dtype dtype;
    bool strict;             /* a fallback is an error */
    const void *args;        /* a call struct shaped like the calls to come (data not
                                needed), for the implementations' `supports`; NULL:
                                not checked */
} orin_bind_request;

/* Resolves as described above. Returns NULL with an error naming the op, the
 * provider, the device and the dtype when nothing fits (or strict forbids). */
const orin_op_impl *orin_registry_bind(const orin_registry *reg, const orin_bind_request *req);

/* Whether any implementation of `op` by `provider` is registered, at any device
 * and dtype (tells a misspelt provider from one that lacks a device or dtype). */
bool orin_registry_provides(const orin_registry *reg, const char *op, const char *provider);

/* Iteration, in registration order (for --list-plugins). */
size_t orin_registry_count(const orin_registry *reg);
const orin_op_impl *orin_registry_at(const orin_registry *reg, size_t i);
/* Name of the plugin that registered entry i ("" for the core). */
const char *orin_registry_owner(const orin_registry *reg, size_t i);

/* Transactions, used by the plugin loader so that a plugin registers all or
 * nothing: begin records the owner and a mark; commit keeps what was added;
 * rollback removes it. A failed orin_registry_add inside a transaction makes
 * commit fail even if the plugin ignored the error. */
void orin_registry_begin(orin_registry *reg, const char *owner);
int orin_registry_commit(orin_registry *reg);
void orin_registry_rollback(orin_registry *reg);

#ifdef __cplusplus
}
#endif
#endif
