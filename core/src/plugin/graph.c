/* The graph executor (see orin/graph.h). */
#include "orin/graph.h"
#include "orin/cpu_util.h"
#include "orin/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct orin_node {
    const orin_op_impl *impl;
    void *args;          /* owned copy of the call struct */
    char label[48];
    orin_node_bytes bytes;
} orin_node;

struct orin_graph {
    orin_node *nodes;
    size_t count, cap;
    size_t workspace;
};

orin_graph *orin_graph_create(void)
{
    orin_graph *g = calloc(1, sizeof *g);
    if (!g)
        orin_error_set("graph: out of memory");
    return g;
}

void orin_graph_reset(orin_graph *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->count; i++)
        free(g->nodes[i].args);
    g->count = 0;
    g->workspace = 0;
}

void orin_graph_free(orin_graph *g)
{
    if (!g)
        return;
    orin_graph_reset(g);
    free(g->nodes);
    free(g);
}

int orin_graph_add(orin_graph *g, const orin_op_impl *impl, const void *args, size_t size,
                   const char *label, orin_node_bytes bytes)
{
    if (g->count == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 64;
        orin_node *nodes = realloc(g->nodes, cap * sizeof *nodes);
        if (!nodes)
            return orin_error_set("graph: out of memory");
        g->nodes = nodes;
        g->cap = cap;
    }
    void *copy = malloc(size);
    if (!copy)
        return orin_error_set("graph: out of memory");
    memcpy(copy, args, size);

    orin_node *node = &g->nodes[g->count++];
    node->impl = impl;
    node->args = copy;
    snprintf(node->label, sizeof node->label, "%s", label ? label : "");
    node->bytes = bytes;
    if (impl->workspace_size) {
        size_t need = impl->workspace_size(copy);
        if (need > g->workspace)
            g->workspace = need;
    }
    return 0;
}

size_t orin_graph_node_count(const orin_graph *g)
{
    return g->count;
}

size_t orin_graph_workspace_size(const orin_graph *g)
{
    return g->workspace;
}

/* The node's label without a "layer N " or "block N " prefix (any lower-case
 * word and a number): "qkv_proj". */
static const char *label_kind(const char *label)
{
    int skip = 0;
    if (sscanf(label, "%*[a-z] %*d %n", &skip) == 0 && skip > 0)
        label += skip;
    return label;
}

/* A measuring aid, never for results: ORIN_BENCH_SKIP="attention,rope_kv_write"
 * leaves the nodes of those kinds out of orin_graph_run (and so out of a
 * captured decode graph), so that a benchmark prices each kind of op inside the
 * replayed step by difference (bench/decode_breakdown.sh). The outputs are then
 * wrong. `list` is the variable's value, read once a run. */
static bool skipped_for_bench(const orin_node *node, const char *list)
{
    const char *kind = label_kind(node->label);
    size_t len = strlen(kind);
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        if (n == len && strncmp(p, kind, n) == 0)
            return true;
        p += n + (p[n] == ',');
    }
    return false;
}

int orin_graph_run(const orin_graph *g, const orin_exec *ex)
{
    const char *skip = getenv("ORIN_BENCH_SKIP");
    for (size_t i = 0; i < g->count; i++) {
        const orin_node *node = &g->nodes[i];
        if (skip && *skip && skipped_for_bench(node, skip))
            continue;
        if (node->impl->run(ex, node->args) != 0)
            return orin_error_prefix("%s %s (%s): ", node->label, node->impl->op,
                                     node->impl->provider);
    }
    return 0;
}

bool orin_graph_replayable(const orin_graph *g, char *first, size_t cap)
{
    for (size_t i = 0; i < g->count; i++) {
        const orin_node *node = &g->nodes[i];
        if (!(node->impl->flags & ORIN_OP_GRAPH_SAFE)) {
            snprintf(first, cap, "%s (%s, %s)", node->label, node->impl->op, node->impl->provider);
            return false;
        }
    }
    return true;
}

/* ---- profiles ---- */

/* One node kind: "q_proj (matmul, common)". */
typedef struct profile_row {
    char kind[96];
    double seconds;      /* summed over runs */
    double bytes;        /* summed over runs */
    long calls;
} profile_row;

struct orin_profile {
    orin_device *dev;
    void **marks;        /* device marks, one more than the longest graph's nodes */
    size_t n_marks;
    profile_row *rows;
    size_t n_rows, cap_rows;
    long runs;
};

orin_profile *orin_profile_create(orin_device *dev)
{
    orin_profile *p = calloc(1, sizeof *p);
    if (!p)
        orin_error_set("profile: out of memory");
    else
        p->dev = dev;
    return p;
}

void orin_profile_free(orin_profile *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_marks; i++)
        p->dev->ops->mark_destroy(p->dev, p->marks[i]);
    free(p->marks);
    free(p->rows);
    free(p);
}

long orin_profile_runs(const orin_profile *p)
{
    return p ? p->runs : 0;
}

/* The node's kind: label_kind, and its op and provider. */
static void node_kind(const orin_node *node, char *out, size_t cap)
{
    snprintf(out, cap, "%s (%s, %s)", label_kind(node->label), node->impl->op,
             node->impl->provider);
}

static profile_row *profile_row_of(orin_profile *p, const char *kind)
{
    for (size_t i = 0; i < p->n_rows; i++)
        if (strcmp(p->rows[i].kind, kind) == 0)
            return &p->rows[i];
    if (p->n_rows == p->cap_rows) {
        size_t cap = p->cap_rows ? 2 * p->cap_rows : 32;
        profile_row *rows = realloc(p->rows, cap * sizeof *rows);
        if (!rows)
            return NULL;
        p->rows = rows;
        p->cap_rows = cap;
    }
    profile_row *r = &p->rows[p->n_rows++];
    memset(r, 0, sizeof *r);
    snprintf(r->kind, sizeof r->kind, "%s", kind);
    return r;
}

static int reserve_marks(orin_profile *p, size_t n)
{
    if (n <= p->n_marks)
        return 0;
    void **marks = realloc(p->marks, n * sizeof *marks);
    if (!marks)
        return orin_error_set("profile: out of memory");
    p->marks = marks;
    for (; p->n_marks < n; p->n_marks++)
        if (!(marks[p->n_marks] = p->dev->ops->mark_create(p->dev)))
            return -1;
    return 0;
}

/* Seconds of node i: on the wall clock (host), or between marks i and i + 1. */
static int run_timed(const orin_graph *g, const orin_exec *ex, orin_profile *p, double *secs)
{
    const orin_device_ops *ops = p->dev->ops;
    bool marks = ops->mark_create != NULL;
    if (marks && (reserve_marks(p, g->count + 1) != 0 ||
                  ops->mark_record(p->dev, p->marks[0]) != 0))
        return -1;
    for (size_t i = 0; i < g->count; i++) {
        const orin_node *node = &g->nodes[i];
        double t0 = marks ? 0 : orin_seconds();
        if (node->impl->run(ex, node->args) != 0)
            return orin_error_prefix("%s %s (%s): ", node->label, node->impl->op,
                                     node->impl->provider);
        if (marks && ops->mark_record(p->dev, p->marks[i + 1]) != 0)
            return -1;
        if (!marks)
            secs[i] = orin_seconds() - t0;
    }
    for (size_t i = 0; marks && i < g->count; i++)
        if (ops->mark_elapsed(p->dev, p->marks[i], p->marks[i + 1], &secs[i]) != 0)
            return -1;
    return 0;
}

int orin_graph_run_profiled(const orin_graph *g, const orin_exec *ex, orin_profile *p,
                            int32_t kv_len)
{
    double *secs = calloc(g->count ? g->count : 1, sizeof *secs);
    if (!secs)
        return orin_error_set("profile: out of memory");
    int rc = run_timed(g, ex, p, secs);
    for (size_t i = 0; rc == 0 && i < g->count; i++) {
        const orin_node *node = &g->nodes[i];
        char kind[96];
        node_kind(node, kind, sizeof kind);
        profile_row *r = profile_row_of(p, kind);
        if (!r) {
            rc = orin_error_set("profile: out of memory");
            break;
        }
        r->seconds += secs[i];
        r->bytes += node->bytes.fixed + node->bytes.per_position * kv_len;
        r->calls++;
    }
    if (rc == 0)
        p->runs++;
    free(secs);
    return rc;
}

static int by_time_desc(const void *a, const void *b)
{
    double x = ((const profile_row *)a)->seconds, y = ((const profile_row *)b)->seconds;
    return (x < y) - (x > y);
}

void orin_profile_print(const orin_profile *p, FILE *out, double bandwidth_gbs)
{
    if (!p->runs) {
        fprintf(out, "profile: nothing was run\n");
        return;
    }
    profile_row *rows = malloc((p->n_rows ? p->n_rows : 1) * sizeof *rows);
    if (!rows)
        return;
    memcpy(rows, p->rows, p->n_rows * sizeof *rows);
    qsort(rows, p->n_rows, sizeof *rows, by_time_desc);
    double total_s = 0, total_b = 0, total_calls = 0;
    for (size_t i = 0; i < p->n_rows; i++) {
        total_s += rows[i].seconds;
        total_b += rows[i].bytes;
        total_calls += (double)rows[i].calls;
    }
    const double runs = (double)p->runs;
    fprintf(out, "profile: %ld runs on %s, per run (timed %s)%s\n", p->runs, p->dev->name,
            p->dev->ops->mark_create ? "between device events" : "on the wall clock",
            bandwidth_gbs > 0 ? "" : "; no bandwidth known");
    fprintf(out, "%-52s %6s %10s %6s %10s %8s %7s\n", "op (kind, provider)", "calls", "us", "time",
            "MB", "GB/s", "of bw");
    for (size_t i = 0; i <= p->n_rows; i++) {
        bool total = i == p->n_rows;
        const char *kind = total ? "total" : rows[i].kind;
        double s = (total ? total_s : rows[i].seconds) / runs;
        double b = (total ? total_b : rows[i].bytes) / runs;
        double gbs = s > 0 ? b / s / 1e9 : 0;
        fprintf(out, "%-52.52s %6.0f %10.1f %5.1f%% %10.3f %8.1f", kind,
                (total ? total_calls : (double)rows[i].calls) / runs, s * 1e6,
                total_s > 0 ? 100.0 * s * runs / total_s : 0, b / 1e6, gbs);
        if (bandwidth_gbs > 0)
            fprintf(out, " %6.1f%%", 100.0 * gbs / bandwidth_gbs);
        fputc('\n', out);
    }
    free(rows);
}
