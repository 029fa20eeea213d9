/* The graph executor: a list of bound ops and their call structs, run in order.
 *
 * A model builds a graph once per shape (the decode graph once at load, a
 * prefill graph per chunk length) and runs it as often as it likes; the call
 * structs point at fixed device buffers, so running a graph again after the host
 * writes new ids and positions into those buffers is a new step. That is what
 * makes CUDA-graph capture of the decode step possible later without changing
 * any plugin. */
#ifndef ORIN_GRAPH_H
#define ORIN_GRAPH_H

#include "orin/registry.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct orin_graph orin_graph;

orin_graph *orin_graph_create(void);
void orin_graph_free(orin_graph *g);
/* Drops the nodes, keeps the allocation (for rebuilding with another shape). */
void orin_graph_reset(orin_graph *g);

/* The bytes a node must move through memory (each input read once, each output
 * written once), for the profile's bandwidth figures: `fixed`, plus
 * `per_position` for every cache position it reads (attention's K and V). */
typedef struct orin_node_bytes {
    double fixed;
    double per_position;
} orin_node_bytes;

/* Appends a node running `impl` on a copy of the call struct args[0..size).
 * `label` names the node in errors and profiles ("layer 3 attention"); it is
 * copied. */
int orin_graph_add(orin_graph *g, const orin_op_impl *impl, const void *args, size_t size,
                   const char *label, orin_node_bytes bytes);

size_t orin_graph_node_count(const orin_graph *g);
/* The largest workspace any node asked for. */
size_t orin_graph_workspace_size(const orin_graph *g);

/* Runs every node in order on ex; stops at the first failure, prefixing the
 * error with the node's label and op name. */
int orin_graph_run(const orin_graph *g, const orin_exec *ex);

/* ---- profiles ----
 * Time per node over many runs of a graph, summed by node kind (the label
 * without its "layer N " or "block N " prefix) for the report: time per run, bytes per run
 * and the bandwidth that makes. Timed with device events where the device has
 * them (a GPU: each node between two events on the stream, so launch gaps stay
 * out), else with the wall clock around each node (host ops are synchronous). */
typedef struct orin_profile orin_profile;

orin_profile *orin_profile_create(orin_device *dev);
void orin_profile_free(orin_profile *p);
/* Runs timed so far. */
long orin_profile_runs(const orin_profile *p);
/* orin_graph_run, timing every node; kv_len is the cache positions the run's
 * attention reads (for the bytes of per_position). Synchronises at the end. */
int orin_graph_run_profiled(const orin_graph *g, const orin_exec *ex, orin_profile *p,
                            int32_t kv_len);
/* The table, one row per node kind, slowest first, then the total: time per
 * run, its share, bytes per run and GB/s, as a fraction of bandwidth_gbs (0:
 * not shown). */
void orin_profile_print(const orin_profile *p, FILE *out, double bandwidth_gbs);

/* Whether every node's implementation is flagged ORIN_OP_GRAPH_SAFE (may be
 * captured into a device graph and replayed); if not, *first names the first
 * node that is not ("layer 0 attention (attention.decode, mha)"). */
bool orin_graph_replayable(const orin_graph *g, char *first, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
