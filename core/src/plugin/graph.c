/* The graph executor (see orin/graph.h). */
#include "orin/graph.h"
#include "orin/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct orin_node {
    const orin_op_impl *impl;
    void *args;          /* owned copy of the call struct */
    char label[48];
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
                   const char *label)
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

int orin_graph_run(const orin_graph *g, const orin_exec *ex)
{
    for (size_t i = 0; i < g->count; i++) {
        const orin_node *node = &g->nodes[i];
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
