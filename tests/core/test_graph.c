/* The graph executor (orin/graph.h): nodes run in order with their own copy of
 * the call; the workspace is the largest a node asks; a failing node's error
 * names its label, op and provider; ORIN_BENCH_SKIP leaves the listed kinds
 * ("layer N " and "block N " stripped) out of a run. */
#define _POSIX_C_SOURCE 200809L
#include "test_util.h"
#include "orin/error.h"
#include "orin/graph.h"

#include <stdlib.h>
#include <string.h>

typedef struct trace_args {
    char *log; /* the node appends its tag */
    char tag;
    size_t workspace;
    bool fail;
} trace_args;

static int trace_run(const orin_exec *ex, const void *args)
{
    (void)ex;
    const trace_args *a = args;
    if (a->fail)
        return orin_error_set("failed on purpose");
    size_t n = strlen(a->log);
    a->log[n] = a->tag;
    a->log[n + 1] = '\0';
    return 0;
}

static size_t trace_workspace(const void *args)
{
    return ((const trace_args *)args)->workspace;
}

static const orin_op_impl trace = {
    .op = "test.trace", .provider = "test", .device = ORIN_DEVICE_CPU, .dtype = ORIN_F32,
    .run = trace_run, .workspace_size = trace_workspace,
};

static void add(orin_graph *g, char *log, char tag, size_t ws, const char *label)
{
    trace_args a = {.log = log, .tag = tag, .workspace = ws};
    CHECK(orin_graph_add(g, &trace, &a, sizeof a, label, (orin_node_bytes){0}) == 0, "add %s",
          label);
}

int main(void)
{
    char log[16] = "";
    orin_graph *g = orin_graph_create();
    add(g, log, 'a', 100, "layer 0 attention");
    add(g, log, 'b', 4000, "layer 0 qkv_proj");
    add(g, log, 'c', 0, "block 12 attention");
    add(g, log, 'd', 20, "lm_head");
    CHECK(orin_graph_node_count(g) == 4, "4 nodes");
    CHECK(orin_graph_workspace_size(g) == 4000, "the workspace is the largest node's");
    const orin_exec ex = {0};

    unsetenv("ORIN_BENCH_SKIP");
    CHECK(orin_graph_run(g, &ex) == 0 && strcmp(log, "abcd") == 0, "in order: %s", log);

    log[0] = '\0';
    setenv("ORIN_BENCH_SKIP", "attention", 1);
    CHECK(orin_graph_run(g, &ex) == 0 && strcmp(log, "bd") == 0,
          "attention left out of every layer and block: %s", log);
    log[0] = '\0';
    setenv("ORIN_BENCH_SKIP", "lm_head,qkv_proj", 1);
    CHECK(orin_graph_run(g, &ex) == 0 && strcmp(log, "ac") == 0, "two kinds left out: %s",
          log);
    log[0] = '\0';
    setenv("ORIN_BENCH_SKIP", "qkv,attention_x", 1);
    CHECK(orin_graph_run(g, &ex) == 0 && strcmp(log, "abcd") == 0,
          "only whole kinds match: %s", log);
    unsetenv("ORIN_BENCH_SKIP");

    trace_args bad = {.log = log, .tag = 'x', .fail = true};
    CHECK(orin_graph_add(g, &trace, &bad, sizeof bad, "layer 3 down_proj",
                         (orin_node_bytes){0}) == 0,
          "add a failing node");
    orin_error_clear();
    CHECK(orin_graph_run(g, &ex) != 0, "a failing node fails the run");
    CHECK(strstr(orin_error(), "layer 3 down_proj test.trace (test)") &&
              strstr(orin_error(), "failed on purpose"),
          "the error names the node: %s", orin_error());
    orin_graph_free(g);
    return test_finish();
}
